//! `onesided explore`: scenarios on the in-memory simulator under seeded schedules, no
//! server. What MPI guarantees holds in every schedule, what it allows shows up, one seed
//! gives one output, a failing schedule replays, and a crashed rank departs and attaches
//! again as it does on a server.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::{example_files, examples_dir, Cli, Output, TempDir};

/// No server: nothing is reached at this address.
fn explore(file: &Path, extra: &str) -> Output {
    Cli::new("http://127.0.0.1:1")
        .arg("explore")
        .arg(file)
        .words(extra)
        .run()
}

fn explore_text(text: &str, extra: &str) -> Output {
    let dir = TempDir::new();
    explore(&dir.file("s.rma", text), extra)
}

/// The `--json` report of exploring `file`, which succeeds.
fn explored(file: &Path, extra: &str) -> Value {
    let out = explore(file, extra);
    out.success();
    out.json()
}

/// [`explored`] of a scenario written as `text`.
fn explored_text(text: &str, extra: &str) -> Value {
    let out = explore_text(text, extra);
    out.success();
    out.json()
}

/// Replays the failing schedule a report `out` of `--strategy strategy` names
/// (`--strategy <strategy> --replay S:K)`): it fails again.
fn replay_named(file: &Path, out: &Output, strategy: &str) -> Output {
    let marker = format!("--strategy {strategy} --replay ");
    let at = out
        .stdout
        .split(&marker)
        .nth(1)
        .unwrap_or_else(|| panic!("no `{marker}` in {}", out.stdout));
    let at: String = at.chars().take_while(|c| *c != ')').collect();
    let replay = explore(file, &format!("--strategy {strategy} --replay {at}"));
    replay.code(1);
    replay
}

/// The values `subject` took over the schedules of a `--json` report.
fn values(document: &Value, subject: &str) -> BTreeSet<String> {
    counts(document, subject).into_keys().collect()
}

/// The values `subject` took over the schedules of a `--json` report, each with in how many.
fn counts(document: &Value, subject: &str) -> BTreeMap<String, u64> {
    let values = document["distribution"][subject]
        .as_object()
        .unwrap_or_else(|| panic!("no distribution of {subject}: {document:#}"));
    let count = |n: &Value| n.as_u64().unwrap();
    values.iter().map(|(v, n)| (v.clone(), count(n))).collect()
}

fn set(values: &[&str]) -> BTreeSet<String> {
    values.iter().map(|v| v.to_string()).collect()
}

/// A pause moves and orders nothing, so a scenario's `sleep`s are explored as if absent: the
/// fence rules of the mpiwg-rma thread (whose example sleeps to make the late put likely on a
/// server) and the writers a lock_all waits behind hold in every schedule.
#[test]
fn sleeps_are_explored_as_the_interleavings_they_make_likely() {
    for name in ["fence_semantics", "lock_all_behind_writers"] {
        let file = examples_dir().join(format!("{name}.rma"));
        assert!(
            std::fs::read_to_string(&file).unwrap().contains("sleep"),
            "{name} still sleeps"
        );
        let out = explore(&file, "--json");
        let document = out.json();
        assert_eq!(document["ok"], true, "{name}: {document:#}");
        assert_eq!(document["schedules"], 1000, "{name}");
    }
}

/// What SEMANTICS.md works out for an example: each subject the expectations read with every
/// value MPI allows it (all of them must show up in 1000 schedules, no other may). The
/// examples' expectations say what MPI guarantees (`in {…}` where it allows several values),
/// so every one holds in every schedule.
struct Worked {
    name: &'static str,
    /// `SUBJECT: VALUE VALUE…` joined by `; `.
    outcomes: &'static str,
}

impl Worked {
    /// Each subject with the values MPI allows it.
    fn outcomes(&self) -> Vec<(&'static str, BTreeSet<String>)> {
        let outcomes = self.outcomes.split("; ").map(|outcome| {
            let (subject, values) = outcome.split_once(": ").unwrap();
            (subject, values.split(' ').map(str::to_string).collect())
        });
        outcomes.collect()
    }
}

/// SEMANTICS.md §6's five examples (the forum ticket #37 of seeds/002, in `examples/`) with
/// their fixes, the fence rules of the mpiwg-rma thread (seeds/001) and racing accumulates.
/// Comments: what MPI allows besides onesided's outcome (the server's own outcome is held in
/// `examples.rs`).
const WORKED: &[Worked] = &[
    // example 1 without B's lock: nothing must publish the store, but it may be published
    Worked {
        name: "forum1_store_without_lock",
        outcomes: "A a: 0 42; private B X: 42; public B X: 0 42",
    },
    Worked {
        name: "forum1_unlock_publishes",
        outcomes: "A a: 42; public B X: 42",
    },
    // example 2 without B's lock: the private copy may be obsolete, or refreshed early
    Worked {
        name: "forum2_load_without_lock",
        outcomes: "B b: 0 42; public B X: 42; private B X: 0 42",
    },
    Worked {
        name: "forum2_lock_pulls",
        outcomes: "B b: 42",
    },
    // example 3: the lock does not publish, an early publication may
    Worked {
        name: "forum3_store_before_shared_lock",
        outcomes: "A a: 0 7; public B X: 7",
    },
    Worked {
        name: "forum3_win_sync",
        outcomes: "A a: 7; public B X: 7",
    },
    Worked {
        name: "forum4_put_to_self",
        outcomes: "B x: 22; B y: 11; A mine: 22",
    },
    // example 4: Y is published by post; X, stored during the epoch, may or may not be
    Worked {
        name: "forum4_store_in_pscw",
        outcomes: "B y: 11; B x: 0 22; private A X: 22",
    },
    Worked {
        name: "forum5_load_after_wait",
        outcomes: "B late: 42",
    },
    // example 5: post and start need not pull; the wait must
    Worked {
        name: "forum5_load_in_pscw",
        outcomes: "B early: 0 42; private B X: 42",
    },
    Worked {
        name: "forum5_local_get",
        outcomes: "B got: 42",
    },
    // the five in the unified model: a store or an update reaches the other copy eventually,
    // so before the next call or not; once the programs ended, the copies are one
    Worked {
        name: "forum1_unified",
        outcomes: "A a: 0 42; private B X: 42; public B X: 42",
    },
    Worked {
        name: "forum2_unified",
        outcomes: "B b: 0 42; public B X: 42; private B X: 42",
    },
    Worked {
        name: "forum3_unified",
        outcomes: "A a: 0 7; public B X: 7",
    },
    Worked {
        name: "forum4_unified",
        outcomes: "B y: 11; B x: 0 22; private A X: 22; public A X: 22",
    },
    Worked {
        name: "forum5_unified",
        outcomes: "B early: 0 42; private B X: 42",
    },
    // the two fence semantics Rajeev Thakur states (seeds/001)
    Worked {
        name: "fence_semantics",
        outcomes: "A a: 5; B b: 9; B c: 3; public B W[0..3]: 5,9,3",
    },
    // C's atomic read before, between or after A's two accumulates, which stay in order
    Worked {
        name: "accumulate_ordering",
        outcomes: "A old: 5; C seen: 0 5 7; public B W[0]: 7",
    },
];

