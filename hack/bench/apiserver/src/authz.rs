//! GET throughput under RBAC against `AlwaysAllow` (`--only authz`, run by
//! `hack/bench/authz.sh`): two SQLite apiservers side by side with the same static-token file,
//! the same objects and the same RBAC bindings, one authorizing with `--authorization-mode=RBAC`
//! and one with `--authorization-mode=AlwaysAllow`. The measured client is the token user
//! `reader`, bound to `view` in the read namespace and to nothing else, over a TLS connection
//! without a client certificate: the admin is in `system:masters`, which no authorizer is
//! asked about, so it would measure nothing.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use hyper::{Method, StatusCode};

use crate::client::Client;
use crate::process::Server;
use crate::{Args, Op, configmap, configmaps, create_namespace, interleaved};

/// The namespace the reader reads, holding one ConfigMap.
const NAMESPACE: &str = "bench-authz";
/// The ConfigMap the reader GETs.
const NAME: &str = "cm";
/// Namespaces the other users' RoleBindings are spread over (none is [`NAMESPACE`]).
const BINDING_NAMESPACES: usize = 10;
/// The measured user's token.
const READER_TOKEN: &str = "bench-authz-reader-token";
/// The token of `user-0`, bound to `view` in `bench-authz-0` only.
const USER0_TOKEN: &str = "bench-authz-user-0-token";

fn binding_namespace(i: usize) -> String {
    format!("{NAMESPACE}-{}", i % BINDING_NAMESPACES)
}

/// A RoleBinding or ClusterRoleBinding (no `namespace`) named `name` of the ClusterRole `view`.
fn view_binding(namespace: Option<&str>, name: &str, subjects: serde_json::Value) -> Bytes {
    let kind = if namespace.is_some() {
        "RoleBinding"
    } else {
        "ClusterRoleBinding"
    };
    Bytes::from(
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind,
            "metadata": { "name": name },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "view",
            },
            "subjects": subjects,
        })
        .to_string(),
    )
}

/// Binding `i` of the other users: `view` in `bench-authz-{i % 10}` to the user `user-i`, the
/// group `group-{i % 100}` and the service account `sa-i` of that namespace.
fn other_binding(i: usize) -> (String, Bytes) {
    let namespace = binding_namespace(i);
    let body = view_binding(
        Some(&namespace),
        &format!("view-{i:04}"),
        serde_json::json!([
            { "kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": format!("user-{i}") },
            { "kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": format!("group-{}", i % 100) },
            { "kind": "ServiceAccount", "name": format!("sa-{i}"), "namespace": namespace },
        ]),
    );
    (
        format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings"),
        body,
    )
}

/// ClusterRoleBinding `i`: `view` everywhere to `cluster-user-i` and `cluster-group-i`.
fn other_cluster_binding(i: usize) -> (String, Bytes) {
    let body = view_binding(
        None,
        &format!("bench-authz-view-{i:03}"),
        serde_json::json!([
            { "kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": format!("cluster-user-{i}") },
            { "kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": format!("cluster-group-{i}") },
        ]),
    );
    (
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings".to_owned(),
        body,
    )
}

/// POSTs every `(path, body)` of `requests` as the admin, `concurrency` at a time, each
/// expecting 201.
async fn create_all(
    client: &Client,
    requests: Vec<(String, Bytes)>,
    concurrency: usize,
) -> anyhow::Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for (path, body) in requests {
        if tasks.len() >= concurrency.max(1)
            && let Some(result) = tasks.join_next().await
        {
            result??;
        }
        let client = client.clone();
        tasks.spawn(async move {
            client
                .expect(Method::POST, &path, Some(body), StatusCode::CREATED)
                .await
                .map(drop)
        });
    }
    for result in tasks.join_all().await {
        result?;
    }
    Ok(())
}

