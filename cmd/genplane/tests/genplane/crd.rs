//! CustomResourceDefinitions against the real binary: kubectl's everyday flows on a custom
//! resource (apply, get with printer columns, explain, server-side apply, edit, delete), a CRD
//! made by kube-rs `#[derive(CustomResource)]` used through a typed `Api<T>`, clear errors for
//! bad CRDs and bad objects, and the deletion of a CRD taking its objects with it.

#![allow(clippy::unwrap_used)]

use crate::support::{self, Apiserver, eventually_holds, ok, start, text};
use serde_json::{Value, json};

fn write(server: &Apiserver, name: &str, content: &str) -> String {
    let path = server.dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    path.display().to_string()
}

fn kubectl(server: &Apiserver, args: &[&str]) -> String {
    ok(server.kubectl("kubectl", args))
}

fn refused(server: &Apiserver, args: &[&str]) -> String {
    let out = server.kubectl("kubectl", args);
    assert!(!out.status.success(), "expected a failure: {}", text(&out));
    text(&out)
}

fn install_crontabs(server: &Apiserver) {
    let crd = write(server, "crd.yaml", &support::fixture("crds/crontabs.yaml"));
    let out = kubectl(server, &["apply", "-f", &crd]);
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com created"
        ),
        "{out}"
    );
    server.wait_established("crontabs.stable.example.com");
}

