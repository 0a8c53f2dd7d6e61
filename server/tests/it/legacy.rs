//! A store written by onesided 0.1.0 (events as JSON, schema version 3:
//! `tests/fixtures/store-0.1.0`, made as its README says) works with this version: it is
//! migrated, every window verifies intact, replays as it did, the recovered window holds its
//! bytes, and new events continue its chains in the binary encoding — across a restart too.
//! SQLite as the file was written; PostgreSQL with the same rows loaded into a database at
//! schema version 3 (0.1.0's migrations).
//!
//! So does one written by the previous release, 0.3.0 (schema version 7, SQLite:
//! `tests/fixtures/store-0.3.0`): rows of one event, then groups of 0.3.0's shape, and two
//! large events in the events file; its PostgreSQL schema is this version's.

use std::path::Path;

use onesided_client::{Audit, LockType, Session};
use sqlx::{Connection, PgConnection, SqliteConnection};

use crate::start_on;
use crate::store::PgDatabase;
use crate::{unique, TempDir, ADMIN_TOKEN};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-0.1.0/audit.db"
);
const RANK0: &str = "6084e3ae8e30b7aba2bf0670c124d51b1161a507403aa1dc";
const RANK1: &str = "c3490f31aa9c851762c9debf2c20e0ea62b654131d9a9884";

fn i64s(bytes: &[u8]) -> Vec<i64> {
    bytes
        .chunks_exact(8)
        .map(|chunk| i64::from_le_bytes(chunk.try_into().unwrap()))
        .collect()
}

/// Rows with a JSON body, rows with a binary event (both tables, and an SQLite store's group
/// events), and the schema version.
macro_rules! encodings {
    ($connection:expr) => {{
        let connection = $connection;
        let version: i64 = sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
            .fetch_one(&mut *connection)
            .await
            .unwrap();
        let mut counts = (0i64, 0i64);
        for table in ["audit_events", "client_events"] {
            let columns = if version >= 4 {
                "COUNT(body), COUNT(event)"
            } else {
                "COUNT(body), CAST(0 AS BIGINT)"
            };
            let (json, binary): (i64, i64) =
                sqlx::query_as(&format!("SELECT {columns} FROM {table}"))
                    .fetch_one(&mut *connection)
                    .await
                    .unwrap();
            counts = (counts.0 + json, counts.1 + binary);
        }
        // and the events of an SQLite store's groups, all binary (no such table elsewhere)
        let grouped: i64 = sqlx::query_scalar(
            "SELECT COALESCE(SUM(last_seq - first_seq + 1), 0) FROM audit_groups",
        )
        .fetch_one(&mut *connection)
        .await
        .unwrap_or(0);
        counts.1 += grouped;
        (counts, version)
    }};
}

enum Legacy {
    Sqlite(std::path::PathBuf),
    Postgres(PgDatabase),
}

impl Legacy {
    async fn encodings(&self) -> ((i64, i64), i64) {
        match self {
            Legacy::Sqlite(path) => {
                let url = format!("sqlite:{}", path.display());
                encodings!(&mut SqliteConnection::connect(&url).await.unwrap())
            }
            Legacy::Postgres(database) => {
                encodings!(&mut PgConnection::connect(&database.url).await.unwrap())
            }
        }
    }

    fn url(&self) -> Option<String> {
        match self {
            Legacy::Sqlite(_) => None,
            Legacy::Postgres(database) => Some(database.url.clone()),
        }
    }
}

