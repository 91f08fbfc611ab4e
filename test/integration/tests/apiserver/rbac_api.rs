//! rbac.authorization.k8s.io/v1 over real HTTP on loopback: the four kinds stored and served
//! as kube-apiserver 1.33 stores and serves them (what `kubectl create role`, `kubectl get
//! rolebindings -o wide` and `kubectl apply` of RBAC manifests observe). Authorization is not
//! part of this: these tests only read and write the objects.

use crate::support;

use support::{Answer, Server, call, start};

use genplane_api::rbac::{clusterrole, rolebinding};
use genplane_apimachinery::codec::protobuf;
use genplane_storage::Storage;
use hyper::Method;
use serde_json::{Value, json};

const GROUP: &str = "/apis/rbac.authorization.k8s.io/v1";
const JSON: &str = "application/json";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

async fn send(server: &Server, method: Method, path: &str, media: &str, body: &Value) -> Answer {
    call(
        server,
        method,
        path,
        &[("content-type", media), ("accept", JSON)],
        Some(serde_json::to_vec(body).unwrap()),
    )
    .await
}

async fn post(server: &Server, path: &str, body: Value) -> Answer {
    send(server, Method::POST, path, JSON, &body).await
}

async fn put(server: &Server, path: &str, body: Value) -> Answer {
    send(server, Method::PUT, path, JSON, &body).await
}

async fn get(server: &Server, path: &str) -> Answer {
    call(server, Method::GET, path, &[("accept", JSON)], None).await
}

fn role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name}, "rules": rules})
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
}

fn binding(kind: &str, name: &str, role_ref: Value, subjects: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "roleRef": role_ref, "subjects": subjects})
}

/// The causes of a 422 answer as `(reason, field)` pairs.
fn causes(answer: &Answer) -> Vec<(String, String)> {
    assert_eq!(
        answer.status,
        422,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let status = answer.json();
    assert_eq!(status["reason"], "Invalid");
    status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["reason"].as_str().unwrap().to_owned(),
                c["field"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(r, f)| ((*r).to_owned(), (*f).to_owned()))
        .collect()
}

#[tokio::test]
async fn discovery_lists_the_group_and_its_four_resources() {
    let server = start().await;
    let groups = get(&server, "/apis").await.json();
    let rbac = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "rbac.authorization.k8s.io")
        .unwrap_or_else(|| panic!("no rbac group in {groups}"))
        .clone();
    assert_eq!(
        rbac["preferredVersion"],
        json!({"groupVersion": "rbac.authorization.k8s.io/v1", "version": "v1"})
    );
    let resources = get(&server, GROUP).await.json();
    assert_eq!(resources["groupVersion"], "rbac.authorization.k8s.io/v1");
    let described: Vec<(String, bool, String, Value)> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["namespaced"].as_bool().unwrap(),
                r["kind"].as_str().unwrap().to_owned(),
                r.get("shortNames").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    assert_eq!(
        described,
        [
            (
                "clusterrolebindings".to_owned(),
                false,
                "ClusterRoleBinding".to_owned(),
                Value::Null
            ),
            (
                "clusterroles".to_owned(),
                false,
                "ClusterRole".to_owned(),
                Value::Null
            ),
            (
                "rolebindings".to_owned(),
                true,
                "RoleBinding".to_owned(),
                Value::Null
            ),
            ("roles".to_owned(), true, "Role".to_owned(), Value::Null),
        ]
    );
    let verbs = &resources["resources"][0]["verbs"];
    assert_eq!(
        verbs,
        &json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ])
    );
    let aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let apis = call(
        &server,
        Method::GET,
        "/apis",
        &[("accept", aggregated)],
        None,
    )
    .await
    .json();
    assert!(
        apis["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["metadata"]["name"] == "rbac.authorization.k8s.io"),
        "{apis}"
    );
}

