//! The `--help` text is part of the interface: a checked-in snapshot, compared verbatim.
//! `UPDATE_SNAPSHOTS=1 cargo test` rewrites it.

use std::path::Path;

use crate::Cli;

fn snapshot(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cli/snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_SNAPSHOTS=1 writes it)", path.display()));
    assert_eq!(
        actual,
        expected,
        "{} changed (UPDATE_SNAPSHOTS=1 rewrites it)",
        path.display()
    );
}

#[test]
fn help_matches_the_snapshot() {
    let out = Cli::new("http://127.0.0.1:1").args(["--help"]).run();
    out.success();
    assert!(out.stdout.contains("Exit codes:"));
    snapshot("help.txt", &out.stdout);
    let run = Cli::new("http://127.0.0.1:1").words("run --help").run();
    run.success();
    snapshot("run-help.txt", &run.stdout);
    let explore = Cli::new("http://127.0.0.1:1").words("explore --help").run();
    explore.success();
    snapshot("explore-help.txt", &explore.stdout);
    let audit = Cli::new("http://127.0.0.1:1").words("audit --help").run();
    audit.success();
    snapshot("audit-help.txt", &audit.stdout);
    for command in ["ls", "log", "replay", "check", "verify", "export"] {
        let sub = Cli::new("http://127.0.0.1:1")
            .args(["audit", command, "--help"])
            .run();
        sub.success();
        snapshot(&format!("audit-{command}-help.txt"), &sub.stdout);
    }
}

#[test]
fn help_hides_the_token() {
    let out = Cli::new("http://127.0.0.1:1")
        .token("secret-token-value")
        .words("get --help")
        .run();
    out.success();
    assert!(!out.stdout.contains("secret-token-value"));
    out.stdout_has("[env: ONESIDED_TOKEN]");
    // `run` takes the admin token from its own variable: hidden too
    let out = Cli::new("http://127.0.0.1:1")
        .env("ONESIDED_ADMIN_TOKEN", "secret-admin-value")
        .words("run --help")
        .run();
    out.success();
    assert!(!out.stdout.contains("secret-admin-value"), "{}", out.stdout);
    out.stdout_has("[env: ONESIDED_ADMIN_TOKEN]");
}

#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = Cli::new("http://127.0.0.1:1")
            .args(["completions", shell])
            .run();
        out.success();
        assert!(out.stdout.contains("onesided"), "{shell}");
        assert!(
            out.stdout.contains("window"),
            "{shell}: subcommands are completed"
        );
    }
    Cli::new("http://127.0.0.1:1")
        .words("completions tcsh")
        .run()
        .code(2);
}
