//! A session: this process attached as one rank of a world, over one bidirectional stream.
//! Calls are written in order and pipelined; each reply finds its caller by id.
//!
//! The session records what only it sees (local loads and stores, returns of blocking calls,
//! flush_local) in the audit log: shipped over the stream, or — given a database URL —
//! written to the store by [`crate::client_events`], with only a marker shipped.
//!
//! Rooms: this file holds the session and what its rooms share (the send path, the open
//! windows, where the rank's own events go); `builder` how a session attaches (`SessionBuilder`
//! and the first attach), `link` one incarnation's stream (attaching once, the reader that
//! matches replies to callers, the heartbeat), `reattach` the supervisor that attaches again
//! when a stream is lost, `deferred` the calls that wait to travel with the next one and
//! `coalesce`, `windows` opening and creating windows (`NewWindow`), `collective` the barrier,
//! and `close` ending the session cleanly.
//!
//! Owns: the `Session` handle and what every room shares (`Inner`: the world and rank, the current
//! incarnation's stream, ids, the lock that orders sends, the open windows, the message counts,
//! busy-polling, the supervisor's task), and what it tells (`world`, `rank`, `incarnation`,
//! `wire_stats`, …); writing calls to the stream in order (`write`, `call`: the stream is chosen
//! under the lock that orders sends); the open windows' list (`watch`); and where the rank's own
//! events go (`record`). Every other concern is one of its rooms', each under its own contract.
//! Must not (the session and all its rooms): decide an MPI rule (each `Window` runs core's
//! `EpochState`), hold a window's private copy (the window does), run SQL itself (`client_events`
//! does), or attach again after a final refusal (a newer incarnation, a refused token or claim).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use onesided_proto::v1::client_message::Call;
use onesided_proto::v1::{server_message::Reply, Batch, ClientMessage, Record};

pub use crate::client_events::AUDIT_DATABASE_URL_ENV;

use crate::busy_poll::BusyPoll;
use crate::error::{Error, Result};
use crate::window::State;
use onesided_core::audit::Event as AuditEvent;

mod builder;
mod close;
mod collective;
mod deferred;
mod link;
mod reattach;
mod windows;

pub use builder::SessionBuilder;
pub use reattach::DEFAULT_REATTACH_WITHIN;
pub use windows::NewWindow;
pub(crate) use windows::{info_entries, info_to_wire};

use deferred::Deferred;
use link::Link;
use reattach::Reattach;

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
    /// itself ([`SessionBuilder::reattach_within`]). Swapped only under `deferred`'s lock
    /// (`reattach`'s `install`).
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

impl Session {
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
                for chunk in onesided_core::origin::recorded_chunks(events) {
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
}
