//! The admin side: worlds and windows.
//!
//! Owns: `Admin`, the admin token's connection and its calls (worlds created, listed and
//! deleted; windows created, listed, described and freed; a world moved; the cluster's status),
//! each bounded by the endpoint's `timeout`; `WindowSpec`, the builder of a new window (one
//! element type's `of` records it in `onesided_element_type`); and the answers' plain types
//! but `ClusterNode`, which the server builds too (proto's `admin_wire`, re-exported here).
//! Must not: validate a spec beyond building it (the server refuses a bad one with its MPI
//! class), keep any state of the worlds it creates, hold a rank token after returning it, or
//! map an answer field by field that proto maps.

use onesided_core::window::{Flavor, MemoryModel, WindowDesc, ELEMENT_TYPE_KEY};
use onesided_proto::v1::{self, admin_client::AdminClient};

use crate::connect::{AdminChannel, CallLimit, Endpoint};
use crate::element::Element;
use crate::error::{Error, Result};

/// A world as created: its name and one token per rank (index = rank).
#[derive(Clone, PartialEq, Eq)]
pub struct WorldTokens {
    /// The world's name.
    pub name: String,
    /// The rank tokens.
    pub tokens: Vec<String>,
}

impl std::fmt::Debug for WorldTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorldTokens")
            .field("name", &self.name)
            .field("ranks", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

/// One line of `list_worlds`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldSummary {
    /// Name.
    pub name: String,
    /// Number of ranks.
    pub ranks: u32,
    /// Number of windows.
    pub windows: u32,
}

/// One node of a cluster ([`Admin::cluster_status`]): proto's plain type, which the server
/// builds too, so the two map it the same way.
pub use onesided_proto::admin_wire::ClusterNode;

/// A cluster as one of its nodes sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterStatus {
    /// The node that answered.
    pub node_id: String,
    /// Every node that ever joined, by id.
    pub nodes: Vec<ClusterNode>,
    /// Seconds a node's and a world's lease lasts without renewal.
    pub lease_ttl_secs: f64,
}

/// What a new window looks like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowSpec {
    /// Name, unique in its world.
    pub name: String,
    /// `create` or `allocate` (default).
    pub flavor: Flavor,
    /// `separate` (default) or `unified`.
    pub model: MemoryModel,
    /// Per-rank size in bytes.
    pub sizes: Vec<u64>,
    /// Per-rank disp_unit in bytes.
    pub disp_units: Vec<u32>,
    /// Info keys (`no_locks`, `accumulate_ordering`, `accumulate_ops`, …).
    pub info: Vec<(String, String)>,
    /// The window's group: the world ranks it spans, window rank `r` being `group[r]`
    /// (`sizes` and `disp_units` then have one entry per member); `None`: the whole world.
    pub group: Option<Vec<u32>>,
}

impl WindowSpec {
    /// `nranks` ranks exposing `count` elements of `T` each, disp_unit = size of `T`; the
    /// window records `T` as its element type (info key `onesided_element_type`), which the
    /// `onesided` CLI uses when no `--type` is given.
    pub fn of<T: Element>(name: &str, nranks: u32, count: u64) -> Self {
        let unit = std::mem::size_of::<T>() as u64;
        WindowSpec::bytes(name, nranks, count * unit, unit as u32)
            .info(ELEMENT_TYPE_KEY, T::DATATYPE.name())
    }

    /// `nranks` ranks exposing `size` bytes each with `disp_unit`.
    pub fn bytes(name: &str, nranks: u32, size: u64, disp_unit: u32) -> Self {
        WindowSpec {
            name: name.to_string(),
            flavor: Flavor::Allocate,
            model: MemoryModel::Separate,
            sizes: vec![size; nranks as usize],
            disp_units: vec![disp_unit; nranks as usize],
            info: Vec::new(),
            group: None,
        }
    }

    /// Adds an info key.
    pub fn info(mut self, key: &str, value: &str) -> Self {
        self.info.push((key.to_string(), value.to_string()));
        self
    }

    /// Sets the flavor. A window of [`Flavor::Dynamic`] has sizes 0 and disp_units 1
    /// (`WindowSpec::bytes(name, n, 0, 1)`); the server refuses another size with
    /// `MPI_ERR_SIZE` and another disp_unit with `MPI_ERR_DISP`.
    pub fn flavor(mut self, flavor: Flavor) -> Self {
        self.flavor = flavor;
        self
    }

