//! Exploring a scenario: its ranks' lines run on core's simulator (`onesided_core::sim`) under
//! many seeded schedules, no server and no network, and every run's expectations checked
//! (issue 42: the `random`, `pct` and `exhaustive` strategies).
//!
//! Split by concern: `translate.rs` turns a parsed [`Scenario`] into the simulator's windows
//! and programs, and refuses up front, naming the line, what the simulator cannot run;
//! `pct.rs` is PCT as the simulator's `Schedule`; `outcome.rs` reads one simulated [`Run`] as
//! the scenario's variables, copies, failed calls and deadlock; `tally.rs` sums many outcomes
//! into an [`ExploreReport`] (the distribution of every expected subject, each failure with a
//! schedule that reproduces it).
//!
//! Owns: which schedule seed schedule K of seed S runs under ([`schedule_seed`]), the
//! [`Strategy`], running one schedule and many, and how a replayed run's trace reads step by
//! step ([`Explorer::replay`], from the simulator's narration). Must not: decide an MPI rule
//! (the simulator runs core's admission, routes and target engine), print, read a clock for
//! anything but the engines' one reading, or iterate in hash order (the same seed gives the
//! same report, byte for byte).

pub mod json;
mod outcome;
mod pct;
mod races;
mod tally;
mod translate;

use std::time::Instant;

use onesided_core::sim::{self, Choice, Happening, Replay, Run, Seeded, World};
use onesided_core::RmaError;

use super::ast::{Scenario, Step};
use super::parse::rank_name;

pub use onesided_core::sim::Enumeration;
pub use outcome::{Observation, Outcome, Stuck};
pub use races::{Race, RaceSide};
pub use tally::{
    CallTally, DeadlockTally, Distribution, ExpectationTally, ExploreReport, ProblemTally,
    RaceTally, Reproducer,
};

use translate::{Plan, Source};

/// Why a scenario cannot be explored.
#[derive(Debug, thiserror::Error)]
pub enum ExploreError {
    /// The text is not a scenario ([`explore`] parses it first).
    #[error(transparent)]
    Parse(#[from] super::parse::ParseError),
    /// A window declaration the server would refuse too (an info value MPI cannot mean).
    #[error("line {line}: window {name} cannot be created")]
    Window {
        /// The declaration's line.
        line: usize,
        /// The window.
        name: String,
        /// Why.
        #[source]
        source: RmaError,
    },
    /// A call whose values do not become bytes.
    #[error("line {line}: `{text}` cannot be translated")]
    Call {
        /// Its line.
        line: usize,
        /// The call as written.
        text: String,
        /// Why.
        #[source]
        source: RmaError,
    },
}

/// What [`explore`] runs: how many schedules, from which seed, drawn how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// How many schedules (under `exhaustive`: at most how many).
    pub schedules: u64,
    /// The seed they are drawn from.
    pub seed: u64,
    /// How they are drawn.
    pub strategy: Strategy,
}

impl Default for Options {
    /// As `onesided explore` without options: 1000 random schedules of seed 0.
    fn default() -> Self {
        Options {
            schedules: 1000,
            seed: 0,
            strategy: Strategy::Random,
        }
    }
}

/// Parses the scenario `text` and explores it: the Rust entry point to what `onesided explore
/// FILE` runs, the same report for the same text and options.
///
/// ```
/// use onesided_scenario::explore::{explore, ExploreError, Options, Strategy};
///
/// let text = "window W ranks=2 size=1 type=i64\n\
///             A: lock exclusive B\nA: put B W[0] = 42\nA: unlock B\nbarrier\n\
///             B: load W[0] -> b\nexpect B b in {0,42}\n";
/// let report = explore(text, &Options::default()).unwrap();
/// assert!(report.ok());
/// let seen: Vec<&String> = report.distributions[0].values.keys().collect();
/// assert_eq!(seen, ["0", "42"]);
/// let every = Options { strategy: Strategy::Exhaustive, ..Options::default() };
/// assert!(explore(text, &every).unwrap().enumeration.unwrap().complete);
/// let not_a_scenario = explore("A: fence", &Options::default());
/// assert!(matches!(not_a_scenario, Err(ExploreError::Parse(_))));
/// ```
///
/// # Errors
/// [`ExploreError::Parse`] for text that does not parse, the others for what the simulator
/// cannot run, naming the line.
pub fn explore(text: &str, options: &Options) -> Result<ExploreReport, ExploreError> {
    let scenario = super::parse::parse(text)?;
    let explorer = Explorer::new(&scenario)?.with_strategy(options.strategy);
    Ok(explorer.explore(options.seed, options.schedules))
}

