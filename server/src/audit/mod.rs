//! The audit writer: actors and sessions hand it events over a bounded channel; it assigns the
//! gap-free sequence numbers and the hash chain per window, and commits in batches (group
//! commit). In `sync` durability the answers of the calls that produced the events travel with
//! them and are sent only after the commit; in `async` they are sent at once and the bounded
//! channel pushes back when the writer falls behind; `off` records nothing.
//!
//! Owns: the order of the log. Must not: decide what an event means (core does).

pub mod service;
pub mod store;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use onesided_core::audit::{chain_hash, AuditRecord, Body, Event, GENESIS};
use onesided_core::{ErrorClass, RmaError};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::metrics::Metrics;
use crate::reply::{Answer, Reply};
pub use onesided_core::audit::RecordedWindow;
pub use store::{
    AuditStore, Committer, Fenced, Guard, NewRow, Rows, Snapshot, StoredWindow, StoredWorld,
};

/// Who may commit what. In a cluster (`crate::cluster`) a window's rows commit only while this
/// node holds its world's lease, at the epoch it holds it with: every commit checks that in
/// its own transaction, and rows of a world lost meanwhile are dropped (their calls' answers
/// fail; nothing of them is acknowledged).
pub trait Fencing: Send + Sync + std::fmt::Debug {
    /// This node's id.
    fn node(&self) -> &str;
    /// The world and lease epoch rows of `window` commit under; `None` when this node does not
    /// hold the window's world.
    fn lease(&self, window: u64) -> Option<(String, i64)>;
    /// A commit found `world`'s lease held by another node (or at another epoch).
    fn lost(&self, world: &str);
}

/// How much the answer to a call waits for its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    /// Nothing is recorded.
    Off,
    /// Answered at once, recorded in the background: a crash loses the events not committed
    /// yet, at most [`DEFAULT_MAX_UNRECORDED`] (or as configured); calls wait when that many
    /// are outstanding.
    Async,
    /// A call is answered only after its events are committed.
    Sync,
}

/// Capacity of the writer's inbox.
const INBOX: usize = 4096;

/// Most messages folded into one commit.
const BATCH: usize = 1024;

/// In `sync` durability, how long a batch that no answer waits for may wait for one that does
/// before it is committed: events nobody waits for ride along with the next commit someone
/// waits for (one sync of the disk for a whole lock-put-unlock), instead of a commit of their
/// own that the waiting one would queue behind.
const DEFER: Duration = Duration::from_millis(10);

/// In `async` durability, the most events of answered calls that may be uncommitted at once
/// unless configured otherwise: what a crash can lose.
pub const DEFAULT_MAX_UNRECORDED: usize = 4096;

/// The most window data (operation payloads, published bytes) that events handed to the writer
/// and not committed yet may carry, in `sync` and `async`: a client streaming a large put waits
/// for the disk instead of piling copies of its bytes up in the server's memory.
pub const MAX_UNCOMMITTED_BYTES: usize = 64 << 20;

/// Window data a batch may carry before it is committed without waiting for more (or, in
/// `sync`, for an awaited answer): an eighth of [`MAX_UNCOMMITTED_BYTES`], so that while one
/// batch's bytes go to the disk, a client streaming a large put fills the next seven eighths
/// of the budget. With half, a 64 MiB put was two commits, and the disk's time overlapped the
/// network's less: a `sync` bulk put gained 1.02–1.22× going to an eighth, none more going to a
/// sixteenth (BENCHMARKS.md, "Large events written once").
const BATCH_BYTES: usize = MAX_UNCOMMITTED_BYTES / 8;

/// An event as an actor or session reports it.
#[derive(Clone, Debug)]
pub struct Pending {
    /// Window id.
    pub window: u64,
    /// Where it happened.
    pub rank: u32,
    /// Session incarnation (0 for target-side events).
    pub incarnation: u64,
    /// Monotonic nanoseconds since start.
    pub at_ns: u64,
    /// What happened.
    pub event: Event,
}

enum Message {
    Record {
        events: Vec<Pending>,
        answers: Vec<(Reply, Answer)>,
        /// Whether one of `answers` should start a commit (`false`: they are all lazy, see
        /// [`AuditHandle::submit_effects`], and ride along with a later commit).
        urgent: bool,
        /// Permits of the unrecorded-events budget (async) to return after the commit.
        permits: u32,
        /// Permits of the uncommitted-bytes budget to return after the commit.
        bytes: u32,
    },
    /// A rank's public copy after every event its actor submitted before.
    Snapshot {
        window: u64,
        rank: u32,
        data: Vec<u8>,
    },
    Flush(oneshot::Sender<()>),
    /// Drops what is queued of these windows and forgets their tails: their world was taken
    /// up (again) by this node, and the store, not this writer's memory, says where each chain
    /// ends.
    Forget {
        windows: Vec<u64>,
        done: oneshot::Sender<()>,
    },
}

impl Message {
    /// Permits of the uncommitted-bytes budget it holds.
    fn bytes(&self) -> usize {
        match self {
            Message::Record { bytes, .. } => *bytes as usize,
            _ => 0,
        }
    }

    /// Whether someone waits for this message's commit (answers, a flush).
    fn awaited(&self) -> bool {
        match self {
            Message::Record { urgent, .. } => *urgent,
            Message::Flush(_) | Message::Forget { .. } => true,
            Message::Snapshot { .. } => false,
        }
    }
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Message::Record {
                events,
                answers,
                urgent,
                permits,
                bytes,
            } => f
                .debug_struct("Record")
                .field("events", &events.len())
                .field("answers", &answers.len())
                .field("urgent", urgent)
                .field("permits", permits)
                .field("bytes", bytes)
                .finish(),
            Message::Snapshot { window, rank, data } => f
                .debug_struct("Snapshot")
                .field("window", window)
                .field("rank", rank)
                .field("bytes", &data.len())
                .finish(),
            Message::Flush(_) => f.write_str("Flush"),
            Message::Forget { windows, .. } => {
                f.debug_struct("Forget").field("windows", windows).finish()
            }
        }
    }
}

/// A committed row, as live watchers see it.
pub type Committed = std::sync::Arc<store::NewRow>;

/// The address of the audit writer (cheap to clone).
#[derive(Clone, Debug)]
pub struct AuditHandle {
    sender: Option<mpsc::Sender<Message>>,
    durability: Durability,
    started: Instant,
    /// The log's clock at `started` (it continues after a restart's stored timestamps).
    base_ns: u64,
    committed: broadcast::Sender<Committed>,
    /// Set while the store refuses commits.
    down: Arc<AtomicBool>,
    /// `async`: the budget of answered-but-uncommitted events (see [`Unrecorded`]).
    unrecorded: Option<Unrecorded>,
    /// The budget of window bytes in events not committed yet ([`MAX_UNCOMMITTED_BYTES`]).
    uncommitted: Arc<tokio::sync::Semaphore>,
    /// In a cluster, what guards every commit.
    fencing: Arc<OnceLock<Arc<dyn Fencing>>>,
}

/// The budget of events whose calls were answered before their commit (`async`): a submission
/// takes a permit per event (all of them for one larger than the budget) and the writer gives
/// them back after the commit, so a crash loses at most `max` acknowledged events.
#[derive(Clone, Debug)]
struct Unrecorded {
    permits: Arc<tokio::sync::Semaphore>,
    max: usize,
}

