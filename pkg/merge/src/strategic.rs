//! Strategic merge patch (`application/strategic-merge-patch+json`): a JSON merge patch whose
//! lists merge as the schema says.
//!
//! [`apply`] merges a patch into an object, guided by the [`Schema`]:
//!
//! - Objects merge key by key, recursively; a `null` removes a key. A field whose patch strategy
//!   is `replace` takes the patch's object as it is.
//! - A list whose field has the patch strategy `merge` merges: lists of objects by the field's
//!   `patchMergeKey` (an item of the patch merges into the item of the object with the same key
//!   value, or is added), lists of scalars by value (a union without repeats). Every other list
//!   is replaced by the patch's list.
//! - Merged lists keep an order: the items the patch names come in the patch's order, the others
//!   keep their place relative to them as far as the object's order allows.
//! - Fields the schema does not know merge as plain JSON: objects key by key, lists replaced.
//!
//! Directives, as upstream reads them on the server side:
//!
//! - `"$patch": "replace"` in an object: the object becomes the patch's object (without the
//!   directive); `"$patch": "delete"`: it becomes empty. Any other value is an error (also
//!   `merge`, which upstream rejects in a patch).
//! - In a merged list of objects, an item `{"$patch": "delete", <key>: <value>}` removes the
//!   items with that key value, and an item `{"$patch": "replace"}` makes the list exactly the
//!   patch's other items. `"$patch": "merge"` there is an error, as upstream.
//! - `"$deleteFromPrimitiveList/<field>": [values]` removes these values from a list of scalars.
//! - `"$setElementOrder/<field>": [items or {<key>: <value>}]` orders the merged list `<field>`:
//!   listed items first in that order, the object's other items interleaved where they were.
//! - `"$retainKeys": [names]` clears the object's keys that are not named (the patch may only
//!   set keys it names).
//!
//! Values the patch brings where the object has nothing (or a value of another JSON type) are
//! merged into an empty value, so that their directives and `null`s are resolved too rather
//! than stored.
//!
//! Errors name the place in the patch ([`StrategicError`]); the API server answers them with
//! 400 Bad Request, or 422 for [`StrategicError::is_unprocessable`] ones, as upstream does.

use serde_json::{Map, Value};

use crate::schema::{Field, Schema, Type, TypeRef};

/// The directive key of objects and list items.
const PATCH: &str = "$patch";
/// The key listing the keys an object keeps.
const RETAIN_KEYS: &str = "$retainKeys";
/// The prefix of the keys listing values to remove from a list of scalars.
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
/// The prefix of the keys giving the order of a merged list.
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// Why a strategic merge patch cannot be applied. `at` is the place in the patch, written as
/// upstream writes field paths (`metadata.ownerReferences[1]`); empty for the whole patch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StrategicError {
    /// The patch, or the object it applies to, is not a JSON object.
    #[error("a strategic merge patch and the object it applies to must be JSON objects")]
    NotAnObject,
    /// `$patch` has a value that is not allowed where it is.
    #[error(
        "{}: unknown patch type {value} (the directive $patch may be {allowed})",
        where_(at)
    )]
    BadPatchDirective {
        /// Where the directive is.
        at: String,
        /// Its value, as JSON.
        value: String,
        /// What it may be there.
        allowed: &'static str,
    },
    /// `"$patch": "merge"` as an item of a list: upstream does not support it.
    #[error("{}: merging lists cannot yet be specified in the patch", where_(at))]
    MergeDirectiveInList {
        /// Where the list is.
        at: String,
    },
    /// A key that starts with `$` and is no directive, where no data key can start with `$`.
    #[error("{}: unknown directive {key:?}", where_(at))]
    UnknownDirective {
        /// Where the key is.
        at: String,
        /// The key.
        key: String,
    },
    /// An item of a list merged by key lacks the key.
    #[error(
        "{}: the item does not contain the declared merge key {key:?}",
        where_(at)
    )]
    MissingMergeKey {
        /// Where the item is.
        at: String,
        /// The merge key.
        key: String,
    },
    /// A list of objects has the `merge` strategy but no merge key.
    #[error("{}: cannot merge a list of objects without a merge key", where_(at))]
    NoMergeKey {
        /// Where the list is.
        at: String,
    },
    /// A list in a merged list: not supported.
    #[error("{}: lists of lists are not supported", where_(at))]
    ListOfLists {
        /// Where the list is.
        at: String,
    },
    /// A merged list whose items are not all of one JSON type.
    #[error(
        "{}: the items of a merged list must all be objects or all scalars of one type",
        where_(at)
    )]
    MixedList {
        /// Where the list is.
        at: String,
    },
    /// A malformed `$retainKeys`, or a patch that sets keys it does not retain.
    #[error("{}: invalid patch format of retainKeys: {message}", where_(at))]
    BadRetainKeys {
        /// Where the directive is.
        at: String,
        /// What is wrong.
        message: String,
    },
    /// A malformed `$deleteFromPrimitiveList/<field>`.
    #[error("{}: invalid patch format of primitive list: {message}", where_(at))]
    BadDeleteFromPrimitiveList {
        /// Where the directive is.
        at: String,
        /// What is wrong.
        message: String,
    },
    /// A malformed `$setElementOrder/<field>`, or one the patch's list contradicts.
    #[error(
        "{}: invalid patch format of setElementOrder list: {message}",
        where_(at)
    )]
    BadSetElementOrder {
        /// Where the directive is.
        at: String,
        /// What is wrong.
        message: String,
    },
}

