//! A session: one attached rank's bidirectional stream. It runs core's epoch state machine for
//! every window the rank opened, refuses illegal calls, and routes legal ones to the actors of
//! their targets in call order (so messages from one origin to one target stay FIFO).
//!
//! Owns: the rank's origin-side epoch state on the server. Must not: touch window bytes (actors
//! own them) or wait for an actor except through a reply (calls stay pipelined).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use futures::stream::FuturesUnordered;
use futures::StreamExt;
use onesided_core::audit::Event;
use onesided_core::epoch::EpochState;
use onesided_core::origin::{self as admit, Admitted};
use onesided_core::target::{Departure, Input, Segment};
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::call_wire::{call_from_wire, window_of};
use onesided_proto::v1::{
    client_message::Call, server_message, Attached, ClientMessage, Done, ServerMessage,
};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tonic::{Status, Streaming};

use crate::actor::{AccessItem, WindowServerHandle};
use crate::audit::{Durability, Pending as AuditPending};
use crate::metrics::{CallKind, CallTimer, PendingOp};
use crate::registry::{Membership, Registry, WindowEntry};
use crate::reply::{Answer, Collector, Outbound, Reply};

mod barrier;
mod messages;
mod route;
mod windows;

/// A call admitted on an open window, as `route.rs` carries it out.
struct OnWindow {
    /// The window.
    window: u64,
    /// Its description and its ranks' actors.
    entry: Arc<WindowEntry>,
    /// Where the call's answer goes.
    reply: Reply,
    /// This session's rank in the window (its place in the window's group).
    me: u32,
}

struct OpenWindow {
    entry: Arc<WindowEntry>,
    /// This session's rank in the window (its place in the window's group).
    me: u32,
    epoch: EpochState,
    /// The first cseq the client's next marker of persisted rows must name.
    next_cseq: u64,
    /// The last epoch whose closing fence this session entered.
    fenced: Option<u64>,
}

/// A call whose answer the session handles before it goes out.
enum Control {
    /// `test` on a window: a true flag ends the exposure epoch.
    Test(u64),
    /// The world barrier, entered with these windows open.
    Barrier(Vec<u64>),
    /// `MPI_Win_set_info` on this window.
    InfoSet(u64),
    /// `MPI_Win_create`/`MPI_Win_allocate` of the window of this name.
    Created(String),
    /// A point-to-point receive (`false`) or probe (`true`) was matched.
    Received(bool),
}

/// The hasher of the maps keyed by window id that every call looks into: ids are the server's
/// own, so SipHash's resistance to chosen keys buys nothing here, and costs ~280 instructions
/// a lookup.
type IdHasher = foldhash::fast::RandomState;

type Pending = futures::future::BoxFuture<'static, (Control, Reply, Answer)>;

/// A call taken from the stream and not yet handled: it waits behind a call on its window
/// whose answer is still on its way and that the calls after it must wait for
/// ([`Session::hold`]).
struct Queued {
    /// The window it is on (`None`: a call of the session's own).
    window: Option<u64>,
    /// The call's id.
    id: u64,
    /// The call.
    call: Option<Call>,
    /// Its batch and its place in it, if it came in one.
    batch: Option<(Arc<Collector>, usize)>,
}

/// The most calls a session takes from its stream while they wait behind a held call; past
/// it the session reads no more until they are handled (HTTP/2 flow control holds the
/// client back), and the lease does not count that time as the client's silence.
const QUEUED_CALLS: usize = 4096;

