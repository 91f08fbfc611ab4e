use super::*;

fn messages(errors: &ErrorList) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn feature(name: &str, spec: Value) -> Value {
    json!({"apiVersion": API_VERSION, "kind": KIND,
           "metadata": {"name": name, "namespace": "kube-system"}, "spec": spec})
}

#[test]
fn the_spec_is_checked_with_field_paths() {
    let good = feature(
        "coordinated-leader-election",
        json!({"featureName": "CoordinatedLeaderElection"}),
    );
    assert!(validate(&good).unwrap().is_empty());
    assert_eq!(
        messages(&validate(&feature("x", json!({}))).unwrap()),
        ["spec.featureName: Required value"]
    );
    assert_eq!(
        messages(&validate(&feature("x", json!({"featureName": "Not A Name"}))).unwrap()),
        [
            "spec.featureName: Invalid value: \"Not A Name\": a feature name consists of letters, digits, '-', '_' and '.'"
        ]
    );
    assert_eq!(
        messages(&validate(&feature("wrong", json!({"featureName": "WatchList"}))).unwrap()),
        [
            "metadata.name: Invalid value: \"wrong\": must be \"watch-list\", the object name of feature WatchList"
        ]
    );
    let errors = validate(&feature(
        "watch-list",
        json!({"featureName": "WatchList", "desired": "Maybe"}),
    ))
    .unwrap();
    let errors = messages(&errors);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(
        errors[0],
        "spec.desired: Unsupported value: \"Maybe\": supported values: \"On\", \"Off\""
    );
    assert!(
        errors[1].starts_with("spec.desired: Forbidden: feature WatchList is not dynamic"),
        "{errors:?}"
    );
    let wrong_type = decode(&feature("x", json!({"featureName": 3}))).unwrap_err();
    assert_eq!(wrong_type.code, 400, "{wrong_type}");
}

#[test]
fn desired_is_settable_only_on_dynamic_features_and_the_name_is_immutable() {
    let mut stored = feature("watch-list", json!({"featureName": "WatchList"}));
    stored["status"] = json!({"state": "On", "dynamic": false});
    let mut asked = stored.clone();
    asked["spec"]["desired"] = json!("Off");
    let errors = messages(&validate_update(&asked, &stored).unwrap());
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("spec.desired: Forbidden"),
        "{errors:?}"
    );

    stored["status"]["dynamic"] = json!(true);
    assert!(validate_update(&asked, &stored).unwrap().is_empty());

    // Once set, clearing it is allowed even when the feature is no longer dynamic.
    let mut was_set = asked.clone();
    was_set["status"]["dynamic"] = json!(false);
    let mut cleared = was_set.clone();
    cleared["spec"].as_object_mut().unwrap().remove("desired");
    assert!(validate_update(&cleared, &was_set).unwrap().is_empty());

    let mut renamed = stored.clone();
    renamed["spec"]["featureName"] = json!("watch_list");
    assert_eq!(
        messages(&validate_update(&renamed, &stored).unwrap()),
        ["spec.featureName: Invalid value: \"watch_list\": field is immutable"]
    );
}

#[test]
fn status_is_the_servers_and_generation_follows_the_spec() {
    let mut created = feature("watch-list", json!({"featureName": "WatchList"}));
    created["status"] = json!({"state": "On"});
    util::prepare_spec_create(&mut created, &resource::Context::gates_off());
    assert_eq!(created.get("status"), None);
    assert_eq!(created["metadata"]["generation"], 1);

    let mut stored = created.clone();
    stored["status"] = json!({"state": "Off"});
    let mut update = stored.clone();
    update["status"] = json!({"state": "On"});
    update["spec"]["desired"] = json!("On");
    util::prepare_spec_update(&mut update, &stored, &resource::Context::gates_off());
    assert_eq!(update["status"]["state"], "Off");
    assert_eq!(update["metadata"]["generation"], 2);

    let mut status_write = stored.clone();
    status_write["spec"]["featureName"] = json!("Other");
    status_write["status"] = json!({"state": "TurningOn"});
    util::prepare_status_update(&mut status_write, &stored, &resource::Context::gates_off());
    assert_eq!(status_write["spec"]["featureName"], "WatchList");
    assert_eq!(status_write["status"]["state"], "TurningOn");
}

#[test]
fn status_values_and_list_keys_are_checked() {
    let stored = feature("watch-list", json!({"featureName": "WatchList"}));
    let mut bad = stored.clone();
    bad["status"] = json!({
        "state": "Sideways",
        "stage": "Gamma",
        "uses": [
            {"component": "apiserver", "instance": "a", "value": "On"},
            {"component": "apiserver", "instance": "a", "value": "Off"},
            {"component": "", "instance": "b", "value": "Perhaps"},
        ],
        "tasks": [{"type": "", "attempts": -1}],
        "conditions": [
            {"type": "Agreed", "status": "True"},
            {"type": "Agreed", "status": "Maybe"},
        ],
    });
    assert_eq!(
        messages(&validate_status_update(&bad, &stored).unwrap()),
        [
            "status.stage: Unsupported value: \"Gamma\": supported values: \"Alpha\", \"Beta\", \"GA\", \"Deprecated\"",
            "status.state: Unsupported value: \"Sideways\": supported values: \"On\", \"Off\", \"TurningOn\", \"TurningOff\"",
            "status.uses[1]: Duplicate value: {\"component\":\"apiserver\",\"instance\":\"a\"}",
            "status.uses[2].component: Required value",
            "status.uses[2].value: Unsupported value: \"Perhaps\": supported values: \"On\", \"Off\"",
            "status.tasks[0].type: Required value",
            "status.tasks[0].attempts: Invalid value: -1: must be greater than or equal to 0",
            "status.conditions[1].type: Duplicate value: \"Agreed\"",
            "status.conditions[1].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\"",
        ]
    );
}

#[test]
fn the_table_answers_what_is_on_and_whether_everyone_agrees() {
    let mut object = feature(
        "coordinated-leader-election",
        json!({"featureName": "CoordinatedLeaderElection"}),
    );
    object["status"] = json!({
        "state": "TurningOff", "stage": "Beta", "default": false, "dynamic": false,
        "uses": [{"component": "apiserver", "instance": "a", "value": "On"}],
        "tasks": [{"type": "WaitForUses"}, {"type": "ClearField"}],
        "conditions": [{"type": "Agreed", "status": "False"}],
    });
    let cells = row(&object, 0);
    assert_eq!(cells.len(), COLUMNS.len());
    assert_eq!(
        cells[1..7],
        [
            json!("TurningOff"),
            json!(""),
            json!("Beta"),
            json!("false"),
            json!("False"),
            json!("WaitForUses")
        ]
    );
    assert_eq!(
        cells[8..],
        [json!("CoordinatedLeaderElection"), json!(1), json!("false")]
    );
}
