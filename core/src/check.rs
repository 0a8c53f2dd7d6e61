//! Race checking over one window's audit log: happens-before from the recorded
//! synchronization (vector clocks, one component per rank), then every pair of conflicting
//! accesses on the same target that it does not order (separate memory model, SEMANTICS.md §2.1
//! and §5).
//!
//! Owns: which recorded events order which accesses, and which access pairs conflict. Must not:
//! read or write anything but the records it is given.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::assert::Assert;
use crate::audit::{place, AuditRecord, Event, RecordedOp};
use crate::reduce::Op;
use crate::window::{AccumulateOps, AccumulateOrdering, WindowInfo, DYNAMIC_BASE};

mod sync;

/// The rule a finding breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Two puts on overlapping bytes.
    PutPut,
    /// A put and a get (or an atomic read) on overlapping bytes.
    PutGet,
    /// A put and an accumulate on overlapping bytes.
    PutAccumulate,
    /// An accumulate and a plain get on overlapping bytes.
    AccumulateGet,
    /// Accumulates with different ops or datatypes on overlapping bytes.
    AccumulateOps,
    /// A remote get against the owner's local store.
    GetStore,
    /// A remote put or accumulate against the owner's local load, not ordered by a refresh.
    PutLoad,
    /// A local store while a put or accumulate to the window is pending (even disjoint).
    StoreWhilePending,
    /// A race that `flush_local` would have ordered had it completed at the target.
    FlushLocal,
    /// A remote access to a dynamic window's region not ordered before the owner's detach of
    /// it.
    DetachRace,
}

impl Rule {
    /// Every rule.
    pub const ALL: [Rule; 10] = [
        Rule::PutPut,
        Rule::PutGet,
        Rule::PutAccumulate,
        Rule::AccumulateGet,
        Rule::AccumulateOps,
        Rule::GetStore,
        Rule::PutLoad,
        Rule::StoreWhilePending,
        Rule::FlushLocal,
        Rule::DetachRace,
    ];

    /// The rule's stable name (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            Rule::PutPut => "put_put",
            Rule::PutGet => "put_get",
            Rule::PutAccumulate => "put_accumulate",
            Rule::AccumulateGet => "accumulate_get",
            Rule::AccumulateOps => "accumulate_ops",
            Rule::GetStore => "get_store",
            Rule::PutLoad => "put_load",
            Rule::StoreWhilePending => "store_while_pending",
            Rule::FlushLocal => "flush_local",
            Rule::DetachRace => "detach_race",
        }
    }

    /// The rule of a name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|rule| rule.name() == name)
    }

    /// One line saying what the rule forbids.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::PutPut => "two puts to overlapping bytes are not ordered (undefined result)",
            Rule::PutGet => "a put and a read of overlapping bytes are not ordered",
            Rule::PutAccumulate => "a put and an accumulate to overlapping bytes are not ordered",
            Rule::AccumulateGet => {
                "an accumulate and a get of overlapping bytes are not ordered (a get is not atomic)"
            }
            Rule::AccumulateOps => {
                "concurrent accumulates on overlapping bytes use different ops or datatypes \
                 (or, under accumulate_ops=same_op, an op and a no_op read)"
            }
            Rule::GetStore => "a remote read races with the owner's local store to the same bytes",
            Rule::PutLoad => {
                "the owner loads bytes a put or accumulate updates without a refresh call \
                 (fence, wait, lock, lock_all, sync) ordering them"
            }
            Rule::StoreWhilePending => {
                "store while a put or accumulate to the window is pending (separate model: \
                 even on disjoint bytes; unified: on the same bytes)"
            }
            Rule::FlushLocal => {
                "flush_local taken for remote completion: it completes an operation only at \
                 the origin"
            }
            Rule::DetachRace => {
                "a remote access to a region of a dynamic window is not ordered before the \
                 owner's detach of it"
            }
        }
    }
}

/// One side of a finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Side {
    /// Sequence number of the `op_issued`, `store` or `load` record (for a client row merged
    /// behind its marker, the marker's).
    pub seq: u64,
    /// For a merged client row: its cseq in the client's chain (see [`crate::audit::merge`]).
    pub cseq: Option<u64>,
    /// The rank that made the access.
    pub rank: u32,
    /// What it was: `put`, `get`, `accumulate(sum)`, `store`, `load`, …
    pub call: String,
}

/// A pair of conflicting accesses the recorded synchronization does not order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule broken.
    pub rule: Rule,
    /// The window rank both accesses touch.
    pub target: u32,
    /// The overlapping byte range `[start, end)` (for [`Rule::StoreWhilePending`], the store's).
    pub bytes: (u64, u64),
    /// The access with the smaller sequence number.
    pub first: Side,
    /// The other access.
    pub second: Side,
    /// A human-readable sentence.
    pub message: String,
}

type Clock = Vec<u64>;

fn join(into: &mut Clock, other: &[u64]) {
    for (a, b) in into.iter_mut().zip(other) {
        *a = (*a).max(*b);
    }
}

fn le(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x <= y)
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Put,
    Get,
    /// An accumulating write (accumulate, non-no_op get_accumulate/fetch_and_op, CAS).
    Acc {
        op: String,
        dtype: String,
        /// It also reads (returns the old value): all but accumulate.
        fetches: bool,
    },
    /// A no_op get_accumulate / fetch_and_op.
    AtomicRead {
        dtype: String,
    },
    Store,
    Load,
    /// The owner detached a region of a dynamic window (its bytes are the region's).
    Detach,
}

impl Kind {
    fn remote(&self) -> bool {
        !matches!(self, Kind::Store | Kind::Load | Kind::Detach)
    }

    fn remote_write(&self) -> bool {
        matches!(self, Kind::Put | Kind::Acc { .. })
    }

    fn remote_read(&self) -> bool {
        matches!(self, Kind::Get | Kind::AtomicRead { .. })
    }
}

/// How a remote operation's epoch orders its start.
#[derive(Clone, Copy, Debug)]
enum Epoch {
    Passive(u64),
    Pscw(u64),
    Fence(Option<u64>),
}

#[derive(Clone, Debug)]
struct Access {
    seq: u64,
    cseq: Option<u64>,
    rank: u32,
    target: u32,
    call: String,
    kind: Kind,
    ranges: Vec<(u64, u64)>,
    start: Clock,
    /// Remote: the clock at the call that completes it remotely; store: at the publishing
    /// call; load: its own clock. `None`: never.
    end: Option<Clock>,
    /// The clock at the first `flush_local` covering a remote operation before its end.
    flush_local: Option<Clock>,
    /// Local accesses: the clock at the owner's latest refresh point before them.
    refresh: Option<Clock>,
    epoch: Epoch,
    /// A remote operation: its origin, the origin's incarnation and its id, which the target's
    /// `op` event names when it applies it.
    op: Option<(u32, u64, u64)>,
}

fn classify(op: &RecordedOp, datatype: &str) -> (Kind, String) {
    let no_op = |name: &str| Op::parse(name) == Some(Op::NoOp);
    let dtype = datatype.to_string();
    match op {
        RecordedOp::Put => (Kind::Put, "put".into()),
        RecordedOp::Get => (Kind::Get, "get".into()),
        RecordedOp::Accumulate(name) => (
            Kind::Acc {
                op: name.clone(),
                dtype,
                fetches: false,
            },
            format!("accumulate({name})"),
        ),
        RecordedOp::GetAccumulate(name) | RecordedOp::FetchAndOp(name) => {
            let call = match op {
                RecordedOp::GetAccumulate(_) => format!("get_accumulate({name})"),
                _ => format!("fetch_and_op({name})"),
            };
            if no_op(name) {
                (Kind::AtomicRead { dtype }, call)
            } else {
                (
                    Kind::Acc {
                        op: name.clone(),
                        dtype,
                        fetches: true,
                    },
                    call,
                )
            }
        }
        RecordedOp::CompareAndSwap => (
            Kind::Acc {
                op: "compare_and_swap".into(),
                dtype,
                fetches: true,
            },
            "compare_and_swap".into(),
        ),
    }
}

