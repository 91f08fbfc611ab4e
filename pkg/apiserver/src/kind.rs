//! What the handlers know about a served kind, built-in or custom: its description (names,
//! scope, verbs, subresources) and how its objects are shown and decoded.

use std::sync::Arc;

use genplane_api::catalog::{ResourceDescription, ResourceInfo};
use genplane_apimachinery::codec::schema::Struct;
use genplane_apimachinery::errors::ApiError;
use serde_json::Value;

/// How the objects of a custom kind are shown in tables and checked for unknown fields. The
/// CustomResourceDefinition machinery implements it from the CRD's printer columns and schema.
pub trait CustomBehaviour: Send + Sync + std::fmt::Debug {
    /// The table's column definitions (`meta.k8s.io/v1` `TableColumnDefinition`s).
    fn columns(&self) -> Value;
    /// The cells of `object`'s row at `now` (Unix seconds).
    fn row(&self, object: &Value, now: i64) -> Vec<Value>;
    /// The fields of a written object that its schema does not know, as `fieldValidation`
    /// reports them (`spec.foo`); a 400 for a malformed object.
    fn unknown_fields(&self, object: &Value) -> Result<Vec<String>, ApiError>;
}

/// Where a kind's behaviour comes from.
#[derive(Clone, Debug)]
pub enum Behaviour {
    /// A catalog resource.
    Builtin(&'static ResourceInfo),
    /// A custom resource.
    Custom(Arc<dyn CustomBehaviour>),
    /// `autoscaling/v1` Scale: the body of a custom resource's `scale` subresource.
    Scale,
}

/// A served kind: its description and behaviour. Dereferences to the description.
#[derive(Clone, Debug)]
pub struct ServedKind {
    description: ResourceDescription,
    behaviour: Behaviour,
}

impl std::ops::Deref for ServedKind {
    type Target = ResourceDescription;

    fn deref(&self) -> &ResourceDescription {
        &self.description
    }
}

impl ServedKind {
    /// The catalog resource `info`.
    pub fn builtin(info: &'static ResourceInfo) -> Self {
        Self {
            description: info.describe(),
            behaviour: Behaviour::Builtin(info),
        }
    }

    /// A custom kind.
    pub fn custom(description: ResourceDescription, behaviour: Arc<dyn CustomBehaviour>) -> Self {
        Self {
            description,
            behaviour: Behaviour::Custom(behaviour),
        }
    }

    /// `autoscaling/v1` Scale, the kind a custom resource's `scale` subresource reads and
    /// writes.
    pub fn scale() -> Self {
        use genplane_api::autoscaling::{GROUP, KIND, VERSION};
        Self {
            description: ResourceDescription {
                group: GROUP.to_owned(),
                version: VERSION.to_owned(),
                kind: KIND.to_owned(),
                list_kind: String::new(),
                resource: "scale".to_owned(),
                singular: String::new(),
                short_names: Vec::new(),
                namespaced: true,
                verbs: Vec::new(),
                categories: Vec::new(),
                subresources: Vec::new(),
                storage_api_version: None,
            },
            behaviour: Behaviour::Scale,
        }
    }

    /// The kind the bodies of `subresource` of `resource` have, when it is not the
    /// resource's own (a custom resource's `scale`: autoscaling/v1 Scale).
    pub fn of_subresource(resource: &ResourceDescription, subresource: &str) -> Option<Self> {
        use genplane_api::autoscaling::{GROUP, KIND, VERSION};
        let sub = resource.subresource(subresource)?;
        let gvk = resource.subresource_gvk(sub);
        (gvk.group == GROUP && gvk.version == VERSION && gvk.kind == KIND).then(Self::scale)
    }

    /// The kind the bodies of this resource's `subresource` have, when it is not the
    /// resource's own: a built-in subresource's body kind (`serviceaccounts/token`:
    /// authentication.k8s.io/v1 TokenRequest), or a custom resource's `scale` (see
    /// [`ServedKind::of_subresource`]).
    pub fn subresource_body(&self, subresource: &str) -> Option<Self> {
        let body = self.builtin_info().and_then(|info| {
            info.subresources
                .iter()
                .find(|s| s.name == subresource)?
                .body
        });
        match body {
            Some(body) => Some(Self::builtin(body)),
            None => Self::of_subresource(&self.description, subresource),
        }
    }

