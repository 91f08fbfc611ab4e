//! Helpers on raw JSON objects: metadata access and the stored form.
//!
//! Objects are stored as JSON without `metadata.resourceVersion`; the store's revision is put
//! back on every read, as kube-apiserver does with etcd's `mod_revision`. A built-in kind is
//! stored in kube-apiserver's field order (`genplane_api::order`: `kind`, `apiVersion`,
//! `metadata` with its fields in `ObjectMeta`'s order, then the kind's fields), so that its
//! stored bytes are what a read serves; any other object (a custom resource, a kind of a
//! program's own) with sorted keys, as Go writes unstructured objects.

use std::cell::Cell;

use genplane_api::order::typed;
use genplane_apimachinery::codec::order::for_each_field;
use genplane_apimachinery::codec::schema::{Struct, Type};
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::meta::ObjectMeta;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use serde_json::{Map, Value};

/// The `metadata` map of an object, created when missing.
pub fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let map = object
        .as_object_mut()
        .expect("invariant: made an object above");
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    metadata
        .as_object_mut()
        .expect("invariant: made an object above")
}

/// A string field of `metadata`, or "".
pub fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    genplane_apimachinery::meta::field(object, field)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Sets a string field of `metadata`; an empty value removes it.
pub fn set_meta_str(object: &mut Value, field: &str, value: &str) {
    let metadata = metadata_mut(object);
    if value.is_empty() {
        metadata.remove(field);
    } else {
        metadata.insert(field.to_owned(), Value::String(value.to_owned()));
    }
}

/// Reads an object's metadata as [`ObjectMeta`]; a malformed `metadata` is a 400.
pub fn object_meta(object: &Value) -> Result<ObjectMeta, ApiError> {
    match object.get("metadata") {
        None | Some(Value::Null) => Ok(ObjectMeta::default()),
        Some(metadata) => serde_json::from_value(metadata.clone()).map_err(|e| {
            Status::bad_request(format!("the object's metadata is invalid: {e}")).into()
        }),
    }
}

/// The finalizers in `metadata.finalizers`.
pub fn finalizers(object: &Value) -> Vec<String> {
    genplane_apimachinery::meta::field(object, "finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Replaces `metadata.finalizers` (an empty list removes the field).
pub fn set_finalizers(object: &mut Value, finalizers: &[String]) {
    let metadata = metadata_mut(object);
    if finalizers.is_empty() {
        metadata.remove("finalizers");
    } else {
        metadata.insert("finalizers".into(), Value::from(finalizers.to_vec()));
    }
}

/// The stored form: the object without `metadata.resourceVersion`, in an allocation of its
/// exact size (the watch cache keeps these bytes for as long as the object lives), in
/// upstream's field order for a built-in kind, else with sorted keys (see the module docs).
pub fn encode(object: &Value) -> Result<bytes::Bytes, ApiError> {
    encode_with_layout(object).map(|(stored, _)| stored)
}

/// [`encode`], with the [`layout_hint`] of the bytes, noted while they were written (0 when
/// the object is not laid out as a served object is, or has keys written with escapes: a
/// reader then looks): a write answers from its stored bytes without reading them again.
pub fn encode_with_layout(object: &Value) -> Result<(bytes::Bytes, u64), ApiError> {
    let written = Cell::new(0);
    let schema = genplane_api::order::object_schema(object);
    let probe = Probe::new(&written, schema.is_some());
    let mut stored = Counted {
        out: Vec::with_capacity(STORED_CAPACITY_HINT),
        written: &written,
    };
    serde_json::to_writer(
        &mut stored,
        &Stored {
            object,
            schema,
            probe: &probe,
        },
    )
    .map_err(|e| Status::internal_error(format!("encoding the object: {e}")))?;
    let mut stored = stored.out;
    stored.shrink_to_fit();
    Ok((bytes::Bytes::from(stored), probe.hint()))
}

/// Where [`encode`] starts its buffer: most objects fit, so it grows rarely.
const STORED_CAPACITY_HINT: usize = 4096;

/// A buffer that tells how much was written into it, as it is written (for [`Probe`]).
struct Counted<'c> {
    out: Vec<u8>,
    written: &'c Cell<usize>,
}

impl std::io::Write for Counted<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.out.extend_from_slice(bytes);
        self.written.set(self.out.len());
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What [`encode_with_layout`] notes of the object's layout as serde_json writes it (compact:
/// a key's value starts one byte, the colon, after the key).
struct Probe<'a> {
    /// How much has been written.
    written: &'a Cell<usize>,
    api_version: Cell<Option<usize>>,
    kind: Cell<Option<usize>>,
    /// Where metadata's brace is.
    metadata: Cell<Option<usize>>,
    /// Whether the object is written in upstream's field order (else its keys are sorted).
    ordered: bool,
    /// Metadata's members written, and its last key before `resourceVersion` (in the
    /// object's order) with where its value ends.
    members: Cell<usize>,
    before: Cell<Option<(&'a [u8], usize)>>,
    /// Whether every key of the top level and of metadata is written without escapes (the
    /// scanner refuses keys with escapes).
    plain: Cell<bool>,
}

impl<'a> Probe<'a> {
    fn new(written: &'a Cell<usize>, ordered: bool) -> Self {
        Probe {
            written,
            ordered,
            api_version: Cell::new(None),
            kind: Cell::new(None),
            metadata: Cell::new(None),
            members: Cell::new(0),
            before: Cell::new(None),
            plain: Cell::new(true),
        }
    }

    /// Notes a key of the top level or of metadata.
    fn key(&self, key: &str) {
        if key.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
            self.plain.set(false);
        }
    }

    /// Where the value of the key just written starts.
    fn value_start(&self) -> usize {
        self.written.get() + 1
    }

    /// The hint of what was noted: the layout, or 0 when there is none to give.
    fn hint(&self) -> u64 {
        let (Some(api_version), Some(kind), Some(metadata), true) = (
            self.api_version.get(),
            self.kind.get(),
            self.metadata.get(),
            self.plain.get(),
        ) else {
            return 0;
        };
        let layout = Layout {
            api_version,
            kind,
            point: SplicePoint::in_metadata(metadata, self.members.get(), self.before.get()),
        };
        layout.to_hint().unwrap_or(HINT_TOO_FAR)
    }
}