    /// Spans only these world ranks, numbered in this order (window rank `r` is world rank
    /// `group[r]`); the spec must have one size and disp_unit per member.
    pub fn group(mut self, group: &[u32]) -> Self {
        self.group = Some(group.to_vec());
        self
    }

    /// Sets the memory model.
    pub fn model(mut self, model: MemoryModel) -> Self {
        self.model = model;
        self
    }
}

/// A window description from the wire (proto's one mapping).
///
/// # Errors
/// [`Error::Protocol`] for a description this library cannot read.
pub fn desc_from_wire(desc: v1::WindowDescription) -> Result<WindowDesc> {
    onesided_proto::desc_from_wire(desc).map_err(|error| Error::Protocol(error.to_string()))
}

/// An admin connection.
#[derive(Clone, Debug)]
pub struct Admin {
    client: AdminClient<AdminChannel>,
    limit: CallLimit,
}

impl Admin {
    /// Connects to the server (a URL or an [`Endpoint`]) with the admin token.
    ///
    /// # Errors
    /// [`Error::Connect`] when nobody answers or TLS fails.
    pub async fn connect(server: impl Into<Endpoint>, token: &str) -> Result<Self> {
        let (channel, limit) = server.into().admin_channel(token).await?;
        Ok(Admin {
            client: AdminClient::new(channel),
            limit,
        })
    }

    /// Creates a world of `ranks` ranks.
    ///
    /// # Errors
    /// A taken name (ALREADY_EXISTS), a bad name or size (`MPI_ERR_ARG`).
    pub async fn create_world(&self, name: &str, ranks: u32) -> Result<WorldTokens> {
        let response = self
            .limit
            .bound(self.client.clone().create_world(v1::CreateWorldRequest {
                name: name.to_string(),
                ranks,
            }))
            .await?
            .into_inner();
        Ok(WorldTokens {
            name: response.name,
            tokens: response.tokens,
        })
    }

    /// Every world.
    ///
    /// # Errors
    /// Transport failures.
    pub async fn list_worlds(&self) -> Result<Vec<WorldSummary>> {
        let response = self
            .limit
            .bound(self.client.clone().list_worlds(v1::ListWorldsRequest {}))
            .await?
            .into_inner();
        Ok(response
            .worlds
            .into_iter()
            .map(|world| WorldSummary {
                name: world.name,
                ranks: world.ranks,
                windows: world.windows,
            })
            .collect())
    }

    /// Deletes a world with its windows.
    ///
    /// # Errors
    /// NOT_FOUND for an unknown world.
    pub async fn delete_world(&self, name: &str) -> Result<()> {
        self.limit
            .bound(self.client.clone().delete_world(v1::DeleteWorldRequest {
                name: name.to_string(),
            }))
            .await?;
        Ok(())
    }

    /// Creates a window on `world`.
    ///
    /// # Errors
    /// `MPI_ERR_SIZE`, `MPI_ERR_DISP`, `MPI_ERR_INFO`, ALREADY_EXISTS, NOT_FOUND.
    pub async fn create_window(&self, world: &str, spec: &WindowSpec) -> Result<WindowDesc> {
        let request = v1::CreateWindowRequest {
            world: world.to_string(),
            name: spec.name.clone(),
            flavor: onesided_proto::flavor_to_wire(spec.flavor),
            model: onesided_proto::model_to_wire(spec.model),
            group: spec.group.clone().unwrap_or_default(),
            sizes: spec.sizes.clone(),
            disp_units: spec.disp_units.clone(),
            info: crate::session::info_to_wire(&spec.info),
        };
        let desc = self
            .limit
            .bound(self.client.clone().create_window(request))
            .await?
            .into_inner();
        desc_from_wire(desc)
    }

    /// Every window of `world`.
    ///
    /// # Errors
    /// NOT_FOUND for an unknown world.
    pub async fn list_windows(&self, world: &str) -> Result<Vec<WindowDesc>> {
        let response = self
            .limit
            .bound(self.client.clone().list_windows(v1::ListWindowsRequest {
                world: world.to_string(),
            }))
            .await?
            .into_inner();
        response.windows.into_iter().map(desc_from_wire).collect()
    }

