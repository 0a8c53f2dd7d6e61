//! The directory of worlds, rank tokens and windows: the `Registry` itself, its lock and what
//! every concern of it shares (refusals, names, a window's bytes). Its methods live by concern
//! in `registry/`: worlds and tokens (`worlds.rs`), windows (`windows.rs`), a window's rank
//! actors (`ranks.rs`), sessions (`sessions.rs`), what recovery and the cluster hand it
//! (`handover.rs`), and the web view (`overview.rs`).
//!
//! Owns: names, tokens and the handles of each window's actors. It is a directory, not window
//! state: a short `RwLock` guards lookups and is never held across an `.await`. Must not: hold
//! anything an actor owns.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};

use onesided_core::error::quoted;
use onesided_core::window::WindowDesc;
use onesided_core::{ErrorClass, RmaError};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::audit::{AuditHandle, AuditStore};
use crate::limits::{Limits, WindowBytes};
use crate::metrics::{Holdings, Metrics};
use crate::world::{Directory, WorldHandle};

mod handover;
mod overview;
mod placement;
mod ranks;
mod sessions;
mod windows;
mod worlds;

pub use crate::world::NewWindow;
pub use handover::{desc_from_spec, RecoveredWindow};
pub use overview::{RankView, WorldView};
pub use placement::{Alone, ClusterView, MoveError, Placed, Placement, Served, Stopping};
pub use sessions::{Lease, SessionSlot};
pub use windows::WindowEntry;
pub use worlds::{token_hash, Membership};

struct World {
    nranks: u32,
    /// SHA-256 of each rank's token (the tokens themselves are only handed out).
    tokens: Vec<[u8; 32]>,
    collectives: WorldHandle,
    windows: BTreeMap<String, u64>,
}

// by hand, like Inner's: the derived forms would print every rank token's hash, which a log
// has no use for
impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("nranks", &self.nranks)
            .field("windows", &self.windows)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Inner {
    worlds: BTreeMap<String, World>,
    /// Names of worlds being created (their store rows are being written).
    reserved: std::collections::HashSet<String>,
    /// Token SHA-256 → (world, rank).
    tokens: HashMap<[u8; 32], (String, u32)>,
    windows: HashMap<u64, Arc<WindowEntry>>,
    next_window: u64,
    incarnations: HashMap<(String, u32), u64>,
    /// The live session of each attached rank.
    live: HashMap<(String, u32), LiveSession>,
}

#[derive(Debug)]
struct LiveSession {
    incarnation: u64,
    lease: Arc<Lease>,
    superseded: CancellationToken,
    /// Cancelled when an operator ends the session (Admin `EndSession`).
    ended_by_operator: CancellationToken,
    ended: watch::Receiver<bool>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("worlds", &self.worlds)
            .field("windows", &self.windows.len())
            .field("next_window", &self.next_window)
            .finish_non_exhaustive()
    }
}

/// Why an admin request was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The name is taken.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// No such world.
    #[error("no world named {0}")]
    NoWorld(String),
    /// Refused with an MPI class.
    #[error(transparent)]
    Rma(#[from] RmaError),
    /// The store did not take the change; nothing changed.
    #[error("the audit store is unavailable: {0}")]
    Unavailable(String),
}

/// A refusal of the registry as an MPI error, for a call of a session.
pub fn as_rma(error: &RegistryError) -> RmaError {
    match error {
        RegistryError::Rma(error) => error.clone(),
        RegistryError::AlreadyExists(what) => {
            RmaError::new(ErrorClass::Arg, format!("{what} already exists"))
        }
        RegistryError::NoWorld(world) => {
            RmaError::new(ErrorClass::Other, format!("no world named {world}"))
        }
        RegistryError::Unavailable(why) => RmaError::new(
            ErrorClass::Io,
            format!("the audit store is unavailable: {why}"),
        ),
    }
}

pub(crate) fn unavailable(error: anyhow::Error) -> RegistryError {
    RegistryError::Unavailable(format!("{error:#}"))
}

/// The directory.
#[derive(Debug)]
pub struct Registry {
    inner: RwLock<Inner>,
    me: Weak<Registry>,
    audit: AuditHandle,
    /// Where worlds and window shapes are kept across restarts (`None`: audit off).
    store: Option<AuditStore>,
    lease_ttl: Duration,
    limits: Limits,
    /// Bytes of all windows, those being created included, and of the regions attached to
    /// dynamic windows (their actors take and give back those).
    window_bytes: Arc<WindowBytes>,
    /// What sessions and actors record into.
    metrics: Arc<Metrics>,
    /// How long a new window's actors hold a shared lock request back behind a waiting
    /// exclusive one, in nanoseconds (core's `locks`).
    lock_fairness_ns: std::sync::atomic::AtomicU64,
    /// Where worlds live: a cluster's placement when set (once, before any world exists),
    /// else this node alone.
    placement: OnceLock<Arc<dyn Placement>>,
}