#[tokio::test]
async fn crud_of_all_four_kinds() {
    let server = start().await;
    let roles = format!("{GROUP}/namespaces/default/roles");
    let read_pods = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]);
    let created = post(&server, &roles, role("pod-reader", read_pods.clone())).await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let created = created.json();
    assert_eq!(created["metadata"]["namespace"], "default");
    assert_eq!(created["rules"], read_pods);
    // Stored where kube-apiserver stores roles.
    let stored = server
        .storage
        .get("/registry/roles/default/pod-reader", None)
        .await
        .unwrap()
        .expect("stored under /registry/roles/");
    let stored: Value = serde_json::from_slice(&stored.value).unwrap();
    assert_eq!(stored["rules"], read_pods);

    let cluster_roles = format!("{GROUP}/clusterroles");
    let metrics = json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]);
    let created = post(
        &server,
        &cluster_roles,
        cluster_role("metrics", metrics.clone()),
    )
    .await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    assert!(created.json()["metadata"].get("namespace").is_none());
    assert!(
        server
            .storage
            .get("/registry/clusterroles/metrics", None)
            .await
            .unwrap()
            .is_some()
    );

    let bindings = format!("{GROUP}/namespaces/default/rolebindings");
    let created = post(
        &server,
        &bindings,
        binding(
            "RoleBinding",
            "read-pods",
            json!({"kind": "Role", "name": "pod-reader"}),
            json!([{"kind": "User", "name": "jane"}, {"kind": "ServiceAccount", "name": "default", "apiGroup": ""}]),
        ),
    )
    .await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    // Defaulted as upstream defaults: API groups filled in.
    let created = created.json();
    assert_eq!(
        created["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"})
    );
    assert_eq!(
        created["subjects"],
        json!([
            {"kind": "User", "name": "jane", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "ServiceAccount", "name": "default"},
        ])
    );

    let cluster_bindings = format!("{GROUP}/clusterrolebindings");
    let created = post(
        &server,
        &cluster_bindings,
        binding(
            "ClusterRoleBinding",
            "metrics-readers",
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics"}),
            json!([{"kind": "Group", "name": "system:monitoring"}]),
        ),
    )
    .await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    assert!(
        server
            .storage
            .get("/registry/clusterrolebindings/metrics-readers", None)
            .await
            .unwrap()
            .is_some()
    );

    // Lists, by kind and across namespaces.
    let all = get(&server, &format!("{GROUP}/rolebindings")).await.json();
    assert_eq!(all["kind"], "RoleBindingList");
    assert_eq!(all["items"][0]["metadata"]["name"], "read-pods");
    // The server's own bootstrap policy is listed beside what the test created.
    let list = get(&server, &cluster_roles).await.json();
    assert_eq!(list["kind"], "ClusterRoleList");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|role| role["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"metrics"), "{names:?}");
    assert!(names.contains(&"cluster-admin"), "{names:?}");

    // Update: a Role's rules may change; a binding's subjects too.
    let mut changed = get(&server, &format!("{roles}/pod-reader")).await.json();
    changed["rules"][0]["verbs"] = json!(["get", "list", "watch"]);
    let updated = put(&server, &format!("{roles}/pod-reader"), changed).await;
    assert_eq!(
        updated.status,
        200,
        "{}",
        String::from_utf8_lossy(&updated.body)
    );
    assert_eq!(
        updated.json()["rules"][0]["verbs"],
        json!(["get", "list", "watch"])
    );
    let mut more = get(&server, &format!("{bindings}/read-pods")).await.json();
    more["subjects"] = json!([{"kind": "Group", "name": "devs"}]);
    let updated = put(&server, &format!("{bindings}/read-pods"), more).await;
    assert_eq!(
        updated.status,
        200,
        "{}",
        String::from_utf8_lossy(&updated.body)
    );
    assert_eq!(
        updated.json()["subjects"],
        json!([{"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"}])
    );

    // Delete every kind.
    for url in [
        format!("{roles}/pod-reader"),
        format!("{cluster_roles}/metrics"),
        format!("{bindings}/read-pods"),
        format!("{cluster_bindings}/metrics-readers"),
    ] {
        let deleted = call(&server, Method::DELETE, &url, &[], None).await;
        assert_eq!(deleted.status, 200, "{url}");
        let gone = get(&server, &url).await;
        assert_eq!(
            (gone.status, gone.json()["reason"].clone()),
            (404, json!("NotFound"))
        );
    }
    let gone = get(&server, &format!("{roles}/pod-reader")).await.json();
    assert_eq!(
        gone["message"],
        "roles.rbac.authorization.k8s.io \"pod-reader\" not found"
    );
}

