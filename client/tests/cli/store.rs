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

    /// Runs one statement against `server`'s store (`$1`, `$2`, … bound to `binds` in order)
    /// and returns the number of rows it changed: how the tests tamper with the log.
    pub fn execute(&self, server: &Server, sql: &str, binds: &[Bind<'_>]) -> u64 {
        use sqlx::Connection;
        let url = self.url(server);
        macro_rules! run {
            ($connection:ty) => {{
                let mut connection = <$connection>::connect(&url).await.unwrap();
                let mut query = sqlx::query(sql);
                for bind in binds {
                    query = match bind {
                        Bind::Int(value) => query.bind(*value),
                        Bind::Text(value) => query.bind(*value),
                    };
                }
                let done = query.execute(&mut connection).await.unwrap();
                connection.close().await.unwrap();
                done.rows_affected()
            }};
        }
        block_on(async {
            match self {
                Store::Sqlite => run!(sqlx::SqliteConnection),
                Store::Postgres(_) => run!(sqlx::PgConnection),
            }
        })
    }
}

/// A value bound to a statement of [`Store::execute`].
#[derive(Clone, Copy, Debug)]
pub enum Bind<'a> {
    Int(i64),
    Text(&'a str),
}
