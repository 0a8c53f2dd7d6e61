//! The five examples of MPI Forum ticket #37 (seeds/002), with their fixed variants. Every
//! guaranteed outcome must hold in each of 50 repetitions; every outcome the examples warn
//! about is forced with barriers and shown to occur.

use onesided_client::{LockType, Window};

use crate::{ranks, Fixture};

const REPETITIONS: usize = 50;
const A: u32 = 0;
const B: u32 = 1;
const X: u64 = 0;
const Y: u64 = 1;
const OLD: i64 = 0;
const NEW: i64 = 42;

async fn fresh(fixture: &Fixture) -> Vec<Window> {
    fixture.window_of::<i64>(2).await
}

/// Reads `target`'s public copy at `disp` under an exclusive lock.
async fn public(window: &Window, target: u32, disp: u64) -> i64 {
    window.lock(LockType::Exclusive, target, 0).await.unwrap();
    let value = window.get::<i64>(target, disp, 1).unwrap();
    window.unlock(target).await.unwrap();
    value.value().await.unwrap()[0]
}

/// The outcomes of `REPETITIONS` runs of `example`, all on one world of two ranks.
async fn repeated<T>(example: impl AsyncFn(&Fixture) -> T) -> Vec<T> {
    let fixture = Fixture::new(2).await;
    let mut outcomes = Vec::with_capacity(REPETITIONS);
    for _ in 0..REPETITIONS {
        outcomes.push(example(&fixture).await);
    }
    outcomes
}

/// Every rank of the window's world meets here.
async fn barrier(window: &Window) {
    window.session().barrier().await.unwrap();
}

