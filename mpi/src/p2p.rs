//! Point-to-point (`MPI_Send`, `MPI_Recv`, `MPI_Sendrecv`, `MPI_Isend`, `MPI_Irecv`,
//! `MPI_Probe`, `MPI_Iprobe`, `MPI_Get_count`): the client's messages between the ranks of the
//! world, carried and matched by the service (core's `messaging` rules) and recorded in the
//! audit as the synchronization they are.
//!
//! Owns: the C side — packing the program's buffer by its datatype, a communicator's context
//! (its name among the world's communicators, hashed, so every member computes the same) and
//! rank translation, statuses, `MPI_PROC_NULL`, truncation. Must not: match messages (the
//! service does) or keep messages of its own: sends are buffered by the service, so `MPI_Send`
//! and `MPI_Isend` are complete once it holds the message.

use std::ffi::{c_int, c_void};

use bytes::Bytes;
use onesided_client::{Match, Received};

use crate::abi::*;
use crate::datatype::{gather, scatter};
use crate::env::{count_of, out};
use crate::error::{fail, On, OnObject, Res};
use crate::state::{self, CPtr, Mpi};

/// A receive still on its way: where its message goes once it comes.
#[derive(Debug)]
pub struct Receiving {
    pub answer: tokio::task::JoinHandle<onesided_client::Result<Received>>,
    pub into: CPtr,
    pub runs: Vec<(i64, u64)>,
    /// The world ranks of the receive's communicator, for the status's source.
    pub ranks: Vec<u32>,
}

/// What a completed request tells its status: source (a rank of its communicator), tag and
/// bytes received.
#[derive(Clone, Copy, Debug)]
pub struct Envelope {
    pub source: c_int,
    pub tag: c_int,
    pub bytes: u64,
}

/// The context of communicator `comm`'s messages: 0 for the world, else a 64-bit FNV-1a hash
/// of its name among the world's communicators (which every member gives it alike).
pub(crate) fn context(mpi: &Mpi, comm: c_int) -> Res<u64> {
    let id = &mpi.comm(comm)?.id;
    if id == "w" {
        return Ok(0);
    }
    Ok(fnv1a(id.as_bytes()) | 1)
}

/// The 64-bit FNV-1a hash of `bytes`: every process computes the same.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The context of communicator `comm`'s collectives: its own, apart from the program's
/// messages on `comm`.
pub fn collective_context(mpi: &Mpi, comm: c_int) -> Res<u64> {
    Ok(context(mpi, comm)?.rotate_left(1) ^ 0x636f_6c6c_6563_7469)
}

/// The world rank of rank `rank` of `comm`.
fn world_rank(mpi: &Mpi, comm: c_int, rank: c_int) -> Res<u32> {
    let ranks = &mpi.comm(comm)?.ranks;
    usize::try_from(rank)
        .ok()
        .and_then(|rank| ranks.get(rank).copied())
        .ok_or_else(|| {
            fail(
                MPI_ERR_RANK,
                format!(
                    "rank {rank} is not in the communicator of {} ranks",
                    ranks.len()
                ),
            )
        })
}

/// The communicator rank of world rank `world` (`MPI_UNDEFINED` if it is not a member).
fn comm_rank_of(ranks: &[u32], world: u32) -> c_int {
    ranks
        .iter()
        .position(|&r| r == world)
        .map_or(MPI_UNDEFINED, |r| r as c_int)
}

/// A tag argument, checked: not negative, but `MPI_ANY_TAG` where a `wildcard` may stand.
pub(crate) fn check_tag(tag: c_int, wildcard: bool) -> Res {
    if tag >= 0 || (wildcard && tag == MPI_ANY_TAG) {
        Ok(())
    } else {
        Err(fail(MPI_ERR_TAG, format!("tag {tag} is negative")))
    }
}

/// The runs of `count` elements of `datatype` in the program's buffer.
fn runs_of(mpi: &Mpi, count: c_int, datatype: c_int) -> Res<Vec<(i64, u64)>> {
    let count = count_of(count)?;
    Ok(mpi.dt(datatype)?.repeated(count))
}

/// `MPI_Send` and its modes: the packed buffer, held by the service when this returns.
unsafe fn send(
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
) -> Res {
    state::with(|mpi| {
        let runs = runs_of(mpi, count, datatype)?;
        check_tag(tag, false)?;
        if dest == MPI_PROC_NULL {
            return Ok(());
        }
        let to = world_rank(mpi, comm, dest)?;
        let context = context(mpi, comm)?;
        let payload = Bytes::from(gather(buf, &runs)?);
        mpi.settle()?;
        mpi.block_on(mpi.session.send(to, tag, context, payload))?;
        Ok(())
    })
    .on(On::Comm(comm))
}

