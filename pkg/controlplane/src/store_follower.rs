//! Following a store from inside the API server: a pass over what is stored at start, then
//! another after every change (a burst of changes settles into one pass), re-watching from
//! the last pass's revision when a watch ends. The in-process controllers (CRDs, the status
//! of admission policies) are built on it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::resource_version::ReadOptions;
use genplane_registry::{ListOptions, Store, WatchItem};
use genplane_storage::Storage;

/// Runs `pass` once (its error is returned), then spawns a task that runs it again after
/// every change to `store`'s objects until `stop` completes. `pass` answers the revision it
/// read at; `what` names the objects in warnings.
pub async fn follow<S, P, F>(
    store: Store<S>,
    what: &'static str,
    pass: P,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ApiError>
where
    S: Storage,
    P: Fn() -> F + Send + Sync + 'static,
    F: Future<Output = Result<String, ApiError>> + Send,
{
    let mut revision = pass().await?;
    tokio::spawn(async move {
        tokio::pin!(stop);
        loop {
            let options = ListOptions {
                read: ReadOptions {
                    resource_version: Some(revision.clone()),
                    watch: true,
                    allow_watch_bookmarks: false,
                    ..ReadOptions::default()
                },
                ..ListOptions::default()
            };
            let mut watch = match store.watch("", &options).await {
                Ok(watch) => Some(watch),
                Err(error) => {
                    tracing::warn!(%error, "watching {what}");
                    None
                }
            };
            loop {
                let item = match &mut watch {
                    Some(w) => tokio::select! {
                        () = &mut stop => return,
                        item = w.next() => item,
                    },
                    None => None,
                };
                match item {
                    Some(WatchItem::Event(..)) => {
                        // Let a burst of changes settle into one pass.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        match pass().await {
                            Ok(rv) => revision = rv,
                            Err(error) => {
                                tracing::warn!(%error, "following {what}");
                                break;
                            }
                        }
                    }
                    Some(WatchItem::Bookmark { .. }) => {}
                    Some(WatchItem::Error(_) | WatchItem::Terminated) | None => break,
                }
            }
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
            match pass().await {
                Ok(rv) => revision = rv,
                Err(error) => tracing::warn!(%error, "following {what}"),
            }
        }
    });
    Ok(())
}

/// As [`follow`], and also runs `pass` again each time `wake` completes with `true` (what is
/// served changed, a period passed), until it completes with `false` or `stop` completes.
pub async fn follow_waking<S, P, F, W, WF>(
    store: Store<S>,
    what: &'static str,
    pass: P,
    mut wake: W,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ApiError>
where
    S: Storage,
    P: Fn() -> F + Send + Sync + 'static,
    F: Future<Output = Result<String, ApiError>> + Send,
    W: FnMut() -> WF + Send + 'static,
    WF: Future<Output = bool> + Send,
{
    let pass = Arc::new(pass);
    let (stopped, mut stop_waking) = tokio::sync::watch::channel(false);
    let woken = pass.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop_waking.changed() => return,
                more = wake() => {
                    if !more {
                        return;
                    }
                    if let Err(error) = woken().await {
                        tracing::warn!(%error, "following {what}");
                    }
                }
            }
        }
    });
    follow(store, what, move || pass(), async move {
        stop.await;
        let _ = stopped.send(true);
    })
    .await
}
