//! What a restart's recovery and a cluster node hand the registry without creating or deleting
//! anything: worlds and windows brought back from the store (`restore`, a window's stored spec
//! read back by `desc_from_spec`), and a world let go of (`evict_world`).
//!
//! Owns: the stored form of a window's shape and info (`spec_json` and its reader), and
//! rebuilding the directory's entries, actors and session counts from what the store kept.
//! Must not: read the store itself (`crate::recovery` does), or write to it or the audit log
//! (nothing changed).

use std::collections::BTreeMap;
use std::sync::Arc;

use onesided_core::window::{Flavor, MemoryModel, WindowDesc, WindowInfo};

use super::worlds::take_world;
use super::{bytes_of, Registry, WindowEntry, World};
use crate::actor::WindowServerHandle;
use crate::audit::StoredWorld;
use crate::world::WorldHandle;

/// The JSON a window's shape and info are stored as.
pub(super) fn spec_json(desc: &WindowDesc) -> String {
    let info: serde_json::Map<String, serde_json::Value> = desc
        .info
        .to_pairs()
        .into_iter()
        .map(|(key, value)| (key, serde_json::Value::String(value)))
        .collect();
    serde_json::json!({
        "flavor": desc.flavor.name(),
        "model": desc.model.name(),
        "sizes": desc.sizes,
        "disp_units": desc.disp_units,
        "info": info,
        "group": desc.group,
    })
    .to_string()
}

/// A window rebuilt from the store: its description and every rank's public copy.
#[derive(Debug)]
pub struct RecoveredWindow {
    /// The description.
    pub desc: WindowDesc,
    /// Public copies, index = rank.
    pub copies: Vec<Vec<u8>>,
    /// A dynamic window's attached regions (offset → size), index = rank; empty otherwise.
    pub regions: Vec<std::collections::BTreeMap<u64, u64>>,
    /// How many rows of the log were read to rebuild it (after the ranks' oldest snapshot,
    /// and a dynamic window's regions before it).
    pub replayed: usize,
    /// What the rows after the oldest snapshot count towards the next round of snapshots
    /// ([`crate::actor::logged_bytes`]).
    pub logged: u64,
}

/// Parses a stored spec back into a description.
///
/// # Errors
/// A spec this version cannot read.
pub fn desc_from_spec(id: u64, world: &str, name: &str, spec: &str) -> anyhow::Result<WindowDesc> {
    use anyhow::Context;
    #[derive(serde::Deserialize)]
    struct Spec {
        flavor: String,
        /// Absent in specs stored before the unified model was offered: separate.
        #[serde(default)]
        model: Option<String>,
        sizes: Vec<u64>,
        disp_units: Vec<u32>,
        info: BTreeMap<String, String>,
        /// Absent in specs stored before groups: the whole world.
        #[serde(default)]
        group: Option<Vec<u32>>,
    }
    let spec: Spec = serde_json::from_str(spec).context("unreadable window spec")?;
    let flavor =
        Flavor::parse(&spec.flavor).with_context(|| format!("unknown flavor {:?}", spec.flavor))?;
    let model = match &spec.model {
        None => MemoryModel::Separate,
        Some(model) => {
            MemoryModel::parse(model).with_context(|| format!("unknown memory model {model:?}"))?
        }
    };
    let info = WindowInfo::parse(spec.info.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    Ok(WindowDesc {
        id,
        name: name.to_string(),
        world: world.to_string(),
        flavor,
        model,
        group: spec
            .group
            .unwrap_or_else(|| WindowDesc::whole_world(spec.sizes.len() as u32)),
        sizes: spec.sizes,
        disp_units: spec.disp_units,
        info,
    })
}

impl Registry {
    /// Brings back what a previous run of the server left in the store: every world with its
    /// tokens, every window not freed with its public copies, and the rank incarnations.
    pub fn restore(
        &self,
        worlds: Vec<StoredWorld>,
        windows: Vec<RecoveredWindow>,
        incarnations: Vec<(String, u32, u64)>,
    ) {
        let mut inner = self.write();
        for world in worlds {
            let mut tokens = vec![[0u8; 32]; world.nranks as usize];
            for (hash, rank) in &world.tokens {
                if let Some(slot) = tokens.get_mut(*rank as usize) {
                    *slot = *hash;
                }
                inner.tokens.insert(*hash, (world.name.clone(), *rank));
            }
            let collectives = WorldHandle::spawn(&world.name, world.nranks, self.me.clone());
            inner.worlds.insert(
                world.name.clone(),
                World {
                    nranks: world.nranks,
                    tokens,
                    collectives,
                    windows: BTreeMap::new(),
                },
            );
        }
        for window in windows {
            let desc = Arc::new(window.desc);
            let Some(world) = inner.worlds.get_mut(&desc.world) else {
                continue;
            };
            world.windows.insert(desc.name.clone(), desc.id);
            let ranks = self.spawn_ranks(&desc, window.copies, window.regions, window.logged);
            inner.next_window = inner.next_window.max(desc.id);
            self.placement().note_window(desc.id, &desc.world);
            // counted even past a limit lowered since: new windows wait for room
            self.window_bytes.take_anyway(bytes_of(&desc));
            tracing::info!(world = %desc.world, window = %desc.name, id = desc.id, "window recovered");
            inner
                .windows
                .insert(desc.id, Arc::new(WindowEntry::new(desc, ranks)));
        }
        for (world, rank, incarnation) in incarnations {
            let count = inner.incarnations.entry((world, rank)).or_insert(0);
            *count = (*count).max(incarnation);
        }
    }

    /// Lets go of `world` here without touching the store (another node serves it now, or
    /// this node is about to rebuild it from the store): its live sessions end, its windows'
    /// actors stop, its tokens are forgotten.
    pub fn evict_world(&self, name: &str) {
        let mut inner = self.write();
        let Some((world, windows)) = take_world(&mut inner, &self.window_bytes, name) else {
            return;
        };
        for rank in 0..world.nranks {
            let key = (name.to_string(), rank);
            if let Some(live) = inner.live.get(&key) {
                live.superseded.cancel();
            }
            inner.incarnations.remove(&key);
        }
        for entry in windows {
            entry.ranks.iter().for_each(WindowServerHandle::abandon);
        }
        tracing::info!(world = name, "world let go of");
    }
}
