//! `onesided audit check` and `audit export` against a real server recording into its default
//! SQLite store: racy scenarios exit 1 naming the rule they break, correct programs (and every
//! correct example in `examples/`) exit 0 with no findings, the Perfetto trace is valid
//! trace-event JSON, the JSON shapes and the exit codes. The same programs are judged alike on
//! PostgreSQL, and with the sessions persisting their own events instead of shipping them.

use std::path::{Path, PathBuf};

use serde_json::Value;

use onesided_client::AUDIT_DATABASE_URL_ENV;

use crate::audit::settled;
use crate::store::{on_both_stores, Store};
use crate::{examples_dir, Output, Server, TempDir, ADMIN_TOKEN};

/// Runs the scenario file with `--audit --json`, waits for each recorded window's history to
/// be complete, and returns their ids (the top-level `windows` list).
fn record_file(server: &Server, file: &Path) -> Vec<u64> {
    record_file_persisting(server, file, None)
}

/// [`record_file`], the run's sessions writing their own audit events to `database` when
/// given one.
fn record_file_persisting(server: &Server, file: &Path, database: Option<&str>) -> Vec<u64> {
    let mut cli = server.cli();
    if let Some(database) = database {
        cli = cli.env(AUDIT_DATABASE_URL_ENV, database);
    }
    let out = cli.arg("run").arg(file).words("--audit --json").run();
    out.success();
    let document = out.json();
    let ids: Vec<u64> = list(&document, "windows", &file.display().to_string())
        .iter()
        .map(|window| window["id"].as_u64().unwrap())
        .collect();
    assert!(!ids.is_empty(), "{document:#}");
    for id in &ids {
        settled(server, *id);
    }
    ids
}

/// `document[key]`, which must be a list (`of` says whose document it is).
#[track_caller]
fn list<'a>(document: &'a Value, key: &str, of: &str) -> &'a Vec<Value> {
    document[key]
        .as_array()
        .unwrap_or_else(|| panic!("{of}: no {key} list: {document:#}"))
}

/// `record_file` for scenario text: the one window it declares.
fn record(server: &Server, name: &str, scenario: &str) -> u64 {
    let dir = TempDir::new();
    let file = dir.file(&format!("{name}.rma"), scenario);
    let ids = record_file(server, &file);
    assert_eq!(ids.len(), 1, "{name}: one window");
    ids[0]
}

fn audit(server: &Server, args: &[&str]) -> Output {
    server.cli().arg("audit").args(args).run()
}

/// `audit check ID --json`: the exit code and the document.
fn check(server: &Server, id: u64) -> (Option<i32>, Value) {
    let out = audit(server, &["check", &id.to_string(), "--json"]);
    let document = out.json();
    (out.code, document)
}

/// The first finding of `document` that breaks `rule`.
fn first_finding<'a>(document: &'a Value, rule: &str) -> &'a Value {
    let findings = document["findings"].as_array().unwrap();
    findings.iter().find(|f| f["rule"] == rule).unwrap()
}

