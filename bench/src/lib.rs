//! onesided-bench: what onesided's RMA calls cost, measured side by side with references.
//!
//! [`run`] attaches ranks to a server (one given by URL, or one started in this process on
//! `127.0.0.1:0` with a temporary data directory), times the patterns of issue 6 and returns a
//! [`Report`]: medians of per-iteration latencies in microseconds after a warm-up of 10 % that
//! is not measured, and throughputs. The references — a raw TCP ping-pong, raw TCP bulk
//! throughput, MPICH timing the same patterns over TCP when `mpicc` and `mpiexec` are on `PATH`
//! ([`mpich`]), and, when a Redis answers on `127.0.0.1:6379` and `redis-benchmark` is on
//! `PATH`, Redis GET/SET and INCR, and, when `redis-server` and `redis-benchmark` are on
//! `PATH`, Redis INCR with every write fsynced before its reply on a Redis the bench starts
//! ([`redis`]) — are measured in the same run, so that the ratios compare like with like. So are the storage references of the audit's latency targets ([`storage`]):
//! a 200-byte append + `fdatasync` and bulk writes in the data directory's file system, and a
//! commit into PostgreSQL when one is given.
//!
//! With the audit off (the default) the patterns run again against the server's default
//! configuration — audit `sync` into SQLite in its data directory — and, given a PostgreSQL
//! `--database-url`, a third time in `sync` into that database; the report puts them side by
//! side with the `off` figures.
//!
//! Nothing here asserts a speed: the figures are printed ([`Report::table`]) or emitted as one
//! JSON object ([`Report::to_json`]).
//!
//! [`fence_scaling`] runs only the fence epochs, at the world sizes asked, with the audit off
//! and in `sync` side by side ([`scaling_table`]).
//!
//! [`soak`] is the other mode: a mixed workload for a fixed time with the process's resident
//! memory sampled, and a verdict on whether it stayed flat.

/// The allocator of the `onesided-server` binary (its `main.rs`), so that the in-process server
/// measures what the binary does; the bench's clients, in the same process, use it too.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod awake;
pub mod grpc;
mod measure;
pub mod mpich;
pub mod redis;
mod reference;
pub mod rss;
mod server;
pub mod soak;
pub mod storage;

use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Map, Value};

pub use measure::median;
pub use server::InProcess;

/// How the in-process server records its audit log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Audit {
    /// No audit log.
    Off,
    /// Recorded in the background.
    Async,
    /// Every answer waits for its events' commit.
    Sync,
}

impl Audit {
    /// The name used on the command line and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Audit::Off => "off",
            Audit::Async => "async",
            Audit::Sync => "sync",
        }
    }
}

/// What to run against and how long.
#[derive(Clone, Debug)]
pub struct Options {
    /// A running server (`http://host:port`) and its admin token; `None` starts one in-process.
    pub remote: Option<(String, String)>,
    /// The in-process server's audit durability.
    pub audit: Audit,
    /// The in-process server's audit store (`postgres://…` or `sqlite:…`); `None` for SQLite in
    /// the data dir. With the audit off, a PostgreSQL URL adds a third run in `sync` into it,
    /// and a SQLite one replaces the data dir's store in the `sync` SQLite run.
    pub database_url: Option<String>,
    /// Measured iterations of each latency pattern (a warm-up of 10 % more runs first).
    pub iterations: usize,
    /// Tiny counts, 4 MiB bulk, fence scaling at 2 and 8 ranks only: a smoke run.
    pub quick: bool,
    /// Worker threads of the in-process server's runtime (1: a current-thread runtime).
    pub server_threads: Threads,
    /// Keep every CPU busy at the lowest priority for the whole run (`--keep-awake`;
    /// BENCHMARKS.md, "Idle CPUs").
    pub keep_awake: bool,
    /// With the audit off and the server in-process: the latency patterns against a server
    /// and sessions that busy-poll this long after each message (`--busy-poll`), beside the
    /// same against a server that does not ([`BusyPolled`]).
    pub busy_poll: Option<std::time::Duration>,
}

/// Worker threads of a tokio runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    /// One thread: a current-thread runtime, so no wake-up crosses threads.
    One,
    /// A multi-thread runtime with this many workers (at least 2).
    Workers(usize),
}

impl Threads {
    /// `1` is [`Threads::One`]; more is [`Threads::Workers`].
    pub fn new(count: usize) -> Self {
        if count <= 1 {
            Threads::One
        } else {
            Threads::Workers(count)
        }
    }

    /// How many threads.
    pub fn count(self) -> usize {
        match self {
            Threads::One => 1,
            Threads::Workers(count) => count,
        }
    }

    /// A runtime of this many threads, with every driver enabled.
    ///
    /// # Errors
    /// When the runtime cannot be built.
    pub fn runtime(self, name: &str) -> std::io::Result<tokio::runtime::Runtime> {
        let mut builder = match self {
            Threads::One => tokio::runtime::Builder::new_current_thread(),
            Threads::Workers(count) => {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                builder.worker_threads(count);
                builder
            }
        };
        builder.enable_all().thread_name(name).build()
    }
}

impl Options {
    /// In-process, audit off, `iterations` per pattern.
    pub fn in_process(iterations: usize) -> Self {
        Options {
            remote: None,
            audit: Audit::Off,
            database_url: None,
            iterations,
            quick: false,
            server_threads: Threads::One,
            keep_awake: false,
            busy_poll: None,
        }
    }

    /// A smoke run: in-process, audit off, a handful of iterations.
    pub fn quick() -> Self {
        Options {
            quick: true,
            ..Options::in_process(QUICK_ITERATIONS)
        }
    }

    fn bulk_bytes(&self) -> usize {
        if self.quick {
            4 << 20
        } else {
            64 << 20
        }
    }

    /// Messages of 4 MiB in the raw TCP bulk reference.
    fn tcp_bulk_messages(&self) -> usize {
        if self.quick {
            4
        } else {
            64
        }
    }

    /// Bytes of the put whose server memory is measured ([`rss`]).
    fn rss_put_bytes(&self) -> usize {
        if self.quick {
            4 << 20
        } else {
            256 << 20
        }
    }

    /// Bytes of the `disk_write_mib_per_s` reference.
    fn disk_write_bytes(&self) -> usize {
        if self.quick {
            16 << 20
        } else {
            256 << 20
        }
    }

    /// The database URL when it names PostgreSQL.
    fn postgres_url(&self) -> Option<&str> {
        self.database_url
            .as_deref()
            .filter(|url| url.starts_with("postgres://") || url.starts_with("postgresql://"))
    }

    /// The audit store of the `sync` SQLite run: a `sqlite:` URL when one is given, else `None`
    /// (the data directory's `audit.db`).
    fn sqlite_url(&self) -> Option<String> {
        match self.postgres_url() {
            Some(_) => None,
            None => self.database_url.clone(),
        }
    }

    fn scaling_ranks(&self) -> &'static [u32] {
        if self.quick {
            &[2, 8]
        } else {
            &[2, 8, 32, 64, 256, 1024]
        }
    }
}

/// Iterations of each pattern in a `--quick` run.
pub const QUICK_ITERATIONS: usize = 20;

/// The latency patterns, in table order, with what each times.
pub const LATENCY_KEYS: [(&str, &str); 7] = [
    ("lock_put_unlock_us", "lock(X) + put 8 B + unlock"),
    ("fence_put_us", "fence epoch, 2 ranks, 1 put each"),
    (
        "lock_acc_unlock_us",
        "lock(S) + accumulate sum i64 + unlock",
    ),
    ("lock_get_unlock_us", "lock(S) + get 8 B + unlock"),
    ("fop_flush_us", "fetch_and_op + flush (lock_all)"),
    ("cas_flush_us", "compare_and_swap + flush (lock_all)"),
    ("pscw_put_us", "PSCW epoch with 1 put"),
];

/// How much a `sync` latency may exceed the `off` one, in storage references (issue 12): the
/// target of a `sync` latency is the `off` figure + this × `fdatasync_us` (SQLite) or
/// `pg_commit_us` (PostgreSQL).
pub const SYNC_TARGET_REFERENCES: f64 = 1.5;

