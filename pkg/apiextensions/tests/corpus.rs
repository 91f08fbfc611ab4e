//! The data-driven corpus of custom-resource validation, defaulting and pruning:
//! `tests/corpus/*.yaml`, one file per topic.
//!
//! # Format
//!
//! ```yaml
//! schema: {...}            # optional: the openAPIV3Schema every case of the file uses
//! cases:
//!   - name: replicas must be an integer
//!     schema: {...}        # optional: this case's schema (instead of the file's)
//!     object: {...}        # the custom resource as a client sends it
//!     oldObject: {...}     # optional: makes the case an update (ratcheting), read as from storage
//!     raw: true            # optional: validate `object` as given, without pruning/defaulting
//!     expect: valid        # or a list of errors, matched one to one (order does not matter):
//!     # expect:
//!     #   - field: spec.replicas        # the error's field path
//!     #     type: TypeInvalid           # Invalid | TypeInvalid | Required | NotSupported |
//!     #                                 # Duplicate | TooLong | TooMany | Forbidden
//!     #     detail: must be of type     # optional: a substring of the rendered error
//!     pruned: [spec.foo]   # optional: the unknown-field paths dropped (as Strict reports them)
//!     defaulted: {...}     # optional: the object after pruning and defaulting
//!     needs: cel           # optional: the case needs something not implemented here
//!                          # (CEL rules, `x-kubernetes-validations` with self/oldSelf); skipped
//! ```
//!
//! A case runs as the server would: the object is pruned and coerced
//! (`pruning::normalize` as from a request), defaulted, then validated (`validation::validate`,
//! or `validation::validate_update` against `oldObject` normalized as from storage).

use std::path::PathBuf;

use genplane_apiextensions::defaulting::default;
use genplane_apiextensions::pruning::{Source, normalize};
use genplane_apiextensions::schema::Structural;
use genplane_apiextensions::validation::{validate, validate_update};
use genplane_apimachinery::validation::field::{ErrorList, ErrorType};
use serde_json::Value;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

fn load(file: &str) -> Value {
    let path = corpus_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
        legacy_octal_numbers: false,
        strict_booleans: true,
    };
    serde_saphyr::from_str_with_options::<Value>(&text, options)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn type_name(t: ErrorType) -> &'static str {
    match t {
        ErrorType::NotFound => "NotFound",
        ErrorType::Required => "Required",
        ErrorType::Duplicate => "Duplicate",
        ErrorType::Invalid => "Invalid",
        ErrorType::NotSupported => "NotSupported",
        ErrorType::Forbidden => "Forbidden",
        ErrorType::TooLong => "TooLong",
        ErrorType::TooMany => "TooMany",
        ErrorType::Internal => "Internal",
        ErrorType::TypeInvalid => "TypeInvalid",
    }
}

/// Processes an object as the server does before validating it.
fn prepare(
    schema: &Structural,
    object: &mut Value,
    source: Source,
    raw: bool,
) -> Result<Vec<String>, ErrorList> {
    if raw {
        return Ok(Vec::new());
    }
    let unknown = normalize(schema, object, source).map_err(|e| ErrorList(vec![e]))?;
    default(schema, object);
    Ok(unknown)
}

/// Compares expected errors with actual ones; a description of the mismatch, if any.
fn compare_errors(expect: &Value, actual: &ErrorList) -> Option<String> {
    let rendered: Vec<String> = actual.iter().map(ToString::to_string).collect();
    match expect {
        Value::String(s) if s == "valid" => {
            (!actual.is_empty()).then(|| format!("expected valid, got {rendered:#?}"))
        }
        Value::Array(expected) => {
            let mut unmatched: Vec<usize> = (0..actual.0.len()).collect();
            for e in expected {
                let field = e.get("field").and_then(Value::as_str).unwrap_or_default();
                let kind = e.get("type").and_then(Value::as_str).unwrap_or_default();
                let detail = e.get("detail").and_then(Value::as_str).unwrap_or_default();
                let found = unmatched.iter().position(|&i| {
                    let a = &actual.0[i];
                    a.field.as_str() == field
                        && type_name(a.kind) == kind
                        && rendered[i].contains(detail)
                });
                match found {
                    Some(pos) => {
                        unmatched.remove(pos);
                    }
                    None => {
                        return Some(format!(
                            "expected error {{field: {field}, type: {kind}, detail: {detail:?}}} not found in {rendered:#?}"
                        ));
                    }
                }
            }
            (!unmatched.is_empty()).then(|| {
                let extra: Vec<&String> = unmatched.iter().map(|&i| &rendered[i]).collect();
                format!("unexpected errors {extra:#?}")
            })
        }
        other => Some(format!("bad `expect`: {other}")),
    }
}

