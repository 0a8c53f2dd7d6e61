//! Ends at a target: a session of an origin that ended, and the window no longer served here.
//!
//! Owns: `Input::Departed` — the session's lock revoked (recorded `lock_revoke`, the next
//! waiter granted), its waiting lock requests and queued items answered `PROC_FAILED`, the last
//! epoch whose closing fence it entered (an earlier one if an operation of that epoch is
//! dropped), and the rank gone (it took part in fence or PSCW) or absent (no newer session
//! attached) — `Input::Opened`, which ends an absence, `missing` (why a rank cannot take part
//! in a fence or PSCW epoch), an operator's revocation of a live session's lock (`revoke`:
//! recorded `lock_revoke`, the next waiter granted, the rest of that lock epoch refused up to
//! its unlock — `revoked_refusal`), and `Input::Stop` and `Input::Abandon`: everything pending fails
//! (`MPI_ERR_WIN`, `MPI_ERR_IO`), and rank 0 records `window_freed` when the window was freed.
//! Must not: decide which fence or wait a departure fails (`fence` and `pscw` check again), or
//! record anything when the window is abandoned (its log goes on where it is served next).

use std::collections::VecDeque;

use crate::audit::Event;
use crate::epoch::AccessTag;
use crate::{ErrorClass, RmaError};

use super::{Access, Target};

/// A session of `origin` that ended ([`Input::Departed`]): its locks are revoked, what it still
/// had queued at the target is dropped and, when it took part in active-target
/// synchronization, what needs it fails.
///
/// [`Input::Departed`]: super::Input::Departed
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Departure {
    /// The rank.
    pub origin: u32,
    /// The ended session's incarnation.
    pub incarnation: u64,
    /// Why it ended (for the revocation's audit event and the errors).
    pub reason: String,
    /// Whether it fenced, posted or started on this window: then fences and waits that
    /// need it fail from now on (a new incarnation cannot resume its epochs).
    pub active: bool,
    /// Whether no newer incarnation of the rank is attached: then the fence or wait that
    /// waits for it now fails.
    pub vanished: bool,
    /// The last epoch whose closing fence it entered (`crate::fence::FenceTally`): a fence
    /// closing a later one fails, as it can no longer arrive.
    pub fenced: Option<u64>,
}

impl Departure {
    /// Why a session whose stream ended without a detach ended, in the words its departure,
    /// the revocation it causes and the errors it gives carry (the server's and the
    /// simulator's alike).
    pub const STREAM_ENDED: &'static str = "session ended";
}

impl<R> Target<R> {
    /// `Input::Departed`: a departure of a rank outside the window is ignored.
    pub(super) fn handle_departed(&mut self, left: Departure) {
        if left.origin < self.nranks {
            self.depart(left);
        }
    }

    /// `Input::Opened`: a new session of `origin` opened the window, so it is no longer absent.
    pub(super) fn handle_opened(&mut self, origin: u32) {
        self.absent.remove(&origin);
    }

    /// A session of `origin` ended: its locks are revoked (the next waiter is granted), what it
    /// still had queued or waiting here is dropped, and when it took part in active-target
    /// synchronization the fence or wait that needs it fails.
    fn depart(&mut self, left: Departure) {
        let Departure {
            origin,
            incarnation,
            reason,
            active,
            vanished,
            mut fenced,
        } = left;
        if self
            .revoked
            .get(&origin)
            .is_some_and(|(revoked, _)| *revoked == incarnation)
        {
            self.revoked.remove(&origin);
        }
        if let Some(holder) = self.locks.release(origin, incarnation) {
            tracing::info!(origin, token = holder.token, reason, "lock revoked");
            self.record(Event::LockRevoke {
                origin,
                token: holder.token,
                reason: reason.to_string(),
            });
        }
        let ended = || {
            RmaError::new(
                ErrorClass::ProcFailed,
                format!("the session of rank {origin} ended ({reason})"),
            )
        };
        let dropped = self.locks.drop_waiters(origin, incarnation);
        for reply in dropped.into_iter().filter_map(|waiter| waiter.grant) {
            self.answer(reply, Err(ended()));
        }
        let (dropped, kept): (VecDeque<_>, VecDeque<_>) =
            std::mem::take(&mut self.queues[origin as usize])
                .into_iter()
                .partition(|(from, _)| *from == incarnation);
        self.queues[origin as usize] = kept;
        self.queued -= dropped.len();
        for (_, item) in dropped {
            if let Access::Op {
                tag: AccessTag::Fence { epoch },
                ..
            } = item
            {
                // an operation of that epoch is lost: the fence closing it cannot succeed
                if fenced >= Some(epoch) {
                    fenced = epoch.checked_sub(1);
                }
            }
            if let Some(reply) = item.into_reply() {
                self.answer(reply, Err(ended()));
            }
        }
        self.fenced_before_leaving.insert(origin, fenced);
        if active {
            self.gone.insert(origin, reason.to_string());
        } else if vanished {
            // it never synchronized actively here: a new incarnation that opens the window may
            // still do so, until then what needs it fails
            self.absent.insert(origin, reason.to_string());
        }
        self.check_fence();
        self.check_wait();
        self.grant_waiters();
        self.drain_all();
    }

