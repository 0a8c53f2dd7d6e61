//! The floor under a `sync` answer alone: `onesided_bench::grpc::commit_echo_us` (a bare gRPC
//! echo whose every answer waits for one lock-put-unlock epoch's audit rows to be committed
//! through the audit store's code), and the bare echo beside it, so that alternating runs
//! with `pattern_loop lock N sync` can set a `sync` answer beside what it cannot go below.
//!
//! `cargo run --release -p onesided-bench --example commit_echo -- ITERATIONS [DATABASE_URL]`
//! (SQLite in a temp dir without a URL, as the onesided server keeps it by default).
use onesided_bench::grpc::{self, FloorStore};
use onesided_bench::Threads;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let Some(n) = args.get(1) else {
        anyhow::bail!("usage: commit_echo ITERATIONS [DATABASE_URL]");
    };
    onesided_bench::trace_as_the_server();
    let n: usize = n.parse()?;
    anyhow::ensure!(n > 0, "ITERATIONS must be at least 1");
    let store = match args.get(2) {
        Some(url) => FloorStore::Postgres(url.clone()),
        None => FloorStore::Sqlite,
    };
    Threads::One.runtime("client")?.block_on(async move {
        let echo = grpc::EchoServerHandle::start(Threads::One)?;
        let echo_us = grpc::echo_us(&echo.url, n).await?;
        let commit_echo_us = grpc::commit_echo_us(Threads::One, store, n).await?;
        println!("n={n} echo_us={echo_us:.1} commit_echo_us={commit_echo_us:.1}");
        Ok(())
    })
}
