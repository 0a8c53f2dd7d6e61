//! `onesided world …` and `onesided window …`: the admin side, an operator's actions on a
//! rank's session among them (`world end-session`, `window revoke-locks`).
//!
//! Also `onesided cluster …` (a cluster's status, moving a world).
//!
//! Owns: these commands' arguments (per-rank sizes, flavor, model, group, info, an element
//! type recorded as `onesided_element_type`), the `datatype` names the CLI accepts, and how
//! worlds, windows and cluster nodes are shown (tables, JSON). Must not: check a spec beyond
//! what the command line needs (the server refuses with its MPI class), talk to the server
//! except through the library's `Admin`, or print a token except the ones `world create` is
//! asked for.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use onesided_client::{Admin, Datatype, Flavor, MemoryModel, WindowDesc, WindowSpec};
use onesided_core::window::ELEMENT_TYPE_KEY;
use serde_json::json;

use crate::exit::Usage;
use crate::table::{self, Align::Left, Align::Right};
use crate::{json, Global};

#[derive(Debug, Subcommand)]
pub enum WorldCommand {
    /// Create a world of N ranks and print one token per rank
    Create {
        /// The world's name (letters, digits, _ - .)
        name: String,
        /// Number of ranks
        #[arg(long)]
        ranks: u32,
    },
    /// List the worlds
    Ls,
    /// Delete a world with its windows
    Rm {
        /// The world's name
        name: String,
    },
    /// End a rank's session as a lapsed lease would (its locks revoked, its pending calls
    /// failed; the others see it ended by an operator), audited
    EndSession {
        /// The world's name
        world: String,
        /// The rank whose session ends
        #[arg(long)]
        rank: u32,
    },
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// List the cluster's nodes: liveness, last heartbeat, the worlds each serves
    Status,
    /// Move a world to another node (its sessions end and attach again there)
    Move {
        /// The world's name
        world: String,
        /// The id of the node that is to serve it
        #[arg(long)]
        to: String,
    },
}