/// Every outcome MPI allows in the worked examples shows up within 1000 schedules, and every
/// outcome it guarantees holds in all of them: the set of values explored is exactly the set
/// SEMANTICS.md works out, never a value MPI forbids (a false alarm), never one missing.
#[test]
fn the_worked_examples_show_exactly_the_outcomes_mpi_allows() {
    for worked in WORKED {
        let name = worked.name;
        let file = examples_dir().join(format!("{name}.rma"));
        let out = explore(&file, "--json");
        let document = out.json();
        assert_eq!(document["schedules"], 1000, "{name}");
        let outcomes = worked.outcomes();
        for (subject, allowed) in &outcomes {
            assert_eq!(&values(&document, subject), allowed, "{name}: {subject}");
        }
        let subjects = document["distribution"].as_object().unwrap().len();
        assert_eq!(subjects, outcomes.len(), "{name}: {document:#}");
        for expectation in document["expectations"].as_array().unwrap() {
            let text = expectation["text"].as_str().unwrap();
            let failed = expectation["failed"].as_u64().unwrap();
            assert_eq!(
                failed, 0,
                "{name}: {text} is what MPI guarantees: {document:#}"
            );
        }
        let failed_calls = document["failed_calls"].as_array().unwrap();
        assert!(failed_calls.is_empty(), "{name}: {failed_calls:?}");
        assert!(
            document["problems"].as_array().unwrap().is_empty(),
            "{name}"
        );
        assert!(
            document["deadlocks"].as_array().unwrap().is_empty(),
            "{name}"
        );
        assert_eq!(document["ok"], true, "{name}");
        out.success();
    }
}

/// Not sampled but walked: every distinct schedule of the forum examples (but the fixed
/// example 4, whose 108 945 take 40 s in a debug build) shows exactly the values SEMANTICS.md
/// works out — a proof over the simulator's schedules that none MPI forbids appears and none it
/// allows is missing.
#[test]
fn every_schedule_of_the_forum_examples_shows_exactly_the_outcomes_mpi_allows() {
    let forum = WORKED.iter().filter(|w| w.name.starts_with("forum"));
    for worked in forum.filter(|w| w.name != "forum4_put_to_self") {
        let name = worked.name;
        let file = examples_dir().join(format!("{name}.rma"));
        let out = explore(&file, "--strategy exhaustive --schedules 150000 --json");
        let document = out.json();
        assert_eq!(document["complete"], true, "{name}");
        for (subject, allowed) in &worked.outcomes() {
            assert_eq!(&values(&document, subject), allowed, "{name}: {subject}");
        }
        assert_eq!(document["ok"], true, "{name}: {document:#}");
        out.success();
    }
}

/// Every example is explored (the simulator runs every call of the format): never a false
/// alarm, never a line skipped. The examples
/// state what MPI guarantees, not what onesided's server happens to give, so no schedule the
/// explorer draws fails one of them — but a broken one (`*_broken.rma`), whose bug explore
/// finds under `--check`: a race, or a schedule in which a call fails.
#[test]
fn every_example_is_explored_clean() {
    let files = example_files();
    let mut explored = 0;
    for file in &files {
        let broken = file.to_string_lossy().ends_with("_broken.rma");
        let out = match broken {
            true => explore(file, "--schedules 200 --check"),
            false => explore(file, "--schedules 200"),
        };
        match out.code {
            Some(0) if !broken => {
                out.stdout_has("held in 200 schedule(s)");
                explored += 1;
            }
            Some(1) if broken => {
                assert!(
                    out.stdout.contains("race (") || out.stdout.contains("failed unexpectedly"),
                    "{}: {}",
                    file.display(),
                    out.stdout
                );
                explored += 1;
            }
            _ => panic!("{}: {out:?}", file.display()),
        }
    }
    assert_eq!(explored, files.len());
}

/// Outcomes MPI allows that a server on loopback rarely shows: C's no_op read between A's two
/// accumulates (5), before them (0) and after (7); every old value of a shared counter at
/// every rank; and, once the window drops `accumulate_ordering`, A's two accumulates in the
/// other order.
#[test]
fn racing_accumulates_show_every_order_mpi_allows() {
    let out = explore(&examples_dir().join("accumulate_ordering.rma"), "--json");
    let document = out.json();
    out.success();
    assert_eq!(values(&document, "C seen"), set(&["0", "5", "7"]));
    assert_eq!(
        values(&document, "A old"),
        set(&["5"]),
        "A's own ops stay in order"
    );
    let out = explore(&examples_dir().join("counter.rma"), "--json");
    let document = out.json();
    out.success();
    for rank in ["A", "B", "C", "D"] {
        let seen = values(&document, &format!("{rank} t"));
        assert_eq!(seen, set(&["0", "1", "2", "3"]), "{rank}");
    }
    assert_eq!(values(&document, "public A C[0]"), set(&["4"]));
    // without accumulate_ordering, A's replace may land before its own sum (MPI-2's rules):
    // A's old value is then 0 and the element ends at 12, never 5 + 7 in another way
    let text = std::fs::read_to_string(examples_dir().join("accumulate_ordering.rma")).unwrap();
    let unordered = text.replace(
        "ranks=3 size=1 type=i64",
        "ranks=3 size=1 type=i64 info accumulate_ordering=none",
    );
    let out = explore_text(&unordered, "--json");
    out.code(1);
    let document = out.json();
    assert_eq!(values(&document, "A old"), set(&["0", "5"]));
    assert_eq!(values(&document, "public B W[0]"), set(&["7", "12"]));
    assert_eq!(values(&document, "C seen"), set(&["0", "5", "7", "12"]));
}

