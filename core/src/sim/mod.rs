//! A deterministic simulator: a world of origin and target engines wired in memory, no
//! network, no clock, no threads.
//!
//! Owns: running ranks' programs through exactly what the server runs — `origin::admit`,
//! `origin::route` and `Target::handle` — with one inbox per target (taken in order, but for
//! the inputs MPI and a network let overtake: `may_overtake`; the fence's notice keeps its
//! place, each channel its order), each rank's private copy ([`PrivateCopy`]) pushed and pulled where
//! the route and the answers say, or earlier, and a [`Schedule`] that chooses every
//! nondeterministic step: which rank makes its next call, which target takes which input of its
//! inbox, which answer reaches its origin next, whether a rank's unpublished stores travel to
//! its public copy now ([`Choice::Publish`]) and whether what operations changed in its public
//! copy reaches its private copy now ([`Choice::Refresh`]; both optional: rules 5 and 6 give
//! the latest point, earlier is allowed); when a call completes (`flush_local` waits for data
//! only); and, in a narrated world, what each step did in words (`narrate.rs`, for a replay
//! to print). Must not: decide an MPI rule (admission, routes, the target engine and
//! `AccumulateOrdering::orders` do), read a clock (the caller passes the one reading the
//! engines get; no time passes), or let anything but the schedule choose an order.
//!
//! The unified memory model runs as the separate one (stores and updates may cross between
//! the copies at any step, and must by the calls rules 5 and 6 name), and once the programs
//! ended its copies converge (`World::converge`: "eventually").
//!
//! A window may span part of the world (its group): its targets, inboxes and fence tally are
//! its own ranks', numbered in its group, and only its members open it. Programs address
//! window ranks in their calls, as the client's API does; everything a step says of a rank
//! of the world ([`Choice`], [`Ref`], [`Run::loads`], [`Stuck`]) names a world rank, and what
//! a window records or holds ([`Logged`], [`Run::publics`], [`Run::privates`], the targets'
//! inputs) its window rank.
//!
//! A rank may crash and attach again ([`Action::Crash`], [`Action::Rejoin`],
//! `incarnations.rs`): its departure reaches each target behind what it sent there, at a step
//! the schedule chooses, what it sent after the last answer it saw may be lost
//! ([`Choice::Lose`]), and the world's collectives (the barrier, a window's free and
//! `MPI_Win_set_info`) run through core's `Collectives`, which fails them for a departed
//! rank as the server's world actor does.
//!
//! Limits: the lock table without its fairness wait; an opening of a window by a new
//! incarnation keeps its place in every inbox (it could be taken after other origins' items
//! sent later: fewer orders, never one the server cannot produce).

mod action;
mod collectives;
mod copies;
mod exhaustive;
mod history;
mod incarnations;
mod narrate;
mod overtake;
mod regions;
mod requests;
mod schedule;
mod stuck;

pub use action::Action;
pub use exhaustive::{exhaustive, Enumeration};
pub use history::{Logged, STEP_NS};
pub use narrate::Happening;
pub use schedule::{Choice, Replay, Schedule, Seeded};
pub use stuck::{wait_cycle, Stuck};

use overtake::may_overtake;
use regions::DYNAMIC_MAX_BYTES;
use requests::Requests;

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::audit::Event;
use crate::collective::{Collective, Collectives};
use crate::epoch::EpochState;
use crate::fence::FenceTally;
use crate::origin::{
    self, Admitted, Call, Completes, Issuer, OpenState, OpenWindows, PrivateCopy, Step, To,
};
use crate::target::{Effects, Input, Outcome, Target};
use crate::window::{Flavor, MemoryModel, WindowDesc};
use crate::{ErrorClass, RmaError};

/// Where a target's answer goes: the rank, the call (its index in the rank's program) and
/// the kind of answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ref {
    /// The origin rank.
    pub rank: u32,
    /// The call's index in the rank's program.
    pub call: usize,
    /// The kind of answer.
    pub to: To,
}

