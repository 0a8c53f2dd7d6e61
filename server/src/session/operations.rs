//! Communication calls: put, get, accumulate, get_accumulate, fetch_and_op, compare_and_swap
//! and their request-based forms, one admitted `Op` plan each.
//!
//! Owns: `Issued`, what travels to the target with an admitted operation (its `AccessTag`,
//! fencing token, validated `TargetOp` and byte runs), and the order of its sending: the
//! `op_issued` event when the audit records, the lazy lock request if it must travel first,
//! then the operation into the target actor's inbox, answered by that actor. Must not: validate
//! the operation or choose its tag (admission did), apply it or touch window bytes (the
//! target's engine does, through core's `apply`), or wait for its answer.

use bytes::Bytes;
use onesided_core::epoch::AccessTag;
use onesided_core::window::{TargetAccess, TargetOp};
use onesided_core::RmaError;
use onesided_proto::admit;

use super::{access, lock_request, OnWindow, Session};
use crate::actor::AccessItem;
use crate::audit::Durability;

/// What travels to the target with an admitted operation.
pub(super) struct Issued {
    /// When the target may apply it.
    pub(super) tag: AccessTag,
    /// The fencing token the origin believes it holds (0: whatever it holds).
    pub(super) token: u64,
    /// The validated operation.
    pub(super) op: TargetOp<Bytes>,
    /// Its byte runs at the target.
    pub(super) access: TargetAccess,
}

impl Session {
    /// An operation: recorded as issued (when the audit records), the lazy lock request first
    /// if one must travel, then the operation, answered by the target (the session's pending
    /// budget was taken before admission and travels in the reply).
    pub(super) async fn op(
        &mut self,
        on: OnWindow,
        target_rank: u32,
        request: Option<admit::Request>,
        operation: Issued,
    ) -> Result<(), RmaError> {
        let origin = self.origin(on.me);
        let target = &on.entry.ranks[target_rank as usize];
        if self.registry.audit().durability() != Durability::Off {
            let issued = admit::op_issued(on.id, target_rank, &operation.op, &operation.access);
            self.log(on.window, issued, None).await;
        }
        if let Some(request) = request {
            access(target, origin, lock_request(request, None)).await?;
        }
        let Issued {
            tag,
            token,
            op,
            access: runs,
        } = operation;
        let item = AccessItem::Op {
            op_id: on.id,
            incarnation: self.incarnation,
            tag,
            token,
            op,
            access: runs,
            reply: on.reply,
        };
        access(target, origin, item).await
    }
}