fn rules(document: &Value) -> Vec<&str> {
    document["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| finding["rule"].as_str().unwrap())
        .collect()
}

/// The scenario breaks `rule`: exit 1, `ok` false, a finding with that rule.
#[track_caller]
fn assert_racy(server: &Server, name: &str, scenario: &str, rule: &str) -> Value {
    let id = record(server, name, scenario);
    let (code, document) = check(server, id);
    assert_eq!(code, Some(1), "{name}: {document:#}");
    assert_eq!(document["ok"], false, "{name}: {document:#}");
    assert_eq!(document["window"], id);
    assert!(
        rules(&document).contains(&rule),
        "{name}: expected a {rule} finding: {document:#}"
    );
    document
}

/// The recorded window has no findings: exit 0, `ok` true, an empty list.
#[track_caller]
fn assert_clean_window(server: &Server, name: &str, id: u64) {
    let (code, document) = check(server, id);
    assert_eq!(
        document["findings"],
        Value::Array(vec![]),
        "{name}: no findings expected: {document:#}"
    );
    assert_eq!(document["ok"], true, "{name}: {document:#}");
    assert_eq!(code, Some(0), "{name}: {document:#}");
}

#[track_caller]
fn assert_clean(server: &Server, name: &str, scenario: &str) {
    let id = record(server, name, scenario);
    assert_clean_window(server, name, id);
}

// --- racy programs ------------------------------------------------------------------------

/// The racy programs of `programs/` (NAME.rma) and a rule each breaks.
const RACY: &[(&str, &str)] = &[
    // two origins put to one location in the same fence epoch
    ("fence-put-put", "put_put"),
    // the store is to other bytes than the put's: in the separate model a store while a put
    // to the window is pending is erroneous even then
    ("store-while-pending", "store_while_pending"),
    // B's local store races with A's put to the same element in one fence epoch
    ("store-races-put", "store_while_pending"),
    // shared locks do not guard conflicting puts
    ("shared-put-put", "put_put"),
    // different accumulate ops on one element
    ("accumulate-ops", "accumulate_ops"),
    // a put completed by unlock, a barrier, then the owner's plain load: no refresh call
    // orders the load after the put (forum example 2, broken)
    ("put-load", "put_load"),
];

/// The correct programs of `programs/`: no findings.
const CORRECT: &[&str] = &[
    "disjoint-puts",
    "exclusive-puts",
    "put-flush-get",
    "fence-separated",
    // the owner stores, then locks its own window and loads: correct, and all of it local
    "local-store-lock-load",
];

/// The file of the program `name` of [`RACY`] or [`CORRECT`].
fn program_file(name: &str) -> PathBuf {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/programs");
    file.join(format!("{name}.rma"))
}

/// The text of the program `name` of [`RACY`] or [`CORRECT`].
fn program(name: &str) -> String {
    std::fs::read_to_string(program_file(name)).unwrap()
}

/// The racy program `name`, recorded on a server of its own, breaks its rule of [`RACY`].
#[track_caller]
fn racy(name: &str) -> Value {
    let (_, rule) = RACY.iter().find(|(racy, _)| *racy == name).unwrap();
    assert_racy(&Server::start(), name, &program(name), rule)
}

/// The correct program `name`, recorded on a server of its own, has no findings.
#[track_caller]
fn clean(name: &str) {
    assert!(CORRECT.contains(&name), "{name} is not in CORRECT");
    assert_clean(&Server::start(), name, &program(name));
}

#[test]
fn two_puts_to_one_location_in_a_fence_epoch_are_put_put() {
    let document = racy("fence-put-put");
    let finding = first_finding(&document, "put_put");
    assert_eq!(finding["target"], 2);
    assert_eq!(finding["bytes"], serde_json::json!([0, 8]));
    let mut origins = [
        finding["first"]["rank"].as_u64().unwrap(),
        finding["second"]["rank"].as_u64().unwrap(),
    ];
    origins.sort_unstable();
    assert_eq!(origins, [0, 1]);
    assert_eq!(finding["first"]["call"], "put");
    assert_eq!(finding["second"]["call"], "put");
    assert!(finding["first"]["seq"].as_u64().unwrap() < finding["second"]["seq"].as_u64().unwrap());
}

#[test]
fn a_store_while_a_put_is_pending_in_a_fence_epoch() {
    // the store is to other bytes than the put's: in the separate model a store while a put to
    // the window is pending is erroneous even then
    racy("store-while-pending");
}

#[test]
fn shared_locks_do_not_guard_conflicting_puts() {
    racy("shared-put-put");
}

#[test]
fn different_accumulate_ops_on_one_element() {
    racy("accumulate-ops");
}

#[test]
fn forum_example_3_is_get_store() {
    let server = Server::start();
    let file = examples_dir().join("forum3_store_before_shared_lock.rma");
    let ids = record_file(&server, &file);
    let (code, document) = check(&server, ids[0]);
    assert_eq!(code, Some(1), "{document:#}");
    assert!(rules(&document).contains(&"get_store"), "{document:#}");
    let finding = first_finding(&document, "get_store");
    assert_eq!(finding["target"], 1, "B's window");
    let calls = [
        finding["first"]["call"].as_str().unwrap(),
        finding["second"]["call"].as_str().unwrap(),
    ];
    assert!(
        calls.contains(&"store") && calls.contains(&"get"),
        "{finding:#}"
    );
}

#[test]
fn a_load_after_unlock_and_barrier_without_a_refresh_is_put_load() {
    racy("put-load");
}

#[test]
fn a_load_after_unlock_and_barrier_is_put_load_when_a_later_call_records_it() {
    // the same race; the trailing barrier (after the load, so it orders nothing before it)
    // only makes the library ship the load to the log
    let server = Server::start();
    let scenario = format!("{}barrier\n", program("put-load"));
    let document = assert_racy(&server, "put-load-recorded", &scenario, "put_load");
    let finding = first_finding(&document, "put_load");
    assert_eq!(finding["target"], 1);
    assert_eq!(finding["bytes"], serde_json::json!([0, 8]));
    assert_eq!(finding["first"]["call"], "put");
    assert_eq!(finding["first"]["rank"], 0);
    assert_eq!(finding["second"]["call"], "load");
    assert_eq!(finding["second"]["rank"], 1);
}

// --- correct programs ---------------------------------------------------------------------

#[test]
fn same_op_accumulates_under_lock_all_are_not_races() {
    let server = Server::start();
    // no `expect public`: the runner reads it under a shared lock of its own after the run,
    // which nothing orders after B's and C's accumulates (see `example_counter_is_clean`);
    // the replay shows the sum instead
    let id = record(
        &server,
        "same-op-accumulates",
        "\
window W ranks=3 size=1 type=i64
A: lock_all
B: lock_all
C: lock_all
A: acc A W[0] op=sum = 1
B: acc A W[0] op=sum = 2
C: acc A W[0] op=sum = 3
A: unlock_all
B: unlock_all
C: unlock_all
",
    );
    assert_clean_window(&server, "same-op-accumulates", id);
    let replay = audit(
        &server,
        &["replay", &id.to_string(), "--type", "i64", "--json"],
    );
    replay.success();
    assert_eq!(replay.json()["ranks"][0]["values"], serde_json::json!([6]));
}

#[test]
fn disjoint_puts_in_one_fence_epoch() {
    clean("disjoint-puts");
}

#[test]
fn exclusive_locks_guard_conflicting_puts() {
    let server = Server::start();
    let id = record(&server, "exclusive-puts", &program("exclusive-puts"));
    assert_clean_window(&server, "exclusive-puts", id);
    // either rank may get C's lock first (the scenario's expectation admits both values);
    // whichever did, C holds the put of the one granted it second
    let events = settled(&server, id);
    let granted: Vec<u64> = events
        .iter()
        .filter(|e| e["kind"] == "lock_grant")
        .map(|e| e["event"]["origin"].as_u64().unwrap())
        // C's own lock, the run's read of its public copy for the expectation, comes last
        .filter(|&origin| origin != 2)
        .collect();
    assert!(
        granted == [0, 1] || granted == [1, 0],
        "one grant each: {granted:?}"
    );
    let replayed = audit(
        &server,
        &["replay", &id.to_string(), "--type", "i64", "--json"],
    );
    replayed.success();
    let held = &replayed.json()["ranks"][2]["values"][0];
    let written_by_last = granted[1] + 1;
    assert_eq!(
        held, written_by_last,
        "locks granted to {granted:?}, C holds {held}"
    );
}

#[test]
fn put_flush_get_by_one_origin() {
    clean("put-flush-get");
}

#[test]
fn fence_separated_accesses_by_different_ranks() {
    clean("fence-separated");
}

/// The examples whose header says they are correct (a fix, or a guarantee): no findings.
const CORRECT_EXAMPLES: &[&str] = &[
    "accumulate_ordering.rma",
    "counter.rma",
    "created_by_ranks.rma",
    "dynamic_detach.rma",
    "dynamic_list.rma",
    "fence_semantics.rma",
    "forum1_unlock_publishes.rma",
    "forum1_unified.rma",
    "forum2_lock_pulls.rma",
    "forum2_unified.rma",
    "forum3_unified.rma",
    "forum3_win_sync.rma",
    "forum4_unified.rma",
    "forum4_put_to_self.rma",
    "forum5_load_after_wait.rma",
    "forum5_local_get.rma",
    "forum5_unified.rma",
    "group_by_ranks.rma",
    "group_subset.rma",
    "layout_hindexed.rma",
    "layout_hvector.rma",
    "layout_indexed.rma",
    "layout_origin.rma",
    "layout_resized.rma",
    "layout_struct.rma",
    "layout_subarray.rma",
    "layout_vector.rma",
    "lock_all_behind_writers.rma",
    "requests_wait_any.rma",
];

/// The broken forum examples: each has at least one finding.
const BROKEN_EXAMPLES: &[&str] = &[
    "accumulate_same_op_broken.rma",
    "dynamic_detach_race_broken.rma",
    "forum1_store_without_lock.rma",
    "forum2_load_without_lock.rma",
    "forum3_store_before_shared_lock.rma",
    "forum4_store_in_pscw.rma",
    "forum5_load_in_pscw.rma",
    "set_info_same_op_broken.rma",
];

/// The text of the example `name`.
fn example_text(name: &str) -> String {
    std::fs::read_to_string(examples_dir().join(name)).unwrap()
}

fn example_is_clean(name: &str) {
    let server = Server::start();
    for id in record_file(&server, &examples_dir().join(name)) {
        assert_clean_window(&server, name, id);
    }
}

#[test]
fn example_accumulate_ordering_is_clean() {
    example_is_clean("accumulate_ordering.rma");
}

/// Runs the example `name` and checks its window: exactly one finding, an accumulate_ops one
/// that names the `accumulate_ops=same_op` hint.
fn one_finding_naming_same_op(server: &Server, name: &str) {
    let ids = record_file(server, &examples_dir().join(name));
    let (code, document) = check(server, ids[0]);
    assert_eq!(code, Some(1), "{document:#}");
    assert_eq!(rules(&document), vec!["accumulate_ops"], "{document:#}");
    let finding = &document["findings"][0];
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .contains("accumulate_ops=same_op"),
        "{finding:#}"
    );
}

