//! The params of admission policies (ValidatingAdmissionPolicy and MutatingAdmissionPolicy):
//! a policy's `paramKind` and a binding's `paramRef` resolved to the objects they name, over a
//! [`Params`] view of the served kinds.

use std::sync::Arc;

use genplane_api::admissionregistration::types::{ParamKind, ParamRef};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::labels::Selector;
use serde_json::Value;

use crate::BoxFuture;

/// How params are picked among the objects of the param kind.
#[derive(Clone, Copy, Debug)]
pub enum ParamSelection<'a> {
    /// The object of this name.
    Name(&'a str),
    /// The objects these labels select.
    Selector(&'a Selector),
}

/// The objects policies may take their params from (any served kind, read from memory).
pub trait Params: Send + Sync + std::fmt::Debug {
    /// Whether the kind `api_version`/`kind` is namespaced; `None` when it is not served.
    fn param_scope(&self, api_version: &str, kind: &str) -> Option<bool>;
    /// The objects of the kind `api_version`/`kind` in `namespace` (empty for a
    /// cluster-scoped kind) that `selection` picks, with `apiVersion` and `kind` set (shared:
    /// the same objects are read on every write).
    fn params<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
        namespace: &'a str,
        selection: ParamSelection<'a>,
    ) -> BoxFuture<'a, Result<Vec<Arc<Value>>, ApiError>>;
}

/// The params a binding's `reference` names for a write in `namespace`, of the policy's
/// `kind`: `Value::Null` alone when the policy has no `paramKind` or the binding no
/// `paramRef`; none when none is found and the binding allows it; else why the binding is
/// misconfigured, in upstream's words.
pub async fn resolve<P: Params + ?Sized>(
    source: &P,
    kind: Option<&ParamKind>,
    reference: Option<&ParamRef>,
    namespace: &str,
) -> Result<Vec<Arc<Value>>, String> {
    let (Some(kind), Some(reference)) = (kind, reference) else {
        return Ok(vec![Arc::new(Value::Null)]);
    };
    let Some(namespaced) = source.param_scope(&kind.api_version, &kind.kind) else {
        return Err(format!(
            "paramKind kind `&ParamKind{{APIVersion:{},Kind:{},}}` not known",
            kind.api_version, kind.kind
        ));
    };
    let namespace = if !namespaced {
        if !reference.namespace.is_empty() {
            return Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`"
                    .to_owned(),
            );
        }
        ""
    } else if !reference.namespace.is_empty() {
        reference.namespace.as_str()
    } else if !namespace.is_empty() {
        namespace
    } else {
        return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".to_owned());
    };
    let selector;
    let selection = if !reference.name.is_empty() {
        ParamSelection::Name(&reference.name)
    } else if let Some(s) = &reference.selector {
        selector = s
            .to_apimachinery()
            .to_selector()
            .map_err(|e| e.to_string())?;
        ParamSelection::Selector(&selector)
    } else {
        return Err("one of name or selector must be provided".to_owned());
    };
    let params = source
        .params(&kind.api_version, &kind.kind, namespace, selection)
        .await
        .map_err(|e| e.message.clone())?;
    if params.is_empty() && reference.parameter_not_found_action.as_deref() == Some("Deny") {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".to_owned(),
        );
    }
    Ok(params)
}
