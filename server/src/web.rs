//! The web view (`--http-listen`): a page of the live server — worlds, windows, ranks with
//! their sessions and leases, lock holders and waiters, open epochs and queued items per
//! target, the audit events as they are committed, and a window's timeline (the Perfetto
//! export, drawn in the page) — and three admin actions behind a confirmation in the page:
//! ending a rank's session, revoking its locks and deleting a world (`actions.rs`, through
//! the Admin service).
//! The page also draws a trace file the user opens (a schedule `onesided explore --replay
//! S:K --trace` wrote), in the browser alone: nothing of it reaches the server.
//!
//! The page (`web/index.html`, `web/app.js`, `web/style.css`) is compiled into the binary and
//! needs nothing from the internet. It asks for the admin token and sends it in an
//! `Authorization: Bearer` header on every call to `/api/…`, never in a URL; the live updates
//! come as server-sent events over a `fetch` stream (an `EventSource` cannot send headers).
//!
//! - `GET /api/state` — the server (version, start, uptime, node) and every world with its
//!   ranks and windows (JSON).
//! - `GET /api/worlds/{world}/windows/{window}` — one window and each rank's target
//!   (core's `TargetView`).
//! - `GET /api/worlds/{world}/windows/{window}/timeline` — its Perfetto trace (JSON).
//! - `GET /api/worlds/{world}/windows/{window}/contents?rank=R[&from=E&count=N]` — a page of
//!   rank R's public copy, decoded as the window's element type (bytes when it has none).
//! - `GET /api/cluster` — the cluster's nodes, their liveness and the worlds each holds the
//!   lease of (as the Admin API's `ClusterStatus`), or that the server is not in one.
//! - `POST /api/worlds/{world}/ranks/{rank}/end-session`,
//!   `POST /api/worlds/{world}/windows/{window}/ranks/{rank}/revoke-locks` and
//!   `POST /api/worlds/{world}/delete` — the admin actions (`actions.rs`); every other path
//!   answers `GET` only.
//! - `GET /api/stream[?world=W&window=N]` — `text/event-stream`: `state` (the state, and the
//!   window's when one is named) whenever it changes, `audit` for each committed event (with
//!   its wall-clock time and, for operations and published bytes, the values decoded).
//!
//! Owns: routing, the token check, the JSON shapes. Must not: change anything except through
//! the Admin service's methods (the actions; otherwise it only reads the registry, asks actors
//! for [`onesided_core::target::Target::inspect`] and for a page of their public copy, asks the
//! placement for the cluster's status and reads the audit store), or log a token.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::BodyExt;
use onesided_core::audit::Event;
use onesided_core::datatype::Datatype;
use onesided_core::error::quoted;
use onesided_core::target::TargetView;
use onesided_core::window::WindowDesc;
use serde_json::{json, Value};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::admin::AdminService;
use crate::audit::service::AuditService;
use crate::audit::AuditHandle;
use crate::http::{full, Body};
use crate::metrics::Metrics;
use crate::registry::Registry;

const INDEX_HTML: &str = include_str!("web/index.html");
const APP_JS: &str = include_str!("web/app.js");
const STYLE_CSS: &str = include_str!("web/style.css");

mod actions;

/// How often a live stream looks whether the state changed.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// A live stream sends a comment this often when nothing changed, so a closed page is noticed.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// How many of a window's past events a newly opened window shows.
const RECENT_EVENTS: u64 = 200;

/// The most elements one page of a window's contents holds.
const MAX_PAGE: u64 = 4096;

/// What the web view reads, and the token it asks for.
#[derive(Clone)]
pub struct WebView {
    registry: Arc<Registry>,
    /// The admin actions go through the Admin service's own methods.
    admin: AdminService,
    audit: AuditService,
    live: AuditHandle,
    metrics: Arc<Metrics>,
    admin_token: Arc<str>,
    /// Cancelled when the server stops: live streams end.
    stop: CancellationToken,
    /// When the web view (so the server) started, by the wall clock and the monotonic one.
    started: (SystemTime, Instant),
    /// This node's id in a cluster (`None` alone), once the placement said it.
    node: Arc<tokio::sync::OnceCell<Option<String>>>,
}

