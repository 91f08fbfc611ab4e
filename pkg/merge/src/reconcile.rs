//! Managed fields after a schema change: a set of owned fields recorded under one schema,
//! brought in line with another (upstream's `ReconcileFieldSetWithSchema`), as happens when a
//! CustomResourceDefinition's schema makes a list or map atomic, or granular again.
//!
//! The set is walked along the new schema:
//! - a list, map or struct that is now atomic, but is owned through its items or keys, is owned
//!   as a whole instead: the paths below it are dropped and the node itself becomes a member;
//! - a list (set or map list), map or struct that is now granular, but is owned as a whole (a
//!   member with nothing below it), is owned through what the live object has there: the
//!   node's field set in the live object is added below it.
//!
//! Everything else is left as it is. A set that names a field the new schema does not declare
//! (in a struct that keeps no unknown fields) cannot be reconciled.

use serde_json::Value;

use crate::fieldpath::{Path, PathElement, Set};
use crate::schema::{ListType, MapType, Schema, Type, TypeRef};
use crate::typed::{TypeError, field_set};

/// Reconciles `fields` (a manager's owned fields) with the type `ty` of `schema`, given the live
/// object `live` (without its managed fields). Returns the reconciled set, or `None` when
/// nothing changes. An object whose whole type is untyped is never reconciled (upstream leaves
/// deduced types alone).
pub fn reconcile_fields(
    schema: &Schema,
    ty: &TypeRef,
    fields: &Set,
    live: &Value,
) -> Result<Option<Set>, TypeError> {
    let root = schema.resolve(ty);
    if matches!(root, Type::Untyped) {
        return Ok(None);
    }
    let mut walker = Walker {
        schema,
        ty,
        live,
        live_fields: None,
        remove: Set::new(),
        add: Set::new(),
    };
    walker.walk(root, Some(fields), &Path::default(), false)?;
    if walker.remove.is_empty() && walker.add.is_empty() {
        return Ok(None);
    }
    let out = fields
        .recursive_difference(&walker.remove)
        .union(&walker.add);
    Ok((out != *fields).then_some(out))
}

struct Walker<'a> {
    schema: &'a Schema,
    ty: &'a TypeRef,
    live: &'a Value,
    /// The field set of the live object, computed when first needed.
    live_fields: Option<Set>,
    /// Paths to drop, with everything below them.
    remove: Set,
    /// Paths to add after the removals.
    add: Set,
}

impl Walker<'_> {
    /// `set` is the part of the set below `path` (`None`: nothing below it); `atomic` says
    /// whether `path` is owned as a whole (a member with nothing below it).
    fn walk(
        &mut self,
        ty: &Type,
        set: Option<&Set>,
        path: &Path,
        atomic: bool,
    ) -> Result<(), TypeError> {
        match ty {
            Type::Scalar => Ok(()),
            Type::List(list) => {
                if !atomic && list.list_type == ListType::Atomic {
                    self.collapse(path);
                    return Ok(());
                }
                if atomic && list.list_type != ListType::Atomic {
                    self.expand(path)?;
                }
                let items = self.schema.resolve(&list.items);
                self.visit(set, path, |_| Ok(items))
            }
            Type::Struct(s) => {
                if s.map_type == MapType::Atomic {
                    if !atomic && set.is_some_and(|s| !s.is_empty()) {
                        self.collapse(path);
                    }
                    return Ok(());
                }
                if atomic {
                    self.expand(path)?;
                }
                let schema = self.schema;
                self.visit(set, path, |element| match element {
                    PathElement::Field(name) => match s.fields.get(name) {
                        Some(field) => Ok(schema.resolve(&field.ty)),
                        None if s.preserve_unknown_fields => Ok(&Type::Untyped),
                        None => Err(undeclared(path, element)),
                    },
                    _ => Err(undeclared(path, element)),
                })
            }
            Type::Map(m) => {
                if m.map_type == MapType::Atomic {
                    if !atomic && set.is_some_and(|s| !s.is_empty()) {
                        self.collapse(path);
                    }
                    return Ok(());
                }
                if atomic {
                    self.expand(path)?;
                }
                let values = self.schema.resolve(&m.values);
                self.visit(set, path, |_| Ok(values))
            }
            Type::Untyped => {
                // Untyped values are granular maps of untyped values when they are objects.
                if atomic {
                    self.expand(path)?;
                }
                self.visit(set, path, |_| Ok(&Type::Untyped))
            }
        }
    }

    /// Walks the elements below `path`: those with members below them, and the members.
    fn visit<'t>(
        &mut self,
        set: Option<&Set>,
        path: &Path,
        type_of: impl Fn(&PathElement) -> Result<&'t Type, TypeError>,
    ) -> Result<(), TypeError> {
        let Some(set) = set else {
            return Ok(());
        };
        let only_members = set.members().filter(|m| set.child(m).is_none());
        let elements: Vec<&PathElement> =
            set.children().map(|(e, _)| e).chain(only_members).collect();
        for element in elements {
            let below = set.child(element);
            let atomic = below.is_none() && set.members().any(|m| m == element);
            let ty = type_of(element)?;
            self.walk(ty, below, &path.child(element.clone()), atomic)?;
        }
        Ok(())
    }

    /// Owns `path` as a whole: drops what is below it and makes it a member.
    fn collapse(&mut self, path: &Path) {
        self.remove.insert(path);
        self.add.insert(path);
    }

    /// Owns `path` through what the live object has there.
    fn expand(&mut self, path: &Path) -> Result<(), TypeError> {
        if self.live_fields.is_none() {
            self.live_fields = Some(field_set(self.schema, self.ty, self.live)?);
        }
        let live = self
            .live_fields
            .as_ref()
            .expect("invariant: the live field set was just computed");
        self.add.insert(path);
        for below in live.below(path).paths() {
            let mut full = path.clone();
            full.0.extend(below.0);
            self.add.insert(&full);
        }
        Ok(())
    }
}

