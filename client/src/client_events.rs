//! The client's side of the audit history, persisted by the client itself: when a session is
//! given a database URL, its local loads and stores, the returns of its blocking calls and its
//! flush_locals go to the `client_events` table of the server's audit store instead of over the
//! session. Each window has its own chain per session (window, rank, incarnation), `cseq`
//! gap-free from 1 and hashed with core's `chain_hash` from `GENESIS`; the session ships only a
//! marker (the cseq range and the hash of its last row), which the server logs in the window's
//! chain where the events would have gone.
//!
//! Owns: the client chains (numbering, hashes) and the background writer that commits them in
//! batches. Must not: create or migrate the schema (the server does), or touch `audit_events`.
//! The only place in the client that talks SQL.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use onesided_core::audit::{chain_hash, AuditRecord, Body, Event, GENESIS};
use onesided_proto::v1::ClientRows;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Postgres, QueryBuilder, Sqlite};
use tokio::sync::{mpsc, watch};

use crate::error::{Error, Result};

/// The environment variable that gives sessions a database URL when the builder gives none.
pub const AUDIT_DATABASE_URL_ENV: &str = "ONESIDED_AUDIT_DATABASE_URL";

/// Most rows in one INSERT statement.
const CHUNK: usize = 500;

/// Attempts of one batch before the writer gives up on it.
const ATTEMPTS: u32 = 3;

/// Pause between attempts (doubling).
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// SQLite: how long a write waits for the server's writer (or another client's) to let go.
const SQLITE_BUSY: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// One row to insert.
#[derive(Debug)]
struct Row {
    window: u64,
    /// The session's rank in the window (its place in the window's group).
    rank: u32,
    cseq: u64,
    at_ns: u64,
    kind: &'static str,
    /// As stored: protobuf bytes ([`Body::Binary`]) for every row written now.
    body: Body,
    prev_hash: [u8; 32],
    hash: [u8; 32],
}

/// Rows handed to the writer with their ticket (1, 2, … in hand-over order).
#[derive(Debug)]
struct Batch {
    ticket: u64,
    rows: Vec<Row>,
}

/// What the writer has done so far.
#[derive(Clone, Debug, Default)]
struct Progress {
    /// Every batch with a ticket up to this one was handled.
    handled: u64,
    /// Why a batch could not be stored (the first failure; later rows no longer chain up).
    failed: Option<String>,
}

/// Where a chain of one window stands.
#[derive(Debug, Clone, Copy)]
struct Tail {
    cseq: u64,
    hash: [u8; 32],
}

/// The session's writer of its own audit rows (cheap to clone).
#[derive(Clone)]
pub(crate) struct ClientEventWriter {
    inner: Arc<Inner>,
}

struct Inner {
    rank: u32,
    incarnation: u64,
    started: Instant,
    /// Per window: the last row of this session's chain. Held while the marker is queued, so
    /// markers leave in cseq order.
    tails: Mutex<HashMap<u64, Tail>>,
    submitted: AtomicU64,
    batches: mpsc::UnboundedSender<Batch>,
    progress: watch::Receiver<Progress>,
}

impl std::fmt::Debug for ClientEventWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientEventWriter")
            .field("rank", &self.inner.rank)
            .field("incarnation", &self.inner.incarnation)
            .field("submitted", &self.inner.submitted.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

fn store_error(what: &str, error: impl std::fmt::Display) -> Error {
    Error::AuditStore(format!("{what}: {error}"))
}

async fn connect(url: &str) -> Result<Pool> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .connect(url)
            .await
            .map_err(|e| store_error("cannot connect to the PostgreSQL audit store", e))?;
        return Ok(Pool::Postgres(pool));
    }
    if url.starts_with("sqlite:") {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| store_error("bad SQLite audit store URL", e))?
            // the server creates the store (and its schema); a missing file is a wrong URL
            .create_if_missing(false)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(SQLITE_BUSY);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(|e| store_error("cannot open the SQLite audit store", e))?;
        return Ok(Pool::Sqlite(pool));
    }
    Err(Error::AuditStore(
        "unsupported audit database URL: use postgres:// or sqlite:".into(),
    ))
}

/// Fails unless the store has the `client_events` table (the server's migration 0002).
async fn check_schema(pool: &Pool) -> Result<()> {
    let sql = "SELECT COUNT(*) FROM client_events WHERE 1 = 0";
    let probed: std::result::Result<i64, sqlx::Error> = match pool {
        Pool::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
        Pool::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
    };
    probed.map(drop).map_err(|error| {
        tracing::debug!(%error, "probing client_events failed");
        Error::AuditStore(
            "the audit database has no client_events table: onesided-server creates it when it \
             opens the store; point the server at this database first (or upgrade it)"
                .into(),
        )
    })
}

impl ClientEventWriter {
    /// Opens the store at `url` for the session of `rank`, `incarnation` and starts the
    /// writer.
    ///
    /// # Errors
    /// [`Error::AuditStore`] when the database cannot be reached or has no `client_events`.
    pub(crate) async fn open(url: &str, rank: u32, incarnation: u64) -> Result<Self> {
        let pool = connect(url).await?;
        check_schema(&pool).await?;
        let (batches, inbox) = mpsc::unbounded_channel();
        let (report, progress) = watch::channel(Progress::default());
        tokio::spawn(write(pool, incarnation, inbox, report));
        Ok(ClientEventWriter {
            inner: Arc::new(Inner {
                rank,
                incarnation,
                started: Instant::now(),
                tails: Mutex::new(HashMap::new()),
                submitted: AtomicU64::new(0),
                batches,
                progress,
            }),
        })
    }

