//! The public copy at a target and what writes it: the owner's pushes and publications, and
//! the operations applied; under the unified model each change also goes to the owner.
//!
//! Owns: `push` (the owner's bytes, rule 5, each segment recorded as `published`),
//! `Input::Publish` (a push, and the highest of the owner's publications applied),
//! `Input::Follow` (the whole copy for the owner, in chunks of `FOLLOW_CHUNK`), `operate` (an
//! enabled operation through `window::apply`, after the dynamic window's range check; its `op`
//! event; whether its answer is one with data, early or lazy), and where a write is noted: in
//! the bytes changed since the owner's last pull (separate model) or as an `Update` (unified).
//! Must not: decide when an operation may be applied (`queues`), grow the copy (`dynamic`'s
//! attach does), or take the changed bytes for a pull (`answer_synced` does).

use bytes::Bytes;

use crate::audit::{Event, RecordedOp};
use crate::epoch::AccessTag;
use crate::window::{apply, TargetAccess, TargetOp};
use crate::{ErrorClass, RmaError};

use super::{Outcome, Segment, Target, Update, FOLLOW_CHUNK};

/// Who sent an operation being applied, and in which epoch.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sent {
    /// The origin rank.
    pub(super) origin: u32,
    /// The origin session's incarnation.
    pub(super) incarnation: u64,
    /// The call's id in that session.
    pub(super) op_id: u64,
    /// When it may be applied (its epoch).
    pub(super) tag: AccessTag,
}

impl<R> Target<R> {
    pub(super) fn push(&mut self, segments: Vec<Segment>) {
        for segment in segments {
            self.record(Event::Published {
                offset: segment.offset,
                data: segment.data.to_vec(),
            });
            let start = segment.offset as usize;
            // The caller validated the bounds; a segment outside the copy is dropped, not
            // allowed to panic.
            if let Some(bytes) = start
                .checked_add(segment.data.len())
                .and_then(|end| self.public.get_mut(start..end))
            {
                bytes.copy_from_slice(&segment.data);
            }
        }
    }

    /// `Input::Publish`: the owner's stores numbered up to `seq`, pushed.
    pub(super) fn handle_publish(&mut self, segments: Vec<Segment>, seq: u64) {
        self.push(segments);
        self.published = self.published.max(seq);
    }

    /// `Input::Follow`: under the unified model, the whole copy as updates, then the answer;
    /// refused under the separate model.
    pub(super) fn handle_follow(&mut self, reply: R) {
        if self.unified {
            let segments = self
                .public
                .chunks(FOLLOW_CHUNK)
                .enumerate()
                .map(|(index, chunk)| Segment {
                    offset: (index * FOLLOW_CHUNK) as u64,
                    data: Bytes::copy_from_slice(chunk),
                });
            for segment in segments {
                self.effects.updates.push(Update {
                    published: self.published,
                    segments: vec![segment],
                });
            }
            self.done(reply);
        } else {
            let error = RmaError::new(
                ErrorClass::Arg,
                "the window uses the separate memory model: its private copy follows \
                 the public copy only at synchronization calls",
            );
            self.answer_early(reply, Err(error));
        }
    }

    /// Applies an enabled operation `sent` by an origin and answers it.
    pub(super) fn operate(
        &mut self,
        sent: Sent,
        op: &TargetOp<Bytes>,
        access: &TargetAccess,
        reply: R,
    ) {
        let Sent {
            origin,
            incarnation,
            op_id,
            tag,
        } = sent;
        let (epoch, token) = match tag {
            AccessTag::Fence { epoch } => (epoch, 0),
            AccessTag::Pscw { generation } => (generation, 0),
            AccessTag::Lock => (0, self.locks.token_of(origin)),
        };
        let applied = self
            .check_attached(access)
            .and_then(|()| apply(&mut self.public, access, op));
        match applied {
            Ok(data) => {
                if op.kind.writes() {
                    if self.unified {
                        self.send_update(access);
                    } else {
                        for run in &access.runs {
                            self.changed.insert(run.offset, run.offset + run.len);
                        }
                    }
                }
                if self.recording {
                    self.record(Event::Op {
                        origin,
                        origin_incarnation: incarnation,
                        op_id,
                        epoch,
                        token,
                        op: RecordedOp::of(op.kind),
                        datatype: op.dtype.name().to_string(),
                        disp: op.disp,
                        runs: access
                            .runs
                            .iter()
                            .map(|run| (run.offset, run.len))
                            .collect(),
                        data: op.data.to_vec(),
                        compare: op.compare.to_vec(),
                        result: data.clone(),
                    });
                }
                if op.kind.returns_data() {
                    // a result is seen by the client before the call that completes it: it
                    // waits for the commit of what it read
                    self.answer(reply, Ok(Outcome::Data(data)));
                } else if tag == AccessTag::Lock {
                    // under a lock, MPI completes a put or accumulate at a flush or unlock,
                    // which this target answers after this event, so that answer's commit
                    // covers it. (A fence or complete is answered by the origin's own target,
                    // which cannot vouch for this one's commit: there the origin waits for this
                    // answer's.)
                    self.answer_early(reply, Ok(Outcome::Done));
                } else {
                    // fence or PSCW: the fence or the end-of-epoch marker that completes it is
                    // answered here after it (see Effects::lazy): no commit of its own
                    self.effects.lazy.push((reply, Ok(Outcome::Done)));
                }
            }
            // a refusal changed nothing: nothing to make durable
            Err(error) => self.answer_early(reply, Err(error)),
        }
    }

    /// Unified model: the bytes an operation just wrote, for the owner's private copy.
    fn send_update(&mut self, access: &TargetAccess) {
        let segments = access.runs.iter().map(|run| Segment {
            offset: run.offset,
            data: Bytes::copy_from_slice(
                &self.public[run.offset as usize..(run.offset + run.len) as usize],
            ),
        });
        match self.effects.updates.last_mut() {
            Some(last) if last.published == self.published => last.segments.extend(segments),
            _ => {
                let segments = segments.collect();
                self.effects.updates.push(Update {
                    published: self.published,
                    segments,
                });
            }
        }
    }
}
