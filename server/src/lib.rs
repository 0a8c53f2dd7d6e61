//! onesided-server: MPI one-sided communication as a network service.
//!
//! - [`registry`]: the directory of worlds, rank tokens and windows.
//! - [`actor`]: the window-server actor, one per rank of each window, owner of its public copy.
//! - [`world`]: the per-world actor running barriers and the barrier of window free.
//! - [`session`]: one attached rank's stream; runs core's epoch state machine and routes calls.
//! - [`admin`]: the Admin gRPC service.
//! - [`auth`]: bearer-token interceptors, identity claims.
//! - [`limits`]: the server's limits; the message-size and deadline layers.
//! - [`metrics`]: the server's Prometheus metrics and the optional `/metrics` endpoint.
//! - [`http`]: the plain HTTP/1 listeners (`/metrics`; the web view beside it).
//! - [`web`]: the web view, a read-only live page of the server for operators.
//! - [`reply`]: where answers go.
//! - [`tls`]: the server's optional TLS identity.
//! - `audit`: the audit writer, its store and the Audit gRPC service.
//! - `cluster`: cluster mode: node and world leases over one PostgreSQL, placement, take-up.
//! - `recovery`: the worlds and windows of the previous run, rebuilt from the store.
//! - `supervise`: spawning long-lived actors so that a panic is reported, not mistaken for a free.
//!
//! [`run`] takes an already-bound listener and a shutdown future, so tests bind port 0 and stop
//! the server themselves.
//!
//! Owns: `ServerConfig` and its defaults; the order of start-up (the admin token checked, TLS,
//! the data directory, the store opened, then recovery or joining the cluster, the audit
//! writer, the registry, the services behind their interceptors and the limit layers, health
//! and reflection, the HTTP listeners) and of a stop (sessions ended, connections drained for
//! at most `SHUTDOWN_GRACE`, the audit flushed, the cluster left); and the Rma service's door:
//! a stream's member resolved (in a cluster confirmed, redirected with `x-onesided-owner` or
//! taken up here) before its session starts. Must not: parse flags, install a tracing
//! subscriber, watch signals, or choose a runtime or an allocator (the binary does; an
//! embedding application chooses its own), or decide an MPI rule.

pub mod actor;
pub mod admin;
pub mod audit;
pub mod auth;
pub mod cluster;
pub mod http;
pub mod limits;
pub mod metrics;
pub mod recovery;
pub mod registry;
pub mod reply;
pub mod session;
pub mod supervise;
pub mod tls;
pub mod web;
pub mod world;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use futures::StreamExt;
use onesided_busy_poll::BusyPoll;
use onesided_proto::v1::admin_server::AdminServer;
use onesided_proto::v1::audit_server::AuditServer;
use onesided_proto::v1::rma_server::{Rma, RmaServer};
use onesided_proto::v1::{ClientMessage, ServerMessage};
use tokio::net::TcpListener;
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument;

use crate::limits::Limits;
use crate::registry::Registry;

/// How long a graceful stop waits for connections to close before it drops them. With the
/// audit's last flush after it, the binary exits within 5 s of SIGTERM (and at most 4.5 s
/// after it whatever is running: `main.rs`'s exit deadline).
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// The lease of a session unless configured otherwise.
pub const DEFAULT_LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// The fewest characters an admin token may have: anything shorter is not a secret (an empty
/// token would let any caller that sends `authorization: Bearer ` administer the server).
pub const MIN_ADMIN_TOKEN_CHARS: usize = 16;

/// Whether `token` may be the admin token: at least [`MIN_ADMIN_TOKEN_CHARS`] characters, none
/// of them whitespace or control characters (it travels in `authorization: Bearer <token>`).
///
/// # Errors
/// Why it may not, without the token itself.
pub fn check_admin_token(token: &str) -> Result<(), String> {
    let chars = token.chars().count();
    if chars < MIN_ADMIN_TOKEN_CHARS {
        return Err(format!(
            "the admin token has {chars} characters; at least {MIN_ADMIN_TOKEN_CHARS} are \
             required (generate one with `openssl rand -hex 24`)"
        ));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the admin token contains whitespace or control characters".to_string());
    }
    Ok(())
}

