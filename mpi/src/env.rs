//! The environment: init and finalize, abort, time, versions, error classes and handlers,
//! `MPI_COMM_WORLD`/`MPI_COMM_SELF`, groups, info objects, memory, basic datatypes, and the
//! collectives of this phase.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::Ordering;
use std::time::Instant;

use onesided_client::Session;

use crate::abi::*;
use crate::error::{fail, On, OnObject, Res};
use crate::state::{self, Comm, Mpi, PHASE};

/// The environment `onesided mpiexec` gives each rank: the server's address(es) and the
/// rank's token.
pub const ADDR_ENV: &str = "ONESIDED_MPI_ADDR";
pub const TOKEN_ENV: &str = "ONESIDED_MPI_TOKEN";

/// Writes `value` through the program's pointer, or fails with `MPI_ERR_ARG` for a null one.
pub unsafe fn out<T>(pointer: *mut T, value: T) -> Res {
    if pointer.is_null() {
        return Err(fail(MPI_ERR_ARG, "a null pointer for an output argument"));
    }
    pointer.write(value);
    Ok(())
}

/// Copies `text` into the program's buffer of `capacity` bytes, NUL-terminated, and its length
/// to `len`.
unsafe fn out_text(text: &str, into: *mut c_char, capacity: usize, len: *mut c_int) -> Res {
    if into.is_null() {
        return Err(fail(MPI_ERR_ARG, "a null string buffer"));
    }
    let bytes = &text.as_bytes()[..text.len().min(capacity - 1)];
    std::ptr::copy_nonoverlapping(bytes.as_ptr(), into.cast::<u8>(), bytes.len());
    *into.add(bytes.len()) = 0;
    out(len, bytes.len() as c_int)
}

fn init() -> Res {
    if PHASE.load(Ordering::Acquire) != state::NOT_INITIALIZED {
        return Err(fail(MPI_ERR_OTHER, "MPI_Init was already called"));
    }
    let (Ok(addr), Ok(token)) = (std::env::var(ADDR_ENV), std::env::var(TOKEN_ENV)) else {
        eprintln!(
            "onesided MPI: {ADDR_ENV} and {TOKEN_ENV} are not set: start MPI programs with \
             `onesided mpiexec -n N PROGRAM`"
        );
        crate::error::fatal_exit(MPI_ERR_OTHER);
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("onesided-mpi")
        .enable_all()
        .build()
        .map_err(|e| fail(MPI_ERR_INTERN, format!("cannot start the runtime: {e}")))?;
    let session = runtime
        .block_on(Session::attach(addr.as_str(), &token))
        .map_err(|e| fail(MPI_ERR_OTHER, format!("cannot attach to {addr}: {e}")))?;
    let (rank, size) = (session.rank(), session.nranks());
    let mut comms = std::collections::HashMap::new();
    comms.insert(
        MPI_COMM_WORLD,
        Comm::new((0..size).collect(), "w".into(), MPI_ERRORS_ARE_FATAL),
    );
    comms.insert(
        MPI_COMM_SELF,
        Comm::new(vec![rank], format!("s{rank}"), MPI_ERRORS_ARE_FATAL),
    );
    let mpi = Mpi {
        rank,
        size,
        runtime,
        session,
        started: Instant::now(),
        comms,
        windows: Default::default(),
        next_handle: 0,
        groups: Default::default(),
        infos: Default::default(),
        allocations: Default::default(),
        requests: Default::default(),
        types: Default::default(),
        win_keyvals: Default::default(),
        comm_keyvals: Default::default(),
        user_ops: Default::default(),
        group_creations: Default::default(),
        messages: Default::default(),
        win_errhandlers: Default::default(),
    };
    state::install(mpi);
    Ok(())
}

fn finalize() -> Res {
    drop(state::lock()?);
    let Some(mut mpi) = state::take() else {
        return Ok(());
    };
    let runtime = std::mem::replace(
        &mut mpi.runtime,
        tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| fail(MPI_ERR_INTERN, e.to_string()))?,
    );
    let closed = {
        let _entered = runtime.enter();
        let windows = std::mem::take(&mut mpi.windows);
        for (_, mut win) in windows {
            let _ = win.push_stores();
            if win.allocated && !win.base.0.is_null() {
                unsafe { libc::free(win.base.0.cast()) };
            }
        }
        mpi.comms.clear();
        runtime.block_on(mpi.session.clone().close())
    };
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    closed.map_err(Into::into)
}

