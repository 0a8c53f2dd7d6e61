//! The `process_*` metrics of the process the server runs in: CPU time, memory, file
//! descriptors, threads and start time, under the names and units every official Prometheus
//! client's process collector uses (so that stock dashboards and alerts work unchanged).
//!
//! Owns: reading them from `/proc/self` (through the `procfs` crate) at each scrape. Must not:
//! fail a scrape: what cannot be read is left out of it. On a system without `/proc` (not
//! Linux) there are none.
//!
//! They describe the process, not one server: servers sharing a process (as in the tests)
//! report the same values.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
#[cfg(target_os = "linux")]
use prometheus_client::encoding::EncodeMetric;
#[cfg(target_os = "linux")]
use prometheus_client::metrics::counter::ConstCounter;
#[cfg(target_os = "linux")]
use prometheus_client::metrics::gauge::ConstGauge;
#[cfg(target_os = "linux")]
use prometheus_client::registry::Unit;

/// Reads the process metrics at each scrape.
#[derive(Debug, Default)]
pub(super) struct ProcessCollector;

/// One metric family with one sample.
#[cfg(target_os = "linux")]
fn family(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    metric: &impl EncodeMetric,
) -> std::fmt::Result {
    let sample = encoder.encode_descriptor(name, help, unit, metric.metric_type())?;
    metric.encode(sample)
}

#[cfg(target_os = "linux")]
impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let Ok(me) = procfs::process::Process::myself() else {
            return Ok(());
        };
        if let Ok(stat) = me.stat() {
            let ticks = procfs::ticks_per_second() as f64;
            let cpu = (stat.utime + stat.stime) as f64 / ticks;
            family(
                &mut encoder,
                "process_cpu",
                "Total user and system CPU time spent in seconds",
                Some(&Unit::Seconds),
                &ConstCounter::new(cpu),
            )?;
            family(
                &mut encoder,
                "process_resident_memory",
                "Resident memory size in bytes",
                Some(&Unit::Bytes),
                &ConstGauge::new(stat.rss.saturating_mul(procfs::page_size())),
            )?;
            family(
                &mut encoder,
                "process_virtual_memory",
                "Virtual memory size in bytes",
                Some(&Unit::Bytes),
                &ConstGauge::new(stat.vsize),
            )?;
            family(
                &mut encoder,
                "process_threads",
                "Number of OS threads in the process",
                None,
                &ConstGauge::new(stat.num_threads),
            )?;
            if let Ok(boot) = procfs::boot_time_secs() {
                let started = boot as f64 + stat.starttime as f64 / ticks;
                family(
                    &mut encoder,
                    "process_start_time",
                    "Start time of the process since unix epoch in seconds",
                    Some(&Unit::Seconds),
                    &ConstGauge::new(started),
                )?;
            }
        }
        if let Ok(open) = me.fd_count() {
            family(
                &mut encoder,
                "process_open_fds",
                "Number of open file descriptors",
                None,
                &ConstGauge::new(open as u64),
            )?;
        }
        if let Ok(limits) = me.limits() {
            if let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit {
                family(
                    &mut encoder,
                    "process_max_fds",
                    "Maximum number of open file descriptors",
                    None,
                    &ConstGauge::new(max),
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
impl Collector for ProcessCollector {
    fn encode(&self, _encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        Ok(())
    }
}
