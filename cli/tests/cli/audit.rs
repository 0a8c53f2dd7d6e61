//! `onesided audit …` against a real server recording into its default SQLite store (and, for
//! verification, into PostgreSQL too): the windows a scenario run recorded, their events
//! gap-free and in order, replay equal to what the scenario expected, verification (also after
//! tampering with one stored row, of the window's chain or of a client's own), rows a client
//! persisted itself shown behind their marker, following live events, the JSON shapes and the
//! exit codes.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use onesided_client::{AuditEvent as Event, AUDIT_DATABASE_URL_ENV};

use crate::store::{on_both_stores, Store};
use crate::{Output, Server, TempDir, ADMIN_TOKEN};

/// Two ranks, two fence epochs: B's store published by the first fence, a put and an
/// accumulate from A in the second.
const SCENARIO: &str = "\
window W ranks=2 size=3 type=i64
B: store W[0] = 5
A: fence
B: fence
A: put B W[1] = 9
A: acc B W[2] op=sum = 3
A: fence
B: fence
expect public B W[0..3] == 5,9,3
expect public A W[0..3] == 0,0,0
";

/// Runs `SCENARIO` with `--audit --json` and returns the recorded window's id once its history
/// is complete (see [`settled`]).
fn recorded_window(server: &Server) -> u64 {
    recorded_window_persisting(server, None)
}

/// [`recorded_window`], the run's sessions writing their own audit events to `database`
/// (`ONESIDED_AUDIT_DATABASE_URL`) when given one.
fn recorded_window_persisting(server: &Server, database: Option<&str>) -> u64 {
    let id = unsettled_window(server, database);
    settled(server, id);
    id
}

/// Follows window `id`'s log until it is complete: the window freed and every session that
/// attached detached (the sessions of a run close as it ends, so their detaches may be
/// recorded just after the `run` process exits). Returns the complete history.
pub(crate) fn settled(server: &Server, id: u64) -> Vec<Value> {
    let mut child = follower(server, &id.to_string());
    let lines = line_reader(child.stdout.take().unwrap());
    let mut events: Vec<Value> = Vec::new();
    loop {
        let count = |kind: &str| events.iter().filter(|e| e["kind"] == kind).count();
        if count("window_freed") == 1 && count("attach") == count("detach") {
            break;
        }
        events.push(next_event(&lines));
    }
    let _ = child.kill();
    let _ = child.wait();
    events
}

