//! [`Transformed`]: a [`Storage`] decorator that encrypts values on their way to the store and
//! decrypts them on their way back.
//!
//! Writes (`create`, `update`) store the transformed value and hand the caller back the plain
//! one; every read (`get`, `list`, watch events with their previous values, the current value
//! carried by [`Error::Conflict`], the previous value of a delete) is transformed back. A value
//! that cannot be read back (a key no longer listed, tampered data, data moved to another key
//! under `aesgcm`) is an error naming the key, never garbage.
//!
//! A `Transformed` without a transformer passes every call straight through: resources that are
//! not encrypted pay one branch, no copy.

use std::sync::Arc;

use genplane_storage::{
    Bytes, DeleteRequest, Deleted, Error, Event, KeyValue, ListRequest, ListResponse, Result,
    Revision, Storage, Watch, WatchEvent,
};

use crate::transformer::{TransformError, Transformer};

/// A stored value that its transformer could not read back (kube-apiserver's "corrupt object"
/// storage error, with its wording).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "StorageError: corrupt object, Code: 7, Key: {key}, ResourceVersion: {revision}, AdditionalErrorMsg: {source}"
)]
pub struct CorruptObject {
    /// The storage key.
    pub key: String,
    /// The revision of the value, when known (0 otherwise, as upstream).
    pub revision: Revision,
    /// Why it could not be read.
    pub source: TransformError,
}

/// A store whose values pass through a [`Transformer`] (or through nothing).
#[derive(Debug)]
pub struct Transformed<S> {
    store: S,
    transformer: Option<Arc<Transformer>>,
}

impl<S> Transformed<S> {
    /// `store` with its values transformed by `transformer`; `None` stores them as they are.
    pub fn new(store: S, transformer: Option<Arc<Transformer>>) -> Self {
        Self { store, transformer }
    }

    /// `store` with its values stored as they are.
    pub fn plain(store: S) -> Self {
        Self::new(store, None)
    }

    /// The transformer, if values are transformed.
    pub fn transformer(&self) -> Option<&Arc<Transformer>> {
        self.transformer.as_ref()
    }

    /// The decorated store.
    pub fn inner(&self) -> &S {
        &self.store
    }
}

fn corrupt(key: &str, revision: Revision, source: TransformError) -> Error {
    Error::backend(CorruptObject {
        key: key.to_owned(),
        revision,
        source,
    })
}

/// `kv` with its value read back through `t` (a hint of the stored form is not the new
/// value's).
fn read(t: &Transformer, mut kv: KeyValue) -> Result<KeyValue> {
    kv.value = t
        .from_storage(&kv.value, &kv.key)
        .map_err(|e| corrupt(&kv.key, 0, e))?;
    kv.hint = 0;
    Ok(kv)
}

/// An event with its value and previous value read back. A delete's value is empty and stays
/// so.
fn read_event(t: &Transformer, event: &Event) -> Result<Event> {
    let kv = if event.kv.value.is_empty() {
        event.kv.clone()
    } else {
        read(t, event.kv.clone())?
    };
    let prev = event.prev.clone().map(|p| read(t, p)).transpose()?;
    Ok(Event {
        kind: event.kind,
        kv,
        prev,
        memo: Default::default(),
    })
}

/// Reads back the current value a conflict carries; other errors pass.
fn read_error(t: &Transformer, error: Error) -> Error {
    match error {
        Error::Conflict {
            key,
            expected,
            current,
        } => match read(t, *current) {
            Ok(current) => Error::Conflict {
                key,
                expected,
                current: Box::new(current),
            },
            Err(e) => e,
        },
        other => other,
    }
}

/// Forwards `inner`'s events to a new watch, each read back through `t`; progress requests go
/// the other way. A value that cannot be read ends the watch with its error.
fn forward(t: Arc<Transformer>, mut inner: Watch) -> Watch {
    let (watch, mut sender) = Watch::channel();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                next = inner.next() => {
                    let Some(event) = next else { return };
                    let (out, last) = match event {
                        WatchEvent::Event(event) => match read_event(&t, &event) {
                            Ok(e) => (WatchEvent::Event(Arc::new(e)), false),
                            Err(e) => (WatchEvent::Error(e), true),
                        },
                        WatchEvent::Error(e) => (WatchEvent::Error(read_error(&t, e)), true),
                        progress @ WatchEvent::Progress(_) => (progress, false),
                    };
                    if sender.events.send(out).await.is_err() || last {
                        return;
                    }
                }
                request = sender.progress_requests.recv() => {
                    if request.is_none() {
                        return;
                    }
                    inner.request_progress();
                }
            }
        }
    });
    watch
}