impl Unrecorded {
    fn new(max: usize) -> Self {
        let max = max.clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        Unrecorded {
            permits: Arc::new(tokio::sync::Semaphore::new(max)),
            max,
        }
    }

    /// Events taken and not given back.
    fn outstanding(&self) -> usize {
        self.max - self.permits.available_permits()
    }
}

impl AuditHandle {
    /// A handle that records nothing (durability off).
    pub fn off() -> Self {
        AuditHandle {
            sender: None,
            durability: Durability::Off,
            started: Instant::now(),
            base_ns: 0,
            committed: broadcast::channel(1).0,
            down: Arc::new(AtomicBool::new(false)),
            unrecorded: None,
            uncommitted: Arc::new(tokio::sync::Semaphore::new(MAX_UNCOMMITTED_BYTES)),
            fencing: Arc::new(OnceLock::new()),
        }
    }

    /// Starts the writer over `store`; the log's clock starts after `last_at_ns` (the latest
    /// stored timestamp). Commits are recorded in `metrics`.
    pub fn spawn(
        store: AuditStore,
        durability: Durability,
        last_at_ns: u64,
        metrics: Arc<Metrics>,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        Self::spawn_bounded(
            store,
            durability,
            last_at_ns,
            metrics,
            DEFAULT_MAX_UNRECORDED,
        )
    }

    /// [`AuditHandle::spawn`]; in `async` durability at most `max_unrecorded` events of
    /// answered calls are uncommitted at once (calls wait for room).
    pub fn spawn_bounded(
        store: AuditStore,
        durability: Durability,
        last_at_ns: u64,
        metrics: Arc<Metrics>,
        max_unrecorded: usize,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        if durability == Durability::Off {
            return (Self::off(), tokio::spawn(async {}));
        }
        let unrecorded = (durability == Durability::Async).then(|| Unrecorded::new(max_unrecorded));
        let (sender, inbox) = mpsc::channel(INBOX);
        let (committed, _) = broadcast::channel(65536);
        let down = Arc::new(AtomicBool::new(false));
        let uncommitted = Arc::new(tokio::sync::Semaphore::new(MAX_UNCOMMITTED_BYTES));
        let started = Instant::now();
        let base_ns = last_at_ns.saturating_add(1);
        let fencing = Arc::new(OnceLock::new());
        let writer = Writer {
            fencing: Arc::clone(&fencing),
            committer: Committer::new(store.clone()),
            store,
            tails: HashMap::new(),
            committed: committed.clone(),
            down: Arc::clone(&down),
            last_at: HashMap::new(),
            metrics,
            clock: (started, base_ns),
            unrecorded: unrecorded.clone(),
            uncommitted: Arc::clone(&uncommitted),
            defer: durability == Durability::Sync,
        };
        let task = tokio::spawn(writer.run(inbox));
        (
            AuditHandle {
                sender: Some(sender),
                durability,
                started,
                base_ns,
                committed,
                down,
                unrecorded,
                uncommitted,
                fencing,
            },
            task,
        )
    }

    /// Guards every commit from now on with `fencing` (set once, when the node joins a
    /// cluster, before any window exists).
    pub fn set_fencing(&self, fencing: Arc<dyn Fencing>) {
        let _ = self.fencing.set(fencing);
    }

    /// Drops whatever is queued of `windows` and has their chains' ends read from the store
    /// again; returns once the writer has done so.
    pub async fn forget(&self, windows: Vec<u64>) {
        let Some(sender) = &self.sender else {
            return;
        };
        let (done, forgotten) = oneshot::channel();
        if sender.send(Message::Forget { windows, done }).await.is_ok() {
            let _ = forgotten.await;
        }
    }

    /// Whether the store currently refuses commits (calls are then refused with
    /// `UNAVAILABLE` before they change anything).
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// Hands a snapshot of `rank`'s public copy to the writer, behind the events that rank's
    /// actor submitted before.
    pub async fn snapshot(&self, window: u64, rank: u32, data: Vec<u8>) {
        if let Some(sender) = &self.sender {
            let _ = sender.send(Message::Snapshot { window, rank, data }).await;
        }
    }

    /// The durability in force.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Nanoseconds since the server started (the log's clock).
    pub fn now(&self) -> u64 {
        self.base_ns + self.started.elapsed().as_nanos() as u64
    }

    /// Live committed rows.
    pub fn subscribe(&self) -> broadcast::Receiver<Committed> {
        self.committed.subscribe()
    }

    /// Records `events` and sends `answers` — after the commit in `sync` durability, at once
    /// otherwise. Waits when the writer is behind (back-pressure).
    pub async fn submit(&self, events: Vec<Pending>, answers: Vec<(Reply, Answer)>) {
        self.submit_effects(events, answers, Vec::new(), Vec::new())
            .await;
    }

    /// [`AuditHandle::submit`], with two more kinds of answers. In `sync`, `answers` given
    /// with no events still wait for the commit of everything submitted before them
    /// ([`onesided_core::target::Effects::behind`]). `lazy`: sent after the commit
    /// like `answers`, but no commit starts for them alone — in `sync` they wait (up to
    /// `DEFER`, 10 ms) for a commit someone else waits for
    /// ([`onesided_core::target::Effects::lazy`]: the fence or end-of-epoch marker that
    /// completes them is answered after them, and its commit carries them). `early`: sent as soon as the events are
    /// handed to the writer, whatever the durability — answers that complete nothing a client
    /// may rely on (the call that completes them waits for a later commit, which includes
    /// these events).
    pub async fn submit_effects(
        &self,
        events: Vec<Pending>,
        answers: Vec<(Reply, Answer)>,
        lazy: Vec<(Reply, Answer)>,
        early: Vec<(Reply, Answer)>,
    ) {
        self.submit_answers(events, answers, lazy).await;
        send_all(early);
    }

    async fn submit_answers(
        &self,
        events: Vec<Pending>,
        mut answers: Vec<(Reply, Answer)>,
        lazy: Vec<(Reply, Answer)>,
    ) {
        let urgent = !answers.is_empty();
        answers.extend(lazy);
        let Some(sender) = &self.sender else {
            send_all(answers);
            return;
        };
        if events.is_empty() && !(urgent && self.durability == Durability::Sync) {
            send_all(answers);
            return;
        }
        // (with no events, urgent answers in `sync` still go through the writer: they vouch for
        // events submitted before them — Effects::behind — and leave after their commit)
        let (events, answers, late) = match self.durability {
            Durability::Sync => (events, answers, Vec::new()),
            _ => (events, Vec::new(), answers),
        };
        let mut permits = 0;
        if let Some(unrecorded) = &self.unrecorded {
            // wait for room before answering: what a crash may lose stays bounded
            let wanted = u32::try_from(events.len().min(unrecorded.max)).unwrap_or(u32::MAX);
            if let Ok(taken) = unrecorded.permits.acquire_many(wanted).await {
                taken.forget();
                permits = wanted;
            }
        }
        // and for room for the bytes the events carry: a large put waits for the disk here
        // rather than being copied into the writer's queue faster than it commits
        let weight: usize = events
            .iter()
            .map(|pending| pending.event.payload_len())
            .sum();
        let mut bytes = 0;
        if weight > 0 {
            let wanted = u32::try_from(weight.min(MAX_UNCOMMITTED_BYTES)).unwrap_or(u32::MAX);
            if let Ok(taken) = self.uncommitted.acquire_many(wanted).await {
                taken.forget();
                bytes = wanted;
            }
        }
        let record = Message::Record {
            events,
            answers,
            urgent,
            permits,
            bytes,
        };
        if let Err(mpsc::error::SendError(Message::Record { answers, .. })) =
            sender.send(record).await
        {
            fail_all(answers, "the audit writer stopped");
        }
        send_all(late);
    }