#[tokio::test]
async fn invalid_objects_get_upstream_causes() {
    let server = start().await;
    let roles = format!("{GROUP}/namespaces/default/roles");
    let bad = post(
        &server,
        &roles,
        role(
            "bad",
            json!([{"resources": ["pods"]}, {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]),
        ),
    )
    .await;
    assert_eq!(
        causes(&bad),
        pairs(&[
            ("FieldValueRequired", "rules[0].verbs"),
            ("FieldValueRequired", "rules[0].apiGroups"),
            ("FieldValueInvalid", "rules[1].nonResourceURLs"),
        ])
    );
    let status = bad.json();
    assert_eq!(status["details"]["kind"], "Role");
    assert_eq!(status["details"]["group"], "rbac.authorization.k8s.io");
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "Required value: verbs must contain at least one value"
    );
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("Role.rbac.authorization.k8s.io \"bad\" is invalid: ["),
        "{status}"
    );

    let bad_ref = post(
        &server,
        &format!("{GROUP}/clusterrolebindings"),
        binding(
            "ClusterRoleBinding",
            "bad",
            json!({"apiGroup": "example.com", "kind": "Role", "name": ""}),
            json!([
                {"kind": "ServiceAccount", "name": "default"},
                {"kind": "User", "name": "jane", "apiGroup": "v1"},
                {"kind": "Robot", "name": "r2"},
            ]),
        ),
    )
    .await;
    assert_eq!(
        causes(&bad_ref),
        pairs(&[
            ("FieldValueNotSupported", "roleRef.apiGroup"),
            ("FieldValueNotSupported", "roleRef.kind"),
            ("FieldValueRequired", "roleRef.name"),
            ("FieldValueRequired", "subjects[0].namespace"),
            ("FieldValueNotSupported", "subjects[1].apiGroup"),
            ("FieldValueNotSupported", "subjects[2].kind"),
        ])
    );
    assert_eq!(
        bad_ref.json()["details"]["causes"][1]["message"],
        "Unsupported value: \"Role\": supported values: \"ClusterRole\""
    );

    let bad_selector = post(
        &server,
        &format!("{GROUP}/clusterroles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": []}}),
    )
    .await;
    assert_eq!(
        causes(&bad_selector),
        pairs(&[("FieldValueRequired", "aggregationRule.clusterRoleSelectors")])
    );

    // A wrong JSON type is a 400 naming the field, before validation.
    let wrong = post(&server, &roles, role("wrong", json!([{"verbs": "get"}]))).await;
    assert_eq!(wrong.status, 400);
    assert_eq!(
        wrong.json()["message"],
        "Role in version \"rbac.authorization.k8s.io/v1\" cannot be handled as a Role: json: cannot unmarshal string into field Role.rules[0].verbs of type []string"
    );
}

#[tokio::test]
async fn role_ref_cannot_change() {
    let server = start().await;
    let bindings = format!("{GROUP}/namespaces/default/rolebindings");
    let created = post(
        &server,
        &bindings,
        binding(
            "RoleBinding",
            "viewers",
            json!({"kind": "ClusterRole", "name": "view"}),
            json!([]),
        ),
    )
    .await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let mut changed = created.json();
    changed["roleRef"]["name"] = json!("edit");
    let refused = put(&server, &format!("{bindings}/viewers"), changed).await;
    assert_eq!(causes(&refused), pairs(&[("FieldValueInvalid", "roleRef")]));
    let message = refused.json()["details"]["causes"][0]["message"].clone();
    assert!(
        message
            .as_str()
            .unwrap()
            .ends_with(": cannot change roleRef"),
        "{message}"
    );
    // A patch is refused the same way, and nothing changed.
    let patched = send(
        &server,
        Method::PATCH,
        &format!("{bindings}/viewers"),
        "application/merge-patch+json",
        &json!({"roleRef": {"kind": "Role"}}),
    )
    .await;
    assert_eq!(causes(&patched), pairs(&[("FieldValueInvalid", "roleRef")]));
    assert_eq!(
        get(&server, &format!("{bindings}/viewers")).await.json()["roleRef"]["name"],
        "view"
    );

    let cluster_bindings = format!("{GROUP}/clusterrolebindings");
    let created = post(
        &server,
        &cluster_bindings,
        binding(
            "ClusterRoleBinding",
            "admins",
            json!({"kind": "ClusterRole", "name": "admin"}),
            json!([{"kind": "Group", "name": "admins"}]),
        ),
    )
    .await;
    assert_eq!(created.status, 201);
    let mut changed = created.json();
    changed["roleRef"]["name"] = json!("cluster-admin");
    let refused = put(&server, &format!("{cluster_bindings}/admins"), changed).await;
    assert_eq!(causes(&refused), pairs(&[("FieldValueInvalid", "roleRef")]));
}

