//! The storage references measured in the same run: what one durable write costs on the file
//! system the in-process server keeps its data in ([`fdatasync`]), what that file system writes
//! in bulk ([`disk_write`]), and, given a PostgreSQL URL, what one committed single-row INSERT
//! costs there and how fast it commits a bulk put's bytes ([`pg_commit`]). Issue 12 states the audit's `sync` latency targets in these
//! units: an answer that waits for its commit cannot cost less than one of them.
//!
//! The files go in a scratch directory of their own beside the in-process servers' data
//! directories (`server::data_parent`) and are removed at the end. The PostgreSQL
//! table is an ordinary (logged) one, so that every commit waits for its WAL flush, and is
//! dropped at the end.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use sqlx::Connection;

use crate::measure::{bulk_payload, median, warm_up};
use crate::server::{data_parent, unique};

/// Bytes of one append in [`fdatasync`] and of the payload in [`pg_commit`]: about one audit row.
pub const RECORD_BYTES: usize = 200;

/// The size of one write in [`disk_write`].
pub const WRITE_CHUNK: usize = 8 << 20;

/// At most this many measured iterations of [`fdatasync`] and [`pg_commit`]: a few thousand
/// samples give a stable median, and more only make a slow disk's run long.
pub const MAX_ITERATIONS: usize = 1_000;

/// Measured iterations of [`fdatasync`] and [`pg_commit`] for a bench of `iterations`.
pub fn iterations(iterations: usize) -> usize {
    iterations.clamp(1, MAX_ITERATIONS)
}

