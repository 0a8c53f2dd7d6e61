//! What one operation costs a cluster node and its PostgreSQL, for BENCHMARKS.md's capacity
//! model: against a running node (or cluster) at ADDR whose audit store is the database at
//! POSTGRES_URL, RANKS sessions each do OPS accumulate + flush under lock_all on one world;
//! the node's CPU time (from `/proc/PID/stat`), PostgreSQL's write transactions (transaction
//! ids handed out: every commit of the audit writer takes one; the node's heartbeats add two
//! every quarter lease), its WAL and the growth of the `audit_events` table are read before and
//! after, and divided by the operations. (`pg_stat_database.xact_commit` is no use here: a busy
//! backend reports its counts only once it idles.)
//!
//! `cargo run --release -p onesided-bench --example capacity -- ADDR ADMIN_TOKEN POSTGRES_URL
//! NODE_PID [RANKS=64] [OPS=200]`. Prints one JSON line.
use std::time::Instant;

use onesided_client::{Admin, Op, Session, WindowSpec};
use sqlx::Connection;

/// utime + stime of `pid`, in seconds.
fn cpu_secs(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // the fields after the command's closing parenthesis; utime and stime are the 14th and
    // 15th of the whole line, the 12th and 13th after it
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| anyhow::anyhow!("unreadable /proc/{pid}/stat"))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
    // USER_HZ is 100 on Linux
    Ok(ticks / 100.0)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, addr, token, postgres, pid, ..] = args.as_slice() else {
        anyhow::bail!("usage: capacity ADDR ADMIN_TOKEN POSTGRES_URL NODE_PID [RANKS] [OPS]");
    };
    let pid: u32 = pid.parse()?;
    let ranks: u32 = args.get(5).map_or(Ok(64), |text| text.parse())?;
    let ops: u64 = args.get(6).map_or(Ok(200), |text| text.parse())?;
    tokio::runtime::Runtime::new()?.block_on(async move {
        let admin = Admin::connect(addr.as_str(), token).await?;
        let world = format!("capacity-{}", std::process::id());
        let tokens = admin.create_world(&world, ranks).await?.tokens;
        admin
            .create_window(&world, &WindowSpec::of::<i64>("c", ranks, 1))
            .await?;
        let mut windows = Vec::new();
        for token in &tokens {
            let session = Session::attach(addr.as_str(), token).await?;
            windows.push((session.window("c").await?, session));
        }
        let mut db = sqlx::PgConnection::connect(postgres).await?;
        let stats = "SELECT txid_snapshot_xmax(txid_current_snapshot()), \
                     pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8, \
                     pg_total_relation_size('audit_events'), \
                     (SELECT COUNT(*) FROM audit_events)";
        let before: (i64, f64, i64, i64) = sqlx::query_as(stats).fetch_one(&mut db).await?;
        let cpu_before = cpu_secs(pid)?;
        let began = Instant::now();
        let runs = windows.iter().map(|(window, _)| async move {
            window.lock_all(0).await?;
            for _ in 0..ops {
                window.accumulate::<i64>(0, 0, &[1], Op::Sum)?;
                window.flush(0).await?;
            }
            window.unlock_all().await
        });
        for result in futures::future::join_all(runs).await {
            result?;
        }
        let elapsed = began.elapsed().as_secs_f64();
        let cpu = cpu_secs(pid)? - cpu_before;
        let after: (i64, f64, i64, i64) = sqlx::query_as(stats).fetch_one(&mut db).await?;
        let total = u64::from(ranks) * ops;
        let rows = (after.3 - before.3) as f64;
        println!(
            "{}",
            serde_json::json!({
                "ranks": ranks,
                "ops": total,
                "ops_per_s": total as f64 / elapsed,
                "node_cpu_us_per_op": cpu * 1e6 / total as f64,
                "pg_commits_per_op": (after.0 - before.0) as f64 / total as f64,
                "pg_commits_per_s": (after.0 - before.0) as f64 / elapsed,
                "pg_wal_bytes_per_op": (after.1 - before.1) / total as f64,
                "audit_rows_per_op": rows / total as f64,
                "audit_bytes_per_row": (after.2 - before.2) as f64 / rows.max(1.0),
            })
        );
        admin.delete_world(&world).await?;
        Ok(())
    })
}
