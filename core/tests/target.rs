//! The target engine driven directly, with no network: the rules of when what origins send is
//! applied, checked over random interleavings of arrivals.
//!
//! Replies are plain call ids (`u64`); every test reads only the engine's effects.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use onesided_core::audit::Event;
use onesided_core::epoch::{AccessTag, LockRequest, LockType};
use onesided_core::target::{Access, Answer, Departure, Effects, Input, Outcome, Target};
use onesided_core::window::{OpKind, TargetOp};
use onesided_core::{Datatype, ErrorClass, Layout};
use proptest::prelude::*;

const FAIRNESS: Duration = Duration::from_millis(50);

/// A target of `nranks` ranks with `size` bytes, recording events.
fn target(rank: u32, nranks: u32, size: usize) -> Target<u64> {
    Target::new(rank, nranks, vec![0; size], true, FAIRNESS, Instant::now())
}

/// A one-byte put of `value` at `offset`, answered to `reply`.
fn put(offset: u64, value: u8, tag: AccessTag, reply: u64) -> Access<u64> {
    let op = TargetOp {
        kind: OpKind::Put,
        dtype: Datatype::U8,
        disp: offset,
        layout: Layout::contiguous(1),
        data: Bytes::from(vec![value]),
        compare: Bytes::new(),
    };
    let access = op.validate(u64::MAX >> 8, 1).expect("a valid put");
    Access::Op {
        op_id: reply,
        incarnation: 1,
        tag,
        token: 0,
        op,
        access,
        reply,
    }
}

/// A lock request (`grant`: the reply that says it was granted, if one is asked).
fn lock(lock_type: LockType, grant: Option<u64>) -> Access<u64> {
    Access::LockRequest {
        request: LockRequest {
            lock_type,
            nocheck: false,
        },
        holding_elsewhere: false,
        grant,
    }
}

/// An exclusive lock request, as [`lock`].
fn exclusive_lock(grant: Option<u64>) -> Access<u64> {
    lock(LockType::Exclusive, grant)
}

/// `item` from the session `incarnation` of rank `origin`.
fn from_incarnation(origin: u32, incarnation: u64, item: Access<u64>) -> Input<u64> {
    Input::Access {
        origin,
        incarnation,
        item,
    }
}

/// `item` from the first session of rank `origin`.
fn from(origin: u32, item: Access<u64>) -> Input<u64> {
    from_incarnation(origin, 1, item)
}

/// Everything answered, in order (waiting, lazy and early answers alike), but for the
/// acknowledgements of end-of-epoch markers (`Effects::behind`), which go to origins' `complete`
/// calls, not to this target's own rank.
fn answered(effects: &Effects<u64>) -> Vec<(u64, Answer)> {
    effects
        .answers
        .iter()
        .chain(&effects.lazy)
        .chain(&effects.early)
        .map(|(reply, answer)| (*reply, answer.clone()))
        .collect()
}

/// `MPI_Win_fence` number `fence` entered by the owner, closing epoch `closes`, answered to
/// `reply` (nothing pulled).
fn fence_enter(fence: u64, closes: Option<u64>, reply: u64) -> Input<u64> {
    Input::FenceEnter {
        fence,
        closes,
        pull: false,
        reply,
    }
}

/// The owner's `MPI_Win_wait`, answered to `reply` (nothing pulled).
fn wait(reply: u64) -> Input<u64> {
    Input::Wait {
        pull: false,
        test: false,
        reply,
    }
}

/// An origin's complete marker of the first exposure, answered to `reply`.
fn complete_marker(reply: u64) -> Access<u64> {
    Access::CompleteMarker {
        generation: 1,
        reply,
    }
}

/// The only answer of `effects` grants the lock request answered to `reply`, under `token`.
#[track_caller]
fn assert_only_grant(effects: &Effects<u64>, reply: u64, token: u64, what: &str) {
    let answers = answered(effects);
    assert!(
        matches!(&answers[..], [(r, Ok(Outcome::Synced { token: t, .. }))] if *r == reply && *t == token),
        "{what}: {answers:?}"
    );
}

fn ops_applied(effects: &Effects<u64>) -> usize {
    effects
        .events
        .iter()
        .filter(|event| matches!(event, Event::Op { .. }))
        .count()
}

/// One random merge of several sequences, each kept in its own order: `choices[i]` picks
/// which non-empty sequence gives the next item.
fn interleave<T>(mut sequences: Vec<Vec<T>>, choices: &[usize]) -> Vec<T> {
    for sequence in &mut sequences {
        sequence.reverse();
    }
    let mut merged = Vec::new();
    let mut choice = choices.iter().copied().cycle();
    loop {
        let open: Vec<usize> = (0..sequences.len())
            .filter(|&index| !sequences[index].is_empty())
            .collect();
        if open.is_empty() {
            return merged;
        }
        let pick = open[choice.next().unwrap_or(0) % open.len()];
        merged.extend(sequences[pick].pop());
    }
}

/// What drives one exposure test: an origin's item, the owner's post, or the owner's test.
#[allow(clippy::large_enum_variant)]
enum Exposure {
    Origin(u32, Access<u64>),
    Post,
    Probe,
}

/// What drives one fence test: an origin's item, the owner's own call, or an origin entering
/// its fence (the last to enter tells the target, as the session does).
enum Step {
    Origin(u32, Access<u64>),
    Owner(Input<u64>),
    Arrive,
}

