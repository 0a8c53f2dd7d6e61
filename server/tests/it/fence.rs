//! Fence semantics from the mpiwg-rma thread (seeds/001): a fence that ends an epoch is a
//! barrier that returns only after every operation targeted at the rank is applied, and the
//! memory of a target is not accessed before the target called its fence.

use std::time::Duration;

use onesided_client::Assert;

use crate::{ranks, Fixture};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_fence_waits_for_the_slow_origins_operations() {
    let fixture = Fixture::new(2).await;
    for round in 0..50i64 {
        let mut windows = fixture.window_of::<i64>(1).await;
        let slow = windows.pop().unwrap();
        let target = windows.pop().unwrap();
        target.fence(Assert::NOPRECEDE).await.unwrap();
        slow.fence(Assert::NOPRECEDE).await.unwrap();
        let mut closing = Box::pin(async {
            target.fence(0).await.unwrap();
            target.load::<i64>(0, 1).unwrap()[0]
        });
        // the target is inside its fence and the origin has not even issued its put yet
        assert!(
            tokio::time::timeout(Duration::from_millis(20), &mut closing)
                .await
                .is_err(),
            "a fence that ends an epoch returned before the other rank entered it"
        );
        slow.put(0, 0, &[round + 1]).unwrap();
        let (seen, ()) = tokio::join!(closing, async { slow.fence(0).await.unwrap() });
        assert_eq!(
            seen,
            round + 1,
            "the slow origin's put is applied when the fence returns"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_op_after_a_fence_waits_for_the_target_to_enter_it() {
    let fixture = Fixture::new(2).await;
    for _ in 0..50 {
        let windows = fixture.window_of::<i64>(1).await;
        let seen = ranks(windows, |rank, w| async move {
            if rank == 1 {
                // rank 1 is in the new epoch at once (noprecede: no barrier)
                w.fence(Assert::NOPRECEDE).await.unwrap();
                w.put(0, 0, &[5i64]).unwrap();
                // the barrier travels behind the put: once it returns, the put is at rank 0
                w.session().barrier().await.unwrap();
                w.fence(0).await.unwrap();
                None
            } else {
                w.session().barrier().await.unwrap();
                // a store from before rank 0's fence; the fence publishes it, and only then may
                // the put of the next epoch be applied
                w.store(0, &[7i64]).unwrap();
                w.fence(Assert::NOPRECEDE).await.unwrap();
                w.fence(0).await.unwrap();
                Some(w.load::<i64>(0, 1).unwrap()[0])
            }
        })
        .await;
        assert_eq!(
            seen[0],
            Some(5),
            "the put was applied before rank 0 entered the fence"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_epochs_exchange_values_and_nostore_noput_skip_copies() {
    let (_fixture, windows) = Fixture::with_window::<i64>(4, 4).await;
    let seen = ranks(windows, |rank, w| async move {
        w.fence(Assert::NOPRECEDE).await.unwrap();
        for target in 0..4u32 {
            w.put(target, u64::from(rank), &[i64::from(rank * 10 + target)])
                .unwrap();
        }
        w.fence(Assert::NOSTORE).await.unwrap();
        let first = w.load::<i64>(0, 4).unwrap();
        // NOPUT promises no puts until the next fence, so that fence skips the pull: a get of
        // our own public copy still works
        w.store(0, &[-1i64]).unwrap();
        w.fence(Assert::NOPUT).await.unwrap();
        let own = w.get::<i64>(rank, 0, 1).unwrap();
        w.fence(Assert::NOSUCCEED).await.unwrap();
        (first, own.value().await.unwrap()[0])
    })
    .await;
    for (rank, (first, own)) in seen.into_iter().enumerate() {
        let expected: Vec<i64> = (0..4).map(|origin| origin * 10 + rank as i64).collect();
        assert_eq!(first, expected);
        assert_eq!(own, -1, "the fence published the store");
    }
}
