//! The origin half of the protocol, sans I/O: whether one call of a rank on one of its open
//! windows is legal, and what a legal one must do.
//!
//! Owns: the session calls in core's types ([`Call`]), the order of a call's checks (which
//! refusal a call with several faults gets), the origin-side epoch transition (through
//! [`EpochState`]), the validation of operations, pushed bytes and recorded client events, and
//! the audit event each call records ([`Admitted`]). Must not: do I/O, touch window bytes, or
//! know how a plan travels to the targets (that is the server's session, or a simulator's).
//!
//! A refused call changes nothing: every check that can fail runs before the epoch state or a
//! client chain moves. Proto maps the wire's calls to [`Call`] and nothing else; the server's
//! session and the fuzz target call [`admit`] alike.

mod copy;
mod record;
mod route;

pub use copy::PrivateCopy;
pub use route::{route, Answers, Issuer, Route, Step, To};

pub use record::{
    check_segments, client_rows_marker, recorded_chunks, recorded_events, ClientRows,
    MAX_RECORDED_EVENTS, MAX_RECORDED_RANGES,
};

use bytes::Bytes;

use crate::assert::Assert;
use crate::audit::{Event, RecordedOp};
use crate::epoch::{AccessTag, EpochState, LockRequest, LockType};
use crate::target::Segment;
use crate::window::{
    dynamic_offsets, Flavor, MemoryModel, TargetAccess, TargetOp, WindowDesc, MAX_WINDOW_BYTES,
};
use crate::{ErrorClass, RmaError};

/// One call of a rank on one of its open windows, as admission takes it. Everything but the
/// window's state is here; what the wire held that does not decode is kept as its refusal
/// (an operation's), so that admission reports it in its turn.
#[derive(Clone, Debug)]
pub enum Call {
    /// `MPI_Win_fence`, with the bytes the rank stored since its last publication.
    Fence {
        /// The window.
        window: u64,
        /// `MPI_MODE_*` bits.
        assert: u32,
        /// Bytes to publish.
        push: Vec<Segment>,
    },
    /// `MPI_Win_post`.
    Post {
        /// The window.
        window: u64,
        /// The exposure group (ranks of the window).
        group: Vec<u32>,
        /// `MPI_MODE_*` bits.
        assert: u32,
        /// Bytes to publish.
        push: Vec<Segment>,
    },
    /// `MPI_Win_start`.
    Start {
        /// The window.
        window: u64,
        /// The access group.
        group: Vec<u32>,
        /// `MPI_MODE_*` bits.
        assert: u32,
    },
    /// `MPI_Win_complete`.
    Complete {
        /// The window.
        window: u64,
    },
    /// `MPI_Win_wait`.
    Wait {
        /// The window.
        window: u64,
    },
    /// `MPI_Win_test`.
    Test {
        /// The window.
        window: u64,
    },
    /// `MPI_Win_lock`.
    Lock {
        /// The window.
        window: u64,
        /// Shared or exclusive.
        lock_type: LockType,
        /// The target rank.
        target: u32,
        /// `MPI_MODE_*` bits.
        assert: u32,
    },
    /// `MPI_Win_unlock`.
    Unlock {
        /// The window.
        window: u64,
        /// The target rank.
        target: u32,
        /// Bytes to publish.
        push: Vec<Segment>,
    },
    /// `MPI_Win_lock_all`.
    LockAll {
        /// The window.
        window: u64,
        /// `MPI_MODE_*` bits.
        assert: u32,
    },
    /// `MPI_Win_unlock_all`.
    UnlockAll {
        /// The window.
        window: u64,
        /// Bytes to publish.
        push: Vec<Segment>,
    },
    /// `MPI_Win_flush` (or `flush_local`).
    Flush {
        /// The window.
        window: u64,
        /// The target rank.
        target: u32,
        /// Local completion only.
        local: bool,
    },
    /// `MPI_Win_flush_all` (or `flush_local_all`).
    FlushAll {
        /// The window.
        window: u64,
        /// Local completion only.
        local: bool,
    },
    /// `MPI_Win_sync`.
    Sync {
        /// The window.
        window: u64,
        /// Bytes to publish.
        push: Vec<Segment>,
    },
    /// A put, get, accumulate, get-accumulate, fetch-and-op or compare-and-swap.
    Op {
        /// The window.
        window: u64,
        /// The target rank.
        target: u32,
        /// The fencing token the origin believes it holds (0: whatever it holds).
        token: u64,
        /// An `MPI_R*` call (answered with a request).
        request_based: bool,
        /// The operation, or why the wire's did not decode.
        op: Result<TargetOp<Bytes>, RmaError>,
    },
    /// The client persisted rows of its own chain.
    ClientRows {
        /// The window.
        window: u64,
        /// The rows.
        rows: ClientRows,
    },
    /// Client-side events to record (JSON bodies); none: a drain.
    Recorded {
        /// The window.
        window: u64,
        /// The events, as JSON.
        events: Vec<String>,
    },
    /// `MPI_Win_free`.
    WinFree {
        /// The window.
        window: u64,
    },
    /// Unified model: the owner's stores, numbered `seq`.
    Publish {
        /// The window.
        window: u64,
        /// The stored bytes.
        push: Vec<Segment>,
        /// The owner's number for them.
        seq: u64,
    },
    /// Unified model: follow one's own public copy from now on.
    Follow {
        /// The window.
        window: u64,
    },
    /// Dynamic window: attach a region.
    Attach {
        /// The window.
        window: u64,
        /// Its size.
        size: u64,
        /// The address asked for.
        at: Option<u64>,
    },
    /// Dynamic window: detach the region at `base`.
    Detach {
        /// The window.
        window: u64,
        /// Its address.
        base: u64,
    },
}

