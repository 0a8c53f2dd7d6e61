//! A rank that crashes and attaches again in the simulated world, as the server sees a
//! session vanish and a new incarnation of its rank attach.
//!
//! Owns: what a crash loses (the rank's private copy and unpublished stores, its requests, the
//! answers still on their way to it), its departure sent to every target of every window it
//! had open — behind what it sent there, taken at a step the schedule chooses — with what
//! the server's session tells the targets (`Input::Departed`: whether it synchronized
//! actively, the last fence it entered), what is recorded once every target took it (the
//! session's `detach`) and the world's collectives told (`Collectives::departed`); which of
//! what it sent may not have left its process ([`Choice::Lose`](super::Choice::Lose): sent
//! after the last answer it saw, the end of what it sent to one target); and the new
//! incarnation: fresh epoch states, its opening sent to every target, its private copy read
//! from its public copy once its own target took the opening, as the server answers an
//! opening. Must not: decide what a departure revokes, drops or fails (the target engine and
//! `Collectives` do), or let the new incarnation act before the old one's departure was taken
//! everywhere (the server lets it act only then).

use std::collections::VecDeque;

use super::{Ref, World};
use crate::audit::Event;
use crate::epoch::EpochState;
use crate::origin::PrivateCopy;
use crate::target::{Access, Departure, Input};

/// Why a crashed rank's session ended: the server's words for a stream that ended without a
/// detach, what the runner's `crash` does (it drops every handle), so that explored and live
/// runs fail alike.
const CRASHED: &str = Departure::STREAM_ENDED;

impl World {
    /// Rank `rank` crashes at action `action`: it loses what only its process held, and its
    /// departure sets out to every target of every window it had open.
    pub(super) fn crash(&mut self, rank: u32, action: usize) {
        let state = &mut self.ranks[rank as usize];
        state.crashed = Some(action);
        state.outstanding.clear();
        state.failed.clear();
        state.requests = Default::default();
        let incarnation = state.incarnation;
        let mut departures = Vec::new();
        for (&window, open) in &mut state.windows {
            // its unpublished stores die with it
            open.copy.take_push();
            let active = open.epoch.used_active_target();
            departures.push((window, open.me, active, open.fenced));
        }
        for (window, me, active, fenced) in departures {
            let size = self.windows.get(&window).map_or(0, |sim| sim.size());
            for to in 0..size {
                let departed = Input::Departed(Departure {
                    origin: me,
                    incarnation,
                    reason: CRASHED.to_string(),
                    active,
                    // no newer incarnation attaches before every target took this one
                    vanished: true,
                    fenced,
                });
                self.send(window, to, departed);
                self.ranks[rank as usize].departing += 1;
            }
        }
        if self.ranks[rank as usize].departing == 0 {
            self.departed(rank);
        }
    }

    /// `window`'s target took the departure of its window rank `origin`: once every target
    /// took that rank's, the session's end is recorded and the collectives told.
    pub(super) fn departure_taken(&mut self, window: u64, origin: u32) {
        let Some(sim) = self.windows.get(&window) else {
            return;
        };
        let rank = sim.world_rank(origin);
        let state = &mut self.ranks[rank as usize];
        state.departing = state.departing.saturating_sub(1);
        if state.departing == 0 {
            self.departed(rank);
        }
    }

    /// Every target took rank `rank`'s departure: its session records `detach` on each
    /// window it had open (a stream that ended records no `departed`, as the server's does
    /// not), and the collectives waiting for it fail.
    fn departed(&mut self, rank: u32) {
        let state = &self.ranks[rank as usize];
        let Some(action) = state.crashed else {
            return;
        };
        let open: Vec<u64> = state.windows.keys().copied().collect();
        for window in open {
            self.log(window, rank, action, Event::Detach);
        }
        let effects = self.collectives.departed(rank, CRASHED, true);
        self.collective_answered(effects.answers);
    }

