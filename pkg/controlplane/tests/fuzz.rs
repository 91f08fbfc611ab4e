//! Every parser's fuzz entry point driven on stable Rust in the test command (the same entry
//! points run under cargo-fuzz from `fuzz/`): realistic seeds, then a bounded number of
//! deterministic mutations of them (`genplane_apimachinery::fuzzing::drive`). Any panic, broken
//! round trip or server error fails.
//!
//! Request bodies of every served resource (in JSON, YAML and protobuf, CustomResourceDefinitions
//! through their real strategy with its schema checks, the reviews included), structural schemas, label and field
//! selectors, Go durations, continue tokens, request paths, protobuf watch streams, conversion
//! webhook answers, audit policies, encryption configurations and token files.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use genplane_api::catalog;
use genplane_apimachinery::codec::protobuf;
use genplane_apimachinery::fuzzing::drive;
use genplane_registry::{CatalogStrategy, Strategy};
use serde_json::{Value, json};

/// How many mutated request bodies one run tries.
const MUTATIONS: usize = 40_000;

/// How many mutated inputs one run tries for each of the other parsers.
const PARSER_MUTATIONS: usize = 10_000;

/// For the parsers of YAML files (policies, encryption configurations), which cost more each.
const FILE_MUTATIONS: usize = 4_000;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test/fixtures")
}

fn yaml(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The CRDs of the fixtures, as clients send them.
fn crds() -> Vec<Value> {
    let mut crds: Vec<Value> = std::fs::read_dir(fixtures().join("crds"))
        .unwrap()
        .map(|entry| yaml(&entry.unwrap().path()))
        .collect();
    crds.sort_by_key(|crd| crd["metadata"]["name"].to_string());
    crds
}

fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "namespace": "default",
        "labels": {"app": "web", "tier": "front"},
        "annotations": {"note": "x"},
        "finalizers": ["example.com/hold"],
        "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": "6f1d4e9a-1f3b-4a43-9a52-6d2f6f0d8e11", "controller": true,
        }],
    })
}