fn where_(at: &str) -> &str {
    if at.is_empty() { "the patch" } else { at }
}

impl StrategicError {
    /// Whether upstream answers this error with 422 Unprocessable Entity rather than 400.
    pub fn is_unprocessable(&self) -> bool {
        matches!(self, Self::ListOfLists { .. })
    }
}

/// Merges the strategic merge `patch` into `original`, an object of the type `ty`.
pub fn apply(
    original: &Value,
    patch: &Value,
    schema: &Schema,
    ty: &TypeRef,
) -> Result<Value, StrategicError> {
    let (Value::Object(original), Value::Object(patch)) = (original, patch) else {
        return Err(StrategicError::NotAnObject);
    };
    let merger = Merger { schema };
    let merged = merger.merge_map(original.clone(), patch, schema.resolve(ty), "")?;
    Ok(Value::Object(merged))
}

/// What the schema says of one field.
#[derive(Clone, Copy)]
struct Meta<'a> {
    ty: &'a Type,
    field: Option<&'a Field>,
}

impl Meta<'_> {
    fn merges(&self) -> bool {
        self.field.is_some_and(Field::merges)
    }

    fn replaces(&self) -> bool {
        self.field
            .is_some_and(|f| f.patch_strategy.iter().any(|s| s == "replace"))
    }

    fn merge_key(&self) -> Option<&str> {
        self.field.and_then(|f| f.patch_merge_key.as_deref())
    }
}

fn child_path(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_owned()
    } else {
        format!("{at}.{key}")
    }
}

/// Equality as upstream's decoded JSON has it: numbers by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// The JSON type of a list item, for the check that a merged list is homogeneous.
fn kind(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        Value::Array(_) => 4,
        Value::Object(_) => 5,
    }
}

struct Merger<'a> {
    schema: &'a Schema,
}

