//! The generic store: the Kubernetes object lifecycle for any resource, over any storage.
//!
//! It owns what every resource shares: `generateName` (with retries on a taken name), `uid`,
//! `creationTimestamp`, `resourceVersion` preconditions (409), the no-op update short-cut,
//! graceful deletion with finalizers (`deletionTimestamp` set, the object kept until the last
//! finalizer is gone), propagation policies as the `orphan` and `foregroundDeletion`
//! finalizers, `dryRun`, list pagination with continue tokens, label and field selectors, and
//! the mapping of storage errors to API errors (the only place where that happens).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use genplane_apimachinery::errors::{ApiError, Status, StatusDetails};
use genplane_apimachinery::labels;
use genplane_apimachinery::meta::{FINALIZER_FOREGROUND_DELETION, FINALIZER_ORPHAN, rfc3339};
use genplane_apimachinery::resource_version::{self, ReadOptions, Semantics};
use genplane_apimachinery::schema::GroupKind;
use genplane_apimachinery::validation::{self, field};
use genplane_storage::{
    DELETE_BATCH, DeleteRequest, Error as StorageError, KeyValue, ListRequest, Revision, Storage,
    continue_token,
};
use serde_json::Value;

use crate::allocation::{Allocated, Allocations};
use crate::object::{self, meta_str, set_meta_str};
use genplane_apimachinery::fields;

use crate::selection::{Selection, check_fields};
use crate::strategy::Strategy;

/// The largest object the store keeps, in bytes: etcd's default request limit, applied to
/// every backend so that they all accept the same objects.
pub const MAX_OBJECT_BYTES: usize = 1_572_864;

/// How many names `generateName` tries before giving up (upstream tries 8 in all).
const GENERATE_NAME_ATTEMPTS: usize = 8;

/// The message of a 410 for a list at a compacted revision (upstream's words).
const EXPIRED_LIST: &str = "The resourceVersion for the provided list is too old.";

/// The message of a 410 for a continue token whose revision was compacted; the answer carries
/// a token that goes on at the current revision (upstream's words).
const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// What a write asks for besides the object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and answer, but do not store.
    pub dry_run: bool,
    /// Records who changed which fields (`metadata.managedFields`), if anyone does.
    pub fields: Option<FieldTracker>,
    /// Admission of the request's writes (mutating plugins before the strategy prepares and
    /// validates, validating plugins after), if any.
    pub admission: Option<Admission>,
    /// Checks the request's right to write this object, after validation and admission and
    /// before storage (RBAC's escalation prevention), if anything does.
    pub escalation: Option<EscalationCheck>,
    /// Who writes (the request's authenticated user), for the kinds that record it on create
    /// ([`crate::Strategy::prepare_for_create_by`]); `None` for a write on no one's behalf.
    pub user: Option<Arc<genplane_authentication::UserInfo>>,
}

/// The admission chain and the request it admits the writes of (shared, compared by identity).
#[derive(Clone, Debug)]
pub struct Admission {
    /// The enabled plugins.
    pub chain: Arc<genplane_admission::Chain>,
    /// Who asks, and for what.
    pub request: Arc<genplane_admission::Request>,
}

impl Admission {
    pub(crate) fn attributes<'a>(
        &'a self,
        operation: genplane_admission::Operation,
        namespace: &'a str,
        name: &'a str,
        old_object: Option<&'a Value>,
    ) -> genplane_admission::Attributes<'a> {
        genplane_admission::Attributes {
            request: &self.request,
            operation,
            namespace,
            name,
            old_object,
        }
    }
}

impl PartialEq for Admission {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.chain, &other.chain) && Arc::ptr_eq(&self.request, &other.request)
    }
}

impl Eq for Admission {}

/// A check of a write's final object against who asks for it: called with the stored object
/// (`None` on a create) and the validated object about to be stored; an error refuses the
/// write. Not called when an update changes nothing.
pub trait CheckEscalation: Send + Sync {
    /// Refuses or lets through the write of `new` over `old`.
    fn check(&self, old: Option<&Value>, new: &Value) -> Result<(), ApiError>;
}

/// A shared [`CheckEscalation`] (compared by identity).
#[derive(Clone)]
pub struct EscalationCheck(pub Arc<dyn CheckEscalation>);

impl std::fmt::Debug for EscalationCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EscalationCheck")
    }
}

impl PartialEq for EscalationCheck {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for EscalationCheck {}

/// What records field ownership on a write: called with the stored object (`None` on a
/// create) and the object about to be written, after defaulting and the strategy's
/// preparation, before validation; it updates the new object's `metadata.managedFields`.
pub trait TrackFields: Send + Sync {
    /// Updates `new`'s managed fields for a write that replaces `old`.
    fn track(&self, old: Option<&Value>, new: &mut Value);
}

/// A shared [`TrackFields`] (compared by identity).
#[derive(Clone)]
pub struct FieldTracker(pub Arc<dyn TrackFields>);

impl std::fmt::Debug for FieldTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FieldTracker")
    }
}

impl PartialEq for FieldTracker {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for FieldTracker {}

/// How dependents are handled when their owner is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents are left alone (the `orphan` finalizer).
    Orphan,
    /// The owner goes at once; the garbage collector deletes dependents afterwards.
    Background,
    /// Dependents are deleted first (the `foregroundDeletion` finalizer).
    Foreground,
}

/// What a delete asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Delete only if the object still has this uid.
    pub uid: Option<String>,
    /// Delete only if the object is still at this resourceVersion.
    pub resource_version: Option<String>,
    /// What happens to dependents.
    pub propagation: Option<Propagation>,
    /// The grace period asked for: for a kind whose objects terminate gracefully
    /// ([`Strategy::grace_period`]) how long the deletion may take; other kinds ignore it.
    pub grace_period_seconds: Option<i64>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// Admission of the deletes, if any.
    pub admission: Option<Admission>,
}

/// What a list or watch selects.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// The label selector.
    pub labels: labels::Selector,
    /// The field selector.
    pub fields: fields::Selector,
    /// `resourceVersion`, `resourceVersionMatch`, `limit`, `continue` and the watch options.
    pub read: ReadOptions,
}

/// The answer to a list.
#[derive(Clone, Debug, PartialEq)]
pub struct ListResult {
    /// The objects, in key order.
    pub items: Vec<Value>,
    /// The revision the list was read at.
    pub resource_version: String,
    /// The token for the next page, when there is one.
    pub continue_token: Option<String>,
    /// How many objects follow this page, when known (no selectors).
    pub remaining_item_count: Option<i64>,
}

/// One object of a JSON list ([`Store::list_json`]).
#[derive(Clone, Debug)]
pub enum JsonItem {
    /// Written from its stored bytes when it is sent.
    Stored(object::ServedJson),
    /// Encoded already (decoded first: a selector or a served form other than the stored).
    Encoded(bytes::Bytes),
}

impl JsonItem {
    /// The length of the object's JSON.
    pub fn len(&self) -> usize {
        match self {
            JsonItem::Stored(served) => served.len(),
            JsonItem::Encoded(json) => json.len(),
        }
    }

    /// Whether the object's JSON is empty (never: it is an object).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the object's JSON to `out`.
    pub fn write_into(&self, out: &mut Vec<u8>) {
        match self {
            JsonItem::Stored(served) => served.write_into(out),
            JsonItem::Encoded(json) => out.extend_from_slice(json),
        }
    }
}

/// The answer to a create or update.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    /// The object as stored (or as it would be, on a dry run).
    pub object: Value,
    /// Whether the write created the object.
    pub created: bool,
    /// Warnings for the client.
    pub warnings: Vec<String>,
    /// The bytes the write stored, their revision and their layout hint
    /// ([`object::encode_with_layout`]), when it stored the object (not on a dry run, a no-op
    /// or a deletion): [`Store::written_json`] answers with them.
    pub stored: Option<(bytes::Bytes, Revision, u64)>,
}

