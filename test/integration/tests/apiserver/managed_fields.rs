//! Field ownership over HTTP: the `metadata.managedFields` clients see after creates, updates
//! and patches (operation `Update`), and server-side apply (`application/apply-patch+yaml`).

use crate::support;

use hyper::Method;
use serde_json::{Value, json};
use support::{Answer, Server, call};

async fn send(
    server: &Server,
    method: Method,
    path: &str,
    content_type: &str,
    body: &Value,
) -> Answer {
    let body = match body {
        Value::String(text) => text.clone().into_bytes(),
        other => serde_json::to_vec(other).unwrap(),
    };
    call(
        server,
        method,
        path,
        &[("content-type", content_type)],
        Some(body),
    )
    .await
}

/// The managers of an object as (manager, operation, subresource, fieldsV1).
fn managers(object: &Value) -> Vec<(String, String, String, Value)> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    let text = |k: &str| e[k].as_str().unwrap_or("").to_owned();
                    assert_eq!(text("fieldsType"), "FieldsV1", "{e}");
                    assert!(!text("time").is_empty(), "{e}");
                    (
                        text("manager"),
                        text("operation"),
                        text("subresource"),
                        e["fieldsV1"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn entry(manager: &str, operation: &str, fields: Value) -> (String, String, String, Value) {
    (
        manager.to_owned(),
        operation.to_owned(),
        String::new(),
        fields,
    )
}

const CM: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn updates_record_ownership() {
    let server = support::start().await;
    let created = send(
        &server,
        Method::POST,
        &format!("{CM}?fieldManager=creator"),
        "application/json",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "labels": {"a": "1"}}, "data": {"k": "v", "j": "w"}}),
    )
    .await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let created = created.json();
    assert_eq!(
        managers(&created),
        [entry(
            "creator",
            "Update",
            json!({"f:data": {".": {}, "f:j": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
        )]
    );
    assert_eq!(created["metadata"]["managedFields"][0]["apiVersion"], "v1");

    // A merge patch by another manager, named by its User-Agent, takes the key it changed.
    let patched = call(
        &server,
        Method::PATCH,
        &format!("{CM}/cm"),
        &[
            ("content-type", "application/merge-patch+json"),
            ("user-agent", "kubectl/v1.33.0 (linux/amd64) kubernetes/x"),
        ],
        Some(br#"{"data":{"k":"changed"}}"#.to_vec()),
    )
    .await
    .json();
    assert_eq!(
        managers(&patched),
        [
            entry(
                "creator",
                "Update",
                json!({"f:data": {".": {}, "f:j": {}}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
            ),
            entry("kubectl", "Update", json!({"f:data": {"f:k": {}}})),
        ]
    );

    // A PUT without managedFields keeps them; a removed key leaves every set.
    let mut replaced = patched.clone();
    replaced["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    replaced["data"].as_object_mut().unwrap().remove("j");
    let replaced = send(
        &server,
        Method::PUT,
        &format!("{CM}/cm?fieldManager=editor"),
        "application/json",
        &replaced,
    )
    .await
    .json();
    assert_eq!(
        managers(&replaced),
        [
            entry(
                "creator",
                "Update",
                json!({"f:data": {}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
            ),
            entry("kubectl", "Update", json!({"f:data": {"f:k": {}}})),
        ]
    );

    // A write that changes nothing changes nothing, managedFields and resourceVersion included.
    let same = send(
        &server,
        Method::PUT,
        &format!("{CM}/cm?fieldManager=other"),
        "application/json",
        &replaced,
    )
    .await
    .json();
    assert_eq!(
        same["metadata"]["resourceVersion"],
        replaced["metadata"]["resourceVersion"]
    );
    assert_eq!(
        same["metadata"]["managedFields"],
        replaced["metadata"]["managedFields"]
    );

    // Unreadable entries are ignored in favour of the stored ones ...
    let ignored = send(
        &server,
        Method::PATCH,
        &format!("{CM}/cm?fieldManager=m"),
        "application/merge-patch+json",
        &json!({"metadata": {"managedFields": [{"manager": "x", "operation": "Bogus", "fieldsType": "FieldsV1"}]}, "data": {"n": "1"}}),
    )
    .await;
    assert_eq!(
        ignored.status,
        200,
        "{}",
        String::from_utf8_lossy(&ignored.body)
    );
    let names: Vec<String> = managers(&ignored.json()).into_iter().map(|e| e.0).collect();
    assert_eq!(names, ["creator", "kubectl", "m"]);
    // ... an empty list clears them (as upstream's isResetManagedFields) ...
    let emptied = send(
        &server,
        Method::PATCH,
        &format!("{CM}/cm?fieldManager=m"),
        "application/merge-patch+json",
        &json!({"metadata": {"managedFields": []}}),
    )
    .await
    .json();
    assert_eq!(emptied["metadata"].get("managedFields"), None);
    // ... and updates of an object no one is known to manage do not start tracking it.
    let untracked = send(
        &server,
        Method::PATCH,
        &format!("{CM}/cm?fieldManager=late"),
        "application/merge-patch+json",
        &json!({"data": {"late": "1"}}),
    )
    .await
    .json();
    assert_eq!(untracked["data"]["late"], "1");
    assert_eq!(untracked["metadata"].get("managedFields"), None);
    // A list of one empty entry clears them too.
    let restored = send(
        &server,
        Method::PATCH,
        &format!("{CM}/cm?fieldManager=m"),
        "application/merge-patch+json",
        &json!({"metadata": {"managedFields": [{"manager": "hand", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:late": {}}}}]}}),
    )
    .await
    .json();
    assert_eq!(managers(&restored).len(), 1);
    let cleared = send(
        &server,
        Method::PATCH,
        &format!("{CM}/cm?fieldManager=m"),
        "application/json-patch+json",
        &json!([{"op": "replace", "path": "/metadata/managedFields", "value": [{}]}]),
    )
    .await
    .json();
    assert_eq!(cleared["metadata"].get("managedFields"), None);

    // Editing managedFields directly is allowed.
    let edited = send(
        &server,
        Method::PATCH,
        &format!("{CM}/cm?fieldManager=m"),
        "application/merge-patch+json",
        &json!({"metadata": {"managedFields": [{"manager": "hand", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}}]}}),
    )
    .await
    .json();
    assert_eq!(
        managers(&edited),
        [entry("hand", "Update", json!({"f:data": {"f:k": {}}}))]
    );

    // A dry run answers the would-be ownership and stores nothing.
    let dry = send(
        &server,
        Method::PATCH,
        &format!("{CM}/cm?fieldManager=dry&dryRun=All"),
        "application/merge-patch+json",
        &json!({"data": {"k": "dry"}}),
    )
    .await
    .json();
    assert_eq!(
        managers(&dry),
        [entry("dry", "Update", json!({"f:data": {"f:k": {}}}))]
    );
    let stored = call(&server, Method::GET, &format!("{CM}/cm"), &[], None)
        .await
        .json();
    assert_eq!(
        managers(&stored),
        [entry("hand", "Update", json!({"f:data": {"f:k": {}}}))]
    );

    // `force` belongs to apply patches only.
    let forced = send(
        &server,
        Method::PATCH,
        &format!("{CM}/cm?fieldManager=m&force=true"),
        "application/merge-patch+json",
        &json!({"data": {"k": "f"}}),
    )
    .await;
    assert_eq!(forced.status, 422);
    assert_eq!(
        forced.json()["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );

    // A field manager name longer than 128 bytes is refused.
    let long = send(
        &server,
        Method::POST,
        &format!("{CM}?fieldManager={}", "x".repeat(129)),
        "application/json",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "long"}}),
    )
    .await;
    assert_eq!(long.status, 422);
    assert_eq!(long.json()["details"]["causes"][0]["field"], "fieldManager");
}

#[tokio::test]
async fn status_writes_record_their_subresource() {
    let server = support::start().await;
    let created = send(
        &server,
        Method::POST,
        "/api/v1/namespaces?fieldManager=creator",
        "application/json",
        &json!({"metadata": {"name": "team"}}),
    )
    .await;
    assert_eq!(created.status, 201);
    let written = send(
        &server,
        Method::PATCH,
        "/api/v1/namespaces/team/status?fieldManager=reporter",
        "application/merge-patch+json",
        &json!({"status": {"conditions": [{"type": "Example", "status": "True"}]}}),
    )
    .await;
    assert_eq!(
        written.status,
        200,
        "{}",
        String::from_utf8_lossy(&written.body)
    );
    let status_entry = managers(&written.json())
        .into_iter()
        .find(|e| e.0 == "reporter")
        .unwrap();
    assert_eq!(status_entry.2, "status");
    assert_eq!(
        status_entry.3,
        json!({"f:status": {"f:conditions": {".": {}, "k:{\"type\":\"Example\"}": {".": {}, "f:status": {}, "f:type": {}}}}})
    );
}

const APPLY: &str = "application/apply-patch+yaml";

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo"}, "data": data})
}

#[tokio::test]
async fn server_side_apply() {
    let server = support::start().await;
    let url = |query: &str| format!("{CM}/demo?{query}");

    // A manager is required.
    let anonymous = send(
        &server,
        Method::PATCH,
        &url(""),
        APPLY,
        &cm(json!({"k": "1"})),
    )
    .await;
    assert_eq!(anonymous.status, 422);
    let anonymous = anonymous.json();
    assert_eq!(anonymous["reason"], "Invalid");
    assert_eq!(
        anonymous["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );

    // A dry run creates nothing.
    let dry = send(
        &server,
        Method::PATCH,
        &url("fieldManager=a&dryRun=All"),
        APPLY,
        &cm(json!({"k": "1"})),
    )
    .await;
    assert_eq!(dry.status, 201, "{}", String::from_utf8_lossy(&dry.body));
    assert_eq!(
        call(&server, Method::GET, &url(""), &[], None).await.status,
        404
    );

    // Apply creates the object (the body may be YAML), named by the URL.
    let yaml = Value::String(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels:\n    x: \"1\"\ndata:\n  k: \"1\"\n  only-a: a\n".to_owned(),
    );
    let created = send(
        &server,
        Method::PATCH,
        &url("fieldManager=a&force=false"),
        APPLY,
        &yaml,
    )
    .await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let created = created.json();
    assert_eq!(created["metadata"]["name"], "demo");
    assert_eq!(created["metadata"]["namespace"], "default");
    assert_eq!(
        managers(&created),
        [entry(
            "a",
            "Apply",
            json!({"f:data": {"f:k": {}, "f:only-a": {}}, "f:metadata": {"f:labels": {"f:x": {}}}})
        )]
    );

    // Re-applying the same configuration is a no-op.
    let again = send(&server, Method::PATCH, &url("fieldManager=a"), APPLY, &yaml)
        .await
        .json();
    assert_eq!(
        again["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );

    // Another manager with another value conflicts, one cause per field.
    let conflict = send(
        &server,
        Method::PATCH,
        &url("fieldManager=b"),
        APPLY,
        &cm(json!({"k": "2", "only-a": "b"})),
    )
    .await;
    assert_eq!(conflict.status, 409);
    let conflict = conflict.json();
    assert_eq!(conflict["reason"], "Conflict");
    assert_eq!(
        conflict["message"],
        "Apply failed with 2 conflicts: conflicts with \"a\":\n- .data.k\n- .data.only-a"
    );
    assert_eq!(
        conflict["details"]["causes"],
        json!([
            {"reason": "FieldManagerConflict", "message": "conflict with \"a\"", "field": ".data.k"},
            {"reason": "FieldManagerConflict", "message": "conflict with \"a\"", "field": ".data.only-a"},
        ])
    );

    // The same value is shared; force takes a field over.
    let shared = send(
        &server,
        Method::PATCH,
        &url("fieldManager=b"),
        APPLY,
        &cm(json!({"k": "1"})),
    )
    .await;
    assert_eq!(shared.status, 200);
    let forced = send(
        &server,
        Method::PATCH,
        &url("fieldManager=c&force=true"),
        APPLY,
        &cm(json!({"only-a": "c"})),
    )
    .await;
    assert_eq!(
        forced.status,
        200,
        "{}",
        String::from_utf8_lossy(&forced.body)
    );
    let forced = forced.json();
    assert_eq!(forced["data"], json!({"k": "1", "only-a": "c"}));
    assert_eq!(
        managers(&forced),
        [
            entry(
                "a",
                "Apply",
                json!({"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:x": {}}}})
            ),
            entry("b", "Apply", json!({"f:data": {"f:k": {}}})),
            entry("c", "Apply", json!({"f:data": {"f:only-a": {}}})),
        ]
    );

    // A smaller configuration removes what only this manager owned.
    let smaller = send(
        &server,
        Method::PATCH,
        &url("fieldManager=a"),
        APPLY,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo"}}),
    )
    .await
    .json();
    assert_eq!(
        smaller["data"],
        json!({"k": "1", "only-a": "c"}),
        "k is b's too, only-a is c's"
    );
    assert_eq!(
        smaller["metadata"].get("labels"),
        None,
        "the label was a's alone"
    );
    assert!(managers(&smaller).iter().all(|e| e.0 != "a"));

    // A dry run answers without storing.
    let dry = send(
        &server,
        Method::PATCH,
        &url("fieldManager=c&dryRun=All"),
        APPLY,
        &cm(json!({"only-a": "dry"})),
    )
    .await
    .json();
    assert_eq!(dry["data"]["only-a"], "dry");
    let stored = call(&server, Method::GET, &url(""), &[], None).await.json();
    assert_eq!(stored["data"]["only-a"], "c");

    // Bad configurations.
    let mut wrong_version = cm(json!({}));
    wrong_version["apiVersion"] = json!("v2");
    let answer = send(
        &server,
        Method::PATCH,
        &url("fieldManager=a"),
        APPLY,
        &wrong_version,
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.json()["message"],
        "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1"
    );
    let mut with_managed = cm(json!({}));
    with_managed["metadata"]["managedFields"] = json!([{"manager": "x"}]);
    let answer = send(
        &server,
        Method::PATCH,
        &url("fieldManager=a"),
        APPLY,
        &with_managed,
    )
    .await;
    assert_eq!(
        (answer.status, answer.json()["message"].clone()),
        (400, json!("metadata.managedFields must be nil"))
    );
    let mut renamed = cm(json!({}));
    renamed["metadata"]["name"] = json!("other");
    assert_eq!(
        send(
            &server,
            Method::PATCH,
            &url("fieldManager=a"),
            APPLY,
            &renamed
        )
        .await
        .status,
        400
    );
    let untyped = send(
        &server,
        Method::PATCH,
        "/api/v1/namespaces/default/serviceaccounts/sa?fieldManager=a",
        APPLY,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa",
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}]}}),
    )
    .await;
    // Upstream answers 500; bad input is never a server error here.
    assert_eq!(
        untyped.status,
        400,
        "{}",
        String::from_utf8_lossy(&untyped.body)
    );
    let untyped = untyped.json();
    assert_eq!(untyped["reason"], "BadRequest");
    assert!(
        untyped["message"]
            .as_str()
            .unwrap()
            .starts_with("failed to create typed patch object (default/sa; v1, Kind=ServiceAccount): .metadata.ownerReferences: "),
        "{untyped}"
    );
    let garbage = send(
        &server,
        Method::PATCH,
        &url("fieldManager=a"),
        APPLY,
        &Value::String("[1, 2".to_owned()),
    )
    .await;
    assert_eq!(garbage.status, 400);
    let strict = send(
        &server,
        Method::PATCH,
        &url("fieldManager=a&fieldValidation=Strict"),
        APPLY,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo"}, "bogus": 1}),
    )
    .await;
    assert_eq!(
        strict.status,
        400,
        "{}",
        String::from_utf8_lossy(&strict.body)
    );
}

#[tokio::test]
async fn apply_to_the_status_subresource() {
    let server = support::start().await;
    let missing = send(
        &server,
        Method::PATCH,
        "/api/v1/namespaces/ghost/status?fieldManager=s",
        APPLY,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ghost"}}),
    )
    .await;
    assert_eq!(missing.status, 404);
    assert_eq!(
        send(
            &server,
            Method::POST,
            "/api/v1/namespaces",
            "application/json",
            &json!({"metadata": {"name": "team"}})
        )
        .await
        .status,
        201
    );
    let applied = send(
        &server,
        Method::PATCH,
        "/api/v1/namespaces/team/status?fieldManager=s",
        APPLY,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"},
                "status": {"conditions": [{"type": "Example", "status": "True"}]}}),
    )
    .await;
    assert_eq!(
        applied.status,
        200,
        "{}",
        String::from_utf8_lossy(&applied.body)
    );
    let applied = applied.json();
    assert_eq!(applied["status"]["conditions"][0]["type"], "Example");
    let status_entry = managers(&applied).into_iter().find(|e| e.0 == "s").unwrap();
    assert_eq!(
        (status_entry.1.as_str(), status_entry.2.as_str()),
        ("Apply", "status")
    );
    assert_eq!(
        status_entry.3,
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Example\"}": {".": {}, "f:status": {}, "f:type": {}}}}})
    );

    // Through the main resource, status is the server's: applying it changes and owns nothing
    // there; through status, spec is not the writer's.
    let main = send(
        &server,
        Method::PATCH,
        "/api/v1/namespaces/other?fieldManager=m",
        APPLY,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other", "labels": {"a": "b"}},
                "status": {"phase": "Terminating"}}),
    )
    .await;
    assert_eq!(main.status, 201, "{}", String::from_utf8_lossy(&main.body));
    let main = main.json();
    assert_eq!(main["status"]["phase"], "Active");
    assert_eq!(
        managers(&main),
        [entry(
            "m",
            "Apply",
            json!({"f:metadata": {"f:labels": {"f:a": {}}}})
        )]
    );
    let status = send(
        &server,
        Method::PATCH,
        "/api/v1/namespaces/other/status?fieldManager=s",
        APPLY,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"},
                "spec": {"finalizers": ["example.com/x"]},
                "status": {"conditions": [{"type": "Example", "status": "True"}]}}),
    )
    .await
    .json();
    assert_eq!(status["spec"]["finalizers"], json!(["kubernetes"]));
    let status_entry = managers(&status).into_iter().find(|e| e.0 == "s").unwrap();
    assert_eq!(status_entry.3.get("f:spec"), None, "{:?}", status_entry.3);
}

