//! The `onesided-server` binary: embedded defaults, a graceful stop on SIGTERM while sessions
//! are attached, and acknowledged history surviving kill -9 (on SQLite and PostgreSQL, with
//! the clients' own events shipped or persisted by them, and under sixteen concurrent clients
//! on both stores).

use std::process::Command;
use std::time::Duration;

use onesided_client::{Admin, Session, WindowSpec};

use crate::store::Store;
use crate::{unique, Launched, TempDir};

/// Starts the binary and returns it with the address it printed.
fn start(data: &TempDir, extra: &[&str]) -> (Launched, String) {
    crate::launch_server_listening(data, extra, "info")
}

/// SIGTERM; it must exit within 10 s.
fn terminate(child: Launched) -> std::process::ExitStatus {
    child.terminate(Duration::from_secs(10)).0
}

/// [`terminate`] off the test's runtime; it must exit successfully.
async fn stopped_cleanly(child: Launched) {
    let status = tokio::task::spawn_blocking(move || terminate(child))
        .await
        .unwrap();
    assert!(status.success(), "{status}");
}

/// An admin client of the binary at `url` (started with the suite's admin token).
async fn admin_at(url: &str) -> Admin {
    Admin::connect(url, "binary-test-admin-token")
        .await
        .unwrap()
}

/// The binary on a fresh data directory with the suite's admin token and `listen` (a flag
/// naming a listener of its own) on 127.0.0.1:0, once it printed `until`.
fn launched_listening_too(listen: &str, until: &str) -> (TempDir, Launched) {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-bin")));
    let flags = [
        "--admin-token",
        "binary-test-admin-token",
        listen,
        "127.0.0.1:0",
    ];
    let child = crate::launch_server(&data, &flags, "info", until);
    (data, child)
}

/// The address in `url`, a printed `http://ADDRESS{path}`, whose port is the one bound (not 0).
fn bound_address(url: &str, path: &str) -> std::net::SocketAddr {
    let address: std::net::SocketAddr = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix(path))
        .unwrap_or_else(|| panic!("not a URL of {path}: {url}"))
        .parse()
        .unwrap();
    assert_ne!(address.port(), 0, "the bound port is printed");
    address
}

/// The binary without an admin token ([`start`]), and the one it generated into its data
/// directory `data`, as the file has it.
fn started_generating_a_token(data: &TempDir) -> (Launched, String, String) {
    let (child, url) = start(data, &[]);
    let token = std::fs::read_to_string(data.0.join("admin-token")).unwrap();
    (child, url, token)
}

/// The flags of a binary with the suite's admin token that records in `store`.
fn flags_recording_in(store: &Store) -> Vec<String> {
    let mut flags = vec![
        "--admin-token".to_string(),
        "binary-test-admin-token".to_string(),
    ];
    if let Some(database) = store.database_url() {
        flags.extend(["--database-url".to_string(), database]);
    }
    if matches!(store, Store::SqlitePerEvent) {
        flags.extend(["--audit-sqlite-rows".to_string(), "per-event".to_string()]);
    }
    flags
}

/// [`start`] with the flags of [`flags_recording_in`] `store`.
fn start_recording_in(data: &TempDir, store: &Store) -> (Launched, String) {
    let flags = flags_recording_in(store);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    start(data, &flags)
}

