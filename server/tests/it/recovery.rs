//! A restarted server brings back every world, token and window, byte-exact, from the latest
//! snapshots plus the log; a store that goes away refuses calls with UNAVAILABLE and nothing
//! acknowledged is missing when it returns.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use onesided_client::{Audit, ErrorClass, LockType, Op, Session, WindowSpec, WorldTokens};
use onesided_core::audit::Event;
use tokio::net::{TcpListener, TcpStream};

use crate::{start_fresh, start_on, unique, world_with, Restartable, TempDir, ADMIN_TOKEN};

/// A restartable server on a fresh data directory, and a world of two ranks named after `name`
/// with a window `w` of `count` `i64`s a rank.
async fn restartable_world(name: &str, count: u64) -> (TempDir, Restartable, WorldTokens) {
    let (data, server) = start_fresh(&format!("onesided-{name}"), |_| {}).await;
    let spec = WindowSpec::of::<i64>("w", 2, count);
    let world = server.world_with(&unique(name), 2, &[spec]).await;
    (data, server, world)
}

/// A session whose server stops and starts again attaches again by itself: the same
/// `Session` and `Window` go on as a new incarnation, the window's private copy (with a store
/// not yet published) is kept, the epoch that was open fails once with the reason, and what
/// was acknowledged before is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_attaches_again_by_itself_when_its_server_comes_back() {
    let (_data, server, world) = restartable_world("back", 4).await;
    let session = Session::attach(&server.url, &world.tokens[0])
        .await
        .unwrap();
    assert_eq!(session.incarnation(), 1);
    let w = session.window("w").await.unwrap();
    w.lock(LockType::Exclusive, 1, 0).await.unwrap();
    w.put(1, 0, &[5i64]).unwrap();
    w.unlock(1).await.unwrap();
    // a store not yet published, and an epoch left open, when the server goes
    w.store(3, &[9i64]).unwrap();
    w.lock(LockType::Exclusive, 1, 0).await.unwrap();
    let server = server.restart(|_| {}).await;
    // the session comes back by itself (nothing here attaches it)
    attached_again(&session, "the session did not attach again").await;
    assert_eq!(session.incarnation(), 2);
    // the epoch open when the server went is gone, and its next call says so, once
    let lost = w.put(1, 1, &[6i64]).unwrap_err();
    assert!(
        matches!(&lost, onesided_client::Error::Disconnected(why) if why.contains("was lost")),
        "{lost}"
    );
    // the window goes on: a new epoch, the acknowledged put is there, the private copy kept
    assert_eq!(w.load::<i64>(3, 1).unwrap(), vec![9]);
    w.lock(LockType::Exclusive, 1, 0).await.unwrap();
    let got = w.get::<i64>(1, 0, 2).unwrap();
    w.put(1, 2, &[7i64]).unwrap();
    w.unlock(1).await.unwrap();
    assert_eq!(got.value().await.unwrap(), vec![5, 0]);
    let copies = public_copies(&server.url, &world.tokens[1], "w", 2, 4).await;
    assert_eq!(copies[1], vec![5, 0, 7, 0]);
    drop(w);
    session.close().await.unwrap();
    server.stop().await;
}

