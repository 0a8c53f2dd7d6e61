//! Contiguous, vector, indexed, hvector, hindexed, subarray, resized and struct layouts of
//! elements, flattened to byte runs.
//!
//! Owns: the derived-datatype shapes an RMA call may use on either side (MPI's contiguous,
//! `MPI_Type_vector`, `MPI_Type_indexed`, `MPI_Type_create_hvector`,
//! `MPI_Type_create_hindexed` and `MPI_Type_create_subarray` over one basic datatype,
//! `MPI_Type_create_resized` of any of them repeated, and `MPI_Type_create_struct` of basic
//! datatypes), their checked flattening into byte runs relative to a base, the hostile-input
//! limits on them, and the `gather`/`scatter` helpers that move bytes between a buffer and a
//! packed stream. Must not: know about datatypes' encodings or windows; callers pass the
//! element size in bytes (a struct's blocks carry their own datatypes, whose sizes it reads).
//!
//! All arithmetic is checked: any offset or length that does not fit in `u64` is class
//! `COUNT`, as is a layout with more than [`MAX_BLOCKS`] blocks.

use crate::datatype::Datatype;
use crate::error::RmaResult;

/// The most blocks a layout may have (`Vector::count` or the number of `Indexed` blocks);
/// more is class `COUNT`. A guard against hostile input.
pub const MAX_BLOCKS: usize = 1 << 20;

/// The most dimensions a subarray may have; more is class `ARG`.
pub const MAX_DIMS: usize = 32;

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

/// One block of an hindexed layout: where it starts in bytes, how many elements it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ByteBlock {
    /// Displacement of the block's first byte from the base, in bytes.
    pub offset: u64,
    /// Number of consecutive elements in the block.
    pub len: u64,
}

/// How a subarray's dimensions are stored (`MPI_ORDER_C`, `MPI_ORDER_FORTRAN`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// Row-major: the last dimension varies fastest.
    #[default]
    C,
    /// Column-major: the first dimension varies fastest.
    Fortran,
}

/// One block of a struct layout: where it starts in bytes, its basic datatype, how many
/// elements of that datatype it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StructBlock {
    /// Displacement of the block's first byte from the base, in bytes.
    pub offset: u64,
    /// The basic datatype of the block's elements.
    pub dtype: Datatype,
    /// Number of consecutive elements of `dtype` in the block.
    pub len: u64,
}

/// The shape of a [`Layout::Resized`]: `count` copies of `inner`, copy k moved k × `extent`
/// bytes (`MPI_Type_create_resized(inner, lb, extent)` used with a count).
///
/// As in MPI, the lower bound moves no byte: it and `extent` only say where the type is
/// taken to begin and end, and only `extent` places the copies. `lb + extent` (the upper
/// bound) must fit in `i64`, else class `COUNT`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Resized {
    /// The layout that is repeated.
    pub inner: Layout,
    /// The new lower bound, in bytes (may be negative, as in MPI).
    pub lb: i64,
    /// The new extent in bytes: the distance between the starts of consecutive copies.
    pub extent: u64,
    /// Number of copies.
    pub count: u64,
}

/// The shape of the elements an RMA call reads or writes, in units of one basic element
/// (hvector and hindexed place their blocks in bytes; a struct's blocks are in bytes and
/// carry their own datatypes).
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
    /// `count` blocks of `blocklen` elements, block i starting at byte i*stride_bytes
    /// (MPI_Type_create_hvector; the stride need not be a multiple of the element size).
    Hvector {
        /// Number of blocks.
        count: u64,
        /// Elements per block.
        blocklen: u64,
        /// Distance in bytes between the starts of consecutive blocks.
        stride_bytes: u64,
    },
    /// Blocks at byte displacements (MPI_Type_create_hindexed), in type-map order.
    Hindexed {
        /// The blocks, in type-map order.
        blocks: Vec<ByteBlock>,
    },
    /// The `subsizes` block starting at `starts` of an array of `sizes` elements
    /// (MPI_Type_create_subarray), in the array's storage order. Boxed: operations carry a
    /// layout, and the common ones stay small.
    Subarray(Box<Subarray>),
    /// `count` copies of a layout placed `extent` bytes apart (MPI_Type_create_resized),
    /// copy after copy in type-map order. Boxed, as it holds a layout.
    Resized(Box<Resized>),
    /// Blocks at byte displacements, each of its own basic datatype (MPI_Type_create_struct
    /// of basic types), in type-map order. The element size callers pass does not apply to
    /// it: each block is `len` elements of its own `dtype`.
    Struct {
        /// The blocks, in type-map order.
        blocks: Vec<StructBlock>,
    },
}

/// The shape of a [`Layout::Subarray`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Subarray {
    /// The whole array's size in each dimension.
    pub sizes: Vec<u64>,
    /// The subarray's size in each dimension.
    pub subsizes: Vec<u64>,
    /// Where the subarray starts in each dimension.
    pub starts: Vec<u64>,
    /// The storage order.
    pub order: Order,
}

impl Subarray {
    /// In row-major terms; class `ARG` for a shape MPI refuses.
    fn row_major(&self) -> RmaResult<Vec<(u64, u64, u64)>> {
        row_major(&self.sizes, &self.subsizes, &self.starts, self.order)
    }
}

