//! A world's point-to-point messages, sans I/O: MPI's matching of sends to receives.
//!
//! Owns: the messages sent and not yet received, the receives and probes posted and not yet
//! matched, and the matching rules of MPI-4.0 §3.5 — a receive takes the earliest message
//! that matches its source, tag and context (`None` is `MPI_ANY_SOURCE` / `MPI_ANY_TAG`);
//! messages of one sender on one context are taken in the order sent (non-overtaking);
//! receives posted by one rank are matched in the order posted; a probe sees a message
//! without taking it. Also: the bound on what waits unreceived, and the failure rules — a
//! departed rank's posted receives are dropped, and while a rank is gone a receive that can
//! only match it fails with `MPI_ERR_PROC_FAILED`. Must not: do I/O or know how answers
//! travel (`R` is the caller's opaque reply address), or interpret payloads (the MPI library
//! packs and unpacks them with its datatypes).
//!
//! Sends are buffered: a send is complete once the mailbox holds it, as MPI allows of
//! `MPI_Send` in standard mode. A send comes in two steps, [`Mailbox::admit`] (checked, its
//! bytes counted, its id given, not yet visible) and [`Mailbox::release`], so that the sender
//! records the send under its id before any receive can see it.

use std::collections::{BTreeSet, HashMap, VecDeque};

use bytes::Bytes;

use crate::{ErrorClass, RmaError};

/// Which messages a receive or probe takes: `None` matches any source or any tag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pattern {
    /// The sender's world rank, or any.
    pub source: Option<u32>,
    /// The tag, or any.
    pub tag: Option<i32>,
    /// The communicator's context: messages never cross contexts.
    pub context: u64,
}

/// A message as its sender hands it to the world ([`Mailbox::admit`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// The sender's world rank.
    pub source: u32,
    /// The receiver's world rank.
    pub dest: u32,
    /// Its tag (at least 0).
    pub tag: i32,
    /// Its communicator's context.
    pub context: u64,
    /// The packed data.
    pub payload: Bytes,
}

/// A message as sent: what its sender handed to the world, and its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Unique in the world, increasing in send order: the audit's link between the send and
    /// the receive.
    pub id: u64,
    /// What was sent.
    pub sent: Outgoing,
}

impl Message {
    fn matches(&self, pattern: &Pattern) -> bool {
        let sent = &self.sent;
        sent.context == pattern.context
            && pattern.source.is_none_or(|source| source == sent.source)
            && pattern.tag.is_none_or(|tag| tag == sent.tag)
    }
}

/// What a receive or probe is answered with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// A receive took this message.
    Received(Message),
    /// A probe saw this message (still there): its id, source, tag and size.
    Probed {
        /// The message's id.
        id: u64,
        /// Its sender.
        source: u32,
        /// Its tag.
        tag: i32,
        /// Its payload's bytes.
        len: u64,
    },
    /// A non-blocking probe found nothing.
    Nothing,
}

/// The answers an input causes, in order.
pub type Answers<R> = Vec<(R, Result<Delivery, RmaError>)>;

#[derive(Debug)]
struct Posted<R> {
    rank: u32,
    /// The session of the rank that posted it.
    incarnation: u64,
    pattern: Pattern,
    /// A blocking probe: answered without taking the message.
    probe: bool,
    reply: R,
}

/// One world's messages in flight and receives waiting.
#[derive(Debug)]
pub struct Mailbox<R> {
    nranks: u32,
    /// Unreceived messages, in the order they arrived (which is send order per sender).
    queued: VecDeque<Message>,
    /// Bytes of `queued` payloads, and their bound.
    queued_bytes: u64,
    max_queued_bytes: u64,
    /// Receives and probes waiting, in the order posted.
    posted: VecDeque<Posted<R>>,
    /// Admitted and not yet released.
    held: HashMap<u64, Message>,
    /// Ranks without a session now (departed, not joined again).
    gone: BTreeSet<u32>,
    next_id: u64,
}

impl<R> Mailbox<R> {
    /// An empty mailbox of a world of `nranks` holding at most `max_queued_bytes` of
    /// unreceived payload.
    pub fn new(nranks: u32, max_queued_bytes: u64) -> Self {
        Mailbox {
            nranks,
            queued: VecDeque::new(),
            queued_bytes: 0,
            max_queued_bytes,
            posted: VecDeque::new(),
            held: HashMap::new(),
            gone: BTreeSet::new(),
            next_id: 1,
        }
    }