/// A directory beside the servers' data directories, removed with what it holds on drop.
#[derive(Debug)]
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    /// A new empty directory `onesided-bench-WHAT-…` beside the servers' data directories.
    pub(crate) fn new(what: &str) -> anyhow::Result<Self> {
        let path = data_parent().join(format!("onesided-bench-{what}-{}", unique()));
        std::fs::create_dir(&path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(Scratch(path))
    }

    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes back every dirty page of the machine (`sync`) before the storage references are
/// measured. They run after the bulk puts of the `sync` run and the 256 MiB put of the memory
/// run, whose hundreds of MiB the kernel may still be writing back; an `fdatasync` waiting
/// behind them would make the reference slower than the disk was for the `sync` patterns,
/// which run before any bulk write — in favour of their targets. (It does not make the disk
/// steady: `fdatasync_us` still ranged 96–151 µs over three runs with it, 94–161 without.)
/// Best effort: without a `sync` program the references are measured as they are.
pub fn settle() {
    if let Err(error) = std::process::Command::new("sync").status() {
        eprintln!("cannot run sync before the storage references: {error}");
    }
}

/// One append of [`RECORD_BYTES`] to a file opened for appending, then `File::sync_data`
/// (`fdatasync` on Linux), `iterations` times after an unmeasured 10 %: median µs. Every append
/// grows the file, so each sync also writes the file's new size, as an append to a log does.
///
/// # Errors
/// When the scratch file cannot be created, written or synced.
pub fn fdatasync(iterations: usize) -> anyhow::Result<f64> {
    let scratch = Scratch::new("fdatasync")?;
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(scratch.0.join("appended"))
        .context("cannot create the append file")?;
    let record = [0x5a_u8; RECORD_BYTES];
    let skip = warm_up(iterations);
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations + skip {
        let started = Instant::now();
        file.write_all(&record)?;
        file.sync_data().context("fdatasync")?;
        if i >= skip {
            samples.push(started.elapsed());
        }
    }
    Ok(median(&samples))
}

/// `bytes` written to a new file in chunks of [`WRITE_CHUNK`], then `File::sync_data`: MiB/s
/// from the creation of the file to the end of the sync. The file is deleted afterwards.
///
/// # Errors
/// When the scratch file cannot be created, written, synced or removed.
pub fn disk_write(bytes: usize) -> anyhow::Result<f64> {
    let scratch = Scratch::new("disk-write")?;
    let path = scratch.0.join("written");
    // not zeros, so that no layer below can skip or compress them
    let chunk: Vec<u8> = (0..WRITE_CHUNK).map(|i| (i % 251) as u8).collect();
    let started = Instant::now();
    let mut file = File::create(&path).context("cannot create the write file")?;
    let mut left = bytes;
    while left > 0 {
        let size = left.min(chunk.len());
        file.write_all(&chunk[..size])?;
        left -= size;
    }
    file.sync_data().context("fdatasync")?;
    let elapsed = started.elapsed();
    drop(file);
    std::fs::remove_file(&path).context("cannot remove the write file")?;
    Ok(bytes as f64 / f64::from(1 << 20) / elapsed.as_secs_f64())
}

/// Rows of one commit in [`sqlite_commit`]: as many as the audit writer commits for one
/// lock-put-unlock epoch (its events at origin and target).
pub const SQLITE_COMMIT_ROWS: usize = 9;

/// The floor of the default audit store: over one sqlx connection to a new SQLite database in
/// a scratch directory (the data directory's file system), in the store's configuration (WAL,
/// `synchronous=FULL`: one sync of the WAL per commit; the log given its working size first,
/// `onesided_server::audit::store::prime_wal`), a table shaped like the audit's events
/// (key `(window_id, seq)`, a [`RECORD_BYTES`] body and a 32-byte hash), and `iterations`
/// INSERTs of [`SQLITE_COMMIT_ROWS`] rows, each its own transaction, after an unmeasured 10 %:
/// median µs. What the audit writer cannot go below with SQLite through sqlx; issue 12's target
/// is stated in `fdatasync_us`, which is less.
///
/// # Errors
/// When the database cannot be created or written.
pub async fn sqlite_commit(iterations: usize) -> anyhow::Result<f64> {
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
    use sqlx::ConnectOptions;
    let scratch = Scratch::new("sqlite-commit")?;
    let mut connection = SqliteConnectOptions::new()
        .filename(scratch.path().join("commit.db"))
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .connect()
        .await
        .context("cannot create the SQLite database")?;
    sqlx::query(
        "CREATE TABLE events (window_id INTEGER NOT NULL, seq INTEGER NOT NULL, \
         body BLOB NOT NULL, hash BLOB NOT NULL, PRIMARY KEY (window_id, seq))",
    )
    .execute(&mut connection)
    .await
    .context("cannot create the table")?;
    // as the store does at start-up: commits then write the log in place
    onesided_server::audit::store::prime_wal(&mut connection)
        .await
        .context("cannot prime the write-ahead log")?;
    let body = [0x5a_u8; RECORD_BYTES];
    let hash = [0xa5_u8; 32];
    let skip = warm_up(iterations);
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations + skip {
        let first = i64::try_from(i * SQLITE_COMMIT_ROWS)?;
        let mut insert: sqlx::QueryBuilder<'_, sqlx::Sqlite> =
            sqlx::QueryBuilder::new("INSERT INTO events (window_id, seq, body, hash) ");
        insert.push_values(0..SQLITE_COMMIT_ROWS as i64, |mut row, k| {
            row.push_bind(1_i64)
                .push_bind(first + k)
                .push_bind(&body[..])
                .push_bind(&hash[..]);
        });
        let started = Instant::now();
        insert
            .build()
            .persistent(true)
            .execute(&mut connection)
            .await
            .context("INSERT")?;
        if i >= skip {
            samples.push(started.elapsed());
        }
    }
    let _ = connection.close().await;
    Ok(median(&samples))
}

/// The bulk INSERTs of [`pg_commit`]: `repeats` rows of `bytes` each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PgBulk {
    /// The payload of one row (the bench's bulk put).
    pub bytes: usize,
    /// Timed INSERTs; the figure is their median.
    pub repeats: usize,
}

