//! What the admission policy plugins (ValidatingAdmissionPolicy, MutatingAdmissionPolicy)
//! share: the stored policies that have bindings, compiled once per generation, with their
//! bindings read once per resourceVersion ([`BoundCache`]). The whole bound set is kept while
//! the lists of policies and bindings keep their generation ([`Listed`]), so a write that
//! changes nothing costs no parsing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use genplane_api::util::str_at;

use crate::Listed;

/// A binding as read from storage.
#[derive(Debug)]
pub(crate) struct Binding<S> {
    /// Its name.
    pub(crate) name: String,
    /// Its spec.
    pub(crate) spec: S,
}

/// A binding's spec: it names its policy.
pub(crate) trait BindingSpec: DeserializeOwned + Default + Send + Sync {
    /// The name of the policy it binds.
    fn policy_name(&self) -> &str;
}

/// A policy with its expressions compiled.
pub(crate) trait CompiledPolicy: Send + Sync {
    /// The policy's spec.
    type Spec: DeserializeOwned + Default;
    /// Compiles the policy `name` at `generation`.
    fn compile(name: String, generation: i64, spec: Self::Spec) -> Self;
    /// Its name.
    fn name(&self) -> &str;
    /// The generation it was compiled at.
    fn generation(&self) -> i64;
}

/// The bound policies, compiled, by name, and their bindings by policy name (each list
/// sorted by name).
#[derive(Debug)]
pub(crate) struct Bound<P, B> {
    /// The policies that have bindings.
    pub(crate) policies: Vec<Arc<P>>,
    /// Their bindings, by policy name.
    pub(crate) bindings: HashMap<String, Vec<Arc<Binding<B>>>>,
}

/// The compiled policies and the read bindings, by uid, with what they were made from; and
/// the last [`Bound`] with the generations of the lists it was made from.
#[derive(Debug)]
pub(crate) struct Cache<P, B> {
    pub(crate) policies: HashMap<String, Arc<P>>,
    bindings: HashMap<String, (String, Arc<Binding<B>>)>,
    pub(crate) bound: Option<(Generations, Arc<Bound<P, B>>)>,
}

/// The generations of the lists of bindings and of policies a [`Bound`] was made from.
pub(crate) type Generations = (u64, u64);

impl<P, B> Default for Cache<P, B> {
    fn default() -> Self {
        Self {
            policies: HashMap::new(),
            bindings: HashMap::new(),
            bound: None,
        }
    }
}

/// The cache one policy plugin keeps.
#[derive(Debug)]
pub(crate) struct BoundCache<P, B>(Mutex<Cache<P, B>>);

impl<P, B> Default for BoundCache<P, B> {
    fn default() -> Self {
        Self(Mutex::new(Cache::default()))
    }
}

impl<P: CompiledPolicy, B: BindingSpec> BoundCache<P, B> {
    /// What is kept (for tests).
    pub(crate) fn cache(&self) -> MutexGuard<'_, Cache<P, B>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The bound policies of `policies` and `bindings` (as listed): kept while neither list's
    /// generation changes.
    pub(crate) fn bound(&self, policies: &Listed, bindings: &Listed) -> Arc<Bound<P, B>> {
        let generations = bindings.generation.zip(policies.generation);
        if let Some(generations) = generations
            && let Some((made_from, bound)) = &self.cache().bound
            && *made_from == generations
        {
            return bound.clone();
        }
        let by_policy = self.bindings_of(&bindings.items);
        let bound = Arc::new(Bound {
            policies: self.compiled(&policies.items, &by_policy),
            bindings: by_policy,
        });
        if let Some(generations) = generations {
            self.cache().bound = Some((generations, bound.clone()));
        }
        bound
    }

    /// The stored bindings, read once per resourceVersion, by policy name.
    fn bindings_of(&self, stored: &[Value]) -> HashMap<String, Vec<Arc<Binding<B>>>> {
        let mut cache = self.cache();
        let mut seen = Vec::with_capacity(stored.len());
        let mut by_policy: HashMap<String, Vec<Arc<Binding<B>>>> = HashMap::new();
        for binding in stored {
            let uid = str_at(binding, &["metadata", "uid"]).to_owned();
            let version = str_at(binding, &["metadata", "resourceVersion"]).to_owned();
            let read = match cache.bindings.get(&uid) {
                Some((v, read)) if *v == version => read.clone(),
                _ => {
                    let spec = binding
                        .get("spec")
                        .and_then(|s| B::deserialize(s).ok())
                        .unwrap_or_default();
                    let read = Arc::new(Binding {
                        name: str_at(binding, &["metadata", "name"]).to_owned(),
                        spec,
                    });
                    cache.bindings.insert(uid.clone(), (version, read.clone()));
                    read
                }
            };
            seen.push(uid);
            by_policy
                .entry(read.spec.policy_name().to_owned())
                .or_default()
                .push(read);
        }
        if cache.bindings.len() > seen.len() {
            cache.bindings.retain(|uid, _| seen.contains(uid));
        }
        for bindings in by_policy.values_mut() {
            bindings.sort_by(|a, b| a.name.cmp(&b.name));
        }
        by_policy
    }

    /// The stored policies that have bindings, compiled once per generation, by name.
    fn compiled(
        &self,
        stored: &[Value],
        bound: &HashMap<String, Vec<Arc<Binding<B>>>>,
    ) -> Vec<Arc<P>> {
        let mut cache = self.cache();
        let mut seen = Vec::with_capacity(stored.len());
        let mut compiled = Vec::new();
        for policy in stored {
            let name = str_at(policy, &["metadata", "name"]).to_owned();
            let uid = str_at(policy, &["metadata", "uid"]).to_owned();
            seen.push(uid.clone());
            if !bound.contains_key(&name) {
                continue;
            }
            let generation = policy
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let current = match cache.policies.get(&uid) {
                Some(c) if c.generation() == generation => c.clone(),
                _ => {
                    let spec = policy
                        .get("spec")
                        .and_then(|s| P::Spec::deserialize(s).ok())
                        .unwrap_or_default();
                    let c = Arc::new(P::compile(name, generation, spec));
                    cache.policies.insert(uid, c.clone());
                    c
                }
            };
            compiled.push(current);
        }
        if cache.policies.len() > seen.len() {
            cache.policies.retain(|uid, _| seen.contains(uid));
        }
        compiled.sort_by(|a, b| a.name().cmp(b.name()));
        compiled
    }
}