    /// Waits until everything submitted so far is committed.
    pub async fn flush(&self) {
        let Some(sender) = &self.sender else {
            return;
        };
        let (done, committed) = oneshot::channel();
        if sender.send(Message::Flush(done)).await.is_ok() {
            let _ = committed.await;
        }
    }
}

fn send_all(answers: Vec<(Reply, Answer)>) {
    for (reply, answer) in answers {
        reply.send(answer);
    }
}

fn fail_all(answers: Vec<(Reply, Answer)>, why: &str) {
    for (reply, _) in answers {
        reply.send(Err(RmaError::new(ErrorClass::Io, why)));
    }
}

/// The first wait before a failed commit is tried again; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// While the store is known to be down and the writer has nothing to commit, how often it asks
/// the store whether it answers again: sessions refuse every call while it is down, so no
/// commit would ever come to find out.
const PROBE_EVERY: Duration = Duration::from_millis(250);

struct Writer {
    store: AuditStore,
    /// The writer's own connection for its commits.
    committer: Committer,
    tails: HashMap<u64, (u64, [u8; 32])>,
    committed: broadcast::Sender<Committed>,
    down: Arc<AtomicBool>,
    /// Per window, the latest timestamp written: events from different actors reach the
    /// writer slightly out of clock order, and a window's timestamps must not go back.
    last_at: HashMap<u64, u64>,
    metrics: Arc<Metrics>,
    /// The handle's clock (`started`, `base_ns`), to measure each event's lag.
    clock: (Instant, u64),
    /// `async`: the budget whose permits go back after each commit.
    unrecorded: Option<Unrecorded>,
    /// The uncommitted-bytes budget, whose permits go back after each commit.
    uncommitted: Arc<tokio::sync::Semaphore>,
    /// `sync`: a batch no answer waits for waits up to [`DEFER`] for one that does.
    defer: bool,
    /// In a cluster, what guards every commit.
    fencing: Arc<OnceLock<Arc<dyn Fencing>>>,
}

/// Whether a batch may take more before its commit: fewer than [`BATCH`] messages carrying less
/// than [`BATCH_BYTES`] (a batch holding that much goes at once).
fn has_room(batch: &[Message]) -> bool {
    batch.len() < BATCH && batch.iter().map(Message::bytes).sum::<usize>() < BATCH_BYTES
}

/// Moves what `inbox` holds now into `batch`, while the batch has room ([`has_room`]).
fn take_ready(inbox: &mut mpsc::Receiver<Message>, batch: &mut Vec<Message>) {
    let mut bytes: usize = batch.iter().map(Message::bytes).sum();
    while batch.len() < BATCH && bytes < BATCH_BYTES {
        match inbox.try_recv() {
            Ok(message) => {
                bytes += message.bytes();
                batch.push(message);
            }
            Err(_) => break,
        }
    }
}

/// Drops the events and snapshots of the windows `gone` names, keeping each remaining
/// snapshot's place among the remaining events. Returns whether anything was dropped.
fn drop_windows(
    events: &mut Vec<Pending>,
    snapshots: &mut Vec<Taken>,
    gone: impl Fn(u64) -> bool,
) -> bool {
    if !events.iter().any(|pending| gone(pending.window))
        && !snapshots.iter().any(|(_, window, ..)| gone(*window))
    {
        return false;
    }
    // kept[i]: how many of the first i events stay
    let mut kept = Vec::with_capacity(events.len() + 1);
    kept.push(0usize);
    for pending in events.iter() {
        let last = *kept.last().unwrap_or(&0);
        kept.push(last + usize::from(!gone(pending.window)));
    }
    let all = events.len();
    events.retain(|pending| !gone(pending.window));
    snapshots.retain(|(_, window, ..)| !gone(*window));
    for snapshot in snapshots.iter_mut() {
        snapshot.0 = kept[snapshot.0.min(all)];
    }
    true
}

