//! Running a scenario: a fresh world and fresh windows, one [`Session`] per rank, every rank
//! concurrently, then the expectations; and [`RankExecutor`], one rank's interpreter of calls,
//! which the shell uses too.
//!
//! Split by concern (issue 41): this file holds the configuration and the report of a run, and
//! [`run`], the order of its steps; `world.rs` creates the run's windows, `ranks.rs` runs every
//! rank's lines at once under the run's deadline, `executor.rs` is the [`RankExecutor`] (the
//! calls that move data in `operations.rs`, the requests in `requests.rs`, the regions of
//! dynamic windows in `regions.rs`), and `expectations.rs` checks the expectations.
//!
//! Owns: what each scenario call does in terms of the library's [`Window`] methods, and the
//! report of a run. Must not: print, or know about the CLI; the binary renders reports.
//!
//! [`Session`]: onesided_client::Session
//! [`Window`]: onesided_client::Window

use std::collections::BTreeMap;
use std::time::Duration;

use onesided_core::{Datatype, ErrorClass};

use super::ast::{Observed, RankCall, Scenario};
use onesided_client::{Admin, Endpoint, Error};

mod executor;
mod expectations;
mod operations;
mod ranks;
mod regions;
mod requests;
mod world;

pub use executor::RankExecutor;
use regions::Regions;

/// Where and how to run.
#[derive(Clone)]
pub struct RunConfig {
    /// The server: its URL, and its CA for TLS.
    pub endpoint: Endpoint,
    /// The admin token (to create and delete the world).
    pub admin_token: String,
    /// How long every rank together may take before the run is declared stuck.
    pub timeout: Duration,
    /// A prefix that makes the world's name unique to this invocation.
    pub prefix: String,
}

impl std::fmt::Debug for RunConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunConfig")
            .field("endpoint", &self.endpoint)
            .field("timeout", &self.timeout)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// Why a run could not take place at all (as opposed to a scenario that failed).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The server refused to set the run up, or could not be reached.
    #[error(transparent)]
    Client(#[from] Error),
    /// The scenario asks for something this implementation does not offer (every window
    /// declaration the format has is offered today; kept for what the format gains next).
    #[error("line {line}: {message}")]
    Unsupported {
        /// The line asking for it.
        line: usize,
        /// What.
        message: String,
    },
}

/// A variable's value with the element type it was read as.
#[derive(Clone, Debug, PartialEq)]
pub struct VarValue {
    /// The element type.
    pub dtype: Datatype,
    /// The value.
    pub value: Observed,
}

/// A call that failed (expectedly or not).
#[derive(Clone, Debug, PartialEq)]
pub struct FailedCall {
    /// Its line.
    pub line: usize,
    /// The call as written.
    pub call: String,
    /// The MPI error class, when the failure carried one.
    pub class: Option<ErrorClass>,
    /// The error.
    pub message: String,
    /// Whether the line said it must fail with exactly this class.
    pub expected: bool,
}

impl FailedCall {
    /// The call `call` of rank `who` failed with `class` (`message`): how it went against its
    /// `!CLASS`, and the problem it makes unless it failed exactly as the line says.
    pub(crate) fn judged(
        who: &str,
        call: &RankCall,
        class: Option<ErrorClass>,
        message: String,
    ) -> (FailedCall, Option<Problem>) {
        let expected = call.expect_fail;
        let matched = expected.is_some() && class == expected;
        let problem = (!matched).then(|| {
            let wanted = match expected {
                Some(wanted) => format!(" (expected {})", wanted.name()),
                None => String::new(),
            };
            Problem {
                line: call.line,
                message: format!("{who}: `{}` failed: {message}{wanted}", call.text),
            }
        });
        let failed = FailedCall {
            line: call.line,
            call: call.text.clone(),
            class,
            message,
            expected: matched,
        };
        (failed, problem)
    }
}