pub(crate) fn comm_check(mpi: &Mpi, comm: i32) -> Res<Vec<u32>> {
    mpi.comm_ranks(comm).on(On::Comm(MPI_COMM_WORLD))
}

/// Core's datatype and the element size for a basic datatype handle.
pub fn datatype(handle: i32) -> Res<(onesided_core::Datatype, usize)> {
    let Some((name, _, size)) = basic(handle) else {
        return Err(fail(
            MPI_ERR_TYPE,
            format!(
                "{handle:#x} is not a basic datatype (derived datatypes are not supported yet)"
            ),
        ));
    };
    match crate::abi::datatype(handle) {
        Some(dtype) => Ok((dtype, size)),
        None => Err(fail(MPI_ERR_TYPE, format!("{name} is not supported yet"))),
    }
}

/// A count argument, checked: not negative.
pub fn count_of(count: c_int) -> Res<u64> {
    u64::try_from(count).map_err(|_| fail(MPI_ERR_COUNT, format!("count {count} is negative")))
}

/// `count` elements of `size` bytes, checked.
pub fn bytes_of(count: c_int, size: usize) -> Res<usize> {
    Ok(count_of(count)? as usize * size)
}

/// The program's array of `len` elements at `pointer` (empty for 0); a null `pointer` to
/// elements is an error of `class`, "a null `what`".
pub unsafe fn c_array<'a, T>(
    pointer: *const T,
    len: usize,
    class: c_int,
    what: &str,
) -> Res<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if pointer.is_null() {
        return Err(fail(class, format!("a null {what}")));
    }
    Ok(std::slice::from_raw_parts(pointer, len))
}

/// The program's buffer of `len` bytes (empty for 0).
pub unsafe fn slice<'a>(pointer: *const c_void, len: usize) -> Res<&'a [u8]> {
    c_array(pointer.cast::<u8>(), len, MPI_ERR_BUFFER, "buffer")
}

pub(crate) fn root_of(mpi: &Mpi, comm: i32, root: c_int) -> Res<u32> {
    if root < 0 || root as usize >= mpi.comm(comm)?.ranks.len() {
        return Err(fail(
            MPI_ERR_ROOT,
            format!("root {root} is not a rank of the communicator"),
        ));
    }
    Ok(root as u32)
}

/// `MPI_Wtime`: seconds since the process initialized (`MPI_WTIME_IS_GLOBAL` is false).
#[no_mangle]
pub extern "C" fn PMPI_Wtime() -> f64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// `MPI_Wtime`: as `PMPI_Wtime`.
#[no_mangle]
pub extern "C" fn MPI_Wtime() -> f64 {
    PMPI_Wtime()
}

/// `MPI_Wtick`: a nanosecond clock.
#[no_mangle]
pub extern "C" fn PMPI_Wtick() -> f64 {
    1e-9
}

/// `MPI_Wtick`: as `PMPI_Wtick`.
#[no_mangle]
pub extern "C" fn MPI_Wtick() -> f64 {
    PMPI_Wtick()
}

