//! Every rank at once: one task per rank runs its lines in file order, then the closing
//! barrier; the tasks are joined under the run's deadline, then each rank's report is taken and
//! its session closed.
//!
//! Owns: attaching each rank's [`RankExecutor`] (sharing the run's [`Regions`]), which lines a
//! rank runs (its own calls and every barrier), the progress that names the line a stuck rank
//! is at, the closing barrier (only when every rank is attached at the end, retried through the
//! barrier instances a crashed rank failed), the deadline, and closing every session before the
//! expectations are read. Must not: interpret a call (the executor does), or read an
//! expectation.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use backon::{ConstantBuilder, Retryable};
use onesided_core::{Datatype, ErrorClass};
use tokio::task::JoinHandle;

use super::super::ast::{Call, RankCall, Scenario, Step};
use super::super::parse::rank_name;
use super::{Problem, RankExecutor, RankReport, Regions, RunConfig};
use onesided_client::Error;

/// One line a rank executes, owned by the rank's task.
#[derive(Debug)]
enum OwnedAction {
    Call(Box<RankCall>),
    Barrier(usize),
}

/// Attaches a session of every rank, with the run's windows open; they share `regions`.
pub(super) async fn attach_all(
    scenario: &Scenario,
    config: &RunConfig,
    tokens: &[String],
    regions: &Regions,
) -> Result<Vec<RankExecutor>, Error> {
    let opened: Vec<(String, Datatype)> = scenario
        .windows
        .iter()
        .map(|decl| (decl.name.clone(), decl.dtype))
        .collect();
    let mut executors = Vec::new();
    for token in tokens {
        let mut executor = RankExecutor::attach(&config.endpoint, token, opened.clone()).await?;
        executor.regions = regions.clone();
        executors.push(executor);
    }
    Ok(executors)
}

/// Runs every rank's lines at once, one task per rank, until each finished or the run's
/// deadline passed: each rank's executor (`None` for a rank that did not finish), and what went
/// wrong with the tasks.
pub(super) async fn run_all(
    scenario: &Scenario,
    config: &RunConfig,
    executors: Vec<RankExecutor>,
) -> (Vec<Option<RankExecutor>>, Vec<Problem>) {
    let alive_at_end = alive_at_end(scenario);
    let progress: Vec<Arc<AtomicUsize>> = (0..scenario.ranks)
        .map(|_| Arc::new(AtomicUsize::new(0)))
        .collect();
    let mut tasks = Vec::new();
    for (rank, executor) in executors.into_iter().enumerate() {
        let owned: Vec<OwnedAction> = scenario
            .steps
            .iter()
            .filter_map(|step| match step {
                Step::Barrier { line } => Some(OwnedAction::Barrier(*line)),
                Step::Call(call) if call.rank == rank as u32 => {
                    Some(OwnedAction::Call(call.clone()))
                }
                Step::Call(_) => None,
            })
            .collect();
        let at = Arc::clone(&progress[rank]);
        tasks.push(tokio::spawn(rank_task(
            rank as u32,
            executor,
            owned,
            at,
            alive_at_end,
        )));
    }
    join(tasks, &progress, config.timeout).await
}

/// When every rank is attached at the end, the runner closes the run with one more world
/// barrier, so that the reads of `expect public` come after every rank's last access in the
/// audit log's happens-before (otherwise `audit check` would see them as races).
fn alive_at_end(scenario: &Scenario) -> bool {
    (0..scenario.ranks).all(|rank| {
        scenario
            .steps
            .iter()
            .filter_map(|step| match step {
                Step::Call(call) if call.rank == rank => match call.call {
                    Call::Crash => Some(false),
                    Call::Attach => Some(true),
                    _ => None,
                },
                _ => None,
            })
            .next_back()
            .unwrap_or(true)
    })
}

