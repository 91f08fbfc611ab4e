//! The ownership graph: a node per object (by uid) with its owner references and its
//! dependents, as the watches report them; owners that were never observed are "virtual"
//! nodes until an API call proves them present or absent. Each change returns what the
//! collector must do next ([`Effects`]); the graph itself makes no API calls.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::spare::ReleaseSpare as _;

/// The finalizer of an owner deleted in the foreground.
pub(crate) const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer of an owner whose dependents are orphaned.
pub(crate) const ORPHAN: &str = "orphan";

/// Where an object is: `apiVersion`, `kind`, namespace (empty when cluster-scoped), name, uid.
///
/// The graph holds one per object, so it is kept small: `apiVersion` and `kind` are shared by
/// every object a watch reports, the rest are boxed strings (no spare capacity).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub(crate) struct Identity {
    /// `apiVersion`.
    pub(crate) api_version: Arc<str>,
    /// `kind`.
    pub(crate) kind: Arc<str>,
    /// Namespace, empty for cluster-scoped objects.
    pub(crate) namespace: Box<str>,
    /// Name.
    pub(crate) name: Box<str>,
    /// uid.
    pub(crate) uid: Box<str>,
}

impl Identity {
    /// The identity an owner reference names, assuming the dependent's namespace.
    pub(crate) fn of_owner(owner: &OwnerReference, namespace: &str) -> Self {
        Identity {
            api_version: owner.api_version.as_str().into(),
            kind: owner.kind.as_str().into(),
            namespace: namespace.into(),
            name: owner.name.as_str().into(),
            uid: owner.uid.as_str().into(),
        }
    }

    fn matches(&self, owner: &OwnerReference) -> bool {
        *self.uid == *owner.uid
            && *self.name == *owner.name
            && *self.kind == *owner.kind
            && *self.api_version == *owner.api_version
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[{}/{}, namespace: {}, name: {}, uid: {}]",
            self.api_version, self.kind, self.namespace, self.name, self.uid
        )
    }
}

/// One object in the graph.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    /// Where it is.
    pub(crate) identity: Identity,
    /// Its owner references, as last observed.
    pub(crate) owners: Vec<OwnerReference>,
    /// The uids of the objects that name it as an owner.
    pub(crate) dependents: HashSet<Box<str>>,
    /// It has a `deletionTimestamp`.
    pub(crate) being_deleted: bool,
    /// It has a `deletionTimestamp` and the `foregroundDeletion` finalizer.
    pub(crate) deleting_dependents: bool,
    /// A watch reported it (otherwise it is only named by an owner reference).
    pub(crate) observed: bool,
    /// The last observation had a `deletionTimestamp` and the `orphan` finalizer.
    seen_orphaning: bool,
    /// The last observation had a `deletionTimestamp` and the `foregroundDeletion` finalizer.
    seen_foreground: bool,
}

/// A dependent as the collector needs to see it while deciding about its owner.
#[derive(Clone, Debug)]
pub(crate) struct Dependent {
    /// Where it is.
    pub(crate) identity: Identity,
    /// It is itself deleting its dependents in the foreground.
    pub(crate) deleting_dependents: bool,
    /// Its reference to the owner has `blockOwnerDeletion: true`.
    pub(crate) blocks_owner: bool,
}

/// A copy of a node and its dependents, taken under the lock.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    /// The node.
    pub(crate) node: Node,
    /// Its dependents.
    pub(crate) dependents: Vec<Dependent>,
}

/// What the collector must do after a change.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Effects {
    /// uids to examine for deletion (`attemptToDelete`).
    pub(crate) delete: Vec<String>,
    /// uids whose dependents must be orphaned (`attemptToOrphan`).
    pub(crate) orphan: Vec<String>,
    /// Invalid references to report: the dependent and the owner uid it names.
    pub(crate) invalid: Vec<(Identity, OwnerReference)>,
}

fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

fn blocks(owner: &OwnerReference) -> bool {
    owner.block_owner_deletion == Some(true)
}

