//! The group calls beyond incl/excl (`env`): union, intersection, difference, range_incl,
//! range_excl, translate_ranks and compare, over groups held as lists of world ranks; and
//! `MPI_Comm_create_group`, collective over the group's members alone.
//!
//! Owns: MPI's set rules for groups (the order of a union's and an intersection's members,
//! a range's expansion and its errors). Must not: talk to the service: groups are local.

use std::ffi::c_int;

use crate::abi::*;
use crate::env::{group_members, group_or_empty, out};
use crate::error::{fail, On, OnObject, Res};
use crate::state::{self, Comm};

/// A group made from two: `pick` chooses the members, in order, from the lists of both.
fn combine(
    group1: c_int,
    group2: c_int,
    newgroup: *mut c_int,
    pick: impl FnOnce(&[u32], &[u32]) -> Vec<u32>,
) -> Res {
    // SAFETY: the program's output argument
    unsafe {
        state::create(newgroup, |mpi| {
            let (a, b) = (group_members(mpi, group1)?, group_members(mpi, group2)?);
            Ok(group_or_empty(mpi, pick(&a, &b)))
        })
    }
}

/// The ranks `n` triplets `(first, last, stride)` name in a group of `size`, in order, each
/// at most once.
unsafe fn expand(ranges: *const [c_int; 3], n: c_int, size: usize) -> Res<Vec<usize>> {
    if n < 0 {
        return Err(fail(MPI_ERR_ARG, format!("{n} ranges")));
    }
    if n > 0 && ranges.is_null() {
        return Err(fail(MPI_ERR_ARG, "a null array of ranges"));
    }
    let mut ranks = Vec::new();
    for i in 0..n as usize {
        let [first, last, stride] = *ranges.add(i);
        if stride == 0 {
            return Err(fail(MPI_ERR_ARG, format!("range {i} has stride 0")));
        }
        let mut rank = first;
        while (stride > 0 && rank <= last) || (stride < 0 && rank >= last) {
            let r = usize::try_from(rank)
                .ok()
                .filter(|&r| r < size)
                .ok_or_else(|| fail(MPI_ERR_RANK, format!("rank {rank} is not in the group")))?;
            if ranks.contains(&r) {
                return Err(fail(MPI_ERR_RANK, format!("rank {rank} is named twice")));
            }
            ranks.push(r);
            rank += stride;
        }
    }
    Ok(ranks)
}

/// A group made from `group` and the ranks its `n` `ranges` name: `pick` chooses the members
/// from its members and those ranks.
unsafe fn ranged(
    group: c_int,
    n: c_int,
    ranges: *const [c_int; 3],
    newgroup: *mut c_int,
    pick: impl FnOnce(&[u32], &[usize]) -> Vec<u32>,
) -> Res {
    state::create(newgroup, |mpi| {
        let members = group_members(mpi, group)?;
        let named = expand(ranges, n, members.len())?;
        Ok(group_or_empty(mpi, pick(&members, &named)))
    })
}

export! {
    fn MPI_Group_union / PMPI_Group_union(group1: c_int, group2: c_int, newgroup: *mut c_int) {
        combine(group1, group2, newgroup, |a, b| {
            let mut members = a.to_vec();
            members.extend(b.iter().filter(|m| !a.contains(m)));
            members
        })
    }

    fn MPI_Group_intersection / PMPI_Group_intersection(group1: c_int, group2: c_int, newgroup: *mut c_int) {
        combine(group1, group2, newgroup, |a, b| a.iter().copied().filter(|m| b.contains(m)).collect())
    }

    fn MPI_Group_difference / PMPI_Group_difference(group1: c_int, group2: c_int, newgroup: *mut c_int) {
        combine(group1, group2, newgroup, |a, b| a.iter().copied().filter(|m| !b.contains(m)).collect())
    }

    fn MPI_Group_range_incl / PMPI_Group_range_incl(
        group: c_int,
        n: c_int,
        ranges: *const [c_int; 3],
        newgroup: *mut c_int,
    ) {
        ranged(group, n, ranges, newgroup, |members, named| named.iter().map(|&r| members[r]).collect())
    }

    fn MPI_Group_range_excl / PMPI_Group_range_excl(
        group: c_int,
        n: c_int,
        ranges: *const [c_int; 3],
        newgroup: *mut c_int,
    ) {
        ranged(group, n, ranges, newgroup, |members, named| {
            (0..members.len()).filter(|r| !named.contains(r)).map(|r| members[r]).collect()
        })
    }

    fn MPI_Group_translate_ranks / PMPI_Group_translate_ranks(
        group1: c_int,
        n: c_int,
        ranks1: *const c_int,
        group2: c_int,
        ranks2: *mut c_int,
    ) {
        if n < 0 || (n > 0 && (ranks1.is_null() || ranks2.is_null())) {
            return Err(fail(MPI_ERR_ARG, "a negative count or a null array of ranks"));
        }
        let (a, b) = state::with(|mpi| Ok((group_members(mpi, group1)?, group_members(mpi, group2)?)))?;
        for i in 0..n as usize {
            let rank = *ranks1.add(i);
            let translated = if rank == MPI_PROC_NULL {
                MPI_PROC_NULL
            } else {
                let member = usize::try_from(rank)
                    .ok()
                    .and_then(|r| a.get(r))
                    .ok_or_else(|| fail(MPI_ERR_RANK, format!("rank {rank} is not in the first group")))?;
                b.iter().position(|m| m == member).map_or(MPI_UNDEFINED, |p| p as c_int)
            };
            ranks2.add(i).write(translated);
        }
        Ok(())
    }

    /// Collective over the members of `group` alone (the rest of `comm` does not call it):
    /// they agree on the communicator's id by its parent, `tag`, members and how many such
    /// calls came before, which they make in the same order.
    fn MPI_Comm_create_group / PMPI_Comm_create_group(
        comm: c_int,
        group: c_int,
        tag: c_int,
        newcomm: *mut c_int,
    ) {
        state::create(newcomm, |mpi| {
            let on = On::Comm(comm);
            let members = group_members(mpi, group).on(on)?;
            let parent = mpi.comm(comm).on(on)?;
            if !members.contains(&mpi.rank) {
                return Err(fail(MPI_ERR_GROUP, "the calling process is not in the group").on(on));
            }
            if let Some(outside) = members.iter().find(|m| !parent.ranks.contains(m)) {
                return Err(fail(MPI_ERR_GROUP, format!("world rank {outside} is not in the communicator")).on(on));
            }
            let names: Vec<String> = members.iter().map(u32::to_string).collect();
            let hash = crate::p2p::fnv1a(names.join(",").as_bytes());
            let key = format!("{}.g{tag}.{hash:x}", parent.id);
            let (errhandler, made) = (parent.errhandler, mpi.group_creations.entry(key.clone()).or_default());
            *made += 1;
            let id = format!("{key}.{made}");
            Ok(mpi.new_comm(Comm::new(members, id, errhandler)))
        })
    }

    fn MPI_Group_compare / PMPI_Group_compare(group1: c_int, group2: c_int, result: *mut c_int) {
        let (mut a, mut b) =
            state::with(|mpi| Ok((group_members(mpi, group1)?, group_members(mpi, group2)?)))?;
        let verdict = if a == b {
            MPI_IDENT
        } else {
            a.sort_unstable();
            b.sort_unstable();
            if a == b { MPI_SIMILAR } else { MPI_UNEQUAL }
        };
        out(result, verdict)
    }
}
