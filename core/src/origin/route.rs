//! What an admitted call does, as data: the steps a session carries out, in order.
//!
//! Owns: for each [`Admitted`] plan, which events are recorded and which of them answers the
//! call, what is published at one's own rank, where the fence's arrival is counted, which
//! input goes to one's own target and which item to which target, and where each answer goes
//! ([`To`]). Must not: do I/O, hold reply channels, or know an actor, a writer or a network:
//! the server's session interprets a [`Route`] over its actors and audit writer, the simulator
//! over in-memory engines, so neither decides an MPI rule of its own.

use crate::audit::Event;
use crate::target::{Access, Input, Segment};

use super::{op_issued, Admitted, Request};

/// Where an answer goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum To {
    /// The call's own answer (at most one step of a route answers the call).
    Caller,
    /// One share of an answer gathered from several targets: the call is answered once
    /// [`Route::gather`] shares arrived, or at the first failure.
    Gathered,
    /// Back to the origin before the caller: a test's flag, which the origin applies to its
    /// epoch state ([`crate::epoch::EpochState::tested`]) and then answers with.
    Origin,
}

/// When a recorded event answers the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answers {
    /// It does not.
    No,
    /// Once the event is committed (the answer is durable).
    Committed,
    /// Once the event is handed to the writer: the call completes nothing a client may rely
    /// on, and the closing call's commit covers it.
    Handed,
}

/// One step of a route.
#[derive(Debug)]
pub enum Step {
    /// Record `event` (before anything it causes is forwarded).
    Log {
        /// The event.
        event: Event,
        /// Whether and when it answers the call.
        answers: Answers,
    },
    /// Publish bytes at one's own rank (the step is left out when there are none).
    Push(Vec<Segment>),
    /// Count this rank's arrival at the fence that closes `epoch` (the window's
    /// [`crate::fence::FenceTally`]); the last arrival sends [`Input::FenceReached`] to every
    /// rank, behind everything each rank issued in the epoch.
    Arrive(u64),
    /// An input to one's own rank's target engine.
    Own(Input<To>),
    /// An item to the target engine of rank `to`, from this origin (its rank and incarnation).
    Send {
        /// The target rank.
        to: u32,
        /// What travels.
        item: Access<To>,
    },
    /// Wait until everything the origin submitted to the log is committed (a drain).
    Drain,
    /// Leave the window: the free collective (a barrier unless `barrier` is false) answers
    /// the call once every rank of the window called.
    Free {
        /// Whether freeing is a barrier.
        barrier: bool,
    },
    /// Answer the call now, done.
    Answer,
}

/// The steps of one admitted call, and how many gathered shares answer it.
#[derive(Debug, Default)]
pub struct Route {
    /// In order.
    pub steps: Vec<Step>,
    /// How many [`To::Gathered`] shares answer the call (0: none is gathered).
    pub gather: usize,
}

/// The origin of a call: its id in the session, the session's incarnation, its rank in the
/// window, and whether the log records (an operation's `op_issued` is built only then).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Issuer {
    /// The call's id.
    pub id: u64,
    /// The session's incarnation.
    pub incarnation: u64,
    /// The rank in the window.
    pub me: u32,
    /// Whether the audit records events.
    pub recording: bool,
}

impl Route {
    fn log(&mut self, event: Event, answers: Answers) {
        self.steps.push(Step::Log { event, answers });
    }

    fn push(&mut self, segments: Vec<Segment>) {
        if !segments.is_empty() {
            self.steps.push(Step::Push(segments));
        }
    }

    /// Records `event` (not answering), then publishes `push`.
    fn publishing(&mut self, event: Event, push: Vec<Segment>) {
        self.log(event, Answers::No);
        self.push(push);
    }

    fn own(&mut self, input: Input<To>) {
        self.steps.push(Step::Own(input));
    }

    fn send(&mut self, to: u32, item: Access<To>) {
        self.steps.push(Step::Send { to, item });
    }

    /// A fence (called with one only): record, publish, count the arrival at the fence that
    /// closes the epoch, then enter the fence at one's own rank, which answers when it may
    /// return.
    fn fence(&mut self, admitted: Admitted) {
        let Admitted::Fence {
            event,
            fence,
            closes,
            pull,
            push,
        } = admitted
        else {
            return;
        };
        self.publishing(event, push);
        self.steps.extend(closes.map(Step::Arrive));
        let reply = To::Caller;
        self.own(Input::FenceEnter {
            fence,
            closes,
            pull,
            reply,
        });
    }

