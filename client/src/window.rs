//! A window as one rank sees it: its private copy, its epoch state, and every MPI RMA call.
//!
//! The private copy is this rank's window memory. Local loads and stores touch only it. Dirty
//! (stored, not yet published) bytes are pushed to the public copy at exactly post, fence,
//! unlock, unlock_all and sync (rule 5), and bytes changed remotely are pulled at exactly wait,
//! fence, lock (of this rank), lock_all and sync (rule 6) — never elsewhere. A pull never
//! overwrites a dirty byte (core's `origin::PrivateCopy` holds the bytes and that rule).
//!
//! Rooms: this file holds the window's state and what the calls share; `private_copy` the local
//! loads and stores, `synchronization` every synchronization call, `operations` every
//! communication call, `requests` the requests of the request-based calls, `dynamic` a dynamic
//! window's regions.
//!
//! Owns: one rank's view of one window — its `State` (the origin-side `EpochState`, the
//! private copy with its dirty, stored and loaded ranges, the operations outstanding, the
//! fencing token of each lock seen granted), the unified model's numbered publications and the
//! updates it applies (`follow`, `apply_update`), losing the epochs when the session attaches
//! again (`lose_epochs`), `Pending` results, the byte size of a piece (`PIECE_BYTES`), and
//! `pack`/`unpack` over core's layouts. Must not: write the public copy or decide when a target
//! applies anything (the server's engine does), send except through its `Session`, or push or
//! pull at any call but those the rules name.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::future::{FutureExt, Shared};
use onesided_core::audit::Event as AuditEvent;
use onesided_core::epoch::{AccessTag, EpochState, LockType};
use onesided_core::layout::Layout;
use onesided_core::origin::PrivateCopy;
use onesided_core::ranges::RangeSet;
use onesided_core::window::{Flavor, MemoryModel, OpKind, TargetOp, WindowDesc, DYNAMIC_BASE};
use onesided_core::{ErrorClass, Op, RmaError};
use onesided_proto::layout_to_wire;
use onesided_proto::v1::client_message::Call;
use onesided_proto::v1::{self, server_message::Reply, Segment};

use crate::element::{decode, encode, Element};
use crate::error::{Error, Result};
use crate::session::{info_entries, Session};

mod dynamic;
mod operations;
mod private_copy;
mod requests;
mod synchronization;

pub use requests::{test_all, wait_all, wait_any, AnyComplete, Request};