/// The window's `accumulate_ops=same_op`, broken by a no_op read beside a sum: the finding
/// names the hint.
#[test]
fn example_accumulate_same_op_broken_is_an_accumulate_ops_finding() {
    let server = Server::start();
    one_finding_naming_same_op(&server, "accumulate_same_op_broken.rma");
    // the same program on a window without the hint breaks nothing
    let text =
        example_text("accumulate_same_op_broken.rma").replace(" info accumulate_ops=same_op", "");
    assert_clean(&server, "same-op-no-op-default", &text);
}

/// Hints set with `set_info` mid-run: the checker reads them from the log as they change, so
/// the no_op read beside a sum is a finding after `accumulate_ops=same_op` and not before.
#[test]
fn example_set_info_same_op_broken_is_one_finding_after_the_set_info() {
    let server = Server::start();
    one_finding_naming_same_op(&server, "set_info_same_op_broken.rma");
    // without the set_info, the same two phases break nothing
    let text = example_text("set_info_same_op_broken.rma");
    let text = text
        .lines()
        .filter(|line| !line.contains("set_info"))
        .collect::<Vec<_>>()
        .join("\n");
    assert_clean(&server, "no-set-info", &text);
}

/// One origin's sum and replace on one element: ordered by default, a finding when the window
/// drops write-after-write ordering.
#[test]
fn accumulate_ordering_decides_whether_one_origins_ops_race() {
    let program = |info: &str| {
        format!(
            "\
window W ranks=2 size=1 type=i64{info}
A: lock_all
A: acc B W[0] op=sum = 1
A: acc B W[0] op=replace = 2
A: unlock_all
"
        )
    };
    let server = Server::start();
    assert_clean(&server, "ordered", &program(""));
    assert_clean(&server, "waw", &program(" info accumulate_ordering=waw"));
    let document = assert_racy(
        &server,
        "unordered",
        &program(" info accumulate_ordering=none"),
        "accumulate_ops",
    );
    let message = document["findings"][0]["message"].as_str().unwrap();
    assert!(message.contains("accumulate_ordering=none"), "{message}");
}

