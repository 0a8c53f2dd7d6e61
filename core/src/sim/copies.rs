//! How a rank's two copies of a window exchange what they hold outside the calls that move
//! it: an early publication of its stores ([`Publish`](super::Choice::Publish)), an early
//! refresh of its private copy ([`Refresh`](super::Choice::Refresh)), and the unified model's
//! convergence once the programs ended.
//!
//! Owns: carrying those exchanges out through the target engine (a push, a pull) and the
//! private copy. Must not: decide when one may happen (the schedule and `choices` do) or
//! what a pull may overwrite (`PrivateCopy::pull`).

use super::{narrate, Input, MemoryModel, Outcome, Ref, To, World};

impl World {
    /// Rank `rank` publishes its unpublished stores to its public copy of `window` now,
    /// through its target's inbox as a call's push travels.
    pub(super) fn publish(&mut self, window: u64, rank: u32) {
        let state = &mut self.ranks[rank as usize];
        let Some(open) = state.windows.get_mut(&window) else {
            return;
        };
        let (me, segments) = (open.me, open.copy.take_push());
        if self.narrated {
            self.run.narration.push(narrate::published(rank, &segments));
        }
        self.send(window, me, Input::Push { segments });
    }

    /// What operations changed in rank `rank`'s public copy of `window` reaches its private
    /// copy now: the pull its target answers a sync with ([`Input::Pull`]), taken at once,
    /// which never overwrites a store not yet published ([`PrivateCopy::pull`]).
    pub(super) fn refresh(&mut self, window: u64, rank: u32) {
        let state = &self.ranks[rank as usize];
        let Some(me) = state.windows.get(&window).map(|open| open.me) else {
            return;
        };
        let reply = Ref {
            rank,
            call: state.next,
            to: To::Caller,
        };
        let Some(effects) = self.handle(window, me, Input::Pull { reply }) else {
            return;
        };
        let mut pulled = 0;
        if let Some(open) = self.ranks[rank as usize].windows.get_mut(&window) {
            for (_, answer) in effects.answers {
                if let Ok(Outcome::Synced { pull, .. }) = answer {
                    pulled += pull.iter().map(|s| s.data.len()).sum::<usize>();
                    open.copy.pull(pull);
                }
            }
        }
        if self.narrated {
            self.run.narration.push(narrate::refreshed(rank, pulled));
        }
    }

    /// The unified model once the programs ended: what a rank stored reaches its public
    /// copy and what operations changed there reaches its private copy — eventually, MPI
    /// says, so after every load of the run (a run's steps offered both all along, as
    /// optional steps); the copies the run ends with are one.
    pub(super) fn converge(&mut self) {
        // not steps of the trace: a narration has one happening a step
        let narrated = std::mem::replace(&mut self.narrated, false);
        let unified: Vec<u64> = self
            .windows
            .iter()
            .filter(|(_, sim)| sim.desc.model == MemoryModel::Unified)
            .map(|(&id, _)| id)
            .collect();
        for window in unified {
            for rank in 0..self.ranks.len() as u32 {
                let Some(open) = self.ranks[rank as usize].windows.get_mut(&window) else {
                    continue;
                };
                let (me, segments) = (open.me, open.copy.take_push());
                if !segments.is_empty() {
                    self.handle(window, me, Input::Push { segments });
                }
                self.refresh(window, rank);
            }
        }
        self.narrated = narrated;
    }
}
