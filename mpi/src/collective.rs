//! Collectives over any communicator, on the service's point-to-point messages (`p2p`): every
//! member sends what others need on the communicator's collective context (a context of its
//! own, so a collective never takes a program's message) and receives from the members it
//! needs, in rank order. Sends are buffered by the service, so no member waits for another to
//! post a receive, and one sender's messages arrive in the order sent, so consecutive
//! collectives on one communicator never mix. The messages are recorded in the audit like the
//! program's, so the race checker sees a collective order the accesses around it. Reductions
//! are core's `reduce` (the arithmetic of accumulate), applied in rank order so every member
//! gets the same bits. `MPI_Barrier` on `MPI_COMM_WORLD` is the service's world barrier.
//!
//! Owns: the C side of the collectives (buffers, counts, displacements, `MPI_IN_PLACE`) and
//! their linear schedules. Must not: match messages (the service does) or reduce by rules of
//! its own (core's `reduce`).

use std::ffi::{c_int, c_void};

use bytes::Bytes;
use onesided_client::Match;
use onesided_core::{Datatype, Op};

use crate::abi::*;
use crate::datatype::{gather as pack_runs, scatter as unpack_runs};
use crate::env::{bytes_of, c_array, comm_check, count_of, datatype, root_of, slice};
use crate::error::{fail, On, OnObject, Res};
use crate::state::{self, Mpi};

/// The tag of every collective message (their context sets them apart).
const COLLECTIVE_TAG: i32 = 0;

impl Mpi {
    /// Sends each `(member, bytes)` of `outgoing` on `comm`'s collective context, then
    /// receives one message from each member of `from`, in that order (a member's message to
    /// itself is handed over here, not sent).
    fn transfer(
        &mut self,
        comm: i32,
        outgoing: Vec<(u32, Vec<u8>)>,
        from: &[u32],
    ) -> Res<Vec<Vec<u8>>> {
        let ranks = self.comm(comm)?.ranks.clone();
        let me = self.comm_rank(comm)?;
        let context = crate::p2p::collective_context(self, comm)?;
        self.settle()?;
        let mut own = None;
        for (to, data) in outgoing {
            if to == me {
                own = Some(data);
                continue;
            }
            let dest = ranks[to as usize];
            self.block_on(
                self.session
                    .send(dest, COLLECTIVE_TAG, context, Bytes::from(data)),
            )?;
        }
        let mut received = Vec::with_capacity(from.len());
        for &source in from {
            if source == me {
                received.push(own.take().unwrap_or_default());
                continue;
            }
            let from = Match {
                source: Some(ranks[source as usize]),
                tag: Some(COLLECTIVE_TAG),
                context,
            };
            let message = self.block_on(self.session.receive(from))?;
            received.push(message.payload.to_vec());
        }
        self.settle()?;
        Ok(received)
    }

    /// Every member's `data` at member `to` (every member when `None`), in rank order; the
    /// others get an empty list.
    fn exchange(&mut self, comm: i32, data: &[u8], to: Option<u32>) -> Res<Vec<Vec<u8>>> {
        let size = self.comm(comm)?.ranks.len() as u32;
        let me = self.comm_rank(comm)?;
        let targets: Vec<u32> = match to {
            Some(root) => vec![root],
            None => (0..size).collect(),
        };
        let outgoing = targets.iter().map(|&t| (t, data.to_vec())).collect();
        let from: Vec<u32> = if targets.contains(&me) {
            (0..size).collect()
        } else {
            Vec::new()
        };
        self.transfer(comm, outgoing, &from)
    }

