//! Fences at a target: the owner's entry into a fence and when that fence returns.
//!
//! Owns: `Input::FenceEnter` (one fence of the owner at a time; entering enables the operations
//! of the epoch it opens; a fence that closes no epoch returns at once), `Input::FenceReached`,
//! and the pending fence's end: it returns once every rank entered the fence that closes its
//! epoch and no operation of that epoch is still queued here, and fails with `PROC_FAILED` when
//! a rank whose session ended never entered it. Must not: count the ranks' arrivals (the
//! sessions' `crate::fence::FenceTally` does) or apply the epoch's operations (`queues`).

use crate::audit::Event;
use crate::epoch::AccessTag;
use crate::{ErrorClass, RmaError};

use super::{proc_failed, Access, Target};

/// The owner's fence that waits for its epoch to close.
#[derive(Debug)]
pub(super) struct PendingFence<R> {
    pub(super) fence: u64,
    pub(super) closes: u64,
    pub(super) pull: bool,
    pub(super) reply: R,
}

impl<R> Target<R> {
    /// `Input::FenceEnter`: the owner entered its fence number `fence`, which closes the epoch
    /// `closes` if any; `reply` answers when the fence may return.
    pub(super) fn handle_fence_enter(
        &mut self,
        fence: u64,
        closes: Option<u64>,
        pull: bool,
        reply: R,
    ) {
        if self.pending_fence.is_some() {
            // the owner's session takes a fence only once the last one returned; a
            // second one now would leave the first unanswered
            let error = RmaError::new(
                ErrorClass::RmaSync,
                "a fence of this rank is still waiting: a rank enters one fence at a \
                 time",
            );
            self.answer_early(reply, Err(error));
            return;
        }
        self.fence_entered = fence;
        self.drain_all();
        match closes {
            Some(closes) => {
                self.pending_fence = Some(PendingFence {
                    fence,
                    closes,
                    pull,
                    reply,
                });
                self.check_fence();
            }
            None => {
                self.record(Event::FenceExit { fence });
                self.answer_synced(reply, pull, false, 0);
            }
        }
    }

    /// `Input::FenceReached`: every rank entered the fence that closes `epoch`.
    pub(super) fn handle_fence_reached(&mut self, epoch: u64) {
        self.fence_reached = self.fence_reached.max(Some(epoch));
        self.check_fence();
    }

    pub(super) fn check_fence(&mut self) {
        let Some(pending) = &self.pending_fence else {
            return;
        };
        let closes = pending.closes;
        // a rank whose session ended before it entered this fence never will
        let missing_gone = self
            .gone
            .iter()
            .chain(&self.absent)
            .find(|(rank, _)| {
                self.fenced_before_leaving
                    .get(rank)
                    .is_none_or(|fenced| *fenced < Some(closes))
            })
            .map(|(rank, reason)| (*rank, reason.clone()));
        if let Some((peer, reason)) = missing_gone {
            if let Some(pending) = self.pending_fence.take() {
                self.record(Event::PeerFailed {
                    peer,
                    call: "fence".to_string(),
                });
                self.answer(pending.reply, Err(proc_failed(peer, &reason)));
            }
            return;
        }
        if self.fence_reached < Some(closes) || self.closed_epoch_queued(closes) {
            return;
        }
        if let Some(pending) = self.pending_fence.take() {
            self.record(Event::FenceExit {
                fence: pending.fence,
            });
            self.answer_synced(pending.reply, pending.pull, false, 0);
        }
    }

    /// Whether an operation of an epoch up to `closes` still waits in a queue (behind an item
    /// that may not be processed yet): the fence closing it waits for it.
    fn closed_epoch_queued(&self, closes: u64) -> bool {
        self.queued > 0
            && self.queues.iter().flatten().any(|(_, item)| {
                matches!(item, Access::Op { tag: AccessTag::Fence { epoch }, .. } if *epoch <= closes)
            })
    }
}
