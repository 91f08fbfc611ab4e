//! The wire schemas of the meta/v1 types ([`crate::codec::schema`]): object and list metadata,
//! owner references and managed fields, label selectors, conditions, `Status`, `DeleteOptions`,
//! and the `meta.k8s.io` answers (`PartialObjectMetadata`, `Table`). Every kind's schema uses
//! these, each defined once here; [`schema_of`] finds the kinds among them by `apiVersion`
//! and `kind`.

use crate::codec::schema::{Field, Struct, Type};

/// The schema of a meta/v1 kind of `api_version`: `Status` (`v1`), and `PartialObjectMetadata`
/// and `Table` (`meta.k8s.io/v1` and `v1beta1`). Lists are not kinds of their own here.
pub fn schema_of(api_version: &str, kind: &str) -> Option<&'static Struct> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    match (group, version, kind) {
        ("", "v1", "Status") => Some(&STATUS),
        ("meta.k8s.io", "v1" | "v1beta1", "PartialObjectMetadata") => {
            Some(&PARTIAL_OBJECT_METADATA)
        }
        ("meta.k8s.io", "v1" | "v1beta1", "Table") => Some(&TABLE),
        _ => None,
    }
}

/// `metav1.LabelSelectorRequirement`. Go writes `key` and `operator` even when empty (no
/// `omitempty`), so a value read from protobuf is kept, zero or not.
pub static LABEL_SELECTOR_REQUIREMENT: Struct = Struct {
    name: "LabelSelectorRequirement",
    fields: &[
        Field::pointer("key", 1, Type::String),
        Field::pointer("operator", 2, Type::String),
        Field::new("values", 3, Type::List(&Type::String)),
    ],
};

/// `metav1.LabelSelector`.
pub static LABEL_SELECTOR: Struct = Struct {
    name: "LabelSelector",
    fields: &[
        Field::new("matchLabels", 1, Type::Map(&Type::String)),
        Field::new(
            "matchExpressions",
            2,
            Type::List(&Type::Struct(&LABEL_SELECTOR_REQUIREMENT)),
        ),
    ],
};

/// `metav1.ObjectMeta`.
pub static OBJECT_META: Struct = Struct {
    name: "ObjectMeta",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("generateName", 2, Type::String),
        Field::new("namespace", 3, Type::String),
        Field::new("selfLink", 4, Type::String),
        Field::new("uid", 5, Type::String),
        Field::new("resourceVersion", 6, Type::String),
        Field::new("generation", 7, Type::Int64),
        Field::new("creationTimestamp", 8, Type::Time),
        Field::new("deletionTimestamp", 9, Type::Time),
        Field::pointer("deletionGracePeriodSeconds", 10, Type::Int64),
        Field::new("labels", 11, Type::Map(&Type::String)),
        Field::new("annotations", 12, Type::Map(&Type::String)),
        Field::new(
            "ownerReferences",
            13,
            Type::List(&Type::Struct(&OWNER_REFERENCE)),
        ),
        Field::new("finalizers", 14, Type::List(&Type::String)),
        // An empty list is kept for the field manager to read: it resets the managed fields
        // (upstream's `isResetManagedFields`), which are then left out.
        Field::new(
            "managedFields",
            17,
            Type::List(&Type::Struct(&MANAGED_FIELDS_ENTRY)),
        )
        .keep_empty(),
    ],
};

/// `metav1.Condition`.
pub static CONDITION: Struct = Struct {
    name: "Condition",
    fields: &[
        Field::new("type", 1, Type::String),
        Field::new("status", 2, Type::String),
        Field::new("observedGeneration", 3, Type::Int64),
        Field::new("lastTransitionTime", 4, Type::Time),
        Field::new("reason", 5, Type::String),
        Field::new("message", 6, Type::String),
    ],
};

/// `metav1.OwnerReference`.
pub static OWNER_REFERENCE: Struct = Struct {
    name: "OwnerReference",
    fields: &[
        Field::new("apiVersion", 5, Type::String),
        Field::new("kind", 1, Type::String),
        Field::new("name", 3, Type::String),
        Field::new("uid", 4, Type::String),
        Field::pointer("controller", 6, Type::Bool),
        Field::pointer("blockOwnerDeletion", 7, Type::Bool),
    ],
};

/// `metav1.ManagedFieldsEntry`.
pub static MANAGED_FIELDS_ENTRY: Struct = Struct {
    name: "ManagedFieldsEntry",
    fields: &[
        Field::new("manager", 1, Type::String),
        Field::new("operation", 2, Type::String),
        Field::new("apiVersion", 3, Type::String),
        Field::new("time", 4, Type::Time),
        Field::new("fieldsType", 6, Type::String),
        Field::new("fieldsV1", 7, Type::Any),
        Field::new("subresource", 8, Type::String),
    ],
};

