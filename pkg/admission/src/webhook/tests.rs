use super::*;
use crate::Request;
use genplane_apimachinery::schema::{GroupVersionKind, GroupVersionResource};

#[derive(Debug)]
struct Labeled;

impl Namespaces for Labeled {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Value>, ApiError>> {
        Box::pin(async move {
            Ok((name != "missing")
                .then(|| json!({"metadata": {"name": name, "labels": {"env": name}}})))
        })
    }

    fn create<'a>(&'a self, _name: &'a str) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async { Ok(()) })
    }
}

fn request(group: &str, resource: &str, subresource: &str) -> Request {
    Request {
        kind: GroupVersionKind::new(group, "v1", "Thing"),
        resource: GroupVersionResource::new(group, "v1", resource),
        subresource: subresource.to_owned(),
        ..Request::default()
    }
}

fn attributes<'a>(
    request: &'a Request,
    operation: Operation,
    namespace: &'a str,
) -> Attributes<'a> {
    Attributes {
        request,
        operation,
        namespace,
        name: "x",
        old_object: None,
    }
}

fn rule(value: Value) -> Rule {
    serde_json::from_value(value).unwrap()
}

#[test]
fn rules_match_as_upstreams() {
    let configmaps = request("", "configmaps", "");
    let status = request("", "configmaps", "status");
    let namespaces = request("", "namespaces", "");
    let create = |r| attributes(r, Operation::Create, "default");
    let cases: Vec<(Value, Attributes<'_>, bool)> = vec![
        (
            json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}),
            create(&configmaps),
            true,
        ),
        (
            json!({"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}),
            create(&configmaps),
            false,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}),
            create(&configmaps),
            true,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["apps"], "apiVersions": ["*"], "resources": ["*"]}),
            create(&configmaps),
            false,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["v2"], "resources": ["*"]}),
            create(&configmaps),
            false,
        ),
        // `*` is every resource but no subresource; `*/*` both.
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}),
            create(&status),
            false,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}),
            create(&status),
            true,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/status"]}),
            create(&status),
            true,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["configmaps/*"]}),
            create(&status),
            true,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["configmaps/status"]}),
            create(&configmaps),
            false,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Cluster"}),
            create(&configmaps),
            false,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Namespaced"}),
            create(&configmaps),
            true,
        ),
        // A Namespace is cluster-scoped, though its attributes carry its name as namespace.
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Cluster"}),
            attributes(&namespaces, Operation::Create, "team"),
            true,
        ),
        (
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Namespaced"}),
            attributes(&namespaces, Operation::Create, "team"),
            false,
        ),
    ];
    for (i, (value, attributes, want)) in cases.into_iter().enumerate() {
        assert_eq!(rule(value).matches(&attributes), want, "case {i}");
    }
}

