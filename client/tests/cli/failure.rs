//! A client process that dies (kill -9) or freezes (SIGSTOP) while holding an exclusive lock:
//! another client gets the lock within two leases and sees the dead one's flushed writes.

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use crate::{unique, Cli, Server};

fn signal(child: &std::process::Child, name: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{name} failed");
}

/// Rank 0's shell takes rank 1's exclusive lock, writes 42 and flushes; once it printed the
/// flushed value, it gets `signal_name`; rank 2 must then lock, read 42 and unlock within two
/// leases.
fn holder_gets(signal_name: &str) {
    let lease = Duration::from_secs(2);
    let server = Server::start_with(|config| config.lease_ttl = lease);
    let world = unique("dying");
    let tokens = server.world(&world, 3);
    server
        .cli()
        .args([
            "window", "create", "--world", &world, "W", "--count", "1", "--type", "i64",
        ])
        .run()
        .success();
    let mut holder = Cli::new(&server.url)
        .token(&tokens[0])
        .args(["shell", "--world", &world, "--rank", "0"])
        .spawn();
    let mut input = holder.stdin.take().unwrap();
    input
        .write_all(b"open W\nlock exclusive 1\nput 1 W[0] = 42\nflush 1\nget 1 W[0] -> x\nflush 1\nprint x\n")
        .unwrap();
    input.flush().unwrap();
    let mut output = BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            output.read_line(&mut line).unwrap() > 0,
            "the holder's shell ended early"
        );
        if line.trim() == "x = 42" {
            break;
        }
    }
    // the holder's stdin stays open: it would wait for more lines, holding the lock
    signal(&holder, signal_name);
    let started = Instant::now();
    let reader = Cli::new(&server.url)
        .token(&tokens[2])
        .args(["shell", "--world", &world, "--rank", "2"])
        .stdin("open W\nlock exclusive 1\nget 1 W[0] -> y\nunlock 1\nprint y\n")
        .run();
    let took = started.elapsed();
    reader.success();
    assert!(
        reader.stdout.lines().any(|line| line == "y = 42"),
        "the dead holder's flushed write: {}",
        reader.stdout
    );
    assert!(
        took < 2 * lease,
        "the lock came after {took:?}, more than two leases of {lease:?}"
    );
    signal(&holder, "KILL");
    drop(input);
    let _ = holder.wait();
}

#[test]
fn a_killed_lock_holder_loses_the_lock_within_two_leases() {
    holder_gets("KILL");
}

#[test]
fn a_frozen_lock_holder_loses_the_lock_when_its_lease_lapses() {
    holder_gets("STOP");
}
