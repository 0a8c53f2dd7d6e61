//! A session: this process attached as one rank of a world, over one bidirectional stream.
//! Calls are written in order and pipelined; each reply finds its caller by id.
//!
//! The session records what only it sees (local loads and stores, returns of blocking calls,
//! flush_local) in the audit log: shipped over the stream, or — given a database URL —
//! written to the store by [`crate::client_events`], with only a marker shipped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use onesided_proto::v1::client_message::Call;
use onesided_proto::v1::rma_client::RmaClient;
use onesided_proto::v1::{
    server_message::Reply, Barrier, Batch, ClientMessage, Heartbeat, OpenWindow, Record,
    ServerMessage,
};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::UnboundedReceiverStream;

pub use crate::client_events::AUDIT_DATABASE_URL_ENV;

use crate::admin::desc_from_wire;
use crate::busy_poll::BusyPoll;
use crate::client_events::ClientEventWriter;
use crate::connect::{Bearer, Claim, Endpoint};
use crate::error::{Error, Result};
use crate::window::{take_accesses, State, Window};
use onesided_core::audit::Event as AuditEvent;

type Waiter = oneshot::Sender<Result<Reply>>;

#[derive(Debug, Default)]
struct Waiters {
    by_id: HashMap<u64, Waiter>,
    /// Callers of calls that were coalesced into the call with this id: answered with it.
    joined: HashMap<u64, Vec<Waiter>>,
    closed: Option<Error>,
}

/// Calls whose MPI counterparts may be enabled as late as the closing synchronization
/// (operations, lazy lock requests): they wait here and travel with the next call that is sent,
/// as one batch message.
#[derive(Debug, Default)]
struct Deferred {
    calls: Vec<ClientMessage>,
    bytes: usize,
}

/// Deferred calls are sent once they carry this many bytes of data, so bulk transfers keep
/// flowing.
const DEFER_BYTES: usize = 64 * 1024;

/// Deferred calls are sent once there are this many.
const DEFER_CALLS: usize = 256;

/// Messages this session wrote and read on its stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireStats {
    /// Messages sent to the server.
    pub sent: u64,
    /// Messages received from the server (the greeting included).
    pub received: u64,
}

#[derive(Debug)]
struct Inner {
    world: String,
    rank: u32,
    nranks: u32,
    audited: bool,
    incarnation: u64,
    /// Given a database URL: the writer of this session's own audit rows.
    persisted: Option<ClientEventWriter>,
    outbound: mpsc::UnboundedSender<ClientMessage>,
    next_id: AtomicU64,
    waiters: Arc<Mutex<Waiters>>,
    deferred: Mutex<Deferred>,
    /// The open windows' states, whose pending accesses a barrier notes first.
    windows: Mutex<Vec<(u64, Weak<Mutex<State>>)>>,
    sent: AtomicU64,
    received: Arc<AtomicU64>,
    reader: tokio::task::JoinHandle<()>,
    heartbeat: tokio::task::JoinHandle<()>,
    /// With [`SessionBuilder::busy_poll`]: touched by every message sent and received.
    busy: Option<BusyPoll>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.reader.abort();
        self.heartbeat.abort();
    }
}

/// Keeps the session's lease alive: a heartbeat every third of the lease, whether or not
/// calls are flowing (a heartbeat is a few bytes; tracking idleness would cost every call).
/// It holds the stream only weakly, so dropping the session still ends it.
fn heartbeat(
    outbound: mpsc::WeakUnboundedSender<ClientMessage>,
    lease: std::time::Duration,
) -> tokio::task::JoinHandle<()> {
    let period = (lease / 3).max(std::time::Duration::from_millis(10));
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            let Some(outbound) = outbound.upgrade() else {
                return;
            };
            let beat = ClientMessage {
                id: 0,
                call: Some(Call::Heartbeat(Heartbeat {})),
            };
            if outbound.send(beat).is_err() {
                return;
            }
        }
    })
}

/// An attached rank. Cheap to clone; the stream closes when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct Session {
    inner: Arc<Inner>,
}

/// The reply to one call, once it arrives.
pub(crate) type ReplyFuture = futures::future::BoxFuture<'static, Result<Reply>>;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

fn answer_of(message: ServerMessage) -> Result<Reply> {
    match message.reply {
        Some(Reply::Error(failure)) => Err(Error::from(failure)),
        Some(reply) => Ok(reply),
        None => Err(Error::Protocol("empty reply".into())),
    }
}

