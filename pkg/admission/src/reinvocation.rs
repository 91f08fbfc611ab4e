//! Reinvocation (`reinvocationPolicy: IfNeeded`), as upstream's admission chain does it: the
//! mutating plugins run once; when a mutating webhook or policy changed the object after one
//! whose policy is `IfNeeded` ran, they all run a second time, and in that pass the webhooks
//! and policies run again only when they are `IfNeeded` and the object changed since they
//! last saw it (a later one changed it in the first pass, or an earlier plugin did in the
//! second). A [`Reinvocation`] is the state of one [`crate::Chain::mutate`].

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use serde_json::Value;

/// What one plugin remembers across the passes.
#[derive(Debug, Default)]
struct PluginState {
    /// The object as the plugin left it.
    last_output: Option<Value>,
    /// The `IfNeeded` webhooks or bindings it ran (by key) and that may run again.
    previously_invoked: BTreeSet<String>,
    /// Those that run again in the second pass.
    reinvoke: BTreeSet<String>,
}

impl PluginState {
    fn require_reinvoking(&mut self) {
        let previous = std::mem::take(&mut self.previously_invoked);
        self.reinvoke.extend(previous);
    }
}

#[derive(Debug, Default)]
struct State {
    second_pass: bool,
    should_reinvoke: bool,
    plugins: HashMap<&'static str, PluginState>,
}

/// The reinvocation state of one admission of an object.
#[derive(Debug, Default)]
pub struct Reinvocation(Mutex<State>);

impl Reinvocation {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether this is the second pass.
    pub fn is_reinvoke(&self) -> bool {
        self.state().second_pass
    }

    /// Whether a second pass is needed.
    pub(crate) fn should_reinvoke(&self) -> bool {
        self.state().should_reinvoke
    }

    /// Whether a webhook or policy changed the object (what makes a second pass needed).
    pub(crate) fn changed(&self) -> bool {
        self.state().should_reinvoke
    }

    /// Starts the second pass.
    pub(crate) fn start_second_pass(&self) {
        self.state().second_pass = true;
    }

    /// Called by `plugin` before it runs on `object`: in the second pass, an object changed
    /// since the plugin last saw it makes every `IfNeeded` one it ran run again. Whether the
    /// plugin has anything to run in this pass.
    pub fn begin(&self, plugin: &'static str, object: &Value) -> bool {
        let mut state = self.state();
        if !state.second_pass {
            return true;
        }
        let plugin = state.plugins.entry(plugin).or_default();
        if plugin.last_output.as_ref() != Some(object) {
            plugin.require_reinvoking();
        }
        !plugin.reinvoke.is_empty()
    }

    /// Called by `plugin` after it ran: the object as it left it. It is kept only while the
    /// plugin has `IfNeeded` runs not yet queued to run again, the only case its next
    /// [`Reinvocation::begin`] reads it for (most writes meet no webhook or policy: they copy
    /// no object).
    pub fn end(&self, plugin: &'static str, object: &Value) {
        let mut state = self.state();
        let plugin = state.plugins.entry(plugin).or_default();
        plugin.last_output = (!plugin.previously_invoked.is_empty()).then(|| object.clone());
    }

    /// Whether `plugin` runs its webhook or binding `key` in this pass.
    pub fn should_run(&self, plugin: &'static str, key: &str) -> bool {
        let mut state = self.state();
        !state.second_pass
            || state
                .plugins
                .entry(plugin)
                .or_default()
                .reinvoke
                .contains(key)
    }

    /// Called by `plugin` after its webhook or binding `key` ran: whether it `changed` the
    /// object, and whether it may run again (`if_needed`).
    pub fn invoked(&self, plugin: &'static str, key: &str, changed: bool, if_needed: bool) {
        let mut state = self.state();
        if changed {
            state.should_reinvoke = true;
        }
        let plugin = state.plugins.entry(plugin).or_default();
        if changed {
            plugin.require_reinvoking();
        }
        if if_needed {
            plugin.previously_invoked.insert(key.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plugin_runs_again_when_the_object_changed_after_its_if_needed_run() {
        let (before, after) = (json!({"v": 1}), json!({"v": 2}));
        let state = Reinvocation::default();
        // First pass: `a` runs its IfNeeded webhook, `b` runs nothing IfNeeded, `c` changes
        // the object.
        assert!(state.begin("a", &before));
        assert!(state.should_run("a", "hook"));
        state.invoked("a", "hook", false, true);
        state.end("a", &before);
        assert!(state.begin("b", &before));
        state.end("b", &before);
        assert!(state.begin("c", &before));
        state.invoked("c", "mutator", true, false);
        state.end("c", &after);
        assert!(state.should_reinvoke());
        // Second pass: `a` saw the object before `c` changed it, so its webhook runs again;
        // `b` has nothing to run; `c` ran nothing IfNeeded.
        state.start_second_pass();
        assert!(state.is_reinvoke());
        assert!(state.begin("a", &after));
        assert!(state.should_run("a", "hook"));
        assert!(!state.begin("b", &after));
        assert!(!state.begin("c", &after));
    }

    #[test]
    fn a_plugin_that_saw_the_final_object_does_not_run_again() {
        let (before, after) = (json!({"v": 1}), json!({"v": 2}));
        let state = Reinvocation::default();
        // `a` changes the object, then runs an IfNeeded webhook on the changed one; nothing
        // changes it afterwards.
        assert!(state.begin("a", &before));
        state.invoked("a", "mutator", true, false);
        state.invoked("a", "hook", false, true);
        state.end("a", &after);
        assert!(state.should_reinvoke());
        state.start_second_pass();
        assert!(!state.begin("a", &after), "it saw this object last");
        assert!(!state.should_run("a", "hook"));
        // Had another plugin changed it meanwhile, the webhook would run again.
        assert!(state.begin("a", &before));
        assert!(state.should_run("a", "hook"));
    }
}
