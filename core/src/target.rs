//! The target half of the protocol between ranks, sans I/O: what one rank's window does with
//! what origins send it (DESIGN.md "The protocol between ranks").
//!
//! Owns: *when* an operation may be applied at this target — the lock table (core's
//! [`LockTable`]: compatibility, NOCHECK, fairness, fencing tokens), one FIFO queue per origin
//! of items that may not be processed yet, fence completion, PSCW post/complete counting and
//! `test`, and ranks that are gone or absent. What an operation does is
//! [`apply`]. Must not: do I/O, read a clock (the caller passes `now`) or know how answers
//! travel (`R` is the caller's opaque reply address).
//!
//! A [`Target`] takes [`Input`]s ([`Target::handle`], [`Target::tick`]) and leaves
//! [`Effects`] for the caller to carry out ([`Target::take_effects`]): events to record,
//! answers to send — after those events are durable, or at once — and lock grants to count.
//! The server's actor carries them over tokio and the audit writer; tests drive it directly.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::audit::{Event, RecordedOp};
use crate::epoch::{AccessTag, LockRequest, LockType};
use crate::locks::{Granted, LockTable, Waiter};
use crate::ranges::RangeSet;
use crate::window::{apply, MemoryModel, TargetAccess, TargetOp, DYNAMIC_BASE};

/// Unified model: the most bytes of one segment of the copy sent when the owner starts to
/// follow it ([`Input::Follow`]), so that no message grows with the window.
pub const FOLLOW_CHUNK: usize = 16 << 20;
use crate::{ErrorClass, RmaError};

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
    Departed {
        /// The rank.
        origin: u32,
        /// The ended session's incarnation.
        incarnation: u64,
        /// Why it ended (for the revocation's audit event and the errors).
        reason: String,
        /// Whether it fenced, posted or started on this window: then fences and waits that
        /// need it fail from now on (a new incarnation cannot resume its epochs).
        active: bool,
        /// Whether no newer incarnation of the rank is attached: then the fence or wait that
        /// waits for it now fails.
        vanished: bool,
        /// The last epoch whose closing fence it entered (`crate::fence::FenceTally`): a fence
        /// closing a later one fails, as it can no longer arrive.
        fenced: Option<u64>,
    },
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

#[derive(Debug)]
struct PendingFence<R> {
    fence: u64,
    closes: u64,
    pull: bool,
    reply: R,
}

/// A session that ended, as [`Input::Departed`] gives it.
struct Departure<'a> {
    origin: u32,
    incarnation: u64,
    reason: &'a str,
    active: bool,
    vanished: bool,
    fenced: Option<u64>,
}

/// A dynamic window's memory at one rank.
#[derive(Debug)]
struct Regions {
    /// The most bytes the public copy may span.
    max_bytes: u64,
    /// Offset in the public copy → size.
    attached: BTreeMap<u64, u64>,
    /// Regions of no bytes (MPI allows them): offset → how many (one, unless attached by
    /// address where another is), kept apart from those with bytes; only a detach finds them.
    empty: BTreeMap<u64, usize>,
}

fn not_dynamic(call: &str) -> RmaError {
    RmaError::new(
        ErrorClass::RmaFlavor,
        format!("{call} is only for windows of flavor dynamic"),
    )
}

#[derive(Debug)]
struct PendingWait<R> {
    pull: bool,
    reply: R,
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

    /// A dynamic window's target: its memory is the regions attached ([`Input::Attach`]),
    /// spanning at most `max_bytes` bytes (the public copy is that span; detached bytes are not
    /// handed out again unless asked for by address); `regions` are those already attached
    /// (offset → size in the copy, as recovery finds them).
    pub fn with_dynamic(mut self, max_bytes: u64, regions: BTreeMap<u64, u64>) -> Self {
        let (empty, attached): (BTreeMap<u64, u64>, _) =
            regions.into_iter().partition(|&(_, size)| size == 0);
        self.dynamic = Some(Regions {
            max_bytes,
            attached,
            empty: empty.into_keys().map(|offset| (offset, 1)).collect(),
        });
        self
    }