/// What the server needs to run.
#[derive(Clone)]
pub struct ServerConfig {
    /// The token admin calls must present.
    pub admin_token: String,
    /// Where the server keeps its files (the SQLite audit store by default).
    pub data_dir: PathBuf,
    /// The audit store: `postgres://…` or `sqlite:…`; `None` for `DATA_DIR/audit.db`.
    pub database_url: Option<String>,
    /// How much a call's answer waits for its audit events.
    pub durability: audit::Durability,
    /// How an SQLite store's commits write events: one row per commit and window (the
    /// default), or one row each (`--audit-sqlite-rows per-event`). PostgreSQL keeps one row
    /// per event either way.
    pub sqlite_rows: audit::Rows,
    /// In `async` durability, the most events of answered calls that may be uncommitted at
    /// once (what a crash can lose); calls wait for room beyond it.
    pub async_max_unrecorded: usize,
    /// A session that sends nothing for this long loses its lease: its locks are revoked and
    /// whatever needs it fails with `PROC_FAILED`.
    pub lease_ttl: std::time::Duration,
    /// Message size, window bytes, ranks per world, pending operations per session.
    pub limits: Limits,
    /// With an identity the server speaks only TLS (`https://`); without, only plain HTTP/2.
    pub tls: Option<tls::TlsIdentity>,
    /// Where `GET /metrics` alone is served (plain HTTP/1); `None`: nowhere.
    pub metrics: Option<metrics::MetricsListener>,
    /// Where the web view and `GET /metrics` are served (plain HTTP/1, `/api/…` only with the
    /// admin token); `None`: nowhere.
    pub http: Option<http::HttpListener>,
    /// How long, at most, a shared lock request waits behind a waiting exclusive one when no
    /// conflicting lock is held (writers first, without ever deadlocking a correct program;
    /// core's `locks`).
    pub lock_fairness: std::time::Duration,
    /// Keep polling for this long after each answer before a thread parks (`--busy-poll`,
    /// [`onesided_busy_poll`]); `None`: never spin.
    pub busy_poll: Option<std::time::Duration>,
    /// Join a cluster of nodes over the PostgreSQL store (`--node-id`, `--advertise`);
    /// `None`: a single server.
    pub cluster: Option<cluster::NodeConfig>,
}