/// A put still in flight when the owner detaches its region: one detach_race finding naming
/// the put and the detach; completing the put with a flush before the barrier fixes it.
#[test]
fn example_dynamic_detach_race_broken_is_a_detach_race() {
    let server = Server::start();
    let name = "dynamic_detach_race_broken.rma";
    let ids = record_file(&server, &examples_dir().join(name));
    let (code, document) = check(&server, ids[0]);
    assert_eq!(code, Some(1), "{document:#}");
    assert_eq!(rules(&document), vec!["detach_race"], "{document:#}");
    let finding = &document["findings"][0];
    assert_eq!(finding["target"], 0, "{finding:#}");
    assert_eq!(finding["first"]["call"], "put", "{finding:#}");
    assert_eq!(finding["second"]["call"], "detach", "{finding:#}");
    let text = example_text(name).replace(
        "B: put A r[0] = 1                  # not completed until B's unlock\n",
        "B: put A r[0] = 1\nB: flush A\n",
    );
    assert!(text.contains("B: flush A"), "the example changed: {text}");
    assert_clean(&server, "dynamic-detach-flushed", &text);
}

#[test]
fn example_dynamic_list_is_clean() {
    example_is_clean("dynamic_list.rma");
}

#[test]
fn example_dynamic_detach_is_clean() {
    example_is_clean("dynamic_detach.rma");
}