/// Polls `GET path` as `client` until it answers `want` (the authorizer's policy follows the
/// watch caches, a moment after the writes).
async fn await_status(client: &Client, path: &str, want: StatusCode) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = client.call(Method::GET, path, None).await?;
        if status == want {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "GET {path}: {status}, wanted {want}: {}",
            String::from_utf8_lossy(&body[..body.len().min(500)])
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A server under test and its clients: the admin's and the token users' (no client
/// certificate).
struct Side {
    label: String,
    server: Server,
    reader: Client,
    user0: Client,
}

impl Side {
    /// Starts `bin` (`--genplane`, or `--compare` when `compare`) authorizing with `mode`.
    async fn start(
        bin: &Path,
        compare: bool,
        dir: &Path,
        mode: &'static str,
        tokens: &Path,
    ) -> anyhow::Result<Self> {
        let suffix = if compare { "-compare" } else { "" };
        let data_dir = dir.join(format!("authz-{}{suffix}", mode.to_ascii_lowercase()));
        let server = Server::apiserver(
            bin,
            &data_dir,
            &[
                format!("--token-auth-file={}", tokens.display()),
                format!("--authorization-mode={mode}"),
            ],
        )
        .await
        .with_context(|| format!("starting the apiserver with --authorization-mode={mode}"))?;
        let config = crate::tls::kubeconfig(&data_dir.join("admin.kubeconfig"))?;
        let anonymous = Client::connect(&server.base, config.tls_without_certificate).await?;
        Ok(Self {
            label: format!("{mode}{}", if compare { " (--compare)" } else { "" }),
            reader: anonymous.with_bearer(READER_TOKEN)?,
            user0: anonymous.with_bearer(USER0_TOKEN)?,
            server,
        })
    }
}

/// Starts both servers, fills them, checks that RBAC decides as it should, and measures.
pub(crate) async fn authz(args: &Args, dir: &Path) -> anyhow::Result<()> {
    let tokens = dir.join("authz-tokens.csv");
    std::fs::write(
        &tokens,
        format!("{READER_TOKEN},reader,uid-reader\n{USER0_TOKEN},user-0,uid-user-0\n"),
    )?;
    // RBAC and AlwaysAllow of `--genplane`, then (with `--compare`) of the other executable.
    let mut sides = vec![
        Side::start(&args.genplane(), false, dir, "RBAC", &tokens).await?,
        Side::start(&args.genplane(), false, dir, "AlwaysAllow", &tokens).await?,
    ];
    if let Some(compare) = &args.compare {
        sides.push(Side::start(compare, true, dir, "RBAC", &tokens).await?);
        sides.push(Side::start(compare, true, dir, "AlwaysAllow", &tokens).await?);
    }
    let one = format!("{}/{NAME}", configmaps(NAMESPACE));
    let cluster_bindings = (args.bindings / 10).max(1);
    for side in &sides {
        // The same objects on both servers, so that only the authorizer differs.
        let admin = &side.server.client;
        create_namespace(admin, NAMESPACE).await?;
        for i in 0..BINDING_NAMESPACES {
            create_namespace(admin, &binding_namespace(i)).await?;
        }
        admin
            .expect(
                Method::POST,
                &configmaps(NAMESPACE),
                Some(configmap(NAME, args.value_size, None)),
                StatusCode::CREATED,
            )
            .await?;
        let mut requests: Vec<(String, Bytes)> =
            (0..cluster_bindings).map(other_cluster_binding).collect();
        requests.extend((1..args.bindings).map(other_binding));
        create_all(admin, requests, args.concurrency).await?;
        // Last, so that when user-0 is allowed the RoleBindings before it are in the policy.
        let reader = (
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/rolebindings"),
            view_binding(
                Some(NAMESPACE),
                "reader-view",
                serde_json::json!([
                    { "kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "reader" },
                ]),
            ),
        );
        create_all(admin, vec![reader, other_binding(0)], 1).await?;
    }

    // RBAC is really on: the reader may read; user-0 may list in its own namespace (once its
    // binding, the last one written, is in the policy) and not in the read namespace.
    for side in &sides {
        await_status(&side.reader, &one, StatusCode::OK).await?;
        await_status(
            &side.reader,
            &format!("{one}?resourceVersion=0"),
            StatusCode::OK,
        )
        .await?;
    }
    for pair in sides.chunks_exact(2) {
        let (rbac, allow) = (&pair[0], &pair[1]);
        await_status(
            &rbac.user0,
            &configmaps(&binding_namespace(0)),
            StatusCode::OK,
        )
        .await?;
        let (status, _) = rbac.user0.call(Method::GET, &one, None).await?;
        anyhow::ensure!(
            status == StatusCode::FORBIDDEN,
            "user-0 read {one} on {}: {status}, wanted 403",
            rbac.label
        );
        let (status, _) = allow.user0.call(Method::GET, &one, None).await?;
        anyhow::ensure!(
            status == StatusCode::OK,
            "user-0 read {one} on {}: {status}, wanted 200",
            allow.label
        );
    }

    println!(
        "\nGET of one ConfigMap ({} B data) as the token user `reader` (no client certificate), \
         RBAC with {} RoleBindings over {BINDING_NAMESPACES} namespaces and {cluster_bindings} \
         ClusterRoleBindings of other subjects vs AlwaysAllow, concurrency {}, {} rounds of \
         {:.2} s, interleaved",
        args.value_size, args.bindings, args.concurrency, args.rounds, args.slice
    );
    println!(
        "  checked first: reader 200 on both; user-0 403 on RBAC in {NAMESPACE}, 200 in its namespace; user-0 200 on AlwaysAllow"
    );
    println!(
        "  {:<24} {:>10} {:>14} {:>8} {:>30}",
        "request", "RBAC/s", "AlwaysAllow/s", "ratio", "CPU us/op: RBAC, AlwaysAllow"
    );
    for (label, path) in [
        ("GET", one.clone()),
        ("GET ?resourceVersion=0", format!("{one}?resourceVersion=0")),
    ] {
        let op = |client: &Client| -> Op {
            let (client, path) = (client.clone(), path.clone());
            Arc::new(move |_| {
                let (client, path) = (client.clone(), path.clone());
                Box::pin(async move {
                    client
                        .expect(Method::GET, &path, None, StatusCode::OK)
                        .await?;
                    Ok(())
                })
            })
        };
        let mut ops = Vec::new();
        for side in &sides {
            ops.push((op(&side.reader), vec![side.server.pid()?]));
        }
        let rates = interleaved(&ops, args).await?;
        for (i, pair) in rates.chunks(2).enumerate() {
            let label = if i == 0 { label } else { "  --compare" };
            println!(
                "  {label:<24} {:>10.0} {:>14.0} {:>7.0}% {:>18.0} {:>11.0}",
                pair[0].ops,
                pair[1].ops,
                100.0 * pair[0].ops / pair[1].ops,
                pair[0].cpu_us,
                pair[1].cpu_us,
            );
        }
        if rates.len() == 4 {
            println!(
                "  {:<24} --genplane vs --compare: RBAC {:.2}x its ops/s ({:.2}x its CPU/op), AlwaysAllow {:.2}x ({:.2}x)",
                "",
                rates[0].ops / rates[2].ops,
                rates[0].cpu_us / rates[2].cpu_us,
                rates[1].ops / rates[3].ops,
                rates[1].cpu_us / rates[3].cpu_us,
            );
        }
    }
    println!(
        "  (target: RBAC >= 90% of AlwaysAllow; CPU: user+system time of each apiserver process)"
    );
    for side in &mut sides {
        side.server
            .check_alive()
            .with_context(|| format!("the {} apiserver", side.label))?;
    }
    for side in sides {
        side.server.stop().await?;
    }
    Ok(())
}
