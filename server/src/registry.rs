//! The directory of worlds, rank tokens and windows.
//!
//! Owns: names, tokens and the handles of each window's actors. It is a directory, not window
//! state: a short `RwLock` guards lookups and is never held across an `.await`. Must not: hold
//! anything an actor owns.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};

use onesided_core::window::{Flavor, MemoryModel, WindowDesc, WindowInfo};
use onesided_core::{ErrorClass, RmaError};
use rand::Rng;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use onesided_core::audit::Event;

use crate::actor::WindowServerHandle;
use crate::audit::{AuditHandle, Durability, Pending};
use crate::world::WorldHandle;

/// Largest world a server accepts.
pub const MAX_RANKS: u32 = 4096;

/// A window: its description and the address of each rank's actor.
#[derive(Debug)]
pub struct WindowEntry {
    /// What every rank knows about it.
    pub desc: Arc<WindowDesc>,
    /// One actor per rank, index = rank.
    pub ranks: Vec<WindowServerHandle>,
}

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

#[derive(Debug)]
struct World {
    nranks: u32,
    tokens: Vec<String>,
    collectives: WorldHandle,
    windows: BTreeMap<String, u64>,
}

#[derive(Debug, Default)]
struct Inner {
    worlds: BTreeMap<String, World>,
    tokens: HashMap<String, (String, u32)>,
    windows: HashMap<u64, Arc<WindowEntry>>,
    next_window: u64,
    incarnations: HashMap<(String, u32), u64>,
    /// The live session of each attached rank.
    live: HashMap<(String, u32), LiveSession>,
}

#[derive(Debug)]
struct LiveSession {
    incarnation: u64,
    superseded: CancellationToken,
    ended: watch::Receiver<bool>,
}

/// A session's place in the directory: its incarnation, the token that ends it when a newer
/// incarnation of its rank attaches, and the session it replaces.
#[derive(Debug)]
pub struct SessionSlot {
    /// How many sessions of this rank came before, plus one.
    pub incarnation: u64,
    /// Cancelled when a newer incarnation of the rank attaches.
    pub superseded: CancellationToken,
    /// Set once this session's departure is handled everywhere.
    pub ended: watch::Sender<bool>,
    /// The previous live session of the rank: end it, then wait until its departure is handled.
    pub previous: Option<(CancellationToken, watch::Receiver<bool>)>,
}

/// Why an admin request was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The name is taken.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// No such world.
    #[error("no world named {0}")]
    NoWorld(String),
    /// Refused with an MPI class.
    #[error(transparent)]
    Rma(#[from] RmaError),
}

/// The directory.
#[derive(Debug)]
pub struct Registry {
    inner: RwLock<Inner>,
    me: Weak<Registry>,
    audit: AuditHandle,
    lease_ttl: Duration,
}

fn check_name(what: &str, name: &str) -> Result<(), RmaError> {
    let valid = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(RmaError::new(
            ErrorClass::Arg,
            format!("{what} name {name:?} must be 1 to 128 characters of letters, digits, _ - ."),
        ))
    }
}

