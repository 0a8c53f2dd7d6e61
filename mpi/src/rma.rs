//! The window calls: creation and free, the synchronization calls (each one brackets the
//! program's memory and the client's private copy, module `sync`), the communication calls on
//! basic datatypes, attributes and error handlers of windows.

use std::ffi::{c_int, c_void};

use bytes::Bytes;
use onesided_client::{Flavor, Layout, LockType, MemoryModel, NewWindow, OpSpec, Window};
use onesided_core::window::OpKind;
use onesided_core::Op;

use crate::abi::*;
use crate::datatype::{gather, Dt};
use crate::env::{count_of, datatype, members, out, slice};
use crate::error::{fail, On, OnObject, Res};
use crate::state::{self, CPtr, Landing, Mpi, Req, Win, WinAttrs};

/// Core's assert bits for MPICH's `MPI_MODE_*` bits.
fn assert_bits(assert: c_int) -> Res<u32> {
    const MAP: [(c_int, u32); 5] = [
        (MPI_MODE_NOCHECK, onesided_client::Assert::NOCHECK),
        (MPI_MODE_NOSTORE, onesided_client::Assert::NOSTORE),
        (MPI_MODE_NOPUT, onesided_client::Assert::NOPUT),
        (MPI_MODE_NOPRECEDE, onesided_client::Assert::NOPRECEDE),
        (MPI_MODE_NOSUCCEED, onesided_client::Assert::NOSUCCEED),
    ];
    let mut bits = 0;
    let mut rest = assert;
    for (mpi, core) in MAP {
        if assert & mpi != 0 {
            bits |= core;
            rest &= !mpi;
        }
    }
    if rest != 0 {
        return Err(fail(
            MPI_ERR_ASSERT,
            format!("assert {assert:#x} has unknown bits"),
        ));
    }
    Ok(bits)
}

/// The info key that chooses a window's memory model: `unified` or `separate`.
pub const MEMORY_MODEL_KEY: &str = "onesided_memory_model";

/// The environment variable that chooses the memory model of the job's windows whose info
/// does not ([`MEMORY_MODEL_KEY`]); `onesided mpiexec --memory-model` sets it.
pub const MEMORY_MODEL_ENV: &str = "ONESIDED_MPI_MEMORY_MODEL";

/// The memory model of a new window: its info's [`MEMORY_MODEL_KEY`], else the job's
/// [`MEMORY_MODEL_ENV`], else unified, as MPICH's windows are (programs written for it read
/// their window memory after other ranks' epochs, ordered by a message or a barrier, without
/// synchronizing it: only the unified model makes that correct). A dynamic window is
/// separate whatever is asked (its regions come and go; the service follows whole copies).
pub fn memory_model(info: &[(String, String)], flavor: Flavor) -> Res<MemoryModel> {
    let asked = info
        .iter()
        .rev()
        .find(|(key, _)| key == MEMORY_MODEL_KEY)
        .map(|(_, value)| (format!("info {MEMORY_MODEL_KEY}"), value.clone()))
        .or_else(|| {
            std::env::var(MEMORY_MODEL_ENV)
                .ok()
                .map(|value| (MEMORY_MODEL_ENV.to_string(), value))
        });
    let model = match asked {
        None => MemoryModel::Unified,
        Some((from, value)) => MemoryModel::parse(value.trim()).ok_or_else(|| {
            fail(
                MPI_ERR_INFO_VALUE,
                format!("{from} is {value:?}: the memory model is unified or separate"),
            )
        })?,
    };
    Ok(if flavor == Flavor::Dynamic {
        MemoryModel::Separate
    } else {
        model
    })
}