/// A subarray in row-major terms (Fortran's dimensions reversed): per dimension its size,
/// subsize and start. Class `ARG` for a shape MPI refuses.
fn row_major(
    sizes: &[u64],
    subsizes: &[u64],
    starts: &[u64],
    order: Order,
) -> RmaResult<Vec<(u64, u64, u64)>> {
    let dims = sizes.len();
    if dims == 0 || dims > MAX_DIMS || subsizes.len() != dims || starts.len() != dims {
        return Err(crate::rma_err!(
            Arg,
            "a subarray needs 1 to {MAX_DIMS} dimensions with a size, a subsize and a start \
             each (got {dims} sizes, {} subsizes, {} starts)",
            subsizes.len(),
            starts.len()
        ));
    }
    let mut shape = Vec::with_capacity(dims);
    for dim in 0..dims {
        let (size, sub, start) = (sizes[dim], subsizes[dim], starts[dim]);
        if size == 0 || sub > size || start > size - sub {
            return Err(crate::rma_err!(
                Arg,
                "subarray dimension {dim}: size {size}, subsize {sub} and start {start} do not \
                 fit (a size is at least 1, and start + subsize at most the size)"
            ));
        }
        shape.push((size, sub, start));
    }
    if order == Order::Fortran {
        shape.reverse();
    }
    Ok(shape)
}

fn overflow() -> crate::error::RmaError {
    crate::rma_err!(Count, "layout offsets overflow")
}

impl Layout {
    /// `count` consecutive elements.
    pub fn contiguous(count: u64) -> Layout {
        Layout::Contiguous { count }
    }

    /// The number of blocks the layout declares (1 for contiguous), zero-length ones included:
    /// the work of walking it, which [`MAX_BLOCKS`] bounds. A subarray's blocks are its rows
    /// (every dimension but the fastest), a resized layout's its count times its inner
    /// layout's — at least one per copy, since even a copy of an empty layout costs a step (a
    /// billion copies of nothing are a billion steps); `u64::MAX` when their number overflows
    /// or the subarray's shape is invalid (which is refused anyway).
    pub fn block_count(&self) -> u64 {
        match self {
            Layout::Contiguous { .. } => 1,
            Layout::Vector { count, .. } | Layout::Hvector { count, .. } => *count,
            Layout::Indexed { blocks } => blocks.len() as u64,
            Layout::Hindexed { blocks } => blocks.len() as u64,
            Layout::Subarray(subarray) => match subarray.row_major() {
                Ok(shape) => shape[..shape.len() - 1]
                    .iter()
                    .try_fold(1u64, |rows, &(_, sub, _)| rows.checked_mul(sub))
                    .unwrap_or(u64::MAX),
                Err(_) => u64::MAX,
            },
            Layout::Resized(resized) => resized
                .count
                .saturating_mul(resized.inner.block_count().max(1)),
            Layout::Struct { blocks } => blocks.len() as u64,
        }
    }

    /// `count` copies of `inner`, `extent` bytes apart, with the lower bound `lb`
    /// (`MPI_Type_create_resized`, then a count).
    pub fn resized(inner: Layout, lb: i64, extent: u64, count: u64) -> Layout {
        Layout::Resized(Box::new(Resized {
            inner,
            lb,
            extent,
            count,
        }))
    }

    /// Checks that every element of the layout is of `dtype`, as MPI requires of the
    /// target and origin datatypes of an accumulate: only a struct names datatypes of its
    /// own (and a resized layout through its inner one). Class `TYPE` otherwise.
    pub fn check_elements_are(&self, dtype: Datatype) -> RmaResult<()> {
        match self {
            Layout::Struct { blocks } => match blocks.iter().find(|block| block.dtype != dtype) {
                Some(block) => Err(crate::rma_err!(
                    Type,
                    "a struct block of {} at byte {} in an operation on {dtype}: every basic \
                     component must be the operation's datatype",
                    block.dtype,
                    block.offset
                )),
                None => Ok(()),
            },
            Layout::Resized(resized) => resized.inner.check_elements_are(dtype),
            _ => Ok(()),
        }
    }

    /// Class `ARG` for a subarray MPI refuses; class `COUNT` when the layout has more than
    /// [`MAX_BLOCKS`] blocks.
    fn check_limits(&self) -> RmaResult<()> {
        match self {
            Layout::Subarray(subarray) => {
                subarray.row_major()?;
            }
            Layout::Resized(resized) => {
                resized.inner.check_limits()?;
                let upper = i64::try_from(resized.extent)
                    .ok()
                    .and_then(|extent| resized.lb.checked_add(extent));
                if upper.is_none() {
                    return Err(crate::rma_err!(
                        Count,
                        "resized layout: lower bound {} plus extent {} overflows",
                        resized.lb,
                        resized.extent
                    ));
                }
            }
            _ => {}
        }
        let blocks = self.block_count();
        if blocks > MAX_BLOCKS as u64 {
            return Err(crate::rma_err!(
                Count,
                "layout has {blocks} blocks, more than the limit of {MAX_BLOCKS}"
            ));
        }
        Ok(())
    }

