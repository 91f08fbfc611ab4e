//! What `genplane networkregistry` prints: who holds an address or which allocated ranges
//! overlap a prefix ([`lookup`]), and every record of every claim ([`claims`]), as aligned
//! columns the way kubectl prints tables.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

use genplane_api::networkregistry::Prefix;

use crate::{Holding, Registry};

/// How long the first list of the claims may take before the tool gives up.
pub const LIST_PATIENCE: Duration = Duration::from_secs(30);

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// What `lookup` was asked is neither an address nor a prefix (or an IPv4-mapped one).
    #[error("{0}")]
    Query(String),
    /// Nothing allocated holds the address or overlaps the prefix.
    #[error("no allocated range holds {0}")]
    NotFound(String),
    /// The claims could not be listed.
    #[error(transparent)]
    Registry(#[from] crate::Error),
    /// The server did not answer the first list within [`LIST_PATIENCE`].
    #[error("listing the NetworkClaims: no answer within {}s", LIST_PATIENCE.as_secs())]
    NoAnswer,
}

/// What `lookup` was asked: an address, or a prefix.
#[derive(Debug, PartialEq, Eq)]
pub enum Query {
    /// The range holding this address.
    Address(IpAddr),
    /// The ranges overlapping this prefix.
    Prefix(Prefix),
}

impl FromStr for Query {
    type Err = Error;

    /// `10.96.0.10` or `10.0.0.0/8`; an IPv4-mapped IPv6 address is refused with the IPv4
    /// address to look up instead.
    fn from_str(text: &str) -> Result<Self, Error> {
        if text.contains('/') {
            let prefix =
                Prefix::parse_cidr(text).map_err(|e| Error::Query(format!("{text:?}: {e}")))?;
            return Ok(Query::Prefix(prefix));
        }
        let addr: IpAddr = text.parse().map_err(|_| {
            Error::Query(format!(
                "{text:?} is neither an IP address nor a CIDR prefix"
            ))
        })?;
        if let IpAddr::V6(v6) = addr
            && let Some(v4) = v6.to_ipv4_mapped()
        {
            return Err(Error::Query(format!(
                "{text:?} is an IPv4-mapped IPv6 address: look up {v4}"
            )));
        }
        Ok(Query::Address(addr))
    }
}

/// Starts a [`Registry`] for a one-shot report: a refusal or an unreachable server is told at
/// once, a server that never answers after [`LIST_PATIENCE`].
pub async fn start(client: kube::Client) -> Result<Registry, Error> {
    match tokio::time::timeout(LIST_PATIENCE, Registry::start(client)).await {
        Ok(started) => Ok(started?),
        Err(_) => Err(Error::NoAnswer),
    }
}

/// The allocated ranges that answer `what`, as a table (`PREFIX CLAIM RESOURCE DESCRIPTION`);
/// none is [`Error::NotFound`], so that scripts can test it.
pub fn lookup(registry: &Registry, what: &Query) -> Result<String, Error> {
    let found: Vec<Holding> = match what {
        Query::Address(addr) => registry.owner_of(*addr).into_iter().collect(),
        Query::Prefix(prefix) => registry.overlaps(prefix),
    };
    if found.is_empty() {
        return Err(Error::NotFound(match what {
            Query::Address(a) => a.to_string(),
            Query::Prefix(p) => p.to_string(),
        }));
    }
    let rows: Vec<Vec<String>> = found.iter().map(holding_row).collect();
    Ok(table(
        &["PREFIX", "CLAIM", "RESOURCE", "DESCRIPTION"],
        &rows,
    ))
}

/// Every record of every claim with its allocation, as a table (`CLAIM PREFIX RESOURCE STATUS
/// HOLDER`): `Allocated`, `Unavailable` with the holder, or `Pending` before the registry
/// decided.
pub fn claims(registry: &Registry) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_read_addresses_and_prefixes() {
        assert_eq!(
            "10.96.0.10".parse::<Query>().unwrap(),
            Query::Address("10.96.0.10".parse().unwrap())
        );
        assert_eq!(
            "10.0.0.1/8".parse::<Query>().unwrap(),
            Query::Prefix(Prefix::parse_canonical("10.0.0.0/8").unwrap())
        );
        assert!("nope".parse::<Query>().is_err());
        assert!("::ffff:10.0.0.1".parse::<Query>().is_err());
        assert!("::ffff:10.0.0.0/104".parse::<Query>().is_err());
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
