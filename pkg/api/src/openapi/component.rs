//! Component schemas from k8s-openapi's types, as each kind's catalog entry adds its own.

use schemars::JsonSchema;
use schemars::generate::SchemaGenerator;

/// Adds the schema of `T` (and what it refers to) and returns its component name: a kind's
/// [`crate::resource::ResourceInfo::openapi_schema`].
pub fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> String {
    generator.subschema_for::<T>();
    T::schema_name().into_owned()
}
