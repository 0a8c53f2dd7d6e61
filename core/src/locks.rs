//! The lock table of one target: who holds a lock, who waits, and when a waiter is granted.
//!
//! Owns: MPI's lock compatibility (§11.5.3: any number of shared holders, or one exclusive;
//! `MPI_MODE_NOCHECK` holders are ignored), the grant order, and fencing tokens. Must not: do
//! I/O or read a clock — the caller passes `now`, and asks [`LockTable::next_deadline`] when to
//! call again.
//!
//! # Progress before fairness
//!
//! MPI's progress rule (§11.7.3, SEMANTICS.md §4.3): if no conflicting lock is *held*, a
//! lock/access/unlock sequence completes. A queue that makes shared requests wait behind a
//! waiting exclusive request (writer-fair FIFO) breaks that rule: when the exclusive request
//! itself waits for a shared holder, and that holder (through any chain of locks, barriers or
//! flushes) waits for the shared requester, nothing moves. Two `lock_all` epochs reading each
//! other while exclusive requests queue on both deadlock exactly so.
//!
//! So a waiter is granted as soon as no conflicting lock is held, with one bounded exception
//! that keeps writers from starving: a shared request that finds an exclusive request waiting
//! ahead of it is held back for at most `fairness` (the writer usually gets in first, since
//! shared holders usually release in far less time), and not at all when its origin holds, or
//! is deemed to hold, locks at other targets — a `lock_all` epoch holds a shared lock at every
//! target from the call on, as does an origin with several lock epochs open: its request is
//! exactly the kind the exclusive waiter may be waiting for. An exclusive request waits for
//! every request ahead of it (so exclusive requests are granted in arrival order). Every wait
//! therefore ends once the conflicting holders release, or `fairness` after it began.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::epoch::LockType;

/// How long a shared request may be held back behind a waiting exclusive one, unless told
/// otherwise.
pub const DEFAULT_FAIRNESS: Duration = Duration::from_millis(50);

/// A granted lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The holding session's incarnation.
    pub incarnation: u64,
    /// Shared or exclusive.
    pub lock_type: LockType,
    /// The fencing token of this grant.
    pub token: u64,
    /// Granted under `MPI_MODE_NOCHECK` (ignored by compatibility).
    pub nocheck: bool,
}

/// A request waiting for its grant.
#[derive(Debug)]
pub struct Waiter<G> {
    /// The requesting rank.
    pub origin: u32,
    /// Its session's incarnation.
    pub incarnation: u64,
    /// Shared or exclusive.
    pub lock_type: LockType,
    /// The origin holds, or is deemed to hold, locks at other targets of the window (a
    /// `lock_all` epoch, or several lock epochs): never held back behind waiting exclusive
    /// requests.
    pub holding_elsewhere: bool,
    /// When the request arrived.
    pub since: Instant,
    /// Whatever the caller needs at the grant (the answer of an eager lock).
    pub grant: G,
}

/// A waiter just granted, with its fencing token.
#[derive(Debug)]
pub struct Granted<G> {
    /// The request as it waited.
    pub waiter: Waiter<G>,
    /// The fencing token of the grant.
    pub token: u64,
}

/// Holders and waiters of one target's lock.
#[derive(Debug)]
pub struct LockTable<G> {
    holders: BTreeMap<u32, Holder>,
    queue: VecDeque<Waiter<G>>,
    next_token: u64,
    fairness: Duration,
}

impl<G> LockTable<G> {
    /// An empty table whose shared requests wait behind exclusive ones at most `fairness`.
    pub fn new(fairness: Duration) -> Self {
        LockTable {
            holders: BTreeMap::new(),
            queue: VecDeque::new(),
            next_token: 0,
            fairness,
        }
    }

    /// Whether this incarnation of `origin` holds a lock.
    pub fn holds(&self, origin: u32, incarnation: u64) -> bool {
        self.held_token(origin, incarnation).is_some()
    }

    /// The token of the lock this incarnation of `origin` holds.
    pub fn held_token(&self, origin: u32, incarnation: u64) -> Option<u64> {
        self.holders
            .get(&origin)
            .filter(|holder| holder.incarnation == incarnation)
            .map(|holder| holder.token)
    }

    /// The token of the lock `origin` holds (any incarnation), 0 if none.
    pub fn token_of(&self, origin: u32) -> u64 {
        self.holders.get(&origin).map_or(0, |holder| holder.token)
    }