#[tokio::test]
async fn kube_rs_patch_apply() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, Patch, PatchParams};

    let server = support::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.kube_client().await, "default");
    let desired = |value: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lease"}, "data": {"holder": value}});
    let created = api
        .patch(
            "lease",
            &PatchParams::apply("one"),
            &Patch::Apply(desired("one")),
        )
        .await
        .unwrap();
    assert_eq!(created.data.unwrap()["holder"], "one");
    let fields = created.metadata.managed_fields.unwrap();
    assert_eq!(fields[0].manager.as_deref(), Some("one"));
    assert_eq!(fields[0].operation.as_deref(), Some("Apply"));

    let kube::Error::Api(conflict) = api
        .patch(
            "lease",
            &PatchParams::apply("two"),
            &Patch::Apply(desired("two")),
        )
        .await
        .unwrap_err()
    else {
        panic!("not an API error")
    };
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        conflict.message,
        "Apply failed with 1 conflict: conflict with \"one\": .data.holder"
    );

    let forced = api
        .patch(
            "lease",
            &PatchParams::apply("two").force(),
            &Patch::Apply(desired("two")),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["holder"], "two");
    let managers: Vec<String> = forced
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|e| e.manager)
        .collect();
    assert_eq!(managers, ["two"]);
}

/// Upstream keeps at most 10 `Update` entries: past that, the oldest entries of an API version
/// are merged into one named `ancient-changes`, with the time of the newest entry merged.
/// `Apply` entries are not counted.
#[tokio::test]
async fn update_managers_are_capped_at_ten() {
    let server = support::start().await;
    let created = send(
        &server,
        Method::POST,
        &format!("{CM}?fieldManager=m00"),
        "application/json",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "many"}, "data": {"k00": "v"}}),
    )
    .await;
    assert_eq!(created.status, 201);
    let mut last = created.json();
    for n in 1..=11 {
        if n == 5 {
            let applied = send(
                &server,
                Method::PATCH,
                &format!("{CM}/many?fieldManager=applier"),
                APPLY,
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "many"}, "data": {"applied": "v"}}),
            )
            .await;
            assert_eq!(applied.status, 200);
        }
        let patched = send(
            &server,
            Method::PATCH,
            &format!("{CM}/many?fieldManager=m{n:02}"),
            "application/merge-patch+json",
            &json!({"data": {format!("k{n:02}"): "v"}}),
        )
        .await;
        assert_eq!(patched.status, 200);
        last = patched.json();
        let updaters = managers(&last).iter().filter(|e| e.1 == "Update").count();
        // m00..m10 are 11 updaters after the tenth patch: capped at once.
        assert_eq!(updaters, (n + 1).min(10), "after m{n:02}: {last}");
    }
    let mut entries = managers(&last);
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut expected = vec![
        entry(
            "ancient-changes",
            "Update",
            json!({"f:data": {".": {}, "f:k00": {}, "f:k01": {}, "f:k02": {}}}),
        ),
        entry("applier", "Apply", json!({"f:data": {"f:applied": {}}})),
    ];
    for n in 3..=11 {
        let key = format!("f:k{n:02}");
        expected.push(entry(
            &format!("m{n:02}"),
            "Update",
            json!({"f:data": {key: {}}}),
        ));
    }
    assert_eq!(entries, expected);
    // The merged entry carries the time of the newest entry merged into it (m02's) and the
    // API version of its entries.
    let raw = last["metadata"]["managedFields"].as_array().unwrap();
    let ancient = raw
        .iter()
        .find(|e| e["manager"] == "ancient-changes")
        .unwrap();
    assert_eq!(ancient["apiVersion"], "v1");
    assert!(ancient.get("subresource").is_none());
    let m03 = raw.iter().find(|e| e["manager"] == "m03").unwrap();
    assert!(ancient["time"].as_str().unwrap() <= m03["time"].as_str().unwrap());
}