/// Every figure of one run. Missing references are `None`.
#[derive(Clone, Debug)]
pub struct Report {
    /// `off`, `async`, `sync`, or for a remote server `remote` (`remote-audited` when it logs).
    pub audit: String,
    /// Measured iterations per latency pattern.
    pub iterations: usize,
    /// Worker threads of the in-process server (`None` for a server given by address).
    pub server_threads: Option<usize>,
    /// Worker threads of the runtime the clients ran on.
    pub client_threads: usize,
    /// Whether every CPU was kept busy at the lowest priority (`--keep-awake`).
    pub keep_awake: bool,
    /// What the server (in `audit` mode) gave for every pattern.
    pub patterns: Patterns,
    /// Size of the bulk put in bytes.
    pub bulk_bytes: usize,
    /// With the audit off and the server in-process: the same patterns against a server in
    /// its default configuration, every answer waiting for its audit commit into SQLite (in its
    /// data directory, or the `sqlite:` URL given).
    pub sync_sqlite: Option<Patterns>,
    /// Given a PostgreSQL `--database-url` with the audit off: the same patterns against a
    /// server whose every answer waits for its audit commit into that database.
    pub sync_postgres: Option<Patterns>,
    /// With `--keep-awake` and `sync_postgres`: the latency patterns against a server with the
    /// audit off, measured with the spinners stopped just before `sync_postgres` is (which is
    /// measured without them, as PostgreSQL's references are): the `off` figures of
    /// PostgreSQL's latency targets, so that both sides of each comparison ran with the CPUs in
    /// the same state (`--keep-awake`, BENCHMARKS.md). `None` otherwise, and then the targets
    /// use `patterns`.
    pub off_without_spinners: Option<Vec<(&'static str, f64)>>,
    /// With `--busy-poll` and the audit off: the latency patterns against a server and
    /// sessions that busy-poll.
    pub busy_poll: Option<BusyPolled>,
    /// With the audit off and the server in-process: the peak memory of an `onesided-server`
    /// process taking one bulk put, off and in `sync`.
    pub bulk_rss: Option<rss::BulkRss>,
    /// Why it was not measured (no server binary, or it failed), when it was not.
    pub bulk_rss_missing: Option<String>,
    /// 200 bytes appended + `fdatasync` in the data directory's file system, median µs.
    pub fdatasync_us: f64,
    /// One commit of 9 rows into SQLite in the audit store's configuration there, median µs
    /// ([`storage::sqlite_commit`]).
    pub sqlite_commit_us: f64,
    /// The floors under `sync` into SQLite: a bare gRPC round trip answered after a
    /// lock-put-unlock's audit rows are committed by the store's code, and 64 such streams
    /// answered after a hot-counter operation's rows ([`grpc::commit_floors`]).
    pub sqlite_floors: grpc::CommitFloors,
    /// The same into the PostgreSQL `--database-url`.
    pub pg_floors: Option<grpc::CommitFloors>,
    /// `disk_write_bytes` written in 8 MiB chunks + `fdatasync` there, MiB/s.
    pub disk_write_mib_per_s: f64,
    /// Size of the disk write in bytes.
    pub disk_write_bytes: usize,
    /// One single-row INSERT committed into the PostgreSQL `--database-url`.
    pub pg_commit: Option<storage::PgCommit>,
    /// Raw TCP ping-pong of 8 bytes, median µs.
    pub raw_tcp_pingpong_us: f64,
    /// Raw TCP stream over loopback in 4 MiB messages, MiB/s.
    pub raw_tcp_bulk_mib_per_s: f64,
    /// A bare tonic echo service ([`grpc`]): the floor under our calls.
    pub grpc: grpc::Floor,
    /// The floor under `fence_scaling_us`: at each of its sizes, as many bare tonic streams
    /// whose every answer waits for all of them ([`grpc::barrier_us`]), median µs per round.
    pub grpc_barrier_us: Vec<(u32, f64)>,
    /// MPICH timing the same patterns between two processes over TCP.
    pub mpich: Option<mpich::Mpich>,
    /// Why MPICH was not measured, when it was not.
    pub mpich_missing: Option<String>,
    /// Redis GET and SET with one client: mean of their p50s, µs.
    pub redis_get_set_us: Option<f64>,
    /// Redis INCR with 50 clients: requests/s.
    pub redis_incr_50_clients_per_s: Option<f64>,
    /// Why Redis was not measured, when it was not.
    pub redis_missing: Option<String>,
    /// Redis INCR with `appendfsync always` on a `redis-server` the bench started ([`redis`]).
    pub redis_durable: Option<redis::Durable>,
    /// Why the durable Redis was not measured, when it was not.
    pub redis_durable_missing: Option<String>,
}

/// The latency patterns with the server and every session busy-polling, beside the same
/// patterns without, both against an `onesided-server` process of its own when one is built
/// (the bench's clients then have the machine's other core), else in-process.
#[derive(Clone, Debug, PartialEq)]
pub struct BusyPolled {
    /// How long each spins after a message.
    pub budget: std::time::Duration,
    /// `"process"` or `"in-process"`: where the two servers ran.
    pub server: &'static str,
    /// Median latencies in µs without busy-polling, keyed as [`LATENCY_KEYS`].
    pub plain: Vec<(&'static str, f64)>,
    /// Median latencies in µs busy-polling, keyed as [`LATENCY_KEYS`].
    pub latencies: Vec<(&'static str, f64)>,
}

impl BusyPolled {
    async fn measure(options: &Options, budget: std::time::Duration) -> anyhow::Result<Self> {
        let Ok(binary) = rss::server_binary() else {
            // no server binary: both in this process, which shares its cores with the clients
            let plain = Self::in_process(options, None).await?;
            let latencies = Self::in_process(options, Some(budget)).await?;
            return Ok(BusyPolled {
                budget,
                server: "in-process",
                plain,
                latencies,
            });
        };
        let micros = budget.as_micros().to_string();
        // one thread, as the in-process server: no hand-off between threads
        let common = ["--audit-durability", "off", "--worker-threads", "1"];
        let (server, _) = rss::ServerProcess::start(&binary, &common).await?;
        let plain = Self::latencies(options, &server.url, &server.admin_token, None).await?;
        drop(server);
        let mut args = common.to_vec();
        args.extend(["--busy-poll", micros.as_str()]);
        let (server, _) = rss::ServerProcess::start(&binary, &args).await?;
        let latencies =
            Self::latencies(options, &server.url, &server.admin_token, Some(budget)).await?;
        Ok(BusyPolled {
            budget,
            server: "process",
            plain,
            latencies,
        })
    }

    async fn in_process(
        options: &Options,
        budget: Option<std::time::Duration>,
    ) -> anyhow::Result<Vec<(&'static str, f64)>> {
        let server = InProcess::start_polling(Audit::Off, None, options.server_threads, budget)
            .await
            .context("cannot start the in-process server")?;
        Self::latencies(options, &server.url, &server.admin_token, budget).await
    }

    async fn latencies(
        options: &Options,
        url: &str,
        token: &str,
        budget: Option<std::time::Duration>,
    ) -> anyhow::Result<Vec<(&'static str, f64)>> {
        let bench = measure::Bench::connect(url, token, options).await?;
        let bench = match budget {
            Some(budget) => bench.busy_polling(budget),
            None => bench,
        };
        latencies(&bench).await
    }
}

/// Every pattern of [`LATENCY_KEYS`] against `bench`: its median in µs.
async fn latencies(bench: &measure::Bench) -> anyhow::Result<Vec<(&'static str, f64)>> {
    let mut latencies = Vec::new();
    for (key, _) in LATENCY_KEYS {
        let value = bench
            .latency(key)
            .await
            .with_context(|| format!("while measuring {key}"))?;
        latencies.push((key, value));
    }
    Ok(latencies)
}

/// One figure of a table: the metric's name, its value, its unit.
type Row = (String, f64, &'static str);

/// The hot counter's name in [`Patterns::rows`].
const HOT_COUNTER_ROW: &str = "`hot_counter_ops_per_s`";

/// What one server gave for every pattern.
#[derive(Clone, Debug, PartialEq)]
pub struct Patterns {
    /// Median latencies in µs, keyed as [`LATENCY_KEYS`].
    pub latencies: Vec<(&'static str, f64)>,
    /// 64 ranks accumulating into rank 0's element 0, a flush after every op: total ops/s.
    pub hot_counter_ops_per_s: f64,
    /// One put of the bulk size inside lock/unlock: MiB/s.
    pub bulk_put_mib_per_s: f64,
    /// When one put of the bulk size failed: why.
    pub bulk_single_put_failed: Option<String>,
    /// The same bulk put from a buffer the caller shares (`put_bytes`): MiB/s.
    pub bulk_put_shared_mib_per_s: f64,
    /// Fence epochs with one put per rank: (ranks, median µs per epoch).
    pub fence_scaling_us: Vec<(u32, f64)>,
}

impl Patterns {
    /// The median latency of the pattern `key` (one of [`LATENCY_KEYS`]), or NaN.
    fn latency(&self, key: &str) -> f64 {
        self.latencies
            .iter()
            .find(|(other, _)| *other == key)
            .map_or(f64::NAN, |(_, us)| *us)
    }

    /// Every pattern against a server started in this process with `audit` into `database`.
    async fn in_process(
        options: &Options,
        audit: Audit,
        database: Option<String>,
    ) -> anyhow::Result<Self> {
        let server = InProcess::start(audit, database, options.server_threads)
            .await
            .context("cannot start the in-process server")?;
        let bench = measure::Bench::connect(&server.url, &server.admin_token, options).await?;
        Patterns::measure(&bench, options).await
    }

    async fn measure(bench: &measure::Bench, options: &Options) -> anyhow::Result<Self> {
        let latencies = latencies(bench).await?;
        let hot_counter_ops_per_s = bench.hot_counter().await.context("hot counter")?;
        let (bulk_put_mib_per_s, bulk_single_put_failed) = bench
            .bulk_put(options.bulk_bytes())
            .await
            .context("bulk put")?;
        let (bulk_put_shared_mib_per_s, _) = bench
            .bulk_put_shared(options.bulk_bytes())
            .await
            .context("bulk put from a shared buffer")?;
        let mut fence_scaling_us = Vec::new();
        for &ranks in options.scaling_ranks() {
            let value = bench
                .fence_scaling(ranks)
                .await
                .with_context(|| format!("fence scaling at {ranks} ranks"))?;
            fence_scaling_us.push((ranks, value));
        }
        Ok(Patterns {
            latencies,
            hot_counter_ops_per_s,
            bulk_put_mib_per_s,
            bulk_single_put_failed,
            bulk_put_shared_mib_per_s,
            fence_scaling_us,
        })
    }

    /// The figures by key, as in the report's JSON.
    fn to_json(&self) -> Map<String, Value> {
        let mut object = Map::new();
        for (key, value) in &self.latencies {
            object.insert((*key).into(), json!(value));
        }
        object.insert(
            "hot_counter_ops_per_s".into(),
            json!(self.hot_counter_ops_per_s),
        );
        object.insert("bulk_put_mib_per_s".into(), json!(self.bulk_put_mib_per_s));
        object.insert(
            "bulk_put_shared_mib_per_s".into(),
            json!(self.bulk_put_shared_mib_per_s),
        );
        let scaling: Map<String, Value> = self
            .fence_scaling_us
            .iter()
            .map(|(ranks, value)| (ranks.to_string(), json!(value)))
            .collect();
        object.insert("fence_scaling_us".into(), Value::Object(scaling));
        object
    }

    /// Every figure with its key (fence scaling as `fence_scaling_us N ranks`) and unit.
    fn rows(&self) -> Vec<Row> {
        let mut rows: Vec<Row> = self
            .latencies
            .iter()
            .map(|(key, value)| (format!("`{key}`"), *value, "µs"))
            .collect();
        rows.push((HOT_COUNTER_ROW.into(), self.hot_counter_ops_per_s, "ops/s"));
        rows.push((
            "`bulk_put_mib_per_s`".into(),
            self.bulk_put_mib_per_s,
            "MiB/s",
        ));
        rows.push((
            "`bulk_put_shared_mib_per_s`".into(),
            self.bulk_put_shared_mib_per_s,
            "MiB/s",
        ));
        for (ranks, value) in &self.fence_scaling_us {
            rows.push((format!("`fence_scaling_us` {ranks} ranks"), *value, "µs"));
        }
        rows
    }
}

/// Installs a tracing subscriber like `onesided-server`'s, its output on stderr: an in-process
/// server then pays for its spans what the server binary pays. Without a subscriber every span
/// of the server's and h2's also checks the `log` crate's level (tracing's `log` feature, which
/// sqlx enables) at each creation, entry, exit and drop: about 15 k instructions per hot-counter
/// operation (94.4 k → 79.7 k, callgrind) that the server binary never executes. With `RUST_LOG`
/// it filters as the server would; without it, spans are enabled up to `info` as the server's
/// default enables them, but events only from `warn` up, so that the runs' thousands of session
/// attach and detach lines do not bury the bench's own output (one per session, not per
/// operation). Does nothing when a subscriber is already installed.
pub fn trace_as_the_server() {
    use tracing_subscriber::filter::{filter_fn, LevelFilter};
    use tracing_subscriber::prelude::*;
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(filter) => tracing_subscriber::registry()
            .with(layer.with_filter(filter))
            .try_init(),
        Err(_) => {
            let filter = filter_fn(|meta| {
                *meta.level() <= LevelFilter::WARN
                    || (meta.is_span() && *meta.level() <= LevelFilter::INFO)
            })
            .with_max_level_hint(LevelFilter::INFO);
            tracing_subscriber::registry()
                .with(layer.with_filter(filter))
                .try_init()
        }
    };
}

/// Runs every pattern and every reference.
///
/// # Errors
/// When the server cannot be started or reached, or an RMA call fails.
pub async fn run(options: &Options) -> anyhow::Result<Report> {
    let awake = options
        .keep_awake
        .then(awake::KeepAwake::start)
        .transpose()?;
    let (audit, patterns) = match &options.remote {
        Some((url, token)) => {
            let bench = measure::Bench::connect(url, token, options).await?;
            let patterns = Patterns::measure(&bench, options).await?;
            let audit = if bench.audited {
                "remote-audited"
            } else {
                "remote"
            };
            (audit.to_string(), patterns)
        }
        None => {
            let database = options.database_url.clone();
            let patterns = Patterns::in_process(options, options.audit, database).await?;
            (options.audit.name().to_string(), patterns)
        }
    };
    // side by side: the same patterns with every answer waiting for its audit commit, first
    // in the server's default configuration (SQLite), then into PostgreSQL when given
    let side_by_side = options.remote.is_none() && options.audit == Audit::Off;
    let sync_sqlite = if side_by_side {
        let patterns = Patterns::in_process(options, Audit::Sync, options.sqlite_url())
            .await
            .context("the run with the audit in sync mode into SQLite")?;
        Some(patterns)
    } else {
        None
    };
    let (sync_postgres, off_without_spinners) = match (side_by_side, options.postgres_url()) {
        (true, Some(url)) => {
            let _paused = awake.as_ref().map(awake::KeepAwake::pause).transpose()?;
            // the off side of PostgreSQL's latency targets, in the machine state its sync run
            // has: idle CPUs may halt, and a wake-up costs every round trip alike
            let off_without_spinners = match &awake {
                Some(_) => Some(
                    BusyPolled::in_process(options, None)
                        .await
                        .context("the off latencies without the spinners")?,
                ),
                None => None,
            };
            let sync = Patterns::in_process(options, Audit::Sync, Some(url.to_string()))
                .await
                .context("the run with the audit in sync mode into PostgreSQL")?;
            (Some(sync), off_without_spinners)
        }
        _ => (None, None),
    };
    let busy_poll = match (side_by_side, options.busy_poll) {
        (true, Some(budget)) => Some(
            BusyPolled::measure(options, budget)
                .await
                .context("the busy-polling run")?,
        ),
        _ => None,
    };
    let bulk_bytes = options.bulk_bytes();
    let (bulk_rss, bulk_rss_missing) = if side_by_side {
        let measured = match rss::server_binary() {
            Ok(binary) => rss::bulk_rss(&binary, options.rss_put_bytes()).await,
            Err(why) => Err(why),
        };
        match measured {
            Ok(rss) => (Some(rss), None),
            Err(why) => (None, Some(format!("{why:#}"))),
        }
    } else {
        (
            None,
            Some("measured only in-process with the audit off".to_string()),
        )
    };

    let iterations = options.iterations;
    let storage_iterations = storage::iterations(iterations);
    tokio::task::spawn_blocking(storage::settle).await?;
    let fdatasync_us = tokio::task::spawn_blocking(move || storage::fdatasync(storage_iterations))
        .await?
        .context("the fdatasync reference")?;
    // right after fdatasync_us and before the bulk write dirties the disk, so that the two
    // durable-write references see the same disk: Redis fdatasyncs its appendonly file once
    // per reply with one client
    let requests = if options.quick { 2_000 } else { 20_000 };
    let redis_durable = tokio::task::spawn_blocking(move || redis::durable(requests)).await?;
    let (redis_durable, redis_durable_missing) = match redis_durable {
        Ok(durable) => (Some(durable), None),
        Err(why) => (None, Some(format!("{why:#}"))),
    };
    let sqlite_commit_us = storage::sqlite_commit(storage_iterations)
        .await
        .context("the SQLite commit reference")?;
    let per_stream = measure::hot_counter_per_rank(iterations, options.quick);
    let sqlite_floors = grpc::commit_floors(
        options.server_threads,
        grpc::FloorStore::Sqlite,
        storage_iterations,
        per_stream,
    )
    .await
    .context("the floors into SQLite")?;
    let disk_write_bytes = options.disk_write_bytes();
    let disk_write_mib_per_s =
        tokio::task::spawn_blocking(move || storage::disk_write(disk_write_bytes))
            .await?
            .context("the disk write reference")?;
    let (pg_commit, pg_floors) = match options.postgres_url() {
        Some(url) => {
            let _paused = awake.as_ref().map(awake::KeepAwake::pause).transpose()?;
            let bulk = storage::PgBulk {
                bytes: bulk_bytes,
                repeats: measure::bulk_repeats(options.quick),
            };
            let commit = storage::pg_commit(url, storage_iterations, bulk)
                .await
                .context("the PostgreSQL commit reference")?;
            let floors = grpc::commit_floors(
                options.server_threads,
                grpc::FloorStore::Postgres(url.to_string()),
                storage_iterations,
                per_stream,
            )
            .await
            .context("the floors into PostgreSQL")?;
            (Some(commit), Some(floors))
        }
        None => (None, None),
    };
    let raw_tcp_pingpong_us =
        tokio::task::spawn_blocking(move || reference::tcp_pingpong(iterations))
            .await?
            .context("raw TCP ping-pong")?;
    let messages = options.tcp_bulk_messages();
    let raw_tcp_bulk_mib_per_s = tokio::task::spawn_blocking(move || reference::tcp_bulk(messages))
        .await?
        .context("raw TCP bulk")?;
    let grpc = grpc::floor(
        options.server_threads,
        iterations,
        measure::hot_counter_per_rank(iterations, options.quick),
        bulk_bytes,
        measure::bulk_repeats(options.quick),
    )
    .await
    .context("the bare gRPC echo")?;
    let mut grpc_barrier_us = Vec::new();
    for &ranks in options.scaling_ranks() {
        let us = grpc::barrier_floor(options.server_threads, ranks, iterations, options.quick)
            .await
            .context("the bare gRPC barrier")?;
        grpc_barrier_us.push((ranks, us));
    }
    let limit = mpich::time_limit(iterations);
    let mpich =
        tokio::task::spawn_blocking(move || mpich::run(iterations, bulk_bytes, limit)).await?;
    let (mpich, mpich_missing) = match mpich {
        Ok(mpich) => (Some(mpich), None),
        Err(why) => (None, Some(format!("{why:#}"))),
    };
    let redis = tokio::task::spawn_blocking(move || reference::redis(requests)).await?;
    let (redis_get_set_us, redis_incr_50_clients_per_s, redis_missing) = match redis {
        Ok((get_set, incr)) => (Some(get_set), Some(incr), None),
        Err(why) => (None, None, Some(format!("{why:#}"))),
    };
    let client_runtime = tokio::runtime::Handle::current();
    let client_threads = match client_runtime.runtime_flavor() {
        tokio::runtime::RuntimeFlavor::CurrentThread => 1,
        _ => client_runtime.metrics().num_workers(),
    };
    Ok(Report {
        audit,
        iterations,
        server_threads: options
            .remote
            .is_none()
            .then(|| options.server_threads.count()),
        client_threads,
        keep_awake: options.keep_awake,
        patterns,
        bulk_bytes,
        sync_sqlite,
        sync_postgres,
        off_without_spinners,
        busy_poll,
        bulk_rss,
        bulk_rss_missing,
        fdatasync_us,
        sqlite_commit_us,
        sqlite_floors,
        pg_floors,
        disk_write_mib_per_s,
        disk_write_bytes,
        pg_commit,
        raw_tcp_pingpong_us,
        raw_tcp_bulk_mib_per_s,
        grpc,
        grpc_barrier_us,
        mpich,
        mpich_missing,
        redis_get_set_us,
        redis_incr_50_clients_per_s,
        redis_missing,
        redis_durable,
        redis_durable_missing,
    })
}

fn met(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "not met"
    }
}

fn ratio(value: f64, reference: Option<f64>) -> String {
    match reference {
        Some(reference) if reference > 0.0 => format!("{:.2}×", value / reference),
        _ => "—".to_string(),
    }
}

fn number(value: Option<f64>) -> Value {
    value.map_or(Value::Null, Value::from)
}

/// Issue 12's target for a `sync` latency whose `off` figure is `off_us`, against a storage
/// reference of `reference_us`.
pub fn latency_target(off_us: f64, reference_us: f64) -> f64 {
    off_us + SYNC_TARGET_REFERENCES * reference_us
}

/// `patterns` with the latencies of `latencies` in place of its own, key by key (a key that
/// `latencies` lacks keeps its figure).
fn with_latencies(patterns: &Patterns, latencies: &[(&'static str, f64)]) -> Patterns {
    let mut replaced = patterns.clone();
    for (key, value) in &mut replaced.latencies {
        if let Some((_, other)) = latencies.iter().find(|(other, _)| other == key) {
            *value = *other;
        }
    }
    replaced
}

/// `figure(off, sync)` of every latency (µs) figure, keyed as in the report's JSON: the
/// patterns of [`LATENCY_KEYS`], and `fence_scaling_us` as an object by ranks.
fn per_latency(
    off: &Patterns,
    sync: &Patterns,
    figure: impl Fn(f64, f64) -> Value,
) -> Map<String, Value> {
    let mut object: Map<String, Value> = off
        .latencies
        .iter()
        .zip(&sync.latencies)
        .map(|((key, off), (_, synced))| ((*key).to_string(), figure(*off, *synced)))
        .collect();
    let scaling: Map<String, Value> = off
        .fence_scaling_us
        .iter()
        .zip(&sync.fence_scaling_us)
        .map(|((ranks, off), (_, synced))| (ranks.to_string(), figure(*off, *synced)))
        .collect();
    object.insert("fence_scaling_us".into(), Value::Object(scaling));
    object
}

/// Where a `sync` run's audit goes, and so which storage reference its target is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Store {
    Sqlite,
    Postgres,
}

impl Store {
    fn name(self) -> &'static str {
        match self {
            Store::Sqlite => "sqlite",
            Store::Postgres => "postgres",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Store::Sqlite => "sync SQLite",
            Store::Postgres => "sync PostgreSQL",
        }
    }

    fn reference_key(self) -> &'static str {
        match self {
            Store::Sqlite => "fdatasync_us",
            Store::Postgres => "pg_commit_us",
        }
    }

    fn floor_key(self) -> &'static str {
        match self {
            Store::Sqlite => "commit_echo_us",
            Store::Postgres => "pg_commit_echo_us",
        }
    }