#[test]
fn example_counter_is_clean() {
    example_is_clean("counter.rma");
}

#[test]
fn example_fence_semantics_is_clean() {
    example_is_clean("fence_semantics.rma");
}

#[test]
fn example_forum1_unlock_publishes_is_clean() {
    example_is_clean("forum1_unlock_publishes.rma");
}

#[test]
fn example_forum2_lock_pulls_is_clean() {
    example_is_clean("forum2_lock_pulls.rma");
}

#[test]
fn example_forum3_win_sync_is_clean() {
    example_is_clean("forum3_win_sync.rma");
}

#[test]
fn example_forum4_put_to_self_is_clean() {
    example_is_clean("forum4_put_to_self.rma");
}

#[test]
fn example_forum5_load_after_wait_is_clean() {
    example_is_clean("forum5_load_after_wait.rma");
}

#[test]
fn example_forum5_local_get_is_clean() {
    example_is_clean("forum5_local_get.rma");
}

#[test]
fn example_lock_all_behind_writers_is_clean() {
    example_is_clean("lock_all_behind_writers.rma");
}

/// Two layouts that share one element of C, from two origins in one fence epoch: the finding
/// names exactly the shared element's bytes, so the log holds each layout's own bytes.
#[test]
fn layouts_that_share_one_element_are_put_put_on_its_bytes() {
    let server = Server::start();
    let scenario = "\
window W ranks=3 size=8 type=i32
A: fence
B: fence
C: fence
A: put C W[vector:2,1,4@1] = 1,2       # elements 1 and 5
B: put C W[hindexed:20+1,8+1] = 3,4    # elements 5 and 2
A: fence
B: fence
C: fence
";
    let document = assert_racy(&server, "layouts-put-put", scenario, "put_put");
    let findings = document["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{document:#}");
    assert_eq!(findings[0]["target"], 2);
    assert_eq!(findings[0]["bytes"], serde_json::json!([20, 24]));
}

/// The layout examples flush between accesses of one element: every access is recorded with
/// its layout's bytes, and none races.
#[test]
fn examples_of_layouts_are_clean() {
    for name in CORRECT_EXAMPLES
        .iter()
        .filter(|name| name.starts_with("layout_"))
    {
        example_is_clean(name);
    }
}

