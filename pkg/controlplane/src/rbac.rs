//! RBAC wiring: the bootstrap policy written at start-up (upstream's `rbac/bootstrap-roles`
//! post-start hook), the authorizer kept current from the watch caches of the four RBAC
//! resources, and escalation prevention on writes of roles and bindings.

use std::borrow::Borrow;
use std::sync::Arc;
use std::time::Duration;

use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::schema::GroupResource;
use genplane_apiserver::Resource;
use genplane_authentication::UserInfo;
use genplane_authorization::Authorizer;
use genplane_authorization::policy::Kind;
use genplane_authorization::rbac::RbacAuthorizer;
use genplane_authorization::reconcile::{Reconciled, reconcile};
use genplane_authorization::{aggregation, bootstrap, escalation};
use genplane_registry::{
    CheckEscalation, DeleteOptions, EscalationCheck, ListOptions, Store, WriteOptions,
};
use genplane_storage::{EventKind, ListRequest, Storage, WatchEvent};
use serde_json::Value;

use crate::Error;

/// The API group of RBAC.
pub const GROUP: &str = "rbac.authorization.k8s.io";

const KINDS: [Kind; 4] = [
    Kind::Role,
    Kind::ClusterRole,
    Kind::RoleBinding,
    Kind::ClusterRoleBinding,
];

/// The store of `kind`, when it is served.
fn served<S: Storage, R: Borrow<Resource<S>>>(resources: &[R], kind: Kind) -> Option<&Store<S>> {
    resources
        .iter()
        .map(Borrow::borrow)
        .find(|r| r.info.group == GROUP && r.info.resource == kind.resource())?
        .store()
}

fn meta<'a>(object: &'a Value, field: &str) -> &'a str {
    object
        .pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// How often a bootstrap write that lost a race with another apiserver is tried again.
const BOOTSTRAP_ATTEMPTS: usize = 5;

/// Writes upstream's bootstrap policy (and genplane's own roles) where it is missing or
/// incomplete, leaving objects annotated `rbac.authorization.kubernetes.io/autoupdate: "false"`
/// alone, then fills in the aggregated cluster roles (admin, edit, view) from the roles that
/// aggregate into them. Several apiservers may start at once: a write that meets another's
/// (409) is reconciled again from what is stored.
pub async fn bootstrap_policy<S: Storage, R: Borrow<Resource<S>>>(
    resources: &[R],
) -> Result<(), Error> {
    for (kind, expected) in bootstrap::objects() {
        let Some(resource) = served(resources, kind) else {
            continue;
        };
        let what = format!("{} {}", kind.as_str(), meta(&expected, "name"));
        let mut attempt = 1;
        loop {
            match reconcile_one(resource, kind, &expected).await {
                Ok(()) => break,
                Err(error) if error.code == 409 && attempt < BOOTSTRAP_ATTEMPTS => attempt += 1,
                Err(error) => return Err(Error::Bootstrap { what, error }),
            }
        }
    }
    let mut attempt = 1;
    loop {
        match aggregate(resources).await {
            Ok(()) => return Ok(()),
            Err(error) if error.code == 409 && attempt < BOOTSTRAP_ATTEMPTS => attempt += 1,
            Err(error) => {
                return Err(Error::Bootstrap {
                    what: "the aggregated cluster roles".into(),
                    error,
                });
            }
        }
    }
}

/// Brings one stored object in line with its bootstrap form.
async fn reconcile_one<S: Storage>(
    store: &Store<S>,
    kind: Kind,
    expected: &Value,
) -> Result<(), ApiError> {
    let options = WriteOptions::default();
    let (namespace, name) = (meta(expected, "namespace"), meta(expected, "name"));
    let existing = match store.get(namespace, name, None).await {
        Ok(object) => Some(object),
        Err(e) if e.code == 404 => None,
        Err(error) => return Err(error),
    };
    let reconciled = reconcile(kind, existing.as_ref(), expected)
        .map_err(|e| ApiError::from(Status::internal_error(e)))?;
    match reconciled {
        Reconciled::Create(object) => store.create(namespace, object, &options).await.map(drop),
        Reconciled::Update(object) => store
            .update(namespace, name, object, &options)
            .await
            .map(drop),
        Reconciled::Recreate(object) => {
            match store
                .delete(namespace, name, &DeleteOptions::default())
                .await
            {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(error) => return Err(error),
            }
            store.create(namespace, object, &options).await.map(drop)
        }
        Reconciled::Unchanged | Reconciled::Protected => Ok(()),
    }
}