fn deliver(waiters: &Mutex<Waiters>, message: ServerMessage) {
    if let Some(Reply::Batched(batched)) = message.reply {
        for reply in batched.replies {
            deliver(waiters, reply);
        }
        return;
    }
    let (waiter, joined) = {
        let mut waiters = lock(waiters);
        let joined = waiters.joined.remove(&message.id).unwrap_or_default();
        (waiters.by_id.remove(&message.id), joined)
    };
    let answer = answer_of(message);
    for other in joined {
        let _ = other.send(answer.clone());
    }
    match waiter {
        Some(waiter) => {
            let _ = waiter.send(answer);
        }
        None => tracing::warn!("reply to no call"),
    }
}

fn data_bytes(call: &Call) -> usize {
    match call {
        Call::Op(op) => op.data.len() + op.compare.len(),
        _ => 0,
    }
}

/// Folds the accumulate `next` into `queued` when it is the same operation on the same elements
/// (window, target, displacement, layout, datatype, op, fencing token; neither request-based)
/// and core says the op folds exactly on that datatype ([`onesided_core::reduce::folds_exactly`]):
/// applying `a ⊕ b` once is then the same as applying `a` and then `b`, nothing of this origin
/// comes between them, and accumulates of other origins interleaving between the two are only
/// one of the orders MPI allows. Returns the id of the call `next` joined.
fn coalesce(queued: &mut ClientMessage, next: &onesided_proto::v1::RmaOp) -> Option<u64> {
    use onesided_core::Op;
    use onesided_proto::v1::OpKind;
    let Some(Call::Op(op)) = &mut queued.call else {
        return None;
    };
    let same = op.kind == OpKind::Accumulate as i32
        && next.kind == op.kind
        && next.window == op.window
        && next.target == op.target
        && next.disp == op.disp
        && next.layout == op.layout
        && next.datatype == op.datatype
        && next.op == op.op
        && next.token == op.token
        && !op.request_based
        && !next.request_based
        && next.data.len() == op.data.len()
        && op.data.len() <= DEFER_BYTES;
    if !same {
        return None;
    }
    let dtype = onesided_core::Datatype::from_code(op.datatype)?;
    let folded = Op::from_code(op.op)?;
    if !onesided_core::reduce::folds_exactly(folded, dtype) {
        return None;
    }
    let mut combined = op.data.to_vec();
    onesided_core::reduce::reduce(folded, dtype, &mut combined, &next.data).ok()?;
    op.data = bytes::Bytes::from(combined);
    Some(queued.id)
}

/// Where a session's own audit events go.
#[derive(Clone, PartialEq, Eq)]
enum AuditDestination {
    /// [`AUDIT_DATABASE_URL_ENV`] when set, else over the session.
    FromEnv,
    /// Written to this database.
    Database(String),
    /// Over the session.
    Ship,
}

/// How to attach: [`Session::builder`].
#[derive(Clone)]
pub struct SessionBuilder {
    server: Endpoint,
    token: String,
    audit: AuditDestination,
    claim: Claim,
    busy_poll: Option<std::time::Duration>,
}

impl std::fmt::Debug for SessionBuilder {
    /// Never prints the token or the database URL (it may hold a password).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let audit = match self.audit {
            AuditDestination::FromEnv => "from the environment",
            AuditDestination::Database(_) => "database",
            AuditDestination::Ship => "shipped",
        };
        f.debug_struct("SessionBuilder")
            .field("server", &self.server)
            .field("audit", &audit)
            .field("busy_poll", &self.busy_poll)
            .finish_non_exhaustive()
    }
}

impl SessionBuilder {
    /// The session writes its own audit events (local loads and stores, returns of blocking
    /// calls, flush_local) to the audit store at `url` (`postgres://…` or `sqlite:…`, the
    /// database the server records into) itself, and ships only a marker naming them. Without
    /// this option, [`AUDIT_DATABASE_URL_ENV`] gives the URL when it is set.
    pub fn audit_database_url(mut self, url: impl Into<String>) -> Self {
        self.audit = AuditDestination::Database(url.into());
        self
    }

    /// The session ships its own audit events over its stream (the default without a URL),
    /// whatever [`AUDIT_DATABASE_URL_ENV`] says.
    pub fn ship_audit_events(mut self) -> Self {
        self.audit = AuditDestination::Ship;
        self
    }

