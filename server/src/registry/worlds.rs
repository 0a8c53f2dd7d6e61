//! Worlds and their rank tokens: creating one (placed on a node in a cluster), deleting one,
//! listing them, and the membership a token grants.
//!
//! Owns: a world's entry in the directory, from the reservation of its name to its removal
//! with its tokens, windows and session counts, and its store row (saved before the world
//! exists, deleted before or, in a cluster, after its actors' last events). Must not: keep a
//! token itself (only its SHA-256), or touch a window's bytes or an actor's state.

use std::collections::BTreeMap;
use std::sync::Arc;

use onesided_core::{ErrorClass, RmaError};
use rand::Rng;

use super::{bytes_of, check_name, Inner, Placed, Registry, RegistryError, WindowEntry, World};
use crate::actor::WindowServerHandle;
use crate::audit::StoredWorld;
use crate::limits::{exhausted, WindowBytes};
use crate::world::WorldHandle;

/// A world, as a session sees it after authenticating.
#[derive(Clone, Debug)]
pub struct Membership {
    /// World name.
    pub world: String,
    /// The session's rank.
    pub rank: u32,
    /// World size.
    pub nranks: u32,
    /// The world's collective actor.
    pub collectives: WorldHandle,
}

/// SHA-256 of a token: the directory and the store keep only this.
pub fn token_hash(token: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes()).into()
}

/// Takes world `name` out of the directory with its tokens and windows (their bytes given
/// back); returns it and its windows, whose actors the caller stops or abandons.
pub(super) fn take_world(
    inner: &mut Inner,
    window_bytes: &WindowBytes,
    name: &str,
) -> Option<(World, Vec<Arc<WindowEntry>>)> {
    let world = inner.worlds.remove(name)?;
    for token in &world.tokens {
        inner.tokens.remove(token);
    }
    let mut windows = Vec::new();
    for id in world.windows.values() {
        if let Some(entry) = inner.windows.remove(id) {
            window_bytes.give_back(bytes_of(&entry.desc));
            windows.push(entry);
        }
    }
    Some((world, windows))
}

fn new_token() -> String {
    let bytes: [u8; 24] = rand::rng().random();
    hex::encode(bytes)
}

impl Registry {
    /// Creates a world of `nranks` ranks and returns one token per rank (kept in the store
    /// as SHA-256 only, before the world exists).
    ///
    /// # Errors
    /// A taken name, a bad name, no ranks, more than the limit of ranks per world
    /// (`MPI_ERR_NO_MEM`), or a store that does not take it.
    pub async fn create_world(
        &self,
        name: &str,
        nranks: u32,
    ) -> Result<Vec<String>, RegistryError> {
        Ok(self.create_world_placed(name, nranks).await?.0)
    }