/// Whether `meta` is being deleted with `finalizer`.
fn deleting_with(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.deletion_timestamp.is_some() && has_finalizer(meta, finalizer)
}

/// The graph, with upstream's cache of owners verified absent.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    nodes: HashMap<Box<str>, Node>,
    absent: HashSet<Identity>,
}

/// The absent-owner cache is cleared past this many entries (uids never come back, so an
/// entry is never wrong, only worth keeping for a while).
const ABSENT_CACHE_LIMIT: usize = 65_536;

impl Graph {
    /// How many nodes the graph holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether `identity` was verified absent.
    pub(crate) fn is_absent(&self, identity: &Identity) -> bool {
        self.absent.contains(identity)
    }

    /// Records that `identity` was verified absent.
    pub(crate) fn add_absent(&mut self, identity: Identity) {
        if self.absent.len() >= ABSENT_CACHE_LIMIT {
            self.absent.clear();
        }
        self.absent.insert(identity);
    }

    /// A copy of the node `uid` and of its dependents.
    pub(crate) fn snapshot(&self, uid: &str) -> Option<Snapshot> {
        let node = self.nodes.get(uid)?;
        let dependents = node
            .dependents
            .iter()
            .filter_map(|d| self.nodes.get(d))
            .map(|d| Dependent {
                identity: d.identity.clone(),
                deleting_dependents: d.deleting_dependents,
                blocks_owner: d.owners.iter().any(|o| *o.uid == *uid && blocks(o)),
            })
            .collect();
        Some(Snapshot {
            node: node.clone(),
            dependents,
        })
    }

    /// A watch reported `new` (added or updated) as `identity`. What the previous observation
    /// of the object showed (upstream compares with the informer's old object) is the node's:
    /// the graph keeps it, so the watches need keep no copy of the metadata.
    pub(crate) fn observe(&mut self, identity: Identity, new: &ObjectMeta) -> Effects {
        let mut fx = Effects::default();
        let uid = identity.uid.clone();
        let owners = new.owner_references.clone().unwrap_or_default();
        let being_deleted = new.deletion_timestamp.is_some();
        let (was_orphaning, was_foreground) = self
            .nodes
            .get(&uid)
            .filter(|node| node.observed)
            .map_or((false, false), |node| {
                (node.seen_orphaning, node.seen_foreground)
            });
        let orphaning = deleting_with(new, ORPHAN);
        let foreground = deleting_with(new, FOREGROUND);
        if let Some(existing) = self.nodes.get_mut(&uid)
            && !existing.observed
        {
            existing.observed = true;
            if existing.identity != identity {
                // Dependents that named this (then virtual) owner by other coordinates.
                let dependents: Vec<Box<str>> = existing.dependents.iter().cloned().collect();
                existing.identity = identity.clone();
                for d in dependents {
                    let Some(dep) = self.nodes.get(&d) else {
                        continue;
                    };
                    let namespace_mismatch = !identity.namespace.is_empty()
                        && dep.identity.namespace != identity.namespace;
                    let mismatch = namespace_mismatch
                        || dep
                            .owners
                            .iter()
                            .any(|o| *o.uid == *uid && !identity.matches(o));
                    if namespace_mismatch
                        && let Some(o) = dep.owners.iter().find(|o| *o.uid == *uid)
                    {
                        fx.invalid.push((dep.identity.clone(), o.clone()));
                    }
                    if mismatch {
                        fx.delete.push(d.into());
                    }
                }
            }
        }
        if let Some(existing) = self.nodes.get_mut(&uid) {
            existing.identity.api_version = identity.api_version.clone();
            existing.identity.kind = identity.kind.clone();
            let old_owners = std::mem::replace(&mut existing.owners, owners.clone());
            if being_deleted {
                existing.being_deleted = true;
            }
            // Owner references removed, or no longer blocking, may unblock their owners.
            for o in &old_owners {
                let now = owners.iter().find(|n| n.uid == o.uid);
                let unblocked = blocks(o) && now.is_none_or(|n| !blocks(n));
                if unblocked && self.nodes.contains_key(o.uid.as_str()) {
                    fx.delete.push(o.uid.clone());
                }
            }
            let added: Vec<OwnerReference> = owners
                .iter()
                .filter(|n| !old_owners.iter().any(|o| o.uid == n.uid))
                .cloned()
                .collect();
            for o in &old_owners {
                if !owners.iter().any(|n| n.uid == o.uid)
                    && let Some(owner) = self.nodes.get_mut(o.uid.as_str())
                {
                    owner.dependents.remove(&uid);
                }
            }
            self.add_dependent_to_owners(&uid, &identity, &added, &mut fx);
        } else {
            self.nodes.insert(
                uid.clone(),
                Node {
                    identity: identity.clone(),
                    owners: owners.clone(),
                    dependents: HashSet::new(),
                    being_deleted,
                    deleting_dependents: foreground,
                    observed: true,
                    seen_orphaning: false,
                    seen_foreground: false,
                },
            );
            self.add_dependent_to_owners(&uid, &identity, &owners, &mut fx);
        }
        let Some(node) = self.nodes.get_mut(&uid) else {
            return fx;
        };
        node.seen_orphaning = orphaning;
        node.seen_foreground = foreground;
        // Transitions.
        if orphaning && !was_orphaning {
            fx.orphan.push(uid.into());
        } else if foreground && !was_foreground {
            node.deleting_dependents = true;
            fx.delete
                .extend(node.dependents.iter().map(|d| d.to_string()));
            fx.delete.push(uid.into());
        }
        fx
    }

