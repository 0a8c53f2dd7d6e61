//! The target half of the protocol between ranks, sans I/O: what one rank's window does with
//! what origins send it (DESIGN.md "The protocol between ranks").
//!
//! Owns: *when* an operation may be applied at this target — the lock table (core's
//! [`LockTable`]: compatibility, NOCHECK, fairness, fencing tokens), one FIFO queue per origin
//! of items that may not be processed yet, fence completion, PSCW post/complete counting and
//! `test`, and ranks that are gone or absent. What an operation does is
//! [`apply`](crate::window::apply). Must not: do I/O, read a clock (the caller passes `now`)
//! or know how answers travel (`R` is the caller's opaque reply address).
//!
//! A [`Target`] takes [`Input`]s ([`Target::handle`], [`Target::tick`]) and leaves
//! [`Effects`] for the caller to carry out ([`Target::take_effects`]): events to record,
//! answers to send — after those events are durable, or at once — and lock grants to count.
//! The server's actor carries them over tokio and the audit writer; tests drive it directly.
//!
//! This file holds the engine's types — what it takes in ([`Input`], [`Access`], [`Segment`]),
//! what it leaves ([`Effects`], [`Outcome`], [`Update`]) and [`Target`]'s state — with its
//! construction, [`Target::handle`], a match that hands each input to the module of its
//! concern, and how answers and events are left in [`Effects`]. Each child module adds an
//! `impl` block of [`Target`]:
//!
//! - `queues`: an origin's items — the FIFO queue per origin, when its head is enabled or
//!   refused, what an enabled item does (a lock request, unlock, flush, complete marker), and
//!   lock grants.
//! - `copy`: the public copy — the owner's pushes and publications, an operation applied, and
//!   under the unified model the updates to the owner and [`Input::Follow`].
//! - `fence`: the owner's fence and when it returns.
//! - `pscw`: the owner's post, wait and test.
//! - `dynamic`: a dynamic window's attached regions.
//! - `departures`: ended sessions (revoked locks, gone and absent ranks), and `Stop` and
//!   `Abandon`.
//! - `inspect`: the read-only [`TargetView`].

mod copy;
mod departures;
mod dynamic;
mod fence;
mod inspect;
mod pscw;
mod queues;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::audit::Event;
use crate::epoch::{AccessTag, LockRequest, LockType};
use crate::locks::LockTable;
use crate::ranges::RangeSet;
use crate::window::{MemoryModel, TargetAccess, TargetOp};
use crate::{ErrorClass, RmaError};

pub use departures::Departure;
use dynamic::Regions;
use fence::PendingFence;
pub use inspect::{FenceView, HolderView, QueuedView, TargetView, WaiterView};
use pscw::PendingWait;

/// Unified model: the most bytes of one segment of the copy sent when the owner starts to
/// follow it ([`Input::Follow`]), so that no message grows with the window.
pub const FOLLOW_CHUNK: usize = 16 << 20;

/// Bytes of a rank's copy at an offset: pushed by its owner, or pulled back by it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Where the bytes start in the copy.
    pub offset: u64,
    /// The bytes.
    pub data: Bytes,
}

impl Segment {
    /// The bytes of `copy` that are not zero, as segments (zero runs shorter than 64 bytes
    /// stay inside a segment, so that scattered values do not become a segment each): what
    /// a copy that starts zeroed needs to become `copy`.
    pub fn nonzero(copy: &[u8]) -> Vec<Segment> {
        const GAP: usize = 64;
        let mut segments = Vec::new();
        let mut at = 0;
        while let Some(start) = copy[at..]
            .iter()
            .position(|&byte| byte != 0)
            .map(|i| at + i)
        {
            // the segment ends before the first zero run of at least GAP bytes, or at the end
            let mut end = start;
            let mut zeros = 0;
            for (i, &byte) in copy[start..].iter().enumerate() {
                if byte == 0 {
                    zeros += 1;
                    if zeros == GAP {
                        break;
                    }
                } else {
                    zeros = 0;
                    end = start + i + 1;
                }
            }
            segments.push(Segment {
                offset: start as u64,
                data: Bytes::copy_from_slice(&copy[start..end]),
            });
            at = end;
        }
        segments
    }

