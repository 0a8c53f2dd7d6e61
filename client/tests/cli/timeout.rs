//! `--connect-timeout` and `--timeout` against servers that never answer (issue 17): the
//! command gives up within its bound, exit 4, and says which limit it hit. And what the timeout
//! must not do: cut a call that legitimately waits for another rank (a queued lock).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::{Cli, Output, Server, ADMIN_TOKEN};

/// A bound no correct run comes near, far below what waiting for the server would take.
const GIVES_UP_WITHIN: Duration = Duration::from_secs(15);

/// Runs `cli` and returns its output and how long it took.
fn timed(cli: Cli) -> (Output, Duration) {
    let started = Instant::now();
    let out = cli.run();
    (out, started.elapsed())
}

#[test]
fn a_server_that_accepts_and_never_speaks_times_out_every_kind_of_call() {
    // the kernel completes TCP handshakes for it; nobody ever reads or writes
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let scenario = crate::examples_dir().join("forum3_store_before_shared_lock.rma");
    let scenario = scenario.to_str().unwrap();
    let calls: [&[&str]; 4] = [
        // a unary admin call
        &["world", "ls"],
        // attaching a session (rank token: any string, the server never reads it)
        &["get", "--window", "W", "--target", "0", "--type", "i64"],
        // opening the events stream that would then follow
        &["audit", "log", "1", "--follow"],
        // a scenario run's set-up
        &["run", scenario],
    ];
    for args in calls {
        let (out, took) = timed(
            Cli::new(&url)
                .token("some-token")
                .args(["--timeout", "1"])
                .args(args),
        );
        out.code(4);
        assert!(out.stderr.contains("within 1s"), "{args:?}: {}", out.stderr);
        assert!(took >= Duration::from_secs(1), "{args:?}: {took:?}");
        assert!(took < GIVES_UP_WITHIN, "{args:?}: {took:?}");
    }
    drop(silent);
}

/// A listener whose accept queue is full: the kernel drops further connection attempts, so
/// a client's TCP connect hangs (SYN retransmits) instead of completing or being refused.
struct FullBacklog {
    addr: SocketAddr,
    _listener: tokio::net::TcpListener,
    _queued: Vec<TcpStream>,
    _runtime: tokio::runtime::Runtime,
}

impl FullBacklog {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        let listener = runtime.block_on(async {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
            socket.listen(1).unwrap()
        });
        let addr = listener.local_addr().unwrap();
        let mut queued = Vec::new();
        for _ in 0..16 {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
                Ok(stream) => queued.push(stream),
                Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {
                    return FullBacklog {
                        addr,
                        _listener: listener,
                        _queued: queued,
                        _runtime: runtime,
                    };
                }
                Err(error) => panic!("filling the accept queue: {error}"),
            }
        }
        panic!("16 connections never filled an accept queue of 1");
    }
}

#[test]
fn a_connection_that_never_completes_hits_the_connect_timeout() {
    let full = FullBacklog::new();
    let url = format!("http://{}", full.addr);
    let (out, took) = timed(
        Cli::new(&url)
            .token("some-token")
            .env("ONESIDED_CONNECT_TIMEOUT", "0.5")
            .args(["world", "ls"]),
    );
    out.code(4);
    assert!(
        out.stderr.contains(&format!(
            "cannot connect to {url}: no connection within 0.5s"
        )),
        "{}",
        out.stderr
    );
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < GIVES_UP_WITHIN, "{took:?}");
}

#[test]
fn timeouts_must_be_positive_numbers_of_seconds() {
    for bad in ["0", "-1", "soon", "NaN"] {
        for flag in ["--timeout", "--connect-timeout"] {
            let out = Cli::new("http://127.0.0.1:1")
                .arg(format!("{flag}={bad}"))
                .args(["world", "ls"])
                .run();
            out.code(2);
            assert!(out.stderr.contains(flag), "{flag} {bad}: {}", out.stderr);
        }
    }
}

#[test]
fn a_lock_wait_longer_than_the_timeout_is_not_cut() {
    use futures::StreamExt;
    use onesided_client::{Audit, AuditEvent, LockType, Session};

    let server = Server::start();
    let tokens = server.world("wait", 2);
    server
        .cli()
        .args([
            "window", "create", "--world", "wait", "W", "--count", "1", "--type", "i64",
        ])
        .run()
        .success();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // rank 0 holds an exclusive lock on its own window and writes 42 under it
    let (holder, window) = runtime.block_on(async {
        let holder = Session::attach(&server.url, &tokens[0]).await.unwrap();
        let window = holder.window("W").await.unwrap();
        window.lock(LockType::Exclusive, 0, 0).await.unwrap();
        window.put(0, 0, &[42i64]).unwrap();
        (holder, window)
    });
    // rank 1 reads it with a 1 s timeout: its shared lock must wait behind rank 0's
    let reader = Cli::new(&server.url)
        .token(&tokens[1])
        .args(["--timeout", "1"])
        .args(["get", "--window", "W", "--target", "0"]);
    let started = Instant::now();
    let waiting = std::thread::spawn(move || reader.run());
    // once the target has queued rank 1's request (the audit log records it) ...
    runtime.block_on(async {
        let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
        let id = audit
            .windows()
            .await
            .unwrap()
            .iter()
            .find(|w| w.world == "wait" && w.name == "W")
            .unwrap()
            .id;
        let mut events = Box::pin(audit.follow(id, 1).await.unwrap());
        let queued = async {
            while let Some(entry) = events.next().await {
                if let Some(AuditEvent::LockRequest { origin: 1, .. }) = entry.unwrap().event {
                    return;
                }
            }
            panic!("the log ended before rank 1's lock request");
        };
        tokio::time::timeout(GIVES_UP_WITHIN, queued)
            .await
            .expect("rank 1's lock request reaches the target");
    });
    // ... it keeps waiting well past --timeout: that is the point of this test, not a race
    std::thread::sleep(Duration::from_secs(2));
    assert!(!waiting.is_finished(), "the get waits for the lock");
    runtime.block_on(async {
        window.unlock(0).await.unwrap();
        drop(window);
        holder.close().await.unwrap();
    });
    let out = waiting.join().unwrap();
    out.success();
    assert_eq!(out.stdout, "42\n");
    assert!(started.elapsed() > Duration::from_secs(2));
}
