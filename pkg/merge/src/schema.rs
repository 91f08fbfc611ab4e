//! The type model: what strategic merge patch and server-side apply need to know about each
//! field of an object.
//!
//! A [`Schema`] is built from OpenAPI v3 component schemas with their `x-kubernetes-*`
//! extensions ([`Schema::from_openapi_v3`]): the documents genplane serves for built-in types,
//! and later the structural schemas of CustomResourceDefinitions. Each named component becomes a
//! [`Type`]; properties refer to named types with [`TypeRef::Named`] or carry their own shape.
//!
//! What is read, per property or schema:
//! - `type`, `properties`, `additionalProperties`, `items`, `$ref` (also wrapped in a
//!   one-element `allOf`, as property descriptions force it in OpenAPI 3);
//! - `x-kubernetes-list-type` (`atomic`, `set`, `map`) and `x-kubernetes-list-map-keys`;
//! - `x-kubernetes-map-type` (`atomic`, `granular`) on maps and structs;
//! - `x-kubernetes-patch-strategy` (comma-separated: `merge`, `retainKeys`, `replace`) and
//!   `x-kubernetes-patch-merge-key` on properties;
//! - `x-kubernetes-int-or-string`, `x-kubernetes-preserve-unknown-fields` and the absence of a
//!   type, which make a value [`Type::Untyped`] (anything goes, merged as JSON).
//!
//! Upstream's defaults apply where nothing is said: a list is atomic, a map or struct granular.

use std::collections::BTreeMap;

use serde_json::Value;

/// The prefix of component references in OpenAPI v3 documents.
const COMPONENT_REF: &str = "#/components/schemas/";

/// Why component schemas do not make a [`Schema`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The document has no `components.schemas` object.
    #[error("no components.schemas in the document")]
    NoComponents,
    /// A `$ref` points outside the components.
    #[error("{at}: unsupported reference {}", genplane_apimachinery::gofmt::Quoted(.reference))]
    BadReference {
        /// Where the reference is.
        at: String,
        /// The reference.
        reference: String,
    },
    /// An extension has a value it cannot have.
    #[error("{at}: {message}")]
    BadExtension {
        /// Where the extension is.
        at: String,
        /// What is wrong.
        message: String,
    },
}

/// A reference to a type: a named component, or a shape given in place.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeRef {
    /// A component schema by name, e.g. `io.k8s.api.core.v1.ConfigMap`.
    Named(String),
    /// A shape given where it is used.
    Inline(Box<Type>),
}

/// The shape of a value.
#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    /// A string, number, integer or boolean.
    Scalar,
    /// Any JSON value (int-or-string, preserved unknown fields, no declared type): merged and
    /// owned as a whole unless it is an object, whose keys then merge as a granular map.
    Untyped,
    /// An object with declared properties.
    Struct(Struct),
    /// An object with arbitrary keys, all values of one type.
    Map(MapOf),
    /// A list.
    List(ListOf),
}

/// `x-kubernetes-map-type` (also on structs): whether a map is owned key by key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MapType {
    /// Each key separately (the default).
    #[default]
    Granular,
    /// The whole map is one value.
    Atomic,
}

/// `x-kubernetes-list-type`: how a list is merged and owned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ListType {
    /// The list is one value (the default).
    #[default]
    Atomic,
    /// Distinct scalars, merged by value.
    Set,
    /// Objects identified by the values of these keys (`x-kubernetes-list-map-keys`).
    Map(Vec<String>),
}

/// An object type with declared properties.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Struct {
    /// The properties by JSON name.
    pub fields: BTreeMap<String, Field>,
    /// Whether the object is owned as a whole.
    pub map_type: MapType,
    /// Whether undeclared properties are kept (`x-kubernetes-preserve-unknown-fields`).
    pub preserve_unknown_fields: bool,
}

/// A property of a [`Struct`].
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// Its type.
    pub ty: TypeRef,
    /// `x-kubernetes-patch-strategy`, split at commas (`merge`, `retainKeys`, `replace`).
    pub patch_strategy: Vec<String>,
    /// `x-kubernetes-patch-merge-key`.
    pub patch_merge_key: Option<String>,
}