impl ServerConfig {
    /// The defaults: SQLite in `data_dir`, `sync` durability.
    pub fn new(admin_token: &str, data_dir: impl Into<PathBuf>) -> Self {
        ServerConfig {
            admin_token: admin_token.to_string(),
            data_dir: data_dir.into(),
            database_url: None,
            durability: audit::Durability::Sync,
            sqlite_rows: audit::Rows::default(),
            async_max_unrecorded: audit::DEFAULT_MAX_UNRECORDED,
            lease_ttl: DEFAULT_LEASE_TTL,
            limits: Limits::default(),
            tls: None,
            metrics: None,
            http: None,
            lock_fairness: onesided_core::locks::DEFAULT_FAIRNESS,
            busy_poll: None,
            cluster: None,
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("admin_token", &"<redacted>")
            .field("data_dir", &self.data_dir)
            .field(
                "database_url",
                &self.database_url.as_ref().map(|_| "<redacted>"),
            )
            .field("durability", &self.durability)
            .field("sqlite_rows", &self.sqlite_rows)
            .field("async_max_unrecorded", &self.async_max_unrecorded)
            .field("lease_ttl", &self.lease_ttl)
            .field("lock_fairness", &self.lock_fairness)
            .field("busy_poll", &self.busy_poll)
            .field("limits", &self.limits)
            .field("tls", &self.tls)
            .field(
                "metrics",
                &self
                    .metrics
                    .as_ref()
                    .map(metrics::MetricsListener::local_addr),
            )
            .field(
                "http",
                &self.http.as_ref().map(http::HttpListener::local_addr),
            )
            .finish()
    }
}

/// The Rma service: one session per stream.
#[derive(Debug, Clone)]
pub struct RmaService {
    registry: Arc<Registry>,
    shutdown: CancellationToken,
    /// `--busy-poll`: touched by every answer sent, so that the runtime is still polling when
    /// the client's next call arrives.
    busy: Option<BusyPoll>,
}

type SessionStream = Pin<Box<dyn Stream<Item = Result<ServerMessage, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl Rma for RmaService {
    type SessionStream = SessionStream;

    async fn session(
        &self,
        request: Request<Streaming<ClientMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let membership = auth::membership(&request);
        let placement = self.registry.placement();
        // a world an admin's move drains here: new sessions wait, then go where it went
        if let Ok(member) = &membership {
            if placement.is_draining(&member.world) {
                placement.until_drained(&member.world).await;
            }
        }
        // in a cluster, only while this node still holds the world's lease — by its clock,
        // else as the database says: a node that was paused past its lease may have lost the
        // world without knowing yet, and must not attach a session to it
        let confirmed = match &membership {
            Ok(member) => placement
                .confirm(&member.world, &self.registry)
                .await
                .map_err(|error| Status::unavailable(format!("the cluster's store: {error:#}")))?,
            Err(_) => true,
        };
        let member = match membership {
            Ok(_) if !confirmed => {
                let hash = registry::token_hash(auth::bearer(&request)?);
                self.resolve(&request, auth::Unresolved(hash)).await?
            }
            Ok(member) => member,
            Err(refused) => match request.extensions().get::<auth::Unresolved>().copied() {
                Some(unresolved) => self.resolve(&request, unresolved).await?,
                None => return Err(refused),
            },
        };
        let limits = self.registry.limits();
        let (out, outbound) = reply::Outbound::with_update_bytes(
            limits.outbound_capacity(),
            limits.max_unread_update_bytes,
        );
        let span = tracing::info_span!("session", world = %member.world, rank = member.rank);
        // The reply stream ends with the session or at shutdown, even while queued operations
        // still hold reply senders.
        let ended = self.shutdown.child_token();
        let attached = self.registry.metrics().session_attached();
        // a client re-attaching by itself names the incarnation it lost
        let succeeds = match request.metadata().get(onesided_proto::SUCCEEDS) {
            None => None,
            Some(value) => Some(
                value
                    .to_str()
                    .ok()
                    .and_then(|text| text.parse::<u64>().ok())
                    .ok_or_else(|| {
                        let why = onesided_core::RmaError::new(
                            onesided_core::ErrorClass::Arg,
                            format!(
                                "{} must be an incarnation (decimal)",
                                onesided_proto::SUCCEEDS
                            ),
                        );
                        onesided_proto::status_from_rma(&why)
                    })?,
            ),
        };
        let session = session::Session::new(Arc::clone(&self.registry), member, out, succeeds)?;
        let mut inbound = request.into_inner();
        // cancelled once the transport is done with the answers (it took the last, or dropped
        // the stream): until then what the client still sends is read (`session::drain`)
        let answered = CancellationToken::new();
        let answers_gone = answered.clone().drop_guard();
        let lease = self.registry.lease_ttl();
        let session_ended = ended.clone();
        let served = tokio::spawn(
            async move {
                let failure = session.run(&mut inbound, session_ended).await;
                drop(attached);
                tokio::spawn(session::drain(inbound, answered, lease).in_current_span());
                failure
            }
            .instrument(span),
        );
        // a stream that failed (a message over the limit) ends with that status
        let failure = futures::stream::once(served)
            .filter_map(|failure| std::future::ready(failure.ok().flatten().map(Err)));
        // once the session ends, what is already queued for the client still goes out (the
        // answers that failed its pending calls), then the stream ends
        let busy = self.busy.clone();
        let replies = reply::Replies::new(outbound, ended)
            .inspect(move |_| {
                let _ = &answers_gone;
                if let Some(busy) = &busy {
                    busy.touch();
                }
            })
            .chain(failure);
        Ok(Response::new(Box::pin(replies)))
    }
}

impl RmaService {
    /// In a cluster, a rank token this node did not know: its world is looked up in the store
    /// and taken up here when nobody live serves it; a session of a world another node serves
    /// is refused with UNAVAILABLE naming that node's address in `x-onesided-owner` metadata
    /// (a redirect: the client attaches there; the session's stream is not proxied, so the hot
    /// path stays one hop).
    async fn resolve<T>(
        &self,
        request: &Request<T>,
        unresolved: auth::Unresolved,
    ) -> Result<registry::Membership, Status> {
        let invalid = || Status::unauthenticated("invalid rank token");
        let placement = self.registry.placement();
        let unavailable =
            |error: anyhow::Error| Status::unavailable(format!("the cluster's store: {error:#}"));
        let Some((world, _)) = placement
            .resolve(&unresolved.0)
            .await
            .map_err(unavailable)?
        else {
            return Err(invalid());
        };
        match placement
            .serve(&world, &self.registry)
            .await
            .map_err(unavailable)?
        {
            registry::Served::Here => {
                let member = self
                    .registry
                    .authenticate_hash(&unresolved.0)
                    .ok_or_else(invalid)?;
                auth::check_claims(request, &member)?;
                Ok(member)
            }
            registry::Served::There(address) => {
                let mut status = Status::unavailable(format!(
                    "world {} is served by the node at {address}: attach there",
                    onesided_core::error::quoted(&world)
                ));
                if let Ok(value) = address.parse() {
                    status.metadata_mut().insert(onesided_proto::OWNER, value);
                }
                Err(status)
            }
            registry::Served::Unknown => Err(invalid()),
        }
    }
}

/// Serves on `listener` until `shutdown` resolves, then drains.
///
/// # Errors
/// When the admin token is too short to be a secret ([`check_admin_token`]), the data
/// directory cannot be created, the TLS key does not belong to its certificate, or the
/// transport fails.
pub async fn run(
    listener: TcpListener,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    use anyhow::Context;
    check_admin_token(&config.admin_token).map_err(|reason| anyhow::anyhow!(reason))?;
    // HTTP/2's budget of small frames not yet read follows the connection window: as large as
    // the calls a session may have in flight need (`Limits::connection_window`)
    let mut server = tonic::transport::Server::builder()
        .initial_connection_window_size(config.limits.connection_window());
    if let Some(identity) = &config.tls {
        // before anything else starts: a key that does not match its certificate is refused here
        server = server
            .tls_config(identity.server_config())
            .context("cannot use the TLS certificate and key")?;
    }
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create data directory {}", config.data_dir.display()))?;
    let metrics = metrics::Metrics::new();
    let Opened {
        audit,
        store,
        last_window,
        recovered,
        joined,
    } = open_audit(&config, &metrics).await?;
    let registry = Registry::with_metrics(
        audit.clone(),
        store.clone(),
        last_window,
        config.lease_ttl,
        config.limits,
        Arc::clone(&metrics),
    );
    registry.set_lock_fairness(config.lock_fairness);
    registry.restore(recovered.worlds, recovered.windows, recovered.incarnations);
    let heartbeats_stop = CancellationToken::new();
    let _stop_heartbeats = heartbeats_stop.clone().drop_guard();
    if let Some(cluster) = &joined {
        join_registry(cluster, &audit, &registry, &heartbeats_stop);
    }
    let audit_reader = audit::service::AuditService::new(store.clone(), audit.clone());
    let stopping = CancellationToken::new();
    let routes = grpc_routes(
        &config,
        &registry,
        audit_reader.clone(),
        stopping.clone(),
        joined.as_ref().map(|cluster| (cluster, &heartbeats_stop)),
    )
    .await?;
    let address = listener
        .local_addr()
        .context("the listener has no local address")?;
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    tracing::info!(%address, scheme, data_dir = %config.data_dir.display(), "onesided server listening");
    // stopped after the drain (or when `run` returns early), so scrapes see the shutdown
    let metrics_stop = CancellationToken::new();
    let _stop_metrics = metrics_stop.clone().drop_guard();
    let http_served = serve_http(
        &config,
        &registry,
        audit_reader,
        &audit,
        &metrics,
        &metrics_stop,
    )?;
    let single_request = single_request_methods()?;
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let signalled = CancellationToken::new();
    let serving = server
        .layer(limits::DeadlineLayer)
        .layer(
            limits::MessageLimitLayer::new(config.limits.max_message_bytes)
                .single_request(single_request),
        )
        .add_routes(routes)
        // Server::tcp_nodelay does not reach sockets accepted from our own listener: without
        // this, Nagle's algorithm meets delayed ACKs and a fence epoch takes ~40 ms
        .serve_with_incoming_shutdown(incoming, {
            let signalled = signalled.clone();
            async move {
                shutdown.await;
                tracing::info!("draining sessions");
                stopping.cancel();
                signalled.cancel();
            }
        });
    until_served_or_grace(serving, &signalled).await?;
    // everything acknowledged or submitted is in the store before we return
    audit.flush().await;
    if let Some(cluster) = &joined {
        heartbeats_stop.cancel();
        // the other nodes take this node's worlds up at once, not after the lease
        if let Err(error) = cluster.leave().await {
            tracing::warn!(error = %format!("{error:#}"), "cannot leave the cluster cleanly");
        }
    }
    metrics_stop.cancel();
    for served in http_served {
        let _ = served.await;
    }
    tracing::info!("onesided server stopped");
    Ok(())
}

/// What a server records into and starts from: its audit writer and store (none with the
/// audit off), the highest window id ever used, what it recovered of the previous run, and
/// the cluster it joined (a cluster node recovers nothing itself: it takes its worlds up one
/// by one, at its first heartbeat).
struct Opened {
    audit: audit::AuditHandle,
    store: Option<audit::AuditStore>,
    last_window: u64,
    recovered: recovery::Recovered,
    joined: Option<Arc<cluster::Cluster>>,
}

/// Opens the audit store `config` names, recovers the previous run's windows (or joins the
/// cluster) and starts the audit writer.
async fn open_audit(
    config: &ServerConfig,
    metrics: &Arc<metrics::Metrics>,
) -> anyhow::Result<Opened> {
    use anyhow::Context;
    if config.cluster.is_some() && config.durability == audit::Durability::Off {
        anyhow::bail!(
            "a cluster node needs the audit store (--audit-durability sync or async): it is \
             where nodes rebuild each other's worlds from"
        );
    }
    if config.durability == audit::Durability::Off {
        return Ok(Opened {
            audit: audit::AuditHandle::off(),
            store: None,
            last_window: 0,
            recovered: recovery::Recovered::default(),
            joined: None,
        });
    }
    let store = audit::AuditStore::open(config.database_url.as_deref(), &config.data_dir)
        .await?
        .writing(config.sqlite_rows);
    // a paused node's open commit is ended by the database within a quarter of the lease
    let store = match &config.cluster {
        Some(node) => store.for_cluster(node.lease_ttl),
        None => store,
    };
    let last_window = store.max_window_id().await?;
    let (recovered, joined) = match &config.cluster {
        Some(node) => {
            let tls_chain = config.tls.as_ref().map(|tls| tls.chain_pem().to_vec());
            let cluster =
                cluster::Cluster::join(&store, node.clone(), &config.admin_token, tls_chain)
                    .await?;
            (recovery::Recovered::default(), Some(cluster))
        }
        None => (
            recovery::recover(&store)
                .await
                .context("cannot recover the windows of the previous run")?,
            None,
        ),
    };
    let last_at = store.last_at_ns().await?;
    let (audit, _writer) = audit::AuditHandle::spawn_bounded(
        store.clone(),
        config.durability,
        last_at,
        Arc::clone(metrics),
        config.async_max_unrecorded,
    );
    Ok(Opened {
        audit,
        store: Some(store),
        last_window,
        recovered,
        joined,
    })
}

/// Makes `cluster` the placement of `registry`'s worlds and the audit's fencing, and starts
/// its heartbeats (until `stop`): the worlds placed on this node (or left by a node that
/// died) are taken up by them once the node has reached itself at its advertised URL.
fn join_registry(
    cluster: &Arc<cluster::Cluster>,
    audit: &audit::AuditHandle,
    registry: &Arc<Registry>,
    stop: &CancellationToken,
) {
    audit.set_fencing(Arc::clone(cluster) as Arc<dyn audit::Fencing>);
    cluster.serve_from(Arc::downgrade(registry));
    registry.set_placement(Arc::clone(cluster) as Arc<dyn registry::Placement>);
    tokio::spawn(cluster::heartbeats(
        Arc::clone(cluster),
        Arc::clone(registry),
        stop.clone(),
    ));
}

/// The gRPC services: Admin and Audit behind the admin token, Rma behind rank tokens (its
/// sessions end when `stopping` is cancelled), health and reflection. A cluster node's
/// health service also answers to the name only this process has, and the node starts
/// reaching itself at its advertised URL (until `stop`).
async fn grpc_routes(
    config: &ServerConfig,
    registry: &Arc<Registry>,
    audit_reader: audit::service::AuditService,
    stopping: CancellationToken,
    cluster: Option<(&Arc<cluster::Cluster>, &CancellationToken)>,
) -> anyhow::Result<tonic::service::Routes> {
    use anyhow::Context;
    use tonic::service::interceptor::InterceptedService;
    let admin_auth = auth::AdminAuth::new(&config.admin_token, Arc::clone(registry));
    // MessageLimitLayer measures what clients send (tonic's own limit answers OUT_OF_RANGE and
    // only after buffering a message); what the server sends is bounded by window sizes
    let audited = audit_reader.has_store();
    let audit_service = InterceptedService::new(
        AuditServer::new(audit_reader)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX),
        admin_auth.clone(),
    );
    let admin = InterceptedService::new(
        AdminServer::new(admin::AdminService::clustered(
            Arc::clone(registry),
            &config.admin_token,
        ))
        .max_decoding_message_size(usize::MAX),
        admin_auth,
    );
    let rma = InterceptedService::new(
        RmaServer::new(RmaService {
            registry: Arc::clone(registry),
            shutdown: stopping,
            busy: config.busy_poll.map(|budget| {
                let busy = BusyPoll::start(budget);
                registry.metrics().busy_polling(busy.clone());
                busy
            }),
        })
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX),
        auth::RankAuth::new(Arc::clone(registry), &config.admin_token),
    );
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<AdminServer<admin::AdminService>>()
        .await;
    health_reporter.set_serving::<RmaServer<RmaService>>().await;
    if let Some((cluster, stop)) = cluster {
        // the name only this process answers to: the node calls it at its advertised URL
        // (once this server serves) before it takes any world
        health_reporter
            .set_service_status(cluster.health_name(), tonic_health::ServingStatus::Serving)
            .await;
        let (cluster, stop) = (Arc::clone(cluster), stop.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = cluster.reach_self() => {}
                () = stop.cancelled() => {}
            }
        });
    }
    // without an audit log every Audit call is FAILED_PRECONDITION: not serving
    type AuditService = AuditServer<audit::service::AuditService>;
    if audited {
        health_reporter.set_serving::<AuditService>().await;
    } else {
        health_reporter.set_not_serving::<AuditService>().await;
    }
    // both reflection versions: grpcurl speaks v1, Python's grpcio-reflection and older tools
    // only v1alpha
    let reflection_builder = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(onesided_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection = reflection_builder()
        .build_v1()
        .context("cannot build the reflection service")?;
    let reflection_v1alpha = reflection_builder()
        .build_v1alpha()
        .context("cannot build the reflection service (v1alpha)")?;
    Ok(tonic::service::Routes::new(health)
        .add_service(reflection)
        .add_service(reflection_v1alpha)
        .add_service(admin)
        .add_service(audit_service)
        .add_service(rma))
}

