//! Channels and credentials: where the server is ([`Endpoint`], with TLS for `https://`) and
//! the bearer token every call carries.
//!
//! Owns: `Endpoint` (a URL or a cluster's comma-separated URLs tried in order, the CA to trust
//! or the system's roots, `connect_timeout`, `timeout` with the keep-alive pings it turns on,
//! and the busy-poll budget), opening a channel, `CallLimit` (the client's own deadline for
//! calls that need only the server), and `Bearer`, the interceptor that adds the token and a
//! session's `Claim`, whose Debug form never shows the token. Must not: decide which calls get
//! a deadline (callers choose `CallLimit` or none), follow a redirect (the session does), log
//! or print a token, or interpret the server's answers.

use std::future::Future;
use std::path::Path;
use std::time::Duration;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint as TonicEndpoint};
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

/// Where the server is and how to trust it: a URL, `http://` for plain HTTP/2 or `https://`
/// for TLS, and for TLS the CA certificates that vouch for the server (the system's trusted
/// roots when none are given).
///
/// Every way to connect ([`Admin::connect`](crate::Admin::connect),
/// [`Session::attach`](crate::Session::attach), [`Session::attach_as`](crate::Session::attach_as),
/// [`Session::builder`](crate::Session::builder), [`Audit::connect`](crate::Audit::connect))
/// takes an `Endpoint` or a plain URL.
///
/// ```no_run
/// # async fn demo(ca_pem: Vec<u8>) -> onesided_client::Result<()> {
/// use onesided_client::{Admin, Endpoint};
/// let server = Endpoint::new("https://rma.example.org:50051").ca_pem(ca_pem)?;
/// let admin = Admin::connect(&server, "admin-token").await?;
/// # let _ = admin; Ok(()) }
/// ```
///
/// Without [`Endpoint::connect_timeout`] and [`Endpoint::timeout`] nothing is bounded by the
/// client: a server that never answers keeps a call waiting.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    url: String,
    /// Further addresses of the same cluster, tried in order when `url` cannot be reached.
    alternatives: Vec<String>,
    ca_pem: Option<Vec<u8>>,
    connect_timeout: Option<Duration>,
    timeout: Option<Duration>,
    busy_poll: Option<Duration>,
}

/// How long the server may stay silent on a connection with calls in flight before it is
/// pinged (only with [`Endpoint::timeout`]; a shorter timeout pings sooner).
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("alternatives", &self.alternatives)
            .field("ca", &self.ca_pem.is_some())
            .field("connect_timeout", &self.connect_timeout)
            .field("timeout", &self.timeout)
            .field("busy_poll", &self.busy_poll)
            .finish()
    }
}

impl Endpoint {
    /// The server at `url`, trusted (for `https://`) through the system's roots. Several
    /// addresses of one cluster's nodes, separated by commas (`http://a:1,http://b:2`), are
    /// tried in order until one answers; a session whose world another node serves follows
    /// that node's redirect by itself.
    pub fn new(url: impl Into<String>) -> Self {
        let url: String = url.into();
        let mut urls = url
            .split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
            .map(str::to_string);
        let first = urls.next().unwrap_or_default();
        Endpoint {
            url: first,
            alternatives: urls.collect(),
            ca_pem: None,
            connect_timeout: None,
            timeout: None,
            busy_poll: None,
        }
    }

    /// Gives up connecting after `limit`: the TCP connection, the TLS handshake and the
    /// server's first answer together (a health check, which a server the kernel accepts
    /// connections for while it is paused never answers): [`Error::Connect`] naming the limit
    /// (or [`Endpoint::timeout`], when shorter, for the answer).
    pub fn connect_timeout(self, limit: Duration) -> Self {
        Endpoint {
            connect_timeout: Some(limit),
            ..self
        }
    }

