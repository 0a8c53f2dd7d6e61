//! The server's plain HTTP/1 endpoints: `--metrics-listen` serves `GET /metrics` alone;
//! `--http-listen` serves `/metrics` and the web view ([`crate::web`]) on one listener.
//!
//! Owns: the listeners, the accept loop and each connection's lifetime (stopped after the
//! drain; open connections finish their request, and a live stream of the web view ends when
//! the server stops), at most [`HTTP_CONNECTIONS`] of them at once, each given
//! [`HTTP_HEADER_TIMEOUT`] to send its request's headers. Must not: decide what a page or a scrape shows (that is
//! [`crate::metrics`] and [`crate::web`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt;
use tokio_util::sync::CancellationToken;

use crate::limits::{HTTP_CONNECTIONS, HTTP_HEADER_TIMEOUT};
use crate::metrics::Metrics;
use crate::web::WebView;

/// The address a request's connection came from (in its extensions): who asked, for the web
/// view's audited admin actions.
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub SocketAddr);

/// What every HTTP answer carries: a whole body, or a stream (the web view's live updates).
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A whole body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    http_body_util::Full::new(bytes.into()).boxed_unsync()
}

/// Where an HTTP endpoint listens: bound before the server starts (so tests bind port 0 and
/// learn the address), shared by clones of the configuration.
#[derive(Clone, Debug)]
pub struct HttpListener {
    listener: Arc<std::net::TcpListener>,
    address: SocketAddr,
}

impl HttpListener {
    /// Binds `address` (port 0 picks a free port).
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub fn bind(address: SocketAddr) -> std::io::Result<Self> {
        Self::from_std(std::net::TcpListener::bind(address)?)
    }

    /// Serves on an already-bound listener.
    ///
    /// # Errors
    /// When the listener has no local address.
    pub fn from_std(listener: std::net::TcpListener) -> std::io::Result<Self> {
        let address = listener.local_addr()?;
        Ok(HttpListener {
            listener: Arc::new(listener),
            address,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    fn to_tokio(&self) -> std::io::Result<tokio::net::TcpListener> {
        let listener = self.listener.try_clone()?;
        listener.set_nonblocking(true)?;
        tokio::net::TcpListener::from_std(listener)
    }
}

/// What one listener serves.
#[derive(Clone, Debug)]
pub enum Routes {
    /// `GET /metrics` only (`--metrics-listen`).
    Metrics(Arc<Metrics>),
    /// `/metrics` and the web view (`--http-listen`).
    Web(Arc<WebView>),
}

impl Routes {
    async fn respond(&self, request: http::Request<hyper::body::Incoming>) -> http::Response<Body> {
        match self {
            Routes::Metrics(metrics) => {
                crate::metrics::respond(metrics, &request).map(BodyExt::boxed_unsync)
            }
            Routes::Web(web) => Arc::clone(web).respond(request).await,
        }
    }
}

/// Starts serving `routes` on `listener`; it stops when `stop` is cancelled (open connections
/// finish their request and close; live streams end).
///
/// # Errors
/// When the listener cannot be handed to the runtime.
pub fn serve(
    listener: &HttpListener,
    routes: Routes,
    stop: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = listener.to_tokio()?;
    Ok(tokio::spawn(accept(listener, routes, stop)))
}

async fn accept(listener: tokio::net::TcpListener, routes: Routes, stop: CancellationToken) {
    // a connection holds one slot from its accept to its end: at most HTTP_CONNECTIONS
    let slots = Arc::new(tokio::sync::Semaphore::new(HTTP_CONNECTIONS));
    let mut full = false;
    loop {
        let slot = tokio::select! {
            () = stop.cancelled() => break,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        // said once each time it fills up, not per connection
        let now_full = slots.available_permits() == 0;
        if now_full && !full {
            tracing::warn!(
                connections = HTTP_CONNECTIONS,
                "HTTP endpoint holds as many connections as it may: it accepts no more until one \
                 closes"
            );
        }
        full = now_full;
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // out of descriptors, or a connection reset before it was accepted
                    tracing::warn!(%error, "HTTP endpoint cannot accept a connection");
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(Duration::from_millis(100)) => continue,
                    }
                }
            },
        };
        let routes = routes.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |mut request: http::Request<_>| {
                request.extensions_mut().insert(Peer(peer));
                let routes = routes.clone();
                async move { Ok::<_, Infallible>(routes.respond(request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HTTP_HEADER_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = served {
                tracing::debug!(%error, "HTTP connection failed");
            }
            drop(slot);
        });
    }
}