/// A valid body of a kind that is never stored (a review): its metadata must be empty.
fn review_sample(resource: &catalog::ResourceInfo) -> Value {
    let attributes = json!({"namespace": "default", "verb": "get", "resource": "configmaps"});
    let body = match resource.resource {
        "tokenreviews" => json!({"spec": {"token": "abc", "audiences": ["api"]}}),
        "subjectaccessreviews" => json!({"spec": {
            "user": "alice", "groups": ["g"], "extra": {"k": ["v"]},
            "resourceAttributes": attributes,
        }}),
        "localsubjectaccessreviews" => json!({
            "metadata": {"namespace": "default"},
            "spec": {"user": "alice", "resourceAttributes": attributes},
        }),
        "selfsubjectaccessreviews" => {
            json!({"spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}})
        }
        "selfsubjectrulesreviews" => json!({"spec": {"namespace": "default"}}),
        _ => json!({}),
    };
    let mut object = json!({"apiVersion": resource.api_version(), "kind": resource.kind});
    object
        .as_object_mut()
        .unwrap()
        .extend(body.as_object().unwrap().clone());
    object
}

/// A valid object of each served resource (a CRD: the first of the fixtures).
fn sample(resource: &catalog::ResourceInfo) -> Value {
    if !resource.stored() {
        return review_sample(resource);
    }
    let mut object = json!({
        "apiVersion": resource.api_version(),
        "kind": resource.kind,
        "metadata": metadata("sample"),
    });
    let extra = match (resource.group, resource.resource) {
        ("", "configmaps") => json!({"data": {"k": "v"}, "binaryData": {"b": "AAE="}}),
        ("", "secrets") => {
            json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "YQ==", "tls.key": "Yg=="}})
        }
        ("", "serviceaccounts") => {
            json!({"secrets": [{"name": "s"}], "imagePullSecrets": [{"name": "p"}], "automountServiceAccountToken": false})
        }
        ("", "namespaces") => json!({"spec": {"finalizers": ["kubernetes"]}}),
        ("", "resourcequotas") => {
            json!({"spec": {"hard": {"pods": "10", "count/configmaps": "5"}, "scopes": ["NotTerminating"]}})
        }
        ("", "events") => json!({
            "involvedObject": {"kind": "ConfigMap", "name": "owner", "namespace": "default"},
            "reason": "Tested", "message": "m", "type": "Normal", "count": 2,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:01Z",
            "source": {"component": "test"},
        }),
        ("events.k8s.io", "events") => json!({
            "regarding": {"kind": "ConfigMap", "name": "owner", "namespace": "default"},
            "reason": "Tested", "note": "n", "type": "Warning", "action": "Checking",
            "eventTime": "2026-01-01T00:00:00.000001Z", "reportingController": "test",
            "reportingInstance": "test-0", "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:02.000002Z"},
        }),
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => json!({"spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "variables": [{"name": "keys", "expression": "size(object.data)"}],
            "validations": [{"expression": "variables.keys < 5", "messageExpression": "'too many keys'", "reason": "Forbidden"}],
            "auditAnnotations": [{"key": "keys", "valueExpression": "string(variables.keys)"}],
            "matchConditions": [{"name": "has-data", "expression": "has(object.data)"}],
        }}),
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => json!({"spec": {
            "policyName": "sample", "validationActions": ["Deny"],
            "paramRef": {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"},
        }}),
        ("admissionregistration.k8s.io", "mutatingadmissionpolicies") => json!({"spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
            "variables": [{"name": "team", "expression": "params.data.team"}],
            "mutations": [
                {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                    "Object{metadata: Object.metadata{labels: {'team': variables.team}}}"}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'add', path: '/data/team', value: variables.team}]"}},
            ],
            "matchConditions": [{"name": "has-data", "expression": "has(object.data)"}],
            "reinvocationPolicy": "IfNeeded",
        }}),
        ("admissionregistration.k8s.io", "mutatingadmissionpolicybindings") => json!({"spec": {
            "policyName": "sample",
            "paramRef": {"selector": {"matchLabels": {"team": "a"}}, "parameterNotFoundAction": "Allow"},
            "matchResources": {"namespaceSelector": {"matchLabels": {"env": "prod"}}},
        }}),
        ("certificates.k8s.io", "certificatesigningrequests") => {
            use base64::Engine as _;
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(vec!["a.example".to_owned()]).unwrap();
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, "sample");
            let pem = params.serialize_request(&key).unwrap().pem().unwrap();
            json!({"spec": {
                "request": base64::engine::general_purpose::STANDARD.encode(pem),
                "signerName": "example.com/sample", "expirationSeconds": 3600,
                "usages": ["client auth", "digital signature"],
            }})
        }
        // The name carries the signer's; the bundle is a real CA certificate.
        ("certificates.k8s.io", "clustertrustbundles") => {
            object["metadata"]["name"] = json!("example.com:sample:v1");
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            let pem = params.self_signed(&key).unwrap().pem();
            json!({"spec": {"signerName": "example.com/sample", "trustBundle": pem}})
        }
        ("coordination.k8s.io", "leases") => json!({"spec": {
            "holderIdentity": "a", "leaseDurationSeconds": 15,
            "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 1,
        }}),
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => json!({"rules": [
            {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["lock"], "verbs": ["update"]},
        ]}),
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
                {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "ops"},
                {"kind": "ServiceAccount", "name": "bot", "namespace": "default"},
            ],
        }),
        // The name is the feature's in kebab case.
        ("featuregates.genplane.io", "features") => json!({"spec": {"featureName": "Sample"}}),
        ("networkregistry.genplane.io", "networkclaims") => json!({"spec": {"addressSpace": [
            {"reference": {"group": "", "resource": "services"}, "prefix": "10.96.0.0/12",
             "description": "Service IPs"},
            {"reference": {"group": "", "resource": "pods"}, "prefix": "fd00:10:244::/56"},
        ]}}),
        // The name is the group-version's.
        ("apiregistration.k8s.io", "apiservices") => {
            object["metadata"]["name"] = json!("v1alpha1.wardle.example.com");
            json!({"spec": {"group": "wardle.example.com", "version": "v1alpha1",
                "groupPriorityMinimum": 2000, "versionPriority": 200,
                "service": {"namespace": "wardle", "name": "api", "port": 8443},
                "caBundle": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="}})
        }
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => json!({"spec": {
            "priorityLevelConfiguration": {"name": "workload-low"}, "matchingPrecedence": 500,
            "distinguisherMethod": {"type": "ByNamespace"},
            "rules": [{
                "subjects": [{"kind": "ServiceAccount", "serviceAccount": {"namespace": "web", "name": "*"}}],
                "resourceRules": [{"verbs": ["list", "watch"], "apiGroups": [""], "resources": ["configmaps"], "namespaces": ["web"]}],
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/version"]}],
            }],
        }}),
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => json!({"spec": {
            "type": "Limited", "limited": {"nominalConcurrencyShares": 7, "lendablePercent": 20,
                "borrowingLimitPercent": 100,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 16, "handSize": 4, "queueLengthLimit": 10}}},
        }}),
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            let mut crd = crds().swap_remove(0);
            crd["metadata"]["labels"] = json!({"app": "web"});
            return crd;
        }
        _ => json!({}),
    };
    if !resource.namespaced {
        object["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("namespace");
    }
    if resource.group == "rbac.authorization.k8s.io" && resource.resource == "clusterroles" {
        object["aggregationRule"] =
            json!({"clusterRoleSelectors": [{"matchLabels": {"aggregate-to-view": "true"}}]});
        object["rules"] = json!([]);
    }
    for (k, v) in extra.as_object().unwrap() {
        object[k] = v.clone();
    }
    object
}

