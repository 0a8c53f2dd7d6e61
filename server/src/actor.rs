//! The window-server actor: one tokio task per rank of each window. It carries core's target
//! engine ([`Target`]) over tokio: commands in from sessions, the engine's effects out — events
//! to the audit writer, answers after their commit (or at once where the engine says so), lock
//! waits and queue depths to the metrics, snapshots of the public copy to the store.
//!
//! Owns: the I/O around one rank's [`Target`]. Must not: decide any MPI rule (when an
//! operation may be applied is the engine's, what it does is core's `apply`), take locks,
//! await anything but its inbox and the audit writer, or block on another actor (replies go
//! out through [`Reply`], never back in).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use onesided_core::audit::Event;
use onesided_core::target::{self, Access, Effects, Input, Target, TargetView, Update};
use onesided_core::window::MemoryModel;
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::v1::{server_message, Updated};
use tokio::sync::{mpsc, oneshot, watch};

use crate::audit::{AuditHandle, Durability, Pending};
use crate::limits::WindowBytes;
use crate::metrics::{Metrics, QueueReport};
use crate::reply::{Answer, Outbound, Reply};
use crate::supervise::{self, Fate};

/// Capacity of an actor's inbox: senders wait when it is full (back-pressure, never loss).
const INBOX: usize = 1024;

/// A window's ranks are snapshotted together once this many bytes of publications and
/// operations (each event counting [`EVENT_BYTES`] more) were logged on any of them since the
/// last round — or [`SNAPSHOT_WINDOWS`] times the bytes of all the window's copies, if larger.
const SNAPSHOT_BYTES: u64 = 64 * 1024;

/// How many times the window's own size its log may grow between two rounds of snapshots: a
/// restart replays at most about this many copies' worth of log, and the store writes a copy of
/// the window for every this many copies' worth of updates — 1 + 1/4 bytes per byte put when
/// whole windows are overwritten, and a put of at most three windows' worth is stored once, not
/// once in the log and again, at once, in a snapshot (issue 12: a snapshot right after each
/// window-sized put doubled what the store wrote, and held a copy of the public copy in memory
/// meanwhile).
const SNAPSHOT_WINDOWS: u64 = 4;

/// What every event adds to the log towards the next round besides its data: lock and epoch
/// events carry none, and a rank that only locks must not make recovery replay all of them.
const EVENT_BYTES: u64 = 64;

/// What the actors of one window's ranks share: the log grown since the last round of
/// snapshots, and the round itself. Every rank is snapshotted in every round, written or not,
/// so recovery — which replays the log from the oldest of the ranks' snapshots — replays at
/// most one round's worth of it (issue 43, item 13: a rank never written had no snapshot, and
/// every take-up replayed the whole log).
#[derive(Debug)]
pub struct WindowLog {
    /// Bytes logged on any rank since the last round.
    logged: AtomicU64,
    /// Bytes of all the ranks' public copies (a dynamic window's grow).
    span: AtomicU64,
    /// The round's number: each rank's actor snapshots its copy when it changes.
    round: watch::Sender<u64>,
}

impl WindowLog {
    /// The log of a window whose ranks' copies hold `span` bytes together, `logged` of them
    /// since the last round (what recovery replayed: a node that takes a world up again and
    /// again must not let the log behind the snapshots grow each time).
    pub fn new(span: u64, logged: u64) -> Arc<Self> {
        Arc::new(WindowLog {
            logged: AtomicU64::new(logged),
            span: AtomicU64::new(span),
            round: watch::Sender::new(0),
        })
    }

    /// Counts `bytes` logged; starts a round of snapshots when they make one due.
    fn logged(&self, bytes: u64) {
        let threshold = SNAPSHOT_BYTES.max(
            self.span
                .load(Ordering::Relaxed)
                .saturating_mul(SNAPSHOT_WINDOWS),
        );
        let total = self.logged.fetch_add(bytes, Ordering::Relaxed) + bytes;
        // of two ranks crossing it at once, one starts the round
        if total >= threshold && self.logged.swap(0, Ordering::Relaxed) >= threshold {
            self.round
                .send_modify(|round| *round = round.wrapping_add(1));
        }
    }

