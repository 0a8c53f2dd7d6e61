//! One-shot epochs: typed values in and out, JSON, the lock choice, file transfers in chunks,
//! and the exit code and message of an MPI error.

use crate::{Server, TempDir};

fn setup(server: &Server) -> Vec<String> {
    let tokens = server.world("w", 3);
    server
        .cli()
        .args([
            "window", "create", "--world", "w", "counters", "--count", "4", "--type", "i64",
        ])
        .run()
        .success();
    tokens
}

fn as_rank<'a>(
    server: &Server,
    token: &str,
    args: impl IntoIterator<Item = &'a str>,
) -> crate::Output {
    crate::Cli::new(&server.url).token(token).args(args).run()
}

const AT: [&str; 6] = ["--world", "w", "--window", "counters", "--target", "0"];

#[test]
fn put_get_acc_fop_cas_round_trip() {
    let server = Server::start();
    let tokens = setup(&server);
    let put = as_rank(
        &server,
        &tokens[1],
        ["put"].into_iter().chain(AT).chain([
            "--rank", "1", "--type", "i64", "--disp", "1", "5", "-7", "9",
        ]),
    );
    put.success();
    assert_eq!(put.stdout, "");

    let got = as_rank(
        &server,
        &tokens[2],
        ["get"]
            .into_iter()
            .chain(AT)
            .chain(["--type", "i64", "--count", "4"]),
    );
    got.success();
    assert_eq!(got.stdout, "0 5 -7 9\n");

    let acc = as_rank(
        &server,
        &tokens[2],
        ["acc"].into_iter().chain(AT).chain([
            "--rank", "2", "--disp", "1", "--type", "i64", "--op", "sum", "10", "--lock", "shared",
        ]),
    );
    acc.success();

    let fop = as_rank(
        &server,
        &tokens[0],
        ["--json", "fop"]
            .into_iter()
            .chain(AT)
            .chain(["--disp", "1", "--type", "i64", "--op", "sum", "1"]),
    );
    fop.success();
    assert_eq!(fop.json(), serde_json::json!({"target": 0, "old": 15}));

    let read = as_rank(
        &server,
        &tokens[0],
        ["fop"]
            .into_iter()
            .chain(AT)
            .chain(["--disp", "1", "--type", "i64", "--op", "no_op"]),
    );
    read.success();
    assert_eq!(read.stdout, "16\n");

    let cas = as_rank(
        &server,
        &tokens[0],
        ["cas"].into_iter().chain(AT).chain([
            "--disp",
            "2",
            "--type",
            "i64",
            "--compare",
            "-7",
            "100",
        ]),
    );
    cas.success();
    assert_eq!(cas.stdout, "-7\n");
    let missed = as_rank(
        &server,
        &tokens[0],
        ["cas"].into_iter().chain(AT).chain([
            "--disp",
            "2",
            "--type",
            "i64",
            "--compare",
            "-7",
            "200",
        ]),
    );
    assert_eq!(missed.stdout, "100\n");

    let json = as_rank(
        &server,
        &tokens[0],
        ["get", "--json"]
            .into_iter()
            .chain(AT)
            .chain(["--type", "i64", "--count", "4"]),
    );
    assert_eq!(
        json.json(),
        serde_json::json!({"target": 0, "values": [0, 16, 100, 9]})
    );
}