proptest! {
    /// A fence that closes epoch 1 at rank 0 returns exactly when every rank entered its fence
    /// (the notice of the last arrival), and by then every operation of the epoch is applied;
    /// no operation of the epoch is applied before rank 0 entered it. The notice reaches the
    /// target behind every operation of the epoch, before or after the owner's own fence.
    #[test]
    fn a_fence_completes_exactly_when_every_rank_arrived_and_every_access_applied(
        nranks in 2u32..6,
        ops in proptest::collection::vec(0usize..4, 6),
        choices in proptest::collection::vec(0usize..64, 1..64),
    ) {
        const FENCE_1: u64 = 1_000;
        const FENCE_2: u64 = 2_000;
        let mut engine = target(0, nranks, 8);
        let mut sequences = Vec::new();
        let mut total_ops = 0;
        for origin in 0..nranks {
            let mut sequence = Vec::new();
            if origin == 0 {
                sequence.push(Step::Owner(Input::FenceEnter { fence: 1, closes: None, pull: false, reply: FENCE_1 }));
            }
            for index in 0..ops[origin as usize] {
                let reply = u64::from(origin) * 100 + index as u64;
                sequence.push(Step::Origin(origin, put(u64::from(origin), index as u8 + 1, AccessTag::Fence { epoch: 1 }, reply)));
                total_ops += 1;
            }
            sequence.push(Step::Arrive);
            if origin == 0 {
                // the owner arrives before it enters its next fence
                sequence.push(Step::Owner(Input::FenceEnter { fence: 2, closes: Some(1), pull: true, reply: FENCE_2 }));
            }
            sequences.push(sequence);
        }
        let mut entered = false;
        let mut arrived = 0;
        let mut applied = 0;
        let mut fence_2_answered = false;
        for step in interleave(sequences, &choices) {
            match step {
                Step::Origin(origin, item) => engine.handle(from(origin, item), Instant::now()),
                Step::Arrive => {
                    arrived += 1;
                    if arrived == nranks {
                        engine.handle(Input::FenceReached { epoch: 1 }, Instant::now());
                    }
                }
                Step::Owner(input) => {
                    entered |= matches!(input, Input::FenceEnter { fence: 1, .. });
                    engine.handle(input, Instant::now());
                }
            }
            let effects = engine.take_effects();
            applied += ops_applied(&effects);
            prop_assert!(entered || applied == 0, "an operation was applied before the fence opened its epoch");
            for (reply, answer) in answered(&effects) {
                prop_assert!(answer.is_ok(), "call {reply} failed: {answer:?}");
                if reply == FENCE_2 {
                    prop_assert_eq!(arrived, nranks, "the fence returned before every rank arrived");
                    prop_assert_eq!(applied, total_ops, "the fence returned before every operation was applied");
                    fence_2_answered = true;
                }
            }
        }
        prop_assert!(fence_2_answered, "the fence never returned");
        prop_assert_eq!(engine.busy(), None);
        // the last put of each origin is what its byte holds
        for origin in 0..nranks {
            prop_assert_eq!(engine.public()[origin as usize], ops[origin as usize] as u8);
        }
    }

    /// PSCW at rank 0 over a random exposure group: `test` says true exactly when every
    /// member's complete has arrived (and then has wait's effect), `wait` returns exactly then,
    /// and the epoch's operations are all applied by that time.
    #[test]
    fn wait_and_test_end_the_exposure_exactly_when_the_group_completed(
        nranks in 2u32..6,
        members in proptest::collection::vec(any::<bool>(), 6),
        ops in proptest::collection::vec(0usize..3, 6),
        tests in proptest::collection::vec(any::<bool>(), 24),
        choices in proptest::collection::vec(0usize..64, 1..64),
        use_test in any::<bool>(),
    ) {
        const WAIT: u64 = 9_000;
        const MARKER: u64 = 8_000;
        let mut group: Vec<u32> = (0..nranks).filter(|&rank| members[rank as usize]).collect();
        if group.is_empty() {
            group.push(nranks - 1);
        }
        let mut engine = target(0, nranks, 8);
        let mut sequences = Vec::new();
        let mut total_ops = 0;
        for &origin in &group {
            let mut sequence = Vec::new();
            for index in 0..ops[origin as usize] {
                let reply = u64::from(origin) * 100 + index as u64;
                sequence.push(Exposure::Origin(origin, put(u64::from(origin), 7, AccessTag::Pscw { generation: 1 }, reply)));
                total_ops += 1;
            }
            let reply = MARKER + u64::from(origin);
            sequence.push(Exposure::Origin(origin, Access::CompleteMarker { generation: 1, reply }));
            sequences.push(sequence);
        }
        // the owner: post, then (between arrivals) tests, then a wait unless a test ended it
        let mut owner = vec![Exposure::Post];
        owner.extend(tests.iter().map(|_| Exposure::Probe));
        sequences.push(owner);
        let mut posted = false;
        let mut completes = 0;
        let mut applied = 0;
        let mut ended = false;
        let mut probe = 0u64;
        for step in interleave(sequences, &choices) {
            match step {
                Exposure::Origin(origin, item) => {
                    completes += usize::from(matches!(item, Access::CompleteMarker { .. }));
                    engine.handle(from(origin, item), Instant::now());
                }
                Exposure::Post => {
                    posted = true;
                    engine.handle(Input::Post { group: group.clone() }, Instant::now());
                }
                Exposure::Probe if use_test && !ended => {
                    probe += 1;
                    engine.handle(Input::Wait { pull: false, test: true, reply: probe }, Instant::now());
                    let effects = engine.take_effects();
                    applied += ops_applied(&effects);
                    let answers = answered(&effects);
                    prop_assert_eq!(answers.len(), 1, "test answers at once");
                    let Ok(Outcome::Synced { flag, .. }) = &answers[0].1 else {
                        panic!("test answered {:?}", answers[0].1);
                    };
                    prop_assert_eq!(*flag, completes == group.len(), "test's flag");
                    if *flag {
                        prop_assert_eq!(applied, total_ops);
                        ended = true;
                    }
                    continue;
                }
                Exposure::Probe => continue,
            }
            let effects = engine.take_effects();
            applied += ops_applied(&effects);
            prop_assert!(posted || applied == 0, "an operation was applied before the post");
            prop_assert!(answered(&effects).iter().all(|(_, answer)| answer.is_ok()));
        }
        if !ended {
            engine.handle(Input::Wait { pull: true, test: false, reply: WAIT }, Instant::now());
            let effects = engine.take_effects();
            let answers = answered(&effects);
            prop_assert_eq!(answers.len(), 1, "every member completed: wait returns at once");
            let waited = matches!(answers[0], (WAIT, Ok(Outcome::Synced { flag: true, .. })));
            prop_assert!(waited, "wait answered {:?}", answers[0]);
            prop_assert_eq!(applied, total_ops);
        }
        prop_assert_eq!(engine.busy(), None, "the exposure epoch ended");
    }

    /// Random lock programs at one target (each origin: lock, an operation, unlock, a few
    /// times): the holders are always compatible, exclusive requests are granted in the order
    /// they arrived, and every program completes once time passes the fairness bound.
    #[test]
    fn lock_grants_are_compatible_fifo_for_writers_and_every_program_completes(
        kinds in proptest::collection::vec(proptest::collection::vec(any::<bool>(), 1..4), 2..6),
        choices in proptest::collection::vec(0usize..64, 1..128),
    ) {
        let nranks = kinds.len() as u32;
        let start = Instant::now();
        let mut engine = target(0, nranks, 8);
        let mut sequences = Vec::new();
        let mut unlocks = 0;
        for (origin, epochs) in kinds.iter().enumerate() {
            let mut sequence = Vec::new();
            for (index, &exclusive) in epochs.iter().enumerate() {
                let lock_type = if exclusive { LockType::Exclusive } else { LockType::Shared };
                let reply = origin as u64 * 100 + index as u64 * 10;
                sequence.push((origin as u32, lock(lock_type, None)));
                sequence.push((origin as u32, put(origin as u64, 1, AccessTag::Lock, reply + 1)));
                sequence.push((origin as u32, Access::Unlock { reply: reply + 2 }));
                unlocks += 1;
            }
            sequences.push(sequence);
        }
        let mut holders: BTreeMap<u32, LockType> = BTreeMap::new();
        let mut exclusive_requests = Vec::new();
        let mut exclusive_grants = Vec::new();
        // requests in arrival order, and whether each was granted; each origin has at most one
        // outstanding
        let mut requests: Vec<(u32, bool)> = Vec::new();
        let mut arrived: Vec<Instant> = Vec::new();
        let mut released = 0;
        let mut now = start;
        let mut check = |effects: Effects<u64>, now: Instant| -> Result<(), TestCaseError> {
            for event in &effects.events {
                match event {
                    Event::LockRequest { origin, lock_type, .. } => {
                        if lock_type == "exclusive" {
                            exclusive_requests.push(*origin);
                        }
                        requests.push((*origin, false));
                        arrived.push(now);
                    }
                    Event::LockGrant { origin, lock_type, .. } => {
                        let lock_type = if lock_type == "exclusive" { LockType::Exclusive } else { LockType::Shared };
                        let index = requests.iter().position(|&(from, granted)| from == *origin && !granted);
                        let Some(index) = index else {
                            return Err(TestCaseError::fail(format!("rank {origin} granted without a request")));
                        };
                        requests[index].1 = true;
                        if lock_type == LockType::Exclusive {
                            exclusive_grants.push(*origin);
                            // an exclusive request waits for every request ahead of it
                            prop_assert!(requests[..index].iter().all(|&(_, granted)| granted), "an exclusive request overtook a waiting one");
                        } else {
                            // writer-fair: a shared request overtakes a waiting exclusive one only
                            // once its fairness wait is over
                            let overtakes = exclusive_requests.len() > exclusive_grants.len()
                                && requests[..index].iter().any(|&(from, granted)| !granted && exclusive_requests.contains(&from));
                            prop_assert!(!overtakes || now.duration_since(arrived[index]) >= FAIRNESS, "a shared request overtook a waiting exclusive one at once");
                        }
                        holders.insert(*origin, lock_type);
                        let exclusive = holders.values().filter(|&&held| held == LockType::Exclusive).count();
                        prop_assert!(exclusive == 0 || holders.len() == 1, "incompatible holders {holders:?}");
                    }
                    Event::LockRelease { origin, .. } => {
                        holders.remove(origin);
                        released += 1;
                    }
                    _ => {}
                }
            }
            for (reply, answer) in answered(&effects) {
                prop_assert!(answer.is_ok(), "call {reply} failed: {answer:?}");
            }
            Ok(())
        };
        for (origin, item) in interleave(sequences, &choices) {
            now += Duration::from_millis(1);
            engine.handle(from(origin, item), now);
            check(engine.take_effects(), now)?;
        }
        // held-back shared requests are granted when their fairness wait ends
        while let Some(deadline) = engine.next_deadline(now) {
            now = deadline;
            engine.tick(now);
            check(engine.take_effects(), now)?;
        }
        prop_assert_eq!(released, unlocks, "every lock epoch completed");
        prop_assert_eq!(&exclusive_grants, &exclusive_requests, "exclusive grants in arrival order");
        prop_assert_eq!(engine.busy(), None);
    }
}

