//! Synchronization: fence, PSCW, locks, flushes, sync and free — where the private copy is
//! pushed and pulled (rules 5 and 6).
//!
//! Owns: each synchronization call's client side — asking the window's `EpochState` whether it
//! is legal and what it must do, pushing the dirty bytes and pulling remote changes exactly
//! where it says (a pull never overwriting a dirty byte), the lock's fencing token once its
//! grant is seen, waiting for the outstanding operations a call completes, and freeing the
//! window. Must not: decide when a lock is granted or an epoch ends at a target (the server's
//! engine does), or push or pull at any other call.

use onesided_core::origin::Completes;

use super::*;

impl Window {
    /// `MPI_Win_fence(assert)`: `0` or an or of [`crate::Assert`]'s `NOSTORE`, `NOPUT`,
    /// `NOPRECEDE`, `NOSUCCEED`. Publishes this rank's stores (unless `NOSTORE`); a fence that
    /// ends an epoch returns only when every operation of the epoch, from every rank, is applied
    /// everywhere; then brings remote changes into the private copy.
    ///
    /// # Errors
    /// `MPI_ERR_ASSERT`; `MPI_ERR_RMA_SYNC` inside a PSCW or lock epoch; a failure of an
    /// operation it completed.
    pub async fn fence(&self, assert: u32) -> Result<()> {
        let step = |state: &mut State| {
            let plan = state.epoch.fence(assert)?;
            let push = if plan.push {
                Self::take_push(state)
            } else {
                Vec::new()
            };
            let window = self.id();
            Ok(Call::Fence(v1::Fence {
                window,
                assert,
                push,
            }))
        };
        let reply = self
            .synchronize(Undoable::Yes, step, Completes::All)
            .await?;
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
        self.send_unblocking(|state| {
            let plan = state.epoch.post(group, assert)?;
            let push = if plan.push {
                Self::take_push(state)
            } else {
                Vec::new()
            };
            let (window, group) = (self.id(), plan.group);
            Ok(Call::Post(v1::Post {
                window,
                group,
                assert,
                push,
            }))
        })
    }

    /// `MPI_Win_start(group, assert)`: opens an access epoch to `group`. Does not block;
    /// operations to a target wait at the target until it posted.
    ///
    /// # Errors
    /// `MPI_ERR_ASSERT`, `MPI_ERR_RANK`, `MPI_ERR_GROUP`; `MPI_ERR_RMA_SYNC` inside another
    /// access epoch.
    pub fn start(&self, group: &[u32], assert: u32) -> Result<()> {
        self.send_unblocking(|state| {
            let group = state.epoch.start(group, assert)?;
            let window = self.id();
            Ok(Call::Start(v1::Start {
                window,
                group,
                assert,
            }))
        })
    }

    /// `MPI_Win_complete`: ends the access epoch; its operations are complete here (results in
    /// hand) when it returns. Nothing is promised at the targets until their wait.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` without start; a failure of an operation it completed.
    pub async fn complete(&self) -> Result<()> {
        let step = |state: &mut State| {
            state.epoch.complete()?;
            Ok(Call::Complete(v1::Complete { window: self.id() }))
        };
        self.synchronize(Undoable::Yes, step, Completes::All)
            .await?;
        self.returned("complete", None);
        Ok(())
    }

    /// `MPI_Win_wait`: returns when every rank of the post group completed and its operations
    /// are applied here; then brings them into the private copy (unless `NOPUT`).
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` without post.
    pub async fn wait(&self) -> Result<()> {
        let step = |state: &mut State| {
            state.epoch.wait()?;
            Ok(Call::Wait(v1::Wait { window: self.id() }))
        };
        let reply = self
            .synchronize(Undoable::Yes, step, Completes::Nothing)
            .await?;
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
        let step = |state: &mut State| {
            state.epoch.test()?;
            Ok(Call::Test(v1::Test { window: self.id() }))
        };
        let reply = self
            .synchronize(Undoable::No, step, Completes::Nothing)
            .await?;
        let answer = synced(reply)?;
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
        let (eager, reply, undo, lock) = {
            let mut state = self.live_state()?;
            let undo = Undo::of(&state);
            let eager = state.epoch.lock(lock_type, target, assert)?;
            let lock = v1::Lock {
                window: self.id(),
                lock_type: lock_type.code(),
                target,
                assert,
            };
            // a lock of another rank is lazy: it travels with the first operation or the unlock
            let reply = if eager {
                self.session.call(Call::Lock(lock))
            } else {
                self.session.defer(Call::Lock(lock))
            };
            (eager, reply, undo, lock)
        };
        if eager {
            let answer = synced(self.undone_if_unchanged(reply.await, Some(undo), Vec::new())?)?;
            self.state().tokens[target as usize] = answer.token;
            self.apply_pull(answer.pull);
        } else {
            let reply = SharedReply::of(reply);
            self.state().outstanding.push(Outstanding {
                target: Some(target),
                returns_data: false,
                reply,
                lock: Some(lock),
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
        let step = |state: &mut State| {
            state.epoch.unlock(target)?;
            self.renew_refused_locks(state, Some(target));
            state.tokens[target as usize] = 0;
            let push = Self::take_push(state);
            let window = self.id();
            Ok(Call::Unlock(v1::Unlock {
                window,
                target,
                push,
            }))
        };
        self.synchronize(Undoable::Yes, step, Completes::To(target))
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
        let (reply, undo) = {
            let mut state = self.live_state()?;
            let undo = Undo::of(&state);
            state.epoch.lock_all(assert)?;
            let call = Call::LockAll(v1::LockAll {
                window: self.id(),
                assert,
            });
            (self.session.call(call), Some(undo))
        };
        let answer = synced(self.undone_if_unchanged(reply.await, undo, Vec::new())?)?;
        self.state().tokens[self.me as usize] = answer.token;
        self.apply_pull(answer.pull);
        self.returned("lock_all", None);
        Ok(())
    }

    /// `MPI_Win_unlock_all`: publishes this rank's stores and completes everything everywhere.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` without lock_all.
    pub async fn unlock_all(&self) -> Result<()> {
        let step = |state: &mut State| {
            state.epoch.unlock_all()?;
            state.tokens.iter_mut().for_each(|token| *token = 0);
            let push = Self::take_push(state);
            let window = self.id();
            Ok(Call::UnlockAll(v1::UnlockAll { window, push }))
        };
        self.synchronize(Undoable::Yes, step, Completes::All)
            .await?;
        self.returned("unlock_all", None);
        Ok(())
    }

