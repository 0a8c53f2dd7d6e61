//! The audit writer: actors and sessions hand it events over a bounded channel; it assigns the
//! gap-free sequence numbers and the hash chain per window, and commits in batches (group
//! commit). In `sync` durability the answers of the calls that produced the events travel with
//! them and are sent only after the commit; in `async` they are sent at once and the bounded
//! channel pushes back when the writer falls behind; `off` records nothing.
//!
//! Owns: the order of the log. Must not: decide what an event means (core does).

pub mod service;
pub mod store;

use std::collections::HashMap;
use std::time::Instant;

use onesided_core::audit::{chain_hash, AuditRecord, Event, GENESIS};
use onesided_core::{ErrorClass, RmaError};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::reply::{Answer, Reply};
pub use store::{AuditStore, NewRow, RecordedWindow};

/// How much the answer to a call waits for its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    /// Nothing is recorded.
    Off,
    /// Recorded in the background; the channel pushes back, nothing is dropped.
    Async,
    /// A call is answered only after its events are committed.
    Sync,
}

/// Capacity of the writer's inbox.
const INBOX: usize = 4096;

/// Most messages folded into one commit.
const BATCH: usize = 1024;

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
    },
    Flush(oneshot::Sender<()>),
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Message::Record { events, answers } => f
                .debug_struct("Record")
                .field("events", &events.len())
                .field("answers", &answers.len())
                .finish(),
            Message::Flush(_) => f.write_str("Flush"),
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
    committed: broadcast::Sender<Committed>,
}

impl AuditHandle {
    /// A handle that records nothing (durability off).
    pub fn off() -> Self {
        AuditHandle {
            sender: None,
            durability: Durability::Off,
            started: Instant::now(),
            committed: broadcast::channel(1).0,
        }
    }

    /// Starts the writer over `store`.
    pub fn spawn(store: AuditStore, durability: Durability) -> (Self, tokio::task::JoinHandle<()>) {
        if durability == Durability::Off {
            return (Self::off(), tokio::spawn(async {}));
        }
        let (sender, inbox) = mpsc::channel(INBOX);
        let (committed, _) = broadcast::channel(65536);
        let writer = Writer {
            store,
            tails: HashMap::new(),
            committed: committed.clone(),
        };
        let task = tokio::spawn(writer.run(inbox));
        (
            AuditHandle {
                sender: Some(sender),
                durability,
                started: Instant::now(),
                committed,
            },
            task,
        )
    }

    /// The durability in force.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Nanoseconds since the server started (the log's clock).
    pub fn now(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// Live committed rows.
    pub fn subscribe(&self) -> broadcast::Receiver<Committed> {
        self.committed.subscribe()
    }

    /// Records `events` and sends `answers` — after the commit in `sync` durability, at once
    /// otherwise. Waits when the writer is behind (back-pressure).
    pub async fn submit(&self, events: Vec<Pending>, answers: Vec<(Reply, Answer)>) {
        let Some(sender) = &self.sender else {
            send_all(answers);
            return;
        };
        if events.is_empty() {
            send_all(answers);
            return;
        }
        let (events, answers, late) = match self.durability {
            Durability::Sync => (events, answers, Vec::new()),
            _ => (events, Vec::new(), answers),
        };
        if let Err(mpsc::error::SendError(Message::Record { answers, .. })) =
            sender.send(Message::Record { events, answers }).await
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
        reply.send(Err(RmaError::new(ErrorClass::Intern, why)));
    }
}

struct Writer {
    store: AuditStore,
    tails: HashMap<u64, (u64, [u8; 32])>,
    committed: broadcast::Sender<Committed>,
}

impl Writer {
    async fn run(mut self, mut inbox: mpsc::Receiver<Message>) {
        let mut batch = Vec::with_capacity(BATCH);
        while inbox.recv_many(&mut batch, BATCH).await > 0 {
            self.commit(std::mem::take(&mut batch)).await;
        }
        tracing::info!("audit writer stopped");
    }

    async fn tail(&mut self, window: u64) -> anyhow::Result<(u64, [u8; 32])> {
        if let Some(tail) = self.tails.get(&window) {
            return Ok(*tail);
        }
        let tail = self.store.tail(window).await?.unwrap_or((0, GENESIS));
        self.tails.insert(window, tail);
        Ok(tail)
    }

    async fn commit(&mut self, messages: Vec<Message>) {
        let mut rows = Vec::new();
        let mut answers = Vec::new();
        let mut flushed = Vec::new();
        let mut tails: HashMap<u64, (u64, [u8; 32])> = HashMap::new();
        let mut failure = None;
        for message in messages {
            match message {
                Message::Flush(done) => flushed.push(done),
                Message::Record {
                    events,
                    answers: waiting,
                } => {
                    answers.extend(waiting);
                    for pending in events {
                        let tail = match tails.get(&pending.window) {
                            Some(tail) => Ok(*tail),
                            None => self.tail(pending.window).await,
                        };
                        let (seq, previous) = match tail {
                            Ok(tail) => tail,
                            Err(error) => {
                                failure.get_or_insert(error);
                                continue;
                            }
                        };
                        let record = AuditRecord {
                            window: pending.window,
                            seq: seq + 1,
                            at_ns: pending.at_ns,
                            rank: pending.rank,
                            incarnation: pending.incarnation,
                            event: pending.event,
                        };
                        let body = record.event.to_json();
                        let hash = chain_hash(&previous, &record, &body);
                        tails.insert(record.window, (record.seq, hash));
                        rows.push(NewRow {
                            record,
                            body,
                            prev_hash: previous,
                            hash,
                        });
                    }
                }
            }
        }
        let stored = match failure {
            Some(error) => Err(error),
            None => self.store.insert(&rows).await,
        };
        match stored {
            Ok(()) => {
                self.tails.extend(tails);
                // a freed window's tail goes: a long-running server would otherwise keep one
                // per window it ever had; a late event of it reloads the tail from the store
                for row in &rows {
                    if matches!(row.record.event, Event::WindowFreed) {
                        self.tails.remove(&row.record.window);
                    }
                }
                for row in rows {
                    let _ = self.committed.send(std::sync::Arc::new(row));
                }
                send_all(answers);
            }
            Err(error) => {
                // nothing of this batch is stored: nothing of it is acknowledged, and the next
                // batch starts again from the stored tails
                tracing::error!(error = %format!("{error:#}"), events = rows.len(), "audit commit failed");
                self.tails.clear();
                fail_all(answers, "the audit store is unavailable");
            }
        }
        for done in flushed {
            let _ = done.send(());
        }
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
        }
    }

    #[tokio::test]
    async fn a_freed_window_leaves_no_tail_and_a_late_event_continues_its_chain() {
        let dir =
            std::env::temp_dir().join(format!("onesided-writer-freed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = AuditStore::open(None, &dir).await.unwrap();
        let (committed, mut rows) = broadcast::channel(16);
        let mut writer = Writer {
            store: store.clone(),
            tails: HashMap::new(),
            committed,
        };
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
}
