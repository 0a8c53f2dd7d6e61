//! An origin's items at a target: the FIFO queue per origin, when its head may be processed,
//! and what a processed item does.
//!
//! Owns: `Input::Access` (the item queued, then what it enabled processed), when the head of a
//! queue is enabled (its fence entered, its post made, its lock held) or refused instead (a
//! fencing token not held, an operation that waits for this rank's own fence or post after
//! this rank's session ended), the sweep over the queues that are not empty, what an enabled
//! item does — a lock request or unlock through the lock table, a flush, a complete marker
//! counted — and the lock grants the table allows. Must not: carry out an operation itself
//! (`copy`'s `operate` does), decide when a fence or wait returns (`fence`, `pscw`), or drop a
//! departed session's items (`departures`).

use std::time::Duration;

use crate::audit::Event;
use crate::epoch::{AccessTag, LockType};
use crate::locks::{Granted, Waiter};
use crate::{ErrorClass, RmaError};

use super::{proc_failed, Access, Outcome, Target};

impl<R> Target<R> {
    /// `Input::Access`: queues `item` behind what `origin` sent before, and processes what may
    /// be processed now.
    pub(super) fn handle_access(&mut self, origin: u32, incarnation: u64, item: Access<R>) {
        if origin >= self.nranks {
            if let Some(reply) = item.into_reply() {
                let error = RmaError::new(ErrorClass::Rank, "origin outside the window");
                self.answer(reply, Err(error));
            }
            return;
        }
        self.queues[origin as usize].push_back((incarnation, item));
        self.queued += 1;
        // the head of the origin's queue while it may be processed; if that changed
        // what other origins may do (a lock released or granted), them too. An item
        // processed at once never enters `nonempty`.
        let unblocked = self.drain_one(origin);
        if !self.queues[origin as usize].is_empty() {
            self.nonempty.insert(origin);
        }
        if unblocked {
            self.drain_all();
        }
        if self.pending_fence.is_some() {
            // the last item of a closed epoch may have been waiting
            self.check_fence();
        }
    }

    fn enabled(&self, origin: u32, incarnation: u64, item: &Access<R>) -> bool {
        match item {
            Access::Op { tag, .. } => match *tag {
                AccessTag::Fence { epoch } => self.fence_entered >= epoch,
                AccessTag::Pscw { generation } => self.posts[origin as usize] >= generation,
                AccessTag::Lock => self.locks.holds(origin, incarnation),
            },
            Access::Unlock { .. } => self.locks.holds(origin, incarnation),
            Access::LockRequest { .. } | Access::Flush { .. } | Access::CompleteMarker { .. } => {
                true
            }
        }
    }

    pub(super) fn drain_all(&mut self) {
        loop {
            let mut unblocked = false;
            // in origin order, as a sweep over every queue would go
            let origins: Vec<u32> = self.nonempty.iter().copied().collect();
            for origin in origins {
                unblocked |= self.drain_one(origin);
                if self.queues[origin as usize].is_empty() {
                    self.nonempty.remove(&origin);
                }
            }
            if !unblocked {
                break;
            }
        }
    }

    /// Returns whether lock state changed.
    fn drain_one(&mut self, origin: u32) -> bool {
        let mut lock_changed = false;
        loop {
            let queue = &self.queues[origin as usize];
            let Some((incarnation, head)) = queue.front() else {
                break;
            };
            let incarnation = *incarnation;
            let refusal = self.refusal(origin, incarnation, head);
            if refusal.is_none() && !self.enabled(origin, incarnation, head) {
                break;
            }
            let Some((_, item)) = self.queues[origin as usize].pop_front() else {
                break;
            };
            self.queued -= 1;
            match refusal {
                Some(error) => {
                    if let Access::Unlock { .. } = item {
                        // only a revoked epoch's unlock is refused: it ended that epoch
                        self.revoked_epoch_ended(origin);
                    }
                    if let Access::Op { .. } = item {
                        if let Some(peer) = self.needed_gone_owner(origin, &item) {
                            self.record(Event::PeerFailed {
                                peer,
                                call: "op".to_string(),
                            });
                        }
                    }
                    if let Some(reply) = item.into_reply() {
                        self.answer(reply, Err(error));
                    }
                }
                None => lock_changed |= self.process(origin, incarnation, item),
            }
        }
        lock_changed
    }