/// Fills in the rules of aggregated cluster roles from the cluster roles their selectors
/// pick (what the clusterrole-aggregation controller keeps doing).
async fn aggregate<S: Storage, R: Borrow<Resource<S>>>(resources: &[R]) -> Result<(), ApiError> {
    let Some(cluster_roles) = served(resources, Kind::ClusterRole) else {
        return Ok(());
    };
    let store = cluster_roles;
    let mut all = store.list("", &ListOptions::default()).await?.items;
    for name in aggregation::aggregate_cluster_roles(&mut all) {
        let Some(object) = all.iter().find(|r| meta(r, "name") == name) else {
            continue;
        };
        store
            .update("", &name, object.clone(), &WriteOptions::default())
            .await?;
    }
    Ok(())
}

/// Where the objects of one RBAC kind are: its watch cache and key prefix.
struct Source<S> {
    kind: Kind,
    storage: Arc<S>,
    prefix: String,
}

/// Reads every stored RBAC object into `authorizer` (replacing what it held): the revision
/// of each source's list.
async fn load<S: Storage>(
    sources: &[Source<S>],
    authorizer: &RbacAuthorizer,
) -> Result<Vec<i64>, genplane_storage::Error> {
    let mut objects: Vec<(Kind, Value)> = Vec::new();
    let mut revisions = Vec::new();
    for source in sources {
        let listed = source
            .storage
            .list(ListRequest {
                prefix: source.prefix.clone(),
                ..ListRequest::default()
            })
            .await?;
        for item in &listed.items {
            match serde_json::from_slice::<Value>(&item.value) {
                Ok(object) => objects.push((source.kind, object)),
                Err(error) => tracing::warn!(key = item.key, %error, "unreadable RBAC object"),
            }
        }
        revisions.push(listed.revision);
    }
    if let Err(error) = authorizer.replace_all(objects.iter().map(|(k, o)| (*k, o))) {
        // One bad object must not cost the others: leave out those that do not read, then
        // replace the policy at once (never empty in between).
        tracing::warn!(%error, "RBAC policy with an unreadable object");
        let scratch = RbacAuthorizer::new();
        objects.retain(|(kind, object)| match scratch.apply(*kind, object) {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(%error, name = meta(object, "name"), "ignoring RBAC object");
                false
            }
        });
        let _ = authorizer.replace_all(objects.iter().map(|(k, o)| (*k, o)));
    }
    Ok(revisions)
}

/// Applies one watch event of `kind` to `authorizer`.
fn apply_event(authorizer: &RbacAuthorizer, kind: Kind, event: &genplane_storage::Event) {
    match event.kind {
        EventKind::Delete => {
            if let Some(prev) = &event.prev
                && let Ok(object) = serde_json::from_slice::<Value>(&prev.value)
            {
                authorizer.remove(kind, meta(&object, "namespace"), meta(&object, "name"));
            }
        }
        EventKind::Create | EventKind::Update => {
            match serde_json::from_slice::<Value>(&event.kv.value) {
                Ok(object) => {
                    if let Err(error) = authorizer.apply(kind, &object) {
                        tracing::warn!(%error, key = event.kv.key, "ignoring RBAC object");
                    }
                }
                Err(error) => tracing::warn!(%error, key = event.kv.key, "unreadable RBAC object"),
            }
        }
    }
}

