//! Where an answer goes: straight into a session's outbound stream, into a gather that answers
//! once when several actors have answered, or back to the session task itself.
//!
//! Owns: the reply plumbing shared by actors and sessions. Must not: decide anything.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::Stream;

use onesided_core::RmaError;
use onesided_proto::failure_from_rma;
use onesided_proto::v1::{server_message, Batched, Done, ServerMessage};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tonic::Status;

use crate::metrics::{CallTimer, PendingOp};

/// What a session's stream carries to its client.
pub type OutboundMessage = Result<ServerMessage, Status>;

/// The outbound half of a session's stream, bounded
/// ([`Limits::outbound_capacity`](crate::limits::Limits::outbound_capacity)). Sending never
/// waits, so no actor, gather or session task ever waits for a client: an answer that finds
/// the stream full (its client stopped reading) is dropped and ends the session
/// ([`Outbound::overflow`]) instead of queueing without bound.
///
/// The unified model's updates (`Updated`, which other ranks' puts cause, as large as they are)
/// are bounded in bytes as well
/// ([`Limits::max_unread_update_bytes`](crate::limits::Limits::max_unread_update_bytes)):
/// an update that would take the bytes of
/// those queued past it ends the session the same way; one alone always fits.
#[derive(Clone, Debug)]
pub struct Outbound {
    sender: mpsc::Sender<OutboundMessage>,
    overflow: CancellationToken,
    updates: Arc<UpdateBytes>,
}

/// Bytes of updates queued and not yet taken by the transport, and their bound.
#[derive(Debug)]
struct UpdateBytes {
    queued: AtomicU64,
    max: u64,
}

/// The receiving end of an [`Outbound`], for [`Replies`].
#[derive(Debug)]
pub struct OutboundReceiver {
    receiver: mpsc::Receiver<OutboundMessage>,
    updates: Arc<UpdateBytes>,
}

/// The window bytes `message` carries if it is an update, else 0.
fn update_bytes(message: &OutboundMessage) -> u64 {
    match message {
        Ok(ServerMessage {
            reply: Some(server_message::Reply::Updated(updated)),
            ..
        }) => updated
            .segments
            .iter()
            .map(|segment| segment.data.len() as u64)
            .sum(),
        _ => 0,
    }
}

impl Outbound {
    /// A stream holding at most `capacity` messages (at least one) not yet taken by the
    /// transport, and its receiving end; updates are not bounded in bytes.
    pub fn bounded(capacity: usize) -> (Self, OutboundReceiver) {
        Self::with_update_bytes(capacity, u64::MAX)
    }

    /// [`Outbound::bounded`], holding at most `max_update_bytes` bytes of updates (at least
    /// one update).
    pub fn with_update_bytes(capacity: usize, max_update_bytes: u64) -> (Self, OutboundReceiver) {
        let (sender, receiver) = mpsc::channel(capacity.max(1));
        let updates = Arc::new(UpdateBytes {
            queued: AtomicU64::new(0),
            max: max_update_bytes,
        });
        let outbound = Outbound {
            sender,
            overflow: CancellationToken::new(),
            updates: Arc::clone(&updates),
        };
        (outbound, OutboundReceiver { receiver, updates })
    }

    /// Queues `message`; whether it was. A stream that is gone (the session ended) takes
    /// nothing; one that is full, in messages or in update bytes, takes nothing and ends its
    /// session.
    pub fn send(&self, message: OutboundMessage) -> bool {
        let bytes = update_bytes(&message);
        if bytes > 0 {
            let before = self.updates.queued.fetch_add(bytes, Ordering::Relaxed);
            if before > 0 && before.saturating_add(bytes) > self.updates.max {
                self.updates.queued.fetch_sub(bytes, Ordering::Relaxed);
                self.overflow.cancel();
                return false;
            }
        }
        match self.sender.try_send(message) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.updates.queued.fetch_sub(bytes, Ordering::Relaxed);
                self.overflow.cancel();
                false
            }
            Err(TrySendError::Closed(_)) => {
                self.updates.queued.fetch_sub(bytes, Ordering::Relaxed);
                false
            }
        }
    }

    /// Cancelled once a message found the stream full: the session must end.
    pub fn overflow(&self) -> CancellationToken {
        self.overflow.clone()
    }
}