impl<'a> Merger<'a> {
    /// The field `key` of a value of type `ty`.
    fn meta(&self, ty: &'a Type, key: &str) -> Meta<'a> {
        match ty {
            Type::Struct(s) => match s.fields.get(key) {
                Some(field) => Meta {
                    ty: self.schema.resolve(&field.ty),
                    field: Some(field),
                },
                None => Meta {
                    ty: untyped(),
                    field: None,
                },
            },
            Type::Map(m) => Meta {
                ty: self.schema.resolve(&m.values),
                field: None,
            },
            _ => Meta {
                ty: untyped(),
                field: None,
            },
        }
    }

    /// The type of the items of a list of type `ty`.
    fn items(&self, ty: &'a Type) -> &'a Type {
        match ty {
            Type::List(l) => self.schema.resolve(&l.items),
            _ => untyped(),
        }
    }

    /// Whether `key`, starting with `$`, can only be a directive in a value of type `ty`.
    fn must_be_directive(ty: &Type, key: &str) -> bool {
        match ty {
            Type::Struct(s) => !s.fields.contains_key(key) && !s.preserve_unknown_fields,
            Type::Map(_) => true,
            _ => false,
        }
    }

    fn merge_map(
        &self,
        mut original: Map<String, Value>,
        patch: &Map<String, Value>,
        ty: &'a Type,
        at: &str,
    ) -> Result<Map<String, Value>, StrategicError> {
        if let Some(directive) = patch.get(PATCH) {
            return match directive.as_str() {
                Some("replace") => {
                    let mut rest = patch.clone();
                    rest.remove(PATCH);
                    self.merge_map(Map::new(), &rest, ty, at)
                }
                Some("delete") => Ok(Map::new()),
                _ => Err(StrategicError::BadPatchDirective {
                    at: child_path(at, PATCH),
                    value: directive.to_string(),
                    allowed: "replace or delete in an object",
                }),
            };
        }

        if let Some(retain) = patch.get(RETAIN_KEYS) {
            let bad = |message: String| StrategicError::BadRetainKeys {
                at: child_path(at, RETAIN_KEYS),
                message,
            };
            let Value::Array(retain) = retain else {
                return Err(bad(format!("{RETAIN_KEYS} must be a list, not {retain}")));
            };
            let retained = |key: &str| retain.iter().any(|r| r.as_str() == Some(key));
            for (key, value) in patch {
                if value.is_null()
                    || key == RETAIN_KEYS
                    || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
                    || key.starts_with(SET_ELEMENT_ORDER)
                {
                    continue;
                }
                if !retained(key) {
                    return Err(bad(format!(
                        "the patch sets {}, which {RETAIN_KEYS} does not list",
                        genplane_apimachinery::gofmt::Quoted(key)
                    )));
                }
            }
            original.retain(|key, _| retained(key));
        }

        // Lists with an order first, then every other key, then removals from scalar lists.
        let mut ordered: Vec<&str> = Vec::new();
        for (key, order) in patch {
            let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) else {
                continue;
            };
            self.set_element_order(&mut original, patch, field, order, ty, at)?;
            ordered.push(field);
        }

        let mut removals = Vec::new();
        for (key, value) in patch {
            if key == RETAIN_KEYS || key.starts_with(SET_ELEMENT_ORDER) {
                continue;
            }
            if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
                removals.push((field, value));
                continue;
            }
            if key.starts_with(DELETE_FROM_PRIMITIVE_LIST.trim_end_matches('/'))
                || key.starts_with(SET_ELEMENT_ORDER.trim_end_matches('/'))
            {
                let message = format!(
                    "{} lacks /<field>",
                    genplane_apimachinery::gofmt::Quoted(key)
                );
                let at = child_path(at, key);
                return Err(if key.starts_with("$delete") {
                    StrategicError::BadDeleteFromPrimitiveList { at, message }
                } else {
                    StrategicError::BadSetElementOrder { at, message }
                });
            }
            if ordered.contains(&key.as_str()) {
                continue;
            }
            if key.starts_with('$') && Self::must_be_directive(ty, key) {
                return Err(StrategicError::UnknownDirective {
                    at: at.to_owned(),
                    key: key.clone(),
                });
            }
            let path = child_path(at, key);
            if value.is_null() {
                original.remove(key);
                continue;
            }
            let meta = self.meta(ty, key);
            let merged = match (original.remove(key), value) {
                (Some(Value::Object(o)), Value::Object(p)) if !meta.replaces() => {
                    Value::Object(self.merge_map(o, p, meta.ty, &path)?)
                }
                (Some(Value::Array(o)), Value::Array(p)) if meta.merges() => {
                    Value::Array(self.merge_list(o, p, meta, &path)?)
                }
                (_, value) => self.fresh(value, meta, &path)?,
            };
            original.insert(key.clone(), merged);
        }

        for (field, values) in removals {
            let path = child_path(at, &format!("{DELETE_FROM_PRIMITIVE_LIST}{field}"));
            let Value::Array(values) = values else {
                return Err(StrategicError::BadDeleteFromPrimitiveList {
                    at: path,
                    message: format!("the values to remove must be a list, not {values}"),
                });
            };
            if let Some(Value::Array(list)) = original.get_mut(field) {
                list.retain(|item| !values.iter().any(|v| same(v, item)));
            }
        }
        Ok(original)
    }

    /// A value from the patch where the object has none (or one of another JSON type): merged
    /// into an empty value, so that directives and `null`s do not end up in the object.
    fn fresh(&self, value: &Value, meta: Meta<'a>, at: &str) -> Result<Value, StrategicError> {
        Ok(match value {
            Value::Object(p) => Value::Object(self.merge_map(Map::new(), p, meta.ty, at)?),
            Value::Array(p) if meta.merges() => {
                Value::Array(self.merge_list(Vec::new(), p, meta, at)?)
            }
            Value::Array(p) => {
                let items = Meta {
                    ty: self.items(meta.ty),
                    field: None,
                };
                let mut list = Vec::with_capacity(p.len());
                for (i, item) in p.iter().enumerate() {
                    if item.get(PATCH).is_some() {
                        continue;
                    }
                    list.push(self.fresh(item, items, &format!("{at}[{i}]"))?);
                }
                Value::Array(list)
            }
            other => other.clone(),
        })
    }

