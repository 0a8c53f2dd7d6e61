//! Passive-target synchronization: `lock`, `unlock`, `lock_all`, `unlock_all`, the flushes and
//! `sync`.
//!
//! Also the calls at one's own rank that are neither epochs nor operations: the unified
//! model's `publish` and `follow`, and a dynamic window's `attach` and `detach`.
//!
//! Owns: carrying out these calls' admitted plans — when a lock's request travels (an eager one
//! to one's own rank at once, a lazy one in front of the first operation or the unlock), the
//! order of event, push and items, and gathering the answers of a call sent to several targets
//! (`unlock_all`, `flush_all`). Must not: decide whether a lock may be granted or in which
//! order (the target's lock table does), decide legality (admission and `EpochState` did),
//! touch window bytes (segments go to the rank's own actor), or wait for a grant except
//! through a reply.

use std::sync::Arc;

use onesided_core::audit::Event;
use onesided_core::epoch::LockRequest;
use onesided_core::target::{Input, Segment};
use onesided_core::RmaError;
use onesided_proto::admit;

use super::{access, lock_request, push, OnWindow, Session};
use crate::actor::AccessItem;
use crate::reply::{Gather, Reply};

impl Session {
    /// `MPI_Win_lock`: recorded. A lazy lock is answered once its request is handed to the
    /// log (it completes nothing: the unlock, whose answer waits for the commit, does; its
    /// request travels with the first operation or the unlock); an eager one (one's own rank)
    /// at its grant.
    pub(super) async fn lock(
        &mut self,
        on: OnWindow,
        event: Event,
        eager: Option<admit::Request>,
    ) -> Result<(), RmaError> {
        self.log(on.window, event, None).await;
        match eager {
            None => {
                on.reply.done();
                Ok(())
            }
            Some(request) => {
                let own = &on.entry.ranks[on.me as usize];
                let item = lock_request(request, Some(on.reply));
                access(own, self.origin(on.me), item).await
            }
        }
    }

    /// `MPI_Win_unlock`: recorded, publish, the lazy request if it never travelled, then the
    /// unlock, answered once released.
    pub(super) async fn unlock(
        &mut self,
        on: OnWindow,
        event: Event,
        target: u32,
        request: Option<admit::Request>,
        segments: Vec<Segment>,
    ) -> Result<(), RmaError> {
        let origin = self.origin(on.me);
        self.log(on.window, event, None).await;
        push(&on.entry.ranks[on.me as usize], segments).await?;
        let target = &on.entry.ranks[target as usize];
        if let Some(request) = request {
            access(target, origin, lock_request(request, None)).await?;
        }
        access(target, origin, AccessItem::Unlock { reply: on.reply }).await
    }

    /// `MPI_Win_lock_all`: recorded, then the request at one's own rank, answered at its
    /// grant; the other targets' requests travel lazily. A `lock_all` epoch holds at every
    /// target from the call on, so its requests are never held back behind exclusive ones.
    pub(super) async fn lock_all(
        &mut self,
        on: OnWindow,
        event: Event,
        request: LockRequest,
    ) -> Result<(), RmaError> {
        self.log(on.window, event, None).await;
        let request = admit::Request {
            request,
            holding_elsewhere: true,
        };
        let own = &on.entry.ranks[on.me as usize];
        access(
            own,
            self.origin(on.me),
            lock_request(request, Some(on.reply)),
        )
        .await
    }

    /// `MPI_Win_unlock_all`: recorded, publish, then an unlock at every target whose lock was
    /// requested, answered once all are released.
    pub(super) async fn unlock_all(
        &mut self,
        on: OnWindow,
        event: Event,
        released: Vec<u32>,
        segments: Vec<Segment>,
    ) -> Result<(), RmaError> {
        self.log(on.window, event, None).await;
        push(&on.entry.ranks[on.me as usize], segments).await?;
        self.at_each(on, released, |reply| AccessItem::Unlock { reply })
            .await
    }

