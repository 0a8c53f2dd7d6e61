//! The MPICH reference: `mpi/rma_reference.c` (our own C program timing the same patterns with
//! MPI) compiled with `mpicc` and run with `mpiexec -n 2`, both ranks on this machine but
//! forced onto TCP over loopback, with no shared memory between them.
//!
//! Which variables force TCP depends on the device MPICH was built with (`mpichversion`):
//! Debian 12's MPICH 4.0.2 is `ch4:ucx`, where `UCX_TLS=tcp` keeps UCX off its shared-memory
//! transports (posix, sysv, cma) and `MPIR_CVAR_CH4_NOLOCAL=1` keeps MPICH's own shared-memory
//! path off. The run also counts the TCP segments this machine sent meanwhile
//! (`/proc/net/snmp`): thousands over TCP, a few dozen (the launcher's) over shared memory.

use std::fs;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Map, Value};

use crate::LATENCY_KEYS;

/// The C program, built into the bench so that a run needs no source tree.
const SOURCE: &str = include_str!("../mpi/rma_reference.c");

/// Latency patterns the C program times (every pattern rank 0 times, bulk aside).
pub const PATTERNS: usize = LATENCY_KEYS.len();

/// The figures of one MPICH run.
#[derive(Clone, Debug)]
pub struct Mpich {
    /// Median µs per pattern, keyed as [`LATENCY_KEYS`].
    pub latencies: Vec<(&'static str, f64)>,
    /// One put of `bulk_bytes` inside lock(X)/unlock, MiB/s (median of 5).
    pub bulk_put_mib_per_s: f64,
    /// Size of the bulk put.
    pub bulk_bytes: usize,
    /// `MPICH Version` and `MPICH Device` as `mpichversion` prints them, e.g. `4.0.2 ch4:ucx`.
    pub version: String,
    /// How the ranks talk, e.g. `ch4:ucx over TCP (loopback), no shared memory`.
    pub transport: String,
    /// The variables set for `mpiexec` to get that transport.
    pub environment: Vec<(&'static str, &'static str)>,
    /// TCP segments this machine sent while `mpiexec` ran (all sockets, from `/proc/net/snmp`),
    /// when that counter can be read.
    pub tcp_segments_sent: Option<u64>,
    /// Whether the ranks printed their figures but then hung in `MPI_Finalize` and were killed
    /// (see [`FINALIZE_GRACE`]).
    pub hung_in_finalize: bool,
}

/// How long `mpiexec` may go on after the figures are out before it is killed.
///
/// Debian 12's MPICH 4.0.2 on UCX 1.13 over TCP sometimes never returns from `MPI_Finalize`:
/// one rank waits in the process manager's barrier, the other in UCX closing its endpoints.
/// On this machine, with other builds running, it hung 6–20 % of runs of our program, with or
/// without `MPIR_CVAR_CH4_NOLOCAL`; even `MPI_Init` + `MPI_Allreduce` + `MPI_Finalize` hung 4
/// times in 60, and not once in 60 on UCX's default (shared-memory) transports. By then every
/// pattern is measured and every check at rank 1 has passed, so the figures stand.
pub const FINALIZE_GRACE: Duration = Duration::from_secs(3);

impl Mpich {
    /// The JSON object under `references.mpich`.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        for (key, value) in &self.latencies {
            object.insert((*key).into(), json!(value));
        }
        object.insert("bulk_put_mib_per_s".into(), json!(self.bulk_put_mib_per_s));
        object.insert("bulk_put_bytes".into(), json!(self.bulk_bytes));
        object.insert("version".into(), json!(self.version));
        object.insert("transport".into(), json!(self.transport));
        let environment: Map<String, Value> = self
            .environment
            .iter()
            .map(|(name, value)| ((*name).to_string(), json!(value)))
            .collect();
        object.insert("environment".into(), Value::Object(environment));
        object.insert("tcp_segments_sent".into(), json!(self.tcp_segments_sent));
        object.insert("hung_in_finalize".into(), json!(self.hung_in_finalize));
        Value::Object(object)
    }

    /// The median of `key`, one of [`LATENCY_KEYS`].
    pub fn latency(&self, key: &str) -> Option<f64> {
        self.latencies
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, value)| *value)
    }
}

/// How long `mpiexec` may take: a minute for start-up and teardown, plus 20 ms per iteration.
/// An iteration of all seven patterns takes ≈ 0.2 ms over TCP on an idle machine, but MPICH
/// busy-polls: when other processes compete for the cores, each round trip can wait for a
/// scheduler time slice, and medians of 8, 16 or 24 ms were seen here.
pub fn time_limit(iterations: usize) -> Duration {
    Duration::from_secs(60) + Duration::from_millis(20 * iterations as u64)
}

