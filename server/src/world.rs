//! The world actor: one task per world that runs its collectives — the world barrier
//! (`MPI_Barrier`) and the barrier inside `MPI_WIN_FREE`.
//!
//! Owns: arrival counts per collective. Must not: touch windows (the free's last arrival tells
//! the registry, which stops the window's actors).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use onesided_core::{ErrorClass, RmaError};
use tokio::sync::mpsc;

use crate::registry::Registry;
use crate::reply::Reply;
use crate::supervise::{self, Fate};

/// Which collective an arrival belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// The world barrier.
    Barrier,
    /// `MPI_WIN_FREE` of a window; `barrier = false` for `no_locks` windows, whose ranks return
    /// at once.
    Free {
        /// The window id.
        window: u64,
        /// Whether ranks wait for each other.
        barrier: bool,
    },
}

#[derive(Debug)]
struct Arrive {
    collective: Collective,
    rank: u32,
    reply: Reply,
}

#[derive(Debug)]
enum Message {
    Arrive(Arrive),
    /// A session of the rank started.
    Joined(u32),
    /// A session of the rank ended; `gone` unless a newer one is already attached.
    Departed {
        rank: u32,
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
    pub fn spawn(name: &str, nranks: u32, registry: std::sync::Weak<Registry>) -> Self {
        let (sender, inbox) = mpsc::channel(256);
        let span = tracing::info_span!("world", world = name);
        let fate = supervise::spawn("world", run(nranks, inbox, registry), span);
        WorldHandle { sender, fate }
    }

    /// Rank `rank` arrives at `collective`; `reply` is answered when it may leave.
    ///
    /// # Errors
    /// `MPI_ERR_OTHER` when the world was deleted, `MPI_ERR_INTERN` when its actor panicked.
    pub async fn arrive(
        &self,
        collective: Collective,
        rank: u32,
        reply: Reply,
    ) -> Result<(), RmaError> {
        self.sender
            .send(Message::Arrive(Arrive {
                collective,
                rank,
                reply,
            }))
            .await
            .map_err(|_| match self.fate.panicked() {
                Some(panic) => RmaError::new(
                    ErrorClass::Intern,
                    format!("the world's collectives failed (it panicked: {panic})"),
                ),
                None => RmaError::new(ErrorClass::Other, "the world was deleted"),
            })
    }

    /// A session of `rank` started: collectives may wait for it again.
    pub async fn joined(&self, rank: u32) {
        let _ = self.sender.send(Message::Joined(rank)).await;
    }

    /// A session of `rank` ended: collectives it has not joined fail with `PROC_FAILED`, and
    /// while it is `gone` (no newer session attached) so do new ones.
    pub async fn departed(&self, rank: u32, reason: &str, gone: bool) {
        let message = Message::Departed {
            rank,
            reason: reason.to_string(),
            gone,
        };
        let _ = self.sender.send(message).await;
    }
}

fn proc_failed(rank: u32, reason: &str) -> RmaError {
    RmaError::new(
        ErrorClass::ProcFailed,
        format!("rank {rank} failed: its session ended ({reason})"),
    )
}

/// What arrivals wait for: the `n`-th barrier call of every rank (counted across its
/// incarnations, so a restarted rank's next barrier meets the others' next one), or a window's
/// free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Instance {
    Barrier(u64),
    Free { window: u64, barrier: bool },
}

async fn run(nranks: u32, mut inbox: mpsc::Receiver<Message>, registry: std::sync::Weak<Registry>) {
    let mut waiting: HashMap<Instance, Vec<(u32, Option<Reply>)>> = HashMap::new();
    // ranks whose session ended and that have not attached again, and why
    let mut gone: BTreeMap<u32, String> = BTreeMap::new();
    // barrier calls per rank, and the barrier instances that failed (every rank's call of a
    // failed instance fails, so that the ranks stay in step)
    let mut barriers: Vec<u64> = vec![0; nranks as usize];
    let mut failed: HashMap<u64, RmaError> = HashMap::new();
    while let Some(message) = inbox.recv().await {
        let arrive = match message {
            Message::Arrive(arrive) => arrive,
            Message::Joined(rank) => {
                gone.remove(&rank);
                continue;
            }
            Message::Departed {
                rank,
                reason,
                gone: is_gone,
            } => {
                // a collective it took part in or still had to join cannot complete
                for (instance, arrivals) in waiting.drain() {
                    let error = proc_failed(rank, &reason);
                    if let Instance::Barrier(n) = instance {
                        failed.insert(n, error.clone());
                    }
                    for reply in arrivals.into_iter().filter_map(|(_, reply)| reply) {
                        reply.send(Err(error.clone()));
                    }
                }
                if is_gone {
                    gone.insert(rank, reason);
                }
                continue;
            }
        };
        if arrive.rank >= nranks {
            arrive.reply.send(Err(RmaError::new(
                ErrorClass::Rank,
                format!("rank {} is outside the world", arrive.rank),
            )));
            continue;
        }
        let instance = match arrive.collective {
            Collective::Barrier => {
                barriers[arrive.rank as usize] += 1;
                Instance::Barrier(barriers[arrive.rank as usize])
            }
            Collective::Free { window, barrier } => Instance::Free { window, barrier },
        };
        if let Instance::Barrier(n) = instance {
            if let Some(error) = failed.get(&n) {
                arrive.reply.send(Err(error.clone()));
                continue;
            }
        }
        let needs_all = !matches!(instance, Instance::Free { barrier: false, .. });
        if let Some((rank, reason)) = gone.iter().next().filter(|_| needs_all) {
            let error = proc_failed(*rank, reason);
            if let Instance::Barrier(n) = instance {
                failed.insert(n, error.clone());
            }
            arrive.reply.send(Err(error));
            continue;
        }
        let arrivals = waiting.entry(instance).or_default();
        if arrivals.iter().any(|(rank, _)| *rank == arrive.rank) {
            arrive.reply.send(Err(RmaError::new(
                ErrorClass::Other,
                format!("rank {} arrived twice at the same collective", arrive.rank),
            )));
            continue;
        }
        if matches!(instance, Instance::Free { barrier: false, .. }) {
            arrive.reply.done();
            arrivals.push((arrive.rank, None));
        } else {
            arrivals.push((arrive.rank, Some(arrive.reply)));
        }
        if arrivals.len() < nranks as usize {
            continue;
        }
        let Some(arrivals) = waiting.remove(&instance) else {
            continue;
        };
        if let Instance::Free { window, .. } = instance {
            if let Some(registry) = registry.upgrade() {
                Arc::clone(&registry).remove_window(window);
            }
            tracing::info!(window, "window freed by all ranks");
        }
        for reply in arrivals.into_iter().filter_map(|(_, reply)| reply) {
            reply.done();
        }
    }
}