    /// `MPI_Barrier` over `comm`: the world's barrier for `MPI_COMM_WORLD`, else every member
    /// tells member 0, which tells every member (all of them entered) back.
    pub fn barrier(&mut self, comm: i32) -> Res {
        if comm == MPI_COMM_WORLD {
            self.settle()?;
            self.block_on(self.session.barrier())?;
            return self.settle();
        }
        self.exchange(comm, &[], Some(0))?;
        self.bcast(comm, &mut [], 0)
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
        let me = self.comm_rank(comm)?;
        if me == root {
            let outgoing = (0..size)
                .filter(|&m| m != root)
                .map(|m| (m, data.to_vec()))
                .collect();
            self.transfer(comm, outgoing, &[])?;
            return Ok(());
        }
        let got = self.transfer(comm, Vec::new(), &[root])?;
        if got[0].len() != data.len() {
            return Err(fail(
                MPI_ERR_TRUNCATE,
                format!(
                    "the root broadcast {} bytes, this member expects {}",
                    got[0].len(),
                    data.len()
                ),
            ));
        }
        data.copy_from_slice(&got[0]);
        Ok(())
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

/// Where `count` elements of `datatype` at element displacement `displ` of `buf` lie: the
/// displaced address and the byte runs from it.
fn placed(
    mpi: &Mpi,
    buf: *const c_void,
    displ: c_int,
    count: c_int,
    datatype: c_int,
) -> Res<(*const u8, Vec<(i64, u64)>)> {
    let dt = mpi.dt(datatype)?;
    let count = count_of(count)?;
    let base = buf
        .cast::<u8>()
        .wrapping_offset(displ as isize * dt.extent as isize);
    Ok((base, dt.repeated(count)))
}

/// `count` elements of `datatype` at element displacement `displ` of `buf`, packed.
unsafe fn pack(
    mpi: &Mpi,
    buf: *const c_void,
    displ: c_int,
    count: c_int,
    datatype: c_int,
) -> Res<Vec<u8>> {
    let (base, runs) = placed(mpi, buf, displ, count, datatype)?;
    pack_runs(base.cast(), &runs)
}

/// Writes `data` into `count` elements of `datatype` at element displacement `displ` of `buf`.
unsafe fn unpack(
    mpi: &Mpi,
    buf: *mut c_void,
    displ: c_int,
    count: c_int,
    datatype: c_int,
    data: &[u8],
) -> Res {
    let (base, runs) = placed(mpi, buf.cast_const(), displ, count, datatype)?;
    let capacity: u64 = runs.iter().map(|&(_, len)| len).sum();
    if data.len() as u64 > capacity {
        return Err(fail(
            MPI_ERR_TRUNCATE,
            format!("{} bytes came for a buffer of {capacity}", data.len()),
        ));
    }
    if data.is_empty() {
        return Ok(());
    }
    if buf.is_null() {
        return Err(fail(MPI_ERR_BUFFER, "a null receive buffer"));
    }
    unpack_runs(base.cast_mut(), &runs, data);
    Ok(())
}

/// The `n` ints of a C array argument.
unsafe fn ints<'a>(pointer: *const c_int, n: usize) -> Res<&'a [c_int]> {
    c_array(pointer, n, MPI_ERR_ARG, "array of counts or displacements")
}

fn in_place(buf: *const c_void) -> bool {
    buf as isize == MPI_IN_PLACE
}

/// `MPI_Scatterv` (and `MPI_Scatter`, its counts all alike): the root sends member `m`
/// `counts[m]` elements at `displs[m]`; every member receives into `recvbuf`.
#[allow(clippy::too_many_arguments)]
unsafe fn scatterv(
    sendbuf: *const c_void,
    counts: &dyn Fn(usize) -> (c_int, c_int),
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
) -> Res {
    state::with(|mpi| {
        let on = On::Comm(comm);
        let size = comm_check(mpi, comm)?.len();
        let root = root_of(mpi, comm, root).on(on)?;
        let me = mpi.comm_rank(comm).on(on)?;
        let mut outgoing = Vec::new();
        if me == root {
            for m in 0..size {
                let (count, displ) = counts(m);
                if m as u32 == root && in_place(recvbuf) {
                    continue;
                }
                outgoing.push((m as u32, pack(mpi, sendbuf, displ, count, sendtype).on(on)?));
            }
        }
        let keep = me == root && in_place(recvbuf);
        let from = if keep { vec![] } else { vec![root] };
        let got = mpi.transfer(comm, outgoing, &from).on(on)?;
        if let Some(part) = got.first() {
            unpack(mpi, recvbuf, 0, recvcount, recvtype, part).on(on)?;
        }
        Ok(())
    })
}

/// `MPI_Gatherv` (`root` given) or `MPI_Allgatherv` (`None`), and `MPI_Gather` /
/// `MPI_Allgather` (their counts all alike): member `m`'s elements land at `displs[m]` of the
/// receiving members' `recvbuf`, `counts[m]` of them.
#[allow(clippy::too_many_arguments)]
unsafe fn gatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    counts: &dyn Fn(usize) -> (c_int, c_int),
    recvtype: c_int,
    root: Option<c_int>,
    comm: c_int,
) -> Res {
    state::with(|mpi| {
        let on = On::Comm(comm);
        let size = comm_check(mpi, comm)?.len();
        let me = mpi.comm_rank(comm).on(on)?;
        let root = root.map(|r| root_of(mpi, comm, r)).transpose().on(on)?;
        let receives = root.is_none_or(|r| r == me);
        let mine = if in_place(sendbuf) {
            let (count, displ) = counts(me as usize);
            pack(mpi, recvbuf, displ, count, recvtype).on(on)?
        } else {
            pack(mpi, sendbuf, 0, sendcount, sendtype).on(on)?
        };
        let all = mpi.exchange(comm, &mine, root).on(on)?;
        if receives {
            let each = mpi.dt(recvtype).on(on)?.size();
            for (m, part) in all.iter().enumerate().take(size) {
                let (count, displ) = counts(m);
                // MPI asks the type signatures to match: a part of another size is an error
                let expected = each * u64::try_from(count).unwrap_or(0);
                if part.len() as u64 != expected {
                    return Err(fail(
                        MPI_ERR_TRUNCATE,
                        format!(
                            "member {m} sent {} bytes, the receive expects {expected}",
                            part.len()
                        ),
                    )
                    .on(on));
                }
                unpack(mpi, recvbuf, displ, count, recvtype, part).on(on)?;
            }
        }
        Ok(())
    })
}

/// `MPI_Alltoallv` (and `MPI_Alltoall`): member `m` gets `send(m)` (count, displacement) of
/// this member's `sendbuf`, and what member `m` sends lands at `recv(m)` of `recvbuf`.
unsafe fn alltoallv(
    sendbuf: *const c_void,
    send: &dyn Fn(usize) -> (c_int, c_int),
    sendtype: c_int,
    recvbuf: *mut c_void,
    recv: &dyn Fn(usize) -> (c_int, c_int),
    recvtype: c_int,
    comm: c_int,
) -> Res {
    state::with(|mpi| {
        let on = On::Comm(comm);
        let size = comm_check(mpi, comm)?.len();
        let (source, send, sendtype): (*const c_void, &dyn Fn(usize) -> (c_int, c_int), c_int) =
            if in_place(sendbuf) {
                (recvbuf.cast_const(), recv, recvtype)
            } else {
                (sendbuf, send, sendtype)
            };
        let mut outgoing = Vec::with_capacity(size);
        for m in 0..size {
            let (count, displ) = send(m);
            outgoing.push((m as u32, pack(mpi, source, displ, count, sendtype).on(on)?));
        }
        let from: Vec<u32> = (0..size as u32).collect();
        let got = mpi.transfer(comm, outgoing, &from).on(on)?;
        for (m, part) in got.iter().enumerate() {
            let (count, displ) = recv(m);
            unpack(mpi, recvbuf, displ, count, recvtype, part).on(on)?;
        }
        Ok(())
    })
}

/// `MPI_Reduce_scatter` (member `m` gets `counts[m]` elements of the reduction, in rank
/// order) and `MPI_Reduce_scatter_block` (all counts alike).
unsafe fn reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: &dyn Fn(usize) -> c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
) -> Res {
    state::with(|mpi| {
        let on = On::Comm(comm);
        let size = comm_check(mpi, comm)?.len();
        let me = mpi.comm_rank(comm).on(on)? as usize;
        let (dtype, elem) = self::datatype(datatype).on(on)?;
        let Some(op) = crate::abi::op(op) else {
            return Err(fail(
                MPI_ERR_OP,
                format!("{op:#x} is not a predefined op (reduce_scatter takes no user op here)"),
            )
            .on(on));
        };
        let mut lens = Vec::with_capacity(size);
        for m in 0..size {
            lens.push(bytes_of(counts(m), elem).on(on)?);
        }
        let total: usize = lens.iter().sum();
        let source = if in_place(sendbuf) {
            recvbuf.cast_const()
        } else {
            sendbuf
        };
        let contribution = slice(source, total).on(on)?.to_vec();
        let result = mpi
            .reduce(comm, &contribution, dtype, op, None)
            .on(on)?
            .unwrap_or_default();
        let start: usize = lens[..me].iter().sum();
        let mine = &result[start..start + lens[me]];
        if !mine.is_empty() {
            if recvbuf.is_null() {
                return Err(fail(MPI_ERR_BUFFER, "a null receive buffer").on(on));
            }
            std::ptr::copy_nonoverlapping(mine.as_ptr(), recvbuf.cast::<u8>(), mine.len());
        }
        Ok(())
    })
}

