//! The audit writer's task: it takes what [`super::AuditHandle`] sends, folds it into batches,
//! and commits each batch, again and again while the store refuses, until it lands or its
//! world is lost to another node; then it answers the calls that waited and tells live
//! watchers.
//!
//! Owns: batching (the inbox, [`BATCH`](super::BATCH), the deferral of `sync` batches nobody
//! waits for), the retry and probing of a store that is down, the cluster's lease guard of
//! each commit, and what happens after one lands (answers, budgets, tails, watchers). Must
//! not: number or chain rows (its `chain` module does), talk SQL (the store does), or decide
//! what an event means (core does).

mod chain;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use onesided_core::audit::{Event, GENESIS};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::{
    fail_all, send_all, AuditStore, Committed, Committer, Fenced, Fencing, Guard, Message, NewRow,
    Pending, Unrecorded, BATCH, BATCH_BYTES, DEFER,
};
use crate::metrics::Metrics;
use crate::reply::{Answer, Reply};
pub(super) use chain::{Built, Taken};

/// The first wait before a failed commit is tried again; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// While the store is known to be down and the writer has nothing to commit, how often it asks
/// the store whether it answers again: sessions refuse every call while it is down, so no
/// commit would ever come to find out.
const PROBE_EVERY: Duration = Duration::from_millis(250);

pub(super) struct Writer {
    pub(super) store: AuditStore,
    /// The writer's own connection for its commits.
    pub(super) committer: Committer,
    pub(super) tails: HashMap<u64, (u64, [u8; 32])>,
    pub(super) committed: broadcast::Sender<Committed>,
    pub(super) down: Arc<AtomicBool>,
    /// Per window, the latest timestamp written: events from different actors reach the
    /// writer slightly out of clock order, and a window's timestamps must not go back.
    pub(super) last_at: HashMap<u64, u64>,
    pub(super) metrics: Arc<Metrics>,
    /// The handle's clock (`started`, `base_ns`), to measure each event's lag.
    pub(super) clock: (Instant, u64),
    /// `async`: the budget whose permits go back after each commit.
    pub(super) unrecorded: Option<Unrecorded>,
    /// The uncommitted-bytes budget, whose permits go back after each commit.
    pub(super) uncommitted: Arc<tokio::sync::Semaphore>,
    /// `sync`: a batch no answer waits for waits up to [`DEFER`] for one that does.
    pub(super) defer: bool,
    /// In a cluster, what guards every commit.
    pub(super) fencing: Arc<OnceLock<Arc<dyn Fencing>>>,
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
    pub(super) async fn run(mut self, mut inbox: mpsc::Receiver<Message>) {
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
    pub(super) async fn commit(&mut self, messages: Vec<Message>) {
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
    pub(super) async fn settle(
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
}

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
