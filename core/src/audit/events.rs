//! The audit vocabulary: what is recorded about every epoch, and how a stored row holds it.
//!
//! Owns: the closed list of events (`Event`) and their stable names (`kind`, the store's
//! `kind` column), `RecordedOp` and its one mapping to and from the operation kinds of
//! `window` (`of`, `kind`), which events a client may record itself (`is_client_side`), how
//! many bytes of window data an event carries (`payload_len`, what the server's commit budget
//! counts), `Body` (canonical JSON of rows written before schema version 4, protobuf since),
//! and `AuditRecord`, an event with its place in the log (`seq`, `cseq`, `place`). Must not:
//! hash, verify, merge or replay rows (the sibling modules do), store them, or decide any MPI
//! rule: an event says what happened, never whether it was allowed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::binary;
use crate::error::RmaResult;
use crate::reduce::Op;
use crate::rma_err;
use crate::window::OpKind;

/// What an operation did, as recorded at its target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordedOp {
    /// `MPI_PUT`.
    Put,
    /// `MPI_GET`.
    Get,
    /// `MPI_ACCUMULATE` (the op's name).
    Accumulate(String),
    /// `MPI_GET_ACCUMULATE`.
    GetAccumulate(String),
    /// `MPI_FETCH_AND_OP`.
    FetchAndOp(String),
    /// `MPI_COMPARE_AND_SWAP`.
    CompareAndSwap,
}

impl RecordedOp {
    /// How the log names an operation kind (the one mapping; [`RecordedOp::kind`] reverses it).
    pub fn of(kind: OpKind) -> Self {
        match kind {
            OpKind::Put => RecordedOp::Put,
            OpKind::Get => RecordedOp::Get,
            OpKind::Accumulate(op) => RecordedOp::Accumulate(op.name().to_string()),
            OpKind::GetAccumulate(op) => RecordedOp::GetAccumulate(op.name().to_string()),
            OpKind::FetchAndOp(op) => RecordedOp::FetchAndOp(op.name().to_string()),
            OpKind::CompareAndSwap => RecordedOp::CompareAndSwap,
        }
    }

    /// The operation kind a recorded name stands for; `None` for an op name core does not
    /// know.
    pub fn kind(&self) -> Option<OpKind> {
        Some(match self {
            RecordedOp::Put => OpKind::Put,
            RecordedOp::Get => OpKind::Get,
            RecordedOp::Accumulate(name) => OpKind::Accumulate(Op::parse(name)?),
            RecordedOp::GetAccumulate(name) => OpKind::GetAccumulate(Op::parse(name)?),
            RecordedOp::FetchAndOp(name) => OpKind::FetchAndOp(Op::parse(name)?),
            RecordedOp::CompareAndSwap => OpKind::CompareAndSwap,
        })
    }
}

impl std::fmt::Display for RecordedOp {
    /// `put`, `get`, `accumulate(sum)`, `get_accumulate(no_op)`, `fetch_and_op(sum)`,
    /// `compare_and_swap`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordedOp::Put => f.write_str("put"),
            RecordedOp::Get => f.write_str("get"),
            RecordedOp::Accumulate(name) => write!(f, "accumulate({name})"),
            RecordedOp::GetAccumulate(name) => write!(f, "get_accumulate({name})"),
            RecordedOp::FetchAndOp(name) => write!(f, "fetch_and_op({name})"),
            RecordedOp::CompareAndSwap => f.write_str("compare_and_swap"),
        }
    }
}

