//! An SQLite store's events in rows of their own or in groups (the default since issue 45;
//! `--audit-sqlite-rows per-event` writes rows), through the real server and client: a store
//! written one row per event (as the previous release writes it) reads the same under a server
//! that writes groups, its chain goes on in groups, a server writing one row per event again
//! reads both, and recovery rebuilds the window from either.

use onesided_client::{Audit, AuditEntry, LockType, Op, WindowSpec, WorldTokens};
use onesided_server::audit::Rows;

use crate::{start_fresh, unique, Restartable, ADMIN_TOKEN};

/// Epochs `rounds` of rank 0 on rank 1's copy of `w` (four `i64`s): a lock-put-unlock, an
/// accumulate and a fetch-and-op under one lock, and a PSCW epoch with a put.
async fn epochs(server: &Restartable, world: &WorldTokens, rounds: std::ops::Range<i64>) {
    let (origin, window) = server.attached_window(&world.tokens[0], "w").await;
    let (target, exposed) = server.attached_window(&world.tokens[1], "w").await;
    for round in rounds {
        window.lock(LockType::Exclusive, 1, 0).await.unwrap();
        window.put(1, 0, &[round]).unwrap();
        window.unlock(1).await.unwrap();
        window.lock(LockType::Shared, 1, 0).await.unwrap();
        window.accumulate(1, 1, &[round], Op::Sum).unwrap();
        let old = window.fetch_and_op(1, 2, 1i64, Op::Sum).unwrap();
        window.flush(1).await.unwrap();
        window.unlock(1).await.unwrap();
        old.value().await.unwrap();
        exposed.post(&[0], 0).unwrap();
        window.start(&[1], 0).unwrap();
        window.put(1, 3, &[round * 10]).unwrap();
        window.complete().await.unwrap();
        exposed.wait().await.unwrap();
    }
    drop((window, exposed));
    origin.close().await.unwrap();
    target.close().await.unwrap();
}

/// Everything the Audit service answers about `window`: the recorded windows, its events (from
/// the start and from the middle), the verification, the replays at the end and in the middle,
/// the race check and the Perfetto export; and its events.
async fn read_all(server: &Restartable, window: u64) -> (String, Vec<AuditEntry>) {
    let audit = Audit::connect(server.url.as_str(), ADMIN_TOKEN)
        .await
        .unwrap();
    let events = audit.events(window, 1).await.unwrap();
    let middle = events.len() as u64 / 2;
    let verification = audit.verify(window).await.unwrap();
    assert_eq!(verification.first_bad, None, "{verification:?}");
    let read = format!(
        "{:?}\n{events:?}\n{:?}\n{verification:?}\n{:?}\n{:?}\n{:?}\n{}",
        audit.windows().await.unwrap(),
        audit.events(window, middle).await.unwrap(),
        audit.replay(window, None).await.unwrap(),
        audit.replay(window, Some(middle)).await.unwrap(),
        audit.check(window).await.unwrap(),
        audit.export_perfetto(window).await.unwrap(),
    );
    (read, events)
}

/// Asserts `read` is `expected`, showing where they part (the reads are long).
fn assert_same(read: &str, expected: &str, what: &str) {
    let at = read
        .bytes()
        .zip(expected.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(read.len().min(expected.len()));
    let around = |text: &str| {
        let start = text.floor_char_boundary(at.saturating_sub(200));
        let end = text.ceil_char_boundary((at + 200).min(text.len()));
        text[start..end].to_string()
    };
    assert!(
        read == expected,
        "{what}: they part at byte {at}:\n{}\n---- expected ----\n{}",
        around(read),
        around(expected)
    );
}

/// `(rows in audit_events, groups in audit_groups)` of `window` in the store in `data`.
async fn stored(data: &std::path::Path, window: u64) -> (i64, i64) {
    use sqlx::Connection;
    let url = format!("sqlite:{}", data.join("audit.db").display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM audit_events WHERE window_id = $1), \
         (SELECT COUNT(*) FROM audit_groups WHERE window_id = $1)",
    )
    .bind(window as i64)
    .fetch_one(&mut conn)
    .await
    .unwrap()
}