    /// The bytes of `copy` in each of `ranges`, which are then cleared: what changed since the
    /// last time, to carry to the other copy.
    pub fn take(ranges: &mut RangeSet, copy: &[u8]) -> Vec<Segment> {
        let segments = ranges
            .iter()
            .map(|(start, end)| Segment {
                offset: start,
                data: Bytes::copy_from_slice(&copy[start as usize..end as usize]),
            })
            .collect();
        ranges.clear();
        segments
    }
}

/// Something an origin sends to a target, processed in order per origin.
#[derive(Debug)]
pub enum Access<R> {
    /// An operation, applied once the target may be accessed under `tag`.
    Op {
        /// The call's id in the origin's session (for the audit log).
        op_id: u64,
        /// The origin session's incarnation.
        incarnation: u64,
        /// When it may be applied.
        tag: AccessTag,
        /// The fencing token of the lock the origin believes it holds (0: whatever lock it
        /// holds, as for a lazy lock whose grant it has not seen).
        token: u64,
        /// The validated operation.
        op: TargetOp<Bytes>,
        /// Its byte runs at this target.
        access: TargetAccess,
        /// Where the result goes.
        reply: R,
    },
    /// A lock request (lazy ones travel in front of the first operation or the unlock).
    LockRequest {
        /// Shared or exclusive, nocheck.
        request: LockRequest,
        /// The origin holds, or is deemed to hold, locks at other targets of the window (a
        /// `lock_all` epoch, or several lock epochs open): its request is never held back
        /// behind waiting exclusive requests ([`crate::locks`]).
        holding_elsewhere: bool,
        /// For an eager lock (one's own rank): answered at the grant with the pulled bytes.
        grant: Option<R>,
    },
    /// Release this origin's lock.
    Unlock {
        /// Answered once released.
        reply: R,
    },
    /// Answered once everything this origin sent before it is applied.
    Flush {
        /// The answer.
        reply: R,
    },
    /// End of the origin's access epoch of generation `generation` to this target.
    CompleteMarker {
        /// The generation.
        generation: u64,
        /// Answered once the epoch's operations before it are applied here
        /// ([`Effects::behind`]): the origin's `complete` waits for every target's.
        reply: R,
    },
}

impl<R> Access<R> {
    /// Where this item's answer goes, if it has one.
    pub fn into_reply(self) -> Option<R> {
        match self {
            Access::Op { reply, .. }
            | Access::Unlock { reply }
            | Access::Flush { reply }
            | Access::CompleteMarker { reply, .. } => Some(reply),
            Access::LockRequest { grant, .. } => grant,
        }
    }
}