/// What a run ended with.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Run {
    /// Every choice the schedule made, in order: with the same programs, replaying them gives
    /// the same run.
    pub trace: Vec<Choice>,
    /// Each `Load` of each rank: `(rank, label, bytes)`, in the order they happened.
    pub loads: Vec<(u32, String, Vec<u8>)>,
    /// The data each operation that returns data brought back: `(rank, call index, bytes)`.
    pub fetched: Vec<(u32, usize, Vec<u8>)>,
    /// Calls that failed: `(rank, call index, error)`. An operation its target refuses (one
    /// to a detached region, say) fails the call that completes it, as the client reports it:
    /// an unlock, a flush, a fence, a complete.
    pub errors: Vec<(u32, usize, RmaError)>,
    /// What each `test` answered: `(rank, call index, flag)`.
    pub flags: Vec<(u32, usize, bool)>,
    /// What each [`Action::WaitAny`] returned: `(rank, action index, position)`, -1 when
    /// every handle was null.
    pub indices: Vec<(u32, usize, i64)>,
    /// The audit events recorded, origin side and target side, in the order they happened,
    /// each numbered in its window's log (`history.rs`; [`Run::history`]).
    pub events: Vec<Logged>,
    /// Every window's public copies at the end, by window id, in window-rank order.
    pub publics: BTreeMap<u64, Vec<Vec<u8>>>,
    /// Every member's private copy at the end, by window id, in window-rank order.
    pub privates: BTreeMap<u64, Vec<Vec<u8>>>,
    /// The address of each region of a dynamic window attached ([`Action::Attach`]), by
    /// its name.
    pub regions: BTreeMap<String, u64>,
    /// The names of those regions that were detached by the end ([`Action::Detach`]).
    pub detached: std::collections::BTreeSet<String>,
    /// When no rank could move and some had not finished: each such rank, where it waits and
    /// for whom (a deadlock, or a program that never synchronizes), by rank.
    pub stuck: Vec<Stuck>,
    /// What each step of [`Run::trace`] did, one per step: filled by a narrated world only
    /// ([`World::narrated`]).
    pub narration: Vec<Happening>,
}

/// One window as the simulator holds it: its targets and inboxes by window rank.
struct SimWindow {
    desc: WindowDesc,
    targets: Vec<Target<Ref>>,
    inboxes: Vec<VecDeque<Input<Ref>>>,
    fences: FenceTally,
    /// The sequence number of its log's last event.
    logged: u64,
}

impl SimWindow {
    /// How many ranks it spans.
    fn size(&self) -> u32 {
        self.targets.len() as u32
    }

    /// The world rank of its rank `rank`.
    fn world_rank(&self, rank: u32) -> u32 {
        self.desc.group[rank as usize]
    }
}

/// A rank's state on one window.
struct Opened {
    /// Its rank in the window.
    me: u32,
    /// A dynamic window's regions the rank attached: offset in its memory → size.
    regions: BTreeMap<u64, u64>,
    epoch: EpochState,
    copy: PrivateCopy,
    next_cseq: u64,
    /// The last epoch whose closing fence it entered, as the server's session keeps it for
    /// the departure.
    fenced: Option<u64>,
}

/// A call a rank waits in.
struct Waiting {
    call: usize,
    window: u64,
    /// The call's own answer (or all its gathered shares) arrived.
    answered: bool,
    /// Shares still to come.
    shares: usize,
    /// The operations it completes.
    completes: Completes,
    /// It completes them at the origin only (`flush_local`, `flush_local_all`): it waits for
    /// the data of those that bring data back, not for the others' remote application.
    local: bool,
}

/// An operation issued: its window, its target and the bytes its answer brings back.
type Issued = (u64, u32, u64);

impl Waiting {
    /// Whether the call completes the operation `op` before it returns.
    fn completes_op(&self, &(window, target, returned): &Issued) -> bool {
        window == self.window && (!self.local || returned > 0) && self.completes.includes(target)
    }
}

struct Rank {
    program: Vec<Action>,
    next: usize,
    windows: BTreeMap<u64, Opened>,
    waiting: Option<Waiting>,
    /// Operations issued and not yet answered: call index → what it is.
    outstanding: BTreeMap<usize, Issued>,
    /// Operations answered with a failure the call that completes them has not reported.
    failed: Vec<(Issued, RmaError)>,
    /// Waiting in the world's barrier.
    in_barrier: bool,
    /// Its request-based operations: those waited for, and those that are null.
    requests: Requests,
    /// Waiting in this window's collective (`MPI_Win_set_info`).
    in_collective: Option<u64>,
    /// Its incarnation: 1, and one more each time it attaches again after a crash.
    incarnation: u64,
    /// The crash it has not attached again after: its action's index.
    crashed: Option<usize>,
    /// Departures of its crashed incarnation that targets have not taken yet: it may attach
    /// again once there are none.
    departing: usize,
    /// Its windows whose own target has not yet taken the new incarnation's opening: it goes
    /// on once there are none (its private copy is read from its public copy then).
    reopening: usize,
    /// The last of its actions the server is known to have received: one it saw answered
    /// (the session handles what a process sends in order). What it sent after may not have
    /// left its process when it crashed ([`Choice::Lose`]).
    acknowledged: Option<usize>,
}

