//! The target engine's lock table against a reference model written here, step by step.
//!
//! The model states the rules the plain way (MPI §11.5.3, SEMANTICS.md §4.3, `locks.rs`):
//! - holders: any number of shared holders or one exclusive holder; a `MPI_MODE_NOCHECK`
//!   request is granted at once and its holder is ignored by compatibility;
//! - one queue of waiting requests in arrival order; a waiter may be granted when no
//!   conflicting lock is held and, if exclusive, no request ahead of it still waits (writers in
//!   arrival order), or if shared, no exclusive request waits ahead of it — unless its origin
//!   holds locks elsewhere (`lock_all`, several lock epochs) or it already waited `FAIRNESS`;
//!   waiters are granted, first in queue order, until none may be;
//! - what an origin sends is taken in order: an unlock that arrives before its lock's grant
//!   waits for the grant, and is carried out once the grants of that moment are made;
//! - a departed session's lock is revoked and what it had waiting is failed.
//!
//! Random programs of lock/unlock and lock_all/unlock_all epochs from several origins, with
//! time passing (the timer fires at the engine's deadline, as the actor's does) and sessions
//! ending, go to both. After every step the holders, the waiters (in order), the grants and
//! releases of the step, every answer and the next deadline must be the same, and fencing
//! tokens must count up by one per grant. Then every program must run to its end.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use onesided_core::audit::Event;
use onesided_core::epoch::{LockRequest, LockType};
use onesided_core::target::{Access, Departure, Input, Outcome, Target};
use onesided_core::ErrorClass;
use proptest::prelude::*;

use super::{answered, target, FAIRNESS};

/// One passive-target epoch of an origin at this target.
#[derive(Clone, Copy, Debug)]
struct Epoch {
    lock_type: LockType,
    nocheck: bool,
    /// `lock_all` (a shared lock at every target from the call on), or a lock epoch opened
    /// while the origin has others open: the request is never held back.
    elsewhere: bool,
    /// Eager (the origin's own rank): the request is answered at its grant.
    eager: bool,
    /// The origin waits for the grant before it unlocks (an eager lock, or a get whose result
    /// it waits for); otherwise the unlock travels right behind the request.
    waits: bool,
}

/// What the engine's or the model's answer said, without the token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    Granted,
    Done,
    Failed(ErrorClass),
}

#[derive(Debug)]
struct Waiting {
    origin: u32,
    incarnation: u64,
    lock_type: LockType,
    elsewhere: bool,
    since: Instant,
    grant: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held {
    incarnation: u64,
    lock_type: LockType,
    nocheck: bool,
}

/// What one step did, as the model says or as the engine's effects show.
#[derive(Debug, Default, PartialEq, Eq)]
struct Step {
    /// Origins granted, with the lock type, sorted.
    grants: Vec<(u32, &'static str)>,
    /// Origins whose lock was released by an unlock, sorted.
    released: Vec<u32>,
    /// Origins whose lock was revoked at their departure.
    revoked: Vec<u32>,
    /// Every answer, by reply.
    answers: BTreeMap<u64, Said>,
}

/// The reference model of one target's locks.
#[derive(Debug, Default)]
struct Model {
    holders: BTreeMap<u32, Held>,
    queue: Vec<Waiting>,
    /// Unlocks that arrived before their lock was granted: origin → reply.
    unlocks: BTreeMap<u32, u64>,
    step: Step,
}

impl Model {
    fn conflicting_held(&self, lock_type: LockType) -> bool {
        self.holders.values().any(|held| {
            !held.nocheck
                && (lock_type == LockType::Exclusive || held.lock_type == LockType::Exclusive)
        })
    }

    /// A shared waiter at `index` that is held back at `now` only by the fairness rule.
    fn held_back(&self, index: usize, now: Instant) -> bool {
        let waiter = &self.queue[index];
        waiter.lock_type == LockType::Shared
            && !waiter.elsewhere
            && self.queue[..index]
                .iter()
                .any(|ahead| ahead.lock_type == LockType::Exclusive)
            && now < waiter.since + FAIRNESS
    }

    fn may_grant(&self, index: usize, now: Instant) -> bool {
        let waiter = &self.queue[index];
        if self.conflicting_held(waiter.lock_type) {
            return false;
        }
        match waiter.lock_type {
            LockType::Exclusive => index == 0,
            LockType::Shared => !self.held_back(index, now),
        }
    }

    fn hold(&mut self, origin: u32, held: Held, grant: Option<u64>) {
        self.holders.insert(origin, held);
        self.step.grants.push((origin, held.lock_type.name()));
        if let Some(reply) = grant {
            self.step.answers.insert(reply, Said::Granted);
        }
    }

