//! Every distinct schedule of a world, once each: a depth-first walk over the choices with
//! sleep sets (Godefroid, "Partial-Order Methods for the Verification of Concurrent Systems",
//! 1996), stateless — each schedule runs again from a fresh world, replaying the choices of
//! the one before it up to where it branches off.
//!
//! Two steps are *independent* when neither writes state the other touches: a rank (its
//! program, epoch states, private copies, waits), a target's engine (and which input it takes
//! from its inbox), the back of a target's inbox, a window's fence and free tallies, the
//! world's barrier, the world's table of region addresses (an attach's answer writes it). Independent steps commute (either order, an equivalent world) and neither
//! disables the other, so of two schedules that differ only in the order of independent steps
//! one is enough. Two origins' items sent to one target are independent of each other (either
//! may be taken before the other: `may_overtake`) and of the target taking an input (it takes
//! from what was there); an input that is not an origin's item (a push, a fence's notice, the
//! owner's own inputs) keeps its place, so sending one writes the back of the inbox. The
//! footprint of a step is what it touched when it was taken (a call: its rank, every inbox it
//! sent to, the window's tallies for a fence or a free, and every rank when it completed the
//! barrier or the free; a crash, a new incarnation and the taking of a departure or an
//! opening touch everything). An optional step (an early publication or refresh) is independent of
//! nothing: the world ends once only optional steps are left, so one never follows the last
//! other step, and moving it past that step would lose it (`Part::Ends`). After a step is explored from a
//! point, it *sleeps* in the other branches from that point for as long as only steps
//! independent of it are taken; a branch in which every step that could be taken sleeps
//! repeats one already walked and is cut.
//!
//! Owns: what a step touches, the steps' identities across the schedules of one walk (a call
//! by its rank, an input by its target, its sender — an origin, or the owner's side — and how
//! many of that sender's are ahead of it, an answer by its number: places shift as others are
//! taken), and the walk. Must not: know what a step
//! means for MPI (the world carries it out), or cut a branch for any reason but a sleep set
//! or the bound.

use super::{Action, Choice, Ref, Run, World};
use crate::origin::Call;
use crate::target::Input;

/// What an exhaustive walk did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Enumeration {
    /// The distinct schedules run to their end (each handed to the caller).
    pub schedules: u64,
    /// Branches cut because every step they could take was asleep: repeats of schedules
    /// already run, in another order of independent steps.
    pub repeats: u64,
    /// Whether every distinct schedule ran; `false` when the walk stopped at its bound.
    pub complete: bool,
}

/// A step's identity, the same in every schedule in which it is the same step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Call(u32),
    /// Window, target, the sender (`None`: not an origin's item) and how many of its inputs
    /// are ahead of this one.
    Deliver(u64, u32, Option<u32>, usize),
    /// As `Deliver`, for the input lost instead ([`Choice::Lose`]).
    Lose(u64, u32, Option<u32>, usize),
    Answer(u64),
    Publish(u64, u32),
    Refresh(u64, u32),
}

/// A piece of the world's state a step may touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Rank(u32),
    /// The back of a target's inbox: an origin's item is sent reading it (two of them commute),
    /// any other input writing it.
    Back(u64, u32),
    Engine(u64, u32),
    Tallies(u64),
    Barrier,
    /// The world's table of region addresses: an attach's answer writes it, a detach and an
    /// action in a region read it.
    Regions,
    /// Whether the world ends: it does once every step it could take is optional (an early
    /// publication or refresh), so such a step never runs after the last other one, and an
    /// order that puts it before one cannot stand for an order that puts it after. Every step
    /// reads this, an optional one writes it: it is independent of nothing.
    Ends,
}

/// The parts a step touched, each with whether it wrote it.
type Footprint = Vec<(Part, bool)>;

fn independent(a: &[(Part, bool)], b: &[(Part, bool)]) -> bool {
    !a.iter()
        .any(|(part, wrote)| b.iter().any(|(p, w)| p == part && (*wrote || *w)))
}

fn wrote(parts: impl IntoIterator<Item = Part>) -> Footprint {
    parts.into_iter().map(|part| (part, true)).collect()
}

/// A point of the walk: the steps offered there, the one taken now and what it touched, the
/// steps asleep on arrival and those already explored from here.
struct Node {
    keys: Vec<Key>,
    taken: usize,
    touched: Footprint,
    asleep: Vec<(Key, Footprint)>,
    explored: Vec<(Key, Footprint)>,
}

