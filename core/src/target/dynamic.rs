//! A dynamic window's memory at a target: the regions attached to one growing public copy.
//!
//! Owns: the attached regions (`with_dynamic`, `Input::Attach`, `Input::Detach`: addresses
//! `DYNAMIC_BASE + offset`, within the most bytes a rank may attach; regions of no bytes kept
//! apart), growing the copy with zeros to span a new region (recorded `region_attached`),
//! `attach_growth` (what the caller takes from the server's budget first), `attached_regions`
//! (what a new session of the owner starts from), and the refusal of an access not inside one
//! region (`MPI_ERR_RMA_RANGE`). Must not: shrink the copy, hand detached bytes out again
//! unless asked for by address, or turn an operation's addresses into offsets (admission did:
//! `window::dynamic_offsets`).

use std::collections::BTreeMap;

use crate::audit::Event;
use crate::window::{TargetAccess, DYNAMIC_BASE};
use crate::{ErrorClass, RmaError};

use super::{Outcome, Target};

/// A dynamic window's memory at one rank.
#[derive(Debug)]
pub(super) struct Regions {
    /// The most bytes the public copy may span.
    max_bytes: u64,
    /// Offset in the public copy → size.
    attached: BTreeMap<u64, u64>,
    /// Regions of no bytes (MPI allows them): offset → how many (one, unless attached by
    /// address where another is), kept apart from those with bytes; only a detach finds them.
    empty: BTreeMap<u64, usize>,
}

fn not_dynamic(call: &str) -> RmaError {
    RmaError::new(
        ErrorClass::RmaFlavor,
        format!("{call} is only for windows of flavor dynamic"),
    )
}

impl<R> Target<R> {
    /// A dynamic window's target: its memory is the regions attached ([`Input::Attach`]),
    /// spanning at most `max_bytes` bytes (the public copy is that span; detached bytes are not
    /// handed out again unless asked for by address); `regions` are those already attached
    /// (offset → size in the copy, as recovery finds them).
    ///
    /// [`Input::Attach`]: super::Input::Attach
    pub fn with_dynamic(mut self, max_bytes: u64, regions: BTreeMap<u64, u64>) -> Self {
        let (empty, attached): (BTreeMap<u64, u64>, _) =
            regions.into_iter().partition(|&(_, size)| size == 0);
        self.dynamic = Some(Regions {
            max_bytes,
            attached,
            empty: empty.into_keys().map(|offset| (offset, 1)).collect(),
        });
        self
    }

    /// Dynamic window: by how many bytes attaching `size` bytes (at address `at`, else after
    /// the span) would grow the public copy; 0 when it would not, when the rank's own limit
    /// refuses it anyway, or on a static window. The caller takes that many bytes from a
    /// server-wide budget before it hands the attach over.
    pub fn attach_growth(&self, size: u64, at: Option<u64>) -> u64 {
        let Some(dynamic) = &self.dynamic else {
            return 0;
        };
        let span = self.public.len() as u64;
        let offset = match at {
            Some(at) => at.saturating_sub(DYNAMIC_BASE),
            None => span,
        };
        // a region of no bytes spans one address ([`Target::attach`])
        let end = offset.saturating_add(size.max(1));
        if end > dynamic.max_bytes {
            return 0;
        }
        end.saturating_sub(span)
    }

    /// Dynamic window: the attached regions, offset in the public copy → size.
    pub fn regions(&self) -> Option<&BTreeMap<u64, u64>> {
        self.dynamic.as_ref().map(|dynamic| &dynamic.attached)
    }

    /// Dynamic window: every attached region as its address and its bytes in the public copy,
    /// by address (what a new session of the owner starts from); empty for other flavors.
    pub fn attached_regions(&self) -> Vec<(u64, Vec<u8>)> {
        let Some(dynamic) = &self.dynamic else {
            return Vec::new();
        };
        dynamic
            .attached
            .iter()
            .map(|(&offset, &size)| {
                let bytes = usize::try_from(offset)
                    .ok()
                    .and_then(|start| Some(start..start.checked_add(usize::try_from(size).ok()?)?))
                    .and_then(|range| self.public.get(range))
                    .unwrap_or_default();
                (DYNAMIC_BASE + offset, bytes.to_vec())
            })
            .collect()
    }