#[test]
fn mpi_errors_exit_3_with_the_class_first() {
    let server = Server::start();
    let tokens = setup(&server);
    let out = as_rank(
        &server,
        &tokens[1],
        ["get"]
            .into_iter()
            .chain(AT)
            .chain(["--type", "i64", "--disp", "3", "--count", "2"]),
    );
    out.code(3);
    assert!(
        out.stderr.starts_with("onesided: MPI_ERR_RMA_RANGE: "),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.lines().count(), 1);

    let op = as_rank(
        &server,
        &tokens[1],
        ["acc"]
            .into_iter()
            .chain(AT)
            .chain(["--type", "f64", "--op", "band", "1"]),
    );
    op.code(3);
    assert!(
        op.stderr.starts_with("onesided: MPI_ERR_OP: "),
        "{}",
        op.stderr
    );

    let rank = as_rank(
        &server,
        &tokens[1],
        [
            "get", "--world", "w", "--window", "counters", "--target", "7", "--type", "i64",
        ],
    );
    rank.code(3);
    assert!(
        rank.stderr.starts_with("onesided: MPI_ERR_RANK: "),
        "{}",
        rank.stderr
    );

    let window = as_rank(
        &server,
        &tokens[1],
        ["get", "--window", "nope", "--target", "0", "--type", "i64"],
    );
    window.code(3);
    assert!(
        window.stderr.starts_with("onesided: MPI_ERR_WIN: "),
        "{}",
        window.stderr
    );
}

#[test]
fn the_token_decides_the_rank() {
    let server = Server::start();
    let tokens = setup(&server);
    let wrong = as_rank(
        &server,
        &tokens[1],
        ["get"]
            .into_iter()
            .chain(AT)
            .chain(["--rank", "2", "--type", "i64"]),
    );
    wrong.code(2);
    assert!(
        wrong.stderr.contains("the token belongs to rank 1, not 2"),
        "{}",
        wrong.stderr
    );
    let world = as_rank(
        &server,
        &tokens[1],
        [
            "get", "--world", "other", "--window", "counters", "--target", "0", "--type", "i64",
        ],
    );
    world.code(2);
    let value = as_rank(
        &server,
        &tokens[1],
        ["put"].into_iter().chain(AT).chain(["--type", "u8", "300"]),
    );
    value.code(2);
    assert!(
        value
            .stderr
            .contains("invalid value \"300\" for datatype u8"),
        "{}",
        value.stderr
    );
    let bad_token = as_rank(
        &server,
        "nobody",
        ["get"].into_iter().chain(AT).chain(["--type", "i64"]),
    );
    bad_token.code(3);
}

