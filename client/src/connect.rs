//! Channels and credentials.

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

use crate::error::{Error, Result};

/// Adds `authorization: Bearer <token>` to every request. Never prints the token.
#[derive(Clone)]
pub struct Bearer(MetadataValue<Ascii>);

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
        Ok(Bearer(value))
    }
}

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert(onesided_proto::AUTHORIZATION, self.0.clone());
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