/// `metav1.ListMeta`, the `metadata` of lists and of a Status.
pub static LIST_META: Struct = Struct {
    name: "ListMeta",
    fields: &[
        Field::new("selfLink", 1, Type::String),
        Field::new("resourceVersion", 2, Type::String),
        Field::new("continue", 3, Type::String),
        Field::pointer("remainingItemCount", 4, Type::Int64),
    ],
};

/// `metav1.Status`, the body of every error answer.
pub static STATUS: Struct = Struct {
    name: "Status",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&LIST_META)),
        Field::new("status", 2, Type::String),
        Field::new("message", 3, Type::String),
        Field::new("reason", 4, Type::String),
        Field::pointer("details", 5, Type::Struct(&STATUS_DETAILS)),
        Field::new("code", 6, Type::Int32),
    ],
};

/// `metav1.StatusDetails`.
pub static STATUS_DETAILS: Struct = Struct {
    name: "StatusDetails",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("group", 2, Type::String),
        Field::new("kind", 3, Type::String),
        Field::new("uid", 6, Type::String),
        Field::new("causes", 4, Type::List(&Type::Struct(&STATUS_CAUSE))),
        Field::new("retryAfterSeconds", 5, Type::Int32),
    ],
};

/// `metav1.StatusCause` (its Go field `Type` is `reason` in JSON and protobuf).
pub static STATUS_CAUSE: Struct = Struct {
    name: "StatusCause",
    fields: &[
        Field::new("reason", 1, Type::String),
        Field::new("message", 2, Type::String),
        Field::new("field", 3, Type::String),
    ],
};

/// `metav1.DeleteOptions`, the optional body of a DELETE.
pub static DELETE_OPTIONS: Struct = Struct {
    name: "DeleteOptions",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::pointer("gracePeriodSeconds", 1, Type::Int64),
        Field::pointer("preconditions", 2, Type::Struct(&PRECONDITIONS)),
        Field::pointer("orphanDependents", 3, Type::Bool),
        Field::pointer("propagationPolicy", 4, Type::String),
        Field::new("dryRun", 5, Type::List(&Type::String)),
    ],
};

/// `metav1.Preconditions`.
pub static PRECONDITIONS: Struct = Struct {
    name: "Preconditions",
    fields: &[
        Field::pointer("uid", 1, Type::String),
        Field::pointer("resourceVersion", 2, Type::String),
    ],
};

/// `metav1.List`'s fields, the shape of every list: the items are each of the list's item
/// type.
pub static LIST: Struct = Struct {
    name: "List",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&LIST_META)),
        Field::new("items", 2, Type::List(&Type::Any)),
    ],
};

/// `metav1.PartialObjectMetadata`.
pub static PARTIAL_OBJECT_METADATA: Struct = Struct {
    name: "PartialObjectMetadata",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
    ],
};

/// `metav1.Table`.
pub static TABLE: Struct = Struct {
    name: "Table",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&LIST_META)),
        Field::new(
            "columnDefinitions",
            2,
            Type::List(&Type::Struct(&TABLE_COLUMN_DEFINITION)),
        )
        .keep_empty(),
        Field::new("rows", 3, Type::List(&Type::Struct(&TABLE_ROW))).keep_empty(),
    ],
};

/// `metav1.TableColumnDefinition`.
pub static TABLE_COLUMN_DEFINITION: Struct = Struct {
    name: "TableColumnDefinition",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("type", 2, Type::String),
        Field::new("format", 3, Type::String),
        Field::new("description", 4, Type::String),
        Field::new("priority", 5, Type::Int32),
    ],
};

/// `metav1.TableRow`: its `object` is a raw object (written as its own kind).
pub static TABLE_ROW: Struct = Struct {
    name: "TableRow",
    fields: &[
        Field::new("cells", 1, Type::List(&Type::Any)),
        Field::new(
            "conditions",
            2,
            Type::List(&Type::Struct(&TABLE_ROW_CONDITION)),
        ),
        Field::new("object", 3, Type::Any),
    ],
};

/// `metav1.TableRowCondition`.
pub static TABLE_ROW_CONDITION: Struct = Struct {
    name: "TableRowCondition",
    fields: &[
        Field::new("type", 1, Type::String),
        Field::new("status", 2, Type::String),
        Field::new("reason", 3, Type::String),
        Field::new("message", 4, Type::String),
    ],
};
