//! A window as one rank sees it: its private copy, its epoch state, and every MPI RMA call.
//!
//! The private copy is this rank's window memory. Local loads and stores touch only it. Dirty
//! (stored, not yet published) bytes are pushed to the public copy at exactly post, fence,
//! unlock, unlock_all and sync (rule 5), and bytes changed remotely are pulled at exactly wait,
//! fence, lock (of this rank), lock_all and sync (rule 6) — never elsewhere. A pull never
//! overwrites a dirty byte.

use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Bytes, BytesMut};
use futures::future::{FutureExt, Shared};
use onesided_core::audit::Event as AuditEvent;
use onesided_core::epoch::{AccessTag, EpochState, LockType};
use onesided_core::layout::Layout;
use onesided_core::ranges::RangeSet;
use onesided_core::window::{OpKind, TargetOp, WindowDesc};
use onesided_core::{Datatype, ErrorClass, Op, RmaError};
use onesided_proto::layout_to_wire;
use onesided_proto::v1::client_message::Call;
use onesided_proto::v1::{self, server_message::Reply, Segment};

use crate::element::{decode, encode, Element};
use crate::error::{Error, Result};
use crate::session::Session;

type SharedReply = Shared<futures::future::BoxFuture<'static, Result<Bytes>>>;

#[derive(Debug)]
struct Outstanding {
    /// `None` for calls that concern no target (post, start, …).
    target: Option<u32>,
    returns_data: bool,
    reply: SharedReply,
}

#[derive(Debug)]
pub(crate) struct State {
    epoch: EpochState,
    private: Vec<u8>,
    dirty: RangeSet,
    outstanding: Vec<Outstanding>,
    /// Bytes stored and loaded locally since the last call (for the audit log).
    stored: RangeSet,
    loaded: RangeSet,
    /// Per target: the fencing token of the lock held there, once its grant was seen (0
    /// otherwise). Operations carry it, so the target refuses them after a revocation.
    tokens: Vec<u64>,
}

/// One rank's handle on a window. Calls take `&self`; a rank's calls on one window are
/// sequential in MPI, and so they should be here.
#[derive(Debug)]
pub struct Window {
    session: Session,
    desc: Arc<WindowDesc>,
    state: Arc<Mutex<State>>,
}

impl Drop for Window {
    /// The loads and stores since the last call still reach the audit log (with the session's
    /// next message, or at [`Session::close`]).
    fn drop(&mut self) {
        let pending = take_accesses(&self.state);
        self.session.record(self.desc.id, pending);
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

impl<T: Send + 'static> std::future::IntoFuture for Pending<T> {
    type Output = Result<T>;
    type IntoFuture = futures::future::BoxFuture<'static, Result<T>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.value())
    }
}

/// A request-based operation (`MPI_Rput`, …): [`Request::wait`] is `MPI_Wait` on it.
#[derive(Debug)]
pub struct Request<T> {
    inner: RequestInner<T>,
}

#[derive(Debug)]
enum RequestInner<T> {
    /// Locally complete at once (rput, raccumulate copy the origin buffer).
    Ready(T),
    /// Complete when the data arrived.
    Pending(Pending<T>),
}

impl<T: Send + 'static> Request<T> {
    /// `MPI_Wait`: local completion (for rget-like requests, the data is here).
    ///
    /// # Errors
    /// The operation's failure.
    pub async fn wait(self) -> Result<T> {
        match self.inner {
            RequestInner::Ready(value) => Ok(value),
            RequestInner::Pending(pending) => pending.value().await,
        }
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
pub(crate) fn take_accesses(state: &Mutex<State>) -> Vec<AuditEvent> {
    let mut state = state.lock().unwrap_or_else(|poison| poison.into_inner());
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
    events
}

/// What an RMA call sends: the general form behind the typed methods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpSpec {
    /// What to do.
    pub kind: OpKind,
    /// The basic datatype of every element.
    pub dtype: Datatype,
    /// Displacement in the target's disp_units.
    pub disp: u64,
    /// Target layout in elements (the origin data is packed in that order).
    pub layout: Layout,
    /// Packed origin data.
    pub data: Bytes,
    /// Packed compare value (compare_and_swap).
    pub compare: Bytes,
}