impl Node {
    fn awake(&self, index: usize) -> bool {
        let key = self.keys[index];
        let sleeps = |list: &[(Key, Footprint)]| list.iter().any(|(k, _)| *k == key);
        !sleeps(&self.asleep) && !sleeps(&self.explored)
    }
}

/// Runs every distinct schedule of `programs` (one per rank) in worlds `world` makes (each
/// fresh, all alike), handing each run to `each`, until all ran or `bound` did.
pub fn exhaustive(
    world: impl Fn() -> World,
    programs: &[Vec<Action>],
    bound: u64,
    mut each: impl FnMut(Run),
) -> Enumeration {
    let mut done = Enumeration::default();
    let mut path: Vec<Node> = Vec::new();
    loop {
        if done.schedules >= bound {
            return done;
        }
        let mut world = world();
        for (rank, program) in world.ranks.iter_mut().zip(programs) {
            rank.program = program.clone();
        }
        if world.walk(&mut path) {
            done.schedules += 1;
            each(world.finish());
        } else {
            done.repeats += 1;
        }
        // the deepest point with a step not yet explored and not asleep
        loop {
            let Some(node) = path.last_mut() else {
                done.complete = true;
                return done;
            };
            node.explored
                .push((node.keys[node.taken], std::mem::take(&mut node.touched)));
            match (node.taken + 1..node.keys.len()).find(|&index| node.awake(index)) {
                Some(next) => {
                    node.taken = next;
                    break;
                }
                None => {
                    path.pop();
                }
            }
        }
    }
}

impl World {
    /// Runs one schedule: the steps `path` names, then at each new point the first step awake
    /// there. `false` when it reached a point where every step is asleep (a repeat).
    fn walk(&mut self, path: &mut Vec<Node>) -> bool {
        let mut depth = 0;
        loop {
            let choices = self.choices();
            if choices.iter().all(Choice::optional) {
                return true;
            }
            if depth == path.len() {
                let asleep = match path.last() {
                    None => Vec::new(),
                    Some(parent) => {
                        let carried = parent.asleep.iter().chain(&parent.explored);
                        let carried = carried.filter(|(_, f)| independent(f, &parent.touched));
                        carried.cloned().collect()
                    }
                };
                let keys = choices.iter().map(|c| self.key(c)).collect();
                let mut node = Node {
                    keys,
                    taken: 0,
                    touched: Vec::new(),
                    asleep,
                    explored: Vec::new(),
                };
                match (0..choices.len()).find(|&index| node.awake(index)) {
                    Some(first) => node.taken = first,
                    None => return false,
                }
                path.push(node);
            }
            let node = &mut path[depth];
            debug_assert_eq!(
                node.keys.len(),
                choices.len(),
                "a replay offered other steps"
            );
            node.touched = self.take_touching(choices[node.taken]);
            depth += 1;
        }
    }

    fn key(&self, choice: &Choice) -> Key {
        match *choice {
            Choice::Call { rank } => Key::Call(rank),
            Choice::Deliver { window, rank } => self.input_key(window, rank, 0),
            Choice::Overtake { window, rank, at } => self.input_key(window, rank, at),
            Choice::Lose { window, rank, at } => match self.input_key(window, rank, at) {
                Key::Deliver(window, rank, from, ahead) => Key::Lose(window, rank, from, ahead),
                other => other,
            },
            Choice::Answer { index } => Key::Answer(self.answer_ids[index]),
            Choice::Publish { window, rank } => Key::Publish(window, rank),
            Choice::Refresh { window, rank } => Key::Refresh(window, rank),
        }
    }

    /// Whether the input at place `at` of rank `rank`'s inbox of `window` is a departure or
    /// an opening: its taking may release ranks anywhere (the collectives, a reattach), so it
    /// is independent of nothing.
    fn incarnation_input(&self, window: u64, rank: u32, at: usize) -> bool {
        let sim = &self.windows[&window];
        let me = sim.desc.rank_of(rank).unwrap_or(rank);
        matches!(
            sim.inboxes[me as usize].get(at),
            Some(Input::Departed(_) | Input::Opened { .. })
        )
    }