/// A's side of examples 2 and 5: puts NEW at B's X under an exclusive lock, then meets B.
async fn put_new_at_b_then_barrier(window: &Window) {
    window.lock(LockType::Exclusive, B, 0).await.unwrap();
    window.put(B, X, &[NEW]).unwrap();
    window.unlock(B).await.unwrap();
    barrier(window).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_1_unlock_publishes_the_owners_store() {
    let outcomes = repeated(async |fixture| {
        ranks(fresh(fixture).await, |rank, w| async move {
            if rank == B {
                w.lock(LockType::Exclusive, B, 0).await.unwrap();
                w.store(X, &[NEW]).unwrap();
                w.unlock(B).await.unwrap();
                barrier(&w).await;
                None
            } else {
                barrier(&w).await;
                Some(public(&w, B, X).await)
            }
        })
        .await
    })
    .await;
    for seen in outcomes {
        assert_eq!(
            seen[A as usize],
            Some(NEW),
            "rule 5: unlock publishes the store"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_1_without_lock_the_store_stays_private() {
    let fixture = Fixture::new(2).await;
    let seen = ranks(fresh(&fixture).await, |rank, w| async move {
        if rank == B {
            w.store(X, &[NEW]).unwrap();
            barrier(&w).await;
            barrier(&w).await;
            None
        } else {
            barrier(&w).await;
            let value = public(&w, B, X).await;
            barrier(&w).await;
            Some(value)
        }
    })
    .await;
    assert_eq!(seen[A as usize], Some(OLD), "a barrier moves no data");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_2_lock_brings_the_remote_put_into_the_private_copy() {
    let outcomes = repeated(async |fixture| {
        ranks(fresh(fixture).await, |rank, w| async move {
            if rank == A {
                put_new_at_b_then_barrier(&w).await;
                None
            } else {
                barrier(&w).await;
                let stale = w.load::<i64>(X, 1).unwrap()[0];
                w.lock(LockType::Exclusive, B, 0).await.unwrap();
                let loaded = w.load::<i64>(X, 1).unwrap()[0];
                w.unlock(B).await.unwrap();
                Some((stale, loaded))
            }
        })
        .await
    })
    .await;
    for seen in outcomes {
        let (stale, loaded) = seen[B as usize].unwrap();
        assert_eq!(loaded, NEW, "rule 6: lock pulls the public copy");
        assert_eq!(stale, OLD, "without lock the private copy is obsolete");
    }
}

/// Example 3: B stores X, then holds a shared lock on itself (fixed: and calls `MPI_Win_sync`
/// in it) while A gets X under a shared lock. Returns what A read then and (not fixed) what
/// A reads of X after B's unlock.
async fn example_3(fixture: &Fixture, fixed: bool) -> (i64, Option<i64>) {
    let seen = ranks(fresh(fixture).await, move |rank, w| async move {
        if rank == B {
            w.store(X, &[NEW]).unwrap();
            w.lock(LockType::Shared, B, 0).await.unwrap();
            if fixed {
                w.sync().await.unwrap();
            }
            barrier(&w).await;
            barrier(&w).await;
            w.unlock(B).await.unwrap();
            if !fixed {
                barrier(&w).await;
            }
            None
        } else {
            barrier(&w).await;
            w.lock(LockType::Shared, B, 0).await.unwrap();
            let x = w.get::<i64>(B, X, 1).unwrap();
            w.unlock(B).await.unwrap();
            let during = x.value().await.unwrap()[0];
            barrier(&w).await;
            if fixed {
                return Some((during, None));
            }
            barrier(&w).await;
            Some((during, Some(public(&w, B, X).await)))
        }
    })
    .await;
    seen[A as usize].unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_3_shared_lock_does_not_publish_an_earlier_store() {
    for (during, after) in repeated(async |fixture| example_3(fixture, false).await).await {
        assert_eq!(during, OLD, "lock publishes nothing: A reads the old X");
        assert_eq!(after, Some(NEW), "B's unlock published X");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_3_fixed_with_win_sync() {
    for (during, _) in repeated(async |fixture| example_3(fixture, true).await).await {
        assert_eq!(during, NEW, "sync publishes the store");
    }
}

/// Example 4: A (owner of X and Y) stores Y, posts to {A,B}, and during its own access epoch
/// to itself stores X (or, fixed, puts X to itself).
async fn example_4(fixture: &Fixture, fixed: bool) -> (i64, i64, i64) {
    let seen = ranks(fresh(fixture).await, move |rank, w| async move {
        if rank == A {
            w.store(Y, &[7i64]).unwrap();
            w.post(&[A, B], 0).unwrap();
            w.start(&[A], 0).unwrap();
            if fixed {
                w.put(A, X, &[NEW]).unwrap();
            } else {
                w.store(X, &[NEW]).unwrap();
            }
            w.complete().await.unwrap();
            w.wait().await.unwrap();
            let private_x = w.load::<i64>(X, 1).unwrap()[0];
            barrier(&w).await;
            barrier(&w).await;
            (private_x, 0, 0)
        } else {
            w.start(&[A], 0).unwrap();
            w.complete().await.unwrap();
            barrier(&w).await;
            w.lock(LockType::Exclusive, A, 0).await.unwrap();
            let x = w.get::<i64>(A, X, 1).unwrap();
            let y = w.get::<i64>(A, Y, 1).unwrap();
            w.unlock(A).await.unwrap();
            barrier(&w).await;
            (0, x.value().await.unwrap()[0], y.value().await.unwrap()[0])
        }
    })
    .await;
    (seen[0].0, seen[1].1, seen[1].2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_4_post_publishes_y_but_wait_does_not_publish_x() {
    for (private_x, x, y) in repeated(async |fixture| example_4(fixture, false).await).await {
        assert_eq!(y, 7, "rule 5: post published Y");
        assert_eq!(x, OLD, "neither complete nor wait publishes A's store of X");
        assert_eq!(private_x, NEW, "A's own store is in its private copy");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_4_fixed_with_a_put_to_self() {
    for (private_x, x, y) in repeated(async |fixture| example_4(fixture, true).await).await {
        assert_eq!(y, 7);
        assert_eq!(x, NEW, "the put to self updated the public copy");
        assert_eq!(private_x, NEW, "and wait brought it into A's private copy");
    }
}

/// Example 5: A puts X at B under a lock; B then loads X inside its own PSCW epoch.
/// Returns (load inside the epoch, local get inside the epoch, load after wait).
async fn example_5(fixture: &Fixture) -> (i64, i64, i64) {
    let seen = ranks(fresh(fixture).await, |rank, w| async move {
        if rank == A {
            put_new_at_b_then_barrier(&w).await;
            None
        } else {
            barrier(&w).await;
            w.post(&[B], 0).unwrap();
            w.start(&[B], 0).unwrap();
            let loaded = w.load::<i64>(X, 1).unwrap()[0];
            let got = w.get::<i64>(B, X, 1).unwrap();
            w.complete().await.unwrap();
            w.wait().await.unwrap();
            let after_wait = w.load::<i64>(X, 1).unwrap()[0];
            Some((loaded, got.value().await.unwrap()[0], after_wait))
        }
    })
    .await;
    seen[B as usize].unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_5_load_inside_pscw_is_obsolete_until_wait() {
    for (loaded, got, after_wait) in repeated(async |fixture| example_5(fixture).await).await {
        assert_eq!(
            loaded, OLD,
            "post and start do not refresh the private copy"
        );
        assert_eq!(got, NEW, "fix 1: a local get reads the public copy");
        assert_eq!(
            after_wait, NEW,
            "fix 2: rule 6, wait refreshes the private copy"
        );
    }
}