impl Writer {
    async fn run(mut self, mut inbox: mpsc::Receiver<Message>) {
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            let received = if self.down.load(Ordering::Relaxed) {
                tokio::select! {
                    received = inbox.recv_many(&mut batch, BATCH) => received,
                    () = tokio::time::sleep(PROBE_EVERY) => {
                        self.probe().await;
                        continue;
                    }
                }
            } else {
                inbox.recv_many(&mut batch, BATCH).await
            };
            if received == 0 {
                break;
            }
            if self.defer && has_room(&batch) && !batch.iter().any(Message::awaited) {
                // The message an answer waits for is usually a moment behind the first events:
                // the task that hands it over (an actor finishing the calls whose first events
                // woke this one) is already runnable. One turn of the runtime lets it, and arms
                // no timer: arming one wrote to the runtime's eventfd and cost its driver another
                // pass on every `sync` epoch (BENCHMARKS.md, "The floor under a `sync` answer").
                tokio::task::yield_now().await;
                take_ready(&mut inbox, &mut batch);
                if has_room(&batch) && !batch.iter().any(Message::awaited) {
                    let deadline = tokio::time::sleep(DEFER);
                    tokio::pin!(deadline);
                    // a batch holding BATCH_BYTES goes at once
                    while has_room(&batch) && !batch.iter().any(Message::awaited) {
                        let room = BATCH - batch.len();
                        tokio::select! {
                            received = inbox.recv_many(&mut batch, room) => {
                                if received == 0 {
                                    break;
                                }
                            }
                            () = &mut deadline => break,
                        }
                    }
                }
            }
            // what the tasks woken together with this batch's submitters hand over next (the
            // put a PSCW post releases, the wait it ends) joins this commit instead of queueing
            // behind it for another sync of the disk — within the same bounds as above, so a
            // batch never carries much more than BATCH_BYTES into the commit's copies
            if has_room(&batch) {
                tokio::task::yield_now().await;
                take_ready(&mut inbox, &mut batch);
            }
            self.metrics.audit_inbox(inbox.len());
            if let Some(unrecorded) = &self.unrecorded {
                self.metrics.audit_unrecorded(unrecorded.outstanding());
            }
            self.commit_from(std::mem::take(&mut batch), Some(&mut inbox))
                .await;
            // what piled up while the commit ran
            self.metrics.audit_inbox(inbox.len());
        }
        tracing::info!("audit writer stopped");
    }

    /// The store is down and nothing waits to be committed: when it answers again, it is up
    /// (a commit that still fails marks it down again). Without this, a retried batch that
    /// ended empty (its lost worlds' events dropped) left the store marked down for good.
    async fn probe(&mut self) {
        match self.store.ping().await {
            Ok(()) => {
                // the tails are read again from the store (another node may have written)
                self.tails.clear();
                if self.down.swap(false, Ordering::Relaxed) {
                    tracing::info!("the audit store answers again: calls are taken again");
                }
            }
            Err(error) => {
                tracing::debug!(error = %format!("{error:#}"), "the audit store is still down");
            }
        }
    }

    async fn tail(&mut self, window: u64) -> anyhow::Result<(u64, [u8; 32])> {
        if let Some(tail) = self.tails.get(&window) {
            return Ok(*tail);
        }
        let (seq, hash, at_ns) = self.store.tail_at(window).await?.unwrap_or((0, GENESIS, 0));
        // another node may have written the window last, by a clock ahead of this one's
        let last_at = self.last_at.entry(window).or_insert(0);
        *last_at = (*last_at).max(at_ns);
        self.tails.insert(window, (seq, hash));
        Ok((seq, hash))
    }

    /// Commits a batch. When the store fails, the answers waiting for it fail with
    /// `MPI_ERR_IO` (UNAVAILABLE: not acknowledged), but the events are kept and retried until
    /// the store takes them: their effects happened, so the log must not lose them.
    #[cfg(test)]
    async fn commit(&mut self, messages: Vec<Message>) {
        self.commit_from(messages, None).await;
    }

    /// Commits `messages`; while the store refuses them, what arrives meanwhile on `inbox`
    /// joins the batch and its answers fail at once (an outage must not hang calls that were
    /// already under way when it began).
    async fn commit_from(
        &mut self,
        messages: Vec<Message>,
        mut inbox: Option<&mut mpsc::Receiver<Message>>,
    ) {
        let mut batch = Batch {
            waiting: Some(Vec::new()),
            ..Batch::default()
        };
        // a Forget that dropped events of calls still waiting: their answers fail
        let mut dropped = false;
        for message in messages {
            dropped |= self.absorb(&mut batch, message, false);
        }
        if dropped {
            batch.fail_waiting(NOT_SERVED);
        }
        let mut delay = RETRY_FIRST;
        // a batch whose commit failed without saying whether it landed: the connection may have
        // broken after the database committed it and before its answer arrived
        let mut in_doubt: Option<Built> = None;
        loop {
            let began = Instant::now();
            match self.attempt(&mut batch, &mut in_doubt).await {
                Attempt::Landed(built) => {
                    if let Some(Built { rows, tails, .. }) = built {
                        self.landed(rows, tails, began);
                    }
                    send_all(batch.waiting.take().unwrap_or_default());
                    if let Some(unrecorded) = &self.unrecorded {
                        unrecorded.permits.add_permits(batch.permits);
                        self.metrics.audit_unrecorded(unrecorded.outstanding());
                    }
                    self.uncommitted.add_permits(batch.bytes);
                    break;
                }
                // nothing landed and the rows of lost worlds went: the rest is numbered again
                Attempt::Again => {}
                Attempt::Failed(error) => {
                    self.metrics.audit_commit_failed();
                    if !self.down.swap(true, Ordering::Relaxed) {
                        tracing::error!(error = %format!("{error:#}"), events = batch.events.len(), "audit commit failed; retrying until the store is back");
                    }
                    // the next attempt starts again from the stored tails
                    self.tails.clear();
                    batch.fail_waiting(STORE_DOWN);
                    self.pause(&mut batch, inbox.as_deref_mut(), delay).await;
                    delay = (delay * 2).min(RETRY_MAX);
                }
            }
        }
        for done in batch.flushed {
            let _ = done.send(());
        }
    }

    /// Takes `message` into `batch`; during an outage (`outage`) its answers fail at once.
    /// Returns whether a Forget dropped queued events.
    fn absorb(&mut self, batch: &mut Batch, message: Message, outage: bool) -> bool {
        match message {
            Message::Flush(done) => batch.flushed.push(done),
            Message::Forget { windows, done } => {
                batch.flushed.push(done);
                return self.forget(&windows, &mut batch.events, &mut batch.snapshots);
            }
            Message::Record {
                events,
                answers,
                permits,
                bytes,
                ..
            } => {
                if outage {
                    fail_all(answers, STORE_DOWN);
                } else {
                    batch.waiting.get_or_insert_with(Vec::new).extend(answers);
                }
                batch.events.extend(events);
                batch.permits += permits as usize;
                batch.bytes += bytes as usize;
            }
            Message::Snapshot { window, rank, data } => {
                batch
                    .snapshots
                    .push((batch.events.len(), window, rank, data));
            }
        }
        false
    }

    /// Waits `delay` before the next attempt, taking into `batch` what arrives on `inbox`
    /// meanwhile (its answers fail at once: the store is down).
    async fn pause(
        &mut self,
        batch: &mut Batch,
        mut inbox: Option<&mut mpsc::Receiver<Message>>,
        delay: Duration,
    ) {
        let pause = tokio::time::sleep(delay);
        tokio::pin!(pause);
        let mut more = Vec::new();
        loop {
            let Some(inbox) = inbox.as_mut() else {
                (&mut pause).await;
                return;
            };
            tokio::select! {
                () = &mut pause => return,
                received = inbox.recv_many(&mut more, BATCH) => {
                    if received == 0 {
                        (&mut pause).await;
                        return;
                    }
                    for message in more.drain(..) {
                        self.absorb(batch, message, true);
                    }
                }
            }
        }
    }

    /// One attempt at committing `batch`: first settles a batch in doubt, then (in a cluster)
    /// drops the rows of worlds this node no longer holds, numbers and chains the rest and
    /// inserts it under the leases it holds.
    async fn attempt(&mut self, batch: &mut Batch, in_doubt: &mut Option<Built>) -> Attempt {
        let fencing = self.fencing.get().cloned();
        if let Err((doubt, error)) = self
            .settle(in_doubt.take(), &mut batch.events, &mut batch.snapshots)
            .await
        {
            *in_doubt = doubt;
            return Attempt::Failed(error);
        }
        // it had landed and was all there was
        if batch.is_empty() {
            return Attempt::Landed(None);
        }
        let guard = fencing.as_ref().map(|fencing| lease_guard(fencing, batch));
        if batch.is_empty() {
            return Attempt::Landed(None);
        }
        if let Err(error) = self.load_tails(&batch.events, &batch.snapshots).await {
            return Attempt::Failed(error);
        }
        let mut built = self.number_unchained(
            std::mem::take(&mut batch.events),
            std::mem::take(&mut batch.snapshots),
        );
        // the large events go to the events file on a blocking thread while this one hashes
        // the chain (the file holds bodies, not hashes): a bulk put's SHA-256 and its disk
        // time overlap
        let inserted = match self.committer.stage(&built.rows).await {
            Ok(staged) => {
                self.chain(&mut built);
                self.committer
                    .insert_staged(&built.rows, staged, &built.snapshots, guard.as_ref())
                    .await
            }
            Err(error) => {
                self.chain(&mut built);
                Err(error)
            }
        };
        match inserted {
            Ok(()) => Attempt::Landed(Some(built)),
            Err(error) => match error.downcast::<Fenced>() {
                // nothing landed: the rows of the lost worlds go, the rest is numbered again
                Ok(fenced) => {
                    self.fenced(
                        fenced,
                        built,
                        &fencing,
                        &mut batch.events,
                        &mut batch.snapshots,
                    );
                    batch.fail_waiting(NOT_SERVED);
                    Attempt::Again
                }
                Err(error) => {
                    *in_doubt = Some(built);
                    Attempt::Failed(error)
                }
            },
        }
    }

    /// Drops the queued events and snapshots of `windows` and forgets their tails and clocks.
    /// Returns whether events were dropped.
    fn forget(
        &mut self,
        windows: &[u64],
        events: &mut Vec<Pending>,
        snapshots: &mut Vec<Taken>,
    ) -> bool {
        for window in windows {
            self.tails.remove(window);
            self.last_at.remove(window);
        }
        drop_windows(events, snapshots, |window| windows.contains(&window))
    }

    /// A commit refused because this node no longer holds the leases of `fenced`'s worlds:
    /// their rows are dropped (the fencing is told), the rest goes back to be numbered again.
    fn fenced(
        &mut self,
        fenced: Fenced,
        built: Built,
        fencing: &Option<Arc<dyn Fencing>>,
        events: &mut Vec<Pending>,
        snapshots: &mut Vec<Taken>,
    ) {
        tracing::warn!(worlds = ?fenced.worlds, "another node holds these worlds now: their events are not committed");
        let lost: HashSet<u64> = built
            .rows
            .iter()
            .map(|row| row.record.window)
            .chain(built.snapshots.iter().map(|snapshot| snapshot.window))
            .filter(|window| {
                fencing
                    .as_ref()
                    .and_then(|fencing| fencing.lease(*window))
                    .is_none_or(|(world, _)| fenced.worlds.contains(&world))
            })
            .collect();
        if let Some(fencing) = fencing {
            for world in &fenced.worlds {
                fencing.lost(world);
            }
        }
        let (mut again, mut placed) = built.undo();
        drop_windows(&mut again, &mut placed, |window| lost.contains(&window));
        for window in &lost {
            self.tails.remove(window);
            self.last_at.remove(window);
        }
        let before = again.len();
        again.append(events);
        for snapshot in snapshots.iter_mut() {
            snapshot.0 += before;
        }
        placed.append(snapshots);
        *events = again;
        *snapshots = placed;
    }

    /// Settles a batch whose commit failed (`doubt`) before anything else is tried: reads the
    /// stored tails of its windows, and when they are the ones the batch ends with, the
    /// database did commit it (the failure was the answer's, lost with the connection): it is
    /// recorded as committed and not inserted again — a second insert would log its events
    /// twice under new sequence numbers. Otherwise it goes back in front of `events` and
    /// `snapshots`, which arrived after it, to be numbered again.
    ///
    /// # Errors
    /// When the tails cannot be read: the batch is still in doubt and comes back.
    async fn settle(
        &mut self,
        doubt: Option<Built>,
        events: &mut Vec<Pending>,
        snapshots: &mut Vec<Taken>,
    ) -> Result<(), (Option<Built>, anyhow::Error)> {
        let Some(doubt) = doubt else {
            return Ok(());
        };
        let began = Instant::now();
        for window in doubt.tails.keys() {
            match self.store.tail(*window).await {
                Ok(stored) => {
                    self.tails.insert(*window, stored.unwrap_or((0, GENESIS)));
                }
                Err(error) => return Err((Some(doubt), error)),
            }
        }
        let landed = !doubt.tails.is_empty()
            && doubt
                .tails
                .iter()
                .all(|(window, tail)| self.tails.get(window) == Some(tail));
        if landed {
            tracing::info!(
                rows = doubt.rows.len(),
                "an audit commit reported as failed had landed: not inserted again"
            );
            self.landed(doubt.rows, doubt.tails, began);
        } else {
            let (mut earlier, mut placed) = doubt.undo();
            let before = earlier.len();
            earlier.append(events);
            for snapshot in snapshots.iter_mut() {
                snapshot.0 += before;
            }
            placed.append(snapshots);
            *events = earlier;
            *snapshots = placed;
        }
        Ok(())
    }

    /// What follows a commit that landed: metrics, the windows' tails, live watchers.
    fn landed(&mut self, rows: Vec<NewRow>, tails: HashMap<u64, (u64, [u8; 32])>, began: Instant) {
        if !rows.is_empty() {
            self.metrics.audit_committed(rows.len(), began.elapsed());
            let (started, base_ns) = self.clock;
            let now_ns = base_ns + started.elapsed().as_nanos() as u64;
            for row in &rows {
                let lag = now_ns.saturating_sub(row.record.at_ns);
                self.metrics.audit_lag(Duration::from_nanos(lag));
            }
        }
        self.tails.extend(tails);
        // a freed window's tail and clock go: a long-running server would otherwise keep them
        // for every window it ever had; a late event of it reloads the tail from the store
        for row in &rows {
            if matches!(row.record.event, Event::WindowFreed) {
                self.tails.remove(&row.record.window);
                self.last_at.remove(&row.record.window);
            }
        }
        if self.down.swap(false, Ordering::Relaxed) {
            tracing::info!("the audit store is back: commits resumed");
        }
        for row in rows {
            let _ = self.committed.send(std::sync::Arc::new(row));
        }
    }

    /// Loads the stored tail of every window of `events` and `snapshots` not known yet.
    async fn load_tails(&mut self, events: &[Pending], snapshots: &[Taken]) -> anyhow::Result<()> {
        let windows = events
            .iter()
            .map(|pending| pending.window)
            .chain(snapshots.iter().map(|(_, window, ..)| *window));
        for window in windows {
            self.tail(window).await?;
        }
        Ok(())
    }

    /// Numbers and chains `events` after each window's tail (all loaded), and places each
    /// snapshot at the sequence number its window had reached when it was taken. (A commit
    /// does it in two steps, [`Writer::number_unchained`] and [`Writer::chain`], with the
    /// events file's write between them.)
    #[cfg(test)]
    fn number(&mut self, events: Vec<Pending>, snapshots: Vec<Taken>) -> Built {
        let mut built = self.number_unchained(events, snapshots);
        self.chain(&mut built);
        built
    }

    /// `number` without the hash chain: every row numbered and encoded, its
    /// `prev_hash` and `hash` zeros and `tails` empty until [`Writer::chain`]. Whatever needs
    /// only the rows' bodies (the events file's write) can start before the hashing.
    fn number_unchained(&mut self, events: Vec<Pending>, snapshots: Vec<Taken>) -> Built {
        let mut rows = Vec::with_capacity(events.len());
        let mut seqs: HashMap<u64, u64> = HashMap::new();
        let mut placed = Vec::with_capacity(snapshots.len());
        let mut places = Vec::with_capacity(snapshots.len());
        let known = &self.tails;
        let seq_of = |seqs: &HashMap<u64, u64>, window: u64| {
            seqs.get(&window)
                .copied()
                .or_else(|| known.get(&window).map(|(seq, _)| *seq))
                .unwrap_or(0)
        };
        let mut snapshots = snapshots.into_iter().peekable();
        let mut events = events.into_iter().enumerate().peekable();
        loop {
            // a snapshot goes before the first event submitted after it
            let next = events.peek().map(|(index, _)| *index);
            if let Some((before, window, rank, data)) =
                snapshots.next_if(|(before, ..)| next.is_none_or(|index| *before <= index))
            {
                placed.push(Snapshot {
                    window,
                    rank,
                    seq: seq_of(&seqs, window),
                    data,
                });
                places.push(before);
                continue;
            }
            let Some((_, pending)) = events.next() else {
                break;
            };
            let seq = seq_of(&seqs, pending.window) + 1;
            let last_at = self.last_at.entry(pending.window).or_insert(0);
            *last_at = (*last_at).max(pending.at_ns);
            let record = AuditRecord {
                window: pending.window,
                seq,
                at_ns: *last_at,
                rank: pending.rank,
                incarnation: pending.incarnation,
                cseq: None,
                event: pending.event,
            };
            let body = Body::encode(&record.event);
            seqs.insert(record.window, seq);
            rows.push(NewRow {
                record,
                body,
                prev_hash: [0; 32],
                hash: [0; 32],
            });
        }
        Built {
            rows,
            tails: HashMap::new(),
            snapshots: placed,
            places,
        }
    }

    /// Chains the rows [`Writer::number_unchained`] built: each row's `prev_hash` and `hash`,
    /// and each window's tail after them.
    fn chain(&self, built: &mut Built) {
        let mut tails: HashMap<u64, (u64, [u8; 32])> = HashMap::new();
        for row in &mut built.rows {
            let window = row.record.window;
            let previous = tails
                .get(&window)
                .or_else(|| self.tails.get(&window))
                .map_or(GENESIS, |(_, hash)| *hash);
            row.prev_hash = previous;
            row.hash = chain_hash(&previous, &row.record, &row.body);
            tails.insert(window, (row.record.seq, row.hash));
        }
        built.tails = tails;
    }
}

