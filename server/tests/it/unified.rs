//! The unified memory model through the real server and client: the owner's stores reach its
//! public copy without RMA calls, remote updates reach its memory without RMA calls, neither
//! overwrites a newer value of the other, and the log replays, verifies and checks as live.

use std::time::Duration;

use onesided_client::{Audit, LockType, MemoryModel, WindowSpec};

use crate::recovery::public_copies;
use crate::{poll_until, start_fresh, unique, Fixture, ADMIN_TOKEN};

fn unified(name: &str, nranks: u32, count: u64) -> WindowSpec {
    WindowSpec::of::<i64>(name, nranks, count).model(MemoryModel::Unified)
}

/// Polls `load` until it returns `want` (a unified update arrives by itself; nothing here
/// makes it come), failing after 5 s.
async fn eventually(want: i64, load: impl Fn() -> i64) {
    let seen = || std::future::ready(load());
    let otherwise = |seen: &i64| format!("still {seen}, not {want}, after 5 s");
    let within = Duration::from_secs(5);
    poll_until(
        within,
        Duration::ZERO,
        seen,
        |&seen| seen == want,
        otherwise,
    )
    .await;
}

/// `MPI_Barrier` of both ranks.
async fn barrier(fixture: &Fixture) {
    let (a, b) = tokio::join!(fixture.sessions[0].barrier(), fixture.sessions[1].barrier());
    a.unwrap();
    b.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_and_remote_updates_need_no_synchronization_call() {
    let fixture = Fixture::new(2).await;
    let w = fixture.window(unified("u", 2, 4)).await;
    assert_eq!(w[0].desc().model, MemoryModel::Unified);
    // rank 1 stores outside any epoch; rank 0 reads it after a barrier: no unlock, fence or
    // sync of rank 1 published it
    w[1].store(0, &[42i64]).unwrap();
    barrier(&fixture).await;
    w[0].lock(LockType::Shared, 1, 0).await.unwrap();
    let got = w[0].get::<i64>(1, 0, 1).unwrap();
    w[0].unlock(1).await.unwrap();
    assert_eq!(got.value().await.unwrap(), vec![42]);
    // rank 0 puts into rank 1; rank 1 loads it after a barrier, with no refresh call: the
    // update reached its memory before the unlock returned
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].put(1, 1, &[7i64]).unwrap();
    w[0].unlock(1).await.unwrap();
    barrier(&fixture).await;
    assert_eq!(w[1].load::<i64>(1, 1).unwrap(), vec![7]);
    // and without any ordering at all it arrives by itself, promptly
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].accumulate(1, 2, &[5i64], onesided_client::Op::Sum)
        .unwrap();
    w[0].unlock(1).await.unwrap();
    eventually(5, || w[1].load::<i64>(2, 1).unwrap()[0]).await;
}

/// The owner's own later store is never overwritten by an older remote update, and after a
/// quiet moment both copies agree: the private copy converges on the public one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_and_public_copies_converge_under_concurrent_stores_and_puts() {
    let fixture = Fixture::new(2).await;
    // two elements that both write, so that updates made before a store was applied often
    // arrive after it
    let mut w = fixture.window(unified("c", 2, 2)).await;
    let owner = w.pop().unwrap();
    let origin = w.pop().unwrap();
    let putter = tokio::spawn(async move {
        for round in 0..300i64 {
            origin.lock(LockType::Exclusive, 1, 0).await.unwrap();
            origin.put(1, 0, &[round, round]).unwrap();
            origin.unlock(1).await.unwrap();
        }
        origin
    });
    for round in 0..3000i64 {
        let index = (round % 2) as u64;
        owner.store(index, &[-round]).unwrap();
        // a load right after a store sees that store, whatever arrives meanwhile
        assert_eq!(owner.load::<i64>(index, 1).unwrap(), vec![-round]);
        if round % 10 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let origin = putter.await.unwrap();
    // the owner calls nothing that synchronizes its window (a lock, a fence or a sync would
    // pull and push, and make the copies agree under the separate model too): its stores
    // reach the public copy, and the puts its memory, by themselves. The barrier only says
    // the owner is done storing.
    barrier(&fixture).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        origin.lock(LockType::Shared, 1, 0).await.unwrap();
        let public = origin.get::<i64>(1, 0, 2).unwrap();
        origin.unlock(1).await.unwrap();
        let public = public.value().await.unwrap();
        let private = owner.load::<i64>(0, 2).unwrap();
        if private == public {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "private {private:?} and public {public:?} still differ after 5 s"
        );
        tokio::task::yield_now().await;
    }
}

/// A unified window comes back unified after a restart, and its log — stores published
/// without epochs included — replays to the live public copies and verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unified_window_survives_a_restart_and_its_log_replays() {
    let (_data, server) = start_fresh("onesided-unified", |_| {}).await;
    let admin = onesided_client::Admin::connect(&server.url, ADMIN_TOKEN)
        .await
        .unwrap();
    let world = admin.create_world(&unique("uni"), 2).await.unwrap();
    let desc = admin
        .create_window(&world.name, &unified("w", 2, 4))
        .await
        .unwrap();
    let session = onesided_client::Session::attach(&server.url, &world.tokens[1])
        .await
        .unwrap();
    let w = session.window("w").await.unwrap();
    w.store(3, &[11i64]).unwrap();
    w.store(0, &[12i64]).unwrap();
    // close ships what is pending and waits for its answers
    drop(w);
    session.close().await.unwrap();
    let server = server.restart(|_| {}).await;
    let admin = onesided_client::Admin::connect(&server.url, ADMIN_TOKEN)
        .await
        .unwrap();
    let back = admin.describe_window(&world.name, "w").await.unwrap();
    assert_eq!(back.model, MemoryModel::Unified);
    let copies = public_copies(&server.url, &world.tokens[0], "w", 2, 4).await;
    assert_eq!(copies[1], vec![12, 0, 0, 11]);
    // a new session's private copy starts as the public one
    let session = onesided_client::Session::attach(&server.url, &world.tokens[1])
        .await
        .unwrap();
    let w = session.window("w").await.unwrap();
    assert_eq!(w.load::<i64>(0, 4).unwrap(), vec![12, 0, 0, 11]);
    drop(w);
    session.close().await.unwrap();
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let replayed = audit.replay(desc.id, None).await.unwrap();
    assert_eq!(replayed.ranks[1][..8], 12i64.to_le_bytes());
    assert_eq!(replayed.ranks[1][24..], 11i64.to_le_bytes());
    assert_eq!(audit.verify(desc.id).await.unwrap().first_bad, None);
    assert!(audit.check(desc.id).await.unwrap().is_empty());
    server.stop().await;
}
