//! `onesided-server`: parse flags, start tracing, bind, run until SIGINT/SIGTERM.
//!
//! Owns: the flags and their environment variables (and their bounds, `--lease-ttl`), the admin
//! token when none is given (generated once into `DATA_DIR/admin-token`, mode 0600, written
//! atomically, never replaced, refused when too short), the tracing subscriber, the runtime
//! (`--worker-threads`), the process's allocator (mimalloc), and the signal thread that starts
//! a graceful stop and exits the process `EXIT_DEADLINE` after the signal whatever still runs.
//! Must not: decide anything the library decides (a flag only fills `ServerConfig`), or be
//! needed to run a server: tests and the bench call `onesided_server::run` without it.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use onesided_server::http::HttpListener;
use onesided_server::limits::Limits;
use onesided_server::tls::TlsIdentity;
use onesided_server::{check_admin_token, run, ServerConfig};
use tracing_subscriber::EnvFilter;

/// mimalloc, not glibc's malloc: at large worlds, where the state of a thousand connections,
/// sessions and actors outgrows the caches, the server's small, short-lived allocations
/// (messages, answers, h2 frames) run faster with it (BENCHMARKS.md, "Fence scaling at 1 024
/// ranks is bound by memory, and an allocator for it").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// MPI one-sided communication (RMA) as a network service.
#[derive(Debug, Parser)]
#[command(name = "onesided-server", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "ONESIDED_LISTEN", default_value = "127.0.0.1:50051")]
    listen: SocketAddr,
    /// Directory for the server's files.
    #[arg(long, env = "ONESIDED_DATA_DIR", default_value = "onesided-data")]
    data_dir: PathBuf,
    /// Token for admin calls. Without one, a random token is generated and written to
    /// DATA_DIR/admin-token.
    #[arg(long, env = "ONESIDED_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Audit store: a postgres:// URL, or sqlite:PATH. Default: DATA_DIR/audit.db (SQLite).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// How much a call's answer waits for its audit events: sync (answered only once
    /// committed: a crash loses nothing acknowledged), async (answered at once, recorded in
    /// the background: a crash loses up to --audit-async-max-unrecorded acknowledged events),
    /// off (nothing recorded; a restart starts empty).
    #[arg(
        long,
        env = "ONESIDED_AUDIT_DURABILITY",
        value_enum,
        default_value = "sync"
    )]
    audit_durability: onesided_server::audit::Durability,
    /// How the SQLite audit store writes events: groups (one row per commit and window,
    /// holding its events; the default) or per-event (one row per event, as before 0.4).
    /// Readers read both: a store written either way, or both, opens and reads the same under
    /// either. PostgreSQL keeps one row per event. [default: groups]
    #[arg(long, env = "ONESIDED_AUDIT_SQLITE_ROWS", value_enum)]
    audit_sqlite_rows: Option<onesided_server::audit::Rows>,
    /// The same as --audit-sqlite-rows groups, the default now (kept for 0.3's command lines).
    #[arg(long, env = "ONESIDED_AUDIT_SQLITE_GROUPS")]
    audit_sqlite_groups: bool,
    /// With --audit-durability async: the most events of answered calls that may be
    /// uncommitted at once, so the most a crash can lose; calls wait for room beyond it.
    #[arg(long, env = "ONESIDED_AUDIT_ASYNC_MAX_UNRECORDED", default_value_t = onesided_server::audit::DEFAULT_MAX_UNRECORDED as u32, value_parser = clap::value_parser!(u32).range(1..))]
    audit_async_max_unrecorded: u32,
    /// Seconds a session may send nothing (clients send heartbeats when idle) before its lease
    /// lapses: its locks are revoked and fences, waits and barriers that need it fail with
    /// PROC_FAILED. Fractions are allowed (0.5).
    #[arg(long, env = "ONESIDED_LEASE_TTL", default_value = "10", value_parser = lease_ttl)]
    lease_ttl: std::time::Duration,
    /// Largest message a client may send, in bytes (about the largest put in one call).
    #[arg(long, env = "ONESIDED_MAX_MESSAGE_BYTES", default_value_t = Limits::default().max_message_bytes)]
    max_message_bytes: usize,
    /// Most bytes one rank may expose in one window.
    #[arg(long, env = "ONESIDED_MAX_WINDOW_BYTES_PER_RANK", default_value_t = Limits::default().max_window_bytes_per_rank)]
    max_window_bytes_per_rank: u64,
    /// Most bytes all windows of the server may expose together.
    #[arg(long, env = "ONESIDED_MAX_WINDOW_BYTES", default_value_t = Limits::default().max_window_bytes)]
    max_window_bytes: u64,
    /// Most ranks a world may have.
    #[arg(long, env = "ONESIDED_MAX_RANKS_PER_WORLD", default_value_t = Limits::default().max_ranks_per_world)]
    max_ranks_per_world: u32,
    /// Most operations one session may have sent and not yet had answered.
    #[arg(long, env = "ONESIDED_MAX_PENDING_OPS", default_value_t = Limits::default().max_pending_ops)]
    max_pending_ops: usize,
    /// Most bytes of a unified-model window's updates a session may leave unread (its client
    /// stopped reading while other ranks put): past it the session ends.
    #[arg(long, env = "ONESIDED_MAX_UNREAD_UPDATE_BYTES", default_value_t = Limits::default().max_unread_update_bytes)]
    max_unread_update_bytes: u64,
    /// Most bytes of point-to-point messages (MPI_Send) one world holds sent and not yet
    /// received: a send past it is refused with MPI_ERR_NO_MEM.
    #[arg(long, env = "ONESIDED_MAX_QUEUED_MESSAGE_BYTES", default_value_t = Limits::default().max_queued_message_bytes)]
    max_queued_message_bytes: u64,
    /// Threads that run the server's tasks: 1 runs everything on one thread (no hand-offs
    /// between threads, the lowest latency per call); more serve more clients at once. Default:
    /// one per CPU.
    #[arg(long, env = "ONESIDED_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    worker_threads: Option<u16>,
    /// Milliseconds a shared lock request may be held back behind a waiting exclusive one
    /// when no conflicting lock is held (writers usually first, never a deadlock; requests of
    /// a rank in lock_all or with other locks open are never held back).
    #[arg(long, env = "ONESIDED_LOCK_FAIRNESS_MS", default_value_t = onesided_core::locks::DEFAULT_FAIRNESS.as_millis() as u64)]
    lock_fairness_ms: u64,
    /// Microseconds to keep polling for the next message after each answer before a thread
    /// parks, as MPI libraries spin (lower latency for back-to-back calls, at up to that much
    /// of one core's time per answer; README, "Busy-polling"). 0, the default, never spins.
    #[arg(long, env = "ONESIDED_BUSY_POLL", value_name = "MICROS", default_value = "0", value_parser = onesided_busy_poll::parse_micros)]
    busy_poll: std::time::Duration,
    /// Serve TLS only, with this certificate chain (PEM, leaf first). Needs --tls-key.
    #[arg(long, env = "ONESIDED_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert. Needs --tls-cert.
    #[arg(long, env = "ONESIDED_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (plain HTTP, no authentication: bind it
    /// where only your monitoring can reach it). Default: not served.
    #[arg(long, env = "ONESIDED_METRICS_LISTEN", value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Serve the web view at http://ADDR/ (a live, read-only page of worlds, windows,
    /// sessions, locks, epochs and audit events; it asks for the admin token) and Prometheus
    /// metrics at http://ADDR/metrics, on one plain-HTTP listener. Default: not served.
    #[arg(long, env = "ONESIDED_HTTP_LISTEN", value_name = "ADDR")]
    http_listen: Option<SocketAddr>,
    /// Join a cluster of nodes as this node (unique in the cluster): every node of a cluster
    /// uses the same PostgreSQL --database-url and the same admin token; worlds are spread
    /// over the live nodes and taken up by another node when theirs dies. Needs --advertise.
    #[arg(long, env = "ONESIDED_NODE_ID", requires = "advertise")]
    node_id: Option<String>,
    /// The URL clients and the other nodes reach this node at (http://host:port). Needs
    /// --node-id.
    #[arg(
        long,
        env = "ONESIDED_ADVERTISE",
        value_name = "URL",
        requires = "node_id"
    )]
    advertise: Option<String>,
    /// Seconds a node's lease (and its worlds' leases) lasts without a heartbeat; heartbeats
    /// come every quarter of it. Another node takes a dead node's worlds up after it.
    #[arg(long, env = "ONESIDED_NODE_LEASE_TTL", default_value = "5", value_parser = lease_ttl)]
    node_lease_ttl: std::time::Duration,
}

