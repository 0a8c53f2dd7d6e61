//! Running a scenario: a fresh world and fresh windows, one [`Session`] per rank, every rank
//! concurrently, then the expectations; and [`RankExecutor`], one rank's interpreter of calls,
//! which the shell uses too.
//!
//! Owns: what each scenario call does in terms of the library's [`Window`] methods, and the
//! report of a run. Must not: print, or know about the CLI; the binary renders reports.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::{ConstantBuilder, Retryable};
use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt, Shared};
use onesided_core::datatype::{decode, encode_all, Value};
use onesided_core::layout::{gather, scatter};
use onesided_core::window::{Flavor, MemoryModel, OpKind, DYNAMIC_BASE, ELEMENT_TYPE_KEY};
use onesided_core::{Datatype, ErrorClass, Op, RmaError};

use super::ast::{
    Call, Expectation, FlavorDecl, Loc, Model, Observed, OpCall, Origin, RankCall, RegionRef,
    Scenario, Step, Subject, WindowDecl,
};
use super::parse::{rank_name, returns_list};
use onesided_client::{
    wait_any, Admin, Endpoint, Error, NewWindow, OpSpec, Request, Session, Window, WindowSpec,
};

/// Where and how to run.
#[derive(Clone)]
pub struct RunConfig {
    /// The server: its URL, and its CA for TLS.
    pub endpoint: Endpoint,
    /// The admin token (to create and delete the world).
    pub admin_token: String,
    /// How long every rank together may take before the run is declared stuck.
    pub timeout: Duration,
    /// A prefix that makes the world's name unique to this invocation.
    pub prefix: String,
}

impl std::fmt::Debug for RunConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunConfig")
            .field("endpoint", &self.endpoint)
            .field("timeout", &self.timeout)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// Why a run could not take place at all (as opposed to a scenario that failed).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The server refused to set the run up, or could not be reached.
    #[error(transparent)]
    Client(#[from] Error),
    /// The scenario asks for something this implementation does not offer (every window
    /// declaration the format has is offered today; kept for what the format gains next).
    #[error("line {line}: {message}")]
    Unsupported {
        /// The line asking for it.
        line: usize,
        /// What.
        message: String,
    },
}

/// A variable's value with the element type it was read as.
#[derive(Clone, Debug, PartialEq)]
pub struct VarValue {
    /// The element type.
    pub dtype: Datatype,
    /// The value.
    pub value: Observed,
}

/// A call that failed (expectedly or not).
#[derive(Clone, Debug, PartialEq)]
pub struct FailedCall {
    /// Its line.
    pub line: usize,
    /// The call as written.
    pub call: String,
    /// The MPI error class, when the failure carried one.
    pub class: Option<ErrorClass>,
    /// The error.
    pub message: String,
    /// Whether the line said it must fail with exactly this class.
    pub expected: bool,
}

/// Something that makes the run fail, besides an expectation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The line it concerns (0 for the run as a whole).
    pub line: usize,
    /// What happened.
    pub message: String,
}

/// What one rank ended with.
#[derive(Clone, Debug, PartialEq)]
pub struct RankReport {
    /// The rank.
    pub rank: u32,
    /// Its variables that hold a value.
    pub vars: BTreeMap<String, VarValue>,
    /// Its calls that failed.
    pub failed_calls: Vec<FailedCall>,
}

/// One expectation, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpectationOutcome {
    /// Its line.
    pub line: usize,
    /// As written.
    pub text: String,
    /// Whether it held.
    pub held: bool,
    /// What was observed, when something could be read.
    pub observed: Option<Observed>,
    /// Why nothing could be read.
    pub note: Option<String>,
}

/// A window a run created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatedWindow {
    /// Its name.
    pub name: String,
    /// Its server-assigned id.
    pub id: u64,
}

/// The report of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// 1-based run number.
    pub run: usize,
    /// The world it ran in (deleted afterwards).
    pub world: String,
    /// Per rank.
    pub ranks: Vec<RankReport>,
    /// Per expectation, in file order.
    pub expectations: Vec<ExpectationOutcome>,
    /// Failures that are not expectations: calls that failed without `!`, calls that did not
    /// fail as their `!CLASS` said, ranks that did not finish.
    pub problems: Vec<Problem>,
    /// The windows it created.
    pub windows: Vec<CreatedWindow>,
}

impl RunReport {
    /// Whether every expectation held and nothing else went wrong.
    pub fn ok(&self) -> bool {
        self.problems.is_empty() && self.expectations.iter().all(|e| e.held)
    }
}

