//! Deferred calls: operations and lazy lock requests wait here and travel with the next call
//! that is sent, as one batch message; an accumulate that repeats the one queued just before it
//! may join it (`coalesce`).
//!
//! Owns: the queue of deferred calls (`Deferred`) and when it is sent by itself (`DEFER_BYTES`,
//! `DEFER_CALLS`, `flush_deferred`), `defer`, and `coalesce`: folding an identical accumulate
//! into the queued one where core's `folds_exactly` allows, both callers answered by the one
//! reply. Must not: send anything but through the session's `write`, under the lock that orders
//! sends (nothing overtakes a deferred call), fold anything core does not say folds exactly, or
//! fold across an intervening call of this origin.

use super::*;

/// Calls whose MPI counterparts may be enabled as late as the closing synchronization
/// (operations, lazy lock requests): they wait here and travel with the next call that is sent,
/// as one batch message.
#[derive(Debug, Default)]
pub(super) struct Deferred {
    pub(super) calls: Vec<ClientMessage>,
    pub(super) bytes: usize,
}

/// Deferred calls are sent once they carry this many bytes of data, so bulk transfers keep
/// flowing.
const DEFER_BYTES: usize = 64 * 1024;

/// Deferred calls are sent once there are this many.
const DEFER_CALLS: usize = 256;

fn data_bytes(call: &Call) -> usize {
    match call {
        Call::Op(op) => op.data.len() + op.compare.len(),
        _ => 0,
    }
}

/// Folds the accumulate `next` into `queued` when it is the same operation on the same elements
/// (window, target, displacement, layout, datatype, op, fencing token; neither request-based)
/// and core says the op folds exactly on that datatype ([`onesided_core::reduce::folds_exactly`]):
/// applying `a ⊕ b` once is then the same as applying `a` and then `b`, nothing of this origin
/// comes between them, and accumulates of other origins interleaving between the two are only
/// one of the orders MPI allows. Returns the id of the call `next` joined.
fn coalesce(queued: &mut ClientMessage, next: &onesided_proto::v1::RmaOp) -> Option<u64> {
    use onesided_core::Op;
    use onesided_proto::v1::OpKind;
    let Some(Call::Op(op)) = &mut queued.call else {
        return None;
    };
    let same = op.kind == OpKind::Accumulate as i32
        && next.kind == op.kind
        && next.window == op.window
        && next.target == op.target
        && next.disp == op.disp
        && next.layout == op.layout
        && next.datatype == op.datatype
        && next.op == op.op
        && next.token == op.token
        && !op.request_based
        && !next.request_based
        && next.data.len() == op.data.len()
        && op.data.len() <= DEFER_BYTES;
    if !same {
        return None;
    }
    let dtype = onesided_core::Datatype::from_code(op.datatype)?;
    let folded = Op::from_code(op.op)?;
    if !onesided_core::reduce::folds_exactly(folded, dtype) {
        return None;
    }
    let mut combined = op.data.to_vec();
    onesided_core::reduce::reduce(folded, dtype, &mut combined, &next.data).ok()?;
    op.data = bytes::Bytes::from(combined);
    Some(queued.id)
}

impl Session {
    /// Queues `call` to travel with the next call sent (or sends it when enough is queued).
    /// An accumulate that only repeats the one queued just before it, where the rules allow
    /// ([`coalesce`]), joins it instead: one operation travels, and both callers get its answer.
    pub(crate) fn defer(&self, call: Call) -> ReplyFuture {
        let mut deferred = lock(&self.inner.deferred);
        let link = self.link();
        if let Call::Op(op) = &call {
            if let Some(joined) = deferred
                .calls
                .last_mut()
                .and_then(|last| coalesce(last, op))
            {
                return link.join(joined);
            }
        }
        let bytes = data_bytes(&call);
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        match link.register(id) {
            Ok(reply) => {
                deferred.calls.push(ClientMessage {
                    id,
                    call: Some(call),
                });
                deferred.bytes += bytes;
                if deferred.bytes >= DEFER_BYTES || deferred.calls.len() >= DEFER_CALLS {
                    self.write(&link, &mut deferred, None);
                }
                reply
            }
            Err(ended) => Box::pin(async move { Err(ended) }),
        }
    }

    /// Sends every deferred call now.
    pub(crate) fn flush_deferred(&self) {
        let mut deferred = lock(&self.inner.deferred);
        self.write(&self.link(), &mut deferred, None);
    }
}