fn proc_failed_naming(answer: &Answer, rank: u32) -> bool {
    matches!(answer, Err(error) if error.class == ErrorClass::ProcFailed
        && error.message.contains(&format!("rank {rank}")))
}

fn departed(origin: u32, active: bool, fenced: Option<u64>) -> Input<u64> {
    Input::Departed(Departure {
        origin,
        incarnation: 1,
        reason: "stream broke".to_string(),
        active,
        vanished: true,
        fenced,
    })
}

/// A departure fails exactly the epochs that need the departed rank: a fence it had not
/// entered, a wait still missing its complete — and not those it had already done its part in.
#[test]
fn a_departure_fails_exactly_the_epochs_that_need_the_departed_rank() {
    for entered in [false, true] {
        let mut engine = target(0, 3, 4);
        engine.handle(fence_enter(1, None, 1), Instant::now());
        engine.take_effects();
        // rank 2 leaves after entering the fence that closes epoch 1, or before
        engine.handle(
            departed(2, true, Some(if entered { 1 } else { 0 })),
            Instant::now(),
        );
        if entered {
            engine.handle(Input::FenceReached { epoch: 1 }, Instant::now());
        }
        engine.handle(fence_enter(2, Some(1), 2), Instant::now());
        let answers = answered(&engine.take_effects());
        assert_eq!(answers.len(), 1, "the fence is answered either way");
        if entered {
            assert!(
                matches!(answers[0].1, Ok(Outcome::Synced { .. })),
                "{answers:?}"
            );
        } else {
            assert!(proc_failed_naming(&answers[0].1, 2), "{answers:?}");
        }
    }

    for completed in [false, true] {
        let mut engine = target(0, 3, 4);
        engine.handle(Input::Post { group: vec![1, 2] }, Instant::now());
        engine.handle(wait(7), Instant::now());
        if completed {
            engine.handle(from(2, complete_marker(12)), Instant::now());
        }
        engine.handle(departed(2, true, None), Instant::now());
        let answers = answered(&engine.take_effects());
        if completed {
            assert!(answers.is_empty(), "rank 2 had done its part: {answers:?}");
            engine.handle(from(1, complete_marker(11)), Instant::now());
            let answers = answered(&engine.take_effects());
            assert!(
                matches!(answers[..], [(7, Ok(Outcome::Synced { flag: true, .. }))]),
                "{answers:?}"
            );
        } else {
            assert!(
                matches!(&answers[..], [(7, answer)] if proc_failed_naming(answer, 2)),
                "{answers:?}"
            );
        }
    }

    // a rank that never synchronized actively here fails nothing by leaving while a newer
    // incarnation is attached
    let mut engine = target(0, 3, 4);
    engine.handle(Input::Post { group: vec![1] }, Instant::now());
    engine.handle(
        Input::Departed(Departure {
            origin: 2,
            incarnation: 1,
            reason: "superseded".to_string(),
            active: false,
            vanished: false,
            fenced: None,
        }),
        Instant::now(),
    );
    engine.handle(from(1, complete_marker(11)), Instant::now());
    engine.handle(wait(7), Instant::now());
    let answers = answered(&engine.take_effects());
    assert!(
        matches!(answers[..], [(7, Ok(Outcome::Synced { flag: true, .. }))]),
        "{answers:?}"
    );
}

