//! onesided-core: the pure semantics of MPI one-sided communication.
//!
//! Everything that decides what an RMA call means lives here, as plain data and functions
//! with no I/O and no async, so the live server, the client and replay run the same code.
//!
//! Owns: the crate's module tree and its re-exports (`Datatype`, `ErrorClass`, `RmaError`,
//! `RmaResult`, `Layout`, `Run`, `Op`); each module below states its own contract. Must not:
//! do I/O, spawn or await, read a clock, or depend on tokio, gRPC or a database: the server,
//! the client and the MPI library wrap it, and callers pass `now` where time matters.
//!
//! - [`error`]: MPI error classes and [`RmaError`].
//! - [`datatype`]: the basic datatypes and their byte encodings.
//! - [`reduce`]: the reduction operators and their type/op validity rules.
//! - [`layout`]: contiguous, vector and indexed layouts flattened to byte runs.
//! - [`ranges`]: byte-range sets (dirty and remotely changed ranges of a window).
//! - [`window`]: window descriptions, info keys, and target-side `apply` of one operation.
//! - [`mod@assert`]: the `MPI_MODE_*` assertion bits and which call accepts which.
//! - [`epoch`]: the origin-side epoch state machine that accepts or refuses each call.
//! - [`audit`]: the audit vocabulary, the hash chain, verification and replay.
//! - [`check`]: happens-before over an audit log and the access pairs it leaves unordered.
//! - [`export`]: an audit log as a Perfetto (Chrome trace-event) timeline.
//! - [`locks`]: the lock table of one target: compatibility, grant order, fencing tokens.
//! - [`origin`]: the origin half of the protocol, sans I/O: whether a rank's call is legal and
//!   what a legal one must do.
//! - [`sim`]: a deterministic simulator: origin and target engines wired in memory, every
//!   order chosen by a seeded schedule.
//! - [`target`]: the target half of the protocol, sans I/O: when what origins send is applied.
//! - `fence`: how many ranks entered each fence of a window.
//! - `collective`: a world's barriers and collective window calls, sans I/O.
//! - [`messaging`]: a world's point-to-point messages, sans I/O: MPI's matching of sends to
//!   receives.

pub mod assert;
pub mod audit;
pub mod check;
pub mod collective;
pub mod datatype;
pub mod epoch;
pub mod error;
pub mod export;
pub mod f80;
pub mod fence;
pub mod layout;
pub mod locks;
pub mod messaging;
pub mod origin;
pub mod ranges;
pub mod reduce;
pub mod sim;
pub mod target;
pub mod window;

pub use datatype::Datatype;
pub use error::{ErrorClass, RmaError, RmaResult};
pub use layout::{Layout, Run};
pub use reduce::Op;