/// `MPI_Recv`: waits for the message, writes it and the status.
unsafe fn recv(
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
    status: *mut c_int,
) -> Res {
    let envelope = state::with(
        |mpi| match post(mpi, buf, count, datatype, source, tag, comm)? {
            None => Ok(NULL_ENVELOPE),
            Some(receiving) => {
                let envelope = land(mpi, receiving)?;
                mpi.settle()?;
                Ok(envelope)
            }
        },
    )
    .on(On::Comm(comm))?;
    write_status(status, envelope);
    Ok(())
}

/// What a receive or probe matches, or `None` for `MPI_PROC_NULL`.
fn matching(mpi: &Mpi, source: c_int, tag: c_int, comm: c_int) -> Res<Option<Match>> {
    check_tag(tag, true)?;
    if source == MPI_PROC_NULL {
        return Ok(None);
    }
    let source = match source {
        MPI_ANY_SOURCE => None,
        rank => Some(world_rank(mpi, comm, rank)?),
    };
    Ok(Some(Match {
        source,
        tag: (tag != MPI_ANY_TAG).then_some(tag),
        context: context(mpi, comm)?,
    }))
}

/// Posts a receive into the program's buffer: the request's state, or `None` for
/// `MPI_PROC_NULL` (complete at once).
unsafe fn post(
    mpi: &Mpi,
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
) -> Res<Option<Receiving>> {
    let runs = runs_of(mpi, count, datatype)?;
    let Some(from) = matching(mpi, source, tag, comm)? else {
        return Ok(None);
    };
    let answer = mpi.runtime.spawn(mpi.session.post_receive(from));
    Ok(Some(Receiving {
        answer,
        into: CPtr(buf.cast()),
        runs,
        ranks: mpi.comm(comm)?.ranks.clone(),
    }))
}

/// Waits for a posted receive and writes its message into the program's buffer.
pub fn land(mpi: &Mpi, receiving: Receiving) -> Res<Envelope> {
    let Receiving {
        answer,
        into,
        runs,
        ranks,
    } = receiving;
    let message = mpi.block_on(answer).map_err(|error| {
        fail(
            MPI_ERR_INTERN,
            format!("the receive's task failed: {error}"),
        )
    })??;
    let envelope = Envelope {
        source: comm_rank_of(&ranks, message.source),
        tag: message.tag,
        bytes: message.len,
    };
    write_into(into, &runs, &message.payload, envelope)
}

/// Writes a message's `payload` into the program's buffer (`runs` of `into`), or
/// `MPI_ERR_TRUNCATE` when it does not fit.
fn write_into(
    into: CPtr,
    runs: &[(i64, u64)],
    payload: &[u8],
    envelope: Envelope,
) -> Res<Envelope> {
    let capacity: u64 = runs.iter().map(|&(_, len)| len).sum();
    if payload.len() as u64 > capacity {
        return Err(fail(
            MPI_ERR_TRUNCATE,
            format!(
                "a message of {} bytes from rank {} (tag {}) does not fit the receive's {capacity}",
                payload.len(),
                envelope.source,
                envelope.tag
            ),
        ));
    }
    // SAFETY: the program's receive buffer, valid until the receive completes
    unsafe { scatter(into.0, runs, payload) };
    Ok(envelope)
}

/// `MPI_Mprobe` (`wait`) or `MPI_Improbe`: takes the earliest matching message out of the
/// matching, as MPI's matched probe does, and keeps it here under a message handle for
/// `MPI_Mrecv`: its handle and envelope, or `None` when `wait` is false and none is there.
fn matched_probe(
    source: c_int,
    tag: c_int,
    comm: c_int,
    wait: bool,
) -> Res<Option<(c_int, Envelope)>> {
    state::with(|mpi| {
        let Some(from) = matching(mpi, source, tag, comm)? else {
            return Ok(Some((MPI_MESSAGE_NO_PROC, NULL_ENVELOPE)));
        };
        let message = if wait {
            mpi.block_on(mpi.session.receive(from))?
        } else {
            let Some(seen) = mpi.block_on(mpi.session.probe(from, false))? else {
                return Ok(None);
            };
            // this process's calls are serialized, and one sender's messages match in the
            // order sent: the earliest message from that source with that tag is the one seen
            let exactly = Match {
                source: Some(seen.source),
                tag: Some(seen.tag),
                context: from.context,
            };
            mpi.block_on(mpi.session.receive(exactly))?
        };
        let envelope = Envelope {
            source: comm_rank_of(&mpi.comm(comm)?.ranks, message.source),
            tag: message.tag,
            bytes: message.len,
        };
        let handle = mpi.handle(MPI_MESSAGE_NULL as u32);
        mpi.messages.insert(handle, (message.payload, envelope));
        Ok(Some((handle, envelope)))
    })
    .on(On::Comm(comm))
}