/// The seed schedule `schedule` of seed `seed` runs under: derived from both, so that any one
/// schedule of an exploration can be run again alone (`--replay S:K`). Distinct schedules of
/// one seed get distinct seeds (SplitMix64's output is a bijection of its state).
pub fn schedule_seed(seed: u64, schedule: u64) -> u64 {
    let base = Seeded::new(seed).next_u64();
    Seeded::new(base ^ schedule).next_u64()
}

/// How schedules are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Uniformly among the steps possible at each point.
    Random,
    /// PCT of depth `depth` (at least 1): random thread priorities and `depth - 1` change
    /// points (`pct.rs`).
    Pct {
        /// The number of orderings a bug it looks for needs.
        depth: u32,
    },
    /// Every distinct schedule once, in a fixed order, up to a bound (`core::sim::exhaustive`:
    /// two schedules that differ only in the order of independent steps are one); the seed
    /// plays no part.
    Exhaustive,
}

impl std::str::FromStr for Strategy {
    type Err = String;

    /// `random`, `pct` (depth 3), `pct:DEPTH` or `exhaustive`.
    fn from_str(text: &str) -> Result<Self, String> {
        match text.split_once(':') {
            None if text == "random" => Ok(Strategy::Random),
            None if text == "exhaustive" => Ok(Strategy::Exhaustive),
            None if text == "pct" => Ok(Strategy::Pct { depth: 3 }),
            Some(("pct", depth)) => match depth.parse() {
                Ok(depth) if depth >= 1 => Ok(Strategy::Pct { depth }),
                _ => Err("the depth is a number, 1 or more".to_string()),
            },
            _ => Err("one of random, pct, pct:DEPTH, exhaustive".to_string()),
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Strategy::Random => f.write_str("random"),
            Strategy::Pct { depth } => write!(f, "pct:{depth}"),
            Strategy::Exhaustive => f.write_str("exhaustive"),
        }
    }
}

/// A scenario ready to run on the simulator.
#[derive(Debug)]
pub struct Explorer<'a> {
    scenario: &'a Scenario,
    plan: Plan,
    now: Instant,
    strategy: Strategy,
    /// Whether each schedule's logs go through the race checker (on unless
    /// [`Explorer::without_races`]).
    races: bool,
    /// How many steps a run takes, about (PCT's change points are drawn up to it): the
    /// length of the random schedule 1 of seed 0.
    steps: u64,
}

impl<'a> Explorer<'a> {
    /// Translates `scenario` for the simulator.
    ///
    /// # Errors
    /// [`ExploreError`] naming the first line the simulator cannot run.
    pub fn new(scenario: &'a Scenario) -> Result<Self, ExploreError> {
        let mut explorer = Explorer {
            scenario,
            plan: translate::plan(scenario)?,
            // the engines' one clock reading: no time passes in a simulated world
            now: Instant::now(),
            strategy: Strategy::Random,
            races: true,
            steps: 0,
        };
        explorer.steps = explorer.run(0, 1).0.trace.len() as u64;
        Ok(explorer)
    }

    /// How it draws its schedules.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The explorer without the race checker: outcomes only, no races in them (what the
    /// check costs, `cargo bench -p onesided-scenario --bench explore` shows beside).
    pub fn without_races(mut self) -> Self {
        self.races = false;
        self
    }

