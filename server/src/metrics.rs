//! Prometheus metrics of one server, and the answer of the `GET /metrics` endpoint that serves
//! them in the Prometheus text format (`--metrics-listen`, `--http-listen`; [`crate::http`]
//! listens).
//!
//! Owns: the server's metric values (one [`Metrics`] per [`crate::run`], a value rather than a
//! global, so servers in one process keep theirs apart) and what `/metrics` answers.
//! Sessions, actors, replies and the audit writer record through the methods here.
//!
//! Must not: decide anything, or slow the call path. On it there are only atomic updates and a
//! histogram's short, never-awaited lock; label values are `&'static str` from precomputed
//! tables (one histogram per call kind and lock type, created at start), so recording
//! allocates nothing. Labels never name a world, window or rank: the endpoint is
//! unauthenticated and the series count stays fixed.
//!
//! What a scrape reads rather than what calls record: the build (`onesided_build_info`), the
//! process (`process_*`, module `process`), the busy-poll spinning time, and what the server holds
//! (worlds, windows, their bytes). The last is asked of the directory at each scrape
//! ([`Metrics::count_holdings`]) instead of being counted up and down where worlds and windows
//! come and go: they do so in many places (creation, a failed creation, a free, a world's
//! deletion, recovery, a cluster's hand-over), and a count taken from the directory itself
//! cannot drift from it.

mod process;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use onesided_core::epoch::LockType;
use onesided_core::ErrorClass;
use onesided_proto::v1::client_message::Call;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use tokio::sync::OwnedSemaphorePermit;

/// The kinds of call a session handles, one metric series each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// `open_window`.
    OpenWindow,
    /// `fence`.
    Fence,
    /// `post`.
    Post,
    /// `start`.
    Start,
    /// `complete`.
    Complete,
    /// `wait`.
    Wait,
    /// `test`.
    Test,
    /// `lock`.
    Lock,
    /// `unlock`.
    Unlock,
    /// `lock_all`.
    LockAll,
    /// `unlock_all`.
    UnlockAll,
    /// `flush` (and `flush_local`).
    Flush,
    /// `flush_all` (and `flush_local_all`).
    FlushAll,
    /// `sync`.
    Sync,
    /// Any RMA operation (put, get, accumulate, …).
    Op,
    /// The world barrier.
    Barrier,
    /// `win_free`.
    WinFree,
    /// A batch (its inner calls count as their own).
    Batch,
    /// A record of the client's own audit events.
    Record,
    /// A heartbeat.
    Heartbeat,
    /// `set_info`.
    SetInfo,
    /// `create_window` by the ranks.
    CreateWindow,
    /// Unified model: the owner's stores, published as they happen.
    Publish,
    /// Unified model: the owner follows its public copy.
    Follow,
    /// Dynamic windows: `MPI_Win_attach`.
    Attach,
    /// Dynamic windows: `MPI_Win_detach`.
    Detach,
    /// A point-to-point message sent (`MPI_Send`).
    Send,
    /// A point-to-point receive or probe (`MPI_Recv`, `MPI_Probe`, `MPI_Iprobe`).
    Receive,
}

impl CallKind {
    /// Every kind, in index order.
    pub const ALL: [CallKind; 28] = [
        CallKind::OpenWindow,
        CallKind::Fence,
        CallKind::Post,
        CallKind::Start,
        CallKind::Complete,
        CallKind::Wait,
        CallKind::Test,
        CallKind::Lock,
        CallKind::Unlock,
        CallKind::LockAll,
        CallKind::UnlockAll,
        CallKind::Flush,
        CallKind::FlushAll,
        CallKind::Sync,
        CallKind::Op,
        CallKind::Barrier,
        CallKind::WinFree,
        CallKind::Batch,
        CallKind::Record,
        CallKind::Heartbeat,
        CallKind::SetInfo,
        CallKind::CreateWindow,
        CallKind::Publish,
        CallKind::Follow,
        CallKind::Attach,
        CallKind::Detach,
        CallKind::Send,
        CallKind::Receive,
    ];

