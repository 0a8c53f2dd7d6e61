//! Sets of byte ranges: the owner's dirty (stored, not yet pushed) bytes and the bytes of a
//! public copy changed remotely since the owner's last pull.
//!
//! Owns: a sorted list of disjoint, non-adjacent half-open ranges. Must not: hold data.

/// Sorted, disjoint, non-adjacent half-open byte ranges `[start, end)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: Vec<(u64, u64)>,
}

impl RangeSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `[start, end)`, merging with overlapping or adjacent ranges. Empty ranges are ignored.
    pub fn insert(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        // First range whose end reaches `start` (could merge), last whose start is <= `end`.
        let first = self.ranges.partition_point(|&(_, e)| e < start);
        let last = self.ranges.partition_point(|&(s, _)| s <= end);
        if first == last {
            self.ranges.insert(first, (start, end));
            return;
        }
        let merged_start = start.min(self.ranges[first].0);
        let merged_end = end.max(self.ranges[last - 1].1);
        self.ranges
            .splice(first..last, std::iter::once((merged_start, merged_end)));
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Removes every range.
    pub fn clear(&mut self) {
        self.ranges.clear();
    }

    /// The ranges, sorted.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().copied()
    }

    /// Total number of bytes covered.
    pub fn covered(&self) -> u64 {
        self.ranges.iter().map(|(s, e)| e - s).sum()
    }

    /// Whether any byte of `[start, end)` is in the set.
    pub fn intersects(&self, start: u64, end: u64) -> bool {
        let first = self.ranges.partition_point(|&(_, e)| e <= start);
        self.ranges
            .get(first)
            .is_some_and(|&(s, _)| s < end && start < end)
    }

    /// The parts of `[start, end)` that are *not* in the set, in order.
    pub fn gaps_within(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut gaps = Vec::new();
        let mut cursor = start;
        let first = self.ranges.partition_point(|&(_, e)| e <= start);
        for &(s, e) in &self.ranges[first..] {
            if s >= end {
                break;
            }
            if s > cursor {
                gaps.push((cursor, s));
            }
            cursor = cursor.max(e);
        }
        if cursor < end {
            gaps.push((cursor, end));
        }
        gaps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn insert_merges_overlapping_and_adjacent() {
        let mut set = RangeSet::new();
        set.insert(10, 20);
        set.insert(30, 40);
        set.insert(20, 25);
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![(10, 25), (30, 40)]);
        set.insert(5, 35);
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![(5, 40)]);
        set.insert(7, 7);
        assert_eq!(set.covered(), 35);
    }

    #[test]
    fn gaps_skip_covered_bytes() {
        let mut set = RangeSet::new();
        set.insert(2, 4);
        set.insert(6, 8);
        assert_eq!(set.gaps_within(0, 10), vec![(0, 2), (4, 6), (8, 10)]);
        assert_eq!(set.gaps_within(3, 7), vec![(4, 6)]);
        assert!(set.gaps_within(2, 4).is_empty());
        assert!(set.intersects(3, 5));
        assert!(!set.intersects(4, 6));
    }

    proptest! {
        #[test]
        fn matches_a_bitmap(ops in proptest::collection::vec((0u64..64, 0u64..16), 0..20)) {
            let mut set = RangeSet::new();
            let mut bitmap = [false; 80];
            for (start, len) in ops {
                set.insert(start, start + len);
                for b in &mut bitmap[start as usize..(start + len) as usize] {
                    *b = true;
                }
            }
            let ranges: Vec<_> = set.iter().collect();
            for pair in ranges.windows(2) {
                prop_assert!(pair[0].1 < pair[1].0, "ranges must be disjoint and non-adjacent");
            }
            for (i, &bit) in bitmap.iter().enumerate() {
                let i = i as u64;
                prop_assert_eq!(set.intersects(i, i + 1), bit);
            }
            let gap_bytes: u64 = set.gaps_within(0, 80).iter().map(|(s, e)| e - s).sum();
            prop_assert_eq!(gap_bytes + set.covered(), 80);
        }
    }
}
