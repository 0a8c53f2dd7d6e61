//! onesided-client: the Rust client library of onesided.
//!
//! - [`Endpoint`]: where the server is; `https://` with a CA for TLS (a plain URL does too).
//! - [`Admin`]: create worlds (one token per rank) and windows.
//! - [`Session`]: attach as one rank over one bidirectional stream; [`Session::barrier`];
//!   point-to-point messages between ranks ([`Session::send`], [`Session::receive`]).
//!   Its own audit events travel over the stream, or — given a database URL
//!   ([`SessionBuilder::audit_database_url`], [`AUDIT_DATABASE_URL_ENV`]) — it writes them to
//!   the audit store itself.
//! - [`Audit`]: the audit log — recorded windows, events (live too), replay, verify.
//! - [`Window`]: every MPI RMA call with its MPI name, on this rank's private copy of the
//!   window, with exactly the separate model's visibility rules.
//!
//! Owns: the crate's public API — which of its types are exported, and which of core's
//! (assertion bits, datatypes, ops, layouts, lock types, window descriptions, audit events and
//! verdicts) and the busy-poll crate's (`busy_poll`) it hands on as its own. Must not: decide an MPI rule of
//! its own (a `Window` runs core's `EpochState` and `TargetOp::validate`, as the server does),
//! depend on the server crate (its tests use the server as a dev-dependency only), or print:
//! the `onesided` binary renders.
//!
//! ```no_run
//! use onesided_client::{Admin, Assert, Op, Session, WindowSpec};
//! # async fn demo() -> onesided_client::Result<()> {
//! let url = "http://127.0.0.1:50051";
//! let admin = Admin::connect(url, "admin-token").await?;
//! let world = admin.create_world("demo", 2).await?;
//! admin.create_window("demo", &WindowSpec::of::<i64>("counters", 2, 4)).await?;
//!
//! let session = Session::attach(url, &world.tokens[0]).await?;
//! let window = session.window("counters").await?;
//! window.lock_all(0).await?;
//! let before = window.fetch_and_op(1, 0, 1i64, Op::Sum)?;
//! window.flush(1).await?;
//! println!("counter was {}", before.value().await?);
//! window.unlock_all().await?;
//! # let _ = Assert::NOPRECEDE;
//! # Ok(()) }
//! ```

mod admin;
pub use onesided_busy_poll as busy_poll;
mod audit;
mod client_events;
mod connect;
mod element;
mod error;
mod messages;
mod session;
mod window;

pub use admin::{Admin, ClusterNode, ClusterStatus, WindowSpec, WorldSummary, WorldTokens};
pub use audit::{
    Audit, AuditEntry, ClientBreak, ClientFault, ClientSpan, Finding, FindingSide, RecordedWindow,
    Replayed, Rule, Verification,
};
pub use connect::{Claim, Endpoint};
pub use element::{Element, FloatIndex, IntIndex};
pub use error::{Error, Result};
pub use messages::{Match, Received};
pub use onesided_core::assert::Assert;
pub use onesided_core::audit::{Event as AuditEvent, RecordedOp};
pub use onesided_core::epoch::LockType;
pub use onesided_core::layout::{Block, ByteBlock, Layout, Order, Resized, StructBlock, Subarray};
pub use onesided_core::window::{Flavor, MemoryModel, OpKind, WindowDesc};
pub use onesided_core::{Datatype, ErrorClass, Op};
pub use session::{
    NewWindow, Session, SessionBuilder, WireStats, AUDIT_DATABASE_URL_ENV, DEFAULT_REATTACH_WITHIN,
};
pub use window::{
    pack, test_all, unpack, wait_all, wait_any, AnyComplete, OpSpec, Pending, Request, Window,
};

/// The README's Rust example is compiled as a doctest, so it stays true to the code.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