#[test]
fn every_example_is_classified_and_broken_ones_have_findings() {
    let mut files: Vec<String> = std::fs::read_dir(examples_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rma"))
        .collect();
    files.sort();
    let mut known: Vec<String> = CORRECT_EXAMPLES
        .iter()
        .chain(BROKEN_EXAMPLES)
        .map(|name| name.to_string())
        .collect();
    known.sort();
    assert_eq!(
        files, known,
        "a new example: say here whether it is correct (and add its test) or broken"
    );
    let server = Server::start();
    for name in BROKEN_EXAMPLES {
        let ids = record_file(&server, &examples_dir().join(name));
        let (code, document) = check(&server, ids[0]);
        assert_eq!(code, Some(1), "{name}: {document:#}");
        assert!(
            !document["findings"].as_array().unwrap().is_empty(),
            "{name}: {document:#}"
        );
    }
}

// --- on PostgreSQL, and with the sessions persisting their own events ----------------------

/// What a program's check must say.
#[derive(Clone, Copy, Debug)]
enum Verdict<'a> {
    Breaks(&'a str),
    SomeFinding,
    Clean,
}

/// A finding as two recordings of one program agree on: the rule, the target, the bytes and
/// the two accesses (rank, call) without their places, in either order (the ranks' calls may
/// interleave differently in the log).
type Judged = (String, u64, (u64, u64), Vec<(u64, String)>);

fn judged(document: &Value) -> Vec<Judged> {
    let mut findings: Vec<Judged> = document["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| {
            let side = |side: &Value| {
                (
                    side["rank"].as_u64().unwrap(),
                    side["call"].as_str().unwrap().to_string(),
                )
            };
            let mut sides = vec![side(&finding["first"]), side(&finding["second"])];
            sides.sort();
            (
                finding["rule"].as_str().unwrap().to_string(),
                finding["target"].as_u64().unwrap(),
                (
                    finding["bytes"][0].as_u64().unwrap(),
                    finding["bytes"][1].as_u64().unwrap(),
                ),
                sides,
            )
        })
        .collect();
    findings.sort();
    findings
}