/// An object serialized as stored: as it is, but for `metadata.resourceVersion`, which is
/// left out (no copy of the object is made to remove it), its fields in the order of
/// `schema` when it is a built-in kind (else sorted); its layout noted in `probe`.
struct Stored<'a> {
    object: &'a Value,
    schema: Option<&'static Struct>,
    probe: &'a Probe<'a>,
}

impl<'a> serde::Serialize for Stored<'a> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let Value::Object(fields) = self.object else {
            return self.object.serialize(serializer);
        };
        let probe = self.probe;
        let mut map = serializer.serialize_map(Some(fields.len()))?;
        let mut entry = |name: &'a String, value: &'a Value, ty: Type| -> Result<(), S::Error> {
            probe.key(name);
            match value {
                Value::Object(metadata) if name == "metadata" => {
                    map.serialize_key(name)?;
                    probe.metadata.set(Some(probe.value_start()));
                    map.serialize_value(&WithoutResourceVersion { metadata, probe })
                }
                Value::String(_) if name == "apiVersion" || name == "kind" => {
                    map.serialize_key(name)?;
                    let start = Some(probe.value_start());
                    if name == "kind" {
                        probe.kind.set(start);
                    } else {
                        probe.api_version.set(start);
                    }
                    map.serialize_value(value)
                }
                _ if probe.ordered => map.serialize_entry(name, &typed(value, ty)),
                _ => map.serialize_entry(name, value),
            }
        };
        match self.schema {
            Some(schema) => for_each_field(fields, schema, &mut entry)?,
            None => {
                for (name, value) in fields {
                    entry(name, value, Type::Any)?;
                }
            }
        }
        map.end()
    }
}

/// A metadata object serialized without its `resourceVersion` (in `ObjectMeta`'s order when
/// the object is written in upstream's order).
struct WithoutResourceVersion<'a> {
    metadata: &'a Map<String, Value>,
    probe: &'a Probe<'a>,
}

impl<'a> serde::Serialize for WithoutResourceVersion<'a> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let fields = self.metadata;
        let kept = fields.len() - usize::from(fields.contains_key("resourceVersion"));
        let mut map = serializer.serialize_map(Some(kept))?;
        let probe = self.probe;
        let mut entry = |name: &'a String, value: &'a Value, ty: Type| -> Result<(), S::Error> {
            if name == "resourceVersion" {
                return Ok(());
            }
            if probe.ordered {
                map.serialize_entry(name, &typed(value, ty))?;
            } else {
                map.serialize_entry(name, value)?;
            }
            probe.key(name);
            probe.members.set(probe.members.get() + 1);
            if goes_before(name.as_bytes(), probe.before.get(), probe.ordered) {
                probe
                    .before
                    .set(Some((name.as_bytes(), probe.written.get())));
            }
            Ok(())
        };
        if probe.ordered {
            for_each_field(fields, &OBJECT_META, &mut entry)?;
        } else {
            for (name, value) in fields {
                entry(name, value, Type::Any)?;
            }
        }
        map.end()
    }
}

/// The served form of a stored value at `revision`.
pub fn decode(value: &[u8], revision: i64) -> Result<Value, ApiError> {
    let mut object: Value = serde_json::from_slice(value)
        .map_err(|e| Status::internal_error(format!("decoding a stored object: {e}")))?;
    set_meta_str(&mut object, "resourceVersion", &revision.to_string());
    Ok(object)
}

/// The served JSON of stored bytes at `revision`, written into `out` without decoding the
/// object: the stored bytes with `"resourceVersion":"<revision>"` put into `metadata` where its
/// key goes (after `uid` and the fields before it in upstream's order; where it sorts in an
/// object with sorted keys). These are the bytes that [`decode`] and serializing give (stored
/// objects are compact JSON, in upstream's order for a built-in kind, sorted for any other),
/// found by reading the object's top level and its metadata only. `ordered` says whether the
/// objects of `kind` are served in upstream's order (`genplane_api::order::schema_of` knows
/// the kind): stored bytes in the other order (a built-in object stored with sorted keys by an
/// earlier version) are not served as they are. Answers false, leaving `out` as it was, when
/// the stored bytes are not an object whose `apiVersion` and `kind` are `api_version` and
/// `kind` in that order with a `metadata` object without a resourceVersion: the caller then
/// decodes.
pub fn served_json_into(
    stored: &[u8],
    revision: i64,
    api_version: &str,
    kind: &str,
    ordered: bool,
    out: &mut Vec<u8>,
) -> bool {
    match splice_point(stored, api_version, kind, ordered, 0) {
        Some(point) => {
            let served = Splice { point, revision };
            out.reserve(stored.len() + served.inserted_len());
            served.write(stored, out);
            true
        }
        None => false,
    }
}