/// Rank 0's session and its handle of window `x` (two `i64` per rank) of a new world `w` of
/// two ranks, on the server at `url`.
async fn rank_0_of_window_x(admin: &Admin, url: &str) -> (Session, onesided_client::Window) {
    let world = admin.create_world("w", 2).await.unwrap();
    admin
        .create_window("w", &WindowSpec::of::<i64>("x", 2, 1))
        .await
        .unwrap();
    let session = Session::attach(url, &world.tokens[0]).await.unwrap();
    let window = session.window("x").await.unwrap();
    (session, window)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_with_defaults_and_stops_on_sigterm_with_sessions_attached() {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-bin")));
    // no --admin-token: one was generated into the data directory
    let (child, url, token) = started_generating_a_token(&data);
    let admin = Admin::connect(&url, token.trim()).await.unwrap();
    let (session, window) = rank_0_of_window_x(&admin, &url).await;
    window.lock_all(0).await.unwrap();
    // a call that will wait forever: rank 1 never arrives at the barrier
    let waiting = tokio::spawn({
        let session = session.clone();
        async move { session.barrier().await }
    });
    stopped_cleanly(child).await;
    let error = waiting.await.unwrap().unwrap_err();
    assert_eq!(error.code(), tonic::Code::Unavailable, "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_thread_serves_epochs_among_ranks_and_stops_on_sigterm() {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-bin")));
    let (child, url) = start(
        &data,
        &[
            "--worker-threads",
            "1",
            "--admin-token",
            "binary-test-admin-token",
        ],
    );
    let admin = admin_at(&url).await;
    let world = admin.create_world("w", 2).await.unwrap();
    admin
        .create_window("w", &WindowSpec::of::<i64>("x", 2, 1))
        .await
        .unwrap();
    let mut windows = Vec::new();
    for token in &world.tokens {
        let session = Session::attach(&url, token).await.unwrap();
        windows.push(session.window("x").await.unwrap());
    }
    // a fence epoch needs every rank's session served while another's fence waits
    let epochs = windows.iter().enumerate().map(|(rank, window)| async move {
        window.fence(0).await.unwrap();
        window.put(1 - rank as u32, 0, &[rank as i64 + 10]).unwrap();
        window.fence(0).await.unwrap();
        window.load::<i64>(0, 1).unwrap()
    });
    let seen = futures::future::join_all(epochs).await;
    assert_eq!(seen, vec![vec![11], vec![10]]);
    stopped_cleanly(child).await;
}

#[test]
fn zero_worker_threads_is_a_usage_error() {
    let output = Command::new(crate::SERVER_BINARY)
        .args(["--worker-threads", "0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--worker-threads"), "{stderr}");
}

/// Every flag and environment variable `docker-compose.yml` hands the server is one this
/// binary's `--help` lists (the CLI suite's compose test reads them from the source, which
/// cannot name this binary).
/// `--help` names the variables that carry secrets, never their values (clap would print a
/// variable's value beside its flag).
#[test]
fn help_shows_no_secret_given_in_the_environment() {
    let token = "admin-token-secret-in-env";
    let password = "pg-password-secret-in-env";
    let output = Command::new(crate::SERVER_BINARY)
        .arg("--help")
        .env_clear()
        .env("ONESIDED_ADMIN_TOKEN", token)
        .env(
            "DATABASE_URL",
            format!("postgres://audit:{password}@db/audit"),
        )
        .output()
        .unwrap();
    assert!(output.status.success(), "onesided-server --help fails");
    let help = String::from_utf8_lossy(&output.stdout);
    for variable in ["ONESIDED_ADMIN_TOKEN", "DATABASE_URL"] {
        assert!(help.contains(&format!("[env: {variable}]")), "{help}");
    }
    assert!(!help.contains(token), "{help}");
    assert!(!help.contains(password), "{help}");
}

#[test]
fn the_compose_file_passes_only_flags_and_variables_the_binary_has() {
    use yaml_rust2::{Yaml, YamlLoader};
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docker-compose.yml");
    let text = std::fs::read_to_string(path).unwrap();
    let documents = YamlLoader::load_from_str(&text).unwrap();
    let service = &documents[0]["services"]["onesided"];
    let words = |value: &Yaml| -> Vec<String> {
        match value {
            Yaml::Array(items) => items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_string))
                .collect(),
            Yaml::String(line) => line.split_whitespace().map(str::to_string).collect(),
            _ => Vec::new(),
        }
    };
    let mut passed = words(&service["entrypoint"]);
    passed.extend(words(&service["command"]));
    let flags: Vec<&str> = passed
        .iter()
        .filter(|word| word.starts_with("--"))
        .map(|word| word.split('=').next().unwrap())
        .collect();
    let variables: Vec<&str> = match &service["environment"] {
        Yaml::Hash(map) => map.keys().filter_map(Yaml::as_str).collect(),
        Yaml::Array(items) => items
            .iter()
            .filter_map(Yaml::as_str)
            .map(|item| item.split('=').next().unwrap())
            .collect(),
        other => panic!("environment is neither a map nor a list: {other:?}"),
    };
    let variables: Vec<&str> = variables
        .into_iter()
        .filter(|key| key.starts_with("ONESIDED_") || *key == "DATABASE_URL")
        .collect();
    assert!(!flags.is_empty(), "compose passes the server no flag");
    assert!(!variables.is_empty(), "compose sets the server no variable");
    let output = Command::new(crate::SERVER_BINARY)
        .arg("--help")
        .env_clear()
        .output()
        .unwrap();
    assert!(output.status.success(), "onesided-server --help fails");
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in &flags {
        assert!(
            help.contains(&format!("{flag} ")),
            "onesided-server --help has no {flag}"
        );
    }
    for variable in &variables {
        assert!(
            help.contains(&format!("[env: {variable}")),
            "onesided-server --help reads no {variable}"
        );
    }
}