impl Problem {
    /// The call `call` of rank `who` succeeded though its line says it must fail with `class`.
    pub(crate) fn unfailed(who: &str, call: &RankCall, class: ErrorClass) -> Problem {
        Problem {
            line: call.line,
            message: format!(
                "{who}: `{}` succeeded but must fail with {}",
                call.text,
                class.name()
            ),
        }
    }
}

/// Something that makes the run fail, besides an expectation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The line it concerns (0 for the run as a whole).
    pub line: usize,
    /// What happened.
    pub message: String,
}

/// What one rank ended with.
#[derive(Clone, Debug, PartialEq)]
pub struct RankReport {
    /// The rank.
    pub rank: u32,
    /// Its variables that hold a value.
    pub vars: BTreeMap<String, VarValue>,
    /// Its calls that failed.
    pub failed_calls: Vec<FailedCall>,
}

/// One expectation, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpectationOutcome {
    /// Its line.
    pub line: usize,
    /// As written.
    pub text: String,
    /// Whether it held.
    pub held: bool,
    /// What was observed, when something could be read.
    pub observed: Option<Observed>,
    /// Why nothing could be read.
    pub note: Option<String>,
}

/// A window a run created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatedWindow {
    /// Its name.
    pub name: String,
    /// Its server-assigned id.
    pub id: u64,
}

/// The report of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// 1-based run number.
    pub run: usize,
    /// The world it ran in (deleted afterwards).
    pub world: String,
    /// Per rank.
    pub ranks: Vec<RankReport>,
    /// Per expectation, in file order.
    pub expectations: Vec<ExpectationOutcome>,
    /// Failures that are not expectations: calls that failed without `!`, calls that did not
    /// fail as their `!CLASS` said, ranks that did not finish.
    pub problems: Vec<Problem>,
    /// The windows it created.
    pub windows: Vec<CreatedWindow>,
}

impl RunReport {
    /// Whether every expectation held and nothing else went wrong.
    pub fn ok(&self) -> bool {
        self.problems.is_empty() && self.expectations.iter().all(|e| e.held)
    }
}

/// Runs the scenario once (run number `run`) in a fresh world that is deleted afterwards.
///
/// # Errors
/// [`RunError`] when the run cannot be set up; a scenario that fails gives an `Ok` report
/// whose [`RunReport::ok`] is false.
pub async fn run(
    scenario: &Scenario,
    config: &RunConfig,
    run: usize,
) -> Result<RunReport, RunError> {
    let admin = Admin::connect(&config.endpoint, &config.admin_token).await?;
    let world = format!("{}-{run}", config.prefix);
    let created = admin.create_world(&world, scenario.ranks).await?;
    let outcome = run_in_world(scenario, config, run, &admin, &world, &created.tokens).await;
    if let Err(error) = admin.delete_world(&world).await {
        tracing::warn!(%world, %error, "could not delete the run's world");
    }
    outcome
}

/// The run in its world, once created: the windows, the ranks, the expectations.
async fn run_in_world(
    scenario: &Scenario,
    config: &RunConfig,
    run: usize,
    admin: &Admin,
    world: &str,
    tokens: &[String],
) -> Result<RunReport, RunError> {
    let windows = world::create_windows(scenario, config, admin, world, tokens).await?;
    let regions = Regions::default();
    let executors = ranks::attach_all(scenario, config, tokens, &regions).await?;
    let (mut finished, mut problems) = ranks::run_all(scenario, config, executors).await;
    let reports = ranks::reports(&mut finished, &mut problems);
    ranks::close_sessions(&mut finished, &mut problems).await;
    let mut expectations = Vec::new();
    for expectation in &scenario.expectations {
        expectations.push(
            expectations::check(
                expectation,
                scenario,
                config,
                tokens,
                &regions,
                &mut finished,
            )
            .await,
        );
    }
    problems.sort_by_key(|problem| problem.line);
    Ok(RunReport {
        run,
        world: world.to_string(),
        ranks: reports,
        expectations,
        problems,
        windows,
    })
}
