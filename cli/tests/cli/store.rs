//! The audit stores the CLI tests run against: the server's default SQLite file, and a fresh
//! database on the machine's PostgreSQL (trust auth on 127.0.0.1:5432, or
//! `ONESIDED_TEST_POSTGRES`), dropped when the test ends.

use onesided_server::ServerConfig;

use crate::Server;

/// Runs `body` on a current-thread runtime of its own (the tests are synchronous).
fn block_on<T>(body: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(body)
}

pub use onesided_test_support::PgDatabase;

/// Where the server under test records.
#[derive(Debug)]
pub enum Store {
    /// `audit.db` in the server's data directory (the default).
    Sqlite,
    /// A fresh PostgreSQL database.
    Postgres(PgDatabase),
}

impl Store {
    pub fn postgres() -> Self {
        Store::Postgres(PgDatabase::create_blocking())
    }

    /// A server recording into this store (SQLite: its own data directory).
    pub fn server(&self) -> Server {
        self.server_with(|_| {})
    }

    pub fn server_with(&self, adjust: impl FnOnce(&mut ServerConfig)) -> Server {
        let url = match self {
            Store::Sqlite => None,
            Store::Postgres(database) => Some(database.url.clone()),
        };
        Server::start_with(move |config| {
            config.database_url = url;
            adjust(config);
        })
    }

    /// The URL of `server`'s store, as a client that persists its own events is given it.
    pub fn url(&self, server: &Server) -> String {
        match self {
            Store::Sqlite => format!("sqlite:{}", server.data_dir().join("audit.db").display()),
            Store::Postgres(database) => database.url.clone(),
        }
    }

    /// [`onesided_test_support::rewrite_event_sqlite`] or `_postgres` on `server`'s store.
    pub fn rewrite_event(
        &self,
        server: &Server,
        table: &str,
        filter: &str,
        binds: &[i64],
        change: impl FnOnce(&mut onesided_core::audit::Event),
    ) {
        use onesided_test_support::{rewrite_event_postgres, rewrite_event_sqlite};
        let url = self.url(server);
        block_on(async {
            match self {
                Store::Sqlite => {
                    let rewrite = async |connection: &mut sqlx::SqliteConnection| {
                        rewrite_event_sqlite(connection, table, filter, binds, change).await
                    };
                    connected(&url, rewrite).await
                }
                Store::Postgres(_) => {
                    let rewrite = async |connection: &mut sqlx::PgConnection| {
                        rewrite_event_postgres(connection, table, filter, binds, change).await
                    };
                    connected(&url, rewrite).await
                }
            }
        })
    }

    /// Changes event `seq` of `window` in `server`'s store by `change`, wherever it lies: its
    /// row of `audit_events`, or (SQLite, which writes groups by default) its entry in a group
    /// ([`onesided_test_support::groups::rewrite_stored_event_sqlite`]); hashes as they were.
    pub fn rewrite_window_event(
        &self,
        server: &Server,
        window: u64,
        seq: u64,
        change: impl FnOnce(&mut onesided_core::audit::Event),
    ) {
        use onesided_test_support::groups::rewrite_stored_event_sqlite;
        match self {
            Store::Sqlite => {
                let url = self.url(server);
                block_on(async {
                    let rewrite = async |connection: &mut sqlx::SqliteConnection| {
                        let (window, seq) = (window as i64, seq as i64);
                        // the default shape: the tests tamper with what it wrote
                        assert!(
                            onesided_test_support::groups::group_holding(connection, window, seq)
                                .await
                                .is_some(),
                            "event {seq} of window {window} is in no group"
                        );
                        rewrite_stored_event_sqlite(connection, window, seq, change).await
                    };
                    connected(&url, rewrite).await
                })
            }
            Store::Postgres(_) => self.rewrite_event(
                server,
                "audit_events",
                "window_id = $1 AND seq = $2",
                &[window as i64, seq as i64],
                change,
            ),
        }
    }
}

/// Runs `body` on a connection of its own to `url`, closed after it.
async fn connected<C: sqlx::Connection>(url: &str, body: impl AsyncFnOnce(&mut C)) {
    let mut connection = C::connect(url).await.unwrap();
    body(&mut connection).await;
    connection.close().await.unwrap();
}

/// The tests `on_sqlite` and `on_postgres` of `check(store)`, in a module named after it.
macro_rules! on_both_stores {
    ($check:ident) => {
        mod $check {
            use crate::store::Store;

            #[test]
            fn on_sqlite() {
                super::$check(Store::Sqlite);
            }

            #[test]
            fn on_postgres() {
                super::$check(Store::postgres());
            }
        }
    };
}

pub(crate) use on_both_stores;
