//! The simulator against MPI's rules: what MPI guarantees holds under every schedule tried,
//! what it allows shows up, and a seed gives the same run every time.

use std::collections::BTreeSet;
use std::time::Instant;

use bytes::Bytes;
use onesided_core::assert::Assert;
use onesided_core::epoch::LockType;
use onesided_core::layout::Layout;
use onesided_core::origin::Call;
use onesided_core::sim::{Action, Replay, Run, Seeded, World};
use onesided_core::window::{Flavor, MemoryModel, OpKind, TargetOp, WindowDesc, WindowInfo};
use onesided_core::{Datatype, ErrorClass};

const W: u64 = 1;

fn window(nranks: u32, size: u64) -> WindowDesc {
    WindowDesc {
        id: W,
        name: "w".to_string(),
        world: "sim".to_string(),
        flavor: Flavor::Create,
        model: MemoryModel::Separate,
        sizes: vec![size; nranks as usize],
        disp_units: vec![1; nranks as usize],
        info: WindowInfo::default(),
        group: WindowDesc::whole_world(nranks),
    }
}

fn run(nranks: u32, size: u64, programs: Vec<Vec<Action>>, seed: u64) -> Run {
    let world =
        World::new(nranks, vec![window(nranks, size)], Instant::now()).expect("a separate window");
    world.run(programs, &mut Seeded::new(seed))
}

fn call(call: Call) -> Action {
    Action::Call(call)
}

fn fence(assert: u32) -> Action {
    call(Call::Fence {
        window: W,
        assert,
        push: Vec::new(),
    })
}

fn op(target: u32, kind: OpKind, disp: u64, data: &[u8]) -> Action {
    let count = if kind == OpKind::Get {
        1
    } else {
        data.len() as u64
    };
    call(Call::Op {
        window: W,
        target,
        token: 0,
        request_based: false,
        op: Ok(TargetOp {
            kind,
            dtype: Datatype::U8,
            disp,
            layout: Layout::contiguous(count),
            data: Bytes::copy_from_slice(data),
            compare: Bytes::new(),
        }),
    })
}

fn lock(target: u32) -> Action {
    call(Call::Lock {
        window: W,
        lock_type: LockType::Exclusive,
        target,
        assert: 0,
    })
}

fn unlock(target: u32) -> Action {
    call(Call::Unlock {
        window: W,
        target,
        push: Vec::new(),
    })
}

fn load(label: &str) -> Action {
    Action::Load {
        window: W,
        offset: 0,
        len: 1,
        label: label.to_string(),
    }
}

fn loaded(run: &Run, label: &str) -> Vec<u8> {
    let found = run.loads.iter().find(|(_, name, _)| name == label);
    found.map(|(_, _, bytes)| bytes.clone()).unwrap_or_default()
}

/// A put between two fences is in the target's private copy after the second fence, in
/// every schedule; and the target's own store between them, published at the fence, is
/// either overwritten or not — never a third value.
#[test]
fn a_put_inside_a_fence_epoch_is_visible_after_the_closing_fence_in_every_schedule() {
    for seed in 0..300 {
        let programs = vec![
            vec![fence(0), fence(0), load("after")],
            vec![fence(0), op(0, OpKind::Put, 0, &[42]), fence(0)],
        ];
        let run = run(2, 4, programs, seed);
        assert!(run.errors.is_empty(), "seed {seed}: {:?}", run.errors);
        assert!(run.stuck.is_empty(), "seed {seed}: {:?}", run.stuck);
        assert_eq!(loaded(&run, "after"), vec![42], "seed {seed}");
        assert_eq!(run.publics[&W][0][0], 42, "seed {seed}");
    }
}

/// The seed documents' fence thread: a store to one's own window before a fence that a
/// remote get reads after it (the get sees the store: the fence published it).
#[test]
fn a_store_before_a_fence_is_what_a_get_of_the_next_epoch_reads() {
    for seed in 0..300 {
        let store = Action::Store {
            window: W,
            offset: 0,
            bytes: vec![7],
        };
        let programs = vec![
            vec![fence(0), store, fence(0), fence(0)],
            vec![fence(0), fence(0), op(0, OpKind::Get, 0, &[]), fence(0)],
        ];
        let run = run(2, 4, programs, seed);
        assert!(run.errors.is_empty(), "seed {seed}: {:?}", run.errors);
        assert_eq!(run.fetched, vec![(1, 2, vec![7])], "seed {seed}");
    }
}