/// The reply of a call, shared by every handle on it (an operation's [`Pending`], the window's
/// outstanding list, a [`Request`]).
///
/// A [`Shared`] future that completes while it is polled wakes every task that polled it, the
/// polling task too: that task then runs once more for nothing (on a runtime's `block_on`
/// thread, one more `epoll_wait` per call; issue 45 item 4). So it is first polled with a
/// waker that does nothing, and only when the reply has not arrived with the caller's.
#[derive(Clone, Debug)]
struct SharedReply(Shared<futures::future::BoxFuture<'static, Result<Bytes>>>);

impl SharedReply {
    /// The bytes of `reply` (empty for `Done`), shared.
    fn of(reply: crate::session::ReplyFuture) -> Self {
        Self::new(async move { bytes_of(reply.await?) })
    }

    fn new(reply: impl Future<Output = Result<Bytes>> + Send + 'static) -> Self {
        SharedReply(reply.boxed().shared())
    }

    /// The reply, if it has arrived and was polled.
    fn peek(&self) -> Option<&Result<Bytes>> {
        self.0.peek()
    }
}

impl Future for SharedReply {
    type Output = Result<Bytes>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Bytes>> {
        let mut quiet = Context::from_waker(futures::task::noop_waker_ref());
        match self.0.poll_unpin(&mut quiet) {
            Poll::Ready(reply) => Poll::Ready(reply),
            // the caller's waker in the quiet one's place
            Poll::Pending => self.0.poll_unpin(cx),
        }
    }
}

#[derive(Debug)]
struct Outstanding {
    /// `None` for calls that concern no target (post, start, …).
    target: Option<u32>,
    returns_data: bool,
    reply: SharedReply,
    /// The lazy lock this is the reply of: requested again when the call that carried it is
    /// refused unchanged and undone.
    lock: Option<v1::Lock>,
}

/// What a synchronization call may change here before the server answers it, as it was before:
/// put back when the server refuses the call unchanged (`Error::unchanged`), so that the same
/// call can be made again — an unlock refused while the audit store is away must leave the
/// lock held here as it is at the target, and the stores it was to publish dirty.
struct Undo {
    epoch: EpochState,
    tokens: Vec<u64>,
    /// The bytes stored and not yet published before the call.
    dirty: Vec<(u64, u64)>,
    /// The byte ranges the call took to publish.
    pushed: Vec<(u64, u64)>,
}

impl Undo {
    fn of(state: &State) -> Self {
        Undo {
            epoch: state.epoch.clone(),
            tokens: state.tokens.clone(),
            dirty: state.copy.dirty().iter().collect(),
            pushed: Vec::new(),
        }
    }

    /// The same, once the call's step ran on `state`: the stores it took to publish are
    /// those dirty before and clean now, whichever call it is.
    fn stepped(mut self, state: &State) -> Self {
        let now = state.copy.dirty();
        let taken = self.dirty.iter().flat_map(|&(s, e)| now.gaps_within(s, e));
        self.pushed = taken.collect();
        self
    }
}

#[derive(Debug)]
pub(crate) struct State {
    epoch: EpochState,
    copy: PrivateCopy,
    outstanding: Vec<Outstanding>,
    /// Bytes stored and loaded locally since the last call (for the audit log).
    stored: RangeSet,
    loaded: RangeSet,
    /// Per target: the fencing token of the lock held there, once its grant was seen (0
    /// otherwise). Operations carry it, so the target refuses them after a revocation.
    tokens: Vec<u64>,
    /// The window's `no_locks` info (a fresh epoch state needs it).
    no_locks: bool,
    /// Set when the session attached again by itself while an epoch was open here: the next
    /// call fails with this, once.
    lost: Option<String>,
    /// Set when the window no longer existed when the session attached again: every call
    /// fails with `MPI_ERR_WIN`.
    gone: Option<String>,
    /// Unified model: stores are published as they happen, and the server's updates of the
    /// public copy arrive by themselves ([`apply_update`]).
    unified: bool,
    /// Unified model: the number of the last publication sent.
    published: u64,
    /// Dynamic window: this rank's attached regions, offset in its memory → size.
    regions: std::collections::BTreeMap<u64, u64>,
    /// Unified model: publications sent and not yet known to be applied (number, byte range):
    /// an update that the server made before applying them must not overwrite their bytes.
    in_flight: Vec<(u64, u64, u64)>,
    /// Lazy locks refused unchanged with a call that was undone: the target holds none of
    /// them, so each is requested again before the next call that needs it.
    refused_locks: Vec<v1::Lock>,
}

/// Unified model: `session` follows the public copy of window `id` from now on, then
/// publishes what `state` stored and did not publish (after attaching again: what the lost
/// incarnation may not have applied). Nothing for a window of the separate model.
pub(crate) async fn follow(session: &Session, id: u64, state: &Mutex<State>) -> Result<()> {
    if !state.lock().unwrap_or_else(|p| p.into_inner()).unified {
        return Ok(());
    }
    session
        .call(Call::Follow(v1::Follow { window: id }))
        .await?;
    let publish = {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        let push = Window::take_push(&mut state);
        if push.is_empty() {
            return Ok(());
        }
        number_push(&mut state, push)
    };
    session.call_unanswered(Call::Publish(v1::Publish {
        window: id,
        ..publish
    }));
    Ok(())
}

/// Unified model: numbers `push`, bytes this rank stored, as its next publication, so that
/// updates of the public copy made before the server applies it do not overwrite them.
fn number_push(state: &mut State, push: Vec<Segment>) -> v1::Publish {
    state.published += 1;
    let seq = state.published;
    for segment in &push {
        let start = segment.offset;
        state
            .in_flight
            .push((seq, start, start + segment.data.len() as u64));
    }
    v1::Publish {
        window: 0,
        push,
        seq,
    }
}

/// Unified model: the store of `bytes` at `offset`, numbered as the next publication (its
/// `window` is left for the caller).
pub(crate) fn number(state: &mut State, offset: u64, bytes: &[u8]) -> v1::Publish {
    let push = vec![Segment {
        offset,
        data: Bytes::copy_from_slice(bytes),
    }];
    number_push(state, push)
}

/// Unified model: a change of the public copy the server sent, into the private copy — except
/// the bytes of this rank's own stores the server had not applied yet when the change was
/// made (they are newer; the server applies them next) and stores not yet published.
pub(crate) fn apply_update(state: &mut State, updated: v1::Updated) {
    state
        .in_flight
        .retain(|&(seq, _, _)| seq > updated.published);
    let in_flight = state.in_flight.iter().map(|&(_, start, end)| (start, end));
    let in_flight: Vec<(u64, u64)> = in_flight.collect();
    let segments = onesided_proto::segments_from_wire(updated.segments);
    for (start, len) in state.copy.update(segments, in_flight) {
        tracing::warn!(start, len, "updated bytes outside the private copy ignored");
    }
}

/// The session attached again by itself ([`crate::SessionBuilder::reattach_within`]): the
/// window's epochs, the operations in flight and the lock grants belong to the lost
/// incarnation and are gone. The window starts afresh — its private copy and its stores not
/// yet published are kept, they are this process's memory — and, when an epoch was open or
/// operations were in flight, its next call fails with `why` instead of acting as if nothing
/// happened. `gone`: the window itself no longer exists.
pub(crate) fn lose_epochs(state: &mut State, why: String, gone: bool) {
    let open = state.epoch.has_open_epoch() || !state.outstanding.is_empty();
    state.epoch = EpochState::new(state.epoch.me(), state.epoch.nranks(), state.no_locks);
    state.outstanding.clear();
    state.refused_locks.clear();
    state.tokens.iter_mut().for_each(|token| *token = 0);
    // unified: stores that may not have reached the lost incarnation are published again
    for (_, start, end) in std::mem::take(&mut state.in_flight) {
        state.copy.mark_dirty(start, end);
    }
    if gone {
        state.gone = Some(why);
    } else if open {
        state.lost = Some(why);
    }
}

/// One rank's handle on a window. Calls take `&self`; a rank's calls on one window are
/// sequential in MPI, and so they should be here.
#[derive(Debug)]
pub struct Window {
    session: Session,
    desc: Arc<WindowDesc>,
    state: Arc<Mutex<State>>,
    /// The info in use: the creation's, until [`Window::set_info`] changed it.
    info: Mutex<onesided_core::window::WindowInfo>,
    /// This rank in the window: its place in the window's group.
    me: u32,
}

impl Drop for Window {
    /// The loads and stores since the last call still reach the audit log (with the session's
    /// next message, or at [`Session::close`]).
    fn drop(&mut self) {
        let (me, pending) = take_accesses(&self.state);
        self.session.record(self.desc.id, me, pending);
    }
}

/// The result of a get-like operation; defined once the operation completed (after the flush,
/// unlock, fence or complete that completes it).
#[derive(Debug)]
pub struct Pending<T> {
    reply: SharedReply,
    decode: fn(&[u8]) -> T,
    session: Session,
}

impl<T> Clone for Pending<T> {
    /// Another handle on the same result (the reply is shared; nothing is sent again).
    fn clone(&self) -> Self {
        Pending {
            reply: self.reply.clone(),
            decode: self.decode,
            session: self.session.clone(),
        }
    }
}

impl<T> Pending<T> {
    /// The value, once it has arrived. An operation still waiting to travel with the epoch's
    /// closing call is sent now.
    ///
    /// # Errors
    /// The operation's failure.
    pub async fn value(self) -> Result<T> {
        self.session.flush_deferred();
        let bytes = self.reply.await?;
        Ok((self.decode)(&bytes))
    }
}

impl<T> Pending<T> {
    /// `MPI_Test` on the operation: whether its outcome has arrived, without waiting (then
    /// `value` returns it at once). Makes progress as `value` does.
    ///
    /// # Errors
    /// The operation's failure, once it is known.
    pub fn test(&self) -> Result<bool> {
        match self.outcome_now() {
            None => Ok(false),
            Some(outcome) => outcome.map(|_| true),
        }
    }

    /// The outcome if it has arrived, without waiting; `None` while it has not. Makes
    /// progress as `value` does: an operation still waiting to travel is sent now.
    fn outcome_now(&self) -> Option<Result<T>> {
        self.session.flush_deferred();
        self.reply
            .clone()
            .now_or_never()
            .map(|outcome| outcome.map(|bytes| (self.decode)(&bytes)))
    }
}

impl<T: Send + 'static> std::future::IntoFuture for Pending<T> {
    type Output = Result<T>;
    type IntoFuture = futures::future::BoxFuture<'static, Result<T>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.value())
    }
}

