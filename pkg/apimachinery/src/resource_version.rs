//! What `resourceVersion`, `resourceVersionMatch`, `limit`, `continue` and `sendInitialEvents`
//! ask of a read, following the Kubernetes API concepts:
//!
//! | request | semantics |
//! |---|---|
//! | no `resourceVersion` | the most recent state, read consistently |
//! | `resourceVersion=0` (match unset or `NotOlderThan`) | any state; the cache's, as it is |
//! | `resourceVersion=N`, match `NotOlderThan` (or unset without `limit`) | a state not older than N |
//! | `resourceVersion=N`, match `Exact` (or unset with `limit`) | exactly the state at N |
//! | `continue=<token>` | the next page, at the token's revision |
//!
//! Invalid combinations are `Invalid` errors on the `ListOptions`, as upstream reports them.

use crate::errors::{ApiError, Status};
use crate::schema::GroupKind;
use crate::validation::field::{Error, ErrorList, Path};

/// `resourceVersionMatch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Match {
    /// At least this new.
    NotOlderThan,
    /// Exactly this revision.
    Exact,
}

/// The raw read options of a list or watch request, as they come from the query string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
    /// `limit`.
    pub limit: Option<i64>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `watch=true`.
    pub watch: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
}

/// What state a read returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Semantics {
    /// The most recent state, read consistently.
    Consistent,
    /// Any state the server has at hand (the cache's).
    Any,
    /// A state not older than the revision.
    NotOlderThan(i64),
    /// Exactly the state at the revision.
    Exact(i64),
    /// The page after a continue token (exact at the token's revision).
    Continue(String),
}

/// Parses a resourceVersion: a non-negative integer. Upstream answers anything else with
/// 400 `invalid resource version`.
pub fn parse(resource_version: &str) -> Result<i64, ApiError> {
    resource_version
        .parse::<i64>()
        .ok()
        .filter(|rv| *rv >= 0)
        .ok_or_else(|| {
            Status::bad_request(format!(
                "invalid resource version: {}",
                crate::gofmt::Quoted(resource_version)
            ))
            .into()
        })
}

fn list_options_invalid(errors: &ErrorList) -> Status {
    Status::invalid(&GroupKind::new("meta.k8s.io", "ListOptions"), "", errors)
}