    /// The kind of `call`.
    pub fn of(call: &Call) -> Self {
        match call {
            Call::OpenWindow(_) => CallKind::OpenWindow,
            Call::Fence(_) => CallKind::Fence,
            Call::Post(_) => CallKind::Post,
            Call::Start(_) => CallKind::Start,
            Call::Complete(_) => CallKind::Complete,
            Call::Wait(_) => CallKind::Wait,
            Call::Test(_) => CallKind::Test,
            Call::Lock(_) => CallKind::Lock,
            Call::Unlock(_) => CallKind::Unlock,
            Call::LockAll(_) => CallKind::LockAll,
            Call::UnlockAll(_) => CallKind::UnlockAll,
            Call::Flush(_) => CallKind::Flush,
            Call::FlushAll(_) => CallKind::FlushAll,
            Call::Sync(_) => CallKind::Sync,
            Call::Op(_) => CallKind::Op,
            Call::Barrier(_) => CallKind::Barrier,
            Call::WinFree(_) => CallKind::WinFree,
            Call::Batch(_) => CallKind::Batch,
            Call::Record(_) => CallKind::Record,
            Call::Heartbeat(_) => CallKind::Heartbeat,
            Call::SetInfo(_) => CallKind::SetInfo,
            Call::CreateWindow(_) => CallKind::CreateWindow,
            Call::Publish(_) => CallKind::Publish,
            Call::Follow(_) => CallKind::Follow,
            Call::Attach(_) => CallKind::Attach,
            Call::Detach(_) => CallKind::Detach,
            Call::Send(_) => CallKind::Send,
            Call::Receive(_) => CallKind::Receive,
        }
    }

    /// The call's name (the `call` label, and the name in logs).
    pub fn name(self) -> &'static str {
        match self {
            CallKind::OpenWindow => "open_window",
            CallKind::Fence => "fence",
            CallKind::Post => "post",
            CallKind::Start => "start",
            CallKind::Complete => "complete",
            CallKind::Wait => "wait",
            CallKind::Test => "test",
            CallKind::Lock => "lock",
            CallKind::Unlock => "unlock",
            CallKind::LockAll => "lock_all",
            CallKind::UnlockAll => "unlock_all",
            CallKind::Flush => "flush",
            CallKind::FlushAll => "flush_all",
            CallKind::Sync => "sync",
            CallKind::Op => "op",
            CallKind::Barrier => "barrier",
            CallKind::WinFree => "win_free",
            CallKind::Batch => "batch",
            CallKind::Record => "record",
            CallKind::Heartbeat => "heartbeat",
            CallKind::SetInfo => "set_info",
            CallKind::CreateWindow => "create_window",
            CallKind::Publish => "publish",
            CallKind::Follow => "follow",
            CallKind::Attach => "attach",
            CallKind::Detach => "detach",
            CallKind::Send => "send",
            CallKind::Receive => "receive",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

type Labels<const N: usize> = [(&'static str, &'static str); N];
type HistogramFamily<const N: usize> = Family<Labels<N>, Histogram, fn() -> Histogram>;

/// Buckets of durations: 10 µs to about 84 s, doubling.
fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(1e-5, 2.0, 24))
}

/// Buckets of event counts: 1 to 32768, doubling.
fn events() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 16))
}

const LOCK_TYPES: [LockType; 2] = [LockType::Shared, LockType::Exclusive];

fn lock_index(lock_type: LockType) -> usize {
    match lock_type {
        LockType::Shared => 0,
        LockType::Exclusive => 1,
    }
}