    /// An unlock (called with one only): record, publish, the lazy request if it never
    /// travelled, then the unlock, answered once released.
    fn unlock(&mut self, admitted: Admitted) {
        let Admitted::Unlock {
            event,
            target,
            request,
            push,
        } = admitted
        else {
            return;
        };
        self.publishing(event, push);
        if let Some(request) = request {
            self.send(target, lock_request(request, None));
        }
        self.send(target, Access::Unlock { reply: To::Caller });
    }

    /// An operation (called with one only): recorded as issued (when the log records), the
    /// lazy lock request first if one must travel, then the operation, answered by the target.
    fn operation(&mut self, admitted: Admitted, from: Issuer) {
        let Admitted::Op {
            target,
            request,
            tag,
            token,
            op,
            access,
        } = admitted
        else {
            return;
        };
        if from.recording {
            self.log(op_issued(from.id, target, &op, &access), Answers::No);
        }
        if let Some(request) = request {
            self.send(target, lock_request(request, None));
        }
        let (op_id, incarnation, reply) = (from.id, from.incarnation, To::Caller);
        self.send(
            target,
            Access::Op {
                op_id,
                incarnation,
                tag,
                token,
                op,
                access,
                reply,
            },
        );
    }

    /// Each target's end-of-epoch marker, behind the epoch's operations; a target
    /// acknowledges after applying them. With no target, answered after the commit.
    fn complete(&mut self, markers: Vec<(u32, u64)>) {
        if markers.is_empty() {
            self.log(Event::Complete, Answers::Committed);
            return;
        }
        self.log(Event::Complete, Answers::No);
        self.gather = markers.len();
        for (target, generation) in markers {
            let reply = To::Gathered;
            self.send(target, Access::CompleteMarker { generation, reply });
        }
    }

    /// `item` to each of `targets`, gathered; answered at once when there is none.
    fn each(&mut self, targets: Vec<u32>, item: fn(To) -> Access<To>) {
        if targets.is_empty() {
            self.steps.push(Step::Answer);
            return;
        }
        self.gather = targets.len();
        for target in targets {
            self.send(target, item(To::Gathered));
        }
    }
}

fn lock_request(request: Request, grant: Option<To>) -> Access<To> {
    Access::LockRequest {
        request: request.request,
        holding_elsewhere: request.holding_elsewhere,
        grant,
    }
}

/// The route of `admitted`, a call of `from`.
pub fn route(admitted: Admitted, from: Issuer) -> Route {
    let mut route = Route::default();
    match admitted {
        fence @ Admitted::Fence { .. } => route.fence(fence),
        // publish, record (answered once handed on: the wait that ends the epoch waits for a
        // commit behind it), then open the exposure epoch at one's own rank
        Admitted::Post { event, group, push } => {
            route.push(push);
            route.log(event, Answers::Handed);
            route.own(Input::Post { group });
        }
        // operations of the epoch wait at their targets for the post
        Admitted::Start { event } => route.log(event, Answers::Handed),
        Admitted::Complete { markers } => route.complete(markers),
        Admitted::Wait { pull } => {
            route.log(Event::WaitEnter, Answers::No);
            let (test, reply) = (false, To::Caller);
            route.own(Input::Wait { pull, test, reply });
        }
        Admitted::Test { pull } => route.own(Input::Wait {
            pull,
            test: true,
            reply: To::Origin,
        }),
        // a lazy lock is answered once recorded (its request travels with the first
        // operation or the unlock); an eager one (one's own rank) at its grant
        Admitted::Lock { event, eager } => {
            route.log(event, Answers::No);
            match eager {
                None => route.steps.push(Step::Answer),
                Some(request) => route.send(from.me, lock_request(request, Some(To::Caller))),
            }
        }
        unlock @ Admitted::Unlock { .. } => route.unlock(unlock),
        // a lock_all epoch holds at every target from the call on, so its requests are never
        // held back behind exclusive ones; the other targets' requests travel lazily
        Admitted::LockAll { event, request } => {
            route.log(event, Answers::No);
            let request = Request {
                request,
                holding_elsewhere: true,
            };
            route.send(from.me, lock_request(request, Some(To::Caller)));
        }
        Admitted::UnlockAll {
            event,
            released,
            push,
        } => {
            route.publishing(event, push);
            route.each(released, |reply| Access::Unlock { reply });
        }
        Admitted::Flush { travels } => match travels {
            None => route.steps.push(Step::Answer),
            Some((event, target)) => {
                route.log(event, Answers::No);
                route.send(target, Access::Flush { reply: To::Caller });
            }
        },
        Admitted::FlushAll { travels } => match travels {
            None => route.steps.push(Step::Answer),
            Some((event, targets)) => {
                route.log(event, Answers::No);
                route.each(targets, |reply| Access::Flush { reply });
            }
        },
        Admitted::Sync { push } => {
            route.publishing(Event::Sync, push);
            route.own(Input::Pull { reply: To::Caller });
        }
        // the client does not wait: its stores are numbered, and the updates it receives say
        // which were applied
        Admitted::Publish { push, seq } => {
            route.own(Input::Publish {
                segments: push,
                seq,
            });
            route.steps.push(Step::Answer);
        }
        Admitted::Follow => route.own(Input::Follow { reply: To::Caller }),
        Admitted::Attach { size, at } => route.own(Input::Attach {
            size,
            at,
            reply: To::Caller,
        }),
        Admitted::Detach { base } => route.own(Input::Detach {
            base,
            reply: To::Caller,
        }),
        op @ Admitted::Op { .. } => route.operation(op, from),
        Admitted::ClientRows { marker } => route.log(marker, Answers::Committed),
        // the client's own events, answered once handed on (its next completing call waits
        // for their commit); none at all is a drain
        Admitted::Recorded { events } => {
            if events.is_empty() {
                route.steps.push(Step::Drain);
            }
            for event in events {
                route.log(event, Answers::No);
            }
            route.steps.push(Step::Answer);
        }
        Admitted::Free { event, barrier } => {
            route.log(event, Answers::No);
            route.steps.push(Step::Free { barrier });
        }
    }
    route
}