/// Every sample in every encoding, each with the header [`exercise`] reads: resource index,
/// then media type (low two bits) and `fieldValidation` mode (next two bits).
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for (index, resource) in catalog::all().iter().enumerate() {
        let which = u8::try_from(index).unwrap();
        let object = sample(resource);
        let json = serde_json::to_vec(&object).unwrap();
        let yaml = serde_saphyr::to_string(&object).unwrap().into_bytes();
        let mut bodies = vec![(0u8, json), (1, yaml)];
        // A kind of genplane's own (Feature) speaks JSON and YAML only.
        if resource.protobuf {
            bodies.push((2, protobuf::encode(&object, resource.schema).unwrap()));
        }
        for (media, body) in bodies {
            for mode in 0..4u8 {
                let mut seed = vec![which, media | (mode << 2)];
                seed.extend_from_slice(&body);
                seeds.push(seed);
            }
        }
    }
    seeds
}

/// Every feature gate on: a kind served under a gate is served with it on (and refuses creates
/// with it off).
#[derive(Debug)]
struct AllOn;

impl catalog::FeatureGates for AllOn {
    fn enabled(&self, _feature: &'static str) -> bool {
        true
    }
}

/// The strategy the API server gives `info`'s objects.
fn strategy(info: &'static catalog::ResourceInfo) -> Box<dyn Strategy> {
    if info.resource == "customresourcedefinitions" {
        Box::new(genplane_controlplane::crd::schema::CrdStrategy::new())
    } else {
        Box::new(CatalogStrategy::with_gates(
            info,
            std::sync::Arc::new(AllOn),
        ))
    }
}

#[test]
fn valid_bodies_decode_and_mutated_ones_are_client_errors_at_worst() {
    let seeds = seeds();
    // The samples are valid through the real strategies: a sample that fails would hide every
    // mutation of it behind the same early error.
    for seed in seeds.iter().filter(|s| s[1] >> 2 == 1) {
        let info = &catalog::all()[usize::from(seed[0])];
        let media = [
            "application/json",
            "application/yaml",
            "application/vnd.kubernetes.protobuf",
        ][usize::from(seed[1] & 3)];
        let (object, _) = genplane_apiserver::request_body::decode_object(
            &genplane_apiserver::kind::ServedKind::builtin(info),
            Some(media),
            Some("Strict"),
            &seed[2..],
        )
        .unwrap_or_else(|e| panic!("{media} sample of {}: {e}", info.resource));
        let strategy = strategy(info);
        let mut object = strategy.decode(object).unwrap();
        strategy.default(&mut object);
        strategy.prepare_for_create(&mut object);
        let errors = strategy.validate(&object).unwrap();
        assert!(
            errors.is_empty(),
            "{media} sample of {}: {errors}",
            info.resource
        );
    }
    drive(
        &seeds,
        MUTATIONS,
        genplane_controlplane::crd::schema::exercise_bodies,
    );
}

#[test]
fn structural_schemas() {
    let mut schemas: Vec<Value> = crds()
        .iter()
        .flat_map(|crd| crd["spec"]["versions"].as_array().unwrap().clone())
        .map(|version| version["schema"]["openAPIV3Schema"].clone())
        .collect();
    for entry in std::fs::read_dir(fixtures().join("crd-validation")).unwrap() {
        let corpus = yaml(&entry.unwrap().path());
        schemas.extend(corpus.get("schema").cloned());
        for case in corpus["cases"].as_array().into_iter().flatten() {
            schemas.extend(case.get("schema").cloned());
        }
    }
    let seeds: Vec<Vec<u8>> = schemas
        .iter()
        .enumerate()
        .map(|(i, schema)| {
            let mut seed = vec![u8::try_from(i % 3).unwrap()];
            seed.extend(serde_json::to_vec(schema).unwrap());
            seed
        })
        .collect();
    assert!(seeds.len() > 20, "{} schemas", seeds.len());
    drive(
        &seeds,
        PARSER_MUTATIONS,
        genplane_controlplane::crd::schema::exercise_schema,
    );
}