/// A contiguous put, get or accumulate larger than this travels as several operations of at
/// most this many bytes each ([`TargetOp::pieces`]). One message of a whole 64 MiB put is copied
/// into a fresh buffer at every step (encoding, the server's decoding), each paying its page
/// faults, and nothing overlaps; pieces stream, reuse allocations and let the server apply one
/// while the next arrives.
const PIECE_BYTES: u64 = 1 << 20;

fn bytes_of(reply: Reply) -> Result<Bytes> {
    match reply {
        Reply::Result(result) => Ok(result.data),
        Reply::Done(_) => Ok(Bytes::new()),
        other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
    }
}

fn synced(reply: Reply) -> Result<v1::Synced> {
    match reply {
        Reply::Synced(synced) => Ok(synced),
        other => Err(Error::Protocol(format!(
            "expected a sync answer, got {other:?}"
        ))),
    }
}

fn local_range(what: &str, offset: u64, len: u64, size: u64) -> Result<(usize, usize)> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok((offset as usize, end as usize)),
        _ => Err(RmaError::new(
            ErrorClass::RmaRange,
            format!(
                "local {what} of {len} bytes at {offset} is outside the window of {size} bytes"
            ),
        )
        .into()),
    }
}

/// Packs the elements of `origin` that `layout` selects, in type-map order (an origin datatype).
///
/// # Errors
/// `MPI_ERR_RMA_RANGE` when the layout reaches past `origin`; `MPI_ERR_COUNT` on overflow.
pub fn pack<T: Element>(origin: &[T], layout: &Layout) -> Result<Vec<u8>> {
    let runs = layout.flatten(std::mem::size_of::<T>() as u64)?;
    Ok(onesided_core::layout::gather(
        &runs,
        0,
        bytemuck::cast_slice(origin),
    )?)
}