#[derive(Default)]
struct Pass {
    n: usize,
    clock: Vec<Clock>,
    refresh: Vec<Option<Clock>>,
    accesses: Vec<Access>,
    pending_ops: Vec<Vec<usize>>,
    pending_stores: Vec<Vec<usize>>,
    // fences
    fence_enter: HashMap<(u64, u32), Clock>,
    fence_join: HashMap<u64, Clock>,
    fence_closing: HashSet<u64>,
    last_fence: Vec<Option<u64>>,
    // barriers
    barrier_enters: Vec<usize>,
    barrier_exits: Vec<usize>,
    barrier_join: Vec<Clock>,
    // point-to-point messages: the sender's clock at each send, by message id
    sent: HashMap<u64, Clock>,
    // PSCW
    post_gen: HashMap<(u32, u32), u64>,
    post_token: HashMap<(u32, u32, u64), Clock>,
    post_group: Vec<Vec<u32>>,
    start_gen: HashMap<(u32, u32), u64>,
    access_group: Vec<Option<Vec<u32>>>,
    complete_clock: HashMap<(u32, u32, u64), Clock>,
    // locks
    epochs: Vec<u64>,
    lock_epoch: HashMap<(u32, u32), u64>,
    lock_active: HashSet<(u32, u32)>,
    lock_all_epoch: Vec<Option<u64>>,
    lock_all_active: Vec<bool>,
    unlock_clock: HashMap<(u32, u32), Clock>,
    nocheck: HashMap<(u32, u32), bool>,
    holder_exclusive: HashMap<(u32, u64), bool>,
    released_all: Vec<Clock>,
    released_exclusive: Vec<Clock>,
    grant_join: HashMap<(u32, u32, u64), Clock>,
    unabsorbed: Vec<Clock>,
}

impl Pass {
    fn new(n: usize) -> Self {
        let zero = vec![0u64; n];
        Pass {
            n,
            clock: vec![zero.clone(); n],
            refresh: vec![None; n],
            pending_ops: vec![Vec::new(); n],
            pending_stores: vec![Vec::new(); n],
            last_fence: vec![None; n],
            barrier_enters: vec![0; n],
            barrier_exits: vec![0; n],
            post_group: vec![Vec::new(); n],
            access_group: vec![None; n],
            epochs: vec![0; n],
            lock_all_epoch: vec![None; n],
            lock_all_active: vec![false; n],
            released_all: vec![zero.clone(); n],
            released_exclusive: vec![zero.clone(); n],
            unabsorbed: vec![zero; n],
            ..Pass::default()
        }
    }

    fn zero(&self) -> Clock {
        vec![0; self.n]
    }

    /// A program-order step of `rank`: tick, then its clock.
    fn tick(&mut self, rank: u32) -> Clock {
        let clock = &mut self.clock[rank as usize];
        clock[rank as usize] += 1;
        clock.clone()
    }

    fn absorb(&mut self, rank: u32, other: &[u64]) -> Clock {
        let clock = &mut self.clock[rank as usize];
        join(clock, other);
        clock.clone()
    }

    /// Remote completion, at `rank`'s `clock`, of its pending operations to `target` (all
    /// with `None`).
    fn complete_ops(&mut self, rank: u32, target: Option<u32>, clock: &Clock) {
        let accesses = &mut self.accesses;
        self.pending_ops[rank as usize].retain(|&index| {
            let access = &mut accesses[index];
            if target.is_none_or(|target| access.target == target) {
                access.end = Some(clock.clone());
                false
            } else {
                true
            }
        });
    }

    fn flush_local(&mut self, rank: u32, target: Option<u32>, clock: &Clock) {
        for &index in &self.pending_ops[rank as usize] {
            let access = &mut self.accesses[index];
            if target.is_none_or(|target| access.target == target) && access.flush_local.is_none() {
                access.flush_local = Some(clock.clone());
            }
        }
    }

    fn publish(&mut self, rank: u32, clock: &Clock) {
        for index in std::mem::take(&mut self.pending_stores[rank as usize]) {
            self.accesses[index].end = Some(clock.clone());
        }
    }

    fn local(&mut self, record: &AuditRecord, kind: Kind, ranges: &[(u64, u64)]) {
        let rank = record.rank;
        let clock = self.tick(rank);
        let store = kind == Kind::Store;
        let index = self.accesses.len();
        self.accesses.push(Access {
            seq: record.seq,
            cseq: record.cseq,
            rank,
            target: rank,
            call: if store { "store" } else { "load" }.into(),
            kind,
            ranges: ranges.iter().copied().filter(|(s, e)| s < e).collect(),
            end: (!store).then(|| clock.clone()),
            start: clock,
            flush_local: None,
            refresh: self.refresh[rank as usize].clone(),
            epoch: Epoch::Fence(None),
            op: None,
        });
        if store {
            self.pending_stores[rank as usize].push(index);
        }
    }

    fn step(&mut self, record: &AuditRecord) {
        let rank = record.rank;
        if rank as usize >= self.n {
            return;
        }
        match &record.event {
            Event::WindowCreated { .. }
            | Event::WindowFreed
            | Event::InfoSet { .. }
            | Event::Published { .. }
            | Event::Pulled { .. }
            | Event::TestFalse
            | Event::PeerFailed { .. }
            | Event::Admin { .. }
            | Event::Departed { .. }
            | Event::Flush { .. }
            | Event::ClientEvents { .. }
            | Event::RegionAttached { .. }
            | Event::Op { .. } => {}
            Event::RegionDetached { base, size } => {
                let clock = self.tick(rank);
                let start = base.saturating_sub(DYNAMIC_BASE);
                self.accesses.push(Access {
                    seq: record.seq,
                    cseq: record.cseq,
                    rank,
                    target: rank,
                    call: "detach".into(),
                    kind: Kind::Detach,
                    ranges: vec![(start, start.saturating_add(*size))],
                    end: Some(clock.clone()),
                    start: clock,
                    flush_local: None,
                    refresh: None,
                    epoch: Epoch::Fence(None),
                    op: None,
                });
            }
            Event::Attach | Event::Detach | Event::Start { .. } | Event::WaitEnter => {
                self.tick(rank);
                if let Event::Start { group, .. } = &record.event {
                    for &target in group {
                        *self.start_gen.entry((rank, target)).or_insert(0) += 1;
                    }
                    self.access_group[rank as usize] = Some(group.clone());
                }
            }
            Event::FenceEnter { fence, assert } => self.fence_enter(rank, *fence, *assert),
            Event::FenceExit { fence } => self.fence_exit(rank, *fence),
            Event::Post { group, .. } => self.post(rank, group),
            Event::Complete => self.complete(rank),
            Event::WaitExit => self.wait_exit(rank),
            Event::Sync => {
                let clock = self.tick(rank);
                self.publish(rank, &clock);
            }
            Event::BarrierEnter => self.barrier_enter(rank),
            Event::BarrierExit => self.barrier_exit(rank),
            Event::Sent { message, .. } => {
                let clock = self.tick(rank);
                self.sent.insert(*message, clock);
            }
            Event::Received { message, .. } => {
                self.tick(rank);
                if let Some(sent) = self.sent.get(message).cloned() {
                    self.absorb(rank, &sent);
                }
            }
            Event::Issued { call, target } => self.issued(rank, call, *target),
            Event::Returned { call, target } => {
                self.tick(rank);
                if matches!(call.as_str(), "lock" | "lock_all" | "unlock" | "unlock_all") {
                    let zero = self.zero();
                    let grants = std::mem::replace(&mut self.unabsorbed[rank as usize], zero);
                    self.absorb(rank, &grants);
                }
                let refreshes = match call.as_str() {
                    "lock" => *target == Some(rank),
                    "lock_all" | "sync" => true,
                    _ => false,
                };
                if refreshes {
                    self.refresh[rank as usize] = Some(self.clock[rank as usize].clone());
                }
            }
            Event::FlushLocal { target } => {
                let clock = self.tick(rank);
                self.flush_local(rank, *target, &clock);
            }
            Event::OpIssued {
                target,
                op,
                datatype,
                runs,
                ..
            } => self.op_issued(record, *target, op, datatype, runs),
            Event::Store { ranges } => self.local(record, Kind::Store, ranges),
            Event::Load { ranges } => self.local(record, Kind::Load, ranges),
            Event::LockRequest {
                origin, nocheck, ..
            } => {
                self.nocheck.insert((rank, *origin), *nocheck);
            }
            Event::LockGrant {
                origin,
                lock_type,
                token,
            } => self.grant(rank, *origin, lock_type == "exclusive", *token),
            Event::LockRelease { origin, token } | Event::LockRevoke { origin, token, .. } => {
                // a revoked holder never unlocked: everything it did until then is before
                let released = matches!(record.event, Event::LockRelease { .. });
                self.lock_released(rank, *origin, *token, released);
            }
        }
    }

