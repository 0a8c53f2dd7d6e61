//! The Admin gRPC service: worlds and windows. Authenticated with the admin token by
//! [`crate::auth`] before any request reaches it.
//!
//! Owns: conversion between admin requests and the registry, and forwarding a call about a
//! world another cluster node serves to that node (`forwarded`, the one place that does), with
//! the caller's address (`x-onesided-caller`) for the audit. An operator's actions on a
//! session (`EndSession`, `RevokeLocks`) are in `operator.rs`. Must not: hold semantics.

use std::sync::Arc;

use onesided_core::error::quoted;
use onesided_core::window::WindowInfo;
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::desc_to_wire;
use onesided_proto::v1::{self, admin_server::Admin};
use onesided_proto::{status_from_rma, status_with_code};
use tonic::{Code, Request, Response, Status};
use tracing::Instrument;

use crate::registry::{MoveError, Registry, RegistryError, Served};

mod operator;

/// Metadata a forwarding node adds: the address the call came from at the first node, which an
/// operator's action records as who asked.
const CALLER: &str = "x-onesided-caller";

/// A client of another node's Admin service.
type Peer = v1::admin_client::AdminClient<tonic::transport::Channel>;

/// The Admin service.
#[derive(Clone)]
pub struct AdminService {
    registry: Arc<Registry>,
    /// In a cluster, the token this node forwards calls to other nodes with (every node of a
    /// cluster has the same admin token).
    admin_token: Arc<str>,
}

impl std::fmt::Debug for AdminService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminService").finish_non_exhaustive()
    }
}

impl AdminService {
    /// The service over `registry`.
    pub fn new(registry: Arc<Registry>) -> Self {
        AdminService {
            registry,
            admin_token: Arc::from(""),
        }
    }

    /// The service over `registry` of a cluster node, which forwards calls about worlds
    /// another node serves to that node with `admin_token`.
    pub fn clustered(registry: Arc<Registry>, admin_token: &str) -> Self {
        AdminService {
            registry,
            admin_token: Arc::from(admin_token),
        }
    }

    /// Where a call about `world` is answered: here, or (in a cluster) at the node that serves
    /// it. A world nobody live serves is taken up here first. A call another node forwarded
    /// is never forwarded again.
    async fn route<T>(&self, request: &Request<T>, world: &str) -> Result<Option<String>, Status> {
        let placement = self.registry.placement();
        if placement.holds(world) && self.registry.has_world(world) {
            return Ok(None);
        }
        let served = placement
            .serve(world, &self.registry)
            .await
            .map_err(|error| status(RegistryError::Unavailable(format!("{error:#}"))))?;
        match served {
            Served::Here | Served::Unknown => Ok(None),
            Served::There(_) if request.metadata().contains_key(onesided_proto::FORWARDED) => {
                Err(Status::unavailable(
                    "the world moved to another node while this call was forwarded; call again",
                ))
            }
            Served::There(address) => Ok(Some(address)),
        }
    }

    /// The answer of the node that serves the world `world` names in `request`, which `call`
    /// asks it for, when that is another node ([`AdminService::route`]); `None` when this node
    /// answers. A forwarded call's message is taken out of `request` (a default one is left).
    /// The one place where Admin calls are forwarded.
    async fn forwarded<M, R, F>(
        &self,
        request: &mut Request<M>,
        world: fn(&M) -> &str,
        call: impl FnOnce(Peer, Request<M>) -> F,
    ) -> Result<Option<Response<R>>, Status>
    where
        M: Default,
        F: std::future::Future<Output = Result<Response<R>, Status>>,
    {
        let Some(address) = self.route(&*request, world(request.get_ref())).await? else {
            return Ok(None);
        };
        let caller = caller(request);
        let (peer, mut forwarded) = self
            .peer(&address, std::mem::take(request.get_mut()))
            .await?;
        if let Some(value) = caller.and_then(|caller| caller.parse().ok()) {
            forwarded.metadata_mut().insert(CALLER, value);
        }
        call(peer, forwarded).await.map(Some)
    }