/// An operation of a departed rank that still waited for its epoch to open is dropped with
/// the session: the fence closing that epoch then fails naming the rank, although the rank had
/// entered it, rather than return without the operation.
#[test]
fn a_fence_fails_when_a_departed_rank_left_an_operation_of_its_epoch_unapplied() {
    let now = Instant::now();
    let mut engine = target(0, 3, 4);
    // rank 2's put of epoch 1 arrives before rank 0 opened epoch 1: it waits
    engine.handle(from(2, put(2, 9, AccessTag::Fence { epoch: 1 }, 5)), now);
    engine.handle(departed(2, true, Some(1)), now);
    let answers = answered(&engine.take_effects());
    assert!(
        matches!(&answers[..], [(5, answer)] if proc_failed_naming(answer, 2)),
        "{answers:?}"
    );
    for (fence, closes) in [(1, None), (2, Some(1))] {
        engine.handle(fence_enter(fence, closes, fence * 100), now);
        if fence == 1 {
            engine.handle(Input::FenceReached { epoch: 1 }, now);
        }
    }
    let answers = answered(&engine.take_effects());
    assert!(
        matches!(&answers[..], [(100, Ok(_)), (200, answer)] if proc_failed_naming(answer, 2)),
        "{answers:?}"
    );
    assert_eq!(engine.public()[2], 0, "the dropped put was never applied");
}

/// The holder's departure revokes its lock (recorded as a revocation) and the next waiter is
/// granted; what the departed session still had queued fails, a newer incarnation's does not.
#[test]
fn a_departed_holder_is_revoked_and_the_next_waiter_granted() {
    let now = Instant::now();
    let mut engine = target(0, 3, 4);
    engine.handle(from(1, exclusive_lock(Some(11))), now);
    engine.handle(from(2, exclusive_lock(Some(21))), now);
    // queued behind rank 2's request: an operation of rank 2's first incarnation, and one of
    // its second
    engine.handle(from(1, put(0, 5, AccessTag::Lock, 12)), now);
    let effects = engine.take_effects();
    assert!(matches!(
        answered(&effects)[..],
        [
            (11, Ok(Outcome::Synced { token: 1, .. })),
            (12, Ok(Outcome::Done))
        ]
    ));
    engine.handle(departed(1, false, None), now);
    let effects = engine.take_effects();
    assert!(
        effects.events.iter().any(|event| matches!(
            event,
            Event::LockRevoke {
                origin: 1,
                token: 1,
                ..
            }
        )),
        "{:?}",
        effects.events
    );
    assert_only_grant(&effects, 21, 2, "the waiter is granted with the next token");
    // an operation of the revoked holder under its old token is refused, not applied
    let mut stale = put(1, 9, AccessTag::Lock, 13);
    if let Access::Op { token, .. } = &mut stale {
        *token = 1;
    }
    engine.handle(from(1, stale), now);
    let answers = answered(&engine.take_effects());
    assert!(
        matches!(&answers[..], [(13, Err(error))] if error.class == ErrorClass::RmaSync),
        "{answers:?}"
    );
    assert_eq!(engine.public()[1], 0, "the refused put changed nothing");

    // a session of rank 2 (incarnation 2) queues behind rank 2's incarnation 1, which departs
    let mut engine = target(0, 3, 4);
    engine.handle(from(0, exclusive_lock(Some(1))), now);
    engine.handle(from_incarnation(2, 1, Access::Unlock { reply: 30 }), now);
    engine.handle(from_incarnation(2, 2, Access::Flush { reply: 31 }), now);
    engine.take_effects();
    engine.handle(departed(2, false, None), now);
    let answers = answered(&engine.take_effects());
    assert!(
        matches!(&answers[..], [(30, answer), (31, Ok(Outcome::Done))] if proc_failed_naming_session(answer, 2)),
        "{answers:?}"
    );
}

