//! The client's [`Error`] as a Python exception. The exception classes live in
//! `onesided/_errors.py` (one `OnesidedError` hierarchy, `MpiError` carrying the MPI error
//! class); this only says which kind of failure it was and hands over its parts.

use onesided_client::Error;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// `error` as the exception `onesided._errors._from_native` makes of it.
pub(crate) fn to_py(py: Python<'_>, error: Error) -> PyErr {
    let kind = match &error {
        Error::Mpi { .. } => "mpi",
        Error::Status { .. } => "status",
        Error::Connect { .. } => "connect",
        Error::Disconnected(_) => "disconnected",
        Error::Config(_) => "config",
        Error::Protocol(_) => "protocol",
        Error::AuditStore(_) => "audit_store",
    };
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
pub(crate) fn refused(
    py: Python<'_>,
    class: onesided_core::ErrorClass,
    message: impl Into<String>,
) -> PyErr {
    to_py(
        py,
        Error::from(onesided_core::RmaError::new(class, message.into())),
    )
}

/// The exception the client library makes of a refusal with MPI error class `class` (its wire
/// value): how the `onesided` package refuses a call it cannot even hand over, with the same
/// gRPC code as every other refusal of that class.
#[pyfunction]
pub(crate) fn refusal(py: Python<'_>, class: i32, message: &str) -> PyResult<Py<PyAny>> {
    let class = onesided_core::ErrorClass::from_code(class).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!("{class} is not an MPI error class"))
    })?;
    Ok(refused(py, class, message).into_value(py).into_any())
}
