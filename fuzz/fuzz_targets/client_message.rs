//! Arbitrary bytes as a session's `ClientMessage`, mapped as the server maps it
//! (`onesided_proto::call_wire::call_from_wire`) and run by rank 1 of a four-rank world in
//! core's simulator (`onesided_core::sim`), which admits, routes and applies every call with
//! the functions the server runs: `origin::admit`, `origin::route`, `Target::handle`.
//!
//! The world is strict (`World::strict`): it panics when a refused call changed its rank's
//! epoch state, client chain or private copy, when an admitted operation is answered with
//! other than the bytes its access covers or refused for what admission checks, and when a
//! route addresses a rank outside the window. Each message runs from five starting states
//! (fresh, inside a fence epoch, lock_all, locks on every rank, a start epoch), each closed
//! afterwards so that what the calls queued is applied, under a schedule seeded by the id;
//! an odd id makes the window `no_locks`.

#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use onesided_core::epoch::LockType::Exclusive;
use onesided_core::origin::Call as Origin;
use onesided_core::sim::{Action, Seeded, World};
use onesided_core::window::WindowDesc;
use onesided_proto::call_wire::call_from_wire;
use onesided_proto::v1::client_message::Call;
use onesided_proto::v1::ClientMessage;
use prost::Message;

const W: u64 = 1;

fn c(calls: impl IntoIterator<Item = Origin>) -> Vec<Action> {
    calls.into_iter().map(Action::Call).collect()
}

/// The starting states: rank 1's calls before and after the fuzzed ones, the other ranks'.
fn states() -> [[Vec<Action>; 3]; 5] {
    let (fence, locks) = (|| Origin::fence(W, 0), 0..4);
    let start = Origin::start(W, vec![0, 2, 3], 0);
    [
        [vec![], vec![], vec![]],
        [c([fence()]), c([fence()]), c([fence(), fence()])],
        [
            c([Origin::lock_all(W, 0)]),
            c([Origin::unlock_all(W)]),
            vec![],
        ],
        [
            c(locks.clone().map(|to| Origin::lock(W, Exclusive, to, 0))),
            c(locks.map(|to| Origin::unlock(W, to))),
            vec![],
        ],
        [
            c([start]),
            c([Origin::Complete { window: W }]),
            c([Origin::post(W, vec![1], 0), Origin::Wait { window: W }]),
        ],
    ]
}

fuzz_target!(|data: &[u8]| {
    let Ok(message) = ClientMessage::decode(data) else {
        return;
    };
    // a batch's calls in order; what does not map is refused before admission
    let calls: Vec<Action> = match message.call {
        None => return,
        Some(Call::Batch(batch)) => batch
            .calls
            .into_iter()
            .filter_map(|inner| inner.call)
            .collect(),
        Some(call) => vec![call],
    }
    .into_iter()
    .filter_map(|call| call_from_wire(call).ok().map(Action::Call))
    .collect();
    // one size and disp_unit per rank: a zero-size rank, a non-power-of-two unit
    let mut window = WindowDesc::created(W, "fuzz", vec![64, 24, 0, 96], vec![1, 8, 4, 3]);
    window.info.no_locks = message.id % 2 == 1;
    for [before, after, other] in states() {
        let me = [before, calls.clone(), after].concat();
        let programs = vec![other.clone(), me, other.clone(), other];
        let world = World::new(4, vec![window.clone()], Instant::now()).expect("a separate window");
        let _ = world.strict().run(programs, &mut Seeded::new(message.id));
    }
});
