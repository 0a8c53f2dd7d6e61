//! A rank's request-based operations at the origin: `MPI_Wait`/`MPI_Waitall`,
//! `MPI_Test`/`MPI_Testall` and `MPI_Waitany` on what its `rput`, `rget` and the others
//! made, and which handles are `MPI_REQUEST_NULL` by now.
//!
//! Owns: when a request is complete at the origin (answered, or bringing no data back), which
//! are null (waited for, tested complete, returned by a `wait_any`, freed), what a rank waits
//! for in a wait, and the position a `wait_any` returns (the first complete handle of its list
//! once one is, -1 when every handle is null). Must not: decide when an operation is answered (the
//! target engines and the schedule do).

use std::collections::BTreeSet;

use super::{Rank, World};

/// The requests a rank waits for and those that are null.
#[derive(Debug, Default)]
pub(super) struct Requests {
    /// Waiting for these (`Action::WaitRequests`) to complete.
    waited: Vec<usize>,
    /// Waiting in a `wait_any`: its action and its handles.
    any: Option<(usize, Vec<Option<usize>>)>,
    /// The operations whose handles are null now.
    null: BTreeSet<usize>,
}

impl Rank {
    /// Whether it waits for a request-based operation: one it waits for whose data has not
    /// come back, or any of a `wait_any`'s.
    pub(super) fn awaits_requests(&self) -> bool {
        self.requests.any.is_some() || !self.complete(&self.requests.waited)
    }

    /// Whether each of these request-based operations is complete at the origin: answered,
    /// or bringing no data back.
    fn complete(&self, calls: &[usize]) -> bool {
        let pending = |call| self.outstanding.get(call);
        let data = |&(_, _, returned): &(u64, u32, u64)| returned > 0;
        !calls.iter().any(|call| pending(call).is_some_and(data))
    }

    /// The handles of `calls` that are not null.
    fn active(&self, calls: &[usize]) -> Vec<usize> {
        let null = &self.requests.null;
        calls
            .iter()
            .copied()
            .filter(|c| !null.contains(c))
            .collect()
    }

    /// `MPI_Waitall`: waits for each active handle; all are null once it returns.
    pub(super) fn wait_all(&mut self, calls: Vec<usize>) {
        let active = self.active(&calls);
        self.requests.null.extend(&active);
        self.requests.waited = active;
    }

    /// `MPI_Testall`: whether every active handle is complete; when so, they are null.
    pub(super) fn test_all(&mut self, calls: &[usize]) -> bool {
        let active = self.active(calls);
        let flag = self.complete(&active);
        if flag {
            self.requests.null.extend(active);
        }
        flag
    }

    /// `MPI_Request_free` of the operation `call`: whether its handle was active (it is null
    /// from now on either way).
    pub(super) fn free_request(&mut self, call: usize) -> bool {
        self.requests.null.insert(call)
    }

    /// `MPI_Waitany` at action `action` of the program: it waits from now on (until
    /// [`World::wait_any_returns`] says it returned).
    pub(super) fn wait_any(&mut self, action: usize, calls: Vec<Option<usize>>) {
        self.requests.any = Some((action, calls));
    }

    /// The position the `wait_any` it waits in returns now, if it returns: the first active
    /// handle that is complete, or -1 when none is active. The handle it returns is null
    /// from now on.
    fn any_returns(&mut self) -> Option<(usize, i64)> {
        let (action, calls) = self.requests.any.as_ref()?;
        let active = |call: &Option<usize>| call.filter(|c| !self.requests.null.contains(c));
        let mut handles = calls.iter().map(active).enumerate();
        let position = if handles.clone().all(|(_, call)| call.is_none()) {
            -1
        } else {
            let done = handles.find(|(_, call)| call.is_some_and(|c| self.complete(&[c])))?;
            self.requests.null.extend(done.1);
            i64::try_from(done.0).unwrap_or(i64::MAX)
        };
        let action = *action;
        self.requests.any = None;
        Some((action, position))
    }
}

impl World {
    /// Rank `rank` returns from the `wait_any` it waits in when one of its handles is
    /// complete (or none is active); what it returned is kept in [`super::Run::indices`].
    pub(super) fn wait_any_returns(&mut self, rank: u32) {
        if let Some((action, position)) = self.ranks[rank as usize].any_returns() {
            self.run.indices.push((rank, action, position));
        }
    }
}
