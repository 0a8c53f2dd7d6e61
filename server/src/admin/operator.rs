//! An operator's actions (Admin `EndSession`, `RevokeLocks` and `DeleteWorld`): checked
//! against the registry, recorded as `admin` events, then carried out as a departure, a
//! revocation at the window's actors, or the world's deletion.
//!
//! Owns: the checks of these calls (which world, rank, window, session, lock) with their
//! statuses, and the order every action keeps — checked, recorded, carried out, committed,
//! answered. Must not: decide what a departure or a revocation does (the session and core's
//! target engine do), or be reached except through [`super::AdminService`], which forwards a
//! call about another node's world first.

use std::sync::Arc;

use onesided_core::audit::Event;
use onesided_core::error::quoted;
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::status_with_code;
use tonic::{Code, Status};

use crate::audit::{Durability, Pending};
use crate::registry::{Registry, RegistryError, WindowEntry};

/// What the audit log and the revoked lock's refusals say of an operator's revocation.
pub const REVOKED: &str = "revoked by an operator";

/// Who asked: the admin token (the one operator credential) and where the call came from.
pub fn who(from: Option<String>) -> String {
    match from {
        Some(address) => format!("admin from {address}"),
        None => "admin".to_string(),
    }
}

fn refused(code: Code, class: ErrorClass, why: String) -> Status {
    status_with_code(code, &RmaError::unchanged(class, why))
}

/// Whether `world` exists and has `rank`.
fn in_world(registry: &Registry, world: &str, rank: u32) -> Result<(), Status> {
    let Some(ranks) = registry.world_ranks(world) else {
        return Err(super::status(RegistryError::NoWorld(world.to_string())));
    };
    if rank >= ranks {
        return Err(refused(
            Code::InvalidArgument,
            ErrorClass::Rank,
            format!(
                "world {} has ranks 0 to {}, not {rank}",
                quoted(world),
                ranks - 1
            ),
        ));
    }
    Ok(())
}

/// The incarnation of the live session of `rank` of `world`.
fn live_session(registry: &Registry, world: &str, rank: u32) -> Result<u64, Status> {
    registry.live_incarnation(world, rank).ok_or_else(|| {
        refused(
            Code::FailedPrecondition,
            ErrorClass::Arg,
            format!(
                "rank {rank} of world {} has no session (it is not attached): nothing changed",
                quoted(world)
            ),
        )
    })
}

/// Refuses an action the audit log cannot record now: nothing may happen that it cannot take.
fn recordable(registry: &Registry) -> Result<(), Status> {
    if registry.audit().is_down() {
        return Err(onesided_proto::status_from_rma(&RmaError::unchanged(
            ErrorClass::Io,
            "the audit store is unavailable, so the action cannot be recorded; nothing \
             changed, try again",
        )));
    }
    Ok(())
}

/// Records `action` of `by` on session `incarnation`, at window rank `rank` of each window.
async fn record(
    registry: &Registry,
    windows: &[(u64, u32)],
    incarnation: u64,
    action: &str,
    by: &str,
) {
    let audit = registry.audit();
    if audit.durability() == Durability::Off {
        return;
    }
    let events = windows
        .iter()
        .map(|&(window, rank)| Pending {
            window,
            rank,
            incarnation,
            at_ns: audit.now(),
            event: Event::Admin {
                action: action.to_string(),
                by: by.to_string(),
            },
        })
        .collect();
    audit.submit(events, Vec::new()).await;
}

