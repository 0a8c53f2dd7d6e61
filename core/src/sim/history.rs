//! A simulated run's audit log: every event recorded where the server and the client would
//! record it — the window's creation, what origin routes log (epochs, operations issued),
//! the targets' events (grants, applications, publications), the client's local stores and
//! loads, what the client records as a blocking call returns (`returned`) and as
//! `flush_local` is called, and the world barrier's enter and exit on every window the rank
//! has open — each
//! with its place in its window's log, so that what reads a real log (the race checker, the
//! Perfetto export) reads a simulated one.
//!
//! Owns: numbering a window's events (gap-free from 1, the creation first), their clock (the
//! step of the run's trace that recorded them: one microsecond a step, so a timeline shows
//! the schedule), and which action of which rank recorded each. Must not: decide what is
//! recorded (the routes, the target engine and the world's steps do) or judge it.

use super::{Action, Run, World};
use crate::audit::{AuditRecord, Event};
use crate::origin::Call;
use crate::window::MemoryModel;

/// How many nanoseconds of a record's clock one step of a run's trace is.
pub const STEP_NS: u64 = 1_000;

/// One event of a run's log, with the action that recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    /// The event in its window's log: `seq` its place there, `at_ns` the step that recorded
    /// it ([`STEP_NS`] a step), `rank` the window rank that recorded it (or whose target did),
    /// `incarnation` the rank's for what a rank recorded (1, and one more after each crash
    /// it attached again after) and 0 for what a target or the window's creation recorded.
    pub record: AuditRecord,
    /// The action of the rank's program (its index) that recorded it: a call, a store, a
    /// load or the barrier; `None` for a target's events and the window's creation.
    pub action: Option<usize>,
}

impl Run {
    /// Window `window`'s log, in order, as the audit would hold it.
    pub fn history(&self, window: u64) -> Vec<AuditRecord> {
        self.events
            .iter()
            .filter(|logged| logged.record.window == window)
            .map(|logged| logged.record.clone())
            .collect()
    }

    /// The event at `seq` of window `window`'s log.
    pub fn logged(&self, window: u64, seq: u64) -> Option<&Logged> {
        self.events
            .iter()
            .find(|logged| logged.record.window == window && logged.record.seq == seq)
    }
}

impl World {
    /// Records `event` in `window`'s log by action `action` of rank `rank` of the world, at
    /// its rank in the window (nothing when it is not a member).
    pub(super) fn log(&mut self, window: u64, rank: u32, action: usize, event: Event) {
        let state = &self.ranks[rank as usize];
        if let Some(me) = state.windows.get(&window).map(|open| open.me) {
            let incarnation = state.incarnation;
            self.record(window, me, Some((action, incarnation)), event);
        }
    }

    /// Records `event` in `window`'s log by its target of window rank `rank`, or (rank 0) by
    /// the window's creation.
    pub(super) fn log_target(&mut self, window: u64, rank: u32, event: Event) {
        self.record(window, rank, None, event);
    }

    /// Records `event` by window rank `rank`: by its action and incarnation when given, by
    /// its target (or the window's creation) when not.
    fn record(&mut self, window: u64, rank: u32, by: Option<(usize, u64)>, event: Event) {
        let Some(sim) = self.windows.get_mut(&window) else {
            return;
        };
        sim.logged += 1;
        let record = AuditRecord {
            window,
            seq: sim.logged,
            at_ns: self.run.trace.len() as u64 * STEP_NS,
            rank,
            incarnation: by.map_or(0, |(_, incarnation)| incarnation),
            cseq: None,
            event,
        };
        let action = by.map(|(action, _)| action);
        self.run.events.push(Logged { record, action });
    }

    /// Records every window's creation, as the registry records it when the window is made.
    pub(super) fn log_created(&mut self) {
        let created: Vec<(u64, Event)> = self
            .windows
            .values()
            .map(|sim| {
                let desc = &sim.desc;
                let event = Event::WindowCreated {
                    world: desc.world.clone(),
                    name: desc.name.clone(),
                    sizes: desc.sizes.clone(),
                    disp_units: desc.disp_units.clone(),
                    info: desc.info.to_pairs().into_iter().collect(),
                    unified: desc.model == MemoryModel::Unified,
                };
                (desc.id, event)
            })
            .collect();
        for (window, event) in created {
            self.log_target(window, 0, event);
        }
    }

    /// Records `event` by rank `rank`'s action `action` on every window it has open (the
    /// barrier's enter and exit, as its session records them).
    pub(super) fn log_open(&mut self, rank: u32, action: usize, event: &Event) {
        let open: Vec<u64> = self.ranks[rank as usize].windows.keys().copied().collect();
        for window in open {
            self.log(window, rank, action, event.clone());
        }
    }
}

/// What the client records once call `call` returned successfully: `returned` of the
/// blocking calls (client/src/window), nothing for the others.
fn returned(call: &Call) -> Option<Event> {
    let (name, target) = match call {
        Call::Fence { .. } => ("fence", None),
        Call::Complete { .. } => ("complete", None),
        Call::Wait { .. } => ("wait", None),
        Call::Test { .. } => ("test", None),
        Call::Lock { target, .. } => ("lock", Some(*target)),
        Call::Unlock { target, .. } => ("unlock", Some(*target)),
        Call::LockAll { .. } => ("lock_all", None),
        Call::UnlockAll { .. } => ("unlock_all", None),
        Call::Flush {
            target,
            local: false,
            ..
        } => ("flush", Some(*target)),
        Call::FlushAll { local: false, .. } => ("flush_all", None),
        Call::Sync { .. } => ("sync", None),
        _ => return None,
    };
    Some(Event::Returned {
        call: name.to_string(),
        target,
    })
}

/// What the client records as `flush_local` or `flush_local_all` is admitted.
pub(super) fn flushed_local(call: &Call) -> Option<Event> {
    match call {
        Call::Flush {
            target,
            local: true,
            ..
        } => Some(Event::FlushLocal {
            target: Some(*target),
        }),
        Call::FlushAll { local: true, .. } => Some(Event::FlushLocal { target: None }),
        _ => None,
    }
}

impl World {
    /// Rank `rank`'s call at `action` of its program returned: recorded, when it succeeded,
    /// as the client records it.
    pub(super) fn log_returned(&mut self, rank: u32, action: usize, window: u64) {
        let failed = self
            .run
            .errors
            .iter()
            .any(|(r, a, _)| (*r, *a) == (rank, action));
        let program = &self.ranks[rank as usize].program;
        let event = match program.get(action) {
            Some(Action::Call(call)) if !failed => returned(call),
            _ => None,
        };
        if let Some(event) = event {
            self.log(window, rank, action, event);
        }
    }
}
