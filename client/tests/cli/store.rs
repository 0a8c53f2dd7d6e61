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

    /// Rewrites the event of the one row of `table` that `filter` (a WHERE clause over
    /// `binds`) selects, as someone editing the store would: decodes it (either encoding),
    /// applies `change`, writes it back in the binary encoding, leaves the hashes as they
    /// were.
    pub fn rewrite_event(
        &self,
        server: &Server,
        table: &str,
        filter: &str,
        binds: &[i64],
        change: impl FnOnce(&mut onesided_core::audit::Event),
    ) {
        use onesided_core::audit::Body;
        use sqlx::Connection;
        let url = self.url(server);
        let select = format!("SELECT body, event FROM {table} WHERE {filter}");
        let update = format!(
            "UPDATE {table} SET body = NULL, event = ${} WHERE {filter}",
            binds.len() + 1
        );
        macro_rules! run {
            ($connection:ty) => {{
                let mut connection = <$connection>::connect(&url).await.unwrap();
                let mut query = sqlx::query_as::<_, (Option<String>, Option<Vec<u8>>)>(&select);
                for bind in binds {
                    query = query.bind(*bind);
                }
                let (json, binary) = query.fetch_one(&mut connection).await.unwrap();
                let body = match (binary, json) {
                    (Some(bytes), _) => Body::Binary(bytes),
                    (None, text) => Body::Json(text.unwrap()),
                };
                let mut event = body.decode().unwrap();
                change(&mut event);
                let Body::Binary(bytes) = Body::encode(&event) else {
                    unreachable!()
                };
                let mut query = sqlx::query(&update);
                for bind in binds {
                    query = query.bind(*bind);
                }
                let done = query.bind(bytes).execute(&mut connection).await.unwrap();
                connection.close().await.unwrap();
                assert_eq!(done.rows_affected(), 1, "{update}");
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
