//! What a run is asked to do: the audit mode of the in-process server, the server to run
//! against, how many iterations, and the runtimes' threads, with the sizes a `--quick` run
//! shrinks.
//!
//! Owns: `Options` and the figures derived from it (the bulk, TCP-bulk, disk-write and RSS-put
//! sizes, `redis-benchmark`'s requests, the fence-scaling world sizes, which database URL is
//! PostgreSQL's), `Audit`, `Threads` (and the tokio runtime built from it) and
//! `QUICK_ITERATIONS`. Must not: start a server, measure
//! anything or print (`full_run`, `patterns` and `report` do).

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
    ///
    /// [`BusyPolled`]: crate::BusyPolled
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

    /// `quick` in a `--quick` run, else `full`.
    fn quick_or<T>(&self, quick: T, full: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }

    pub(crate) fn bulk_bytes(&self) -> usize {
        self.quick_or(4 << 20, 64 << 20)
    }

    /// Messages of 4 MiB in the raw TCP bulk reference.
    pub(crate) fn tcp_bulk_messages(&self) -> usize {
        self.quick_or(4, 64)
    }

    /// Requests of each `redis-benchmark` run: against the durable Redis the bench starts and
    /// against a Redis found on `127.0.0.1:6379`.
    pub(crate) fn redis_requests(&self) -> usize {
        self.quick_or(2_000, 20_000)
    }

    /// Bytes of the put whose server memory is measured ([`rss`]).
    ///
    /// [`rss`]: crate::rss
    pub(crate) fn rss_put_bytes(&self) -> usize {
        self.quick_or(4 << 20, 256 << 20)
    }

    /// Bytes of the `disk_write_mib_per_s` reference.
    pub(crate) fn disk_write_bytes(&self) -> usize {
        self.quick_or(16 << 20, 256 << 20)
    }

    /// The database URL when it names PostgreSQL.
    pub(crate) fn postgres_url(&self) -> Option<&str> {
        self.database_url
            .as_deref()
            .filter(|url| url.starts_with("postgres://") || url.starts_with("postgresql://"))
    }

    /// The audit store of the `sync` SQLite run: a `sqlite:` URL when one is given, else `None`
    /// (the data directory's `audit.db`).
    pub(crate) fn sqlite_url(&self) -> Option<String> {
        match self.postgres_url() {
            Some(_) => None,
            None => self.database_url.clone(),
        }
    }

    pub(crate) fn scaling_ranks(&self) -> &'static [u32] {
        self.quick_or(&[2, 8], &[2, 8, 32, 64, 256, 1024])
    }
}

/// Iterations of each pattern in a `--quick` run.
pub const QUICK_ITERATIONS: usize = 20;
