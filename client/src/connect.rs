//! Channels and credentials.

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

use crate::error::{Error, Result};

/// Adds `authorization: Bearer <token>` to every request, and the session's [`Claim`] if it
/// makes one. Never prints the token.
#[derive(Clone)]
pub struct Bearer(
    MetadataValue<Ascii>,
    Vec<(&'static str, MetadataValue<Ascii>)>,
);

/// Who a session says it is. The server refuses a token of another world or rank with
/// PERMISSION_DENIED, instead of acting as whichever rank the token belongs to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claim {
    /// The world the session means to act in.
    pub world: Option<String>,
    /// The rank it means to act as.
    pub rank: Option<u32>,
}

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer(<redacted>)")
    }
}

impl Bearer {
    /// Credentials for `token`.
    ///
    /// # Errors
    /// A token that is not printable ASCII.
    pub fn new(token: &str) -> Result<Self> {
        let value = format!("Bearer {token}")
            .parse()
            .map_err(|_| Error::Status {
                code: tonic::Code::Unauthenticated,
                message: "token must be printable ASCII".into(),
            })?;
        Ok(Bearer(value, Vec::new()))
    }

    /// The same credentials, sent with `claim`.
    ///
    /// # Errors
    /// A world name that is not printable ASCII.
    pub fn claiming(mut self, claim: &Claim) -> Result<Self> {
        if let Some(world) = &claim.world {
            let value = world.parse().map_err(|_| Error::Status {
                code: tonic::Code::InvalidArgument,
                message: format!("world name {world:?} must be printable ASCII"),
            })?;
            self.1.push((onesided_proto::CLAIM_WORLD, value));
        }
        if let Some(rank) = claim.rank {
            self.1
                .push((onesided_proto::CLAIM_RANK, MetadataValue::from(rank)));
        }
        Ok(self)
    }
}

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let metadata = request.metadata_mut();
        metadata.insert(onesided_proto::AUTHORIZATION, self.0.clone());
        for (key, value) in &self.1 {
            metadata.insert(*key, value.clone());
        }
        Ok(request)
    }
}

/// Opens a channel to `url`.
///
/// # Errors
/// [`Error::Connect`] when the URL is bad or nobody answers.
pub async fn channel(url: &str) -> Result<Channel> {
    let connect_error = |message: String| Error::Connect {
        url: url.to_string(),
        message,
    };
    Endpoint::from_shared(url.to_string())
        .map_err(|e| connect_error(e.to_string()))?
        .tcp_nodelay(true)
        .connect()
        .await
        .map_err(|e| connect_error(format!("{e}")))
}
