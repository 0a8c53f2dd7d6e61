//! Collectives over any communicator (barrier, bcast, reduce, allreduce, gather, allgather),
//! built in this phase from RMA on a scratch window of the library's own per communicator: each rank puts its contribution
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
    pub(crate) window: Window,
    pub(crate) slot: usize,
}

/// The smallest slot the scratch window is made with.
const MIN_SLOT: usize = 4096;

impl Mpi {
    /// Makes sure communicator `comm`'s scratch window has slots of at least `need` bytes
    /// (its members ask for the same sizes in the same order, so they agree on when to make a
    /// bigger one), then runs `f` with it and this process's rank in `comm`.
    fn with_scratch<T>(
        &mut self,
        comm: i32,
        need: usize,
        f: impl FnOnce(&Mpi, &Scratch, u32) -> Res<T>,
    ) -> Res<T> {
        let me = self.comm_rank(comm)?;
        let entry = self.comm_mut(comm)?;
        let old = entry.scratch.take_if(|s| s.slot < need);
        let scratch = entry.scratch.take();
        if let Some(old) = old {
            self.runtime.block_on(old.window.free())?;
        }
        let scratch = match scratch {
            Some(scratch) => scratch,
            None => {
                let entry = self.comm_mut(comm)?;
                let slot = need.max(MIN_SLOT).next_power_of_two();
                let name = entry.next_window_name();
                let group = if comm == MPI_COMM_WORLD {
                    Vec::new()
                } else {
                    entry.ranks.clone()
                };
                let call = NewWindow::new(&name, (slot * entry.ranks.len()) as u64, 1)
                    .flavor(Flavor::Allocate)
                    .model(MemoryModel::Separate)
                    .group(&group);
                let window = self.runtime.block_on(self.session.create(&call))?;
                Scratch { window, slot }
            }
        };
        let result = f(self, &scratch, me);
        if let Ok(entry) = self.comm_mut(comm) {
            entry.scratch = Some(scratch);
        }
        result
    }

    /// Every member's `data` (of the same length at every member) at the member `to` (every
    /// member when `None`), in rank order; the others get an empty list.
    fn exchange(&mut self, comm: i32, data: &[u8], to: Option<u32>) -> Res<Vec<Vec<u8>>> {
        let size = self.comm(comm)?.ranks.len() as u32;
        if size == 1 {
            return Ok(vec![data.to_vec()]);
        }
        self.with_scratch(comm, data.len(), |mpi, scratch, me| {
            let (window, slot) = (&scratch.window, scratch.slot);
            let targets: Vec<u32> = match to {
                Some(root) => vec![root],
                None => (0..size).collect(),
            };
            mpi.block_on(window.fence(0))?;
            if !data.is_empty() {
                for &target in &targets {
                    window.put_bytes(
                        target,
                        (me as usize * slot) as u64,
                        Bytes::copy_from_slice(data),
                    )?;
                }
            }
            mpi.block_on(window.fence(0))?;
            if !targets.contains(&me) {
                return Ok(Vec::new());
            }
            (0..size as usize)
                .map(|r| {
                    window
                        .inspect_bytes((r * slot) as u64, data.len() as u64)
                        .map_err(Into::into)
                })
                .collect()
        })
    }

    /// `MPI_Barrier` over `comm`: the world's barrier for `MPI_COMM_WORLD`, else a fence on
    /// its scratch window (a fence returns once every member entered it).
    pub fn barrier(&mut self, comm: i32) -> Res {
        if comm == MPI_COMM_WORLD {
            return self.block_on(self.session.barrier()).map_err(Into::into);
        }
        if self.comm(comm)?.ranks.len() == 1 {
            return Ok(());
        }
        self.with_scratch(comm, 0, |mpi, scratch, _| {
            mpi.block_on(scratch.window.fence(0)).map_err(Into::into)
        })
    }

    /// `MPI_Allgather` of equal-sized contributions (all at every member, in rank order).
    pub fn allgather(&mut self, comm: i32, data: &[u8]) -> Res<Vec<Vec<u8>>> {
        self.exchange(comm, data, None)
    }

    /// `MPI_Gather` to `root` (in rank order at the root, empty elsewhere).
    pub fn gather(&mut self, comm: i32, data: &[u8], root: u32) -> Res<Vec<Vec<u8>>> {
        self.exchange(comm, data, Some(root))
    }

    /// `MPI_Bcast` from `root`: `data` is replaced at every other member.
    pub fn bcast(&mut self, comm: i32, data: &mut [u8], root: u32) -> Res {
        let size = self.comm(comm)?.ranks.len() as u32;
        if size == 1 {
            return Ok(());
        }
        self.with_scratch(comm, data.len(), |mpi, scratch, me| {
            let window = &scratch.window;
            mpi.block_on(window.fence(0))?;
            if me == root && !data.is_empty() {
                for target in 0..size {
                    if target != root {
                        window.put_bytes(target, 0, Bytes::copy_from_slice(data))?;
                    }
                }
            }
            mpi.block_on(window.fence(0))?;
            if me != root {
                let got = window.inspect_bytes(0, data.len() as u64)?;
                data.copy_from_slice(&got);
            }
            Ok(())
        })
    }

    /// `MPI_Reduce` (to `Some(root)`) or `MPI_Allreduce` (`None`) of `data` by `op` over
    /// `comm`: the result where it is due, `None` elsewhere.
    pub fn reduce(
        &mut self,
        comm: i32,
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
        let all = self.exchange(comm, data, root)?;
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