#[test]
fn kubectl_works_on_custom_resources() {
    let server = start();
    install_crontabs(&server);

    // Discovery knows the new resource at once, short name and category included.
    let resources = kubectl(
        &server,
        &["api-resources", "--api-group=stable.example.com"],
    );
    let line = resources
        .lines()
        .find(|l| l.starts_with("crontabs"))
        .unwrap_or_else(|| panic!("{resources}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        fields,
        ["crontabs", "ct", "stable.example.com/v1", "true", "CronTab"],
        "{resources}"
    );

    // The legacy discovery documents too (the Python dynamic client and kube-rs read them).
    let group: Value = serde_json::from_str(&kubectl(
        &server,
        &["get", "--raw", "/apis/stable.example.com"],
    ))
    .unwrap();
    assert_eq!(
        group["preferredVersion"]["groupVersion"], "stable.example.com/v1",
        "{group}"
    );
    let list: Value = serde_json::from_str(&kubectl(
        &server,
        &["get", "--raw", "/apis/stable.example.com/v1"],
    ))
    .unwrap();
    let crontabs = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "crontabs")
        .unwrap();
    assert_eq!(crontabs["shortNames"], serde_json::json!(["ct"]), "{list}");
    assert_eq!(crontabs["categories"], serde_json::json!(["all"]), "{list}");
    assert!(
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "crontabs/status"),
        "{list}"
    );

    let object = write(
        &server,
        "ct.yaml",
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: my-cron\n  namespace: default\nspec:\n  cronSpec: '* * * * */5'\n  image: my-awesome-cron-image\n",
    );
    let out = kubectl(&server, &["apply", "-f", &object]);
    assert!(
        out.contains("crontab.stable.example.com/my-cron created"),
        "{out}"
    );

    // Printer columns; the default replicas was filled in.
    let table = kubectl(&server, &["get", "ct", "-n", "default"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SPEC", "REPLICAS", "AGE"], "{table}");
    let row = lines.next().unwrap();
    assert!(row.starts_with("my-cron"), "{table}");
    assert!(row.contains("* * * * */5"), "{table}");
    assert_eq!(row.split_whitespace().nth(6), Some("1"), "{table}");
    let wide = kubectl(&server, &["get", "crontabs", "-n", "default", "-o", "wide"]);
    assert!(wide.lines().next().unwrap().contains("IMAGE"), "{wide}");
    assert!(wide.contains("my-awesome-cron-image"), "{wide}");
    // selectableFields are field selectors.
    let selected = kubectl(
        &server,
        &[
            "get",
            "ct",
            "-n",
            "default",
            "-o",
            "name",
            "--field-selector",
            "spec.image=my-awesome-cron-image",
        ],
    );
    assert_eq!(
        selected.trim(),
        "crontab.stable.example.com/my-cron",
        "{selected}"
    );
    let none = kubectl(
        &server,
        &[
            "get",
            "ct",
            "-n",
            "default",
            "-o",
            "name",
            "--field-selector",
            "spec.image=other",
        ],
    );
    assert_eq!(none.trim(), "", "{none}");
    let unsupported = refused(
        &server,
        &[
            "get",
            "ct",
            "-n",
            "default",
            "--field-selector",
            "spec.cronSpec=x",
        ],
    );
    assert!(
        unsupported.contains("field label not supported: spec.cronSpec"),
        "{unsupported}"
    );
    let all = kubectl(&server, &["get", "all", "-n", "default", "-o", "name"]);
    assert!(all.contains("crontab.stable.example.com/my-cron"), "{all}");

    // explain reads the published schema.
    let explained = kubectl(&server, &["explain", "crontab.spec"]);
    assert!(explained.contains("What to run and when."), "{explained}");
    assert!(explained.contains("cronSpec"), "{explained}");

    // Server-side apply takes over a field; client-side apply and edit change it again.
    let applied = write(
        &server,
        "ssa.yaml",
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: my-cron\n  namespace: default\nspec:\n  cronSpec: '* * * * */5'\n  replicas: 2\n",
    );
    let out = kubectl(
        &server,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &applied,
        ],
    );
    assert!(
        out.contains("crontab.stable.example.com/my-cron serverside-applied"),
        "{out}"
    );
    let replicas = || -> Value {
        let out = kubectl(
            &server,
            &["get", "ct", "my-cron", "-n", "default", "-o", "json"],
        );
        serde_json::from_str::<Value>(&out).unwrap()["spec"]["replicas"].clone()
    };
    assert_eq!(replicas(), 2);
    let edit = crate::support::kubectl_command("kubectl", server.kubeconfig())
        .args(["edit", "ct/my-cron", "-n", "default"])
        .env("KUBE_EDITOR", "sed -i s/replicas:\\ 2/replicas:\\ 3/")
        .output()
        .unwrap();
    assert!(
        text(&edit).contains("crontab.stable.example.com/my-cron edited"),
        "{}",
        text(&edit)
    );
    assert_eq!(replicas(), 3);

    // Strategic merge patch is not for custom resources.
    let smp = refused(
        &server,
        &[
            "patch",
            "ct",
            "my-cron",
            "-n",
            "default",
            "-p",
            r#"{"spec":{"replicas":4}}"#,
        ],
    );
    assert!(
        smp.contains("UnsupportedMediaType") || smp.contains("unknown format"),
        "{smp}"
    );

    // Bad objects: the schema's bounds and pattern, and the CEL rule, with their fields.
    let bad = write(
        &server,
        "bad.yaml",
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: bad\n  namespace: default\nspec:\n  cronSpec: 'every minute'\n  replicas: 20\n",
    );
    let out = refused(&server, &["apply", "-f", &bad]);
    assert!(out.contains("spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10"), "{out}");
    assert!(
        out.contains("spec.cronSpec: Invalid value: \"every minute\""),
        "{out}"
    );
    let cel = write(
        &server,
        "cel.yaml",
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: cel\n  namespace: default\nspec:\n  cronSpec: '* * * * *'\n  image: small\n  replicas: 7\n",
    );
    let out = refused(&server, &["apply", "-f", &cel]);
    assert!(
        out.contains(
            "spec.replicas: Invalid value: \"object\": more than 5 replicas need a big image"
        ),
        "{out}"
    );

    // Unknown fields: kubectl's strict validation names them.
    let unknown = write(
        &server,
        "unknown.yaml",
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: unknown\n  namespace: default\nspec:\n  cronSpec: '* * * * *'\n  colour: blue\n",
    );
    let out = refused(&server, &["apply", "-f", &unknown]);
    assert!(out.contains(r#"unknown field "spec.colour""#), "{out}");

    let out = kubectl(&server, &["delete", "ct", "my-cron", "-n", "default"]);
    assert!(
        out.contains("crontab.stable.example.com \"my-cron\" deleted"),
        "{out}"
    );
}

#[test]
fn deleting_a_crd_deletes_its_objects() {
    let server = start();
    install_crontabs(&server);
    for (ns, name) in [("default", "a"), ("default", "b"), ("kube-system", "c")] {
        let file = write(
            &server,
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  cronSpec: '* * * * *'\n"
            ),
        );
        kubectl(&server, &["create", "-f", &file]);
    }
    let listed = kubectl(&server, &["get", "ct", "-A", "-o", "name"]);
    assert_eq!(listed.lines().count(), 3, "{listed}");

    // kubectl waits until the CRD is gone: its objects went first.
    let out = kubectl(
        &server,
        &[
            "delete",
            "crd",
            "crontabs.stable.example.com",
            "--timeout=30s",
        ],
    );
    assert!(out.contains("deleted"), "{out}");
    eventually_holds("the resource to leave discovery", || {
        !text(&server.kubectl(
            "kubectl",
            &["api-resources", "--api-group=stable.example.com"],
        ))
        .contains("crontabs")
    });

    // The same CRD again starts empty.
    install_crontabs(&server);
    let listed = kubectl(&server, &["get", "ct", "-A", "-o", "name"]);
    assert_eq!(listed.trim(), "", "{listed}");
}

#[test]
fn bad_crds_are_refused_with_their_fields() {
    let server = start();
    let crd = |name: &str, schema: &str| {
        write(
            &server,
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  scope: Cluster\n  names:\n    plural: widgets\n    kind: Widget\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n{schema}"
            ),
        )
    };
    // Not structural: a property without a type.
    let file = crd(
        "untyped",
        "        type: object\n        properties:\n          spec:\n            properties:\n              size:\n                type: integer\n",
    );
    let out = refused(&server, &["apply", "-f", &file]);
    assert!(
        out.contains("spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"),
        "{out}"
    );
    // A CEL rule that does not compile.
    let file = crd(
        "cel",
        "        type: object\n        x-kubernetes-validations:\n        - rule: \"self.size >\"\n        properties:\n          size:\n            type: integer\n",
    );
    let out = refused(&server, &["apply", "-f", &file]);
    assert!(
        out.contains(
            "spec.validation.openAPIV3Schema.x-kubernetes-validations[0].rule: Invalid value"
        ),
        "{out}"
    );
    assert!(out.contains("compilation failed"), "{out}");
    // A name that is not <plural>.<group>.
    let file = write(
        &server,
        "name.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.example.com\nspec:\n  group: example.com\n  scope: Cluster\n  names:\n    plural: widgets\n    kind: Widget\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n",
    );
    let out = refused(&server, &["apply", "-f", &file]);
    assert!(
        out.contains("metadata.name: Invalid value: \"gadgets.example.com\": must be spec.names.plural+\".\"+spec.group"),
        "{out}"
    );
    // Nothing was stored.
    let listed = kubectl(&server, &["get", "crd", "-o", "name"]);
    assert_eq!(listed.trim(), "", "{listed}");
}