impl std::fmt::Debug for WebView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebView { .. }")
    }
}

/// A refusal: its HTTP status and the text the body says.
struct Refusal(http::StatusCode, String);

impl Refusal {
    fn not_found(what: String) -> Self {
        Refusal(http::StatusCode::NOT_FOUND, what)
    }
}

impl WebView {
    /// The web view of a server: its directory, its audit store and live events, its metrics;
    /// `/api/…` answers only with `admin_token`. Live streams end when `stop` is cancelled.
    pub fn new(
        registry: Arc<Registry>,
        audit: AuditService,
        live: AuditHandle,
        metrics: Arc<Metrics>,
        admin_token: &str,
        stop: CancellationToken,
    ) -> Self {
        WebView {
            admin: AdminService::clustered(Arc::clone(&registry), admin_token),
            registry,
            audit,
            live,
            metrics,
            admin_token: Arc::from(admin_token),
            stop,
            started: (SystemTime::now(), Instant::now()),
            node: Arc::default(),
        }
    }

    /// The answer to one request.
    pub(crate) async fn respond(
        self: Arc<Self>,
        request: http::Request<hyper::body::Incoming>,
    ) -> http::Response<Body> {
        let path = request.uri().path().to_string();
        if path == "/metrics" {
            return crate::metrics::respond(&self.metrics, &request).map(BodyExt::boxed_unsync);
        }
        let action = path
            .strip_prefix("/api/")
            .is_some_and(|api| actions::is_action(&api.split('/').collect::<Vec<_>>()));
        let (allowed, only) = if action {
            (http::Method::POST, "POST")
        } else {
            (http::Method::GET, "GET")
        };
        if request.method() != allowed {
            let why = if action {
                "an admin action: only POST\n"
            } else {
                "the web view reads: only GET (its admin actions are POSTs of their own)\n"
            };
            let mut response = text(http::StatusCode::METHOD_NOT_ALLOWED, why.to_string());
            response
                .headers_mut()
                .insert(http::header::ALLOW, http::HeaderValue::from_static(only));
            return response;
        }
        let asset = match path.as_str() {
            "/" | "/index.html" => Some((INDEX_HTML, "text/html; charset=utf-8")),
            "/app.js" => Some((APP_JS, "text/javascript; charset=utf-8")),
            "/style.css" => Some((STYLE_CSS, "text/css; charset=utf-8")),
            _ => None,
        };
        if let Some((body, content_type)) = asset {
            return with_type(http::StatusCode::OK, content_type, full(body));
        }
        let Some(api) = path.strip_prefix("/api/") else {
            return text(
                http::StatusCode::NOT_FOUND,
                // echoed through `quoted`, cut short: an unauthenticated caller must not get
                // back whatever it sent (a path of 60 KB came back whole)
                format!(
                    "no page {}: the web view is at /, metrics at /metrics\n",
                    quoted(&path)
                ),
            );
        };
        if let Err(Refusal(status, why)) = self.authorize(&request) {
            let mut response = text(status, format!("{why}\n"));
            if status == http::StatusCode::UNAUTHORIZED {
                response.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    http::HeaderValue::from_static("Bearer realm=\"onesided web view\""),
                );
            }
            return response;
        }
        let query = request.uri().query().unwrap_or("").to_string();
        let from = request
            .extensions()
            .get::<crate::http::Peer>()
            .map(|peer| peer.0);
        let answered = match api.split('/').collect::<Vec<_>>().as_slice() {
            parts if action => self.act(parts, from).await.map(|v| json_response(&v)),
            ["state"] => {
                self.learn_node().await;
                Ok(json_response(&self.with_uptime(self.state())))
            }
            ["worlds", world, "windows", window] => {
                self.window(world, window).await.map(|v| json_response(&v))
            }
            ["worlds", world, "windows", window, "timeline"] => self
                .timeline(world, window)
                .await
                .map(|v| json_response(&v)),
            ["worlds", world, "windows", window, "contents"] => self
                .contents(world, window, &query)
                .await
                .map(|v| json_response(&v)),
            ["cluster"] => self.cluster().await.map(|v| json_response(&v)),
            ["stream"] => self.stream(&query).await,
            _ => Err(Refusal::not_found(format!("no API path {}", quoted(&path)))),
        };
        answered.unwrap_or_else(|Refusal(status, why)| text(status, format!("{why}\n")))
    }

    /// The admin token, in `Authorization: Bearer <token>`, compared in constant time.
    fn authorize<B>(&self, request: &http::Request<B>) -> Result<(), Refusal> {
        let unauthorized = |why: &str| Refusal(http::StatusCode::UNAUTHORIZED, why.to_string());
        let mut values = request
            .headers()
            .get_all(http::header::AUTHORIZATION)
            .iter();
        let (value, again) = (values.next(), values.next());
        if again.is_some() {
            // a singleton field (RFC 9110): the first of two is not taken
            return Err(Refusal(
                http::StatusCode::BAD_REQUEST,
                "more than one Authorization header: send one".to_string(),
            ));
        }
        let value = value.ok_or_else(|| {
            unauthorized("missing Authorization header: send `Authorization: Bearer <admin token>`")
        })?;
        let value = value
            .to_str()
            .map_err(|_| unauthorized("the Authorization header is not text"))?;
        let presented = value.strip_prefix("Bearer ").ok_or_else(|| {
            unauthorized("the Authorization header must be `Bearer <admin token>`")
        })?;
        if crate::auth::same(presented, &self.admin_token) {
            return Ok(());
        }
        if !presented.is_empty() && self.registry.authenticate(presented).is_some() {
            return Err(Refusal(
                http::StatusCode::FORBIDDEN,
                "a rank token may not open the web view: use the admin token".to_string(),
            ));
        }
        Err(unauthorized("invalid admin token"))
    }

    /// Every world with its ranks' sessions and its windows.
    fn state(&self) -> Value {
        let worlds: Vec<Value> = self
            .registry
            .overview()
            .into_iter()
            .map(|world| {
                let ranks: Vec<Value> = world
                    .ranks
                    .iter()
                    .map(|rank| {
                        let (session, incarnation, lease_ms) = match rank.live {
                            Some((incarnation, lease)) => {
                                ("attached", incarnation, Some(lease.as_millis() as u64))
                            }
                            None if rank.incarnations > 0 => ("departed", rank.incarnations, None),
                            None => ("never attached", 0, None),
                        };
                        json!({
                            "rank": rank.rank,
                            "session": session,
                            "incarnation": incarnation,
                            "lease_ms": lease_ms,
                        })
                    })
                    .collect();
                let windows: Vec<Value> = world.windows.iter().map(|desc| describe(desc)).collect();
                json!({"name": world.name, "ranks": ranks, "windows": windows})
            })
            .collect();
        let since = self.started.0;
        json!({
            "server": {
                "version": env!("CARGO_PKG_VERSION"),
                "started_ms": unix_ms(since),
                "node": self.node.get().cloned().flatten(),
            },
            "durability": format!("{:?}", self.live.durability()).to_lowercase(),
            "lease_ttl_ms": self.registry.lease_ttl().as_millis() as u64,
            "worlds": worlds,
        })
    }

    /// Asks the placement for this node's id once (again after a failure: the cluster's
    /// database did not answer), for `state` to name.
    async fn learn_node(&self) {
        let _ = self
            .node
            .get_or_try_init(|| async {
                let view = self.registry.placement().status().await?;
                anyhow::Ok(view.map(|view| view.node_id))
            })
            .await;
    }

    /// `state` with the server's uptime, which the live stream leaves out when it compares
    /// states (it changes every second).
    fn with_uptime(&self, mut state: Value) -> Value {
        state["server"]["uptime_s"] = json!(self.started.1.elapsed().as_secs());
        state
    }

    fn entry(
        &self,
        world: &str,
        window: &str,
    ) -> Result<Arc<crate::registry::WindowEntry>, Refusal> {
        if !self.registry.has_world(world) {
            return Err(Refusal::not_found(format!("no world {}", quoted(world))));
        }
        self.registry.window(world, window).ok_or_else(|| {
            Refusal::not_found(format!(
                "no window {} in world {}",
                quoted(window),
                quoted(world)
            ))
        })
    }

    /// One window and what each rank's actor says of its target.
    async fn window(&self, world: &str, window: &str) -> Result<Value, Refusal> {
        let entry = self.entry(world, window)?;
        let mut targets = Vec::with_capacity(entry.ranks.len());
        for (rank, handle) in entry.ranks.iter().enumerate() {
            targets.push(match handle.inspect().await {
                Ok(view) => target(&view),
                Err(error) => json!({"rank": rank, "error": error.message}),
            });
        }
        let mut value = describe(&entry.now());
        value["world"] = json!(world);
        value["targets"] = Value::Array(targets);
        Ok(value)
    }

    async fn timeline(&self, world: &str, window: &str) -> Result<Value, Refusal> {
        let entry = self.entry(world, window)?;
        self.audit
            .timeline(entry.desc.id)
            .await
            .map_err(refusal_of_status)
    }

    /// The cluster as this node sees it: every node with its liveness, heartbeat age and the
    /// worlds it holds the lease of (the Admin API's `ClusterStatus`); a server outside a
    /// cluster says so.
    async fn cluster(&self) -> Result<Value, Refusal> {
        let view = self.registry.placement().status().await.map_err(|error| {
            Refusal(
                http::StatusCode::SERVICE_UNAVAILABLE,
                format!("the cluster's database does not answer: {error:#}"),
            )
        })?;
        let Some(view) = view else {
            return Ok(json!({"clustered": false, "node": null, "nodes": []}));
        };
        let advertise = view
            .nodes
            .iter()
            .find(|node| node.node_id == view.node_id)
            .map(|node| node.advertise.clone());
        let nodes: Vec<Value> = view
            .nodes
            .into_iter()
            .map(|node| {
                // each world with whether an admin's move is draining it away
                let worlds: Vec<Value> = node
                    .worlds
                    .iter()
                    .map(|world| json!({"name": world, "moving": node.moving.contains(world)}))
                    .collect();
                let lease = json!({"alive": node.alive, "heartbeat_age_ms": node.heartbeat_age_ms});
                json!({"node": node.node_id, "advertise": node.advertise, "lease": lease,
                       "worlds": worlds, "ranks": node.ranks})
            })
            .collect();
        Ok(json!({
            "clustered": true,
            "node": view.node_id,
            "advertise": advertise,
            "lease_ttl_ms": view.lease_ttl.as_millis() as u64,
            "nodes": nodes,
        }))
    }

    /// A page of one rank's public copy: `count` elements (256 unless named, at most
    /// `MAX_PAGE`) from element `from` (0 unless named), decoded as the window's element
    /// type, or as bytes when it has none.
    async fn contents(&self, world: &str, window: &str, query: &str) -> Result<Value, Refusal> {
        let entry = self.entry(world, window)?;
        let (mut rank, mut from, mut count) = (None, 0u64, 256u64);
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let number = || {
                value.parse::<u64>().map_err(|_| {
                    bad_request(format!(
                        "{key}= takes a whole number, not {}",
                        quoted(value)
                    ))
                })
            };
            match key {
                "rank" => rank = Some(number()?),
                "from" => from = number()?,
                "count" => count = number()?,
                _ => {
                    return Err(bad_request(format!(
                        "unknown query parameter {}: use rank=, from= and count=",
                        quoted(pair)
                    )))
                }
            }
        }
        let nranks = entry.ranks.len() as u64;
        let rank = rank.ok_or_else(|| bad_request("name the rank: rank=".to_string()))?;
        let handle = usize::try_from(rank)
            .ok()
            .and_then(|index| entry.ranks.get(index))
            .ok_or_else(|| {
                Refusal::not_found(format!(
                    "no rank {rank} in window {}: it has ranks 0 to {}",
                    quoted(window),
                    nranks.saturating_sub(1)
                ))
            })?;
        if count == 0 || count > MAX_PAGE {
            return Err(bad_request(format!(
                "count= must be 1 to {MAX_PAGE}, not {count}"
            )));
        }
        let desc = entry.now();
        let dtype = desc.info.element_type.unwrap_or(Datatype::Byte);
        let size = dtype.size() as u64;
        // only the page's bytes are copied out of the actor (a dynamic window's copy grows
        // past its declared size as regions are attached: the actor says how long it is)
        let low = from.saturating_mul(size);
        let (mut page, bytes) =
            handle
                .read(low, count.saturating_mul(size))
                .await
                .map_err(|error| {
                    Refusal(
                        http::StatusCode::SERVICE_UNAVAILABLE,
                        format!("rank {rank}'s target does not answer: {}", error.message),
                    )
                })?;
        let elements = bytes / size;
        let start = from.min(elements);
        let end = start.saturating_add(count).min(elements);
        page.truncate(((end - start) * size) as usize);
        let values = onesided_core::datatype::decode(dtype, &page)
            .map_err(|error| Refusal(http::StatusCode::INTERNAL_SERVER_ERROR, error.message))?;
        Ok(json!({
            "world": world,
            "window": window,
            "rank": rank,
            "element_type": dtype.name(),
            "element_size": size,
            "bytes": bytes,
            "elements": elements,
            "from": start,
            "values": values.iter().map(ToString::to_string).collect::<Vec<_>>(),
        }))
    }

    /// The wall-clock time of an audit clock reading (`at_ns`), in milliseconds since the
    /// Unix epoch: the log's clock is monotonic, so this is now minus how long ago it was.
    fn wall_ms(&self, at_ns: u64) -> u64 {
        let ago = Duration::from_nanos(self.live.now().saturating_sub(at_ns));
        unix_ms(SystemTime::now() - ago)
    }

    /// A committed event as the page shows it: the row, its wall-clock time, and the values
    /// its payload carries decoded (an operation's as its datatype, published bytes as the
    /// window's element type).
    fn audit_event(&self, event: &onesided_proto::v1::AuditEvent) -> Value {
        let mut value = audit_event(event);
        value["wall_ms"] = json!(self.wall_ms(event.at_ns));
        if let Ok(recorded) = serde_json::from_str::<Event>(&event.body) {
            let decoded = match &recorded {
                Event::Op {
                    datatype,
                    data,
                    compare,
                    result,
                    ..
                } => Datatype::parse(datatype).map(|dtype| {
                    json!({
                        "type": dtype.name(),
                        "data": decoded(dtype, data),
                        "compare": decoded(dtype, compare),
                        "result": decoded(dtype, result),
                    })
                }),
                Event::Published { data, .. } => {
                    let dtype = self
                        .registry
                        .window_by_id(event.window)
                        .and_then(|entry| entry.now().info.element_type);
                    dtype.map(|dtype| json!({"type": dtype.name(), "data": decoded(dtype, data)}))
                }
                _ => None,
            };
            if let Some(decoded) = decoded {
                value["decoded"] = decoded;
            }
        }
        value
    }

    /// Server-sent events: the state whenever it changes, each committed audit event.
    async fn stream(&self, query: &str) -> Result<http::Response<Body>, Refusal> {
        self.learn_node().await;
        let mut world = None;
        let mut window = None;
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            match pair.split_once('=') {
                Some(("world", value)) => world = Some(value.to_string()),
                Some(("window", value)) => window = Some(value.to_string()),
                _ => {
                    return Err(Refusal(
                        http::StatusCode::BAD_REQUEST,
                        format!(
                            "unknown query parameter {}: use world= and window=",
                            quoted(pair)
                        ),
                    ))
                }
            }
        }
        let selected = match (world, window) {
            (Some(world), Some(window)) => {
                let entry = self.entry(&world, &window)?;
                Some((world, window, entry.desc.id))
            }
            (None, None) => None,
            _ => {
                return Err(Refusal(
                    http::StatusCode::BAD_REQUEST,
                    "name both world= and window=, or neither".to_string(),
                ))
            }
        };
        // subscribe before reading the recent events, so nothing committed between is lost
        let mut committed = self.live.subscribe();
        let recent = match &selected {
            Some((_, _, id)) if self.live.durability() != crate::audit::Durability::Off => self
                .audit
                .recent(*id, RECENT_EVENTS)
                .await
                .map_err(refusal_of_status)?,
            _ => Vec::new(),
        };
        let (sender, receiver) = tokio::sync::mpsc::channel::<Bytes>(64);
        let view = self.clone();
        tokio::spawn(async move {
            let mut last_seq = std::collections::HashMap::<u64, u64>::new();
            for event in &recent {
                last_seq.insert(event.window, event.seq);
                if sender
                    .send(sse("audit", &view.audit_event(event)))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            let mut last_state = String::new();
            let mut sample = tokio::time::interval(SAMPLE_EVERY);
            sample.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut quiet = tokio::time::Instant::now();
            loop {
                let frame = tokio::select! {
                    () = view.stop.cancelled() => return,
                    () = sender.closed() => return,
                    _ = sample.tick() => {
                        let mut state = view.state();
                        if let Some((world, window, _)) = &selected {
                            state["window"] = view
                                .window(world, window)
                                .await
                                .unwrap_or_else(|Refusal(_, why)| json!({"gone": why}));
                        }
                        let text = state.to_string();
                        if text != last_state {
                            last_state = text;
                            Some(sse("state", &view.with_uptime(state)))
                        } else if quiet.elapsed() >= KEEP_ALIVE {
                            Some(Bytes::from_static(b": keep-alive\n\n"))
                        } else {
                            None
                        }
                    }
                    row = committed.recv() => match row {
                        Ok(row) => {
                            let seen = last_seq.get(&row.record.window).copied().unwrap_or(0);
                            (row.record.seq > seen).then(|| {
                                let event = crate::audit::service::wire_committed(&row);
                                sse("audit", &view.audit_event(&event))
                            })
                        }
                        Err(broadcast::error::RecvError::Lagged(missed)) => {
                            Some(sse("lagged", &json!({"missed": missed})))
                        }
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                };
                if let Some(frame) = frame {
                    quiet = tokio::time::Instant::now();
                    if sender.send(frame).await.is_err() {
                        return;
                    }
                }
            }
        });
        let frames = tokio_stream::wrappers::ReceiverStream::new(receiver);
        let body = http_body_util::StreamBody::new(tokio_stream::StreamExt::map(frames, |bytes| {
            Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(bytes))
        }));
        let mut response = with_type(
            http::StatusCode::OK,
            "text/event-stream",
            body.boxed_unsync(),
        );
        response.headers_mut().insert(
            http::header::CACHE_CONTROL,
            http::HeaderValue::from_static("no-store"),
        );
        Ok(response)
    }
}

