//! An exploration's report and its parts as JSON: what `onesided explore --json` prints and
//! what the Python package's `explore` returns, one document for both.
//!
//! Owns: the JSON shape of a report, a race, stuck ranks and a reproducer (ranks by name,
//! lists in the report's order, so one seed gives one document). Must not: print, or run
//! anything.

use serde_json::{json, Value as Json};

use super::super::ast::Scenario;
use super::super::parse::rank_name;
use super::{ExploreReport, Race, RaceSide, Reproducer, Stuck};

/// A reproducer: `{"seed", "schedule"}`.
pub fn at_json(at: Reproducer) -> Json {
    json!({"seed": at.seed, "schedule": at.schedule})
}

/// Ranks by name.
pub fn names(scenario: &Scenario, ranks: &[u32]) -> Json {
    ranks
        .iter()
        .map(|rank| Json::from(rank_name(*rank, scenario.ranks)))
        .collect()
}

/// Stuck ranks: each with its name, line, what it waits for and for whom.
pub fn stuck_json(scenario: &Scenario, stuck: &[Stuck]) -> Json {
    stuck
        .iter()
        .map(|s| {
            json!({
                "rank": s.rank,
                "name": rank_name(s.rank, scenario.ranks),
                "line": s.line,
                "waits": s.waits,
                "on": names(scenario, &s.on),
            })
        })
        .collect()
}

/// A race: its window, rule, target, bytes, the two accesses (line, rank, call) and message.
pub fn race_json(race: &Race) -> Json {
    let side = |side: &RaceSide| json!({"line": side.line, "rank": side.rank, "call": side.call});
    json!({
        "window": race.window,
        "rule": race.rule.name(),
        "target": race.target,
        "bytes": [race.bytes.0, race.bytes.1],
        "accesses": [side(&race.first), side(&race.second)],
        "message": race.message,
    })
}

/// The whole report of exploring `file` (its name as the document shows it); `check`: whether
/// races fail it (`ok`), as `--check` makes them.
pub fn report_json(file: &str, scenario: &Scenario, report: &ExploreReport, check: bool) -> Json {
    let distribution: serde_json::Map<String, Json> = report
        .distributions
        .iter()
        .map(|d| (d.subject.clone(), json!(d.values)))
        .collect();
    let expectations: Vec<Json> = report
        .expectations
        .iter()
        .map(|tally| {
            json!({
                "line": tally.line,
                "text": tally.text,
                "failed": tally.failed,
                "first": tally.first.as_ref().map(|(at, observed)| {
                    json!({"seed": at.seed, "schedule": at.schedule, "observed": observed})
                }),
            })
        })
        .collect();
    let calls: Vec<Json> = report
        .calls
        .iter()
        .map(|call| {
            json!({
                "line": call.line,
                "rank": call.rank,
                "call": call.call,
                "class": call.class.map(|class| class.name()),
                "expected": call.expected,
                "message": call.message,
                "count": call.count,
                "first": at_json(call.first),
            })
        })
        .collect();
    let problems: Vec<Json> = report
        .problems
        .iter()
        .map(|p| json!({"line": p.line, "message": p.message, "count": p.count, "first": at_json(p.first)}))
        .collect();
    let deadlocks: Vec<Json> = report
        .deadlocks
        .iter()
        .map(|d| json!({"stuck": stuck_json(scenario, &d.stuck), "cycle": names(scenario, &d.cycle), "count": d.count, "first": at_json(d.first)}))
        .collect();
    json!({
        "file": file,
        "strategy": report.strategy.to_string(),
        "seed": report.seed,
        "schedules": report.schedules,
        "failed": report.failed,
        "distribution": distribution,
        "expectations": expectations,
        "failed_calls": calls,
        "problems": problems,
        "deadlocks": deadlocks,
        "races": report.races.iter().map(|tally| {
            let mut race = race_json(&tally.race);
            race["count"] = json!(tally.count);
            race["first"] = at_json(tally.first);
            race
        }).collect::<Vec<_>>(),
        "complete": report.enumeration.map(|walk| walk.complete),
        "ok": report.passes(check),
    })
}
