//! The audit store: SQLite (an embedded file, the default) or PostgreSQL, with migrations
//! applied at start-up. It writes the window chains (`audit_events`) and reads the rows clients
//! persisted themselves (`client_events`, written by the client library). It runs the server's
//! SQL but for the cluster's own statements in `crate::cluster` (node and world leases,
//! placement, the admin token's hash, the token lookup of another node's world, window ids),
//! which issue 41 plans to move here.
//!
//! Owns: the schema (the migrations of `migrations/postgres` and `migrations/sqlite`, run at
//! `open`, and the refusal of a schema newer than the binary); every statement on the log
//! (`audit_events` rows and their tails, snapshots, the reads of `client_events`), on the
//! directory (worlds with their token hashes and, in a cluster, their first lease row; window
//! specs; freed windows; incarnations) and on a commit's guard (`commit_guards`, `Fenced`);
//! the SQLite file's privacy (mode 0600), its write-ahead log's working size (`prime_wal`) and
//! the events file (`EventFile`: large events written and synced before the rows that point
//! at them commit); the writer's own connection (`Committer`) and the cluster's connection
//! options (`cluster_session`). Must not: number, hash or encode rows (the writer hands them
//! ready, `NewRow`), decide what an event means or verify a chain (core does), write
//! `client_events` (clients do), decide who holds a lease (the cluster does; the database's
//! trigger enforces it), or retry a failed commit (the writer does).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use anyhow::Context;
use onesided_core::audit::{AuditRecord, Body, Event, RecordedWindow, StoredRow};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Connection, PgConnection, Postgres, QueryBuilder, Sqlite, SqliteConnection};

static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");
static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

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

/// Events whose protobuf bytes reach this size go to an SQLite store's events file
/// ([`EventFile`]) instead of its rows. A commit that holds one syncs the file and then the
/// database: one more `fdatasync`, paid by commits that carry at least this many bytes, which
/// the write-ahead log would have written twice (BENCHMARKS.md, "Large events written once").
pub const FILE_EVENT_BYTES: usize = 128 << 10;

/// The file beside an SQLite store's database (`audit.db-events` for `audit.db`) that large
/// events ([`FILE_EVENT_BYTES`]) are appended to, each written once: in a row, SQLite writes
/// the bytes into its write-ahead log and then, at the checkpoint, again into the database,
/// which halved what a `sync` bulk put got of the disk (issue 12, item 3). The row keeps the
/// event's offset and length (`event_at`, `event_len`); its hash covers the event's bytes as
/// ever, so a changed, truncated or missing file fails verification at the rows it held.
///
/// Order: the bytes are written and `fdatasync`ed before the commit of the rows that point at
/// them, so a committed row never points at bytes not on disk. A crash between the two leaves
/// bytes no row points at; appends continue after them. The first writer of a process takes an
/// exclusive lock on the file (`flock`) and appends from the end of the file or of the last
/// event a row points at, whichever is further; a store whose file cannot be opened or is
/// locked by another process keeps its events in their rows, as before, and says so once.
#[derive(Debug)]
pub struct EventFile {
    path: PathBuf,
    appender: Arc<tokio::sync::Mutex<Appender>>,
    /// Whether to try `O_DIRECT` (tests turn it off to take the path of file systems without).
    direct: bool,
}

#[derive(Debug)]
enum Appender {
    /// Not needed yet.
    Unopened,
    /// Appends at `end`: through `direct` when the file system takes `O_DIRECT`, else through
    /// `file` (which holds the lock).
    Open {
        file: Arc<std::fs::File>,
        direct: Option<Arc<std::fs::File>>,
        end: u64,
        /// The block-aligned buffer the last append wrote from, kept for the next
        /// ([`KEPT_BUFFER_BYTES`] at most): a new one for every commit cost zeroing (or fresh
        /// pages) of all its bytes, about 8 ms of the server's thread per 64 MiB put.
        buffer: Vec<u8>,
    },
    /// Events stay in their rows.
    Refused,
}

/// What an append's blocking write hands back: see [`PendingAppend`].
type Written = (
    tokio::sync::OwnedMutexGuard<Appender>,
    Vec<u8>,
    std::io::Result<bool>,
);

/// An [`EventFile`] append under way ([`EventFile::append`]): its write and sync run on a
/// blocking thread while the appender stays locked.
#[derive(Debug)]
struct PendingAppend {
    /// The appender's lock (held by the write until it is done: an append given up before
    /// its end never lets the next one write beside it), the write's buffer, and whether the
    /// file system refused `O_DIRECT`.
    written: tokio::task::JoinHandle<Written>,
    placed: Vec<Option<(i64, i64)>>,
    padded: usize,
    path: PathBuf,
}

impl PendingAppend {
    /// Waits for the write and the sync: `(offset, length)` for each row whose event is now
    /// in the file, `None` for the rest.
    ///
    /// # Errors
    /// The write or the sync failed.
    async fn finish(self) -> anyhow::Result<Vec<Option<(i64, i64)>>> {
        let (mut appender, buffer, written) = self
            .written
            .await
            .context("the events file's writer panicked")?;
        let Appender::Open {
            direct,
            end,
            buffer: kept,
            ..
        } = &mut *appender
        else {
            unreachable!("an append is only begun on an open file");
        };
        if buffer.len() <= KEPT_BUFFER_BYTES {
            *kept = buffer;
        }
        let direct_failed =
            written.with_context(|| format!("cannot write {}", self.path.display()))?;
        if direct_failed {
            *direct = None;
        }
        *end += self.padded as u64;
        Ok(self.placed)
    }
}

/// The bytes of `row`'s event when they go to the events file ([`FILE_EVENT_BYTES`] or more).
fn in_file(row: &NewRow) -> Option<&[u8]> {
    match &row.body {
        Body::Binary(bytes) if bytes.len() >= FILE_EVENT_BYTES => Some(bytes),
        _ => None,
    }
}

/// What `O_DIRECT` needs aligned: the file offset, the length and the buffer's address (the
/// largest logical block size of common disks).
const DIRECT_ALIGN: usize = 4096;

/// The largest buffer [`EventFile::append`] keeps for the next append: a commit's large events
/// come in batches of about an eighth of the audit writer's byte budget (8 MiB), and a buffer
/// kept after a rare larger one would hold its memory for good.
const KEPT_BUFFER_BYTES: usize = 16 << 20;

/// `len` rounded up to [`DIRECT_ALIGN`].
fn aligned(len: u64) -> u64 {
    len.div_ceil(DIRECT_ALIGN as u64) * DIRECT_ALIGN as u64
}