/// Every program of the tables above and of `examples/`, recorded twice on `store`: with the
/// sessions shipping their own events, and with them writing those to the store themselves.
/// Both recordings are judged alike — the racy ones break their rule, the correct ones are
/// clean — and in the persisted one every local access a finding names is a client row behind
/// its marker, and verify checks all client rows.
fn programs_are_judged_alike_shipped_or_persisted(store: Store) {
    let server = store.server();
    let database = store.url(&server);
    let mut programs: Vec<(String, PathBuf, Verdict<'_>)> = Vec::new();
    for (name, rule) in RACY {
        programs.push((name.to_string(), program_file(name), Verdict::Breaks(rule)));
    }
    for name in CORRECT {
        programs.push((name.to_string(), program_file(name), Verdict::Clean));
    }
    for name in CORRECT_EXAMPLES {
        programs.push((name.to_string(), examples_dir().join(name), Verdict::Clean));
    }
    programs.push((
        "forum3_store_before_shared_lock.rma".into(),
        examples_dir().join("forum3_store_before_shared_lock.rma"),
        Verdict::Breaks("get_store"),
    ));
    for name in BROKEN_EXAMPLES {
        programs.push((
            name.to_string(),
            examples_dir().join(name),
            Verdict::SomeFinding,
        ));
    }
    for (name, file, verdict) in programs {
        let shipped = record_file_persisting(&server, &file, None);
        let persisted = record_file_persisting(&server, &file, Some(&database));
        assert_eq!(shipped.len(), persisted.len(), "{name}");
        for (shipped, persisted) in shipped.into_iter().zip(persisted) {
            let (shipped_code, shipped_document) = check(&server, shipped);
            let (code, document) = check(&server, persisted);
            assert_eq!(
                judged(&document),
                judged(&shipped_document),
                "{name}: persisted {document:#} / shipped {shipped_document:#}"
            );
            assert_eq!(code, shipped_code, "{name}");
            match verdict {
                Verdict::Breaks(rule) => {
                    assert_eq!(code, Some(1), "{name}: {document:#}");
                    assert!(rules(&document).contains(&rule), "{name}: {document:#}");
                }
                Verdict::SomeFinding => assert_eq!(code, Some(1), "{name}: {document:#}"),
                Verdict::Clean => assert_eq!(code, Some(0), "{name}: {document:#}"),
            }
            for finding in document["findings"].as_array().unwrap() {
                for side in [&finding["first"], &finding["second"]] {
                    let local = side["call"] == "store" || side["call"] == "load";
                    assert_eq!(side["cseq"].is_u64(), local, "{name}: {side}");
                }
            }
            let verified = audit(&server, &["verify", &persisted.to_string(), "--json"]);
            verified.success();
            let verified = verified.json();
            assert!(
                verified["client_events"].as_u64().unwrap() > 0,
                "{name}: {verified:#}"
            );
            assert_eq!(verified["unmarked"], serde_json::json!([]), "{name}");
        }
    }
}

on_both_stores!(programs_are_judged_alike_shipped_or_persisted);

// --- the interface ------------------------------------------------------------------------

#[test]
fn check_json_shape_and_text() {
    let server = Server::start();
    let id = record(&server, "fence-put-put", &program("fence-put-put"));
    let id_text = id.to_string();
    let (_, document) = check(&server, id);
    let keys: Vec<&String> = document.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["findings", "ok", "window"]);
    let findings = document["findings"].as_array().unwrap();
    assert!(!findings.is_empty());
    for finding in findings {
        let keys: Vec<&String> = finding.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "bytes",
                "description",
                "first",
                "message",
                "rule",
                "second",
                "target"
            ],
            "{finding:#}"
        );
        for side in [&finding["first"], &finding["second"]] {
            let keys: Vec<&String> = side.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["call", "cseq", "rank", "seq"], "{side}");
            assert!(side["seq"].is_u64() && side["rank"].is_u64() && side["call"].is_string());
            assert!(
                side["cseq"].is_null(),
                "shipped events are the window's rows: {side}"
            );
        }
        let bytes = finding["bytes"].as_array().unwrap();
        assert_eq!(bytes.len(), 2);
        assert!(bytes[0].as_u64().unwrap() < bytes[1].as_u64().unwrap());
        assert!(!finding["description"].as_str().unwrap().is_empty());
        assert!(finding["target"].is_u64());
    }

    // WORLD/NAME names the same window
    let events = audit(&server, &["log", &id_text, "--json"]);
    let first: Value = serde_json::from_str(events.stdout.lines().next().unwrap()).unwrap();
    let world = first["event"]["world"].as_str().unwrap();
    let named = audit(&server, &["check", &format!("{world}/W"), "--json"]);
    named.code(1);
    assert_eq!(named.json(), document);

    // text: one line per finding with the rule, the bytes at the target and both sides, then
    // a summary
    let text = audit(&server, &["check", &id_text]);
    text.code(1);
    let rows: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(rows.len(), findings.len() + 1, "{}", text.stdout);
    for (row, finding) in rows.iter().zip(findings) {
        let side = |side: &Value| {
            format!(
                "seq {} rank {} {}",
                side["seq"],
                side["rank"],
                side["call"].as_str().unwrap()
            )
        };
        let expected = format!(
            "{} bytes [{},{}) at rank {}: {} / {}",
            finding["rule"].as_str().unwrap(),
            finding["bytes"][0],
            finding["bytes"][1],
            finding["target"],
            side(&finding["first"]),
            side(&finding["second"]),
        );
        assert!(row.starts_with(&expected), "{row}\nexpected: {expected}");
    }
    let summary = rows.last().unwrap();
    assert!(
        summary.contains(&format!("window {id}")) && summary.contains("finding"),
        "{summary}"
    );

    // no findings: exit 0, a summary line only
    let clean = record(
        &server,
        "clean",
        "window W ranks=1 size=1 type=i64\nA: fence\nA: fence\n",
    );
    let out = audit(&server, &["check", &clean.to_string()]);
    out.success();
    assert_eq!(out.stdout, format!("window {clean}: no findings\n"));
    let document = audit(&server, &["check", &clean.to_string(), "--json"]);
    document.success();
    assert_eq!(
        document.json(),
        serde_json::json!({"window": clean, "findings": [], "ok": true})
    );
}

/// Checks that `trace` is a Perfetto trace of `ranks` ranks with at least one flow.
#[track_caller]
fn assert_trace(trace: &str, ranks: u64) {
    let document: Value =
        serde_json::from_str(trace).unwrap_or_else(|e| panic!("not JSON ({e}): {trace}"));
    let events = document["traceEvents"].as_array().expect("traceEvents");
    for event in events {
        assert!(event["ph"].is_string(), "{event}");
        assert!(event["pid"].is_number(), "{event}");
    }
    let mut threads: Vec<u64> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| e["tid"].as_u64().unwrap())
        .collect();
    threads.sort_unstable();
    assert_eq!(
        threads,
        (0..ranks).collect::<Vec<_>>(),
        "one track per rank"
    );
    let starts: Vec<&Value> = events.iter().filter(|e| e["ph"] == "s").collect();
    assert!(!starts.is_empty(), "a flow for the put: {trace}");
    for start in starts {
        assert!(
            events
                .iter()
                .any(|e| e["ph"] == "f" && e["id"] == start["id"]),
            "every flow start has its end: {start}"
        );
    }
}

