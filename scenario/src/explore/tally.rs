//! Many runs' outcomes summed: the distribution of every subject the expectations read, and
//! each way a run failed with how often and the first schedule that shows it, and each race
//! the checker found in the runs' logs.
//!
//! Owns: the [`ExploreReport`] and how one [`Outcome`] adds to it; every collection ordered
//! (file order, then `BTreeMap` order), so that one seed gives one report. Must not: run
//! anything, or print.

use std::collections::BTreeMap;

use onesided_core::sim::Enumeration;
use onesided_core::ErrorClass;

use super::super::ast::Scenario;
use super::outcome::{Outcome, Stuck};
use super::races::Race;
use super::Strategy;

/// A schedule that reproduces something: `--replay SEED:SCHEDULE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reproducer {
    /// The exploration's seed.
    pub seed: u64,
    /// The schedule's number (from 1).
    pub schedule: u64,
}

/// How often each value of one subject was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Distribution {
    /// What is read, as the expectation writes it (`A a`, `public B X`).
    pub subject: String,
    /// Each value read (or `no value: why`), and in how many schedules.
    pub values: BTreeMap<String, u64>,
}

/// How one expectation went over the schedules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectationTally {
    /// Its line.
    pub line: usize,
    /// As written.
    pub text: String,
    /// In how many schedules it did not hold.
    pub failed: u64,
    /// The first schedule it failed in, and what that one read.
    pub first: Option<(Reproducer, String)>,
}

/// A call that failed, expectedly or not, over the schedules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallTally {
    /// Its line.
    pub line: usize,
    /// The rank.
    pub rank: u32,
    /// The call as written.
    pub call: String,
    /// The MPI error class.
    pub class: Option<ErrorClass>,
    /// Whether its line says it must fail so.
    pub expected: bool,
    /// The error of the first schedule.
    pub message: String,
    /// In how many schedules.
    pub count: u64,
    /// The first of them.
    pub first: Reproducer,
}

/// A problem (a call that failed unexpectedly, or did not fail as its line says) over the
/// schedules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProblemTally {
    /// Its line.
    pub line: usize,
    /// What happened.
    pub message: String,
    /// In how many schedules.
    pub count: u64,
    /// The first of them.
    pub first: Reproducer,
}

/// One way the ranks got stuck, over the schedules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadlockTally {
    /// Each rank that could not move, and where.
    pub stuck: Vec<Stuck>,
    /// Their wait-for cycle, when there is one ([`super::Outcome::cycle`]).
    pub cycle: Vec<u32>,
    /// In how many schedules.
    pub count: u64,
    /// The first of them.
    pub first: Reproducer,
}

/// A race the checker found, over the schedules it showed up in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaceTally {
    /// The race, as the scenario's lines name it.
    pub race: Race,
    /// In how many schedules.
    pub count: u64,
    /// The first schedule it showed up in.
    pub first: Reproducer,
}

/// An exploration's report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExploreReport {
    /// How the schedules were drawn.
    pub strategy: Strategy,
    /// The seed.
    pub seed: u64,
    /// How many schedules ran.
    pub schedules: u64,
    /// How many of them failed (an expectation, a problem or a deadlock).
    pub failed: u64,
    /// One per subject the expectations read, in the order they first do.
    pub distributions: Vec<Distribution>,
    /// One per expectation, in file order.
    pub expectations: Vec<ExpectationTally>,
    /// Failed calls, by line, rank, class and whether expected.
    pub calls: Vec<CallTally>,
    /// Problems, by line and message.
    pub problems: Vec<ProblemTally>,
    /// Deadlocks, by who was stuck where.
    pub deadlocks: Vec<DeadlockTally>,
    /// The races the checker found in the runs' logs, by window, rule, bytes and lines (they
    /// do not count as failed schedules).
    pub races: Vec<RaceTally>,
    /// Under `exhaustive`: how the walk went — how many distinct schedules, and whether that
    /// was every one or the walk stopped at its bound.
    pub enumeration: Option<Enumeration>,
    /// Per expectation: the distribution it counts into, when it is the first to read its
    /// subject (a subject read by several lines counts once per schedule).
    counts_into: Vec<Option<usize>>,
}

/// What an expectation reads, as its line writes it: the words between `expect` and the
/// comparison (values hold no spaces).
fn subject_text(text: &str) -> String {
    let mut words = text.rsplitn(3, ' ');
    let subject = words.nth(2).unwrap_or(text);
    subject
        .strip_prefix("expect ")
        .unwrap_or(subject)
        .to_string()
}