/// An applied configuration's repeated keys, in upstream's YAML decoder's words: Strict
/// refuses them (naming each line), Warn warns of each, Ignore keeps the last values; a JSON
/// body is YAML too.
#[tokio::test]
async fn repeated_keys_of_an_apply_are_named_by_line() {
    let server = support::start().await;
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dup\n  name: dup\ndata:\n  k: a\n  other: x\n  k: b\n";
    let url = |mode: &str| format!("{CM}/dup?fieldManager=m&fieldValidation={mode}");
    let strict = send(
        &server,
        Method::PATCH,
        &url("Strict"),
        APPLY,
        &Value::String(yaml.into()),
    )
    .await;
    assert_eq!(strict.status, 400, "{}", strict.json());
    assert_eq!(
        strict.json()["message"],
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 5: key \"name\" already set in map\n  line 9: key \"k\" already set in map"
    );
    let warned = send(
        &server,
        Method::PATCH,
        &url("Warn"),
        APPLY,
        &Value::String(yaml.into()),
    )
    .await;
    assert_eq!(warned.status, 201, "{}", warned.json());
    assert_eq!(warned.json()["data"], json!({"k": "b", "other": "x"}));
    let warnings = warned.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(r#"line 9: key \"k\" already set in map"#)),
        "{warnings:?}"
    );
    let json_body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"k":"c","k":"d"}}"#;
    let ignored = send(
        &server,
        Method::PATCH,
        &url("Ignore"),
        APPLY,
        &Value::String(json_body.into()),
    )
    .await;
    assert_eq!(ignored.status, 200, "{}", ignored.json());
    assert_eq!(ignored.json()["data"]["k"], "d");
    let strict = send(
        &server,
        Method::PATCH,
        &url("Strict"),
        APPLY,
        &Value::String(json_body.into()),
    )
    .await;
    assert!(
        strict.json()["message"]
            .as_str()
            .unwrap()
            .ends_with("line 1: key \"k\" already set in map"),
        "{}",
        strict.json()
    );
}
