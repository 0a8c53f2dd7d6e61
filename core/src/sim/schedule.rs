//! Who moves next: the simulator's only source of order.
//!
//! Owns: the [`Choice`]s a world offers at each step (which of them are optional) and the
//! [`Schedule`]s that pick among them — [`Seeded`], at random from a seed (SplitMix64:
//! small, fast, and the same sequence on every machine; uniform, but optional steps at fixed
//! odds), and a replay of a recorded trace. Must not: know what a choice
//! does (the world carries it out).

/// One step the world can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Choice {
    /// A rank takes the next action of its program.
    Call {
        /// The rank (of the world).
        rank: u32,
    },
    /// A rank's target of a window takes the next input of its inbox.
    Deliver {
        /// The window.
        window: u64,
        /// The target's rank (of the world).
        rank: u32,
    },
    /// The answer at this place of the answers on their way reaches its origin.
    Answer {
        /// Its place.
        index: usize,
    },
    /// A rank's target of a window takes the input at place `at` (from 1) of its inbox, ahead
    /// of the ones before it: operations MPI does not order (another origin's, or puts and gets
    /// of one origin, or accumulates `accumulate_ordering` leaves unordered) in one epoch.
    Overtake {
        /// The window.
        window: u64,
        /// The target's rank (of the world).
        rank: u32,
        /// The input's place in the inbox.
        at: usize,
    },
    /// A rank's stores not yet published reach its target's inbox now: rule 5 gives the
    /// latest point (post, fence, unlock, unlock_all, sync); earlier is allowed.
    Publish {
        /// The window.
        window: u64,
        /// The rank (of the world).
        rank: u32,
    },
    /// The item at place `at` of a rank's target's inbox never left its origin, a rank that
    /// crashed before its process sent it (it was sent after the last answer that rank saw,
    /// and nothing it sent to this target after it left either).
    Lose {
        /// The window.
        window: u64,
        /// The target's rank (of the world).
        rank: u32,
        /// The item's place in the inbox.
        at: usize,
    },
    /// What operations changed in a rank's public copy reaches its private copy now: rule 6
    /// gives the latest point (wait, fence, lock, lock_all, sync); earlier is allowed.
    Refresh {
        /// The window.
        window: u64,
        /// The rank (of the world).
        rank: u32,
    },
}

impl Choice {
    /// Whether the step may as well never happen: an early publication or refresh, which
    /// MPI allows but no call waits for. A world whose only steps are optional has ended.
    pub fn optional(&self) -> bool {
        matches!(self, Choice::Publish { .. } | Choice::Refresh { .. })
    }
}

/// Picks the next step among those that may happen now (never an empty list).
pub trait Schedule {
    /// The index of the choice to take (taken modulo the number of choices).
    fn pick(&mut self, choices: &[Choice]) -> usize;
}

/// Random choices from a seed: the same seed, the same run.
#[derive(Clone, Debug)]
pub struct Seeded {
    state: u64,
}

impl Seeded {
    /// The schedule of `seed`.
    pub fn new(seed: u64) -> Self {
        Seeded { state: seed }
    }

    /// The next number of the sequence (SplitMix64).
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A seeded schedule takes an optional step (an early publication or refresh), when one is on
/// offer beside others, once in this many steps: offered at every step from a store on, at the
/// uniform odds of one choice among few they would nearly always be taken at once, and the
/// obsolete values MPI allows would all but vanish.
const OPTIONAL_ODDS: u64 = 8;

impl Schedule for Seeded {
    /// Uniform among the steps that are not optional; one time in eight (`OPTIONAL_ODDS`), when
    /// there are both kinds, uniform among the optional ones instead.
    fn pick(&mut self, choices: &[Choice]) -> usize {
        let draw = self.next_u64();
        let optional = choices.iter().filter(|choice| choice.optional()).count();
        if optional == 0 || optional == choices.len() {
            return (draw % choices.len() as u64) as usize;
        }
        let take_optional = draw.is_multiple_of(OPTIONAL_ODDS);
        let among = if take_optional {
            optional
        } else {
            choices.len() - optional
        };
        let nth = (self.next_u64() % among as u64) as usize;
        choices
            .iter()
            .enumerate()
            .filter(|(_, choice)| choice.optional() == take_optional)
            .nth(nth)
            .map_or(0, |(index, _)| index)
    }
}

/// The choices of a recorded trace, in order (then the first choice offered).
#[derive(Clone, Debug)]
pub struct Replay {
    trace: std::vec::IntoIter<Choice>,
}

impl Replay {
    /// Replays `trace`.
    pub fn new(trace: Vec<Choice>) -> Self {
        Replay {
            trace: trace.into_iter(),
        }
    }
}

impl Schedule for Replay {
    fn pick(&mut self, choices: &[Choice]) -> usize {
        self.trace
            .next()
            .and_then(|wanted| choices.iter().position(|&choice| choice == wanted))
            .unwrap_or(0)
    }
}