impl Field {
    /// Whether the strategic merge of this field merges (rather than replaces) a list.
    pub fn merges(&self) -> bool {
        self.patch_strategy.iter().any(|s| s == "merge")
    }

    /// Whether a strategic merge of this field clears the keys the patch does not name.
    pub fn retains_keys(&self) -> bool {
        self.patch_strategy.iter().any(|s| s == "retainKeys")
    }
}

/// An object with arbitrary keys.
#[derive(Clone, Debug, PartialEq)]
pub struct MapOf {
    /// The type of every value.
    pub values: TypeRef,
    /// Whether the map is owned as a whole.
    pub map_type: MapType,
}

/// A list.
#[derive(Clone, Debug, PartialEq)]
pub struct ListOf {
    /// The type of every item.
    pub items: TypeRef,
    /// How the list is merged and owned.
    pub list_type: ListType,
}

/// Named types, from component schemas.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Schema {
    types: BTreeMap<String, Type>,
    kinds: BTreeMap<(String, String, String), String>,
    /// Whether objects of these types are unstructured (custom resources).
    unstructured: bool,
}

static SCALAR: Type = Type::Scalar;
static UNTYPED: Type = Type::Untyped;

impl Schema {
    /// The types of an OpenAPI v3 document's `components.schemas`. Can be called for several
    /// documents in turn ([`Schema::add_openapi_v3`]); a name seen twice keeps its first shape.
    pub fn from_openapi_v3(document: &Value) -> Result<Self, SchemaError> {
        let mut schema = Self::default();
        schema.add_openapi_v3(document)?;
        Ok(schema)
    }

    /// Adds the types of another OpenAPI v3 document.
    pub fn add_openapi_v3(&mut self, document: &Value) -> Result<(), SchemaError> {
        let components = document
            .pointer("/components/schemas")
            .and_then(Value::as_object)
            .ok_or(SchemaError::NoComponents)?;
        for (name, component) in components {
            if self.types.contains_key(name) {
                continue;
            }
            let ty = shape(component, name)?;
            for gvk in component
                .get("x-kubernetes-group-version-kind")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let text = |k: &str| gvk.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                self.kinds
                    .entry((text("group"), text("version"), text("kind")))
                    .or_insert_with(|| name.clone());
            }
            self.types.insert(name.clone(), ty);
        }
        Ok(())
    }

    /// Adds (or replaces) one named type.
    pub fn insert(&mut self, name: impl Into<String>, ty: Type) {
        self.types.insert(name.into(), ty);
    }

    /// The named type of a group, version and kind (from `x-kubernetes-group-version-kind`).
    pub fn kind(&self, group: &str, version: &str, kind: &str) -> Option<TypeRef> {
        self.kinds
            .get(&(group.to_owned(), version.to_owned(), kind.to_owned()))
            .map(|name| TypeRef::Named(name.clone()))
    }

    /// The type a reference stands for. An unknown name is [`Type::Untyped`], so that merging
    /// degrades to plain JSON rather than failing.
    pub fn resolve<'a>(&'a self, ty: &'a TypeRef) -> &'a Type {
        match ty {
            TypeRef::Named(name) => self.types.get(name).unwrap_or(&UNTYPED),
            TypeRef::Inline(ty) => ty,
        }
    }

    /// The named type `name`, if known.
    pub fn get(&self, name: &str) -> Option<&Type> {
        self.types.get(name)
    }

    /// Marks the objects of these types as unstructured (custom resources, which upstream
    /// compares as plain JSON): a struct-typed field that appears in a write is then added like
    /// any other value, and owned by the writer. Built-in objects are typed: their struct-typed
    /// fields always exist (possibly empty), so appearing is no addition.
    pub fn set_unstructured(&mut self, unstructured: bool) {
        self.unstructured = unstructured;
    }

    /// Whether the objects of these types are unstructured ([`Schema::set_unstructured`]).
    pub fn is_unstructured(&self) -> bool {
        self.unstructured
    }

    /// A scalar, for callers that need a `&Type` of one.
    pub fn scalar() -> &'static Type {
        &SCALAR
    }
}