/// Which of its window's operations a call completes before it returns ([`Call::completes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completes {
    /// None.
    Nothing,
    /// Every one.
    All,
    /// Those to this target.
    To(u32),
}

impl Completes {
    /// Whether an operation to `target` is among them.
    pub fn includes(self, target: u32) -> bool {
        match self {
            Completes::Nothing => false,
            Completes::All => true,
            Completes::To(only) => only == target,
        }
    }
}

impl Call {
    /// `MPI_Win_fence(assert)` on `window`, publishing nothing yet (a client or the simulator
    /// fills in what it publishes).
    pub fn fence(window: u64, assert: u32) -> Call {
        let push = Vec::new();
        Call::Fence {
            window,
            assert,
            push,
        }
    }

    /// `MPI_Win_post(group, assert)`.
    pub fn post(window: u64, group: Vec<u32>, assert: u32) -> Call {
        let push = Vec::new();
        Call::Post {
            window,
            group,
            assert,
            push,
        }
    }

    /// `MPI_Win_start(group, assert)`.
    pub fn start(window: u64, group: Vec<u32>, assert: u32) -> Call {
        Call::Start {
            window,
            group,
            assert,
        }
    }

    /// `MPI_Win_lock(lock_type, target, assert)`.
    pub fn lock(window: u64, lock_type: LockType, target: u32, assert: u32) -> Call {
        Call::Lock {
            window,
            lock_type,
            target,
            assert,
        }
    }

    /// `MPI_Win_unlock(target)`.
    pub fn unlock(window: u64, target: u32) -> Call {
        let push = Vec::new();
        Call::Unlock {
            window,
            target,
            push,
        }
    }

    /// `MPI_Win_lock_all(assert)`.
    pub fn lock_all(window: u64, assert: u32) -> Call {
        Call::LockAll { window, assert }
    }

    /// `MPI_Win_unlock_all`.
    pub fn unlock_all(window: u64) -> Call {
        let push = Vec::new();
        Call::UnlockAll { window, push }
    }

    /// Where the bytes go that the call publishes from the private copy (rule 5: fence,
    /// post, unlock, unlock_all and sync publish the stores before them); `None` for a call
    /// that publishes nothing.
    pub fn push_mut(&mut self) -> Option<&mut Vec<Segment>> {
        match self {
            Call::Fence { push, .. }
            | Call::Post { push, .. }
            | Call::Unlock { push, .. }
            | Call::UnlockAll { push, .. }
            | Call::Sync { push, .. } => Some(push),
            _ => None,
        }
    }

