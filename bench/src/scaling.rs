//! Fence scaling alone (`--fence-scaling`): the fence epoch at each world size asked, with the
//! audit off and in `sync` side by side, beside the bare gRPC barrier under both.
//!
//! Owns: `Scaling`, the order of its measurements (each size on both servers before the next
//! size) and its table (`scaling_table`: per-rank times against the largest size of at most 64
//! ranks). Must not: time an epoch itself (`measure` does) or measure the full run's patterns
//! and references (`run` does).

use anyhow::Context;

use crate::report::ratio;
use crate::{awake, grpc, measure, server, Audit, Options};

/// One world size of a fence-scaling run ([`fence_scaling`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scaling {
    /// Ranks of the world.
    pub ranks: u32,
    /// Median µs per fence epoch (one put per rank) with the audit off.
    pub off_us: f64,
    /// The same into SQLite in `sync`, the server's default.
    pub sync_us: f64,
    /// The floor under both: a bare tonic echo of as many streams whose every answer waits for
    /// all the streams' messages of the round ([`grpc::barrier_us`]), median µs per round.
    pub floor_us: f64,
}

impl Scaling {
    /// µs per rank per epoch: every rank's client shares the machine's cores with the server,
    /// so a fence costs at least N round trips of CPU, and this stays flat when the server
    /// does O(N) work per fence.
    pub fn per_rank(value: f64, ranks: u32) -> f64 {
        value / f64::from(ranks)
    }
}

/// Fence scaling alone (`--fence-scaling`): for each world size in `ranks`, the fence epoch
/// against an in-process server with the audit off and one in `sync` into SQLite, measured
/// side by side (each size on both before the next size).
///
/// # Errors
/// When a server cannot be started or an RMA call fails.
pub async fn fence_scaling(options: &Options, ranks: &[u32]) -> anyhow::Result<Vec<Scaling>> {
    let _awake = options
        .keep_awake
        .then(awake::KeepAwake::start)
        .transpose()?;
    let off = server::InProcess::start(Audit::Off, None, options.server_threads)
        .await
        .context("cannot start the in-process server with the audit off")?;
    let sync = server::InProcess::start(Audit::Sync, options.sqlite_url(), options.server_threads)
        .await
        .context("cannot start the in-process server in sync")?;
    let off_bench = measure::Bench::connect(&off.url, &off.admin_token, options).await?;
    let sync_bench = measure::Bench::connect(&sync.url, &sync.admin_token, options).await?;
    let mut rows = Vec::new();
    for &nranks in ranks {
        let floor_us = grpc::barrier_floor(
            options.server_threads,
            nranks,
            options.iterations,
            options.quick,
        )
        .await?;
        let off_us = off_bench
            .fence_scaling(nranks)
            .await
            .with_context(|| format!("fence scaling at {nranks} ranks, audit off"))?;
        let sync_us = sync_bench
            .fence_scaling(nranks)
            .await
            .with_context(|| format!("fence scaling at {nranks} ranks, sync"))?;
        rows.push(Scaling {
            ranks: nranks,
            off_us,
            sync_us,
            floor_us,
        });
    }
    Ok(rows)
}

/// The rows of [`fence_scaling`] as a Markdown table, each per-rank time also as a ratio to
/// the per-rank time at the largest size of at most 64 ranks (issue 12's reference point).
pub fn scaling_table(rows: &[Scaling]) -> String {
    let reference = rows
        .iter()
        .filter(|row| row.ranks <= 64)
        .max_by_key(|row| row.ranks)
        .copied();
    let versus = |value: f64, ranks: u32, of: fn(&Scaling) -> f64| match reference {
        Some(reference) => ratio(
            Scaling::per_rank(value, ranks),
            Some(Scaling::per_rank(of(&reference), reference.ranks)),
        ),
        None => "—".to_string(),
    };
    let mut out = String::from(
        "| ranks | off µs/epoch | off µs/rank | vs ≤64 | sync µs/epoch | sync µs/rank | vs ≤64 | \
         floor µs/epoch | floor µs/rank | vs ≤64 |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        out.push_str(&format!(
            "| {} | {:.1} | {:.2} | {} | {:.1} | {:.2} | {} | {:.1} | {:.2} | {} |\n",
            row.ranks,
            row.off_us,
            Scaling::per_rank(row.off_us, row.ranks),
            versus(row.off_us, row.ranks, |r| r.off_us),
            row.sync_us,
            Scaling::per_rank(row.sync_us, row.ranks),
            versus(row.sync_us, row.ranks, |r| r.sync_us),
            row.floor_us,
            Scaling::per_rank(row.floor_us, row.ranks),
            versus(row.floor_us, row.ranks, |r| r.floor_us),
        ));
    }
    out
}