/// An object's served JSON kept as its stored bytes and where its resourceVersion goes, so
/// that a list can hold its objects without a copy of each and write them as it sends them.
/// Made by [`ServedJson::of`] when [`served_json_into`] would write the object.
#[derive(Clone, Debug)]
pub struct ServedJson {
    /// The stored bytes (shared with the store's cache, not copied).
    stored: bytes::Bytes,
    /// What goes into them.
    splice: Splice,
}

impl ServedJson {
    /// The served JSON of `stored` at `revision`, when it can be written from the stored
    /// bytes (as [`served_json_into`] says); `None` when the caller must decode. `hint` is
    /// what [`layout_hint`] derived from `stored` before (as a cache hands it out with the
    /// value), or 0: with it, the stored bytes are not read again.
    pub fn of(
        stored: &bytes::Bytes,
        revision: i64,
        api_version: &str,
        kind: &str,
        ordered: bool,
        hint: u64,
    ) -> Option<Self> {
        let point = splice_point(stored, api_version, kind, ordered, hint)?;
        Some(Self {
            stored: stored.clone(),
            splice: Splice { point, revision },
        })
    }

    /// The length of the served JSON.
    pub fn len(&self) -> usize {
        self.stored.len() + self.splice.inserted_len()
    }

    /// Whether the served JSON is empty (never: it is an object).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Appends the served JSON to `out`: the bytes [`served_json_into`] writes (room for all
    /// of it made first: the resourceVersion goes early into the bytes, after the uid, and
    /// growing the buffer piece by piece cost a copy of what was written before it).
    pub fn write_into(&self, out: &mut Vec<u8>) {
        out.reserve(self.len());
        self.splice.write(&self.stored, out);
    }
}

/// Where in the stored bytes the resourceVersion goes, and what separates it from its
/// neighbours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SplicePoint {
    /// The offset it is written at.
    at: usize,
    /// Whether a comma goes before it (it follows another field of metadata).
    comma_before: bool,
    /// Whether a comma goes after it (it is metadata's first field, and others follow).
    comma_after: bool,
}

/// A resourceVersion and where it goes.
#[derive(Clone, Copy, Debug)]
struct Splice {
    point: SplicePoint,
    revision: i64,
}

/// The characters `"resourceVersion":""` take, less the revision's digits.
const RESOURCE_VERSION_FIELD: usize = b"\"resourceVersion\":\"\"".len();

impl Splice {
    /// How many bytes the splice adds.
    fn inserted_len(&self) -> usize {
        let digits = match u64::try_from(self.revision) {
            Ok(positive) if positive > 0 => positive.ilog10() as usize + 1,
            _ => self.revision.to_string().len(),
        };
        RESOURCE_VERSION_FIELD
            + digits
            + usize::from(self.point.comma_before)
            + usize::from(self.point.comma_after)
    }

    /// Appends `stored` with the resourceVersion written in.
    fn write(&self, stored: &[u8], out: &mut Vec<u8>) {
        use std::io::Write as _;
        let at = self.point.at;
        out.extend_from_slice(&stored[..at]);
        if self.point.comma_before {
            out.push(b',');
        }
        // Writing into a Vec cannot fail.
        let _ = write!(out, "\"resourceVersion\":\"{}\"", self.revision);
        if self.point.comma_after {
            out.push(b',');
        }
        out.extend_from_slice(&stored[at..]);
    }
}

/// Where the resourceVersion goes into `stored`, if `stored` is an object of `api_version` and
/// `kind` in upstream's field order (`ordered`; else with sorted keys) with a `metadata` object
/// without one: read from `hint` when it holds the layout ([`layout_hint`] of these bytes),
/// else found by reading the top level and metadata.
fn splice_point(
    stored: &[u8],
    api_version: &str,
    kind: &str,
    ordered: bool,
    hint: u64,
) -> Option<SplicePoint> {
    let hinted = Layout::from_hint(hint);
    let layout = match hint & (HINT_LAID_OUT | HINT_NO_LAYOUT) {
        // A hint is derived from these very bytes; one that does not fit them is not theirs,
        // and they are read instead.
        HINT_LAID_OUT if hinted.point.at <= stored.len() => hinted,
        HINT_NO_LAYOUT => return None,
        _ => layout(stored)?,
    };
    let quoted = |at: usize, expected: &str| {
        let value = stored.get(at..at + expected.len() + 2);
        value.is_some_and(|v| {
            v[0] == b'"' && v[v.len() - 1] == b'"' && &v[1..v.len() - 1] == expected.as_bytes()
        })
    };
    (layout.is_ordered() == ordered
        && quoted(layout.api_version, api_version)
        && quoted(layout.kind, kind))
    .then_some(layout.point)
}

