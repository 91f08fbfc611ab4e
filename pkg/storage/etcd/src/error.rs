//! How etcd's failures become the storage contract's errors.

use std::path::PathBuf;

use genplane_storage::Error;
use tonic::{Code, Status};

/// What is wrong with an [`crate::EtcdConfig`]. Returned inside [`Error::Backend`] by
/// [`crate::EtcdStore::connect`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No endpoint was given.
    #[error("no etcd endpoints given")]
    NoEndpoints,
    /// A client certificate was given without its key, or a key without its certificate.
    #[error("a client certificate and its key must be given together")]
    IncompleteIdentity,
    /// A TLS file could not be read.
    #[error("reading {path}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// etcd ended a watch for a reason other than compaction.
#[derive(Debug, thiserror::Error)]
#[error("etcd canceled the watch: {reason}")]
pub struct WatchCanceled {
    /// etcd's reason.
    pub reason: String,
}

/// A failed etcd call, classified. Compaction and future-revision failures carry no numbers in
/// etcd's answer, so the caller, who knows the revision it asked for, completes them.
#[derive(Debug)]
pub(crate) enum Failure {
    /// "required revision has been compacted".
    Compacted,
    /// "required revision is a future revision".
    FutureRevision,
    /// The request never reached etcd (no connection could be made): safe to send again.
    Unsent(Error),
    /// The connection to the member broke while the request was out: whether it took effect is
    /// unknown, and the member is unreachable for now.
    Broken(Error),
    /// Anything else, already mapped.
    Other(Error),
}

impl Failure {
    /// The contract error, for requests that asked for no particular revision.
    pub(crate) fn into_error(self) -> Error {
        match self {
            Failure::Unsent(e) | Failure::Broken(e) | Failure::Other(e) => e,
            Failure::Compacted | Failure::FutureRevision => Error::backend(UnexpectedRevisionError),
        }
    }

    /// Whether the failure says the member cannot be reached (rather than that etcd answered).
    pub(crate) fn unreachable(&self) -> bool {
        matches!(self, Failure::Unsent(_) | Failure::Broken(_))
    }

    /// What went wrong, for logs and messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Failure::Compacted => "required revision has been compacted".to_owned(),
            Failure::FutureRevision => "required revision is a future revision".to_owned(),
            Failure::Unsent(e) | Failure::Broken(e) | Failure::Other(e) => match e {
                Error::Unavailable(message) => message.clone(),
                other => other.to_string(),
            },
        }
    }
}

/// etcd failed a request that asked for no particular revision with a revision error.
#[derive(Debug, thiserror::Error)]
#[error("etcd answered with a revision error where no revision was asked for")]
struct UnexpectedRevisionError;

/// Classifies an etcd client error.
pub(crate) fn classify(error: etcd_client::Error) -> Failure {
    match error {
        etcd_client::Error::GRpcStatus(status) => classify_status(status),
        etcd_client::Error::TransportError(e) => {
            Failure::Broken(Error::Unavailable(format!("etcd: {e}")))
        }
        etcd_client::Error::IoError(e) => Failure::Broken(Error::Unavailable(format!("etcd: {e}"))),
        other => Failure::Other(Error::backend(other)),
    }
}

fn classify_status(status: Status) -> Failure {
    let message = status.message();
    if message.contains("required revision has been compacted") {
        return Failure::Compacted;
    }
    if message.contains("required revision is a future revision") {
        return Failure::FutureRevision;
    }
    match status.code() {
        Code::Unavailable if never_connected(&status) => {
            Failure::Unsent(Error::Unavailable(describe(&status)))
        }
        // The connection failed under the request: not an answer from etcd.
        Code::Unavailable if transport_failure(&status) => {
            Failure::Broken(Error::Unavailable(describe(&status)))
        }
        Code::Unavailable => Failure::Other(Error::Unavailable(describe(&status))),
        Code::Cancelled if never_connected(&status) => {
            Failure::Unsent(Error::Unavailable(describe(&status)))
        }
        Code::DeadlineExceeded => Failure::Other(Error::Timeout),
        // "too many requests", "database space exceeded": etcd refused the request; it may
        // accept it later.
        Code::ResourceExhausted => Failure::Other(Error::Unavailable(describe(&status))),
        // The connection broke while the request was out (etcd killed, reset, broken pipe):
        // the request may or may not have taken effect, and trying again later may succeed.
        Code::Cancelled | Code::Unknown if transport_failure(&status) => {
            Failure::Broken(Error::Unavailable(describe(&status)))
        }
        _ => Failure::Other(Error::backend(etcd_client::Error::GRpcStatus(status))),
    }
}

/// Whether the status stands for a request that was never sent: the connection could not be
/// made, or it closed before the request went out (hyper cancels the requests still queued).
fn never_connected(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if error.is::<tonic::ConnectError>()
            || error
                .downcast_ref::<hyper::Error>()
                .is_some_and(hyper::Error::is_canceled)
        {
            return true;
        }
        source = error.source();
    }
    false
}

/// Whether the status stands for a failed connection rather than an answer from etcd.
fn transport_failure(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if error.is::<tonic::transport::Error>()
            || error.is::<hyper::Error>()
            || error.is::<std::io::Error>()
        {
            return true;
        }
        source = error.source();
    }
    false
}

fn describe(status: &Status) -> String {
    if status.message().is_empty() {
        format!("etcd: {}", status.code())
    } else {
        format!("etcd: {}", status.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: Code, message: &str) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(Status::new(code, message))
    }

    #[test]
    fn grpc_errors_map_to_the_contract() {
        assert!(matches!(
            classify(status(
                Code::OutOfRange,
                "etcdserver: mvcc: required revision has been compacted"
            )),
            Failure::Compacted
        ));
        assert!(matches!(
            classify(status(
                Code::OutOfRange,
                "etcdserver: mvcc: required revision is a future revision"
            )),
            Failure::FutureRevision
        ));
        assert!(matches!(
            classify(status(Code::Unavailable, "etcdserver: leader changed")),
            Failure::Other(Error::Unavailable(m)) if m.contains("leader changed")
        ));
        assert!(matches!(
            classify(status(Code::DeadlineExceeded, "context deadline exceeded")),
            Failure::Other(Error::Timeout)
        ));
        // A connection that broke under a request: its outcome is unknown, retrying may work.
        let mut broken = Status::new(Code::Unknown, "transport error");
        broken.set_source(std::sync::Arc::new(std::io::Error::from(
            std::io::ErrorKind::BrokenPipe,
        )));
        let broken = classify(etcd_client::Error::GRpcStatus(broken));
        assert!(
            matches!(&broken, Failure::Broken(e) if e.is_retryable()),
            "{broken:?}"
        );
        assert!(broken.unreachable());
        assert!(
            !classify(status(Code::Unavailable, "etcdserver: no leader")).unreachable(),
            "an answer from etcd says nothing against the member"
        );
        assert!(
            matches!(
                classify(status(Code::Unknown, "an answer from etcd")),
                Failure::Other(Error::Backend(_))
            ),
            "an Unknown status without a transport cause is not a connection failure"
        );
        let other = classify(status(
            Code::InvalidArgument,
            "etcdserver: request is too large",
        ));
        assert!(
            matches!(other, Failure::Other(Error::Backend(_))),
            "{other:?}"
        );
    }
}