/// Waits (at most 30 s) until `session`, of incarnation 1, attached again by itself; else
/// panics saying `otherwise`.
async fn attached_again(session: &Session, otherwise: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while session.incarnation() == 1 {
        assert!(std::time::Instant::now() < deadline, "{otherwise}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `reattach_within(0)` means never: when the server goes, such a session stays ended (its
/// calls fail) while a session with the default bound, beside it, comes back — which gives
/// the first as long to come back, had it wrongly tried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_told_reattach_within_zero_does_not_come_back() {
    let (_data, server, world) = restartable_world("never", 1).await;
    let never = Session::builder(&server.url, &world.tokens[0])
        .reattach_within(Duration::ZERO)
        .attach()
        .await
        .unwrap();
    let control = Session::attach(&server.url, &world.tokens[1])
        .await
        .unwrap();
    let w = never.window("w").await.unwrap();
    let c = control.window("w").await.unwrap();
    let server = server.restart(|_| {}).await;
    attached_again(&control, "the control session did not attach again").await;
    // the control works again; the other stayed as it was lost
    c.lock(LockType::Shared, 1, 0).await.unwrap();
    c.unlock(1).await.unwrap();
    assert_eq!(never.incarnation(), 1);
    let lost = w.lock(LockType::Shared, 0, 0).await.unwrap_err();
    assert!(
        matches!(lost, onesided_client::Error::Disconnected(_)),
        "{lost}"
    );
    drop((w, c));
    control.close().await.unwrap();
    server.stop().await;
}

/// The info `MPI_Win_set_info` put in place comes back with the window after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_set_by_the_ranks_survives_a_restart() {
    let (_data, server) = start_fresh("onesided-info", |_| {}).await;
    let admin = &server.admin;
    let world = world_with(
        admin,
        &unique("info"),
        2,
        &[WindowSpec::of::<i64>("w", 2, 1)],
    )
    .await;
    let mut sessions = Vec::new();
    for token in &world.tokens {
        let session = Session::attach(&server.url, token).await.unwrap();
        let w = session.window("w").await.unwrap();
        sessions.push((session, w));
    }
    let asked = [("accumulate_ops", "same_op"), ("mine", "kept")];
    let (zero, one) = tokio::join!(
        sessions[0].1.set_info(&asked),
        sessions[1].1.set_info(&asked)
    );
    zero.unwrap();
    one.unwrap();
    for (session, w) in sessions {
        drop(w);
        session.close().await.unwrap();
    }
    let server = server.restart(|_| {}).await;
    let admin = &server.admin;
    let desc = admin.describe_window(&world.name, "w").await.unwrap();
    assert_eq!(
        desc.info.accumulate_ops,
        onesided_core::window::AccumulateOps::SameOp
    );
    assert_eq!(desc.info.kept.get("mine").map(String::as_str), Some("kept"));
    server.stop().await;
}

/// A session replaced by a newer incarnation of its rank (the same token attached again) ends
/// for good: it does not attach again by itself, which would take the rank back from the
/// session that replaced it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_replaced_by_a_newer_incarnation_does_not_come_back() {
    let (_data, server, world) = restartable_world("replaced", 1).await;
    let (old, old_window) = server.attached_window(&world.tokens[0], "w").await;
    let new = Session::attach(&server.url, &world.tokens[0])
        .await
        .unwrap();
    assert_eq!(new.incarnation(), 2);
    let ended = old_window
        .lock(LockType::Exclusive, 0, 0)
        .await
        .unwrap_err();
    assert!(ended.to_string().contains("superseded"), "{ended}");
    // the newer session keeps the rank through many round trips, and the old one stays ended
    let w = new.window("w").await.unwrap();
    for i in 0..50i64 {
        w.lock(LockType::Exclusive, 1, 0).await.unwrap();
        w.accumulate(1, 0, &[i], Op::Sum).unwrap();
        w.unlock(1).await.unwrap();
    }
    assert_eq!(old.incarnation(), 1);
    assert!(old_window.flush_all().await.is_err());
    let copies = public_copies(&server.url, &world.tokens[1], "w", 2, 1).await;
    assert_eq!(copies[1], vec![(0..50).sum::<i64>()]);
    drop(w);
    new.close().await.unwrap();
    server.stop().await;
}

/// Every rank's public copy (`count` `i64`s), read through a session of `token`'s rank under
/// lock_all.
pub(crate) async fn public_copies(
    url: &str,
    token: &str,
    window: &str,
    nranks: u32,
    count: u64,
) -> Vec<Vec<i64>> {
    public_elements(url, token, window, nranks, count).await
}

/// [`public_copies`] of any element type.
pub(crate) async fn public_elements<T: onesided_client::Element>(
    url: &str,
    token: &str,
    window: &str,
    nranks: u32,
    count: u64,
) -> Vec<Vec<T>> {
    let session = Session::attach(url, token).await.unwrap();
    let w = session.window(window).await.unwrap();
    w.lock_all(0).await.unwrap();
    let reads: Vec<_> = (0..nranks)
        .map(|rank| w.get::<T>(rank, 0, count).unwrap())
        .collect();
    w.unlock_all().await.unwrap();
    let mut copies = Vec::new();
    for read in reads {
        copies.push(read.value().await.unwrap());
    }
    drop(w);
    session.close().await.unwrap();
    copies
}

async fn snapshot_count(database: &Path) -> i64 {
    use sqlx::Connection;
    let url = format!("sqlite:{}", database.display());
    let mut connection = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query_scalar("SELECT COUNT(*) FROM snapshots")
        .fetch_one(&mut connection)
        .await
        .unwrap()
}

/// Stops `server` (everything it was going to write is written then), asserts that its SQLite
/// store `database` holds `snapshots` snapshots (else it panics saying `why`), and starts it
/// again on the same files.
async fn counted_and_restarted(
    server: Restartable,
    database: &Path,
    snapshots: i64,
    why: &str,
) -> Restartable {
    server.stop().await;
    assert_eq!(snapshot_count(database).await, snapshots, "{why}");
    start_on(database.parent().unwrap(), |_| {}).await
}