/// A snapshot as the writer receives it: the number of the batch's events submitted before it,
/// window, rank, the public copy.
/// Why waiting answers fail when their world was lost to another node.
const NOT_SERVED: &str = "this node no longer serves the window's world: not recorded";
/// Why waiting answers fail while the store is down.
const STORE_DOWN: &str = "the audit store is unavailable: not recorded yet";

/// What one commit carries: events and snapshots, the answers and flushes waiting for them,
/// and the budgets they hold until it lands.
#[derive(Default)]
struct Batch {
    events: Vec<Pending>,
    snapshots: Vec<Taken>,
    /// The answers waiting for the commit; `None` once they were sent or failed.
    waiting: Option<Vec<(Reply, Answer)>>,
    flushed: Vec<oneshot::Sender<()>>,
    /// Permits of the unrecorded-events budget (async).
    permits: usize,
    /// Permits of the uncommitted-bytes budget.
    bytes: usize,
}

impl Batch {
    /// Fails the answers still waiting, saying `why`.
    fn fail_waiting(&mut self, why: &str) {
        if let Some(answers) = self.waiting.take() {
            fail_all(answers, why);
        }
    }

    fn is_empty(&self) -> bool {
        self.events.is_empty() && self.snapshots.is_empty()
    }
}

/// How one attempt at a commit ended.
enum Attempt {
    /// Committed (`None`: nothing was left to insert).
    Landed(Option<Built>),
    /// Refused for worlds this node lost, whose rows were dropped: try the rest at once.
    Again,
    /// The store failed: wait and try again.
    Failed(anyhow::Error),
}

