//! The server in the test's process with a world on it, driven through the real client: what
//! the server's integration tests start from again and again. [`TestServer`] (a fresh data
//! directory, the server's default configuration as the test adjusts it, an admin client),
//! [`Fixture`] (a world whose ranks are attached, and windows opened on every rank), [`ranks`]
//! (one task per rank), [`Restartable`] (a server stopped and started again on the same
//! files, the recovery tests' own), [`world_with`] and [`attached_window`] (a world and its
//! windows created through an admin client, a rank's session and window), [`get_shared`] (a
//! read under a shared lock) and [`poll_until`] (a value polled until it is as awaited).
//!
//! Owns: starting the server in process and waiting for its first answer, attaching a world's
//! sessions, naming its windows. Must not: configure the server or a session beyond what the
//! test asks (the test's `adjust`, the database a session persists to), or check anything the
//! test means to check.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use onesided_client::{
    Admin, Audit, Element, Endpoint, LockType, Session, Window, WindowSpec, WorldTokens,
};
use onesided_server::ServerConfig;
use tokio::net::TcpListener;

use crate::in_process::{self, Served};
use crate::{unique, TempDir};

/// The admin token of every server these fixtures start.
pub const ADMIN_TOKEN: &str = "test-admin-token";

/// A server running in this process until dropped.
#[derive(Debug)]
pub struct TestServer {
    /// The URL its clients connect to.
    pub url: String,
    /// An admin client of it.
    pub admin: Admin,
    _served: Served,
    /// Its data directory.
    pub data: TempDir,
}

impl TestServer {
    /// Serves `config` (whose data directory is `data`) in this process, and returns once it
    /// answers a client connecting to `endpoint` of the address it listens on (its audit store
    /// is open then).
    pub async fn start(
        data: TempDir,
        config: ServerConfig,
        endpoint: impl FnOnce(SocketAddr) -> Endpoint,
    ) -> Self {
        let served = in_process::serve(config).await;
        let endpoint = endpoint(served.addr);
        let url = endpoint.url().to_string();
        let admin = first_answer(endpoint).await;
        TestServer {
            url,
            admin,
            _served: served,
            data,
        }
    }
}

/// An admin client of the server at `endpoint`, once the server answered it.
async fn first_answer(endpoint: impl Into<Endpoint>) -> Admin {
    let admin = Admin::connect(endpoint, ADMIN_TOKEN).await.unwrap();
    admin.list_worlds().await.unwrap();
    admin
}

/// A server with the default configuration (SQLite audit in a fresh data dir, sync
/// durability).
pub async fn spawn_server() -> TestServer {
    spawn_server_with(|_| {}).await
}

/// A server whose default configuration (SQLite audit in a fresh data dir, sync durability)
/// `adjust` may change.
pub async fn spawn_server_with(adjust: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-it")));
    let mut config = ServerConfig::new(ADMIN_TOKEN, data.0.clone());
    adjust(&mut config);
    TestServer::start(data, config, |addr| Endpoint::new(format!("http://{addr}"))).await
}

/// A world of `nranks` ranks on a server, attached: one session per rank.
#[derive(Debug)]
pub struct Fixture {
    /// The server.
    pub server: TestServer,
    /// The world's name.
    pub world: String,
    /// Each rank's token.
    pub tokens: Vec<String>,
    /// Each rank's session.
    pub sessions: Vec<Session>,
}

impl Fixture {
    /// A world of `nranks` on a new server ([`spawn_server`]).
    pub async fn new(nranks: u32) -> Self {
        Self::on(spawn_server().await, nranks).await
    }

