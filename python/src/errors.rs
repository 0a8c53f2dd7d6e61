//! The client's [`Error`] as a Python exception. The exception classes live in
//! `onesided/_errors.py` (one `OnesidedError` hierarchy, `MpiError` carrying the MPI error
//! class); this only says which kind of failure it was and hands over its parts.

use onesided_client::Error;
use onesided_core::ErrorClass;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// `error` as the exception `onesided._errors._from_native` makes of it.
pub(crate) fn to_py(py: Python<'_>, error: Error) -> PyErr {
    as_kind(py, error, None)
}

/// `to_py`, with the kind of failure given instead of read off `error` (`"argument"`: an MPI
/// refusal of a bad name, also a `ValueError`).
fn as_kind(py: Python<'_>, error: Error, kind: Option<&str>) -> PyErr {
    let kind = kind.unwrap_or(match &error {
        Error::Mpi { .. } => "mpi",
        Error::Status { .. } => "status",
        Error::Connect { .. } => "connect",
        Error::Disconnected(_) => "disconnected",
        Error::Config(_) => "config",
        Error::Protocol(_) => "protocol",
        Error::AuditStore(_) => "audit_store",
    });
    let class = error.class().map(|class| class.code());
    let code = i32::from(error.code());
    let text = error.to_string();
    let unchanged = error.unchanged();
    let made = py
        .import("onesided._errors")
        .and_then(|errors| errors.getattr("_from_native"))
        .and_then(|make| make.call1((kind, class, code, text.as_str(), unchanged)));
    match made {
        Ok(exception) => PyErr::from_value(exception),
        // the package is not importable (the module was loaded on its own): still say why
        Err(_) => PyRuntimeError::new_err(text),
    }
}

/// A refusal made here, before the client library was asked: an MPI error like the ones the
/// library makes at the call.
pub(crate) fn refused(py: Python<'_>, class: ErrorClass, message: impl Into<String>) -> PyErr {
    to_py(py, refusal_of(class, message))
}

/// A name or number given to the package that it cannot use (an unknown datatype, op, lock
/// type, flavor or memory model): the MPI error of `class`, as `ArgumentError`, which is also
/// a `ValueError`.
pub(crate) fn bad_argument(py: Python<'_>, class: ErrorClass, message: impl Into<String>) -> PyErr {
    as_kind(py, refusal_of(class, message), Some("argument"))
}

/// The client library's error for a refusal of `class`, made here.
fn refusal_of(class: ErrorClass, message: impl Into<String>) -> Error {
    Error::from(onesided_core::RmaError::new(class, message.into()))
}

/// A client-side setting that cannot be used (a timeout that is no duration, a token that
/// cannot be sent): `ConfigError`, also a `ValueError`.
pub(crate) fn config(py: Python<'_>, message: impl Into<String>) -> PyErr {
    to_py(py, Error::Config(message.into()))
}

/// The exception the client library makes of a refusal with MPI error class `class` (its wire
/// value): how the `onesided` package refuses a call it cannot even hand over, with the same
/// gRPC code as every other refusal of that class; an `ArgumentError` when `argument` (a bad
/// name or value given).
#[pyfunction]
#[pyo3(signature = (class, message, argument = false))]
pub(crate) fn refusal(
    py: Python<'_>,
    class: i32,
    message: &str,
    argument: bool,
) -> PyResult<Py<PyAny>> {
    let class = ErrorClass::from_code(class).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!("{class} is not an MPI error class"))
    })?;
    let error = if argument {
        bad_argument(py, class, message)
    } else {
        refused(py, class, message)
    };
    Ok(error.into_value(py).into_any())
}
