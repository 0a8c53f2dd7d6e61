//! The directory of worlds, rank tokens and windows.
//!
//! Owns: names, tokens and the handles of each window's actors. It is a directory, not window
//! state: a short `RwLock` guards lookups and is never held across an `.await`. Must not: hold
//! anything an actor owns.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};

use onesided_core::error::quoted;
use onesided_core::fence::FenceTally;
use onesided_core::window::{Flavor, MemoryModel, WindowDesc, WindowInfo};
use onesided_core::{ErrorClass, RmaError};
use rand::Rng;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use onesided_core::audit::Event;

use crate::actor::{Dynamic, RankStart, WindowLog, WindowServerHandle};
use crate::audit::{AuditHandle, AuditStore, Durability, Pending, StoredWindow, StoredWorld};
use crate::cluster::Cluster;
use crate::limits::{exhausted, Limits, WindowBytes};
use crate::metrics::Metrics;
use crate::world::WorldHandle;

/// A window: its description and the address of each rank's actor.
#[derive(Debug)]
pub struct WindowEntry {
    /// What every rank knows about it.
    pub desc: Arc<WindowDesc>,
    /// One actor per rank, index = rank.
    pub ranks: Vec<WindowServerHandle>,
    /// Which ranks entered which fence: the last to enter tells every rank's actor.
    pub fences: Mutex<FenceTally>,
    /// The description with the info in use: `desc` until `MPI_Win_set_info` changed it.
    current: std::sync::RwLock<Arc<WindowDesc>>,
}

impl WindowEntry {
    /// The window `desc` served by `ranks`, no fence entered yet.
    pub fn new(desc: Arc<WindowDesc>, ranks: Vec<WindowServerHandle>) -> Self {
        let fences = Mutex::new(FenceTally::new(desc.nranks()));
        WindowEntry {
            current: std::sync::RwLock::new(Arc::clone(&desc)),
            desc,
            ranks,
            fences,
        }
    }

    /// What every rank knows about the window now: its description with the info in use
    /// (`desc` has the creation's).
    pub fn now(&self) -> Arc<WindowDesc> {
        Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(|poison| poison.into_inner()),
        )
    }

    fn set_info(&self, info: WindowInfo) -> Arc<WindowDesc> {
        let mut now = self
            .current
            .write()
            .unwrap_or_else(|poison| poison.into_inner());
        let mut desc = (**now).clone();
        desc.info = info;
        *now = Arc::new(desc);
        Arc::clone(&now)
    }
}

/// A world, as a session sees it after authenticating.
#[derive(Clone, Debug)]
pub struct Membership {
    /// World name.
    pub world: String,
    /// The session's rank.
    pub rank: u32,
    /// World size.
    pub nranks: u32,
    /// The world's collective actor.
    pub collectives: WorldHandle,
}

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
    ended: watch::Receiver<bool>,
}

/// A session's place in the directory: its incarnation, the token that ends it when a newer
/// incarnation of its rank attaches, and the session it replaces.
#[derive(Debug)]
pub struct SessionSlot {
    /// How many sessions of this rank came before, plus one.
    pub incarnation: u64,
    /// Cancelled when a newer incarnation of the rank attaches.
    pub superseded: CancellationToken,
    /// Set once this session's departure is handled everywhere.
    pub ended: watch::Sender<bool>,
    /// The previous live session of the rank: end it, then wait until its departure is handled.
    pub previous: Option<(CancellationToken, watch::Receiver<bool>)>,
    /// When the session's lease lapses unless it hears from the client (the session renews
    /// it; the web view reads it).
    pub lease: Arc<Lease>,
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

fn unavailable(error: anyhow::Error) -> RegistryError {
    RegistryError::Unavailable(format!("{error:#}"))
}

/// SHA-256 of a token: the directory and the store keep only this.
pub fn token_hash(token: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes()).into()
}

/// The JSON a window's shape and info are stored as.
fn spec_json(desc: &WindowDesc) -> String {
    let info: serde_json::Map<String, serde_json::Value> = desc
        .info
        .to_pairs()
        .into_iter()
        .map(|(key, value)| (key, serde_json::Value::String(value)))
        .collect();
    serde_json::json!({
        "flavor": desc.flavor.name(),
        "model": desc.model.name(),
        "sizes": desc.sizes,
        "disp_units": desc.disp_units,
        "info": info,
        "group": desc.group,
    })
    .to_string()
}

