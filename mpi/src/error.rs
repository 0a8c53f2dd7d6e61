//! The C boundary: every exported call runs in [`guard`], which turns its `Fail` — or a panic,
//! which must never unwind into C — into an MPI error code and hands it to the error handler
//! of the communicator or window the call was on.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::abi::*;
use crate::state;

/// Whose error handler a failure goes to.
#[derive(Clone, Copy, Debug)]
pub enum On {
    Comm(i32),
    Win(i32),
}

/// A failed call: its MPI error class, what went wrong, and whose handler hears of it.
#[derive(Debug)]
pub struct Fail {
    pub class: i32,
    pub message: String,
    pub on: On,
}

pub type Res<T = ()> = std::result::Result<T, Fail>;

/// A failure of `class` with `message`, for `MPI_COMM_WORLD`'s handler unless [`Fail::on`]
/// names another object.
pub fn fail(class: i32, message: impl Into<String>) -> Fail {
    Fail {
        class,
        message: message.into(),
        on: On::Comm(MPI_COMM_WORLD),
    }
}

impl On {
    /// The communicator's or window's handle.
    pub fn handle(self) -> i32 {
        let (On::Comm(handle) | On::Win(handle)) = self;
        handle
    }
}

impl Fail {
    pub fn on(mut self, on: On) -> Self {
        self.on = on;
        self
    }
}

impl From<onesided_client::Error> for Fail {
    fn from(error: onesided_client::Error) -> Self {
        let class = match error.class() {
            Some(class) => class_of(class),
            None => MPI_ERR_OTHER,
        };
        fail(class, error.to_string())
    }
}

/// Something a call on `on` returns, with failures sent to `on`'s handler.
pub trait OnObject<T> {
    fn on(self, on: On) -> Res<T>;
}

impl<T, E: Into<Fail>> OnObject<T> for std::result::Result<T, E> {
    fn on(self, on: On) -> Res<T> {
        self.map_err(|error| error.into().on(on))
    }
}

/// Runs the body of the exported call `name`: `MPI_SUCCESS`, or the failure's class after its
/// handler let it return (`MPI_ERRORS_RETURN`); `MPI_ERRORS_ARE_FATAL` ends the process.
pub fn guard(name: &str, body: impl FnOnce() -> Res) -> c_int {
    let failed = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return MPI_SUCCESS,
        Ok(Err(fail)) => fail,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            fail(MPI_ERR_INTERN, format!("internal error: {what}"))
        }
    };
    let handler = state::errhandler(failed.on);
    if handler == MPI_ERRORS_RETURN {
        if report_returned() {
            let (class, _) = class_text(failed.class);
            eprintln!(
                "onesided MPI: rank {}: {name}: {class}: {} (returned: MPI_ERRORS_RETURN)",
                state::rank_for_messages(),
                failed.message
            );
        }
        return failed.class;
    }
    if let Some(function) = state::user_errhandler(handler) {
        let (On::Win(mut object) | On::Comm(mut object)) = failed.on;
        let mut code = failed.class;
        // SAFETY: the program's handler, called as MPI calls it (window or communicator, code)
        unsafe { function(&mut object, &mut code) };
        return failed.class;
    }
    let (class, _) = class_text(failed.class);
    if failed.class == MPIX_ERR_PROC_FAILED {
        // another rank's end caused this one: let `mpiexec` see that rank end first, so the
        // job ends with its status (ours would only follow from it); mpiexec kills us meanwhile
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    eprintln!(
        "onesided MPI: rank {}: {name}: {class}: {} (MPI_ERRORS_ARE_FATAL: the job ends)",
        state::rank_for_messages(),
        failed.message
    );
    fatal_exit(failed.class)
}

/// Whether errors returned to the program (`MPI_ERRORS_RETURN`) are printed too:
/// `ONESIDED_MPI_REPORT_ERRORS=1` (the class alone reaches the program; this says which call
/// and why).
fn report_returned() -> bool {
    static REPORT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *REPORT.get_or_init(|| {
        std::env::var_os("ONESIDED_MPI_REPORT_ERRORS").is_some_and(|value| value != "0")
    })
}

/// Ends the process at once with a non-zero status (the job's `mpiexec` then ends the others).
pub fn fatal_exit(code: i32) -> ! {
    let status = if code & 0xff == 0 { 1 } else { code & 0xff };
    // exit, not _exit: the program's buffered output before the error reaches the terminal
    std::process::exit(status)
}
