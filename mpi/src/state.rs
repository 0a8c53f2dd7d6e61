//! The process's MPI state: the session of this rank, the runtime its calls run on, and the
//! handle tables (windows, groups, info objects) that map MPICH's integer handles to the
//! client's objects. One mutex guards it: MPI calls of one process are serialized
//! (`MPI_THREAD_SERIALIZED` is the most `MPI_Init_thread` provides).

use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use onesided_client::{Flavor, MemoryModel, Pending, Session, Window};

use crate::abi::*;
use crate::error::{fail, Fail, On, Res};

/// Not initialized yet, initialized, finalized.
pub const NOT_INITIALIZED: u8 = 0;
pub const INITIALIZED: u8 = 1;
pub const FINALIZED: u8 = 2;

pub static PHASE: AtomicU8 = AtomicU8::new(NOT_INITIALIZED);
/// This rank, for messages (`u32::MAX` before `MPI_Init`).
static RANK: AtomicU32 = AtomicU32::new(u32::MAX);

static STATE: Mutex<Option<Mpi>> = Mutex::new(None);

/// A raw pointer into the C program's memory, kept across calls: the program promises it
/// stays valid (the window's memory until `MPI_Win_free`, a get's origin buffer until the
/// operation completes), as MPI requires.
#[derive(Clone, Copy, Debug)]
pub struct CPtr(pub *mut u8);
// SAFETY: only dereferenced under the state's mutex, in the calls MPI lets touch it.
unsafe impl Send for CPtr {}

/// A get-like operation's answer still to be written into the program's buffer.
pub struct Landing {
    pub target: u32,
    pub pending: Pending<bytes::Bytes>,
    pub into: CPtr,
    /// Where in the buffer the packed result goes (byte offset, length).
    pub runs: Vec<(i64, u64)>,
    /// Set once the result was written (by the completing call or by the request's wait,
    /// whichever comes first: the other writes nothing, the program may reuse the buffer).
    pub landed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for Landing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Landing")
            .field("target", &self.target)
            .field("runs", &self.runs)
            .finish_non_exhaustive()
    }
}

/// One window handle: the client's window and the C memory that is its private copy.
#[derive(Debug)]
pub struct Win {
    pub window: Window,
    /// The program's memory (`base` of `MPI_Win_create`, or what `MPI_Win_allocate` gave).
    pub base: CPtr,
    pub size: usize,
    /// The private copy's bytes as this library last saw them in `base`: a byte of `base`
    /// that differs was stored by the program since (module `sync`).
    pub shadow: Vec<u8>,
    /// `base` was allocated here (`MPI_Win_allocate`) and is freed with the window.
    pub allocated: bool,
    pub comm: i32,
    pub errhandler: i32,
    /// Where `MPI_Win_get_attr` points for size, disp_unit, flavor and model (stable
    /// addresses: boxed).
    pub attrs: Box<WinAttrs>,
    pub landings: Vec<Landing>,
    /// Attributes set with `MPI_Win_set_attr` (keyval, value), in the order they were set.
    pub user_attrs: Vec<(i32, CPtr)>,
    /// A dynamic window's regions of the program's memory attached here (module `dynamic`):
    /// each is private copy too, at the offset of the address the service gave it.
    pub regions: Vec<crate::dynamic::Region>,
    /// A dynamic window's directory of every rank's regions (module `dynamic`); `None` for
    /// the other flavors.
    pub directory: Option<crate::dynamic::Directory>,
    /// `MPI_Win_free` has begun: the window's memory is no longer met at other calls
    /// ([`Mpi::settle`]): programs free it before the window (MPICH's tests do), and reading
    /// or writing it then would read or write what the allocator gave to another.
    pub freeing: bool,
}

#[derive(Debug)]
#[repr(C)]
pub struct WinAttrs {
    pub size: isize,
    pub disp_unit: i32,
    pub flavor: i32,
    pub model: i32,
}

