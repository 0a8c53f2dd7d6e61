//! The world actor: one task per world that runs its collectives — the world barrier
//! (`MPI_Barrier`) and the barrier inside `MPI_WIN_FREE`.
//!
//! Owns: arrival counts per collective. Must not: touch windows (the free's last arrival tells
//! the registry, which stops the window's actors).

use std::collections::HashMap;
use std::sync::Arc;

use onesided_core::{ErrorClass, RmaError};
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::registry::Registry;
use crate::reply::Reply;

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

/// Address of a world's collective actor.
#[derive(Clone, Debug)]
pub struct WorldHandle {
    sender: mpsc::Sender<Arrive>,
}

impl WorldHandle {
    /// Starts the actor of world `name` with `nranks` ranks.
    pub fn spawn(name: &str, nranks: u32, registry: std::sync::Weak<Registry>) -> Self {
        let (sender, inbox) = mpsc::channel(256);
        let span = tracing::info_span!("world", world = name);
        tokio::spawn(run(nranks, inbox, registry).instrument(span));
        WorldHandle { sender }
    }

    /// Rank `rank` arrives at `collective`; `reply` is answered when it may leave.
    ///
    /// # Errors
    /// `MPI_ERR_OTHER` when the world was deleted.
    pub async fn arrive(
        &self,
        collective: Collective,
        rank: u32,
        reply: Reply,
    ) -> Result<(), RmaError> {
        self.sender
            .send(Arrive {
                collective,
                rank,
                reply,
            })
            .await
            .map_err(|_| RmaError::new(ErrorClass::Other, "the world was deleted"))
    }
}

async fn run(nranks: u32, mut inbox: mpsc::Receiver<Arrive>, registry: std::sync::Weak<Registry>) {
    let mut waiting: HashMap<Collective, Vec<(u32, Option<Reply>)>> = HashMap::new();
    while let Some(arrive) = inbox.recv().await {
        let arrivals = waiting.entry(arrive.collective).or_default();
        if arrivals.iter().any(|(rank, _)| *rank == arrive.rank) {
            arrive.reply.send(Err(RmaError::new(
                ErrorClass::Other,
                format!("rank {} arrived twice at the same collective", arrive.rank),
            )));
            continue;
        }
        let leaves_at_once = matches!(arrive.collective, Collective::Free { barrier: false, .. });
        if leaves_at_once {
            arrive.reply.done();
            arrivals.push((arrive.rank, None));
        } else {
            arrivals.push((arrive.rank, Some(arrive.reply)));
        }
        if arrivals.len() < nranks as usize {
            continue;
        }
        let Some(arrivals) = waiting.remove(&arrive.collective) else {
            continue;
        };
        if let Collective::Free { window, .. } = arrive.collective {
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