mod typed {
    //! A CRD made by kube-rs's derive, used through a typed `Api<T>`.

    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
    use kube::runtime::wait::{await_condition, conditions};
    use kube::{CustomResource, CustomResourceExt, ResourceExt};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// A document with pages.
    #[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "kube.rs.example",
        version = "v1",
        kind = "Document",
        namespaced,
        status = "DocumentStatus",
        shortname = "doc",
        printcolumn = r#"{"name":"Title","type":"string","jsonPath":".spec.title"}"#
    )]
    pub(crate) struct DocumentSpec {
        /// The title.
        pub(crate) title: String,
        /// How many pages.
        pub(crate) pages: u32,
        /// Free-form tags.
        #[serde(default)]
        pub(crate) tags: Vec<String>,
    }

    /// What a reader saw.
    #[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    pub(crate) struct DocumentStatus {
        /// Pages read.
        pub(crate) read: u32,
    }

    async fn client(server: &Apiserver) -> kube::Client {
        server.client().await
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_derived_crd_is_served_to_its_typed_api() {
        let server = start();
        let client = client(&server).await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        crds.patch(
            "documents.kube.rs.example",
            &PatchParams::apply("crd-test").force(),
            &Patch::Apply(Document::crd()),
        )
        .await
        .unwrap();
        tokio::time::timeout(
            crate::support::DEADLINE,
            await_condition(
                crds.clone(),
                "documents.kube.rs.example",
                conditions::is_crd_established(),
            ),
        )
        .await
        .unwrap()
        .unwrap();

        let docs: Api<Document> = Api::namespaced(client.clone(), "default");
        let created = docs
            .create(
                &PostParams::default(),
                &Document::new(
                    "guide",
                    DocumentSpec {
                        title: "A guide".into(),
                        pages: 12,
                        tags: vec!["howto".into()],
                    },
                ),
            )
            .await
            .unwrap();
        assert_eq!(created.spec.pages, 12);
        assert_eq!(created.metadata.generation, Some(1));

        // The status subresource: status changes, the generation does not.
        let status = serde_json::json!({"status": {"read": 3}});
        let patched = docs
            .patch_status("guide", &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
        assert_eq!(patched.status, Some(DocumentStatus { read: 3 }));
        assert_eq!(patched.metadata.generation, Some(1));

        // A spec change through server-side apply bumps the generation and keeps the status.
        let apply = serde_json::json!({
            "apiVersion": "kube.rs.example/v1", "kind": "Document",
            "metadata": {"name": "guide"},
            "spec": {"title": "A longer guide", "pages": 20},
        });
        let applied = docs
            .patch(
                "guide",
                &PatchParams::apply("writer").force(),
                &Patch::Apply(&apply),
            )
            .await
            .unwrap();
        assert_eq!(applied.spec.pages, 20);
        assert_eq!(applied.metadata.generation, Some(2));
        assert_eq!(applied.status, Some(DocumentStatus { read: 3 }));

        let listed = docs.list(&ListParams::default()).await.unwrap();
        assert_eq!(
            listed
                .items
                .iter()
                .map(ResourceExt::name_any)
                .collect::<Vec<_>>(),
            ["guide"]
        );
        // A wrong type is refused with the field's path.
        let bad = serde_json::json!({
            "apiVersion": "kube.rs.example/v1", "kind": "Document",
            "metadata": {"name": "bad"}, "spec": {"title": "x", "pages": "many"},
        });
        let raw: Api<kube::api::DynamicObject> = Api::namespaced_with(
            client.clone(),
            "default",
            &kube::api::ApiResource::erase::<Document>(&()),
        );
        let error = raw
            .create(
                &PostParams::default(),
                &serde_json::from_value(bad).unwrap(),
            )
            .await
            .unwrap_err();
        let kube::Error::Api(status) = error else {
            panic!("{error:?}")
        };
        assert_eq!(status.code, 422, "{status:?}");
        assert!(
            status.message.contains(
                "spec.pages: Invalid value: \"string\": spec.pages in body must be of type integer"
            ),
            "{status:?}"
        );

        docs.delete("guide", &DeleteParams::default())
            .await
            .unwrap();
        assert!(
            docs.list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty()
        );
    }
}

const WIDGET_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  conversion: {strategy: None}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              oldprop: {type: string}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              oldprop: {type: string}
              extra: {type: string}
"#;

/// Objects are stored in the storage version and pruned to its schema, whichever version
/// wrote them: a field only v2 knows, written through v2, is not kept (so v2 does not read it
/// back); and no write changes a custom resource's kind or apiVersion.
#[test]
fn custom_resources_are_stored_as_the_storage_version_allows() {
    let server = start();
    let crd = write(&server, "widgets.yaml", WIDGET_CRD);
    kubectl(&server, &["apply", "-f", &crd]);
    eventually_holds("the widget versions to be served", || {
        ["v1", "v2"].iter().all(|v| {
            server
                .kubectl(
                    "kubectl",
                    &["get", "--raw", &format!("/apis/example.com/{v}")],
                )
                .status
                .success()
        })
    });
    let widget = write(
        &server,
        "w.yaml",
        "apiVersion: example.com/v2\nkind: Widget\nmetadata: {name: w}\nspec: {oldprop: kept, extra: dropped}\n",
    );
    eventually_holds("a widget to be created through v2", || {
        server
            .kubectl("kubectl", &["create", "-f", &widget])
            .status
            .success()
    });
    for version in ["v1", "v2"] {
        let read: Value = serde_json::from_str(&kubectl(
            &server,
            &[
                "get",
                "--raw",
                &format!("/apis/example.com/{version}/namespaces/default/widgets/w"),
            ],
        ))
        .unwrap();
        assert_eq!(read["apiVersion"], format!("example.com/{version}"));
        assert_eq!(
            read["spec"],
            json!({"oldprop": "kept"}),
            "{version}: {read}"
        );
    }
    // Patches and updates in v2 are pruned the same way.
    kubectl(
        &server,
        &[
            "patch",
            "widgets.v2.example.com",
            "w",
            "--type=merge",
            "-p",
            r#"{"spec":{"extra":"again"}}"#,
        ],
    );
    let read: Value = serde_json::from_str(&kubectl(
        &server,
        &[
            "get",
            "--raw",
            "/apis/example.com/v2/namespaces/default/widgets/w",
        ],
    ))
    .unwrap();
    assert_eq!(read["spec"], json!({"oldprop": "kept"}), "{read}");

    // The kind and apiVersion are the resource's, whatever a patch says.
    for (kind, patch) in [
        ("merge", r#"{"kind":"Gadget"}"#),
        (
            "json",
            r#"[{"op":"replace","path":"/apiVersion","value":"example.com/v2"}]"#,
        ),
        (
            "json",
            r#"[{"op":"replace","path":"/apiVersion","value":"other.io/v1"}]"#,
        ),
    ] {
        let out = refused(
            &server,
            &[
                "patch",
                "widgets.v1.example.com",
                "w",
                &format!("--type={kind}"),
                "-p",
                patch,
            ],
        );
        assert!(out.contains("is invalid"), "{patch}: {out}");
    }
    let read: Value = serde_json::from_str(&kubectl(
        &server,
        &[
            "get",
            "--raw",
            "/apis/example.com/v1/namespaces/default/widgets/w",
        ],
    ))
    .unwrap();
    assert_eq!(
        (read["kind"].as_str(), read["apiVersion"].as_str()),
        (Some("Widget"), Some("example.com/v1"))
    );
}

/// Two versions that share only `spec.name` (kube-rs's `crd_derive_multi` example's shape).
fn many_derive_crd(storage: &str) -> Value {
    let version = |name: &str, field: &str, ty: &str| {
        json!({"name": name, "served": true, "storage": name == storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                "type": "object",
                "properties": {"name": {"type": "string"}, field: {"type": ty}}}}}}})
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "manyderives.kube.rs"},
        "spec": {"group": "kube.rs", "scope": "Namespaced",
            "names": {"plural": "manyderives", "singular": "manyderive", "kind": "ManyDerive"},
            "versions": [version("v1", "oldprop", "integer"), version("v2", "extra", "string")]}})
}