    /// Appends `events` to this session's chain of `window`, where it is rank `rank` (ranks are
    /// numbered in the window's group), hands the rows to the writer, and calls `ship` with
    /// their marker — under the chain's lock, so markers are shipped in cseq order.
    pub(crate) fn append(
        &self,
        window: u64,
        rank: u32,
        events: Vec<Event>,
        ship: impl FnOnce(ClientRows),
    ) {
        if events.is_empty() {
            return;
        }
        let inner = &self.inner;
        let mut tails = inner
            .tails
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let tail = tails.entry(window).or_insert(Tail {
            cseq: 0,
            hash: GENESIS,
        });
        let from = tail.cseq + 1;
        let mut rows = Vec::with_capacity(events.len());
        for event in events {
            let record = AuditRecord {
                window,
                seq: tail.cseq + 1,
                at_ns: inner.started.elapsed().as_nanos() as u64,
                rank,
                incarnation: inner.incarnation,
                cseq: None,
                event,
            };
            let body = Body::encode(&record.event);
            let hash = chain_hash(&tail.hash, &record, &body);
            rows.push(Row {
                window,
                rank,
                cseq: record.seq,
                at_ns: record.at_ns,
                kind: record.event.kind(),
                body,
                prev_hash: tail.hash,
                hash,
            });
            *tail = Tail {
                cseq: record.seq,
                hash,
            };
        }
        let ticket = inner.submitted.fetch_add(1, Ordering::Relaxed) + 1;
        if inner.batches.send(Batch { ticket, rows }).is_err() {
            tracing::warn!("the client audit writer stopped; rows are lost");
        }
        ship(ClientRows {
            from,
            to: tail.cseq,
            hash: tail.hash.to_vec().into(),
        });
    }

    /// The ticket of the last batch handed over so far.
    pub(crate) fn submitted(&self) -> u64 {
        self.inner.submitted.load(Ordering::Relaxed)
    }

    /// Waits until every batch up to `ticket` is committed.
    ///
    /// # Errors
    /// [`Error::AuditStore`] when the writer could not store a batch.
    pub(crate) async fn committed(&self, ticket: u64) -> Result<()> {
        let mut progress = self.inner.progress.clone();
        let reached = progress
            .wait_for(|progress| progress.handled >= ticket || progress.failed.is_some())
            .await
            .map(|progress| progress.failed.clone());
        match reached {
            Ok(None) => Ok(()),
            Ok(Some(failed)) => Err(Error::AuditStore(failed)),
            Err(_) => Err(Error::AuditStore("the client audit writer stopped".into())),
        }
    }
}

/// The writer task: commits batches in hand-over order, as many as are waiting in one
/// transaction, until the session is gone and its last rows are stored.
async fn write(
    pool: Pool,
    incarnation: u64,
    mut inbox: mpsc::UnboundedReceiver<Batch>,
    report: watch::Sender<Progress>,
) {
    let mut waiting = Vec::new();
    while inbox.recv_many(&mut waiting, 64).await > 0 {
        let batches = std::mem::take(&mut waiting);
        let Some(last) = batches.last().map(|batch| batch.ticket) else {
            continue;
        };
        let rows: Vec<Row> = batches.into_iter().flat_map(|batch| batch.rows).collect();
        let attempts = ExponentialBuilder::default()
            .with_min_delay(RETRY_PAUSE)
            .with_factor(2.0)
            .without_max_delay()
            .with_max_times(ATTEMPTS as usize - 1);
        let outcome = (|| async {
            match &pool {
                Pool::Sqlite(pool) => insert_sqlite(pool, incarnation, &rows).await,
                Pool::Postgres(pool) => insert_postgres(pool, incarnation, &rows).await,
            }
        })
        .retry(attempts)
        .notify(|error, pause| {
            tracing::warn!(%error, ?pause, "storing client audit rows failed; retrying");
        })
        .await;
        report.send_modify(|progress| {
            progress.handled = last;
            if let Err(error) = outcome {
                tracing::error!(%error, rows = rows.len(), "client audit rows are lost");
                progress
                    .failed
                    .get_or_insert_with(|| format!("cannot store client audit rows: {error}"));
            }
        });
    }
}

macro_rules! insert_fn {
    ($name:ident, $pool:ty, $db:ty) => {
        async fn $name(
            pool: &$pool,
            incarnation: u64,
            rows: &[Row],
        ) -> std::result::Result<(), sqlx::Error> {
            let mut tx = pool.begin().await?;
            for chunk in rows.chunks(CHUNK) {
                let mut query: QueryBuilder<'_, $db> = QueryBuilder::new(
                    "INSERT INTO client_events \
                     (window_id, rank, incarnation, cseq, at_ns, kind, body, event, prev_hash, hash) ",
                );
                query.push_values(chunk, |mut values, row| {
                    let (json, binary) = match &row.body {
                        Body::Json(text) => (Some(text.as_str()), None),
                        Body::Binary(bytes) => (None, Some(bytes.as_slice())),
                    };
                    values
                        .push_bind(row.window as i64)
                        .push_bind(row.rank as i32)
                        .push_bind(incarnation as i64)
                        .push_bind(row.cseq as i64)
                        .push_bind(row.at_ns as i64)
                        .push_bind(row.kind)
                        .push_bind(json)
                        .push_bind(binary)
                        .push_bind(row.prev_hash.as_slice())
                        .push_bind(row.hash.as_slice());
                });
                query.build().execute(&mut *tx).await?;
            }
            tx.commit().await
        }
    };
}

insert_fn!(insert_sqlite, SqlitePool, Sqlite);
insert_fn!(insert_postgres, PgPool, Postgres);