/// A session's answers as the transport takes them, until the session ends (`ended`); then
/// what is already queued still goes out (the answers that failed its pending calls) and the
/// stream ends.
///
/// An answer that wakes the stream after it found none waiting is held for one turn of the
/// runtime: every task already runnable goes first, so answers the same input causes in other
/// tasks (a post's answer and the wait its target's actor ends at once) are taken with it and
/// leave in one write, not one write and one wake-up of the client each. Answers already
/// waiting are taken at once: holding each would end the transport's write at each (one
/// HTTP/2 DATA frame per answer, which a client's HTTP/2 library may take for a flood).
/// The turn costs one re-poll of the stream's task, never a timer or a system call: the task
/// wakes itself and goes to the back of the run queue (`tokio::task::yield_now` would instead
/// wait for the runtime's next poll of its I/O driver). BENCHMARKS.md ("One write for answers
/// that come together") has the measurement.
#[derive(Debug)]
pub struct Replies {
    receiver: mpsc::Receiver<OutboundMessage>,
    updates: Arc<UpdateBytes>,
    ended: Pin<Box<WaitForCancellationFutureOwned>>,
    /// The session ended: the receiver is closed and drains.
    closed: bool,
    /// The last poll found no answer waiting.
    waited: bool,
    /// An answer held for one turn.
    held: Option<OutboundMessage>,
}

impl Replies {
    /// The answers `receiver` carries, until `ended` is cancelled.
    pub fn new(receiver: OutboundReceiver, ended: CancellationToken) -> Self {
        let OutboundReceiver { receiver, updates } = receiver;
        Replies {
            receiver,
            updates,
            ended: Box::pin(ended.cancelled_owned()),
            closed: false,
            waited: false,
            held: None,
        }
    }
}

impl Stream for Replies {
    type Item = OutboundMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(reply) = this.held.take() {
            return Poll::Ready(Some(reply));
        }
        loop {
            match this.receiver.poll_recv(cx) {
                Poll::Ready(Some(reply)) => {
                    // taken: an update's bytes are the transport's now
                    let bytes = update_bytes(&reply);
                    if bytes > 0 {
                        this.updates.queued.fetch_sub(bytes, Ordering::Relaxed);
                    }
                    if std::mem::take(&mut this.waited) {
                        this.held = Some(reply);
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    return Poll::Ready(Some(reply));
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => {
                    if !this.closed && this.ended.as_mut().poll(cx).is_ready() {
                        // what is queued still goes out, then the stream ends
                        this.closed = true;
                        this.receiver.close();
                        continue;
                    }
                    this.waited = !this.closed;
                    return Poll::Pending;
                }
            }
        }
    }
}

/// One answer to one call.
pub type Answer = Result<server_message::Reply, RmaError>;

/// Where the answer to one call goes.
#[derive(Debug)]
pub enum Reply {
    /// Straight to the client.
    Direct {
        /// The call id.
        id: u64,
        /// The session's outbound stream.
        out: Outbound,
        /// Times the call until this answer is sent.
        timer: Option<CallTimer>,
    },
    /// One share of an answer that several actors give together.
    Gather(Arc<Gather>),
    /// Back to the session task, which updates its state first.
    Session(oneshot::Sender<Answer>),
    /// One slot of a batch's single reply.
    Collect {
        /// The slot.
        index: usize,
        /// The batch.
        batch: Arc<Collector>,
        /// Times the call until its answer is sent (with the batch, or after it).
        timer: Option<CallTimer>,
    },
    /// The answer of a call the session's next calls wait for (a fence, `MPI_Win_set_info`:
    /// blocking calls in MPI, and calls are taken in order): `sent` is told once it went out
    /// (or dropped, when it never will).
    Then {
        /// Where the answer goes.
        reply: Box<Reply>,
        /// Told after the answer is sent.
        sent: oneshot::Sender<()>,
    },
    /// An operation's answer, which frees its slot of the session's pending-operation budget
    /// once sent (or dropped).
    Counted {
        /// Where the answer goes.
        reply: Box<Reply>,
        /// The slot.
        permit: PendingOp,
    },
}

impl Reply {
    /// Sends the answer. A vanished receiver (the session ended) is not an error.
    pub fn send(self, answer: Answer) {
        match self {
            Reply::Direct { id, out, timer } => {
                // counted before it leaves: a client that saw its answer finds it counted
                if let Some(timer) = timer {
                    timer.answered(failed(&answer));
                }
                out.send(Ok(message(id, answer)));
            }
            Reply::Gather(gather) => gather.arrive(answer),
            Reply::Session(sender) => {
                let _ = sender.send(answer);
            }
            Reply::Collect {
                index,
                batch,
                timer,
            } => batch.arrive(index, answer, timer),
            Reply::Then { reply, sent } => {
                reply.send(answer);
                let _ = sent.send(());
            }
            Reply::Counted { reply, permit } => {
                reply.send(answer);
                drop(permit);
            }
        }
    }