    fn issued(&mut self, rank: u32, call: &str, target: Option<u32>) {
        let clock = self.tick(rank);
        match (call, target) {
            ("lock", Some(target)) => {
                self.epochs[rank as usize] += 1;
                self.lock_epoch
                    .insert((rank, target), self.epochs[rank as usize]);
                self.lock_active.insert((rank, target));
            }
            ("lock_all", _) => {
                self.epochs[rank as usize] += 1;
                self.lock_all_epoch[rank as usize] = Some(self.epochs[rank as usize]);
                self.lock_all_active[rank as usize] = true;
            }
            ("unlock", Some(target)) => {
                self.complete_ops(rank, Some(target), &clock);
                self.publish(rank, &clock);
                self.unlock_clock.insert((rank, target), clock);
                self.lock_active.remove(&(rank, target));
            }
            ("unlock_all", _) => {
                self.complete_ops(rank, None, &clock);
                self.publish(rank, &clock);
                for target in 0..self.n as u32 {
                    self.unlock_clock.insert((rank, target), clock.clone());
                }
                self.lock_all_active[rank as usize] = false;
            }
            ("flush", Some(target)) => self.complete_ops(rank, Some(target), &clock),
            ("flush_all", _) => self.complete_ops(rank, None, &clock),
            _ => {}
        }
    }

    fn grant(&mut self, target: u32, origin: u32, exclusive: bool, token: u64) {
        if origin as usize >= self.n {
            return;
        }
        self.holder_exclusive.insert((target, token), exclusive);
        let nocheck = self
            .nocheck
            .get(&(target, origin))
            .copied()
            .unwrap_or(false);
        let joined = if nocheck {
            self.zero()
        } else if exclusive {
            self.released_all[target as usize].clone()
        } else {
            self.released_exclusive[target as usize].clone()
        };
        // the epoch this grant belongs to: the origin's most recent lock of this target or
        // lock_all (a lazy grant may arrive after the unlock was issued)
        let epoch = self
            .lock_epoch
            .get(&(origin, target))
            .copied()
            .max(self.lock_all_epoch[origin as usize])
            .unwrap_or(0);
        join(
            self.grant_join
                .entry((origin, target, epoch))
                .or_insert_with(|| vec![0; self.n]),
            &joined,
        );
        join(&mut self.unabsorbed[origin as usize], &joined);
    }

    /// Joins each remote operation's start with what its epoch orders it after.
    fn finish_starts(&mut self) {
        for index in 0..self.accesses.len() {
            let access = &self.accesses[index];
            if !access.kind.remote() {
                continue;
            }
            let (rank, target) = (access.rank, access.target);
            let extra = match access.epoch {
                Epoch::Passive(epoch) => self.grant_join.get(&(rank, target, epoch)),
                Epoch::Pscw(generation) => self.post_token.get(&(target, rank, generation)),
                Epoch::Fence(Some(fence)) => self.fence_enter.get(&(fence, target)),
                Epoch::Fence(None) => None,
            };
            if let Some(extra) = extra.cloned() {
                join(&mut self.accesses[index].start, &extra);
            }
        }
    }
}

/// `a` is over before `b` begins, using `end` as `a`'s end.
fn before_with(a: &Access, end: Option<&Clock>, b: &Access) -> bool {
    let Some(end) = end else {
        return false;
    };
    if a.kind.remote_write() && matches!(b.kind, Kind::Store | Kind::Load) {
        // a local access sees a remote update only through its owner's refresh
        return b.refresh.as_ref().is_some_and(|refresh| le(end, refresh));
    }
    le(end, &b.start)
}

fn before(a: &Access, b: &Access) -> bool {
    before_with(a, a.end.as_ref(), b)
}

fn overlap(a: &[(u64, u64)], b: &[(u64, u64)]) -> Option<(u64, u64)> {
    a.iter()
        .flat_map(|&(s1, e1)| b.iter().map(move |&(s2, e2)| (s1.max(s2), e1.min(e2))))
        .find(|(s, e)| s < e)
}

/// The rule a pair breaks if unordered, and the bytes concerned. `unified`: the window uses
/// the unified model, whose rules for the owner's loads and stores differ (SEMANTICS.md §2.2).
fn conflict(a: &Access, b: &Access, hints: &Hints, unified: bool) -> Option<(Rule, (u64, u64))> {
    use Kind::*;
    if a.target != b.target {
        return None;
    }
    // separate rule 3 of §2.1: even on disjoint bytes; unified rule 5: on the same bytes
    for (store, other) in [(a, b), (b, a)] {
        if store.kind == Store && other.kind.remote_write() {
            let same = overlap(&store.ranges, &other.ranges);
            let bytes = if unified {
                same?
            } else {
                same.or_else(|| store.ranges.first().copied())?
            };
            return Some((Rule::StoreWhilePending, bytes));
        }
    }
    let bytes = overlap(&a.ranges, &b.ranges)?;
    let rule = match (&a.kind, &b.kind) {
        (Detach, other) | (other, Detach) if other.remote() => Rule::DetachRace,
        (Detach, _) | (_, Detach) => return None,
        (Store | Load, Store | Load) => return None,
        // unified rules 2 and 3: a remote read of bytes the owner stores, and the owner's load
        // of bytes a remote update changes, are valid (the value is one of the two, and stays)
        (Store | Load, _) | (_, Store | Load) if unified => return None,
        (Store, other) | (other, Store) if other.remote_read() => Rule::GetStore,
        (Load, other) | (other, Load) if other.remote_write() => Rule::PutLoad,
        (Store | Load, _) | (_, Store | Load) => return None,
        (Put, Put) => Rule::PutPut,
        (Put, Get | AtomicRead { .. }) | (Get | AtomicRead { .. }, Put) => Rule::PutGet,
        (Put, Acc { .. }) | (Acc { .. }, Put) => Rule::PutAccumulate,
        (Acc { .. }, Get) | (Get, Acc { .. }) => Rule::AccumulateGet,
        (
            Acc {
                op: o1, dtype: d1, ..
            },
            Acc {
                op: o2, dtype: d2, ..
            },
        ) => {
            if o1 == o2 && d1 == d2 {
                return None;
            }
            Rule::AccumulateOps
        }
        (Acc { dtype: d1, .. }, AtomicRead { dtype: d2 })
        | (AtomicRead { dtype: d1 }, Acc { dtype: d2, .. }) => {
            // `same_op_no_op` (the default) lets a no_op read run beside an op; `same_op`
            // promises one op, and MPI_NO_OP is another
            if d1 == d2 && hints.ops == AccumulateOps::SameOpNoOp {
                return None;
            }
            Rule::AccumulateOps
        }
        (Get | AtomicRead { .. }, Get | AtomicRead { .. }) => return None,
    };
    Some((rule, bytes))
}

/// The window's hints the checker reads from its creation event: what its accesses promised.
struct Hints {
    /// `accumulate_ops`: whether a no_op read may run beside an op.
    ops: AccumulateOps,
    /// `accumulate_ordering`: which accumulates of one origin to one target stay ordered.
    ordering: AccumulateOrdering,
}

impl Hints {
    /// The hints of a window's info pairs; a log from before they were recorded (no pairs)
    /// has MPI's defaults, and so has a value this version cannot read.
    fn of(info: Option<&BTreeMap<String, String>>) -> Self {
        let info = WindowInfo::parse(
            info.into_iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        )
        .unwrap_or_default();
        Hints {
            ops: info.accumulate_ops,
            ordering: info.accumulate_ordering,
        }
    }