impl WinAttrs {
    /// The attributes of a window of `size` bytes, `disp_unit`, `flavor` and `model`, as MPI
    /// names them (`MPI_WIN_FLAVOR_*`, `MPI_WIN_UNIFIED`, `MPI_WIN_SEPARATE`).
    pub fn of(size: usize, disp_unit: i32, flavor: Flavor, model: MemoryModel) -> Self {
        WinAttrs {
            size: size as isize,
            disp_unit,
            flavor: match flavor {
                Flavor::Allocate => MPI_WIN_FLAVOR_ALLOCATE,
                Flavor::Dynamic => MPI_WIN_FLAVOR_DYNAMIC,
                Flavor::Create => MPI_WIN_FLAVOR_CREATE,
            },
            model: match model {
                MemoryModel::Unified => MPI_WIN_UNIFIED,
                MemoryModel::Separate => MPI_WIN_SEPARATE,
            },
        }
    }
}

/// Everything an initialized process holds.
#[derive(Debug)]
pub struct Mpi {
    pub runtime: tokio::runtime::Runtime,
    pub session: Session,
    pub rank: u32,
    pub size: u32,
    pub started: Instant,
    pub comms: HashMap<i32, Comm>,
    pub windows: HashMap<i32, Win>,
    pub next_handle: i32,
    /// Groups as lists of world ranks.
    pub groups: HashMap<i32, Vec<u32>>,
    pub infos: HashMap<i32, Vec<(String, String)>>,
    /// Memory of `MPI_Alloc_mem`, freed by `MPI_Free_mem`.
    pub allocations: HashMap<usize, usize>,
    /// The requests of request-based RMA calls.
    pub requests: HashMap<i32, Req>,
    /// Derived datatypes.
    pub types: HashMap<i32, crate::datatype::Dt>,
    /// Window keyvals.
    pub win_keyvals: Keyvals,
    /// Messages taken by `MPI_Mprobe`/`MPI_Improbe` and not yet received (`MPI_Mrecv`): the
    /// message handle to the data and its envelope.
    pub messages: HashMap<i32, (bytes::Bytes, crate::p2p::Envelope)>,
    /// `MPI_Comm_create_group` calls so far, by parent, tag and members: the members of a new
    /// communicator call it in the same order, so they agree on its id (module `groups`).
    pub group_creations: HashMap<String, u64>,
    /// User-defined reduction operations (module `ops`).
    pub user_ops: HashMap<i32, crate::ops::UserOp>,
    /// Communicator keyvals (module `attributes`).
    pub comm_keyvals: Keyvals,
    /// User error handlers of windows and communicators (`MPI_Win_create_errhandler`,
    /// `MPI_Comm_create_errhandler`: the same C signature).
    pub win_errhandlers: HashMap<i32, WinErrhandler>,
}

/// A keyval's delete callback and its extra state.
pub type Callback = (Option<WinDelete>, CPtr);
/// Keyvals (of communicators or of windows).
pub type Keyvals = HashMap<i32, Callback>;

/// `MPI_Win_delete_attr_function`.
pub type WinDelete =
    unsafe extern "C" fn(i32, i32, *mut std::ffi::c_void, *mut std::ffi::c_void) -> i32;
/// `MPI_Win_errhandler_function` (C-variadic).
pub type WinErrhandler = unsafe extern "C" fn(*mut i32, *mut i32, ...);

/// A request of `MPI_Rput`, `MPI_Rget`, …: complete when its operation's answer arrived (at
/// once for none: a call on `MPI_PROC_NULL`, or an rput/raccumulate, whose origin buffer was
/// copied), its result then written into the program's buffer. Or of `MPI_Irecv`: complete
/// when its message came (`receiving`), or of `MPI_Isend`: complete at once (the service
/// holds the message).
#[derive(Debug)]
pub struct Req {
    pub pending: Option<Pending<bytes::Bytes>>,
    pub landing: Option<(CPtr, Vec<(i64, u64)>)>,
    pub landed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub receiving: Option<crate::p2p::Receiving>,
    /// What the status of a request complete from the start says (`MPI_Imrecv`'s message).
    pub envelope: Option<crate::p2p::Envelope>,
}