/// Two origins that each lock a target exclusively and put their own value: MPI orders the
/// epochs either way, and both orders show up across seeds; the lock is never shared.
#[test]
fn both_orders_of_two_exclusive_lock_epochs_show_up() {
    let mut finals = BTreeSet::new();
    for seed in 0..200 {
        let programs = vec![
            vec![],
            vec![lock(0), op(0, OpKind::Put, 0, &[1]), unlock(0)],
            vec![lock(0), op(0, OpKind::Put, 0, &[2]), unlock(0)],
        ];
        let run = run(3, 1, programs, seed);
        assert!(run.errors.is_empty(), "seed {seed}: {:?}", run.errors);
        assert!(run.stuck.is_empty(), "seed {seed}: {:?}", run.stuck);
        finals.insert(run.publics[&W][0][0]);
    }
    assert_eq!(finals, BTreeSet::from([1, 2]));
}

/// The same seed gives the same run, step for step; a recorded trace replays it; another
/// seed gives another interleaving.
#[test]
fn a_seed_gives_the_same_run_and_its_trace_replays_it() {
    let programs = || {
        vec![
            vec![fence(0), op(1, OpKind::Put, 0, &[3]), fence(0), load("a")],
            vec![fence(0), op(0, OpKind::Put, 0, &[4]), fence(0), load("b")],
        ]
    };
    let first = run(2, 1, programs(), 11);
    assert_eq!(first, run(2, 1, programs(), 11));
    let world = World::new(2, vec![window(2, 1)], Instant::now()).unwrap();
    let replayed = world.run(programs(), &mut Replay::new(first.trace.clone()));
    assert_eq!(replayed, first);
    let traces: BTreeSet<_> = (0..20)
        .map(|seed| run(2, 1, programs(), seed).trace)
        .collect();
    assert!(traces.len() > 1, "20 seeds gave one interleaving");
}

/// A rank that fences alone waits forever: the run ends with it stuck, and says where.
#[test]
fn a_fence_no_other_rank_enters_is_reported_stuck() {
    let programs = vec![vec![fence(0), fence(0)], vec![fence(0)]];
    let run = run(2, 1, programs, 3);
    assert_eq!(run.stuck.len(), 1, "{:?}", run.stuck);
    assert_eq!(run.stuck[0].rank, 0);
    assert_eq!(run.stuck[0].action, Some(1));
    assert_eq!(run.stuck[0].on, vec![1], "it waits for rank 1's fence");
}

/// An illegal call is refused as the server refuses it and changes nothing; the program goes
/// on.
#[test]
fn an_illegal_call_is_refused_with_its_class_and_the_program_goes_on() {
    let programs = vec![
        vec![
            op(1, OpKind::Put, 0, &[1]),
            fence(Assert::NOPRECEDE),
            fence(Assert::NOSUCCEED),
        ],
        vec![fence(Assert::NOPRECEDE), fence(Assert::NOSUCCEED)],
    ];
    let run = run(2, 1, programs, 5);
    assert_eq!(run.errors.len(), 1, "{:?}", run.errors);
    assert_eq!(run.errors[0].2.class, ErrorClass::RmaSync);
    assert!(run.stuck.is_empty(), "{:?}", run.stuck);
}

fn store(value: u8, offset: u64) -> Action {
    Action::Store {
        window: W,
        offset,
        bytes: vec![value],
    }
}

fn pscw(name: &str, group: &[u32]) -> Action {
    let window = W;
    let group = group.to_vec();
    call(match name {
        "post" => Call::Post {
            window,
            group,
            assert: 0,
            push: Vec::new(),
        },
        "start" => Call::Start {
            window,
            group,
            assert: 0,
        },
        "complete" => Call::Complete { window },
        _ => Call::Wait { window },
    })
}

fn get(target: u32, disp: u64) -> Action {
    op(target, OpKind::Get, disp, &[])
}

