//! One simulated run read as the scenario's outcome: its ranks' variables, the public and
//! private copies the expectations read, its failed calls against their `!CLASS`, and where
//! each rank stuck in a deadlock.
//!
//! Owns: a variable's value in a run (the last call of the rank, in program order, that
//! assigned it: a load from its loaded bytes, an operation from what its answer brought back;
//! none when that call failed or was never answered), reading a copy at a location, and which
//! line a stuck rank waits at (the last action it began, counted from the trace). Must not:
//! run anything, or compare outcomes of several runs (`tally` does).

use std::collections::BTreeMap;

use onesided_core::datatype::Value;
use onesided_core::sim::{wait_cycle, Choice, Run};
use onesided_core::window::DYNAMIC_BASE;
use onesided_core::RmaError;

use super::super::ast::{self, Expectation, Loc, Observed, OpCall, RankCall, Scenario, Step};
use super::super::buffers::{byte_runs, observed, unpacked};
use super::super::parse::{rank_name, returns_list};
use super::super::run::{FailedCall, Problem};
use super::races::{self, Race};
use super::translate::{window_id, Plan, Planned, Source};

/// What one expectation read in one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// The value read, or why there was none.
    pub value: Result<Observed, String>,
    /// Whether the line accepts it.
    pub held: bool,
}

/// A rank that could not move when the run ended.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stuck {
    /// The rank.
    pub rank: u32,
    /// The line it waits at (0: none of its lines began).
    pub line: usize,
    /// What it waits for.
    pub waits: String,
    /// The ranks it waits for (`onesided_core::sim::Stuck::on`), in rank order.
    pub on: Vec<u32>,
}

/// The outcome of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Per expectation, in file order.
    pub expectations: Vec<Observation>,
    /// The calls that failed, expectedly or not.
    pub failed_calls: Vec<(u32, FailedCall)>,
    /// What fails the run besides an expectation: a call that failed without its `!CLASS`,
    /// or succeeded despite one.
    pub problems: Vec<Problem>,
    /// When no rank could move and some had not finished: each of those.
    pub stuck: Vec<Stuck>,
    /// A wait-for cycle among them, each rank waiting for the next and the last for the first
    /// (empty when there is none: the waits end at ranks that finished).
    pub cycle: Vec<u32>,
    /// The races the checker finds in the run's logs (`races.rs`), each once. They do not
    /// fail the run by themselves ([`Outcome::ok`]): `onesided explore --check` makes them.
    pub races: Vec<Race>,
}

impl Outcome {
    /// Whether every expectation held, no call failed unexpectedly, and no rank got stuck.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
            && self.stuck.is_empty()
            && self.expectations.iter().all(|e| e.held)
    }
}

/// What one run produced, indexed by rank and action.
struct Produced<'r> {
    /// Per rank: how many actions of its program began.
    begun: Vec<usize>,
    loads: BTreeMap<(u32, &'r str), &'r [u8]>,
    fetched: BTreeMap<(u32, usize), &'r [u8]>,
    errors: BTreeMap<(u32, usize), &'r RmaError>,
    flags: BTreeMap<(u32, usize), bool>,
    indices: BTreeMap<(u32, usize), i64>,
}

impl<'r> Produced<'r> {
    fn of(plan: &Plan, run: &'r Run) -> Self {
        let mut begun = vec![0; plan.nranks as usize];
        for choice in &run.trace {
            if let Choice::Call { rank } = choice {
                begun[*rank as usize] += 1;
            }
        }
        let mut errors = BTreeMap::new();
        for (rank, action, error) in &run.errors {
            errors.entry((*rank, *action)).or_insert(error);
        }
        Produced {
            begun,
            loads: run
                .loads
                .iter()
                .map(|(rank, label, bytes)| ((*rank, label.as_str()), bytes.as_slice()))
                .collect(),
            fetched: run
                .fetched
                .iter()
                .map(|(rank, action, bytes)| ((*rank, *action), bytes.as_slice()))
                .collect(),
            errors,
            flags: run
                .flags
                .iter()
                .map(|(rank, action, flag)| ((*rank, *action), *flag))
                .collect(),
            indices: run
                .indices
                .iter()
                .map(|(rank, action, index)| ((*rank, *action), *index))
                .collect(),
        }
    }

    fn began(&self, rank: u32, planned: &Planned) -> bool {
        let begun = self.begun[rank as usize];
        planned.actions.start < begun
            || (planned.actions.is_empty() && planned.actions.start <= begun)
    }

    /// The first error of any of the call's actions.
    fn error(&self, rank: u32, planned: &Planned) -> Option<&'r RmaError> {
        planned
            .actions
            .clone()
            .find_map(|action| self.errors.get(&(rank, action)).copied())
    }
}

fn rank_call<'s>(scenario: &'s Scenario, planned: &Planned) -> Option<&'s RankCall> {
    match &scenario.steps[planned.step] {
        Step::Call(call) => Some(call),
        Step::Barrier { .. } => None,
    }
}

