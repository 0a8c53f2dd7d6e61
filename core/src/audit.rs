//! The audit vocabulary: what is recorded about every epoch, the hash chain that makes the log
//! tamper-evident, and replay, which rebuilds every rank's public copy at any sequence number
//! with the same [`crate::window::apply`] that runs live.
//!
//! Owns: event meaning, canonical encoding for hashing, verification and replay. Must not:
//! store anything (the server's audit writer does).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::datatype::Datatype;
use crate::error::RmaResult;
use crate::layout::Run;
use crate::reduce::{self, Op};
use crate::rma_err;

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
            Event::Op { .. } => "op",
        }
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

/// An event with its place in the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRecord {
    /// Window id.
    pub window: u64,
    /// Gap-free sequence number within the window, from 1.
    pub seq: u64,
    /// Monotonic nanoseconds since the recording server started.
    pub at_ns: u64,
    /// Where it happened.
    pub rank: u32,
    /// Session incarnation of that rank (0 for target-side events).
    pub incarnation: u64,
    /// What happened.
    pub event: Event,
}

/// The hash before the first row of a window.
pub const GENESIS: [u8; 32] = [0; 32];

/// The hash a row commits to: SHA-256 over the previous hash and the row's canonical fields.
pub fn chain_hash(previous: &[u8; 32], record: &AuditRecord, body: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(previous);
    hasher.update(record.window.to_le_bytes());
    hasher.update(record.seq.to_le_bytes());
    hasher.update(record.at_ns.to_le_bytes());
    hasher.update(record.rank.to_le_bytes());
    hasher.update(record.incarnation.to_le_bytes());
    hasher.update(body.as_bytes());
    hasher.finalize().into()
}

/// A stored row as verification reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRow {
    /// The record (its event parsed from `body`).
    pub record: AuditRecord,
    /// The stored JSON body.
    pub body: String,
    /// The stored previous hash.
    pub prev_hash: Vec<u8>,
    /// The stored hash.
    pub hash: Vec<u8>,
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
        if Event::from_json(&row.body).ok().as_ref() != Some(&row.record.event) {
            return Err(row.record.seq);
        }
        previous = hash;
    }
    Ok(())
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
    let runs: Vec<Run> = runs
        .iter()
        .map(|&(offset, len)| Run { offset, len })
        .collect();
    let parse_op = |name: &str| {
        Op::parse(name).ok_or_else(|| rma_err!(Other, "event {seq} has unknown op {name}"))
    };
    let mut consumed = 0usize;
    for run in &runs {
        let range = span(run.offset, run.len, copy.len(), seq)?;
        let len = range.len();
        let origin = data.get(consumed..consumed + len);
        match op {
            RecordedOp::Get => {}
            RecordedOp::Put => {
                let origin =
                    origin.ok_or_else(|| rma_err!(Other, "event {seq} is short of data"))?;
                copy[range].copy_from_slice(origin);
            }
            RecordedOp::CompareAndSwap => {
                reduce::compare_and_swap(dtype, &mut copy[range], compare, data)?;
            }
            RecordedOp::Accumulate(name)
            | RecordedOp::GetAccumulate(name)
            | RecordedOp::FetchAndOp(name) => {
                let reduction = parse_op(name)?;
                if reduction != Op::NoOp {
                    let origin =
                        origin.ok_or_else(|| rma_err!(Other, "event {seq} is short of data"))?;
                    reduce::reduce(reduction, dtype, &mut copy[range], origin)?;
                }
            }
        }
        consumed += len;
    }
    Ok(())
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
        let mut previous = GENESIS;
        records
            .iter()
            .map(|record| {
                let body = record.event.to_json();
                let hash = chain_hash(&previous, record, &body);
                let row = StoredRow {
                    record: record.clone(),
                    body,
                    prev_hash: previous.to_vec(),
                    hash: hash.to_vec(),
                };
                previous = hash;
                row
            })
            .collect()
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

    #[test]
    fn verify_names_the_first_bad_row() {
        let rows = stored(&history());
        assert_eq!(verify(&rows), Ok(()));
        let mut changed = rows.clone();
        changed[2].body = changed[2].body.replace("sum", "prod");
        changed[2].record.event = Event::from_json(&changed[2].body).unwrap();
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