/// SEMANTICS.md example 4: A stores Y before its post (published: B's get of Y is y1 in every
/// schedule) and X during the epoch (complete and wait need not publish it: B's get of X is
/// the old value in some schedules, the new one where A published early; MPI allows both).
#[test]
fn example_4_a_store_during_a_pscw_epoch_is_not_published_by_complete_or_wait() {
    let mut xs = BTreeSet::new();
    for seed in 0..300 {
        let a = vec![
            store(11, 1),
            pscw("post", &[0, 1]),
            pscw("start", &[0]),
            store(22, 0),
            pscw("complete", &[]),
            pscw("wait", &[]),
            Action::Barrier,
        ];
        let b = vec![
            pscw("start", &[0]),
            pscw("complete", &[]),
            Action::Barrier,
            lock(0),
            get(0, 0),
            get(0, 1),
            unlock(0),
        ];
        let run = run(2, 2, vec![a, b], seed);
        assert!(run.errors.is_empty(), "seed {seed}: {:?}", run.errors);
        assert!(run.stuck.is_empty(), "seed {seed}: {:?}", run.stuck);
        let fetched = |call| {
            let found = run
                .fetched
                .iter()
                .find(|&&(rank, at, _)| rank == 1 && at == call);
            found.map(|(_, _, bytes)| bytes[0])
        };
        assert_eq!(fetched(5), Some(11), "seed {seed}: Y is guaranteed");
        xs.insert(fetched(4).unwrap());
        assert_eq!(
            run.privates[&W][0],
            vec![22, 11],
            "seed {seed}: A's own stores"
        );
    }
    assert_eq!(
        xs,
        BTreeSet::from([0, 22]),
        "the obsolete X and the early one"
    );
}

/// SEMANTICS.md example 5: a put under B's lock, a barrier, then B's load right after its post
/// and start may see the old value (post and start need not pull) or the new one (pulled
/// early), and after its wait sees the new one in every schedule.
#[test]
fn example_5_a_load_after_post_is_obsolete_and_after_wait_is_current() {
    let mut early = BTreeSet::new();
    for seed in 0..300 {
        let a = vec![
            lock(1),
            op(1, OpKind::Put, 0, &[9]),
            unlock(1),
            Action::Barrier,
        ];
        let b = vec![
            Action::Barrier,
            pscw("post", &[1]),
            pscw("start", &[1]),
            load("early"),
            pscw("complete", &[]),
            pscw("wait", &[]),
            load("late"),
        ];
        let run = run(2, 1, vec![a, b], seed);
        assert!(run.errors.is_empty(), "seed {seed}: {:?}", run.errors);
        assert!(run.stuck.is_empty(), "seed {seed}: {:?}", run.stuck);
        early.insert(loaded(&run, "early")[0]);
        assert_eq!(loaded(&run, "late"), vec![9], "seed {seed}");
    }
    assert_eq!(
        early,
        BTreeSet::from([0, 9]),
        "the obsolete value and the early one"
    );
}

/// Three ranks in lock_all epochs: A puts to B and flushes, then a barrier, then C gets. A
/// `flush` completes the put at B (rule 4): C reads it in every schedule. A `flush_local`
/// completes it at A only, so C's get may come first (MPI allows it), and does in some
/// schedules.
#[test]
fn flush_local_returns_before_the_put_reaches_its_target() {
    for local in [false, true] {
        let mut seen = BTreeSet::new();
        for seed in 0..300 {
            let lock_all = || {
                call(Call::LockAll {
                    window: W,
                    assert: 0,
                })
            };
            let unlock_all = || {
                call(Call::UnlockAll {
                    window: W,
                    push: Vec::new(),
                })
            };
            let flush = call(Call::Flush {
                window: W,
                target: 1,
                local,
            });
            let a = vec![
                lock_all(),
                op(1, OpKind::Put, 0, &[5]),
                flush,
                Action::Barrier,
                unlock_all(),
            ];
            let b = vec![Action::Barrier];
            let c = vec![Action::Barrier, lock_all(), get(1, 0), unlock_all()];
            let run = run(3, 1, vec![a, b, c], seed);
            assert!(run.errors.is_empty(), "seed {seed}: {:?}", run.errors);
            assert!(run.stuck.is_empty(), "seed {seed}: {:?}", run.stuck);
            assert_eq!(run.publics[&W][1], vec![5], "seed {seed}");
            seen.insert(run.fetched[0].2[0]);
        }
        let expected = if local { vec![0, 5] } else { vec![5] };
        assert_eq!(seen, BTreeSet::from_iter(expected), "local: {local}");
    }
}

