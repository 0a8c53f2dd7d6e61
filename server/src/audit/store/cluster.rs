//! The cluster's statements (issue 41, room 3): the node leases (`cluster_nodes`), the world
//! leases (`world_owners`: claims, renewals, moves and placement), the admin token's hash
//! (`cluster_settings`), the `window_ids` sequence, and the cluster's reads of the directory
//! (the owner of another node's token in `world_tokens`, the worlds and their windows for the
//! status and the list). `crate::cluster` decides when each runs and what its answer means.
//!
//! Owns: `ClusterStore`, a PostgreSQL pool — the store's own while a node joins
//! (`ClusterStore::on`), then the node's own connections (`ClusterStore::own_connections`:
//! their options and session limits) — and every statement `crate::cluster` runs, each one
//! round trip on that pool in a transaction of its own (autocommit). Must not: decide who holds
//! a lease or when to claim, renew, move or let go of one (the cluster does; the database's
//! trigger enforces it), retry a statement (the cluster's `register` loop does), hash or
//! compare the admin token (the cluster does), or write the directory (`directory` does).

use std::time::Duration;

use sqlx::PgPool;

use super::{cluster_session, AuditStore};

/// The cluster's statements on one PostgreSQL pool.
#[derive(Clone, Debug)]
pub struct ClusterStore {
    pool: PgPool,
}

/// A lease as SQL's interval seconds (`make_interval(secs => …)`).
fn secs(lease: Duration) -> f64 {
    lease.as_secs_f64()
}

impl ClusterStore {
    /// The cluster's statements on `store`'s own pool; `None` for a SQLite store (a cluster
    /// needs PostgreSQL).
    pub fn on(store: &AuditStore) -> Option<Self> {
        match store {
            AuditStore::Postgres(pool) => Some(ClusterStore { pool: pool.clone() }),
            AuditStore::Sqlite(..) => None,
        }
    }