/// What a target takes in.
#[derive(Debug)]
pub enum Input<R> {
    /// From an origin (any rank, including the owner).
    Access {
        /// The origin rank.
        origin: u32,
        /// The origin session's incarnation.
        incarnation: u64,
        /// What it sent.
        item: Access<R>,
    },
    /// A session of `origin` ended: its locks are revoked, what it still had queued here is
    /// dropped and, when it took part in active-target synchronization, what needs it fails.
    Departed(Departure),
    /// A new session of `origin` opened the window: it may take part in epochs again (unless
    /// an earlier session of it left an active-target epoch behind).
    Opened {
        /// The rank.
        origin: u32,
    },
    /// The owner publishes private bytes (rule 5).
    Push {
        /// The bytes and where they go (inside the copy: the caller checked).
        segments: Vec<Segment>,
    },
    /// Unified model: the owner's stores, published as they happen. Numbered by the owner
    /// (`seq`, increasing): every [`Update`] says how many of them came before its bytes, so
    /// the owner knows which of its stores an update may not overwrite.
    Publish {
        /// The bytes and where they go (inside the copy: the caller checked).
        segments: Vec<Segment>,
        /// The owner's number for these stores.
        seq: u64,
    },
    /// Unified model: the owner's session follows its public copy — the whole copy now, then
    /// every change as it happens ([`Effects::updates`]); answered once the copy is handed on.
    Follow {
        /// The answer.
        reply: R,
    },
    /// The owner entered its fence number `fence`.
    FenceEnter {
        /// The fence number.
        fence: u64,
        /// The epoch it closes (wait until every rank reached it: [`Input::FenceReached`]), if
        /// any.
        closes: Option<u64>,
        /// Pull when done.
        pull: bool,
        /// Answered when the fence may return.
        reply: R,
    },
    /// Every rank entered the fence that closes `epoch`, each after handing this target
    /// everything it issued in that epoch (so those items arrived before this input). Sent
    /// once per epoch to every target, by the session of the last rank to arrive
    /// ([`crate::fence::FenceTally`]).
    FenceReached {
        /// The closed epoch.
        epoch: u64,
    },
    /// The owner posted to `group`.
    Post {
        /// The sorted exposure group.
        group: Vec<u32>,
    },
    /// The owner waits (or tests) for the end of its exposure epoch.
    Wait {
        /// Pull when done.
        pull: bool,
        /// Answer at once with `flag = false` if not done.
        test: bool,
        /// The answer.
        reply: R,
    },
    /// Dynamic window: the owner attaches a region of `size` bytes (`MPI_WIN_ATTACH`), at the
    /// address `at` if given, else after everything attached so far; answered with
    /// [`Outcome::Attached`] and its address, or `MPI_ERR_RMA_ATTACH` (overlap, no room within
    /// the limit), `MPI_ERR_RMA_FLAVOR` (not a dynamic window).
    Attach {
        /// The region's size in bytes.
        size: u64,
        /// The address asked for, if any.
        at: Option<u64>,
        /// The answer.
        reply: R,
    },
    /// Dynamic window: the owner detaches the region that starts at address `base`
    /// (`MPI_WIN_DETACH`); `MPI_ERR_RMA_ATTACH` when no attached region starts there.
    Detach {
        /// The region's address.
        base: u64,
        /// The answer.
        reply: R,
    },
    /// The owner pulls what changed remotely (sync).
    Pull {
        /// The answer.
        reply: R,
    },
    /// The window was freed: everything pending fails with `MPI_ERR_WIN`; rank 0 records
    /// `window_freed`.
    Stop,
    /// The window is no longer served here (a cluster node let its world go: it moved, or
    /// the node lost its lease): everything pending fails with `MPI_ERR_IO`, and nothing is
    /// recorded — the window is not freed, its log goes on where it is served next.
    Abandon,
}

/// A successful answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The call is done.
    Done,
    /// The bytes an operation returns (get, get_accumulate, fetch_and_op, compare_and_swap).
    Data(Vec<u8>),
    /// A synchronization call returned: the owner's pulled bytes, `test`'s flag, a lock's
    /// fencing token.
    Synced {
        /// What changed remotely since the owner's last pull, when it pulls.
        pull: Vec<Segment>,
        /// `test`'s answer (true for a wait that returned).
        flag: bool,
        /// The fencing token of a granted lock (0 otherwise).
        token: u64,
    },
    /// A region was attached to a dynamic window at this address.
    Attached {
        /// The region's address.
        base: u64,
    },
}

/// One answer to one call.
pub type Answer = Result<Outcome, RmaError>;

/// Unified model: bytes of the public copy that changed, for the owner's private copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    /// The highest `seq` of the owner's [`Input::Publish`] applied before these bytes changed:
    /// the owner's stores numbered above it were not yet applied, and the bytes they stored
    /// must not be overwritten by this update (the store comes later at the target too).
    pub published: u64,
    /// The bytes.
    pub segments: Vec<Segment>,
}