    /// Why the head of `origin`'s queue must be refused rather than wait: what belongs to a
    /// lock epoch an operator revoked (its operations, flushes and unlock), an operation under
    /// a fencing token it no longer holds, or one that waits for this rank's own fence or post
    /// after this rank's session ended.
    fn refusal(&self, origin: u32, incarnation: u64, item: &Access<R>) -> Option<RmaError> {
        if let Some(revoked) = self.revoked_refusal(origin, incarnation, item) {
            return Some(revoked);
        }
        let Access::Op { tag, token, .. } = item else {
            return None;
        };
        if *tag == AccessTag::Lock && *token != 0 {
            let held = self.locks.held_token(origin, incarnation);
            if held != Some(*token) {
                return Some(RmaError::new(
                    ErrorClass::RmaSync,
                    format!(
                        "fencing token {token} of rank {origin} is not held at rank {}: the \
                         lock was revoked or released",
                        self.rank
                    ),
                ));
            }
        }
        let peer = self.needed_gone_owner(origin, item)?;
        Some(proc_failed(peer, self.missing(peer)?))
    }

    /// This rank, when `item` waits for its fence or post and its session ended.
    fn needed_gone_owner(&self, origin: u32, item: &Access<R>) -> Option<u32> {
        let Access::Op { tag, .. } = item else {
            return None;
        };
        self.missing(self.rank)?;
        let waits = match *tag {
            AccessTag::Fence { epoch } => self.fence_entered < epoch,
            AccessTag::Pscw { generation } => self.posts[origin as usize] < generation,
            AccessTag::Lock => false,
        };
        waits.then_some(self.rank)
    }

    /// Returns whether lock state changed.
    fn process(&mut self, origin: u32, incarnation: u64, item: Access<R>) -> bool {
        match item {
            Access::Op {
                op,
                access,
                reply,
                op_id,
                tag,
                ..
            } => {
                let sent = super::copy::Sent {
                    origin,
                    incarnation,
                    op_id,
                    tag,
                };
                self.operate(sent, &op, &access, reply);
                false
            }
            Access::LockRequest {
                request,
                holding_elsewhere,
                grant,
            } => {
                self.record(Event::LockRequest {
                    origin,
                    lock_type: request.lock_type.name().to_string(),
                    nocheck: request.nocheck,
                });
                if request.nocheck {
                    let token = self
                        .locks
                        .grant_nocheck(origin, incarnation, request.lock_type);
                    self.record_grant(origin, request.lock_type, token);
                    self.effects
                        .lock_grants
                        .push((request.lock_type, Duration::ZERO));
                    if let Some(reply) = grant {
                        self.answer_synced(reply, true, false, token);
                    }
                } else {
                    self.locks.request(Waiter {
                        origin,
                        incarnation,
                        lock_type: request.lock_type,
                        holding_elsewhere,
                        since: self.now,
                        grant,
                    });
                    self.grant_waiters();
                }
                true
            }
            Access::Unlock { reply } => {
                if let Some(holder) = self.locks.release(origin, incarnation) {
                    tracing::debug!(origin, token = holder.token, "lock released");
                    self.record(Event::LockRelease {
                        origin,
                        token: holder.token,
                    });
                }
                self.done(reply);
                self.grant_waiters();
                true
            }
            Access::Flush { reply } => {
                self.record(Event::Flush { origin });
                self.done(reply);
                false
            }
            Access::CompleteMarker { generation, reply } => {
                let done = &mut self.completes[origin as usize];
                *done = (*done).max(generation);
                self.check_wait();
                self.effects.behind.push((reply, Ok(Outcome::Done)));
                false
            }
        }
    }

    fn record_grant(&mut self, origin: u32, lock_type: LockType, token: u64) {
        self.record(Event::LockGrant {
            origin,
            lock_type: lock_type.name().to_string(),
            token,
        });
    }

    /// Grants every lock request the lock table allows now.
    pub(super) fn grant_waiters(&mut self) {
        for Granted { waiter, token } in self.locks.grant_ready(self.now) {
            self.record_grant(waiter.origin, waiter.lock_type, token);
            let waited = self.now.saturating_duration_since(waiter.since);
            self.effects.lock_grants.push((waiter.lock_type, waited));
            tracing::debug!(
                origin = waiter.origin,
                lock = waiter.lock_type.name(),
                token,
                "lock granted"
            );
            if let Some(reply) = waiter.grant {
                self.answer_synced(reply, true, false, token);
            }
        }
    }
}