/// One recorded event. `rank` in [`AuditRecord`] says where it happened: the calling rank for
/// calls, the target rank for what a target did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The window was created.
    WindowCreated {
        /// World name.
        world: String,
        /// Window name.
        name: String,
        /// Per-rank sizes.
        sizes: Vec<u64>,
        /// Per-rank disp_units.
        disp_units: Vec<u32>,
        /// The info keys in use (`MPI_WIN_GET_INFO`'s pairs), which the race checker reads
        /// (`accumulate_ops`, `accumulate_ordering`). Logs written before it was recorded
        /// read as none: MPI's defaults.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        info: BTreeMap<String, String>,
        /// Whether it uses the unified memory model (the race checker's rules differ). Logs
        /// written before it was recorded read as false: the separate model, the only one then.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unified: bool,
    },
    /// The window was freed.
    WindowFreed,
    /// `MPI_Win_set_info` returned at this rank: the window's info keys in use from here on
    /// (`MPI_WIN_GET_INFO`'s pairs), which the race checker reads for the accesses after it.
    InfoSet {
        /// The info keys in use.
        info: BTreeMap<String, String>,
    },
    /// A session of this rank opened the window.
    Attach,
    /// The session ended.
    Detach,
    /// Dynamic window: the owner attached a region (`MPI_WIN_ATTACH`); the rank's public copy
    /// spans at least its bytes from here on (offset `base - DYNAMIC_BASE`).
    RegionAttached {
        /// The region's address.
        base: u64,
        /// Its size in bytes.
        size: u64,
    },
    /// Dynamic window: the owner detached the region at `base` (`MPI_WIN_DETACH`).
    RegionDetached {
        /// The region's address.
        base: u64,
        /// Its size in bytes.
        size: u64,
    },
    /// The owner published private bytes into its public copy (rule 5).
    Published {
        /// Byte offset.
        offset: u64,
        /// The bytes.
        #[serde(with = "hex_bytes")]
        data: Vec<u8>,
    },
    /// The owner pulled remotely changed bytes into its private copy (rule 6).
    Pulled {
        /// The byte ranges.
        ranges: Vec<(u64, u64)>,
    },
    /// Fence number `fence` was entered.
    FenceEnter {
        /// Fence number.
        fence: u64,
        /// Assertion bits.
        assert: u32,
    },
    /// Fence number `fence` returned.
    FenceExit {
        /// Fence number.
        fence: u64,
    },
    /// `MPI_WIN_POST`.
    Post {
        /// Exposure group.
        group: Vec<u32>,
        /// Assertion bits.
        assert: u32,
    },
    /// `MPI_WIN_START`.
    Start {
        /// Access group.
        group: Vec<u32>,
        /// Assertion bits.
        assert: u32,
    },
    /// `MPI_WIN_COMPLETE`.
    Complete,
    /// `MPI_WIN_WAIT` entered.
    WaitEnter,
    /// `MPI_WIN_WAIT` (or a true `MPI_WIN_TEST`) returned.
    WaitExit,
    /// `MPI_WIN_TEST` returned false.
    TestFalse,
    /// A lock request reached this target.
    LockRequest {
        /// Requesting rank.
        origin: u32,
        /// `shared` or `exclusive`.
        lock_type: String,
        /// `MPI_MODE_NOCHECK`.
        nocheck: bool,
    },
    /// This target granted a lock.
    LockGrant {
        /// Holder.
        origin: u32,
        /// `shared` or `exclusive`.
        lock_type: String,
        /// Fencing token.
        token: u64,
    },
    /// This target's lock was released.
    LockRelease {
        /// Former holder.
        origin: u32,
        /// Its fencing token.
        token: u64,
    },
    /// This target took `origin`'s lock away: its session ended without unlocking (its lease
    /// lapsed, its stream broke, a new incarnation of the rank attached, an operator ended it),
    /// or an operator revoked its locks (`Admin` `revoke_locks`, the session goes on). A
    /// release, as far as replay and the race checker are concerned.
    LockRevoke {
        /// Former holder.
        origin: u32,
        /// Its fencing token, refused from now on.
        token: u64,
        /// Why: `lease lapsed`, `stream broke`, `superseded by a new incarnation`, `ended by
        /// an operator`, `revoked by an operator`.
        reason: String,
    },
    /// An operator acted on this rank's session through the Admin API (recorded on the window
    /// before what the action causes: the `lock_revoke` events of the locks it took away, the
    /// `departed` of the session it ended). The row's incarnation is the session acted on.
    Admin {
        /// What: `end_session` (the session was ended, as a lapsed lease ends it),
        /// `revoke_locks` (its locks on this window were taken away, its session goes on) or
        /// `delete_world` (the world was deleted with this window: recorded at rank 0,
        /// incarnation 0, the window's last event).
        action: String,
        /// Who: `admin` (the admin token: the only operator credential) and the address the
        /// call came from, as the node that took it saw it.
        by: String,
    },
    /// A call of this rank failed with `PROC_FAILED` because rank `peer`, which it needs, is
    /// gone (recorded at this rank's actor, or at the world barrier).
    PeerFailed {
        /// The gone rank.
        peer: u32,
        /// The call that failed: `fence`, `wait`, `barrier`, `win_free`, or an operation.
        call: String,
    },
    /// A session of this rank ended: `clean` when the stream was closed by the client with
    /// nothing held, otherwise why (`lease lapsed`, `stream broke`, `superseded`, …). Recorded
    /// on every window of the world, after the rank's locks were revoked.
    Departed {
        /// The session's incarnation.
        incarnation: u64,
        /// Why it ended.
        reason: String,
    },
    /// A flush of `origin`'s operations completed at this target.
    Flush {
        /// The flushing rank.
        origin: u32,
    },
    /// `MPI_WIN_SYNC`.
    Sync,
    /// The world barrier was entered (recorded on every window the rank has open).
    BarrierEnter,
    /// The world barrier returned.
    BarrierExit,
    /// This rank sent a point-to-point message (recorded on every window it has open, before
    /// the message can be received).
    Sent {
        /// The receiver's world rank.
        to: u32,
        /// The message's tag.
        tag: i32,
        /// The message's id in the world: its receive names the same.
        message: u64,
    },
    /// This rank received a point-to-point message (recorded on every window it has open,
    /// before the receive returns): whatever the sender did before its send happens before
    /// what this rank does after.
    Received {
        /// The sender's world rank.
        from: u32,
        /// The message's tag.
        tag: i32,
        /// The message's id in the world.
        message: u64,
    },
    /// A synchronization call without an event of its own reached the server from this rank:
    /// `lock`, `unlock`, `lock_all`, `unlock_all`, `flush`, `flush_all`, `win_free`.
    Issued {
        /// The call's name.
        call: String,
        /// Its target rank, if it has one.
        target: Option<u32>,
    },
    /// A blocking call returned at this rank (recorded by the client: only it sees the
    /// return): `fence`, `complete`, `wait`, `test`, `lock`, `unlock`, `lock_all`,
    /// `unlock_all`, `flush`, `flush_all`, `flush_local`, `flush_local_all`, `sync`.
    Returned {
        /// The call's name.
        call: String,
        /// Its target rank, if it has one.
        target: Option<u32>,
    },
    /// `flush_local` / `flush_local_all` was called (it sends nothing to the server; the client
    /// records it).
    FlushLocal {
        /// The target, or `None` for flush_local_all.
        target: Option<u32>,
    },
    /// An operation was issued by this rank (recorded by its session when the call arrives).
    OpIssued {
        /// The call's id in the session (with the rank and incarnation, unique).
        op_id: u64,
        /// Target rank.
        target: u32,
        /// What it does.
        op: RecordedOp,
        /// Datatype name.
        datatype: String,
        /// Absolute byte runs at the target.
        runs: Vec<(u64, u64)>,
    },
    /// A local store into this rank's private copy (recorded by the client).
    Store {
        /// Byte ranges `[start, end)`.
        ranges: Vec<(u64, u64)>,
    },
    /// A local load from this rank's private copy (recorded by the client).
    Load {
        /// Byte ranges `[start, end)`.
        ranges: Vec<(u64, u64)>,
    },
    /// The client of this session persisted its own events `from..=to` for this window itself
    /// (table `client_events`: its chain of this window, rank and incarnation, numbered by
    /// `cseq` from 1) instead of shipping them. Recorded where the shipped events would have
    /// gone, so the window's chain commits to the client's and fixes the rows' place.
    ClientEvents {
        /// The first cseq.
        from: u64,
        /// The last cseq.
        to: u64,
        /// The chain hash of row `to`.
        #[serde(with = "hex_bytes")]
        hash: Vec<u8>,
    },
    /// An operation applied at this target.
    Op {
        /// Origin rank.
        origin: u32,
        /// The origin session's incarnation.
        origin_incarnation: u64,
        /// The id of its [`Event::OpIssued`].
        op_id: u64,
        /// The epoch it belongs to: the origin's fence epoch number, or its PSCW generation
        /// towards this target; 0 under a lock.
        #[serde(default)]
        epoch: u64,
        /// The fencing token of the lock it was applied under (0 outside passive target).
        #[serde(default)]
        token: u64,
        /// What it did.
        op: RecordedOp,
        /// Datatype name.
        datatype: String,
        /// Displacement in disp_units.
        disp: u64,
        /// Absolute byte runs touched, in type-map order.
        runs: Vec<(u64, u64)>,
        /// Origin data (packed).
        #[serde(with = "hex_bytes")]
        data: Vec<u8>,
        /// Compare value (compare_and_swap).
        #[serde(with = "hex_bytes")]
        compare: Vec<u8>,
        /// What went back to the origin.
        #[serde(with = "hex_bytes")]
        result: Vec<u8>,
    },
}

