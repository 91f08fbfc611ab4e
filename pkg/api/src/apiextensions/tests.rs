use std::cell::RefCell;

use serde_json::{Value, json};

use super::validation::{SchemaCheck, no_schema_check, validate_crd};
use super::*;
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};

fn summary(errors: &ErrorList) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer"},
                    "color": {"type": "string", "enum": ["red", "blue"]},
                    "enabled": {"type": "boolean"},
                    "size": {"type": "number"},
                    "nested": {"type": "object", "properties": {"name": {"type": "string"}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
            "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        },
    })
}

/// A valid, defaulted CRD `widgets.example.com` with one version `v1`.
fn crd() -> Value {
    let mut crd = json!({
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema()}}],
        },
    });
    default(&mut crd);
    crd
}

fn with(mut crd: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = crd.pointer_mut(parent).unwrap();
    match target {
        Value::Array(items) => {
            let i: usize = key.parse().unwrap();
            if i == items.len() {
                items.push(value);
            } else {
                items[i] = value;
            }
        }
        Value::Object(map) => {
            if value.is_null() {
                map.remove(key);
            } else {
                map.insert(key.to_owned(), value);
            }
        }
        _ => panic!("{pointer}"),
    }
    crd
}

fn create_errors(crd: &Value) -> Vec<String> {
    summary(&validate(crd).unwrap())
}

fn update_errors(new: &Value, old: &Value) -> Vec<String> {
    summary(&validate_update(new, old).unwrap())
}

fn established(mut crd: Value) -> Value {
    status::set_condition(&mut crd, status::established(), "2026-01-01T00:00:00Z");
    crd
}

fn check_cases(cases: Vec<(&str, Value, Vec<&str>)>) {
    for (name, object, want) in cases {
        assert_eq!(create_errors(&object), want, "{name}");
    }
}

const DNS1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

#[test]
fn a_valid_crd_has_no_errors() {
    assert_eq!(create_errors(&crd()), Vec::<String>::new());
    let cluster = with(crd(), "/spec/scope", json!("Cluster"));
    assert_eq!(create_errors(&cluster), Vec::<String>::new());
}