/// An operator revokes a live session's lock: the waiter is granted at once, the holder's
/// later operations, flush and unlock are refused with `MPI_ERR_RMA_SYNC` (never left waiting
/// for a lock that will not come back), and after its unlock it may lock again.
#[test]
fn an_operators_revocation_grants_the_waiter_and_refuses_the_rest_of_the_holders_epoch() {
    let now = Instant::now();
    let mut engine = target(0, 3, 4);
    engine.handle(from(1, exclusive_lock(Some(11))), now);
    engine.handle(from(1, put(0, 5, AccessTag::Lock, 12)), now);
    engine.handle(from(2, exclusive_lock(Some(21))), now);
    engine.take_effects();
    // a session that holds nothing here: nothing changes, nothing is recorded
    assert_eq!(engine.revoke(2, 1, "revoked by an operator", now), None);
    assert_eq!(engine.revoke(1, 2, "revoked by an operator", now), None);
    let effects = engine.take_effects();
    assert!(effects.events.is_empty() && answered(&effects).is_empty());
    assert_eq!(engine.lock_holders(), [1]);

    assert_eq!(engine.revoke(1, 1, "revoked by an operator", now), Some(1));
    let effects = engine.take_effects();
    assert!(
        matches!(&effects.events[..], [Event::LockRevoke { origin: 1, token: 1, reason }, Event::LockGrant { origin: 2, token: 2, .. }, ..] if reason == "revoked by an operator"),
        "{:?}",
        effects.events
    );
    assert_only_grant(&effects, 21, 2, "the waiter is granted");
    // rank 1's epoch goes on sending: a put (lazy lock, token 0), a flush, then its unlock
    engine.handle(from(1, put(1, 9, AccessTag::Lock, 13)), now);
    engine.handle(from(1, Access::Flush { reply: 14 }), now);
    engine.handle(from(1, Access::Unlock { reply: 15 }), now);
    let mut answers = answered(&engine.take_effects());
    answers.sort_by_key(|(reply, _)| *reply);
    let revoked = |answer: &Answer| {
        matches!(answer, Err(error) if error.class == ErrorClass::RmaSync
            && error.message.contains("revoked by an operator"))
    };
    assert!(
        matches!(&answers[..], [(13, a), (14, b), (15, c)] if revoked(a) && revoked(b) && revoked(c)),
        "{answers:?}"
    );
    assert_eq!(
        engine.public()[..2],
        [5, 0],
        "the refused put changed nothing"
    );
    assert_eq!(engine.lock_holders(), [2], "rank 2 holds the lock");
    // rank 2's epoch is untouched; once it unlocks, rank 1 locks again as usual
    engine.handle(from(2, put(2, 7, AccessTag::Lock, 22)), now);
    engine.handle(from(2, Access::Unlock { reply: 23 }), now);
    engine.handle(from(1, exclusive_lock(Some(16))), now);
    engine.handle(from(1, put(3, 8, AccessTag::Lock, 17)), now);
    let mut answers = answered(&engine.take_effects());
    answers.sort_by_key(|(reply, _)| *reply);
    assert!(
        matches!(
            &answers[..],
            [
                (16, Ok(Outcome::Synced { token: 3, .. })),
                (17, Ok(Outcome::Done)),
                (22, Ok(Outcome::Done)),
                (23, Ok(Outcome::Done))
            ]
        ),
        "{answers:?}"
    );
    assert_eq!(engine.public(), [5, 0, 7, 8]);
}

fn proc_failed_naming_session(answer: &Answer, rank: u32) -> bool {
    matches!(answer, Err(error) if error.class == ErrorClass::ProcFailed
        && error.message.contains(&format!("session of rank {rank}")))
}

/// Freeing the window fails everything still waiting with `MPI_ERR_WIN`.
#[test]
fn stop_fails_everything_pending_with_err_win() {
    let now = Instant::now();
    let mut engine = target(1, 3, 4);
    engine.handle(from(0, exclusive_lock(None)), now);
    engine.handle(from(2, lock(LockType::Shared, Some(1))), now);
    engine.handle(from(2, put(0, 1, AccessTag::Fence { epoch: 3 }, 2)), now);
    engine.handle(wait(3), now);
    engine.take_effects();
    engine.handle(Input::Stop, now);
    let answers = answered(&engine.take_effects());
    let failed: BTreeSet<u64> = answers
        .iter()
        .filter(|(_, answer)| matches!(answer, Err(error) if error.class == ErrorClass::Win))
        .map(|(reply, _)| *reply)
        .collect();
    assert_eq!(failed, BTreeSet::from([1, 2, 3]), "{answers:?}");
}

/// A window a node no longer serves (its world moved) fails everything still waiting with
/// `MPI_ERR_IO` and records nothing: it was not freed, its log goes on elsewhere.
#[test]
fn abandon_fails_everything_pending_with_err_io_and_records_nothing() {
    let now = Instant::now();
    for rank in [0, 1] {
        let mut engine = target(rank, 3, 4);
        engine.handle(from(2, exclusive_lock(Some(1))), now);
        engine.handle(from(1 - rank.min(1), exclusive_lock(Some(2))), now);
        engine.take_effects();
        engine.handle(Input::Abandon, now);
        let effects = engine.take_effects();
        assert!(effects.events.is_empty(), "{:?}", effects.events);
        let answers = answered(&effects);
        assert!(
            answers.iter().any(|(reply, answer)| *reply == 2
                && matches!(answer, Err(error) if error.class == ErrorClass::Io)),
            "{answers:?}"
        );
        // a freed window of rank 0 records it; an abandoned one never does
        let mut freed = target(rank, 3, 4);
        freed.handle(Input::Stop, now);
        let recorded = freed.take_effects().events;
        assert_eq!(recorded.len(), usize::from(rank == 0), "{recorded:?}");
    }
}

#[test]
fn inspect_shows_the_holder_the_waiter_and_what_waits_behind_it() {
    let now = Instant::now();
    let mut engine = target(0, 3, 4);
    engine.handle(from(1, exclusive_lock(Some(11))), now);
    engine.handle(from(2, exclusive_lock(None)), now);
    engine.handle(from(2, put(0, 5, AccessTag::Lock, 21)), now);
    let later = now + Duration::from_millis(30);
    let view = engine.inspect(later);
    assert_eq!(view.rank, 0);
    assert_eq!(
        view.holders
            .iter()
            .map(|holder| (holder.origin, holder.lock_type, holder.token))
            .collect::<Vec<_>>(),
        [(1, LockType::Exclusive, 1)]
    );
    assert_eq!(view.waiters.len(), 1);
    assert_eq!(view.waiters[0].origin, 2);
    assert_eq!(view.waiters[0].waited, Duration::from_millis(30));
    assert_eq!(
        view.queued
            .iter()
            .map(|item| (item.origin, item.what.as_str()))
            .collect::<Vec<_>>(),
        [(2, "put (under lock)")]
    );
    assert_eq!(view.fence, None);
    assert_eq!(view.exposed_to, None);

    // the holder unlocks: rank 2 holds, nothing waits, its put was applied
    engine.handle(from(1, Access::Unlock { reply: 12 }), later);
    let view = engine.inspect(later);
    assert_eq!(
        view.holders
            .iter()
            .map(|holder| holder.origin)
            .collect::<Vec<_>>(),
        [2]
    );
    assert!(
        view.waiters.is_empty() && view.queued.is_empty(),
        "{view:?}"
    );
}

