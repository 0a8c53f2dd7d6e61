//! Windows: creating one (`NewWindow`), describing, changing and freeing it, and whether any
//! of a world's is busy.
//!
//! Owns: a window's entry in the directory — its id, its name in its world, its bytes taken
//! from the limits before anything is created and given back when it goes, its creation
//! recorded and stored before its actors start, and the info in use. Must not: hold the
//! directory's lock across an `.await`, or reach into an actor except through its handle.

use std::sync::{Arc, Mutex};

use onesided_core::audit::Event;
use onesided_core::fence::FenceTally;
use onesided_core::window::{Flavor, MemoryModel, WindowDesc, WindowInfo};
use onesided_core::RmaError;

use super::handover::spec_json;
use super::{bytes_of, check_name, unavailable, NewWindow, Registry, RegistryError};
use crate::actor::WindowServerHandle;
use crate::audit::{Durability, Pending, StoredWindow};
use crate::limits::exhausted;

/// A window: its description and the address of each rank's actor.
#[derive(Debug)]
pub struct WindowEntry {
    /// What every rank knows about it.
    pub desc: Arc<WindowDesc>,
    /// One actor per rank, index = rank.
    pub ranks: Vec<WindowServerHandle>,
    /// Which ranks entered which fence: the last to enter tells every rank's actor.
    pub fences: Mutex<FenceTally>,
    /// The description with the info in use: `desc` until `MPI_Win_set_info` changed it.
    current: std::sync::RwLock<Arc<WindowDesc>>,
}

impl WindowEntry {
    /// The window `desc` served by `ranks`, no fence entered yet.
    pub fn new(desc: Arc<WindowDesc>, ranks: Vec<WindowServerHandle>) -> Self {
        let fences = Mutex::new(FenceTally::new(desc.nranks()));
        WindowEntry {
            current: std::sync::RwLock::new(Arc::clone(&desc)),
            desc,
            ranks,
            fences,
        }
    }

    /// What every rank knows about the window now: its description with the info in use
    /// (`desc` has the creation's).
    pub fn now(&self) -> Arc<WindowDesc> {
        Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(|poison| poison.into_inner()),
        )
    }

    fn set_info(&self, info: WindowInfo) -> Arc<WindowDesc> {
        let mut now = self
            .current
            .write()
            .unwrap_or_else(|poison| poison.into_inner());
        let mut desc = (**now).clone();
        desc.info = info;
        *now = Arc::new(desc);
        Arc::clone(&now)
    }
}