impl EventFile {
    /// The events file of the SQLite database at `database`.
    pub fn beside(database: &Path) -> Self {
        let mut name = database.as_os_str().to_owned();
        name.push("-events");
        EventFile {
            path: PathBuf::from(name),
            appender: Arc::new(tokio::sync::Mutex::new(Appender::Unopened)),
            direct: true,
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts appending the events of `rows` of at least [`FILE_EVENT_BYTES`]: they are
    /// copied and their write and sync started on a blocking thread;
    /// [`PendingAppend::finish`] waits for them and says where each row's event now is. `None`
    /// when no event goes to the file (none large enough, or the file refused). Until it
    /// finishes, the next append waits.
    ///
    /// # Errors
    /// The file could not be opened (the write's own failure comes from `finish`: nothing of
    /// it is pointed at then, and the next append writes over it).
    async fn append(
        &self,
        conn: &mut SqliteConnection,
        rows: &[NewRow],
    ) -> anyhow::Result<Option<PendingAppend>> {
        let total: usize = rows.iter().filter_map(in_file).map(<[u8]>::len).sum();
        if total == 0 {
            return Ok(None);
        }
        let mut appender = Arc::clone(&self.appender).lock_owned().await;
        if matches!(*appender, Appender::Unopened) {
            *appender = match self.open(conn).await {
                Ok(open) => open,
                Err(error) => {
                    tracing::warn!(
                        path = %self.path.display(),
                        "large audit events stay in their rows: {error:#}"
                    );
                    Appender::Refused
                }
            };
        }
        let Appender::Open {
            file,
            direct,
            end,
            buffer: kept,
        } = &mut *appender
        else {
            return Ok(None);
        };
        // One write for all of them, from a copy (the rows stay the writer's until the
        // commit), padded with zeros to whole blocks and from a block-aligned buffer for
        // O_DIRECT: the bytes go from this buffer to the disk without a copy into the page
        // cache, which cost more than the disk's own time here (BENCHMARKS.md, "Large events
        // written once"). The padding is never pointed at; `end` stays aligned.
        let padded = aligned(total as u64) as usize;
        let mut buffer = std::mem::take(kept);
        if buffer.len() < padded + DIRECT_ALIGN {
            buffer = vec![0u8; padded + DIRECT_ALIGN];
        }
        let start = buffer.as_ptr().align_offset(DIRECT_ALIGN);
        let mut placed = Vec::with_capacity(rows.len());
        let mut filled = start;
        for row in rows {
            placed.push(in_file(row).map(|event| {
                let at = *end + (filled - start) as u64;
                buffer[filled..filled + event.len()].copy_from_slice(event);
                filled += event.len();
                (at as i64, event.len() as i64)
            }));
        }
        // a kept buffer holds an earlier append's bytes past `filled`
        buffer[filled..start + padded].fill(0);
        let (file, direct, at) = (Arc::clone(file), direct.clone(), *end);
        let path = self.path.clone();
        let written = tokio::task::spawn_blocking(move || -> Written {
            let written = (|| -> std::io::Result<bool> {
                use std::os::unix::fs::FileExt;
                let bytes = &buffer[start..start + padded];
                let mut direct_failed = false;
                if let Some(direct) = direct {
                    match direct.write_all_at(bytes, at) {
                        Ok(()) => return direct.sync_data().map(|()| false),
                        // the file system refused the alignment: the page cache from now on
                        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
                            tracing::info!(
                                path = %path.display(),
                                "the events file is written through the page cache: {error}"
                            );
                            direct_failed = true;
                        }
                        Err(error) => return Err(error),
                    }
                }
                file.write_all_at(bytes, at)?;
                file.sync_data()?;
                Ok(direct_failed)
            })();
            (appender, buffer, written)
        });
        Ok(Some(PendingAppend {
            written,
            placed,
            padded,
            path: self.path.clone(),
        }))
    }

    /// Opens the file for appending, creating it (and syncing its directory) when new.
    async fn open(&self, conn: &mut SqliteConnection) -> anyhow::Result<Appender> {
        let pointed: Option<i64> = sqlx::query_scalar(
            "SELECT event_at + event_len FROM audit_events WHERE event_at IS NOT NULL \
             ORDER BY event_at DESC LIMIT 1",
        )
        .fetch_optional(&mut *conn)
        .await?;
        let path = self.path.clone();
        let try_direct = self.direct;
        let (file, direct, len) = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
            use std::os::unix::fs::OpenOptionsExt;
            let open = |create: bool| {
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(create)
                    .mode(0o600)
                    .open(&path)
            };
            let file = match open(false) {
                Ok(file) => file,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    let file = open(true)?;
                    // the new name must survive a crash as the bytes written under it do
                    if let Some(dir) = path.parent() {
                        let dir = if dir.as_os_str().is_empty() {
                            Path::new(".")
                        } else {
                            dir
                        };
                        std::fs::File::open(dir)?.sync_all()?;
                    }
                    file
                }
                Err(error) => return Err(error.into()),
            };
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    anyhow::bail!("another process appends to it")
                }
                Err(std::fs::TryLockError::Error(error)) => return Err(error.into()),
            }
            let len = file.metadata()?.len();
            // a second handle that bypasses the page cache, where the file system allows it
            // (not every one does: tmpfs before Linux 6.6, some network file systems)
            let direct = try_direct
                .then(|| {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .custom_flags(libc::O_DIRECT)
                        .open(&path)
                        .ok()
                })
                .flatten();
            Ok((file, direct, len))
        })
        .await
        .context("the events file's opener panicked")??;
        let pointed = u64::try_from(pointed.unwrap_or(0)).unwrap_or(0);
        Ok(Appender::Open {
            file: Arc::new(file),
            direct: direct.map(Arc::new),
            end: aligned(len.max(pointed)),
            buffer: Vec::new(),
        })
    }

    /// Reads the events at `spans` (`(offset, length)` as stored): each one's bytes, or why
    /// they cannot be read.
    ///
    /// # Errors
    /// Only when the reader could not run; a missing file or a span past its end is an `Err`
    /// for that span.
    pub async fn read(
        &self,
        spans: Vec<(i64, i64)>,
    ) -> anyhow::Result<Vec<Result<Vec<u8>, String>>> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            use std::os::unix::fs::FileExt;
            let file = std::fs::File::open(&path).and_then(|file| {
                let len = file.metadata()?.len();
                Ok((file, len))
            });
            spans
                .into_iter()
                .map(|(at, len)| {
                    let (file, size) = file.as_ref().map_err(|error| {
                        format!("the events file {} cannot be read: {error}", path.display())
                    })?;
                    let (Ok(at), Ok(len)) = (u64::try_from(at), u64::try_from(len)) else {
                        return Err(format!("the event's place in the events file is negative ({at}, {len})"));
                    };
                    if at.checked_add(len).is_none_or(|end| end > *size) {
                        return Err(format!(
                            "the event ({len} bytes at {at}) lies past the end of {} ({size} bytes)",
                            path.display()
                        ));
                    }
                    let mut bytes = vec![0; len as usize];
                    file.read_exact_at(&mut bytes, at).map_err(|error| {
                        format!("cannot read the event at {at} of {}: {error}", path.display())
                    })?;
                    Ok(bytes)
                })
                .collect()
        })
        .await
        .context("the events file's reader panicked")
    }
}

/// A row ready to insert.
#[derive(Clone, Debug)]
pub struct NewRow {
    /// The record.
    pub record: AuditRecord,
    /// Its stored body (always [`Body::Binary`] for a new row).
    pub body: Body,
    /// The previous row's hash.
    pub prev_hash: [u8; 32],
    /// This row's hash.
    pub hash: [u8; 32],
}

/// A world as stored: its size and the SHA-256 of each rank's token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredWorld {
    /// Name.
    pub name: String,
    /// Number of ranks.
    pub nranks: u32,
    /// `(token SHA-256, rank)`.
    pub tokens: Vec<([u8; 32], u32)>,
}

/// A window that was created and not freed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredWindow {
    /// Window id.
    pub id: u64,
    /// World name.
    pub world: String,
    /// Window name.
    pub name: String,
    /// Its shape and info as JSON (`registry` writes and reads it).
    pub spec: String,
}

/// The latest snapshot of one rank's public copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Window id.
    pub window: u64,
    /// The rank.
    pub rank: u32,
    /// The copy after every event of the window up to this sequence number.
    pub seq: u64,
    /// The bytes.
    pub data: Vec<u8>,
}

/// Runs `$body` with `$pool` bound to whichever pool the store has (the SQL is the same).
macro_rules! on_pool {
    ($store:expr, $pool:ident => $body:expr) => {
        match $store {
            AuditStore::Sqlite($pool, _) => $body,
            AuditStore::Postgres($pool) => $body,
        }
    };
}

/// Commits `tx` when `written` is `Ok`, and otherwise rolls it back *now* — a dropped
/// transaction only queues its ROLLBACK for the connection's next use, holding its locks
/// until then — and returns `written`'s error.
async fn end_transaction<DB: sqlx::Database>(
    tx: sqlx::Transaction<'_, DB>,
    written: Result<(), sqlx::Error>,
) -> Result<(), sqlx::Error> {
    match written {
        Ok(()) => tx.commit().await,
        Err(error) => {
            // the first error says why; a failed rollback ends with the connection anyway
            let _ = tx.rollback().await;
            Err(error)
        }
    }
}

/// A key or lower bound read from a request, as SQL's BIGINT: `None` past `i64::MAX`, which no
/// stored window id or sequence number reaches. (`as i64` wraps such a value to a negative
/// one, and `seq >= $2` then matches the whole log.)
fn bigint(value: u64) -> Option<i64> {
    i64::try_from(value).ok()
}

fn hash32(bytes: &[u8]) -> [u8; 32] {
    let mut fixed = [0u8; 32];
    let len = bytes.len().min(32);
    fixed[..len].copy_from_slice(&bytes[..len]);
    fixed
}

/// Where the audit log lives.
#[derive(Clone, Debug)]
pub enum AuditStore {
    /// An embedded SQLite file, and its events file (`None` for a database in memory).
    Sqlite(SqlitePool, Option<Arc<EventFile>>),
    /// A PostgreSQL database.
    Postgres(PgPool),
}

/// Creates the SQLite file at `path` as its owner's alone (mode 0600 on Unix) before SQLite
/// opens it: SQLite would create it readable by everyone (0644 under the usual umask), and its
/// write-ahead log and shared-memory index take the database file's mode. It holds every event
/// and the hashes of the rank tokens. An existing file is left as it is, with a warning when
/// others may read it.
fn create_private(path: &Path) -> anyhow::Result<()> {
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

fn migration_error(error: sqlx::migrate::MigrateError) -> anyhow::Error {
    match error {
        sqlx::migrate::MigrateError::VersionMissing(version) => anyhow::anyhow!(
            "the audit store has schema version {version}, newer than this onesided-server knows; \
             upgrade the server or point it at another database"
        ),
        other => anyhow::Error::new(other).context("cannot migrate the audit store"),
    }
}

/// The pool of a PostgreSQL store.
fn postgres_pool() -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(4)
        // no ping (a network round trip) before each use: a broken connection fails the
        // commit, which is retried
        .test_before_acquire(false)
        // while the database is away, a commit fails within this (and is retried) instead of
        // waiting sqlx's default 30 s for a connection
        .acquire_timeout(std::time::Duration::from_secs(3))
}

/// `options` for a connection of a cluster node whose leases last `lease`: a transaction left
/// waiting for the node longer than a quarter of the lease is ended by the database
/// (`idle_in_transaction_session_timeout`), and with `lock_timeout` a statement waiting longer
/// than that for another transaction's lock fails rather than wait on a node that may be
/// paused (claims and heartbeats: `crate::cluster`).
pub fn cluster_session(
    options: sqlx::postgres::PgConnectOptions,
    lease: std::time::Duration,
    lock_timeout: bool,
) -> sqlx::postgres::PgConnectOptions {
    let quarter = (lease / 4).as_millis().max(1).to_string();
    let options = options.options([("idle_in_transaction_session_timeout", quarter.as_str())]);
    if lock_timeout {
        options.options([("lock_timeout", quarter.as_str())])
    } else {
        options
    }
}