    /// [`Registry::create_world`], saved where the [`Placement`](super::Placement) puts it
    /// (in a cluster, on the live node with the least load), whose address comes back with
    /// the tokens (`None` outside a cluster). A world placed on another node is not
    /// served here: that node takes it up when it first hears of it.
    ///
    /// # Errors
    /// As [`Registry::create_world`].
    pub async fn create_world_placed(
        &self,
        name: &str,
        nranks: u32,
    ) -> Result<(Vec<String>, Option<String>), RegistryError> {
        check_name("world", name)?;
        if nranks == 0 {
            return Err(RmaError::new(ErrorClass::Arg, "a world needs at least one rank").into());
        }
        let max_ranks = self.limits.max_ranks_per_world;
        if nranks > max_ranks {
            return Err(exhausted(format!(
                "a world may have at most {max_ranks} ranks on this server, not {nranks}"
            ))
            .into());
        }
        {
            let mut inner = self.write();
            if inner.worlds.contains_key(name) || !inner.reserved.insert(name.to_string()) {
                return Err(RegistryError::AlreadyExists(format!("world {name}")));
            }
        }
        let tokens: Vec<String> = (0..nranks).map(|_| new_token()).collect();
        let hashes: Vec<[u8; 32]> = tokens.iter().map(|token| token_hash(token)).collect();
        let mut placed = Placed {
            here: true,
            owner: None,
        };
        if let Some(store) = &self.store {
            let stored = StoredWorld {
                name: name.to_string(),
                nranks,
                tokens: hashes.iter().copied().zip(0..nranks).collect(),
            };
            match self.placement().save_world(store, &stored).await {
                Ok(saved) => placed = saved,
                Err(error) => {
                    self.write().reserved.remove(name);
                    return Err(error);
                }
            }
        }
        let mut inner = self.write();
        inner.reserved.remove(name);
        if !placed.here {
            let owner = placed.owner.unwrap_or_default();
            tracing::info!(world = name, nranks, %owner, "world created on another node");
            return Ok((tokens, Some(owner)));
        }
        for (rank, hash) in hashes.iter().enumerate() {
            inner.tokens.insert(*hash, (name.to_string(), rank as u32));
        }
        let collectives = WorldHandle::spawn(name, nranks, self.me.clone());
        inner.worlds.insert(
            name.to_string(),
            World {
                nranks,
                tokens: hashes,
                collectives,
                windows: BTreeMap::new(),
            },
        );
        tracing::info!(world = name, nranks, "world created");
        Ok((tokens, placed.owner))
    }

    /// `(name, ranks, windows)` of every world.
    pub fn list_worlds(&self) -> Vec<(String, u32, u32)> {
        self.read()
            .worlds
            .iter()
            .map(|(name, world)| (name.clone(), world.nranks, world.windows.len() as u32))
            .collect()
    }

    /// Deletes a world, its tokens and its windows.
    ///
    /// # Errors
    /// An unknown world, or a store that does not take it.
    pub async fn delete_world(&self, name: &str) -> Result<(), RegistryError> {
        if !self.read().worlds.contains_key(name) {
            return Err(RegistryError::NoWorld(name.to_string()));
        }
        self.placement().deleting(self.store.as_ref(), name).await?;
        let stopped = {
            let mut inner = self.write();
            let (world, windows) = take_world(&mut inner, &self.window_bytes, name)
                .ok_or_else(|| RegistryError::NoWorld(name.to_string()))?;
            // a rank's session count goes with the world, unless a session still runs (it is
            // dropped when that ends, and until then a world of the same name counts on from it)
            for rank in 0..world.nranks {
                let key = (name.to_string(), rank);
                if !inner.live.contains_key(&key) {
                    inner.incarnations.remove(&key);
                }
            }
            for entry in &windows {
                entry.ranks.iter().for_each(WindowServerHandle::stop);
            }
            windows
        };
        let stopping = Box::pin(async move {
            for entry in &stopped {
                for rank in &entry.ranks {
                    rank.stopped().await;
                }
            }
            self.audit.flush().await;
        });
        self.placement()
            .deleted(self.store.as_ref(), name, stopping)
            .await?;
        tracing::info!(world = name, "world deleted");
        Ok(())
    }

    /// The membership a rank token grants.
    pub fn authenticate(&self, token: &str) -> Option<Membership> {
        self.authenticate_hash(&token_hash(token))
    }

    /// The membership the rank token with this SHA-256 grants.
    pub fn authenticate_hash(&self, hash: &[u8; 32]) -> Option<Membership> {
        let inner = self.read();
        let (world, rank) = inner.tokens.get(hash)?;
        let entry = inner.worlds.get(world)?;
        Some(Membership {
            world: world.clone(),
            rank: *rank,
            nranks: entry.nranks,
            collectives: entry.collectives.clone(),
        })
    }

    /// How many ranks the world `name` has, if it exists.
    pub fn world_ranks(&self, name: &str) -> Option<u32> {
        self.read().worlds.get(name).map(|world| world.nranks)
    }

    /// Whether a world named `name` exists.
    pub fn has_world(&self, name: &str) -> bool {
        self.read().worlds.contains_key(name)
    }
}