#[test]
fn names_and_group() {
    let renamed = |plural: &str, group: &str| {
        let c = with(crd(), "/spec/names/plural", json!(plural));
        let c = with(c, "/spec/group", json!(group));
        with(c, "/metadata/name", json!(format!("{plural}.{group}")))
    };
    check_cases(vec![
        (
            "name must be plural.group",
            with(crd(), "/metadata/name", json!("gadgets.example.com")),
            vec![
                r#"metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group"#,
            ],
        ),
        (
            "group without a dot",
            renamed("widgets", "example"),
            vec![
                r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#,
            ],
        ),
        (
            "group not a subdomain",
            renamed("widgets", "Example.com"),
            vec![
                r#"metadata.name: Invalid value: "widgets.Example.com": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
                r#"spec.group: Invalid value: "Example.com": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
            ],
        ),
        (
            "empty group",
            with(
                with(crd(), "/spec/group", json!("")),
                "/metadata/name",
                json!("widgets."),
            ),
            vec![
                r#"metadata.name: Invalid value: "widgets.": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
                "spec.group: Required value",
            ],
        ),
        (
            "plural not a DNS-1035 label",
            renamed("1widgets", "example.com"),
            vec![&format!(
                r#"spec.names.plural: Invalid value: "1widgets": {DNS1035}"#
            )],
        ),
        (
            "singular not a DNS-1035 label",
            with(crd(), "/spec/names/singular", json!("wid_get")),
            vec![&format!(
                r#"spec.names.singular: Invalid value: "wid_get": {DNS1035}"#
            )],
        ),
        (
            "kind may have mixed case only",
            with(
                with(crd(), "/spec/names/kind", json!("Wid_get")),
                "/spec/names/listKind",
                json!("WidgetList"),
            ),
            vec![&format!(
                r#"spec.names.kind: Invalid value: "Wid_get": may have mixed case, but should otherwise match: {DNS1035}"#
            )],
        ),
        (
            "kind and listKind the same",
            with(crd(), "/spec/names/listKind", json!("Widget")),
            vec![
                r#"spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same"#,
            ],
        ),
        (
            "short names and categories",
            with(
                with(crd(), "/spec/names/shortNames", json!(["wd", "W"])),
                "/spec/names/categories",
                json!(["all", "my_things"]),
            ),
            vec![
                &format!(r#"spec.names.shortNames[1]: Invalid value: "W": {DNS1035}"#),
                &format!(r#"spec.names.categories[1]: Invalid value: "my_things": {DNS1035}"#),
            ],
        ),
        (
            "kind is required (singular and listKind default from it)",
            {
                let mut c = with(crd(), "/spec/names", json!({"plural": "widgets"}));
                default(&mut c);
                c
            },
            vec![
                "spec.names.singular: Required value",
                "spec.names.kind: Required value",
                "spec.names.listKind: Required value",
            ],
        ),
        (
            "scope required",
            with(crd(), "/spec/scope", json!("")),
            vec!["spec.scope: Required value"],
        ),
        (
            "scope supported",
            with(crd(), "/spec/scope", json!("Global")),
            vec![
                r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#,
            ],
        ),
    ]);
}

#[test]
fn versions() {
    let v = |name: &str, served: bool, storage: bool| json!({"name": name, "served": served, "storage": storage, "schema": {"openAPIV3Schema": schema()}});
    let versions = |list: Value| {
        let mut c = with(crd(), "/spec/versions", list);
        c["status"]["storedVersions"] = json!(["v1"]);
        c
    };
    let none = versions(json!([]));
    assert_eq!(
        create_errors(&none),
        [
            "spec.versions: Invalid value: []: must have exactly one version marked as storage version",
            "status.storedVersions[0]: Invalid value: \"v1\": missing from spec.versions; v1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1 and removes v1 from status.storedVersions",
        ]
    );
    let two_storage = versions(json!([v("v1", true, true), v("v2", true, true)]));
    let errors = create_errors(&two_storage);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].starts_with("spec.versions: Invalid value: ["));
    assert!(errors[0].ends_with(": must have exactly one version marked as storage version"));
    assert_eq!(
        errors[1],
        r#"status.storedVersions: Invalid value: ["v1"]: must have the storage version v2"#
    );

    let duplicate = versions(json!([v("v1", true, true), v("v1", true, false)]));
    let errors = create_errors(&duplicate);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].ends_with(": must contain unique version names"));

    let bad_name = versions(json!([v("V1", true, true)]));
    let mut bad_name = with(bad_name, "/status/storedVersions", json!(["V1"]));
    bad_name["status"]["storedVersions"] = json!(["V1"]);
    assert_eq!(
        create_errors(&bad_name),
        [
            format!(r#"spec.versions[0].name: Invalid value: "V1": {DNS1035}"#),
            format!(r#"spec.version: Invalid value: "V1": {DNS1035}"#),
        ]
    );

    let missing_schema = with(crd(), "/spec/versions/0/schema", Value::Null);
    assert_eq!(
        create_errors(&missing_schema),
        ["spec.versions[0].schema.openAPIV3Schema: Required value"]
    );
    let mut warning = with(crd(), "/spec/versions/0/deprecationWarning", json!("old"));
    assert_eq!(
        create_errors(&warning),
        [
            r#"spec.versions[0].deprecationWarning: Invalid value: "old": can only be set for deprecated versions"#
        ]
    );
    warning["spec"]["versions"][0]["deprecated"] = json!(true);
    assert!(create_errors(&warning).is_empty());
    warning["spec"]["versions"][0]["deprecationWarning"] = json!("x".repeat(257));
    assert_eq!(
        create_errors(&warning)[0],
        format!(
            "spec.versions[0].deprecationWarning: Invalid value: \"{}\": must be <= 256 characters long",
            "x".repeat(257)
        )
    );
}

#[test]
fn schema_root_rules_with_the_status_subresource() {
    let status_on = with(
        crd(),
        "/spec/versions/0/subresources",
        json!({"status": {}}),
    );
    assert!(create_errors(&status_on).is_empty());
    let mut typed = status_on.clone();
    typed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["type"] = json!("array");
    assert_eq!(
        create_errors(&typed),
        [
            r#"spec.validation.openAPIV3Schema.type: Invalid value: "array": only "object" is allowed as the type at the root of the schema if the status subresource is enabled"#
        ]
    );
    let mut extra = status_on.clone();
    extra["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-embedded-resource"] =
        json!(true);
    let errors = create_errors(&extra);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with("spec.validation.openAPIV3Schema: Invalid value: {"));
    assert!(errors[0].ends_with(": only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled"));
    // Without the status subresource the root may have more.
    let mut free = crd();
    free["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-embedded-resource"] =
        json!(true);
    assert!(create_errors(&free).is_empty());
    let mut nullable = crd();
    nullable["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["nullable"] = json!(true);
    assert_eq!(
        create_errors(&nullable),
        [
            "spec.validation.openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root"
        ]
    );
}

#[test]
fn scale_subresource_paths() {
    let scale = |value: Value| {
        with(
            crd(),
            "/spec/versions/0/subresources",
            json!({"status": {}, "scale": value}),
        )
    };
    check_cases(vec![
        (
            "valid",
            scale(
                json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}),
            ),
            vec![],
        ),
        (
            "required",
            {
                let mut c = scale(json!({}));
                default(&mut c);
                c
            },
            vec![
                "spec.subresources.scale.specReplicasPath: Required value",
                "spec.subresources.scale.statusReplicasPath: Required value",
            ],
        ),
        (
            "wrong places",
            scale(
                json!({"specReplicasPath": ".status.replicas", "statusReplicasPath": "status.replicas", "labelSelectorPath": ".metadata.labels"}),
            ),
            vec![
                r#"spec.subresources.scale.specReplicasPath: Invalid value: ".status.replicas": should be a json path under .spec"#,
                r#"spec.subresources.scale.statusReplicasPath: Invalid value: "status.replicas": must be a simple json path starting with ."#,
                r#"spec.subresources.scale.labelSelectorPath: Invalid value: ".metadata.labels": should be a json path under either .spec or .status"#,
            ],
        ),
    ]);
}

#[test]
fn printer_columns() {
    let columns = |value: Value| with(crd(), "/spec/versions/0/additionalPrinterColumns", value);
    check_cases(vec![
        (
            "valid",
            columns(
                json!([{"name": "Replicas", "type": "integer", "format": "int32", "jsonPath": ".spec.replicas", "priority": 1}]),
            ),
            vec![],
        ),
        (
            "bad type and format",
            columns(
                json!([{"name": "R", "type": "int", "format": "uuid", "jsonPath": ".spec.replicas"}]),
            ),
            vec![
                r#"spec.additionalPrinterColumns[0].type: Invalid value: "int": must be one of boolean,date,integer,number,string"#,
                r#"spec.additionalPrinterColumns[0].format: Invalid value: "uuid": must be one of byte,date,date-time,double,float,int32,int64,password"#,
            ],
        ),
        (
            "required",
            columns(json!([{"name": "", "type": "", "jsonPath": ""}])),
            vec![
                "spec.additionalPrinterColumns[0].name: Required value",
                "spec.additionalPrinterColumns[0].type: Required value: must be one of boolean,date,integer,number,string",
                "spec.additionalPrinterColumns[0].JSONPath: Required value",
            ],
        ),
        (
            "json path",
            columns(json!([{"name": "R", "type": "string", "jsonPath": "spec.replicas"}])),
            vec![
                r#"spec.additionalPrinterColumns[0].JSONPath: Invalid value: "spec.replicas": must be a simple json path starting with ."#,
            ],
        ),
    ]);
}

