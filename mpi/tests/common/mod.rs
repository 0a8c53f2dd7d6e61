//! Building C programs with the system's `mpicc` and running them under `onesided mpiexec`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The target directory's profile directory (`target/debug`), where cargo put the workspace's
/// `onesided` and `onesided-server`.
pub fn artifacts() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    // target/debug/deps/programs-… → target/debug
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("a target directory");
    for needed in ["onesided", "onesided-server"] {
        assert!(
            dir.join(needed).exists(),
            "{} is missing: build the workspace first (`cargo test --workspace` does)",
            dir.join(needed).display()
        );
    }
    dir.to_path_buf()
}

/// This crate's `libmpich.so`: the one `cargo test` built for this run (in `deps`, which cargo
/// does not copy up a level when it builds for tests), else the one `cargo build` left.
pub fn library() -> PathBuf {
    let dir = artifacts();
    [dir.join("deps/libmpich.so"), dir.join("libmpich.so")]
        .into_iter()
        .find(|path| path.exists())
        .unwrap_or_else(|| {
            panic!(
                "libmpich.so is in neither {0}/deps nor {0}: build the workspace first \
                 (`cargo test --workspace` does)",
                dir.display()
            )
        })
}

/// A directory for this test binary's builds.
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("onesided-mpi-tests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// Compiles `sources` (paths) with `mpicc` and `flags` into `name` in the scratch directory.
pub fn mpicc(name: &str, sources: &[PathBuf], flags: &[&str]) -> PathBuf {
    let out = scratch().join(name);
    let status = Command::new("mpicc")
        .args(flags)
        .args(sources)
        .arg("-lm")
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|error| {
            panic!(
                "cannot run mpicc ({error}): MPICH's compiler wrapper is needed \
                 (apt-get install mpich libmpich-dev; .ci/run installs it)"
            )
        });
    assert!(status.success(), "mpicc failed on {sources:?}");
    out
}

/// Builds `tests/programs/FILE` (with its `check.h`), once per test binary: tests running at
/// once that need the same program share one build (a second build writing the binary while
/// the first test runs it fails that run with "Permission denied").
pub fn build(file: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, path)) = built.iter().find(|(name, _)| name == file) {
        return path.clone();
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let name = file.trim_end_matches(".c");
    let path = mpicc(name, &[dir.join(file)], &["-Wall"]);
    built.push((file.to_string(), path.clone()));
    path
}

/// What a job printed and how it ended.
#[derive(Debug)]
pub struct Run {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// `onesided mpiexec -n N PROGRAM ARGS` with a server of its own, within 120 s.
pub fn mpiexec(n: u32, program: &Path, args: &[&str]) -> Run {
    mpiexec_with(n, program, args, &[])
}

/// [`mpiexec`] with more flags of `mpiexec`'s own (`--check`).
pub fn mpiexec_with(n: u32, program: &Path, args: &[&str], flags: &[&str]) -> Run {
    mpiexec_within(n, program, args, flags, 120)
}

/// [`mpiexec_with`] ending the job after `seconds`.
pub fn mpiexec_within(n: u32, program: &Path, args: &[&str], flags: &[&str], seconds: u32) -> Run {
    mpiexec_with_env(n, program, args, flags, &[], seconds)
}

/// [`mpiexec_within`] with more environment for `onesided mpiexec` and the server it starts
/// (which inherits it: `ONESIDED_AUDIT_DURABILITY`, say).
pub fn mpiexec_with_env(
    n: u32,
    program: &Path,
    args: &[&str],
    flags: &[&str],
    env: &[(&str, &str)],
    seconds: u32,
) -> Run {
    let dir = artifacts();
    let output = Command::new(dir.join("onesided"))
        .args([
            "--timeout",
            &seconds.to_string(),
            "mpiexec",
            "-n",
            &n.to_string(),
        ])
        .args(flags)
        .arg(program)
        .args(args)
        .current_dir(scratch())
        .env_remove("ONESIDED_ADDR")
        .env_remove("ONESIDED_TOKEN")
        .env("ONESIDED_MPI_LIB", library())
        .env("ONESIDED_SERVER_BIN", dir.join("onesided-server"))
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("onesided runs");
    Run {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
