//! Admission: whether one wire call of a session on one of its open windows is legal, and what
//! a legal one must do — one pure function, called by the server's session and by the fuzz
//! target alike.
//!
//! Owns: the order of a call's checks (which refusal a call with several faults gets), the
//! origin-side epoch transition (core's [`EpochState`]), the validation of operations and
//! pushed bytes, and the audit event the call records. Must not: do I/O, touch window bytes,
//! or know how a plan travels to the targets (that is the session's).
//!
//! A refused call changes nothing: every check that can fail runs before the epoch state or a
//! client chain moves.

use bytes::Bytes;
use onesided_core::assert::Assert;
use onesided_core::audit::{Event, RecordedOp};
use onesided_core::epoch::{AccessTag, EpochState, LockRequest, LockType};
use onesided_core::target::Segment;
use onesided_core::window::{
    dynamic_offsets, Flavor, TargetAccess, TargetOp, WindowDesc, MAX_WINDOW_BYTES,
};
use onesided_core::{ErrorClass, RmaError};

use crate::v1::client_message::Call;
use crate::{
    check_segments, client_rows_marker, record_rows, recorded_events, segments_from_wire,
    target_op_from_wire,
};

/// One open window of a session, as admission sees it.
#[derive(Debug)]
pub struct OpenState<'a> {
    /// What every rank knows about the window.
    pub desc: &'a WindowDesc,
    /// The rank's origin-side epoch state on it.
    pub epoch: &'a mut EpochState,
    /// The first cseq the client's next marker of persisted rows must name.
    pub next_cseq: &'a mut u64,
}