fn bad_request(why: String) -> Refusal {
    Refusal(http::StatusCode::BAD_REQUEST, why)
}

fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|since| since.as_millis() as u64)
        .unwrap_or(0)
}

/// `bytes` decoded as whole elements of `dtype`, each as text; `None` when they are not whole
/// elements (or there are none).
fn decoded(dtype: Datatype, bytes: &[u8]) -> Option<Vec<String>> {
    if bytes.is_empty() {
        return None;
    }
    onesided_core::datatype::decode(dtype, bytes)
        .ok()
        .map(|values| values.iter().map(ToString::to_string).collect())
}

fn refusal_of_status(status: tonic::Status) -> Refusal {
    let code = match status.code() {
        tonic::Code::NotFound => http::StatusCode::NOT_FOUND,
        tonic::Code::InvalidArgument => http::StatusCode::BAD_REQUEST,
        tonic::Code::FailedPrecondition => http::StatusCode::CONFLICT,
        tonic::Code::DeadlineExceeded => http::StatusCode::GATEWAY_TIMEOUT,
        tonic::Code::Unavailable => http::StatusCode::SERVICE_UNAVAILABLE,
        _ => http::StatusCode::INTERNAL_SERVER_ERROR,
    };
    Refusal(code, status.message().to_string())
}

