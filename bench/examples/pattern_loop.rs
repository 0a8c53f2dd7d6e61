//! One pattern in a loop against an in-process server, nothing else: what `valgrind
//! --tool=callgrind` and `strace -c` need to count instructions and system calls per epoch
//! (run it at two iteration counts and divide the difference), and what alternating
//! before/after runs need. It uses only the client API, `InProcess` and
//! `trace_as_the_server` (the server binary's tracing, so that spans cost what they cost
//! there), so the same file builds against older commits too — before `trace_as_the_server`
//! existed, delete its one line, and compare only pairs that both ran without it
//! (BENCHMARKS.md, "One write for answers that come together", "The bench now traces as the
//! server does").
//!
//! `cargo run --release -p onesided-bench --example pattern_loop -- PATTERN ITERATIONS [off|sync]
//! [SERVER_THREADS] [DATABASE_URL]`
//! with PATTERN one of `pscw` (start, put, complete against post, wait), `lock`
//! (lock-put-unlock), `fence` (put and fence on two ranks), `hot` (64 ranks each doing
//! ITERATIONS accumulate + flush under lock_all), `bulk` (one put of 64 MiB inside
//! lock-unlock, as the bench's bulk figure, which it also prints in MiB/s), `ringN` (N ranks,
//! each putting to the next and fencing: the bench's fence scaling, also printed per rank;
//! ITERATIONS counts epochs). SERVER_THREADS (default 1: a current-thread
//! runtime, as the bench's default) gives the in-process server a multi-thread runtime;
//! DATABASE_URL (`postgres://…`) puts its audit store in PostgreSQL instead of SQLite;
//! `ONESIDED_AUDIT_SQLITE_ROWS=per-event` has SQLite write one row per event instead of one per
//! commit and window (`ONESIDED_AUDIT_SQLITE_GROUPS=true`, groups, is still read, as builds
//! from before groups were the default take it).
use std::sync::Arc;
use std::time::{Duration, Instant};

use onesided_bench::{Audit, InProcess, Threads};
use onesided_client::{Admin, LockType, Session, Window, WindowSpec};

/// The `bulk` pattern's put: the bench's bulk size.
const BULK: usize = 64 << 20;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(pattern), Some(n)) = (args.get(1).cloned(), args.get(2)) else {
        anyhow::bail!(
            "usage: pattern_loop pscw|lock|fence|hot|bulk|ringN ITERATIONS [off|sync] [SERVER_THREADS] \
             [DATABASE_URL]"
        );
    };
    onesided_bench::trace_as_the_server();
    // as the bench's --audit-sqlite-rows: how the SQLite store writes events
    if let Some(rows) = onesided_bench::sqlite_rows_from_env()? {
        onesided_bench::write_sqlite_rows(rows);
    }
    let n: usize = n.parse()?;
    anyhow::ensure!(n > 0, "ITERATIONS must be at least 1");
    let audit = match args.get(3).map(String::as_str) {
        Some("sync") => Audit::Sync,
        _ => Audit::Off,
    };
    let server_threads = match args.get(4) {
        Some(count) => Threads::new(count.parse()?),
        None => Threads::One,
    };
    let database_url = args.get(5).cloned();
    Threads::One.runtime("client")?.block_on(async move {
        let server = InProcess::start(audit, database_url, server_threads).await?;
        let admin = Admin::connect(server.url.as_str(), &server.admin_token).await?;
        // `ringN`: N ranks, each putting to the next and fencing (the bench's fence scaling)
        let ring: Option<u32> = match pattern.strip_prefix("ring") {
            Some(ranks) => match ranks.parse() {
                Ok(ranks) if ranks >= 2 => Some(ranks),
                _ => anyhow::bail!("ringN needs a number of ranks N of at least 2"),
            },
            None => None,
        };
        let nranks: u32 = match (pattern.as_str(), ring) {
            (_, Some(ranks)) => ranks,
            ("hot", _) => 64,
            _ => 2,
        };
        let created = admin.create_world("w", nranks).await?;
        let spec = if pattern == "bulk" {
            WindowSpec::bytes("w", nranks, BULK as u64, 1)
        } else {
            WindowSpec::of::<i64>("w", nranks, 1)
        };
        admin.create_window("w", &spec).await?;
        let mut sessions = Vec::new();
        for token in &created.tokens {
            sessions.push(Session::attach(server.url.as_str(), token).await?);
        }
        let mut windows = Vec::new();
        for session in &sessions {
            windows.push(Arc::new(session.window("w").await?));
        }
        let w0 = Arc::clone(&windows[0]);
        let w1 = Arc::clone(&windows[1]);
        let began = Instant::now();
        let samples = match pattern.as_str() {
            _ if ring.is_some() => ring_loop(&windows, nranks, n).await?,
            "pscw" => pscw_loop(&w0, Arc::clone(&w1), n).await?,
            "lock" => lock_loop(&w0, n).await?,
            "fence" => fence_loop(&w0, Arc::clone(&w1), n).await?,
            "bulk" => bulk_loop(&w0, n).await?,
            "hot" => hot_loop(&windows, n, began).await?,
            other => anyhow::bail!("no pattern {other}"),
        };
        report(
            &pattern,
            n,
            nranks,
            ring.is_some(),
            samples,
            began.elapsed(),
        );
        drop((w0, w1, windows));
        drop(sessions);
        Ok(())
    })
}