/// A PostgreSQL database at 0.1.0's schema (its three migrations, as 0.1.0 applied them)
/// holding the fixture's rows.
async fn postgres_of_0_1_0(fixture: &Path) -> PgDatabase {
    let database = PgDatabase::create().await;
    let old = TempDir(std::env::temp_dir().join(unique("onesided-migrations-0.1.0")));
    std::fs::create_dir_all(&old.0).unwrap();
    let mut migrations = Vec::new();
    for entry in std::fs::read_dir(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../migrations/postgres"
    ))
    .unwrap()
    {
        migrations.push(entry.unwrap().path());
    }
    migrations.sort();
    for path in &migrations[..3] {
        std::fs::copy(path, old.0.join(path.file_name().unwrap())).unwrap();
    }
    let mut pg = PgConnection::connect(&database.url).await.unwrap();
    sqlx::migrate::Migrator::new(old.0.as_path())
        .await
        .unwrap()
        .run(&mut pg)
        .await
        .unwrap();
    let url = format!("sqlite:{}", fixture.display());
    let mut lite = SqliteConnection::connect(&url).await.unwrap();
    // every row of `table`, its columns read with these types and inserted as they are
    macro_rules! copy {
        ($table:literal, $($column:ident: $type:ty),+) => {{
            let columns = [$(stringify!($column)),+];
            let select = format!("SELECT {} FROM {}", columns.join(", "), $table);
            let places: Vec<String> = (1..=columns.len()).map(|n| format!("${n}")).collect();
            let insert = format!(
                "INSERT INTO {} ({}) VALUES ({})",
                $table,
                columns.join(", "),
                places.join(", ")
            );
            let rows: Vec<($($type,)+)> =
                sqlx::query_as(&select).fetch_all(&mut lite).await.unwrap();
            for ($($column,)+) in rows {
                sqlx::query(&insert)
                    $(.bind($column))+
                    .execute(&mut pg)
                    .await
                    .unwrap();
            }
        }};
    }
    copy!("worlds", name: String, nranks: i32);
    copy!("world_tokens", token_sha256: Vec<u8>, world: String, rank: i32);
    copy!("window_specs", window_id: i64, world: String, name: String, spec: String, freed: bool);
    copy!("snapshots", window_id: i64, rank: i32, seq: i64, data: Vec<u8>);
    copy!("audit_windows", window_id: i64, world: String, name: String);
    copy!(
        "audit_events",
        window_id: i64,
        seq: i64,
        at_ns: i64,
        rank: i32,
        incarnation: i64,
        kind: String,
        body: String,
        prev_hash: Vec<u8>,
        hash: Vec<u8>
    );
    copy!(
        "client_events",
        window_id: i64,
        rank: i32,
        incarnation: i64,
        cseq: i64,
        at_ns: i64,
        kind: String,
        body: String,
        prev_hash: Vec<u8>,
        hash: Vec<u8>
    );
    database
}

/// Every recorded window (`count` of them) verifies intact; returns how many client rows the
/// markers name.
async fn all_intact(audit: &Audit, count: usize) -> u64 {
    let windows = audit.windows().await.unwrap();
    assert_eq!(windows.len(), count, "{windows:?}");
    let mut client_rows = 0;
    for window in windows {
        let verification = audit.verify(window.id).await.unwrap();
        assert_eq!(verification.first_bad, None, "{window:?}: {verification:?}");
        // at least every row listed (a just-closed session's departure may still be landing)
        assert!(
            verification.events >= window.events,
            "{window:?}: {verification:?}"
        );
        client_rows += verification.client_events;
    }
    client_rows
}

async fn counters(url: &str) -> Vec<Vec<i64>> {
    crate::recovery::public_copies(url, RANK0, "counters", 2, 4).await
}