    /// A rank's copy grew from `before` to `after` bytes.
    fn grew(&self, before: u64, after: u64) {
        if after > before {
            self.span.fetch_add(after - before, Ordering::Relaxed);
        }
    }
}

/// Something an origin sends to a target (core's [`Access`], answered through a [`Reply`]).
pub type AccessItem = Access<Reply>;

/// Messages to a window-server actor: the engine's inputs, and what only the actor answers.
#[derive(Debug)]
pub enum Command {
    /// An input of the rank's target engine (core's [`Input`]).
    Engine(Input<Reply>),
    /// An input (a departure) whose sender waits until it is handled and its answers handed on.
    Acknowledged {
        /// The input.
        input: Input<Reply>,
        /// Answered once handled.
        done: oneshot::Sender<()>,
    },
    /// An operator revokes the lock a live session holds here (core's `Target::revoke`);
    /// answered with the revoked lock's fencing token (`None`: it held none) once the events
    /// and answers that caused are handed on.
    Revoke {
        /// The holding rank.
        origin: u32,
        /// Its session's incarnation.
        incarnation: u64,
        /// Why, as recorded.
        reason: String,
        /// The answer.
        reply: oneshot::Sender<Option<u64>>,
    },
    /// Part of the public copy, `len` bytes from `offset` (cut at the copy's end), and the
    /// copy's whole length: a page of the web view's contents costs a page.
    Read {
        /// The first byte.
        offset: u64,
        /// How many bytes at most.
        len: u64,
        /// The bytes and the copy's length.
        reply: oneshot::Sender<(Vec<u8>, u64)>,
    },
    /// Is any epoch open or anything pending here?
    Busy {
        /// `Some(reason)` when busy.
        reply: oneshot::Sender<Option<String>>,
    },
    /// What the rank's target looks like now (read-only, for the web view).
    Inspect {
        /// The picture.
        reply: oneshot::Sender<TargetView>,
    },
    /// Dynamic window: the regions the rank has attached, each as its address and its bytes in
    /// the public copy (read-only: what a new session of the rank opening the window starts
    /// from).
    Regions {
        /// The regions, by address.
        reply: oneshot::Sender<Vec<(u64, Vec<u8>)>>,
    },
    /// The bytes of the public copy that are not zero (core's `Segment::nonzero`).
    Written {
        /// The segments, by offset.
        reply: oneshot::Sender<Vec<target::Segment>>,
    },
    /// Unified model: the owner's session `out` follows the public copy from now on (in place
    /// of any earlier one); `input` is the engine's [`Input::Follow`].
    Follow {
        /// The owner session's outbound stream, where updates go.
        out: Outbound,
        /// The engine's input, answered after the whole copy was sent.
        input: Input<Reply>,
    },
}

/// A cheap, cloneable address of one rank's window-server actor.
#[derive(Clone, Debug)]
pub struct WindowServerHandle {
    /// Boxed: a slot of the channel is a pointer, not a 288-byte command. A tokio channel
    /// writes each message into a slot it last used at least 32 messages earlier; with a
    /// thousand actors those slots are cold, a freshly freed box is not (BENCHMARKS.md,
    /// "Fence scaling at 1 024 ranks is bound by memory").
    sender: mpsc::Sender<Box<Command>>,
    rank: u32,
    /// Set if the actor panicked.
    fate: Fate,
}