    fn add_dependent_to_owners(
        &mut self,
        uid: &str,
        identity: &Identity,
        owners: &[OwnerReference],
        fx: &mut Effects,
    ) {
        let mut potentially_invalid = false;
        for o in owners {
            match self.nodes.get_mut(o.uid.as_str()) {
                None => {
                    let mut dependents = HashSet::new();
                    dependents.insert(uid.into());
                    self.nodes.insert(
                        o.uid.as_str().into(),
                        Node {
                            identity: Identity::of_owner(o, &identity.namespace),
                            owners: Vec::new(),
                            dependents,
                            being_deleted: false,
                            deleting_dependents: false,
                            observed: false,
                            seen_orphaning: false,
                            seen_foreground: false,
                        },
                    );
                    // Find out whether the owner exists.
                    fx.delete.push(o.uid.clone());
                }
                Some(owner) => {
                    owner.dependents.insert(uid.into());
                    if potentially_invalid {
                        continue;
                    }
                    let owner_namespaced = !owner.identity.namespace.is_empty();
                    if owner_namespaced && owner.identity.namespace != identity.namespace {
                        if owner.observed {
                            fx.invalid.push((identity.clone(), o.clone()));
                        }
                        potentially_invalid = true;
                    } else if !owner.identity.matches(o)
                        || (!owner_namespaced
                            && owner.identity.namespace != identity.namespace
                            && !owner.observed)
                    {
                        potentially_invalid = true;
                    }
                }
            }
        }
        if potentially_invalid {
            fx.delete.push(uid.to_owned());
        }
    }

    /// A watch reported the object `uid` deleted.
    pub(crate) fn observe_deleted(&mut self, uid: &str) -> Effects {
        let Some(node) = self.nodes.get(uid).cloned() else {
            return Effects::default();
        };
        self.remove(&node, true)
    }

    fn remove(&mut self, node: &Node, add_absent: bool) -> Effects {
        let mut fx = Effects::default();
        let uid = &node.identity.uid;
        self.nodes.remove(uid);
        self.nodes.release_spare();
        for o in &node.owners {
            if let Some(owner) = self.nodes.get_mut(o.uid.as_str()) {
                owner.dependents.remove(uid);
                if owner.deleting_dependents {
                    fx.delete.push(o.uid.clone());
                }
            }
        }
        if add_absent && !node.dependents.is_empty() {
            self.add_absent(node.identity.clone());
        }
        fx.delete
            .extend(node.dependents.iter().map(|d| d.to_string()));
        fx
    }

