//! The world actor: one task per world that carries its collectives — the world barrier
//! (`MPI_Barrier`) and the barrier inside `MPI_WIN_FREE` — and its point-to-point messages
//! over tokio. Their rules (arrival counts, matching, failure by departure) are core's
//! [`Collectives`] and [`Mailbox`].
//!
//! Owns: the I/O around one world's [`Collectives`] and [`Mailbox`]. Must not: decide a rule,
//! or touch windows (the free's last arrival tells the registry, which stops the window's
//! actors).

use std::sync::Arc;

use bytes::Bytes;
pub use onesided_core::collective::Collective;
use onesided_core::collective::{Collectives, Creation, WindowPart};
use onesided_core::messaging::{Delivery, Mailbox, Outgoing, Pattern};
use onesided_core::window::{Flavor, MemoryModel, WindowInfo};
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::v1::{self, server_message};
use tokio::sync::{mpsc, oneshot};

use crate::reply::Reply;
use crate::supervise::{self, Fate};

/// A window to create (the directory's [`Directory::create_window`]): all of its description but its id and
/// world.
#[derive(Clone, Debug)]
pub struct NewWindow {
    /// Its name, unique in the world.
    pub name: String,
    /// How its memory came to be.
    pub flavor: Flavor,
    /// Its memory model.
    pub model: MemoryModel,
    /// Each rank's size in bytes.
    pub sizes: Vec<u64>,
    /// Each rank's displacement unit.
    pub disp_units: Vec<u32>,
    /// Its info.
    pub info: WindowInfo,
    /// The world's ranks it spans, in window-rank order (`None`: the whole world).
    pub group: Option<Vec<u32>>,
}

/// What a world's actor asks of the directory its world is in (the registry, which spawns
/// it): no more than this, so that the actor knows nothing else of the directory.
#[tonic::async_trait]
pub trait Directory: Send + Sync {
    /// How many bytes of point-to-point messages may wait for a receive, per world.
    fn max_queued_message_bytes(&self) -> u64;

    /// Creates the window every rank asked for alike (the directory's own checks: name,
    /// shape, limits).
    ///
    /// # Errors
    /// What those checks refuse.
    async fn create_window(&self, world: &str, window: NewWindow) -> Result<(), RmaError>;

    /// Every rank freed `window`: its actors stop and it leaves the directory.
    async fn window_freed(self: Arc<Self>, window: u64);

    /// Every rank set `window`'s info alike.
    async fn window_info_set(&self, window: u64, info: WindowInfo);
}

#[derive(Debug)]
struct Arrive {
    collective: Collective,
    rank: u32,
    /// The window's group (world ranks) for a window's collective; empty: the whole world.
    group: Vec<u32>,
    reply: Reply,
}

#[derive(Debug)]
enum Message {
    Arrive(Arrive),
    /// `MPI_Win_create`/`MPI_Win_allocate` by this rank.
    ProposeWindow {
        name: String,
        rank: u32,
        /// The window's group (world ranks); empty for the whole world.
        group: Vec<u32>,
        part: WindowPart,
        reply: Reply,
    },
    /// `MPI_Win_set_info`: the info this rank asks for.
    ProposeInfo {
        window: u64,
        rank: u32,
        info: WindowInfo,
        /// The window's group (world ranks).
        group: Vec<u32>,
        reply: Reply,
    },
    /// `MPI_Send` by `source`: checked and held, its id (or the refusal) answered.
    Admit {
        sent: Outgoing,
        answer: oneshot::Sender<Result<u64, RmaError>>,
    },
    /// The admitted message may be received (its send is in the log).
    Release(u64),
    /// `MPI_Recv`, `MPI_Probe` or `MPI_Iprobe` by `rank`'s session `incarnation`.
    Receive {
        rank: u32,
        incarnation: u64,
        pattern: Pattern,
        probe: bool,
        wait: bool,
        reply: Reply,
    },
    /// A session of the rank started.
    Joined(u32),
    /// A session of the rank ended; `gone` unless a newer one is already attached.
    Departed {
        rank: u32,
        incarnation: u64,
        reason: String,
        gone: bool,
    },
}

/// Address of a world's collective actor.
#[derive(Clone, Debug)]
pub struct WorldHandle {
    sender: mpsc::Sender<Message>,
    /// Set if the actor panicked.
    fate: Fate,
}

impl WorldHandle {
    /// Starts the actor of world `name` with `nranks` ranks.
    pub fn spawn(name: &str, nranks: u32, directory: std::sync::Weak<dyn Directory>) -> Self {
        let (sender, inbox) = mpsc::channel(256);
        let span = tracing::info_span!("world", world = name);
        let fate = supervise::spawn(
            "world",
            run(name.to_string(), nranks, inbox, directory),
            span,
        );
        WorldHandle { sender, fate }
    }