    /// A client of the node at `address`, and `message` as a request to it (this node's
    /// admin token, marked as forwarded).
    async fn peer<M>(&self, address: &str, message: M) -> Result<(Peer, Request<M>), Status> {
        let unreachable = |error: &dyn std::fmt::Display| {
            Status::unavailable(format!(
                "the node serving this world ({address}) cannot be reached: {error}"
            ))
        };
        let channel = tonic::transport::Endpoint::from_shared(address.to_string())
            .map_err(|error| unreachable(&error))?
            .tcp_nodelay(true)
            .connect_timeout(std::time::Duration::from_secs(5))
            .connect()
            .await
            .map_err(|error| unreachable(&error))?;
        let mut request = Request::new(message);
        let bearer = format!("Bearer {}", self.admin_token);
        let metadata = request.metadata_mut();
        metadata.insert(
            onesided_proto::AUTHORIZATION,
            bearer
                .parse()
                .map_err(|_| Status::internal("the admin token is not metadata"))?,
        );
        metadata.insert(
            onesided_proto::FORWARDED,
            tonic::metadata::MetadataValue::from_static("1"),
        );
        let client = Peer::new(channel)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        Ok((client, request))
    }
}

/// Who an in-process caller is, for the audit: the web view's admin actions go through this
/// service's methods with this in their request's extensions ("127.0.0.1:5000 (web view)").
#[derive(Clone, Debug)]
pub struct Via(pub String);

impl Via {
    /// `message` as a request this caller makes.
    pub fn asking<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request.extensions_mut().insert(self.clone());
        request
    }
}

/// Where `request` came from: its peer's address, for a call another node forwarded the
/// address that node had it from, for the web view's its own account ([`Via`]).
fn caller<T>(request: &Request<T>) -> Option<String> {
    if let Some(Via(caller)) = request.extensions().get::<Via>() {
        return Some(caller.clone());
    }
    let forwarded = request
        .metadata()
        .contains_key(onesided_proto::FORWARDED)
        .then(|| request.metadata().get(CALLER)?.to_str().ok())
        .flatten();
    match forwarded {
        Some(address) => Some(address.to_string()),
        None => request.remote_addr().map(|address| address.to_string()),
    }
}

fn status(error: RegistryError) -> Status {
    match error {
        RegistryError::AlreadyExists(what) => status_with_code(
            Code::AlreadyExists,
            &RmaError::new(ErrorClass::Arg, format!("{what} already exists")),
        ),
        RegistryError::NoWorld(name) => status_with_code(
            Code::NotFound,
            &RmaError::new(ErrorClass::Arg, format!("no world named {}", quoted(&name))),
        ),
        RegistryError::Rma(error) => status_from_rma(&error),
        RegistryError::Unavailable(why) => status_from_rma(&RmaError::new(
            ErrorClass::Io,
            format!("the audit store is unavailable: {why}"),
        )),
    }
}

fn not_clustered() -> Status {
    Status::failed_precondition(
        "this server is not part of a cluster (start it with --node-id, --advertise and a \
         PostgreSQL --database-url)",
    )
}

/// Runs a change of the registry in its own task: a call dropped half-way (its deadline passed,
/// its client went away) must not leave a name, tokens or window bytes half reserved, or the
/// store and the registry disagreeing.
async fn to_the_end<T: Send + 'static>(
    change: impl std::future::Future<Output = Result<T, RegistryError>> + Send + 'static,
) -> Result<T, Status> {
    tokio::spawn(change.in_current_span())
        .await
        .map_err(|_| Status::unavailable("the server is stopping"))?
        .map_err(status)
}

#[tonic::async_trait]
impl Admin for AdminService {
    #[tracing::instrument(skip_all, fields(world = %request.get_ref().name))]
    async fn create_world(
        &self,
        request: Request<v1::CreateWorldRequest>,
    ) -> Result<Response<v1::CreateWorldResponse>, Status> {
        let request = request.into_inner();
        let registry = Arc::clone(&self.registry);
        let name = request.name.clone();
        let (tokens, owner) =
            to_the_end(async move { registry.create_world_placed(&name, request.ranks).await })
                .await?;
        Ok(Response::new(v1::CreateWorldResponse {
            name: request.name,
            tokens,
            owner: owner.unwrap_or_default(),
        }))
    }

    async fn list_worlds(
        &self,
        _request: Request<v1::ListWorldsRequest>,
    ) -> Result<Response<v1::ListWorldsResponse>, Status> {
        // in a cluster: every world of every node, from the store
        let listed = self
            .registry
            .placement()
            .worlds(&self.registry)
            .await
            .map_err(|error| status(RegistryError::Unavailable(format!("{error:#}"))))?;
        let worlds = listed
            .into_iter()
            .map(|(name, ranks, windows)| v1::WorldSummary {
                name,
                ranks,
                windows,
            })
            .collect();
        Ok(Response::new(v1::ListWorldsResponse { worlds }))
    }

