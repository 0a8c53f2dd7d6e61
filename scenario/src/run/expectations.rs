//! Checking the expectations once every rank is done: a variable and a private copy from the
//! rank's executor, a public copy read with a fresh session of the rank.
//!
//! Owns: where each subject is read (`expect R VAR` the executor's variable, `expect private`
//! the private copy without recording a load, `expect public` a shared lock and a get, or on a
//! `no_locks` window the copy the fresh session opened with), the run's timeout on that read,
//! and whether the observation is one the line accepts. Must not: change what the ranks left
//! (a private read records nothing), or hold a session past its read.

use bytes::Bytes;
use onesided_core::window::{OpKind, DYNAMIC_BASE};
use onesided_core::{ErrorClass, RmaError};

use super::super::ast::{Expectation, Loc, Observed, Scenario, Subject};
use super::super::buffers::{byte_runs, observed};
use super::{ExpectationOutcome, RankExecutor, Regions, RunConfig};
use onesided_client::{Error, OpSpec, Session};

/// Checks one expectation against what the ranks left (`executors`: `None` for a rank that
/// did not finish).
pub(super) async fn check(
    expectation: &Expectation,
    scenario: &Scenario,
    config: &RunConfig,
    tokens: &[String],
    regions: &Regions,
    executors: &mut [Option<RankExecutor>],
) -> ExpectationOutcome {
    let read: Result<Observed, String> = match &expectation.subject {
        Subject::Var { rank, var } => match executors.get_mut(*rank as usize) {
            Some(Some(executor)) => executor.var(var).map(|value| value.value),
            _ => Err(format!("rank {rank} did not finish")),
        },
        Subject::Private { rank, loc } => match executors.get(*rank as usize) {
            Some(Some(executor)) => executor.inspect(loc).map_err(|e| e.to_string()),
            _ => Err(format!("rank {rank} did not finish")),
        },
        Subject::Public { rank, loc } => {
            let reading = read_public(scenario, config, tokens, regions, *rank, loc);
            match tokio::time::timeout(config.timeout, reading).await {
                Ok(result) => result.map_err(|e| format!("reading the public copy failed: {e}")),
                Err(_) => Err("reading the public copy timed out (is a lock still held?)".into()),
            }
        }
    };
    match read {
        Ok(value) => ExpectationOutcome {
            line: expectation.line,
            text: expectation.text.clone(),
            held: expectation.accepted.contains(&value),
            observed: Some(value),
            note: None,
        },
        Err(note) => ExpectationOutcome {
            line: expectation.line,
            text: expectation.text.clone(),
            held: false,
            observed: None,
            note: Some(note),
        },
    }
}

/// Reads `rank`'s public copy with a fresh session of that rank: lock shared, get, unlock
/// (on a `no_locks` window, which refuses locks, the copy the session opened the window with).
async fn read_public(
    scenario: &Scenario,
    config: &RunConfig,
    tokens: &[String],
    regions: &Regions,
    rank: u32,
    loc: &Loc,
) -> Result<Observed, Error> {
    let decl = &scenario.windows[loc.window];
    let disp = regions.disp(loc, decl.dtype.size() as u64)?;
    let session = Session::attach(&config.endpoint, &tokens[rank as usize]).await?;
    let window = session.window(&decl.name).await?;
    if window.desc().info.no_locks {
        // no epoch may be opened on the window by lock (`MPI_ERR_RMA_SYNC`), and the runner's
        // look is no epoch of the program anyway: the fresh session's private copy started as
        // the rank's public copy, so read that, recording nothing
        let offset = match &loc.region {
            Some(region) => {
                let address = regions.address(region)?;
                // a detached region is no longer part of the window, as a get would find
                if !window.regions().iter().any(|&(base, _)| base == address) {
                    return Err(RmaError::new(
                        ErrorClass::RmaRange,
                        format!("region {} is not attached at rank {rank}", region.name),
                    )
                    .into());
                }
                address.saturating_sub(DYNAMIC_BASE)
            }
            None => 0,
        };
        let mut bytes = Vec::new();
        for (at, len) in byte_runs(loc, decl.dtype)? {
            bytes.extend(window.inspect_bytes(offset.saturating_add(at), len)?);
        }
        drop(window);
        session.close().await?;
        return Ok(observed(decl.dtype, loc.shape.is_list(), &bytes)?);
    }
    // the file names world ranks; a window over part of the world numbers them in its group
    let rank = window.rank();
    window
        .lock(onesided_core::epoch::LockType::Shared, rank, 0)
        .await?;
    let spec = OpSpec {
        kind: OpKind::Get,
        dtype: decl.dtype,
        disp,
        layout: loc.shape.layout(),
        data: Bytes::new(),
        compare: Bytes::new(),
    };
    let issued = window.issue(rank, spec, false);
    let unlocked = window.unlock(rank).await;
    let bytes = issued?.value().await?;
    unlocked?;
    drop(window);
    session.close().await?;
    Ok(observed(decl.dtype, loc.shape.is_list(), &bytes)?)
}