impl AuditStore {
    /// Opens (and migrates) the store: PostgreSQL for a `postgres://` URL, SQLite for a
    /// `sqlite:` URL, and without a URL `audit.db` in `data_dir`.
    ///
    /// # Errors
    /// When the database cannot be reached, or its schema is newer than this binary.
    pub async fn open(url: Option<&str>, data_dir: &Path) -> anyhow::Result<Self> {
        match url {
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                let pool = postgres_pool()
                    .connect(url)
                    .await
                    .context("cannot connect to the PostgreSQL audit store")?;
                POSTGRES_MIGRATIONS
                    .run(&pool)
                    .await
                    .map_err(migration_error)?;
                Ok(AuditStore::Postgres(pool))
            }
            Some(url) if url.starts_with("sqlite:") => {
                let options = SqliteConnectOptions::from_str(url)?;
                let name = options.get_filename();
                // sqlx names an in-memory database `file:…`; `mode=memory` keeps one off disk
                let on_disk = !name.as_os_str().is_empty()
                    && !name.starts_with("file:")
                    && name != Path::new(":memory:")
                    && !url.contains("mode=memory");
                if on_disk {
                    create_private(name)?;
                }
                Self::sqlite(options).await
            }
            Some(other) => {
                // not the URL itself: it may carry a password
                let scheme = other.split_once(':').map_or("(none)", |(scheme, _)| scheme);
                anyhow::bail!(
                    "unsupported database URL scheme {scheme:?}: use postgres:// or sqlite:"
                )
            }
            None => {
                let path = data_dir.join("audit.db");
                create_private(&path)?;
                Self::sqlite(SqliteConnectOptions::new().filename(path)).await
            }
        }
    }

    /// The same store for a cluster node whose leases last `lease`: each connection ends a
    /// transaction left waiting for this node longer than a quarter of it
    /// (`idle_in_transaction_session_timeout`), so a node paused or cut off in the middle of a
    /// commit holds the rows it wrote — which the world's next owner may be writing too — for
    /// no longer than that. A SQLite store is returned as it is (a cluster refuses it).
    pub fn for_cluster(self, lease: std::time::Duration) -> Self {
        let AuditStore::Postgres(pool) = &self else {
            return self;
        };
        let options = cluster_session(pool.connect_options().as_ref().clone(), lease, false);
        let bounded = postgres_pool().connect_lazy_with(options);
        AuditStore::Postgres(bounded)
    }

    async fn sqlite(options: SqliteConnectOptions) -> anyhow::Result<Self> {
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
        Ok(AuditStore::Sqlite(pool, events))
    }

    /// Whether the store answers (one round trip on a connection of its pool).
    ///
    /// # Errors
    /// When it does not.
    pub async fn ping(&self) -> anyhow::Result<()> {
        on_pool!(self, pool => {
            sqlx::query("SELECT 1").execute(pool).await?;
        });
        Ok(())
    }

    /// The highest window id ever recorded (0 when none), so new windows never reuse an id.
    ///
    /// # Errors
    /// Database failures.
    pub async fn max_window_id(&self) -> anyhow::Result<u64> {
        let sql = "SELECT COALESCE(MAX(window_id), 0) FROM audit_windows";
        let max: i64 = match self {
            AuditStore::Sqlite(pool, _) => sqlx::query_scalar(sql).fetch_one(pool).await?,
            AuditStore::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await?,
        };
        Ok(max as u64)
    }

    /// The last sequence number and hash of a window (`None` for a new one).
    ///
    /// # Errors
    /// Database failures.
    pub async fn tail(&self, window: u64) -> anyhow::Result<Option<(u64, [u8; 32])>> {
        Ok(self
            .tail_at(window)
            .await?
            .map(|(seq, hash, _)| (seq, hash)))
    }

    /// [`AuditStore::tail`] and the last row's timestamp.
    ///
    /// # Errors
    /// Database failures.
    pub async fn tail_at(&self, window: u64) -> anyhow::Result<Option<(u64, [u8; 32], u64)>> {
        let sql = "SELECT seq, hash, at_ns FROM audit_events WHERE window_id = $1 \
                   ORDER BY seq DESC LIMIT 1";
        let Some(window_id) = bigint(window) else {
            return Ok(None);
        };
        let row: Option<(i64, Vec<u8>, i64)> = on_pool!(self, pool => {
            sqlx::query_as(sql).bind(window_id).fetch_optional(pool).await?
        });
        Ok(row.map(|(seq, hash, at_ns)| (seq as u64, hash32(&hash), at_ns as u64)))
    }

    /// Inserts rows (and the windows they create) and replaces snapshots, in one transaction,
    /// on a connection of the pool. The audit writer commits through a [`Committer`] instead.
    ///
    /// # Errors
    /// Database failures; nothing is stored then.
    pub async fn insert(&self, rows: &[NewRow], snapshots: &[Snapshot]) -> anyhow::Result<()> {
        Committer::new(self.clone()).insert(rows, snapshots).await
    }

    async fn acquire(&self) -> anyhow::Result<Held> {
        Ok(match self {
            AuditStore::Sqlite(pool, _) => Held::Sqlite(pool.acquire().await?),
            AuditStore::Postgres(pool) => Held::Postgres(pool.acquire().await?),
        })
    }

    /// Records a new world and the SHA-256 of its rank tokens; in a cluster, with the node
    /// that serves it (`(node id, whether that is the node calling, lease)`: epoch 1 when it
    /// is, 0 for a world the other node has yet to take up), in the same transaction.
    ///
    /// # Errors
    /// Database failures (nothing is stored then).
    pub async fn save_world(
        &self,
        world: &StoredWorld,
        owner: Option<(&str, bool, std::time::Duration)>,
    ) -> anyhow::Result<()> {
        on_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let written: Result<(), sqlx::Error> = async {
            sqlx::query("INSERT INTO worlds (name, nranks) VALUES ($1, $2)")
                .bind(&world.name)
                .bind(world.nranks as i32)
                .execute(&mut *tx)
                .await?;
            // after the worlds row: the lease row refers to it
            if let Some((node, here, ttl)) = owner {
                sqlx::query(
                    "INSERT INTO world_owners (world, node_id, epoch, lease_until) \
                     VALUES ($1, $2, $3, now() + make_interval(secs => $4))",
                )
                .bind(&world.name)
                .bind(node)
                .bind(i64::from(here))
                .bind(ttl.as_secs_f64())
                .execute(&mut *tx)
                .await?;
            }
            for (hash, rank) in &world.tokens {
                sqlx::query("INSERT INTO world_tokens (token_sha256, world, rank) VALUES ($1, $2, $3)")
                    .bind(hash.to_vec())
                    .bind(&world.name)
                    .bind(*rank as i32)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok(())
            }
            .await;
            end_transaction(tx, written).await?;
        });
        Ok(())
    }

    /// Whether a world of this name is stored.
    ///
    /// # Errors
    /// Database failures.
    pub async fn world_exists(&self, name: &str) -> anyhow::Result<bool> {
        let sql = "SELECT COUNT(*) FROM worlds WHERE name = $1";
        let count: i64 =
            on_pool!(self, pool => sqlx::query_scalar(sql).bind(name).fetch_one(pool).await?);
        Ok(count > 0)
    }

    /// Forgets a world and its tokens; its windows count as freed.
    ///
    /// # Errors
    /// Database failures.
    pub async fn delete_world(&self, name: &str) -> anyhow::Result<()> {
        on_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let written: Result<(), sqlx::Error> = async {
                for sql in [
                    "DELETE FROM world_tokens WHERE world = $1",
                    "DELETE FROM worlds WHERE name = $1",
                    "UPDATE window_specs SET freed = TRUE WHERE world = $1",
                ] {
                    sqlx::query(sql).bind(name).execute(&mut *tx).await?;
                }
                Ok(())
            }
            .await;
            end_transaction(tx, written).await?;
        });
        Ok(())
    }

    /// Records a window's shape (its creation event is in the log).
    ///
    /// # Errors
    /// Database failures.
    pub async fn save_window(&self, window: &StoredWindow) -> anyhow::Result<()> {
        let sql = "INSERT INTO window_specs (window_id, world, name, spec) VALUES ($1, $2, $3, $4)";
        on_pool!(self, pool => {
            sqlx::query(sql)
                .bind(window.id as i64)
                .bind(&window.world)
                .bind(&window.name)
                .bind(&window.spec)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Replaces a window's stored shape and info (after `MPI_Win_set_info`): a restart
    /// brings the window back with it.
    ///
    /// # Errors
    /// Database failures.
    pub async fn update_window_spec(&self, id: u64, spec: &str) -> anyhow::Result<()> {
        let sql = "UPDATE window_specs SET spec = $2 WHERE window_id = $1";
        on_pool!(self, pool => {
            sqlx::query(sql).bind(id as i64).bind(spec).execute(pool).await?;
        });
        Ok(())
    }

    /// Marks a window freed: a restart does not bring it back.
    ///
    /// # Errors
    /// Database failures.
    pub async fn free_window(&self, id: u64) -> anyhow::Result<()> {
        let sql = "UPDATE window_specs SET freed = TRUE WHERE window_id = $1";
        on_pool!(self, pool => {
            sqlx::query(sql).bind(id as i64).execute(pool).await?;
        });
        Ok(())
    }

    /// Every stored world with its token hashes, and every window not freed.
    ///
    /// # Errors
    /// Database failures.
    pub async fn directory(&self) -> anyhow::Result<(Vec<StoredWorld>, Vec<StoredWindow>)> {
        type Rows = (
            Vec<(String, i32)>,
            Vec<(Vec<u8>, String, i32)>,
            Vec<(i64, String, String, String)>,
        );
        let (worlds, tokens, windows): Rows = on_pool!(self, pool => (
            sqlx::query_as("SELECT name, nranks FROM worlds ORDER BY name")
                .fetch_all(pool)
                .await?,
            sqlx::query_as("SELECT token_sha256, world, rank FROM world_tokens")
                .fetch_all(pool)
                .await?,
            sqlx::query_as(
                "SELECT window_id, world, name, spec FROM window_specs \
                 WHERE freed = FALSE ORDER BY window_id",
            )
            .fetch_all(pool)
            .await?,
        ));
        let mut worlds: Vec<StoredWorld> = worlds
            .into_iter()
            .map(|(name, nranks)| StoredWorld {
                name,
                nranks: nranks as u32,
                tokens: Vec::new(),
            })
            .collect();
        for (hash, world, rank) in tokens {
            if let Some(entry) = worlds.iter_mut().find(|entry| entry.name == world) {
                entry.tokens.push((hash32(&hash), rank as u32));
            }
        }
        let windows = windows
            .into_iter()
            .map(|(id, world, name, spec)| StoredWindow {
                id: id as u64,
                world,
                name,
                spec,
            })
            .collect();
        Ok((worlds, windows))
    }

    /// The latest snapshot of each rank of `window`.
    ///
    /// # Errors
    /// Database failures.
    pub async fn snapshots(&self, window: u64) -> anyhow::Result<Vec<Snapshot>> {
        let sql = "SELECT CAST(rank AS BIGINT), seq, data FROM snapshots WHERE window_id = $1";
        let rows: Vec<(i64, i64, Vec<u8>)> = on_pool!(self, pool => {
            sqlx::query_as(sql).bind(window as i64).fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(rank, seq, data)| Snapshot {
                window,
                rank: rank as u32,
                seq: seq as u64,
                data,
            })
            .collect())
    }

    /// The highest session incarnation recorded per `(world, rank)`, so a restarted server
    /// never hands out an incarnation twice.
    ///
    /// # Errors
    /// Database failures.
    pub async fn incarnations(&self) -> anyhow::Result<Vec<(String, u32, u64)>> {
        let sql = "SELECT w.world, CAST(e.rank AS BIGINT), MAX(e.incarnation) FROM audit_events e \
                   JOIN audit_windows w ON w.window_id = e.window_id \
                   WHERE e.incarnation > 0 GROUP BY w.world, e.rank";
        let rows: Vec<(String, i64, i64)> = on_pool!(self, pool => {
            sqlx::query_as(sql).fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(world, rank, max)| (world, rank as u32, max as u64))
            .collect())
    }

    /// The latest timestamp in the log (0 when empty): a restarted server's clock continues
    /// after it, so timestamps stay monotonic per window.
    ///
    /// # Errors
    /// Database failures.
    pub async fn last_at_ns(&self) -> anyhow::Result<u64> {
        let sql = "SELECT COALESCE(MAX(at_ns), 0) FROM audit_events";
        let max: i64 = on_pool!(self, pool => sqlx::query_scalar(sql).fetch_one(pool).await?);
        Ok(max as u64)
    }

    /// Every recorded window with its event count.
    ///
    /// # Errors
    /// Database failures.
    pub async fn windows(&self) -> anyhow::Result<Vec<RecordedWindow>> {
        let sql = "SELECT w.window_id, w.world, w.name, \
                   (SELECT COUNT(*) FROM audit_events e WHERE e.window_id = w.window_id) \
                   FROM audit_windows w ORDER BY w.window_id";
        let rows: Vec<(i64, String, String, i64)> = match self {
            AuditStore::Sqlite(pool, _) => sqlx::query_as(sql).fetch_all(pool).await?,
            AuditStore::Postgres(pool) => sqlx::query_as(sql).fetch_all(pool).await?,
        };
        Ok(rows
            .into_iter()
            .map(|(id, world, name, events)| RecordedWindow {
                id: id as u64,
                world,
                name,
                events: events as u64,
            })
            .collect())
    }

    /// A window's rows with `seq >= from`, in stored order of sequence number.
    ///
    /// # Errors
    /// Database failures, or a body this version cannot read.
    pub async fn rows(&self, window: u64, from: u64) -> anyhow::Result<Vec<StoredRow>> {
        self.rows_where(window, "seq >= $2", from).await
    }

    /// A dynamic window's rows that attach or detach a region, with `seq < before`: what
    /// recovery reads of the log before the oldest snapshot (a snapshot holds bytes, not
    /// regions). A partial index keeps this cheap however long the log.
    ///
    /// # Errors
    /// Database failures, or a body this version cannot read.
    pub async fn region_rows(&self, window: u64, before: u64) -> anyhow::Result<Vec<StoredRow>> {
        // the index's own condition, word for word (both databases match it so)
        let condition = "seq < $2 AND kind IN ('region_attached', 'region_detached')";
        self.rows_where(window, condition, before).await
    }

    /// `window`'s rows where `condition` (on `seq` as `$2`, bound to `seq`) holds, in order of
    /// sequence number.
    async fn rows_where(
        &self,
        window: u64,
        condition: &str,
        seq: u64,
    ) -> anyhow::Result<Vec<StoredRow>> {
        let sql = format!(
            "SELECT seq, at_ns, CAST(rank AS BIGINT), incarnation, body, event, prev_hash, \
             hash, event_at, event_len \
             FROM audit_events WHERE window_id = $1 AND {condition} ORDER BY seq"
        );
        let (Some(window_id), Some(seq)) = (bigint(window), bigint(seq)) else {
            return Ok(Vec::new());
        };
        let raw: Vec<Raw> = on_pool!(self, pool => {
            sqlx::query_as(&sql)
                .bind(window_id)
                .bind(seq)
                .fetch_all(pool)
                .await?
        });
        self.stored_rows(window, raw).await
    }

    /// The rows of `window` as selected, with the events kept in the events file read from it.
    async fn stored_rows(&self, window: u64, raw: Vec<Raw>) -> anyhow::Result<Vec<StoredRow>> {
        let spans: Vec<(i64, i64)> = raw.iter().filter_map(|raw| raw.8.zip(raw.9)).collect();
        let mut read = if spans.is_empty() {
            Vec::new()
        } else {
            match self {
                AuditStore::Sqlite(_, Some(file)) => file.read(spans).await?,
                _ => spans
                    .iter()
                    .map(|_| {
                        Err(
                            "the row's event lies in an events file this store has none of"
                                .to_string(),
                        )
                    })
                    .collect(),
            }
        }
        .into_iter();
        Ok(raw
            .into_iter()
            .map(|raw| {
                let in_file = if raw.8.is_some() && raw.9.is_some() {
                    read.next()
                } else {
                    None
                };
                stored_row(window, raw, in_file)
            })
            .collect())
    }
}

/// A row as selected: seq (or cseq), at_ns, rank, incarnation, JSON body, binary event, hashes,
/// and where in the events file its event lies (offset, length).
type Raw = (
    i64,
    i64,
    i64,
    i64,
    Option<String>,
    Option<Vec<u8>>,
    Vec<u8>,
    Vec<u8>,
    Option<i64>,
    Option<i64>,
);

/// `raw` as a row; `in_file` is its event as read from the events file, when it lies there.
fn stored_row(
    window: u64,
    (seq, at_ns, rank, incarnation, json, binary, prev_hash, hash, _, _): Raw,
    in_file: Option<Result<Vec<u8>, String>>,
) -> StoredRow {
    // the schema's CHECK keeps exactly one; a row with none reads as empty JSON and fails
    // verification
    let (body, lost) = match (in_file, binary, json) {
        (Some(Ok(bytes)), ..) => (Body::Binary(bytes), None),
        // an event that cannot be read from the file is no bytes: its hash fails, verification
        // names its row
        (Some(Err(why)), ..) => (Body::Binary(Vec::new()), Some(why)),
        (None, Some(bytes), _) => (Body::Binary(bytes), None),
        (None, None, text) => (Body::Json(text.unwrap_or_default()), None),
    };
    // an unreadable body fails verification, which names its row; readers that act on events
    // refuse it (core's `readable`)
    let (event, unreadable) = match (lost, body.decode()) {
        (Some(why), _) => (Event::Detach, Some(why)),
        (None, Ok(event)) => (event, None),
        (None, Err(error)) => (Event::Detach, Some(error.message)),
    };
    StoredRow {
        record: AuditRecord {
            window,
            seq: seq as u64,
            at_ns: at_ns as u64,
            rank: rank as u32,
            incarnation: incarnation as u64,
            cseq: None,
            event,
        },
        unreadable,
        body,
        prev_hash,
        hash,
    }
}

/// Which client rows to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientRows {
    /// Every client row of the window.
    All,
    /// Rows `from..=to` of one chain.
    Range {
        /// The client's rank.
        rank: u32,
        /// Its session incarnation.
        incarnation: u64,
        /// The first cseq.
        from: u64,
        /// The last.
        to: u64,
    },
}

impl AuditStore {
    /// Rows clients persisted themselves for `window` (table `client_events`), ordered by rank,
    /// incarnation and cseq; `record.seq` is the cseq (the row's place in its own chain).
    ///
    /// # Errors
    /// Database failures.
    pub async fn client_rows(
        &self,
        window: u64,
        which: ClientRows,
    ) -> anyhow::Result<Vec<StoredRow>> {
        // clients keep every event in its row
        const COLUMNS: &str = "SELECT cseq, at_ns, CAST(rank AS BIGINT), incarnation, body, \
                               event, prev_hash, hash, CAST(NULL AS BIGINT), \
                               CAST(NULL AS BIGINT) FROM client_events WHERE window_id = $1";
        let (sql, chain) = match which {
            ClientRows::All => (format!("{COLUMNS} ORDER BY rank, incarnation, cseq"), None),
            ClientRows::Range {
                rank,
                incarnation,
                from,
                to,
            } => (
                format!(
                    "{COLUMNS} AND rank = $2 AND incarnation = $3 AND cseq >= $4 AND cseq <= $5 \
                     ORDER BY cseq"
                ),
                Some((rank, incarnation, from, to)),
            ),
        };
        let Some(window_id) = bigint(window) else {
            return Ok(Vec::new());
        };
        let chain = match chain {
            None => None,
            Some((rank, incarnation, from, to)) => {
                let (Some(incarnation), Some(from)) = (bigint(incarnation), bigint(from)) else {
                    return Ok(Vec::new());
                };
                Some((rank, incarnation, from, bigint(to).unwrap_or(i64::MAX)))
            }
        };
        macro_rules! fetch {
            ($pool:expr) => {{
                let mut query = sqlx::query_as::<_, Raw>(&sql).bind(window_id);
                if let Some((rank, incarnation, from, to)) = chain {
                    query = query
                        .bind(rank as i32)
                        .bind(incarnation)
                        .bind(from)
                        .bind(to);
                }
                query.fetch_all($pool).await?
            }};
        }
        let raw: Vec<Raw> = match self {
            AuditStore::Sqlite(pool, _) => fetch!(pool),
            AuditStore::Postgres(pool) => fetch!(pool),
        };
        // record.seq is the cseq: the row's place in its own chain
        self.stored_rows(window, raw).await
    }
}

/// Rows whose large events [`Committer::stage`] started writing: for
/// [`Committer::insert_staged`].
#[derive(Debug)]
pub struct Staged(Option<PendingAppend>);

/// The audit writer's own connection for its commits, taken from the store's pool once and
/// kept: a commit then goes straight to its connection (for SQLite, to that connection's
/// worker thread) without taking one from the pool and handing it back around every commit,
/// which cost a single-row SQLite commit 15–70 µs here (BENCHMARKS.md, "One connection for
/// the writer"). A connection whose commit failed is closed, not pooled again, and the next
/// commit takes a fresh one.
#[derive(Debug)]
pub struct Committer {
    store: AuditStore,
    held: Option<Held>,
}

#[derive(Debug)]
enum Held {
    Sqlite(PoolConnection<Sqlite>),
    Postgres(PoolConnection<Postgres>),
}

impl Committer {
    /// A committer over `store`; it takes its connection at the first commit.
    pub fn new(store: AuditStore) -> Self {
        Committer { store, held: None }
    }

    /// [`AuditStore::insert`] on the held connection.
    ///
    /// # Errors
    /// Database failures; nothing is stored then, and the connection is closed.
    pub async fn insert(&mut self, rows: &[NewRow], snapshots: &[Snapshot]) -> anyhow::Result<()> {
        self.insert_guarded(rows, snapshots, None).await
    }

    /// [`Committer::insert`], in a transaction that first checks `guard` (PostgreSQL only).
    ///
    /// # Errors
    /// [`Fenced`] (nothing is stored, the connection is kept) when the guard's leases are not
    /// this node's any more; otherwise as [`Committer::insert`].
    pub async fn insert_guarded(
        &mut self,
        rows: &[NewRow],
        snapshots: &[Snapshot],
        guard: Option<&Guard>,
    ) -> anyhow::Result<()> {
        let staged = self.stage(rows).await?;
        self.insert_staged(rows, staged, snapshots, guard).await
    }

    /// Starts writing the large events of `rows` to an SQLite store's events file on a
    /// blocking thread, and returns without waiting for the write: what needs only the
    /// rows' bodies is done, so their hashes may be filled in meanwhile. The rows, with the
    /// same bodies, then go to [`Committer::insert_staged`].
    ///
    /// # Errors
    /// The events file could not be opened, or no connection could be had.
    pub async fn stage(&mut self, rows: &[NewRow]) -> anyhow::Result<Staged> {
        let AuditStore::Sqlite(_, Some(file)) = &self.store else {
            return Ok(Staged(None));
        };
        if rows.iter().all(|row| in_file(row).is_none()) {
            return Ok(Staged(None));
        }
        let mut held = match self.held.take() {
            Some(held) => held,
            None => self.store.acquire().await?,
        };
        let begun = match &mut held {
            Held::Sqlite(conn) => file.append(conn, rows).await,
            Held::Postgres(_) => Ok(None),
        };
        self.held = Some(held);
        Ok(Staged(begun?))
    }

    /// [`Committer::insert_guarded`] of rows [`Committer::stage`]d: waits for their large
    /// events' write, then inserts them.
    ///
    /// # Errors
    /// As [`Committer::insert_guarded`].
    pub async fn insert_staged(
        &mut self,
        rows: &[NewRow],
        staged: Staged,
        snapshots: &[Snapshot],
        guard: Option<&Guard>,
    ) -> anyhow::Result<()> {
        if rows.is_empty() && snapshots.is_empty() {
            return Ok(());
        }
        let mut held = match self.held.take() {
            Some(held) => held,
            None => self.store.acquire().await?,
        };
        let inserted = match (&self.store, &mut held) {
            (AuditStore::Sqlite(..), Held::Sqlite(conn)) => {
                // the large events first, on disk before any row that points at them
                let placed = match staged.0 {
                    Some(pending) => pending.finish().await,
                    None => Ok(Vec::new()),
                };
                match placed {
                    Ok(placed) => insert_sqlite(conn, rows, &placed, snapshots, guard).await,
                    Err(error) => {
                        // the file failed, not the connection
                        self.held = Some(held);
                        return Err(error);
                    }
                }
            }
            (_, Held::Postgres(conn)) => insert_postgres(conn, rows, &[], snapshots, guard).await,
            (_, Held::Sqlite(conn)) => insert_sqlite(conn, rows, &[], snapshots, guard).await,
        };
        match inserted {
            Ok(()) => self.held = Some(held),
            // the connection is fine: the database refused the rows, on purpose
            Err(ref error) if error.is::<Fenced>() => self.held = Some(held),
            // it may be broken (a restarted PostgreSQL): closed rather than pooled again
            Err(_) => match &mut held {
                Held::Sqlite(conn) => conn.close_on_drop(),
                Held::Postgres(conn) => conn.close_on_drop(),
            },
        }
        inserted
    }
}

/// One INSERT into `audit_events` of `rows` (at most [`MAX_ROWS_PER_INSERT`]), padded with
/// rows of NULLs up to the next of [`SHAPES`], which the statement filters out before anything
/// is inserted: a batch of any length is one statement of at most 24 shapes, each prepared
/// once per connection and then served from sqlx's statement cache. Up to 16 rows a batch has
/// a shape of its own length, so the small commits that latency waits for bind no padding (with
/// powers of two only, a lock-put-unlock's 9 rows bound 7 rows of NULLs: 84 of 192 parameters,
/// each bound, copied for SQLite's thread, cleared and evaluated for nothing); above 16 the
/// shapes grow by halves of powers of two, so at most a third of a statement is padding. (With
/// one shape per length, nearly every group commit prepared a fresh multi-row statement, which
/// cost more than its fsync; with exact power-of-two pieces, a batch of 159 rows was six
/// statements inside BEGIN … COMMIT, eight round trips to the database instead of one.) The
/// statements' text is built once ([`padded_texts`]: `texts`), not for every commit.
///
/// With `file_columns` (SQLite) each row also binds `event_at` and `event_len`: `placed[i]`, when
/// row `i`'s event was written to the events file ([`EventFile::append`]; `placed` is empty
/// when none was), and then no `event`.
fn padded_insert<'a, DB: sqlx::Database>(
    texts: &'static [String],
    file_columns: bool,
    rows: &'a [NewRow],
    placed: &[Option<(i64, i64)>],
) -> sqlx::query::Query<'a, DB, <DB as sqlx::Database>::Arguments<'a>>
where
    Option<i64>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    Option<i32>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    Option<&'a str>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    Option<&'a [u8]>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    let index = shape_index(rows.len());
    let shape = SHAPES[index];
    let mut query = sqlx::query(texts[index].as_str());
    let padded = rows
        .iter()
        .map(Some)
        .chain(std::iter::repeat_n(None, shape - rows.len()));
    for (index, row) in padded.enumerate() {
        let in_file = row.and_then(|_| placed.get(index).copied().flatten());
        let (json, binary) = match row.map(|row| &row.body) {
            _ if in_file.is_some() => (None, None),
            Some(Body::Json(text)) => (Some(text.as_str()), None),
            Some(Body::Binary(bytes)) => (None, Some(bytes.as_slice())),
            None => (None, None),
        };
        query = query
            .bind(row.map(|row| row.record.window as i64))
            .bind(row.map(|row| row.record.seq as i64))
            .bind(row.map(|row| row.record.at_ns as i64))
            .bind(row.map(|row| row.record.rank as i32))
            .bind(row.map(|row| row.record.incarnation as i64))
            .bind(row.map(|row| row.record.event.kind()))
            .bind(json)
            .bind(binary)
            .bind(row.map(|row| row.prev_hash.as_slice()))
            .bind(row.map(|row| row.hash.as_slice()));
        if file_columns {
            query = query
                .bind(in_file.map(|(at, _)| at))
                .bind(in_file.map(|(_, len)| len));
        }
    }
    query
}

