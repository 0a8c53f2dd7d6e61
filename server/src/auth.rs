//! Authentication: `authorization: Bearer <token>` metadata, checked by interceptors before a
//! request is decoded, so a call without valid credentials is UNAUTHENTICATED whatever it holds.
//!
//! Owns: token extraction and comparison. Must not: log tokens.

use std::sync::Arc;

use onesided_proto::AUTHORIZATION;
use tonic::{Request, Status};

use crate::registry::{Membership, Registry};

fn bearer<T>(request: &Request<T>) -> Result<&str, Status> {
    let value = request
        .metadata()
        .get(AUTHORIZATION)
        .ok_or_else(|| Status::unauthenticated("missing authorization metadata"))?;
    let text = value
        .to_str()
        .map_err(|_| Status::unauthenticated("authorization metadata is not text"))?;
    text.strip_prefix("Bearer ")
        .ok_or_else(|| Status::unauthenticated("authorization must be `Bearer <token>`"))
}

/// Compares in time independent of where the strings differ.
fn same(left: &str, right: &str) -> bool {
    left.len() == right.len()
        && left
            .bytes()
            .zip(right.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// Interceptor of the Admin service.
#[derive(Clone)]
pub struct AdminAuth {
    token: Arc<str>,
}

impl std::fmt::Debug for AdminAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminAuth { .. }")
    }
}

impl AdminAuth {
    /// Checks requests against `token`.
    pub fn new(token: &str) -> Self {
        AdminAuth {
            token: Arc::from(token),
        }
    }
}

impl tonic::service::Interceptor for AdminAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        if same(bearer(&request)?, &self.token) {
            Ok(request)
        } else {
            Err(Status::unauthenticated("invalid admin token"))
        }
    }
}

/// Interceptor of the Rma service: resolves the rank token to its [`Membership`].
#[derive(Clone, Debug)]
pub struct RankAuth {
    registry: Arc<Registry>,
}

impl RankAuth {
    /// Resolves tokens in `registry`.
    pub fn new(registry: Arc<Registry>) -> Self {
        RankAuth { registry }
    }
}

impl tonic::service::Interceptor for RankAuth {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let member = self
            .registry
            .authenticate(bearer(&request)?)
            .ok_or_else(|| Status::unauthenticated("invalid rank token"))?;
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
