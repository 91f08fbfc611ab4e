//! Tables of custom resources: the `Name` column, then the version's
//! `additionalPrinterColumns` (or `Age` when it names none), as upstream's table convertor
//! fills them: each cell is the value at the column's JSON path, a `date` column shows how long
//! ago its timestamp was.

use genplane_api::table::{AGE_DESCRIPTION, NAME_DESCRIPTION};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::time::{age, human_duration, parse_time};
use genplane_apiserver::kind::CustomBehaviour;
use genplane_registry::CustomSchema;
use serde_json::{Value, json};
use std::sync::Arc;

/// One printer column.
#[derive(Clone, Debug, PartialEq)]
struct Column {
    name: String,
    type_: String,
    format: String,
    description: String,
    priority: i64,
    path: Vec<Step>,
}

/// One step of a simple JSON path.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
}

/// Parses the simple JSON paths printer columns use (`.spec.replicas`, `.status.conditions[0]
/// .type`, `.metadata.labels['app']`); `None` for anything else.
fn parse_path(path: &str) -> Option<Vec<Step>> {
    let path = path.trim();
    let path = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path);
    let mut steps = Vec::new();
    let mut rest = path.strip_prefix('.').unwrap_or(path);
    while !rest.is_empty() {
        if let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']')?;
            let token = &inner[..end];
            rest = &inner[end + 1..];
            let quoted = token
                .strip_prefix('\'')
                .and_then(|t| t.strip_suffix('\''))
                .or_else(|| token.strip_prefix('"').and_then(|t| t.strip_suffix('"')));
            match quoted {
                Some(name) => steps.push(Step::Field(name.to_owned())),
                None => steps.push(Step::Index(token.parse().ok()?)),
            }
            rest = rest.strip_prefix('.').unwrap_or(rest);
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let name = &rest[..end];
        if name.is_empty() {
            return None;
        }
        steps.push(Step::Field(name.to_owned()));
        rest = &rest[end..];
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    Some(steps)
}

fn lookup<'a>(object: &'a Value, path: &[Step]) -> Option<&'a Value> {
    path.iter().try_fold(object, |value, step| match step {
        Step::Field(name) => value.get(name.as_str()),
        Step::Index(i) => value.get(*i),
    })
}

/// The printer of one served version of a custom resource, and its schema's unknown-field
/// report (both are what the apiserver asks of a custom kind).
#[derive(Debug)]
pub struct Printer {
    columns: Vec<Column>,
    schema: Arc<dyn CustomSchema>,
}

impl Printer {
    /// The printer of a version with `additionalPrinterColumns` `columns` (a JSON array, or
    /// null), whose objects follow `schema`.
    pub fn new(columns: Option<&Value>, schema: Arc<dyn CustomSchema>) -> Self {
        let mut parsed = Vec::new();
        for column in columns.and_then(Value::as_array).into_iter().flatten() {
            let text = |k: &str| {
                column
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            parsed.push(Column {
                name: text("name"),
                type_: text("type"),
                format: text("format"),
                description: text("description"),
                priority: column.get("priority").and_then(Value::as_i64).unwrap_or(0),
                path: parse_path(&text("jsonPath")).unwrap_or_default(),
            });
        }
        if columns.and_then(Value::as_array).is_none() {
            parsed.push(Column {
                name: "Age".into(),
                type_: "date".into(),
                format: String::new(),
                description: AGE_DESCRIPTION.into(),
                priority: 0,
                path: vec![
                    Step::Field("metadata".into()),
                    Step::Field("creationTimestamp".into()),
                ],
            });
        }
        Self {
            columns: parsed,
            schema,
        }
    }

    fn cell(column: &Column, object: &Value, now: i64) -> Value {
        let Some(value) = (!column.path.is_empty())
            .then(|| lookup(object, &column.path))
            .flatten()
        else {
            return Value::Null;
        };
        match (column.type_.as_str(), value) {
            ("date", Value::String(s)) => match parse_time(s) {
                Some(_) => Value::from(age(Some(s), now)),
                None => Value::from(s.as_str()),
            },
            ("date", Value::Number(n)) => {
                Value::from(human_duration(now - n.as_i64().unwrap_or(now)))
            }
            ("integer", Value::Number(n)) if n.is_i64() || n.is_u64() => value.clone(),
            ("number", Value::Number(_)) | ("boolean", Value::Bool(_)) => value.clone(),
            ("string", Value::String(_)) => value.clone(),
            (_, Value::Null) => Value::Null,
            (_, Value::String(s)) => Value::from(s.as_str()),
            (_, other) => Value::from(other.to_string()),
        }
    }
}

impl CustomBehaviour for Printer {
    fn columns(&self) -> Value {
        let mut columns = vec![json!({
            "name": "Name", "type": "string", "format": "name",
            "description": NAME_DESCRIPTION, "priority": 0,
        })];
        columns.extend(self.columns.iter().map(|c| {
            json!({
                "name": c.name, "type": c.type_, "format": c.format,
                "description": c.description, "priority": c.priority,
            })
        }));
        Value::Array(columns)
    }