/// The metrics of one server. Cheap to share (`Arc`); every method takes `&self`.
pub struct Metrics {
    /// Immutable once built: scraping only reads it.
    registry: Registry,
    calls: CallSeries,
    targets: TargetSeries,
    audit: AuditSeries,
    /// Seconds spent busy-polling, brought up to date from [`Metrics::busy_poll`] at each
    /// scrape.
    busy_poll_spin: Counter<f64, std::sync::atomic::AtomicU64>,
    /// The server's spinner (`--busy-poll`), set once at start.
    busy_poll: std::sync::OnceLock<onesided_busy_poll::BusyPoll>,
    held: HoldingSeries,
    /// What the server holds, asked at each scrape (set once, by the directory).
    holdings: std::sync::OnceLock<HoldingsSource>,
    /// `process_*`, read at each scrape; a registry without the `onesided` prefix.
    process: Registry,
}

/// Where a scrape learns what the server holds (`None`: the directory is gone).
type HoldingsSource = Box<dyn Fn() -> Option<Holdings> + Send + Sync>;

/// What a server holds: the worlds, windows and window bytes of its directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holdings {
    /// Worlds served here.
    pub worlds: u64,
    /// Windows of those worlds whose actors run here.
    pub windows: u64,
    /// Bytes of all windows, those being created included, and of the regions attached to
    /// dynamic windows (what `--max-window-bytes` bounds).
    pub window_bytes: u64,
    /// That bound (`--max-window-bytes`).
    pub window_limit_bytes: u64,
}

/// `onesided_build_info`'s labels: the version, and the compiler and commit when the build
/// knew them (`build.rs`; `ONESIDED_BUILD_COMMIT` in the build's environment).
fn build_labels() -> Vec<(&'static str, &'static str)> {
    let mut labels = vec![("version", env!("CARGO_PKG_VERSION"))];
    if let Some(rustc) = option_env!("ONESIDED_RUSTC_VERSION") {
        labels.push(("rustc", rustc));
    }
    if let Some(commit) = option_env!("ONESIDED_BUILD_COMMIT").filter(|commit| !commit.is_empty()) {
        labels.push(("commit", commit));
    }
    labels
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("sessions", &self.targets.sessions.get())
            .field("pending_ops", &self.targets.pending_ops.get())
            .finish_non_exhaustive()
    }
}

/// The series of the calls sessions take up, one per call kind.
struct CallSeries {
    calls: Vec<Counter>,
    call_seconds: Vec<Histogram>,
    call_errors: Family<Labels<2>, Counter>,
}

/// Registers the call series (`calls`, `call_duration`, `call_errors`), in that order.
fn register_calls(registry: &mut Registry) -> CallSeries {
    let calls = Family::<Labels<1>, Counter>::default();
    registry.register(
        "calls",
        "Calls taken up by sessions, by call (a batch's inner calls each count)",
        calls.clone(),
    );
    let call_seconds = HistogramFamily::<1>::new_with_constructor(seconds);
    registry.register_with_unit(
        "call_duration",
        "Time from when a session takes up a call to when its answer is sent, by call",
        Unit::Seconds,
        call_seconds.clone(),
    );
    let call_errors = Family::<Labels<2>, Counter>::default();
    registry.register(
        "call_errors",
        "Calls answered with an error, by call and MPI error class",
        call_errors.clone(),
    );
    CallSeries {
        calls: CallKind::ALL
            .iter()
            .map(|kind| calls.get_or_create(&[("call", kind.name())]).clone())
            .collect(),
        call_seconds: CallKind::ALL
            .iter()
            .map(|kind| call_seconds.get_or_create(&[("call", kind.name())]).clone())
            .collect(),
        call_errors,
    }
}

/// The series of the targets' queues, the actors and the sessions.
struct TargetSeries {
    lock_wait: Vec<Histogram>,
    lock_waiters: Gauge,
    queued_items: Gauge,
    actor_inputs: Counter,
    pending_ops: Gauge,
    sessions: Gauge,
}