    /// Bounds what needs only the server by `limit`: every [`Admin`](crate::Admin) call,
    /// every [`Audit`](crate::Audit) call but the events stream (of which only the opening),
    /// and attaching a session, up to the server's greeting. Past it the call fails with
    /// DEADLINE_EXCEEDED (the call's stream is reset, so the server stops working on it).
    ///
    /// What legitimately waits for other ranks or for the future — a lock request queued
    /// behind another rank's lock, a fence, a barrier, a large transfer, following the audit
    /// log — is not cut: instead, once the server has sent nothing for 10 s (or `limit`, if
    /// shorter), it is pinged (HTTP/2 keep-alive), and a server that does not answer within
    /// `limit` is taken for dead: the connection closes and the calls on it fail.
    pub fn timeout(self, limit: Duration) -> Self {
        Endpoint {
            timeout: Some(limit),
            ..self
        }
    }

    /// Sessions attached through this endpoint busy-poll for `budget` after each message
    /// ([`crate::SessionBuilder::busy_poll`], which overrides it; zero turns it off).
    pub fn busy_poll(self, budget: Duration) -> Self {
        Endpoint {
            busy_poll: (!budget.is_zero()).then_some(budget.min(crate::busy_poll::MAX_BUDGET)),
            ..self
        }
    }

    /// The busy-polling budget of sessions attached through this endpoint.
    pub(crate) fn busy_poll_budget(&self) -> Option<Duration> {
        self.busy_poll
    }

    /// The bound of calls that need only the server.
    pub(crate) fn call_limit(&self) -> CallLimit {
        CallLimit(self.timeout)
    }

    /// How a stream that outlives any deadline names a server gone silent.
    pub(crate) fn silence(&self) -> Silence {
        Silence {
            url: self.url.clone(),
            limit: self.timeout,
        }
    }

