//! Well-known claims: the ranges of a component's flags, claimed under a fixed name.
//!
//! The API server claims its `--service-cluster-ip-range` as `kube-apiserver` (reference
//! `{"", services}`), the controller-manager its `--cluster-cidr` as `kube-controller-manager`
//! (reference `{"", pods}`). As upstream's default ServiceCIDR `kubernetes`: [`keep`] creates
//! the claim when it is missing (and again after it was deleted), and never overwrites one
//! that exists. Its condition `FromFlags` says whether the stored spec is what the flags ask
//! for; when it is not, a `Warning` event `DiffersFromFlags` says so too, and the stored claim
//! stays as it is until someone updates or deletes it.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use futures::StreamExt as _;
use genplane_api::networkregistry::networkclaim::{self, ResourceReference};
use genplane_api::networkregistry::{API_VERSION, Prefix};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Resource as _, ResourceExt as _};
use serde_json::json;

use crate::client::{network_claim_resource, read_claim};

/// The condition of a well-known claim saying whether its spec is what the flags ask for.
pub const FROM_FLAGS: &str = "FromFlags";

/// How often the claim is checked besides its changes.
pub const RESYNC: Duration = Duration::from_secs(60);

/// A claim made from a component's flags.
#[derive(Clone, Debug)]
pub struct WellKnown {
    /// The claim's name ([`genplane_api::networkregistry::KUBE_APISERVER_CLAIM`], ...).
    pub name: &'static str,
    /// What the ranges are for.
    pub reference: ResourceReference,
    /// The ranges.
    pub prefixes: Vec<Prefix>,
    /// The flag they come from, e.g. `--service-cluster-ip-range`.
    pub flag: &'static str,
    /// The component, as events name their reporter (`kube-apiserver`, ...).
    pub component: &'static str,
}

impl WellKnown {
    fn flag_value(&self) -> String {
        let prefixes: Vec<String> = self.prefixes.iter().map(ToString::to_string).collect();
        format!("{}={}", self.flag, prefixes.join(","))
    }

    fn wanted(&self) -> BTreeSet<(String, ResourceReference)> {
        self.prefixes
            .iter()
            .map(|p| (p.to_string(), self.reference.clone()))
            .collect()
    }

    fn body(&self) -> serde_json::Value {
        let records: Vec<serde_json::Value> = self
            .prefixes
            .iter()
            .map(|p| {
                json!({
                    "reference": {"group": self.reference.group, "resource": self.reference.resource},
                    "prefix": p.to_string(),
                    "description": format!("{} of {}", self.flag, self.component),
                })
            })
            .collect();
        json!({
            "apiVersion": API_VERSION,
            "kind": networkclaim::KIND,
            "metadata": {"name": self.name},
            "spec": {"addressSpace": records},
        })
    }
}

/// Creates the claim if it is missing, or records in its `FromFlags` condition (and an event)
/// whether it is what the flags ask for.
pub async fn ensure(
    api: &Api<DynamicObject>,
    recorder: &Recorder,
    well_known: &WellKnown,
) -> Result<(), kube::Error> {
    let Some(object) = api.get_opt(well_known.name).await? else {
        let body: DynamicObject =
            serde_json::from_value(well_known.body()).map_err(kube::Error::SerdeError)?;
        return match api.create(&PostParams::default(), &body).await {
            Ok(_) => {
                tracing::info!(
                    claim = well_known.name,
                    flags = well_known.flag_value(),
                    "created the well-known network claim"
                );
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(error) => Err(error),
        };
    };
    if object.metadata.deletion_timestamp.is_some() {
        // Created again once it is gone.
        return Ok(());
    }
    let Some(claim) = read_claim(&object) else {
        return Ok(());
    };
    let stored: BTreeSet<(String, ResourceReference)> = claim
        .spec
        .address_space
        .iter()
        .map(|r| (r.prefix.clone(), r.reference.clone()))
        .collect();
    let matches = stored == well_known.wanted();
    let (status, reason, message) = if matches {
        (
            "True",
            "MatchesFlags",
            format!("the spec is what {} asks for", well_known.flag_value()),
        )
    } else {
        (
            "False",
            "DiffersFromFlags",
            format!(
                "the spec differs from {} of {}: it is kept as stored; update or delete the claim to follow the flags",
                well_known.flag_value(),
                well_known.component
            ),
        )
    };
    let current = claim.status.unwrap_or_default();
    if current
        .conditions
        .iter()
        .any(|c| c.type_ == FROM_FLAGS && c.status == status && c.message == message)
    {
        return Ok(());
    }
    let mut conditions: Vec<Condition> = current
        .conditions
        .into_iter()
        .filter(|c| c.type_ != FROM_FLAGS)
        .collect();
    conditions.push(Condition {
        type_: FROM_FLAGS.to_owned(),
        status: status.to_owned(),
        observed_generation: claim.metadata.generation,
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
        reason: reason.to_owned(),
        message: message.clone(),
    });
    let patch = json!({
        "metadata": {"resourceVersion": object.resource_version()},
        "status": {"conditions": conditions},
    });
    match api
        .patch_status(
            well_known.name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => {}
        // Changed meanwhile: the watch brings the next check.
        Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {
            return Ok(());
        }
        Err(error) => return Err(error),
    }
    if !matches {
        tracing::warn!(claim = well_known.name, "{message}");
        let event = Event {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            note: Some(message),
            action: "ClaimFromFlags".to_owned(),
            secondary: None,
        };
        let reference = object.object_ref(&network_claim_resource());
        if let Err(error) = recorder.publish(&event, &reference).await {
            tracing::debug!(%error, "well-known network claim event");
        }
    }
    Ok(())
}

/// Keeps `well_known` (see the module documentation) with `client` until `stop` completes:
/// at start, at each change of the claim, and every [`RESYNC`].
pub async fn keep(client: kube::Client, well_known: WellKnown, stop: impl Future<Output = ()>) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &network_claim_resource());
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: well_known.component.to_owned(),
            instance: None,
        },
    );
    let changes = watcher(
        api.clone(),
        watcher::Config::default().fields(&format!("metadata.name={}", well_known.name)),
    )
    .default_backoff()
    .touched_objects()
    .map(|_| ())
    .boxed();
    let mut changes = futures::stream::select(futures::stream::once(async {}).boxed(), changes);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = changes.next() => {}
            () = tokio::time::sleep(RESYNC) => {}
        }
        if let Err(error) = ensure(&api, &recorder, &well_known).await {
            tracing::warn!(claim = well_known.name, %error, "keeping the well-known network claim");
        }
    }
}