    /// One window.
    ///
    /// # Errors
    /// `MPI_ERR_WIN` for an unknown window.
    pub async fn describe_window(&self, world: &str, name: &str) -> Result<WindowDesc> {
        let desc = self
            .limit
            .bound(
                self.client
                    .clone()
                    .describe_window(v1::DescribeWindowRequest {
                        world: world.to_string(),
                        name: name.to_string(),
                    }),
            )
            .await?
            .into_inner();
        desc_from_wire(desc)
    }

    /// Frees a window that no rank is using.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_SYNC` while a rank holds a lock, is posted or has operations pending;
    /// `MPI_ERR_WIN` for an unknown window.
    pub async fn free_window(&self, world: &str, name: &str) -> Result<()> {
        self.limit
            .bound(self.client.clone().free_window(v1::FreeWindowRequest {
                world: world.to_string(),
                name: name.to_string(),
            }))
            .await?;
        Ok(())
    }

    /// Moves `world` to the cluster node `node_id` (a drain): its sessions end, and attach
    /// again there through any node. Returns the address of the node serving it now.
    ///
    /// # Errors
    /// NOT_FOUND for an unknown world or node, FAILED_PRECONDITION for a node that is not
    /// alive or a server that is not part of a cluster.
    pub async fn move_world(&self, world: &str, node_id: &str) -> Result<String> {
        let response = self
            .limit
            .bound(self.client.clone().move_world(v1::MoveWorldRequest {
                world: world.to_string(),
                node_id: node_id.to_string(),
            }))
            .await?
            .into_inner();
        Ok(response.owner)
    }

    /// Ends the live session of world rank `rank` of `world`, as a lapsed lease would (its
    /// locks revoked, its pending calls failed; other ranks see it ended by an operator), and
    /// records it in the audit log. Returns the ended session's incarnation, once its
    /// departure is handled.
    ///
    /// # Errors
    /// NOT_FOUND for an unknown world (`MPI_ERR_ARG`), INVALID_ARGUMENT for a rank outside it
    /// (`MPI_ERR_RANK`), FAILED_PRECONDITION when the rank has no session (`MPI_ERR_ARG`).
    pub async fn end_session(&self, world: &str, rank: u32) -> Result<u64> {
        let response = self
            .limit
            .bound(self.client.clone().end_session(v1::EndSessionRequest {
                world: world.to_string(),
                rank,
            }))
            .await?
            .into_inner();
        Ok(response.incarnation)
    }

    /// Revokes the locks the live session of world rank `rank` holds on `window` of `world`,
    /// while the session goes on (its next call in that lock epoch fails with
    /// `MPI_ERR_RMA_SYNC`, the waiters are granted), and records it in the audit log. Returns
    /// the session's incarnation and the targets (ranks in the window) where a lock was
    /// revoked.
    ///
    /// # Errors
    /// NOT_FOUND for an unknown world (`MPI_ERR_ARG`) or window (`MPI_ERR_WIN`),
    /// INVALID_ARGUMENT for a rank outside the world or the window's group (`MPI_ERR_RANK`),
    /// FAILED_PRECONDITION when the rank has no session (`MPI_ERR_ARG`) or holds no lock on
    /// the window (`MPI_ERR_RMA_SYNC`).
    pub async fn revoke_locks(
        &self,
        world: &str,
        window: &str,
        rank: u32,
    ) -> Result<(u64, Vec<u32>)> {
        let response = self
            .limit
            .bound(self.client.clone().revoke_locks(v1::RevokeLocksRequest {
                world: world.to_string(),
                window: window.to_string(),
                rank,
            }))
            .await?
            .into_inner();
        Ok((response.incarnation, response.targets))
    }

    /// The nodes of the cluster the server belongs to, their liveness and their worlds.
    ///
    /// # Errors
    /// FAILED_PRECONDITION from a server that is not part of a cluster.
    pub async fn cluster_status(&self) -> Result<ClusterStatus> {
        let response = self
            .limit
            .bound(
                self.client
                    .clone()
                    .cluster_status(v1::ClusterStatusRequest {}),
            )
            .await?
            .into_inner();
        Ok(ClusterStatus {
            node_id: response.node_id,
            nodes: response
                .nodes
                .into_iter()
                .map(onesided_proto::admin_wire::node_from_wire)
                .collect(),
            lease_ttl_secs: response.lease_ttl_secs,
        })
    }
}