    /// The explorer drawing its schedules with `strategy` (random by default).
    pub fn with_strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Runs schedule `schedule` of seed `seed` (see [`schedule_seed`]; under `exhaustive`,
    /// the walk's schedule `schedule`, whatever the seed) and reads its outcome.
    pub fn run(&self, seed: u64, schedule: u64) -> (Run, Outcome) {
        self.run_in(self.world(), seed, schedule)
    }

    fn world(&self) -> World {
        World::new(self.plan.nranks, self.plan.windows.clone(), self.now)
            .expect("translate admits only windows the simulator runs")
    }

    fn run_in(&self, world: World, seed: u64, schedule: u64) -> (Run, Outcome) {
        let seed = schedule_seed(seed, schedule);
        let programs = self.plan.programs.clone();
        let run = match self.strategy {
            Strategy::Random => world.run(programs, &mut Seeded::new(seed)),
            Strategy::Pct { depth } => {
                world.run(programs, &mut pct::Pct::new(seed, depth, self.steps))
            }
            Strategy::Exhaustive => {
                // the walk's schedule `schedule`, run again from its trace
                let mut trace = Vec::new();
                let programs = &self.plan.programs;
                sim::exhaustive(|| self.world(), programs, schedule, |run| trace = run.trace);
                world.run(programs.clone(), &mut Replay::new(trace))
            }
        };
        let outcome = outcome::evaluate(&self.plan, self.scenario, &run, self.races);
        (run, outcome)
    }

    /// Runs schedules 1 to `schedules` of seed `seed` and sums their outcomes; under
    /// `exhaustive`, every distinct schedule up to that many, and the report says whether
    /// that was all of them ([`ExploreReport::enumeration`]).
    pub fn explore(&self, seed: u64, schedules: u64) -> ExploreReport {
        let mut report = ExploreReport::new(self.scenario, self.strategy, seed);
        if self.strategy == Strategy::Exhaustive {
            let programs = &self.plan.programs;
            let walk = sim::exhaustive(
                || self.world(),
                programs,
                schedules,
                |run| {
                    let outcome = outcome::evaluate(&self.plan, self.scenario, &run, self.races);
                    report.add(report.schedules + 1, &outcome);
                },
            );
            report.enumeration = Some(walk);
            return report;
        }
        for schedule in 1..=schedules {
            let (_, outcome) = self.run(seed, schedule);
            report.add(schedule, &outcome);
        }
        report
    }

    /// Runs schedule `schedule` of seed `seed` again, as [`Explorer::run`] does, and says
    /// step by step what happened: which rank ran which line, which input a target took from
    /// its inbox, which answer reached its origin (each with the line it concerns).
    pub fn replay(&self, seed: u64, schedule: u64) -> (Run, Outcome, Vec<String>) {
        let (run, outcome) = self.run_in(self.world().narrated(), seed, schedule);
        let steps = run
            .trace
            .iter()
            .zip(&run.narration)
            .map(|(choice, happening)| self.step_text(choice, happening))
            .collect();
        (run, outcome, steps)
    }

    /// The log of window `name` (as the file names it) in `run`, as the audit would hold it:
    /// what the race checker reads and what a Perfetto trace draws. `None` for a name the
    /// scenario does not declare.
    pub fn history(&self, run: &Run, name: &str) -> Option<Vec<onesided_core::audit::AuditRecord>> {
        let index = self.scenario.windows.iter().position(|w| w.name == name)?;
        Some(run.history(translate::window_id(index)))
    }

    fn step_text(&self, choice: &Choice, happening: &Happening) -> String {
        let nranks = self.plan.nranks;
        let line = |(rank, action): (u32, usize)| {
            let who = rank_name(rank, nranks);
            match self.plan.sources[rank as usize].get(action) {
                Some(Source::Barrier(line)) => format!("{who}'s barrier of line {line}"),
                Some(Source::Call(step)) => match &self.scenario.steps[*step] {
                    Step::Call(call) => format!("{who}'s line {}: {}", call.line, call.text),
                    Step::Barrier { line } => format!("{who}'s line {line}"),
                },
                None => format!("{who}'s action {action}"),
            }
        };
        let about = happening.about.map(line);
        match (choice, about) {
            (Choice::Call { .. }, Some(about)) => format!("runs {about}"),
            (
                Choice::Deliver { window, .. }
                | Choice::Overtake { window, .. }
                | Choice::Lose { window, .. },
                about,
            ) => {
                let window = self.plan.window_name(*window);
                let about = about.map(|a| format!(" (from {a})")).unwrap_or_default();
                format!("window {window}, {}{about}", happening.what)
            }
            (Choice::Publish { window, .. } | Choice::Refresh { window, .. }, _) => {
                let window = self.plan.window_name(*window);
                format!("window {window}, {}", happening.what)
            }
            (_, Some(about)) => format!("{} (to {about})", happening.what),
            (_, None) => happening.what.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    /// Two writers take turns under an exclusive lock, in either order; a reader gets the
    /// lock after both.
    const TURNS: &str = "\
window W ranks=3 size=1 type=i64
B: lock exclusive A
B: put A W[0] = 1
B: unlock A
C: lock exclusive A
C: put A W[0] = 2
C: unlock A
barrier
A: lock shared A
A: get A W[0] -> last
A: unlock A
expect A last == 2
expect public A W[0] in {1,2}
";

    #[test]
    fn both_lock_orders_show_up_and_the_reader_sees_the_last_writer() {
        let scenario = parse(TURNS).unwrap();
        let report = Explorer::new(&scenario).unwrap().explore(7, 300);
        let seen = |index: usize| -> Vec<String> {
            report.distributions[index].values.keys().cloned().collect()
        };
        assert_eq!(seen(0), ["1", "2"]);
        assert_eq!(seen(1), ["1", "2"]);
        let failed = &report.expectations[0];
        assert!(failed.failed > 0 && failed.failed < 300, "{failed:?}");
        assert_eq!(report.expectations[1].failed, 0);
        let (first, observed) = failed.first.clone().unwrap();
        assert_eq!(observed, "1");
        // the reproducer runs the same schedule again
        let (_, outcome) = Explorer::new(&scenario)
            .unwrap()
            .run(first.seed, first.schedule);
        assert!(!outcome.expectations[0].held);
        assert_eq!(
            outcome.expectations[0].value.as_ref().unwrap().to_string(),
            observed
        );
    }

    #[test]
    fn one_seed_gives_one_report_and_schedules_get_distinct_seeds() {
        let scenario = parse(TURNS).unwrap();
        let explorer = Explorer::new(&scenario).unwrap();
        assert_eq!(explorer.explore(3, 100), explorer.explore(3, 100));
        let seeds: std::collections::BTreeSet<u64> =
            (1..=1000).map(|k| schedule_seed(3, k)).collect();
        assert_eq!(seeds.len(), 1000);
        assert_ne!(schedule_seed(3, 1), schedule_seed(4, 1));
    }

    /// Forum example 2 as it was, stating onesided's obsolete value (MPI allows 42 too).
    const OBSOLETE: &str = "\
window W ranks=2 size=1 type=i64
A: lock exclusive B
A: put B W[0] = 42
A: unlock B
barrier
B: load W[0] -> b
expect B b == 0
";

    /// The exhaustive walk sees every value random schedules see, and more schedules do not
    /// make it see more: it is complete. Its failing schedules replay as numbered.
    #[test]
    fn the_exhaustive_walk_sees_every_value_random_schedules_see() {
        let scenario = parse(OBSOLETE).unwrap();
        let random = Explorer::new(&scenario).unwrap().explore(7, 1000);
        let explorer = Explorer::new(&scenario)
            .unwrap()
            .with_strategy(Strategy::Exhaustive);
        let every = explorer.explore(0, 1_000_000);
        let walk = every.enumeration.unwrap();
        assert!(walk.complete, "{walk:?}");
        assert_eq!(every.schedules, walk.schedules);
        for (seen, all) in random.distributions.iter().zip(&every.distributions) {
            for value in seen.values.keys() {
                assert!(all.values.contains_key(value), "{value} of {}", all.subject);
            }
        }
        let (first, observed) = every.expectations[0].first.clone().unwrap();
        let (_, outcome) = explorer.run(first.seed, first.schedule);
        assert!(!outcome.expectations[0].held);
        assert_eq!(
            outcome.expectations[0].value.as_ref().unwrap().to_string(),
            observed
        );
        let bounded = explorer.explore(0, 3);
        assert_eq!(bounded.schedules, 3);
        assert!(!bounded.enumeration.unwrap().complete);
    }
}
