//! A client process that dies (kill -9) or freezes (SIGSTOP) while holding an exclusive lock:
//! another client gets the lock within two leases and sees the dead one's flushed writes.

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use crate::{unique, Server};

fn signal(child: &std::process::Child, name: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{name} failed");
}

/// A child process killed on drop: a holder left frozen by a failed assertion would keep its
/// connection, and with it the server's graceful stop (and so the test), waiting forever.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Rank 0's shell takes rank 1's exclusive lock, writes 42 and flushes; once it printed the
/// flushed value, it gets `signal_name`; the server must revoke its lock, for `reason`, within
/// two leases of its last recorded event, and rank 2 then lock, read 42 and unlock.
fn holder_gets(signal_name: &str, reason: &str) {
    let lease = Duration::from_secs(2);
    let server = Server::start_with(|config| config.lease_ttl = lease);
    let world = unique("dying");
    let tokens = server.world(&world, 3);
    let created = server.window(&world, "W", "--json --count 1 --type i64");
    let id = created.json()["id"].as_u64().unwrap().to_string();
    let mut holder = KillOnDrop(
        server
            .as_rank(&tokens[0])
            .args(["shell", "--world", &world, "--rank", "0"])
            .spawn(),
    );
    let mut input = holder.0.stdin.take().unwrap();
    input
        .write_all(b"open W\nlock exclusive 1\nput 1 W[0] = 42\nflush 1\nget 1 W[0] -> x\nflush 1\nprint x\n")
        .unwrap();
    input.flush().unwrap();
    let mut output = BufReader::new(holder.0.stdout.take().unwrap());
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
    signal(&holder.0, signal_name);
    let reader = server
        .as_rank(&tokens[2])
        .args(["shell", "--world", &world, "--rank", "2"])
        .stdin("open W\nlock exclusive 1\nget 1 W[0] -> y\nunlock 1\nprint y\n")
        .run();
    // the dead holder's flushed write
    reader.success().prints_line("y = 42");
    // timed by the server's own clock in the audit log, not around spawning processes: from
    // the holder's last recorded event to the revocation of its lock
    let log = server.cli().args(["audit", "log", &id, "--json"]).run();
    log.success();
    let events = log.json_lines();
    let revoked = events
        .iter()
        .position(|e| e["kind"] == "lock_revoke" && e["event"]["origin"] == 0)
        .unwrap_or_else(|| panic!("no lock_revoke of rank 0: {}", log.stdout));
    assert_eq!(events[revoked]["event"]["reason"], reason, "{}", log.stdout);
    let by_holder = |e: &&serde_json::Value| {
        e["event"]["origin"] == 0 || (e["rank"] == 0 && e["kind"] != "lock_revoke")
    };
    let last_alive = events[..revoked]
        .iter()
        .filter(by_holder)
        .map(|e| e["at_ns"].as_u64().unwrap())
        .max()
        .unwrap();
    let took = Duration::from_nanos(events[revoked]["at_ns"].as_u64().unwrap() - last_alive);
    assert!(
        took < 2 * lease,
        "the lock was revoked {took:?} after the holder's last event, more than two leases of \
         {lease:?}"
    );
    assert!(
        events[revoked..]
            .iter()
            .any(|e| e["kind"] == "lock_grant" && e["event"]["origin"] == 2),
        "the reader's lock came after the revocation: {}",
        log.stdout
    );
    drop(input);
    drop(holder);
}

#[test]
fn a_killed_lock_holder_loses_the_lock_within_two_leases() {
    holder_gets("KILL", "stream broke");
}

#[test]
fn a_frozen_lock_holder_loses_the_lock_when_its_lease_lapses() {
    holder_gets("STOP", "lease lapsed");
}