/// Unpacks `packed` values (as a get returns them) into the elements of `buffer` that `layout`
/// selects: the origin datatype of a get.
///
/// # Errors
/// `MPI_ERR_RMA_RANGE` when the layout reaches past `buffer`; `MPI_ERR_COUNT` when the number
/// of values does not match the layout. Nothing is written on error.
pub fn unpack<T: Element>(packed: &[T], buffer: &mut [T], layout: &Layout) -> Result<()> {
    let runs = layout.flatten(std::mem::size_of::<T>() as u64)?;
    Ok(onesided_core::layout::scatter(
        &runs,
        0,
        bytemuck::cast_slice_mut(buffer),
        bytemuck::cast_slice(packed),
    )?)
}

/// The local loads and stores since the last call, as audit events (and forgets them).
/// The loads and stores recorded since the last call (for the audit log), with the rank in
/// the window that made them.
pub(crate) fn take_accesses(state: &Mutex<State>) -> (u32, Vec<AuditEvent>) {
    let mut state = state.lock().unwrap_or_else(|poison| poison.into_inner());
    let me = state.epoch.me();
    let mut events = Vec::new();
    if !state.stored.is_empty() {
        events.push(AuditEvent::Store {
            ranges: state.stored.iter().collect(),
        });
        state.stored.clear();
    }
    if !state.loaded.is_empty() {
        events.push(AuditEvent::Load {
            ranges: state.loaded.iter().collect(),
        });
        state.loaded.clear();
    }
    (me, events)
}

/// What an RMA call sends: the general form behind the typed methods. It is core's
/// [`TargetOp`], the one form an operation has from this call to the target's `apply`.
pub type OpSpec = TargetOp<Bytes>;

