//! `onesided-bench`: times onesided's RMA calls against a server (given by `--addr`, or started
//! in this process) and prints a table, or with `--json` one JSON object. See BENCHMARKS.md.

use clap::Parser;
use onesided_bench::{Audit, Options, QUICK_ITERATIONS};

/// Latency and throughput of onesided's RMA calls, with raw TCP and Redis as references.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// A running server (`http://host:port`); without it a server is started in this process.
    #[arg(long)]
    addr: Option<String>,
    /// The admin token of the server given by `--addr`.
    #[arg(long, env = "ONESIDED_ADMIN_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Audit durability of the in-process server (ignored with `--addr`).
    #[arg(long, value_enum, default_value = "off")]
    audit: Audit,
    /// Audit store of the in-process server (`postgres://…`); SQLite in a temp dir otherwise.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Measured iterations per latency pattern (10 % more run first as a warm-up).
    #[arg(long, default_value_t = 2000)]
    iterations: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Tiny counts, a 4 MiB bulk put, fence scaling at 2 and 8 ranks: a smoke run for CI.
    #[arg(long)]
    quick: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
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
    };
    let report = onesided_bench::run(&options).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        print!("{}", report.table());
    }
    Ok(())
}
