//! A full run (`onesided-bench` without `--soak` or `--fence-scaling`): every pattern against
//! the server asked, the same patterns in `sync` beside it, and every reference, in one
//! process so that the ratios compare like with like.
//!
//! Owns: which runs happen (the `sync` runs, the busy-polling run and the server's memory only
//! in-process with the audit off), the order of the measurements (the durable Redis right after
//! `fdatasync` and before the bulk disk write), and the spinners kept or paused around each
//! (stopped for everything PostgreSQL). Must not: time a pattern or a reference itself
//! (`patterns`, `measure`, `reference`, `storage`, `grpc`, `redis`, `mpich` and `rss` do), or
//! render the report (`report`).

use anyhow::Context;

use crate::{
    awake, grpc, measure, mpich, redis, reference, rss, storage, Audit, BusyPolled, Options,
    Patterns, Report,
};

/// Runs every pattern and every reference.
///
/// # Errors
/// When the server cannot be started or reached, or an RMA call fails.
pub async fn run(options: &Options) -> anyhow::Result<Report> {
    let awake = options
        .keep_awake
        .then(awake::KeepAwake::start)
        .transpose()?;
    let (audit, patterns) = patterns_asked(options).await?;
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
        (true, Some(url)) => sync_postgres(options, url, awake.as_ref()).await?,
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
    let (bulk_rss, bulk_rss_missing) = bulk_rss(options, side_by_side).await;
    let storage = StorageReferences::measure(options, awake.as_ref()).await?;
    let network = NetworkReferences::measure(options).await?;
    let iterations = options.iterations;
    let limit = mpich::time_limit(iterations);
    let mpich =
        tokio::task::spawn_blocking(move || mpich::run(iterations, bulk_bytes, limit)).await?;
    let (mpich, mpich_missing) = match mpich {
        Ok(mpich) => (Some(mpich), None),
        Err(why) => (None, Some(format!("{why:#}"))),
    };
    let requests = options.redis_requests();
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
        fdatasync_us: storage.fdatasync_us,
        sqlite_commit_us: storage.sqlite_commit_us,
        sqlite_floors: storage.sqlite_floors,
        pg_floors: storage.pg_floors,
        disk_write_mib_per_s: storage.disk_write_mib_per_s,
        disk_write_bytes: storage.disk_write_bytes,
        pg_commit: storage.pg_commit,
        raw_tcp_pingpong_us: network.raw_tcp_pingpong_us,
        raw_tcp_bulk_mib_per_s: network.raw_tcp_bulk_mib_per_s,
        grpc: network.grpc,
        grpc_barrier_us: network.grpc_barrier_us,
        mpich,
        mpich_missing,
        redis_get_set_us,
        redis_incr_50_clients_per_s,
        redis_missing,
        redis_durable: storage.redis_durable,
        redis_durable_missing: storage.redis_durable_missing,
    })
}

/// The patterns against the server asked: the one given by URL, or one started in this process
/// with the audit asked. Also names the audit mode as the report does.
async fn patterns_asked(options: &Options) -> anyhow::Result<(String, Patterns)> {
    let asked = match &options.remote {
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
    Ok(asked)
}

/// The run with the audit in `sync` into PostgreSQL at `url`, with the spinners stopped as
/// PostgreSQL's references are; under `--keep-awake`, first the `off` latencies its targets
/// take, measured with them stopped too.
async fn sync_postgres(
    options: &Options,
    url: &str,
    awake: Option<&awake::KeepAwake>,
) -> anyhow::Result<(Option<Patterns>, Option<Vec<(&'static str, f64)>>)> {
    let _paused = awake.map(awake::KeepAwake::pause).transpose()?;
    // the off side of PostgreSQL's latency targets, in the machine state its sync run
    // has: idle CPUs may halt, and a wake-up costs every round trip alike
    let off_without_spinners = match awake {
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
    Ok((Some(sync), off_without_spinners))
}

/// The server's peak memory during one bulk put ([`rss::bulk_rss`]) when the run is side by
/// side, else why it was not measured.
async fn bulk_rss(options: &Options, side_by_side: bool) -> (Option<rss::BulkRss>, Option<String>) {
    if side_by_side {
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
    }
}

/// The storage references of the audit's targets, and the durable Redis measured among them;
/// each field is the [`Report`] field of its name.
struct StorageReferences {
    fdatasync_us: f64,
    redis_durable: Option<redis::Durable>,
    redis_durable_missing: Option<String>,
    sqlite_commit_us: f64,
    sqlite_floors: grpc::CommitFloors,
    disk_write_mib_per_s: f64,
    disk_write_bytes: usize,
    pg_commit: Option<storage::PgCommit>,
    pg_floors: Option<grpc::CommitFloors>,
}

impl StorageReferences {
    /// Measures them in the order that keeps them comparable, PostgreSQL's with the spinners
    /// stopped.
    async fn measure(options: &Options, awake: Option<&awake::KeepAwake>) -> anyhow::Result<Self> {
        let iterations = options.iterations;
        let storage_iterations = storage::iterations(iterations);
        tokio::task::spawn_blocking(storage::settle).await?;
        let fdatasync_us = blocking("the fdatasync reference", move || {
            storage::fdatasync(storage_iterations)
        })
        .await?;
        // right after fdatasync_us and before the bulk write dirties the disk, so that the two
        // durable-write references see the same disk: Redis fdatasyncs its appendonly file once
        // per reply with one client
        let requests = options.redis_requests();
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
        let disk_write_mib_per_s = blocking("the disk write reference", move || {
            storage::disk_write(disk_write_bytes)
        })
        .await?;
        let (pg_commit, pg_floors) = match options.postgres_url() {
            Some(url) => {
                let _paused = awake.map(awake::KeepAwake::pause).transpose()?;
                let bulk = storage::PgBulk {
                    bytes: options.bulk_bytes(),
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
        Ok(StorageReferences {
            fdatasync_us,
            redis_durable,
            redis_durable_missing,
            sqlite_commit_us,
            sqlite_floors,
            disk_write_mib_per_s,
            disk_write_bytes,
            pg_commit,
            pg_floors,
        })
    }
}

/// The network references: the raw TCP ping-pong and bulk stream, and the bare tonic echo and
/// barrier; each field is the [`Report`] field of its name.
struct NetworkReferences {
    raw_tcp_pingpong_us: f64,
    raw_tcp_bulk_mib_per_s: f64,
    grpc: grpc::Floor,
    grpc_barrier_us: Vec<(u32, f64)>,
}

impl NetworkReferences {
    /// Measures them one after the other.
    async fn measure(options: &Options) -> anyhow::Result<Self> {
        let iterations = options.iterations;
        let bulk_bytes = options.bulk_bytes();
        let raw_tcp_pingpong_us = blocking("raw TCP ping-pong", move || {
            reference::tcp_pingpong(iterations)
        })
        .await?;
        let messages = options.tcp_bulk_messages();
        let raw_tcp_bulk_mib_per_s =
            blocking("raw TCP bulk", move || reference::tcp_bulk(messages)).await?;
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
        Ok(NetworkReferences {
            raw_tcp_pingpong_us,
            raw_tcp_bulk_mib_per_s,
            grpc,
            grpc_barrier_us,
        })
    }
}

/// `measure` run on a blocking thread, its error saying `what` was measured.
async fn blocking<T: Send + 'static>(
    what: &'static str,
    measure: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(measure).await?.context(what)
}