/// Columns of `audit_events` that [`padded_insert`] binds per row.
const PADDED_COLUMNS: &str =
    "window_id, seq, at_ns, rank, incarnation, kind, body, event, prev_hash, hash";

/// The same for SQLite, which may keep an event in the events file.
const PADDED_COLUMNS_SQLITE: &str = "window_id, seq, at_ns, rank, incarnation, kind, body, \
     event, prev_hash, hash, event_at, event_len";

/// The row counts of [`padded_insert`]'s statements: every length up to 16, then 24, 32, 48 …
/// [`MAX_ROWS_PER_INSERT`] (a power of two and one and a half times it).
const SHAPES: [usize; 24] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 32, 48, 64, 96, 128, 192, 256,
];

/// The index in [`SHAPES`] of the smallest shape that holds `rows` rows (1 ≤ `rows` ≤
/// [`MAX_ROWS_PER_INSERT`]).
fn shape_index(rows: usize) -> usize {
    SHAPES.partition_point(|&shape| shape < rows)
}

// the largest shape holds the most rows one INSERT carries
const _: () = assert!(SHAPES[SHAPES.len() - 1] == MAX_ROWS_PER_INSERT);

/// The text of [`padded_insert`]'s statement for each of [`SHAPES`], built once: formatting a
/// 128-row statement's 1 280 placeholders for every commit cost the audit writer a fifth of its
/// own instructions per commit (`valgrind --tool=callgrind`, BENCHMARKS.md). `VALUES` names its
/// columns `column1` … in SQLite and PostgreSQL alike.
fn padded_texts(columns: &str, placeholder: fn(usize) -> String) -> Vec<String> {
    let width = columns.split(',').count();
    SHAPES
        .iter()
        .map(|&shape| {
            let mut sql = format!("INSERT INTO audit_events ({columns}) SELECT * FROM (VALUES ");
            for row in 0..shape {
                if row > 0 {
                    sql.push_str(", ");
                }
                let first = row * width + 1;
                let placeholders: Vec<String> = (first..first + width).map(placeholder).collect();
                sql.push('(');
                sql.push_str(&placeholders.join(", "));
                sql.push(')');
            }
            sql.push_str(") AS batch WHERE column1 IS NOT NULL");
            sql
        })
        .collect()
}

