//! ConfigMap create throughput with one matching ValidatingAdmissionPolicy against none
//! (`--only admission`, run by `hack/bench/admission.sh`): two SQLite apiservers side by side,
//! one with a policy (a ConfigMap param, a variable, two validations and a messageExpression,
//! bound in Deny mode to every ConfigMap of the measured namespace) and one started with
//! `--disable-admission-plugins=ValidatingAdmissionPolicy`, so that only the policy differs.
//! Before measuring, the policy is checked to be in force: a create it refuses is refused
//! with its message, on the policy side only.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use hyper::{Method, StatusCode};

use crate::client::Client;
use crate::process::Server;
use crate::{Args, Op, configmap, configmaps, create_namespace, interleaved};

/// The namespace the creates go to.
const NAMESPACE: &str = "bench-admission";

/// The policy, its param and its binding.
fn policy_objects() -> Vec<(String, Bytes)> {
    let json = |v: serde_json::Value| Bytes::from(v.to_string());
    vec![
        (
            configmaps(NAMESPACE),
            json(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "limits"},
                "data": {"maxKeys": "4", "maxBytes": "65536"},
            })),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies".to_owned(),
            json(serde_json::json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": "bench"},
                "spec": {
                    "failurePolicy": "Fail",
                    "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                    "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
                    "variables": [{"name": "data", "expression": "has(object.data) ? object.data : {}"}],
                    "validations": [
                        {"expression": "size(variables.data) <= int(params.data.maxKeys)",
                         "messageExpression": "'at most ' + params.data.maxKeys + ' keys'"},
                        {"expression": "variables.data.all(k, size(variables.data[k]) <= int(params.data.maxBytes))",
                         "message": "a value is too large"},
                    ],
                },
            })),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings".to_owned(),
            json(serde_json::json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": "bench"},
                "spec": {"policyName": "bench", "validationActions": ["Deny"],
                    "paramRef": {"name": "limits", "namespace": NAMESPACE, "parameterNotFoundAction": "Deny"},
                    "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}}},
            })),
        ),
    ]
}

/// A ConfigMap the policy refuses (five keys).
fn refused() -> Bytes {
    Bytes::from(
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "too-many"},
            "data": {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"},
        })
        .to_string(),
    )
}

/// The answer to a create of [`refused`] once the policy is in force (the plugin reads
/// policies from the watch cache, a moment after the writes).
async fn await_refusal(client: &Client) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = client
            .call(
                Method::POST,
                &format!("{}?dryRun=All", configmaps(NAMESPACE)),
                Some(refused()),
            )
            .await?;
        if status != StatusCode::CREATED {
            return Ok(String::from_utf8_lossy(&body).into_owned());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the policy never refused a create"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts both servers, installs the policy on one, checks it, and measures.
pub(crate) async fn admission(args: &Args, dir: &Path) -> anyhow::Result<()> {
    let start = |name: &'static str, extra: Vec<String>| {
        let data_dir = dir.join(format!("admission-{name}"));
        async move {
            Server::apiserver(&args.genplane(), &data_dir, &extra)
                .await
                .with_context(|| format!("starting the {name} apiserver"))
        }
    };
    let mut sides = vec![
        ("policy", start("policy", Vec::new()).await?),
        (
            "none",
            start(
                "none",
                vec!["--disable-admission-plugins=ValidatingAdmissionPolicy".to_owned()],
            )
            .await?,
        ),
    ];
    for (_, server) in &sides {
        create_namespace(&server.client, NAMESPACE).await?;
    }
    let policy = &sides[0].1.client;
    for (path, body) in policy_objects() {
        policy
            .expect(Method::POST, &path, Some(body), StatusCode::CREATED)
            .await?;
    }
    let message = await_refusal(policy).await?;
    anyhow::ensure!(
        message.contains(
            "ValidatingAdmissionPolicy 'bench' with binding 'bench' denied request: at most 4 keys"
        ),
        "unexpected refusal: {message}"
    );
    let none = &sides[1].1.client;
    none.expect(
        Method::POST,
        &format!("{}?dryRun=All", configmaps(NAMESPACE)),
        Some(refused()),
        StatusCode::CREATED,
    )
    .await?;

    println!(
        "\nConfigMap creates ({} B data) with one matching ValidatingAdmissionPolicy (ConfigMap \
         param, a variable, two validations, Deny) vs the plugin disabled, concurrency {}, {} \
         rounds of {:.2} s, interleaved",
        args.value_size, args.concurrency, args.rounds, args.slice
    );
    println!(
        "  checked first: the policy refuses a 5-key ConfigMap with its message; the other server admits it"
    );
    let value_size = args.value_size;
    let op = |client: &Client, prefix: &'static str| -> Op {
        let client = client.clone();
        std::sync::Arc::new(move |n| {
            let client = client.clone();
            Box::pin(async move {
                let body = configmap(&format!("{prefix}-{n:09}"), value_size, None);
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
    let ops = vec![
        (op(policy, "cm"), vec![sides[0].1.pid()?]),
        (op(none, "cm"), vec![sides[1].1.pid()?]),
    ];
    let rates = interleaved(&ops, args).await?;
    println!(
        "  {:<10} {:>10} {:>10} {:>8} {:>16} {:>16} {:>10}",
        "", "policy/s", "none/s", "ratio", "CPU us/op policy", "CPU us/op none", "CPU added"
    );
    println!(
        "  {:<10} {:>10.0} {:>10.0} {:>7.0}% {:>16.0} {:>16.0} {:>9.1}%",
        "create",
        rates[0].ops,
        rates[1].ops,
        100.0 * rates[0].ops / rates[1].ops,
        rates[0].cpu_us,
        rates[1].cpu_us,
        100.0 * (rates[0].cpu_us / rates[1].cpu_us - 1.0),
    );
    println!(
        "  (target: a policy adds <= 20% to a create's CPU; CPU: user+system time of each apiserver process)"
    );
    for (name, server) in &mut sides {
        server
            .check_alive()
            .with_context(|| format!("the {name} apiserver"))?;
    }
    for (_, server) in sides {
        server.stop().await?;
    }
    Ok(())
}
