//! `onesided-server` as a process of its own ([`ServerProcess`]), and the server's memory during
//! one bulk put (issue 12, item 4): `onesided-server` started as a
//! process of its own (so that its resident memory is its own, not the bench's and its
//! clients'), a window of two ranks of the bulk size each, one put of the bulk size from rank 0
//! into rank 1 inside `lock(EXCLUSIVE)`/`unlock`, then the server's peak resident set
//! (`VmHWM` of `/proc/PID/status`). Measured with the audit off and in `sync` (SQLite in its
//! data directory), one fresh server each.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use onesided_client::{Admin, LockType, Session, WindowSpec};

use crate::storage::Scratch;
use crate::Audit;

/// The server binary: `ONESIDED_SERVER_BIN` when set, else `onesided-server` beside the bench's
/// executable (or one directory up, for a test binary in `deps/`).
///
/// # Errors
/// When none is found (build it with `cargo build --release -p onesided-server`).
pub fn server_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("ONESIDED_SERVER_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("cannot find the bench's own executable")?;
    let beside = exe
        .parent()
        .into_iter()
        .flat_map(|dir| [dir.to_path_buf(), dir.join("..")])
        .map(|dir| dir.join("onesided-server"))
        .find(|path| path.is_file());
    beside.ok_or_else(|| {
        anyhow::anyhow!(
            "no onesided-server beside {} (build it with `cargo build --release -p \
             onesided-server`, or set ONESIDED_SERVER_BIN)",
            exe.display()
        )
    })
}

/// The server's peak resident memory in MiB while it took one put of `bytes` into a window of
/// two ranks of `bytes` each.
#[derive(Clone, Debug, PartialEq)]
pub struct BulkRss {
    /// With the audit off.
    pub off_mib: f64,
    /// In `sync` durability into SQLite (the default configuration).
    pub sync_mib: f64,
    /// The window's bytes (both ranks) in MiB.
    pub window_mib: f64,
    /// The put's bytes in MiB.
    pub put_mib: f64,
    /// Issue 12's bound: the window's bytes plus the put's (256 MiB in a full run), in MiB.
    pub target_mib: f64,
    /// In `sync`: how much the audit store's data grew (its pages less its free list), per
    /// byte put, from before the put to after the server stopped (SIGTERM: the store closed and
    /// checkpointed). Issue 12: at most 1.1.
    pub sync_store_bytes_per_byte: f64,
}

/// Measures [`BulkRss`] with `binary` for a put of `bytes`.
///
/// # Errors
/// When a server does not start, a call fails, or `/proc` cannot be read.
pub async fn bulk_rss(binary: &Path, bytes: usize) -> anyhow::Result<BulkRss> {
    let (off_mib, _) = peak_during_put(binary, Audit::Off, bytes).await?;
    let (sync_mib, grown) = peak_during_put(binary, Audit::Sync, bytes).await?;
    let put_mib = bytes as f64 / f64::from(1 << 20);
    Ok(BulkRss {
        off_mib,
        sync_mib,
        window_mib: 2.0 * put_mib,
        put_mib,
        target_mib: 3.0 * put_mib,
        sync_store_bytes_per_byte: grown as f64 / bytes as f64,
    })
}

/// An `onesided-server` process with its data in a scratch directory of its own, killed on drop
/// (on error paths too).
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its admin token.
    pub admin_token: String,
    /// Its data, removed after the process is gone (taken out by [`ServerProcess::stop`]).
    scratch: Option<Scratch>,
}

