//! The window-server actor: one tokio task per rank of each window, the only owner of that
//! rank's public copy, its lock queue, its fence and exposure state, and the queues of
//! operations that arrived before the target could be accessed.
//!
//! Owns: *when* an operation may be applied at this target (DESIGN.md "The protocol between
//! ranks"). What an operation does is core's [`apply`]. Must not: take locks, await anything but
//! its inbox, or block on another actor (replies go out through [`Reply`], never back in).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use onesided_core::audit::{Event, RecordedOp};
use onesided_core::epoch::{AccessTag, LockRequest, LockType};
use onesided_core::locks::{Granted, LockTable, Waiter};
use onesided_core::ranges::RangeSet;
use onesided_core::window::{apply, OpKind, TargetAccess, TargetOp};
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::v1::{server_message, Done, OpResult, Segment, Synced};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use crate::audit::{AuditHandle, Durability, Pending};
use crate::metrics::{Metrics, QueueReport};
use crate::reply::{Answer, Reply};

/// Capacity of an actor's inbox: senders wait when it is full (back-pressure, never loss).
const INBOX: usize = 1024;

/// A rank's public copy is snapshotted once this many bytes of publications and operations
/// (or its own size, if larger) were logged since the last snapshot.
const SNAPSHOT_BYTES: u64 = 64 * 1024;

/// Something an origin sends to a target, processed in order per origin.
#[derive(Debug)]
pub enum AccessItem {
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
        reply: Reply,
    },
    /// A lock request (lazy ones travel in front of the first operation or the unlock).
    LockRequest {
        /// Shared or exclusive, nocheck.
        request: LockRequest,
        /// The origin holds, or is deemed to hold, locks at other targets of the window (a
        /// `lock_all` epoch, or several lock epochs open): its request is never held back
        /// behind waiting exclusive requests (core's `locks`).
        holding_elsewhere: bool,
        /// For an eager lock (one's own rank): answered at the grant with the pulled bytes.
        grant: Option<Reply>,
    },
    /// Release this origin's lock.
    Unlock {
        /// Answered once released.
        reply: Reply,
    },
    /// Answered once everything this origin sent before it is applied.
    Flush {
        /// The answer.
        reply: Reply,
    },
    /// End of the origin's fence epoch `epoch`.
    FenceMarker {
        /// The closed epoch.
        epoch: u64,
    },
    /// End of the origin's access epoch of generation `generation` to this target.
    CompleteMarker {
        /// The generation.
        generation: u64,
    },
}

/// Messages to a window-server actor.
#[derive(Debug)]
pub enum Command {
    /// From an origin (any rank, including the owner).
    Access {
        /// The origin rank.
        origin: u32,
        /// The origin session's incarnation.
        incarnation: u64,
        /// What it sent.
        item: AccessItem,
    },
    /// A session of `origin` ended: revoke its locks, drop what it still had queued here and,
    /// when it took part in active-target synchronization, fail what needs it.
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
        /// Answered once handled.
        done: oneshot::Sender<()>,
    },
    /// A new session of `origin` opened the window: it may take part in epochs again (unless
    /// an earlier session of it left an active-target epoch behind).
    Opened {
        /// The rank.
        origin: u32,
    },
    /// The owner publishes private bytes (rule 5).
    Push {
        /// The bytes and where they go.
        segments: Vec<Segment>,
    },
    /// The owner entered its fence number `fence`.
    FenceEnter {
        /// The fence number.
        fence: u64,
        /// The epoch it closes (wait for everyone's marker), if any.
        closes: Option<u64>,
        /// Pull when done.
        pull: bool,
        /// Answered when the fence may return.
        reply: Reply,
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
        reply: Reply,
    },
    /// The owner pulls what changed remotely (sync).
    Pull {
        /// The answer.
        reply: Reply,
    },
    /// The window was freed: answer everything pending with `MPI_ERR_WIN` and stop.
    Stop,
    /// Is any epoch open or anything pending here?
    Busy {
        /// `Some(reason)` when busy.
        reply: oneshot::Sender<Option<String>>,
    },
}

/// A cheap, cloneable address of one rank's window-server actor.
#[derive(Clone, Debug)]
pub struct WindowServerHandle {
    sender: mpsc::Sender<Command>,
    rank: u32,
}