/// Registers the series of the targets, actors and sessions (`lock_wait` to
/// `sessions_attached`), in that order.
fn register_targets(registry: &mut Registry) -> TargetSeries {
    let lock_wait = HistogramFamily::<1>::new_with_constructor(seconds);
    registry.register_with_unit(
        "lock_wait",
        "Time from when a target takes up a lock request to its grant, by lock type",
        Unit::Seconds,
        lock_wait.clone(),
    );
    let lock_waiters = Gauge::default();
    registry.register(
        "lock_waiters",
        "Lock requests waiting in targets' lock queues",
        lock_waiters.clone(),
    );
    let queued_items = Gauge::default();
    registry.register(
        "actor_queued_items",
        "Items waiting in targets' per-origin queues until the target may be accessed",
        queued_items.clone(),
    );
    let actor_inputs = Counter::default();
    registry.register(
        "actor_inputs",
        "Messages taken by window-server actors (a fence costs each rank's actor two, \
         whatever the world's size)",
        actor_inputs.clone(),
    );
    let pending_ops = Gauge::default();
    registry.register(
        "pending_ops",
        "Operations sent by sessions and not yet answered (the per-session budget in use)",
        pending_ops.clone(),
    );
    let sessions = Gauge::default();
    registry.register("sessions_attached", "Sessions attached", sessions.clone());
    TargetSeries {
        lock_wait: LOCK_TYPES
            .iter()
            .map(|lock| {
                lock_wait
                    .get_or_create(&[("lock_type", lock.name())])
                    .clone()
            })
            .collect(),
        lock_waiters,
        queued_items,
        actor_inputs,
        pending_ops,
        sessions,
    }
}

/// The series of the audit writer.
struct AuditSeries {
    inbox: Gauge,
    unrecorded: Gauge,
    commit_events: Histogram,
    commit_seconds: Histogram,
    lag_seconds: Histogram,
    commit_failures: Counter,
}

/// Registers the audit writer's series (`audit_inbox_depth` to `audit_commit_failures`), in
/// that order.
fn register_audit(registry: &mut Registry) -> AuditSeries {
    let audit_inbox = Gauge::default();
    registry.register(
        "audit_inbox_depth",
        "Messages waiting in the audit writer's inbox",
        audit_inbox.clone(),
    );
    let audit_unrecorded = Gauge::default();
    registry.register(
        "audit_unrecorded_events",
        "Events of calls already answered (async durability) that are not committed yet: \
         what a crash would lose, at most --audit-async-max-unrecorded",
        audit_unrecorded.clone(),
    );
    let audit_commit_events = events();
    registry.register(
        "audit_commit_events",
        "Events per audit commit",
        audit_commit_events.clone(),
    );
    let audit_commit_seconds = seconds();
    registry.register_with_unit(
        "audit_commit_duration",
        "Time one successful audit commit took",
        Unit::Seconds,
        audit_commit_seconds.clone(),
    );
    let audit_lag_seconds = seconds();
    registry.register_with_unit(
        "audit_lag",
        "Time from an event's submission to its commit",
        Unit::Seconds,
        audit_lag_seconds.clone(),
    );
    let audit_commit_failures = Counter::default();
    registry.register(
        "audit_commit_failures",
        "Audit commits the store refused (each is retried)",
        audit_commit_failures.clone(),
    );
    AuditSeries {
        inbox: audit_inbox,
        unrecorded: audit_unrecorded,
        commit_events: audit_commit_events,
        commit_seconds: audit_commit_seconds,
        lag_seconds: audit_lag_seconds,
        commit_failures: audit_commit_failures,
    }
}

/// The series of what the server holds, read at each scrape.
struct HoldingSeries {
    worlds: Gauge,
    windows: Gauge,
    window_bytes: Gauge<u64, std::sync::atomic::AtomicU64>,
    window_limit_bytes: Gauge<u64, std::sync::atomic::AtomicU64>,
}