/// A dynamic window's rank: the most bytes its regions may span (the server's window bytes per
/// rank), the regions already attached (offset → size; recovery's), and the server's budget
/// of window bytes, which the bytes its regions span count against.
#[derive(Clone, Debug)]
pub struct Dynamic {
    /// The most bytes the rank's memory may span.
    pub max_bytes: u64,
    /// The regions attached, offset in the public copy → size.
    pub regions: std::collections::BTreeMap<u64, u64>,
    /// The server's window bytes: the actor takes what its span grows by, and gives all of it
    /// back when it stops.
    pub window_bytes: Arc<WindowBytes>,
}

/// One rank's actor as it starts ([`WindowServerHandle::spawn`]).
#[derive(Debug)]
pub struct RankStart {
    /// The window's id.
    pub window: u64,
    /// The rank.
    pub rank: u32,
    /// How many ranks the window has.
    pub nranks: u32,
    /// The window's memory model.
    pub model: MemoryModel,
    /// The rank's public copy: zeroed for a new window, rebuilt from snapshot and log after a
    /// restart.
    pub public: Vec<u8>,
    /// A dynamic window's regions and limits.
    pub dynamic: Option<Dynamic>,
    /// How long a shared lock request may wait behind a waiting exclusive one.
    pub lock_fairness: Duration,
    /// The log of the window's operations since its last snapshot, shared by its ranks.
    pub log: Arc<WindowLog>,
}

impl WindowServerHandle {
    /// Starts the actor of one rank of a window, as `rank` says, recording through `audit`.
    pub fn spawn(rank: RankStart, audit: AuditHandle, metrics: Arc<Metrics>) -> Self {
        let RankStart {
            window,
            rank,
            nranks,
            model,
            public,
            dynamic,
            lock_fairness,
            log,
        } = rank;
        let (sender, inbox) = mpsc::channel(INBOX);
        let recording = audit.durability() != Durability::Off;
        let now = Instant::now();
        let mut target =
            Target::new(rank, nranks, public, recording, lock_fairness, now).with_model(model);
        let mut window_bytes = None;
        if let Some(dynamic) = dynamic {
            target = target.with_dynamic(dynamic.max_bytes, dynamic.regions);
            // what recovery rebuilt counts, even past a limit lowered since
            dynamic
                .window_bytes
                .take_anyway(target.public().len() as u64);
            window_bytes = Some(dynamic.window_bytes);
        }
        let rounds = log.round.subscribe();
        let actor = WindowServer {
            window_bytes,
            log,
            rounds,
            window,
            rank,
            target,
            follower: None,
            audit,
            metrics,
            reported: QueueReport::default(),
        };
        let span = tracing::info_span!("window_server", window, rank);
        let fate = supervise::spawn("window server", actor.run(inbox), span);
        WindowServerHandle { sender, rank, fate }
    }

    /// Why the actor no longer takes commands: it panicked (`MPI_ERR_INTERN`), or its window
    /// was freed (`MPI_ERR_WIN`).
    fn gone(&self) -> RmaError {
        match self.fate.panicked() {
            Some(panic) => RmaError::new(
                ErrorClass::Intern,
                format!(
                    "the window server of rank {} failed (it panicked: {panic}); the window \
                     cannot be used",
                    self.rank
                ),
            ),
            None => RmaError::new(
                ErrorClass::Win,
                format!("window of rank {} was freed", self.rank),
            ),
        }
    }

    /// Hands `input` to the rank's engine; a stopped actor (its window was freed) is
    /// `MPI_ERR_WIN`.
    ///
    /// # Errors
    /// `MPI_ERR_WIN` when the actor has stopped, `MPI_ERR_INTERN` when it panicked.
    pub async fn send(&self, input: Input<Reply>) -> Result<(), RmaError> {
        self.command(Command::Engine(input)).await
    }

    /// Hands `input` to the rank's engine; the receiver fires once it is handled and the
    /// answers it caused are handed on (so several actors can work on theirs at once).
    ///
    /// # Errors
    /// As [`WindowServerHandle::send`].
    pub async fn acknowledged(
        &self,
        input: Input<Reply>,
    ) -> Result<oneshot::Receiver<()>, RmaError> {
        let (done, handled) = oneshot::channel();
        self.command(Command::Acknowledged { input, done }).await?;
        Ok(handled)
    }