impl WindowServerHandle {
    /// Starts the actor of `rank` of window `window` with the public copy `public` (zeroed for
    /// a new window, rebuilt from snapshot and log after a restart).
    pub fn spawn(
        window: u64,
        rank: u32,
        nranks: u32,
        public: Vec<u8>,
        audit: AuditHandle,
        metrics: Arc<Metrics>,
        lock_fairness: Duration,
    ) -> Self {
        let (sender, inbox) = mpsc::channel(INBOX);
        let actor = WindowServer::new(window, rank, nranks, public, audit, metrics, lock_fairness);
        let span = tracing::info_span!("window_server", window, rank);
        tokio::spawn(actor.run(inbox).instrument(span));
        WindowServerHandle { sender, rank }
    }

    /// Sends a command; a stopped actor (its window was freed) is `MPI_ERR_WIN`.
    ///
    /// # Errors
    /// `MPI_ERR_WIN` when the actor has stopped.
    pub async fn send(&self, command: Command) -> Result<(), RmaError> {
        self.sender.send(command).await.map_err(|_| {
            RmaError::new(
                ErrorClass::Win,
                format!("window of rank {} was freed", self.rank),
            )
        })
    }

    /// Stops the actor (its window was freed); pending calls fail with `MPI_ERR_WIN`.
    pub fn stop(&self) {
        let _ = self.sender.try_send(Command::Stop);
    }

    /// Asks whether anything is open or pending at this rank.
    ///
    /// # Errors
    /// `MPI_ERR_WIN` when the actor has stopped.
    pub async fn busy(&self) -> Result<Option<String>, RmaError> {
        let (reply, answer) = oneshot::channel();
        self.send(Command::Busy { reply }).await?;
        answer.await.map_err(|_| {
            RmaError::new(
                ErrorClass::Win,
                format!("window of rank {} was freed", self.rank),
            )
        })
    }
}

#[derive(Debug)]
struct PendingFence {
    fence: u64,
    closes: u64,
    pull: bool,
    reply: Reply,
}

#[derive(Debug)]
struct PendingWait {
    pull: bool,
    reply: Reply,
}

struct WindowServer {
    /// Bytes of publications and operations logged since the last snapshot.
    logged: u64,
    window: u64,
    audit: AuditHandle,
    /// Events of the command being handled, and the answers that wait for them.
    events: Vec<Pending>,
    answers: Vec<(Reply, Answer)>,
    /// Answers that complete nothing a client may rely on (an operation that returns no data
    /// was applied): sent as soon as their events are handed on, never waiting for a commit;
    /// the call that completes them (flush, unlock, fence, …) waits for it.
    early: Vec<(Reply, Answer)>,
    rank: u32,
    nranks: u32,
    public: Vec<u8>,
    /// Bytes changed by operations since the owner's last pull.
    changed: RangeSet,
    fence_entered: u64,
    /// Per closed epoch: the ranks whose end-of-epoch marker arrived.
    fence_markers: BTreeMap<u64, BTreeSet<u32>>,
    pending_fence: Option<PendingFence>,
    /// Per origin: how many posts of this rank included it.
    posts: Vec<u64>,
    /// Per origin: the highest generation it completed towards this rank.
    completes: Vec<u64>,
    post_group: Option<Vec<u32>>,
    pending_wait: Option<PendingWait>,
    locks: LockTable<Option<Reply>>,
    /// Per origin, in arrival order: what it sent, with its session's incarnation.
    queues: Vec<VecDeque<(u64, AccessItem)>>,
    /// Items in `queues`, kept as they are pushed and taken (for the queue gauge).
    queued: usize,
    /// Ranks whose session ended after they took part in fence or PSCW on this window, and
    /// why: every fence, wait or operation that needs them fails with `PROC_FAILED`.
    gone: BTreeMap<u32, String>,
    /// Ranks whose session ended with no newer one attached, until a new session of theirs
    /// opens the window: what needs them fails meanwhile.
    absent: BTreeMap<u32, String>,
    /// Where lock waits and queue depths are recorded.
    metrics: Arc<Metrics>,
    /// What this actor last added to the server-wide queue gauges.
    reported: QueueReport,
}

impl WindowServer {
    fn new(
        window: u64,
        rank: u32,
        nranks: u32,
        public: Vec<u8>,
        audit: AuditHandle,
        metrics: Arc<Metrics>,
        lock_fairness: Duration,
    ) -> Self {
        WindowServer {
            logged: 0,
            window,
            audit,
            events: Vec::new(),
            answers: Vec::new(),
            early: Vec::new(),
            rank,
            nranks,
            public,
            changed: RangeSet::new(),
            fence_entered: 0,
            fence_markers: BTreeMap::new(),
            pending_fence: None,
            posts: vec![0; nranks as usize],
            completes: vec![0; nranks as usize],
            post_group: None,
            pending_wait: None,
            locks: LockTable::new(lock_fairness),
            queues: (0..nranks).map(|_| VecDeque::new()).collect(),
            queued: 0,
            gone: BTreeMap::new(),
            absent: BTreeMap::new(),
            metrics,
            reported: QueueReport::default(),
        }
    }