    /// Attaches.
    ///
    /// # Errors
    /// [`Error::Connect`] when nobody answers or TLS fails; UNAUTHENTICATED for a bad token;
    /// [`Error::AuditStore`] when a database URL is given (and the server keeps an audit log)
    /// but the database cannot be opened or has no `client_events` table.
    pub async fn attach(self) -> Result<Session> {
        let database = match self.audit {
            AuditDestination::Database(url) => Some(url),
            AuditDestination::Ship => None,
            AuditDestination::FromEnv => std::env::var(AUDIT_DATABASE_URL_ENV)
                .ok()
                .filter(|url| !url.is_empty()),
        };
        Session::open(
            &self.server,
            &self.token,
            &self.claim,
            database,
            self.busy_poll,
        )
        .await
    }

    /// Busy-polls: after each message the session sends or receives, its runtime keeps polling
    /// for the answer for `budget` instead of parking its thread (as MPI libraries spin before
    /// they block), which saves the wake-up of an idle thread on every round trip at the cost
    /// of up to `budget` of one core's time after each message ([`crate::busy_poll`]; README,
    /// "Busy-polling"). At most [`crate::busy_poll::MAX_BUDGET`]; zero turns it off, the
    /// default.
    pub fn busy_poll(mut self, budget: std::time::Duration) -> Self {
        self.busy_poll = (!budget.is_zero()).then_some(budget.min(crate::busy_poll::MAX_BUDGET));
        self
    }

    /// Has the server check first that the token is of the world and rank `claim` names
    /// (PERMISSION_DENIED otherwise).
    pub fn claim(mut self, claim: &Claim) -> Self {
        self.claim = claim.clone();
        self
    }
}

/// Why one attempt to attach did not give a session.
enum Attach {
    /// A cluster node redirected the session to the node at this address.
    Moved(String),
    /// Anything else.
    Failed(Error),
}

impl From<Error> for Attach {
    fn from(error: Error) -> Self {
        Attach::Failed(error)
    }
}

impl Session {
    /// Attaches to the server (a URL or an [`Endpoint`]) as the rank whose token this is; the
    /// session's own audit events go to the database [`AUDIT_DATABASE_URL_ENV`] names, or over
    /// the session without it ([`Session::builder`] chooses).
    ///
    /// # Errors
    /// As [`SessionBuilder::attach`].
    pub async fn attach(server: impl Into<Endpoint>, token: &str) -> Result<Self> {
        Session::builder(server, token).attach().await
    }

    /// Attaches as the rank whose token this is, after the server checked that it is the world
    /// and rank `claim` names.
    ///
    /// # Errors
    /// As [`Session::attach`]; PERMISSION_DENIED when the token is of another world or rank.
    pub async fn attach_as(
        server: impl Into<Endpoint>,
        token: &str,
        claim: &Claim,
    ) -> Result<Self> {
        Session::builder(server, token).claim(claim).attach().await
    }

    /// A session to attach to the server (a URL or an [`Endpoint`]) with options.
    pub fn builder(server: impl Into<Endpoint>, token: &str) -> SessionBuilder {
        SessionBuilder {
            server: server.into(),
            token: token.to_string(),
            audit: AuditDestination::FromEnv,
            claim: Claim::default(),
            busy_poll: None,
        }
    }

    /// Opens the session; in a cluster, follows the redirect of a node that does not serve
    /// the token's world to the node that does (a few hops at most: the world may move while
    /// the client follows it).
    async fn open(
        server: &Endpoint,
        token: &str,
        claim: &Claim,
        database: Option<String>,
        busy_poll: Option<std::time::Duration>,
    ) -> Result<Self> {
        const MAX_REDIRECTS: usize = 4;
        let mut target = server.clone();
        let mut hops = 0;
        loop {
            match Session::open_at(&target, token, claim, database.clone(), busy_poll).await {
                Err(Attach::Moved(owner)) if hops < MAX_REDIRECTS => {
                    hops += 1;
                    target = server.at(&owner);
                }
                Err(Attach::Moved(owner)) => {
                    return Err(Error::Disconnected(format!(
                        "the world moved {hops} times while attaching (last to {owner}); \
                         attach again"
                    )))
                }
                Err(Attach::Failed(error)) => return Err(error),
                Ok(session) => return Ok(session),
            }
        }
    }