fn texts(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|t| t.as_bytes().to_vec()).collect()
}

#[test]
fn label_and_field_selectors() {
    let seeds = texts(&[
        "",
        "app=web",
        "app==web,tier!=db",
        "environment in (production, qa),tier notin (frontend)",
        "!partition,partition2",
        "x>1,y<10",
        "app.kubernetes.io/name=web",
        "metadata.name=a,metadata.namespace!=kube-system",
        "spec.x=a\\,b\\=c",
        "status.phase=Running",
    ]);
    drive(
        &seeds,
        PARSER_MUTATIONS,
        genplane_apimachinery::fuzzing::selectors,
    );
}

#[test]
fn go_durations() {
    let seeds = texts(&[
        "0",
        "-0",
        "+5s",
        "1h2m3.5s",
        "300ms",
        "1.5h",
        ".5s",
        "5.s",
        "10us",
        "10\u{b5}s",
        "10\u{3bc}s",
        "7ns",
        "-1.5s",
        "2562047h47m16.854775807s",
        "-9223372036854775808ns",
        "1m0s",
        "32s",
    ]);
    drive(
        &seeds,
        PARSER_MUTATIONS,
        genplane_apimachinery::fuzzing::durations,
    );
}

#[test]
fn continue_tokens() {
    use genplane_storage::continue_token::{encode_after, encode_latest};
    let prefix = "/registry/configmaps/";
    let mut seeds = vec![
        encode_after("/registry/configmaps/default/a", prefix, 42).into_bytes(),
        encode_after(
            "/registry/configmaps/kube-system/kube-root-ca.crt",
            prefix,
            7,
        )
        .into_bytes(),
        encode_latest("/registry/configmaps/default/b\0", prefix).into_bytes(),
    ];
    seeds.extend(texts(&[
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Mywic3RhcnQiOiIuLi9zZWNyZXRzL3gifQ",
        "garbage",
        "",
    ]));
    drive(
        &seeds,
        PARSER_MUTATIONS,
        genplane_storage::continue_token::exercise,
    );
}

#[test]
fn request_paths() {
    let paths = [
        (
            0u8,
            "/api/v1/namespaces/default/configmaps?limit=500&labelSelector=app%3Dweb",
        ),
        (0, "/api/v1/namespaces/default/configmaps/settings"),
        (
            0,
            "/api/v1/configmaps?watch=true&fieldSelector=metadata.name%3Da",
        ),
        (
            1,
            "/apis/rbac.authorization.k8s.io/v1/namespaces/a/rolebindings",
        ),
        (2, "/api/v1/namespaces/a/finalize"),
        (
            3,
            "/apis/stable.example.com/v1/namespaces/default/crontabs/x/scale",
        ),
        (4, "/api/v1/namespaces/default/secrets/s"),
        (0, "/api/v1/watch/namespaces/default/configmaps/a"),
        (0, "/apis/coordination.k8s.io/v1"),
        (0, "/openapi/v3/api/v1"),
        (5, "/readyz?verbose"),
        (0, "/api/v1/namespaces/a/serviceaccounts/bot/token"),
    ];
    let seeds: Vec<Vec<u8>> = paths
        .iter()
        .map(|(method, path)| {
            let mut seed = vec![*method];
            seed.extend_from_slice(path.as_bytes());
            seed
        })
        .collect();
    drive(
        &seeds,
        PARSER_MUTATIONS,
        genplane_apiserver::request_info::exercise,
    );
}

