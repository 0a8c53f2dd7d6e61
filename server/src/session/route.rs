//! Carrying out a route: the steps core's `origin::route` gives an admitted call, over this
//! node's actors and audit writer.
//!
//! Owns: turning each [`Step`] into I/O — an event to the writer (answering the call after its
//! commit, or once handed on), bytes to one's own actor, the fence's arrival at the window's
//! `FenceTally` (the last arrival tells every rank's actor, even past one that stopped), an
//! input or an access item to an actor, a drain, the window's free collective — and each
//! [`To`] into a reply: the call's own, a share of one gathered answer, or the way back to the
//! session (a test's flag, applied to the epoch state by [`Session::tested`]). Must not:
//! decide what a call does or in which order (the route says), or wait for an actor except
//! through a reply.

use std::sync::{Arc, PoisonError};

use onesided_core::origin::{Answers, Route, Step, To};
use onesided_core::target::Input;
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::v1::server_message;
use tokio::sync::oneshot;

use super::{access, push, Control, OnWindow, Session};
use crate::reply::{Answer, Gather, Reply};
use crate::world::Collective;

/// The replies a route's answers go to.
struct Answering {
    /// The call's own reply, until a step answers with it.
    caller: Option<Reply>,
    /// The gathered answer, when the route gathers.
    gather: Option<Arc<Gather>>,
    /// The caller's reply and the way back of an answer that comes back to the session
    /// first, once the step that carries it was handed on.
    back: Option<(Reply, oneshot::Receiver<Answer>)>,
}

impl Answering {
    fn new(route: &Route, reply: Reply) -> Self {
        if route.gather > 0 {
            Answering {
                caller: None,
                gather: Some(Gather::new(route.gather, reply)),
                back: None,
            }
        } else {
            Answering {
                caller: Some(reply),
                gather: None,
                back: None,
            }
        }
    }

    fn caller(&mut self) -> Result<Reply, RmaError> {
        self.caller
            .take()
            .ok_or_else(|| RmaError::new(ErrorClass::Intern, "a route answers its call twice"))
    }

    fn gathered(&self) -> Result<Reply, RmaError> {
        self.gather
            .as_ref()
            .map(|gather| Reply::Gather(Arc::clone(gather)))
            .ok_or_else(|| RmaError::new(ErrorClass::Intern, "a route gathers nothing"))
    }

    /// The reply an answer sent `to` goes to.
    fn reply_to(&mut self, to: To) -> Result<Reply, RmaError> {
        match to {
            To::Caller => self.caller(),
            To::Gathered => self.gathered(),
            To::Origin => {
                let caller = self.caller()?;
                let (sender, answer) = oneshot::channel();
                self.back = Some((caller, answer));
                Ok(Reply::Session(sender))
            }
        }
    }
}

impl Session {
    /// Carries out `route`, the steps of a call admitted on `on`'s window, in order; the
    /// first step that fails ends it with its error (as the call's answer).
    pub(super) async fn carry_out(&mut self, on: OnWindow, route: Route) -> Result<(), RmaError> {
        let OnWindow {
            window,
            entry,
            reply,
            me,
            ..
        } = on;
        let origin = self.origin(me);
        let own = &entry.ranks[me as usize];
        let mut answering = Answering::new(&route, reply);
        for step in route.steps {
            match step {
                Step::Log { event, answers } => match answers {
                    Answers::No => self.log(window, event, None).await,
                    Answers::Committed => {
                        let reply = answering.caller()?;
                        self.log(window, event, Some(reply)).await;
                    }
                    Answers::Handed => {
                        let reply = answering.caller()?;
                        self.log_early(window, event, reply).await;
                    }
                },
                Step::Push(segments) => push(own, segments).await?,
                Step::Arrive(epoch) => {
                    // everything this rank issued in the epoch is in its targets' inboxes, so
                    // the notice sent after the last arrival reaches each target behind it
                    let last = entry
                        .fences
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .arrive(me, epoch);
                    if let Some(open) = self.windows.get_mut(&window) {
                        open.fenced = Some(epoch);
                    }
                    if last {
                        // every target, even past one that stopped: the others' fences wait
                        let mut stopped = None;
                        for target in &entry.ranks {
                            if let Err(error) = target.send(Input::FenceReached { epoch }).await {
                                stopped.get_or_insert(error);
                            }
                        }
                        if let Some(error) = stopped {
                            return Err(error);
                        }
                    }
                }
                Step::Own(Input::Follow { .. }) => {
                    own.follow(self.out.clone(), answering.caller()?).await?;
                }
                Step::Own(input) => {
                    own.send(input.try_map(|to| answering.reply_to(to))?)
                        .await?;
                    self.wait_back(window, &mut answering);
                }
                Step::Send { to, item } => {
                    let item = item.try_map(|to| answering.reply_to(to))?;
                    access(&entry.ranks[to as usize], origin, item).await?;
                    self.wait_back(window, &mut answering);
                }
                Step::Drain => self.registry.audit().flush().await,
                Step::Free { barrier } => {
                    self.windows.remove(&window);
                    let collective = Collective::Free { window, barrier };
                    let group = entry.desc.group.clone();
                    let reply = answering.caller()?;
                    self.member
                        .collectives
                        .arrive(collective, self.member.rank, group, reply)
                        .await?;
                }
                Step::Answer => answering.caller()?.done(),
            }
        }
        Ok(())
    }

    /// An answer that comes back to the session (a test's flag), once the step carrying its
    /// way back was handed on: waited for beside the session's calls, then applied
    /// ([`Session::tested`]) and sent to the caller.
    fn wait_back(&mut self, window: u64, answering: &mut Answering) {
        if let Some((caller, answer)) = answering.back.take() {
            let gone = RmaError::new(ErrorClass::Win, "the window was freed");
            self.come_back(Control::Test(window), caller, answer, gone);
        }
    }

    /// `test`'s answer, back at the session: a true flag has exactly the effect of wait on the
    /// epoch state; then it goes to the caller.
    pub(super) fn tested(&mut self, window: u64, reply: Reply, answer: Answer) {
        if let Ok(server_message::Reply::Synced(synced)) = &answer {
            if let Some(open) = self.windows.get_mut(&window) {
                open.epoch.tested(synced.flag);
            }
        }
        reply.send(answer);
    }
}