/// Runs one case; `Err` describes how it failed.
fn run_case(file_schema: Option<&Value>, case: &Value) -> Result<(), String> {
    let schema_json = case.get("schema").or(file_schema).ok_or("no schema")?;
    let schema = Structural::new(schema_json).map_err(|e| format!("schema: {e}"))?;
    let raw = case.get("raw").and_then(Value::as_bool).unwrap_or(false);
    let mut object = case.get("object").cloned().ok_or("no object")?;
    let mut problems = Vec::new();

    let (errors, unknown) = match prepare(&schema, &mut object, Source::Request, raw) {
        Err(errors) => (errors, Vec::new()),
        Ok(unknown) => {
            let errors = match case.get("oldObject") {
                Some(old) => {
                    let mut old = old.clone();
                    prepare(&schema, &mut old, Source::Storage, raw)
                        .map_err(|e| format!("oldObject: {e}"))?;
                    validate_update(&schema, &object, &old)
                }
                None => validate(&schema, &object),
            };
            (errors, unknown)
        }
    };
    if let Some(expect) = case.get("expect")
        && let Some(problem) = compare_errors(expect, &errors)
    {
        problems.push(problem);
    }
    if let Some(pruned) = case.get("pruned") {
        let expected: Vec<String> = pruned
            .as_array()
            .ok_or("`pruned` must be a list")?
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect();
        if expected != unknown {
            problems.push(format!("pruned: expected {expected:?}, got {unknown:?}"));
        }
    }
    if let Some(defaulted) = case.get("defaulted")
        && *defaulted != object
    {
        problems.push(format!("defaulted: expected {defaulted}, got {object}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n  "))
    }
}

/// Runs every case of a file: (ran, skipped).
fn run_file(file: &str) -> (usize, usize) {
    let doc = load(file);
    let cases = doc
        .get("cases")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("{file}: no cases"));
    let mut failures = Vec::new();
    let mut names = std::collections::HashSet::new();
    let (mut ran, mut skipped) = (0, 0);
    for case in cases {
        let name = case
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("<unnamed>");
        assert!(
            names.insert(name.to_owned()),
            "{file}: duplicate case name {name:?}"
        );
        if case.get("needs").is_some() {
            skipped += 1;
            continue;
        }
        ran += 1;
        if let Err(problem) = run_case(doc.get("schema"), case) {
            failures.push(format!("{file}: {name}:\n  {problem}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing case(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    (ran, skipped)
}

const FILES: &[&str] = &[
    "types.yaml",
    "formats.yaml",
    "values.yaml",
    "objects_and_lists.yaml",
    "junctors.yaml",
    "embedded.yaml",
    "pruning.yaml",
    "defaulting.yaml",
    "ratcheting.yaml",
    "cel.yaml",
];

#[test]
fn corpus_files_are_all_listed() {
    let mut on_disk: Vec<String> = std::fs::read_dir(corpus_dir())
        .expect("corpus directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = FILES.iter().map(|s| (*s).to_owned()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

#[test]
fn corpus_has_at_least_90_runnable_cases() {
    let mut ran = 0;
    for file in FILES {
        let doc = load(file);
        ran += doc["cases"]
            .as_array()
            .map_or(0, |c| c.iter().filter(|c| c.get("needs").is_none()).count());
    }
    assert!(ran >= 90, "only {ran} runnable cases");
}

macro_rules! corpus_file {
    ($test:ident, $file:literal) => {
        #[test]
        fn $test() {
            let (ran, _skipped) = run_file($file);
            assert!(ran > 0 || $file == "cel.yaml");
        }
    };
}

corpus_file!(types, "types.yaml");
corpus_file!(formats, "formats.yaml");
corpus_file!(values, "values.yaml");
corpus_file!(objects_and_lists, "objects_and_lists.yaml");
corpus_file!(junctors, "junctors.yaml");
corpus_file!(embedded, "embedded.yaml");
corpus_file!(pruning, "pruning.yaml");
corpus_file!(defaulting, "defaulting.yaml");
corpus_file!(ratcheting, "ratcheting.yaml");
corpus_file!(cel, "cel.yaml");