/// A rank's open windows beside their descriptions, as admission reads them.
struct Admission<'a> {
    windows: &'a BTreeMap<u64, SimWindow>,
    opened: &'a mut BTreeMap<u64, Opened>,
}

impl OpenWindows for Admission<'_> {
    fn open(&mut self, id: u64) -> Option<OpenState<'_>> {
        let desc = &self.windows.get(&id)?.desc;
        self.opened.get_mut(&id).map(|open| OpenState {
            desc,
            epoch: &mut open.epoch,
            next_cseq: &mut open.next_cseq,
        })
    }
}

/// A world of ranks running programs on windows, in memory.
#[allow(missing_debug_implementations)] // its target engines are not `Debug`
pub struct World {
    windows: BTreeMap<u64, SimWindow>,
    ranks: Vec<Rank>,
    /// Answers on their way to their origins.
    answers: Vec<(Ref, crate::target::Answer)>,
    /// Each answer's number, in the order of `answers`: which one it is whatever was taken
    /// before it (`exhaustive.rs`).
    answer_ids: Vec<u64>,
    now: Instant,
    run: Run,
    strict: bool,
    narrated: bool,
    /// The address of each region attached, by name: what the program passes around.
    regions: BTreeMap<String, u64>,
    /// The windows' collectives (`MPI_Win_set_info`), as the server's world actor runs them:
    /// each reply is the rank and the action that waits.
    collectives: Collectives<(u32, usize)>,
}

impl World {
    /// A world in which every member of each of `windows` (of either memory model, over the
    /// whole world of `nranks` ranks or part of it) has opened it, public and private copies
    /// zeroed. `now` is the engines' clock reading, which never moves: no time passes in a
    /// simulated world.
    ///
    /// # Errors
    /// `MPI_ERR_GROUP` for a window whose group is empty, repeats a rank or names one outside
    /// the world; `MPI_ERR_ARG` for one whose sizes or displacement units are not one per
    /// member.
    pub fn new(nranks: u32, windows: Vec<WindowDesc>, now: Instant) -> Result<Self, RmaError> {
        let mut sims = BTreeMap::new();
        for desc in windows {
            let group = WindowDesc::validate_group(nranks, Some(&desc.group))?;
            let members = group.len();
            if desc.sizes.len() != members || desc.disp_units.len() != members {
                return Err(RmaError::new(
                    ErrorClass::Arg,
                    format!(
                        "window {} has {} member(s) but {} size(s) and {} displacement unit(s)",
                        desc.name,
                        members,
                        desc.sizes.len(),
                        desc.disp_units.len()
                    ),
                ));
            }
            let size = members as u32;
            let targets = (0..size)
                .map(|rank| {
                    let public = vec![0; desc.sizes[rank as usize] as usize];
                    let target = Target::new(rank, size, public, true, Duration::ZERO, now);
                    match desc.flavor {
                        Flavor::Dynamic => target.with_dynamic(DYNAMIC_MAX_BYTES, BTreeMap::new()),
                        _ => target,
                    }
                })
                .collect();
            sims.insert(
                desc.id,
                SimWindow {
                    targets,
                    inboxes: (0..size).map(|_| VecDeque::new()).collect(),
                    fences: FenceTally::new(size),
                    logged: 0,
                    desc,
                },
            );
        }
        let ranks = (0..nranks)
            .map(|rank| Rank {
                program: Vec::new(),
                next: 0,
                windows: sims
                    .values()
                    .filter_map(|window| {
                        let desc = &window.desc;
                        let me = desc.rank_of(rank)?;
                        let size = desc.sizes[me as usize] as usize;
                        let opened = Opened {
                            me,
                            regions: BTreeMap::new(),
                            epoch: EpochState::new(me, window.size(), desc.info.no_locks),
                            copy: PrivateCopy::new(size),
                            next_cseq: 1,
                            fenced: None,
                        };
                        Some((desc.id, opened))
                    })
                    .collect(),
                waiting: None,
                outstanding: BTreeMap::new(),
                failed: Vec::new(),
                in_barrier: false,
                requests: Requests::default(),
                in_collective: None,
                incarnation: 1,
                crashed: None,
                departing: 0,
                reopening: 0,
                acknowledged: None,
            })
            .collect();
        let mut world = World {
            windows: sims,
            ranks,
            answers: Vec::new(),
            answer_ids: Vec::new(),
            now,
            run: Run::default(),
            strict: false,
            narrated: false,
            collectives: Collectives::new(nranks),
            regions: BTreeMap::new(),
        };
        world.log_created();
        Ok(world)
    }