/// A window's shape, model and flavor.
fn describe(desc: &WindowDesc) -> Value {
    let model = desc.model.name();
    json!({
        "id": desc.id,
        "name": desc.name,
        "flavor": desc.flavor.name(),
        "model": model,
        "sizes": desc.sizes,
        "disp_units": desc.disp_units,
        "group": desc.group,
        "element_type": desc.info.element_type.map(|datatype| datatype.name()),
        "no_locks": desc.info.no_locks,
    })
}

fn target(view: &TargetView) -> Value {
    let holders: Vec<Value> = view
        .holders
        .iter()
        .map(|holder| {
            json!({
                "origin": holder.origin,
                "incarnation": holder.incarnation,
                "lock_type": holder.lock_type.name(),
                "token": holder.token,
                "nocheck": holder.nocheck,
            })
        })
        .collect();
    let waiters: Vec<Value> = view
        .waiters
        .iter()
        .map(|waiter| {
            json!({
                "origin": waiter.origin,
                "incarnation": waiter.incarnation,
                "lock_type": waiter.lock_type.name(),
                "waited_ms": waiter.waited.as_millis() as u64,
            })
        })
        .collect();
    let queued: Vec<Value> = view
        .queued
        .iter()
        .map(|item| json!({"origin": item.origin, "incarnation": item.incarnation, "what": item.what}))
        .collect();
    let named = |ranks: &[(u32, String)]| -> Vec<Value> {
        ranks
            .iter()
            .map(|(rank, why)| json!({"rank": rank, "why": why}))
            .collect()
    };
    json!({
        "rank": view.rank,
        "holders": holders,
        "waiters": waiters,
        "fence_entered": view.fence_entered,
        "fence": view.fence.as_ref().map(|fence| json!({
            "fence": fence.fence,
            "closes": fence.closes,
            "every_rank_arrived": fence.every_rank_arrived,
        })),
        "exposed_to": view.exposed_to,
        "waiting_for_completes": view.waiting_for_completes,
        "queued": queued,
        "gone": named(&view.gone),
        "absent": named(&view.absent),
    })
}