async fn a_store_written_by_0_1_0_is_migrated_verified_replayed_and_continued(postgres: bool) {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-legacy")));
    std::fs::create_dir_all(&data.0).unwrap();
    let store = if postgres {
        Legacy::Postgres(postgres_of_0_1_0(Path::new(FIXTURE)).await)
    } else {
        let database = data.0.join("audit.db");
        std::fs::copy(FIXTURE, &database).unwrap();
        Legacy::Sqlite(database)
    };
    let ((json_rows, _), version) = store.encodings().await;
    assert_eq!(version, 3, "a store of 0.1.0");
    assert_eq!(json_rows, 391 + 50);
    let url = store.url();
    let start = || start_on(&data.0, |config| config.database_url = url.clone());

    let server = start().await;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    // the old rows, as they were written
    assert_eq!(all_intact(&audit, 6).await, 50);
    let before = [vec![3, 0, 41, 3], vec![5, 7, 11, 0]];
    let replayed = audit.replay(1, None).await.unwrap();
    assert_eq!(
        replayed.ranks.iter().map(|r| i64s(r)).collect::<Vec<_>>(),
        before
    );
    assert_eq!(counters(&server.url).await, before);
    let log = audit.events(1, 1).await.unwrap();
    let put = log
        .iter()
        .find(|e| e.body.starts_with("{\"event\":\"op\",") && e.body.contains("\"op\":\"put\""))
        .expect("the put of 0.1.0");
    assert!(
        put.body
            .contains("\"data\":\"050000000000000007000000000000000b00000000000000\""),
        "{}",
        put.body
    );

    // new events continue the window's chain in the new encoding
    let session = Session::attach(&server.url, RANK1).await.unwrap();
    let w = session.window("counters").await.unwrap();
    w.lock(LockType::Exclusive, 0, 0).await.unwrap();
    w.put::<i64>(0, 1, &[-8]).unwrap();
    w.unlock(0).await.unwrap();
    drop(w);
    session.close().await.unwrap();
    let after = [vec![3, -8, 41, 3], vec![5, 7, 11, 0]];
    assert_eq!(counters(&server.url).await, after);
    assert_eq!(all_intact(&audit, 6).await, 50);
    let replayed = audit.replay(1, None).await.unwrap();
    assert_eq!(
        replayed.ranks.iter().map(|r| i64s(r)).collect::<Vec<_>>(),
        after
    );
    // the log reads the same either way: the new put's payload shows as the old one did
    let log = audit.events(1, 1).await.unwrap();
    assert!(
        log.iter()
            .any(|e| e.body.contains("\"data\":\"f8ffffffffffffff\"")),
        "the new put in the log"
    );
    server.stop().await;
    let ((json_rows, binary_rows), version) = store.encodings().await;
    // every migration of this release: PostgreSQL's fifth is the cluster's tables, its sixth
    // and SQLite's fifth the events file's columns, PostgreSQL's seventh the commit guard and
    // its eighth the cluster's settings, its ninth and SQLite's sixth the index of dynamic
    // windows' region rows, PostgreSQL's tenth the nodes' self-reach mark, SQLite's seventh
    // the group rows (`audit_groups`) and its eighth their events in the events file
    assert_eq!(version, if postgres { 10 } else { 8 });
    assert_eq!(
        json_rows,
        391 + 50,
        "old rows keep the encoding their hashes cover"
    );
    assert!(binary_rows > 0);

    // and a restart recovers the window from the mixed log
    let server = start().await;
    assert_eq!(counters(&server.url).await, after);
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    assert_eq!(all_intact(&audit, 6).await, 50);
    server.stop().await;
}

async_tests! {
    a_sqlite_store_written_by_0_1_0_is_migrated_verified_replayed_and_continued =>
        a_store_written_by_0_1_0_is_migrated_verified_replayed_and_continued(false);
    a_postgres_store_written_by_0_1_0_is_migrated_verified_replayed_and_continued =>
        a_store_written_by_0_1_0_is_migrated_verified_replayed_and_continued(true);
}

const FIXTURE_0_3_0: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/store-0.3.0");
const RELEASE_RANK0: &str = "186826fb4b93a8aeb31dd3424220b6d256be2e5161a42a64";
const RELEASE_RANK1: &str = "65ca86cee0ac159d4e220647f5cf5785f4ee75b2e65abae0";

/// Bytes a rank of the 0.3.0 store's `blob` window holds.
const BLOB: usize = 266_240;
/// The bytes of each of its large puts, past the events file's 128 KiB.
const PIECE: usize = 133_120;

/// `PIECE` bytes, byte `i` being `(times·i + plus) mod modulo` (the fixture's `first.bin` is
/// 7, 3, 251; `second.bin` 13, 5, 241).
fn pattern(times: usize, plus: usize, modulo: usize) -> Vec<u8> {
    (0..PIECE)
        .map(|i| ((i * times + plus) % modulo) as u8)
        .collect()
}

/// Both ranks' `blob` copies with `pieces` (rank, byte offset, bytes) written into zeroes.
fn blob_with(pieces: &[(usize, usize, &[u8])]) -> Vec<Vec<u8>> {
    let mut ranks = vec![vec![0u8; BLOB]; 2];
    for &(rank, at, bytes) in pieces {
        ranks[rank][at..at + bytes.len()].copy_from_slice(bytes);
    }
    ranks
}

/// Both ranks' public copies of the 0.3.0 store's windows, read through a session (what the
/// server recovered): `counters` as `i64`s, `blob` as bytes.
async fn release_copies(url: &str) -> (Vec<Vec<i64>>, Vec<Vec<u8>>) {
    use crate::recovery::public_elements;
    (
        public_elements(url, RELEASE_RANK0, "counters", 2, 4).await,
        public_elements(url, RELEASE_RANK0, "blob", 2, BLOB as u64).await,
    )
}

/// What the audit log replays for both windows: `counters` as `i64`s, `blob` as bytes.
async fn release_replays(audit: &Audit) -> (Vec<Vec<i64>>, Vec<Vec<u8>>) {
    let counters = audit.replay(1, None).await.unwrap();
    let blob = audit.replay(2, None).await.unwrap();
    (
        counters.ranks.iter().map(|rank| i64s(rank)).collect(),
        blob.ranks.iter().map(|rank| rank.to_vec()).collect(),
    )
}