    /// Whether `accumulate_ordering` orders `second` after `first`: both accumulates (atomic
    /// reads included) of one origin to one target, `first` issued before, and every ordering
    /// the pair needs (a write then a read needs `raw`, …) in the window's set. The origin's
    /// program order then decides, as MPI's §11.7.2 says, so they cannot race.
    fn orders(&self, first: &Access, second: &Access) -> bool {
        let (Some((r1, w1)), Some((r2, w2))) =
            (reads_writes(&first.kind), reads_writes(&second.kind))
        else {
            return false;
        };
        if first.rank != second.rank || first.target != second.target || first.seq >= second.seq {
            return false;
        }
        self.ordering.orders((r1, w1), (r2, w2))
    }

    /// What the hints add to a finding's message.
    fn explain(&self, rule: Rule, a: &Access, b: &Access) -> String {
        let mut why = String::new();
        if rule == Rule::AccumulateOps {
            let no_op_read = matches!(a.kind, Kind::AtomicRead { .. })
                || matches!(b.kind, Kind::AtomicRead { .. });
            if no_op_read && self.ops == AccumulateOps::SameOp {
                why.push_str(
                    " (the window's accumulate_ops=same_op promises one op for concurrent \
                     accumulates: a no_op read is another)",
                );
            }
        }
        if a.rank == b.rank
            && a.target == b.target
            && reads_writes(&a.kind).is_some()
            && reads_writes(&b.kind).is_some()
        {
            why.push_str(&format!(
                " (both come from rank {}, but the window's accumulate_ordering={} does not \
                 order this pair)",
                a.rank,
                self.ordering.render()
            ));
        }
        why
    }
}

/// Whether an accumulate-family access reads and writes; `None` for any other access.
fn reads_writes(kind: &Kind) -> Option<(bool, bool)> {
    match kind {
        Kind::Acc { fetches, .. } => Some((*fetches, true)),
        Kind::AtomicRead { .. } => Some((true, false)),
        _ => None,
    }
}

fn side(access: &Access) -> Side {
    Side {
        seq: access.seq,
        cseq: access.cseq,
        rank: access.rank,
        call: access.call.clone(),
    }
}

