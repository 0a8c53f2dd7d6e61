//! Derived datatypes (contiguous, vector, hvector, indexed, hindexed, indexed_block,
//! hindexed_block, struct, subarray, resized, dup), held as the byte runs of their type map
//! and their type signature: an origin buffer is gathered and a result scattered by the runs,
//! and a target is addressed as core's `Layout::Hindexed` of them (the target's rules —
//! bounds, element types of an accumulate — stay core's `TargetOp::validate`). A type of
//! several basic types travels as bytes, its signature checked at the origin.

use std::ffi::{c_int, c_void};

use onesided_client::{ByteBlock, Layout};
use onesided_core::Datatype;

use crate::abi::*;
use crate::env::{c_array, count_of, out};
use crate::error::{fail, Res};
use crate::state::{self, Mpi};

/// A datatype: its basic element type, its type map's byte runs (offset, length), its lower
/// bound and extent, and its type signature.
///
/// A type of several basic types (a struct of an `MPI_AINT` and an `MPI_INT`, say) is moved as
/// bytes: its `base` is `Byte` and `mixed` is set. Put and get move it (their origin and target
/// signatures must match); an accumulate refuses it, as MPI requires one basic type there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dt {
    pub base: Datatype,
    pub elem: u64,
    pub runs: Vec<(i64, u64)>,
    pub lb: i64,
    pub extent: i64,
    /// The basic types of one copy in type-map order, as (type, elements) runs.
    pub signature: Vec<(Datatype, u64)>,
    /// Holds more than one basic type (`base` is then `Byte`, `elem` 1).
    pub mixed: bool,
    /// The alignment C gives its largest basic type: a struct's extent is rounded up to it, as
    /// a C struct's size is.
    pub align: i64,
}

impl Dt {
    /// A basic datatype, or a pair type of `MPI_MAXLOC`/`MPI_MINLOC` (its value and its int,
    /// each where C puts it: packed they are core's pair type).
    pub fn basic(handle: i32) -> Option<Dt> {
        if let Some((base, value, index, extent)) = crate::abi::pair(handle) {
            let runs = if index == value {
                vec![(0, value as u64 + 4)]
            } else {
                vec![(0, value as u64), (index as i64, 4)]
            };
            return Some(Dt {
                base,
                elem: base.size() as u64,
                runs,
                lb: 0,
                extent: extent as i64,
                signature: vec![(base, 1)],
                mixed: false,
                align: value.max(4) as i64,
            });
        }
        let dtype = crate::abi::datatype(handle)?;
        let size = dtype.size() as u64;
        Some(Dt {
            base: dtype,
            elem: size,
            runs: vec![(0, size)],
            lb: 0,
            extent: size as i64,
            signature: vec![(dtype, 1)],
            mixed: false,
            align: size.clamp(1, 8) as i64,
        })
    }

    /// The type signature of `count` copies, as (type, elements) runs.
    pub fn signature_of(&self, count: u64) -> Vec<(Datatype, u64)> {
        let mut signature = Vec::new();
        if let [(dtype, elements)] = self.signature[..] {
            if count > 0 && elements > 0 {
                signature.push((dtype, elements * count));
            }
            return signature;
        }
        for _ in 0..count {
            append_signature(&mut signature, &self.signature);
        }
        signature
    }

    /// Bytes of data in one copy.
    pub fn size(&self) -> u64 {
        self.runs.iter().map(|&(_, len)| len).sum()
    }

    /// The runs of `count` copies placed an extent apart, adjacent runs merged.
    pub fn repeated(&self, count: u64) -> Vec<(i64, u64)> {
        if let [(offset, len)] = self.runs[..] {
            if len as i64 == self.extent && count > 0 {
                // copies that touch each other: one run, however many (2 MiB of MPI_BYTE is
                // one run, not two million merged one by one)
                return vec![(offset, len * count)];
            }
        }
        let mut runs: Vec<(i64, u64)> = Vec::new();
        for copy in 0..count as i64 {
            for &(offset, len) in &self.runs {
                let at = offset + copy * self.extent;
                match runs.last_mut() {
                    Some((last, last_len)) if *last + *last_len as i64 == at => *last_len += len,
                    _ => runs.push((at, len)),
                }
            }
        }
        runs
    }