    fn release(&mut self, origin: u32, reply: u64) {
        self.holders.remove(&origin);
        self.step.released.push(origin);
        self.step.answers.insert(reply, Said::Done);
    }

    /// Grants what may be granted; then an unlock that waited for its grant is carried out,
    /// and so on until nothing changes.
    fn settle(&mut self, now: Instant) {
        loop {
            while let Some(index) = (0..self.queue.len()).find(|&index| self.may_grant(index, now))
            {
                let waiter = self.queue.remove(index);
                let held = Held {
                    incarnation: waiter.incarnation,
                    lock_type: waiter.lock_type,
                    nocheck: false,
                };
                self.hold(waiter.origin, held, waiter.grant);
            }
            let Some((&origin, &reply)) = self
                .unlocks
                .iter()
                .find(|(origin, _)| self.holders.contains_key(origin))
            else {
                return;
            };
            self.unlocks.remove(&origin);
            self.release(origin, reply);
        }
    }

    fn request(
        &mut self,
        origin: u32,
        incarnation: u64,
        epoch: Epoch,
        grant: Option<u64>,
        now: Instant,
    ) {
        if epoch.nocheck {
            let held = Held {
                incarnation,
                lock_type: epoch.lock_type,
                nocheck: true,
            };
            self.hold(origin, held, grant);
        } else {
            self.queue.push(Waiting {
                origin,
                incarnation,
                lock_type: epoch.lock_type,
                elsewhere: epoch.elsewhere,
                since: now,
                grant,
            });
        }
        self.settle(now);
    }

    fn unlock(&mut self, origin: u32, reply: u64, now: Instant) {
        if self.holders.contains_key(&origin) {
            self.release(origin, reply);
        } else {
            self.unlocks.insert(origin, reply);
        }
        self.settle(now);
    }

    fn depart(&mut self, origin: u32, now: Instant) {
        if self.holders.remove(&origin).is_some() {
            self.step.revoked.push(origin);
        }
        let failed = Said::Failed(ErrorClass::ProcFailed);
        for waiter in self.queue.iter().filter(|waiter| waiter.origin == origin) {
            if let Some(reply) = waiter.grant {
                self.step.answers.insert(reply, failed);
            }
        }
        self.queue.retain(|waiter| waiter.origin != origin);
        if let Some(reply) = self.unlocks.remove(&origin) {
            self.step.answers.insert(reply, failed);
        }
        self.settle(now);
    }

    /// When a held-back request's fairness wait ends, if one is held back only by it.
    fn deadline(&self, now: Instant) -> Option<Instant> {
        (0..self.queue.len())
            .filter(|&index| {
                !self.conflicting_held(self.queue[index].lock_type) && self.held_back(index, now)
            })
            .map(|index| self.queue[index].since + FAIRNESS)
            .min()
    }

    fn take_step(&mut self) -> Step {
        let mut step = std::mem::take(&mut self.step);
        step.grants.sort_unstable();
        step.released.sort_unstable();
        step
    }
}

/// Where an origin's program stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Next: the request of its next epoch.
    Idle,
    /// Requested; next: the unlock.
    Requested,
    /// Unlocked; waits for the unlock's answer.
    Unlocking(u64),
}

#[derive(Debug)]
struct Origin {
    program: Vec<Epoch>,
    next: usize,
    phase: Phase,
    incarnation: u64,
    replies: u64,
}

/// The engine and the model side by side, with the origins' programs.
struct Run {
    engine: Target<u64>,
    model: Model,
    origins: Vec<Origin>,
    now: Instant,
    last_token: u64,
}

impl Run {
    fn new(programs: Vec<Vec<Epoch>>) -> Self {
        let engine = target(0, programs.len() as u32, 8);
        let now = Instant::now();
        Run {
            engine,
            model: Model::default(),
            origins: programs
                .into_iter()
                .map(|program| Origin {
                    program,
                    next: 0,
                    phase: Phase::Idle,
                    incarnation: 1,
                    replies: 0,
                })
                .collect(),
            now,
            last_token: 0,
        }
    }

    fn reply(&mut self, origin: usize) -> u64 {
        let state = &mut self.origins[origin];
        state.replies += 1;
        origin as u64 * 1_000_000 + state.replies
    }

    fn may_move(&self, origin: usize) -> bool {
        let state = &self.origins[origin];
        match state.phase {
            Phase::Idle => state.next < state.program.len(),
            Phase::Requested => {
                !state.program[state.next].waits
                    || self.model.holders.contains_key(&(origin as u32))
            }
            Phase::Unlocking(_) => false,
        }
    }