export! {
    fn MPI_Init / PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) {
        init()
    }

    fn MPI_Init_thread / PMPI_Init_thread(
        _argc: *mut c_int,
        _argv: *mut *mut *mut c_char,
        required: c_int,
        provided: *mut c_int,
    ) {
        init()?;
        out(provided, required.min(MPI_THREAD_SERIALIZED))
    }

    fn MPI_Finalize / PMPI_Finalize() {
        finalize()
    }

    fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) {
        out(flag, c_int::from(PHASE.load(Ordering::Acquire) != state::NOT_INITIALIZED))
    }

    fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) {
        out(flag, c_int::from(PHASE.load(Ordering::Acquire) == state::FINALIZED))
    }

    fn MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) {
        out(provided, MPI_THREAD_SERIALIZED)
    }

    fn MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) {
        out(flag, 1)
    }

    fn MPI_Abort / PMPI_Abort(_comm: c_int, errorcode: c_int) {
        eprintln!(
            "onesided MPI: rank {}: MPI_Abort with error code {errorcode}: the job ends",
            state::rank_for_messages()
        );
        crate::error::fatal_exit(errorcode)
    }

    fn MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) {
        out(version, MPI_VERSION)?;
        out(subversion, MPI_SUBVERSION)
    }

    fn MPI_Get_library_version / PMPI_Get_library_version(version: *mut c_char, len: *mut c_int) {
        let text = format!(
            "onesided {} (MPICH ABI, libmpich.so.12): MPI one-sided communication as a network service",
            env!("CARGO_PKG_VERSION")
        );
        out_text(&text, version, MPI_MAX_LIBRARY_VERSION_STRING as usize, len)
    }

    fn MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, len: *mut c_int) {
        let mut buffer = [0u8; 256];
        let host = if libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) == 0 {
            CStr::from_bytes_until_nul(&buffer)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            "localhost".into()
        };
        out_text(&host, name, MPI_MAX_PROCESSOR_NAME as usize, len)
    }

    fn MPI_Error_class / PMPI_Error_class(code: c_int, class: *mut c_int) {
        // every code this library returns is its class
        if !(0..=MPI_ERR_LASTCODE).contains(&code) {
            return Err(fail(MPI_ERR_ARG, format!("{code} is not an error code")));
        }
        out(class, code)
    }

    fn MPI_Error_string / PMPI_Error_string(code: c_int, string: *mut c_char, len: *mut c_int) {
        let (name, text) = class_text(code);
        out_text(&format!("{name}: {text}"), string, MPI_MAX_ERROR_STRING as usize, len)
    }

    /// The rank in the communicator (in its local group, for an intercommunicator).
    fn MPI_Comm_rank / PMPI_Comm_rank(comm: c_int, rank: *mut c_int) {
        let me = state::with(|mpi| {
            let me = mpi.rank;
            let ranks = &mpi.any_comm(comm).on(On::Comm(MPI_COMM_WORLD))?.ranks;
            Ok(ranks.iter().position(|&r| r == me).unwrap_or(0))
        })?;
        out(rank, me as c_int)
    }

    /// The communicator's size (its local group's, for an intercommunicator).
    fn MPI_Comm_size / PMPI_Comm_size(comm: c_int, size: *mut c_int) {
        let n = state::with(|mpi| Ok(mpi.any_comm(comm).on(On::Comm(MPI_COMM_WORLD))?.ranks.len()))?;
        out(size, n as c_int)
    }

    fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: c_int, errhandler: c_int) {
        state::with(|mpi| {
            comm_check(mpi, comm)?;
            let user = mpi.win_errhandlers.contains_key(&errhandler);
            if errhandler != MPI_ERRORS_ARE_FATAL && errhandler != MPI_ERRORS_RETURN && !user {
                return Err(fail(MPI_ERR_ARG, format!("{errhandler:#x} is not an error handler"))
                    .on(On::Comm(comm)));
            }
            mpi.comm_mut(comm)?.errhandler = errhandler;
            Ok(())
        })
    }

    fn MPI_Comm_create_errhandler / PMPI_Comm_create_errhandler(
        function: Option<state::WinErrhandler>,
        errhandler: *mut c_int,
    ) {
        crate::win_attributes::create_errhandler(function, errhandler)
    }

    fn MPI_Comm_call_errhandler / PMPI_Comm_call_errhandler(comm: c_int, errorcode: c_int) {
        let handler = state::with(|mpi| Ok(mpi.comm(comm).on(On::Comm(comm))?.errhandler))?;
        crate::win_attributes::call_errhandler(handler, On::Comm(comm), errorcode)
    }

    fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: c_int, errhandler: *mut c_int) {
        let handler = state::with(|mpi| {
            comm_check(mpi, comm)?;
            Ok(mpi.comm(comm)?.errhandler)
        })?;
        out(errhandler, handler)
    }

    fn MPI_Errhandler_free / PMPI_Errhandler_free(errhandler: *mut c_int) {
        // a handler still set on a window stays usable there (freed with the process)
        out(errhandler, MPI_ERRHANDLER_NULL)
    }

    fn MPI_Comm_group / PMPI_Comm_group(comm: c_int, group: *mut c_int) {
        state::create(group, |mpi| {
            let ranks = comm_check(mpi, comm)?;
            Ok(mpi.new_group(ranks))
        })
    }

    fn MPI_Group_incl / PMPI_Group_incl(group: c_int, n: c_int, ranks: *const c_int, newgroup: *mut c_int) {
        state::create(newgroup, |mpi| {
            let members = group_members(mpi, group)?;
            let picked = slice(ranks.cast(), bytes_of(n, 4)?)?;
            let mut new = Vec::new();
            for chunk in picked.chunks_exact(4) {
                let r = i32::from_ne_bytes(chunk.try_into().unwrap_or_default());
                let member = usize::try_from(r).ok().and_then(|r| members.get(r)).copied();
                let Some(member) = member else {
                    return Err(fail(MPI_ERR_RANK, format!("rank {r} is not in the group")));
                };
                if new.contains(&member) {
                    return Err(fail(MPI_ERR_RANK, format!("rank {r} is named twice")));
                }
                new.push(member);
            }
            Ok(group_or_empty(mpi, new))
        })
    }

    fn MPI_Group_excl / PMPI_Group_excl(group: c_int, n: c_int, ranks: *const c_int, newgroup: *mut c_int) {
        state::create(newgroup, |mpi| {
            let members = group_members(mpi, group)?;
            let excluded = slice(ranks.cast(), bytes_of(n, 4)?)?;
            let excluded: Vec<i32> = excluded
                .chunks_exact(4)
                .map(|c| i32::from_ne_bytes(c.try_into().unwrap_or_default()))
                .collect();
            if let Some(bad) = excluded.iter().find(|&&r| r < 0 || r as usize >= members.len()) {
                return Err(fail(MPI_ERR_RANK, format!("rank {bad} is not in the group")));
            }
            let kept = members
                .iter()
                .enumerate()
                .filter(|(i, _)| !excluded.contains(&(*i as i32)))
                .map(|(_, &m)| m)
                .collect();
            Ok(group_or_empty(mpi, kept))
        })
    }

    fn MPI_Group_size / PMPI_Group_size(group: c_int, size: *mut c_int) {
        let n = state::with(|mpi| Ok(group_members(mpi, group)?.len()))?;
        out(size, n as c_int)
    }

    fn MPI_Group_rank / PMPI_Group_rank(group: c_int, rank: *mut c_int) {
        let r = state::with(|mpi| {
            let me = mpi.rank;
            Ok(group_members(mpi, group)?
                .iter()
                .position(|&m| m == me)
                .map_or(MPI_UNDEFINED, |p| p as c_int))
        })?;
        out(rank, r)
    }

    fn MPI_Group_free / PMPI_Group_free(group: *mut c_int) {
        state::free(group, "group", MPI_ERR_ARG, MPI_GROUP_NULL, |mpi, handle| {
            if handle != MPI_GROUP_EMPTY && mpi.groups.remove(&handle).is_none() {
                return Err(fail(MPI_ERR_GROUP, format!("{handle:#x} is not a group")));
            }
            Ok(())
        })
    }

    fn MPI_Info_create / PMPI_Info_create(info: *mut c_int) {
        state::create(info, |mpi| {
            Ok(mpi.new_info(Vec::new()))
        })
    }

    fn MPI_Info_set / PMPI_Info_set(info: c_int, key: *const c_char, value: *const c_char) {
        if key.is_null() || value.is_null() {
            return Err(fail(MPI_ERR_INFO_KEY, "a null key or value"));
        }
        let key = CStr::from_ptr(key).to_string_lossy().into_owned();
        let value = CStr::from_ptr(value).to_string_lossy().into_owned();
        state::with(|mpi| {
            let pairs = mpi
                .infos
                .get_mut(&info)
                .ok_or_else(|| fail(MPI_ERR_INFO, format!("{info:#x} is not an info object")))?;
            pairs.retain(|(k, _)| *k != key);
            pairs.push((key, value));
            Ok(())
        })
    }

    fn MPI_Info_get / PMPI_Info_get(
        info: c_int,
        key: *const c_char,
        valuelen: c_int,
        value: *mut c_char,
        flag: *mut c_int,
    ) {
        if key.is_null() {
            return Err(fail(MPI_ERR_INFO_KEY, "a null key"));
        }
        let key = CStr::from_ptr(key).to_string_lossy().into_owned();
        let found = state::with(|mpi| {
            let pairs = mpi
                .infos
                .get(&info)
                .ok_or_else(|| fail(MPI_ERR_INFO, format!("{info:#x} is not an info object")))?;
            Ok(pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()))
        })?;
        match found {
            Some(text) => {
                let mut len = 0;
                out_text(&text, value, valuelen.max(0) as usize + 1, &mut len)?;
                out(flag, 1)
            }
            None => out(flag, 0),
        }
    }

    fn MPI_Info_free / PMPI_Info_free(info: *mut c_int) {
        state::free(info, "info", MPI_ERR_ARG, MPI_INFO_NULL, |mpi, handle| {
            state::remove(&mut mpi.infos, handle, || {
                fail(MPI_ERR_INFO, format!("{handle:#x} is not an info object"))
            })
        })
    }

    fn MPI_Alloc_mem / PMPI_Alloc_mem(size: isize, _info: c_int, baseptr: *mut c_void) {
        if size < 0 {
            return Err(fail(MPI_ERR_SIZE, format!("size {size} is negative")));
        }
        let memory = libc::calloc(1, (size as usize).max(1));
        if memory.is_null() {
            return Err(fail(MPI_ERR_NO_MEM, format!("cannot allocate {size} bytes")));
        }
        state::with(|mpi| {
            mpi.allocations.insert(memory as usize, size as usize);
            Ok(())
        })?;
        out(baseptr.cast::<*mut c_void>(), memory)
    }

    fn MPI_Free_mem / PMPI_Free_mem(base: *mut c_void) {
        state::with(|mpi| {
            let Some(len) = mpi.allocations.remove(&(base as usize)) else {
                return Err(fail(MPI_ERR_BASE, "not memory of MPI_Alloc_mem"));
            };
            // a window over this memory (freed before the window, as MPICH's tests do) is no
            // longer the program's memory: it is not read or written again
            let freed = base as usize..(base as usize).saturating_add(len);
            for win in mpi.windows.values_mut() {
                if freed.contains(&(win.base.0 as usize)) {
                    win.base = crate::state::CPtr(std::ptr::null_mut());
                    win.size = 0;
                    win.shadow = Vec::new();
                }
            }
            Ok(())
        })?;
        libc::free(base);
        Ok(())
    }

    fn MPI_Barrier / PMPI_Barrier(comm: c_int) {
        state::with(|mpi| {
            comm_check(mpi, comm)?;
            mpi.barrier(comm).on(On::Comm(comm))
        })
    }

    fn MPI_Bcast / PMPI_Bcast(buffer: *mut c_void, count: c_int, datatype: c_int, root: c_int, comm: c_int) {
        state::with(|mpi| {
            let on = On::Comm(comm);
            comm_check(mpi, comm)?;
            let (_, size) = self::datatype(datatype).on(on)?;
            let len = bytes_of(count, size).on(on)?;
            let root = root_of(mpi, comm, root).on(on)?;
            if len == 0 {
                return Ok(());
            }
            slice(buffer, len).on(on)?;
            let data = std::slice::from_raw_parts_mut(buffer.cast::<u8>(), len);
            mpi.bcast(comm, data, root).on(on)
        })
    }

    fn MPI_Comm_dup / PMPI_Comm_dup(comm: c_int, newcomm: *mut c_int) {
        state::create(newcomm, |mpi| {
            mpi.new_child_comm(comm, "", |parent| Some(parent.ranks.clone()))
        })
    }

    fn MPI_Comm_split / PMPI_Comm_split(comm: c_int, color: c_int, key: c_int, newcomm: *mut c_int) {
        state::create(newcomm, |mpi| {
            let on = On::Comm(comm);
            if color < 0 && color != MPI_UNDEFINED {
                return Err(fail(MPI_ERR_ARG, format!("color {color} is negative")).on(on));
            }
            let mut mine = color.to_ne_bytes().to_vec();
            mine.extend_from_slice(&key.to_ne_bytes());
            let all = mpi.allgather(comm, &mine).on(on)?;
            mpi.new_child_comm(comm, &format!(".{color}"), |parent| {
                if color == MPI_UNDEFINED {
                    return None;
                }
                let word = |b: &[u8]| i32::from_ne_bytes(b.try_into().unwrap_or_default());
                let mut members: Vec<(i32, usize)> = all
                    .iter()
                    .enumerate()
                    .filter(|(_, entry)| word(&entry[0..4]) == color)
                    .map(|(r, entry)| (word(&entry[4..8]), r))
                    .collect();
                members.sort();
                Some(members.iter().map(|&(_, r)| parent.ranks[r]).collect())
            })
            .on(on)
        })
    }

    /// Each process gets a communicator of its own for `MPI_COMM_TYPE_SHARED`: processes of a
    /// job share no memory across the network (`MPI_UNDEFINED`: `MPI_COMM_NULL`).
    fn MPI_Comm_split_type / PMPI_Comm_split_type(
        comm: c_int,
        split_type: c_int,
        _key: c_int,
        _info: c_int,
        newcomm: *mut c_int,
    ) {
        state::create(newcomm, |mpi| {
            let on = On::Comm(comm);
            if split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_UNDEFINED {
                return Err(fail(MPI_ERR_ARG, format!("split type {split_type} is not MPI_COMM_TYPE_SHARED")).on(on));
            }
            let me = mpi.rank;
            let shared = split_type != MPI_UNDEFINED;
            mpi.new_child_comm(comm, &format!(".t{me}"), |_| shared.then(|| vec![me]))
                .on(on)
        })
    }

    fn MPI_Comm_create / PMPI_Comm_create(comm: c_int, group: c_int, newcomm: *mut c_int) {
        state::create(newcomm, |mpi| {
            let members = group_members(mpi, group).on(On::Comm(comm))?;
            let member = members.contains(&mpi.rank);
            mpi.new_child_comm(comm, "", |_| member.then_some(members))
        })
    }

    fn MPI_Comm_free / PMPI_Comm_free(comm: *mut c_int) {
        if comm.is_null() {
            return Err(fail(MPI_ERR_ARG, "a null communicator pointer"));
        }
        let handle = *comm;
        let (attrs, keyvals) = state::with(|mpi| {
            if handle == MPI_COMM_WORLD || handle == MPI_COMM_SELF {
                return Err(fail(MPI_ERR_COMM, "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed"));
            }
            let entry = mpi.comms.remove(&handle).ok_or_else(|| {
                fail(MPI_ERR_COMM, format!("{handle:#x} is not a communicator"))
            })?;
            let keyvals: Vec<_> = mpi.comm_keyvals.iter().map(|(k, c)| (*k, *c)).collect();
            Ok((entry.attrs, keyvals))
        })?;
        // outside the state's lock: a delete function may call MPI
        crate::attributes::delete_all(handle, attrs, &keyvals);
        out(comm, MPI_COMM_NULL)
    }

    fn MPI_Comm_compare / PMPI_Comm_compare(comm1: c_int, comm2: c_int, result: *mut c_int) {
        let verdict = state::with(|mpi| {
            let (a, b) = (mpi.comm_ranks(comm1)?, mpi.comm_ranks(comm2)?);
            let mut sorted = (a.clone(), b.clone());
            sorted.0.sort_unstable();
            sorted.1.sort_unstable();
            Ok(if comm1 == comm2 {
                MPI_IDENT
            } else if a == b {
                MPI_CONGRUENT
            } else if sorted.0 == sorted.1 {
                MPI_SIMILAR
            } else {
                MPI_UNEQUAL
            })
        })?;
        out(result, verdict)
    }

    fn MPI_Comm_test_inter / PMPI_Comm_test_inter(comm: c_int, flag: *mut c_int) {
        let inter = state::with(|mpi| Ok(mpi.any_comm(comm)?.remote.is_some()))?;
        out(flag, c_int::from(inter))
    }

    fn MPI_Reduce / PMPI_Reduce(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        root: c_int,
        comm: c_int,
    ) {
        reduce(Reduction { sendbuf, recvbuf, count, datatype, op, root: Some(root), comm })
    }

    fn MPI_Allreduce / PMPI_Allreduce(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: c_int,
        op: c_int,
        comm: c_int,
    ) {
        reduce(Reduction { sendbuf, recvbuf, count, datatype, op, root: None, comm })
    }
}