    fn hot_counter_floor_key(self) -> &'static str {
        match self {
            Store::Sqlite => "commit_streams_per_s",
            Store::Postgres => "pg_commit_streams_per_s",
        }
    }
}

impl Report {
    /// One JSON object: every metric by its key, the references both at the top level and
    /// under `"references"`, plus `"audit"` and `"iterations"`. MPICH's figures are an object
    /// under `references.mpich` only (`null`, with `references.mpich_missing` saying why, when
    /// it was not measured).
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("audit".into(), json!(self.audit));
        object.insert("iterations".into(), json!(self.iterations));
        object.insert("server_threads".into(), json!(self.server_threads));
        object.insert("client_threads".into(), json!(self.client_threads));
        object.insert("keep_awake".into(), json!(self.keep_awake));
        // the latencies, hot counter, bulk and fence scaling, as the sync run has them
        object.extend(self.patterns.to_json());
        object.insert("bulk_put_bytes".into(), json!(self.bulk_bytes));
        object.insert(
            "bulk_put_single_message".into(),
            json!(self.patterns.bulk_single_put_failed.is_none()),
        );
        object.insert(
            "bulk_put_single_failure".into(),
            json!(self.patterns.bulk_single_put_failed),
        );
        let sync_sqlite = self
            .sync_sqlite
            .as_ref()
            .map(|sync| self.sync_json(sync, Store::Sqlite));
        let sync_postgres = self
            .sync_postgres
            .as_ref()
            .map(|sync| self.sync_json(sync, Store::Postgres));
        // `sync` as before the SQLite run was added: the run into --database-url when there
        // is one, else the only sync run
        let sync = sync_postgres.clone().or_else(|| sync_sqlite.clone());
        object.insert("sync".into(), sync.unwrap_or(Value::Null));
        object.insert("sync_sqlite".into(), sync_sqlite.unwrap_or(Value::Null));
        object.insert("sync_postgres".into(), sync_postgres.unwrap_or(Value::Null));
        let rss = self.bulk_rss.as_ref();
        object.insert(
            "bulk_peak_rss_mib".into(),
            number(rss.map(|rss| rss.off_mib)),
        );
        object.insert(
            "bulk_rss".into(),
            rss.map_or(Value::Null, |rss| {
                json!({
                    "put_mib": rss.put_mib,
                    "window_mib": rss.window_mib,
                    "target_mib": rss.target_mib,
                    "off_mib": rss.off_mib,
                    "sync_mib": rss.sync_mib,
                    "off_met": rss.off_mib <= rss.target_mib,
                    "sync_met": rss.sync_mib <= rss.target_mib,
                    "sync_store_bytes_per_byte": rss.sync_store_bytes_per_byte,
                })
            }),
        );
        object.insert("bulk_rss_missing".into(), json!(self.bulk_rss_missing));
        object.insert(
            "busy_poll".into(),
            self.busy_poll
                .as_ref()
                .map_or(Value::Null, |polled| self.busy_poll_json(polled)),
        );
        let mut references = json!({
            "raw_tcp_pingpong_us": self.raw_tcp_pingpong_us,
            "raw_tcp_bulk_mib_per_s": self.raw_tcp_bulk_mib_per_s,
            "grpc_echo_us": self.grpc.echo_us,
            "grpc_64_streams_per_s": self.grpc.streams_per_s,
            "grpc_bulk_mib_per_s": self.grpc.bulk_mib_per_s,
            "grpc_barrier_us": self
                .grpc_barrier_us
                .iter()
                .map(|(ranks, us)| (ranks.to_string(), json!(us)))
                .collect::<Map<String, Value>>(),
            "redis_get_set_us": number(self.redis_get_set_us),
            "redis_incr_50_clients_per_s": number(self.redis_incr_50_clients_per_s),
            "redis_durable_incr_1_client_p50_us": number(
                self.redis_durable.as_ref().map(|redis| redis.incr_1_client_p50_us)
            ),
            "redis_durable_incr_1_client_per_s": number(
                self.redis_durable.as_ref().map(|redis| redis.incr_1_client_per_s)
            ),
            "redis_durable_incr_50_clients_per_s": self.redis_durable_50_clients(),
            "redis_durable_missing": self.redis_durable_missing,
            "fdatasync_us": self.fdatasync_us,
            "sqlite_commit_us": self.sqlite_commit_us,
            "commit_echo_us": self.sqlite_floors.echo_us,
            "pg_commit_echo_us": number(self.pg_floors.map(|floors| floors.echo_us)),
            "commit_streams_per_s": self.sqlite_floors.streams_per_s,
            "pg_commit_streams_per_s": number(self.pg_floors.map(|floors| floors.streams_per_s)),
            "disk_write_mib_per_s": self.disk_write_mib_per_s,
            "disk_write_bytes": self.disk_write_bytes,
            "pg_commit_us": number(self.pg_commit.as_ref().map(|commit| commit.median_us)),
            "pg_insert_mib_per_s": number(
                self.pg_commit.as_ref().map(|commit| commit.insert_mib_per_s)
            ),
            "pg_synchronous_commit": self
                .pg_commit
                .as_ref()
                .map(|commit| commit.synchronous_commit.clone()),
        });
        for (key, value) in references.as_object().expect("an object") {
            object.insert(key.clone(), value.clone());
        }
        references["mpich"] = self
            .mpich
            .as_ref()
            .map_or(Value::Null, mpich::Mpich::to_json);
        references["mpich_missing"] = json!(self.mpich_missing);
        object.insert("references".into(), references);
        Value::Object(object)
    }

    /// The busy-polling run's latencies by key, with `budget_us`, `server` (`"process"` or
    /// `"in-process"`), `plain` (the same patterns against a server of the same kind without
    /// busy-polling), `ratio_to_plain`, `ratio_to_mpich` (`null` without MPICH) and
    /// `ratio_to_raw_tcp` (by the raw TCP ping-pong).
    fn busy_poll_json(&self, polled: &BusyPolled) -> Value {
        let mut object = Map::new();
        object.insert("budget_us".into(), json!(polled.budget.as_micros() as u64));
        object.insert("server".into(), json!(polled.server));
        let mut plain = Map::new();
        let mut to_plain = Map::new();
        let mut to_mpich = Map::new();
        let mut to_tcp = Map::new();
        for ((key, value), (_, without)) in polled.latencies.iter().zip(&polled.plain) {
            object.insert((*key).into(), json!(value));
            plain.insert((*key).into(), json!(without));
            to_plain.insert((*key).into(), json!(value / without));
            let mpich = self.mpich.as_ref().and_then(|m| m.latency(key));
            to_mpich.insert((*key).into(), number(mpich.map(|mpich| value / mpich)));
            to_tcp.insert((*key).into(), json!(value / self.raw_tcp_pingpong_us));
        }
        object.insert("plain".into(), Value::Object(plain));
        object.insert("ratio_to_plain".into(), Value::Object(to_plain));
        object.insert("ratio_to_mpich".into(), Value::Object(to_mpich));
        object.insert("ratio_to_raw_tcp".into(), Value::Object(to_tcp));
        Value::Object(object)
    }

    /// The durable Redis's INCR with 50 clients, requests/s, or `null`.
    fn redis_durable_50_clients(&self) -> Value {
        number(
            self.redis_durable
                .as_ref()
                .map(|redis| redis.incr_50_clients_per_s),
        )
    }

    /// The `off` figures a `sync` run into `store` is held to: the `off` run's, except that
    /// PostgreSQL's latencies, measured without the spinners, are held to `off` latencies
    /// measured without them too ([`Report::off_without_spinners`]).
    /// Also says which: `"off"` or `"off_without_spinners"`.
    fn off_for_targets(&self, store: Store) -> (Patterns, &'static str) {
        match (store, &self.off_without_spinners) {
            (Store::Postgres, Some(latencies)) => (
                with_latencies(&self.patterns, latencies),
                "off_without_spinners",
            ),
            _ => (self.patterns.clone(), "off"),
        }
    }

    /// The floors under `sync` into `store` (`None`: not measured).
    fn floors(&self, store: Store) -> Option<grpc::CommitFloors> {
        match store {
            Store::Sqlite => Some(self.sqlite_floors),
            Store::Postgres => self.pg_floors,
        }
    }

    /// The storage reference a `sync` run into `store` is held to, in µs (`None`: not measured).
    fn store_reference_us(&self, store: Store) -> Option<f64> {
        match store {
            Store::Sqlite => Some(self.fdatasync_us),
            Store::Postgres => self.pg_commit.as_ref().map(|commit| commit.median_us),
        }
    }

    /// A `sync` run's figures by key, with `ratio_to_off` (each figure divided by the `off`
    /// one), `store`, `target_reference` (the key of the storage reference), and, for every
    /// latency, `latency_target_us` (`off` + [`SYNC_TARGET_REFERENCES`] × that reference) and
    /// `latency_target_met` (the `sync` figure is within it), and
    /// `hot_counter_ratio_to_redis_durable` (the hot counter divided by the durable Redis's
    /// INCR with 50 clients, issue 12's stretch: ≥ 1; `null` without it).
    fn sync_json(&self, sync: &Patterns, store: Store) -> Value {
        let mut figures = sync.to_json();
        // the share of the off figure that sync keeps, per key (latency: how many times)
        let off = self.patterns.to_json();
        let mut ratios: Map<String, Value> = figures
            .iter()
            .filter_map(|(key, value)| {
                let ratio = value.as_f64()? / off.get(key)?.as_f64()?;
                Some((key.clone(), json!(ratio)))
            })
            .collect();
        let mut scaling_ratios =
            per_latency(&self.patterns, sync, |off, synced| json!(synced / off));
        if let Some(scaling) = scaling_ratios.remove("fence_scaling_us") {
            ratios.insert("fence_scaling_us".into(), scaling);
        }
        figures.insert("ratio_to_off".into(), Value::Object(ratios));
        // the server's memory in sync is measured with the default store only
        let rss = self.bulk_rss.as_ref().filter(|_| store == Store::Sqlite);
        figures.insert(
            "bulk_peak_rss_mib".into(),
            number(rss.map(|rss| rss.sync_mib)),
        );
        if store == Store::Postgres {
            // issue 12, item 3: PostgreSQL's own bulk INSERT is the floor of a sync bulk put
            let floor = self
                .pg_commit
                .as_ref()
                .map(|commit| commit.insert_mib_per_s);
            figures.insert(
                "bulk_ratio_to_pg_insert".into(),
                number(floor.map(|floor| sync.bulk_put_mib_per_s / floor)),
            );
        }
        figures.insert("store".into(), json!(store.name()));
        figures.insert("target_reference".into(), json!(store.reference_key()));
        // what a sync lock-put-unlock cannot go below with this store: the round trip and its
        // epoch's commit, and nothing else of onesided's
        figures.insert("floor_reference".into(), json!(store.floor_key()));
        let floors = self.floors(store);
        let floor = floors.map(|floors| floors.echo_us);
        figures.insert(
            "lock_put_unlock_ratio_to_floor".into(),
            number(floor.map(|floor| sync.latency("lock_put_unlock_us") / floor)),
        );
        // and what its hot counter cannot exceed: item 2 asks for 0.8 × off, which this floor
        // allows only when its own ratio to off reaches it
        figures.insert(
            "hot_counter_floor_reference".into(),
            json!(store.hot_counter_floor_key()),
        );
        let hot_floor = floors.map(|floors| floors.streams_per_s);
        figures.insert(
            "hot_counter_ratio_to_floor".into(),
            number(hot_floor.map(|floor| sync.hot_counter_ops_per_s / floor)),
        );
        figures.insert(
            "hot_counter_floor_ratio_to_off".into(),
            number(hot_floor.map(|floor| floor / self.patterns.hot_counter_ops_per_s)),
        );
        let reference = self.store_reference_us(store);
        let (off, which) = self.off_for_targets(store);
        figures.insert("off_for_targets".into(), json!(which));
        figures.insert(
            "off_for_targets_us".into(),
            Value::Object(per_latency(&off, sync, |off, _| json!(off))),
        );
        let targets = per_latency(&off, sync, |off, _| {
            number(reference.map(|reference| latency_target(off, reference)))
        });
        let met = per_latency(&off, sync, |off, synced| {
            reference.map_or(Value::Null, |reference| {
                json!(synced <= latency_target(off, reference))
            })
        });
        figures.insert("latency_target_us".into(), Value::Object(targets));
        figures.insert("latency_target_met".into(), Value::Object(met));
        // issue 12's stretch target for the hot counter: at least the durable Redis's INCR
        let durable = self.redis_durable_50_clients().as_f64();
        figures.insert(
            "hot_counter_ratio_to_redis_durable".into(),
            number(durable.map(|rps| sync.hot_counter_ops_per_s / rps)),
        );
        Value::Object(figures)
    }

    /// A Markdown table: metric, value, the reference it is compared with and the ratio, then
    /// MPICH's figure for the same pattern and the ratio ours / MPICH.
    pub fn table(&self) -> String {
        let tcp = Some(self.raw_tcp_pingpong_us);
        let mpich = |key: &str| self.mpich.as_ref().and_then(|m| m.latency(key));
        let mpich_cells = |value: f64, reference: Option<f64>, unit: &str| match reference {
            Some(reference) => format!("{reference:.1} {unit} | {}", ratio(value, Some(reference))),
            None => "— | —".to_string(),
        };
        let mut out = format!(
            "onesided-bench: audit {}, {} iterations per latency pattern (median after warm-up), \
             server threads {}, client threads {}{}\n\n",
            self.audit,
            self.iterations,
            self.server_threads
                .map_or_else(|| "remote".to_string(), |n| n.to_string()),
            self.client_threads,
            if self.keep_awake {
                ", CPUs kept awake"
            } else {
                ""
            }
        );
        out.push_str(
            "| metric | value | reference | ratio | MPICH | ours / MPICH |\n\
             |---|---|---|---|---|---|\n",
        );
        let tcp_name = format!("raw TCP ping-pong {:.1} µs", self.raw_tcp_pingpong_us);
        for (key, value) in &self.patterns.latencies {
            out.push_str(&format!(
                "| `{key}` | {value:.1} µs | {tcp_name} | {} | {} |\n",
                ratio(*value, tcp),
                mpich_cells(*value, mpich(key), "µs")
            ));
        }
        let incr = match self.redis_incr_50_clients_per_s {
            Some(rps) => format!("Redis INCR 50 clients {rps:.0}/s"),
            None => "Redis INCR: not available".to_string(),
        };
        out.push_str(&format!(
            "| `hot_counter_ops_per_s` (64 ranks) | {:.0} ops/s | {incr} | {} | — | — |\n",
            self.patterns.hot_counter_ops_per_s,
            ratio(
                self.patterns.hot_counter_ops_per_s,
                self.redis_incr_50_clients_per_s
            )
        ));
        let how = match self.patterns.bulk_single_put_failed {
            None => "one put",
            Some(_) => "1 MiB puts, one epoch",
        };
        out.push_str(&format!(
            "| `bulk_put_mib_per_s` ({} MiB, {how}) | {:.0} MiB/s | raw TCP bulk {:.0} MiB/s | {} | {} |\n",
            self.bulk_bytes >> 20,
            self.patterns.bulk_put_mib_per_s,
            self.raw_tcp_bulk_mib_per_s,
            ratio(self.patterns.bulk_put_mib_per_s, Some(self.raw_tcp_bulk_mib_per_s)),
            mpich_cells(
                self.patterns.bulk_put_mib_per_s,
                self.mpich.as_ref().map(|m| m.bulk_put_mib_per_s),
                "MiB/s"
            )
        ));
        out.push_str(&format!(
            "| `bulk_put_shared_mib_per_s` ({} MiB, `put_bytes`) | {:.0} MiB/s | gRPC bulk {:.0} MiB/s | {} | — | — |\n",
            self.bulk_bytes >> 20,
            self.patterns.bulk_put_shared_mib_per_s,
            self.grpc.bulk_mib_per_s,
            ratio(self.patterns.bulk_put_shared_mib_per_s, Some(self.grpc.bulk_mib_per_s)),
        ));
        for (ranks, value) in &self.patterns.fence_scaling_us {
            out.push_str(&format!(
                "| `fence_scaling_us` {ranks} ranks | {value:.1} µs | {tcp_name} | {} | — | — |\n",
                ratio(*value, tcp)
            ));
        }
        out.push_str(&format!(
            "| `raw_tcp_pingpong_us` | {:.1} µs | | | | |\n",
            self.raw_tcp_pingpong_us
        ));
        out.push_str(&format!(
            "| `raw_tcp_bulk_mib_per_s` (4 MiB messages) | {:.0} MiB/s | | | | |\n",
            self.raw_tcp_bulk_mib_per_s
        ));
        let grpc = &self.grpc;
        out.push_str(&format!(
            "| `grpc_echo_us` (bare tonic stream, 8 B each way) | {:.1} µs | {tcp_name} | {} | | |\n",
            grpc.echo_us,
            ratio(grpc.echo_us, tcp)
        ));
        for (ranks, us) in &self.grpc_barrier_us {
            let ours = self
                .patterns
                .fence_scaling_us
                .iter()
                .find(|(size, _)| size == ranks)
                .map(|(_, ours)| *ours);
            out.push_str(&format!(
                "| `grpc_barrier_us` {ranks} ranks ({ranks} such streams, each answer after all {ranks} messages of the round) | {us:.1} µs | `fence_scaling_us` {ranks} ranks | {} | | |\n",
                ratio(*us, ours)
            ));
        }
        out.push_str(&format!(
            "| `grpc_64_streams_per_s` (64 such streams at once) | {:.0}/s | {incr} | {} | | |\n",
            grpc.streams_per_s,
            ratio(grpc.streams_per_s, self.redis_incr_50_clients_per_s)
        ));
        out.push_str(&format!(
            "| `grpc_bulk_mib_per_s` (1 MiB messages, each acknowledged) | {:.0} MiB/s | raw TCP bulk {:.0} MiB/s | {} | | |\n",
            grpc.bulk_mib_per_s,
            self.raw_tcp_bulk_mib_per_s,
            ratio(grpc.bulk_mib_per_s, Some(self.raw_tcp_bulk_mib_per_s))
        ));
        out.push_str(&format!(
            "| `fdatasync_us` (200 B append + fdatasync, data dir's file system) | {:.1} µs | | | | |\n",
            self.fdatasync_us
        ));
        out.push_str(&format!(
            "| `sqlite_commit_us` (9 rows, one commit, WAL + synchronous=FULL, one connection) | {:.1} µs | `fdatasync_us` | {} | | |\n",
            self.sqlite_commit_us,
            ratio(self.sqlite_commit_us, Some(self.fdatasync_us))
        ));
        out.push_str(&format!(
            "| `commit_echo_us` (bare tonic stream answering after a lock-put-unlock's 9 audit rows are committed, SQLite) | {:.1} µs | `fdatasync_us` | {} | | |\n",
            self.sqlite_floors.echo_us,
            ratio(self.sqlite_floors.echo_us, Some(self.fdatasync_us))
        ));
        out.push_str(&format!(
            "| `commit_streams_per_s` (64 such streams, each round trip after a hot-counter operation's 5 rows are committed in groups, SQLite) | {:.0}/s | `grpc_64_streams_per_s` | {} | | |\n",
            self.sqlite_floors.streams_per_s,
            ratio(self.sqlite_floors.streams_per_s, Some(self.grpc.streams_per_s))
        ));
        let quick = if self.disk_write_bytes < 256 << 20 {
            ", --quick"
        } else {
            ""
        };
        out.push_str(&format!(
            "| `disk_write_mib_per_s` ({} MiB in {} MiB writes + fdatasync{quick}) | {:.0} MiB/s | | | | |\n",
            self.disk_write_bytes >> 20,
            storage::WRITE_CHUNK >> 20,
            self.disk_write_mib_per_s
        ));
        match &self.pg_commit {
            Some(commit) => {
                out.push_str(&format!(
                    "| `pg_commit_us` (1-row INSERT, autocommit, synchronous_commit {}) | {:.1} µs | | | | |\n",
                    commit.synchronous_commit, commit.median_us
                ));
                out.push_str(&format!(
                    "| `pg_insert_mib_per_s` (1-row INSERT of {} MiB, autocommit) | {:.0} MiB/s | | | | |\n",
                    self.bulk_bytes >> 20,
                    commit.insert_mib_per_s
                ));
                if let Some(floors) = self.pg_floors {
                    out.push_str(&format!(
                        "| `pg_commit_echo_us` (the same as `commit_echo_us`, into PostgreSQL) | {:.1} µs | `pg_commit_us` | {} | | |\n\
                         | `pg_commit_streams_per_s` (the same as `commit_streams_per_s`, into PostgreSQL) | {:.0}/s | `grpc_64_streams_per_s` | {} | | |\n",
                        floors.echo_us,
                        ratio(floors.echo_us, Some(commit.median_us)),
                        floors.streams_per_s,
                        ratio(floors.streams_per_s, Some(self.grpc.streams_per_s))
                    ));
                }
            }
            None => out.push_str(
                "| `pg_commit_us` | not measured (no PostgreSQL --database-url) | | | | |\n",
            ),
        }
        match (self.redis_get_set_us, self.redis_incr_50_clients_per_s) {
            (Some(get_set), Some(incr)) => {
                out.push_str(&format!(
                    "| `redis_get_set_us` (p50, 1 client) | {get_set:.1} µs | | | | |\n"
                ));
                out.push_str(&format!(
                    "| `redis_incr_50_clients_per_s` | {incr:.0}/s | | | | |\n"
                ));
            }
            _ => {
                out.push_str("| `redis_get_set_us` | not available | | | | |\n");
                out.push_str("| `redis_incr_50_clients_per_s` | not available | | | | |\n");
            }
        }
        match &self.redis_durable {
            Some(redis) => {
                let p50 = if redis.p50_from_csv {
                    "p50"
                } else {
                    "mean 1/rps: no p50 in the CSV"
                };
                out.push_str(&format!(
                    "| `redis_durable_incr_1_client_p50_us` (appendfsync always, {p50}) | {:.1} µs | | | | |\n\
                     | `redis_durable_incr_1_client_per_s` (appendfsync always) | {:.0}/s | | | | |\n\
                     | `redis_durable_incr_50_clients_per_s` (appendfsync always) | {:.0}/s | | | | |\n",
                    redis.incr_1_client_p50_us,
                    redis.incr_1_client_per_s,
                    redis.incr_50_clients_per_s
                ));
            }
            None => {
                for key in [
                    "redis_durable_incr_1_client_p50_us",
                    "redis_durable_incr_1_client_per_s",
                    "redis_durable_incr_50_clients_per_s",
                ] {
                    out.push_str(&format!("| `{key}` | not available | | | | |\n"));
                }
            }
        }
        if let Some(mpich) = &self.mpich {
            let environment: Vec<String> = mpich
                .environment
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect();
            let segments = match mpich.tcp_segments_sent {
                Some(n) => format!("; {n} TCP segments sent during its run"),
                None => String::new(),
            };
            let finalize = if mpich.hung_in_finalize {
                "; hung in MPI_Finalize after its figures and was killed"
            } else {
                ""
            };
            out.push_str(&format!(
                "\nMPICH {}: {} ({}){segments}{finalize}\n",
                mpich.version,
                mpich.transport,
                environment.join(" ")
            ));
        }
        if let Some(why) = &self.patterns.bulk_single_put_failed {
            out.push_str(&format!(
                "\nOne {} MiB put failed: {why}\n",
                self.bulk_bytes >> 20
            ));
        }
        if let Some(why) = &self.mpich_missing {
            out.push_str(&format!("\nMPICH not measured: {why}\n"));
        }
        if let Some(why) = &self.redis_missing {
            out.push_str(&format!("\nRedis not measured: {why}\n"));
        }
        if let Some(why) = &self.redis_durable_missing {
            out.push_str(&format!(
                "\nDurable Redis (appendfsync always) not measured: {why}\n"
            ));
        }
        out.push_str(&self.sync_table());
        out.push_str(&self.rss_table());
        out.push_str(&self.busy_poll_table());
        out
    }

    /// The server's peak memory during one bulk put, off and sync, against issue 12's bound.
    fn rss_table(&self) -> String {
        match (&self.bulk_rss, &self.bulk_rss_missing) {
            (Some(rss), _) => format!(
                "\nServer peak RSS (`bulk_peak_rss_mib`, an `onesided-server` process) during one \
                 {:.0} MiB put into a window of {:.0} MiB: audit off {:.0} MiB, sync SQLite {:.0} \
                 MiB; bound (window + put) {:.0} MiB: off {}, sync {}. In sync the data directory grew \
                 by {:.2} bytes per byte put (issue 12: at most 1.1)\n",
                rss.put_mib,
                rss.window_mib,
                rss.off_mib,
                rss.sync_mib,
                rss.target_mib,
                met(rss.off_mib <= rss.target_mib),
                met(rss.sync_mib <= rss.target_mib),
                rss.sync_store_bytes_per_byte,
            ),
            (None, Some(why)) => format!("\nServer peak RSS not measured: {why}\n"),
            (None, None) => String::new(),
        }
    }

    /// With `--busy-poll`: the latencies busy-polling beside the plain ones, MPICH's and the
    /// raw TCP ping-pong (empty without it).
    fn busy_poll_table(&self) -> String {
        let Some(polled) = &self.busy_poll else {
            return String::new();
        };
        let server = match polled.server {
            "process" => "an onesided-server process of its own, one thread",
            _ => "in this process (no onesided-server binary found)",
        };
        let mut out = format!(
            "\nBusy-polling {} µs (server and sessions) beside the same patterns without, audit \
             off, the server {server}:\n\n\
             | metric | plain | busy-poll | busy-poll / plain | MPICH | busy-poll / MPICH | busy-poll / raw TCP ping-pong |\n\
             |---|---|---|---|---|---|---|\n",
            polled.budget.as_micros()
        );
        for ((key, value), (_, plain)) in polled.latencies.iter().zip(&polled.plain) {
            let mpich = self.mpich.as_ref().and_then(|m| m.latency(key));
            out.push_str(&format!(
                "| `{key}` | {plain:.1} µs | {value:.1} µs | {} | {} | {} | {} |\n",
                ratio(*value, Some(*plain)),
                mpich.map_or_else(|| "—".to_string(), |m| format!("{m:.1} µs")),
                ratio(*value, mpich),
                ratio(*value, Some(self.raw_tcp_pingpong_us)),
            ));
        }
        out
    }

    /// The `sync` runs beside the `off` one: per metric, each run's figure, its ratio to `off`,
    /// and for latencies issue 12's target and whether it is met. Empty without a `sync` run.
    fn sync_table(&self) -> String {
        let runs: Vec<(Store, &Patterns)> = [
            (Store::Sqlite, self.sync_sqlite.as_ref()),
            (Store::Postgres, self.sync_postgres.as_ref()),
        ]
        .into_iter()
        .filter_map(|(store, run)| Some((store, run?)))
        .collect();
        if runs.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "\nThe same patterns with the audit in sync mode (every answer after its commit), \
             in the same run; sync SQLite is the server's default configuration. Target (issue \
             12, reported, not asserted): off + ",
        );
        let references: Vec<String> = runs
            .iter()
            .map(|(store, _)| {
                let reference = self
                    .store_reference_us(*store)
                    .map_or_else(|| "not measured".to_string(), |us| format!("{us:.1} µs"));
                format!(
                    "{SYNC_TARGET_REFERENCES} × `{}` ({reference}) for {}",
                    store.reference_key(),
                    store.label()
                )
            })
            .collect();
        out.push_str(&references.join(", "));
        if let (Some(latencies), true) = (&self.off_without_spinners, self.sync_postgres.is_some())
        {
            let figures: Vec<String> = latencies
                .iter()
                .map(|(key, us)| format!("`{key}` {us:.1} µs"))
                .collect();
            out.push_str(&format!(
                ". sync PostgreSQL runs with the spinners stopped, as its references do, so its \
                 latency targets take `off` measured without them too ({})",
                figures.join(", ")
            ));
        }
        out.push_str(&match &self.redis_durable {
            Some(redis) => format!(
                ". Stretch for the hot counter: at least Redis INCR with `appendfsync always` and \
                 50 clients ({:.0}/s, `redis_durable_incr_50_clients_per_s`)",
                redis.incr_50_clients_per_s
            ),
            None => {
                ". Durable Redis not measured, so no stretch target for the hot counter".to_string()
            }
        });
        out.push_str(".\n\n| metric | audit off |");
        let mut rule = String::from("|---|---|");
        for (store, _) in &runs {
            out.push_str(&format!(" {} | sync / off | target | met |", store.label()));
            rule.push_str("---|---|---|---|");
        }
        out.push('\n');
        out.push_str(&rule);
        out.push('\n');
        let run_rows: Vec<(Store, Vec<Row>, Vec<Row>)> = runs
            .iter()
            .map(|(store, run)| (*store, run.rows(), self.off_for_targets(*store).0.rows()))
            .collect();
        for (index, (name, off, unit)) in self.patterns.rows().into_iter().enumerate() {
            out.push_str(&format!("| {name} | {off:.1} {unit} |"));
            for (store, rows, targets_off) in &run_rows {
                let synced = rows[index].1;
                let target = match (unit, self.store_reference_us(*store)) {
                    ("µs", Some(reference)) => {
                        Some(latency_target(targets_off[index].1, reference))
                    }
                    _ => None,
                };
                let durable = self.redis_durable_50_clients().as_f64();
                let (target, met) = match (target, durable) {
                    (Some(target), _) => (
                        format!("{target:.1} µs"),
                        if synced <= target { "yes" } else { "no" },
                    ),
                    // issue 12's stretch: the hot counter at least the durable Redis's INCR
                    (None, Some(rps)) if name == HOT_COUNTER_ROW => (
                        format!("stretch ≥ {rps:.0} ops/s (durable Redis INCR, 50 clients)"),
                        if synced >= rps { "yes" } else { "no" },
                    ),
                    (None, _) => ("—".to_string(), "—"),
                };
                out.push_str(&format!(
                    " {synced:.1} {unit} | {} | {target} | {met} |",
                    ratio(synced, Some(off))
                ));
            }
            out.push('\n');
        }
        for (store, run) in &runs {
            let Some(floors) = self.floors(*store) else {
                continue;
            };
            let synced = run.latency("lock_put_unlock_us");
            out.push_str(&format!(
                "\nFloor of a {} lock-put-unlock (the round trip and its epoch's commit, \
                 nothing else of onesided's): `{}` {:.1} µs; {synced:.1} µs is {} of it.",
                store.label(),
                store.floor_key(),
                floors.echo_us,
                ratio(synced, Some(floors.echo_us))
            ));
            out.push_str(&format!(
                "\nFloor of a {} hot counter (64 streams, each answered after its \
                 operation's rows are committed, in groups): `{}` {:.0}/s, {} of the \
                 `off` hot counter; {:.0} ops/s is {} of it.",
                store.label(),
                store.hot_counter_floor_key(),
                floors.streams_per_s,
                ratio(
                    floors.streams_per_s,
                    Some(self.patterns.hot_counter_ops_per_s)
                ),
                run.hot_counter_ops_per_s,
                ratio(run.hot_counter_ops_per_s, Some(floors.streams_per_s))
            ));
        }
        out.push('\n');
        out
    }
}