/// One origin's operations to one target in one epoch: two puts to one byte are unordered
/// (MPI §11.7.2), so either lands last; two sums then a replace to one byte are kept in
/// order by the default `accumulate_ordering`, and the replace always lands last; under
/// `accumulate_ordering=none` it may land first.
#[test]
fn one_origins_puts_overtake_each_other_and_accumulates_only_where_unordered() {
    let program = |kinds: [OpKind; 2]| {
        vec![
            vec![
                call(Call::LockAll {
                    window: W,
                    assert: 0,
                }),
                op(1, kinds[0], 0, &[1]),
                op(1, kinds[1], 0, &[2]),
                call(Call::UnlockAll {
                    window: W,
                    push: Vec::new(),
                }),
            ],
            vec![],
        ]
    };
    let finals = |kinds: [OpKind; 2], info: WindowInfo| -> BTreeSet<u8> {
        let mut desc = window(2, 1);
        desc.info = info;
        (0..300)
            .map(|seed| {
                let world = World::new(2, vec![desc.clone()], Instant::now()).unwrap();
                let run = world.run(program(kinds), &mut Seeded::new(seed));
                assert!(run.errors.is_empty(), "seed {seed}: {:?}", run.errors);
                run.publics[&W][1][0]
            })
            .collect()
    };
    let puts = [OpKind::Put, OpKind::Put];
    assert_eq!(finals(puts, WindowInfo::default()), BTreeSet::from([1, 2]));
    let replace = OpKind::Accumulate(onesided_core::Op::Replace);
    let accs = [replace, replace];
    assert_eq!(finals(accs, WindowInfo::default()), BTreeSet::from([2]));
    let none = WindowInfo::parse([("accumulate_ordering", "none")]).unwrap();
    assert_eq!(finals(accs, none), BTreeSet::from([1, 2]));
}

/// A narrated world runs exactly as a silent one and says what each step did: one happening
/// per step of the trace, the begun actions and the answers naming their rank and action.
#[test]
fn a_narrated_run_is_the_same_run_with_one_happening_per_step() {
    let programs = || {
        vec![
            vec![fence(0), op(1, OpKind::Put, 0, &[3]), fence(0), load("a")],
            vec![fence(0), op(0, OpKind::Get, 0, &[]), fence(0)],
        ]
    };
    let silent = run(2, 1, programs(), 4);
    let world = World::new(2, vec![window(2, 1)], Instant::now()).unwrap();
    let mut narrated = world.narrated().run(programs(), &mut Seeded::new(4));
    assert_eq!(narrated.narration.len(), narrated.trace.len());
    let narration = std::mem::take(&mut narrated.narration);
    assert_eq!(narrated, silent);
    assert!(silent.narration.is_empty());
    let begun = narration.iter().filter(|h| h.what == "begins").count();
    assert_eq!(begun, 7, "every action of both programs began");
    assert!(
        narration
            .iter()
            .any(|h| h.about == Some((1, 1)) && h.what.contains("1 byte(s) of data")),
        "the get's answer: {narration:#?}"
    );
}

/// MPI_Win_test answers whether the exposure epoch ended: true when the origin's complete
/// reached the target first, false otherwise; both show up, and each run reports its flag.
#[test]
fn a_test_answers_true_or_false_as_the_complete_arrives_and_the_run_reports_it() {
    let mut flags = BTreeSet::new();
    for seed in 0..100 {
        let a = vec![pscw("post", &[1]), call(Call::Test { window: W })];
        let b = vec![pscw("start", &[0]), pscw("complete", &[])];
        let run = run(2, 1, vec![a, b], seed);
        assert!(run.errors.is_empty(), "seed {seed}: {:?}", run.errors);
        assert_eq!(run.flags.len(), 1, "seed {seed}: {:?}", run.flags);
        let (rank, action, flag) = run.flags[0];
        assert_eq!((rank, action), (0, 1));
        flags.insert(flag);
    }
    assert_eq!(flags, BTreeSet::from([false, true]));
}

/// Every distinct schedule of `programs`, each run's outcome read by `read`; the walk's tally.
fn every_schedule<T: Ord>(
    nranks: u32,
    size: u64,
    programs: &[Vec<Action>],
    bound: u64,
    read: impl Fn(&Run) -> T,
) -> (BTreeSet<T>, onesided_core::sim::Enumeration) {
    let now = Instant::now();
    let world = || World::new(nranks, vec![window(nranks, size)], now).unwrap();
    let mut seen = BTreeSet::new();
    let walk = onesided_core::sim::exhaustive(world, programs, bound, |run| {
        assert!(run.errors.is_empty(), "{:?}", run.errors);
        assert!(run.stuck.is_empty(), "{:?}", run.stuck);
        seen.insert(read(&run));
    });
    (seen, walk)
}