    fn row(&self, object: &Value, now: i64) -> Vec<Value> {
        let name = object
            .pointer("/metadata/name")
            .cloned()
            .unwrap_or(Value::from(""));
        std::iter::once(name)
            .chain(self.columns.iter().map(|c| Self::cell(c, object, now)))
            .collect()
    }

    fn unknown_fields(&self, object: &Value) -> Result<Vec<String>, ApiError> {
        let mut copy = object.clone();
        self.schema.prune(&mut copy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use genplane_apimachinery::validation::field::ErrorList;

    #[derive(Debug)]
    struct Open;
    impl CustomSchema for Open {
        fn prune(&self, _: &mut Value) -> Result<Vec<String>, ApiError> {
            Ok(Vec::new())
        }
        fn read(&self, _: &mut Value) {}
        fn default(&self, _: &mut Value) {}
        fn validate(&self, _: &Value, _: Option<&Value>) -> ErrorList {
            ErrorList::new()
        }
    }

    #[test]
    fn paths_parse_as_upstream_writes_them() {
        assert_eq!(
            parse_path(".status.conditions[0].type"),
            Some(vec![
                Step::Field("status".into()),
                Step::Field("conditions".into()),
                Step::Index(0),
                Step::Field("type".into()),
            ])
        );
        assert_eq!(
            parse_path(".metadata.labels['app.kubernetes.io/name']"),
            Some(vec![
                Step::Field("metadata".into()),
                Step::Field("labels".into()),
                Step::Field("app.kubernetes.io/name".into()),
            ])
        );
        assert_eq!(parse_path(".spec..x"), None);
    }

    #[test]
    fn rows_follow_the_printer_columns() {
        let columns = json!([
            {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas", "priority": 1},
            {"name": "Missing", "type": "string", "jsonPath": ".status.nothing"},
            {"name": "Created", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ]);
        let printer = Printer::new(Some(&columns), Arc::new(Open));
        let defs = printer.columns();
        assert_eq!(defs[0]["name"], "Name");
        assert_eq!(defs[2]["priority"], 1);
        let object = json!({"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"cronSpec": "* * * * */5", "replicas": 3}});
        let now = parse_time("2026-01-01T00:05:00Z").unwrap().seconds;
        assert_eq!(
            printer.row(&object, now),
            vec![
                json!("a"),
                json!("* * * * */5"),
                json!(3),
                Value::Null,
                json!("5m")
            ]
        );
    }

    #[test]
    fn versions_without_columns_show_age() {
        let printer = Printer::new(None, Arc::new(Open));
        let defs = printer.columns();
        assert_eq!(defs.as_array().unwrap().len(), 2);
        assert_eq!(defs[1]["name"], "Age");
    }
}