    /// A world that checks, as it goes, what the fuzz target relies on, and panics when it
    /// does not hold: a refused call changes nothing of its rank (epoch state, client chain,
    /// private copy), and an operation admission accepted is answered, when it succeeds,
    /// with exactly the bytes its access covers, and when it fails, never with a class
    /// admission checks (the engine applies without checking again).
    pub fn strict(mut self) -> Self {
        self.strict = true;
        self
    }

    /// A world that says in words what each step did ([`Run::narration`]), for a replay to
    /// print; it runs exactly as one that does not.
    pub fn narrated(mut self) -> Self {
        self.narrated = true;
        self
    }

    /// Runs `programs` (one per rank) to the end, or until no rank can move, each step chosen
    /// by `schedule`.
    pub fn run(mut self, programs: Vec<Vec<Action>>, schedule: &mut impl Schedule) -> Run {
        for (rank, program) in self.ranks.iter_mut().zip(programs) {
            rank.program = program;
        }
        loop {
            let choices = self.choices();
            if choices.is_empty() {
                break;
            }
            // early publications and refreshes alone do not keep a world going
            if choices.iter().all(Choice::optional) {
                break;
            }
            self.take(choices[schedule.pick(&choices) % choices.len()]);
        }
        self.finish()
    }

    /// Takes one step, kept in the trace.
    fn take(&mut self, choice: Choice) {
        self.run.trace.push(choice);
        match choice {
            Choice::Call { rank } => self.call(rank),
            Choice::Deliver { window, rank } => self.deliver(window, rank, 0),
            Choice::Overtake { window, rank, at } => self.deliver(window, rank, at),
            Choice::Lose { window, rank, at } => self.lose(window, rank, at),
            Choice::Answer { index } => self.answer(index),
            Choice::Publish { window, rank } => self.publish(window, rank),
            Choice::Refresh { window, rank } => self.refresh(window, rank),
        }
    }

    /// What may happen now, in a fixed order: ranks' calls, targets' inputs (the first of
    /// each inbox, then those that may overtake it), answers, then the optional steps: early
    /// publications of stores and early refreshes of private copies.
    fn choices(&self) -> Vec<Choice> {
        let mut choices = Vec::new();
        let crashed = self.ranks.iter().any(|rank| rank.crashed.is_some());
        for (rank, state) in self.ranks.iter().enumerate() {
            let free = state.waiting.is_none()
                && !state.in_barrier
                && state.in_collective.is_none()
                && state.departing == 0
                && state.reopening == 0
                && !state.awaits_requests();
            if free && state.next < state.program.len() {
                choices.push(Choice::Call { rank: rank as u32 });
            }
        }
        for (&window, sim) in &self.windows {
            let ordering = sim.desc.info.accumulate_ordering;
            for (owner, (inbox, &rank)) in sim.inboxes.iter().zip(&sim.desc.group).enumerate() {
                if !inbox.is_empty() {
                    choices.push(Choice::Deliver { window, rank });
                    let owner = owner as u32;
                    let overtaking =
                        (1..inbox.len()).filter(|&at| may_overtake(inbox, at, ordering, owner));
                    choices.extend(overtaking.map(|at| Choice::Overtake { window, rank, at }));
                    if crashed {
                        let group = &sim.desc.group;
                        let lost = (0..inbox.len()).filter(|&at| self.may_lose(inbox, group, at));
                        choices.extend(lost.map(|at| Choice::Lose { window, rank, at }));
                    }
                }
            }
        }
        choices.extend((0..self.answers.len()).map(|index| Choice::Answer { index }));
        for (&window, sim) in &self.windows {
            for (target, &rank) in sim.targets.iter().zip(&sim.desc.group) {
                let state = &self.ranks[rank as usize];
                if state.crashed.is_some() {
                    // no process: nothing to publish, no copy to refresh
                    continue;
                }
                let dirty = state
                    .windows
                    .get(&window)
                    .is_some_and(|o| !o.copy.dirty().is_empty());
                if dirty {
                    choices.push(Choice::Publish { window, rank });
                }
                if target.owner_behind() {
                    choices.push(Choice::Refresh { window, rank });
                }
            }
        }
        choices
    }