/// The number of members of `comm` (for the C arrays of counts), checked.
fn members(comm: c_int) -> Res<usize> {
    state::with(|mpi| Ok(comm_check(mpi, comm)?.len()))
}

/// A rooted v-collective's counts and displacements: read at the root (one per member of
/// `comm`), empty elsewhere, where MPI leaves them undefined.
unsafe fn at_root<'a>(
    comm: c_int,
    root: c_int,
    counts: *const c_int,
    displs: *const c_int,
) -> Res<(&'a [c_int], &'a [c_int])> {
    let n = members(comm)?;
    if state::with(|mpi| Ok(mpi.comm_rank(comm)? as c_int == root))? {
        Ok((ints(counts, n)?, ints(displs, n)?))
    } else {
        Ok((&[], &[]))
    }
}

export! {
    fn MPI_Scatter / PMPI_Scatter(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
    ) {
        let counts = |m: usize| (sendcount, m as c_int * sendcount);
        scatterv(sendbuf, &counts, sendtype, recvbuf, recvcount, recvtype, root, comm)
    }

    fn MPI_Gather / PMPI_Gather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
    ) {
        let counts = |m: usize| (recvcount, m as c_int * recvcount);
        gatherv(sendbuf, sendcount, sendtype, recvbuf, &counts, recvtype, Some(root), comm)
    }

    fn MPI_Allgather / PMPI_Allgather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        comm: c_int,
    ) {
        let counts = |m: usize| (recvcount, m as c_int * recvcount);
        gatherv(sendbuf, sendcount, sendtype, recvbuf, &counts, recvtype, None, comm)
    }

    fn MPI_Scatterv / PMPI_Scatterv(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        displs: *const c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
    ) {
        let (sendcounts, displs) = at_root(comm, root, sendcounts, displs)?;
        let counts = |m: usize| (sendcounts[m], displs[m]);
        scatterv(sendbuf, &counts, sendtype, recvbuf, recvcount, recvtype, root, comm)
    }

    fn MPI_Gatherv / PMPI_Gatherv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: c_int,
        root: c_int,
        comm: c_int,
    ) {
        let (recvcounts, displs) = at_root(comm, root, recvcounts, displs)?;
        let counts = |m: usize| (recvcounts[m], displs[m]);
        gatherv(sendbuf, sendcount, sendtype, recvbuf, &counts, recvtype, Some(root), comm)
    }

    fn MPI_Allgatherv / PMPI_Allgatherv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: c_int,
        comm: c_int,
    ) {
        let n = members(comm)?;
        let (recvcounts, displs) = (ints(recvcounts, n)?, ints(displs, n)?);
        let counts = |m: usize| (recvcounts[m], displs[m]);
        gatherv(sendbuf, sendcount, sendtype, recvbuf, &counts, recvtype, None, comm)
    }

    fn MPI_Alltoall / PMPI_Alltoall(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        comm: c_int,
    ) {
        let send = |m: usize| (sendcount, m as c_int * sendcount);
        let recv = |m: usize| (recvcount, m as c_int * recvcount);
        alltoallv(sendbuf, &send, sendtype, recvbuf, &recv, recvtype, comm)
    }

    fn MPI_Alltoallv / PMPI_Alltoallv(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtype: c_int,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtype: c_int,
        comm: c_int,
    ) {
        let n = members(comm)?;
        let (sendcounts, sdispls) = if in_place(sendbuf) {
            (&[][..], &[][..])
        } else {
            (ints(sendcounts, n)?, ints(sdispls, n)?)
        };
        let (recvcounts, rdispls) = (ints(recvcounts, n)?, ints(rdispls, n)?);
        let send = |m: usize| (sendcounts[m], sdispls[m]);
        let recv = |m: usize| (recvcounts[m], rdispls[m]);
        alltoallv(sendbuf, &send, sendtype, recvbuf, &recv, recvtype, comm)
    }

    fn MPI_Reduce_scatter / PMPI_Reduce_scatter(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
    ) {
        let n = members(comm)?;
        let recvcounts = ints(recvcounts, n)?;
        reduce_scatter(sendbuf, recvbuf, &|m| recvcounts[m], datatype, op, comm)
    }

    fn MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcount: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
    ) {
        reduce_scatter(sendbuf, recvbuf, &|_| recvcount, datatype, op, comm)
    }
}