/// The arguments of `MPI_Reduce` (`root`: `Some`) and `MPI_Allreduce` (`None`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reduction {
    pub sendbuf: *const c_void,
    pub recvbuf: *mut c_void,
    pub count: c_int,
    pub datatype: c_int,
    pub op: c_int,
    pub root: Option<c_int>,
    pub comm: c_int,
}

/// This rank's part in a reduction: the result's length in bytes, the root's rank in the
/// communicator (`None`: every rank receives), whether this rank receives the result, and
/// what it contributes.
pub(crate) struct Part {
    pub len: usize,
    pub root: Option<u32>,
    pub receives: bool,
    pub contribution: Vec<u8>,
}

impl Reduction {
    /// This rank's part in the reduction of elements of `size` bytes; its contribution is the
    /// send buffer's bytes, or the receive buffer's for `MPI_IN_PLACE`.
    pub(crate) unsafe fn part(&self, mpi: &Mpi, size: usize) -> Res<Part> {
        let len = bytes_of(self.count, size)?;
        let root = self.root.map(|r| root_of(mpi, self.comm, r)).transpose()?;
        let me = mpi.comm_rank(self.comm)?;
        let source = if self.sendbuf as isize == MPI_IN_PLACE {
            self.recvbuf.cast_const()
        } else {
            self.sendbuf
        };
        Ok(Part {
            len,
            root,
            receives: root.is_none_or(|r| r == me),
            contribution: slice(source, len)?.to_vec(),
        })
    }