/// A communicator: its members (world ranks, in communicator rank order) and what its
/// members count alike, so that they agree on the names of what they create over it.
#[derive(Debug)]
pub struct Comm {
    pub ranks: Vec<u32>,
    /// Its name among the world's communicators: `w` (the world), `s<rank>` (self), and
    /// `<parent>.<n>[.<color>]` for the n-th communicator made from `parent`.
    pub id: String,
    /// Communicators made from it so far.
    pub children: u64,
    /// Windows created over it so far.
    pub windows: u64,
    pub errhandler: i32,
    /// Attributes set with `MPI_Comm_set_attr` (keyval, value), in the order they were set.
    pub attrs: Vec<(i32, CPtr)>,
    /// An intercommunicator's remote group (world ranks, in its rank order); `ranks` is then
    /// the local group (module `intercomm`).
    pub remote: Option<Vec<u32>>,
}

impl Comm {
    pub fn new(ranks: Vec<u32>, id: String, errhandler: i32) -> Self {
        Comm {
            ranks,
            id,
            children: 0,
            windows: 0,
            errhandler,
            attrs: Vec::new(),
            remote: None,
        }
    }

    /// The name of the next window created over it.
    pub fn next_window_name(&mut self) -> String {
        self.windows += 1;
        format!("mpi-{}-w{}", self.id, self.windows)
    }
}

impl Mpi {
    /// A new handle of `kind` (MPICH's handle kind bits, `0x?4000000`), unique in the process.
    /// It is an "indirect" handle in MPICH's terms (top bits `11`): MPICH's own predefined
    /// objects are "builtin" (`01`) or "direct" (`10`, the pair datatypes `0x8c000000`…), so
    /// none of ours can ever be mistaken for one of them.
    pub fn handle(&mut self, kind: u32) -> i32 {
        self.next_handle += 1;
        (kind | (0xc000_0000 | (self.next_handle as u32 & 0x03ff_ffff))) as i32
    }

    /// Files a new communicator, returning its handle.
    pub fn new_comm(&mut self, comm: Comm) -> i32 {
        let handle = self.handle(MPI_COMM_NULL as u32);
        self.comms.insert(handle, comm);
        handle
    }

    /// Files the communicator that a call every member of `comm` makes (`MPI_Comm_dup`,
    /// `_split`, `_split_type`, `_create`) derives from it, returning its handle. Each member
    /// counts it among `comm`'s children, so all of them name it alike,
    /// `<parent>.<n><suffix>`; its members are what `members` picks from the parent, `None`
    /// where this process is not one of them (`MPI_COMM_NULL`). It has the parent's error
    /// handler.
    pub fn new_child_comm(
        &mut self,
        comm: i32,
        suffix: &str,
        members: impl FnOnce(&Comm) -> Option<Vec<u32>>,
    ) -> Res<i32> {
        let parent = self.comm_mut(comm)?;
        parent.children += 1;
        let Some(ranks) = members(parent) else {
            return Ok(MPI_COMM_NULL);
        };
        let id = format!("{}.{}{suffix}", parent.id, parent.children);
        let errhandler = parent.errhandler;
        Ok(self.new_comm(Comm::new(ranks, id, errhandler)))
    }

    /// Files a new group of world ranks, returning its handle.
    pub fn new_group(&mut self, ranks: Vec<u32>) -> i32 {
        let handle = self.handle(MPI_GROUP_NULL as u32);
        self.groups.insert(handle, ranks);
        handle
    }

    /// Files a new info object, returning its handle.
    pub fn new_info(&mut self, pairs: Vec<(String, String)>) -> i32 {
        let handle = self.handle(MPI_INFO_NULL as u32);
        self.infos.insert(handle, pairs);
        handle
    }

