//! Every admission plugin by upstream's name, in upstream's order (kube-apiserver's
//! `AllOrderedPlugins`), with what genplane does with it:
//!
//! - implemented: `AlwaysAdmit`, `NamespaceAutoProvision`, `NamespaceLifecycle`,
//!   `NamespaceExists`, `MutatingAdmissionPolicy`, `MutatingAdmissionWebhook`, `ValidatingAdmissionPolicy`,
//!   `ValidatingAdmissionWebhook`, `ResourceQuota`, `AlwaysDeny`, the CertificateSigningRequest
//!   plugins `CertificateApproval`, `CertificateSigning`, `CertificateSubjectRestriction` and the
//!   ClusterTrustBundle plugin `ClusterTrustBundleAttest` ([`crate::certificates`]);
//! - genplane's own: `ComponentRestriction` ([`crate::component`]), next to upstream's
//!   `NodeRestriction`, whose role it plays for genplane's components; on by default;
//! - not applicable: plugins that act only on kinds a generic control plane does not serve
//!   (pods, nodes, services, storage, ingresses); accepted, and they admit
//!   everything here, as upstream's would;
//! - not available yet: the policy, owner-reference and rate-limit plugins;
//!   naming one in `--enable-admission-plugins` is a configuration error that says so.
//!
//! Enabled by default: what upstream's generic control plane enables that genplane has
//! (`NamespaceLifecycle`, the two webhook plugins, the two policy plugins, `ResourceQuota`,
//! and the not-applicable ones it lists), and `ComponentRestriction`. The webhook plugins run only when
//! the server gives them its webhook configurations ([`Context::webhooks`]),
//! `ValidatingAdmissionPolicy` only when it gives it its policies ([`Context::policies`]),
//! `ResourceQuota` only when it gives it its quotas ([`Context::quotas`]),
//! `MutatingAdmissionPolicy` only when it gives it its mutating policies
//! ([`Context::mutating_policies`]: when it serves them, which needs their feature gate).

use std::sync::Arc;

use genplane_apimachinery::errors::{ApiError, Status};
use serde_json::Value;

use crate::mutating_policy::MutatingAdmissionPolicy;
use crate::namespace::{NamespaceAutoProvision, NamespaceExists, NamespaceLifecycle, Namespaces};
use crate::quota::ResourceQuota;
use crate::validating_policy::ValidatingAdmissionPolicy;
use crate::webhook::{Dispatcher, MutatingAdmissionWebhook, ValidatingAdmissionWebhook};
use crate::{Attributes, BoxFuture, Chain, MutatingPlugin, ValidatingPlugin};

/// What genplane does with a plugin of upstream's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// It runs.
    Implemented,
    /// It acts only on kinds genplane does not serve: enabling it changes nothing.
    NotApplicable,
    /// genplane does not have it yet: enabling it is an error.
    NotAvailable,
}

/// One plugin of upstream's: its name, what genplane does with it, and whether upstream's
/// generic control plane enables it by default.
#[derive(Clone, Copy, Debug)]
pub struct Plugin {
    /// The name, as the flags spell it.
    pub name: &'static str,
    /// What genplane does with it.
    pub support: Support,
    /// Enabled unless disabled.
    pub default_on: bool,
}

const fn plugin(name: &'static str, support: Support, default_on: bool) -> Plugin {
    Plugin {
        name,
        support,
        default_on,
    }
}

use Support::{Implemented, NotApplicable, NotAvailable};

/// Every plugin, in the order upstream runs them.
pub const ALL: &[Plugin] = &[
    plugin("AlwaysAdmit", Implemented, false),
    plugin("NamespaceAutoProvision", Implemented, false),
    plugin("NamespaceLifecycle", Implemented, true),
    plugin("NamespaceExists", Implemented, false),
    plugin("LimitPodHardAntiAffinityTopology", NotApplicable, false),
    plugin("LimitRanger", NotApplicable, false),
    plugin("ServiceAccount", NotApplicable, true),
    plugin("NodeRestriction", NotApplicable, false),
    plugin(crate::component::NAME, Implemented, true),
    plugin("TaintNodesByCondition", NotApplicable, false),
    plugin("AlwaysPullImages", NotApplicable, false),
    plugin("ImagePolicyWebhook", NotApplicable, false),
    plugin("PodSecurity", NotApplicable, false),
    plugin("PodNodeSelector", NotApplicable, false),
    plugin("Priority", NotApplicable, false),
    plugin("DefaultTolerationSeconds", NotApplicable, true),
    plugin("PodTolerationRestriction", NotApplicable, false),
    plugin("EventRateLimit", NotAvailable, false),
    plugin("ExtendedResourceToleration", NotApplicable, false),
    plugin("DefaultStorageClass", NotApplicable, false),
    plugin("StorageObjectInUseProtection", NotApplicable, false),
    plugin("OwnerReferencesPermissionEnforcement", NotAvailable, false),
    plugin("PersistentVolumeClaimResize", NotApplicable, false),
    plugin("RuntimeClass", NotApplicable, false),
    plugin(crate::certificates::APPROVAL, Implemented, true),
    plugin(crate::certificates::SIGNING, Implemented, true),
    plugin(crate::certificates::TRUST_BUNDLE_ATTEST, Implemented, true),
    plugin(crate::certificates::SUBJECT_RESTRICTION, Implemented, true),
    plugin("DefaultIngressClass", NotApplicable, false),
    plugin("DenyServiceExternalIPs", NotApplicable, false),
    plugin("PodTopologyLabels", NotApplicable, false),
    plugin("MutatingAdmissionPolicy", Implemented, true),
    plugin("MutatingAdmissionWebhook", Implemented, true),
    plugin("ValidatingAdmissionPolicy", Implemented, true),
    plugin("ValidatingAdmissionWebhook", Implemented, true),
    plugin("ResourceQuota", Implemented, true),
    plugin("AlwaysDeny", Implemented, false),
];