    /// Messages waiting to be received.
    pub fn queued(&self) -> usize {
        self.queued.len()
    }

    fn check_rank(&self, rank: u32, what: &str) -> Result<(), RmaError> {
        if rank < self.nranks {
            Ok(())
        } else {
            Err(RmaError::new(
                ErrorClass::Rank,
                format!(
                    "{what} rank {rank} is not in the world of {} ranks",
                    self.nranks
                ),
            ))
        }
    }

    /// Rank `source` sends `payload` to `dest`: the message is held, invisible to receives
    /// until [`Mailbox::release`]d, and its id returned. Refused, with nothing changed, for a
    /// rank outside the world, a negative tag, or when the world's unreceived messages would
    /// pass the bound (`MPI_ERR_NO_MEM`).
    pub fn admit(&mut self, sent: Outgoing) -> Result<u64, RmaError> {
        self.check_rank(sent.source, "sending")?;
        self.check_rank(sent.dest, "destination")?;
        let tag = sent.tag;
        if tag < 0 {
            return Err(RmaError::new(
                ErrorClass::Arg,
                format!("tag {tag} is negative: a send's tag is at least 0"),
            ));
        }
        let len = sent.payload.len() as u64;
        if self.queued_bytes.saturating_add(len) > self.max_queued_bytes {
            return Err(RmaError::new(
                ErrorClass::NoMem,
                format!(
                    "the world holds {} bytes of messages not yet received; {len} more would \
                     pass its bound of {} bytes: receive some first",
                    self.queued_bytes, self.max_queued_bytes
                ),
            ));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.queued_bytes += len;
        self.held.insert(id, Message { id, sent });
        Ok(id)
    }

    /// Admitted message `id` becomes visible: the answers of the probes it satisfies and of the
    /// receive that takes it, if one waits (none for an id not held).
    pub fn release(&mut self, id: u64) -> Answers<R> {
        let Some(message) = self.held.remove(&id) else {
            return Vec::new();
        };
        let dest = message.sent.dest;
        let mut answers = Vec::new();
        // the probes and the receive of `dest` that match, in the order they were posted: the
        // probes before the first receive see it, the receive takes it
        let mut index = 0;
        while index < self.posted.len() {
            let posted = &self.posted[index];
            if posted.rank != dest || !message.matches(&posted.pattern) {
                index += 1;
                continue;
            }
            let posted = self.posted.remove(index).expect("in range");
            if posted.probe {
                answers.push((posted.reply, Ok(probed(&message))));
            } else {
                self.queued_bytes -= message.sent.payload.len() as u64;
                answers.push((posted.reply, Ok(Delivery::Received(message))));
                return answers;
            }
        }
        self.queued.push_back(message);
        answers
    }

    /// Rank `rank` (its session `incarnation`) receives (or, with `probe`, probes for) a
    /// message matching `pattern`: answered at once when one is queued, else when one comes —
    /// or, with `wait` false (a non-blocking probe), at once with [`Delivery::Nothing`].
    pub fn receive(
        &mut self,
        (rank, incarnation): (u32, u64),
        pattern: Pattern,
        probe: bool,
        wait: bool,
        reply: R,
    ) -> Answers<R> {
        if let Err(error) = self
            .check_rank(rank, "receiving")
            .and_then(|()| match pattern.source {
                Some(source) => self.check_rank(source, "source"),
                None => Ok(()),
            })
        {
            return vec![(reply, Err(error))];
        }
        if let Some(at) = self
            .queued
            .iter()
            .position(|message| message.sent.dest == rank && message.matches(&pattern))
        {
            let delivery = if probe {
                probed(&self.queued[at])
            } else {
                let message = self.queued.remove(at).expect("in range");
                self.queued_bytes -= message.sent.payload.len() as u64;
                Delivery::Received(message)
            };
            return vec![(reply, Ok(delivery))];
        }
        if !wait {
            return vec![(reply, Ok(Delivery::Nothing))];
        }
        if let Some(source) = pattern.source.filter(|source| self.gone.contains(source)) {
            return vec![(reply, Err(source_gone(source)))];
        }
        self.posted.push_back(Posted {
            rank,
            incarnation,
            pattern,
            probe,
            reply,
        });
        Vec::new()
    }

    /// A session of `rank` started: receives may wait for it again.
    pub fn joined(&mut self, rank: u32) {
        self.gone.remove(&rank);
    }

    /// Session `incarnation` of `rank` ended: its waiting receives and probes are dropped
    /// (their replies with them: no message is taken for a session that is no longer there; a
    /// newer session's stay). While the rank is `gone` (no newer session attached), receives
    /// that can only match it fail. Its messages already sent stay: they were complete when
    /// sent.
    pub fn departed(&mut self, (rank, incarnation): (u32, u64), gone: bool) -> Answers<R> {
        self.posted
            .retain(|posted| (posted.rank, posted.incarnation) != (rank, incarnation));
        if !gone {
            return Vec::new();
        }
        self.gone.insert(rank);
        let (failed, waiting): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut self.posted)
            .into_iter()
            .partition(|posted| posted.pattern.source == Some(rank));
        self.posted = waiting;
        failed
            .into_iter()
            .map(|posted| (posted.reply, Err(source_gone(rank))))
            .collect()
    }
}

