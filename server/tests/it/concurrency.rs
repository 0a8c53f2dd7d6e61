//! Many ranks at once: atomicity of accumulates, counters, mutual exclusion, lock fairness,
//! PSCW group matching, flush ordering, win_sync, request-based operations, layouts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use onesided_client::{Block, Layout, LockType, Op, Window, WindowSpec};

use crate::{ranks, unique, Fixture};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_ranks_accumulate_sum_exactly_under_lock_all() {
    let (_fixture, windows) = Fixture::with_window::<i64>(8, 1).await;
    let totals = ranks(windows, |rank, w| async move {
        w.lock_all(0).await.unwrap();
        for _ in 0..1000 {
            w.accumulate(0, 0, &[i64::from(rank) + 1], Op::Sum).unwrap();
        }
        w.unlock_all().await.unwrap();
        w.session().barrier().await.unwrap();
        w.lock_all(0).await.unwrap();
        let total = w.get::<i64>(0, 0, 1).unwrap();
        w.unlock_all().await.unwrap();
        total.value().await.unwrap()[0]
    })
    .await;
    let expected = 1000 * (1..=8).sum::<i64>();
    assert!(
        totals.iter().all(|&total| total == expected),
        "{totals:?} != {expected}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_and_op_counter_hands_out_every_value_once() {
    let (_fixture, windows) = Fixture::with_window::<u64>(8, 1).await;
    let handed = ranks(windows, |_, w| async move {
        w.lock_all(0).await.unwrap();
        let mut pending = Vec::new();
        for _ in 0..200 {
            pending.push(w.fetch_and_op(3, 0, 1u64, Op::Sum).unwrap());
        }
        w.flush(3).await.unwrap();
        let mut values = Vec::new();
        for value in pending {
            values.push(value.value().await.unwrap());
        }
        w.unlock_all().await.unwrap();
        values
    })
    .await;
    let mut all: Vec<u64> = handed.into_iter().flatten().collect();
    all.sort_unstable();
    assert_eq!(all, (0..1600).collect::<Vec<u64>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_and_swap_spin_lock_gives_mutual_exclusion() {
    // element 0: the lock word, element 1: a counter updated with plain get/put
    let (_fixture, windows) = Fixture::with_window::<i64>(4, 2).await;
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let counters = ranks(windows, |rank, w| {
        let inside = Arc::clone(&inside);
        let most = Arc::clone(&most);
        async move {
            w.lock_all(0).await.unwrap();
            for _ in 0..25 {
                loop {
                    let old = w.compare_and_swap(0, 0, 0i64, i64::from(rank) + 1).unwrap();
                    w.flush(0).await.unwrap();
                    if old.value().await.unwrap() == 0 {
                        break;
                    }
                }
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let counter = w.get::<i64>(0, 1, 1).unwrap();
                w.flush(0).await.unwrap();
                let counter = counter.value().await.unwrap()[0];
                w.put(0, 1, &[counter + 1]).unwrap();
                w.flush(0).await.unwrap();
                inside.fetch_sub(1, Ordering::SeqCst);
                let released = w.fetch_and_op(0, 0, 0i64, Op::Replace).unwrap();
                w.flush(0).await.unwrap();
                assert_eq!(released.value().await.unwrap(), i64::from(rank) + 1);
            }
            w.unlock_all().await.unwrap();
            rank_0_after_a_barrier(&w, 1).await
        }
    })
    .await;
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "two ranks were inside at once"
    );
    assert_eq!(counters, vec![100; 4], "an update was lost");
}

/// Element `disp` of rank 0, read under a shared lock once every rank entered a barrier.
async fn rank_0_after_a_barrier(w: &Window, disp: u64) -> i64 {
    w.session().barrier().await.unwrap();
    w.lock(LockType::Shared, 0, 0).await.unwrap();
    let value = w.get::<i64>(0, disp, 1).unwrap();
    w.unlock(0).await.unwrap();
    value.value().await.unwrap()[0]
}

/// A world of four ranks on a server whose writers-first preference lasts `fairness`.
async fn four_ranks_with_fairness(fairness: Duration) -> Fixture {
    let server = crate::spawn_server_with(|config| config.lock_fairness = fairness).await;
    Fixture::on(server, 4).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_locks_exclude_and_shared_locks_overlap() {
    // writers first is a bounded preference (core's `locks`): with an hour's bound, a shared
    // request behind a waiting writer waits for the writer throughout this test
    let fixture = four_ranks_with_fairness(Duration::from_secs(3600)).await;
    let windows = fixture.window_of::<i64>(1).await;
    // exclusive: read-modify-write with plain get/put loses nothing
    let finals = ranks(windows, |_, w| async move {
        for _ in 0..20 {
            w.lock(LockType::Exclusive, 0, 0).await.unwrap();
            let value = w.get::<i64>(0, 0, 1).unwrap();
            w.flush(0).await.unwrap();
            let value = value.value().await.unwrap()[0];
            w.put(0, 0, &[value + 1]).unwrap();
            w.unlock(0).await.unwrap();
        }
        rank_0_after_a_barrier(&w, 0).await
    })
    .await;
    assert_eq!(finals, vec![80; 4], "an increment was lost");
    let windows = fixture.window_of::<i64>(1).await;
    let rendezvous = Arc::new(tokio::sync::Barrier::new(3));
    let shared = ranks(windows, |rank, w| {
        let rendezvous = Arc::clone(&rendezvous);
        async move {
            if rank == 0 {
                return true;
            }
            w.lock(LockType::Shared, 0, 0).await.unwrap();
            let value = w.get::<i64>(0, 0, 1).unwrap();
            w.flush(0).await.unwrap();
            value.value().await.unwrap();
            // all three hold their shared lock at the same time, or this never completes
            let together = tokio::time::timeout(Duration::from_secs(10), rendezvous.wait())
                .await
                .is_ok();
            w.unlock(0).await.unwrap();
            together
        }
    })
    .await;
    assert!(
        shared.iter().all(|&together| together),
        "shared locks did not overlap"
    );

    let mut windows = fixture.window_of::<i64>(1).await.into_iter().skip(1);
    // opening another window is a round trip on a session that changes nothing else
    let probe = |n: u32| format!("probe-{n}");
    for n in 0..2 {
        fixture
            .create_window(&WindowSpec::of::<i64>(&probe(n), 4, 1))
            .await;
    }
    let (holder, writer, reader) = (
        windows.next().unwrap(),
        windows.next().unwrap(),
        windows.next().unwrap(),
    );
    holder.lock(LockType::Shared, 0, 0).await.unwrap();
    holder.get::<i64>(0, 0, 1).unwrap();
    holder.flush(0).await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    // an exclusive request queues behind the shared holder; the round trip on the writer's
    // session proves its request reached the target before the reader's is sent
    writer.lock(LockType::Exclusive, 0, 0).await.unwrap();
    writer.put(0, 0, &[1i64]).unwrap();
    let writer_task = noting_flush(writer, &probe(0), &order, "writer").await;
    // a later shared request does not overtake the waiting writer while the holder releases
    // within the fairness bound
    reader.lock(LockType::Shared, 0, 0).await.unwrap();
    let seen = reader.get::<i64>(0, 0, 1).unwrap();
    let reader_task = noting_flush(reader, &probe(1), &order, "reader").await;
    assert!(
        tokio::time::timeout(Duration::from_millis(50), async {
            loop {
                if !order.lock().unwrap().is_empty() {
                    break;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .is_err(),
        "granted while a shared lock was held"
    );
    holder.unlock(0).await.unwrap();
    writer_task.await.unwrap();
    reader_task.await.unwrap();
    let seen = seen.value().await.unwrap()[0];
    assert_eq!(*order.lock().unwrap(), vec!["writer", "reader"]);
    assert_eq!(seen, 1, "the reader came after the writer");
}

/// The order in which epochs were done, by who did them.
type Order = Arc<std::sync::Mutex<Vec<&'static str>>>;

/// After a round trip on `window`'s session (it opens the window `probe`: what it sent before
/// reached its targets), a task that flushes at rank 0, notes `who` in `order`, and unlocks
/// rank 0.
async fn noting_flush(
    window: Window,
    probe: &str,
    order: &Order,
    who: &'static str,
) -> tokio::task::JoinHandle<()> {
    window.session().window(probe).await.unwrap();
    let order = Arc::clone(order);
    tokio::spawn(async move {
        window.flush(0).await.unwrap();
        order.lock().unwrap().push(who);
        window.unlock(0).await.unwrap();
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pscw_with_overlapping_groups() {
    let (_fixture, windows) = Fixture::with_window::<i64>(3, 3).await;
    // every rank exposes to the two others and accesses the two others: the groups overlap
    let seen = ranks(windows, |rank, w| async move {
        let others: Vec<u32> = (0..3).filter(|&r| r != rank).collect();
        for round in 1..=3i64 {
            w.post(&others, 0).unwrap();
            w.start(&others, 0).unwrap();
            for &target in &others {
                w.put(target, u64::from(rank), &[round * 100 + i64::from(rank)])
                    .unwrap();
            }
            w.complete().await.unwrap();
            w.wait().await.unwrap();
            let local = w.load::<i64>(0, 3).unwrap();
            for &origin in &others {
                assert_eq!(local[origin as usize], round * 100 + i64::from(origin));
            }
        }
        true
    })
    .await;
    assert!(seen.into_iter().all(|ok| ok));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pscw_start_before_post_on_disjoint_groups() {
    let (_fixture, windows) = Fixture::with_window::<i64>(4, 4).await;
    let seen = ranks(windows, |rank, w| async move {
        let odds = [1u32, 3];
        let evens = [0u32, 2];
        if rank % 2 == 0 {
            // start and put before the targets posted: the puts wait at the targets
            w.start(&odds, 0).unwrap();
            for target in odds {
                w.put(target, u64::from(rank), &[i64::from(rank) + 1])
                    .unwrap();
            }
            w.session().barrier().await.unwrap();
            w.complete().await.unwrap();
            None
        } else {
            w.session().barrier().await.unwrap();
            w.post(&evens, 0).unwrap();
            w.wait().await.unwrap();
            Some(w.load::<i64>(0, 4).unwrap())
        }
    })
    .await;
    for rank in [1usize, 3] {
        assert_eq!(seen[rank].as_deref(), Some(&[1, 0, 3, 0][..]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_orders_a_payload_before_its_flag() {
    let fixture = Fixture::new(2).await;
    for round in 1..=20i64 {
        let windows = fixture.window_of::<i64>(2).await;
        let seen = ranks(windows, move |rank, w| async move {
            w.lock_all(0).await.unwrap();
            if rank == 0 {
                w.put(1, 0, &[round]).unwrap();
                w.flush(1).await.unwrap();
                w.accumulate(1, 1, &[1i64], Op::Replace).unwrap();
                w.unlock_all().await.unwrap();
                None
            } else {
                let payload = loop {
                    let flag = w.get_accumulate::<i64>(1, 1, &[0], Op::NoOp).unwrap();
                    w.flush(1).await.unwrap();
                    if flag.value().await.unwrap()[0] == 1 {
                        let payload = w.get::<i64>(1, 0, 1).unwrap();
                        w.flush(1).await.unwrap();
                        break payload.value().await.unwrap()[0];
                    }
                    tokio::task::yield_now().await;
                };
                w.unlock_all().await.unwrap();
                Some(payload)
            }
        })
        .await;
        assert_eq!(seen[1], Some(round));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn win_sync_publishes_and_refreshes_inside_lock_all() {
    let (_fixture, windows) = Fixture::with_window::<i64>(2, 2).await;
    let seen = ranks(windows, |rank, w| async move {
        w.lock_all(0).await.unwrap();
        let result = if rank == 0 {
            w.store(0, &[11i64]).unwrap();
            w.sync().await.unwrap();
            w.session().barrier().await.unwrap();
            w.session().barrier().await.unwrap();
            let before = w.load::<i64>(1, 1).unwrap()[0];
            w.sync().await.unwrap();
            let after = w.load::<i64>(1, 1).unwrap()[0];
            (before, after)
        } else {
            w.session().barrier().await.unwrap();
            let stored = w.get::<i64>(0, 0, 1).unwrap();
            w.put(0, 1, &[22i64]).unwrap();
            w.flush(0).await.unwrap();
            w.session().barrier().await.unwrap();
            (stored.value().await.unwrap()[0], 0)
        };
        w.unlock_all().await.unwrap();
        result
    })
    .await;
    assert_eq!(seen[1].0, 11, "sync published rank 0's store");
    assert_eq!(
        seen[0],
        (0, 22),
        "only sync brought the remote put into the private copy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_based_operations() {
    let (_fixture, windows) = Fixture::with_window::<i32>(2, 4).await;
    let seen = ranks(windows, |rank, w| async move {
        if rank == 1 {
            w.session().barrier().await.unwrap();
            return None;
        }
        w.lock(LockType::Exclusive, 1, 0).await.unwrap();
        w.rput(1, 0, &[1i32, 2]).unwrap().wait().await.unwrap();
        w.raccumulate(1, 1, &[10i32], Op::Sum)
            .unwrap()
            .wait()
            .await
            .unwrap();
        w.flush(1).await.unwrap();
        let got = w.rget::<i32>(1, 0, 2).unwrap().wait().await.unwrap();
        let old = w
            .rget_accumulate(1, 0, &[5i32, 5], Op::Max)
            .unwrap()
            .wait()
            .await
            .unwrap();
        let now = w.rget::<i32>(1, 0, 2).unwrap().wait().await.unwrap();
        // flush_local completes at the origin: the get's data is here
        let local = w.get::<i32>(1, 1, 1).unwrap();
        w.flush_local(1).await.unwrap();
        assert_eq!(local.value().await.unwrap(), vec![12]);
        let all = w.get::<i32>(1, 0, 1).unwrap();
        w.flush_local_all().await.unwrap();
        assert_eq!(all.value().await.unwrap(), vec![5]);
        w.unlock(1).await.unwrap();
        w.session().barrier().await.unwrap();
        Some((got, old, now))
    })
    .await;
    let (got, old, now) = seen[0].clone().unwrap();
    assert_eq!(got, vec![1, 12]);
    assert_eq!(old, vec![1, 12]);
    assert_eq!(now, vec![5, 12]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vector_and_indexed_layouts() {
    let (_fixture, windows) = Fixture::with_window::<i16>(2, 12).await;
    let seen = ranks(windows, |rank, w| async move {
        w.fence(0).await.unwrap();
        if rank == 0 {
            // every third element from element 1: 1, 4, 7, 10
            let vector = Layout::Vector {
                count: 4,
                blocklen: 1,
                stride: 3,
            };
            w.put_layout(1, 1, vector, &[10i16, 40, 70, 100]).unwrap();
        }
        w.fence(0).await.unwrap();
        let mut result = None;
        if rank == 0 {
            let indexed = Layout::Indexed {
                blocks: vec![Block { disp: 9, len: 2 }, Block { disp: 0, len: 2 }],
            };
            let got = w.get_layout::<i16>(1, 1, indexed).unwrap();
            w.accumulate(1, 0, &[1i16; 12], Op::Sum).unwrap();
            w.fence(0).await.unwrap();
            result = Some(got.value().await.unwrap());
        } else {
            w.fence(0).await.unwrap();
        }
        (result, w.load::<i16>(0, 12).unwrap())
    })
    .await;
    assert_eq!(
        seen[0].0,
        Some(vec![100, 0, 10, 0]),
        "indexed get in type-map order"
    );
    assert_eq!(seen[1].1, vec![1, 11, 1, 1, 41, 1, 1, 71, 1, 1, 101, 1]);
}

/// Opens a window of `fixture`'s world on every rank's session, as a round trip that changes
/// nothing: when it returns, everything the session sent before it reached its targets' actors.
async fn round_trip(fixture: &Fixture, session: &onesided_client::Session) {
    let name = unique("probe");
    fixture
        .create_window(&WindowSpec::of::<i64>(&name, 4, 1))
        .await;
    session.window(&name).await.unwrap();
}

/// Issue 11: A and B are in `lock_all` epochs (a shared lock at every target from the call on);
/// C and D queue exclusive requests on A and B, which wait for those shared locks; then A and
/// B read each other. Their requests must not queue behind C's and D's. The fairness bound is
/// an hour here, so only the `lock_all` rule can let them through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_all_readers_never_wait_for_writers_that_wait_for_them() {
    let fixture = four_ranks_with_fairness(Duration::from_secs(3600)).await;
    let mut windows = fixture.window_of::<i64>(1).await.into_iter();
    let (a, b, c, d) = (
        windows.next().unwrap(),
        windows.next().unwrap(),
        windows.next().unwrap(),
        windows.next().unwrap(),
    );
    a.lock_all(0).await.unwrap();
    b.lock_all(0).await.unwrap();
    c.lock(LockType::Exclusive, 0, 0).await.unwrap();
    c.put(0, 0, &[1i64]).unwrap();
    d.lock(LockType::Exclusive, 1, 0).await.unwrap();
    d.put(1, 0, &[2i64]).unwrap();
    round_trip(&fixture, c.session()).await;
    round_trip(&fixture, d.session()).await;
    let writers = tokio::spawn(async move {
        c.unlock(0).await.unwrap();
        d.unlock(1).await.unwrap();
    });
    let a_reads = a.get::<i64>(1, 0, 1).unwrap();
    let b_reads = b.get::<i64>(0, 0, 1).unwrap();
    tokio::time::timeout(Duration::from_secs(30), async {
        a.flush(1).await.unwrap();
        b.flush(0).await.unwrap();
    })
    .await
    .expect("the lock_all readers deadlocked behind the queued writers");
    // the writers cannot have gone first: they wait for A's and B's shared locks
    assert_eq!(a_reads.value().await.unwrap(), vec![0]);
    assert_eq!(b_reads.value().await.unwrap(), vec![0]);
    a.unlock_all().await.unwrap();
    b.unlock_all().await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), writers)
        .await
        .expect("the writers were never granted")
        .unwrap();
    // both puts landed
    a.lock_all(0).await.unwrap();
    let at_a = a.get::<i64>(0, 0, 1).unwrap();
    let at_b = a.get::<i64>(1, 0, 1).unwrap();
    a.unlock_all().await.unwrap();
    assert_eq!(at_a.value().await.unwrap(), vec![1]);
    assert_eq!(at_b.value().await.unwrap(), vec![2]);
}

/// MPI's progress rule: when no conflicting lock is held, a lock/get/unlock completes, even
/// when an exclusive request waits ahead of it and the shared holder that exclusive request
/// waits for releases only after hearing from the reader (here through the test itself, as
/// services would over their own channels). The reader is held back at most the fairness
/// bound, and never sees the writer's value: the writer waits for the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_request_behind_a_waiting_writer_completes_within_the_fairness_bound() {
    let fixture = four_ranks_with_fairness(Duration::from_millis(200)).await;
    let mut windows = fixture.window_of::<i64>(1).await.into_iter();
    let (holder, writer, reader) = (
        windows.next().unwrap(),
        windows.next().unwrap(),
        windows.next().unwrap(),
    );
    let target = 3;
    holder.lock(LockType::Shared, target, 0).await.unwrap();
    holder.get::<i64>(target, 0, 1).unwrap();
    holder.flush(target).await.unwrap();
    writer.lock(LockType::Exclusive, target, 0).await.unwrap();
    writer.put(target, 0, &[7i64]).unwrap();
    round_trip(&fixture, writer.session()).await;
    let writer_task = tokio::spawn(async move { writer.unlock(target).await.unwrap() });
    reader.lock(LockType::Shared, target, 0).await.unwrap();
    let seen = reader.get::<i64>(target, 0, 1).unwrap();
    tokio::time::timeout(Duration::from_secs(30), reader.unlock(target))
        .await
        .expect("the reader waited behind a writer that waits for a compatible holder")
        .unwrap();
    assert_eq!(
        seen.value().await.unwrap(),
        vec![0],
        "the writer went first"
    );
    assert!(
        !writer_task.is_finished(),
        "the writer was granted beside a holder"
    );
    holder.unlock(target).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), writer_task)
        .await
        .expect("the writer was never granted")
        .unwrap();
}
