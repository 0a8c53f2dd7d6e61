//! Intercommunicators, as far as making one and merging it into an intracommunicator:
//! `MPI_Intercomm_create`, `MPI_Intercomm_merge`, `MPI_Comm_remote_size`,
//! `MPI_Comm_remote_group` (and `MPI_Comm_test_inter`, `size`, `rank`, `free` on them, in `env`).
//!
//! An intercommunicator is a `Comm` with a `remote` group. Its two leaders trade their groups'
//! members on the peer communicator (the program's context and tag, as MPI says) and each
//! broadcasts the other's to its group, with the name both groups give it. Merging trades
//! each member's `high` with every member of the other group on the intercommunicator's own
//! context, and orders the groups by it (the group of the lower world rank first when equal).
//!
//! Owns: those calls and the intercommunicator's remote group. Must not: send point-to-point
//! messages or run collectives over an intercommunicator (`Mpi::comm` refuses one with
//! `MPI_ERR_UNSUPPORTED_OPERATION`: not in this phase), or make windows over one (`MPI_ERR_COMM`).

use std::ffi::c_int;

use bytes::Bytes;
use onesided_client::Match;

use crate::abi::*;
use crate::env::out;
use crate::error::{fail, On, OnObject, Res};
use crate::state::{self, Comm, Mpi};

/// The tag of merge's messages (on the intercommunicator's own context).
const MERGE_TAG: i32 = 0;

fn words(ranks: &[u32]) -> Vec<u8> {
    ranks.iter().flat_map(|r| r.to_le_bytes()).collect()
}

fn ranks_of(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect()
}

/// A rank of a group of `size`, or `MPI_ERR_RANK`.
fn rank_in(rank: c_int, size: usize, what: &str) -> Res<usize> {
    usize::try_from(rank)
        .ok()
        .filter(|&r| r < size)
        .ok_or_else(|| {
            fail(
                MPI_ERR_RANK,
                format!("{what} {rank} is not a rank of its group"),
            )
        })
}

/// `MPI_Intercomm_create` on the state: the new intercommunicator's handle.
fn create(
    mpi: &mut Mpi,
    local_comm: c_int,
    local_leader: c_int,
    peer_comm: c_int,
    remote_leader: c_int,
    tag: c_int,
) -> Res<i32> {
    let local = mpi.comm_ranks(local_comm)?;
    let leader = rank_in(local_leader, local.len(), "local_leader")?;
    let me = mpi.comm_rank(local_comm)? as usize;
    // the leader's payload: the intercommunicator's name, then the remote group
    let mut payload = Vec::new();
    if me == leader {
        let peer = mpi.comm(peer_comm)?;
        let remote = rank_in(remote_leader, peer.ranks.len(), "remote_leader")?;
        let other = peer.ranks[remote];
        crate::p2p::check_tag(tag, false)?;
        let context = crate::p2p::context(mpi, peer_comm)?;
        let peer_id = peer.id.clone();
        mpi.block_on(
            mpi.session
                .send(other, tag, context, Bytes::from(words(&local))),
        )?;
        let from = Match {
            source: Some(other),
            tag: Some(tag),
            context,
        };
        let remote = ranks_of(&mpi.block_on(mpi.session.receive(from))?.payload);
        // both leaders name it alike: their world ranks, the tag, and how many they made so
        let (a, b) = (local[leader].min(other), local[leader].max(other));
        let key = format!("{peer_id}.x{tag}.{a}-{b}");
        let n = mpi.group_creations.entry(key.clone()).or_default();
        *n += 1;
        let id = format!("{key}.{n}");
        payload.extend((id.len() as u32).to_le_bytes());
        payload.extend(id.as_bytes());
        payload.extend(words(&remote));
    }
    let mut len = (payload.len() as u64).to_le_bytes();
    mpi.bcast(local_comm, &mut len, leader as u32)?;
    payload.resize(u64::from_le_bytes(len) as usize, 0);
    mpi.bcast(local_comm, &mut payload, leader as u32)?;
    let malformed = || {
        fail(
            MPI_ERR_INTERN,
            "the leader's intercommunicator is malformed",
        )
    };
    let id_len = payload
        .get(..4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as usize)
        .ok_or_else(malformed)?;
    let id = payload
        .get(4..4 + id_len)
        .and_then(|b| String::from_utf8(b.to_vec()).ok())
        .ok_or_else(malformed)?;
    let remote = ranks_of(&payload[4 + id_len..]);
    let errhandler = mpi.comm(local_comm)?.errhandler;
    let mut comm = Comm::new(local, id, errhandler);
    comm.remote = Some(remote);
    Ok(mpi.new_comm(comm))
}

