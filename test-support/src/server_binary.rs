//! The `onesided-server` binary's command line as the suites start it, and what a server that
//! must refuse to start printed.
//!
//! Owns: the flags and environment every started server has (where it listens, its data
//! directory, its log filter, no colour, no stdin). Must not: name the binary (only the crate
//! that builds it can, with `env!("CARGO_BIN_EXE_onesided-server")`), or add a flag a test did
//! not ask for.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The server `binary` listening on `listen` with `data` as its data directory and `extra`
/// flags, logging at `log` (`RUST_LOG`) without colour, its stdin closed.
pub fn command(binary: &str, listen: &str, data: &Path, extra: &[&str], log: &str) -> Command {
    let mut command = Command::new(binary);
    command
        .args(["--listen", listen, "--data-dir"])
        .arg(data)
        .args(extra)
        .env("RUST_LOG", log)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    command
}

/// Runs `command` to its end ([`crate::run_to_exit`], at most `within`) and returns what it
/// printed, stdout then stderr; panics, with that, when it exited successfully.
pub fn refused_to_start(command: Command, within: Duration) -> String {
    let out = crate::run_to_exit(command, within);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{said}");
    said
}