    /// `count` copies as a target layout (byte blocks from the target displacement).
    pub fn target_layout(&self, count: u64) -> Res<Layout> {
        if self.runs == [(0, self.elem)] && self.extent == self.elem as i64 {
            return Ok(Layout::Contiguous { count });
        }
        let blocks = self
            .repeated(count)
            .into_iter()
            .map(|(offset, len)| {
                let offset = u64::try_from(offset).map_err(|_| {
                    fail(
                        MPI_ERR_UNSUPPORTED_OPERATION,
                        "a target datatype reaching below its displacement",
                    )
                })?;
                Ok(ByteBlock {
                    offset,
                    len: len / self.elem,
                })
            })
            .collect::<Res<Vec<_>>>()?;
        Ok(Layout::Hindexed { blocks })
    }

    /// The type made of `blocks` (byte displacement, copies of its type), as MPI's type
    /// constructors place them.
    fn of_blocks<'a>(blocks: impl IntoIterator<Item = (i64, u64, &'a Dt)>) -> Res<Dt> {
        let mut made: Option<Dt> = None;
        let (mut lb, mut ub) = (i64::MAX, i64::MIN);
        let mut runs = Vec::new();
        let mut signature = Vec::new();
        let mut mixed = false;
        let mut align = 1;
        for (disp, count, old) in blocks {
            let first = made.get_or_insert_with(|| old.clone());
            mixed |= old.mixed || old.base != first.base;
            align = align.max(old.align);
            if count == 0 {
                continue;
            }
            lb = lb.min(disp + old.lb);
            ub = ub.max(disp + old.lb + count as i64 * old.extent);
            runs.extend(old.repeated(count).into_iter().map(|(o, l)| (o + disp, l)));
            append_signature(&mut signature, &old.signature_of(count));
        }
        let Some(mut made) = made else {
            return Err(fail(MPI_ERR_TYPE, "a datatype of no blocks"));
        };
        if lb > ub {
            (lb, ub) = (0, 0);
        }
        made.runs = runs;
        made.lb = lb;
        made.extent = ub - lb;
        if signature.is_empty() {
            signature.push((made.base, 0));
        }
        made.signature = signature;
        made.align = align;
        if mixed {
            // moved as bytes; its signature says what it holds
            made.base = Datatype::Byte;
            made.elem = 1;
            made.mixed = true;
        }
        Ok(made)
    }
}

/// Appends `more` to the signature `to`, merging a run of the type `to` ends with.
fn append_signature(to: &mut Vec<(Datatype, u64)>, more: &[(Datatype, u64)]) {
    for &(dtype, elements) in more {
        if elements == 0 {
            continue;
        }
        match to.last_mut() {
            Some((last, n)) if *last == dtype => *n += elements,
            _ => to.push((dtype, elements)),
        }
    }
}

impl Mpi {
    /// The datatype a handle names.
    pub fn dt(&self, handle: i32) -> Res<Dt> {
        if let Some(dt) = Dt::basic(handle) {
            return Ok(dt);
        }
        if let Some(dt) = self.types.get(&handle) {
            return Ok(dt.clone());
        }
        match basic(handle) {
            Some((name, ..)) => Err(fail(MPI_ERR_TYPE, format!("{name} is not supported yet"))),
            None => Err(fail(MPI_ERR_TYPE, format!("{handle:#x} is not a datatype"))),
        }
    }
}

/// Gathers `runs` of the program's buffer at `base` into packed bytes.
pub unsafe fn gather(base: *const c_void, runs: &[(i64, u64)]) -> Res<Vec<u8>> {
    let total: u64 = runs.iter().map(|&(_, len)| len).sum();
    if total == 0 {
        return Ok(Vec::new());
    }
    if base.is_null() {
        return Err(fail(MPI_ERR_BUFFER, "a null buffer"));
    }
    let mut packed = Vec::with_capacity(total as usize);
    for &(offset, len) in runs {
        let from = base.cast::<u8>().offset(offset as isize);
        packed.extend_from_slice(std::slice::from_raw_parts(from, len as usize));
    }
    Ok(packed)
}

/// Scatters packed bytes into `runs` of the program's buffer at `base`.
pub unsafe fn scatter(base: *mut u8, runs: &[(i64, u64)], packed: &[u8]) {
    let mut at = 0usize;
    for &(offset, len) in runs {
        let len = (len as usize).min(packed.len().saturating_sub(at));
        if len == 0 {
            break;
        }
        std::ptr::copy_nonoverlapping(packed[at..].as_ptr(), base.offset(offset as isize), len);
        at += len;
    }
}

/// The program's array of `count` elements at `pointer` (none for a count of zero or less).
unsafe fn array<'a, T>(pointer: *const T, count: c_int) -> Res<&'a [T]> {
    let len = usize::try_from(count).unwrap_or(0);
    c_array(pointer, len, MPI_ERR_ARG, "array")
}