impl Event {
    /// The bytes of window data it carries (an operation's origin data, compare value and
    /// result; published or pulled bytes): what dominates its size in memory and in the store.
    pub fn payload_len(&self) -> usize {
        match self {
            Event::Op {
                data,
                compare,
                result,
                ..
            } => data.len() + compare.len() + result.len(),
            Event::Published { data, .. } => data.len(),
            _ => 0,
        }
    }

    /// The event's name (`fence_enter`, `op`, …), as stored in the `kind` column.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::WindowCreated { .. } => "window_created",
            Event::WindowFreed => "window_freed",
            Event::InfoSet { .. } => "info_set",
            Event::Attach => "attach",
            Event::Detach => "detach",
            Event::RegionAttached { .. } => "region_attached",
            Event::RegionDetached { .. } => "region_detached",
            Event::Published { .. } => "published",
            Event::Pulled { .. } => "pulled",
            Event::FenceEnter { .. } => "fence_enter",
            Event::FenceExit { .. } => "fence_exit",
            Event::Post { .. } => "post",
            Event::Start { .. } => "start",
            Event::Complete => "complete",
            Event::WaitEnter => "wait_enter",
            Event::WaitExit => "wait_exit",
            Event::TestFalse => "test_false",
            Event::LockRequest { .. } => "lock_request",
            Event::LockGrant { .. } => "lock_grant",
            Event::LockRelease { .. } => "lock_release",
            Event::LockRevoke { .. } => "lock_revoke",
            Event::Admin { .. } => "admin",
            Event::PeerFailed { .. } => "peer_failed",
            Event::Departed { .. } => "departed",
            Event::Flush { .. } => "flush",
            Event::Sync => "sync",
            Event::BarrierEnter => "barrier_enter",
            Event::BarrierExit => "barrier_exit",
            Event::Sent { .. } => "sent",
            Event::Received { .. } => "received",
            Event::Issued { .. } => "issued",
            Event::Returned { .. } => "returned",
            Event::FlushLocal { .. } => "flush_local",
            Event::OpIssued { .. } => "op_issued",
            Event::Store { .. } => "store",
            Event::Load { .. } => "load",
            Event::ClientEvents { .. } => "client_events",
            Event::Op { .. } => "op",
        }
    }

    /// Whether a client may record this event of its own (what only it sees): the returns of
    /// blocking calls, flush_local, local loads and stores.
    pub fn is_client_side(&self) -> bool {
        matches!(
            self,
            Event::Returned { .. }
                | Event::FlushLocal { .. }
                | Event::Store { .. }
                | Event::Load { .. }
        )
    }

    /// The canonical JSON body.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|error| {
            // Serializing plain data cannot fail; keep the log honest if it ever did.
            format!(
                "{{\"event\":\"unencodable\",\"error\":{:?}}}",
                error.to_string()
            )
        })
    }

    /// Parses a JSON body.
    ///
    /// # Errors
    /// `MPI_ERR_OTHER` for a body this version cannot read.
    pub fn from_json(body: &str) -> RmaResult<Self> {
        serde_json::from_str(body)
            .map_err(|error| rma_err!(Other, "unreadable audit event: {error}"))
    }
}