/// [`padded_texts`] for SQLite: anonymous `?` placeholders, bound in order. (With `$n`, sqlx
/// looks each parameter's name up in SQLite, `sqlite3_bind_parameter_name`, a walk of the
/// statement's list of names: quadratic in the 2 560 parameters of a 256-row statement.)
static PADDED_INSERTS_SQLITE: std::sync::LazyLock<Vec<String>> =
    std::sync::LazyLock::new(|| padded_texts(PADDED_COLUMNS_SQLITE, |_| "?".to_string()));

/// [`padded_texts`] for PostgreSQL: `$1` … `$n`.
static PADDED_INSERTS_POSTGRES: std::sync::LazyLock<Vec<String>> =
    std::sync::LazyLock::new(|| padded_texts(PADDED_COLUMNS, |n| format!("${n}")));

/// What a commit in a cluster checks in its own transaction before it inserts anything: that
/// `node` still holds each world's lease at the epoch given (`crate::cluster`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guard {
    /// This node's id.
    pub node: String,
    /// `(world, epoch)` of every world the rows belong to.
    pub leases: Vec<(String, i64)>,
}

/// A guarded commit refused: another node holds these worlds now (or this node holds them at
/// a newer epoch). Nothing was stored.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("this node no longer holds the lease of {worlds:?}")]
pub struct Fenced {
    /// The worlds.
    pub worlds: Vec<String>,
}

