//! What only an SQLite store has: its file, created its owner's alone; its pool, with a
//! write-ahead log and full syncs; the log's working size, given at open; and its answer to a
//! guarded commit, which it never takes.
//!
//! Owns: the SQLite file's privacy (mode 0600, `create_private`), the pool and its options
//! (`AuditStore::sqlite`, which also finds the events file beside the database file), the
//! write-ahead log's working size (`prime_wal`), and what the writer's insert takes for SQLite
//! (`guard_sqlite`: a cluster needs PostgreSQL; `commit_failed_sqlite`). Must not: choose the
//! database or the schema (`open` and the migrations do; it only runs them), write or read the
//! events file (`events_file` does), or build the insert (`commit` does).
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqliteConnection;

use super::{migration_error, AuditStore, EventFile, Guard, SQLITE_MIGRATIONS};

/// Gives the write-ahead log of the SQLite store behind `conn` its working size before the first
/// commit: one checkpoint's worth of pages (`page_size` × `wal_autocheckpoint`), written once as
/// a blob of zeros in a table of its own, checkpointed, then dropped. SQLite keeps a WAL file at
/// the largest size it reached and, after a checkpoint, writes it again from the start: until
/// the log first reaches that size, every commit appends to it, and `fdatasync` then also has to
/// write the file's new size (a journal commit of the file system) — on these machines a
/// 9-row commit cost 235–254 µs while the log grew and 150–161 µs once it had its size
/// (BENCHMARKS.md, "The write-ahead log at its working size"). A fresh store, or one whose log
/// SQLite removed at the last clean close, pays that at start-up, once, instead of in the
/// first few hundred answers. A log already that large (a store opened after a crash, with
/// frames to recover) is left as it is. The freed pages stay in the database for its next
/// rows.
///
/// # Errors
/// Database failures.
pub async fn prime_wal(conn: &mut SqliteConnection) -> anyhow::Result<()> {
    match database_file(conn).await? {
        Some(file) => prime_wal_of(conn, &file).await,
        // in memory: no log to prime
        None => Ok(()),
    }
}

/// The file of the SQLite database behind `conn`; `None` for one in memory.
async fn database_file(conn: &mut SqliteConnection) -> anyhow::Result<Option<PathBuf>> {
    let file: String =
        sqlx::query_scalar("SELECT file FROM pragma_database_list WHERE name = 'main'")
            .fetch_one(&mut *conn)
            .await?;
    Ok((!file.is_empty()).then(|| PathBuf::from(file)))
}