type SharedBytes = Shared<BoxFuture<'static, Result<Bytes, Error>>>;

#[derive(Debug)]
enum VarSlot {
    Ready(VarValue),
    Pending {
        dtype: Datatype,
        list: bool,
        reply: SharedBytes,
    },
    Failed,
}

/// A request of the scenario: the client library's [`Request`] (which decides completion, as
/// MPI's test and wait do), and the variable its value defines, if any.
#[derive(Debug)]
struct RequestSlot {
    request: Request<Bytes>,
    var: Option<String>,
}

impl RequestSlot {
    /// Whether it is complete now, without waiting: a failed one is complete too (the first
    /// look sends an operation still waiting to travel, as MPI's test makes progress).
    fn complete_now(&self) -> bool {
        self.request.test().unwrap_or(true)
    }
}

fn observed(dtype: Datatype, list: bool, bytes: &[u8]) -> Result<Observed, Error> {
    let values = decode(dtype, bytes)?;
    Ok(if list {
        Observed::List(values)
    } else {
        Observed::Scalar(values.into_iter().next().unwrap_or(Value::Int(0)))
    })
}

/// The byte runs of a location's elements in a window of `dtype`, in type-map order, as
/// (offset, length) from the window's start; an offset that overflows is `u64::MAX` (outside
/// every window).
fn byte_runs(loc: &Loc, dtype: Datatype) -> Result<Vec<(u64, u64)>, Error> {
    let size = dtype.size() as u64;
    let base = loc.index.saturating_mul(size);
    let runs = loc.shape.layout().flatten(size)?;
    Ok(runs
        .into_iter()
        .map(|run| (base.saturating_add(run.offset), run.len))
        .collect())
}

/// Byte offsets of a location's elements in a window of `dtype`, in type-map order.
fn element_offsets(loc: &Loc, dtype: Datatype) -> Result<Vec<u64>, Error> {
    let size = dtype.size() as u64;
    let mut offsets = Vec::new();
    for (offset, len) in byte_runs(loc, dtype)? {
        offsets.extend((0..len / size).map(|k| offset.saturating_add(k * size)));
    }
    Ok(offsets)
}

/// The origin values an operation sends: all of them, or those `origin` selects in its
/// type-map order (`MPI_ERR_RMA_RANGE` when it reaches past them).
fn origin_data(dtype: Datatype, values: &[Value], origin: Option<&Origin>) -> Result<Bytes, Error> {
    let buffer = encode_all(dtype, values)?;
    let Some(origin) = origin else {
        return Ok(Bytes::from(buffer));
    };
    let size = dtype.size() as u64;
    let runs = origin.shape.layout().flatten(size)?;
    let base = origin.index.saturating_mul(size);
    Ok(Bytes::from(gather(&runs, base, &buffer)?))
}

/// The origin buffer of a get with an origin layout: the fetched values unpacked where
/// `origin` says, the buffer just long enough for them, every other element zero.
fn unpacked(dtype: Datatype, origin: &Origin, fetched: &[u8]) -> Result<Bytes, Error> {
    let size = dtype.size() as u64;
    let runs = origin.shape.layout().flatten(size)?;
    let base = origin.index.saturating_mul(size);
    let end = runs
        .iter()
        .filter_map(|run| run.end())
        .max()
        .map_or(Some(0), |end| base.checked_add(end))
        .and_then(|end| end.checked_next_multiple_of(size))
        .and_then(|end| usize::try_from(end).ok())
        .ok_or_else(|| RmaError::new(ErrorClass::Count, "the origin buffer is too large"))?;
    let mut buffer = vec![0u8; end];
    scatter(&runs, base, &mut buffer, fetched)?;
    Ok(Bytes::from(buffer))
}

fn request_gone(name: &str) -> Error {
    Error::Mpi {
        class: ErrorClass::Request,
        code: tonic::Code::InvalidArgument,
        message: format!(
            "request {name} is not active (it was waited for, tested complete or freed)"
        ),
        unchanged: false,
    }
}

/// The addresses of the regions the ranks of a run attached (`attach N -> r`), by name: the
/// attaching rank fills it, every rank reads it where it uses a region (the file orders the
/// attach before another rank's use with a barrier; the parser checks that).
#[derive(Clone, Debug, Default)]
pub(crate) struct Regions(Arc<Mutex<HashMap<String, u64>>>);

impl Regions {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        // a panic elsewhere leaves the table as it was: plain data
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The address of region `region`, once its rank attached it.
    fn address(&self, region: &RegionRef) -> Result<u64, Error> {
        self.table().get(&region.name).copied().ok_or_else(|| {
            Error::Config(format!(
                "region {} has no address: its attach (line {}) did not succeed",
                region.name, region.line
            ))
        })
    }