    async fn command(&self, command: Command) -> Result<(), RmaError> {
        self.sender
            .send(Box::new(command))
            .await
            .map_err(|_| self.gone())
    }

    /// Stops the actor (its window was freed); pending calls fail with `MPI_ERR_WIN`.
    pub fn stop(&self) {
        let _ = self.sender.try_send(Box::new(Command::Engine(Input::Stop)));
    }

    /// Stops the actor as [`WindowServerHandle::stop`] does, waiting for room in its inbox
    /// rather than giving up when it is full, and resolves once it has stopped.
    pub async fn stop_and_wait(&self) {
        let _ = self
            .sender
            .send(Box::new(Command::Engine(Input::Stop)))
            .await;
        self.stopped().await;
    }

    /// Resolves once the actor has stopped (everything it recorded is handed to the writer).
    pub async fn stopped(&self) {
        self.sender.closed().await;
    }

    /// Stops the actor as a window no longer served here ([`Input::Abandon`]: pending calls
    /// fail, nothing is recorded).
    pub fn abandon(&self) {
        let _ = self
            .sender
            .try_send(Box::new(Command::Engine(Input::Abandon)));
    }

    /// Unified model: `out`, the owner's session, follows the public copy from now on;
    /// `reply` is answered after the whole copy was sent to it.
    ///
    /// # Errors
    /// `MPI_ERR_WIN` when the actor has stopped.
    pub async fn follow(&self, out: Outbound, reply: Reply) -> Result<(), RmaError> {
        self.command(Command::Follow {
            out,
            input: Input::Follow { reply },
        })
        .await
    }

    /// Asks whether anything is open or pending at this rank.
    ///
    /// # Errors
    /// `MPI_ERR_WIN` when the actor has stopped.
    pub async fn busy(&self) -> Result<Option<String>, RmaError> {
        let (reply, answer) = oneshot::channel();
        self.command(Command::Busy { reply }).await?;
        answer.await.map_err(|_| self.gone())
    }

    /// What the rank's target looks like now: lock holders and waiters, open epochs, queued
    /// items (read-only).
    ///
    /// # Errors
    /// `MPI_ERR_WIN` when the actor has stopped, `MPI_ERR_INTERN` when it panicked.
    pub async fn inspect(&self) -> Result<TargetView, RmaError> {
        let (reply, answer) = oneshot::channel();
        self.command(Command::Inspect { reply }).await?;
        answer.await.map_err(|_| self.gone())
    }

    /// Dynamic window: the regions the rank has attached, as their addresses and bytes in the
    /// public copy, once every command sent before this one was handled (empty for other
    /// flavors).
    ///
    /// # Errors
    /// `MPI_ERR_WIN` when the actor has stopped, `MPI_ERR_INTERN` when it panicked.
    pub async fn regions(&self) -> Result<Vec<(u64, Vec<u8>)>, RmaError> {
        let (reply, answer) = oneshot::channel();
        self.command(Command::Regions { reply }).await?;
        answer.await.map_err(|_| self.gone())
    }

    /// An operator takes away the lock session `incarnation` of `origin` holds at this rank
    /// (recorded `lock_revoke` with `reason`, the next waiter granted, the rest of that lock
    /// epoch refused with `MPI_ERR_RMA_SYNC`). Resolves with the revoked lock's fencing token,
    /// `None` when it held none here, once what it caused was handed on.
    ///
    /// # Errors
    /// `MPI_ERR_WIN` when the actor has stopped, `MPI_ERR_INTERN` when it panicked.
    pub async fn revoke(
        &self,
        origin: u32,
        incarnation: u64,
        reason: &str,
    ) -> Result<Option<u64>, RmaError> {
        let (reply, answer) = oneshot::channel();
        self.command(Command::Revoke {
            origin,
            incarnation,
            reason: reason.to_string(),
            reply,
        })
        .await?;
        answer.await.map_err(|_| self.gone())
    }

