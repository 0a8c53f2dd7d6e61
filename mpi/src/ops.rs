//! User-defined reduction operations (`MPI_Op_create`, `MPI_Op_free`, `MPI_Op_commutative`) and
//! `MPI_Reduce`/`MPI_Allreduce` with one: every member's contribution travels as the
//! predefined ops' do (module `collective`), and the program's function folds them in rank
//! order — the canonical order MPI asks of a non-commutative op — outside the library's lock,
//! so the function may call MPI. User ops apply to collectives only: MPI allows none in RMA.
//!
//! Owns: the table of user ops and the fold. Must not: reduce with predefined ops (core's
//! `reduce` does, in `collective`).

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::env::{comm_check, out, Reduction};
use crate::error::{fail, On, OnObject, Res};
use crate::state;

/// `MPI_User_function`: `inoutvec[i] = invec[i] op inoutvec[i]` for `*len` elements.
pub type UserFunction = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut c_int);

/// A user op: its function and whether it commutes.
#[derive(Clone, Copy, Debug)]
pub struct UserOp {
    pub function: UserFunction,
    pub commutes: bool,
}

/// Whether `op` is a user op of this process.
pub fn is_user_op(op: c_int) -> bool {
    state::with(|mpi| Ok(mpi.user_ops.contains_key(&op))).unwrap_or(false)
}

/// `MPI_Reduce` (to `Some(root)`) or `MPI_Allreduce` with user op `op`: contiguous buffers of
/// `count` elements of `datatype` (its extent its size: the function gets the program's layout).
pub(crate) unsafe fn reduce(reduction: Reduction) -> Res {
    let Reduction {
        count,
        datatype,
        op,
        comm,
        ..
    } = reduction;
    let on = On::Comm(comm);
    let (user, contributions, receives, len) = state::with(|mpi| {
        comm_check(mpi, comm)?;
        let user = *mpi
            .user_ops
            .get(&op)
            .ok_or_else(|| fail(MPI_ERR_OP, format!("{op:#x} is not an op")))?;
        let dt = mpi.dt(datatype)?;
        if dt.runs.len() > 1 || dt.extent != dt.size() as i64 {
            return Err(fail(
                MPI_ERR_TYPE,
                "a user op reduces contiguous datatypes only (no gaps in the type map)",
            ));
        }
        let part = reduction.part(mpi, dt.size() as usize)?;
        let all = match part.root {
            Some(root) => mpi.gather(comm, &part.contribution, root)?,
            None => mpi.allgather(comm, &part.contribution)?,
        };
        Ok((user, all, part.receives, part.len))
    })
    .on(on)?;
    if !receives {
        return Ok(());
    }
    // outside the lock: the program's function may call MPI
    let mut folded = contributions.into_iter();
    let Some(mut acc) = folded.next() else {
        return Ok(());
    };
    for mut next in folded {
        let (mut n, mut dtype) = (count, datatype);
        (user.function)(
            acc.as_mut_ptr().cast(),
            next.as_mut_ptr().cast(),
            &mut n,
            &mut dtype,
        );
        acc = next;
    }
    reduction.deliver(&acc, len)
}

export! {
    fn MPI_Op_create / PMPI_Op_create(function: Option<UserFunction>, commute: c_int, op: *mut c_int) {
        let Some(function) = function else {
            return Err(fail(MPI_ERR_ARG, "a null user function"));
        };
        state::create(op, |mpi| {
            let handle = mpi.handle(MPI_OP_NULL as u32);
            mpi.user_ops.insert(handle, UserOp { function, commutes: commute != 0 });
            Ok(handle)
        })
    }

    fn MPI_Op_free / PMPI_Op_free(op: *mut c_int) {
        state::free(op, "op", MPI_ERR_ARG, MPI_OP_NULL, |mpi, handle| {
            state::remove(&mut mpi.user_ops, handle, || {
                fail(MPI_ERR_OP, "not a user op (predefined ops cannot be freed)")
            })
        })
    }

    fn MPI_Op_commutative / PMPI_Op_commutative(op: c_int, commute: *mut c_int) {
        let commutes = match crate::abi::op(op) {
            Some(_) => true,
            None => state::with(|mpi| {
                mpi.user_ops
                    .get(&op)
                    .map(|user| user.commutes)
                    .ok_or_else(|| fail(MPI_ERR_OP, format!("{op:#x} is not an op")))
            })?,
        };
        out(commute, c_int::from(commutes))
    }
}
