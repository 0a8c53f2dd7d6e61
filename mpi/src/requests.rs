//! Requests and their completion: `MPI_Wait`, `Waitall`, `Waitany`, `Test`, `Testall`,
//! `Request_free` over the requests of request-based RMA (`rma`), of `MPI_Irecv` and
//! `MPI_Isend` (`p2p`) and of `MPI_Imrecv`; the statuses they write.
//!
//! Owns: when a request is complete and what its status says. Must not: issue operations or
//! match messages (`rma`, `p2p`).

use std::ffi::c_int;

use crate::abi::*;
use crate::env::out;
use crate::error::{fail, Res};
use crate::p2p::{write_status, Envelope};
use crate::state::{self, Mpi, Req};

/// What the status of a request that received nothing says (an RMA request's, an `MPI_Isend`'s:
/// MPI leaves source and tag undefined there).
const NO_MESSAGE: Envelope = Envelope {
    source: MPI_ANY_SOURCE,
    tag: MPI_ANY_TAG,
    bytes: 0,
};

/// The `i`-th status of an array, or null when the program ignores them.
unsafe fn status_at(statuses: *mut c_int, i: usize) -> *mut c_int {
    if statuses.is_null() || statuses as isize == MPI_STATUSES_IGNORE {
        return std::ptr::null_mut();
    }
    statuses.add(i * SIZEOF_STATUS / 4)
}

/// Completes request `id` (waiting for it), writing its result: what its status says.
fn finish(mpi: &mut Mpi, id: i32) -> Res<Envelope> {
    let Some(req) = mpi.requests.remove(&id) else {
        return Err(fail(MPI_ERR_REQUEST, format!("{id:#x} is not a request")));
    };
    if let Some(receiving) = req.receiving {
        let envelope = crate::p2p::land(mpi, receiving)?;
        mpi.settle()?;
        return Ok(envelope);
    }
    if let Some(envelope) = req.envelope {
        return Ok(envelope);
    }
    if let Some(pending) = req.pending {
        let bytes = mpi.block_on(pending.value())?;
        let landed = req.landed.swap(true, std::sync::atomic::Ordering::AcqRel);
        if let (Some((into, runs)), false) = (req.landing, landed) {
            // SAFETY: the program's result buffer, valid until the request completes
            unsafe { crate::datatype::scatter(into.0, &runs, &bytes) };
        }
    }
    Ok(NO_MESSAGE)
}

/// Completes the request at `request` (waiting for it; nothing to do for
/// `MPI_REQUEST_NULL`) and sets it to `MPI_REQUEST_NULL`: what its status says.
unsafe fn complete(request: *mut c_int) -> Res<Envelope> {
    if *request == MPI_REQUEST_NULL {
        return Ok(NO_MESSAGE);
    }
    let envelope = state::with(|mpi| finish(mpi, *request))?;
    *request = MPI_REQUEST_NULL;
    Ok(envelope)
}

/// Completes each of the `count` requests at `requests`, writing its status into the
/// `statuses` array.
unsafe fn complete_all(count: usize, requests: *mut c_int, statuses: *mut c_int) -> Res {
    for i in 0..count {
        write_status(status_at(statuses, i), complete(requests.add(i))?);
    }
    Ok(())
}

/// Whether request `id` is complete now.
fn ready(mpi: &Mpi, id: i32) -> Res<bool> {
    match mpi.requests.get(&id) {
        None => Err(fail(MPI_ERR_REQUEST, format!("{id:#x} is not a request"))),
        Some(Req {
            receiving: Some(receiving),
            ..
        }) => Ok(receiving.answer.is_finished()),
        Some(Req { pending: None, .. }) => Ok(true),
        Some(Req {
            pending: Some(pending),
            ..
        }) => Ok(pending.test()?),
    }
}

export! {
    fn MPI_Wait / PMPI_Wait(request: *mut c_int, status: *mut c_int) {
        if request.is_null() {
            return Err(fail(MPI_ERR_REQUEST, "a null request pointer"));
        }
        write_status(status, complete(request)?);
        Ok(())
    }

    fn MPI_Waitall / PMPI_Waitall(count: c_int, requests: *mut c_int, statuses: *mut c_int) {
        complete_all(count.max(0) as usize, requests, statuses)
    }

    fn MPI_Waitany / PMPI_Waitany(
        count: c_int,
        requests: *mut c_int,
        index: *mut c_int,
        status: *mut c_int,
    ) {
        loop {
            let mut active = false;
            for i in 0..count.max(0) as usize {
                let request = requests.add(i);
                if *request == MPI_REQUEST_NULL {
                    continue;
                }
                active = true;
                if state::with(|mpi| ready(mpi, *request))? {
                    write_status(status, complete(request)?);
                    return out(index, i as c_int);
                }
            }
            if !active {
                write_status(status, NO_MESSAGE);
                return out(index, MPI_UNDEFINED);
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }

    fn MPI_Test / PMPI_Test(request: *mut c_int, flag: *mut c_int, status: *mut c_int) {
        if request.is_null() {
            return Err(fail(MPI_ERR_REQUEST, "a null request pointer"));
        }
        let done = *request == MPI_REQUEST_NULL || state::with(|mpi| ready(mpi, *request))?;
        if done {
            write_status(status, complete(request)?);
        }
        out(flag, c_int::from(done))
    }

    fn MPI_Testall / PMPI_Testall(
        count: c_int,
        requests: *mut c_int,
        flag: *mut c_int,
        statuses: *mut c_int,
    ) {
        let count = count.max(0) as usize;
        let mut all = true;
        for i in 0..count {
            let request = *requests.add(i);
            if request != MPI_REQUEST_NULL && !state::with(|mpi| ready(mpi, request))? {
                all = false;
            }
        }
        if all {
            complete_all(count, requests, statuses)?;
        }
        out(flag, c_int::from(all))
    }

    fn MPI_Request_free / PMPI_Request_free(request: *mut c_int) {
        state::free(request, "request", MPI_ERR_REQUEST, MPI_REQUEST_NULL, |mpi, handle| {
            state::remove(&mut mpi.requests, handle, || fail(MPI_ERR_REQUEST, "not a request"))
        })
    }
}