/// Where admission finds a session's open windows.
pub trait OpenWindows {
    /// The open window `id`, if the session opened it.
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
fn pushed(desc: &WindowDesc, me: u32, segments: &[crate::v1::Segment]) -> Result<(), RmaError> {
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
    if desc.model == onesided_core::window::MemoryModel::Unified {
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

/// The window a call is on (`None` for `OpenWindow`, `Barrier`, `Heartbeat` and `Batch`).
pub fn window_of(call: &Call) -> Option<u64> {
    Some(match call {
        Call::Fence(call) => call.window,
        Call::Post(call) => call.window,
        Call::Start(call) => call.window,
        Call::Complete(call) => call.window,
        Call::Wait(call) => call.window,
        Call::Test(call) => call.window,
        Call::Lock(call) => call.window,
        Call::Unlock(call) => call.window,
        Call::LockAll(call) => call.window,
        Call::UnlockAll(call) => call.window,
        Call::Flush(call) => call.window,
        Call::FlushAll(call) => call.window,
        Call::Sync(call) => call.window,
        Call::Op(call) => call.window,
        Call::Record(call) => call.window,
        Call::WinFree(call) => call.window,
        Call::SetInfo(call) => call.window,
        Call::Publish(call) => call.window,
        Call::Follow(call) => call.window,
        Call::Attach(call) => call.window,
        Call::Detach(call) => call.window,
        Call::OpenWindow(_)
        | Call::CreateWindow(_)
        | Call::Barrier(_)
        | Call::Send(_)
        | Call::Receive(_)
        | Call::Heartbeat(_)
        | Call::Batch(_) => return None,
    })
}

/// Admits `call` of rank `me` (a call on a window: not `OpenWindow`,
/// `Barrier`, `Heartbeat` or `Batch`, which the session handles itself) against the
/// session's `windows`.
///
/// # Errors
/// The refusal, with its MPI error class; then nothing changed.
///
/// # Panics
/// Never for any input; a call that is not on a window is `MPI_ERR_ARG`.
pub fn admit(windows: &mut impl OpenWindows, me: u32, call: Call) -> Result<Admitted, RmaError> {
    macro_rules! open {
        ($id:expr) => {
            windows.open($id).ok_or_else(|| not_open($id))?
        };
    }
    Ok(match call {
        Call::Fence(fence) => {
            let window = open!(fence.window);
            pushed(window.desc, me, &fence.push)?;
            let plan = window.epoch.fence(fence.assert)?;
            Admitted::Fence {
                event: Event::FenceEnter {
                    fence: plan.fence,
                    assert: fence.assert,
                },
                fence: plan.fence,
                closes: plan.closes,
                pull: plan.pull,
                push: if plan.push {
                    segments_from_wire(fence.push)
                } else {
                    Vec::new()
                },
            }
        }
        Call::Post(post) => {
            let window = open!(post.window);
            pushed(window.desc, me, &post.push)?;
            let plan = window.epoch.post(&post.group, post.assert)?;
            Admitted::Post {
                event: Event::Post {
                    group: plan.group.clone(),
                    assert: post.assert,
                },
                group: plan.group,
                push: if plan.push {
                    segments_from_wire(post.push)
                } else {
                    Vec::new()
                },
            }
        }
        Call::Start(start) => {
            let window = open!(start.window);
            let group = window.epoch.start(&start.group, start.assert)?;
            Admitted::Start {
                event: Event::Start {
                    group,
                    assert: start.assert,
                },
            }
        }
        Call::Complete(complete) => {
            let window = open!(complete.window);
            Admitted::Complete {
                markers: window.epoch.complete()?,
            }
        }
        Call::Wait(wait) => {
            let window = open!(wait.window);
            Admitted::Wait {
                pull: window.epoch.wait()?,
            }
        }
        Call::Test(test) => {
            let window = open!(test.window);
            Admitted::Test {
                pull: window.epoch.test()?,
            }
        }
        Call::Lock(lock) => {
            let lock_type = LockType::from_code(lock.lock_type)?;
            let window = open!(lock.window);
            let eager = window.epoch.lock(lock_type, lock.target, lock.assert)?;
            let request = Request {
                request: LockRequest {
                    lock_type,
                    nocheck: lock.assert & Assert::NOCHECK != 0,
                },
                holding_elsewhere: window.epoch.holds_locks_besides(me),
            };
            Admitted::Lock {
                event: issued("lock", Some(lock.target)),
                eager: eager.then_some(request),
            }
        }
        Call::Unlock(unlock) => {
            let window = open!(unlock.window);
            pushed(window.desc, me, &unlock.push)?;
            let plan = window.epoch.unlock(unlock.target)?;
            let holding_elsewhere = window.epoch.holds_locks_besides(unlock.target);
            Admitted::Unlock {
                event: issued("unlock", Some(unlock.target)),
                target: unlock.target,
                request: (!plan.requested).then_some(Request {
                    request: plan.lock,
                    holding_elsewhere,
                }),
                push: segments_from_wire(unlock.push),
            }
        }
        Call::LockAll(lock_all) => {
            let window = open!(lock_all.window);
            Admitted::LockAll {
                request: window.epoch.lock_all(lock_all.assert)?,
                event: issued("lock_all", None),
            }
        }
        Call::UnlockAll(unlock_all) => {
            let window = open!(unlock_all.window);
            pushed(window.desc, me, &unlock_all.push)?;
            Admitted::UnlockAll {
                released: window.epoch.unlock_all()?,
                event: issued("unlock_all", None),
                push: segments_from_wire(unlock_all.push),
            }
        }
        Call::Flush(flush) => {
            let window = open!(flush.window);
            let travelled = window.epoch.flush(flush.target)?;
            // local completion is the client's: its results arrive on their own
            Admitted::Flush {
                travels: (!flush.local && travelled)
                    .then(|| (issued("flush", Some(flush.target)), flush.target)),
            }
        }
        Call::FlushAll(flush_all) => {
            let window = open!(flush_all.window);
            let targets = window.epoch.flush_all()?;
            Admitted::FlushAll {
                travels: (!flush_all.local).then(|| (issued("flush_all", None), targets)),
            }
        }
        Call::Sync(sync) => {
            let window = open!(sync.window);
            pushed(window.desc, me, &sync.push)?;
            window.epoch.sync()?;
            Admitted::Sync {
                push: segments_from_wire(sync.push),
            }
        }
        Call::Op(op) => {
            let window = open!(op.window);
            let nranks = window.desc.nranks();
            if op.target >= nranks {
                return Err(RmaError::new(
                    ErrorClass::Rank,
                    format!(
                        "rank {} is outside the window's group of {nranks} ranks",
                        op.target
                    ),
                ));
            }
            let target_op = target_op_from_wire(&op)?;
            let target = op.target as usize;
            // a dynamic window: `disp` is an address, checked against the target's regions
            // when it applies the operation; here it becomes an offset of the rank's memory
            let access = if window.desc.flavor == Flavor::Dynamic {
                dynamic_offsets(target_op.validate(u64::MAX, 1)?)?
            } else {
                target_op.validate(window.desc.sizes[target], window.desc.disp_units[target])?
            };
            let plan = window.epoch.op(op.target, op.request_based)?;
            let holding_elsewhere = window.epoch.holds_locks_besides(op.target);
            Admitted::Op {
                target: op.target,
                request: plan.request_lock.map(|request| Request {
                    request,
                    holding_elsewhere,
                }),
                tag: plan.tag,
                token: op.token,
                op: target_op,
                access,
            }
        }
        Call::Record(record) if record.rows.is_some() => {
            let rows = record_rows(&record)?;
            let window = open!(record.window);
            let (marker, next) = client_rows_marker(record.window, rows, *window.next_cseq)?;
            *window.next_cseq = next;
            Admitted::ClientRows { marker }
        }
        Call::Record(record) => {
            let window = open!(record.window);
            let own_size = own_size(window.desc, me);
            let nranks = window.desc.nranks();
            Admitted::Recorded {
                events: recorded_events(&record, own_size, nranks)?,
            }
        }
        Call::WinFree(free) => {
            let window = open!(free.window);
            window.epoch.free()?;
            Admitted::Free {
                event: issued("win_free", None),
                barrier: !window.desc.info.no_locks,
            }
        }
        Call::Publish(publish) => {
            let window = open!(publish.window);
            unified(window.desc)?;
            pushed(window.desc, me, &publish.push)?;
            Admitted::Publish {
                push: segments_from_wire(publish.push),
                seq: publish.seq,
            }
        }
        Call::Follow(follow) => {
            let window = open!(follow.window);
            unified(window.desc)?;
            Admitted::Follow
        }
        Call::Attach(attach) => {
            let window = open!(attach.window);
            dynamic(window.desc, "attach")?;
            Admitted::Attach {
                size: attach.size,
                at: (attach.at != 0).then_some(attach.at),
            }
        }
        Call::Detach(detach) => {
            let window = open!(detach.window);
            dynamic(window.desc, "detach")?;
            Admitted::Detach { base: detach.base }
        }
        Call::OpenWindow(_)
        | Call::Barrier(_)
        | Call::Send(_)
        | Call::Receive(_)
        | Call::Heartbeat(_)
        | Call::Batch(_) => {
            return Err(RmaError::new(
                ErrorClass::Arg,
                "this call is not on a window",
            ));
        }
        // collectives of the world, which the session carries out itself
        Call::SetInfo(_) | Call::CreateWindow(_) => {
            return Err(RmaError::new(
                ErrorClass::Arg,
                "set_info is the session's own call",
            ));
        }
    })
}
