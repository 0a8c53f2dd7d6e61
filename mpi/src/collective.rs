//! Collectives over `MPI_COMM_WORLD` (bcast, reduce, allreduce, allgather), built in this
//! phase from RMA on a scratch window of the library's own: each rank puts its contribution
//! into the ranks that need it between two fences, and the reduction itself is core's
//! `reduce` (the same arithmetic as accumulate), applied in rank order so every rank gets the
//! same bits. The fences are recorded in the audit like the program's, so the race checker
//! sees a collective as the synchronization it is. (Issue 40 moves collectives into the
//! service's own messaging later.)

use bytes::Bytes;
use onesided_client::{Flavor, MemoryModel, NewWindow, Window};
use onesided_core::{Datatype, Op};

use crate::abi::*;
use crate::error::{fail, Res};
use crate::state::Mpi;

/// The scratch window: `slot` bytes per world rank on every rank.
#[derive(Debug)]
pub struct Scratch {
    window: Window,
    slot: usize,
}

/// The smallest slot the scratch window is made with.
const MIN_SLOT: usize = 4096;

impl Mpi {
    /// Makes sure the scratch window has slots of at least `need` bytes (every rank asks for
    /// the same size in the same order, so they agree on when to make a bigger one), then
    /// runs `f` with it.
    fn with_scratch<T>(&mut self, need: usize, f: impl FnOnce(&Mpi, &Scratch) -> Res<T>) -> Res<T> {
        if self.collective.as_ref().is_some_and(|s| s.slot < need) {
            if let Some(old) = self.collective.take() {
                self.runtime.block_on(old.window.free())?;
            }
        }
        let scratch = match self.collective.take() {
            Some(scratch) => scratch,
            None => {
                let slot = need.max(MIN_SLOT).next_power_of_two();
                self.world_windows += 1;
                let name = format!("mpi-collectives-{}", self.world_windows);
                let call = NewWindow::new(&name, (slot * self.size as usize) as u64, 1)
                    .flavor(Flavor::Allocate)
                    .model(MemoryModel::Separate);
                let window = self.runtime.block_on(self.session.create(&call))?;
                Scratch { window, slot }
            }
        };
        let result = f(self, &scratch);
        self.collective = Some(scratch);
        result
    }

    /// Every rank's `data` (of the same length on every rank) at the rank `to` (every rank
    /// when `None`); the others get an empty list.
    fn exchange(&mut self, data: &[u8], to: Option<u32>) -> Res<Vec<Vec<u8>>> {
        self.with_scratch(data.len(), |mpi, scratch| {
            let (window, slot) = (&scratch.window, scratch.slot);
            let me = mpi.rank as usize;
            let targets: Vec<u32> = match to {
                Some(root) => vec![root],
                None => (0..mpi.size).collect(),
            };
            mpi.block_on(window.fence(0))?;
            if !data.is_empty() {
                for &target in &targets {
                    window.put_bytes(target, (me * slot) as u64, Bytes::copy_from_slice(data))?;
                }
            }
            mpi.block_on(window.fence(0))?;
            if !targets.contains(&mpi.rank) {
                return Ok(Vec::new());
            }
            (0..mpi.size as usize)
                .map(|r| {
                    window
                        .inspect_bytes((r * slot) as u64, data.len() as u64)
                        .map_err(Into::into)
                })
                .collect()
        })
    }

    /// `MPI_Allgather` of equal-sized contributions (all at every rank, in rank order).
    pub fn allgather(&mut self, data: &[u8]) -> Res<Vec<Vec<u8>>> {
        self.exchange(data, None)
    }

    /// `MPI_Bcast` from `root` over the world: `data` is replaced at every other rank.
    pub fn bcast(&mut self, data: &mut [u8], root: u32) -> Res {
        self.with_scratch(data.len(), |mpi, scratch| {
            let window = &scratch.window;
            mpi.block_on(window.fence(0))?;
            if mpi.rank == root && !data.is_empty() {
                for target in 0..mpi.size {
                    if target != root {
                        window.put_bytes(target, 0, Bytes::copy_from_slice(data))?;
                    }
                }
            }
            mpi.block_on(window.fence(0))?;
            if mpi.rank != root {
                let got = window.inspect_bytes(0, data.len() as u64)?;
                data.copy_from_slice(&got);
            }
            Ok(())
        })
    }
    /// `MPI_Reduce` (to `Some(root)`) or `MPI_Allreduce` (`None`) of `data` by `op`: the
    /// result where it is due, `None` elsewhere.
    pub fn reduce(
        &mut self,
        data: &[u8],
        dtype: Datatype,
        op: Op,
        root: Option<u32>,
    ) -> Res<Option<Vec<u8>>> {
        onesided_core::reduce::check_op(op, dtype).map_err(|e| fail(MPI_ERR_OP, e.to_string()))?;
        if matches!(op, Op::Replace | Op::NoOp) {
            return Err(fail(
                MPI_ERR_OP,
                "MPI_REPLACE and MPI_NO_OP are not reduction ops",
            ));
        }
        let all = self.exchange(data, root)?;
        let Some((first, rest)) = all.split_first() else {
            return Ok(None);
        };
        let mut result = first.clone();
        for contribution in rest {
            onesided_core::reduce::reduce(op, dtype, &mut result, contribution)
                .map_err(|e| fail(MPI_ERR_OP, e.to_string()))?;
        }
        Ok(Some(result))
    }
}
