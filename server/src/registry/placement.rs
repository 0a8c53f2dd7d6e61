//! The seam between the directory and where worlds live: one node alone ([`Alone`]) or a
//! cluster of nodes over PostgreSQL (`crate::cluster::Cluster`, the other implementation).
//! The registry, the session, the Rma and Admin services and the auth interceptor ask a
//! [`Placement`] and never which kind it is.
//!
//! Owns: the questions whose answer depends on where worlds live (who numbers windows, where
//! a new world is saved and served, whether this node may still answer for a world, where a
//! world another node serves is, what an admin's move or the cluster's status is), and the
//! answers of a node alone. Must not: run SQL, decide RMA semantics, or know a cluster's
//! tables and leases (those are the cluster's).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use onesided_proto::admin_wire::ClusterNode;

use super::{Registry, RegistryError};
use crate::audit::{AuditStore, StoredWorld};

/// Who serves a world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Served {
    /// This node (it has taken the world up if it had not).
    Here,
    /// Another live node, at this address.
    There(String),
    /// No such world.
    Unknown,
}

/// Why a world could not be moved.
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    /// This node is not in a cluster: there is nowhere to move a world to.
    #[error(
        "this server is not part of a cluster (start it with --node-id, --advertise and a \
         PostgreSQL --database-url)"
    )]
    Alone,
    /// No node has this id.
    #[error("no node {0:?} in the cluster")]
    NoNode(String),
    /// The node's lease has expired.
    #[error("node {0:?} is not alive")]
    Dead(String),
    /// This node lost the world meanwhile.
    #[error("world {0:?} moved meanwhile; call again")]
    NotHere(String),
    /// The database failed.
    #[error("the cluster's store: {0:#}")]
    Store(anyhow::Error),
}

/// Where a new world was saved to be served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// Whether this node serves it.
    pub here: bool,
    /// The address of the node that serves it, in a cluster (the client is told).
    pub owner: Option<String>,
}

/// The cluster as one node sees it (`ClusterStatus`).
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterView {
    /// This node's id.
    pub node_id: String,
    /// Every node, live or not.
    pub nodes: Vec<ClusterNode>,
    /// The lease of nodes and worlds.
    pub lease_ttl: Duration,
}

/// What the registry has still to do once a deleted world's actors are asked to stop: wait
/// for them and for their last events to be committed.
pub type Stopping<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Where worlds live, as the directory and the services ask it. Every method has the answer
/// of a node alone as its meaning when there is nothing else to know.
#[tonic::async_trait]
pub trait Placement: std::fmt::Debug + Send + Sync {
    /// A new window's id when something beyond this node numbers windows (ids unique across
    /// a cluster come from its database); `None` when the registry numbers them itself.
    ///
    /// # Errors
    /// The placement's store is unreachable.
    async fn window_id(&self) -> anyhow::Result<Option<u64>>;

    /// `window` belongs to `world` (the audit's fencing asks by window).
    fn note_window(&self, window: u64, world: &str);

    /// Saves a new `world` in `store` and says who serves it.
    ///
    /// # Errors
    /// A world of that name already saved (by another node), or the store failing.
    async fn save_world(
        &self,
        store: &AuditStore,
        world: &StoredWorld,
    ) -> Result<Placed, RegistryError>;

    /// A world is being deleted, before it leaves the registry: a failure leaves it as it
    /// was. A node alone forgets it in `store` here (its store is the record of what exists).
    ///
    /// # Errors
    /// The store failing.
    async fn deleting(&self, store: Option<&AuditStore>, world: &str) -> Result<(), RegistryError>;

    /// A deleted world has left the registry and its actors were asked to stop: `stopping`
    /// finishes once they have and their last events are committed. A cluster forgets the
    /// world in `store` here, and its lease with it: its rows commit only under that lease.
    ///
    /// # Errors
    /// The store failing.
    async fn deleted(
        &self,
        store: Option<&AuditStore>,
        world: &str,
        stopping: Stopping<'_>,
    ) -> Result<(), RegistryError>;

    /// Whether this node may still answer for `world`: a node paused past its lease may have
    /// lost it without knowing yet. A world found lost is let go of here.
    ///
    /// # Errors
    /// The placement's store is unreachable (nothing is let go of then).
    async fn confirm(&self, world: &str, registry: &Registry) -> anyhow::Result<bool>;

    /// Whether, by this node's own clock, it surely still serves `world` (no need to
    /// [`Placement::confirm`]): the check every session call makes first.
    fn surely_serves(&self, world: &str) -> bool;