    /// Trusts the CA certificates in `pem` (one or more PEM certificates) for this server,
    /// and only them: the system's roots are then not consulted.
    ///
    /// # Errors
    /// [`Error::Config`] when `pem` holds no certificate or one that does not parse, or the
    /// URL is not `https://`.
    pub fn ca_pem(self, pem: impl Into<Vec<u8>>) -> Result<Self> {
        let pem = pem.into();
        if !self.is_tls() {
            return Err(Error::Config(format!(
                "a CA certificate is only for https:// URLs, not {}",
                self.url
            )));
        }
        let certificates = CertificateDer::pem_slice_iter(&pem)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::Config(format!("the CA certificate does not parse: {e}")))?;
        if certificates.is_empty() {
            return Err(Error::Config("the CA file holds no PEM certificate".into()));
        }
        Ok(Endpoint {
            ca_pem: Some(pem),
            ..self
        })
    }

    /// [`Endpoint::ca_pem`] with the PEM file at `path`.
    ///
    /// # Errors
    /// [`Error::Config`] when the file cannot be read, or as [`Endpoint::ca_pem`].
    pub fn ca_file(self, path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let pem = std::fs::read(path).map_err(|e| {
            Error::Config(format!(
                "cannot read the CA certificate {}: {e}",
                path.display()
            ))
        })?;
        self.ca_pem(pem)
            .map_err(|e| Error::Config(format!("{}: {e}", path.display())))
    }

    /// The URL (the first, when several were given).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every address, the first one first.
    pub fn urls(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.url.as_str()).chain(self.alternatives.iter().map(String::as_str))
    }

    /// The same settings at `url` alone (a redirect's target).
    pub(crate) fn at(&self, url: &str) -> Endpoint {
        Endpoint {
            url: url.to_string(),
            alternatives: Vec::new(),
            ..self.clone()
        }
    }

    /// Whether the URL asks for TLS (`https://`).
    pub fn is_tls(&self) -> bool {
        self.url
            .get(..8)
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
    }

    fn error(&self, message: impl Into<String>) -> Error {
        Error::Connect {
            url: self.url.clone(),
            message: message.into(),
        }
    }

    /// The TLS settings of an `https://` URL.
    fn tls(&self) -> ClientTlsConfig {
        match &self.ca_pem {
            Some(pem) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
            None => ClientTlsConfig::new().with_native_roots(),
        }
    }

    /// Opens a channel to the first address that answers.
    ///
    /// # Errors
    /// [`Error::Connect`] when the URL or the CA is bad, nobody answers, or the TLS handshake
    /// fails (a server certificate no trusted CA signed, a plain server behind `https://`);
    /// with several addresses, the last one's.
    pub(crate) async fn channel(&self) -> Result<Channel> {
        let mut failed = match self.channel_to().await {
            Ok(channel) => return Ok(channel),
            Err(error) => error,
        };
        for url in &self.alternatives {
            match self.at(url).channel_to().await {
                Ok(channel) => return Ok(channel),
                Err(error) => failed = error,
            }
        }
        Err(failed)
    }

    /// A channel whose every call carries the admin `token` (as `Admin` and `Audit` connect),
    /// with the bound this endpoint sets on each call.
    ///
    /// # Errors
    /// UNAUTHENTICATED for a token that cannot be a header (before connecting); else as
    /// [`Endpoint::channel`].
    pub(crate) async fn admin_channel(&self, token: &str) -> Result<(AdminChannel, CallLimit)> {
        let bearer = Bearer::new(token)?;
        let channel = self.channel().await?;
        Ok((InterceptedService::new(channel, bearer), self.call_limit()))
    }

    /// Opens a channel to `url` alone; with a connect timeout, one the server answered on.
    async fn channel_to(&self) -> Result<Channel> {
        let scheme = self.url.split_once("://").map(|(scheme, _)| scheme);
        if !scheme.is_some_and(|scheme| {
            scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")
        }) {
            return Err(Error::Config(format!(
                "the server address {:?} must start with http:// or https:// \
                 (http://127.0.0.1:50051, say)",
                self.url
            )));
        }
        let mut endpoint = TonicEndpoint::from_shared(self.url.clone())
            .map_err(|e| self.error(causes(&e)))?
            .tcp_nodelay(true);
        if self.is_tls() {
            endpoint = endpoint
                .tls_config(self.tls())
                .map_err(|e| self.error(causes(&e)))?;
        }
        if let Some(limit) = self.timeout {
            endpoint = endpoint
                .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL.min(limit))
                .keep_alive_timeout(limit);
        }
        let connecting = endpoint.connect();
        let Some(limit) = self.connect_timeout else {
            return connecting.await.map_err(|e| self.error(causes(&e)));
        };
        let began = tokio::time::Instant::now();
        let channel = tokio::time::timeout(limit, connecting)
            .await
            .map_err(|_| self.error(format!("no connection within {}", seconds(limit))))?
            .map_err(|e| self.error(causes(&e)))?;
        // the TCP handshake is the kernel's and HTTP/2's does not wait for the server: only
        // an answer shows that something serves there (any answer; the health service needs
        // no token)
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
        let check = health.check(tonic_health::pb::HealthCheckRequest::default());
        // bounded by the call limit too: it is the first answer the server owes
        let answer = self.timeout.map_or(limit, |timeout| timeout.min(limit));
        match tokio::time::timeout_at(began + answer, check).await {
            Err(_) => Err(self.error(format!(
                "no answer within {}: the connection was accepted but nothing answered on it \
                 (a paused or overloaded server, or not a gRPC server)",
                seconds(answer)
            ))),
            // the connection failed under the check (a TLS server behind an http:// URL):
            // said as a call's failure would say it
            Ok(Err(status)) if std::error::Error::source(&status).is_some() => {
                Err(self.error(match Error::from(status) {
                    Error::Status { message, .. } => message,
                    other => other.to_string(),
                }))
            }
            Ok(_) => Ok(channel),
        }
    }
}

impl From<&str> for Endpoint {
    fn from(url: &str) -> Self {
        Endpoint::new(url)
    }
}

impl From<String> for Endpoint {
    fn from(url: String) -> Self {
        Endpoint::new(url)
    }
}

impl From<&String> for Endpoint {
    fn from(url: &String) -> Self {
        Endpoint::new(url.as_str())
    }
}

impl From<&Endpoint> for Endpoint {
    fn from(endpoint: &Endpoint) -> Self {
        endpoint.clone()
    }
}

