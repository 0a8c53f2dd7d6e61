//! A session: this process attached as one rank of a world, over one bidirectional stream.
//! Calls are written in order and pipelined; each reply finds its caller by id.
//!
//! The session records what only it sees (local loads and stores, returns of blocking calls,
//! flush_local) in the audit log: shipped over the stream, or — given a database URL —
//! written to the store by [`crate::client_events`], with only a marker shipped.
//!
//! Owns: the rank's stream and its incarnations (`Link`: attaching, following a cluster's
//! redirects, the greeting, a heartbeat every third of the lease; the supervisor that, when a
//! stream is lost in a way attaching again may mend, attaches as its successor, reopens every
//! open window and swaps the link in, ending the windows' epochs); the order of calls on the
//! wire (ids, the lock that orders sends, deferred calls sent in one batch with the next call
//! or at `DEFER_BYTES`/`DEFER_CALLS`, `coalesce` of an identical accumulate where core's
//! `folds_exactly` allows); matching each reply to its caller; where the rank's own events go;
//! and `SessionBuilder`, `NewWindow`, `barrier` and `close`. Must not: decide an MPI rule
//! (each `Window` runs core's `EpochState`), hold a window's private copy (the window does),
//! run SQL itself (`client_events` does), or attach again after a final refusal (a newer
//! incarnation, a refused token or claim).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use onesided_proto::v1::client_message::Call;
use onesided_proto::v1::rma_client::RmaClient;
use onesided_proto::v1::{
    self, server_message::Reply, Barrier, Batch, ClientMessage, Heartbeat, OpenWindow, Record,
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
    /// The stream of the current incarnation; replaced when the session attaches again by
    /// itself ([`SessionBuilder::reattach_within`]). Swapped only under `deferred`'s lock.
    link: Mutex<Arc<Link>>,
    next_id: AtomicU64,
    deferred: Mutex<Deferred>,
    /// The open windows, whose pending accesses a barrier notes first and which a session
    /// that attaches again reopens.
    windows: Arc<Mutex<Vec<Watched>>>,
    sent: AtomicU64,
    received: Arc<AtomicU64>,
    /// With [`SessionBuilder::busy_poll`]: touched by every message sent and received.
    busy: Option<BusyPoll>,
    /// How to attach again when the stream is lost; `None`: the session ends with it.
    reattach: Option<Reattach>,
    /// Watches the stream and attaches again when it is lost.
    supervisor: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(supervisor) = lock(&self.supervisor).take() {
            supervisor.abort();
        }
    }
}

/// An open window as the session knows it.
#[derive(Clone, Debug)]
struct Watched {
    id: u64,
    name: String,
    state: Weak<Mutex<State>>,
}

/// One incarnation's stream: what is written to it, who waits for its answers, and the tasks
/// that read it and keep its lease.
#[derive(Debug)]
struct Link {
    incarnation: u64,
    /// Given a database URL: the writer of this incarnation's own audit rows.
    persisted: Option<ClientEventWriter>,
    outbound: mpsc::UnboundedSender<ClientMessage>,
    waiters: Arc<Mutex<Waiters>>,
    reader: tokio::task::JoinHandle<()>,
    heartbeat: tokio::task::JoinHandle<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.reader.abort();
        self.heartbeat.abort();
    }
}

impl Link {
    /// A waiter for the answer to the call `id`, about to be written to this stream.
    ///
    /// # Errors
    /// How the stream ended, when it has.
    fn register(&self, id: u64) -> std::result::Result<ReplyFuture, Error> {
        let (sender, receiver) = oneshot::channel();
        {
            let mut waiters = lock(&self.waiters);
            if let Some(ended) = &waiters.closed {
                return Err(ended.clone());
            }
            waiters.by_id.insert(id, sender);
        }
        Ok(Box::pin(async move {
            receiver
                .await
                .unwrap_or_else(|_| Err(Error::Disconnected("the session is closed".into())))
        }))
    }

