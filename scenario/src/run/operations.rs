//! The calls that move data: `store`, `load`, and the operations (put, get, accumulate,
//! get_accumulate, fetch_and_op, compare_and_swap, and their request-based forms), with the
//! conversions between the scenario's typed values and the library's bytes.
//!
//! Owns: a location's byte runs and element offsets in its window, the origin buffer an
//! operation sends (packed by its origin layout, with core's `gather`) and the one a get's
//! values land in (`unpacked`, with `scatter`), the [`OpSpec`] of each operation, and a
//! fetched value's variable (pending until its reply is here) and request. Must not: check a
//! location against a window (the library and the server do, as `RMA_RANGE`), or test or wait
//! for a request (the `requests` calls do).

use bytes::Bytes;
use futures::FutureExt;
use onesided_core::datatype::{decode, encode_all, Value};
use onesided_core::layout::{gather, scatter};
use onesided_core::window::OpKind;
use onesided_core::{Datatype, ErrorClass, Op, RmaError};

use super::super::ast::{Loc, Observed, OpCall, OpCallSpec, Origin};
use super::super::parse::returns_list;
use super::executor::VarSlot;
use super::{RankExecutor, VarValue};
use onesided_client::{Error, OpSpec, Request};

/// The value of `bytes` read as elements of `dtype`: a list, or the first element.
pub(super) fn observed(dtype: Datatype, list: bool, bytes: &[u8]) -> Result<Observed, Error> {
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
pub(super) fn byte_runs(loc: &Loc, dtype: Datatype) -> Result<Vec<(u64, u64)>, Error> {
    let size = dtype.size() as u64;
    let base = loc.index.saturating_mul(size);
    let runs = loc.shape.layout().flatten(size)?;
    Ok(runs
        .into_iter()
        .map(|run| (base.saturating_add(run.offset), run.len))
        .collect())
}

/// Byte offsets of a location's elements in a window of `dtype`, in type-map order.
fn element_offsets(loc: &Loc, dtype: Datatype) -> Result<Vec<u64>, Error> {
    let size = dtype.size() as u64;
    let mut offsets = Vec::new();
    for (offset, len) in byte_runs(loc, dtype)? {
        offsets.extend((0..len / size).map(|k| offset.saturating_add(k * size)));
    }
    Ok(offsets)
}

/// The origin values an operation sends: all of them, or those `origin` selects in its
/// type-map order (`MPI_ERR_RMA_RANGE` when it reaches past them).
fn origin_data(dtype: Datatype, values: &[Value], origin: Option<&Origin>) -> Result<Bytes, Error> {
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
fn unpacked(dtype: Datatype, origin: &Origin, fetched: &[u8]) -> Result<Bytes, Error> {
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

impl RankExecutor {
    /// `store LOC = V[,V...]`: writes the values into this rank's private copy, element by
    /// element (in a region: by address, while this rank has it attached).
    pub(super) fn store(&self, loc: &Loc, values: &[Value]) -> Result<(), Error> {
        let dtype = self.dtypes[loc.window];
        let window = self.window(loc.window)?;
        let offsets = element_offsets(loc, dtype)?;
        let region = match &loc.region {
            Some(region) => Some(self.regions.address(region)?),
            None => None,
        };
        for (offset, value) in offsets.iter().zip(values) {
            let bytes = encode_all(dtype, std::slice::from_ref(value))?;
            match region {
                // by address, inside a region this rank attached
                Some(address) => window.store_at::<u8>(address.saturating_add(*offset), &bytes)?,
                None => window.store_bytes(*offset, &bytes)?,
            }
        }
        Ok(())
    }

    /// `load LOC -> var`: reads this rank's private copy into `var`.
    pub(super) fn load(&mut self, loc: &Loc, var: &str) -> Result<(), Error> {
        let value = self.private(loc)?;
        let dtype = self.dtypes[loc.window];
        self.vars
            .insert(var.to_string(), VarSlot::Ready(VarValue { dtype, value }));
        Ok(())
    }

    /// An operation: issued at once; its fetched value defines its variable once the reply is
    /// here, and a request-based one is active under its name.
    pub(super) fn operation(&mut self, spec: &OpCallSpec) -> Result<(), Error> {
        let dtype = self.dtypes[spec.loc.window];
        let window = self.window(spec.loc.window)?;
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
        let op = OpSpec {
            kind,
            dtype,
            disp: self.regions.disp(&spec.loc, dtype.size() as u64)?,
            layout: spec.loc.shape.layout(),
            data,
            compare,
        };
        let target = self.in_window(spec.loc.window, spec.target)?;
        let pending = window.issue(target, op, spec.request_based)?;
        if let Some(var) = &spec.var {
            let fetched = pending.clone().value();
            let reply = match (&spec.kind, &spec.origin) {
                // a get's origin layout says where its values land (`unpack`)
                (OpCall::Get, Some(origin)) => {
                    let origin = origin.clone();
                    async move { unpacked(dtype, &origin, &fetched.await?) }.boxed()
                }
                _ => fetched.boxed(),
            };
            self.vars.insert(
                var.clone(),
                VarSlot::Pending {
                    dtype,
                    list: returns_list(spec.kind, &spec.loc, spec.origin.as_deref()),
                    reply: reply.shared(),
                },
            );
        }
        if let Some(name) = &spec.request {
            // rget-like requests complete when the data is here; rput and racc at once
            // (the origin's values were copied when the call returned)
            let request = match &spec.var {
                Some(_) => Request::pending(pending),
                None => Request::complete(Bytes::new()),
            };
            self.activate(name, request, spec.var.clone());
        }
        Ok(())
    }
}