/// Creates a window of `flavor` over `comm` of `size` bytes at `base` (allocated here for
/// `Flavor::Allocate`; none for `Flavor::Dynamic`, whose regions are attached later, module
/// `dynamic`).
pub(crate) unsafe fn create(
    base: *mut u8,
    size: isize,
    disp_unit: c_int,
    info: c_int,
    comm: c_int,
    flavor: Flavor,
) -> Res<(i32, *mut u8)> {
    let allocate = flavor == Flavor::Allocate;
    state::with(|mpi| {
        let on = On::Comm(comm);
        if mpi.any_comm(comm).on(on)?.remote.is_some() {
            return Err(fail(MPI_ERR_COMM, "a window is made over an intracommunicator").on(on));
        }
        let ranks = mpi.comm_ranks(comm)?;
        if size < 0 {
            return Err(fail(MPI_ERR_SIZE, format!("size {size} is negative")).on(on));
        }
        if disp_unit <= 0 {
            return Err(fail(
                MPI_ERR_DISP,
                format!("disp_unit {disp_unit} is not positive"),
            )
            .on(on));
        }
        let pairs = if info == MPI_INFO_NULL {
            Vec::new()
        } else {
            mpi.infos.get(&info).cloned().ok_or_else(|| {
                fail(MPI_ERR_INFO, format!("{info:#x} is not an info object")).on(on)
            })?
        };
        let model = memory_model(&pairs, flavor).on(on)?;
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .filter(|(k, _)| k != MEMORY_MODEL_KEY)
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let name = mpi.comm_mut(comm)?.next_window_name();
        let group: Vec<u32> = if comm == MPI_COMM_WORLD {
            Vec::new()
        } else {
            ranks
        };
        let call = NewWindow::new(&name, size as u64, disp_unit as u32)
            .flavor(flavor)
            .model(model)
            .info(&pairs)
            .group(&group);
        let window = mpi.block_on(mpi.session.create(&call)).on(on)?;
        let directory = if flavor == Flavor::Dynamic {
            Some(crate::dynamic::Directory::create(mpi, &name, &group).on(on)?)
        } else {
            None
        };
        let base = if allocate {
            let memory = libc::calloc(1, (size as usize).max(1)).cast::<u8>();
            if memory.is_null() {
                return Err(fail(MPI_ERR_NO_MEM, format!("cannot allocate {size} bytes")).on(on));
            }
            memory
        } else {
            base
        };
        let size = size as usize;
        if size > 0 && base.is_null() {
            return Err(fail(MPI_ERR_BASE, "a null base for a window of non-zero size").on(on));
        }
        // the program's memory is the window's at creation, public copy included: what it
        // holds is stored and published before any rank may access it (zeroes are the
        // public copy already)
        let initial = if size > 0 {
            std::slice::from_raw_parts(base, size).to_vec()
        } else {
            Vec::new()
        };
        let mut win = Win {
            window,
            base: CPtr(base),
            size,
            shadow: vec![0; size],
            allocated: allocate,
            comm,
            errhandler: mpi.comm(comm)?.errhandler,
            attrs: Box::new(WinAttrs::of(size, disp_unit, flavor, model)),
            landings: Vec::new(),
            user_attrs: Vec::new(),
            regions: Vec::new(),
            directory,
            freeing: false,
        };
        if initial.iter().any(|&b| b != 0) {
            win.push_stores().on(on)?;
            let me = win.window.rank();
            mpi.block_on(async {
                win.window.lock(LockType::Exclusive, me, 0).await?;
                win.window.unlock(me).await
            })
            .on(on)?;
        }
        if flavor == Flavor::Create {
            // no rank reaches the memory before its owner published it; the memory of the
            // other flavors is zeros (allocated here) or none (dynamic), public already, and
            // the creation itself is collective. A barrier is not free: every rank records
            // it on every window it has open
            mpi.barrier(comm).on(on)?;
        }
        let handle = mpi.handle(MPI_WIN_NULL as u32);
        mpi.windows.insert(handle, win);
        Ok((handle, base))
    })
}

/// A synchronization call on window `handle`: the program's stores go into the private copy
/// first; after it, the get-like results it completed (those to `landing`'s target, all for
/// `Some(None)`) land and the private copy's news reach the program's memory.
pub(crate) fn synchronize(
    handle: c_int,
    landing: Option<Option<u32>>,
    call: impl FnOnce(&Mpi, &Window) -> onesided_client::Result<()>,
) -> Res {
    state::with(|mpi| {
        let on = On::Win(handle);
        mpi.win(handle).on(on)?.push_stores().on(on)?;
        let window = &mpi.windows.get(&handle).map(|w| &w.window);
        if let Some(window) = window {
            call(mpi, window).on(on)?;
        }
        if let Some(target) = landing {
            mpi.land(handle, target).on(on)?;
        }
        mpi.win(handle).on(on)?.pull().on(on)
    })
}

