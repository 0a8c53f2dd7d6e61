//! The atomics beside their transport, in one process and alternating rounds: a bare tonic echo
//! (`grpc_echo_us`), `fetch_and_op` + `flush` and `compare_and_swap` + `flush` under one
//! `lock_all` with the audit `off` (`fop_flush_us`, `cas_flush_us`), then the 64-stream echo
//! (`grpc_64_streams_per_s`) and the `off` hot counter; prints each round's medians and the
//! ratios issue 45 item 4 names (BENCHMARKS.md, "Atomics beside the transport").
//!
//! ```sh
//! cargo run --release -p onesided-bench --example atomics_side_by_side -- [ITERATIONS [ROUNDS [ONLY]]]
//! ```
//!
//! ONLY (`echo`, `fop` or `cas`) runs that one loop, ITERATIONS times, and nothing else: what
//! `valgrind --tool=callgrind` and `perf` need (run it at two iteration counts and divide the
//! difference to count per round trip).
//!
//! Both servers run on a current-thread runtime of their own thread, as the bench's defaults.
use std::sync::Arc;
use std::time::Instant;

use onesided_bench::grpc::{self, EchoServerHandle};
use onesided_bench::{median, Audit, InProcess, Threads};
use onesided_client::{Admin, Op, Session, Window, WindowSpec};

fn main() -> anyhow::Result<()> {
    let args = onesided_bench::ExampleArgs::from_env("atomics_side_by_side [ITERATIONS [ROUNDS]]");
    let (iterations, rounds) = (args.number(0, 2000)?, args.number(1, 3)?);
    anyhow::ensure!(iterations >= 10, "ITERATIONS must be at least 10");
    let only = args.word(2).map(str::to_string);
    onesided_bench::trace_as_the_server();
    Threads::One.runtime("client")?.block_on(async move {
        let echo = EchoServerHandle::start(Threads::One)?;
        let server = InProcess::start(Audit::Off, None, Threads::One).await?;
        let admin = Admin::connect(server.url.as_str(), &server.admin_token).await?;
        if let Some(only) = only {
            let us = match only.as_str() {
                "echo" => grpc::echo_us(&echo.url, iterations).await?,
                "fop" | "cas" => {
                    let pair = World::open(&admin, &server.url, "pair", 2).await?;
                    atomic_us(&pair.windows[0], iterations, only == "cas").await?
                }
                other => anyhow::bail!("ONLY is echo, fop or cas, not {other}"),
            };
            println!("{only} median_us={us:.1}");
            return Ok(());
        }
        let hot = World::open(&admin, &server.url, "hot", 64).await?;
        let pair = World::open(&admin, &server.url, "pair", 2).await?;
        println!("round echo_us fop_us cas_us fop/echo cas/echo streams_k hot_k hot/streams");
        for round in 1..=rounds {
            let echo_us = grpc::echo_us(&echo.url, iterations).await?;
            let fop_us = atomic_us(&pair.windows[0], iterations, false).await?;
            let cas_us = atomic_us(&pair.windows[0], iterations, true).await?;
            let streams = grpc::streams_per_s(&echo.url, iterations / 4).await?;
            let hot_per_s = hot_counter(&hot.windows, iterations / 4).await?;
            println!(
                "{round} {echo_us:.1} {fop_us:.1} {cas_us:.1} {:.2} {:.2} {:.1} {:.1} {:.2}",
                fop_us / echo_us,
                cas_us / echo_us,
                streams / 1e3,
                hot_per_s / 1e3,
                hot_per_s / streams
            );
        }
        drop((hot, pair));
        drop(echo);
        anyhow::Ok(())
    })
}

/// A world of `ranks` ranks, each attached, with one window of one i64 per rank.
struct World {
    windows: Vec<Arc<Window>>,
    _sessions: Vec<Session>,
}

impl World {
    async fn open(admin: &Admin, url: &str, name: &str, ranks: u32) -> anyhow::Result<Self> {
        let created = admin.create_world(name, ranks).await?;
        admin
            .create_window(name, &WindowSpec::of::<i64>("w", ranks, 1))
            .await?;
        let mut sessions = Vec::new();
        for token in &created.tokens {
            sessions.push(Session::attach(url, token).await?);
        }
        let mut windows = Vec::new();
        for session in &sessions {
            windows.push(Arc::new(session.window("w").await?));
        }
        Ok(World {
            windows,
            _sessions: sessions,
        })
    }
}

/// Median µs of `fetch_and_op` (or `compare_and_swap`) + `flush(1)` + the value, under one
/// `lock_all`, after an unmeasured tenth.
async fn atomic_us(w: &Window, iterations: usize, cas: bool) -> anyhow::Result<f64> {
    w.lock_all(0).await?;
    let skip = iterations / 10;
    let mut samples = Vec::with_capacity(iterations + skip);
    for i in 0..iterations + skip {
        let began = Instant::now();
        onesided_bench::atomic_round_trip(w, i, cas).await?;
        samples.push(began.elapsed());
    }
    w.unlock_all().await?;
    Ok(median(&samples[skip..]))
}

/// The bench's hot counter: every rank accumulates into rank 0 and flushes, `each` times,
/// under lock_all; operations per second from the start to the last rank's end.
async fn hot_counter(windows: &[Arc<Window>], each: usize) -> anyhow::Result<f64> {
    let start = Arc::new(tokio::sync::Barrier::new(windows.len() + 1));
    let mut tasks = Vec::new();
    for window in windows {
        let (window, start) = (Arc::clone(window), Arc::clone(&start));
        tasks.push(tokio::spawn(async move {
            window.lock_all(0).await?;
            start.wait().await;
            for _ in 0..each {
                window.accumulate(0, 0, &[1i64], Op::Sum)?;
                window.flush(0).await?;
            }
            let done = Instant::now();
            window.unlock_all().await?;
            anyhow::Ok(done)
        }));
    }
    start.wait().await;
    let began = Instant::now();
    let mut last = began;
    for task in tasks {
        last = last.max(task.await??);
    }
    Ok((windows.len() * each) as f64 / last.duration_since(began).as_secs_f64())
}