impl ServerProcess {
    /// Starts `binary` on a free port of 127.0.0.1 with `args` besides the address, data
    /// directory and admin token, and waits until it answers.
    ///
    /// # Errors
    /// When it cannot be started or does not answer within 30 s.
    pub async fn start(binary: &Path, args: &[&str]) -> anyhow::Result<(Self, Admin)> {
        let scratch = Scratch::new("server")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let admin_token = format!("bench-process-admin-{}", crate::server::unique());
        let child = Command::new(binary)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(scratch.path().join("data"))
            .args(args)
            .env("ONESIDED_ADMIN_TOKEN", &admin_token)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let server = ServerProcess {
            child,
            url: format!("http://127.0.0.1:{port}"),
            admin_token,
            scratch: Some(scratch),
        };
        let admin = connect(&server.url, &server.admin_token).await?;
        Ok((server, admin))
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its data directory.
    pub fn data_dir(&self) -> std::path::PathBuf {
        self.scratch
            .as_ref()
            .map_or_else(PathBuf::new, |scratch| scratch.path().join("data"))
    }

    /// Stops it with SIGTERM, as an operator would, and waits up to 30 s for it to exit (its
    /// audit store closed, SQLite's WAL checkpointed into the database); killed past that.
    ///
    /// Returns its scratch directory, which the caller may still read (removed when dropped).
    ///
    /// # Errors
    /// When the signal cannot be sent or the process not waited for.
    pub(crate) fn stop(mut self) -> anyhow::Result<Scratch> {
        crate::awake::send_signal("-TERM", &[self.child.id()])?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait()?.is_none() {
            anyhow::ensure!(Instant::now() < deadline, "the server did not stop in 30 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        self.scratch
            .take()
            .context("the server's scratch directory is gone")
    }
}

/// The bytes of the SQLite store at `path` that hold data: its pages less those on its free
/// list, and its events file (`EventFile`, where large events are written; the whole file).
/// Not the database file's size: the store keeps the pages it frees (among them the ones its
/// start-up primer freed, `prime_wal`) for later rows, so a put into a new store first fills
/// those, and its write-ahead log is there before the put and gone after a clean stop.
async fn store_bytes(path: &Path) -> anyhow::Result<u64> {
    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::{ConnectOptions, Connection};
    let mut conn = SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .with_context(|| format!("cannot open {}", path.display()))?;
    let mut pragma = async |name: &str| -> anyhow::Result<u64> {
        let value: i64 = sqlx::query_scalar(&format!("PRAGMA {name}"))
            .fetch_one(&mut conn)
            .await
            .with_context(|| format!("PRAGMA {name}"))?;
        Ok(u64::try_from(value)?)
    };
    let pages = pragma("page_count").await?;
    let free = pragma("freelist_count").await?;
    let size = pragma("page_size").await?;
    conn.close().await?;
    let events = onesided_server::audit::store::EventFile::beside(path);
    let events = match std::fs::metadata(events.path()) {
        Ok(meta) => meta.len(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0,
        Err(error) => return Err(error).context("cannot read the store's events file"),
    };
    Ok(pages.saturating_sub(free) * size + events)
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server's peak RSS in MiB, and how much its audit store grew in bytes ([`store_bytes`]).
async fn peak_during_put(binary: &Path, audit: Audit, bytes: usize) -> anyhow::Result<(f64, u64)> {
    let (server, admin) =
        ServerProcess::start(binary, &["--audit-durability", audit.name()]).await?;
    let url = server.url.clone();
    let created = admin.create_world("rss", 2).await?;
    admin
        .create_window("rss", &WindowSpec::bytes("bulk", 2, bytes as u64, 1))
        .await?;
    let origin = Session::attach(url.as_str(), &created.tokens[0]).await?;
    let target = Session::attach(url.as_str(), &created.tokens[1]).await?;
    let window = origin.window("bulk").await?;
    let _exposed = target.window("bulk").await?;
    // with the audit off there is no store to measure
    let store = (audit != Audit::Off).then(|| server.data_dir().join("audit.db"));
    let before = match &store {
        Some(store) => store_bytes(store).await?,
        None => 0,
    };
    let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    window.lock(LockType::Exclusive, 1, 0).await?;
    window.put(1, 0, &data)?;
    window.unlock(1).await?;
    drop(data);
    // in sync the answer came after the commit; a snapshot the put triggered may still be on
    // its way to the store, and is part of what the put costs
    admin.list_worlds().await?;
    let peak = peak_rss_mib(server.pid())?;
    drop(window);
    drop(origin);
    drop(target);
    drop(admin);
    // measured once the process stopped (its store closed), then removed with the scratch
    let scratch = server.stop()?;
    let after = match &store {
        Some(store) => store_bytes(store).await?,
        None => 0,
    };
    drop(scratch);
    Ok((peak, after.saturating_sub(before)))
}

async fn connect(url: &str, token: &str) -> anyhow::Result<Admin> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match Admin::connect(url, token).await {
            Ok(admin) => match admin.list_worlds().await {
                Ok(_) => return Ok(admin),
                Err(e) if Instant::now() > deadline => bail!("the server does not answer: {e}"),
                Err(_) => {}
            },
            Err(e) if Instant::now() > deadline => bail!("the server does not answer: {e}"),
            Err(_) => {}
        }
        // the process is starting: its port is not open yet
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `VmHWM` (the peak resident set) of process `pid`, in MiB.
fn peak_rss_mib(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read /proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM in /proc/PID/status")?;
    Ok(kib / 1024.0)
}