    /// Up to `len` bytes of the rank's public copy from byte `offset` (fewer at its end, none
    /// past it), and the copy's length, once every command sent before this one was handled.
    ///
    /// # Errors
    /// `MPI_ERR_WIN` when the actor has stopped, `MPI_ERR_INTERN` when it panicked.
    pub async fn read(&self, offset: u64, len: u64) -> Result<(Vec<u8>, u64), RmaError> {
        let (reply, answer) = oneshot::channel();
        self.command(Command::Read { offset, len, reply }).await?;
        answer.await.map_err(|_| self.gone())
    }

    /// The bytes of the rank's public copy that are not zero, once every command sent before
    /// this one was handled: what a new session's private copy starts from.
    ///
    /// # Errors
    /// `MPI_ERR_WIN` when the actor has stopped, `MPI_ERR_INTERN` when it panicked.
    pub async fn written(&self) -> Result<Vec<target::Segment>, RmaError> {
        let (reply, answer) = oneshot::channel();
        self.command(Command::Written { reply }).await?;
        answer.await.map_err(|_| self.gone())
    }
}

/// The most commands one turn of an actor's loop takes before it carries out their effects
/// and looks at its timers and snapshot rounds again.
const TURN: usize = 64;

/// The commands of one turn of an actor's loop: the first it waited for and those already
/// waiting behind it, handled before their effects are carried out together.
#[derive(Default)]
struct Turn {
    /// How many.
    commands: usize,
    /// One abandoned the target (the actor ends after the turn, taking no snapshot).
    abandoning: bool,
    /// One stopped the actor (the turn takes no command after it).
    stopping: bool,
    /// What their senders wait for, in order, once the effects were carried out.
    after: Vec<After>,
}

/// What the sender of a command waits for, sent once the command's effects were carried out.
enum After {
    /// An acknowledged input was handled.
    Handled(oneshot::Sender<()>),
    /// A revocation, with the revoked lock's token.
    Revoked(oneshot::Sender<Option<u64>>, Option<u64>),
}

struct WindowServer {
    /// Dynamic window: the server's window bytes, of which its public copy (the span of its
    /// regions, which only grows) holds its length until the actor ends ([`WindowServer::release`]).
    window_bytes: Option<Arc<WindowBytes>>,
    /// The log shared with the window's other ranks, and its rounds of snapshots.
    log: Arc<WindowLog>,
    rounds: watch::Receiver<u64>,
    window: u64,
    rank: u32,
    audit: AuditHandle,
    target: Target<Reply>,
    /// Unified model: the owner's session that follows the public copy (the latest to ask).
    follower: Option<Outbound>,
    /// Where lock waits and queue depths are recorded.
    metrics: Arc<Metrics>,
    /// What this actor last added to the server-wide queue gauges.
    reported: QueueReport,
}

impl Drop for WindowServer {
    /// A panicked actor gives the bytes back too.
    fn drop(&mut self) {
        self.release();
    }
}