    /// Checks that a merged list's items are all of one JSON type, and no lists.
    fn homogeneous(at: &str, lists: [&[Value]; 2]) -> Result<Option<u8>, StrategicError> {
        let mut seen = None;
        for item in lists.into_iter().flatten() {
            let k = kind(item);
            if k == 4 {
                return Err(StrategicError::ListOfLists { at: at.to_owned() });
            }
            match seen {
                None => seen = Some(k),
                Some(s) if s != k => return Err(StrategicError::MixedList { at: at.to_owned() }),
                Some(_) => {}
            }
        }
        Ok(seen)
    }

    /// Merges a list whose field has the `merge` strategy.
    fn merge_list(
        &self,
        original: Vec<Value>,
        patch: &[Value],
        meta: Meta<'a>,
        at: &str,
    ) -> Result<Vec<Value>, StrategicError> {
        match Self::homogeneous(at, [&original, patch])? {
            None => Ok(original),
            Some(5) => self.merge_objects(original, patch, meta, at),
            Some(_) => {
                let mut merged: Vec<Value> = Vec::new();
                for item in original.iter().chain(patch) {
                    if !merged.iter().any(|m| same(m, item)) {
                        merged.push(item.clone());
                    }
                }
                Ok(interleave(merged, patch, &original, None))
            }
        }
    }

    fn merge_objects(
        &self,
        original: Vec<Value>,
        patch: &[Value],
        meta: Meta<'a>,
        at: &str,
    ) -> Result<Vec<Value>, StrategicError> {
        let Some(key) = meta.merge_key() else {
            return Err(StrategicError::NoMergeKey { at: at.to_owned() });
        };
        let items = Meta {
            ty: self.items(meta.ty),
            field: None,
        };
        let mut original = original;
        let mut plain: Vec<(usize, &Map<String, Value>)> = Vec::new();
        let mut replace = false;
        for (i, item) in patch.iter().enumerate() {
            let Value::Object(item) = item else {
                continue;
            };
            match item.get(PATCH) {
                None => plain.push((i, item)),
                Some(directive) => match directive.as_str() {
                    Some("delete") => {
                        let Some(value) = item.get(key) else {
                            return Err(StrategicError::MissingMergeKey {
                                at: format!("{at}[{i}]"),
                                key: key.to_owned(),
                            });
                        };
                        original.retain(|o| !o.get(key).is_some_and(|v| same(v, value)));
                    }
                    Some("replace") => replace = true,
                    Some("merge") => {
                        return Err(StrategicError::MergeDirectiveInList { at: at.to_owned() });
                    }
                    _ => {
                        return Err(StrategicError::BadPatchDirective {
                            at: format!("{at}[{i}].{PATCH}"),
                            value: directive.to_string(),
                            allowed: "replace or delete in a list item",
                        });
                    }
                },
            }
        }
        for (i, item) in &plain {
            if !item.contains_key(key) {
                return Err(StrategicError::MissingMergeKey {
                    at: format!("{at}[{i}]"),
                    key: key.to_owned(),
                });
            }
        }
        if replace {
            let mut list = Vec::with_capacity(plain.len());
            for (i, item) in plain {
                list.push(Value::Object(self.merge_map(
                    Map::new(),
                    item,
                    items.ty,
                    &format!("{at}[{i}]"),
                )?));
            }
            return Ok(list);
        }
        let mut merged = original.clone();
        for (i, item) in &plain {
            let path = format!("{at}[{i}]");
            let value = &item[key];
            match merged
                .iter()
                .position(|o| o.get(key).is_some_and(|v| same(v, value)))
            {
                Some(found) => {
                    let Value::Object(existing) = std::mem::take(&mut merged[found]) else {
                        continue;
                    };
                    merged[found] = Value::Object(self.merge_map(existing, item, items.ty, &path)?);
                }
                None => merged.push(Value::Object(self.merge_map(
                    Map::new(),
                    item,
                    items.ty,
                    &path,
                )?)),
            }
        }
        let named: Vec<Value> = plain
            .iter()
            .map(|(_, item)| Value::Object((*item).clone()))
            .collect();
        Ok(interleave(merged, &named, &original, Some(key)))
    }

