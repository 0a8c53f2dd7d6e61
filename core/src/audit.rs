//! The audit vocabulary: what is recorded about every epoch, the hash chain that makes the log
//! tamper-evident, and replay, which rebuilds every rank's public copy at any sequence number
//! with the same [`crate::window::apply`] that runs live.
//!
//! Owns: event meaning, canonical encoding for hashing, verification and replay. Must not:
//! store anything (the server's audit writer does).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::datatype::Datatype;
use crate::error::RmaResult;
use crate::layout::Run;
use crate::reduce::Op;
use crate::rma_err;
use crate::window::{OpKind, TargetAccess, TargetOp};

mod binary;

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
    },
    /// The window was freed.
    WindowFreed,
    /// A session of this rank opened the window.
    Attach,
    /// The session ended.
    Detach,
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
    /// This target took `origin`'s lock away because its session ended without unlocking (its
    /// lease lapsed, its stream broke, or a new incarnation of the rank attached).
    LockRevoke {
        /// Former holder.
        origin: u32,
        /// Its fencing token, refused from now on.
        token: u64,
        /// Why: `lease lapsed`, `session ended`, `superseded`.
        reason: String,
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
    /// The event's name (`fence_enter`, `op`, …), as stored in the `kind` column.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::WindowCreated { .. } => "window_created",
            Event::WindowFreed => "window_freed",
            Event::Attach => "attach",
            Event::Detach => "detach",
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
            Event::PeerFailed { .. } => "peer_failed",
            Event::Departed { .. } => "departed",
            Event::Flush { .. } => "flush",
            Event::Sync => "sync",
            Event::BarrierEnter => "barrier_enter",
            Event::BarrierExit => "barrier_exit",
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
    /// as stored and hashed: its cseq. For a client row [`merge`]d into the window's history:
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

/// The hash before the first row of a window.
pub const GENESIS: [u8; 32] = [0; 32];

/// The hash a row commits to: SHA-256 over the previous hash, the row's fields and its stored
/// body. A binary body is preceded by a zero byte, which no JSON body starts with: the same
/// bytes cannot hash alike as both encodings.
pub fn chain_hash(previous: &[u8; 32], record: &AuditRecord, body: &Body) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(previous);
    hasher.update(record.window.to_le_bytes());
    hasher.update(record.seq.to_le_bytes());
    hasher.update(record.at_ns.to_le_bytes());
    hasher.update(record.rank.to_le_bytes());
    hasher.update(record.incarnation.to_le_bytes());
    match body {
        Body::Json(text) => hasher.update(text.as_bytes()),
        Body::Binary(bytes) => {
            hasher.update([0u8]);
            hasher.update(bytes);
        }
    }
    hasher.finalize().into()
}

/// A stored row as verification reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRow {
    /// The record (its event parsed from `body`; see `unreadable`).
    pub record: AuditRecord,
    /// Why `body` could not be read, if it could not: then `record.event` is a placeholder,
    /// which [`readable`] refuses to hand on (verification names the row).
    pub unreadable: Option<String>,
    /// The stored body.
    pub body: Body,
    /// The stored previous hash.
    pub prev_hash: Vec<u8>,
    /// The stored hash.
    pub hash: Vec<u8>,
}

/// The records of `rows`, for readers that act on events (replay, recovery, check, export).
///
/// # Errors
/// `MPI_ERR_OTHER` naming the first row whose stored event cannot be read: acting on the rest
/// would silently leave out what it did.
pub fn readable(rows: Vec<StoredRow>) -> RmaResult<Vec<AuditRecord>> {
    rows.into_iter()
        .map(|row| match row.unreadable {
            None => Ok(row.record),
            Some(why) => Err(rma_err!(
                Other,
                "event {} of window {} cannot be read ({why}); `onesided audit verify` names \
                 the first bad row",
                row.record.seq,
                row.record.window
            )),
        })
        .collect()
}

/// Checks a window's rows in stored order: sequence numbers 1, 2, … without gaps, each row's
/// previous hash equal to the hash of the row before, and each hash recomputed from the row.
/// Returns the first bad sequence number (or the position where one is missing).
pub fn verify(rows: &[StoredRow]) -> Result<(), u64> {
    let mut previous = GENESIS;
    for (index, row) in rows.iter().enumerate() {
        let expected_seq = index as u64 + 1;
        if row.record.seq != expected_seq {
            return Err(expected_seq.min(row.record.seq));
        }
        if row.prev_hash.as_slice() != previous.as_slice() {
            return Err(row.record.seq);
        }
        let hash = chain_hash(&previous, &row.record, &row.body);
        if row.hash.as_slice() != hash.as_slice() {
            return Err(row.record.seq);
        }
        // the body must say what the parsed event says (a rewritten body changes the hash
        // anyway; this catches a body the parser reads differently)
        if row.body.decode().ok().as_ref() != Some(&row.record.event) {
            return Err(row.record.seq);
        }
        previous = hash;
    }
    Ok(())
}