    /// Calls `f(offset, len)` for each block in type-map order: its offset and its length in
    /// bytes, for elements of `elem_size` bytes (a struct's blocks use their own datatypes').
    fn for_each_block(
        &self,
        elem_size: u64,
        f: &mut dyn FnMut(u64, u64) -> RmaResult<()>,
    ) -> RmaResult<()> {
        self.check_limits()?;
        let bytes = |elements: u64| elements.checked_mul(elem_size).ok_or_else(overflow);
        match self {
            Layout::Contiguous { count } => f(0, bytes(*count)?),
            Layout::Vector {
                count,
                blocklen,
                stride,
            } => {
                for i in 0..*count {
                    let offset = bytes(i.checked_mul(*stride).ok_or_else(overflow)?)?;
                    f(offset, bytes(*blocklen)?)?;
                }
                Ok(())
            }
            Layout::Indexed { blocks } => {
                for block in blocks {
                    f(bytes(block.disp)?, bytes(block.len)?)?;
                }
                Ok(())
            }
            Layout::Hvector {
                count,
                blocklen,
                stride_bytes,
            } => {
                for i in 0..*count {
                    let offset = i.checked_mul(*stride_bytes).ok_or_else(overflow)?;
                    f(offset, bytes(*blocklen)?)?;
                }
                Ok(())
            }
            Layout::Hindexed { blocks } => {
                for block in blocks {
                    f(block.offset, bytes(block.len)?)?;
                }
                Ok(())
            }
            Layout::Struct { blocks } => {
                for block in blocks {
                    let len = block
                        .len
                        .checked_mul(block.dtype.size() as u64)
                        .ok_or_else(overflow)?;
                    f(block.offset, len)?;
                }
                Ok(())
            }
            Layout::Resized(resized) => {
                if resized.count == 0 {
                    return Ok(());
                }
                // the inner blocks once (the block limit bounds them), then every copy; copies
                // of nothing are nothing (the block limit counted each copy anyway)
                let mut inner = Vec::new();
                resized
                    .inner
                    .for_each_block(elem_size, &mut |offset, len| {
                        inner.push((offset, len));
                        Ok(())
                    })?;
                if inner.is_empty() {
                    return Ok(());
                }
                for k in 0..resized.count {
                    let shift = k.checked_mul(resized.extent).ok_or_else(overflow)?;
                    for &(offset, len) in &inner {
                        f(offset.checked_add(shift).ok_or_else(overflow)?, len)?;
                    }
                }
                Ok(())
            }
            Layout::Subarray(subarray) => {
                let shape = subarray.row_major()?;
                let dims = shape.len();
                // the distance in elements between neighbours in each dimension
                let mut strides = vec![1u64; dims];
                for dim in (0..dims - 1).rev() {
                    strides[dim] = strides[dim + 1]
                        .checked_mul(shape[dim + 1].0)
                        .ok_or_else(overflow)?;
                }
                let (_, row_len, row_start) = shape[dims - 1];
                if shape.iter().any(|&(_, sub, _)| sub == 0) {
                    return Ok(());
                }
                let row_len = bytes(row_len)?;
                // an odometer over every dimension but the fastest, in storage order
                let mut index = vec![0u64; dims - 1];
                loop {
                    let mut first = row_start;
                    for dim in 0..dims - 1 {
                        let at = shape[dim].2 + index[dim];
                        first = at
                            .checked_mul(strides[dim])
                            .and_then(|offset| first.checked_add(offset))
                            .ok_or_else(overflow)?;
                    }
                    f(bytes(first)?, row_len)?;
                    let mut dim = dims - 1;
                    loop {
                        if dim == 0 {
                            return Ok(());
                        }
                        dim -= 1;
                        index[dim] += 1;
                        if index[dim] < shape[dim].1 {
                            break;
                        }
                        index[dim] = 0;
                    }
                }
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
            }
            | Layout::Hvector {
                count, blocklen, ..
            } => count.checked_mul(*blocklen).ok_or_else(overflow),
            Layout::Indexed { blocks } => blocks
                .iter()
                .try_fold(0u64, |sum, block| sum.checked_add(block.len))
                .ok_or_else(overflow),
            Layout::Hindexed { blocks } => blocks
                .iter()
                .try_fold(0u64, |sum, block| sum.checked_add(block.len))
                .ok_or_else(overflow),
            Layout::Subarray(subarray) => subarray
                .subsizes
                .iter()
                .try_fold(1u64, |product, &sub| product.checked_mul(sub))
                .ok_or_else(overflow),
            Layout::Resized(resized) => resized
                .count
                .checked_mul(resized.inner.element_count()?)
                .ok_or_else(overflow),
            Layout::Struct { blocks } => blocks
                .iter()
                .try_fold(0u64, |sum, block| sum.checked_add(block.len))
                .ok_or_else(overflow),
        }
    }

    /// The number of bytes the layout covers, counting repeats: `element_count * elem_size`,
    /// except that a struct's blocks count in their own datatypes. Equals the sum of the
    /// lengths of [`Layout::flatten`]'s runs.
    pub fn total_bytes(&self, elem_size: u64) -> RmaResult<u64> {
        self.check_limits()?;
        match self {
            Layout::Struct { blocks } => blocks.iter().try_fold(0u64, |sum, block| {
                block
                    .len
                    .checked_mul(block.dtype.size() as u64)
                    .and_then(|bytes| sum.checked_add(bytes))
                    .ok_or_else(overflow)
            }),
            Layout::Resized(resized) => resized
                .count
                .checked_mul(resized.inner.total_bytes(elem_size)?)
                .ok_or_else(overflow),
            _ => self
                .element_count()?
                .checked_mul(elem_size)
                .ok_or_else(overflow),
        }
    }