    /// Writes the result's `len` bytes into the receive buffer.
    pub(crate) unsafe fn deliver(&self, result: &[u8], len: usize) -> Res {
        if len > 0 {
            if self.recvbuf.is_null() {
                return Err(fail(MPI_ERR_BUFFER, "a null receive buffer").on(On::Comm(self.comm)));
            }
            std::ptr::copy_nonoverlapping(result.as_ptr(), self.recvbuf.cast::<u8>(), len);
        }
        Ok(())
    }
}

unsafe fn reduce(reduction: Reduction) -> Res {
    let Reduction {
        datatype, op, comm, ..
    } = reduction;
    if crate::abi::op(op).is_none() && crate::ops::is_user_op(op) {
        return crate::ops::reduce(reduction);
    }
    state::with(|mpi| {
        let on = On::Comm(comm);
        comm_check(mpi, comm)?;
        let (dtype, size) = self::datatype(datatype).on(on)?;
        let Some(op) = crate::abi::op(op) else {
            return Err(fail(MPI_ERR_OP, format!("{op:#x} is not an op")).on(on));
        };
        let part = reduction.part(mpi, size).on(on)?;
        let result = mpi
            .reduce(comm, &part.contribution, dtype, op, part.root)
            .on(on)?;
        if let (true, Some(result)) = (part.receives, result) {
            reduction.deliver(&result, part.len)?;
        }
        Ok(())
    })
}

pub(crate) fn group_members(mpi: &Mpi, group: i32) -> Res<Vec<u32>> {
    if group == MPI_GROUP_EMPTY {
        return Ok(Vec::new());
    }
    mpi.groups
        .get(&group)
        .cloned()
        .ok_or_else(|| fail(MPI_ERR_GROUP, format!("{group:#x} is not a group")))
}

/// The members of a group handle, as world ranks.
pub fn members(mpi: &Mpi, group: i32) -> Res<Vec<u32>> {
    group_members(mpi, group)
}

/// The group of `members`: `MPI_GROUP_EMPTY` for none, else a new one.
pub(crate) fn group_or_empty(mpi: &mut Mpi, members: Vec<u32>) -> i32 {
    if members.is_empty() {
        return MPI_GROUP_EMPTY;
    }
    mpi.new_group(members)
}