/// `audit export ID --format perfetto --output FILE`.
fn export_to(server: &Server, id: &str, file: &Path) -> Output {
    let export = ["export", id, "--format", "perfetto", "--output"];
    server.cli().arg("audit").args(export).arg(file).run()
}

#[test]
fn export_writes_a_perfetto_trace() {
    let server = Server::start();
    let id = record(&server, "fence-put-put", &program("fence-put-put")).to_string();
    let out = audit(&server, &["export", &id, "--format", "perfetto"]);
    out.success();
    assert_trace(&out.stdout, 3);

    let dir = TempDir::new();
    let file = dir.0.join("trace.json");
    let written = export_to(&server, &id, &file);
    written.success();
    assert_eq!(written.stdout, "");
    let trace = std::fs::read_to_string(&file).unwrap();
    assert_trace(&trace, 3);
    assert_eq!(
        serde_json::from_str::<Value>(&trace).unwrap(),
        serde_json::from_str::<Value>(&out.stdout).unwrap()
    );
}

#[test]
fn check_and_export_exit_codes() {
    let server = Server::start();
    let one_fence = "window W ranks=1 size=1 type=i64\nA: fence\n";
    let id = record(&server, "disjoint", one_fence).to_string();
    // usage: no window, a window that is neither, no format, an unknown format, an unwritable
    // output
    audit(&server, &["check"]).code(2);
    audit(&server, &["check", "nothing"]).code(2);
    audit(&server, &["export", &id]).code(2);
    let svg = audit(&server, &["export", &id, "--format", "svg"]);
    svg.code(2).stderr_has("perfetto");
    let dir = TempDir::new();
    let nowhere = dir.0.join("missing").join("trace.json");
    let out = export_to(&server, &id, &nowhere);
    out.code(2).stderr_has("trace.json");
    // refusals: an unknown window, an unknown name, a wrong token
    let missing = audit(&server, &["check", "999999"]);
    missing.code(3).stderr_has("999999");
    audit(&server, &["export", "999999", "--format", "perfetto"]).code(3);
    audit(&server, &["check", "nowhere/W"]).code(3);
    server
        .as_rank("wrong")
        .args(["audit", "check", &id])
        .run()
        .code(3);
    // unreachable
    for args in [
        vec!["audit", "check", "1"],
        vec!["audit", "export", "1", "--format", "perfetto"],
    ] {
        crate::Cli::new("http://127.0.0.1:1")
            .token(ADMIN_TOKEN)
            .args(args)
            .run()
            .code(4);
    }
}

/// Issue 44: `run --check` checks every window of the run: each broken example fails (exit 1)
/// with its findings, in text and in JSON, and a clean one passes.
#[test]
fn run_check_fails_the_broken_examples_with_their_findings() {
    let server = Server::start();
    for name in BROKEN_EXAMPLES {
        let file = examples_dir().join(name);
        let out = server
            .cli()
            .arg("run")
            .arg(&file)
            .words("--check --json")
            .run();
        assert_eq!(out.code, Some(1), "{name}: {}\n{}", out.stdout, out.stderr);
        let document = out.json();
        assert_eq!(document["ok"], false, "{name}: {document:#}");
        let findings: Vec<&Value> = list(&document, "findings", name)
            .iter()
            .flat_map(|window| window["findings"].as_array().unwrap())
            .collect();
        assert!(!findings.is_empty(), "{name}: {document:#}");
        assert!(
            findings.iter().all(|finding| finding["rule"].is_string()),
            "{name}: {document:#}"
        );
        // the same in text: the finding's line under its window's
        let out = server.cli().arg("run").arg(&file).arg("--check").run();
        assert_eq!(out.code, Some(1), "{name}: {}", out.stdout);
        assert!(out.stdout.contains("finding"), "{name}: {}", out.stdout);
    }
    let clean = examples_dir().join("forum1_unlock_publishes.rma");
    let out = server.cli().arg("run").arg(&clean).arg("--check").run();
    out.success();
    out.stdout_has(": no findings");
}