/// The rows of the client chains of one window, by (rank, incarnation) and cseq.
type Chains<'a> = BTreeMap<(u32, u64), BTreeMap<u64, &'a StoredRow>>;

fn chains(client: &[StoredRow]) -> Chains<'_> {
    let mut chains: Chains<'_> = BTreeMap::new();
    for row in client {
        chains
            .entry((row.record.rank, row.record.incarnation))
            .or_default()
            .insert(row.record.seq, row);
    }
    chains
}

/// A window's history as readers see it: its records in order, each
/// [`Event::ClientEvents`] marker replaced by the client rows it names, in cseq order — the
/// order they would have had if the client had shipped them. A merged row keeps its rank,
/// incarnation and event; `seq` and `at_ns` are the marker's (one clock for the timeline) and
/// `cseq` its number in the client's chain. Rows that are missing, unreadable or of a kind a
/// client may not record are left out ([`verify_history`] names them).
///
/// `client` holds the stored rows of the window's client chains (`record.seq` = cseq).
pub fn merge(window: Vec<AuditRecord>, client: &[StoredRow]) -> Vec<AuditRecord> {
    let chains = chains(client);
    let mut merged = Vec::with_capacity(window.len() + client.len());
    for record in window {
        let Event::ClientEvents { from, to, .. } = &record.event else {
            merged.push(record);
            continue;
        };
        let Some(chain) = chains.get(&(record.rank, record.incarnation)) else {
            continue;
        };
        for row in chain.range(*from..=*to).map(|(_, row)| *row) {
            let Ok(event) = row.body.decode() else {
                continue;
            };
            if !event.is_client_side() {
                continue;
            }
            merged.push(AuditRecord {
                window: record.window,
                seq: record.seq,
                at_ns: record.at_ns,
                rank: record.rank,
                incarnation: record.incarnation,
                cseq: Some(row.record.seq),
                event,
            });
        }
    }
    merged
}

/// What is wrong with a client row a marker names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientFault {
    /// The marker does not continue its client's chain (its range skips or repeats cseqs).
    Range,
    /// The row is not stored (deleted, or not yet written by a client still running).
    Missing,
    /// The row does not hash to what is stored, or does not follow the row before it.
    Altered,
    /// The row is intact but holds an event a client may not record.
    NotClientSide,
    /// The rows chain correctly but end at another hash than the marker names.
    Unnamed,
}

impl ClientFault {
    /// Every fault.
    pub const ALL: [ClientFault; 5] = [
        ClientFault::Range,
        ClientFault::Missing,
        ClientFault::Altered,
        ClientFault::NotClientSide,
        ClientFault::Unnamed,
    ];

    /// The stable name (`missing`, `altered`, …).
    pub fn name(self) -> &'static str {
        match self {
            ClientFault::Range => "range",
            ClientFault::Missing => "missing",
            ClientFault::Altered => "altered",
            ClientFault::NotClientSide => "not_client_side",
            ClientFault::Unnamed => "unnamed",
        }
    }

    /// The fault of a name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|fault| fault.name() == name)
    }

    /// In words.
    pub fn describe(self) -> &'static str {
        match self {
            ClientFault::Range => "the marker does not continue the client's chain",
            ClientFault::Missing => "the row is missing",
            ClientFault::Altered => "the row was changed, or does not follow the row before it",
            ClientFault::NotClientSide => "the row holds an event a client may not record",
            ClientFault::Unnamed => "the rows end at another hash than the marker names",
        }
    }
}

/// Where a client's chain is broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientBreak {
    /// The window sequence number of the marker naming the bad row.
    pub marker: u64,
    /// The client's rank.
    pub rank: u32,
    /// Its session incarnation.
    pub incarnation: u64,
    /// The bad row's cseq.
    pub cseq: u64,
    /// What is wrong.
    pub fault: ClientFault,
}

/// A range of one client's chain (window, rank, incarnation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientSpan {
    /// The client's rank.
    pub rank: u32,
    /// Its session incarnation.
    pub incarnation: u64,
    /// The first cseq.
    pub from: u64,
    /// The last.
    pub to: u64,
}

/// The verdict on a window's history: its own chain, and the client chains its markers name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The first bad window sequence number: a bad row of the window's chain, or the marker
    /// whose client rows are bad, whichever comes first. `None` when everything is intact.
    pub first_bad: Option<u64>,
    /// When the first bad place is in a client's chain: where.
    pub client: Option<ClientBreak>,
    /// How many client rows the markers name and were checked (up to the first bad place).
    pub client_events: u64,
    /// Rows markers name that are not stored yet, at the end of the chain of a session that is
    /// still attached (its writer commits them while the server logs the marker): not a break
    /// while it lives, [`ClientFault::Missing`] once it detached.
    pub pending: Vec<ClientSpan>,
    /// Stored client rows no marker names (a client that stopped before shipping their marker,
    /// or one still running); not merged. Reported for an intact history only.
    pub unmarked: Vec<ClientSpan>,
}