/// Admin `EndSession`: the live session of `rank` of `world` ends as a lapsed lease ends it,
/// recorded first on every window of the world that has the rank. Returns the ended session's
/// incarnation once its departure is handled.
pub async fn end_session(
    registry: Arc<Registry>,
    world: String,
    rank: u32,
    by: String,
) -> Result<u64, Status> {
    in_world(&registry, &world, rank)?;
    let incarnation = live_session(&registry, &world, rank)?;
    recordable(&registry)?;
    let windows: Vec<(u64, u32)> = registry
        .list_windows(&world)
        .map_err(super::status)?
        .iter()
        .filter_map(|desc| Some((desc.id, desc.rank_of(rank)?)))
        .collect();
    // in a task of its own: a call dropped half-way does not leave the action recorded and
    // not carried out
    let carried_out = tokio::spawn(async move {
        record(&registry, &windows, incarnation, "end_session", &by).await;
        let Some(mut ended) = registry.end_by_operator(&world, rank, incarnation) else {
            return Err(refused(
                Code::FailedPrecondition,
                ErrorClass::Arg,
                format!("rank {rank}'s session {incarnation} ended meanwhile"),
            ));
        };
        let bound = registry.lease_ttl() * 2;
        let handled = tokio::time::timeout(bound, ended.wait_for(|&ended| ended))
            .await
            .is_ok();
        if handled {
            Ok(incarnation)
        } else {
            Err(Status::deadline_exceeded(format!(
                "rank {rank}'s session was told to end, but its departure was not handled \
                 within {} ms",
                bound.as_millis()
            )))
        }
    });
    carried_out
        .await
        .map_err(|_| Status::unavailable("the server is stopping"))?
}

/// Admin `DeleteWorld`: recorded first as an `admin` event `delete_world` at rank 0 of each
/// of the world's windows (whose logs end there), then the world, its tokens and its windows
/// are gone. A world without windows has no log to record it in: its deletion is only traced.
pub async fn delete_world(
    registry: Arc<Registry>,
    world: String,
    by: String,
) -> Result<(), Status> {
    if registry.world_ranks(&world).is_none() {
        return Err(super::status(RegistryError::NoWorld(world)));
    }
    recordable(&registry)?;
    let windows: Vec<(u64, u32)> = registry
        .list_windows(&world)
        .map_err(super::status)?
        .iter()
        .map(|desc| (desc.id, 0))
        .collect();
    // in a task of its own: a call dropped half-way does not leave the deletion recorded and
    // not carried out
    tokio::spawn(async move {
        record(&registry, &windows, 0, "delete_world", &by).await;
        // committed before the world goes and the call is answered: a deletion answers
        // without waiting for its windows' actors or the writer
        registry.audit().flush().await;
        registry.delete_world(&world).await.map_err(super::status)
    })
    .await
    .map_err(|_| Status::unavailable("the server is stopping"))?
}

/// Admin `RevokeLocks`: the locks the live session of world rank `rank` holds at the targets
/// of `window` are taken away, recorded first. Returns the session's incarnation and the
/// targets where a lock was revoked.
pub async fn revoke_locks(
    registry: Arc<Registry>,
    world: String,
    entry: Arc<WindowEntry>,
    rank: u32,
    by: String,
) -> Result<(u64, Vec<u32>), Status> {
    in_world(&registry, &world, rank)?;
    let name = &entry.desc.name;
    let Some(me) = entry.desc.rank_of(rank) else {
        return Err(refused(
            Code::InvalidArgument,
            ErrorClass::Rank,
            format!("rank {rank} is not in window {}'s group", quoted(name)),
        ));
    };
    let incarnation = live_session(&registry, &world, rank)?;
    let mut holding = false;
    for target in &entry.ranks {
        let view = target
            .inspect()
            .await
            .map_err(|error| onesided_proto::status_from_rma(&error))?;
        holding |= view
            .holders
            .iter()
            .any(|holder| holder.origin == me && holder.incarnation == incarnation);
    }
    if !holding {
        return Err(refused(
            Code::FailedPrecondition,
            ErrorClass::RmaSync,
            format!(
                "rank {rank} holds no lock on window {}: nothing to revoke",
                quoted(name)
            ),
        ));
    }
    recordable(&registry)?;
    let carried_out = tokio::spawn(async move {
        record(
            &registry,
            &[(entry.desc.id, me)],
            incarnation,
            "revoke_locks",
            &by,
        )
        .await;
        let mut targets = Vec::new();
        for (index, target) in entry.ranks.iter().enumerate() {
            // a target that stopped meanwhile (the window was freed) revoked nothing
            if let Ok(Some(_)) = target.revoke(me, incarnation, REVOKED).await {
                targets.push(index as u32);
            }
        }
        // the revocations are in the log before the answer says they happened
        registry.audit().flush().await;
        (incarnation, targets)
    });
    carried_out
        .await
        .map_err(|_| Status::unavailable("the server is stopping"))
}