fn undeclared(path: &Path, element: &PathElement) -> TypeError {
    TypeError {
        path: path.child(element.clone()).to_string(),
        message: "field not declared in schema".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::{Field, ListOf, MapOf, Struct};

    fn field(ty: Type) -> Field {
        Field {
            ty: TypeRef::Inline(Box::new(ty)),
            patch_strategy: Vec::new(),
            patch_merge_key: None,
        }
    }

    fn strukt(fields: &[(&str, Type)], map_type: MapType) -> Type {
        Type::Struct(Struct {
            fields: fields
                .iter()
                .map(|(n, t)| ((*n).to_owned(), field(t.clone())))
                .collect(),
            map_type,
            preserve_unknown_fields: false,
        })
    }

    fn list(list_type: ListType, items: Type) -> Type {
        Type::List(ListOf {
            items: TypeRef::Inline(Box::new(items)),
            list_type,
        })
    }

    /// The widget type, its containers granular (`atomic` false) or atomic.
    fn widget(atomic: bool) -> (Schema, TypeRef) {
        let (map_type, set, keyed) = if atomic {
            (MapType::Atomic, ListType::Atomic, ListType::Atomic)
        } else {
            (
                MapType::Granular,
                ListType::Set,
                ListType::Map(vec!["a".into(), "b".into()]),
            )
        };
        let item = strukt(
            &[
                ("a", Type::Scalar),
                ("b", Type::Scalar),
                ("value", Type::Scalar),
            ],
            MapType::Granular,
        );
        let root = strukt(
            &[
                (
                    "shape",
                    strukt(
                        &[("size", Type::Scalar), ("colour", Type::Scalar)],
                        map_type,
                    ),
                ),
                ("tags", list(set, Type::Scalar)),
                ("parts", list(keyed, item)),
                (
                    "labels",
                    Type::Map(MapOf {
                        values: TypeRef::Inline(Box::new(Type::Scalar)),
                        map_type,
                    }),
                ),
                (
                    "fixed",
                    strukt(&[("count", Type::Scalar)], MapType::Granular),
                ),
                ("extra", Type::Untyped),
            ],
            MapType::Granular,
        );
        let mut schema = Schema::default();
        schema.insert("Widget", root);
        (schema, TypeRef::Named("Widget".into()))
    }

    fn live() -> Value {
        json!({
            "shape": {"size": 1, "colour": "red"},
            "tags": ["x", "y"],
            "parts": [{"a": "1", "b": "2", "value": "v"}, {"a": "3", "b": "4", "value": "w"}],
            "labels": {"l": "1"},
            "fixed": {"count": 10},
        })
    }

    fn f(name: &str) -> PathElement {
        PathElement::Field(name.to_owned())
    }

    fn p(elements: &[PathElement]) -> Path {
        Path(elements.to_vec())
    }

    fn part(a: &str, b: &str) -> PathElement {
        PathElement::key(vec![("a".into(), json!(a)), ("b".into(), json!(b))])
    }

    fn granular_owner() -> Set {
        Set::from_paths(&[
            p(&[f("shape"), f("size")]),
            p(&[f("tags"), PathElement::Value(json!("x"))]),
            p(&[f("labels"), f("l")]),
            p(&[f("parts"), part("1", "2"), f("value")]),
            p(&[f("fixed"), f("count")]),
        ])
    }

    #[test]
    fn granular_to_atomic_collapses_to_the_parent() {
        let (schema, ty) = widget(true);
        let fixed = reconcile_fields(&schema, &ty, &granular_owner(), &live())
            .unwrap()
            .unwrap();
        assert_eq!(
            fixed,
            Set::from_paths(&[
                p(&[f("shape")]),
                p(&[f("tags")]),
                p(&[f("labels")]),
                p(&[f("parts")]),
                p(&[f("fixed"), f("count")]),
            ])
        );
    }

    #[test]
    fn sets_that_fit_are_left_alone() {
        let (granular, ty) = widget(false);
        assert_eq!(
            reconcile_fields(&granular, &ty, &granular_owner(), &live()).unwrap(),
            None
        );
        let (atomic, _) = widget(true);
        let whole = Set::from_paths(&[
            p(&[f("shape")]),
            p(&[f("tags")]),
            p(&[f("parts")]),
            p(&[f("fixed"), f("count")]),
        ]);
        assert_eq!(
            reconcile_fields(&atomic, &ty, &whole, &live()).unwrap(),
            None
        );
        // Empty containers owned as members, and a keyed item owned with and without fields.
        let empty = json!({"shape": {}, "tags": [], "parts": [{"a": "1", "b": "2"}], "fixed": {}});
        let owned = Set::from_paths(&[
            p(&[f("shape")]),
            p(&[f("tags")]),
            p(&[f("parts"), part("1", "2")]),
            p(&[f("parts"), part("1", "2"), f("value")]),
            p(&[f("fixed")]),
        ]);
        assert_eq!(
            reconcile_fields(&granular, &ty, &owned, &empty).unwrap(),
            None
        );
    }

    #[test]
    fn atomic_to_granular_owns_what_the_live_object_has() {
        let (granular, ty) = widget(false);
        let whole = Set::from_paths(&[
            p(&[f("shape")]),
            p(&[f("tags")]),
            p(&[f("parts")]),
            p(&[f("labels")]),
        ]);
        let fixed = reconcile_fields(&granular, &ty, &whole, &live())
            .unwrap()
            .unwrap();
        let mut expected = whole.clone();
        for path in [
            p(&[f("shape"), f("size")]),
            p(&[f("shape"), f("colour")]),
            p(&[f("tags"), PathElement::Value(json!("x"))]),
            p(&[f("tags"), PathElement::Value(json!("y"))]),
            p(&[f("labels"), f("l")]),
        ] {
            expected.insert(&path);
        }
        for (a, b) in [("1", "2"), ("3", "4")] {
            expected.insert(&p(&[f("parts"), part(a, b)]));
            for name in ["a", "b", "value"] {
                expected.insert(&p(&[f("parts"), part(a, b), f(name)]));
            }
        }
        assert_eq!(fixed, expected);
    }

    #[test]
    fn nested_and_untyped_values() {
        // Under an untyped value nothing is atomic: owned keys stay as they are.
        let (granular, ty) = widget(false);
        let object = json!({"extra": {"k": {"n": 1}}});
        let owned = Set::from_paths(&[p(&[f("extra"), f("k"), f("n")])]);
        assert_eq!(
            reconcile_fields(&granular, &ty, &owned, &object).unwrap(),
            None
        );
        // An object whose whole type is untyped is never reconciled.
        let untyped = TypeRef::Inline(Box::new(Type::Untyped));
        assert_eq!(
            reconcile_fields(&granular, &untyped, &granular_owner(), &live()).unwrap(),
            None
        );
        // A keyed list whose items hold a list made atomic: collapsed inside the item.
        let inner = strukt(
            &[
                ("name", Type::Scalar),
                ("ports", list(ListType::Atomic, Type::Scalar)),
            ],
            MapType::Granular,
        );
        let mut schema = Schema::default();
        schema.insert(
            "Pod",
            strukt(
                &[(
                    "containers",
                    list(ListType::Map(vec!["name".into()]), inner),
                )],
                MapType::Granular,
            ),
        );
        let pod = TypeRef::Named("Pod".into());
        let c = PathElement::key(vec![("name".into(), json!("c"))]);
        let owned = Set::from_paths(&[
            p(&[f("containers"), c.clone()]),
            p(&[
                f("containers"),
                c.clone(),
                f("ports"),
                PathElement::Value(json!(80)),
            ]),
        ]);
        let object = json!({"containers": [{"name": "c", "ports": [80]}]});
        assert_eq!(
            reconcile_fields(&schema, &pod, &owned, &object).unwrap(),
            Some(Set::from_paths(&[
                p(&[f("containers"), c.clone()]),
                p(&[f("containers"), c, f("ports")]),
            ]))
        );
    }

    #[test]
    fn fields_the_schema_does_not_declare_are_errors() {
        let (granular, ty) = widget(false);
        let owned = Set::from_paths(&[p(&[f("gone"), f("x")])]);
        let error = reconcile_fields(&granular, &ty, &owned, &live()).unwrap_err();
        assert_eq!(error.path, ".gone");
        assert_eq!(error.message, "field not declared in schema");
    }
}
