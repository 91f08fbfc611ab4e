use serde_json::json;

use super::*;

fn level(name: &str, shares: i32, lendable: i32, response: Value) -> Value {
    json!({"metadata": {"name": name, "uid": format!("uid-{name}")}, "spec": {
        "type": "Limited",
        "limited": {"nominalConcurrencyShares": shares, "lendablePercent": lendable,
            "limitResponse": response}}})
}

fn queue(queues: i32, hand_size: i32, length: i32) -> Value {
    json!({"type": "Queue", "queuing": {"queues": queues, "handSize": hand_size, "queueLengthLimit": length}})
}

fn schema(name: &str, level: &str, user: &str) -> Value {
    json!({"metadata": {"name": name, "uid": format!("uid-{name}")}, "spec": {
        "priorityLevelConfiguration": {"name": level}, "matchingPrecedence": 500,
        "distinguisherMethod": {"type": "ByUser"},
        "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                "clusterScope": true, "namespaces": ["*"]}]}]}})
}

fn user(name: &str) -> UserInfo {
    UserInfo {
        username: name.into(),
        groups: vec!["system:authenticated".into()],
        ..UserInfo::default()
    }
}

fn get() -> RequestInfo {
    RequestInfo {
        is_resource_request: true,
        verb: "get".into(),
        api_version: "v1".into(),
        resource: "configmaps".into(),
        namespace: "default".into(),
        name: "x".into(),
        ..RequestInfo::default()
    }
}

/// How many observations the histogram of `cell` holds, read from its text form; `None` when
/// it was never made.
fn observations(cell: &OnceLock<Histogram>) -> Option<u64> {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register("observed", "", cell.get()?.clone());
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("observed_count "))
        .map(|count| count.parse().unwrap())
}

fn no_count() -> Result<usize, bool> {
    Err(false)
}

fn level_named(flow_control: &FlowControl, name: &str) -> Arc<Level> {
    flow_control
        .config()
        .levels
        .iter()
        .find(|l| &*l.name == name)
        .cloned()
        .unwrap()
}

/// Levels `a` and `b` (queued, 10 shares, half lendable) beside the mandatory ones (catch-all
/// has 5 shares): 25 seats make them 10, 10 and 5.
fn two_levels(wait_limit: Duration) -> FlowControl {
    let flow_control = FlowControl::new(25, wait_limit);
    flow_control.configure(
        &[schema("a", "a", "alice"), schema("b", "b", "bob")],
        &[
            level("a", 10, 50, queue(16, 2, 50)),
            level("b", 10, 50, queue(16, 2, 50)),
        ],
    );
    flow_control
}

#[tokio::test]
async fn the_server_limit_is_shared_by_shares_and_requests_carry_their_classification() {
    let mut schemas = bootstrap::mandatory_flow_schemas();
    schemas.extend(bootstrap::suggested_flow_schemas());
    let mut levels = bootstrap::mandatory_priority_levels();
    levels.extend(bootstrap::suggested_priority_levels());
    let flow_control = FlowControl::new(600, Duration::from_secs(15));
    flow_control.configure(&schemas, &levels);
    // Shares: exempt 0, catch-all 5, system 30, node-high 40, leader-election 10,
    // workload-high 40, workload-low 100, global-default 20: 245 in all.
    for (name, nominal, lendable) in [
        ("exempt", 0, 0),
        ("catch-all", 13, 0),
        ("global-default", 49, 25),
        ("workload-low", 245, 221),
        ("leader-election", 25, 0),
    ] {
        let level = level_named(&flow_control, name);
        let state = level.lock();
        assert_eq!(
            (state.nominal, state.lendable),
            (nominal, lendable),
            "{name}"
        );
    }
    let admitted = flow_control
        .admit(&get(), None, &user("someone"), no_count)
        .await
        .unwrap();
    assert_eq!(&*admitted.classified.flow_schema, "global-default");
    assert_eq!(&*admitted.classified.priority_level, "global-default");
    // The stored objects carry no uid here.
    assert_eq!(&*admitted.classified.priority_level_uid, "");
    let level = level_named(&flow_control, "global-default");
    assert_eq!(level.lock().set.seats_in_use, 1);
    drop(admitted);
    assert_eq!(level.lock().set.seats_in_use, 0);
}

#[tokio::test]
async fn a_busy_level_borrows_what_idle_levels_lend_at_the_next_adjustment() {
    let flow_control = two_levels(Duration::from_secs(30));
    let flow_control = Arc::new(flow_control);
    let mut running = Vec::new();
    for _ in 0..10 {
        running.push(
            flow_control
                .admit(&get(), None, &user("alice"), no_count)
                .await
                .unwrap(),
        );
    }
    // Ten more wait.
    let mut waiting = Vec::new();
    for _ in 0..10 {
        let flow_control = flow_control.clone();
        waiting.push(tokio::spawn(async move {
            flow_control
                .admit(&get(), None, &user("alice"), no_count)
                .await
                .map(|a| a.classified.priority_level.clone())
        }));
    }
    let a = level_named(&flow_control, "a");
    for _ in 0..100 {
        if a.lock().set.waiting == 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(a.lock().set.waiting, 10);
    // Demand of 20 seats against idle neighbours: b lends its 5, catch-all lends none.
    flow_control.adjust(Instant::now() + Duration::from_secs(10));
    assert_eq!(a.lock().set.concurrency, 15);
    assert_eq!(level_named(&flow_control, "b").lock().set.concurrency, 5);
    assert_eq!(a.lock().set.waiting, 5);
    assert_eq!(a.lock().set.seats_in_use, 15);
    // b still runs its unlendable 5 at once.
    let mut b = Vec::new();
    for _ in 0..5 {
        b.push(
            flow_control
                .admit(&get(), None, &user("bob"), no_count)
                .await
                .unwrap(),
        );
    }
    drop(running);
    for task in waiting {
        assert_eq!(&*task.await.unwrap().unwrap(), "a");
    }
}

#[tokio::test]
async fn a_request_waiting_past_the_limit_is_rejected_and_a_gone_one_leaves_its_queue() {
    let flow_control = Arc::new(two_levels(Duration::from_millis(100)));
    let mut running = Vec::new();
    for _ in 0..10 {
        running.push(
            flow_control
                .admit(&get(), None, &user("alice"), no_count)
                .await
                .unwrap(),
        );
    }
    let rejected = flow_control
        .admit(&get(), None, &user("alice"), no_count)
        .await
        .unwrap_err();
    assert_eq!(rejected.reason, RejectReason::TimeOut);
    assert_eq!(rejected.retry_after, 1);
    assert_eq!(&*rejected.classified.priority_level_uid, "uid-a");
    let a = level_named(&flow_control, "a");
    assert_eq!(a.lock().set.waiting, 0);

    let gone = {
        let flow_control = flow_control.clone();
        tokio::spawn(async move {
            let _ = flow_control
                .admit(&get(), None, &user("alice"), no_count)
                .await;
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(a.lock().set.waiting, 1);
    gone.abort();
    let _ = gone.await;
    assert_eq!(a.lock().set.waiting, 0);
    assert_eq!(a.lock().set.rejected, [0, 0, 1, 1]);
    drop(running);
    assert_eq!(a.lock().set.seats_in_use, 0);

    // The metrics' histograms: ten ran at once, two waited and did not run (one at least
    // the wait limit), ten ran for a while, and each took one seat.
    let counts = flow_control
        .flow_counts()
        .into_iter()
        .find(|((schema, level), _)| (&**schema, &**level) == ("a", "a"))
        .map(|(_, counts)| counts)
        .unwrap();
    let [ran, not_ran] = &counts.wait;
    assert_eq!(observations(ran), Some(10));
    assert_eq!(observations(not_ran), Some(2));
    let [regular, watch] = &counts.execution;
    assert_eq!(observations(regular), Some(10));
    assert_eq!(observations(watch), None);
    assert_eq!(observations(&counts.estimated_seats), Some(12));
    // Its answers' headers, made once with the configuration.
    assert_eq!(
        rejected.classified.priority_level_header,
        Some(HeaderValue::from_static("uid-a"))
    );
    assert_eq!(
        rejected.classified.flow_schema_header,
        Some(HeaderValue::from_static("uid-a"))
    );
}

#[tokio::test]
async fn a_removed_level_lets_its_waiting_requests_run_and_the_rest_go_elsewhere() {
    let flow_control = Arc::new(two_levels(Duration::from_secs(30)));
    let mut running = Vec::new();
    for _ in 0..10 {
        running.push(
            flow_control
                .admit(&get(), None, &user("alice"), no_count)
                .await
                .unwrap(),
        );
    }
    let waiting = {
        let flow_control = flow_control.clone();
        tokio::spawn(async move {
            flow_control
                .admit(&get(), None, &user("alice"), no_count)
                .await
                .is_ok()
        })
    };
    let a = level_named(&flow_control, "a");
    while a.lock().set.waiting == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    flow_control.configure(&[], &[]);
    assert!(waiting.await.unwrap());
    // Now alice's requests fall to catch-all (a Reject level of every seat).
    let admitted = flow_control
        .admit(&get(), None, &user("alice"), no_count)
        .await
        .unwrap();
    assert_eq!(&*admitted.classified.flow_schema, "catch-all");
    // What ran on the removed level finishes on it.
    assert_eq!(a.lock().set.seats_in_use, 10);
    drop(running);
    assert_eq!(a.lock().set.seats_in_use, 0);
}

#[tokio::test]
async fn lists_and_watched_writes_take_the_seats_their_estimate_gives() {
    let flow_control = FlowControl::new(600, Duration::from_secs(15));
    let mut list = get();
    list.verb = "list".into();
    list.name.clear();
    let admitted = flow_control
        .admit(&list, None, &user("someone"), || Ok(450))
        .await
        .unwrap();
    let catch_all = level_named(&flow_control, "catch-all");
    assert_eq!(catch_all.lock().set.seats_in_use, 5);
    drop(admitted);

    // 15 watches of the namespace, 5 of every namespace, 5 of one object of it, 7 of
    // another namespace and 3 of another object.
    let mut watch = list.clone();
    watch.verb = "watch".into();
    let watch_of = |namespace: &str, name: &str| {
        let mut watch = watch.clone();
        watch.namespace = namespace.into();
        watch.name = name.into();
        watch
    };
    let mut registrations = Vec::new();
    for (count, namespace, name) in [
        (15, "default", ""),
        (5, "", ""),
        (5, "default", "x"),
        (7, "other", ""),
        (3, "default", "y"),
    ] {
        let watch = watch_of(namespace, name);
        registrations.extend((0..count).map(|_| flow_control.register_watch(&watch)));
    }
    let mut create = list.clone();
    create.verb = "create".into();
    let mut update = get();
    update.verb = "update".into();
    assert_eq!(flow_control.watchers(&create), 20);
    assert_eq!(flow_control.watchers(&update), 25);
    update.namespace = "other".into();
    assert_eq!(flow_control.watchers(&update), 12);
    update.namespace.clear();
    assert_eq!(flow_control.watchers(&update), 5);
    let admitted = flow_control
        .admit(&create, None, &user("someone"), no_count)
        .await
        .unwrap();
    // Twenty watchers: two seats.
    assert_eq!(catch_all.lock().set.seats_in_use, 2);
    drop(admitted);
    // Held for the events' work after the write completes.
    assert_eq!(catch_all.lock().set.seats_in_use, 2);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(catch_all.lock().set.seats_in_use, 0);
    drop(registrations);
    assert_eq!(flow_control.watchers(&create), 0);
    assert!(flow_control.watches.lock().unwrap().is_empty());
}

#[test]
fn retry_after_grows_while_a_level_keeps_rejecting_and_starts_over_after_quiet() {
    let start = Instant::now();
    let mut retry = RetryAfter::new(start);
    let at = |s: u64| start + Duration::from_secs(s);
    assert_eq!(retry.dropped(at(0)), 1);
    assert_eq!(retry.dropped(at(1)), 1);
    // Rejections in two windows in a row: doubled, each window.
    assert_eq!(retry.dropped(at(2)), 2);
    assert_eq!(retry.dropped(at(3)), 2);
    assert_eq!(retry.dropped(at(4)), 4);
    let mut last = 0;
    for s in 5..=200 {
        last = retry.dropped(at(s));
    }
    assert_eq!(last, MAX_RETRY_AFTER);
    // A window without rejections halves it.
    let mut quiet = RetryAfter::new(start);
    quiet.seconds = 8;
    quiet.dropped_before = true;
    assert_eq!(quiet.dropped(at(9)), 4);
    assert_eq!(retry.dropped(at(10_000)), 1);
}