/// `onesided audit log WINDOW --follow --json`, its stdout piped.
fn follower(server: &Server, window: &str) -> std::process::Child {
    let cli = server
        .cli()
        .args(["audit", "log", window, "--follow", "--json"]);
    cli.command()
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn unsettled_window(server: &Server, database: Option<&str>) -> u64 {
    let dir = TempDir::new();
    let file = dir.file("fences.rma", SCENARIO);
    let mut cli = server.cli();
    if let Some(database) = database {
        cli = cli.env(AUDIT_DATABASE_URL_ENV, database);
    }
    let out = cli.arg("run").arg(&file).words("--audit --json").run();
    out.success();
    assert_eq!(out.stderr, "", "no warning: the server records");
    let document = out.json();
    let windows = document["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 1, "{document:#}");
    assert_eq!(windows[0]["name"], "W");
    assert_eq!(windows[0], document["runs"][0]["windows"][0]);
    windows[0]["id"].as_u64().unwrap()
}

/// The sequence number of the scenario's put in the log of window `id`.
fn seq_of_the_put(server: &Server, id: &str) -> u64 {
    let events = audit(server, &["log", id, "--json"]).json_lines();
    let put = events
        .iter()
        .find(|e| e["kind"] == "op" && e["event"]["op"] == "put");
    put.unwrap()["seq"].as_u64().unwrap()
}

fn audit(server: &Server, args: &[&str]) -> Output {
    server.cli().arg("audit").args(args).run()
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|event| event["kind"].as_str().unwrap())
        .collect()
}

#[test]
fn ls_lists_the_window_a_run_recorded() {
    let server = Server::start();
    let id = recorded_window(&server);
    let out = audit(&server, &["ls", "--json"]);
    out.success();
    let windows = out.json()["windows"].as_array().unwrap().clone();
    let window = windows.iter().find(|w| w["id"] == id).unwrap();
    assert_eq!(window["name"], "W");
    assert!(
        window["world"].as_str().unwrap().starts_with("run-fences-"),
        "{window}"
    );
    assert!(window["events"].as_u64().unwrap() > 10, "{window}");
    let keys: Vec<&String> = window.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["events", "id", "name", "world"]);

    let text = audit(&server, &["ls"]);
    text.success();
    let mut rows = text.stdout.lines();
    assert!(rows.next().unwrap().contains("EVENTS"));
    let row = rows.next().unwrap();
    assert!(
        row.trim_start().starts_with(&format!("{id} ")) && row.contains(" W "),
        "{row}"
    );
}

#[test]
fn log_prints_every_event_in_order_without_gaps() {
    let server = Server::start();
    let id = recorded_window(&server);
    let listed = audit(&server, &["ls", "--json"]).json();
    let count = listed["windows"][0]["events"].as_u64().unwrap();

    let out = audit(&server, &["log", &id.to_string(), "--json"]);
    out.success();
    let events = out.json_lines();
    assert_eq!(events.len() as u64, count);
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event["seq"], index as u64 + 1, "gap-free from 1: {event}");
        assert_eq!(event["window"], id);
        assert_eq!(
            event["kind"], event["event"]["event"],
            "the body is an object"
        );
        assert!(event["rank"].as_u64().unwrap() < 2);
        assert!(event["incarnation"].is_u64());
        assert!(event["at_ns"].is_u64());
        assert_eq!(event["hash"].as_str().unwrap().len(), 64);
    }
    let kinds = kinds(&events);
    assert_eq!(kinds[0], "window_created");
    assert_eq!(
        events[0]["event"],
        json!({"event": "window_created", "world": events[0]["event"]["world"],
               "name": "W", "sizes": [24, 24], "disp_units": [8, 8],
               "info": {"no_locks": "false", "accumulate_ordering": "rar,raw,war,waw",
                        "accumulate_ops": "same_op_no_op", "same_size": "false",
                        "same_disp_unit": "false", "onesided_element_type": "i64",
                        "mpi_accumulate_granularity": "0"}})
    );
    let first = |kind: &str| {
        kinds
            .iter()
            .position(|k| *k == kind)
            .unwrap_or_else(|| panic!("no {kind} in {kinds:?}"))
    };
    assert!(first("attach") < first("fence_enter"));
    assert!(first("fence_enter") < first("fence_exit"));
    assert!(first("published") < first("op"));
    assert_eq!(kinds.iter().filter(|k| **k == "fence_enter").count(), 4);
    assert_eq!(kinds.iter().filter(|k| **k == "fence_exit").count(), 4);
    // the scenario's put and accumulate (then the gets with which the runner reads the public
    // copies for `expect public`)
    let ops: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "op" && e["event"]["op"] != "get")
        .collect();
    assert_eq!(ops.len(), 2, "{kinds:?}");
    assert_eq!(ops[0]["rank"], 1, "recorded at the target");
    assert_eq!(ops[0]["event"]["op"], "put");
    assert_eq!(ops[0]["event"]["data"], "0900000000000000");
    assert_eq!(ops[1]["event"]["op"], json!({"accumulate": "sum"}));
    assert!(kinds.contains(&"window_freed"), "the run deletes its world");

    // --from, and WORLD/NAME for the id
    let from = audit(&server, &["log", &id.to_string(), "--from", "3", "--json"]);
    from.success();
    assert_eq!(from.json_lines()[..], events[2..]);
    let world = events[0]["event"]["world"].as_str().unwrap();
    let named = audit(&server, &["log", &format!("{world}/W"), "--json"]);
    named.success();
    assert_eq!(named.json_lines(), events);

    // text: a header, then one line per event with seq, rank, kind and the fields
    let text = audit(&server, &["log", &id.to_string()]);
    text.success();
    let rows: Vec<&str> = text.stdout.lines().collect();
    assert!(
        rows[0].contains("SEQ") && rows[0].contains("KIND"),
        "{}",
        rows[0]
    );
    assert_eq!(rows.len() as u64, count + 1);
    assert!(
        rows[1].contains("window_created") && rows[1].contains("sizes=24,24"),
        "{}",
        rows[1]
    );
    let put = rows
        .iter()
        .find(|row| row.contains(" op ") && row.contains("put"))
        .unwrap();
    assert!(
        put.contains("put origin=0 i64 disp=1 bytes=8+8 data=[9]"),
        "{put}"
    );
    assert!(rows
        .iter()
        .any(|row| row.contains("accumulate(sum) origin=0 i64 disp=2 bytes=16+8 data=[3]")));
}

