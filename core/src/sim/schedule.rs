//! Who moves next: the simulator's only source of order.
//!
//! Owns: the [`Choice`]s a world offers at each step and the [`Schedule`]s that pick among
//! them — [`Seeded`], uniformly at random from a seed (SplitMix64: small, fast, and the same
//! sequence on every machine), and a replay of a recorded trace. Must not: know what a choice
//! does (the world carries it out).

/// One step the world can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Choice {
    /// A rank takes the next action of its program.
    Call {
        /// The rank.
        rank: u32,
    },
    /// A rank's target of a window takes the next input of its inbox.
    Deliver {
        /// The window.
        window: u64,
        /// The target rank.
        rank: u32,
    },
    /// The answer at this place of the answers on their way reaches its origin.
    Answer {
        /// Its place.
        index: usize,
    },
}

/// Picks the next step among those that may happen now (never an empty list).
pub trait Schedule {
    /// The index of the choice to take (taken modulo the number of choices).
    fn pick(&mut self, choices: &[Choice]) -> usize;
}

/// Uniform choices from a seed: the same seed, the same run.
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

impl Schedule for Seeded {
    fn pick(&mut self, choices: &[Choice]) -> usize {
        (self.next_u64() % choices.len() as u64) as usize
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