    /// Rank `rank` takes the next action of its program.
    fn call(&mut self, rank: u32) {
        let state = &mut self.ranks[rank as usize];
        let index = state.next;
        state.next += 1;
        if self.narrated {
            self.run.narration.push(narrate::began(rank, index));
        }
        let action = state.program[index].clone();
        if let Some(error) = action
            .window()
            .and_then(|window| self.outside(rank, window))
        {
            self.fail(rank, index, error);
            return;
        }
        let action = match action {
            Action::InRegion { name, action } => match self.in_region(rank, &name, *action) {
                Ok(action) => action,
                Err(error) => return self.fail(rank, index, error),
            },
            other => other,
        };
        if let Some(call) = self.region_call(&action) {
            return match call {
                Ok(call) => self.window_call(rank, index, call),
                Err(error) => self.fail(rank, index, error),
            };
        }
        let state = &mut self.ranks[rank as usize];
        match action {
            Action::Store {
                window,
                offset,
                bytes,
            } => {
                let stored = state.windows.get_mut(&window).and_then(|open| {
                    let end = offset.checked_add(bytes.len() as u64)?;
                    (end <= open.copy.len()).then(|| open.copy.store(offset as usize, &bytes, true))
                });
                match stored {
                    Some(_) => {
                        let ranges = vec![(offset, offset + bytes.len() as u64)];
                        self.log(window, rank, index, Event::Store { ranges });
                    }
                    None => self.fail(rank, index, range_error("store", window)),
                }
            }
            Action::Load {
                window,
                offset,
                len,
                label,
            } => {
                let loaded = state.windows.get(&window).and_then(|open| {
                    let end = offset.checked_add(len)?;
                    open.copy.bytes().get(offset as usize..end as usize)
                });
                match loaded {
                    Some(bytes) => {
                        self.run.loads.push((rank, label, bytes.to_vec()));
                        let ranges = vec![(offset, offset + len)];
                        self.log(window, rank, index, Event::Load { ranges });
                    }
                    None => self.fail(rank, index, range_error("load", window)),
                }
            }
            Action::Call(call) => self.window_call(rank, index, call),
            Action::WaitRequests { calls } => state.wait_all(calls),
            Action::TestRequests { calls } => {
                let flag = state.test_all(&calls);
                self.run.flags.push((rank, index, flag));
            }
            Action::WaitAny { calls } => {
                state.wait_any(index, calls);
                self.wait_any_returns(rank);
            }
            Action::SetInfo { window, info } => self.set_info(rank, index, window, &info),
            Action::FreeRequest { call, refusal } => {
                if !state.free_request(call) {
                    self.fail(rank, index, refusal);
                }
            }
            Action::Refuse { error } => self.fail(rank, index, error),
            Action::Crash => self.crash(rank, index),
            Action::Rejoin => self.rejoin(rank, index),
            // carried out above
            Action::Attach { .. } | Action::Detach { .. } | Action::InRegion { .. } => {}
            Action::Barrier => {
                state.in_barrier = true;
                self.log_open(rank, index, &Event::BarrierEnter);
                let effects = self
                    .collectives
                    .arrive(Collective::Barrier, rank, (rank, index));
                self.collective_answered(effects.answers);
            }
        }
    }