impl<S: Storage> Storage for Transformed<S> {
    async fn get(&self, key: &str, revision: Option<Revision>) -> Result<Option<KeyValue>> {
        let found = self.store.get(key, revision).await?;
        match &self.transformer {
            None => Ok(found),
            Some(t) => found.map(|kv| read(t, kv)).transpose(),
        }
    }

    async fn get_any(&self, key: &str) -> Result<Option<KeyValue>> {
        let found = self.store.get_any(key).await?;
        match &self.transformer {
            None => Ok(found),
            Some(t) => found.map(|kv| read(t, kv)).transpose(),
        }
    }

    async fn list(&self, request: ListRequest) -> Result<ListResponse> {
        let mut response = self.store.list(request).await?;
        if let Some(t) = &self.transformer {
            response.items = response
                .items
                .into_iter()
                .map(|kv| read(t, kv))
                .collect::<Result<_>>()?;
        }
        Ok(response)
    }

    async fn list_any(&self, request: ListRequest) -> Result<ListResponse> {
        let mut response = self.store.list_any(request).await?;
        if let Some(t) = &self.transformer {
            response.items = response
                .items
                .into_iter()
                .map(|kv| read(t, kv))
                .collect::<Result<_>>()?;
        }
        Ok(response)
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        let Some(t) = &self.transformer else {
            return self.store.create(key, value).await;
        };
        let stored = t.to_storage(&value, key).map_err(Error::backend)?;
        let mut kv = self.store.create(key, stored).await?;
        kv.value = value;
        Ok(kv)
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<KeyValue> {
        let Some(t) = &self.transformer else {
            return self.store.update(key, value, expected).await;
        };
        let stored = t.to_storage(&value, key).map_err(Error::backend)?;
        match self.store.update(key, stored, expected).await {
            Ok(mut kv) => {
                kv.value = value;
                Ok(kv)
            }
            Err(e) => Err(read_error(t, e)),
        }
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<Deleted> {
        let Some(t) = &self.transformer else {
            return self.store.delete(key, expected).await;
        };
        match self.store.delete(key, expected).await {
            Ok(mut deleted) => {
                deleted.prev = read(t, deleted.prev)?;
                Ok(deleted)
            }
            Err(e) => Err(read_error(t, e)),
        }
    }

    async fn delete_batch(&self, deletes: Vec<DeleteRequest>) -> Vec<Result<Deleted>> {
        let answers = self.store.delete_batch(deletes).await;
        let Some(t) = &self.transformer else {
            return answers;
        };
        answers
            .into_iter()
            .map(|answer| match answer {
                Ok(mut deleted) => {
                    deleted.prev = read(t, deleted.prev)?;
                    Ok(deleted)
                }
                Err(e) => Err(read_error(t, e)),
            })
            .collect()
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watch> {
        let watch = self.store.watch(prefix, after).await?;
        Ok(match &self.transformer {
            None => watch,
            Some(t) => forward(t.clone(), watch),
        })
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.store.current_revision().await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.store.compact(revision).await
    }

    fn compacted_revision(&self) -> Revision {
        self.store.compacted_revision()
    }

    fn watch_proves_progress(&self) -> bool {
        self.store.watch_proves_progress()
    }

    fn knows_current_revision(&self) -> bool {
        self.store.knows_current_revision()
    }
}

#[cfg(test)]
mod tests {
    use genplane_storage::{EventKind, ListRequest};
    use genplane_storage_sqlite::{SqliteConfig, SqliteStore};

    use super::*;

    const K1: &[u8] = b"0123456789abcdef0123456789abcdef";
    const K2: &[u8] = b"fedcba9876543210fedcba9876543210";
    const KEY: &str = "/registry/secrets/default/s1";

    fn gcm(keys: &[(&'static str, &'static [u8])]) -> Option<Arc<Transformer>> {
        Some(Arc::new(
            Transformer::new()
                .with_aesgcm(keys.iter().copied())
                .unwrap(),
        ))
    }

    fn open(dir: &tempfile::TempDir) -> Arc<SqliteStore> {
        Arc::new(SqliteStore::open(&SqliteConfig::new(dir.path().join("db"))).unwrap())
    }

    fn is_sealed(value: &[u8], name: &str) -> bool {
        value.starts_with(format!("k8s:enc:aesgcm:v1:{name}:").as_bytes())
            && !value.windows(6).any(|w| w == b"hunter")
    }

    #[tokio::test]
    async fn the_store_holds_ciphertext_and_callers_see_plain_values() {
        let dir = tempfile::tempdir().unwrap();
        let raw = open(&dir);
        let store = Transformed::new(raw.clone(), gcm(&[("key1", K1)]));
        let created = store.create(KEY, "hunter1".into()).await.unwrap();
        assert_eq!(created.value, "hunter1");
        assert!(is_sealed(
            &raw.get(KEY, None).await.unwrap().unwrap().value,
            "key1"
        ));
        assert_eq!(
            store.get(KEY, None).await.unwrap().unwrap().value,
            "hunter1"
        );
        assert_eq!(store.get_any(KEY).await.unwrap().unwrap().value, "hunter1");
        let listed = store
            .list(ListRequest {
                prefix: "/registry/secrets/".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(listed.items[0].value, "hunter1");

        let mut watch = store
            .watch("/registry/secrets/", created.mod_revision)
            .await
            .unwrap();
        let updated = store
            .update(KEY, "hunter2".into(), created.mod_revision)
            .await
            .unwrap();
        assert_eq!(updated.value, "hunter2");
        let Some(WatchEvent::Event(event)) = watch.next().await else {
            panic!("no event")
        };
        assert_eq!(event.kind, EventKind::Update);
        assert_eq!(event.kv.value, "hunter2");
        assert_eq!(event.prev.as_ref().unwrap().value, "hunter1");

        // A conflict carries the current value, decrypted.
        let Err(Error::Conflict { current, .. }) = store
            .update(KEY, "hunter3".into(), created.mod_revision)
            .await
        else {
            panic!("expected a conflict")
        };
        assert_eq!(current.value, "hunter2");

        watch.request_progress();
        let deleted = store.delete(KEY, None).await.unwrap();
        assert_eq!(deleted.prev.value, "hunter2");
        loop {
            match watch.next().await.unwrap() {
                WatchEvent::Progress(_) => continue,
                WatchEvent::Event(e) => {
                    assert_eq!(e.kind, EventKind::Delete);
                    assert!(e.kv.value.is_empty());
                    assert_eq!(e.prev.as_ref().unwrap().value, "hunter2");
                    break;
                }
                WatchEvent::Error(e) => panic!("{e}"),
            }
        }
    }

    #[tokio::test]
    async fn a_value_without_a_listed_key_is_an_error_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let raw = open(&dir);
        let old = Transformed::new(raw.clone(), gcm(&[("key1", K1)]));
        let created = old.create(KEY, "hunter1".into()).await.unwrap();
        let new = Transformed::new(raw.clone(), gcm(&[("key2", K2)]));
        let err = new.get(KEY, None).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "storage backend error: StorageError: corrupt object, Code: 7, Key: /registry/secrets/default/s1, ResourceVersion: 0, AdditionalErrorMsg: no matching key was found for the provided AES transformer"
        );
        assert!(
            new.list(ListRequest {
                prefix: "/registry/secrets/".into(),
                ..Default::default()
            })
            .await
            .is_err()
        );
        // A watch that meets such a value ends with the error.
        let mut watch = new.watch("/registry/secrets/", 0).await.unwrap();
        assert!(matches!(watch.next().await, Some(WatchEvent::Error(_))));
        assert!(watch.next().await.is_none());
        // The raw value moved to another key does not read under aesgcm (authenticated data).
        let stolen = raw.get(KEY, None).await.unwrap().unwrap().value;
        raw.create("/registry/secrets/default/s2", stolen)
            .await
            .unwrap();
        assert!(old.get("/registry/secrets/default/s2", None).await.is_err());
        assert_eq!(
            old.get(KEY, None).await.unwrap().unwrap().mod_revision,
            created.mod_revision
        );
    }

    #[tokio::test]
    async fn rotation_rewrites_with_the_first_key() {
        let dir = tempfile::tempdir().unwrap();
        let raw = open(&dir);
        let old = Transformed::new(raw.clone(), gcm(&[("key1", K1)]));
        let created = old.create(KEY, "hunter1".into()).await.unwrap();
        let rotated = Transformed::new(raw.clone(), gcm(&[("key2", K2), ("key1", K1)]));
        assert_eq!(
            rotated.get(KEY, None).await.unwrap().unwrap().value,
            "hunter1"
        );
        rotated
            .update(KEY, "hunter1".into(), created.mod_revision)
            .await
            .unwrap();
        assert!(is_sealed(
            &raw.get(KEY, None).await.unwrap().unwrap().value,
            "key2"
        ));
    }

    #[tokio::test]
    async fn without_a_transformer_values_pass_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let raw = open(&dir);
        let store = Transformed::plain(raw.clone());
        assert!(store.transformer().is_none());
        store.create(KEY, "hunter1".into()).await.unwrap();
        assert_eq!(raw.get(KEY, None).await.unwrap().unwrap().value, "hunter1");
        assert_eq!(
            store.get(KEY, None).await.unwrap().unwrap().value,
            "hunter1"
        );
    }
}