/// Counted by hand: ranks that only load their own copies touch nothing in common, so every
/// order of their calls is one schedule; a rank that stores and then loads alone has two —
/// its store published early (before the load, MPI allows it) or never.
#[test]
fn the_exhaustive_walk_counts_the_schedules_that_differ_by_more_than_independent_steps() {
    let programs = vec![vec![load("a")], vec![load("b")], vec![load("c")]];
    let (_, walk) = every_schedule(3, 1, &programs, 1000, |_| ());
    assert_eq!((walk.schedules, walk.complete), (1, true), "{walk:?}");
    let programs = vec![vec![store(9, 0), load("mine")], vec![]];
    let (publics, walk) = every_schedule(2, 1, &programs, 1000, |run| run.publics[&W][0][0]);
    assert_eq!((walk.schedules, walk.complete), (2, true), "{walk:?}");
    assert_eq!(publics, BTreeSet::from([0, 9]));
    // the same when the last step is another rank's, independent of the store: the early
    // publication can only come before it (the world ends after it), and is not lost
    let programs = vec![vec![store(9, 0)], vec![load("other")]];
    let (publics, walk) = every_schedule(2, 1, &programs, 1000, |run| run.publics[&W][0][0]);
    assert_eq!(publics, BTreeSet::from([0, 9]), "{walk:?}");
}

/// Two origins add 1 to a counter at a third rank with fetch-and-op under exclusive locks:
/// the old values they read are 0 and 1 in one of the 2 orders, each shows up, no other; and
/// every value of the target's private copy MPI allows (0 if never refreshed, 1 if refreshed
/// between the two, 2) shows up too.
#[test]
fn the_exhaustive_walk_finds_both_orders_of_two_atomic_increments() {
    let add = || {
        let fop = op(0, OpKind::FetchAndOp(onesided_core::Op::Sum), 0, &[1]);
        vec![lock(0), fop, unlock(0)]
    };
    let programs = vec![vec![], add(), add()];
    let (olds, walk) = every_schedule(3, 1, &programs, 100_000, |run| {
        assert_eq!(run.publics[&W][0][0], 2);
        let mut olds: Vec<(u32, u8)> = run.fetched.iter().map(|f| (f.0, f.2[0])).collect();
        olds.sort();
        (olds, run.privates[&W][0][0])
    });
    eprintln!("{walk:?} {olds:?}");
    assert!(walk.complete, "{walk:?}");
    let orders: BTreeSet<_> = olds.iter().map(|(olds, _)| olds.clone()).collect();
    assert_eq!(
        orders,
        BTreeSet::from([vec![(1, 0), (2, 1)], vec![(1, 1), (2, 0)]])
    );
    let privates: BTreeSet<u8> = olds.iter().map(|(_, private)| *private).collect();
    assert_eq!(privates, BTreeSet::from([0, 1, 2]));
    // a bound stops the walk and says so
    let (_, bounded) = every_schedule(3, 1, &programs, 5, |_| ());
    assert_eq!((bounded.schedules, bounded.complete), (5, false));
    assert!(walk.schedules > 5, "{walk:?}");
}

/// The rules the race checker finds in every one of `seeds` schedules of `programs` (its
/// findings over the simulated window's log), and whether each finding names the actions
/// that made its two accesses.
fn findings_in_every_schedule(
    programs: &[Vec<Action>],
    seeds: std::ops::Range<u64>,
) -> BTreeSet<Vec<onesided_core::check::Rule>> {
    let mut seen = BTreeSet::new();
    for seed in seeds {
        let run = run(2, 4, programs.to_vec(), seed);
        assert!(run.stuck.is_empty(), "seed {seed}: {:?}", run.stuck);
        let history = run.history(W);
        assert_eq!(
            history.iter().map(|r| r.seq).collect::<Vec<_>>(),
            (1..=history.len() as u64).collect::<Vec<_>>(),
            "seed {seed}: a window's log is numbered gap-free from 1"
        );
        let findings = onesided_core::check::check(&history);
        for finding in &findings {
            for side in [&finding.first, &finding.second] {
                let logged = run.logged(W, side.seq).expect("the side's record");
                assert_eq!(logged.record.rank, side.rank, "seed {seed}");
                assert!(logged.action.is_some(), "seed {seed}: {side:?}");
            }
        }
        seen.insert(findings.iter().map(|f| f.rule).collect());
    }
    seen
}