fn new_token() -> String {
    let bytes: [u8; 24] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Registry {
    /// An empty directory whose windows record into `audit` and get ids after `last_window`
    /// (the highest id the audit store has seen, so ids are never reused).
    /// Sessions that send nothing for `lease_ttl` are ended.
    pub fn new(audit: AuditHandle, last_window: u64, lease_ttl: Duration) -> Arc<Self> {
        Arc::new_cyclic(|me| Registry {
            inner: RwLock::new(Inner {
                next_window: last_window,
                ..Inner::default()
            }),
            me: me.clone(),
            audit,
            lease_ttl,
        })
    }

    /// How long a session may stay silent before its lease lapses.
    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    /// A new session of `rank` of `world`: its incarnation (1 for the rank's first session)
    /// becomes the rank's live one.
    pub fn begin_session(&self, world: &str, rank: u32) -> SessionSlot {
        let mut inner = self.write();
        let key = (world.to_string(), rank);
        let count = inner.incarnations.entry(key.clone()).or_insert(0);
        *count += 1;
        let incarnation = *count;
        let superseded = CancellationToken::new();
        let (ended, watcher) = watch::channel(false);
        let previous = inner.live.insert(
            key,
            LiveSession {
                incarnation,
                superseded: superseded.clone(),
                ended: watcher,
            },
        );
        SessionSlot {
            incarnation,
            superseded,
            ended,
            previous: previous.map(|live| (live.superseded, live.ended)),
        }
    }

    /// Whether `incarnation` is still the live session of `rank` (no newer one attached).
    pub fn is_live(&self, world: &str, rank: u32, incarnation: u64) -> bool {
        self.read()
            .live
            .get(&(world.to_string(), rank))
            .is_some_and(|live| live.incarnation == incarnation)
    }

    /// The session `incarnation` of `rank` ended; it stays the rank's last one unless a newer
    /// one attached. Returns whether no newer one did.
    pub fn end_session(&self, world: &str, rank: u32, incarnation: u64) -> bool {
        let mut inner = self.write();
        let key = (world.to_string(), rank);
        let last = inner
            .live
            .get(&key)
            .is_some_and(|live| live.incarnation == incarnation);
        if last {
            inner.live.remove(&key);
            // the world was deleted while this session outlived it: nothing needs its count
            if !inner.worlds.contains_key(world) {
                inner.incarnations.remove(&key);
            }
        }
        last
    }

    /// The audit writer windows record into.
    pub fn audit(&self) -> &AuditHandle {
        &self.audit
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner
            .write()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Creates a world of `nranks` ranks and returns one token per rank.
    ///
    /// # Errors
    /// A taken name, a bad name, or a size outside 1..=[`MAX_RANKS`].
    pub fn create_world(&self, name: &str, nranks: u32) -> Result<Vec<String>, RegistryError> {
        check_name("world", name)?;
        if nranks == 0 {
            return Err(RmaError::new(ErrorClass::Arg, "a world needs at least one rank").into());
        }
        if nranks > MAX_RANKS {
            return Err(RmaError::new(
                ErrorClass::NoMem,
                format!("a world may have at most {MAX_RANKS} ranks, not {nranks}"),
            )
            .into());
        }
        let mut inner = self.write();
        if inner.worlds.contains_key(name) {
            return Err(RegistryError::AlreadyExists(format!("world {name}")));
        }
        let tokens: Vec<String> = (0..nranks).map(|_| new_token()).collect();
        for (rank, token) in tokens.iter().enumerate() {
            inner
                .tokens
                .insert(token.clone(), (name.to_string(), rank as u32));
        }
        let collectives = WorldHandle::spawn(name, nranks, self.me.clone());
        inner.worlds.insert(
            name.to_string(),
            World {
                nranks,
                tokens: tokens.clone(),
                collectives,
                windows: BTreeMap::new(),
            },
        );
        tracing::info!(world = name, nranks, "world created");
        Ok(tokens)
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
    /// An unknown world.
    pub fn delete_world(&self, name: &str) -> Result<(), RegistryError> {
        let mut inner = self.write();
        let world = inner
            .worlds
            .remove(name)
            .ok_or_else(|| RegistryError::NoWorld(name.to_string()))?;
        for token in &world.tokens {
            inner.tokens.remove(token);
        }
        // a rank's session count goes with the world, unless a session still runs (it is
        // dropped when that ends, and until then a world of the same name counts on from it)
        for rank in 0..world.nranks {
            let key = (name.to_string(), rank);
            if !inner.live.contains_key(&key) {
                inner.incarnations.remove(&key);
            }
        }
        for id in world.windows.values() {
            if let Some(entry) = inner.windows.remove(id) {
                entry.ranks.iter().for_each(WindowServerHandle::stop);
            }
        }
        tracing::info!(world = name, "world deleted");
        Ok(())
    }

    /// The membership a rank token grants.
    pub fn authenticate(&self, token: &str) -> Option<Membership> {
        let inner = self.read();
        let (world, rank) = inner.tokens.get(token)?;
        let entry = inner.worlds.get(world)?;
        Some(Membership {
            world: world.clone(),
            rank: *rank,
            nranks: entry.nranks,
            collectives: entry.collectives.clone(),
        })
    }

    /// Creates a window on `world`: records its creation, then starts one actor per rank.
    ///
    /// # Errors
    /// An unknown world, a taken or bad name, or a bad shape or info (`MPI_ERR_SIZE`,
    /// `MPI_ERR_DISP`, `MPI_ERR_INFO`).
    #[allow(clippy::too_many_arguments)]
    pub async fn create_window(
        &self,
        world: &str,
        name: &str,
        flavor: Flavor,
        model: MemoryModel,
        sizes: Vec<u64>,
        disp_units: Vec<u32>,
        info: WindowInfo,
    ) -> Result<Arc<WindowDesc>, RegistryError> {
        check_name("window", name)?;
        // reserve the name and id; the window becomes visible only once its creation is logged
        let desc = {
            let mut inner = self.write();
            let nranks = inner
                .worlds
                .get(world)
                .ok_or_else(|| RegistryError::NoWorld(world.to_string()))?
                .nranks;
            WindowDesc::validate_shape(nranks, &sizes, &disp_units)?;
            if inner.worlds[world].windows.contains_key(name) {
                return Err(RegistryError::AlreadyExists(format!(
                    "window {name} in world {world}"
                )));
            }
            inner.next_window += 1;
            let id = inner.next_window;
            if let Some(entry) = inner.worlds.get_mut(world) {
                entry.windows.insert(name.to_string(), id);
            }
            Arc::new(WindowDesc {
                id,
                name: name.to_string(),
                world: world.to_string(),
                flavor,
                model,
                sizes,
                disp_units,
                info,
            })
        };
        let created = Pending {
            window: desc.id,
            rank: 0,
            incarnation: 0,
            at_ns: self.audit.now(),
            event: Event::WindowCreated {
                world: world.to_string(),
                name: name.to_string(),
                sizes: desc.sizes.clone(),
                disp_units: desc.disp_units.clone(),
            },
        };
        self.audit.submit(vec![created], Vec::new()).await;
        if self.audit.durability() == Durability::Sync {
            self.audit.flush().await;
        }
        let nranks = desc.nranks();
        let ranks = desc
            .sizes
            .iter()
            .enumerate()
            .map(|(rank, &size)| {
                WindowServerHandle::spawn(desc.id, rank as u32, nranks, size, self.audit.clone())
            })
            .collect();
        let mut inner = self.write();
        let still_wanted = inner
            .worlds
            .get(world)
            .is_some_and(|entry| entry.windows.get(name) == Some(&desc.id));
        let entry = Arc::new(WindowEntry {
            desc: Arc::clone(&desc),
            ranks,
        });
        if !still_wanted {
            // the world was deleted meanwhile
            entry.ranks.iter().for_each(WindowServerHandle::stop);
            return Err(RegistryError::NoWorld(world.to_string()));
        }
        inner.windows.insert(desc.id, entry);
        tracing::info!(world, window = name, id = desc.id, "window created");
        Ok(desc)
    }

    /// The window `name` of `world`.
    pub fn window(&self, world: &str, name: &str) -> Option<Arc<WindowEntry>> {
        let inner = self.read();
        let id = inner.worlds.get(world)?.windows.get(name)?;
        inner.windows.get(id).cloned()
    }

    /// Every window of `world`, by name.
    ///
    /// # Errors
    /// An unknown world.
    pub fn list_windows(&self, world: &str) -> Result<Vec<Arc<WindowDesc>>, RegistryError> {
        let inner = self.read();
        let entry = inner
            .worlds
            .get(world)
            .ok_or_else(|| RegistryError::NoWorld(world.to_string()))?;
        Ok(entry
            .windows
            .values()
            .filter_map(|id| inner.windows.get(id))
            .map(|window| Arc::clone(&window.desc))
            .collect())
    }

    /// Removes a window and stops its actors (pending calls fail with `MPI_ERR_WIN`).
    pub fn remove_window(self: Arc<Self>, id: u64) {
        let mut inner = self.write();
        let Some(entry) = inner.windows.remove(&id) else {
            return;
        };
        if let Some(world) = inner.worlds.get_mut(&entry.desc.world) {
            world.windows.remove(&entry.desc.name);
        }
        entry.ranks.iter().for_each(WindowServerHandle::stop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Arc<Registry> {
        Registry::new(AuditHandle::off(), 0, Duration::from_secs(60))
    }

    #[tokio::test]
    async fn a_deleted_world_leaves_no_session_counts_behind() {
        let registry = registry();
        for cycle in 0..3 {
            let name = format!("w{cycle}");
            registry.create_world(&name, 2).unwrap();
            for rank in 0..2 {
                let slot = registry.begin_session(&name, rank);
                assert_eq!(slot.incarnation, 1);
                assert!(registry.end_session(&name, rank, slot.incarnation));
            }
            registry.delete_world(&name).unwrap();
        }
        assert!(registry.read().incarnations.is_empty());
    }

    #[tokio::test]
    async fn a_session_outliving_its_world_drops_the_count_when_it_ends() {
        let registry = registry();
        registry.create_world("w", 1).unwrap();
        let first = registry.begin_session("w", 0);
        registry.delete_world("w").unwrap();
        // a world of the same name while the old session runs: counts on, no clash
        registry.create_world("w", 1).unwrap();
        let second = registry.begin_session("w", 0);
        assert_eq!(second.incarnation, 2);
        assert!(!registry.end_session("w", 0, first.incarnation));
        assert!(registry.is_live("w", 0, second.incarnation));
        assert!(registry.end_session("w", 0, second.incarnation));
        registry.delete_world("w").unwrap();
        assert!(registry.read().incarnations.is_empty());
        // and one that ends after its world went takes its count with it
        registry.create_world("v", 1).unwrap();
        let orphan = registry.begin_session("v", 0);
        registry.delete_world("v").unwrap();
        assert!(registry.end_session("v", 0, orphan.incarnation));
        assert!(registry.read().incarnations.is_empty());
    }
}