/// The answer to a delete.
#[derive(Clone, Debug, PartialEq)]
pub enum Deletion {
    /// The object is gone; its last state.
    Gone(Value),
    /// The object is marked for deletion and waits for its finalizers.
    Pending(Value),
}

/// A served object encoded for storage ([`Store::stored`]).
struct Encoded {
    /// The stored bytes.
    bytes: bytes::Bytes,
    /// Their layout hint ([`object::encode_with_layout`]).
    hint: u64,
    /// The stored object, when it is not the served one.
    stored: Option<Value>,
}

/// What deleting one object comes to ([`Store::plan_delete`]).
enum DeleteStep {
    /// Nothing to write (a dry run, or already marked): the answer.
    Answer(Deletion),
    /// Remove the object (as served) from storage: nothing holds it back.
    Remove(Value),
    /// Write the object marked for deletion: finalizers hold it back.
    Mark(Value),
}

/// An object of a collection delete waiting for its batch.
struct Removal {
    /// Its position in the list.
    index: usize,
    namespace: String,
    name: String,
    /// The object as served.
    old: Value,
    /// The revision it was listed at, which the delete compares.
    revision: Revision,
}

/// The last state of a deleted object: as it was, at the revision of its delete.
fn gone_at(mut old: Value, revision: Revision) -> Value {
    set_meta_str(&mut old, "resourceVersion", &revision.to_string());
    old
}

/// The generic store of one resource.
pub struct Store<S: Storage> {
    storage: Arc<S>,
    strategy: Arc<dyn Strategy>,
    /// What writes allocate outside the objects ([`Store::with_allocations`]).
    allocations: Option<Arc<dyn Allocations>>,
    /// The `apiVersion` and `kind` of the served objects when the strategy serves them as
    /// stored ([`Strategy::serves_stored_form`]), and whether they are written in upstream's
    /// field order (a built-in kind, `genplane_api::order`): their JSON is then written from
    /// the stored bytes.
    verbatim: Option<Arc<(String, String, bool)>>,
    /// How reads and watch events were written, shared by the store's clones.
    pub(crate) served: Arc<ServedCounters>,
    /// The objects [`Store::get_shared`] decoded last, shared by the store's clones.
    shared: Arc<SharedReads>,
}

/// How many decoded objects [`Store::get_shared`] keeps (it starts over when full).
const SHARED_READS: usize = 256;

/// Objects decoded for [`Store::get_shared`], by key, with the revision they were decoded at.
type SharedReads = std::sync::Mutex<std::collections::HashMap<String, (i64, Arc<Value>)>>;

/// How many objects a store's JSON reads and watch events wrote from their stored bytes and how
/// many it decoded and serialized again (see [`Store::served_counts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServedCounts {
    /// Objects written as stored, with their resourceVersion put in.
    pub verbatim: u64,
    /// Objects decoded into values and serialized.
    pub decoded: u64,
}

/// The counters behind [`ServedCounts`].
#[derive(Debug, Default)]
pub(crate) struct ServedCounters {
    pub(crate) verbatim: AtomicU64,
    pub(crate) decoded: AtomicU64,
}

impl<S: Storage> std::fmt::Debug for Store<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("resource", &self.strategy.group_resource())
            .finish_non_exhaustive()
    }
}

impl<S: Storage> Clone for Store<S> {
    fn clone(&self) -> Self {
        Self {
            storage: self.storage.clone(),
            strategy: self.strategy.clone(),
            allocations: self.allocations.clone(),
            verbatim: self.verbatim.clone(),
            served: self.served.clone(),
            shared: self.shared.clone(),
        }
    }
}

/// The namespace of a stored object.
fn namespace_of(object: &Value) -> &str {
    meta_str(object, "namespace")
}

fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn now() -> String {
    rfc3339(now_seconds())
}

/// A `metav1.Time` as Unix seconds.
fn parse_time(time: &str) -> Option<i64> {
    genplane_apimachinery::time::parse_time(time).map(|t| t.seconds)
}

/// Five characters from upstream's alphabet for generated names (no vowels, no look-alikes).
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect()
}

/// The 422 of `errors` in the object `name` of `strategy`'s kind.
pub(crate) fn invalid(strategy: &dyn Strategy, name: &str, errors: &field::ErrorList) -> ApiError {
    let kind = strategy.kind();
    Status::invalid(&GroupKind::new(&kind.group, &kind.kind), name, errors).into()
}

/// An object about to be written has the resource's `apiVersion` and `kind` (set when
/// missing): a patch, an apply or a subresource write that changed them is refused (422),
/// as upstream refuses an object that no longer decodes as the resource's type.
pub(crate) fn check_type_meta(
    strategy: &dyn Strategy,
    object: &mut Value,
    name: &str,
) -> Result<(), ApiError> {
    let kind = strategy.kind();
    let api_version = kind.group_version().api_version();
    let mut errors = field::ErrorList::default();
    let Some(fields) = object.as_object_mut() else {
        return Err(Status::bad_request("the body must be a JSON object").into());
    };
    for (field_name, expected) in [("apiVersion", api_version), ("kind", kind.kind)] {
        match fields.get(field_name) {
            None | Some(Value::Null) => {
                fields.insert(field_name.to_owned(), Value::String(expected));
            }
            Some(Value::String(given)) if given.is_empty() => {
                fields.insert(field_name.to_owned(), Value::String(expected));
            }
            Some(Value::String(given)) if *given == expected => {}
            Some(given) => errors.0.push(field::Error::invalid(
                &field::Path::new(field_name),
                given.clone(),
                format!("must be {expected}"),
            )),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(invalid(strategy, name, &errors))
    }
}

/// The namespace the object must be in: the request's. A different one in the body is a
/// 400, as upstream answers it.
pub(crate) fn settle_namespace(
    strategy: &dyn Strategy,
    object: &mut Value,
    namespace: &str,
) -> Result<(), ApiError> {
    if !object.is_object() {
        return Err(Status::bad_request("the body must be a JSON object").into());
    }
    if strategy.namespaced() {
        let given = meta_str(object, "namespace").to_owned();
        if given.is_empty() {
            set_meta_str(object, "namespace", namespace);
        } else if given != namespace {
            return Err(Status::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            )
            .into());
        }
    } else {
        set_meta_str(object, "namespace", "");
    }
    Ok(())
}

/// Fails with upstream's 400 when `object` does not have the name the request's URL gives.
pub(crate) fn check_name(object: &Value, name: &str) -> Result<(), ApiError> {
    let given = meta_str(object, "name");
    if given == name {
        return Ok(());
    }
    Err(Status::bad_request(format!(
        "the name of the object ({given}) does not match the name on the URL ({name})"
    ))
    .into())
}

/// Gives an updated object the stored object's metadata that only the server sets (upstream's
/// `BeforeUpdate`: uid, creationTimestamp and the deletion marks stay as stored) and the
/// revision it is written over.
fn keep_server_fields(new: &mut Value, old: &Value, revision: Revision) {
    let metadata = object::metadata_mut(new);
    for preserved in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        match old.pointer(&format!("/metadata/{preserved}")) {
            Some(value) => metadata.insert(preserved.to_owned(), value.clone()),
            None => metadata.remove(preserved),
        };
    }
    metadata.insert(
        "resourceVersion".to_owned(),
        Value::String(revision.to_string()),
    );
}

/// Removes from a new object the metadata only the server sets (upstream's
/// `FillObjectMetaSystemFields` and `BeforeCreate`): set by a client or an admission plugin,
/// they are not kept.
fn clear_server_fields(object: &mut Value) {
    let metadata = object::metadata_mut(object);
    for server_set in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        metadata.remove(server_set);
    }
}