#[test]
fn one_seed_gives_byte_identical_output_and_another_seed_other_schedules() {
    let file = examples_dir().join("counter.rma");
    let first = explore(&file, "--seed 5 --schedules 300");
    first.success();
    let again = explore(&file, "--seed 5 --schedules 300");
    assert_eq!(first.stdout, again.stdout);
    let json = explore(&file, "--seed 5 --schedules 300 --json");
    assert_eq!(
        json.stdout,
        explore(&file, "--seed 5 --schedules 300 --json").stdout
    );
    let other = explore(&file, "--seed 6 --schedules 300");
    other.success();
    assert_ne!(
        first.stdout, other.stdout,
        "seed 6 drew the very same counts"
    );
}

const FIRST_WINS: &str = "\
window C ranks=3 size=1 type=u64
A: lock_all
B: lock_all
C: lock_all
A: fop A C[0] op=sum = 1 -> t
B: fop A C[0] op=sum = 1 -> t
C: fop A C[0] op=sum = 1 -> t
A: unlock_all
B: unlock_all
C: unlock_all
expect A t == 0                 # not guaranteed: A is first in some schedules only
expect public A C[0] == 3
";

/// An expectation that fails in some schedules names the first one; `--replay S:K` runs that
/// schedule alone, prints its steps and fails the same way.
#[test]
fn a_failing_schedule_replays_with_its_failure() {
    let dir = TempDir::new();
    let file = dir.file("first.rma", FIRST_WINS);
    let out = explore(&file, "--seed 9 --json");
    out.code(1);
    let document = out.json();
    let failed = &document["expectations"][0];
    let count = failed["failed"].as_u64().unwrap();
    assert!(count > 0 && count < 1000, "{failed}");
    assert_eq!(document["expectations"][1]["failed"], 0);
    let first = &failed["first"];
    assert_eq!(first["seed"], 9);
    let observed = first["observed"].as_str().unwrap().to_string();
    let at = format!("{}:{}", first["seed"], first["schedule"]);
    let text = explore(&file, "--seed 9");
    text.code(1);
    text.stdout_has(&format!("--replay {at})"));
    let replay = explore(&file, &format!("--replay {at}"));
    replay.code(1);
    replay.stdout_has(&format!(
        "expect A t == 0: did NOT hold (observed {observed})"
    ));
    replay.stdout_has("runs A's line 5: fop A C[0] op=sum = 1 -> t");
    replay.stdout_has("window C, target 0 takes the FetchAndOp(Sum) of rank 1 (from B's line 6");
    replay.stdout_has("an answer reaches rank 2: 8 byte(s) of data (to C's line 7");
    let replayed = explore(&file, &format!("--replay {at} --json")).json();
    assert_eq!(replayed["expectations"][0]["held"], false);
    assert_eq!(
        replayed["expectations"][0]["observed"].to_string(),
        observed
    );
    assert!(replayed["steps"].as_array().unwrap().len() > 10);
}

/// B's flushed put survives its crash; the new incarnation locks what the old one held.
const CRASH_AND_ATTACH: &str = "\
window W ranks=2 size=1 type=i64
B: lock exclusive A
B: put A W[0] = 4
B: flush A
B: crash
B: attach
B: lock exclusive A
B: get A W[0] -> seen
B: unlock A
expect B seen == 4
expect public A W[0] == 4
";

/// C crashes inside a fence epoch: the fence that closes it cannot succeed anywhere.
const CRASH_IN_FENCE: &str = "\
window W ranks=3 size=1 type=i64
A: fence
B: fence
C: fence
C: crash
A: put B W[0] = 1
A: fence !PROC_FAILED
B: fence !PROC_FAILED
";

/// B crashes with a put it never completed: it lands when B's lock came first, and is
/// dropped with B's lock request when A's did.
const CRASH_UNFLUSHED: &str = "\
window W ranks=2 size=1 type=i64
B: lock exclusive A
B: put A W[0] = 4
B: crash
A: lock shared A
A: get A W[0] -> v
A: unlock A
expect A v in {0,4}
expect public A W[0] in {0,4}
";

/// A's put, sent after the last answer A saw, may never have left its process: on a server
/// it does not (the client had not sent it yet), in the simulator it may.
const CRASH_UNSENT: &str = "\
window W ranks=2 size=1 type=i64
A: lock exclusive B
A: put B W[0] = 8
A: crash                       # the put may not have left A's process
B: lock shared B
B: load W[0] -> v
B: unlock B
expect B v in {0,8}
";

/// The barrier fails for everyone when it was entered while A was gone.
const CRASH_BEFORE_BARRIER: &str = "\
window W ranks=2 size=1 type=i64
A: crash
A: attach
barrier
";

/// The `(line, message)` of each entry of `list` (problems or failed calls of a report).
fn messages(list: &Value) -> BTreeSet<(u64, String)> {
    let list = list
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"));
    let each = list.iter().map(|entry| {
        let line = entry["line"].as_u64().unwrap();
        (line, entry["message"].as_str().unwrap().to_string())
    });
    each.collect()
}