#[test]
fn per_version_fields_are_named_per_version_when_they_differ() {
    let mut two = crd();
    let mut v2 = two["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    two["spec"]["versions"].as_array_mut().unwrap().push(v2);
    assert!(create_errors(&two).is_empty());
    two["spec"]["versions"][1]["additionalPrinterColumns"] =
        json!([{"name": "R", "type": "int", "jsonPath": ".spec.replicas"}]);
    assert_eq!(
        create_errors(&two),
        [
            r#"spec.versions[1].additionalPrinterColumns[0].type: Invalid value: "int": must be one of boolean,date,integer,number,string"#
        ]
    );
    // The same columns on both: named at the top level.
    two["spec"]["versions"][0]["additionalPrinterColumns"] =
        two["spec"]["versions"][1]["additionalPrinterColumns"].clone();
    assert_eq!(
        create_errors(&two),
        [
            r#"spec.additionalPrinterColumns[0].type: Invalid value: "int": must be one of boolean,date,integer,number,string"#
        ]
    );
}

#[test]
fn the_schema_check_gets_every_schema_with_its_path() {
    let seen = RefCell::new(Vec::new());
    let check = |schema: &Value, path: &Path| {
        seen.borrow_mut().push(path.to_string());
        let mut errors = ErrorList::new();
        if schema.pointer("/properties/spec/type") == Some(&json!("object")) {
            errors.push(Error::forbidden(&path.child("x"), "from the schema engine"));
        }
        errors
    };
    let check: &SchemaCheck<'_> = &check;
    let one = crd();
    let errors = validate_crd(&one, None, check).unwrap();
    assert_eq!(
        summary(&errors),
        ["spec.validation.openAPIV3Schema.x: Forbidden: from the schema engine"]
    );
    assert_eq!(*seen.borrow(), ["spec.validation.openAPIV3Schema"]);
    seen.borrow_mut().clear();
    let mut two = crd();
    let mut v2 = two["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    v2["schema"]["openAPIV3Schema"]["description"] = json!("the second");
    two["spec"]["versions"].as_array_mut().unwrap().push(v2);
    validate_crd(&two, None, check).unwrap();
    assert_eq!(
        *seen.borrow(),
        [
            "spec.versions[0].schema.openAPIV3Schema",
            "spec.versions[1].schema.openAPIV3Schema"
        ]
    );
    assert!(
        validate_crd(&two, None, &no_schema_check)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn selectable_fields() {
    let fields = |paths: &[&str]| {
        let list: Vec<Value> = paths.iter().map(|p| json!({"jsonPath": p})).collect();
        with(
            crd(),
            "/spec/versions/0/selectableFields",
            Value::Array(list),
        )
    };
    check_cases(vec![
        (
            "valid",
            fields(&[
                ".spec.color",
                ".spec.replicas",
                ".spec.enabled",
                ".spec.nested.name",
                ".spec['labels'].x",
            ]),
            vec![],
        ),
        (
            "unknown field",
            fields(&[".spec.missing"]),
            vec![
                r#"spec.selectableFields[0].jsonPath: Invalid value: ".spec.missing": is an invalid path: does not refer to a valid field"#,
            ],
        ),
        (
            "wrong types",
            fields(&[".spec.size", ".spec.nested"]),
            vec![
                r#"spec.selectableFields[0].jsonPath: Invalid value: ".spec.size": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."#,
                r#"spec.selectableFields[1].jsonPath: Invalid value: ".spec.nested": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."#,
            ],
        ),
        (
            "array notation",
            fields(&[".spec[0]"]),
            vec![
                r#"spec.selectableFields[0].jsonPath: Invalid value: ".spec[0]": is an invalid path: array notation is not allowed"#,
            ],
        ),
        (
            "not a path",
            fields(&["spec.color", ".spec[color]"]),
            vec![
                r#"spec.selectableFields[0].jsonPath: Invalid value: "spec.color": is an invalid path: expected [ or . but got: spec"#,
                r#"spec.selectableFields[1].jsonPath: Invalid value: ".spec[color]": is an invalid path: expected single quoted string but got color"#,
            ],
        ),
        (
            "metadata",
            {
                let mut c = fields(&[".metadata.name"]);
                c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"] =
                    json!({"type": "object", "properties": {"name": {"type": "string"}}});
                c
            },
            vec![
                r#"spec.selectableFields[0].jsonPath: Invalid value: ".metadata.name": must not point to fields in metadata"#,
            ],
        ),
        (
            "duplicates and empty",
            fields(&[".spec.color", ".spec['color']", ""]),
            vec![
                r#"spec.selectableFields[1].jsonPath: Duplicate value: ".spec['color']""#,
                "spec.selectableFields[2].jsonPath: Required value",
            ],
        ),
    ]);
    let mut properties = serde_json::Map::new();
    let mut paths = Vec::new();
    for i in 0..9 {
        properties.insert(format!("f{i}"), json!({"type": "string"}));
        paths.push(format!(".spec.f{i}"));
    }
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    let mut many = fields(&refs);
    many["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] =
        Value::Object(properties);
    assert_eq!(
        create_errors(&many),
        ["spec.selectableFields: Too many: 9: must have at most 8 items"]
    );
    // An existing CRD that already had nine keeps them.
    let mut changed = many.clone();
    changed["metadata"]["labels"] = json!({"a": "b"});
    assert!(update_errors(&changed, &many).is_empty());
    let mut other = many.clone();
    // Reordered: no longer the same list, so the limit applies.
    other["spec"]["versions"][0]["selectableFields"]
        .as_array_mut()
        .unwrap()
        .swap(0, 1);
    let errors = update_errors(&other, &many);
    assert!(errors.iter().any(|e| e.contains("Too many")), "{errors:?}");
}

#[test]
fn conversion_webhooks() {
    let conversion = |value: Value| with(crd(), "/spec/conversion", value);
    let webhook = |config: Value, versions: Value| {
        let mut c = conversion(
            json!({"strategy": "Webhook", "webhook": {"clientConfig": config, "conversionReviewVersions": versions}}),
        );
        default(&mut c);
        c
    };
    check_cases(vec![
        (
            "url",
            webhook(
                json!({"url": "https://conv.example.com/convert"}),
                json!(["v1"]),
            ),
            vec![],
        ),
        (
            "service defaults to port 443",
            webhook(
                json!({"service": {"namespace": "ns", "name": "conv", "path": "/convert"}}),
                json!(["v1beta1", "v1"]),
            ),
            vec![],
        ),
        (
            "no webhook",
            {
                let mut c = conversion(json!({"strategy": "Webhook"}));
                default(&mut c);
                c
            },
            vec![
                "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
                "spec.conversion.conversionReviewVersions: Required value",
            ],
        ),
        (
            "bad url",
            webhook(
                json!({"url": "http://user:pw@conv.example.com/x?a=b#frag"}),
                json!(["v1"]),
            ),
            vec![
                r#"spec.conversion.webhookClientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]"#,
                r#"spec.conversion.webhookClientConfig.url: Invalid value: "user:xxxxx": user information is not permitted in the URL"#,
                r#"spec.conversion.webhookClientConfig.url: Invalid value: "frag": fragments are not permitted in the URL"#,
                r#"spec.conversion.webhookClientConfig.url: Invalid value: "a=b": query parameters are not permitted in the URL"#,
            ],
        ),
        (
            "url and service",
            webhook(
                json!({"url": "https://a.example.com", "service": {"namespace": "ns", "name": "conv"}}),
                json!(["v1"]),
            ),
            vec![
                "spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required",
            ],
        ),
        (
            "bad service",
            webhook(
                json!({"service": {"namespace": "", "name": "", "port": 0, "path": "/a//B"}}),
                json!(["v1"]),
            ),
            vec![
                "spec.conversion.webhookClientConfig.service.name: Required value",
                "spec.conversion.webhookClientConfig.service.namespace: Required value",
                "spec.conversion.webhookClientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
                r#"spec.conversion.webhookClientConfig.service.path: Invalid value: "/a//B": segment[1] may not be empty"#,
                r#"spec.conversion.webhookClientConfig.service.path: Invalid value: "/a//B": segment[2]: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
            ],
        ),
        (
            "review versions",
            webhook(json!({"url": "https://a.example.com"}), json!(["v2", "v2"])),
            vec![
                r#"spec.conversion.conversionReviewVersions[1]: Invalid value: "v2": duplicate version"#,
                r#"spec.conversion.conversionReviewVersions: Invalid value: ["v2","v2"]: must include at least one of v1, v1beta1"#,
            ],
        ),
        (
            "webhook with strategy None",
            conversion(
                json!({"strategy": "None", "webhook": {"clientConfig": {"url": "https://a.example.com"}, "conversionReviewVersions": ["v1"]}}),
            ),
            vec![
                "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
                "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
            ],
        ),
        (
            "unknown strategy",
            conversion(json!({"strategy": "Magic"})),
            vec![
                r#"spec.conversion.strategy: Unsupported value: "Magic": supported values: "None", "Webhook""#,
            ],
        ),
    ]);
}

#[test]
fn ca_bundles_are_checked_once_established() {
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let encode = |s: &str| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, s);
    let with_bundle = |bundle: &str| {
        let mut c = with(
            crd(),
            "/spec/conversion",
            json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://a.example.com", "caBundle": bundle}, "conversionReviewVersions": ["v1"]}}),
        );
        default(&mut c);
        c
    };
    let good = with_bundle(&encode(pem));
    let bad = with_bundle(&encode("not a certificate"));
    // On create, and before the CRD is established, anything goes.
    assert!(create_errors(&bad).is_empty());
    assert!(update_errors(&bad, &good).is_empty());
    let old = established(good.clone());
    let new = established(bad.clone());
    assert_eq!(
        update_errors(&new, &old),
        [format!(
            "spec.conversion.webhookClientConfig.caBundle: Invalid value: \"{}\": unable to load root certificates: unable to parse bytes as PEM block",
            encode("not a certificate")
        )]
    );
    // An invalid bundle may stay invalid.
    assert!(update_errors(&new, &established(bad)).is_empty());
}

#[test]
fn preserve_unknown_fields() {
    let preserve = with(crd(), "/spec/preserveUnknownFields", json!(true));
    assert_eq!(
        create_errors(&preserve),
        [
            "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"
        ]
    );
    let mut defaults = preserve.clone();
    defaults["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["replicas"]["default"] = json!(1);
    defaults["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://a.example.com"}, "conversionReviewVersions": ["v1"]}});
    assert_eq!(
        create_errors(&defaults),
        [
            "spec.preserveUnknownFields: Invalid value: true: must be false in order to use defaults in the schema",
            r#"spec.conversion.strategy: Invalid value: "Webhook": must be None if spec.preserveUnknownFields is true"#,
            "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ]
    );
    // A CRD stored with it may keep it.
    assert!(update_errors(&preserve, &preserve).is_empty());
}

#[test]
fn stored_versions() {
    let mut missing_storage = crd();
    missing_storage["status"]["storedVersions"] = json!(["v0"]);
    assert_eq!(
        create_errors(&missing_storage),
        [
            r#"status.storedVersions: Invalid value: ["v0"]: must have the storage version v1"#,
            r#"status.storedVersions[0]: Invalid value: "v0": missing from spec.versions; v0 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v0 and removes v0 from status.storedVersions"#,
        ]
    );
    let mut empty = crd();
    empty["status"]["storedVersions"] = json!([]);
    assert_eq!(
        create_errors(&empty),
        ["status.storedVersions: Invalid value: []: must have at least one stored version"]
    );
}

#[test]
fn api_approval_of_protected_groups() {
    let protected = |annotation: Option<&str>| {
        let mut c = with(crd(), "/spec/group", json!("widgets.k8s.io"));
        c["metadata"]["name"] = json!("widgets.widgets.k8s.io");
        if let Some(a) = annotation {
            c["metadata"]["annotations"] = json!({API_APPROVED_ANNOTATION: a});
        }
        c
    };
    assert_eq!(
        create_errors(&protected(None)),
        [
            r#"metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111"#
        ]
    );
    assert_eq!(
        create_errors(&protected(Some("yes"))),
        [
            r#"metadata.annotations[api-approved.kubernetes.io]: Invalid value: "yes": protected groups must have approval annotation "api-approved.kubernetes.io" with either a URL or a reason starting with "unapproved", see https://github.com/kubernetes/enhancements/pull/1111"#
        ]
    );
    assert!(
        create_errors(&protected(Some(
            "https://github.com/kubernetes/kubernetes/pull/1"
        )))
        .is_empty()
    );
    assert!(create_errors(&protected(Some("unapproved, testing only"))).is_empty());
    // An update that leaves the state alone is not refused.
    assert!(update_errors(&protected(None), &protected(None)).is_empty());
}

#[test]
fn immutable_fields_on_update() {
    let old = crd();
    let mut new = with(old.clone(), "/spec/group", json!("example.org"));
    new["spec"]["names"]["plural"] = json!("gadgets");
    new["spec"]["scope"] = json!("Cluster");
    new["spec"]["names"]["kind"] = json!("Gadget");
    new["spec"]["names"]["listKind"] = json!("GadgetList");
    assert_eq!(
        update_errors(&new, &old),
        [
            r#"spec.group: Invalid value: "example.org": field is immutable"#,
            r#"spec.names.plural: Invalid value: "gadgets": field is immutable"#,
        ]
    );
    assert_eq!(
        update_errors(&established(new), &established(old)),
        [
            r#"spec.scope: Invalid value: "Cluster": field is immutable"#,
            r#"spec.names.kind: Invalid value: "Gadget": field is immutable"#,
            r#"spec.group: Invalid value: "example.org": field is immutable"#,
            r#"spec.names.plural: Invalid value: "gadgets": field is immutable"#,
        ]
    );
}

#[test]
fn updates_are_lenient_with_what_was_stored() {
    // A stored CRD whose versions lack schemas (stored before v1 required them): a served
    // version still needs one, because otherwise every field is pruned.
    let old = with(crd(), "/spec/versions/0/schema", Value::Null);
    let mut new = old.clone();
    new["metadata"]["labels"] = json!({"a": "b"});
    assert_eq!(
        update_errors(&new, &old),
        [
            "spec.versions[0].schema.openAPIV3Schema: Required value: because otherwise all fields are pruned"
        ]
    );
    new["spec"]["versions"][0]["served"] = json!(false);
    assert!(update_errors(&new, &old).is_empty());
    // Webhook review versions: an old list without a known version may stay.
    let mut odd = crd();
    odd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://a.example.com"}, "conversionReviewVersions": ["v9"]}});
    assert_eq!(create_errors(&odd).len(), 1);
    assert!(update_errors(&odd, &odd).is_empty());
}

#[test]
fn status_updates_check_accepted_names() {
    let old = crd();
    let mut new = old.clone();
    new["status"]["acceptedNames"] = json!({"plural": "Widgets", "kind": "Widget"});
    assert_eq!(
        summary(&validate_status_update(&new, &old).unwrap()),
        [format!(
            r#"status.acceptedNames.plural: Invalid value: "Widgets": {DNS1035}"#
        )]
    );
    let mut status_write = old.clone();
    status_write["spec"]["group"] = json!("changed.example.com");
    status_write["status"]["acceptedNames"] = json!({"plural": "widgets", "kind": "Widget"});
    prepare_for_status_update(
        &mut status_write,
        &old,
        &crate::resource::Context::gates_off(),
    );
    assert_eq!(status_write["spec"], old["spec"]);
    assert_eq!(status_write["status"]["acceptedNames"]["plural"], "widgets");
}

#[test]
fn defaulting_as_upstream() {
    let mut object = json!({
        "apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1beta1", "served": true}, {"name": "v1", "served": true, "storage": true}],
            "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"namespace": "ns", "name": "conv"}}}},
        },
    });
    default(&mut object);
    assert_eq!(
        object["spec"],
        json!({
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false},
                {"name": "v1", "served": true, "storage": true},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"service": {"namespace": "ns", "name": "conv", "port": 443}},
                "conversionReviewVersions": null,
            }},
        })
    );
    assert_eq!(
        object["status"],
        json!({"conditions": null, "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": ["v1"]})
    );
    let mut bare =
        json!({"spec": {"names": {"plural": "widgets", "kind": "Widget", "singular": "w"}}});
    default(&mut bare);
    assert_eq!(bare["spec"]["conversion"], json!({"strategy": "None"}));
    assert_eq!(bare["spec"]["names"]["singular"], "w");
    assert_eq!(bare["status"]["storedVersions"], Value::Null);
}

