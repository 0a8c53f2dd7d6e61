//! Which input of a target's inbox may be taken ahead of those in front of it: the orders MPI
//! and a network leave open.
//!
//! Owns: `may_overtake`, read by the world's choices. Must not: decide what an overtaking
//! input does (the target engine does) or which of the allowed orders happens (the schedule).

use std::collections::VecDeque;

use super::Ref;
use crate::target::{Access, Departure, Input};
use crate::window::{AccumulateOrdering, TargetAccess};

/// Whether the input at place `at` of `inbox` (the target of window rank `owner`) may be
/// taken before every one in front of it. The inbox merges what separate channels carry (each
/// origin's session to this target, and the owner's own inputs), so an origin's item may pass
/// another origin's, and an owner's input (a push of its stores, its fence's entry, a post, a
/// wait, an attach or a detach) may pass the other origins' items in front of it: orders MPI
/// does not impose and a network may produce (what one rank must see done before another
/// sends, it waits for: that answer came after the delivery; a barrier completes nothing).
/// Within one channel the order stays, but for this: an origin's operation may pass the
/// operations of the same epoch MPI does not order before it — puts and gets never are
/// (§11.7.2), accumulates to overlapping bytes are as the window's `accumulate_ordering` says.
/// Nothing passes the fence's notice (sent once every rank reached the fence, after all they
/// sent before), and an origin's item passes no owner's input. A crashed rank's departure
/// (sent when the server notices, behind all it sent) and other channels' items pass each
/// other.
pub(super) fn may_overtake(
    inbox: &VecDeque<Input<Ref>>,
    at: usize,
    ordering: AccumulateOrdering,
    owner: u32,
) -> bool {
    let (origin, item) = match inbox.get(at) {
        Some(Input::Access { origin, item, .. }) => (origin, item),
        Some(input) if owners(input) => {
            let other = |earlier: &Input<Ref>| matches!(earlier, Input::Access { origin, .. } if *origin != owner);
            return inbox.iter().take(at).all(other);
        }
        // a departure travels on the departed rank's channel: it passes only what other
        // channels carried (the owner's inputs too, unless the owner departed)
        Some(Input::Departed(Departure { origin, .. })) => {
            let other = |earlier: &Input<Ref>| match earlier {
                Input::Access { origin: from, .. } => from != origin,
                input => *origin != owner && owners(input),
            };
            return inbox.iter().take(at).all(other);
        }
        _ => return false,
    };
    let second = operation(item);
    inbox.iter().take(at).all(|earlier| {
        let Input::Access {
            origin: from,
            item: earlier,
            ..
        } = earlier
        else {
            // another rank's departure: the server may notice it after this item came
            return matches!(earlier, Input::Departed(left) if left.origin != *origin);
        };
        if from != origin {
            return true;
        }
        let (Some((earlier_tag, first, earlier_access)), Some((tag, kind, access))) =
            (operation(earlier), second)
        else {
            return false;
        };
        let ordered = match (first.accumulate_access(), kind.accumulate_access()) {
            (Some(first), Some(second)) => {
                ordering.orders(first, second) && overlap(earlier_access, access)
            }
            _ => false,
        };
        earlier_tag == tag && !ordered
    })
}

/// Whether `input` is one of the owner's own (from its calls), which its channel carries.
fn owners(input: &Input<Ref>) -> bool {
    matches!(
        input,
        Input::Push { .. }
            | Input::FenceEnter { .. }
            | Input::Post { .. }
            | Input::Wait { .. }
            | Input::Attach { .. }
            | Input::Detach { .. }
    )
}

/// An item that is an operation: its epoch, kind and bytes at the target.
fn operation(
    item: &Access<Ref>,
) -> Option<(
    crate::epoch::AccessTag,
    crate::window::OpKind,
    &TargetAccess,
)> {
    match item {
        Access::Op {
            tag, op, access, ..
        } => Some((*tag, op.kind, access)),
        _ => None,
    }
}

/// Whether two accesses share a byte.
fn overlap(a: &TargetAccess, b: &TargetAccess) -> bool {
    a.runs.iter().any(|x| {
        b.runs
            .iter()
            .any(|y| x.offset < y.offset + y.len && y.offset < x.offset + x.len)
    })
}