/// Applies the events of every source's watch (from `revisions`) to `authorizer` until a
/// watch fails (`Some(error)`, or `None` when they all ended) or `stop` completes (`Err`).
async fn follow<S: Storage + 'static>(
    sources: &[Source<S>],
    revisions: &[i64],
    authorizer: &RbacAuthorizer,
    stop: &mut std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
) -> Result<Option<genplane_storage::Error>, ()> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let mut watchers = tokio::task::JoinSet::new();
    for (source, revision) in sources.iter().zip(revisions) {
        let (kind, storage, prefix, revision, tx) = (
            source.kind,
            source.storage.clone(),
            source.prefix.clone(),
            *revision,
            tx.clone(),
        );
        watchers.spawn(async move {
            let mut watch = match storage.watch(&prefix, revision).await {
                Ok(watch) => watch,
                Err(error) => {
                    let _ = tx.send(Err(error)).await;
                    return;
                }
            };
            while let Some(event) = watch.next().await {
                let item = match event {
                    WatchEvent::Event(event) => Ok((kind, event)),
                    WatchEvent::Progress(_) => continue,
                    WatchEvent::Error(error) => Err(error),
                };
                let failed = item.is_err();
                if tx.send(item).await.is_err() || failed {
                    return;
                }
            }
        });
    }
    drop(tx);
    // Dropping the JoinSet on return aborts the watchers.
    loop {
        tokio::select! {
            () = stop.as_mut() => return Err(()),
            item = rx.recv() => match item {
                Some(Ok((kind, event))) => apply_event(authorizer, kind, &event),
                Some(Err(error)) => return Ok(Some(error)),
                None => return Ok(None),
            }
        }
    }
}

