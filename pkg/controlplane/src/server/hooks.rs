//! Post-start hooks: the named steps a server takes once it listens, as upstream's
//! `AddPostStartHook` (system namespaces, the bootstrap RBAC policy, the CRD and policy-status
//! controllers, the identity Lease, and whatever a program adds: the feature reports of
//! `genplane apiserver`, say).
//!
//! Each hook is a health check `poststarthook/<name>` on `/livez`, `/readyz` and `/healthz`,
//! failing with "not finished" until the hook has returned, as upstream shows them
//! (`[-]poststarthook/rbac/bootstrap-roles failed: not finished`). The hooks run one after the
//! other, in the order they were added (a later one may rely on what an earlier one made, such
//! as the namespaces); a hook that starts something long-running (a controller) starts it and
//! returns. A hook that fails stops the server with its error, as upstream's do. A program
//! adds hooks with [`PostStartHooks::add`] and drops one of the defaults by name with
//! [`PostStartHooks::disable`].

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use genplane_component_base::health::{Health, Kind};
use genplane_component_base::shutdown::Shutdown;

/// What a hook is given.
#[derive(Clone, Debug)]
pub struct HookContext {
    /// The URL the server serves on.
    pub server_url: String,
    /// The data directory (the kubeconfig of each role is there).
    pub data_dir: PathBuf,
    /// The server's shutdown: what a hook starts stops when it triggers.
    pub shutdown: Shutdown,
}

impl HookContext {
    /// The kubeconfig the server's own clients use (`apiserver-loopback.kubeconfig`, user
    /// `system:genplane:apiserver`).
    pub fn loopback_kubeconfig(&self) -> PathBuf {
        self.data_dir.join("apiserver-loopback.kubeconfig")
    }
}

/// A hook's future: its error stops the server.
pub type HookFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// A hook: called once, with the server's context.
pub type Hook = Box<dyn FnOnce(HookContext) -> HookFuture + Send>;

/// Why a hook could not be added.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HookError {
    /// A hook of that name is there already.
    #[error("a post-start hook named {0:?} was added already")]
    Duplicate(String),
}

/// The post-start hooks of a server, in the order they run.
#[derive(Default)]
pub struct PostStartHooks {
    hooks: Vec<(String, Hook)>,
    disabled: Vec<String>,
}

impl std::fmt::Debug for PostStartHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostStartHooks")
            .field("hooks", &self.names())
            .field("disabled", &self.disabled)
            .finish()
    }
}

/// Where a hook is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Pending,
    Done,
    Failed(String),
}

impl PostStartHooks {
    /// Adds the hook `name`, run after those added before it.
    pub fn add<F, Fut>(&mut self, name: &str, hook: F) -> Result<(), HookError>
    where
        F: FnOnce(HookContext) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        self.add_boxed(name, Box::new(move |context| Box::pin(hook(context))))
    }

    /// Adds a hook already boxed.
    pub fn add_boxed(&mut self, name: &str, hook: Hook) -> Result<(), HookError> {
        if self.hooks.iter().any(|(n, _)| n == name) {
            return Err(HookError::Duplicate(name.to_owned()));
        }
        self.hooks.push((name.to_owned(), hook));
        Ok(())
    }

    /// Adds `other`'s hooks after these, and leaves out what either leaves out.
    pub fn append(&mut self, other: PostStartHooks) -> Result<(), HookError> {
        for (name, hook) in other.hooks {
            self.add_boxed(&name, hook)?;
        }
        self.disabled.extend(other.disabled);
        Ok(())
    }

    /// Leaves out the hook `name` (one of the server's own, or one added), whenever it is
    /// added.
    pub fn disable(&mut self, name: &str) {
        self.disabled.push(name.to_owned());
    }

    /// The names of the hooks that will run, in order.
    pub fn names(&self) -> Vec<&str> {
        self.hooks
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| !self.disabled.iter().any(|d| d == n))
            .collect()
    }

    /// Adds a check `poststarthook/<name>` per hook to `health`, and answers the runner.
    pub(crate) fn checked(self, health: &mut Health) -> Runner {
        let mut runs = Vec::new();
        for (name, hook) in self.hooks {
            if self.disabled.contains(&name) {
                continue;
            }
            let state = Arc::new(Mutex::new(State::Pending));
            let seen = state.clone();
            health.add(
                &format!("poststarthook/{name}"),
                Kind::Liveness,
                move || {
                    let state = seen
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .clone();
                    async move {
                        match state {
                            State::Done => Ok(()),
                            State::Pending => Err("not finished".to_owned()),
                            State::Failed(error) => Err(error),
                        }
                    }
                },
            );
            runs.push((name, hook, state));
        }
        Runner { runs }
    }
}

