//! The bench's tracing: a subscriber like `onesided-server`'s, so that an in-process server
//! pays for its spans what the server binary pays.
//!
//! Owns: `trace_as_the_server`, its filter and its output on stderr. Must not: emit events of
//! its own, or replace a subscriber already installed.

/// Installs a tracing subscriber like `onesided-server`'s, its output on stderr: an in-process
/// server then pays for its spans what the server binary pays. Without a subscriber every span
/// of the server's and h2's also checks the `log` crate's level (tracing's `log` feature, which
/// sqlx enables) at each creation, entry, exit and drop: about 15 k instructions per hot-counter
/// operation (94.4 k → 79.7 k, callgrind) that the server binary never executes. With `RUST_LOG`
/// it filters as the server would; without it, spans are enabled up to `info` as the server's
/// default enables them, but events only from `warn` up, so that the runs' thousands of session
/// attach and detach lines do not bury the bench's own output (one per session, not per
/// operation). Does nothing when a subscriber is already installed.
pub fn trace_as_the_server() {
    use tracing_subscriber::filter::{filter_fn, LevelFilter};
    use tracing_subscriber::prelude::*;
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(filter) => tracing_subscriber::registry()
            .with(layer.with_filter(filter))
            .try_init(),
        Err(_) => {
            let filter = filter_fn(|meta| {
                *meta.level() <= LevelFilter::WARN
                    || (meta.is_span() && *meta.level() <= LevelFilter::INFO)
            })
            .with_max_level_hint(LevelFilter::INFO);
            tracing_subscriber::registry()
                .with(layer.with_filter(filter))
                .try_init()
        }
    };
}