/// A call that completes what this rank sent to one target rank (`MPI_Win_unlock`,
/// `MPI_Win_flush`, `MPI_Win_flush_local`): [`synchronize`] with `call` on the target, whose
/// get-like answers then land; nothing for `MPI_PROC_NULL`.
fn completing_at(
    rank: c_int,
    win: c_int,
    call: impl FnOnce(&Mpi, &Window, u32) -> onesided_client::Result<()>,
) -> Res {
    if rank == MPI_PROC_NULL {
        return Ok(());
    }
    let target = target_of(rank).on(On::Win(win))?;
    synchronize(win, Some(Some(target)), |mpi, w| call(mpi, w, target))
}

/// `MPI_Win_free` of `handle`, whose `freeing` is set.
unsafe fn free(mpi: &mut Mpi, handle: c_int) -> Res {
    let on = On::Win(handle);
    let entry = mpi.win(handle).on(on)?;
    let (comm, allocated) = (entry.comm, entry.allocated);
    // the memory goes back to the program as plain memory, holding what the other
    // ranks put there: once every member is here (no epoch is open anywhere), the
    // public copy is pulled into it (a lock of one's own rank pulls). Memory allocated
    // here goes nowhere (it is freed with the window): the free's own collective is
    // enough
    if !allocated {
        mpi.barrier(comm).on(on)?;
    }
    {
        let entry = &mpi.windows[&handle];
        if !allocated && (entry.size > 0 || !entry.regions.is_empty()) {
            let me = entry.window.rank();
            let pulled = mpi.block_on(async {
                entry.window.lock(LockType::Shared, me, 0).await?;
                entry.window.unlock(me).await
            });
            // refused (a window of no_locks, or a fence epoch still open): nothing to
            // pull by lock, and nothing changed
            if pulled.is_ok() {
                mpi.win(handle).on(on)?.pull().on(on)?;
            }
        }
    }
    {
        let entry = &mpi.windows[&handle];
        mpi.block_on(entry.window.free()).on(on)?;
        if let Some(directory) = &entry.directory {
            directory.free(&mpi.runtime).on(on)?;
        }
    }
    if let Some(entry) = mpi.windows.remove(&handle) {
        for (keyval, value) in entry.user_attrs.iter().rev() {
            if let Some((Some(delete), extra)) = mpi.win_keyvals.get(keyval) {
                delete(handle, *keyval, value.0.cast(), extra.0.cast());
            }
        }
        if entry.allocated && !entry.base.0.is_null() {
            libc::free(entry.base.0.cast());
        }
    }
    Ok(())
}

fn target_of(rank: c_int) -> Res<u32> {
    u32::try_from(rank).map_err(|_| fail(MPI_ERR_RANK, format!("rank {rank} is not a rank")))
}

/// What a communication call moves: the origin's datatype and count, the target's layout,
/// and their basic type (both must hold the same elements: the same basic type, or the same
/// signature of several, moved as bytes).
fn transfer(
    origin_count: c_int,
    origin_type: c_int,
    target_count: c_int,
    target_type: c_int,
) -> Res<(Dt, u64, Layout, onesided_core::Datatype)> {
    let (origin, target) = state::with(|mpi| Ok((mpi.dt(origin_type)?, mpi.dt(target_type)?)))?;
    let (origin_count, target_count) = (count_of(origin_count)?, count_of(target_count)?);
    // an empty type signature matches every other empty one, whatever types hold it
    let empty = origin.size() * origin_count == 0 && target.size() * target_count == 0;
    let matching = if origin.mixed || target.mixed {
        origin.signature_of(origin_count) == target.signature_of(target_count)
    } else {
        origin.base == target.base
    };
    if !matching && !empty {
        return Err(fail(
            MPI_ERR_TYPE,
            "origin and target datatypes hold different basic types",
        ));
    }
    if origin.size() * origin_count != target.size() * target_count {
        return Err(fail(
            MPI_ERR_TYPE,
            format!(
                "the origin holds {} bytes, the target {}",
                origin.size() * origin_count,
                target.size() * target_count
            ),
        ));
    }
    let layout = target.target_layout(target_count)?;
    Ok((origin, origin_count, layout, target.base))
}

