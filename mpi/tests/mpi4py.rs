//! mpi4py from the Python registry (its binary wheel: it loads `libmpi.so.12` by that name, and
//! `onesided mpiexec` puts this crate's library first on the loader's path) runs a Python
//! program using `MPI.Win` under `onesided mpiexec`, with MPI's outcomes (`tests/mpi4py/rma.py`).
//! The wheel goes into a virtual environment under the target directory, made once; making it
//! needs `python3` with `venv` (scripts/test installs it) and the Python registry.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{artifacts, mpiexec};

/// The version the test pins: its wheel's `MPI.mpich` module is what this crate must satisfy
/// (every symbol it needs when Python imports it, the large-count `_c` bindings left weak).
const MPI4PY: &str = "mpi4py==4.1.2";

/// A virtual environment holding mpi4py, made once under the target directory.
fn python() -> PathBuf {
    let venv = artifacts()
        .parent()
        .expect("the target directory")
        .join("mpi4py-venv");
    let python = venv.join("bin/python3");
    let ready = |python: &Path| {
        Command::new(python)
            .args([
                "-c",
                "import mpi4py, sys; sys.exit(mpi4py.__version__ != '4.1.2')",
            ])
            .status()
            .is_ok_and(|status| status.success())
    };
    if ready(&python) {
        return python;
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .expect("python3 (scripts/test installs it with venv)");
    assert!(made.success(), "python3 -m venv {} failed", venv.display());
    let installed = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--only-binary=:all:",
            MPI4PY,
        ])
        .status()
        .expect("pip");
    assert!(
        installed.success(),
        "pip install {MPI4PY} failed: the test needs the Python registry"
    );
    assert!(ready(&python), "{MPI4PY} does not import after its install");
    python
}

#[test]
fn an_mpi4py_program_with_mpi_win_runs_under_onesided_mpiexec() {
    let python = python();
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mpi4py/rma.py");
    let program = program.to_str().expect("a UTF-8 path");
    for n in [2, 3] {
        let run = mpiexec(n, &python, &[program]);
        assert!(run.status.success(), "-n {n}: {run:?}");
        for rank in 0..n {
            assert!(
                run.stdout.contains(&format!("mpi4py rank {rank}: ok")),
                "-n {n}: {run:?}"
            );
        }
        assert!(run.stdout.contains("mpi4py: obsolete "), "-n {n}: {run:?}");
    }
}