    fn finished(&self) -> bool {
        self.origins
            .iter()
            .all(|state| state.phase == Phase::Idle && state.next == state.program.len())
    }

    /// The origin's next message, to both.
    fn move_origin(&mut self, origin: usize) -> Result<(), TestCaseError> {
        let rank = origin as u32;
        let state = &self.origins[origin];
        let (epoch, incarnation, phase) =
            (state.program[state.next], state.incarnation, state.phase);
        let item = match phase {
            Phase::Idle => {
                let grant = epoch.eager.then(|| self.reply(origin));
                self.model
                    .request(rank, incarnation, epoch, grant, self.now);
                self.origins[origin].phase = Phase::Requested;
                Access::LockRequest {
                    request: LockRequest {
                        lock_type: epoch.lock_type,
                        nocheck: epoch.nocheck,
                    },
                    holding_elsewhere: epoch.elsewhere,
                    grant,
                }
            }
            Phase::Requested => {
                let reply = self.reply(origin);
                self.model.unlock(rank, reply, self.now);
                self.origins[origin].phase = Phase::Unlocking(reply);
                Access::Unlock { reply }
            }
            Phase::Unlocking(_) => unreachable!("an origin waiting for its unlock does not move"),
        };
        let input = Input::Access {
            origin: rank,
            incarnation,
            item,
        };
        let what =
            format!("rank {origin} (incarnation {incarnation}) sends {epoch:?} in {phase:?}");
        self.engine.handle(input, self.now);
        self.compare(&what)
    }

    /// The origin's session ends; a new one goes on with its next epoch.
    fn depart(&mut self, origin: usize) -> Result<(), TestCaseError> {
        let state = &mut self.origins[origin];
        let incarnation = state.incarnation;
        if state.phase != Phase::Idle {
            state.next += 1;
        }
        state.phase = Phase::Idle;
        state.incarnation += 1;
        self.model.depart(origin as u32, self.now);
        let input = Input::Departed(Departure {
            origin: origin as u32,
            incarnation,
            reason: "stream broke".to_string(),
            active: false,
            vanished: false,
            fenced: None,
        });
        self.engine.handle(input, self.now);
        self.compare(&format!("rank {origin} departs"))
    }

    /// Time passes by `by`; the timer fires at every deadline on the way, as the actor's does.
    fn pass(&mut self, by: Duration) -> Result<(), TestCaseError> {
        let until = self.now + by;
        while let Some(deadline) = self.engine.next_deadline(self.now) {
            if deadline > until {
                break;
            }
            self.tick(deadline)?;
        }
        self.now = until;
        Ok(())
    }

    fn tick(&mut self, at: Instant) -> Result<(), TestCaseError> {
        self.now = at;
        self.model.settle(at);
        self.engine.tick(at);
        self.compare("tick")
    }

