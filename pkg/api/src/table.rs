//! Table columns, as kube-apiserver's printers define them for `kubectl get`.
//!
//! The server always prints the wide form: every column, with `priority: 1` marking the ones
//! kubectl shows only with `-o wide`. Each resource module has `COLUMNS` and `row(obj, now)`;
//! the apiserver wraps them in a `meta.k8s.io/v1` Table.

use serde::Serialize;

/// One column of a Table (`meta.k8s.io/v1` TableColumnDefinition; every field is written).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ColumnDefinition {
    /// The column header, e.g. `Name`.
    pub name: &'static str,
    /// The OpenAPI type of the cells: `string`, `integer`, ...
    #[serde(rename = "type")]
    pub type_: &'static str,
    /// An OpenAPI format, e.g. `name` for the column that holds the object's name.
    pub format: &'static str,
    /// What the column shows.
    pub description: &'static str,
    /// 0 for columns always shown, 1 for those shown with `-o wide`.
    pub priority: i32,
}

/// What the `Name` column describes.
pub const NAME_DESCRIPTION: &str = "The object's name: unique among objects of its kind in its namespace (or in the cluster, for cluster-scoped kinds), chosen at creation and never changed.";

/// What the `Age` column describes.
pub const AGE_DESCRIPTION: &str =
    "How long ago the server created the object, from its creationTimestamp.";

/// The `Name` column.
pub const NAME: ColumnDefinition = ColumnDefinition {
    name: "Name",
    type_: "string",
    format: "name",
    description: NAME_DESCRIPTION,
    priority: 0,
};

/// The `Age` column.
pub const AGE: ColumnDefinition = ColumnDefinition {
    name: "Age",
    type_: "string",
    format: "",
    description: AGE_DESCRIPTION,
    priority: 0,
};

/// A string column with a description, shown always (`priority` 0) or with `-o wide` (1).
pub const fn column(
    name: &'static str,
    description: &'static str,
    priority: i32,
) -> ColumnDefinition {
    ColumnDefinition {
        name,
        type_: "string",
        format: "",
        description,
        priority,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn columns_serialize_every_field() {
        let value = serde_json::to_value(column("Data", "d", 1)).unwrap();
        assert_eq!(
            value,
            json!({"name": "Data", "type": "string", "format": "", "description": "d", "priority": 1})
        );
        assert_eq!(serde_json::to_value(NAME).unwrap()["format"], "name");
    }
}
