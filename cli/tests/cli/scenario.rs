//! `onesided run`: every call kind and expectation form of SCENARIOS.md against a real server,
//! the JSON report's shape, `--repeat`, `--audit`, parse errors and exit codes.

use serde_json::Value;

use crate::{Output, Server, TempDir};

fn run(server: &Server, text: &str, extra: &[&str]) -> Output {
    let dir = TempDir::new();
    let file = dir.file("s.rma", text);
    server.cli().arg("run").arg(&file).args(extra).run()
}

fn report(server: &Server, text: &str) -> Value {
    let out = run(server, text, &["--json"]);
    let document = out.json();
    assert_eq!(document["ok"], true, "{document:#}\n{}", out.stderr);
    out.success();
    document
}

/// [`report`] on a server of its own.
fn holds(text: &str) -> Value {
    report(&Server::start(), text)
}

fn var(document: &Value, rank: usize, name: &str) -> Value {
    document["runs"][0]["ranks"][rank]["vars"][name].clone()
}

#[test]
fn communication_calls_ranges_strides_and_aliases() {
    let document = holds(
        "\
window W ranks=2 size=8 type=i32
alias X = W[0]
alias Mid = W[2..5]
A: lock exclusive B
A: put B W[0..8] = 1,2,3,4,5,6,7,8
A: flush B
A: get B W[1..8:3] -> strided     # elements 1, 4, 7: one vector-layout get
A: get B Mid -> mid
A: acc B X op=sum = 10
A: get_acc B W[1] op=prod = 3 -> before
A: get_acc B W[1] op=no_op -> after
A: fop B W[3] op=max = 40 -> fetched
A: cas B W[4] compare=5 = 50 -> swapped
A: cas B W[5] compare=0 = 60 -> kept
A: put B W[6..8:1] = -1,-2
A: unlock B
expect A strided == 2,5,8
expect A mid == 3,4,5
expect A before == 2
expect A after == 6
expect A fetched == 4
expect A swapped in {5}
expect A kept == 6
expect public B W[0..8] == 11,6,3,40,50,6,-1,-2
expect public B W[0..8:2] == 11,3,50,-1
",
    );
    assert_eq!(var(&document, 0, "strided"), serde_json::json!([2, 5, 8]));
    assert_eq!(var(&document, 0, "fetched"), 4);
    let run = &document["runs"][0];
    assert_eq!(run["expectations"].as_array().unwrap().len(), 9);
    assert!(run["expectations"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["held"] == true));
}