/// The SQLSTATE with which the commit trigger of migration 0007 refuses a guarded commit.
const FENCED_SQLSTATE: &str = "OSFEN";

/// Names `guard`'s leases in the commit's transaction (a row of `commit_guards`, migration
/// 0007), whose deferred trigger checks them inside COMMIT — the lease rows are locked only
/// while the database completes the commit, never across a round trip to this node, so a node
/// paused or cut off between two statements of its commit keeps no other node's claim
/// waiting. The same statement reads the leases now, without locking them: a commit already
/// fenced is refused before its rows are sent.
async fn guard_postgres(conn: &mut PgConnection, guard: &Guard) -> anyhow::Result<()> {
    let (worlds, epochs): (Vec<&str>, Vec<i64>) = guard
        .leases
        .iter()
        .map(|(world, epoch)| (world.as_str(), *epoch))
        .unzip();
    let held: Vec<(String, i64)> = sqlx::query_as(
        "WITH named AS (INSERT INTO commit_guards (node_id, worlds, epochs) \
             VALUES ($1, $2, $3)) \
         SELECT world, epoch FROM world_owners WHERE node_id = $1 AND world = ANY($2)",
    )
    .bind(&guard.node)
    .bind(&worlds)
    .bind(&epochs)
    .fetch_all(&mut *conn)
    .await?;
    let fenced: Vec<String> = guard
        .leases
        .iter()
        .filter(|lease| !held.contains(lease))
        .map(|(world, _)| world.clone())
        .collect();
    if fenced.is_empty() {
        Ok(())
    } else {
        Err(Fenced { worlds: fenced }.into())
    }
}

/// A COMMIT's failure: [`Fenced`] when the commit trigger refused it (another node claimed a
/// world between the guard's first look and the commit), else the database's error.
fn commit_failed_postgres(error: sqlx::Error) -> anyhow::Error {
    if let Some(database) = error.as_database_error() {
        if database.code().as_deref() == Some(FENCED_SQLSTATE) {
            let worlds = database
                .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                .and_then(|error| error.detail())
                .and_then(|detail| serde_json::from_str::<Vec<String>>(detail).ok());
            if let Some(worlds) = worlds {
                return Fenced { worlds }.into();
            }
        }
    }
    error.into()
}

/// SQLite commits are never guarded.
fn commit_failed_sqlite(error: sqlx::Error) -> anyhow::Error {
    error.into()
}

/// A cluster needs PostgreSQL (`Cluster::join` refuses SQLite before any commit).
async fn guard_sqlite(_: &mut SqliteConnection, _: &Guard) -> anyhow::Result<()> {
    anyhow::bail!("a cluster needs PostgreSQL")
}

