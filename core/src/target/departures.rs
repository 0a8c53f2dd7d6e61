//! Ends at a target: a session of an origin that ended, and the window no longer served here.
//!
//! Owns: `Input::Departed` — the session's lock revoked (recorded `lock_revoke`, the next
//! waiter granted), its waiting lock requests and queued items answered `PROC_FAILED`, the last
//! epoch whose closing fence it entered (an earlier one if an operation of that epoch is
//! dropped), and the rank gone (it took part in fence or PSCW) or absent (no newer session
//! attached) — `Input::Opened`, which ends an absence, `missing` (why a rank cannot take part
//! in a fence or PSCW epoch), and `Input::Stop` and `Input::Abandon`: everything pending fails
//! (`MPI_ERR_WIN`, `MPI_ERR_IO`), and rank 0 records `window_freed` when the window was freed.
//! Must not: decide which fence or wait a departure fails (`fence` and `pscw` check again), or
//! record anything when the window is abandoned (its log goes on where it is served next).

use std::collections::VecDeque;

use crate::audit::Event;
use crate::epoch::AccessTag;
use crate::{ErrorClass, RmaError};

use super::{Access, Target};

/// A session that ended, as [`Input::Departed`] gives it.
///
/// [`Input::Departed`]: super::Input::Departed
pub(super) struct Departure<'a> {
    pub(super) origin: u32,
    pub(super) incarnation: u64,
    pub(super) reason: &'a str,
    pub(super) active: bool,
    pub(super) vanished: bool,
    pub(super) fenced: Option<u64>,
}

impl<R> Target<R> {
    /// `Input::Departed`: a departure of a rank outside the window is ignored.
    pub(super) fn handle_departed(&mut self, left: Departure<'_>) {
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
    fn depart(&mut self, left: Departure<'_>) {
        let Departure {
            origin,
            incarnation,
            reason,
            active,
            vanished,
            mut fenced,
        } = left;
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
