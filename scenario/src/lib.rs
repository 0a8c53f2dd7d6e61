//! Scenarios: small multi-rank RMA programs in the `.rma` format of docs/scenarios.md (a published
//! interface), parsed, run against a server, and explored on core's simulator.
//!
//! - [`ast`]: the parsed form.
//! - [`parse`](mod@parse): text to [`Scenario`], errors with line and column.
//! - [`run`](mod@run): one run in a fresh world, one session per rank, all ranks concurrently,
//!   then the expectations; [`RankExecutor`] interprets one rank's calls (the shell uses it).
//! - [`explore`](mod@explore): many runs on the in-memory simulator, each under a seeded
//!   schedule, and the distribution of what they observed.
//! - `buffers`: values to bytes and back, for `run` and `explore` alike.
//!
//! Owns: the module tree of the `.rma` format and what of it the crate exports. Must not: hold
//! any logic of its own (each submodule states its contract), print, or know about the CLI.

pub mod ast;
mod buffers;
pub mod explore;
pub mod parse;
pub mod run;

pub use ast::{Call, Expectation, Observed, RankCall, Scenario, Step, Subject, WindowDecl};
pub use explore::explore;
pub use parse::{parse, parse_rank, rank_name, ParseError, Parser};
pub use run::{
    run, CreatedWindow, ExpectationOutcome, FailedCall, Problem, RankExecutor, RankReport,
    RunConfig, RunError, RunReport, VarValue,
};
