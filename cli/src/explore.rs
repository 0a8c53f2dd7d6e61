//! `onesided explore FILE`: run a scenario on the in-memory simulator under many seeded
//! schedules and print every outcome they showed, or replay one schedule step by step.
//!
//! Owns: the command's arguments (`--schedules`, `--seed`, `--strategy`, `--replay S:K`,
//! `--check`, `--trace FILE`), how the report and a replay read (text and JSON, in a fixed
//! order: one seed, one output), writing a replayed schedule's Perfetto trace, and the exit
//! status (1 when a schedule failed an expectation, failed a call unexpectedly or deadlocked,
//! or under `--check` showed a race). Must not: translate or run the scenario (the library's `explore` does), or
//! print a timestamp or anything else that differs between two runs of one seed.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use onesided_scenario::explore::json::{names, race_json, report_json, stuck_json};
use onesided_scenario::explore::{
    schedule_seed, ExploreReport, Explorer, Outcome, Reproducer, Strategy, Stuck,
};
use onesided_scenario::{self as scenario, rank_name, Scenario};
use serde_json::{json, Value as Json};

use crate::exit::Usage;
use crate::{json, Global};

#[derive(Debug, Args)]
#[command(after_long_help = "\
Runs the scenario on the in-memory simulator of onesided's core, with no server and no network: \
the same admission, routing and target engine as the server, every order between ranks, \
targets and answers chosen by a schedule drawn from the seed. Schedule K of seed S runs under a \
seed derived from both, so `--replay S:K` runs that one schedule again and prints its trace \
step by step. The same seed gives the same output, byte for byte.

The report gives, for every variable and location the expectations read, how often each value \
was seen; each expectation that failed, in how many schedules, and the first schedule that \
shows it; calls that failed; and deadlocks (no rank could move) with the line each rank waits \
at, the ranks it waits for, and their wait-for cycle when there is one; and the races the race \
checker (`onesided audit check`) finds in the schedules' logs — each schedule records the audit \
events a server and its clients would — each with the two lines that race, the rule, in how \
many schedules and the first that shows it. Exit status: 0 when every schedule passed, 1 when \
one failed an expectation, failed a call without `!CLASS` or deadlocked (or, with --check, \
showed a race), 2 for a file that does not parse or a bad argument, 3 for a window or call the \
server would refuse too (the message names the line).

--replay S:K --trace FILE writes that schedule's log of one window (--trace-window, the first \
by default) as a Perfetto trace: one track per rank, one microsecond per step of the \
schedule. Open it in the web view (Explored trace) or at ui.perfetto.dev.

--strategy pct[:DEPTH] draws schedules by PCT (probabilistic concurrency testing, Burckhardt \
et al., ASPLOS 2010): every rank, every target's inbox and the answers on their way get random \
priorities, the highest enabled one moves, and at DEPTH - 1 random steps the moving one drops \
below all others; a rank that must stay behind for a whole run is found in a good share of \
schedules, where uniform random choices almost never keep it back. DEPTH is 3 by default.

--strategy exhaustive runs every distinct schedule once, in a fixed order (the seed plays no \
part), up to --schedules of them: a depth-first walk over the steps with sleep sets, so that \
of two schedules that differ only in the order of independent steps (touching different \
ranks, targets or inboxes) one runs. The report says `complete: N distinct schedules` when \
that was every one, or that the walk stopped at the bound. The number of distinct schedules \
grows fast with ranks and messages (the forum examples have 15 to 108 945; the 4-rank \
counter example, more than a debug build walks in minutes): meant for small scenarios.

