//! `onesided explore`'s speed: schedules per second on one thread (the explorer runs in the
//! caller's thread, no server), for the forum examples and for generated counters — R ranks
//! each adding 1 to one element N times with `fetch_and_op` under `lock_all` — to show how it
//! scales with ranks and operations.
//!
//! `cargo bench -p onesided-scenario --bench explore -- [SECONDS] [STRATEGY]` (a release build;
//! here rather than in `onesided-bench`, whose release build takes the whole server along)
//!
//! Each row: the scenario, ranks, window calls per schedule, the steps of schedule 1 (every
//! call, message taken, answer and early copy exchange is one), how many schedules ran in about
//! SECONDS (0.5 by default) and schedules/s — as `onesided explore` runs them, with the race
//! checker over every schedule's logs — and, beside, schedules/s without the race checker.
//! STRATEGY: `random` (default) or `pct:3`.
use std::time::{Duration, Instant};

use onesided_scenario::explore::{Explorer, Strategy};

/// The forum examples the simulator runs (the unified ones it refuses).
const FORUM: &[&str] = &[
    "forum1_store_without_lock",
    "forum1_unlock_publishes",
    "forum2_load_without_lock",
    "forum2_lock_pulls",
    "forum3_store_before_shared_lock",
    "forum3_win_sync",
    "forum4_put_to_self",
    "forum4_store_in_pscw",
    "forum5_load_after_wait",
    "forum5_load_in_pscw",
    "forum5_local_get",
];

/// R ranks, each `ops` fetch_and_ops on rank A's counter under lock_all.
fn counter(ranks: u32, ops: u32) -> String {
    let mut text = format!("window C ranks={ranks} size=1 type=u64\n");
    for rank in 0..ranks {
        let name = onesided_scenario::rank_name(rank, ranks);
        text.push_str(&format!("{name}: lock_all\n"));
        for _ in 0..ops {
            text.push_str(&format!("{name}: fop A C[0] op=sum = 1 -> t\n"));
        }
        text.push_str(&format!("{name}: unlock_all\n"));
    }
    text.push_str(&format!("expect public A C[0] == {}\n", ranks * ops));
    text
}

/// Runs schedules of `text` for about `budget`: (calls per schedule, steps of schedule 1,
/// schedules, schedules/s), with the race checker over every schedule's logs or without.
fn measure(
    text: &str,
    strategy: Strategy,
    budget: Duration,
    races: bool,
) -> (usize, usize, u64, f64) {
    let scenario = onesided_scenario::parse(text).expect("the scenario parses");
    let explorer = Explorer::new(&scenario)
        .expect("the simulator runs it")
        .with_strategy(strategy);
    let explorer = if races {
        explorer
    } else {
        explorer.without_races()
    };
    let steps = explorer.run(0, 1).0.trace.len();
    let calls = scenario.steps.len();
    // a first round to size the measured one
    let warm = Instant::now();
    let report = explorer.explore(1, 20);
    assert!(report.ok(), "the scenario holds in every schedule");
    let per = warm.elapsed().as_secs_f64() / 20.0;
    let schedules = ((budget.as_secs_f64() / per) as u64).max(20);
    let started = Instant::now();
    let report = explorer.explore(2, schedules);
    let took = started.elapsed().as_secs_f64();
    assert!(report.ok(), "the scenario holds in every schedule");
    (calls, steps, schedules, schedules as f64 / took)
}

fn main() {
    // `cargo bench` passes `--bench` first
    let mut args = std::env::args().skip(1).filter(|arg| arg != "--bench");
    let seconds: f64 = args.next().map_or(0.5, |s| s.parse().expect("SECONDS"));
    let strategy = match args.next().as_deref() {
        None | Some("random") => Strategy::Random,
        Some("pct:3") => Strategy::Pct { depth: 3 },
        Some(other) => panic!("strategy {other}: random or pct:3"),
    };
    let budget = Duration::from_secs_f64(seconds);
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    println!("strategy {strategy}, about {seconds} s a row, one thread");
    println!(
        "{:<34} {:>5} {:>5} {:>6} {:>9} {:>12} {:>16}",
        "scenario", "ranks", "lines", "steps", "schedules", "schedules/s", "without races/s"
    );
    let mut rows = Vec::new();
    for name in FORUM {
        let text = std::fs::read_to_string(examples.join(format!("{name}.rma")))
            .expect("the example is there");
        rows.push((name.to_string(), 2, text));
    }
    for ranks in [2, 4, 8] {
        for ops in [10, 100] {
            rows.push((
                format!("counter {ranks}×{ops} fop"),
                ranks,
                counter(ranks, ops),
            ));
        }
    }
    for (name, ranks, text) in rows {
        let (calls, steps, schedules, rate) = measure(&text, strategy, budget, true);
        let (.., bare) = measure(&text, strategy, budget, false);
        println!(
            "{name:<34} {ranks:>5} {calls:>5} {steps:>6} {schedules:>9} {rate:>12.0} {bare:>16.0}"
        );
    }
}