/// `MPI_Intercomm_merge` on the state: the new intracommunicator's handle.
fn merge(mpi: &mut Mpi, intercomm: c_int, high: bool) -> Res<i32> {
    let me = mpi.rank;
    let entry = mpi.any_comm(intercomm)?;
    let Some(remote) = entry.remote.clone() else {
        return Err(fail(MPI_ERR_COMM, "not an intercommunicator"));
    };
    let local = entry.ranks.clone();
    let context = crate::p2p::fnv1a(format!("{}.merge", entry.id).as_bytes()) | 1;
    let entry = mpi.any_comm_mut(intercomm)?;
    entry.children += 1;
    let id = format!("{}.m{}", entry.id, entry.children);
    // every member tells every member of the other group its `high`
    for &other in &remote {
        let bytes = Bytes::from(vec![u8::from(high), 0]);
        mpi.block_on(mpi.session.send(other, MERGE_TAG, context, bytes))?;
    }
    let mut theirs = Vec::with_capacity(remote.len());
    for &other in &remote {
        let from = Match {
            source: Some(other),
            tag: Some(MERGE_TAG),
            context,
        };
        theirs.push(mpi.block_on(mpi.session.receive(from))?.payload[0] != 0);
    }
    let remote_high = theirs[0];
    if theirs.iter().any(|&h| h != remote_high) {
        return Err(fail(
            MPI_ERR_ARG,
            "the members of the other group gave different values of high",
        ));
    }
    let local_first = if high == remote_high {
        local.iter().min() < remote.iter().min()
    } else {
        !high
    };
    let ranks = if local_first {
        [local, remote].concat()
    } else {
        [remote, local].concat()
    };
    debug_assert!(ranks.contains(&me));
    let errhandler = mpi.any_comm(intercomm)?.errhandler;
    Ok(mpi.new_comm(Comm::new(ranks, id, errhandler)))
}

export! {
    fn MPI_Intercomm_create / PMPI_Intercomm_create(
        local_comm: c_int,
        local_leader: c_int,
        peer_comm: c_int,
        remote_leader: c_int,
        tag: c_int,
        newintercomm: *mut c_int,
    ) {
        let handle = state::with(|mpi| {
            create(mpi, local_comm, local_leader, peer_comm, remote_leader, tag)
        })
        .on(On::Comm(local_comm))?;
        out(newintercomm, handle)
    }

    fn MPI_Intercomm_merge / PMPI_Intercomm_merge(intercomm: c_int, high: c_int, newintracomm: *mut c_int) {
        let handle = state::with(|mpi| merge(mpi, intercomm, high != 0)).on(On::Comm(intercomm))?;
        out(newintracomm, handle)
    }

    fn MPI_Comm_remote_size / PMPI_Comm_remote_size(comm: c_int, size: *mut c_int) {
        let n = state::with(|mpi| remote_group(mpi, comm).map(|r| r.len())).on(On::Comm(comm))?;
        out(size, n as c_int)
    }

    fn MPI_Comm_remote_group / PMPI_Comm_remote_group(comm: c_int, group: *mut c_int) {
        state::create(group, |mpi| {
            let members = remote_group(mpi, comm).on(On::Comm(comm))?;
            Ok(mpi.new_group(members))
        })
    }
}

/// The remote group of an intercommunicator (`MPI_ERR_COMM` for an intracommunicator).
fn remote_group(mpi: &Mpi, comm: c_int) -> Res<Vec<u32>> {
    mpi.any_comm(comm)?
        .remote
        .clone()
        .ok_or_else(|| fail(MPI_ERR_COMM, "not an intercommunicator"))
}