    /// Files a new derived datatype, returning its handle.
    pub fn new_type(&mut self, made: crate::datatype::Dt) -> i32 {
        let handle = self.handle(MPI_DATATYPE_NULL as u32);
        self.types.insert(handle, made);
        handle
    }

    /// A request complete from the start (`MPI_Isend`, whose message the service holds).
    pub fn completed_request(&mut self) -> i32 {
        self.receive_request(None)
    }

    /// The request of `MPI_Irecv` (`None`: from `MPI_PROC_NULL`, complete at once).
    pub fn receive_request(&mut self, receiving: Option<crate::p2p::Receiving>) -> i32 {
        let id = self.handle(MPI_REQUEST_NULL as u32);
        let req = Req {
            pending: None,
            landing: None,
            landed: Default::default(),
            receiving,
            envelope: None,
        };
        self.requests.insert(id, req);
        id
    }

    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    pub fn win(&mut self, handle: i32) -> Res<&mut Win> {
        self.windows
            .get_mut(&handle)
            .ok_or_else(|| fail(MPI_ERR_WIN, format!("{handle:#x} is not a window")))
    }

    /// The world ranks of a communicator, in its rank order.
    pub fn comm_ranks(&self, comm: i32) -> Res<Vec<u32>> {
        Ok(self.comm(comm)?.ranks.clone())
    }

    /// An intracommunicator: every call but a few (module `intercomm`) works on those only.
    pub fn comm(&self, comm: i32) -> Res<&Comm> {
        let entry = self.any_comm(comm)?;
        if entry.remote.is_some() {
            return Err(on_an_intercomm(comm));
        }
        Ok(entry)
    }

    pub fn comm_mut(&mut self, comm: i32) -> Res<&mut Comm> {
        let entry = self.any_comm_mut(comm)?;
        if entry.remote.is_some() {
            return Err(on_an_intercomm(comm));
        }
        Ok(entry)
    }

    /// A communicator, intra or inter.
    pub fn any_comm(&self, comm: i32) -> Res<&Comm> {
        self.comms.get(&comm).ok_or_else(|| not_a_comm(comm))
    }

    pub fn any_comm_mut(&mut self, comm: i32) -> Res<&mut Comm> {
        self.comms.get_mut(&comm).ok_or_else(|| not_a_comm(comm))
    }

    /// This process's rank in `comm`.
    pub fn comm_rank(&self, comm: i32) -> Res<u32> {
        let me = self.rank;
        Ok(self
            .comm(comm)?
            .ranks
            .iter()
            .position(|&r| r == me)
            .unwrap_or(0) as u32)
    }
}

fn on_an_intercomm(comm: i32) -> Fail {
    fail(
        MPI_ERR_UNSUPPORTED_OPERATION,
        format!(
            "{comm:#x} is an intercommunicator: this phase makes, merges, sizes and frees them, \
             and sends nothing over them"
        ),
    )
    .on(On::Comm(comm))
}

fn not_a_comm(comm: i32) -> Fail {
    fail(MPI_ERR_COMM, format!("{comm:#x} is not a communicator")).on(On::Comm(MPI_COMM_WORLD))
}

/// The state of an initialized, not finalized process.
pub fn lock() -> Res<MutexGuard<'static, Option<Mpi>>> {
    match PHASE.load(Ordering::Acquire) {
        INITIALIZED => Ok(STATE.lock().unwrap_or_else(|e| e.into_inner())),
        NOT_INITIALIZED => Err(fail(MPI_ERR_OTHER, "MPI is not initialized (MPI_Init)")),
        _ => Err(fail(MPI_ERR_OTHER, "MPI was finalized (MPI_Finalize)")),
    }
}

/// Runs `f` on the initialized state.
pub fn with<T>(f: impl FnOnce(&mut Mpi) -> Res<T>) -> Res<T> {
    let mut guard = lock()?;
    let mpi = guard
        .as_mut()
        .ok_or_else(|| fail(MPI_ERR_OTHER, "MPI is not initialized (MPI_Init)"))?;
    f(mpi)
}

