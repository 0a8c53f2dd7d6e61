//! The registry as the web view reads it: every world with its ranks' sessions and its
//! windows.
//!
//! Owns: the read-only views (`WorldView`, `RankView`). Must not: change the directory or hold
//! its lock past building the view.

use std::sync::Arc;
use std::time::Duration;

use onesided_core::window::WindowDesc;

use super::Registry;

/// A rank of a world as the web view shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankView {
    /// The rank.
    pub rank: u32,
    /// Sessions of the rank so far (0: it never attached).
    pub incarnations: u64,
    /// The live session's incarnation and how long until its lease lapses; `None` while the
    /// rank has no session.
    pub live: Option<(u64, Duration)>,
}

/// A world as the web view shows it.
#[derive(Clone, Debug)]
pub struct WorldView {
    /// Its name.
    pub name: String,
    /// Its ranks, with their sessions.
    pub ranks: Vec<RankView>,
    /// Its windows, by name.
    pub windows: Vec<Arc<WindowDesc>>,
}

impl Registry {
    /// Every world with its ranks' sessions and its windows (read-only, for the web view).
    pub fn overview(&self) -> Vec<WorldView> {
        let inner = self.read();
        inner
            .worlds
            .iter()
            .map(|(name, world)| WorldView {
                name: name.clone(),
                ranks: (0..world.nranks)
                    .map(|rank| {
                        let key = (name.clone(), rank);
                        RankView {
                            rank,
                            incarnations: inner.incarnations.get(&key).copied().unwrap_or(0),
                            live: inner
                                .live
                                .get(&key)
                                .map(|live| (live.incarnation, live.lease.remaining())),
                        }
                    })
                    .collect(),
                windows: world
                    .windows
                    .values()
                    .filter_map(|id| inner.windows.get(id))
                    .map(|entry| entry.now())
                    .collect(),
            })
            .collect()
    }
}
