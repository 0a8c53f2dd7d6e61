//! The unified memory model against an in-process server (docs/memory-models.md): how soon a
//! remote put reaches the owner's memory and a store reaches the public copy with no RMA call
//! at the other side, and what a store costs under each model.
//!
//! `cargo run --release -p onesided-bench --example unified -- ITERATIONS [off|sync]`
//!
//! - `put_seen`: rank 0 does lock, put, unlock to rank 1 while rank 1 polls its private copy
//!   with plain loads (no RMA call): the time from the lock's start to the value being seen,
//!   beside the epoch itself (`lock_put_unlock`, in the same loop).
//! - `store_seen`: rank 1 stores while rank 0 reads it back with lock, get, unlock until it
//!   sees the new value: the time from the store to that read.
//! - `stores_per_s`: one rank storing one element per call, then a lock and unlock of its own
//!   window (which publishes the separate model's stores), under each model in the same run.
use std::sync::Arc;
use std::time::{Duration, Instant};

use onesided_bench::{Audit, InProcess, Threads};
use onesided_client::{Admin, LockType, MemoryModel, Session, Window, WindowSpec};

fn median(samples: &mut [Duration]) -> f64 {
    samples.sort_unstable();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

fn p99(samples: &mut [Duration]) -> f64 {
    samples.sort_unstable();
    samples[(samples.len() * 99 / 100).min(samples.len() - 1)].as_secs_f64() * 1e6
}

async fn windows(
    url: &str,
    admin: &Admin,
    world: &str,
    model: MemoryModel,
) -> anyhow::Result<(Vec<Session>, Vec<Arc<Window>>)> {
    let created = admin.create_world(world, 2).await?;
    let spec = WindowSpec::of::<i64>("w", 2, 1).model(model);
    admin.create_window(world, &spec).await?;
    let mut sessions = Vec::new();
    let mut windows = Vec::new();
    for token in &created.tokens {
        let session = Session::attach(url, token).await?;
        windows.push(Arc::new(session.window("w").await?));
        sessions.push(session);
    }
    Ok((sessions, windows))
}

/// `n` stores of one element by rank 0 to its own window, then lock and unlock of it: stores
/// per second.
async fn stores(w: &Window, n: usize) -> anyhow::Result<f64> {
    let began = Instant::now();
    for i in 0..n {
        w.store(0, &[i as i64])?;
    }
    w.lock(LockType::Exclusive, 0, 0).await?;
    w.unlock(0).await?;
    Ok(n as f64 / began.elapsed().as_secs_f64())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let Some(n) = args.get(1) else {
        anyhow::bail!("usage: unified ITERATIONS [off|sync]");
    };
    let n: usize = n.parse()?;
    anyhow::ensure!(n > 0, "ITERATIONS must be at least 1");
    let (audit, mode) = match args.get(2).map(String::as_str) {
        Some("sync") => (Audit::Sync, "sync"),
        _ => (Audit::Off, "off"),
    };
    Threads::One.runtime("client")?.block_on(async move {
        let server = InProcess::start(audit, None, Threads::One).await?;
        let url = server.url.as_str();
        let admin = Admin::connect(url, &server.admin_token).await?;
        let (_sessions, w) = windows(url, &admin, "u", MemoryModel::Unified).await?;
        // put_seen: the owner polls with plain loads
        let mut seen = Vec::with_capacity(n);
        let mut epochs = Vec::with_capacity(n);
        for i in 1..=n as i64 {
            let owner = Arc::clone(&w[1]);
            let poll = tokio::spawn(async move {
                while owner.load::<i64>(0, 1)?[0] != i {
                    tokio::task::yield_now().await;
                }
                anyhow::Ok(Instant::now())
            });
            let began = Instant::now();
            w[0].lock(LockType::Exclusive, 1, 0).await?;
            w[0].put(1, 0, &[i])?;
            w[0].unlock(1).await?;
            epochs.push(began.elapsed());
            seen.push(poll.await?? - began);
        }
        // store_seen: the origin reads back until it sees the store
        let mut stored = Vec::with_capacity(n);
        for i in 1..=n as i64 {
            let value = -i;
            let began = Instant::now();
            w[1].store(0, &[value])?;
            loop {
                w[0].lock(LockType::Shared, 1, 0).await?;
                let got = w[0].get::<i64>(1, 0, 1)?;
                w[0].unlock(1).await?;
                if got.value().await?[0] == value {
                    break;
                }
            }
            stored.push(began.elapsed());
        }
        let unified = stores(&w[0], n).await?;
        let (_separate_sessions, s) = windows(url, &admin, "s", MemoryModel::Separate).await?;
        let separate = stores(&s[0], n).await?;
        println!(
            "unified audit={mode} n={n} lock_put_unlock_us={:.1} put_seen_us={:.1} put_seen_p99_us={:.1} store_seen_us={:.1} store_seen_p99_us={:.1} stores_per_s_unified={unified:.0} stores_per_s_separate={separate:.0}",
            median(&mut epochs),
            median(&mut seen),
            p99(&mut seen),
            median(&mut stored),
            p99(&mut stored),
        );
        Ok(())
    })
}