    /// The holders, by rank.
    pub fn holders(&self) -> impl Iterator<Item = (u32, &Holder)> {
        self.holders
            .iter()
            .map(|(origin, holder)| (*origin, holder))
    }

    /// How many requests wait.
    pub fn waiting(&self) -> usize {
        self.queue.len()
    }

    fn compatible(&self, lock_type: LockType) -> bool {
        let mut checked = self.holders.values().filter(|holder| !holder.nocheck);
        match lock_type {
            LockType::Exclusive => checked.next().is_none(),
            LockType::Shared => checked.all(|holder| holder.lock_type == LockType::Shared),
        }
    }

    fn grant(&mut self, origin: u32, incarnation: u64, lock_type: LockType, nocheck: bool) -> u64 {
        self.next_token += 1;
        let token = self.next_token;
        self.holders.insert(
            origin,
            Holder {
                incarnation,
                lock_type,
                token,
                nocheck,
            },
        );
        token
    }

    /// Grants a `MPI_MODE_NOCHECK` request at once (the origin asserts that no conflicting
    /// lock is held or requested); returns its token.
    pub fn grant_nocheck(&mut self, origin: u32, incarnation: u64, lock_type: LockType) -> u64 {
        self.grant(origin, incarnation, lock_type, true)
    }

    /// Queues a request; [`LockTable::grant_ready`] grants it when it may be.
    pub fn request(&mut self, waiter: Waiter<G>) {
        self.queue.push_back(waiter);
    }

    /// Releases the lock this incarnation of `origin` holds, if it does.
    pub fn release(&mut self, origin: u32, incarnation: u64) -> Option<Holder> {
        if self.holds(origin, incarnation) {
            self.holders.remove(&origin)
        } else {
            None
        }
    }

    /// Removes the requests of this incarnation of `origin` (its session ended).
    pub fn drop_waiters(&mut self, origin: u32, incarnation: u64) -> Vec<Waiter<G>> {
        let (dropped, kept) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition(|waiter| waiter.origin == origin && waiter.incarnation == incarnation);
        self.queue = kept;
        dropped.into()
    }

    /// Removes every request (the window is freed).
    pub fn drain_waiters(&mut self) -> Vec<Waiter<G>> {
        self.queue.drain(..).collect()
    }

    /// Whether `waiter` is held back by the fairness rule at `now`, given whether an exclusive
    /// request waits ahead of it.
    fn held_back(&self, waiter: &Waiter<G>, exclusive_ahead: bool, now: Instant) -> bool {
        waiter.lock_type == LockType::Shared
            && exclusive_ahead
            && !waiter.holding_elsewhere
            && waiter
                .since
                .checked_add(self.fairness)
                .is_none_or(|end| now < end)
    }

    /// Grants, in queue order, every waiter that may be granted at `now`.
    pub fn grant_ready(&mut self, now: Instant) -> Vec<Granted<G>> {
        let mut granted = Vec::new();
        let mut index = 0;
        let mut waiting_ahead = false;
        let mut exclusive_ahead = false;
        while let Some(waiter) = self.queue.get(index) {
            let may = self.compatible(waiter.lock_type)
                && match waiter.lock_type {
                    LockType::Exclusive => !waiting_ahead,
                    LockType::Shared => !self.held_back(waiter, exclusive_ahead, now),
                };
            if !may {
                waiting_ahead = true;
                exclusive_ahead |= waiter.lock_type == LockType::Exclusive;
                index += 1;
                continue;
            }
            // a grant only adds a holder: no waiter skipped before it can become grantable
            let Some(waiter) = self.queue.remove(index) else {
                break;
            };
            let token = self.grant(waiter.origin, waiter.incarnation, waiter.lock_type, false);
            granted.push(Granted { waiter, token });
        }
        granted
    }

    /// The earliest moment after `now` at which [`LockTable::grant_ready`] would grant a
    /// request it would not grant at `now` without anything else happening (a shared request
    /// whose fairness wait ends); `None` when only a release or a new request can change
    /// anything.
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let mut exclusive_ahead = false;
        let mut deadline: Option<Instant> = None;
        for waiter in &self.queue {
            if self.compatible(waiter.lock_type) && self.held_back(waiter, exclusive_ahead, now) {
                if let Some(at) = waiter.since.checked_add(self.fairness) {
                    deadline = Some(deadline.map_or(at, |earlier| earlier.min(at)));
                }
            }
            exclusive_ahead |= waiter.lock_type == LockType::Exclusive;
        }
        deadline
    }
}