/// How long a many-rank pattern (hot counter, fence epochs) may take before it is reported
/// as stuck.
pub(crate) const PATTERN_TIMEOUT: Duration = Duration::from_secs(300);

/// One world size of a fence-scaling run ([`fence_scaling`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scaling {
    /// Ranks of the world.
    pub ranks: u32,
    /// Median µs per fence epoch (one put per rank) with the audit off.
    pub off_us: f64,
    /// The same into SQLite in `sync`, the server's default.
    pub sync_us: f64,
    /// The floor under both: a bare tonic echo of as many streams whose every answer waits for
    /// all the streams' messages of the round ([`grpc::barrier_us`]), median µs per round.
    pub floor_us: f64,
}

impl Scaling {
    /// µs per rank per epoch: every rank's client shares the machine's cores with the server,
    /// so a fence costs at least N round trips of CPU, and this stays flat when the server
    /// does O(N) work per fence.
    pub fn per_rank(value: f64, ranks: u32) -> f64 {
        value / f64::from(ranks)
    }
}

/// Fence scaling alone (`--fence-scaling`): for each world size in `ranks`, the fence epoch
/// against an in-process server with the audit off and one in `sync` into SQLite, measured
/// side by side (each size on both before the next size).
///
/// # Errors
/// When a server cannot be started or an RMA call fails.
pub async fn fence_scaling(options: &Options, ranks: &[u32]) -> anyhow::Result<Vec<Scaling>> {
    let _awake = options
        .keep_awake
        .then(awake::KeepAwake::start)
        .transpose()?;
    let off = server::InProcess::start(Audit::Off, None, options.server_threads)
        .await
        .context("cannot start the in-process server with the audit off")?;
    let sync = server::InProcess::start(Audit::Sync, options.sqlite_url(), options.server_threads)
        .await
        .context("cannot start the in-process server in sync")?;
    let off_bench = measure::Bench::connect(&off.url, &off.admin_token, options).await?;
    let sync_bench = measure::Bench::connect(&sync.url, &sync.admin_token, options).await?;
    let mut rows = Vec::new();
    for &nranks in ranks {
        let floor_us = grpc::barrier_floor(
            options.server_threads,
            nranks,
            options.iterations,
            options.quick,
        )
        .await?;
        let off_us = off_bench
            .fence_scaling(nranks)
            .await
            .with_context(|| format!("fence scaling at {nranks} ranks, audit off"))?;
        let sync_us = sync_bench
            .fence_scaling(nranks)
            .await
            .with_context(|| format!("fence scaling at {nranks} ranks, sync"))?;
        rows.push(Scaling {
            ranks: nranks,
            off_us,
            sync_us,
            floor_us,
        });
    }
    Ok(rows)
}

