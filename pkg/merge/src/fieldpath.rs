//! Field paths and sets of them, with the FieldsV1 encoding of `metadata.managedFields`.
//!
//! A [`Path`] names one node of an object: a struct field or map key ([`PathElement::Field`]),
//! an item of a keyed list by its key values ([`PathElement::Key`]), an item of a set list by
//! its value ([`PathElement::Value`]), or a list position ([`PathElement::Index`]). A [`Set`] is
//! a trie of such paths; a node can be in the set itself (a *member*) and have members below
//! it at the same time.
//!
//! FieldsV1 is the JSON form of a set: an object whose keys are encoded path elements (`f:name`,
//! `k:{"key":"value"}`, `v:<json>`, `i:<index>`) mapping to the set below that element, with
//! `"."` standing for "this node itself". Keys are written in the order of [`PathElement`]'s
//! ordering (fields, then keys, then values, then indices), `"."` first, as upstream writes
//! them, so equal sets encode to identical bytes.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

/// One step of a [`Path`].
#[derive(Clone, Debug)]
pub enum PathElement {
    /// A struct field or a map key (`f:<name>`).
    Field(String),
    /// An item of a list keyed by some of its fields (`k:{...}`), the key fields sorted by name.
    Key(Vec<(String, Value)>),
    /// An item of a set list, by its value (`v:<json>`).
    Value(Value),
    /// A list position (`i:<index>`).
    Index(usize),
}

impl PathElement {
    /// A key element from key fields in any order (they are sorted by name).
    pub fn key(mut fields: Vec<(String, Value)>) -> Self {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields)
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The FieldsV1 form of this element, e.g. `f:data` or `k:{"name":"a"}`, with the JSON
    /// inside keys and values written as upstream writes it (Go's encoding: `<`, `>`, `&`,
    /// U+2028 and U+2029 escaped; floats in Go's notation).
    pub fn encode(&self) -> String {
        match self {
            PathElement::Field(name) => {
                let mut out = String::with_capacity(name.len() + 2);
                out.push_str("f:");
                out.push_str(name);
                out
            }
            PathElement::Key(fields) => {
                let mut out = String::from("k:{");
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_go_string(name, &mut out);
                    out.push(':');
                    write_go_value(value, &mut out);
                }
                out.push('}');
                out
            }
            PathElement::Value(value) => {
                let mut out = String::from("v:");
                write_go_value(value, &mut out);
                out
            }
            PathElement::Index(index) => format!("i:{index}"),
        }
    }

    /// Reads the FieldsV1 form of an element. An element of an unknown type (`x:...`) is
    /// `Ok(None)`: upstream drops such elements, as a later version may define them.
    pub fn decode_known(text: &str) -> Result<Option<Self>, FieldsError> {
        let bad = |why: &str| {
            FieldsError(format!(
                "invalid path element {}: {why}",
                genplane_apimachinery::gofmt::Quoted(text)
            ))
        };
        let bytes = text.as_bytes();
        if bytes.len() < 2 {
            return Err(bad("too short"));
        }
        if bytes[1] != b':' {
            return Err(bad("missing colon"));
        }
        if !matches!(bytes[0], b'f' | b'v' | b'k' | b'i') {
            return Ok(None);
        }
        PathElement::decode(text).map(Some)
    }

    /// Reads the FieldsV1 form of an element.
    pub fn decode(text: &str) -> Result<Self, FieldsError> {
        let bad = |why: &str| {
            FieldsError(format!(
                "invalid path element {}: {why}",
                genplane_apimachinery::gofmt::Quoted(text)
            ))
        };
        let (prefix, rest) = text.split_once(':').ok_or_else(|| bad("no type prefix"))?;
        match prefix {
            "f" => Ok(PathElement::Field(rest.to_owned())),
            "v" => serde_json::from_str(rest)
                .map(PathElement::Value)
                .map_err(|e| bad(&e.to_string())),
            "k" => match serde_json::from_str(rest) {
                Ok(Value::Object(fields)) if !fields.is_empty() => {
                    Ok(PathElement::key(fields.into_iter().collect()))
                }
                Ok(_) => Err(bad("a key must be a non-empty JSON object")),
                Err(e) => Err(bad(&e.to_string())),
            },
            "i" => rest
                .parse::<usize>()
                .map(PathElement::Index)
                .map_err(|e| bad(&e.to_string())),
            _ => Err(bad("unknown type prefix")),
        }
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for ((an, av), (bn, bv)) in a.iter().zip(b) {
                    let c = an.cmp(bn).then_with(|| compare_values(av, bv));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl fmt::Display for PathElement {
    /// The element as field paths are shown in conflict messages: `.name`, `[k="v",n=1]`,
    /// `[=value]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                f.write_str("[")?;
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{name}={value}")?;
                }
                f.write_str("]")
            }
            PathElement::Value(value) => write!(f, "[={value}]"),
            PathElement::Index(index) => write!(f, "[{index}]"),
        }
    }
}

