//! flowcontrol.apiserver.k8s.io/v1 through kube-rs: upstream's conformance tests "Priority and
//! Fairness FlowSchema API" and "Priority and Fairness PriorityLevelConfiguration API"
//! (test/e2e/apimachinery/flowcontrol.go, `should support FlowSchema API operations` and
//! `should support PriorityLevelConfiguration API operations`) ported, step by step as
//! upstream's: discovery, create, get, list and watch by label, patch, update, the status
//! subresource read, patched and updated, delete and delete-collection.

use crate::support;

use futures::StreamExt as _;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use serde_json::{Value, json};

const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// One kind's steps: `plural`, a `template` to create three of, a spec `patch` whose effect
/// `patched` checks, and an `update` of the spec whose effect `updated` checks.
struct Kind {
    plural: &'static str,
    template: Value,
    patch: Value,
    patched: fn(&Value) -> bool,
    update: fn(&mut Value),
    updated: fn(&Value) -> bool,
}

async fn api_operations(kind: Kind) {
    let server = support::start().await;
    let client = server.kube_client().await;

    // Discovery: the group, its version, and the resource with its status.
    let groups = client.list_api_groups().await.unwrap();
    let group = groups
        .groups
        .iter()
        .find(|g| g.name == GROUP)
        .expect("the flowcontrol group in /apis");
    assert!(group.versions.iter().any(|v| v.version == "v1"));
    let resources = client
        .list_api_group_resources(&format!("{GROUP}/v1"))
        .await
        .unwrap();
    let names: Vec<&str> = resources
        .resources
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    for name in [kind.plural.to_owned(), format!("{}/status", kind.plural)] {
        assert!(names.contains(&name.as_str()), "{name} in {names:?}");
    }

    let resource = resources
        .resources
        .iter()
        .find(|r| r.name == kind.plural)
        .unwrap();
    let api_resource = ApiResource {
        group: GROUP.into(),
        version: "v1".into(),
        api_version: format!("{GROUP}/v1"),
        kind: resource.kind.clone(),
        plural: kind.plural.into(),
    };
    let objects: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource);
    let label = "example-e2e-label=e2e-value";
    let by_label = ListParams::default().labels(label);
    let template: DynamicObject = serde_json::from_value(kind.template.clone()).unwrap();

    // Create three, get one, list them by label.
    let post = PostParams::default();
    objects.create(&post, &template).await.unwrap();
    objects.create(&post, &template).await.unwrap();
    let created = objects.create(&post, &template).await.unwrap();
    let name = created.metadata.name.clone().unwrap();
    let read = objects.get(&name).await.unwrap();
    assert_eq!(read.metadata.uid, created.metadata.uid);
    let listed = objects.list(&by_label).await.unwrap();
    assert_eq!(listed.items.len(), 3);

    // Watch from the list's version while the object is patched and updated.
    let mut watch = objects
        .watch(
            &WatchParams::default().labels(label),
            listed.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let mut patch = kind.patch.clone();
    patch["metadata"] = json!({"annotations": {"patched": "true"}});
    let patched = objects
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    let patched_json = serde_json::to_value(&patched).unwrap();
    assert_eq!(patched_json["metadata"]["annotations"]["patched"], "true");
    assert!((kind.patched)(&patched_json), "{patched_json}");
    let created_version: u64 = created.metadata.resource_version.unwrap().parse().unwrap();
    let patched_version: u64 = patched
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    assert!(patched_version > created_version);
    // Updated on a fresh read, retried on conflict (the server writes statuses too).
    let updated = loop {
        let mut object = serde_json::to_value(objects.get(&name).await.unwrap()).unwrap();
        object["metadata"]["annotations"]["updated"] = json!("true");
        (kind.update)(&mut object);
        match objects
            .replace(&name, &post, &serde_json::from_value(object).unwrap())
            .await
        {
            Ok(updated) => break serde_json::to_value(updated).unwrap(),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(error) => panic!("update: {error}"),
        }
    };
    assert_eq!(updated["metadata"]["annotations"]["updated"], "true");
    assert!((kind.updated)(&updated), "{updated}");
    loop {
        let event = tokio::time::timeout(std::time::Duration::from_secs(30), watch.next())
            .await
            .expect("a watch event within 30 s")
            .expect("the watch goes on")
            .unwrap();
        let WatchEvent::Modified(watched) = event else {
            panic!("expected MODIFIED, got {event:?}");
        };
        if watched
            .metadata
            .annotations
            .is_some_and(|a| a.get("patched").is_some_and(|v| v == "true"))
        {
            break;
        }
    }

    // status: read it, patch a condition in, add another by an update.
    let status = objects.get_status(&name).await.unwrap();
    assert_eq!(
        status.types.as_ref().map(|t| t.kind.as_str()),
        Some(resource.kind.as_str())
    );
    assert_eq!(status.metadata.uid, created.metadata.uid);
    let patched_status = serde_json::to_value(
        objects
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": [
                    {"type": "PatchStatusFailed", "status": "False", "reason": "e2e"}]}})),
            )
            .await
            .unwrap(),
    )
    .unwrap();
    let has = |object: &Value, condition: &str| {
        object["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == condition))
    };
    assert!(
        has(&patched_status, "PatchStatusFailed"),
        "{patched_status}"
    );
    let updated_status = loop {
        let mut object = serde_json::to_value(objects.get(&name).await.unwrap()).unwrap();
        let conditions = object["status"]["conditions"].take();
        let mut conditions = conditions.as_array().cloned().unwrap_or_default();
        conditions.push(
            json!({"type": "StatusUpdateFailed", "status": "False", "reason": "E2E",
            "message": "Set from an e2e test"}),
        );
        object["status"]["conditions"] = Value::Array(conditions);
        match objects
            .replace_status(
                &name,
                &post,
                &serde_json::from_value::<DynamicObject>(object).unwrap(),
            )
            .await
        {
            Ok(updated) => break serde_json::to_value(updated).unwrap(),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(error) => panic!("status update: {error}"),
        }
    };
    assert!(
        has(&updated_status, "StatusUpdateFailed"),
        "{updated_status}"
    );

    // Delete one, then the rest as a collection.
    objects
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    assert!(objects.get_opt(&name).await.unwrap().is_none());
    assert_eq!(objects.list(&by_label).await.unwrap().items.len(), 2);
    objects
        .delete_collection(&DeleteParams::default(), &by_label)
        .await
        .unwrap();
    assert!(objects.list(&by_label).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn should_support_flow_schema_api_operations() {
    api_operations(Kind {
        plural: "flowschemas",
        template: json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"generateName": "e2e-example-fs-",
                "labels": {"example-e2e-label": "e2e-value"}},
            "spec": {"matchingPrecedence": 10000,
                "priorityLevelConfiguration": {"name": "global-default"},
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{"subjects": [{"kind": "User",
                        "user": {"name": "example-e2e-non-existent-user"}}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]},
        }),
        patch: json!({"spec": {"matchingPrecedence": 9999}}),
        patched: |o| o["spec"]["matchingPrecedence"] == 9999,
        update: |o| o["spec"]["matchingPrecedence"] = json!(9000),
        updated: |o| o["spec"]["matchingPrecedence"] == 9000,
    })
    .await;
}

#[tokio::test]
async fn should_support_priority_level_configuration_api_operations() {
    api_operations(Kind {
        plural: "prioritylevelconfigurations",
        template: json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"generateName": "e2e-example-plc-",
                "labels": {"example-e2e-label": "e2e-value"}},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 2,
                "limitResponse": {"type": "Reject"}}},
        }),
        patch: json!({"spec": {"limited": {"nominalConcurrencyShares": 4}}}),
        patched: |o| o["spec"]["limited"]["nominalConcurrencyShares"] == 4,
        update: |o| o["spec"]["limited"]["nominalConcurrencyShares"] = json!(6),
        updated: |o| o["spec"]["limited"]["nominalConcurrencyShares"] == 6,
    })
    .await;
}