    fn input_key(&self, window: u64, rank: u32, at: usize) -> Key {
        let sender = |input: &Input<Ref>| match input {
            Input::Access { origin, .. } => Some(*origin),
            _ => None,
        };
        let sim = &self.windows[&window];
        let me = sim.desc.rank_of(rank).unwrap_or(rank);
        let inbox = &sim.inboxes[me as usize];
        let from = sender(&inbox[at]);
        let ahead = inbox.iter().take(at).filter(|i| sender(i) == from).count();
        Key::Deliver(window, rank, from, ahead)
    }

    /// Takes `choice` and says what it touched.
    fn take_touching(&mut self, choice: Choice) -> Footprint {
        let mut touched = self.take_touching_parts(choice);
        touched.push((Part::Ends, choice.optional()));
        touched
    }

    fn take_touching_parts(&mut self, choice: Choice) -> Footprint {
        let mut touched = match choice {
            Choice::Call { rank } => return self.call_touching(rank),
            Choice::Deliver { window, rank } | Choice::Overtake { window, rank, .. } => {
                let at = match choice {
                    Choice::Overtake { at, .. } => at,
                    _ => 0,
                };
                let mut touched = wrote([Part::Engine(window, rank)]);
                if self.incarnation_input(window, rank, at) {
                    touched.push((Part::Ends, true));
                }
                touched
            }
            // what a crashed rank sent, taken out: rare, and independent of nothing
            Choice::Lose { window, rank, .. } => wrote([Part::Engine(window, rank), Part::Ends]),
            Choice::Answer { index } => {
                let (to, answer) = &self.answers[index];
                let mut touched = wrote([Part::Rank(to.rank)]);
                if let Ok(crate::target::Outcome::Attached { .. }) = answer {
                    touched.push((Part::Regions, true));
                }
                touched
            }
            Choice::Publish { window, rank } => wrote([Part::Rank(rank), Part::Back(window, rank)]),
            Choice::Refresh { window, rank } => {
                wrote([Part::Rank(rank), Part::Engine(window, rank)])
            }
        };
        self.take(choice);
        touched.sort();
        touched
    }

    fn call_touching(&mut self, rank: u32) -> Footprint {
        let state = &self.ranks[rank as usize];
        let action = &state.program[state.next];
        let mut touched = wrote([Part::Rank(rank)]);
        match action {
            Action::Barrier => touched.push((Part::Barrier, true)),
            // a window's info is read by every later call's admission and every delivery
            Action::SetInfo { .. } => touched.push((Part::Ends, true)),
            Action::Call(call @ (Call::Fence { .. } | Call::WinFree { .. })) => {
                touched.push((Part::Tallies(call.window()), true));
            }
            Action::InRegion { .. } | Action::Detach { .. } => {
                touched.push((Part::Regions, false));
            }
            // a crash or a new incarnation touches every window the rank is in, and through
            // the departure the collectives: independent of nothing
            Action::Crash | Action::Rejoin => touched.push((Part::Ends, true)),
            _ => {}
        }
        let inboxes = |world: &World| -> Vec<(u64, u32, usize)> {
            let windows = world.windows.iter();
            let each = windows.flat_map(|(&id, sim)| {
                let lengths = sim.inboxes.iter().enumerate();
                lengths.map(move |(to, inbox)| (id, to as u32, inbox.len()))
            });
            each.collect()
        };
        let before = inboxes(self);
        let waiting = |world: &World| -> Vec<bool> {
            let ranks = world.ranks.iter();
            ranks.map(|r| r.in_barrier || r.waiting.is_some()).collect()
        };
        let waited = waiting(self);
        self.take(Choice::Call { rank });
        for (window, to, length) in before {
            let sim = &self.windows[&window];
            let inbox = &sim.inboxes[to as usize];
            if inbox.len() != length {
                let items = inbox
                    .iter()
                    .skip(length)
                    .all(|i| matches!(i, Input::Access { .. }));
                touched.push((Part::Back(window, sim.world_rank(to)), !items));
            }
        }
        // the barrier or a free completed: every rank waiting in it returned
        let released = waited.iter().zip(waiting(self)).enumerate();
        let released = released.filter(|&(other, (was, is))| other as u32 != rank && *was && !is);
        if released.count() > 0 {
            touched.extend(wrote((0..self.ranks.len() as u32).map(Part::Rank)));
        }
        touched.sort();
        touched.dedup();
        touched
    }
}