/// The server side of one session.
pub struct Session {
    registry: Arc<Registry>,
    member: Membership,
    out: Outbound,
    windows: HashMap<u64, OpenWindow, IdHasher>,
    control: FuturesUnordered<Pending>,
    /// Calls taken from the stream, in order, that wait for a held window (or behind a call
    /// that does).
    queued: VecDeque<Queued>,
    /// Windows whose last call that blocks in MPI (a fence, `MPI_Win_set_info`) is not
    /// answered yet: the calls on that window after it wait in `queued` until its answer went
    /// out, so a client that sends calls ahead of their answers has them taken in order, as if
    /// it had waited. Other windows' calls go on (another task of the client may be using
    /// them, as another thread may in MPI).
    held_windows: HashSet<u64, IdHasher>,
    /// Resolve, each with its window, once a held answer went out (or never will).
    held: FuturesUnordered<futures::future::BoxFuture<'static, u64>>,
    /// While the calls of a batch are handled: where their answers go.
    batch: Option<(Arc<Collector>, usize)>,
    /// While a call is handled: its kind and when it was taken up (for its answer's timer).
    call: Option<(CallKind, std::time::Instant)>,
    /// How many sessions of this rank came before, plus one.
    incarnation: u64,
    /// Ends the session when a newer incarnation of the rank attaches.
    superseded: CancellationToken,
    /// Ends the session when an operator ends it (Admin `EndSession`).
    ended_by_operator: CancellationToken,
    /// Set once this session's departure is handled everywhere.
    ended: tokio::sync::watch::Sender<bool>,
    /// The rank's previous session, to end and wait for before this one starts.
    previous: Option<(CancellationToken, tokio::sync::watch::Receiver<bool>)>,
    /// One permit per operation sent and not yet answered (the answer frees it).
    pending: Arc<Semaphore>,
    /// When the lease lapses, for the web view (`lapse` in `serve` decides).
    lease: Arc<crate::registry::Lease>,
    /// The status the stream failed with (a message over the size limit, one that does not
    /// decode), for the client.
    failure: Option<Status>,
}

/// Why a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// The client closed its stream.
    Closed,
    /// The stream failed (the client's process or connection died).
    Broken,
    /// Nothing arrived for the lease's time.
    Lapsed,
    /// A newer incarnation of the rank attached.
    Superseded,
    /// The server is shutting down.
    Shutdown,
    /// The client left its outbound stream full (it does not read its answers).
    Unread,
    /// An operator ended it (Admin `EndSession`).
    Operator,
}

impl Ending {
    fn reason(self) -> &'static str {
        match self {
            Ending::Closed => Departure::STREAM_ENDED,
            Ending::Broken => "stream broke",
            Ending::Lapsed => "lease lapsed",
            Ending::Superseded => "superseded by a new incarnation",
            Ending::Shutdown => "server shutdown",
            Ending::Unread => "answers unread",
            Ending::Operator => "ended by an operator",
        }
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("world", &self.member.world)
            .field("rank", &self.member.rank)
            .finish_non_exhaustive()
    }
}

/// What the client of an ended session still sends is read and dropped until its answers are
/// gone (the transport took the status the stream ends with, or dropped the stream), for at
/// most `bound`.
///
/// A stream nobody reads costs the whole connection: h2 (0.4.20) counts every small DATA frame
/// it receives against a per-connection budget, freed only when the application reads the
/// frame, and charges frames that arrive after the stream's reading half was dropped without
/// ever freeing them. A client that keeps sending small calls after its session ended (one
/// that does not read its answers, the very client `Ending::Unread` ends) then exhausts the
/// budget and h2 closes the connection with GOAWAY `ENHANCE_YOUR_CALM`: the status that says
/// why the session ended is lost, and every other call on that connection with it. Past
/// `bound` the stream is dropped all the same.
pub async fn drain(
    mut inbound: Streaming<ClientMessage>,
    answered: CancellationToken,
    bound: std::time::Duration,
) {
    let reading = async { while let Ok(Some(_)) = inbound.message().await {} };
    tokio::select! {
        () = reading => {}
        () = answered.cancelled() => {}
        () = tokio::time::sleep(bound) => {}
    }
}

