//! `genplane networkregistry`: the network registry (KANA) for people, against a kubeconfig.
//!
//! - `genplane networkregistry lookup 10.96.0.10` prints the allocated range holding the
//!   address and the claim that holds it; `lookup 10.0.0.0/8` prints every allocated range
//!   overlapping the prefix (the one covering it, or those inside it). Nothing allocated there
//!   is an error (exit 1), so scripts can test it.
//! - `genplane networkregistry claims` prints every record of every claim with its allocation:
//!   `Allocated`, or `Unavailable` with the holder.
//!
//! The kubeconfig is `--kubeconfig`, else the first file of `KUBECONFIG`, else
//! `~/.kube/config`. Answers come from one list of the claims (the client library's
//! watch-backed index, [`genplane_networkregistry::Registry`]).

#![warn(missing_docs)]

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Arg, ArgMatches, Command};
use genplane_api::networkregistry::Prefix;
use genplane_component_base::process::Process;
use genplane_networkregistry::{Holding, Registry};

/// The command line.
pub fn command() -> Command {
    Command::new("networkregistry")
        .about("Ask the network registry who owns an address or a prefix, and list the claims")
        .arg(
            Arg::new("kubeconfig")
                .long("kubeconfig")
                .global(true)
                .value_parser(clap::value_parser!(PathBuf))
                .help("The kubeconfig of the API server (default: $KUBECONFIG, then ~/.kube/config)"),
        )
        .subcommand_required(true)
        .subcommand(
            Command::new("lookup")
                .about("Who holds an address (10.96.0.10), or which allocated ranges overlap a prefix (10.0.0.0/8)")
                .arg(Arg::new("what").required(true).value_name("IP|PREFIX")),
        )
        .subcommand(
            Command::new("claims").about("Every record of every claim, with its allocation"),
        )
}

/// What `lookup` was asked.
#[derive(Debug, PartialEq, Eq)]
enum Query {
    Address(IpAddr),
    Prefix(Prefix),
}

fn query(text: &str) -> anyhow::Result<Query> {
    if text.contains('/') {
        let prefix = Prefix::parse_cidr(text).map_err(|e| anyhow::anyhow!("{text:?}: {e}"))?;
        return Ok(Query::Prefix(prefix));
    }
    let addr: IpAddr = text
        .parse()
        .map_err(|_| anyhow::anyhow!("{text:?} is neither an IP address nor a CIDR prefix"))?;
    if let IpAddr::V6(v6) = addr
        && let Some(v4) = v6.to_ipv4_mapped()
    {
        anyhow::bail!("{text:?} is an IPv4-mapped IPv6 address: look up {v4}");
    }
    Ok(Query::Address(addr))
}

fn kubeconfig(matches: &ArgMatches, process: &Process) -> anyhow::Result<PathBuf> {
    genplane_controller::client::kubeconfig_path(
        matches
            .get_one::<PathBuf>("kubeconfig")
            .map(PathBuf::as_path),
        process.var("KUBECONFIG"),
        process.var("HOME"),
    )
    .context("no --kubeconfig, KUBECONFIG or HOME")
}

/// Rows as aligned columns, the header first.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}   ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn holding_row(holding: &Holding) -> Vec<String> {
    let reference = &holding.reference;
    vec![
        holding.prefix.to_string(),
        holding.claim.to_string(),
        if reference.group.is_empty() {
            reference.resource.clone()
        } else {
            format!("{}.{}", reference.resource, reference.group)
        },
        holding.description.clone().unwrap_or_default(),
    ]
}

const HOLDING_HEADER: &[&str] = &["PREFIX", "CLAIM", "RESOURCE", "DESCRIPTION"];

fn lookup(registry: &Registry, what: &Query) -> anyhow::Result<String> {
    let found: Vec<Holding> = match what {
        Query::Address(addr) => registry.owner_of(*addr).into_iter().collect(),
        Query::Prefix(prefix) => registry.overlaps(prefix),
    };
    if found.is_empty() {
        anyhow::bail!(
            "no allocated range holds {}",
            match what {
                Query::Address(a) => a.to_string(),
                Query::Prefix(p) => p.to_string(),
            }
        );
    }
    let rows: Vec<Vec<String>> = found.iter().map(holding_row).collect();
    Ok(table(HOLDING_HEADER, &rows))
}

fn claims(registry: &Registry) -> String {
    let mut rows = Vec::new();
    for claim in registry.claims() {
        let name = claim.metadata.name.clone().unwrap_or_default();
        for record in &claim.spec.address_space {
            let status = claim
                .status
                .iter()
                .flat_map(|s| &s.address_space)
                .find(|s| s.prefix == record.prefix);
            rows.push(vec![
                name.clone(),
                record.prefix.clone(),
                record.reference.resource.clone(),
                status.map_or("Pending".to_owned(), |s| s.status.clone()),
                status.and_then(|s| s.holder.clone()).unwrap_or_default(),
            ]);
        }
    }
    table(&["CLAIM", "PREFIX", "RESOURCE", "STATUS", "HOLDER"], &rows)
}

/// Runs `genplane networkregistry`.
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    let path = kubeconfig(matches, process)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let text = runtime.block_on(async {
        let (client, _) = genplane_controller::client::connect(Some(&path)).await?;
        // A refusal or an unreachable server is told at once; a server that never answers,
        // after 30 s.
        let registry =
            match tokio::time::timeout(std::time::Duration::from_secs(30), Registry::start(client))
                .await
            {
                Ok(started) => started?,
                Err(_) => anyhow::bail!("listing the NetworkClaims: no answer within 30s"),
            };
        match matches.subcommand() {
            Some(("lookup", sub)) => {
                let what = sub
                    .get_one::<String>("what")
                    .context("lookup needs an IP or a prefix")?;
                lookup(&registry, &query(what)?)
            }
            Some(("claims", _)) => Ok(claims(&registry)),
            _ => anyhow::bail!("a subcommand is required: lookup or claims"),
        }
    })?;
    print!("{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_read_addresses_and_prefixes() {
        assert_eq!(
            query("10.96.0.10").unwrap(),
            Query::Address("10.96.0.10".parse().unwrap())
        );
        assert_eq!(
            query("10.0.0.1/8").unwrap(),
            Query::Prefix(Prefix::parse_canonical("10.0.0.0/8").unwrap())
        );
        assert!(query("nope").is_err());
        assert!(query("::ffff:10.0.0.1").is_err());
        assert!(query("::ffff:10.0.0.0/104").is_err());
    }

    #[test]
    fn tables_align_their_columns() {
        let rows = vec![vec![
            "10.0.0.0/8".to_owned(),
            "a".to_owned(),
            "x".to_owned(),
        ]];
        assert_eq!(
            table(&["PREFIX", "CLAIM", "NOTE"], &rows),
            "PREFIX       CLAIM   NOTE\n10.0.0.0/8   a       x\n"
        );
    }
}