/// A server-side apply of `spec` as `name` through `version`: the answer.
fn apply_many_derive(server: &Apiserver, version: &str, name: &str, spec: Value) -> Value {
    let body = json!({"apiVersion": format!("kube.rs/{version}"), "kind": "ManyDerive",
        "metadata": {"name": name}, "spec": spec});
    let answer = server.raw().request(
        "PATCH",
        &format!(
            "/apis/kube.rs/{version}/namespaces/default/manyderives/{name}?fieldManager=multi&force=true"
        ),
        &[("Content-Type", "application/apply-patch+yaml")],
        Some(body.to_string().as_bytes()),
    );
    assert!(answer.status < 300, "{}", answer.text());
    answer.json()
}

/// A write through a version that is not the storage version answers what was stored, read
/// in that version (as upstream): a field the storage version does not keep is not in the
/// answer, on every write path and in watch events, before and after the storage version
/// moves (kube-rs's `crd_derive_multi` sequence).
#[test]
fn writes_through_another_version_answer_what_was_stored() {
    let server = start();
    let apply_crd = |storage: &str| {
        let file = write(&server, "many.json", &many_derive_crd(storage).to_string());
        kubectl(&server, &["apply", "--server-side", "-f", &file]);
    };
    apply_crd("v1");
    server.wait_established("manyderives.kube.rs");
    eventually_holds("both versions to be served", || {
        ["v1", "v2"].iter().all(|v| {
            server
                .raw()
                .get(&format!("/apis/kube.rs/{v}/namespaces/default/manyderives"))
                .status
                == 200
        })
    });

    // Both versions publish the hash of the storage version (upstream's value for
    // kube.rs/v1, ManyDerive).
    let hash = |version: &str| {
        let list = server.raw().get(&format!("/apis/kube.rs/{version}")).json();
        list["resources"][0]["storageVersionHash"].clone()
    };
    assert_eq!(
        (hash("v1"), hash("v2")),
        (json!("OjAiV2mMBG8="), json!("OjAiV2mMBG8="))
    );
    let old = apply_many_derive(&server, "v1", "old", json!({"name": "old", "oldprop": 5}));
    assert_eq!(old["spec"], json!({"name": "old", "oldprop": 5}), "{old}");
    // Through v2: `extra` is not stored in v1, so not answered.
    let new = apply_many_derive(&server, "v2", "new", json!({"name": "new", "extra": "hi"}));
    assert_eq!(new["apiVersion"], "kube.rs/v2", "{new}");
    assert_eq!(new["spec"], json!({"name": "new"}), "{new}");
    // The same for a create, an update and a merge patch through v2.
    let raw = server.raw();
    let created = raw.request(
        "POST",
        "/apis/kube.rs/v2/namespaces/default/manyderives",
        &[],
        Some(
            json!({"apiVersion": "kube.rs/v2", "kind": "ManyDerive", "metadata": {"name": "posted"},
                "spec": {"name": "posted", "extra": "hi"}})
            .to_string()
            .as_bytes(),
        ),
    );
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(created.json()["spec"], json!({"name": "posted"}));
    let mut replaced = created.json();
    replaced["spec"]["extra"] = json!("again");
    let updated = raw.request(
        "PUT",
        "/apis/kube.rs/v2/namespaces/default/manyderives/posted",
        &[],
        Some(replaced.to_string().as_bytes()),
    );
    assert_eq!(updated.status, 200, "{}", updated.text());
    assert_eq!(updated.json()["spec"], json!({"name": "posted"}));
    let patched = raw.request(
        "PATCH",
        "/apis/kube.rs/v2/namespaces/default/manyderives/posted?dryRun=All",
        &[("Content-Type", "application/merge-patch+json")],
        Some(br#"{"spec":{"extra":"patched"}}"#),
    );
    assert_eq!(patched.status, 200, "{}", patched.text());
    assert_eq!(patched.json()["spec"], json!({"name": "posted"}));

    // The storage version moves to v2: an apply through v1 stores no `oldprop`.
    apply_crd("v2");
    eventually_holds("v2 to be the storage version", || {
        let crd: Value = serde_json::from_str(&kubectl(
            &server,
            &["get", "crd", "manyderives.kube.rs", "-o", "json"],
        ))
        .unwrap();
        crd["status"]["storedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("v2")))
    });
    eventually_holds("the hash of v2 to be published", || {
        hash("v1") == json!("pvdIysmEK00=")
    });
    eventually_holds("an apply through v1 to lose oldprop", || {
        let answer = apply_many_derive(
            &server,
            "v1",
            "moved",
            json!({"name": "moved", "oldprop": 7}),
        );
        answer["spec"] == json!({"name": "moved"})
    });

    // A watch through v1 sees the deletion of an object stored in v1 in v1's form.
    let watcher = std::thread::spawn({
        let raw = server.raw();
        move || {
            raw.get("/apis/kube.rs/v1/namespaces/default/manyderives?watch=true&timeoutSeconds=3&resourceVersion=0")
                .text()
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    kubectl(&server, &["delete", "manyderives.v2.kube.rs", "new"]);
    let events = watcher.join().unwrap();
    let deleted: Value = events
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["type"] == "DELETED")
        .unwrap_or_else(|| panic!("no DELETED event: {events}"));
    assert_eq!(deleted["object"]["apiVersion"], "kube.rs/v1", "{deleted}");
    assert_eq!(
        deleted["object"]["spec"],
        json!({"name": "new"}),
        "{deleted}"
    );
}

/// What a mutating webhook adds is decoded as a body is: a custom resource is pruned to its
/// schema afterwards and a built-in kind keeps only its fields (upstream's webhook e2e case
/// "should mutate custom resource with pruning").
#[test]
fn fields_a_mutating_webhook_adds_outside_the_schema_are_pruned() {
    use base64::Engine as _;
    let hook = crate::support::webhook::Webhook::start(|call| {
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        let request = &review["request"];
        let patch = if request["kind"]["kind"] == "ConfigMap" {
            json!([{"op": "add", "path": "/bogus", "value": "top"},
                   {"op": "add", "path": "/data/mutated", "value": "yes"}])
        } else {
            json!([{"op": "add", "path": "/spec/mutated", "value": "yes"},
                   {"op": "add", "path": "/spec/unknown", "value": "dropped"},
                   {"op": "add", "path": "/extra", "value": "dropped"}])
        };
        let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": request["uid"], "allowed": true, "patchType": "JSONPatch", "patch": patch}})
    });
    let server = start();
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object", "properties": {"size": {"type": "integer"}, "mutated": {"type": "string"}}}}}}}]}});
    let file = write(&server, "gizmos.json", &crd.to_string());
    kubectl(&server, &["create", "-f", &file]);
    server.wait_established("gizmos.example.com");
    let ca = base64::engine::general_purpose::STANDARD.encode(&hook.ca_pem);
    let config = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "adds-fields"},
        "webhooks": [{"name": "adds.genplane.test", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": format!("{}/mutate", hook.base), "caBundle": ca},
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["", "example.com"], "apiVersions": ["v1"],
                "resources": ["gizmos", "configmaps"]}]}]});
    let file = write(&server, "hook.json", &config.to_string());
    kubectl(&server, &["create", "-f", &file]);

    let raw = server.raw();
    let mut n = 0;
    let created = support::eventually("the webhook to mutate gizmos", || {
        n += 1;
        let answer = raw.request(
            "POST",
            "/apis/example.com/v1/namespaces/default/gizmos",
            &[],
            Some(
                json!({"apiVersion": "example.com/v1", "kind": "Gizmo",
                    "metadata": {"name": format!("g{n}")}, "spec": {"size": 1}})
                .to_string()
                .as_bytes(),
            ),
        );
        assert_eq!(answer.status, 201, "{}", answer.text());
        let created = answer.json();
        (created["spec"]["mutated"] == "yes").then_some(created)
    });
    assert_eq!(
        created["spec"],
        json!({"size": 1, "mutated": "yes"}),
        "{created}"
    );
    assert!(created.get("extra").is_none(), "{created}");
    let name = created["metadata"]["name"].as_str().unwrap();
    let stored = raw
        .get(&format!(
            "/apis/example.com/v1/namespaces/default/gizmos/{name}"
        ))
        .json();
    assert_eq!(
        stored["spec"],
        json!({"size": 1, "mutated": "yes"}),
        "{stored}"
    );
    assert!(stored.get("extra").is_none(), "{stored}");
    // An update is pruned the same way.
    let mut changed = stored.clone();
    changed["spec"]["size"] = json!(2);
    let updated = raw.request(
        "PUT",
        &format!("/apis/example.com/v1/namespaces/default/gizmos/{name}"),
        &[],
        Some(changed.to_string().as_bytes()),
    );
    assert_eq!(updated.status, 200, "{}", updated.text());
    assert_eq!(updated.json()["spec"], json!({"size": 2, "mutated": "yes"}));

    // A built-in kind keeps only its own fields.
    let cm = raw.request(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[],
        Some(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}"#),
    );
    assert_eq!(cm.status, 201, "{}", cm.text());
    let stored = raw.get("/api/v1/namespaces/default/configmaps/c").json();
    assert_eq!(
        stored["data"],
        json!({"k": "v", "mutated": "yes"}),
        "{stored}"
    );
    assert!(stored.get("bogus").is_none(), "{stored}");
}

