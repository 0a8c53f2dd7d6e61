//! How long a cluster takes to serve a world again after its node is killed (BENCHMARKS.md,
//! "A cluster of nodes"). Starts three `onesided-server` processes over a fresh database on
//! the PostgreSQL given, creates a world of RANKS ranks whose window holds MIB MiB in all,
//! fills every byte with acknowledged puts, kills the world's node with SIGKILL, and times,
//! from the kill, the first lock-get-unlock a new session gets answered through the other
//! nodes (and checks the bytes it reads) — and, side by side in the same run, the first one
//! answered to a session of another rank attached before the kill, which comes back by itself
//! (`served_again_by_itself_ms`). Repeats RUNS times, each on a new database.
//!
//! `cargo run --release -p onesided-bench --example failover -- SERVER_BINARY POSTGRES_URL
//! [LEASE_SECS=5] [RANKS=16] [MIB=64] [RUNS=3]`; POSTGRES_URL names a database whose user may
//! create databases (`postgres://postgres@127.0.0.1:5432/postgres`). Prints one JSON line
//! per run.
use std::time::{Duration, Instant};

use onesided_client::{Admin, LockType, Session, Window, WindowSpec};
use sqlx::Connection;

#[path = "support/nodes.rs"]
#[allow(
    dead_code,
    reason = "shared with cluster_faults, which also signals and restarts nodes"
)]
mod nodes;
use nodes::{Node, TOKEN};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(binary), Some(postgres)) = (args.get(1).cloned(), args.get(2).cloned()) else {
        anyhow::bail!(
            "usage: failover SERVER_BINARY POSTGRES_URL [LEASE_SECS] [RANKS] [MIB] [RUNS]"
        );
    };
    let lease = args.get(3).cloned().unwrap_or_else(|| "5".into());
    let ranks: u32 = args.get(4).map_or(Ok(16), |text| text.parse())?;
    let mib: u64 = args.get(5).map_or(Ok(64), |text| text.parse())?;
    let runs: usize = args.get(6).map_or(Ok(3), |text| text.parse())?;
    let per_rank = (mib << 20) / u64::from(ranks);
    tokio::runtime::Runtime::new()?.block_on(async move {
        for run in 0..runs {
            let name = format!("onesided_failover_{}_{run}", std::process::id());
            let mut admin_db = sqlx::PgConnection::connect(&postgres).await?;
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(&mut admin_db)
                .await?;
            let base = postgres
                .rsplit_once('/')
                .map_or(postgres.as_str(), |(base, _)| base);
            let database = format!("{base}/{name}");
            let measured = measure(&binary, &database, &lease, ranks, per_rank).await;
            sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
                .execute(&mut admin_db)
                .await?;
            let (served_again, by_itself, filled) = measured?;
            println!(
                "{}",
                serde_json::json!({
                    "run": run,
                    "lease_secs": lease.parse::<f64>()?,
                    "ranks": ranks,
                    "window_mib": mib,
                    "fill_secs": filled.as_secs_f64(),
                    "served_again_ms": served_again.as_secs_f64() * 1e3,
                    "served_again_by_itself_ms": by_itself.as_secs_f64() * 1e3,
                })
            );
        }
        Ok(())
    })
}

/// `(time from the kill to the first call answered to a new session, to the session that came
/// back by itself, time the fill took)`.
async fn measure(
    binary: &str,
    database: &str,
    lease: &str,
    ranks: u32,
    per_rank: u64,
) -> anyhow::Result<(Duration, Duration, Duration)> {
    let mut nodes = Vec::new();
    for index in 0..3 {
        nodes.push(Node::start(binary, database, &format!("n{index}"), lease)?);
    }
    let all = nodes::addresses(&nodes);
    let admin = Admin::connect(all.as_str(), TOKEN).await?;
    let tokens = admin.create_world("w", ranks).await?.tokens;
    admin
        .create_window("w", &WindowSpec::bytes("acc", ranks, per_rank, 1))
        .await?;
    // every byte written, acknowledged, in the log
    let began = Instant::now();
    let pattern = |rank: u32| (rank % 251) as u8 + 1;
    for (rank, token) in tokens.iter().enumerate() {
        let rank = rank as u32;
        let session = Session::attach(all.as_str(), token).await?;
        let window = session.window("acc").await?;
        window.lock(LockType::Exclusive, rank, 0).await?;
        window.put::<u8>(rank, 0, &vec![pattern(rank); per_rank as usize])?;
        window.unlock(rank).await?;
        session.close().await?;
    }
    let filled = began.elapsed();
    let status = admin.cluster_status().await?;
    let owner = status
        .nodes
        .iter()
        .find(|node| node.worlds.iter().any(|world| world == "w"))
        .map(|node| node.node_id.clone())
        .ok_or_else(|| anyhow::anyhow!("nobody serves the world"))?;
    let at = nodes
        .iter()
        .position(|node| node.id == owner)
        .expect("the owner is one of ours");
    let survivors = nodes::addresses(nodes.iter().filter(|node| node.id != owner));
    let last = ranks - 1;
    // a session of rank 1, attached and idle before the kill, that nothing attaches again
    let held = Session::attach(all.as_str(), &tokens[1]).await?;
    let held_window = held.window("acc").await?;
    let killed = Instant::now();
    drop(nodes.remove(at));
    let by_itself = async {
        loop {
            match last_byte(&held_window, last, per_rank).await {
                Ok(bytes) => {
                    anyhow::ensure!(
                        bytes == [pattern(last)],
                        "the rebuilt window lost an acknowledged byte"
                    );
                    anyhow::ensure!(held.incarnation() > 1, "the session did not come back");
                    return Ok(killed.elapsed());
                }
                Err(_) if killed.elapsed() < Duration::from_secs(120) => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(error) => return Err(anyhow::Error::from(error)),
            }
        }
    };
    let by_hand = async {
        loop {
            let attempt = async {
                let session = Session::attach(survivors.as_str(), &tokens[0]).await?;
                let window = session.window("acc").await?;
                last_byte(&window, last, per_rank).await
            };
            match attempt.await {
                Ok(bytes) => {
                    let served_again = killed.elapsed();
                    anyhow::ensure!(
                        bytes == [pattern(last)],
                        "the rebuilt window lost an acknowledged byte"
                    );
                    return Ok(served_again);
                }
                Err(_) if killed.elapsed() < Duration::from_secs(120) => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(error) => return Err(anyhow::Error::from(error)),
            }
        }
    };
    let (by_hand, by_itself) = tokio::join!(by_hand, by_itself);
    Ok((by_hand?, by_itself?, filled))
}

/// The last byte of rank `last`'s window (`per_rank` bytes), read under a shared lock.
async fn last_byte(window: &Window, last: u32, per_rank: u64) -> onesided_client::Result<Vec<u8>> {
    window.lock(LockType::Shared, last, 0).await?;
    let read = window.get::<u8>(last, per_rank - 1, 1)?;
    window.unlock(last).await?;
    read.value().await
}