/// The simulated log reads as a real one: the race checker finds a put racing with the
/// target's own load in every schedule (the load is not ordered after the fence that
/// completes the put), and nothing where the load waits for the closing fence.
#[test]
fn the_race_checker_reads_a_simulated_log_as_it_reads_a_real_one() {
    use onesided_core::check::Rule;
    let racy = vec![
        vec![fence(0), load("during"), fence(0)],
        vec![fence(0), op(0, OpKind::Put, 0, &[42]), fence(0)],
    ];
    let seen = findings_in_every_schedule(&racy, 0..100);
    assert_eq!(seen, BTreeSet::from([vec![Rule::PutLoad]]));
    let ordered = vec![
        vec![fence(0), fence(0), load("after")],
        vec![fence(0), op(0, OpKind::Put, 0, &[42]), fence(0)],
    ];
    assert_eq!(
        findings_in_every_schedule(&ordered, 0..100),
        BTreeSet::from([vec![]])
    );
    // a barrier moves no data: a store before it is not published for a get after it
    let unpublished = vec![
        vec![fence(0), store(7, 0), Action::Barrier, fence(0)],
        vec![fence(0), Action::Barrier, get(0, 0), fence(0)],
    ];
    let seen = findings_in_every_schedule(&unpublished, 0..100);
    assert_eq!(seen, BTreeSet::from([vec![Rule::GetStore]]));
    // but it orders: two shared-lock epochs' puts, one unlocked before it and one locked
    // after it, do not race; without it they do
    let shared = |target: u32| {
        call(Call::Lock {
            window: W,
            lock_type: LockType::Shared,
            target,
            assert: 0,
        })
    };
    let epoch = |value: u8| [shared(0), op(0, OpKind::Put, 0, &[value]), unlock(0)];
    let mut first = epoch(1).to_vec();
    first.push(Action::Barrier);
    let mut second = vec![Action::Barrier];
    second.extend(epoch(2));
    let barrier = vec![second, first];
    assert_eq!(
        findings_in_every_schedule(&barrier, 0..100),
        BTreeSet::from([vec![]])
    );
    let unordered = vec![epoch(2).to_vec(), epoch(1).to_vec()];
    let seen = findings_in_every_schedule(&unordered, 0..100);
    assert_eq!(seen, BTreeSet::from([vec![Rule::PutPut]]));
}

/// The Perfetto export of a simulated log draws one track a rank and the put as a flow from
/// its origin to its target, on the steps' clock.
#[test]
fn a_simulated_log_exports_as_a_perfetto_trace() {
    let programs = vec![
        vec![fence(0), fence(0)],
        vec![fence(0), op(0, OpKind::Put, 0, &[42]), fence(0)],
    ];
    let run = run(2, 4, programs, 3);
    let trace = onesided_core::export::perfetto(&run.history(W));
    let events = trace["traceEvents"].as_array().expect("trace events");
    let tids: BTreeSet<u64> = events.iter().filter_map(|e| e["tid"].as_u64()).collect();
    assert_eq!(tids, BTreeSet::from([0, 1]));
    let flows: Vec<&str> = events.iter().filter_map(|e| e["ph"].as_str()).collect();
    assert!(flows.contains(&"s") && flows.contains(&"f"), "{trace}");
    let last = events
        .iter()
        .filter_map(|e| e["ts"].as_f64())
        .fold(0.0, f64::max);
    assert!(
        last <= run.trace.len() as f64,
        "one microsecond a step: {last}"
    );
}

