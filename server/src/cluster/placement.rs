//! The cluster as the registry's `Placement`: worlds placed across the nodes, served under
//! leases in PostgreSQL, window ids from the database.
//!
//! Owns: the mapping of the registry's questions onto `Cluster`'s own methods. Must not: run
//! SQL (the store's) or hold state of its own.

use std::sync::Arc;

use super::Cluster;
use crate::audit::{AuditStore, StoredWorld};
use crate::registry::{
    unavailable, ClusterView, MoveError, Placed, Placement, Registry, RegistryError, Served,
    Stopping,
};

/// A cluster node's answers to where worlds live: placed across the nodes, served under
/// leases in PostgreSQL, window ids from the database.
#[tonic::async_trait]
impl Placement for Cluster {
    async fn window_id(&self) -> anyhow::Result<Option<u64>> {
        self.next_window_id().await.map(Some)
    }

    fn note_window(&self, window: u64, world: &str) {
        Cluster::note_window(self, window, world);
    }

    async fn save_world(
        &self,
        store: &AuditStore,
        world: &StoredWorld,
    ) -> Result<Placed, RegistryError> {
        let saved = match self.place().await {
            Ok((node, advertise)) => {
                let here = node == self.config.node_id;
                let sent = tokio::time::Instant::now();
                let saved = store
                    .save_world(world, Some((&node, here, self.config.lease_ttl)))
                    .await;
                saved.map(|()| {
                    if here {
                        self.hold(&world.name, 1, sent);
                    }
                    Placed {
                        here,
                        owner: Some(advertise),
                    }
                })
            }
            Err(error) => Err(error),
        };
        match saved {
            Ok(placed) => Ok(placed),
            // another node created it first
            Err(_) if store.world_exists(&world.name).await.unwrap_or(false) => Err(
                RegistryError::AlreadyExists(format!("world {}", world.name)),
            ),
            Err(error) => Err(unavailable(error)),
        }
    }

    async fn deleting(
        &self,
        _store: Option<&AuditStore>,
        _world: &str,
    ) -> Result<(), RegistryError> {
        Ok(())
    }

    async fn deleted(
        &self,
        store: Option<&AuditStore>,
        world: &str,
        stopping: Stopping<'_>,
    ) -> Result<(), RegistryError> {
        // the world's rows commit only under its lease: the store forgets it (and the lease)
        // only after its actors' last events (`window_freed`) are committed
        stopping.await;
        if let Some(store) = store {
            store.delete_world(world).await.map_err(unavailable)?;
        }
        self.release(world);
        Ok(())
    }

    async fn confirm(&self, world: &str, registry: &Registry) -> anyhow::Result<bool> {
        Cluster::confirm(self, world, registry).await
    }

    fn surely_serves(&self, world: &str) -> bool {
        self.serves(world)
    }

    fn holds(&self, world: &str) -> bool {
        Cluster::holds(self, world)
    }

    fn is_draining(&self, world: &str) -> bool {
        Cluster::is_draining(self, world)
    }

    async fn until_drained(&self, world: &str) {
        Cluster::until_drained(self, world).await;
    }

    async fn resolve(&self, token_sha256: &[u8; 32]) -> anyhow::Result<Option<(String, u32)>> {
        Cluster::resolve(self, token_sha256).await
    }

    fn others_may_know(&self) -> bool {
        true
    }

    async fn serve(&self, world: &str, registry: &Arc<Registry>) -> anyhow::Result<Served> {
        Cluster::serve(self, world, registry).await
    }

    async fn worlds(&self, _registry: &Registry) -> anyhow::Result<Vec<(String, u32, u32)>> {
        // every world of every node, from the store
        Cluster::worlds(self).await
    }

    async fn hand_over(
        &self,
        world: &str,
        to: &str,
        registry: &Arc<Registry>,
    ) -> Result<String, MoveError> {
        Cluster::hand_over(self, world, to, registry).await
    }

    async fn status(&self) -> anyhow::Result<Option<ClusterView>> {
        Ok(Some(ClusterView {
            node_id: self.config.node_id.clone(),
            nodes: self.nodes().await?,
            lease_ttl: self.config.lease_ttl,
        }))
    }
}