    /// The operations the call completes before it returns: none, every one of its window's
    /// (fence, complete, unlock_all, flush_all) or those to one target (unlock, flush).
    /// `flush_local` and `flush_local_all` complete theirs at the origin only.
    pub fn completes(&self) -> Completes {
        match self {
            Call::Fence { .. }
            | Call::Complete { .. }
            | Call::UnlockAll { .. }
            | Call::FlushAll { .. } => Completes::All,
            Call::Unlock { target, .. } | Call::Flush { target, .. } => Completes::To(*target),
            _ => Completes::Nothing,
        }
    }

    /// The window the call is on.
    pub fn window(&self) -> u64 {
        match self {
            Call::Fence { window, .. }
            | Call::Post { window, .. }
            | Call::Start { window, .. }
            | Call::Complete { window }
            | Call::Wait { window }
            | Call::Test { window }
            | Call::Lock { window, .. }
            | Call::Unlock { window, .. }
            | Call::LockAll { window, .. }
            | Call::UnlockAll { window, .. }
            | Call::Flush { window, .. }
            | Call::FlushAll { window, .. }
            | Call::Sync { window, .. }
            | Call::Op { window, .. }
            | Call::ClientRows { window, .. }
            | Call::Recorded { window, .. }
            | Call::WinFree { window }
            | Call::Publish { window, .. }
            | Call::Follow { window }
            | Call::Attach { window, .. }
            | Call::Detach { window, .. } => *window,
        }
    }
}

/// One open window of a rank, as admission sees it.
#[derive(Debug)]
pub struct OpenState<'a> {
    /// What every rank knows about the window.
    pub desc: &'a WindowDesc,
    /// The rank's origin-side epoch state on it.
    pub epoch: &'a mut EpochState,
    /// The first cseq the client's next marker of persisted rows must name.
    pub next_cseq: &'a mut u64,
}

/// Where admission finds a rank's open windows.
pub trait OpenWindows {
    /// The open window `id`, if the rank opened it.
    fn open(&mut self, id: u64) -> Option<OpenState<'_>>;
}

/// A lock request that must travel to a target, and whether its origin holds (or is deemed
/// to hold) locks at other targets (core's `locks`: then it is never held back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// The request.
    pub request: LockRequest,
    /// The origin holds locks elsewhere.
    pub holding_elsewhere: bool,
}

