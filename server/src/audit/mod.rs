//! The audit writer: actors and sessions hand it events over a bounded channel; it assigns the
//! gap-free sequence numbers and the hash chain per window, and commits in batches (group
//! commit). In `sync` durability the answers of the calls that produced the events travel with
//! them and are sent only after the commit; in `async` they are sent at once and the bounded
//! channel pushes back when the writer falls behind; `off` records nothing.
//!
//! This file is the handle ([`AuditHandle`]) sessions and actors submit through; the writer's
//! task is `writer.rs`, its numbering and hash chain `writer/chain.rs`.
//!
//! Owns: the order of the log. Must not: decide what an event means (core does).

pub mod service;
pub mod store;
mod writer;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use onesided_core::audit::Event;
use onesided_core::{ErrorClass, RmaError};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::metrics::Metrics;
use crate::reply::{Answer, Reply};
pub use onesided_core::audit::RecordedWindow;
pub use store::{
    AuditStore, Committer, Fenced, Guard, NewRow, Rows, Snapshot, StoredWindow, StoredWorld,
};
use writer::Writer;

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

    /// A fresh SQLite store in a scratch directory of its own (`name`), and the directory.
    async fn scratch_store(name: &str) -> (std::path::PathBuf, AuditStore) {
        let dir = store::scratch(name);
        let store = AuditStore::open(None, &dir).await.unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn a_freed_window_leaves_no_tail_and_a_late_event_continues_its_chain() {
        let (dir, store) = scratch_store("writer-freed").await;
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
        let (dir, store) = scratch_store("writer-doubt").await;
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

    /// Asserts that `submission` waits while `blocker` holds the store's write lock (`past`:
    /// what it would otherwise have gone past), and completes once the lock is let go
    /// (`never`: what was never given back otherwise).
    async fn waits_for_the_store(
        submission: impl std::future::Future<Output = ()>,
        blocker: &mut sqlx::SqliteConnection,
        past: &str,
        never: &str,
    ) {
        tokio::pin!(submission);
        // polled once: it waits, since nothing can commit
        assert!(
            tokio::time::timeout(Duration::ZERO, &mut submission)
                .await
                .is_err(),
            "{past}"
        );
        sqlx::query("ROLLBACK")
            .execute(&mut *blocker)
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(60), submission)
            .await
            .expect(never);
    }

    /// `async` answers before the commit, but never more than its bound ahead of it: with the
    /// store's write lock held by another connection nothing commits, the first `max` events
    /// are taken at once, and the next submission waits until the store takes them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn async_keeps_at_most_its_bound_of_answered_events_uncommitted() {
        let (dir, store) = scratch_store("writer-bound").await;
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
        waits_for_the_store(
            fifth,
            &mut blocker,
            "a fifth answered event went past the bound of 4",
            "the bound was never given back after the store took the events",
        )
        .await;
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
        let (dir, store) = scratch_store("writer-bytes").await;
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
        waits_for_the_store(
            second,
            &mut blocker,
            &format!(
                "80 MiB of uncommitted events went past the budget of {MAX_UNCOMMITTED_BYTES} bytes"
            ),
            "the budget was never given back after the store took the first events",
        )
        .await;
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
        let (dir, store) = scratch_store(&format!("writer-{tag}")).await;
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
