//! Integration tests of the `onesided` binary: a real server in this process on
//! 127.0.0.1:0, the built binary driven as a user would, its output and exit codes checked.

mod admin;
mod audit;
mod check;
mod cluster;
mod compose;
mod docs;
mod element_type;
mod epoch;
mod examples;
mod explore;
mod failure;
mod help;
mod ls;
mod pipe;
mod progress;
mod readme;
mod scenario;
mod secrets;
mod shell;
mod store;
mod timeout;
mod tls;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use onesided_server::ServerConfig;
use onesided_test_support::in_process::ServedOnThread;

pub const ADMIN_TOKEN: &str = "cli-test-admin-token";

pub use onesided_test_support::{unique, TempDir};

/// A server on its own thread and runtime, stopped and joined on drop. The listener is bound
/// before `start` returns, so clients can connect at once (no readiness sleep).
#[derive(Debug)]
pub struct Server {
    pub url: String,
    // dropped before the data directory: the server stops before its files go
    _served: ServedOnThread,
    data: TempDir,
}

impl Server {
    pub fn start() -> Self {
        Server::start_with(|_| {})
    }

    /// A server with world `world` of `ranks` ranks and in it the window `name` that
    /// `window create` makes of `words`: the server and the world's rank tokens.
    pub fn with_window(world: &str, ranks: u32, name: &str, words: &str) -> (Self, Vec<String>) {
        let server = Server::start();
        let tokens = server.world(world, ranks);
        server.window(world, name, words);
        (server, tokens)
    }

    /// A server whose default configuration (SQLite audit in its data dir, `sync`) `adjust`
    /// changes first.
    pub fn start_with(adjust: impl FnOnce(&mut ServerConfig)) -> Self {
        Self::start_with_url(|config, _| adjust(config))
    }

    /// As [`Server::start_with`], adjusting the configuration once the server's URL is known.
    pub fn start_with_url(adjust: impl FnOnce(&mut ServerConfig, &str)) -> Self {
        let data = TempDir::new();
        let served = ServedOnThread::start_at_url(|url| {
            let mut config = ServerConfig::new(ADMIN_TOKEN, data.0.clone());
            adjust(&mut config, url);
            config
        });
        Server {
            url: served.url.clone(),
            _served: served,
            data,
        }
    }

    /// The server's data directory (its SQLite audit store is `audit.db` inside).
    pub fn data_dir(&self) -> &Path {
        &self.data.0
    }

    /// `onesided` against this server with the admin token.
    pub fn cli(&self) -> Cli {
        self.as_rank(ADMIN_TOKEN)
    }

    /// `onesided` against this server with `token` (a rank's, or any other).
    pub fn as_rank(&self, token: &str) -> Cli {
        Cli::new(&self.url).token(token)
    }

    /// `window create --world WORLD NAME WORDS…` with the admin token, which must succeed.
    pub fn window(&self, world: &str, name: &str, words: &str) -> Output {
        let out = self
            .cli()
            .args(["window", "create", "--world", world, name])
            .words(words)
            .run();
        out.success();
        out
    }

    /// The session of `token`, attached through the library on `runtime`, and its handle of
    /// `window`.
    pub fn attach_on(
        &self,
        runtime: &tokio::runtime::Runtime,
        token: &str,
        window: &str,
    ) -> (onesided_client::Session, onesided_client::Window) {
        runtime.block_on(async {
            let session = onesided_client::Session::attach(&self.url, token)
                .await
                .unwrap();
            let window = session.window(window).await.unwrap();
            (session, window)
        })
    }

    /// Creates a world with the CLI and returns its rank tokens.
    pub fn world(&self, name: &str, ranks: u32) -> Vec<String> {
        let out = self
            .cli()
            .args([
                "--json",
                "world",
                "create",
                name,
                "--ranks",
                &ranks.to_string(),
            ])
            .run();
        out.success();
        tokens(&out.json())
    }
}