fn probed(message: &Message) -> Delivery {
    Delivery::Probed {
        id: message.id,
        source: message.sent.source,
        tag: message.sent.tag,
        len: message.sent.payload.len() as u64,
    }
}

fn source_gone(source: u32) -> RmaError {
    RmaError::new(
        ErrorClass::ProcFailed,
        format!("rank {source}, the only source this receive takes, is gone"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outgoing(source: u32, dest: u32, tag: i32, context: u64, payload: Bytes) -> Outgoing {
        Outgoing {
            source,
            dest,
            tag,
            context,
            payload,
        }
    }

    fn pattern(source: Option<u32>, tag: Option<i32>) -> Pattern {
        Pattern {
            source,
            tag,
            context: 0,
        }
    }

    fn received(answers: Answers<&'static str>) -> Vec<(&'static str, u32, i32, Bytes)> {
        answers
            .into_iter()
            .map(|(reply, answer)| match answer {
                Ok(Delivery::Received(message)) => (
                    reply,
                    message.sent.source,
                    message.sent.tag,
                    message.sent.payload,
                ),
                other => panic!("{reply}: not a receive: {other:?}"),
            })
            .collect()
    }

    fn deliver<R>(
        mailbox: &mut Mailbox<R>,
        from: u32,
        to: u32,
        tag: i32,
        data: &str,
    ) -> Answers<R> {
        let id = mailbox
            .admit(outgoing(from, to, tag, 0, Bytes::from(data.to_string())))
            .unwrap();
        mailbox.release(id)
    }

    /// Rank `rank` (incarnation 1) posts a blocking receive, or a probe, that nothing queued
    /// satisfies: it is answered nothing yet.
    fn waits(
        mailbox: &mut Mailbox<&'static str>,
        rank: u32,
        pattern: Pattern,
        probe: bool,
        reply: &'static str,
    ) {
        let answers = mailbox.receive((rank, 1), pattern, probe, true, reply);
        assert!(answers.is_empty(), "{reply}: {answers:?}");
    }

    fn send(mailbox: &mut Mailbox<&'static str>, from: u32, to: u32, tag: i32, data: &str) {
        let answers = deliver(mailbox, from, to, tag, data);
        assert!(answers.is_empty(), "{answers:?}");
    }

    #[test]
    fn messages_of_one_sender_are_received_in_the_order_sent_whatever_the_tags_match() {
        let mut mailbox = Mailbox::new(3, 1 << 20);
        send(&mut mailbox, 1, 0, 7, "first");
        send(&mut mailbox, 1, 0, 7, "second");
        send(&mut mailbox, 1, 0, 8, "third");
        // the tag-8 receive skips over the tag-7 messages; the any-tag ones take them in order
        let third = mailbox.receive((0, 1), pattern(Some(1), Some(8)), false, true, "r8");
        assert_eq!(received(third)[0].3, "third");
        let first = mailbox.receive((0, 1), pattern(Some(1), None), false, true, "a");
        let second = mailbox.receive((0, 1), pattern(None, None), false, true, "b");
        assert_eq!(received(first)[0].3, "first");
        assert_eq!(received(second)[0].3, "second");
        assert_eq!(mailbox.queued(), 0);
    }

    #[test]
    fn receives_posted_first_are_matched_first_and_a_probe_does_not_take() {
        let mut mailbox = Mailbox::new(3, 1 << 20);
        waits(&mut mailbox, 0, pattern(None, None), true, "probe");
        waits(&mut mailbox, 0, pattern(None, None), false, "r1");
        waits(&mut mailbox, 0, pattern(Some(2), None), false, "r2");
        let answers = deliver(&mut mailbox, 2, 0, 1, "x");
        assert_eq!(answers.len(), 2);
        assert!(matches!(
            answers[0],
            (
                "probe",
                Ok(Delivery::Probed {
                    source: 2,
                    tag: 1,
                    len: 1,
                    ..
                })
            )
        ));
        assert_eq!(received(answers[1..].to_vec())[0].0, "r1");
        let answers = deliver(&mut mailbox, 2, 0, 1, "y");
        assert_eq!(received(answers)[0].0, "r2");
    }

    #[test]
    fn contexts_and_receivers_never_mix() {
        let mut mailbox = Mailbox::new(3, 1 << 20);
        let id = mailbox
            .admit(outgoing(1, 0, 5, 9, Bytes::from_static(b"ctx9")))
            .unwrap();
        // held, not yet released: no receive sees it
        assert_eq!(
            mailbox.receive((0, 1), pattern(None, None), false, false, "early"),
            vec![("early", Ok(Delivery::Nothing))]
        );
        assert!(mailbox.release(id).is_empty());
        send(&mut mailbox, 1, 2, 5, "for 2");
        assert_eq!(
            mailbox.receive((0, 1), pattern(None, None), false, false, "miss"),
            vec![("miss", Ok(Delivery::Nothing))]
        );
        let hit = Pattern {
            context: 9,
            ..pattern(None, None)
        };
        assert_eq!(
            received(mailbox.receive((0, 1), hit, false, false, "hit"))[0].3,
            "ctx9"
        );
    }

    #[test]
    fn bad_ranks_and_tags_are_refused_and_the_bound_holds_with_nothing_changed() {
        let mut mailbox: Mailbox<&str> = Mailbox::new(2, 8);
        let class = |result: Result<u64, RmaError>| result.unwrap_err().class;
        assert_eq!(
            class(mailbox.admit(outgoing(0, 2, 0, 0, Bytes::new()))),
            ErrorClass::Rank
        );
        assert_eq!(
            class(mailbox.admit(outgoing(0, 1, -1, 0, Bytes::new()))),
            ErrorClass::Arg
        );
        send(&mut mailbox, 0, 1, 0, "12345678");
        assert_eq!(
            class(mailbox.admit(outgoing(0, 1, 0, 0, Bytes::from_static(b"9")))),
            ErrorClass::NoMem
        );
        assert_eq!(mailbox.queued(), 1);
        let answers = mailbox.receive((1, 1), pattern(Some(5), None), false, true, "bad");
        assert_eq!(answers[0].1.as_ref().unwrap_err().class, ErrorClass::Rank);
        // once received, the bytes are free again
        mailbox.receive((1, 1), pattern(None, None), false, true, "r");
        send(&mut mailbox, 0, 1, 0, "9");
    }

    #[test]
    fn a_gone_source_fails_the_receives_only_it_could_satisfy() {
        let mut mailbox = Mailbox::new(3, 1 << 20);
        waits(&mut mailbox, 0, pattern(Some(1), None), false, "from1");
        waits(&mut mailbox, 0, pattern(None, None), false, "any");
        waits(&mut mailbox, 1, pattern(None, None), false, "at1");
        let failed = mailbox.departed((1, 1), true);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].0, "from1");
        assert_eq!(
            failed[0].1.as_ref().unwrap_err().class,
            ErrorClass::ProcFailed
        );
        // the departed rank's own receive is gone: a message to it waits for its next session
        send(&mut mailbox, 2, 1, 0, "kept");
        assert_eq!(mailbox.queued(), 1);
        let now = mailbox.receive((0, 1), pattern(Some(1), None), false, true, "later");
        assert_eq!(now[0].1.as_ref().unwrap_err().class, ErrorClass::ProcFailed);
        mailbox.joined(1);
        waits(&mut mailbox, 0, pattern(Some(1), None), false, "again");
        let answers = deliver(&mut mailbox, 2, 0, 0, "z");
        assert_eq!(received(answers)[0].0, "any");
    }
}