/// What a target leaves for its caller to do, in order within each kind: record the events
/// first; send `updates`, then `answers`, `lazy` and `behind`, once those events are durable (in
/// the caller's durability), `early` as soon as they are handed on.
#[derive(Debug)]
pub struct Effects<R> {
    /// Audit events, in the order they happened (empty when the target does not record).
    pub events: Vec<Event>,
    /// Unified model: changes of the public copy for the owner's private copy, in the order
    /// they happened, to be sent before `answers` (an answer may depend on them having
    /// arrived: the unlock of a put orders it before whatever the owner does next).
    pub updates: Vec<Update>,
    /// Answers that must not leave before the events above are durable.
    pub answers: Vec<(R, Answer)>,
    /// Answers that complete nothing a client may rely on (an operation that returns no data
    /// was applied under a lock; a refusal that changed nothing): the call that completes them
    /// (flush, unlock) waits for a later commit, which includes these events.
    pub early: Vec<(R, Answer)>,
    /// Answers that, like `answers`, must not leave before the events above are durable, but
    /// that no commit need start for: an operation of a fence or PSCW epoch that returns no
    /// data. Its origin waits for it only inside the call that closes the epoch, and that call
    /// cannot return before this target answered something it answers only after applying the
    /// operation: its own rank's fence (the notice that all ranks arrived reaches it behind
    /// every operation of the epoch), or the origin's end-of-epoch marker (it travels behind
    /// the epoch's operations), in `answers` or `behind`. That answer's commit carries this one;
    /// committing for it alone would only make the closing call wait for a second commit.
    pub lazy: Vec<(R, Answer)>,
    /// Answers that must not leave before every event recorded before them is durable — this
    /// target's earlier events included, even when this input recorded none: the
    /// acknowledgement of an end-of-epoch marker, which vouches for the epoch's operations
    /// applied here (their answers are `lazy`). The origin's `complete` is answered once every
    /// target acknowledged its marker, so one commit carries the epoch's operations, their
    /// answers and the complete's.
    pub behind: Vec<(R, Answer)>,
    /// Locks granted, with how long each request waited (NOCHECK grants wait zero).
    pub lock_grants: Vec<(LockType, Duration)>,
}

impl<R> Default for Effects<R> {
    fn default() -> Self {
        Effects {
            events: Vec::new(),
            updates: Vec::new(),
            answers: Vec::new(),
            early: Vec::new(),
            lazy: Vec::new(),
            behind: Vec::new(),
            lock_grants: Vec::new(),
        }
    }
}

/// One rank's window as a target: its public copy and everything that decides when origins
/// may access it.
#[derive(Debug)]
pub struct Target<R> {
    rank: u32,
    nranks: u32,
    /// Whether events are produced at all (audit off: none).
    recording: bool,
    public: Vec<u8>,
    /// Bytes changed by operations since the owner's last pull (separate model).
    changed: RangeSet,
    /// Unified model: changes go to the owner as they happen, not at its pulls.
    unified: bool,
    /// Unified model: the highest `seq` of the owner's publications applied.
    published: u64,
    /// Dynamic window: the attached regions and the most bytes the rank's memory may span.
    dynamic: Option<Regions>,
    fence_entered: u64,
    /// The last epoch every rank reached the closing fence of.
    fence_reached: Option<u64>,
    /// Ranks whose session ended: the last epoch whose closing fence each entered.
    fenced_before_leaving: BTreeMap<u32, Option<u64>>,
    pending_fence: Option<PendingFence<R>>,
    /// Per origin: how many posts of this rank included it.
    posts: Vec<u64>,
    /// Per origin: the highest generation it completed towards this rank.
    completes: Vec<u64>,
    post_group: Option<Vec<u32>>,
    pending_wait: Option<PendingWait<R>>,
    locks: LockTable<Option<R>>,
    /// Per origin, in arrival order: what it sent, with its session's incarnation.
    queues: Vec<VecDeque<(u64, Access<R>)>>,
    /// Items in `queues`, kept as they are pushed and taken.
    queued: usize,
    /// Every origin whose queue is not empty (and maybe some whose queue emptied since):
    /// draining visits these, not all N queues, so a fence costs a target O(items), not O(N).
    nonempty: BTreeSet<u32>,
    /// Ranks whose session ended after they took part in fence or PSCW on this window, and
    /// why: every fence, wait or operation that needs them fails with `PROC_FAILED`.
    gone: BTreeMap<u32, String>,
    /// Ranks whose session ended with no newer one attached, until a new session of theirs
    /// opens the window: what needs them fails meanwhile.
    absent: BTreeMap<u32, String>,
    /// Ranks whose lock an operator revoked while their session goes on ([`Target::revoke`]),
    /// with that session's incarnation and why: what it sends in that lock epoch is refused
    /// with `MPI_ERR_RMA_SYNC`, up to its unlock, which ends the epoch and reports it too.
    revoked: BTreeMap<u32, (u64, String)>,
    /// The clock reading of the input being handled.
    now: Instant,
    effects: Effects<R>,
}

