//! The audit stores the tests run against: the server's default SQLite file, and a fresh
//! database on the machine's PostgreSQL (trust auth on 127.0.0.1:5432, or
//! `ONESIDED_TEST_POSTGRES`), dropped when the test ends.

use onesided_server::ServerConfig;

use crate::{spawn_server_with, Fixture, TestServer};

pub use onesided_test_support::PgDatabase;

/// Where the server under test records.
#[derive(Debug)]
pub enum Store {
    /// `audit.db` in the server's data directory (the default).
    Sqlite,
    /// The same, its commits writing one row per commit and window (`--audit-sqlite-groups`).
    SqliteGroups,
    /// A fresh PostgreSQL database.
    Postgres(PgDatabase),
}

impl Store {
    pub async fn postgres() -> Self {
        Store::Postgres(PgDatabase::create().await)
    }

    /// How the server's commits write events.
    pub fn rows(&self) -> onesided_server::audit::Rows {
        match self {
            Store::SqliteGroups => onesided_server::audit::Rows::Groups,
            _ => onesided_server::audit::Rows::PerEvent,
        }
    }

    /// The `--database-url` of a server recording here (`None`: the SQLite default).
    pub fn database_url(&self) -> Option<String> {
        match self {
            Store::Sqlite | Store::SqliteGroups => None,
            Store::Postgres(database) => Some(database.url.clone()),
        }
    }

    /// A server recording into this store (SQLite: in its own data directory).
    pub async fn server(&self) -> TestServer {
        self.server_with(|_| {}).await
    }

    pub async fn server_with(&self, adjust: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let url = self.database_url();
        let rows = self.rows();
        spawn_server_with(move |config| {
            config.database_url = url;
            config.sqlite_rows = rows;
            adjust(config);
        })
        .await
    }

    /// A world of `nranks` on a server recording here ([`Store::server`]), its sessions
    /// persisting their own events here too when `persisting`, else shipping them.
    pub async fn fixture(&self, nranks: u32, persisting: bool) -> Fixture {
        let server = self.server().await;
        let database = persisting.then(|| self.url(&server));
        Fixture::attached(server, nranks, database.as_deref()).await
    }

    /// The URL of the store of a server whose data directory is `data`: what a client that
    /// persists its own events is given, and what the tests tamper through.
    pub fn url_in(&self, data: &std::path::Path) -> String {
        match self {
            Store::Sqlite | Store::SqliteGroups => {
                format!("sqlite:{}", data.join("audit.db").display())
            }
            Store::Postgres(database) => database.url.clone(),
        }
    }

    /// [`Store::url_in`] of `server`.
    pub fn url(&self, server: &TestServer) -> String {
        self.url_in(&server.data.0)
    }

    /// A connection to `server`'s store.
    pub async fn connect(&self, server: &TestServer) -> Connection {
        use sqlx::Connection as _;
        let url = self.url(server);
        match self {
            Store::Sqlite | Store::SqliteGroups => {
                Connection::Sqlite(sqlx::SqliteConnection::connect(&url).await.unwrap())
            }
            Store::Postgres(_) => {
                Connection::Postgres(sqlx::PgConnection::connect(&url).await.unwrap())
            }
        }
    }
}

/// A connection to the store under test, to tamper with it.
#[derive(Debug)]
pub enum Connection {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl Connection {
    /// [`onesided_test_support::rewrite_event_sqlite`] or `_postgres` on this connection.
    pub async fn rewrite_event(
        &mut self,
        table: &str,
        filter: &str,
        binds: &[i64],
        change: impl FnOnce(&mut onesided_core::audit::Event),
    ) {
        match self {
            Connection::Sqlite(connection) => {
                onesided_test_support::rewrite_event_sqlite(
                    connection, table, filter, binds, change,
                )
                .await
            }
            Connection::Postgres(connection) => {
                onesided_test_support::rewrite_event_postgres(
                    connection, table, filter, binds, change,
                )
                .await
            }
        }
    }

