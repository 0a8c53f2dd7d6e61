//! Arbitrary bytes as a session's `ClientMessage`, through the server's own admission
//! (the wire mapping `onesided_proto::call_wire::call_from_wire`, then
//! `onesided_core::origin::admit`, the functions the session calls) and then, for what it
//! admits, through core's target engine (`onesided_core::target::Target`, what the actors run).
//!
//! It runs one rank's session on a fixed four-rank window and indexes the window's ranks
//! wherever the session does. It must never panic, and it checks on the way:
//! - an operation admission accepts is one the target engine applies (the engine applies
//!   without checking again), answering with as many bytes as the access covers, and
//! - a refused call leaves the epoch state, the public copies and the client chain as they
//!   were.

#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use onesided_core::audit::Event;
use onesided_core::epoch::{AccessTag, EpochState, LockRequest, LockType};
use onesided_core::target::{Access, Input, Outcome, Segment, Target};
use onesided_core::window::{Flavor, MemoryModel, WindowDesc, WindowInfo};
use onesided_core::RmaError;
use onesided_core::origin::{admit, Admitted, OpenState, OpenWindows};
use onesided_proto::call_wire::call_from_wire;
use onesided_proto::v1::client_message::Call;
use onesided_proto::v1::ClientMessage;
use prost::Message;

/// The window: one size and disp_unit per rank (a zero-size rank, a non-power-of-two unit).
const SIZES: [u64; 4] = [64, 24, 0, 96];
const DISP_UNITS: [u32; 4] = [1, 8, 4, 3];
/// The rank the session is.
const ME: u32 = 1;

struct Window {
    desc: WindowDesc,
    epoch: EpochState,
    /// The next row of the session's client chain of this window (client-persisted events).
    next_cseq: u64,
    /// Every rank's target engine.
    targets: Vec<Target<u64>>,
}

impl OpenWindows for Window {
    /// Every window id names the one window (the session's lookup is a map).
    fn open(&mut self, _id: u64) -> Option<OpenState<'_>> {
        Some(OpenState {
            desc: &self.desc,
            epoch: &mut self.epoch,
            next_cseq: &mut self.next_cseq,
        })
    }
}

impl Window {
    fn new(no_locks: bool) -> Self {
        let info = WindowInfo {
            no_locks,
            ..WindowInfo::default()
        };
        Window {
            desc: WindowDesc {
                id: 1,
                name: "fuzz".to_string(),
                world: "fuzz".to_string(),
                flavor: Flavor::Create,
                model: MemoryModel::Separate,
                sizes: SIZES.to_vec(),
                disp_units: DISP_UNITS.to_vec(),
                info,
                group: WindowDesc::whole_world(SIZES.len() as u32),
            },
            epoch: EpochState::new(ME, SIZES.len() as u32, no_locks),
            next_cseq: 1,
            targets: SIZES
                .iter()
                .enumerate()
                .map(|(rank, &size)| {
                    let public = vec![0u8; size as usize];
                    let now = Instant::now();
                    Target::new(rank as u32, 4, public, true, Duration::ZERO, now)
                })
                .collect(),
        }
    }

    /// A rank the session goes on to address (`ranks[target]` in the session).
    fn rank(&self, target: u32) -> usize {
        let index = target as usize;
        assert!(index < SIZES.len(), "the session would index rank {target}");
        index
    }

    fn publics(&self) -> Vec<Vec<u8>> {
        self.targets
            .iter()
            .map(|target| target.public().to_vec())
            .collect()
    }

    /// What one's own rank does with pushed bytes.
    fn push(&mut self, segments: Vec<Segment>) {
        if !segments.is_empty() {
            let own = &mut self.targets[ME as usize];
            own.handle(Input::Push { segments }, Instant::now());
            own.take_effects();
        }
    }

