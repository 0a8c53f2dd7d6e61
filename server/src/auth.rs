//! Authentication and identity: `authorization: Bearer <token>` metadata, checked by
//! interceptors before a request is decoded, so a call without valid credentials is
//! UNAUTHENTICATED whatever it holds.
//!
//! A valid token used where it does not belong is PERMISSION_DENIED: a rank token on the Admin
//! or Audit service, the admin token on the Rma service, and a rank token whose session claims
//! (`x-onesided-world`, `x-onesided-rank` metadata, both optional) to be another world or rank.
//! These refusals are of the caller, not of an MPI call: they carry no MPI error class, except
//! a rank claim that is not a number (INVALID_ARGUMENT, `MPI_ERR_RANK`). A credential or claim
//! sent twice is refused, never taken first-wins: two `authorization` entries are
//! UNAUTHENTICATED, a claim made twice INVALID_ARGUMENT.
//!
//! Owns: token extraction and comparison, claims. Must not: log tokens.

use std::sync::Arc;

use onesided_core::error::quoted;
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::{status_from_rma, AUTHORIZATION, CLAIM_RANK, CLAIM_WORLD};
use subtle::ConstantTimeEq;
use tonic::{Request, Status};

use crate::registry::{Membership, Registry};

/// The bearer token of `request` (UNAUTHENTICATED when there is none, or an empty one).
pub(crate) fn bearer<T>(request: &Request<T>) -> Result<&str, Status> {
    let value = single(request, AUTHORIZATION)
        .map_err(|()| {
            Status::unauthenticated("more than one authorization metadata entry: send one token")
        })?
        .ok_or_else(|| Status::unauthenticated("missing authorization metadata"))?;
    let text = value
        .to_str()
        .map_err(|_| Status::unauthenticated("authorization metadata is not text"))?;
    let token = text
        .strip_prefix("Bearer ")
        .ok_or_else(|| Status::unauthenticated("authorization must be `Bearer <token>`"))?;
    if token.is_empty() {
        // an empty credential is never a match, whatever is configured
        return Err(Status::unauthenticated("the bearer token is empty"));
    }
    Ok(token)
}

/// The one value of metadata `key`, if any; `Err` when it comes more than once (HTTP/2 lets a
/// client repeat any header, and taking the first of two credentials or claims would let a
/// proxy that checks the last one be fooled).
fn single<'a, T>(
    request: &'a Request<T>,
    key: &str,
) -> Result<Option<&'a tonic::metadata::MetadataValue<tonic::metadata::Ascii>>, ()> {
    let mut values = request.metadata().get_all(key).iter();
    let first = values.next();
    match values.next() {
        Some(_) => Err(()),
        None => Ok(first),
    }
}

/// Compares in time independent of where the strings differ (`subtle`). Empty strings match
/// nothing.
pub(crate) fn same(left: &str, right: &str) -> bool {
    !left.is_empty() && bool::from(left.as_bytes().ct_eq(right.as_bytes()))
}

/// Interceptor of the Admin and Audit services.
#[derive(Clone)]
pub struct AdminAuth {
    token: Arc<str>,
    registry: Arc<Registry>,
}

impl std::fmt::Debug for AdminAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminAuth { .. }")
    }
}

impl AdminAuth {
    /// Checks requests against `token`; rank tokens of `registry` are known but refused.
    pub fn new(token: &str, registry: Arc<Registry>) -> Self {
        AdminAuth {
            token: Arc::from(token),
            registry,
        }
    }
}

impl tonic::service::Interceptor for AdminAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let presented = bearer(&request)?;
        if same(presented, &self.token) {
            Ok(request)
        } else if self.registry.authenticate(presented).is_some() {
            Err(Status::permission_denied(
                "a rank token may not call the admin or audit service",
            ))
        } else {
            Err(Status::unauthenticated("invalid admin token"))
        }
    }
}

/// Interceptor of the Rma service: resolves the rank token to its [`Membership`] and checks
/// the session's claims against it.
#[derive(Clone)]
pub struct RankAuth {
    registry: Arc<Registry>,
    admin_token: Arc<str>,
}

impl std::fmt::Debug for RankAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RankAuth { .. }")
    }
}

impl RankAuth {
    /// Resolves tokens in `registry`; `admin_token` is known but refused.
    pub fn new(registry: Arc<Registry>, admin_token: &str) -> Self {
        RankAuth {
            registry,
            admin_token: Arc::from(admin_token),
        }
    }
}

/// The text of an optional metadata entry; a claim made twice is INVALID_ARGUMENT with
/// `class` (`MPI_ERR_RANK` for the rank's), whether or not the two agree.
fn claim<'a, T>(
    request: &'a Request<T>,
    key: &str,
    class: ErrorClass,
) -> Result<Option<&'a str>, Status> {
    single(request, key)
        .map_err(|()| {
            status_from_rma(&RmaError::new(
                class,
                format!("{key} metadata comes more than once: a session makes one claim"),
            ))
        })?
        .map(|value| {
            value.to_str().map_err(|_| {
                status_from_rma(&RmaError::new(
                    ErrorClass::Arg,
                    format!("{key} metadata is not text"),
                ))
            })
        })
        .transpose()
}

/// A rank token this node does not know, let through in a cluster: the session resolves it
/// in the store (its world may be served by another node, or not taken up here yet).
#[derive(Clone, Copy, Debug)]
pub struct Unresolved(pub [u8; 32]);

/// Checks the session's claims (`x-onesided-world`, `x-onesided-rank`) against `member`.
///
/// # Errors
/// PERMISSION_DENIED for a claim of another world or rank; INVALID_ARGUMENT (`MPI_ERR_RANK`)
/// for a rank that is not a number or a rank claimed twice, (`MPI_ERR_ARG`) for a world claimed
/// twice.
pub fn check_claims<T>(request: &Request<T>, member: &Membership) -> Result<(), Status> {
    if let Some(world) = claim(request, CLAIM_WORLD, ErrorClass::Arg)? {
        if world != member.world {
            return Err(Status::permission_denied(format!(
                "the token is not of world {}",
                quoted(world)
            )));
        }
    }
    if let Some(text) = claim(request, CLAIM_RANK, ErrorClass::Rank)? {
        let rank: u32 = text.parse().map_err(|_| {
            status_from_rma(&RmaError::new(
                ErrorClass::Rank,
                format!("{CLAIM_RANK} {} is not a rank", quoted(text)),
            ))
        })?;
        if rank != member.rank {
            return Err(Status::permission_denied(format!(
                "the token belongs to rank {}, not rank {rank}",
                member.rank
            )));
        }
    }
    Ok(())
}

impl tonic::service::Interceptor for RankAuth {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let presented = bearer(&request)?;
        let Some(member) = self.registry.authenticate(presented) else {
            if same(presented, &self.admin_token) {
                return Err(Status::permission_denied(
                    "the admin token is not a rank's: attach with a rank token",
                ));
            }
            if self.registry.placement().others_may_know() {
                let hash = crate::registry::token_hash(presented);
                request.extensions_mut().insert(Unresolved(hash));
                return Ok(request);
            }
            return Err(Status::unauthenticated("invalid rank token"));
        };
        check_claims(&request, &member)?;
        request.extensions_mut().insert(member);
        Ok(request)
    }
}

/// The membership the interceptor resolved.
///
/// # Errors
/// UNAUTHENTICATED when the interceptor did not run.
pub fn membership<T>(request: &Request<T>) -> Result<Membership, Status> {
    request
        .extensions()
        .get::<Membership>()
        .cloned()
        .ok_or_else(|| Status::unauthenticated("no rank credentials"))
}
