//! What README promises of the durability modes beyond `sync` (which `recovery.rs` and
//! `binary.rs` hold to account): `off` records nothing, so a restart starts empty; `async`
//! answers before the commit but drops nothing, so after a graceful stop every acknowledged
//! operation is in the log and a restart in `async` brings every byte back.

use onesided_client::{Audit, AuditEvent, LockType, RecordedOp, Session, WindowSpec};
use onesided_server::audit::Durability;

use crate::recovery::public_copies;
use crate::{start_fresh, start_on, unique, world_with, TempDir, ADMIN_TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_records_nothing_so_a_restart_starts_empty() {
    let (data, server) = start_fresh("onesided-off-restart", |config| {
        config.durability = Durability::Off
    })
    .await;
    let admin = &server.admin;
    let world = world_with(admin, "gone", 2, &[WindowSpec::of::<i64>("w", 2, 2)]).await;
    let (session, w) = server.attached_window(&world.tokens[0], "w").await;
    w.lock(LockType::Exclusive, 1, 0).await.unwrap();
    w.put(1, 0, &[7i64, 8]).unwrap();
    w.unlock(1).await.unwrap();
    drop(w);
    session.close().await.unwrap();
    // while it runs, the window is there and holds the put
    assert_eq!(
        public_copies(&server.url, &world.tokens[1], "w", 2, 2).await[1],
        [7, 8]
    );
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let refused = audit.windows().await.expect_err("off has a log to read");
    assert!(
        format!("{refused:?}").contains("the audit log is off"),
        "{refused:?}"
    );
    server.stop().await;

    let server = start_on(&data.0, |config| config.durability = Durability::Off).await;
    let admin = &server.admin;
    assert_eq!(
        admin.list_worlds().await.unwrap(),
        [],
        "a restart starts empty"
    );
    let refused = Session::attach(&server.url, &world.tokens[0]).await;
    assert!(
        refused.is_err(),
        "the old world's token attaches after a restart"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_drops_nothing_and_a_restart_in_async_brings_every_byte_back() {
    const PUTS: i64 = 500;
    let data = TempDir(std::env::temp_dir().join(unique("onesided-async-restart")));
    let asynchronous = |config: &mut onesided_server::ServerConfig| {
        config.durability = Durability::Async;
        // a small budget, so that answers really run ahead of commits and wait for them
        config.async_max_unrecorded = 16;
    };
    let server = start_on(&data.0, asynchronous).await;
    let world = server
        .world_with("kept", 2, &[WindowSpec::of::<i64>("w", 2, 4)])
        .await;
    let (session, w) = server.attached_window(&world.tokens[0], "w").await;
    let id = w.desc().id;
    w.lock_all(0).await.unwrap();
    for i in 0..PUTS {
        w.put((i % 2) as u32, (i % 4) as u64, &[i]).unwrap();
    }
    w.unlock_all().await.unwrap();
    drop(w);
    session.close().await.unwrap();
    let before = public_copies(&server.url, &world.tokens[1], "w", 2, 4).await;
    // rank 0 took the even displacements, rank 1 the odd ones; the last put of each wins
    assert_eq!(before, [[496, 0, 498, 0], [0, 497, 0, 499]]);
    // a graceful stop: what was answered before the commit is committed, none of it dropped
    server.stop().await;

    let server = start_on(&data.0, asynchronous).await;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let log = audit.events(id, 1).await.unwrap();
    let puts = log
        .iter()
        .filter(|entry| {
            matches!(
                entry.event,
                Some(AuditEvent::Op {
                    op: RecordedOp::Put,
                    ..
                })
            )
        })
        .count();
    assert_eq!(puts, PUTS as usize, "every acknowledged put is in the log");
    assert_eq!(audit.verify(id).await.unwrap().first_bad, None);
    assert_eq!(
        public_copies(&server.url, &world.tokens[1], "w", 2, 4).await,
        before
    );
    server.stop().await;
}