impl WindowServer {
    async fn run(mut self, mut inbox: mpsc::Receiver<Box<Command>>) {
        tracing::debug!(size = self.target.public().len(), "window server started");
        loop {
            // a shared lock request held back behind a waiting exclusive one is granted when
            // its fairness wait ends, whether or not another command arrives
            let deadline = self.target.next_deadline(Instant::now());
            let mut snapshot = false;
            let command = tokio::select! {
                command = inbox.recv() => match command {
                    Some(command) => Some(*command),
                    None => break,
                },
                // a round of the window's snapshots (this rank's log or another's started it);
                // the sender lives as long as the window's actors
                Ok(()) = self.rounds.changed() => {
                    self.rounds.borrow_and_update();
                    snapshot = true;
                    None
                }
                () = async {
                    match deadline {
                        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
                        None => std::future::pending().await,
                    }
                } => {
                    self.target.tick(Instant::now());
                    None
                }
            };
            let before = self.target.public().len() as u64;
            let mut turn = Turn::default();
            if let Some(command) = command {
                self.take(command, &mut turn);
                // what else is already waiting is handled in the same turn (a batch's
                // operation and flush come together): one pass of the effects for all
                while !turn.stopping && turn.commands < TURN {
                    let Ok(command) = inbox.try_recv() else {
                        break;
                    };
                    self.take(*command, &mut turn);
                }
            }
            let Turn {
                abandoning,
                stopping,
                after,
                ..
            } = turn;
            self.report_queues();
            // answers leave after their events: in sync durability, after the commit
            let effects = self.target.take_effects();
            self.carry_out(effects).await;
            for after in after {
                match after {
                    After::Handled(done) => {
                        let _ = done.send(());
                    }
                    After::Revoked(reply, token) => {
                        let _ = reply.send(token);
                    }
                }
            }
            self.log.grew(before, self.target.public().len() as u64);
            if snapshot && !abandoning {
                // behind the events this actor submitted before it
                let copy = self.target.public().to_vec();
                self.audit.snapshot(self.window, self.rank, copy).await;
            }
            if stopping {
                break;
            }
        }
        self.metrics.report_queues(&mut self.reported, 0, 0);
        // before the inbox closes: whoever waits for the actor to stop finds the bytes free
        self.release();
        tracing::debug!("window server stopped");
    }

    /// Hands `command` to the engine as part of `turn`.
    fn take(&mut self, command: Command, turn: &mut Turn) {
        turn.commands += 1;
        turn.abandoning |= matches!(command, Command::Engine(Input::Abandon));
        turn.stopping |= turn.abandoning || matches!(command, Command::Engine(Input::Stop));
        self.metrics.actor_input();
        turn.after.extend(self.handle(command));
    }

    /// Brings the server-wide queue gauges up to date with this actor's queues.
    fn report_queues(&mut self) {
        let (queued, waiters) = (self.target.queued(), self.target.waiting());
        self.metrics
            .report_queues(&mut self.reported, queued, waiters);
    }

    /// Hands a command to the engine; returns what its sender waits for, to be sent once the
    /// effects were carried out.
    fn handle(&mut self, command: Command) -> Option<After> {
        let now = Instant::now();
        match command {
            Command::Engine(Input::Attach { size, at, reply }) => self.attach(size, at, reply, now),
            Command::Engine(input) => self.target.handle(input, now),
            Command::Acknowledged { input, done } => {
                self.target.handle(input, now);
                return Some(After::Handled(done));
            }
            Command::Revoke {
                origin,
                incarnation,
                reason,
                reply,
            } => {
                let token = self.target.revoke(origin, incarnation, &reason, now);
                return Some(After::Revoked(reply, token));
            }
            Command::Read { offset, len, reply } => {
                let public = self.target.public();
                let size = public.len() as u64;
                let start = offset.min(size);
                let end = start.saturating_add(len).min(size);
                let _ = reply.send((public[start as usize..end as usize].to_vec(), size));
            }
            Command::Busy { reply } => {
                let _ = reply.send(self.target.busy());
            }
            Command::Inspect { reply } => {
                let _ = reply.send(self.target.inspect(now));
            }
            Command::Regions { reply } => {
                let _ = reply.send(self.target.attached_regions());
            }
            Command::Written { reply } => {
                let _ = reply.send(target::Segment::nonzero(self.target.public()));
            }
            Command::Follow { out, input } => {
                self.follower = Some(out);
                self.target.handle(input, now);
            }
        }
        None
    }

    /// Dynamic window: gives the server back the bytes the public copy spans (once).
    fn release(&mut self) {
        if let Some(window_bytes) = self.window_bytes.take() {
            window_bytes.give_back(self.target.public().len() as u64);
        }
    }