impl Session {
    /// A session of `member`, answering into `out`; given `succeeds`, the session of a client
    /// re-attaching by itself after it lost that incarnation ([`Registry::succeed_session`]).
    ///
    /// # Errors
    /// ABORTED when the rank attached again since the incarnation the client lost.
    pub fn new(
        registry: Arc<Registry>,
        member: Membership,
        out: Outbound,
        succeeds: Option<u64>,
    ) -> Result<Self, Status> {
        let slot = registry
            .succeed_session(&member.world, member.rank, succeeds)
            .map_err(|latest| {
                let why = RmaError::new(
                    ErrorClass::Other,
                    format!(
                        "rank {} of world {:?} attached again (incarnation {latest}) since \
                         incarnation {} was lost: that newer session stays",
                        member.rank,
                        member.world,
                        succeeds.unwrap_or_default()
                    ),
                );
                onesided_proto::status_with_code(tonic::Code::Aborted, &why)
            })?;
        let max_pending = registry
            .limits()
            .max_pending_ops
            .min(Semaphore::MAX_PERMITS);
        Ok(Session {
            pending: Arc::new(Semaphore::new(max_pending)),
            failure: None,
            incarnation: slot.incarnation,
            superseded: slot.superseded,
            ended_by_operator: slot.ended_by_operator,
            ended: slot.ended,
            previous: slot.previous,
            lease: slot.lease,
            registry,
            member,
            out,
            windows: HashMap::default(),
            control: FuturesUnordered::new(),
            queued: VecDeque::new(),
            held_windows: HashSet::default(),
            held: FuturesUnordered::new(),
            batch: None,
            call: None,
        })
    }