pub async fn cluster(global: &Global, command: ClusterCommand) -> Result<ExitCode> {
    let admin = connect(global).await?;
    match command {
        ClusterCommand::Move { world, to } => {
            let owner = admin.move_world(&world, &to).await?;
            if global.json {
                json::print(&json!({"world": world, "node_id": to, "owner": owner}));
            } else {
                outln!("world {world} is served by {to} at {owner}");
            }
        }
        ClusterCommand::Status => {
            let status = admin.cluster_status().await?;
            if global.json {
                let nodes: Vec<_> = status
                    .nodes
                    .iter()
                    .map(|node| {
                        json!({
                            "node_id": node.node_id,
                            "advertise": node.advertise,
                            "alive": node.alive,
                            "heartbeat_age_ms": node.heartbeat_age_ms,
                            "worlds": node.worlds,
                            "ranks": node.ranks,
                            "moving": node.moving,
                        })
                    })
                    .collect();
                json::print(&json!({
                    "answered_by": status.node_id,
                    "lease_ttl_secs": status.lease_ttl_secs,
                    "nodes": nodes,
                }));
            } else {
                table::print(
                    &[
                        ("NODE", Left),
                        ("ADDRESS", Left),
                        ("STATE", Left),
                        ("HEARTBEAT", Right),
                        ("RANKS", Right),
                        ("WORLDS", Left),
                    ],
                    status.nodes.iter().map(|node| {
                        table::row(&[
                            &node.node_id,
                            &node.advertise,
                            &if node.alive { "alive" } else { "dead" },
                            &format!("{} ms ago", node.heartbeat_age_ms),
                            &node.ranks,
                            &node.worlds.join(","),
                        ])
                    }),
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FlavorArg {
    /// MPI_WIN_CREATE: the ranks bring their memory
    Create,
    /// MPI_WIN_ALLOCATE: the service allocates it
    Allocate,
    /// MPI_WIN_CREATE_DYNAMIC: no memory at creation (size 0, disp_unit 1); each rank
    /// attaches regions
    Dynamic,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ModelArg {
    /// MPI_WIN_SEPARATE: stores and remote updates meet at synchronization calls
    Separate,
    /// MPI_WIN_UNIFIED: stores are published, and remote updates arrive, as they happen
    Unified,
}

impl From<ModelArg> for MemoryModel {
    fn from(model: ModelArg) -> Self {
        match model {
            ModelArg::Separate => MemoryModel::Separate,
            ModelArg::Unified => MemoryModel::Unified,
        }
    }
}

#[derive(Debug, Args)]
pub struct WindowCreate {
    /// The world
    #[arg(long)]
    world: String,
    /// The window's name
    name: String,
    /// Bytes per rank; a comma list gives each rank its own (8,16,0). Required, or --count,
    /// except for --flavor dynamic (0)
    #[arg(long, conflicts_with = "count")]
    size: Option<String>,
    /// Elements of --type per rank; a comma list gives each rank its own
    #[arg(long, requires = "dtype")]
    count: Option<String>,
    /// Element type (i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 byte …): disp_unit and --count
    /// unit; the window remembers it (info onesided_element_type), so get, put, acc, fop and cas
    /// need no --type for it
    #[arg(long = "type", value_name = "TYPE")]
    dtype: Option<String>,
    /// disp_unit in bytes (default: the size of --type, or 1; 1 for --flavor dynamic)
    #[arg(long)]
    disp_unit: Option<u32>,
    /// How the memory comes to be
    #[arg(long, value_enum, default_value = "allocate")]
    flavor: FlavorArg,
    /// The memory model
    #[arg(long, value_enum, default_value = "separate")]
    model: ModelArg,
    /// Span only these world ranks, numbered in this order (window rank r is the r-th); --ranks
    /// or --sizes then count the members. Default: every rank of the world
    #[arg(long, value_name = "RANK,RANK,...", value_delimiter = ',')]
    group: Vec<u32>,
    /// Info keys (no_locks=true, accumulate_ordering=none, accumulate_ops=same_op, …)
    #[arg(long, value_name = "KEY=VALUE")]
    info: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum WindowCommand {
    /// Create a window over every rank of a world
    Create(WindowCreate),
    /// List a world's windows
    Ls {
        /// The world
        #[arg(long)]
        world: String,
    },
    /// Describe one window
    Show {
        /// The world
        #[arg(long)]
        world: String,
        /// The window
        name: String,
    },
    /// Free a window no rank is using
    Free {
        /// The world
        #[arg(long)]
        world: String,
        /// The window
        name: String,
    },
    /// Revoke the locks a rank's session holds on a window, its session going on (its next
    /// call there fails with MPI_ERR_RMA_SYNC, the waiters are granted), audited
    RevokeLocks {
        /// The world
        #[arg(long)]
        world: String,
        /// The window
        name: String,
        /// The rank (in the world) whose locks are revoked
        #[arg(long)]
        rank: u32,
    },
}

async fn connect(global: &Global) -> Result<Admin> {
    let token = global.token("the admin token")?;
    Ok(Admin::connect(global.endpoint()?, token).await?)
}

/// Parses a datatype name given on the command line.
///
/// # Errors
/// A usage error for an unknown name.
pub fn datatype(text: &str) -> Result<Datatype> {
    Datatype::parse(text).ok_or_else(|| {
        Usage(format!(
            "unknown type \"{text}\" (i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 byte bool …)"
        ))
        .into()
    })
}

pub async fn world(global: &Global, command: WorldCommand) -> Result<ExitCode> {
    let admin = connect(global).await?;
    match command {
        WorldCommand::Create { name, ranks } => {
            let world = admin.create_world(&name, ranks).await?;
            if global.json {
                json::print(&json!({"world": world.name, "tokens": world.tokens}));
            } else {
                outln!("world {} with {} ranks", world.name, world.tokens.len());
                for (rank, token) in world.tokens.iter().enumerate() {
                    outln!("rank {rank}: {token}");
                }
            }
        }
        WorldCommand::Ls => {
            let worlds = admin.list_worlds().await?;
            if global.json {
                let list: Vec<_> = worlds
                    .iter()
                    .map(|w| json!({"name": w.name, "ranks": w.ranks, "windows": w.windows}))
                    .collect();
                json::print(&json!({ "worlds": list }));
            } else {
                table::print(
                    &[("NAME", Left), ("RANKS", Right), ("WINDOWS", Right)],
                    worlds
                        .iter()
                        .map(|w| table::row(&[&w.name, &w.ranks, &w.windows])),
                );
            }
        }
        WorldCommand::Rm { name } => {
            admin.delete_world(&name).await?;
            if global.json {
                json::print(&json!({"deleted": name}));
            }
        }
        WorldCommand::EndSession { world, rank } => {
            let incarnation = admin.end_session(&world, rank).await?;
            if global.json {
                json::print(&json!({"world": world, "rank": rank, "incarnation": incarnation}));
            } else {
                outln!("ended session {incarnation} of rank {rank} of world {world}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn per_rank(text: &str, ranks: u32, what: &str) -> Result<Vec<u64>> {
    let parsed: Result<Vec<u64>, _> = text.split(',').map(|part| part.trim().parse()).collect();
    let list = parsed.map_err(|_| Usage(format!("{what} must be a number or a comma list")))?;
    match list.len() {
        1 => Ok(vec![list[0]; ranks as usize]),
        n if n == ranks as usize => Ok(list),
        n => Err(Usage(format!("{n} values of {what} for a world of {ranks} ranks")).into()),
    }
}

pub fn desc_json(desc: &WindowDesc) -> serde_json::Value {
    json!({
        "name": desc.name,
        "id": desc.id,
        "world": desc.world,
        "flavor": desc.flavor.name(),
        "model": desc.model.name(),
        "sizes": desc.sizes,
        "disp_units": desc.disp_units,
        "info": desc.info.to_pairs().into_iter().collect::<std::collections::BTreeMap<_, _>>(),
        "group": desc.group,
    })
}

fn list(values: &[impl ToString]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

async fn create_window(global: &Global, admin: &Admin, args: WindowCreate) -> Result<()> {
    let worlds = admin.list_worlds().await?;
    let ranks = worlds
        .iter()
        .find(|w| w.name == args.world)
        .map(|w| w.ranks)
        .ok_or_else(|| onesided_client::Error::Status {
            code: tonic::Code::NotFound,
            message: format!("no world {}", args.world),
        })?;
    // a window over part of the world has one size per member
    let ranks = if args.group.is_empty() {
        ranks
    } else {
        args.group.len() as u32
    };
    let dtype = args.dtype.as_deref().map(datatype).transpose()?;
    let unit = dtype.map_or(1, |d| d.size() as u64);
    let sizes = match (&args.size, &args.count) {
        (Some(size), _) => per_rank(size, ranks, "--size")?,
        (None, Some(count)) => per_rank(count, ranks, "--count")?
            .into_iter()
            .map(|count| count * unit)
            .collect(),
        // a dynamic window has no memory at creation (the server refuses any)
        (None, None) if matches!(args.flavor, FlavorArg::Dynamic) => vec![0; ranks as usize],
        (None, None) => return Err(Usage("give --size or --count".into()).into()),
    };
    // a dynamic window's displacements are addresses: disp_unit 1, whatever the element type
    let disp_unit = match args.flavor {
        FlavorArg::Dynamic => args.disp_unit.unwrap_or(1),
        _ => args.disp_unit.unwrap_or(unit as u32),
    };
    let mut info = Vec::new();
    for pair in &args.info {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| Usage(format!("--info takes KEY=VALUE, not \"{pair}\"")))?;
        info.push((key.to_string(), value.to_string()));
    }
    // the window remembers its element type, so get/put/acc need no --type for it
    if let Some(dtype) = dtype {
        if !info.iter().any(|(key, _)| key == ELEMENT_TYPE_KEY) {
            info.push((ELEMENT_TYPE_KEY.to_string(), dtype.name().to_string()));
        }
    }
    let spec = WindowSpec {
        name: args.name,
        flavor: match args.flavor {
            FlavorArg::Create => Flavor::Create,
            FlavorArg::Allocate => Flavor::Allocate,
            FlavorArg::Dynamic => Flavor::Dynamic,
        },
        model: args.model.into(),
        sizes,
        disp_units: vec![disp_unit; ranks as usize],
        info,
        group: (!args.group.is_empty()).then_some(args.group),
    };
    let desc = admin.create_window(&args.world, &spec).await?;
    if global.json {
        json::print(&desc_json(&desc));
    } else {
        outln!(
            "window {} (id {}) on world {}",
            desc.name,
            desc.id,
            desc.world
        );
    }
    Ok(())
}

pub async fn window(global: &Global, command: WindowCommand) -> Result<ExitCode> {
    let admin = connect(global).await?;
    match command {
        WindowCommand::Create(args) => create_window(global, &admin, args).await?,
        WindowCommand::Ls { world } => {
            let windows = admin.list_windows(&world).await?;
            if global.json {
                let list: Vec<_> = windows.iter().map(desc_json).collect();
                json::print(&json!({ "windows": list }));
            } else {
                table::print(
                    &[
                        ("NAME", Left),
                        ("ID", Right),
                        ("FLAVOR", Left),
                        ("TYPE", Left),
                        ("SIZES", Left),
                        ("DISP_UNITS", Left),
                    ],
                    windows.iter().map(|w| {
                        table::row(&[
                            &w.name,
                            &w.id,
                            &w.flavor.name(),
                            &w.info
                                .element_type
                                .map_or_else(|| "-".to_string(), |t| t.name().to_string()),
                            &list(&w.sizes),
                            &list(&w.disp_units),
                        ])
                    }),
                );
            }
        }
        WindowCommand::Show { world, name } => {
            let desc = admin.describe_window(&world, &name).await?;
            if global.json {
                json::print(&desc_json(&desc));
            } else {
                outln!("name:       {}", desc.name);
                outln!("id:         {}", desc.id);
                outln!("world:      {}", desc.world);
                outln!("flavor:     {}", desc.flavor.name());
                outln!("model:      {}", desc.model.name());
                outln!("group:      {}", list(&desc.group));
                outln!("sizes:      {}", list(&desc.sizes));
                outln!("disp_units: {}", list(&desc.disp_units));
                for (key, value) in desc.info.to_pairs() {
                    outln!("info:       {key}={value}");
                }
            }
        }
        WindowCommand::Free { world, name } => {
            admin.free_window(&world, &name).await?;
            if global.json {
                json::print(&json!({"freed": name}));
            }
        }
        WindowCommand::RevokeLocks { world, name, rank } => {
            let (incarnation, targets) = admin.revoke_locks(&world, &name, rank).await?;
            if global.json {
                json::print(&json!({
                    "world": world,
                    "window": name,
                    "rank": rank,
                    "incarnation": incarnation,
                    "targets": targets,
                }));
            } else {
                outln!(
                    "revoked the locks of rank {rank} (session {incarnation}) on window {name} \
                     at targets {}",
                    list(&targets)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