fn check_name(what: &str, name: &str) -> Result<(), RmaError> {
    let valid = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(RmaError::new(
            ErrorClass::Arg,
            format!(
                "{what} name {} must be 1 to 128 characters of letters, digits, _ - .",
                quoted(name)
            ),
        ))
    }
}

/// The bytes a window takes on the server (its sum passed [`Registry::room`], so it fits).
fn bytes_of(desc: &WindowDesc) -> u64 {
    desc.sizes.iter().sum()
}

impl Registry {
    /// An empty directory whose windows record into `audit` and get ids after `last_window`
    /// (the highest id the audit store has seen, so ids are never reused).
    /// Sessions that send nothing for `lease_ttl` are ended; `limits` bound what is created.
    /// With a `store`, worlds and windows are kept there too, so a restarted server can
    /// [`Registry::restore`] them.
    pub fn new(
        audit: AuditHandle,
        store: Option<AuditStore>,
        last_window: u64,
        lease_ttl: Duration,
        limits: Limits,
    ) -> Arc<Self> {
        Self::with_metrics(audit, store, last_window, lease_ttl, limits, Metrics::new())
    }

    /// [`Registry::new`] whose sessions and actors record into `metrics`.
    pub fn with_metrics(
        audit: AuditHandle,
        store: Option<AuditStore>,
        last_window: u64,
        lease_ttl: Duration,
        limits: Limits,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me: &Weak<Registry>| {
            // each scrape counts what the directory holds (a weak reference: no cycle)
            let directory = me.clone();
            metrics.count_holdings(move || directory.upgrade().map(|registry| registry.holdings()));
            Registry {
                inner: RwLock::new(Inner {
                    next_window: last_window,
                    ..Inner::default()
                }),
                me: me.clone(),
                audit,
                store,
                lease_ttl,
                window_bytes: Arc::new(WindowBytes::new(limits.max_window_bytes)),
                limits,
                metrics,
                lock_fairness_ns: std::sync::atomic::AtomicU64::new(
                    onesided_core::locks::DEFAULT_FAIRNESS.as_nanos() as u64,
                ),
                placement: OnceLock::new(),
            }
        })
    }

    /// What the directory holds now: its worlds, the windows whose actors run, and the window
    /// bytes taken from the limits (the metrics' gauges, at each scrape).
    pub fn holdings(&self) -> Holdings {
        let (worlds, windows) = {
            let inner = self.read();
            (inner.worlds.len(), inner.windows.len())
        };
        Holdings {
            worlds: worlds as u64,
            windows: windows as u64,
            window_bytes: self.window_bytes.in_use(),
            window_limit_bytes: self.window_bytes.limit(),
        }
    }

    /// Places this registry's worlds with `placement` (a cluster's: worlds are placed across
    /// nodes, window ids come from the database, and every window is noted for the audit's
    /// fencing) instead of this node alone. Set once, before any world exists.
    pub fn set_placement(&self, placement: Arc<dyn Placement>) {
        let _ = self.placement.set(placement);
    }

    /// Where worlds live.
    pub fn placement(&self) -> &dyn Placement {
        match self.placement.get() {
            Some(placement) => placement.as_ref(),
            None => &Alone,
        }
    }

    /// This registry itself, shared (what a placement that takes worlds up keeps).
    pub fn weak(&self) -> Weak<Registry> {
        self.me.clone()
    }

    /// The limits the server enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// How long a session may stay silent before its lease lapses.
    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    /// The audit writer windows record into.
    pub fn audit(&self) -> &AuditHandle {
        &self.audit
    }

    /// What sessions and actors record into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner
            .write()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// What a world's actor asks of the directory.
#[tonic::async_trait]
impl Directory for Registry {
    fn max_queued_message_bytes(&self) -> u64 {
        self.limits.max_queued_message_bytes
    }

    async fn create_window(&self, world: &str, window: NewWindow) -> Result<(), RmaError> {
        Registry::create_window(self, world, window)
            .await
            .map(drop)
            .map_err(|error| as_rma(&error))
    }

    async fn window_freed(self: Arc<Self>, window: u64) {
        self.remove_window(window).await;
    }

    async fn window_info_set(&self, window: u64, info: onesided_core::window::WindowInfo) {
        self.set_window_info(window, info).await;
    }
}
