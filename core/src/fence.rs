//! Which ranks reached a fence: the count that lets a fence cost O(N) messages in all, not N²
//! end-of-epoch markers (DESIGN.md "The protocol between ranks").
//!
//! Owns: per closed epoch, how many ranks entered the fence that closes it. Must not: know
//! how the news travels (the caller tells every target, [`crate::target::Input::FenceReached`]).
//!
//! A rank arrives only after it handed every operation it issued in the epoch to its target's
//! inbox, so the notice that follows the last arrival reaches each target behind all of them:
//! no per-origin marker is needed to order them.

use std::collections::BTreeMap;

/// The arrivals of one window's ranks at their fences.
#[derive(Debug)]
pub struct FenceTally {
    nranks: u32,
    /// Per epoch still open somewhere: how many ranks entered the fence that closes it.
    arrived: BTreeMap<u64, u32>,
    /// Per rank: the last epoch whose closing fence it entered.
    last: Vec<Option<u64>>,
}

impl FenceTally {
    /// A window of `nranks` ranks, none of which fenced.
    pub fn new(nranks: u32) -> Self {
        FenceTally {
            nranks,
            arrived: BTreeMap::new(),
            last: vec![None; nranks as usize],
        }
    }

    /// Rank `rank` entered the fence that closes `epoch`, having handed on everything it issued
    /// in that epoch. `true` when it was the last rank to do so: the caller then tells every
    /// target. An arrival for an epoch the rank already closed (or a rank outside the window)
    /// counts nothing.
    pub fn arrive(&mut self, rank: u32, epoch: u64) -> bool {
        let Some(last) = self.last.get_mut(rank as usize) else {
            return false;
        };
        if last.is_some_and(|closed| closed >= epoch) {
            return false;
        }
        *last = Some(epoch);
        let count = self.arrived.entry(epoch).or_insert(0);
        *count += 1;
        if *count < self.nranks {
            return false;
        }
        self.arrived.remove(&epoch);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::FenceTally;

    #[test]
    fn the_last_arrival_and_only_it_completes_an_epoch() {
        let mut tally = FenceTally::new(3);
        assert!(!tally.arrive(0, 0));
        assert!(!tally.arrive(2, 0));
        // twice is not two ranks
        assert!(!tally.arrive(2, 0));
        assert!(tally.arrive(1, 0));
        assert!(!tally.arrive(1, 1));
        // a late arrival for an epoch it already closed
        assert!(!tally.arrive(1, 0));
        assert!(!tally.arrive(0, 1));
        assert!(tally.arrive(2, 1));
        assert!(tally.arrived.is_empty());
    }

    #[test]
    fn a_rank_outside_the_window_counts_nothing() {
        let mut tally = FenceTally::new(1);
        assert!(!tally.arrive(1, 0));
        assert!(tally.arrive(0, 0));
    }
}