fn hook(extra: Value) -> Webhook {
    let mut value = json!({
        "name": "a.example.com",
        "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}],
    });
    for (k, v) in extra.as_object().unwrap() {
        value[k] = v.clone();
    }
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
async fn selectors_choose_namespaces_and_objects() {
    let configmaps = request("", "configmaps", "");
    let prod = attributes(&configmaps, Operation::Create, "prod");
    let labeled = json!({"metadata": {"labels": {"team": "a"}}});
    let plain = json!({"metadata": {}});
    let only_prod = hook(json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}}));
    assert!(
        only_prod
            .matches(&prod, Some(&plain), &Labeled)
            .await
            .unwrap()
    );
    let dev = attributes(&configmaps, Operation::Create, "dev");
    assert!(
        !only_prod
            .matches(&dev, Some(&plain), &Labeled)
            .await
            .unwrap()
    );
    let missing = attributes(&configmaps, Operation::Create, "missing");
    assert_eq!(
        only_prod
            .matches(&missing, Some(&plain), &Labeled)
            .await
            .unwrap_err()
            .code,
        404
    );

    let team_a = hook(
        json!({"objectSelector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]}}),
    );
    assert!(
        team_a
            .matches(&prod, Some(&labeled), &Labeled)
            .await
            .unwrap()
    );
    assert!(!team_a.matches(&prod, Some(&plain), &Labeled).await.unwrap());
    // On update either object may match; on delete the old one.
    let update = Attributes {
        old_object: Some(&labeled),
        operation: Operation::Update,
        ..prod
    };
    assert!(
        team_a
            .matches(&update, Some(&plain), &Labeled)
            .await
            .unwrap()
    );
    let delete = Attributes {
        old_object: Some(&labeled),
        operation: Operation::Delete,
        ..prod
    };
    assert!(team_a.matches(&delete, None, &Labeled).await.unwrap());
}

#[test]
fn match_conditions_filter_and_fail() {
    let default_request = crate::Request::default();
    let plain = Attributes {
        request: &default_request,
        operation: Operation::Create,
        namespace: "",
        name: "",
        old_object: None,
    };
    let request = json!({"object": {"metadata": {"name": "skip-me"}}, "oldObject": null, "operation": "CREATE"});
    let skip = hook(
        json!({"matchConditions": [{"name": "not-skipped", "expression": "!object.metadata.name.startsWith('skip')"}]}),
    );
    assert_eq!(skip.conditions_hold(&request, &plain), Ok(false));
    let keep = hook(
        json!({"matchConditions": [{"name": "create", "expression": "request.operation == 'CREATE'"}]}),
    );
    assert_eq!(keep.conditions_hold(&request, &plain), Ok(true));
    let broken = hook(
        json!({"matchConditions": [{"name": "broken", "expression": "object.spec.missing == 1"}]}),
    );
    assert!(
        matches!(broken.conditions_hold(&request, &plain), Err(Error::MatchCondition(m)) if m.contains("broken"))
    );
    // the authorizer: the server's, asked about the request's user
    let authorized = hook(
        json!({"matchConditions": [{"name": "may-delete", "expression":
            "authorizer.group('').resource('configmaps').namespace('a').check('delete').allowed()"}]}),
    );
    let allowed = crate::Request {
        authorizer: Some(std::sync::Arc::new(genplane_authorization::AlwaysAllow)),
        ..crate::Request::default()
    };
    let allowed = Attributes {
        request: &allowed,
        ..plain
    };
    assert_eq!(authorized.conditions_hold(&request, &allowed), Ok(true));
    // without an authorizer every check errs and allows nothing
    assert_eq!(authorized.conditions_hold(&request, &plain), Ok(false));
}

fn answer(response: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})).unwrap()
}

