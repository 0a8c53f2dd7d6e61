//! A reader that stops early (`onesided … | head -1`): the command ends quietly with status
//! 0, no panic, nothing on stderr (issue 17).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::{Server, ADMIN_TOKEN};

/// `onesided` with the admin token, its stderr piped, its stdout not set yet.
fn onesided(url: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_onesided"));
    command
        .env_clear()
        .env("ONESIDED_ADDR", url)
        .env("ONESIDED_TOKEN", ADMIN_TOKEN)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Runs `command` with stdout a pipe whose reader is already gone, so its first write fails:
/// returns the exit code and stderr.
fn run_into_closed_pipe(mut command: Command) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = command.stdout(writer).output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_closed_pipe_ends_every_printing_command_quietly() {
    let server = Server::start();
    server.world("p", 1);
    server
        .cli()
        .args([
            "window", "create", "--world", "p", "W", "--count", "2", "--type", "i64",
        ])
        .run()
        .success();
    let commands: [&[&str]; 7] = [
        &["completions", "bash"],
        &["world", "ls"],
        &["window", "ls", "--world", "p"],
        &["audit", "ls"],
        &["audit", "log", "p/W"],
        &["--json", "audit", "log", "p/W"],
        &["audit", "export", "p/W", "--format", "perfetto"],
    ];
    for args in commands {
        let (code, stderr) = run_into_closed_pipe(onesided(&server.url, args));
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
}

#[test]
fn a_follower_whose_reader_left_exits_quietly_at_the_next_event() {
    let server = Server::start();
    let tokens = server.world("f", 1);
    server
        .cli()
        .args([
            "window", "create", "--world", "f", "W", "--count", "2", "--type", "i64",
        ])
        .run()
        .success();
    let mut follower = onesided(&server.url, &["audit", "log", "f/W", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // read the header and the creation event, then leave, as `| head -2` does
    let mut stdout = BufReader::new(follower.stdout.take().unwrap());
    for _ in 0..2 {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the follower printed its first lines");
    }
    drop(stdout);
    // a new event: the follower writes it into the closed pipe
    server
        .cli()
        .token(&tokens[0])
        .args([
            "put", "--window", "W", "--target", "0", "--type", "i64", "7",
        ])
        .run()
        .success();
    let mut stderr = follower.stderr.take().unwrap();
    let (sender, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        let _ = sender.send((follower.wait().unwrap().code(), text));
    });
    let (code, stderr) = exited
        .recv_timeout(Duration::from_secs(30))
        .expect("the follower ends at its next write");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, "");
}