    /// Rank `rank` arrives at `collective`, of the window over `group` (world ranks; empty:
    /// the whole world, as the barrier); `reply` is answered when it may leave.
    ///
    /// # Errors
    /// `MPI_ERR_OTHER` when the world was deleted, `MPI_ERR_INTERN` when its actor panicked.
    pub async fn arrive(
        &self,
        collective: Collective,
        rank: u32,
        group: Vec<u32>,
        reply: Reply,
    ) -> Result<(), RmaError> {
        self.send(Message::Arrive(Arrive {
            collective,
            rank,
            group,
            reply,
        }))
        .await
    }

    /// Hands `message` to the actor.
    ///
    /// # Errors
    /// `MPI_ERR_OTHER` when the world was deleted, `MPI_ERR_INTERN` when its actor panicked.
    async fn send(&self, message: Message) -> Result<(), RmaError> {
        self.sender
            .send(message)
            .await
            .map_err(|_| match self.fate.panicked() {
                Some(panic) => RmaError::new(
                    ErrorClass::Intern,
                    format!("the world's collectives failed (it panicked: {panic})"),
                ),
                None => RmaError::new(ErrorClass::Other, "the world was deleted"),
            })
    }

    /// Rank `rank` calls `MPI_Win_set_info` on `window` asking for `info`; `reply` is
    /// answered once every rank called (core's [`Collectives::propose_info`]), after the
    /// registry has the info when they all asked for the same.
    ///
    /// # Errors
    /// As [`WorldHandle::arrive`].
    pub async fn propose_info(
        &self,
        window: u64,
        rank: u32,
        info: WindowInfo,
        group: Vec<u32>,
        reply: Reply,
    ) -> Result<(), RmaError> {
        self.send(Message::ProposeInfo {
            window,
            rank,
            info,
            group,
            reply,
        })
        .await
    }

    /// Rank `rank` calls `MPI_Win_create`/`MPI_Win_allocate` for window `name` over `group`
    /// (world ranks; empty for the whole world) with its `part`; `reply` is answered once every
    /// member called and the window was created (or
    /// refused: core's [`Collectives::propose_window`], then the registry's checks).
    ///
    /// # Errors
    /// As [`WorldHandle::arrive`].
    pub async fn propose_window(
        &self,
        name: &str,
        rank: u32,
        group: Vec<u32>,
        part: WindowPart,
        reply: Reply,
    ) -> Result<(), RmaError> {
        self.send(Message::ProposeWindow {
            name: name.to_string(),
            rank,
            group,
            part,
            reply,
        })
        .await
    }

    /// Rank `source` sends `payload` to world rank `dest`: the message is checked and held
    /// (core's [`Mailbox::admit`]), and its id returned; no receive sees it before
    /// [`WorldHandle::release`].
    ///
    /// # Errors
    /// What [`Mailbox::admit`] refuses, or as [`WorldHandle::arrive`].
    pub async fn admit(&self, sent: Outgoing) -> Result<u64, RmaError> {
        let (answer, admitted) = oneshot::channel();
        self.send(Message::Admit { sent, answer }).await?;
        admitted
            .await
            .unwrap_or_else(|_| Err(RmaError::new(ErrorClass::Other, "the world was deleted")))
    }

    /// The admitted message `id` may be received.
    pub async fn release(&self, id: u64) {
        let _ = self.sender.send(Message::Release(id)).await;
    }

    /// Session `incarnation` of rank `rank` receives (or probes for) a message matching
    /// `pattern`; `reply` is answered with `Received` when one matches (at once, found or not,
    /// when `wait` is false).
    ///
    /// # Errors
    /// As [`WorldHandle::arrive`].
    pub async fn receive(
        &self,
        (rank, incarnation): (u32, u64),
        pattern: Pattern,
        probe: bool,
        wait: bool,
        reply: Reply,
    ) -> Result<(), RmaError> {
        self.send(Message::Receive {
            rank,
            incarnation,
            pattern,
            probe,
            wait,
            reply,
        })
        .await
    }

    /// A session of `rank` started: collectives may wait for it again.
    pub async fn joined(&self, rank: u32) {
        let _ = self.sender.send(Message::Joined(rank)).await;
    }

    /// Session `incarnation` of `rank` ended: collectives it has not joined fail with
    /// `PROC_FAILED`, and while it is `gone` (no newer session attached) so do new ones; its
    /// receives waiting are dropped.
    pub async fn departed(&self, (rank, incarnation): (u32, u64), reason: &str, gone: bool) {
        let message = Message::Departed {
            rank,
            incarnation,
            reason: reason.to_string(),
            gone,
        };
        let _ = self.sender.send(message).await;
    }
}