    async fn run(mut self, mut inbox: mpsc::Receiver<Command>) {
        tracing::debug!(size = self.public.len(), "window server started");
        loop {
            // a shared lock request held back behind a waiting exclusive one is granted when
            // its fairness wait ends, whether or not another command arrives
            let command = match self.locks.next_deadline(Instant::now()) {
                Some(deadline) => tokio::select! {
                    command = inbox.recv() => match command {
                        Some(command) => Some(command),
                        None => break,
                    },
                    () = tokio::time::sleep_until(deadline.into()) => {
                        self.grant_waiters();
                        self.drain_all();
                        None
                    }
                },
                None => match inbox.recv().await {
                    Some(command) => Some(command),
                    None => break,
                },
            };
            let stopping = matches!(command, Some(Command::Stop));
            if stopping {
                self.stop();
            } else if let Some(command) = command {
                self.handle(command);
            }
            self.report_queues();
            // answers leave after their events: in sync durability, after the commit
            let events = std::mem::take(&mut self.events);
            let answers = std::mem::take(&mut self.answers);
            let early = std::mem::take(&mut self.early);
            self.audit.submit_early(events, answers, early).await;
            if self.logged >= SNAPSHOT_BYTES.max(self.public.len() as u64) {
                // recovery replays at most about a window's worth of log after a snapshot
                self.logged = 0;
                let copy = self.public.clone();
                self.audit.snapshot(self.window, self.rank, copy).await;
            }
            if stopping {
                break;
            }
        }
        self.metrics.report_queues(&mut self.reported, 0, 0);
        tracing::debug!("window server stopped");
    }

    /// Brings the server-wide queue gauges up to date with this actor's queues.
    fn report_queues(&mut self) {
        debug_assert_eq!(
            self.queued,
            self.queues.iter().map(VecDeque::len).sum::<usize>(),
            "the count of queued items is off"
        );
        let waiters = self.locks.waiting();
        self.metrics
            .report_queues(&mut self.reported, self.queued, waiters);
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Access {
                origin,
                incarnation,
                item,
            } => {
                if origin >= self.nranks {
                    if let Some(reply) = reply_of(item) {
                        let error = RmaError::new(ErrorClass::Rank, "origin outside the window");
                        self.answer(reply, Err(error));
                    }
                    return;
                }
                self.queues[origin as usize].push_back((incarnation, item));
                self.queued += 1;
                self.drain(origin);
            }
            Command::Departed {
                origin,
                incarnation,
                reason,
                active,
                vanished,
                done,
            } => {
                if origin < self.nranks {
                    self.depart(origin, incarnation, &reason, active, vanished);
                }
                let _ = done.send(());
            }
            Command::Push { segments } => self.push(segments),
            Command::Opened { origin } => {
                self.absent.remove(&origin);
            }
            Command::FenceEnter {
                fence,
                closes,
                pull,
                reply,
            } => {
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
            Command::Post { group } => {
                for &origin in &group {
                    if let Some(count) = self.posts.get_mut(origin as usize) {
                        *count += 1;
                    }
                }
                self.post_group = Some(group);
                self.drain_all();
            }
            Command::Wait { pull, test, reply } => {
                self.pending_wait = Some(PendingWait { pull, reply });
                self.check_wait();
                if test {
                    if let Some(waiting) = self.pending_wait.take() {
                        self.record(Event::TestFalse);
                        let answer = Ok(server_message::Reply::Synced(Synced {
                            pull: Vec::new(),
                            flag: false,
                            token: 0,
                        }));
                        self.answer(waiting.reply, answer);
                    }
                }
            }
            Command::Pull { reply } => self.answer_synced(reply, true, false, 0),
            Command::Busy { reply } => {
                let _ = reply.send(self.busy());
            }
            Command::Stop => self.stop(),
        }
    }