    /// Rank `rank` attaches again at action `action`, a new incarnation, and opens every
    /// window it is a member of.
    pub(super) fn rejoin(&mut self, rank: u32, action: usize) {
        self.collectives.joined(rank);
        let state = &mut self.ranks[rank as usize];
        state.crashed = None;
        state.incarnation += 1;
        let mut opened = Vec::new();
        for (&window, open) in &mut state.windows {
            let Some(sim) = self.windows.get(&window) else {
                continue;
            };
            open.epoch = EpochState::new(open.me, sim.size(), sim.desc.info.no_locks);
            open.next_cseq = 1;
            open.fenced = None;
            // a dynamic window's regions stay attached: the server hands them to the new
            // session; the bytes come with the opening's answer
            open.copy = PrivateCopy::new(open.copy.bytes().len());
            opened.push((window, open.me, sim.size()));
        }
        for (window, me, size) in opened {
            for to in 0..size {
                self.send(window, to, Input::Opened { origin: me });
            }
            self.ranks[rank as usize].reopening += 1;
            self.log(window, rank, action, Event::Attach);
        }
    }

    /// Rank `me`'s own target of `window` took its new incarnation's opening: its private
    /// copy starts from the public copy as it is now (what the server reads for the opening's
    /// answer, behind it in the owner's inbox).
    pub(super) fn reopened(&mut self, window: u64, me: u32) {
        let Some(sim) = self.windows.get(&window) else {
            return;
        };
        let rank = sim.world_rank(me);
        let public = sim.targets[me as usize].public();
        let state = &mut self.ranks[rank as usize];
        if let Some(open) = state.windows.get_mut(&window) {
            let len = open.copy.bytes().len().min(public.len());
            open.copy.store(0, &public[..len], false);
        }
        state.reopening = state.reopening.saturating_sub(1);
    }
}

impl World {
    /// Whether the item at place `at` of `inbox` may be lost: one a crashed rank (its
    /// departure not yet taken everywhere) sent after the last answer it saw, and the last
    /// item of that rank in the inbox — its process sends in order, so what never left it is
    /// the end of what it sent.
    /// `group`: the window's ranks in the world.
    pub(super) fn may_lose(&self, inbox: &VecDeque<Input<Ref>>, group: &[u32], at: usize) -> bool {
        let Some(Input::Access {
            origin,
            incarnation,
            item,
        }) = inbox.get(at)
        else {
            return false;
        };
        let Some(&rank) = group.get(*origin as usize) else {
            return false;
        };
        let state = &self.ranks[rank as usize];
        if state.crashed.is_none() || state.incarnation != *incarnation {
            return false;
        }
        let unseen = match sent_by(item) {
            Some(call) => state.acknowledged < Some(call),
            // a lazy lock request travels with the operation or unlock behind it, which is
            // gone if this is the last item
            None => true,
        };
        let from =
            |input: &Input<Ref>| matches!(input, Input::Access { origin: o, .. } if o == origin);
        unseen && !inbox.iter().skip(at + 1).any(from)
    }

    /// The item at place `at` of rank `rank`'s target's inbox of `window` never left its
    /// crashed origin.
    pub(super) fn lose(&mut self, window: u64, rank: u32, at: usize) {
        let taken = self.take_input(window, rank, at);
        if let Some((_, _, Some(mut happening))) = taken {
            happening.what = happening.what.replacen("takes", "never gets", 1)
                + " (its process crashed before sending it)";
            self.run.narration.push(happening);
        }
    }
}

/// The action that sent `item`, known from its answer's address (a lazy lock request has
/// none).
fn sent_by(item: &Access<Ref>) -> Option<usize> {
    match item {
        Access::Op { reply, .. }
        | Access::Unlock { reply }
        | Access::Flush { reply }
        | Access::CompleteMarker { reply, .. } => Some(reply.call),
        Access::LockRequest { grant, .. } => grant.as_ref().map(|to| to.call),
    }
}
