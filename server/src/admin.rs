//! The Admin gRPC service: worlds and windows. Authenticated with the admin token by
//! [`crate::auth`] before any request reaches it.
//!
//! Owns: conversion between admin requests and the registry. Must not: hold semantics.

use std::sync::Arc;

use onesided_core::error::quoted;
use onesided_core::window::WindowInfo;
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::desc_to_wire;
use onesided_proto::v1::{self, admin_server::Admin};
use onesided_proto::{status_from_rma, status_with_code};
use tonic::{Code, Request, Response, Status};
use tracing::Instrument;

use crate::registry::{Registry, RegistryError};

/// The Admin service.
#[derive(Debug, Clone)]
pub struct AdminService {
    registry: Arc<Registry>,
}

impl AdminService {
    /// The service over `registry`.
    pub fn new(registry: Arc<Registry>) -> Self {
        AdminService { registry }
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
        let tokens =
            to_the_end(async move { registry.create_world(&name, request.ranks).await }).await?;
        Ok(Response::new(v1::CreateWorldResponse {
            name: request.name,
            tokens,
        }))
    }

    async fn list_worlds(
        &self,
        _request: Request<v1::ListWorldsRequest>,
    ) -> Result<Response<v1::ListWorldsResponse>, Status> {
        let worlds = self
            .registry
            .list_worlds()
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
        request: Request<v1::DeleteWorldRequest>,
    ) -> Result<Response<v1::DeleteWorldResponse>, Status> {
        let registry = Arc::clone(&self.registry);
        let name = request.into_inner().name;
        to_the_end(async move { registry.delete_world(&name).await }).await?;
        Ok(Response::new(v1::DeleteWorldResponse {}))
    }

    #[tracing::instrument(skip_all, fields(world = %request.get_ref().world, window = %request.get_ref().name))]
    async fn create_window(
        &self,
        request: Request<v1::CreateWindowRequest>,
    ) -> Result<Response<v1::WindowDescription>, Status> {
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
                    &request.name,
                    flavor,
                    model,
                    request.sizes,
                    request.disp_units,
                    info,
                )
                .await
        })
        .await?;
        Ok(Response::new(desc_to_wire(&desc)))
    }

    async fn list_windows(
        &self,
        request: Request<v1::ListWindowsRequest>,
    ) -> Result<Response<v1::ListWindowsResponse>, Status> {
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
        request: Request<v1::DescribeWindowRequest>,
    ) -> Result<Response<v1::WindowDescription>, Status> {
        let request = request.into_inner();
        let entry = self.window(&request.world, &request.name)?;
        Ok(Response::new(desc_to_wire(&entry.desc)))
    }

    #[tracing::instrument(skip_all, fields(world = %request.get_ref().world, window = %request.get_ref().name))]
    async fn free_window(
        &self,
        request: Request<v1::FreeWindowRequest>,
    ) -> Result<Response<v1::FreeWindowResponse>, Status> {
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
        Arc::clone(&self.registry).remove_window(entry.desc.id);
        tracing::info!("window freed by admin");
        Ok(Response::new(v1::FreeWindowResponse {}))
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