/// The HTTP listeners `config` asks for: `/metrics` alone, and the web view (with its own
/// `/metrics`); both stop at `stop`.
fn serve_http(
    config: &ServerConfig,
    registry: &Arc<Registry>,
    audit_reader: audit::service::AuditService,
    audit: &audit::AuditHandle,
    metrics: &Arc<metrics::Metrics>,
    stop: &CancellationToken,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    use anyhow::Context;
    let mut served = Vec::new();
    if let Some(listener) = &config.metrics {
        let routes = http::Routes::Metrics(Arc::clone(metrics));
        served.push(http::serve(listener, routes, stop.clone()).context("cannot serve metrics")?);
        let url = format!("http://{}/metrics", listener.local_addr());
        tracing::info!(%url, "serving metrics");
    }
    if let Some(listener) = &config.http {
        let web = web::WebView::new(
            Arc::clone(registry),
            audit_reader,
            audit.clone(),
            Arc::clone(metrics),
            &config.admin_token,
            stop.clone(),
        );
        let routes = http::Routes::Web(Arc::new(web));
        served.push(
            http::serve(listener, routes, stop.clone()).context("cannot serve the web view")?,
        );
        let url = format!("http://{}/", listener.local_addr());
        tracing::info!(%url, metrics = %format!("{url}metrics"), "serving the web view");
    }
    Ok(served)
}