#[tokio::test]
async fn tables_show_upstream_columns_and_cells() {
    let server = start().await;
    let roles = format!("{GROUP}/namespaces/default/roles");
    assert_eq!(
        post(&server, &roles, role("r", json!([]))).await.status,
        201
    );
    let table = call(&server, Method::GET, &roles, &[("accept", TABLE)], None).await;
    assert_eq!(
        table.header("content-type"),
        "application/json;as=Table;v=v1;g=meta.k8s.io"
    );
    let table = table.json();
    let columns: Vec<(&str, &str)> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["type"].as_str().unwrap()))
        .collect();
    assert_eq!(columns, [("Name", "string"), ("Created At", "date")]);
    let created =
        get(&server, &format!("{roles}/r")).await.json()["metadata"]["creationTimestamp"].clone();
    assert_eq!(table["rows"][0]["cells"], json!(["r", created]));

    let bindings = format!("{GROUP}/namespaces/default/rolebindings");
    let created = post(
        &server,
        &bindings,
        binding(
            "RoleBinding",
            "b",
            json!({"kind": "ClusterRole", "name": "view"}),
            json!([
                {"kind": "User", "name": "jane"},
                {"kind": "User", "name": "joe"},
                {"kind": "Group", "name": "devs"},
                {"kind": "ServiceAccount", "name": "default", "namespace": "ci"},
            ]),
        ),
    )
    .await;
    assert_eq!(created.status, 201);
    let table = call(
        &server,
        Method::GET,
        &format!("{bindings}/b"),
        &[("accept", TABLE)],
        None,
    )
    .await
    .json();
    let columns: Vec<(&str, i64)> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["priority"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Name", 0),
            ("Role", 0),
            ("Age", 0),
            ("Users", 1),
            ("Groups", 1),
            ("ServiceAccounts", 1)
        ]
    );
    let cells = table["rows"][0]["cells"].as_array().unwrap().clone();
    assert_eq!(cells[0], "b");
    assert_eq!(cells[1], "ClusterRole/view");
    assert!(cells[2].as_str().unwrap().ends_with('s'), "{cells:?}");
    assert_eq!(
        cells[3..],
        [json!("jane, joe"), json!("devs"), json!("ci/default")]
    );

    let cluster_bindings = format!("{GROUP}/clusterrolebindings");
    assert_eq!(
        post(
            &server,
            &cluster_bindings,
            binding(
                "ClusterRoleBinding",
                "cb",
                json!({"kind": "ClusterRole", "name": "cluster-admin"}),
                json!([{"kind": "Group", "name": "system:masters"}]),
            ),
        )
        .await
        .status,
        201
    );
    let table = call(
        &server,
        Method::GET,
        &cluster_bindings,
        &[("accept", TABLE)],
        None,
    )
    .await
    .json();
    assert_eq!(table["rows"][0]["cells"][1], "ClusterRole/cluster-admin");
    assert_eq!(table["rows"][0]["cells"][4], "system:masters");
}

