//! onesided-bench: what onesided's RMA calls cost, measured side by side with references.
//!
//! [`run`] attaches ranks to a server (one given by URL, or one started in this process on
//! `127.0.0.1:0` with a temporary data directory), times the patterns of issue 6 and returns a
//! [`Report`]: medians of per-iteration latencies in microseconds after a warm-up of 10 % that
//! is not measured, and throughputs. The references — a raw TCP ping-pong, raw TCP bulk
//! throughput, MPICH timing the same patterns over TCP when `mpicc` and `mpiexec` are on `PATH`
//! ([`mpich`]), and, when a Redis answers on `127.0.0.1:6379` and `redis-benchmark` is on
//! `PATH`, Redis GET/SET and INCR, and, when `redis-server` and `redis-benchmark` are on
//! `PATH`, Redis INCR with every write fsynced before its reply on a Redis the bench starts
//! ([`redis`]) — are measured in the same run, so that the ratios compare like with like. So are the storage references of the audit's latency targets ([`storage`]):
//! a 200-byte append + `fdatasync` and bulk writes in the data directory's file system, and a
//! commit into PostgreSQL when one is given.
//!
//! With the audit off (the default) the patterns run again against the server's default
//! configuration — audit `sync` into SQLite in its data directory — and, given a PostgreSQL
//! `--database-url`, a third time in `sync` into that database; the report puts them side by
//! side with the `off` figures.
//!
//! Nothing here asserts a speed: the figures are printed ([`Report::table`]) or emitted as one
//! JSON object ([`Report::to_json`]).
//!
//! [`fence_scaling`] runs only the fence epochs, at the world sizes asked, with the audit off
//! and in `sync` side by side ([`scaling_table`]).
//!
//! [`soak`] is the other mode: a mixed workload for a fixed time with the process's resident
//! memory sampled, and a verdict on whether it stayed flat.
//!
//! Split by concern (issue 41): `options` (what to run), `patterns` (the patterns against one
//! server), `full_run` (`run`), `report` (the report, its JSON and its tables), `scaling`
//! (`--fence-scaling`) and `trace` (`trace_as_the_server`), beside the measurements' own modules.
//!
//! Owns: the crate's public paths (every item is re-exported here, so `onesided_bench::X` is
//! what it was before the split) and the process's allocator. Must not: measure, run or render
//! anything itself (its modules do).

/// The allocator of the `onesided-server` binary (its `main.rs`), so that the in-process server
/// measures what the binary does; the bench's clients, in the same process, use it too.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod awake;
mod full_run;
pub mod grpc;
mod measure;
pub mod mpich;
mod options;
mod patterns;
pub mod redis;
mod reference;
mod report;
pub mod rss;
mod scaling;
mod server;
pub mod soak;
pub mod storage;
mod trace;

pub use full_run::run;

/// How the SQLite stores of the in-process servers and of the commit floors write events
/// (`--audit-sqlite-rows`): set once by the binary before a run; the server's default (one
/// row per commit and window) unless set.
static SQLITE_ROWS: std::sync::OnceLock<onesided_server::audit::Rows> = std::sync::OnceLock::new();

/// Has the in-process servers' and the commit floors' SQLite stores write events as `rows`
/// says (the first call counts; call it before a run).
pub fn write_sqlite_rows(rows: onesided_server::audit::Rows) {
    let _ = SQLITE_ROWS.set(rows);
}

/// [`write_sqlite_rows`]'s choice (the server's default unless set).
pub(crate) fn sqlite_rows() -> onesided_server::audit::Rows {
    SQLITE_ROWS.get().copied().unwrap_or_default()
}

/// What the examples take the bench's `--audit-sqlite-rows` from: `ONESIDED_AUDIT_SQLITE_ROWS`
/// (`groups` or `per-event`), else `ONESIDED_AUDIT_SQLITE_GROUPS=true` (groups, as the flag of
/// 0.3 said), else `None` (the server's default).
///
/// # Errors
/// Another value of `ONESIDED_AUDIT_SQLITE_ROWS`.
pub fn sqlite_rows_from_env() -> anyhow::Result<Option<onesided_server::audit::Rows>> {
    use clap::ValueEnum;
    if let Ok(value) = std::env::var("ONESIDED_AUDIT_SQLITE_ROWS") {
        let rows = onesided_server::audit::Rows::from_str(&value, false).map_err(|_| {
            anyhow::anyhow!("ONESIDED_AUDIT_SQLITE_ROWS is groups or per-event, not {value:?}")
        })?;
        return Ok(Some(rows));
    }
    let groups = std::env::var("ONESIDED_AUDIT_SQLITE_GROUPS").is_ok_and(|value| value == "true");
    Ok(groups.then_some(onesided_server::audit::Rows::Groups))
}

/// An example's arguments (after the program's name) and the usage line its errors name.
#[derive(Debug)]
pub struct ExampleArgs {
    words: Vec<String>,
    usage: &'static str,
}

impl ExampleArgs {
    /// The process's arguments; `usage` (`NAME [ARG ...]`) is what a bad one is told.
    pub fn from_env(usage: &'static str) -> Self {
        let words = std::env::args().skip(1).collect();
        ExampleArgs { words, usage }
    }

    /// The argument at `index`, if given.
    pub fn word(&self, index: usize) -> Option<&str> {
        self.words.get(index).map(String::as_str)
    }

    /// The number at `index`: `default` when it is not given.
    ///
    /// # Errors
    /// The argument is there and not a whole number.
    pub fn number(&self, index: usize, default: usize) -> anyhow::Result<usize> {
        use anyhow::Context;
        self.word(index)
            .map_or(Ok(default), str::parse)
            .with_context(|| format!("usage: {}", self.usage))
    }
}

pub use measure::{atomic_round_trip, median};
pub use options::{Audit, Options, Threads, QUICK_ITERATIONS};
pub(crate) use patterns::PATTERN_TIMEOUT;
pub use patterns::{BusyPolled, Patterns, LATENCY_KEYS};
pub use report::{latency_target, Report, SYNC_TARGET_REFERENCES};
pub use scaling::{fence_scaling, scaling_table, Scaling};
pub use server::InProcess;
pub use trace::trace_as_the_server;