/// Loads the stored policy into `authorizer`, then keeps it current from the watch caches
/// until `stop` completes (re-reading everything when a watch fails). Returns once the first
/// load is done, so that no request is decided on an empty policy.
pub async fn feed_policy<S: Storage + 'static, R: Borrow<Resource<S>>>(
    resources: &[R],
    authorizer: Arc<RbacAuthorizer>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), genplane_storage::Error> {
    let sources: Vec<Source<S>> = KINDS
        .iter()
        .filter_map(|kind| {
            served(resources, *kind).map(|r| Source {
                kind: *kind,
                storage: r.shared_storage(),
                prefix: format!("{}/", r.strategy().key_prefix()),
            })
        })
        .collect();
    let mut revisions = load(&sources, &authorizer).await?;
    let mut stop: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> = Box::pin(stop);
    tokio::spawn(async move {
        loop {
            let Ok(failed) = follow(&sources, &revisions, &authorizer, &mut stop).await else {
                return;
            };
            tracing::warn!(error = ?failed, "RBAC policy watch ended; reloading");
            loop {
                tokio::select! {
                    () = stop.as_mut() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                match load(&sources, &authorizer).await {
                    Ok(reloaded) => {
                        revisions = reloaded;
                        break;
                    }
                    Err(error) => tracing::warn!(%error, "reloading the RBAC policy"),
                }
            }
        }
    });
    Ok(())
}

/// Escalation prevention for one write of a role or binding by `user`.
#[derive(Debug)]
struct Escalation {
    authorizer: Arc<dyn Authorizer>,
    resolver: Arc<RbacAuthorizer>,
    user: UserInfo,
    kind: Kind,
    namespace: String,
}

impl CheckEscalation for Escalation {
    fn check(&self, old: Option<&Value>, new: &Value) -> Result<(), ApiError> {
        let checked = match self.kind {
            Kind::Role | Kind::ClusterRole => escalation::check_role_write(
                self.authorizer.as_ref(),
                self.resolver.as_ref(),
                &self.user,
                self.kind,
                &self.namespace,
                new,
                old,
            ),
            Kind::RoleBinding | Kind::ClusterRoleBinding => escalation::check_binding_write(
                self.authorizer.as_ref(),
                self.resolver.as_ref(),
                &self.user,
                self.kind,
                &self.namespace,
                new,
                old,
            ),
        };
        checked.map_err(|e| {
            // A binding to a role that does not exist is that role's 404, as upstream
            // answers it (its resolver's error comes through unchanged).
            if let Some((resource, role_ref)) =
                missing_role(self.resolver.as_ref(), new, &self.namespace)
            {
                return Status::not_found(&GroupResource::new(GROUP, resource), &role_ref).into();
            }
            Status::forbidden(&GroupResource::new(GROUP, e.resource), &e.name, &e.reason).into()
        })
    }
}

/// The role a binding refers to, as (`roles` or `clusterroles`, name), when it does not exist.
fn missing_role(
    resolver: &RbacAuthorizer,
    binding: &Value,
    namespace: &str,
) -> Option<(&'static str, String)> {
    use genplane_authorization::policy::RoleRef;
    use genplane_authorization::rbac::RuleResolver as _;
    let kind = binding.pointer("/roleRef/kind").and_then(Value::as_str)?;
    let name = binding.pointer("/roleRef/name").and_then(Value::as_str)?;
    let (resource, role_ref) = match kind {
        "ClusterRole" => ("clusterroles", RoleRef::cluster_role(name)),
        "Role" => ("roles", RoleRef::role(name)),
        _ => return None,
    };
    resolver
        .role_reference_rules(&role_ref, namespace)
        .is_err()
        .then(|| (resource, name.to_owned()))
}

/// The check of writes to RBAC resources under RBAC: a user may only grant what it holds
/// (or has the `escalate` / `bind` verbs for).
#[derive(Debug)]
pub struct EscalationChecks {
    /// The whole authorization chain (for the `escalate` and `bind` verbs).
    pub authorizer: Arc<dyn Authorizer>,
    /// The RBAC policy (for the rules a user holds).
    pub resolver: Arc<RbacAuthorizer>,
}

impl genplane_apiserver::security::EscalationChecks for EscalationChecks {
    fn check_for(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        user: &UserInfo,
    ) -> Option<EscalationCheck> {
        if group != GROUP {
            return None;
        }
        let kind = KINDS.into_iter().find(|k| k.resource() == resource)?;
        Some(EscalationCheck(Arc::new(Escalation {
            authorizer: self.authorizer.clone(),
            resolver: self.resolver.clone(),
            user: user.clone(),
            kind,
            namespace: namespace.to_owned(),
        })))
    }
}

#[cfg(test)]
mod tests {
    use genplane_authorization::{Attributes, Authorizer, Decision};
    use serde_json::json;

    use super::*;
    use crate::{StorageConfig, open_storage, resources};

    fn can(authorizer: &RbacAuthorizer, user: &str, verb: &str, resource: &str, ns: &str) -> bool {
        let user = UserInfo::authenticated(user, vec![]);
        let attributes = Attributes::resource(user, verb, "", resource, ns, "");
        authorizer.authorize(&attributes).0 == Decision::Allow
    }

    async fn eventually(what: &str, check: impl Fn() -> bool) {
        genplane_test_support::eventually_async(what, || async { check().then_some(()) }).await;
    }

    #[tokio::test]
    async fn the_policy_follows_the_stored_objects_after_the_bootstrap() {
        let dir = tempfile::tempdir().unwrap();
        let backend = open_storage(&StorageConfig::Sqlite {
            path: dir.path().join("db"),
        })
        .await
        .unwrap();
        let served = resources(backend).unwrap();
        crate::bootstrap(&served).await.unwrap();
        bootstrap_policy(&served).await.unwrap();
        // A second start changes nothing.
        bootstrap_policy(&served).await.unwrap();
        let authorizer = Arc::new(RbacAuthorizer::new());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        feed_policy(&served, authorizer.clone(), async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
        // The bootstrap policy is in force at once, with the aggregated view filled in.
        let views = served
            .iter()
            .find(|r| r.info.resource == "clusterroles")
            .unwrap()
            .store()
            .unwrap()
            .get("", "view", None)
            .await
            .unwrap();
        assert!(
            views["rules"].as_array().is_some_and(|r| !r.is_empty()),
            "{views}"
        );
        assert!(!can(&authorizer, "alice", "list", "configmaps", "default"));

        let bindings = served
            .iter()
            .find(|r| r.info.resource == "rolebindings")
            .unwrap()
            .store()
            .unwrap();
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "alice-view", "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
        });
        bindings
            .create("default", binding, &WriteOptions::default())
            .await
            .unwrap();
        eventually("the binding taking effect", || {
            can(&authorizer, "alice", "list", "configmaps", "default")
        })
        .await;
        assert!(!can(
            &authorizer,
            "alice",
            "list",
            "configmaps",
            "kube-system"
        ));
        bindings
            .delete("default", "alice-view", &DeleteOptions::default())
            .await
            .unwrap();
        eventually("the binding's removal taking effect", || {
            !can(&authorizer, "alice", "list", "configmaps", "default")
        })
        .await;
        drop(stop);
    }
}
