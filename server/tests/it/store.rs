//! The audit stores the tests run against: the server's default SQLite file, and a fresh
//! database on the machine's PostgreSQL (trust auth on 127.0.0.1:5432, or
//! `ONESIDED_TEST_POSTGRES`), dropped when the test ends.

use onesided_server::ServerConfig;

use crate::{spawn_server_with, Fixture, TestServer};

pub use onesided_test_support::PgDatabase;

/// Where the server under test records.
#[derive(Debug)]
pub enum Store {
    /// `audit.db` in the server's data directory (the default), its commits writing one row
    /// per commit and window (the default shape).
    Sqlite,
    /// The same, its commits writing one row per event (`--audit-sqlite-rows per-event`, the
    /// shape of stores before issue 45).
    SqlitePerEvent,
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
            Store::SqlitePerEvent => onesided_server::audit::Rows::PerEvent,
            // the server's default (PostgreSQL ignores it)
            _ => ServerConfig::new("", "").sqlite_rows,
        }
    }

    /// The `--database-url` of a server recording here (`None`: the SQLite default).
    pub fn database_url(&self) -> Option<String> {
        match self {
            Store::Sqlite | Store::SqlitePerEvent => None,
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
            Store::Sqlite | Store::SqlitePerEvent => {
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
            Store::Sqlite | Store::SqlitePerEvent => {
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

/// What an SQLite store's group rows look like to the tests.
pub use onesided_test_support::groups::{group_holding, store_group, Entry, Group};

impl Connection {
    /// The group holding event `seq` of `window` (`None`: it lies in a row of `audit_events`,
    /// always so in PostgreSQL).
    pub async fn group_holding(&mut self, window: u64, seq: u64) -> Option<Group> {
        match self {
            Connection::Sqlite(connection) => {
                group_holding(connection, window as i64, seq as i64).await
            }
            Connection::Postgres(_) => None,
        }
    }

    /// Changes event `seq` of `window` by `change`, wherever the store keeps it (its row, or
    /// its entry in a group), the hashes left as they were.
    pub async fn rewrite_event_at(
        &mut self,
        window: u64,
        seq: u64,
        change: impl FnOnce(&mut onesided_core::audit::Event),
    ) {
        match self {
            Connection::Sqlite(connection) => {
                onesided_test_support::groups::rewrite_stored_event_sqlite(
                    connection,
                    window as i64,
                    seq as i64,
                    change,
                )
                .await
            }
            Connection::Postgres(_) => {
                self.rewrite_event(
                    "audit_events",
                    "window_id = $1 AND seq = $2",
                    &[window as i64, seq as i64],
                    change,
                )
                .await
            }
        }
    }

    /// Deletes event `seq` of `window` and nothing else, as someone editing the store would:
    /// its row, or its entry in a group, the group cut in two around it (each part keeping its
    /// events and hashes, the second part's previous hash the deleted event's hash).
    pub async fn delete_event(&mut self, window: u64, seq: u64) {
        let Some(mut group) = self.group_holding(window, seq).await else {
            let delete = "DELETE FROM audit_events WHERE window_id = $1 AND seq = $2";
            let binds = [window as i64, seq as i64];
            assert_eq!(self.execute(&[(delete, &binds)]).await, [1]);
            return;
        };
        let Connection::Sqlite(connection) = self else {
            unreachable!("only SQLite has groups")
        };
        let (seq, was_last) = (seq as i64, group.last_seq);
        // the columns the second part keeps as the cut group had them
        let (last_at_ns, regions, last_hash, file_end): (i64, i64, Vec<u8>, Option<i64>) =
            sqlx::query_as(
                "SELECT last_at_ns, regions, last_hash, file_end FROM audit_groups \
                 WHERE window_id = $1 AND last_seq = $2",
            )
            .bind(group.window)
            .bind(was_last)
            .fetch_one(&mut *connection)
            .await
            .unwrap();
        let mut after = group
            .entries
            .entries
            .split_off((seq - group.first_seq) as usize);
        let deleted = after.remove(0);
        if group.entries.entries.is_empty() {
            sqlx::query("DELETE FROM audit_groups WHERE window_id = $1 AND last_seq = $2")
                .bind(group.window)
                .bind(was_last)
                .execute(&mut *connection)
                .await
                .unwrap();
        } else {
            let mut before = group.clone();
            before.last_seq = seq - 1;
            store_group(connection, was_last, &before).await;
        }
        if !after.is_empty() {
            group.entries.entries = after;
            sqlx::query(
                "INSERT INTO audit_groups (window_id, first_seq, last_seq, last_at_ns, regions, \
                 prev_hash, last_hash, entries, file_end) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(group.window)
            .bind(seq + 1)
            .bind(was_last)
            .bind(last_at_ns)
            .bind(regions)
            .bind(deleted.hash.as_slice())
            .bind(last_hash.as_slice())
            .bind(prost::Message::encode_to_vec(&group.entries))
            .bind(file_end)
            .execute(&mut *connection)
            .await
            .unwrap();
        }
    }

    /// Swaps events `seq` and `seq + 1` of `window` where the store keeps them: their rows
    /// (through a free sequence number), or their entries in their groups.
    pub async fn swap_events(&mut self, window: u64, seq: u64) {
        let first = self.group_holding(window, seq).await;
        let second = self.group_holding(window, seq + 1).await;
        let (Some(mut first), Some(mut second)) = (first, second) else {
            let update = |from: &str, to: &str| {
                format!("UPDATE audit_events SET seq = {to} WHERE seq = {from} AND window_id = $3")
            };
            let swap = [update("$1", "-1"), update("$2", "$1"), update("-1", "$2")];
            let binds = [seq as i64, seq as i64 + 1, window as i64];
            let statements: Vec<(&str, &[i64])> =
                swap.iter().map(|sql| (sql.as_str(), &binds[..])).collect();
            assert_eq!(self.execute(&statements).await, [1, 1, 1]);
            return;
        };
        let Connection::Sqlite(connection) = self else {
            unreachable!("only SQLite has groups")
        };
        let (seq, next) = (seq as i64, seq as i64 + 1);
        if first.last_seq == second.last_seq {
            let at = (seq - first.first_seq) as usize;
            first.entries.entries.swap(at, at + 1);
        } else {
            std::mem::swap(first.entry(seq), second.entry(next));
            store_group(connection, second.last_seq, &second).await;
        }
        store_group(connection, first.last_seq, &first).await;
    }

    /// Makes the stored bytes of event `seq` of `window` `bytes` (its row's `event`, or its
    /// entry's), the hashes left as they were.
    pub async fn set_event_bytes(&mut self, window: u64, seq: u64, bytes: &[u8]) {
        if let Some(mut group) = self.group_holding(window, seq).await {
            let Connection::Sqlite(connection) = self else {
                unreachable!("only SQLite has groups")
            };
            group.entry(seq as i64).event = bytes.to_vec();
            return store_group(connection, group.last_seq, &group).await;
        }
        let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        let literal = match self {
            Connection::Sqlite(_) => format!("x'{hex}'"),
            Connection::Postgres(_) => format!("'\\x{hex}'::bytea"),
        };
        let sql =
            format!("UPDATE audit_events SET event = {literal} WHERE window_id = $1 AND seq = $2");
        let binds = [window as i64, seq as i64];
        assert_eq!(self.execute(&[(&sql, &binds)]).await, [1]);
    }

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
        if let Some(group) = self.group_holding(window, seq).await {
            let Connection::Sqlite(connection) = self else {
                unreachable!("only SQLite has groups")
            };
            return forge_in_group(connection, group, seq as i64, change).await;
        }
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

/// [`Connection::insert_forged_row`] where event `seq` lies in `group`: the forged entry goes
/// in before it, with the previous hash of the entry before and a hash computed correctly from
/// it; the group's range grows by one, and every later group and row of the window moves one
/// place up.
async fn forge_in_group(
    connection: &mut sqlx::SqliteConnection,
    mut group: Group,
    seq: i64,
    change: impl FnOnce(&mut onesided_core::audit::Event),
) {
    use onesided_core::audit::{chain_hash, AuditRecord, Body};
    use sqlx::Connection as _;
    let previous: [u8; 32] = group.prev_hash_of(seq).try_into().expect("a 32-byte hash");
    let original = group.entry(seq).clone();
    let mut event = Body::Binary(original.event.clone()).decode().unwrap();
    change(&mut event);
    let body = Body::encode(&event);
    let Body::Binary(bytes) = &body else {
        unreachable!("new bodies are binary")
    };
    let record = AuditRecord {
        window: group.window as u64,
        seq: seq as u64,
        at_ns: original.at_ns,
        rank: original.rank,
        incarnation: original.incarnation,
        cseq: None,
        event,
    };
    let forged = Entry {
        event: bytes.clone(),
        hash: chain_hash(&previous, &record, &body).to_vec(),
        ..original
    };
    let was_last = group.last_seq;
    group
        .entries
        .entries
        .insert((seq - group.first_seq) as usize, forged);
    group.last_seq += 1;
    // a write transaction from the start, as the row's forger takes
    let mut tx = connection.begin_with("BEGIN IMMEDIATE").await.unwrap();
    // make room after the group: through numbers nothing has, as the primary keys want
    for shift in [
        "UPDATE audit_groups SET first_seq = first_seq + 1000000, last_seq = last_seq + 1000000 \
         WHERE window_id = $1 AND first_seq > $2",
        "UPDATE audit_groups SET first_seq = first_seq - 999999, last_seq = last_seq - 999999 \
         WHERE window_id = $1 AND first_seq >= 1000000",
        "UPDATE audit_events SET seq = seq + 1000000 WHERE window_id = $1 AND seq > $2",
        "UPDATE audit_events SET seq = seq - 999999 WHERE window_id = $1 AND seq >= 1000000",
    ] {
        sqlx::query(shift)
            .bind(group.window)
            .bind(was_last)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    store_group(&mut tx, was_last, &group).await;
    tx.commit().await.unwrap();
}