/// Where an object's `apiVersion` and `kind` values are and where its resourceVersion goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    /// The offset of `apiVersion`'s value (a string, from its opening quote).
    api_version: usize,
    /// The offset of `kind`'s value (a string, from its opening quote).
    kind: usize,
    /// Where the resourceVersion goes.
    point: SplicePoint,
}

/// A hint (see [`layout_hint`]) that holds a layout.
const HINT_LAID_OUT: u64 = 1 << 62;
/// A hint for bytes without a layout: they are decoded.
const HINT_NO_LAYOUT: u64 = 1 << 63;
/// A hint for a layout whose offsets do not fit the word (objects beyond 4 MiB, or with more
/// than 64 KiB before `apiVersion`): found again at each read.
const HINT_TOO_FAR: u64 = HINT_LAID_OUT | HINT_NO_LAYOUT;
/// The bits of the splice offset and of `kind`'s (22 each), and of `apiVersion`'s (16: it is
/// at the start of a stored object, first with sorted keys, after `kind` in upstream's order).
const AT_BITS: u32 = 22;
const API_VERSION_BITS: u32 = 16;

impl Layout {
    /// Whether the object is in upstream's field order (`kind` before `apiVersion`), else its
    /// keys are sorted.
    fn is_ordered(&self) -> bool {
        self.kind < self.api_version
    }

    /// The layout a hint of [`HINT_LAID_OUT`] holds.
    fn from_hint(hint: u64) -> Self {
        let field = |shift: u32, bits: u32| ((hint >> shift) & ((1 << bits) - 1)) as usize;
        Layout {
            point: SplicePoint {
                at: field(0, AT_BITS),
                comma_before: hint & (1 << 60) != 0,
                comma_after: hint & (1 << 61) != 0,
            },
            kind: field(AT_BITS, AT_BITS),
            api_version: field(2 * AT_BITS, API_VERSION_BITS),
        }
    }

    /// The hint that holds this layout, if its offsets fit.
    fn to_hint(self) -> Option<u64> {
        let fits = |value: usize, bits: u32| value < (1 << bits);
        (fits(self.point.at, AT_BITS)
            && fits(self.kind, AT_BITS)
            && fits(self.api_version, API_VERSION_BITS))
        .then(|| {
            HINT_LAID_OUT
                | u64::from(self.point.comma_after) << 61
                | u64::from(self.point.comma_before) << 60
                | (self.api_version as u64) << (2 * AT_BITS)
                | (self.kind as u64) << AT_BITS
                | self.point.at as u64
        })
    }
}

/// What a watch cache keeps with each stored object for [`ServedJson::of`]: where its
/// `apiVersion` and `kind` are and where its resourceVersion goes, packed in a word (the
/// registry's `value_hint` for the caches it reads through), so that a cached object is read
/// once for all the reads that serve it. Never 0.
pub fn layout_hint(stored: &[u8]) -> u64 {
    match layout(stored) {
        Some(layout) => layout.to_hint().unwrap_or(HINT_TOO_FAR),
        None => HINT_NO_LAYOUT,
    }
}

/// The layout of `stored`, if it is an object with string `apiVersion` and `kind` and a
/// `metadata` object without a resourceVersion; found by reading the top level and metadata
/// only.
fn layout(stored: &[u8]) -> Option<Layout> {
    let (mut api_version, mut kind) = (None, None);
    let mut metadata: Option<Metadata<'_>> = None;
    let end = each_member(stored, 0, |key, start| {
        Some(match key {
            b"apiVersion" | b"kind" => {
                let end = value_end(stored, start)?;
                let string = (stored[start] == b'"').then_some(start);
                if key == b"kind" {
                    kind = string;
                } else {
                    api_version = string;
                }
                end
            }
            b"metadata" if metadata.is_none() && stored.get(start) == Some(&b'{') => {
                let mut found = Metadata {
                    at: start,
                    ..Metadata::default()
                };
                let end = each_member(stored, start, |key, start| {
                    let end = value_end(stored, start)?;
                    found.members += 1;
                    if key == b"resourceVersion" {
                        found.has_resource_version = true;
                    } else {
                        if goes_before(key, found.before_sorted, false) {
                            found.before_sorted = Some((key, end));
                        }
                        if goes_before(key, found.before_ordered, true) {
                            found.before_ordered = Some((key, end));
                        }
                    }
                    Some(end)
                })?;
                metadata = Some(found);
                end
            }
            _ => value_end(stored, start)?,
        })
    })?;
    if skip_space(stored, end) != stored.len() {
        // Something after the object: not bytes this module wrote.
        return None;
    }
    let metadata = metadata?;
    if metadata.has_resource_version {
        return None;
    }
    let (api_version, kind) = (api_version?, kind?);
    let before = if kind < api_version {
        metadata.before_ordered
    } else {
        metadata.before_sorted
    };
    Some(Layout {
        api_version,
        kind,
        point: SplicePoint::in_metadata(metadata.at, metadata.members, before),
    })
}