    fn stop(&mut self) {
        let freed = || RmaError::new(ErrorClass::Win, "the window was freed");
        let mut refused = Vec::new();
        for queue in &mut self.queues {
            refused.extend(queue.drain(..).filter_map(|(_, item)| reply_of(item)));
        }
        self.queued = 0;
        refused.extend(
            self.locks
                .drain_waiters()
                .into_iter()
                .filter_map(|waiter| waiter.grant),
        );
        refused.extend(self.pending_fence.take().map(|pending| pending.reply));
        refused.extend(self.pending_wait.take().map(|pending| pending.reply));
        for reply in refused {
            self.answer(reply, Err(freed()));
        }
        if self.rank == 0 {
            self.record(Event::WindowFreed);
        }
    }

    fn answer(&mut self, reply: Reply, answer: Answer) {
        self.answers.push((reply, answer));
    }

    fn done(&mut self, reply: Reply) {
        self.answer(reply, Ok(server_message::Reply::Done(Done {})));
    }

    /// An answer that need not wait for its events' commit (see `early`).
    fn answer_early(&mut self, reply: Reply, answer: Answer) {
        self.early.push((reply, answer));
    }

    fn record(&mut self, event: Event) {
        if self.audit.durability() == Durability::Off {
            return;
        }
        self.logged += match &event {
            Event::Published { data, .. } => 64 + data.len() as u64,
            Event::Op { data, .. } => 64 + data.len() as u64,
            _ => 0,
        };
        self.events.push(Pending {
            window: self.window,
            rank: self.rank,
            incarnation: 0,
            at_ns: self.audit.now(),
            event,
        });
    }

    fn busy(&self) -> Option<String> {
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
        if self.queues.iter().any(|queue| !queue.is_empty()) {
            return Some(format!("operations are pending at rank {}", self.rank));
        }
        None
    }