impl<S: Storage> Store<S> {
    /// A store of the resource `strategy` describes, over `storage`.
    pub fn new(storage: Arc<S>, strategy: Arc<dyn Strategy>) -> Self {
        let verbatim = strategy.serves_stored_form().then(|| {
            let kind = strategy.kind();
            let api_version = kind.group_version().api_version();
            let ordered = genplane_api::order::schema_of(&api_version, &kind.kind).is_some();
            Arc::new((api_version, kind.kind, ordered))
        });
        Self {
            storage,
            strategy,
            allocations: None,
            verbatim,
            served: Arc::default(),
            shared: Arc::default(),
        }
    }

    /// How this store's JSON reads ([`Store::get_json`], [`Store::list_json`]) and the objects
    /// of its watch events were written so far: from their stored bytes, or decoded and
    /// serialized again (a watch event's object once per event, however many watchers).
    pub fn served_counts(&self) -> ServedCounts {
        ServedCounts {
            verbatim: self.served.verbatim.load(Ordering::Relaxed),
            decoded: self.served.decoded.load(Ordering::Relaxed),
        }
    }

    /// The same store, whose writes allocate what their objects hold outside themselves
    /// with `allocations` (see [`crate::allocation`]).
    pub fn with_allocations(mut self, allocations: Arc<dyn Allocations>) -> Self {
        self.allocations = Some(allocations);
        self
    }

    /// Allocates what `new` needs before it is stored (nothing without allocations).
    fn allocate(
        &self,
        new: &mut Value,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<Option<Box<dyn Allocated>>, ApiError> {
        match &self.allocations {
            Some(allocations) => allocations.allocate(new, old, dry_run),
            None => Ok(None),
        }
    }

    /// Gives back what `object`, which has left storage, held.
    fn release(&self, object: &Value) {
        if let Some(allocations) = &self.allocations {
            allocations.release(object);
        }
    }

    /// The resource's strategy.
    pub fn strategy(&self) -> &dyn Strategy {
        &*self.strategy
    }

    /// The strategy, shared.
    pub(crate) fn strategy_arc(&self) -> &Arc<dyn Strategy> {
        &self.strategy
    }

    /// A shared handle on the storage under the store.
    pub fn shared_storage(&self) -> Arc<S> {
        self.storage.clone()
    }

    /// The storage under the store.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    fn key(&self, namespace: &str, name: &str) -> String {
        if self.strategy.namespaced() {
            format!("{}/{namespace}/{name}", self.strategy.key_prefix())
        } else {
            format!("{}/{name}", self.strategy.key_prefix())
        }
    }

    pub(crate) fn list_prefix(&self, namespace: &str) -> String {
        if self.strategy.namespaced() && !namespace.is_empty() {
            format!("{}/{namespace}/", self.strategy.key_prefix())
        } else {
            format!("{}/", self.strategy.key_prefix())
        }
    }

    /// Maps a storage error of `operation` (`create`, `get`, `list`, `update`, `delete`,
    /// `watch`) on `name` to the API error: the one place where that happens. A storage that
    /// did not answer in time is upstream's ServerTimeout naming the operation and this
    /// resource, with a retry hint; an unavailable one a 503 with a retry hint.
    pub(crate) fn storage_error(
        &self,
        error: StorageError,
        operation: &str,
        name: &str,
    ) -> ApiError {
        let resource = self.strategy.group_resource();
        match error {
            StorageError::NotFound { .. } => Status::not_found(&resource, name),
            StorageError::AlreadyExists { .. } => Status::already_exists(&resource, name),
            StorageError::Conflict { .. } => Status::modified(&resource, name),
            StorageError::Compacted {
                requested,
                compacted,
            } => Status::too_old_resource_version(requested, compacted),
            StorageError::FutureRevision { requested, current } => {
                Status::too_large_resource_version(requested, current)
            }
            // The key is the store's business: the answer names what the client sent.
            StorageError::InvalidKey { reason, .. } => Status::bad_request(format!(
                "the name or namespace of the request cannot be used in a storage key ({reason})"
            )),
            StorageError::Timeout => Status::server_timeout(&resource, operation, 2),
            // Not a timeout: the write may have been applied, which a retry would find.
            StorageError::Interrupted(reason) => Status::internal_error(format!(
                "the connection to the storage was lost during the {operation} of {resource} {}, which may or may not have been applied: {reason}",
                genplane_apimachinery::gofmt::quote(name)
            )),
            StorageError::Unavailable(message) => {
                let mut status =
                    Status::service_unavailable(format!("storage is unavailable: {message}"));
                status.details = Some(StatusDetails {
                    retry_after_seconds: Some(1),
                    ..StatusDetails::default()
                });
                status
            }
            other => Status::internal_error(other),
        }
        .into()
    }