/// What a legal call on a window must do, in the order the session does it.
#[derive(Debug)]
pub enum Admitted {
    /// Record `event`, publish `push` at one's own rank, count the arrival at the fence that
    /// closes `closes` (the last arrival tells every rank), then enter fence `fence` at one's
    /// own rank.
    Fence {
        /// Fence entered.
        event: Event,
        /// The fence number.
        fence: u64,
        /// The epoch it closes, if any.
        closes: Option<u64>,
        /// Pull when it returns.
        pull: bool,
        /// Bytes to publish first (empty: none).
        push: Vec<Segment>,
    },
    /// Publish `push`, record `event` (answered after its commit), then post `group`.
    Post {
        /// The post.
        event: Event,
        /// The sorted exposure group.
        group: Vec<u32>,
        /// Bytes to publish first.
        push: Vec<Segment>,
    },
    /// Record `event`; answered after its commit.
    Start {
        /// The start.
        event: Event,
    },
    /// Record the complete (answered after its commit), then send each target its marker.
    Complete {
        /// `(target, generation)` of each marker.
        markers: Vec<(u32, u64)>,
    },
    /// Record wait-enter, then wait at one's own rank.
    Wait {
        /// Pull when it returns.
        pull: bool,
    },
    /// Ask one's own rank whether the exposure epoch ended (a true flag has wait's effect).
    Test {
        /// Pull when it did.
        pull: bool,
    },
    /// Record `event`; a lazy lock is answered then, an eager one (`Some`) at its grant by
    /// one's own rank.
    Lock {
        /// The lock issued.
        event: Event,
        /// The eager request to one's own rank.
        eager: Option<Request>,
    },
    /// Record `event`, publish `push`, send the lazy request if it never travelled, then the
    /// unlock, answered once released.
    Unlock {
        /// The unlock issued.
        event: Event,
        /// The target.
        target: u32,
        /// The request that must travel first, if the lock never did.
        request: Option<Request>,
        /// Bytes to publish first.
        push: Vec<Segment>,
    },
    /// Record `event`, then request at one's own rank (answered at its grant).
    LockAll {
        /// lock_all issued.
        event: Event,
        /// The request.
        request: LockRequest,
    },
    /// Record `event`, publish `push`, then unlock at each of `released`, answered once all
    /// released.
    UnlockAll {
        /// unlock_all issued.
        event: Event,
        /// The targets whose locks are released.
        released: Vec<u32>,
        /// Bytes to publish first.
        push: Vec<Segment>,
    },
    /// Answered at once (local completion, or nothing travelled), or (`Some`) record `event`
    /// and flush at the target.
    Flush {
        /// flush issued, and the target, when the flush travels.
        travels: Option<(Event, u32)>,
    },
    /// Answered at once (local), or (`Some`) record `event` and flush at each target,
    /// answered once all answered.
    FlushAll {
        /// flush_all issued, and the targets, when the flush travels.
        travels: Option<(Event, Vec<u32>)>,
    },
    /// Record sync, publish `push`, then pull at one's own rank.
    Sync {
        /// Bytes to publish first.
        push: Vec<Segment>,
    },
    /// Unified model: publish the owner's stores `push`, numbered `seq`, at one's own rank.
    Publish {
        /// The stored bytes.
        push: Vec<Segment>,
        /// The owner's number for them.
        seq: u64,
    },
    /// Unified model: the session follows its own public copy from now on.
    Follow,
    /// Dynamic window: attach a region of `size` bytes (at `at`, if asked) at one's own rank.
    Attach {
        /// Its size.
        size: u64,
        /// The address asked for.
        at: Option<u64>,
    },
    /// Dynamic window: detach the region at `base` at one's own rank.
    Detach {
        /// Its address.
        base: u64,
    },
    /// Record op_issued ([`op_issued`], built only when the audit records), send the lazy
    /// lock request if one must travel first, then the operation.
    Op {
        /// The target rank.
        target: u32,
        /// The lazy lock request that must travel first.
        request: Option<Request>,
        /// When the target may apply it.
        tag: AccessTag,
        /// The fencing token the origin believes it holds (0: whatever it holds).
        token: u64,
        /// The validated operation.
        op: TargetOp<Bytes>,
        /// Its byte runs at the target.
        access: TargetAccess,
    },
    /// Record `marker` (the client persisted the rows it names); answered after its commit.
    ClientRows {
        /// The marker.
        marker: Event,
    },
    /// Record the client-side `events` (answered once handed on); none: a drain, answered
    /// once everything the session submitted is committed.
    Recorded {
        /// The events.
        events: Vec<Event>,
    },
    /// Record win_free issued, then enter the window's free collective (a barrier unless the
    /// window has `no_locks`).
    Free {
        /// win_free issued.
        event: Event,
        /// Whether freeing is a barrier.
        barrier: bool,
    },
}

/// The op_issued event of operation `id` to `target`: what it does and which bytes it
/// touches there.
pub fn op_issued(id: u64, target: u32, op: &TargetOp<Bytes>, access: &TargetAccess) -> Event {
    Event::OpIssued {
        op_id: id,
        target,
        op: RecordedOp::of(op.kind),
        datatype: op.dtype.name().to_string(),
        runs: access
            .runs
            .iter()
            .map(|run| (run.offset, run.offset + run.len))
            .collect(),
    }
}

fn issued(call: &str, target: Option<u32>) -> Event {
    Event::Issued {
        call: call.to_string(),
        target,
    }
}

fn not_open(id: u64) -> RmaError {
    RmaError::new(
        ErrorClass::Win,
        format!("window {id} is not open in this session"),
    )
}

/// Pushed bytes, checked against one's own window, for the targets. A dynamic window's memory
/// grows with its regions, which only its target knows: its bound is the most any window may
/// have (the target drops bytes past its copy).
fn pushed(desc: &WindowDesc, me: u32, segments: &[Segment]) -> Result<(), RmaError> {
    check_segments(own_size(desc, me), segments)
}

/// The bytes of the window at rank `me` as admission bounds them.
fn own_size(desc: &WindowDesc, me: u32) -> u64 {
    if desc.flavor == Flavor::Dynamic {
        MAX_WINDOW_BYTES
    } else {
        desc.sizes[me as usize]
    }
}