impl ExploreReport {
    /// An empty report of `scenario`'s exploration under `seed`.
    pub fn new(scenario: &Scenario, strategy: Strategy, seed: u64) -> Self {
        let mut distributions: Vec<Distribution> = Vec::new();
        let mut counts_into = Vec::new();
        for expectation in &scenario.expectations {
            let subject = subject_text(&expectation.text);
            if distributions.iter().any(|d| d.subject == subject) {
                counts_into.push(None);
            } else {
                counts_into.push(Some(distributions.len()));
                distributions.push(Distribution {
                    subject,
                    values: BTreeMap::new(),
                });
            }
        }
        ExploreReport {
            strategy,
            seed,
            schedules: 0,
            failed: 0,
            distributions,
            expectations: scenario
                .expectations
                .iter()
                .map(|e| ExpectationTally {
                    line: e.line,
                    text: e.text.clone(),
                    failed: 0,
                    first: None,
                })
                .collect(),
            calls: Vec::new(),
            problems: Vec::new(),
            deadlocks: Vec::new(),
            races: Vec::new(),
            enumeration: None,
            counts_into,
        }
    }

    /// Whether every schedule passed.
    pub fn ok(&self) -> bool {
        self.failed == 0
    }

    /// Whether the exploration passes: every schedule did and, when races fail it (`check`,
    /// as `onesided explore --check`), no race showed up.
    pub fn passes(&self, check: bool) -> bool {
        self.ok() && (!check || self.races.is_empty())
    }

    /// Adds the outcome of schedule `schedule`.
    pub fn add(&mut self, schedule: u64, outcome: &Outcome) {
        let here = Reproducer {
            seed: self.seed,
            schedule,
        };
        self.schedules += 1;
        if !outcome.ok() {
            self.failed += 1;
        }
        for ((tally, observation), counts_into) in self
            .expectations
            .iter_mut()
            .zip(&outcome.expectations)
            .zip(&self.counts_into)
        {
            let value = match &observation.value {
                Ok(value) => value.to_string(),
                Err(why) => format!("no value: {why}"),
            };
            if !observation.held {
                tally.failed += 1;
                tally.first.get_or_insert_with(|| (here, value.clone()));
            }
            if let Some(distribution) = counts_into.and_then(|i| self.distributions.get_mut(i)) {
                *distribution.values.entry(value).or_default() += 1;
            }
        }
        self.add_calls(outcome, here);
        for problem in &outcome.problems {
            let found = self
                .problems
                .iter_mut()
                .find(|p| p.line == problem.line && p.message == problem.message);
            match found {
                Some(tally) => tally.count += 1,
                None => self.problems.push(ProblemTally {
                    line: problem.line,
                    message: problem.message.clone(),
                    count: 1,
                    first: here,
                }),
            }
        }
        if !outcome.stuck.is_empty() {
            match self.deadlocks.iter_mut().find(|d| d.stuck == outcome.stuck) {
                Some(tally) => tally.count += 1,
                None => self.deadlocks.push(DeadlockTally {
                    stuck: outcome.stuck.clone(),
                    cycle: outcome.cycle.clone(),
                    count: 1,
                    first: here,
                }),
            }
        }
        self.problems
            .sort_by(|a, b| (a.line, &a.message).cmp(&(b.line, &b.message)));
        self.add_races(outcome, here);
    }

    fn add_races(&mut self, outcome: &Outcome, here: Reproducer) {
        for race in &outcome.races {
            match self.races.binary_search_by(|tally| tally.race.cmp(race)) {
                Ok(at) => self.races[at].count += 1,
                Err(at) => self.races.insert(
                    at,
                    RaceTally {
                        race: race.clone(),
                        count: 1,
                        first: here,
                    },
                ),
            }
        }
    }

    fn add_calls(&mut self, outcome: &Outcome, here: Reproducer) {
        for (rank, failed) in &outcome.failed_calls {
            let found = self.calls.iter_mut().find(|c| {
                c.line == failed.line
                    && c.rank == *rank
                    && c.class == failed.class
                    && c.expected == failed.expected
            });
            match found {
                Some(tally) => tally.count += 1,
                None => self.calls.push(CallTally {
                    line: failed.line,
                    rank: *rank,
                    call: failed.call.clone(),
                    class: failed.class,
                    expected: failed.expected,
                    message: failed.message.clone(),
                    count: 1,
                    first: here,
                }),
            }
        }
        self.calls
            .sort_by_key(|c| (c.line, c.rank, c.class.map(|c| c.name()), c.expected));
    }
}

#[cfg(test)]
mod tests {
    use super::subject_text;

    #[test]
    fn a_subject_is_the_words_between_expect_and_the_comparison() {
        assert_eq!(subject_text("expect A a == 0"), "A a");
        assert_eq!(subject_text("expect C seen in {0,5,7}"), "C seen");
        assert_eq!(
            subject_text("expect public B W[0..3] == 5,9,3"),
            "public B W[0..3]"
        );
    }
}