impl<G> LockTable<G> {
    /// The waiting requests, in arrival order (for inspection: what an operator sees).
    pub fn waiters(&self) -> impl Iterator<Item = &Waiter<G>> {
        self.queue.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(origin: u32, lock_type: LockType, elsewhere: bool, since: Instant) -> Waiter<()> {
        Waiter {
            origin,
            incarnation: 1,
            lock_type,
            holding_elsewhere: elsewhere,
            since,
            grant: (),
        }
    }

    fn origins(granted: &[Granted<()>]) -> Vec<u32> {
        granted.iter().map(|g| g.waiter.origin).collect()
    }

    const FAIR: Duration = Duration::from_millis(50);

    /// Origin 0 is granted a shared lock at once; then origin 1 asks for an exclusive one and
    /// origin 2 for a shared one (`elsewhere`: origins 0 and 2 hold locks at other targets).
    fn reader_then_writer_then_reader(t0: Instant, elsewhere: bool) -> LockTable<()> {
        let mut table = LockTable::new(FAIR);
        table.request(waiter(0, LockType::Shared, elsewhere, t0));
        assert_eq!(origins(&table.grant_ready(t0)), vec![0]);
        table.request(waiter(1, LockType::Exclusive, false, t0));
        table.request(waiter(2, LockType::Shared, elsewhere, t0));
        table
    }

    #[test]
    fn a_writer_waiting_for_a_reader_holds_back_later_readers_for_a_bounded_time() {
        let t0 = Instant::now();
        let mut table = reader_then_writer_then_reader(t0, false);
        assert!(table.grant_ready(t0).is_empty());
        assert_eq!(table.next_deadline(t0), Some(t0 + FAIR));
        // the reader releases in time: the writer goes first, then the reader
        table.release(0, 1).unwrap();
        assert_eq!(origins(&table.grant_ready(t0)), vec![1]);
        assert_eq!(table.next_deadline(t0), None, "the writer holds: no timer");
        table.release(1, 1).unwrap();
        assert_eq!(origins(&table.grant_ready(t0)), vec![2]);
    }

    #[test]
    fn a_held_back_reader_is_granted_once_its_fairness_wait_ends() {
        let t0 = Instant::now();
        let mut table = reader_then_writer_then_reader(t0, false);
        assert!(table.grant_ready(t0 + FAIR / 2).is_empty());
        assert_eq!(origins(&table.grant_ready(t0 + FAIR)), vec![2]);
        assert_eq!(table.next_deadline(t0 + FAIR), None);
    }

    #[test]
    fn an_origin_holding_locks_elsewhere_is_never_held_back() {
        let t0 = Instant::now();
        let mut table = reader_then_writer_then_reader(t0, true);
        assert_eq!(origins(&table.grant_ready(t0)), vec![2]);
    }

    #[test]
    fn exclusive_requests_are_granted_in_arrival_order_and_never_with_a_checked_holder() {
        let t0 = Instant::now();
        let mut table = LockTable::new(FAIR);
        for origin in 0..3 {
            table.request(waiter(origin, LockType::Exclusive, false, t0));
        }
        for (expected, origin) in (0..3).enumerate() {
            let granted = table.grant_ready(t0 + FAIR * 10);
            assert_eq!(origins(&granted), vec![origin], "{expected}");
            assert!(table.grant_ready(t0 + FAIR * 10).is_empty());
            table.release(origin, 1).unwrap();
        }
        // a NOCHECK holder does not count
        table.grant_nocheck(5, 1, LockType::Exclusive);
        table.request(waiter(6, LockType::Exclusive, false, t0));
        assert_eq!(origins(&table.grant_ready(t0)), vec![6]);
    }

    #[test]
    fn a_request_never_waits_past_its_fairness_when_no_conflicting_lock_is_held() {
        let t0 = Instant::now();
        let mut table = LockTable::new(FAIR);
        table.request(waiter(0, LockType::Exclusive, false, t0));
        table.grant_ready(t0);
        table.request(waiter(1, LockType::Shared, false, t0));
        table.request(waiter(2, LockType::Exclusive, false, t0));
        table.request(waiter(3, LockType::Shared, false, t0));
        // the exclusive holder blocks everyone; no timer is due for a blocked request
        assert!(table.grant_ready(t0 + FAIR * 3).is_empty());
        assert_eq!(table.next_deadline(t0 + FAIR * 3), None);
        table.release(0, 1).unwrap();
        // 1 is granted (nothing exclusive waits ahead of it); 3's wait is long over
        assert_eq!(origins(&table.grant_ready(t0 + FAIR * 3)), vec![1, 3]);
    }
}

/// Random interleavings of correct lock programs: every one completes, and no conflicting
/// locks are ever held together.
#[cfg(test)]
mod programs {
    use super::*;
    use proptest::prelude::*;

