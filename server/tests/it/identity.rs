//! Identity through the real binary: tokens never reach its log, at any level, whether they
//! are right, wrong or used in the wrong place; the limit flags reach the server.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use onesided_client::{Admin, ErrorClass, LockType, Session, WindowSpec};
use tonic::Code;

use crate::{unique, TempDir};

/// The binary, started with `RUST_LOG=trace`; everything it prints is collected.
struct Binary {
    child: std::process::Child,
    url: String,
    output: Vec<std::thread::JoinHandle<String>>,
}

impl Binary {
    fn start(data: &TempDir, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_onesided-server"))
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data.0)
            .args(extra)
            .env("RUST_LOG", "trace")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (listening, address) = std::sync::mpsc::channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let collect_stdout = std::thread::spawn(move || {
            let mut text = String::new();
            for line in stdout.lines().map_while(Result::ok) {
                if let Some(rest) = line.split("address=").nth(1) {
                    let _ = listening.send(rest.split_whitespace().next().unwrap().to_string());
                }
                text.push_str(&line);
                text.push('\n');
            }
            text
        });
        let collect_stderr = std::thread::spawn(move || {
            stderr
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<_>>()
                .join("\n")
        });
        let address = address.recv().expect("the server exited before listening");
        Binary {
            child,
            url: format!("http://{address}"),
            output: vec![collect_stdout, collect_stderr],
        }
    }

    /// Kills it and returns everything it printed.
    fn stop(mut self) -> String {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.output
            .into_iter()
            .map(|collect| collect.join().unwrap())
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_is_ever_logged() {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-bin")));
    let admin_token = format!("admin-secret-{}", unique("t"));
    let binary = Binary::start(
        &data,
        &["--admin-token", &admin_token, "--max-ranks-per-world", "2"],
    );
    let url = binary.url.clone();
    let admin = Admin::connect(&url, &admin_token).await.unwrap();
    let world = admin.create_world("w", 2).await.unwrap();
    admin
        .create_window("w", &WindowSpec::of::<i64>("x", 2, 1))
        .await
        .unwrap();
    // the flag reached the server
    let big = admin.create_world("big", 3).await.unwrap_err();
    assert_eq!(
        (big.code(), big.class()),
        (Code::ResourceExhausted, Some(ErrorClass::NoMem))
    );
    let session = Session::attach(&url, &world.tokens[0]).await.unwrap();
    let window = session.window("x").await.unwrap();
    window.lock(LockType::Exclusive, 1, 0).await.unwrap();
    window.put(1, 0, &[5i64]).unwrap();
    window.unlock(1).await.unwrap();
    let wrong = format!("wrong-secret-{}", unique("t"));
    // each refusal has its one right code: an unknown token is UNAUTHENTICATED, a valid one
    // in the wrong place PERMISSION_DENIED
    let refusals = [
        (
            "an unknown rank token",
            Session::attach(&url, &wrong).await.map(|_| ()),
            Code::Unauthenticated,
        ),
        (
            "the admin token on the Rma service",
            Session::attach(&url, &admin_token).await.map(|_| ()),
            Code::PermissionDenied,
        ),
        (
            "an unknown admin token",
            Admin::connect(&url, &wrong)
                .await
                .unwrap()
                .list_worlds()
                .await
                .map(|_| ()),
            Code::Unauthenticated,
        ),
        (
            "a rank token on the Admin service",
            Admin::connect(&url, &world.tokens[1])
                .await
                .unwrap()
                .list_worlds()
                .await
                .map(|_| ()),
            Code::PermissionDenied,
        ),
    ];
    for (what, refusal, code) in refusals {
        let error = refusal.expect_err(what);
        assert_eq!(error.code(), code, "{what}: {error}");
    }
    drop(window);
    drop(session);
    let text = binary.stop();
    assert!(
        text.contains("session attached"),
        "the log is at trace level"
    );
    let secrets = [&admin_token, &wrong, &world.tokens[0], &world.tokens[1]];
    for secret in secrets {
        assert!(!text.contains(secret.as_str()), "a token is in the log");
    }
}