    /// Dynamic window: by how many bytes attaching `size` bytes (at address `at`, else after
    /// the span) would grow the public copy; 0 when it would not, when the rank's own limit
    /// refuses it anyway, or on a static window. The caller takes that many bytes from a
    /// server-wide budget before it hands the attach over.
    pub fn attach_growth(&self, size: u64, at: Option<u64>) -> u64 {
        let Some(dynamic) = &self.dynamic else {
            return 0;
        };
        let span = self.public.len() as u64;
        let offset = match at {
            Some(at) => at.saturating_sub(DYNAMIC_BASE),
            None => span,
        };
        // a region of no bytes spans one address ([`Target::attach`])
        let end = offset.saturating_add(size.max(1));
        if end > dynamic.max_bytes {
            return 0;
        }
        end.saturating_sub(span)
    }

    /// Dynamic window: the attached regions, offset in the public copy → size.
    pub fn regions(&self) -> Option<&BTreeMap<u64, u64>> {
        self.dynamic.as_ref().map(|dynamic| &dynamic.attached)
    }

    /// Dynamic window: every attached region as its address and its bytes in the public copy,
    /// by address (what a new session of the owner starts from); empty for other flavors.
    pub fn attached_regions(&self) -> Vec<(u64, Vec<u8>)> {
        let Some(dynamic) = &self.dynamic else {
            return Vec::new();
        };
        dynamic
            .attached
            .iter()
            .map(|(&offset, &size)| {
                let bytes = usize::try_from(offset)
                    .ok()
                    .and_then(|start| Some(start..start.checked_add(usize::try_from(size).ok()?)?))
                    .and_then(|range| self.public.get(range))
                    .unwrap_or_default();
                (DYNAMIC_BASE + offset, bytes.to_vec())
            })
            .collect()
    }