    /// One passive-target epoch of an origin: the locks it opens (target, type) and the order
    /// in which its accesses reach them (a lazy request travels with the first access).
    #[derive(Clone, Debug)]
    enum Epoch {
        /// `MPI_Win_lock` of one target.
        Lock(u32, LockType),
        /// Two lock epochs open at once, on different targets.
        Two([(u32, LockType); 2]),
        /// `MPI_Win_lock_all`, then accesses to these targets in this order.
        All(Vec<u32>),
    }

    /// What one origin does next.
    #[derive(Clone, Copy, Debug)]
    enum Step {
        /// Wait for (requesting first if need be) its lock at the target.
        Access(u32, LockType, bool),
        /// Release everything of the epoch.
        Release,
    }

    fn steps(origin: u32, epoch: &Epoch) -> Vec<Step> {
        let mut steps = match epoch {
            Epoch::Lock(target, lock_type) => vec![Step::Access(*target, *lock_type, false)],
            Epoch::Two(locks) => locks
                .iter()
                .map(|&(target, lock_type)| Step::Access(target, lock_type, true))
                .collect(),
            // lock_all takes the origin's own lock eagerly, then the others lazily
            Epoch::All(order) => std::iter::once(origin)
                .chain(order.iter().copied().filter(|&target| target != origin))
                .map(|target| Step::Access(target, LockType::Shared, true))
                .collect(),
        };
        steps.push(Step::Release);
        steps
    }