    #[tracing::instrument(skip_all, fields(world = %request.get_ref().name))]
    async fn delete_world(
        &self,
        mut request: Request<v1::DeleteWorldRequest>,
    ) -> Result<Response<v1::DeleteWorldResponse>, Status> {
        let forward = |mut peer: Peer, call| async move { peer.delete_world(call).await };
        if let Some(answer) = self.forwarded(&mut request, |r| &r.name, forward).await? {
            return Ok(answer);
        }
        let by = operator::who(caller(&request));
        let registry = Arc::clone(&self.registry);
        let name = request.into_inner().name;
        operator::delete_world(registry, name, by).await?;
        Ok(Response::new(v1::DeleteWorldResponse {}))
    }

    #[tracing::instrument(skip_all, fields(world = %request.get_ref().world, window = %request.get_ref().name))]
    async fn create_window(
        &self,
        mut request: Request<v1::CreateWindowRequest>,
    ) -> Result<Response<v1::WindowDescription>, Status> {
        let forward = |mut peer: Peer, call| async move { peer.create_window(call).await };
        if let Some(answer) = self.forwarded(&mut request, |r| &r.world, forward).await? {
            return Ok(answer);
        }
        let request = request.into_inner();
        let flavor =
            onesided_proto::flavor_from_wire(request.flavor).map_err(|e| status_from_rma(&e))?;
        let model =
            onesided_proto::model_from_wire(request.model).map_err(|e| status_from_rma(&e))?;
        let info = WindowInfo::parse(
            request
                .info
                .iter()
                .map(|entry| (entry.key.as_str(), entry.value.as_str())),
        )
        .map_err(|e| status_from_rma(&e))?;
        let registry = Arc::clone(&self.registry);
        let desc = to_the_end(async move {
            registry
                .create_window(
                    &request.world,
                    crate::registry::NewWindow {
                        name: request.name,
                        flavor,
                        model,
                        sizes: request.sizes,
                        disp_units: request.disp_units,
                        info,
                        group: (!request.group.is_empty()).then_some(request.group),
                    },
                )
                .await
        })
        .await?;
        Ok(Response::new(desc_to_wire(&desc)))
    }

    async fn list_windows(
        &self,
        mut request: Request<v1::ListWindowsRequest>,
    ) -> Result<Response<v1::ListWindowsResponse>, Status> {
        let forward = |mut peer: Peer, call| async move { peer.list_windows(call).await };
        if let Some(answer) = self.forwarded(&mut request, |r| &r.world, forward).await? {
            return Ok(answer);
        }
        let windows = self
            .registry
            .list_windows(&request.get_ref().world)
            .map_err(status)?
            .iter()
            .map(|desc| desc_to_wire(desc))
            .collect();
        Ok(Response::new(v1::ListWindowsResponse { windows }))
    }

    async fn describe_window(
        &self,
        mut request: Request<v1::DescribeWindowRequest>,
    ) -> Result<Response<v1::WindowDescription>, Status> {
        let forward = |mut peer: Peer, call| async move { peer.describe_window(call).await };
        if let Some(answer) = self.forwarded(&mut request, |r| &r.world, forward).await? {
            return Ok(answer);
        }
        let request = request.into_inner();
        let entry = self.window(&request.world, &request.name)?;
        Ok(Response::new(desc_to_wire(&entry.now())))
    }

    #[tracing::instrument(skip_all, fields(world = %request.get_ref().world, window = %request.get_ref().name))]
    async fn free_window(
        &self,
        mut request: Request<v1::FreeWindowRequest>,
    ) -> Result<Response<v1::FreeWindowResponse>, Status> {
        let forward = |mut peer: Peer, call| async move { peer.free_window(call).await };
        if let Some(answer) = self.forwarded(&mut request, |r| &r.world, forward).await? {
            return Ok(answer);
        }
        let request = request.into_inner();
        let entry = self.window(&request.world, &request.name)?;
        for rank in &entry.ranks {
            let busy = rank.busy().await.map_err(|e| status_from_rma(&e))?;
            if let Some(reason) = busy {
                return Err(status_from_rma(&RmaError::new(
                    ErrorClass::RmaSync,
                    format!("window {} is in use: {reason}", request.name),
                )));
            }
        }
        Arc::clone(&self.registry)
            .remove_window(entry.desc.id)
            .await;
        tracing::info!("window freed by admin");
        Ok(Response::new(v1::FreeWindowResponse {}))
    }