/// A crash and the attach after it run on the simulator as on the server: the departure
/// revokes the crashed incarnation's lock (every schedule, exhaustively), a fence that needs
/// the gone rank fails with PROC_FAILED, a put the crashed rank never completed lands in some
/// schedules and is dropped in others (or never left the crashed process), and a barrier
/// entered while a rank was gone fails for
/// every rank in some schedules (with a schedule that replays it) and passes in others.
#[test]
fn a_crashed_rank_departs_and_attaches_again_as_the_server_lets_it() {
    let every = explored_text(
        CRASH_AND_ATTACH,
        "--strategy exhaustive --schedules 100000 --json",
    );
    assert_eq!(every["complete"], true, "{every:#}");
    assert_eq!(values(&every, "B seen"), set(&["4"]));
    assert_eq!(values(&every, "public A W[0]"), set(&["4"]));

    let fenced = explored_text(CRASH_IN_FENCE, "--schedules 300 --json");
    let failed = fenced["failed_calls"].as_array().unwrap();
    assert_eq!(failed.len(), 2, "{fenced:#}");
    for call in failed {
        assert_eq!(call["class"], "PROC_FAILED", "{call}");
        assert_eq!(call["count"], 300, "{call}");
        assert!(call["message"].as_str().unwrap().contains("rank 2 failed"));
    }

    let unflushed = explored_text(CRASH_UNFLUSHED, "--json");
    assert_eq!(values(&unflushed, "A v"), set(&["0", "4"]));
    assert_eq!(values(&unflushed, "public A W[0]"), set(&["0", "4"]));
    let unsent = explored_text(CRASH_UNSENT, "--json");
    assert_eq!(values(&unsent, "B v"), set(&["0", "8"]));

    let out = explore_text(CRASH_BEFORE_BARRIER, "--json");
    out.code(1);
    let barrier = out.json();
    let failed = barrier["failed"].as_u64().unwrap();
    assert!(0 < failed && failed < 1000, "{barrier:#}");
    let expected: BTreeSet<(u64, String)> = ["A", "B"]
        .iter()
        .map(|rank| {
            let why = "rank 0 failed: its session ended (session ended)";
            (
                4,
                format!("{rank}: barrier failed: MPI_ERR_PROC_FAILED: {why}"),
            )
        })
        .collect();
    assert_eq!(messages(&barrier["problems"]), expected);
    let dir = TempDir::new();
    let file = dir.file("s.rma", CRASH_BEFORE_BARRIER);
    let out = explore(&file, "--strategy pct:2");
    out.code(1);
    replay_named(&file, &out, "pct:2")
        .stdout_has("takes the departure of rank 0")
        .stdout_has("A: barrier failed");
}

/// What a real server gives for the crash scenarios (a few runs: on loopback nearly always
/// the same schedule) is among what `explore` finds: every value, every failed call and every
/// problem, in the same words.
#[test]
fn explored_crashes_cover_what_a_server_gives() {
    let server = crate::Server::start();
    let dir = TempDir::new();
    for (name, text) in [
        ("attach.rma", CRASH_AND_ATTACH),
        ("fence.rma", CRASH_IN_FENCE),
        ("unflushed.rma", CRASH_UNFLUSHED),
        ("unsent.rma", CRASH_UNSENT),
        ("barrier.rma", CRASH_BEFORE_BARRIER),
    ] {
        let file = dir.file(name, text);
        let explored = explore(&file, "--schedules 300 --json").json();
        let live = server
            .cli()
            .arg("run")
            .arg(&file)
            .words("--repeat 5 --json")
            .run()
            .json();
        let live_values = live["distribution"].as_object().unwrap();
        for (subject, seen) in live_values {
            let seen: BTreeSet<String> = seen.as_object().unwrap().keys().cloned().collect();
            let explored = values(&explored, subject);
            assert!(
                seen.is_subset(&explored),
                "{name} {subject}: live {seen:?}, explored {explored:?}"
            );
        }
        let runs = live["runs"].as_array().unwrap();
        let ranks = runs.iter().flat_map(|run| run["ranks"].as_array().unwrap());
        let failed: Vec<&Value> = ranks.map(|rank| &rank["failed_calls"]).collect();
        let problems: Vec<&Value> = runs.iter().map(|run| &run["problems"]).collect();
        for (what, lists) in [("failed_calls", failed), ("problems", problems)] {
            let live: BTreeSet<(u64, String)> = lists.into_iter().flat_map(messages).collect();
            let explored = messages(&explored[what]);
            assert!(
                live.is_subset(&explored),
                "{name} {what}: live {live:?}, explored {explored:?}"
            );
        }
    }
}

/// `wait_any` returns whichever request completed first, as the schedule had the answers
/// come: both positions show up, the second wait returns the other, a wait over null handles
/// returns -1, and a freed request is passed over.
#[test]
fn wait_any_returns_whichever_request_completed_first() {
    let document = explored(
        &examples_dir().join("requests_wait_any.rma"),
        "--schedules 300 --json",
    );
    let seen = |subject: &str| counts(&document, subject);
    let (first, second) = (seen("A first"), seen("A second"));
    assert_eq!(first.keys().collect::<Vec<_>>(), ["0", "1"], "{first:?}");
    assert_eq!(
        first["0"], second["1"],
        "the second wait returns the other request"
    );
    assert_eq!(first["1"], second["0"]);
    assert_eq!(seen("A none"), BTreeMap::from([("-1".to_string(), 300)]));
    assert_eq!(seen("A put"), BTreeMap::from([("1".to_string(), 300)]));
}