/// Rank 1's copy of `w`, read live by rank 0.
async fn live(server: &Restartable, world: &WorldTokens) -> Vec<i64> {
    let (session, window) = server.attached_window(&world.tokens[0], "w").await;
    window.lock(LockType::Shared, 1, 0).await.unwrap();
    let got = window.get::<i64>(1, 0, 4).unwrap();
    window.unlock(1).await.unwrap();
    let got = got.value().await.unwrap();
    drop(window);
    session.close().await.unwrap();
    got
}

/// `server` restarted writing `rows`, once it read `window`'s whole log as `expected` (`what`:
/// how the restarted server writes).
async fn restarted_reading(
    server: Restartable,
    rows: Rows,
    window: u64,
    expected: &str,
    what: &str,
) -> Restartable {
    let server = server.restart(|config| config.sqlite_rows = rows).await;
    let read = read_all(&server, window).await.0;
    assert_same(&read, expected, &format!("read by the server {what}"));
    server
}

/// A log written one row per event reads exactly the same under a server that writes groups;
/// that server writes its events in groups and the chain goes on across both; a server
/// writing one row per event again reads the whole log, the same as the one that wrote the
/// groups; and each restart rebuilds the window's bytes from the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_written_per_event_reads_the_same_and_goes_on_in_groups_and_back() {
    let (data, server) = start_fresh("onesided-shapes", |config| {
        config.sqlite_rows = Rows::PerEvent
    })
    .await;
    let spec = WindowSpec::of::<i64>("w", 2, 4);
    let name = unique("shapes");
    let world = server.world_with(&name, 2, &[spec]).await;
    let audit = Audit::connect(server.url.as_str(), ADMIN_TOKEN)
        .await
        .unwrap();
    let window = audit
        .windows()
        .await
        .unwrap()
        .into_iter()
        .find(|window| window.world == name)
        .unwrap()
        .id;
    epochs(&server, &world, 1..4).await;
    // each read after a restart: the sessions' last events are committed by then
    let server = server
        .restart(|config| config.sqlite_rows = Rows::PerEvent)
        .await;
    let (written, before) = read_all(&server, window).await;
    let (rows, groups) = stored(&data.0, window).await;
    assert!(rows > 20 && groups == 0, "{rows} rows, {groups} groups");

    let server = restarted_reading(server, Rows::Groups, window, &written, "writing groups").await;
    assert_eq!(live(&server, &world).await, vec![3, 6, 3, 30]);
    epochs(&server, &world, 4..7).await;
    let server = server
        .restart(|config| config.sqlite_rows = Rows::Groups)
        .await;
    let (more_rows, groups) = stored(&data.0, window).await;
    assert!(groups > 0, "no group written");
    assert_eq!(more_rows, rows, "the server writing groups wrote rows");
    let (grouped, after) = read_all(&server, window).await;
    assert!(after.len() > before.len() + 20);
    assert_eq!(
        after[..before.len()],
        before[..],
        "the log before the groups changed"
    );

    let server = restarted_reading(
        server,
        Rows::PerEvent,
        window,
        &grouped,
        "writing per event",
    )
    .await;
    assert_eq!(live(&server, &world).await, vec![6, 21, 6, 60]);
    epochs(&server, &world, 7..8).await;
    assert!(stored(&data.0, window).await.0 > rows);
    assert_eq!(live(&server, &world).await, vec![7, 28, 7, 70]);
    let audit = Audit::connect(server.url.as_str(), ADMIN_TOKEN)
        .await
        .unwrap();
    assert_eq!(audit.verify(window).await.unwrap().first_bad, None);
    server.stop().await;
}