/// What one commit into PostgreSQL costs.
#[derive(Clone, Debug, PartialEq)]
pub struct PgCommit {
    /// Median µs of one single-row INSERT in autocommit.
    pub median_us: f64,
    /// MiB/s of the median of single-row INSERTs in autocommit of the bulk put's size into a
    /// `bytea` column stored out of line uncompressed (`STORAGE EXTERNAL`, as the audit's
    /// `event`): what PostgreSQL itself takes to commit a bulk put's bytes from a client, the
    /// floor of a `sync` bulk put into it.
    pub insert_mib_per_s: f64,
    /// The server's `synchronous_commit` (`on` unless configured otherwise; at `off` a commit
    /// does not wait for its WAL flush, and neither does the audit store's).
    pub synchronous_commit: String,
}

/// Over one sqlx connection to `url`: creates an ordinary table, times `iterations` single-row
/// INSERTs of a [`RECORD_BYTES`] payload, each its own transaction (autocommit), after an
/// unmeasured 10 %, then `bulk.repeats` INSERTs of `bulk.bytes` after one unmeasured, then drops
/// the table.
///
/// # Errors
/// When the database cannot be reached, or the table cannot be created, written or dropped.
pub async fn pg_commit(url: &str, iterations: usize, bulk: PgBulk) -> anyhow::Result<PgCommit> {
    let mut connection = sqlx::PgConnection::connect(url)
        .await
        .context("cannot connect to the database")?;
    let synchronous_commit: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(&mut connection)
        .await
        .context("SHOW synchronous_commit")?;
    let table = format!("onesided_bench_commit_{}", unique().replace('-', "_"));
    sqlx::raw_sql(&format!(
        "CREATE TABLE {table} (id bigint PRIMARY KEY, payload bytea NOT NULL); \
         ALTER TABLE {table} ALTER COLUMN payload SET STORAGE EXTERNAL"
    ))
    .execute(&mut connection)
    .await
    .with_context(|| format!("cannot create table {table}"))?;
    let timed = async {
        let small_runs = (iterations, warm_up(iterations));
        let record = [0x5a_u8; RECORD_BYTES];
        let small = time_inserts(&mut connection, &table, 0, &record, small_runs).await?;
        // the bench's bulk put's bytes, after the small rows' ids, one unmeasured
        let payload = bulk_payload(bulk.bytes);
        let first = small_runs.0 + small_runs.1;
        let bulk =
            time_inserts(&mut connection, &table, first, &payload, (bulk.repeats, 1)).await?;
        anyhow::Ok((small, bulk))
    }
    .await;
    let dropped = sqlx::query(&format!("DROP TABLE {table}"))
        .execute(&mut connection)
        .await
        .with_context(|| format!("cannot drop table {table}"));
    let (median_us, bulk_us) = timed?;
    dropped?;
    let _ = connection.close().await;
    Ok(PgCommit {
        median_us,
        insert_mib_per_s: bulk.bytes as f64 / f64::from(1u32 << 20) / (bulk_us / 1e6),
        synchronous_commit,
    })
}

/// Median µs of `measured` single-row INSERTs of `payload` into `table`, each its own
/// transaction, after `skip` unmeasured ones; ids from `first_id` on.
async fn time_inserts(
    connection: &mut sqlx::PgConnection,
    table: &str,
    first_id: usize,
    payload: &[u8],
    (measured, skip): (usize, usize),
) -> anyhow::Result<f64> {
    let insert = format!("INSERT INTO {table} (id, payload) VALUES ($1, $2)");
    let mut samples = Vec::with_capacity(measured);
    for i in 0..measured + skip {
        let id = i64::try_from(first_id + i)?;
        let started = Instant::now();
        sqlx::query(&insert)
            .bind(id)
            .bind(payload)
            .execute(&mut *connection)
            .await
            .with_context(|| format!("INSERT of {} bytes", payload.len()))?;
        if i >= skip {
            samples.push(started.elapsed());
        }
    }
    Ok(median(&samples))
}