/// Issue 12: a put of a whole window is stored once, in the log, not again at once in a
/// snapshot; the window's ranks are snapshotted once four windows' worth of log has built up
/// (every rank, the one never written too), and a restart rebuilds the window from those
/// snapshots and the log after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_sized_put_is_logged_once_and_four_windows_of_log_make_a_snapshot() {
    const BYTES: usize = 128 << 10;
    let data = TempDir(std::env::temp_dir().join(unique("onesided-snapshot-policy")));
    let database = data.0.join("audit.db");
    let server = start_on(&data.0, |_| {}).await;
    let world = server
        .world_with("big", 2, &[WindowSpec::bytes("w", 2, BYTES as u64, 1)])
        .await;
    let put = |url: String, fill: u8| {
        let token = world.tokens[0].clone();
        async move {
            let session = Session::attach(url.as_str(), &token).await.unwrap();
            let w = session.window("w").await.unwrap();
            w.lock(LockType::Exclusive, 1, 0).await.unwrap();
            w.put(1, 0, &vec![fill; BYTES]).unwrap();
            w.unlock(1).await.unwrap();
            drop(w);
            session.close().await.unwrap();
        }
    };
    for fill in 1..=3 {
        put(server.url.clone(), fill).await;
    }
    let not_yet = "three windows' worth of log is not yet worth a snapshot";
    let server = counted_and_restarted(server, &database, 0, not_yet).await;
    // the restart counts the three puts it replayed towards the next round
    put(server.url.clone(), 4).await;
    let two_worth = "four puts into one rank of two are two windows' worth";
    let server = counted_and_restarted(server, &database, 0, two_worth).await;
    for fill in 5..=8 {
        put(server.url.clone(), fill).await;
    }
    let both = "both ranks are snapshotted once four windows' worth was logged";
    let server = counted_and_restarted(server, &database, 2, both).await;
    let session = Session::attach(server.url.as_str(), &world.tokens[0])
        .await
        .unwrap();
    let w = session.window("w").await.unwrap();
    w.lock(LockType::Shared, 1, 0).await.unwrap();
    let read = w.get::<u8>(1, 0, BYTES as u64).unwrap();
    w.unlock(1).await.unwrap();
    assert!(read.value().await.unwrap().iter().all(|&byte| byte == 8));
    drop(w);
    session.close().await.unwrap();
    server.stop().await;
}