    /// A reply future for a caller whose call was coalesced into the call `id`.
    fn join(&self, id: u64) -> ReplyFuture {
        let (sender, receiver) = oneshot::channel();
        {
            let mut waiters = lock(&self.waiters);
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
}

/// How a stream ended, as its reader saw it.
#[derive(Debug)]
struct Lost {
    /// What the calls still waiting on it were failed with.
    error: Error,
    /// Whether attaching again may give the rank back: the node died or the connection broke,
    /// or the node let the world go or shut down. Not when a newer incarnation of the rank
    /// attached, the lease lapsed, or the server refused the stream.
    reattach: bool,
}

/// What a session needs to attach again by itself.
#[derive(Clone)]
struct Reattach {
    server: Endpoint,
    token: String,
    claim: Claim,
    database: Option<String>,
    /// How long to keep trying after the stream was lost.
    within: std::time::Duration,
    /// The session's open windows (the reader applies unified windows' updates to them).
    windows: Arc<Mutex<Vec<Watched>>>,
}

impl std::fmt::Debug for Reattach {
    /// Never prints the token or the database URL.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reattach")
            .field("server", &self.server)
            .field("within", &self.within)
            .finish_non_exhaustive()
    }
}

/// How long a session keeps trying to attach again after its stream was lost, unless
/// [`SessionBuilder::reattach_within`] says otherwise: long enough for a cluster to take a dead
/// node's worlds up with its default 5 s node lease, several times over.
pub const DEFAULT_REATTACH_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

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

/// Unified model: a change of a followed public copy, into the window's private copy.
fn follow_update(windows: &Mutex<Vec<Watched>>, updated: v1::Updated) {
    let state = lock(windows)
        .iter()
        .find(|window| window.id == updated.window)
        .and_then(|window| window.state.upgrade());
    match state {
        Some(state) => crate::window::apply_update(&mut lock(&state), updated),
        None => tracing::debug!(window = updated.window, "update of a window not open here"),
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

/// Info pairs as the wire carries them.
pub(crate) fn info_entries(info: &[(&str, &str)]) -> Vec<v1::InfoEntry> {
    info.iter()
        .map(|(key, value)| v1::InfoEntry {
            key: (*key).to_string(),
            value: (*value).to_string(),
        })
        .collect()
}

/// One rank's arguments to `MPI_Win_allocate`/`MPI_Win_create` ([`Session::create`]): its own
/// size and disp_unit, and what every member gives alike (name, group, flavor, model, info).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewWindow {
    name: String,
    size: u64,
    disp_unit: u32,
    flavor: crate::Flavor,
    model: crate::MemoryModel,
    info: Vec<(String, String)>,
    group: Vec<u32>,
}

impl NewWindow {
    /// Window `name`, this rank exposing `size` bytes with `disp_unit`; allocated, of the
    /// separate model, no info, over the whole world.
    pub fn new(name: &str, size: u64, disp_unit: u32) -> Self {
        NewWindow {
            name: name.to_string(),
            size,
            disp_unit,
            flavor: crate::Flavor::Allocate,
            model: crate::MemoryModel::default(),
            info: Vec::new(),
            group: Vec::new(),
        }
    }

    /// How its memory is made (`MPI_Win_create` or `MPI_Win_allocate`).
    #[must_use]
    pub fn flavor(mut self, flavor: crate::Flavor) -> Self {
        self.flavor = flavor;
        self
    }

    /// Its memory model.
    #[must_use]
    pub fn model(mut self, model: crate::MemoryModel) -> Self {
        self.model = model;
        self
    }

    /// Its info keys.
    #[must_use]
    pub fn info(mut self, info: &[(&str, &str)]) -> Self {
        self.info = info
            .iter()
            .map(|(key, value)| ((*key).to_string(), (*value).to_string()))
            .collect();
        self
    }

    /// The world ranks it spans, window rank r being `group[r]`; empty (the default): the
    /// whole world.
    #[must_use]
    pub fn group(mut self, group: &[u32]) -> Self {
        self.group = group.to_vec();
        self
    }
}

/// Info pairs held as strings, as the wire carries them.
pub(crate) fn info_to_wire(info: &[(String, String)]) -> Vec<v1::InfoEntry> {
    info.iter()
        .map(|(key, value)| v1::InfoEntry {
            key: key.clone(),
            value: value.clone(),
        })
        .collect()
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
    /// How long to keep trying to attach again after the stream was lost; `None`: never.
    reattach: Option<std::time::Duration>,
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
            .field("reattach", &self.reattach)
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
            self.reattach,
        )
        .await
    }

    /// How long the session keeps trying to attach again by itself after its stream was lost
    /// ([`DEFAULT_REATTACH_WITHIN`] unless set; zero: never). A stream is lost when the node
    /// serving the world dies or the connection to it breaks, or when the node lets the
    /// world go (it moved, or the node lost its lease) or shuts down. The session then
    /// attaches again — through any of the endpoint's addresses, following redirects to the
    /// node that serves the world now, waiting while a cluster takes a dead node's worlds up
    /// — as a new incarnation of its rank, and reopens its windows, which keep their private
    /// copies and the stores not yet published. What was in flight when the stream was lost
    /// fails (`Error::Disconnected`), and so does the next call of every epoch that was open
    /// then: the epoch is gone, as when a server restarts. A session whose rank attached
    /// again elsewhere (a newer incarnation), whose lease lapsed, or that the server refused
    /// does not come back, nor does one that could not within the bound; a rank's newer
    /// incarnation is never superseded by a session coming back (the server checks which
    /// incarnation it succeeds).
    ///
    /// While it tries, this also lets the first attach wait for a cluster to take a dead
    /// node's world up, instead of failing at once.
    pub fn reattach_within(mut self, within: std::time::Duration) -> Self {
        self.reattach = (!within.is_zero()).then_some(within);
        self
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
    /// A cluster node named the world's node, and that node cannot be reached (it died and
    /// its lease has not expired yet, or it is cut off).
    OwnerUnreachable(Error),
    /// Anything else.
    Failed(Error),
}

impl From<Error> for Attach {
    fn from(error: Error) -> Self {
        Attach::Failed(error)
    }
}

/// The first pause between attempts to attach again, doubled after each failed one up to
/// [`MAX_PAUSE`].
const FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);
const MAX_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);

