//! Exit codes: one mapping from what went wrong to the number a script sees.
//!
//! Owns: `Usage` (exit 2) and `Failed` (exit 1, already reported), `exit_code`, the table
//! from an error's kind and cause to 1–4 that `EXIT_CODES` documents, and `error_json`, the
//! error as `--json` reports it. Must not: print anything (the caller prints the error once),
//! or guess a code from an error's text.

use onesided_client::Error;
use onesided_scenario::explore::ExploreError;
use onesided_scenario::{ParseError, RunError};

/// A usage error of ours (exit 2): a bad combination of arguments, an unreadable file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// A scenario or check that failed (exit 1), already reported.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Failed(pub String);

fn client_code(error: &Error) -> u8 {
    match error {
        Error::Connect { .. } | Error::Disconnected(_) => 4,
        Error::Config(_) => 2,
        // unreachable, or no answer within --timeout (ours or the server's deadline)
        Error::Status {
            code: tonic::Code::Unavailable | tonic::Code::DeadlineExceeded,
            ..
        } => 4,
        _ => 3,
    }
}

/// The MPI error class somewhere in `error`'s chain, if any.
fn class_of(error: &anyhow::Error) -> Option<onesided_core::ErrorClass> {
    error.chain().find_map(|cause| {
        if let Some(error) = cause.downcast_ref::<Error>() {
            return error.class();
        }
        if let Some(RunError::Client(error)) = cause.downcast_ref::<RunError>() {
            return error.class();
        }
        cause
            .downcast_ref::<onesided_core::RmaError>()
            .map(|error| error.class)
    })
}

/// `error` as `--json` reports it on stderr: one object, `{"error": {"message", "class"
/// (`MPI_ERR_…` or null), "exit_code"}}`.
pub fn error_json(error: &anyhow::Error, code: u8) -> serde_json::Value {
    serde_json::json!({
        "error": {
            "message": format!("{error:#}"),
            "class": class_of(error).map(onesided_core::ErrorClass::mpi_name),
            "exit_code": code,
        }
    })
}

/// The exit code for `error` (the table in `--help`).
pub fn exit_code(error: &anyhow::Error) -> u8 {
    for cause in error.chain() {
        if let Some(error) = cause.downcast_ref::<Error>() {
            return client_code(error);
        }
        if let Some(error) = cause.downcast_ref::<RunError>() {
            return match error {
                RunError::Client(error) => client_code(error),
                RunError::Unsupported { .. } => 3,
            };
        }
        if cause.is::<ExploreError>() {
            return 3;
        }
        if cause.is::<ParseError>() || cause.is::<Usage>() {
            return 2;
        }
        if cause.is::<onesided_core::RmaError>() {
            return 3;
        }
        if cause.is::<Failed>() {
            return 1;
        }
    }
    1
}