/// How the SQLite store writes events: `--audit-sqlite-rows`, else groups (what
/// `--audit-sqlite-groups` asked for before it was the default).
fn sqlite_rows(args: &Args) -> anyhow::Result<onesided_server::audit::Rows> {
    use onesided_server::audit::Rows;
    match (args.audit_sqlite_rows, args.audit_sqlite_groups) {
        (Some(Rows::PerEvent), true) => anyhow::bail!(
            "--audit-sqlite-groups (ONESIDED_AUDIT_SQLITE_GROUPS) and --audit-sqlite-rows \
             per-event (ONESIDED_AUDIT_SQLITE_ROWS) contradict each other: give one"
        ),
        (Some(rows), _) => Ok(rows),
        (None, _) => Ok(Rows::Groups),
    }
}

fn lease_ttl(text: &str) -> Result<std::time::Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(0.05..=86_400.0).contains(&seconds) {
        return Err(format!(
            "a lease of {seconds} s is outside 0.05 s to one day"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

fn admin_token(args: &Args) -> anyhow::Result<String> {
    if let Some(token) = &args.admin_token {
        check_admin_token(token)
            .map_err(|reason| anyhow::anyhow!("--admin-token / ONESIDED_ADMIN_TOKEN: {reason}"))?;
        return Ok(token.clone());
    }
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("cannot create data directory {}", args.data_dir.display()))?;
    let path = args.data_dir.join("admin-token");
    if let Some(existing) = read_token_file(&path)? {
        return Ok(existing);
    }
    let bytes: [u8; 24] = rand::random();
    let token = hex::encode(bytes);
    match write_private_atomically(&path, &token) {
        Ok(()) => {
            tracing::info!(path = %path.display(), "generated an admin token");
            Ok(token)
        }
        // another server starting on the same directory wrote one first: use it
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => read_token_file(&path)?
            .with_context(|| format!("{} vanished while it was read", path.display())),
        Err(error) => Err(error).with_context(|| format!("cannot write {}", path.display())),
    }
}

/// The token in `path`, if the file exists; one too short to be a secret (an empty file left by
/// a crash of an older version, or written by hand) is refused, never used.
fn read_token_file(path: &std::path::Path) -> anyhow::Result<Option<String>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(error).with_context(|| format!("cannot read {}", path.display()));
        }
    };
    warn_if_others_can_read(path);
    let token = text.trim().to_string();
    check_admin_token(&token).map_err(|reason| {
        anyhow::anyhow!(
            "{}: {reason}; delete the file to have a new token generated, or give one with \
             --admin-token",
            path.display()
        )
    })?;
    Ok(Some(token))
}