impl Window {
    /// A handle on `desc` for `session`, whose rank in the window is its place in the
    /// window's group.
    ///
    /// # Errors
    /// `MPI_ERR_GROUP` when the session's rank is not in the group (the server refuses to
    /// open such a window first).
    pub(crate) fn new(session: Session, desc: WindowDesc) -> Result<Self> {
        let me = desc.member(session.rank())?;
        let size = desc.sizes.get(me as usize).copied().unwrap_or(0) as usize;
        let epoch = EpochState::new(me, desc.nranks(), desc.info.no_locks);
        let state = Arc::new(Mutex::new(State {
            epoch,
            copy: PrivateCopy::new(size),
            refused_locks: Vec::new(),
            outstanding: Vec::new(),
            stored: RangeSet::new(),
            loaded: RangeSet::new(),
            tokens: vec![0; desc.nranks() as usize],
            no_locks: desc.info.no_locks,
            lost: None,
            gone: None,
            unified: desc.model == MemoryModel::Unified,
            published: 0,
            regions: std::collections::BTreeMap::new(),
            in_flight: Vec::new(),
        }));
        // a barrier is a session call: it notes this window's accesses before it goes; a
        // session that attaches again reopens the window
        session.watch(desc.id, &desc.name, Arc::downgrade(&state));
        Ok(Window {
            session,
            info: Mutex::new(desc.info.clone()),
            desc: Arc::new(desc),
            state,
            me,
        })
    }

    /// Unified model: the session follows this rank's public copy from now on (the whole copy
    /// arrives first), then publishes what was stored and not yet published. Nothing for a
    /// window of the separate model.
    pub(crate) async fn follow(&self) -> Result<()> {
        follow(&self.session, self.id(), &self.state).await
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// The state, for a synchronization or communication call: fails when the session
    /// attached again by itself while an epoch was open here (once) or the window is gone.
    fn live_state(&self) -> Result<MutexGuard<'_, State>> {
        let mut state = self.state();
        if let Some(gone) = &state.gone {
            return Err(RmaError::new(ErrorClass::Win, gone.clone()).into());
        }
        if let Some(lost) = state.lost.take() {
            return Err(Error::Disconnected(lost));
        }
        Ok(state)
    }

    /// What every rank knows about the window, as it was when this handle opened it: its
    /// `info` is not changed by [`Window::set_info`] — [`Window::get_info`] has the info in use.
    pub fn desc(&self) -> &WindowDesc {
        &self.desc
    }

    /// `MPI_Win_get_info`: the hints in use — every key this implementation understands,
    /// with its value (the defaults included), then the keys it does not use, as given at
    /// creation or by [`Window::set_info`] (MPI-4 reports those too).
    pub fn get_info(&self) -> Vec<(String, String)> {
        self.info
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .to_pairs()
    }

    /// `MPI_Win_set_info`: collective over the window's ranks, it returns once every rank
    /// called it. `accumulate_ops`, `accumulate_ordering`, `mpi_accumulate_granularity` and
    /// keys the server does not use take the values given (the race checker reads the new
    /// hints for the accesses after it); keys that describe the window's creation
    /// (`no_locks`, `same_size`, `same_disp_unit`, `onesided_element_type`) are checked and
    /// ignored, as MPI allows. Every rank must ask for the same info.
    ///
    /// # Errors
    /// `MPI_ERR_INFO` for a bad value (at once, nothing sent), or when the ranks asked for
    /// different info (every rank's call fails, nothing changes); `MPI_ERR_PROC_FAILED` when a
    /// rank's session ends first.
    pub async fn set_info(&self, info: &[(&str, &str)]) -> Result<()> {
        let updated = self
            .info
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .updated(info.iter().copied())?;
        self.note(Vec::new());
        let call = Call::SetInfo(v1::SetInfo {
            window: self.id(),
            info: info_entries(info),
        });
        self.session.call(call).await?;
        *self
            .info
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = updated;
        self.returned("set_info", None);
        Ok(())
    }

    /// `MPI_Win_get_group`: the ranks of the window's group, in the window's rank order, as
    /// ranks of the world (window rank `r` is world rank `get_group()[r]`; `0..n` for a window
    /// over its whole world).
    pub fn get_group(&self) -> Vec<u32> {
        self.desc.group.clone()
    }

    /// This rank in the window: its place in the window's group (its world rank for a window
    /// over the whole world). Targets, PSCW groups and lock targets are window ranks.
    pub fn rank(&self) -> u32 {
        self.me
    }

    /// The session the window was opened on.
    pub fn session(&self) -> &Session {
        &self.session
    }

    fn id(&self) -> u64 {
        self.desc.id
    }