    /// Sends `Done`.
    pub fn done(self) {
        self.send(Ok(server_message::Reply::Done(Done {})));
    }
}

/// The error class of an answer that is an error.
fn failed(answer: &Answer) -> Option<onesided_core::ErrorClass> {
    answer.as_ref().err().map(|error| error.class)
}

/// Builds the message for an answer.
pub fn message(id: u64, answer: Answer) -> ServerMessage {
    let reply = match answer {
        Ok(reply) => reply,
        Err(error) => server_message::Reply::Error(failure_from_rma(&error)),
    };
    ServerMessage {
        id,
        reply: Some(reply),
    }
}

/// Collects the answers of a batch's calls into one `Batched` reply, in the batch's order, sent
/// when the batch's last call (the one that made the client send) is answered, with every
/// answer that came by then. Answers that come later travel on their own, so a batch never
/// holds back an answer for an operation that is still queued: the client library sends its
/// deferred operations with whatever call comes next, and an operation waiting for another
/// rank (its post, its fence, a lock it holds) must not keep that call's answer from its
/// client. A lazy lock + operations + unlock to one target is still one reply: the target
/// answers the operations before the unlock.
#[derive(Debug)]
pub struct Collector {
    id: u64,
    out: Outbound,
    state: Mutex<CollectorState>,
}

#[derive(Debug)]
struct CollectorState {
    ids: Vec<u64>,
    /// Per call, in the batch's order: its answer, while the batch's reply is not sent.
    replies: Vec<Option<ServerMessage>>,
    /// The timers of the answers held for the batch's reply, with their outcome.
    timers: Vec<(CallTimer, Option<onesided_core::ErrorClass>)>,
    sent: bool,
}

impl Collector {
    /// A collector for the batch `id` whose calls have `ids` (at least one).
    pub fn new(id: u64, ids: Vec<u64>, out: Outbound) -> Arc<Self> {
        Arc::new(Collector {
            id,
            out,
            state: Mutex::new(CollectorState {
                replies: vec![None; ids.len()],
                timers: Vec::new(),
                ids,
                sent: false,
            }),
        })
    }