/// Reads `run` as the scenario's outcome.
pub(super) fn evaluate(plan: &Plan, scenario: &Scenario, run: &Run, check_races: bool) -> Outcome {
    let produced = Produced::of(plan, run);
    let mut outcome = Outcome {
        expectations: Vec::new(),
        failed_calls: Vec::new(),
        problems: Vec::new(),
        stuck: stuck(plan, scenario, run, &produced),
        cycle: wait_cycle(&run.stuck).unwrap_or_default(),
        races: if check_races {
            races::races(plan, scenario, run)
        } else {
            Vec::new()
        },
    };
    let mut vars = Vec::new();
    for rank in 0..plan.nranks {
        judge_calls(plan, scenario, &produced, rank, &mut outcome);
        vars.push(variables(plan, scenario, &produced, rank));
    }
    outcome.expectations = scenario
        .expectations
        .iter()
        .map(|expectation| {
            let value = read(expectation, scenario, run, &vars);
            let held = value
                .as_ref()
                .is_ok_and(|value| expectation.accepted.contains(value));
            Observation { value, held }
        })
        .collect();
    outcome
}

/// Rank `rank`'s calls that began, against their `!CLASS`.
fn judge_calls(
    plan: &Plan,
    scenario: &Scenario,
    produced: &Produced<'_>,
    rank: u32,
    outcome: &mut Outcome,
) {
    let who = rank_name(rank, plan.nranks);
    // a call whose answer never came (a deadlock) has not succeeded yet
    let settled = outcome.stuck.is_empty();
    for planned in &plan.calls[rank as usize] {
        let Some(call) = rank_call(scenario, planned).filter(|_| produced.began(rank, planned))
        else {
            continue;
        };
        match (produced.error(rank, planned), call.expect_fail) {
            (Some(error), _) => {
                let (failed, problem) =
                    FailedCall::judged(&who, call, Some(error.class), error.to_string());
                outcome.failed_calls.push((rank, failed));
                outcome.problems.extend(problem);
            }
            (None, Some(class)) if settled => {
                outcome.problems.push(Problem::unfailed(&who, call, class));
            }
            (None, _) => {}
        }
    }
    // a barrier fails (a rank departed) in the runner's words
    for (action, source) in plan.sources[rank as usize].iter().enumerate() {
        let (Source::Barrier(line), Some(error)) = (source, produced.errors.get(&(rank, action)))
        else {
            continue;
        };
        outcome.problems.push(Problem {
            line: *line,
            message: format!("{who}: barrier failed: {error}"),
        });
    }
}

/// Rank `rank`'s variables at the end of the run: each the value of the last call that
/// assigned it, or why it has none.
fn variables(
    plan: &Plan,
    scenario: &Scenario,
    produced: &Produced<'_>,
    rank: u32,
) -> BTreeMap<String, Result<Observed, String>> {
    let mut vars = BTreeMap::new();
    for planned in &plan.calls[rank as usize] {
        let Some(call) = rank_call(scenario, planned).filter(|_| produced.began(rank, planned))
        else {
            continue;
        };
        let failed = produced.error(rank, planned).is_some();
        match &call.call {
            ast::Call::Load { loc, var } => {
                let value = if failed {
                    Err(format!("{var} has no value: its load failed"))
                } else {
                    let parts: Option<Vec<&[u8]>> = planned
                        .actions
                        .clone()
                        .map(|action| {
                            produced
                                .loads
                                .get(&(rank, action.to_string().as_str()))
                                .copied()
                        })
                        .collect();
                    let Some(parts) = parts else { continue };
                    let dtype = scenario.windows[loc.window].dtype;
                    observed(dtype, loc.shape.is_list(), &parts.concat()).map_err(|e| e.to_string())
                };
                vars.insert(var.clone(), value);
            }
            ast::Call::Test { var, .. }
            | ast::Call::TestReq { var, .. }
            | ast::Call::TestAll { var, .. } => {
                let flag = produced.flags.get(&(rank, planned.actions.start));
                let value = match flag {
                    _ if failed => Err(format!("{var} has no value: its test failed")),
                    Some(&flag) => Ok(Observed::Scalar(Value::Bool(flag))),
                    None => Err(format!(
                        "{var} is not defined yet: its test has not returned"
                    )),
                };
                vars.insert(var.clone(), value);
            }
            ast::Call::WaitAny { var, .. } => {
                let value = match produced.indices.get(&(rank, planned.actions.start)) {
                    Some(&index) => Ok(Observed::Scalar(Value::Int(index.into()))),
                    None => Err(format!(
                        "{var} is not defined yet: its wait has not returned"
                    )),
                };
                vars.insert(var.clone(), value);
            }
            ast::Call::Op(spec) => {
                let Some(var) = &spec.var else { continue };
                let value = match produced.fetched.get(&(rank, planned.actions.start)) {
                    _ if failed => Err(format!("{var} has no value: its operation failed")),
                    Some(bytes) => fetched_value(scenario, spec, bytes),
                    None => Err(format!(
                        "{var} is not defined yet: its operation has not completed"
                    )),
                };
                vars.insert(var.clone(), value);
            }
            _ => {}
        }
    }
    vars
}