/// The rows of [`fence_scaling`] as a Markdown table, each per-rank time also as a ratio to
/// the per-rank time at the largest size of at most 64 ranks (issue 12's reference point).
pub fn scaling_table(rows: &[Scaling]) -> String {
    let reference = rows
        .iter()
        .filter(|row| row.ranks <= 64)
        .max_by_key(|row| row.ranks)
        .copied();
    let versus = |value: f64, ranks: u32, of: fn(&Scaling) -> f64| match reference {
        Some(reference) => ratio(
            Scaling::per_rank(value, ranks),
            Some(Scaling::per_rank(of(&reference), reference.ranks)),
        ),
        None => "—".to_string(),
    };
    let mut out = String::from(
        "| ranks | off µs/epoch | off µs/rank | vs ≤64 | sync µs/epoch | sync µs/rank | vs ≤64 | \
         floor µs/epoch | floor µs/rank | vs ≤64 |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        out.push_str(&format!(
            "| {} | {:.1} | {:.2} | {} | {:.1} | {:.2} | {} | {:.1} | {:.2} | {} |\n",
            row.ranks,
            row.off_us,
            Scaling::per_rank(row.off_us, row.ranks),
            versus(row.off_us, row.ranks, |r| r.off_us),
            row.sync_us,
            Scaling::per_rank(row.sync_us, row.ranks),
            versus(row.sync_us, row.ranks, |r| r.sync_us),
            row.floor_us,
            Scaling::per_rank(row.floor_us, row.ranks),
            versus(row.floor_us, row.ranks, |r| r.floor_us),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patterns(latencies: &[(&'static str, f64)]) -> Patterns {
        Patterns {
            latencies: latencies.to_vec(),
            hot_counter_ops_per_s: 1.0,
            bulk_put_mib_per_s: 2.0,
            bulk_single_put_failed: None,
            bulk_put_shared_mib_per_s: 3.0,
            fence_scaling_us: vec![(2, 4.0)],
        }
    }

    /// PostgreSQL's targets take the latencies measured without the spinners, key by key, and
    /// nothing else: the other figures, and a latency measured only with them, stay the `off`
    /// run's.
    #[test]
    fn latencies_measured_without_the_spinners_replace_only_their_own_keys() {
        let off = patterns(&[("lock_put_unlock_us", 20.0), ("fence_put_us", 40.0)]);
        let replaced = with_latencies(&off, &[("lock_put_unlock_us", 90.0)]);
        assert_eq!(
            replaced.latencies,
            vec![("lock_put_unlock_us", 90.0), ("fence_put_us", 40.0)]
        );
        assert_eq!(replaced.fence_scaling_us, off.fence_scaling_us);
        assert_eq!(replaced.hot_counter_ops_per_s, off.hot_counter_ops_per_s);
    }
}