/// With `persisting`, the session writes its own events to the store itself.
async fn acknowledged_epochs_survive_kill_9_in_sync_durability(store: Store, persisting: bool) {
    use onesided_client::{Audit, AuditEvent, LockType};
    let data = TempDir(std::env::temp_dir().join(unique("onesided-bin")));
    let (mut child, url) = start_recording_in(&data, &store);
    let admin = admin_at(&url).await;
    let world = admin.create_world("w", 2).await.unwrap();
    let desc = admin
        .create_window("w", &WindowSpec::of::<i64>("x", 2, 1))
        .await
        .unwrap();
    let builder = Session::builder(&url, &world.tokens[0]);
    let builder = if persisting {
        builder.audit_database_url(store.url_in(&data.0))
    } else {
        builder.ship_audit_events()
    };
    let session = builder.attach().await.unwrap();
    assert_eq!(session.persists_audit_events(), persisting);
    let window = session.window("x").await.unwrap();
    window.store(0, &[17i64]).unwrap();
    window.lock(LockType::Exclusive, 1, 0).await.unwrap();
    window.put(1, 0, &[4242i64]).unwrap();
    window.unlock(1).await.unwrap();
    // a PSCW epoch: post and start are answered before their commit, so the complete and the
    // wait that end it must wait for a commit that covers them and the put
    let other = Session::attach(&url, &world.tokens[1]).await.unwrap();
    let exposed = other.window("x").await.unwrap();
    exposed.post(&[0], 0).unwrap();
    window.start(&[1], 0).unwrap();
    window.put(1, 0, &[777i64]).unwrap();
    window.complete().await.unwrap();
    exposed.wait().await.unwrap();
    // a second epoch acknowledged by its complete alone (its wait is never called): complete
    // returns once its targets acknowledged their markers, after the commit that holds the
    // complete and the put
    exposed.post(&[0], 0).unwrap();
    window.start(&[1], 0).unwrap();
    window.put(1, 0, &[778i64]).unwrap();
    window.complete().await.unwrap();
    // acknowledged: now kill -9, no chance to flush anything
    child.kill();
    drop(window);
    drop(session);
    drop(exposed);
    drop(other);

    let (child, url) = start_recording_in(&data, &store);
    let audit = Audit::connect(&url, "binary-test-admin-token")
        .await
        .unwrap();
    let events = audit.events(desc.id, 1).await.unwrap();
    let put = events.iter().find_map(|event| match &event.event {
        Some(AuditEvent::Op { data, .. }) => Some(data.clone()),
        _ => None,
    });
    assert_eq!(
        put,
        Some(4242i64.to_le_bytes().to_vec()),
        "the acknowledged put is in the log"
    );
    assert!(events
        .iter()
        .any(|event| matches!(event.event, Some(AuditEvent::LockRelease { .. }))));
    // the store before the lock: shipped with the lock, or persisted and named by its marker
    let store = events
        .iter()
        .find(|event| matches!(event.event, Some(AuditEvent::Store { .. })))
        .expect("the acknowledged store is in the log");
    assert_eq!(store.cseq.is_some(), persisting);
    let pscw: Vec<(u32, &str)> = events
        .iter()
        .filter_map(|event| {
            let kind = match event.event.as_ref()? {
                AuditEvent::Post { .. } => "post",
                AuditEvent::Start { .. } => "start",
                AuditEvent::Complete => "complete",
                AuditEvent::WaitExit => "wait_exit",
                AuditEvent::Op { data, .. } if *data == 777i64.to_le_bytes() => "put",
                AuditEvent::Op { data, .. } if *data == 778i64.to_le_bytes() => "second put",
                _ => return None,
            };
            Some((event.rank, kind))
        })
        .collect();
    for expected in [
        (1, "post"),
        (0, "start"),
        (0, "complete"),
        (1, "put"),
        (1, "wait_exit"),
        (1, "second put"),
    ] {
        assert!(
            pscw.contains(&expected),
            "{expected:?} is in the log: {pscw:?}"
        );
    }
    let completes = pscw.iter().filter(|&&kind| kind == (0, "complete")).count();
    assert_eq!(
        completes, 2,
        "both acknowledged completes are in the log: {pscw:?}"
    );
    let verification = audit.verify(desc.id).await.unwrap();
    assert_eq!(verification.first_bad, None);
    assert_eq!(verification.client_events > 0, persisting);
    let replayed = audit.replay(desc.id, None).await.unwrap();
    assert_eq!(replayed.ranks[1], 778i64.to_le_bytes());
    // the world, its tokens and the window came back, rebuilt from the log
    let session = Session::attach(&url, &world.tokens[0]).await.unwrap();
    let window = session.window("x").await.unwrap();
    assert_eq!(window.desc().id, desc.id);
    window.lock(LockType::Shared, 1, 0).await.unwrap();
    let live = window.get::<i64>(1, 0, 1).unwrap();
    window.unlock(1).await.unwrap();
    assert_eq!(live.value().await.unwrap(), vec![778]);
    drop(window);
    session.close().await.unwrap();
    // a window created after the restart never reuses a recorded id
    let admin = admin_at(&url).await;
    let again = admin
        .create_window("w", &WindowSpec::of::<i64>("y", 2, 1))
        .await
        .unwrap();
    assert!(again.id > desc.id);
    stopped_cleanly(child).await;
}

