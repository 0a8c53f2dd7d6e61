//! What the test suites share, so that each fix is made once: names unique among running
//! tests ([`unique`]), temporary directories removed on drop ([`TempDir`]), fresh
//! PostgreSQL databases dropped on drop ([`PgDatabase`]), on `ONESIDED_TEST_POSTGRES` or the
//! machine's PostgreSQL, a PostgreSQL server of a test's own that it may crash and restart
//! ([`private_postgres`]), a throwaway test PKI ([`Pki`]), and [`rewrite_event_sqlite`] /
//! [`rewrite_event_postgres`], how the tests tamper with a stored audit row ([`groups`]: with
//! an SQLite store's group rows, the default shape), and [`Launched`] /
//! [`run_to_exit`], how a suite runs a binary it built (each suite names its own binaries:
//! `env!("CARGO_BIN_EXE_…")` works only in the crate that owns them; [`server_binary`], the
//! command line the server is started with), and [`linearizable`], the
//! linearizability oracle the server's 64-client test checks its history with (a test's
//! oracle, not part of core's API). Dev-only: no crate depends on it outside its tests.
//!
//! It also runs the server in the test's process ([`in_process`]), with the configuration the
//! suite built, and sets up what the server's tests start from ([`fixture`]: a server in
//! process, a world attached to it through the real client, a server restarted on its files).
//! It must not decide how servers or clients are configured: the suites do that through the
//! real server and the real client, each in its own way (in process, or as a binary).

pub mod fixture;
pub mod groups;
pub mod in_process;
pub mod linearizable;
pub mod private_postgres;
pub mod server_binary;

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::sync::atomic::{AtomicU64, Ordering};

/// The PostgreSQL the suites create their databases on when `ONESIDED_TEST_POSTGRES` is unset.
pub const DEFAULT_POSTGRES: &str = "postgres://postgres@127.0.0.1:5432/postgres";

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A port of 127.0.0.1 nobody listens on now, for a program that must know its address before
/// it starts (a cluster node advertises it; a PostgreSQL is told it). Another process could
/// take it in between; on loopback, in a test, that has not happened.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

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
        Self::create_on(&admin_url).await
    }

    /// A fresh database on the PostgreSQL at `admin_url` (a URL whose user may create
    /// databases).
    pub async fn create_on(admin_url: &str) -> Self {
        let admin_url = admin_url.to_string();
        // the process id and a counter are unique among running tests; the clock keeps a
        // database left behind by a killed run with a reused process id from clashing
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let name = format!("{}_{nanos}", unique("onesided_test").replace('-', "_"));
        let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url)
            .await
            .unwrap_or_else(|error| {
                // a server that answers but wants a password (a stock Debian cluster:
                // scram-sha-256) fails here too: say which URL and why, not only "running"
                panic!(
                    "cannot connect to the tests' PostgreSQL at {admin_url} ({error}): it must \
                     run and accept that URL as it is (set ONESIDED_TEST_POSTGRES to one that \
                     does, with its password); scripts/test provides one"
                )
            });
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

/// A program the test started, its output (stdout and stderr) read line by line on threads of
/// its own so that it never blocks on a full pipe. Killed (SIGKILL) on drop unless it was
/// stopped or killed already: a failing test leaves no process behind.
#[derive(Debug)]
pub struct Launched {
    child: std::process::Child,
    /// What it printed up to and including the first line containing the `until` of
    /// [`Launched::start`].
    pub printed: Vec<String>,
    output: Vec<std::thread::JoinHandle<Vec<String>>>,
    ended: bool,
}

impl Launched {
    /// Starts `command` (its stdout and stderr are taken over) and waits, at most `within`,
    /// for a line containing `until`. Panics, with what it printed, when it exits first or the
    /// line does not come in time.
    pub fn start(
        mut command: std::process::Command,
        until: &str,
        within: std::time::Duration,
    ) -> Self {
        use std::io::{BufRead, BufReader};
        use std::process::Stdio;
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {command:?}: {error}"));
        let (lines, told) = std::sync::mpsc::channel::<String>();
        let reader = |pipe: Box<dyn std::io::Read + Send>,
                      lines: std::sync::mpsc::Sender<String>| {
            std::thread::spawn(move || {
                let mut all = Vec::new();
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    let _ = lines.send(line.clone());
                    all.push(line);
                }
                all
            })
        };
        let output = vec![
            reader(Box::new(child.stdout.take().unwrap()), lines.clone()),
            reader(Box::new(child.stderr.take().unwrap()), lines),
        ];
        let mut launched = Launched {
            child,
            printed: Vec::new(),
            output,
            ended: false,
        };
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match told.recv_timeout(left) {
                Ok(line) => {
                    let done = line.contains(until);
                    launched.printed.push(line);
                    if done {
                        return launched;
                    }
                }
                Err(why) => {
                    launched.kill();
                    panic!(
                        "{command:?} printed no line with {until:?} ({why}): {:#?}",
                        launched.printed
                    );
                }
            }
        }
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The value of the first `name=value` field in what it printed up to `until`.
    pub fn field(&self, name: &str) -> String {
        self.printed
            .iter()
            .find_map(|line| line.split(name).nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no {name} in {:#?}", self.printed))
            .to_string()
    }

    /// SIGKILL, and wait for it to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.ended = true;
    }

    /// SIGTERM, then waits at most `within` for it to exit (else SIGKILL and a panic); returns
    /// how it exited and everything it printed.
    pub fn terminate(
        mut self,
        within: std::time::Duration,
    ) -> (std::process::ExitStatus, Vec<String>) {
        let pid = self.child.id().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(sent.success(), "cannot send SIGTERM to {pid}");
        let deadline = std::time::Instant::now() + within;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() >= deadline {
                self.kill();
                panic!("{pid} did not exit within {within:?} of SIGTERM");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        self.ended = true;
        let output = std::mem::take(&mut self.output)
            .into_iter()
            .flat_map(|thread| thread.join().unwrap())
            .collect();
        (status, output)
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        if !self.ended {
            self.kill();
        }
    }
}

/// Runs `command` to its end, at most `within` (else SIGKILL and a panic), and returns what it
/// printed and how it exited.
pub fn run_to_exit(
    mut command: std::process::Command,
    within: std::time::Duration,
) -> std::process::Output {
    use std::process::Stdio;
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {command:?}: {error}"));
    let pid = child.id().to_string();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match finished.recv_timeout(within) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid])
                .status();
            panic!("{command:?} did not exit within {within:?}");
        }
    }
}