/// The lock table against a reference model, step by step.
#[path = "target/lock_model.rs"]
mod lock_model;

/// The unified model: the owner follows its public copy — the whole copy first, then each
/// change as it is applied, numbered by the owner's publications that came before it.
#[test]
fn unified_changes_go_to_the_owner_as_they_happen() {
    use onesided_core::target::{Segment, Update};
    use onesided_core::window::MemoryModel;
    let now = Instant::now();
    let mut target = target(1, 2, 4).with_model(MemoryModel::Unified);
    target.handle(Input::Follow { reply: 1 }, now);
    let effects = target.take_effects();
    assert_eq!(
        effects.updates,
        vec![Update {
            published: 0,
            segments: vec![Segment {
                offset: 0,
                data: Bytes::from(vec![0; 4])
            }]
        }]
    );
    assert_eq!(answered(&effects), vec![(1, Ok(Outcome::Done))]);
    // the owner's store, numbered 7, then a remote put of another byte under a lock
    target.handle(
        Input::Publish {
            segments: vec![Segment {
                offset: 0,
                data: Bytes::from_static(&[9]),
            }],
            seq: 7,
        },
        now,
    );
    let effects = target.take_effects();
    assert!(effects.updates.is_empty(), "a store is not sent back");
    assert!(matches!(
        effects.events[..],
        [Event::Published { offset: 0, .. }]
    ));
    target.handle(from(0, exclusive_lock(None)), now);
    target.handle(from(0, put(2, 5, AccessTag::Lock, 2)), now);
    let effects = target.take_effects();
    assert_eq!(
        effects.updates,
        vec![Update {
            published: 7,
            segments: vec![Segment {
                offset: 2,
                data: Bytes::from_static(&[5])
            }]
        }]
    );
    assert_eq!(target.public(), &[9, 0, 5, 0]);
    // no pull collects them again: the owner has them
    target.handle(Input::Pull { reply: 3 }, now);
    let effects = target.take_effects();
    assert_eq!(
        answered(&effects),
        vec![(
            3,
            Ok(Outcome::Synced {
                pull: Vec::new(),
                flag: false,
                token: 0
            })
        )]
    );
}

/// The separate model sends nothing by itself, and refuses to be followed.
#[test]
fn separate_changes_wait_for_the_owners_pull() {
    let now = Instant::now();
    let mut target = target(1, 2, 4);
    target.handle(Input::Follow { reply: 1 }, now);
    let effects = target.take_effects();
    assert!(effects.updates.is_empty());
    assert!(matches!(
        &answered(&effects)[..],
        [(1, Err(error))] if error.class == ErrorClass::Arg
    ));
    target.handle(from(0, put(2, 5, AccessTag::Fence { epoch: 0 }, 2)), now);
    assert!(target.take_effects().updates.is_empty());
}

/// A put of `data` at byte `offset` of the rank's memory, in fence epoch 0 (open at once).
fn put_bytes(offset: u64, data: &[u8], reply: u64) -> Input<u64> {
    let op = TargetOp {
        kind: OpKind::Put,
        dtype: Datatype::U8,
        disp: offset,
        layout: Layout::contiguous(data.len() as u64),
        data: Bytes::from(data.to_vec()),
        compare: Bytes::new(),
    };
    let access = op.validate(u64::MAX >> 8, 1).expect("a valid put");
    from(
        0,
        Access::Op {
            op_id: reply,
            incarnation: 1,
            tag: AccessTag::Fence { epoch: 0 },
            token: 0,
            op,
            access,
            reply,
        },
    )
}

/// `input` handled at `now`: its one answer, and the events it recorded.
fn one_answer(t: &mut Target<u64>, input: Input<u64>, now: Instant) -> (Answer, Vec<Event>) {
    t.handle(input, now);
    let effects = t.take_effects();
    let answers = answered(&effects);
    assert_eq!(answers.len(), 1, "{answers:?}");
    (answers[0].1.clone(), effects.events)
}

/// A dynamic window's answer to an attach: the region at `offset` past its first address.
fn attached_at(offset: u64) -> Answer {
    Ok(Outcome::Attached {
        base: onesided_core::window::DYNAMIC_BASE + offset,
    })
}

/// The owner attaches a region of `size` bytes (at address `at`, if asked), answered to 1.
fn attach(size: u64, at: Option<u64>) -> Input<u64> {
    Input::Attach { size, at, reply: 1 }
}

/// The owner detaches the region at address `base`, answered to `reply`.
fn detach(base: u64, reply: u64) -> Input<u64> {
    Input::Detach { base, reply }
}

/// A dynamic target (rank 1 of 2, room for 64 bytes of regions) whose first region, of
/// `size` bytes, was just attached at its first address.
fn dynamic_with_first_region(size: u64, now: Instant) -> Target<u64> {
    let mut t = target(1, 2, 0).with_dynamic(64, BTreeMap::new());
    let (first, events) = one_answer(&mut t, attach(size, None), now);
    assert_eq!(first, attached_at(0));
    let base = onesided_core::window::DYNAMIC_BASE;
    assert_eq!(events, vec![Event::RegionAttached { base, size }]);
    t
}

fn class_of(answer: &Answer) -> Option<ErrorClass> {
    answer.as_ref().err().map(|error| error.class)
}

