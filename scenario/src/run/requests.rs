//! The requests of a rank: `rput … as r` and the others, and the calls that test, wait for and
//! free them (`test_req`, `wait_req`, `test_all`, `wait_all`, `wait_any`, `free_req`).
//!
//! Owns: the active requests by name, the names that are `MPI_REQUEST_NULL` now (waited for,
//! tested complete or freed: a wait returns at once, a test says true), the variable a
//! request's value defines (failed when the request fails), and `MPI_ERR_REQUEST` for a name
//! that is neither. Must not: decide when a request completes (the client library's
//! [`Request`] does, as MPI's test and wait do), or send anything but through it.

use bytes::Bytes;
use onesided_core::datatype::Value;
use onesided_core::Datatype;

use super::super::parse::request_not_active;
use super::executor::VarSlot;
use super::RankExecutor;
use onesided_client::{wait_any, Error, Request};

/// A request of the scenario: the client library's [`Request`] (which decides completion, as
/// MPI's test and wait do), and the variable its value defines, if any.
#[derive(Debug)]
pub(super) struct RequestSlot {
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

fn request_gone(name: &str) -> Error {
    let error = request_not_active(name);
    Error::Mpi {
        class: error.class,
        code: tonic::Code::InvalidArgument,
        message: error.message,
        unchanged: false,
    }
}

impl RankExecutor {
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

    /// The names of the active requests of `names`, in order (see [`Self::active_of`]).
    fn active_names(&self, names: &[String]) -> Result<Vec<String>, Error> {
        Ok(self
            .active_of(names)?
            .into_iter()
            .map(|(_, name)| name)
            .collect())
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

    /// `wait_req name`: waits for the request; a null one at once.
    pub(super) async fn wait_req(&mut self, name: &str) -> Result<(), Error> {
        // a null request (one no longer active) is waited for at once
        if self.request_null(name) {
            return Ok(());
        }
        let slot = self.take_request(name)?;
        self.finish_request(slot).await
    }

    /// `test_req request -> var`: whether the request is complete (a null one is); a complete
    /// one is finished and null from now on.
    pub(super) async fn test_req(&mut self, request: &str, var: &str) -> Result<(), Error> {
        let flag = self.request_null(request) || self.active_request(request)?.complete_now();
        if flag && !self.request_null(request) {
            let slot = self.take_request(request)?;
            self.finish_request(slot).await?;
        }
        self.set_var(var, Datatype::Bool, Value::Bool(flag));
        Ok(())
    }

    /// `test_all requests -> var`: whether every request is complete (each is tested, so each
    /// makes progress); when all are, they are finished.
    pub(super) async fn test_all(&mut self, requests: &[String], var: &str) -> Result<(), Error> {
        let active = self.active_names(requests)?;
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

    /// `wait_all requests`: waits for every active request, in order.
    pub(super) async fn wait_all(&mut self, requests: &[String]) -> Result<(), Error> {
        let active = self.active_names(requests)?;
        self.finish_requests(&active).await
    }

    /// `wait_any requests -> var`: waits for the first request to complete; `var` is its
    /// position in the list (-1 when every handle is null), the others stay active.
    pub(super) async fn wait_any(&mut self, requests: &[String], var: &str) -> Result<(), Error> {
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
        for (position, ((_, name), request_var)) in active.iter().zip(&mut vars).enumerate() {
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
    /// Makes `request` active under `name`; `var`, if any, is defined when it completes.
    pub(super) fn activate(&mut self, name: &str, request: Request<Bytes>, var: Option<String>) {
        self.requests
            .insert(name.to_string(), RequestSlot { request, var });
        self.null_requests.remove(name);
    }

    /// `free_req name`: frees the request; its name is null from now on.
    pub(super) fn free_req(&mut self, name: &str) -> Result<(), Error> {
        self.take_request(name).map(|slot| slot.request.free())
    }
}