/// A session's stream, attached: the greeting, the link, and how it will end.
type Opened = (v1::Attached, Link, oneshot::Receiver<Lost>);

/// Attaches once, following the redirects of cluster nodes that do not serve the token's
/// world to the node that does (a few hops at most: the world may move while the client
/// follows it). `succeeds`: the incarnation a session attaching again by itself lost.
async fn connect(
    config: &Reattach,
    succeeds: Option<u64>,
    received: &Arc<AtomicU64>,
    busy: Option<BusyPoll>,
) -> std::result::Result<Opened, Attach> {
    const MAX_REDIRECTS: usize = 4;
    let mut target = config.server.clone();
    let mut hops = 0;
    loop {
        match open_at(&target, config, succeeds, received, busy.clone()).await {
            Err(Attach::Moved(owner)) if hops < MAX_REDIRECTS => {
                hops += 1;
                target = config.server.at(&owner);
            }
            Err(Attach::Moved(owner)) => {
                return Err(Attach::Failed(Error::Disconnected(format!(
                    "the world moved {hops} times while attaching (last to {owner}); attach \
                     again"
                ))))
            }
            // a node named the world's owner, and the owner does not answer
            Err(Attach::Failed(error @ Error::Connect { .. })) if hops > 0 => {
                return Err(Attach::OwnerUnreachable(error))
            }
            other => return other,
        }
    }
}