What the simulator runs: windows of either memory model and every flavor, over the whole \
world or a group (the file's world ranks made the window's; a rank outside it refused as run \
refuses it), dynamic windows' attach, detach and locations in regions, fence, PSCW (post, start, complete, wait, test), lock, unlock, lock_all, \
unlock_all, the flush family, sync, put, get, acc, get_acc, fop, cas with every layout, their \
request-based forms with wait_req, wait_all, wait_any, test_req, test_all and free_req (a \
request is complete at the origin: an rget's data is back, an rput may not be applied yet; \
wait_any returns the first of its list complete once one is), set_info (a collective: \
MPI_ERR_INFO for all when the ranks ask for different infos), stores, loads and barriers. The schedule also chooses when a rank's private stores reach its \
public copy and when operations' updates reach its private copy: at any step up to the call \
MPI names as the latest point (MPI-3.1 §11.7, rules 5 and 6), so the obsolete values MPI allows \
and their up-to-date alternatives both show up (onesided's server gives the obsolete ones). A \
target may take one origin's item before another origin's, its owner's own (a push, its fence, \
post, wait, attach, detach) before other origins' items sent earlier, and one origin's puts \
and gets of an epoch in any order, its accumulates as the window's accumulate_ordering allows; flush_local \
returns once the data of its gets is back, before its puts are applied. In the unified model \
the same exchanges may happen at any step, and once the programs ended the two copies are one \
(MPI: eventually). An operation its target refuses fails the call that completes it, as the \
client reports it. A crashed rank departs as on a server (its departure reaches each target behind what it \
sent, when the schedule says, and what it sent after the last answer it saw may never have \
left it; it attaches again once every target took the departure); sleep runs as \
nothing (a pause orders \
nothing).")]
pub struct ExploreArgs {
    /// The scenario file (.rma)
    file: PathBuf,
    /// How many schedules to run
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    schedules: u64,
    /// The seed the schedules are drawn from
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// How schedules are drawn: random (uniform among the steps possible at each point),
    /// pct, pct:DEPTH (probabilistic concurrency testing, depth 3 by default), or exhaustive
    /// (every distinct schedule once, up to --schedules of them)
    #[arg(
        long,
        default_value = "random",
        value_name = "random|pct[:DEPTH]|exhaustive"
    )]
    strategy: String,
    /// Run schedule K of seed S alone and print its trace step by step
    #[arg(long, value_name = "S:K", value_parser = reproducer)]
    replay: Option<Reproducer>,
    /// Exit 1 when the race checker finds a race in a schedule's log (as `onesided run
    /// --check`); without it races are reported and do not change the exit status
    #[arg(long)]
    check: bool,
    /// With --replay: write that schedule's log of one window as a Perfetto trace (JSON) to
    /// FILE, as `onesided audit export --format perfetto` writes a live one
    #[arg(long, value_name = "FILE", requires = "replay")]
    trace: Option<PathBuf>,
    /// The window --trace draws (default: the first the file declares)
    #[arg(long, value_name = "NAME", requires = "trace")]
    trace_window: Option<String>,
}

/// `S:K`: a seed and a schedule number (from 1).
fn reproducer(text: &str) -> Result<Reproducer, String> {
    let (seed, schedule) = text
        .split_once(':')
        .ok_or_else(|| format!("\"{text}\" is not SEED:SCHEDULE"))?;
    let seed = seed
        .parse()
        .map_err(|_| format!("\"{seed}\" is not a seed (a number)"))?;
    let schedule = schedule
        .parse()
        .ok()
        .filter(|&k: &u64| k >= 1)
        .ok_or_else(|| format!("\"{schedule}\" is not a schedule number (1 or more)"))?;
    Ok(Reproducer { seed, schedule })
}

pub fn explore(global: &Global, args: ExploreArgs) -> Result<ExitCode> {
    let strategy: Strategy = args
        .strategy
        .parse()
        .map_err(|why| Usage(format!("--strategy {}: {why}", args.strategy)))?;
    let file = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| Usage(format!("cannot read {file}: {e}")))?;
    let scenario = scenario::parse(&text).map_err(|e| Usage(format!("{file}:{e}")))?;
    let explorer = Explorer::new(&scenario)
        .map_err(|e| anyhow::Error::new(e).context(file.clone()))?
        .with_strategy(strategy);
    if let Some(at) = args.replay {
        let trace = match args.trace {
            Some(path) => {
                let names = scenario.windows.iter().map(|w| w.name.as_str());
                let names: Vec<&str> = names.collect();
                let window = args.trace_window.as_deref().or(names.first().copied());
                let window = window.filter(|name| names.contains(name)).ok_or_else(|| {
                    Usage(format!(
                        "--trace-window: {file} declares the windows {}",
                        names.join(", ")
                    ))
                })?;
                Some((path, window.to_string()))
            }
            None => None,
        };
        let checked = Replayed {
            file: &file,
            scenario: &scenario,
            explorer: &explorer,
            check: args.check,
        };
        return checked.replay(global, at, trace);
    }
    let report = explorer.explore(args.seed, args.schedules);
    if global.json {
        json::print(&report_json(&file, &scenario, &report, args.check));
    } else {
        print_report(&file, &scenario, &report, args.check);
    }
    Ok(exit(passed(&report, args.check)))
}

/// Whether the exploration passes: every schedule did, and with `--check` no race showed up.
fn passed(report: &ExploreReport, check: bool) -> bool {
    report.passes(check)
}

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn replay_hint(file: &str, strategy: Strategy, at: Reproducer) -> String {
    let with = match strategy {
        Strategy::Random => String::new(),
        other => format!(" --strategy {other}"),
    };
    format!(
        "onesided explore {file}{with} --replay {}:{}",
        at.seed, at.schedule
    )
}