    /// The fencing token of the lock this rank holds on `target`, once its grant has been seen
    /// (a lock of one's own rank, or `lock_all`'s own part); `None` otherwise. Operations carry
    /// it: after the lock was revoked (this session's lease lapsed) the target refuses them.
    pub fn fencing_token(&self, target: u32) -> Option<u64> {
        self.state()
            .tokens
            .get(target as usize)
            .copied()
            .filter(|&token| token != 0)
    }

    fn call(&self, call: Call) -> SharedReply {
        SharedReply::of(self.session.call(call))
    }

    // ---- the private copy ----

    /// Ships what only this rank sees — the loads and stores since the last call, then
    /// `events` — to the audit log, ahead of the next call (it travels with it).
    fn note(&self, events: Vec<AuditEvent>) {
        if !self.session.audited() {
            return;
        }
        let (_, mut recorded) = take_accesses(&self.state);
        recorded.extend(events);
        self.session.record(self.id(), self.me, recorded);
    }

    fn returned(&self, call: &str, target: Option<u32>) {
        if !self.session.audited() {
            return;
        }
        self.note(vec![AuditEvent::Returned {
            call: call.to_string(),
            target,
        }]);
    }

    fn take_push(state: &mut State) -> Vec<Segment> {
        onesided_proto::segments_to_wire(state.copy.take_push())
    }

    /// The rank's public copy as the server had it when this handle was opened (the bytes
    /// that are not zero): the fresh private copy starts as it.
    ///
    /// # Errors
    /// Bytes outside the rank's memory are a protocol error.
    pub(crate) fn restore_copy(&self, segments: Vec<Segment>) -> Result<()> {
        let segments = onesided_proto::segments_from_wire(segments);
        self.state().copy.restore(segments).map_err(|(start, len)| {
            Error::Protocol(format!(
                "the server described {len} bytes at offset {start} of a rank's copy of {} bytes",
                self.desc.sizes.get(self.me as usize).copied().unwrap_or(0)
            ))
        })
    }

    fn apply_pull(&self, segments: Vec<Segment>) {
        if segments.is_empty() {
            return;
        }
        let segments = onesided_proto::segments_from_wire(segments);
        for (start, len) in self.state().copy.pull(segments) {
            tracing::warn!(start, len, "pulled bytes outside the private copy ignored");
        }
    }

    /// Takes the outstanding replies that `wanted` selects, awaits them, and returns the first
    /// failure.
    async fn await_outstanding(&self, wanted: impl Fn(&Outstanding) -> bool) -> Result<()> {
        self.settle_outstanding(wanted).await.0.map_or(Ok(()), Err)
    }

    /// Takes the outstanding replies that `wanted` selects and awaits them: the first failure,
    /// and the items that failed (an undone call puts them back).
    async fn settle_outstanding(
        &self,
        wanted: impl Fn(&Outstanding) -> bool,
    ) -> (Option<Error>, Vec<Outstanding>) {
        // what we wait for may still be waiting to travel
        self.session.flush_deferred();
        let selected: Vec<Outstanding> = self
            .state()
            .outstanding
            .extract_if(.., |item| wanted(item))
            .collect();
        let mut first_error = None;
        let mut failed = Vec::new();
        for item in selected {
            if let Err(error) = item.reply.clone().await {
                first_error.get_or_insert(error);
                failed.push(item);
            }
        }
        (first_error, failed)
    }

    fn background(&self, reply: SharedReply) {
        self.state().outstanding.push(Outstanding {
            target: None,
            returns_data: false,
            reply,
            lock: None,
        });
    }

    /// Awaits the reply of a blocking call and the outstanding replies `wanted` selects, and
    /// reports the first failure, the call's own first. When the call itself is refused
    /// unchanged, `undo` (of a call that changes the state here) puts back what it changed,
    /// so it may be made again.
    async fn finish(
        &self,
        reply: futures::future::BoxFuture<'static, Result<Reply>>,
        wanted: impl Fn(&Outstanding) -> bool,
        undo: Option<Undo>,
    ) -> Result<Reply> {
        let (completed, failed) = self.settle_outstanding(wanted).await;
        let reply = self.undone_if_unchanged(reply.await, undo, failed)?;
        // the call itself did what it does: a refusal of one it completed changed this much
        completed.map_or(Ok(reply), |error| Err(error.changed()))
    }

