//! Object metadata (`metadata` of every object) and its validation.
//!
//! [`ObjectMeta`] reads what clients send, including `null` for absent values, and writes only
//! what is set. [`validate_object_meta`] checks a new object's metadata,
//! [`validate_object_meta_update`] what an update may change. [`schemas`] holds the wire
//! schemas of the meta/v1 types (`ObjectMeta`, `ListMeta`, `Status`, `LabelSelector`, ...) that
//! the codecs of [`crate::codec`] read and write them with.

pub mod schemas;

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::schema::GroupVersion;
use crate::validation::field::{Error, ErrorList, Path};
use crate::validation::{self, NameValidator};

/// The field `name` of an object's `metadata`, read without building a JSON pointer
/// (`Value::pointer` allocates twice per step: this is on every write's path).
pub fn field<'a>(object: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    object.get("metadata")?.get(name)
}

/// Reads `null` as the default value, as Kubernetes does for optional fields.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// A reference from a dependent to its owner, for garbage collection.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// The owner's apiVersion.
    #[serde(default, deserialize_with = "null_as_default")]
    pub api_version: String,
    /// The owner's kind.
    #[serde(default, deserialize_with = "null_as_default")]
    pub kind: String,
    /// The owner's name.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// The owner's uid.
    #[serde(default, deserialize_with = "null_as_default")]
    pub uid: String,
    /// Whether the owner is the managing controller (at most one owner may be).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// Whether the owner's foreground deletion waits for this dependent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
}

/// `metadata` of an object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// The name, unique in its namespace and resource.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    /// A prefix the server completes with a random suffix when `name` is empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub generate_name: String,
    /// The namespace, for namespaced resources.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub namespace: String,
    /// The unique id the server assigns at creation.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub uid: String,
    /// The version of this state of the object.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub resource_version: String,
    /// How many times the desired state changed, for resources that track it.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "is_zero"
    )]
    pub generation: i64,
    /// When the object was created (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// When deletion was requested (RFC 3339); the object stays until its finalizers are gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    /// The grace period of the pending deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    /// Labels: identifying key/value pairs that selectors match.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub labels: BTreeMap<String, String>,
    /// Annotations: non-identifying key/value pairs.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub annotations: BTreeMap<String, String>,
    /// The objects this one depends on.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub owner_references: Vec<OwnerReference>,
    /// What must happen before the object may be removed.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub finalizers: Vec<String>,
    /// Field ownership for server-side apply, kept as written.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub managed_fields: Vec<serde_json::Value>,
}

/// The finalizer that deletes an object's dependents before the object (foreground deletion).
pub const FINALIZER_FOREGROUND_DELETION: &str = "foregroundDeletion";
/// The finalizer that orphans an object's dependents.
pub const FINALIZER_ORPHAN: &str = "orphan";
/// Finalizer names that need no domain prefix.
const STANDARD_FINALIZERS: &[&str] = &[
    "kubernetes",
    FINALIZER_ORPHAN,
    FINALIZER_FOREGROUND_DELETION,
];

/// Kinds that may not own other objects.
const BANNED_OWNERS: &[(&str, &str)] = &[("v1", "Event")];

/// Validates a new object's metadata. `namespaced` says whether the resource lives in
/// namespaces; `name` checks names and `generateName` prefixes.
pub fn validate_object_meta(
    meta: &ObjectMeta,
    namespaced: bool,
    name: NameValidator,
    path: &Path,
) -> ErrorList {
    let mut errors = ErrorList::new();
    if !meta.generate_name.is_empty() {
        for message in name(&meta.generate_name, true) {
            errors.push(Error::invalid(
                &path.child("generateName"),
                meta.generate_name.as_str(),
                message,
            ));
        }
    }
    if meta.name.is_empty() {
        if meta.generate_name.is_empty() {
            errors.push(Error::required(
                &path.child("name"),
                "name or generateName is required",
            ));
        }
    } else {
        for message in name(&meta.name, false) {
            errors.push(Error::invalid(
                &path.child("name"),
                meta.name.as_str(),
                message,
            ));
        }
    }
    if namespaced {
        if meta.namespace.is_empty() {
            errors.push(Error::required(&path.child("namespace"), ""));
        } else {
            for message in validation::is_dns1123_label(&meta.namespace) {
                errors.push(Error::invalid(
                    &path.child("namespace"),
                    meta.namespace.as_str(),
                    message,
                ));
            }
        }
    } else if !meta.namespace.is_empty() {
        errors.push(Error::forbidden(
            &path.child("namespace"),
            "not allowed on this type",
        ));
    }
    errors.extend(validate_common(meta, path));
    errors
}

