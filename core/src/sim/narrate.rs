//! What each step of a narrated run did, in words: what a replay prints beside the trace.
//!
//! Owns: the [`Happening`] of a rank's action begun, of an input a target took and of an
//! answer that reached its origin. Must not: change what a step does, or be paid for by a
//! world that does not narrate (only [`super::World::narrated`] calls it).

use crate::target::{Access, Answer, Departure, Input, Outcome};

use super::Ref;

/// What one step of a run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Happening {
    /// The rank and the action of its program the step concerns (the action begun, the
    /// call an input came from, the call an answer went to), when there is one.
    pub about: Option<(u32, usize)>,
    /// What happened, in words.
    pub what: String,
}

/// Rank `rank` began action `action` of its program.
pub(super) fn began(rank: u32, action: usize) -> Happening {
    Happening {
        about: Some((rank, action)),
        what: "begins".to_string(),
    }
}

/// Rank `rank`'s target took `input` from its inbox; `members` are the window's ranks in
/// the world (an input names window ranks).
pub(super) fn delivered(rank: u32, input: &Input<Ref>, members: &[u32]) -> Happening {
    let world = |rank: &u32| *members.get(*rank as usize).unwrap_or(rank);
    let (about, what) = match input {
        Input::Access { origin, item, .. } => {
            let origin = world(origin);
            let what = match item {
                Access::Op { op, reply, .. } => (reply, format!("{:?}", op.kind)),
                Access::LockRequest { request, grant, .. } => {
                    let kind = format!("{:?} lock request", request.lock_type).to_lowercase();
                    return Happening {
                        about: grant.as_ref().map(|to| (to.rank, to.call)),
                        what: format!("target {rank} takes the {kind} of rank {origin}"),
                    };
                }
                Access::Unlock { reply } => (reply, "unlock".to_string()),
                Access::Flush { reply } => (reply, "flush".to_string()),
                Access::CompleteMarker { reply, .. } => (reply, "complete marker".to_string()),
            };
            let (reply, kind) = what;
            (
                Some((reply.rank, reply.call)),
                format!("target {rank} takes the {kind} of rank {origin}"),
            )
        }
        Input::Push { segments } => {
            let bytes: usize = segments.iter().map(|s| s.data.len()).sum();
            (
                None,
                format!("target {rank} takes its owner's push of {bytes} byte(s)"),
            )
        }
        Input::FenceEnter { fence, reply, .. } => (
            Some((reply.rank, reply.call)),
            format!("target {rank}: its owner enters fence {fence}"),
        ),
        Input::FenceReached { epoch } => (
            None,
            format!("target {rank}: every rank reached the fence closing epoch {epoch}"),
        ),
        Input::Post { group } => {
            let group: Vec<u32> = group.iter().map(world).collect();
            (None, format!("target {rank}: its owner posts to {group:?}"))
        }
        Input::Wait { reply, test, .. } => {
            let call = if *test { "tests" } else { "waits" };
            (
                Some((reply.rank, reply.call)),
                format!("target {rank}: its owner {call} for its exposure epoch's end"),
            )
        }
        Input::Pull { reply } => (
            Some((reply.rank, reply.call)),
            format!("target {rank}: its owner pulls"),
        ),
        Input::Departed(Departure {
            origin,
            incarnation,
            reason,
            ..
        }) => (
            None,
            format!(
                "target {rank} takes the departure of rank {} (incarnation {incarnation}: {reason})",
                world(origin)
            ),
        ),
        Input::Opened { origin } => (
            None,
            format!(
                "target {rank} takes the opening by rank {}'s new incarnation",
                world(origin)
            ),
        ),
        other => (None, format!("target {rank} takes {other:?}")),
    };
    Happening { about, what }
}

/// Rank `rank` published `segments`, its stores, before a call had to.
pub(super) fn published(rank: u32, segments: &[crate::target::Segment]) -> Happening {
    let bytes: usize = segments.iter().map(|s| s.data.len()).sum();
    Happening {
        about: None,
        what: format!(
            "rank {rank} publishes {bytes} byte(s) of its stores early (to its target's inbox)"
        ),
    }
}

/// Rank `rank`'s private copy took `bytes` bytes of its public copy's changes early.
pub(super) fn refreshed(rank: u32, bytes: usize) -> Happening {
    Happening {
        about: None,
        what: format!("rank {rank}'s private copy takes {bytes} byte(s) of its public copy early"),
    }
}

/// `answer` reached rank `to.rank`, for its action `to.call`.
pub(super) fn answered(to: &Ref, answer: &Answer) -> Happening {
    let what = match answer {
        Ok(Outcome::Done) => "done".to_string(),
        Ok(Outcome::Data(data)) => format!("{} byte(s) of data", data.len()),
        Ok(Outcome::Synced { pull, .. }) => {
            let bytes: usize = pull.iter().map(|s| s.data.len()).sum();
            format!("synced, {bytes} byte(s) pulled")
        }
        Ok(other) => format!("{other:?}"),
        Err(error) => format!("{} ({})", error.class.name(), error.message),
    };
    Happening {
        about: Some((to.rank, to.call)),
        what: format!("an answer reaches rank {}: {what}", to.rank),
    }
}