/// Dynamic windows: regions attached, reached by address, detached. An operation on a
/// detached region fails the unlock that completes it (as the client reports it), the owner's
/// private copy may or may not have taken the put before its detach (both show up), and the
/// broken example's put that nothing orders before the detach is a race.
#[test]
fn dynamic_windows_are_explored_region_by_region() {
    let document = explored(
        &examples_dir().join("dynamic_detach.rma"),
        "--schedules 300 --json",
    );
    assert_eq!(values(&document, "private A r[0]"), set(&["0", "1"]));
    let failed = document["failed_calls"].as_array().unwrap();
    let unlock = failed.iter().find(|f| f["line"] == 21).unwrap();
    assert_eq!(unlock["class"], "RMA_RANGE", "{unlock}");
    assert_eq!(unlock["expected"], true);
    assert_eq!(unlock["count"], 300);
    assert!(
        failed.iter().all(|f| f["line"] != 20),
        "the put itself succeeds"
    );

    let out = explore(
        &examples_dir().join("dynamic_detach_race_broken.rma"),
        "--schedules 50 --check --json",
    );
    out.code(1);
    assert_eq!(out.json()["races"][0]["rule"], "detach_race");

    // as `run` says: a detached region is no longer in the public copy, the memory keeps it
    let out = explore_text(
        "window W ranks=2 type=i64 flavor=dynamic\nA: attach 2 -> r\nA: store r[0] = 5\n\
         A: lock exclusive A\nA: unlock A\nA: detach r\n\
         expect private A r[0] == 5\nexpect public A r[0] == 5\n",
        "--schedules 20",
    );
    out.code(1);
    out.stdout_has("expect private A r[0] == 5: held in every schedule");
    out.stdout_has("public A r[0]: no value: region r was detached");
}

