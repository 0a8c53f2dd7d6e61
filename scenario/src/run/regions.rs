//! The regions of dynamic windows: the run's `Regions` table, and a rank's `attach N -> r` and
//! `detach r`.
//!
//! Owns: the addresses of the regions the ranks of a run attached, by name (the attaching rank
//! fills the table, every rank reads it), and turning `r[i]` into the displacement a call
//! sends (the region's address plus `i` elements, disp_unit 1). Must not: order a use of a
//! region after its attach (the file does, with a barrier; the parser checks it), or decide
//! whether an address is attached (the library and the server do, as `RMA_RANGE`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::super::ast::{Loc, RegionRef};
use super::RankExecutor;
use onesided_client::Error;

/// The addresses of the regions the ranks of a run attached (`attach N -> r`), by name: the
/// attaching rank fills it, every rank reads it where it uses a region (the file orders the
/// attach before another rank's use with a barrier; the parser checks that).
#[derive(Clone, Debug, Default)]
pub(crate) struct Regions(Arc<Mutex<HashMap<String, u64>>>);

impl Regions {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        // a panic elsewhere leaves the table as it was: plain data
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The address of region `region`, once its rank attached it.
    pub(super) fn address(&self, region: &RegionRef) -> Result<u64, Error> {
        self.table().get(&region.name).copied().ok_or_else(|| {
            Error::Config(format!(
                "region {} has no address: its attach (line {}) did not succeed",
                region.name, region.line
            ))
        })
    }

    /// The displacement of `loc`'s first element on its window (disp_unit = `unit`): its
    /// index in the window, or in a region its address (disp_unit 1). An address past
    /// `u64::MAX` is `u64::MAX`, outside every region.
    pub(super) fn disp(&self, loc: &Loc, unit: u64) -> Result<u64, Error> {
        match &loc.region {
            Some(region) => Ok(self
                .address(region)?
                .saturating_add(loc.index.saturating_mul(unit))),
            None => Ok(loc.index),
        }
    }
}

impl RankExecutor {
    /// `attach COUNT -> name`: attaches a region of `count` elements to `window` and records
    /// its address under `name` for every rank of the run.
    pub(super) async fn attach_region(
        &self,
        window: usize,
        count: u64,
        name: &str,
    ) -> Result<(), Error> {
        let bytes = count.saturating_mul(self.dtypes[window].size() as u64);
        let address = self.window(window)?.attach(bytes).await?;
        self.regions.table().insert(name.to_string(), address);
        Ok(())
    }

    /// `detach name`: detaches the region recorded under `name` from `window`.
    pub(super) async fn detach_region(&self, window: usize, name: &str) -> Result<(), Error> {
        let address = self.regions.table().get(name).copied();
        let address = address.ok_or_else(|| {
            Error::Config(format!(
                "region {name} has no address: its attach did not succeed"
            ))
        })?;
        self.window(window)?.detach(address).await
    }
}
