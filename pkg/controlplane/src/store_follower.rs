//! Following a store from inside the API server: a pass over what is stored at start, then
//! another after every change (a burst of changes settles into one pass), re-watching from
//! the last pass's revision when a watch ends. The in-process controllers (CRDs, the status
//! of admission policies, APIServices, the priority-and-fairness configuration) are built on
//! it, and share how they write a condition ([`write_condition`]) and tell a lost race
//! ([`raced`]).

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

/// Whether a controller's write lost a race with another writer (the object went, 404, or
/// changed, 409): the next pass sees the winner's write.
pub fn raced(error: &ApiError) -> bool {
    matches!(error.code, 404 | 409)
}

/// Writes `condition` into `object`'s `status.conditions` through `status` (the `status`
/// subresource's store) when its condition of that type says something else
/// ([`genplane_api::util::with_condition`]: the transition time moves only with the status);
/// a lost race is left to the next pass.
pub async fn write_condition<S: Storage>(
    status: &Store<S>,
    object: &serde_json::Value,
    condition: serde_json::Value,
) -> Result<(), ApiError> {
    let Some(updated) =
        genplane_api::util::with_condition(object, condition, &crate::now_rfc3339())
    else {
        return Ok(());
    };
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
    };
    match status
        .update(
            text("/metadata/namespace"),
            text("/metadata/name"),
            updated,
            &genplane_registry::WriteOptions::default(),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(error) if raced(&error) => Ok(()),
        Err(error) => Err(error),
    }
}