    /// `Input::Attach`: answered with the region's address, or refused.
    pub(super) fn handle_attach(&mut self, size: u64, at: Option<u64>, reply: R) {
        match self.attach(size, at) {
            Ok(base) => self.answer(reply, Ok(Outcome::Attached { base })),
            Err(error) => self.answer_early(reply, Err(error)),
        }
    }

    /// `Input::Detach`: answered once detached, or refused.
    pub(super) fn handle_detach(&mut self, base: u64, reply: R) {
        match self.detach(base) {
            Ok(()) => self.done(reply),
            Err(error) => self.answer_early(reply, Err(error)),
        }
    }

    fn attach(&mut self, size: u64, at: Option<u64>) -> Result<u64, RmaError> {
        let Some(dynamic) = self.dynamic.as_mut() else {
            return Err(not_dynamic("attach"));
        };
        let offset = match at {
            Some(at) => at.checked_sub(DYNAMIC_BASE).ok_or_else(|| {
                RmaError::new(
                    ErrorClass::RmaAttach,
                    format!(
                        "address {at:#x} is below the window's first address {DYNAMIC_BASE:#x}"
                    ),
                )
            })?,
            None => self.public.len() as u64,
        };
        // a region of no bytes still spans one byte of addresses (none of them attached), so
        // its address is its own: the next region does not start there
        let end = offset
            .checked_add(size.max(1))
            .filter(|&end| end <= dynamic.max_bytes)
            .ok_or_else(|| {
                RmaError::new(
                    ErrorClass::RmaAttach,
                    format!(
                        "a region of {size} bytes at {:#x} does not fit in the {} bytes a rank \
                         may attach",
                        DYNAMIC_BASE.saturating_add(offset),
                        dynamic.max_bytes
                    ),
                )
            })?;
        if let Some((&other, &len)) = dynamic.attached.range(..end).next_back() {
            if size > 0 && other + len > offset {
                return Err(RmaError::new(
                    ErrorClass::RmaAttach,
                    format!(
                        "a region of {size} bytes at {:#x} overlaps the region of {len} bytes \
                         attached at {:#x}",
                        DYNAMIC_BASE + offset,
                        DYNAMIC_BASE + other
                    ),
                ));
            }
        }
        if size == 0 {
            *dynamic.empty.entry(offset).or_default() += 1;
        } else {
            dynamic.attached.insert(offset, size);
        }
        if (self.public.len() as u64) < end {
            self.public.resize(end as usize, 0);
        }
        let base = DYNAMIC_BASE + offset;
        self.record(Event::RegionAttached { base, size });
        Ok(base)
    }

    fn detach(&mut self, base: u64) -> Result<(), RmaError> {
        let Some(dynamic) = self.dynamic.as_mut() else {
            return Err(not_dynamic("detach"));
        };
        let size = base
            .checked_sub(DYNAMIC_BASE)
            .and_then(|offset| {
                dynamic.attached.remove(&offset).or_else(|| {
                    let count = dynamic.empty.get_mut(&offset)?;
                    *count -= 1;
                    if *count == 0 {
                        dynamic.empty.remove(&offset);
                    }
                    Some(0)
                })
            })
            .ok_or_else(|| {
                RmaError::new(
                    ErrorClass::RmaAttach,
                    format!("no region attached to the window starts at address {base:#x}"),
                )
            })?;
        self.record(Event::RegionDetached { base, size });
        Ok(())
    }

    /// Dynamic window: `MPI_ERR_RMA_RANGE` unless every run of `access` lies inside one
    /// attached region.
    pub(super) fn check_attached(&self, access: &TargetAccess) -> Result<(), RmaError> {
        let Some(dynamic) = &self.dynamic else {
            return Ok(());
        };
        for run in &access.runs {
            let inside = dynamic
                .attached
                .range(..=run.offset)
                .next_back()
                .is_some_and(|(&start, &len)| run.offset + run.len <= start + len);
            if !inside {
                return Err(RmaError::new(
                    ErrorClass::RmaRange,
                    format!(
                        "{} bytes at address {:#x} are not inside one region attached at rank {}",
                        run.len,
                        DYNAMIC_BASE + run.offset,
                        self.rank
                    ),
                ));
            }
        }
        Ok(())
    }
}
