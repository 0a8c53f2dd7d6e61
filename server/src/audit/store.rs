//! The audit store: SQLite (an embedded file, the default) or PostgreSQL, with migrations
//! applied at start-up. It writes the window chains (`audit_events`) and reads the rows clients
//! persisted themselves (`client_events`, written by the client library). It runs all of the
//! server's SQL, the cluster's too (`cluster`: node and world leases, placement, the admin
//! token's hash, the token lookup of another node's world, window ids).
//!
//! Split by concern (issue 41): this file opens the store and holds what its parts share;
//! `log` reads the log, `directory` keeps the worlds and window specs, `commit` is the writer's
//! insert (`Committer`), `events_file` the SQLite store's file of large events, `sqlite`
//! and `postgres` what only one of the two databases has, and `cluster` the statements
//! `crate::cluster` runs (`ClusterStore`).
//!
//! Owns: the schema (the migrations of `migrations/postgres` and `migrations/sqlite`, run at
//! `open`, and the refusal of a schema newer than the binary); the choice of database by URL
//! (`AuditStore::open`); what the parts share (the `AuditStore` handle, the rows handed in,
//! `NewRow` and `Snapshot`, and `on_pool!`). Every other statement of the store is one of its
//! parts', each under its own contract. Must not (the store and all its parts): number, hash or
//! encode rows (the writer hands them ready, `NewRow`), decide what an event means or verify a
//! chain (core does), write `client_events` (clients do), decide who holds a lease (the cluster
//! does; the database's trigger enforces it), or retry a failed commit (the writer does).

mod cluster;
mod commit;
mod directory;
mod events_file;
mod groups;
mod log;
mod postgres;
mod sqlite;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use anyhow::Context;
use onesided_core::audit::{AuditRecord, Body};
use sqlx::postgres::PgPool;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};

pub use cluster::ClusterStore;
pub use commit::{Committer, Staged};
pub use directory::{StoredWindow, StoredWorld};
pub use events_file::{EventFile, FILE_EVENT_BYTES};
pub use log::ClientRows;
pub use postgres::{cluster_session, Fenced, Guard};
pub use sqlite::prime_wal;

use postgres::postgres_pool;
use sqlite::create_private;

static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");
static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

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
            AuditStore::Sqlite($pool, ..) => $body,
            AuditStore::Postgres($pool) => $body,
        }
    };
}

// the parts reach it as `super::on_pool`
use on_pool;

fn hash32(bytes: &[u8]) -> [u8; 32] {
    let mut fixed = [0u8; 32];
    let len = bytes.len().min(32);
    fixed[..len].copy_from_slice(&bytes[..len]);
    fixed
}

/// How an SQLite store's commits write events (readers read both, whichever wrote them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Rows {
    /// One `audit_events` row per event (the default before issue 45;
    /// `--audit-sqlite-rows per-event`).
    PerEvent,
    /// One `audit_groups` row per commit and window holding its events, those kept in the
    /// events file by where they lie there (the default, issue 45).
    #[default]
    Groups,
}

/// Where the audit log lives.
#[derive(Clone, Debug)]
pub enum AuditStore {
    /// An embedded SQLite file, its events file (`None` for a database in memory), and how
    /// commits write events.
    Sqlite(SqlitePool, Option<Arc<EventFile>>, Rows),
    /// A PostgreSQL database.
    Postgres(PgPool),
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

impl AuditStore {
    /// Opens (and migrates) the store: PostgreSQL for a `postgres://` URL, SQLite for a
    /// `sqlite:` URL, and without a URL `audit.db` in `data_dir`. An SQLite store opened so
    /// writes one row per event until [`AuditStore::writing`] says otherwise (the server says
    /// what its configuration does, [`Rows::Groups`] by default).
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

    /// The same store, its commits writing events as `rows` says (SQLite only: PostgreSQL
    /// keeps one row per event).
    pub fn writing(self, rows: Rows) -> Self {
        match self {
            AuditStore::Sqlite(pool, file, _) => AuditStore::Sqlite(pool, file, rows),
            other => other,
        }
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
}

/// A fresh, empty directory for a test's store, unique to `name` and this process.
#[cfg(test)]
pub(crate) fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("onesided-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg(test)]
impl AuditStore {
    /// The pool of a SQLite store, for tests that read its tables.
    pub(crate) fn sqlite_pool(&self) -> &sqlx::SqlitePool {
        let AuditStore::Sqlite(pool, ..) = self else {
            panic!("not SQLite")
        };
        pool
    }

    /// The one row `sql` reads from a SQLite store's tables, for tests.
    pub(crate) async fn sqlite_row<T>(&self, sql: &str) -> T
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> + Send + Unpin,
    {
        sqlx::query_as(sql)
            .fetch_one(self.sqlite_pool())
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"))
    }
}

/// Rows for the parts' tests, chained as the writer chains them.
#[cfg(test)]
mod tests {
    use super::*;

    use onesided_core::audit::{chain_hash, Event};

    /// Rows `seqs` of `window`'s chain after `previous`, each a flush, hashed as the writer does.
    pub(super) fn chained(
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
    pub(super) fn chained_events(
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
}