    async fn open_at(
        server: &Endpoint,
        token: &str,
        claim: &Claim,
        database: Option<String>,
        busy_poll: Option<std::time::Duration>,
    ) -> std::result::Result<Self, Attach> {
        let channel = server.channel().await?;
        let credentials = Bearer::new(token)?.claiming(claim)?;
        let mut client = RmaClient::with_interceptor(channel, credentials)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        let (outbound, requests) = mpsc::unbounded_channel();
        // attaching needs only the server: bounded by the endpoint's timeout, up to the
        // greeting (never the stream's life, so no grpc-timeout)
        let (mut inbound, greeting) = server
            .call_limit()
            .bound(async {
                let opened = client.session(UnboundedReceiverStream::new(requests)).await;
                let mut inbound = match opened {
                    Ok(response) => response.into_inner(),
                    Err(status) => {
                        // a cluster node that does not serve the world names the one that does
                        let owner = status
                            .metadata()
                            .get(onesided_proto::OWNER)
                            .and_then(|value| value.to_str().ok())
                            .map(str::to_string);
                        return Ok(Err(match owner {
                            Some(owner) => Attach::Moved(owner),
                            None => Attach::Failed(status.into()),
                        }));
                    }
                };
                let greeting = inbound.message().await?;
                Ok::<_, Error>(Ok((inbound, greeting)))
            })
            .await??;
        let greeting =
            greeting.ok_or_else(|| Error::Disconnected("the server closed the session".into()))?;
        let Some(Reply::Attached(attached)) = greeting.reply else {
            return Err(Error::Protocol("the session did not start with a greeting".into()).into());
        };
        let persisted = match database {
            // a server that does not say the session's incarnation cannot name client rows
            Some(_) if attached.audited && attached.incarnation == 0 => {
                return Err(Error::AuditStore(
                    "the server does not record client rows (it is older than this client)".into(),
                )
                .into());
            }
            Some(database) if attached.audited => {
                Some(ClientEventWriter::open(&database, attached.rank, attached.incarnation).await?)
            }
            _ => None,
        };
        let waiters = Arc::new(Mutex::new(Waiters::default()));
        let reader_waiters = Arc::clone(&waiters);
        let received = Arc::new(AtomicU64::new(1));
        let reader_received = Arc::clone(&received);
        let busy = busy_poll.or(server.busy_poll_budget()).map(BusyPoll::start);
        let reader_busy = busy.clone();
        let reader = tokio::spawn(async move {
            let ended = loop {
                match inbound.message().await {
                    Ok(Some(message)) => {
                        if let Some(busy) = &reader_busy {
                            busy.touch();
                        }
                        reader_received.fetch_add(1, Ordering::Relaxed);
                        deliver(&reader_waiters, message);
                    }
                    Ok(None) => break Error::Disconnected("the server closed the session".into()),
                    // a refusal of the stream itself (a message over the server's size limit)
                    // keeps its class
                    Err(status) if onesided_proto::rma_from_status(&status).is_some() => {
                        break Error::from(status)
                    }
                    Err(status) => break Error::Disconnected(status.message().to_string()),
                }
            };
            let mut waiters = lock(&reader_waiters);
            for (_, waiter) in waiters.by_id.drain() {
                let _ = waiter.send(Err(ended.clone()));
            }
            for (_, joined) in waiters.joined.drain() {
                for waiter in joined {
                    let _ = waiter.send(Err(ended.clone()));
                }
            }
            waiters.closed = Some(ended);
        });
        let lease = match attached.lease_ttl_ms {
            // a server that names no lease keeps sessions without one
            0 => std::time::Duration::from_secs(3600),
            ms => std::time::Duration::from_millis(ms),
        };
        let heartbeat = heartbeat(outbound.downgrade(), lease);
        Ok(Session {
            inner: Arc::new(Inner {
                world: attached.world,
                rank: attached.rank,
                nranks: attached.ranks,
                audited: attached.audited,
                incarnation: attached.incarnation,
                persisted,
                outbound,
                next_id: AtomicU64::new(1),
                waiters,
                deferred: Mutex::new(Deferred::default()),
                windows: Mutex::new(Vec::new()),
                sent: AtomicU64::new(0),
                received,
                reader,
                heartbeat,
                busy,
            }),
        })
    }

    /// The world this session belongs to.
    pub fn world(&self) -> &str {
        &self.inner.world
    }