    /// Runs each statement (`$1`, `$2`, … bound to its integers in order) in one transaction
    /// and returns the number of rows each changed.
    pub async fn execute(&mut self, statements: &[(&str, &[i64])]) -> Vec<u64> {
        use sqlx::Connection as _;
        macro_rules! run {
            ($connection:expr) => {{
                let mut tx = $connection.begin().await.unwrap();
                let mut changed = Vec::new();
                for (sql, binds) in statements {
                    let mut query = sqlx::query(sql);
                    for value in *binds {
                        query = query.bind(*value);
                    }
                    changed.push(query.execute(&mut *tx).await.unwrap().rows_affected());
                }
                tx.commit().await.unwrap();
                changed
            }};
        }
        match self {
            Connection::Sqlite(connection) => run!(connection),
            Connection::Postgres(connection) => run!(connection),
        }
    }
}

impl Connection {
    /// Inserts a forged row into window `window`'s chain at `seq`, as someone who can write the
    /// store and knows how the chain is hashed would: every row from `seq` on moves one place
    /// up, and the new row — a copy of the row that was at `seq`, its event changed by
    /// `change` — gets the previous hash of the row before it and a hash computed correctly
    /// from it ([`onesided_core::audit::chain_hash`]).
    pub async fn insert_forged_row(
        &mut self,
        window: u64,
        seq: u64,
        change: impl FnOnce(&mut onesided_core::audit::Event),
    ) {
        use onesided_core::audit::{chain_hash, AuditRecord, Body};
        use sqlx::Connection as _;
        let (window, seq) = (window as i64, seq as i64);
        macro_rules! forge {
            ($tx:expr) => {{
                let mut tx = $tx.await.unwrap();
                let (previous,): (Vec<u8>,) = sqlx::query_as(
                    "SELECT hash FROM audit_events WHERE window_id = $1 AND seq = $2",
                )
                .bind(window)
                .bind(seq - 1)
                .fetch_one(&mut *tx)
                .await
                .unwrap();
                let (at_ns, rank, incarnation, kind, json, binary): (
                    i64,
                    i32,
                    i64,
                    String,
                    Option<String>,
                    Option<Vec<u8>>,
                ) = sqlx::query_as(
                    "SELECT at_ns, rank, incarnation, kind, body, event FROM audit_events \
                     WHERE window_id = $1 AND seq = $2",
                )
                .bind(window)
                .bind(seq)
                .fetch_one(&mut *tx)
                .await
                .unwrap();
                // make room: through numbers no row has, as the primary key wants
                for shift in [
                    "UPDATE audit_events SET seq = seq + 1000000 WHERE window_id = $1 AND seq >= $2",
                    "UPDATE audit_events SET seq = seq - 999999 WHERE window_id = $1 AND seq >= 1000000",
                ] {
                    sqlx::query(shift)
                        .bind(window)
                        .bind(seq)
                        .execute(&mut *tx)
                        .await
                        .unwrap();
                }
                let body = match (binary, json) {
                    (Some(bytes), _) => Body::Binary(bytes),
                    (None, text) => Body::Json(text.expect("a row with neither body nor event")),
                };
                let mut event = body.decode().unwrap();
                change(&mut event);
                let body = Body::encode(&event);
                let Body::Binary(bytes) = &body else {
                    unreachable!("new bodies are binary")
                };
                let record = AuditRecord {
                    window: window as u64,
                    seq: seq as u64,
                    at_ns: at_ns as u64,
                    rank: rank as u32,
                    incarnation: incarnation as u64,
                    cseq: None,
                    event,
                };
                let previous: [u8; 32] = previous.try_into().expect("a 32-byte hash");
                let hash = chain_hash(&previous, &record, &body);
                let inserted = sqlx::query(
                    "INSERT INTO audit_events \
                     (window_id, seq, at_ns, rank, incarnation, kind, body, event, prev_hash, hash) \
                     VALUES ($1, $2, $3, $4, $5, $6, NULL, $7, $8, $9)",
                )
                .bind(window)
                .bind(seq)
                .bind(at_ns)
                .bind(rank)
                .bind(incarnation)
                .bind(kind)
                .bind(bytes.clone())
                .bind(previous.to_vec())
                .bind(hash.to_vec())
                .execute(&mut *tx)
                .await
                .unwrap();
                assert_eq!(inserted.rows_affected(), 1);
                tx.commit().await.unwrap();
            }};
        }
        match self {
            // a write transaction from the start: a reader's lock cannot be upgraded while the
            // server writes
            Connection::Sqlite(connection) => forge!(connection.begin_with("BEGIN IMMEDIATE")),
            Connection::Postgres(connection) => forge!(connection.begin()),
        }
    }
}