/// Compiles and runs the C program: `iterations` measured per pattern (after a warm-up of
/// 10 %), one put of `bulk_bytes`; `mpiexec` is killed after `limit`.
///
/// # Errors
/// When `mpicc`, `mpiexec` or `mpichversion` is not on `PATH`, the device is not one we know
/// how to force onto TCP, compiling fails, `mpiexec` fails or takes longer than `limit`, or
/// its output is not the JSON object expected.
pub fn run(iterations: usize, bulk_bytes: usize, limit: Duration) -> anyhow::Result<Mpich> {
    for tool in ["mpicc", "mpiexec", "mpichversion"] {
        if find_on_path(tool).is_none() {
            bail!("{tool} is not on PATH");
        }
    }
    let (version, device) = mpichversion()?;
    let (environment, transport) = tcp_only(&device)?;

    let dir = TempDir::new()?;
    let source = dir.path.join("rma_reference.c");
    let program = dir.path.join("rma_reference");
    fs::write(&source, SOURCE).context("cannot write the C program")?;
    let compiled = Command::new("mpicc")
        .arg("-O2")
        .arg("-o")
        .arg(&program)
        .arg(&source)
        .output()
        .context("cannot run mpicc")?;
    if !compiled.status.success() {
        bail!(
            "mpicc failed: {}",
            String::from_utf8_lossy(&compiled.stderr).trim()
        );
    }

    let mut command = Command::new("mpiexec");
    command
        .args(["-n", "2"])
        .arg(&program)
        .arg(iterations.max(1).to_string())
        .arg(bulk_bytes.to_string())
        .current_dir(&dir.path)
        .envs(environment.iter().copied())
        .stdin(Stdio::null());
    let before = tcp_segments_sent();
    let (output, hung_in_finalize) = run_bounded(command, &dir.path, limit)?;
    let after = tcp_segments_sent();
    let parsed: Value = serde_json::from_str(output.trim()).with_context(|| {
        format!(
            "mpiexec printed no JSON object: {:?}",
            output.chars().take(300).collect::<String>()
        )
    })?;
    let figure = |key: &str| -> anyhow::Result<f64> {
        parsed[key]
            .as_f64()
            .filter(|v| v.is_finite() && *v > 0.0)
            .with_context(|| format!("the MPICH run reported {key} = {}", parsed[key]))
    };
    let mut latencies = Vec::with_capacity(PATTERNS);
    for (key, _) in LATENCY_KEYS {
        latencies.push((key, figure(key)?));
    }
    let bulk_put_mib_per_s = figure("bulk_put_mib_per_s")?;
    Ok(Mpich {
        latencies,
        bulk_put_mib_per_s,
        bulk_bytes,
        version: format!("{version} {device}"),
        transport,
        environment,
        tcp_segments_sent: before.zip(after).map(|(b, a)| a.saturating_sub(b)),
        hung_in_finalize,
    })
}

/// The variables that keep both ranks on TCP over loopback for an MPICH built with `device`,
/// and a description of that transport.
///
/// # Errors
/// For a device not listed here: we would not know what its figures measure.
pub fn tcp_only(device: &str) -> anyhow::Result<(Vec<(&'static str, &'static str)>, String)> {
    let environment = if device.starts_with("ch4:ucx") {
        vec![("UCX_TLS", "tcp"), ("MPIR_CVAR_CH4_NOLOCAL", "1")]
    } else if device.starts_with("ch4:ofi") {
        // libfabric's tcp provider (with the rxm layer MPICH's reliable datagrams need)
        vec![("FI_PROVIDER", "tcp"), ("MPIR_CVAR_CH4_NOLOCAL", "1")]
    } else if device.starts_with("ch3:nemesis") {
        // nemesis' network module is tcp unless told otherwise
        vec![
            ("MPIR_CVAR_NEMESIS_NETMOD", "tcp"),
            ("MPIR_CVAR_CH3_NOLOCAL", "1"),
        ]
    } else if device.starts_with("ch3:sock") {
        // sockets only, no shared memory at all
        Vec::new()
    } else {
        bail!("MPICH device {device:?}: no known way to force it onto TCP");
    };
    let transport = format!("{device} over TCP (loopback), no shared memory");
    Ok((environment, transport))
}

/// `MPICH Version` and `MPICH Device` from `mpichversion`.
fn mpichversion() -> anyhow::Result<(String, String)> {
    let output = Command::new("mpichversion")
        .output()
        .context("cannot run mpichversion")?;
    if !output.status.success() {
        bail!("mpichversion failed");
    }
    parse_mpichversion(&String::from_utf8_lossy(&output.stdout))
}

