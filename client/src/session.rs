//! A session: this process attached as one rank of a world, over one bidirectional stream.
//! Calls are written in order and pipelined; each reply finds its caller by id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use onesided_proto::v1::client_message::Call;
use onesided_proto::v1::rma_client::RmaClient;
use onesided_proto::v1::{server_message::Reply, Barrier, ClientMessage, OpenWindow};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::admin::desc_from_wire;
use crate::connect::{channel, Bearer};
use crate::error::{Error, Result};
use crate::window::Window;

type Waiter = oneshot::Sender<Result<Reply>>;

#[derive(Debug, Default)]
struct Waiters {
    by_id: HashMap<u64, Waiter>,
    closed: Option<Error>,
}

#[derive(Debug)]
struct Inner {
    world: String,
    rank: u32,
    nranks: u32,
    outbound: mpsc::UnboundedSender<ClientMessage>,
    next_id: AtomicU64,
    waiters: Arc<Mutex<Waiters>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// An attached rank. Cheap to clone; the stream closes when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct Session {
    inner: Arc<Inner>,
}

/// The reply to one call, once it arrives.
pub(crate) type ReplyFuture = futures::future::BoxFuture<'static, Result<Reply>>;

fn lock(waiters: &Mutex<Waiters>) -> std::sync::MutexGuard<'_, Waiters> {
    waiters.lock().unwrap_or_else(|poison| poison.into_inner())
}

impl Session {
    /// Attaches to the server at `url` as the rank whose token this is.
    ///
    /// # Errors
    /// [`Error::Connect`] when nobody answers; UNAUTHENTICATED for a bad token.
    pub async fn attach(url: &str, token: &str) -> Result<Self> {
        let channel = channel(url).await?;
        let mut client = RmaClient::with_interceptor(channel, Bearer::new(token)?)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        let (outbound, requests) = mpsc::unbounded_channel();
        let mut inbound = client
            .session(UnboundedReceiverStream::new(requests))
            .await?
            .into_inner();
        let greeting = inbound
            .message()
            .await?
            .ok_or_else(|| Error::Disconnected("the server closed the session".into()))?;
        let Some(Reply::Attached(attached)) = greeting.reply else {
            return Err(Error::Protocol(
                "the session did not start with a greeting".into(),
            ));
        };
        let waiters = Arc::new(Mutex::new(Waiters::default()));
        let reader_waiters = Arc::clone(&waiters);
        let reader = tokio::spawn(async move {
            let ended = loop {
                match inbound.message().await {
                    Ok(Some(message)) => {
                        let waiter = lock(&reader_waiters).by_id.remove(&message.id);
                        let Some(waiter) = waiter else {
                            tracing::warn!(id = message.id, "reply to no call");
                            continue;
                        };
                        let answer = match message.reply {
                            Some(Reply::Error(failure)) => Err(Error::from(failure)),
                            Some(reply) => Ok(reply),
                            None => Err(Error::Protocol("empty reply".into())),
                        };
                        let _ = waiter.send(answer);
                    }
                    Ok(None) => break Error::Disconnected("the server closed the session".into()),
                    Err(status) => break Error::Disconnected(status.message().to_string()),
                }
            };
            let mut waiters = lock(&reader_waiters);
            for (_, waiter) in waiters.by_id.drain() {
                let _ = waiter.send(Err(ended.clone()));
            }
            waiters.closed = Some(ended);
        });
        Ok(Session {
            inner: Arc::new(Inner {
                world: attached.world,
                rank: attached.rank,
                nranks: attached.ranks,
                outbound,
                next_id: AtomicU64::new(1),
                waiters,
                reader,
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

    /// Sends `call` now (in order after every earlier call) and returns its reply's future.
    pub(crate) fn call(&self, call: Call) -> ReplyFuture {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        {
            let mut waiters = lock(&self.inner.waiters);
            if let Some(ended) = &waiters.closed {
                let ended = ended.clone();
                return Box::pin(async move { Err(ended) });
            }
            waiters.by_id.insert(id, sender);
        }
        let message = ClientMessage {
            id,
            call: Some(call),
        };
        if self.inner.outbound.send(message).is_err() {
            lock(&self.inner.waiters).by_id.remove(&id);
            return Box::pin(async { Err(Error::Disconnected("the session is closed".into())) });
        }
        Box::pin(async move {
            receiver
                .await
                .unwrap_or_else(|_| Err(Error::Disconnected("the session is closed".into())))
        })
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

    /// `MPI_Barrier` over the world: returns once every rank has called it.
    ///
    /// # Errors
    /// When the session ends.
    pub async fn barrier(&self) -> Result<()> {
        self.call(Call::Barrier(Barrier {})).await?;
        Ok(())
    }
}