/// The order of JSON values in path elements: numbers, then strings, booleans, lists, maps,
/// and null last; numbers by value, strings by bytes, lists and maps item by item.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => {
                let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                x.partial_cmp(&y).unwrap_or(Ordering::Equal)
            }
        },
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                let c = compare_values(p, q);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            for ((pk, pv), (qk, qv)) in x.iter().zip(y) {
                let c = pk.cmp(qk).then_with(|| compare_values(pv, qv));
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Writes `text` as a JSON string the way upstream's JSON writers do (Go's, with HTML
/// escaping): `"` and `\` escaped, `\n`, `\r`, `\t`, other control characters as `\u00xx`,
/// and `<`, `>`, `&`, U+2028, U+2029 as `\u` escapes.
pub(crate) fn write_go_string(text: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' | '\u{0}'..='\u{1f}' => {
                let code = c as u32;
                out.push_str("\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(char::from(HEX[((code >> shift) & 0xf) as usize]));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Writes a JSON value as Go writes it: strings by [`write_go_string`], object keys sorted,
/// floats in Go's notation (`1e+21`, `1e-7`, integral floats without a fraction).
pub(crate) fn write_go_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if n.is_f64() {
                let f = n.as_f64().unwrap_or(0.0);
                let abs = f.abs();
                if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
                    let text = format!("{f:e}");
                    match text.split_once('e') {
                        Some((mantissa, exponent)) if !exponent.starts_with('-') => {
                            out.push_str(mantissa);
                            out.push_str("e+");
                            out.push_str(exponent);
                        }
                        _ => out.push_str(&text),
                    }
                } else {
                    out.push_str(&format!("{f}"));
                }
            } else {
                out.push_str(&n.to_string());
            }
        }
        Value::String(s) => write_go_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_value(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(key, out);
                out.push(':');
                write_go_value(&map[key], out);
            }
            out.push('}');
        }
    }
}

/// A path from the root of an object to one of its nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Path(pub Vec<PathElement>);

impl Path {
    /// The path one element further down.
    pub fn child(&self, element: PathElement) -> Path {
        let mut elements = self.0.clone();
        elements.push(element);
        Path(elements)
    }

    /// A path of field names, e.g. `Path::fields(&["metadata", "labels"])`.
    pub fn fields(names: &[&str]) -> Path {
        Path(
            names
                .iter()
                .map(|n| PathElement::Field((*n).to_owned()))
                .collect(),
        )
    }
}

impl fmt::Display for Path {
    /// The path as upstream shows it, e.g. `.spec.containers[name="a"].image`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for element in &self.0 {
            write!(f, "{element}")?;
        }
        Ok(())
    }
}

/// Why a FieldsV1 value does not make a [`Set`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FieldsError(pub String);

