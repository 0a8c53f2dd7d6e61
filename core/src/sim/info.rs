//! `MPI_Win_set_info` in the simulated world: a collective of the window's ranks through
//! core's `Collectives` engine (the one the server's world actor runs), the new info in place
//! for every call after it — admission's checks and which accumulates may overtake — once
//! every rank asked for the same.
//!
//! Owns: carrying the engine's effects out (the info put in place, each rank released, its
//! `info_set` recorded or its error kept). Must not: decide whether the infos match or what a
//! key means (`Collectives::propose_info`, `WindowInfo::updated`).

use super::World;
use crate::audit::Event;
use crate::{ErrorClass, RmaError};

impl World {
    /// Rank `rank`'s action `action` asks window `window` for the keys `pairs`: a value that
    /// cannot be used fails at once; otherwise the rank waits until every rank of the window
    /// asked, and all return together (with `MPI_ERR_INFO` when they asked for different
    /// infos, nothing changed).
    pub(super) fn set_info(
        &mut self,
        rank: u32,
        action: usize,
        window: u64,
        pairs: &[(String, String)],
    ) {
        let Some(sim) = self.windows.get(&window) else {
            let error = RmaError::new(ErrorClass::Win, format!("window {window} is not open"));
            self.fail(rank, action, error);
            return;
        };
        let asked = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let info = match sim.desc.info.updated(asked) {
            Ok(info) => info,
            Err(error) => {
                self.fail(rank, action, error);
                return;
            }
        };
        let group = sim.desc.group.clone();
        self.ranks[rank as usize].in_collective = Some(window);
        let effects = self
            .collectives
            .propose_info(window, rank, info, &group, (rank, action));
        if let Some((id, info)) = effects.info_set {
            if let Some(sim) = self.windows.get_mut(&id) {
                sim.desc.info = info;
            }
        }
        for ((rank, action), answer) in effects.answers {
            self.ranks[rank as usize].in_collective = None;
            match answer {
                Ok(()) => {
                    let info = self
                        .windows
                        .get(&window)
                        .map(|sim| sim.desc.info.to_pairs());
                    let info = info.unwrap_or_default().into_iter().collect();
                    self.log(window, rank, action, Event::InfoSet { info });
                }
                Err(error) => self.fail(rank, action, error),
            }
        }
    }
}