/// The leases `batch`'s rows commit under, by `fencing`; the rows of worlds this node no
/// longer holds are dropped first, and the waiting answers fail.
fn lease_guard(fencing: &Arc<dyn Fencing>, batch: &mut Batch) -> Guard {
    let leases: HashMap<u64, Option<(String, i64)>> = batch
        .events
        .iter()
        .map(|pending| pending.window)
        .chain(batch.snapshots.iter().map(|(_, window, ..)| *window))
        .collect::<HashSet<u64>>()
        .into_iter()
        .map(|window| (window, fencing.lease(window)))
        .collect();
    let gone = |window: u64| leases.get(&window).is_some_and(Option::is_none);
    if drop_windows(&mut batch.events, &mut batch.snapshots, gone) {
        tracing::warn!("events of worlds this node no longer serves were dropped");
        batch.fail_waiting(NOT_SERVED);
    }
    let worlds: BTreeMap<String, i64> = leases.into_values().flatten().collect();
    Guard {
        node: fencing.node().to_string(),
        leases: worlds.into_iter().collect(),
    }
}

type Taken = (usize, u64, u32, Vec<u8>);

/// A batch numbered and chained, ready to insert.
struct Built {
    rows: Vec<NewRow>,
    /// Each window's tail after these rows.
    tails: HashMap<u64, (u64, [u8; 32])>,
    snapshots: Vec<Snapshot>,
    /// Where each snapshot stood among the events.
    places: Vec<usize>,
}