async fn run(
    world: String,
    nranks: u32,
    mut inbox: mpsc::Receiver<Message>,
    directory: std::sync::Weak<dyn Directory>,
) {
    let mut collectives = Collectives::new(nranks);
    let bound = directory
        .upgrade()
        .map_or(0, |directory| directory.max_queued_message_bytes());
    let mut mailbox = Mailbox::new(nranks, bound);
    while let Some(message) = inbox.recv().await {
        let effects = match message {
            Message::Admit { sent, answer } => {
                let _ = answer.send(mailbox.admit(sent));
                continue;
            }
            Message::Release(id) => {
                deliver(mailbox.release(id));
                continue;
            }
            Message::Receive {
                rank,
                incarnation,
                pattern,
                probe,
                wait,
                reply,
            } => {
                deliver(mailbox.receive((rank, incarnation), pattern, probe, wait, reply));
                continue;
            }
            Message::Arrive(arrive) => collectives.arrive_group(
                arrive.collective,
                arrive.rank,
                &arrive.group,
                arrive.reply,
            ),
            Message::ProposeWindow {
                name,
                rank,
                group,
                part,
                reply,
            } => collectives.propose_window(&name, rank, &group, part, reply),
            Message::ProposeInfo {
                window,
                rank,
                info,
                group,
                reply,
            } => collectives.propose_info(window, rank, info, &group, reply),
            Message::Joined(rank) => {
                collectives.joined(rank);
                mailbox.joined(rank);
                continue;
            }
            Message::Departed {
                rank,
                incarnation,
                reason,
                gone,
            } => {
                deliver(mailbox.departed((rank, incarnation), gone));
                collectives.departed(rank, &reason, gone)
            }
        };
        if let Some(window) = effects.freed {
            if let Some(directory) = directory.upgrade() {
                directory.window_freed(window).await;
            }
            tracing::info!(window, "window freed by all ranks");
        }
        if let Some(creation) = effects.create {
            create(&world, creation, &directory).await;
        }
        if let Some((window, info)) = effects.info_set {
            if let Some(directory) = directory.upgrade() {
                directory.window_info_set(window, info).await;
            }
        }
        for (reply, answer) in effects.answers {
            match answer {
                Ok(()) => reply.done(),
                Err(error) => reply.send(Err(error)),
            }
        }
    }
}

/// Sends the mailbox's answers: a message or envelope as `Received`.
fn deliver(answers: Vec<(Reply, Result<Delivery, RmaError>)>) {
    for (reply, answer) in answers {
        reply.send(answer.map(|delivery| server_message::Reply::Received(received(delivery))));
    }
}

/// The wire form of a delivery.
fn received(delivery: Delivery) -> v1::Received {
    match delivery {
        Delivery::Received(message) => v1::Received {
            found: true,
            source: message.sent.source,
            tag: message.sent.tag,
            message: message.id,
            len: message.sent.payload.len() as u64,
            payload: message.sent.payload,
        },
        Delivery::Probed {
            id,
            source,
            tag,
            len,
        } => v1::Received {
            found: true,
            source,
            tag,
            message: id,
            len,
            payload: Bytes::new(),
        },
        Delivery::Nothing => v1::Received::default(),
    }
}

/// Every rank asked for the window alike: the registry creates it (its own checks — name,
/// shape, info — may still refuse it), and every rank is answered with the outcome.
async fn create(
    world: &str,
    creation: Creation<Reply>,
    directory: &std::sync::Weak<dyn Directory>,
) {
    let Creation {
        name,
        group,
        sizes,
        disp_units,
        shared,
        replies,
    } = creation;
    let outcome = match directory.upgrade() {
        None => Err(RmaError::new(ErrorClass::Other, "the server is stopping")),
        Some(directory) => match WindowInfo::parse(
            shared
                .info
                .iter()
                .map(|(key, value)| (key.as_str(), value.as_str())),
        ) {
            Err(error) => Err(error),
            Ok(info) => {
                directory
                    .create_window(
                        world,
                        NewWindow {
                            name: name.clone(),
                            flavor: shared.flavor,
                            model: shared.model,
                            sizes,
                            disp_units,
                            info,
                            group: (!group.is_empty()).then_some(group),
                        },
                    )
                    .await
            }
        },
    };
    if outcome.is_ok() {
        tracing::info!(window = name, "window created by its ranks");
    }
    for reply in replies {
        match &outcome {
            Ok(()) => reply.done(),
            Err(error) => reply.send(Err(error.clone())),
        }
    }
}
