//! Requests of the request-based operations through the real client and server: `test`,
//! `test_all`, `wait_all`, `wait_any` and `free` with MPI's completion semantics. A target
//! that holds an exclusive lock on itself keeps another rank's rget from completing for as
//! long as the test needs, so "not complete" is a fact here, not a race. Operations that
//! travel in one message are answered in one reply, so they complete together.

use onesided_client::{test_all, wait_all, wait_any, LockType, Window};

use crate::{get_shared, Fixture};

/// Rank `rank` locks its own window exclusively and puts `value` at its element 0: until it
/// unlocks, another rank's access there waits.
async fn holding_its_own(w: &Window, rank: u32, value: i64) {
    w.lock(LockType::Exclusive, rank, 0).await.unwrap();
    w.put(rank, 0, &[value]).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tested_complete_rget_holds_its_data_and_an_incomplete_one_says_so() {
    let (_fixture, w) = Fixture::with_window::<i64>(2, 1).await;
    // rank 1 holds its own window exclusively: rank 0's access waits there
    holding_its_own(&w[1], 1, 42).await;
    w[0].lock(LockType::Shared, 1, 0).await.unwrap();
    let request = w[0].rget::<i64>(1, 0, 1).unwrap();
    assert!(!request.test().unwrap(), "the target is still locked");
    assert!(!request.test().unwrap(), "and still is");
    w[1].unlock(1).await.unwrap();
    // the flush completes the rget; its answer comes before the flush's
    w[0].flush(1).await.unwrap();
    assert!(request.test().unwrap(), "complete after the flush");
    assert_eq!(request.wait().await.unwrap(), vec![42], "its data is here");
    w[0].unlock(1).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rput_is_locally_complete_at_once_and_free_does_not_cancel_it() {
    let (_fixture, w) = Fixture::with_window::<i64>(2, 2).await;
    w[1].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    let put = w[0].rput(1, 0, &[7i64]).unwrap();
    assert!(
        put.test().unwrap(),
        "the values were copied: locally complete while the target is still locked"
    );
    put.free();
    let get = w[0].rget::<i64>(1, 0, 2).unwrap();
    get.free();
    w[1].unlock(1).await.unwrap();
    w[0].unlock(1).await.unwrap();
    assert_eq!(
        get_shared::<i64>(&w[1], 1, 0, 2).await,
        vec![7, 0],
        "a freed request's operation still completes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_any_returns_the_request_that_can_complete_and_wait_all_the_rest_in_order() {
    let (_fixture, w) = Fixture::with_window::<i64>(3, 1).await;
    holding_its_own(&w[1], 1, 11).await;
    holding_its_own(&w[2], 2, 22).await;
    w[2].unlock(2).await.unwrap();
    w[0].lock(LockType::Shared, 1, 0).await.unwrap();
    w[0].lock(LockType::Shared, 2, 0).await.unwrap();
    // operations that travel in one message are answered together: the rget from rank 2
    // travels (and completes) first, with its flush
    let free = w[0].rget::<i64>(2, 0, 1).unwrap();
    w[0].flush(2).await.unwrap();
    let held = w[0].rget::<i64>(1, 0, 1).unwrap();
    let also_held = w[0].rget::<i64>(1, 0, 1).unwrap();
    let any = wait_any(vec![held, free, also_held])
        .await
        .expect("three requests");
    assert_eq!(
        any.index, 1,
        "only the rget from the unlocked rank 2 can complete"
    );
    assert_eq!(any.outcome.unwrap(), vec![22]);
    assert_eq!(any.rest.len(), 2);
    assert!(!test_all(&any.rest).unwrap(), "rank 1 still holds its lock");
    w[1].unlock(1).await.unwrap();
    assert_eq!(
        wait_all(any.rest).await.unwrap(),
        vec![vec![11], vec![11]],
        "in the order given"
    );
    w[0].unlock(1).await.unwrap();
    w[0].unlock(2).await.unwrap();
    assert!(
        wait_any::<Vec<i64>>(Vec::new()).await.is_none(),
        "MPI_UNDEFINED"
    );
    assert!(test_all::<Vec<i64>>(&[]).unwrap(), "true for no requests");
}