/// The fields of `ObjectMeta` before `resourceVersion`, in upstream's order.
const BEFORE_RESOURCE_VERSION: [&[u8]; 5] =
    [b"name", b"generateName", b"namespace", b"selfLink", b"uid"];

/// Whether the resourceVersion goes after `key`, a key of metadata, rather than after
/// `before` (the key it went after so far, with where its value ends). In upstream's order
/// (`ordered`) it goes after the last of [`BEFORE_RESOURCE_VERSION`] present (they come first);
/// with sorted keys, after the greatest key that sorts before it. Keys compare as their bytes:
/// neither the scanner nor the encoder's probe lays out keys with escapes.
fn goes_before(key: &[u8], before: Option<(&[u8], usize)>, ordered: bool) -> bool {
    if ordered {
        BEFORE_RESOURCE_VERSION.contains(&key)
    } else {
        key < b"resourceVersion".as_slice() && before.is_none_or(|(before, _)| key > before)
    }
}

impl SplicePoint {
    /// Where the resourceVersion goes in a metadata object whose brace is at `brace`, with
    /// `members` members and `before` its greatest key before `resourceVersion` with where
    /// that key's value ends: after that value, else first in metadata.
    fn in_metadata(brace: usize, members: usize, before: Option<(&[u8], usize)>) -> Self {
        match before {
            Some((_, end)) => SplicePoint {
                at: end,
                comma_before: true,
                comma_after: false,
            },
            None => SplicePoint {
                at: brace + 1,
                comma_before: false,
                comma_after: members > 0,
            },
        }
    }
}