    /// Greets the client and serves its calls until the stream ends. Returns the status the
    /// stream failed with, if it failed. `inbound` stays the caller's: what the client still
    /// sends after the session ended must be read ([`drain`]).
    pub async fn run(
        mut self,
        inbound: &mut Streaming<ClientMessage>,
        ended: CancellationToken,
    ) -> Option<Status> {
        let _end_replies = ended.clone().drop_guard();
        let lease = self.registry.lease_ttl();
        if let Some((superseded, mut previous_ended)) = self.previous.take() {
            // the rank's previous session ends and gives up what it held before this one acts
            superseded.cancel();
            let handled = previous_ended.wait_for(|&ended| ended);
            if tokio::time::timeout(lease, handled).await.is_err() {
                tracing::warn!("the previous session of this rank did not end in time");
            }
        }
        self.member.collectives.joined(self.member.rank).await;
        let greeting = ServerMessage {
            id: 0,
            reply: Some(server_message::Reply::Attached(Attached {
                world: self.member.world.clone(),
                rank: self.member.rank,
                ranks: self.member.nranks,
                audited: self.registry.audit().durability() != Durability::Off,
                lease_ttl_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX),
                incarnation: self.incarnation,
            })),
        };
        let ending = if !self.out.send(Ok(greeting)) {
            Ending::Closed
        } else {
            tracing::info!(incarnation = self.incarnation, "session attached");
            self.serve(inbound, &ended, lease).await
        };
        self.depart(ending).await;
        if ending == Ending::Unread {
            let why = crate::limits::exhausted(format!(
                "the client left {} answers unread (the server's limit) and kept calling: the \
                 session ended, its locks were revoked and its pending calls failed, attach again",
                self.registry.limits().outbound_capacity()
            ));
            self.failure = Some(onesided_proto::status_from_rma(&why));
        }
        match ending {
            // a client that re-attaches by itself must tell a newer incarnation of its rank
            // (stay away) from a node letting the world go (attach again, any node redirects)
            Ending::Superseded if self.registry.has_world(&self.member.world) => {
                let why = RmaError::new(
                    ErrorClass::Other,
                    format!(
                        "superseded: rank {} attached again as a newer incarnation",
                        self.member.rank
                    ),
                );
                self.failure = Some(onesided_proto::status_with_code(tonic::Code::Aborted, &why));
            }
            Ending::Superseded => {
                let why = RmaError::new(
                    ErrorClass::Io,
                    format!(
                        "this node no longer serves world {:?} (it moved, its node lost it, or \
                         it was deleted): attach again",
                        self.member.world
                    ),
                );
                self.failure = Some(onesided_proto::status_from_rma(&why));
            }
            Ending::Shutdown => {
                let why = RmaError::new(ErrorClass::Io, "the server is shutting down");
                self.failure = Some(onesided_proto::status_from_rma(&why));
            }
            _ => {}
        }
        if ending == Ending::Operator {
            // the stream ends saying why, after the answers that failed what was pending; the
            // client does not attach again by itself (ABORTED), but the rank's token still
            // serves: attaching again is the program's choice
            let why = RmaError::new(
                ErrorClass::ProcFailed,
                "an operator ended this session (Admin EndSession): its locks were revoked and \
                 its pending calls failed; the rank's token still serves to attach again",
            );
            self.failure = Some(onesided_proto::status_with_code(tonic::Code::Aborted, &why));
        }
        if ending == Ending::Lapsed {
            // the stream ends saying why, after the answers that failed what was pending
            let why = RmaError::new(
                ErrorClass::ProcFailed,
                format!(
                    "the session's lease lapsed: nothing arrived for {} ms (clients send \
                     heartbeats); its locks were revoked and its pending calls failed, attach \
                     again",
                    lease.as_millis()
                ),
            );
            self.failure = Some(onesided_proto::status_from_rma(&why));
        }
        self.failure.take()
    }

    async fn serve(
        &mut self,
        inbound: &mut Streaming<ClientMessage>,
        ended: &CancellationToken,
        lease: std::time::Duration,
    ) -> Ending {
        let superseded = self.superseded.clone();
        let by_operator = self.ended_by_operator.clone();
        let overflow = self.out.overflow();
        // made once and kept registered with their tokens: made again on every turn of the
        // loop, each registered and unregistered itself once per call (~2 000 instructions)
        let (ended, superseded, by_operator, overflow) = (
            ended.cancelled(),
            superseded.cancelled(),
            by_operator.cancelled(),
            overflow.cancelled(),
        );
        tokio::pin!(ended, superseded, by_operator, overflow);
        let lapse = tokio::time::sleep(lease);
        tokio::pin!(lapse);
        self.lease.renew(lapse.deadline());
        loop {
            // while calls wait behind a held one, the stream is read up to a bound, and the
            // client's silence is not timed while it is not read
            let reading = self.queued.len() < QUEUED_CALLS;
            tokio::select! {
                () = &mut ended => {
                    tracing::info!("session closed by shutdown");
                    return Ending::Shutdown;
                }
                () = &mut superseded => {
                    tracing::info!("session superseded by a new incarnation");
                    return Ending::Superseded;
                }
                () = &mut by_operator => {
                    tracing::warn!("session ended by an operator");
                    return Ending::Operator;
                }
                () = &mut overflow => {
                    tracing::warn!("the client does not read its answers: session ended");
                    return Ending::Unread;
                }
                () = &mut lapse, if reading => {
                    tracing::warn!(?lease, "session lease lapsed");
                    return Ending::Lapsed;
                }
                Some(window) = self.held.next(), if !self.held.is_empty() => {
                    self.held_windows.remove(&window);
                    self.run_queued().await;
                    lapse.as_mut().reset(tokio::time::Instant::now() + lease);
                    self.lease.renew(lapse.deadline());
                }
                incoming = inbound.message(), if reading => match incoming {
                    Ok(Some(message)) => {
                        self.dispatch(message).await;
                        // the lease counts the client's silence from here: time this task spent
                        // blocked (a busy actor, the audit writer's back-pressure) is not its
                        lapse.as_mut().reset(tokio::time::Instant::now() + lease);
                        self.lease.renew(lapse.deadline());
                    }
                    Ok(None) => return Ending::Closed,
                    Err(status) => {
                        tracing::debug!(%status, "session stream failed");
                        self.failure = Some(status);
                        return Ending::Broken;
                    }
                },
                Some((control, reply, answer)) = self.control.next(), if !self.control.is_empty() => {
                    let busy = tokio::time::Instant::now();
                    self.finish(control, reply, answer).await;
                    let deadline = lapse.deadline() + busy.elapsed();
                    lapse.as_mut().reset(deadline);
                    self.lease.renew(deadline);
                }
            }
        }
    }

    /// The session ended: every window it had open revokes its locks and drops what it still
    /// had queued (failing, where it took part in fence or PSCW, what needs it), the world
    /// fails collectives waiting for it, and only then may a newer incarnation act.
    async fn depart(&mut self, ending: Ending) {
        let me = self.member.rank;
        let reason = ending.reason();
        // gone: no newer incarnation took over, so nothing it still owed can come
        let vanished = ending != Ending::Superseded
            && self
                .registry
                .is_live(&self.member.world, me, self.incarnation);
        if ending != Ending::Shutdown {
            let mut handled = Vec::new();
            for open in self.windows.values() {
                let active = open.epoch.used_active_target();
                for actor in &open.entry.ranks {
                    let departed = Input::Departed(Departure {
                        origin: open.me,
                        incarnation: self.incarnation,
                        reason: reason.to_string(),
                        active,
                        vanished,
                        fenced: open.fenced,
                    });
                    // sent to every actor first, then awaited: the departures run in parallel
                    if let Ok(answer) = actor.acknowledged(departed).await {
                        handled.push(answer);
                    }
                }
            }
            for handled in handled {
                let _ = handled.await;
            }
            if matches!(ending, Ending::Lapsed | Ending::Operator) {
                // the client may still be reading: the answers that failed its pending calls
                // leave each actor after its departure is handled (a round trip behind it
                // shows they were handed on) and, in sync durability, after their commit
                for open in self.windows.values() {
                    for actor in &open.entry.ranks {
                        let _ = actor.busy().await;
                    }
                }
                self.registry.audit().flush().await;
            }
        }
        let open: Vec<u64> = self.windows.keys().copied().collect();
        for window in open {
            if ending != Ending::Closed && ending != Ending::Shutdown {
                let departed = Event::Departed {
                    incarnation: self.incarnation,
                    reason: reason.to_string(),
                };
                self.log(window, departed, None).await;
            }
            self.log(window, Event::Detach, None).await;
        }
        self.registry
            .end_session(&self.member.world, me, self.incarnation);
        if ending != Ending::Shutdown {
            self.member
                .collectives
                .departed((me, self.incarnation), reason, vanished)
                .await;
        }
        self.ended.send_replace(true);
        tracing::info!(reason, "session detached");
    }

    fn reply(&self, id: u64) -> Reply {
        let timer = self.call.map(|(kind, started)| {
            CallTimer::new(Arc::clone(self.registry.metrics()), kind, started)
        });
        match &self.batch {
            Some((batch, index)) => Reply::Collect {
                index: *index,
                batch: Arc::clone(batch),
                timer,
            },
            None => Reply::Direct {
                id,
                out: self.out.clone(),
                timer,
            },
        }
    }

    /// Takes one message from the stream: its calls are handled in order, now or, behind a
    /// held call, once its answer went out.
    async fn dispatch(&mut self, message: ClientMessage) {
        let id = message.id;
        match message.call {
            Some(Call::Batch(batch)) => {
                self.registry.metrics().count_call(CallKind::Batch);
                let ids: Vec<u64> = batch.calls.iter().map(|call| call.id).collect();
                if ids.is_empty() {
                    self.reply(id).send(Ok(server_message::Reply::Batched(
                        onesided_proto::v1::Batched::default(),
                    )));
                    return;
                }
                let collector = Collector::new(id, ids, self.out.clone());
                if let Some(refusal) = self.over_budget(&batch.calls) {
                    // all or nothing: a batch the budget cannot take is refused whole, in one
                    // reply, and changes nothing
                    for index in 0..batch.calls.len() {
                        self.batch = Some((Arc::clone(&collector), index));
                        self.reply(0).send(Err(refusal.clone()));
                    }
                    self.batch = None;
                    return;
                }
                for (index, inner) in batch.calls.into_iter().enumerate() {
                    self.queued.push_back(Queued {
                        window: inner.call.as_ref().and_then(window_of),
                        id: inner.id,
                        call: inner.call,
                        batch: Some((Arc::clone(&collector), index)),
                    });
                }
            }
            // it only keeps the lease alive, which any message does: it need not wait its turn
            Some(Call::Heartbeat(_)) if !self.queued.is_empty() => {
                self.registry.metrics().count_call(CallKind::Heartbeat);
                return;
            }
            call => self.queued.push_back(Queued {
                window: call.as_ref().and_then(window_of),
                id,
                call,
                batch: None,
            }),
        }
        self.run_queued().await;
    }

    /// The refusal of a batch whose operations, with those already unanswered or waiting in
    /// `queued`, are more than the session's pending-operation budget.
    fn over_budget(&self, calls: &[ClientMessage]) -> Option<RmaError> {
        let ops = |call: Option<&Call>| matches!(call, Some(Call::Op(_)));
        let batch = calls.iter().filter(|call| ops(call.call.as_ref())).count();
        let queued = self
            .queued
            .iter()
            .filter(|queued| ops(queued.call.as_ref()))
            .count();
        let free = self.pending.available_permits();
        (batch > 0 && batch + queued > free).then(|| RmaError {
            unchanged: true,
            ..crate::limits::exhausted(format!(
                "this batch has {batch} operations and the session room for {} more \
                 unanswered ones (the server's limit is {}): the batch was refused whole and \
                 changed nothing",
                free.saturating_sub(queued),
                self.registry.limits().max_pending_ops
            ))
        })
    }

    /// Handles the queued calls that may go, in order: a call on a held window waits, and so
    /// does every later call on that window; a call of the session's own waits for every call
    /// before it, and the calls after it for it.
    async fn run_queued(&mut self) {
        let mut waiting: HashSet<u64, IdHasher> = HashSet::default();
        let mut at = 0;
        while at < self.queued.len() {
            let blocked = match self.queued[at].window {
                Some(window) => self.held_windows.contains(&window) || waiting.contains(&window),
                None => at > 0,
            };
            if blocked {
                match self.queued[at].window {
                    Some(window) => {
                        waiting.insert(window);
                    }
                    // nothing after a session call waiting its turn may pass it
                    None => break,
                }
                at += 1;
                continue;
            }
            let Some(Queued {
                id, call, batch, ..
            }) = self.queued.remove(at)
            else {
                break;
            };
            self.batch = batch;
            match call {
                Some(Call::Batch(_)) => self
                    .reply(id)
                    .send(Err(RmaError::new(ErrorClass::Arg, "batches do not nest"))),
                call => self.dispatch_one(id, call).await,
            }
            self.batch = None;
        }
    }

    /// `reply` answers a call on `window` that the calls after it on that window must wait
    /// for (it blocks in MPI): they are handled once it was sent (or dropped, when it never
    /// will be).
    fn hold(&mut self, window: u64, reply: Reply) -> Reply {
        let (sent, held) = tokio::sync::oneshot::channel::<()>();
        self.held_windows.insert(window);
        self.held.push(Box::pin(async move {
            let _ = held.await;
            window
        }));
        Reply::Then {
            reply: Box::new(reply),
            sent,
        }
    }

    async fn dispatch_one(&mut self, id: u64, call: Option<Call>) {
        let Some(call) = call else {
            self.reply(id).send(Err(RmaError::new(
                ErrorClass::Arg,
                "message without a call",
            )));
            return;
        };
        let kind = CallKind::of(&call);
        let name = kind.name();
        self.registry.metrics().count_call(kind);
        self.call = Some((kind, std::time::Instant::now()));
        if self.registry.audit().is_down() && !matches!(call, Call::Heartbeat(_)) {
            // nothing may happen that the log cannot take: refused before any state changes
            self.reply(id).send(Err(RmaError::unchanged(
                ErrorClass::Io,
                "the audit store is unavailable; the call changed nothing, try again",
            )));
            self.call = None;
            return;
        }
        if !matches!(call, Call::Heartbeat(_))
            && !self.registry.placement().surely_serves(&self.member.world)
        {
            // a node paused past its lease may have lost the world without knowing yet: it
            // opens, locks and answers nothing of it before the placement says it is still
            // this node's (a look at its clock while the lease is surely current)
            let registry = Arc::clone(&self.registry);
            let confirmed = registry
                .placement()
                .confirm(&self.member.world, &registry)
                .await;
            if !matches!(confirmed, Ok(true)) {
                let why = match confirmed {
                    Err(error) => format!(
                        "this node cannot reach the cluster's store to confirm it still \
                         serves the world ({error:#}); the call changed nothing, try again"
                    ),
                    Ok(_) => "this node no longer serves the world; the call changed \
                              nothing: attach again (the owner is found by itself)"
                        .to_string(),
                };
                self.reply(id)
                    .send(Err(RmaError::unchanged(ErrorClass::Io, why)));
                self.call = None;
                return;
            }
        }
        if self.held_by_a_move(&call) {
            let registry = Arc::clone(&self.registry);
            let world = self.member.world.clone();
            tracing::debug!("a new epoch waits for the world's move");
            registry.placement().until_drained(&world).await;
            // the move may have failed, and the world stayed
            if !registry.placement().holds(&world) {
                let moved = RmaError::unchanged(
                    ErrorClass::Io,
                    "the world moved to another node while this lock waited for the move; \
                     nothing changed: attach again",
                );
                self.reply(id).send(Err(moved));
                self.call = None;
                return;
            }
        }
        if let Err(error) = self.handle(id, call).await {
            tracing::debug!(call = name, %error, "call refused");
            self.reply(id).send(Err(error));
        }
        self.call = None;
    }

    /// A lock or lock_all about to open this session's first epoch while an admin's move
    /// drains the world must wait until the move is over, so that the epochs open now can
    /// finish and the world goes quiet instead of new ones keeping it busy until the drain's
    /// bound ends them. A session with an epoch open anywhere is not held (its new lock may
    /// be part of the epoch the drain waits for).
    fn held_by_a_move(&self, call: &Call) -> bool {
        if !matches!(call, Call::Lock(_) | Call::LockAll(_)) {
            return false;
        }
        let opening = !self
            .windows
            .values()
            .any(|open| open.epoch.has_open_epoch());
        opening && self.registry.placement().is_draining(&self.member.world)
    }

    /// `event` of this rank on `window` as the audit writer takes it (none with the audit off).
    fn pending(&self, window: u64, event: Event) -> Vec<AuditPending> {
        let audit = self.registry.audit();
        if audit.durability() == Durability::Off {
            return Vec::new();
        }
        vec![AuditPending {
            window,
            rank: self.rank_in(window),
            incarnation: self.incarnation,
            at_ns: audit.now(),
            event,
        }]
    }

    /// Records `event` of this rank on `window` (before anything it causes is forwarded) and
    /// answers `reply` with `Done` — after the commit in sync durability.
    fn log(
        &self,
        window: u64,
        event: Event,
        reply: Option<Reply>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let audit = self.registry.audit().clone();
        let events = self.pending(window, event);
        let answers: Vec<_> = reply
            .map(|reply| (reply, Ok(server_message::Reply::Done(Done {}))))
            .into_iter()
            .collect();
        async move { audit.submit(events, answers).await }
    }

    /// Records `event` of this rank on `window` and answers `reply` with `Done` as soon as the
    /// event is handed to the audit writer, whatever the durability: for calls that complete
    /// nothing a client may rely on (`post`, `start`). Whatever the call causes is recorded
    /// behind the event, in the writer's one channel, so the commit that a completing call
    /// waits for (`complete`, `wait`) covers it too — one sync of the disk per PSCW epoch
    /// instead of one for the opening call and another for the closing one.
    fn log_early(
        &self,
        window: u64,
        event: Event,
        reply: Reply,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let audit = self.registry.audit().clone();
        let events = self.pending(window, event);
        let early = vec![(reply, Ok(server_message::Reply::Done(Done {})))];
        async move {
            audit
                .submit_effects(events, Vec::new(), Vec::new(), early)
                .await
        }
    }

    /// Takes up one call: the session's own (opening a window, the barrier, heartbeats), or
    /// one on a window, which core's `origin::admit` checks and turns into an `Admitted` plan, and
    /// core's `origin::route` into the steps [`Session::carry_out`] takes.
    async fn handle(&mut self, id: u64, call: Call) -> Result<(), RmaError> {
        let me = self.member.rank;
        let window_id = match &call {
            Call::OpenWindow(open) => {
                return self.open_window(id, &open.name, open.with_copy).await
            }
            // it only kept the lease alive, which any message does
            Call::Heartbeat(_) => return Ok(()),
            Call::Batch(_) => {
                return Err(RmaError::new(ErrorClass::Arg, "batches do not nest"));
            }
            Call::Barrier(_) => return self.barrier(id).await,
            Call::Send(send) => return self.send_message(id, send.clone()).await,
            Call::Receive(receive) => return self.receive_message(id, *receive).await,
            Call::SetInfo(set) => return self.set_info(id, set.clone()).await,
            Call::CreateWindow(create) => return self.create_window(id, create.clone()).await,
            call => window_of(call).unwrap_or_default(),
        };
        // an operation takes a slot of the session's pending budget before anything else
        let reply = if matches!(call, Call::Op(_)) {
            let permit = Arc::clone(&self.pending).try_acquire_owned().map_err(|_| {
                crate::limits::exhausted(format!(
                    "this session has {} operations unanswered, the server's limit",
                    self.registry.limits().max_pending_ops
                ))
            })?;
            Reply::Counted {
                reply: Box::new(self.reply(id)),
                permit: PendingOp::new(permit, self.registry.metrics()),
            }
        } else {
            self.reply(id)
        };
        // ranks are numbered in the window's group
        let me = self.windows.get(&window_id).map_or(me, |open| open.me);
        let admitted = admit::admit(&mut Opened(&mut self.windows), me, call_from_wire(call)?)?;
        // admission found the window open
        let Some(entry) = self
            .windows
            .get(&window_id)
            .map(|open| Arc::clone(&open.entry))
        else {
            return Err(RmaError::new(ErrorClass::Win, "the window is not open"));
        };
        // a fence's answer holds the session's next calls on the window until it went out
        let reply = if matches!(admitted, Admitted::Fence { .. }) {
            self.hold(window_id, reply)
        } else {
            reply
        };
        let on = OnWindow {
            window: window_id,
            entry,
            reply,
            me,
        };
        let issuer = admit::Issuer {
            id,
            incarnation: self.incarnation,
            me,
            recording: self.registry.audit().durability() != Durability::Off,
        };
        self.carry_out(on, admit::route(admitted, issuer)).await
    }

    /// A call whose answer came back to the session: handled, then answered.
    async fn finish(&mut self, control: Control, reply: Reply, answer: Answer) {
        match control {
            Control::Test(window) => self.tested(window, reply, answer),
            Control::Barrier(windows) => self.barrier_exited(windows, reply, answer).await,
            Control::InfoSet(window) => self.info_set(window, reply, answer).await,
            Control::Created(name) => self.created(name, reply, answer).await,
            Control::Received(probe) => self.message_received(probe, reply, answer).await,
        }
    }

    /// This session's rank and incarnation, as the origin of what it sends.
    fn origin(&self, me: u32) -> (u32, u64) {
        (me, self.incarnation)
    }

    /// This session's rank in `window` (its world rank for a window not open here).
    fn rank_in(&self, window: u64) -> u32 {
        self.windows
            .get(&window)
            .map_or(self.member.rank, |open| open.me)
    }

    /// [`Session::come_back`] from the world's collectives: a world deleted meanwhile answers
    /// `MPI_ERR_OTHER`.
    fn back_from_world(
        &mut self,
        control: Control,
        reply: Reply,
        answer: tokio::sync::oneshot::Receiver<Answer>,
    ) {
        let gone = RmaError::new(ErrorClass::Other, "the world was deleted");
        self.come_back(control, reply, answer, gone);
    }

    /// Waits, beside the session's calls, for `answer`, which comes back to this session
    /// before it goes out to `reply`; `gone` is the error when its sender was dropped.
    fn come_back(
        &mut self,
        control: Control,
        reply: Reply,
        answer: tokio::sync::oneshot::Receiver<Answer>,
        gone: RmaError,
    ) {
        self.control.push(Box::pin(async move {
            let answer = answer.await.unwrap_or(Err(gone));
            (control, reply, answer)
        }));
    }
}

/// The session's open windows, as admission reads them.
struct Opened<'a>(&'a mut HashMap<u64, OpenWindow, IdHasher>);

impl admit::OpenWindows for Opened<'_> {
    fn open(&mut self, id: u64) -> Option<admit::OpenState<'_>> {
        self.0.get_mut(&id).map(|open| admit::OpenState {
            desc: &open.entry.desc,
            epoch: &mut open.epoch,
            next_cseq: &mut open.next_cseq,
        })
    }
}

/// Sends `item` from `(rank, incarnation)` to `target`.
async fn access(
    target: &WindowServerHandle,
    (origin, incarnation): (u32, u64),
    item: AccessItem,
) -> Result<(), RmaError> {
    target
        .send(Input::Access {
            origin,
            incarnation,
            item,
        })
        .await
}

async fn push(own: &WindowServerHandle, segments: Vec<Segment>) -> Result<(), RmaError> {
    if segments.is_empty() {
        return Ok(());
    }
    own.send(Input::Push { segments }).await
}