    fn call(&mut self, id: u64, call: Call) -> Result<(), RmaError> {
        if matches!(
            call,
            Call::OpenWindow(_) | Call::Barrier(_) | Call::Heartbeat(_)
        ) {
            return Ok(());
        }
        match admit(self, ME, call_from_wire(call)?)? {
            // a closing fence counts its arrival; the last tells every rank of the window
            Admitted::Fence { push, .. }
            | Admitted::Post { push, .. }
            | Admitted::Unlock { push, .. }
            | Admitted::Sync { push } => self.push(push),
            // unified windows only (this one is separate: admission refuses them)
            Admitted::Publish { push, seq } => {
                let own = &mut self.targets[ME as usize];
                own.handle(
                    Input::Publish {
                        segments: push,
                        seq,
                    },
                    Instant::now(),
                );
                own.take_effects();
            }
            Admitted::Follow => {}
            // dynamic windows only (this one is allocated: admission refuses them); carried
            // out as the session does, at one's own rank
            Admitted::Attach { size, at } => {
                let own = &mut self.targets[ME as usize];
                own.handle(Input::Attach { size, at, reply: 0 }, Instant::now());
                own.take_effects();
            }
            Admitted::Detach { base } => {
                let own = &mut self.targets[ME as usize];
                own.handle(Input::Detach { base, reply: 0 }, Instant::now());
                own.take_effects();
            }
            Admitted::UnlockAll { push, released, .. } => {
                self.push(push);
                for target in released {
                    self.rank(target);
                }
            }
            Admitted::Complete { markers } => {
                for (target, _generation) in markers {
                    self.rank(target);
                }
            }
            Admitted::Test { pull } => {
                // the flag comes from the actor: explore both ways (a true flag has the effect
                // of wait)
                self.epoch.tested(pull);
            }
            Admitted::Flush {
                travels: Some((_, target)),
            } => {
                self.rank(target);
            }
            Admitted::FlushAll {
                travels: Some((_, targets)),
            } => {
                for target in targets {
                    self.rank(target);
                }
            }
            Admitted::Op {
                target, op, access, ..
            } => {
                let index = self.rank(target);
                let expected = if op.kind.returns_data() {
                    access.bytes
                } else {
                    0
                };
                // the engine applies it under a NOCHECK lock of this origin
                let engine = &mut self.targets[index];
                let now = Instant::now();
                let lock = Access::LockRequest {
                    request: LockRequest {
                        lock_type: LockType::Exclusive,
                        nocheck: true,
                    },
                    holding_elsewhere: false,
                    grant: None,
                };
                let applied = Access::Op {
                    op_id: id,
                    incarnation: 1,
                    tag: AccessTag::Lock,
                    token: 0,
                    op,
                    access,
                    reply: 0,
                };
                for item in [lock, applied, Access::Unlock { reply: 1 }] {
                    let input = Input::Access {
                        origin: ME,
                        incarnation: 1,
                        item,
                    };
                    engine.handle(input, now);
                }
                let effects = engine.take_effects();
                let answer = effects
                    .answers
                    .iter()
                    .chain(&effects.lazy)
                    .chain(&effects.early)
                    .find(|(reply, _)| *reply == 0)
                    .map(|(_, answer)| answer.clone());
                match answer {
                    Some(Ok(Outcome::Data(data))) => {
                        assert_eq!(data.len() as u64, expected, "the answer's length")
                    }
                    Some(Ok(Outcome::Done)) => assert_eq!(expected, 0, "no data came back"),
                    other => panic!("admission accepted what the engine refuses: {other:?}"),
                }
            }
            Admitted::ClientRows { marker } => {
                assert!(matches!(marker, Event::ClientEvents { .. }));
            }
            Admitted::Recorded { events } => {
                for event in events {
                    assert!(event.is_client_side(), "a server-side event was accepted");
                    if let Event::Store { ranges } | Event::Load { ranges } = &event {
                        assert!(
                            ranges
                                .iter()
                                .all(|&(start, end)| start < end && end <= SIZES[ME as usize]),
                            "a recorded access outside the private copy was accepted"
                        );
                    }
                }
            }
            Admitted::Start { .. }
            | Admitted::Wait { .. }
            | Admitted::Lock { .. }
            | Admitted::LockAll { .. }
            | Admitted::Flush { travels: None }
            | Admitted::FlushAll { travels: None }
            | Admitted::Free { .. } => {}
        }
        Ok(())
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
            let public = window.publics();
            let next_cseq = window.next_cseq;
            if window.call(message.id, call).is_err() {
                assert_eq!(
                    window.epoch, epoch,
                    "a refused call changed the epoch state"
                );
                assert_eq!(
                    window.publics(),
                    public,
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