    /// `MPI_Win_attach`: the bytes the span would grow by are taken from the server's window
    /// bytes first (`MPI_ERR_RMA_ATTACH` when they do not fit, nothing changed), then the
    /// engine attaches; what it did not grow by is given back.
    fn attach(&mut self, size: u64, at: Option<u64>, reply: Reply, now: Instant) {
        // 0 on a static window, which the engine refuses
        let need = self.target.attach_growth(size, at);
        if let Some(window_bytes) = &self.window_bytes {
            if let Err(in_use) = window_bytes.take(need) {
                reply.send(Err(RmaError::new(
                    ErrorClass::RmaAttach,
                    format!(
                        "a region of {size} bytes needs {need} more bytes of the server's window \
                         memory, and windows take {in_use} of its {} bytes",
                        window_bytes.limit()
                    ),
                )));
                return;
            }
        }
        let before = self.target.public().len() as u64;
        self.target.handle(Input::Attach { size, at, reply }, now);
        if let Some(window_bytes) = &self.window_bytes {
            let grown = (self.target.public().len() as u64).saturating_sub(before);
            window_bytes.give_back(need.saturating_sub(grown));
        }
    }

    /// Carries out what the engine decided: the events go to the audit writer stamped with
    /// the time, then the answers (those that wait, after the commit in sync durability; the
    /// lazy ones without starting one).
    async fn carry_out(&mut self, effects: Effects<Reply>) {
        let Effects {
            events,
            updates,
            answers,
            early,
            lazy,
            behind,
            lock_grants,
        } = effects;
        // updates go first: an answer after them may order them before the owner's next call
        let mut sent = self.updates(updates);
        sent.extend(to_wire(answers));
        let mut answers = sent;
        for (lock_type, waited) in lock_grants {
            self.metrics.lock_granted(lock_type, waited);
        }
        // answers behind what this target recorded before go through the writer even when
        // nothing is recorded now
        let vouching = !behind.is_empty();
        answers.extend(to_wire(behind));
        if events.is_empty() && !vouching {
            // nothing to commit first (audit off, or an input that records nothing)
            for (reply, answer) in answers
                .into_iter()
                .chain(to_wire(lazy))
                .chain(to_wire(early))
            {
                reply.send(answer);
            }
            return;
        }
        let events: Vec<Pending> = events
            .into_iter()
            .map(|event| {
                self.log.logged(logged_bytes(&event));
                Pending {
                    window: self.window,
                    rank: self.rank,
                    incarnation: 0,
                    at_ns: self.audit.now(),
                    event,
                }
            })
            .collect();
        self.audit
            .submit_effects(events, answers, to_wire(lazy), to_wire(early))
            .await;
    }

    /// Unified model: the engine's updates as messages to the following session (none when no
    /// session follows; it gets the whole copy when it does).
    fn updates(&self, updates: Vec<Update>) -> Vec<(Reply, Answer)> {
        let Some(out) = &self.follower else {
            return Vec::new();
        };
        updates
            .into_iter()
            .map(|update| {
                let reply = Reply::Direct {
                    id: 0,
                    out: out.clone(),
                    timer: None,
                };
                let message = server_message::Reply::Updated(Updated {
                    window: self.window,
                    segments: onesided_proto::segments_to_wire(update.segments),
                    published: update.published,
                });
                (reply, Ok(message))
            })
            .collect()
    }
}

/// Bytes an event adds to the log towards the next round of snapshots.
pub fn logged_bytes(event: &Event) -> u64 {
    match event {
        Event::Published { data, .. } | Event::Op { data, .. } => EVENT_BYTES + data.len() as u64,
        _ => EVENT_BYTES,
    }
}

fn to_wire(answers: Vec<(Reply, target::Answer)>) -> Vec<(Reply, Answer)> {
    answers
        .into_iter()
        .map(|(reply, answer)| (reply, answer.map(onesided_proto::reply_from_outcome)))
        .collect()
}
