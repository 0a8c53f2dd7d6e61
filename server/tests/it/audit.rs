//! The audit log against SQLite (the default) and a real PostgreSQL: replay equals live,
//! sequence numbers are gap-free under concurrent ranks, tampering is detected at the row, and
//! acknowledged epochs survive kill -9.

use futures::StreamExt;
use onesided_client::{Assert, Audit, AuditEvent, LockType, Op, Window, WindowSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::{ranks, spawn_server, spawn_server_with, unique, Fixture, TestServer, ADMIN_TOKEN};

const ELEMENTS: u64 = 8;

/// One rank's share of a random workload: lock epochs with random operations, and local
/// stores published by a lock/unlock of its own rank.
async fn random_epochs(rank: u32, window: Window, seed: u64) -> Window {
    let nranks = window.desc().nranks();
    let mut rng = StdRng::seed_from_u64(seed * 1000 + u64::from(rank));
    for _ in 0..12 {
        let target = rng.random_range(0..nranks);
        if rng.random_bool(0.2) {
            let index = rng.random_range(0..ELEMENTS);
            window
                .store(index, &[rng.random_range(-50i64..50)])
                .unwrap();
            window.lock(LockType::Exclusive, rank, 0).await.unwrap();
            window.unlock(rank).await.unwrap();
            continue;
        }
        let lock = if rng.random_bool(0.5) {
            LockType::Exclusive
        } else {
            LockType::Shared
        };
        window.lock(lock, target, 0).await.unwrap();
        for _ in 0..rng.random_range(1..5) {
            let disp = rng.random_range(0..ELEMENTS);
            let value = rng.random_range(-100i64..100);
            match rng.random_range(0..5) {
                // conflicting puts under shared locks are races: keep writes deterministic in
                // outcome by using accumulates unless the lock is exclusive
                0 if lock == LockType::Exclusive => window.put(target, disp, &[value]).unwrap(),
                0 | 1 => window.accumulate(target, disp, &[value], Op::Sum).unwrap(),
                2 => drop(window.fetch_and_op(target, disp, value, Op::Sum).unwrap()),
                3 => drop(window.compare_and_swap(target, disp, 0i64, value).unwrap()),
                _ => drop(window.get::<i64>(target, disp, 1).unwrap()),
            }
        }
        window.unlock(target).await.unwrap();
    }
    window
}

/// Runs a random workload on a fresh window and returns its id and the live public copies.
async fn workload(fixture: &Fixture, seed: u64) -> (u64, Vec<Vec<u8>>) {
    let windows = fixture
        .window(WindowSpec::of::<i64>(&unique("w"), 3, ELEMENTS))
        .await;
    let id = windows[0].desc().id;
    let windows = ranks(windows, move |rank, w| random_epochs(rank, w, seed)).await;
    let reader = &windows[0];
    let mut live = Vec::new();
    for target in 0..3 {
        reader.lock(LockType::Shared, target, 0).await.unwrap();
        let copy = reader.get::<u8>(target, 0, ELEMENTS * 8).unwrap();
        reader.unlock(target).await.unwrap();
        live.push(copy.value().await.unwrap());
    }
    (id, live)
}

async fn replay_equals_live(server: TestServer) {
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let fixture = Fixture::on(server, 3).await;
    for seed in 0..6 {
        let (window, live) = workload(&fixture, seed).await;
        let replayed = audit.replay(window, None).await.unwrap();
        assert_eq!(
            replayed.ranks, live,
            "seed {seed}: replay differs from the live copies"
        );
        let verification = audit.verify(window).await.unwrap();
        assert_eq!(verification.first_bad, None, "seed {seed}");
        let events = audit.events(window, 1).await.unwrap();
        let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
        assert_eq!(
            seqs,
            (1..=events.len() as u64).collect::<Vec<_>>(),
            "gap-free"
        );
        assert!(matches!(
            events[0].event,
            Some(AuditEvent::WindowCreated { .. })
        ));
        // replay at an earlier point: right after the creation every copy is zero
        let start = audit.replay(window, Some(1)).await.unwrap();
        assert!(start.ranks.iter().all(|copy| copy.iter().all(|&b| b == 0)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_equals_live_on_sqlite() {
    replay_equals_live(spawn_server().await).await;
}

/// A fresh PostgreSQL database on the machine's server (trust auth on 127.0.0.1:5432), dropped
/// when the test ends.
pub(crate) struct PgDatabase {
    admin_url: String,
    name: String,
    pub(crate) url: String,
}

impl PgDatabase {
    pub(crate) async fn create() -> Self {
        let admin_url = std::env::var("ONESIDED_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
        let name = unique("onesided_test").replace('-', "_");
        let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url)
            .await
            .expect("PostgreSQL must be running for the audit tests (see .ci/run)");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut connection)
            .await
            .unwrap();
        let base = admin_url
            .rsplit_once('/')
            .map_or(admin_url.as_str(), |(base, _)| base);
        let url = format!("{base}/{name}");
        PgDatabase {
            admin_url,
            name,
            url,
        }
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        // a drop cannot await: use a short-lived runtime on another thread
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                if let Ok(mut connection) =
                    <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url).await
                {
                    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&mut connection)
                        .await;
                }
            });
        })
        .join();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_equals_live_on_postgres() {
    let database = PgDatabase::create().await;
    let url = database.url.clone();
    let server = spawn_server_with(move |config| config.database_url = Some(url)).await;
    replay_equals_live(server).await;
    drop(database);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequence_numbers_stay_gap_free_under_eight_concurrent_ranks() {
    let server = spawn_server().await;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let fixture = Fixture::on(server, 8).await;
    let windows = fixture
        .window(WindowSpec::of::<i64>(&unique("w"), 8, 1))
        .await;
    let id = windows[0].desc().id;
    ranks(windows, |_, w| async move {
        w.lock_all(0).await.unwrap();
        for _ in 0..100 {
            w.accumulate(0, 0, &[1i64], Op::Sum).unwrap();
        }
        w.unlock_all().await.unwrap();
    })
    .await;
    let events = audit.events(id, 1).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let ops = events
        .iter()
        .filter(|event| matches!(event.event, Some(AuditEvent::Op { .. })))
        .count();
    assert_eq!(ops, 800, "every accumulate is recorded once");
    let tokens: std::collections::BTreeSet<u64> = events
        .iter()
        .filter_map(|event| match event.event {
            Some(AuditEvent::Op { token, .. }) => Some(token),
            _ => None,
        })
        .collect();
    assert_eq!(
        tokens.len(),
        8,
        "each rank's lock_all grant has its own fencing token"
    );
    assert!(!tokens.contains(&0));
    assert_eq!(audit.verify(id).await.unwrap().first_bad, None);
    let replayed = audit.replay(id, None).await.unwrap();
    assert_eq!(replayed.ranks[0], 800i64.to_le_bytes());
}

async fn sqlite(server: &TestServer) -> sqlx::SqlitePool {
    let path = server.data.0.join("audit.db");
    sqlx::SqlitePool::connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_deleting_or_reordering_a_row_breaks_verify_at_that_row() {
    let server = spawn_server().await;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let database = sqlite(&server).await;
    let fixture = Fixture::on(server, 3).await;
    for (case, sql) in [
        (
            "changed",
            "UPDATE audit_events SET body = replace(body, '\"origin\":0', '\"origin\":2') \
             WHERE window_id = ?1 AND seq = ?2",
        ),
        (
            "deleted",
            "DELETE FROM audit_events WHERE window_id = ?1 AND seq = ?2",
        ),
        ("reordered", ""),
    ] {
        let (window, _) = workload(&fixture, 7).await;
        let events = audit.events(window, 1).await.unwrap();
        let target = events
            .iter()
            .find(|event| event.body.contains("\"origin\":0") && event.seq > 3)
            .expect("an operation of rank 0")
            .seq;
        if case == "reordered" {
            // swap rows target and target+1 through a free sequence number
            let mut tx = database.begin().await.unwrap();
            let target = target as i64;
            for (from, to) in [(target, -1), (target + 1, target), (-1, target + 1)] {
                sqlx::query("UPDATE audit_events SET seq = ?3 WHERE window_id = ?1 AND seq = ?2")
                    .bind(window as i64)
                    .bind(from)
                    .bind(to)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
            }
            tx.commit().await.unwrap();
        } else {
            let done = sqlx::query(sql)
                .bind(window as i64)
                .bind(target as i64)
                .execute(&database)
                .await
                .unwrap();
            assert_eq!(done.rows_affected(), 1, "{case}");
        }
        let verification = audit.verify(window).await.unwrap();
        assert_eq!(verification.first_bad, Some(target), "{case}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_see_live_events_without_gaps() {
    let server = spawn_server().await;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let fixture = Fixture::on(server, 2).await;
    let windows = fixture
        .window(WindowSpec::of::<i64>(&unique("w"), 2, 1))
        .await;
    let id = windows[0].desc().id;
    let mut follower = Box::pin(audit.follow(id, 1).await.unwrap());
    for round in 0..20i64 {
        windows[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
        windows[0].put(1, 0, &[round]).unwrap();
        windows[0].unlock(1).await.unwrap();
    }
    let total = audit.events(id, 1).await.unwrap().len() as u64;
    let mut seen = Vec::new();
    while (seen.len() as u64) < total {
        let event = tokio::time::timeout(std::time::Duration::from_secs(10), follower.next())
            .await
            .expect("the follower stalled")
            .unwrap()
            .unwrap();
        seen.push(event.seq);
    }
    assert_eq!(seen, (1..=total).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_side_of_the_history_is_recorded_in_program_order() {
    let server = spawn_server().await;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let fixture = Fixture::on(server, 2).await;
    let w = fixture
        .window(WindowSpec::of::<i64>(&unique("w"), 2, 4))
        .await;
    let id = w[0].desc().id;
    assert!(w[1].session().audited());
    w[1].store(2, &[5i64]).unwrap();
    w[1].lock(LockType::Exclusive, 1, 0).await.unwrap();
    let _ = w[1].load::<i64>(0, 4).unwrap();
    w[1].unlock(1).await.unwrap();
    w[0].lock_all(0).await.unwrap();
    let got = w[0].get::<i64>(1, 0, 4).unwrap();
    w[0].flush_local(1).await.unwrap();
    w[0].unlock_all().await.unwrap();
    assert_eq!(got.value().await.unwrap(), vec![0, 0, 5, 0]);
    // one more call of each rank carries their last notes
    let (a, b) = tokio::join!(w[0].session().barrier(), w[1].session().barrier());
    a.unwrap();
    b.unwrap();
    let events = audit.events(id, 1).await.unwrap();
    let of_rank = |rank: u32| -> Vec<String> {
        events
            .iter()
            .filter(|event| event.rank == rank && event.incarnation > 0)
            .map(|event| match &event.event {
                Some(AuditEvent::Issued { call, .. }) => format!("issued {call}"),
                Some(AuditEvent::Returned { call, .. }) => format!("returned {call}"),
                Some(AuditEvent::Store { ranges }) => format!("store {ranges:?}"),
                Some(AuditEvent::Load { ranges }) => format!("load {ranges:?}"),
                Some(other) => other.kind().to_string(),
                None => "unreadable".to_string(),
            })
            .collect()
    };
    assert_eq!(
        of_rank(1),
        vec![
            "attach",
            "store [(16, 24)]",
            "issued lock",
            "returned lock",
            "load [(0, 32)]",
            "issued unlock",
            "returned unlock",
            "barrier_enter",
            "barrier_exit",
        ]
    );
    let rank0 = of_rank(0);
    let position = |name: &str| rank0.iter().position(|kind| kind == name);
    assert!(position("op_issued") < position("flush_local"), "{rank0:?}");
    assert!(
        position("flush_local") < position("issued unlock_all"),
        "{rank0:?}"
    );
    assert!(
        rank0.contains(&"returned unlock_all".to_string()),
        "{rank0:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_flags_forum_example_3_and_passes_example_2() {
    let server = spawn_server().await;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let fixture = Fixture::on(server, 2).await;

    // example 3: B's store before its shared lock races with A's get
    let windows = fixture
        .window(WindowSpec::of::<i64>(&unique("w"), 2, 1))
        .await;
    let racy = windows[0].desc().id;
    ranks(windows, |rank, w| async move {
        if rank == 1 {
            w.store(0, &[7i64]).unwrap();
            w.lock(LockType::Shared, 1, 0).await.unwrap();
            w.session().barrier().await.unwrap();
            w.session().barrier().await.unwrap();
            w.unlock(1).await.unwrap();
        } else {
            w.session().barrier().await.unwrap();
            w.lock(LockType::Shared, 1, 0).await.unwrap();
            let x = w.get::<i64>(1, 0, 1).unwrap();
            w.unlock(1).await.unwrap();
            x.value().await.unwrap();
            w.session().barrier().await.unwrap();
        }
    })
    .await;
    let findings = audit.check(racy).await.unwrap();
    assert!(
        findings
            .iter()
            .any(|f| f.rule == "get_store" && f.target == 1 && f.bytes == (0, 8)),
        "{findings:#?}"
    );

    // example 2: put under an exclusive lock, barrier, the owner locks its window and loads
    let windows = fixture
        .window(WindowSpec::of::<i64>(&unique("w"), 2, 1))
        .await;
    let correct = windows[0].desc().id;
    ranks(windows, |rank, w| async move {
        if rank == 0 {
            w.lock(LockType::Exclusive, 1, 0).await.unwrap();
            w.put(1, 0, &[7i64]).unwrap();
            w.unlock(1).await.unwrap();
            w.session().barrier().await.unwrap();
        } else {
            w.session().barrier().await.unwrap();
            w.lock(LockType::Exclusive, 1, 0).await.unwrap();
            assert_eq!(w.load::<i64>(0, 1).unwrap(), vec![7]);
            w.unlock(1).await.unwrap();
        }
    })
    .await;
    assert_eq!(audit.check(correct).await.unwrap(), Vec::new());

    let trace: serde_json::Value =
        serde_json::from_str(&audit.export_perfetto(racy).await.unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let tracks = events
        .iter()
        .filter(|event| event["ph"] == "M" && event["name"] == "thread_name")
        .count();
    assert_eq!(tracks, 2, "one track per rank");
    assert!(events.iter().any(|event| event["ph"] == "s"));
    assert!(events.iter().any(|event| event["ph"] == "f"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_record_their_fence_epoch() {
    let server = spawn_server().await;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let fixture = Fixture::on(server, 2).await;
    let windows = fixture
        .window(WindowSpec::of::<i64>(&unique("w"), 2, 1))
        .await;
    let id = windows[0].desc().id;
    ranks(windows, |rank, w| async move {
        w.fence(0).await.unwrap();
        w.fence(0).await.unwrap();
        if rank == 0 {
            w.put(1, 0, &[1i64]).unwrap();
        }
        w.fence(Assert::NOSUCCEED).await.unwrap();
    })
    .await;
    let epochs: Vec<(u64, u64)> = audit
        .events(id, 1)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|event| match event.event {
            Some(AuditEvent::Op { epoch, token, .. }) => Some((epoch, token)),
            _ => None,
        })
        .collect();
    assert_eq!(
        epochs,
        vec![(2, 0)],
        "issued after the second fence, no lock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_session_records_its_last_loads_and_stores() {
    let server = spawn_server().await;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let fixture = Fixture::on(server, 1).await;
    let windows = fixture
        .window(WindowSpec::of::<i64>(&unique("w"), 1, 2))
        .await;
    let id = windows[0].desc().id;
    windows[0].store(1, &[3i64]).unwrap();
    let _ = windows[0].load::<i64>(0, 1).unwrap();
    let session = windows[0].session().clone();
    // the window handle is gone; its pending accesses are still shipped at close
    drop(windows);
    session.close().await.unwrap();
    let kinds: Vec<String> = audit
        .events(id, 1)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|event| match event.event {
            Some(AuditEvent::Store { ranges }) => Some(format!("store {ranges:?}")),
            Some(AuditEvent::Load { ranges }) => Some(format!("load {ranges:?}")),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, vec!["store [(8, 16)]", "load [(0, 8)]"]);
}