/// Issue 43, item 13: a rank never written used to have no snapshot, so every restart (and
/// every cluster node taking the world up) replayed the window's whole log. Every rank is now
/// snapshotted in each round, and recovery reads about one round of log however long it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rank_never_written_is_snapshotted_too_and_recovery_reads_one_round_of_log() {
    const OPS: i64 = 3000;
    let data = TempDir(std::env::temp_dir().join(unique("onesided-rounds")));
    // recorded in the background (a graceful stop commits it all): each flush is a round trip
    let server = start_on(&data.0, |config| {
        config.durability = onesided_server::audit::Durability::Async;
    })
    .await;
    let admin = &server.admin;
    let world = admin.create_world("rounds", 2).await.unwrap();
    let id = admin
        .create_window("rounds", &WindowSpec::of::<i64>("w", 2, 1))
        .await
        .unwrap()
        .id;
    let (session, w) = server.attached_window(&world.tokens[0], "w").await;
    w.lock_all(0).await.unwrap();
    for _ in 0..OPS {
        // rank 1's copy is never written
        w.accumulate(0, 0, &[1i64], Op::Sum).unwrap();
        // one operation at a time: the client sends what is pending in one message
        w.flush(0).await.unwrap();
    }
    w.unlock_all().await.unwrap();
    drop(w);
    session.close().await.unwrap();
    server.stop().await;

    let store = onesided_server::audit::AuditStore::open(None, &data.0)
        .await
        .unwrap();
    let mut ranks: Vec<u32> = store
        .snapshots(id)
        .await
        .unwrap()
        .iter()
        .map(|snapshot| snapshot.rank)
        .collect();
    ranks.sort_unstable();
    assert_eq!(
        ranks,
        vec![0, 1],
        "the rank never written has a snapshot too"
    );
    let whole = store.rows(id, 1).await.unwrap().len();
    assert!(whole > OPS as usize, "the log holds {whole} rows");
    let recovered = onesided_server::recovery::recover(&store).await.unwrap();
    let window = recovered
        .windows
        .iter()
        .find(|window| window.desc.id == id)
        .unwrap();
    assert_eq!(
        window.copies[0],
        OPS.to_le_bytes(),
        "every operation is in the copy"
    );
    assert_eq!(window.copies[1], 0i64.to_le_bytes());
    // a round comes every 64 KiB of log, each operation counting 72 bytes: about 910 of them
    assert!(
        window.replayed < 1500,
        "recovery read {} of the log's {whole} rows",
        window.replayed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_brings_back_worlds_tokens_and_windows_byte_exact() {
    let (data, server) = start_fresh("onesided-recover", |_| {}).await;
    let admin = &server.admin;
    let world = admin.create_world("kept", 3).await.unwrap();
    admin
        .create_window(
            "kept",
            &WindowSpec::of::<i64>("w", 3, 4).info("my_hint", "survives restarts"),
        )
        .await
        .unwrap();
    admin
        .create_window("kept", &WindowSpec::of::<i64>("freed", 3, 1))
        .await
        .unwrap();
    admin.create_world("deleted", 1).await.unwrap();
    // enough operations that every rank's copy is snapshotted at least once, then more after
    let (session, w) = server.attached_window(&world.tokens[1], "w").await;
    w.lock_all(0).await.unwrap();
    for i in 0..3000i64 {
        let target = (i % 3) as u32;
        w.accumulate(target, (i % 4) as u64, &[i], Op::Sum).unwrap();
        if i % 7 == 0 {
            w.put(target, 3, &[i * 10]).unwrap();
        }
    }
    w.unlock_all().await.unwrap();
    // the owner's own stores are published too (rule 5)
    w.lock(LockType::Exclusive, 1, 0).await.unwrap();
    w.store(2, &[-5i64]).unwrap();
    w.unlock(1).await.unwrap();
    drop(w);
    session.close().await.unwrap();
    admin.free_window("kept", "freed").await.unwrap();
    admin.delete_world("deleted").await.unwrap();
    let before = public_copies(&server.url, &world.tokens[0], "w", 3, 4).await;
    server.stop().await;
    assert!(
        snapshot_count(&data.0.join("audit.db")).await >= 3,
        "every rank was snapshotted"
    );

    let server = start_on(&data.0, |_| {}).await;
    let admin = &server.admin;
    let worlds = admin.list_worlds().await.unwrap();
    let names: Vec<&str> = worlds.iter().map(|world| world.name.as_str()).collect();
    assert_eq!(names, ["kept"], "the deleted world stays deleted");
    let windows = admin.list_windows("kept").await.unwrap();
    let names: Vec<&str> = windows.iter().map(|window| window.name.as_str()).collect();
    assert_eq!(names, ["w"], "the freed window stays freed");
    // the old tokens still attach, and every byte is back
    let after = public_copies(&server.url, &world.tokens[2], "w", 3, 4).await;
    assert_eq!(after, before);
    // the history continues: one chain across both runs, replay equals the live copies
    let (session, w) = server.attached_window(&world.tokens[1], "w").await;
    // an info key the server does not use is still reported as given
    assert!(w
        .get_info()
        .contains(&("my_hint".to_string(), "survives restarts".to_string())));
    w.lock(LockType::Exclusive, 0, 0).await.unwrap();
    w.put(0, 0, &[77i64]).unwrap();
    w.unlock(0).await.unwrap();
    let id = w.desc().id;
    drop(w);
    session.close().await.unwrap();
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    assert_eq!(audit.verify(id).await.unwrap().first_bad, None);
    let replayed = audit.replay(id, None).await.unwrap();
    assert_eq!(replayed.ranks[0][..8], 77i64.to_le_bytes());
    let events = audit.events(id, 1).await.unwrap();
    let incarnations: Vec<u64> = events
        .iter()
        .filter(|entry| entry.rank == 1 && matches!(entry.event, Some(Event::Attach)))
        .map(|entry| entry.incarnation)
        .collect();
    assert!(
        incarnations.windows(2).all(|pair| pair[0] < pair[1]),
        "incarnations are never reused across restarts: {incarnations:?}"
    );
    let times: Vec<u64> = events.iter().map(|entry| entry.at_ns).collect();
    assert!(
        times.windows(2).all(|pair| pair[0] <= pair[1]),
        "timestamps stay monotonic across the restart"
    );

    // the rebuild starts from the snapshots: with the log rows they cover gone, a restart
    // still brings back every byte, which a rebuild from the log alone could not
    let latest = public_copies(&server.url, &world.tokens[0], "w", 3, 4).await;
    server.stop().await;
    let ops_removed = forget_what_snapshots_cover(&data.0.join("audit.db"), id).await;
    assert!(
        ops_removed >= 100,
        "only {ops_removed} operations were behind the snapshots"
    );
    let server = start_on(&data.0, |_| {}).await;
    let rebuilt = public_copies(&server.url, &world.tokens[0], "w", 3, 4).await;
    assert_eq!(rebuilt, latest, "the snapshots were not used");
    server.stop().await;
}

/// Deletes window `window`'s log rows up to the oldest of its snapshots from the SQLite store
/// at `database` (its rows, and its groups whose events all lie there); returns how many of
/// them were operations.
async fn forget_what_snapshots_cover(database: &Path, window: u64) -> u64 {
    use onesided_core::audit::Event;
    use sqlx::Connection;
    let url = format!("sqlite:{}", database.display());
    let mut connection = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let oldest: i64 = sqlx::query_scalar("SELECT MIN(seq) FROM snapshots WHERE window_id = $1")
        .bind(window as i64)
        .fetch_one(&mut connection)
        .await
        .unwrap();
    let covered: Vec<i64> = sqlx::query_scalar(
        "SELECT seq FROM audit_events WHERE window_id = $1 AND seq <= $2 \
         UNION ALL SELECT seq FROM (WITH RECURSIVE numbers(seq, last) AS ( \
         SELECT first_seq, last_seq FROM audit_groups WHERE window_id = $1 AND last_seq <= $2 \
         UNION ALL SELECT seq + 1, last FROM numbers WHERE seq < last) SELECT seq FROM numbers)",
    )
    .bind(window as i64)
    .bind(oldest)
    .fetch_all(&mut connection)
    .await
    .unwrap();
    let bodies = onesided_test_support::groups::stored_bodies(&mut connection, window as i64).await;
    let ops = bodies
        .iter()
        .filter(|(seq, body)| {
            covered.contains(seq) && matches!(body.decode().unwrap(), Event::Op { .. })
        })
        .count();
    for delete in [
        "DELETE FROM audit_events WHERE window_id = $1 AND seq <= $2",
        "DELETE FROM audit_groups WHERE window_id = $1 AND last_seq <= $2",
    ] {
        sqlx::query(delete)
            .bind(window as i64)
            .bind(oldest)
            .execute(&mut connection)
            .await
            .unwrap();
    }
    ops as u64
}

/// A TCP forwarder to PostgreSQL that can be cut (every connection dropped, new ones refused)
/// and restored: the database going away, as the server sees it, without disturbing the
/// machine's PostgreSQL that other tests use.
struct Cuttable {
    port: u16,
    up: Arc<AtomicBool>,
    cut: tokio::sync::watch::Sender<u64>,
}

impl Cuttable {
    async fn start(target: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let (cut, cuts) = tokio::sync::watch::channel(0u64);
        let target = target.to_string();
        let accepting = Arc::clone(&up);
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if !accepting.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let target = target.clone();
                let mut cuts = cuts.clone();
                // only a cut after this connection was made ends it
                cuts.borrow_and_update();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cuts.changed() => {}
                    }
                });
            }
        });
        Cuttable { port, up, cut }
    }

    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cut.send_modify(|count| *count += 1);
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

