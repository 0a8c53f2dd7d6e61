//! `--connect-timeout` and `--timeout` against servers that never answer (issue 17): the
//! command gives up within its bound, exit 4, and says which limit it hit. And what the timeout
//! must not do: cut a call that legitimately waits for another rank (a queued lock).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::{Cli, Follower, Output, Server, ADMIN_TOKEN};

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
                .words("--timeout 1")
                .args(args),
        );
        out.code(4);
        assert!(out.stderr.contains("within 1s"), "{args:?}: {}", out.stderr);
        assert!(took >= Duration::from_secs(1), "{args:?}: {took:?}");
        assert!(took < GIVES_UP_WITHIN, "{args:?}: {took:?}");
    }
    drop(silent);
}

/// Issue 44: a server whose kernel accepts connections while it is paused (SIGSTOP) is cut by
/// `--connect-timeout`, and named as such, not left to the call's 30 s.
#[test]
fn a_paused_server_is_cut_by_the_connect_timeout() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    cut_by_the_connect_timeout(&url, "no answer", Duration::from_secs(10));
    drop(silent);
}

/// `world ls` against `url` with a connect timeout of 0.5 s: exit 4 after the 0.5 s and
/// before `bound`, saying it could not connect for want of `what` within it.
#[track_caller]
fn cut_by_the_connect_timeout(url: &str, what: &str, bound: Duration) {
    let (out, took) = timed(
        Cli::new(url)
            .token("some-token")
            .env("ONESIDED_CONNECT_TIMEOUT", "0.5")
            .words("world ls"),
    );
    out.code(4)
        .stderr_has(&format!("cannot connect to {url}: {what} within 0.5s"));
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < bound, "{took:?}");
}

/// Issue 44: an address without a scheme is a configuration mistake, said as such.
#[test]
fn an_address_without_a_scheme_is_refused_as_such() {
    let out = Cli::new("127.0.0.1:50051")
        .token("some-token")
        .words("world ls")
        .run();
    out.code(2)
        .stderr_has("must start with http:// or https://");
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
    cut_by_the_connect_timeout(&url, "no connection", GIVES_UP_WITHIN);
}

#[test]
fn timeouts_must_be_positive_numbers_of_seconds() {
    for bad in ["0", "-1", "soon", "NaN"] {
        for flag in ["--timeout", "--connect-timeout"] {
            let out = Cli::new("http://127.0.0.1:1")
                .arg(format!("{flag}={bad}"))
                .words("world ls")
                .run();
            out.code(2);
            assert!(out.stderr.contains(flag), "{flag} {bad}: {}", out.stderr);
        }
    }
}

#[test]
fn a_lock_wait_longer_than_the_timeout_is_not_cut() {
    use futures::StreamExt;
    use onesided_client::{Audit, AuditEvent, LockType};

    let (server, tokens) = Server::with_window("wait", 2, "W", "--count 1 --type i64");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // rank 0 holds an exclusive lock on its own window and writes 42 under it
    let (holder, window) = server.attach_on(&runtime, &tokens[0], "W");
    runtime.block_on(async {
        window.lock(LockType::Exclusive, 0, 0).await.unwrap();
        window.put(0, 0, &[42i64]).unwrap();
    });
    // rank 1 reads it with a 1 s timeout: its shared lock must wait behind rank 0's
    let reader = server
        .as_rank(&tokens[1])
        .words("--timeout 1")
        .words("get --window W --target 0");
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
    waiting.join().unwrap().prints("42\n");
    assert!(started.elapsed() > Duration::from_secs(2));
}

/// A TCP proxy to `upstream` that can be frozen: from then on it forwards nothing, in either
/// direction, and keeps every connection open — a server that went silent without closing.
/// Dropping it closes every connection (the server's shutdown waits for its connections).
struct FreezableProxy {
    addr: SocketAddr,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
    connections: std::sync::Arc<std::sync::Mutex<Vec<TcpStream>>>,
}

impl Drop for FreezableProxy {
    fn drop(&mut self) {
        let connections = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        for connection in connections.iter() {
            let _ = connection.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl FreezableProxy {
    fn new(upstream: &str) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let upstream: SocketAddr = upstream.trim_start_matches("http://").parse().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let frozen = Arc::new(AtomicBool::new(false));
        let forwarding = Arc::clone(&frozen);
        let connections = Arc::new(std::sync::Mutex::new(Vec::new()));
        let opened = Arc::clone(&connections);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(upstream) else {
                    return;
                };
                if let Ok(mut opened) = opened.lock() {
                    opened.extend(client.try_clone().ok());
                    opened.extend(server.try_clone().ok());
                }
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let frozen = Arc::clone(&forwarding);
                    std::thread::spawn(move || {
                        use std::io::{Read, Write};
                        let mut buffer = [0u8; 16 * 1024];
                        while let Ok(read) = from.read(&mut buffer) {
                            if read == 0 {
                                break;
                            }
                            // frozen: read and drop, so nothing arrives and nothing closes
                            if !frozen.load(Ordering::SeqCst)
                                && to.write_all(&buffer[..read]).is_err()
                            {
                                break;
                            }
                        }
                    });
                }
            }
        });
        FreezableProxy {
            addr,
            frozen,
            connections,
        }
    }

    fn freeze(&self) {
        self.frozen.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_follower_notices_a_server_that_went_silent() {
    let (server, _) = Server::with_window("s", 1, "W", "--count 1 --type i64");
    let proxy = FreezableProxy::new(&server.url);
    let mut follower = Follower::spawn(
        Cli::new(&format!("http://{}", proxy.addr))
            .token(ADMIN_TOKEN)
            .words("--timeout 1 audit log s/W --follow"),
    );
    // the header and the creation event: the follower is live, then waits for new events
    follower.read_lines(2);
    proxy.freeze();
    let started = Instant::now();
    // silent for the ping interval (1 s, the timeout), then 1 s without an answer to the ping
    let (code, stderr) =
        follower.exit_within(GIVES_UP_WITHIN, "the follower gives up on a silent server");
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stderr.starts_with("onesided: "), "{stderr}");
    // issue 44: named as the silent server it may be, not only as an HTTP/2 protocol error
    assert!(
        stderr.contains(&format!("no answer from http://{} within 1s", proxy.addr)),
        "{stderr}"
    );
    assert!(started.elapsed() < GIVES_UP_WITHIN);
}
