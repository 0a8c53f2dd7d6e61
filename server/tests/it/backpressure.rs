//! A server slowed down by its own audit store must not take that out on live clients: a
//! session whose task waits on the audit writer's back-pressure for longer than the lease keeps
//! its lease, since its client kept sending.

use std::time::Duration;

use onesided_client::WindowSpec;
use onesided_server::audit::Durability;
use sqlx::Connection;

use crate::{spawn_server_with, unique, Fixture};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_blocked_behind_a_stalled_audit_store_keeps_its_lease() {
    let admin_url = std::env::var("ONESIDED_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let name = unique("onesided_stall").replace('-', "_");
    let mut admin = sqlx::PgConnection::connect(&admin_url)
        .await
        .expect("PostgreSQL must be running for the audit tests (see .ci/run)");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let base = admin_url
        .rsplit_once('/')
        .map_or(admin_url.as_str(), |(base, _)| base);
    let url = format!("{base}/{name}");
    let lease = Duration::from_secs(1);
    let store = url.clone();
    let server = spawn_server_with(move |config| {
        config.database_url = Some(store);
        config.durability = Durability::Async;
        config.lease_ttl = lease;
    })
    .await;
    let fixture = Fixture::on(server, 2).await;
    let windows = fixture
        .window(WindowSpec::of::<i64>(&unique("w"), 2, 1))
        .await;
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
    for i in 0..20_000i64 {
        w.put(1, 0, &[i]).unwrap();
    }
    // the stall itself: three leases long, while the client sends heartbeats
    let stall = async {
        tokio::time::sleep(lease * 3).await;
        sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
    };
    let (flushed, ()) = tokio::join!(w.flush(1), stall);
    flushed.expect("the session survives the stall");
    w.unlock_all().await.unwrap();
    w.lock_all(0).await.unwrap();
    let last = w.get::<i64>(1, 0, 1).unwrap();
    w.unlock_all().await.unwrap();
    assert_eq!(last.value().await.unwrap(), vec![19_999]);

    drop(windows);
    drop(fixture);
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut admin)
        .await
        .unwrap();
}