/// The `host:port` a PostgreSQL URL points at (5432 when it names no port).
fn postgres_address(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host_port)| host_port);
    if host_port.contains(':') {
        host_port.to_string()
    } else {
        format!("{host_port}:5432")
    }
}

/// What became of one fetch_and_op(+1) on rank 0.
enum Increment {
    /// Acknowledged: its old value.
    Acknowledged(i64),
    /// Refused before it changed anything (the server knew the store was away).
    Unchanged,
    /// Applied, but not recorded when it was answered: refused, and written once the store
    /// is back (the call was under way when the outage began).
    NotRecordedYet,
}

/// One fetch_and_op(+1) on rank 0, completed by a flush, and what became of it. Only the
/// operation's own answer says whether it was applied; a flush refused after it says nothing.
async fn increment(w: &onesided_client::Window) -> Increment {
    let old = w
        .fetch_and_op(0, 0, 1i64, Op::Sum)
        .expect("checked at the origin");
    let _ = w.flush(0).await;
    match old.value().await {
        Ok(old) => Increment::Acknowledged(old),
        Err(error) => {
            assert_eq!(error.class(), Some(ErrorClass::Io), "{error}");
            assert_eq!(error.code(), tonic::Code::Unavailable, "{error}");
            let message = error.to_string();
            if message.contains("changed nothing") {
                Increment::Unchanged
            } else {
                assert!(message.contains("not recorded yet"), "{message}");
                Increment::NotRecordedYet
            }
        }
    }
}

/// How a test takes the store away from a running server and gives it back.
enum Outage {
    /// PostgreSQL behind a forwarder that drops every connection and refuses new ones.
    Postgres {
        proxy: Cuttable,
        _database: crate::store::PgDatabase,
    },
    /// The SQLite file in the data directory, its write lock taken by another process's
    /// connection (`BEGIN EXCLUSIVE`): every commit of the server fails as busy.
    Sqlite {
        path: std::path::PathBuf,
        holder: Option<sqlx::SqliteConnection>,
    },
}

