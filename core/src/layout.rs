//! Contiguous, vector and indexed layouts of elements, flattened to byte runs.
//!
//! Owns: the derived-datatype shapes an RMA call may use on either side (MPI's contiguous,
//! `MPI_Type_vector` and `MPI_Type_indexed` over one basic datatype), their checked
//! flattening into byte runs relative to a base, the hostile-input limits on them, and the
//! `gather`/`scatter` helpers that move bytes between a buffer and a packed stream. Must not:
//! know about datatypes' encodings or windows; callers pass the element size in bytes.
//!
//! All arithmetic is checked: any offset or length that does not fit in `u64` is class
//! `COUNT`, as is a layout with more than [`MAX_BLOCKS`] blocks.

use crate::error::RmaResult;

/// The most blocks a layout may have (`Vector::count` or the number of `Indexed` blocks);
/// more is class `COUNT`. A guard against hostile input.
pub const MAX_BLOCKS: usize = 1 << 20;

/// One contiguous byte run of a flattened layout, relative to the layout's base.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Run {
    /// Byte offset of the run from the base.
    pub offset: u64,
    /// Length of the run in bytes.
    pub len: u64,
}

impl Run {
    /// The offset one past the run's last byte; `None` on overflow.
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.len)
    }
}

/// One block of an indexed layout, in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Block {
    /// Displacement of the block's first element from the base, in elements.
    pub disp: u64,
    /// Number of consecutive elements in the block.
    pub len: u64,
}

/// The shape of the elements an RMA call reads or writes, in units of one basic element.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `count` consecutive elements.
    Contiguous {
        /// Number of elements.
        count: u64,
    },
    /// `count` blocks of `blocklen` elements, block i starting at element i*stride (MPI_Type_vector).
    Vector {
        /// Number of blocks.
        count: u64,
        /// Elements per block.
        blocklen: u64,
        /// Distance in elements between the starts of consecutive blocks.
        stride: u64,
    },
    /// Blocks at element displacements (MPI_Type_indexed), in type-map order.
    Indexed {
        /// The blocks, in type-map order.
        blocks: Vec<Block>,
    },
}

fn overflow() -> crate::error::RmaError {
    crate::rma_err!(Count, "layout offsets overflow")
}

impl Layout {
    /// `count` consecutive elements.
    pub fn contiguous(count: u64) -> Layout {
        Layout::Contiguous { count }
    }

    /// The number of blocks the layout declares (1 for contiguous), zero-length ones included.
    pub fn block_count(&self) -> u64 {
        match self {
            Layout::Contiguous { .. } => 1,
            Layout::Vector { count, .. } => *count,
            Layout::Indexed { blocks } => blocks.len() as u64,
        }
    }

    /// Class `COUNT` when the layout has more than [`MAX_BLOCKS`] blocks.
    fn check_limits(&self) -> RmaResult<()> {
        let blocks = self.block_count();
        if blocks > MAX_BLOCKS as u64 {
            return Err(crate::rma_err!(
                Count,
                "layout has {blocks} blocks, more than the limit of {MAX_BLOCKS}"
            ));
        }
        Ok(())
    }

    /// Calls `f(disp, len)` for each block in type-map order, in elements.
    fn for_each_block(&self, mut f: impl FnMut(u64, u64) -> RmaResult<()>) -> RmaResult<()> {
        self.check_limits()?;
        match self {
            Layout::Contiguous { count } => f(0, *count),
            Layout::Vector {
                count,
                blocklen,
                stride,
            } => {
                for i in 0..*count {
                    f(i.checked_mul(*stride).ok_or_else(overflow)?, *blocklen)?;
                }
                Ok(())
            }
            Layout::Indexed { blocks } => {
                for block in blocks {
                    f(block.disp, block.len)?;
                }
                Ok(())
            }
        }
    }

    /// The number of elements the layout covers, counting repeats. Class `COUNT` on overflow
    /// or too many blocks.
    pub fn element_count(&self) -> RmaResult<u64> {
        self.check_limits()?;
        match self {
            Layout::Contiguous { count } => Ok(*count),
            Layout::Vector {
                count, blocklen, ..
            } => count.checked_mul(*blocklen).ok_or_else(overflow),
            Layout::Indexed { blocks } => blocks
                .iter()
                .try_fold(0u64, |sum, block| sum.checked_add(block.len))
                .ok_or_else(overflow),
        }
    }