#[test]
fn a_dynamic_target_hands_out_addresses_and_applies_only_inside_one_region() {
    use onesided_core::window::DYNAMIC_BASE;
    let now = Instant::now();
    // regions one after the other, from the first address
    let mut t = dynamic_with_first_region(16, now);
    let call = |t: &mut Target<u64>, input: Input<u64>| one_answer(t, input, now);
    let (second, _) = call(&mut t, attach(8, None));
    assert_eq!(second, attached_at(16));
    assert_eq!(t.public().len(), 24);
    // overlapping, too large: refused, nothing recorded, nothing grows
    for (size, at, class) in [
        (4, Some(DYNAMIC_BASE + 4), ErrorClass::RmaAttach),
        (8, Some(DYNAMIC_BASE + 20), ErrorClass::RmaAttach),
        (41, None, ErrorClass::RmaAttach),
        (8, Some(4), ErrorClass::RmaAttach),
    ] {
        let (answer, events) = call(&mut t, attach(size, at));
        assert_eq!(class_of(&answer), Some(class), "{size} at {at:?}");
        assert!(events.is_empty());
    }
    assert_eq!(t.public().len(), 24);
    assert_eq!(t.regions().unwrap().len(), 2);
    // asked for by address, past the end: the copy grows to it
    let (third, _) = call(&mut t, attach(8, Some(DYNAMIC_BASE + 40)));
    assert_eq!(third, attached_at(40));
    assert_eq!(t.public().len(), 48);
    // inside one region: applied; across two adjacent regions, in a gap, past the end: not
    let (inside, _) = call(&mut t, put_bytes(14, &[7, 8], 2));
    assert_eq!(inside, Ok(Outcome::Done));
    for (offset, len) in [(15, 2), (24, 1), (30, 12), (48, 1)] {
        let (answer, events) = call(&mut t, put_bytes(offset, &vec![9; len], 3));
        assert_eq!(
            class_of(&answer),
            Some(ErrorClass::RmaRange),
            "{offset}+{len}"
        );
        assert!(events.is_empty());
    }
    assert_eq!(t.public()[13..18], [0, 7, 8, 0, 0]);
    // detached: the region's bytes are no longer reachable, and it cannot go twice
    let (detached, events) = call(&mut t, detach(DYNAMIC_BASE, 4));
    assert_eq!(detached, Ok(Outcome::Done));
    assert_eq!(
        events,
        vec![Event::RegionDetached {
            base: DYNAMIC_BASE,
            size: 16
        }]
    );
    let (after, _) = call(&mut t, put_bytes(14, &[1], 5));
    assert_eq!(class_of(&after), Some(ErrorClass::RmaRange));
    for base in [DYNAMIC_BASE, DYNAMIC_BASE + 17, 0] {
        let (again, _) = call(&mut t, detach(base, 6));
        assert_eq!(class_of(&again), Some(ErrorClass::RmaAttach), "{base:#x}");
    }
    assert_eq!(t.public()[14], 7);
    // what a new session of the owner starts from: the regions still attached, their bytes
    let (kept, _) = call(&mut t, put_bytes(17, &[3, 4], 8));
    assert_eq!(kept, Ok(Outcome::Done));
    assert_eq!(
        t.attached_regions(),
        vec![
            (DYNAMIC_BASE + 16, vec![0, 3, 4, 0, 0, 0, 0, 0]),
            (DYNAMIC_BASE + 40, vec![0; 8]),
        ]
    );
    // a window of another flavor has no regions
    let mut fixed = target(1, 2, 8);
    assert!(fixed.attached_regions().is_empty());
    let (refused, _) = call(&mut fixed, attach(8, None));
    assert_eq!(class_of(&refused), Some(ErrorClass::RmaFlavor));
    let (refused, _) = call(&mut fixed, detach(DYNAMIC_BASE, 7));
    assert_eq!(class_of(&refused), Some(ErrorClass::RmaFlavor));
}

#[test]
fn a_dynamic_target_attaches_and_detaches_regions_of_no_bytes() {
    use onesided_core::window::DYNAMIC_BASE;
    let now = Instant::now();
    // MPI_Win_attach of size 0 is legal: an address of its own, and no bytes
    let mut t = dynamic_with_first_region(0, now);
    let call = |t: &mut Target<u64>, input: Input<u64>| one_answer(t, input, now);
    assert_eq!(t.public().len(), 1, "it spans its one address");
    assert_eq!(t.attach_growth(0, None), 1);
    let (full, _) = call(&mut t, attach(8, None));
    assert_eq!(full, attached_at(1));
    // by address, inside a region with bytes: it overlaps nothing
    let (inside, _) = call(&mut t, attach(0, Some(DYNAMIC_BASE + 4)));
    assert_eq!(inside, attached_at(4));
    assert_eq!(t.public().len(), 9);
    assert_eq!(t.regions().unwrap().len(), 1);
    assert_eq!(t.attached_regions(), vec![(DYNAMIC_BASE + 1, vec![0; 8])]);
    // no access reaches its address
    let (refused, _) = call(&mut t, put_bytes(0, &[1], 3));
    assert_eq!(class_of(&refused), Some(ErrorClass::RmaRange));
    // each detaches once, and the region with bytes stays
    for (base, size) in [(DYNAMIC_BASE + 4, 0), (DYNAMIC_BASE, 0)] {
        let (gone, events) = call(&mut t, detach(base, 2));
        assert_eq!(gone, Ok(Outcome::Done));
        assert_eq!(events, vec![Event::RegionDetached { base, size }]);
        let (again, _) = call(&mut t, detach(base, 2));
        assert_eq!(class_of(&again), Some(ErrorClass::RmaAttach), "{base:#x}");
    }
    let (kept, _) = call(&mut t, put_bytes(4, &[7], 4));
    assert_eq!(kept, Ok(Outcome::Done));
    // where a region with bytes starts at the same address (asked for), it detaches first
    let (shared, _) = call(&mut t, attach(0, Some(DYNAMIC_BASE + 1)));
    assert!(shared.is_ok(), "{shared:?}");
    for size in [8, 0] {
        let (gone, events) = call(&mut t, detach(DYNAMIC_BASE + 1, 2));
        assert_eq!(gone, Ok(Outcome::Done));
        let base = DYNAMIC_BASE + 1;
        assert_eq!(events, vec![Event::RegionDetached { base, size }]);
    }
    // recovery hands them back like any region
    let mut back = target(1, 2, 0).with_dynamic(64, BTreeMap::from([(0, 8), (16, 0)]));
    assert_eq!(back.regions().unwrap().len(), 1);
    let (recovered, _) = call(&mut back, detach(DYNAMIC_BASE + 16, 2));
    assert_eq!(recovered, Ok(Outcome::Done));
}