/// The hooks of a running server, each with the state its check reads.
pub(crate) struct Runner {
    runs: Vec<(String, Hook, Arc<Mutex<State>>)>,
}

impl Runner {
    /// Runs every hook in order; the first error is the server's, naming the hook.
    pub(crate) async fn run(self, context: HookContext) -> Result<(), (String, String)> {
        for (name, hook, state) in self.runs {
            let outcome = hook(context.clone()).await;
            let mut state = state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match outcome {
                Ok(()) => {
                    tracing::debug!(hook = %name, "post-start hook finished");
                    *state = State::Done;
                }
                Err(error) => {
                    *state = State::Failed(error.clone());
                    return Err((name, error));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> HookContext {
        HookContext {
            server_url: "https://127.0.0.1:1".to_owned(),
            data_dir: PathBuf::from("/nonexistent"),
            shutdown: Shutdown::new(),
        }
    }

    #[tokio::test]
    async fn hooks_run_in_order_and_are_checks_until_they_finish() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut hooks = PostStartHooks::default();
        for name in ["first", "second", "dropped"] {
            let order = order.clone();
            hooks
                .add(name, move |_| async move {
                    order.lock().unwrap().push(name);
                    Ok(())
                })
                .unwrap();
        }
        assert!(matches!(
            hooks.add("first", |_| async { Ok(()) }),
            Err(HookError::Duplicate(_))
        ));
        hooks.disable("dropped");
        assert_eq!(hooks.names(), ["first", "second"]);
        let shutdown = Shutdown::new();
        let mut health = Health::new(&shutdown);
        let runner = hooks.checked(&mut health);
        let before = health.answer("/readyz", Some("verbose")).await.unwrap();
        assert_eq!(before.status, 500, "{}", before.body);
        assert!(
            before
                .body
                .contains("[-]poststarthook/first failed: reason withheld"),
            "{}",
            before.body
        );
        let one = health
            .answer("/readyz/poststarthook/first", None)
            .await
            .unwrap();
        assert_eq!(one.body, "internal server error: not finished\n");
        assert!(!before.body.contains("dropped"), "{}", before.body);
        runner.run(context()).await.unwrap();
        assert_eq!(*order.lock().unwrap(), ["first", "second"]);
        let after = health.answer("/livez", Some("verbose")).await.unwrap();
        assert_eq!(after.status, 200, "{}", after.body);
        assert!(
            after.body.contains("[+]poststarthook/second ok"),
            "{}",
            after.body
        );
    }

    #[tokio::test]
    async fn a_failing_hook_stops_the_rest_and_says_why() {
        let mut hooks = PostStartHooks::default();
        hooks
            .add("broken", |_| async { Err("no".to_owned()) })
            .unwrap();
        hooks
            .add("never", |_| async { panic!("runs after a failure") })
            .unwrap();
        let shutdown = Shutdown::new();
        let mut health = Health::new(&shutdown);
        let error = hooks.checked(&mut health).run(context()).await.unwrap_err();
        assert_eq!(error, ("broken".to_owned(), "no".to_owned()));
        let answer = health
            .answer("/readyz/poststarthook/broken", None)
            .await
            .unwrap();
        assert_eq!(answer.body, "internal server error: no\n");
    }
}