/// What [`layout`] learns of `metadata` (in `'t`, the stored bytes).
#[derive(Default)]
struct Metadata<'t> {
    /// Where the object starts (its brace).
    at: usize,
    /// How many members it has.
    members: usize,
    /// Whether one is `resourceVersion`.
    has_resource_version: bool,
    /// The key the resourceVersion goes after and where its value ends, were metadata's keys
    /// sorted (the greatest before it) or in upstream's order.
    before_sorted: Option<(&'t [u8], usize)>,
    before_ordered: Option<(&'t [u8], usize)>,
}

/// Steps through the JSON object at `at` in `text` member by member: `member` gets each key
/// (its characters) and where its value starts, and answers where the value ends (stepping
/// over it with [`value_end`], or reading it). Answers where the object ends, past its brace.
///
/// The splice point needs the top level and metadata only, and reading every value (as a
/// parse does) cost more than serializing the object. The structure is checked (strings
/// close, brackets open and close in equal number, members are `"key":value` separated by
/// commas), not the values' contents, which are served as stored. `None` for anything else, and for keys that hold
/// escapes (then the caller decodes).
fn each_member<'t>(
    text: &'t [u8],
    at: usize,
    mut member: impl FnMut(&'t [u8], usize) -> Option<usize>,
) -> Option<usize> {
    let mut i = skip_space(text, at);
    if text.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_space(text, i + 1);
    if text.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    loop {
        if text.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(text, i)?;
        let key = &text[i + 1..key_end - 1];
        if key.contains(&b'\\') {
            return None;
        }
        i = skip_space(text, key_end);
        if text.get(i) != Some(&b':') {
            return None;
        }
        let end = member(key, skip_space(text, i + 1))?;
        i = skip_space(text, end);
        match text.get(i) {
            Some(b',') => i = skip_space(text, i + 1),
            Some(b'}') => return Some(i + 1),
            _ => return None,
        }
    }
}

#[inline]
fn skip_space(text: &[u8], mut i: usize) -> usize {
    while matches!(text.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// Where the first `"` or `\` in `bytes` is: eight bytes at a time until a word holds one
/// (the strings of an object are most of its bytes).
#[inline]
fn quote_or_backslash(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_ne_bytes([b'\\'; 8]);
    let has_zero = |word: u64| word.wrapping_sub(ONES) & !word & HIGH != 0;
    let mut i = 0;
    for chunk in bytes.chunks_exact(8) {
        let word = u64::from_ne_bytes(chunk.try_into().ok()?);
        if has_zero(word ^ QUOTES) || has_zero(word ^ BACKSLASHES) {
            break;
        }
        i += 8;
    }
    let rest = bytes[i..].iter().position(|&c| c == b'"' || c == b'\\')?;
    Some(i + rest)
}

/// Where the string that opens at `at` (its `"`) ends, past its closing quote.
#[inline]
fn string_end(text: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        i += quote_or_backslash(text.get(i..)?)?;
        if text[i] == b'"' {
            return Some(i + 1);
        }
        // An escape: the character after the backslash is never the end (a `\u` escape's
        // hex digits are plain characters after it).
        i += 2;
    }
}

/// Where the value that starts at `at` ends.
fn value_end(text: &[u8], at: usize) -> Option<usize> {
    match text.get(at)? {
        b'"' => string_end(text, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match text.get(i)? {
                    b'"' => {
                        i = string_end(text, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            // A number, true, false or null: up to the next delimiter.
            let len = text[at..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(text.len() - at);
            (len > 0).then_some(at + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The splice point as a full parse finds it: the reference the scanner must agree with.
    fn splice_point_by_parsing(
        stored: &[u8],
        api_version: &str,
        kind: &str,
        ordered: bool,
    ) -> Option<SplicePoint> {
        use serde_json::value::RawValue;
        use std::collections::BTreeMap;
        let is_string = |raw: Option<&&RawValue>, expected: &str| {
            raw.and_then(|raw| raw.get().strip_prefix('"')?.strip_suffix('"'))
                .is_some_and(|inner| inner == expected)
        };
        let offset = |inner: &str| inner.as_ptr() as usize - stored.as_ptr() as usize;
        let top = serde_json::from_slice::<BTreeMap<&str, &RawValue>>(stored).ok()?;
        if !is_string(top.get("apiVersion"), api_version) || !is_string(top.get("kind"), kind) {
            return None;
        }
        if (offset(top["kind"].get()) < offset(top["apiVersion"].get())) != ordered {
            return None;
        }
        let metadata = top.get("metadata").map(|raw| raw.get())?;
        if !metadata.starts_with('{') {
            return None;
        }
        let fields = serde_json::from_str::<BTreeMap<&str, &RawValue>>(metadata).ok()?;
        if fields.contains_key("resourceVersion") {
            return None;
        }
        let before = if ordered {
            fields
                .iter()
                .filter(|(key, _)| BEFORE_RESOURCE_VERSION.contains(&key.as_bytes()))
                .max_by_key(|(_, value)| offset(value.get()))
        } else {
            fields.range(.."resourceVersion").next_back()
        };
        Some(match before {
            Some((_, before)) => SplicePoint {
                at: offset(before.get()) + before.get().len(),
                comma_before: true,
                comma_after: false,
            },
            None => SplicePoint {
                at: offset(metadata) + 1,
                comma_before: false,
                comma_after: !fields.is_empty(),
            },
        })
    }

    #[test]
    fn the_scanner_finds_the_splice_point_a_parse_finds() {
        let tricky = "q\"}]{[,:\\\u{e9}\u{22} \\u0022";
        let objects = [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": tricky}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"k": [1, {"x": tricky}, [], null, true, -1.5e3]}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"annotations": {"a": tricky}, "uid": "u", "labels": {"x": "y"}}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"uid": "u", "selfLink": "s"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"resourceVersion": "3"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "3", "uid": "u"}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}}),
            json!({"apiVersion": "v2", "kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "nope"}),
            json!({"apiVersion": "v1", "kind": "ConfigMap"}),
            json!({"apiVersion": 1, "kind": "ConfigMap", "metadata": {}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"na\"me": "a"}}),
            json!({"a\"b": 1, "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "ownerReferences": [{"uid": "}"}], "zz": 1}}),
        ];
        let mut texts: Vec<Vec<u8>> = Vec::new();
        for object in &objects {
            texts.push(serde_json::to_vec(object).unwrap());
            texts.push(serde_json::to_vec_pretty(object).unwrap());
            texts.push(genplane_api::order::to_vec(object));
            texts.push(serde_json::to_vec_pretty(&genplane_api::order::ordered(object)).unwrap());
        }
        texts.push(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}} x"#.to_vec());
        texts.push(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}"#.to_vec());
        texts.push(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a}}"#.to_vec());
        texts.push(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name" "a"}}"#.to_vec());
        texts.push(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a",}}"#.to_vec());
        // Quotes and backslashes at every place within and across eight-byte words.
        for n in 0..20 {
            for special in ["\"", "\\", "\\\"", "\u{e9}"] {
                let value = format!("{}{special}{}", "a".repeat(n), "b".repeat(20 - n));
                let object = json!({"apiVersion": "v1", "data": {"k": value}, "kind": "ConfigMap", "metadata": {"name": value, "uid": "u"}});
                texts.push(serde_json::to_vec(&object).unwrap());
                texts.push(genplane_api::order::to_vec(&object));
            }
        }
        texts.push(b"[]".to_vec());
        texts.push(b"".to_vec());
        let mut found = [0, 0];
        for text in &texts {
            let hint = layout_hint(text);
            assert_ne!(hint, 0);
            for (api_version, kind) in [("v1", "ConfigMap"), ("v1", "Secret"), ("v2", "ConfigMap")]
            {
                for ordered in [false, true] {
                    let scanned = splice_point(text, api_version, kind, ordered, 0);
                    let parsed = splice_point_by_parsing(text, api_version, kind, ordered);
                    let shown = String::from_utf8_lossy(text);
                    let case = format!("{shown} as {api_version} {kind}, ordered: {ordered}");
                    assert_eq!(scanned, parsed, "{case}");
                    // The layout a cache kept with the bytes says the same.
                    let hinted = splice_point(text, api_version, kind, ordered, hint);
                    assert_eq!(hinted, scanned, "{case}, hinted");
                    if hint == HINT_NO_LAYOUT {
                        // Bytes without a layout are not read again.
                        assert_eq!(scanned, None, "{case}");
                        assert_eq!(splice_point(b"", api_version, kind, ordered, hint), None);
                    }
                    if (api_version, kind) == ("v1", "ConfigMap") {
                        found[usize::from(ordered)] += usize::from(scanned.is_some());
                    }
                }
            }
        }
        assert_eq!(
            found,
            [10 + 20 * 4; 2],
            "the well-formed ConfigMaps with metadata objects, sorted and ordered"
        );
        // And what is served is the object with its resourceVersion, in upstream's order.
        let stored = encode(&objects[0]).unwrap();
        let mut out = Vec::new();
        assert!(served_json_into(
            &stored,
            7,
            "v1",
            "ConfigMap",
            true,
            &mut out
        ));
        assert!(!served_json_into(
            &stored,
            7,
            "v1",
            "ConfigMap",
            false,
            &mut out
        ));
        let mut expected = objects[0].clone();
        expected["metadata"]["resourceVersion"] = json!("7");
        assert_eq!(out, genplane_api::order::to_vec(&expected));
        assert!(out.starts_with(br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"7"},"data""#));
    }

    #[test]
    fn stored_objects_carry_no_resource_version_and_get_it_back_on_read() {
        let object = json!({"metadata": {"name": "a", "resourceVersion": "5"}, "data": {"k": "v"}});
        let stored = encode(&object).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&stored).unwrap(),
            json!({"metadata": {"name": "a"}, "data": {"k": "v"}})
        );
        assert_eq!(
            decode(&stored, 9).unwrap()["metadata"]["resourceVersion"],
            "9"
        );
    }

    #[test]
    fn served_json_is_the_decoded_object_serialized() {
        let objects = [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n", "uid": "u"}, "data": {"k": "v\n\"q\""}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"uid": "u", "selfLink": "x"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"annotations": {"resourceVersion": "no"}, "name": "a"}, "zz": [1, 2.5, null, {"a": {}}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "ünï", "labels": {"a\"b": "c"}}, "rules": []}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"uid": "u", "namespace": "n", "creationTimestamp": "2026-01-01T00:00:00Z", "generateName": "g", "annotations": {"a": "b"}}}),
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"uid": "u", "name": "a", "labels": {"x": "y"}}, "spec": {"b": 1, "a": 2}}),
        ];
        for object in objects {
            let stored = encode(&object).unwrap();
            let api_version = object["apiVersion"].as_str().unwrap();
            let kind = object["kind"].as_str().unwrap();
            let ordered = genplane_api::order::schema_of(api_version, kind).is_some();
            let mut served = b"prefix".to_vec();
            assert!(
                served_json_into(&stored, 42, api_version, kind, ordered, &mut served),
                "{object}"
            );
            let expected = genplane_api::order::to_vec(&decode(&stored, 42).unwrap());
            assert_eq!(
                String::from_utf8_lossy(&served[6..]),
                String::from_utf8_lossy(&expected)
            );
            assert_eq!(&served[..6], b"prefix");
            for revision in [1, 9, 10, 42, 999_999_999_999] {
                let stored = stored.clone();
                let kept =
                    ServedJson::of(&stored, revision, api_version, kind, ordered, 0).unwrap();
                let mut written = Vec::new();
                kept.write_into(&mut written);
                let expected = genplane_api::order::to_vec(&decode(&stored, revision).unwrap());
                assert_eq!(
                    String::from_utf8_lossy(&written),
                    String::from_utf8_lossy(&expected)
                );
                assert_eq!(kept.len(), written.len(), "{object} at {revision}");
            }
        }
    }

    #[test]
    fn the_layout_noted_while_encoding_is_the_layout_of_the_bytes() {
        let tricky = "q\"}]{[,:\\\u{e9}";
        let objects = [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n", "resourceVersion": "4", "uid": "u"}, "data": {"k": tricky}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"resourceVersion": "4"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"uid": "u", "selfLink": "x"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"annotations": {"resourceVersion": "no", "a\"b": "c"}, "name": "a"}, "zz": [1, {"metadata": {}}]}),
            json!({"Zeta": 1, "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "ünï"}, "rules": []}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "x".repeat(70_000)}}),
        ];
        for object in &objects {
            let (stored, hint) = encode_with_layout(object).unwrap();
            assert_eq!(stored, encode(object).unwrap());
            assert_ne!(hint, 0, "{object}");
            assert_eq!(hint, layout_hint(&stored), "{object}");
        }
        // What has no layout, or keys the scanner does not read, leaves the looking to readers.
        let without = [
            json!({"kind": "ConfigMap", "metadata": {}}),
            json!({"apiVersion": 1, "kind": "ConfigMap", "metadata": {}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "m"}),
            json!({"apiVersion": "v1", "kind": "ConfigMap"}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"na\"me": "a"}}),
            json!({"a\\b": 1, "apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
            json!({"a\nb": 1, "apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
            json!([1, 2]),
        ];
        for object in &without {
            let (stored, hint) = encode_with_layout(object).unwrap();
            assert_eq!(hint, 0, "{object}");
            assert_eq!(layout_hint(&stored), HINT_NO_LAYOUT, "{object}");
        }
        // An object beyond the word's offsets is laid out again when read (in upstream's order
        // the resourceVersion goes before the data, so only a long name puts it that far).
        let big = json!({"apiVersion": "v1", "data": {"k": "x".repeat(4_200_000)}, "kind": "ConfigMap", "metadata": {"name": "a"}});
        assert_ne!(encode_with_layout(&big).unwrap().1, HINT_TOO_FAR);
        let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x".repeat(4_200_000)}});
        assert_eq!(encode_with_layout(&big).unwrap().1, HINT_TOO_FAR);
    }

    #[test]
    fn layout_hints_hold_every_offset_that_fits_and_no_other() {
        for (api_version, kind, at) in [(0, 0, 0), (14, 40, 90), (65_535, 4_194_303, 4_194_303)] {
            for (comma_before, comma_after) in [(false, false), (true, false), (false, true)] {
                let layout = Layout {
                    api_version,
                    kind,
                    point: SplicePoint {
                        at,
                        comma_before,
                        comma_after,
                    },
                };
                let hint = layout.to_hint().unwrap();
                assert_eq!(hint & (HINT_LAID_OUT | HINT_NO_LAYOUT), HINT_LAID_OUT);
                assert_eq!(Layout::from_hint(hint), layout);
            }
        }
        let far = |api_version, kind, at| Layout {
            api_version,
            kind,
            point: SplicePoint {
                at,
                comma_before: true,
                comma_after: false,
            },
        };
        // A hint that does not fit the bytes handed with it is not theirs: they are read.
        let stored =
            encode(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}))
                .unwrap();
        let foreign = far(14, 33, stored.len() + 1).to_hint().unwrap();
        assert_eq!(
            splice_point(&stored, "v1", "ConfigMap", true, foreign),
            splice_point(&stored, "v1", "ConfigMap", true, 0)
        );
        assert!(splice_point(&stored, "v1", "ConfigMap", true, 0).is_some());
        assert_eq!(far(65_536, 0, 0).to_hint(), None);
        assert_eq!(far(0, 4_194_304, 0).to_hint(), None);
        assert_eq!(far(0, 0, 4_194_304).to_hint(), None);
        // An object too big for the word is laid out again at each read, and served as stored.
        let big = json!({"apiVersion": "v1", "data": {"k": "x"}, "kind": "ConfigMap", "metadata": {"name": "x".repeat(4_200_000)}});
        let stored = encode(&big).unwrap();
        let hint = layout_hint(&stored);
        assert_eq!(hint, HINT_TOO_FAR);
        let served = ServedJson::of(&stored, 5, "v1", "ConfigMap", true, hint).unwrap();
        let mut written = Vec::new();
        served.write_into(&mut written);
        assert_eq!(
            written,
            genplane_api::order::to_vec(&decode(&stored, 5).unwrap())
        );
        assert!(ServedJson::of(&stored, 5, "v1", "Secret", true, hint).is_none());
    }

    #[test]
    fn served_json_leaves_what_it_cannot_serve_verbatim_to_decoding() {
        let cases: [(&[u8], &str); 8] = [
            (
                br#"{"kind":"Secret","apiVersion":"v1","metadata":{}}"#,
                "other kind",
            ),
            (
                br#"{"kind":"ConfigMap","apiVersion":"v2","metadata":{}}"#,
                "other version",
            ),
            (br#"{"kind":"ConfigMap","metadata":{}}"#, "no apiVersion"),
            (br#"{"kind":"ConfigMap","apiVersion":"v1"}"#, "no metadata"),
            (
                br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":[]}"#,
                "metadata not an object",
            ),
            (
                br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"3"}}"#,
                "stored resourceVersion",
            ),
            (
                br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{},"a\u0062":1}"#,
                "escaped key",
            ),
            (
                br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#,
                "sorted keys (stored before objects were written in upstream's order)",
            ),
        ];
        for (stored, case) in cases {
            let mut out = Vec::new();
            assert!(
                !served_json_into(stored, 7, "v1", "ConfigMap", true, &mut out),
                "{case}"
            );
            assert!(out.is_empty(), "{case}");
        }
        let mut out = Vec::new();
        assert!(served_json_into(
            br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{}}"#,
            7,
            "v1",
            "ConfigMap",
            true,
            &mut out
        ));
        let mut out = Vec::new();
        assert!(!served_json_into(
            b"{not json",
            7,
            "v1",
            "ConfigMap",
            true,
            &mut out
        ));
    }

    #[test]
    fn metadata_helpers_tolerate_missing_metadata() {
        let mut object = json!({"kind": "ConfigMap"});
        assert_eq!(meta_str(&object, "name"), "");
        set_meta_str(&mut object, "name", "a");
        assert_eq!(object["metadata"]["name"], "a");
        set_finalizers(&mut object, &["x".into()]);
        assert_eq!(finalizers(&object), vec!["x".to_owned()]);
        set_finalizers(&mut object, &[]);
        assert!(object["metadata"].get("finalizers").is_none());
        assert!(object_meta(&json!({"metadata": {"labels": 5}})).is_err());
    }

    #[test]
    fn the_stored_form_is_the_object_serialized_without_its_resource_version() {
        let objects = [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "7", "uid": "u"}, "data": {"k": "v"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"annotations": {"resourceVersion": "kept"}}}),
            json!({"kind": "X", "metadata": "not an object", "resourceVersion": "kept"}),
            json!({"kind": "X"}),
            json!([1, 2]),
        ];
        for object in objects {
            let mut expected = object.clone();
            if let Some(metadata) = expected.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("resourceVersion");
            }
            let stored = encode(&object).unwrap();
            assert_eq!(stored, genplane_api::order::to_vec(&expected), "{object}");
        }
    }
}