/// `MPI_ERR_TYPE` for a datatype of several basic types: an accumulate's datatypes hold one
/// (MPI's rule for accumulate functions), which the target's op works on.
fn one_basic_type(dt: &Dt) -> Res {
    if dt.mixed {
        return Err(fail(
            MPI_ERR_TYPE,
            "an accumulate's datatype holds several basic types (one is allowed)",
        ));
    }
    Ok(())
}

/// A target operation of `kind` with its layout and packed origin data.
fn spec(
    kind: OpKind,
    dtype: onesided_core::Datatype,
    disp: isize,
    layout: Layout,
    data: Vec<u8>,
) -> OpSpec {
    OpSpec {
        kind,
        dtype,
        disp: disp as u64,
        layout,
        data: Bytes::from(data),
        compare: Bytes::new(),
    }
}

/// Issues `spec` on window `handle`; a get-like call's result lands in `result` later: at the
/// synchronization call that completes it, or — for a request-based call, whose request is
/// written to `request` — when the request completes.
unsafe fn issue(
    handle: c_int,
    target: c_int,
    spec: OpSpec,
    result: Option<(*mut c_void, Vec<(i64, u64)>)>,
    request: Option<*mut c_int>,
) -> Res {
    let landed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let made = state::with(|mpi| {
        let on = On::Win(handle);
        mpi.win(handle).on(on)?;
        let empty = spec.layout == (onesided_client::Layout::Contiguous { count: 0 });
        let pending = if target == MPI_PROC_NULL || empty {
            None
        } else {
            let target = target_of(target).on(on)?;
            let mut spec = spec;
            crate::dynamic::translate(mpi, handle, target, &mut spec).on(on)?;
            let win = mpi.win(handle).on(on)?;
            let pending = win.window.issue(target, spec, request.is_some()).on(on)?;
            if let Some((into, runs)) = &result {
                // the completing synchronization call writes the result (a request's wait
                // too, whichever comes first)
                win.landings.push(Landing {
                    target,
                    pending: pending.clone(),
                    into: CPtr(into.cast()),
                    runs: runs.clone(),
                    landed: landed.clone(),
                });
            }
            // an rput or raccumulate copied its origin buffer: its request is complete at once
            result.as_ref().map(|_| pending)
        };
        let Some(_) = request else {
            return Ok(None);
        };
        let landing = result.filter(|_| pending.is_some());
        let req = Req {
            pending,
            landing: landing.map(|(into, runs)| (CPtr(into.cast()), runs)),
            landed: landed.clone(),
            receiving: None,
            envelope: None,
        };
        let id = mpi.handle(MPI_REQUEST_NULL as u32);
        mpi.requests.insert(id, req);
        Ok(Some(id))
    })?;
    if let (Some(pointer), Some(id)) = (request, made) {
        out(pointer, id)?;
    }
    Ok(())
}

fn op_of(op: c_int) -> Res<Op> {
    crate::abi::op(op).ok_or_else(|| fail(MPI_ERR_OP, format!("{op:#x} is not a predefined op")))
}