    fn window_call(&mut self, rank: u32, index: usize, call: Call) {
        let window = call.window();
        let state = &mut self.ranks[rank as usize];
        // its rank in the window (a window it is not in was refused before)
        let me = state.windows.get(&window).map_or(rank, |open| open.me);
        let before = self.strict.then(|| {
            let open = state.windows.get(&window);
            open.map(|open| (open.epoch.clone(), open.next_cseq, open.copy.clone()))
        });
        let (call, taken) = with_push(call, state.windows.get_mut(&window));
        let completes = call.completes();
        let local = matches!(
            call,
            Call::Flush { local: true, .. } | Call::FlushAll { local: true, .. }
        );
        let mut admission = Admission {
            windows: &self.windows,
            opened: &mut state.windows,
        };
        let flushed_local = history::flushed_local(&call);
        let admitted = origin::admit(&mut admission, me, call);
        let admitted = match admitted {
            Ok(admitted) => admitted,
            Err(error) => {
                put_back(state.windows.get_mut(&window), &taken);
                if let Some(before) = before {
                    let open = state.windows.get(&window);
                    let after =
                        open.map(|open| (open.epoch.clone(), open.next_cseq, open.copy.clone()));
                    assert!(after == before, "a refused call changed its rank: {error}");
                }
                self.fail(rank, index, error);
                return;
            }
        };
        // a fence or post that publishes nothing (NOSTORE) leaves the stores dirty
        if matches!(&admitted, Admitted::Fence { push, .. } | Admitted::Post { push, .. } if push.is_empty())
        {
            put_back(state.windows.get_mut(&window), &taken);
        }
        let is_op = matches!(admitted, Admitted::Op { .. });
        if let Admitted::Op {
            target, op, access, ..
        } = &admitted
        {
            let returned = if op.kind.returns_data() {
                access.bytes
            } else {
                0
            };
            state.outstanding.insert(index, (window, *target, returned));
        }
        let issuer = Issuer {
            id: index as u64,
            incarnation: state.incarnation,
            me,
            recording: true,
        };
        let route = origin::route(admitted, issuer);
        state.waiting = (!is_op).then_some(Waiting {
            call: index,
            window,
            answered: false,
            shares: route.gather,
            completes,
            local,
        });
        let caller = |to: To| -> Result<Ref, Infallible> {
            Ok(Ref {
                rank,
                call: index,
                to,
            })
        };
        if let Some(event) = flushed_local {
            self.log(window, rank, index, event);
        }
        for step in route.steps {
            match step {
                Step::Log { event, answers } => {
                    self.log(window, rank, index, event);
                    if answers != origin::Answers::No {
                        self.answered(rank);
                    }
                }
                Step::Push(segments) => self.send(window, me, Input::Push { segments }),
                Step::Arrive(epoch) => {
                    if let Some(open) = self.ranks[rank as usize].windows.get_mut(&window) {
                        open.fenced = Some(epoch);
                    }
                    let Some(sim) = self.windows.get_mut(&window) else {
                        continue;
                    };
                    if sim.fences.arrive(me, epoch) {
                        for inbox in &mut sim.inboxes {
                            inbox.push_back(Input::FenceReached { epoch });
                        }
                    }
                }
                Step::Own(input) => {
                    let Ok(input) = input.try_map(caller);
                    self.send(window, me, input);
                }
                Step::Send { to, item } => {
                    let Ok(item) = item.try_map(caller);
                    let input = Input::Access {
                        origin: me,
                        incarnation: self.ranks[rank as usize].incarnation,
                        item,
                    };
                    self.send(window, to, input);
                }
                Step::Drain => {}
                Step::Free { barrier } => self.free(window, rank, index, barrier),
                Step::Answer => self.answered(rank),
            }
        }
        self.maybe_done(rank);
    }

    /// Puts `input` at the back of the inbox of `window`'s target of window rank `to`.
    ///
    /// # Panics
    /// When a route addresses a rank outside the window (the server's session would index
    /// past its actors: a bug of admission or of the route).
    fn send(&mut self, window: u64, to: u32, input: Input<Ref>) {
        if let Some(sim) = self.windows.get_mut(&window) {
            let inbox = sim.inboxes.get_mut(to as usize);
            let inbox = inbox.unwrap_or_else(|| panic!("a route addresses rank {to}"));
            inbox.push_back(input);
        }
    }

    /// Takes the input at place `at` of rank `rank`'s target's inbox of `window` out: its
    /// window rank, the input, and what a narration says of its taking.
    fn take_input(
        &mut self,
        window: u64,
        rank: u32,
        at: usize,
    ) -> Option<(u32, Input<Ref>, Option<Happening>)> {
        let sim = self.windows.get_mut(&window)?;
        let me = sim.desc.rank_of(rank)?;
        let input = sim.inboxes[me as usize].remove(at)?;
        let happening = self
            .narrated
            .then(|| narrate::delivered(rank, &input, &sim.desc.group));
        Some((me, input, happening))
    }

    /// Rank `rank`'s target of `window` takes the input at place `at` of its inbox (0: the
    /// next); its answers set out to their origins.
    fn deliver(&mut self, window: u64, rank: u32, at: usize) {
        let Some((me, input, happening)) = self.take_input(window, rank, at) else {
            return;
        };
        if let Some(mut happening) = happening {
            if at > 0 {
                happening
                    .what
                    .push_str(&format!(", ahead of {at} input(s) sent before it"));
            }
            self.run.narration.push(happening);
        }
        let (departed, opened) = match &input {
            Input::Departed(left) => (Some(left.origin), None),
            Input::Opened { origin } => (None, Some(*origin)),
            _ => (None, None),
        };
        let Some(effects) = self.handle(window, me, input) else {
            return;
        };
        if let Some(origin) = departed {
            self.departure_taken(window, origin);
        }
        if opened == Some(me) {
            self.reopened(window, me);
        }
        for answers in [effects.early, effects.lazy, effects.answers, effects.behind] {
            let first = self.answer_ids.last().map_or(0, |id| id + 1);
            self.answer_ids.extend(first..first + answers.len() as u64);
            self.answers.extend(answers);
        }
    }