    /// The layout's byte runs for elements of `elem_size` bytes, in type-map order.
    ///
    /// Zero-length blocks are dropped and a run that starts exactly where the previous one
    /// ends is merged into it; the runs are otherwise neither sorted nor deduplicated, so
    /// they may overlap (see [`Layout::check_no_overlap`]). Class `COUNT` when an offset or
    /// end overflows `u64` or the layout has too many blocks.
    pub fn flatten(&self, elem_size: u64) -> RmaResult<Vec<Run>> {
        let mut runs: Vec<Run> = Vec::new();
        self.for_each_block(elem_size, &mut |offset, len| {
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
        self.for_each_block(elem_size, &mut |offset, len| {
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
        check_disjoint(&self.flatten(elem_size)?)
    }
}

/// [`Layout::check_no_overlap`] of the runs [`Layout::flatten`] gave: runs already in order
/// (every contiguous or vector layout's) are checked where they are, others on a sorted copy.
pub fn check_disjoint(runs: &[Run]) -> RmaResult<()> {
    let disjoint_in_order = |runs: &[Run]| {
        let mut covered_to = 0u64;
        for run in runs {
            if run.offset < covered_to {
                return Err(crate::rma_err!(
                    Type,
                    "target layout has overlapping entries"
                ));
            }
            covered_to = run.end().ok_or_else(overflow)?;
        }
        Ok(())
    };
    if runs.is_sorted_by_key(|run| run.offset) {
        return disjoint_in_order(runs);
    }
    let mut sorted = runs.to_vec();
    sorted.sort_unstable_by_key(|run| run.offset);
    disjoint_in_order(&sorted)
}

/// [`Layout::extent`] of the runs [`Layout::flatten`] gave (which hold no empty run).
pub fn runs_extent(runs: &[Run]) -> u64 {
    runs.iter().filter_map(Run::end).max().unwrap_or(0)
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

    fn vector_layout(count: u64, blocklen: u64, stride: u64) -> Layout {
        Layout::Vector {
            count,
            blocklen,
            stride,
        }
    }

    fn hvector_layout(count: u64, blocklen: u64, stride_bytes: u64) -> Layout {
        Layout::Hvector {
            count,
            blocklen,
            stride_bytes,
        }
    }

    fn indexed(blocks: &[(u64, u64)]) -> Layout {
        Layout::Indexed {
            blocks: blocks
                .iter()
                .map(|&(disp, len)| Block { disp, len })
                .collect(),
        }
    }

    fn hindexed(blocks: &[(u64, u64)]) -> Layout {
        Layout::Hindexed {
            blocks: blocks
                .iter()
                .map(|&(offset, len)| ByteBlock { offset, len })
                .collect(),
        }
    }

    /// `layout` over elements of `size` bytes: its runs, and its elements, bytes and extent.
    #[track_caller]
    fn assert_measures(
        layout: &Layout,
        size: u64,
        runs: &[Run],
        [elements, bytes, extent]: [u64; 3],
    ) {
        assert_eq!(layout.flatten(size).unwrap(), runs);
        assert_eq!(layout.element_count().unwrap(), elements);
        assert_eq!(layout.total_bytes(size).unwrap(), bytes);
        assert_eq!(layout.extent(size).unwrap(), extent);
        // what TargetOp::validate reads instead of walking the layout again
        assert_eq!(runs_extent(runs), extent);
    }

    #[test]
    fn contiguous() {
        let layout = Layout::contiguous(5);
        assert_eq!(layout, Layout::Contiguous { count: 5 });
        assert_measures(&layout, 4, &[run(0, 20)], [5, 20, 20]);
        assert_eq!(Layout::contiguous(0).flatten(4).unwrap(), []);
        assert_eq!(Layout::contiguous(0).extent(4).unwrap(), 0);
        assert_eq!(Layout::contiguous(3).flatten(0).unwrap(), []);
    }

    #[test]
    fn vector() {
        let layout = vector_layout(3, 2, 5);
        let runs = [run(0, 16), run(40, 16), run(80, 16)];
        assert_measures(&layout, 8, &runs, [6, 48, 96]);
        layout.check_no_overlap(8).unwrap();
        // stride == blocklen merges into one run
        let dense = vector_layout(4, 3, 3);
        assert_eq!(dense.flatten(2).unwrap(), [run(0, 24)]);
        // stride 0 repeats the same block: fine to read, overlapping as a target
        let repeat = vector_layout(3, 1, 0);
        assert_eq!(repeat.flatten(4).unwrap(), [run(0, 4); 3]);
        assert_eq!(repeat.total_bytes(4).unwrap(), 12);
        assert_eq!(repeat.extent(4).unwrap(), 4);
        let err = repeat.check_no_overlap(4).unwrap_err();
        assert_eq!(err.class, ErrorClass::Type);
        assert_eq!(err.message, "target layout has overlapping entries");
        // blocks overlapping their neighbours
        let wide = vector_layout(2, 3, 2);
        assert_eq!(wide.flatten(1).unwrap(), [run(0, 3), run(2, 3)]);
        assert!(wide.check_no_overlap(1).is_err());
        let empty = vector_layout(3, 0, 7);
        assert_eq!(empty.flatten(4).unwrap(), []);
        assert_eq!(empty.extent(4).unwrap(), 0);
    }

    #[test]
    fn indexed_keeps_type_map_order_and_merges() {
        let layout = indexed(&[(10, 2), (12, 1), (0, 0), (0, 3), (3, 1), (20, 1)]);
        assert_measures(
            &layout,
            4,
            &[run(40, 12), run(0, 16), run(80, 4)],
            [8, 32, 84],
        );
        layout.check_no_overlap(4).unwrap();
        let overlapping = indexed(&[(4, 2), (0, 5)]);
        assert_eq!(
            overlapping.check_no_overlap(1).unwrap_err().class,
            ErrorClass::Type
        );
        // touching but not overlapping, out of order
        indexed(&[(4, 2), (0, 4)]).check_no_overlap(1).unwrap();
        // in order, the runs are checked where they are; out of order, on a sorted copy
        assert!(check_disjoint(&[run(0, 4), run(3, 2)]).is_err());
        assert!(check_disjoint(&[run(8, 2), run(0, 9)]).is_err());
        check_disjoint(&[run(8, 2), run(0, 8)]).unwrap();
        // a zero-length block inside another is no overlap and no extent
        let zero = indexed(&[(0, 4), (2, 0), (100, 0)]);
        zero.check_no_overlap(1).unwrap();
        assert_eq!(zero.extent(1).unwrap(), 4);
        assert_eq!(indexed(&[]).flatten(4).unwrap(), []);
    }

    #[test]
    fn hvector_and_hindexed_place_blocks_in_bytes() {
        // stride 6 bytes over 4-byte elements: not a multiple of the element
        let hvector = hvector_layout(3, 1, 6);
        assert_eq!(
            hvector.flatten(4).unwrap(),
            [run(0, 4), run(6, 4), run(12, 4)]
        );
        assert_eq!(hvector.element_count().unwrap(), 3);
        assert_eq!(hvector.extent(4).unwrap(), 16);
        hvector.check_no_overlap(4).unwrap();
        let overlapping = hvector_layout(2, 1, 2);
        assert_eq!(
            overlapping.check_no_overlap(4).unwrap_err().class,
            ErrorClass::Type
        );
        let hindexed = hindexed(&[(10, 2), (18, 1), (1, 1)]);
        // 10..18 and 18..22 touch: merged
        assert_eq!(hindexed.flatten(4).unwrap(), [run(10, 12), run(1, 4)]);
        assert_eq!(hindexed.element_count().unwrap(), 4);
        assert_eq!(hindexed.extent(4).unwrap(), 22);
        let too_far = hvector_layout(2, 1, u64::MAX);
        assert_eq!(too_far.flatten(1).unwrap_err().class, ErrorClass::Count);
    }

    fn subarray(sizes: &[u64], subsizes: &[u64], starts: &[u64], order: Order) -> Layout {
        Layout::Subarray(Box::new(Subarray {
            sizes: sizes.to_vec(),
            subsizes: subsizes.to_vec(),
            starts: starts.to_vec(),
            order,
        }))
    }

    #[test]
    fn subarray_in_c_and_fortran_order() {
        // the 2x2 block at (1,1) of a 3x4 C array: elements 5,6 and 9,10
        let c = subarray(&[3, 4], &[2, 2], &[1, 1], Order::C);
        assert_eq!(c.flatten(8).unwrap(), [run(40, 16), run(72, 16)]);
        assert_eq!(c.element_count().unwrap(), 4);
        assert_eq!(c.block_count(), 2);
        c.check_no_overlap(8).unwrap();
        // the same block of the 4x3 Fortran array with the same storage
        let fortran = subarray(&[4, 3], &[2, 2], &[1, 1], Order::Fortran);
        assert_eq!(fortran.flatten(8).unwrap(), c.flatten(8).unwrap());
        // whole rows merge into one run
        let rows = subarray(&[3, 4], &[2, 4], &[1, 0], Order::C);
        assert_eq!(rows.flatten(1).unwrap(), [run(4, 8)]);
        // one dimension is a contiguous range
        let line = subarray(&[10], &[3], &[7], Order::C);
        assert_eq!(line.flatten(2).unwrap(), [run(14, 6)]);
        // an empty subarray covers nothing
        let empty = subarray(&[3, 4], &[0, 2], &[0, 0], Order::C);
        assert_eq!(empty.flatten(1).unwrap(), []);
        assert_eq!(empty.element_count().unwrap(), 0);
    }

    #[test]
    fn subarrays_mpi_refuses_are_arg() {
        let cases = [
            subarray(&[], &[], &[], Order::C),
            subarray(&[3, 4], &[2], &[0, 0], Order::C),
            subarray(&[3, 4], &[2, 2], &[0], Order::C),
            subarray(&[3, 0], &[1, 0], &[0, 0], Order::C),
            subarray(&[3, 4], &[4, 1], &[0, 0], Order::C),
            subarray(&[3, 4], &[2, 2], &[2, 0], Order::C),
            subarray(
                &[2; MAX_DIMS + 1],
                &[1; MAX_DIMS + 1],
                &[0; MAX_DIMS + 1],
                Order::C,
            ),
        ];
        for layout in cases {
            let err = layout.flatten(1).unwrap_err();
            assert_eq!(err.class, ErrorClass::Arg, "{layout:?}: {err}");
            assert_eq!(layout.element_count().unwrap_err().class, ErrorClass::Arg);
        }
        // rows beyond the block limit are COUNT, as for the other layouts
        let huge = subarray(
            &[1 << 11, 1 << 11, 1],
            &[1 << 11, 1 << 11, 1],
            &[0; 3],
            Order::C,
        );
        assert_eq!(huge.flatten(1).unwrap_err().class, ErrorClass::Count);
    }

    fn column(rows: u64, cols: u64) -> Layout {
        // one element of each row of a row-major rows x cols matrix of 8-byte elements
        Layout::resized(Layout::contiguous(1), 0, cols * 8, rows)
    }

    #[test]
    fn resized_repeats_its_inner_layout_extent_apart() {
        let col = column(3, 4);
        assert_eq!(col.flatten(8).unwrap(), [run(0, 8), run(32, 8), run(64, 8)]);
        assert_eq!(col.element_count().unwrap(), 3);
        assert_eq!(col.total_bytes(8).unwrap(), 24);
        assert_eq!(col.extent(8).unwrap(), 72);
        assert_eq!(col.block_count(), 3);
        col.check_no_overlap(8).unwrap();
        // copies follow each other in type-map order: the inner blocks of copy 0, then copy 1
        let inner = indexed(&[(2, 1), (0, 1)]);
        let twice = Layout::resized(inner, 0, 3, 2);
        assert_eq!(
            twice.flatten(1).unwrap(),
            [run(2, 1), run(0, 1), run(5, 1), run(3, 1)]
        );
        // an extent that makes copies touch merges them; the lower bound moves nothing
        let dense = Layout::resized(Layout::contiguous(2), -16, 8, 3);
        assert_eq!(dense.flatten(4).unwrap(), [run(0, 24)]);
        assert_eq!(
            Layout::resized(Layout::contiguous(2), 0, 8, 3),
            Layout::resized(Layout::contiguous(2), 0, 8, 3)
        );
        // a zero count covers nothing; a zero extent repeats the same bytes, which a write
        // refuses
        let none = Layout::resized(Layout::contiguous(2), 0, 8, 0);
        assert_eq!(none.flatten(4).unwrap(), []);
        assert_eq!(none.total_bytes(4).unwrap(), 0);
        let stacked = Layout::resized(Layout::contiguous(1), 0, 0, 2);
        assert_eq!(stacked.flatten(4).unwrap(), [run(0, 4), run(0, 4)]);
        assert_eq!(
            stacked.check_no_overlap(4).unwrap_err().class,
            ErrorClass::Type
        );
        // resized of resized: the columns of two matrices 96 bytes apart
        let nested = Layout::resized(column(2, 2), 0, 96, 2);
        assert_eq!(
            nested.flatten(8).unwrap(),
            [run(0, 8), run(16, 8), run(96, 8), run(112, 8)]
        );
    }

    #[test]
    fn bad_resized_layouts() {
        // the upper bound lb + extent does not fit
        for (lb, extent) in [(1, i64::MAX as u64), (0, u64::MAX), (i64::MIN, u64::MAX)] {
            let layout = Layout::resized(Layout::contiguous(1), lb, extent, 1);
            assert_eq!(layout.flatten(1).unwrap_err().class, ErrorClass::Count);
            assert_eq!(layout.element_count().unwrap_err().class, ErrorClass::Count);
            assert_eq!(layout.total_bytes(1).unwrap_err().class, ErrorClass::Count);
        }
        // copies past u64
        let far = Layout::resized(Layout::contiguous(1), 0, i64::MAX as u64, 4);
        assert_eq!(far.flatten(1).unwrap_err().class, ErrorClass::Count);
        assert_eq!(far.extent(1).unwrap_err().class, ErrorClass::Count);
        // more blocks than the limit, whether from the count or the inner layout
        let many = Layout::resized(Layout::contiguous(1), 0, 2, MAX_BLOCKS as u64 + 1);
        let inner = vector_layout(1 << 10, 1, 2);
        let product = Layout::resized(inner, 0, 4096, (1 << 10) + 1);
        let huge = Layout::resized(Layout::contiguous(1), 0, 1, u64::MAX);
        for layout in [many, product, huge] {
            assert_eq!(
                layout.block_count().max(MAX_BLOCKS as u64 + 1),
                layout.block_count()
            );
            assert_eq!(layout.flatten(1).unwrap_err().class, ErrorClass::Count);
            assert_eq!(layout.element_count().unwrap_err().class, ErrorClass::Count);
        }
        // an inner layout MPI refuses is refused as itself
        let bad = Layout::resized(subarray(&[2], &[3], &[0], Order::C), 0, 8, 2);
        assert_eq!(bad.flatten(1).unwrap_err().class, ErrorClass::Arg);
        // elements past u64 in all
        let elements = Layout::resized(Layout::contiguous(u64::MAX), 0, 0, 2);
        assert_eq!(
            elements.element_count().unwrap_err().class,
            ErrorClass::Count
        );
    }

    /// Copies of a layout with no blocks are work too: counted one each against the block
    /// limit, so a huge count of nothing is refused at once instead of walked forever.
    #[test]
    fn copies_of_nothing_count_against_the_block_limit() {
        let empty = Layout::Indexed { blocks: Vec::new() };
        for inner in [
            empty.clone(),
            Layout::contiguous(0),
            Layout::resized(empty.clone(), 0, 0, 1 << 10),
        ] {
            let endless = Layout::resized(inner.clone(), 0, 0, u64::MAX);
            assert_eq!(endless.block_count(), u64::MAX);
            assert_eq!(endless.flatten(1).unwrap_err().class, ErrorClass::Count);
            assert_eq!(endless.extent(1).unwrap_err().class, ErrorClass::Count);
            assert_eq!(
                endless.element_count().unwrap_err().class,
                ErrorClass::Count
            );
            assert_eq!(endless.total_bytes(1).unwrap_err().class, ErrorClass::Count);
            let over = Layout::resized(inner, 0, 8, MAX_BLOCKS as u64 + 1);
            assert_eq!(over.flatten(1).unwrap_err().class, ErrorClass::Count);
        }
        // at the limit, copies of nothing cover nothing
        let at_limit = Layout::resized(empty, 0, 8, MAX_BLOCKS as u64);
        assert_eq!(at_limit.flatten(1).unwrap(), []);
        assert_eq!(at_limit.total_bytes(1).unwrap(), 0);
    }

    fn block(offset: u64, dtype: Datatype, len: u64) -> StructBlock {
        StructBlock { offset, dtype, len }
    }

    #[test]
    fn struct_blocks_have_their_own_datatypes() {
        // an i32, 4 bytes of padding, two f64s, then a byte; the element size does not apply
        let layout = Layout::Struct {
            blocks: vec![
                block(0, Datatype::I32, 1),
                block(8, Datatype::F64, 2),
                block(24, Datatype::Byte, 1),
            ],
        };
        for elem_size in [1, 8, 0] {
            assert_eq!(layout.flatten(elem_size).unwrap(), [run(0, 4), run(8, 17)]);
            assert_eq!(layout.total_bytes(elem_size).unwrap(), 21);
            assert_eq!(layout.extent(elem_size).unwrap(), 25);
        }
        assert_eq!(layout.element_count().unwrap(), 4);
        assert_eq!(layout.block_count(), 3);
        layout.check_no_overlap(1).unwrap();
        // only an accumulate's own datatype everywhere passes
        assert_eq!(
            layout.check_elements_are(Datatype::F64).unwrap_err().class,
            ErrorClass::Type
        );
        let same = Layout::Struct {
            blocks: vec![block(8, Datatype::F64, 1), block(0, Datatype::F64, 1)],
        };
        same.check_elements_are(Datatype::F64).unwrap();
        assert_eq!(
            same.check_elements_are(Datatype::I64).unwrap_err().class,
            ErrorClass::Type
        );
        // inside a resized layout too; other layouts are of the call's datatype by definition
        let repeated = Layout::resized(layout.clone(), 0, 32, 2);
        assert_eq!(
            repeated
                .check_elements_are(Datatype::I32)
                .unwrap_err()
                .class,
            ErrorClass::Type
        );
        Layout::resized(same, 0, 16, 2)
            .check_elements_are(Datatype::F64)
            .unwrap();
        Layout::contiguous(3)
            .check_elements_are(Datatype::U8)
            .unwrap();
        assert_eq!(repeated.total_bytes(1).unwrap(), 42);
        assert_eq!(
            repeated.flatten(1).unwrap(),
            [run(0, 4), run(8, 17), run(32, 4), run(40, 17)]
        );
        // overlapping blocks of different types are still overlapping
        let overlapping = Layout::Struct {
            blocks: vec![block(0, Datatype::F64, 1), block(4, Datatype::I32, 1)],
        };
        assert_eq!(
            overlapping.check_no_overlap(1).unwrap_err().class,
            ErrorClass::Type
        );
    }

    #[test]
    fn bad_struct_layouts_are_count() {
        let past_u64 = Layout::Struct {
            blocks: vec![block(u64::MAX, Datatype::I32, 1)],
        };
        let long = Layout::Struct {
            blocks: vec![block(0, Datatype::F64, u64::MAX / 4)],
        };
        for layout in [&past_u64, &long] {
            assert_eq!(layout.flatten(1).unwrap_err().class, ErrorClass::Count);
            assert_eq!(layout.extent(1).unwrap_err().class, ErrorClass::Count);
        }
        // its bytes are countable; where they lie is not
        assert_eq!(past_u64.total_bytes(1).unwrap(), 4);
        assert_eq!(long.total_bytes(1).unwrap_err().class, ErrorClass::Count);
        let sum = Layout::Struct {
            blocks: vec![
                block(0, Datatype::Byte, u64::MAX),
                block(0, Datatype::Byte, 1),
            ],
        };
        assert_eq!(sum.total_bytes(1).unwrap_err().class, ErrorClass::Count);
        assert_eq!(sum.element_count().unwrap_err().class, ErrorClass::Count);
        let over = Layout::Struct {
            blocks: vec![block(0, Datatype::Byte, 1); MAX_BLOCKS + 1],
        };
        assert_eq!(over.flatten(1).unwrap_err().class, ErrorClass::Count);
        assert_eq!(over.element_count().unwrap_err().class, ErrorClass::Count);
        assert_eq!(over.total_bytes(1).unwrap_err().class, ErrorClass::Count);
    }

    #[test]
    fn overflow_is_count() {
        let cases = [
            (indexed(&[(u64::MAX, 1)]), 2),
            (indexed(&[(u64::MAX / 2, 1)]), 2),
            (indexed(&[(0, u64::MAX)]), 2),
            (indexed(&[(u64::MAX - 1, 2)]), 1),
            (vector_layout(3, 1, u64::MAX / 2 + 1), 1),
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
        let big = vector_layout(1 << 20, 1 << 50, 1);
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
        let at_limit = vector_layout(MAX_BLOCKS as u64, 1, 1);
        assert_eq!(at_limit.flatten(1).unwrap(), [run(0, MAX_BLOCKS as u64)]);
        let over = vector_layout(MAX_BLOCKS as u64 + 1, 1, 2);
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
            (0u64..10, 0u64..6, 0u64..12)
                .prop_map(|(count, blocklen, stride)| { vector_layout(count, blocklen, stride) }),
            proptest::collection::vec((0u64..60, 0u64..6), 0..12)
                .prop_map(|blocks| indexed(&blocks)),
            (0u64..10, 0u64..6, 0u64..40).prop_map(|(count, blocklen, stride_bytes)| {
                hvector_layout(count, blocklen, stride_bytes)
            }),
            proptest::collection::vec((0u64..200, 0u64..6), 0..12)
                .prop_map(|blocks| hindexed(&blocks)),
            subarrays(),
            proptest::collection::vec((0u64..200, 0usize..4, 0u64..4), 0..8).prop_map(|blocks| {
                let types = [Datatype::Byte, Datatype::I16, Datatype::F32, Datatype::F64];
                Layout::Struct {
                    blocks: blocks
                        .into_iter()
                        .map(|(offset, dtype, len)| block(offset, types[dtype], len))
                        .collect(),
                }
            }),
        ]
        .prop_flat_map(|inner| {
            prop_oneof![
                Just(inner.clone()),
                (-8i64..8, 0u64..40, 0u64..4).prop_map(move |(lb, extent, count)| Layout::resized(
                    inner.clone(),
                    lb,
                    extent,
                    count
                )),
            ]
        })
    }

    /// Whether a struct's own datatypes, not the element size, size some blocks.
    fn has_struct(layout: &Layout) -> bool {
        match layout {
            Layout::Struct { .. } => true,
            Layout::Resized(resized) => has_struct(&resized.inner),
            _ => false,
        }
    }

    /// Valid subarrays of 1 to 3 dimensions, in either order.
    fn subarrays() -> impl Strategy<Value = Layout> {
        let dim = (1u64..5)
            .prop_flat_map(|size| (Just(size), 0..=size))
            .prop_flat_map(|(size, sub)| (Just(size), Just(sub), 0..=size - sub));
        (proptest::collection::vec(dim, 1..4), any::<bool>()).prop_map(|(dims, fortran)| {
            Layout::Subarray(Box::new(Subarray {
                sizes: dims.iter().map(|d| d.0).collect(),
                subsizes: dims.iter().map(|d| d.1).collect(),
                starts: dims.iter().map(|d| d.2).collect(),
                order: if fortran { Order::Fortran } else { Order::C },
            }))
        })
    }

    proptest! {
        #[test]
        fn flatten_total_matches_element_count(layout in layouts(), size in 0u64..16) {
            let runs = layout.flatten(size).unwrap();
            if !has_struct(&layout) {
                prop_assert_eq!(total_len(&runs).unwrap(), layout.element_count().unwrap() * size);
            }
            prop_assert_eq!(layout.total_bytes(size).unwrap(), total_len(&runs).unwrap());
            prop_assert!(runs.iter().all(|r| r.len > 0));
            for pair in runs.windows(2) {
                prop_assert_ne!(pair[0].end(), Some(pair[1].offset), "adjacent runs not merged");
            }
            let extent = runs.iter().map(|r| r.offset + r.len).max().unwrap_or(0);
            prop_assert_eq!(layout.extent(size).unwrap(), extent);
        }

        #[test]
        fn subarray_elements_are_the_box_in_storage_order(layout in subarrays()) {
            let Layout::Subarray(subarray) = &layout else {
                unreachable!()
            };
            let Subarray { sizes, subsizes, starts, order } = subarray.as_ref();
            // every index tuple inside the box, the fastest dimension varying fastest
            let mut dims: Vec<usize> = (0..sizes.len()).collect();
            if *order == Order::C {
                dims.reverse();
            }
            let mut expected = Vec::new();
            let total: u64 = subsizes.iter().product();
            for n in 0..total {
                let (mut rest, mut offset, mut stride) = (n, 0, 1);
                let mut index = vec![0; sizes.len()];
                for &d in &dims {
                    index[d] = starts[d] + rest % subsizes[d];
                    rest /= subsizes[d];
                }
                for &d in &dims {
                    offset += index[d] * stride;
                    stride *= sizes[d];
                }
                expected.push(offset);
            }
            let flattened: Vec<u64> = layout
                .flatten(1)
                .unwrap()
                .iter()
                .flat_map(|run| run.offset..run.offset + run.len)
                .collect();
            prop_assert_eq!(flattened, expected);
            layout.check_no_overlap(1).unwrap();
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