    /// An API call proved `identity` absent (not found, or another uid under its name).
    pub(crate) fn virtual_deleted(&mut self, identity: &Identity) -> Effects {
        let Some(node) = self.nodes.get(&identity.uid).cloned() else {
            return Effects::default();
        };
        if !node.observed {
            self.add_absent(identity.clone());
            return self.remove(&node, false);
        }
        // An observed node is removed only by its watch; dependents that named it by the
        // absent coordinates are examined again.
        let mut fx = Effects::default();
        if node.identity != *identity {
            self.add_absent(identity.clone());
            fx.delete
                .extend(node.dependents.iter().map(|d| d.to_string()));
        }
        fx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn id(kind: &str, ns: &str, name: &str, uid: &str) -> Identity {
        Identity {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: ns.into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    fn owner(of: &Identity, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: of.api_version.to_string(),
            kind: of.kind.to_string(),
            name: of.name.to_string(),
            uid: of.uid.to_string(),
            block_owner_deletion: block.then_some(true),
            ..OwnerReference::default()
        }
    }

    fn meta(owners: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(owners),
            ..ObjectMeta::default()
        }
    }

    fn deleting(finalizer: &str) -> ObjectMeta {
        ObjectMeta {
            deletion_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            finalizers: Some(vec![finalizer.into()]),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn an_unseen_owner_becomes_a_virtual_node_to_verify() {
        let mut g = Graph::default();
        let parent = id("ConfigMap", "a", "p", "u-p");
        let child = id("Secret", "a", "c", "u-c");
        let fx = g.observe(child.clone(), &meta(vec![owner(&parent, false)]));
        assert_eq!(fx.delete, ["u-p"]);
        let s = g.snapshot("u-p").expect("virtual owner");
        assert!(!s.node.observed);
        assert_eq!(s.dependents.len(), 1);
        // Observing the owner with the same coordinates asks nothing more.
        let fx = g.observe(parent, &meta(vec![]));
        assert_eq!(fx, Effects::default());
        assert!(g.snapshot("u-p").expect("owner").node.observed);
    }

    #[test]
    fn deleting_an_owner_queues_its_dependents_and_remembers_it_absent() {
        let mut g = Graph::default();
        let parent = id("ConfigMap", "a", "p", "u-p");
        g.observe(parent.clone(), &meta(vec![]));
        g.observe(
            id("Secret", "a", "c", "u-c"),
            &meta(vec![owner(&parent, false)]),
        );
        let fx = g.observe_deleted("u-p");
        assert_eq!(fx.delete, ["u-c"]);
        assert!(g.is_absent(&parent));
        assert_eq!(g.len(), 1);
    }

    #[test]
    fn foreground_deletion_queues_dependents_and_blocking_ones_show() {
        let mut g = Graph::default();
        let parent = id("ConfigMap", "a", "p", "u-p");
        g.observe(parent.clone(), &meta(vec![]));
        g.observe(
            id("Secret", "a", "b", "u-b"),
            &meta(vec![owner(&parent, true)]),
        );
        g.observe(
            id("Secret", "a", "n", "u-n"),
            &meta(vec![owner(&parent, false)]),
        );
        let fx = g.observe(parent.clone(), &deleting(FOREGROUND));
        let mut queued = fx.delete.clone();
        queued.sort();
        assert_eq!(queued, ["u-b", "u-n", "u-p"]);
        let s = g.snapshot("u-p").expect("owner");
        assert!(s.node.deleting_dependents);
        let blocking: Vec<&str> = s
            .dependents
            .iter()
            .filter(|d| d.blocks_owner)
            .map(|d| &*d.identity.name)
            .collect();
        assert_eq!(blocking, ["b"]);
        // The blocking dependent going away queues the owner again.
        assert_eq!(g.observe_deleted("u-b").delete, ["u-p"]);
        // An update that is not a transition does nothing.
        let fx = g.observe(parent, &deleting(FOREGROUND));
        assert_eq!(fx, Effects::default());
    }

    #[test]
    fn orphan_deletion_goes_to_the_orphan_queue() {
        let mut g = Graph::default();
        let parent = id("ConfigMap", "a", "p", "u-p");
        let fx = g.observe(parent, &deleting(ORPHAN));
        assert_eq!(fx.orphan, ["u-p"]);
        assert!(fx.delete.is_empty());
    }

    #[test]
    fn transitions_are_decided_by_the_previous_observation() {
        let mut g = Graph::default();
        let parent = id("ConfigMap", "a", "p", "u-p");
        // Named by a dependent but never observed: there is no previous observation.
        g.observe(
            id("Secret", "a", "c", "u-c"),
            &meta(vec![owner(&parent, false)]),
        );
        assert_eq!(g.observe(parent.clone(), &deleting(ORPHAN)).orphan, ["u-p"]);
        // Seen again as it was (a relist, or an unrelated update): nothing starts.
        assert!(
            g.observe(parent.clone(), &deleting(ORPHAN))
                .orphan
                .is_empty()
        );
        // Once a watch reported it deleted, seeing it again is a first observation.
        g.observe_deleted("u-p");
        assert_eq!(g.observe(parent, &deleting(ORPHAN)).orphan, ["u-p"]);
    }

    #[test]
    fn removing_a_blocking_reference_queues_the_owner() {
        let mut g = Graph::default();
        let parent = id("ConfigMap", "a", "p", "u-p");
        g.observe(parent.clone(), &meta(vec![]));
        let child = id("Secret", "a", "c", "u-c");
        g.observe(child.clone(), &meta(vec![owner(&parent, true)]));
        let fx = g.observe(child, &meta(vec![]));
        assert_eq!(fx.delete, ["u-p"]);
        assert!(g.snapshot("u-p").expect("owner").dependents.is_empty());
    }

    #[test]
    fn an_owner_in_another_namespace_is_reported_either_way_round() {
        // Owner seen first.
        let mut g = Graph::default();
        let parent = id("ConfigMap", "a", "p", "u-p");
        g.observe(parent.clone(), &meta(vec![]));
        let child = id("Secret", "b", "c", "u-c");
        let fx = g.observe(child.clone(), &meta(vec![owner(&parent, false)]));
        assert_eq!(fx.delete, ["u-c"]);
        assert_eq!(fx.invalid.len(), 1);
        assert_eq!(fx.invalid[0].0, child);
        // Dependent seen first.
        let mut g = Graph::default();
        g.observe(child.clone(), &meta(vec![owner(&parent, false)]));
        let fx = g.observe(parent, &meta(vec![]));
        assert_eq!(fx.delete, ["u-c"]);
        assert_eq!(fx.invalid.len(), 1);
    }

    #[test]
    fn a_cluster_scoped_owner_of_namespaced_dependents_is_valid() {
        let mut g = Graph::default();
        let parent = id("Namespace", "", "p", "u-p");
        g.observe(parent.clone(), &meta(vec![]));
        let fx = g.observe(
            id("Secret", "b", "c", "u-c"),
            &meta(vec![owner(&parent, false)]),
        );
        assert_eq!(fx, Effects::default());
    }

    #[test]
    fn a_virtual_owner_proved_absent_leaves_and_queues_dependents() {
        let mut g = Graph::default();
        let parent = id("ConfigMap", "a", "p", "u-p");
        g.observe(
            id("Secret", "a", "c", "u-c"),
            &meta(vec![owner(&parent, false)]),
        );
        let fx = g.virtual_deleted(&parent);
        assert_eq!(fx.delete, ["u-c"]);
        assert!(g.is_absent(&parent));
        assert!(g.snapshot("u-p").is_none());
    }
}
