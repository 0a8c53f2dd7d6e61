//! `onesided-bench`: times onesided's RMA calls against a server (given by `--addr`, or started
//! in this process) and prints a table, or with `--json` one JSON object. With `--soak SECONDS`
//! it runs a mixed workload that long instead and fails unless memory stayed flat. See
//! BENCHMARKS.md.

use clap::Parser;
use onesided_bench::{soak, Audit, Options, Threads, QUICK_ITERATIONS};

/// Latency and throughput of onesided's RMA calls, with raw TCP, MPICH, Redis and the disk as
/// references.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// A running server (`http://host:port`); without it a server is started in this process.
    #[arg(long)]
    addr: Option<String>,
    /// The admin token of the server given by `--addr`.
    #[arg(long, env = "ONESIDED_ADMIN_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Audit durability of the in-process server (ignored with `--addr`). At `off` every
    /// pattern also runs against a server in its default configuration (`sync`, SQLite in its
    /// data directory), side by side.
    #[arg(long, value_enum, default_value = "off")]
    audit: Audit,
    /// Audit store of the in-process server (`postgres://…`); SQLite in a temp dir otherwise.
    /// With the audit off, a PostgreSQL URL adds a third run in `sync` into it, and the
    /// reference `pg_commit_us`.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Measured iterations per latency pattern (10 % more run first as a warm-up).
    #[arg(long, default_value_t = 2000)]
    iterations: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// How the SQLite audit stores of the in-process servers and of the commit floors
    /// (`commit_echo_us`, `commit_streams_per_s`) write events, as `onesided-server
    /// --audit-sqlite-rows` says: groups (one row per commit and window, the default) or
    /// per-event. [default: groups]
    #[arg(long, env = "ONESIDED_AUDIT_SQLITE_ROWS", value_enum)]
    audit_sqlite_rows: Option<onesided_server::audit::Rows>,
    /// The same as --audit-sqlite-rows groups (kept for 0.3's command lines).
    #[arg(long, env = "ONESIDED_AUDIT_SQLITE_GROUPS")]
    audit_sqlite_groups: bool,
    /// Tiny counts, a 4 MiB bulk put, fence scaling at 2 and 8 ranks: a smoke run for CI.
    #[arg(long)]
    quick: bool,
    /// Worker threads of the in-process server's runtime; 1 runs it on one thread (a
    /// current-thread runtime).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    server_threads: u16,
    /// Worker threads of the runtime the bench's clients run on; 1 runs them on one thread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    client_threads: u16,
    /// Keep every CPU busy with a lowest-priority (nice 19) loop for the whole run, so that no
    /// virtual CPU halts between messages (BENCHMARKS.md, "Idle CPUs").
    #[arg(long)]
    keep_awake: bool,
    /// Instead of timing: a mixed workload for SECONDS against an in-process server, printing
    /// the process's resident memory every few seconds; fails unless it stayed flat.
    #[arg(long, value_name = "SECONDS", conflicts_with_all = ["addr", "json", "quick"])]
    soak: Option<u64>,
    /// Instead of every pattern: only the fence epoch (one put per rank) at these world sizes
    /// (e.g. `64,256,1024`), against in-process servers with the audit off and in `sync`
    /// (SQLite) side by side, with the floor under both (a bare gRPC echo of as many streams
    /// behind a barrier); prints µs per epoch and per rank.
    #[arg(
        long,
        value_name = "RANKS",
        value_delimiter = ',',
        value_parser = clap::value_parser!(u32).range(1..=4096),
        conflicts_with_all = ["addr", "soak", "quick"]
    )]
    fence_scaling: Option<Vec<u32>>,
    /// With the audit off and the server in-process: the latency patterns against two
    /// `onesided-server` processes (beside this binary, or ONESIDED_SERVER_BIN; in-process
    /// without one), one plain and one with it and every session busy-polling MICROS after each
    /// message (`--busy-poll`), side by side, with MPICH.
    #[arg(long, value_name = "MICROS", value_parser = onesided_client::busy_poll::parse_micros, conflicts_with_all = ["addr", "soak", "fence_scaling"])]
    busy_poll: Option<std::time::Duration>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // the in-process servers log, and pay for their spans, as onesided-server does
    onesided_bench::trace_as_the_server();
    // the soak's churn runs on every CPU, as a service's clients would
    let threads = match args.soak {
        Some(_) => Threads::new(std::thread::available_parallelism().map_or(2, usize::from)),
        None => Threads::new(usize::from(args.client_threads)),
    };
    threads.runtime("onesided-bench")?.block_on(bench(args))
}