impl<R> Target<R> {
    /// Rank `rank` of a window of `nranks` ranks, with the public copy `public`. `recording`
    /// says whether it produces audit events; `lock_fairness` is [`LockTable::new`]'s.
    pub fn new(
        rank: u32,
        nranks: u32,
        public: Vec<u8>,
        recording: bool,
        lock_fairness: Duration,
        now: Instant,
    ) -> Self {
        Target {
            rank,
            nranks,
            recording,
            public,
            changed: RangeSet::new(),
            unified: false,
            published: 0,
            dynamic: None,
            fence_entered: 0,
            fence_reached: None,
            fenced_before_leaving: BTreeMap::new(),
            pending_fence: None,
            posts: vec![0; nranks as usize],
            completes: vec![0; nranks as usize],
            post_group: None,
            pending_wait: None,
            locks: LockTable::new(lock_fairness),
            queues: (0..nranks).map(|_| VecDeque::new()).collect(),
            queued: 0,
            nonempty: BTreeSet::new(),
            gone: BTreeMap::new(),
            absent: BTreeMap::new(),
            revoked: BTreeMap::new(),
            now,
            effects: Effects::default(),
        }
    }

    /// Under `model`: [`MemoryModel::Unified`] sends every change of the public copy to the
    /// owner as it happens ([`Effects::updates`]) instead of at its pulls.
    pub fn with_model(mut self, model: MemoryModel) -> Self {
        self.unified = model == MemoryModel::Unified;
        self
    }

    /// The public copy.
    pub fn public(&self) -> &[u8] {
        &self.public
    }

    /// Whether operations changed bytes of the public copy since the owner's last pull
    /// (separate model): what its next pull ([`Input::Pull`], a wait, fence or lock) brings.
    pub fn owner_behind(&self) -> bool {
        !self.changed.is_empty()
    }

    /// Whether `origin` has items here that wait: queued behind what may not be processed
    /// yet, or a lock request waiting for its grant.
    pub fn holds_back(&self, origin: u32) -> bool {
        let queued = self
            .queues
            .get(origin as usize)
            .is_some_and(|q| !q.is_empty());
        queued || self.locks.waiters().any(|waiter| waiter.origin == origin)
    }

    /// The ranks holding a lock here, in rank order.
    pub fn lock_holders(&self) -> Vec<u32> {
        self.locks.holders().map(|(origin, _)| origin).collect()
    }

    /// Items queued here that may not be processed yet.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Lock requests waiting for their grant.
    pub fn waiting(&self) -> usize {
        self.locks.waiting()
    }

    /// What the caller must do now (and the target forgets).
    pub fn take_effects(&mut self) -> Effects<R> {
        std::mem::take(&mut self.effects)
    }