/// The target of a `$ref`, also inside a one-element `allOf`.
fn reference<'a>(schema: &'a Value, at: &str) -> Result<Option<&'a str>, SchemaError> {
    let direct = schema.get("$ref").and_then(Value::as_str);
    let wrapped = schema
        .get("allOf")
        .and_then(Value::as_array)
        .filter(|all| all.len() == 1)
        .and_then(|all| all[0].get("$ref"))
        .and_then(Value::as_str);
    match direct.or(wrapped) {
        None => Ok(None),
        Some(r) => {
            r.strip_prefix(COMPONENT_REF)
                .map(Some)
                .ok_or_else(|| SchemaError::BadReference {
                    at: at.to_owned(),
                    reference: r.to_owned(),
                })
        }
    }
}

fn type_ref(schema: &Value, at: &str) -> Result<TypeRef, SchemaError> {
    match reference(schema, at)? {
        Some(name) => Ok(TypeRef::Named(name.to_owned())),
        None => Ok(TypeRef::Inline(Box::new(shape(schema, at)?))),
    }
}

fn map_type(schema: &Value, at: &str) -> Result<MapType, SchemaError> {
    match schema.get("x-kubernetes-map-type").and_then(Value::as_str) {
        None | Some("granular") => Ok(MapType::Granular),
        Some("atomic") => Ok(MapType::Atomic),
        Some(other) => Err(SchemaError::BadExtension {
            at: at.to_owned(),
            message: format!(
                "x-kubernetes-map-type must be atomic or granular, not {}",
                genplane_apimachinery::gofmt::Quoted(other)
            ),
        }),
    }
}

/// The shape of a schema given in place.
fn shape(schema: &Value, at: &str) -> Result<Type, SchemaError> {
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        return Ok(Type::Untyped);
    }
    if reference(schema, at)?.is_some() {
        // A component that only aliases another: rare, and merged as plain JSON.
        return Ok(Type::Untyped);
    }
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    match schema.get("type").and_then(Value::as_str) {
        Some("string" | "integer" | "number" | "boolean") => Ok(Type::Scalar),
        Some("array") => {
            let items = match schema.get("items") {
                Some(items) => type_ref(items, &format!("{at}[]"))?,
                None => TypeRef::Inline(Box::new(Type::Untyped)),
            };
            let list_type = match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                None | Some("atomic") => ListType::Atomic,
                Some("set") => ListType::Set,
                Some("map") => {
                    let keys: Vec<String> = schema
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|k| k.as_str().map(str::to_owned))
                        .collect();
                    if keys.is_empty() {
                        return Err(SchemaError::BadExtension {
                            at: at.to_owned(),
                            message: "x-kubernetes-list-type map needs x-kubernetes-list-map-keys"
                                .to_owned(),
                        });
                    }
                    ListType::Map(keys)
                }
                Some(other) => {
                    return Err(SchemaError::BadExtension {
                        at: at.to_owned(),
                        message: format!(
                            "x-kubernetes-list-type must be atomic, set or map, not {}",
                            genplane_apimachinery::gofmt::Quoted(other)
                        ),
                    });
                }
            };
            Ok(Type::List(ListOf { items, list_type }))
        }
        Some("object") | None if schema.get("properties").is_some() => {
            let mut fields = BTreeMap::new();
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    let path = format!("{at}.{name}");
                    let patch_strategy = property
                        .get("x-kubernetes-patch-strategy")
                        .and_then(Value::as_str)
                        .map(|s| s.split(',').map(|p| p.trim().to_owned()).collect())
                        .unwrap_or_default();
                    let patch_merge_key = property
                        .get("x-kubernetes-patch-merge-key")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    fields.insert(
                        name.clone(),
                        Field {
                            ty: type_ref(property, &path)?,
                            patch_strategy,
                            patch_merge_key,
                        },
                    );
                }
            }
            Ok(Type::Struct(Struct {
                fields,
                map_type: map_type(schema, at)?,
                preserve_unknown_fields: preserve,
            }))
        }
        Some("object") => match schema.get("additionalProperties") {
            Some(values) if values.is_object() => Ok(Type::Map(MapOf {
                values: type_ref(values, &format!("{at}{{}}"))?,
                map_type: map_type(schema, at)?,
            })),
            _ => Ok(Type::Untyped),
        },
        _ => Ok(Type::Untyped),
    }
}