/// What the plugins need of the server.
#[derive(Clone, Debug)]
pub struct Context {
    /// The stored namespaces.
    pub namespaces: Arc<dyn Namespaces>,
    /// The stored webhook configurations, when the server serves them (the webhook plugins
    /// are left out of the chain without them).
    pub webhooks: Option<Arc<dyn crate::webhook::Configurations>>,
    /// The stored ResourceQuotas, when the server serves them (`ResourceQuota` is left out of
    /// the chain without them).
    pub quotas: Option<Arc<dyn crate::quota::Quotas>>,
    /// The stored ValidatingAdmissionPolicies, their bindings and params, when the server
    /// serves them (`ValidatingAdmissionPolicy` is left out of the chain without them).
    pub policies: Option<Arc<dyn crate::validating_policy::Policies>>,
    /// The stored MutatingAdmissionPolicies, their bindings and params, when the server serves
    /// them (`MutatingAdmissionPolicy` is left out of the chain without them).
    pub mutating_policies: Option<Arc<dyn crate::mutating_policy::MutatingPolicies>>,
    /// The plugins' configuration (`--admission-control-config-file`).
    pub configuration: Arc<crate::config::Configuration>,
    /// Where webhooks given by `service` are reached.
    pub resolver: crate::webhook::resolver::ServiceResolver,
}

/// Errors of resolving the plugin flags.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A name no plugin has.
    #[error("admission plugin {name:?} is unknown; known plugins: {known}")]
    Unknown {
        /// The name given.
        name: String,
        /// Every known name, comma-separated.
        known: String,
    },
    /// A plugin genplane does not have yet.
    #[error("admission plugin {name:?} is not available in genplane yet")]
    NotAvailable {
        /// The name given.
        name: String,
    },
    /// A plugin both enabled and disabled.
    #[error("{names:?} in enable-admission-plugins and disable-admission-plugins overlapped")]
    Overlap {
        /// The names in both flags.
        names: Vec<String>,
    },
}

fn find(name: &str) -> Result<&'static Plugin, Error> {
    ALL.iter()
        .find(|p| p.name == name)
        .ok_or_else(|| Error::Unknown {
            name: name.to_owned(),
            known: ALL.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
        })
}

/// The names enabled by `enable` and `disable` (upstream's flags): the defaults, plus the
/// ones enabled, minus the ones disabled, in upstream's order.
pub fn enabled(enable: &[String], disable: &[String]) -> Result<Vec<&'static str>, Error> {
    let mut overlap: Vec<String> = enable
        .iter()
        .filter(|n| disable.contains(n))
        .cloned()
        .collect();
    if !overlap.is_empty() {
        overlap.sort();
        overlap.dedup();
        return Err(Error::Overlap { names: overlap });
    }
    for name in enable {
        if find(name)?.support == NotAvailable {
            return Err(Error::NotAvailable { name: name.clone() });
        }
    }
    for name in disable {
        find(name)?;
    }
    Ok(ALL
        .iter()
        .filter(|p| {
            (p.default_on && p.support != NotAvailable || enable.iter().any(|n| n == p.name))
                && !disable.iter().any(|n| n == p.name)
        })
        .map(|p| p.name)
        .collect())
}

/// The chain of the plugins `enable` and `disable` leave enabled.
pub fn resolve(enable: &[String], disable: &[String], context: &Context) -> Result<Chain, Error> {
    Ok(chain_of(&enabled(enable, disable)?, context))
}