/// Registers the series of what the server holds (`worlds` to `window_limit`), in that order.
fn register_holdings(registry: &mut Registry) -> HoldingSeries {
    let worlds = Gauge::default();
    registry.register("worlds", "Worlds this server serves", worlds.clone());
    let windows = Gauge::default();
    registry.register(
        "windows",
        "Windows of those worlds whose actors run on this server",
        windows.clone(),
    );
    let window_bytes = Gauge::<u64, std::sync::atomic::AtomicU64>::default();
    registry.register_with_unit(
        "window",
        "Bytes of this server's windows (those being created included) and of the regions \
         attached to its dynamic windows",
        Unit::Bytes,
        window_bytes.clone(),
    );
    let window_limit_bytes = Gauge::<u64, std::sync::atomic::AtomicU64>::default();
    registry.register_with_unit(
        "window_limit",
        "The most bytes this server's windows may take together (--max-window-bytes)",
        Unit::Bytes,
        window_limit_bytes.clone(),
    );
    HoldingSeries {
        worlds,
        windows,
        window_bytes,
        window_limit_bytes,
    }
}

impl Metrics {
    /// Fresh metrics, every series of a call kind or lock type already present (at zero).
    /// The families are registered by area, in the order the endpoint lists them.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("onesided");
        let calls = register_calls(&mut registry);
        let targets = register_targets(&mut registry);
        let audit = register_audit(&mut registry);

        let busy_poll_spin = Counter::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register_with_unit(
            "busy_poll_spin",
            "Time spent polling for the next call instead of parking (--busy-poll; 0 without it)",
            Unit::Seconds,
            busy_poll_spin.clone(),
        );

        registry.register(
            "build",
            "The server's build: its version, and the compiler and commit when known (always 1)",
            Info::new(build_labels()),
        );
        let held = register_holdings(&mut registry);
        let mut process = Registry::default();
        process.register_collector(Box::new(process::ProcessCollector));

        Arc::new(Metrics {
            registry,
            calls,
            targets,
            audit,
            busy_poll_spin,
            busy_poll: std::sync::OnceLock::new(),
            held,
            holdings: std::sync::OnceLock::new(),
            process,
        })
    }

    /// Everything, in the Prometheus text format (version 0.0.4).
    pub fn encode(&self) -> String {
        if let Some(busy) = self.busy_poll.get() {
            // only this adds to the counter, and scrapes may overlap: add what is missing
            let missing = busy.spun().as_secs_f64() - self.busy_poll_spin.get();
            if missing > 0.0 {
                self.busy_poll_spin.inc_by(missing);
            }
        }
        if let Some(holdings) = self.holdings.get().and_then(|source| source()) {
            let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            self.held.worlds.set(count(holdings.worlds));
            self.held.windows.set(count(holdings.windows));
            self.held.window_bytes.set(holdings.window_bytes);
            self.held
                .window_limit_bytes
                .set(holdings.window_limit_bytes);
        }
        let mut text = String::new();
        // writing into a String cannot fail
        let _ = prometheus_text::encode(&mut text, &self.registry);
        let _ = prometheus_text::encode(&mut text, &self.process);
        text
    }

    /// Each scrape asks `source` what the server holds (the directory's census; `None` once
    /// the directory is gone, which leaves the last values). Set once: later calls are ignored.
    pub fn count_holdings(&self, source: impl Fn() -> Option<Holdings> + Send + Sync + 'static) {
        let _ = self.holdings.set(Box::new(source));
    }

    /// The server busy-polls with `busy` (`--busy-poll`): its spinning time is reported.
    pub fn busy_polling(&self, busy: onesided_busy_poll::BusyPoll) {
        let _ = self.busy_poll.set(busy);
    }

    /// A session takes up a call of `kind`.
    pub fn count_call(&self, kind: CallKind) {
        self.calls.calls[kind.index()].inc();
    }

    /// A window-server actor took a message from its inbox.
    pub fn actor_input(&self) {
        self.targets.actor_inputs.inc();
    }

    /// A lock request of `lock_type` was granted after waiting `waited` at its target.
    pub fn lock_granted(&self, lock_type: LockType, waited: Duration) {
        self.targets.lock_wait[lock_index(lock_type)].observe(waited.as_secs_f64());
    }

    /// One actor's queues now hold `queued` items and `waiters` lock requests; `report` is what
    /// that actor added to the server-wide gauges before, updated here.
    pub fn report_queues(&self, report: &mut QueueReport, queued: usize, waiters: usize) {
        let queued = i64::try_from(queued).unwrap_or(i64::MAX);
        let waiters = i64::try_from(waiters).unwrap_or(i64::MAX);
        if queued != report.queued {
            self.targets.queued_items.inc_by(queued - report.queued);
            report.queued = queued;
        }
        if waiters != report.waiters {
            self.targets.lock_waiters.inc_by(waiters - report.waiters);
            report.waiters = waiters;
        }
    }

    /// A session attached; it counts until the guard is dropped.
    pub fn session_attached(&self) -> AttachedSession {
        self.targets.sessions.inc();
        AttachedSession {
            sessions: self.targets.sessions.clone(),
        }
    }

    /// Events of answered calls not committed yet (async durability).
    pub fn audit_unrecorded(&self, events: usize) {
        self.audit
            .unrecorded
            .set(i64::try_from(events).unwrap_or(i64::MAX));
    }

    /// Messages waiting in the audit writer's inbox.
    pub fn audit_inbox(&self, depth: usize) {
        self.audit
            .inbox
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// The audit writer committed `events` events in `took`.
    pub fn audit_committed(&self, events: usize, took: Duration) {
        self.audit.commit_events.observe(events as f64);
        self.audit.commit_seconds.observe(took.as_secs_f64());
    }

    /// An event was committed `lag` after it was submitted.
    pub fn audit_lag(&self, lag: Duration) {
        self.audit.lag_seconds.observe(lag.as_secs_f64());
    }

    /// The store refused a commit.
    pub fn audit_commit_failed(&self) {
        self.audit.commit_failures.inc();
    }
}

