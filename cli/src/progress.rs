//! The progress bar of long transfers (`put --from-file`, `get --to-file`), and the spinner of
//! a long wait whose progress nobody reports (`audit export`), on stderr.
//!
//! It counts bytes the server acknowledged, not bytes handed to the connection, and its rate
//! and ETA are the average over the whole transfer so far: indicatif's own `{eta}` follows a
//! smoothed recent rate, so a first acknowledgement that arrives late (all chunks are issued
//! before the first answer) made it show "eta 30m" for a transfer that then took 20 s. The
//! average converges as the transfer goes on and reaches 0 at the end. A steady tick keeps
//! the elapsed time moving while no acknowledgement arrives. Off when stderr is not a
//! terminal, and with --json.
//!
//! Owns: the bar's and the spinner's look, when they show, and the whole-transfer average
//! behind their rate and ETA. Must not: write to stdout, or count anything but what the
//! caller reports as acknowledged.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{BinaryBytes, HumanDuration, ProgressBar, ProgressState, ProgressStyle};

use crate::Global;

/// A bar for `total` bytes, hidden unless stderr is a terminal (and not with --json).
pub fn bytes(global: &Global, total: u64) -> ProgressBar {
    if global.json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{bar:24} {bytes}/{total_bytes} {average_rate} eta {average_eta}",
    )
    .map(|style| {
        style
            .with_key(
                "average_rate",
                |state: &ProgressState, out: &mut dyn std::fmt::Write| {
                    let text = match average(state.pos(), state.len(), state.elapsed()) {
                        Some(average) => {
                            format!("{}/s", BinaryBytes(average.bytes_per_second as u64))
                        }
                        None => "-/s".to_string(),
                    };
                    let _ = out.write_str(&text);
                },
            )
            .with_key(
                "average_eta",
                |state: &ProgressState, out: &mut dyn std::fmt::Write| {
                    let _ = match average(state.pos(), state.len(), state.elapsed()) {
                        Some(average) => write!(out, "{:#}", HumanDuration(average.left)),
                        None => out.write_str("-"),
                    };
                },
            )
    });
    if let Ok(style) = style {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

/// A spinner with the time waited, for a call whose progress the server does not report (an
/// export: the trace arrives in one message). Hidden like [`bytes()`].
pub fn waiting(global: &Global, what: &str) -> ProgressBar {
    if global.json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let spinner = ProgressBar::new_spinner().with_message(what.to_string());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        spinner.set_style(style);
    }
    spinner.enable_steady_tick(Duration::from_millis(100));
    spinner
}

/// The average rate of a transfer so far and the time left at that rate.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Average {
    bytes_per_second: f64,
    left: Duration,
}

/// `None` until a byte was acknowledged (no rate to speak of yet).
fn average(done: u64, total: Option<u64>, elapsed: Duration) -> Option<Average> {
    let seconds = elapsed.as_secs_f64();
    if done == 0 || seconds <= 0.0 {
        return None;
    }
    let bytes_per_second = done as f64 / seconds;
    let remaining = total.unwrap_or(done).saturating_sub(done) as f64;
    let left = Duration::try_from_secs_f64(remaining / bytes_per_second).unwrap_or(Duration::MAX);
    Some(Average {
        bytes_per_second,
        left,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_acknowledged_means_no_estimate() {
        assert_eq!(average(0, Some(100), Duration::from_secs(5)), None);
        assert_eq!(average(10, Some(100), Duration::ZERO), None);
    }

    #[test]
    fn the_estimate_is_the_average_so_far_and_reaches_zero() {
        let mib = 1 << 20;
        // the first MiB acknowledged late: a long estimate, but the rate so far
        let first = average(mib, Some(256 * mib), Duration::from_secs(3)).unwrap();
        assert_eq!(first.left, Duration::from_secs(255 * 3));
        // then the answers come quickly: the estimate follows within the same transfer
        let half = average(128 * mib, Some(256 * mib), Duration::from_secs(8)).unwrap();
        assert_eq!(half.bytes_per_second, 16.0 * mib as f64);
        assert_eq!(half.left, Duration::from_secs(8));
        let done = average(256 * mib, Some(256 * mib), Duration::from_secs(16)).unwrap();
        assert_eq!(done.left, Duration::ZERO);
    }

    #[test]
    fn a_transfer_that_keeps_its_pace_is_estimated_exactly() {
        // 10 MiB/s all along: at every point the time left is what remains at 10 MiB/s
        let mib = 1 << 20;
        for second in 1..=10u64 {
            let estimate = average(
                second * 10 * mib,
                Some(100 * mib),
                Duration::from_secs(second),
            )
            .unwrap();
            assert_eq!(estimate.left, Duration::from_secs(10 - second));
        }
    }
}