/// What create and update both check: generation, labels, annotations, owners, finalizers.
fn validate_common(meta: &ObjectMeta, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if meta.generation < 0 {
        errors.push(Error::invalid(
            &path.child("generation"),
            meta.generation,
            "must be greater than or equal to 0",
        ));
    }
    errors.extend(validation::validate_labels(
        &meta.labels,
        &path.child("labels"),
    ));
    errors.extend(validation::validate_annotations(
        &meta.annotations,
        &path.child("annotations"),
    ));
    errors.extend(validate_owner_references(
        &meta.owner_references,
        &path.child("ownerReferences"),
    ));
    errors.extend(validate_finalizers(
        &meta.finalizers,
        &path.child("finalizers"),
    ));
    errors
}

/// Validates owner references: complete, not to banned kinds, at most one controller.
pub fn validate_owner_references(owners: &[OwnerReference], path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let mut controllers = Vec::new();
    for owner in owners {
        let value = || serde_json::to_value(owner).unwrap_or_default();
        match GroupVersion::parse(&owner.api_version) {
            None if owner.api_version.is_empty() => {
                errors.push(Error::invalid(
                    &path.child("apiVersion"),
                    owner.api_version.as_str(),
                    "version must not be empty",
                ));
            }
            None => errors.push(Error::invalid(
                &path.child("apiVersion"),
                owner.api_version.as_str(),
                "must be a valid API version, e.g. v1 or apps/v1",
            )),
            Some(_) => {}
        }
        if owner.kind.is_empty() {
            errors.push(Error::invalid(
                &path.child("kind"),
                owner.kind.as_str(),
                "kind must not be empty",
            ));
        }
        if owner.name.is_empty() {
            errors.push(Error::invalid(
                &path.child("name"),
                owner.name.as_str(),
                "name must not be empty",
            ));
        }
        if owner.uid.is_empty() {
            errors.push(Error::invalid(
                &path.child("uid"),
                owner.uid.as_str(),
                "uid must not be empty",
            ));
        }
        if BANNED_OWNERS
            .iter()
            .any(|(api_version, kind)| owner.api_version == *api_version && owner.kind == *kind)
        {
            errors.push(Error::invalid(
                path,
                value(),
                format!(
                    "{}, Kind={} is disallowed from being an owner",
                    owner.api_version, owner.kind
                ),
            ));
        }
        if owner.controller == Some(true) {
            controllers.push(format!("{}/{}", owner.kind, owner.name));
        }
    }
    if controllers.len() > 1 {
        let value = serde_json::to_value(owners).unwrap_or_default();
        errors.push(Error::invalid(
            path,
            value,
            format!("Only one reference can have Controller set to true. Found \"true\" in references for {}", controllers.join(" and ")),
        ));
    }
    errors
}

/// Validates finalizer names: qualified names, and not both orphan and foregroundDeletion.
pub fn validate_finalizers(finalizers: &[String], path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for (i, finalizer) in finalizers.iter().enumerate() {
        for message in validation::is_qualified_name(finalizer) {
            errors.push(Error::invalid(&path.index(i), finalizer.as_str(), message));
        }
    }
    let has = |name: &str| finalizers.iter().any(|f| f == name);
    if has(FINALIZER_ORPHAN) && has(FINALIZER_FOREGROUND_DELETION) {
        errors.push(Error::invalid(
            path,
            serde_json::to_value(finalizers).unwrap_or_default(),
            format!("finalizer {FINALIZER_ORPHAN} and {FINALIZER_FOREGROUND_DELETION} cannot be both set"),
        ));
    }
    errors
}

/// Warnings for finalizer names that are neither standard nor domain-qualified, as upstream
/// warns (it does not refuse them).
pub fn finalizer_warnings(finalizers: &[String], path: &Path) -> Vec<String> {
    finalizers
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.contains('/') && !STANDARD_FINALIZERS.contains(&f.as_str()))
        .map(|(i, f)| format!("{}: {}: prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers", path.index(i), crate::gofmt::Quoted(f)))
        .collect()
}

