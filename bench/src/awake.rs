//! `--keep-awake`: one lowest-priority busy loop per CPU for the length of a run, so that no
//! virtual CPU halts between two messages.
//!
//! On the VMs these figures come from, a thread that sleeps in `epoll_wait` lets its vCPU halt,
//! and waking a halted vCPU costs the hypervisor's wake-up latency (≈ 100 µs seen here) —
//! several times the whole round trip. MPICH (UCX) busy-polls and never halts; a tokio runtime
//! sleeps. The spinners keep every vCPU running at `nice 19`, so a woken thread of ours gets
//! its CPU at once (CFS gives a nice-19 task about 1.5 % against a nice-0 one), and the run
//! measures the service's own path. Everything in the run, references included, runs beside
//! them — except what involves PostgreSQL ([`KeepAwake::pause`]).
//!
//! PostgreSQL does not take the spinners well: beside two of them one single-row INSERT commit
//! of this machine's PostgreSQL took 3.1–3.4 ms against 0.33–0.40 ms without (`pgbench -M
//! prepared -c 1`, the same minutes), its backend's `fdatasync` 1.5 ms median (`strace -T`)
//! while the same `fdatasync` from another process stayed at 0.13–0.15 ms; giving the spinners
//! their own session and an autogroup nice of 19 did not help (docs/benchmarks-history.md,
//! "PostgreSQL beside the spinners"). So the bench stops them (`SIGSTOP`) while it measures anything in
//! PostgreSQL, and lets them go on (`SIGCONT`) after.

use std::process::{Child, Command, Stdio};

use anyhow::Context;

/// The spinners; they stop when this is dropped.
#[derive(Debug)]
pub struct KeepAwake {
    spinners: Vec<Child>,
}

impl KeepAwake {
    /// Starts one spinner per CPU.
    ///
    /// # Errors
    /// When `nice` or `sh` cannot be started.
    pub fn start() -> anyhow::Result<Self> {
        let cpus = std::thread::available_parallelism().map_or(2, usize::from);
        let mut awake = KeepAwake {
            spinners: Vec::with_capacity(cpus),
        };
        // a spinner stops by itself when the bench is gone, even after a kill -9 of it
        let spin = format!(
            "while kill -0 {} 2>/dev/null; do :; done",
            std::process::id()
        );
        for _ in 0..cpus {
            let spinner = Command::new("nice")
                .args(["-n", "19", "sh", "-c", &spin])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("cannot start a nice -n 19 busy loop (--keep-awake)")?;
            awake.spinners.push(spinner);
        }
        Ok(awake)
    }
}

impl KeepAwake {
    /// Stops the spinners until the guard is dropped.
    ///
    /// # Errors
    /// When `kill` cannot be run or refuses.
    pub fn pause(&self) -> anyhow::Result<Paused<'_>> {
        self.signal("-STOP")?;
        Ok(Paused(self))
    }

    fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let pids: Vec<u32> = self.spinners.iter().map(Child::id).collect();
        send_signal(signal, &pids).context("--keep-awake")
    }
}

/// Sends `signal` (`-STOP`, `-TERM`, …) to the processes `pids` with `kill`.
///
/// # Errors
/// When `kill` cannot be run or refuses.
pub(crate) fn send_signal(signal: &str, pids: &[u32]) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .arg(signal)
        .args(pids.iter().map(u32::to_string))
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("cannot run kill {signal}"))?;
    anyhow::ensure!(status.success(), "kill {signal} {pids:?} failed: {status}");
    Ok(())
}

/// The spinners stopped ([`KeepAwake::pause`]); they go on when this is dropped.
#[derive(Debug)]
pub struct Paused<'a>(&'a KeepAwake);

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        if let Err(error) = self.0.signal("-CONT") {
            eprintln!("onesided-bench: the --keep-awake spinners stay stopped: {error:#}");
        }
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        for spinner in &mut self.spinners {
            let _ = spinner.kill();
            let _ = spinner.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state letter of process `pid` (`/proc/PID/stat`: `T` is stopped by a signal).
    fn state(pid: u32) -> char {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        // after the command name, which is in parentheses and may hold spaces
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.chars().next().unwrap()
    }

    /// Waits (bounded) until every spinner's state is or is not `T`.
    fn wait_until_stopped(awake: &KeepAwake, stopped: bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let states: Vec<char> = awake.spinners.iter().map(|s| state(s.id())).collect();
            if states.iter().all(|&s| (s == 'T') == stopped) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "spinner states {states:?}, wanted stopped = {stopped}"
            );
            std::thread::yield_now();
        }
    }

    #[test]
    fn pausing_stops_every_spinner_until_the_guard_goes() {
        let awake = KeepAwake::start().unwrap();
        assert!(!awake.spinners.is_empty());
        wait_until_stopped(&awake, false);
        let paused = awake.pause().unwrap();
        wait_until_stopped(&awake, true);
        drop(paused);
        wait_until_stopped(&awake, false);
        let pids: Vec<u32> = awake.spinners.iter().map(Child::id).collect();
        drop(awake);
        for pid in pids {
            assert!(
                !std::path::Path::new(&format!("/proc/{pid}")).exists(),
                "spinner {pid} ended with the guard"
            );
        }
    }
}