    /// The public copy.
    pub fn public(&self) -> &[u8] {
        &self.public
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
            } => {
                if origin >= self.nranks {
                    if let Some(reply) = item.into_reply() {
                        let error = RmaError::new(ErrorClass::Rank, "origin outside the window");
                        self.answer(reply, Err(error));
                    }
                    return;
                }
                self.queues[origin as usize].push_back((incarnation, item));
                self.queued += 1;
                // the head of the origin's queue while it may be processed; if that changed
                // what other origins may do (a lock released or granted), them too. An item
                // processed at once never enters `nonempty`.
                let unblocked = self.drain_one(origin);
                if !self.queues[origin as usize].is_empty() {
                    self.nonempty.insert(origin);
                }
                if unblocked {
                    self.drain_all();
                }
                if self.pending_fence.is_some() {
                    // the last item of a closed epoch may have been waiting
                    self.check_fence();
                }
            }
            Input::Departed {
                origin,
                incarnation,
                reason,
                active,
                vanished,
                fenced,
            } => {
                if origin < self.nranks {
                    let left = Departure {
                        origin,
                        incarnation,
                        reason: &reason,
                        active,
                        vanished,
                        fenced,
                    };
                    self.depart(left);
                }
            }
            Input::Push { segments } => self.push(segments),
            Input::Publish { segments, seq } => {
                self.push(segments);
                self.published = self.published.max(seq);
            }
            Input::Follow { reply } => {
                if self.unified {
                    let segments =
                        self.public
                            .chunks(FOLLOW_CHUNK)
                            .enumerate()
                            .map(|(index, chunk)| Segment {
                                offset: (index * FOLLOW_CHUNK) as u64,
                                data: Bytes::copy_from_slice(chunk),
                            });
                    for segment in segments {
                        self.effects.updates.push(Update {
                            published: self.published,
                            segments: vec![segment],
                        });
                    }
                    self.done(reply);
                } else {
                    let error = RmaError::new(
                        ErrorClass::Arg,
                        "the window uses the separate memory model: its private copy follows \
                         the public copy only at synchronization calls",
                    );
                    self.answer_early(reply, Err(error));
                }
            }
            Input::Opened { origin } => {
                self.absent.remove(&origin);
            }
            Input::FenceEnter {
                fence,
                closes,
                pull,
                reply,
            } => {
                if self.pending_fence.is_some() {
                    // the owner's session takes a fence only once the last one returned; a
                    // second one now would leave the first unanswered
                    let error = RmaError::new(
                        ErrorClass::RmaSync,
                        "a fence of this rank is still waiting: a rank enters one fence at a \
                         time",
                    );
                    self.answer_early(reply, Err(error));
                    return;
                }
                self.fence_entered = fence;
                self.drain_all();
                match closes {
                    Some(closes) => {
                        self.pending_fence = Some(PendingFence {
                            fence,
                            closes,
                            pull,
                            reply,
                        });
                        self.check_fence();
                    }
                    None => {
                        self.record(Event::FenceExit { fence });
                        self.answer_synced(reply, pull, false, 0);
                    }
                }
            }
            Input::FenceReached { epoch } => {
                self.fence_reached = self.fence_reached.max(Some(epoch));
                self.check_fence();
            }
            Input::Post { group } => {
                for &origin in &group {
                    if let Some(count) = self.posts.get_mut(origin as usize) {
                        *count += 1;
                    }
                }
                self.post_group = Some(group);
                self.drain_all();
            }
            Input::Wait { pull, test, reply } => {
                self.pending_wait = Some(PendingWait { pull, reply });
                self.check_wait();
                if test {
                    if let Some(waiting) = self.pending_wait.take() {
                        self.record(Event::TestFalse);
                        let answer = Ok(Outcome::Synced {
                            pull: Vec::new(),
                            flag: false,
                            token: 0,
                        });
                        self.answer(waiting.reply, answer);
                    }
                }
            }
            Input::Pull { reply } => self.answer_synced(reply, true, false, 0),
            Input::Attach { size, at, reply } => match self.attach(size, at) {
                Ok(base) => self.answer(reply, Ok(Outcome::Attached { base })),
                Err(error) => self.answer_early(reply, Err(error)),
            },
            Input::Detach { base, reply } => match self.detach(base) {
                Ok(()) => self.done(reply),
                Err(error) => self.answer_early(reply, Err(error)),
            },
            Input::Stop => self.stop(true),
            Input::Abandon => self.stop(false),
        }
    }

    fn attach(&mut self, size: u64, at: Option<u64>) -> Result<u64, RmaError> {
        let Some(dynamic) = self.dynamic.as_mut() else {
            return Err(not_dynamic("attach"));
        };
        let offset = match at {
            Some(at) => at.checked_sub(DYNAMIC_BASE).ok_or_else(|| {
                RmaError::new(
                    ErrorClass::RmaAttach,
                    format!(
                        "address {at:#x} is below the window's first address {DYNAMIC_BASE:#x}"
                    ),
                )
            })?,
            None => self.public.len() as u64,
        };
        // a region of no bytes still spans one byte of addresses (none of them attached), so
        // its address is its own: the next region does not start there
        let end = offset
            .checked_add(size.max(1))
            .filter(|&end| end <= dynamic.max_bytes)
            .ok_or_else(|| {
                RmaError::new(
                    ErrorClass::RmaAttach,
                    format!(
                        "a region of {size} bytes at {:#x} does not fit in the {} bytes a rank \
                         may attach",
                        DYNAMIC_BASE.saturating_add(offset),
                        dynamic.max_bytes
                    ),
                )
            })?;
        if let Some((&other, &len)) = dynamic.attached.range(..end).next_back() {
            if size > 0 && other + len > offset {
                return Err(RmaError::new(
                    ErrorClass::RmaAttach,
                    format!(
                        "a region of {size} bytes at {:#x} overlaps the region of {len} bytes \
                         attached at {:#x}",
                        DYNAMIC_BASE + offset,
                        DYNAMIC_BASE + other
                    ),
                ));
            }
        }
        if size == 0 {
            *dynamic.empty.entry(offset).or_default() += 1;
        } else {
            dynamic.attached.insert(offset, size);
        }
        if (self.public.len() as u64) < end {
            self.public.resize(end as usize, 0);
        }
        let base = DYNAMIC_BASE + offset;
        self.record(Event::RegionAttached { base, size });
        Ok(base)
    }

    fn detach(&mut self, base: u64) -> Result<(), RmaError> {
        let Some(dynamic) = self.dynamic.as_mut() else {
            return Err(not_dynamic("detach"));
        };
        let size = base
            .checked_sub(DYNAMIC_BASE)
            .and_then(|offset| {
                dynamic.attached.remove(&offset).or_else(|| {
                    let count = dynamic.empty.get_mut(&offset)?;
                    *count -= 1;
                    if *count == 0 {
                        dynamic.empty.remove(&offset);
                    }
                    Some(0)
                })
            })
            .ok_or_else(|| {
                RmaError::new(
                    ErrorClass::RmaAttach,
                    format!("no region attached to the window starts at address {base:#x}"),
                )
            })?;
        self.record(Event::RegionDetached { base, size });
        Ok(())
    }

    /// Dynamic window: `MPI_ERR_RMA_RANGE` unless every run of `access` lies inside one
    /// attached region.
    fn check_attached(&self, access: &TargetAccess) -> Result<(), RmaError> {
        let Some(dynamic) = &self.dynamic else {
            return Ok(());
        };
        for run in &access.runs {
            let inside = dynamic
                .attached
                .range(..=run.offset)
                .next_back()
                .is_some_and(|(&start, &len)| run.offset + run.len <= start + len);
            if !inside {
                return Err(RmaError::new(
                    ErrorClass::RmaRange,
                    format!(
                        "{} bytes at address {:#x} are not inside one region attached at rank {}",
                        run.len,
                        DYNAMIC_BASE + run.offset,
                        self.rank
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Fails everything pending: the window was `freed`, or is abandoned here.
    fn stop(&mut self, freed: bool) {
        let why = || {
            if freed {
                RmaError::new(ErrorClass::Win, "the window was freed")
            } else {
                RmaError::new(
                    ErrorClass::Io,
                    "this node no longer serves the window (its world moved or the node lost \
                     it): attach again",
                )
            }
        };
        let mut refused = Vec::new();
        for queue in &mut self.queues {
            refused.extend(queue.drain(..).filter_map(|(_, item)| item.into_reply()));
        }
        self.queued = 0;
        self.nonempty.clear();
        refused.extend(
            self.locks
                .drain_waiters()
                .into_iter()
                .filter_map(|waiter| waiter.grant),
        );
        refused.extend(self.pending_fence.take().map(|pending| pending.reply));
        refused.extend(self.pending_wait.take().map(|pending| pending.reply));
        for reply in refused {
            self.answer(reply, Err(why()));
        }
        if freed && self.rank == 0 {
            self.record(Event::WindowFreed);
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

    fn push(&mut self, segments: Vec<Segment>) {
        for segment in segments {
            self.record(Event::Published {
                offset: segment.offset,
                data: segment.data.to_vec(),
            });
            let start = segment.offset as usize;
            // The caller validated the bounds; a segment outside the copy is dropped, not
            // allowed to panic.
            if let Some(bytes) = start
                .checked_add(segment.data.len())
                .and_then(|end| self.public.get_mut(start..end))
            {
                bytes.copy_from_slice(&segment.data);
            }
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

    fn enabled(&self, origin: u32, incarnation: u64, item: &Access<R>) -> bool {
        match item {
            Access::Op { tag, .. } => match *tag {
                AccessTag::Fence { epoch } => self.fence_entered >= epoch,
                AccessTag::Pscw { generation } => self.posts[origin as usize] >= generation,
                AccessTag::Lock => self.locks.holds(origin, incarnation),
            },
            Access::Unlock { .. } => self.locks.holds(origin, incarnation),
            Access::LockRequest { .. } | Access::Flush { .. } | Access::CompleteMarker { .. } => {
                true
            }
        }
    }

    fn drain_all(&mut self) {
        loop {
            let mut unblocked = false;
            // in origin order, as a sweep over every queue would go
            let origins: Vec<u32> = self.nonempty.iter().copied().collect();
            for origin in origins {
                unblocked |= self.drain_one(origin);
                if self.queues[origin as usize].is_empty() {
                    self.nonempty.remove(&origin);
                }
            }
            if !unblocked {
                break;
            }
        }
    }

    /// Returns whether lock state changed.
    fn drain_one(&mut self, origin: u32) -> bool {
        let mut lock_changed = false;
        loop {
            let queue = &self.queues[origin as usize];
            let Some((incarnation, head)) = queue.front() else {
                break;
            };
            let incarnation = *incarnation;
            let refusal = self.refusal(origin, incarnation, head);
            if refusal.is_none() && !self.enabled(origin, incarnation, head) {
                break;
            }
            let Some((_, item)) = self.queues[origin as usize].pop_front() else {
                break;
            };
            self.queued -= 1;
            match refusal {
                Some(error) => {
                    if let Access::Op { .. } = item {
                        if let Some(peer) = self.needed_gone_owner(origin, &item) {
                            self.record(Event::PeerFailed {
                                peer,
                                call: "op".to_string(),
                            });
                        }
                    }
                    if let Some(reply) = item.into_reply() {
                        self.answer(reply, Err(error));
                    }
                }
                None => lock_changed |= self.process(origin, incarnation, item),
            }
        }
        lock_changed
    }

    /// Why the head of `origin`'s queue must be refused rather than wait: an operation under
    /// a fencing token it no longer holds, or one that waits for this rank's own fence or post
    /// after this rank's session ended.
    fn refusal(&self, origin: u32, incarnation: u64, item: &Access<R>) -> Option<RmaError> {
        let Access::Op { tag, token, .. } = item else {
            return None;
        };
        if *tag == AccessTag::Lock && *token != 0 {
            let held = self.locks.held_token(origin, incarnation);
            if held != Some(*token) {
                return Some(RmaError::new(
                    ErrorClass::RmaSync,
                    format!(
                        "fencing token {token} of rank {origin} is not held at rank {}: the \
                         lock was revoked or released",
                        self.rank
                    ),
                ));
            }
        }
        let peer = self.needed_gone_owner(origin, item)?;
        Some(proc_failed(peer, self.missing(peer)?))
    }

    /// This rank, when `item` waits for its fence or post and its session ended.
    fn needed_gone_owner(&self, origin: u32, item: &Access<R>) -> Option<u32> {
        let Access::Op { tag, .. } = item else {
            return None;
        };
        self.missing(self.rank)?;
        let waits = match *tag {
            AccessTag::Fence { epoch } => self.fence_entered < epoch,
            AccessTag::Pscw { generation } => self.posts[origin as usize] < generation,
            AccessTag::Lock => false,
        };
        waits.then_some(self.rank)
    }

    /// A session of `origin` ended: its locks are revoked (the next waiter is granted), what it
    /// still had queued or waiting here is dropped, and when it took part in active-target
    /// synchronization the fence or wait that needs it fails.
    fn depart(&mut self, left: Departure<'_>) {
        let Departure {
            origin,
            incarnation,
            reason,
            active,
            vanished,
            mut fenced,
        } = left;
        if let Some(holder) = self.locks.release(origin, incarnation) {
            tracing::info!(origin, token = holder.token, reason, "lock revoked");
            self.record(Event::LockRevoke {
                origin,
                token: holder.token,
                reason: reason.to_string(),
            });
        }
        let ended = || {
            RmaError::new(
                ErrorClass::ProcFailed,
                format!("the session of rank {origin} ended ({reason})"),
            )
        };
        let dropped = self.locks.drop_waiters(origin, incarnation);
        for reply in dropped.into_iter().filter_map(|waiter| waiter.grant) {
            self.answer(reply, Err(ended()));
        }
        let (dropped, kept): (VecDeque<_>, VecDeque<_>) =
            std::mem::take(&mut self.queues[origin as usize])
                .into_iter()
                .partition(|(from, _)| *from == incarnation);
        self.queues[origin as usize] = kept;
        self.queued -= dropped.len();
        for (_, item) in dropped {
            if let Access::Op {
                tag: AccessTag::Fence { epoch },
                ..
            } = item
            {
                // an operation of that epoch is lost: the fence closing it cannot succeed
                if fenced >= Some(epoch) {
                    fenced = epoch.checked_sub(1);
                }
            }
            if let Some(reply) = item.into_reply() {
                self.answer(reply, Err(ended()));
            }
        }
        self.fenced_before_leaving.insert(origin, fenced);
        if active {
            self.gone.insert(origin, reason.to_string());
        } else if vanished {
            // it never synchronized actively here: a new incarnation that opens the window may
            // still do so, until then what needs it fails
            self.absent.insert(origin, reason.to_string());
        }
        self.check_fence();
        self.check_wait();
        self.grant_waiters();
        self.drain_all();
    }

    /// Why `rank` cannot take part in a fence or PSCW epoch here, if it cannot.
    fn missing(&self, rank: u32) -> Option<&String> {
        self.gone.get(&rank).or_else(|| self.absent.get(&rank))
    }

    /// Returns whether lock state changed.
    fn process(&mut self, origin: u32, incarnation: u64, item: Access<R>) -> bool {
        match item {
            Access::Op {
                op,
                access,
                reply,
                op_id,
                tag,
                ..
            } => {
                self.operate(origin, incarnation, op_id, tag, &op, &access, reply);
                false
            }
            Access::LockRequest {
                request,
                holding_elsewhere,
                grant,
            } => {
                self.record(Event::LockRequest {
                    origin,
                    lock_type: request.lock_type.name().to_string(),
                    nocheck: request.nocheck,
                });
                if request.nocheck {
                    let token = self
                        .locks
                        .grant_nocheck(origin, incarnation, request.lock_type);
                    self.record_grant(origin, request.lock_type, token);
                    self.effects
                        .lock_grants
                        .push((request.lock_type, Duration::ZERO));
                    if let Some(reply) = grant {
                        self.answer_synced(reply, true, false, token);
                    }
                } else {
                    self.locks.request(Waiter {
                        origin,
                        incarnation,
                        lock_type: request.lock_type,
                        holding_elsewhere,
                        since: self.now,
                        grant,
                    });
                    self.grant_waiters();
                }
                true
            }
            Access::Unlock { reply } => {
                if let Some(holder) = self.locks.release(origin, incarnation) {
                    tracing::debug!(origin, token = holder.token, "lock released");
                    self.record(Event::LockRelease {
                        origin,
                        token: holder.token,
                    });
                }
                self.done(reply);
                self.grant_waiters();
                true
            }
            Access::Flush { reply } => {
                self.record(Event::Flush { origin });
                self.done(reply);
                false
            }
            Access::CompleteMarker { generation, reply } => {
                let done = &mut self.completes[origin as usize];
                *done = (*done).max(generation);
                self.check_wait();
                self.effects.behind.push((reply, Ok(Outcome::Done)));
                false
            }
        }
    }

    /// Applies an enabled operation and answers it.
    #[allow(clippy::too_many_arguments)]
    fn operate(
        &mut self,
        origin: u32,
        incarnation: u64,
        op_id: u64,
        tag: AccessTag,
        op: &TargetOp<Bytes>,
        access: &TargetAccess,
        reply: R,
    ) {
        let (epoch, token) = match tag {
            AccessTag::Fence { epoch } => (epoch, 0),
            AccessTag::Pscw { generation } => (generation, 0),
            AccessTag::Lock => (0, self.locks.token_of(origin)),
        };
        let applied = self
            .check_attached(access)
            .and_then(|()| apply(&mut self.public, access, op));
        match applied {
            Ok(data) => {
                if op.kind.writes() {
                    if self.unified {
                        self.send_update(access);
                    } else {
                        for run in &access.runs {
                            self.changed.insert(run.offset, run.offset + run.len);
                        }
                    }
                }
                if self.recording {
                    self.record(Event::Op {
                        origin,
                        origin_incarnation: incarnation,
                        op_id,
                        epoch,
                        token,
                        op: RecordedOp::of(op.kind),
                        datatype: op.dtype.name().to_string(),
                        disp: op.disp,
                        runs: access
                            .runs
                            .iter()
                            .map(|run| (run.offset, run.len))
                            .collect(),
                        data: op.data.to_vec(),
                        compare: op.compare.to_vec(),
                        result: data.clone(),
                    });
                }
                if op.kind.returns_data() {
                    // a result is seen by the client before the call that completes it: it
                    // waits for the commit of what it read
                    self.answer(reply, Ok(Outcome::Data(data)));
                } else if tag == AccessTag::Lock {
                    // under a lock, MPI completes a put or accumulate at a flush or unlock,
                    // which this target answers after this event, so that answer's commit
                    // covers it. (A fence or complete is answered by the origin's own target,
                    // which cannot vouch for this one's commit: there the origin waits for this
                    // answer's.)
                    self.answer_early(reply, Ok(Outcome::Done));
                } else {
                    // fence or PSCW: the fence or the end-of-epoch marker that completes it is
                    // answered here after it (see Effects::lazy): no commit of its own
                    self.effects.lazy.push((reply, Ok(Outcome::Done)));
                }
            }
            // a refusal changed nothing: nothing to make durable
            Err(error) => self.answer_early(reply, Err(error)),
        }
    }

    /// Unified model: the bytes an operation just wrote, for the owner's private copy.
    fn send_update(&mut self, access: &TargetAccess) {
        let segments = access.runs.iter().map(|run| Segment {
            offset: run.offset,
            data: Bytes::copy_from_slice(
                &self.public[run.offset as usize..(run.offset + run.len) as usize],
            ),
        });
        match self.effects.updates.last_mut() {
            Some(last) if last.published == self.published => last.segments.extend(segments),
            _ => {
                let segments = segments.collect();
                self.effects.updates.push(Update {
                    published: self.published,
                    segments,
                });
            }
        }
    }

    fn record_grant(&mut self, origin: u32, lock_type: LockType, token: u64) {
        self.record(Event::LockGrant {
            origin,
            lock_type: lock_type.name().to_string(),
            token,
        });
    }

    /// Grants every lock request the lock table allows now.
    fn grant_waiters(&mut self) {
        for Granted { waiter, token } in self.locks.grant_ready(self.now) {
            self.record_grant(waiter.origin, waiter.lock_type, token);
            let waited = self.now.saturating_duration_since(waiter.since);
            self.effects.lock_grants.push((waiter.lock_type, waited));
            tracing::debug!(
                origin = waiter.origin,
                lock = waiter.lock_type.name(),
                token,
                "lock granted"
            );
            if let Some(reply) = waiter.grant {
                self.answer_synced(reply, true, false, token);
            }
        }
    }

    fn check_fence(&mut self) {
        let Some(pending) = &self.pending_fence else {
            return;
        };
        let closes = pending.closes;
        // a rank whose session ended before it entered this fence never will
        let missing_gone = self
            .gone
            .iter()
            .chain(&self.absent)
            .find(|(rank, _)| {
                self.fenced_before_leaving
                    .get(rank)
                    .is_none_or(|fenced| *fenced < Some(closes))
            })
            .map(|(rank, reason)| (*rank, reason.clone()));
        if let Some((peer, reason)) = missing_gone {
            if let Some(pending) = self.pending_fence.take() {
                self.record(Event::PeerFailed {
                    peer,
                    call: "fence".to_string(),
                });
                self.answer(pending.reply, Err(proc_failed(peer, &reason)));
            }
            return;
        }
        if self.fence_reached < Some(closes) || self.closed_epoch_queued(closes) {
            return;
        }
        if let Some(pending) = self.pending_fence.take() {
            self.record(Event::FenceExit {
                fence: pending.fence,
            });
            self.answer_synced(pending.reply, pending.pull, false, 0);
        }
    }

    /// Whether an operation of an epoch up to `closes` still waits in a queue (behind an item
    /// that may not be processed yet): the fence closing it waits for it.
    fn closed_epoch_queued(&self, closes: u64) -> bool {
        self.queued > 0
            && self.queues.iter().flatten().any(|(_, item)| {
                matches!(item, Access::Op { tag: AccessTag::Fence { epoch }, .. } if *epoch <= closes)
            })
    }

    fn check_wait(&mut self) {
        let (Some(group), Some(_)) = (&self.post_group, &self.pending_wait) else {
            return;
        };
        let missing_gone = group
            .iter()
            .find(|&&origin| {
                self.missing(origin).is_some()
                    && self.completes[origin as usize] < self.posts[origin as usize]
            })
            .copied();
        if let Some(peer) = missing_gone {
            self.post_group = None;
            if let Some(waiting) = self.pending_wait.take() {
                self.record(Event::PeerFailed {
                    peer,
                    call: "wait".to_string(),
                });
                let error = proc_failed(peer, self.missing(peer).map_or("", String::as_str));
                self.answer(waiting.reply, Err(error));
            }
            return;
        }
        let all_completed = group
            .iter()
            .all(|&origin| self.completes[origin as usize] >= self.posts[origin as usize]);
        if !all_completed {
            return;
        }
        self.post_group = None;
        if let Some(waiting) = self.pending_wait.take() {
            self.record(Event::WaitExit);
            self.answer_synced(waiting.reply, waiting.pull, true, 0);
        }
    }
}

/// `PROC_FAILED` naming the rank a call needs.
pub fn proc_failed(peer: u32, reason: &str) -> RmaError {
    RmaError::new(
        ErrorClass::ProcFailed,
        format!("rank {peer} failed: its session ended ({reason})"),
    )
}

/// A lock held at a target, as [`Target::inspect`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HolderView {
    /// The holding rank.
    pub origin: u32,
    /// Its session's incarnation.
    pub incarnation: u64,
    /// Shared or exclusive.
    pub lock_type: LockType,
    /// The grant's fencing token.
    pub token: u64,
    /// Granted under `MPI_MODE_NOCHECK`.
    pub nocheck: bool,
}

/// A lock request waiting at a target, as [`Target::inspect`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaiterView {
    /// The requesting rank.
    pub origin: u32,
    /// Its session's incarnation.
    pub incarnation: u64,
    /// Shared or exclusive.
    pub lock_type: LockType,
    /// How long it has waited so far.
    pub waited: Duration,
}

/// An item queued at a target that may not be processed yet, as [`Target::inspect`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedView {
    /// The origin rank.
    pub origin: u32,
    /// The origin session's incarnation.
    pub incarnation: u64,
    /// What it is: `put`, `accumulate(sum)` … for operations (with what it waits for:
    /// `under lock`, `fence epoch 3`, `pscw generation 2`), `lock request (exclusive)`,
    /// `unlock`, `flush`, `complete marker 2`.
    pub what: String,
}

/// The fence the owner is inside, as [`Target::inspect`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FenceView {
    /// The owner's fence number.
    pub fence: u64,
    /// The epoch it closes.
    pub closes: u64,
    /// Whether every rank entered the fence that closes that epoch ([`Input::FenceReached`]):
    /// then the fence waits only for operations of the epoch still queued here.
    pub every_rank_arrived: bool,
}

/// A read-only picture of one rank's target state: who holds and waits for its lock, which
/// epochs are open, what is queued. It decides nothing; the server's web view shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetView {
    /// The rank.
    pub rank: u32,
    /// Lock holders, by rank.
    pub holders: Vec<HolderView>,
    /// Lock requests waiting, in arrival order.
    pub waiters: Vec<WaiterView>,
    /// How many fences the owner entered.
    pub fence_entered: u64,
    /// The fence the owner is inside, waiting for end-of-epoch markers.
    pub fence: Option<FenceView>,
    /// The exposure group of the owner's open post, if any.
    pub exposed_to: Option<Vec<u32>>,
    /// The owner waits (MPI_Win_wait) for its exposure epoch to end.
    pub waiting_for_completes: bool,
    /// Items queued per origin, in arrival order.
    pub queued: Vec<QueuedView>,
    /// Ranks gone for good here (they took part in fence or PSCW and departed), and why.
    pub gone: Vec<(u32, String)>,
    /// Ranks absent until a new session of theirs opens the window, and why.
    pub absent: Vec<(u32, String)>,
}

impl<R> Target<R> {
    /// What this target looks like at `now`, for an operator (read-only).
    pub fn inspect(&self, now: Instant) -> TargetView {
        let holders = self
            .locks
            .holders()
            .map(|(origin, holder)| HolderView {
                origin,
                incarnation: holder.incarnation,
                lock_type: holder.lock_type,
                token: holder.token,
                nocheck: holder.nocheck,
            })
            .collect();
        let waiters = self
            .locks
            .waiters()
            .map(|waiter| WaiterView {
                origin: waiter.origin,
                incarnation: waiter.incarnation,
                lock_type: waiter.lock_type,
                waited: now.saturating_duration_since(waiter.since),
            })
            .collect();
        let fence = self.pending_fence.as_ref().map(|pending| FenceView {
            fence: pending.fence,
            closes: pending.closes,
            every_rank_arrived: self.fence_reached >= Some(pending.closes),
        });
        let queued = self
            .queues
            .iter()
            .enumerate()
            .flat_map(|(origin, queue)| {
                queue.iter().map(move |(incarnation, item)| QueuedView {
                    origin: origin as u32,
                    incarnation: *incarnation,
                    what: describe_access(item),
                })
            })
            .collect();
        TargetView {
            rank: self.rank,
            holders,
            waiters,
            fence_entered: self.fence_entered,
            fence,
            exposed_to: self.post_group.clone(),
            waiting_for_completes: self.pending_wait.is_some(),
            queued,
            gone: self
                .gone
                .iter()
                .map(|(rank, why)| (*rank, why.clone()))
                .collect(),
            absent: self
                .absent
                .iter()
                .map(|(rank, why)| (*rank, why.clone()))
                .collect(),
        }
    }
}

/// How [`TargetView::queued`] names a queued item.
fn describe_access<R>(item: &Access<R>) -> String {
    match item {
        Access::Op { op, tag, .. } => {
            let waits = match tag {
                AccessTag::Lock => "under lock".to_string(),
                AccessTag::Fence { epoch } => format!("fence epoch {epoch}"),
                AccessTag::Pscw { generation } => format!("pscw generation {generation}"),
            };
            format!("{} ({waits})", RecordedOp::of(op.kind))
        }
        Access::LockRequest { request, .. } => {
            format!("lock request ({})", request.lock_type.name())
        }
        Access::Unlock { .. } => "unlock".to_string(),
        Access::Flush { .. } => "flush".to_string(),
        Access::CompleteMarker { generation, .. } => format!("complete marker {generation}"),
    }
}