    /// Applies `$setElementOrder/<field>`: merges the field's list (if the patch has one) and
    /// orders the result.
    fn set_element_order(
        &self,
        original: &mut Map<String, Value>,
        patch: &Map<String, Value>,
        field: &str,
        order: &Value,
        ty: &'a Type,
        at: &str,
    ) -> Result<(), StrategicError> {
        let path = child_path(at, &format!("{SET_ELEMENT_ORDER}{field}"));
        let bad = |message: String| StrategicError::BadSetElementOrder {
            at: path.clone(),
            message,
        };
        let Value::Array(order) = order else {
            return Err(bad(format!("the order must be a list, not {order}")));
        };
        let meta = self.meta(ty, field);
        let key = meta.merge_key();
        let list_at = child_path(at, field);
        let patch_list = match patch.get(field) {
            None => None,
            Some(Value::Array(list)) => Some(list),
            Some(other) => {
                return Err(bad(format!(
                    "{field} must be a list in the patch, not {other}"
                )));
            }
        };
        let original_list = match original.get(field) {
            None => None,
            Some(Value::Array(list)) => Some(list.clone()),
            Some(_) => return Err(bad(format!("{field} is not a list in the object"))),
        };
        // An ordered key of an item: its merge key value, or the item itself.
        let id = |item: &Value| -> Option<Value> {
            match key {
                Some(key) if item.is_object() => item.get(key).cloned(),
                _ => Some(item.clone()),
            }
        };
        let mut order_ids = Vec::with_capacity(order.len());
        for (i, item) in order.iter().enumerate() {
            match id(item) {
                Some(v) => order_ids.push(v),
                None => {
                    return Err(bad(format!(
                        "item {i} does not contain the merge key {:?}",
                        key.unwrap_or_default()
                    )));
                }
            }
        }
        // The patch's own items must appear in the order the directive gives.
        if let Some(list) = patch_list {
            let mut position = 0;
            for item in list {
                if item.get(PATCH).is_some() {
                    continue;
                }
                let Some(item_id) = id(item) else {
                    continue;
                };
                match order_ids[position..].iter().position(|o| same(o, &item_id)) {
                    Some(found) => position += found + 1,
                    None => {
                        return Err(bad(format!(
                            "the order of {field} in the patch does not match it"
                        )));
                    }
                }
            }
        }
        let merged = match (original_list.clone(), patch_list) {
            (None, None) => return Ok(()),
            (Some(o), None) => o,
            (None, Some(p)) => match self.fresh(&Value::Array(p.clone()), meta, &list_at)? {
                Value::Array(list) => list,
                _ => Vec::new(),
            },
            (Some(o), Some(p)) if meta.merges() => self.merge_list(o, p, meta, &list_at)?,
            (Some(_), Some(p)) => match self.fresh(&Value::Array(p.clone()), meta, &list_at)? {
                Value::Array(list) => list,
                _ => Vec::new(),
            },
        };
        let original_list = original_list.unwrap_or_default();
        let index_in = |list: &[Value], item: &Value| -> Option<usize> {
            let item_id = id(item)?;
            list.iter()
                .position(|other| id(other).is_some_and(|o| same(&o, &item_id)))
        };
        let (mut listed, mut rest): (Vec<Value>, Vec<Value>) = merged
            .into_iter()
            .partition(|item| id(item).is_some_and(|i| order_ids.iter().any(|o| same(o, &i))));
        listed
            .sort_by_key(|item| id(item).and_then(|i| order_ids.iter().position(|o| same(o, &i))));
        rest.sort_by_key(|item| index_in(&original_list, item));
        original.insert(
            field.to_owned(),
            Value::Array(weave(rest, listed, &original_list, &index_in)),
        );
        Ok(())
    }
}

/// Orders a merged list: the items `patch` names in the patch's order, the others (in the
/// original's order) woven in where the original had them before a named item.
fn interleave(
    merged: Vec<Value>,
    patch: &[Value],
    original: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let id = |item: &Value| -> Option<Value> {
        match key {
            Some(key) => item.get(key).cloned(),
            None => Some(item.clone()),
        }
    };
    let index_in = |list: &[Value], item: &Value| -> Option<usize> {
        let item_id = id(item)?;
        list.iter()
            .position(|other| id(other).is_some_and(|o| same(&o, &item_id)))
    };
    let (mut named, mut rest): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| index_in(patch, item).is_some());
    named.sort_by_key(|item| index_in(patch, item));
    rest.sort_by_key(|item| index_in(original, item));
    weave(rest, named, original, &index_in)
}

/// Merges two ordered lists: an item of `left` goes first when both it and the next item of
/// `right` are in `original` and it comes first there; otherwise `right`'s item goes first.
fn weave(
    left: Vec<Value>,
    right: Vec<Value>,
    original: &[Value],
    index_in: &dyn Fn(&[Value], &Value) -> Option<usize>,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (index_in(original, l), index_in(original, r)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

fn untyped() -> &'static Type {
    static UNTYPED: Type = Type::Untyped;
    &UNTYPED
}