    /// This session's rank.
    pub fn rank(&self) -> u32 {
        self.inner.rank
    }

    /// The number of ranks of the world.
    pub fn nranks(&self) -> u32 {
        self.inner.nranks
    }

    /// Whether the server keeps an audit log (this session then ships its side of the
    /// history: local loads and stores, and the returns of blocking calls).
    pub fn audited(&self) -> bool {
        self.inner.audited
    }

    /// This session's incarnation of its rank (1 for the rank's first session).
    pub fn incarnation(&self) -> u64 {
        self.inner.incarnation
    }

    /// Whether this session writes its own audit events to the store itself (it was given a
    /// database URL and the server keeps a log) rather than shipping them.
    pub fn persists_audit_events(&self) -> bool {
        self.inner.persisted.is_some()
    }

    /// Messages written and read so far on this session's stream.
    pub fn wire_stats(&self) -> WireStats {
        WireStats {
            sent: self.inner.sent.load(Ordering::Relaxed),
            received: self.inner.received.load(Ordering::Relaxed),
        }
    }

    fn register(&self, call: Call) -> std::result::Result<(ClientMessage, ReplyFuture), Error> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        {
            let mut waiters = lock(&self.inner.waiters);
            if let Some(ended) = &waiters.closed {
                return Err(ended.clone());
            }
            waiters.by_id.insert(id, sender);
        }
        let reply = Box::pin(async move {
            receiver
                .await
                .unwrap_or_else(|_| Err(Error::Disconnected("the session is closed".into())))
        });
        Ok((
            ClientMessage {
                id,
                call: Some(call),
            },
            reply,
        ))
    }

    /// Writes deferred calls, then `message` if any, as one message (a batch when there are
    /// several). The deferred lock is held so that nothing overtakes.
    fn write(&self, deferred: &mut Deferred, message: Option<ClientMessage>) {
        let mut calls = std::mem::take(&mut deferred.calls);
        deferred.bytes = 0;
        calls.extend(message);
        let message = match calls.len() {
            0 => return,
            1 => calls.pop().expect("one call"),
            _ => ClientMessage {
                id: self.inner.next_id.fetch_add(1, Ordering::Relaxed),
                call: Some(Call::Batch(Batch { calls })),
            },
        };
        self.inner.sent.fetch_add(1, Ordering::Relaxed);
        if let Some(busy) = &self.inner.busy {
            busy.touch();
        }
        if self.inner.outbound.send(message).is_err() {
            // the reader fails every waiter when the stream ends
            tracing::debug!("write to a closed session");
        }
    }

    /// Sends `call` now, after (and with) every deferred call, and returns its reply's future.
    /// When the session persists its own audit events, the reply also waits until the rows
    /// handed to the writer so far are committed (in parallel with the call), so that a call
    /// returns only once the client events before it are stored.
    pub(crate) fn call(&self, call: Call) -> ReplyFuture {
        match self.register(call) {
            Ok((message, reply)) => {
                {
                    let mut deferred = lock(&self.inner.deferred);
                    self.write(&mut deferred, Some(message));
                }
                let Some(writer) = self.inner.persisted.clone() else {
                    return reply;
                };
                let ticket = writer.submitted();
                Box::pin(async move {
                    let answer = reply.await;
                    writer.committed(ticket).await?;
                    answer
                })
            }
            Err(ended) => Box::pin(async move { Err(ended) }),
        }
    }

    /// Queues `call` to travel with the next call sent (or sends it when enough is queued).
    /// An accumulate that only repeats the one queued just before it, where the rules allow
    /// ([`coalesce`]), joins it instead: one operation travels, and both callers get its answer.
    pub(crate) fn defer(&self, call: Call) -> ReplyFuture {
        if let Call::Op(op) = &call {
            let mut deferred = lock(&self.inner.deferred);
            if let Some(joined) = deferred
                .calls
                .last_mut()
                .and_then(|last| coalesce(last, op))
            {
                return self.join(joined);
            }
        }
        let bytes = data_bytes(&call);
        match self.register(call) {
            Ok((message, reply)) => {
                let mut deferred = lock(&self.inner.deferred);
                deferred.calls.push(message);
                deferred.bytes += bytes;
                if deferred.bytes >= DEFER_BYTES || deferred.calls.len() >= DEFER_CALLS {
                    self.write(&mut deferred, None);
                }
                reply
            }
            Err(ended) => Box::pin(async move { Err(ended) }),
        }
    }

    /// A reply future for a caller whose call was coalesced into the call `id`.
    fn join(&self, id: u64) -> ReplyFuture {
        let (sender, receiver) = oneshot::channel();
        {
            let mut waiters = lock(&self.inner.waiters);
            if let Some(ended) = &waiters.closed {
                let ended = ended.clone();
                return Box::pin(async move { Err(ended) });
            }
            waiters.joined.entry(id).or_default().push(sender);
        }
        Box::pin(async move {
            receiver
                .await
                .unwrap_or_else(|_| Err(Error::Disconnected("the session is closed".into())))
        })
    }

    /// Remembers an open window so that session calls note its pending accesses first.
    pub(crate) fn watch(&self, window: u64, state: Weak<Mutex<State>>) {
        let mut windows = lock(&self.inner.windows);
        windows.retain(|(_, state)| state.strong_count() > 0);
        windows.push((window, state));
    }

    /// Ships `events` of `window` to the audit log with the next call — or, when the session
    /// persists them itself, hands them to its writer and ships their marker (nothing when the
    /// server keeps no log).
    pub(crate) fn record(&self, window: u64, events: Vec<AuditEvent>) {
        if !self.audited() || events.is_empty() {
            return;
        }
        // the answer only says it was recorded; a failure shows in the log, not here
        match &self.inner.persisted {
            Some(writer) => writer.append(window, events, |rows| {
                drop(self.defer(Call::Record(Record {
                    window,
                    events: Vec::new(),
                    rows: Some(rows),
                })));
            }),
            None => {
                // within the server's bounds per message
                for chunk in onesided_proto::recorded_chunks(events) {
                    let call = Call::Record(Record {
                        window,
                        events: chunk.iter().map(AuditEvent::to_json).collect(),
                        rows: None,
                    });
                    drop(self.defer(call));
                }
            }
        }
    }

    /// Sends every deferred call now.
    pub(crate) fn flush_deferred(&self) {
        let mut deferred = lock(&self.inner.deferred);
        self.write(&mut deferred, None);
    }

    /// Opens the window `name` of this world. A window is opened once per session (its epoch
    /// state lives in the session until it is freed).
    ///
    /// # Errors
    /// `MPI_ERR_WIN` for an unknown window; `MPI_ERR_ARG` when it is already open here.
    pub async fn window(&self, name: &str) -> Result<Window> {
        let reply = self
            .call(Call::OpenWindow(OpenWindow {
                name: name.to_string(),
            }))
            .await?;
        let Reply::Window(desc) = reply else {
            return Err(Error::Protocol(
                "open_window answered without a window".into(),
            ));
        };
        Ok(Window::new(self.clone(), desc_from_wire(desc)?))
    }

    /// Ends the session cleanly: ships every open window's pending loads and stores (what a
    /// rank did after its last call) and every deferred call, and waits until the server has
    /// answered them — in sync durability, until they are in the audit log — and, when the
    /// session persists its own events, until its writer has committed them. Dropping a
    /// session instead may lose them.
    ///
    /// # Errors
    /// When the session already ended.
    pub async fn close(self) -> Result<()> {
        let watched: Vec<_> = lock(&self.inner.windows).clone();
        for (window, state) in &watched {
            if let Some(state) = state.upgrade() {
                self.record(*window, take_accesses(&state));
            }
        }
        // an empty record is answered once everything before it is in the audit log
        let Some((window, _)) = watched.first() else {
            self.flush_deferred();
            return Ok(());
        };
        if !self.audited() {
            self.flush_deferred();
            return Ok(());
        }
        let drained = self
            .call(Call::Record(Record {
                window: *window,
                events: Vec::new(),
                rows: None,
            }))
            .await;
        match drained {
            Err(error) if error.class() == Some(onesided_core::ErrorClass::Win) => Ok(()),
            other => other.map(drop),
        }
    }

    /// `MPI_Barrier` over the world: returns once every rank has called it.
    ///
    /// # Errors
    /// When the session ends.
    pub async fn barrier(&self) -> Result<()> {
        let windows: Vec<_> = lock(&self.inner.windows)
            .iter()
            .filter_map(|(id, state)| state.upgrade().map(|state| (*id, state)))
            .collect();
        for (id, state) in windows {
            self.record(id, take_accesses(&state));
        }
        self.call(Call::Barrier(Barrier {})).await?;
        Ok(())
    }
}
