//! Between a scenario's typed values and window bytes, for the runner (against a server) and
//! the explorer (on core's simulator) alike.
//!
//! Owns: a location's byte runs and element offsets in its window, the origin buffer an
//! operation sends (packed by its origin layout, with core's `gather`) and the one a get's
//! values land in (`unpacked`, with `scatter`), the [`TargetOp`] of a communication call, and
//! bytes read back as an [`Observed`] value. Must not: check a location against a window (the
//! target does, as `RMA_RANGE`), do I/O, or know how an operation travels.

use bytes::Bytes;
use onesided_core::datatype::{decode, encode_all, Value};
use onesided_core::layout::{gather, scatter};
use onesided_core::window::{OpKind, TargetOp};
use onesided_core::{Datatype, ErrorClass, Op, RmaError};

use super::ast::{Loc, Observed, OpCall, OpCallSpec, Origin};

type Result<T> = std::result::Result<T, RmaError>;

/// The value of `bytes` read as elements of `dtype`: a list, or the first element.
pub(crate) fn observed(dtype: Datatype, list: bool, bytes: &[u8]) -> Result<Observed> {
    let values = decode(dtype, bytes)?;
    Ok(if list {
        Observed::List(values)
    } else {
        Observed::Scalar(values.into_iter().next().unwrap_or(Value::Int(0)))
    })
}

/// The byte runs of a location's elements in a window of `dtype`, in type-map order, as
/// (offset, length) from the window's start; an offset that overflows is `u64::MAX` (outside
/// every window).
pub(crate) fn byte_runs(loc: &Loc, dtype: Datatype) -> Result<Vec<(u64, u64)>> {
    let size = dtype.size() as u64;
    let base = loc.index.saturating_mul(size);
    let runs = loc.shape.layout().flatten(size)?;
    Ok(runs
        .into_iter()
        .map(|run| (base.saturating_add(run.offset), run.len))
        .collect())
}

/// Byte offsets of a location's elements in a window of `dtype`, in type-map order.
pub(crate) fn element_offsets(loc: &Loc, dtype: Datatype) -> Result<Vec<u64>> {
    let size = dtype.size() as u64;
    let mut offsets = Vec::new();
    for (offset, len) in byte_runs(loc, dtype)? {
        offsets.extend((0..len / size).map(|k| offset.saturating_add(k * size)));
    }
    Ok(offsets)
}

/// The origin values an operation sends: all of them, or those `origin` selects in its
/// type-map order (`MPI_ERR_RMA_RANGE` when it reaches past them).
fn origin_data(dtype: Datatype, values: &[Value], origin: Option<&Origin>) -> Result<Bytes> {
    let buffer = encode_all(dtype, values)?;
    let Some(origin) = origin else {
        return Ok(Bytes::from(buffer));
    };
    let size = dtype.size() as u64;
    let runs = origin.shape.layout().flatten(size)?;
    let base = origin.index.saturating_mul(size);
    Ok(Bytes::from(gather(&runs, base, &buffer)?))
}

/// The origin buffer of a get with an origin layout: the fetched values unpacked where
/// `origin` says, the buffer just long enough for them, every other element zero.
pub(crate) fn unpacked(dtype: Datatype, origin: &Origin, fetched: &[u8]) -> Result<Bytes> {
    let size = dtype.size() as u64;
    let runs = origin.shape.layout().flatten(size)?;
    let base = origin.index.saturating_mul(size);
    let end = runs
        .iter()
        .filter_map(|run| run.end())
        .max()
        .map_or(Some(0), |end| base.checked_add(end))
        .and_then(|end| end.checked_next_multiple_of(size))
        .and_then(|end| usize::try_from(end).ok())
        .ok_or_else(|| RmaError::new(ErrorClass::Count, "the origin buffer is too large"))?;
    let mut buffer = vec![0u8; end];
    scatter(&runs, base, &mut buffer, fetched)?;
    Ok(Bytes::from(buffer))
}

/// The operation a communication call makes at displacement `disp` of a window of `dtype`:
/// its kind, the origin values it sends (none for a get or a no_op) and a `cas`'s compare
/// value.
pub(crate) fn target_op(spec: &OpCallSpec, dtype: Datatype, disp: u64) -> Result<TargetOp<Bytes>> {
    let (kind, sends) = match spec.kind {
        OpCall::Put => (OpKind::Put, true),
        OpCall::Get => (OpKind::Get, false),
        OpCall::Acc(op) => (OpKind::Accumulate(op), true),
        OpCall::GetAcc(op) => (OpKind::GetAccumulate(op), op != Op::NoOp),
        OpCall::Fop(op) => (OpKind::FetchAndOp(op), op != Op::NoOp),
        OpCall::Cas => (OpKind::CompareAndSwap, true),
    };
    let data = if sends {
        origin_data(dtype, &spec.values, spec.origin.as_deref())?
    } else {
        Bytes::new()
    };
    let compare = match &spec.compare {
        Some(value) => Bytes::from(encode_all(dtype, std::slice::from_ref(value))?),
        None => Bytes::new(),
    };
    Ok(TargetOp {
        kind,
        dtype,
        disp,
        layout: spec.loc.shape.layout(),
        data,
        compare,
    })
}