export_with_request_form! {
    fn MPI_Put / PMPI_Put, MPI_Rput / PMPI_Rput(
        origin_addr: *const c_void,
        origin_count: c_int,
        origin_datatype: c_int,
        target_rank: c_int,
        target_disp: isize,
        target_count: c_int,
        target_datatype: c_int,
        win: c_int;
        request
    ) {
        let on = On::Win(win);
        let (origin, count, layout, base) =
            transfer(origin_count, origin_datatype, target_count, target_datatype).on(on)?;
        let data = gather(origin_addr, &origin.repeated(count)).on(on)?;
        let spec = spec(OpKind::Put, base, target_disp, layout, data);
        issue(win, target_rank, spec, None, request)
    }

    fn MPI_Get / PMPI_Get, MPI_Rget / PMPI_Rget(
        origin_addr: *mut c_void,
        origin_count: c_int,
        origin_datatype: c_int,
        target_rank: c_int,
        target_disp: isize,
        target_count: c_int,
        target_datatype: c_int,
        win: c_int;
        request
    ) {
        let on = On::Win(win);
        let (origin, count, layout, base) =
            transfer(origin_count, origin_datatype, target_count, target_datatype).on(on)?;
        if count > 0 && origin.size() > 0 && origin_addr.is_null() {
            return Err(fail(MPI_ERR_BUFFER, "a null origin buffer").on(on));
        }
        let spec = spec(OpKind::Get, base, target_disp, layout, Vec::new());
        let runs = origin.repeated(count);
        issue(win, target_rank, spec, Some((origin_addr, runs)), request)
    }

    fn MPI_Accumulate / PMPI_Accumulate, MPI_Raccumulate / PMPI_Raccumulate(
        origin_addr: *const c_void,
        origin_count: c_int,
        origin_datatype: c_int,
        target_rank: c_int,
        target_disp: isize,
        target_count: c_int,
        target_datatype: c_int,
        op: c_int,
        win: c_int;
        request
    ) {
        let on = On::Win(win);
        let (origin, count, layout, base) =
            transfer(origin_count, origin_datatype, target_count, target_datatype).on(on)?;
        one_basic_type(&origin).on(on)?;
        let op = op_of(op).on(on)?;
        let data = gather(origin_addr, &origin.repeated(count)).on(on)?;
        let spec = spec(OpKind::Accumulate(op), base, target_disp, layout, data);
        issue(win, target_rank, spec, None, request)
    }

    fn MPI_Get_accumulate / PMPI_Get_accumulate, MPI_Rget_accumulate / PMPI_Rget_accumulate(
        origin_addr: *const c_void,
        origin_count: c_int,
        origin_datatype: c_int,
        result_addr: *mut c_void,
        result_count: c_int,
        result_datatype: c_int,
        target_rank: c_int,
        target_disp: isize,
        target_count: c_int,
        target_datatype: c_int,
        op: c_int,
        win: c_int;
        request
    ) {
        let on = On::Win(win);
        let op = op_of(op).on(on)?;
        let (result, count, layout, base) =
            transfer(result_count, result_datatype, target_count, target_datatype).on(on)?;
        one_basic_type(&result).on(on)?;
        let data = if op == Op::NoOp {
            Vec::new()
        } else {
            let (origin, origin_count, _, _) =
                transfer(origin_count, origin_datatype, target_count, target_datatype).on(on)?;
            gather(origin_addr, &origin.repeated(origin_count)).on(on)?
        };
        if count > 0 && result.size() > 0 && result_addr.is_null() {
            return Err(fail(MPI_ERR_BUFFER, "a null result buffer").on(on));
        }
        let spec = spec(OpKind::GetAccumulate(op), base, target_disp, layout, data);
        let runs = result.repeated(count);
        issue(win, target_rank, spec, Some((result_addr, runs)), request)
    }
}