/// Parses `mpichversion`'s `MPICH Version:` and `MPICH Device:` lines.
///
/// # Errors
/// When either line is missing.
pub fn parse_mpichversion(text: &str) -> anyhow::Result<(String, String)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .map(|rest| rest.trim().to_string())
            .filter(|value| !value.is_empty())
    };
    let version = field("MPICH Version:").context("mpichversion printed no MPICH Version")?;
    let device = field("MPICH Device:").context("mpichversion printed no MPICH Device")?;
    Ok((version, device))
}

/// Runs `command` in a process group of its own with stdout and stderr in files of `dir`, and
/// returns its stdout and whether it had to be killed after printing its figures.
///
/// The whole group (mpiexec, its proxy and the ranks) is killed when it outlives `limit` (an
/// error), or [`FINALIZE_GRACE`] after stdout holds a complete line (the program prints one
/// line, at its very end).
fn run_bounded(
    mut command: Command,
    dir: &Path,
    limit: Duration,
) -> anyhow::Result<(String, bool)> {
    let stdout_path = dir.join("stdout");
    let stderr_path = dir.join("stderr");
    command
        .stdout(fs::File::create(&stdout_path)?)
        .stderr(fs::File::create(&stderr_path)?)
        .process_group(0);
    let mut child = command.spawn().context("cannot run mpiexec")?;
    let kill_group = |child: &mut std::process::Child| {
        // the group's id is mpiexec's pid; `kill` since this crate has no unsafe code
        let group = format!("-{}", child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = child.kill();
        let _ = child.wait();
    };
    let started = Instant::now();
    let mut printed: Option<Instant> = None;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if printed.is_none() && fs::read_to_string(&stdout_path).is_ok_and(|s| s.ends_with('\n')) {
            printed = Some(Instant::now());
        }
        if printed.is_some_and(|at| at.elapsed() > FINALIZE_GRACE) {
            kill_group(&mut child);
            let stdout = fs::read_to_string(&stdout_path).unwrap_or_default();
            return Ok((stdout, true));
        }
        if started.elapsed() > limit {
            kill_group(&mut child);
            bail!(
                "mpiexec did not finish in {} s and was killed",
                limit.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = fs::read_to_string(&stdout_path).unwrap_or_default();
    if !status.success() {
        let mut stderr = String::new();
        let _ = fs::File::open(&stderr_path).and_then(|mut f| f.read_to_string(&mut stderr));
        bail!("mpiexec failed ({status}): {}", stderr.trim());
    }
    Ok((stdout, false))
}

/// `Tcp: … OutSegs` from `/proc/net/snmp`: TCP segments sent by this machine since boot.
fn tcp_segments_sent() -> Option<u64> {
    parse_out_segs(&fs::read_to_string("/proc/net/snmp").ok()?)
}

/// The `OutSegs` column of the two `Tcp:` lines (names, then values) of `/proc/net/snmp`.
pub fn parse_out_segs(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|line| line.starts_with("Tcp:"));
    let names = tcp.next()?;
    let values = tcp.next()?;
    let column = names.split_whitespace().position(|n| n == "OutSegs")?;
    values.split_whitespace().nth(column)?.parse().ok()
}

/// Where `tool` is on `PATH`, if it is.
pub fn find_on_path(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(tool))
        .find(|candidate| candidate.is_file())
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A directory under the system's temp dir, removed on drop.
#[derive(Debug)]
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new() -> anyhow::Result<Self> {
        let path = std::env::temp_dir().join(format!(
            "onesided-bench-mpich-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(TempDir { path })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_mpichversion, parse_out_segs, tcp_only};

    #[test]
    fn reads_version_and_device_from_mpichversion() {
        let text = "MPICH Version:    \t4.0.2\nMPICH Release date:\tThu Apr  7 2022\n\
                    MPICH Device:    \tch4:ucx\nMPICH configure: \t--prefix=/usr\n";
        let (version, device) = parse_mpichversion(text).unwrap();
        assert_eq!((version.as_str(), device.as_str()), ("4.0.2", "ch4:ucx"));
        assert!(parse_mpichversion("MPICH Version: 4.0.2\n").is_err());
    }

    #[test]
    fn ucx_is_kept_on_tcp_and_off_shared_memory() {
        let (environment, transport) = tcp_only("ch4:ucx").unwrap();
        assert!(environment.contains(&("UCX_TLS", "tcp")));
        assert!(environment.contains(&("MPIR_CVAR_CH4_NOLOCAL", "1")));
        assert!(transport.contains("ch4:ucx") && transport.contains("TCP"));
        assert!(tcp_only("ch5:quantum").is_err());
    }

    #[test]
    fn reads_out_segs_from_proc_net_snmp() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm RtoMin ActiveOpens OutSegs RetransSegs\n\
                    Tcp: 1 200 17 123456 3\nUdp: InDatagrams\nUdp: 5\n";
        assert_eq!(parse_out_segs(snmp), Some(123_456));
        assert_eq!(parse_out_segs("Udp: InDatagrams\nUdp: 5\n"), None);
    }
}
