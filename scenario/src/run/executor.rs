//! [`RankExecutor`]: one rank's interpreter of scenario calls, in a run or in the shell.
//!
//! Owns: the rank's session and window handles (a window whose group the rank is not in has
//! none), its variables (pending until an operation's reply is here), its requests and regions
//! (through `requests` and `regions`), reading its private copy, which call of the library
//! each scenario call is, a crash (every handle dropped, nothing closed) and the attach after
//! it, and how each call went against its `!CLASS` (the failed calls and the problems). Must
//! not: print, know about the CLI, or run another rank's lines.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt, Shared};
use onesided_core::datatype::Value;
use onesided_core::window::DYNAMIC_BASE;
use onesided_core::{Datatype, ErrorClass};

use super::super::ast::{Call, Loc, Observed, RankCall};
use super::super::buffers::{byte_runs, observed};
use super::super::parse::{not_in_group, rank_name};
use super::requests::RequestSlot;
use super::{FailedCall, Problem, Regions, VarValue};
use onesided_client::{Endpoint, Error, Session, Window};

/// An operation's reply, shared: whoever reads the variable first polls it.
type SharedBytes = Shared<BoxFuture<'static, Result<Bytes, Error>>>;

/// A variable of the rank: its value, the reply that will define it, or failed.
#[derive(Debug)]
pub(super) enum VarSlot {
    Ready(VarValue),
    Pending {
        dtype: Datatype,
        list: bool,
        reply: SharedBytes,
    },
    Failed,
}

fn not_attached() -> Error {
    Error::Disconnected("the rank has crashed and not attached again".into())
}

/// One rank's interpreter of scenario calls: its session, its window handles, its variables
/// and requests, and what failed.
pub struct RankExecutor {
    endpoint: Endpoint,
    token: String,
    rank: u32,
    pub(super) nranks: u32,
    window_names: Vec<String>,
    pub(super) dtypes: Vec<Datatype>,
    pub(super) session: Option<Session>,
    windows: Vec<Option<Window>>,
    /// Per window: whether this rank is in its group (a window over part of the world).
    members: Vec<bool>,
    pub(super) vars: BTreeMap<String, VarSlot>,
    pub(super) requests: HashMap<String, RequestSlot>,
    /// Requests that were active and are no longer (waited for, tested complete, freed): their
    /// handle is `MPI_REQUEST_NULL`, on which a wait returns at once and a test says true.
    pub(super) null_requests: HashSet<String>,
    /// The regions of dynamic windows, shared by every rank of a run.
    pub(super) regions: Regions,
    pub(super) failed_calls: Vec<FailedCall>,
    pub(super) problems: Vec<Problem>,
}

impl std::fmt::Debug for RankExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // never the token
        f.debug_struct("RankExecutor")
            .field("rank", &self.rank)
            .field("windows", &self.window_names)
            .field("attached", &self.session.is_some())
            .finish_non_exhaustive()
    }
}

impl RankExecutor {
    /// Attaches with `token` and opens each window (server name, element type).
    ///
    /// # Errors
    /// The attach or an open fails.
    pub async fn attach(
        endpoint: impl Into<Endpoint>,
        token: &str,
        windows: Vec<(String, Datatype)>,
    ) -> Result<Self, Error> {
        let endpoint = endpoint.into();
        let session = Session::attach(&endpoint, token).await?;
        let (window_names, dtypes) = windows.into_iter().unzip();
        let mut executor = RankExecutor {
            endpoint,
            token: token.to_string(),
            rank: session.rank(),
            nranks: session.nranks(),
            window_names,
            dtypes,
            session: Some(session),
            windows: Vec::new(),
            members: Vec::new(),
            vars: BTreeMap::new(),
            requests: HashMap::new(),
            null_requests: HashSet::new(),
            regions: Regions::default(),
            failed_calls: Vec::new(),
            problems: Vec::new(),
        };
        executor.open_all().await?;
        Ok(executor)
    }

    async fn open_all(&mut self) -> Result<(), Error> {
        let session = self.session.clone().ok_or_else(not_attached)?;
        let mut windows = Vec::new();
        let mut members = Vec::new();
        for name in &self.window_names {
            match session.window(name).await {
                Ok(window) => {
                    windows.push(Some(window));
                    members.push(true);
                }
                // a window over part of the world that this rank is not in
                Err(error) if error.class() == Some(ErrorClass::Group) => {
                    windows.push(None);
                    members.push(false);
                }
                Err(error) => return Err(error),
            }
        }
        self.windows = windows;
        self.members = members;
        Ok(())
    }

    /// Opens one more window (the shell's `open`); returns its index.
    ///
    /// # Errors
    /// The open fails.
    pub async fn open(&mut self, name: &str, dtype: Datatype) -> Result<(usize, &Window), Error> {
        let session = self.session.clone().ok_or_else(not_attached)?;
        let window = session.window(name).await?;
        self.window_names.push(name.to_string());
        self.dtypes.push(dtype);
        self.windows.push(Some(window));
        self.members.push(true);
        let index = self.windows.len() - 1;
        let window = self.windows[index].as_ref().ok_or_else(not_attached)?;
        Ok((index, window))
    }