/// Makes a type from `old` with `build` and writes its new handle.
unsafe fn define(old: c_int, new: *mut c_int, build: impl FnOnce(&Dt) -> Res<Dt>) -> Res {
    state::create(new, |mpi| {
        let old = mpi.dt(old)?;
        let made = build(&old)?;
        Ok(mpi.new_type(made))
    })
}

/// What a displacement or stride counts: extents of the old type (`MPI_Type_vector`,
/// `MPI_Type_indexed`, `MPI_Type_create_indexed_block`) or bytes (their `h` forms).
#[derive(Clone, Copy)]
enum Unit {
    Extent,
    Byte,
}

/// Makes a type of blocks of `old`, each `(displacement in units, length in elements)`, and
/// writes its new handle.
unsafe fn define_blocks(
    old: c_int,
    new: *mut c_int,
    unit: Unit,
    blocks: impl Iterator<Item = (i64, u64)>,
) -> Res {
    define(old, new, |old| {
        let unit = match unit {
            Unit::Extent => old.extent,
            Unit::Byte => 1,
        };
        Dt::of_blocks(blocks.map(|(disp, len)| (disp * unit, len, old)))
    })
}

/// An `_x` form of an extent call: `call`'s lower bound and extent (`MPI_Aint`s) for
/// `datatype`, written as `MPI_Count`s.
unsafe fn as_counts(
    call: unsafe extern "C" fn(c_int, *mut isize, *mut isize) -> c_int,
    name: &str,
    datatype: c_int,
    lb: *mut i64,
    extent: *mut i64,
) -> Res {
    let (mut low, mut span) = (0isize, 0isize);
    match call(datatype, &mut low, &mut span) {
        MPI_SUCCESS => {
            out(lb, low as i64)?;
            out(extent, span as i64)
        }
        class => Err(fail(class, format!("{name} failed"))),
    }
}

/// The type constructors MPI has in two forms that differ only in what a displacement (or a
/// stride) counts: extents of the old type, as `int` (`MPI_Type_vector`, …), or bytes, as
/// `MPI_Aint` (their `h` forms). Each body is written once, over `Disp` (the displacement's C
/// type) and `UNIT`, and exported in both forms.
macro_rules! extent_and_byte_forms {
    ($(
        fn $name:ident / $pname:ident, $hname:ident / $hpname:ident (
            $($arg:ident : $ty:ty),* $(,)?
        ) $body:block
    )*) => {
        /// The forms whose displacements count extents of the old type.
        mod extent_forms {
            use super::*;
            type Disp = c_int;
            const UNIT: Unit = Unit::Extent;
            export! { $(fn $name / $pname ($($arg: $ty),*) $body)* }
        }
        /// The `h` forms, whose displacements count bytes.
        mod byte_forms {
            use super::*;
            type Disp = isize;
            const UNIT: Unit = Unit::Byte;
            export! { $(fn $hname / $hpname ($($arg: $ty),*) $body)* }
        }
    };
}

extent_and_byte_forms! {
    fn MPI_Type_vector / PMPI_Type_vector, MPI_Type_create_hvector / PMPI_Type_create_hvector(
        count: c_int,
        blocklength: c_int,
        stride: Disp,
        oldtype: c_int,
        newtype: *mut c_int,
    ) {
        let (count, blocklength) = (count_of(count)?, count_of(blocklength)?);
        let blocks = (0..count as i64).map(|i| (i * stride as i64, blocklength));
        define_blocks(oldtype, newtype, UNIT, blocks)
    }

    fn MPI_Type_indexed / PMPI_Type_indexed, MPI_Type_create_hindexed / PMPI_Type_create_hindexed(
        count: c_int,
        blocklengths: *const c_int,
        displacements: *const Disp,
        oldtype: c_int,
        newtype: *mut c_int,
    ) {
        let lengths = array(blocklengths, count)?;
        let disps = array(displacements, count)?;
        let blocks = lengths.iter().zip(disps).map(|(&len, &disp)| (disp as i64, len.max(0) as u64));
        define_blocks(oldtype, newtype, UNIT, blocks)
    }

    fn MPI_Type_create_indexed_block / PMPI_Type_create_indexed_block,
        MPI_Type_create_hindexed_block / PMPI_Type_create_hindexed_block(
        count: c_int,
        blocklength: c_int,
        displacements: *const Disp,
        oldtype: c_int,
        newtype: *mut c_int,
    ) {
        let blocklength = count_of(blocklength)?;
        let disps = array(displacements, count)?;
        let blocks = disps.iter().map(|&disp| (disp as i64, blocklength));
        define_blocks(oldtype, newtype, UNIT, blocks)
    }
}