/// `MPI_Mrecv`: the message a matched probe took, written into the program's buffer; the
/// handle becomes `MPI_MESSAGE_NULL`.
unsafe fn matched_receive(
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    message: *mut c_int,
) -> Res<Envelope> {
    if message.is_null() {
        return Err(fail(MPI_ERR_ARG, "a null message pointer"));
    }
    if *message == MPI_MESSAGE_NO_PROC {
        *message = MPI_MESSAGE_NULL;
        return Ok(NULL_ENVELOPE);
    }
    let envelope = state::with(|mpi| {
        let runs = runs_of(mpi, count, datatype)?;
        let (payload, envelope) = mpi
            .messages
            .remove(&*message)
            .ok_or_else(|| fail(MPI_ERR_REQUEST, format!("{:#x} is not a message", *message)))?;
        write_into(CPtr(buf.cast()), &runs, &payload, envelope)
    })?;
    *message = MPI_MESSAGE_NULL;
    Ok(envelope)
}

/// The envelope of a receive from `MPI_PROC_NULL`.
pub const NULL_ENVELOPE: Envelope = Envelope {
    source: MPI_PROC_NULL,
    tag: MPI_ANY_TAG,
    bytes: 0,
};

/// Writes `envelope` into `status` unless the program ignores it. MPICH's `MPI_Status` keeps
/// the count in bytes: its low 32 bits first, then the high bits shifted past the cancelled
/// flag.
pub unsafe fn write_status(status: *mut c_int, envelope: Envelope) {
    if status.is_null() || status as isize == MPI_STATUS_IGNORE {
        return;
    }
    for i in 0..SIZEOF_STATUS / 4 {
        status.add(i).write(0);
    }
    status.write(envelope.bytes as u32 as c_int);
    status.add(1).write(((envelope.bytes >> 32) << 1) as c_int);
    status.add(STATUS_SOURCE_OFFSET / 4).write(envelope.source);
    status.add(STATUS_TAG_OFFSET / 4).write(envelope.tag);
    status.add(STATUS_ERROR_OFFSET / 4).write(MPI_SUCCESS);
}

/// The bytes a status says were received.
unsafe fn status_bytes(status: *const c_int) -> u64 {
    let low = u64::from(status.read() as u32);
    let high = u64::from((status.add(1).read() as u32) >> 1);
    low | (high << 32)
}

/// `MPI_Send` and its modes, and their nonblocking forms, alike: the service buffers every
/// message, so each completes once the service holds it — `MPI_Ssend` too, which in MPI
/// completes only once a receive matched it (a program relying on that rendezvous to order
/// itself is not ordered by it here), and each nonblocking form's request is complete at once.
macro_rules! sends {
    ($($name:ident / $pname:ident, $iname:ident / $ipname:ident);*) => {
        export_with_request_form! {
            $(
                fn $name / $pname, $iname / $ipname(
                    buf: *const c_void,
                    count: c_int,
                    datatype: c_int,
                    dest: c_int,
                    tag: c_int,
                    comm: c_int;
                    request
                ) {
                    send(buf, count, datatype, dest, tag, comm)?;
                    let Some(request) = request else {
                        return Ok(());
                    };
                    let id = state::with(|mpi| Ok(mpi.completed_request()))?;
                    out(request, id)
                }
            )*
        }
    };
}

sends!(
    MPI_Send / PMPI_Send, MPI_Isend / PMPI_Isend;
    MPI_Ssend / PMPI_Ssend, MPI_Issend / PMPI_Issend;
    MPI_Rsend / PMPI_Rsend, MPI_Irsend / PMPI_Irsend;
    MPI_Bsend / PMPI_Bsend, MPI_Ibsend / PMPI_Ibsend
);