/// Validates what an update changed in the metadata: name, namespace, uid and creation time are
/// immutable, the deletion fields change only through deletion, and no finalizer may be added
/// once deletion began. The new metadata's labels, annotations, owners and finalizers are
/// validated as on create.
pub fn validate_object_meta_update(new: &ObjectMeta, old: &ObjectMeta, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let immutable = |errors: &mut ErrorList, field: &str, new: &str, old: &str| {
        if new != old {
            errors.push(Error::invalid(
                &path.child(field),
                new,
                "field is immutable",
            ));
        }
    };
    immutable(&mut errors, "name", &new.name, &old.name);
    immutable(&mut errors, "namespace", &new.namespace, &old.namespace);
    immutable(&mut errors, "uid", &new.uid, &old.uid);
    if new.creation_timestamp != old.creation_timestamp {
        let value = new.creation_timestamp.clone().unwrap_or_default();
        errors.push(Error::invalid(
            &path.child("creationTimestamp"),
            value,
            "field is immutable",
        ));
    }
    if new.deletion_timestamp != old.deletion_timestamp {
        let value = new.deletion_timestamp.clone().unwrap_or_default();
        errors.push(Error::invalid(
            &path.child("deletionTimestamp"),
            value,
            "field is immutable; may only be changed via deletion",
        ));
    }
    if new.deletion_grace_period_seconds != old.deletion_grace_period_seconds {
        let value = serde_json::to_value(new.deletion_grace_period_seconds).unwrap_or_default();
        errors.push(Error::invalid(
            &path.child("deletionGracePeriodSeconds"),
            value,
            "field is immutable; may only be changed via deletion",
        ));
    }
    if old.deletion_timestamp.is_some() {
        let added: Vec<&String> = new
            .finalizers
            .iter()
            .filter(|f| !old.finalizers.contains(f))
            .collect();
        if !added.is_empty() {
            errors.push(Error::forbidden(
                &path.child("finalizers"),
                format!("no new finalizers can be added if the object is being deleted, found new finalizers {}", crate::gofmt::quote_list(&added)),
            ));
        }
    }
    errors.extend(validate_common(new, path));
    errors
}

/// Formats seconds since the Unix epoch as an RFC 3339 UTC timestamp with second precision,
/// as Kubernetes writes `creationTimestamp`: `2026-11-22T03:40:00Z`.
pub fn rfc3339(unix_seconds: i64) -> String {
    let days = unix_seconds.div_euclid(86_400);
    let secs = unix_seconds.rem_euclid(86_400);
    // Days to a civil date (proleptic Gregorian), after Howard Hinnant's algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    if !(0..=9999).contains(&year) {
        return format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        );
    }
    // the common case by hand: several timestamps are written on every write
    let mut out = String::with_capacity(20);
    push_digits(&mut out, year, 4);
    for (separator, value) in [
        ('-', month),
        ('-', day),
        ('T', secs / 3600),
        (':', secs / 60 % 60),
        (':', secs % 60),
    ] {
        out.push(separator);
        push_digits(&mut out, value, 2);
    }
    out.push('Z');
    out
}