/// The rank tokens of `world create --json`'s document.
pub fn tokens(document: &serde_json::Value) -> Vec<String> {
    document["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|token| token.as_str().unwrap().to_string())
        .collect()
}

/// One invocation of the binary.
#[derive(Debug)]
pub struct Cli {
    command: Command,
    stdin: Option<String>,
}

impl Cli {
    pub fn new(url: &str) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_onesided"));
        command
            .env_clear()
            .env("ONESIDED_ADDR", url)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null());
        Cli {
            command,
            stdin: None,
        }
    }

    pub fn token(mut self, token: &str) -> Self {
        self.command.env("ONESIDED_TOKEN", token);
        self
    }

    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    pub fn no_token(mut self) -> Self {
        self.command.env_remove("ONESIDED_TOKEN");
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.command.args(args);
        self
    }

    /// The arguments of `words`, split at white space: `.words("get --window W --target 0")`.
    pub fn words(self, words: &str) -> Self {
        self.args(words.split_whitespace())
    }

    pub fn arg(mut self, arg: impl AsRef<std::ffi::OsStr>) -> Self {
        self.command.arg(arg);
        self
    }

    pub fn stdin(mut self, text: &str) -> Self {
        self.stdin = Some(text.to_string());
        self
    }

    /// Starts the binary with piped stdin and stdout, for a conversation (an interactive
    /// shell the test drives line by line, then kills).
    pub fn spawn(mut self) -> std::process::Child {
        self.command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        self.command.spawn().expect("the binary runs")
    }

    /// The command as configured so far (environment, arguments, stdin closed), for a test that
    /// wires its stdout and stderr itself.
    pub fn command(self) -> Command {
        self.command
    }

    pub fn run(mut self) -> Output {
        use std::io::Write;
        self.command.stdout(Stdio::piped()).stderr(Stdio::piped());
        if self.stdin.is_some() {
            self.command.stdin(Stdio::piped());
        }
        let mut child = self.command.spawn().expect("the binary runs");
        if let Some(text) = self.stdin.take() {
            let mut pipe = child.stdin.take().unwrap();
            pipe.write_all(text.as_bytes()).unwrap();
        }
        let output = child.wait_with_output().unwrap();
        Output {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// A long-running invocation (`audit log --follow`) with its stdout and stderr piped, read
/// by the test as it goes.
#[derive(Debug)]
pub struct Follower {
    child: std::process::Child,
    stdout: Option<std::io::BufReader<std::process::ChildStdout>>,
}

impl Follower {
    pub fn spawn(cli: Cli) -> Self {
        let mut child = cli
            .command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary runs");
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        Follower {
            child,
            stdout: Some(stdout),
        }
    }

    /// Reads `count` lines of stdout, each of which must come (not the end of the stream).
    #[track_caller]
    pub fn read_lines(&mut self, count: usize) {
        use std::io::BufRead;
        let stdout = self.stdout.as_mut().expect("stdout is open");
        for _ in 0..count {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            assert!(!line.is_empty(), "the follower printed its first lines");
        }
    }

    /// Stops reading: the follower's next write goes into a closed pipe.
    pub fn close_stdout(&mut self) {
        self.stdout = None;
    }

    /// The exit code and stderr once the process exits, which it must within `bound` (`what`
    /// says why it should).
    #[track_caller]
    pub fn exit_within(mut self, bound: std::time::Duration, what: &str) -> (Option<i32>, String) {
        let mut stderr = self.child.stderr.take().unwrap();
        let mut child = self.child;
        let (sender, exited) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            let _ = sender.send((child.wait().unwrap().code(), text));
        });
        // stdout stays as it is (read or closed) until the process is gone
        let exit = exited.recv_timeout(bound).expect(what);
        drop(self.stdout);
        exit
    }
}

/// What an invocation did.
#[derive(Debug)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    #[track_caller]
    pub fn code(&self, expected: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(expected),
            "exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    #[track_caller]
    pub fn success(&self) -> &Self {
        self.code(0)
    }

    /// Exit 0, and exactly `expected` on stdout.
    #[track_caller]
    pub fn prints(&self, expected: &str) -> &Self {
        self.success();
        assert_eq!(self.stdout, expected, "stderr:\n{}", self.stderr);
        self
    }

    /// A line of stdout is exactly `line`.
    #[track_caller]
    pub fn prints_line(&self, line: &str) -> &Self {
        let mut lines = self.stdout.lines();
        assert!(
            lines.any(|l| l == line),
            "no line {line:?} in\n{}",
            self.stdout
        );
        self
    }

    /// A line of stdout starts with `start` and holds `part`.
    #[track_caller]
    pub fn has_row(&self, start: &str, part: &str) -> &Self {
        let row = |l: &&str| l.starts_with(start) && l.contains(part);
        assert!(
            self.stdout.lines().any(|l| row(&l)),
            "no line starting {start:?} with {part:?} in\n{}",
            self.stdout
        );
        self
    }

    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }

    /// One JSON document per line of stdout (`audit log --json`, the shell's `--json`).
    #[track_caller]
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: not JSON: {line}"))
            })
            .collect()
    }
}

/// Methods `NAME(needle)` of [`Output`]: its `STREAM` passes `STREAM.TEST(needle)`, or the
/// test fails there, showing the stream.
macro_rules! stream_checks {
    ($($name:ident: $stream:ident, $test:ident;)*) => {$(
        #[track_caller]
        pub fn $name(&self, needle: &str) -> &Self {
            assert!(
                self.$stream.$test(needle),
                "{} fails {}({needle:?}):\n{}",
                stringify!($stream),
                stringify!($test),
                self.$stream
            );
            self
        }
    )*};
}

impl Output {
    stream_checks! {
        stdout_has: stdout, contains;
        stdout_starts: stdout, starts_with;
        stderr_has: stderr, contains;
        stderr_starts: stderr, starts_with;
    }
}

/// The repository's `examples/` folder.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Every `.rma` file of `examples/`, sorted.
pub fn example_files() -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(examples_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rma"))
        .collect();
    files.sort();
    files
}
