//! Custom-resource creates against ConfigMap creates (`--only crd`, run by
//! `hack/bench/crd.sh`): one SQLite apiserver serves ConfigMaps and two namespaced CRDs,
//! `widgets.bench.genplane.io` (a structural schema with typed fields, bounds, an enum, a
//! pattern, a default and a string of `--value-size` bytes) and `celwidgets.bench.genplane.io`
//! (the same schema with one `x-kubernetes-validations` rule). The three creates are measured
//! in interleaved slices on the same server, so that they share the process, the database file
//! and its growth, and the machine's noise; the CPU per operation is that one process's.
//!
//! One server rather than one per resource: the custom-resource path and the built-in path are
//! two code paths of the same process, and what is compared is the cost of one against the
//! other; two servers would add the difference between two processes (page cache, allocator
//! state, database size) to the comparison.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use hyper::{Method, StatusCode};

use crate::client::Client;
use crate::process::Server;
use crate::{Args, Op, configmap, configmaps, create_namespace, interleaved};

/// The namespace every measured object is created in.
const NAMESPACE: &str = "bench-crd";
/// The API group of both CRDs.
pub(crate) const GROUP: &str = "bench.genplane.io";
/// The path of the CustomResourceDefinition collection.
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
/// How long a CRD may take to become Established and served.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(30);
/// The CEL rule of the second CRD, on `spec`.
const RULE: &str = "self.replicas <= self.maxReplicas";

/// One of the two CRDs.
pub(crate) struct Crd {
    pub(crate) plural: &'static str,
    pub(crate) kind: &'static str,
    /// Whether `spec` carries [`RULE`].
    pub(crate) cel: bool,
}

const WIDGETS: Crd = Crd {
    plural: "widgets",
    kind: "Widget",
    cel: false,
};

const CEL_WIDGETS: Crd = Crd {
    plural: "celwidgets",
    kind: "CelWidget",
    cel: true,
};

impl Crd {
    fn name(&self) -> String {
        format!("{}.{GROUP}", self.plural)
    }

    /// The collection of this CRD's resources in `namespace`.
    pub(crate) fn path(&self, namespace: &str) -> String {
        format!("/apis/{GROUP}/v1/namespaces/{namespace}/{}", self.plural)
    }

    /// The CustomResourceDefinition: namespaced, one served and stored version `v1`, a status
    /// subresource, and a structural schema whose `spec.payload` holds up to `max_payload`
    /// bytes.
    fn definition(&self, max_payload: usize) -> Bytes {
        let mut spec = serde_json::json!({
            "type": "object",
            "required": ["replicas", "maxReplicas", "payload"],
            "properties": {
                "replicas": { "type": "integer", "format": "int32", "minimum": 0, "maximum": 1000 },
                "maxReplicas": { "type": "integer", "format": "int32", "minimum": 1, "maximum": 1000 },
                "mode": { "type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 63 },
                "tier": { "type": "string", "enum": ["standard", "premium"], "default": "standard" },
                "weight": { "type": "number", "minimum": 0, "exclusiveMinimum": true },
                "payload": { "type": "string", "maxLength": max_payload },
            },
        });
        if self.cel {
            spec["x-kubernetes-validations"] = serde_json::json!([{
                "rule": RULE,
                "message": "replicas must not exceed maxReplicas",
            }]);
        }
        let singular = self.kind.to_ascii_lowercase();
        Bytes::from(
            serde_json::json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": { "name": self.name() },
                "spec": {
                    "group": GROUP,
                    "scope": "Namespaced",
                    "names": {
                        "plural": self.plural,
                        "singular": singular,
                        "kind": self.kind,
                        "listKind": format!("{}List", self.kind),
                    },
                    "versions": [{
                        "name": "v1",
                        "served": true,
                        "storage": true,
                        "subresources": { "status": {} },
                        "schema": { "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": spec,
                                "status": {
                                    "type": "object",
                                    "properties": { "ready": { "type": "integer" } },
                                },
                            },
                        } },
                    }],
                },
            })
            .to_string(),
        )
    }

    /// A custom resource `name` with `replicas` of `max_replicas`, mode `mode`, a payload of
    /// `value_size` bytes, no `tier` (defaulted) and the given `extra` spec fields.
    pub(crate) fn object(
        &self,
        name: &str,
        value_size: usize,
        replicas: u32,
        mode: &str,
        extra: Option<(&str, serde_json::Value)>,
    ) -> Bytes {
        let mut spec = serde_json::json!({
            "replicas": replicas,
            "maxReplicas": 5,
            "mode": mode,
            "weight": 0.5,
            "payload": "x".repeat(value_size),
        });
        if let Some((field, value)) = extra {
            spec[field] = value;
        }
        Bytes::from(
            serde_json::json!({
                "apiVersion": format!("{GROUP}/v1"),
                "kind": self.kind,
                "metadata": { "name": name },
                "spec": spec,
            })
            .to_string(),
        )
    }

    /// The measured object `n`.
    fn measured(&self, n: u64, value_size: usize) -> Bytes {
        self.object(&format!("w-{n:09}"), value_size, 3, "steady", None)
    }
}