fn stuck_text(scenario: &Scenario, stuck: &Stuck) -> String {
    let name = |rank: &u32| rank_name(*rank, scenario.ranks);
    let on: Vec<String> = stuck.on.iter().map(name).collect();
    let on = if on.is_empty() {
        String::new()
    } else {
        format!(", for {}", on.join(", "))
    };
    format!(
        "{} at line {}: {}{on}",
        name(&stuck.rank),
        stuck.line,
        stuck.waits
    )
}

/// `A (line 2) → B (line 5) → A`: each rank waits for the next.
fn cycle_text(scenario: &Scenario, stuck: &[Stuck], cycle: &[u32]) -> Option<String> {
    let first = cycle.first()?;
    let names: Vec<String> = cycle
        .iter()
        .chain(Some(first))
        .map(|rank| {
            let line = stuck.iter().find(|s| s.rank == *rank).map_or(0, |s| s.line);
            format!("{} (line {line})", rank_name(*rank, scenario.ranks))
        })
        .collect();
    Some(format!("wait-for cycle: {}", names.join(" → ")))
}

fn print_report(file: &str, scenario: &Scenario, report: &ExploreReport, check: bool) {
    match report.enumeration {
        None => outln!(
            "explored {} schedule(s) of seed {} (strategy {})",
            report.schedules,
            report.seed,
            report.strategy
        ),
        Some(walk) if walk.complete => outln!(
            "explored every schedule (strategy exhaustive): complete: {} distinct schedules",
            walk.schedules
        ),
        Some(walk) => outln!(
            "explored {} distinct schedule(s) (strategy exhaustive): stopped at the bound \
             (--schedules {}), more remain",
            walk.schedules,
            walk.schedules
        ),
    }
    if !report.distributions.is_empty() {
        outln!("values over {} schedule(s):", report.schedules);
        for distribution in &report.distributions {
            let mut values: Vec<(&String, &u64)> = distribution.values.iter().collect();
            values.sort_by(|a, b| natural(a.0, b.0));
            let parts: Vec<String> = values
                .iter()
                .map(|(value, count)| format!("{value} ×{count}"))
                .collect();
            outln!("  {}: {}", distribution.subject, parts.join(", "));
        }
    }
    for tally in &report.expectations {
        match &tally.first {
            None => outln!(
                "  {file}:{}: {}: held in every schedule",
                tally.line,
                tally.text
            ),
            Some((at, observed)) => outln!(
                "  {file}:{}: {}: did NOT hold in {} of {} schedule(s); first schedule {} \
                 observed {observed} (replay: {})",
                tally.line,
                tally.text,
                tally.failed,
                report.schedules,
                at.schedule,
                replay_hint(file, report.strategy, *at)
            ),
        }
    }
    for call in &report.calls {
        let how = if call.expected {
            "as expected"
        } else {
            "unexpectedly"
        };
        outln!(
            "  {file}:{}: {} `{}` failed {how} in {} schedule(s): {}",
            call.line,
            rank_name(call.rank, scenario.ranks),
            call.call,
            call.count,
            call.message
        );
    }
    for problem in &report.problems {
        outln!(
            "  {file}:{}: {} in {} schedule(s) (replay: {})",
            problem.line,
            problem.message,
            problem.count,
            replay_hint(file, report.strategy, problem.first)
        );
    }
    for deadlock in &report.deadlocks {
        outln!(
            "  deadlock in {} schedule(s) (replay: {}):",
            deadlock.count,
            replay_hint(file, report.strategy, deadlock.first)
        );
        for stuck in &deadlock.stuck {
            outln!("    {}", stuck_text(scenario, stuck));
        }
        if let Some(cycle) = cycle_text(scenario, &deadlock.stuck, &deadlock.cycle) {
            outln!("    {cycle}");
        }
    }
    for tally in &report.races {
        outln!(
            "  race ({}) in {} of {} schedule(s) (replay: {}): {}",
            tally.race.rule.name(),
            tally.count,
            report.schedules,
            replay_hint(file, report.strategy, tally.first),
            tally.race.message
        );
    }
    if !passed(report, check) && report.ok() {
        outln!(
            "FAILED: the race checker found {} race(s) (--check)",
            report.races.len()
        );
    } else if report.ok() {
        let races = match report.races.len() {
            0 => "no race".to_string(),
            n => format!("{n} race(s) reported above"),
        };
        outln!(
            "ok: {} expectation(s) held in {} schedule(s); {races}",
            scenario.expectations.len(),
            report.schedules
        );
    } else {
        outln!(
            "FAILED: {} of {} schedule(s) failed",
            report.failed,
            report.schedules
        );
    }
}

