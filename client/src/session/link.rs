//! One incarnation's stream (`Link`): attaching once, the reader that matches each reply to its
//! caller, and the heartbeat that keeps the lease.
//!
//! Owns: attaching once (`connect`: following a cluster's redirects a few hops, a node that
//! named the world's owner and the owner not answering told apart; `greet`: the stream, the
//! `x-onesided-succeeds` header of a session attaching again, the greeting bounded by the
//! endpoint's timeout; `open_at`: the incarnation's writer of client rows, the reader and the
//! heartbeat), the waiters of the calls written to it (`register`, and `join` for a call
//! coalesced into another), the reader (`read`: each reply and each reply of a batch to its
//! caller, a unified window's updates to the window, every waiter failed when the stream ends)
//! and how the stream ended (`Lost`, `lost_with`: whether attaching again may mend it), and a
//! heartbeat every third of the lease. Must not: attach again by itself (the supervisor in
//! `reattach` does, on `Lost::reattach`), write a caller's call (the session writes them,
//! under the lock that orders sends; the link writes only heartbeats), or answer a caller other
//! than from the stream or its end.

use std::collections::HashMap;

use onesided_proto::v1::rma_client::RmaClient;
use onesided_proto::v1::{self, Heartbeat, ServerMessage};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::*;
use crate::client_events::ClientEventWriter;
use crate::connect::{Bearer, Endpoint};

type Waiter = oneshot::Sender<Result<Reply>>;

#[derive(Debug, Default)]
pub(super) struct Waiters {
    by_id: HashMap<u64, Waiter, foldhash::fast::RandomState>,
    /// Callers of calls that were coalesced into the call with this id: answered with it.
    joined: HashMap<u64, Vec<Waiter>, foldhash::fast::RandomState>,
    pub(super) closed: Option<Error>,
}

/// One incarnation's stream: what is written to it, who waits for its answers, and the tasks
/// that read it and keep its lease.
#[derive(Debug)]
pub(super) struct Link {
    pub(super) incarnation: u64,
    /// Given a database URL: the writer of this incarnation's own audit rows.
    pub(super) persisted: Option<ClientEventWriter>,
    pub(super) outbound: mpsc::UnboundedSender<ClientMessage>,
    pub(super) waiters: Arc<Mutex<Waiters>>,
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
    pub(super) fn register(&self, id: u64) -> std::result::Result<ReplyFuture, Error> {
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
    pub(super) fn join(&self, id: u64) -> ReplyFuture {
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
pub(super) struct Lost {
    /// What the calls still waiting on it were failed with.
    pub(super) error: Error,
    /// Whether attaching again may give the rank back: the node died or the connection broke,
    /// or the node let the world go or shut down. Not when a newer incarnation of the rank
    /// attached, the lease lapsed, or the server refused the stream.
    pub(super) reattach: bool,
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

/// Why one attempt to attach did not give a session.
pub(super) enum Attach {
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

/// A session's stream, attached: the greeting, the link, and how it will end.
pub(super) type Opened = (v1::Attached, Link, oneshot::Receiver<Lost>);

/// Attaches once, following the redirects of cluster nodes that do not serve the token's
/// world to the node that does (a few hops at most: the world may move while the client
/// follows it). `succeeds`: the incarnation a session attaching again by itself lost.
pub(super) async fn connect(
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

/// Attaches once at `server`: the stream and its greeting ([`greet`]), the incarnation's
/// writer of client rows when there is a database, the reader and the heartbeat.
async fn open_at(
    server: &Endpoint,
    config: &Reattach,
    succeeds: Option<u64>,
    received: &Arc<AtomicU64>,
    busy: Option<BusyPoll>,
) -> std::result::Result<Opened, Attach> {
    let (outbound, inbound, attached) = greet(server, config, succeeds).await?;
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
    let (reader, lost) = read(
        inbound,
        Arc::clone(&waiters),
        Arc::clone(&config.windows),
        Arc::clone(received),
        busy,
    );
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

/// A stream just opened: what is written to it, what it answers, and its greeting.
type Greeted = (
    mpsc::UnboundedSender<ClientMessage>,
    tonic::Streaming<ServerMessage>,
    v1::Attached,
);

/// Opens the session's stream at `server` and reads its greeting. A cluster node that does not
/// serve the token's world names the one that does ([`Attach::Moved`]).
async fn greet(
    server: &Endpoint,
    config: &Reattach,
    succeeds: Option<u64>,
) -> std::result::Result<Greeted, Attach> {
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
    let (inbound, greeting) = server
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
    Ok((outbound, inbound, attached))
}

/// Starts the stream's reader: each reply to its caller ([`deliver`]), each update of a
/// unified window to the window ([`follow_update`]); when the stream ends, every waiter fails
/// with how it ended, and so will every call registered after. Returns the reader and how the
/// stream will end.
fn read(
    mut inbound: tonic::Streaming<ServerMessage>,
    waiters: Arc<Mutex<Waiters>>,
    windows: Arc<Mutex<Vec<Watched>>>,
    received: Arc<AtomicU64>,
    busy: Option<BusyPoll>,
) -> (tokio::task::JoinHandle<()>, oneshot::Receiver<Lost>) {
    let (report, lost) = oneshot::channel();
    let reader = tokio::spawn(async move {
        let ended = loop {
            match inbound.message().await {
                Ok(Some(message)) => {
                    if let Some(busy) = &busy {
                        busy.touch();
                    }
                    received.fetch_add(1, Ordering::Relaxed);
                    match message.reply {
                        Some(Reply::Updated(updated)) if message.id == 0 => {
                            follow_update(&windows, updated);
                        }
                        _ => deliver(&waiters, message),
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
        let mut waiters = lock(&waiters);
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
    (reader, lost)
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
