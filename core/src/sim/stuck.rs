//! Where ranks wait when a simulated run can go no further: each stuck rank with the action
//! it waits in and the ranks it waits for, and the wait-for cycle among them (a deadlock).
//!
//! Owns: reading who waits for whom from the ranks' states and the target engines' queues
//! (`Target::holds_back`, `lock_holders`). Must not: change the world.

use super::{Action, Rank, World};
use crate::origin::Call;

/// A rank that could not move when a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stuck {
    /// The rank.
    pub rank: u32,
    /// The action of its program it waits in (a call or the barrier); `None` when it ran its
    /// whole program and operations it issued were never answered.
    pub action: Option<usize>,
    /// The ranks it waits for, in rank order: for the barrier, those not in it; for a fence,
    /// those not in a fence of the window; for an item held back at a target, the ranks holding
    /// a lock there, or else the target's owner (whose fence, post or complete it needs).
    pub on: Vec<u32>,
}

/// A wait-for cycle among stuck ranks: each waits for the next, the last for the first.
/// The first one of `stuck` (in rank order) on a cycle, following each rank's first wait
/// that leads to a cycle; `None` when the waits end at ranks that are not stuck.
pub fn wait_cycle(stuck: &[Stuck]) -> Option<Vec<u32>> {
    let of = |rank: u32| stuck.iter().find(|s| s.rank == rank);
    for start in stuck {
        // a depth-first walk over the waits, the path kept
        let mut path = vec![start.rank];
        let mut next = vec![0usize];
        while let Some(&rank) = path.last() {
            let depth = path.len() - 1;
            let on = of(rank).map_or(&[][..], |s| &s.on[..]);
            let Some(&then) = on.get(next[depth]) else {
                path.pop();
                next.pop();
                continue;
            };
            next[depth] += 1;
            if then == start.rank {
                return Some(path);
            }
            if of(then).is_some() && !path.contains(&then) {
                path.push(then);
                next.push(0);
            }
        }
    }
    None
}

impl World {
    /// Where rank `rank` waits at the end, and for whom; `None` when it finished.
    pub(super) fn stuck(&self, rank: u32) -> Option<Stuck> {
        let state = &self.ranks[rank as usize];
        let members = |window: Option<u64>| -> Vec<u32> {
            let sim = window.and_then(|window| self.windows.get(&window));
            sim.map_or_else(Vec::new, |sim| sim.desc.group.clone())
        };
        // the barrier (every rank), or a window's collective (its members): those not in it
        let waits_in = match state.in_collective {
            Some(window) => Some(members(Some(window))),
            None => state
                .in_barrier
                .then(|| (0..self.ranks.len() as u32).collect()),
        };
        if let Some(everyone) = waits_in {
            let inside = |r: &Rank| (r.in_barrier, r.in_collective);
            let on = everyone
                .into_iter()
                .filter(|&r| inside(&self.ranks[r as usize]) != inside(state))
                .collect();
            let action = Some(state.next - 1);
            return Some(Stuck { rank, action, on });
        }
        let (action, window) = match &state.waiting {
            Some(waiting) => (Some(waiting.call), Some(waiting.window)),
            None if state.awaits_requests() => (Some(state.next - 1), None),
            None if !state.outstanding.is_empty() => (None, None),
            None => return None,
        };
        let in_fence = |r: u32| {
            let other = &self.ranks[r as usize];
            other.waiting.as_ref().is_some_and(|w| {
                Some(w.window) == window
                    && matches!(other.program[w.call], Action::Call(Call::Fence { .. }))
            })
        };
        let fence =
            action.is_some_and(|a| matches!(state.program[a], Action::Call(Call::Fence { .. })));
        let mut on = std::collections::BTreeSet::new();
        if fence {
            let others = members(window).into_iter();
            on.extend(others.filter(|&r| r != rank && !in_fence(r)));
        }
        for (id, sim) in &self.windows {
            let Some(me) = state.windows.get(id).map(|open| open.me) else {
                continue;
            };
            for (target, engine) in sim.targets.iter().enumerate() {
                if !engine.holds_back(me) {
                    continue;
                }
                let holders: Vec<u32> = engine
                    .lock_holders()
                    .into_iter()
                    .filter(|&h| h != me)
                    .map(|h| sim.world_rank(h))
                    .collect();
                if holders.is_empty() {
                    on.insert(sim.world_rank(target as u32));
                } else {
                    on.extend(holders);
                }
            }
        }
        on.remove(&rank);
        Some(Stuck {
            rank,
            action,
            on: on.into_iter().collect(),
        })
    }
}