macro_rules! insert_fn {
    ($name:ident, $conn:ty, $db:ty, $guard:ident, $commit_failed:ident, $texts:ident, $file_columns:expr) => {
        /// `placed`: where [`EventFile::append`] put the rows' large events (empty: nowhere).
        async fn $name(
            conn: &mut $conn,
            rows: &[NewRow],
            placed: &[Option<(i64, i64)>],
            snapshots: &[Snapshot],
            guard: Option<&Guard>,
        ) -> anyhow::Result<()> {
            let creates = rows
                .iter()
                .any(|row| matches!(row.record.event, Event::WindowCreated { .. }));
            if snapshots.is_empty() && !creates && rows.len() <= MAX_ROWS_PER_INSERT && guard.is_none() {
                // one statement is its own transaction: no BEGIN and COMMIT round trips to the
                // database (sqlite's worker thread, or PostgreSQL over the network)
                padded_insert::<$db>(&$texts, $file_columns, rows, placed)
                    .persistent(true)
                    .execute(&mut *conn)
                    .await?;
                return Ok(());
            }
            let mut tx = conn.begin().await?;
            let written: anyhow::Result<()> = async {
            if let Some(guard) = guard {
                $guard(&mut *tx, guard).await?;
            }
            for snapshot in snapshots {
                sqlx::query(
                    "INSERT INTO snapshots (window_id, rank, seq, data) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (window_id, rank) DO UPDATE SET seq = excluded.seq, data = excluded.data",
                )
                .bind(snapshot.window as i64)
                .bind(snapshot.rank as i32)
                .bind(snapshot.seq as i64)
                .bind(snapshot.data.as_slice())
                .execute(&mut *tx)
                .await?;
            }
            for (index, chunk) in rows.chunks(MAX_ROWS_PER_INSERT).enumerate() {
                let first = index * MAX_ROWS_PER_INSERT;
                let placed = placed.get(first..).unwrap_or_default();
                let created: Vec<(u64, &str, &str)> = chunk
                    .iter()
                    .filter_map(|row| match &row.record.event {
                        Event::WindowCreated { world, name, .. } => {
                            Some((row.record.window, world.as_str(), name.as_str()))
                        }
                        _ => None,
                    })
                    .collect();
                if !created.is_empty() {
                    let mut query: QueryBuilder<'_, $db> =
                        QueryBuilder::new("INSERT INTO audit_windows (window_id, world, name) ");
                    query.push_values(created, |mut values, (id, world, name)| {
                        values.push_bind(id as i64).push_bind(world).push_bind(name);
                    });
                    query.build().execute(&mut *tx).await?;
                }
                padded_insert::<$db>(&$texts, $file_columns, chunk, placed)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok(())
            }
            .await;
            match written {
                Ok(()) => tx.commit().await.map_err($commit_failed)?,
                // ended now: a dropped transaction only queues its ROLLBACK for the
                // connection's next use, and a connection kept while the node is idle (a
                // fenced commit keeps it) would hold the transaction's locks until then
                Err(error) => {
                    if let Err(ending) = tx.rollback().await {
                        // not `Fenced` any more: the connection's state is unknown, so the
                        // committer closes it
                        return Err(anyhow::Error::new(ending).context(format!(
                            "cannot roll back a refused commit ({error:#})"
                        )));
                    }
                    return Err(error);
                }
            }
            Ok(())
        }
    };
}

/// The most rows one INSERT carries: a batch of at most this many, with no snapshot and no
/// new window, is one statement in autocommit; a larger one is several inside a transaction.
const MAX_ROWS_PER_INSERT: usize = 256;

insert_fn!(
    insert_sqlite,
    SqliteConnection,
    Sqlite,
    guard_sqlite,
    commit_failed_sqlite,
    PADDED_INSERTS_SQLITE,
    true
);
insert_fn!(
    insert_postgres,
    PgConnection,
    Postgres,
    guard_postgres,
    commit_failed_postgres,
    PADDED_INSERTS_POSTGRES,
    false
);

#[cfg(test)]
mod tests {
    use super::*;

    use onesided_core::audit::{chain_hash, verify, GENESIS};

    /// Rows `seqs` of `window`'s chain after `previous`, each a flush, hashed as the writer does.
    fn chained(
        window: u64,
        seqs: std::ops::RangeInclusive<u64>,
        previous: [u8; 32],
    ) -> Vec<NewRow> {
        let first = *seqs.start();
        let events = seqs.map(|seq| Event::Flush { origin: seq as u32 });
        chained_events(window, first, events, previous)
    }

    /// `events` as rows of `window`'s chain from `first` on, after `previous`, hashed as the
    /// writer does.
    fn chained_events(
        window: u64,
        first: u64,
        events: impl IntoIterator<Item = Event>,
        mut previous: [u8; 32],
    ) -> Vec<NewRow> {
        (first..)
            .zip(events)
            .map(|(seq, event)| {
                let record = AuditRecord {
                    window,
                    seq,
                    at_ns: seq * 10,
                    rank: (seq % 3) as u32,
                    incarnation: 1,
                    cseq: None,
                    event,
                };
                let body = Body::encode(&record.event);
                let hash = chain_hash(&previous, &record, &body);
                let row = NewRow {
                    record,
                    body,
                    prev_hash: previous,
                    hash,
                };
                previous = hash;
                row
            })
            .collect()
    }

    /// Every batch length gets the smallest shape that holds it: its own up to 16 rows, so a
    /// small commit binds no padding, and never more than half again as many rows above.
    #[test]
    fn a_batch_takes_the_smallest_shape_that_holds_it() {
        for rows in 1..=MAX_ROWS_PER_INSERT {
            let shape = SHAPES[shape_index(rows)];
            assert!(shape >= rows, "{rows} rows in a shape of {shape}");
            let smaller = shape_index(rows).checked_sub(1).map(|index| SHAPES[index]);
            assert!(smaller.is_none_or(|smaller| smaller < rows), "{rows} rows");
            if rows <= 16 {
                assert_eq!(shape, rows);
            } else {
                assert!(2 * shape <= 3 * rows, "{rows} rows padded to {shape}");
            }
        }
    }

    /// Batches of shapes' lengths, one past them and one short of them, each on a window of its
    /// own, are stored row for row — no padding row lands, none is lost — and the chains verify:
    /// in SQLite and in PostgreSQL, in one statement (up to 256 rows) and in a transaction.
    async fn padded_batches_store_exactly_their_rows(url: Option<&str>) {
        let dir = std::env::temp_dir().join(format!(
            "onesided-padded-{}-{}",
            std::process::id(),
            url.is_some()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let store = AuditStore::open(url, &dir).await.unwrap();
        let mut committer = Committer::new(store.clone());
        let lengths = [
            1, 2, 3, 5, 9, 15, 16, 17, 24, 25, 63, 64, 65, 128, 159, 192, 193, 255, 256, 257, 700,
        ];
        for (window, &len) in (1u64..).zip(lengths.iter()) {
            let rows = chained(window, 1..=len as u64, GENESIS);
            committer.insert(&rows, &[]).await.unwrap();
            let stored = store.rows(window, 1).await.unwrap();
            assert_eq!(stored.len(), len, "a batch of {len} rows");
            for (row, stored) in rows.iter().zip(&stored) {
                assert_eq!(stored.record, row.record, "a batch of {len} rows");
            }
            assert_eq!(verify(&stored), Ok(()), "a batch of {len} rows");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

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
        let AuditStore::Sqlite(pool, _) = &store else {
            panic!("not SQLite")
        };
        let primer: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE name = 'wal_primer'")
                .fetch_one(pool)
                .await
                .unwrap();
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

    /// A published block of `len` bytes, all `byte`.
    fn published(len: usize, byte: u8) -> Event {
        Event::Published {
            offset: 0,
            data: vec![byte; len],
        }
    }

    /// `(event IS NULL, event_len)` of each row of `window`, in order.
    async fn placements(pool: &SqlitePool, window: i64) -> Vec<(bool, Option<i64>)> {
        sqlx::query_as(
            "SELECT event IS NULL, event_len FROM audit_events WHERE window_id = $1 ORDER BY seq",
        )
        .bind(window)
        .fetch_all(pool)
        .await
        .unwrap()
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("onesided-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Large events are appended to `audit.db-events` once, their rows point at them, small ones
    /// stay in their rows; readers get every event's bytes back and the chain verifies, also
    /// after a restart, which appends after what is there — including bytes a crash left that
    /// no row points at.
    #[tokio::test]
    async fn large_events_are_written_once_beside_the_database() {
        large_events_are_written_once(true).await;
    }

    /// The same through the page cache, as on a file system that refuses `O_DIRECT`.
    #[tokio::test]
    async fn large_events_are_written_once_beside_the_database_without_o_direct() {
        large_events_are_written_once(false).await;
    }

    /// A store on `dir` whose events file tries `O_DIRECT` or not.
    async fn open_store(dir: &Path, direct: bool) -> AuditStore {
        match AuditStore::open(None, dir).await.unwrap() {
            AuditStore::Sqlite(pool, Some(_)) => {
                let mut file = EventFile::beside(&dir.join("audit.db"));
                file.direct = direct;
                AuditStore::Sqlite(pool, Some(Arc::new(file)))
            }
            _ => panic!("not SQLite on disk"),
        }
    }

    async fn large_events_are_written_once(direct: bool) {
        let dir = scratch(&format!("event-file-{direct}"));
        let store = open_store(&dir, direct).await;
        let AuditStore::Sqlite(pool, _) = &store else {
            panic!("not SQLite")
        };
        let used = || async {
            let pages: i64 = sqlx::query_scalar(
                "SELECT (SELECT page_count FROM pragma_page_count) \
                 - (SELECT freelist_count FROM pragma_freelist_count)",
            )
            .fetch_one(pool)
            .await
            .unwrap();
            pages * 4096
        };
        let before = used().await;
        let events = [
            published(FILE_EVENT_BYTES - 100, 1),
            Event::Flush { origin: 0 },
            published(1 << 20, 2),
            published(3 << 20, 3),
        ];
        let rows = chained_events(1, 1, events, GENESIS);
        let mut committer = Committer::new(store.clone());
        committer.insert(&rows, &[]).await.unwrap();
        if !direct {
            let AuditStore::Sqlite(_, Some(events)) = &store else {
                unreachable!()
            };
            let appender = events.appender.lock().await;
            assert!(
                matches!(*appender, Appender::Open { direct: None, .. }),
                "{appender:?}"
            );
        }
        let file = dir.join("audit.db-events");
        let large: Vec<usize> = rows[2..]
            .iter()
            .map(|row| match &row.body {
                Body::Binary(bytes) => bytes.len(),
                Body::Json(_) => unreachable!(),
            })
            .collect();
        // one write, padded to whole blocks
        assert_eq!(
            std::fs::metadata(&file).unwrap().len(),
            aligned(large.iter().sum::<usize>() as u64)
        );
        assert_eq!(
            placements(pool, 1).await,
            vec![
                (false, None),
                (false, None),
                (true, Some(large[0] as i64)),
                (true, Some(large[1] as i64)),
            ]
        );
        // the 4 MiB are not in the database: it grew by the small event's rows and pages
        let grown = used().await - before;
        assert!(grown < 1 << 20, "the database grew by {grown} bytes");
        let stored = store.rows(1, 1).await.unwrap();
        assert_eq!(verify(&stored), Ok(()));
        for (row, stored) in rows.iter().zip(&stored) {
            assert_eq!(stored.record, row.record);
            assert_eq!(stored.body, row.body);
        }
        let tail = rows[3].hash;
        drop(committer);
        pool.close().await;
        drop(store);

        // a crash after the file's write, before the rows' commit: bytes no row points at
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap()
            .write_all(&[0xee; 1000])
            .unwrap();
        let store = open_store(&dir, direct).await;
        let more = chained_events(1, 5, [published(FILE_EVENT_BYTES, 4)], tail);
        Committer::new(store.clone())
            .insert(&more, &[])
            .await
            .unwrap();
        let stored = store.rows(1, 1).await.unwrap();
        assert_eq!(stored.len(), 5);
        assert_eq!(verify(&stored), Ok(()));
        assert_eq!(stored[4].body, more[0].body);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The buffer one append wrote from serves the next: a smaller event after a larger one
    /// is written whole, read back as it was, and the rest of its last block is zeros, not
    /// the earlier event's bytes.
    #[tokio::test]
    async fn an_append_after_a_larger_one_writes_its_own_bytes_and_zeros() {
        let dir = scratch("event-file-kept");
        let store = open_store(&dir, true).await;
        let mut committer = Committer::new(store.clone());
        let first = chained_events(1, 1, [published(3 << 20, 0xaa)], GENESIS);
        committer.insert(&first, &[]).await.unwrap();
        let small = FILE_EVENT_BYTES + 1;
        let second = chained_events(1, 2, [published(small, 0x55)], first[0].hash);
        committer.insert(&second, &[]).await.unwrap();
        let stored = store.rows(1, 1).await.unwrap();
        assert_eq!(verify(&stored), Ok(()));
        assert_eq!(stored[0].body, first[0].body);
        assert_eq!(stored[1].body, second[0].body);
        let Body::Binary(encoded) = &second[0].body else {
            unreachable!()
        };
        let bytes = std::fs::read(dir.join("audit.db-events")).unwrap();
        let Body::Binary(earlier) = &first[0].body else {
            unreachable!()
        };
        let at = aligned(earlier.len() as u64) as usize;
        assert_eq!(&bytes[at..at + encoded.len()], &encoded[..]);
        assert_eq!(bytes.len(), at + aligned(encoded.len() as u64) as usize);
        assert!(
            bytes[at + encoded.len()..].iter().all(|byte| *byte == 0),
            "the padding holds stale bytes"
        );
        drop(committer);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A batch of more rows than one statement takes is inserted in pieces inside a
    /// transaction: each piece's rows point at their own events in the file, and a snapshot in
    /// the same commit is stored beside them.
    #[tokio::test]
    async fn large_events_in_a_batch_of_several_statements_point_at_their_own_bytes() {
        let dir = scratch("event-file-pieces");
        let store = AuditStore::open(None, &dir).await.unwrap();
        let large = [3usize, 255, 256, 299];
        let events = (0..300u32).map(|index| {
            if large.contains(&(index as usize)) {
                published(FILE_EVENT_BYTES + index as usize, index as u8)
            } else {
                Event::Flush { origin: index }
            }
        });
        let rows = chained_events(1, 1, events, GENESIS);
        let snapshot = Snapshot {
            window: 1,
            rank: 0,
            seq: 300,
            data: vec![7; 64],
        };
        Committer::new(store.clone())
            .insert(&rows, std::slice::from_ref(&snapshot))
            .await
            .unwrap();
        let AuditStore::Sqlite(pool, _) = &store else {
            panic!("not SQLite")
        };
        let placements = placements(pool, 1).await;
        for (index, (in_file, len)) in placements.iter().enumerate() {
            assert_eq!(*in_file, large.contains(&index), "row {index}");
            assert_eq!(len.is_some(), large.contains(&index), "row {index}");
        }
        let stored = store.rows(1, 1).await.unwrap();
        assert_eq!(verify(&stored), Ok(()));
        for (row, stored) in rows.iter().zip(&stored) {
            assert_eq!(stored.body, row.body, "seq {}", row.record.seq);
        }
        assert_eq!(store.snapshots(1).await.unwrap(), vec![snapshot]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A changed, cut or missing events file fails verification at the rows whose events it
    /// held, and only those; nothing panics and nothing reads as another event.
    #[tokio::test]
    async fn a_damaged_events_file_fails_verification_at_its_rows() {
        let dir = scratch("event-file-damaged");
        let store = AuditStore::open(None, &dir).await.unwrap();
        let events = [
            Event::Flush { origin: 0 },
            published(FILE_EVENT_BYTES, 1),
            published(FILE_EVENT_BYTES, 2),
        ];
        let rows = chained_events(1, 1, events, GENESIS);
        store.insert(&rows, &[]).await.unwrap();
        let file = dir.join("audit.db-events");
        let broken_at = |stored: &[StoredRow]| verify(stored).err();
        assert_eq!(broken_at(&store.rows(1, 1).await.unwrap()), None);

        // one byte of the third row's event changed: its last
        let AuditStore::Sqlite(pool, _) = &store else {
            panic!("not SQLite")
        };
        let (at, len): (i64, i64) = sqlx::query_as(
            "SELECT event_at, event_len FROM audit_events WHERE window_id = 1 AND seq = 3",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        let end = (at + len) as usize;
        let mut bytes = std::fs::read(&file).unwrap();
        let last = end - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&file, &bytes).unwrap();
        assert_eq!(broken_at(&store.rows(1, 1).await.unwrap()), Some(3));
        assert_eq!(broken_at(&store.rows(1, 1).await.unwrap()[..2]), None);

        // cut inside the third row's event
        bytes[last] ^= 0xff;
        std::fs::write(&file, &bytes[..end - 10]).unwrap();
        let stored = store.rows(1, 1).await.unwrap();
        assert!(stored[2]
            .unreadable
            .as_deref()
            .unwrap()
            .contains("past the end"));
        assert_eq!(broken_at(&stored), Some(3));

        // gone
        std::fs::remove_file(&file).unwrap();
        let stored = store.rows(1, 1).await.unwrap();
        assert!(stored[0].unreadable.is_none());
        assert!(stored[1]
            .unreadable
            .as_deref()
            .unwrap()
            .contains("cannot be read"));
        assert_eq!(broken_at(&stored), Some(2));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// While one process appends to a store's events file, another store on the same database
    /// keeps its large events in their rows (never two appenders at one end of the file).
    #[tokio::test]
    async fn a_second_appender_keeps_large_events_in_their_rows() {
        let dir = scratch("event-file-locked");
        let first = AuditStore::open(None, &dir).await.unwrap();
        let second = AuditStore::open(None, &dir).await.unwrap();
        let mut one = Committer::new(first.clone());
        let ones = chained_events(1, 1, [published(FILE_EVENT_BYTES, 1)], GENESIS);
        one.insert(&ones, &[]).await.unwrap();
        let Body::Binary(appended) = &ones[0].body else {
            unreachable!()
        };
        let rows = chained_events(2, 1, [published(FILE_EVENT_BYTES, 2)], GENESIS);
        Committer::new(second.clone())
            .insert(&rows, &[])
            .await
            .unwrap();
        let AuditStore::Sqlite(pool, _) = &second else {
            panic!("not SQLite")
        };
        assert_eq!(
            placements(pool, 1).await,
            vec![(true, Some(appended.len() as i64))]
        );
        assert_eq!(placements(pool, 2).await, vec![(false, None)]);
        for window in [1, 2] {
            let stored = first.rows(window, 1).await.unwrap();
            assert_eq!(verify(&stored), Ok(()));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn padded_batches_store_exactly_their_rows_in_sqlite() {
        padded_batches_store_exactly_their_rows(None).await;
    }

    /// A node paused (SIGSTOP) or cut off between two statements of a guarded commit keeps no
    /// other node's claim of the world waiting: the guard locks no lease row across a round
    /// trip. The commit, resumed after the claim, is refused at COMMIT and stores nothing
    /// (issue 43, item 10).
    #[tokio::test]
    async fn a_guarded_commit_paused_between_its_statements_holds_no_claim_back() {
        let database = onesided_test_support::PgDatabase::create().await;
        let store = AuditStore::open(Some(&database.url), Path::new("."))
            .await
            .unwrap();
        let world = StoredWorld {
            name: "paused".into(),
            nranks: 1,
            tokens: vec![([3; 32], 0)],
        };
        store
            .save_world(
                &world,
                Some(("node-a", true, std::time::Duration::from_secs(5))),
            )
            .await
            .unwrap();
        let AuditStore::Postgres(pool) = &store else {
            unreachable!()
        };
        let guard = Guard {
            node: "node-a".into(),
            leases: vec![("paused".into(), 1)],
        };
        // the commit's statements, as `insert_postgres` sends them, up to its COMMIT
        let mut conn = pool.acquire().await.unwrap();
        let mut tx = conn.begin().await.unwrap();
        guard_postgres(&mut tx, &guard).await.unwrap();
        let rows = chained(1, 1..=3, GENESIS);
        padded_insert::<Postgres>(&PADDED_INSERTS_POSTGRES, false, &rows, &[])
            .execute(&mut *tx)
            .await
            .unwrap();
        // … where the node stops; another node claims the world, waiting for no lock
        let mut other = PgConnection::connect(&database.url).await.unwrap();
        sqlx::query("SET lock_timeout = 1000")
            .execute(&mut other)
            .await
            .unwrap();
        let claimed = sqlx::query(
            "UPDATE world_owners SET node_id = 'node-b', epoch = epoch + 1 WHERE world = 'paused'",
        )
        .execute(&mut other)
        .await;
        assert!(
            claimed.is_ok(),
            "the claim waited on the paused commit: {claimed:?}"
        );
        // the node resumes: its commit is refused and nothing of it is stored
        let refused = tx
            .commit()
            .await
            .map_err(commit_failed_postgres)
            .unwrap_err();
        assert_eq!(
            refused.downcast_ref::<Fenced>(),
            Some(&Fenced {
                worlds: vec!["paused".into()]
            }),
            "{refused:#}"
        );
        assert!(store.rows(1, 1).await.unwrap().is_empty());
        // a commit under the current lease lands, and leaves no guard row behind
        let current = Guard {
            node: "node-b".into(),
            leases: vec![("paused".into(), 2)],
        };
        Committer::new(store.clone())
            .insert_guarded(&rows, &[], Some(&current))
            .await
            .unwrap();
        assert_eq!(store.rows(1, 1).await.unwrap().len(), 3);
        let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM commit_guards")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(left, 0);
    }

    #[tokio::test]
    async fn padded_batches_store_exactly_their_rows_in_postgres() {
        let database = onesided_test_support::PgDatabase::create().await;
        padded_batches_store_exactly_their_rows(Some(&database.url)).await;
    }
}
