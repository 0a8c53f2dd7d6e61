//! A server slowed down by its own audit store must not take that out on live clients: a
//! session whose task waits on the audit writer's back-pressure for longer than the lease keeps
//! its lease, since its client kept sending.

use std::time::{Duration, Instant};

use onesided_server::audit::Durability;
use sqlx::Connection;

use crate::store::PgDatabase;
use crate::{spawn_server_with, Fixture};

/// Events the server may answer before they are committed: far fewer than the puts below, so
/// the session task must wait for the store.
const MAX_UNRECORDED: usize = 256;

/// Few enough to be handled well within the stall when nothing blocks.
const PUTS: i64 = 2_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_blocked_behind_a_stalled_audit_store_keeps_its_lease() {
    // dropped on drop, whether the test passes or not
    let database = PgDatabase::create().await;
    let url = database.url.clone();
    let lease = Duration::from_secs(1);
    let store = url.clone();
    let server = spawn_server_with(move |config| {
        config.database_url = Some(store);
        config.durability = Durability::Async;
        config.lease_ttl = lease;
        config.async_max_unrecorded = MAX_UNRECORDED;
    })
    .await;
    let fixture = Fixture::on(server, 2).await;
    let windows = fixture.window_of::<i64>(1).await;
    let w = &windows[0];
    w.lock_all(0).await.unwrap();
    w.flush(1).await.unwrap();

    // the audit store stops taking rows: the writer's commit waits on the lock, its inbox
    // fills, and the session task waits to hand over the events of the puts below
    let mut blocker = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut blocker).await.unwrap();
    sqlx::query("LOCK TABLE audit_events IN ACCESS EXCLUSIVE MODE")
        .execute(&mut blocker)
        .await
        .unwrap();
    for i in 0..PUTS {
        w.put(1, 0, &[i]).unwrap();
    }
    // the stall itself: three leases long, while the client sends heartbeats
    let stall = async {
        tokio::time::sleep(lease * 3).await;
        let released = Instant::now();
        sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
        released
    };
    let flush = async {
        let flushed = w.flush(1).await;
        (flushed, Instant::now())
    };
    let ((flushed, answered), released) = tokio::join!(flush, stall);
    flushed.expect("the session survives the stall");
    // the flush is answered by the session task after the puts ahead of it, which cannot all
    // be taken before the store takes rows again: the session really waited past its lease
    assert!(
        answered > released,
        "the flush was answered {:?} before the store was released: nothing blocked",
        released - answered
    );
    w.unlock_all().await.unwrap();
    w.lock_all(0).await.unwrap();
    let last = w.get::<i64>(1, 0, 1).unwrap();
    w.unlock_all().await.unwrap();
    assert_eq!(last.value().await.unwrap(), vec![PUTS - 1]);

    drop(windows);
    drop(fixture);
    drop(database);
}
