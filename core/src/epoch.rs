//! The origin-side epoch state machine of one rank on one window: which synchronization and
//! communication calls are legal now, and what each legal call must do.
//!
//! Owns: the rules of SEMANTICS.md §4 and §7 about epochs (fence, PSCW, lock, lock_all, flush,
//! sync, free) and the tags that tell a target when an operation may be applied. The client runs
//! this machine to refuse a bad call at once; the server runs the same machine for every session
//! so that no bad sequence reaches an actor. Must not: move data or wait for anything.

use std::collections::BTreeMap;

use crate::assert::{Assert, SyncCall};
use crate::error::RmaResult;
use crate::rma_err;

/// `MPI_LOCK_SHARED` or `MPI_LOCK_EXCLUSIVE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockType {
    /// Any number of shared holders at once.
    Shared,
    /// One holder, nobody else.
    Exclusive,
}

impl LockType {
    /// The wire value: 1 shared, 2 exclusive.
    pub fn code(self) -> i32 {
        match self {
            LockType::Shared => 1,
            LockType::Exclusive => 2,
        }
    }

    /// The lock type of a wire value.
    ///
    /// # Errors
    /// `MPI_ERR_LOCKTYPE` for anything else.
    pub fn from_code(code: i32) -> RmaResult<Self> {
        match code {
            1 => Ok(LockType::Shared),
            2 => Ok(LockType::Exclusive),
            _ => Err(rma_err!(
                LockType,
                "lock type {code} is neither shared (1) nor exclusive (2)"
            )),
        }
    }

    /// `shared` or `exclusive`.
    pub fn name(self) -> &'static str {
        match self {
            LockType::Shared => "shared",
            LockType::Exclusive => "exclusive",
        }
    }
}

/// When a target may apply an operation, as the origin tagged it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessTag {
    /// Issued in fence epoch `epoch` (the number of fences the origin had called): apply once the
    /// target has entered its fence number `epoch`.
    Fence {
        /// The epoch number.
        epoch: u64,
    },
    /// Issued in the origin's `generation`-th access epoch that included this target: apply once
    /// the target has posted to the origin that many times.
    Pscw {
        /// The generation.
        generation: u64,
    },
    /// Issued under a passive-target lock: apply once the origin holds the lock.
    Lock,
}

/// A lock request that must travel to the target before the operation it precedes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LockRequest {
    /// Shared or exclusive.
    pub lock_type: LockType,
    /// `MPI_MODE_NOCHECK` was asserted.
    pub nocheck: bool,
}

/// What a legal communication call must carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpPlan {
    /// The tag for the target.
    pub tag: AccessTag,
    /// A lazy lock request to send first, if the lock has not travelled yet.
    pub request_lock: Option<LockRequest>,
}

/// What a legal fence must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FencePlan {
    /// The fence number this call is (1 for the first fence).
    pub fence: u64,
    /// `Some(k)`: the call closes epoch `k`; send an end-of-epoch marker for `k` to every rank and
    /// wait for everyone's. `None` with `NOPRECEDE`: nothing to close, no barrier.
    pub closes: Option<u64>,
    /// Push dirty private bytes first (not with `NOSTORE`).
    pub push: bool,
    /// Pull remotely changed bytes after (not when the previous fence asserted `NOPUT`).
    pub pull: bool,
}

/// What a legal post must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostPlan {
    /// The exposure group, sorted.
    pub group: Vec<u32>,
    /// Push dirty private bytes first (not with `NOSTORE`).
    pub push: bool,
}

