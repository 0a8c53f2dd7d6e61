//! Busy-polling: after each message, keep the tokio runtime polling for I/O for a while instead
//! of letting its thread park, as MPI libraries spin on their network before they block.
//!
//! A parked thread sleeps in `epoll_wait`; when the answer arrives, the kernel must wake it,
//! and on a virtual machine whose CPU halted meanwhile that costs tens of microseconds per
//! message (BENCHMARKS.md, "Idle CPUs"). A [`BusyPoll`] runs one task on the runtime that,
//! for `budget` after the latest [`BusyPoll::touch`], yields in a loop: every
//! `tokio::task::yield_now` returns to the scheduler, which polls the I/O driver without
//! blocking before it runs the task again, so the answer is read as soon as it lands. After
//! `budget` without a touch the task parks until the next one.
//!
//! The cost is CPU: while it spins, the task keeps one of the runtime's threads at 100 % of a
//! core, up to `budget` after every message (README, "Busy-polling"). Opt-in, off by default;
//! the client sets it with `SessionBuilder::busy_poll` or `Endpoint::busy_poll` (one spinner per
//! session), the server with `--busy-poll` (one for the whole server).
//!
//! Owns: the spinner task and its budget (`parse_micros`, at most `MAX_BUDGET`), when it spins
//! and when it parks (`touch`, `POLLS_BEFORE_YIELD`), and its counters (`spun`, `is_spinning`,
//! `parked`). Must not: read or write a socket or a message itself, decide whether to spin (the
//! caller touches it after each message), outlive its last handle, or create a runtime (it
//! spawns on the caller's). It is a crate of its own so that proto, the wire mapping, needs
//! no runtime.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Polls of the I/O driver between two yields of the thread to the kernel (`sched_yield`), as
/// MPICH's `MPIR_CVAR_POLLS_BEFORE_YIELD`: yielding at every poll cost the gain where client
/// and server have a core each, never yielding cost 200 µs per round trip where two spinners
/// share one (BENCHMARKS.md, "Busy-polling").
const POLLS_BEFORE_YIELD: u32 = 32;

/// The largest budget accepted: beyond a second, spinning is no longer "before parking".
pub const MAX_BUDGET: Duration = Duration::from_secs(1);

/// Parses a `--busy-poll` value in microseconds (at most [`MAX_BUDGET`]).
///
/// # Errors
/// When it is not a whole number of microseconds within the bound.
pub fn parse_micros(value: &str) -> Result<Duration, String> {
    let micros: u64 = value
        .parse()
        .map_err(|_| format!("{value:?} is not a whole number of microseconds"))?;
    let budget = Duration::from_micros(micros);
    if budget > MAX_BUDGET {
        return Err(format!(
            "{micros} µs is more than the most allowed, {} µs",
            MAX_BUDGET.as_micros()
        ));
    }
    Ok(budget)
}

/// A spinner on the current tokio runtime (cheap to clone); it stops when the last clone is
/// dropped.
#[derive(Clone, Debug)]
pub struct BusyPoll {
    guard: Arc<Guard>,
}

#[derive(Debug)]
struct Guard(Arc<Shared>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
        self.0.wake.notify_one();
    }
}

#[derive(Debug)]
struct Shared {
    budget: Duration,
    origin: Instant,
    /// Nanoseconds from `origin` to the latest touch (0: never touched).
    last: AtomicU64,
    wake: Notify,
    closed: AtomicBool,
    /// Whether the task is spinning now.
    spinning: AtomicBool,
    /// Nanoseconds spent spinning in all.
    spun_ns: AtomicU64,
    /// Told each time the task parks.
    parked: Notify,
}

impl Shared {
    fn now(&self) -> u64 {
        (self.origin.elapsed().as_nanos() as u64).max(1)
    }

    fn since_last(&self) -> Duration {
        match self.last.load(Ordering::SeqCst) {
            0 => Duration::MAX,
            last => Duration::from_nanos(self.now().saturating_sub(last)),
        }
    }
}

