use super::*;
use genplane_component_base::featuregate::ResourceRef;

const CLEAR: Task = Task::ClearField {
    target: ResourceRef::new("coordination.k8s.io", "v1", "leases", "Lease"),
    fields: &["spec.strategy"],
};

fn known(configured: bool) -> Known {
    Known {
        name: "CoordinatedLeaderElection",
        stage: Stage::Beta,
        default: false,
        locked: false,
        configured,
        dynamic: false,
        may_be_dynamic: false,
        central: false,
        turn_off_tasks: vec![CLEAR],
        exists: true,
    }
}

fn versions() -> Versions {
    Versions {
        binary: "1.33".into(),
        emulated: "1.33".into(),
    }
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap()
}

fn live(names: &[&str]) -> BTreeMap<String, Instance> {
    names
        .iter()
        .map(|n| {
            (
                (*n).to_owned(),
                Instance {
                    name: (*n).to_owned(),
                    component: "apiserver".into(),
                    ..Instance::default()
                },
            )
        })
        .collect()
}

fn object(status: Value) -> Value {
    json!({"metadata": {"name": "coordinated-leader-election"},
           "spec": {"featureName": "CoordinatedLeaderElection"}, "status": status})
}

fn used(instance: &str, value: &str) -> Value {
    json!({"component": "apiserver", "instance": instance, "value": value})
}

const WAIT: Duration = Duration::from_secs(60);

#[test]
fn a_new_feature_is_announced_in_its_configured_state() {
    let plan = plan(
        &object(Value::Null),
        &known(true),
        &versions(),
        &live(&[]),
        at(0),
        WAIT,
    );
    let status = &plan.status;
    assert_eq!(status["state"], "On");
    assert_eq!(status["stage"], "Beta");
    assert_eq!(status["default"], false);
    assert_eq!(
        status["versions"],
        json!({"binary": "1.33", "emulated": "1.33"})
    );
    assert_eq!(status["dynamic"], false);
    assert_eq!(status.get("tasks"), None);
    assert_eq!(status["conditions"][0]["type"], "Agreed");
    assert_eq!(status["conditions"][0]["status"], "True");
    assert!(plan.transitions.is_empty());
    assert_eq!(plan.run, None);
}