/// The unified model: a store with no synchronization after it reaches the public copy, and
/// a put's update the owner's private copy, eventually — before the next call in some
/// schedules, not in others — and the copies are one once the programs ended. The separate
/// model may keep both where they are.
#[test]
fn unified_copies_exchange_at_any_step_and_converge_once_the_programs_end() {
    let theirs = Action::Load {
        window: W,
        offset: 1,
        len: 1,
        label: "theirs".to_string(),
    };
    let programs = || {
        vec![
            vec![store(7, 0), Action::Barrier, load("mine"), theirs.clone()],
            vec![
                lock(0),
                op(0, OpKind::Put, 1, &[9]),
                unlock(0),
                Action::Barrier,
            ],
        ]
    };
    let mut desc = window(2, 4);
    desc.model = MemoryModel::Unified;
    let mut seen = BTreeSet::new();
    for seed in 0..200 {
        let world = World::new(2, vec![desc.clone()], Instant::now()).unwrap();
        let run = world.run(programs(), &mut Seeded::new(seed));
        assert!(run.errors.is_empty() && run.stuck.is_empty(), "seed {seed}");
        assert_eq!(run.publics[&W][0][..2], [7, 9], "seed {seed}");
        assert_eq!(run.privates[&W][0][..2], [7, 9], "seed {seed}");
        seen.insert((loaded(&run, "mine"), loaded(&run, "theirs")));
    }
    // the owner reads its own store, and the put's 9 or, not refreshed yet, the old 0
    assert_eq!(
        seen,
        BTreeSet::from([(vec![7], vec![0]), (vec![7], vec![9])])
    );
    // the separate model may end with the copies apart: the store unpublished, the put not
    // refreshed (nothing after them asks for either)
    let apart = (0..200)
        .map(|seed| run(2, 4, programs(), seed))
        .any(|run| run.publics[&W][0][..2] == [0, 9] && run.privates[&W][0][..2] == [7, 0]);
    assert!(apart, "no separate run ended with its copies apart");
}

/// A window over part of the world (world ranks 2 and 0, in that order): its members open it
/// in their window ranks, programs address window ranks, the log records window ranks, a rank
/// outside the group is refused with `MPI_ERR_GROUP`, and a group that cannot be is refused
/// when the world is made.
#[test]
fn a_window_over_part_of_the_world_runs_in_its_own_ranks() {
    let mut desc = window(2, 8);
    desc.group = vec![2, 0];
    let programs = vec![
        // world rank 0 is the window's rank 1: it puts into window rank 0 (world rank 2)
        vec![lock(0), op(0, OpKind::Put, 3, &[7]), unlock(0)],
        // world rank 1 is not a member
        vec![lock(0)],
        vec![],
    ];
    for seed in 0..20 {
        let world = World::new(3, vec![desc.clone()], Instant::now()).expect("a group window");
        let run = world.run(programs.clone(), &mut Seeded::new(seed));
        assert_eq!(run.errors.len(), 1, "{:?}", run.errors);
        let (rank, action, error) = &run.errors[0];
        assert_eq!((*rank, *action, error.class), (1, 0, ErrorClass::Group));
        assert!(run.stuck.is_empty(), "{:?}", run.stuck);
        let publics = &run.publics[&W];
        assert_eq!(publics.len(), 2, "one public copy per member");
        assert_eq!(publics[0][3], 7, "the put reached world rank 2");
        assert_eq!(publics[1], vec![0; 8]);
        assert_eq!(run.privates[&W].len(), 2);
        let ranks: BTreeSet<u32> = run.history(W).iter().map(|r| r.rank).collect();
        assert_eq!(ranks, BTreeSet::from([0, 1]), "the log names window ranks");
    }
    for (group, class) in [
        (vec![], ErrorClass::Group),
        (vec![0, 0], ErrorClass::Group),
        (vec![0, 3], ErrorClass::Group),
        (vec![0, 1, 2], ErrorClass::Arg),
    ] {
        let mut desc = window(2, 8);
        desc.group = group.clone();
        let refused = World::new(3, vec![desc], Instant::now()).err();
        assert_eq!(refused.map(|e| e.class), Some(class), "{group:?}");
    }
}

/// A dynamic window: a region attached by its owner is reached by address (an `InRegion`
/// action), the owner stores and loads in it, and a store outside every region it attached is
/// refused with `MPI_ERR_RMA_RANGE`; the run keeps the region's address under its name.
#[test]
fn a_region_of_a_dynamic_window_is_reached_at_its_address() {
    let mut desc = window(2, 0);
    desc.flavor = Flavor::Dynamic;
    let region = |action: Action| Action::InRegion {
        name: "r".to_string(),
        action: Box::new(action),
    };
    let programs = vec![
        vec![
            Action::Attach {
                window: W,
                size: 4,
                name: "r".to_string(),
            },
            region(Action::Store {
                window: W,
                offset: 4,
                bytes: vec![1],
            }),
            Action::Barrier,
            Action::Barrier,
            lock(0),
            unlock(0),
            region(Action::Load {
                window: W,
                offset: 1,
                len: 2,
                label: "mine".to_string(),
            }),
        ],
        vec![
            Action::Barrier,
            lock(0),
            region(op(0, OpKind::Put, 1, &[9, 8])),
            unlock(0),
            Action::Barrier,
        ],
    ];
    for seed in 0..20 {
        let world = World::new(2, vec![desc.clone()], Instant::now()).expect("a dynamic window");
        let run = world.run(programs.clone(), &mut Seeded::new(seed));
        let address = run.regions["r"];
        assert_eq!(address, onesided_core::window::DYNAMIC_BASE);
        assert_eq!(run.errors.len(), 1, "{:?}", run.errors);
        let (rank, action, error) = &run.errors[0];
        assert_eq!((*rank, *action, error.class), (0, 1, ErrorClass::RmaRange));
        assert_eq!(run.publics[&W][0], vec![0, 9, 8, 0]);
        assert_eq!(loaded(&run, "mine"), vec![9, 8], "the lock pulled B's put");
    }
}

