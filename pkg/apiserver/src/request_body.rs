//! Request bodies as the API reads them, without storage: the media type, JSON, YAML or
//! Kubernetes protobuf, the object's `apiVersion` and `kind` against the URL's, and
//! `fieldValidation` (unknown and repeated fields). Everything a client can send passes through
//! here before the registry sees it, which makes it the target of the decoding fuzzer.

use genplane_apimachinery::codec::protobuf;
use genplane_apimachinery::errors::{ApiError, Status};
use serde_json::{Map, Value};

use crate::kind::ServedKind;
use crate::negotiation::{self, BodyFormat};

/// The body of a create or update of `info`'s resource, sent with `content_type`, read as a
/// JSON object whose `apiVersion` and `kind` match the URL's (filled in when missing), plus the
/// warnings of `fieldValidation` (`field_validation`, the query parameter, Warn when unset).
/// A protobuf body's `typeMeta` gets the same check before its message is read with the
/// resource's schema.
pub fn decode_object(
    info: &ServedKind,
    content_type: Option<&str>,
    field_validation_mode: Option<&str>,
    bytes: &[u8],
) -> Result<(Value, Vec<String>), ApiError> {
    let format = negotiation::body_format(content_type)?;
    // YAML with a repeated key is refused by the parser; protobuf cannot repeat one.
    let (mut object, duplicates) = match format {
        BodyFormat::Protobuf => (protobuf_body(info, bytes)?, Vec::new()),
        BodyFormat::Json => genplane_apimachinery::json::parse(bytes).map_err(not_json)?,
        BodyFormat::Yaml => (decode_body(bytes, format)?, Vec::new()),
    };
    let map = object
        .as_object_mut()
        .ok_or_else(|| ApiError::from(Status::bad_request("the body must be a JSON object")))?;
    check_type_meta(info, map)?;
    let text = (format == BodyFormat::Json).then_some(bytes);
    let warnings =
        field_validation_in_order(info, field_validation_mode, &object, &duplicates, text)?;
    Ok((object, warnings))
}

/// Decodes a JSON or YAML body (protobuf needs the resource's schema: see
/// `Ctx::object_body` in the handlers).
pub(crate) fn decode_body(bytes: &[u8], format: BodyFormat) -> Result<Value, ApiError> {
    match format {
        BodyFormat::Json => serde_json::from_slice(bytes).map_err(not_json),
        BodyFormat::Yaml => {
            let text = std::str::from_utf8(bytes).map_err(|e| {
                ApiError::from(Status::bad_request(format!(
                    "the request body is not UTF-8: {e}"
                )))
            })?;
            genplane_apimachinery::yaml::from_str(text).map_err(|e| {
                Status::bad_request(format!("the request body is not valid YAML: {e}")).into()
            })
        }
        BodyFormat::Protobuf => Err(Status::unsupported_media_type(
            protobuf::CONTENT_TYPE,
            &["application/json", "application/yaml"],
        )
        .into()),
    }
}

/// The answer to a body that is not JSON.
fn not_json(error: serde_json::Error) -> ApiError {
    Status::bad_request(format!("the request body is not valid JSON: {error}")).into()
}

/// Reads a protobuf body: the envelope, its `typeMeta` (checked as a JSON body's
/// `apiVersion` and `kind` are), then the object's message.
fn protobuf_body(info: &ServedKind, bytes: &[u8]) -> Result<Value, ApiError> {
    let kind = info.kind.as_str();
    let Some(schema) = info.protobuf() else {
        return Err(Status::unsupported_media_type(
            "application/vnd.kubernetes.protobuf",
            &["application/json", "application/yaml"],
        )
        .into());
    };
    let envelope = protobuf::read_envelope(bytes).map_err(|e| e.to_unrecognized_error(kind))?;
    let mut type_meta = Map::new();
    for (name, value) in [
        ("apiVersion", &envelope.api_version),
        ("kind", &envelope.kind),
    ] {
        if !value.is_empty() {
            type_meta.insert(name.into(), Value::from(value.as_str()));
        }
    }
    check_type_meta(info, &mut type_meta)?;
    protobuf::decode_object(&envelope, schema).map_err(|e| e.to_api_error(kind, &info.version))
}

/// Checks a body's `apiVersion` and `kind` against the URL's (400 on a mismatch) and fills
/// in the missing ones.
fn check_type_meta(info: &ServedKind, map: &mut Map<String, Value>) -> Result<(), ApiError> {
    let expected_version = info.api_version();
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), Value::from(expected_version));
        }
        Some(v) if v != expected_version => {
            return Err(Status::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({expected_version})"
            ))
            .into());
        }
        Some(_) => {}
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), Value::from(info.kind.as_str()));
        }
        Some(k) if k != info.kind => {
            return Err(Status::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                info.kind
            ))
            .into());
        }
        Some(_) => {}
    }
    Ok(())
}

/// What the `fieldValidation` parameter asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    /// Problems refuse the write (400).
    Strict,
    /// Problems are warnings (the default).
    Warn,
    /// Problems are ignored.
    Ignore,
}

impl FieldValidation {
    /// The parameter's value (`None` when not given: Warn), or upstream's 400.
    pub fn parse(mode: Option<&str>) -> Result<FieldValidation, ApiError> {
        match mode.unwrap_or("") {
            "Strict" => Ok(FieldValidation::Strict),
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Ignore" => Ok(FieldValidation::Ignore),
            other => Err(Status::bad_request(format!(
                "fieldValidation parameter unsupported: {} (supported: Strict, Warn, Ignore)",
                genplane_apimachinery::gofmt::Quoted(other)
            ))
            .into()),
        }
    }
}