#[test]
fn responses_are_read_as_upstream_reads_them() {
    let patch = base64::engine::general_purpose::STANDARD
        .encode(br#"[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]"#);
    let Verdict::Allowed(allowed) = read_response(
        &answer(json!({"uid": "u", "allowed": true, "patchType": "JSONPatch", "patch": patch, "warnings": ["careful"],
            "auditAnnotations": {"checked": "yes"}})),
        "u",
        "v1",
    )
    .unwrap() else {
        panic!("allowed")
    };
    assert_eq!(allowed.patch.unwrap().len(), 1);
    assert_eq!(allowed.warnings, ["careful"]);
    assert_eq!(
        allowed.audit_annotations,
        [("checked".to_owned(), "yes".to_owned())]
    );

    assert_eq!(
        read_response(&answer(json!({"uid": "other", "allowed": true})), "u", "v1").unwrap_err(),
        Error::InvalidResponse("expected response.uid=\"u\", got \"other\"".into())
    );
    assert_eq!(
        read_response(br#"{"apiVersion": "v1", "kind": "Status"}"#, "u", "v1")
            .unwrap_err()
            .to_string(),
        "received invalid webhook response: expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got v1, Kind=Status"
    );
    let Verdict::Denied(status, _, _) = read_response(
        &answer(json!({"uid": "u", "allowed": false, "status": {"code": 403, "message": "no"}})),
        "u",
        "v1",
    )
    .unwrap() else {
        panic!("denied")
    };
    let refusal = denial("deny.example.com", status);
    assert_eq!(refusal.code, 403);
    assert_eq!(
        refusal.message,
        "admission webhook \"deny.example.com\" denied the request: no"
    );
    let bare = denial("deny.example.com", Value::Null);
    assert_eq!(bare.code, 400);
    assert_eq!(
        bare.message,
        "admission webhook \"deny.example.com\" denied the request without explanation"
    );
}

#[test]
fn the_review_request_carries_the_write() {
    let mut req = request("", "configmaps", "status");
    req.user.username = "alice".into();
    req.dry_run = true;
    let old = json!({"metadata": {"name": "x"}});
    let attrs = Attributes {
        old_object: Some(&old),
        ..attributes(&req, Operation::Update, "default")
    };
    let review = review_request(
        &attrs,
        Some(&json!({"metadata": {"name": "x", "labels": {"a": "b"}}})),
    );
    assert_eq!(review["operation"], "UPDATE");
    assert_eq!(review["namespace"], "default");
    assert_eq!(review["subResource"], "status");
    assert_eq!(
        review["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(review["userInfo"]["username"], "alice");
    assert_eq!(review["oldObject"], old);
    assert_eq!(review["dryRun"], true);
    assert_eq!(review["options"]["kind"], "UpdateOptions");
    assert_eq!(review["uid"].as_str().unwrap().len(), 36);
}

/// Stored configurations, changed by the test.
#[derive(Debug, Default)]
struct Stored(Mutex<Vec<Value>>);

impl Configurations for Stored {
    fn list(&self, _flavor: Flavor) -> BoxFuture<'_, Result<Listed, ApiError>> {
        Box::pin(async { Ok(Listed::unversioned(self.0.lock().unwrap().clone())) })
    }
}

fn configuration(name: &str, generation: i64, condition: &str) -> Value {
    json!({"metadata": {"name": name, "uid": format!("uid-{name}"), "generation": generation},
        "webhooks": [{"name": format!("{name}.example.com"),
            "matchConditions": [{"name": "c", "expression": condition}]}]})
}

#[tokio::test]
async fn webhooks_are_read_and_compiled_once_per_configuration_generation() {
    let default_request = crate::Request::default();
    let plain = Attributes {
        request: &default_request,
        operation: Operation::Create,
        namespace: "",
        name: "",
        old_object: None,
    };
    let stored = Arc::new(Stored::default());
    *stored.0.lock().unwrap() = vec![
        configuration("b", 1, "true"),
        configuration("a", 1, "false"),
    ];
    let dispatcher = Dispatcher::new(stored.clone(), Arc::new(Labeled));
    let first = dispatcher.webhooks(Flavor::Validating).await.unwrap();
    // in the order of the configurations' names
    assert_eq!(first[0][0].name, "a.example.com");
    assert_eq!(first[1][0].name, "b.example.com");
    let review = json!({"object": {}, "oldObject": null});
    assert_eq!(first[0][0].conditions_hold(&review, &plain), Ok(false));
    assert_eq!(first[1][0].conditions_hold(&review, &plain), Ok(true));
    let again = dispatcher.webhooks(Flavor::Validating).await.unwrap();
    assert!(Arc::ptr_eq(&first[0], &again[0]) && Arc::ptr_eq(&first[1], &again[1]));
    // a new generation is read again; a deleted configuration is forgotten
    *stored.0.lock().unwrap() = vec![configuration("a", 2, "true")];
    let changed = dispatcher.webhooks(Flavor::Validating).await.unwrap();
    assert_eq!(changed.len(), 1);
    assert!(!Arc::ptr_eq(&first[0], &changed[0]));
    assert_eq!(changed[0][0].conditions_hold(&review, &plain), Ok(true));
    assert_eq!(dispatcher.read.lock().unwrap().len(), 1);
}

#[test]
fn v1beta1_webhooks_get_v1beta1_reviews_and_their_answers_are_not_held_to_v1s_checks() {
    let versions = |list: &[&str]| {
        let webhook = hook(json!({"admissionReviewVersions": list}));
        review_version(&webhook)
    };
    assert_eq!(versions(&["v1beta1"]), Some("v1beta1"));
    assert_eq!(versions(&["v2", "v1beta1", "v1"]), Some("v1beta1"));
    assert_eq!(versions(&["v1", "v1beta1"]), Some("v1"));
    assert_eq!(versions(&["v2"]), None);
    // neither the kind nor the uid is checked in v1beta1
    let answer = serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1beta1",
        "kind": "AdmissionReview", "response": {"allowed": true, "warnings": ["old"]}}))
    .unwrap();
    let Verdict::Allowed(allowed) = read_response(&answer, "u", "v1beta1").unwrap() else {
        panic!("allowed")
    };
    assert_eq!(allowed.warnings, ["old"]);
    // the same answer to a v1 review is refused
    assert!(read_response(&answer, "u", "v1").is_err());
    assert_eq!(
        read_response(br#"{"kind": "AdmissionReview"}"#, "u", "v1beta1").unwrap_err(),
        Error::InvalidResponse("webhook response was absent".into())
    );
}

#[test]
fn credentials_are_picked_by_the_host_as_the_url_writes_it() {
    for (url, host) in [
        ("https://hooks.example.com/validate", "hooks.example.com"),
        (
            "https://hooks.example.com:443/validate?x=1",
            "hooks.example.com:443",
        ),
        ("https://127.0.0.1:8443", "127.0.0.1:8443"),
        ("https://[::1]:9443/a#b", "[::1]:9443"),
    ] {
        assert_eq!(super::url_host(url), host, "{url}");
    }
}

#[tokio::test]
async fn failures_ignored_and_mutations_are_annotated_as_upstream() {
    // two webhooks per kind: the first's condition leaves the write out, the second cannot
    // be reached (nothing listens on port 1) and ignores failures
    let unreachable = |name: &str, condition: &str| {
        json!({"name": name, "failurePolicy": "Ignore", "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:1/hook"},
            "matchConditions": [{"name": "c", "expression": condition}],
            "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                "resources": ["*"]}]})
    };
    let stored = Arc::new(Stored::default());
    *stored.0.lock().unwrap() = vec![json!({
        "metadata": {"name": "hooks", "uid": "uid-hooks", "generation": 1},
        "webhooks": [unreachable("skipped.example.com", "false"),
            unreachable("down.example.com", "true")],
    })];
    let dispatcher = Dispatcher::new(stored, Arc::new(Labeled));
    let request = request("", "configmaps", "");
    let mut object = json!({"metadata": {"name": "x"}});
    MutatingAdmissionWebhook::new(dispatcher.clone())
        .admit(attributes(&request, Operation::Create, "team"), &mut object)
        .await
        .unwrap();
    ValidatingAdmissionWebhook::new(dispatcher)
        .validate(
            attributes(&request, Operation::Create, "team"),
            Some(&object),
        )
        .await
        .unwrap();
    let annotations: BTreeMap<String, String> = request
        .audit_annotations
        .take()
        .into_iter()
        .map(|a| (a.key, a.value))
        .collect();
    let mutation: Value =
        serde_json::from_str(&annotations["mutation.webhook.admission.k8s.io/round_0_index_1"])
            .unwrap();
    assert_eq!(
        mutation,
        json!({"configuration": "hooks", "webhook": "down.example.com", "mutated": false})
    );
    assert_eq!(
        annotations.keys().collect::<Vec<_>>(),
        [
            "failed-open.mutation.webhook.admission.k8s.io/round_0_index_1",
            "failed-open.validating.webhook.admission.k8s.io/round_0_index_1",
            "mutation.webhook.admission.k8s.io/round_0_index_1",
        ]
    );
    assert_eq!(
        annotations["failed-open.validating.webhook.admission.k8s.io/round_0_index_1"],
        "down.example.com"
    );
}