/// Appends the `width` last decimal digits of `value` (not negative).
fn push_digits(out: &mut String, value: i64, width: u32) {
    for place in (0..width).rev() {
        let digit = (value / 10_i64.pow(place) % 10) as u8;
        out.push(char::from(b'0' + digit));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::{name_is_dns_label, name_is_dns_subdomain};
    use serde_json::json;

    fn meta(value: serde_json::Value) -> ObjectMeta {
        serde_json::from_value(value).unwrap()
    }

    fn fields(errors: &ErrorList) -> Vec<String> {
        errors
            .iter()
            .map(|e| format!("{} {}", e.field, e.kind.reason()))
            .collect()
    }

    #[test]
    fn reads_nulls_and_writes_only_what_is_set() {
        let m = meta(
            json!({"name": "a", "labels": null, "annotations": {"x": "y"}, "finalizers": null, "generation": null, "uid": null}),
        );
        assert_eq!(m.name, "a");
        assert!(m.labels.is_empty());
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!({"name": "a", "annotations": {"x": "y"}})
        );
    }

    #[test]
    fn create_validation_reports_every_problem() {
        let path = Path::new("metadata");
        let ok =
            meta(json!({"name": "settings", "namespace": "default", "labels": {"app": "web"}}));
        assert!(validate_object_meta(&ok, true, name_is_dns_subdomain, &path).is_empty());
        let generated = meta(json!({"generateName": "web-", "namespace": "default"}));
        assert!(validate_object_meta(&generated, true, name_is_dns_subdomain, &path).is_empty());

        let bad = meta(json!({
            "name": "Bad_Name", "labels": {"bad key": "v"}, "generation": -1,
            "finalizers": ["orphan", "foregroundDeletion", "bad finalizer"],
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "1", "controller": true},
                {"apiVersion": "", "kind": "", "name": "", "uid": "", "controller": true}
            ]
        }));
        let errors = validate_object_meta(&bad, true, name_is_dns_subdomain, &path);
        assert_eq!(
            fields(&errors),
            [
                "metadata.name FieldValueInvalid",
                "metadata.namespace FieldValueRequired",
                "metadata.generation FieldValueInvalid",
                "metadata.labels FieldValueInvalid",
                "metadata.ownerReferences.apiVersion FieldValueInvalid",
                "metadata.ownerReferences.kind FieldValueInvalid",
                "metadata.ownerReferences.name FieldValueInvalid",
                "metadata.ownerReferences.uid FieldValueInvalid",
                "metadata.ownerReferences FieldValueInvalid",
                "metadata.finalizers[2] FieldValueInvalid",
                "metadata.finalizers FieldValueInvalid",
            ]
        );
        assert!(errors.to_string().contains("Only one reference can have Controller set to true. Found \"true\" in references for ConfigMap/a and /"));
        let missing = validate_object_meta(&ObjectMeta::default(), false, name_is_dns_label, &path);
        assert_eq!(
            missing.to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
        let namespaced_cluster_object = meta(json!({"name": "n", "namespace": "default"}));
        assert_eq!(
            fields(&validate_object_meta(
                &namespaced_cluster_object,
                false,
                name_is_dns_label,
                &path
            )),
            ["metadata.namespace FieldValueForbidden"]
        );
        let event_owner = meta(
            json!({"name": "n", "ownerReferences": [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "1"}]}),
        );
        assert!(
            validate_object_meta(&event_owner, false, name_is_dns_label, &path)
                .to_string()
                .contains("disallowed from being an owner")
        );
    }

    #[test]
    fn update_validation_protects_identity_and_deletion() {
        let path = Path::new("metadata");
        let old = meta(
            json!({"name": "a", "namespace": "ns", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["example.com/f"]}),
        );
        let mut new = old.clone();
        new.labels.insert("app".into(), "web".into());
        assert!(
            validate_object_meta_update(&new, &old, &path).is_empty(),
            "labels may change"
        );
        new.name = "b".into();
        new.uid = "u2".into();
        new.deletion_timestamp = Some("2026-01-02T00:00:00Z".into());
        let errors = validate_object_meta_update(&new, &old, &path);
        assert_eq!(
            fields(&errors),
            [
                "metadata.name FieldValueInvalid",
                "metadata.uid FieldValueInvalid",
                "metadata.deletionTimestamp FieldValueInvalid"
            ]
        );
        assert!(
            errors
                .to_string()
                .contains("metadata.name: Invalid value: \"b\": field is immutable")
        );

        let mut deleting = old.clone();
        deleting.deletion_timestamp = Some("2026-01-02T00:00:00Z".into());
        let mut more = deleting.clone();
        more.finalizers.push("example.com/new".into());
        let errors = validate_object_meta_update(&more, &deleting, &path);
        assert!(
            errors
                .to_string()
                .contains("no new finalizers can be added if the object is being deleted"),
            "{errors}"
        );
        let mut fewer = deleting.clone();
        fewer.finalizers.clear();
        assert!(
            validate_object_meta_update(&fewer, &deleting, &path).is_empty(),
            "removing finalizers is how deletion completes"
        );
    }

    #[test]
    fn finalizer_warnings_flag_unqualified_names() {
        let warnings = finalizer_warnings(
            &["kubernetes".into(), "example.com/ok".into(), "mine".into()],
            &Path::new("metadata").child("finalizers"),
        );
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("metadata.finalizers[2]: \"mine\""));
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_318_800), "2026-11-22T03:40:00Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
    }
}
