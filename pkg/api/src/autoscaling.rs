//! `autoscaling/v1` Scale: the body of a `scale` subresource (a custom resource's, when its
//! CRD version declares `subresources.scale`).
//!
//! Only the shape lives here (for decoding and `fieldValidation`); what a Scale reads from and
//! writes to a custom resource is in the registry's `ScaleStrategy`.

use genplane_apimachinery::errors::ApiError;
use serde_json::Value;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::meta::schemas::OBJECT_META;

/// The kind.
pub const KIND: &str = "Scale";
/// The group.
pub const GROUP: &str = "autoscaling";
/// The version.
pub const VERSION: &str = "v1";
/// The API version.
pub const API_VERSION: &str = "autoscaling/v1";

static SCALE_SPEC: Struct = Struct {
    name: "ScaleSpec",
    fields: &[Field::new("replicas", 1, Type::Int32)],
};

static SCALE_STATUS: Struct = Struct {
    name: "ScaleStatus",
    fields: &[
        Field::new("replicas", 1, Type::Int32),
        Field::new("selector", 2, Type::String),
    ],
};

/// The shape of an autoscaling/v1 Scale.
pub static SCHEMA: Struct = Struct {
    name: "Scale",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SCALE_SPEC)),
        Field::new("status", 3, Type::Struct(&SCALE_STATUS)),
    ],
};

/// Type-checks and normalizes a Scale (400 BadRequest, in upstream's words, on a field of the
/// wrong type, e.g. `spec.replicas` that is not an int32).
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, VERSION))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_scale_decodes_and_reports_unknown_fields() {
        let decoded = decode(&json!({
            "apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "x", "resourceVersion": "7"},
            "spec": {"replicas": 3, "extra": 1},
            "status": {"replicas": 2, "selector": "app=x"},
        }))
        .unwrap();
        assert_eq!(decoded.object["spec"]["replicas"], 3);
        assert_eq!(decoded.object["status"]["selector"], "app=x");
        assert_eq!(decoded.unknown_fields, ["spec.extra"]);
    }

    #[test]
    fn replicas_must_be_an_int32() {
        for replicas in [json!("3"), json!(1.5), json!(4_294_967_296_i64)] {
            let error = decode(&json!({"spec": {"replicas": replicas}})).unwrap_err();
            assert_eq!(error.code, 400, "{replicas}");
            assert!(
                error
                    .0
                    .message
                    .starts_with("Scale in version \"v1\" cannot be handled as a Scale: "),
                "{}",
                error.0.message
            );
        }
    }
}