export! {
    fn MPI_Win_create / PMPI_Win_create(
        base: *mut c_void,
        size: isize,
        disp_unit: c_int,
        info: c_int,
        comm: c_int,
        win: *mut c_int,
    ) {
        let (handle, _) = create(base.cast(), size, disp_unit, info, comm, Flavor::Create)?;
        out(win, handle)
    }

    fn MPI_Win_allocate / PMPI_Win_allocate(
        size: isize,
        disp_unit: c_int,
        info: c_int,
        comm: c_int,
        baseptr: *mut c_void,
        win: *mut c_int,
    ) {
        let (handle, base) = create(std::ptr::null_mut(), size, disp_unit, info, comm, Flavor::Allocate)?;
        out(baseptr.cast::<*mut c_void>(), base.cast())?;
        out(win, handle)
    }

    /// A shared-memory window: there is no shared memory across a network, so only over a
    /// communicator of one process (what `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)` gives),
    /// where it is `MPI_Win_allocate`'s window with the shared flavor.
    fn MPI_Win_allocate_shared / PMPI_Win_allocate_shared(
        size: isize,
        disp_unit: c_int,
        info: c_int,
        comm: c_int,
        baseptr: *mut c_void,
        win: *mut c_int,
    ) {
        let members = state::with(|mpi| Ok(mpi.comm(comm).on(On::Comm(comm))?.ranks.len()))?;
        if members != 1 {
            return Err(fail(
                MPI_ERR_RMA_SHARED,
                format!(
                    "the communicator has {members} processes: there is no shared memory across \
                     a network (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) gives each process a \
                     communicator of its own)"
                ),
            )
            .on(On::Comm(comm)));
        }
        let (handle, base) = create(std::ptr::null_mut(), size, disp_unit, info, comm, Flavor::Allocate)?;
        state::with(|mpi| {
            mpi.win(handle)?.attrs.flavor = MPI_WIN_FLAVOR_SHARED;
            Ok(())
        })?;
        out(baseptr.cast::<*mut c_void>(), base.cast())?;
        out(win, handle)
    }

    fn MPI_Win_shared_query / PMPI_Win_shared_query(
        win: c_int,
        rank: c_int,
        size: *mut isize,
        disp_unit: *mut c_int,
        baseptr: *mut c_void,
    ) {
        let (base, bytes, unit) = state::with(|mpi| {
            let on = On::Win(win);
            let entry = mpi.win(win).on(on)?;
            if entry.attrs.flavor != MPI_WIN_FLAVOR_SHARED {
                return Err(fail(MPI_ERR_RMA_FLAVOR, "not a window of MPI_Win_allocate_shared").on(on));
            }
            if rank != 0 && rank != MPI_PROC_NULL {
                return Err(fail(MPI_ERR_RANK, format!("rank {rank} is not in the window")).on(on));
            }
            Ok((entry.base, entry.attrs.size, entry.attrs.disp_unit))
        })?;
        out(size, bytes)?;
        out(disp_unit, unit)?;
        out(baseptr.cast::<*mut c_void>(), base.0.cast())
    }

    fn MPI_Win_free / PMPI_Win_free(win: *mut c_int) {
        state::free(win, "window", MPI_ERR_ARG, MPI_WIN_NULL, |mpi, handle| {
            mpi.win(handle).on(On::Win(handle))?.freeing = true;
            let freed = free(mpi, handle);
            if freed.is_err() {
                // not freed: the window is the program's as before
                if let Ok(entry) = mpi.win(handle) {
                    entry.freeing = false;
                }
            }
            freed
        })
    }

    fn MPI_Win_fence / PMPI_Win_fence(assert: c_int, win: c_int) {
        let bits = assert_bits(assert).on(On::Win(win))?;
        crate::dynamic::epoch_begins(win)?;
        synchronize(win, Some(None), |mpi, w| mpi.block_on(w.fence(bits)))
    }

    fn MPI_Win_lock / PMPI_Win_lock(lock_type: c_int, rank: c_int, assert: c_int, win: c_int) {
        let on = On::Win(win);
        let bits = assert_bits(assert).on(on)?;
        let kind = match lock_type {
            MPI_LOCK_EXCLUSIVE => LockType::Exclusive,
            MPI_LOCK_SHARED => LockType::Shared,
            other => return Err(fail(MPI_ERR_LOCKTYPE, format!("{other} is not a lock type")).on(on)),
        };
        if rank == MPI_PROC_NULL {
            return Ok(());
        }
        let target = target_of(rank).on(on)?;
        crate::dynamic::epoch_begins(win)?;
        synchronize(win, None, |mpi, w| mpi.block_on(w.lock(kind, target, bits)))
    }

    fn MPI_Win_unlock / PMPI_Win_unlock(rank: c_int, win: c_int) {
        completing_at(rank, win, |mpi, w, target| mpi.block_on(w.unlock(target)))
    }

    fn MPI_Win_lock_all / PMPI_Win_lock_all(assert: c_int, win: c_int) {
        let bits = assert_bits(assert).on(On::Win(win))?;
        crate::dynamic::epoch_begins(win)?;
        synchronize(win, None, |mpi, w| mpi.block_on(w.lock_all(bits)))
    }

    fn MPI_Win_unlock_all / PMPI_Win_unlock_all(win: c_int) {
        synchronize(win, Some(None), |mpi, w| mpi.block_on(w.unlock_all()))
    }

    fn MPI_Win_flush / PMPI_Win_flush(rank: c_int, win: c_int) {
        completing_at(rank, win, |mpi, w, target| mpi.block_on(w.flush(target)))
    }

    fn MPI_Win_flush_all / PMPI_Win_flush_all(win: c_int) {
        synchronize(win, Some(None), |mpi, w| mpi.block_on(w.flush_all()))
    }

    fn MPI_Win_flush_local / PMPI_Win_flush_local(rank: c_int, win: c_int) {
        completing_at(rank, win, |mpi, w, target| mpi.block_on(w.flush_local(target)))
    }

    fn MPI_Win_flush_local_all / PMPI_Win_flush_local_all(win: c_int) {
        synchronize(win, Some(None), |mpi, w| mpi.block_on(w.flush_local_all()))
    }

    fn MPI_Win_sync / PMPI_Win_sync(win: c_int) {
        synchronize(win, None, |mpi, w| mpi.block_on(w.sync()))
    }

    fn MPI_Win_post / PMPI_Win_post(group: c_int, assert: c_int, win: c_int) {
        let on = On::Win(win);
        let bits = assert_bits(assert).on(on)?;
        let ranks = window_ranks(win, group).on(on)?;
        synchronize(win, None, |_, w| w.post(&ranks, bits))
    }

    fn MPI_Win_start / PMPI_Win_start(group: c_int, assert: c_int, win: c_int) {
        let on = On::Win(win);
        let bits = assert_bits(assert).on(on)?;
        let ranks = window_ranks(win, group).on(on)?;
        crate::dynamic::epoch_begins(win)?;
        synchronize(win, None, |_, w| w.start(&ranks, bits))
    }

    fn MPI_Win_complete / PMPI_Win_complete(win: c_int) {
        synchronize(win, Some(None), |mpi, w| mpi.block_on(w.complete()))
    }

    fn MPI_Win_wait / PMPI_Win_wait(win: c_int) {
        synchronize(win, None, |mpi, w| mpi.block_on(w.wait()))
    }

    fn MPI_Win_test / PMPI_Win_test(win: c_int, flag: *mut c_int) {
        let mut done = false;
        synchronize(win, None, |mpi, w| {
            done = mpi.block_on(w.test())?;
            Ok(())
        })?;
        out(flag, c_int::from(done))
    }

    fn MPI_Fetch_and_op / PMPI_Fetch_and_op(
        origin_addr: *const c_void,
        result_addr: *mut c_void,
        datatype_: c_int,
        target_rank: c_int,
        target_disp: isize,
        op: c_int,
        win: c_int,
    ) {
        let on = On::Win(win);
        let op = op_of(op).on(on)?;
        let (dtype, size) = datatype(datatype_).on(on)?;
        let data = if op == Op::NoOp {
            Bytes::new()
        } else {
            Bytes::copy_from_slice(slice(origin_addr, size).on(on)?)
        };
        if result_addr.is_null() {
            return Err(fail(MPI_ERR_BUFFER, "a null result buffer").on(on));
        }
        let spec = OpSpec::contiguous(OpKind::FetchAndOp(op), dtype, target_disp as u64, 1, data);
        issue(win, target_rank, spec, Some((result_addr, vec![(0, size as u64)])), None)
    }

    fn MPI_Compare_and_swap / PMPI_Compare_and_swap(
        origin_addr: *const c_void,
        compare_addr: *const c_void,
        result_addr: *mut c_void,
        datatype_: c_int,
        target_rank: c_int,
        target_disp: isize,
        win: c_int,
    ) {
        let on = On::Win(win);
        let (dtype, size) = datatype(datatype_).on(on)?;
        let data = Bytes::copy_from_slice(slice(origin_addr, size).on(on)?);
        let compare = Bytes::copy_from_slice(slice(compare_addr, size).on(on)?);
        if result_addr.is_null() {
            return Err(fail(MPI_ERR_BUFFER, "a null result buffer").on(on));
        }
        let mut spec = OpSpec::contiguous(OpKind::CompareAndSwap, dtype, target_disp as u64, 1, data);
        spec.compare = compare;
        issue(win, target_rank, spec, Some((result_addr, vec![(0, size as u64)])), None)
    }

    fn MPI_Win_get_group / PMPI_Win_get_group(win: c_int, group: *mut c_int) {
        state::create(group, |mpi| {
            let members = mpi.win(win).on(On::Win(win))?.window.get_group();
            Ok(mpi.new_group(members))
        })
    }
}

/// A group handle's members as ranks of window `win` (a world window's ranks are the world's).
fn window_ranks(win: c_int, group: c_int) -> Res<Vec<u32>> {
    state::with(|mpi| {
        let world = members(mpi, group)?;
        let entry = mpi.win(win)?;
        let window_group = entry.window.get_group();
        world
            .iter()
            .map(|w| {
                window_group
                    .iter()
                    .position(|m| m == w)
                    .map(|p| p as u32)
                    .ok_or_else(|| {
                        fail(
                            MPI_ERR_GROUP,
                            format!("rank {w} is not in the window's group"),
                        )
                    })
            })
            .collect()
    })
}
