//! SECURITY.md: tokens are never logged, by the CLI either. Every command here runs with
//! `RUST_LOG=trace` (and backtraces on), succeeding and failing, with tokens given by
//! `ONESIDED_TOKEN` and by `--token`, right, wrong and in the wrong place; no token it knows of
//! appears in anything it prints.

use crate::{Cli, Output, Server, ADMIN_TOKEN};

/// `out` names none of `secrets`.
#[track_caller]
fn holds_none(what: &str, out: &Output, secrets: &[&str]) {
    for secret in secrets {
        assert!(
            !out.stdout.contains(secret) && !out.stderr.contains(secret),
            "{what} printed a token: {out:#?}"
        );
    }
}

#[test]
fn no_token_reaches_the_clis_output_at_any_log_level() {
    // world create: the one command whose job is to print tokens
    let (server, tokens) = Server::with_window("w", 2, "counters", "--count 4 --type i64");
    let wrong = "wrong-secret-token-0123456789";
    let secrets = [ADMIN_TOKEN, tokens[0].as_str(), tokens[1].as_str(), wrong];
    let verbose = |token: &str| {
        server
            .as_rank(token)
            .env("RUST_LOG", "trace")
            .env("RUST_BACKTRACE", "1")
    };
    let at = ["--world", "w", "--window", "counters", "--target", "1"];
    let put = ["put", "--rank", "0", "--type", "i64", "--disp", "0", "5"];
    let runs: Vec<(&str, Output, Option<i32>)> = vec![
        (
            "world ls",
            verbose(ADMIN_TOKEN).words("world ls").run(),
            Some(0),
        ),
        (
            "a put",
            verbose(&tokens[0]).args(put).args(at).run(),
            Some(0),
        ),
        (
            "a get with --token",
            Cli::new(&server.url)
                .no_token()
                .env("RUST_LOG", "trace")
                .args(["--token", &tokens[1], "get", "--rank", "1", "--type", "i64"])
                .args(at)
                .run(),
            Some(0),
        ),
        (
            "audit log",
            verbose(ADMIN_TOKEN)
                .words("--json audit log w/counters")
                .run(),
            Some(0),
        ),
        (
            "an unknown token",
            verbose(wrong).words("world ls").run(),
            Some(3),
        ),
        (
            "an unknown rank token",
            verbose(wrong).args(put).args(at).run(),
            Some(3),
        ),
        (
            "a rank token on an admin command",
            verbose(&tokens[0]).words("world ls").run(),
            Some(3),
        ),
        (
            "the admin token on a session",
            verbose(ADMIN_TOKEN).args(put).args(at).run(),
            Some(3),
        ),
        (
            "an MPI error",
            verbose(&tokens[0])
                .words("get --rank 0 --type i64 --disp 9")
                .args(at)
                .run(),
            None,
        ),
        (
            "a usage error",
            verbose(&tokens[0]).words("put --bogus").run(),
            Some(2),
        ),
    ];
    for (what, out, code) in &runs {
        if let Some(code) = code {
            out.code(*code);
        } else {
            assert_ne!(out.code, Some(0), "{what}: {out:#?}");
        }
        holds_none(what, out, &secrets);
    }
    // the right and the wrong token really were in use: the answers differ
    assert!(runs[1].1.stderr.is_empty(), "{:#?}", runs[1].1);
    assert_eq!(runs[2].1.stdout.trim(), "5", "{:#?}", runs[2].1);
}
