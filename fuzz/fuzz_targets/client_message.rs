//! Arbitrary bytes as a session's `ClientMessage`, through every check the server makes before
//! a call reaches an actor, and then through what the actor does with a call that passed them.
//!
//! The server's session (server/src/session.rs, `Session::handle` and `Session::op`) refuses
//! calls with pure functions of core and proto; this target calls the same ones in the same
//! order, on one rank's epoch state of a fixed four-rank window, and indexes the window's ranks
//! wherever the session does. It must never panic, and it checks two promises on the way:
//! - an operation [`TargetOp::validate`] accepts is one [`apply`] performs on a public copy of
//!   the target's size (the actor applies without checking again), and
//! - the byte runs validate returns are inside that copy, and
//! - a refused call leaves the epoch state, the public copies and the client chain as they
//!   were.

#![no_main]

use libfuzzer_sys::fuzz_target;
use onesided_core::audit::Event;
use onesided_core::epoch::{EpochState, LockType};
use onesided_core::window::apply;
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::v1::client_message::Call;
use onesided_proto::v1::ClientMessage;
use onesided_proto::{
    check_segments, client_rows_marker, record_rows, recorded_events, target_op_from_wire,
};
use prost::Message;

/// The window: one size and disp_unit per rank (a zero-size rank, a non-power-of-two unit).
const SIZES: [u64; 4] = [64, 24, 0, 96];
const DISP_UNITS: [u32; 4] = [1, 8, 4, 3];
/// The rank the session is.
const ME: u32 = 1;

struct Window {
    epoch: EpochState,
    public: Vec<Vec<u8>>,
    /// The next row of the session's client chain of this window (client-persisted events).
    next_cseq: u64,
}

impl Window {
    fn new(no_locks: bool) -> Self {
        Window {
            epoch: EpochState::new(ME, SIZES.len() as u32, no_locks),
            public: SIZES.iter().map(|&size| vec![0u8; size as usize]).collect(),
            next_cseq: 1,
        }
    }

    /// A rank the session goes on to address (`ranks[target]` in the session).
    fn rank(&self, target: u32) -> usize {
        let index = target as usize;
        assert!(index < SIZES.len(), "the session would index rank {target}");
        index
    }

    fn call(&mut self, call: Call) -> Result<(), RmaError> {
        let me = ME as usize;
        match call {
            Call::OpenWindow(_) | Call::Barrier(_) | Call::Heartbeat(_) => {}
            Call::Fence(fence) => {
                check_segments(SIZES[me], &fence.push)?;
                let plan = self.epoch.fence(fence.assert)?;
                if plan.push {
                    push(&mut self.public[me], &fence.push);
                }
            }
            Call::Post(post) => {
                check_segments(SIZES[me], &post.push)?;
                let plan = self.epoch.post(&post.group, post.assert)?;
                if plan.push {
                    push(&mut self.public[me], &post.push);
                }
            }
            Call::Start(start) => {
                self.epoch.start(&start.group, start.assert)?;
            }
            Call::Complete(_) => {
                for (target, _generation) in self.epoch.complete()? {
                    self.rank(target);
                }
            }
            Call::Wait(_) => {
                self.epoch.wait()?;
            }
            Call::Test(_) => {
                // a true flag has the effect of wait (its answer comes from the actor)
                if self.epoch.test()? {
                    let _ = self.epoch.wait();
                }
            }
            Call::Lock(lock) => {
                let lock_type = LockType::from_code(lock.lock_type)?;
                self.epoch.lock(lock_type, lock.target, lock.assert)?;
            }
            Call::Unlock(unlock) => {
                check_segments(SIZES[me], &unlock.push)?;
                self.epoch.unlock(unlock.target)?;
                push(&mut self.public[me], &unlock.push);
                self.rank(unlock.target);
            }
            Call::LockAll(lock_all) => {
                self.epoch.lock_all(lock_all.assert)?;
            }
            Call::UnlockAll(unlock_all) => {
                check_segments(SIZES[me], &unlock_all.push)?;
                let released = self.epoch.unlock_all()?;
                push(&mut self.public[me], &unlock_all.push);
                for target in released {
                    self.rank(target);
                }
            }
            Call::Flush(flush) => {
                let travelled = self.epoch.flush(flush.target)?;
                if !flush.local && travelled {
                    self.rank(flush.target);
                }
            }
            Call::FlushAll(flush_all) => {
                let targets = self.epoch.flush_all()?;
                if !flush_all.local {
                    for target in targets {
                        self.rank(target);
                    }
                }
            }
            Call::Sync(sync) => {
                check_segments(SIZES[me], &sync.push)?;
                self.epoch.sync()?;
                push(&mut self.public[me], &sync.push);
            }
            Call::Op(op) => {
                if op.target >= SIZES.len() as u32 {
                    // the session's own range check
                    return Err(RmaError::new(ErrorClass::Rank, "outside the group"));
                }
                let target_op = target_op_from_wire(&op)?;
                let target = op.target as usize;
                let access = target_op.validate(SIZES[target], DISP_UNITS[target])?;
                self.epoch.op(op.target, op.request_based)?;
                // what the target's actor does with it
                for run in &access.runs {
                    let end = run.offset.checked_add(run.len);
                    assert!(
                        end.is_some_and(|end| end <= SIZES[target]),
                        "validate let a run at {} of {} bytes through to a window of {}",
                        run.offset,
                        run.len,
                        SIZES[target]
                    );
                }
                let public = &mut self.public[target];
                let before = public.clone();
                match apply(public, &access, &target_op) {
                    Ok(result) => {
                        let expected = if target_op.kind.returns_data() {
                            access.bytes
                        } else {
                            0
                        };
                        assert_eq!(result.len() as u64, expected, "the answer's length");
                    }
                    Err(error) => {
                        assert_eq!(*public, before, "a refused apply changed the public copy");
                        panic!("validate accepted what apply refuses: {error}");
                    }
                }
            }
            Call::Record(record) if record.rows.is_some() => {
                let rows = record_rows(&record)?;
                let (marker, next) = client_rows_marker(record.window, rows, self.next_cseq)?;
                assert!(next > self.next_cseq, "the client chain went back");
                assert!(matches!(marker, Event::ClientEvents { .. }));
                self.next_cseq = next;
            }
            Call::Record(record) => {
                for event in recorded_events(&record, SIZES[ME as usize], SIZES.len() as u32)? {
                    assert!(event.is_client_side(), "a server-side event was accepted");
                    if let Event::Store { ranges } | Event::Load { ranges } = &event {
                        assert!(
                            ranges.iter().all(|&(start, end)| start < end && end <= SIZES[ME as usize]),
                            "a recorded access outside the private copy was accepted"
                        );
                    }
                }
            }
            Call::WinFree(_) => {
                self.epoch.free()?;
            }
            Call::Batch(_) => unreachable!("batches are flattened by the caller"),
        }
        Ok(())
    }
}