/// `ringN`: each rank puts to the next and fences; rank 0's epoch times.
async fn ring_loop(
    windows: &[Arc<Window>],
    nranks: u32,
    n: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(n);
    let mut tasks = Vec::new();
    for (rank, window) in windows.iter().enumerate() {
        let window = Arc::clone(window);
        let next = (rank as u32 + 1) % nranks;
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::with_capacity(n);
            window.fence(0).await?;
            for i in 0..n {
                let t = Instant::now();
                window.put(next, 0, &[i as i64])?;
                window.fence(0).await?;
                times.push(t.elapsed());
            }
            anyhow::Ok(times)
        }));
    }
    for (rank, task) in tasks.into_iter().enumerate() {
        let times = task.await??;
        if rank == 0 {
            samples = times;
        }
    }
    Ok(samples)
}

/// `pscw`: start, put, complete against post, wait.
async fn pscw_loop(w0: &Window, w1: Arc<Window>, n: usize) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(n);
    // rank 1, the target, posts and waits
    let target = tokio::spawn(async move {
        for _ in 0..n {
            w1.post(&[0], 0)?;
            w1.wait().await?;
        }
        anyhow::Ok(())
    });
    for i in 0..n {
        let t = Instant::now();
        w0.start(&[1], 0)?;
        w0.put(1, 0, &[i as i64])?;
        w0.complete().await?;
        samples.push(t.elapsed());
    }
    target.await??;
    Ok(samples)
}

/// `lock`: lock, put, unlock.
async fn lock_loop(w0: &Window, n: usize) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        w0.lock(LockType::Exclusive, 1, 0).await?;
        w0.put(1, 0, &[i as i64])?;
        w0.unlock(1).await?;
        samples.push(t.elapsed());
    }
    Ok(samples)
}

/// `fence`: put and fence on two ranks.
async fn fence_loop(w0: &Window, w1: Arc<Window>, n: usize) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(n);
    let other = tokio::spawn(async move {
        w1.fence(0).await?;
        for i in 0..n {
            w1.put(0, 0, &[i as i64])?;
            w1.fence(0).await?;
        }
        anyhow::Ok(())
    });
    w0.fence(0).await?;
    for i in 0..n {
        let t = Instant::now();
        w0.put(1, 0, &[i as i64])?;
        w0.fence(0).await?;
        samples.push(t.elapsed());
    }
    other.await??;
    Ok(samples)
}

/// `bulk`: one put of [`BULK`] bytes inside lock-unlock.
async fn bulk_loop(w0: &Window, n: usize) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(n);
    let data: Vec<u8> = (0..BULK).map(|i| (i % 251) as u8).collect();
    for _ in 0..n {
        let t = Instant::now();
        w0.lock(LockType::Exclusive, 1, 0).await?;
        w0.put(1, 0, &data)?;
        w0.unlock(1).await?;
        samples.push(t.elapsed());
    }
    Ok(samples)
}

/// `hot`: every rank accumulates and flushes under lock_all; one sample, the whole run.
async fn hot_loop(
    windows: &[Arc<Window>],
    n: usize,
    began: Instant,
) -> anyhow::Result<Vec<Duration>> {
    let mut tasks = Vec::new();
    for window in windows {
        let window = Arc::clone(window);
        tasks.push(tokio::spawn(async move {
            window.lock_all(0).await?;
            for _ in 0..n {
                window.accumulate(0, 0, &[1i64], onesided_client::Op::Sum)?;
                window.flush(0).await?;
            }
            window.unlock_all().await?;
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(vec![began.elapsed()])
}

/// Prints the run's figures: the median and mean epoch, and the pattern's own.
fn report(
    pattern: &str,
    n: usize,
    nranks: u32,
    ring: bool,
    mut samples: Vec<Duration>,
    total: Duration,
) {
    samples.sort_unstable();
    let median = samples[samples.len() / 2].as_secs_f64() * 1e6;
    println!(
        "{pattern} n={n} median_us={median:.1} mean_us={:.1}",
        total.as_secs_f64() * 1e6 / n as f64
    );
    if pattern == "hot" {
        println!("hot ops_per_s={:.0}", (64 * n) as f64 / total.as_secs_f64());
    }
    if ring {
        println!("{pattern} us_per_rank={:.2}", median / f64::from(nranks));
    }
    if pattern == "bulk" {
        println!("bulk mib_per_s={:.1}", 64.0 / (median / 1e6));
    }
}
