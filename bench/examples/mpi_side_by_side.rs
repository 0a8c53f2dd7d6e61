//! One MPI program, two MPIs: the bench's `mpi/rma_reference.c`, built once by MPICH's
//! `mpicc`, run under MPICH's own `mpiexec` (TCP over loopback, as the bench's MPICH column) and
//! under `onesided mpiexec` (the workspace's `libmpich.so.12` and a server of the job's own),
//! in alternating rounds; prints every pattern's median beside MPICH's and their ratio
//! (BENCHMARKS.md, "MPI programs on onesided beside MPICH").
//!
//! ```sh
//! cargo build --release -p onesided-cli -p onesided-server -p onesided-mpi
//! cargo run --release -p onesided-bench --example mpi_side_by_side -- [ITERATIONS [BULK [ROUNDS]]]
//! ```
//!
//! The onesided runs use the `onesided`, `onesided-server` and `libmpich.so` of the target
//! directory this example was built in, and each audit durability in turn (`sync`, the
//! default, and `off`), set by `ONESIDED_AUDIT_DURABILITY` for the job's server.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use serde_json::Value;

const SOURCE: &str = include_str!("../mpi/rma_reference.c");
const BULK: &str = "bulk_put_mib_per_s";

fn main() -> anyhow::Result<()> {
    let args = onesided_bench::ExampleArgs::from_env(
        "mpi_side_by_side [ITERATIONS [BULK_BYTES [ROUNDS]]]",
    );
    let (iterations, bulk, rounds) = (
        args.number(0, 300)?,
        args.number(1, 1 << 20)?,
        args.number(2, 3)?,
    );
    let release = std::env::current_exe()?
        .parent()
        .and_then(Path::parent)
        .context("the example's directory")?
        .to_path_buf();
    for needed in ["onesided", "onesided-server", "libmpich.so"] {
        if !release.join(needed).exists() {
            bail!(
                "{} is missing: cargo build --release -p onesided-cli -p onesided-server -p \
                 onesided-mpi",
                release.join(needed).display()
            );
        }
    }
    let dir = std::env::temp_dir().join(format!("mpi-side-by-side-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let program = dir.join("rma_reference");
    std::fs::write(dir.join("rma_reference.c"), SOURCE)?;
    let built = Command::new("mpicc")
        .arg("-O2")
        .arg("-o")
        .arg(&program)
        .arg(dir.join("rma_reference.c"))
        .status()
        .context("mpicc (apt-get install mpich libmpich-dev)")?;
    anyhow::ensure!(built.success(), "mpicc failed");
    let version = String::from_utf8(Command::new("mpichversion").output()?.stdout)?;
    let (mpich_version, device) = onesided_bench::mpich::parse_mpichversion(&version)?;
    let (tcp, transport) = onesided_bench::mpich::tcp_only(&device)?;

    let columns = ["MPICH", "onesided sync", "onesided off"];
    let mut runs: Vec<Vec<Value>> = vec![Vec::new(); columns.len()];
    for round in 0..rounds {
        for (column, runs) in runs.iter_mut().enumerate() {
            let mut command = if column == 0 {
                let mut command = Command::new("mpiexec");
                command.envs(tcp.iter().copied());
                command
            } else {
                let mut command = Command::new(release.join("onesided"));
                command
                    .arg("mpiexec")
                    .env("ONESIDED_MPI_LIB", release.join("libmpich.so"))
                    .env("ONESIDED_SERVER_BIN", release.join("onesided-server"))
                    .env(
                        "ONESIDED_AUDIT_DURABILITY",
                        if column == 1 { "sync" } else { "off" },
                    )
                    .env_remove("ONESIDED_ADDR");
                command
            };
            command
                .args(["-n", "2"])
                .arg(&program)
                .arg(iterations.to_string())
                .arg(bulk.to_string())
                .current_dir(&dir)
                .stdin(Stdio::null());
            let output = command.output().context("mpiexec")?;
            let text = String::from_utf8_lossy(&output.stdout);
            let line = text
                .lines()
                .find(|line| line.starts_with('{'))
                .with_context(|| {
                    format!(
                        "{} printed no figures: {text} {}",
                        columns[column],
                        String::from_utf8_lossy(&output.stderr)
                    )
                })?;
            runs.push(serde_json::from_str(line)?);
            eprintln!("round {} of {rounds}: {} done", round + 1, columns[column]);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);

    let median = |column: usize, key: &str| -> f64 {
        let mut values: Vec<f64> = runs[column]
            .iter()
            .filter_map(|run| run[key].as_f64())
            .collect();
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    println!(
        "one binary (mpi/rma_reference.c, mpicc -O2), {iterations} iterations per pattern, \
         median of {rounds} alternating rounds"
    );
    println!("MPICH {mpich_version}: {transport}");
    println!(
        "| pattern | MPICH µs | onesided sync µs | ratio | onesided off µs | ratio |\n\
         |---|---|---|---|---|---|"
    );
    for (key, what) in onesided_bench::LATENCY_KEYS {
        let (mpich, sync, off) = (median(0, key), median(1, key), median(2, key));
        println!(
            "| {what} | {mpich:.1} | {sync:.1} | {:.1}× | {off:.1} | {:.1}× |",
            sync / mpich,
            off / mpich
        );
    }
    let (mpich, sync, off) = (median(0, BULK), median(1, BULK), median(2, BULK));
    println!(
        "| bulk put of {bulk} B (MiB/s) | {mpich:.0} | {sync:.0} | {:.2}× | {off:.0} | {:.2}× |",
        sync / mpich,
        off / mpich
    );
    Ok(())
}