/// Numbers in numeric order (2 before 10), everything else after them as text.
fn natural(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x.total_cmp(&y),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

/// What `--replay` runs again and how it judges it.
struct Replayed<'a> {
    file: &'a str,
    scenario: &'a Scenario,
    explorer: &'a Explorer<'a>,
    /// `--check`: a race fails it.
    check: bool,
}

impl Replayed<'_> {
    /// `--replay S:K`: the schedule's steps, then its outcome and races; with `--trace`, its
    /// log of one window written as a Perfetto trace.
    fn replay(
        &self,
        global: &Global,
        at: Reproducer,
        trace: Option<(PathBuf, String)>,
    ) -> Result<ExitCode> {
        let (run, outcome, steps) = self.explorer.replay(at.seed, at.schedule);
        if let Some((path, window)) = &trace {
            let history = self.explorer.history(&run, window).unwrap_or_default();
            let text = serde_json::to_string(&onesided_core::export::perfetto(&history))?;
            std::fs::write(path, text)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        }
        let ok = outcome.ok() && (!self.check || outcome.races.is_empty());
        if global.json {
            let mut document = self.replay_json(at, &steps, &outcome, ok);
            if let Some((path, window)) = &trace {
                document["trace"] = json!({"window": window, "file": path.display().to_string()});
            }
            json::print(&document);
        } else {
            self.replay_text(at, &steps, &outcome, ok);
            if let Some((path, window)) = &trace {
                outln!("wrote window {window}'s trace to {}", path.display());
            }
        }
        Ok(exit(ok))
    }

    fn replay_json(&self, at: Reproducer, steps: &[String], outcome: &Outcome, ok: bool) -> Json {
        let scenario = self.scenario;
        json!({
            "file": self.file,
            "seed": at.seed,
            "schedule": at.schedule,
            "schedule_seed": schedule_seed(at.seed, at.schedule),
            "strategy": self.explorer.strategy().to_string(),
            "steps": steps,
            "expectations": outcome_json(scenario, outcome),
            "problems": outcome.problems.iter().map(|p| json!({"line": p.line, "message": p.message})).collect::<Vec<_>>(),
            "deadlock": stuck_json(scenario, &outcome.stuck),
            "cycle": names(scenario, &outcome.cycle),
            "races": outcome.races.iter().map(race_json).collect::<Vec<_>>(),
            "ok": ok,
        })
    }

    fn replay_text(&self, at: Reproducer, steps: &[String], outcome: &Outcome, ok: bool) {
        let (file, scenario) = (self.file, self.scenario);
        outln!(
            "schedule {} of seed {} (strategy {}, {} steps):",
            at.schedule,
            at.seed,
            self.explorer.strategy(),
            steps.len()
        );
        for (index, step) in steps.iter().enumerate() {
            outln!("  {:>4}  {step}", index + 1);
        }
        for (expectation, observation) in scenario.expectations.iter().zip(&outcome.expectations) {
            let verdict = if observation.held {
                "held"
            } else {
                "did NOT hold"
            };
            let observed = match &observation.value {
                Ok(value) => format!("observed {value}"),
                Err(why) => why.clone(),
            };
            outln!(
                "  {file}:{}: {}: {verdict} ({observed})",
                expectation.line,
                expectation.text
            );
        }
        for problem in &outcome.problems {
            outln!("  {file}:{}: {}", problem.line, problem.message);
        }
        if !outcome.stuck.is_empty() {
            outln!("  deadlock:");
            for stuck in &outcome.stuck {
                outln!("    {}", stuck_text(scenario, stuck));
            }
            if let Some(cycle) = cycle_text(scenario, &outcome.stuck, &outcome.cycle) {
                outln!("    {cycle}");
            }
        }
        for race in &outcome.races {
            outln!("  race ({}): {}", race.rule.name(), race.message);
        }
        outln!("{}", if ok { "ok" } else { "FAILED" });
    }
}

fn outcome_json(scenario: &Scenario, outcome: &Outcome) -> Json {
    scenario
        .expectations
        .iter()
        .zip(&outcome.expectations)
        .map(|(expectation, observation)| {
            json!({
                "line": expectation.line,
                "text": expectation.text,
                "held": observation.held,
                "observed": observation.value.as_ref().ok().map(json::observed),
                "note": observation.value.as_ref().err(),
            })
        })
        .collect()
}