/// An event as the store holds it. The hash chain covers these bytes, so a row keeps the
/// encoding it was written in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// Canonical JSON text, payloads in hex: every row written before schema version 4 (still
    /// read, verified and replayed).
    Json(String),
    /// Protobuf bytes (`onesided.audit.v1.Event`, `proto/onesided/audit/v1/event.proto`),
    /// payloads as bytes: every row written since.
    Binary(Vec<u8>),
}

impl Body {
    /// How new rows store `event`.
    pub fn encode(event: &Event) -> Self {
        Body::Binary(binary::encode(event))
    }

    /// The event.
    ///
    /// # Errors
    /// `MPI_ERR_OTHER` for a body this version cannot read.
    pub fn decode(&self) -> RmaResult<Event> {
        match self {
            Body::Json(text) => Event::from_json(text),
            Body::Binary(bytes) => binary::decode(bytes),
        }
    }

    /// The event as canonical JSON, as the audit service shows it: a JSON body as stored; an
    /// unreadable binary one as `{"event":"unreadable",…}` (verification names its row).
    pub fn to_json(&self) -> String {
        match self {
            Body::Json(text) => text.clone(),
            Body::Binary(bytes) => match binary::decode(bytes) {
                Ok(event) => event.to_json(),
                Err(error) => serde_json::json!({
                    "event": "unreadable",
                    "error": error.message,
                })
                .to_string(),
            },
        }
    }