impl Outage {
    async fn begin(&mut self) {
        use sqlx::Connection as _;
        match self {
            Outage::Postgres { proxy, .. } => proxy.cut(),
            Outage::Sqlite { path, holder } => {
                let mut connection =
                    sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display()))
                        .await
                        .unwrap();
                sqlx::query("BEGIN EXCLUSIVE")
                    .execute(&mut connection)
                    .await
                    .unwrap();
                *holder = Some(connection);
            }
        }
    }

    /// The old values of the fetch_and_ops stored in window `window`'s log right now, read
    /// past the outage (PostgreSQL directly; SQLite through the connection holding the lock,
    /// which sees every commit).
    async fn stored_increments(&mut self, window: u64) -> Vec<i64> {
        use onesided_core::audit::Body;
        use sqlx::Connection as _;
        let select = "SELECT body, event FROM audit_events WHERE window_id = $1";
        let bodies: Vec<Body> = match self {
            Outage::Postgres { _database, .. } => {
                let mut connection = sqlx::PgConnection::connect(&_database.url).await.unwrap();
                let rows: Vec<(Option<String>, Option<Vec<u8>>)> = sqlx::query_as(select)
                    .bind(window as i64)
                    .fetch_all(&mut connection)
                    .await
                    .unwrap();
                rows.into_iter()
                    .map(|(json, binary)| match (binary, json) {
                        (Some(bytes), _) => Body::Binary(bytes),
                        (None, text) => Body::Json(text.unwrap()),
                    })
                    .collect()
            }
            // its rows and its groups
            Outage::Sqlite { holder, .. } => onesided_test_support::groups::stored_bodies(
                holder.as_mut().expect("an outage under way"),
                window as i64,
            )
            .await
            .into_iter()
            .map(|(_, body)| body)
            .collect(),
        };
        bodies
            .into_iter()
            .filter_map(|body| match body.decode().unwrap() {
                Event::Op { result, .. } => Some(i64::from_le_bytes(result.try_into().unwrap())),
                _ => None,
            })
            .collect()
    }

    async fn end(&mut self) {
        match self {
            Outage::Postgres { proxy, .. } => proxy.restore(),
            Outage::Sqlite { holder, .. } => {
                let mut connection = holder.take().expect("an outage under way");
                sqlx::query("ROLLBACK")
                    .execute(&mut connection)
                    .await
                    .unwrap();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_database_refuses_calls_with_unavailable_and_loses_nothing_acknowledged_on_postgres()
{
    let database = crate::store::PgDatabase::create().await;
    // the database of ONESIDED_TEST_POSTGRES, reached through the forwarder
    let address = postgres_address(&database.url);
    let proxy = Cuttable::start(&address).await;
    let url = database
        .url
        .replacen(&address, &format!("127.0.0.1:{}", proxy.port), 1);
    assert_ne!(
        url, database.url,
        "the server must go through the forwarder"
    );
    let data = TempDir(std::env::temp_dir().join(unique("onesided-outage")));
    let outage = Outage::Postgres {
        proxy,
        _database: database,
    };
    a_lost_database_refuses_calls_with_unavailable_and_loses_nothing_acknowledged(
        &data,
        Some(url),
        outage,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_database_refuses_calls_with_unavailable_and_loses_nothing_acknowledged_on_sqlite() {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-outage")));
    let outage = Outage::Sqlite {
        path: data.0.join("audit.db"),
        holder: None,
    };
    a_lost_database_refuses_calls_with_unavailable_and_loses_nothing_acknowledged(
        &data, None, outage,
    )
    .await;
}

/// README: while the store is away calls fail with UNAVAILABLE (`MPI_ERR_IO`) and change
/// nothing, what was applied is written when it returns, service resumes by itself, and
/// nothing acknowledged is missing; `onesided_audit_commit_failures_total` rises meanwhile.
async fn a_lost_database_refuses_calls_with_unavailable_and_loses_nothing_acknowledged(
    data: &TempDir,
    database_url: Option<String>,
    mut outage: Outage,
) {
    let metrics =
        onesided_server::metrics::MetricsListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let scrape = metrics.local_addr();
    let failures = || async move {
        let (status, text) = crate::metrics::get(scrape, "/metrics").await;
        assert_eq!(status, 200, "{text}");
        text.lines()
            .find_map(|line| line.strip_prefix("onesided_audit_commit_failures_total "))
            .map(|value| value.trim().parse::<f64>().unwrap())
            .unwrap_or_else(|| panic!("no commit failures in {text}"))
    };
    let server = start_on(&data.0, move |config| {
        config.database_url = database_url;
        config.metrics = Some(metrics);
    })
    .await;
    let admin = &server.admin;
    let world = world_with(admin, "o", 2, &[WindowSpec::of::<i64>("c", 2, 1)]).await;
    let (session, w) = server.attached_window(&world.tokens[1], "c").await;
    w.lock_all(0).await.unwrap();
    let mut acknowledged = Vec::new();
    // refused calls: those that changed nothing, and those applied but not recorded yet
    let mut unchanged = 0;
    let mut not_recorded_yet = 0;
    let mut tally = |outcome: Increment, acknowledged: &mut Vec<i64>| match outcome {
        Increment::Acknowledged(old) => acknowledged.push(old),
        Increment::Unchanged => unchanged += 1,
        Increment::NotRecordedYet => not_recorded_yet += 1,
    };
    for _ in 0..20 {
        let Increment::Acknowledged(old) = increment(&w).await else {
            panic!("refused while the database is up");
        };
        acknowledged.push(old);
    }
    assert_eq!(failures().await, 0.0, "commits failed with the store up");
    outage.begin().await;
    // calls keep coming while the database is away: each is acknowledged only if stored, and
    // once the server knows, refused with UNAVAILABLE before it changes anything; every one
    // of those is counted, whether before or after the store returns
    let mut refusals = 0;
    let id = w.desc().id;
    for _ in 0..200 {
        let outcome = increment(&w).await;
        let refused = !matches!(outcome, Increment::Acknowledged(_));
        if let Increment::Acknowledged(old) = outcome {
            // sync: acknowledged means stored, outage or not
            assert!(
                outage.stored_increments(id).await.contains(&old),
                "increment {old} was acknowledged during the outage but is not stored"
            );
        }
        tally(outcome, &mut acknowledged);
        if refused {
            refusals += 1;
            // a few more, so that some arrive once the server knows
            if refusals == 5 {
                break;
            }
        }
    }
    assert_eq!(
        refusals, 5,
        "calls kept succeeding while the database was away"
    );
    let failed = failures().await;
    assert!(failed >= 1.0, "no commit failure counted during the outage");
    outage.end().await;
    // service resumes once the store is back
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let outcome = increment(&w).await;
            let resumed = matches!(outcome, Increment::Acknowledged(_));
            tally(outcome, &mut acknowledged);
            if resumed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("service did not resume within 30 s of the database's return");
    for _ in 0..20 {
        let Increment::Acknowledged(old) = increment(&w).await else {
            panic!("refused once the database is back");
        };
        acknowledged.push(old);
    }
    w.unlock_all().await.unwrap();
    drop(w);
    session.close().await.unwrap();
    // every applied increment is in the log exactly once; every acknowledged one among them
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let id = admin.list_windows("o").await.unwrap()[0].id;
    let events = audit.events(id, 1).await.unwrap();
    let logged: Vec<i64> = events
        .into_iter()
        .filter_map(|entry| match entry.event {
            Some(Event::Op { result, .. }) => Some(i64::from_le_bytes(result.try_into().unwrap())),
            _ => None,
        })
        .collect();
    let mut sorted = logged.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (0..logged.len() as i64).collect::<Vec<_>>(),
        "the log holds each increment once, with consecutive old values"
    );
    for old in &acknowledged {
        assert!(
            logged.contains(old),
            "acknowledged increment {old} is not in the log"
        );
    }
    let replayed = audit.replay(id, None).await.unwrap();
    let live = public_copies(&server.url, &world.tokens[0], "c", 2, 1).await;
    assert_eq!(replayed.ranks[0], live[0][0].to_le_bytes());
    assert_eq!(
        live[0][0],
        logged.len() as i64,
        "live, log and replay agree"
    );
    // every refusal that said it changed nothing did not: the counter holds exactly the
    // acknowledged increments plus some of those applied but not recorded when answered
    assert!(
        unchanged >= 1,
        "no call was refused before it changed anything"
    );
    let applied = live[0][0] as usize;
    assert!(
        (acknowledged.len()..=acknowledged.len() + not_recorded_yet).contains(&applied),
        "{applied} increments applied: {} acknowledged, {not_recorded_yet} not recorded yet, \
         {unchanged} refused as unchanged",
        acknowledged.len()
    );
    assert!(failures().await >= failed, "a counter went down");
    server.stop().await;
}

/// A new session of a rank (its process started again, or the server did) opens the window
/// with its private copy as its public copy: what the rank published before and what other
/// ranks put there are what it loads, without a synchronization call first; what it stores
/// then is published as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_starts_from_its_public_copy() {
    let (_data, server) = start_fresh("onesided-fresh", |_| {}).await;
    let world = server
        .world_with("w", 2, &[WindowSpec::of::<i64>("x", 2, 40)])
        .await;
    let (origin, w0) = server.attached_window(&world.tokens[0], "x").await;
    let (owner, w1) = server.attached_window(&world.tokens[1], "x").await;
    // rank 1 publishes its store of element 0; rank 0 puts elements 1 and 39 (a zero gap of
    // 37 elements between them)
    w1.store(0, &[5i64]).unwrap();
    w1.lock(LockType::Exclusive, 1, 0).await.unwrap();
    w1.unlock(1).await.unwrap();
    w0.lock(LockType::Exclusive, 1, 0).await.unwrap();
    w0.put(1, 1, &[6i64]).unwrap();
    w0.put(1, 39, &[-1i64]).unwrap();
    w0.unlock(1).await.unwrap();
    drop(w1);
    owner.close().await.unwrap();

    let mut expected = vec![0i64; 40];
    (expected[0], expected[1], expected[39]) = (5, 6, -1);
    let (again, w1) = server.attached_window(&world.tokens[1], "x").await;
    assert_eq!(w1.load::<i64>(0, 40).unwrap(), expected);
    // its next store is published as any store
    w1.store(2, &[7i64]).unwrap();
    w1.lock(LockType::Exclusive, 1, 0).await.unwrap();
    w1.unlock(1).await.unwrap();
    expected[2] = 7;
    w0.lock(LockType::Shared, 1, 0).await.unwrap();
    let seen = w0.get::<i64>(1, 0, 40).unwrap();
    w0.unlock(1).await.unwrap();
    assert_eq!(seen.value().await.unwrap(), expected);
    drop((w0, w1));
    origin.close().await.unwrap();
    again.close().await.unwrap();

    // after a restart too
    let server = server.restart(|_| {}).await;
    let (owner, w1) = server.attached_window(&world.tokens[1], "x").await;
    assert_eq!(w1.load::<i64>(0, 40).unwrap(), expected);
    drop(w1);
    owner.close().await.unwrap();
    // a handle that asks for none starts zeroed (the CLI's one-shot calls)
    let other = Session::attach(&server.url, &world.tokens[1])
        .await
        .unwrap();
    let zeroed = other.window_zeroed("x").await.unwrap();
    assert_eq!(zeroed.load::<i64>(0, 40).unwrap(), vec![0; 40]);
    drop(zeroed);
    other.close().await.unwrap();
    server.stop().await;
}

/// A synchronization call refused while the audit store is away changed nothing, at the
/// target and here: the locks it was to release are still held on both sides (and the lazy
/// one that travelled with it is requested again), the stores it was to publish are still to
/// be published, and the same calls made again once the store is back succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlocks_refused_unchanged_can_be_made_again_and_publish_then() {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-undo")));
    let mut outage = Outage::Sqlite {
        path: data.0.join("audit.db"),
        holder: None,
    };
    let server = start_on(&data.0, |_| {}).await;
    let admin = &server.admin;
    let world = admin.create_world("u", 2).await.unwrap();
    for name in ["c", "probe"] {
        admin
            .create_window("u", &WindowSpec::of::<i64>(name, 2, 1))
            .await
            .unwrap();
    }
    // rank 0 only watches for the outage, on a session of its own (a call of rank 1's session
    // would carry its lazy lock early)
    let (watcher, probe) = server.attached_window(&world.tokens[0], "probe").await;
    probe.lock_all(0).await.unwrap();
    let (session, w) = server.attached_window(&world.tokens[1], "c").await;
    // rank 1's own lock is held, over a store; rank 0's is lazy, and nothing carried it yet
    w.lock(LockType::Exclusive, 1, 0).await.unwrap();
    w.store(0, &[42i64]).unwrap();
    w.lock(LockType::Exclusive, 0, 0).await.unwrap();
    outage.begin().await;
    let mut known = false;
    for _ in 0..1000 {
        // each writes the log, until the server knows it cannot
        let increment = probe.fetch_and_op(0, 0, 1i64, Op::Sum).unwrap();
        let flushed = probe.flush(0).await;
        if let Err(error) = increment.value().await.and(flushed) {
            assert_eq!(error.class(), Some(ErrorClass::Io), "{error}");
            if error.unchanged() {
                known = true;
                break;
            }
        }
    }
    assert!(
        known,
        "the server never refused a call unchanged during the outage"
    );
    // a put that travels behind the lazy lock and is refused with it, and with the flush that
    // would complete it: a flush refused unchanged completed nothing, so the put's failure is
    // still to be reported, and the lock still to be requested
    w.put(0, 0, &[7i64]).unwrap();
    let flush = w.flush(0).await.unwrap_err();
    assert!(flush.unchanged(), "{flush}");
    for target in [0, 1] {
        let refused = w.unlock(target).await.unwrap_err();
        assert_eq!(refused.class(), Some(ErrorClass::Io), "{refused}");
        assert!(refused.unchanged(), "unlock({target}): {refused}");
        // still locked here, as at the target
        let again = w.lock(LockType::Shared, target, 0).await.unwrap_err();
        assert_eq!(again.class(), Some(ErrorClass::RmaSync), "{again}");
    }
    outage.end().await;
    // the same calls again, until the server takes calls again: the unlock of rank 0 then
    // reports the refused put it completed (which it did not change into a success)
    for target in [0, 1] {
        let mut unlocked = None;
        for _ in 0..1000 {
            match w.unlock(target).await {
                Err(error) if error.unchanged() => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                done => {
                    unlocked = Some(done);
                    break;
                }
            }
        }
        let unlocked = unlocked.expect("the unlock was never taken once the store was back");
        if target == 0 {
            let put = unlocked.expect_err("the refused put went unreported");
            assert_eq!(put.class(), Some(ErrorClass::Io), "{put}");
            assert!(
                !put.unchanged(),
                "the unlock that reported it changed the epoch"
            );
        } else {
            unlocked.unwrap();
        }
    }
    drop((w, probe));
    session.close().await.unwrap();
    watcher.close().await.unwrap();
    // both locks were released (lock_all of rank 0 is granted) and the store was published
    let live = public_copies(&server.url, &world.tokens[0], "c", 2, 1).await;
    assert_eq!(live[0], [0], "the refused put");
    assert_eq!(live[1], [42], "the store the refused unlock was to publish");
    server.stop().await;
}
