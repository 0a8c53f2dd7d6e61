//! `world` and `window`: every subcommand, text and JSON, and the exit codes of refusals.

use crate::{Cli, Server};

#[test]
fn world_create_ls_rm() {
    let server = Server::start();
    let out = server.cli().words("world create w1 --ranks 3").run();
    out.success();
    out.stdout_starts("world w1 with 3 ranks\n");
    assert_eq!(
        out.stdout
            .lines()
            .filter(|l| l.starts_with("rank "))
            .count(),
        3
    );

    let tokens = server.world("w2", 2);
    assert_eq!(tokens.len(), 2);
    assert_ne!(tokens[0], tokens[1]);

    let listed = server.cli().words("world ls --json").run();
    listed.success();
    let worlds = listed.json()["worlds"].as_array().unwrap().clone();
    let w1 = worlds.iter().find(|w| w["name"] == "w1").unwrap();
    assert_eq!(w1["ranks"], 3);
    assert_eq!(w1["windows"], 0);
    assert!(worlds.iter().any(|w| w["name"] == "w2"));

    let text = server.cli().words("world ls").run();
    text.success();
    text.has_row("w1 ", " 3 ");

    server.cli().words("world rm w1").run().success();
    let after = server.cli().words("--json world ls").run();
    let names: Vec<String> = after.json()["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["w2"]);
}

#[test]
fn window_create_ls_show_free() {
    let server = Server::start();
    server.world("w", 2);
    let counters = "--json --count 4 --type i64 --info no_locks=false";
    let created = server.window("w", "counters", counters);
    let desc = created.json();
    assert_eq!(desc["name"], "counters");
    assert_eq!(desc["sizes"], serde_json::json!([32, 32]));
    assert_eq!(desc["disp_units"], serde_json::json!([8, 8]));
    assert_eq!(desc["flavor"], "allocate");

    server.window("w", "bytes", "--size 16,0 --flavor create");

    let listed = server.cli().words("--json window ls --world w").run();
    listed.success();
    let windows = listed.json()["windows"].as_array().unwrap().clone();
    assert_eq!(windows.len(), 2);
    let bytes = windows.iter().find(|w| w["name"] == "bytes").unwrap();
    assert_eq!(bytes["sizes"], serde_json::json!([16, 0]));
    assert_eq!(bytes["disp_units"], serde_json::json!([1, 1]));
    assert_eq!(bytes["flavor"], "create");

    let text = server.cli().words("window ls --world w").run();
    text.success();
    text.has_row("counters", "32,32");

    let shown = server.cli().words("window show --world w counters").run();
    shown.success();
    shown.stdout_has("sizes:      32,32");
    assert!(shown.stdout.contains("disp_units: 8,8"));

    server
        .cli()
        .words("window free --world w counters")
        .run()
        .success();
    let gone = server.cli().words("window show --world w counters").run();
    gone.code(3).stderr_starts("onesided: MPI_ERR_WIN: ");
    assert_eq!(gone.stderr.lines().count(), 1);
}

#[test]
fn refusals_exit_3_with_one_line() {
    let server = Server::start();
    server.world("taken", 1);
    let twice = server.cli().words("world create taken --ranks 1").run();
    twice.code(3);
    assert!(twice.stderr.starts_with("onesided: "));
    assert_eq!(twice.stderr.lines().count(), 1);

    let bad_size = server
        .cli()
        .words("window create --world taken w --size 8 --disp-unit 0")
        .run();
    bad_size.code(3).stderr_starts("onesided: MPI_ERR_DISP: ");

    let wrong_token = server.cli().token("not-the-admin").words("world ls").run();
    wrong_token.code(3);
}

#[test]
fn usage_errors_exit_2() {
    let server = Server::start();
    server.cli().words("world create x").run().code(2);
    server.cli().args(["frobnicate"]).run().code(2);
    let no_token = server.cli().no_token().words("world ls").run();
    no_token.code(2).stderr_has("ONESIDED_TOKEN");
    server.world("w", 2);
    let sizes = server
        .cli()
        .words("window create --world w x --size 1,2,3")
        .run();
    sizes.code(2);
    assert!(sizes
        .stderr
        .contains("3 values of --size for a world of 2 ranks"));
}

/// `--flavor dynamic`: no memory and disp_unit 1 by default, whatever the element type; a
/// size or another disp_unit is the server's refusal (exit 3), and nothing is created.
#[test]
fn dynamic_windows_are_created_without_memory() {
    let server = Server::start();
    server.world("w", 2);
    let created = server.window("w", "d", "--json --flavor dynamic --type i64");
    let desc = created.json();
    assert_eq!(desc["flavor"], "dynamic", "{desc:#}");
    assert_eq!(desc["sizes"], serde_json::json!([0, 0]));
    assert_eq!(desc["disp_units"], serde_json::json!([1, 1]));
    for (extra, class) in [
        (["--size", "8"], "MPI_ERR_SIZE"),
        (["--disp-unit", "8"], "MPI_ERR_DISP"),
    ] {
        let refused = server
            .cli()
            .words("window create --world w e --flavor dynamic")
            .args(extra)
            .run();
        refused.code(3).stderr_has(class);
    }
    let listed = server.cli().words("--json window ls --world w").run();
    listed.success();
    let document = listed.json();
    let names: Vec<&str> = document["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|window| window["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["d"]);
    // the other flavors still need a size
    let sizeless = server.cli().words("window create --world w f").run();
    sizeless.code(2).stderr_has("give --size or --count");
}

#[test]
fn an_unreachable_server_exits_4() {
    // a socket bound but never listening: the port stays ours for the whole test (no other
    // process can take it, as it could once a listener was dropped), and connecting to it is
    // refused
    let bound = tokio::net::TcpSocket::new_v4().unwrap();
    bound.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = bound.local_addr().unwrap().port();
    let out = Cli::new(&format!("http://127.0.0.1:{port}"))
        .token("t")
        .words("world ls")
        .run();
    out.code(4).stderr_starts("onesided: cannot connect to ");
    drop(bound);
}

/// With `--json`, a failure is one JSON object on stderr: the message, the MPI error class
/// (when there is one) and the exit code; without it, the plain sentence as before.
#[test]
fn json_errors_are_json_on_stderr() {
    let server = Server::start();
    let tokens = server.world("jerr", 2);
    let refused = server
        .cli()
        .token(&tokens[0])
        .words("--json get --window nosuch --target 1")
        .run();
    assert_ne!(refused.code, Some(0), "{refused:?}");
    let error: serde_json::Value = serde_json::from_str(refused.stderr.trim())
        .unwrap_or_else(|e| panic!("stderr is not JSON ({e}): {}", refused.stderr));
    assert_eq!(error["error"]["exit_code"], refused.code.unwrap());
    assert!(
        error["error"]["class"]
            .as_str()
            .is_some_and(|class| class.starts_with("MPI_ERR_")),
        "{error}"
    );
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("nosuch")),
        "{error}"
    );

    let unreachable = Cli::new("http://127.0.0.1:1")
        .token("an-admin-token-nobody-checks")
        .words("--json world ls")
        .run();
    unreachable.code(4);
    let error: serde_json::Value = serde_json::from_str(unreachable.stderr.trim())
        .unwrap_or_else(|e| panic!("stderr is not JSON ({e}): {}", unreachable.stderr));
    assert_eq!(error["error"]["exit_code"], 4);
    assert!(error["error"]["class"].is_null(), "{error}");

    let plain = Cli::new("http://127.0.0.1:1")
        .token("an-admin-token-nobody-checks")
        .words("world ls")
        .run();
    plain.stderr_starts("onesided: ");
}

