//! Integration tests: the real server on 127.0.0.1:0, driven through the real client.

mod audit;
mod backpressure;
mod binary;
mod cluster;
mod concurrency;
mod dynamic;
mod errors;
mod failure;
mod fence;
mod forum;
mod groups;
mod hostile;
mod identity;
mod legacy;
mod limits;
mod linearizable;
mod messages;
mod metrics;
mod pipelined;
mod promises;
mod protocol;
mod raw;
mod recovery;
mod requests;
mod secrets;
mod service;
mod store;
mod tls;
mod unified;
mod web;

use onesided_client::{Admin, Session, Window, WindowSpec};
use onesided_server::ServerConfig;
use onesided_test_support::in_process;

pub const ADMIN_TOKEN: &str = "test-admin-token";

/// A server running in this process until dropped.
#[derive(Debug)]
pub struct TestServer {
    pub url: String,
    pub admin: Admin,
    _served: in_process::Served,
    pub data: TempDir,
}

pub use onesided_test_support::{unique, Launched, TempDir};

/// The `onesided-server` binary this suite runs.
pub const SERVER_BINARY: &str = env!("CARGO_BIN_EXE_onesided-server");

/// The `onesided-server` binary on 127.0.0.1:0 with `data` as its data directory and `extra`
/// flags, logging at `log` without colour: what every suite that runs the binary starts from.
pub fn server_command(data: &TempDir, extra: &[&str], log: &str) -> std::process::Command {
    let mut command = std::process::Command::new(SERVER_BINARY);
    command
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data.0)
        .args(extra)
        .env("RUST_LOG", log)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null());
    command
}

/// The binary started as [`server_command`] says, up to the line containing `until` (at most
/// 60 s).
pub fn launch_server(data: &TempDir, extra: &[&str], log: &str, until: &str) -> Launched {
    Launched::start(
        server_command(data, extra, log),
        until,
        std::time::Duration::from_secs(60),
    )
}

/// [`launch_server`] up to the line saying where it listens, and its `http://` URL.
pub fn launch_server_listening(data: &TempDir, extra: &[&str], log: &str) -> (Launched, String) {
    let launched = launch_server(data, extra, log, "address=");
    let url = format!("http://{}", launched.field("address="));
    (launched, url)
}

pub async fn spawn_server() -> TestServer {
    spawn_server_with(|_| {}).await
}

/// A server whose default configuration (SQLite audit in a fresh data dir, sync durability)
/// `adjust` may change.
pub async fn spawn_server_with(adjust: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-it")));
    let mut config = ServerConfig::new(ADMIN_TOKEN, data.0.clone());
    adjust(&mut config);
    let served = in_process::serve(config).await;
    let admin = Admin::connect(&served.url, ADMIN_TOKEN).await.unwrap();
    // the first answer comes once the server runs (its audit store is open)
    admin.list_worlds().await.unwrap();
    TestServer {
        url: served.url.clone(),
        admin,
        _served: served,
        data,
    }
}

/// A world of `nranks` ranks with one window described by `spec`, attached: one session and
/// one window handle per rank.
#[derive(Debug)]
pub struct Fixture {
    pub server: TestServer,
    pub world: String,
    pub tokens: Vec<String>,
    pub sessions: Vec<Session>,
}

impl Fixture {
    pub async fn new(nranks: u32) -> Self {
        Self::on(spawn_server().await, nranks).await
    }

    /// A world of `nranks` on an already running server.
    pub async fn on(server: TestServer, nranks: u32) -> Self {
        Self::attached(server, nranks, None).await
    }

    /// [`Fixture::on`], every session writing its own audit events to the store at
    /// `database` itself.
    pub async fn persisting(server: TestServer, nranks: u32, database: &str) -> Self {
        Self::attached(server, nranks, Some(database)).await
    }

    async fn attached(server: TestServer, nranks: u32, database: Option<&str>) -> Self {
        let world = unique("world");
        let created = server.admin.create_world(&world, nranks).await.unwrap();
        let mut sessions = Vec::new();
        for token in &created.tokens {
            let builder = Session::builder(&server.url, token);
            let builder = match database {
                Some(database) => builder.audit_database_url(database),
                None => builder.ship_audit_events(),
            };
            let session = builder.attach().await.unwrap();
            assert_eq!(session.persists_audit_events(), database.is_some());
            sessions.push(session);
        }
        Fixture {
            server,
            world,
            tokens: created.tokens,
            sessions,
        }
    }

    /// Creates a window and opens it on every rank.
    pub async fn window(&self, spec: WindowSpec) -> Vec<Window> {
        self.server
            .admin
            .create_window(&self.world, &spec)
            .await
            .unwrap();
        let mut windows = Vec::new();
        for session in &self.sessions {
            windows.push(session.window(&spec.name).await.unwrap());
        }
        windows
    }
}

/// Runs one future per rank concurrently and returns their outputs in rank order; a panic in
/// any rank fails the test.
pub async fn ranks<T, F, Fut>(windows: Vec<Window>, body: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(u32, Window) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    let tasks: Vec<_> = windows
        .into_iter()
        .enumerate()
        .map(|(rank, window)| tokio::spawn(body(rank as u32, window)))
        .collect();
    let mut outputs = Vec::new();
    for task in tasks {
        outputs.push(task.await.expect("a rank panicked"));
    }
    outputs
}