impl Built {
    /// The events and snapshots again, to retry the batch.
    fn undo(self) -> (Vec<Pending>, Vec<Taken>) {
        let events = self
            .rows
            .into_iter()
            .map(|row| Pending {
                window: row.record.window,
                rank: row.record.rank,
                incarnation: row.record.incarnation,
                at_ns: row.record.at_ns,
                event: row.record.event,
            })
            .collect();
        let snapshots = self
            .snapshots
            .into_iter()
            .zip(self.places)
            .map(|(snapshot, before)| (before, snapshot.window, snapshot.rank, snapshot.data))
            .collect();
        (events, snapshots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(window: u64, event: Event) -> Pending {
        Pending {
            window,
            rank: 0,
            incarnation: 0,
            at_ns: 0,
            event,
        }
    }

    fn record(events: Vec<Pending>) -> Message {
        Message::Record {
            events,
            answers: Vec::new(),
            urgent: false,
            permits: 0,
            bytes: 0,
        }
    }

    /// A `sync` writer over `store`, driven by the test, and the rows it reports committed.
    fn writer(store: &AuditStore) -> (Writer, broadcast::Receiver<Committed>) {
        let (committed, rows) = broadcast::channel(64);
        let writer = Writer {
            committer: Committer::new(store.clone()),
            store: store.clone(),
            tails: HashMap::new(),
            committed,
            down: Arc::new(AtomicBool::new(false)),
            last_at: HashMap::new(),
            metrics: Metrics::new(),
            clock: (Instant::now(), 0),
            unrecorded: None,
            uncommitted: Arc::new(tokio::sync::Semaphore::new(MAX_UNCOMMITTED_BYTES)),
            defer: false,
            fencing: Arc::new(OnceLock::new()),
        };
        (writer, rows)
    }

    #[tokio::test]
    async fn a_freed_window_leaves_no_tail_and_a_late_event_continues_its_chain() {
        let dir =
            std::env::temp_dir().join(format!("onesided-writer-freed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = AuditStore::open(None, &dir).await.unwrap();
        let (mut writer, mut rows) = writer(&store);
        writer
            .commit(vec![record(vec![
                event(7, Event::Attach),
                event(8, Event::Attach),
                event(7, Event::WindowFreed),
            ])])
            .await;
        assert_eq!(writer.tails.keys().collect::<Vec<_>>(), vec![&8]);
        let freed = (0..3).map(|_| rows.try_recv().unwrap()).last().unwrap();
        writer
            .commit(vec![record(vec![event(7, Event::Detach)])])
            .await;
        let late = rows.try_recv().unwrap();
        assert_eq!(late.record.seq, 3);
        assert_eq!(late.prev_hash, freed.hash);
        assert_eq!(writer.tails[&7].0, 3);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A commit whose answer was lost (the connection broke after the database committed) is
    /// reported as failed; the retry must find it stored and not insert its events again under
    /// new sequence numbers. One that did not land is numbered again with what came after it.
    #[tokio::test]
    async fn a_failed_commit_that_landed_is_not_logged_twice_and_one_that_did_not_is_retried() {
        let dir =
            std::env::temp_dir().join(format!("onesided-writer-doubt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = AuditStore::open(None, &dir).await.unwrap();
        let (mut writer, mut live) = writer(&store);
        writer
            .commit(vec![record(vec![
                event(7, Event::Attach),
                event(7, Event::Detach),
            ])])
            .await;
        // seqs 3 and 4, stored behind the writer's back as a commit whose answer was lost
        let landed = writer.number(
            vec![event(7, Event::Attach), event(7, Event::Detach)],
            vec![],
        );
        store.insert(&landed.rows, &[]).await.unwrap();
        let landed_hashes: Vec<[u8; 32]> = landed.rows.iter().map(|row| row.hash).collect();
        writer.tails.clear();
        let mut later = vec![event(7, Event::Attach)];
        let mut snapshots = Vec::new();
        assert!(writer
            .settle(Some(landed), &mut later, &mut snapshots)
            .await
            .is_ok());
        assert_eq!(later.len(), 1, "what came after stays to be committed");
        writer.commit(vec![record(later)]).await;

        // seqs 5 and 6 built, never stored: numbered again, before what came after them
        let lost = writer.number(
            vec![event(7, Event::Detach), event(7, Event::Attach)],
            vec![],
        );
        writer.tails.clear();
        let mut later = vec![event(7, Event::Detach)];
        assert!(writer
            .settle(Some(lost), &mut later, &mut snapshots)
            .await
            .is_ok());
        assert_eq!(later.len(), 3);
        writer.commit(vec![record(later)]).await;

        let stored = store.rows(7, 1).await.unwrap();
        let seqs: Vec<u64> = stored.iter().map(|row| row.record.seq).collect();
        assert_eq!(seqs, (1..=8).collect::<Vec<_>>(), "each event once, no gap");
        assert_eq!(stored[2].hash, landed_hashes[0].to_vec());
        assert_eq!(stored[3].hash, landed_hashes[1].to_vec());
        for pair in stored.windows(2) {
            assert_eq!(pair[1].prev_hash, pair[0].hash, "one chain");
        }
        let kinds: Vec<&str> = stored.iter().map(|row| row.record.event.kind()).collect();
        assert_eq!(
            kinds[4..],
            ["attach", "detach", "attach", "detach"],
            "the lost batch's events, then the later one"
        );
        // live watchers saw every stored row once, the landed ones included
        let seen: Vec<u64> = std::iter::from_fn(|| live.try_recv().ok())
            .map(|row| row.record.seq)
            .collect();
        assert_eq!(seen, seqs);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A connection holding the write lock of the SQLite store in `dir`: nothing else commits
    /// until it rolls back.
    async fn write_locked(dir: &std::path::Path) -> sqlx::SqliteConnection {
        use sqlx::Connection;
        let options = sqlx::sqlite::SqliteConnectOptions::new().filename(dir.join("audit.db"));
        let mut blocker = sqlx::SqliteConnection::connect_with(&options)
            .await
            .unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut blocker)
            .await
            .unwrap();
        blocker
    }

    /// `async` answers before the commit, but never more than its bound ahead of it: with the
    /// store's write lock held by another connection nothing commits, the first `max` events
    /// are taken at once, and the next submission waits until the store takes them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn async_keeps_at_most_its_bound_of_answered_events_uncommitted() {
        let dir =
            std::env::temp_dir().join(format!("onesided-writer-bound-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = AuditStore::open(None, &dir).await.unwrap();
        let metrics = Metrics::new();
        let (handle, _task) = AuditHandle::spawn_bounded(
            store.clone(),
            Durability::Async,
            0,
            Arc::clone(&metrics),
            4,
        );
        let mut blocker = write_locked(&dir).await;
        for _ in 0..4 {
            handle
                .submit(vec![event(9, Event::Attach)], Vec::new())
                .await;
        }
        let unrecorded = handle.unrecorded.clone().unwrap();
        assert_eq!(unrecorded.outstanding(), 4);
        let fifth = handle.submit(vec![event(9, Event::Attach)], Vec::new());
        tokio::pin!(fifth);
        // polled once: it waits, since nothing can commit
        assert!(
            tokio::time::timeout(Duration::ZERO, &mut fifth)
                .await
                .is_err(),
            "a fifth answered event went past the bound of 4"
        );
        sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
        tokio::time::timeout(Duration::from_secs(60), fifth)
            .await
            .expect("the bound was never given back after the store took the events");
        handle.flush().await;
        assert_eq!(unrecorded.outstanding(), 0);
        assert_eq!(store.rows(9, 1).await.unwrap().len(), 5);
        assert!(
            metrics
                .encode()
                .contains("onesided_audit_unrecorded_events 0"),
            "{}",
            metrics.encode()
        );
        drop(blocker);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// In `sync`, the bytes that uncommitted events carry are bounded too: with the store's
    /// write lock held nothing commits, a put of 40 MiB is handed over at once, and the next
    /// 40 MiB wait until the first are committed (a streaming client waits for the disk, the
    /// server does not hold its whole stream).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn events_carrying_more_bytes_than_the_budget_wait_for_the_commit_before_them() {
        let dir =
            std::env::temp_dir().join(format!("onesided-writer-bytes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = AuditStore::open(None, &dir).await.unwrap();
        let (handle, _task) =
            AuditHandle::spawn(store.clone(), Durability::Sync, 0, Metrics::new());
        let mut blocker = write_locked(&dir).await;
        let published = |offset: u64| {
            event(
                11,
                Event::Published {
                    offset,
                    data: vec![7; 40 << 20],
                },
            )
        };
        // handed over (its answer, here none, would wait for the commit)
        handle.submit(vec![published(0)], Vec::new()).await;
        assert_eq!(
            handle.uncommitted.available_permits(),
            MAX_UNCOMMITTED_BYTES - (40 << 20)
        );
        let second = handle.submit(vec![published(40 << 20)], Vec::new());
        tokio::pin!(second);
        // polled once: it waits, since nothing can commit
        assert!(
            tokio::time::timeout(Duration::ZERO, &mut second)
                .await
                .is_err(),
            "80 MiB of uncommitted events went past the budget of {MAX_UNCOMMITTED_BYTES} bytes"
        );
        sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
        tokio::time::timeout(Duration::from_secs(60), second)
            .await
            .expect("the budget was never given back after the store took the first events");
        handle.flush().await;
        assert_eq!(
            handle.uncommitted.available_permits(),
            MAX_UNCOMMITTED_BYTES
        );
        let stored = store.rows(11, 1).await.unwrap();
        assert_eq!(stored.len(), 2);
        assert!(stored
            .iter()
            .all(|row| row.record.event.payload_len() == 40 << 20));
        drop(blocker);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The commits counted so far (`onesided_audit_commit_events_count`).
    fn commits(metrics: &Metrics) -> String {
        metrics
            .encode()
            .lines()
            .find(|line| line.starts_with("onesided_audit_commit_events_count"))
            .unwrap_or_default()
            .to_string()
    }

    /// A `sync` writer over a new SQLite store in a directory named after `tag`.
    async fn sync_writer(
        tag: &str,
    ) -> (
        std::path::PathBuf,
        AuditStore,
        Arc<Metrics>,
        AuditHandle,
        tokio::task::JoinHandle<()>,
    ) {
        let dir =
            std::env::temp_dir().join(format!("onesided-writer-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = AuditStore::open(None, &dir).await.unwrap();
        let metrics = Metrics::new();
        let (handle, task) =
            AuditHandle::spawn(store.clone(), Durability::Sync, 0, Arc::clone(&metrics));
        (dir, store, metrics, handle, task)
    }

    fn done() -> Answer {
        Ok(onesided_proto::v1::server_message::Reply::Done(
            onesided_proto::v1::Done {},
        ))
    }

    /// Submits `events` with one answer (`Effects::lazy` when `lazy`, else one that waits):
    /// where that answer arrives.
    async fn submit_one(
        handle: &AuditHandle,
        events: Vec<Pending>,
        lazy: bool,
    ) -> oneshot::Receiver<Answer> {
        let (reply, answered) = oneshot::channel();
        let answer = vec![(Reply::Session(reply), done())];
        let (answers, lazy) = if lazy {
            (Vec::new(), answer)
        } else {
            (answer, Vec::new())
        };
        handle
            .submit_effects(events, answers, lazy, Vec::new())
            .await;
        answered
    }

    /// A cluster's fencing that holds window 1's world until told it was lost.
    #[derive(Debug, Default)]
    struct Losing {
        lost: AtomicBool,
    }

    impl Fencing for Losing {
        fn node(&self) -> &str {
            "node-a"
        }

        fn lease(&self, _window: u64) -> Option<(String, i64)> {
            (!self.lost.load(Ordering::SeqCst)).then(|| ("w".to_string(), 1))
        }

        fn lost(&self, _world: &str) {}
    }

    /// The store is found back by itself, within a second, when no commit comes to find it
    /// out: here a batch retried while the store refused it loses its world meanwhile, so its
    /// events are dropped and the retry ends with nothing to commit — and sessions refuse
    /// every call while the store is down, so before this no commit ever cleared it (issue 43,
    /// item 12).
    #[tokio::test]
    async fn the_store_is_found_back_when_a_retried_batch_ends_with_nothing_to_commit() {
        let (dir, _store, _metrics, handle, _task) = sync_writer("found-back").await;
        let fencing = Arc::new(Losing::default());
        handle.set_fencing(Arc::clone(&fencing) as Arc<dyn Fencing>);
        // a guarded commit fails on SQLite (a cluster needs PostgreSQL): as far as the writer
        // can tell, the store refuses commits
        let answered = submit_one(&handle, vec![event(1, Event::Attach)], false).await;
        assert!(answered.await.unwrap().is_err());
        assert!(handle.is_down());
        fencing.lost.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(3);
        while handle.is_down() {
            assert!(
                Instant::now() < deadline,
                "the store answers, and the writer still says it is down"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// In `sync`, a lazy answer (a fence epoch's operation, `Effects::lazy`) starts no commit:
    /// it rides with the commit that the next urgent answer (the fence's) starts, the two in
    /// one commit; alone, it is committed once DEFER has passed. Either way it leaves only after
    /// its event is stored. (One thread: the writer runs exactly when this test yields.)
    #[tokio::test]
    async fn a_lazy_answer_waits_for_a_commit_without_starting_one() {
        let (dir, store, metrics, handle, _task) = sync_writer("lazy").await;
        let mut lazy_answered = submit_one(&handle, vec![event(12, Event::Attach)], true).await;
        // the writer takes it and waits: it started no commit
        tokio::task::yield_now().await;
        let urgent_answered = submit_one(&handle, vec![event(12, Event::Attach)], false).await;
        assert!(matches!(
            lazy_answered.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        ));
        urgent_answered.await.unwrap().unwrap();
        lazy_answered.await.unwrap().unwrap();
        assert_eq!(store.rows(12, 1).await.unwrap().len(), 2);
        assert_eq!(
            commits(&metrics),
            "onesided_audit_commit_events_count 1",
            "one commit for both"
        );

        // alone, it is committed once DEFER has passed, not before
        let began = Instant::now();
        let lazy_answered = submit_one(&handle, vec![event(12, Event::Attach)], true).await;
        lazy_answered.await.unwrap().unwrap();
        assert!(
            began.elapsed() >= DEFER,
            "answered {:?} after",
            began.elapsed()
        );
        assert_eq!(store.rows(12, 1).await.unwrap().len(), 3);
        assert_eq!(commits(&metrics), "onesided_audit_commit_events_count 2");
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// In `sync`, an answer handed over with no events of its own (the acknowledgement of a
    /// complete marker, `Effects::behind`) leaves only after the events submitted before it are
    /// committed; the lazy answer of a PSCW put before it rides in the same commit. (One thread:
    /// the writer runs exactly when this test yields.)
    #[tokio::test]
    async fn an_answer_with_no_events_waits_for_the_commit_of_the_events_before_it() {
        let (dir, store, metrics, handle, _task) = sync_writer("behind").await;
        let lazy_answered = submit_one(&handle, vec![event(13, Event::Attach)], true).await;
        // the writer takes it and waits: it started no commit
        tokio::task::yield_now().await;
        let behind_answered = submit_one(&handle, Vec::new(), false).await;
        behind_answered.await.unwrap().unwrap();
        assert_eq!(
            store.rows(13, 1).await.unwrap().len(),
            1,
            "answered before the event before it was stored"
        );
        lazy_answered.await.unwrap().unwrap();
        assert_eq!(
            commits(&metrics),
            "onesided_audit_commit_events_count 1",
            "one commit for both"
        );
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Such an answer reaches the writer as urgent — it starts the commit rather than wait for
    /// `DEFER` — in `sync` only; in `async` it leaves at once, as answers there do.
    #[tokio::test]
    async fn an_answer_with_no_events_is_urgent_in_sync_and_immediate_otherwise() {
        for durability in [Durability::Sync, Durability::Async] {
            let (sender, mut inbox) = mpsc::channel(4);
            let handle = AuditHandle {
                sender: Some(sender),
                durability,
                ..AuditHandle::off()
            };
            let answered = submit_one(&handle, Vec::new(), false).await;
            match (durability, inbox.try_recv()) {
                (
                    Durability::Sync,
                    Ok(Message::Record {
                        events,
                        answers,
                        urgent,
                        ..
                    }),
                ) => {
                    assert!(events.is_empty() && urgent && answers.len() == 1);
                    drop(answers);
                }
                (Durability::Async, Err(_)) => {
                    answered.await.unwrap().unwrap();
                }
                (durability, other) => panic!("{durability:?}: {other:?}"),
            }
        }
    }
}