impl BusyPoll {
    /// Starts the spinner on the current tokio runtime, parked until the first touch.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(budget: Duration) -> Self {
        let shared = Arc::new(Shared {
            budget: budget.min(MAX_BUDGET),
            origin: Instant::now(),
            last: AtomicU64::new(0),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            spinning: AtomicBool::new(false),
            spun_ns: AtomicU64::new(0),
            parked: Notify::new(),
        });
        tokio::spawn(spin(Arc::clone(&shared)));
        BusyPoll {
            guard: Arc::new(Guard(shared)),
        }
    }

    /// A message went out or came in: spin for the budget from now.
    pub fn touch(&self) {
        let shared = &self.guard.0;
        shared.last.fetch_max(shared.now(), Ordering::SeqCst);
        // SeqCst with the spinner's store of `spinning` and load of `last`: either it sees this
        // touch before it parks, or this sees it parked and wakes it
        if !shared.spinning.load(Ordering::SeqCst) {
            shared.wake.notify_one();
        }
    }

    /// How long it spins after a touch.
    pub fn budget(&self) -> Duration {
        self.guard.0.budget
    }

    /// Whether it is spinning now.
    pub fn is_spinning(&self) -> bool {
        self.guard.0.spinning.load(Ordering::Acquire)
    }

    /// The time spent spinning since it started.
    pub fn spun(&self) -> Duration {
        Duration::from_nanos(self.guard.0.spun_ns.load(Ordering::Relaxed))
    }

    /// Resolves once the spinner is parked (at once if it is).
    pub async fn parked(&self) {
        let shared = &self.guard.0;
        loop {
            let parked = shared.parked.notified();
            tokio::pin!(parked);
            parked.as_mut().enable();
            if !shared.spinning.load(Ordering::Acquire) {
                return;
            }
            parked.await;
        }
    }
}

async fn spin(shared: Arc<Shared>) {
    loop {
        let woken = shared.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if shared.closed.load(Ordering::Acquire) {
            return;
        }
        if shared.since_last() >= shared.budget {
            woken.await;
            if shared.closed.load(Ordering::Acquire) {
                return;
            }
        }
        shared.spinning.store(true, Ordering::Release);
        let began = Instant::now();
        let mut polls: u32 = 0;
        while shared.since_last() < shared.budget && !shared.closed.load(Ordering::Acquire) {
            tokio::task::yield_now().await;
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(POLLS_BEFORE_YIELD) {
                // and to the kernel now and then: a thread it shares a core with (the other end
                // of the connection on a small machine, spinning too) then runs within a few
                // polls, not at the end of this thread's time slice (BENCHMARKS.md)
                std::thread::yield_now();
            }
        }
        shared
            .spun_ns
            .fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
        shared.spinning.store(false, Ordering::SeqCst);
        shared.parked.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_whole_microseconds_up_to_a_second() {
        assert_eq!(parse_micros("50"), Ok(Duration::from_micros(50)));
        assert_eq!(parse_micros("0"), Ok(Duration::ZERO));
        assert_eq!(parse_micros("1000000"), Ok(MAX_BUDGET));
        assert!(parse_micros("1000001")
            .unwrap_err()
            .contains("most allowed"));
        assert!(parse_micros("-3")
            .unwrap_err()
            .contains("not a whole number"));
        assert!(parse_micros("1.5")
            .unwrap_err()
            .contains("not a whole number"));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_touch_spins_for_the_budget_then_the_spinner_parks() {
        let busy = BusyPoll::start(Duration::from_millis(20));
        busy.parked().await;
        assert_eq!(busy.spun(), Duration::ZERO, "it spins only after a touch");
        let touched = Instant::now();
        busy.touch();
        // let the spinner run: it yields, so this task runs between its turns
        tokio::task::yield_now().await;
        assert!(busy.is_spinning());
        busy.parked().await;
        let over = touched.elapsed();
        let spun = busy.spun();
        assert!(
            over >= Duration::from_millis(20),
            "it parked {over:?} after the touch, within its budget"
        );
        assert!(
            spun > Duration::ZERO && spun <= over,
            "it spun {spun:?} of the {over:?} since the touch"
        );
        // parked: no more spinning without a touch
        tokio::task::yield_now().await;
        assert!(!busy.is_spinning());
        assert_eq!(busy.spun(), spun);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn while_it_spins_other_tasks_and_timers_still_run() {
        let busy = BusyPoll::start(MAX_BUDGET);
        busy.touch();
        tokio::task::yield_now().await;
        assert!(busy.is_spinning());
        // a timer and a spawned task complete while it spins, on this one thread
        tokio::time::sleep(Duration::from_millis(5)).await;
        let answer = tokio::spawn(async { 42 }).await.unwrap();
        assert_eq!(answer, 42);
        let (sender, receiver) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || sender.send("from another thread"));
        assert_eq!(receiver.await.unwrap(), "from another thread");
        assert!(busy.is_spinning(), "still within its budget");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn dropping_the_last_handle_stops_the_task() {
        let busy = BusyPoll::start(Duration::from_secs(1));
        let shared = Arc::clone(&busy.guard.0);
        busy.touch();
        tokio::task::yield_now().await;
        assert!(shared.spinning.load(Ordering::Acquire));
        drop(busy);
        // the task sees `closed` at its next turn and ends, long before its budget
        while Arc::strong_count(&shared) > 1 {
            tokio::task::yield_now().await;
        }
        assert!(!shared.spinning.load(Ordering::Acquire));
        assert!(shared.since_last() < Duration::from_secs(1));
    }
}