/// One rank's task: its lines in order (`at` says which line it is at), then the closing
/// barrier when every rank is attached at the end.
async fn rank_task(
    rank: u32,
    mut executor: RankExecutor,
    owned: Vec<OwnedAction>,
    at: Arc<AtomicUsize>,
    alive_at_end: bool,
) -> RankExecutor {
    for action in &owned {
        match action {
            OwnedAction::Barrier(line) => {
                at.store(*line, Ordering::Relaxed);
                if let Err(error) = executor.barrier().await {
                    executor.problems.push(Problem {
                        line: *line,
                        message: format!(
                            "{}: barrier failed: {error}",
                            rank_name(rank, executor.nranks)
                        ),
                    });
                }
            }
            OwnedAction::Call(call) => {
                at.store(call.line, Ordering::Relaxed);
                executor.execute(call).await;
            }
        }
    }
    if alive_at_end {
        closing_barrier(&mut executor, rank).await;
    }
    executor
}

/// The barrier that closes the run; a problem of the rank when it fails.
async fn closing_barrier(executor: &mut RankExecutor, rank: u32) {
    // A rank that crashed and attached again failed the barrier instances that were
    // entered while it was gone, for every rank alike; a rank that comes later
    // fails through them at once, so retrying meets at the first instance that
    // did not fail. The pause only spaces the retries of a rank that is early.
    let this = &*executor;
    let closing = (move || this.barrier())
        .retry(
            ConstantBuilder::default()
                .with_delay(Duration::from_millis(10))
                .with_max_times(500),
        )
        .when(|error| error.class() == Some(ErrorClass::ProcFailed))
        .await;
    if let Err(error) = closing {
        executor.problems.push(Problem {
            line: 0,
            message: format!(
                "{}: the closing barrier failed: {error}",
                rank_name(rank, executor.nranks)
            ),
        });
    }
}

/// Joins the ranks' tasks, all by one deadline `timeout` from now; a rank still running then is
/// stopped and reported at the line it is at.
async fn join(
    tasks: Vec<JoinHandle<RankExecutor>>,
    progress: &[Arc<AtomicUsize>],
    timeout: Duration,
) -> (Vec<Option<RankExecutor>>, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut finished: Vec<Option<RankExecutor>> = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    for (rank, task) in tasks.into_iter().enumerate() {
        let abort = task.abort_handle();
        match tokio::time::timeout_at(deadline, task).await {
            Ok(Ok(executor)) => finished.push(Some(executor)),
            Ok(Err(join)) => {
                problems.push(Problem {
                    line: 0,
                    message: format!("rank {rank} stopped: {join}"),
                });
                finished.push(None);
            }
            Err(_) => {
                abort.abort();
                let line = progress[rank].load(Ordering::Relaxed);
                problems.push(Problem {
                    line,
                    message: format!(
                        "rank {rank} did not finish within {:?}: stuck at line {line}",
                        timeout
                    ),
                });
                finished.push(None);
            }
        }
    }
    (finished, problems)
}

/// What each rank ended with; the problems of the ranks that finished join `problems`.
pub(super) fn reports(
    finished: &mut [Option<RankExecutor>],
    problems: &mut Vec<Problem>,
) -> Vec<RankReport> {
    let mut ranks = Vec::new();
    for (rank, executor) in finished.iter_mut().enumerate() {
        let report = match executor {
            Some(executor) => {
                problems.extend(executor.problems.iter().cloned());
                RankReport {
                    rank: rank as u32,
                    vars: executor.vars(),
                    failed_calls: executor.failed_calls.clone(),
                }
            }
            None => RankReport {
                rank: rank as u32,
                vars: BTreeMap::new(),
                failed_calls: Vec::new(),
            },
        };
        ranks.push(report);
    }
    ranks
}

/// Ends every session cleanly: the last loads and stores, and the client's own audit rows
/// when it writes them itself, are in the log before the run reports. Before the
/// expectations are read: `expect public` attaches a fresh session of the rank, which
/// ends any session of it still attached (a rank has one live session).
pub(super) async fn close_sessions(
    finished: &mut [Option<RankExecutor>],
    problems: &mut Vec<Problem>,
) {
    for (rank, executor) in finished.iter_mut().enumerate() {
        let Some(session) = executor
            .as_mut()
            .and_then(|executor| executor.session.take())
        else {
            continue;
        };
        if let Err(error) = session.close().await {
            problems.push(Problem {
                line: 0,
                message: format!("rank {rank}: closing the session failed: {error}"),
            });
        }
    }
}