/// 0.3.0's store, as written (rows, then 0.3.0's groups, two events in the events file), is
/// migrated to this version's schema, every window verifies and replays as it was written,
/// the server recovers both windows' bytes from it, new events (a large one among them, now
/// an entry of its group in the events file) continue its chains and the events file without
/// touching what 0.3.0 wrote there, and a restart recovers from the mixed log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_store_written_by_0_3_0_is_migrated_verified_replayed_and_continued() {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-release")));
    std::fs::create_dir_all(&data.0).unwrap();
    for file in ["audit.db", "audit.db-events"] {
        std::fs::copy(Path::new(FIXTURE_0_3_0).join(file), data.0.join(file)).unwrap();
    }
    let store = Legacy::Sqlite(data.0.join("audit.db"));
    // no JSON; binary rows of 35 + 23 + 76 events (the two large ones are in the events file)
    // and 10 client rows, groups of 45 + 10 events
    assert_eq!(
        store.encodings().await,
        ((0, 35 + 23 + 76 + 10 + 45 + 10), 7)
    );
    let (first, second) = (pattern(7, 3, 251), pattern(13, 5, 241));
    let written = (
        vec![vec![3, -6, 40, 2], vec![5, 7, 11, 9]],
        blob_with(&[(1, 0, &first), (0, 4096, &second)]),
    );

    let server = start_on(&data.0, |_| {}).await;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    assert_eq!(all_intact(&audit, 3).await, 10);
    assert_eq!(release_replays(&audit).await, written);
    // every event of the large window reads, its puts in the events file among them (before
    // a session reads the copies, which records its own)
    assert_eq!(audit.events(2, 1).await.unwrap().len(), 25 + 10);
    assert_eq!(release_copies(&server.url).await, written);

    // new events: a put of counters, a large put into blob (now one group's entry in the file)
    let session = Session::attach(&server.url, RELEASE_RANK1).await.unwrap();
    let counters = session.window("counters").await.unwrap();
    counters.lock(LockType::Exclusive, 1, 0).await.unwrap();
    counters.put::<i64>(1, 0, &[-5]).unwrap();
    counters.unlock(1).await.unwrap();
    let blob = session.window("blob").await.unwrap();
    let third: Vec<u8> = first.iter().rev().copied().collect();
    blob.lock(LockType::Exclusive, 1, 0).await.unwrap();
    blob.put_bytes(1, PIECE as u64, third.clone().into())
        .unwrap();
    blob.unlock(1).await.unwrap();
    drop((counters, blob));
    session.close().await.unwrap();
    let continued = (
        vec![vec![3, -6, 40, 2], vec![-5, 7, 11, 9]],
        blob_with(&[(1, 0, &first), (1, PIECE, &third), (0, 4096, &second)]),
    );
    assert_eq!(all_intact(&audit, 3).await, 10);
    assert_eq!(release_replays(&audit).await, continued);
    assert_eq!(release_copies(&server.url).await, continued);
    server.stop().await;
    let (_, version) = store.encodings().await;
    assert_eq!(version, 8, "migrated to this version's schema");
    // the new large events went after what 0.3.0 wrote in the events file, as their groups'
    // entries
    let old = std::fs::read(Path::new(FIXTURE_0_3_0).join("audit.db-events")).unwrap();
    let now = std::fs::read(data.0.join("audit.db-events")).unwrap();
    assert!(now.len() >= old.len() + PIECE, "{} bytes", now.len());
    assert!(now[..old.len()] == old[..], "0.3.0's events file unchanged");
    let url = format!("sqlite:{}", data.0.join("audit.db").display());
    let in_file: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM audit_groups WHERE file_end IS NOT NULL")
            .fetch_one(&mut SqliteConnection::connect(&url).await.unwrap())
            .await
            .unwrap();
    // (the sessions' reads of the whole window recorded large events too)
    assert!(in_file >= 1, "no group keeps an event in the file");

    // a restart recovers both windows from rows, 0.3.0's groups and this version's
    let server = start_on(&data.0, |_| {}).await;
    assert_eq!(release_copies(&server.url).await, continued);
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    assert_eq!(all_intact(&audit, 3).await, 10);
    assert_eq!(release_replays(&audit).await, continued);
    server.stop().await;
}