export! {
    fn MPI_Recv / PMPI_Recv(
        buf: *mut c_void,
        count: c_int,
        datatype: c_int,
        source: c_int,
        tag: c_int,
        comm: c_int,
        status: *mut c_int,
    ) {
        recv(buf, count, datatype, source, tag, comm, status)
    }

    fn MPI_Irecv / PMPI_Irecv(
        buf: *mut c_void,
        count: c_int,
        datatype: c_int,
        source: c_int,
        tag: c_int,
        comm: c_int,
        request: *mut c_int,
    ) {
        let id = state::with(|mpi| {
            let receiving = post(mpi, buf, count, datatype, source, tag, comm)?;
            Ok(mpi.receive_request(receiving))
        })
        .on(On::Comm(comm))?;
        out(request, id)
    }

    fn MPI_Sendrecv / PMPI_Sendrecv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: c_int,
        dest: c_int,
        sendtag: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: c_int,
        source: c_int,
        recvtag: c_int,
        comm: c_int,
        status: *mut c_int,
    ) {
        // the send is buffered by the service: it cannot wait for this rank's own receive
        send(sendbuf, sendcount, sendtype, dest, sendtag, comm)?;
        recv(recvbuf, recvcount, recvtype, source, recvtag, comm, status)
    }

    fn MPI_Sendrecv_replace / PMPI_Sendrecv_replace(
        buf: *mut c_void,
        count: c_int,
        datatype: c_int,
        dest: c_int,
        sendtag: c_int,
        source: c_int,
        recvtag: c_int,
        comm: c_int,
        status: *mut c_int,
    ) {
        // packed (copied) before the receive writes the same buffer
        send(buf, count, datatype, dest, sendtag, comm)?;
        recv(buf, count, datatype, source, recvtag, comm, status)
    }

    fn MPI_Probe / PMPI_Probe(
        source: c_int,
        tag: c_int,
        comm: c_int,
        status: *mut c_int,
    ) {
        let envelope = probe(source, tag, comm, true)?;
        write_status(status, envelope.unwrap_or(NULL_ENVELOPE));
        Ok(())
    }

    fn MPI_Iprobe / PMPI_Iprobe(
        source: c_int,
        tag: c_int,
        comm: c_int,
        flag: *mut c_int,
        status: *mut c_int,
    ) {
        let envelope = probe(source, tag, comm, false)?;
        if let Some(envelope) = envelope {
            write_status(status, envelope);
        }
        out(flag, c_int::from(envelope.is_some()))
    }

    fn MPI_Mprobe / PMPI_Mprobe(
        source: c_int,
        tag: c_int,
        comm: c_int,
        message: *mut c_int,
        status: *mut c_int,
    ) {
        let (handle, envelope) =
            matched_probe(source, tag, comm, true)?.unwrap_or((MPI_MESSAGE_NULL, NULL_ENVELOPE));
        write_status(status, envelope);
        out(message, handle)
    }

    fn MPI_Improbe / PMPI_Improbe(
        source: c_int,
        tag: c_int,
        comm: c_int,
        flag: *mut c_int,
        message: *mut c_int,
        status: *mut c_int,
    ) {
        let found = matched_probe(source, tag, comm, false)?;
        if let Some((handle, envelope)) = found {
            write_status(status, envelope);
            out(message, handle)?;
        }
        out(flag, c_int::from(found.is_some()))
    }

    fn MPI_Mrecv / PMPI_Mrecv(
        buf: *mut c_void,
        count: c_int,
        datatype: c_int,
        message: *mut c_int,
        status: *mut c_int,
    ) {
        let envelope = matched_receive(buf, count, datatype, message)?;
        write_status(status, envelope);
        Ok(())
    }

    fn MPI_Imrecv / PMPI_Imrecv(
        buf: *mut c_void,
        count: c_int,
        datatype: c_int,
        message: *mut c_int,
        request: *mut c_int,
    ) {
        // the message is here already: the request is complete at once
        let envelope = matched_receive(buf, count, datatype, message)?;
        let id = state::with(|mpi| {
            let id = mpi.completed_request();
            if let Some(req) = mpi.requests.get_mut(&id) {
                req.envelope = Some(envelope);
            }
            Ok(id)
        })?;
        out(request, id)
    }

    fn MPI_Get_count / PMPI_Get_count(
        status: *const c_int,
        datatype: c_int,
        count: *mut c_int,
    ) {
        if status.is_null() {
            return Err(fail(MPI_ERR_ARG, "a null status"));
        }
        let size = state::with(|mpi| Ok(mpi.dt(datatype)?.size()))?;
        let bytes = status_bytes(status);
        let elements = match size {
            0 if bytes == 0 => 0,
            0 => MPI_UNDEFINED,
            size if bytes.is_multiple_of(size) => c_int::try_from(bytes / size).unwrap_or(MPI_UNDEFINED),
            _ => MPI_UNDEFINED,
        };
        out(count, elements)
    }
}

/// `MPI_Probe` (`wait`) or `MPI_Iprobe`: the envelope of the earliest matching message, if
/// one is there (a probe of `MPI_PROC_NULL` finds the null envelope at once).
fn probe(source: c_int, tag: c_int, comm: c_int, wait: bool) -> Res<Option<Envelope>> {
    state::with(|mpi| {
        let Some(from) = matching(mpi, source, tag, comm)? else {
            return Ok(Some(NULL_ENVELOPE));
        };
        let ranks = mpi.comm(comm)?.ranks.clone();
        let seen = mpi.block_on(mpi.session.probe(from, wait))?;
        mpi.settle()?;
        Ok(seen.map(|message| Envelope {
            source: comm_rank_of(&ranks, message.source),
            tag: message.tag,
            bytes: message.len,
        }))
    })
    .on(On::Comm(comm))
}
