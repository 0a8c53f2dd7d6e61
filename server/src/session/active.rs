//! Active-target synchronization: `fence`, and PSCW's `post`, `start`, `complete`, `wait` and
//! `test`.
//!
//! Owns: carrying out these calls' admitted plans — the order of their event, push and items
//! (a fence logs, pushes, counts its arrival at the window's `FenceTally` and, as the last
//! arrival, sends `FenceReached` to every rank's actor before entering its own; `complete` sends
//! one end-of-epoch marker per target behind the epoch's operations and gathers their
//! acknowledgements), which answers may leave once handed to the writer (`post`, `start`), and
//! applying a true `test` to the rank's epoch state. Must not: decide whether a call is legal
//! or what it must do (admission and core's `EpochState` did), decide when a target's epoch
//! ends (its engine does), touch window bytes (segments go to the rank's own actor), or wait
//! for an actor except through a reply.

use std::sync::{Arc, PoisonError};

use onesided_core::audit::Event;
use onesided_core::target::{Input, Segment};
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::v1::server_message;
use tokio::sync::oneshot;

use super::{access, push, Control, OnWindow, Session};
use crate::actor::AccessItem;
use crate::reply::{Answer, Gather, Reply};

impl Session {
    /// `MPI_Win_fence`: record it, publish at one's own rank, count this rank's arrival at the
    /// fence that closes the epoch (the last arrival tells every target), then enter the fence
    /// at one's own rank, which answers when it may return.
    pub(super) async fn fence(
        &mut self,
        on: OnWindow,
        event: Event,
        fence: u64,
        closes: Option<u64>,
        pull: bool,
        segments: Vec<Segment>,
    ) -> Result<(), RmaError> {
        let OnWindow {
            window,
            entry,
            reply,
            me,
            ..
        } = on;
        let ranks = &entry.ranks;
        let own = &ranks[me as usize];
        self.log(window, event, None).await;
        push(own, segments).await?;
        if let Some(epoch) = closes {
            // everything this rank issued in the epoch is in its targets' inboxes, so the
            // notice sent after the last arrival reaches each target behind it
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
                for target in ranks {
                    if let Err(error) = target.send(Input::FenceReached { epoch }).await {
                        stopped.get_or_insert(error);
                    }
                }
                if let Some(error) = stopped {
                    return Err(error);
                }
            }
        }
        own.send(Input::FenceEnter {
            fence,
            closes,
            pull,
            reply,
        })
        .await
    }

    /// `MPI_Win_post`: publish, record it (answered once handed to the writer: the `wait` that
    /// ends the epoch waits for a commit behind it), then open the exposure epoch at one's own
    /// rank.
    pub(super) async fn post(
        &mut self,
        on: OnWindow,
        event: Event,
        group: Vec<u32>,
        segments: Vec<Segment>,
    ) -> Result<(), RmaError> {
        let own = &on.entry.ranks[on.me as usize];
        push(own, segments).await?;
        self.log_early(on.window, event, on.reply).await;
        own.send(Input::Post { group }).await
    }

    /// `MPI_Win_start`: recorded, answered once handed to the writer (the `complete` that ends
    /// the epoch waits for a commit behind it; operations of the epoch wait at their targets
    /// for the post).
    pub(super) async fn start(&mut self, on: OnWindow, event: Event) -> Result<(), RmaError> {
        self.log_early(on.window, event, on.reply).await;
        Ok(())
    }

    /// `MPI_Win_complete`: recorded, then each target of the epoch gets its end-of-epoch
    /// marker behind the epoch's operations; answered once every target acknowledged its
    /// marker. A target acknowledges after applying the epoch's operations, and its answer
    /// waits for the commit of everything recorded before it — this event, those operations
    /// (whose own answers ride along: `Effects::lazy`) — so one commit ends the epoch. With no
    /// target, answered after this event's commit.
    pub(super) async fn complete(
        &mut self,
        on: OnWindow,
        markers: Vec<(u32, u64)>,
    ) -> Result<(), RmaError> {
        let origin = self.origin(on.me);
        let OnWindow {
            window,
            entry,
            reply,
            ..
        } = on;
        if markers.is_empty() {
            self.log(window, Event::Complete, Some(reply)).await;
            return Ok(());
        }
        self.log(window, Event::Complete, None).await;
        let gather = Gather::new(markers.len(), reply);
        for (target, generation) in markers {
            let marker = AccessItem::CompleteMarker {
                generation,
                reply: Reply::Gather(Arc::clone(&gather)),
            };
            access(&entry.ranks[target as usize], origin, marker).await?;
        }
        Ok(())
    }

    /// `MPI_Win_wait`: recorded, then one's own rank answers when the exposure epoch ended.
    pub(super) async fn wait(&mut self, on: OnWindow, pull: bool) -> Result<(), RmaError> {
        let own = &on.entry.ranks[on.me as usize];
        self.log(on.window, Event::WaitEnter, None).await;
        let wait = Input::Wait {
            pull,
            test: false,
            reply: on.reply,
        };
        own.send(wait).await
    }

    /// `MPI_Win_test`: one's own rank says whether the exposure epoch ended; the answer comes
    /// back to this session ([`Session::tested`]) before it goes out.
    pub(super) async fn test(&mut self, on: OnWindow, pull: bool) -> Result<(), RmaError> {
        let own = &on.entry.ranks[on.me as usize];
        let (sender, answer) = oneshot::channel();
        let test = Input::Wait {
            pull,
            test: true,
            reply: Reply::Session(sender),
        };
        own.send(test).await?;
        let gone = RmaError::new(ErrorClass::Win, "the window was freed");
        self.come_back(Control::Test(on.window), on.reply, answer, gone);
        Ok(())
    }

    /// `test`'s answer: a true flag has exactly the effect of wait on the epoch state.
    pub(super) fn tested(&mut self, window: u64, reply: Reply, answer: Answer) {
        if let Ok(server_message::Reply::Synced(synced)) = &answer {
            if synced.flag {
                if let Some(open) = self.windows.get_mut(&window) {
                    let _ = open.epoch.wait();
                }
            }
        }
        reply.send(answer);
    }
}