impl OpSpec {
    fn contiguous(kind: OpKind, dtype: Datatype, disp: u64, count: u64, data: Bytes) -> Self {
        OpSpec {
            kind,
            dtype,
            disp,
            layout: Layout::Contiguous { count },
            data,
            compare: Bytes::new(),
        }
    }
}

impl Window {
    pub(crate) fn new(session: Session, desc: WindowDesc) -> Self {
        let me = session.rank();
        let size = desc.sizes.get(me as usize).copied().unwrap_or(0) as usize;
        let epoch = EpochState::new(me, desc.nranks(), desc.info.no_locks);
        let state = Arc::new(Mutex::new(State {
            epoch,
            private: vec![0; size],
            dirty: RangeSet::new(),
            outstanding: Vec::new(),
            stored: RangeSet::new(),
            loaded: RangeSet::new(),
            tokens: vec![0; desc.nranks() as usize],
        }));
        // a barrier is a session call: it notes this window's accesses before it goes
        session.watch(desc.id, Arc::downgrade(&state));
        Window {
            session,
            desc: Arc::new(desc),
            state,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// What every rank knows about the window.
    pub fn desc(&self) -> &WindowDesc {
        &self.desc
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.session.rank()
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
        let reply = self.session.call(call);
        async move { bytes_of(reply.await?) }.boxed().shared()
    }

    // ---- the private copy ----

    /// Stores `values` into the private copy at element `index` (byte offset `index × size of
    /// T`). A local store: nothing is published until the next post, fence, unlock, unlock_all
    /// or sync.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` outside the window.
    pub fn store<T: Element>(&self, index: u64, values: &[T]) -> Result<()> {
        let offset = index.saturating_mul(std::mem::size_of::<T>() as u64);
        self.store_bytes(offset, bytemuck::cast_slice(values))
    }

    /// Stores raw bytes into the private copy at byte `offset`.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` outside the window.
    pub fn store_bytes(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        let mut state = self.state();
        let size = state.private.len() as u64;
        let (start, end) = local_range("store", offset, bytes.len() as u64, size)?;
        state.private[start..end].copy_from_slice(bytes);
        state.dirty.insert(start as u64, end as u64);
        state.stored.insert(start as u64, end as u64);
        Ok(())
    }

    /// Loads `count` elements of `T` from the private copy at element `index`.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` outside the window.
    pub fn load<T: Element>(&self, index: u64, count: u64) -> Result<Vec<T>> {
        let unit = std::mem::size_of::<T>() as u64;
        let offset = index.saturating_mul(unit);
        let len = count.saturating_mul(unit);
        Ok(decode(&self.load_bytes(offset, len)?))
    }

    /// Loads raw bytes from the private copy.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` outside the window.
    pub fn load_bytes(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut state = self.state();
        let (start, end) = local_range("load", offset, len, state.private.len() as u64)?;
        state.loaded.insert(start as u64, end as u64);
        Ok(state.private[start..end].to_vec())
    }

    /// Reads raw bytes of the private copy without recording a load: for tools that observe a
    /// program rather than take part in it (the scenario runner's `expect private`).
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` outside the window.
    pub fn inspect_bytes(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let state = self.state();
        let (start, end) = local_range("load", offset, len, state.private.len() as u64)?;
        Ok(state.private[start..end].to_vec())
    }

    /// Ships what only this rank sees — the loads and stores since the last call, then
    /// `events` — to the audit log, ahead of the next call (it travels with it).
    fn note(&self, events: Vec<AuditEvent>) {
        if !self.session.audited() {
            return;
        }
        let mut recorded = take_accesses(&self.state);
        recorded.extend(events);
        self.session.record(self.id(), recorded);
    }

    fn returned(&self, call: &str, target: Option<u32>) {
        self.note(vec![AuditEvent::Returned {
            call: call.to_string(),
            target,
        }]);
    }

    fn take_push(state: &mut State) -> Vec<Segment> {
        let segments = state
            .dirty
            .iter()
            .map(|(start, end)| Segment {
                offset: start,
                data: Bytes::copy_from_slice(&state.private[start as usize..end as usize]),
            })
            .collect();
        state.dirty.clear();
        segments
    }

    fn apply_pull(&self, segments: Vec<Segment>) {
        if segments.is_empty() {
            return;
        }
        let mut state = self.state();
        let State { private, dirty, .. } = &mut *state;
        for segment in segments {
            let start = segment.offset;
            let end = start + segment.data.len() as u64;
            if end > private.len() as u64 {
                tracing::warn!(start, end, "pulled bytes outside the private copy ignored");
                continue;
            }
            for (gap_start, gap_end) in dirty.gaps_within(start, end) {
                let from = (gap_start - start) as usize;
                let to = (gap_end - start) as usize;
                private[gap_start as usize..gap_end as usize]
                    .copy_from_slice(&segment.data[from..to]);
            }
        }
    }

    /// Takes the outstanding replies that `wanted` selects, awaits them, and returns the first
    /// failure.
    async fn await_outstanding(&self, wanted: impl Fn(&Outstanding) -> bool) -> Result<()> {
        // what we wait for may still be waiting to travel
        self.session.flush_deferred();
        let selected: Vec<Outstanding> = {
            let mut state = self.state();
            let (selected, kept) = std::mem::take(&mut state.outstanding)
                .into_iter()
                .partition(|item| wanted(item));
            state.outstanding = kept;
            selected
        };
        let mut first_error = None;
        for item in selected {
            if let Err(error) = item.reply.await {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn background(&self, reply: SharedReply) {
        self.state().outstanding.push(Outstanding {
            target: None,
            returns_data: false,
            reply,
        });
    }

    /// Awaits the reply of a blocking call and the outstanding replies `wanted` selects, and
    /// reports the first failure, the call's own first.
    async fn finish(
        &self,
        reply: futures::future::BoxFuture<'static, Result<Reply>>,
        wanted: impl Fn(&Outstanding) -> bool,
    ) -> Result<Reply> {
        let completed = self.await_outstanding(wanted).await;
        let reply = reply.await?;
        completed?;
        Ok(reply)
    }

    // ---- synchronization ----

    /// `MPI_Win_fence(assert)`: `0` or an or of [`crate::Assert`]'s `NOSTORE`, `NOPUT`,
    /// `NOPRECEDE`, `NOSUCCEED`. Publishes this rank's stores (unless `NOSTORE`); a fence that
    /// ends an epoch returns only when every operation of the epoch, from every rank, is applied
    /// everywhere; then brings remote changes into the private copy.
    ///
    /// # Errors
    /// `MPI_ERR_ASSERT`; `MPI_ERR_RMA_SYNC` inside a PSCW or lock epoch; a failure of an
    /// operation it completed.
    pub async fn fence(&self, assert: u32) -> Result<()> {
        self.note(Vec::new());
        let reply = {
            let mut state = self.state();
            let plan = state.epoch.fence(assert)?;
            let push = if plan.push {
                Self::take_push(&mut state)
            } else {
                Vec::new()
            };
            self.session.call(Call::Fence(v1::Fence {
                window: self.id(),
                assert,
                push,
            }))
        };
        let reply = self.finish(reply, |_| true).await?;
        self.apply_pull(synced(reply)?.pull);
        self.returned("fence", None);
        Ok(())
    }

    /// `MPI_Win_post(group, assert)`: exposes this rank's window to `group` and publishes its
    /// stores (unless `NOSTORE`). Does not block.
    ///
    /// # Errors
    /// `MPI_ERR_ASSERT`, `MPI_ERR_RANK`, `MPI_ERR_GROUP`; `MPI_ERR_RMA_SYNC` when already posted.
    pub fn post(&self, group: &[u32], assert: u32) -> Result<()> {
        self.note(Vec::new());
        let reply = {
            let mut state = self.state();
            let plan = state.epoch.post(group, assert)?;
            let push = if plan.push {
                Self::take_push(&mut state)
            } else {
                Vec::new()
            };
            self.call(Call::Post(v1::Post {
                window: self.id(),
                group: plan.group,
                assert,
                push,
            }))
        };
        self.background(reply);
        Ok(())
    }

    /// `MPI_Win_start(group, assert)`: opens an access epoch to `group`. Does not block;
    /// operations to a target wait at the target until it posted.
    ///
    /// # Errors
    /// `MPI_ERR_ASSERT`, `MPI_ERR_RANK`, `MPI_ERR_GROUP`; `MPI_ERR_RMA_SYNC` inside another
    /// access epoch.
    pub fn start(&self, group: &[u32], assert: u32) -> Result<()> {
        self.note(Vec::new());
        let reply = {
            let mut state = self.state();
            let group = state.epoch.start(group, assert)?;
            self.call(Call::Start(v1::Start {
                window: self.id(),
                group,
                assert,
            }))
        };
        self.background(reply);
        Ok(())
    }

    /// `MPI_Win_complete`: ends the access epoch; its operations are complete here (results in
    /// hand) when it returns. Nothing is promised at the targets until their wait.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` without start; a failure of an operation it completed.
    pub async fn complete(&self) -> Result<()> {
        self.note(Vec::new());
        let reply = {
            let mut state = self.state();
            state.epoch.complete()?;
            self.session
                .call(Call::Complete(v1::Complete { window: self.id() }))
        };
        self.finish(reply, |_| true).await?;
        self.returned("complete", None);
        Ok(())
    }

    /// `MPI_Win_wait`: returns when every rank of the post group completed and its operations
    /// are applied here; then brings them into the private copy (unless `NOPUT`).
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` without post.
    pub async fn wait(&self) -> Result<()> {
        self.note(Vec::new());
        let reply = {
            let mut state = self.state();
            state.epoch.wait()?;
            self.session
                .call(Call::Wait(v1::Wait { window: self.id() }))
        };
        let reply = self.finish(reply, |item| item.target.is_none()).await?;
        self.apply_pull(synced(reply)?.pull);
        self.returned("wait", None);
        Ok(())
    }

    /// `MPI_Win_test`: [`Window::wait`] without blocking. `true` has exactly the effect of
    /// wait returning; `false` has none.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` without post.
    pub async fn test(&self) -> Result<bool> {
        self.note(Vec::new());
        let reply = {
            let state = self.state();
            state.epoch.test()?;
            self.session
                .call(Call::Test(v1::Test { window: self.id() }))
        };
        let answer = synced(self.finish(reply, |item| item.target.is_none()).await?)?;
        if answer.flag {
            self.state().epoch.wait()?;
            self.apply_pull(answer.pull);
        }
        self.returned("test", None);
        Ok(answer.flag)
    }

    /// `MPI_Win_lock(lock_type, target, assert)` (`assert`: `0` or `NOCHECK`). A lock of another
    /// rank returns at once and travels with the first operation or the unlock; a lock of this
    /// rank returns once held and brings remote changes into the private copy.
    ///
    /// # Errors
    /// `MPI_ERR_RANK`, `MPI_ERR_ASSERT`; `MPI_ERR_RMA_SYNC` for a second lock of `target`, a lock
    /// inside PSCW or lock_all, or on a `no_locks` window.
    pub async fn lock(&self, lock_type: LockType, target: u32, assert: u32) -> Result<()> {
        self.note(Vec::new());
        let (eager, reply) = {
            let mut state = self.state();
            let eager = state.epoch.lock(lock_type, target, assert)?;
            let lock = Call::Lock(v1::Lock {
                window: self.id(),
                lock_type: lock_type.code(),
                target,
                assert,
            });
            // a lock of another rank is lazy: it travels with the first operation or the unlock
            let reply = if eager {
                self.session.call(lock)
            } else {
                self.session.defer(lock)
            };
            (eager, reply)
        };
        if eager {
            let answer = synced(reply.await?)?;
            self.state().tokens[target as usize] = answer.token;
            self.apply_pull(answer.pull);
        } else {
            let reply = async move { bytes_of(reply.await?) }.boxed().shared();
            self.state().outstanding.push(Outstanding {
                target: Some(target),
                returns_data: false,
                reply,
            });
        }
        self.returned("lock", Some(target));
        Ok(())
    }

    /// `MPI_Win_unlock(target)`: publishes this rank's stores, and returns when every operation
    /// to `target` of the epoch is applied there.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` when `target` is not locked; a failure of an operation it completed.
    pub async fn unlock(&self, target: u32) -> Result<()> {
        self.note(Vec::new());
        let reply = {
            let mut state = self.state();
            state.epoch.unlock(target)?;
            state.tokens[target as usize] = 0;
            let push = Self::take_push(&mut state);
            self.session.call(Call::Unlock(v1::Unlock {
                window: self.id(),
                target,
                push,
            }))
        };
        self.finish(reply, |item| {
            item.target == Some(target) || item.target.is_none()
        })
        .await?;
        self.returned("unlock", Some(target));
        Ok(())
    }

    /// `MPI_Win_lock_all(assert)`: a shared lock of every rank; this rank's is held (and remote
    /// changes pulled) when it returns, the others travel lazily.
    ///
    /// # Errors
    /// `MPI_ERR_ASSERT`; `MPI_ERR_RMA_SYNC` inside another access epoch or on a `no_locks`
    /// window.
    pub async fn lock_all(&self, assert: u32) -> Result<()> {
        self.note(Vec::new());
        let reply = {
            let mut state = self.state();
            state.epoch.lock_all(assert)?;
            self.session.call(Call::LockAll(v1::LockAll {
                window: self.id(),
                assert,
            }))
        };
        let answer = synced(reply.await?)?;
        self.state().tokens[self.session.rank() as usize] = answer.token;
        self.apply_pull(answer.pull);
        self.returned("lock_all", None);
        Ok(())
    }

    /// `MPI_Win_unlock_all`: publishes this rank's stores and completes everything everywhere.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` without lock_all.
    pub async fn unlock_all(&self) -> Result<()> {
        self.note(Vec::new());
        let reply = {
            let mut state = self.state();
            state.epoch.unlock_all()?;
            state.tokens.iter_mut().for_each(|token| *token = 0);
            let push = Self::take_push(&mut state);
            self.session.call(Call::UnlockAll(v1::UnlockAll {
                window: self.id(),
                push,
            }))
        };
        self.finish(reply, |_| true).await?;
        self.returned("unlock_all", None);
        Ok(())
    }

    /// `MPI_Win_flush(target)`: every operation to `target` so far is applied there when it
    /// returns.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` outside a passive epoch or for a target not locked.
    pub async fn flush(&self, target: u32) -> Result<()> {
        self.note(Vec::new());
        let reply = {
            let state = self.state();
            state.epoch.flush(target)?;
            self.session.call(Call::Flush(v1::Flush {
                window: self.id(),
                target,
                local: false,
            }))
        };
        self.finish(reply, |item| {
            item.target == Some(target) || item.target.is_none()
        })
        .await?;
        self.returned("flush", Some(target));
        Ok(())
    }

    /// `MPI_Win_flush_all`.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` outside a passive epoch.
    pub async fn flush_all(&self) -> Result<()> {
        self.note(Vec::new());
        let reply = {
            let state = self.state();
            state.epoch.flush_all()?;
            self.session.call(Call::FlushAll(v1::FlushAll {
                window: self.id(),
                local: false,
            }))
        };
        self.finish(reply, |_| true).await?;
        self.returned("flush_all", None);
        Ok(())
    }

    /// `MPI_Win_flush_local(target)`: completion at this rank only — results of gets to
    /// `target` are here. Says nothing about the target.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` outside a passive epoch or for a target not locked.
    pub async fn flush_local(&self, target: u32) -> Result<()> {
        self.state().epoch.flush(target)?;
        self.note(vec![AuditEvent::FlushLocal {
            target: Some(target),
        }]);
        self.await_outstanding(|item| item.returns_data && item.target == Some(target))
            .await
    }

    /// `MPI_Win_flush_local_all`.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` outside a passive epoch.
    pub async fn flush_local_all(&self) -> Result<()> {
        self.state().epoch.flush_all()?;
        self.note(vec![AuditEvent::FlushLocal { target: None }]);
        self.await_outstanding(|item| item.returns_data).await
    }

    /// `MPI_Win_sync`: publishes this rank's stores, then brings the public copy's remote
    /// changes into the private copy. Opens and closes no epoch.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` outside a passive epoch.
    pub async fn sync(&self) -> Result<()> {
        self.note(Vec::new());
        let reply = {
            let mut state = self.state();
            state.epoch.sync()?;
            let push = Self::take_push(&mut state);
            self.session.call(Call::Sync(v1::Sync {
                window: self.id(),
                push,
            }))
        };
        let answer = synced(self.finish(reply, |item| item.target.is_none()).await?)?;
        self.apply_pull(answer.pull);
        self.returned("sync", None);
        Ok(())
    }

    /// `MPI_Win_free` by this rank: collective (every rank must call it, unless the window has
    /// `no_locks=true`). Afterwards every call on this handle fails with `MPI_ERR_WIN`.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` while this rank has an epoch open (nothing changes; close it and call
    /// again).
    pub async fn free(&self) -> Result<()> {
        self.note(Vec::new());
        let reply = {
            let state = self.state();
            state.epoch.free()?;
            self.session
                .call(Call::WinFree(v1::WinFree { window: self.id() }))
        };
        self.finish(reply, |_| true).await?;
        Ok(())
    }

    // ---- communication ----

    /// Issues an operation in the general form: validated here (bounds, types, epoch) and sent
    /// at once, pipelined. Returns its reply: the fetched bytes for get-like operations.
    ///
    /// # Errors
    /// `MPI_ERR_RANK`, `MPI_ERR_RMA_RANGE`, `MPI_ERR_TYPE`, `MPI_ERR_OP`, `MPI_ERR_COUNT`,
    /// `MPI_ERR_RMA_SYNC` — the call is refused and nothing is sent.
    pub fn issue(&self, target: u32, spec: OpSpec, request_based: bool) -> Result<Pending<Bytes>> {
        self.note(Vec::new());
        let nranks = self.desc.nranks();
        if target >= nranks {
            return Err(RmaError::new(
                ErrorClass::Rank,
                format!("rank {target} is outside the window's group of {nranks} ranks"),
            )
            .into());
        }
        let target_op = TargetOp {
            kind: spec.kind,
            dtype: spec.dtype,
            disp: spec.disp,
            layout: spec.layout,
            data: spec.data,
            compare: spec.compare,
        };
        target_op.validate(
            self.desc.sizes[target as usize],
            self.desc.disp_units[target as usize],
        )?;
        let (kind, op) = match target_op.kind {
            OpKind::Put => (v1::OpKind::Put, 0),
            OpKind::Get => (v1::OpKind::Get, 0),
            OpKind::Accumulate(op) => (v1::OpKind::Accumulate, op.code()),
            OpKind::GetAccumulate(op) => (v1::OpKind::GetAccumulate, op.code()),
            OpKind::FetchAndOp(op) => (v1::OpKind::FetchAndOp, op.code()),
            OpKind::CompareAndSwap => (v1::OpKind::CompareAndSwap, 0),
        };
        let returns_data = target_op.kind.returns_data();
        // a request completes on one answer, so it travels whole
        let split = (!request_based)
            .then(|| target_op.pieces(self.desc.disp_units[target as usize], PIECE_BYTES))
            .flatten();
        let pieces: Vec<(u64, Layout, std::ops::Range<usize>)> = match split {
            Some(pieces) => pieces
                .into_iter()
                .map(|piece| {
                    (
                        piece.disp,
                        Layout::Contiguous { count: piece.count },
                        piece.data,
                    )
                })
                .collect(),
            None => vec![(
                target_op.disp,
                target_op.layout.clone(),
                0..target_op.data.len(),
            )],
        };
        let mut state = self.state();
        let mut replies = Vec::with_capacity(pieces.len());
        for (disp, layout, data) in pieces {
            let plan = state.epoch.op(target, request_based)?;
            let token = match plan.tag {
                AccessTag::Lock => state.tokens[target as usize],
                AccessTag::Fence { .. } | AccessTag::Pscw { .. } => 0,
            };
            replies.push(self.session.defer(Call::Op(v1::RmaOp {
                window: self.id(),
                target,
                kind: kind as i32,
                datatype: target_op.dtype.code(),
                op,
                disp,
                layout: Some(layout_to_wire(&layout)),
                data: target_op.data.slice(data),
                compare: target_op.compare.clone(),
                request_based,
                token,
            })));
        }
        let reply = match <[_; 1]>::try_from(replies) {
            Ok([reply]) => async move { bytes_of(reply.await?) }.boxed().shared(),
            Err(replies) => async move {
                // every piece is awaited, so the call completes only when all of it did
                let answers = futures::future::join_all(replies).await;
                let mut data = BytesMut::new();
                for answer in answers {
                    data.extend_from_slice(&bytes_of(answer?)?);
                }
                Ok(data.freeze())
            }
            .boxed()
            .shared(),
        };
        state.outstanding.push(Outstanding {
            target: Some(target),
            returns_data,
            reply: reply.clone(),
        });
        Ok(Pending {
            reply,
            decode: |bytes| Bytes::copy_from_slice(bytes),
            session: self.session.clone(),
        })
    }

    fn typed<T: Element>(pending: Pending<Bytes>) -> Pending<Vec<T>> {
        Pending {
            reply: pending.reply,
            decode: |bytes| decode(bytes),
            session: pending.session,
        }
    }

    fn single<T: Element>(pending: Pending<Bytes>) -> Pending<T> {
        Pending {
            reply: pending.reply,
            decode: |bytes| {
                decode::<T>(bytes)
                    .first()
                    .copied()
                    .unwrap_or_else(T::zeroed)
            },
            session: pending.session,
        }
    }

    /// `MPI_Put` of `values` to `target` at displacement `disp` (in the target's disp_units).
    ///
    /// # Errors
    /// As [`Window::issue`].
    pub fn put<T: Element>(&self, target: u32, disp: u64, values: &[T]) -> Result<()> {
        let spec = OpSpec::contiguous(
            OpKind::Put,
            T::DATATYPE,
            disp,
            values.len() as u64,
            encode(values),
        );
        self.issue(target, spec, false).map(drop)
    }

    /// `MPI_Put` with a target layout (vector, indexed); `values` are in layout order.
    ///
    /// # Errors
    /// As [`Window::issue`].
    pub fn put_layout<T: Element>(
        &self,
        target: u32,
        disp: u64,
        layout: Layout,
        values: &[T],
    ) -> Result<()> {
        let spec = OpSpec {
            kind: OpKind::Put,
            dtype: T::DATATYPE,
            disp,
            layout,
            data: encode(values),
            compare: Bytes::new(),
        };
        self.issue(target, spec, false).map(drop)
    }

    /// `MPI_Put` with an origin layout too: the elements of `origin` that `origin_layout`
    /// selects (in its type-map order) go to the elements `target_layout` selects.
    ///
    /// # Errors
    /// As [`Window::issue`]; `MPI_ERR_RMA_RANGE` when `origin_layout` reaches past `origin`.
    pub fn put_from<T: Element>(
        &self,
        target: u32,
        disp: u64,
        target_layout: Layout,
        origin: &[T],
        origin_layout: &Layout,
    ) -> Result<()> {
        let packed = pack(origin, origin_layout)?;
        let spec = OpSpec {
            kind: OpKind::Put,
            dtype: T::DATATYPE,
            disp,
            layout: target_layout,
            data: Bytes::from(packed),
            compare: Bytes::new(),
        };
        self.issue(target, spec, false).map(drop)
    }

    /// `MPI_Get` of `count` elements.
    ///
    /// # Errors
    /// As [`Window::issue`].
    pub fn get<T: Element>(&self, target: u32, disp: u64, count: u64) -> Result<Pending<Vec<T>>> {
        let spec = OpSpec::contiguous(OpKind::Get, T::DATATYPE, disp, count, Bytes::new());
        self.issue(target, spec, false).map(Self::typed)
    }

    /// `MPI_Get` with a target layout; the result is in layout order.
    ///
    /// # Errors
    /// As [`Window::issue`].
    pub fn get_layout<T: Element>(
        &self,
        target: u32,
        disp: u64,
        layout: Layout,
    ) -> Result<Pending<Vec<T>>> {
        let spec = OpSpec {
            kind: OpKind::Get,
            dtype: T::DATATYPE,
            disp,
            layout,
            data: Bytes::new(),
            compare: Bytes::new(),
        };
        self.issue(target, spec, false).map(Self::typed)
    }

    /// `MPI_Accumulate` of `values` with `op`.
    ///
    /// # Errors
    /// As [`Window::issue`]; `MPI_ERR_OP` for `NO_OP` or an op the datatype does not take.
    pub fn accumulate<T: Element>(
        &self,
        target: u32,
        disp: u64,
        values: &[T],
        op: Op,
    ) -> Result<()> {
        let spec = OpSpec::contiguous(
            OpKind::Accumulate(op),
            T::DATATYPE,
            disp,
            values.len() as u64,
            encode(values),
        );
        self.issue(target, spec, false).map(drop)
    }

    /// `MPI_Get_accumulate`: the old contents come back, then `op` is applied. With
    /// `Op::NoOp` it is an atomic read of `values.len()` elements (the values are ignored).
    ///
    /// # Errors
    /// As [`Window::issue`].
    pub fn get_accumulate<T: Element>(
        &self,
        target: u32,
        disp: u64,
        values: &[T],
        op: Op,
    ) -> Result<Pending<Vec<T>>> {
        let data = if op == Op::NoOp {
            Bytes::new()
        } else {
            encode(values)
        };
        let spec = OpSpec::contiguous(
            OpKind::GetAccumulate(op),
            T::DATATYPE,
            disp,
            values.len() as u64,
            data,
        );
        self.issue(target, spec, false).map(Self::typed)
    }

    /// `MPI_Fetch_and_op` on one element.
    ///
    /// # Errors
    /// As [`Window::issue`].
    pub fn fetch_and_op<T: Element>(
        &self,
        target: u32,
        disp: u64,
        value: T,
        op: Op,
    ) -> Result<Pending<T>> {
        let data = if op == Op::NoOp {
            Bytes::new()
        } else {
            encode(&[value])
        };
        let spec = OpSpec::contiguous(OpKind::FetchAndOp(op), T::DATATYPE, disp, 1, data);
        self.issue(target, spec, false).map(Self::single)
    }

    /// `MPI_Compare_and_swap`: if the target element equals `compare` (bitwise), it becomes
    /// `value`; the old element comes back either way.
    ///
    /// # Errors
    /// As [`Window::issue`]; `MPI_ERR_TYPE` for floating-point types.
    pub fn compare_and_swap<T: Element>(
        &self,
        target: u32,
        disp: u64,
        compare: T,
        value: T,
    ) -> Result<Pending<T>> {
        let mut spec = OpSpec::contiguous(
            OpKind::CompareAndSwap,
            T::DATATYPE,
            disp,
            1,
            encode(&[value]),
        );
        spec.compare = encode(&[compare]);
        self.issue(target, spec, false).map(Self::single)
    }

    /// `MPI_Rput`: only in a passive-target epoch; locally complete at once (the values were
    /// copied), remotely complete at the next flush or unlock.
    ///
    /// # Errors
    /// As [`Window::issue`]; `MPI_ERR_RMA_SYNC` outside a passive epoch.
    pub fn rput<T: Element>(&self, target: u32, disp: u64, values: &[T]) -> Result<Request<()>> {
        let spec = OpSpec::contiguous(
            OpKind::Put,
            T::DATATYPE,
            disp,
            values.len() as u64,
            encode(values),
        );
        self.issue(target, spec, true)?;
        Ok(Request {
            inner: RequestInner::Ready(()),
        })
    }

    /// `MPI_Rget`: its request completes when the data is here.
    ///
    /// # Errors
    /// As [`Window::rput`].
    pub fn rget<T: Element>(&self, target: u32, disp: u64, count: u64) -> Result<Request<Vec<T>>> {
        let spec = OpSpec::contiguous(OpKind::Get, T::DATATYPE, disp, count, Bytes::new());
        let pending = self.issue(target, spec, true).map(Self::typed)?;
        Ok(Request {
            inner: RequestInner::Pending(pending),
        })
    }

    /// `MPI_Raccumulate`.
    ///
    /// # Errors
    /// As [`Window::rput`].
    pub fn raccumulate<T: Element>(
        &self,
        target: u32,
        disp: u64,
        values: &[T],
        op: Op,
    ) -> Result<Request<()>> {
        let spec = OpSpec::contiguous(
            OpKind::Accumulate(op),
            T::DATATYPE,
            disp,
            values.len() as u64,
            encode(values),
        );
        self.issue(target, spec, true)?;
        Ok(Request {
            inner: RequestInner::Ready(()),
        })
    }

    /// `MPI_Rget_accumulate`.
    ///
    /// # Errors
    /// As [`Window::rput`].
    pub fn rget_accumulate<T: Element>(
        &self,
        target: u32,
        disp: u64,
        values: &[T],
        op: Op,
    ) -> Result<Request<Vec<T>>> {
        let data = if op == Op::NoOp {
            Bytes::new()
        } else {
            encode(values)
        };
        let spec = OpSpec::contiguous(
            OpKind::GetAccumulate(op),
            T::DATATYPE,
            disp,
            values.len() as u64,
            data,
        );
        let pending = self.issue(target, spec, true).map(Self::typed)?;
        Ok(Request {
            inner: RequestInner::Pending(pending),
        })
    }
}