    /// The engine's state and effects against the model's.
    fn compare(&mut self, what: &str) -> Result<(), TestCaseError> {
        let effects = self.engine.take_effects();
        let mut seen = Step::default();
        let mut tokens = BTreeMap::new();
        for event in &effects.events {
            match event {
                Event::LockGrant {
                    origin,
                    lock_type,
                    token,
                } => {
                    prop_assert_eq!(
                        *token,
                        self.last_token + 1,
                        "{}: tokens count up by one",
                        what
                    );
                    self.last_token = *token;
                    tokens.insert(*origin, *token);
                    let name = if lock_type == "exclusive" {
                        "exclusive"
                    } else {
                        "shared"
                    };
                    seen.grants.push((*origin, name));
                }
                Event::LockRelease { origin, .. } => seen.released.push(*origin),
                Event::LockRevoke { origin, .. } => seen.revoked.push(*origin),
                _ => {}
            }
        }
        seen.grants.sort_unstable();
        seen.released.sort_unstable();
        for (reply, answer) in answered(&effects) {
            let said = match answer {
                Ok(Outcome::Synced { token, .. }) => {
                    let origin = (reply / 1_000_000) as u32;
                    prop_assert_eq!(
                        Some(&token),
                        tokens.get(&origin),
                        "{}: the grant's answer carries its token",
                        what
                    );
                    Said::Granted
                }
                Ok(Outcome::Done) => Said::Done,
                Ok(other) => {
                    return Err(TestCaseError::fail(format!("{what}: answered {other:?}")))
                }
                Err(error) => Said::Failed(error.class),
            };
            prop_assert!(
                seen.answers.insert(reply, said).is_none(),
                "{}: {} answered twice",
                what,
                reply
            );
        }
        let expected = self.model.take_step();
        prop_assert_eq!(&seen, &expected, "{}: what the step did", what);

        let view = self.engine.inspect(self.now);
        let holders: BTreeMap<u32, Held> = view
            .holders
            .iter()
            .map(|holder| {
                let held = Held {
                    incarnation: holder.incarnation,
                    lock_type: holder.lock_type,
                    nocheck: holder.nocheck,
                };
                (holder.origin, held)
            })
            .collect();
        prop_assert_eq!(&holders, &self.model.holders, "{}: holders", what);
        let waiters: Vec<_> = view
            .waiters
            .iter()
            .map(|waiter| (waiter.origin, waiter.incarnation, waiter.lock_type))
            .collect();
        let queue: Vec<_> = self
            .model
            .queue
            .iter()
            .map(|waiter| (waiter.origin, waiter.incarnation, waiter.lock_type))
            .collect();
        prop_assert_eq!(waiters, queue, "{}: waiters in arrival order", what);
        for holder in &view.holders {
            if let Some(token) = tokens.get(&holder.origin) {
                prop_assert_eq!(holder.token, *token, "{}: the holder's token", what);
            }
        }
        prop_assert_eq!(
            self.engine.next_deadline(self.now),
            self.model.deadline(self.now),
            "{}: next deadline",
            what
        );

        // an unlock's answer lets its origin go on
        for state in &mut self.origins {
            if let Phase::Unlocking(reply) = state.phase {
                if expected.answers.contains_key(&reply) {
                    state.phase = Phase::Idle;
                    state.next += 1;
                }
            }
        }
        Ok(())
    }
}

fn epoch() -> impl Strategy<Value = Epoch> {
    // mostly plain lock epochs (a quarter of them with other lock epochs open), one in eight
    // under NOCHECK
    let lock = (any::<bool>(), 0u8..4, any::<bool>(), any::<bool>(), 0u8..8).prop_map(
        |(exclusive, elsewhere, eager, waits, rare)| Epoch {
            lock_type: if exclusive {
                LockType::Exclusive
            } else {
                LockType::Shared
            },
            nocheck: rare == 0,
            elsewhere: elsewhere == 0,
            eager,
            waits: waits || eager,
        },
    );
    // lock_all: a shared request that is never held back, eager at the origin's own rank
    let lock_all = (any::<bool>(), any::<bool>(), 0u8..8).prop_map(|(eager, waits, rare)| Epoch {
        lock_type: LockType::Shared,
        nocheck: rare == 0,
        elsewhere: true,
        eager,
        waits: waits || eager,
    });
    prop_oneof![4 => lock, 1 => lock_all]
}

/// One move of the schedule: who moves (an origin, the clock, or a departure), and how much
/// time passes first: often none or little, sometimes more than `FAIRNESS`.
fn schedule() -> impl Strategy<Value = Vec<(u8, u8)>> {
    let millis = prop_oneof![2 => Just(0u8), 2 => 0u8..10, 1 => 0u8..80];
    proptest::collection::vec((any::<u8>(), millis), 1..240)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]
    #[test]
    fn the_lock_table_grants_exactly_what_the_reference_model_grants(
        programs in proptest::collection::vec(proptest::collection::vec(epoch(), 1..8), 2..7),
        moves in schedule(),
    ) {
        let mut run = Run::new(programs);
        let nranks = run.origins.len();
        for (pick, millis) in moves {
            run.pass(Duration::from_millis(u64::from(millis)))?;
            let pick = usize::from(pick);
            // mostly origins; sometimes only the clock; rarely a session ends
            match pick % 16 {
                0..=11 => {
                    let origin = (0..nranks)
                        .map(|offset| (pick + offset) % nranks)
                        .find(|&origin| run.may_move(origin));
                    if let Some(origin) = origin {
                        run.move_origin(origin)?;
                    }
                }
                12..=14 => run.tick(run.now)?,
                _ => run.depart(pick / 16 % nranks)?,
            }
        }
        // then everyone runs to the end: waiting only ever ends in a grant
        let mut rounds = 0;
        while !run.finished() {
            rounds += 1;
            prop_assert!(rounds < 10_000, "no end in sight");
            match (0..nranks).find(|&origin| run.may_move(origin)) {
                Some(origin) => run.move_origin(origin)?,
                None => {
                    let deadline = run.engine.next_deadline(run.now);
                    prop_assert!(deadline.is_some(), "stuck: nobody may move and no timer is due: {:?}", run.model);
                    run.pass(deadline.unwrap_or(run.now) - run.now)?;
                }
            }
        }
        prop_assert_eq!(run.engine.busy(), None);
    }
}
