//! The floor under issue 12's item 5 (fence scaling): `onesided_bench::grpc::barrier_us`, a
//! bare tonic echo with N streams (each on a channel of its own, as each rank's session has)
//! whose every answer waits until all N streams' messages of the round have arrived. That is
//! a fence epoch at N ranks with nothing of onesided's: N messages in, N answers out, on the
//! same runtimes as `pattern_loop ringN` (the server on its own current-thread runtime, the
//! clients on this one). Prints µs per round and per rank, so that runs at two sizes set the
//! transport's own growth beside `ringN`'s.
//!
//! `cargo run --release -p onesided-bench --example barrier_echo -- RANKS ROUNDS`
use onesided_bench::grpc;
use onesided_bench::Threads;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(ranks), Some(rounds)) = (args.get(1), args.get(2)) else {
        anyhow::bail!("usage: barrier_echo RANKS ROUNDS");
    };
    let ranks: usize = ranks.parse()?;
    let rounds: usize = rounds.parse()?;
    // as `pattern_loop`: h2's and tonic's own tracing call sites cost what they cost there
    onesided_bench::trace_as_the_server();
    anyhow::ensure!(
        ranks > 0 && rounds > 0,
        "RANKS and ROUNDS must be at least 1"
    );
    Threads::One.runtime("client")?.block_on(async move {
        let server = grpc::EchoServerHandle::start_barrier(Threads::One, ranks)?;
        let us = grpc::barrier_us(&server.url, ranks, rounds).await?;
        println!(
            "barrier{ranks} rounds={rounds} median_us={us:.1} us_per_rank={:.2}",
            us / ranks as f64
        );
        Ok(())
    })
}