    /// Whether strategic merge patch applies to the kind: typed kinds (built-in ones and
    /// Scale) have the patch strategies it needs; custom resources answer 415, as upstream.
    pub fn takes_strategic_merge(&self) -> bool {
        !matches!(self.behaviour, Behaviour::Custom(_))
    }

    /// The description.
    pub fn description(&self) -> &ResourceDescription {
        &self.description
    }

    /// The catalog entry of a built-in kind.
    pub fn builtin_info(&self) -> Option<&'static ResourceInfo> {
        match &self.behaviour {
            Behaviour::Builtin(info) => Some(info),
            Behaviour::Custom(_) | Behaviour::Scale => None,
        }
    }

    /// The protobuf shape of the objects, for kinds that speak Kubernetes protobuf (custom
    /// resources do not, as upstream, nor a program's own kinds without field numbers).
    pub fn protobuf(&self) -> Option<&'static Struct> {
        self.builtin_info()
            .filter(|info| info.protobuf)
            .map(|info| info.schema)
    }

    /// The table's column definitions.
    pub fn columns(&self) -> Value {
        match &self.behaviour {
            Behaviour::Builtin(info) => {
                serde_json::to_value(info.hooks.columns).unwrap_or_default()
            }
            Behaviour::Custom(custom) => custom.columns(),
            Behaviour::Scale => {
                serde_json::to_value([genplane_api::table::NAME]).unwrap_or_default()
            }
        }
    }

    /// The cells of `object`'s table row at `now`.
    pub fn row(&self, object: &Value, now: i64) -> Vec<Value> {
        match &self.behaviour {
            Behaviour::Builtin(info) => (info.hooks.row)(object, now),
            Behaviour::Custom(custom) => custom.row(object, now),
            Behaviour::Scale => vec![
                object
                    .pointer("/metadata/name")
                    .cloned()
                    .unwrap_or(Value::from("")),
            ],
        }
    }

    /// The fields of a written object its schema does not know (400 for a built-in object of
    /// the wrong shape).
    pub fn unknown_fields(&self, object: &Value) -> Result<Vec<String>, ApiError> {
        match &self.behaviour {
            Behaviour::Builtin(info) => Ok((info.hooks.decode)(object)?.unknown_fields),
            Behaviour::Custom(custom) => custom.unknown_fields(object),
            Behaviour::Scale => Ok(genplane_api::autoscaling::decode(object)?.unknown_fields),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use genplane_api::catalog::SubresourceDescription;
    use serde_json::json;

    fn crontabs(scale_group: Option<&str>) -> ResourceDescription {
        ResourceDescription {
            group: "stable.example.com".into(),
            version: "v1".into(),
            kind: "CronTab".into(),
            list_kind: "CronTabList".into(),
            resource: "crontabs".into(),
            singular: "crontab".into(),
            short_names: vec![],
            namespaced: true,
            verbs: vec![],
            categories: vec![],
            subresources: vec![
                SubresourceDescription {
                    name: "status".into(),
                    kind: "CronTab".into(),
                    group: None,
                    version: None,
                    verbs: vec![],
                },
                SubresourceDescription {
                    name: "scale".into(),
                    kind: "Scale".into(),
                    group: scale_group.map(str::to_owned),
                    version: Some("v1".into()),
                    verbs: vec![],
                },
            ],
            storage_api_version: None,
        }
    }

    #[test]
    fn a_scale_subresource_reads_and_writes_scales() {
        let resource = crontabs(Some("autoscaling"));
        let scale = ServedKind::of_subresource(&resource, "scale").unwrap();
        assert_eq!(scale.api_version(), "autoscaling/v1");
        assert_eq!(scale.kind, "Scale");
        assert!(scale.takes_strategic_merge());
        assert_eq!(
            scale
                .unknown_fields(&json!({"spec": {"replicas": 1, "extra": true}}))
                .unwrap(),
            ["spec.extra"]
        );
        assert_eq!(
            scale.row(&json!({"metadata": {"name": "x"}}), 0),
            [json!("x")]
        );
        // The status subresource and unknown ones have the resource's kind.
        assert!(ServedKind::of_subresource(&resource, "status").is_none());
        assert!(ServedKind::of_subresource(&resource, "nothing").is_none());
        assert!(ServedKind::of_subresource(&crontabs(None), "scale").is_none());
    }
}
