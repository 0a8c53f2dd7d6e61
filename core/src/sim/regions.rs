//! Dynamic windows in the simulated world: regions a rank attaches and detaches, the world's
//! table of their addresses by name, and actions placed inside a region.
//!
//! Owns: the calls an `Attach` or `Detach` action makes, what their answers change (the
//! address kept under the region's name for every rank, the private copy grown to span a
//! new region, the regions a rank may load and store in), and turning an
//! [`Action::InRegion`] into its action at the region's address. Must not: decide where a
//! region goes or whether an access lies inside one at the target (the target engine does,
//! as on the server), or move data.

use std::collections::BTreeMap;

use super::{Action, Opened, World};
use crate::origin::Call;
use crate::window::DYNAMIC_BASE;
use crate::{ErrorClass, RmaError};

/// How many bytes a rank may attach to a dynamic window in the simulated world.
pub(super) const DYNAMIC_MAX_BYTES: u64 = 1 << 30;

impl World {
    /// The call an `Attach` or `Detach` action makes; the refusal of a detach of a region
    /// that was never attached.
    pub(super) fn region_call(&self, action: &Action) -> Option<Result<Call, RmaError>> {
        Some(match action {
            Action::Attach { window, size, .. } => Ok(Call::Attach {
                window: *window,
                size: *size,
                at: None,
            }),
            Action::Detach { window, name } => self.address(name).map(|base| Call::Detach {
                window: *window,
                base,
            }),
            _ => return None,
        })
    }

    /// The address kept under `name`.
    fn address(&self, name: &str) -> Result<u64, RmaError> {
        self.regions.get(name).copied().ok_or_else(|| {
            RmaError::new(
                ErrorClass::Arg,
                format!("region {name} has no address: its attach did not succeed"),
            )
        })
    }

    /// Rank `rank`'s action `action` was answered with a region's address (`Some`) or as
    /// done: an attach keeps the address under its name and grows the private copy to span
    /// it, a detach takes the region from those the rank may load and store in.
    pub(super) fn region_answered(&mut self, rank: u32, action: usize, base: Option<u64>) {
        let state = &mut self.ranks[rank as usize];
        match (&state.program[action], base) {
            (Action::Attach { window, size, name }, Some(base)) => {
                let Some(open) = state.windows.get_mut(window) else {
                    return;
                };
                let offset = base.saturating_sub(DYNAMIC_BASE);
                open.copy
                    .grow(usize::try_from(offset + size).unwrap_or(usize::MAX));
                if *size > 0 {
                    open.regions.insert(offset, *size);
                }
                self.regions.insert(name.clone(), base);
            }
            (Action::Detach { window, name }, None) => {
                let base = self.regions.get(name).copied();
                let open = state.windows.get_mut(window);
                if let (Some(open), Some(base)) = (open, base) {
                    open.regions.remove(&base.saturating_sub(DYNAMIC_BASE));
                }
                self.run.detached.insert(name.clone());
            }
            _ => {}
        }
    }

    /// `action` placed at the address of the region kept under `name` (for rank `rank`):
    /// an operation's displacement from there, a store's or a load's offset from the
    /// region's place in the rank's memory, which must lie inside a region it attached.
    pub(super) fn in_region(
        &self,
        rank: u32,
        name: &str,
        action: Action,
    ) -> Result<Action, RmaError> {
        let address = self.address(name)?;
        let offset = address.saturating_sub(DYNAMIC_BASE);
        let opened = |window: &u64| self.ranks[rank as usize].windows.get(window);
        Ok(match action {
            Action::Call(mut call) => {
                if let Call::Op { op: Ok(op), .. } = &mut call {
                    op.disp = op.disp.saturating_add(address);
                }
                Action::Call(call)
            }
            Action::Store {
                window,
                offset: within,
                bytes,
            } => {
                let at = inside(opened(&window), offset + within, bytes.len() as u64)?;
                Action::Store {
                    window,
                    offset: at,
                    bytes,
                }
            }
            Action::Load {
                window,
                offset: within,
                len,
                label,
            } => Action::Load {
                window,
                offset: inside(opened(&window), offset + within, len)?,
                len,
                label,
            },
            other => other,
        })
    }
}

/// `offset`, when its `len` bytes lie inside one region `open` has attached.
fn inside(open: Option<&Opened>, offset: u64, len: u64) -> Result<u64, RmaError> {
    let regions: &BTreeMap<u64, u64> = match open {
        Some(open) => &open.regions,
        None => return Ok(offset),
    };
    let region = regions.range(..=offset).next_back();
    let fits = region.is_some_and(|(&start, &size)| offset + len <= start + size);
    fits.then_some(offset).ok_or_else(|| {
        RmaError::new(
            ErrorClass::RmaRange,
            format!("{len} byte(s) at offset {offset} are not inside a region this rank attached"),
        )
    })
}