    /// `result`, after putting back what the call changed here when the server refused it
    /// unchanged: the epoch state, the fencing tokens, the stores it took to publish (dirty
    /// again), the failures of what it completed (`failed`: reported again by the call made
    /// again), and the lazy locks that travelled with it and were refused too (requested
    /// again, in front of the next call that needs them).
    fn undone_if_unchanged<T>(
        &self,
        result: Result<T>,
        undo: Option<Undo>,
        failed: Vec<Outstanding>,
    ) -> Result<T> {
        let Err(error) = result else {
            return result;
        };
        if !error.unchanged() {
            return Err(error);
        }
        let mut state = self.state();
        if let Some(undo) = undo {
            state.epoch = undo.epoch;
            state.tokens = undo.tokens;
            for (start, end) in undo.pushed {
                state.copy.mark_dirty(start, end);
            }
        }
        // a flush refused unchanged completed nothing either: what it awaited stays to report
        for item in failed {
            let refused = matches!(item.reply.peek(), Some(Err(error)) if error.unchanged());
            match item.lock {
                Some(lock) if refused => state.refused_locks.push(lock),
                _ => state.outstanding.push(item),
            }
        }
        drop(state);
        Err(error)
    }

    /// Requests again the lazy locks of `target` (of every target: `None`) that were refused
    /// unchanged, ahead of the call about to be sent that needs them.
    fn renew_refused_locks(&self, state: &mut State, target: Option<u32>) {
        if state.refused_locks.is_empty() {
            return;
        }
        let (renewed, kept) = std::mem::take(&mut state.refused_locks)
            .into_iter()
            .partition(|lock| target.is_none_or(|target| lock.target == target));
        state.refused_locks = kept;
        for lock in renewed {
            let reply = self.session.defer(Call::Lock(lock));
            state.outstanding.push(Outstanding {
                target: Some(lock.target),
                returns_data: false,
                reply: SharedReply::of(reply),
                lock: Some(lock),
            });
        }
    }

    // ---- synchronization ----
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::task::{waker, ArcWake};

    use super::*;

    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl ArcWake for Wakes {
        fn wake_by_ref(wakes: &Arc<Self>) {
            wakes.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl Wakes {
        fn count(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    /// Polls `reply` once with a waker that counts into `wakes`.
    fn poll(reply: &mut SharedReply, wakes: &Arc<Wakes>) -> Poll<Result<Bytes>> {
        let waker = waker(Arc::clone(wakes));
        Pin::new(reply).poll(&mut Context::from_waker(&waker))
    }

    /// A reply that is there when it is polled is taken without waking the task that polls
    /// it (a `Shared` alone wakes it, and it runs once more for nothing).
    #[test]
    fn a_reply_already_there_wakes_nobody() {
        let wakes = Arc::new(Wakes::default());
        let mut reply = SharedReply::new(async { Ok(Bytes::from_static(b"x")) });
        let mut other = reply.clone();
        match poll(&mut reply, &wakes) {
            Poll::Ready(Ok(bytes)) => assert_eq!(&bytes[..], b"x"),
            _ => panic!("the reply was there"),
        }
        assert_eq!(wakes.count(), 0);
        assert!(matches!(other.peek(), Some(Ok(_))), "every handle sees it");
        assert!(poll(&mut other, &wakes).is_ready());
    }

    /// A reply that comes later wakes each handle that waited for it: the caller's waker, not
    /// the quiet one it was first polled with, is the one kept.
    #[test]
    fn a_reply_that_comes_later_wakes_its_waiters() {
        let (send, receive) = tokio::sync::oneshot::channel::<Result<Bytes>>();
        let mut reply = SharedReply::new(async move { receive.await.expect("sent") });
        let mut other = reply.clone();
        let (first, second) = (Arc::new(Wakes::default()), Arc::new(Wakes::default()));
        assert!(poll(&mut reply, &first).is_pending());
        assert!(poll(&mut other, &second).is_pending());
        send.send(Ok(Bytes::new())).expect("received");
        assert_eq!((first.count(), second.count()), (1, 1));
        assert!(poll(&mut reply, &first).is_ready());
        assert!(poll(&mut other, &second).is_ready());
    }
}