    /// `MPI_Win_flush(target)`: every operation to `target` so far is applied there when it
    /// returns.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` outside a passive epoch or for a target not locked.
    pub async fn flush(&self, target: u32) -> Result<()> {
        let step = |state: &mut State| {
            state.epoch.flush(target)?;
            self.renew_refused_locks(state, Some(target));
            let (window, local) = (self.id(), false);
            Ok(Call::Flush(v1::Flush {
                window,
                target,
                local,
            }))
        };
        self.synchronize(Undoable::No, step, Completes::To(target))
            .await?;
        self.returned("flush", Some(target));
        Ok(())
    }

    /// `MPI_Win_flush_all`.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` outside a passive epoch.
    pub async fn flush_all(&self) -> Result<()> {
        let step = |state: &mut State| {
            state.epoch.flush_all()?;
            self.renew_refused_locks(state, None);
            let (window, local) = (self.id(), false);
            Ok(Call::FlushAll(v1::FlushAll { window, local }))
        };
        self.synchronize(Undoable::No, step, Completes::All).await?;
        self.returned("flush_all", None);
        Ok(())
    }

    /// `MPI_Win_flush_local(target)`: completion at this rank only — results of gets to
    /// `target` are here. Says nothing about the target.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` outside a passive epoch or for a target not locked.
    pub async fn flush_local(&self, target: u32) -> Result<()> {
        self.live_state()?.epoch.flush(target)?;
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
        self.live_state()?.epoch.flush_all()?;
        self.note(vec![AuditEvent::FlushLocal { target: None }]);
        self.await_outstanding(|item| item.returns_data).await
    }

    /// `MPI_Win_sync`: publishes this rank's stores, then brings the public copy's remote
    /// changes into the private copy. Opens and closes no epoch.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` outside a passive epoch.
    pub async fn sync(&self) -> Result<()> {
        let step = |state: &mut State| {
            state.epoch.sync()?;
            let push = Self::take_push(state);
            let window = self.id();
            Ok(Call::Sync(v1::Sync { window, push }))
        };
        let reply = self
            .synchronize(Undoable::Yes, step, Completes::Nothing)
            .await?;
        let answer = synced(reply)?;
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
        let step = |state: &mut State| {
            state.epoch.free()?;
            Ok(Call::WinFree(v1::WinFree { window: self.id() }))
        };
        // nothing is outstanding outside an epoch but what failed: reported here, once more
        self.synchronize(Undoable::No, step, Completes::All).await?;
        Ok(())
    }

    /// The course of a synchronization call that does not block (post, start): notes this
    /// rank's accesses, takes `step` on the window's state, and sends the call it gives; a
    /// later call that completes it awaits its answer.
    fn send_unblocking(&self, step: impl FnOnce(&mut State) -> Result<Call>) -> Result<()> {
        self.note(Vec::new());
        let reply = {
            let mut state = self.live_state()?;
            self.call(step(&mut state)?)
        };
        self.background(reply);
        Ok(())
    }

    /// The course every blocking synchronization call but the locks takes: notes this rank's
    /// accesses; takes `step` on the window's state (the epoch's step, and what else the call
    /// changes here, such as the stores it takes to publish), which gives the call to send;
    /// sends it; awaits the outstanding replies of no target (post, start, …) and of the
    /// operations it `completes` (core's words), then its own answer. When the server refuses
    /// an `Undoable` call unchanged, the state is put back as it was before `step`.
    async fn synchronize(
        &self,
        undoable: Undoable,
        step: impl FnOnce(&mut State) -> Result<Call>,
        completes: Completes,
    ) -> Result<Reply> {
        self.note(Vec::new());
        let (reply, undo) = {
            let mut state = self.live_state()?;
            let undo = matches!(undoable, Undoable::Yes).then(|| Undo::of(&state));
            let call = step(&mut state)?;
            let undo = undo.map(|undo| undo.stepped(&state));
            (self.session.call(call), undo)
        };
        let wanted = |item: &Outstanding| item.target.is_none_or(|to| completes.includes(to));
        self.finish(reply, wanted, undo).await
    }

    // ---- communication ----
}

/// Whether a synchronization call changes what [`Undo`] puts back (so that it may be made
/// again when the server refuses it unchanged).
#[derive(Clone, Copy)]
enum Undoable {
    Yes,
    No,
}
