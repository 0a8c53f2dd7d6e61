//! What the test suites share, so that each fix is made once: names unique among running
//! tests ([`unique`]), temporary directories removed on drop ([`TempDir`]), fresh
//! PostgreSQL databases dropped on drop ([`PgDatabase`]), on `ONESIDED_TEST_POSTGRES` or the
//! machine's PostgreSQL, a throwaway test PKI ([`Pki`]), and [`rewrite_event_sqlite`] /
//! [`rewrite_event_postgres`], how the tests tamper with a stored audit row. Dev-only: no crate
//! depends on it outside its tests.
//!
//! It must not start servers or clients: the suites do that through the real server and the
//! real client, each in its own way (in process, or as a binary).

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::sync::atomic::{AtomicU64, Ordering};

/// The PostgreSQL the suites create their databases on when `ONESIDED_TEST_POSTGRES` is unset.
pub const DEFAULT_POSTGRES: &str = "postgres://postgres@127.0.0.1:5432/postgres";

static NEXT: AtomicU64 = AtomicU64::new(0);

/// `prefix-PID-N`: unique among the tests running on this machine.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A directory removed, with what it holds, on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl Default for TempDir {
    fn default() -> Self {
        TempDir::new()
    }
}

impl TempDir {
    /// A new, empty directory under the system's temporary directory.
    pub fn new() -> Self {
        TempDir::created(&unique("onesided-test"))
    }

    /// A new, empty directory named `name` under the system's temporary directory.
    pub fn created(name: &str) -> Self {
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `text` to `name` inside and returns its path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh PostgreSQL database, dropped on drop whether the test passed or not (`WITH
/// (FORCE)`: a server of the test may still hold connections).
#[derive(Debug)]
pub struct PgDatabase {
    admin_url: String,
    name: String,
    /// Its URL.
    pub url: String,
}

impl PgDatabase {
    /// Creates one on `ONESIDED_TEST_POSTGRES` (a URL whose user may create databases), or on
    /// [`DEFAULT_POSTGRES`]. Panics when PostgreSQL cannot be reached.
    pub async fn create() -> Self {
        let admin_url =
            std::env::var("ONESIDED_TEST_POSTGRES").unwrap_or_else(|_| DEFAULT_POSTGRES.into());
        // the process id and a counter are unique among running tests; the clock keeps a
        // database left behind by a killed run with a reused process id from clashing
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let name = format!("{}_{nanos}", unique("onesided_test").replace('-', "_"));
        let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url)
            .await
            .expect("PostgreSQL must be running for these tests (see .ci/run)");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut connection)
            .await
            .unwrap();
        let base = admin_url
            .rsplit_once('/')
            .map_or(admin_url.as_str(), |(base, _)| base);
        let url = format!("{base}/{name}");
        PgDatabase {
            admin_url,
            name,
            url,
        }
    }

    /// [`PgDatabase::create`] for a test without a runtime.
    pub fn create_blocking() -> Self {
        on_own_runtime(PgDatabase::create())
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        // a drop cannot await, and may run inside a runtime or outside one
        on_own_runtime(async move {
            if let Ok(mut connection) =
                <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url).await
            {
                let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut connection)
                    .await;
            }
        });
    }
}

/// Runs `work` to completion on a current-thread runtime of its own, on a thread of its own:
/// callable from a test's runtime as from a plain `#[test]`.
fn on_own_runtime<T: Send + 'static>(
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(work)
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// A throwaway CA and a server certificate from it, as PEM.
#[derive(Debug)]
pub struct Pki {
    /// The CA's certificate: what a client is told to trust.
    pub ca_pem: String,
    /// The server's certificate.
    pub cert_pem: String,
    /// The server's private key.
    pub key_pem: String,
}

impl Pki {
    /// A CA, and a certificate from it for `names` (DNS names or IP addresses).
    pub fn new(names: &[&str]) -> Pki {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "onesided test CA");
        let ca_key = KeyPair::generate().unwrap();
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let issuer = Issuer::new(ca, ca_key);
        let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
        let leaf = CertificateParams::new(names).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert_pem = leaf.signed_by(&key, &issuer).unwrap().pem();
        Pki {
            ca_pem,
            cert_pem,
            key_pem: key.serialize_pem(),
        }
    }
}

/// Rewrites the event of the one row of `table` that `filter` (a WHERE clause over `binds`, as
/// `$1`, `$2`, …) selects, as someone editing the store would: decodes it (either encoding),
/// applies `change`, writes it back in the binary encoding, leaves the hashes as they were.
macro_rules! rewrite_event {
    ($name:ident, $connection:ty) => {
        pub async fn $name(
            connection: &mut $connection,
            table: &str,
            filter: &str,
            binds: &[i64],
            change: impl FnOnce(&mut onesided_core::audit::Event),
        ) {
            use onesided_core::audit::Body;
            let select = format!("SELECT body, event FROM {table} WHERE {filter}");
            let update = format!(
                "UPDATE {table} SET body = NULL, event = ${} WHERE {filter}",
                binds.len() + 1
            );
            let mut query = sqlx::query_as::<_, (Option<String>, Option<Vec<u8>>)>(&select);
            for bind in binds {
                query = query.bind(*bind);
            }
            let (json, binary) = query.fetch_one(&mut *connection).await.unwrap();
            let body = match (binary, json) {
                (Some(bytes), _) => Body::Binary(bytes),
                (None, text) => Body::Json(text.expect("a row with neither body nor event")),
            };
            let mut event = body.decode().unwrap();
            change(&mut event);
            let Body::Binary(bytes) = Body::encode(&event) else {
                unreachable!("new bodies are binary")
            };
            let mut query = sqlx::query(&update);
            for bind in binds {
                query = query.bind(*bind);
            }
            let done = query.bind(bytes).execute(&mut *connection).await.unwrap();
            assert_eq!(done.rows_affected(), 1, "{update}");
        }
    };
}

rewrite_event!(rewrite_event_sqlite, sqlx::SqliteConnection);
rewrite_event!(rewrite_event_postgres, sqlx::PgConnection);