/// Writes `text` to a new file at `path` that only its owner may read (mode 0600 on Unix), so
/// that the file is either absent or whole: the text goes to a temporary file in the same
/// directory, is synced, and is then linked to `path` (which fails with `AlreadyExists` rather
/// than replace a file another process wrote meanwhile).
fn write_private_atomically(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let directory = path.parent().unwrap_or_else(|| std::path::Path::new("."));
    let name = path
        .file_name()
        .map_or_else(|| "admin-token".into(), |name| name.to_string_lossy());
    let temporary = directory.join(format!(
        ".{name}.{}.{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&temporary).and_then(|mut file| {
        file.write_all(text.as_bytes())?;
        file.sync_all()
    });
    let linked = written.and_then(|()| std::fs::hard_link(&temporary, path));
    let _ = std::fs::remove_file(&temporary);
    linked?;
    // the new name must survive a crash too
    #[cfg(unix)]
    std::fs::File::open(directory)?.sync_all()?;
    Ok(())
}

fn warn_if_others_can_read(path: &std::path::Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(metadata) = std::fs::metadata(path) {
            let mode = metadata.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(
                    path = %path.display(),
                    mode = format_args!("{:o}", mode & 0o777),
                    "the admin token file is readable by others than its owner"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// The longest a stop may take, from the signal to the exit, whatever a request or a client is
/// doing: past it the process exits at once (what is acknowledged is already committed; a
/// graceful stop takes [`onesided_server::SHUTDOWN_GRACE`] plus the audit's last flush).
const EXIT_DEADLINE: std::time::Duration = std::time::Duration::from_millis(4_500);

/// Resolves at SIGINT or SIGTERM. The handlers are installed when this is called, not when
/// the future is first polled: the server prints its address before it serves, and a signal
/// that follows at once must stop it gracefully rather than kill it.
///
/// The signals are watched on a thread and a runtime of their own, so that a stop is noticed
/// even when every worker of the server's runtime is busy; from the signal on, that thread
/// ends the process at [`EXIT_DEADLINE`] if the graceful stop has not.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    let (installed, ready) = std::sync::mpsc::channel();
    let (told, signalled) = tokio::sync::oneshot::channel::<()>();
    let watching = std::thread::Builder::new()
        .name("onesided-signals".into())
        .spawn(move || watch_signals(&installed, told));
    if let Err(error) = watching {
        tracing::warn!(%error, "cannot start the signal thread; stopping by signal is not possible");
    } else {
        // the thread says once its handlers are installed (or that they cannot be)
        let _ = ready.recv();
    }
    async move {
        if signalled.await.is_ok() {
            tracing::info!("shutting down");
        } else {
            std::future::pending::<()>().await;
        }
    }
}

/// The signal thread: installs the handlers, says so on `installed`, waits for SIGINT or
/// SIGTERM, tells `told`, and exits the process if it is still running [`EXIT_DEADLINE`] later.
fn watch_signals(installed: &std::sync::mpsc::Sender<()>, told: tokio::sync::oneshot::Sender<()>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::warn!(%error, "cannot watch for signals");
            let _ = installed.send(());
            return;
        }
    };
    let signalled = {
        let _inside = runtime.enter();
        #[cfg(unix)]
        let signals = {
            use tokio::signal::unix::{signal, SignalKind};
            (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            )
        };
        async move {
            #[cfg(unix)]
            match signals {
                (Ok(mut interrupt), Ok(mut term)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = term.recv() => {}
                    }
                }
                (Err(error), _) | (_, Err(error)) => {
                    tracing::warn!(%error, "cannot listen for SIGINT and SIGTERM; only for Ctrl-C");
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
            #[cfg(not(unix))]
            let _ = tokio::signal::ctrl_c().await;
        }
    };
    let _ = installed.send(());
    runtime.block_on(signalled);
    let _ = told.send(());
    std::thread::sleep(EXIT_DEADLINE);
    eprintln!(
        "onesided-server: still running {} ms after the stop signal: exiting now",
        EXIT_DEADLINE.as_millis()
    );
    std::process::exit(1);
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let served = runtime(args.worker_threads).and_then(|runtime| {
        let served = runtime.block_on(serve(args));
        // a task still running (a request mid-way) does not hold the exit up
        runtime.shutdown_timeout(std::time::Duration::from_millis(200));
        served
    });
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("onesided-server: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// One worker: a current-thread runtime, where a task woken by another never crosses to a
/// different thread (on 2 cores a cross-thread wake-up costs as much as the network hop).
fn runtime(workers: Option<u16>) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = match workers {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(workers) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(usize::from(workers));
            builder
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    builder
        .enable_all()
        .build()
        .context("cannot start the runtime")
}

/// A listener on `address` when one is asked for (`--metrics-listen` and `--http-listen` are
/// the same kind: `metrics::MetricsListener` names [`HttpListener`]); `what` it serves is in
/// the error.
fn listen(address: Option<SocketAddr>, what: &str) -> anyhow::Result<Option<HttpListener>> {
    address
        .map(|address| {
            HttpListener::bind(address)
                .with_context(|| format!("cannot listen for {what} on {address}"))
        })
        .transpose()
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsIdentity::from_files(cert, key)?),
        // clap's `requires` makes these usage errors before we get here
        _ => None,
    };
    let metrics = listen(args.metrics_listen, "metrics")?;
    let http = listen(args.http_listen, "the web view")?;
    let config = ServerConfig {
        database_url: args.database_url.clone(),
        durability: args.audit_durability,
        sqlite_rows: sqlite_rows(&args)?,
        async_max_unrecorded: args.audit_async_max_unrecorded as usize,
        lease_ttl: args.lease_ttl,
        limits: Limits {
            max_message_bytes: args.max_message_bytes,
            max_window_bytes_per_rank: args.max_window_bytes_per_rank,
            max_window_bytes: args.max_window_bytes,
            max_ranks_per_world: args.max_ranks_per_world,
            max_pending_ops: args.max_pending_ops,
            max_unread_update_bytes: args.max_unread_update_bytes,
            max_queued_message_bytes: args.max_queued_message_bytes,
        },
        tls,
        metrics,
        http,
        lock_fairness: std::time::Duration::from_millis(args.lock_fairness_ms),
        busy_poll: (!args.busy_poll.is_zero()).then_some(args.busy_poll),
        cluster: match (&args.node_id, &args.advertise) {
            (Some(node_id), Some(advertise)) => Some(onesided_server::cluster::NodeConfig {
                lease_ttl: args.node_lease_ttl,
                ..onesided_server::cluster::NodeConfig::new(node_id, advertise)
            }),
            _ => None,
        },
        ..ServerConfig::new(&admin_token(&args)?, args.data_dir.clone())
    };
    let shutdown = shutdown_signal();
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    run(listener, config, shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated token file never replaces one another server wrote: a second write
    /// fails (and leaves the first whole), and the token read is the first one.
    #[test]
    fn a_token_file_is_never_replaced() {
        let directory = std::env::temp_dir().join(format!("onesided-token-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let path = directory.join("admin-token");
        let _ = std::fs::remove_file(&path);
        let first = "a".repeat(48);
        write_private_atomically(&path, &first).unwrap();
        let second = write_private_atomically(&path, &"b".repeat(48)).unwrap_err();
        assert_eq!(second.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first);
        // nothing else is left in the directory (the temporary file went)
        let names: Vec<_> = std::fs::read_dir(&directory)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, ["admin-token"]);
        assert_eq!(read_token_file(&path).unwrap(), Some(first));
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