proptest! {
    /// The non-zero segments of any copy rebuild it from zeros, and cover no zero run of 64
    /// bytes or more.
    #[test]
    fn nonzero_segments_rebuild_the_copy(
        runs in proptest::collection::vec((0usize..200, 0u8..4), 0..20)
    ) {
        use onesided_core::target::Segment;
        let mut copy = Vec::new();
        for (len, value) in runs {
            copy.extend(std::iter::repeat_n(value, len));
        }
        let segments = Segment::nonzero(&copy);
        let mut rebuilt = vec![0u8; copy.len()];
        for segment in &segments {
            let start = segment.offset as usize;
            rebuilt[start..start + segment.data.len()].copy_from_slice(&segment.data);
            prop_assert!(segment.data.first() != Some(&0) && segment.data.last() != Some(&0));
            prop_assert!(!segment.data.windows(64).any(|run| run.iter().all(|&b| b == 0)));
        }
        prop_assert_eq!(rebuilt, copy);
    }
}

/// A fence epoch's put waits for its commit but starts none (`Effects::lazy`): the target
/// answers its own rank's closing fence after it, in `answers`, and that commit carries both.
/// A get of the same epoch returns data, so its answer still starts a commit.
#[test]
fn a_fence_epochs_put_waits_for_a_commit_it_does_not_start() {
    let now = Instant::now();
    let mut target = target(1, 2, 4);
    target.handle(put_bytes(0, &[7], 2), now);
    let effects = target.take_effects();
    assert_eq!(ops_applied(&effects), 1);
    assert!(effects.answers.is_empty() && effects.early.is_empty());
    assert!(matches!(&effects.lazy[..], [(2, Ok(Outcome::Done))]));

    let op = TargetOp {
        kind: OpKind::Get,
        dtype: Datatype::U8,
        disp: 0,
        layout: Layout::contiguous(1),
        data: Bytes::new(),
        compare: Bytes::new(),
    };
    let access = op.validate(u64::MAX >> 8, 1).expect("a valid get");
    let get = Access::Op {
        op_id: 3,
        incarnation: 1,
        tag: AccessTag::Fence { epoch: 0 },
        token: 0,
        op,
        access,
        reply: 3,
    };
    target.handle(from(0, get), now);
    let effects = target.take_effects();
    assert!(effects.lazy.is_empty() && effects.early.is_empty());
    assert!(matches!(&effects.answers[..], [(3, Ok(Outcome::Data(data)))] if data[..] == [7]));
}

/// A PSCW epoch's put, like a fence epoch's, waits for a commit but starts none
/// (`Effects::lazy`); the origin's end-of-epoch marker, which travels behind it, is
/// acknowledged in `Effects::behind` after it is applied — also when both arrived before the
/// post and waited for it — and the origin's `complete` waits for that acknowledgement, whose
/// commit carries the put. The owner's wait ends with the marker, in `answers`.
#[test]
fn a_pscw_epochs_put_rides_on_the_acknowledgement_of_its_complete_marker() {
    let now = Instant::now();
    for before_the_post in [false, true] {
        let mut target = target(1, 2, 4);
        if !before_the_post {
            target.handle(Input::Post { group: vec![0] }, now);
        }
        target.handle(wait(7), now);
        target.handle(
            from(0, put(0, 5, AccessTag::Pscw { generation: 1 }, 2)),
            now,
        );
        if !before_the_post {
            let effects = target.take_effects();
            assert_eq!(ops_applied(&effects), 1);
            assert!(effects.answers.is_empty() && effects.early.is_empty());
            assert!(effects.behind.is_empty());
            assert!(matches!(&effects.lazy[..], [(2, Ok(Outcome::Done))]));
        }
        target.handle(from(0, complete_marker(3)), now);
        if before_the_post {
            let effects = target.take_effects();
            assert_eq!(ops_applied(&effects), 0, "nothing applied before the post");
            assert!(effects.behind.is_empty(), "{:?}", effects.behind);
            target.handle(Input::Post { group: vec![0] }, now);
        }
        let effects = target.take_effects();
        if before_the_post {
            assert_eq!(ops_applied(&effects), 1);
            assert!(matches!(&effects.lazy[..], [(2, Ok(Outcome::Done))]));
        } else {
            assert_eq!(ops_applied(&effects), 0);
        }
        assert!(matches!(&effects.behind[..], [(3, Ok(Outcome::Done))]));
        assert!(
            matches!(
                &effects.answers[..],
                [(7, Ok(Outcome::Synced { flag: true, .. }))]
            ),
            "{:?}",
            effects.answers
        );
        assert!(effects.events.contains(&Event::WaitExit));
    }
}

/// A second fence entered while the first still waits is refused with `RMA_SYNC`, and the first
/// is still answered when its epoch closes: no answer is ever dropped (the session takes a
/// rank's next fence only after its last one returned).
#[test]
fn a_second_fence_while_one_waits_is_refused_and_the_first_still_answers() {
    let now = Instant::now();
    let mut engine = target(0, 2, 4);
    engine.handle(fence_enter(1, None, 100), now);
    engine.handle(fence_enter(2, Some(1), 200), now);
    engine.handle(fence_enter(3, Some(2), 300), now);
    let answers = answered(&engine.take_effects());
    assert!(
        matches!(&answers[..], [(100, Ok(_)), (300, Err(error))] if error.class == ErrorClass::RmaSync),
        "{answers:?}"
    );
    engine.handle(Input::FenceReached { epoch: 1 }, now);
    let answers = answered(&engine.take_effects());
    assert!(matches!(&answers[..], [(200, Ok(_))]), "{answers:?}");
}
