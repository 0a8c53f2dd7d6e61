//! Where an answer goes: straight into a session's outbound stream, into a gather that answers
//! once when several actors have answered, or back to the session task itself.
//!
//! Owns: the reply plumbing shared by actors and sessions. Must not: decide anything.

use std::sync::{Arc, Mutex};

use onesided_core::RmaError;
use onesided_proto::failure_from_rma;
use onesided_proto::v1::{server_message, Done, ServerMessage};
use tokio::sync::{mpsc, oneshot};
use tonic::Status;

/// The outbound half of a session's stream.
pub type Outbound = mpsc::UnboundedSender<Result<ServerMessage, Status>>;

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
    },
    /// One share of an answer that several actors give together.
    Gather(Arc<Gather>),
    /// Back to the session task, which updates its state first.
    Session(oneshot::Sender<Answer>),
}

impl Reply {
    /// Sends the answer. A vanished receiver (the session ended) is not an error.
    pub fn send(self, answer: Answer) {
        match self {
            Reply::Direct { id, out } => {
                let _ = out.send(Ok(message(id, answer)));
            }
            Reply::Gather(gather) => gather.arrive(answer),
            Reply::Session(sender) => {
                let _ = sender.send(answer);
            }
        }
    }

    /// Sends `Done`.
    pub fn done(self) {
        self.send(Ok(server_message::Reply::Done(Done {})));
    }
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