/// Layout locations in local stores and loads, in a get at the target, and in `expect
/// private` and `expect public`: every element where its layout says, the others untouched.
#[test]
fn layouts_in_stores_loads_gets_and_expectations() {
    let document = holds(
        "\
window W ranks=2 size=6 type=i32
A: store W[vector:2,1,3@1] = 5,6                  # elements 1 and 4
A: store W[hindexed:0+1,20+1] = 7,8               # elements 0 and 5
A: load W[indexed:5,1] -> back
A: fence
B: fence
B: get A W[subarray:sizes=2x3,subsizes=2x1,starts=0x1] -> column   # elements 1 and 4
B: get A W[hvector:2,1,12@1] -> pair origin=indexed:2,0   # 1 and 4 land at 2 and 0
B: fence
A: fence
expect A back == 8,5
expect B column == 5,6
expect B pair == 6,0,5
expect private A W[0..6] == 7,5,0,0,6,8
expect private A W[hvector:2,1,16] == 7,6
expect public A W[0..6] == 7,5,0,0,6,8
expect public A W[indexed:5,0] == 8,7
",
    );
    assert_eq!(var(&document, 0, "back"), serde_json::json!([8, 5]));
    assert_eq!(var(&document, 1, "column"), serde_json::json!([5, 6]));
    let held: Vec<bool> = document["runs"][0]["expectations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["held"].as_bool().unwrap())
        .collect();
    assert_eq!(held, [true; 7]);
}

#[test]
fn the_report_shape() {
    let server = Server::start();
    let out = run(
        &server,
        "\
window W ranks=2 size=1 type=f64
A: lock shared B
A: put B W[5] = 1 !RMA_RANGE
A: get B W[0] -> a
A: unlock B
expect A a == 0
expect public B W[0] == 0.0
",
        &["--json", "--audit", "--repeat", "2"],
    );
    out.success();
    let document = out.json();
    assert!(document["file"].as_str().unwrap().ends_with("s.rma"));
    assert_eq!(document["ok"], true);
    let runs = document["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (index, run) in runs.iter().enumerate() {
        assert_eq!(run["run"], index + 1);
        let ranks = run["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), 2);
        assert_eq!(ranks[0]["rank"], 0);
        assert_eq!(ranks[0]["vars"]["a"], 0.0);
        let failed = &ranks[0]["failed_calls"][0];
        assert_eq!(failed["line"], 3);
        assert_eq!(failed["call"], "put B W[5] = 1 !RMA_RANGE");
        assert_eq!(failed["class"], "RMA_RANGE");
        assert_eq!(failed["expected"], true);
        assert_eq!(ranks[1]["failed_calls"], serde_json::json!([]));
        let expectation = &run["expectations"][0];
        assert_eq!(expectation["line"], 6);
        assert_eq!(expectation["text"], "expect A a == 0");
        assert_eq!(expectation["held"], true);
        let windows = run["windows"].as_array().unwrap();
        assert_eq!(windows[0]["name"], "W");
        assert!(windows[0]["id"].as_u64().is_some());
    }
    assert_ne!(
        runs[0]["windows"][0]["id"], runs[1]["windows"][0]["id"],
        "fresh windows per run"
    );
    assert_eq!(document["distribution"]["A a"]["0"], 2);
    // and at the top level, every run's windows in one list
    assert_eq!(
        document["windows"],
        serde_json::json!([runs[0]["windows"][0], runs[1]["windows"][0]])
    );
    let keys: Vec<&String> = document["windows"][0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["id", "name"]);
}

#[test]
fn without_audit_no_window_ids() {
    let server = Server::start();
    let document = report(&server, "window W ranks=1 size=1 type=u8\nA: fence\n");
    assert!(document["runs"][0].get("windows").is_none());
    assert!(document.get("windows").is_none());
}

#[test]
fn a_failed_expectation_exits_1_and_names_its_line() {
    let server = Server::start();
    let text = "\
window W ranks=2 size=1 type=i64
B: store W[0] = 7
barrier
A: lock shared B
A: get B W[0] -> a
A: unlock B

expect A a == 7
";
    let out = run(&server, text, &[]);
    out.code(1)
        .stdout_has("s.rma:8: expect A a == 7: did NOT hold (observed 0)");
    let json = run(&server, text, &["--json"]);
    json.code(1);
    let document = json.json();
    assert_eq!(document["ok"], false);
    assert_eq!(document["runs"][0]["expectations"][0]["held"], false);
    assert_eq!(document["runs"][0]["expectations"][0]["observed"], 0);
}

#[test]
fn a_call_failing_without_bang_fails_the_scenario() {
    let server = Server::start();
    // each program, and what its run (exit 1) says
    for (text, says) in [
        (
            "window W ranks=2 size=1 type=i64\nA: unlock B\nA: lock shared B\nA: unlock B\n",
            "s.rma:2: A: `unlock B` failed: MPI_ERR_RMA_SYNC",
        ),
        (
            "window W ranks=2 size=1 type=i64\nA: unlock B !RMA_RANGE\n",
            "(expected RMA_RANGE)",
        ),
        (
            "window W ranks=1 size=1 type=i64\nA: fence !RMA_SYNC\n",
            "succeeded but must fail with RMA_SYNC",
        ),
    ] {
        run(&server, text, &[]).code(1).stdout_has(says);
    }
}

#[test]
fn expected_error_classes() {
    holds(
        "\
window W ranks=2 size=2 type=f32
window N ranks=2 size=1 type=i32 info no_locks=true
A: W.lock shared 5 !RANK
A: W.lock exclusive B
A: W.lock shared B !RMA_SYNC
A: cas B W[0] compare=0 = 1 -> c !TYPE
A: acc B W[0] op=bxor = 1 !OP
A: W.unlock B
A: N.lock shared B !RMA_SYNC
A: W.fence assert=nocheck !ASSERT
A: W.fence
B: W.fence
A: put B W[2] = 1 !RMA_RANGE
A: W.fence
B: W.fence
",
    );
}

#[test]
fn fence_pscw_requests_and_test() {
    let document = holds(
        "\
window W ranks=3 size=2 type=i64
A: fence assert=noprecede
B: fence assert=noprecede
C: fence assert=noprecede
A: acc B W[0] op=sum = 1      # concurrent accumulates to one location are fine; a put would conflict
C: acc B W[0] op=sum = 2
A: fence
B: fence
C: fence
B: load W[0] -> fenced
B: post {A,C}
A: start {B}
C: start {B}
A: put B W[1] = 5
C: racc B W[1] op=sum = 10 as never_waited !RMA_SYNC
A: complete
C: complete
B: wait
B: load W[1] -> pscw
B: post {A}
B: test -> early
A: lock_all
A: rget C W[0..2] -> rg as r1
A: wait_req r1
A: rput C W[0] = 4 as r2
A: wait_req r2
A: flush_all
A: rget_acc C W[0] op=sum = 3 -> ra as r3
A: wait_req r3
A: unlock_all
barrier
A: start {B}
A: complete
barrier                           # A's complete marker is at B before the barrier ends
B: test -> late
B: wait !RMA_SYNC                 # a test that said true ended the exposure epoch
expect B fenced == 3
expect B pscw == 5
expect B early == false
expect A rg == 0,0
expect A ra == 4
expect public C W[0] == 7
expect B late == true
",
    );
    assert_eq!(var(&document, 1, "early"), false, "{document:#}");
    assert_eq!(var(&document, 1, "late"), true, "{document:#}");
}

#[test]
fn request_calls_test_wait_any_wait_all_and_free() {
    // B holds its own window exclusively until the second barrier, so A's rget from B cannot
    // complete before it: every flag below is determined, not a race
    let document = holds(
        "\
window W ranks=3 size=2 type=i64
B: lock exclusive B
B: store W[0] = 42
barrier
A: lock_all
A: rget C W[1] -> free as r2
A: flush C                           # r2 travels and completes alone
A: rget B W[0] -> held as r1
A: test_req r1 -> early
A: wait_any r1,r2 -> first
A: test_all r2,r1 -> pair            # r2 completed at wait_any: null, only r1 counts
A: test_all r1 -> early_all
A: rput C W[0] = 9 as r3
A: test_req r3 -> put_done
A: wait_req r3                       # tested complete: MPI_REQUEST_NULL, waited at once
A: test_req r3 -> null_done          # and a test of it says true
A: rget C W[1] -> dropped as r4
A: free_req r4
A: free_req r4 !REQUEST              # freeing a null request is erroneous
barrier
B: unlock B
A: wait_all r2,r1,r3                 # nulls among them
A: wait_any r1,r2 -> none            # all null: MPI_UNDEFINED
A: test_all r1,r4 -> nulls           # all null: true
A: unlock_all
barrier
expect A early == false
expect A first == 1
expect A pair == false
expect A early_all == false
expect A put_done == true
expect A null_done == true
expect A none == -1
expect A nulls == true
expect A held == 42
expect A free == 0
expect public C W[0] == 9
",
    );
    assert_eq!(var(&document, 0, "first"), 1, "{document:#}");
    assert_eq!(var(&document, 0, "held"), 42, "{document:#}");
}

#[test]
fn several_windows_per_rank_sizes_flavor_and_private_copies() {
    holds(
        "\
window W ranks=2 size=2,0 type=u16 flavor=create
window V ranks=2 size=1 type=i8 info accumulate_ordering=none
A: store W[1] = 65535
B: put A W[0] = 1 !RMA_SYNC
B: W.lock shared A
B: put A W[0] = 9
B: put B W[0] = 1 !RMA_RANGE
B: W.unlock A
A: V.fence
B: V.fence
B: put A V[0] = -5
A: V.fence
B: V.fence
A: V.sync !RMA_SYNC
expect private A W[0..2] == 0,65535
expect public A W[0..2] == 9,0
expect private A V[0] == -5
",
    );
}

#[test]
fn flush_family_and_sleep() {
    holds(
        "\
window W ranks=2 size=1 type=u32
A: lock_all assert=nocheck
A: put B W[0] = 3
A: flush_local B
A: flush B
A: get B W[0] -> g
A: flush_local_all
A: sleep 5
A: unlock_all
B: flush_local B !RMA_SYNC
expect A g == 3
",
    );
}

#[test]
fn crash_and_attach() {
    let document = holds(
        "\
window W ranks=2 size=1 type=i64
B: lock exclusive A
B: put A W[0] = 4
B: flush A
B: crash                       # the exclusive lock stays held, the epoch open
B: attach
B: lock exclusive A            # granted: the crashed incarnation's lock was revoked
B: get A W[0] -> seen
B: unlock A
expect B seen == 4
expect public A W[0] == 4
",
    );
    assert_eq!(var(&document, 1, "seen"), 4);
}

#[test]
fn a_fence_with_a_crashed_rank_fails_with_proc_failed() {
    let document = holds(
        "\
window W ranks=3 size=1 type=i64
A: fence
B: fence
C: fence
C: crash                       # inside the fence epoch: the others' next fence needs it
A: put B W[0] = 1
A: fence !PROC_FAILED
B: fence !PROC_FAILED
",
    );
    assert_eq!(document["ok"], true, "{document:#}");
    let failed = &document["runs"][0]["ranks"][0]["failed_calls"];
    assert!(failed.to_string().contains("PROC_FAILED"), "{document:#}");
}

/// Dynamic windows: regions attached by rank, reached by every call that takes a location
/// (ranges, layouts, requests, atomics, an alias), created by the admin or by the ranks, next
/// to a static window; the owner's stores and loads by address; misuse has its class.
#[test]
fn dynamic_windows_attach_regions_that_every_call_reaches() {
    let document = holds(
        "\
window D ranks=2 size=0 type=i32 flavor=dynamic
window R ranks=2 type=i64 flavor=dynamic by=ranks
window S ranks=2 size=2 type=i64
B: D.attach 8 -> r
B: R.attach 2 -> q
B: store r[0..2] = 4,5          # B's own memory, by address
B: load r[8] -> past !RMA_RANGE # past the region: at once, locally
B: D.lock exclusive B
B: D.unlock B                   # publishes the stores
A: S.attach 1 -> nope !RMA_FLAVOR
alias X = r[7]
barrier
A: D.lock_all
A: put B r[vector:2,1,2@2] = 7,8 # elements 2 and 4
A: get_acc B r[0] op=sum = 10 -> was
A: cas B X compare=0 = 9 -> old
A: rget B r[0..2] -> both as g
A: wait_req g
A: D.unlock_all
A: R.lock shared B
A: fop B q[1] op=sum = 3 -> f
A: R.unlock B
barrier
B: D.lock shared B
B: D.unlock B                   # refreshes B's private copy
B: load r[0..8] -> mine
B: R.detach q
B: R.detach q !RMA_ATTACH

expect A was == 4
expect A old == 0
expect A both == 14,5
expect A f == 0
expect B mine == 14,5,7,0,8,0,0,9
expect public B r[2..5] == 7,0,8
expect public B X == 9
expect private B r[1] == 5
",
    );
    let failed = document["runs"][0]["ranks"][0]["failed_calls"].to_string();
    assert!(failed.contains("RMA_FLAVOR"), "{document:#}");
    let failed = document["runs"][0]["ranks"][1]["failed_calls"].to_string();
    assert!(
        failed.contains("RMA_RANGE") && failed.contains("RMA_ATTACH"),
        "{document:#}"
    );
}

/// `expect public` reads a `no_locks=true` window too: the runner's read is no epoch of the
/// program, and that window takes no lock (a held-out scenario found it failing with
/// `RMA_SYNC`).
#[test]
fn expect_public_reads_a_window_without_locks() {
    holds(
        "\
window V ranks=2 size=2 type=i64 info no_locks=true
A: fence
B: fence
A: put B V[1] = 9
A: fence
B: fence
expect public B V[0..2] == 0,9
",
    );
}

/// MPI allows a region of no bytes (a held-out scenario found `attach 0` failing with `SIZE`),
/// and an alias may name a region above the line that attaches it (it said `unknown window`).
#[test]
fn a_region_of_no_bytes_and_an_alias_above_its_attach() {
    holds(
        "\
window W ranks=2 type=i32 flavor=dynamic
alias X = r[1]
B: attach 0 -> z                 # MPI_Win_attach of nothing
B: attach 4 -> r
barrier
A: lock exclusive B
A: put B X = 7
A: unlock B
B: detach z
expect public B X == 7
expect public B r[0..2] == 0,7
",
    );
}

/// An access to a region after its detach fails at the call that completes it, and a region
/// whose attach failed has no address: a use of it fails the scenario, naming the attach.
#[test]
fn dynamic_regions_after_detach_and_failed_attaches() {
    let server = Server::start();
    report(
        &server,
        "\
window W ranks=2 type=u8 flavor=dynamic
A: attach 4 -> r
A: detach r
barrier
B: lock shared A
B: get A r[0] -> v
B: unlock A !RMA_RANGE
",
    );
    let out = run(
        &server,
        "\
window W ranks=2 type=u8 flavor=dynamic
A: attach 1099511627776 -> r !RMA_ATTACH
barrier
B: lock shared A
B: put A r[0] = 1
B: unlock A
",
        &["--json"],
    );
    out.code(1);
    let document = out.json();
    let problems = document["runs"][0]["problems"].to_string();
    assert!(
        problems.contains("region r has no address: its attach (line 2) did not succeed"),
        "{document:#}"
    );
}

/// The dynamic parts of the format that need no server: each mistake names its line and
/// column, and nothing runs.
#[test]
fn dynamic_parse_errors_exit_2_with_line_and_column() {
    let head = "window W ranks=2 type=i64 flavor=dynamic\n";
    let cases = [
        (
            "window W ranks=2 size=0,4 type=i64 flavor=dynamic\n".to_string(),
            "s.rma:1:23: a dynamic window has no size",
        ),
        (
            format!("{head}A: put B W[0] = 1\n"),
            "s.rma:2:10: W is a dynamic window: its memory is the regions attached to it",
        ),
        (
            format!("{head}A: attach 2 -> r\nB: lock shared A\nB: put A r[0] = 1\n"),
            "s.rma:4:10: region r is attached by rank A at line 2: rank B may use it only after a barrier",
        ),
        (
            format!("{head}A: attach 2 -> r\nbarrier\nB: put B r[0] = 1\n"),
            "s.rma:4:10: region r is the memory of rank A (attached at line 2), not of rank B",
        ),
        (
            format!("{head}A: attach 2 -> r\nbarrier\nB: store r[0] = 1\n"),
            "s.rma:4:10: region r is the memory of rank A",
        ),
        (
            format!("{head}A: attach 2 -> r\nbarrier\nB: detach r\n"),
            "s.rma:4:11: region r is the memory of rank A (attached at line 2): only it detaches it",
        ),
        (
            format!("{head}A: detach r\n"),
            "s.rma:2:11: no region r is attached before this line",
        ),
        (
            format!("{head}A: attach 2 -> r\nB: attach 2 -> r\n"),
            "s.rma:3:16: region r is attached at line 2 already",
        ),
        (
            format!("{head}A: attach 2 -> W\n"),
            "s.rma:2:16: W is already declared",
        ),
        (
            format!("{head}A: attach two -> r\n"),
            "s.rma:2:11: expected a number of elements, found \"two\"",
        ),
        (
            format!("{head}A: attach 2 -> r\nexpect public B r[0] == 1\n"),
            "s.rma:3:17: region r is the memory of rank A (attached at line 2), not of rank B",
        ),
        (
            format!("{head}A: crash\nA: attach 2 -> r\n"),
            "s.rma:3:4: rank 0 crashed at line 2: only `attach` (without arguments) may follow",
        ),
    ];
    let server = Server::start();
    for (text, message) in cases {
        let out = run(&server, &text, &[]);
        out.code(2);
        assert!(out.stderr.contains(message), "{text:?}: {}", out.stderr);
    }
}

#[test]
fn a_stuck_rank_times_out_and_fails() {
    let text = "window W ranks=2 size=1 type=i64\nA: post {B}\nA: wait\n";
    let out = run(&Server::start(), text, &["--timeout", "1"]);
    out.code(1)
        .stdout_has("rank 0 did not finish within 1s: stuck at line 3");
}

#[test]
fn parse_errors_exit_2_with_line_and_column() {
    let server = Server::start();
    let cases = [
        (
            "window W ranks=2 size=1 type=i65\n",
            "s.rma:1:30: unknown type \"i65\"",
        ),
        (
            "window W ranks=2 size=1 type=i64\nA: get B W[0] -> \n",
            "s.rma:2:18: expected a variable after `->`",
        ),
        (
            "window W ranks=2 size=1 type=i64\n\nC: fence\n",
            "s.rma:3:1: rank C is outside the world of 2 ranks",
        ),
        (
            "window W ranks=2 size=1 type=i64\nA: put B W[0] = 1,x\n",
            "s.rma:2:19: invalid value \"x\" for datatype i64",
        ),
        (
            "window W ranks=2 size=1 type=i64\nA: frob\n",
            "s.rma:2:4: unknown call \"frob\"",
        ),
        (
            "window W ranks=2 size=1 type=i64\nexpect A nothing == 1\n",
            "s.rma:2:10: rank A never assigns a variable nothing",
        ),
        (
            "window W ranks=2 size=1 type=i64\nA: fence !NOPE\n",
            "s.rma:2:10: unknown error class \"NOPE\"",
        ),
    ];
    for (text, message) in cases {
        let out = run(&server, text, &[]);
        out.code(2);
        assert!(out.stderr.contains(message), "{text:?}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1);
    }
    let missing = server.cli().words("run /nonexistent/x.rma").run();
    missing.code(2);
}