/// The shape of every call that makes an object: `make` on the state, and the handle it
/// returns written through the program's pointer `into`.
pub unsafe fn create(into: *mut c_int, make: impl FnOnce(&mut Mpi) -> Res<i32>) -> Res {
    let handle = with(make)?;
    crate::env::out(into, handle)
}

/// The shape of every call that frees an object through a pointer to its handle (`what`
/// names the object; `class`, the error of a null pointer): `free` on the state with the
/// handle, then the object's null handle `null` written in its place.
pub unsafe fn free(
    handle: *mut c_int,
    what: &str,
    class: c_int,
    null: c_int,
    free: impl FnOnce(&mut Mpi, c_int) -> Res,
) -> Res {
    if handle.is_null() {
        return Err(fail(class, format!("a null {what} pointer")));
    }
    with(|mpi| free(mpi, *handle))?;
    crate::env::out(handle, null)
}

/// Drops `handle`'s entry from `table`, or fails with `missing()` where there is none.
pub fn remove<T>(table: &mut HashMap<i32, T>, handle: i32, missing: impl FnOnce() -> Fail) -> Res {
    table.remove(&handle).map(drop).ok_or_else(missing)
}

/// `MPI_Comm_create_keyval` and `MPI_Win_create_keyval`: a new keyval of `delete_fn` and its
/// `extra_state` in the table `keyvals` picks, written to `keyval`.
pub unsafe fn create_keyval(
    keyval: *mut c_int,
    keyvals: fn(&mut Mpi) -> &mut Keyvals,
    delete_fn: Option<WinDelete>,
    extra_state: *mut std::ffi::c_void,
) -> Res {
    create(keyval, |mpi| {
        let handle = mpi.handle(MPI_KEYVAL_INVALID as u32);
        keyvals(mpi).insert(handle, (delete_fn, CPtr(extra_state.cast())));
        Ok(handle)
    })
}

/// Installs the state of a process that just initialized.
pub fn install(mpi: Mpi) {
    RANK.store(mpi.rank, Ordering::Relaxed);
    *STATE.lock().unwrap_or_else(|e| e.into_inner()) = Some(mpi);
    PHASE.store(INITIALIZED, Ordering::Release);
}

/// Takes the state out for `MPI_Finalize`.
pub fn take() -> Option<Mpi> {
    let taken = STATE.lock().unwrap_or_else(|e| e.into_inner()).take();
    PHASE.store(FINALIZED, Ordering::Release);
    taken
}

/// The error handler of the object a failure is on (`MPI_ERRORS_ARE_FATAL` by default and
/// whenever the state cannot be read).
pub fn errhandler(on: On) -> i32 {
    let Ok(guard) = STATE.try_lock() else {
        return MPI_ERRORS_ARE_FATAL;
    };
    let Some(mpi) = guard.as_ref() else {
        return MPI_ERRORS_ARE_FATAL;
    };
    match on {
        On::Comm(comm) => mpi
            .comms
            .get(&comm)
            .or_else(|| mpi.comms.get(&MPI_COMM_WORLD))
            .map_or(MPI_ERRORS_ARE_FATAL, |c| c.errhandler),
        On::Win(win) => match mpi.windows.get(&win) {
            Some(win) => win.errhandler,
            None => mpi
                .comms
                .get(&MPI_COMM_WORLD)
                .map_or(MPI_ERRORS_ARE_FATAL, |c| c.errhandler),
        },
    }
}

/// The user error handler function a handle names, if any.
pub fn user_errhandler(handle: i32) -> Option<WinErrhandler> {
    let guard = STATE.try_lock().ok()?;
    guard.as_ref()?.win_errhandlers.get(&handle).copied()
}

/// This rank as text for messages.
pub fn rank_for_messages() -> String {
    match RANK.load(Ordering::Relaxed) {
        u32::MAX => "?".into(),
        rank => rank.to_string(),
    }
}