impl Registry {
    /// Creates a window on `world`: records its creation, then starts one actor per rank.
    ///
    /// # Errors
    /// An unknown world, a taken or bad name, a bad shape or info (`MPI_ERR_SIZE`,
    /// `MPI_ERR_DISP`, `MPI_ERR_INFO`), or more bytes than the limits allow
    /// (`MPI_ERR_NO_MEM`).
    pub async fn create_window(
        &self,
        world: &str,
        window: NewWindow,
    ) -> Result<Arc<WindowDesc>, RegistryError> {
        let NewWindow {
            name,
            flavor,
            model,
            sizes,
            disp_units,
            info,
            group,
        } = window;
        let name = name.as_str();
        check_name("window", name)?;
        // ids unique across a cluster come from its database
        let placed_id = self.placement().window_id().await.map_err(unavailable)?;
        // reserve the name and id; the window becomes visible only once its creation is logged
        let desc = {
            let mut inner = self.write();
            let nranks = inner
                .worlds
                .get(world)
                .ok_or_else(|| RegistryError::NoWorld(world.to_string()))?
                .nranks;
            let group = WindowDesc::validate_group(nranks, group.as_deref())?;
            WindowDesc::validate_shape(group.len() as u32, &sizes, &disp_units)?;
            WindowDesc::validate_flavor(flavor, &sizes, &disp_units)?;
            info.check_shape(&sizes, &disp_units)?;
            if inner.worlds[world].windows.contains_key(name) {
                return Err(RegistryError::AlreadyExists(format!(
                    "window {name} in world {world}"
                )));
            }
            self.room(&sizes)?;
            let id = placed_id.unwrap_or_else(|| {
                inner.next_window += 1;
                inner.next_window
            });
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
                group,
            })
        };
        self.placement().note_window(desc.id, world);
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
                info: desc.info.to_pairs().into_iter().collect(),
                unified: desc.model == MemoryModel::Unified,
            },
        };
        self.audit.submit(vec![created], Vec::new()).await;
        if self.audit.durability() == Durability::Sync {
            self.audit.flush().await;
        }
        if let Some(store) = &self.store {
            let stored = StoredWindow {
                id: desc.id,
                world: world.to_string(),
                name: name.to_string(),
                spec: spec_json(&desc),
            };
            if let Err(error) = store.save_window(&stored).await {
                let mut inner = self.write();
                if let Some(entry) = inner.worlds.get_mut(world) {
                    entry.windows.remove(name);
                }
                self.window_bytes.give_back(bytes_of(&desc));
                return Err(unavailable(error));
            }
        }
        let zeroed = desc
            .sizes
            .iter()
            .map(|&size| vec![0; size as usize])
            .collect();
        let ranks = self.spawn_ranks(&desc, zeroed, Vec::new(), 0);
        let mut inner = self.write();
        let still_wanted = inner
            .worlds
            .get(world)
            .is_some_and(|entry| entry.windows.get(name) == Some(&desc.id));
        let entry = Arc::new(WindowEntry::new(Arc::clone(&desc), ranks));
        if !still_wanted {
            // the world was deleted meanwhile
            self.window_bytes.give_back(bytes_of(&desc));
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

    /// Every rank of `window` called `MPI_Win_set_info` asking for `info`: it is the window's
    /// from now on, kept in the store so that a restart brings it back (the ranks' `info_set`
    /// events put it in the log).
    pub async fn set_window_info(&self, window: u64, info: WindowInfo) {
        let Some(entry) = self.read().windows.get(&window).cloned() else {
            return;
        };
        let desc = entry.set_info(info);
        if let Some(store) = &self.store {
            if let Err(error) = store.update_window_spec(window, &spec_json(&desc)).await {
                tracing::warn!(window, %error, "the window's new info is not stored");
            }
        }
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
            .map(|window| window.now())
            .collect())
    }

    /// Whether any rank of any window of `world` holds or waits for a lock, is in an epoch,
    /// or has operations pending (an admin's move waits for that to end).
    pub async fn world_busy(&self, world: &str) -> bool {
        let ranks: Vec<WindowServerHandle> = {
            let inner = self.read();
            let Some(entry) = inner.worlds.get(world) else {
                return false;
            };
            entry
                .windows
                .values()
                .filter_map(|id| inner.windows.get(id))
                .flat_map(|window| window.ranks.iter().cloned())
                .collect()
        };
        for rank in ranks {
            // a stopped actor is idle
            if let Ok(Some(_)) = rank.busy().await {
                return true;
            }
        }
        false
    }

    /// Removes a window and stops its actors (pending calls fail with `MPI_ERR_WIN`); a
    /// dynamic window's once they have stopped, having given back the bytes their regions
    /// spanned (so that they are free when the free is answered).
    pub async fn remove_window(self: Arc<Self>, id: u64) {
        let entry = {
            let mut inner = self.write();
            let Some(entry) = inner.windows.remove(&id) else {
                return;
            };
            if let Some(world) = inner.worlds.get_mut(&entry.desc.world) {
                world.windows.remove(&entry.desc.name);
            }
            entry
        };
        self.window_bytes.give_back(bytes_of(&entry.desc));
        if entry.desc.flavor != Flavor::Dynamic {
            entry.ranks.iter().for_each(WindowServerHandle::stop);
            return;
        }
        for rank in &entry.ranks {
            rank.stop_and_wait().await;
        }
    }

    /// Takes the bytes a window of `sizes` needs, if the limits leave room for them.
    fn room(&self, sizes: &[u64]) -> Result<u64, RmaError> {
        let per_rank = self.limits.max_window_bytes_per_rank;
        if let Some((rank, size)) = sizes.iter().enumerate().find(|(_, &size)| size > per_rank) {
            return Err(exhausted(format!(
                "rank {rank} asks for {size} bytes, more than the {per_rank} bytes a rank may \
                 expose on this server"
            )));
        }
        let bytes = sizes
            .iter()
            .try_fold(0u64, |sum, &size| sum.checked_add(size))
            .unwrap_or(u64::MAX);
        self.window_bytes.take(bytes).map_err(|in_use| {
            exhausted(format!(
                "a window of {bytes} bytes does not fit: windows take {in_use} of the server's \
                 {} bytes",
                self.window_bytes.limit()
            ))
        })?;
        Ok(bytes)
    }

    /// The window with id `id`, if it exists.
    pub fn window_by_id(&self, id: u64) -> Option<Arc<WindowEntry>> {
        self.read().windows.get(&id).cloned()
    }
}
