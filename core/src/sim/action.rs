//! What a rank's program does, one [`Action`] a step.
//!
//! Owns: the actions and the window each works on. Must not: carry one out (the world does).

use crate::origin::Call;
use crate::RmaError;

#[cfg(doc)]
use super::Run;

/// One thing a rank's program does.
#[derive(Clone, Debug)]
pub enum Action {
    /// A call on a window. The bytes a call publishes are taken from the rank's private copy
    /// (leave its `push` empty), as the client does.
    Call(Call),
    /// A local store into the private copy.
    Store {
        /// The window.
        window: u64,
        /// The byte offset.
        offset: u64,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// `MPI_Wait` / `MPI_Waitall` on request-based operations: completion at the origin, so
    /// the rank waits until each of these actions of its program (request-based operations it
    /// issued) that brings data back (`rget`, `rget_accumulate`) was answered; one that
    /// brings none (`rput`, `raccumulate`) is complete at once, applied at its target or not.
    WaitRequests {
        /// The operations' indices in the rank's program.
        calls: Vec<usize>,
    },
    /// `MPI_Test` / `MPI_Testall` on request-based operations: whether each of these actions
    /// is complete at the origin (as [`Action::WaitRequests`] waits for), kept in
    /// [`Run::flags`]; the rank does not wait.
    TestRequests {
        /// The operations' indices in the rank's program.
        calls: Vec<usize>,
    },
    /// `MPI_Waitany`: the rank waits until one of these request-based operations is complete
    /// at the origin (as [`Action::WaitRequests`] says) and returns its position in the list,
    /// kept in [`Run::indices`]: the first complete one's, once one is — the schedule decides
    /// which answers came first. A request waited for, tested complete or returned by a wait
    /// before is `MPI_REQUEST_NULL` and passed over; with none but null ones it returns -1
    /// (`MPI_UNDEFINED`) at once.
    WaitAny {
        /// Per handle of the list: its operation's index in the rank's program, or `None`
        /// for a handle null from the start (a freed request).
        calls: Vec<Option<usize>>,
    },
    /// `MPI_Request_free` of the request-based operation at this action of the rank's
    /// program: the operation goes on, nothing waits for it, and its handle is null from now
    /// on. A handle already null (waited for, tested complete, returned by a `wait_any` or
    /// freed) fails the call with `refusal` (`MPI_ERR_REQUEST`, in the runner's words).
    FreeRequest {
        /// The operation's index in the rank's program.
        call: usize,
        /// The error of a handle already null.
        refusal: RmaError,
    },
    /// `MPI_Win_set_info`: the keys set on the window, a collective of its ranks (`info.rs`).
    SetInfo {
        /// The window.
        window: u64,
        /// The keys and values.
        info: Vec<(String, String)>,
    },
    /// A call refused before it reaches a window, as a client refuses a call it cannot
    /// address (in a scenario's terms: a world rank outside the window's group): it fails
    /// with `error` and changes nothing.
    Refuse {
        /// The refusal.
        error: RmaError,
    },
    /// `MPI_Win_attach` on a dynamic window: a region of `size` bytes of the rank's memory,
    /// its address kept under `name` for every rank ([`Run::regions`]) once attached.
    Attach {
        /// The window.
        window: u64,
        /// Its size in bytes.
        size: u64,
        /// The name its address is kept under.
        name: String,
    },
    /// `MPI_Win_detach` of the region whose address is kept under `name`.
    Detach {
        /// The window.
        window: u64,
        /// The region's name.
        name: String,
    },
    /// `action` (an operation, a store or a load) at a place counted from the start of the
    /// region whose address is kept under `name`: an operation's displacement is the region's
    /// address plus its own, a store's or a load's offset is the region's place in the rank's
    /// memory plus its own (and must lie inside a region the rank has attached). It fails when
    /// no region of that name was attached.
    InRegion {
        /// The region's name.
        name: String,
        /// The action, its place counted from the region's start.
        action: Box<Action>,
    },
    /// The world's barrier: the rank waits until every rank entered it. It moves no data
    /// (SEMANTICS.md: "a barrier moves no data"); it only orders.
    Barrier,
    /// The rank's process dies: its session vanishes without any cleanup (locks held and
    /// epochs open stay so), its private copy, unpublished stores, requests and answers on
    /// their way are lost. The server notices and its targets take the departure
    /// ([`crate::target::Input::Departed`], behind what the rank sent them): its locks are
    /// revoked, what it still had queued is dropped, and a fence or PSCW epoch that needs it
    /// fails with `MPI_ERR_PROC_FAILED`, as does a collective waiting for it.
    Crash,
    /// After [`Action::Crash`], the rank attaches again as a new incarnation (once every
    /// target took the old one's departure, as the server lets a new session act only then)
    /// and opens every window it is a member of: fresh epoch states, its private copy read
    /// from its public copy once its own target took the opening.
    Rejoin,
    /// A local load from the private copy, kept in [`Run::loads`] under `label`.
    Load {
        /// The window.
        window: u64,
        /// The byte offset.
        offset: u64,
        /// How many bytes.
        len: u64,
        /// Its name in the run's result.
        label: String,
    },
}

impl Action {
    /// The window it works on, if one.
    pub(super) fn window(&self) -> Option<u64> {
        match self {
            Action::Call(call) => Some(call.window()),
            Action::Store { window, .. }
            | Action::Load { window, .. }
            | Action::SetInfo { window, .. }
            | Action::Attach { window, .. }
            | Action::Detach { window, .. } => Some(*window),
            Action::InRegion { action, .. } => action.window(),
            Action::WaitRequests { .. }
            | Action::TestRequests { .. }
            | Action::WaitAny { .. }
            | Action::FreeRequest { .. }
            | Action::Refuse { .. }
            | Action::Crash
            | Action::Rejoin
            | Action::Barrier => None,
        }
    }
}