    /// `window`'s target of window rank `rank` takes `input`; its events are recorded, the
    /// rest of its effects returned.
    fn handle(&mut self, window: u64, rank: u32, input: Input<Ref>) -> Option<Effects<Ref>> {
        let target = &mut self.windows.get_mut(&window)?.targets[rank as usize];
        target.handle(input, self.now);
        let mut effects = target.take_effects();
        for event in std::mem::take(&mut effects.events) {
            self.log_target(window, rank, event);
        }
        Some(effects)
    }

    /// The answer at `index` reaches its origin.
    fn answer(&mut self, index: usize) {
        let (to, answer) = self.answers.remove(index);
        self.answer_ids.remove(index);
        if self.narrated {
            self.run.narration.push(narrate::answered(&to, &answer));
        }
        let rank = to.rank;
        let state = &mut self.ranks[rank as usize];
        if state.crashed.is_none() {
            state.acknowledged = state.acknowledged.max(Some(to.call));
        }
        if let Some(issued @ (_, _, returned)) = state.outstanding.remove(&to.call) {
            if self.strict {
                strictly_answered(&answer, returned);
            }
            match answer {
                Ok(Outcome::Data(data)) => self.run.fetched.push((rank, to.call, data)),
                Ok(_) => {}
                // reported by the call that completes it, as the client reports it
                Err(error) => state.failed.push((issued, error)),
            }
            self.wait_any_returns(rank);
            self.maybe_done(rank);
            return;
        }
        let Some(waiting) = state.waiting.as_mut().filter(|w| w.call == to.call) else {
            return;
        };
        let window = waiting.window;
        // what an attach or a detach changes once answered
        let region = match &answer {
            Ok(Outcome::Attached { base }) => Some(Some(*base)),
            Ok(Outcome::Done) => Some(None),
            _ => None,
        };
        match answer {
            Ok(Outcome::Synced { pull, flag, .. }) => {
                if let Some(open) = state.windows.get_mut(&window) {
                    open.copy.pull(pull);
                    if to.to == To::Origin {
                        open.epoch.tested(flag);
                        self.run.flags.push((rank, to.call, flag));
                    }
                }
            }
            Ok(_) => {}
            Err(error) => {
                self.run.errors.push((rank, to.call, error));
                if let Some(waiting) = self.ranks[rank as usize].waiting.as_mut() {
                    waiting.answered = true;
                    waiting.shares = 0;
                }
                self.maybe_done(rank);
                return;
            }
        }
        if to.to == To::Gathered {
            waiting.shares = waiting.shares.saturating_sub(1);
            if waiting.shares == 0 {
                waiting.answered = true;
            }
        } else {
            waiting.answered = true;
        }
        if let Some(base) = region {
            self.region_answered(rank, to.call, base);
        }
        self.maybe_done(rank);
    }

    /// The call rank `rank` waits in was answered (a step answered it).
    fn answered(&mut self, rank: u32) {
        let state = &mut self.ranks[rank as usize];
        if let Some(waiting) = state.waiting.as_mut() {
            waiting.answered = true;
            state.acknowledged = state.acknowledged.max(Some(waiting.call));
        }
    }

    /// Rank `rank` returns from the call it waits in once it was answered and every
    /// operation the call completes was answered too.
    fn maybe_done(&mut self, rank: u32) {
        let state = &mut self.ranks[rank as usize];
        let Some(waiting) = &state.waiting else {
            return;
        };
        let pending = state
            .outstanding
            .values()
            .any(|op| waiting.completes_op(op));
        if waiting.answered && !pending {
            let (action, window) = (waiting.call, waiting.window);
            // the first failure of what it completed is its own, unless it failed itself
            let (failed, kept) = std::mem::take(&mut state.failed)
                .into_iter()
                .partition::<Vec<_>, _>(|(op, _)| waiting.completes_op(op));
            state.failed = kept;
            state.waiting = None;
            let own = self.run.errors.iter().any(|e| (e.0, e.1) == (rank, action));
            if let Some((_, error)) = failed.into_iter().next().filter(|_| !own) {
                self.run.errors.push((rank, action, error));
            }
            self.log_returned(rank, action, window);
        }
    }