/// What a legal unlock must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnlockPlan {
    /// Whether the lock request already travelled (if not, the unlock carries it).
    pub requested: bool,
    /// The lock being released.
    pub lock: LockRequest,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FenceAccess {
    /// No fence yet, or the fence epoch was abandoned for another mode.
    Outside,
    /// A fence returned and no operation followed yet; another mode may still be started.
    Ready,
    /// Operations were issued since the last fence.
    Active,
    /// The last fence asserted `NOSUCCEED`.
    Closed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct HeldLock {
    request: LockRequest,
    requested: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Access {
    None,
    Pscw { group: Vec<u32> },
    Locks(BTreeMap<u32, HeldLock>),
    LockAll { nocheck: bool, requested: Vec<bool> },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Exposure {
    None,
    Posted { group: Vec<u32>, noput: bool },
}

/// The epoch state of one rank on one window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochState {
    me: u32,
    nranks: u32,
    no_locks: bool,
    fences: u64,
    fence: FenceAccess,
    noput_since_last_fence: bool,
    access: Access,
    exposure: Exposure,
    start_generations: Vec<u64>,
    /// Whether this rank ever fenced, posted or started on the window.
    active_target: bool,
}

impl EpochState {
    /// The state of rank `me` of `nranks` on a fresh window (`no_locks` from its info).
    pub fn new(me: u32, nranks: u32, no_locks: bool) -> Self {
        EpochState {
            me,
            nranks,
            no_locks,
            fences: 0,
            fence: FenceAccess::Outside,
            noput_since_last_fence: false,
            access: Access::None,
            exposure: Exposure::None,
            start_generations: vec![0; nranks as usize],
            active_target: false,
        }
    }

    /// Whether this rank took part in active-target synchronization (fence, post, start) on
    /// the window: its departure then breaks that synchronization for the others.
    pub fn used_active_target(&self) -> bool {
        self.active_target
    }

    /// This rank.
    pub fn me(&self) -> u32 {
        self.me
    }

    /// Number of ranks of the window.
    pub fn nranks(&self) -> u32 {
        self.nranks
    }

    fn check_rank(&self, rank: u32) -> RmaResult<()> {
        if rank >= self.nranks {
            return Err(rma_err!(
                Rank,
                "rank {rank} is outside the window's group of {} ranks",
                self.nranks
            ));
        }
        Ok(())
    }

    fn check_group(&self, group: &[u32]) -> RmaResult<Vec<u32>> {
        let mut sorted = group.to_vec();
        for &rank in &sorted {
            self.check_rank(rank)?;
        }
        sorted.sort_unstable();
        if sorted.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err(rma_err!(Group, "group names a rank twice"));
        }
        Ok(sorted)
    }

    fn describe_access(&self) -> &'static str {
        match self.access {
            Access::None => "no access epoch",
            Access::Pscw { .. } => "a start/complete access epoch",
            Access::Locks(_) => "a lock epoch",
            Access::LockAll { .. } => "a lock_all epoch",
        }
    }

    /// Whether a passive-target (lock or lock_all) epoch is open.
    pub fn in_passive_epoch(&self) -> bool {
        matches!(self.access, Access::Locks(_) | Access::LockAll { .. })
    }

    /// Whether any epoch is open at this rank (what `MPI_WIN_FREE` refuses).
    pub fn has_open_epoch(&self) -> bool {
        self.access != Access::None
            || self.exposure != Exposure::None
            || self.fence == FenceAccess::Active
    }

    /// `MPI_WIN_FENCE`.
    ///
    /// # Errors
    /// `MPI_ERR_ASSERT` for bad bits; `MPI_ERR_RMA_SYNC` inside a PSCW or lock epoch or while
    /// the window is posted.
    pub fn fence(&mut self, assert_bits: u32) -> RmaResult<FencePlan> {
        let assert = Assert::for_call(SyncCall::Fence, assert_bits)?;
        if self.access != Access::None {
            return Err(rma_err!(
                RmaSync,
                "fence inside {}; close it first",
                self.describe_access()
            ));
        }
        if let Exposure::Posted { .. } = self.exposure {
            return Err(rma_err!(
                RmaSync,
                "fence while the window is exposed by post; call wait first"
            ));
        }
        let closes = (!assert.has(Assert::NOPRECEDE)).then_some(self.fences);
        let plan = FencePlan {
            fence: self.fences + 1,
            closes,
            push: !assert.has(Assert::NOSTORE),
            pull: !self.noput_since_last_fence,
        };
        self.fences += 1;
        self.active_target = true;
        self.noput_since_last_fence = assert.has(Assert::NOPUT);
        self.fence = if assert.has(Assert::NOSUCCEED) {
            FenceAccess::Closed
        } else {
            FenceAccess::Ready
        };
        Ok(plan)
    }

    /// A communication call (put, get, the accumulates) to `target`. Request-based calls
    /// (`rput`, …) are legal only in passive-target epochs.
    ///
    /// # Errors
    /// `MPI_ERR_RANK` for a rank outside the group; `MPI_ERR_RMA_SYNC` outside an access epoch,
    /// after `fence(NOSUCCEED)`, to a rank outside the start group or not locked.
    pub fn op(&mut self, target: u32, request_based: bool) -> RmaResult<OpPlan> {
        self.check_rank(target)?;
        if request_based && !self.in_passive_epoch() {
            return Err(rma_err!(
                RmaSync,
                "request-based operations are only allowed in a passive-target epoch"
            ));
        }
        match &mut self.access {
            Access::Pscw { group } => {
                if group.binary_search(&target).is_err() {
                    return Err(rma_err!(RmaSync, "rank {target} is not in the start group"));
                }
                Ok(OpPlan {
                    tag: AccessTag::Pscw {
                        generation: self.start_generations[target as usize],
                    },
                    request_lock: None,
                })
            }
            Access::Locks(locks) => {
                let Some(held) = locks.get_mut(&target) else {
                    return Err(rma_err!(
                        RmaSync,
                        "rank {target} is not locked in this epoch"
                    ));
                };
                let request_lock = (!held.requested).then_some(held.request);
                held.requested = true;
                Ok(OpPlan {
                    tag: AccessTag::Lock,
                    request_lock,
                })
            }
            Access::LockAll { nocheck, requested } => {
                let slot = &mut requested[target as usize];
                let request_lock = (!*slot).then_some(LockRequest {
                    lock_type: LockType::Shared,
                    nocheck: *nocheck,
                });
                *slot = true;
                Ok(OpPlan {
                    tag: AccessTag::Lock,
                    request_lock,
                })
            }
            Access::None => match self.fence {
                FenceAccess::Ready | FenceAccess::Active => {
                    self.fence = FenceAccess::Active;
                    Ok(OpPlan {
                        tag: AccessTag::Fence { epoch: self.fences },
                        request_lock: None,
                    })
                }
                FenceAccess::Closed => Err(rma_err!(
                    RmaSync,
                    "operation after fence(nosucceed) opened no epoch"
                )),
                FenceAccess::Outside => Err(rma_err!(RmaSync, "operation outside an access epoch")),
            },
        }
    }

    fn leave_fence_for_other_mode(&mut self, call: &str) -> RmaResult<()> {
        if self.fence == FenceAccess::Active {
            return Err(rma_err!(
                RmaSync,
                "{call} inside an active fence epoch; end it with a fence first"
            ));
        }
        self.fence = FenceAccess::Outside;
        Ok(())
    }

    /// `MPI_WIN_LOCK`. Returns whether the lock must be taken eagerly (the caller's own rank,
    /// whose lock must be held before the call returns).
    ///
    /// # Errors
    /// `MPI_ERR_LOCKTYPE` is the caller's to check (see [`LockType::from_code`]);
    /// `MPI_ERR_ASSERT`, `MPI_ERR_RANK`; `MPI_ERR_RMA_SYNC` for a second lock of the same target,
    /// a lock inside PSCW or lock_all, or on a `no_locks` window.
    pub fn lock(&mut self, lock_type: LockType, target: u32, assert_bits: u32) -> RmaResult<bool> {
        let assert = Assert::for_call(SyncCall::Lock, assert_bits)?;
        self.check_rank(target)?;
        self.check_locks_allowed()?;
        match &self.access {
            Access::Pscw { .. } | Access::LockAll { .. } => {
                return Err(rma_err!(RmaSync, "lock inside {}", self.describe_access()))
            }
            Access::Locks(locks) if locks.contains_key(&target) => {
                return Err(rma_err!(RmaSync, "rank {target} is already locked"))
            }
            _ => {}
        }
        self.leave_fence_for_other_mode("lock")?;
        let eager = target == self.me;
        let held = HeldLock {
            request: LockRequest {
                lock_type,
                nocheck: assert.has(Assert::NOCHECK),
            },
            requested: eager,
        };
        match &mut self.access {
            Access::Locks(locks) => {
                locks.insert(target, held);
            }
            _ => self.access = Access::Locks(BTreeMap::from([(target, held)])),
        }
        Ok(eager)
    }

    fn check_locks_allowed(&self) -> RmaResult<()> {
        if self.no_locks {
            return Err(rma_err!(
                RmaSync,
                "the window was created with no_locks=true"
            ));
        }
        Ok(())
    }

    /// `MPI_WIN_UNLOCK`.
    ///
    /// # Errors
    /// `MPI_ERR_RANK`; `MPI_ERR_RMA_SYNC` when `target` is not locked.
    pub fn unlock(&mut self, target: u32) -> RmaResult<UnlockPlan> {
        self.check_rank(target)?;
        let Access::Locks(locks) = &mut self.access else {
            return Err(rma_err!(
                RmaSync,
                "unlock of rank {target}, which is not locked"
            ));
        };
        let Some(held) = locks.remove(&target) else {
            return Err(rma_err!(
                RmaSync,
                "unlock of rank {target}, which is not locked"
            ));
        };
        if locks.is_empty() {
            self.access = Access::None;
        }
        Ok(UnlockPlan {
            requested: held.requested,
            lock: held.request,
        })
    }

    /// Whether this rank holds, or is deemed to hold, a lock at a target other than `target`:
    /// inside `lock_all` (a shared lock at every target from the call on, MPI-3.1 §11.5.3),
    /// or with another lock epoch open. A target never holds such a rank's request back
    /// behind waiting exclusive requests (core's `locks`: they may be waiting for it).
    pub fn holds_locks_besides(&self, target: u32) -> bool {
        match &self.access {
            Access::LockAll { .. } => true,
            Access::Locks(locks) => locks.keys().any(|&other| other != target),
            Access::None | Access::Pscw { .. } => false,
        }
    }

    /// `MPI_WIN_LOCK_ALL`. The caller's own shared lock is taken eagerly.
    ///
    /// # Errors
    /// `MPI_ERR_ASSERT`; `MPI_ERR_RMA_SYNC` inside another access epoch or on a `no_locks`
    /// window.
    pub fn lock_all(&mut self, assert_bits: u32) -> RmaResult<LockRequest> {
        let assert = Assert::for_call(SyncCall::LockAll, assert_bits)?;
        self.check_locks_allowed()?;
        if self.access != Access::None {
            return Err(rma_err!(
                RmaSync,
                "lock_all inside {}",
                self.describe_access()
            ));
        }
        self.leave_fence_for_other_mode("lock_all")?;
        let mut requested = vec![false; self.nranks as usize];
        requested[self.me as usize] = true;
        let nocheck = assert.has(Assert::NOCHECK);
        self.access = Access::LockAll { nocheck, requested };
        Ok(LockRequest {
            lock_type: LockType::Shared,
            nocheck,
        })
    }

    /// `MPI_WIN_UNLOCK_ALL`. Returns the ranks whose lock travelled (they must be released).
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` without `lock_all`.
    pub fn unlock_all(&mut self) -> RmaResult<Vec<u32>> {
        let Access::LockAll { requested, .. } = &self.access else {
            return Err(rma_err!(RmaSync, "unlock_all without lock_all"));
        };
        let ranks = requested
            .iter()
            .enumerate()
            .filter(|(_, &sent)| sent)
            .map(|(rank, _)| rank as u32)
            .collect();
        self.access = Access::None;
        Ok(ranks)
    }

    /// `MPI_WIN_FLUSH` / `MPI_WIN_FLUSH_LOCAL` to `target`. Returns whether anything travelled
    /// to it in this epoch (if not, there is nothing to complete).
    ///
    /// # Errors
    /// `MPI_ERR_RANK`; `MPI_ERR_RMA_SYNC` outside a passive epoch or for a target not locked.
    pub fn flush(&self, target: u32) -> RmaResult<bool> {
        self.check_rank(target)?;
        match &self.access {
            Access::Locks(locks) => locks
                .get(&target)
                .map(|held| held.requested)
                .ok_or_else(|| rma_err!(RmaSync, "flush of rank {target}, which is not locked")),
            Access::LockAll { requested, .. } => Ok(requested[target as usize]),
            _ => Err(rma_err!(RmaSync, "flush outside a passive-target epoch")),
        }
    }

    /// The targets a `flush_all` / `flush_local_all` must complete (those something travelled
    /// to).
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` outside a passive epoch.
    pub fn flush_all(&self) -> RmaResult<Vec<u32>> {
        match &self.access {
            Access::Locks(locks) => Ok(locks
                .iter()
                .filter(|(_, held)| held.requested)
                .map(|(&rank, _)| rank)
                .collect()),
            Access::LockAll { requested, .. } => Ok(requested
                .iter()
                .enumerate()
                .filter(|(_, &sent)| sent)
                .map(|(rank, _)| rank as u32)
                .collect()),
            _ => Err(rma_err!(
                RmaSync,
                "flush_all outside a passive-target epoch"
            )),
        }
    }

    /// `MPI_WIN_SYNC`.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` outside a passive epoch.
    pub fn sync(&self) -> RmaResult<()> {
        if self.in_passive_epoch() {
            Ok(())
        } else {
            Err(rma_err!(RmaSync, "sync outside a passive-target epoch"))
        }
    }

    /// `MPI_WIN_POST`.
    ///
    /// # Errors
    /// `MPI_ERR_ASSERT`, `MPI_ERR_RANK`, `MPI_ERR_GROUP`; `MPI_ERR_RMA_SYNC` when already posted
    /// or inside an active fence epoch.
    pub fn post(&mut self, group: &[u32], assert_bits: u32) -> RmaResult<PostPlan> {
        let assert = Assert::for_call(SyncCall::Post, assert_bits)?;
        let group = self.check_group(group)?;
        if self.exposure != Exposure::None {
            return Err(rma_err!(
                RmaSync,
                "post while the window is already exposed; call wait first"
            ));
        }
        self.leave_fence_for_other_mode("post")?;
        self.exposure = Exposure::Posted {
            group: group.clone(),
            noput: assert.has(Assert::NOPUT),
        };
        self.active_target = true;
        Ok(PostPlan {
            group,
            push: !assert.has(Assert::NOSTORE),
        })
    }

    /// `MPI_WIN_START`.
    ///
    /// # Errors
    /// `MPI_ERR_ASSERT`, `MPI_ERR_RANK`, `MPI_ERR_GROUP`; `MPI_ERR_RMA_SYNC` inside another
    /// access epoch (nested start, start inside lock).
    pub fn start(&mut self, group: &[u32], assert_bits: u32) -> RmaResult<Vec<u32>> {
        Assert::for_call(SyncCall::Start, assert_bits)?;
        let group = self.check_group(group)?;
        if self.access != Access::None {
            return Err(rma_err!(RmaSync, "start inside {}", self.describe_access()));
        }
        self.leave_fence_for_other_mode("start")?;
        for &rank in &group {
            self.start_generations[rank as usize] += 1;
        }
        self.active_target = true;
        self.access = Access::Pscw {
            group: group.clone(),
        };
        Ok(group)
    }

    /// `MPI_WIN_COMPLETE`. Returns each target of the start group with the generation its
    /// end-of-epoch marker must carry.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` without a matching start.
    pub fn complete(&mut self) -> RmaResult<Vec<(u32, u64)>> {
        let Access::Pscw { group } = &self.access else {
            return Err(rma_err!(RmaSync, "complete without start"));
        };
        let markers = group
            .iter()
            .map(|&rank| (rank, self.start_generations[rank as usize]))
            .collect();
        self.access = Access::None;
        Ok(markers)
    }

    /// `MPI_WIN_WAIT`: the exposure epoch ends. Returns whether to pull afterwards (not with
    /// `NOPUT` on the post).
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` without post.
    pub fn wait(&mut self) -> RmaResult<bool> {
        let pull = self.test()?;
        self.exposure = Exposure::None;
        Ok(pull)
    }

    /// The check of `MPI_WIN_TEST`, which changes nothing until it reports true; then call
    /// [`EpochState::wait`]. Returns whether a successful test pulls.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` without post.
    pub fn test(&self) -> RmaResult<bool> {
        match &self.exposure {
            Exposure::Posted { noput, .. } => Ok(!noput),
            Exposure::None => Err(rma_err!(RmaSync, "wait or test without post")),
        }
    }

    /// The answer to a test came back to its origin: a true `flag` has the effect of
    /// [`EpochState::wait`] (the exposure epoch ends); a false one changes nothing.
    pub fn tested(&mut self, flag: bool) {
        if flag {
            self.exposure = Exposure::None;
        }
    }

    /// The exposure group of the current post, if posted.
    pub fn post_group(&self) -> Option<&[u32]> {
        match &self.exposure {
            Exposure::Posted { group, .. } => Some(group),
            Exposure::None => None,
        }
    }

    /// `MPI_WIN_FREE` at this rank.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` while an epoch is open.
    pub fn free(&self) -> RmaResult<()> {
        if self.has_open_epoch() {
            let what = if self.access != Access::None {
                self.describe_access()
            } else if self.exposure != Exposure::None {
                "an exposure epoch (post without wait)"
            } else {
                "a fence epoch with operations (call fence first)"
            };
            return Err(rma_err!(RmaSync, "free while {what} is open"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorClass;

    fn class<T: std::fmt::Debug>(result: RmaResult<T>) -> ErrorClass {
        result.unwrap_err().class
    }

    #[test]
    fn ops_need_an_epoch() {
        let mut state = EpochState::new(0, 2, false);
        assert_eq!(class(state.op(1, false)), ErrorClass::RmaSync);
        let plan = state.fence(0).unwrap();
        assert_eq!(plan.closes, Some(0));
        assert_eq!(
            state.op(1, false).unwrap().tag,
            AccessTag::Fence { epoch: 1 }
        );
        assert_eq!(class(state.op(2, false)), ErrorClass::Rank);
        assert_eq!(class(state.op(1, true)), ErrorClass::RmaSync);
    }

    #[test]
    fn nosucceed_closes_and_noput_skips_next_pull() {
        let mut state = EpochState::new(0, 2, false);
        state.fence(Assert::NOPRECEDE | Assert::NOPUT).unwrap();
        let plan = state.fence(Assert::NOSUCCEED | Assert::NOSTORE).unwrap();
        assert!(!plan.pull);
        assert!(!plan.push);
        assert_eq!(plan.closes, Some(1));
        assert_eq!(class(state.op(1, false)), ErrorClass::RmaSync);
        assert!(state.free().is_ok());
    }

    #[test]
    fn lock_after_fence_is_allowed_only_before_ops() {
        let mut state = EpochState::new(0, 2, false);
        state.fence(0).unwrap();
        assert!(!state.lock(LockType::Shared, 1, 0).unwrap());
        state.unlock(1).unwrap();
        // the fence epoch was abandoned: an op now has no epoch (MPICH win_sync_lock_fence)
        assert_eq!(class(state.op(1, false)), ErrorClass::RmaSync);
        let mut state = EpochState::new(0, 2, false);
        state.fence(0).unwrap();
        state.op(1, false).unwrap();
        assert_eq!(
            class(state.lock(LockType::Shared, 1, 0)),
            ErrorClass::RmaSync
        );
    }

    #[test]
    fn lazy_lock_request_travels_with_the_first_op_only() {
        let mut state = EpochState::new(0, 3, false);
        assert!(!state.lock(LockType::Exclusive, 2, 0).unwrap());
        let first = state.op(2, false).unwrap();
        assert_eq!(
            first.request_lock,
            Some(LockRequest {
                lock_type: LockType::Exclusive,
                nocheck: false
            })
        );
        assert_eq!(state.op(2, false).unwrap().request_lock, None);
        assert_eq!(class(state.op(1, false)), ErrorClass::RmaSync);
        assert_eq!(
            class(state.lock(LockType::Shared, 2, 0)),
            ErrorClass::RmaSync
        );
        assert!(state.flush(2).unwrap());
        assert_eq!(class(state.flush(1)), ErrorClass::RmaSync);
        let plan = state.unlock(2).unwrap();
        assert!(plan.requested);
        assert_eq!(class(state.unlock(2)), ErrorClass::RmaSync);
        assert_eq!(class(state.flush_all()), ErrorClass::RmaSync);
    }

    #[test]
    fn lock_on_own_rank_is_eager() {
        let mut state = EpochState::new(1, 2, false);
        assert!(state.lock(LockType::Shared, 1, Assert::NOCHECK).unwrap());
        assert_eq!(state.op(1, false).unwrap().request_lock, None);
    }

    #[test]
    fn pscw_rules() {
        let mut state = EpochState::new(0, 3, false);
        assert_eq!(class(state.complete()), ErrorClass::RmaSync);
        assert_eq!(state.start(&[2, 1], 0).unwrap(), vec![1, 2]);
        assert_eq!(class(state.start(&[1], 0)), ErrorClass::RmaSync);
        assert_eq!(
            class(state.lock(LockType::Shared, 1, 0)),
            ErrorClass::RmaSync
        );
        assert_eq!(
            state.op(1, false).unwrap().tag,
            AccessTag::Pscw { generation: 1 }
        );
        assert_eq!(class(state.op(0, false)), ErrorClass::RmaSync);
        assert_eq!(state.complete().unwrap(), vec![(1, 1), (2, 1)]);
        state.start(&[1], 0).unwrap();
        assert_eq!(
            state.op(1, false).unwrap().tag,
            AccessTag::Pscw { generation: 2 }
        );
        assert_eq!(class(state.start(&[2], 0)), ErrorClass::RmaSync);
        assert_eq!(class(state.start(&[1, 1], 0)), ErrorClass::Group);
    }

    #[test]
    fn post_wait_rules() {
        let mut state = EpochState::new(0, 3, false);
        assert_eq!(class(state.wait()), ErrorClass::RmaSync);
        assert_eq!(class(state.post(&[1, 1], 0)), ErrorClass::Group);
        assert_eq!(class(state.post(&[7], 0)), ErrorClass::Rank);
        assert_eq!(
            class(state.post(&[1], Assert::NOPRECEDE)),
            ErrorClass::Assert
        );
        let plan = state
            .post(&[2, 1], Assert::NOSTORE | Assert::NOPUT)
            .unwrap();
        assert_eq!(plan.group, vec![1, 2]);
        assert!(!plan.push);
        assert_eq!(class(state.post(&[1], 0)), ErrorClass::RmaSync);
        assert_eq!(class(state.fence(0)), ErrorClass::RmaSync);
        assert_eq!(class(state.free()), ErrorClass::RmaSync);
        assert!(!state.test().unwrap());
        assert!(!state.wait().unwrap());
        assert!(state.free().is_ok());
    }

    #[test]
    fn lock_all_and_no_locks() {
        let mut state = EpochState::new(0, 2, true);
        assert_eq!(class(state.lock_all(0)), ErrorClass::RmaSync);
        assert_eq!(
            class(state.lock(LockType::Shared, 1, 0)),
            ErrorClass::RmaSync
        );
        let mut state = EpochState::new(0, 2, false);
        state.lock_all(0).unwrap();
        assert_eq!(class(state.lock_all(0)), ErrorClass::RmaSync);
        assert_eq!(
            class(state.lock(LockType::Shared, 1, 0)),
            ErrorClass::RmaSync
        );
        assert!(state.sync().is_ok());
        assert_eq!(state.flush_all().unwrap(), vec![0]);
        state.op(1, true).unwrap();
        assert_eq!(state.flush_all().unwrap(), vec![0, 1]);
        assert_eq!(class(state.free()), ErrorClass::RmaSync);
        assert_eq!(state.unlock_all().unwrap(), vec![0, 1]);
        assert_eq!(class(state.unlock_all()), ErrorClass::RmaSync);
        assert_eq!(class(state.sync()), ErrorClass::RmaSync);
    }
}