/// What the rank's actor does with pushed bytes (checked by `check_segments` before).
fn push(public: &mut [u8], segments: &[onesided_proto::v1::Segment]) {
    for segment in segments {
        let start = segment.offset as usize;
        public[start..start + segment.data.len()].copy_from_slice(&segment.data);
    }
}

/// Where the calls start: a fresh window, and windows already inside each kind of epoch, so
/// that one operation alone reaches the checks behind the epoch's.
fn starts(no_locks: bool) -> Vec<Window> {
    let fresh = Window::new(no_locks);
    let mut fence = Window::new(no_locks);
    fence.epoch.fence(0).expect("a first fence");
    let mut lock_all = Window::new(no_locks);
    let mut locks = Window::new(no_locks);
    if !no_locks {
        lock_all.epoch.lock_all(0).expect("lock_all");
        for target in 0..SIZES.len() as u32 {
            locks
                .epoch
                .lock(LockType::Exclusive, target, 0)
                .expect("lock");
        }
    }
    let mut start = Window::new(no_locks);
    start.epoch.start(&[0, 2, 3], 0).expect("start");
    vec![fresh, fence, lock_all, locks, start]
}

fuzz_target!(|data: &[u8]| {
    let Ok(message) = ClientMessage::decode(data) else {
        return;
    };
    let calls: Vec<Call> = match message.call {
        None => return,
        // the session runs a batch's calls in order and refuses nested batches
        Some(Call::Batch(batch)) => batch
            .calls
            .into_iter()
            .filter_map(|inner| inner.call)
            .filter(|call| !matches!(call, Call::Batch(_)))
            .collect(),
        Some(call) => vec![call],
    };
    for mut window in starts(message.id % 2 == 1) {
        for call in calls.iter().cloned() {
            // a refused call leaves the state as it was; the next one goes on from there
            let epoch = window.epoch.clone();
            let public = window.public.clone();
            let next_cseq = window.next_cseq;
            if window.call(call).is_err() {
                assert_eq!(
                    window.epoch, epoch,
                    "a refused call changed the epoch state"
                );
                assert_eq!(
                    window.public, public,
                    "a refused call changed a public copy"
                );
                assert_eq!(
                    window.next_cseq, next_cseq,
                    "a refused call moved the client chain"
                );
            }
        }
    }
});
