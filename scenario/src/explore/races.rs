//! The race checker over one simulated run: each window's log (`Run::history`, what the
//! audit would hold) through `onesided_core::check`, every finding named by the scenario's
//! lines instead of the run's sequence numbers, so that the same race reads the same in
//! every schedule it shows up in.
//!
//! Owns: which lines made a finding's two accesses and how a race reads. Must not: decide
//! what races (the checker does) or count races over runs (`tally` does).

use std::collections::BTreeSet;

use onesided_core::check::{self, Rule};
use onesided_core::sim::Run;

use super::super::ast::{Scenario, Step};
use super::super::parse::rank_name;
use super::translate::{window_id, Plan, Source};

/// One access of a race: which rank made it, at which line, doing what.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RaceSide {
    /// The line (0 when the access cannot be traced to one).
    pub line: usize,
    /// The rank that made it.
    pub rank: u32,
    /// What it was, as the checker names it: `put`, `get`, `accumulate(sum)`, `store`, `load`.
    pub call: String,
}

/// Two accesses of one run that conflict and that the run's synchronization does not order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Race {
    /// The window, as the file names it.
    pub window: String,
    /// The rule broken.
    pub rule: Rule,
    /// The window rank whose memory both touch.
    pub target: u32,
    /// The overlapping bytes `[start, end)`.
    pub bytes: (u64, u64),
    /// The access of the earlier line (of the lower rank, on one line).
    pub first: RaceSide,
    /// The other.
    pub second: RaceSide,
    /// The race in a sentence, as the scenario's lines name it.
    pub message: String,
}

impl Race {
    fn text(&self, scenario: &Scenario, nranks: u32) -> String {
        let side = |side: &RaceSide| {
            let who = rank_name(side.rank, nranks);
            match line_text(scenario, side.line) {
                Some(text) => format!("line {} `{text}` ({who}'s {})", side.line, side.call),
                None => format!("{who}'s {}", side.call),
            }
        };
        format!(
            "{} and {} on bytes [{}, {}) of {}'s {}: {}",
            side(&self.first),
            side(&self.second),
            self.bytes.0,
            self.bytes.1,
            rank_name(self.target, nranks),
            self.window,
            self.rule.describe()
        )
    }
}

/// The text of the rank call or barrier at `line`.
fn line_text(scenario: &Scenario, line: usize) -> Option<String> {
    scenario.steps.iter().find_map(|step| match step {
        Step::Call(call) if call.line == line => Some(call.text.clone()),
        Step::Barrier { line: at } if *at == line => Some("barrier".to_string()),
        _ => None,
    })
}

/// The races the checker finds in each window's log of `run`, each once, in order.
pub(super) fn races(plan: &Plan, scenario: &Scenario, run: &Run) -> Vec<Race> {
    let mut found = BTreeSet::new();
    for index in 0..plan.windows.len() {
        let window = window_id(index);
        // the log names window ranks, the file world ranks
        let members = &plan.windows[index].group;
        let world = |rank: u32| members.get(rank as usize).copied().unwrap_or(rank);
        for finding in check::check(&run.history(window)) {
            let side = |side: &check::Side| RaceSide {
                line: line_of(plan, scenario, run, (window, &world), side.seq),
                rank: world(side.rank),
                call: side.call.clone(),
            };
            let (first, second) = (side(&finding.first), side(&finding.second));
            let (first, second) = if second < first {
                (second, first)
            } else {
                (first, second)
            };
            let mut race = Race {
                window: plan.window_name(window).to_string(),
                rule: finding.rule,
                target: world(finding.target),
                bytes: finding.bytes,
                first,
                second,
                message: String::new(),
            };
            race.message = race.text(scenario, plan.nranks);
            found.insert(race);
        }
    }
    found.into_iter().collect()
}

/// The line of the action that recorded event `seq` of `window`'s log (0: none).
/// `window` is the window's id and its ranks' world ranks.
fn line_of(
    plan: &Plan,
    scenario: &Scenario,
    run: &Run,
    (window, world): (u64, &dyn Fn(u32) -> u32),
    seq: u64,
) -> usize {
    let Some(logged) = run.logged(window, seq) else {
        return 0;
    };
    let rank = world(logged.record.rank) as usize;
    let source = logged
        .action
        .and_then(|action| plan.sources.get(rank)?.get(action));
    match source {
        Some(Source::Call(step)) => match &scenario.steps[*step] {
            Step::Call(call) => call.line,
            Step::Barrier { line } => *line,
        },
        Some(Source::Barrier(line)) => *line,
        None => 0,
    }
}
