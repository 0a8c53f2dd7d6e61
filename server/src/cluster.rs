//! Cluster mode: several `onesided-server` nodes over one PostgreSQL, which alone says who
//! serves what (tables `cluster_nodes` and `world_owners`, migration 0005). No consensus of
//! our own: a node joins with a lease it renews by heartbeat; each world is served by exactly
//! one node, recorded as a lease row whose epoch grows on every change of owner; ownership
//! changes only inside PostgreSQL transactions; and every audit commit of an owner checks its
//! epoch in the same transaction ([`crate::audit::Fencing`]), so a node that lost a world (it
//! was paused, partitioned, slow) commits nothing more for it.
//!
//! Times are the database's (`now()`), never a node's clock: nodes' clocks may differ.
//!
//! Owns: the node's lease, its worlds' leases and epochs, placement, and taking a world up
//! (claim, then rebuild from snapshots and the log): when each statement runs and what its
//! answer means. Must not: decide RMA semantics, or run SQL (every statement is the store's,
//! `crate::audit::store::ClusterStore`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use onesided_proto::admin_wire::ClusterNode;

use crate::audit::store::ClusterStore;
use crate::audit::AuditStore;
use crate::registry::{MoveError, Registry, Served};

mod placement;

/// How often a move checks whether the world's open epochs have ended.
const DRAIN_POLL: Duration = Duration::from_millis(10);

/// The default lease of a node and of the worlds it serves (`--node-lease-ttl`).
pub const DEFAULT_NODE_LEASE: Duration = Duration::from_secs(5);

/// How a node takes part in a cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeConfig {
    /// The node's id, unique in the cluster (`--node-id`).
    pub node_id: String,
    /// The URL clients and other nodes reach it at (`--advertise`, `http://host:port`).
    pub advertise: String,
    /// How long the node's lease and its worlds' leases last without a heartbeat; another
    /// node takes a world up once its lease has expired. Heartbeats come every quarter of it.
    pub lease_ttl: Duration,
}

impl NodeConfig {
    /// A node `node_id` reached at `advertise`, with the default lease.
    pub fn new(node_id: &str, advertise: &str) -> Self {
        NodeConfig {
            node_id: node_id.to_string(),
            advertise: advertise.to_string(),
            lease_ttl: DEFAULT_NODE_LEASE,
        }
    }
}

