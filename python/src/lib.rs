//! `onesided._onesided`: the Rust client library (`onesided-client`) as a Python module. The
//! `onesided` package (python/onesided/) wraps it with numpy-typed values; everything that
//! decides what an MPI call means — the epoch state, the private copy and when it is published
//! and refreshed, heartbeats, the client's audit events — is the Rust client's own code.
//!
//! - `admin.rs`: `Admin`, `WindowSpec`, `WindowDescription`.
//! - `audit.rs`: `Audit` (events, check, replay, verify of the audit log).
//! - `session.rs`: `NativeSession` (attach as a rank, barrier, close).
//! - `window.rs`: `NativeWindow` (every MPI call, on bytes and datatype names), `NativePending`.
//! - `explore.rs`: `explore`, the schedule explorer on a scenario's text (no server).
//! - `errors.rs`: the client's `Error` as the package's Python exceptions (`onesided._errors`).
//!
//! One tokio runtime serves every object of the module. A call that waits (a fence, a lock,
//! a barrier, a connection) gives up the GIL while it waits, so ranks can run in Python
//! threads of one process, and it checks for Ctrl-C every `SIGNAL_CHECK` (100 ms).

mod admin;
mod audit;
mod errors;
mod explore;
mod session;
mod window;

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use pyo3::prelude::*;

/// How often a waiting call takes the GIL back to see whether Python has a signal to handle
/// (Ctrl-C raises `KeyboardInterrupt` instead of waiting for the call).
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// The module's one runtime: the client's tasks (each session's reader and heartbeat, its
/// audit writer) run on it, whichever Python thread made the session.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("onesided")
            .enable_all()
            .build()
            .unwrap_or_else(|error| panic!("cannot start the onesided runtime: {error}"))
    })
}

/// Runs `future` to its end on the runtime without the GIL, taking it back every
/// [`SIGNAL_CHECK`] to let Python raise a pending signal (the call is then abandoned: `Err`).
fn block<T, F>(py: Python<'_>, future: F) -> PyResult<T>
where
    F: Future<Output = T> + Send,
    T: Send,
{
    let mut future = Box::pin(future);
    loop {
        let step = py.detach(|| {
            runtime().block_on(async { tokio::time::timeout(SIGNAL_CHECK, &mut future).await })
        });
        match step {
            Ok(output) => return Ok(output),
            Err(_still_waiting) => {
                if let Err(signal) = py.check_signals() {
                    let _entered = runtime().enter();
                    drop(future);
                    return Err(signal);
                }
            }
        }
    }
}

/// [`block`] for a client call: its error becomes the package's exception.
fn wait<T, F>(py: Python<'_>, future: F) -> PyResult<T>
where
    F: Future<Output = onesided_client::Result<T>> + Send,
    T: Send,
{
    block(py, future)?.map_err(|error| errors::to_py(py, error))
}

/// Runs a call that does not wait (an operation, a store) inside the runtime, in case the
/// client starts a task.
fn now<T>(py: Python<'_>, call: impl FnOnce() -> onesided_client::Result<T>) -> PyResult<T> {
    let _entered = runtime().enter();
    call().map_err(|error| errors::to_py(py, error))
}

/// Info pairs as the package hands them over, as the client's calls take them.
fn str_pairs(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect()
}

/// A client object that is dropped inside the runtime: dropping the last handle of a session
/// may close its audit store's connections, which needs one.
#[derive(Debug)]
struct InRuntime<T>(Option<T>);

impl<T> InRuntime<T> {
    fn new(value: T) -> Self {
        InRuntime(Some(value))
    }
}

impl<T> std::ops::Deref for InRuntime<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0
            .as_ref()
            .unwrap_or_else(|| unreachable!("taken only when dropped"))
    }
}

impl<T> Drop for InRuntime<T> {
    fn drop(&mut self) {
        let _entered = runtime().enter();
        drop(self.0.take());
    }
}

/// The native half of the `onesided` package; import `onesided`, not this.
#[pymodule]
mod _onesided {
    use pyo3::prelude::*;

    #[pymodule_export]
    use crate::admin::{Admin, WindowDescription, WindowSpec, WorldSummary, WorldTokens};
    #[pymodule_export]
    use crate::audit::{Audit, AuditEntry, Finding, RecordedWindow};
    #[pymodule_export]
    use crate::errors::refusal;
    #[pymodule_export]
    use crate::explore::explore;
    #[pymodule_export]
    use crate::session::NativeSession;
    #[pymodule_export]
    use crate::window::{pack, unpack, NativePending, NativeWindow};

    #[pymodule_init]
    fn init(module: &Bound<'_, PyModule>) -> PyResult<()> {
        module.add("DATATYPES", crate::window::datatypes())
    }
}