/// `MPI_ERR_RMA_FLAVOR` unless the window is dynamic (attach and detach are for no other).
fn dynamic(desc: &WindowDesc, call: &str) -> Result<(), RmaError> {
    if desc.flavor == Flavor::Dynamic {
        Ok(())
    } else {
        Err(RmaError::new(
            ErrorClass::RmaFlavor,
            format!(
                "{call} is only for windows of flavor dynamic; window {} is of flavor {}",
                desc.name,
                desc.flavor.name()
            ),
        ))
    }
}

/// `MPI_ERR_ARG` unless the window uses the unified model (publish and follow mean nothing
/// under the separate one).
fn unified(desc: &WindowDesc) -> Result<(), RmaError> {
    if desc.model == MemoryModel::Unified {
        Ok(())
    } else {
        Err(RmaError::new(
            ErrorClass::Arg,
            format!(
                "window {} uses the separate memory model: stores are published, and remote \
                 updates pulled, at synchronization calls",
                desc.name
            ),
        ))
    }
}

/// `MPI_Win_fence`: what it publishes is checked first, then the epoch's step.
fn fence(
    window: OpenState<'_>,
    me: u32,
    assert: u32,
    push: Vec<Segment>,
) -> Result<Admitted, RmaError> {
    pushed(window.desc, me, &push)?;
    let plan = window.epoch.fence(assert)?;
    Ok(Admitted::Fence {
        event: Event::FenceEnter {
            fence: plan.fence,
            assert,
        },
        fence: plan.fence,
        closes: plan.closes,
        pull: plan.pull,
        push: if_pushed(plan.push, push),
    })
}

/// `MPI_Win_post`: what it publishes is checked first, then the epoch's step.
fn post(
    window: OpenState<'_>,
    me: u32,
    group: &[u32],
    assert: u32,
    push: Vec<Segment>,
) -> Result<Admitted, RmaError> {
    pushed(window.desc, me, &push)?;
    let plan = window.epoch.post(group, assert)?;
    Ok(Admitted::Post {
        event: Event::Post {
            group: plan.group.clone(),
            assert,
        },
        group: plan.group,
        push: if_pushed(plan.push, push),
    })
}

/// `MPI_Win_lock`: a lazy lock is answered once recorded, an eager one (the epoch state says
/// which) travels to its grant.
fn lock(
    window: OpenState<'_>,
    me: u32,
    lock_type: LockType,
    target: u32,
    assert: u32,
) -> Result<Admitted, RmaError> {
    let eager = window.epoch.lock(lock_type, target, assert)?;
    let request = Request {
        request: LockRequest {
            lock_type,
            nocheck: assert & Assert::NOCHECK != 0,
        },
        holding_elsewhere: window.epoch.holds_locks_besides(me),
    };
    Ok(Admitted::Lock {
        event: issued("lock", Some(target)),
        eager: eager.then_some(request),
    })
}

/// `MPI_Win_unlock`: publishes, and sends the lock's request first when it never travelled.
fn unlock(
    window: OpenState<'_>,
    me: u32,
    target: u32,
    push: Vec<Segment>,
) -> Result<Admitted, RmaError> {
    pushed(window.desc, me, &push)?;
    let plan = window.epoch.unlock(target)?;
    let holding_elsewhere = window.epoch.holds_locks_besides(target);
    Ok(Admitted::Unlock {
        event: issued("unlock", Some(target)),
        target,
        request: (!plan.requested).then_some(Request {
            request: plan.lock,
            holding_elsewhere,
        }),
        push,
    })
}

/// A communication call: the target rank, then what the operation says (its decoding, then
/// its bytes at the target), then the epoch.
fn operation(
    window: OpenState<'_>,
    target: u32,
    token: u64,
    request_based: bool,
    op: Result<TargetOp<Bytes>, RmaError>,
) -> Result<Admitted, RmaError> {
    let nranks = window.desc.nranks();
    if target >= nranks {
        return Err(RmaError::new(
            ErrorClass::Rank,
            format!("rank {target} is outside the window's group of {nranks} ranks"),
        ));
    }
    let op = op?;
    // a dynamic window: `disp` is an address, checked against the target's regions when it
    // applies the operation; here it becomes an offset of the rank's memory
    let access = if window.desc.flavor == Flavor::Dynamic {
        dynamic_offsets(op.validate(u64::MAX, 1)?)?
    } else {
        let at = target as usize;
        op.validate(window.desc.sizes[at], window.desc.disp_units[at])?
    };
    let plan = window.epoch.op(target, request_based)?;
    let holding_elsewhere = window.epoch.holds_locks_besides(target);
    Ok(Admitted::Op {
        target,
        request: plan.request_lock.map(|request| Request {
            request,
            holding_elsewhere,
        }),
        tag: plan.tag,
        token,
        op,
        access,
    })
}

