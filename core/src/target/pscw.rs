//! PSCW at a target: the owner's exposure epoch.
//!
//! Owns: `Input::Post` (per origin of the group, how many posts included it: what enables its
//! operations of that generation), `Input::Wait` and `test`, and when the wait returns: once
//! every origin of the group completed towards this rank as often as it was posted to, or with
//! `PROC_FAILED` when one that has not is gone or absent. Must not: take an origin's complete
//! marker (an item of its queue: `queues` counts it and asks here again) or know the origin's
//! side of the epoch (`crate::epoch`).

use crate::audit::Event;

use super::{proc_failed, Outcome, Target};

/// The owner's wait (or test) for the end of its exposure epoch.
#[derive(Debug)]
pub(super) struct PendingWait<R> {
    pub(super) pull: bool,
    pub(super) reply: R,
}

impl<R> Target<R> {
    /// `Input::Post`: the owner posted to `group` (sorted).
    pub(super) fn handle_post(&mut self, group: Vec<u32>) {
        for &origin in &group {
            if let Some(count) = self.posts.get_mut(origin as usize) {
                *count += 1;
            }
        }
        self.post_group = Some(group);
        self.drain_all();
    }

    /// `Input::Wait`: the owner waits for the end of its exposure epoch, or with `test` asks
    /// whether it ended (answered at once with `flag = false` if not).
    pub(super) fn handle_wait(&mut self, pull: bool, test: bool, reply: R) {
        self.pending_wait = Some(PendingWait { pull, reply });
        self.check_wait();
        if test {
            if let Some(waiting) = self.pending_wait.take() {
                self.record(Event::TestFalse);
                let answer = Ok(Outcome::Synced {
                    pull: Vec::new(),
                    flag: false,
                    token: 0,
                });
                self.answer(waiting.reply, answer);
            }
        }
    }

    pub(super) fn check_wait(&mut self) {
        let (Some(group), Some(_)) = (&self.post_group, &self.pending_wait) else {
            return;
        };
        let missing_gone = group
            .iter()
            .find(|&&origin| {
                self.missing(origin).is_some()
                    && self.completes[origin as usize] < self.posts[origin as usize]
            })
            .copied();
        if let Some(peer) = missing_gone {
            self.post_group = None;
            if let Some(waiting) = self.pending_wait.take() {
                self.record(Event::PeerFailed {
                    peer,
                    call: "wait".to_string(),
                });
                let error = proc_failed(peer, self.missing(peer).map_or("", String::as_str));
                self.answer(waiting.reply, Err(error));
            }
            return;
        }
        let all_completed = group
            .iter()
            .all(|&origin| self.completes[origin as usize] >= self.posts[origin as usize]);
        if !all_completed {
            return;
        }
        self.post_group = None;
        if let Some(waiting) = self.pending_wait.take() {
            self.record(Event::WaitExit);
            self.answer_synced(waiting.reply, waiting.pull, true, 0);
        }
    }
}
