//! A rank's private copy of its window memory under the separate model's rules.
//!
//! Owns: the bytes, which of them the rank stored since it last published (dirty), and the
//! two rules between the copies: a push takes the dirty bytes (and cleans them), a pull (or
//! a unified-model update) never overwrites a byte the rank stored and has not published yet.
//! Must not: decide when to push or pull (the epoch's plan says so), record anything, or check
//! a call's bounds beyond keeping foreign bytes out of the copy.

use crate::ranges::RangeSet;
use crate::target::Segment;

/// One rank's private copy of a window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrivateCopy {
    bytes: Vec<u8>,
    dirty: RangeSet,
}

impl PrivateCopy {
    /// A zeroed copy of `size` bytes.
    pub fn new(size: usize) -> Self {
        PrivateCopy {
            bytes: vec![0; size],
            dirty: RangeSet::new(),
        }
    }

    /// The copy's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes stored and not yet published.
    pub fn dirty(&self) -> &RangeSet {
        &self.dirty
    }

    /// A store of `data` at `start` (inside the copy: the caller checked the call's bounds);
    /// `publish_later`: it waits for the next push (the separate model, or a unified window
    /// whose owner cannot publish at once).
    ///
    /// # Panics
    /// When the bytes lie outside the copy.
    pub fn store(&mut self, start: usize, data: &[u8], publish_later: bool) {
        let end = start + data.len();
        self.bytes[start..end].copy_from_slice(data);
        if publish_later {
            self.mark_dirty(start as u64, end as u64);
        }
    }

    /// Bytes `start..end` are to be published again (a push that did not happen).
    pub fn mark_dirty(&mut self, start: u64, end: u64) {
        self.dirty.insert(start, end);
    }

    /// The dirty bytes as segments to publish; they are clean afterwards.
    pub fn take_push(&mut self) -> Vec<Segment> {
        Segment::take(&mut self.dirty, &self.bytes)
    }

    /// Bytes of the public copy into this one, except where the rank stored and has not
    /// published: its own store is newer. Segments outside the copy are left out and
    /// returned, as `(offset, length)`, for the caller to report.
    pub fn pull(&mut self, segments: Vec<Segment>) -> Vec<(u64, u64)> {
        apply_except(&mut self.bytes, segments, &self.dirty)
    }

    /// The unified model's update of the public copy into this one, except the dirty bytes
    /// and the `in_flight` ones (stores published that the owner had not applied when the
    /// update was made: they are newer). Returns the segments left out, as [`Self::pull`].
    pub fn update(
        &mut self,
        segments: Vec<Segment>,
        in_flight: impl IntoIterator<Item = (u64, u64)>,
    ) -> Vec<(u64, u64)> {
        let mut keep = self.dirty.clone();
        for (start, end) in in_flight {
            keep.insert(start, end);
        }
        apply_except(&mut self.bytes, segments, &keep)
    }

    /// Bytes the public copy had, as this copy's starting state (nothing dirty). Returns the
    /// first segment outside the copy, which it leaves out, as `(offset, length)`.
    pub fn restore(&mut self, segments: Vec<Segment>) -> Result<(), (u64, u64)> {
        for segment in segments {
            let start = segment.offset as usize;
            let Some(bytes) = start
                .checked_add(segment.data.len())
                .and_then(|end| self.bytes.get_mut(start..end))
            else {
                return Err((segment.offset, segment.data.len() as u64));
            };
            bytes.copy_from_slice(&segment.data);
        }
        Ok(())
    }

    /// A dynamic window's memory grows to at least `end` bytes (new bytes are zero).
    pub fn grow(&mut self, end: usize) {
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
    }

    /// Writes `data` at `start`, growing the copy to hold it, without marking it dirty: a
    /// dynamic region's bytes as the target described them.
    pub fn place(&mut self, start: usize, data: &[u8]) {
        self.grow(start + data.len());
        self.bytes[start..start + data.len()].copy_from_slice(data);
    }
}

/// `segments` into `bytes`, except where `keep` says (the copy's own newer stores); the
/// segments outside `bytes`, as `(offset, length)`, are left out and returned.
fn apply_except(bytes: &mut [u8], segments: Vec<Segment>, keep: &RangeSet) -> Vec<(u64, u64)> {
    let mut outside = Vec::new();
    for segment in segments {
        let start = segment.offset;
        let Some(end) = start
            .checked_add(segment.data.len() as u64)
            .filter(|&end| end <= bytes.len() as u64)
        else {
            outside.push((start, segment.data.len() as u64));
            continue;
        };
        for (gap_start, gap_end) in keep.gaps_within(start, end) {
            let from = (gap_start - start) as usize;
            let to = (gap_end - start) as usize;
            bytes[gap_start as usize..gap_end as usize].copy_from_slice(&segment.data[from..to]);
        }
    }
    outside
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn segment(offset: u64, data: &'static [u8]) -> Segment {
        Segment {
            offset,
            data: Bytes::from_static(data),
        }
    }

    /// A pull never overwrites a byte stored and not yet published; once published, it does.
    #[test]
    fn a_pull_keeps_what_the_rank_stored_until_it_is_pushed() {
        let mut copy = PrivateCopy::new(8);
        copy.store(2, &[7, 7], true);
        assert!(copy.pull(vec![segment(0, &[1; 8])]).is_empty());
        assert_eq!(copy.bytes(), &[1, 1, 7, 7, 1, 1, 1, 1]);
        assert_eq!(copy.take_push(), vec![segment(2, &[7, 7])]);
        assert!(copy.take_push().is_empty(), "a push cleans what it took");
        copy.pull(vec![segment(0, &[3; 8])]);
        assert_eq!(copy.bytes(), &[3; 8]);
    }

    /// An update keeps the dirty bytes and those in flight; bytes outside are left out.
    #[test]
    fn an_update_keeps_dirty_and_in_flight_bytes_and_reports_foreign_ones() {
        let mut copy = PrivateCopy::new(6);
        copy.store(0, &[9], true);
        copy.store(5, &[8], false);
        let outside = copy.update(vec![segment(0, &[1; 6]), segment(4, &[2; 4])], [(5, 6)]);
        assert_eq!(copy.bytes(), &[9, 1, 1, 1, 1, 8]);
        assert_eq!(outside, vec![(4, 4)]);
        assert_eq!(copy.restore(vec![segment(5, &[1, 2])]), Err((5, 2)));
    }

    /// A dynamic window's copy grows to hold a region, and placing one marks nothing dirty.
    #[test]
    fn regions_grow_the_copy_without_dirtying_it() {
        let mut copy = PrivateCopy::new(0);
        copy.place(4, &[5, 6]);
        assert_eq!(copy.bytes(), &[0, 0, 0, 0, 5, 6]);
        assert!(copy.dirty().is_empty());
        copy.grow(3);
        assert_eq!(copy.len(), 6);
    }
}