    /// Runs the origins' programs under `policy` tables, choosing who moves with `choices`.
    /// Returns `Err` with the stuck state when nobody can move and no deadline is due.
    fn run(
        ranks: u32,
        programs: &[Vec<Epoch>],
        choices: &[u32],
        seed: u64,
        fairness: Duration,
        honour_elsewhere: bool,
    ) -> Result<Duration, String> {
        let t0 = Instant::now();
        let mut now = Duration::ZERO;
        let mut tables: Vec<LockTable<()>> = (0..ranks).map(|_| LockTable::new(fairness)).collect();
        let mut plans: Vec<VecDeque<Step>> = programs
            .iter()
            .enumerate()
            .map(|(origin, epochs)| {
                epochs
                    .iter()
                    .flat_map(|epoch| steps(origin as u32, epoch))
                    .collect()
            })
            .collect();
        // per origin: targets whose request travelled in the current epoch
        let mut requested: Vec<Vec<u32>> = vec![Vec::new(); plans.len()];
        // a scripted start, then a pseudo-random schedule (xorshift) from `seed`
        let mut scripted = choices.iter();
        let mut state = seed | 1;
        let mut choice = move || {
            scripted.next().map_or_else(
                || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 32) as usize
                },
                |&c| c as usize,
            )
        };
        loop {
            let at = t0 + now;
            for table in &mut tables {
                table.grant_ready(at);
                let exclusive = table
                    .holders()
                    .filter(|(_, h)| h.lock_type == LockType::Exclusive)
                    .count();
                assert!(
                    exclusive == 0 || table.holders().count() == 1,
                    "conflicting holders"
                );
            }
            let runnable: Vec<usize> = (0..plans.len())
                .filter(|&origin| match plans[origin].front() {
                    None => false,
                    Some(Step::Release) => true,
                    Some(&Step::Access(target, ..)) => {
                        !requested[origin].contains(&target)
                            || tables[target as usize].holds(origin as u32, 1)
                    }
                })
                .collect();
            if plans.iter().all(VecDeque::is_empty) {
                return Ok(now);
            }
            if runnable.is_empty() {
                let due = tables
                    .iter()
                    .filter_map(|table| table.next_deadline(at))
                    .min();
                match due {
                    Some(due) => {
                        now = due - t0;
                        continue;
                    }
                    None => return Err(format!("stuck at {now:?}: {plans:?}")),
                }
            }
            // the chosen origin if it may move, else one of those that may
            let chosen = choice();
            let origin = if runnable.contains(&(chosen % plans.len())) {
                chosen % plans.len()
            } else {
                runnable[chosen % runnable.len()]
            };
            match plans[origin].front().copied() {
                Some(Step::Access(target, lock_type, elsewhere)) => {
                    if requested[origin].contains(&target) {
                        plans[origin].pop_front();
                    } else {
                        requested[origin].push(target);
                        tables[target as usize].request(Waiter {
                            origin: origin as u32,
                            incarnation: 1,
                            lock_type,
                            holding_elsewhere: elsewhere && honour_elsewhere,
                            since: at,
                            grant: (),
                        });
                    }
                }
                Some(Step::Release) => {
                    for target in requested[origin].drain(..) {
                        tables[target as usize].release(origin as u32, 1);
                    }
                    plans[origin].pop_front();
                }
                None => {}
            }
            // time passes a little with every step
            now += Duration::from_micros(100);
        }
    }

    fn lock_type() -> impl Strategy<Value = LockType> {
        prop_oneof![Just(LockType::Shared), Just(LockType::Exclusive)]
    }

    fn epoch(ranks: u32) -> impl Strategy<Value = Epoch> {
        prop_oneof![
            (0..ranks, lock_type()).prop_map(|(t, l)| Epoch::Lock(t, l)),
            // several locks at once only shared: an origin that holds one lock while it
            // waits for an exclusive one can deadlock with a real conflict (lock-order
            // inversion), which no policy resolves and MPI does not ask to
            (0..ranks, 1..ranks).prop_map(move |(a, d)| Epoch::Two([
                (a, LockType::Shared),
                ((a + d) % ranks, LockType::Shared)
            ])),
            Just((0..ranks).collect::<Vec<u32>>())
                .prop_shuffle()
                .prop_flat_map(|order| {
                    let n = order.len();
                    (Just(order), 0..=n)
                })
                .prop_map(|(order, n)| Epoch::All(order[..n].to_vec())),
        ]
    }

    fn world() -> impl Strategy<Value = (u32, Vec<Vec<Epoch>>, u64)> {
        (2u32..6).prop_flat_map(|ranks| {
            (
                Just(ranks),
                proptest::collection::vec(
                    proptest::collection::vec(epoch(ranks), 1..4),
                    ranks as usize,
                ),
                any::<u64>(),
            )
        })
    }

    /// Interleavings tried per generated program.
    const SCHEDULES: u64 = 32;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn every_correct_lock_program_completes((ranks, programs, seed) in world()) {
            for schedule in 0..SCHEDULES {
                let seed = seed.wrapping_add(schedule.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                let result = run(ranks, &programs, &[], seed, DEFAULT_FAIRNESS, true);
                prop_assert!(result.is_ok(), "seed {seed}: {result:?}");
            }
        }
    }

    /// The issue-11 instance: A and B in `lock_all`, C and D queue exclusive locks on A and
    /// B, then A and B read each other. Under the old policy (strict FIFO, no exemption) it
    /// deadlocks; under this one it completes without waiting for any fairness timer.
    #[test]
    fn lock_all_readers_do_not_queue_behind_writers_waiting_for_them() {
        let (a, b) = (0, 1);
        let programs = vec![
            vec![Epoch::All(vec![b])],
            vec![Epoch::All(vec![a])],
            vec![Epoch::Lock(a, LockType::Exclusive)],
            vec![Epoch::Lock(b, LockType::Exclusive)],
        ];
        // A and B take their own locks first, then C and D queue, then A and B read
        let choices = [0, 1, 0, 1, 2, 3, 0, 1];
        let old = run(4, &programs, &choices, 1, Duration::MAX, false);
        assert!(old.is_err(), "the old policy completed: {old:?}");
        let now = run(4, &programs, &choices, 1, DEFAULT_FAIRNESS, true).unwrap();
        assert!(now < DEFAULT_FAIRNESS, "waited for a timer: {now:?}");
    }
}