/// A window over part of the world: its calls name world ranks, made the window's; what the
/// run says of its ranks (values, races, who waits for whom) names world ranks again; a rank
/// outside the group is refused as the runner refuses it.
#[test]
fn a_window_over_part_of_the_world_is_explored_in_its_own_ranks() {
    let document = explored_text(
        "\
window G ranks=3 size=1 type=i64 group={C,A}
C: G.fence
A: G.fence
A: put C G[0] = 5               # into C, G's rank 0
C: load G[0] -> early           # races with the put: the old value or the new
C: G.fence
A: G.fence
C: load G[0] -> late
B: put C G[0] = 1 !GROUP
expect C early in {0,5}
expect C late == 5
expect private C G[0] == 5
expect public C G[0] == 5
expect public A G[0] == 0
",
        "--schedules 300 --json",
    );
    assert_eq!(values(&document, "C early"), set(&["0", "5"]));
    for subject in ["C late", "private C G[0]", "public C G[0]"] {
        assert_eq!(values(&document, subject), set(&["5"]), "{subject}");
    }
    assert_eq!(values(&document, "public A G[0]"), set(&["0"]));
    let race = &document["races"][0];
    assert_eq!(race["rule"], "put_load");
    let sides: Vec<(u64, u64)> = race["accesses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["rank"].as_u64().unwrap(), a["line"].as_u64().unwrap()))
        .collect();
    assert_eq!(sides, vec![(0, 4), (2, 5)], "A's put, C's load: {race}");
    assert_eq!(race["target"], 2);
    let message = race["message"].as_str().unwrap();
    assert!(
        message.contains("(A's put)") && message.contains("of C's G"),
        "{message}"
    );
    let failed = document["failed_calls"].to_string();
    assert!(
        failed.contains("rank B is not in the group of window G"),
        "{failed}"
    );

    // C's fence on G waits for A, G's other member, not for B (the world's rank 1)
    let out = explore_text(
        "window G ranks=3 size=1 type=i64 group={C,A}\nC: G.fence\n",
        "--schedules 20 --json",
    );
    out.code(1);
    let stuck = &out.json()["deadlocks"][0]["stuck"][0];
    assert_eq!(stuck["name"], "C");
    assert_eq!(stuck["on"], serde_json::json!(["A"]));
}

/// Two ranks that each wait for the other: reported as a deadlock with the line each waits
/// at, in every schedule, and the command fails.
#[test]
fn a_deadlock_is_reported_with_where_each_rank_waits() {
    let out = explore_text(
        "\
window W ranks=2 size=1 type=i64
A: lock exclusive A             # to itself: returns once granted
B: lock exclusive A
B: put A W[0] = 1
B: flush A                      # waits for the lock A holds until after the barrier
barrier
A: unlock A
B: unlock A
",
        "--schedules 100 --json",
    );
    out.code(1);
    let document = out.json();
    assert_eq!(document["failed"], 100);
    let deadlocks = document["deadlocks"].as_array().unwrap();
    let total: u64 = deadlocks.iter().map(|d| d["count"].as_u64().unwrap()).sum();
    assert_eq!(total, 100);
    let waits: BTreeSet<String> = deadlocks
        .iter()
        .flat_map(|d| d["stuck"].as_array().unwrap().iter())
        .map(|s| {
            format!(
                "{} {} {}",
                s["name"].as_str().unwrap(),
                s["line"],
                s["waits"].as_str().unwrap()
            )
        })
        .collect();
    assert!(waits.contains("B 5 waits in `flush A`"), "{waits:?}");
    assert!(
        waits.contains("A 2 waits in `lock exclusive A`"),
        "{waits:?}"
    );
    // A waits in the barrier for B; B's flush waits behind its lock request at A, which A
    // holds: a cycle, said with who waits for whom
    for deadlock in deadlocks {
        let on: Vec<String> = deadlock["stuck"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| format!("{} {}", s["name"].as_str().unwrap(), s["on"]))
            .collect();
        assert_eq!(on, ["A [\"B\"]", "B [\"A\"]"], "{deadlock}");
        assert_eq!(
            deadlock["cycle"],
            serde_json::json!(["A", "B"]),
            "{deadlock}"
        );
    }
    let text = explore_text(
        "\
window W ranks=2 size=1 type=i64
A: lock exclusive A
B: lock exclusive A
B: put A W[0] = 1
B: flush A
barrier
A: unlock A
B: unlock A
",
        "--schedules 10",
    );
    text.code(1);
    text.stdout_has("B at line 5: waits in `flush A`, for A");
    text.stdout_has("wait-for cycle: A (line 6) → B (line 5) → A (line 6)");
    let text = explore_text(
        "window W ranks=2 size=1 type=i64\nA: fence\nB: fence\nA: fence\n",
        "--schedules 10",
    );
    text.code(1);
    text.stdout_has("deadlock in 10 schedule(s)");
    text.stdout_has("A at line 4: waits in `fence`, for B");
    assert!(
        !text.stdout.contains("cycle"),
        "B finished: {}",
        text.stdout
    );
    // C never unlocks B: A's lazy lock returned, but its put waits for the grant forever
    let text = explore_text(
        "\
window W ranks=3 size=1 type=i64
C: lock exclusive B
C: put B W[0] = 1
C: flush B
barrier
A: lock exclusive B
A: put B W[0] = 2
",
        "--schedules 10",
    );
    text.code(1);
    text.stdout_has(
        "A at line 7: ran its last line; operations it issued were never answered, for C",
    );
}

#[test]
fn an_unknown_strategy_and_bad_replays_are_usage_errors() {
    let file = examples_dir().join("counter.rma");
    explore(&file, "--strategy dfs")
        .code(2)
        .stderr_has("one of random, pct, pct:DEPTH, exhaustive");
    explore(&file, "--strategy pct:0")
        .code(2)
        .stderr_has("1 or more");
    explore(&file, "--replay 3")
        .code(2)
        .stderr_has("is not SEED:SCHEDULE");
    explore(&file, "--replay 3:0")
        .code(2)
        .stderr_has("is not a schedule number");
    explore(&file, "--schedules 0").code(2);
}

/// MPI_Win_test says true only once the origin's complete reached the target: both answers
/// show up over the schedules, and B's put is applied either way.
#[test]
fn a_test_flag_takes_both_values_over_the_schedules() {
    let out = explore_text(
        "\
window W ranks=2 size=1 type=i64
A: post {B}
B: start {A}
B: put A W[0] = 5
B: complete
A: test -> done
expect A done in {true,false}
expect public A W[0] == 5
",
        "--schedules 200 --json",
    );
    let document = out.json();
    out.success();
    assert_eq!(values(&document, "A done"), set(&["false", "true"]));
    assert_eq!(values(&document, "public A W[0]"), set(&["5"]));
}

/// B reads a counter A adds to 30 times: the read sees all 30 only when B stays behind A for
/// the whole run. Uniform random choices almost never keep a rank back that long; PCT makes B
/// the lowest priority in a good share of its schedules, finds the failure within 1000 and
/// replays it.
#[test]
fn pct_finds_the_rank_that_must_stay_behind_where_random_choices_rarely_do() {
    let mut text = String::from("window W ranks=3 size=1 type=i64\nA: lock_all\n");
    for _ in 0..30 {
        text.push_str("A: acc C W[0] op=sum = 1\n");
    }
    text.push_str("A: unlock_all\nB: lock_all\nB: fop C W[0] op=no_op -> seen\nB: unlock_all\n");
    text.push_str("expect B seen in {0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29}\n");
    let dir = TempDir::new();
    let file = dir.file("behind.rma", &text);
    let failed = |strategy: &str| {
        let out = explore(&file, &format!("--strategy {strategy} --seed 1 --json"));
        let document = out.json();
        assert_eq!(document["strategy"], strategy);
        document["expectations"][0]["failed"].as_u64().unwrap()
    };
    let by_pct = failed("pct:1");
    let by_random = failed("random");
    assert!(by_pct >= 50, "pct found it in {by_pct} of 1000");
    assert!(by_random * 10 < by_pct, "random {by_random}, pct {by_pct}");
    let out = explore(&file, "--strategy pct:1 --seed 1");
    out.code(1);
    out.stdout_has("--strategy pct:1 --replay 1:");
    replay_named(&file, &out, "pct:1").stdout_has("did NOT hold (observed 30)");
}

/// Counted by hand: a rank that stores and then loads, alone, has two distinct schedules — its
/// store published early (MPI allows it) or not — and the other rank's idle program adds none.
/// `exhaustive` runs exactly those two and says it is complete; a bound of one stops it and
/// says so.
#[test]
fn exhaustive_runs_every_distinct_schedule_once_and_says_it_is_complete() {
    let text = "\
window W ranks=2 size=1 type=i64
A: store W[0] = 9
A: load W[0] -> mine
expect A mine == 9
expect public A W[0] in {0,9}
";
    let document = explored_text(text, "--strategy exhaustive --json");
    assert_eq!(document["complete"], true, "{document:#}");
    assert_eq!(document["schedules"], 2);
    assert_eq!(
        document["distribution"]["public A W[0]"],
        serde_json::json!({"0": 1, "9": 1})
    );
    let text_out = explore_text(text, "--strategy exhaustive");
    text_out.stdout_has("complete: 2 distinct schedules");
    let bounded = explore_text(text, "--strategy exhaustive --schedules 1");
    bounded.success();
    bounded.stdout_has("stopped at the bound (--schedules 1), more remain");
}

/// Every value random schedules show in a forum example, the exhaustive walk shows too, and
/// it is complete: the broken example 2's load sees the obsolete 0 and the current 42, no
/// other; a failing schedule it names replays.
#[test]
fn exhaustive_finds_every_outcome_random_schedules_find() {
    let file = examples_dir().join("forum2_load_without_lock.rma");
    let random = explore(&file, "--json").json();
    let every = explored(&file, "--strategy exhaustive --schedules 1000000 --json");
    assert_eq!(every["complete"], true, "{every:#}");
    for subject in ["B b", "public B X", "private B X"] {
        assert_eq!(
            values(&every, subject),
            values(&random, subject),
            "{subject}"
        );
    }
    assert_eq!(values(&every, "B b"), set(&["0", "42"]));
    // the example as it was, stating onesided's obsolete value: fails in some schedules
    let text = std::fs::read_to_string(&file).unwrap();
    let dir = TempDir::new();
    let file = dir.file(
        "old.rma",
        &text.replace("expect B b in {0,42}", "expect B b == 0"),
    );
    let out = explore(&file, "--strategy exhaustive --schedules 1000000");
    out.code(1);
    out.stdout_has("complete: ");
    replay_named(&file, &out, "exhaustive")
        .stdout_has("expect B b == 0: did NOT hold (observed 42)");
}

/// A bug that needs one order of three ranks' messages (`bench/scenarios/three_rank_order.rma`):
/// C's addition applied first, B's second, all ten of A's after both. PCT (depth 3, seed 1)
/// finds it within 1000 schedules and replays it; 1000 uniformly random schedules of the same
/// seed find it far less often (README: how often each, and `run --repeat 1000` on a server).
#[test]
fn pct_finds_the_bug_that_needs_one_order_of_three_ranks() {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/scenarios/three_rank_order.rma");
    let failed = |strategy: &str| {
        let out = explore(&file, &format!("--strategy {strategy} --seed 1 --json"));
        out.code(1);
        let document = out.json();
        let expectation = &document["expectations"][0];
        if let Some(first) = expectation["first"].as_object() {
            assert_eq!(first["observed"], "100", "{strategy}: {document:#}");
        }
        expectation["failed"].as_u64().unwrap()
    };
    let by_pct = failed("pct:3");
    assert!(by_pct > 0, "pct:3 missed it in 1000 schedules");
    let out = explore(&file, "--strategy pct:3 --seed 1");
    replay_named(&file, &out, "pct:3").stdout_has("did NOT hold (observed 100)");
    let by_random = explore(&file, "--seed 1 --json").json()["expectations"][0]["failed"]
        .as_u64()
        .unwrap();
    assert!(by_random * 10 < by_pct, "random {by_random}, pct {by_pct}");
}

/// A race as both checkers name it, whatever its sequence numbers: the rule, the target, the
/// bytes and the two sides' ranks and calls (in order).
/// `explore` lists the two as `accesses`, `run --check` as `first` and `second`.
fn race_key(race: &Value) -> String {
    let side = |s: &Value| format!("{} {}", s["rank"], s["call"].as_str().unwrap_or("?"));
    let (first, second) = match race["accesses"].as_array() {
        Some(accesses) => (&accesses[0], &accesses[1]),
        None => (&race["first"], &race["second"]),
    };
    let mut sides = [side(first), side(second)];
    sides.sort();
    format!(
        "{} at rank {} bytes {}: {} / {}",
        race["rule"].as_str().unwrap_or("?"),
        race["target"],
        race["bytes"],
        sides[0],
        sides[1]
    )
}

/// The race checker over explored histories finds what it finds over a live server's log:
/// for every example the simulator runs, what `run --check` finds against a real server (one
/// schedule of many) is among what `explore` finds, and a race `explore` finds in every
/// schedule, the live log has too. (Without the `expect public` lines: `run` reads a public
/// copy after the ranks finished with a get of its own, which the live log records and the
/// simulator, reading the copy directly, does not.)
#[test]
fn explored_races_are_the_races_the_live_checker_finds() {
    let server = crate::Server::start();
    let dir = TempDir::new();
    let mut compared = 0;
    let mut racy = 0;
    for example in example_files() {
        let text = std::fs::read_to_string(&example).unwrap();
        let kept: Vec<&str> = text
            .lines()
            .filter(|line| !line.starts_with("expect public"))
            .collect();
        let name = example.file_name().unwrap().to_str().unwrap();
        let file = dir.file(name, &(kept.join("\n") + "\n"));
        let out = explore(&file, "--schedules 200 --json");
        if out.code == Some(3) {
            continue;
        }
        let document = out.json();
        let races = document["races"].as_array().expect("a races list");
        let every: BTreeSet<String> = races
            .iter()
            .filter(|race| race["count"] == 200)
            .map(race_key)
            .collect();
        let explored: BTreeSet<String> = races.iter().map(race_key).collect();
        let live = server
            .cli()
            .arg("run")
            .arg(&file)
            .words("--check --json")
            .run();
        let live = live.json();
        let live: BTreeSet<String> = live["findings"]
            .as_array()
            .expect("run --check lists its windows")
            .iter()
            .flat_map(|window| window["findings"].as_array().unwrap())
            .map(race_key)
            .collect();
        let name = file.display();
        assert!(
            live.is_subset(&explored),
            "{name}: live {live:?}, explored {explored:?}"
        );
        assert!(
            every.is_subset(&live),
            "{name}: always {every:?}, live {live:?}"
        );
        compared += 1;
        racy += usize::from(!every.is_empty());
    }
    assert!(
        compared >= 18 && racy >= 5,
        "{compared} compared, {racy} racy"
    );
}

/// A race is reported with the lines that race and a schedule that shows it; it fails the
/// command only under --check; its replay names it, and --trace writes that schedule's log
/// as a Perfetto trace the web view and ui.perfetto.dev open.
#[test]
fn races_are_reported_by_line_and_fail_under_check() {
    let file = examples_dir().join("forum2_load_without_lock.rma");
    let out = explore(&file, "--schedules 50");
    out.success();
    out.stdout_has("race (put_load) in 50 of 50 schedule(s)");
    out.stdout_has("line 10 `put B X = 42` (A's put) and line 13 `load X -> b` (B's load)");
    out.stdout_has("1 race(s) reported above");
    let checked = explore(&file, "--schedules 50 --check --json");
    checked.code(1);
    let document = checked.json();
    assert_eq!(document["ok"], false);
    let race = &document["races"][0];
    assert_eq!(race["rule"], "put_load");
    assert_eq!(race["accesses"][0]["line"], 10);
    assert_eq!(race["accesses"][1]["line"], 13);
    assert_eq!(race["count"], 50);
    assert_eq!(race["first"]["schedule"], 1);
    assert_eq!(race["window"], "W");
    explore(&file, "--schedules 50 --check").code(1);
    let clean = examples_dir().join("forum5_load_after_wait.rma");
    explore(&clean, "--schedules 50 --check").success();

    let dir = TempDir::new();
    let trace = dir.path().join("trace.json");
    let replay = explore(&file, &format!("--replay 0:1 --trace {}", trace.display()));
    replay.success();
    replay.stdout_has("  race (put_load): line 10 `put B X = 42`");
    replay.stdout_has("wrote window W's trace to");
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let ranks: BTreeSet<u64> = events.iter().filter_map(|e| e["tid"].as_u64()).collect();
    assert_eq!(ranks, BTreeSet::from([0, 1]), "{trace:#}");
    assert!(
        events.iter().any(|e| e["ph"] == "s"),
        "the put's flow: {trace:#}"
    );
    explore(&file, "--replay 0:1 --check").code(1);
    let unknown = explore(
        &file,
        &format!(
            "--replay 0:1 --trace {} --trace-window Z",
            dir.path().join("t").display()
        ),
    );
    unknown.code(2);
    unknown.stderr_has("declares the windows W");
    explore(&file, "--trace t.json").code(2);
}

/// Request-based operations: `wait_req` completes an `rget` at the origin, so its data is
/// there in every schedule; an `rput`'s request completes at the origin only, so a third
/// rank reading after the barrier may see the put applied or not (MPI-3.1 §11.5.7: remote completion needs
/// a flush or the unlock) — and the race checker says the get races with it.
#[test]
fn a_waited_request_is_complete_at_the_origin_only() {
    let out = explore_text(
        "window W ranks=3 size=2 type=i64\n\
         B: store W[1] = 7\n\
         B: fence\n\
         A: fence\n\
         C: fence\n\
         A: fence\n\
         B: fence\n\
         C: fence\n\
         A: lock shared B\n\
         A: rget B W[1] -> seen as q\n\
         A: rput B W[0] = 5 as r\n\
         A: wait_all q,r\n\
         barrier\n\
         C: lock shared B\n\
         C: get B W[0] -> x\n\
         C: unlock B\n\
         barrier\n\
         A: unlock B\n\
         expect A seen == 7\n\
         expect C x in {0,5}\n\
         expect public B W[0] == 5\n",
        "--schedules 500 --json",
    );
    let document = out.json();
    assert_eq!(document["ok"], true, "{document:#}");
    assert_eq!(values(&document, "A seen"), set(&["7"]));
    assert_eq!(values(&document, "C x"), set(&["0", "5"]));
    let races: Vec<&str> = document["races"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|race| race["rule"].as_str())
        .collect();
    assert_eq!(races, ["put_get"], "{document:#}");
}

/// `free_req` of a handle already null (freed, waited for, or tested complete) is
/// MPI_ERR_REQUEST in every schedule, in the runner's words, and the first free of an active
/// one is not; the freed `rget` still goes on and its lock epoch ends.
#[test]
fn freeing_a_null_request_is_refused_as_the_runner_refuses_it() {
    let text = "window W ranks=2 size=2 type=i64\n\
                A: lock shared B\n\
                A: rget B W[1] -> dropped as q\n\
                A: free_req q\n\
                A: free_req q !REQUEST\n\
                A: rput B W[0] = 5 as r\n\
                A: test_req r -> done\n\
                A: free_req r !REQUEST\n\
                A: rput B W[1] = 6 as s\n\
                A: wait_req s\n\
                A: free_req s !REQUEST\n\
                A: unlock B\n\
                expect A done == true\n\
                expect public B W[0] == 5\n";
    let document = explore_text(text, "--schedules 200 --json").json();
    assert_eq!(document["ok"], true, "{document:#}");
    let calls = document["failed_calls"].as_array().unwrap();
    let lines: Vec<u64> = calls.iter().map(|c| c["line"].as_u64().unwrap()).collect();
    assert_eq!(lines, [5, 8, 11], "{document:#}");
    for call in calls {
        assert_eq!(call["class"], "REQUEST", "{call}");
        assert_eq!(call["count"], 200, "{call}");
        let message = call["message"].as_str().unwrap();
        assert!(message.contains("is not active (it was waited for, tested complete or freed)"));
    }
    // without the expected error, the second free fails the scenario, as in `run`
    let unexpected = explore_text(&text.replace("free_req q !REQUEST", "free_req q"), "");
    unexpected.code(1);
    unexpected.stdout_has("request q is not active");
}

/// `set_info` is a collective of the window's ranks: when they ask for different infos every
/// call fails with MPI_ERR_INFO and nothing changes (the race checker still reads the old
/// info), and a rank that never calls it leaves the others stuck in it.
#[test]
fn set_info_is_a_collective_that_fails_when_the_ranks_differ() {
    let differ = explore_text(
        "window W ranks=2 size=1 type=i64\n\
         A: set_info accumulate_ordering=none !INFO\n\
         B: set_info accumulate_ordering=rar !INFO\n",
        "--schedules 50 --json",
    );
    let document = differ.json();
    assert_eq!(document["ok"], true, "{document:#}");
    let calls = document["failed_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{document:#}");
    for call in calls {
        assert_eq!(call["class"], "INFO", "{call}");
        assert_eq!(call["count"], 50);
        let message = call["message"].as_str().unwrap();
        assert!(message.contains("the same info on every rank"), "{message}");
    }
    let alone = explore_text(
        "window W ranks=2 size=1 type=i64\nA: set_info accumulate_ordering=none\n",
        "--schedules 20",
    );
    alone.code(1);
    alone.stdout_has("deadlock in 20 schedule(s)");
    alone.stdout_has("A at line 2");
}

/// `test_req` and `test_all` say whether requests are complete at the origin without waiting:
/// an `rget`'s before its data came back or after, in different schedules; an `rput`'s at
/// once; after `wait_req`, always.
#[test]
fn a_tested_request_is_complete_or_not_as_the_schedule_goes() {
    let out = explore_text(
        "window W ranks=2 size=2 type=i64\n\
         A: lock shared B\n\
         A: rget B W[0] -> x as r\n\
         A: rput B W[1] = 4 as p\n\
         A: test_req r -> early\n\
         A: test_req p -> put\n\
         A: wait_req r\n\
         A: test_all r,p -> late\n\
         A: unlock B\n\
         expect A early in {true,false}\n\
         expect A put == true\n\
         expect A late == true\n",
        "--schedules 300 --json",
    );
    let document = out.json();
    assert_eq!(document["ok"], true, "{document:#}");
    assert_eq!(values(&document, "A early"), set(&["false", "true"]));
    assert_eq!(values(&document, "A late"), set(&["true"]));
}