    /// [`Fixture::new`], and a window of `count` elements of `T` on every rank
    /// ([`Fixture::window_of`]).
    pub async fn with_window<T: Element>(nranks: u32, count: u64) -> (Self, Vec<Window>) {
        let fixture = Self::new(nranks).await;
        let windows = fixture.window_of::<T>(count).await;
        (fixture, windows)
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

    /// [`Fixture::persisting`] to `database` when there is one, else [`Fixture::on`] (the
    /// sessions ship their events to the server).
    pub async fn attached(server: TestServer, nranks: u32, database: Option<&str>) -> Self {
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

    /// The number of ranks.
    pub fn nranks(&self) -> u32 {
        self.sessions.len() as u32
    }

    /// Creates a window in the world (opened nowhere yet).
    pub async fn create_window(&self, spec: &WindowSpec) {
        self.server
            .admin
            .create_window(&self.world, spec)
            .await
            .unwrap();
    }

    /// Creates a window and opens it on every rank.
    pub async fn window(&self, spec: WindowSpec) -> Vec<Window> {
        self.create_window(&spec).await;
        let mut windows = Vec::new();
        for session in &self.sessions {
            windows.push(session.window(&spec.name).await.unwrap());
        }
        windows
    }

    /// [`Fixture::window`] of a fresh name, every rank exposing `count` elements of `T`.
    pub async fn window_of<T: Element>(&self, count: u64) -> Vec<Window> {
        self.window(WindowSpec::of::<T>(&unique("w"), self.nranks(), count))
            .await
    }

    /// An audit client of the server.
    pub async fn audit(&self) -> Audit {
        Audit::connect(&self.server.url, ADMIN_TOKEN).await.unwrap()
    }

    /// An audit client of the server, and a window of `count` elements of `T` on every rank
    /// ([`Fixture::window_of`]) with its id: what a test of the audit log starts from.
    pub async fn audited_window<T: Element>(&self, count: u64) -> (Audit, Vec<Window>, u64) {
        let audit = self.audit().await;
        let windows = self.window_of::<T>(count).await;
        let id = windows[0].desc().id;
        (audit, windows, id)
    }
}

/// The `count` elements of `T` at `disp` of rank `target`, read through `window` under a
/// shared lock of `target` (locked, got, unlocked, then awaited).
pub async fn get_shared<T: Element>(window: &Window, target: u32, disp: u64, count: u64) -> Vec<T> {
    window.lock(LockType::Shared, target, 0).await.unwrap();
    let value = window.get::<T>(target, disp, count).unwrap();
    window.unlock(target).await.unwrap();
    value.value().await.unwrap()
}

/// Calls `probe` until `done` accepts what it returned, and returns that; panics with
/// `otherwise` of the last value once `within` has passed. Between calls it sleeps `pause`, or
/// only yields when `pause` is zero.
pub async fn poll_until<T, Fut>(
    within: Duration,
    pause: Duration,
    mut probe: impl FnMut() -> Fut,
    done: impl Fn(&T) -> bool,
    otherwise: impl Fn(&T) -> String,
) -> T
where
    Fut: std::future::Future<Output = T>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let value = probe().await;
        if done(&value) {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}",
            otherwise(&value)
        );
        if pause.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(pause).await;
        }
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

/// A server on a data directory of the test's that can be stopped (gracefully) and started
/// again on the same files.
#[derive(Debug)]
pub struct Restartable {
    /// The URL its clients connect to.
    pub url: String,
    /// An admin client of it.
    pub admin: Admin,
    data: PathBuf,
    served: Served,
}

impl Restartable {
    /// Stops it gracefully (its admin client gone first), and returns once it has stopped.
    pub async fn stop(self) {
        drop(self.admin);
        self.served.stop().await;
    }

    /// Stops it ([`Restartable::stop`]) and starts it again on the same files and the same
    /// address (its clients find it there again), the default configuration as `adjust`
    /// changes it.
    pub async fn restart(self, adjust: impl FnOnce(&mut ServerConfig)) -> Restartable {
        let (addr, data) = (self.served.addr, self.data.clone());
        self.stop().await;
        let listener = TcpListener::bind(addr).await.unwrap();
        start_listening(listener, &data, adjust).await
    }

    /// [`world_with`] through its admin client.
    pub async fn world_with(&self, name: &str, nranks: u32, specs: &[WindowSpec]) -> WorldTokens {
        world_with(&self.admin, name, nranks, specs).await
    }

    /// [`attached_window`] here.
    pub async fn attached_window(&self, token: &str, window: &str) -> (Session, Window) {
        attached_window(&self.url, token, window).await
    }
}

/// Creates the world `name` of `nranks` ranks through `admin`, and the windows `specs` in it;
/// returns its tokens.
pub async fn world_with(
    admin: &Admin,
    name: &str,
    nranks: u32,
    specs: &[WindowSpec],
) -> WorldTokens {
    let world = admin.create_world(name, nranks).await.unwrap();
    for spec in specs {
        admin.create_window(name, spec).await.unwrap();
    }
    world
}

/// A session of `token` attached at `url`, and its handle of the window `window`.
pub async fn attached_window(url: &str, token: &str, window: &str) -> (Session, Window) {
    let session = Session::attach(url, token).await.unwrap();
    let window = session.window(window).await.unwrap();
    (session, window)
}

/// A [`Restartable`] on 127.0.0.1:0 with `data` as its data directory and the default
/// configuration as `adjust` changes it; returns once it answers (its store is open and
/// recovered).
pub async fn start_on(data: &Path, adjust: impl FnOnce(&mut ServerConfig)) -> Restartable {
    start_listening(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        data,
        adjust,
    )
    .await
}

/// [`start_on`] a fresh data directory named after `prefix` (removed when the returned
/// [`TempDir`] is dropped, so the test keeps it while it starts servers on it).
pub async fn start_fresh(
    prefix: &str,
    adjust: impl FnOnce(&mut ServerConfig),
) -> (TempDir, Restartable) {
    let data = TempDir(std::env::temp_dir().join(unique(prefix)));
    let server = start_on(&data.0, adjust).await;
    (data, server)
}

/// [`start_on`] on a listener the test bound (the address of a server it stopped).
pub async fn start_listening(
    listener: TcpListener,
    data: &Path,
    adjust: impl FnOnce(&mut ServerConfig),
) -> Restartable {
    let mut config = ServerConfig::new(ADMIN_TOKEN, data.to_path_buf());
    adjust(&mut config);
    let served = in_process::serve_on(listener, config);
    Restartable {
        url: served.url.clone(),
        admin: first_answer(&served.url).await,
        data: data.to_path_buf(),
        served,
    }
}
