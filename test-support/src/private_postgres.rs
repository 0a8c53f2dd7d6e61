//! A PostgreSQL server of the test's own, in a temporary directory on a free port, which the
//! test may restart or crash without disturbing the machine's PostgreSQL that every other test
//! shares. Built with the machine's PostgreSQL binaries (`/usr/lib/postgresql/*/bin`, Debian's
//! layout); run as the `postgres` user when the test runs as root (PostgreSQL refuses root).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The server; stopped (immediately) and removed on drop.
#[derive(Debug)]
pub struct PrivatePostgres {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    /// A URL of its `postgres` database (trust authentication).
    pub url: String,
}

fn newest_bin() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's binaries under /usr/lib/postgresql (Debian's postgresql package)")
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    found.sort_by_key(|bin| {
        bin.parent()
            .and_then(Path::file_name)
            .and_then(|name| name.to_str())
            .and_then(|name| name.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found
        .pop()
        .expect("an initdb under /usr/lib/postgresql/*/bin")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// `program`, to run as `postgres` when we are root.
fn command(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// `program args…` ([`command`]); panics with its output when it fails.
fn run(program: &Path, args: &[&str]) {
    let out = command(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", program.display()));
    assert!(
        out.status.success(),
        "{} {args:?}: {}{}",
        program.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl PrivatePostgres {
    /// Initialises and starts one (a few seconds).
    pub fn start() -> Self {
        let bin = newest_bin();
        let dir = std::env::temp_dir().join(crate::unique("onesided-pg"));
        // created by the user the server runs as, which must own its data directory
        run(Path::new("/bin/mkdir"), &["-p", dir.to_str().unwrap()]);
        let port = crate::free_port();
        let data = dir.join("data");
        run(
            &bin.join("initdb"),
            &[
                "-D",
                data.to_str().unwrap(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
            ],
        );
        let server = PrivatePostgres {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            dir,
            bin,
            port,
        };
        server.pg_ctl(&["start"]);
        server
    }

    fn pg_ctl(&self, what: &[&str]) {
        let data = self.dir.join("data");
        let log = self.dir.join("log");
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {}",
            self.port,
            self.dir.display()
        );
        let mut args = vec![
            "-D",
            data.to_str().unwrap(),
            "-l",
            log.to_str().unwrap(),
            "-o",
            &options,
            "-w",
        ];
        args.extend_from_slice(what);
        run(&self.bin.join("pg_ctl"), &args);
    }

    /// Stops it as a crash does (`pg_ctl stop -m immediate`: connections cut), leaving it down
    /// until [`PrivatePostgres::start_again`].
    pub fn crash(&self) {
        self.pg_ctl(&["-m", "immediate", "stop"]);
    }

    /// Starts it again after [`PrivatePostgres::crash`] (returns once it accepts connections).
    pub fn start_again(&self) {
        self.pg_ctl(&["start"]);
    }

    /// Crashes it (`pg_ctl stop -m immediate`: no checkpoint, connections cut) and starts it
    /// again, as a restart of the database under load does.
    pub fn crash_and_restart(&self) {
        self.pg_ctl(&["-m", "immediate", "stop"]);
        self.pg_ctl(&["start"]);
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = command(&self.bin.join("pg_ctl"))
            .args([
                "-D",
                data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