    /// The displacement of `loc`'s first element on its window (disp_unit = `unit`): its
    /// index in the window, or in a region its address (disp_unit 1). An address past
    /// `u64::MAX` is `u64::MAX`, outside every region.
    fn disp(&self, loc: &Loc, unit: u64) -> Result<u64, Error> {
        match &loc.region {
            Some(region) => Ok(self
                .address(region)?
                .saturating_add(loc.index.saturating_mul(unit))),
            None => Ok(loc.index),
        }
    }
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
    nranks: u32,
    window_names: Vec<String>,
    dtypes: Vec<Datatype>,
    session: Option<Session>,
    windows: Vec<Option<Window>>,
    /// Per window: whether this rank is in its group (a window over part of the world).
    members: Vec<bool>,
    vars: BTreeMap<String, VarSlot>,
    requests: HashMap<String, RequestSlot>,
    /// Requests that were active and are no longer (waited for, tested complete, freed): their
    /// handle is `MPI_REQUEST_NULL`, on which a wait returns at once and a test says true.
    null_requests: HashSet<String>,
    /// The regions of dynamic windows, shared by every rank of a run.
    regions: Regions,
    failed_calls: Vec<FailedCall>,
    problems: Vec<Problem>,
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

    /// The active request `name`; `MPI_ERR_REQUEST` once it was waited for, tested complete
    /// or freed.
    fn active_request(&self, name: &str) -> Result<&RequestSlot, Error> {
        self.requests.get(name).ok_or_else(|| request_gone(name))
    }

    /// Takes the active request `name` out (it is no longer active: its handle is now
    /// `MPI_REQUEST_NULL`).
    fn take_request(&mut self, name: &str) -> Result<RequestSlot, Error> {
        let slot = self
            .requests
            .remove(name)
            .ok_or_else(|| request_gone(name))?;
        self.null_requests.insert(name.to_string());
        Ok(slot)
    }

    /// Whether `name` is `MPI_REQUEST_NULL`: it was active and was waited for, tested
    /// complete or freed. MPI's wait and test take such a handle and return at once (the
    /// lists of `MPI_Waitall` and the others "may contain null or inactive handles"); any
    /// other name that is not active is `MPI_ERR_REQUEST`.
    fn request_null(&self, name: &str) -> bool {
        !self.requests.contains_key(name) && self.null_requests.contains(name)
    }

    /// The active requests of `names`, in order, with their positions in it; the others
    /// must be null (`MPI_ERR_REQUEST` otherwise).
    fn active_of(&self, names: &[String]) -> Result<Vec<(usize, String)>, Error> {
        let mut active = Vec::with_capacity(names.len());
        for (position, name) in names.iter().enumerate() {
            if !self.request_null(name) {
                self.active_request(name)?;
                active.push((position, name.clone()));
            }
        }
        Ok(active)
    }

    /// Waits for a request taken out; its value variable is defined from now on, or failed.
    async fn finish_request(&mut self, slot: RequestSlot) -> Result<(), Error> {
        let outcome = slot.request.wait().await;
        self.request_finished(slot.var, outcome)
    }

    /// A request's outcome: a failure leaves its value variable failed.
    fn request_finished(
        &mut self,
        var: Option<String>,
        outcome: Result<Bytes, Error>,
    ) -> Result<(), Error> {
        if let (Err(_), Some(var)) = (&outcome, var) {
            self.vars.insert(var, VarSlot::Failed);
        }
        outcome.map(drop)
    }

    /// Takes out and waits for each request (all active), in order; the first failure once
    /// all were waited for.
    async fn finish_requests(&mut self, names: &[String]) -> Result<(), Error> {
        let mut outcome = Ok(());
        for name in names {
            let slot = self.take_request(name)?;
            let finished = self.finish_request(slot).await;
            if outcome.is_ok() {
                outcome = finished;
            }
        }
        outcome
    }

    fn set_var(&mut self, var: &str, dtype: Datatype, value: Value) {
        self.vars.insert(
            var.to_string(),
            VarSlot::Ready(VarValue {
                dtype,
                value: Observed::Scalar(value),
            }),
        );
    }

    fn window(&self, index: usize) -> Result<&Window, Error> {
        if self.members.get(index) == Some(&false) {
            return Err(RmaError::new(
                ErrorClass::Group,
                format!(
                    "rank {} is not in the group of window {}",
                    rank_name(self.rank, self.nranks),
                    self.window_names[index]
                ),
            )
            .into());
        }
        self.windows
            .get(index)
            .and_then(Option::as_ref)
            .ok_or_else(not_attached)
    }