    fn push(&mut self, segments: Vec<Segment>) {
        for segment in segments {
            self.record(Event::Published {
                offset: segment.offset,
                data: segment.data.to_vec(),
            });
            let start = segment.offset as usize;
            // The session validated the bounds; a segment outside the copy is dropped, not
            // allowed to panic the actor.
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
        let segments = self
            .changed
            .iter()
            .map(|(start, end)| Segment {
                offset: start,
                data: Bytes::copy_from_slice(&self.public[start as usize..end as usize]),
            })
            .collect();
        self.changed.clear();
        segments
    }

    fn answer_synced(&mut self, reply: Reply, pull: bool, flag: bool, token: u64) {
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
        let answer = Ok(server_message::Reply::Synced(Synced { pull, flag, token }));
        self.answer(reply, answer);
    }

    fn enabled(&self, origin: u32, incarnation: u64, item: &AccessItem) -> bool {
        match item {
            AccessItem::Op { tag, .. } => match *tag {
                AccessTag::Fence { epoch } => self.fence_entered >= epoch,
                AccessTag::Pscw { generation } => self.posts[origin as usize] >= generation,
                AccessTag::Lock => self.locks.holds(origin, incarnation),
            },
            AccessItem::Unlock { .. } => self.locks.holds(origin, incarnation),
            AccessItem::LockRequest { .. }
            | AccessItem::Flush { .. }
            | AccessItem::FenceMarker { .. }
            | AccessItem::CompleteMarker { .. } => true,
        }
    }

    /// Processes the head of `origin`'s queue while it may be processed; if that changed what
    /// other origins may do (a lock released or granted), drains them too.
    fn drain(&mut self, origin: u32) {
        if self.drain_one(origin) {
            self.drain_all();
        }
    }

    fn drain_all(&mut self) {
        loop {
            let mut unblocked = false;
            for origin in 0..self.nranks {
                unblocked |= self.drain_one(origin);
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
                    if let AccessItem::Op { .. } = item {
                        if let Some(peer) = self.needed_gone_owner(origin, &item) {
                            self.record(Event::PeerFailed {
                                peer,
                                call: "op".to_string(),
                            });
                        }
                    }
                    if let Some(reply) = reply_of(item) {
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
    fn refusal(&self, origin: u32, incarnation: u64, item: &AccessItem) -> Option<RmaError> {
        let AccessItem::Op { tag, token, .. } = item else {
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
    fn needed_gone_owner(&self, origin: u32, item: &AccessItem) -> Option<u32> {
        let AccessItem::Op { tag, .. } = item else {
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
    fn depart(
        &mut self,
        origin: u32,
        incarnation: u64,
        reason: &str,
        active: bool,
        vanished: bool,
    ) {
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
        for reply in dropped.into_iter().filter_map(|(_, item)| reply_of(item)) {
            self.answer(reply, Err(ended()));
        }
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
    fn process(&mut self, origin: u32, incarnation: u64, item: AccessItem) -> bool {
        match item {
            AccessItem::Op {
                op,
                access,
                reply,
                op_id,
                tag,
                ..
            } => {
                let (epoch, token) = match tag {
                    AccessTag::Fence { epoch } => (epoch, 0),
                    AccessTag::Pscw { generation } => (generation, 0),
                    AccessTag::Lock => (0, self.locks.token_of(origin)),
                };
                match apply(&mut self.public, &access, &op) {
                    Ok(data) => {
                        if op.kind.writes() {
                            for run in &access.runs {
                                self.changed.insert(run.offset, run.offset + run.len);
                            }
                        }
                        self.record(Event::Op {
                            origin,
                            origin_incarnation: incarnation,
                            op_id,
                            epoch,
                            token,
                            op: recorded(op.kind),
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
                        if op.kind.returns_data() {
                            // a result is seen by the client before the call that completes
                            // it: it waits for the commit of what it read
                            let answer = Ok(server_message::Reply::Result(OpResult {
                                data: Bytes::from(data),
                            }));
                            self.answer(reply, answer);
                        } else if tag == AccessTag::Lock {
                            // under a lock, MPI completes a put or accumulate at a flush or
                            // unlock, which this actor answers after this event, so that
                            // answer's commit covers it. (A fence or complete is answered by
                            // the origin's own actor, which cannot vouch for this one's
                            // commit: there the origin waits for this answer's.)
                            self.answer_early(reply, Ok(server_message::Reply::Done(Done {})));
                        } else {
                            self.done(reply);
                        }
                    }
                    // a refusal changed nothing: nothing to make durable
                    Err(error) => self.answer_early(reply, Err(error)),
                }
                false
            }
            AccessItem::LockRequest {
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
                    self.metrics.lock_granted(request.lock_type, Duration::ZERO);
                    if let Some(reply) = grant {
                        self.answer_synced(reply, true, false, token);
                    }
                } else {
                    self.locks.request(Waiter {
                        origin,
                        incarnation,
                        lock_type: request.lock_type,
                        holding_elsewhere,
                        since: Instant::now(),
                        grant,
                    });
                    self.grant_waiters();
                }
                true
            }
            AccessItem::Unlock { reply } => {
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
            AccessItem::Flush { reply } => {
                self.record(Event::Flush { origin });
                self.done(reply);
                false
            }
            AccessItem::FenceMarker { epoch } => {
                self.fence_markers.entry(epoch).or_default().insert(origin);
                self.check_fence();
                false
            }
            AccessItem::CompleteMarker { generation } => {
                let done = &mut self.completes[origin as usize];
                *done = (*done).max(generation);
                self.check_wait();
                false
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
        for Granted { waiter, token } in self.locks.grant_ready(Instant::now()) {
            self.record_grant(waiter.origin, waiter.lock_type, token);
            self.metrics
                .lock_granted(waiter.lock_type, waiter.since.elapsed());
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
        let arrived = self.fence_markers.get(&pending.closes);
        let count = arrived.map_or(0, BTreeSet::len);
        let missing_gone = self
            .gone
            .iter()
            .chain(&self.absent)
            .find(|(rank, _)| !arrived.is_some_and(|ranks| ranks.contains(rank)))
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
        if count < self.nranks as usize {
            return;
        }
        if let Some(pending) = self.pending_fence.take() {
            self.fence_markers.remove(&pending.closes);
            self.record(Event::FenceExit {
                fence: pending.fence,
            });
            self.answer_synced(pending.reply, pending.pull, false, 0);
        }
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

fn reply_of(item: AccessItem) -> Option<Reply> {
    match item {
        AccessItem::Op { reply, .. }
        | AccessItem::Unlock { reply }
        | AccessItem::Flush { reply } => Some(reply),
        AccessItem::LockRequest { grant, .. } => grant,
        AccessItem::FenceMarker { .. } | AccessItem::CompleteMarker { .. } => None,
    }
}

/// The audit log's name of an operation kind.
pub fn recorded(kind: OpKind) -> RecordedOp {
    match kind {
        OpKind::Put => RecordedOp::Put,
        OpKind::Get => RecordedOp::Get,
        OpKind::Accumulate(op) => RecordedOp::Accumulate(op.name().to_string()),
        OpKind::GetAccumulate(op) => RecordedOp::GetAccumulate(op.name().to_string()),
        OpKind::FetchAndOp(op) => RecordedOp::FetchAndOp(op.name().to_string()),
        OpKind::CompareAndSwap => RecordedOp::CompareAndSwap,
    }
}