#[test]
fn files_travel_in_chunks_inside_one_epoch() {
    let server = Server::start();
    let tokens = server.world("f", 2);
    let created = server
        .cli()
        .args([
            "--json",
            "window",
            "create",
            "--world",
            "f",
            "blob",
            "--size",
            "100000",
            "--disp-unit",
            "4",
        ])
        .run();
    created.success();
    let id = created.json()["id"].as_u64().unwrap().to_string();
    let dir = TempDir::new();
    let data: Vec<u8> = (0..40_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let source = dir.0.join("in.bin");
    std::fs::write(&source, &data).unwrap();
    let put = crate::Cli::new(&server.url)
        .token(&tokens[0])
        .args([
            "--json",
            "put",
            "--window",
            "blob",
            "--target",
            "1",
            "--disp",
            "10",
            "--chunk",
            "4096",
            "--from-file",
        ])
        .arg(&source)
        .run();
    put.success();
    assert_eq!(put.json()["bytes"], 40_000);
    // ten puts of at most 4096 bytes, all under the one lock the put took: each carries the
    // fencing token of the only grant rank 0 had, and the release follows the last of them
    let log = server.cli().args(["audit", "log", &id, "--json"]).run();
    log.success();
    let events: Vec<serde_json::Value> = log
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let by_rank_0 = |kind: &str| -> Vec<(usize, &serde_json::Value)> {
        events
            .iter()
            .enumerate()
            .filter(|(_, e)| e["kind"] == kind && e["event"]["origin"] == 0)
            .collect()
    };
    let grants = by_rank_0("lock_grant");
    let releases = by_rank_0("lock_release");
    let puts = by_rank_0("op");
    assert_eq!(grants.len(), 1, "one epoch: {}", log.stdout);
    assert_eq!(releases.len(), 1, "one epoch: {}", log.stdout);
    let token = &grants[0].1["event"]["token"];
    assert_eq!(puts.len(), 10, "in chunks: {}", log.stdout);
    for (index, (at, put)) in puts.iter().enumerate() {
        assert_eq!(put["event"]["op"], "put", "{put}");
        assert_eq!(put["event"]["disp"], 10 + index as u64 * 1024, "{put}");
        assert_eq!(&put["event"]["token"], token, "{put}");
        assert!(grants[0].0 < *at && *at < releases[0].0, "{put}");
    }

    let target = dir.0.join("out.bin");
    let get = crate::Cli::new(&server.url)
        .token(&tokens[1])
        .args([
            "get",
            "--window",
            "blob",
            "--target",
            "1",
            "--disp",
            "10",
            "--count",
            "40000",
            "--chunk",
            "3000",
            "--to-file",
        ])
        .arg(&target)
        .run();
    get.success();
    assert_eq!(get.stderr, "", "no progress bar without a terminal");
    assert_eq!(std::fs::read(&target).unwrap(), data);

    // the displacement is in disp_units: 10 × 4 bytes
    let head = crate::Cli::new(&server.url)
        .token(&tokens[1])
        .args([
            "get", "--window", "blob", "--target", "1", "--disp", "10", "--type", "u8", "--count",
            "3",
        ])
        .run();
    assert_eq!(
        head.stdout,
        format!("{} {} {}\n", data[0], data[1], data[2])
    );

    // bytes 80000.. of the window cannot take the 40000 of the file; its first chunks would
    // fit, and none of them may be written: the whole transfer is refused before any is sent
    let too_big = crate::Cli::new(&server.url)
        .token(&tokens[0])
        .args([
            "put",
            "--window",
            "blob",
            "--target",
            "1",
            "--disp",
            "20000",
            "--chunk",
            "4096",
            "--from-file",
        ])
        .arg(&source)
        .run();
    too_big.code(3);
    assert!(
        too_big.stderr.starts_with("onesided: MPI_ERR_RMA_RANGE: "),
        "{}",
        too_big.stderr
    );
    let tail = dir.0.join("tail.bin");
    crate::Cli::new(&server.url)
        .token(&tokens[1])
        .args([
            "get",
            "--window",
            "blob",
            "--target",
            "1",
            "--disp",
            "10",
            "--count",
            "99960",
            "--to-file",
        ])
        .arg(&tail)
        .run()
        .success();
    let after = std::fs::read(&tail).unwrap();
    assert_eq!(after[..40_000], data[..], "the earlier put is intact");
    let written = after[40_000..].iter().filter(|&&byte| byte != 0).count();
    assert_eq!(written, 0, "the refused put wrote {written} bytes");
}

#[test]
fn busy_polling_epochs_give_the_same_answers_and_bad_budgets_are_usage_errors() {
    let server = Server::start();
    let tokens = setup(&server);
    let put = as_rank(
        &server,
        &tokens[1],
        ["--busy-poll", "500", "put"]
            .into_iter()
            .chain(AT)
            .chain(["--rank", "1", "--type", "i64", "3", "4"]),
    );
    put.success();
    let got = crate::Cli::new(&server.url)
        .token(&tokens[2])
        .env("ONESIDED_BUSY_POLL", "1000")
        .args(
            ["get"]
                .into_iter()
                .chain(AT)
                .chain(["--type", "i64", "--count", "4"]),
        )
        .run();
    got.success();
    assert_eq!(got.stdout, "3 4 0 0\n");
    for bad in ["-1", "0.5", "soon", "1000001"] {
        let flag = format!("--busy-poll={bad}");
        let out = as_rank(
            &server,
            &tokens[2],
            ["get"]
                .into_iter()
                .chain(AT)
                .chain(["--type", "i64", "--count", "1", flag.as_str()]),
        );
        out.code(2);
        assert!(out.stderr.contains("--busy-poll"), "{bad}: {}", out.stderr);
    }
}