async fn open_at(
    server: &Endpoint,
    config: &Reattach,
    succeeds: Option<u64>,
    received: &Arc<AtomicU64>,
    busy: Option<BusyPoll>,
) -> std::result::Result<Opened, Attach> {
    let channel = server.channel().await?;
    let credentials = Bearer::new(&config.token)?.claiming(&config.claim)?;
    let mut client = RmaClient::with_interceptor(channel, credentials)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX);
    let (outbound, requests) = mpsc::unbounded_channel();
    // a message without a call ends the stream, after every message written before it
    // ([`Session::close`]): the server then ends the session cleanly
    let requests = tokio_stream::StreamExt::take_while(
        UnboundedReceiverStream::new(requests),
        |message: &ClientMessage| message.call.is_some(),
    );
    let mut request = tonic::Request::new(requests);
    if let Some(succeeds) = succeeds {
        request
            .metadata_mut()
            .insert(onesided_proto::SUCCEEDS, succeeds.into());
    }
    // attaching needs only the server: bounded by the endpoint's timeout, up to the
    // greeting (never the stream's life, so no grpc-timeout)
    let (mut inbound, greeting) = server
        .call_limit()
        .bound(async {
            let mut inbound = match client.session(request).await {
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
    received.fetch_add(1, Ordering::Relaxed);
    let persisted = match &config.database {
        // a server that does not say the session's incarnation cannot name client rows
        Some(_) if attached.audited && attached.incarnation == 0 => {
            return Err(Error::AuditStore(
                "the server does not record client rows (it is older than this client)".into(),
            )
            .into());
        }
        Some(database) if attached.audited => {
            Some(ClientEventWriter::open(database, attached.rank, attached.incarnation).await?)
        }
        _ => None,
    };
    let waiters = Arc::new(Mutex::new(Waiters::default()));
    let reader_waiters = Arc::clone(&waiters);
    let reader_windows = Arc::clone(&config.windows);
    let reader_received = Arc::clone(received);
    let (report, lost) = oneshot::channel();
    let reader = tokio::spawn(async move {
        let ended = loop {
            match inbound.message().await {
                Ok(Some(message)) => {
                    if let Some(busy) = &busy {
                        busy.touch();
                    }
                    reader_received.fetch_add(1, Ordering::Relaxed);
                    match message.reply {
                        Some(Reply::Updated(updated)) if message.id == 0 => {
                            follow_update(&reader_windows, updated);
                        }
                        _ => deliver(&reader_waiters, message),
                    }
                }
                // a server older than re-attaching says nothing: as a newer incarnation
                Ok(None) => {
                    break Lost {
                        error: Error::Disconnected("the server closed the session".into()),
                        reattach: false,
                    }
                }
                Err(status) => break lost_with(status),
            }
        };
        let mut waiters = lock(&reader_waiters);
        for (_, waiter) in waiters.by_id.drain() {
            let _ = waiter.send(Err(ended.error.clone()));
        }
        for (_, joined) in waiters.joined.drain() {
            for waiter in joined {
                let _ = waiter.send(Err(ended.error.clone()));
            }
        }
        waiters.closed = Some(ended.error.clone());
        drop(waiters);
        let _ = report.send(ended);
    });
    let lease = match attached.lease_ttl_ms {
        // a server that names no lease keeps sessions without one
        0 => std::time::Duration::from_secs(3600),
        ms => std::time::Duration::from_millis(ms),
    };
    let heartbeat = heartbeat(outbound.downgrade(), lease);
    let link = Link {
        incarnation: attached.incarnation,
        persisted,
        outbound,
        waiters,
        reader,
        heartbeat,
    };
    Ok((attached, link, lost))
}

/// How a stream that failed with `status` ended.
fn lost_with(status: tonic::Status) -> Lost {
    match onesided_proto::rma_from_status(&status) {
        // the node let the world go (it moved, the node lost its lease) or shuts down
        Some(error) if error.class == onesided_core::ErrorClass::Io => Lost {
            error: Error::Disconnected(status.message().to_string()),
            reattach: true,
        },
        // a newer incarnation of the rank attached
        Some(_) if status.code() == tonic::Code::Aborted => Lost {
            error: Error::Disconnected(status.message().to_string()),
            reattach: false,
        },
        // a refusal of the stream itself (a message over the server's size limit, the
        // lease lapsed) keeps its class
        Some(_) => Lost {
            error: Error::from(status),
            reattach: false,
        },
        // the connection broke: the node died, or the network between
        None => Lost {
            error: Error::Disconnected(status.message().to_string()),
            reattach: true,
        },
    }
}

/// Watches the session's stream; when it is lost in a way that attaching again may mend,
/// attaches again, for as long as the session lives.
async fn supervise(session: Weak<Inner>, mut lost: oneshot::Receiver<Lost>) {
    loop {
        let Ok(ended) = lost.await else {
            return;
        };
        if !ended.reattach {
            return;
        }
        let Some(config) = session.upgrade().and_then(|inner| inner.reattach.clone()) else {
            return;
        };
        tracing::info!(error = %ended.error, "session lost; attaching again");
        match reattach(&session, &config).await {
            Some(next) => lost = next,
            None => return,
        }
    }
}

/// Whether a failure to attach may pass: the server, its node or its world's owner cannot be
/// reached or is not ready yet. Not a refusal of the token, of the claim, or of a session
/// that a newer incarnation replaced.
fn transient(error: &Error) -> bool {
    matches!(
        error.code(),
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
    )
}

/// Attaches again as the successor of the lost incarnation, reopens every open window on the
/// new stream, then puts the stream in place ([`Session::install`]). Gives up (the session
/// then stays ended) when the server refuses for good, when the session was dropped, or after
/// `config.within`. Returns how the new stream will end.
async fn reattach(session: &Weak<Inner>, config: &Reattach) -> Option<oneshot::Receiver<Lost>> {
    let deadline = tokio::time::Instant::now() + config.within;
    let mut pause = FIRST_PAUSE;
    // the newest incarnation this session held: an attempt that attached but could not put
    // its stream in place (a window did not reopen) was one too, and the server now knows it
    let mut succeeds = {
        let inner = session.upgrade()?;
        let incarnation = lock(&inner.link).incarnation;
        incarnation
    };
    loop {
        let (received, busy) = {
            let inner = session.upgrade()?;
            (Arc::clone(&inner.received), inner.busy.clone())
        };
        let failure = match connect(config, Some(succeeds), &received, busy).await {
            Ok((attached, link, lost)) => {
                succeeds = succeeds.max(attached.incarnation);
                let session = Session {
                    inner: session.upgrade()?,
                };
                match session.install(attached, link).await {
                    Ok(()) => {
                        tracing::info!(
                            incarnation = session.incarnation(),
                            "session attached again"
                        );
                        return Some(lost);
                    }
                    Err(error) => error,
                }
            }
            Err(Attach::Failed(error) | Attach::OwnerUnreachable(error)) => error,
            Err(Attach::Moved(_)) => unreachable!("connect follows redirects"),
        };
        let give_up = if !transient(&failure) {
            Some(format!("attaching again was refused: {failure}"))
        } else if tokio::time::Instant::now() + pause >= deadline {
            Some(format!(
                "could not attach again within {:?}: {failure}",
                config.within
            ))
        } else {
            None
        };
        if let Some(why) = give_up {
            tracing::warn!(%why, "session not attached again");
            let inner = session.upgrade()?;
            let link = Arc::clone(&lock(&inner.link));
            lock(&link.waiters).closed = Some(Error::Disconnected(why));
            return None;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
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
            reattach: Some(DEFAULT_REATTACH_WITHIN),
        }
    }

    /// Opens the session (following redirects, [`connect`]); in a cluster, when the node
    /// that serves the token's world cannot be reached — it died and its lease has not
    /// expired yet — tries again until another node took the world up, for as long as the
    /// session would try to attach again by itself.
    async fn open(
        server: &Endpoint,
        token: &str,
        claim: &Claim,
        database: Option<String>,
        busy_poll: Option<std::time::Duration>,
        reattach: Option<std::time::Duration>,
    ) -> Result<Self> {
        let busy = busy_poll.or(server.busy_poll_budget()).map(BusyPoll::start);
        let received = Arc::new(AtomicU64::new(0));
        let windows = Arc::new(Mutex::new(Vec::new()));
        let config = Reattach {
            windows: Arc::clone(&windows),
            server: server.clone(),
            token: token.to_string(),
            claim: claim.clone(),
            database,
            within: reattach.unwrap_or_default(),
        };
        let deadline = tokio::time::Instant::now() + config.within;
        let mut pause = FIRST_PAUSE;
        let (attached, link, lost) = loop {
            match connect(&config, None, &received, busy.clone()).await {
                Ok(opened) => break opened,
                Err(Attach::OwnerUnreachable(error))
                    if tokio::time::Instant::now() + pause < deadline =>
                {
                    tracing::debug!(%error, "the world's node is unreachable; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                Err(Attach::OwnerUnreachable(error) | Attach::Failed(error)) => return Err(error),
                Err(Attach::Moved(_)) => unreachable!("connect follows redirects"),
            }
        };
        let inner = Arc::new(Inner {
            world: attached.world,
            rank: attached.rank,
            nranks: attached.ranks,
            audited: attached.audited,
            link: Mutex::new(Arc::new(link)),
            next_id: AtomicU64::new(1),
            deferred: Mutex::new(Deferred::default()),
            windows,
            sent: AtomicU64::new(0),
            received,
            busy,
            reattach: reattach.map(|_| config),
            supervisor: Mutex::new(None),
        });
        let supervisor = tokio::spawn(supervise(Arc::downgrade(&inner), lost));
        *lock(&inner.supervisor) = Some(supervisor);
        Ok(Session { inner })
    }

    /// The current incarnation's stream.
    fn link(&self) -> Arc<Link> {
        Arc::clone(&lock(&self.inner.link))
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

    /// This session's incarnation of its rank (1 for the rank's first session); it grows
    /// each time the session attaches again by itself ([`SessionBuilder::reattach_within`]).
    pub fn incarnation(&self) -> u64 {
        self.link().incarnation
    }

    /// Whether this session writes its own audit events to the store itself (it was given a
    /// database URL and the server keeps a log) rather than shipping them.
    pub fn persists_audit_events(&self) -> bool {
        self.link().persisted.is_some()
    }

    /// Messages written and read so far on this session's stream.
    pub fn wire_stats(&self) -> WireStats {
        WireStats {
            sent: self.inner.sent.load(Ordering::Relaxed),
            received: self.inner.received.load(Ordering::Relaxed),
        }
    }

    /// Writes deferred calls, then `message` if any, to `link` as one message (a batch when
    /// there are several). The deferred lock is held so that nothing overtakes.
    fn write(&self, link: &Link, deferred: &mut Deferred, message: Option<ClientMessage>) {
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
        if link.outbound.send(message).is_err() {
            // the reader fails every waiter when the stream ends
            tracing::debug!("write to a closed session");
        }
    }

    /// Sends `call` now, after (and with) every deferred call, and returns its reply's future.
    /// When the session persists its own audit events, the reply also waits until the rows
    /// handed to the writer so far are committed (in parallel with the call), so that a call
    /// returns only once the client events before it are stored.
    pub(crate) fn call(&self, call: Call) -> ReplyFuture {
        let (reply, link) = {
            // the stream is chosen under the lock that orders sends: a stream put in place by
            // attaching again never receives a call registered on the lost one
            let mut deferred = lock(&self.inner.deferred);
            let link = self.link();
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            let reply = match link.register(id) {
                Ok(reply) => reply,
                Err(ended) => return Box::pin(async move { Err(ended) }),
            };
            let message = ClientMessage {
                id,
                call: Some(call),
            };
            self.write(&link, &mut deferred, Some(message));
            (reply, link)
        };
        let Some(writer) = link.persisted.clone() else {
            return reply;
        };
        let ticket = writer.submitted();
        Box::pin(async move {
            let answer = reply.await;
            writer.committed(ticket).await?;
            answer
        })
    }

    /// Sends `call` now, after every deferred call, without waiting for its answer (the
    /// answer is dropped when it comes; a failure shows in the log). For a unified window's
    /// publications: a store does not wait for the network.
    pub(crate) fn call_unanswered(&self, call: Call) {
        drop(self.call(call));
    }

    /// Queues `call` to travel with the next call sent (or sends it when enough is queued).
    /// An accumulate that only repeats the one queued just before it, where the rules allow
    /// ([`coalesce`]), joins it instead: one operation travels, and both callers get its answer.
    pub(crate) fn defer(&self, call: Call) -> ReplyFuture {
        let mut deferred = lock(&self.inner.deferred);
        let link = self.link();
        if let Call::Op(op) = &call {
            if let Some(joined) = deferred
                .calls
                .last_mut()
                .and_then(|last| coalesce(last, op))
            {
                return link.join(joined);
            }
        }
        let bytes = data_bytes(&call);
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        match link.register(id) {
            Ok(reply) => {
                deferred.calls.push(ClientMessage {
                    id,
                    call: Some(call),
                });
                deferred.bytes += bytes;
                if deferred.bytes >= DEFER_BYTES || deferred.calls.len() >= DEFER_CALLS {
                    self.write(&link, &mut deferred, None);
                }
                reply
            }
            Err(ended) => Box::pin(async move { Err(ended) }),
        }
    }

    /// Puts a new incarnation's stream in place of the lost one. Every open window is reopened
    /// on it first (each keeps its id, its private copy and its stores not yet published);
    /// then, holding every window's state and the lock that orders sends, the stream is
    /// swapped in, the calls still waiting to travel on the lost one are dropped (their
    /// callers were failed with it), and every window's epochs end: the next call of a window
    /// whose epoch was open, or whose operations were in flight, fails saying why
    /// ([`crate::window`]'s `lose_epochs`).
    ///
    /// # Errors
    /// A window that cannot be reopened for a passing reason (the stream was lost again): the
    /// caller attaches again.
    async fn install(&self, attached: v1::Attached, link: Link) -> Result<()> {
        if attached.world != self.inner.world || attached.rank != self.inner.rank {
            return Err(Error::Protocol(format!(
                "attached again as rank {} of {:?}, not as rank {} of {:?}",
                attached.rank, attached.world, self.inner.rank, self.inner.world
            )));
        }
        let watched: Vec<Watched> = {
            let mut windows = lock(&self.inner.windows);
            windows.retain(|window| window.state.strong_count() > 0);
            windows.clone()
        };
        let mut reopening = Vec::with_capacity(watched.len());
        for window in &watched {
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            let reply = link.register(id)?;
            let message = ClientMessage {
                id,
                // the handle keeps its private copy
                call: Some(Call::OpenWindow(OpenWindow {
                    name: window.name.clone(),
                    with_copy: false,
                })),
            };
            let _ = link.outbound.send(message);
            reopening.push(reply);
        }
        let mut gone = Vec::new();
        for (window, reply) in watched.iter().zip(reopening) {
            match reply.await {
                Ok(Reply::Window(desc)) if desc.id == window.id => {}
                // freed (and perhaps created again under its name) while the stream was lost
                Ok(_) => gone.push(window.id),
                Err(error) if error.class() == Some(onesided_core::ErrorClass::Win) => {
                    gone.push(window.id);
                }
                Err(error) => return Err(error),
            }
        }
        let incarnation = link.incarnation;
        let states: Vec<_> = watched
            .iter()
            .filter_map(|window| window.state.upgrade().map(|state| (window, state)))
            .collect();
        {
            let mut guards: Vec<_> = states.iter().map(|(_, state)| lock(state)).collect();
            let mut deferred = lock(&self.inner.deferred);
            *deferred = Deferred::default();
            let lost = std::mem::replace(&mut *lock(&self.inner.link), Arc::new(link));
            for ((window, _), state) in states.iter().zip(guards.iter_mut()) {
                let why = if gone.contains(&window.id) {
                    format!(
                        "window {:?} no longer exists: it was freed while the session attached \
                         again",
                        window.name
                    )
                } else {
                    format!(
                        "the epoch open on window {:?} was lost with incarnation {} of this rank \
                         (its node went away or let the world go); the session attached again as \
                         incarnation {incarnation}, and what the epoch did not complete is unknown",
                        window.name, lost.incarnation
                    )
                };
                crate::window::lose_epochs(state, why, gone.contains(&window.id));
            }
        }
        // unified windows: follow the public copy again, and publish what may have been lost
        for (window, state) in &states {
            if !gone.contains(&window.id) {
                crate::window::follow(self, window.id, state).await?;
            }
        }
        Ok(())
    }

    /// Remembers an open window so that session calls note its pending accesses first.
    pub(crate) fn watch(&self, window: u64, name: &str, state: Weak<Mutex<State>>) {
        let mut windows = lock(&self.inner.windows);
        windows.retain(|window| window.state.strong_count() > 0);
        windows.push(Watched {
            id: window,
            name: name.to_string(),
            state,
        });
    }

    /// Ships `events` of `window`, where this session is rank `rank`, to the audit log with the
    /// next call — or, when the session persists them itself, hands them to its writer and
    /// ships their marker (nothing when the server keeps no log).
    pub(crate) fn record(&self, window: u64, rank: u32, events: Vec<AuditEvent>) {
        if !self.audited() || events.is_empty() {
            return;
        }
        // the answer only says it was recorded; a failure shows in the log, not here
        match &self.link().persisted {
            Some(writer) => writer.append(window, rank, events, |rows| {
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
        self.write(&self.link(), &mut deferred, None);
    }

    /// Opens the window `name` of this world. A window is opened once per session (its epoch
    /// state lives in the session until it is freed). On a dynamic window the handle knows the
    /// regions this rank attached earlier (in another session, or before a restart) and not
    /// detached: [`Window::regions`] lists them and its private copy holds their public bytes.
    /// The private copy of any window starts as the rank's public copy: what the rank
    /// published before (in another session, or before a restart) and what other ranks put
    /// there.
    ///
    /// # Errors
    /// `MPI_ERR_WIN` for an unknown window; `MPI_ERR_ARG` when it is already open here.
    pub async fn window(&self, name: &str) -> Result<Window> {
        self.open_window(name, true).await
    }

    /// Opens the window `name` as [`Session::window`] does, but with a zeroed private copy
    /// instead of the rank's public copy (a dynamic window's regions still come with their
    /// bytes): for a handle that only reaches other ranks' memory — the CLI's one-shot calls —
    /// which need not carry this rank's bytes.
    ///
    /// # Errors
    /// As [`Session::window`].
    pub async fn window_zeroed(&self, name: &str) -> Result<Window> {
        self.open_window(name, false).await
    }

    async fn open_window(&self, name: &str, with_copy: bool) -> Result<Window> {
        let reply = self
            .call(Call::OpenWindow(OpenWindow {
                name: name.to_string(),
                with_copy,
            }))
            .await?;
        let Reply::Window(mut desc) = reply else {
            return Err(Error::Protocol(
                "open_window answered without a window".into(),
            ));
        };
        // a dynamic window: the regions this rank attached in an earlier session
        let attached = std::mem::take(&mut desc.attached);
        // a static window: its public copy (a unified one's comes by `follow`)
        let public = std::mem::take(&mut desc.public_copy);
        let window = Window::new(self.clone(), desc_from_wire(desc)?)?;
        window.restore_regions(attached)?;
        window.restore_copy(public)?;
        window.follow().await?;
        Ok(window)
    }

    /// `MPI_Win_allocate` (or `MPI_Win_create`, by `flavor`) by this rank: collective over the
    /// world's ranks. Every rank calls it with the same `name`, `flavor`, `model` and `info`,
    /// and its own `size` (bytes) and `disp_unit`; it returns once every rank has, with the
    /// window created and open in this session (logged as an admin's creation is). Ranks may
    /// expose 0 bytes. [`Session::create`] does the same over part of the world.
    ///
    /// # Errors
    /// `MPI_ERR_INFO` for a bad info value (at once), `MPI_ERR_ARG` or `MPI_ERR_INFO` on every
    /// rank when the ranks' flavor, model or info differ, `MPI_ERR_DISP` for a zero disp_unit,
    /// `MPI_ERR_SIZE`/`MPI_ERR_NO_MEM` past the server's limits, `MPI_ERR_ARG` for a name
    /// taken or malformed; then nothing was created. `MPI_ERR_PROC_FAILED` when a rank's
    /// session ends first.
    pub async fn create_window(
        &self,
        name: &str,
        size: u64,
        disp_unit: u32,
        flavor: crate::Flavor,
        model: crate::MemoryModel,
        info: &[(&str, &str)],
    ) -> Result<Window> {
        let call = NewWindow::new(name, size, disp_unit)
            .flavor(flavor)
            .model(model)
            .info(info);
        self.create(&call).await
    }

    /// `MPI_Win_allocate`/`MPI_Win_create` by this rank, with every argument in `call`:
    /// collective over the members of its group (the whole world when it has none), as MPI's
    /// creation over a subcommunicator is. Every member calls it with the same name, group,
    /// flavor, model and info and its own size and disp_unit; it returns once every member
    /// has, with the window open here and numbered in the group ([`Window::rank`] is this
    /// rank's position in it). Ranks outside the group do not take part. Members that give
    /// different groups wait for the members of theirs, as MPI ranks calling a collective on
    /// different communicators do, until a member's session ends.
    ///
    /// # Errors
    /// As [`Session::create_window`]; `MPI_ERR_GROUP` (this call alone) for a group with a
    /// rank twice or outside the world, or without this rank.
    pub async fn create(&self, call: &NewWindow) -> Result<Window> {
        let call = Call::CreateWindow(v1::CreateWindow {
            name: call.name.clone(),
            size: call.size,
            disp_unit: call.disp_unit,
            info: info_to_wire(&call.info),
            flavor: onesided_proto::flavor_to_wire(call.flavor),
            model: onesided_proto::model_to_wire(call.model),
            group: call.group.clone(),
        });
        let Reply::Window(desc) = self.call(call).await? else {
            return Err(Error::Protocol(
                "create_window answered without a window".into(),
            ));
        };
        let window = Window::new(self.clone(), desc_from_wire(desc)?)?;
        window.follow().await?;
        Ok(window)
    }

    /// Ends the session cleanly: ships every open window's pending loads and stores (what a
    /// rank did after its last call) and every deferred call, and waits until the server has
    /// answered them — in sync durability, until they are in the audit log — and, when the
    /// session persists its own events, until its writer has committed them; then ends the
    /// stream and waits until the server ended it too (the session left, not broken: no
    /// `departed` row). Calls on its windows fail afterwards. Dropping a session instead may
    /// lose what it did last, and the server sees a broken stream once the process exits.
    ///
    /// # Errors
    /// When the session already ended.
    pub async fn close(self) -> Result<()> {
        let drained = self.drain().await;
        self.end().await;
        drained
    }

    /// Ends the stream after everything written to it, and waits until the server ended its
    /// side (or the stream broke). The session does not attach again afterwards.
    async fn end(&self) {
        if let Some(supervisor) = lock(&self.inner.supervisor).take() {
            supervisor.abort();
        }
        let ended = {
            let mut deferred = lock(&self.inner.deferred);
            let link = self.link();
            self.write(&link, &mut deferred, None);
            // a waiter for an id never sent: only the end of the stream answers it (the
            // reader fails every waiter then)
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            let ended = link.register(id);
            let _ = link.outbound.send(ClientMessage { id: 0, call: None });
            ended
        };
        if let Ok(ended) = ended {
            let _ = ended.await;
        }
    }

    /// Ships the windows' pending accesses and the deferred calls, and waits until they are
    /// answered and recorded ([`Session::close`]).
    async fn drain(&self) -> Result<()> {
        let watched: Vec<_> = lock(&self.inner.windows).clone();
        for window in &watched {
            if let Some(state) = window.state.upgrade() {
                let (me, events) = take_accesses(&state);
                self.record(window.id, me, events);
            }
        }
        // an empty record is answered once everything before it is in the audit log
        let Some(&Watched { id: window, .. }) = watched.first() else {
            self.flush_deferred();
            return Ok(());
        };
        if !self.audited() {
            self.flush_deferred();
            return Ok(());
        }
        let drained = self
            .call(Call::Record(Record {
                window,
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
        self.note_accesses();
        self.call(Call::Barrier(Barrier {})).await?;
        Ok(())
    }

    /// Records the local loads and stores not yet recorded on every open window: a session
    /// call that orders (a barrier, a send, a receive) notes them first, so the log has them
    /// before it.
    pub(crate) fn note_accesses(&self) {
        let windows: Vec<_> = lock(&self.inner.windows)
            .iter()
            .filter_map(|window| window.state.upgrade().map(|state| (window.id, state)))
            .collect();
        for (id, state) in windows {
            let (me, events) = take_accesses(&state);
            self.record(id, me, events);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onesided_core::{ErrorClass, RmaError};

    fn ended_with(class: ErrorClass, code: tonic::Code, why: &str) -> Lost {
        lost_with(onesided_proto::status_with_code(
            code,
            &RmaError::new(class, why),
        ))
    }

    /// Which lost streams a session attaches again after: the ones a new stream may mend
    /// (the server or node went, the connection broke), never a lapsed lease, a newer
    /// incarnation or a refusal, which the server would only give again.
    #[test]
    fn a_lapsed_session_does_not_come_back() {
        let lapsed = ended_with(
            ErrorClass::ProcFailed,
            tonic::Code::Unavailable,
            "the session's lease lapsed",
        );
        assert!(!lapsed.reattach);
        assert_eq!(lapsed.error.class(), Some(ErrorClass::ProcFailed));
        let superseded = ended_with(
            ErrorClass::ProcFailed,
            tonic::Code::Aborted,
            "a newer incarnation attached",
        );
        assert!(!superseded.reattach);
        let refused = ended_with(
            ErrorClass::NoMem,
            tonic::Code::ResourceExhausted,
            "the message is over the limit",
        );
        assert!(!refused.reattach);
        let shutdown = ended_with(
            ErrorClass::Io,
            tonic::Code::Unavailable,
            "the server is shutting down",
        );
        assert!(shutdown.reattach);
        let broken = lost_with(tonic::Status::unavailable("connection reset"));
        assert!(broken.reattach);
    }
}