    /// Stored bytes.
    pub fn len(&self) -> usize {
        match self {
            Body::Json(text) => text.len(),
            Body::Binary(bytes) => bytes.len(),
        }
    }

    /// Whether nothing is stored (never for a written row).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An event with its place in the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRecord {
    /// Window id.
    pub window: u64,
    /// Gap-free sequence number within the window, from 1. For a row of a client's own chain
    /// as stored and hashed: its cseq. For a client row [`merge`](super::merge)d into the window's history:
    /// the sequence number of the marker that names it.
    pub seq: u64,
    /// Monotonic nanoseconds since the recording server started (for a client row as stored:
    /// since its session attached, on the client's clock).
    pub at_ns: u64,
    /// Where it happened.
    pub rank: u32,
    /// Session incarnation of that rank (0 for target-side events).
    pub incarnation: u64,
    /// For a client row merged behind its marker: its cseq in the client's chain. `None` for
    /// the window's own rows (and for client rows as stored, whose `seq` is their cseq).
    pub cseq: Option<u64>,
    /// What happened.
    pub event: Event,
}

impl AuditRecord {
    /// Where the record is in the log, as a person reads it: `12`, or `12:3` for row 3 of a
    /// client's chain merged behind the marker at seq 12.
    pub fn place(&self) -> String {
        place(self.seq, self.cseq)
    }
}

/// `seq`, or `seq:cseq` for a merged client row.
pub fn place(seq: u64, cseq: Option<u64>) -> String {
    match cseq {
        Some(cseq) => format!("{seq}:{cseq}"),
        None => seq.to_string(),
    }
}

mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&hex::encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        hex::decode(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::Event;

    #[test]
    fn payload_hex_round_trips_and_bad_hex_is_an_error_not_a_panic() {
        let event = Event::Published {
            offset: 3,
            data: vec![0x00, 0xab, 0xff],
        };
        let json = event.to_json();
        assert!(json.contains("\"00abff\""), "{json}");
        assert_eq!(Event::from_json(&json).unwrap(), event);
        // a stored body someone edited: odd length, a non-hex digit, a character of two bytes
        // across a digit pair (slicing by bytes would panic there)
        for data in ["abc", "zz", "aéa"] {
            let body = format!(r#"{{"event":"published","offset":0,"data":"{data}"}}"#);
            let error = Event::from_json(&body).unwrap_err();
            assert!(error.message.contains("unreadable audit event"), "{error}");
        }
    }
}
