//! A reader that stops early (`onesided … | head -1`): the command ends quietly with status
//! 0, no panic, nothing on stderr (issue 17).

use std::process::Command;
use std::time::Duration;

use crate::{Follower, Server};

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
    let (server, _) = Server::with_window("p", 1, "W", "--count 2 --type i64");
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
        let command = server.cli().args(args).command();
        let (code, stderr) = run_into_closed_pipe(command);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
}

#[test]
fn a_follower_whose_reader_left_exits_quietly_at_the_next_event() {
    let (server, tokens) = Server::with_window("f", 1, "W", "--count 2 --type i64");
    let mut follower = Follower::spawn(server.cli().words("audit log f/W --follow"));
    // read the header and the creation event, then leave, as `| head -2` does
    follower.read_lines(2);
    follower.close_stdout();
    // a new event: the follower writes it into the closed pipe
    server
        .as_rank(&tokens[0])
        .words("put --window W --target 0 --type i64 7")
        .run()
        .success();
    let (code, stderr) = follower.exit_within(
        Duration::from_secs(30),
        "the follower ends at its next write",
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, "");
}