#[test]
fn protobuf_watch_streams() {
    let schema = &genplane_api::core::configmap::SCHEMA;
    let object = |name: &str, rv: &str| {
        protobuf::encode(
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default", "resourceVersion": rv,
                    "labels": {"app": "web"}, "uid": "6f1d4e9a-1f3b-4a43-9a52-6d2f6f0d8e11"},
                "data": {"k": "v"}}),
            schema,
        )
        .unwrap()
    };
    let status = protobuf::encode(
        &json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
            "message": "too old resource version: 1 (5)", "reason": "Expired", "code": 410}),
        &genplane_apimachinery::meta::schemas::STATUS,
    )
    .unwrap();
    let mut stream = Vec::new();
    stream.extend(protobuf::watch_frame("ADDED", &object("a", "5")));
    stream.extend(protobuf::watch_frame("MODIFIED", &object("a", "6")));
    stream.extend(protobuf::watch_frame("BOOKMARK", &object("", "7")));
    let mut with_error = stream.clone();
    with_error.extend(protobuf::watch_frame("ERROR", &status));
    let seeds = vec![
        stream,
        with_error,
        protobuf::watch_frame("DELETED", &object("b", "9")),
    ];
    drive(
        &seeds,
        PARSER_MUTATIONS,
        genplane_api::core::configmap::exercise_watch_stream,
    );
}

#[test]
fn conversion_webhook_answers() {
    let converted = json!({"apiVersion": "stable.example.com/v2", "kind": "CronTab",
        "metadata": {"name": "a", "namespace": "default", "uid": "5e1f0000-0000-0000-0000-000000000001",
            "labels": {"app": "web"}, "annotations": {"note": "x"}},
        "spec": {"schedule": "* * * * *"}});
    let answers = [
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "fuzz", "result": {"status": "Success"}, "convertedObjects": [converted]}}),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "fuzz", "result": {"status": "Failure", "message": "down"}}}),
        json!({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview",
            "response": {"uid": "other", "result": {"status": "Success"}, "convertedObjects": [converted, converted]}}),
    ];
    let seeds: Vec<Vec<u8>> = answers
        .iter()
        .enumerate()
        .map(|(i, answer)| {
            let mut seed = vec![u8::try_from(i / 2).unwrap()];
            seed.extend(serde_json::to_vec(answer).unwrap());
            seed
        })
        .collect();
    drive(
        &seeds,
        PARSER_MUTATIONS,
        genplane_controlplane::conversion::exercise,
    );
}

#[test]
fn audit_policies() {
    let seeds = texts(&[
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: None\n  users: [system:kube-proxy]\n  verbs: [watch]\n  resources:\n  - group: \"\"\n    resources: [endpoints, services]\n- level: Metadata\n  resources:\n  - group: \"\"\n    resources: [secrets, configmaps]\n- level: Request\n  userGroups: [ops]\n  namespaces: [kube-system]\n- level: RequestResponse\n  verbs: [create]\n  resources:\n  - group: rbac.authorization.k8s.io\n    resources: [\"*\"]\n    resourceNames: [admin]\n- level: Metadata\n  nonResourceURLs: [\"/healthz*\", /version]\n  omitManagedFields: true\n",
        "{\"apiVersion\":\"audit.k8s.io/v1\",\"kind\":\"Policy\",\"rules\":[{\"level\":\"Metadata\"}]}",
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Request\n  omitStages: [ResponseStarted]\n  resources:\n  - group: apps\n    resources: [deployments/scale]\n",
    ]);
    drive(&seeds, FILE_MUTATIONS, genplane_audit::policy::exercise);
}

#[test]
fn encryption_configurations() {
    let seeds = texts(&[
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets, configmaps]\n    providers:\n      - aesgcm:\n          keys:\n            - name: key1\n              secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n      - identity: {}\n  - resources: [\"*.example.com\"]\n    providers:\n      - secretbox:\n          keys:\n            - name: box\n              secret: ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=\n",
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [\"*.*\"]\n    providers:\n      - aescbc:\n          keys:\n            - name: cbc\n              secret: MDEyMzQ1Njc4OWFiY2RlZg==\n",
        "{\"apiVersion\":\"apiserver.config.k8s.io/v1\",\"kind\":\"EncryptionConfiguration\",\"resources\":[{\"resources\":[\"secrets\"],\"providers\":[{\"identity\":{}}]}]}",
    ]);
    drive(
        &seeds,
        FILE_MUTATIONS,
        genplane_storage_value::config::exercise,
    );
}

#[test]
fn token_files() {
    let seeds = texts(&[
        "tok-alice,alice,u-alice\ntok-bob,bob,u-bob,\"devs,ops\"\n",
        "# a comment\n\"tok,quoted\",carol,u-carol,ops\n",
        "tok-dave,dave,u-dave,\"\"\n\n",
    ]);
    drive(
        &seeds,
        PARSER_MUTATIONS,
        genplane_authentication::token_file::exercise,
    );
}
