//! The floors under `sync` alone: `onesided_bench::grpc::commit_echo_us` (a bare gRPC echo whose
//! every answer waits for one lock-put-unlock epoch's audit rows to be committed through the
//! audit store's code) with the bare echo beside it, and `commit_streams_per_s` (64 such
//! streams, each round trip after one hot-counter operation's rows, committed in groups) with
//! the bare 64 streams beside it, so that alternating runs with `pattern_loop lock N sync` and
//! `pattern_loop hot N/4 sync` can set a `sync` figure beside what it cannot pass.
//!
//! `cargo run --release -p onesided-bench --example commit_echo -- ITERATIONS [DATABASE_URL]`
//! (SQLite in a temp dir without a URL, as the onesided server keeps it by default; each of the
//! 64 streams does ITERATIONS / 4 round trips; `ONESIDED_AUDIT_SQLITE_ROWS=per-event`: SQLite writes
//! one row per event instead of one per commit and window, as `--audit-sqlite-rows`).
use onesided_bench::grpc::{self, FloorStore};
use onesided_bench::Threads;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let Some(n) = args.get(1) else {
        anyhow::bail!("usage: commit_echo ITERATIONS [DATABASE_URL]");
    };
    onesided_bench::trace_as_the_server();
    // as the bench's --audit-sqlite-rows: how the SQLite store writes events
    if let Some(rows) = onesided_bench::sqlite_rows_from_env()? {
        onesided_bench::write_sqlite_rows(rows);
    }
    let n: usize = n.parse()?;
    anyhow::ensure!(n > 0, "ITERATIONS must be at least 1");
    let store = match args.get(2) {
        Some(url) => FloorStore::Postgres(url.clone()),
        None => FloorStore::Sqlite,
    };
    Threads::One.runtime("client")?.block_on(async move {
        let echo = grpc::EchoServerHandle::start(Threads::One)?;
        let echo_us = grpc::echo_us(&echo.url, n).await?;
        let commit_echo_us = grpc::commit_echo_us(Threads::One, store.clone(), n).await?;
        let per_stream = (n / 4).max(1);
        let streams_per_s = grpc::streams_per_s(&echo.url, per_stream).await?;
        let commit_streams_per_s =
            grpc::commit_streams_per_s(Threads::One, store, per_stream).await?;
        println!(
            "n={n} echo_us={echo_us:.1} commit_echo_us={commit_echo_us:.1} \
             streams_per_s={streams_per_s:.0} commit_streams_per_s={commit_streams_per_s:.0}"
        );
        Ok(())
    })
}