/// An operator's actions on a rank's session: `window revoke-locks` and `world end-session`,
/// text and JSON, shown by `audit log`, and their refusals.
#[test]
fn revoke_locks_and_end_session_are_audited() {
    let (server, tokens) = Server::with_window("w", 2, "W", "--count 1 --type i64");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (_owner, _) = server.attach_on(&runtime, &tokens[0], "W");
    let (_holder, window) = server.attach_on(&runtime, &tokens[1], "W");
    runtime.block_on(async {
        window
            .lock(onesided_client::LockType::Exclusive, 0, 0)
            .await
            .unwrap();
        window.put(0, 0, &[5i64]).unwrap();
        window.flush(0).await.unwrap();
    });
    let revoked = server
        .cli()
        .words("--json window revoke-locks --world w W --rank 1")
        .run();
    revoked.success();
    assert_eq!(revoked.json()["targets"], serde_json::json!([0]));
    assert_eq!(revoked.json()["incarnation"], 1);
    // nothing held any more: refused, saying so
    let again = server
        .cli()
        .words("window revoke-locks --world w W --rank 1")
        .run();
    again
        .code(3)
        .stderr_has("MPI_ERR_RMA_SYNC")
        .stderr_has("holds no lock");
    let error = runtime.block_on(window.unlock(0)).unwrap_err();
    assert!(
        error.to_string().contains("revoked by an operator"),
        "{error}"
    );

    let ended = server.cli().words("world end-session w --rank 0").run();
    ended
        .success()
        .prints("ended session 1 of rank 0 of world w\n");
    let not_attached = server.cli().words("world end-session w --rank 0").run();
    not_attached.code(3).stderr_has("has no session");
    let outside = server.cli().words("world end-session w --rank 5").run();
    outside.code(3).stderr_has("MPI_ERR_RANK");

    let log = server.cli().words("audit log w/W --json").run();
    log.success();
    let actions: Vec<(u64, String)> = log
        .json_lines()
        .iter()
        .filter(|event| event["kind"] == "admin")
        .map(|event| {
            (
                event["rank"].as_u64().unwrap(),
                event["event"]["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            (1, "revoke_locks".to_string()),
            (0, "end_session".to_string())
        ]
    );
    let text = server.cli().words("audit log w/W").run();
    text.success()
        .stdout_has("admin")
        .stdout_has("revoke_locks");
}