/// A window rebuilt from the store: its description and every rank's public copy.
#[derive(Debug)]
pub struct RecoveredWindow {
    /// The description.
    pub desc: WindowDesc,
    /// Public copies, index = rank.
    pub copies: Vec<Vec<u8>>,
    /// A dynamic window's attached regions (offset → size), index = rank; empty otherwise.
    pub regions: Vec<std::collections::BTreeMap<u64, u64>>,
    /// How many rows of the log were read to rebuild it (after the ranks' oldest snapshot,
    /// and a dynamic window's regions before it).
    pub replayed: usize,
    /// What the rows after the oldest snapshot count towards the next round of snapshots
    /// ([`crate::actor::logged_bytes`]).
    pub logged: u64,
}

/// Parses a stored spec back into a description.
///
/// # Errors
/// A spec this version cannot read.
pub fn desc_from_spec(id: u64, world: &str, name: &str, spec: &str) -> anyhow::Result<WindowDesc> {
    use anyhow::Context;
    #[derive(serde::Deserialize)]
    struct Spec {
        flavor: String,
        /// Absent in specs stored before the unified model was offered: separate.
        #[serde(default)]
        model: Option<String>,
        sizes: Vec<u64>,
        disp_units: Vec<u32>,
        info: BTreeMap<String, String>,
        /// Absent in specs stored before groups: the whole world.
        #[serde(default)]
        group: Option<Vec<u32>>,
    }
    let spec: Spec = serde_json::from_str(spec).context("unreadable window spec")?;
    let flavor =
        Flavor::parse(&spec.flavor).with_context(|| format!("unknown flavor {:?}", spec.flavor))?;
    let model = match &spec.model {
        None => MemoryModel::Separate,
        Some(model) => {
            MemoryModel::parse(model).with_context(|| format!("unknown memory model {model:?}"))?
        }
    };
    let info = WindowInfo::parse(spec.info.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    Ok(WindowDesc {
        id,
        name: name.to_string(),
        world: world.to_string(),
        flavor,
        model,
        group: spec
            .group
            .unwrap_or_else(|| WindowDesc::whole_world(spec.sizes.len() as u32)),
        sizes: spec.sizes,
        disp_units: spec.disp_units,
        info,
    })
}

/// A window to create ([`Registry::create_window`]): all of its description but its id and
/// world.
#[derive(Clone, Debug)]
pub struct NewWindow {
    /// Its name, unique in the world.
    pub name: String,
    /// How its memory came to be.
    pub flavor: Flavor,
    /// Its memory model.
    pub model: MemoryModel,
    /// Each rank's size in bytes.
    pub sizes: Vec<u64>,
    /// Each rank's displacement unit.
    pub disp_units: Vec<u32>,
    /// Its info.
    pub info: WindowInfo,
    /// The world's ranks it spans, in window-rank order (`None`: the whole world).
    pub group: Option<Vec<u32>>,
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
    /// In a cluster, this node's part in it (set once, before any world exists).
    cluster: OnceLock<Arc<Cluster>>,
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
/// Takes world `name` out of the directory with its tokens and windows (their bytes given
/// back); returns it and its windows, whose actors the caller stops or abandons.
fn take_world(
    inner: &mut Inner,
    window_bytes: &WindowBytes,
    name: &str,
) -> Option<(World, Vec<Arc<WindowEntry>>)> {
    let world = inner.worlds.remove(name)?;
    for token in &world.tokens {
        inner.tokens.remove(token);
    }
    let mut windows = Vec::new();
    for id in world.windows.values() {
        if let Some(entry) = inner.windows.remove(id) {
            window_bytes.give_back(bytes_of(&entry.desc));
            windows.push(entry);
        }
    }
    Some((world, windows))
}

fn bytes_of(desc: &WindowDesc) -> u64 {
    desc.sizes.iter().sum()
}

fn new_token() -> String {
    let bytes: [u8; 24] = rand::rng().random();
    hex::encode(bytes)
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
        Arc::new_cyclic(|me| Registry {
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
            cluster: OnceLock::new(),
        })
    }

    /// Makes this registry a cluster node's: worlds are placed across nodes, window ids come
    /// from the database, and every window is noted for the audit's fencing.
    pub fn set_cluster(&self, cluster: Arc<Cluster>) {
        cluster.serve_from(self.me.clone());
        let _ = self.cluster.set(cluster);
    }

    /// This node's part in a cluster, if it is in one.
    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.get()
    }

    /// Sets how long windows created from now on hold a shared lock request back behind a
    /// waiting exclusive one (at most; see core's `locks`).
    pub fn set_lock_fairness(&self, fairness: Duration) {
        let nanos = u64::try_from(fairness.as_nanos()).unwrap_or(u64::MAX);
        self.lock_fairness_ns
            .store(nanos, std::sync::atomic::Ordering::Relaxed);
    }

    /// Starts the actors of `desc`'s ranks with their public copies (and a dynamic window's
    /// regions, by rank): one window log shared by all of them, `logged` bytes of it since the
    /// ranks' snapshots.
    fn spawn_ranks(
        &self,
        desc: &WindowDesc,
        copies: Vec<Vec<u8>>,
        regions: Vec<BTreeMap<u64, u64>>,
        logged: u64,
    ) -> Vec<WindowServerHandle> {
        let span = copies.iter().map(|copy| copy.len() as u64).sum();
        let log = WindowLog::new(span, logged);
        copies
            .into_iter()
            .enumerate()
            .map(|(rank, copy)| {
                let dynamic = (desc.flavor == Flavor::Dynamic).then(|| Dynamic {
                    max_bytes: self.limits.max_window_bytes_per_rank,
                    regions: regions.get(rank).cloned().unwrap_or_default(),
                    window_bytes: Arc::clone(&self.window_bytes),
                });
                let start = RankStart {
                    window: desc.id,
                    rank: rank as u32,
                    nranks: desc.nranks(),
                    model: desc.model,
                    public: copy,
                    dynamic,
                    lock_fairness: self.lock_fairness(),
                    log: Arc::clone(&log),
                };
                WindowServerHandle::spawn(start, self.audit.clone(), Arc::clone(&self.metrics))
            })
            .collect()
    }

    fn lock_fairness(&self) -> Duration {
        Duration::from_nanos(
            self.lock_fairness_ns
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Brings back what a previous run of the server left in the store: every world with its
    /// tokens, every window not freed with its public copies, and the rank incarnations.
    pub fn restore(
        &self,
        worlds: Vec<StoredWorld>,
        windows: Vec<RecoveredWindow>,
        incarnations: Vec<(String, u32, u64)>,
    ) {
        let mut inner = self.write();
        for world in worlds {
            let mut tokens = vec![[0u8; 32]; world.nranks as usize];
            for (hash, rank) in &world.tokens {
                if let Some(slot) = tokens.get_mut(*rank as usize) {
                    *slot = *hash;
                }
                inner.tokens.insert(*hash, (world.name.clone(), *rank));
            }
            let collectives = WorldHandle::spawn(&world.name, world.nranks, self.me.clone());
            inner.worlds.insert(
                world.name.clone(),
                World {
                    nranks: world.nranks,
                    tokens,
                    collectives,
                    windows: BTreeMap::new(),
                },
            );
        }
        for window in windows {
            let desc = Arc::new(window.desc);
            let Some(world) = inner.worlds.get_mut(&desc.world) else {
                continue;
            };
            world.windows.insert(desc.name.clone(), desc.id);
            let ranks = self.spawn_ranks(&desc, window.copies, window.regions, window.logged);
            inner.next_window = inner.next_window.max(desc.id);
            if let Some(cluster) = self.cluster() {
                cluster.note_window(desc.id, &desc.world);
            }
            // counted even past a limit lowered since: new windows wait for room
            self.window_bytes.take_anyway(bytes_of(&desc));
            tracing::info!(world = %desc.world, window = %desc.name, id = desc.id, "window recovered");
            inner
                .windows
                .insert(desc.id, Arc::new(WindowEntry::new(desc, ranks)));
        }
        for (world, rank, incarnation) in incarnations {
            let count = inner.incarnations.entry((world, rank)).or_insert(0);
            *count = (*count).max(incarnation);
        }
    }

    /// The limits the server enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// How long a session may stay silent before its lease lapses.
    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    /// A new session of `rank` of `world`: its incarnation (1 for the rank's first session)
    /// becomes the rank's live one.
    pub fn begin_session(&self, world: &str, rank: u32) -> SessionSlot {
        self.succeed_session(world, rank, None)
            .expect("a session that succeeds no incarnation is always begun")
    }

    /// [`Registry::begin_session`] for a client re-attaching by itself after its session was
    /// lost, as the successor of incarnation `succeeds` when given: refused (with the rank's
    /// latest incarnation) when the rank attached again since — a newer incarnation than the
    /// one the client lost exists, and it must not be superseded by a client that only
    /// followed a failover. Accepted, the new incarnation is above `succeeds` even where the
    /// store's log (a node that took the world up rebuilds the counts from it) did not
    /// record the lost one.
    ///
    /// # Errors
    /// The rank's latest incarnation, when it is newer than `succeeds`.
    pub fn succeed_session(
        &self,
        world: &str,
        rank: u32,
        succeeds: Option<u64>,
    ) -> Result<SessionSlot, u64> {
        let mut inner = self.write();
        let key = (world.to_string(), rank);
        let count = inner.incarnations.entry(key.clone()).or_insert(0);
        if let Some(succeeds) = succeeds {
            if *count > succeeds {
                return Err(*count);
            }
            *count = succeeds;
        }
        *count += 1;
        let incarnation = *count;
        let superseded = CancellationToken::new();
        let (ended, watcher) = watch::channel(false);
        let lease = Arc::new(Lease::new(self.lease_ttl));
        let previous = inner.live.insert(
            key,
            LiveSession {
                incarnation,
                superseded: superseded.clone(),
                ended: watcher,
                lease: Arc::clone(&lease),
            },
        );
        Ok(SessionSlot {
            incarnation,
            superseded,
            ended,
            previous: previous.map(|live| (live.superseded, live.ended)),
            lease,
        })
    }

    /// Whether `incarnation` is still the live session of `rank` (no newer one attached).
    pub fn is_live(&self, world: &str, rank: u32, incarnation: u64) -> bool {
        self.read()
            .live
            .get(&(world.to_string(), rank))
            .is_some_and(|live| live.incarnation == incarnation)
    }

    /// The session `incarnation` of `rank` ended; it stays the rank's last one unless a newer
    /// one attached. Returns whether no newer one did.
    pub fn end_session(&self, world: &str, rank: u32, incarnation: u64) -> bool {
        let mut inner = self.write();
        let key = (world.to_string(), rank);
        let last = inner
            .live
            .get(&key)
            .is_some_and(|live| live.incarnation == incarnation);
        if last {
            inner.live.remove(&key);
            // the world was deleted while this session outlived it: nothing needs its count
            if !inner.worlds.contains_key(world) {
                inner.incarnations.remove(&key);
            }
        }
        last
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

    /// Creates a world of `nranks` ranks and returns one token per rank (kept in the store
    /// as SHA-256 only, before the world exists).
    ///
    /// # Errors
    /// A taken name, a bad name, no ranks, more than the limit of ranks per world
    /// (`MPI_ERR_NO_MEM`), or a store that does not take it.
    pub async fn create_world(
        &self,
        name: &str,
        nranks: u32,
    ) -> Result<Vec<String>, RegistryError> {
        Ok(self.create_world_placed(name, nranks).await?.0)
    }

    /// [`Registry::create_world`]; in a cluster the world goes to the live node with the
    /// least load ([`Cluster::place`]), whose address comes back with the tokens (`None`
    /// outside a cluster). A world placed on another node is not served here: that node takes
    /// it up when it first hears of it.
    ///
    /// # Errors
    /// As [`Registry::create_world`].
    pub async fn create_world_placed(
        &self,
        name: &str,
        nranks: u32,
    ) -> Result<(Vec<String>, Option<String>), RegistryError> {
        check_name("world", name)?;
        if nranks == 0 {
            return Err(RmaError::new(ErrorClass::Arg, "a world needs at least one rank").into());
        }
        let max_ranks = self.limits.max_ranks_per_world;
        if nranks > max_ranks {
            return Err(exhausted(format!(
                "a world may have at most {max_ranks} ranks on this server, not {nranks}"
            ))
            .into());
        }
        {
            let mut inner = self.write();
            if inner.worlds.contains_key(name) || !inner.reserved.insert(name.to_string()) {
                return Err(RegistryError::AlreadyExists(format!("world {name}")));
            }
        }
        let tokens: Vec<String> = (0..nranks).map(|_| new_token()).collect();
        let hashes: Vec<[u8; 32]> = tokens.iter().map(|token| token_hash(token)).collect();
        let mut owner = None;
        if let Some(store) = &self.store {
            let stored = StoredWorld {
                name: name.to_string(),
                nranks,
                tokens: hashes.iter().copied().zip(0..nranks).collect(),
            };
            let saved = match self.cluster() {
                None => store.save_world(&stored, None).await,
                Some(cluster) => match cluster.place().await {
                    Ok((node, advertise)) => {
                        let here = node == cluster.node_id();
                        let sent = tokio::time::Instant::now();
                        let saved = store
                            .save_world(&stored, Some((&node, here, cluster.lease_ttl())))
                            .await;
                        if saved.is_ok() {
                            if here {
                                cluster.hold(name, 1, sent);
                            }
                            owner = Some((advertise, here));
                        }
                        saved
                    }
                    Err(error) => Err(error),
                },
            };
            if let Err(error) = saved {
                self.write().reserved.remove(name);
                // another node created it first
                if self.cluster().is_some() && store.world_exists(name).await.unwrap_or(false) {
                    return Err(RegistryError::AlreadyExists(format!("world {name}")));
                }
                return Err(unavailable(error));
            }
        }
        let mut inner = self.write();
        inner.reserved.remove(name);
        if let Some((advertise, false)) = owner {
            tracing::info!(world = name, nranks, owner = %advertise, "world created on another node");
            return Ok((tokens, Some(advertise)));
        }
        for (rank, hash) in hashes.iter().enumerate() {
            inner.tokens.insert(*hash, (name.to_string(), rank as u32));
        }
        let collectives = WorldHandle::spawn(name, nranks, self.me.clone());
        inner.worlds.insert(
            name.to_string(),
            World {
                nranks,
                tokens: hashes,
                collectives,
                windows: BTreeMap::new(),
            },
        );
        tracing::info!(world = name, nranks, "world created");
        Ok((tokens, owner.map(|(advertise, _)| advertise)))
    }

    /// Lets go of `world` here without touching the store (another node serves it now, or
    /// this node is about to rebuild it from the store): its live sessions end, its windows'
    /// actors stop, its tokens are forgotten.
    pub fn evict_world(&self, name: &str) {
        let mut inner = self.write();
        let Some((world, windows)) = take_world(&mut inner, &self.window_bytes, name) else {
            return;
        };
        for rank in 0..world.nranks {
            let key = (name.to_string(), rank);
            if let Some(live) = inner.live.get(&key) {
                live.superseded.cancel();
            }
            inner.incarnations.remove(&key);
        }
        for entry in windows {
            entry.ranks.iter().for_each(WindowServerHandle::abandon);
        }
        tracing::info!(world = name, "world let go of");
    }

    /// `(name, ranks, windows)` of every world.
    pub fn list_worlds(&self) -> Vec<(String, u32, u32)> {
        self.read()
            .worlds
            .iter()
            .map(|(name, world)| (name.clone(), world.nranks, world.windows.len() as u32))
            .collect()
    }

    /// Deletes a world, its tokens and its windows.
    ///
    /// # Errors
    /// An unknown world, or a store that does not take it.
    pub async fn delete_world(&self, name: &str) -> Result<(), RegistryError> {
        if !self.read().worlds.contains_key(name) {
            return Err(RegistryError::NoWorld(name.to_string()));
        }
        // in a cluster the world's rows commit only under its lease, so the store forgets it
        // (and the lease) only after its actors' last events (`window_freed`) are committed
        let cluster = self.cluster().cloned();
        if cluster.is_none() {
            if let Some(store) = &self.store {
                store.delete_world(name).await.map_err(unavailable)?;
            }
        }
        let stopped = {
            let mut inner = self.write();
            let (world, windows) = take_world(&mut inner, &self.window_bytes, name)
                .ok_or_else(|| RegistryError::NoWorld(name.to_string()))?;
            // a rank's session count goes with the world, unless a session still runs (it is
            // dropped when that ends, and until then a world of the same name counts on from it)
            for rank in 0..world.nranks {
                let key = (name.to_string(), rank);
                if !inner.live.contains_key(&key) {
                    inner.incarnations.remove(&key);
                }
            }
            for entry in &windows {
                entry.ranks.iter().for_each(WindowServerHandle::stop);
            }
            windows
        };
        if let Some(cluster) = cluster {
            for entry in &stopped {
                for rank in &entry.ranks {
                    rank.stopped().await;
                }
            }
            self.audit.flush().await;
            if let Some(store) = &self.store {
                store.delete_world(name).await.map_err(unavailable)?;
            }
            cluster.release(name);
        }
        tracing::info!(world = name, "world deleted");
        Ok(())
    }

    /// The membership a rank token grants.
    pub fn authenticate(&self, token: &str) -> Option<Membership> {
        self.authenticate_hash(&token_hash(token))
    }

    /// The membership the rank token with this SHA-256 grants.
    pub fn authenticate_hash(&self, hash: &[u8; 32]) -> Option<Membership> {
        let inner = self.read();
        let (world, rank) = inner.tokens.get(hash)?;
        let entry = inner.worlds.get(world)?;
        Some(Membership {
            world: world.clone(),
            rank: *rank,
            nranks: entry.nranks,
            collectives: entry.collectives.clone(),
        })
    }

    /// Creates a window on `world`: records its creation, then starts one actor per rank.
    ///
    /// # Errors
    /// An unknown world, a taken or bad name, a bad shape or info (`MPI_ERR_SIZE`,
    /// `MPI_ERR_DISP`, `MPI_ERR_INFO`), or more bytes than the limits allow
    /// (`MPI_ERR_NO_MEM`).
    pub async fn create_window(
        &self,
        world: &str,
        window: NewWindow,
    ) -> Result<Arc<WindowDesc>, RegistryError> {
        let NewWindow {
            name,
            flavor,
            model,
            sizes,
            disp_units,
            info,
            group,
        } = window;
        let name = name.as_str();
        check_name("window", name)?;
        // ids unique across the cluster come from the database
        let cluster_id = match self.cluster() {
            Some(cluster) => Some(cluster.next_window_id().await.map_err(unavailable)?),
            None => None,
        };
        // reserve the name and id; the window becomes visible only once its creation is logged
        let desc = {
            let mut inner = self.write();
            let nranks = inner
                .worlds
                .get(world)
                .ok_or_else(|| RegistryError::NoWorld(world.to_string()))?
                .nranks;
            let group = WindowDesc::validate_group(nranks, group.as_deref())?;
            WindowDesc::validate_shape(group.len() as u32, &sizes, &disp_units)?;
            WindowDesc::validate_flavor(flavor, &sizes, &disp_units)?;
            info.check_shape(&sizes, &disp_units)?;
            if inner.worlds[world].windows.contains_key(name) {
                return Err(RegistryError::AlreadyExists(format!(
                    "window {name} in world {world}"
                )));
            }
            self.room(&sizes)?;
            let id = match cluster_id {
                Some(id) => id,
                None => {
                    inner.next_window += 1;
                    inner.next_window
                }
            };
            if let Some(entry) = inner.worlds.get_mut(world) {
                entry.windows.insert(name.to_string(), id);
            }
            Arc::new(WindowDesc {
                id,
                name: name.to_string(),
                world: world.to_string(),
                flavor,
                model,
                sizes,
                disp_units,
                info,
                group,
            })
        };
        if let Some(cluster) = self.cluster() {
            cluster.note_window(desc.id, world);
        }
        let created = Pending {
            window: desc.id,
            rank: 0,
            incarnation: 0,
            at_ns: self.audit.now(),
            event: Event::WindowCreated {
                world: world.to_string(),
                name: name.to_string(),
                sizes: desc.sizes.clone(),
                disp_units: desc.disp_units.clone(),
                info: desc.info.to_pairs().into_iter().collect(),
                unified: desc.model == MemoryModel::Unified,
            },
        };
        self.audit.submit(vec![created], Vec::new()).await;
        if self.audit.durability() == Durability::Sync {
            self.audit.flush().await;
        }
        if let Some(store) = &self.store {
            let stored = StoredWindow {
                id: desc.id,
                world: world.to_string(),
                name: name.to_string(),
                spec: spec_json(&desc),
            };
            if let Err(error) = store.save_window(&stored).await {
                let mut inner = self.write();
                if let Some(entry) = inner.worlds.get_mut(world) {
                    entry.windows.remove(name);
                }
                self.window_bytes.give_back(bytes_of(&desc));
                return Err(unavailable(error));
            }
        }
        let zeroed = desc
            .sizes
            .iter()
            .map(|&size| vec![0; size as usize])
            .collect();
        let ranks = self.spawn_ranks(&desc, zeroed, Vec::new(), 0);
        let mut inner = self.write();
        let still_wanted = inner
            .worlds
            .get(world)
            .is_some_and(|entry| entry.windows.get(name) == Some(&desc.id));
        let entry = Arc::new(WindowEntry::new(Arc::clone(&desc), ranks));
        if !still_wanted {
            // the world was deleted meanwhile
            self.window_bytes.give_back(bytes_of(&desc));
            entry.ranks.iter().for_each(WindowServerHandle::stop);
            return Err(RegistryError::NoWorld(world.to_string()));
        }
        inner.windows.insert(desc.id, entry);
        tracing::info!(world, window = name, id = desc.id, "window created");
        Ok(desc)
    }

    /// The window `name` of `world`.
    pub fn window(&self, world: &str, name: &str) -> Option<Arc<WindowEntry>> {
        let inner = self.read();
        let id = inner.worlds.get(world)?.windows.get(name)?;
        inner.windows.get(id).cloned()
    }

    /// Every rank of `window` called `MPI_Win_set_info` asking for `info`: it is the window's
    /// from now on, kept in the store so that a restart brings it back (the ranks' `info_set`
    /// events put it in the log).
    pub async fn set_window_info(&self, window: u64, info: WindowInfo) {
        let Some(entry) = self.read().windows.get(&window).cloned() else {
            return;
        };
        let desc = entry.set_info(info);
        if let Some(store) = &self.store {
            if let Err(error) = store.update_window_spec(window, &spec_json(&desc)).await {
                tracing::warn!(window, %error, "the window's new info is not stored");
            }
        }
    }

    /// Every window of `world`, by name.
    ///
    /// # Errors
    /// An unknown world.
    pub fn list_windows(&self, world: &str) -> Result<Vec<Arc<WindowDesc>>, RegistryError> {
        let inner = self.read();
        let entry = inner
            .worlds
            .get(world)
            .ok_or_else(|| RegistryError::NoWorld(world.to_string()))?;
        Ok(entry
            .windows
            .values()
            .filter_map(|id| inner.windows.get(id))
            .map(|window| window.now())
            .collect())
    }

    /// Whether any rank of any window of `world` holds or waits for a lock, is in an epoch,
    /// or has operations pending (an admin's move waits for that to end).
    pub async fn world_busy(&self, world: &str) -> bool {
        let ranks: Vec<WindowServerHandle> = {
            let inner = self.read();
            let Some(entry) = inner.worlds.get(world) else {
                return false;
            };
            entry
                .windows
                .values()
                .filter_map(|id| inner.windows.get(id))
                .flat_map(|window| window.ranks.iter().cloned())
                .collect()
        };
        for rank in ranks {
            // a stopped actor is idle
            if let Ok(Some(_)) = rank.busy().await {
                return true;
            }
        }
        false
    }

    /// Removes a window and stops its actors (pending calls fail with `MPI_ERR_WIN`); a
    /// dynamic window's once they have stopped, having given back the bytes their regions
    /// spanned (so that they are free when the free is answered).
    pub async fn remove_window(self: Arc<Self>, id: u64) {
        let entry = {
            let mut inner = self.write();
            let Some(entry) = inner.windows.remove(&id) else {
                return;
            };
            if let Some(world) = inner.worlds.get_mut(&entry.desc.world) {
                world.windows.remove(&entry.desc.name);
            }
            entry
        };
        self.window_bytes.give_back(bytes_of(&entry.desc));
        if entry.desc.flavor != Flavor::Dynamic {
            entry.ranks.iter().for_each(WindowServerHandle::stop);
            return;
        }
        for rank in &entry.ranks {
            rank.stop_and_wait().await;
        }
    }

    /// Takes the bytes a window of `sizes` needs, if the limits leave room for them.
    fn room(&self, sizes: &[u64]) -> Result<u64, RmaError> {
        let per_rank = self.limits.max_window_bytes_per_rank;
        if let Some((rank, size)) = sizes.iter().enumerate().find(|(_, &size)| size > per_rank) {
            return Err(exhausted(format!(
                "rank {rank} asks for {size} bytes, more than the {per_rank} bytes a rank may \
                 expose on this server"
            )));
        }
        let bytes = sizes
            .iter()
            .try_fold(0u64, |sum, &size| sum.checked_add(size))
            .unwrap_or(u64::MAX);
        self.window_bytes.take(bytes).map_err(|in_use| {
            exhausted(format!(
                "a window of {bytes} bytes does not fit: windows take {in_use} of the server's \
                 {} bytes",
                self.window_bytes.limit()
            ))
        })?;
        Ok(bytes)
    }
}

/// When a session's lease lapses: renewed by the session whenever it hears from its client,
/// read by the web view. An atomic, so neither side waits for the other.
#[derive(Debug)]
pub struct Lease {
    /// The clock reading the deadline counts from.
    base: tokio::time::Instant,
    /// The deadline, in milliseconds after `base`.
    deadline_ms: AtomicU64,
}

impl Lease {
    /// A lease that lapses `ttl` from now.
    fn new(ttl: Duration) -> Self {
        Lease {
            base: tokio::time::Instant::now(),
            deadline_ms: AtomicU64::new(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
        }
    }

    /// The lease now lapses at `deadline`.
    pub fn renew(&self, deadline: tokio::time::Instant) {
        let after = deadline.saturating_duration_since(self.base).as_millis();
        self.deadline_ms
            .store(u64::try_from(after).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// How long until the lease lapses (zero once it has).
    pub fn remaining(&self) -> Duration {
        let deadline = self.base + Duration::from_millis(self.deadline_ms.load(Ordering::Relaxed));
        deadline.saturating_duration_since(tokio::time::Instant::now())
    }
}

/// A rank of a world as the web view shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankView {
    /// The rank.
    pub rank: u32,
    /// Sessions of the rank so far (0: it never attached).
    pub incarnations: u64,
    /// The live session's incarnation and how long until its lease lapses; `None` while the
    /// rank has no session.
    pub live: Option<(u64, Duration)>,
}

/// A world as the web view shows it.
#[derive(Clone, Debug)]
pub struct WorldView {
    /// Its name.
    pub name: String,
    /// Its ranks, with their sessions.
    pub ranks: Vec<RankView>,
    /// Its windows, by name.
    pub windows: Vec<Arc<WindowDesc>>,
}

impl Registry {
    /// Every world with its ranks' sessions and its windows (read-only, for the web view).
    pub fn overview(&self) -> Vec<WorldView> {
        let inner = self.read();
        inner
            .worlds
            .iter()
            .map(|(name, world)| WorldView {
                name: name.clone(),
                ranks: (0..world.nranks)
                    .map(|rank| {
                        let key = (name.clone(), rank);
                        RankView {
                            rank,
                            incarnations: inner.incarnations.get(&key).copied().unwrap_or(0),
                            live: inner
                                .live
                                .get(&key)
                                .map(|live| (live.incarnation, live.lease.remaining())),
                        }
                    })
                    .collect(),
                windows: world
                    .windows
                    .values()
                    .filter_map(|id| inner.windows.get(id))
                    .map(|entry| entry.now())
                    .collect(),
            })
            .collect()
    }

    /// The window with id `id`, if it exists.
    pub fn window_by_id(&self, id: u64) -> Option<Arc<WindowEntry>> {
        self.read().windows.get(&id).cloned()
    }

    /// Whether a world named `name` exists.
    pub fn has_world(&self, name: &str) -> bool {
        self.read().worlds.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Arc<Registry> {
        Registry::new(
            AuditHandle::off(),
            None,
            0,
            Duration::from_secs(60),
            Limits::default(),
        )
    }

    #[tokio::test]
    async fn a_deleted_world_leaves_no_session_counts_behind() {
        let registry = registry();
        for cycle in 0..3 {
            let name = format!("w{cycle}");
            registry.create_world(&name, 2).await.unwrap();
            for rank in 0..2 {
                let slot = registry.begin_session(&name, rank);
                assert_eq!(slot.incarnation, 1);
                assert!(registry.end_session(&name, rank, slot.incarnation));
            }
            registry.delete_world(&name).await.unwrap();
        }
        assert!(registry.read().incarnations.is_empty());
    }

    #[tokio::test]
    async fn a_session_outliving_its_world_drops_the_count_when_it_ends() {
        let registry = registry();
        registry.create_world("w", 1).await.unwrap();
        let first = registry.begin_session("w", 0);
        registry.delete_world("w").await.unwrap();
        // a world of the same name while the old session runs: counts on, no clash
        registry.create_world("w", 1).await.unwrap();
        let second = registry.begin_session("w", 0);
        assert_eq!(second.incarnation, 2);
        assert!(!registry.end_session("w", 0, first.incarnation));
        assert!(registry.is_live("w", 0, second.incarnation));
        assert!(registry.end_session("w", 0, second.incarnation));
        registry.delete_world("w").await.unwrap();
        assert!(registry.read().incarnations.is_empty());
        // and one that ends after its world went takes its count with it
        registry.create_world("v", 1).await.unwrap();
        let orphan = registry.begin_session("v", 0);
        registry.delete_world("v").await.unwrap();
        assert!(registry.end_session("v", 0, orphan.incarnation));
        assert!(registry.read().incarnations.is_empty());
    }

    #[tokio::test]
    async fn a_client_re_attaching_by_itself_never_supersedes_a_newer_incarnation() {
        let registry = registry();
        registry.create_world("w", 1).await.unwrap();
        let first = registry.begin_session("w", 0);
        assert_eq!(first.incarnation, 1);
        // the client that lost incarnation 1 comes back: it succeeds it
        let healed = registry.succeed_session("w", 0, Some(1)).unwrap();
        assert_eq!(healed.incarnation, 2);
        assert!(!registry.is_live("w", 0, 1));
        // a second client that also lost incarnation 1 is refused, naming the newer one, and
        // the live session stays
        assert_eq!(registry.succeed_session("w", 0, Some(1)).err(), Some(2));
        assert!(registry.is_live("w", 0, 2));
        // a node that rebuilt the counts from a log that missed incarnations still numbers
        // the successor above the one the client had
        registry.create_world("v", 1).await.unwrap();
        let healed = registry.succeed_session("v", 0, Some(7)).unwrap();
        assert_eq!(healed.incarnation, 8);
    }
}