/// What one actor added to the server-wide queue gauges.
#[derive(Debug, Default)]
pub struct QueueReport {
    queued: i64,
    waiters: i64,
}

/// Counts one attached session while it lives.
#[derive(Debug)]
pub struct AttachedSession {
    sessions: Gauge,
}

impl Drop for AttachedSession {
    fn drop(&mut self) {
        self.sessions.dec();
    }
}

/// One slot of a session's pending-operation budget, counted server-wide while it is held.
#[derive(Debug)]
pub struct PendingOp {
    _permit: OwnedSemaphorePermit,
    pending: Gauge,
}

impl PendingOp {
    /// Counts `permit` until it is dropped (when the operation's answer is sent or dropped).
    pub fn new(permit: OwnedSemaphorePermit, metrics: &Metrics) -> Self {
        metrics.targets.pending_ops.inc();
        PendingOp {
            _permit: permit,
            pending: metrics.targets.pending_ops.clone(),
        }
    }
}

impl Drop for PendingOp {
    fn drop(&mut self) {
        self.pending.dec();
    }
}

/// Times one call from when its session took it up until its answer is sent. Dropped without
/// an answer (the session ended first), it records nothing.
#[derive(Debug)]
pub struct CallTimer {
    metrics: Arc<Metrics>,
    kind: CallKind,
    started: Instant,
}

impl CallTimer {
    /// A timer of a call of `kind` taken up at `started`.
    pub fn new(metrics: Arc<Metrics>, kind: CallKind, started: Instant) -> Self {
        CallTimer {
            metrics,
            kind,
            started,
        }
    }

    /// The call's answer was sent now; `failed` is its error class if it was an error.
    pub fn answered(self, failed: Option<ErrorClass>) {
        let kind = self.kind.index();
        self.metrics.calls.call_seconds[kind].observe(self.started.elapsed().as_secs_f64());
        if let Some(class) = failed {
            // errors are the rare path: the family's lookup (a read lock) is fine here
            self.metrics
                .calls
                .call_errors
                .get_or_create(&[("call", self.kind.name()), ("class", class.name())])
                .inc();
        }
    }
}