/// Creates `crd` and waits until its `Established` condition is `True` and its collection in
/// `namespace` answers 200; returns how long each took from the POST.
pub(crate) async fn establish(
    client: &Client,
    crd: &Crd,
    max_payload: usize,
    namespace: &str,
) -> anyhow::Result<(Duration, Duration)> {
    let started = Instant::now();
    client
        .expect(
            Method::POST,
            CRDS,
            Some(crd.definition(max_payload)),
            StatusCode::CREATED,
        )
        .await
        .with_context(|| format!("creating the CRD {}", crd.name()))?;
    let deadline = started + ESTABLISH_TIMEOUT;
    let one = format!("{CRDS}/{}", crd.name());
    let established = loop {
        let body = client
            .expect(Method::GET, &one, None, StatusCode::OK)
            .await?;
        let object: serde_json::Value = serde_json::from_slice(&body)?;
        let conditions = object["status"]["conditions"].as_array();
        if conditions
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
        {
            break started.elapsed();
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the CRD {} is not Established after {ESTABLISH_TIMEOUT:?}; its status: {}",
            crd.name(),
            object["status"]
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let path = crd.path(namespace);
    let served = loop {
        let (status, body) = client.call(Method::GET, &path, None).await?;
        if status == StatusCode::OK {
            break started.elapsed();
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "GET {path}: {status} {ESTABLISH_TIMEOUT:?} after creating the CRD: {}",
            String::from_utf8_lossy(&body[..body.len().min(500)])
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    Ok((established, served))
}

/// POSTs `body` to `path` and fails unless the answer is `want`; returns the answer.
async fn post(
    client: &Client,
    path: &str,
    body: Bytes,
    want: StatusCode,
) -> anyhow::Result<serde_json::Value> {
    let (status, answer) = client.call(Method::POST, path, Some(body)).await?;
    anyhow::ensure!(
        status == want,
        "POST {path}: {status}, wanted {want}: {}",
        String::from_utf8_lossy(&answer[..answer.len().min(500)])
    );
    Ok(serde_json::from_slice(&answer)?)
}

/// The schema is really applied: a created object is defaulted and pruned, a pattern
/// violation is refused by both CRDs, and the CEL rule refuses on its CRD only what it should.
async fn check_validation(client: &Client, value_size: usize) -> anyhow::Result<()> {
    for crd in [&WIDGETS, &CEL_WIDGETS] {
        let path = crd.path(NAMESPACE);
        let created = post(
            client,
            &path,
            crd.object(
                "check-valid",
                value_size,
                3,
                "steady",
                Some(("unknownField", "pruned".into())),
            ),
            StatusCode::CREATED,
        )
        .await?;
        anyhow::ensure!(
            created["spec"]["tier"] == "standard",
            "{}: spec.tier was not defaulted: {}",
            crd.kind,
            created["spec"]
        );
        anyhow::ensure!(
            created["spec"].get("unknownField").is_none(),
            "{}: spec.unknownField was not pruned",
            crd.kind
        );
        let refused = post(
            client,
            &path,
            crd.object("check-pattern", value_size, 3, "Not_A_Mode", None),
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await?;
        anyhow::ensure!(
            refused["reason"] == "Invalid",
            "{}: a pattern violation answered {refused}",
            crd.kind
        );
        let over = crd.object("check-rule", value_size, 9, "steady", None);
        if crd.cel {
            let refused = post(client, &path, over, StatusCode::UNPROCESSABLE_ENTITY).await?;
            let message = refused["message"].as_str().unwrap_or_default();
            anyhow::ensure!(
                message.contains("replicas must not exceed maxReplicas"),
                "{}: the CEL rule's refusal does not carry its message: {refused}",
                crd.kind
            );
        } else {
            post(client, &path, over, StatusCode::CREATED).await?;
        }
    }
    Ok(())
}

/// Starts the server, creates the CRDs, checks the schemas are applied, and measures.
pub(crate) async fn crd(args: &Args, dir: &Path) -> anyhow::Result<()> {
    let mut server = Server::apiserver(&args.genplane(), &dir.join("crd"), &[])
        .await
        .context("starting the apiserver on SQLite")?;
    let client = server.client.clone();
    create_namespace(&client, NAMESPACE).await?;
    let max_payload = args.value_size.max(1) * 2;
    let mut timings = Vec::new();
    for crd in [&WIDGETS, &CEL_WIDGETS] {
        timings.push(establish(&client, crd, max_payload, NAMESPACE).await?);
    }
    check_validation(&client, args.value_size).await?;

    let value_size = args.value_size;
    let configmap_op: Op = {
        let client = client.clone();
        Arc::new(move |n| {
            let client = client.clone();
            Box::pin(async move {
                let body = configmap(&format!("cm-{n:09}"), value_size, None);
                client
                    .expect(
                        Method::POST,
                        &configmaps(NAMESPACE),
                        Some(body),
                        StatusCode::CREATED,
                    )
                    .await?;
                Ok(())
            })
        })
    };
    let custom_op = |crd: &'static Crd| -> Op {
        let client = client.clone();
        let path = crd.path(NAMESPACE);
        Arc::new(move |n| {
            let (client, path) = (client.clone(), path.clone());
            Box::pin(async move {
                client
                    .expect(
                        Method::POST,
                        &path,
                        Some(crd.measured(n, value_size)),
                        StatusCode::CREATED,
                    )
                    .await?;
                Ok(())
            })
        })
    };
    let pid = server.pid()?;
    let rates = interleaved(
        &[
            (configmap_op, vec![pid]),
            (custom_op(&WIDGETS), vec![pid]),
            (custom_op(&CEL_WIDGETS), vec![pid]),
        ],
        args,
    )
    .await?;

    println!(
        "\nCreates of ConfigMaps and of custom resources of two namespaced CRDs on one SQLite \
         apiserver, concurrency {}, {} rounds of {:.2} s, interleaved",
        args.concurrency, args.rounds, args.slice
    );
    for (crd, (established, served)) in [&WIDGETS, &CEL_WIDGETS].iter().zip(&timings) {
        println!(
            "  {}: Established {:.0} ms after the POST, its collection served after {:.0} ms",
            crd.name(),
            crate::ms(*established),
            crate::ms(*served)
        );
    }
    println!(
        "  checked first: both CRDs default spec.tier, prune an unknown field and refuse a \
         pattern violation (422); only the CEL CRD refuses replicas > maxReplicas"
    );
    println!(
        "  {:<40} {:>10} {:>8} {:>13} {:>18}",
        "", "body bytes", "ops/s", "vs ConfigMap", "server CPU us/op"
    );
    let sizes = [
        configmap("cm-000000000", value_size, None).len(),
        WIDGETS.measured(0, value_size).len(),
        CEL_WIDGETS.measured(0, value_size).len(),
    ];
    for (i, label) in [
        "ConfigMap",
        "Widget (CR, structural schema)",
        "CelWidget (CR + 1 CEL rule)",
    ]
    .into_iter()
    .enumerate()
    {
        let ratio = if i == 0 {
            String::new()
        } else {
            format!("{:.0}%", 100.0 * rates[i].ops / rates[0].ops)
        };
        println!(
            "  {label:<40} {:>10} {:>8.0} {ratio:>13} {:>18.0}",
            sizes[i], rates[i].ops, rates[i].cpu_us
        );
    }
    println!(
        "  CEL rule: {:.0}% of the rate without it, {:+.0} us CPU per create",
        100.0 * rates[2].ops / rates[1].ops,
        rates[2].cpu_us - rates[1].cpu_us
    );
    println!(
        "  (target: CR creates >= 80% of ConfigMap creates; CPU: user+system time of the \
         apiserver process)"
    );
    server.check_alive()?;
    server.stop().await
}