    /// Names must be usable as one segment of a storage key and a URL, whatever the resource's
    /// own rules say.
    fn check_path_segments(&self, name: &str, namespace: &str) -> Result<(), ApiError> {
        let mut errors = field::ErrorList::new();
        let metadata = field::Path::new("metadata");
        for (field, value) in [("name", name), ("namespace", namespace)] {
            for message in validation::is_valid_path_segment_name(value) {
                errors.push(field::Error::invalid(
                    &metadata.child(field),
                    value,
                    message,
                ));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(invalid(&*self.strategy, name, &errors))
        }
    }

    pub(crate) async fn served(&self, kv: &KeyValue) -> Result<Value, ApiError> {
        self.served_bytes(&kv.value, kv.mod_revision).await
    }

    /// The served form of stored bytes at `revision` (see [`Store::served_decoded`]), converted
    /// by the resource's conversion webhook first when it has one.
    pub(crate) async fn served_bytes(
        &self,
        value: &[u8],
        revision: Revision,
    ) -> Result<Value, ApiError> {
        self.served_from(object::decode(value, revision)?).await
    }

    /// The served form of one stored object, converted by the resource's conversion webhook
    /// first when it has one.
    async fn served_from(&self, stored: Value) -> Result<Value, ApiError> {
        let stored = match self.strategy.conversion() {
            Some(conversion) => conversion.one_to_served(stored).await?,
            None => stored,
        };
        self.served_decoded(stored)
    }

    /// The served form of the objects of a page read from storage, converted by the
    /// resource's conversion webhook in one call: `None` when the resource has none (each
    /// object is then read with [`Store::served_sync`] when it is taken).
    async fn served_page(&self, page: &[KeyValue]) -> Result<Option<Vec<Value>>, ApiError> {
        let Some(conversion) = self.strategy.conversion() else {
            return Ok(None);
        };
        let stored = page
            .iter()
            .map(|kv| object::decode(&kv.value, kv.mod_revision))
            .collect::<Result<Vec<_>, _>>()?;
        conversion
            .to_served(stored)
            .await?
            .into_iter()
            .map(|object| self.served_decoded(object))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// The served form of `kv` for a resource without a conversion webhook (or `served`, the
    /// object [`Store::served_page`] converted already).
    fn served_sync(&self, kv: &KeyValue, served: Option<Value>) -> Result<Value, ApiError> {
        match served {
            Some(served) => Ok(served),
            None => self.served_decoded(object::decode(&kv.value, kv.mod_revision)?),
        }
    }

    /// The served form of a stored object, decoded (and converted by a webhook where the
    /// resource has one). Its `apiVersion` and `kind` are the resource's, whatever the stored
    /// bytes say (as upstream's decoding into the resource's type sets them): data written
    /// before writes were checked reads as its resource.
    fn served_decoded(&self, stored: Value) -> Result<Value, ApiError> {
        let mut served = self.strategy.served_form(stored)?;
        if let Some(fields) = served.as_object_mut() {
            let kind = self.strategy.kind();
            let api_version = kind.group_version().api_version();
            if fields.get("apiVersion").and_then(Value::as_str) != Some(api_version.as_str()) {
                fields.insert("apiVersion".to_owned(), Value::String(api_version));
            }
            if fields.get("kind").and_then(Value::as_str) != Some(kind.kind.as_str()) {
                fields.insert("kind".to_owned(), Value::String(kind.kind));
            }
        }
        Ok(served)
    }

    /// The served JSON of `stored` at `revision` as its stored bytes, with the resourceVersion
    /// put in when written (see [`object::ServedJson`]), when the strategy serves objects as
    /// stored and the bytes are the resource's; `None` when the object has to be decoded.
    /// `hint` is the [`object::layout_hint`] a cache handed out with the bytes, or 0.
    pub(crate) fn served_verbatim(
        &self,
        stored: &bytes::Bytes,
        revision: Revision,
        hint: u64,
    ) -> Option<object::ServedJson> {
        let (api_version, kind, ordered) = &**self.verbatim.as_ref()?;
        let served = object::ServedJson::of(stored, revision, api_version, kind, *ordered, hint)?;
        self.served.verbatim.fetch_add(1, Ordering::Relaxed);
        Some(served)
    }

    /// The JSON answer to a write (`written`) as the bytes it stored, with the resourceVersion
    /// put in and a final newline, as [`Store::get_json`] answers: `None` when the write stored
    /// nothing or the resource does not serve its objects as stored, and the object has to be
    /// serialized.
    pub fn written_json(&self, written: &Written) -> Option<Vec<u8>> {
        let (stored, revision, hint) = written.stored.as_ref()?;
        let served = self.served_verbatim(stored, *revision, *hint)?;
        let mut out = Vec::new();
        served.write_into(&mut out);
        out.push(b'\n');
        Some(out)
    }

    /// Appends `object`, decoded for a read, as JSON to `out` (in upstream's field order for a
    /// built-in kind, `genplane_api::order`).
    fn write_json(&self, object: &Value, out: &mut Vec<u8>) -> Result<(), ApiError> {
        self.served.decoded.fetch_add(1, Ordering::Relaxed);
        genplane_api::order::write_into(out, object);
        Ok(())
    }

    /// The stored form of a served object: its bytes, with their layout hint, and the stored
    /// object when it is not the served one (converted to the storage version by the
    /// resource's conversion webhook first when it has one).
    async fn stored(&self, object: &Value) -> Result<Encoded, ApiError> {
        if self.strategy.stores_served_form() {
            let (bytes, hint) = object::encode_with_layout(object)?;
            return Ok(Encoded {
                bytes,
                hint,
                stored: None,
            });
        }
        let object = match self.strategy.conversion() {
            Some(conversion) => conversion.one_to_stored(object.clone()).await?,
            None => object.clone(),
        };
        let stored = self.strategy.stored_form(object)?;
        let (bytes, hint) = object::encode_with_layout(&stored)?;
        Ok(Encoded {
            bytes,
            hint,
            stored: Some(stored),
        })
    }

    /// The answer to a write of `object`, stored as `stored` (see [`Store::stored`]): the
    /// object itself when it is stored as served, else the stored object read back as a read
    /// serves it, so that fields the storage version does not keep are not answered (as
    /// upstream answers a write through another version than the storage version).
    async fn answer_of(&self, object: Value, stored: Option<Value>) -> Result<Value, ApiError> {
        match stored {
            Some(stored) => self.served_from(stored).await,
            None => Ok(object),
        }
    }

    /// Creates `object` in `namespace`.
    pub async fn create(
        &self,
        namespace: &str,
        object: Value,
        options: &WriteOptions,
    ) -> Result<Written, ApiError> {
        self.create_in(namespace, None, object, options).await
    }

    /// Creates `object` as `name` in `namespace`, for a request whose URL names the object (a
    /// server-side apply or an update that creates): the object keeps that name whatever
    /// mutating admission answers, as it keeps the request's namespace.
    pub async fn create_named(
        &self,
        namespace: &str,
        name: &str,
        object: Value,
        options: &WriteOptions,
    ) -> Result<Written, ApiError> {
        self.create_in(namespace, Some(name), object, options).await
    }

    /// Creates `object` in `namespace` (as `named`, when the request's URL names it).
    ///
    /// What was authorized is the request's namespace (and name, for a named request): after
    /// mutating admission the object must still be there, or the create is a 400, as
    /// upstream's check after admission answers it. The fields only the server sets (uid,
    /// creationTimestamp, resourceVersion, deletion marks) are set after admission, so no
    /// plugin or webhook can choose them.
    async fn create_in(
        &self,
        namespace: &str,
        named: Option<&str>,
        object: Value,
        options: &WriteOptions,
    ) -> Result<Written, ApiError> {
        // Type-check and normalize first: unknown fields are dropped, as upstream's decoding
        // drops them, whatever fieldValidation said about them.
        let mut object = self.strategy.decode(object)?;
        settle_namespace(&*self.strategy, &mut object, namespace)?;
        // A resourceVersion on a new object was read from somewhere else: upstream refuses it
        // (with a 500; a client's mistake is a 400 here). One that is not a number is ignored,
        // as upstream ignores it.
        if meta_str(&object, "resourceVersion")
            .parse::<u64>()
            .is_ok_and(|rv| rv != 0)
        {
            return Err(Status::bad_request(
                "resourceVersion should not be set on objects to be created",
            )
            .into());
        }
        clear_server_fields(&mut object);
        self.strategy.default(&mut object);
        if let Some(admission) = &options.admission {
            let name = meta_str(&object, "name").to_owned();
            let namespace = if self.strategy.namespaced() {
                namespace
            } else {
                ""
            };
            let attributes = admission.attributes(
                genplane_admission::Operation::Create,
                namespace,
                &name,
                None,
            );
            if admission.chain.mutate(attributes, &mut object).await?
                == genplane_admission::Mutated::Changed
            {
                // What a webhook or policy returned is decoded as a body is: fields the
                // kind does not have are dropped (a custom resource's pruned).
                object = self.strategy.decode(object)?;
            }
            settle_namespace(&*self.strategy, &mut object, namespace)?;
            if let Some(name) = named {
                check_name(&object, name)?;
            }
            clear_server_fields(&mut object);
        }
        set_meta_str(&mut object, "uid", &uuid::Uuid::new_v4().to_string());
        set_meta_str(&mut object, "creationTimestamp", &now());
        self.strategy
            .prepare_for_create_by(&mut object, options.user.as_deref());
        if let Some(tracker) = &options.fields {
            tracker.0.track(None, &mut object);
        }
        let generate =
            meta_str(&object, "name").is_empty() && !meta_str(&object, "generateName").is_empty();
        let attempts = if generate { GENERATE_NAME_ATTEMPTS } else { 1 };
        for attempt in 1..=attempts {
            if generate {
                let name = format!("{}{}", meta_str(&object, "generateName"), random_suffix());
                set_meta_str(&mut object, "name", &name);
            }
            let name = meta_str(&object, "name").to_owned();
            check_type_meta(&*self.strategy, &mut object, &name)?;
            let errors = self.strategy.validate(&object)?;
            if !errors.is_empty() {
                return Err(invalid(&*self.strategy, &name, &errors));
            }
            if let Some(admission) = &options.admission {
                let namespace = meta_str(&object, "namespace");
                let attributes = admission.attributes(
                    genplane_admission::Operation::Create,
                    namespace,
                    &name,
                    None,
                );
                admission.chain.validate(attributes, Some(&object)).await?;
            }
            if let Some(escalation) = &options.escalation {
                escalation.0.check(None, &object)?;
            }
            self.check_path_segments(&name, meta_str(&object, "namespace"))?;
            let allocated = self.allocate(&mut object, None, options.dry_run)?;
            self.strategy.canonicalize(&mut object);
            let warnings = self.strategy.warnings(&object, None);
            let Encoded {
                bytes,
                hint,
                stored,
            } = self.stored(&object).await?;
            if bytes.len() > MAX_OBJECT_BYTES {
                return Err(Status::request_entity_too_large(MAX_OBJECT_BYTES).into());
            }
            let key = self.key(meta_str(&object, "namespace"), &name);
            if options.dry_run {
                return match self.storage.get(&key, None).await {
                    Ok(Some(_)) => {
                        Err(Status::already_exists(&self.strategy.group_resource(), &name).into())
                    }
                    Ok(None) => Ok(Written {
                        object: self.answer_of(object, stored).await?,
                        created: true,
                        warnings,
                        stored: None,
                    }),
                    Err(e) => Err(self.storage_error(e, "create", &name)),
                };
            }
            match self.storage.create(&key, bytes.clone()).await {
                Ok(kv) => {
                    if let Some(allocated) = allocated {
                        allocated.commit();
                    }
                    let mut object = self.answer_of(object, stored).await?;
                    set_meta_str(&mut object, "resourceVersion", &kv.mod_revision.to_string());
                    return Ok(Written {
                        object,
                        created: true,
                        warnings,
                        stored: Some((bytes, kv.mod_revision, hint)),
                    });
                }
                Err(StorageError::AlreadyExists { .. }) if generate && attempt < attempts => {
                    continue;
                }
                Err(e) => return Err(self.storage_error(e, "create", &name)),
            }
        }
        Err(
            Status::already_exists(&self.strategy.group_resource(), meta_str(&object, "name"))
                .into(),
        )
    }

    /// Reads one object. `resource_version` follows the get semantics (unset: current; "0": any;
    /// N: not older than N).
    pub async fn get(
        &self,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<Value, ApiError> {
        let kv = self.read(namespace, name, resource_version).await?;
        self.strategy.view(self.served(&kv).await?)
    }

    /// Reads one object as [`Store::get`] with `resourceVersion=0` does (from the watch cache),
    /// decoded once per revision: the store keeps the objects it decoded last, for code that
    /// reads the same few objects on every request (the params of admission policies).
    pub async fn get_shared(&self, namespace: &str, name: &str) -> Result<Arc<Value>, ApiError> {
        let kv = self.read(namespace, name, Some("0")).await?;
        let shared = || {
            self.shared
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some((revision, object)) = shared().get(&kv.key)
            && *revision == kv.mod_revision
        {
            return Ok(object.clone());
        }
        let object = Arc::new(self.strategy.view(self.served(&kv).await?)?);
        let mut shared = shared();
        if shared.len() >= SHARED_READS {
            shared.clear();
        }
        shared.insert(kv.key.clone(), (kv.mod_revision, object.clone()));
        Ok(object)
    }

    /// Reads one object like [`Store::get`], as the JSON a client is answered with. A resource
    /// served as stored answers with the stored bytes and the resourceVersion put in, not
    /// decoding the object.
    pub async fn get_json(
        &self,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<Vec<u8>, ApiError> {
        let kv = self.read(namespace, name, resource_version).await?;
        let mut out = Vec::new();
        if let Some(served) = self.served_verbatim(&kv.value, kv.mod_revision, kv.hint) {
            served.write_into(&mut out);
        } else {
            self.write_json(&self.strategy.view(self.served(&kv).await?)?, &mut out)?;
        }
        Ok(out)
    }

    /// The stored state of one object, read with the get semantics of `resource_version`.
    async fn read(
        &self,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<KeyValue, ApiError> {
        let semantics = resource_version::get_semantics(resource_version)?;
        if let Semantics::NotOlderThan(wanted) = semantics {
            self.require_revision(wanted, "get").await?;
        }
        let key = self.key(namespace, name);
        let read = match semantics {
            // resourceVersion=0: any state will do, so the watch cache answers from memory.
            Semantics::Any => self.storage.get_any(&key).await,
            _ => self.storage.get(&key, None).await,
        };
        match read {
            Ok(Some(kv)) => Ok(kv),
            Ok(None) => Err(Status::not_found(&self.strategy.group_resource(), name).into()),
            Err(e) => Err(self.storage_error(e, "get", name)),
        }
    }

    /// Reads the current state of one object in the form a patch applies to (see
    /// [`Strategy::patch_view`]).
    pub async fn get_for_patch(&self, namespace: &str, name: &str) -> Result<Value, ApiError> {
        let key = self.key(namespace, name);
        match self.storage.get(&key, None).await {
            Ok(Some(kv)) => self.strategy.patch_view(self.served(&kv).await?),
            Ok(None) => Err(Status::not_found(&self.strategy.group_resource(), name).into()),
            Err(e) => Err(self.storage_error(e, "get", name)),
        }
    }

    /// Fails with upstream's "too large resource version" when the store has not reached
    /// `wanted`.
    pub(crate) async fn require_revision(
        &self,
        wanted: Revision,
        operation: &str,
    ) -> Result<(), ApiError> {
        let current = self
            .storage
            .current_revision()
            .await
            .map_err(|e| self.storage_error(e, operation, ""))?;
        if current < wanted {
            return Err(Status::too_large_resource_version(wanted, current).into());
        }
        Ok(())
    }

    /// The selectable fields of an object.
    fn fields_of(&self, object: &Value) -> BTreeMap<String, String> {
        let mut fields = self.strategy.field_values(object);
        fields.insert("metadata.name".into(), meta_str(object, "name").to_owned());
        fields.insert(
            "metadata.namespace".into(),
            meta_str(object, "namespace").to_owned(),
        );
        fields
    }

    /// Whether the object stored under `key` is selected, when its key alone tells: the
    /// selection is on `metadata.name` and `metadata.namespace` only (as a watch of one object
    /// is), which the key holds. `None` when the object itself must be read.
    pub(crate) fn selected_by_key(&self, selection: &Selection<'_>, key: &str) -> Option<bool> {
        if !selection.labels.is_empty() || selection.fields.is_empty() {
            return None;
        }
        let names_only = selection
            .fields
            .requirements()
            .iter()
            .all(|r| r.field == "metadata.name" || r.field == "metadata.namespace");
        if !names_only {
            return None;
        }
        // The key is this resource's prefix, then `namespace/name` or `name`; neither holds a
        // slash, so both are read from the end (no allocation per event).
        let mut segments = key.rsplit('/');
        let name = segments.next()?;
        let namespace = if self.strategy.namespaced() {
            segments.next()?
        } else {
            ""
        };
        Some(selection.fields.matches(&KeyFields { name, namespace }))
    }

    /// The selection of a list or watch, with its field names checked against the resource.
    pub(crate) fn selection<'a>(
        &self,
        options: &'a ListOptions,
    ) -> Result<Selection<'a>, ApiError> {
        let mut supported = vec!["metadata.name", "metadata.namespace"];
        supported.extend(self.strategy.selectable_fields());
        check_fields(&options.fields, &supported)?;
        Ok(Selection {
            labels: &options.labels,
            fields: &options.fields,
        })
    }

    /// Whether `object` is selected.
    pub(crate) fn selects(&self, selection: &Selection<'_>, object: &Value) -> bool {
        selection.matches(object, || self.fields_of(object))
    }

    /// Lists objects of `namespace` (all namespaces when empty or for cluster-scoped resources).
    pub async fn list(
        &self,
        namespace: &str,
        options: &ListOptions,
    ) -> Result<ListResult, ApiError> {
        let mut items = Vec::new();
        let mut listed = self
            .list_each(namespace, options, |object| {
                items.push(object);
                Ok(())
            })
            .await?;
        listed.items = items;
        Ok(listed)
    }

    /// Lists like [`Store::list`], handing each selected object to `each` as it is read (so
    /// that an answer can be encoded without holding every decoded object); the answer's
    /// `items` is empty.
    pub async fn list_each(
        &self,
        namespace: &str,
        options: &ListOptions,
        each: impl FnMut(Value) -> Result<(), ApiError> + Send,
    ) -> Result<ListResult, ApiError> {
        self.list_each_unknown(namespace, options, |_| false, each)
            .await
    }

    /// Lists like [`Store::list_each`], except the stored objects `known` answers `true` for
    /// by their revision (their `metadata.resourceVersion`): those are neither decoded nor
    /// handed to `each`. A follower that keeps what it made of each object at its revision
    /// passes the unchanged ones by without reading them again. Selectors apply only to the
    /// objects handed out; a resource converted by a webhook has its pages converted all the
    /// same.
    pub async fn list_each_unknown(
        &self,
        namespace: &str,
        options: &ListOptions,
        mut known: impl FnMut(Revision) -> bool + Send,
        mut each: impl FnMut(Value) -> Result<(), ApiError> + Send,
    ) -> Result<ListResult, ApiError> {
        let selection = self.selection(options)?;
        let filtering = !selection.is_everything();
        self.list_stored(namespace, options, filtering, |kv, served| {
            if known(kv.mod_revision) {
                return Ok(true);
            }
            let object = self.served_sync(kv, served)?;
            if !self.selects(&selection, &object) {
                return Ok(false);
            }
            each(object)?;
            Ok(true)
        })
        .await
    }

    /// Lists like [`Store::list`], handing out the selected objects' JSON in `items`; the
    /// answer's `items` is empty. Without a selector, a resource served as stored hands out
    /// each object as its stored bytes (shared with the cache) and where its resourceVersion
    /// goes, neither decoding nor copying it: the answer is written as it is sent.
    pub async fn list_json(
        &self,
        namespace: &str,
        options: &ListOptions,
        items: &mut Vec<JsonItem>,
    ) -> Result<ListResult, ApiError> {
        let selection = self.selection(options)?;
        let filtering = !selection.is_everything();
        self.list_stored(namespace, options, filtering, |kv, served| {
            if !filtering
                && served.is_none()
                && let Some(served) = self.served_verbatim(&kv.value, kv.mod_revision, kv.hint)
            {
                items.push(JsonItem::Stored(served));
                return Ok(true);
            }
            let object = self.served_sync(kv, served)?;
            if !self.selects(&selection, &object) {
                return Ok(false);
            }
            let mut json = Vec::new();
            self.write_json(&object, &mut json)?;
            items.push(JsonItem::Encoded(json.into()));
            Ok(true)
        })
        .await
    }

    /// Reads a list's objects page by page and hands each to `take`, which answers whether it
    /// was selected; `filtering` says whether some may not be (no remaining count then). A
    /// resource with a conversion webhook has each page converted in one call, and `take`
    /// gets each object's served form with it ([`Store::served_page`]); others get `None`.
    async fn list_stored(
        &self,
        namespace: &str,
        options: &ListOptions,
        filtering: bool,
        mut take: impl FnMut(&KeyValue, Option<Value>) -> Result<bool, ApiError> + Send,
    ) -> Result<ListResult, ApiError> {
        let semantics = resource_version::read_semantics(&ReadOptions {
            watch: false,
            ..options.read.clone()
        })?;
        let prefix = self.list_prefix(namespace);
        let limit = options
            .read
            .limit
            .filter(|l| *l > 0)
            .map(|l| usize::try_from(l).unwrap_or(usize::MAX));
        let (mut start, mut revision, mut any) = (None, None, false);
        // Where a continued list goes on from, for the token of its 410 once it expired.
        let mut continued_from = None;
        // The keys from `start` on, when a continued list's token carries their count.
        let mut counted = None;
        match semantics {
            Semantics::Consistent => {}
            Semantics::Any => any = true,
            Semantics::NotOlderThan(wanted) => self.require_revision(wanted, "list").await?,
            Semantics::Exact(at) => revision = Some(at),
            Semantics::Continue(token) => {
                let position = continue_token::decode(&token, &prefix)
                    .map_err(|e| ApiError::from(Status::bad_request(e.to_string())))?;
                continued_from = Some(position.start.clone());
                start = Some(position.start);
                revision = position.revision;
                counted = position.remaining;
            }
        }
        let mut taken = 0usize;
        loop {
            let wanted = limit.map(|l| l - taken);
            let request = ListRequest {
                prefix: prefix.clone(),
                start: start.take(),
                revision,
                limit: wanted,
                // Counted once per list, by its first page: the later pages read the same
                // snapshot, and their tokens carry what is left.
                count: !filtering && limit.is_some() && counted.is_none(),
            };
            let page = if any {
                self.storage.list_any(request).await
            } else {
                self.storage.list(request).await
            };
            let page = page.map_err(|e| match (e, &continued_from) {
                (StorageError::Compacted { .. }, Some(from)) => ApiError::from(
                    Status::expired(INCONSISTENT_CONTINUE)
                        .with_continue(continue_token::encode_latest(from, &prefix)),
                ),
                (StorageError::Compacted { .. }, None) => {
                    ApiError::from(Status::expired(EXPIRED_LIST))
                }
                (other, _) => self.storage_error(other, "list", ""),
            })?;
            any = false;
            revision = Some(page.revision);
            let mut last_key = None;
            let mut served = self.served_page(&page.items).await?.map(Vec::into_iter);
            for kv in &page.items {
                last_key = Some(kv.key.clone());
                if take(kv, served.as_mut().and_then(Iterator::next))? {
                    taken += 1;
                }
            }
            let full = limit.is_some_and(|l| taken >= l);
            match (page.more, last_key) {
                (true, Some(last)) if full => {
                    let at = page.revision;
                    let remaining = page
                        .count
                        .or(counted)
                        .map(|count| count - i64::try_from(page.items.len()).unwrap_or(i64::MAX))
                        .filter(|_| !filtering);
                    let token = match remaining {
                        Some(n) => continue_token::encode_counted(&last, &prefix, at, n),
                        None => continue_token::encode_after(&last, &prefix, at),
                    };
                    return Ok(ListResult {
                        items: Vec::new(),
                        resource_version: at.to_string(),
                        continue_token: Some(token),
                        remaining_item_count: remaining,
                    });
                }
                (true, Some(last)) => start = Some(format!("{last}\0")),
                _ => {
                    return Ok(ListResult {
                        items: Vec::new(),
                        resource_version: page.revision.to_string(),
                        continue_token: None,
                        remaining_item_count: None,
                    });
                }
            }
        }
    }

    /// Replaces an object. A `metadata.resourceVersion` in `object` is a precondition (409 on a
    /// mismatch); without one the update is unconditional and retried until it applies.
    pub async fn update(
        &self,
        namespace: &str,
        name: &str,
        object: Value,
        options: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let mut object = self.strategy.decode(object)?;
        settle_namespace(&*self.strategy, &mut object, namespace)?;
        if meta_str(&object, "name").is_empty() {
            set_meta_str(&mut object, "name", name);
        }
        check_name(&object, name)?;
        let expected = match meta_str(&object, "resourceVersion") {
            "" => None,
            rv => Some(resource_version::parse(rv)?),
        };
        let key = self.key(namespace, name);
        loop {
            let current = self
                .storage
                .get(&key, None)
                .await
                .map_err(|e| self.storage_error(e, "update", name))?;
            let Some(current) = current else {
                if self.strategy.allow_create_on_update() {
                    let mut fresh = object.clone();
                    set_meta_str(&mut fresh, "resourceVersion", "");
                    return self.create_named(namespace, name, fresh, options).await;
                }
                return Err(Status::not_found(&self.strategy.group_resource(), name).into());
            };
            if expected.is_some_and(|e| e != current.mod_revision) {
                return Err(Status::modified(&self.strategy.group_resource(), name).into());
            }
            let old = self.served(&current).await?;
            let uid = meta_str(&object, "uid").to_owned();
            if !uid.is_empty() && uid != meta_str(&old, "uid") {
                return Err(Status::conflict(
                    &self.strategy.group_resource(),
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {}, UID in object meta: {uid}",
                        meta_str(&old, "uid")
                    ),
                )
                .into());
            }
            let mut new = object.clone();
            keep_server_fields(&mut new, &old, current.mod_revision);
            self.strategy.default(&mut new);
            if let Some(admission) = &options.admission {
                let attributes = admission.attributes(
                    genplane_admission::Operation::Update,
                    namespace_of(&old),
                    name,
                    Some(&old),
                );
                if admission.chain.mutate(attributes, &mut new).await?
                    == genplane_admission::Mutated::Changed
                {
                    new = self.strategy.decode(new)?;
                }
                // What was authorized is the stored object: admission moves it nowhere
                // (a renamed one is refused by validation) and sets no server field.
                settle_namespace(&*self.strategy, &mut new, namespace)?;
                keep_server_fields(&mut new, &old, current.mod_revision);
            }
            self.strategy.prepare_for_update(&mut new, &old);
            check_type_meta(&*self.strategy, &mut new, name)?;
            if let Some(tracker) = &options.fields {
                tracker.0.track(Some(&old), &mut new);
            }
            let errors = self.strategy.validate_update(&new, &old)?;
            if !errors.is_empty() {
                return Err(invalid(&*self.strategy, name, &errors));
            }
            self.strategy.canonicalize(&mut new);
            let warnings = self.strategy.warnings(&new, Some(&old));
            if new == old {
                // Nothing changed: no write, the same resourceVersion, as upstream.
                return Ok(Written {
                    object: self.strategy.view(old)?,
                    created: false,
                    warnings,
                    stored: None,
                });
            }
            if let Some(admission) = &options.admission {
                let attributes = admission.attributes(
                    genplane_admission::Operation::Update,
                    namespace_of(&old),
                    name,
                    Some(&old),
                );
                admission.chain.validate(attributes, Some(&new)).await?;
            }
            if let Some(escalation) = &options.escalation {
                escalation.0.check(Some(&old), &new)?;
            }
            if self.is_finished(&new) {
                // The last finalizer of a deleting object was removed: the object goes.
                if options.dry_run {
                    return Ok(Written {
                        object: self.strategy.view(new)?,
                        created: false,
                        warnings,
                        stored: None,
                    });
                }
                return match self.storage.delete(&key, Some(current.mod_revision)).await {
                    Ok(_) => {
                        self.release(&new);
                        Ok(Written {
                            object: self.strategy.view(new)?,
                            created: false,
                            warnings,
                            stored: None,
                        })
                    }
                    Err(StorageError::Conflict { .. }) if expected.is_none() => continue,
                    Err(e) => Err(self.storage_error(e, "update", name)),
                };
            }
            let allocated = self.allocate(&mut new, Some(&old), options.dry_run)?;
            let Encoded {
                bytes,
                hint,
                stored,
            } = self.stored(&new).await?;
            if bytes.len() > MAX_OBJECT_BYTES {
                return Err(Status::request_entity_too_large(MAX_OBJECT_BYTES).into());
            }
            if options.dry_run {
                return Ok(Written {
                    object: self.strategy.view(self.answer_of(new, stored).await?)?,
                    created: false,
                    warnings,
                    stored: None,
                });
            }
            match self
                .storage
                .update(&key, bytes.clone(), current.mod_revision)
                .await
            {
                Ok(kv) => {
                    if let Some(allocated) = allocated {
                        allocated.commit();
                    }
                    let mut new = self.answer_of(new, stored).await?;
                    set_meta_str(&mut new, "resourceVersion", &kv.mod_revision.to_string());
                    return Ok(Written {
                        object: self.strategy.view(new)?,
                        created: false,
                        warnings,
                        stored: Some((bytes, kv.mod_revision, hint)),
                    });
                }
                // Someone wrote in between: an unconditional update tries again.
                Err(StorageError::Conflict { .. } | StorageError::NotFound { .. })
                    if expected.is_none() =>
                {
                    continue;
                }
                Err(e) => return Err(self.storage_error(e, "update", name)),
            }
        }
    }

    /// Whether a deleting object has nothing left that holds it back (a graceful deletion's
    /// period still running holds it back too).
    fn is_finished(&self, object: &Value) -> bool {
        !meta_str(object, "deletionTimestamp").is_empty()
            && object
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                == 0
            && object::finalizers(object).is_empty()
            && !self.strategy.pending_finalization(object)
    }

    /// Deletes an object, or marks it for deletion when finalizers hold it back.
    pub async fn delete(
        &self,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deletion, ApiError> {
        let key = self.key(namespace, name);
        loop {
            let current = self
                .storage
                .get(&key, None)
                .await
                .map_err(|e| self.storage_error(e, "delete", name))?;
            let Some(current) = current else {
                return Err(Status::not_found(&self.strategy.group_resource(), name).into());
            };
            let old = self.served(&current).await?;
            match self.plan_delete(name, old, options).await? {
                DeleteStep::Answer(deletion) => return Ok(deletion),
                DeleteStep::Remove(old) => {
                    return match self.storage.delete(&key, Some(current.mod_revision)).await {
                        Ok(deleted) => {
                            self.release(&old);
                            Ok(Deletion::Gone(gone_at(old, deleted.revision)))
                        }
                        Err(StorageError::Conflict { .. } | StorageError::NotFound { .. })
                            if options.resource_version.is_none() =>
                        {
                            continue;
                        }
                        Err(e) => Err(self.storage_error(e, "delete", name)),
                    };
                }
                DeleteStep::Mark(mut marked) => {
                    match self
                        .storage
                        .update(
                            &key,
                            self.stored(&marked).await?.bytes,
                            current.mod_revision,
                        )
                        .await
                    {
                        Ok(kv) => {
                            set_meta_str(
                                &mut marked,
                                "resourceVersion",
                                &kv.mod_revision.to_string(),
                            );
                            return Ok(Deletion::Pending(marked));
                        }
                        Err(StorageError::Conflict { .. })
                            if options.resource_version.is_none() =>
                        {
                            continue;
                        }
                        Err(e) => return Err(self.storage_error(e, "delete", name)),
                    }
                }
            }
        }
    }

    /// Decides what deleting `old` (the object as served, at its current revision) comes to:
    /// checks the preconditions, asks admission, and applies the propagation policy and the
    /// finalizers. Nothing is written.
    async fn plan_delete(
        &self,
        name: &str,
        old: Value,
        options: &DeleteOptions,
    ) -> Result<DeleteStep, ApiError> {
        let resource = self.strategy.group_resource();
        if let Some(uid) = options
            .uid
            .as_deref()
            .filter(|u| *u != meta_str(&old, "uid"))
        {
            return Err(Status::conflict(
                &resource,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta_str(&old, "uid")
                ),
            )
            .into());
        }
        if let Some(rv) = options
            .resource_version
            .as_deref()
            .filter(|rv| *rv != meta_str(&old, "resourceVersion"))
        {
            return Err(Status::conflict(
                &resource,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta_str(&old, "resourceVersion")
                ),
            )
            .into());
        }
        if let Some(admission) = &options.admission {
            let attributes = admission.attributes(
                genplane_admission::Operation::Delete,
                namespace_of(&old),
                name,
                Some(&old),
            );
            admission.chain.mutate_delete(attributes).await?;
            admission.chain.validate(attributes, None).await?;
        }
        if let Some(marked) = self.graceful_mark(&old, options) {
            return Ok(match marked {
                Some(marked) if !options.dry_run => DeleteStep::Mark(marked),
                Some(marked) => DeleteStep::Answer(Deletion::Pending(marked)),
                None => DeleteStep::Answer(Deletion::Pending(old)),
            });
        }
        let mut finalizers = object::finalizers(&old);
        let wanted = match options.propagation {
            Some(Propagation::Orphan) => Some(FINALIZER_ORPHAN),
            Some(Propagation::Foreground) => Some(FINALIZER_FOREGROUND_DELETION),
            Some(Propagation::Background) | None => None,
        };
        if let Some(finalizer) = wanted {
            // One policy at a time: the newest request's.
            finalizers.retain(|f| f != FINALIZER_ORPHAN && f != FINALIZER_FOREGROUND_DELETION);
            finalizers.push(finalizer.to_owned());
        } else if options.propagation == Some(Propagation::Background) {
            finalizers.retain(|f| f != FINALIZER_ORPHAN && f != FINALIZER_FOREGROUND_DELETION);
        }
        let mut marked = old.clone();
        object::set_finalizers(&mut marked, &finalizers);
        let keeps = !finalizers.is_empty() || self.strategy.pending_finalization(&marked);
        if !keeps {
            if options.dry_run {
                return Ok(DeleteStep::Answer(Deletion::Gone(old)));
            }
            return Ok(DeleteStep::Remove(old));
        }
        if meta_str(&marked, "deletionTimestamp").is_empty() {
            set_meta_str(&mut marked, "deletionTimestamp", &now());
            object::metadata_mut(&mut marked)
                .insert("deletionGracePeriodSeconds".into(), Value::from(0));
        }
        self.strategy.mark_deleting(&mut marked);
        if marked == old || options.dry_run {
            return Ok(DeleteStep::Answer(Deletion::Pending(marked)));
        }
        Ok(DeleteStep::Mark(marked))
    }

    /// The graceful deletion of `old`, when its kind terminates gracefully and the grace
    /// period is above 0 (upstream's `BeforeDelete`): `Some(Some(marked))` marks it with a
    /// `deletionTimestamp` the grace period ahead and `deletionGracePeriodSeconds`, or
    /// shortens a pending one's period (counted from when its deletion was asked);
    /// `Some(None)`: a pending graceful deletion no sooner than asked, nothing changes; `None`:
    /// not graceful, deleted as any object is.
    fn graceful_mark(&self, old: &Value, options: &DeleteOptions) -> Option<Option<Value>> {
        let grace = self
            .strategy
            .grace_period(old, options.grace_period_seconds)
            .filter(|grace| *grace > 0)?;
        let pending = old
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64);
        let deleting = parse_time(meta_str(old, "deletionTimestamp"));
        let deadline = match (deleting, pending) {
            (Some(_), Some(pending)) if grace >= pending => return Some(None),
            (Some(at), Some(pending)) => at - pending + grace,
            // Deleting with no period recorded: held by finalizers only, nothing to wait for.
            (Some(_), None) => return None,
            (None, _) => now_seconds() + grace,
        };
        let mut marked = old.clone();
        set_meta_str(&mut marked, "deletionTimestamp", &rfc3339(deadline));
        object::metadata_mut(&mut marked)
            .insert("deletionGracePeriodSeconds".into(), Value::from(grace));
        Some(Some(marked))
    }

    /// Deletes every selected object of `namespace`; returns what was deleted or marked, in
    /// list order.
    ///
    /// Each object goes through what [`Store::delete`] does (preconditions, admission,
    /// finalizers: an object they hold back is marked, not deleted), but the objects to
    /// remove are removed [`DELETE_BATCH`] at a time with [`Storage::delete_batch`], one
    /// storage commit per batch. An object that changed after it was listed is deleted on its
    /// own, as [`Store::delete`] would; one deleted meanwhile is skipped. On an error, the
    /// objects before the failing one are deleted and the rest are left.
    pub async fn delete_collection(
        &self,
        namespace: &str,
        list: &ListOptions,
        options: &DeleteOptions,
    ) -> Result<Vec<Value>, ApiError> {
        let selected = self.list(namespace, list).await?;
        let mut done: Vec<(usize, Value)> = Vec::with_capacity(selected.items.len());
        let mut batch: Vec<Removal> = Vec::with_capacity(DELETE_BATCH);
        for (index, object) in selected.items.into_iter().enumerate() {
            let name = meta_str(&object, "name").to_owned();
            let namespace = meta_str(&object, "namespace").to_owned();
            let listed = meta_str(&object, "resourceVersion")
                .parse::<Revision>()
                .ok();
            let outcome = match listed {
                // Without a revision to compare, the single delete reads the object itself.
                None => {
                    self.delete_one_of_collection(&namespace, &name, options)
                        .await
                }
                Some(revision) => match self.plan_delete(&name, object, options).await {
                    Err(e) => Err(e),
                    Ok(DeleteStep::Answer(Deletion::Gone(o) | Deletion::Pending(o))) => Ok(Some(o)),
                    Ok(DeleteStep::Remove(old)) => {
                        batch.push(Removal {
                            index,
                            namespace,
                            name,
                            old,
                            revision,
                        });
                        if batch.len() >= DELETE_BATCH {
                            self.remove_batch(std::mem::take(&mut batch), options, &mut done)
                                .await?;
                        }
                        Ok(None)
                    }
                    Ok(DeleteStep::Mark(mut marked)) => {
                        let key = self.key(&namespace, &name);
                        match self
                            .storage
                            .update(&key, self.stored(&marked).await?.bytes, revision)
                            .await
                        {
                            Ok(kv) => {
                                set_meta_str(
                                    &mut marked,
                                    "resourceVersion",
                                    &kv.mod_revision.to_string(),
                                );
                                Ok(Some(marked))
                            }
                            Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {
                                self.delete_one_of_collection(&namespace, &name, options)
                                    .await
                            }
                            Err(e) => Err(self.storage_error(e, "delete", &name)),
                        }
                    }
                },
            };
            match outcome {
                Ok(Some(object)) => done.push((index, object)),
                Ok(None) => {}
                Err(e) => {
                    // What was decided before the failing object still happens.
                    self.remove_batch(batch, options, &mut done).await?;
                    return Err(e);
                }
            }
        }
        self.remove_batch(batch, options, &mut done).await?;
        done.sort_by_key(|(index, _)| *index);
        Ok(done.into_iter().map(|(_, object)| object).collect())
    }

    /// Removes a batch of a collection's objects in one [`Storage::delete_batch`]; an object
    /// that changed or went since it was listed gets a delete of its own.
    async fn remove_batch(
        &self,
        batch: Vec<Removal>,
        options: &DeleteOptions,
        done: &mut Vec<(usize, Value)>,
    ) -> Result<(), ApiError> {
        if batch.is_empty() {
            return Ok(());
        }
        let requests = batch
            .iter()
            .map(|r| DeleteRequest {
                key: self.key(&r.namespace, &r.name),
                expected: Some(r.revision),
            })
            .collect();
        let answers = self.storage.delete_batch(requests).await;
        for (removal, answer) in batch.into_iter().zip(answers) {
            match answer {
                Ok(deleted) => {
                    self.release(&removal.old);
                    done.push((removal.index, gone_at(removal.old, deleted.revision)));
                }
                Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {
                    if let Some(object) = self
                        .delete_one_of_collection(&removal.namespace, &removal.name, options)
                        .await?
                    {
                        done.push((removal.index, object));
                    }
                }
                Err(e) => return Err(self.storage_error(e, "delete", &removal.name)),
            }
        }
        Ok(())
    }

    /// Deletes one object of a collection on its own; `None` when it is already gone.
    async fn delete_one_of_collection(
        &self,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Option<Value>, ApiError> {
        match self.delete(namespace, name, options).await {
            Ok(Deletion::Gone(object) | Deletion::Pending(object)) => Ok(Some(object)),
            // Someone else deleted it meanwhile: that is what was asked.
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The details of a delete answered with a Status, as upstream fills them.
    pub fn deleted_details(&self, object: &Value) -> StatusDetails {
        let resource = self.strategy.group_resource();
        StatusDetails {
            name: meta_str(object, "name").to_owned(),
            group: resource.group,
            kind: resource.resource,
            uid: meta_str(object, "uid").to_owned(),
            ..StatusDetails::default()
        }
    }
}

/// The fields an object's storage key tells: its name and namespace.
struct KeyFields<'a> {
    name: &'a str,
    namespace: &'a str,
}

impl fields::Fields for KeyFields<'_> {
    fn get(&self, field: &str) -> Option<&str> {
        match field {
            "metadata.name" => Some(self.name),
            "metadata.namespace" => Some(self.namespace),
            _ => None,
        }
    }
}