    #[tracing::instrument(skip_all, fields(world = %request.get_ref().world, to = %request.get_ref().node_id))]
    async fn move_world(
        &self,
        mut request: Request<v1::MoveWorldRequest>,
    ) -> Result<Response<v1::MoveWorldResponse>, Status> {
        if !self.registry.placement().others_may_know() {
            return Err(not_clustered());
        }
        let forward = |mut peer: Peer, call| async move { peer.move_world(call).await };
        if let Some(answer) = self.forwarded(&mut request, |r| &r.world, forward).await? {
            return Ok(answer);
        }
        let request = request.into_inner();
        if !self.registry.has_world(&request.world) {
            return Err(status(RegistryError::NoWorld(request.world)));
        }
        let registry = Arc::clone(&self.registry);
        let owner = tokio::spawn(
            async move {
                registry
                    .placement()
                    .hand_over(&request.world, &request.node_id, &registry)
                    .await
            }
            .in_current_span(),
        )
        .await
        .map_err(|_| Status::unavailable("the server is stopping"))?
        .map_err(|error| {
            let (code, class) = match &error {
                MoveError::NoNode(_) => (Code::NotFound, ErrorClass::Arg),
                MoveError::Dead(_) => (Code::FailedPrecondition, ErrorClass::Arg),
                MoveError::NotHere(_) | MoveError::Store(_) => (Code::Unavailable, ErrorClass::Io),
                MoveError::Alone => (Code::FailedPrecondition, ErrorClass::Arg),
            };
            status_with_code(code, &RmaError::new(class, error.to_string()))
        })?;
        Ok(Response::new(v1::MoveWorldResponse { owner }))
    }

    #[tracing::instrument(skip_all, fields(world = %request.get_ref().world, rank = request.get_ref().rank))]
    async fn end_session(
        &self,
        mut request: Request<v1::EndSessionRequest>,
    ) -> Result<Response<v1::EndSessionResponse>, Status> {
        let forward = |mut peer: Peer, call| async move { peer.end_session(call).await };
        if let Some(answer) = self.forwarded(&mut request, |r| &r.world, forward).await? {
            return Ok(answer);
        }
        let by = operator::who(caller(&request));
        let request = request.into_inner();
        let registry = Arc::clone(&self.registry);
        let incarnation = operator::end_session(registry, request.world, request.rank, by).await?;
        tracing::info!(incarnation, "session ended by an operator");
        Ok(Response::new(v1::EndSessionResponse { incarnation }))
    }

    #[tracing::instrument(skip_all, fields(world = %request.get_ref().world, window = %request.get_ref().window, rank = request.get_ref().rank))]
    async fn revoke_locks(
        &self,
        mut request: Request<v1::RevokeLocksRequest>,
    ) -> Result<Response<v1::RevokeLocksResponse>, Status> {
        let forward = |mut peer: Peer, call| async move { peer.revoke_locks(call).await };
        if let Some(answer) = self.forwarded(&mut request, |r| &r.world, forward).await? {
            return Ok(answer);
        }
        let by = operator::who(caller(&request));
        let request = request.into_inner();
        let entry = self.window(&request.world, &request.window)?;
        let registry = Arc::clone(&self.registry);
        let (incarnation, targets) =
            operator::revoke_locks(registry, request.world, entry, request.rank, by).await?;
        tracing::info!(incarnation, ?targets, "locks revoked by an operator");
        Ok(Response::new(v1::RevokeLocksResponse {
            incarnation,
            targets,
        }))
    }

    async fn cluster_status(
        &self,
        _request: Request<v1::ClusterStatusRequest>,
    ) -> Result<Response<v1::ClusterStatusResponse>, Status> {
        let view = self
            .registry
            .placement()
            .status()
            .await
            .map_err(|error| status(RegistryError::Unavailable(format!("{error:#}"))))?
            .ok_or_else(not_clustered)?;
        Ok(Response::new(v1::ClusterStatusResponse {
            node_id: view.node_id,
            nodes: view
                .nodes
                .into_iter()
                .map(onesided_proto::admin_wire::node_to_wire)
                .collect(),
            lease_ttl_secs: view.lease_ttl.as_secs_f64(),
        }))
    }
}

impl AdminService {
    fn window(&self, world: &str, name: &str) -> Result<Arc<crate::registry::WindowEntry>, Status> {
        if self.registry.list_windows(world).is_err() {
            return Err(status(RegistryError::NoWorld(world.to_string())));
        }
        self.registry
            .window(world, name)
            .ok_or_else(|| status_from_rma(&onesided_core::window::unknown_window(name)))
    }
}