#[test]
fn replay_equals_the_scenarios_public_expectations() {
    let server = Server::start();
    let id = recorded_window(&server);
    let id_text = id.to_string();
    let out = audit(&server, &["replay", &id_text, "--type", "i64", "--json"]);
    out.success();
    let document = out.json();
    let count = audit(&server, &["ls", "--json"]).json()["windows"][0]["events"].clone();
    assert_eq!(document["window"], id);
    assert_eq!(document["at"], count);
    assert_eq!(document["type"], "i64");
    let ranks = document["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2);
    assert_eq!(ranks[0]["values"], json!([0, 0, 0]));
    assert_eq!(
        ranks[1]["values"],
        json!([5, 9, 3]),
        "expect public B W[0..3]"
    );
    assert_eq!(ranks[1]["rank"], 1);
    assert_eq!(ranks[1]["size"], 24);
    assert_eq!(ranks[1]["disp_unit"], 8);
    assert_eq!(
        ranks[1]["bytes"],
        "050000000000000009000000000000000300000000000000"
    );

    let text = audit(&server, &["replay", &id_text, "--type", "i64"]);
    text.success();
    assert_eq!(
        text.stdout,
        format!("window {id} after seq {count}\nrank 0: 0 0 0\nrank 1: 5 9 3\n")
    );

    // without a type: hex, one group per disp_unit
    let raw = audit(&server, &["replay", &id_text]);
    raw.success();
    raw.stdout_has("rank 1: 0500000000000000 0900000000000000 0300000000000000\n");
    assert!(
        audit(&server, &["replay", &id_text, "--json"]).json()["ranks"][1]
            .get("values")
            .is_none()
    );

    // at any sequence number: right after the creation nothing is there yet; right after the
    // put, the put and the publication are, the accumulate is not
    let at_one = audit(
        &server,
        &["replay", &id_text, "--at", "1", "--type", "i64", "--json"],
    );
    at_one.success();
    assert_eq!(at_one.json()["ranks"][1]["values"], json!([0, 0, 0]));
    let put = seq_of_the_put(&server, &id_text);
    let at_put = audit(
        &server,
        &[
            "replay",
            &id_text,
            "--at",
            &put.to_string(),
            "--type",
            "i64",
            "--json",
        ],
    );
    at_put.success();
    assert_eq!(at_put.json()["at"], put);
    assert_eq!(at_put.json()["ranks"][1]["values"], json!([5, 9, 0]));
}

/// Changes the event `seq` of the window in the store, wherever it keeps it (its row, or its
/// entry in a group: SQLite's default), hashes left as they were.
fn tamper(store: &Store, server: &Server, window: u64, seq: u64, change: impl FnOnce(&mut Event)) {
    store.rewrite_window_event(server, window, seq, change);
}

fn verify_exits_0_when_intact_and_1_naming_the_changed_row(store: Store) {
    let server = store.server();
    let id = recorded_window(&server);
    let id_text = id.to_string();
    let intact = audit(&server, &["verify", &id_text]);
    intact.success();
    intact.stdout_has("intact");
    let count = audit(&server, &["log", &id_text, "--json"])
        .json_lines()
        .len() as u64;
    let document = audit(&server, &["verify", &id_text, "--json"]).json();
    assert_eq!(
        document,
        json!({"window": id, "events": count, "client_events": 0, "intact": true,
               "first_bad": null, "client_break": null, "pending": [], "unmarked": []})
    );

    // rewrite the put's data in the stored row: 9 becomes 10
    let put = seq_of_the_put(&server, &id_text);
    tamper(&store, &server, id, put, |event| match event {
        Event::Op { data, .. } => {
            assert_eq!(*data, 9i64.to_le_bytes());
            *data = 10i64.to_le_bytes().to_vec();
        }
        other => panic!("not the put: {other:?}"),
    });

    let broken = audit(&server, &["verify", &id_text]);
    broken.code(1).stdout_has(&format!("broken at seq {put}"));
    let document = audit(&server, &["verify", &id_text, "--json"]);
    document.code(1);
    assert_eq!(
        document.json(),
        json!({"window": id, "events": count, "client_events": 0, "intact": false,
               "first_bad": put, "client_break": null, "pending": [], "unmarked": []})
    );
    // the log shows what is stored now, the lie included
    let changed = audit(&server, &["log", &id_text, "--json"]).json_lines();
    assert_eq!(
        changed[put as usize - 1]["event"]["data"],
        "0a00000000000000"
    );
}

on_both_stores!(verify_exits_0_when_intact_and_1_naming_the_changed_row);

/// The scenario run with its sessions writing their own events: the log shows each marker
/// followed by the rows it names (SEQ:CSEQ), replay is what the scenario expected, verify
/// checks the client rows too and names a changed one.
fn client_rows_behind_their_markers(store: Store) {
    let server = store.server();
    let database = store.url(&server);
    let id = recorded_window_persisting(&server, Some(&database));
    let id_text = id.to_string();

    let events = audit(&server, &["log", &id_text, "--json"]).json_lines();
    let window_rows: Vec<&Value> = events.iter().filter(|e| e["cseq"].is_null()).collect();
    for (index, event) in window_rows.iter().enumerate() {
        assert_eq!(
            event["seq"],
            index as u64 + 1,
            "the window's chain is gap-free"
        );
    }
    let client_rows: Vec<&Value> = events.iter().filter(|e| e["cseq"].is_u64()).collect();
    assert!(!client_rows.is_empty(), "{events:#?}");
    // every client row follows the marker that names it, in cseq order, and no client kind is
    // in the window's own chain
    let mut marker: Option<&Value> = None;
    for event in events.iter() {
        if event["cseq"].is_null() {
            assert!(
                !["store", "load", "returned", "flush_local"]
                    .contains(&event["kind"].as_str().unwrap()),
                "shipped, not persisted: {event}"
            );
            marker = (event["kind"] == "client_events").then_some(event);
            continue;
        }
        let named = marker.expect("a client row behind its marker");
        assert_eq!(event["seq"], named["seq"], "{event}");
        assert_eq!(event["rank"], named["rank"]);
        assert_eq!(event["incarnation"], named["incarnation"]);
        let cseq = event["cseq"].as_u64().unwrap();
        let range = &named["event"];
        assert!(
            range["from"].as_u64().unwrap() <= cseq && cseq <= range["to"].as_u64().unwrap(),
            "{event} / {named}"
        );
        assert_eq!(event["kind"], event["event"]["event"]);
    }
    // B's store, published by the first fence
    let store_row = client_rows
        .iter()
        .find(|e| e["kind"] == "store")
        .expect("B's store");
    assert_eq!(store_row["rank"], 1);
    assert_eq!(store_row["event"]["ranges"], json!([[0, 8]]));
    let place = format!("{}:{}", store_row["seq"], store_row["cseq"]);
    let text = audit(&server, &["log", &id_text]);
    text.success();
    assert!(
        text.stdout
            .lines()
            .any(|row| row.trim_start().starts_with(&format!("{place} ")) && row.contains("store")),
        "{}",
        text.stdout
    );

    let replay = audit(&server, &["replay", &id_text, "--type", "i64", "--json"]);
    replay.success();
    assert_eq!(replay.json()["ranks"][1]["values"], json!([5, 9, 3]));

    let intact = audit(&server, &["verify", &id_text, "--json"]);
    intact.success();
    let document = intact.json();
    assert_eq!(document["intact"], true, "{document:#}");
    assert_eq!(document["client_events"], client_rows.len() as u64);
    assert_eq!(document["unmarked"], json!([]), "every session closed");
    assert_eq!(document["pending"], json!([]));

    // change B's store in its client row: the window's chain is intact, the client's is not
    store.rewrite_event(
        &server,
        "client_events",
        "window_id = $1 AND rank = $2 AND incarnation = $3 AND cseq = $4",
        &[
            id as i64,
            1,
            store_row["incarnation"].as_i64().unwrap(),
            store_row["cseq"].as_i64().unwrap(),
        ],
        |event| match event {
            Event::Store { ranges } => {
                assert_eq!(*ranges, [(0, 8)]);
                *ranges = vec![(0, 16)];
            }
            other => panic!("not B's store: {other:?}"),
        },
    );
    let broken = audit(&server, &["verify", &id_text]);
    broken.code(1);
    let expected = format!(
        "broken at seq {}: the client rows of rank 1 incarnation {} it names are broken at \
         cseq {} (the row was changed",
        store_row["seq"], store_row["incarnation"], store_row["cseq"]
    );
    broken.stdout_has(&expected);
    let document = audit(&server, &["verify", &id_text, "--json"]);
    document.code(1);
    let document = document.json();
    assert_eq!(document["first_bad"], store_row["seq"]);
    assert_eq!(
        document["client_break"],
        json!({"rank": 1, "incarnation": store_row["incarnation"],
               "cseq": store_row["cseq"], "fault": "altered"})
    );
}

on_both_stores!(client_rows_behind_their_markers);

/// Reads `child`'s stdout lines on a thread; the receiver gets each line.
fn line_reader(stdout: std::process::ChildStdout) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// The next JSON line, within a bound (a stuck follower fails the test instead of hanging it).
fn next_event(lines: &mpsc::Receiver<String>) -> Value {
    let line = lines
        .recv_timeout(Duration::from_secs(30))
        .expect("the follower printed nothing within 30 s");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// A one-shot command ends its session cleanly once its own rows are in: three `put --lock
/// exclusive` leave three `returned` rows of their unlocks (the client records those, and
/// ships them with its next call — a command has none, so its close must), and no session of
/// theirs `departed` (what the server records for a stream that broke).
#[test]
fn one_shot_commands_close_their_sessions_after_their_rows() {
    let (server, tokens) = Server::with_window("w", 2, "W", "--count 2 --type i64");
    for value in ["1", "2", "3"] {
        server
            .as_rank(&tokens[1])
            .words("put --world w --window W --target 0")
            .args(["--lock", "exclusive", value])
            .run()
            .success();
    }
    // every session's detach is in the log once its departure was handled, broken or not
    // (a broken stream's after the process exited): the history is complete then
    let mut child = follower(&server, "w/W");
    let lines = line_reader(child.stdout.take().unwrap());
    let mut events: Vec<Value> = Vec::new();
    let count = |events: &[Value], kind: &str| events.iter().filter(|e| e["kind"] == kind).count();
    while count(&events, "attach") < 3 || count(&events, "detach") < 3 {
        events.push(next_event(&lines));
    }
    let _ = child.kill();
    let _ = child.wait();
    let unlocks = events
        .iter()
        .filter(|e| e["kind"] == "returned" && e["event"]["call"] == "unlock")
        .count();
    assert_eq!(unlocks, 3, "{events:#?}");
    assert_eq!(count(&events, "departed"), 0, "{events:#?}");
}

#[test]
fn log_follow_prints_events_recorded_after_it_started() {
    let (server, tokens) = Server::with_window("w", 1, "W", "--count 2 --type i64");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (session, window) = server.attach_on(&runtime, &tokens[0], "W");
    runtime.block_on(window.fence(0)).unwrap();
    let before = audit(&server, &["log", "w/W", "--json"]).json_lines();
    assert_eq!(kinds(&before)[..2], ["window_created", "attach"]);

    let mut child = follower(&server, "w/W");
    let lines = line_reader(child.stdout.take().unwrap());
    // first what was there: once the last of it is printed, the follower is subscribed
    for expected in &before {
        assert_eq!(&next_event(&lines), expected);
    }
    // then a new epoch, driven through the library while it follows
    runtime.block_on(async {
        window.put(0, 1, &[42i64]).unwrap();
        window.fence(0).await.unwrap();
    });
    let mut seen = Vec::new();
    let mut next_seq = before.len() as u64 + 1;
    while !seen.iter().any(|e: &Value| e["kind"] == "fence_exit") {
        let event = next_event(&lines);
        assert_eq!(event["seq"], next_seq, "live events without gaps");
        next_seq += 1;
        seen.push(event);
    }
    let _ = child.kill();
    let _ = child.wait();
    let kinds = kinds(&seen);
    assert!(kinds.contains(&"fence_enter"), "{kinds:?}");
    let op = seen.iter().find(|e| e["kind"] == "op").expect("the put");
    assert_eq!(op["event"]["data"], "2a00000000000000");
    drop(window);
    drop(session);
}

#[test]
fn exit_codes_and_refusals() {
    let server = Server::start();
    let id = recorded_window(&server).to_string();
    // usage: a window that is neither an id nor WORLD/NAME, a bad type, --at 0, no token
    audit(&server, &["log", "nothing"]).code(2);
    audit(&server, &["replay", &id, "--type", "complex"]).code(2);
    audit(&server, &["replay", &id, "--at", "0"]).code(2);
    audit(&server, &["verify"]).code(2);
    let out = server.cli().no_token().words("audit ls").run();
    out.code(2).stderr_has("ONESIDED_TOKEN");
    // a type that does not divide a copy is a usage error too (a window of 5 bytes, recorded
    // from its creation on)
    server.world("w", 1);
    server.window("w", "B", "--size 5");
    let bytes = audit(&server, &["replay", "w/B", "--type", "u8"]);
    bytes.success();
    assert!(
        bytes.stdout.ends_with("rank 0: 0 0 0 0 0\n"),
        "{}",
        bytes.stdout
    );
    let odd = audit(&server, &["replay", "w/B", "--type", "i16"]);
    odd.code(2).stderr_has("5 bytes");
    // refusals: an unknown window, an unknown name, a wrong token
    let missing = audit(&server, &["verify", "999999"]);
    missing.code(3).stderr_has("999999");
    audit(&server, &["replay", "999999"]).code(3);
    audit(&server, &["log", "nowhere/W"]).code(3);
    server.as_rank("wrong").words("audit ls").run().code(3);
    // unreachable
    crate::Cli::new("http://127.0.0.1:1")
        .token(ADMIN_TOKEN)
        .words("audit ls")
        .run()
        .code(4);
}

#[test]
fn a_server_that_records_nothing() {
    let server = Server::start_with(|config| {
        config.durability = onesided_server::audit::Durability::Off;
    });
    let out = audit(&server, &["ls"]);
    out.code(3).stderr_has("off");
    // run --audit still reports the ids, and warns that they lead nowhere
    let dir = TempDir::new();
    let file = dir.file("s.rma", "window W ranks=1 size=1 type=u8\nA: fence\n");
    let run = server
        .cli()
        .arg("run")
        .arg(&file)
        .words("--audit --json")
        .run();
    run.success();
    assert_eq!(run.json()["windows"][0]["name"], "W");
    run.stderr_has("warning");
}