impl<R> Access<R> {
    /// The same item with its answers sent where `to` says: a route's [`To`] become the
    /// interpreter's reply handles. The first refusal of `to` is returned.
    ///
    /// # Errors
    /// What `to` returns.
    pub fn try_map<S, E>(self, mut to: impl FnMut(R) -> Result<S, E>) -> Result<Access<S>, E> {
        Ok(match self {
            Access::Op {
                op_id,
                incarnation,
                tag,
                token,
                op,
                access,
                reply,
            } => Access::Op {
                op_id,
                incarnation,
                tag,
                token,
                op,
                access,
                reply: to(reply)?,
            },
            Access::LockRequest {
                request,
                holding_elsewhere,
                grant,
            } => Access::LockRequest {
                request,
                holding_elsewhere,
                grant: grant.map(to).transpose()?,
            },
            Access::Unlock { reply } => Access::Unlock { reply: to(reply)? },
            Access::Flush { reply } => Access::Flush { reply: to(reply)? },
            Access::CompleteMarker { generation, reply } => Access::CompleteMarker {
                generation,
                reply: to(reply)?,
            },
        })
    }
}

impl<R> Input<R> {
    /// As [`Access::try_map`], for an input.
    ///
    /// # Errors
    /// What `to` returns.
    pub fn try_map<S, E>(self, mut to: impl FnMut(R) -> Result<S, E>) -> Result<Input<S>, E> {
        Ok(match self {
            Input::Access {
                origin,
                incarnation,
                item,
            } => Input::Access {
                origin,
                incarnation,
                item: item.try_map(to)?,
            },
            Input::Departed(left) => Input::Departed(left),
            Input::Opened { origin } => Input::Opened { origin },
            Input::Push { segments } => Input::Push { segments },
            Input::Publish { segments, seq } => Input::Publish { segments, seq },
            Input::Follow { reply } => Input::Follow { reply: to(reply)? },
            Input::FenceEnter {
                fence,
                closes,
                pull,
                reply,
            } => Input::FenceEnter {
                fence,
                closes,
                pull,
                reply: to(reply)?,
            },
            Input::FenceReached { epoch } => Input::FenceReached { epoch },
            Input::Post { group } => Input::Post { group },
            Input::Wait { pull, test, reply } => Input::Wait {
                pull,
                test,
                reply: to(reply)?,
            },
            Input::Attach { size, at, reply } => Input::Attach {
                size,
                at,
                reply: to(reply)?,
            },
            Input::Detach { base, reply } => Input::Detach {
                base,
                reply: to(reply)?,
            },
            Input::Pull { reply } => Input::Pull { reply: to(reply)? },
            Input::Stop => Input::Stop,
            Input::Abandon => Input::Abandon,
        })
    }
}