fn audit_event(event: &onesided_proto::v1::AuditEvent) -> Value {
    let body: Value = serde_json::from_str(&event.body).unwrap_or(Value::Null);
    json!({
        "window": event.window,
        "seq": event.seq,
        "cseq": event.cseq,
        "at_ns": event.at_ns,
        "rank": event.rank,
        "incarnation": event.incarnation,
        "kind": event.kind,
        "body": body,
    })
}

/// One server-sent event.
fn sse(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

fn with_type(
    status: http::StatusCode,
    content_type: &'static str,
    body: Body,
) -> http::Response<Body> {
    let mut response = http::Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    // the page loads nothing from anywhere but this server, and is framed by nobody
    headers.insert(
        http::header::CONTENT_SECURITY_POLICY,
        http::HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; \
             frame-ancestors 'none'",
        ),
    );
    headers.insert(
        http::header::X_CONTENT_TYPE_OPTIONS,
        http::HeaderValue::from_static("nosniff"),
    );
    response
}

fn text(status: http::StatusCode, body: String) -> http::Response<Body> {
    with_type(status, "text/plain; charset=utf-8", full(body))
}

fn json_response(value: &Value) -> http::Response<Body> {
    with_type(
        http::StatusCode::OK,
        "application/json",
        full(value.to_string()),
    )
}