/// Only the bytes a plan publishes: all of them, or none when the epoch publishes nothing.
fn if_pushed(push: bool, segments: Vec<Segment>) -> Vec<Segment> {
    if push {
        segments
    } else {
        Vec::new()
    }
}

/// Admits `call` of rank `me` against the rank's open `windows`.
///
/// # Errors
/// The refusal, with its MPI error class; then nothing changed.
///
/// # Panics
/// Never for any input.
pub fn admit(windows: &mut impl OpenWindows, me: u32, call: Call) -> Result<Admitted, RmaError> {
    let id = call.window();
    let window = windows.open(id).ok_or_else(|| not_open(id))?;
    Ok(match call {
        Call::Fence { assert, push, .. } => fence(window, me, assert, push)?,
        Call::Post {
            group,
            assert,
            push,
            ..
        } => post(window, me, &group, assert, push)?,
        Call::Start { group, assert, .. } => {
            let group = window.epoch.start(&group, assert)?;
            Admitted::Start {
                event: Event::Start { group, assert },
            }
        }
        Call::Complete { .. } => Admitted::Complete {
            markers: window.epoch.complete()?,
        },
        Call::Wait { .. } => Admitted::Wait {
            pull: window.epoch.wait()?,
        },
        Call::Test { .. } => Admitted::Test {
            pull: window.epoch.test()?,
        },
        Call::Lock {
            lock_type,
            target,
            assert,
            ..
        } => lock(window, me, lock_type, target, assert)?,
        Call::Unlock { target, push, .. } => unlock(window, me, target, push)?,
        Call::LockAll { assert, .. } => Admitted::LockAll {
            request: window.epoch.lock_all(assert)?,
            event: issued("lock_all", None),
        },
        Call::UnlockAll { push, .. } => {
            pushed(window.desc, me, &push)?;
            Admitted::UnlockAll {
                released: window.epoch.unlock_all()?,
                event: issued("unlock_all", None),
                push,
            }
        }
        Call::Flush { target, local, .. } => {
            let travelled = window.epoch.flush(target)?;
            // local completion is the client's: its results arrive on their own
            Admitted::Flush {
                travels: (!local && travelled).then(|| (issued("flush", Some(target)), target)),
            }
        }
        Call::FlushAll { local, .. } => {
            let targets = window.epoch.flush_all()?;
            Admitted::FlushAll {
                travels: (!local).then(|| (issued("flush_all", None), targets)),
            }
        }
        Call::Sync { push, .. } => {
            pushed(window.desc, me, &push)?;
            window.epoch.sync()?;
            Admitted::Sync { push }
        }
        Call::Op {
            target,
            token,
            request_based,
            op,
            ..
        } => operation(window, target, token, request_based, op)?,
        Call::ClientRows { window: id, rows } => {
            let (marker, next) = client_rows_marker(id, &rows, *window.next_cseq)?;
            *window.next_cseq = next;
            Admitted::ClientRows { marker }
        }
        Call::Recorded { events, .. } => {
            let own_size = own_size(window.desc, me);
            let nranks = window.desc.nranks();
            Admitted::Recorded {
                events: recorded_events(&events, own_size, nranks)?,
            }
        }
        Call::WinFree { .. } => {
            window.epoch.free()?;
            Admitted::Free {
                event: issued("win_free", None),
                barrier: !window.desc.info.no_locks,
            }
        }
        Call::Publish { push, seq, .. } => {
            unified(window.desc)?;
            pushed(window.desc, me, &push)?;
            Admitted::Publish { push, seq }
        }
        Call::Follow { .. } => {
            unified(window.desc)?;
            Admitted::Follow
        }
        Call::Attach { size, at, .. } => {
            dynamic(window.desc, "attach")?;
            Admitted::Attach { size, at }
        }
        Call::Detach { base, .. } => {
            dynamic(window.desc, "detach")?;
            Admitted::Detach { base }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;
    use crate::window::{OpKind, WindowInfo};
    use crate::Datatype;

    struct One {
        desc: WindowDesc,
        epoch: EpochState,
        next_cseq: u64,
    }

    impl OpenWindows for One {
        fn open(&mut self, id: u64) -> Option<OpenState<'_>> {
            (id == self.desc.id).then_some(OpenState {
                desc: &self.desc,
                epoch: &mut self.epoch,
                next_cseq: &mut self.next_cseq,
            })
        }
    }

    fn window() -> One {
        One {
            desc: WindowDesc {
                id: 7,
                name: "w".to_string(),
                world: "world".to_string(),
                flavor: Flavor::Create,
                model: MemoryModel::Separate,
                sizes: vec![16, 16],
                disp_units: vec![1, 1],
                info: WindowInfo::default(),
                group: WindowDesc::whole_world(2),
            },
            epoch: EpochState::new(0, 2, false),
            next_cseq: 1,
        }
    }

    fn put(window: u64, target: u32, op: Result<TargetOp<Bytes>, RmaError>) -> Call {
        Call::Op {
            window,
            target,
            token: 0,
            request_based: false,
            op,
        }
    }

    fn undecodable() -> Result<TargetOp<Bytes>, RmaError> {
        Err(RmaError::new(ErrorClass::Type, "no such datatype"))
    }

    /// A call with several faults gets the refusal of the first check in admission's order:
    /// the window, then the target rank, then what the operation says, then the epoch.
    #[test]
    fn refusals_come_in_admissions_order_and_change_nothing() {
        let mut one = window();
        let class = |one: &mut One, call| admit(one, 0, call).unwrap_err().class;
        assert_eq!(class(&mut one, put(8, 5, undecodable())), ErrorClass::Win);
        assert_eq!(class(&mut one, put(7, 5, undecodable())), ErrorClass::Rank);
        assert_eq!(class(&mut one, put(7, 1, undecodable())), ErrorClass::Type);
        let op = TargetOp {
            kind: OpKind::Put,
            dtype: Datatype::I32,
            disp: 0,
            layout: Layout::contiguous(1),
            data: Bytes::from_static(&[0; 4]),
            compare: Bytes::new(),
        };
        // a legal operation outside any epoch
        assert_eq!(
            class(&mut one, put(7, 1, Ok(op.clone()))),
            ErrorClass::RmaSync
        );
        let fresh = window();
        assert_eq!(one.epoch, fresh.epoch, "a refusal moved the epoch");
        assert!(matches!(
            admit(
                &mut one,
                0,
                Call::Fence {
                    window: 7,
                    assert: 0,
                    push: Vec::new()
                }
            ),
            Ok(Admitted::Fence { .. })
        ));
        let Ok(Admitted::Op { access, .. }) = admit(&mut one, 0, put(7, 1, Ok(op))) else {
            panic!("a put inside a fence epoch is admitted");
        };
        assert_eq!(access.bytes, 4);
    }

    /// Bytes pushed past one's own window are refused before the epoch moves.
    #[test]
    fn pushed_bytes_outside_the_window_are_refused_first() {
        let mut one = window();
        let push = vec![Segment {
            offset: 12,
            data: Bytes::from_static(&[1; 8]),
        }];
        let refused = admit(
            &mut one,
            0,
            Call::Fence {
                window: 7,
                assert: 0,
                push,
            },
        );
        assert_eq!(refused.unwrap_err().class, ErrorClass::RmaRange);
        assert_eq!(one.epoch, window().epoch);
    }

    /// A true test ends the exposure epoch as wait does; a false one changes nothing.
    #[test]
    fn a_true_test_has_the_effect_of_wait() {
        let mut one = window();
        let posted = Call::Post {
            window: 7,
            group: vec![1],
            assert: 0,
            push: Vec::new(),
        };
        admit(&mut one, 0, posted).unwrap();
        assert!(matches!(
            admit(&mut one, 0, Call::Test { window: 7 }),
            Ok(Admitted::Test { pull: true })
        ));
        one.epoch.tested(false);
        assert!(one.epoch.post_group().is_some());
        one.epoch.tested(true);
        assert!(one.epoch.post_group().is_none());
        let again = admit(&mut one, 0, Call::Wait { window: 7 });
        assert_eq!(again.unwrap_err().class, ErrorClass::RmaSync);
    }
}
