//! The audit store: SQLite (an embedded file, the default) or PostgreSQL, with migrations
//! applied at start-up. The only place in the server that talks SQL. It writes the window
//! chains (`audit_events`) and reads the rows clients persisted themselves (`client_events`,
//! written by the client library).

use std::path::Path;
use std::str::FromStr;

use anyhow::Context;
use onesided_core::audit::{AuditRecord, Event, StoredRow};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Postgres, QueryBuilder, Sqlite};

static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");
static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

/// A row ready to insert.
#[derive(Clone, Debug)]
pub struct NewRow {
    /// The record.
    pub record: AuditRecord,
    /// Its JSON body.
    pub body: String,
    /// The previous row's hash.
    pub prev_hash: [u8; 32],
    /// This row's hash.
    pub hash: [u8; 32],
}

/// A recorded window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedWindow {
    /// Window id.
    pub id: u64,
    /// World name.
    pub world: String,
    /// Window name.
    pub name: String,
    /// Number of events.
    pub events: u64,
}

/// Where the audit log lives.
#[derive(Clone, Debug)]
pub enum AuditStore {
    /// An embedded SQLite file.
    Sqlite(SqlitePool),
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
    /// `sqlite:` URL, and without a URL `audit.db` in `data_dir`.
    ///
    /// # Errors
    /// When the database cannot be reached, or its schema is newer than this binary.
    pub async fn open(url: Option<&str>, data_dir: &Path) -> anyhow::Result<Self> {
        match url {
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                let pool = PgPoolOptions::new()
                    .max_connections(4)
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
                Self::sqlite(SqliteConnectOptions::from_str(url)?).await
            }
            Some(other) => {
                anyhow::bail!("unsupported database URL {other:?}: use postgres:// or sqlite:")
            }
            None => {
                let path = data_dir.join("audit.db");
                Self::sqlite(SqliteConnectOptions::new().filename(path)).await
            }
        }
    }

    async fn sqlite(options: SqliteConnectOptions) -> anyhow::Result<Self> {
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .context("cannot open the SQLite audit store")?;
        SQLITE_MIGRATIONS
            .run(&pool)
            .await
            .map_err(migration_error)?;
        Ok(AuditStore::Sqlite(pool))
    }

    /// The highest window id ever recorded (0 when none), so new windows never reuse an id.
    ///
    /// # Errors
    /// Database failures.
    pub async fn max_window_id(&self) -> anyhow::Result<u64> {
        let sql = "SELECT COALESCE(MAX(window_id), 0) FROM audit_windows";
        let max: i64 = match self {
            AuditStore::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await?,
            AuditStore::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await?,
        };
        Ok(max as u64)
    }

    /// The last sequence number and hash of a window (`None` for a new one).
    ///
    /// # Errors
    /// Database failures.
    pub async fn tail(&self, window: u64) -> anyhow::Result<Option<(u64, [u8; 32])>> {
        let sql =
            "SELECT seq, hash FROM audit_events WHERE window_id = $1 ORDER BY seq DESC LIMIT 1";
        let row: Option<(i64, Vec<u8>)> = match self {
            AuditStore::Sqlite(pool) => {
                sqlx::query_as(sql)
                    .bind(window as i64)
                    .fetch_optional(pool)
                    .await?
            }
            AuditStore::Postgres(pool) => {
                sqlx::query_as(sql)
                    .bind(window as i64)
                    .fetch_optional(pool)
                    .await?
            }
        };
        Ok(row.map(|(seq, hash)| {
            let mut fixed = [0u8; 32];
            let len = hash.len().min(32);
            fixed[..len].copy_from_slice(&hash[..len]);
            (seq as u64, fixed)
        }))
    }

    /// Inserts rows (and the windows they create) in one transaction.
    ///
    /// # Errors
    /// Database failures; nothing is stored then.
    pub async fn insert(&self, rows: &[NewRow]) -> anyhow::Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        match self {
            AuditStore::Sqlite(pool) => insert_sqlite(pool, rows).await,
            AuditStore::Postgres(pool) => insert_postgres(pool, rows).await,
        }
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
            AuditStore::Sqlite(pool) => sqlx::query_as(sql).fetch_all(pool).await?,
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
        let sql = "SELECT seq, at_ns, CAST(rank AS BIGINT), incarnation, body, prev_hash, hash FROM audit_events \
                   WHERE window_id = $1 AND seq >= $2 ORDER BY seq";
        type Raw = (i64, i64, i64, i64, String, Vec<u8>, Vec<u8>);
        let raw: Vec<Raw> = match self {
            AuditStore::Sqlite(pool) => {
                sqlx::query_as(sql)
                    .bind(window as i64)
                    .bind(from as i64)
                    .fetch_all(pool)
                    .await?
            }
            AuditStore::Postgres(pool) => {
                sqlx::query_as(sql)
                    .bind(window as i64)
                    .bind(from as i64)
                    .fetch_all(pool)
                    .await?
            }
        };
        Ok(raw
            .into_iter()
            .map(
                |(seq, at_ns, rank, incarnation, body, prev_hash, hash)| StoredRow {
                    record: AuditRecord {
                        window,
                        seq: seq as u64,
                        at_ns: at_ns as u64,
                        rank: rank as u32,
                        incarnation: incarnation as u64,
                        cseq: None,
                        // an unreadable body fails verification, which parses it again
                        event: Event::from_json(&body).unwrap_or(Event::Detach),
                    },
                    body,
                    prev_hash,
                    hash,
                },
            )
            .collect())
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
        const COLUMNS: &str = "SELECT cseq, at_ns, CAST(rank AS BIGINT), incarnation, body, \
                               prev_hash, hash FROM client_events WHERE window_id = $1";
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
        type Raw = (i64, i64, i64, i64, String, Vec<u8>, Vec<u8>);
        macro_rules! fetch {
            ($pool:expr) => {{
                let mut query = sqlx::query_as::<_, Raw>(&sql).bind(window as i64);
                if let Some((rank, incarnation, from, to)) = chain {
                    query = query
                        .bind(rank as i32)
                        .bind(incarnation as i64)
                        .bind(from as i64)
                        .bind(to as i64);
                }
                query.fetch_all($pool).await?
            }};
        }
        let raw: Vec<Raw> = match self {
            AuditStore::Sqlite(pool) => fetch!(pool),
            AuditStore::Postgres(pool) => fetch!(pool),
        };
        Ok(raw
            .into_iter()
            .map(
                |(cseq, at_ns, rank, incarnation, body, prev_hash, hash)| StoredRow {
                    record: AuditRecord {
                        window,
                        seq: cseq as u64,
                        at_ns: at_ns as u64,
                        rank: rank as u32,
                        incarnation: incarnation as u64,
                        cseq: None,
                        // an unreadable body fails verification, which parses it again
                        event: Event::from_json(&body).unwrap_or(Event::Detach),
                    },
                    body,
                    prev_hash,
                    hash,
                },
            )
            .collect())
    }
}

macro_rules! insert_fn {
    ($name:ident, $pool:ty, $db:ty) => {
        async fn $name(pool: &$pool, rows: &[NewRow]) -> anyhow::Result<()> {
            let mut tx = pool.begin().await?;
            for chunk in rows.chunks(500) {
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
                let mut query: QueryBuilder<'_, $db> = QueryBuilder::new(
                    "INSERT INTO audit_events \
                     (window_id, seq, at_ns, rank, incarnation, kind, body, prev_hash, hash) ",
                );
                query.push_values(chunk, |mut values, row| {
                    values
                        .push_bind(row.record.window as i64)
                        .push_bind(row.record.seq as i64)
                        .push_bind(row.record.at_ns as i64)
                        .push_bind(row.record.rank as i32)
                        .push_bind(row.record.incarnation as i64)
                        .push_bind(row.record.event.kind())
                        .push_bind(row.body.as_str())
                        .push_bind(row.prev_hash.to_vec())
                        .push_bind(row.hash.to_vec());
                });
                query.build().execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(())
        }
    };
}

insert_fn!(insert_sqlite, SqlitePool, Sqlite);
insert_fn!(insert_postgres, PgPool, Postgres);