    /// The rank in window `index` of the world's rank `rank` (the file names world ranks;
    /// a window over part of the world numbers its ranks in its group). A rank outside the
    /// group is `MPI_ERR_RANK`, as a target outside a window is.
    fn in_window(&self, index: usize, rank: u32) -> Result<u32, Error> {
        let window = self.window(index)?;
        window.desc().rank_of(rank).ok_or_else(|| {
            RmaError::new(
                ErrorClass::Rank,
                format!(
                    "rank {} is not in the group of window {}",
                    rank_name(rank, self.nranks),
                    self.window_names[index]
                ),
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
    fn inspect(&self, loc: &Loc) -> Result<Observed, Error> {
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
        observed(dtype, loc.shape.is_list(), &bytes)
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
        match (outcome, call.expect_fail) {
            (Ok(()), None) => None,
            (Ok(()), Some(class)) => {
                self.problems.push(Problem {
                    line: call.line,
                    message: format!(
                        "{}: `{}` succeeded but must fail with {}",
                        rank_name(self.rank, self.nranks),
                        call.text,
                        class.name()
                    ),
                });
                None
            }
            (Err(error), expected) => {
                let class = error.class();
                let matched = expected.is_some() && class == expected;
                self.failed_calls.push(FailedCall {
                    line: call.line,
                    call: call.text.clone(),
                    class,
                    message: error.to_string(),
                    expected: matched,
                });
                if !matched {
                    let wanted = match expected {
                        Some(wanted) => format!(" (expected {})", wanted.name()),
                        None => String::new(),
                    };
                    self.problems.push(Problem {
                        line: call.line,
                        message: format!(
                            "{}: `{}` failed: {error}{wanted}",
                            rank_name(self.rank, self.nranks),
                            call.text
                        ),
                    });
                }
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

    async fn perform(&mut self, call: &Call) -> Result<(), Error> {
        match call {
            Call::Store { loc, values } => {
                let dtype = self.dtypes[loc.window];
                let window = self.window(loc.window)?;
                let offsets = element_offsets(loc, dtype)?;
                let region = match &loc.region {
                    Some(region) => Some(self.regions.address(region)?),
                    None => None,
                };
                for (offset, value) in offsets.iter().zip(values) {
                    let bytes = encode_all(dtype, std::slice::from_ref(value))?;
                    match region {
                        // by address, inside a region this rank attached
                        Some(address) => {
                            window.store_at::<u8>(address.saturating_add(*offset), &bytes)?
                        }
                        None => window.store_bytes(*offset, &bytes)?,
                    }
                }
                Ok(())
            }
            Call::Load { loc, var } => {
                let value = self.private(loc)?;
                let dtype = self.dtypes[loc.window];
                self.vars
                    .insert(var.clone(), VarSlot::Ready(VarValue { dtype, value }));
                Ok(())
            }
            Call::Op(spec) => {
                let dtype = self.dtypes[spec.loc.window];
                let window = self.window(spec.loc.window)?;
                let (kind, sends) = match spec.kind {
                    OpCall::Put => (OpKind::Put, true),
                    OpCall::Get => (OpKind::Get, false),
                    OpCall::Acc(op) => (OpKind::Accumulate(op), true),
                    OpCall::GetAcc(op) => (OpKind::GetAccumulate(op), op != Op::NoOp),
                    OpCall::Fop(op) => (OpKind::FetchAndOp(op), op != Op::NoOp),
                    OpCall::Cas => (OpKind::CompareAndSwap, true),
                };
                let data = if sends {
                    origin_data(dtype, &spec.values, spec.origin.as_deref())?
                } else {
                    Bytes::new()
                };
                let compare = match &spec.compare {
                    Some(value) => Bytes::from(encode_all(dtype, std::slice::from_ref(value))?),
                    None => Bytes::new(),
                };
                let op = OpSpec {
                    kind,
                    dtype,
                    disp: self.regions.disp(&spec.loc, dtype.size() as u64)?,
                    layout: spec.loc.shape.layout(),
                    data,
                    compare,
                };
                let target = self.in_window(spec.loc.window, spec.target)?;
                let pending = window.issue(target, op, spec.request_based)?;
                if let Some(var) = &spec.var {
                    let fetched = pending.clone().value();
                    let reply = match (&spec.kind, &spec.origin) {
                        // a get's origin layout says where its values land (`unpack`)
                        (OpCall::Get, Some(origin)) => {
                            let origin = origin.clone();
                            async move { unpacked(dtype, &origin, &fetched.await?) }.boxed()
                        }
                        _ => fetched.boxed(),
                    };
                    self.vars.insert(
                        var.clone(),
                        VarSlot::Pending {
                            dtype,
                            list: returns_list(spec.kind, &spec.loc, spec.origin.as_deref()),
                            reply: reply.shared(),
                        },
                    );
                }
                if let Some(name) = &spec.request {
                    // rget-like requests complete when the data is here; rput and racc at once
                    // (the origin's values were copied when the call returned)
                    let request = match &spec.var {
                        Some(_) => Request::pending(pending),
                        None => Request::complete(Bytes::new()),
                    };
                    let slot = RequestSlot {
                        request,
                        var: spec.var.clone(),
                    };
                    self.requests.insert(name.clone(), slot);
                    self.null_requests.remove(name);
                }
                Ok(())
            }
            // a null request (one no longer active) is waited for at once
            Call::WaitReq(name) if self.request_null(name) => Ok(()),
            Call::WaitReq(name) => {
                let slot = self.take_request(name)?;
                self.finish_request(slot).await
            }
            Call::TestReq { request, var } => {
                let flag =
                    self.request_null(request) || self.active_request(request)?.complete_now();
                if flag && !self.request_null(request) {
                    let slot = self.take_request(request)?;
                    self.finish_request(slot).await?;
                }
                self.set_var(var, Datatype::Bool, Value::Bool(flag));
                Ok(())
            }
            Call::TestAll { requests, var } => {
                let active: Vec<String> = self
                    .active_of(requests)?
                    .into_iter()
                    .map(|(_, name)| name)
                    .collect();
                let mut all = true;
                for name in &active {
                    // every request is tested, so each makes progress
                    all &= self.active_request(name)?.complete_now();
                }
                if all {
                    self.finish_requests(&active).await?;
                }
                self.set_var(var, Datatype::Bool, Value::Bool(all));
                Ok(())
            }
            Call::WaitAll(requests) => {
                let active: Vec<String> = self
                    .active_of(requests)?
                    .into_iter()
                    .map(|(_, name)| name)
                    .collect();
                self.finish_requests(&active).await
            }
            Call::WaitAny { requests, var } => {
                let active = self.active_of(requests)?;
                let mut slots = Vec::with_capacity(active.len());
                let mut vars = Vec::with_capacity(active.len());
                for (_, name) in &active {
                    let slot = self.take_request(name)?;
                    slots.push(slot.request);
                    vars.push(slot.var);
                }
                let Some(done) = wait_any(slots).await else {
                    // every handle null: MPI's index is MPI_UNDEFINED
                    self.set_var(var, Datatype::I64, Value::Int(-1));
                    return Ok(());
                };
                // the others stay active under their names
                let mut rest = done.rest.into_iter();
                for (position, ((_, name), request_var)) in active.iter().zip(&mut vars).enumerate()
                {
                    if position != done.index {
                        if let Some(request) = rest.next() {
                            let var = request_var.take();
                            self.requests
                                .insert(name.clone(), RequestSlot { request, var });
                            self.null_requests.remove(name);
                        }
                    }
                }
                // the position in the list given, nulls included
                let index = i128::try_from(active[done.index].0).unwrap_or(i128::MAX);
                self.set_var(var, Datatype::I64, Value::Int(index));
                let finished = vars[done.index].take();
                self.request_finished(finished, done.outcome)
            }
            Call::FreeReq(name) => self.take_request(name).map(|slot| slot.request.free()),
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
            } => {
                let bytes = count.saturating_mul(self.dtypes[*window].size() as u64);
                let address = self.window(*window)?.attach(bytes).await?;
                self.regions.table().insert(name.clone(), address);
                Ok(())
            }
            Call::DetachRegion { window, name } => {
                let address = self.regions.table().get(name).copied();
                let address = address.ok_or_else(|| {
                    Error::Config(format!(
                        "region {name} has no address: its attach did not succeed"
                    ))
                })?;
                self.window(*window)?.detach(address).await
            }
        }
    }
}

/// A dynamic window has no memory at creation and disp_unit 1 (its displacements are
/// addresses, as `MPI_Win_create_dynamic`'s); the others expose their elements, disp_unit the
/// element's size.
fn spec_of(decl: &WindowDecl) -> WindowSpec {
    let dynamic = decl.flavor == FlavorDecl::Dynamic;
    let unit = if dynamic { 1 } else { decl.dtype.size() as u64 };
    WindowSpec {
        name: decl.name.clone(),
        flavor: match decl.flavor {
            FlavorDecl::Create => Flavor::Create,
            FlavorDecl::Allocate => Flavor::Allocate,
            FlavorDecl::Dynamic => Flavor::Dynamic,
        },
        model: match decl.model {
            Model::Separate => MemoryModel::Separate,
            Model::Unified => MemoryModel::Unified,
        },
        sizes: decl.sizes.iter().map(|count| count * unit).collect(),
        disp_units: vec![unit as u32; decl.sizes.len()],
        info: with_element_type(&decl.info, decl.dtype),
        group: decl.group.clone(),
    }
}

/// A window declared `by=ranks`: every rank of its group (the world without one) creates it
/// (`MPI_Win_allocate`, collective over the group), each in a session of its own that ends
/// once the window exists; the run's sessions then open it like any other.
async fn created_by_ranks(
    config: &RunConfig,
    tokens: &[String],
    decl: &WindowDecl,
) -> Result<onesided_client::WindowDesc, Error> {
    let spec = spec_of(decl);
    let info: Vec<(&str, &str)> = spec
        .info
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    let group = spec.group.clone().unwrap_or_default();
    // world ranks, in window-rank order
    let members: Vec<usize> = if group.is_empty() {
        (0..tokens.len()).collect()
    } else {
        group.iter().map(|&rank| rank as usize).collect()
    };
    let mut sessions = Vec::new();
    for &member in &members {
        let token = tokens.get(member).ok_or_else(|| {
            Error::Protocol(format!("rank {member} of the group is outside the world"))
        })?;
        sessions.push(Session::attach(&config.endpoint, token).await?);
    }
    let created = futures::future::join_all(sessions.iter().enumerate().map(|(rank, session)| {
        let call = NewWindow::new(&spec.name, spec.sizes[rank], spec.disp_units[rank])
            .flavor(spec.flavor)
            .model(spec.model)
            .info(&info)
            .group(&group);
        async move { session.create(&call).await }
    }))
    .await;
    let mut desc = None;
    for window in created {
        let window = window?;
        desc.get_or_insert_with(|| window.desc().clone());
    }
    for session in sessions {
        session.close().await?;
    }
    desc.ok_or_else(|| Error::Protocol("a world without ranks created a window".into()))
}

/// The declared info keys, plus the window's element type unless the file names one itself.
fn with_element_type(info: &[(String, String)], dtype: Datatype) -> Vec<(String, String)> {
    let mut info = info.to_vec();
    if !info.iter().any(|(key, _)| key == ELEMENT_TYPE_KEY) {
        info.push((ELEMENT_TYPE_KEY.to_string(), dtype.name().to_string()));
    }
    info
}

/// Runs the scenario once (run number `run`) in a fresh world that is deleted afterwards.
///
/// # Errors
/// [`RunError`] when the run cannot be set up; a scenario that fails gives an `Ok` report
/// whose [`RunReport::ok`] is false.
pub async fn run(
    scenario: &Scenario,
    config: &RunConfig,
    run: usize,
) -> Result<RunReport, RunError> {
    let admin = Admin::connect(&config.endpoint, &config.admin_token).await?;
    let world = format!("{}-{run}", config.prefix);
    let created = admin.create_world(&world, scenario.ranks).await?;
    let outcome = run_in_world(scenario, config, run, &admin, &world, &created.tokens).await;
    if let Err(error) = admin.delete_world(&world).await {
        tracing::warn!(%world, %error, "could not delete the run's world");
    }
    outcome
}

async fn run_in_world(
    scenario: &Scenario,
    config: &RunConfig,
    run: usize,
    admin: &Admin,
    world: &str,
    tokens: &[String],
) -> Result<RunReport, RunError> {
    let mut windows = Vec::new();
    for decl in &scenario.windows {
        let desc = if decl.by_ranks {
            created_by_ranks(config, tokens, decl).await?
        } else {
            admin.create_window(world, &spec_of(decl)).await?
        };
        windows.push(CreatedWindow {
            name: desc.name,
            id: desc.id,
        });
    }
    let opened: Vec<(String, Datatype)> = scenario
        .windows
        .iter()
        .map(|decl| (decl.name.clone(), decl.dtype))
        .collect();
    let mut executors = Vec::new();
    let regions = Regions::default();
    for token in tokens {
        let mut executor = RankExecutor::attach(&config.endpoint, token, opened.clone()).await?;
        executor.regions = regions.clone();
        executors.push(executor);
    }
    // When every rank is attached at the end, the runner closes the run with one more world
    // barrier, so that the reads of `expect public` come after every rank's last access in the
    // audit log's happens-before (otherwise `audit check` would see them as races).
    let alive_at_end = (0..scenario.ranks).all(|rank| {
        scenario
            .steps
            .iter()
            .filter_map(|step| match step {
                Step::Call(call) if call.rank == rank => match call.call {
                    Call::Crash => Some(false),
                    Call::Attach => Some(true),
                    _ => None,
                },
                _ => None,
            })
            .next_back()
            .unwrap_or(true)
    });
    let progress: Vec<Arc<AtomicUsize>> = (0..scenario.ranks)
        .map(|_| Arc::new(AtomicUsize::new(0)))
        .collect();
    let mut tasks = Vec::new();
    for (rank, mut executor) in executors.into_iter().enumerate() {
        let owned: Vec<OwnedAction> = scenario
            .steps
            .iter()
            .filter_map(|step| match step {
                Step::Barrier { line } => Some(OwnedAction::Barrier(*line)),
                Step::Call(call) if call.rank == rank as u32 => {
                    Some(OwnedAction::Call(call.clone()))
                }
                Step::Call(_) => None,
            })
            .collect();
        let at = Arc::clone(&progress[rank]);
        tasks.push(tokio::spawn(async move {
            for action in &owned {
                match action {
                    OwnedAction::Barrier(line) => {
                        at.store(*line, Ordering::Relaxed);
                        if let Err(error) = executor.barrier().await {
                            executor.problems.push(Problem {
                                line: *line,
                                message: format!(
                                    "{}: barrier failed: {error}",
                                    rank_name(rank as u32, executor.nranks)
                                ),
                            });
                        }
                    }
                    OwnedAction::Call(call) => {
                        at.store(call.line, Ordering::Relaxed);
                        executor.execute(call).await;
                    }
                }
            }
            if alive_at_end {
                // A rank that crashed and attached again failed the barrier instances that were
                // entered while it was gone, for every rank alike; a rank that comes later
                // fails through them at once, so retrying meets at the first instance that
                // did not fail. The pause only spaces the retries of a rank that is early.
                let this = &executor;
                let closing = (move || this.barrier())
                    .retry(
                        ConstantBuilder::default()
                            .with_delay(Duration::from_millis(10))
                            .with_max_times(500),
                    )
                    .when(|error| error.class() == Some(ErrorClass::ProcFailed))
                    .await;
                if let Err(error) = closing {
                    executor.problems.push(Problem {
                        line: 0,
                        message: format!(
                            "{}: the closing barrier failed: {error}",
                            rank_name(rank as u32, executor.nranks)
                        ),
                    });
                }
            }
            executor
        }));
    }
    let mut problems = Vec::new();
    let mut finished: Vec<Option<RankExecutor>> = Vec::new();
    let deadline = tokio::time::Instant::now() + config.timeout;
    for (rank, task) in tasks.into_iter().enumerate() {
        let abort = task.abort_handle();
        match tokio::time::timeout_at(deadline, task).await {
            Ok(Ok(executor)) => finished.push(Some(executor)),
            Ok(Err(join)) => {
                problems.push(Problem {
                    line: 0,
                    message: format!("rank {rank} stopped: {join}"),
                });
                finished.push(None);
            }
            Err(_) => {
                abort.abort();
                let line = progress[rank].load(Ordering::Relaxed);
                problems.push(Problem {
                    line,
                    message: format!(
                        "rank {rank} did not finish within {:?}: stuck at line {line}",
                        config.timeout
                    ),
                });
                finished.push(None);
            }
        }
    }
    let mut ranks = Vec::new();
    for (rank, executor) in finished.iter_mut().enumerate() {
        let report = match executor {
            Some(executor) => {
                problems.extend(executor.problems.iter().cloned());
                RankReport {
                    rank: rank as u32,
                    vars: executor.vars(),
                    failed_calls: executor.failed_calls.clone(),
                }
            }
            None => RankReport {
                rank: rank as u32,
                vars: BTreeMap::new(),
                failed_calls: Vec::new(),
            },
        };
        ranks.push(report);
    }
    // every session ends cleanly: the last loads and stores, and the client's own audit rows
    // when it writes them itself, are in the log before the run reports. Before the
    // expectations are read: `expect public` attaches a fresh session of the rank, which
    // ends any session of it still attached (a rank has one live session)
    for (rank, executor) in finished.iter_mut().enumerate() {
        let Some(session) = executor
            .as_mut()
            .and_then(|executor| executor.session.take())
        else {
            continue;
        };
        if let Err(error) = session.close().await {
            problems.push(Problem {
                line: 0,
                message: format!("rank {rank}: closing the session failed: {error}"),
            });
        }
    }
    let mut expectations = Vec::new();
    for expectation in &scenario.expectations {
        expectations.push(
            check(
                expectation,
                scenario,
                config,
                tokens,
                &regions,
                &mut finished,
            )
            .await,
        );
    }
    problems.sort_by_key(|problem| problem.line);
    Ok(RunReport {
        run,
        world: world.to_string(),
        ranks,
        expectations,
        problems,
        windows,
    })
}

/// One line a rank executes, owned by the rank's task.
#[derive(Debug)]
enum OwnedAction {
    Call(Box<RankCall>),
    Barrier(usize),
}

async fn check(
    expectation: &Expectation,
    scenario: &Scenario,
    config: &RunConfig,
    tokens: &[String],
    regions: &Regions,
    executors: &mut [Option<RankExecutor>],
) -> ExpectationOutcome {
    let read: Result<Observed, String> = match &expectation.subject {
        Subject::Var { rank, var } => match executors.get_mut(*rank as usize) {
            Some(Some(executor)) => executor.var(var).map(|value| value.value),
            _ => Err(format!("rank {rank} did not finish")),
        },
        Subject::Private { rank, loc } => match executors.get(*rank as usize) {
            Some(Some(executor)) => executor.inspect(loc).map_err(|e| e.to_string()),
            _ => Err(format!("rank {rank} did not finish")),
        },
        Subject::Public { rank, loc } => {
            let reading = read_public(scenario, config, tokens, regions, *rank, loc);
            match tokio::time::timeout(config.timeout, reading).await {
                Ok(result) => result.map_err(|e| format!("reading the public copy failed: {e}")),
                Err(_) => Err("reading the public copy timed out (is a lock still held?)".into()),
            }
        }
    };
    match read {
        Ok(value) => ExpectationOutcome {
            line: expectation.line,
            text: expectation.text.clone(),
            held: expectation.accepted.contains(&value),
            observed: Some(value),
            note: None,
        },
        Err(note) => ExpectationOutcome {
            line: expectation.line,
            text: expectation.text.clone(),
            held: false,
            observed: None,
            note: Some(note),
        },
    }
}

/// Reads `rank`'s public copy with a fresh session of that rank: lock shared, get, unlock
/// (on a `no_locks` window, which refuses locks, the copy the session opened the window with).
async fn read_public(
    scenario: &Scenario,
    config: &RunConfig,
    tokens: &[String],
    regions: &Regions,
    rank: u32,
    loc: &Loc,
) -> Result<Observed, Error> {
    let decl = &scenario.windows[loc.window];
    let disp = regions.disp(loc, decl.dtype.size() as u64)?;
    let session = Session::attach(&config.endpoint, &tokens[rank as usize]).await?;
    let window = session.window(&decl.name).await?;
    if window.desc().info.no_locks {
        // no epoch may be opened on the window by lock (`MPI_ERR_RMA_SYNC`), and the runner's
        // look is no epoch of the program anyway: the fresh session's private copy started as
        // the rank's public copy, so read that, recording nothing
        let offset = match &loc.region {
            Some(region) => {
                let address = regions.address(region)?;
                // a detached region is no longer part of the window, as a get would find
                if !window.regions().iter().any(|&(base, _)| base == address) {
                    return Err(RmaError::new(
                        ErrorClass::RmaRange,
                        format!("region {} is not attached at rank {rank}", region.name),
                    )
                    .into());
                }
                address.saturating_sub(DYNAMIC_BASE)
            }
            None => 0,
        };
        let mut bytes = Vec::new();
        for (at, len) in byte_runs(loc, decl.dtype)? {
            bytes.extend(window.inspect_bytes(offset.saturating_add(at), len)?);
        }
        drop(window);
        session.close().await?;
        return observed(decl.dtype, loc.shape.is_list(), &bytes);
    }
    // the file names world ranks; a window over part of the world numbers them in its group
    let rank = window.rank();
    window
        .lock(onesided_core::epoch::LockType::Shared, rank, 0)
        .await?;
    let spec = OpSpec {
        kind: OpKind::Get,
        dtype: decl.dtype,
        disp,
        layout: loc.shape.layout(),
        data: Bytes::new(),
        compare: Bytes::new(),
    };
    let issued = window.issue(rank, spec, false);
    let unlocked = window.unlock(rank).await;
    let bytes = issued?.value().await?;
    unlocked?;
    drop(window);
    session.close().await?;
    observed(decl.dtype, loc.shape.is_list(), &bytes)
}