/// A set of paths, as a trie.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Set {
    /// The elements below this node that are in the set themselves.
    members: BTreeSet<PathElement>,
    /// The non-empty sets below the elements that have members further down.
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    /// The empty set.
    pub fn new() -> Self {
        Set::default()
    }

    /// A set of these paths.
    pub fn from_paths<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Self {
        let mut set = Set::new();
        for path in paths {
            set.insert(path);
        }
        set
    }

    /// Whether the set has no paths.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Adds a path (the empty path, the root, is never a member).
    pub fn insert(&mut self, path: &Path) {
        self.insert_elements(&path.0);
    }

    /// Adds the path of these elements (cloning only the elements not in the set yet).
    pub fn insert_slice(&mut self, elements: &[PathElement]) {
        self.insert_elements(elements);
    }

    fn insert_elements(&mut self, elements: &[PathElement]) {
        match elements {
            [] => {}
            [last] => {
                if !self.members.contains(last) {
                    self.members.insert(last.clone());
                }
            }
            [first, rest @ ..] => match self.children.get_mut(first) {
                Some(child) => child.insert_elements(rest),
                None => {
                    let mut child = Set::new();
                    child.insert_elements(rest);
                    self.children.insert(first.clone(), child);
                }
            },
        }
    }

    /// Whether a path is a member.
    pub fn has(&self, path: &Path) -> bool {
        let mut node = self;
        let Some((last, parents)) = path.0.split_last() else {
            return false;
        };
        for element in parents {
            match node.children.get(element) {
                Some(child) => node = child,
                None => return false,
            }
        }
        node.members.contains(last)
    }

    /// Whether a path is a member or has members below it.
    pub fn has_prefix(&self, path: &Path) -> bool {
        let mut node = self;
        let Some((last, parents)) = path.0.split_last() else {
            return !self.is_empty();
        };
        for element in parents {
            match node.children.get(element) {
                Some(child) => node = child,
                None => return false,
            }
        }
        node.members.contains(last) || node.children.contains_key(last)
    }

    /// The set below a path (its members relative to the path), empty if there is none.
    pub fn below(&self, path: &Path) -> Set {
        let mut node = self;
        for element in &path.0 {
            match node.children.get(element) {
                Some(child) => node = child,
                None => return Set::new(),
            }
        }
        node.clone()
    }

    /// The elements directly below the root that are members.
    pub fn members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// The set below one element directly below the root, if it has members.
    pub fn child(&self, element: &PathElement) -> Option<&Set> {
        self.children.get(element)
    }

    /// The elements that have members below them, with the sets below them.
    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &Set)> {
        self.children.iter()
    }

    /// The paths in either set.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.extend(other.clone());
        out
    }

    /// Adds the paths of `other`, taking its elements rather than cloning them.
    pub fn extend(&mut self, other: Set) {
        self.members.extend(other.members);
        for (element, theirs) in other.children {
            match self.children.entry(element) {
                std::collections::btree_map::Entry::Occupied(mut mine) => {
                    mine.get_mut().extend(theirs);
                }
                std::collections::btree_map::Entry::Vacant(slot) => {
                    slot.insert(theirs);
                }
            }
        }
    }

    /// The paths in both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(element, child)| {
                let both = child.intersection(other.children.get(element)?);
                (!both.is_empty()).then(|| (element.clone(), both))
            })
            .collect();
        Set { members, children }
    }

    /// The paths of this set that are not in `other`.
    pub fn difference(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.subtract(other);
        out
    }

    /// Removes the paths of `other` (only those: what lies below them stays). Takes time in
    /// the size of `other`, not of this set.
    pub fn subtract(&mut self, other: &Set) {
        self.remove_below(other, false);
    }

    /// The paths of this set that are neither in `other` nor below one of its members.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.subtract_recursive(other);
        out
    }

    /// Removes the paths of `other` and every path below one of its members. Takes time in
    /// the size of `other`, not of this set.
    pub fn subtract_recursive(&mut self, other: &Set) {
        self.remove_below(other, true);
    }

    fn remove_below(&mut self, other: &Set, recursive: bool) {
        for member in &other.members {
            self.members.remove(member);
            if recursive {
                self.children.remove(member);
            }
        }
        for (element, theirs) in &other.children {
            if let Some(mine) = self.children.get_mut(element) {
                mine.remove_below(theirs, recursive);
                if mine.is_empty() {
                    self.children.remove(element);
                }
            }
        }
    }

    /// Removes one path (what lies below it stays).
    pub fn remove(&mut self, path: &Path) {
        self.remove_elements(&path.0);
    }

    /// Removes the fields `names` below the field path `at` (`["metadata"]`; empty: the root)
    /// as [`Set::remove`] removes each, without building their paths.
    pub fn remove_fields(&mut self, at: &[&str], names: &[&str]) {
        let named = |element: &PathElement, wanted: &str| matches!(element, PathElement::Field(name) if name == wanted);
        match at {
            [] => self
                .members
                .retain(|m| !names.iter().any(|name| named(m, name))),
            [first, rest @ ..] => {
                let Some((key, child)) = self.children.iter_mut().find(|(k, _)| named(k, first))
                else {
                    return;
                };
                child.remove_fields(rest, names);
                if child.is_empty() {
                    let key = key.clone();
                    self.children.remove(&key);
                }
            }
        }
    }

    fn remove_elements(&mut self, elements: &[PathElement]) {
        match elements {
            [] => {}
            [last] => {
                self.members.remove(last);
            }
            [first, rest @ ..] => {
                if let Some(child) = self.children.get_mut(first) {
                    child.remove_elements(rest);
                    if child.is_empty() {
                        self.children.remove(first);
                    }
                }
            }
        }
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Path>) {
        let mut members = self.members.iter().peekable();
        let mut children = self.children.iter().peekable();
        loop {
            let take_member = match (members.peek(), children.peek()) {
                (None, None) => return,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(m), Some((c, _))) => *m <= *c,
            };
            if take_member {
                let Some(member) = members.next() else { return };
                prefix.push(member.clone());
                out.push(Path(prefix.clone()));
                prefix.pop();
            } else {
                let Some((element, child)) = children.next() else {
                    return;
                };
                prefix.push(element.clone());
                child.collect(prefix, out);
                prefix.pop();
            }
        }
    }

    /// The members that are leaves: member paths with no members below them.
    pub fn leaves(&self) -> Vec<Path> {
        self.paths()
            .into_iter()
            .filter(|p| self.below(p).is_empty())
            .collect()
    }

    /// The FieldsV1 form of the set.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.encode_contents(false))
    }

    fn encode_contents(&self, member: bool) -> Map<String, Value> {
        // serde_json's map keeps its keys sorted, which is not the upstream order; the order
        // is restored when the document is written (see `write_fields_v1`).
        let mut out = Map::new();
        if member {
            out.insert(".".to_owned(), Value::Object(Map::new()));
        }
        for element in &self.members {
            if !self.children.contains_key(element) {
                out.insert(element.encode(), Value::Object(Map::new()));
            }
        }
        for (element, child) in &self.children {
            let contents = child.encode_contents(self.members.contains(element));
            out.insert(element.encode(), Value::Object(contents));
        }
        out
    }

    /// The FieldsV1 form as JSON text, keys in upstream's order (`.` first, then the path
    /// elements in their order), byte for byte what upstream writes for the same set.
    pub fn write_fields_v1(&self) -> String {
        let mut out = String::new();
        self.write_contents(false, &mut out);
        out
    }

    fn write_contents(&self, member: bool, out: &mut String) {
        out.push('{');
        let mut first = true;
        let mut separator = |out: &mut String| {
            if !first {
                out.push(',');
            }
            first = false;
        };
        if member {
            separator(out);
            out.push_str("\".\":{}");
        }
        let mut elements: Vec<&PathElement> = self.members.iter().collect();
        elements.extend(self.children.keys().filter(|e| !self.members.contains(*e)));
        elements.sort();
        for element in elements {
            separator(out);
            write_go_string(&element.encode(), out);
            out.push(':');
            match self.children.get(element) {
                Some(child) => child.write_contents(self.members.contains(element), out),
                None => out.push_str("{}"),
            }
        }
        out.push('}');
    }

    /// Reads a FieldsV1 value.
    pub fn from_fields_v1(value: &Value) -> Result<Set, FieldsError> {
        let object = value
            .as_object()
            .ok_or_else(|| FieldsError("FieldsV1 must be a JSON object".to_owned()))?;
        Ok(Set::decode_contents(object)?.0)
    }

    /// Reads the contents of one node: the set below it and whether it is a member itself.
    fn decode_contents(object: &Map<String, Value>) -> Result<(Set, bool), FieldsError> {
        let mut set = Set::new();
        let mut member = false;
        for (key, value) in object {
            let contents = value.as_object().ok_or_else(|| {
                FieldsError(format!(
                    "the value of {} must be a JSON object",
                    genplane_apimachinery::gofmt::Quoted(key)
                ))
            })?;
            if key == "." {
                member = true;
                continue;
            }
            let Some(element) = PathElement::decode_known(key)? else {
                continue;
            };
            let (child, child_member) = Set::decode_contents(contents)?;
            if child.is_empty() || child_member {
                set.members.insert(element.clone());
            }
            if !child.is_empty() {
                set.children.insert(element, child);
            }
        }
        Ok((set, member))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn path(elements: &[PathElement]) -> Path {
        Path(elements.to_vec())
    }

    fn f(name: &str) -> PathElement {
        PathElement::Field(name.to_owned())
    }

    #[test]
    fn removing_named_fields_removes_what_removing_each_path_removes() {
        let paths: Vec<Path> = [
            &["kind"][..],
            &["metadata"],
            &["metadata", "name"],
            &["metadata", "labels", "name"],
            &["data", "name"],
            &["spec", "kind"],
        ]
        .iter()
        .map(|p| Path::fields(p))
        .collect();
        let given = Set::from_paths(&paths);
        let (mut named, mut each) = (given.clone(), given);
        named.remove_fields(&[], &["kind", "metadata", "apiVersion"]);
        named.remove_fields(&["metadata"], &["name", "uid"]);
        named.remove_fields(&["status"], &["name"]);
        for p in [&["kind"][..], &["metadata"], &["apiVersion"]] {
            each.remove(&Path::fields(p));
        }
        for p in [
            &["metadata", "name"][..],
            &["metadata", "uid"],
            &["status", "name"],
        ] {
            each.remove(&Path::fields(p));
        }
        assert_eq!(named, each);
        assert!(named.has(&Path::fields(&["metadata", "labels", "name"])));
        assert!(named.has(&Path::fields(&["spec", "kind"])));
        assert!(!named.has(&Path::fields(&["metadata", "name"])));
        // A node left empty goes: nothing below `metadata` but its name.
        let mut only_name = Set::from_paths(&[Path::fields(&["metadata", "name"])]);
        only_name.remove_fields(&["metadata"], &["name"]);
        assert!(only_name.is_empty());
    }

    #[test]
    fn round_trip_with_member_markers() {
        let text = r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"a\"}":{".":{},"f:image":{},"f:name":{}}}}}"#;
        let value: Value = serde_json::from_str(text).unwrap();
        let set = Set::from_fields_v1(&value).unwrap();
        assert!(set.has(&Path::fields(&["metadata", "labels"])));
        assert!(set.has(&Path::fields(&["metadata", "labels", "app"])));
        assert!(!set.has(&Path::fields(&["metadata"])));
        assert_eq!(set.write_fields_v1(), text);
        assert_eq!(set.to_fields_v1(), value);
    }

    #[test]
    fn element_order_is_fields_keys_values_indices() {
        let mut set = Set::new();
        set.insert(&path(&[PathElement::Index(0)]));
        set.insert(&path(&[PathElement::Value(json!("x"))]));
        set.insert(&path(&[PathElement::key(vec![("k".into(), json!(1))])]));
        set.insert(&path(&[f("z")]));
        set.insert(&path(&[PathElement::Value(json!(10))]));
        set.insert(&path(&[PathElement::Value(json!(9))]));
        assert_eq!(
            set.write_fields_v1(),
            r#"{"f:z":{},"k:{\"k\":1}":{},"v:9":{},"v:10":{},"v:\"x\"":{},"i:0":{}}"#
        );
    }

    #[test]
    fn set_operations() {
        let a = Set::from_paths(&[
            Path::fields(&["data", "a"]),
            Path::fields(&["data", "b"]),
            Path::fields(&["spec"]),
        ]);
        let b = Set::from_paths(&[Path::fields(&["data", "b"]), Path::fields(&["data", "c"])]);
        assert_eq!(
            a.union(&b).paths(),
            vec![
                Path::fields(&["data", "a"]),
                Path::fields(&["data", "b"]),
                Path::fields(&["data", "c"]),
                Path::fields(&["spec"]),
            ]
        );
        assert_eq!(
            a.intersection(&b).paths(),
            vec![Path::fields(&["data", "b"])]
        );
        assert_eq!(
            a.difference(&b).paths(),
            vec![Path::fields(&["data", "a"]), Path::fields(&["spec"])]
        );
        let whole_data = Set::from_paths(&[Path::fields(&["data"])]);
        assert_eq!(a.difference(&whole_data), a);
        assert_eq!(
            a.recursive_difference(&whole_data).paths(),
            vec![Path::fields(&["spec"])]
        );
        assert!(a.difference(&a).is_empty());
    }

    /// The set operations agree with the same operations on plain lists of paths, over
    /// every pair of sets drawn from a small universe, and leave no empty node behind (an
    /// emptied branch compares equal to one never made).
    #[test]
    fn set_operations_agree_with_lists_of_paths() {
        let universe = [
            Path::fields(&["a"]),
            Path::fields(&["a", "x"]),
            Path::fields(&["a", "x", "deep"]),
            Path::fields(&["a", "y"]),
            Path::fields(&["b"]),
            Path::fields(&["b", "z"]),
        ];
        let draw = |bits: u32| -> Vec<Path> {
            universe
                .iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .map(|(_, p)| p.clone())
                .collect()
        };
        let below = |path: &Path, of: &Path| path.0.len() > of.0.len() && path.0.starts_with(&of.0);
        for x in 0..64 {
            for y in 0..64 {
                let (xs, ys) = (draw(x), draw(y));
                let (a, b) = (Set::from_paths(&xs), Set::from_paths(&ys));
                let expect = |paths: Vec<Path>| Set::from_paths(&paths);
                let union: Vec<Path> = xs.iter().chain(&ys).cloned().collect();
                let difference: Vec<Path> =
                    xs.iter().filter(|p| !ys.contains(p)).cloned().collect();
                let recursive: Vec<Path> = difference
                    .iter()
                    .filter(|p| !ys.iter().any(|q| below(p, q)))
                    .cloned()
                    .collect();
                assert_eq!(a.union(&b), expect(union.clone()), "{x} | {y}");
                let mut extended = a.clone();
                extended.extend(b.clone());
                assert_eq!(extended, expect(union), "{x} extend {y}");
                assert_eq!(a.difference(&b), expect(difference.clone()), "{x} - {y}");
                let mut subtracted = a.clone();
                subtracted.subtract(&b);
                assert_eq!(subtracted, expect(difference), "{x} subtract {y}");
                assert_eq!(a.recursive_difference(&b), expect(recursive), "{x} -r {y}");
                let mut removed = a.clone();
                for path in &ys {
                    removed.remove(path);
                }
                assert_eq!(removed, a.difference(&b), "{x} remove each of {y}");
            }
        }
    }

    #[test]
    fn display_as_upstream() {
        let p = path(&[
            f("spec"),
            f("ports"),
            PathElement::key(vec![
                ("protocol".into(), json!("TCP")),
                ("port".into(), json!(80)),
            ]),
            f("name"),
        ]);
        assert_eq!(p.to_string(), r#".spec.ports[port=80,protocol="TCP"].name"#);
        let q = path(&[
            f("metadata"),
            f("finalizers"),
            PathElement::Value(json!("a")),
        ]);
        assert_eq!(q.to_string(), r#".metadata.finalizers[="a"]"#);
        assert_eq!(path(&[f("x"), PathElement::Index(2)]).to_string(), ".x[2]");
    }

    fn k(fields: &[(&str, Value)]) -> PathElement {
        PathElement::key(
            fields
                .iter()
                .map(|(n, v)| ((*n).to_owned(), v.clone()))
                .collect(),
        )
    }

    /// The FieldsV1 of `kubectl create deployment web --image=nginx` as kube-apiserver 1.33
    /// stores and serves it (manager `kubectl-create`), written out by hand from upstream's
    /// serialization rules: `.` first, then fields by name, keys, values and indices; key
    /// objects with sorted field names; JSON inside keys escaped once more.
    #[test]
    fn deployment_fields_byte_for_byte() {
        let labels = [f("metadata"), f("labels")];
        let template = [f("spec"), f("template")];
        let container = [
            f("spec"),
            f("template"),
            f("spec"),
            f("containers"),
            k(&[("name", json!("nginx"))]),
        ];
        let mut paths: Vec<Vec<PathElement>> =
            vec![labels.to_vec(), [&labels[..], &[f("app")]].concat()];
        for name in [
            "progressDeadlineSeconds",
            "replicas",
            "revisionHistoryLimit",
            "selector",
        ] {
            paths.push(vec![f("spec"), f(name)]);
        }
        paths.push(vec![f("spec"), f("strategy"), f("rollingUpdate")]);
        for name in ["maxSurge", "maxUnavailable"] {
            paths.push(vec![f("spec"), f("strategy"), f("rollingUpdate"), f(name)]);
        }
        paths.push(vec![f("spec"), f("strategy"), f("type")]);
        paths.push([&template[..], &[f("metadata"), f("labels")]].concat());
        paths.push([&template[..], &[f("metadata"), f("labels"), f("app")]].concat());
        paths.push(container.to_vec());
        for name in [
            "terminationMessagePolicy",
            "image",
            "imagePullPolicy",
            "name",
            "resources",
            "terminationMessagePath",
        ] {
            paths.push([&container[..], &[f(name)]].concat());
        }
        for name in [
            "dnsPolicy",
            "restartPolicy",
            "schedulerName",
            "securityContext",
            "terminationGracePeriodSeconds",
        ] {
            paths.push([&template[..], &[f("spec"), f(name)]].concat());
        }
        let set = Set::from_paths(&paths.into_iter().map(Path).collect::<Vec<_>>());
        let expected = concat!(
            r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"#,
            r#""f:spec":{"f:progressDeadlineSeconds":{},"f:replicas":{},"f:revisionHistoryLimit":{},"#,
            r#""f:selector":{},"f:strategy":{"f:rollingUpdate":{".":{},"f:maxSurge":{},"f:maxUnavailable":{}},"#,
            r#""f:type":{}},"f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"#,
            r#""f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"#,
            r#""f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:terminationMessagePath":{},"#,
            r#""f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:restartPolicy":{},"#,
            r#""f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}}}"#,
        );
        assert_eq!(set.write_fields_v1(), expected);
        // Reading those bytes back gives the same set.
        let read = Set::from_fields_v1(&serde_json::from_str(expected).unwrap()).unwrap();
        assert_eq!(read, set);
    }

    /// A Service: list-map keys with a number and a string (sorted by name), `.` before the
    /// fields of a member that has fields below it, set values of each JSON type in upstream's
    /// value order (numbers by value, then strings, then booleans), and characters Go escapes.
    #[test]
    fn keys_values_and_escaping_byte_for_byte() {
        let ports = [f("spec"), f("ports")];
        let port = |n: i64, p: &str| k(&[("protocol", json!(p)), ("port", json!(n))]);
        let paths = vec![
            vec![f("metadata"), f("annotations"), f("a&b<c>")],
            vec![
                f("metadata"),
                f("finalizers"),
                PathElement::Value(json!("x/y")),
            ],
            vec![
                f("metadata"),
                f("finalizers"),
                PathElement::Value(json!("a")),
            ],
            [&ports[..], &[port(8080, "TCP")]].concat(),
            [&ports[..], &[port(8080, "TCP"), f("targetPort")]].concat(),
            [&ports[..], &[port(443, "UDP")]].concat(),
            [&ports[..], &[port(443, "TCP")]].concat(),
            vec![f("s"), PathElement::Value(json!(true))],
            vec![f("s"), PathElement::Value(json!("10"))],
            vec![f("s"), PathElement::Value(json!(10))],
            vec![f("s"), PathElement::Value(json!(9))],
            vec![f("s"), PathElement::Value(json!(2.5))],
            vec![f("s"), PathElement::Value(json!(1e21))],
            vec![f("t"), PathElement::Index(10)],
            vec![f("t"), PathElement::Index(9)],
        ];
        let set = Set::from_paths(&paths.into_iter().map(Path).collect::<Vec<_>>());
        let expected = concat!(
            r#"{"f:metadata":{"f:annotations":{"f:a\u0026b\u003cc\u003e":{}},"#,
            r#""f:finalizers":{"v:\"a\"":{},"v:\"x/y\"":{}}},"#,
            r#""f:s":{"v:2.5":{},"v:9":{},"v:10":{},"v:1e+21":{},"v:\"10\"":{},"v:true":{}},"#,
            r#""f:spec":{"f:ports":{"k:{\"port\":443,\"protocol\":\"TCP\"}":{},"#,
            r#""k:{\"port\":443,\"protocol\":\"UDP\"}":{},"#,
            r#""k:{\"port\":8080,\"protocol\":\"TCP\"}":{".":{},"f:targetPort":{}}}},"#,
            r#""f:t":{"i:9":{},"i:10":{}}}"#,
        );
        assert_eq!(set.write_fields_v1(), expected);
    }

    #[test]
    fn unknown_element_types_are_dropped() {
        let set = Set::from_fields_v1(&json!({"f:a": {}, "r:b": {"f:c": {}}})).unwrap();
        assert_eq!(set.write_fields_v1(), r#"{"f:a":{}}"#);
    }

    #[test]
    fn bad_fields_v1() {
        for bad in [
            json!([]),
            json!({"xx:a": {}}),
            json!({"x": {}}),
            json!({"f:a": 1}),
            json!({"k:[1]": {}}),
            json!({"v:{": {}}),
            json!({"i:-1": {}}),
            json!({"nocolon": {}}),
        ] {
            assert!(Set::from_fields_v1(&bad).is_err(), "{bad}");
        }
    }
}