/// A server-side apply must fit the kind's type whatever `fieldValidation` says: fields the
/// schema does not declare are refused in structured-merge-diff's words, for a custom
/// resource (root and nested metadata included) and a built-in kind alike, and nothing of
/// them is stored or owned.
#[test]
fn an_apply_with_undeclared_fields_is_refused_whatever_field_validation_says() {
    let server = start();
    install_crontabs(&server);
    let raw = server.raw();
    let apply = |path: &str, body: &str, validation: &str| {
        raw.request(
            "PATCH",
            &format!("{path}?fieldManager=tester&fieldValidation={validation}"),
            &[("Content-Type", "application/apply-patch+yaml")],
            Some(body.as_bytes()),
        )
    };
    let cron = "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: a\n  unknownMeta: x\nspec:\n  cronSpec: '* * * * *'\n  unknownField: u\n";
    for validation in ["Strict", "Warn", "Ignore"] {
        let answer = apply(
            "/apis/stable.example.com/v1/namespaces/default/crontabs/a",
            cron,
            validation,
        );
        assert_eq!(answer.status, 400, "{validation}: {}", answer.text());
        let message = answer.json()["message"].as_str().unwrap().to_owned();
        assert!(
            message.starts_with(
                "failed to create typed patch object (default/a; stable.example.com/v1, Kind=CronTab): errors:"
            ),
            "{validation}: {message}"
        );
        for field in [".metadata.unknownMeta", ".spec.unknownField"] {
            assert!(
                message.contains(&format!("{field}: field not declared in schema")),
                "{validation}: {message}"
            );
        }
    }
    let missing = raw.get("/apis/stable.example.com/v1/namespaces/default/crontabs/a");
    assert_eq!(missing.status, 404, "{}", missing.text());
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\nbogus: 1\n";
    let answer = apply("/api/v1/namespaces/default/configmaps/c", cm, "Ignore");
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert_eq!(
        answer.json()["message"],
        "failed to create typed patch object (default/c; v1, Kind=ConfigMap): .bogus: field not declared in schema"
    );
}