#[tokio::test]
async fn protobuf_bodies_as_kubectl_create_sends_them() {
    let server = start().await;
    // `kubectl create rolebinding` sends protobuf and prefers it back.
    let object = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "p", "creationTimestamp": null},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"}],
    });
    let created = call(
        &server,
        Method::POST,
        &format!("{GROUP}/namespaces/default/rolebindings?fieldManager=kubectl-create&fieldValidation=Strict"),
        &[
            ("content-type", PROTOBUF),
            ("accept", "application/vnd.kubernetes.protobuf,application/json"),
        ],
        Some(protobuf::encode(&object, &rolebinding::SCHEMA).unwrap()),
    )
    .await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    assert_eq!(created.header("content-type"), PROTOBUF);
    let answer = protobuf::decode(&created.body, &rolebinding::SCHEMA).unwrap();
    assert_eq!(answer["roleRef"], object["roleRef"]);
    assert_eq!(answer["subjects"], object["subjects"]);
    assert_eq!(answer["metadata"]["namespace"], "default");
    let stored = get(
        &server,
        &format!("{GROUP}/namespaces/default/rolebindings/p"),
    )
    .await
    .json();
    assert_eq!(stored["subjects"], object["subjects"]);

    // `kubectl create clusterrole --aggregation-rule=...` has selectors and no rules.
    let aggregated = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "monitoring"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}}]},
    });
    let created = call(
        &server,
        Method::POST,
        &format!("{GROUP}/clusterroles"),
        &[("content-type", PROTOBUF), ("accept", PROTOBUF)],
        Some(protobuf::encode(&aggregated, &clusterrole::SCHEMA).unwrap()),
    )
    .await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let answer = protobuf::decode(&created.body, &clusterrole::SCHEMA).unwrap();
    assert_eq!(answer["aggregationRule"], aggregated["aggregationRule"]);

    // Lists come back as protobuf lists.
    let list = call(
        &server,
        Method::GET,
        &format!("{GROUP}/clusterroles"),
        &[("accept", PROTOBUF)],
        None,
    )
    .await;
    assert_eq!(list.header("content-type"), PROTOBUF);
    let list = protobuf::decode_list(&list.body, &clusterrole::SCHEMA).unwrap();
    assert_eq!(list["kind"], "ClusterRoleList");
    let monitoring = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|role| role["metadata"]["name"] == "monitoring")
        .expect("the created ClusterRole is listed");
    assert_eq!(monitoring["aggregationRule"], aggregated["aggregationRule"]);
}

#[tokio::test]
async fn lists_replace_whole_in_patches_and_apply() {
    let server = start().await;
    let bindings = format!("{GROUP}/namespaces/default/rolebindings");
    let created = post(
        &server,
        &bindings,
        binding(
            "RoleBinding",
            "b",
            json!({"kind": "ClusterRole", "name": "view"}),
            json!([{"kind": "User", "name": "jane"}, {"kind": "User", "name": "joe"}]),
        ),
    )
    .await;
    assert_eq!(created.status, 201);
    // subjects has no merge key: a strategic merge patch replaces the list.
    let patched = send(
        &server,
        Method::PATCH,
        &format!("{bindings}/b"),
        "application/strategic-merge-patch+json",
        &json!({"subjects": [{"kind": "Group", "name": "devs"}]}),
    )
    .await;
    assert_eq!(
        patched.status,
        200,
        "{}",
        String::from_utf8_lossy(&patched.body)
    );
    assert_eq!(
        patched.json()["subjects"],
        json!([{"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"}])
    );

    // rules is atomic: a second manager applying other rules conflicts on the whole list.
    let apply = "application/apply-patch+yaml";
    let url = |manager: &str| format!("{GROUP}/clusterroles/applied?fieldManager={manager}");
    let first = send(
        &server,
        Method::PATCH,
        &url("a"),
        apply,
        &cluster_role(
            "applied",
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
        ),
    )
    .await;
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let owned = &first.json()["metadata"]["managedFields"][0]["fieldsV1"];
    assert_eq!(owned["f:rules"], json!({}), "{owned}");
    let second = send(
        &server,
        Method::PATCH,
        &url("b"),
        apply,
        &cluster_role(
            "applied",
            json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
        ),
    )
    .await;
    assert_eq!(
        second.status,
        409,
        "{}",
        String::from_utf8_lossy(&second.body)
    );
    assert_eq!(second.json()["reason"], "Conflict");
    assert_eq!(second.json()["details"]["causes"][0]["field"], ".rules");
}
