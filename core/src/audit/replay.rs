//! Replay: every rank's public copy at any sequence number, rebuilt through the same `apply`
//! that runs live.
//!
//! Owns: how each recorded event changes a public copy (`apply_record`): a window's creation
//! makes zeroed copies, a `region_attached` grows a dynamic window's copy, a `published` event
//! writes the owner's pushed bytes itself (the one write here that is not `apply`, as the
//! live target's push is not), and an `op` is rebuilt as the access it made and goes through
//! `window::apply`; every other event changes no bytes. Recovery rolls snapshots forward with
//! the same function. Must not: read the store or check the hash chain (callers hand it records
//! they took through `readable`), or decide whether an operation was allowed: what the log
//! says happened, happens.

use super::{AuditRecord, Event, RecordedOp};
use crate::datatype::Datatype;
use crate::error::RmaResult;
use crate::layout::Run;
use crate::reduce::Op;
use crate::rma_err;
use crate::window::{OpKind, TargetAccess, TargetOp, DYNAMIC_BASE, MAX_WINDOW_BYTES};

/// Every rank's public copy after the events with `seq <= at` (all of them with `None`),
/// rebuilt from the window's creation, the owners' publications and the applied operations.
///
/// # Errors
/// `MPI_ERR_OTHER` when the history does not start with the window's creation or an event
/// cannot be applied.
pub fn replay(records: &[AuditRecord], at: Option<u64>) -> RmaResult<Vec<Vec<u8>>> {
    let mut copies: Option<Vec<Vec<u8>>> = None;
    for record in records {
        if at.is_some_and(|at| record.seq > at) {
            break;
        }
        match &record.event {
            Event::WindowCreated { sizes, .. } => {
                copies = Some(sizes.iter().map(|&size| vec![0u8; size as usize]).collect());
            }
            Event::Published { .. } | Event::Op { .. } | Event::RegionAttached { .. } => {
                apply_record(rank_copy(&mut copies, record)?, record)?;
            }
            _ => {}
        }
    }
    copies.ok_or_else(|| rma_err!(Other, "the history has no window creation"))
}

/// Applies what `record` did to its rank's public copy `copy` (a publication, an
/// operation, a dynamic window's region attached, which grows it; other events change no bytes). Recovery uses it to roll a snapshot forward.
///
/// # Errors
/// `MPI_ERR_OTHER` when the event does not fit the copy.
pub fn apply_record(copy: &mut Vec<u8>, record: &AuditRecord) -> RmaResult<()> {
    match &record.event {
        Event::RegionAttached { base, size } => {
            // the public copy spans every region attached (dynamic windows); one of no bytes
            // spans one address, as the target gives it
            let end = base
                .checked_sub(DYNAMIC_BASE)
                .and_then(|offset| offset.checked_add((*size).max(1)))
                .filter(|&end| end <= MAX_WINDOW_BYTES)
                .ok_or_else(|| {
                    rma_err!(
                        Other,
                        "event {} attaches a region outside any window",
                        record.seq
                    )
                })?;
            if (copy.len() as u64) < end {
                copy.resize(end as usize, 0);
            }
        }
        Event::Published { offset, data } => {
            let range = span(*offset, data.len() as u64, copy.len(), record.seq)?;
            copy[range].copy_from_slice(data);
        }
        Event::Op {
            op,
            datatype,
            runs,
            data,
            compare,
            ..
        } => replay_op(copy, op, datatype, runs, data, compare, record.seq)?,
        _ => {}
    }
    Ok(())
}

fn rank_copy<'a>(
    copies: &'a mut Option<Vec<Vec<u8>>>,
    record: &AuditRecord,
) -> RmaResult<&'a mut Vec<u8>> {
    copies
        .as_mut()
        .ok_or_else(|| {
            rma_err!(
                Other,
                "event {} comes before the window's creation",
                record.seq
            )
        })?
        .get_mut(record.rank as usize)
        .ok_or_else(|| {
            rma_err!(
                Other,
                "event {} names rank {} outside the window",
                record.seq,
                record.rank
            )
        })
}

fn span(offset: u64, len: u64, size: usize, seq: u64) -> RmaResult<std::ops::Range<usize>> {
    match offset.checked_add(len) {
        Some(end) if end <= size as u64 => Ok(offset as usize..end as usize),
        _ => Err(rma_err!(Other, "event {seq} reaches outside the window")),
    }
}

/// Rebuilds the access a recorded operation made and applies it with the live target's
/// [`apply`](crate::window::apply): replay and live change bytes through the same function.
fn replay_op(
    copy: &mut [u8],
    op: &RecordedOp,
    datatype: &str,
    runs: &[(u64, u64)],
    data: &[u8],
    compare: &[u8],
    seq: u64,
) -> RmaResult<()> {
    let dtype = Datatype::parse(datatype)
        .ok_or_else(|| rma_err!(Other, "event {seq} has unknown datatype {datatype}"))?;
    let kind = op
        .kind()
        .ok_or_else(|| rma_err!(Other, "event {seq} has an unknown op"))?;
    let runs: Vec<Run> = runs
        .iter()
        .map(|&(offset, len)| Run { offset, len })
        .collect();
    let mut bytes = 0u64;
    for run in &runs {
        span(run.offset, run.len, copy.len(), seq)?;
        bytes += run.len;
    }
    let carries = match kind {
        OpKind::Put => true,
        OpKind::Accumulate(op) | OpKind::GetAccumulate(op) | OpKind::FetchAndOp(op) => {
            op != Op::NoOp
        }
        OpKind::Get | OpKind::CompareAndSwap => false,
    };
    if carries && (data.len() as u64) < bytes {
        return Err(rma_err!(Other, "event {seq} is short of data"));
    }
    // `apply` reads only the kind, datatype, data and compare, and the access's runs: the
    // recorded runs are the access, so displacement and layout need not be rebuilt exactly
    let element = dtype.size() as u64;
    let target_op = TargetOp {
        kind,
        dtype,
        disp: 0,
        layout: crate::layout::Layout::contiguous(bytes / element.max(1)),
        data,
        compare,
    };
    let access = TargetAccess { runs, bytes };
    crate::window::apply(copy, &access, &target_op)
        .map(drop)
        .map_err(|error| rma_err!(Other, "event {seq} cannot be applied: {error}"))
}