    /// The number of bytes the layout covers, `element_count * elem_size`, counting repeats.
    /// Equals the sum of the lengths of [`Layout::flatten`]'s runs.
    pub fn total_bytes(&self, elem_size: u64) -> RmaResult<u64> {
        self.element_count()?
            .checked_mul(elem_size)
            .ok_or_else(overflow)
    }

    /// The layout's byte runs for elements of `elem_size` bytes, in type-map order.
    ///
    /// Zero-length blocks are dropped and a run that starts exactly where the previous one
    /// ends is merged into it; the runs are otherwise neither sorted nor deduplicated, so
    /// they may overlap (see [`Layout::check_no_overlap`]). Class `COUNT` when an offset or
    /// end overflows `u64` or the layout has too many blocks.
    pub fn flatten(&self, elem_size: u64) -> RmaResult<Vec<Run>> {
        let mut runs: Vec<Run> = Vec::new();
        self.for_each_block(|disp, len| {
            let offset = disp.checked_mul(elem_size).ok_or_else(overflow)?;
            let len = len.checked_mul(elem_size).ok_or_else(overflow)?;
            let run = Run { offset, len };
            run.end().ok_or_else(overflow)?;
            if len == 0 {
                return Ok(());
            }
            match runs.last_mut() {
                Some(last) if last.end() == Some(offset) => {
                    last.len = last.len.checked_add(len).ok_or_else(overflow)?;
                }
                _ => runs.push(run),
            }
            Ok(())
        })?;
        Ok(runs)
    }

    /// One past the highest byte any run touches, relative to the base; 0 when the layout
    /// covers no bytes. Zero-length blocks do not count. Class `COUNT` as for
    /// [`Layout::flatten`].
    pub fn extent(&self, elem_size: u64) -> RmaResult<u64> {
        let mut extent = 0u64;
        self.for_each_block(|disp, len| {
            let offset = disp.checked_mul(elem_size).ok_or_else(overflow)?;
            let len = len.checked_mul(elem_size).ok_or_else(overflow)?;
            let end = offset.checked_add(len).ok_or_else(overflow)?;
            if len > 0 {
                extent = extent.max(end);
            }
            Ok(())
        })?;
        Ok(extent)
    }

    /// Checks that no byte is covered twice, as MPI requires of a target layout that is
    /// written. Class `TYPE` ("target layout has overlapping entries") otherwise; class
    /// `COUNT` as for [`Layout::flatten`].
    pub fn check_no_overlap(&self, elem_size: u64) -> RmaResult<()> {
        let mut runs = self.flatten(elem_size)?;
        runs.sort_unstable_by_key(|run| run.offset);
        let mut covered_to = 0u64;
        for run in &runs {
            if run.offset < covered_to {
                return Err(crate::rma_err!(
                    Type,
                    "target layout has overlapping entries"
                ));
            }
            covered_to = run.end().ok_or_else(overflow)?;
        }
        Ok(())
    }
}

/// The sum of the runs' lengths; class `COUNT` on overflow.
pub fn total_len(runs: &[Run]) -> RmaResult<u64> {
    runs.iter()
        .try_fold(0u64, |sum, run| sum.checked_add(run.len))
        .ok_or_else(overflow)
}

/// The index range in a buffer of `buf_len` bytes of `run` placed at `base`; class
/// `RMA_RANGE` when it does not lie inside.
fn range_of(run: &Run, base: u64, buf_len: usize) -> RmaResult<std::ops::Range<usize>> {
    let out_of_range = || {
        crate::rma_err!(
            RmaRange,
            "run of {} bytes at offset {} from base {base} is outside the {buf_len}-byte buffer",
            run.len,
            run.offset
        )
    };
    let start = base.checked_add(run.offset).ok_or_else(out_of_range)?;
    let end = start.checked_add(run.len).ok_or_else(out_of_range)?;
    let start = usize::try_from(start).map_err(|_| out_of_range())?;
    let end = usize::try_from(end).map_err(|_| out_of_range())?;
    if end > buf_len {
        return Err(out_of_range());
    }
    Ok(start..end)
}

/// Packs the bytes of `src` at `base + run.offset` for each run, in order, into one buffer.
///
/// Class `RMA_RANGE` when a run falls outside `src`; class `NO_MEM` when the packed buffer
/// cannot be allocated (callers should bound [`total_len`] themselves first).
pub fn gather(runs: &[Run], base: u64, src: &[u8]) -> RmaResult<Vec<u8>> {
    let mut ranges = Vec::with_capacity(runs.len());
    for run in runs {
        ranges.push(range_of(run, base, src.len())?);
    }
    let total = total_len(runs)?;
    let mut packed = Vec::new();
    usize::try_from(total)
        .ok()
        .and_then(|total| packed.try_reserve_exact(total).ok())
        .ok_or_else(|| crate::rma_err!(NoMem, "cannot allocate {total} bytes to gather into"))?;
    for range in ranges {
        packed.extend_from_slice(&src[range]);
    }
    Ok(packed)
}

