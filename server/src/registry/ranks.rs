//! A window's rank actors: starting them (`RankStart`) with their public copies, regions and
//! shared window log, and the lock fairness new windows' actors get.
//!
//! Owns: what a rank's actor starts with that the registry decides (its bytes' limits, the
//! fairness in use, the log its window's ranks share). Must not: decide what the copies hold
//! (a new window's are zeroed, a recovered one's come from the store) or keep an actor's
//! state.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use onesided_core::window::{Flavor, WindowDesc};

use super::Registry;
use crate::actor::{Dynamic, RankStart, WindowLog, WindowServerHandle};

impl Registry {
    /// Sets how long windows created from now on hold a shared lock request back behind a
    /// waiting exclusive one (at most; see core's `locks`).
    pub fn set_lock_fairness(&self, fairness: Duration) {
        let nanos = u64::try_from(fairness.as_nanos()).unwrap_or(u64::MAX);
        self.lock_fairness_ns
            .store(nanos, std::sync::atomic::Ordering::Relaxed);
    }

    /// Starts the actors of `desc`'s ranks with their public copies (and a dynamic window's
    /// regions, by rank): one window log shared by all of them, `logged` bytes of it since the
    /// ranks' snapshots.
    pub(super) fn spawn_ranks(
        &self,
        desc: &WindowDesc,
        copies: Vec<Vec<u8>>,
        regions: Vec<BTreeMap<u64, u64>>,
        logged: u64,
    ) -> Vec<WindowServerHandle> {
        let span = copies.iter().map(|copy| copy.len() as u64).sum();
        let log = WindowLog::new(span, logged);
        copies
            .into_iter()
            .enumerate()
            .map(|(rank, copy)| {
                let dynamic = (desc.flavor == Flavor::Dynamic).then(|| Dynamic {
                    max_bytes: self.limits.max_window_bytes_per_rank,
                    regions: regions.get(rank).cloned().unwrap_or_default(),
                    window_bytes: Arc::clone(&self.window_bytes),
                });
                let start = RankStart {
                    window: desc.id,
                    rank: rank as u32,
                    nranks: desc.nranks(),
                    model: desc.model,
                    public: copy,
                    dynamic,
                    lock_fairness: self.lock_fairness(),
                    log: Arc::clone(&log),
                };
                WindowServerHandle::spawn(start, self.audit.clone(), Arc::clone(&self.metrics))
            })
            .collect()
    }

    fn lock_fairness(&self) -> Duration {
        Duration::from_nanos(
            self.lock_fairness_ns
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }
}