    fn arrive(&self, index: usize, answer: Answer, timer: Option<CallTimer>) {
        // The lock guards the list for the instant of one store; nothing awaits under it.
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let Some(call_id) = state.ids.get(index).copied() else {
            return;
        };
        let failed = failed(&answer);
        let reply = message(call_id, answer);
        if state.sent {
            if let Some(timer) = timer {
                timer.answered(failed);
            }
            self.out.send(Ok(reply));
            return;
        }
        state.replies[index] = Some(reply);
        state.timers.extend(timer.map(|timer| (timer, failed)));
        if index + 1 == state.ids.len() {
            state.sent = true;
            let replies = std::mem::take(&mut state.replies)
                .into_iter()
                .flatten()
                .collect();
            let batched = ServerMessage {
                id: self.id,
                reply: Some(server_message::Reply::Batched(Batched { replies })),
            };
            for (timer, failed) in state.timers.drain(..) {
                timer.answered(failed);
            }
            self.out.send(Ok(batched));
        }
    }
}

/// Answers `Done` once `expected` shares arrived, or the first error at once.
#[derive(Debug)]
pub struct Gather {
    state: Mutex<Option<(usize, Reply)>>,
}

impl Gather {
    /// A gather of `expected` shares answering into `reply`; with none expected it answers now.
    pub fn new(expected: usize, reply: Reply) -> Arc<Self> {
        if expected == 0 {
            reply.done();
            return Arc::new(Gather {
                state: Mutex::new(None),
            });
        }
        Arc::new(Gather {
            state: Mutex::new(Some((expected, reply))),
        })
    }

    fn arrive(&self, answer: Answer) {
        // The lock guards a counter for the instant of one decrement; nothing awaits under it.
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let Some((remaining, _)) = state.as_mut() else {
            return;
        };
        *remaining -= 1;
        if answer.is_err() || *remaining == 0 {
            if let Some((_, reply)) = state.take() {
                match answer {
                    Err(error) => reply.send(Err(error)),
                    Ok(_) => reply.done(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use futures::StreamExt;

    use super::*;

    fn answer(id: u64) -> OutboundMessage {
        Ok(ServerMessage {
            id,
            reply: Some(server_message::Reply::Done(Done {})),
        })
    }

    fn id(message: Option<OutboundMessage>) -> u64 {
        message.expect("an answer").expect("not a status").id
    }

    /// An answer that wakes the stream after it waited is held one turn: a task that was
    /// already runnable (as an actor woken by the same input is) runs first, so what it
    /// answers can leave in the same write.
    #[tokio::test(flavor = "current_thread")]
    async fn an_answer_after_a_wait_lets_runnable_tasks_go_first() {
        let (out, receiver) = Outbound::bounded(8);
        let mut replies = Replies::new(receiver, CancellationToken::new());
        assert!(
            futures::poll!(replies.next()).is_pending(),
            "nothing queued yet"
        );
        let other_ran = Arc::new(AtomicBool::new(false));
        let (go, started) = oneshot::channel::<()>();
        let other = {
            let other_ran = Arc::clone(&other_ran);
            tokio::spawn(async move {
                let _ = started.await;
                other_ran.store(true, Ordering::SeqCst);
            })
        };
        // the answer arrives and the other task becomes runnable, as one input does
        assert!(out.send(answer(1)));
        go.send(()).unwrap();
        assert!(!other_ran.load(Ordering::SeqCst));
        assert_eq!(id(replies.next().await), 1);
        assert!(
            other_ran.load(Ordering::SeqCst),
            "the task woken with the answer had its turn before the answer was taken"
        );
        other.await.unwrap();
    }

    /// Answers already waiting are taken without a turn between them (the transport writes
    /// them together); once the session ends, what is queued still goes out, then the end.
    #[tokio::test(flavor = "current_thread")]
    async fn waiting_answers_go_at_once_and_are_drained_after_the_end() {
        let (out, receiver) = Outbound::bounded(8);
        let ended = CancellationToken::new();
        let mut replies = Replies::new(receiver, ended.clone());
        for n in 1..=3 {
            assert!(out.send(answer(n)));
        }
        for n in 1..=2 {
            match futures::poll!(replies.next()) {
                Poll::Ready(message) => assert_eq!(id(message), n),
                Poll::Pending => panic!("answer {n} was waiting and was held"),
            }
        }
        ended.cancel();
        assert_eq!(id(replies.next().await), 3);
        assert!(
            replies.next().await.is_none(),
            "the stream ends with the session"
        );
        assert!(!out.send(answer(4)), "an ended stream takes nothing");
    }
}