#[test]
fn create_and_update_strategies() {
    let mut object = crd();
    object["status"] = json!({"storedVersions": ["v0"], "conditions": [status::established()], "acceptedNames": {"plural": "x", "kind": "X"}});
    object["metadata"]["generation"] = json!(7);
    prepare_for_create(&mut object, &crate::resource::Context::gates_off());
    assert_eq!(
        object["status"],
        json!({"conditions": null, "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": ["v1"]})
    );
    assert_eq!(object["metadata"]["generation"], 1);

    let mut old = object.clone();
    old["status"]["conditions"] = json!([status::established()]);
    let mut same_spec = old.clone();
    same_spec["status"] = json!({});
    same_spec["metadata"]["labels"] = json!({"a": "b"});
    prepare_for_update(&mut same_spec, &old, &crate::resource::Context::gates_off());
    assert_eq!(same_spec["status"], old["status"]);
    assert_eq!(same_spec["metadata"]["generation"], 1);

    let mut new_storage = old.clone();
    let mut v2 = new_storage["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    new_storage["spec"]["versions"][0]["storage"] = json!(false);
    new_storage["spec"]["versions"]
        .as_array_mut()
        .unwrap()
        .push(v2);
    prepare_for_update(
        &mut new_storage,
        &old,
        &crate::resource::Context::gates_off(),
    );
    assert_eq!(new_storage["metadata"]["generation"], 2);
    assert_eq!(new_storage["status"]["storedVersions"], json!(["v1", "v2"]));
    assert_eq!(
        new_storage["status"]["conditions"],
        old["status"]["conditions"]
    );
}

#[test]
fn decoding_checks_the_schemas_inside_unions() {
    let with_schema = |s: Value| {
        let mut c = crd();
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = s;
        c
    };
    let message = |s: Value| decode(&with_schema(s)).unwrap_err().message.clone();
    let prefix = "CustomResourceDefinition in version \"apiextensions.k8s.io/v1\" cannot be handled as a CustomResourceDefinition: ";
    assert_eq!(
        message(json!({"type": "array", "items": {"type": 5}})),
        format!(
            "{prefix}json: cannot unmarshal number into field CustomResourceDefinition.spec.versions[0].schema.openAPIV3Schema.items.type of type string"
        )
    );
    assert_eq!(
        message(
            json!({"type": "object", "properties": {"a": {"type": "object", "additionalProperties": "yes"}}})
        ),
        format!(
            "{prefix}field CustomResourceDefinition.spec.versions[0].schema.openAPIV3Schema.properties[a].additionalProperties: boolean or JSON schema expected"
        )
    );
    assert_eq!(
        message(json!({"type": "integer", "maximum": "5"})),
        format!(
            "{prefix}json: cannot unmarshal string into field CustomResourceDefinition.spec.versions[0].schema.openAPIV3Schema.maximum of type float64"
        )
    );
    assert_eq!(
        message(json!({"type": "object", "properties": {"a": {"type": true}}})),
        format!(
            "{prefix}json: cannot unmarshal bool into field CustomResourceDefinition.spec.versions[0].schema.openAPIV3Schema.properties[a].type of type string"
        )
    );
    let decoded = decode(&with_schema(json!({
        "type": "object",
        "properties": {"list": {"type": "array", "items": {"type": "object", "bogus": 1, "properties": {"x": {"type": "string", "default": null}}}}},
        "additionalProperties": false, "x-kubernetes-preserve-unknown-fields": true,
    })))
    .unwrap();
    assert_eq!(
        decoded.unknown_fields,
        ["spec.versions[0].schema.openAPIV3Schema.properties[list].items.bogus"]
    );
    assert_eq!(
        decoded.object["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["list"]["items"],
        json!({"type": "object", "properties": {"x": {"type": "string"}}})
    );
    assert!(decode(&crd()).unwrap().unknown_fields.is_empty());
}

#[test]
fn accepted_names_without_conflicts() {
    let object = crd();
    let (names, condition) = status::accepted_names(&object, &[]);
    assert_eq!(
        names,
        json!({"plural": "widgets", "singular": "widget", "shortNames": ["wd"], "kind": "Widget", "listKind": "WidgetList", "categories": ["all"]})
    );
    assert_eq!(
        condition,
        json!({"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found"})
    );
    let established = status::established_after_naming(&object, &condition);
    assert_eq!(
        established,
        json!({"type": "Established", "status": "False", "reason": "Installing", "message": "the initial names have been accepted"})
    );
}

fn other(plural: &str, group: &str, names: Value) -> Value {
    json!({"metadata": {"name": format!("{plural}.{group}")}, "spec": {"group": group}, "status": {"acceptedNames": names}})
}

#[test]
fn accepted_names_with_conflicts() {
    let object = crd();
    let gadgets = other(
        "gadgets",
        "example.com",
        json!({"plural": "gadgets", "singular": "widget", "shortNames": ["wd", "w"], "kind": "Widget", "listKind": "GadgetList"}),
    );
    let (names, condition) = status::accepted_names(&object, std::slice::from_ref(&gadgets));
    // The conflicting names stay unaccepted; the others are taken.
    assert_eq!(
        names,
        json!({"plural": "widgets", "kind": "", "listKind": "WidgetList", "categories": ["all"]})
    );
    assert_eq!(
        condition,
        json!({"type": "NamesAccepted", "status": "False", "reason": "KindConflict", "message": "\"Widget\" is already in use"})
    );
    assert_eq!(
        status::established_after_naming(&object, &condition),
        json!({"type": "Established", "status": "False", "reason": "NotAccepted", "message": "not all names are accepted"})
    );
    let short_only = other(
        "gadgets",
        "example.com",
        json!({"plural": "gadgets", "kind": "Gadget", "shortNames": ["wd", "w"]}),
    );
    let mut two_short = object.clone();
    two_short["spec"]["names"]["shortNames"] = json!(["wd", "w"]);
    let (_, condition) = status::accepted_names(&two_short, &[short_only]);
    assert_eq!(condition["reason"], "ShortNamesConflict");
    assert_eq!(
        condition["message"],
        "[\"wd\" is already in use, \"w\" is already in use]"
    );
    let plural = other(
        "widgets",
        "example.com",
        json!({"plural": "widgets", "kind": "Thing"}),
    );
    let (names, condition) = status::accepted_names(&object, std::slice::from_ref(&plural));
    assert_eq!(condition["reason"], "PluralConflict");
    assert_eq!(condition["message"], "\"widgets\" is already in use");
    assert_eq!(names["plural"], "");
    // Another group's names are no conflict.
    let elsewhere = other(
        "widgets",
        "example.org",
        json!({"plural": "widgets", "kind": "Widget"}),
    );
    assert_eq!(
        status::accepted_names(&object, &[elsewhere]).1["reason"],
        "NoConflicts"
    );
    // Names this CRD already holds are its own.
    let mut holder = object.clone();
    holder["status"]["acceptedNames"] = json!({"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList", "shortNames": ["wd"]});
    assert_eq!(
        status::accepted_names(&holder, std::slice::from_ref(&holder)).1["reason"],
        "NoConflicts"
    );
    // A singular another CRD of the group holds as its plural conflicts.
    let mut singular = object.clone();
    singular["spec"]["names"]["singular"] = json!("gadgets");
    let gadget_crd = other(
        "gadgets",
        "example.com",
        json!({"plural": "gadgets", "kind": "Gadget"}),
    );
    let (_, condition) = status::accepted_names(&singular, &[gadget_crd]);
    assert_eq!(condition["reason"], "SingularConflict");
}

#[test]
fn conditions_keep_their_transition_time() {
    let mut object = crd();
    let t0 = "2026-01-01T00:00:00Z";
    let t1 = "2026-01-01T00:05:00Z";
    status::set_condition(
        &mut object,
        json!({"type": "NamesAccepted", "status": "False", "reason": "KindConflict", "message": "a"}),
        t0,
    );
    assert_eq!(
        status::find_condition(&object, "NamesAccepted").unwrap()["lastTransitionTime"],
        t0
    );
    status::set_condition(
        &mut object,
        json!({"type": "NamesAccepted", "status": "False", "reason": "ListKindConflict", "message": "b"}),
        t1,
    );
    let condition = status::find_condition(&object, "NamesAccepted").unwrap();
    assert_eq!(condition["lastTransitionTime"], t0);
    assert_eq!(condition["reason"], "ListKindConflict");
    status::set_condition(
        &mut object,
        json!({"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found"}),
        t1,
    );
    assert_eq!(
        status::find_condition(&object, "NamesAccepted").unwrap(),
        &json!({"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": t1})
    );
    assert!(status::should_establish(&object));
    status::set_condition(&mut object, status::established(), t1);
    assert!(!status::should_establish(&object));
    assert!(status::is_condition_true(&object, "Established"));
    // Once established, the naming controller keeps it so.
    let names_lost = json!({"type": "NamesAccepted", "status": "False", "reason": "KindConflict", "message": "x"});
    assert_eq!(
        status::established_after_naming(&object, &names_lost),
        status::established()
    );
    assert!(status::condition_equivalent(
        status::find_condition(&object, "Established"),
        Some(&status::established())
    ));
    status::remove_condition(&mut object, "Established");
    assert!(status::find_condition(&object, "Established").is_none());
}

#[test]
fn deletion_waits_for_the_cleanup_finalizer() {
    let mut object = crd();
    assert!(pending_finalization(&object));
    object["metadata"]["deletionTimestamp"] = json!("2026-02-01T00:00:00Z");
    mark_deleting(&mut object);
    mark_deleting(&mut object);
    assert_eq!(
        object["metadata"]["finalizers"],
        json!(["customresourcecleanup.apiextensions.k8s.io"])
    );
    assert_eq!(
        status::find_condition(&object, "Terminating").unwrap(),
        &json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionPending", "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon", "lastTransitionTime": "2026-02-01T00:00:00Z"})
    );
    assert!(!pending_finalization(&object));
    // The finalizer controller's condition survives another DELETE.
    status::set_condition(
        &mut object,
        status::terminating_in_progress(),
        "2026-02-01T00:00:01Z",
    );
    mark_deleting(&mut object);
    assert_eq!(
        status::find_condition(&object, "Terminating").unwrap()["reason"],
        "InstanceDeletionInProgress"
    );
    assert_eq!(
        object["metadata"]["finalizers"].as_array().unwrap().len(),
        1
    );
    assert_eq!(status::terminating_completed()["status"], "False");
    assert_eq!(
        status::terminating_check_failed("2 remain")["message"],
        "could not confirm zero CustomResources remaining: 2 remain"
    );
}

#[test]
fn table_and_field_selectors() {
    let mut object = crd();
    object["metadata"]["creationTimestamp"] = json!("2026-01-02T03:04:05Z");
    assert_eq!(
        row(&object, 0),
        vec![json!("widgets.example.com"), json!("2026-01-02T03:04:05Z")]
    );
    let names: Vec<(&str, &str)> = COLUMNS.iter().map(|c| (c.name, c.type_)).collect();
    assert_eq!(names, [("Name", "string"), ("Created At", "date")]);
    assert_eq!(
        field_values(&object).into_iter().collect::<Vec<_>>(),
        [
            ("metadata.name", "widgets.example.com".to_owned()),
            ("metadata.namespace", String::new())
        ]
    );
    assert_eq!(
        field_values(&object).keys().copied().collect::<Vec<_>>(),
        FIELD_SELECTORS
    );
}

#[test]
fn protobuf_round_trip() {
    let mut object = crd();
    object["status"]["conditions"] = json!([{"type": "Established", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "InitialNamesAccepted", "message": "m"}]);
    object["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["list"] = json!({"type": "array", "items": {"type": "string"}, "maxItems": 3, "x-kubernetes-validations": [{"rule": "self.size() > 0"}]});
    let normalized = decode(&object).unwrap().object;
    let body = genplane_apimachinery::codec::protobuf::encode(&normalized, &SCHEMA).unwrap();
    let back = genplane_apimachinery::codec::protobuf::decode(&body, &SCHEMA).unwrap();
    assert_eq!(back, normalized);
    // A fresh CRD: protobuf has no nulls, so what Go writes as null comes back absent; the
    // strings Go always writes come back even when empty.
    let fresh = crd();
    let back = genplane_apimachinery::codec::protobuf::decode(
        &genplane_apimachinery::codec::protobuf::encode(&fresh, &SCHEMA).unwrap(),
        &SCHEMA,
    )
    .unwrap();
    assert_eq!(
        back["status"],
        json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": ["v1"]})
    );
    assert_eq!(back["spec"], fresh["spec"]);
}

#[test]
fn api_approval_conditions() {
    let protected = |annotation: Option<&str>| {
        let mut c = json!({"metadata": {"name": "widgets.widgets.k8s.io"}, "spec": {"group": "widgets.k8s.io"}});
        if let Some(a) = annotation {
            c["metadata"]["annotations"] = json!({API_APPROVED_ANNOTATION: a});
        }
        c
    };
    assert_eq!(status::api_approval_condition(&crd()), None);
    assert_eq!(
        status::api_approval_condition(&protected(Some(
            "https://github.com/kubernetes/enhancements/pull/1111"
        ))),
        Some(
            json!({"type": "KubernetesAPIApprovalPolicyConformant", "status": "True", "reason": "ApprovedAnnotation", "message": "approved in https://github.com/kubernetes/enhancements/pull/1111"})
        )
    );
    assert_eq!(
        status::api_approval_condition(&protected(Some("unapproved, experimental"))),
        Some(
            json!({"type": "KubernetesAPIApprovalPolicyConformant", "status": "False", "reason": "UnapprovedAnnotation", "message": "not approved: \"unapproved, experimental\""})
        )
    );
    assert_eq!(
        status::api_approval_condition(&protected(Some(""))).unwrap()["reason"],
        "MissingAnnotation"
    );
    assert_eq!(
        status::api_approval_condition(&protected(Some("maybe"))).unwrap()["reason"],
        "InvalidAnnotation"
    );
}

#[test]
fn the_naming_controller_writes_only_changes() {
    let mut object = crd();
    let (names, accepted, established) =
        status::naming_update(&object, &status::NamesInUse::default()).unwrap();
    object["status"]["acceptedNames"] = names;
    status::set_condition(&mut object, accepted, "2026-01-01T00:00:00Z");
    status::set_condition(&mut object, established, "2026-01-01T00:00:00Z");
    assert_eq!(
        status::naming_update(&object, &status::NamesInUse::of([&object])),
        None
    );
    assert!(status::should_establish(&object));
    // A new short name another CRD of the group holds: the condition turns False.
    object["spec"]["names"]["shortNames"] = json!(["wd", "g"]);
    let gadgets = other(
        "gadgets",
        "example.com",
        json!({"plural": "gadgets", "kind": "Gadget", "shortNames": ["g"]}),
    );
    let (names, accepted, _) =
        status::naming_update(&object, &status::NamesInUse::of([&gadgets])).unwrap();
    assert_eq!(names["shortNames"], json!(["wd"]));
    assert_eq!(accepted["message"], "\"g\" is already in use");
}

#[test]
fn selectable_fields_are_hoisted_on_their_own_as_upstream_does() {
    // kubernetes/kubernetes#140689: identical selectableFields move to the internal top level
    // even when the schemas differ (and stay per version), which upstream then refuses.
    let mut two = with(
        crd(),
        "/spec/versions/0/selectableFields",
        json!([{"jsonPath": ".spec.color"}]),
    );
    let mut v2 = two["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    v2["schema"]["openAPIV3Schema"]["description"] = json!("the second");
    two["spec"]["versions"].as_array_mut().unwrap().push(v2);
    assert_eq!(
        create_errors(&two),
        [
            r#"spec.selectableFields: Invalid value: "": may only be set when validations.schema is included"#
        ]
    );
    // With one schema for both, they are checked at the top level.
    two["spec"]["versions"][1]["schema"] = two["spec"]["versions"][0]["schema"].clone();
    assert!(create_errors(&two).is_empty());
    two["spec"]["versions"][1]["selectableFields"] = json!([{"jsonPath": ".spec.size"}]);
    two["spec"]["versions"][0]["selectableFields"] =
        json!([{"jsonPath": ".spec.size"}, {"jsonPath": ".spec.color"}]);
    assert_eq!(
        create_errors(&two),
        [
            "spec.versions[0].selectableFields: Invalid value: \"\": may only be set when `version.schema.openAPIV3Schema` is not included",
            "spec.versions[1].selectableFields: Invalid value: \"\": may only be set when `version.schema.openAPIV3Schema` is not included",
        ]
    );
}