/// Every pair of conflicting accesses in one window's log (in seq order) that its
/// synchronization does not order, sorted by the two sequence numbers.
pub fn check(records: &[AuditRecord]) -> Vec<Finding> {
    // the hints in effect from each event on: the creation's, then each set_info's
    let mut timeline: Vec<(u64, Hints)> = records
        .iter()
        .filter_map(|record| match &record.event {
            Event::WindowCreated { info, .. } | Event::InfoSet { info } => {
                Some((record.seq, Hints::of(Some(info))))
            }
            _ => None,
        })
        .collect();
    let unified = records
        .iter()
        .any(|record| matches!(record.event, Event::WindowCreated { unified: true, .. }));
    if timeline.first().is_none_or(|(seq, _)| *seq > 1) {
        timeline.insert(0, (0, Hints::of(None)));
    }
    // a pair is judged by the hints in effect when the later of the two was issued
    let hints_at = |a: &Access, b: &Access| {
        let seq = a.seq.max(b.seq);
        let at = timeline.partition_point(|(from, _)| *from <= seq);
        &timeline[at.saturating_sub(1)].1
    };
    let n = records
        .iter()
        .find_map(|record| match &record.event {
            Event::WindowCreated { sizes, .. } => Some(sizes.len()),
            _ => None,
        })
        .unwrap_or_else(|| {
            records
                .iter()
                .map(|record| record.rank as usize + 1)
                .max()
                .unwrap_or(0)
        });
    let mut pass = Pass::new(n);
    for record in records {
        pass.step(record);
    }
    pass.finish_starts();
    // an operation its target never applied touched nothing: one refused there (after an
    // operator revoked the lock it was issued under, say) or still on its way
    let applied = crate::export::applied_ops(records);
    let mut accesses = pass.accesses;
    accesses.retain(|access| access.op.is_none_or(|op| applied.contains(&op)));
    accesses.sort_by_key(|access| (access.seq, access.cseq));
    let mut by_target: HashMap<u32, Vec<&Access>> = HashMap::new();
    for access in &accesses {
        by_target.entry(access.target).or_default().push(access);
    }
    let mut findings = Vec::new();
    for list in by_target.values() {
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                let hints = hints_at(a, b);
                let Some((mut rule, bytes)) = conflict(a, b, hints, unified) else {
                    continue;
                };
                if before(a, b) || before(b, a) || hints.orders(a, b) {
                    continue;
                }
                let by_flush_local = |x: &Access, y: &Access| {
                    x.flush_local
                        .as_ref()
                        .is_some_and(|clock| before_with(x, Some(clock), y))
                };
                if by_flush_local(a, b) || by_flush_local(b, a) {
                    rule = Rule::FlushLocal;
                }
                let message = format!(
                    "{} by rank {} (seq {}) and {} by rank {} (seq {}) on bytes [{}, {}) of rank \
                     {} are not ordered: {}",
                    a.call,
                    a.rank,
                    place(a.seq, a.cseq),
                    b.call,
                    b.rank,
                    place(b.seq, b.cseq),
                    bytes.0,
                    bytes.1,
                    a.target,
                    rule.describe(),
                ) + &hints.explain(rule, a, b);
                findings.push(Finding {
                    rule,
                    target: a.target,
                    bytes,
                    first: side(a),
                    second: side(b),
                    message,
                });
            }
        }
    }
    findings.sort_by_key(|finding| {
        (
            (finding.first.seq, finding.first.cseq),
            (finding.second.seq, finding.second.cseq),
        )
    });
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::fixtures::op_event;

    /// Builds a window's log in the order the server records it.
    struct History {
        n: u32,
        records: Vec<AuditRecord>,
        next_op: u64,
        next_token: u64,
        tokens: HashMap<(u32, u32), u64>,
    }

    const NOPRECEDE: u32 = Assert::NOPRECEDE;

    impl History {
        fn new(n: u32) -> Self {
            History::with_info(n, &[])
        }

        /// A window created with the info pairs `info`.
        fn with_info(n: u32, info: &[(&str, &str)]) -> Self {
            History::created(n, info, false)
        }

        /// A window of the unified model.
        fn unified(n: u32) -> Self {
            History::created(n, &[], true)
        }

        fn created(n: u32, info: &[(&str, &str)], unified: bool) -> Self {
            let mut history = History {
                n,
                records: Vec::new(),
                next_op: 0,
                next_token: 0,
                tokens: HashMap::new(),
            };
            history.at(
                0,
                0,
                Event::WindowCreated {
                    world: "w".into(),
                    name: "x".into(),
                    sizes: vec![64; n as usize],
                    disp_units: vec![1; n as usize],
                    info: info
                        .iter()
                        .map(|(key, value)| (key.to_string(), value.to_string()))
                        .collect(),
                    unified,
                },
            );
            for rank in 0..n {
                history.po(rank, Event::Attach);
            }
            history
        }

        fn at(&mut self, rank: u32, incarnation: u64, event: Event) -> u64 {
            let seq = self.records.len() as u64 + 1;
            self.records.push(AuditRecord {
                window: 1,
                seq,
                at_ns: seq * 1000,
                rank,
                incarnation,
                cseq: None,
                event,
            });
            seq
        }

        /// A program-order event of `rank`.
        fn po(&mut self, rank: u32, event: Event) -> u64 {
            self.at(rank, 1, event)
        }

        /// A target-side event at `rank`.
        fn tgt(&mut self, rank: u32, event: Event) -> u64 {
            self.at(rank, 0, event)
        }

        fn returned(&mut self, rank: u32, call: &str, target: Option<u32>) {
            self.po(
                rank,
                Event::Returned {
                    call: call.into(),
                    target,
                },
            );
        }

        fn issued(&mut self, rank: u32, call: &str, target: Option<u32>) {
            self.po(
                rank,
                Event::Issued {
                    call: call.into(),
                    target,
                },
            );
        }

        fn fence(&mut self, fence: u64, assert: u32) {
            for rank in 0..self.n {
                self.po(rank, Event::FenceEnter { fence, assert });
            }
            for rank in 0..self.n {
                self.tgt(rank, Event::FenceExit { fence });
                self.returned(rank, "fence", None);
            }
        }

        fn barrier(&mut self) {
            for rank in 0..self.n {
                self.po(rank, Event::BarrierEnter);
            }
            for rank in 0..self.n {
                self.po(rank, Event::BarrierExit);
            }
        }

        /// `from` sends message `id` to `to`, which receives it.
        fn message(&mut self, from: u32, to: u32, id: u64) {
            self.po(
                from,
                Event::Sent {
                    to,
                    tag: 0,
                    message: id,
                },
            );
            self.po(
                to,
                Event::Received {
                    from,
                    tag: 0,
                    message: id,
                },
            );
        }

        fn op(
            &mut self,
            origin: u32,
            target: u32,
            op: RecordedOp,
            dtype: &str,
            at: u64,
            len: u64,
        ) -> u64 {
            self.next_op += 1;
            let op_id = self.next_op;
            let seq = self.po(
                origin,
                Event::OpIssued {
                    op_id,
                    target,
                    op: op.clone(),
                    datatype: dtype.into(),
                    runs: vec![(at, at + len)],
                },
            );
            self.tgt(
                target,
                op_event(
                    origin,
                    op_id,
                    op,
                    dtype,
                    at,
                    vec![(at, len)],
                    vec![0; len as usize],
                ),
            );
            seq
        }

        fn put(&mut self, origin: u32, target: u32, at: u64, len: u64) -> u64 {
            self.op(origin, target, RecordedOp::Put, "u8", at, len)
        }

        fn get(&mut self, origin: u32, target: u32, at: u64, len: u64) -> u64 {
            self.op(origin, target, RecordedOp::Get, "u8", at, len)
        }

        fn acc(&mut self, origin: u32, target: u32, op: &str, dtype: &str, at: u64) -> u64 {
            self.op(
                origin,
                target,
                RecordedOp::Accumulate(op.into()),
                dtype,
                at,
                4,
            )
        }

        fn store(&mut self, rank: u32, at: u64, len: u64) -> u64 {
            self.po(
                rank,
                Event::Store {
                    ranges: vec![(at, at + len)],
                },
            )
        }

        fn load(&mut self, rank: u32, at: u64, len: u64) -> u64 {
            self.po(
                rank,
                Event::Load {
                    ranges: vec![(at, at + len)],
                },
            )
        }

        fn grant(&mut self, origin: u32, target: u32, lock_type: &str) {
            self.tgt(
                target,
                Event::LockRequest {
                    origin,
                    lock_type: lock_type.into(),
                    nocheck: false,
                },
            );
            self.next_token += 1;
            let token = self.next_token;
            self.tokens.insert((origin, target), token);
            self.tgt(
                target,
                Event::LockGrant {
                    origin,
                    lock_type: lock_type.into(),
                    token,
                },
            );
        }

        fn release(&mut self, origin: u32, target: u32) {
            let token = self.tokens.remove(&(origin, target)).unwrap_or(0);
            self.tgt(target, Event::LockRelease { origin, token });
        }

        fn lock(&mut self, origin: u32, target: u32, lock_type: &str) {
            self.issued(origin, "lock", Some(target));
            self.grant(origin, target, lock_type);
            self.returned(origin, "lock", Some(target));
        }

        fn unlock(&mut self, origin: u32, target: u32) {
            self.issued(origin, "unlock", Some(target));
            self.release(origin, target);
            self.returned(origin, "unlock", Some(target));
        }

        fn lock_all(&mut self, origin: u32) {
            self.issued(origin, "lock_all", None);
            for target in 0..self.n {
                self.grant(origin, target, "shared");
            }
            self.returned(origin, "lock_all", None);
        }

        fn unlock_all(&mut self, origin: u32) {
            self.issued(origin, "unlock_all", None);
            for target in 0..self.n {
                self.release(origin, target);
            }
            self.returned(origin, "unlock_all", None);
        }

        fn flush(&mut self, origin: u32, target: u32) {
            self.issued(origin, "flush", Some(target));
            self.tgt(target, Event::Flush { origin });
            self.returned(origin, "flush", Some(target));
        }

        fn flush_local(&mut self, origin: u32, target: u32) {
            self.po(
                origin,
                Event::FlushLocal {
                    target: Some(target),
                },
            );
        }

        fn post(&mut self, rank: u32, group: &[u32]) {
            self.po(
                rank,
                Event::Post {
                    group: group.to_vec(),
                    assert: 0,
                },
            );
        }

        fn start(&mut self, rank: u32, group: &[u32]) {
            self.po(
                rank,
                Event::Start {
                    group: group.to_vec(),
                    assert: 0,
                },
            );
        }

        fn complete(&mut self, rank: u32) {
            self.po(rank, Event::Complete);
            self.returned(rank, "complete", None);
        }

        fn wait(&mut self, rank: u32) {
            self.po(rank, Event::WaitEnter);
            self.tgt(rank, Event::WaitExit);
            self.returned(rank, "wait", None);
        }

        fn sync(&mut self, rank: u32) {
            self.po(rank, Event::Sync);
            self.returned(rank, "sync", None);
        }

        fn check(&self) -> Vec<Finding> {
            check(&self.records)
        }
    }

    fn rules(findings: &[Finding]) -> Vec<Rule> {
        findings.iter().map(|finding| finding.rule).collect()
    }

    #[test]
    fn rule_names_are_distinct_and_match_serde() {
        let names: HashSet<&str> = Rule::ALL.iter().map(|rule| rule.name()).collect();
        assert_eq!(names.len(), Rule::ALL.len());
        for rule in Rule::ALL {
            assert_eq!(serde_json::to_value(rule).unwrap(), rule.name());
            assert!(!rule.describe().is_empty());
        }
    }

    #[test]
    fn two_origins_putting_to_one_location_in_a_fence_epoch() {
        let mut h = History::new(3);
        h.fence(1, NOPRECEDE);
        let a = h.put(0, 2, 0, 4);
        let b = h.put(1, 2, 2, 4);
        h.fence(2, 0);
        let findings = h.check();
        assert_eq!(rules(&findings), vec![Rule::PutPut], "{findings:#?}");
        let finding = &findings[0];
        assert_eq!(finding.target, 2);
        assert_eq!(finding.bytes, (2, 4));
        assert_eq!((finding.first.seq, finding.first.rank), (a, 0));
        assert_eq!((finding.second.seq, finding.second.rank), (b, 1));
        assert_eq!(finding.first.call, "put");
        assert!(serde_json::to_string(finding).unwrap().contains("put_put"));
    }

    /// An operator revoked rank 1's lock of rank 0; rank 2 got it and put there; then rank 1's
    /// epoch still sent a put, which the target refused (`op_issued`, never an `op`): it
    /// touched nothing, so it races with nothing. Rank 1's flushed put before the revocation
    /// is ordered before rank 2's by the revocation.
    #[test]
    fn an_operation_its_target_refused_races_with_nothing() {
        let mut h = History::new(3);
        h.lock(1, 0, "exclusive");
        h.put(1, 0, 0, 4);
        h.flush(1, 0);
        let token = h.tokens[&(1, 0)];
        h.tgt(
            0,
            Event::LockRevoke {
                origin: 1,
                token,
                reason: "revoked by an operator".into(),
            },
        );
        h.lock(2, 0, "exclusive");
        h.put(2, 0, 0, 4);
        h.next_op += 1;
        let refused = h.next_op;
        h.po(
            1,
            Event::OpIssued {
                op_id: refused,
                target: 0,
                op: RecordedOp::Put,
                datatype: "u8".into(),
                runs: vec![(0, 4)],
            },
        );
        h.unlock(2, 0);
        assert!(h.check().is_empty(), "{:#?}", h.check());
        // the same put applied (an `op` at the target) would race with rank 2's
        h.tgt(
            0,
            op_event(
                1,
                refused,
                RecordedOp::Put,
                "u8",
                0,
                vec![(0, 4)],
                vec![0; 4],
            ),
        );
        assert_eq!(rules(&h.check()), vec![Rule::PutPut]);
    }

    #[test]
    fn disjoint_puts_in_a_fence_epoch_are_fine() {
        let mut h = History::new(3);
        h.fence(1, NOPRECEDE);
        h.put(0, 2, 0, 4);
        h.put(1, 2, 4, 4);
        h.put(0, 2, 8, 4);
        h.fence(2, 0);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn store_and_remote_put_in_one_fence_epoch() {
        for (at, expected) in [(0, (0, 4)), (16, (16, 20))] {
            let mut h = History::new(2);
            h.fence(1, NOPRECEDE);
            let put = h.put(0, 1, 0, 4);
            let store = h.store(1, at, 4);
            h.fence(2, 0);
            let findings = h.check();
            assert_eq!(
                rules(&findings),
                vec![Rule::StoreWhilePending],
                "{findings:#?}"
            );
            assert_eq!(findings[0].bytes, expected);
            assert_eq!(findings[0].first.seq, put);
            assert_eq!(findings[0].second.seq, store);
            assert_eq!(findings[0].second.call, "store");
        }
    }

    #[test]
    fn unified_store_and_remote_put_race_only_on_the_same_bytes() {
        // disjoint: separate rule 3 forbids it, unified rule 5 allows it
        let mut h = History::unified(2);
        h.fence(1, NOPRECEDE);
        h.put(0, 1, 0, 4);
        h.store(1, 16, 4);
        h.fence(2, 0);
        assert_eq!(h.check(), vec![]);
        // the same bytes: undefined in both models
        let mut h = History::unified(2);
        h.fence(1, NOPRECEDE);
        let put = h.put(0, 1, 0, 4);
        let store = h.store(1, 2, 4);
        h.fence(2, 0);
        let findings = h.check();
        assert_eq!(
            rules(&findings),
            vec![Rule::StoreWhilePending],
            "{findings:#?}"
        );
        assert_eq!(findings[0].bytes, (2, 4));
        assert_eq!(
            (findings[0].first.seq, findings[0].second.seq),
            (put, store)
        );
    }

    #[test]
    fn unified_loads_and_remote_reads_beside_stores_and_puts_are_valid() {
        // example 3 under unified: the get beside the store reads one of the two values
        let mut h = History::unified(2);
        h.store(1, 0, 4);
        h.lock(1, 1, "shared");
        h.barrier();
        h.lock(0, 1, "shared");
        h.get(0, 1, 0, 4);
        h.unlock(0, 1);
        h.unlock(1, 1);
        assert_eq!(h.check(), vec![]);
        // example 2 under unified: the owner polls a location a put updates
        let mut h = History::unified(2);
        h.lock(0, 1, "exclusive");
        h.put(0, 1, 0, 4);
        h.unlock(0, 1);
        h.barrier();
        h.load(1, 0, 4);
        assert_eq!(h.check(), vec![]);
        // the same two under separate are findings
        let mut h = History::new(2);
        h.lock(0, 1, "exclusive");
        h.put(0, 1, 0, 4);
        h.unlock(0, 1);
        h.barrier();
        h.load(1, 0, 4);
        assert_eq!(rules(&h.check()), vec![Rule::PutLoad]);
    }

    /// A message orders what its sender did before the send before what its receiver does
    /// after the receive, as a barrier does, and only in that direction.
    #[test]
    fn a_message_orders_the_senders_past_before_the_receivers_future() {
        // two origins put to the same bytes under shared locks: a race unless ordered
        let puts = |message: Option<(u32, u32)>| {
            let mut h = History::new(3);
            h.lock(0, 1, "shared");
            h.put(0, 1, 0, 4);
            h.unlock(0, 1);
            if let Some((from, to)) = message {
                h.message(from, to, 1);
            }
            h.lock(2, 1, "shared");
            h.put(2, 1, 0, 4);
            h.unlock(2, 1);
            h.check()
        };
        assert_eq!(puts(Some((0, 2))), vec![]);
        assert_eq!(rules(&puts(None)), vec![Rule::PutPut]);
        assert_eq!(rules(&puts(Some((2, 0)))), vec![Rule::PutPut]);
    }

    #[test]
    fn stores_before_the_fence_and_puts_after_it_are_fine() {
        let mut h = History::new(2);
        h.store(1, 0, 4);
        h.fence(1, NOPRECEDE);
        h.put(0, 1, 0, 4);
        h.fence(2, 0);
        h.load(1, 0, 4);
        h.store(1, 0, 4);
        h.fence(3, 0);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn put_in_epoch_k_and_get_in_epoch_k_plus_1_by_another_rank() {
        let mut h = History::new(3);
        h.fence(1, NOPRECEDE);
        h.put(0, 2, 0, 4);
        h.fence(2, 0);
        h.get(1, 2, 0, 4);
        h.fence(3, 0);
        assert_eq!(h.check(), vec![]);
        // the same put and get in one epoch race
        let mut h = History::new(3);
        h.fence(1, NOPRECEDE);
        h.put(0, 2, 0, 4);
        h.get(1, 2, 0, 4);
        h.fence(2, 0);
        assert_eq!(rules(&h.check()), vec![Rule::PutGet]);
    }

    #[test]
    fn shared_locks_do_not_guard_conflicting_puts() {
        // even one after the other: shared locks do not order each other
        let mut h = History::new(3);
        h.lock(0, 2, "shared");
        h.put(0, 2, 0, 4);
        h.unlock(0, 2);
        h.lock(1, 2, "shared");
        h.put(1, 2, 0, 4);
        h.unlock(1, 2);
        assert_eq!(rules(&h.check()), vec![Rule::PutPut]);
    }

    #[test]
    fn exclusive_locks_guard_conflicting_puts() {
        let mut h = History::new(3);
        h.lock(0, 2, "exclusive");
        h.put(0, 2, 0, 4);
        h.unlock(0, 2);
        h.lock(1, 2, "exclusive");
        h.put(1, 2, 0, 4);
        h.flush(1, 2);
        h.get(1, 2, 0, 4);
        h.unlock(1, 2);
        h.lock(0, 2, "exclusive");
        h.get(0, 2, 0, 4);
        h.unlock(0, 2);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn different_accumulate_ops_or_datatypes_on_one_element() {
        let mut h = History::new(3);
        h.lock_all(0);
        h.lock_all(1);
        h.acc(0, 2, "sum", "i32", 0);
        h.acc(1, 2, "replace", "i32", 0);
        h.acc(1, 2, "sum", "f32", 8);
        h.acc(0, 2, "sum", "i32", 8);
        h.unlock_all(0);
        h.unlock_all(1);
        let findings = h.check();
        assert_eq!(
            rules(&findings),
            vec![Rule::AccumulateOps, Rule::AccumulateOps],
            "{findings:#?}"
        );
        assert_eq!(findings[0].first.call, "accumulate(sum)");
        assert_eq!(findings[0].second.call, "accumulate(replace)");
        assert_eq!(findings[1].bytes, (8, 12));
    }

    #[test]
    fn same_op_accumulates_from_several_origins_under_lock_all() {
        let mut h = History::new(4);
        for origin in 0..3 {
            h.lock_all(origin);
        }
        for origin in 0..3 {
            h.acc(origin, 3, "sum", "i64", 0);
            h.op(
                origin,
                3,
                RecordedOp::FetchAndOp("no_op".into()),
                "i64",
                0,
                8,
            );
            h.op(
                origin,
                3,
                RecordedOp::GetAccumulate("sum".into()),
                "i64",
                4,
                4,
            );
        }
        for origin in 0..3 {
            h.unlock_all(origin);
        }
        assert_eq!(h.check(), vec![]);
    }

    /// Two origins under lock_all: one accumulates with sum, the other reads the same
    /// element with a no_op fetch_and_op.
    fn sum_beside_a_no_op_read(info: &[(&str, &str)]) -> Vec<Finding> {
        let mut h = History::with_info(3, info);
        h.sum_beside_a_no_op_read();
        h.check()
    }

    impl History {
        /// Rank 0 adds to rank 2's element 0 while rank 1 reads it with a no_op
        /// fetch_and_op, each in a lock_all epoch of its own.
        fn sum_beside_a_no_op_read(&mut self) {
            self.lock_all(0);
            self.lock_all(1);
            self.acc(0, 2, "sum", "i64", 0);
            self.op(1, 2, RecordedOp::FetchAndOp("no_op".into()), "i64", 0, 8);
            self.unlock_all(0);
            self.unlock_all(1);
        }
    }

    #[test]
    fn a_no_op_read_beside_an_op_is_a_finding_only_under_same_op() {
        assert_eq!(
            sum_beside_a_no_op_read(&[]),
            vec![],
            "same_op_no_op by default"
        );
        assert_eq!(
            sum_beside_a_no_op_read(&[("accumulate_ops", "same_op_no_op")]),
            vec![]
        );
        let findings = sum_beside_a_no_op_read(&[("accumulate_ops", "same_op")]);
        assert_eq!(rules(&findings), vec![Rule::AccumulateOps], "{findings:#?}");
        assert_eq!(findings[0].second.call, "fetch_and_op(no_op)");
        assert!(
            findings[0].message.contains("accumulate_ops=same_op"),
            "{}",
            findings[0].message
        );
    }

    /// Hints set by `MPI_Win_set_info` govern the accesses after it: the same unordered sum
    /// beside a no_op read is fine before `accumulate_ops=same_op` is set and a finding after.
    #[test]
    fn set_info_changes_the_hints_for_what_comes_after_it() {
        let mut h = History::with_info(3, &[]);
        h.sum_beside_a_no_op_read();
        assert_eq!(h.check(), vec![], "same_op_no_op at creation");
        // set_info is collective but does not synchronize: a barrier keeps the phases apart
        h.barrier();
        for rank in 0..3 {
            h.po(
                rank,
                Event::InfoSet {
                    info: BTreeMap::from([("accumulate_ops".into(), "same_op".into())]),
                },
            );
        }
        h.sum_beside_a_no_op_read();
        let findings = h.check();
        assert_eq!(rules(&findings), vec![Rule::AccumulateOps], "{findings:#?}");
        assert!(findings[0].message.contains("accumulate_ops=same_op"));
    }

    /// One origin, in one lock_all epoch: `first` then `second` (accumulate-family calls on
    /// the same element of rank 1).
    fn one_origin(info: &[(&str, &str)], first: RecordedOp, second: RecordedOp) -> Vec<Finding> {
        let mut h = History::with_info(2, info);
        h.lock_all(0);
        h.op(0, 1, first, "i64", 0, 8);
        h.op(0, 1, second, "i64", 0, 8);
        h.unlock_all(0);
        h.check()
    }

    #[test]
    fn accumulate_ordering_orders_one_origins_accumulates_unless_the_window_drops_it() {
        let sum = || RecordedOp::Accumulate("sum".into());
        let replace = || RecordedOp::Accumulate("replace".into());
        let read = || RecordedOp::GetAccumulate("no_op".into());
        // the default orders them all: program order decides, nothing races
        assert_eq!(one_origin(&[], sum(), replace()), vec![]);
        // write after write needs waw
        let findings = one_origin(&[("accumulate_ordering", "none")], sum(), replace());
        assert_eq!(rules(&findings), vec![Rule::AccumulateOps], "{findings:#?}");
        assert!(
            findings[0]
                .message
                .contains("both come from rank 0, but the window's accumulate_ordering=none"),
            "{}",
            findings[0].message
        );
        assert_eq!(
            one_origin(&[("accumulate_ordering", "rar,raw,war")], sum(), replace()).len(),
            1
        );
        assert_eq!(
            one_origin(&[("accumulate_ordering", "waw")], sum(), replace()),
            vec![]
        );
        // under same_op a no_op read after a write needs raw, before one needs war
        let same_op = ("accumulate_ops", "same_op");
        assert_eq!(
            one_origin(&[same_op, ("accumulate_ordering", "raw")], sum(), read()),
            vec![]
        );
        assert_eq!(
            one_origin(&[same_op, ("accumulate_ordering", "war")], sum(), read()).len(),
            1
        );
        assert_eq!(
            one_origin(&[same_op, ("accumulate_ordering", "war")], read(), sum()),
            vec![]
        );
        // a fetching op reads too: after a write it needs raw as well as waw
        let fetch_replace = || RecordedOp::GetAccumulate("replace".into());
        assert_eq!(
            one_origin(&[("accumulate_ordering", "waw")], sum(), fetch_replace()).len(),
            1
        );
        assert_eq!(
            one_origin(
                &[("accumulate_ordering", "raw,waw")],
                sum(),
                fetch_replace()
            ),
            vec![]
        );
    }

    #[test]
    fn accumulate_ordering_never_orders_two_origins() {
        let mut h = History::with_info(3, &[]);
        h.lock_all(0);
        h.lock_all(1);
        h.acc(0, 2, "sum", "i64", 0);
        h.acc(1, 2, "replace", "i64", 0);
        h.unlock_all(0);
        h.unlock_all(1);
        assert_eq!(rules(&h.check()), vec![Rule::AccumulateOps]);
    }

    #[test]
    fn put_then_barrier_then_owner_load_without_refresh() {
        let mut h = History::new(2);
        h.lock(0, 1, "exclusive");
        let put = h.put(0, 1, 0, 4);
        h.unlock(0, 1);
        h.barrier();
        let load = h.load(1, 0, 4);
        h.sync(1);
        let findings = h.check();
        assert_eq!(rules(&findings), vec![Rule::PutLoad], "{findings:#?}");
        assert_eq!((findings[0].first.seq, findings[0].second.seq), (put, load));
        assert_eq!(findings[0].second.call, "load");
    }

    #[test]
    fn example_2_put_unlock_barrier_lock_self_load() {
        let mut h = History::new(2);
        h.lock(0, 1, "exclusive");
        h.put(0, 1, 0, 4);
        h.unlock(0, 1);
        h.barrier();
        h.lock(1, 1, "exclusive");
        h.load(1, 0, 4);
        h.unlock(1, 1);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn put_flush_local_barrier_then_another_ranks_get() {
        let mut h = History::new(3);
        h.lock_all(0);
        h.lock_all(1);
        let put = h.put(0, 2, 0, 4);
        h.flush_local(0, 2);
        h.barrier();
        let get = h.get(1, 2, 0, 4);
        h.unlock_all(1);
        h.unlock_all(0);
        let findings = h.check();
        assert_eq!(rules(&findings), vec![Rule::FlushLocal], "{findings:#?}");
        assert_eq!((findings[0].first.seq, findings[0].second.seq), (put, get));
        // with a flush instead, it is ordered
        let mut h = History::new(3);
        h.lock_all(0);
        h.lock_all(1);
        h.put(0, 2, 0, 4);
        h.flush(0, 2);
        h.barrier();
        h.get(1, 2, 0, 4);
        h.unlock_all(1);
        h.unlock_all(0);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn put_flush_get_by_the_same_origin() {
        let mut h = History::new(2);
        h.lock(0, 1, "shared");
        h.put(0, 1, 0, 4);
        h.flush(0, 1);
        h.get(0, 1, 0, 4);
        h.unlock(0, 1);
        assert_eq!(h.check(), vec![]);
        // without the flush (or with flush_local) they race
        let mut h = History::new(2);
        h.lock(0, 1, "shared");
        h.put(0, 1, 0, 4);
        h.flush_local(0, 1);
        h.get(0, 1, 0, 4);
        h.unlock(0, 1);
        assert_eq!(rules(&h.check()), vec![Rule::FlushLocal]);
    }

    #[test]
    fn example_3_store_before_a_shared_lock() {
        let mut h = History::new(2);
        let store = h.store(1, 0, 4);
        h.lock(1, 1, "shared");
        h.barrier();
        h.lock(0, 1, "shared");
        let get = h.get(0, 1, 0, 4);
        h.unlock(0, 1);
        h.unlock(1, 1);
        let findings = h.check();
        assert_eq!(rules(&findings), vec![Rule::GetStore], "{findings:#?}");
        assert_eq!(
            (findings[0].first.seq, findings[0].second.seq),
            (store, get)
        );
        // the fix: sync before the barrier
        let mut h = History::new(2);
        h.store(1, 0, 4);
        h.lock(1, 1, "shared");
        h.sync(1);
        h.barrier();
        h.lock(0, 1, "shared");
        h.get(0, 1, 0, 4);
        h.unlock(0, 1);
        h.unlock(1, 1);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn example_1_store_under_lock_self_then_barrier_then_get() {
        let mut h = History::new(2);
        h.lock(1, 1, "exclusive");
        h.store(1, 0, 4);
        h.unlock(1, 1);
        h.barrier();
        h.lock(0, 1, "exclusive");
        h.get(0, 1, 0, 4);
        h.unlock(0, 1);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn exclusive_lock_orders_a_remote_put_before_the_owners_store() {
        let mut h = History::new(2);
        h.lock(0, 1, "exclusive");
        h.put(0, 1, 0, 4);
        h.unlock(0, 1);
        h.lock(1, 1, "exclusive");
        h.store(1, 8, 4);
        h.unlock(1, 1);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn pscw_put_then_the_targets_load_after_wait() {
        let mut h = History::new(2);
        h.post(1, &[0]);
        h.start(0, &[1]);
        h.put(0, 1, 0, 4);
        h.complete(0);
        h.wait(1);
        h.load(1, 0, 4);
        h.store(1, 0, 4);
        h.post(1, &[0]);
        h.start(0, &[1]);
        h.get(0, 1, 0, 4);
        h.complete(0);
        h.wait(1);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn pscw_store_during_exposure_races_with_the_put() {
        let mut h = History::new(2);
        h.post(1, &[0]);
        h.start(0, &[1]);
        h.put(0, 1, 0, 4);
        h.store(1, 32, 4);
        h.complete(0);
        h.wait(1);
        assert_eq!(rules(&h.check()), vec![Rule::StoreWhilePending]);
    }

    /// A lazy exclusive lock: granted when the first operation reaches the target.
    fn lazy_locked_put(h: &mut History, origin: u32, target: u32, nocheck: bool) {
        h.issued(origin, "lock", Some(target));
        h.returned(origin, "lock", Some(target));
        h.next_op += 1;
        let op_id = h.next_op;
        h.po(
            origin,
            Event::OpIssued {
                op_id,
                target,
                op: RecordedOp::Put,
                datatype: "u8".into(),
                runs: vec![(0, 4)],
            },
        );
        h.tgt(
            target,
            Event::LockRequest {
                origin,
                lock_type: "exclusive".into(),
                nocheck,
            },
        );
        h.next_token += 1;
        let token = h.next_token;
        h.tokens.insert((origin, target), token);
        h.tgt(
            target,
            Event::LockGrant {
                origin,
                lock_type: "exclusive".into(),
                token,
            },
        );
        h.tgt(
            target,
            op_event(
                origin,
                op_id,
                RecordedOp::Put,
                "u8",
                0,
                vec![(0, 4)],
                vec![0; 4],
            ),
        );
        h.unlock(origin, target);
    }

    #[test]
    fn lazy_exclusive_locks_order_through_the_grant() {
        let mut h = History::new(3);
        lazy_locked_put(&mut h, 0, 2, false);
        lazy_locked_put(&mut h, 1, 2, false);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn nocheck_grants_order_nothing() {
        let mut h = History::new(3);
        lazy_locked_put(&mut h, 0, 2, true);
        lazy_locked_put(&mut h, 1, 2, true);
        assert_eq!(rules(&h.check()), vec![Rule::PutPut]);
    }

    proptest::proptest! {
        /// Any sequence of events, however malformed, is checked without panicking, and the
        /// findings come sorted.
        #[test]
        fn arbitrary_logs_do_not_panic(steps in proptest::collection::vec((0u32..4, 0u8..16, 0u64..3), 0..60)) {
            let mut h = History::new(3);
            for (rank, kind, x) in steps {
                let t = (x as u32) % 3;
                match kind {
                    0 => { h.put(rank, t, x * 2, 4); }
                    1 => { h.get(rank, t, x, 4); }
                    2 => { h.acc(rank, t, if x == 0 { "sum" } else { "max" }, "i32", 0); }
                    3 => { h.store(rank, x, 2); }
                    4 => { h.load(rank, x, 2); }
                    5 => {
                        h.po(rank, Event::FenceEnter { fence: x, assert: 0 });
                    }
                    6 => {
                        h.tgt(rank, Event::FenceExit { fence: x });
                    }
                    7 => h.lock(rank, t, if x == 0 { "shared" } else { "exclusive" }),
                    8 => h.unlock(rank, t),
                    9 => h.lock_all(rank),
                    10 => h.unlock_all(rank),
                    11 => h.flush_local(rank, t),
                    12 => {
                        h.po(rank, Event::BarrierExit);
                    }
                    13 => h.post(rank, &[t, 5]),
                    14 => h.start(rank, &[t]),
                    _ => h.wait(rank),
                }
            }
            let findings = h.check();
            let keys: Vec<(u64, u64)> = findings.iter().map(|f| (f.first.seq, f.second.seq)).collect();
            let mut sorted = keys.clone();
            sorted.sort();
            proptest::prop_assert_eq!(keys, sorted);
            for finding in &findings {
                proptest::prop_assert!(finding.first.seq < finding.second.seq);
            }
        }
    }

    #[test]
    fn an_uncompleted_put_is_pending_forever() {
        let mut h = History::new(3);
        h.lock_all(0);
        h.put(0, 2, 0, 4);
        h.barrier();
        h.lock(1, 2, "exclusive");
        h.get(1, 2, 0, 4);
        h.unlock(1, 2);
        assert_eq!(rules(&h.check()), vec![Rule::PutGet]);
    }
    /// Rank 1 detaches the region at offset 0 of 16 bytes (address `DYNAMIC_BASE`).
    fn detach(h: &mut History, owner: u32) -> u64 {
        h.tgt(
            owner,
            Event::RegionDetached {
                base: DYNAMIC_BASE,
                size: 16,
            },
        )
    }

    #[test]
    fn a_put_not_ordered_before_the_detach_of_its_region_is_a_detach_race() {
        let mut h = History::new(2);
        h.lock(0, 1, "shared");
        let put = h.put(0, 1, 4, 4);
        let detached = detach(&mut h, 1);
        h.unlock(0, 1);
        let findings = h.check();
        assert_eq!(rules(&findings), vec![Rule::DetachRace], "{findings:#?}");
        let finding = &findings[0];
        assert_eq!((finding.first.seq, finding.second.seq), (put, detached));
        assert_eq!(finding.second.call, "detach");
        assert_eq!(finding.bytes, (4, 8));
        assert!(finding.message.contains("detach"), "{}", finding.message);
    }

    #[test]
    fn an_access_completed_and_ordered_before_the_detach_is_fine() {
        let mut h = History::new(2);
        h.lock(0, 1, "shared");
        h.put(0, 1, 4, 4);
        h.unlock(0, 1);
        h.barrier();
        detach(&mut h, 1);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn a_detach_races_only_with_accesses_to_its_own_region() {
        let mut h = History::new(2);
        h.lock(0, 1, "shared");
        h.put(0, 1, 16, 4);
        detach(&mut h, 1);
        h.unlock(0, 1);
        assert_eq!(h.check(), vec![], "the put is past the region's 16 bytes");
    }

    #[test]
    fn the_owners_own_loads_and_stores_do_not_race_its_detach() {
        let mut h = History::new(2);
        h.po(
            1,
            Event::Store {
                ranges: vec![(0, 8)],
            },
        );
        detach(&mut h, 1);
        h.po(
            1,
            Event::Load {
                ranges: vec![(0, 8)],
            },
        );
        assert_eq!(h.check(), vec![]);
    }
}