/// Where `--metrics-listen` listens: the server's one kind of HTTP listener
/// ([`crate::http`]), under the name it had before the web view shared it.
pub use crate::http::HttpListener as MetricsListener;

/// The answer to a request on a listener that serves metrics: `GET /metrics`, 405 for another
/// method there, 404 elsewhere.
pub(crate) fn respond<B>(
    metrics: &Metrics,
    request: &http::Request<B>,
) -> http::Response<Full<Bytes>> {
    let (status, content_type, body) = match (request.method(), request.uri().path()) {
        (&http::Method::GET, "/metrics") => (
            http::StatusCode::OK,
            prometheus_text::CONTENT_TYPE,
            Bytes::from(metrics.encode()),
        ),
        (_, "/metrics") => (
            http::StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            Bytes::from_static(b"only GET\n"),
        ),
        _ => (
            http::StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            Bytes::from_static(b"metrics are at /metrics\n"),
        ),
    };
    let mut response = http::Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    if status == http::StatusCode::METHOD_NOT_ALLOWED {
        response
            .headers_mut()
            .insert(http::header::ALLOW, http::HeaderValue::from_static("GET"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_kind_has_its_series_and_index() {
        for (index, kind) in CallKind::ALL.into_iter().enumerate() {
            assert_eq!(kind.index(), index);
        }
        let text = Metrics::new().encode();
        for kind in CallKind::ALL {
            let count = format!(
                "onesided_call_duration_seconds_count{{call=\"{}\"}} 0",
                kind.name()
            );
            assert!(text.contains(&count), "{count} missing from\n{text}");
        }
    }

    #[test]
    fn a_timer_counts_its_call_and_its_error_class() {
        let metrics = Metrics::new();
        metrics.count_call(CallKind::Fence);
        CallTimer::new(Arc::clone(&metrics), CallKind::Fence, Instant::now()).answered(None);
        metrics.count_call(CallKind::Fence);
        CallTimer::new(Arc::clone(&metrics), CallKind::Fence, Instant::now())
            .answered(Some(ErrorClass::RmaSync));
        let text = metrics.encode();
        assert!(
            text.contains("onesided_calls_total{call=\"fence\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("onesided_call_duration_seconds_count{call=\"fence\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("onesided_call_errors_total{call=\"fence\",class=\"RMA_SYNC\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn each_scrape_asks_what_the_server_holds_and_keeps_the_last_answer_once_it_is_gone() {
        let metrics = Metrics::new();
        let answer = Arc::new(std::sync::Mutex::new(Some(Holdings {
            worlds: 2,
            windows: 5,
            window_bytes: 4096,
            window_limit_bytes: 1 << 20,
        })));
        let source = Arc::clone(&answer);
        metrics.count_holdings(move || *source.lock().unwrap());
        let text = metrics.encode();
        for line in [
            "onesided_worlds 2",
            "onesided_windows 5",
            "onesided_window_bytes 4096",
            "onesided_window_limit_bytes 1048576",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from\n{text}"
            );
        }
        answer.lock().unwrap().as_mut().unwrap().windows = 4;
        assert!(metrics.encode().lines().any(|l| l == "onesided_windows 4"));
        // the directory is gone: the last values stay
        *answer.lock().unwrap() = None;
        assert!(metrics.encode().lines().any(|l| l == "onesided_windows 4"));
    }

    #[test]
    fn queue_reports_add_up_across_actors() {
        let metrics = Metrics::new();
        let (mut first, mut second) = (QueueReport::default(), QueueReport::default());
        metrics.report_queues(&mut first, 3, 1);
        metrics.report_queues(&mut second, 2, 0);
        metrics.report_queues(&mut first, 1, 0);
        assert_eq!(metrics.targets.queued_items.get(), 3);
        assert_eq!(metrics.targets.lock_waiters.get(), 0);
        metrics.report_queues(&mut first, 0, 0);
        metrics.report_queues(&mut second, 0, 0);
        assert_eq!(metrics.targets.queued_items.get(), 0);
    }
}
