//! A read-only picture of a target for an operator: who holds and waits for its lock, which
//! epochs are open, what is queued, which ranks are gone or absent.
//!
//! Owns: `TargetView` and the views it is made of, `Target::inspect`, and how a queued item is
//! named. Must not: change the target or decide anything (the server's web view shows it).

use std::time::{Duration, Instant};

use crate::audit::RecordedOp;
use crate::epoch::{AccessTag, LockType};

use super::{Access, Target};

/// A lock held at a target, as [`Target::inspect`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HolderView {
    /// The holding rank.
    pub origin: u32,
    /// Its session's incarnation.
    pub incarnation: u64,
    /// Shared or exclusive.
    pub lock_type: LockType,
    /// The grant's fencing token.
    pub token: u64,
    /// Granted under `MPI_MODE_NOCHECK`.
    pub nocheck: bool,
}

/// A lock request waiting at a target, as [`Target::inspect`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaiterView {
    /// The requesting rank.
    pub origin: u32,
    /// Its session's incarnation.
    pub incarnation: u64,
    /// Shared or exclusive.
    pub lock_type: LockType,
    /// How long it has waited so far.
    pub waited: Duration,
}

/// An item queued at a target that may not be processed yet, as [`Target::inspect`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedView {
    /// The origin rank.
    pub origin: u32,
    /// The origin session's incarnation.
    pub incarnation: u64,
    /// What it is: `put`, `accumulate(sum)` … for operations (with what it waits for:
    /// `under lock`, `fence epoch 3`, `pscw generation 2`), `lock request (exclusive)`,
    /// `unlock`, `flush`, `complete marker 2`.
    pub what: String,
}

/// The fence the owner is inside, as [`Target::inspect`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FenceView {
    /// The owner's fence number.
    pub fence: u64,
    /// The epoch it closes.
    pub closes: u64,
    /// Whether every rank entered the fence that closes that epoch ([`Input::FenceReached`]):
    /// then the fence waits only for operations of the epoch still queued here.
    ///
    /// [`Input::FenceReached`]: super::Input::FenceReached
    pub every_rank_arrived: bool,
}

/// A read-only picture of one rank's target state: who holds and waits for its lock, which
/// epochs are open, what is queued. It decides nothing; the server's web view shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetView {
    /// The rank.
    pub rank: u32,
    /// Lock holders, by rank.
    pub holders: Vec<HolderView>,
    /// Lock requests waiting, in arrival order.
    pub waiters: Vec<WaiterView>,
    /// How many fences the owner entered.
    pub fence_entered: u64,
    /// The fence the owner is inside, waiting for end-of-epoch markers.
    pub fence: Option<FenceView>,
    /// The exposure group of the owner's open post, if any.
    pub exposed_to: Option<Vec<u32>>,
    /// The owner waits (MPI_Win_wait) for its exposure epoch to end.
    pub waiting_for_completes: bool,
    /// Items queued per origin, in arrival order.
    pub queued: Vec<QueuedView>,
    /// Ranks gone for good here (they took part in fence or PSCW and departed), and why.
    pub gone: Vec<(u32, String)>,
    /// Ranks absent until a new session of theirs opens the window, and why.
    pub absent: Vec<(u32, String)>,
}

impl<R> Target<R> {
    /// What this target looks like at `now`, for an operator (read-only).
    pub fn inspect(&self, now: Instant) -> TargetView {
        let holders = self
            .locks
            .holders()
            .map(|(origin, holder)| HolderView {
                origin,
                incarnation: holder.incarnation,
                lock_type: holder.lock_type,
                token: holder.token,
                nocheck: holder.nocheck,
            })
            .collect();
        let waiters = self
            .locks
            .waiters()
            .map(|waiter| WaiterView {
                origin: waiter.origin,
                incarnation: waiter.incarnation,
                lock_type: waiter.lock_type,
                waited: now.saturating_duration_since(waiter.since),
            })
            .collect();
        let fence = self.pending_fence.as_ref().map(|pending| FenceView {
            fence: pending.fence,
            closes: pending.closes,
            every_rank_arrived: self.fence_reached >= Some(pending.closes),
        });
        let queued = self
            .queues
            .iter()
            .enumerate()
            .flat_map(|(origin, queue)| {
                queue.iter().map(move |(incarnation, item)| QueuedView {
                    origin: origin as u32,
                    incarnation: *incarnation,
                    what: describe_access(item),
                })
            })
            .collect();
        TargetView {
            rank: self.rank,
            holders,
            waiters,
            fence_entered: self.fence_entered,
            fence,
            exposed_to: self.post_group.clone(),
            waiting_for_completes: self.pending_wait.is_some(),
            queued,
            gone: self
                .gone
                .iter()
                .map(|(rank, why)| (*rank, why.clone()))
                .collect(),
            absent: self
                .absent
                .iter()
                .map(|(rank, why)| (*rank, why.clone()))
                .collect(),
        }
    }
}

/// How [`TargetView::queued`] names a queued item.
fn describe_access<R>(item: &Access<R>) -> String {
    match item {
        Access::Op { op, tag, .. } => {
            let waits = match tag {
                AccessTag::Lock => "under lock".to_string(),
                AccessTag::Fence { epoch } => format!("fence epoch {epoch}"),
                AccessTag::Pscw { generation } => format!("pscw generation {generation}"),
            };
            format!("{} ({waits})", RecordedOp::of(op.kind))
        }
        Access::LockRequest { request, .. } => {
            format!("lock request ({})", request.lock_type.name())
        }
        Access::Unlock { .. } => "unlock".to_string(),
        Access::Flush { .. } => "flush".to_string(),
        Access::CompleteMarker { generation, .. } => format!("complete marker {generation}"),
    }
}