/// The paths of the methods whose calls carry one request message (the message limit refuses
/// a second one).
fn single_request_methods() -> anyhow::Result<impl Iterator<Item = String>> {
    use anyhow::Context;
    Ok([
        onesided_proto::FILE_DESCRIPTOR_SET,
        tonic_health::pb::FILE_DESCRIPTOR_SET,
    ]
    .into_iter()
    .map(onesided_proto::single_request_methods)
    .collect::<Result<Vec<_>, _>>()
    .context("cannot read the methods' descriptors")?
    .into_iter()
    .flatten())
}

/// Waits until `serving` ends; a graceful stop waits for every connection to close, and a
/// client that reads nothing any more (frozen, SIGSTOPped) never lets its connection close:
/// past the grace after `signalled`, the connections still open are dropped.
async fn until_served_or_grace(
    serving: impl Future<Output = Result<(), tonic::transport::Error>>,
    signalled: &CancellationToken,
) -> anyhow::Result<()> {
    use anyhow::Context;
    tokio::select! {
        served = serving => served.context("gRPC transport failed")?,
        () = async {
            signalled.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => {
            tracing::warn!(
                grace_secs = SHUTDOWN_GRACE.as_secs(),
                "connections still open after the grace period are dropped"
            );
        }
    }
    Ok(())
}