/// A rank that crashes loses its private copy (a store it never published is gone unless
/// published early, as MPI allows) and its lock epoch: its lock is revoked where it was
/// granted, or its request dropped where it still waited, and so is its put then (or the put
/// never left its process, [`Choice::Lose`]: `what_a_crashed_rank_sent…` tests that). It attaches
/// again as incarnation 2, whose private copy starts from its public copy and whose next
/// lock is granted. Over 500 schedules, none failing or stuck, each outcome shows up.
#[test]
fn a_crashed_rank_loses_its_copy_and_lock_and_attaches_again_as_a_new_incarnation() {
    use onesided_core::audit::Event;
    let programs = vec![
        vec![lock(0), unlock(0)],
        vec![
            store(7, 0),
            lock(0),
            op(0, OpKind::Put, 0, &[5]),
            Action::Crash,
            Action::Rejoin,
            load("back"),
            lock(0),
            unlock(0),
        ],
    ];
    let mut seen = BTreeSet::new();
    for seed in 0..500 {
        let run = run(2, 1, programs.clone(), seed);
        assert!(run.errors.is_empty(), "seed {seed}: {:?}", run.errors);
        assert!(run.stuck.is_empty(), "seed {seed}: {:?}", run.stuck);
        let history = run.history(W);
        let revoked = history
            .iter()
            .any(|r| matches!(r.event, Event::LockRevoke { origin: 1, .. }));
        let incarnations: BTreeSet<u64> = history
            .iter()
            .filter(|r| r.rank == 1 && r.incarnation > 0)
            .map(|r| r.incarnation)
            .collect();
        let back = loaded(&run, "back")[0];
        assert_eq!(
            back, run.publics[&W][1][0],
            "seed {seed}: its copy is its public copy"
        );
        assert_eq!(incarnations, BTreeSet::from([1, 2]), "seed {seed}");
        seen.insert((back, run.publics[&W][0][0], revoked));
    }
    let backs: BTreeSet<u8> = seen.iter().map(|s| s.0).collect();
    assert_eq!(backs, BTreeSet::from([0, 7]));
    // the put lands only where the lock was granted (then revoked); granted, it may still
    // have been lost with the crash (sent after the last answer its rank saw)
    let landed: BTreeSet<(u8, bool)> = seen.iter().map(|s| (s.1, s.2)).collect();
    assert_eq!(landed, BTreeSet::from([(0, false), (0, true), (5, true)]));
}

/// What a crashed rank sent after the last answer it saw may never have left its process:
/// its put (with the lazy lock in front of it) lands in some schedules and not in others. Once
/// a flush returned, the server had it: it lands in every schedule.
#[test]
fn what_a_crashed_rank_sent_after_the_last_answer_it_saw_may_never_arrive() {
    let flush = |target: u32| {
        call(Call::Flush {
            window: W,
            target,
            local: false,
        })
    };
    let landed = |programs: Vec<Vec<Action>>| -> BTreeSet<u8> {
        let runs = (0..300).map(|seed| run(2, 1, programs.clone(), seed));
        runs.map(|run| {
            assert!(run.errors.is_empty(), "{:?}", run.errors);
            assert!(run.stuck.is_empty(), "{:?}", run.stuck);
            run.publics[&W][0][0]
        })
        .collect()
    };
    let unflushed = vec![
        vec![],
        vec![lock(0), op(0, OpKind::Put, 0, &[5]), Action::Crash],
    ];
    assert_eq!(landed(unflushed), BTreeSet::from([0, 5]));
    let flushed = vec![
        vec![],
        vec![
            lock(0),
            op(0, OpKind::Put, 0, &[5]),
            flush(0),
            Action::Crash,
        ],
    ];
    assert_eq!(landed(flushed), BTreeSet::from([5]));
}