    /// `MPI_Win_flush` (and `flush_local`): answered at once when nothing travelled or only
    /// local completion is asked, else recorded and answered by the target once everything
    /// sent before it is applied.
    pub(super) async fn flush(
        &mut self,
        on: OnWindow,
        travels: Option<(Event, u32)>,
    ) -> Result<(), RmaError> {
        let Some((event, target)) = travels else {
            on.reply.done();
            return Ok(());
        };
        self.log(on.window, event, None).await;
        let flush = AccessItem::Flush { reply: on.reply };
        access(&on.entry.ranks[target as usize], self.origin(on.me), flush).await
    }

    /// `MPI_Win_flush_all` (and `flush_local_all`): as [`Session::flush`] at every target,
    /// answered once all answered.
    pub(super) async fn flush_all(
        &mut self,
        on: OnWindow,
        travels: Option<(Event, Vec<u32>)>,
    ) -> Result<(), RmaError> {
        let Some((event, targets)) = travels else {
            on.reply.done();
            return Ok(());
        };
        self.log(on.window, event, None).await;
        self.at_each(on, targets, |reply| AccessItem::Flush { reply })
            .await
    }

    /// Sends `item` to every one of `targets`, the call answered once all of them answered.
    async fn at_each(
        &mut self,
        on: OnWindow,
        targets: Vec<u32>,
        item: fn(Reply) -> AccessItem,
    ) -> Result<(), RmaError> {
        let origin = self.origin(on.me);
        let gather = Gather::new(targets.len(), on.reply);
        for target in targets {
            let reply = Reply::Gather(Arc::clone(&gather));
            access(&on.entry.ranks[target as usize], origin, item(reply)).await?;
        }
        Ok(())
    }

    /// Unified model: the owner's stores, published at its own rank as they happen; answered
    /// once handed to it (the client does not wait: its stores are numbered, and the updates
    /// it receives say which were applied).
    pub(super) async fn publish(
        &mut self,
        on: OnWindow,
        segments: Vec<Segment>,
        seq: u64,
    ) -> Result<(), RmaError> {
        let own = &on.entry.ranks[on.me as usize];
        own.send(Input::Publish { segments, seq }).await?;
        on.reply.done();
        Ok(())
    }

    /// Unified model: this session follows its own public copy from now on; answered after
    /// the whole copy was sent.
    pub(super) async fn follow(&mut self, on: OnWindow) -> Result<(), RmaError> {
        let own = &on.entry.ranks[on.me as usize];
        own.follow(self.out.clone(), on.reply).await
    }

    /// `MPI_Win_attach` (dynamic windows): a region of `size` bytes at one's own rank,
    /// answered with its address once its event is durable.
    pub(super) async fn attach(
        &mut self,
        on: OnWindow,
        size: u64,
        at: Option<u64>,
    ) -> Result<(), RmaError> {
        let own = &on.entry.ranks[on.me as usize];
        own.send(Input::Attach {
            size,
            at,
            reply: on.reply,
        })
        .await
    }

    /// `MPI_Win_detach` (dynamic windows): the region at `base` of one's own rank.
    pub(super) async fn detach(&mut self, on: OnWindow, base: u64) -> Result<(), RmaError> {
        let own = &on.entry.ranks[on.me as usize];
        own.send(Input::Detach {
            base,
            reply: on.reply,
        })
        .await
    }

    /// `MPI_Win_sync`: recorded, publish, then pull what changed remotely at one's own rank.
    pub(super) async fn sync(
        &mut self,
        on: OnWindow,
        segments: Vec<Segment>,
    ) -> Result<(), RmaError> {
        self.log(on.window, Event::Sync, None).await;
        let own = &on.entry.ranks[on.me as usize];
        push(own, segments).await?;
        own.send(Input::Pull { reply: on.reply }).await
    }
}