/// This node's part in the cluster.
#[derive(Debug)]
pub struct Cluster {
    config: NodeConfig,
    /// The cluster's statements, on the node's own connections.
    store: ClusterStore,
    /// The worlds this node serves, with the epoch of its lease on each.
    held: Mutex<HashMap<String, i64>>,
    /// Until when, by this node's clock, each held world's lease is surely still this node's
    /// ([`Cluster::serves`]): a node paused or cut off past it may have lost the world
    /// without knowing yet, and answers nothing of it before the database says.
    current: Mutex<HashMap<String, tokio::time::Instant>>,
    /// The world of each window of a held world (the audit writer's fencing asks by window).
    windows: Mutex<HashMap<u64, String>>,
    /// One world taken up at a time on this node (claim, rebuild, register).
    adopting: tokio::sync::Mutex<()>,
    /// The registry whose worlds a lost lease evicts ([`Cluster::serve_from`] sets it).
    registry: std::sync::OnceLock<std::sync::Weak<Registry>>,
    /// Worlds an admin's move is draining here: new sessions of them wait.
    draining: Mutex<HashSet<String>>,
    /// Told when a drain ends.
    drained: tokio::sync::Notify,
    /// Since when this node's heartbeats have reached the database without a failure (`None`
    /// while they fail). Another node's world is claimed only after a whole lease of it: when
    /// the database returns from an outage every lease has expired, and each live owner gets
    /// that long to renew its own before anyone may take them.
    reaching_since: Mutex<Option<tokio::time::Instant>>,
    /// Whether this node has reached itself at its advertised URL ([`Cluster::reach_self`]):
    /// until it has, it takes no world up and no node places one on it (issue 43, item 15: a
    /// node advertising a dead address, or another node's, was given worlds nobody could reach).
    reached_self: tokio::sync::watch::Sender<bool>,
    /// This process's name in the health service: a node that reaches its advertised URL
    /// finds its own name there, not another server's (`onesided.node.<id>.<random>`).
    health_name: String,
    /// The certificates of this node's TLS identity (an https:// advertise is checked trusting
    /// them as well as the system's roots).
    tls_chain: Option<Vec<u8>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

impl Cluster {
    /// Joins the cluster on `store`'s database: registers the node (or takes its row back
    /// after a restart) with a fresh lease.
    ///
    /// # Errors
    /// A SQLite store (a cluster needs PostgreSQL), a node id a live node with another address
    /// holds, or database failures.
    pub async fn join(
        store: &AuditStore,
        config: NodeConfig,
        admin_token: &str,
        tls_chain: Option<Vec<u8>>,
    ) -> anyhow::Result<Arc<Self>> {
        let tls = tls_chain.is_some();
        let Some(shared) = ClusterStore::on(store) else {
            anyhow::bail!(
                "a cluster needs PostgreSQL: --node-id was given with a SQLite audit store; \
                 give --database-url postgres://… (every node of the cluster the same one)"
            );
        };
        if config.node_id.is_empty() || config.node_id.len() > 128 {
            anyhow::bail!("--node-id must be 1 to 128 characters");
        }
        if !(config.advertise.starts_with("http://") || config.advertise.starts_with("https://")) {
            anyhow::bail!(
                "--advertise must be the URL clients reach this node at (http://host:port or \
                 https://host:port), not {:?}",
                config.advertise
            );
        }
        // clients would speak the other protocol to the listener
        match (config.advertise.starts_with("https://"), tls) {
            (true, false) => anyhow::bail!(
                "--advertise {:?} is https://, but this node listens without TLS: give \
                 --tls-cert and --tls-key, or advertise http://",
                config.advertise
            ),
            (false, true) => anyhow::bail!(
                "--advertise {:?} is http://, but this node listens with TLS: advertise https://",
                config.advertise
            ),
            _ => {}
        }
        Self::register(&shared, &config).await?;
        if let Err(error) = Self::agree_on_the_admin_token(&shared, &config, admin_token).await {
            // not a node of this cluster after all: its row lets go of the id at once
            let _ = shared
                .let_go_of_node(&config.node_id, &config.advertise)
                .await;
            return Err(error);
        }
        // a single server on this database counted window ids in memory
        shared.catch_up_window_ids().await?;
        tracing::info!(node = %config.node_id, advertise = %config.advertise, "joined the cluster");
        // heartbeats, claims and lookups get connections of their own
        let own = shared
            .own_connections(config.lease_ttl)
            .await
            .context("cannot connect to the cluster's database")?;
        let health_name = format!(
            "onesided.node.{}.{:016x}",
            config.node_id,
            rand::random::<u64>()
        );
        Ok(Arc::new(Cluster {
            config,
            store: own,
            held: Mutex::new(HashMap::new()),
            current: Mutex::new(HashMap::new()),
            windows: Mutex::new(HashMap::new()),
            adopting: tokio::sync::Mutex::new(()),
            registry: std::sync::OnceLock::new(),
            draining: Mutex::new(HashSet::new()),
            drained: tokio::sync::Notify::new(),
            reaching_since: Mutex::new(Some(tokio::time::Instant::now())),
            reached_self: tokio::sync::watch::Sender::new(false),
            health_name,
            tls_chain,
        }))
    }

    /// The name under which this node's health service answers SERVING to itself.
    pub fn health_name(&self) -> &str {
        &self.health_name
    }

    /// Whether this node has reached itself at its advertised URL.
    pub fn reached_self(&self) -> bool {
        *self.reached_self.borrow()
    }