/// How one marker's rows check out.
enum Named {
    /// Every row is there and right; the chain ends at this hash.
    Intact([u8; 32]),
    /// From this cseq on nothing is stored yet.
    Unstored(u64),
    Broken(u64, ClientFault),
}

/// Checks the rows `from..=to` of `chain` after the row whose hash is `previous`.
fn check_named(
    chain: Option<&BTreeMap<u64, &StoredRow>>,
    from: u64,
    to: u64,
    previous: [u8; 32],
    counted: &mut u64,
) -> Named {
    let mut previous = previous;
    for cseq in from..=to {
        let Some(stored) = chain.and_then(|chain| chain.get(&cseq)) else {
            let later = chain.is_some_and(|chain| chain.range(cseq..).next().is_some());
            return if later {
                Named::Broken(cseq, ClientFault::Missing)
            } else {
                Named::Unstored(cseq)
            };
        };
        let readable = stored.body.decode().ok();
        let recomputed = chain_hash(&previous, &stored.record, &stored.body);
        if stored.prev_hash.as_slice() != previous.as_slice()
            || stored.hash.as_slice() != recomputed.as_slice()
            || readable.as_ref() != Some(&stored.record.event)
        {
            return Named::Broken(cseq, ClientFault::Altered);
        }
        if !stored.record.event.is_client_side() {
            return Named::Broken(cseq, ClientFault::NotClientSide);
        }
        previous = recomputed;
        *counted += 1;
    }
    Named::Intact(previous)
}

/// Checks a window's chain ([`verify`]) and, for every [`Event::ClientEvents`] marker before
/// its first bad row, that the client rows it names exist, chain correctly from
/// [`GENESIS`] (each chain is its window, rank and incarnation, `cseq` gap-free from 1, hashed
/// with [`chain_hash`] with `seq` = cseq), hold client-side events only, and end at the
/// marker's hash. Rows missing at the end of the chain of a session the log shows still
/// attached are [`Verdict::pending`], not a break.
pub fn verify_history(window: &[StoredRow], client: &[StoredRow]) -> Verdict {
    let window_bad = verify(window).err();
    let checked: Vec<&StoredRow> = window
        .iter()
        .take_while(|row| window_bad.is_none_or(|bad| row.record.seq < bad))
        .collect();
    let chains = chains(client);
    // the sessions still attached, and the last cseq each chain's markers name
    let mut attached = HashSet::new();
    let mut last_named: HashMap<(u32, u64), u64> = HashMap::new();
    for row in &checked {
        let key = (row.record.rank, row.record.incarnation);
        match &row.record.event {
            Event::Attach => {
                attached.insert(key);
            }
            Event::Detach => {
                attached.remove(&key);
            }
            Event::ClientEvents { to, .. } => {
                last_named.insert(key, *to);
            }
            _ => {}
        }
    }
    // per chain: the next cseq and the hash of the row before it
    let mut tails: HashMap<(u32, u64), (u64, [u8; 32])> = HashMap::new();
    let mut pending = Vec::new();
    let mut client_events = 0;
    let mut broken = None;
    for row in &checked {
        let Event::ClientEvents { from, to, hash } = &row.record.event else {
            continue;
        };
        let key = (row.record.rank, row.record.incarnation);
        if pending
            .iter()
            .any(|span: &ClientSpan| (span.rank, span.incarnation) == key)
        {
            continue;
        }
        let (next, previous) = tails.entry(key).or_insert((1, GENESIS));
        let at = |cseq: u64, fault: ClientFault| ClientBreak {
            marker: row.record.seq,
            rank: key.0,
            incarnation: key.1,
            cseq,
            fault,
        };
        if *from != *next || to < from {
            broken = Some(at(*next, ClientFault::Range));
            break;
        }
        match check_named(chains.get(&key), *from, *to, *previous, &mut client_events) {
            Named::Intact(last) if last.as_slice() == hash.as_slice() => {
                *next = to + 1;
                *previous = last;
            }
            Named::Intact(_) => {
                broken = Some(at(*to, ClientFault::Unnamed));
                break;
            }
            Named::Unstored(cseq) if attached.contains(&key) => pending.push(ClientSpan {
                rank: key.0,
                incarnation: key.1,
                from: cseq,
                to: last_named.get(&key).copied().unwrap_or(*to),
            }),
            Named::Unstored(cseq) => {
                broken = Some(at(cseq, ClientFault::Missing));
                break;
            }
            Named::Broken(cseq, fault) => {
                broken = Some(at(cseq, fault));
                break;
            }
        }
    }
    let first_bad = broken.map(|at| at.marker).or(window_bad);
    let unmarked = if first_bad.is_some() {
        Vec::new()
    } else {
        chains
            .iter()
            .filter_map(|(&(rank, incarnation), chain)| {
                let next = tails.get(&(rank, incarnation)).map_or(1, |tail| tail.0);
                let mut beyond = chain.range(next..).map(|(&cseq, _)| cseq);
                let from = beyond.next()?;
                let to = beyond.next_back().unwrap_or(from);
                Some(ClientSpan {
                    rank,
                    incarnation,
                    from,
                    to,
                })
            })
            .collect()
    };
    Verdict {
        first_bad,
        client: broken,
        client_events,
        pending: if first_bad.is_some() {
            Vec::new()
        } else {
            pending
        },
        unmarked,
    }
}