/// Unpacks `packed` into `dst` at `base + run.offset` for each run, in order; the inverse of
/// [`gather`]. Where runs overlap, later runs win.
///
/// Class `RMA_RANGE` when a run falls outside `dst` (checked first), class `COUNT` when
/// `packed.len()` is not the runs' total length. Nothing is written on error.
pub fn scatter(runs: &[Run], base: u64, dst: &mut [u8], packed: &[u8]) -> RmaResult<()> {
    let mut ranges = Vec::with_capacity(runs.len());
    for run in runs {
        ranges.push(range_of(run, base, dst.len())?);
    }
    let total = total_len(runs)?;
    if total != packed.len() as u64 {
        return Err(crate::rma_err!(
            Count,
            "packed data has {} bytes but the runs cover {total}",
            packed.len()
        ));
    }
    let mut rest = packed;
    for range in ranges {
        let (head, tail) = rest.split_at(range.len());
        dst[range].copy_from_slice(head);
        rest = tail;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;
    use proptest::prelude::*;

    fn run(offset: u64, len: u64) -> Run {
        Run { offset, len }
    }

    fn indexed(blocks: &[(u64, u64)]) -> Layout {
        Layout::Indexed {
            blocks: blocks
                .iter()
                .map(|&(disp, len)| Block { disp, len })
                .collect(),
        }
    }

    #[test]
    fn contiguous() {
        let layout = Layout::contiguous(5);
        assert_eq!(layout, Layout::Contiguous { count: 5 });
        assert_eq!(layout.flatten(4).unwrap(), [run(0, 20)]);
        assert_eq!(layout.element_count().unwrap(), 5);
        assert_eq!(layout.total_bytes(4).unwrap(), 20);
        assert_eq!(layout.extent(4).unwrap(), 20);
        assert_eq!(Layout::contiguous(0).flatten(4).unwrap(), []);
        assert_eq!(Layout::contiguous(0).extent(4).unwrap(), 0);
        assert_eq!(Layout::contiguous(3).flatten(0).unwrap(), []);
    }

    #[test]
    fn vector() {
        let layout = Layout::Vector {
            count: 3,
            blocklen: 2,
            stride: 5,
        };
        assert_eq!(
            layout.flatten(8).unwrap(),
            [run(0, 16), run(40, 16), run(80, 16)]
        );
        assert_eq!(layout.element_count().unwrap(), 6);
        assert_eq!(layout.total_bytes(8).unwrap(), 48);
        assert_eq!(layout.extent(8).unwrap(), 96);
        layout.check_no_overlap(8).unwrap();
        // stride == blocklen merges into one run
        let dense = Layout::Vector {
            count: 4,
            blocklen: 3,
            stride: 3,
        };
        assert_eq!(dense.flatten(2).unwrap(), [run(0, 24)]);
        // stride 0 repeats the same block: fine to read, overlapping as a target
        let repeat = Layout::Vector {
            count: 3,
            blocklen: 1,
            stride: 0,
        };
        assert_eq!(repeat.flatten(4).unwrap(), [run(0, 4); 3]);
        assert_eq!(repeat.total_bytes(4).unwrap(), 12);
        assert_eq!(repeat.extent(4).unwrap(), 4);
        let err = repeat.check_no_overlap(4).unwrap_err();
        assert_eq!(err.class, ErrorClass::Type);
        assert_eq!(err.message, "target layout has overlapping entries");
        // blocks overlapping their neighbours
        let wide = Layout::Vector {
            count: 2,
            blocklen: 3,
            stride: 2,
        };
        assert_eq!(wide.flatten(1).unwrap(), [run(0, 3), run(2, 3)]);
        assert!(wide.check_no_overlap(1).is_err());
        let empty = Layout::Vector {
            count: 3,
            blocklen: 0,
            stride: 7,
        };
        assert_eq!(empty.flatten(4).unwrap(), []);
        assert_eq!(empty.extent(4).unwrap(), 0);
    }

    #[test]
    fn indexed_keeps_type_map_order_and_merges() {
        let layout = indexed(&[(10, 2), (12, 1), (0, 0), (0, 3), (3, 1), (20, 1)]);
        assert_eq!(
            layout.flatten(4).unwrap(),
            [run(40, 12), run(0, 16), run(80, 4)]
        );
        assert_eq!(layout.element_count().unwrap(), 8);
        assert_eq!(layout.total_bytes(4).unwrap(), 32);
        assert_eq!(layout.extent(4).unwrap(), 84);
        layout.check_no_overlap(4).unwrap();
        let overlapping = indexed(&[(4, 2), (0, 5)]);
        assert_eq!(
            overlapping.check_no_overlap(1).unwrap_err().class,
            ErrorClass::Type
        );
        // touching but not overlapping, out of order
        indexed(&[(4, 2), (0, 4)]).check_no_overlap(1).unwrap();
        // a zero-length block inside another is no overlap and no extent
        let zero = indexed(&[(0, 4), (2, 0), (100, 0)]);
        zero.check_no_overlap(1).unwrap();
        assert_eq!(zero.extent(1).unwrap(), 4);
        assert_eq!(indexed(&[]).flatten(4).unwrap(), []);
    }

    #[test]
    fn overflow_is_count() {
        let cases = [
            (indexed(&[(u64::MAX, 1)]), 2),
            (indexed(&[(u64::MAX / 2, 1)]), 2),
            (indexed(&[(0, u64::MAX)]), 2),
            (indexed(&[(u64::MAX - 1, 2)]), 1),
            (
                Layout::Vector {
                    count: 3,
                    blocklen: 1,
                    stride: u64::MAX / 2 + 1,
                },
                1,
            ),
            (Layout::contiguous(u64::MAX), 8),
        ];
        for (layout, size) in cases {
            assert_eq!(layout.flatten(size).unwrap_err().class, ErrorClass::Count);
            assert_eq!(layout.extent(size).unwrap_err().class, ErrorClass::Count);
            assert_eq!(
                layout.check_no_overlap(size).unwrap_err().class,
                ErrorClass::Count
            );
        }
        let big = indexed(&[(0, u64::MAX), (0, 1)]);
        assert_eq!(big.element_count().unwrap_err().class, ErrorClass::Count);
        let big = Layout::Vector {
            count: 1 << 20,
            blocklen: 1 << 50,
            stride: 1,
        };
        assert_eq!(big.element_count().unwrap_err().class, ErrorClass::Count);
        assert_eq!(
            Layout::contiguous(1 << 62)
                .total_bytes(8)
                .unwrap_err()
                .class,
            ErrorClass::Count
        );
    }

    #[test]
    fn block_limit() {
        let at_limit = Layout::Vector {
            count: MAX_BLOCKS as u64,
            blocklen: 1,
            stride: 1,
        };
        assert_eq!(at_limit.flatten(1).unwrap(), [run(0, MAX_BLOCKS as u64)]);
        let over = Layout::Vector {
            count: MAX_BLOCKS as u64 + 1,
            blocklen: 1,
            stride: 2,
        };
        for result in [
            over.flatten(1).map(|_| ()),
            over.extent(1).map(|_| ()),
            over.element_count().map(|_| ()),
            over.total_bytes(1).map(|_| ()),
            over.check_no_overlap(1),
        ] {
            assert_eq!(result.unwrap_err().class, ErrorClass::Count);
        }
        let over = Layout::Indexed {
            blocks: vec![Block { disp: 0, len: 1 }; MAX_BLOCKS + 1],
        };
        assert_eq!(over.flatten(1).unwrap_err().class, ErrorClass::Count);
        assert_eq!(over.element_count().unwrap_err().class, ErrorClass::Count);
    }

    #[test]
    fn gather_and_scatter() {
        let src: Vec<u8> = (0..20).collect();
        let runs = [run(4, 2), run(0, 3), run(1, 1)];
        assert_eq!(gather(&runs, 10, &src).unwrap(), [14, 15, 10, 11, 12, 11]);
        assert_eq!(total_len(&runs).unwrap(), 6);
        let err = gather(&runs, 15, &src).unwrap_err();
        assert_eq!(err.class, ErrorClass::RmaRange);
        assert_eq!(
            gather(&[run(u64::MAX, 1)], 1, &src).unwrap_err().class,
            ErrorClass::RmaRange
        );
        assert_eq!(gather(&[], 100, &src).unwrap(), Vec::<u8>::new());
        assert_eq!(gather(&[run(20, 0)], 0, &src).unwrap(), Vec::<u8>::new());

        let mut dst = [0u8; 8];
        scatter(&[run(6, 2), run(0, 1)], 0, &mut dst, &[1, 2, 3]).unwrap();
        assert_eq!(dst, [3, 0, 0, 0, 0, 0, 1, 2]);
        // later runs win where they overlap
        scatter(&[run(0, 2), run(1, 2)], 2, &mut dst, &[4, 5, 6, 7]).unwrap();
        assert_eq!(dst, [3, 0, 4, 6, 7, 0, 1, 2]);
        let before = dst;
        let err = scatter(&[run(0, 2), run(7, 2)], 0, &mut dst, &[9; 4]).unwrap_err();
        assert_eq!(err.class, ErrorClass::RmaRange);
        let err = scatter(&[run(0, 2), run(4, 2)], 0, &mut dst, &[9; 3]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Count);
        let err = scatter(&[run(0, 2)], u64::MAX, &mut dst, &[9; 2]).unwrap_err();
        assert_eq!(err.class, ErrorClass::RmaRange);
        assert_eq!(dst, before, "nothing written on error");
    }

    fn layouts() -> impl Strategy<Value = Layout> {
        prop_oneof![
            (0u64..50).prop_map(Layout::contiguous),
            (0u64..10, 0u64..6, 0u64..12).prop_map(|(count, blocklen, stride)| {
                Layout::Vector {
                    count,
                    blocklen,
                    stride,
                }
            }),
            proptest::collection::vec((0u64..60, 0u64..6), 0..12).prop_map(|blocks| {
                Layout::Indexed {
                    blocks: blocks
                        .into_iter()
                        .map(|(disp, len)| Block { disp, len })
                        .collect(),
                }
            }),
        ]
    }

    proptest! {
        #[test]
        fn flatten_total_matches_element_count(layout in layouts(), size in 0u64..16) {
            let runs = layout.flatten(size).unwrap();
            prop_assert_eq!(total_len(&runs).unwrap(), layout.element_count().unwrap() * size);
            prop_assert_eq!(layout.total_bytes(size).unwrap(), total_len(&runs).unwrap());
            prop_assert!(runs.iter().all(|r| r.len > 0));
            for pair in runs.windows(2) {
                prop_assert_ne!(pair[0].end(), Some(pair[1].offset), "adjacent runs not merged");
            }
            let extent = runs.iter().map(|r| r.offset + r.len).max().unwrap_or(0);
            prop_assert_eq!(layout.extent(size).unwrap(), extent);
        }

        #[test]
        fn overlap_check_matches_brute_force(layout in layouts(), size in 1u64..4) {
            let runs = layout.flatten(size).unwrap();
            let mut seen = std::collections::HashSet::new();
            let mut overlapping = false;
            for r in &runs {
                for byte in r.offset..r.offset + r.len {
                    overlapping |= !seen.insert(byte);
                }
            }
            prop_assert_eq!(layout.check_no_overlap(size).is_err(), overlapping);
        }

        #[test]
        fn gather_then_scatter_round_trips(
            layout in layouts(),
            size in 1u64..5,
            base in 0u64..8,
            seed in any::<u8>(),
        ) {
            let runs = layout.flatten(size).unwrap();
            let len = (base + layout.extent(size).unwrap()) as usize;
            let src: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
            let packed = gather(&runs, base, &src).unwrap();
            prop_assert_eq!(packed.len() as u64, layout.total_bytes(size).unwrap());
            let mut dst = vec![0u8; len];
            scatter(&runs, base, &mut dst, &packed).unwrap();
            for r in &runs {
                let range = (base + r.offset) as usize..(base + r.offset + r.len) as usize;
                prop_assert_eq!(&dst[range.clone()], &src[range]);
            }
            prop_assert_eq!(gather(&runs, base, &dst).unwrap(), packed);
            if len > 0 && !runs.is_empty() {
                prop_assert_eq!(
                    gather(&runs, base + 1, &src).unwrap_err().class,
                    ErrorClass::RmaRange
                );
            }
        }

        #[test]
        fn dense_vector_is_one_run(count in 1u64..50, blocklen in 1u64..20, size in 1u64..9) {
            let layout = Layout::Vector { count, blocklen, stride: blocklen };
            prop_assert_eq!(
                layout.flatten(size).unwrap(),
                vec![Run { offset: 0, len: count * blocklen * size }]
            );
        }
    }
}