    /// Calls this node's health service at its advertised URL until the answer comes from
    /// this very process (its [`Cluster::health_name`] is SERVING there), then lets the node
    /// take worlds: marks it reached in `cluster_nodes`, where placement looks. Says why at
    /// once and every ten seconds while it cannot: a dead address, another server there, a
    /// certificate it does not trust.
    pub async fn reach_self(&self) {
        use tonic_health::pb::health_check_response::ServingStatus;
        use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
        let began = tokio::time::Instant::now();
        let mut said: Option<tokio::time::Instant> = None;
        let mut pause = Duration::from_millis(50);
        loop {
            let answer = async {
                let mut endpoint =
                    tonic::transport::Endpoint::from_shared(self.config.advertise.clone())?
                        .connect_timeout(self.config.lease_ttl)
                        .timeout(self.config.lease_ttl);
                if self.config.advertise.starts_with("https://") {
                    let mut tls = tonic::transport::ClientTlsConfig::new().with_native_roots();
                    if let Some(chain) = &self.tls_chain {
                        tls = tls.ca_certificate(tonic::transport::Certificate::from_pem(chain));
                    }
                    endpoint = endpoint.tls_config(tls)?;
                }
                let channel = endpoint.connect().await?;
                let status = HealthClient::new(channel)
                    .check(HealthCheckRequest {
                        service: self.health_name.clone(),
                    })
                    .await;
                anyhow::Ok(status)
            }
            .await;
            let why = match answer {
                Ok(Ok(answer)) if answer.get_ref().status == ServingStatus::Serving as i32 => {
                    match self.mark_reached().await {
                        Ok(()) => {
                            tracing::info!(
                                advertise = %self.config.advertise,
                                after_ms = began.elapsed().as_millis() as u64,
                                "reached itself at its advertised URL: takes worlds"
                            );
                            self.reached_self.send_replace(true);
                            return;
                        }
                        Err(error) => format!("the database: {error:#}"),
                    }
                }
                Ok(Ok(_)) => "another server answers there (not this process)".to_string(),
                Ok(Err(status)) if status.code() == tonic::Code::NotFound => {
                    "another server answers there (not this process)".to_string()
                }
                Ok(Err(status)) => format!(
                    "the health service there answered {:?}: {}",
                    status.code(),
                    status.message()
                ),
                Err(error) => format!("{error:#}"),
            };
            if said.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
                tracing::error!(
                    advertise = %self.config.advertise,
                    why = %why,
                    "cannot reach itself at its advertised URL: takes no world until it can"
                );
                said = Some(tokio::time::Instant::now());
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// Marks this node's row reached (placement's condition).
    async fn mark_reached(&self) -> anyhow::Result<()> {
        self.store.mark_reached(&self.config.node_id).await
    }

    /// Waits, at most a lease, until this node has reached itself at its advertised URL.
    async fn until_reached_self(&self) -> anyhow::Result<()> {
        let mut reached = self.reached_self.subscribe();
        let waited =
            tokio::time::timeout(self.config.lease_ttl, reached.wait_for(|reached| *reached))
                .await
                .is_ok_and(|reached| reached.is_ok());
        match waited {
            true => Ok(()),
            false => anyhow::bail!(
                "this node has not reached itself at its advertised URL {} yet: it takes no \
                 world until it does (see its log)",
                self.config.advertise
            ),
        }
    }

    /// Registers the node's row, with a fresh lease. A row of the same id whose lease is
    /// current belongs to a live node — or to this node's previous run, killed a moment ago:
    /// while its heartbeats go on, the id is refused; once they have stopped for a whole
    /// lease, the row is taken over.
    async fn register(store: &ClusterStore, config: &NodeConfig) -> anyhow::Result<()> {
        let began = tokio::time::Instant::now();
        let mut seen: Option<f64> = None;
        loop {
            let joined = store
                .register_node(&config.node_id, &config.advertise, config.lease_ttl)
                .await
                .context("cannot register the node")?;
            if joined {
                return Ok(());
            }
            // the live row's last heartbeat, as seconds since the epoch (database clock)
            let beat = store.heartbeat_at(&config.node_id).await?;
            let beating = matches!((seen, beat), (Some(before), Some(now)) if now != before);
            if beating || began.elapsed() > config.lease_ttl * 2 {
                anyhow::bail!(
                    "node id {:?} is held by a live node (its heartbeats go on): give this \
                     node another --node-id",
                    config.node_id
                );
            }
            seen = seen.or(beat);
            tokio::time::sleep(config.lease_ttl / 8).await;
        }
    }

    /// The cluster's admin token is this node's: the first node to join while no other is
    /// live sets it (as a hash); a node with another token refuses to start — its token
    /// would read every world it is given, and the cluster's token would be refused on it.
    async fn agree_on_the_admin_token(
        store: &ClusterStore,
        config: &NodeConfig,
        admin_token: &str,
    ) -> anyhow::Result<()> {
        use sha2::Digest;
        let mine = sha2::Sha256::new()
            .chain_update(b"onesided cluster admin token\0")
            .chain_update(admin_token.as_bytes())
            .finalize()
            .to_vec();
        store
            .offer_admin_token(&mine, &config.node_id)
            .await
            .context("cannot read the cluster's settings")?;
        let agreed = store.admin_token().await?;
        if !bool::from(subtle::ConstantTimeEq::ct_eq(
            agreed.as_slice(),
            mine.as_slice(),
        )) {
            anyhow::bail!(
                "this node's admin token is not the one the cluster's live nodes use: every \
                 node of a cluster needs the same --admin-token (ONESIDED_ADMIN_TOKEN)"
            );
        }
        Ok(())
    }

    /// This node's id.
    pub fn node_id(&self) -> &str {
        &self.config.node_id
    }

    /// This node's address.
    pub fn advertise(&self) -> &str {
        &self.config.advertise
    }

    /// The lease of nodes and worlds.
    pub fn lease_ttl(&self) -> Duration {
        self.config.lease_ttl
    }

    /// Whether this node holds `world`'s lease.
    pub fn holds(&self, world: &str) -> bool {
        lock(&self.held).contains_key(world)
    }

    /// Whether, by this node's clock, `world`'s lease is surely still this node's: held, and
    /// renewed less than nine tenths of a lease ago (counted from before the renewal was
    /// sent; the tenth covers clocks running at slightly different rates). A node that was
    /// paused (SIGSTOP) or cut off past that may have lost the world without knowing yet.
    pub fn serves(&self, world: &str) -> bool {
        lock(&self.current)
            .get(world)
            .is_some_and(|until| tokio::time::Instant::now() < *until)
    }

    /// `world`'s lease at `epoch` was renewed (or taken) by a statement sent at `sent`;
    /// nothing changes when this node no longer holds it at that epoch.
    fn renewed(&self, world: &str, epoch: i64, sent: tokio::time::Instant) {
        // `held` before `current`, as everywhere
        let held = lock(&self.held);
        if held.get(world) == Some(&epoch) {
            let until = sent + self.config.lease_ttl.mul_f64(0.9);
            lock(&self.current).insert(world.to_string(), until);
        }
    }

    /// Whether this node still serves `world`: at once when [`Cluster::serves`] says so;
    /// otherwise the database is asked, renewing the lease at the epoch this node holds it
    /// with. A world found lost is let go of here (released and evicted: its sessions end, and
    /// new ones are redirected).
    ///
    /// # Errors
    /// Database failures (nothing is let go of then).
    pub async fn confirm(&self, world: &str, registry: &Registry) -> anyhow::Result<bool> {
        if self.serves(world) {
            return Ok(true);
        }
        let Some(epoch) = lock(&self.held).get(world).copied() else {
            return Ok(false);
        };
        let sent = tokio::time::Instant::now();
        let renewed = self
            .store
            .renew_world(world, &self.config.node_id, epoch, self.config.lease_ttl)
            .await?;
        if renewed {
            self.renewed(world, epoch, sent);
            return Ok(self.serves(world));
        }
        tracing::warn!(
            world,
            "lost the world's lease to another node (or it was deleted)"
        );
        self.release(world);
        registry.evict_world(world);
        Ok(false)
    }

    /// Whether this node may take another node's world up: its heartbeats have reached the
    /// database for a whole lease (see `reaching_since`).
    fn settled(&self) -> bool {
        lock(&self.reaching_since).is_some_and(|since| since.elapsed() >= self.config.lease_ttl)
    }

    /// Notes whether a heartbeat reached the database.
    fn reached(&self, reached: bool) {
        let mut since = lock(&self.reaching_since);
        match (reached, *since) {
            (true, None) => *since = Some(tokio::time::Instant::now()),
            (false, _) => *since = None,
            (true, Some(_)) => {}
        }
    }

    /// The registry this node serves its worlds from.
    pub fn serve_from(&self, registry: std::sync::Weak<Registry>) {
        let _ = self.registry.set(registry);
    }

    /// `window` belongs to `world` (held here).
    pub fn note_window(&self, window: u64, world: &str) {
        lock(&self.windows).insert(window, world.to_string());
    }

    /// `world` is no longer held here: its rows commit no more.
    pub fn release(&self, world: &str) {
        let mut held = lock(&self.held);
        held.remove(world);
        lock(&self.current).remove(world);
        drop(held);
        lock(&self.windows).retain(|_, owner| owner != world);
    }

    /// A fresh window id, unique across the cluster.
    ///
    /// # Errors
    /// Database failures.
    pub async fn next_window_id(&self) -> anyhow::Result<u64> {
        self.store.next_window_id().await
    }

    /// The live node with the least load, measured as the ranks of the worlds it serves
    /// (every rank is a session and one actor per window; ties go to the smallest id), among
    /// the nodes that have reached themselves at their advertised URL: `(node id, address)`.
    ///
    /// # Errors
    /// Database failures, or no node that has reached itself.
    pub async fn place(&self) -> anyhow::Result<(String, String)> {
        if let Some(chosen) = self.least_loaded().await? {
            return Ok(chosen);
        }
        // a cluster just started: its nodes reach themselves within moments
        if !self.reached_self() && self.until_reached_self().await.is_ok() {
            if let Some(chosen) = self.least_loaded().await? {
                return Ok(chosen);
            }
        }
        if self.reached_self() {
            // this node's own lease may have lapsed while the database was away: it is up
            return Ok((self.config.node_id.clone(), self.config.advertise.clone()));
        }
        anyhow::bail!(
            "no node of the cluster has reached itself at its advertised URL yet: a world \
             placed now could not be served; see the nodes' logs"
        )
    }

    /// [`Cluster::place`]'s choice among the nodes marked in the database.
    async fn least_loaded(&self) -> anyhow::Result<Option<(String, String)>> {
        self.store.least_loaded().await
    }

    /// Whether an admin's move is draining `world` here.
    pub fn is_draining(&self, world: &str) -> bool {
        lock(&self.draining).contains(world)
    }

    /// Waits until no move drains `world` here (at once when none does).
    pub async fn until_drained(&self, world: &str) {
        loop {
            let notified = self.drained.notified();
            tokio::pin!(notified);
            // registered before the check: a drain ending in between still wakes us
            notified.as_mut().enable();
            if !self.is_draining(world) {
                return;
            }
            notified.await;
        }
    }

    /// This node serves `world` (just created here, its lease taken by a statement sent at
    /// `sent`) at `epoch`.
    pub fn hold(&self, world: &str, epoch: i64, sent: tokio::time::Instant) {
        lock(&self.held).insert(world.to_string(), epoch);
        self.renewed(world, epoch, sent);
    }

    /// The world and rank of a rank token (by its SHA-256), from the store.
    ///
    /// # Errors
    /// Database failures.
    pub async fn resolve(&self, token_sha256: &[u8; 32]) -> anyhow::Result<Option<(String, u32)>> {
        self.store.token_owner(token_sha256).await
    }

    /// Who serves `world`; when nobody live does (or it was placed here), this node takes it
    /// up first (claims its lease, rebuilds its windows into `registry`).
    ///
    /// # Errors
    /// Database failures, or a window that cannot be rebuilt.
    pub async fn serve(&self, world: &str, registry: &Arc<Registry>) -> anyhow::Result<Served> {
        // a world moving away from here: once it is gone, ask where it went
        self.until_drained(world).await;
        // a lost claim race is asked again; a row naming a node that never registered (which
        // placement and moves never write) must not make this loop
        for _ in 0..3 {
            if self.holds(world)
                && registry.has_world(world)
                && self.confirm(world, registry).await?
            {
                return Ok(Served::Here);
            }
            // (owner, its address, whether the world's lease is current, whether the owner's
            // own lease is)
            let owner = self.store.owner(world).await?;
            match owner {
                None => return Ok(Served::Unknown),
                // a live owner whose world lease lapsed (the database was away) renews it
                // itself: it is not taken from it
                Some((node, Some(advertise), world_current, node_alive))
                    if node != self.config.node_id
                        && (world_current || node_alive == Some(true)) =>
                {
                    return Ok(Served::There(advertise))
                }
                Some((node, ..)) => {
                    if node != self.config.node_id && !self.settled() {
                        anyhow::bail!(
                            "world {world:?} has no live node and this one has just reached the \
                             database again; try again in a moment"
                        );
                    }
                    if self.adopt(world, registry).await? {
                        return Ok(Served::Here);
                    }
                }
            }
        }
        anyhow::bail!("world {world:?} changes owner faster than it can be looked up; try again")
    }

    /// Takes `world` up: claims its lease (when it is this node's, or expired), then rebuilds
    /// its windows from snapshots and the log and registers them. Returns whether this node
    /// now serves it.
    async fn adopt(&self, world: &str, registry: &Arc<Registry>) -> anyhow::Result<bool> {
        self.until_reached_self().await?;
        let _one_at_a_time = self.adopting.lock().await;
        if self.holds(world) && registry.has_world(world) && self.confirm(world, registry).await? {
            return Ok(true);
        }
        let sent = tokio::time::Instant::now();
        let claimed = self
            .store
            .claim(
                &self.config.node_id,
                world,
                self.config.lease_ttl,
                self.settled(),
            )
            .await?;
        let Some(epoch) = claimed else {
            return Ok(false);
        };
        // whatever this node still had of the world is stale: the log is the truth now
        registry.evict_world(world);
        // held from here on: the heartbeats renew its lease while the log is read, so that a
        // long rebuild never lets it lapse into another node's hands (issue 43, item 13)
        lock(&self.held).insert(world.to_string(), epoch);
        self.renewed(world, epoch, sent);
        // the claim committed before this read, and it waited for every commit of the
        // previous owner that checked its epoch: the log read here is complete
        let store = self.store.audit();
        let began = tokio::time::Instant::now();
        let recovered = match crate::recovery::recover_world(&store, world).await {
            Ok(recovered) => recovered,
            Err(error) => {
                // not renewed any more: another node may try
                self.release(world);
                return Err(error.context(format!("cannot rebuild world {world}")));
            }
        };
        if lock(&self.held).get(world) != Some(&epoch) {
            // lost meanwhile (a move, or the database said another node has it)
            return Ok(false);
        }
        {
            let mut windows = lock(&self.windows);
            for window in &recovered.windows {
                windows.insert(window.desc.id, world.to_string());
            }
        }
        let replayed: usize = recovered.windows.iter().map(|w| w.replayed).sum();
        let windows: Vec<u64> = recovered.windows.iter().map(|w| w.desc.id).collect();
        registry.audit().forget(windows).await;
        registry.restore(recovered.worlds, recovered.windows, recovered.incarnations);
        tracing::info!(
            world,
            epoch,
            replayed,
            took_ms = began.elapsed().as_millis() as u64,
            "took the world up"
        );
        Ok(true)
    }

    /// Takes up `worlds` (a heartbeat's [`Cluster::heartbeat`] found them), one after another,
    /// outside the heartbeats: a rebuild as long as the lease must not stop them.
    pub async fn take_up(&self, worlds: Vec<String>, registry: &Arc<Registry>) {
        for world in worlds {
            if self.holds(&world) {
                continue;
            }
            if let Err(error) = self.adopt(&world, registry).await {
                tracing::error!(world = %world, error = %format!("{error:#}"), "cannot take the world up");
            }
        }
    }

    /// Hands `world`, which this node serves, to the live node `target` (an admin's move, a
    /// drain): the lease row says it is moving (`moving_to`, shown by the status); new
    /// sessions of the world wait here; open epochs may finish — until no rank of the world
    /// holds or waits for a lock, is in an epoch or has operations pending, for at most one
    /// lease — then the world's sessions end (what is still open fails as when a node dies),
    /// everything it did is committed, and the row names `target` at a new epoch: this node
    /// commits nothing more of it. `target` takes it up from the store when a call for it
    /// first arrives there, or at its next heartbeat; the waiting sessions are redirected
    /// there. Returns `target`'s address.
    ///
    /// # Errors
    /// [`MoveError`] for an unknown or dead target, or database failures.
    pub async fn hand_over(
        &self,
        world: &str,
        target: &str,
        registry: &Arc<Registry>,
    ) -> Result<String, MoveError> {
        let node = self.store.node(target).await.map_err(MoveError::Store)?;
        let advertise = match node {
            None => return Err(MoveError::NoNode(target.to_string())),
            Some((_, false)) => return Err(MoveError::Dead(target.to_string())),
            Some((advertise, true)) => advertise,
        };
        if target == self.config.node_id {
            return Ok(advertise);
        }
        let Some(epoch) = lock(&self.held).get(world).copied() else {
            return Err(MoveError::NotHere(world.to_string()));
        };
        // one move at a time; new sessions wait from here on
        if !lock(&self.draining).insert(world.to_string()) {
            return Err(MoveError::NotHere(world.to_string()));
        }
        let marked = self
            .store
            .mark_moving(world, &self.config.node_id, target, epoch)
            .await;
        let moved = match marked {
            Ok(true) => self.drain_and_hand(world, target, epoch, registry).await,
            Ok(false) => Err(MoveError::NotHere(world.to_string())),
            Err(error) => Err(MoveError::Store(error)),
        };
        lock(&self.draining).remove(world);
        self.drained.notify_waiters();
        moved?;
        tracing::info!(world, to = target, "world handed over");
        Ok(advertise)
    }

    async fn drain_and_hand(
        &self,
        world: &str,
        target: &str,
        epoch: i64,
        registry: &Arc<Registry>,
    ) -> Result<(), MoveError> {
        let deadline = tokio::time::Instant::now() + self.config.lease_ttl;
        while registry.world_busy(world).await {
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(world, "a move ends epochs still open after a lease's time");
                break;
            }
            tokio::time::sleep(DRAIN_POLL).await;
        }
        // the answers of the calls that ended the epochs wait for their commit: out they go,
        // before the sessions end
        registry.audit().flush().await;
        // no call takes the world up here again while it goes (a short hold: one commit)
        let _one_at_a_time = self.adopting.lock().await;
        registry.evict_world(world);
        // what its actors did is the new owner's starting point
        registry.audit().flush().await;
        let moved = self
            .store
            .move_world(
                world,
                &self.config.node_id,
                target,
                self.config.lease_ttl,
                epoch,
            )
            .await;
        self.release(world);
        match moved {
            Ok(true) => Ok(()),
            Ok(false) => Err(MoveError::NotHere(world.to_string())),
            Err(error) => Err(MoveError::Store(error)),
        }
    }

    /// One heartbeat: renews the node's lease and its worlds' leases, and lets go of worlds it
    /// no longer holds (another node took them: their sessions end, their clients follow).
    /// Returns the worlds to take up ([`Cluster::take_up`]): those placed on this node and
    /// those whose owner's lease expired.
    ///
    /// # Errors
    /// Database failures.
    pub async fn heartbeat(&self, registry: &Arc<Registry>) -> anyhow::Result<Vec<String>> {
        let ttl = self.config.lease_ttl;
        let renewed = self.store.renew_node(&self.config.node_id, ttl).await;
        self.reached(renewed.is_ok());
        if !renewed? {
            self.store
                .insert_node(
                    &self.config.node_id,
                    &self.config.advertise,
                    ttl,
                    self.reached_self(),
                )
                .await?;
        }
        let held: HashMap<String, i64> = lock(&self.held).clone();
        let worlds: Vec<String> = held.keys().cloned().collect();
        let epochs: Vec<i64> = worlds.iter().map(|world| held[world]).collect();
        let sent = tokio::time::Instant::now();
        let kept = self
            .store
            .renew_worlds(&self.config.node_id, ttl, &worlds, &epochs)
            .await?;
        for world in &kept {
            self.renewed(world, held[world], sent);
        }
        for world in worlds.iter().filter(|world| !kept.contains(world)) {
            tracing::warn!(world = %world, "lost the world's lease to another node (or it was deleted)");
            self.release(world);
            registry.evict_world(world);
        }
        // this node's own worlds (placed here, or left by its previous run), and those of
        // nodes that are dead: both their world's lease and their own expired
        let mut claimable = self
            .store
            .claimable(&self.config.node_id, self.settled())
            .await?;
        claimable.retain(|world| !self.holds(world));
        if !self.reached_self() {
            // taken up once the node has reached itself, at the next heartbeat
            claimable.clear();
        }
        Ok(claimable)
    }

    /// Every node with its liveness and worlds.
    ///
    /// # Errors
    /// Database failures.
    pub async fn nodes(&self) -> anyhow::Result<Vec<ClusterNode>> {
        let nodes = self.store.nodes().await?;
        let owned = self.store.owned_worlds().await?;
        let mut by_node: BTreeMap<String, (Vec<String>, u64, Vec<String>)> = BTreeMap::new();
        for (node, world, nranks, moving) in owned {
            let entry = by_node.entry(node).or_default();
            if moving {
                entry.2.push(world.clone());
            }
            entry.0.push(world);
            entry.1 += nranks.max(0) as u64;
        }
        Ok(nodes
            .into_iter()
            .map(|(node_id, advertise, alive, age)| {
                let (worlds, ranks, moving) = by_node.remove(&node_id).unwrap_or_default();
                ClusterNode {
                    node_id,
                    advertise,
                    alive,
                    heartbeat_age_ms: age.max(0.0) as u64,
                    worlds,
                    ranks,
                    moving,
                }
            })
            .collect())
    }

    /// Every world of the cluster: `(name, ranks, windows not freed)`.
    ///
    /// # Errors
    /// Database failures.
    pub async fn worlds(&self) -> anyhow::Result<Vec<(String, u32, u32)>> {
        self.store.worlds().await
    }

    /// The node leaves: its row goes, and its worlds' leases expire at once, so other nodes
    /// take them up at their next heartbeat instead of after the lease (a clean stop).
    ///
    /// # Errors
    /// Database failures.
    pub async fn leave(&self) -> anyhow::Result<()> {
        self.store.expire_node(&self.config.node_id).await?;
        let mut held = lock(&self.held);
        held.clear();
        lock(&self.current).clear();
        Ok(())
    }
}

/// Beats until `stop`: every quarter of the lease. The worlds a beat finds to take up are
/// taken up by a task of their own (one at a time), so that no rebuild delays the next beat.
pub async fn heartbeats(
    cluster: Arc<Cluster>,
    registry: Arc<Registry>,
    stop: tokio_util::sync::CancellationToken,
) {
    let every = cluster.config.lease_ttl / 4;
    let mut failing = false;
    let mut taking_up: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        match cluster.heartbeat(&registry).await {
            Ok(worlds) => {
                if !worlds.is_empty() && taking_up.as_ref().is_none_or(|task| task.is_finished()) {
                    let (cluster, registry) = (Arc::clone(&cluster), Arc::clone(&registry));
                    taking_up = Some(tokio::spawn(async move {
                        cluster.take_up(worlds, &registry).await;
                    }));
                }
                if failing {
                    tracing::info!("heartbeats reach the database again");
                }
                failing = false;
            }
            Err(error) => {
                if !failing {
                    tracing::error!(error = %format!("{error:#}"), "heartbeat failed");
                }
                failing = true;
            }
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(every) => {}
        }
    }
    if let Some(task) = taking_up {
        task.abort();
    }
}

impl crate::audit::Fencing for Cluster {
    fn node(&self) -> &str {
        &self.config.node_id
    }

    fn lease(&self, window: u64) -> Option<(String, i64)> {
        let world = lock(&self.windows).get(&window)?.clone();
        let epoch = *lock(&self.held).get(&world)?;
        Some((world, epoch))
    }

    fn lost(&self, world: &str) {
        self.release(world);
        // its sessions end now, and new ones are redirected, rather than at the next heartbeat
        if let Some(registry) = self.registry.get().and_then(std::sync::Weak::upgrade) {
            registry.evict_world(world);
        }
    }
}
