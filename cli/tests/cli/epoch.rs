//! One-shot epochs: typed values in and out, JSON, the lock choice, file transfers in chunks,
//! and the exit code and message of an MPI error.

use crate::{Output, Server, TempDir};

/// World `w` of three ranks with the window `counters` of four i64 each.
struct Counters {
    server: Server,
    tokens: Vec<String>,
}

/// Where the one-shot commands of these tests go.
const AT: &str = "--world w --window counters --target 0";

impl Counters {
    fn new() -> Self {
        let (server, tokens) = Server::with_window("w", 3, "counters", "--count 4 --type i64");
        Counters { server, tokens }
    }

    /// `onesided WORDS` with rank `rank`'s token.
    fn rank(&self, rank: usize, words: &str) -> Output {
        self.server.as_rank(&self.tokens[rank]).words(words).run()
    }

    /// `onesided OP --world w --window counters --target 0 ARGS` with rank `rank`'s token.
    fn at_0(&self, rank: usize, op: &str, args: &str) -> Output {
        self.rank(rank, &format!("{op} {AT} {args}"))
    }

    /// [`Counters::at_0`] exits 0 and prints exactly `expected`.
    #[track_caller]
    fn prints(&self, rank: usize, op: &str, args: &str, expected: &str) {
        self.at_0(rank, op, args).prints(expected);
    }
}

#[test]
fn put_get_acc_fop_cas_round_trip() {
    let counters = Counters::new();
    counters.prints(1, "put", "--rank 1 --type i64 --disp 1 5 -7 9", "");

    counters.prints(2, "get", "--type i64 --count 4", "0 5 -7 9\n");

    let acc = "--rank 2 --disp 1 --type i64 --op sum 10 --lock shared";
    counters.at_0(2, "acc", acc).success();

    let fop = counters.at_0(0, "--json fop", "--disp 1 --type i64 --op sum 1");
    fop.success();
    assert_eq!(fop.json(), serde_json::json!({"target": 0, "old": 15}));

    counters.prints(0, "fop", "--disp 1 --type i64 --op no_op", "16\n");

    counters.prints(0, "cas", "--disp 2 --type i64 --compare -7 100", "-7\n");
    let missed = counters.at_0(0, "cas", "--disp 2 --type i64 --compare -7 200");
    assert_eq!(missed.stdout, "100\n");

    let json = counters.at_0(0, "get --json", "--type i64 --count 4");
    assert_eq!(
        json.json(),
        serde_json::json!({"target": 0, "values": [0, 16, 100, 9]})
    );
}

#[test]
fn mpi_errors_exit_3_with_the_class_first() {
    let counters = Counters::new();
    let out = counters.at_0(1, "get", "--type i64 --disp 3 --count 2");
    out.code(3).stderr_starts("onesided: MPI_ERR_RMA_RANGE: ");
    assert_eq!(out.stderr.lines().count(), 1);

    let op = counters.at_0(1, "acc", "--type f64 --op band 1");
    op.code(3).stderr_starts("onesided: MPI_ERR_OP: ");

    let rank = "get --world w --window counters --target 7 --type i64";
    counters
        .rank(1, rank)
        .code(3)
        .stderr_starts("onesided: MPI_ERR_RANK: ");

    let window = "get --window nope --target 0 --type i64";
    counters
        .rank(1, window)
        .code(3)
        .stderr_starts("onesided: MPI_ERR_WIN: ");
}

#[test]
fn the_token_decides_the_rank() {
    let counters = Counters::new();
    let wrong = counters.at_0(1, "get", "--rank 2 --type i64");
    wrong
        .code(2)
        .stderr_has("the token belongs to rank 1, not 2");
    let world = "get --world other --window counters --target 0 --type i64";
    counters.rank(1, world).code(2);
    let value = counters.at_0(1, "put", "--type u8 300");
    value
        .code(2)
        .stderr_has("invalid value \"300\" for datatype u8");
    let bad_token = counters.server.as_rank("nobody").words("get").words(AT);
    bad_token.words("--type i64").run().code(3);
}

#[test]
fn files_travel_in_chunks_inside_one_epoch() {
    let server = Server::start();
    let tokens = server.world("f", 2);
    let created = server.window("f", "blob", "--json --size 100000 --disp-unit 4");
    let id = created.json()["id"].as_u64().unwrap().to_string();
    let dir = TempDir::new();
    let data: Vec<u8> = (0..40_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let source = dir.0.join("in.bin");
    std::fs::write(&source, &data).unwrap();
    // `onesided OP --window blob --target 1 ARGS PATH` with rank `rank`'s token
    let on_blob = |rank: usize, op: &str, args: &str, path: &std::path::Path| {
        let cli = server.as_rank(&tokens[rank]).words(op);
        cli.words("--window blob --target 1")
            .words(args)
            .arg(path)
            .run()
    };
    let chunks = "--disp 10 --chunk 4096 --from-file";
    let put = on_blob(0, "--json put", chunks, &source);
    put.success();
    assert_eq!(put.json()["bytes"], 40_000);
    // ten puts of at most 4096 bytes, all under the one lock the put took: each carries the
    // fencing token of the only grant rank 0 had, and the release follows the last of them
    let log = server.cli().args(["audit", "log", &id, "--json"]).run();
    log.success();
    let events = log.json_lines();
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
    let chunks = "--disp 10 --count 40000 --chunk 3000 --to-file";
    let get = on_blob(1, "get", chunks, &target);
    get.success();
    assert_eq!(get.stderr, "", "no progress bar without a terminal");
    assert_eq!(std::fs::read(&target).unwrap(), data);

    // the displacement is in disp_units: 10 × 4 bytes
    let head = server
        .as_rank(&tokens[1])
        .words("get --window blob --target 1 --disp 10 --type u8 --count 3")
        .run();
    assert_eq!(
        head.stdout,
        format!("{} {} {}\n", data[0], data[1], data[2])
    );

    // bytes 80000.. of the window cannot take the 40000 of the file; its first chunks would
    // fit, and none of them may be written: the whole transfer is refused before any is sent
    let too_big = on_blob(0, "put", "--disp 20000 --chunk 4096 --from-file", &source);
    too_big
        .code(3)
        .stderr_starts("onesided: MPI_ERR_RMA_RANGE: ");
    let tail = dir.0.join("tail.bin");
    on_blob(1, "get", "--disp 10 --count 99960 --to-file", &tail).success();
    let after = std::fs::read(&tail).unwrap();
    assert_eq!(after[..40_000], data[..], "the earlier put is intact");
    let written = after[40_000..].iter().filter(|&&byte| byte != 0).count();
    assert_eq!(written, 0, "the refused put wrote {written} bytes");
}

#[test]
fn busy_polling_epochs_give_the_same_answers_and_bad_budgets_are_usage_errors() {
    let counters = Counters::new();
    let put = counters.at_0(1, "--busy-poll 500 put", "--rank 1 --type i64 3 4");
    put.success();
    let got = counters
        .server
        .as_rank(&counters.tokens[2])
        .env("ONESIDED_BUSY_POLL", "1000")
        .words("get")
        .words(AT)
        .words("--type i64 --count 4")
        .run();
    got.success();
    assert_eq!(got.stdout, "3 4 0 0\n");
    for bad in ["-1", "0.5", "soon", "1000001"] {
        let flag = format!("--busy-poll={bad}");
        let out = counters.at_0(2, "get", &format!("--type i64 --count 1 {flag}"));
        out.code(2);
        assert!(out.stderr.contains("--busy-poll"), "{bad}: {}", out.stderr);
    }
}
