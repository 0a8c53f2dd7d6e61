//! The world's collectives in the simulated world — the barrier, a window's free and
//! `MPI_Win_set_info` — through core's `Collectives` engine (the one the server's world actor
//! runs): who returns when, and how a departed rank fails them. `MPI_Win_set_info`'s new info
//! is in place for every call after it — admission's checks and which accumulates may
//! overtake — once every rank asked for the same.
//!
//! Owns: carrying the engine's effects out (the info put in place, each rank released, what
//! it records as it returns, or its error kept). Must not: decide whether a collective
//! completes or fails, whether the infos match or what a key means (`Collectives`,
//! `WindowInfo::updated`).

use super::{Action, World};
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
        self.collective_answered(effects.answers);
    }

    /// The world's collectives answered these ranks' actions (in rank order, as every rank
    /// waiting in one returns at one step): a barrier's exit or a set info recorded, a free's
    /// call answered, or the action failed.
    pub(super) fn collective_answered(
        &mut self,
        mut answers: Vec<((u32, usize), Result<(), RmaError>)>,
    ) {
        answers.sort_by_key(|((rank, _), _)| *rank);
        for ((rank, action), answer) in answers {
            let state = &mut self.ranks[rank as usize];
            state.acknowledged = state.acknowledged.max(Some(action));
            match state.program.get(action) {
                Some(Action::Barrier) => {
                    state.in_barrier = false;
                    match answer {
                        Ok(()) => self.log_open(rank, action, &Event::BarrierExit),
                        Err(error) => self.fail(rank, action, error),
                    }
                }
                Some(&Action::SetInfo { window, .. }) => {
                    state.in_collective = None;
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
                // a window's free: the call it waits in is answered
                _ => {
                    if let Err(error) = answer {
                        self.fail(rank, action, error);
                    }
                    self.answered(rank);
                    self.maybe_done(rank);
                }
            }
        }
    }
}