/// Every rank's public copy after the events with `seq <= at` (all of them with `None`),
/// rebuilt from the window's creation, the owners' publications and the applied operations.
///
/// # Errors
/// `MPI_ERR_OTHER` when the history does not start with the window's creation or an event
/// cannot be applied.
pub fn replay(records: &[AuditRecord], at: Option<u64>) -> RmaResult<Vec<Vec<u8>>> {
    let mut copies: Option<Vec<Vec<u8>>> = None;
    for record in records {
        if at.is_some_and(|at| record.seq > at) {
            break;
        }
        match &record.event {
            Event::WindowCreated { sizes, .. } => {
                copies = Some(sizes.iter().map(|&size| vec![0u8; size as usize]).collect());
            }
            Event::Published { .. } | Event::Op { .. } => {
                apply_record(rank_copy(&mut copies, record)?, record)?;
            }
            _ => {}
        }
    }
    copies.ok_or_else(|| rma_err!(Other, "the history has no window creation"))
}

/// Applies what `record` did to its rank's public copy `copy` (a publication or an
/// operation; other events change no bytes). Recovery uses it to roll a snapshot forward.
///
/// # Errors
/// `MPI_ERR_OTHER` when the event does not fit the copy.
pub fn apply_record(copy: &mut [u8], record: &AuditRecord) -> RmaResult<()> {
    match &record.event {
        Event::Published { offset, data } => {
            let range = span(*offset, data.len() as u64, copy.len(), record.seq)?;
            copy[range].copy_from_slice(data);
        }
        Event::Op {
            op,
            datatype,
            runs,
            data,
            compare,
            ..
        } => replay_op(copy, op, datatype, runs, data, compare, record.seq)?,
        _ => {}
    }
    Ok(())
}

fn rank_copy<'a>(
    copies: &'a mut Option<Vec<Vec<u8>>>,
    record: &AuditRecord,
) -> RmaResult<&'a mut Vec<u8>> {
    copies
        .as_mut()
        .ok_or_else(|| {
            rma_err!(
                Other,
                "event {} comes before the window's creation",
                record.seq
            )
        })?
        .get_mut(record.rank as usize)
        .ok_or_else(|| {
            rma_err!(
                Other,
                "event {} names rank {} outside the window",
                record.seq,
                record.rank
            )
        })
}

fn span(offset: u64, len: u64, size: usize, seq: u64) -> RmaResult<std::ops::Range<usize>> {
    match offset.checked_add(len) {
        Some(end) if end <= size as u64 => Ok(offset as usize..end as usize),
        _ => Err(rma_err!(Other, "event {seq} reaches outside the window")),
    }
}

/// Rebuilds the access a recorded operation made and applies it with the live target's
/// [`apply`](crate::window::apply): replay and live change bytes through the same function.
fn replay_op(
    copy: &mut [u8],
    op: &RecordedOp,
    datatype: &str,
    runs: &[(u64, u64)],
    data: &[u8],
    compare: &[u8],
    seq: u64,
) -> RmaResult<()> {
    let dtype = Datatype::parse(datatype)
        .ok_or_else(|| rma_err!(Other, "event {seq} has unknown datatype {datatype}"))?;
    let kind = op
        .kind()
        .ok_or_else(|| rma_err!(Other, "event {seq} has an unknown op"))?;
    let runs: Vec<Run> = runs
        .iter()
        .map(|&(offset, len)| Run { offset, len })
        .collect();
    let mut bytes = 0u64;
    for run in &runs {
        span(run.offset, run.len, copy.len(), seq)?;
        bytes += run.len;
    }
    let carries = match kind {
        OpKind::Put => true,
        OpKind::Accumulate(op) | OpKind::GetAccumulate(op) | OpKind::FetchAndOp(op) => {
            op != Op::NoOp
        }
        OpKind::Get | OpKind::CompareAndSwap => false,
    };
    if carries && (data.len() as u64) < bytes {
        return Err(rma_err!(Other, "event {seq} is short of data"));
    }
    let element = dtype.size() as u64;
    let target_op = TargetOp {
        kind,
        dtype,
        disp: 0,
        layout: crate::layout::Layout::contiguous(bytes / element.max(1)),
        data,
        compare,
    };
    let access = TargetAccess { runs, bytes };
    crate::window::apply(copy, &access, &target_op)
        .map(drop)
        .map_err(|error| rma_err!(Other, "event {seq} cannot be applied: {error}"))
}

mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        let text: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        serializer.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.len() % 2 != 0 {
            return Err(serde::de::Error::custom("odd number of hex digits"));
        }
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).map_err(serde::de::Error::custom))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, rank: u32, event: Event) -> AuditRecord {
        AuditRecord {
            window: 7,
            seq,
            at_ns: seq * 10,
            rank,
            incarnation: 1,
            cseq: None,
            event,
        }
    }

    fn history() -> Vec<AuditRecord> {
        vec![
            record(
                1,
                0,
                Event::WindowCreated {
                    world: "w".into(),
                    name: "x".into(),
                    sizes: vec![8, 8],
                    disp_units: vec![4, 4],
                },
            ),
            record(
                2,
                1,
                Event::Published {
                    offset: 0,
                    data: 5i32.to_le_bytes().to_vec(),
                },
            ),
            record(
                3,
                1,
                Event::Op {
                    origin: 0,
                    origin_incarnation: 1,
                    op_id: 1,
                    epoch: 0,
                    token: 0,
                    op: RecordedOp::Accumulate("sum".into()),
                    datatype: "i32".into(),
                    disp: 0,
                    runs: vec![(0, 4)],
                    data: 2i32.to_le_bytes().to_vec(),
                    compare: Vec::new(),
                    result: Vec::new(),
                },
            ),
            record(
                4,
                0,
                Event::Op {
                    origin: 1,
                    origin_incarnation: 1,
                    op_id: 1,
                    epoch: 0,
                    token: 0,
                    op: RecordedOp::Put,
                    datatype: "i32".into(),
                    disp: 1,
                    runs: vec![(4, 4)],
                    data: 9i32.to_le_bytes().to_vec(),
                    compare: Vec::new(),
                    result: Vec::new(),
                },
            ),
        ]
    }

    fn stored(records: &[AuditRecord]) -> Vec<StoredRow> {
        stored_as(records, |_| Body::encode)
    }

    /// The rows of `records` as stored, the body of row `index` encoded by `encoding(index)`.
    fn stored_as(
        records: &[AuditRecord],
        encoding: impl Fn(usize) -> fn(&Event) -> Body,
    ) -> Vec<StoredRow> {
        let mut previous = GENESIS;
        records
            .iter()
            .enumerate()
            .map(|(index, record)| {
                let body = encoding(index)(&record.event);
                let hash = chain_hash(&previous, record, &body);
                let row = StoredRow {
                    record: record.clone(),
                    unreadable: None,
                    body,
                    prev_hash: previous.to_vec(),
                    hash: hash.to_vec(),
                };
                previous = hash;
                row
            })
            .collect()
    }

    /// Changes a stored row's event as someone editing the store would: body and event, not
    /// the hashes.
    fn rewrite(row: &mut StoredRow, change: impl FnOnce(&mut Event)) {
        change(&mut row.record.event);
        row.body = Body::encode(&row.record.event);
    }

    /// Every kind of event, with payloads, optional fields set and unset.
    fn every_kind() -> Vec<Event> {
        let op = |op: RecordedOp| Event::Op {
            origin: 3,
            origin_incarnation: 9,
            op_id: u64::MAX,
            epoch: 2,
            token: 17,
            op,
            datatype: "f64".into(),
            disp: 1 << 40,
            runs: vec![(0, 8), (16, 24)],
            data: (0..=255).collect(),
            compare: vec![1, 2],
            result: vec![0; 3],
        };
        let mut events = vec![
            Event::WindowCreated {
                world: "wörld".into(),
                name: "x".into(),
                sizes: vec![8, 0, u64::MAX],
                disp_units: vec![1, 4, 8],
            },
            Event::WindowFreed,
            Event::Attach,
            Event::Detach,
            Event::Published {
                offset: 12,
                data: vec![0, 255, 7],
            },
            Event::Pulled {
                ranges: vec![(0, 4), (8, 12)],
            },
            Event::FenceEnter {
                fence: 4,
                assert: 0x1000,
            },
            Event::FenceExit { fence: 4 },
            Event::Post {
                group: vec![0, 2],
                assert: 0,
            },
            Event::Start {
                group: vec![],
                assert: 8,
            },
            Event::Complete,
            Event::WaitEnter,
            Event::WaitExit,
            Event::TestFalse,
            Event::LockRequest {
                origin: 1,
                lock_type: "exclusive".into(),
                nocheck: true,
            },
            Event::LockGrant {
                origin: 1,
                lock_type: "shared".into(),
                token: 5,
            },
            Event::LockRelease {
                origin: 1,
                token: 5,
            },
            Event::LockRevoke {
                origin: 1,
                token: 5,
                reason: "lease lapsed".into(),
            },
            Event::PeerFailed {
                peer: 2,
                call: "fence".into(),
            },
            Event::Departed {
                incarnation: 3,
                reason: "clean".into(),
            },
            Event::Flush { origin: 0 },
            Event::Sync,
            Event::BarrierEnter,
            Event::BarrierExit,
            Event::Issued {
                call: "lock".into(),
                target: Some(0),
            },
            Event::Returned {
                call: "fence".into(),
                target: None,
            },
            Event::FlushLocal { target: None },
            Event::FlushLocal { target: Some(7) },
            Event::OpIssued {
                op_id: 1,
                target: 0,
                op: RecordedOp::GetAccumulate("no_op".into()),
                datatype: "i32".into(),
                runs: vec![(4, 8)],
            },
            Event::Store {
                ranges: vec![(0, 1)],
            },
            Event::Load { ranges: vec![] },
            Event::ClientEvents {
                from: 1,
                to: 3,
                hash: vec![7; 32],
            },
        ];
        for recorded in [
            RecordedOp::Put,
            RecordedOp::Get,
            RecordedOp::Accumulate("sum".into()),
            RecordedOp::GetAccumulate("replace".into()),
            RecordedOp::FetchAndOp("max".into()),
            RecordedOp::CompareAndSwap,
        ] {
            events.push(op(recorded));
        }
        events
    }

    #[test]
    fn every_event_round_trips_through_both_encodings() {
        let events = every_kind();
        let kinds: HashSet<&str> = events.iter().map(Event::kind).collect();
        assert_eq!(kinds.len(), 32, "one of each of the 32 kinds");
        for event in events {
            let binary = Body::encode(&event);
            assert!(matches!(binary, Body::Binary(_)));
            assert_eq!(binary.decode().unwrap(), event);
            assert_eq!(binary.to_json(), event.to_json());
            let json = Body::Json(event.to_json());
            assert_eq!(json.decode().unwrap(), event);
        }
    }

    #[test]
    fn a_binary_payload_is_stored_as_its_bytes() {
        let data = vec![0xab; 1 << 20];
        let event = Event::Op {
            origin: 0,
            origin_incarnation: 1,
            op_id: 1,
            epoch: 0,
            token: 3,
            op: RecordedOp::Put,
            datatype: "u8".into(),
            disp: 0,
            runs: vec![(0, data.len() as u64)],
            data: data.clone(),
            compare: Vec::new(),
            result: Vec::new(),
        };
        let binary = Body::encode(&event).len();
        assert!(binary < data.len() + 64, "{binary} bytes for 1 MiB");
        assert!(Body::Json(event.to_json()).len() > 2 * data.len());
    }

    #[test]
    fn unreadable_binary_bodies_are_errors_not_panics() {
        for bytes in [&[0xff][..], &[0x0a, 0x05, 0x01], &[], &[0xfa, 0x01, 0x05]] {
            let body = Body::Binary(bytes.to_vec());
            assert_eq!(
                body.decode().map_err(|error| error.class),
                Err(crate::ErrorClass::Other),
                "{bytes:?}"
            );
            assert!(body.to_json().contains("unreadable"), "{}", body.to_json());
        }
    }

    #[test]
    fn a_chain_of_json_rows_continued_in_binary_verifies() {
        // a store written before schema version 4 holds JSON rows; new rows follow in binary
        let records = history();
        let json: fn(&Event) -> Body = |event| Body::Json(event.to_json());
        let rows = stored_as(
            &records,
            |index| if index < 2 { json } else { Body::encode },
        );
        assert_eq!(verify(&rows), Ok(()));
        // the same event in the other encoding is another row: the hash says so
        let mut switched = rows.clone();
        switched[2].body = Body::Json(switched[2].record.event.to_json());
        assert_eq!(verify(&switched), Err(3));
        let mut switched = rows;
        switched[0].body = Body::encode(&switched[0].record.event);
        assert_eq!(verify(&switched), Err(1));
    }

    #[test]
    fn replay_rebuilds_copies_at_any_point() {
        let records = history();
        let end = replay(&records, None).unwrap();
        assert_eq!(end[1][..4], 7i32.to_le_bytes());
        assert_eq!(end[0][4..], 9i32.to_le_bytes());
        let early = replay(&records, Some(2)).unwrap();
        assert_eq!(early[1][..4], 5i32.to_le_bytes());
        assert_eq!(early[0], vec![0; 8]);
    }

    #[test]
    fn events_round_trip_through_json() {
        for record in history() {
            let body = record.event.to_json();
            assert_eq!(Event::from_json(&body).unwrap(), record.event, "{body}");
        }
    }

    /// A client chain of rank 1, incarnation 1 on window 7: its rows as stored, and the
    /// marker of each range.
    fn client_chain(events: &[Event]) -> Vec<StoredRow> {
        let mut previous = GENESIS;
        events
            .iter()
            .enumerate()
            .map(|(index, event)| {
                let record = AuditRecord {
                    window: 7,
                    seq: index as u64 + 1,
                    at_ns: 5 + index as u64,
                    rank: 1,
                    incarnation: 1,
                    cseq: None,
                    event: event.clone(),
                };
                let body = Body::encode(event);
                let hash = chain_hash(&previous, &record, &body);
                let row = StoredRow {
                    record,
                    unreadable: None,
                    body,
                    prev_hash: previous.to_vec(),
                    hash: hash.to_vec(),
                };
                previous = hash;
                row
            })
            .collect()
    }

    fn marker(client: &[StoredRow], from: u64, to: u64) -> Event {
        Event::ClientEvents {
            from,
            to,
            hash: client[to as usize - 1].hash.clone(),
        }
    }

    /// Window rows: creation, marker of client rows 1..=2, a put at rank 1, marker of 3..=3.
    fn with_markers() -> (Vec<StoredRow>, Vec<StoredRow>) {
        let client = client_chain(&[
            Event::Store {
                ranges: vec![(0, 8)],
            },
            Event::Returned {
                call: "lock".into(),
                target: Some(1),
            },
            Event::Load {
                ranges: vec![(0, 4)],
            },
        ]);
        let mut records = history();
        records.truncate(2);
        let mut push = |rank: u32, event: Event| {
            let seq = records.len() as u64 + 1;
            records.push(record(seq, rank, event));
        };
        push(1, marker(&client, 1, 2));
        push(1, Event::Sync);
        push(1, marker(&client, 3, 3));
        (stored(&records), client)
    }

    #[test]
    fn merge_puts_client_rows_where_their_marker_is() {
        let (window, client) = with_markers();
        let records: Vec<AuditRecord> = window.iter().map(|row| row.record.clone()).collect();
        let merged = merge(records, &client);
        let places: Vec<(String, &str)> = merged
            .iter()
            .map(|record| (record.place(), record.event.kind()))
            .collect();
        assert_eq!(
            places,
            [
                ("1".to_string(), "window_created"),
                ("2".to_string(), "published"),
                ("3:1".to_string(), "store"),
                ("3:2".to_string(), "returned"),
                ("4".to_string(), "sync"),
                ("5:3".to_string(), "load"),
            ]
        );
        // the marker's clock, so the timeline has one clock
        assert_eq!(merged[2].at_ns, 30);
        assert_eq!(merged[2].rank, 1);
    }

    #[test]
    fn merge_leaves_out_rows_a_client_may_not_record() {
        let client = client_chain(&[Event::WindowFreed]);
        let mut records = history();
        records.truncate(1);
        records.push(record(2, 1, marker(&client, 1, 1)));
        let merged = merge(records, &client);
        assert_eq!(merged.len(), 1);
        assert_eq!(
            verify_history(&stored(&history()[..1]), &client).first_bad,
            None,
            "without a marker nothing names it"
        );
    }

    #[test]
    fn verify_history_checks_every_marked_client_row() {
        let (window, client) = with_markers();
        let intact = verify_history(&window, &client);
        assert_eq!(
            intact,
            Verdict {
                first_bad: None,
                client: None,
                client_events: 3,
                pending: Vec::new(),
                unmarked: Vec::new(),
            }
        );
        let broken_at = |client: &[StoredRow]| {
            let verdict = verify_history(&window, client);
            let at = verdict.client.expect("a client break");
            assert_eq!(verdict.first_bad, Some(at.marker));
            assert_eq!((at.rank, at.incarnation), (1, 1));
            (at.marker, at.cseq, at.fault)
        };
        let mut changed = client.clone();
        rewrite(&mut changed[1], |event| {
            let Event::Returned { call, .. } = event else {
                panic!("{event:?}")
            };
            *call = "unlock".into();
        });
        assert_eq!(broken_at(&changed), (3, 2, ClientFault::Altered));
        let mut deleted = client.clone();
        deleted.remove(2);
        assert_eq!(broken_at(&deleted), (5, 3, ClientFault::Missing));
        let mut reordered = client.clone();
        reordered[0].record.seq = 2;
        reordered[1].record.seq = 1;
        assert_eq!(broken_at(&reordered), (3, 1, ClientFault::Altered));
        // a consistent re-chaining of changed rows still differs from what the window names
        let rechained = client_chain(&[
            Event::Store {
                ranges: vec![(0, 16)],
            },
            client[1].record.event.clone(),
            client[2].record.event.clone(),
        ]);
        assert_eq!(broken_at(&rechained), (3, 2, ClientFault::Unnamed));
        let forbidden = client_chain(&[
            Event::Store {
                ranges: vec![(0, 8)],
            },
            Event::Sync,
            client[2].record.event.clone(),
        ]);
        let (forbidden_window, _) = {
            let mut records: Vec<AuditRecord> =
                window.iter().map(|row| row.record.clone()).collect();
            records[2].event = marker(&forbidden, 1, 2);
            records[4].event = marker(&forbidden, 3, 3);
            (stored(&records), ())
        };
        let verdict = verify_history(&forbidden_window, &forbidden);
        assert_eq!(
            verdict.client.map(|at| (at.cseq, at.fault)),
            Some((2, ClientFault::NotClientSide))
        );
    }

    #[test]
    fn rows_a_live_client_has_not_stored_yet_are_pending() {
        let (window, client) = with_markers();
        // the client's session attached after the creation; detached at the end or not
        let history = |detached: bool| {
            let mut records: Vec<AuditRecord> =
                window.iter().map(|row| row.record.clone()).collect();
            records.insert(1, record(0, 1, Event::Attach));
            if detached {
                records.push(record(0, 1, Event::Detach));
            }
            for (index, record) in records.iter_mut().enumerate() {
                record.seq = index as u64 + 1;
            }
            stored(&records)
        };
        let live = history(false);
        let verdict = verify_history(&live, &client[..2]);
        assert_eq!(verdict.first_bad, None);
        let span = |from, to| ClientSpan {
            rank: 1,
            incarnation: 1,
            from,
            to,
        };
        assert_eq!(verdict.pending, [span(3, 3)]);
        assert_eq!(verdict.client_events, 2);
        let verdict = verify_history(&live, &client[..1]);
        assert_eq!(
            (verdict.first_bad, verdict.pending),
            (None, vec![span(2, 3)])
        );
        // a hole is no client still writing
        let holed = [client[0].clone(), client[2].clone()];
        let verdict = verify_history(&live, &holed);
        assert_eq!(
            verdict.client.map(|at| (at.cseq, at.fault)),
            Some((2, ClientFault::Missing))
        );
        // once the session detached, what its markers name must be there
        let verdict = verify_history(&history(true), &client[..2]);
        assert_eq!(
            verdict.client.map(|at| (at.marker, at.cseq, at.fault)),
            Some((6, 3, ClientFault::Missing))
        );
        assert_eq!(verdict.pending, []);
    }

    #[test]
    fn verify_history_reports_unmarked_rows_and_bad_ranges() {
        let (window, mut client) = with_markers();
        // rows written after the last marker (a client that crashed before shipping it)
        let more = client_chain(&[
            client[0].record.event.clone(),
            client[1].record.event.clone(),
            client[2].record.event.clone(),
            Event::FlushLocal { target: None },
            Event::Store {
                ranges: vec![(8, 16)],
            },
        ]);
        client.extend(more[3..].iter().cloned());
        let verdict = verify_history(&window, &client);
        assert_eq!(verdict.first_bad, None);
        assert_eq!(
            verdict.unmarked,
            [ClientSpan {
                rank: 1,
                incarnation: 1,
                from: 4,
                to: 5
            }]
        );
        // a marker that skips rows
        let mut records: Vec<AuditRecord> = window.iter().map(|row| row.record.clone()).collect();
        records[4].event = marker(&client, 4, 4);
        let verdict = verify_history(&stored(&records), &client);
        assert_eq!(
            verdict.client.map(|at| (at.marker, at.cseq, at.fault)),
            Some((5, 3, ClientFault::Range))
        );
        // a broken window row before any marker: the window's own break, no client detail
        let mut window = window;
        // the body says 6 where the row was written with 5
        window[1].body = Body::encode(&Event::Published {
            offset: 0,
            data: 6i32.to_le_bytes().to_vec(),
        });
        let verdict = verify_history(&window, &client);
        assert_eq!((verdict.first_bad, verdict.client), (Some(2), None));
    }

    #[test]
    fn verify_names_the_first_bad_row() {
        let rows = stored(&history());
        assert_eq!(verify(&rows), Ok(()));
        let mut changed = rows.clone();
        rewrite(&mut changed[2], |event| {
            let Event::Op { op, .. } = event else {
                panic!("{event:?}")
            };
            *op = RecordedOp::Accumulate("prod".into());
        });
        assert_eq!(verify(&changed), Err(3));
        let mut deleted = rows.clone();
        deleted.remove(1);
        assert_eq!(verify(&deleted), Err(2));
        let mut reordered = rows.clone();
        reordered.swap(1, 2);
        assert_eq!(verify(&reordered), Err(2));
        let mut rehashed_one = rows;
        rehashed_one[3].record.at_ns += 1;
        assert_eq!(verify(&rehashed_one), Err(4));
    }
}
