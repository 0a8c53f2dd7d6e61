//! A session's wire call on a window, as core's origin engine takes it: the mapping from
//! `v1::client_message::Call` to [`onesided_core::origin::Call`] and nothing else.
//!
//! Owns: which window a wire call names ([`window_of`]) and the decoding of a window call
//! ([`call_from_wire`]): lock types, records and pushed segments refused here are refused
//! before admission looks at the window, as they always were; an operation that does not
//! decode travels as its refusal, which admission reports in its turn (after the window and
//! the rank). Must not: decide whether a call is legal (that is `onesided_core::origin::admit`)
//! or do I/O.

use onesided_core::epoch::LockType;
use onesided_core::origin::{self, ClientRows};
use onesided_core::{ErrorClass, RmaError};

use crate::v1::client_message::Call;
use crate::{segments_from_wire, target_op_from_wire};

/// The window a call is on (`None` for the session's own calls: `OpenWindow`,
/// `CreateWindow`, `Barrier`, `Send`, `Receive`, `Heartbeat` and `Batch`).
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

/// The window call `call` as core's origin engine takes it.
///
/// # Errors
/// `MPI_ERR_LOCKTYPE` for a lock of neither type; `MPI_ERR_ARG` for a record with both events
/// and client rows, or a call that is not on a window (the session's own calls, and
/// `SetInfo`, a collective the session carries out itself).
pub fn call_from_wire(call: Call) -> Result<origin::Call, RmaError> {
    Ok(match call {
        Call::Fence(fence) => origin::Call::Fence {
            window: fence.window,
            assert: fence.assert,
            push: segments_from_wire(fence.push),
        },
        Call::Post(post) => origin::Call::Post {
            window: post.window,
            group: post.group,
            assert: post.assert,
            push: segments_from_wire(post.push),
        },
        Call::Start(start) => origin::Call::Start {
            window: start.window,
            group: start.group,
            assert: start.assert,
        },
        Call::Complete(complete) => origin::Call::Complete {
            window: complete.window,
        },
        Call::Wait(wait) => origin::Call::Wait {
            window: wait.window,
        },
        Call::Test(test) => origin::Call::Test {
            window: test.window,
        },
        Call::Lock(lock) => origin::Call::Lock {
            lock_type: LockType::from_code(lock.lock_type)?,
            window: lock.window,
            target: lock.target,
            assert: lock.assert,
        },
        Call::Unlock(unlock) => origin::Call::Unlock {
            window: unlock.window,
            target: unlock.target,
            push: segments_from_wire(unlock.push),
        },
        Call::LockAll(lock_all) => origin::Call::LockAll {
            window: lock_all.window,
            assert: lock_all.assert,
        },
        Call::UnlockAll(unlock_all) => origin::Call::UnlockAll {
            window: unlock_all.window,
            push: segments_from_wire(unlock_all.push),
        },
        Call::Flush(flush) => origin::Call::Flush {
            window: flush.window,
            target: flush.target,
            local: flush.local,
        },
        Call::FlushAll(flush_all) => origin::Call::FlushAll {
            window: flush_all.window,
            local: flush_all.local,
        },
        Call::Sync(sync) => origin::Call::Sync {
            window: sync.window,
            push: segments_from_wire(sync.push),
        },
        Call::Op(op) => origin::Call::Op {
            op: target_op_from_wire(&op),
            window: op.window,
            target: op.target,
            token: op.token,
            request_based: op.request_based,
        },
        Call::Record(record) => record_from_wire(record)?,
        Call::WinFree(free) => origin::Call::WinFree {
            window: free.window,
        },
        Call::Publish(publish) => origin::Call::Publish {
            window: publish.window,
            push: segments_from_wire(publish.push),
            seq: publish.seq,
        },
        Call::Follow(follow) => origin::Call::Follow {
            window: follow.window,
        },
        Call::Attach(attach) => origin::Call::Attach {
            window: attach.window,
            size: attach.size,
            at: (attach.at != 0).then_some(attach.at),
        },
        Call::Detach(detach) => origin::Call::Detach {
            window: detach.window,
            base: detach.base,
        },
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

/// A record of the client's own audit events or of its client rows (never both).
fn record_from_wire(record: crate::v1::Record) -> Result<origin::Call, RmaError> {
    Ok(match record.rows {
        Some(_) if !record.events.is_empty() => {
            return Err(RmaError::new(
                ErrorClass::Arg,
                "a record carries events or client rows, not both",
            ));
        }
        Some(rows) => origin::Call::ClientRows {
            window: record.window,
            rows: ClientRows {
                from: rows.from,
                to: rows.to,
                hash: rows.hash.to_vec(),
            },
        },
        None => origin::Call::Recorded {
            window: record.window,
            events: record.events,
        },
    })
}