async fn bench(args: Args) -> anyhow::Result<()> {
    {
        use onesided_server::audit::Rows;
        let rows = match (args.audit_sqlite_rows, args.audit_sqlite_groups) {
            (Some(Rows::PerEvent), true) => anyhow::bail!(
                "--audit-sqlite-groups and --audit-sqlite-rows per-event contradict each other"
            ),
            (Some(rows), _) => rows,
            (None, _) => Rows::Groups,
        };
        onesided_bench::write_sqlite_rows(rows);
        if rows == Rows::PerEvent {
            eprintln!(
                "SQLite audit stores write one row per event (--audit-sqlite-rows per-event)"
            );
        }
    }
    if let Some(seconds) = args.soak {
        return run_soak(seconds, args.audit, args.database_url).await;
    }
    if let Some(ranks) = &args.fence_scaling {
        let options = Options {
            iterations: args.iterations,
            server_threads: Threads::new(usize::from(args.server_threads)),
            keep_awake: args.keep_awake,
            database_url: args.database_url.clone(),
            ..Options::in_process(args.iterations)
        };
        let rows = onesided_bench::fence_scaling(&options, ranks).await?;
        if args.json {
            let rows: Vec<_> = rows
                .iter()
                .map(|row| {
                    serde_json::json!({
                        "ranks": row.ranks,
                        "off_us": row.off_us,
                        "sync_us": row.sync_us,
                        "floor_us": row.floor_us,
                    })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            print!("{}", onesided_bench::scaling_table(&rows));
        }
        return Ok(());
    }
    let remote = match (args.addr, args.token) {
        (Some(addr), Some(token)) => Some((addr, token)),
        (Some(_), None) => anyhow::bail!("--addr needs --token (or ONESIDED_ADMIN_TOKEN)"),
        (None, _) => None,
    };
    let options = Options {
        remote,
        audit: args.audit,
        database_url: args.database_url,
        iterations: if args.quick {
            QUICK_ITERATIONS
        } else {
            args.iterations
        },
        quick: args.quick,
        server_threads: Threads::new(usize::from(args.server_threads)),
        keep_awake: args.keep_awake,
        busy_poll: args.busy_poll.filter(|budget| !budget.is_zero()),
    };
    let report = onesided_bench::run(&options).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        print!("{}", report.table());
    }
    Ok(())
}

async fn run_soak(seconds: u64, audit: Audit, database_url: Option<String>) -> anyhow::Result<()> {
    println!(
        "soak: {seconds} s, audit {}, sampling every {} s",
        audit.name(),
        soak::sampling_interval(seconds).as_secs()
    );
    let report = soak::soak(seconds, audit, database_url, |sample| {
        println!(
            "soak: {:>5.1} s  RSS {:>7.1} MiB  {:>6} cycles",
            sample.elapsed.as_secs_f64(),
            sample.rss_kib as f64 / 1024.0,
            sample.cycles
        );
    })
    .await?;
    print!("{}", report.summary());
    anyhow::ensure!(
        report.flatness.flat(),
        "resident memory grew: the last third's median exceeds the middle third's by more \
         than {:.0} % + {} MiB",
        soak::FLAT_RATIO * 100.0,
        soak::FLAT_SLACK_KIB >> 10
    );
    Ok(())
}