/// [`prime_wal`] for the database at `file`, the one behind `conn`.
async fn prime_wal_of(conn: &mut SqliteConnection, file: &Path) -> anyhow::Result<()> {
    let mut wal = file.as_os_str().to_owned();
    wal.push("-wal");
    let page_size: i64 = sqlx::query_scalar("PRAGMA page_size")
        .fetch_one(&mut *conn)
        .await?;
    let pages: i64 = sqlx::query_scalar("PRAGMA wal_autocheckpoint")
        .fetch_one(&mut *conn)
        .await?;
    // SQLite's default, where automatic checkpoints are off
    let pages = if pages > 0 { pages } else { 1000 };
    let working = page_size.saturating_mul(pages);
    let size = std::fs::metadata(&wal).map_or(0, |meta| meta.len());
    if i64::try_from(size).unwrap_or(i64::MAX) >= working {
        return Ok(());
    }
    sqlx::query("CREATE TABLE IF NOT EXISTS wal_primer (zeros BLOB NOT NULL)")
        .execute(&mut *conn)
        .await?;
    sqlx::query("INSERT INTO wal_primer (zeros) VALUES (zeroblob($1))")
        .bind(working)
        .execute(&mut *conn)
        .await?;
    // the blob's pages go to the database file; the next commit writes the log from its start
    sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
        .execute(&mut *conn)
        .await?;
    sqlx::query("DROP TABLE wal_primer")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Creates the SQLite file at `path` as its owner's alone (mode 0600 on Unix) before SQLite
/// opens it: SQLite would create it readable by everyone (0644 under the usual umask), and its
/// write-ahead log and shared-memory index take the database file's mode. It holds every event
/// and the hashes of the rank tokens. An existing file is left as it is, with a warning when
/// others may read it.
pub(super) fn create_private(path: &Path) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path);
        match created {
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                let mode = std::fs::metadata(path)
                    .with_context(|| format!("cannot read {}", path.display()))?
                    .permissions()
                    .mode();
                if mode & 0o077 != 0 {
                    tracing::warn!(
                        path = %path.display(),
                        mode = format_args!("{:o}", mode & 0o777),
                        "the SQLite audit store is readable by others than its owner"
                    );
                }
            }
            Err(error) => {
                return Err(error).with_context(|| format!("cannot create {}", path.display()))
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

impl AuditStore {
    pub(super) async fn sqlite(options: SqliteConnectOptions) -> anyhow::Result<Self> {
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            // no ping before each use: a commit is then one hop to the connection's thread, and a
            // broken connection fails the commit, which is retried
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .context("cannot open the SQLite audit store")?;
        SQLITE_MIGRATIONS
            .run(&pool)
            .await
            .map_err(migration_error)?;
        let mut conn = pool.acquire().await?;
        let file = database_file(&mut conn).await?;
        if let Some(file) = &file {
            // only an optimisation: a store that cannot be primed still works
            if let Err(error) = prime_wal_of(&mut conn, file).await {
                tracing::warn!(
                    "cannot give the SQLite write-ahead log its working size: {error:#}"
                );
            }
        }
        drop(conn);
        let events = file.map(|file| Arc::new(EventFile::beside(&file)));
        Ok(AuditStore::Sqlite(pool, events, super::Rows::PerEvent))
    }
}

/// SQLite commits are never guarded.
pub(super) fn commit_failed_sqlite(error: sqlx::Error) -> anyhow::Error {
    error.into()
}

/// A cluster needs PostgreSQL (`Cluster::join` refuses SQLite before any commit).
pub(super) async fn guard_sqlite(_: &mut SqliteConnection, _: &Guard) -> anyhow::Result<()> {
    anyhow::bail!("a cluster needs PostgreSQL")
}

#[cfg(test)]
mod tests {
    use super::*;

    use onesided_core::audit::GENESIS;

    use super::super::tests::chained;
    use super::super::Committer;

    /// A new SQLite store's write-ahead log has its working size before the first commit, the
    /// table that gave it that size is gone, and commits write the log in place: its size does
    /// not move, so no commit's sync has to write a new file size.
    #[tokio::test]
    async fn a_new_sqlite_store_commits_into_a_log_of_its_working_size() {
        let dir = std::env::temp_dir().join(format!("onesided-primed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = AuditStore::open(None, &dir).await.unwrap();
        let wal = dir.join("audit.db-wal");
        let size = || std::fs::metadata(&wal).unwrap().len();
        let primed = size();
        // SQLite's defaults: 4 KiB pages, a checkpoint every 1000 of them
        assert!(primed >= 4096 * 1000, "the log has {primed} bytes");
        let (primer,): (i64,) = store
            .sqlite_row("SELECT COUNT(*) FROM sqlite_master WHERE name = 'wal_primer'")
            .await;
        assert_eq!(primer, 0);
        let mut committer = Committer::new(store.clone());
        let mut previous = GENESIS;
        for seq in 1..=200u64 {
            let row = chained(1, seq..=seq, previous);
            committer.insert(&row, &[]).await.unwrap();
            previous = row[0].hash;
        }
        assert_eq!(size(), primed, "a commit grew the log");
        assert_eq!(store.rows(1, 1).await.unwrap().len(), 200);
        drop(committer);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