#[test]
fn turning_off_waits_for_every_live_instance_then_clears_the_field() {
    let on = object(json!({"state": "On", "uses": [used("a", "On"), used("gone", "On")]}));
    // Configured off: the transition starts and the uses are cleared.
    let start = plan(&on, &known(false), &versions(), &live(&["a"]), at(0), WAIT);
    assert_eq!(start.transitions, ["TurningOff"]);
    assert_eq!(start.status["state"], "TurningOff");
    let tasks = start.status["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0]["type"], "WaitForUses");
    assert_eq!(tasks[0]["attempts"], 1);
    assert_eq!(tasks[1]["type"], "ClearField");
    assert_eq!(
        tasks[1]["target"],
        "leases.coordination.k8s.io spec.strategy"
    );
    assert_eq!(start.status.get("uses"), None);

    // Before the wait is over nothing changes, whatever is reported.
    let mut waiting = object(start.status.clone());
    waiting["status"]["uses"] = json!([used("a", "On")]);
    let early = plan(
        &waiting,
        &known(false),
        &versions(),
        &live(&["a"]),
        at(30),
        WAIT,
    );
    assert_eq!(early.status["state"], "TurningOff");
    assert_eq!(early.run, None);
    assert_eq!(early.status["conditions"][0]["status"], "False");
    assert!(
        early.status["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .contains("apiserver/a"),
        "{}",
        early.status["conditions"][0]
    );

    // After it, an instance still reporting On holds the transition, named in the task.
    let held = plan(
        &waiting,
        &known(false),
        &versions(),
        &live(&["a"]),
        at(61),
        WAIT,
    );
    assert_eq!(held.status["state"], "TurningOff");
    assert_eq!(
        held.status["tasks"][0]["message"],
        "waiting for instances that still report On: apiserver/a"
    );
    assert_eq!(held.run, None);

    // Once it reports Off (or is gone), the next task runs.
    waiting["status"]["uses"] = json!([used("a", "Off"), used("b", "Off")]);
    let ready = plan(
        &waiting,
        &known(false),
        &versions(),
        &live(&["a"]),
        at(61),
        WAIT,
    );
    assert_eq!(ready.run, Some(CLEAR));
    assert_eq!(ready.status["uses"], json!([used("a", "Off")]));
    assert_eq!(ready.status["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(ready.status["conditions"][0]["status"], "True");

    let mut done = ready.status.clone();
    assert_eq!(task_done(&mut done, "cleared"), Some("Off"));
    assert_eq!(done["state"], "Off");
    assert_eq!(done.get("tasks"), None);
}

#[test]
fn a_failed_task_is_retried_and_counted() {
    let mut status = json!({"state": "TurningOff", "tasks": [{"type": "ClearField"}]});
    task_failed(&mut status, "boom");
    task_failed(&mut status, "boom again");
    assert_eq!(status["tasks"][0]["attempts"], 2);
    assert_eq!(status["tasks"][0]["lastError"], "boom again");
}

#[test]
fn desired_counts_only_for_dynamic_features_and_a_reversal_restarts_the_tasks() {
    let mut off = object(json!({"state": "Off"}));
    off["spec"]["desired"] = json!("On");
    let ignored = plan(&off, &known(false), &versions(), &live(&[]), at(0), WAIT);
    assert_eq!(ignored.status["state"], "Off");
    let dynamic = Known {
        dynamic: true,
        may_be_dynamic: true,
        ..known(false)
    };
    let on = plan(&off, &dynamic, &versions(), &live(&[]), at(0), WAIT);
    assert_eq!(on.transitions, ["TurningOn"]);
    assert_eq!(on.status["tasks"].as_array().unwrap().len(), 1);

    // Asked Off again mid-way: TurningOff with its own tasks.
    let mut turning = object(on.status.clone());
    turning["spec"]["desired"] = json!("Off");
    let back = plan(&turning, &dynamic, &versions(), &live(&[]), at(1), WAIT);
    assert_eq!(back.transitions, ["TurningOff"]);
    assert_eq!(back.status["tasks"].as_array().unwrap().len(), 2);

    // With nobody to wait for, turning on completes once the wait is over.
    let mut waited = object(on.status.clone());
    waited["spec"]["desired"] = json!("On");
    let done = plan(&waited, &dynamic, &versions(), &live(&[]), at(61), WAIT);
    assert_eq!(done.transitions, ["On"]);
    assert_eq!(done.status["state"], "On");
}

#[test]
fn an_unchanged_feature_plans_the_same_status() {
    let first = plan(
        &object(Value::Null),
        &known(true),
        &versions(),
        &live(&[]),
        at(0),
        WAIT,
    );
    let again = plan(
        &object(first.status.clone()),
        &known(true),
        &versions(),
        &live(&[]),
        at(10),
        WAIT,
    );
    assert_eq!(again.status, first.status);
}

#[test]
fn a_central_feature_is_on_only_while_every_live_api_server_runs_it_on() {
    let central = Known {
        central: true,
        // The feature-controller's own flag does not count.
        configured: true,
        ..known(true)
    };
    let instances = live(&["a", "b"]);
    // Both servers on: stays On.
    let on = object(json!({"state": "On", "uses": [used("a", "On"), used("b", "On")]}));
    let plan1 = plan(&on, &central, &versions(), &instances, at(0), WAIT);
    assert_eq!(plan1.status["state"], "On");
    // One restarted with it off: turning off, held by the other until it agrees.
    let split = object(json!({"state": "On", "uses": [used("a", "On"), used("b", "Off")]}));
    let plan2 = plan(&split, &central, &versions(), &instances, at(1), WAIT);
    assert_eq!(plan2.status["state"], "TurningOff");
    assert_eq!(plan2.transitions, ["TurningOff"]);
    // The uses were cleared: with no report the state's value holds (no reversal).
    let cleared = object(plan2.status.clone());
    let plan3 = plan(&cleared, &central, &versions(), &instances, at(2), WAIT);
    assert_eq!(plan3.status["state"], "TurningOff");
    assert!(plan3.transitions.is_empty());
    // Other components' uses do not decide.
    let mut others = plan2.status.clone();
    others["uses"] = json!([{"component": "controller-manager", "instance": "a", "value": "On"},
                            used("b", "Off")]);
    let plan4 = plan(
        &object(others),
        &central,
        &versions(),
        &instances,
        at(3),
        WAIT,
    );
    assert_eq!(plan4.status["state"], "TurningOff");
}

#[test]
fn a_feature_absent_at_a_lower_emulated_version_is_turned_off_through_its_tasks() {
    let absent = Known {
        stage: Stage::PreAlpha,
        exists: false,
        ..known(false)
    };
    let downgraded = Versions {
        binary: "1.33".into(),
        emulated: "1.30".into(),
    };
    let on = object(json!({"state": "On", "stage": "Beta", "uses": [used("a", "On")]}));
    let start = plan(&on, &absent, &downgraded, &live(&["a"]), at(0), WAIT);
    assert_eq!(start.transitions, ["TurningOff"]);
    let tasks = start.status["tasks"].as_array().unwrap();
    assert_eq!(tasks[1]["type"], "ClearField");
    // What the version that had it said stays; the move is recorded.
    assert_eq!(start.status["stage"], "Beta");
    assert_eq!(start.status["versions"]["emulated"], "1.30");
    let condition = |status: &Value, type_: &str| {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == type_)
            .cloned()
            .unwrap()
    };
    let unsafe_now = condition(&start.status, "UpgradeSafe");
    assert_eq!(unsafe_now["status"], "False");
    assert_eq!(
        unsafe_now["message"],
        "CoordinatedLeaderElection does not exist at emulated version 1.30: turning it off and running its turn-off tasks to remove what it stored"
    );

    let mut off = start.status.clone();
    off["state"] = json!("Off");
    off.as_object_mut().unwrap().remove("tasks");
    let done = plan(
        &object(off),
        &absent,
        &downgraded,
        &live(&["a"]),
        at(5),
        WAIT,
    );
    assert!(done.transitions.is_empty());
    assert_eq!(condition(&done.status, "UpgradeSafe")["status"], "True");

    // Back at a version that has it: the condition says so, and a Feature that never moved
    // has none.
    let back = plan(
        &object(done.status.clone()),
        &known(false),
        &versions(),
        &live(&["a"]),
        at(10),
        WAIT,
    );
    assert_eq!(
        condition(&back.status, "UpgradeSafe")["reason"],
        "PresentAtEmulatedVersion"
    );
    let plain = plan(&on, &known(true), &versions(), &live(&["a"]), at(0), WAIT);
    assert!(
        plain.status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["type"] != "UpgradeSafe")
    );
}

#[test]
fn what_the_acting_instance_owes_comes_from_the_object_alone() {
    let now = at(0);
    let wait = Duration::from_secs(10);
    let live = live(&["apiserver-a"]);
    let on = |extra: Value| {
        let mut object = object(json!({"state": "On", "dynamic": true,
                                       "uses": [used("apiserver-a", "On")]}));
        merge(&mut object, extra);
        object
    };
    // Settled: nothing owed.
    assert_eq!(owed(&on(json!({})), &live, now, wait), None);
    assert_eq!(
        owed(&on(json!({"spec": {"desired": "On"}})), &live, now, wait),
        None
    );
    // Asked Off, and nobody started the transition.
    assert!(
        owed(&on(json!({"spec": {"desired": "Off"}})), &live, now, wait)
            .unwrap()
            .contains("no transition started")
    );
    // Not dynamic: spec.desired means nothing (the acting instance's flags decide).
    assert_eq!(
        owed(
            &on(json!({"spec": {"desired": "Off"}, "status": {"dynamic": false}})),
            &live,
            now,
            wait
        ),
        None
    );
    // The uses of an instance that is gone.
    assert!(
        owed(&on(json!({})), &BTreeMap::new(), now, wait)
            .unwrap()
            .contains("apiserver/apiserver-a")
    );
    // A transition: a task to run, WaitForUses to start, or done waiting.
    let turning = |tasks: Value, uses: Value| {
        object(json!({"state": "TurningOff", "tasks": tasks, "uses": uses}))
    };
    assert!(
        owed(
            &turning(json!([{"type": "ClearField"}]), json!([])),
            &live,
            now,
            wait
        )
        .unwrap()
        .contains("ClearField is not run")
    );
    assert!(
        owed(
            &turning(json!([{"type": "WaitForUses"}]), json!([])),
            &live,
            now,
            wait
        )
        .unwrap()
        .contains("not started")
    );
    let started = |ago: i64| {
        json!([{"type": "WaitForUses",
                "startTime": genplane_apimachinery::meta::rfc3339(at(-ago).as_second())}])
    };
    let reporting_on = json!([used("apiserver-a", "On")]);
    assert_eq!(
        owed(&turning(started(5), json!([])), &live, now, wait),
        None,
        "still waiting"
    );
    assert_eq!(
        owed(&turning(started(60), reporting_on), &live, now, wait),
        None,
        "an instance still reports the old value"
    );
    assert!(
        owed(&turning(started(60), json!([])), &live, now, wait)
            .unwrap()
            .contains("is done, not completed")
    );
}

/// Merges `extra` into `object` (objects key by key, anything else replaced).
fn merge(object: &mut Value, extra: Value) {
    match (object, extra) {
        (Value::Object(object), Value::Object(extra)) => {
            for (key, value) in extra {
                merge(object.entry(key).or_insert(Value::Null), value);
            }
        }
        (object, extra) => *object = extra,
    }
}

#[test]
fn a_feature_is_dynamic_while_every_live_api_server_names_it() {
    let feature = Known {
        may_be_dynamic: true,
        ..known(true)
    };
    let server = |name: &str, dynamic: &[&str]| {
        (
            name.to_owned(),
            Instance {
                name: name.to_owned(),
                component: "apiserver".into(),
                dynamic: dynamic.iter().map(|d| (*d).to_owned()).collect(),
            },
        )
    };
    let mut on = object(json!({"state": "On"}));
    on["spec"]["desired"] = json!("Off");
    let plan_with = |live: BTreeMap<String, Instance>, object: &Value| {
        plan(object, &feature, &versions(), &live, at(0), WAIT)
    };
    let both = plan_with(
        [
            server("apiserver-a", &["CoordinatedLeaderElection"]),
            server("apiserver-b", &["CoordinatedLeaderElection", "Other"]),
        ]
        .into(),
        &on,
    );
    assert_eq!(both.status["dynamic"], true);
    assert_eq!(both.transitions, ["TurningOff"]);
    // One server does not name it: not dynamic, spec.desired does not count.
    let one = plan_with(
        [
            server("apiserver-a", &["CoordinatedLeaderElection"]),
            server("apiserver-b", &[]),
        ]
        .into(),
        &on,
    );
    assert_eq!(one.status["dynamic"], false);
    assert!(one.transitions.is_empty());
    // No live API server: what the status says holds.
    let mut kept = on.clone();
    kept["status"]["dynamic"] = json!(true);
    assert_eq!(plan_with(BTreeMap::new(), &kept).status["dynamic"], true);
    assert_eq!(plan_with(BTreeMap::new(), &on).status["dynamic"], false);
    // A feature that cannot be dynamic never is.
    let fixed = plan(
        &kept,
        &known(true),
        &versions(),
        &[server("apiserver-a", &["CoordinatedLeaderElection"])].into(),
        at(0),
        WAIT,
    );
    assert_eq!(fixed.status["dynamic"], false);
}