    /// Changes the element type a window's values are read and written as (the shell picks
    /// it after opening).
    pub fn set_window_type(&mut self, index: usize, dtype: Datatype) {
        if let Some(slot) = self.dtypes.get_mut(index) {
            *slot = dtype;
        }
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The session, unless the rank crashed.
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// The calls that failed so far.
    pub fn failed_calls(&self) -> &[FailedCall] {
        &self.failed_calls
    }

    /// What went wrong so far (calls failing without `!`, …).
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// A variable's value, once it has one; `Err` with the reason otherwise.
    pub fn var(&mut self, name: &str) -> Result<VarValue, String> {
        self.resolve_ready();
        match self.vars.get(name) {
            Some(VarSlot::Ready(value)) => Ok(value.clone()),
            Some(VarSlot::Pending { .. }) => Err(format!(
                "{name} is not defined yet: its operation has not completed"
            )),
            Some(VarSlot::Failed) => Err(format!("{name} has no value: its operation failed")),
            None => Err(format!("{name} was never assigned")),
        }
    }

    /// Every variable that holds a value.
    pub fn vars(&mut self) -> BTreeMap<String, VarValue> {
        self.resolve_ready();
        self.vars
            .iter()
            .filter_map(|(name, slot)| match slot {
                VarSlot::Ready(value) => Some((name.clone(), value.clone())),
                _ => None,
            })
            .collect()
    }

    pub(super) fn set_var(&mut self, var: &str, dtype: Datatype, value: Value) {
        self.vars.insert(
            var.to_string(),
            VarSlot::Ready(VarValue {
                dtype,
                value: Observed::Scalar(value),
            }),
        );
    }

    pub(super) fn window(&self, index: usize) -> Result<&Window, Error> {
        if self.members.get(index) == Some(&false) {
            let name = &self.window_names[index];
            return Err(not_in_group(ErrorClass::Group, self.rank, self.nranks, name).into());
        }
        self.windows
            .get(index)
            .and_then(Option::as_ref)
            .ok_or_else(not_attached)
    }

    /// The rank in window `index` of the world's rank `rank` (the file names world ranks;
    /// a window over part of the world numbers its ranks in its group). A rank outside the
    /// group is `MPI_ERR_RANK`, as a target outside a window is.
    pub(super) fn in_window(&self, index: usize, rank: u32) -> Result<u32, Error> {
        let window = self.window(index)?;
        window.desc().rank_of(rank).ok_or_else(|| {
            not_in_group(
                ErrorClass::Rank,
                rank,
                self.nranks,
                &self.window_names[index],
            )
            .into()
        })
    }

    /// [`RankExecutor::in_window`] of every rank of `group`.
    fn group_in_window(&self, index: usize, group: &[u32]) -> Result<Vec<u32>, Error> {
        group
            .iter()
            .map(|&rank| self.in_window(index, rank))
            .collect()
    }

    /// Reads the private copy at `loc` without syncing (in a region: only while it is
    /// attached, as `Window::load_at`).
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` outside the window or the region; a crashed rank.
    pub fn private(&self, loc: &Loc) -> Result<Observed, Error> {
        match &loc.region {
            Some(region) => {
                let address = self.regions.address(region)?;
                self.read(loc, |window, offset, len| {
                    window.load_at::<u8>(address.saturating_add(offset), len)
                })
            }
            None => self.read(loc, Window::load_bytes),
        }
    }

    /// Reads the private copy like [`RankExecutor::private`], without recording a load: the
    /// runner's look at the outcome is no access of the program. A region's bytes stay in
    /// the rank's memory after its detach, and this reads them there.
    pub(super) fn inspect(&self, loc: &Loc) -> Result<Observed, Error> {
        let offset = match &loc.region {
            Some(region) => self.regions.address(region)?.saturating_sub(DYNAMIC_BASE),
            None => 0,
        };
        self.read(loc, |window, at, len| {
            window.inspect_bytes(offset.saturating_add(at), len)
        })
    }

    /// The elements at `loc`, each read from the private copy with `read`.
    fn read(
        &self,
        loc: &Loc,
        read: impl Fn(&Window, u64, u64) -> onesided_client::Result<Vec<u8>>,
    ) -> Result<Observed, Error> {
        let dtype = self.dtypes[loc.window];
        let window = self.window(loc.window)?;
        let mut bytes = Vec::new();
        // run by run: a long range past the window fails at once, not element by element
        for (offset, len) in byte_runs(loc, dtype)? {
            bytes.extend(read(window, offset, len)?);
        }
        Ok(observed(dtype, loc.shape.is_list(), &bytes)?)
    }

    /// Moves every completed pending result into its variable.
    fn resolve_ready(&mut self) {
        for slot in self.vars.values_mut() {
            if let VarSlot::Pending { dtype, list, reply } = slot {
                match reply.clone().now_or_never() {
                    None => {}
                    Some(Ok(bytes)) => {
                        *slot = match observed(*dtype, *list, &bytes) {
                            Ok(value) => VarSlot::Ready(VarValue {
                                dtype: *dtype,
                                value,
                            }),
                            Err(_) => VarSlot::Failed,
                        }
                    }
                    Some(Err(_)) => *slot = VarSlot::Failed,
                }
            }
        }
    }

    /// Performs one call and records how it went against its `!CLASS`. Returns the error, if
    /// the call failed.
    pub async fn execute(&mut self, call: &RankCall) -> Option<Error> {
        let outcome = self.perform(&call.call).await;
        self.resolve_ready();
        let who = rank_name(self.rank, self.nranks);
        match (outcome, call.expect_fail) {
            (Ok(()), None) => None,
            (Ok(()), Some(class)) => {
                self.problems.push(Problem::unfailed(&who, call, class));
                None
            }
            (Err(error), _) => {
                let (failed, problem) =
                    FailedCall::judged(&who, call, error.class(), error.to_string());
                self.failed_calls.push(failed);
                self.problems.extend(problem);
                Some(error)
            }
        }
    }

    /// The world barrier.
    ///
    /// # Errors
    /// The session ended.
    pub async fn barrier(&self) -> Result<(), Error> {
        self.session
            .as_ref()
            .ok_or_else(not_attached)?
            .barrier()
            .await
    }

    /// Performs one call.
    async fn perform(&mut self, call: &Call) -> Result<(), Error> {
        match call {
            Call::Store { loc, values } => self.store(loc, values),
            Call::Load { loc, var } => self.load(loc, var),
            Call::Op(spec) => self.operation(spec),
            Call::WaitReq(name) => self.wait_req(name).await,
            Call::TestReq { request, var } => self.test_req(request, var).await,
            Call::TestAll { requests, var } => self.test_all(requests, var).await,
            Call::WaitAll(requests) => self.wait_all(requests).await,
            Call::WaitAny { requests, var } => self.wait_any(requests, var).await,
            Call::FreeReq(name) => self.free_req(name),
            Call::Fence { window, assert } => self.window(*window)?.fence(*assert).await,
            Call::Post {
                window,
                group,
                assert,
            } => {
                let group = self.group_in_window(*window, group)?;
                self.window(*window)?.post(&group, *assert)
            }
            Call::Start {
                window,
                group,
                assert,
            } => {
                let group = self.group_in_window(*window, group)?;
                self.window(*window)?.start(&group, *assert)
            }
            Call::Complete { window } => self.window(*window)?.complete().await,
            Call::Wait { window } => self.window(*window)?.wait().await,
            Call::Test { window, var } => {
                let flag = self.window(*window)?.test().await?;
                self.set_var(var, Datatype::Bool, Value::Bool(flag));
                Ok(())
            }
            Call::Lock {
                window,
                lock_type,
                target,
                assert,
            } => {
                let target = self.in_window(*window, *target)?;
                self.window(*window)?
                    .lock(*lock_type, target, *assert)
                    .await
            }
            Call::Unlock { window, target } => {
                let target = self.in_window(*window, *target)?;
                self.window(*window)?.unlock(target).await
            }
            Call::LockAll { window, assert } => self.window(*window)?.lock_all(*assert).await,
            Call::UnlockAll { window } => self.window(*window)?.unlock_all().await,
            Call::Flush { window, target } => {
                let target = self.in_window(*window, *target)?;
                self.window(*window)?.flush(target).await
            }
            Call::FlushAll { window } => self.window(*window)?.flush_all().await,
            Call::SetInfo { window, info } => {
                let pairs: Vec<(&str, &str)> = info
                    .iter()
                    .map(|(key, value)| (key.as_str(), value.as_str()))
                    .collect();
                self.window(*window)?.set_info(&pairs).await
            }
            Call::FlushLocal { window, target } => {
                let target = self.in_window(*window, *target)?;
                self.window(*window)?.flush_local(target).await
            }
            Call::FlushLocalAll { window } => self.window(*window)?.flush_local_all().await,
            Call::Sync { window } => self.window(*window)?.sync().await,
            Call::Sleep { ms } => {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                Ok(())
            }
            Call::Crash => {
                // Drop every handle without closing anything: the stream just ends.
                self.windows.iter_mut().for_each(|window| *window = None);
                self.session = None;
                self.requests.clear();
                self.null_requests.clear();
                Ok(())
            }
            Call::Attach => {
                self.session = Some(Session::attach(&self.endpoint, &self.token).await?);
                self.open_all().await
            }
            Call::AttachRegion {
                window,
                count,
                name,
            } => self.attach_region(*window, *count, name).await,
            Call::DetachRegion { window, name } => self.detach_region(*window, name).await,
        }
    }
}
