//! PCT, probabilistic concurrency testing (Burckhardt, Kothari, Musuvathi, Nagarakatte,
//! ASPLOS 2010), as a [`Schedule`] of the simulator.
//!
//! Every thread of the world gets a random priority of at least `depth` when it first can
//! move, and at each step the enabled thread of highest priority moves; at `depth - 1` change
//! points, steps drawn uniformly from the run's expected length, the thread that moves drops to
//! a priority below every initial one (the i-th to `depth - 1 - i`). A bug that needs `depth`
//! orderings between threads is then found in one schedule with probability at least
//! 1 / (threads × steps^(depth - 1)), where uniform random choices can need far more: a rank that
//! must stay behind for many steps is the lowest priority once in every few schedules.
//!
//! Owns: what a thread is here — a rank (its next call), a target of a window (its inbox, in
//! order or overtaken), the answers on their way (one thread, the oldest answer first), and a
//! rank's copies of a window (its early publications and refreshes) — and the priorities.
//! Must not: know what a choice does.

use std::collections::BTreeMap;

use onesided_core::sim::{Choice, Schedule, Seeded};

/// Who moves when a choice is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Thread {
    Rank(u32),
    Target { window: u64, rank: u32 },
    Answers,
    Copies { window: u64, rank: u32 },
}

fn thread(choice: &Choice) -> Thread {
    match *choice {
        Choice::Call { rank } => Thread::Rank(rank),
        Choice::Deliver { window, rank }
        | Choice::Overtake { window, rank, .. }
        | Choice::Lose { window, rank, .. } => Thread::Target { window, rank },
        Choice::Answer { .. } => Thread::Answers,
        Choice::Publish { window, rank } | Choice::Refresh { window, rank } => {
            Thread::Copies { window, rank }
        }
    }
}

/// One PCT schedule.
#[derive(Debug)]
pub(super) struct Pct {
    rng: Seeded,
    depth: u64,
    priorities: BTreeMap<Thread, u64>,
    /// The steps (from 1) at which the moving thread's priority drops.
    changes: Vec<u64>,
    step: u64,
}

impl Pct {
    /// The schedule of `seed` for bugs of depth `depth` (at least 1) in runs of about `steps`
    /// steps.
    pub(super) fn new(seed: u64, depth: u32, steps: u64) -> Self {
        let mut rng = Seeded::new(seed);
        let changes = (1..depth.max(1))
            .map(|_| 1 + rng.next_u64() % steps.max(1))
            .collect();
        Pct {
            rng,
            depth: u64::from(depth.max(1)),
            priorities: BTreeMap::new(),
            changes,
            step: 0,
        }
    }
}

impl Schedule for Pct {
    fn pick(&mut self, choices: &[Choice]) -> usize {
        self.step += 1;
        let mut best: Option<(usize, u64)> = None;
        for (index, choice) in choices.iter().enumerate() {
            let rng = &mut self.rng;
            let depth = self.depth;
            let priority = *self
                .priorities
                .entry(thread(choice))
                .or_insert_with(|| depth + (rng.next_u64() >> 1));
            // strictly higher: among the answers, the oldest (first offered) moves
            if best.is_none_or(|(_, highest)| priority > highest) {
                best = Some((index, priority));
            }
        }
        let index = best.map_or(0, |(index, _)| index);
        if let Some(change) = self.changes.iter().position(|&at| at == self.step) {
            if let Some(choice) = choices.get(index) {
                let lowered = self.depth - 1 - change as u64;
                self.priorities.insert(thread(choice), lowered);
            }
        }
        index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_priority_thread_moves_until_a_change_point_lowers_it() {
        let choices = [
            Choice::Call { rank: 0 },
            Choice::Call { rank: 1 },
            Choice::Answer { index: 0 },
        ];
        let mut pct = Pct::new(5, 2, 10);
        let change = pct.changes[0] as usize;
        let moved: Vec<usize> = (0..=change).map(|_| pct.pick(&choices)).collect();
        // the same thread moves up to and at the change point, another one after it
        assert!(moved[..change].iter().all(|&m| m == moved[0]), "{moved:?}");
        assert_ne!(moved[change], moved[0], "{moved:?}");
    }
}