/// The chain of exactly the plugins `names` (as [`enabled`] gives them; names genplane does
/// not run are skipped).
pub fn chain_of(names: &[&str], context: &Context) -> Chain {
    let mut mutating: Vec<Arc<dyn MutatingPlugin>> = Vec::new();
    let mut validating: Vec<Arc<dyn ValidatingPlugin>> = Vec::new();
    let dispatcher = context.webhooks.clone().map(|webhooks| {
        Dispatcher::new(webhooks, context.namespaces.clone())
            .with_resolver(context.resolver.clone())
    });
    for &name in names {
        let namespaces = context.namespaces.clone();
        match name {
            "NamespaceAutoProvision" => {
                mutating.push(Arc::new(NamespaceAutoProvision::new(namespaces)));
            }
            "NamespaceLifecycle" => mutating.push(Arc::new(NamespaceLifecycle::new(namespaces))),
            "NamespaceExists" => mutating.push(Arc::new(NamespaceExists::new(namespaces))),
            "MutatingAdmissionPolicy" => {
                if let Some(policies) = &context.mutating_policies {
                    mutating.push(Arc::new(MutatingAdmissionPolicy::new(
                        policies.clone(),
                        namespaces,
                    )));
                }
            }
            "MutatingAdmissionWebhook" => {
                if let Some(dispatcher) = &dispatcher {
                    mutating.push(Arc::new(MutatingAdmissionWebhook::new(
                        dispatcher.with_credentials(context.configuration.mutating_webhook.clone()),
                    )));
                }
            }
            "ValidatingAdmissionWebhook" => {
                if let Some(dispatcher) = &dispatcher {
                    validating.push(Arc::new(ValidatingAdmissionWebhook::new(
                        dispatcher
                            .with_credentials(context.configuration.validating_webhook.clone()),
                    )));
                }
            }
            "ResourceQuota" => {
                if let Some(quotas) = &context.quotas {
                    validating.push(Arc::new(ResourceQuota::new(
                        quotas.clone(),
                        context.configuration.quota.clone(),
                    )));
                }
            }
            "ValidatingAdmissionPolicy" => {
                if let Some(policies) = &context.policies {
                    validating.push(Arc::new(ValidatingAdmissionPolicy::new(
                        policies.clone(),
                        namespaces,
                    )));
                }
            }
            "AlwaysDeny" => validating.push(Arc::new(AlwaysDeny)),
            crate::certificates::APPROVAL => {
                validating.push(Arc::new(crate::certificates::CertificateApproval));
            }
            crate::certificates::SIGNING => {
                validating.push(Arc::new(crate::certificates::CertificateSigning));
            }
            crate::certificates::SUBJECT_RESTRICTION => {
                validating.push(Arc::new(crate::certificates::CertificateSubjectRestriction));
            }
            crate::certificates::TRUST_BUNDLE_ATTEST => {
                validating.push(Arc::new(crate::certificates::ClusterTrustBundleAttest));
            }
            crate::component::NAME => validating.push(Arc::new(
                crate::component::ComponentRestriction::new(namespaces),
            )),
            // AlwaysAdmit and the plugins for kinds not served admit everything.
            _ => {}
        }
    }
    Chain::new(mutating, validating)
}

/// The chain upstream's defaults give.
pub fn defaults(context: &Context) -> Chain {
    resolve(&[], &[], context).unwrap_or_default()
}

/// AlwaysDeny: refuses every write (for tests of admission itself).
#[derive(Debug, Clone, Copy)]
pub struct AlwaysDeny;

impl ValidatingPlugin for AlwaysDeny {
    fn name(&self) -> &'static str {
        "AlwaysDeny"
    }

    fn validate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        _object: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let resource = genplane_apimachinery::schema::GroupResource::new(
                &attributes.request.resource.group,
                &attributes.request.resource.resource,
            );
            Err(Status::forbidden(
                &resource,
                attributes.name,
                "admission control is denying all modifications",
            )
            .into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_flags_resolve_as_upstreams() {
        assert_eq!(
            enabled(&[], &[]).unwrap(),
            [
                "NamespaceLifecycle",
                "ServiceAccount",
                "ComponentRestriction",
                "DefaultTolerationSeconds",
                "CertificateApproval",
                "CertificateSigning",
                "ClusterTrustBundleAttest",
                "CertificateSubjectRestriction",
                "MutatingAdmissionPolicy",
                "MutatingAdmissionWebhook",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionWebhook",
                "ResourceQuota"
            ]
        );
        assert_eq!(
            enabled(
                &names(&["AlwaysDeny", "NamespaceExists"]),
                &names(&["NamespaceLifecycle", "ServiceAccount"])
            )
            .unwrap(),
            [
                "NamespaceExists",
                "ComponentRestriction",
                "DefaultTolerationSeconds",
                "CertificateApproval",
                "CertificateSigning",
                "ClusterTrustBundleAttest",
                "CertificateSubjectRestriction",
                "MutatingAdmissionPolicy",
                "MutatingAdmissionWebhook",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionWebhook",
                "ResourceQuota",
                "AlwaysDeny"
            ]
        );
        let unknown = enabled(&names(&["Nope"]), &[]).unwrap_err();
        assert!(
            matches!(&unknown, Error::Unknown { name, known } if name == "Nope" && known.contains("NamespaceLifecycle"))
        );
        assert_eq!(
            enabled(&names(&["EventRateLimit"]), &[]).unwrap_err(),
            Error::NotAvailable {
                name: "EventRateLimit".into()
            }
        );
        assert!(enabled(&[], &names(&["MutatingAdmissionPolicy"])).is_ok());
        assert_eq!(
            enabled(&names(&["AlwaysDeny"]), &names(&["AlwaysDeny"])).unwrap_err(),
            Error::Overlap {
                names: names(&["AlwaysDeny"])
            }
        );
    }
}
