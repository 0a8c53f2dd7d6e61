//! Requests of the request-based operations (`MPI_Rput`, `MPI_Rget`, `MPI_Raccumulate`,
//! `MPI_Rget_accumulate`) and the calls on them: `MPI_Test`, `MPI_Testall`, `MPI_Wait`,
//! `MPI_Waitall`, `MPI_Waitany` and `MPI_Request_free`.
//!
//! A request is local to its process, as in MPI: nothing travels for a test or a wait. It
//! completes when the operation is *locally* complete — at once for rput and raccumulate (the
//! values were copied when the call returned), when the data is here for rget and
//! rget_accumulate. Remote completion is still the business of the flush, unlock or epoch end
//! that completes the operation. Testing makes progress as MPI's test does: an operation still
//! waiting to travel with the epoch's closing call is sent. Operations that travel in one
//! message (those issued since the last call that sent anything) are answered in one reply, so
//! their requests complete together: an rget issued beside one that waits for a lock completes
//! when that one does.
//!
//! Ownership does what MPI asks of the caller: a waited or freed request is gone, so it cannot
//! be used again; a tested-complete one still gives its value to [`Request::wait`], at once.
//!
//! Owns: `Request` and its local completion, `test`, `wait`, `free`, and `test_all`,
//! `wait_all` and `wait_any` over several. Must not: send a message of its own (a test only
//! sends operations still deferred, through the session), or stand for remote completion: a
//! flush, an unlock or the epoch's end completes the operation at the target.

use std::future::poll_fn;
use std::task::Poll;

use futures::FutureExt;

use super::Pending;
use crate::error::Result;

/// A request-based operation's request: [`Request::test`] is `MPI_Test`, [`Request::wait`]
/// `MPI_Wait`, [`Request::free`] `MPI_Request_free`; [`test_all`], [`wait_all`] and
/// [`wait_any`] take several.
#[derive(Debug)]
pub struct Request<T> {
    inner: Inner<T>,
}

#[derive(Debug)]
enum Inner<T> {
    /// Locally complete at once (rput, raccumulate copied the origin buffer).
    Complete(T),
    /// Complete when the data arrived.
    Pending(Pending<T>),
}

impl<T> Request<T> {
    /// A request complete from the start (what `rput` and `raccumulate` return: the origin's
    /// values were copied when the call returned).
    pub fn complete(value: T) -> Self {
        Request {
            inner: Inner::Complete(value),
        }
    }

    /// A request that completes with `pending` (what `rget` and the fetching calls return).
    pub fn pending(pending: Pending<T>) -> Self {
        Request {
            inner: Inner::Pending(pending),
        }
    }

    /// `MPI_Test`: whether the request is complete, without waiting (an rget's data is then
    /// here, and [`Request::wait`] returns it at once).
    ///
    /// # Errors
    /// The operation's failure, once it is known (as `MPI_Test` returns the error of a request
    /// that completed with one).
    pub fn test(&self) -> Result<bool> {
        match &self.inner {
            Inner::Complete(_) => Ok(true),
            Inner::Pending(pending) => match pending.outcome_now() {
                None => Ok(false),
                Some(outcome) => outcome.map(|_| true),
            },
        }
    }

    /// `MPI_Request_free`: gives the request up. The operation still travels and completes,
    /// with the call that completes its epoch's operations (as any operation does); its value
    /// is dropped.
    pub fn free(self) {}
}

impl<T: Send + 'static> Request<T> {
    /// `MPI_Wait`: local completion (for rget-like requests, the data is here).
    ///
    /// # Errors
    /// The operation's failure.
    pub async fn wait(self) -> Result<T> {
        match self.inner {
            Inner::Complete(value) => Ok(value),
            Inner::Pending(pending) => pending.value().await,
        }
    }
}

/// `MPI_Testall`: whether every request is complete, without waiting (true for none). As in
/// MPI, the requests stay as they are either way; [`wait_all`] then returns their values at
/// once.
///
/// # Errors
/// The failure of the first request (in order) known to have failed.
pub fn test_all<T>(requests: &[Request<T>]) -> Result<bool> {
    let mut all = true;
    for request in requests {
        // every request is tested, so each makes progress
        all &= request.test()?;
    }
    Ok(all)
}

/// `MPI_Waitall`: waits for every request; their values in the order given.
///
/// # Errors
/// The failure of the first request (in order) that failed; the others were still waited for.
pub async fn wait_all<T: Send + 'static>(requests: Vec<Request<T>>) -> Result<Vec<T>> {
    let outcomes = futures::future::join_all(requests.into_iter().map(Request::wait)).await;
    outcomes.into_iter().collect()
}

/// What [`wait_any`] found: the request at `index` completed with `outcome`; `rest` are the
/// others, in their order, still active.
#[derive(Debug)]
pub struct AnyComplete<T> {
    /// Its position in the list given.
    pub index: usize,
    /// Its value, or the operation's failure.
    pub outcome: Result<T>,
    /// The requests still active, in the order given, without it.
    pub rest: Vec<Request<T>>,
}

/// `MPI_Waitany`: waits until one of `requests` is complete, the first in order when several
/// are. `None` for an empty list (MPI's `MPI_UNDEFINED` index).
pub async fn wait_any<T: Send + 'static>(requests: Vec<Request<T>>) -> Option<AnyComplete<T>> {
    if requests.is_empty() {
        return None;
    }
    for request in &requests {
        if let Inner::Pending(pending) = &request.inner {
            pending.session.flush_deferred();
        }
    }
    // one clone of each shared reply, kept across polls: a clone dropped while pending takes
    // its waker with it
    let mut replies: Vec<Option<_>> = requests
        .iter()
        .map(|request| match &request.inner {
            Inner::Complete(_) => None,
            Inner::Pending(pending) => Some(pending.reply.clone()),
        })
        .collect();
    let index = poll_fn(|cx| {
        for (index, reply) in replies.iter_mut().enumerate() {
            // the first ready one ends the wait, so no reply is polled after it was ready
            let ready = reply
                .as_mut()
                .is_none_or(|reply| reply.poll_unpin(cx).is_ready());
            if ready {
                return Poll::Ready(index);
            }
        }
        Poll::Pending
    })
    .await;
    drop(replies);
    let mut rest = requests;
    // complete: its shared reply stays ready, so this does not wait
    let outcome = rest.remove(index).wait().await;
    Some(AnyComplete {
        index,
        outcome,
        rest,
    })
}