/// A channel whose calls carry the admin token ([`Endpoint::admin_channel`]).
pub(crate) type AdminChannel = InterceptedService<Channel, Bearer>;

/// How long a call that needs only the server may take ([`Endpoint::timeout`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CallLimit(Option<Duration>);

impl CallLimit {
    /// Awaits `call` for at most the limit. The bound is the client's own: a server that
    /// never answers would never say DEADLINE_EXCEEDED either; dropping the call at the limit
    /// resets its HTTP/2 stream, which stops the server's work on it.
    ///
    /// # Errors
    /// The call's own error, or DEADLINE_EXCEEDED past the limit.
    pub(crate) async fn bound<T, E: Into<Error>>(
        self,
        call: impl Future<Output = std::result::Result<T, E>>,
    ) -> Result<T> {
        let Some(limit) = self.0 else {
            return call.await.map_err(Into::into);
        };
        match tokio::time::timeout(limit, call).await {
            Ok(answer) => answer.map_err(Into::into),
            Err(_) => Err(Error::Status {
                code: tonic::Code::DeadlineExceeded,
                message: format!("no answer from the server within {}", seconds(limit)),
            }),
        }
    }
}

/// How a long-lived stream (a follower of the log) names its connection's end: with
/// [`Endpoint::timeout`] the connection is pinged, and a server that stops answering ends it,
/// which reaches the stream only as a broken connection.
#[derive(Clone, Debug)]
pub(crate) struct Silence {
    url: String,
    limit: Option<Duration>,
}

impl Silence {
    /// `status` as the client's error, a connection that broke under keep-alive pings named
    /// as the silent server it may be.
    pub(crate) fn name(&self, status: Status) -> Error {
        match self.limit {
            Some(limit) if crate::error::from_transport(&status) => Error::Status {
                code: tonic::Code::Unavailable,
                message: format!(
                    "no answer from {} within {} (its keep-alive ping went unanswered), or the \
                     connection broke: {}",
                    self.url,
                    seconds(limit),
                    status.message()
                ),
            },
            _ => Error::from(status),
        }
    }
}

/// A duration as people write it on a command line: `10s`, `0.5s`.
fn seconds(limit: Duration) -> String {
    format!("{}s", limit.as_secs_f64())
}

/// An error and its sources, one after the other (tonic's transport error says only
/// "transport error" itself; why is in its sources).
fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(error) = next {
        let text = error.to_string();
        // some layers repeat their source's text in their own
        if !parts.last().is_some_and(|last| last.contains(&text)) {
            parts.push(text);
        }
        next = error.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::{Bearer, Claim};

    /// SECURITY.md: the client's `Bearer` leaves its token out of its Debug form (`Admin`,
    /// `Audit` and `Session` hold one, and tonic prints only its type name there).
    #[test]
    fn bearers_debug_form_holds_no_token() {
        let token = "bearer-secret-token-0123456789";
        let claim = Claim {
            world: Some("w".into()),
            rank: Some(1),
        };
        for bearer in [
            Bearer::new(token).unwrap(),
            Bearer::new(token).unwrap().claiming(&claim).unwrap(),
        ] {
            let shown = format!("{bearer:?} {bearer:#?}");
            assert!(shown.starts_with("Bearer("), "{shown}");
            assert!(!shown.contains(token), "{shown}");
        }
    }

    /// A token that cannot be a header is refused before anything connects: the same answer
    /// whether or not a server listens at the address (nothing listens on port 1 here).
    #[tokio::test]
    async fn an_admin_token_that_cannot_be_a_header_is_refused_before_connecting() {
        let (url, token) = ("http://127.0.0.1:1", "a\ntoken");
        let refusals = [
            crate::Admin::connect(url, token).await.map(drop),
            crate::Audit::connect(url, token).await.map(drop),
        ];
        for refused in refusals {
            let refused = refused.unwrap_err();
            assert!(
                matches!(
                    &refused,
                    crate::Error::Status { code: tonic::Code::Unauthenticated, message }
                        if message == "token must be printable ASCII"
                ),
                "{refused:?}"
            );
        }
    }
}