async fn kill_9_under_sixteen_fetch_and_op_clients_keeps_every_acknowledged_increment_once(
    store: Store,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use onesided_client::{Audit, AuditEvent, LockType, Op};
    const CLIENTS: u32 = 16;
    let data = TempDir(std::env::temp_dir().join(unique("onesided-bin")));
    let (mut child, url) = start_recording_in(&data, &store);
    let admin = admin_at(&url).await;
    let world = admin.create_world("load", CLIENTS).await.unwrap();
    let desc = admin
        .create_window("load", &WindowSpec::of::<i64>("counter", CLIENTS, 1))
        .await
        .unwrap();
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for token in &world.tokens {
        let (url, token) = (url.clone(), token.clone());
        let acknowledged = Arc::clone(&acknowledged);
        clients.push(tokio::spawn(async move {
            // every old value this client was told, until the server dies under it
            let mut seen = Vec::new();
            let Ok(session) = Session::attach(&url, &token).await else {
                return seen;
            };
            let Ok(window) = session.window("counter").await else {
                return seen;
            };
            if window.lock(LockType::Shared, 0, 0).await.is_err() {
                return seen;
            }
            loop {
                let Ok(old) = window.fetch_and_op(0, 0, 1i64, Op::Sum) else {
                    return seen;
                };
                if window.flush(0).await.is_err() {
                    return seen;
                }
                match old.value().await {
                    Ok(old) => {
                        seen.push(old);
                        acknowledged.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => return seen,
                }
            }
        }));
    }
    // kill -9 in the middle of the load; a load that stalls, or whose clients all gave up,
    // fails the test (and stops the server) instead of hanging it
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while acknowledged.load(Ordering::Relaxed) < 400 {
        let stalled = if clients.iter().all(tokio::task::JoinHandle::is_finished) {
            Some("every client stopped")
        } else if tokio::time::Instant::now() >= deadline {
            Some("60 s passed")
        } else {
            None
        };
        if let Some(why) = stalled {
            child.kill();
            panic!(
                "{why} with only {} increments acknowledged",
                acknowledged.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill();
    let mut told = Vec::new();
    for client in clients {
        told.extend(client.await.unwrap());
    }
    assert!(told.len() >= 400);

    let (child, url) = start_recording_in(&data, &store);
    // the clients attach again with their tokens and find the counter rebuilt
    let session = Session::attach(&url, &world.tokens[3]).await.unwrap();
    let window = session.window("counter").await.unwrap();
    window.lock(LockType::Shared, 0, 0).await.unwrap();
    let counter = window.get::<i64>(0, 0, 1).unwrap();
    window.unlock(0).await.unwrap();
    let counter = counter.value().await.unwrap()[0];
    drop(window);
    session.close().await.unwrap();
    let mut distinct = told.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), told.len(), "no increment was applied twice");
    assert!(
        told.iter().all(|&old| old < counter),
        "every acknowledged increment is in the recovered counter {counter}"
    );
    let audit = Audit::connect(&url, "binary-test-admin-token")
        .await
        .unwrap();
    let logged = audit
        .events(desc.id, 1)
        .await
        .unwrap()
        .into_iter()
        .filter(|entry| {
            matches!(&entry.event, Some(AuditEvent::Op { op, .. }) if op.to_string() == "fetch_and_op(sum)")
        })
        .count();
    assert_eq!(
        logged as i64, counter,
        "the recovered counter is exactly the logged increments"
    );
    assert_eq!(audit.verify(desc.id).await.unwrap().first_bad, None);
    stopped_cleanly(child).await;
}

store_tests! {
    kill_9_under_sixteen_fetch_and_op_clients_keeps_every_acknowledged_increment_once:
        kill_9_under_sixteen_fetch_and_op_clients_keeps_every_acknowledged_increment_once_on_sqlite,
        kill_9_under_sixteen_fetch_and_op_clients_keeps_every_acknowledged_increment_once_on_postgres;
}

async_tests! {
    kill_9_under_sixteen_fetch_and_op_clients_keeps_every_acknowledged_increment_once_in_sqlite_per_event =>
        kill_9_under_sixteen_fetch_and_op_clients_keeps_every_acknowledged_increment_once(Store::SqlitePerEvent);
    acknowledged_epochs_survive_kill_9_in_sqlite_per_event =>
        acknowledged_epochs_survive_kill_9_in_sync_durability(Store::SqlitePerEvent, false);
    acknowledged_client_rows_survive_kill_9_in_sqlite_per_event =>
        acknowledged_epochs_survive_kill_9_in_sync_durability(Store::SqlitePerEvent, true);
    acknowledged_epochs_survive_kill_9_in_sync_durability_on_sqlite =>
        acknowledged_epochs_survive_kill_9_in_sync_durability(Store::Sqlite, false);
    acknowledged_epochs_survive_kill_9_in_sync_durability_on_postgres =>
        acknowledged_epochs_survive_kill_9_in_sync_durability(Store::postgres().await, false);
    acknowledged_client_rows_survive_kill_9_on_sqlite =>
        acknowledged_epochs_survive_kill_9_in_sync_durability(Store::Sqlite, true);
    acknowledged_client_rows_survive_kill_9_on_postgres =>
        acknowledged_epochs_survive_kill_9_in_sync_durability(Store::postgres().await, true);
    an_acknowledged_large_put_survives_kill_9_written_once_beside_the_database =>
        a_large_put_survives_kill_9_written_once_beside_the_database(Store::Sqlite);
    an_acknowledged_large_put_survives_kill_9_beside_sqlite_rows_per_event =>
        a_large_put_survives_kill_9_written_once_beside_the_database(Store::SqlitePerEvent);
}

/// A large put is written once, into the events file beside the SQLite database, before it is
/// acknowledged: after kill -9 the restarted server has its bytes (rebuilt from the log), the
/// chain verifies, and the database itself did not take them — with the epoch's events in
/// its one group (the default) or in rows of their own (`store`).
async fn a_large_put_survives_kill_9_written_once_beside_the_database(store: Store) {
    use onesided_client::{Audit, LockType};
    const SIZE: usize = 3 << 20;
    let data = TempDir(std::env::temp_dir().join(unique("onesided-bin-large")));
    let (mut child, url) = start_recording_in(&data, &store);
    let admin = admin_at(&url).await;
    let world = admin.create_world("w", 2).await.unwrap();
    let desc = admin
        .create_window("w", &WindowSpec::bytes("big", 2, SIZE as u64, 1))
        .await
        .unwrap();
    let session = Session::attach(&url, &world.tokens[0]).await.unwrap();
    let window = session.window("big").await.unwrap();
    let bytes: Vec<u8> = (0..SIZE).map(|i| (i % 253) as u8).collect();
    window.lock(LockType::Exclusive, 1, 0).await.unwrap();
    // two puts: 2 MiB and the last MiB, each one event of its own
    window.put(1, 0, &bytes[..2 << 20]).unwrap();
    window.put(1, 2 << 20, &bytes[2 << 20..]).unwrap();
    window.unlock(1).await.unwrap();
    child.kill();
    drop(window);
    drop(session);

    let events = std::fs::metadata(data.0.join("audit.db-events"))
        .map(|meta| meta.len())
        .unwrap_or(0);
    // each commit's write is padded to whole blocks of 4 KiB
    assert!(
        events >= SIZE as u64 && events < SIZE as u64 + 64 * 1024,
        "the events file holds {events} bytes"
    );
    // the pages the database uses (with what its log holds), not counting the free ones its
    // log's priming left: the puts are not in them as well
    let used: i64 = {
        use sqlx::Connection;
        let path = data.0.join("audit.db");
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display()))
            .await
            .unwrap();
        sqlx::query_scalar(
            "SELECT (SELECT page_count FROM pragma_page_count) \
             * (SELECT page_size FROM pragma_page_size) \
             - (SELECT freelist_count FROM pragma_freelist_count) \
             * (SELECT page_size FROM pragma_page_size)",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap()
    };
    assert!(used < 1 << 20, "the database uses {used} bytes");
    let (child, url) = start_recording_in(&data, &store);
    let audit = Audit::connect(&url, "binary-test-admin-token")
        .await
        .unwrap();
    assert_eq!(audit.verify(desc.id).await.unwrap().first_bad, None);
    assert_eq!(audit.replay(desc.id, None).await.unwrap().ranks[1], bytes);
    let session = Session::attach(&url, &world.tokens[0]).await.unwrap();
    let window = session.window("big").await.unwrap();
    window.lock(LockType::Shared, 1, 0).await.unwrap();
    let live = window.get::<u8>(1, 0, SIZE as u64).unwrap();
    window.unlock(1).await.unwrap();
    assert!(
        live.value().await.unwrap() == bytes,
        "the live bytes differ"
    );
    drop(window);
    session.close().await.unwrap();
    stopped_cleanly(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_metrics_where_it_says_with_metrics_listen() {
    let (_data, child) = launched_listening_too("--metrics-listen", "serving metrics");
    let url = format!("http://{}", child.field("address="));
    let metrics = bound_address(&child.field("url="), "/metrics");
    let admin = admin_at(&url).await;
    let world = admin.create_world("w", 1).await.unwrap();
    let session = Session::attach(&url, &world.tokens[0]).await.unwrap();
    let (status, text) = crate::metrics::get(metrics, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        text.lines()
            .any(|line| line == "onesided_sessions_attached 1"),
        "{text}"
    );
    session.close().await.unwrap();
    stopped_cleanly(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_web_view_and_metrics_where_it_says_with_http_listen() {
    let (_data, child) = launched_listening_too("--http-listen", "serving the web view");
    let web = bound_address(&child.field("url="), "/");
    let (status, text) = crate::metrics::get(web, "/metrics").await;
    assert_eq!(status, 200);
    assert!(text.contains("onesided_sessions_attached 0"), "{text}");
    let page = crate::web::get(web, "/", None).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Admin token"), "{}", page.body);
    let refused = crate::web::get(web, "/api/state", Some("Bearer wrong-token")).await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    stopped_cleanly(child).await;
}

/// Runs the binary with `extra` until it exits; it must exit unsuccessfully before it listens.
/// Returns what it printed (stdout and stderr).
fn refused_at_start(data: &TempDir, extra: &[&str], env: &[(&str, &str)]) -> String {
    let mut command = crate::server_command(data, extra, "info");
    command.env_remove("ONESIDED_ADMIN_TOKEN");
    for (key, value) in env {
        command.env(key, value);
    }
    let printed = crate::server_binary::refused_to_start(command, Duration::from_secs(30));
    assert!(!printed.contains("listening"), "{printed}");
    printed
}

/// How the SQLite store writes events, as the flags say: one group per commit and window by
/// default and with 0.3's `--audit-sqlite-groups`, one row per event with
/// `--audit-sqlite-rows per-event` (or its variable); the two that contradict each other are
/// refused at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_store_writes_groups_by_default_and_rows_per_event_when_told() {
    use onesided_client::LockType;
    let per_event = ["--audit-sqlite-rows", "per-event"];
    let cases: [(&[&str], bool); 4] = [
        (&[], true),
        (&["--audit-sqlite-groups"], true),
        (&["--audit-sqlite-rows", "groups"], true),
        (&per_event, false),
    ];
    for (flags, grouped) in cases {
        let data = TempDir(std::env::temp_dir().join(unique("onesided-bin-rows")));
        let mut extra = vec!["--admin-token", "binary-test-admin-token"];
        extra.extend(flags);
        let (child, url) = start(&data, &extra);
        let (session, window) = rank_0_of_window_x(&admin_at(&url).await, &url).await;
        window.lock(LockType::Exclusive, 1, 0).await.unwrap();
        window.put(1, 0, &[5i64]).unwrap();
        // answered once committed (sync)
        window.unlock(1).await.unwrap();
        drop(window);
        session.close().await.unwrap();
        stopped_cleanly(child).await;
        let (rows, groups): (i64, i64) = {
            use sqlx::Connection;
            let path = data.0.join("audit.db");
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display()))
                .await
                .unwrap();
            sqlx::query_as(
                "SELECT (SELECT COUNT(*) FROM audit_events), (SELECT COUNT(*) FROM audit_groups)",
            )
            .fetch_one(&mut conn)
            .await
            .unwrap()
        };
        if grouped {
            assert!(
                rows == 0 && groups > 0,
                "{flags:?}: {rows} rows, {groups} groups"
            );
        } else {
            assert!(
                rows > 0 && groups == 0,
                "{flags:?}: {rows} rows, {groups} groups"
            );
        }
    }
    let data = TempDir(std::env::temp_dir().join(unique("onesided-bin-rows")));
    let token = ["--admin-token", "binary-test-admin-token"];
    let both = [&token[..], &["--audit-sqlite-groups"], &per_event].concat();
    let by_flags = refused_at_start(&data, &both, &[]);
    assert!(by_flags.contains("contradict"), "{by_flags}");
    let by_env = refused_at_start(
        &data,
        &token,
        &[
            ("ONESIDED_AUDIT_SQLITE_GROUPS", "true"),
            ("ONESIDED_AUDIT_SQLITE_ROWS", "per-event"),
        ],
    );
    assert!(by_env.contains("contradict"), "{by_env}");
}

#[test]
fn an_admin_token_too_short_to_be_a_secret_is_refused_at_start() {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-bin")));
    // an empty one by flag or environment, and one shorter than 16 characters
    let by_flag = refused_at_start(&data, &["--admin-token", ""], &[]);
    assert!(by_flag.contains("at least 16"), "{by_flag}");
    let by_env = refused_at_start(&data, &[], &[("ONESIDED_ADMIN_TOKEN", "")]);
    assert!(by_env.contains("at least 16"), "{by_env}");
    let short = refused_at_start(&data, &["--admin-token", "fifteen-chars-x"], &[]);
    assert!(short.contains("15 characters"), "{short}");
    assert!(
        !short.contains("fifteen-chars-x"),
        "the token is echoed: {short}"
    );
    // an empty token file (as a crash between creating and writing it used to leave) is
    // refused and named, not used
    std::fs::create_dir_all(&data.0).unwrap();
    let file = data.0.join("admin-token");
    std::fs::write(&file, "").unwrap();
    let empty_file = refused_at_start(&data, &[], &[]);
    assert!(empty_file.contains("admin-token"), "{empty_file}");
    assert!(empty_file.contains("at least 16"), "{empty_file}");
    std::fs::write(&file, "  \n").unwrap();
    let blank_file = refused_at_start(&data, &[], &[]);
    assert!(blank_file.contains("0 characters"), "{blank_file}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "  \n",
        "left as it was"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_admin_token_file_is_whole_private_and_the_only_file_written_for_it() {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-bin")));
    let (child, url, token) = started_generating_a_token(&data);
    assert_eq!(token.len(), 48, "{token:?}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(data.0.join("admin-token"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // no temporary file is left beside it
    let names: Vec<String> = std::fs::read_dir(&data.0)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("admin-token"))
        .collect();
    assert_eq!(names, vec!["admin-token".to_string()]);
    // an empty bearer is refused; the generated token works
    let empty = Admin::connect(&url, "").await.unwrap().list_worlds().await;
    assert_eq!(empty.unwrap_err().code(), tonic::Code::Unauthenticated);
    let admin = Admin::connect(&url, &token).await.unwrap();
    admin.list_worlds().await.unwrap();
    assert!(terminate(child).success());
    // a second start reads the same token
    let (child, url) = start(&data, &[]);
    Admin::connect(&url, &token)
        .await
        .unwrap()
        .list_worlds()
        .await
        .unwrap();
    assert!(terminate(child).success());
}

/// World `w` of one rank with the window `spec`, created on the binary at `url` started with
/// the admin token `binary-test-admin-token`: its rank token.
async fn one_rank_world(url: &str, spec: &WindowSpec) -> onesided_client::WorldTokens {
    let admin = Admin::connect(url, "binary-test-admin-token")
        .await
        .unwrap();
    let world = admin.create_world("w", 1).await.unwrap();
    admin.create_window("w", spec).await.unwrap();
    world
}

/// Not a test of its own: the client process of
/// [`a_frozen_client_does_not_hold_up_a_graceful_stop`], run by it as a child (the real client
/// library in a process it can stop). Attaches, says so, and waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the client process of a_frozen_client_does_not_hold_up_a_graceful_stop"]
async fn frozen_client_process() {
    let (Ok(url), Ok(token)) = (
        std::env::var("ONESIDED_FROZEN_URL"),
        std::env::var("ONESIDED_FROZEN_TOKEN"),
    ) else {
        return;
    };
    let session = Session::attach(&url, &token).await.unwrap();
    let window = session.window("x").await.unwrap();
    window.lock_all(0).await.unwrap();
    println!("attached and locked");
    std::future::pending::<()>().await;
}

/// A client frozen with SIGSTOP (its session open, its TCP connection up, nothing read or
/// answered any more) does not keep a SIGTERMed server from exiting: the graceful stop is
/// bounded (README, "Run the server").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_client_does_not_hold_up_a_graceful_stop() {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-bin")));
    let (child, url) = start(&data, &["--admin-token", "binary-test-admin-token"]);
    let world = one_rank_world(&url, &WindowSpec::of::<i64>("x", 1, 1)).await;
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "binary::frozen_client_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ONESIDED_FROZEN_URL", &url)
        .env("ONESIDED_FROZEN_TOKEN", &world.tokens[0]);
    let mut client = Launched::start(command, "attached and locked", Duration::from_secs(60));
    let pid = client.id().to_string();
    let signal = |which: &str| {
        Command::new("kill")
            .args([which, &pid])
            .status()
            .unwrap()
            .success()
    };
    assert!(signal("-STOP"));
    let started = std::time::Instant::now();
    let status = tokio::task::spawn_blocking(move || terminate(child)).await;
    let took = started.elapsed();
    client.kill();
    let status = status.unwrap();
    assert!(status.success(), "{status}");
    assert!(
        took <= Duration::from_secs(5),
        "stopped only after {took:?}"
    );
}

/// The probe's message that spun a runtime worker forever: a get whose target layout is
/// 2^64 − 1 copies of an indexed layout with no blocks, extent 0 (no block, so it passed the
/// block limit). Two of them in flight: each is refused with COUNT, health answers within
/// 1 s meanwhile, and SIGTERM stops the server within 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_copies_of_nothing_are_refused_and_the_server_still_answers_and_stops() {
    use crate::raw::{raw, Meta, RawSession};
    use onesided_core::ErrorClass;
    use onesided_proto::v1::{self, client_message::Call, server_message::Reply};
    use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};

    let data = TempDir(std::env::temp_dir().join(unique("onesided-bin")));
    let (child, url) = start(&data, &["--admin-token", "binary-test-admin-token"]);
    let world = one_rank_world(&url, &WindowSpec::bytes("x", 1, 64, 1)).await;
    let mut grpc = raw(&url).await;
    let (mut session, _) = RawSession::open(&mut grpc, &Meta::bearer(&world.tokens[0]))
        .await
        .unwrap();
    let window = session.open_window("x").await;
    session
        .ok(Call::LockAll(v1::LockAll { window, assert: 0 }))
        .await;
    let nothing = v1::Layout {
        kind: Some(v1::layout::Kind::Indexed(v1::Indexed {
            blocks: Vec::new(),
        })),
    };
    let endless = v1::Layout {
        kind: Some(v1::layout::Kind::Resized(Box::new(v1::Resized {
            inner: Some(Box::new(nothing)),
            lb: 0,
            extent: 0,
            count: u64::MAX,
        }))),
    };
    let get = v1::RmaOp {
        window,
        target: 0,
        kind: v1::OpKind::Get as i32,
        datatype: onesided_core::Datatype::Byte.code(),
        layout: Some(endless),
        ..Default::default()
    };
    for _ in 0..2 {
        session.send(Some(Call::Op(get.clone())));
    }
    let channel = tonic::transport::Endpoint::from_shared(url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    let check = health.check(HealthCheckRequest::default());
    let answered = tokio::time::timeout(Duration::from_secs(1), check).await;
    assert!(
        matches!(answered, Ok(Ok(_))),
        "health did not answer within 1 s: {answered:?}"
    );
    for _ in 0..2 {
        let reply = tokio::time::timeout(Duration::from_secs(5), session.next())
            .await
            .expect("the get was not answered within 5 s")
            .unwrap()
            .expect("an answer");
        let Some(Reply::Error(failure)) = reply.reply else {
            panic!("the get was not refused: {reply:?}");
        };
        let class = failure
            .error
            .and_then(|error| ErrorClass::from_code(error.class));
        assert_eq!(class, Some(ErrorClass::Count));
        assert_eq!(
            tonic::Code::from_i32(failure.code),
            tonic::Code::InvalidArgument
        );
    }
    let started = std::time::Instant::now();
    let (status, _) = tokio::task::spawn_blocking(move || child.terminate(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(status.success(), "{status} after {:?}", started.elapsed());
}
