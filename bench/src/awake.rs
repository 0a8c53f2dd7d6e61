//! `--keep-awake`: one lowest-priority busy loop per CPU for the length of a run, so that no
//! virtual CPU halts between two messages.
//!
//! On the VMs these figures come from, a thread that sleeps in `epoll_wait` lets its vCPU halt,
//! and waking a halted vCPU costs the hypervisor's wake-up latency (≈ 100 µs seen here) —
//! several times the whole round trip. MPICH (UCX) busy-polls and never halts; a tokio runtime
//! sleeps. The spinners keep every vCPU running at `nice 19`, so a woken thread of ours gets
//! its CPU at once (CFS gives a nice-19 task about 1.5 % against a nice-0 one), and the run
//! measures the service's own path. Everything in the run, references included, runs beside
//! them.

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

impl Drop for KeepAwake {
    fn drop(&mut self) {
        for spinner in &mut self.spinners {
            let _ = spinner.kill();
            let _ = spinner.wait();
        }
    }
}