    /// Rank `rank` entered the free collective of `window` (`barrier`: whether its ranks
    /// wait for each other, as they do but on a `no_locks` window): the world's collectives
    /// say when it returns, and fail it when a member departed.
    fn free(&mut self, window: u64, rank: u32, call: usize, barrier: bool) {
        let Some(sim) = self.windows.get(&window) else {
            return;
        };
        let group = sim.desc.group.clone();
        let free = Collective::Free { window, barrier };
        let effects = self
            .collectives
            .arrive_group(free, rank, &group, (rank, call));
        self.collective_answered(effects.answers);
    }

    /// `MPI_ERR_GROUP` when rank `rank` is not a member of window `window` (it never opened
    /// it); `None` when it is, or when there is no such window (admission says so).
    fn outside(&self, rank: u32, window: u64) -> Option<RmaError> {
        let sim = self.windows.get(&window)?;
        let member = self.ranks[rank as usize].windows.contains_key(&window);
        (!member).then(|| {
            RmaError::new(
                ErrorClass::Group,
                format!(
                    "rank {rank} is not in the group of window {}",
                    sim.desc.name
                ),
            )
        })
    }

    fn fail(&mut self, rank: u32, call: usize, error: RmaError) {
        self.run.errors.push((rank, call, error));
    }

    fn finish(mut self) -> Run {
        self.converge();
        for rank in 0..self.ranks.len() as u32 {
            if let Some(stuck) = self.stuck(rank) {
                self.run.stuck.push(stuck);
            }
        }
        for (&id, sim) in &self.windows {
            let publics = sim.targets.iter().map(|t| t.public().to_vec()).collect();
            self.run.publics.insert(id, publics);
            let privates = sim
                .desc
                .group
                .iter()
                .map(|&rank| {
                    // a rank that crashed at the end has no private copy
                    let state = &self.ranks[rank as usize];
                    let open = state.windows.get(&id).filter(|_| state.crashed.is_none());
                    open.map(|open| open.copy.bytes().to_vec())
                        .unwrap_or_default()
                })
                .collect();
            self.run.privates.insert(id, privates);
        }
        self.run.regions = std::mem::take(&mut self.regions);
        self.run
    }
}

/// An operation's answer as a strict world demands it: `returned` bytes when it succeeds,
/// and no refusal of a kind admission checks.
fn strictly_answered(answer: &crate::target::Answer, returned: u64) {
    match answer {
        Ok(Outcome::Data(data)) => assert_eq!(data.len() as u64, returned, "the answer's length"),
        Ok(Outcome::Done) => assert_eq!(returned, 0, "no data came back"),
        Ok(other) => panic!("an operation answered {other:?}"),
        Err(error) => assert!(
            !matches!(
                error.class,
                ErrorClass::RmaRange
                    | ErrorClass::Type
                    | ErrorClass::Op
                    | ErrorClass::Count
                    | ErrorClass::Arg
                    | ErrorClass::Disp
                    | ErrorClass::Rank
            ),
            "admission accepted what the engine refuses: {error}"
        ),
    }
}

fn range_error(what: &str, window: u64) -> RmaError {
    RmaError::new(
        ErrorClass::RmaRange,
        format!("a {what} outside the private copy of window {window}"),
    )
}

/// `call` with the bytes it publishes ([`Call::push_mut`]) taken from the private copy, and
/// the ranges taken.
fn with_push(mut call: Call, open: Option<&mut Opened>) -> (Call, Vec<(u64, u64)>) {
    let (Some(open), Some(push)) = (open, call.push_mut()) else {
        return (call, Vec::new());
    };
    *push = open.copy.take_push();
    let taken = push
        .iter()
        .map(|s| (s.offset, s.offset + s.data.len() as u64))
        .collect();
    (call, taken)
}

/// Stores taken to publish by a call that did not publish them are dirty again.
fn put_back(open: Option<&mut Opened>, taken: &[(u64, u64)]) {
    if let Some(open) = open {
        for &(start, end) in taken {
            open.copy.mark_dirty(start, end);
        }
    }
}

/// Bytes as an operation's data.
pub fn data(bytes: &[u8]) -> Bytes {
    Bytes::copy_from_slice(bytes)
}