    /// The same database through connections of the node's own: queued behind the audit's
    /// traffic in a busy node, a heartbeat would miss its lease. Each is pinged before use
    /// (none of these statements is on the hot path, and a connection a database restart broke
    /// is replaced rather than failing the next heartbeat or status); there are four (a
    /// heartbeat, a world being taken up — which reads its log beside the heartbeats — and two
    /// lookups of who serves what for new sessions); and no claim or heartbeat waits on another
    /// node's transaction for long, and none of these is left open by a node paused in the
    /// middle of it (`cluster_session` with `lock_timeout`, for leases of `lease`).
    ///
    /// # Errors
    /// When the database cannot be reached.
    pub async fn own_connections(&self, lease: Duration) -> anyhow::Result<Self> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .test_before_acquire(true)
            .acquire_timeout(lease / 2)
            .connect_with(cluster_session(
                (*self.pool.connect_options()).clone(),
                lease,
                true,
            ))
            .await?;
        Ok(ClusterStore { pool })
    }

    /// The audit store on this pool (a world taken up is rebuilt from it).
    pub fn audit(&self) -> AuditStore {
        AuditStore::Postgres(self.pool.clone())
    }

    /// Inserts node `node`'s row with a lease of `lease`, or takes over a row of the same id
    /// whose lease has expired (its `reached` reset). Returns whether the row is now the
    /// node's (`false`: a row of the id with a current lease).
    ///
    /// # Errors
    /// Database failures.
    pub async fn register_node(
        &self,
        node: &str,
        advertise: &str,
        lease: Duration,
    ) -> anyhow::Result<bool> {
        let joined = sqlx::query(
            "INSERT INTO cluster_nodes \
                 (node_id, advertise, started_at, heartbeat_at, lease_until) \
             VALUES ($1, $2, now(), now(), now() + make_interval(secs => $3)) \
             ON CONFLICT (node_id) DO UPDATE SET advertise = excluded.advertise, \
                 started_at = now(), heartbeat_at = now(), \
                 lease_until = excluded.lease_until, reached = FALSE \
             WHERE cluster_nodes.lease_until < now()",
        )
        .bind(node)
        .bind(advertise)
        .bind(secs(lease))
        .execute(&self.pool)
        .await?;
        Ok(joined.rows_affected() > 0)
    }

    /// Node `node`'s last heartbeat, as seconds since the epoch by the database's clock
    /// (`None` without a row).
    ///
    /// # Errors
    /// Database failures.
    pub async fn heartbeat_at(&self, node: &str) -> anyhow::Result<Option<f64>> {
        let beat: Option<f64> = sqlx::query_scalar(
            "SELECT EXTRACT(EPOCH FROM heartbeat_at)::float8 FROM cluster_nodes \
             WHERE node_id = $1",
        )
        .bind(node)
        .fetch_optional(&self.pool)
        .await?;
        Ok(beat)
    }

    /// Sets the cluster's admin token hash to `hash` unless a node other than `node` is live.
    ///
    /// # Errors
    /// Database failures.
    pub async fn offer_admin_token(&self, hash: &[u8], node: &str) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO cluster_settings (name, value) VALUES ('admin_token_sha256', $1) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value \
             WHERE NOT EXISTS (SELECT 1 FROM cluster_nodes \
                 WHERE node_id <> $2 AND lease_until > now())",
        )
        .bind(hash)
        .bind(node)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The cluster's admin token hash.
    ///
    /// # Errors
    /// Database failures, or no hash set.
    pub async fn admin_token(&self) -> anyhow::Result<Vec<u8>> {
        let agreed: Vec<u8> = sqlx::query_scalar(
            "SELECT value FROM cluster_settings WHERE name = 'admin_token_sha256'",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(agreed)
    }

    /// Ends the lease of node `node`'s row at once, if it still names `advertise` (a node
    /// that turned out not to belong to the cluster lets go of its id).
    ///
    /// # Errors
    /// Database failures.
    pub async fn let_go_of_node(&self, node: &str, advertise: &str) -> anyhow::Result<()> {
        sqlx::query(
            "UPDATE cluster_nodes SET lease_until = now() WHERE node_id = $1 AND advertise = $2",
        )
        .bind(node)
        .bind(advertise)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Moves the `window_ids` sequence past every window id a single server on this database
    /// counted in memory (the log's and the window specs').
    ///
    /// # Errors
    /// Database failures.
    pub async fn catch_up_window_ids(&self) -> anyhow::Result<()> {
        sqlx::query(
            "SELECT setval('window_ids', GREATEST((SELECT last_value FROM window_ids), \
             (SELECT COALESCE(MAX(window_id), 0) FROM audit_windows), \
             (SELECT COALESCE(MAX(window_id), 0) FROM window_specs), 1))",
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Marks node `node`'s row reached (placement's condition).
    ///
    /// # Errors
    /// Database failures.
    pub async fn mark_reached(&self, node: &str) -> anyhow::Result<()> {
        sqlx::query("UPDATE cluster_nodes SET reached = TRUE WHERE node_id = $1")
            .bind(node)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Renews node `node`'s own lease for `lease` from now. Returns whether its row exists.
    ///
    /// # Errors
    /// Database failures.
    pub async fn renew_node(&self, node: &str, lease: Duration) -> anyhow::Result<bool> {
        let renewed = sqlx::query(
            "UPDATE cluster_nodes SET heartbeat_at = now(), \
             lease_until = now() + make_interval(secs => $2) WHERE node_id = $1",
        )
        .bind(node)
        .bind(secs(lease))
        .execute(&self.pool)
        .await?;
        Ok(renewed.rows_affected() > 0)
    }

    /// Inserts node `node`'s row again (it was deleted) with a lease of `lease`, unless one
    /// exists by now.
    ///
    /// # Errors
    /// Database failures.
    pub async fn insert_node(
        &self,
        node: &str,
        advertise: &str,
        lease: Duration,
        reached: bool,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO cluster_nodes (node_id, advertise, lease_until, reached) \
             VALUES ($1, $2, now() + make_interval(secs => $3), $4) ON CONFLICT DO NOTHING",
        )
        .bind(node)
        .bind(advertise)
        .bind(secs(lease))
        .bind(reached)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Renews for `lease` the lease of each of `worlds` that node `node` still holds at the
    /// epoch of the same index in `epochs`. Returns the worlds renewed.
    ///
    /// # Errors
    /// Database failures.
    pub async fn renew_worlds(
        &self,
        node: &str,
        lease: Duration,
        worlds: &[String],
        epochs: &[i64],
    ) -> anyhow::Result<Vec<String>> {
        let kept: Vec<String> = sqlx::query_scalar(
            "UPDATE world_owners o SET lease_until = now() + make_interval(secs => $2) \
             FROM UNNEST($3::text[], $4::bigint[]) AS h(world, epoch) \
             WHERE o.world = h.world AND o.epoch = h.epoch AND o.node_id = $1 \
             RETURNING o.world",
        )
        .bind(node)
        .bind(secs(lease))
        .bind(worlds)
        .bind(epochs)
        .fetch_all(&self.pool)
        .await?;
        Ok(kept)
    }

    /// The worlds node `node` may claim, by name: its own, and when `settled`, those whose
    /// lease and whose owner's lease both expired.
    ///
    /// # Errors
    /// Database failures.
    pub async fn claimable(&self, node: &str, settled: bool) -> anyhow::Result<Vec<String>> {
        let claimable: Vec<String> = sqlx::query_scalar(
            "SELECT o.world FROM world_owners o WHERE o.node_id = $1 OR ($2 \
                 AND o.lease_until < now() AND NOT EXISTS (SELECT 1 FROM cluster_nodes n \
                     WHERE n.node_id = o.node_id AND n.lease_until > now())) \
             ORDER BY o.world",
        )
        .bind(node)
        .bind(settled)
        .fetch_all(&self.pool)
        .await?;
        Ok(claimable)
    }

    /// Renews for `lease` `world`'s lease if node `node` holds it at `epoch`. Returns whether
    /// it did.
    ///
    /// # Errors
    /// Database failures.
    pub async fn renew_world(
        &self,
        world: &str,
        node: &str,
        epoch: i64,
        lease: Duration,
    ) -> anyhow::Result<bool> {
        let renewed = sqlx::query(
            "UPDATE world_owners SET lease_until = now() + make_interval(secs => $4) \
             WHERE world = $1 AND node_id = $2 AND epoch = $3",
        )
        .bind(world)
        .bind(node)
        .bind(epoch)
        .bind(secs(lease))
        .execute(&self.pool)
        .await?;
        Ok(renewed.rows_affected() > 0)
    }

    /// `world`'s owner: `(its node, the node's address, whether the world's lease is current,
    /// whether the node's own lease is)`, the last two `None` without a node row; `None`
    /// without a world.
    ///
    /// # Errors
    /// Database failures.
    pub async fn owner(
        &self,
        world: &str,
    ) -> anyhow::Result<Option<(String, Option<String>, bool, Option<bool>)>> {
        let owner: Option<(String, Option<String>, bool, Option<bool>)> = sqlx::query_as(
            "SELECT o.node_id, n.advertise, o.lease_until > now(), n.lease_until > now() \
             FROM world_owners o \
             LEFT JOIN cluster_nodes n ON n.node_id = o.node_id WHERE o.world = $1",
        )
        .bind(world)
        .fetch_optional(&self.pool)
        .await?;
        Ok(owner)
    }

    /// Claims `world` for node `node` with a lease of `lease` at the next epoch, when its row
    /// names `node` or (when `settled`) both its lease and its owner's expired. Returns the
    /// new epoch (`None`: not claimed).
    ///
    /// # Errors
    /// Database failures.
    pub async fn claim(
        &self,
        node: &str,
        world: &str,
        lease: Duration,
        settled: bool,
    ) -> anyhow::Result<Option<i64>> {
        let claimed: Option<i64> = sqlx::query_scalar(
            "UPDATE world_owners o SET node_id = $1, epoch = epoch + 1, moving_to = NULL, \
                 lease_until = now() + make_interval(secs => $3) \
             WHERE o.world = $2 AND (o.node_id = $1 OR ($4 AND o.lease_until < now() \
                 AND NOT EXISTS (SELECT 1 FROM cluster_nodes n \
                     WHERE n.node_id = o.node_id AND n.lease_until > now()))) \
             RETURNING o.epoch",
        )
        .bind(node)
        .bind(world)
        .bind(secs(lease))
        .bind(settled)
        .fetch_optional(&self.pool)
        .await?;
        Ok(claimed)
    }

    /// Node `node`'s address and whether its lease is current (`None`: no such node).
    ///
    /// # Errors
    /// Database failures.
    pub async fn node(&self, node: &str) -> anyhow::Result<Option<(String, bool)>> {
        let found: Option<(String, bool)> = sqlx::query_as(
            "SELECT advertise, lease_until > now() FROM cluster_nodes WHERE node_id = $1",
        )
        .bind(node)
        .fetch_optional(&self.pool)
        .await?;
        Ok(found)
    }

    /// Marks `world`, held by node `node` at `epoch`, as moving to node `target`. Returns
    /// whether the row was so held.
    ///
    /// # Errors
    /// Database failures.
    pub async fn mark_moving(
        &self,
        world: &str,
        node: &str,
        target: &str,
        epoch: i64,
    ) -> anyhow::Result<bool> {
        let marked = sqlx::query(
            "UPDATE world_owners SET moving_to = $3 WHERE world = $1 AND node_id = $2 AND epoch = $4",
        )
        .bind(world)
        .bind(node)
        .bind(target)
        .bind(epoch)
        .execute(&self.pool)
        .await?;
        Ok(marked.rows_affected() > 0)
    }

    /// Hands `world`, held by node `node` at `epoch`, to node `target` at the next epoch with
    /// a lease of `lease`. Returns whether the row was so held.
    ///
    /// # Errors
    /// Database failures.
    pub async fn move_world(
        &self,
        world: &str,
        node: &str,
        target: &str,
        lease: Duration,
        epoch: i64,
    ) -> anyhow::Result<bool> {
        let moved = sqlx::query(
            "UPDATE world_owners SET node_id = $3, epoch = epoch + 1, moving_to = NULL, \
                 lease_until = now() + make_interval(secs => $4) \
             WHERE world = $1 AND node_id = $2 AND epoch = $5",
        )
        .bind(world)
        .bind(node)
        .bind(target)
        .bind(secs(lease))
        .bind(epoch)
        .execute(&self.pool)
        .await?;
        Ok(moved.rows_affected() > 0)
    }

    /// Ends at once the leases of node `node`'s worlds, then its own (a clean stop).
    ///
    /// # Errors
    /// Database failures (the node's own lease is left when its worlds' fail).
    pub async fn expire_node(&self, node: &str) -> anyhow::Result<()> {
        sqlx::query("UPDATE world_owners SET lease_until = now() WHERE node_id = $1")
            .bind(node)
            .execute(&self.pool)
            .await?;
        sqlx::query("UPDATE cluster_nodes SET lease_until = now() WHERE node_id = $1")
            .bind(node)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// A fresh window id from the `window_ids` sequence.
    ///
    /// # Errors
    /// Database failures.
    pub async fn next_window_id(&self) -> anyhow::Result<u64> {
        let id: i64 = sqlx::query_scalar("SELECT nextval('window_ids')")
            .fetch_one(&self.pool)
            .await?;
        Ok(id as u64)
    }

    /// The live, reached node serving the fewest ranks (ties to the smallest id):
    /// `(node id, address)`; `None` when no node is live and reached.
    ///
    /// # Errors
    /// Database failures.
    pub async fn least_loaded(&self) -> anyhow::Result<Option<(String, String)>> {
        let chosen: Option<(String, String)> = sqlx::query_as(
            "SELECT n.node_id, n.advertise FROM cluster_nodes n \
             LEFT JOIN world_owners o ON o.node_id = n.node_id \
             LEFT JOIN worlds w ON w.name = o.world \
             WHERE n.lease_until > now() AND n.reached \
             GROUP BY n.node_id, n.advertise \
             ORDER BY COALESCE(SUM(w.nranks), 0), n.node_id LIMIT 1",
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(chosen)
    }

    /// The world and rank of a rank token, by its SHA-256.
    ///
    /// # Errors
    /// Database failures.
    pub async fn token_owner(
        &self,
        token_sha256: &[u8; 32],
    ) -> anyhow::Result<Option<(String, u32)>> {
        let found: Option<(String, i32)> =
            sqlx::query_as("SELECT world, rank FROM world_tokens WHERE token_sha256 = $1")
                .bind(token_sha256.as_slice())
                .fetch_optional(&self.pool)
                .await?;
        Ok(found.map(|(world, rank)| (world, rank as u32)))
    }

    /// Every node by id: `(id, address, whether its lease is current, milliseconds since its
    /// last heartbeat)`.
    ///
    /// # Errors
    /// Database failures.
    pub async fn nodes(&self) -> anyhow::Result<Vec<(String, String, bool, f64)>> {
        let nodes: Vec<(String, String, bool, f64)> = sqlx::query_as(
            "SELECT node_id, advertise, lease_until > now(), \
             EXTRACT(EPOCH FROM (now() - heartbeat_at))::float8 * 1000 \
             FROM cluster_nodes ORDER BY node_id",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(nodes)
    }

    /// Every world with an owner, by name: `(its node, the world, its ranks, whether it is
    /// moving)`.
    ///
    /// # Errors
    /// Database failures.
    pub async fn owned_worlds(&self) -> anyhow::Result<Vec<(String, String, i32, bool)>> {
        let owned: Vec<(String, String, i32, bool)> = sqlx::query_as(
            "SELECT o.node_id, o.world, w.nranks, o.moving_to IS NOT NULL FROM world_owners o \
             JOIN worlds w ON w.name = o.world ORDER BY o.world",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(owned)
    }

    /// Every world of the cluster by name: `(name, ranks, windows not freed)`.
    ///
    /// # Errors
    /// Database failures.
    pub async fn worlds(&self) -> anyhow::Result<Vec<(String, u32, u32)>> {
        let rows: Vec<(String, i32, i64)> = sqlx::query_as(
            "SELECT w.name, w.nranks, (SELECT COUNT(*) FROM window_specs s \
             WHERE s.world = w.name AND NOT s.freed) FROM worlds w ORDER BY w.name",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(name, nranks, windows)| (name, nranks as u32, windows as u32))
            .collect())
    }
}