/// Validates the options of a list or watch and decides what it reads.
///
/// For a watch, the result is where the stream starts: [`Semantics::Consistent`] and
/// [`Semantics::Any`] first send the current state as ADDED events (unless
/// `sendInitialEvents=false`), [`Semantics::NotOlderThan`] starts right after the revision.
pub fn read_semantics(options: &ReadOptions) -> Result<Semantics, ApiError> {
    let mut errors = ErrorList::new();
    let rv = options
        .resource_version
        .as_deref()
        .filter(|rv| !rv.is_empty());
    let raw_match = options
        .resource_version_match
        .as_deref()
        .filter(|m| !m.is_empty());
    let matched = match raw_match {
        None => None,
        Some("NotOlderThan") => Some(Match::NotOlderThan),
        Some("Exact") => Some(Match::Exact),
        Some(_) => None,
    };
    let token = options.continue_token.as_deref().filter(|c| !c.is_empty());
    let match_path = Path::new("resourceVersionMatch");
    if options.watch {
        // A watch is checked only for what a watch can ask.
        match options.send_initial_events {
            Some(send) => {
                if matched != Some(Match::NotOlderThan) {
                    errors.push(Error::forbidden(
                        &match_path,
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    ));
                }
                if send && !options.allow_watch_bookmarks {
                    errors.push(Error::forbidden(
                        &Path::new("allowWatchBookmarks"),
                        "allowWatchBookmarks must be true if sendInitialEvents = true",
                    ));
                }
            }
            None if raw_match.is_some() => {
                errors.push(Error::forbidden(&match_path, "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
            }
            None => {}
        }
    } else {
        if let Some(other) = raw_match.filter(|_| matched.is_none()) {
            errors.push(Error::not_supported(
                &match_path,
                other,
                &["Exact", "NotOlderThan", ""],
            ));
        }
        if matched.is_some() {
            if rv.is_none() {
                errors.push(Error::forbidden(
                    &match_path,
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if token.is_some() {
                errors.push(Error::forbidden(
                    &match_path,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        if matched == Some(Match::Exact) && rv == Some("0") {
            errors.push(Error::forbidden(
                &match_path,
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
        if options.send_initial_events.is_some() {
            errors.push(Error::forbidden(
                &Path::new("sendInitialEvents"),
                "sendInitialEvents is forbidden for list",
            ));
        }
        if let Some(limit) = options.limit.filter(|l| *l < 0) {
            errors.push(Error::invalid(
                &Path::new("limit"),
                limit,
                "must be greater than or equal to 0",
            ));
        }
    }
    if !errors.is_empty() {
        return Err(list_options_invalid(&errors).into());
    }
    if let Some(token) = token {
        if rv.is_some() {
            return Err(Status::bad_request(
                "specifying resource version is not allowed when using continue",
            )
            .into());
        }
        return Ok(Semantics::Continue(token.to_owned()));
    }
    let Some(rv) = rv else {
        return Ok(Semantics::Consistent);
    };
    let revision = parse(rv)?;
    let limited = options.limit.is_some_and(|l| l > 0);
    Ok(match (revision, matched) {
        (0, _) => Semantics::Any,
        (n, Some(Match::Exact)) => Semantics::Exact(n),
        (n, Some(Match::NotOlderThan)) => Semantics::NotOlderThan(n),
        // The legacy rule: a limited list at a revision reads exactly that revision.
        (n, None) if limited && !options.watch => Semantics::Exact(n),
        (n, None) => Semantics::NotOlderThan(n),
    })
}

/// What a get with `resourceVersion` reads: unset is consistent, `0` any, `N` not older than N.
pub fn get_semantics(resource_version: Option<&str>) -> Result<Semantics, ApiError> {
    match resource_version.filter(|rv| !rv.is_empty()) {
        None => Ok(Semantics::Consistent),
        Some(rv) => Ok(match parse(rv)? {
            0 => Semantics::Any,
            n => Semantics::NotOlderThan(n),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(rv: Option<&str>, matched: Option<&str>, limit: Option<i64>) -> ReadOptions {
        ReadOptions {
            resource_version: rv.map(str::to_owned),
            resource_version_match: matched.map(str::to_owned),
            limit,
            ..ReadOptions::default()
        }
    }

    #[test]
    fn list_semantics_follow_the_api_concepts_table() {
        let cases = [
            (opts(None, None, None), Semantics::Consistent),
            (opts(None, None, Some(500)), Semantics::Consistent),
            (opts(Some(""), None, None), Semantics::Consistent),
            (opts(Some("0"), None, None), Semantics::Any),
            (opts(Some("0"), None, Some(500)), Semantics::Any),
            (opts(Some("0"), Some("NotOlderThan"), None), Semantics::Any),
            (opts(Some("42"), None, None), Semantics::NotOlderThan(42)),
            (opts(Some("42"), None, Some(10)), Semantics::Exact(42)),
            (
                opts(Some("42"), Some("NotOlderThan"), Some(10)),
                Semantics::NotOlderThan(42),
            ),
            (opts(Some("42"), Some("Exact"), None), Semantics::Exact(42)),
        ];
        for (options, expected) in cases {
            assert_eq!(read_semantics(&options).unwrap(), expected, "{options:?}");
        }
        let token = ReadOptions {
            continue_token: Some("abc".into()),
            limit: Some(5),
            ..ReadOptions::default()
        };
        assert_eq!(
            read_semantics(&token).unwrap(),
            Semantics::Continue("abc".into())
        );
    }

    #[test]
    fn invalid_combinations_are_refused_as_upstream() {
        let invalid = |options: ReadOptions, needle: &str| {
            let status = read_semantics(&options).unwrap_err();
            assert!(
                status.message.contains(needle),
                "{options:?}: {}",
                status.message
            );
            status
        };
        let status = invalid(
            opts(None, Some("NotOlderThan"), None),
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        );
        assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
        invalid(
            opts(Some("0"), Some("Exact"), None),
            "forbidden for resourceVersion \"0\"",
        );
        invalid(
            opts(Some("1"), Some("Newest"), None),
            "Unsupported value: \"Newest\"",
        );
        invalid(
            opts(Some("1"), None, Some(-1)),
            "must be greater than or equal to 0",
        );
        let with_token = ReadOptions {
            continue_token: Some("t".into()),
            resource_version_match: Some("Exact".into()),
            resource_version: Some("1".into()),
            ..ReadOptions::default()
        };
        invalid(
            with_token,
            "resourceVersionMatch is forbidden when continue is provided",
        );
        let rv_and_token = ReadOptions {
            continue_token: Some("t".into()),
            resource_version: Some("1".into()),
            ..ReadOptions::default()
        };
        assert_eq!(read_semantics(&rv_and_token).unwrap_err().code, 400);
        let bad = read_semantics(&opts(Some("abc"), None, None)).unwrap_err();
        assert_eq!(
            (bad.code, bad.message.as_str()),
            (400, "invalid resource version: \"abc\"")
        );
        assert!(parse("-1").is_err());
    }

    #[test]
    fn watch_options() {
        let watch = |rv: Option<&str>,
                     matched: Option<&str>,
                     send: Option<bool>,
                     bookmarks: bool| ReadOptions {
            resource_version: rv.map(str::to_owned),
            resource_version_match: matched.map(str::to_owned),
            watch: true,
            send_initial_events: send,
            allow_watch_bookmarks: bookmarks,
            ..ReadOptions::default()
        };
        assert_eq!(
            read_semantics(&watch(Some("7"), None, None, false)).unwrap(),
            Semantics::NotOlderThan(7)
        );
        assert_eq!(
            read_semantics(&watch(None, None, None, true)).unwrap(),
            Semantics::Consistent
        );
        // The streaming list kube-rs sends.
        assert_eq!(
            read_semantics(&watch(Some("0"), Some("NotOlderThan"), Some(true), true)).unwrap(),
            Semantics::Any
        );
        assert_eq!(
            read_semantics(&watch(Some(""), None, Some(true), true))
                .unwrap_err()
                .code,
            422,
            "needs NotOlderThan"
        );
        // A consistent streaming list: no resourceVersion, NotOlderThan, initial events.
        assert_eq!(
            read_semantics(&watch(None, Some("NotOlderThan"), Some(true), true)).unwrap(),
            Semantics::Consistent
        );
        assert!(
            read_semantics(&watch(Some("0"), Some("NotOlderThan"), Some(true), false))
                .unwrap_err()
                .message
                .contains("allowWatchBookmarks")
        );
        assert!(
            read_semantics(&watch(Some("5"), Some("Exact"), None, true))
                .unwrap_err()
                .message
                .contains("forbidden for watch")
        );
        let list_with_send = ReadOptions {
            send_initial_events: Some(true),
            ..ReadOptions::default()
        };
        assert!(
            read_semantics(&list_with_send)
                .unwrap_err()
                .message
                .contains("forbidden for list")
        );
    }

    #[test]
    fn get_semantics_are_consistent_any_or_not_older_than() {
        assert_eq!(get_semantics(None).unwrap(), Semantics::Consistent);
        assert_eq!(get_semantics(Some("0")).unwrap(), Semantics::Any);
        assert_eq!(
            get_semantics(Some("12")).unwrap(),
            Semantics::NotOlderThan(12)
        );
        assert_eq!(get_semantics(Some("x")).unwrap_err().code, 400);
    }
}