/// Applies `fieldValidation` to the unknown fields of `object` and the repeated keys of
/// its text (`duplicates`): Strict refuses them (400), Warn (the default) returns them as
/// warnings, Ignore ignores them.
pub fn field_validation(
    info: &ServedKind,
    mode: Option<&str>,
    object: &Value,
    duplicates: &[String],
) -> Result<Vec<String>, ApiError> {
    field_validation_in_order(info, mode, object, duplicates, None)
}

/// [`field_validation`] of a body whose JSON `text` is given: the problems are listed in the
/// order they appear in it (a repeat where it repeats), as upstream's strict decoding lists
/// them; without the text, repeats first, then unknown fields.
fn field_validation_in_order(
    info: &ServedKind,
    mode: Option<&str>,
    object: &Value,
    duplicates: &[String],
    text: Option<&[u8]>,
) -> Result<Vec<String>, ApiError> {
    let strict = match FieldValidation::parse(mode)? {
        FieldValidation::Strict => true,
        FieldValidation::Warn => false,
        FieldValidation::Ignore => return Ok(Vec::new()),
    };
    let unknown = info.unknown_fields(object)?;
    let mut problems: Vec<(&str, &String)> = duplicates
        .iter()
        .map(|f| ("duplicate", f))
        .chain(unknown.iter().map(|f| ("unknown", f)))
        .collect();
    if problems.len() > 1
        && let Some(paths) = text.and_then(|t| genplane_apimachinery::json::key_paths(t).ok())
    {
        // A field's place: where it first appears, a repeat where it appears again.
        let place = |(what, path): &(&str, &String)| {
            let mut at = paths.iter().enumerate().filter(|(_, p)| p == path);
            let first = at.next().map(|(i, _)| i);
            match *what {
                "duplicate" => at.next().map(|(i, _)| i).or(first),
                _ => first,
            }
            .unwrap_or(usize::MAX)
        };
        problems.sort_by_key(place);
    }
    let messages: Vec<String> = problems
        .iter()
        .map(|(what, path)| {
            format!(
                "{what} field {}",
                genplane_apimachinery::gofmt::Quoted(path)
            )
        })
        .collect();
    if strict && !messages.is_empty() {
        return Err(
            Status::bad_request(format!("strict decoding error: {}", messages.join(", "))).into(),
        );
    }
    Ok(messages)
}

/// The media types a body may be sent in, for [`exercise`].
const MEDIA_TYPES: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

/// The `fieldValidation` values, for [`exercise`].
const MODES: [Option<&str>; 4] = [None, Some("Strict"), Some("Warn"), Some("Ignore")];

/// Runs one arbitrary input through everything a create, update or merge patch does before
/// storage: the first byte picks the resource, the second the media type and `fieldValidation`
/// mode, the rest is the body. Every outcome must be an object or a client error (4xx); a
/// panic or a server error is a bug, which is what the fuzz target (`fuzz/`) and the test
/// driving this with mutated bodies look for.
///
/// # Panics
///
/// When the input makes the decoding answer a server error: that is the bug being hunted.
pub fn exercise(data: &[u8]) {
    exercise_with(data, &|info| {
        Box::new(genplane_registry::CatalogStrategy::new(info))
    });
}

/// [`exercise`] with the strategy `strategy_of` gives each resource (a control plane's own,
/// e.g. CustomResourceDefinitions with their schema checks).
///
/// # Panics
///
/// When the input makes the decoding answer a server error: that is the bug being hunted.
pub fn exercise_with(
    data: &[u8],
    strategy_of: &dyn Fn(
        &'static genplane_api::catalog::ResourceInfo,
    ) -> Box<dyn genplane_registry::Strategy>,
) {
    let [which, how, body @ ..] = data else {
        return;
    };
    let catalog = genplane_api::catalog::all();
    let info = &catalog[usize::from(*which) % catalog.len()];
    let kind = ServedKind::builtin(info);
    let media = MEDIA_TYPES[usize::from(how & 3) % MEDIA_TYPES.len()];
    let mode = MODES[usize::from(how >> 2) % MODES.len()];
    let client_error = |e: &ApiError| {
        assert!(
            (400..500).contains(&e.code),
            "{} body for {}: answered {}: {e}",
            media,
            info.resource,
            e.code
        );
    };
    let object = match decode_object(&kind, Some(media), mode, body) {
        Ok((object, _)) => object,
        Err(e) => return client_error(&e),
    };
    let strategy = strategy_of(info);
    let mut object = match strategy.decode(object) {
        Ok(object) => object,
        Err(e) => return client_error(&e),
    };
    strategy.default(&mut object);
    strategy.prepare_for_create(&mut object);
    match strategy.validate(&object) {
        Ok(_) => {}
        Err(e) => return client_error(&e),
    }
    // The same body as a merge patch onto what would have been stored, then an update.
    if let Ok(patch) = serde_json::from_slice::<Value>(body) {
        let mut patched = object.clone();
        json_patch::merge(&mut patched, &patch);
        if let Err(e) = field_validation(&kind, mode, &patched, &[]) {
            return client_error(&e);
        }
        match strategy.decode(patched) {
            Ok(mut patched) => {
                strategy.prepare_for_update(&mut patched, &object);
                if let Err(e) = strategy.validate_update(&patched, &object) {
                    client_error(&e);
                }
            }
            Err(e) => client_error(&e),
        }
    }
}