    /// When to call [`Target::tick`] if nothing else arrives (a shared lock request held back
    /// behind a waiting exclusive one is granted when its fairness wait ends).
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        self.locks.next_deadline(now)
    }

    /// Time passed: grants what the lock table allows now, and processes what that enabled.
    pub fn tick(&mut self, now: Instant) {
        self.now = now;
        self.grant_waiters();
        self.drain_all();
    }

    /// Is any epoch open or anything pending here? `Some(reason)` when busy.
    pub fn busy(&self) -> Option<String> {
        if let Some((holder, _)) = self.locks.holders().next() {
            return Some(format!("rank {holder} holds a lock on rank {}", self.rank));
        }
        if self.locks.waiting() > 0 {
            return Some(format!("lock requests are waiting at rank {}", self.rank));
        }
        if self.post_group.is_some() {
            return Some(format!("rank {} is exposed by post", self.rank));
        }
        if self.pending_fence.is_some() {
            return Some(format!("rank {} is inside a fence", self.rank));
        }
        if self.queued > 0 {
            return Some(format!("operations are pending at rank {}", self.rank));
        }
        None
    }

    /// Takes one input at `now`.
    pub fn handle(&mut self, input: Input<R>, now: Instant) {
        self.now = now;
        match input {
            Input::Access {
                origin,
                incarnation,
                item,
            } => self.handle_access(origin, incarnation, item),
            Input::Departed(left) => self.handle_departed(left),
            Input::Push { segments } => self.push(segments),
            Input::Publish { segments, seq } => self.handle_publish(segments, seq),
            Input::Follow { reply } => self.handle_follow(reply),
            Input::Opened { origin } => self.handle_opened(origin),
            Input::FenceEnter {
                fence,
                closes,
                pull,
                reply,
            } => self.handle_fence_enter(fence, closes, pull, reply),
            Input::FenceReached { epoch } => self.handle_fence_reached(epoch),
            Input::Post { group } => self.handle_post(group),
            Input::Wait { pull, test, reply } => self.handle_wait(pull, test, reply),
            Input::Pull { reply } => self.answer_synced(reply, true, false, 0),
            Input::Attach { size, at, reply } => self.handle_attach(size, at, reply),
            Input::Detach { base, reply } => self.handle_detach(base, reply),
            Input::Stop => self.stop(true),
            Input::Abandon => self.stop(false),
        }
    }

    fn answer(&mut self, reply: R, answer: Answer) {
        self.effects.answers.push((reply, answer));
    }

    fn done(&mut self, reply: R) {
        self.answer(reply, Ok(Outcome::Done));
    }

    /// An answer that need not wait for its events' commit (see [`Effects::early`]).
    fn answer_early(&mut self, reply: R, answer: Answer) {
        self.effects.early.push((reply, answer));
    }

    fn record(&mut self, event: Event) {
        if self.recording {
            self.effects.events.push(event);
        }
    }

    /// Segments of everything changed since the last pull; clears the record.
    fn take_changed(&mut self) -> Vec<Segment> {
        Segment::take(&mut self.changed, &self.public)
    }

    fn answer_synced(&mut self, reply: R, pull: bool, flag: bool, token: u64) {
        let pull = if pull {
            self.take_changed()
        } else {
            Vec::new()
        };
        if !pull.is_empty() {
            let ranges = pull
                .iter()
                .map(|segment| (segment.offset, segment.offset + segment.data.len() as u64))
                .collect();
            self.record(Event::Pulled { ranges });
        }
        self.answer(reply, Ok(Outcome::Synced { pull, flag, token }));
    }
}

/// `PROC_FAILED` naming the rank a call needs.
pub fn proc_failed(peer: u32, reason: &str) -> RmaError {
    RmaError::new(
        ErrorClass::ProcFailed,
        format!("rank {peer} failed: its session ended ({reason})"),
    )
}