    /// Whether this node holds `world` (by what it knows, without asking anyone).
    fn holds(&self, world: &str) -> bool;

    /// Whether an admin's move is draining `world` here.
    fn is_draining(&self, world: &str) -> bool;

    /// Waits until no move drains `world` here (at once when none does).
    async fn until_drained(&self, world: &str);

    /// The world and rank of a rank token this node does not know (by its SHA-256): `None`
    /// when nobody else can know it either.
    ///
    /// # Errors
    /// The placement's store is unreachable.
    async fn resolve(&self, token_sha256: &[u8; 32]) -> anyhow::Result<Option<(String, u32)>>;

    /// Whether a rank token this node does not know may be another node's (then the Rma
    /// service asks [`Placement::resolve`] instead of the interceptor refusing it).
    fn others_may_know(&self) -> bool;

    /// Who serves `world`; when nobody live does, this node takes it up first.
    ///
    /// # Errors
    /// The placement's store is unreachable, or a window cannot be rebuilt.
    async fn serve(&self, world: &str, registry: &Arc<Registry>) -> anyhow::Result<Served>;

    /// `(name, ranks, windows)` of every world, wherever it is served.
    ///
    /// # Errors
    /// The placement's store is unreachable.
    async fn worlds(&self, registry: &Registry) -> anyhow::Result<Vec<(String, u32, u32)>>;

    /// Moves `world`, served here, to node `to`: its new owner's address.
    ///
    /// # Errors
    /// [`MoveError`].
    async fn hand_over(
        &self,
        world: &str,
        to: &str,
        registry: &Arc<Registry>,
    ) -> Result<String, MoveError>;

    /// The cluster's nodes and leases; `None` for a node alone.
    ///
    /// # Errors
    /// The placement's store is unreachable.
    async fn status(&self) -> anyhow::Result<Option<ClusterView>>;
}

/// A node alone: it serves every world it has, numbers its windows itself, and its store
/// (if any) is the record of what exists.
#[derive(Debug, Default)]
pub struct Alone;

#[tonic::async_trait]
impl Placement for Alone {
    async fn window_id(&self) -> anyhow::Result<Option<u64>> {
        Ok(None)
    }

    fn note_window(&self, _window: u64, _world: &str) {}

    async fn save_world(
        &self,
        store: &AuditStore,
        world: &StoredWorld,
    ) -> Result<Placed, RegistryError> {
        store
            .save_world(world, None)
            .await
            .map_err(super::unavailable)?;
        Ok(Placed {
            here: true,
            owner: None,
        })
    }

    async fn deleting(&self, store: Option<&AuditStore>, world: &str) -> Result<(), RegistryError> {
        match store {
            Some(store) => store.delete_world(world).await.map_err(super::unavailable),
            None => Ok(()),
        }
    }

    async fn deleted(
        &self,
        _store: Option<&AuditStore>,
        _world: &str,
        stopping: Stopping<'_>,
    ) -> Result<(), RegistryError> {
        // the windows' last events (`window_freed`) are in the log before the deletion is
        // answered, as in a cluster
        stopping.await;
        Ok(())
    }

    async fn confirm(&self, _world: &str, _registry: &Registry) -> anyhow::Result<bool> {
        Ok(true)
    }

    fn surely_serves(&self, _world: &str) -> bool {
        true
    }

    fn holds(&self, _world: &str) -> bool {
        true
    }

    fn is_draining(&self, _world: &str) -> bool {
        false
    }

    async fn until_drained(&self, _world: &str) {}

    async fn resolve(&self, _token_sha256: &[u8; 32]) -> anyhow::Result<Option<(String, u32)>> {
        Ok(None)
    }

    fn others_may_know(&self) -> bool {
        false
    }

    async fn serve(&self, world: &str, registry: &Arc<Registry>) -> anyhow::Result<Served> {
        Ok(if registry.has_world(world) {
            Served::Here
        } else {
            Served::Unknown
        })
    }

    async fn worlds(&self, registry: &Registry) -> anyhow::Result<Vec<(String, u32, u32)>> {
        Ok(registry.list_worlds())
    }

    async fn hand_over(
        &self,
        _world: &str,
        _to: &str,
        _registry: &Arc<Registry>,
    ) -> Result<String, MoveError> {
        Err(MoveError::Alone)
    }

    async fn status(&self) -> anyhow::Result<Option<ClusterView>> {
        Ok(None)
    }
}