export! {
    fn MPI_Type_contiguous / PMPI_Type_contiguous(count: c_int, oldtype: c_int, newtype: *mut c_int) {
        let count = count_of(count)?;
        define(oldtype, newtype, |old| Dt::of_blocks([(0, count, old)]))
    }

    fn MPI_Type_create_struct / PMPI_Type_create_struct(
        count: c_int,
        blocklengths: *const c_int,
        displacements: *const isize,
        types: *const c_int,
        newtype: *mut c_int,
    ) {
        let lengths = array(blocklengths, count)?;
        let disps = array(displacements, count)?;
        let handles = array(types, count)?;
        state::create(newtype, |mpi| {
            let olds = handles.iter().map(|&h| mpi.dt(h)).collect::<Res<Vec<_>>>()?;
            let mut made = Dt::of_blocks(
                lengths
                    .iter()
                    .zip(disps)
                    .zip(&olds)
                    .map(|((&len, &disp), old)| (disp as i64, len.max(0) as u64, old)),
            )?;
            // MPI pads a struct's extent to its largest member's alignment, as C pads the
            // struct: an array of them is addressed as C lays it out
            let padding = made.extent.rem_euclid(made.align);
            if padding != 0 {
                made.extent += made.align - padding;
            }
            Ok(mpi.new_type(made))
        })
    }

    fn MPI_Type_create_subarray / PMPI_Type_create_subarray(
        ndims: c_int,
        sizes: *const c_int,
        subsizes: *const c_int,
        starts: *const c_int,
        order: c_int,
        oldtype: c_int,
        newtype: *mut c_int,
    ) {
        let sizes: Vec<i64> = array(sizes, ndims)?.iter().map(|&v| v as i64).collect();
        let subsizes: Vec<i64> = array(subsizes, ndims)?.iter().map(|&v| v as i64).collect();
        let starts: Vec<i64> = array(starts, ndims)?.iter().map(|&v| v as i64).collect();
        if order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN {
            return Err(fail(MPI_ERR_ARG, format!("order {order} is not an order")));
        }
        for d in 0..sizes.len() {
            if subsizes[d] < 0 || starts[d] < 0 || starts[d] + subsizes[d] > sizes[d] {
                return Err(fail(MPI_ERR_ARG, format!("dimension {d} of the subarray is outside the array")));
            }
        }
        define(oldtype, newtype, |old| {
            // dimensions from the slowest-varying to the fastest
            let dims: Vec<usize> = if order == MPI_ORDER_C {
                (0..sizes.len()).collect()
            } else {
                (0..sizes.len()).rev().collect()
            };
            let mut strides = vec![0i64; sizes.len()];
            let mut stride = old.extent;
            for &d in dims.iter().rev() {
                strides[d] = stride;
                stride *= sizes[d];
            }
            let whole = stride;
            let mut blocks = Vec::new();
            let total: i64 = subsizes.iter().product();
            let mut index = vec![0i64; sizes.len()];
            for _ in 0..total {
                let disp: i64 = (0..sizes.len()).map(|d| (starts[d] + index[d]) * strides[d]).sum();
                blocks.push(disp);
                for &d in dims.iter().rev() {
                    index[d] += 1;
                    if index[d] < subsizes[d] {
                        break;
                    }
                    index[d] = 0;
                }
            }
            let mut made = Dt::of_blocks(blocks.iter().map(|&disp| (disp, 1, old)))?;
            made.lb = 0;
            made.extent = whole;
            Ok(made)
        })
    }

    fn MPI_Type_create_resized / PMPI_Type_create_resized(
        oldtype: c_int,
        lb: isize,
        extent: isize,
        newtype: *mut c_int,
    ) {
        define(oldtype, newtype, |old| {
            let mut made = old.clone();
            made.lb = lb as i64;
            made.extent = extent as i64;
            Ok(made)
        })
    }

    fn MPI_Type_dup / PMPI_Type_dup(oldtype: c_int, newtype: *mut c_int) {
        define(oldtype, newtype, |old| Ok(old.clone()))
    }

    fn MPI_Type_commit / PMPI_Type_commit(datatype: *mut c_int) {
        if datatype.is_null() {
            return Err(fail(MPI_ERR_TYPE, "a null datatype pointer"));
        }
        state::with(|mpi| mpi.dt(*datatype).map(drop))
    }

    fn MPI_Type_free / PMPI_Type_free(datatype: *mut c_int) {
        state::free(datatype, "datatype", MPI_ERR_TYPE, MPI_DATATYPE_NULL, |mpi, handle| {
            state::remove(&mut mpi.types, handle, || {
                fail(MPI_ERR_TYPE, "not a derived datatype (predefined ones cannot be freed)")
            })
        })
    }

    fn MPI_Type_size / PMPI_Type_size(datatype: c_int, size: *mut c_int) {
        let bytes = match basic(datatype) {
            Some((_, _, bytes)) => bytes as u64,
            None => state::with(|mpi| Ok(mpi.dt(datatype)?.size()))?,
        };
        out(size, bytes as c_int)
    }

    fn MPI_Type_get_extent / PMPI_Type_get_extent(datatype: c_int, lb: *mut isize, extent: *mut isize) {
        let (low, span) = match basic(datatype) {
            Some((_, _, bytes)) => (0, bytes as i64),
            None => state::with(|mpi| {
                let dt = mpi.dt(datatype)?;
                Ok((dt.lb, dt.extent))
            })?,
        };
        out(lb, low as isize)?;
        out(extent, span as isize)
    }

    fn MPI_Type_get_true_extent / PMPI_Type_get_true_extent(
        datatype: c_int,
        true_lb: *mut isize,
        true_extent: *mut isize,
    ) {
        let (low, span) = match basic(datatype) {
            Some((_, _, bytes)) => (0, bytes as i64),
            None => state::with(|mpi| {
                let dt = mpi.dt(datatype)?;
                let low = dt.runs.iter().map(|&(o, _)| o).min().unwrap_or(0);
                let high = dt.runs.iter().map(|&(o, l)| o + l as i64).max().unwrap_or(0);
                Ok((low, high - low))
            })?,
        };
        out(true_lb, low as isize)?;
        out(true_extent, span as isize)
    }

    fn MPI_Type_size_x / PMPI_Type_size_x(datatype: c_int, size: *mut i64) {
        let mut bytes: c_int = 0;
        match MPI_Type_size(datatype, &mut bytes) {
            MPI_SUCCESS => out(size, i64::from(bytes)),
            class => Err(fail(class, "MPI_Type_size failed")),
        }
    }

    fn MPI_Type_get_extent_x / PMPI_Type_get_extent_x(datatype: c_int, lb: *mut i64, extent: *mut i64) {
        as_counts(MPI_Type_get_extent, "MPI_Type_get_extent", datatype, lb, extent)
    }

    fn MPI_Type_get_true_extent_x / PMPI_Type_get_true_extent_x(
        datatype: c_int,
        true_lb: *mut i64,
        true_extent: *mut i64,
    ) {
        as_counts(MPI_Type_get_true_extent, "MPI_Type_get_true_extent", datatype, true_lb, true_extent)
    }

    fn MPI_Get_address / PMPI_Get_address(location: *const c_void, address: *mut isize) {
        out(address, location as isize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MPICH's handle of a basic datatype.
    fn handle(name: &str) -> i32 {
        DATATYPES.iter().find(|d| d.1 == name).unwrap().0
    }

    fn ints(runs: Vec<(i64, u64)>, extent: i64) -> Dt {
        Dt {
            runs,
            extent,
            ..Dt::basic(handle("MPI_INT")).unwrap()
        }
    }

    #[test]
    fn copies_that_touch_are_one_run_and_others_keep_their_gaps() {
        assert_eq!(ints(vec![(0, 4)], 4).repeated(3), vec![(0, 12)]);
        assert_eq!(
            ints(vec![(0, 4)], 8).repeated(3),
            vec![(0, 4), (8, 4), (16, 4)]
        );
        assert_eq!(ints(vec![(0, 4), (4, 4)], 8).repeated(2), vec![(0, 16)]);
        assert!(ints(vec![(0, 4)], 4).repeated(0).is_empty());
    }

    #[test]
    fn a_struct_of_two_basic_types_is_mixed_with_their_signature() {
        let long = Dt::basic(handle("MPI_LONG")).unwrap();
        let int = Dt::basic(handle("MPI_INT")).unwrap();
        let pair = Dt::of_blocks([(0, 1, &long), (8, 2, &int)]).unwrap();
        assert!(pair.mixed && pair.base == Datatype::Byte && pair.elem == 1);
        assert_eq!(pair.signature, vec![(Datatype::I64, 1), (Datatype::I32, 2)]);
        assert_eq!(pair.align, 8);
        assert_eq!(
            pair.signature_of(2),
            vec![
                (Datatype::I64, 1),
                (Datatype::I32, 2),
                (Datatype::I64, 1),
                (Datatype::I32, 2)
            ]
        );
        let same = Dt::of_blocks([(0, 2, &int), (12, 1, &int)]).unwrap();
        assert!(!same.mixed && same.base == Datatype::I32);
        assert_eq!(same.signature_of(2), vec![(Datatype::I32, 6)]);
    }
}