    /// An operator takes away the lock session `incarnation` of `origin` holds here, while the
    /// session goes on: recorded `lock_revoke` with `reason` (a release, for replay and the race
    /// checker), the next waiter granted as when a lease lapses. What the session sends here
    /// in that lock epoch from now on — operations, flushes — is refused with
    /// `MPI_ERR_RMA_SYNC` naming `reason`, never left waiting for a lock that will not come
    /// back; its unlock ends the epoch and is answered with the same refusal, so the rank
    /// learns at its next call here and may lock again after it. Returns the revoked lock's
    /// fencing token, or `None` when that session holds no lock here (nothing changes).
    pub fn revoke(
        &mut self,
        origin: u32,
        incarnation: u64,
        reason: &str,
        now: std::time::Instant,
    ) -> Option<u64> {
        self.now = now;
        let holder = self.locks.release(origin, incarnation)?;
        tracing::info!(
            origin,
            token = holder.token,
            reason,
            "lock revoked by an operator"
        );
        self.record(Event::LockRevoke {
            origin,
            token: holder.token,
            reason: reason.to_string(),
        });
        self.revoked
            .insert(origin, (incarnation, reason.to_string()));
        // what the holder's epoch sent and that waits here (nothing, while it held the lock)
        // is refused now; then the waiters
        self.drain_all();
        self.grant_waiters();
        self.drain_all();
        Some(holder.token)
    }

    /// The refusal of `item` from session `incarnation` of `origin` when an operator revoked
    /// that session's lock here and `item` belongs to the revoked epoch: an operation under a
    /// lock, a flush, the unlock. `None` for anything else.
    pub(super) fn revoked_refusal(
        &self,
        origin: u32,
        incarnation: u64,
        item: &Access<R>,
    ) -> Option<RmaError> {
        let (revoked, reason) = self.revoked.get(&origin)?;
        let in_epoch = match item {
            Access::Op { tag, .. } => *tag == AccessTag::Lock,
            Access::Unlock { .. } | Access::Flush { .. } => true,
            Access::LockRequest { .. } | Access::CompleteMarker { .. } => false,
        };
        (*revoked == incarnation && in_epoch).then(|| {
            RmaError::new(
                ErrorClass::RmaSync,
                format!(
                    "rank {origin}'s lock on rank {} was {reason}: the lock epoch's later \
                     operations and flushes were refused, and its unlock ends the epoch",
                    self.rank
                ),
            )
        })
    }

    /// The unlock of a revoked epoch was refused: the epoch is over, what `origin` sends next
    /// is judged afresh.
    pub(super) fn revoked_epoch_ended(&mut self, origin: u32) {
        self.revoked.remove(&origin);
    }

    /// Why `rank` cannot take part in a fence or PSCW epoch here, if it cannot.
    pub(super) fn missing(&self, rank: u32) -> Option<&String> {
        self.gone.get(&rank).or_else(|| self.absent.get(&rank))
    }

    /// Fails everything pending: the window was `freed`, or is abandoned here.
    pub(super) fn stop(&mut self, freed: bool) {
        let why = || {
            if freed {
                RmaError::new(ErrorClass::Win, "the window was freed")
            } else {
                RmaError::new(
                    ErrorClass::Io,
                    "this node no longer serves the window (its world moved or the node lost \
                     it): attach again",
                )
            }
        };
        let mut refused = Vec::new();
        for queue in &mut self.queues {
            refused.extend(queue.drain(..).filter_map(|(_, item)| item.into_reply()));
        }
        self.queued = 0;
        self.nonempty.clear();
        refused.extend(
            self.locks
                .drain_waiters()
                .into_iter()
                .filter_map(|waiter| waiter.grant),
        );
        refused.extend(self.pending_fence.take().map(|pending| pending.reply));
        refused.extend(self.pending_wait.take().map(|pending| pending.reply));
        for reply in refused {
            self.answer(reply, Err(why()));
        }
        if freed && self.rank == 0 {
            self.record(Event::WindowFreed);
        }
    }
}
