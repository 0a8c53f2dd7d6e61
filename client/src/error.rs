//! The client's error: an MPI error class where the call was refused, a plain gRPC failure
//! otherwise.
//!
//! Owns: `Error` and its kinds (an MPI refusal, a status without a class, a failed connection,
//! an ended session, a bad setting, an unexpected answer, a failing client audit store), the
//! gRPC code each maps to, and reading a status: the MPI class from its details (proto's
//! `rma_from_status`), and a status tonic made of a broken connection (one with a source) as
//! UNAVAILABLE. Must not: build the details of a status (only the server does, with proto's
//! `status_with_code`), retry or reattach (the session decides), or print.

use onesided_core::{ErrorClass, RmaError};
use tonic::{Code, Status};

/// Why a call failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Error {
    /// The call was refused with an MPI error class, by this library (at the call, like a
    /// bounds check at the origin) or by the server.
    #[error("{class}: {message}")]
    Mpi {
        /// The MPI error class.
        class: ErrorClass,
        /// The gRPC code the class maps to.
        code: Code,
        /// Why.
        message: String,
        /// The server refused the call before it changed anything (the audit store away): it
        /// may be made again as it was. This library has then put back whatever it changed
        /// for the call (the epoch it opened or closed, the stores it took to publish).
        unchanged: bool,
    },
    /// A gRPC failure that carries no MPI class (authentication, transport).
    #[error("{message} ({code:?})")]
    Status {
        /// The gRPC code.
        code: Code,
        /// The status message.
        message: String,
    },
    /// The server could not be reached.
    #[error("cannot connect to {url}: {message}")]
    Connect {
        /// The address.
        url: String,
        /// Why.
        message: String,
    },
    /// The session's stream ended; calls in flight have failed.
    #[error("the session ended: {0}")]
    Disconnected(String),
    /// A client-side setting cannot be used (a CA file without a certificate).
    #[error("{0}")]
    Config(String),
    /// The server answered with something this library did not expect.
    #[error("unexpected answer from the server: {0}")]
    Protocol(String),
    /// The audit store this session writes its own events to (given a database URL) cannot
    /// be used, or failed to store them (then every later call fails too: the session's chain
    /// of rows has a hole).
    #[error("client audit store: {0}")]
    AuditStore(String),
}

impl Error {
    /// The MPI error class, when the call was refused with one.
    pub fn class(&self) -> Option<ErrorClass> {
        match self {
            Error::Mpi { class, .. } => Some(*class),
            _ => None,
        }
    }

    /// Whether the call was refused before it changed anything, and may be made again as it
    /// was (the window's epoch state here is as before the call).
    pub fn unchanged(&self) -> bool {
        matches!(
            self,
            Error::Mpi {
                unchanged: true,
                ..
            }
        )
    }

    /// The same failure, reported by a call that did change something (it completed the
    /// refused one): not [`Error::unchanged`].
    pub(crate) fn changed(self) -> Self {
        match self {
            Error::Mpi {
                class,
                code,
                message,
                ..
            } => Error::Mpi {
                class,
                code,
                message,
                unchanged: false,
            },
            other => other,
        }
    }

    /// The gRPC code.
    pub fn code(&self) -> Code {
        match self {
            Error::Mpi { code, .. } | Error::Status { code, .. } => *code,
            Error::Connect { .. } | Error::Disconnected(_) | Error::AuditStore(_) => {
                Code::Unavailable
            }
            Error::Protocol(_) => Code::Internal,
            Error::Config(_) => Code::InvalidArgument,
        }
    }
}

impl From<RmaError> for Error {
    fn from(error: RmaError) -> Self {
        Error::Mpi {
            class: error.class,
            code: onesided_proto::grpc_code(error.class),
            message: error.message,
            unchanged: error.unchanged,
        }
    }
}

/// Whether tonic made `status` of a failure of the connection rather than received it: a
/// status the server sent has no source, one tonic made of a transport, HTTP/2 or I/O error
/// (a refused connection, a TLS mismatch, a keep-alive ping the server never answered) keeps
/// that error as its source.
pub(crate) fn from_transport(status: &Status) -> bool {
    std::error::Error::source(status).is_some()
}

impl From<Status> for Error {
    fn from(status: Status) -> Self {
        match onesided_proto::rma_from_status(&status) {
            Some(error) => Error::Mpi {
                class: error.class,
                code: status.code(),
                message: error.message,
                unchanged: error.unchanged,
            },
            // a status tonic made of a transport failure (one the server sent has no
            // source): no gRPC conversation took place, like when an http:// client meets a
            // TLS server (the failure then reads "h2 protocol error" or "operation was
            // canceled", depending on when the server hangs up), or it broke off, like when
            // the server stops answering keep-alive pings
            None if from_transport(&status) => Error::Status {
                code: Code::Unavailable,
                message: format!(
                    "{}: the connection failed (the server went away, or it serves TLS and the \
                     address is an http:// one)",
                    status.message()
                ),
            },
            None => Error::Status {
                code: status.code(),
                message: status.message().to_string(),
            },
        }
    }
}

impl From<onesided_proto::v1::MpiFailure> for Error {
    fn from(failure: onesided_proto::v1::MpiFailure) -> Self {
        let error = failure.error.unwrap_or_default();
        match ErrorClass::from_code(error.class) {
            Some(class) => Error::Mpi {
                class,
                code: Code::from_i32(failure.code),
                message: error.message,
                unchanged: error.unchanged,
            },
            None => Error::Status {
                code: Code::from_i32(failure.code),
                message: error.message,
            },
        }
    }
}

/// Shorthand.
pub type Result<T, E = Error> = std::result::Result<T, E>;