/// The value an operation's answer defines its variable with (a get's origin layout says
/// where its values land).
fn fetched_value(
    scenario: &Scenario,
    spec: &ast::OpCallSpec,
    bytes: &[u8],
) -> Result<Observed, String> {
    let dtype = scenario.windows[spec.loc.window].dtype;
    let list = returns_list(spec.kind, &spec.loc, spec.origin.as_deref());
    let value = match (&spec.kind, &spec.origin) {
        (OpCall::Get, Some(origin)) => {
            unpacked(dtype, origin, bytes).and_then(|buffer| observed(dtype, list, &buffer))
        }
        _ => observed(dtype, list, bytes),
    };
    value.map_err(|e| e.to_string())
}

/// What an expectation reads in the run.
fn read(
    expectation: &Expectation,
    scenario: &Scenario,
    run: &Run,
    vars: &[BTreeMap<String, Result<Observed, String>>],
) -> Result<Observed, String> {
    match &expectation.subject {
        ast::Subject::Var { rank, var } => vars
            .get(*rank as usize)
            .and_then(|vars| vars.get(var))
            .cloned()
            .unwrap_or_else(|| Err(format!("{var} was never assigned"))),
        ast::Subject::Public { rank, loc } => {
            // a detached region's bytes are no longer part of the window (its owner's memory
            // keeps them: `expect private` reads them)
            if let Some(region) = loc
                .region
                .as_ref()
                .filter(|r| run.detached.contains(&r.name))
            {
                return Err(format!("region {} was detached", region.name));
            }
            copy_at(&run.publics, run, scenario, *rank, loc)
        }
        ast::Subject::Private { rank, loc } => copy_at(&run.privates, run, scenario, *rank, loc),
    }
}

/// The elements at `loc` of world rank `rank`'s copy among `copies` (public or private, in
/// window-rank order).
fn copy_at(
    copies: &BTreeMap<u64, Vec<Vec<u8>>>,
    run: &Run,
    scenario: &Scenario,
    rank: u32,
    loc: &Loc,
) -> Result<Observed, String> {
    let decl = &scenario.windows[loc.window];
    let dtype = decl.dtype;
    let at = match &decl.group {
        Some(group) => group.iter().position(|&member| member == rank),
        None => Some(rank as usize),
    };
    // in a region of a dynamic window: from its place in the rank's memory
    let base = match &loc.region {
        Some(region) => {
            let address = run.regions.get(&region.name).ok_or_else(|| {
                format!(
                    "region {} has no address: its attach did not succeed",
                    region.name
                )
            })?;
            address.saturating_sub(DYNAMIC_BASE)
        }
        None => 0,
    };
    let copy = copies
        .get(&window_id(loc.window))
        .zip(at)
        .and_then(|(copies, at)| copies.get(at))
        .ok_or_else(|| format!("rank {rank} has no copy of the window"))?;
    let mut bytes = Vec::new();
    for (offset, len) in byte_runs(loc, dtype).map_err(|e| e.to_string())? {
        let offset = base.saturating_add(offset);
        let end = offset.saturating_add(len);
        let run = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(end).ok())
            .and_then(|(start, end)| copy.get(start..end))
            .ok_or_else(|| format!("the location is outside the window of rank {rank}"))?;
        bytes.extend_from_slice(run);
    }
    observed(dtype, loc.shape.is_list(), &bytes).map_err(|e| e.to_string())
}

/// Each rank that could not move at the end: the line of the last action it began, and what
/// it waits for there (the simulator's account, which names its program's actions).
fn stuck(plan: &Plan, scenario: &Scenario, run: &Run, produced: &Produced<'_>) -> Vec<Stuck> {
    run.stuck
        .iter()
        .map(|stuck| {
            let rank = &stuck.rank;
            let began = produced.begun[*rank as usize];
            let source = began
                .checked_sub(1)
                .and_then(|action| plan.sources[*rank as usize].get(action));
            let (line, text) = match source {
                Some(Source::Barrier(line)) => (*line, "barrier".to_string()),
                Some(Source::Call(step)) => match &scenario.steps[*step] {
                    Step::Call(call) => (call.line, call.text.clone()),
                    Step::Barrier { line } => (*line, "barrier".to_string()),
                },
                None => (0, String::new()),
            };
            // a rank inside a call or the barrier, or one that ran its whole program
            let waits = if stuck.action.is_some() {
                format!("waits in `{text}`")
            } else {
                "ran its last line; operations it issued were never answered".to_string()
            };
            Stuck {
                rank: *rank,
                line,
                waits,
                on: stuck.on.clone(),
            }
        })
        .collect()
}
