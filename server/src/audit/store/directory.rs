//! The directory: the stored worlds with their token hashes, and the window specs, which a
//! restart brings back.
//!
//! Owns: the store's statements on `worlds`, `world_tokens` and `window_specs` (a world saved
//! and deleted, a window's spec saved, replaced and freed, and all of them read back), and a
//! new world's first lease row (`world_owners`, in a cluster), written in the world's own
//! transaction. Must not: claim, renew or move a lease (the cluster does), check a token
//! (`crate::auth` does), or read a window's spec (`registry` writes and reads it).

use super::{hash32, on_pool, AuditStore};

/// A world as stored: its size and the SHA-256 of each rank's token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredWorld {
    /// Name.
    pub name: String,
    /// Number of ranks.
    pub nranks: u32,
    /// `(token SHA-256, rank)`.
    pub tokens: Vec<([u8; 32], u32)>,
}

/// A window that was created and not freed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredWindow {
    /// Window id.
    pub id: u64,
    /// World name.
    pub world: String,
    /// Window name.
    pub name: String,
    /// Its shape and info as JSON (`registry` writes and reads it).
    pub spec: String,
}

/// Commits `tx` when `written` is `Ok`, and otherwise rolls it back *now* — a dropped
/// transaction only queues its ROLLBACK for the connection's next use, holding its locks
/// until then — and returns `written`'s error.
async fn end_transaction<DB: sqlx::Database>(
    tx: sqlx::Transaction<'_, DB>,
    written: Result<(), sqlx::Error>,
) -> Result<(), sqlx::Error> {
    match written {
        Ok(()) => tx.commit().await,
        Err(error) => {
            // the first error says why; a failed rollback ends with the connection anyway
            let _ = tx.rollback().await;
            Err(error)
        }
    }
}

impl AuditStore {
    /// Records a new world and the SHA-256 of its rank tokens; in a cluster, with the node
    /// that serves it (`(node id, whether that is the node calling, lease)`: epoch 1 when it
    /// is, 0 for a world the other node has yet to take up), in the same transaction.
    ///
    /// # Errors
    /// Database failures (nothing is stored then).
    pub async fn save_world(
        &self,
        world: &StoredWorld,
        owner: Option<(&str, bool, std::time::Duration)>,
    ) -> anyhow::Result<()> {
        on_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let written: Result<(), sqlx::Error> = async {
            sqlx::query("INSERT INTO worlds (name, nranks) VALUES ($1, $2)")
                .bind(&world.name)
                .bind(world.nranks as i32)
                .execute(&mut *tx)
                .await?;
            // after the worlds row: the lease row refers to it
            if let Some((node, here, ttl)) = owner {
                sqlx::query(
                    "INSERT INTO world_owners (world, node_id, epoch, lease_until) \
                     VALUES ($1, $2, $3, now() + make_interval(secs => $4))",
                )
                .bind(&world.name)
                .bind(node)
                .bind(i64::from(here))
                .bind(ttl.as_secs_f64())
                .execute(&mut *tx)
                .await?;
            }
            for (hash, rank) in &world.tokens {
                sqlx::query("INSERT INTO world_tokens (token_sha256, world, rank) VALUES ($1, $2, $3)")
                    .bind(hash.to_vec())
                    .bind(&world.name)
                    .bind(*rank as i32)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok(())
            }
            .await;
            end_transaction(tx, written).await?;
        });
        Ok(())
    }

    /// Whether a world of this name is stored.
    ///
    /// # Errors
    /// Database failures.
    pub async fn world_exists(&self, name: &str) -> anyhow::Result<bool> {
        let sql = "SELECT COUNT(*) FROM worlds WHERE name = $1";
        let count: i64 =
            on_pool!(self, pool => sqlx::query_scalar(sql).bind(name).fetch_one(pool).await?);
        Ok(count > 0)
    }

    /// Forgets a world and its tokens; its windows count as freed.
    ///
    /// # Errors
    /// Database failures.
    pub async fn delete_world(&self, name: &str) -> anyhow::Result<()> {
        on_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let written: Result<(), sqlx::Error> = async {
                for sql in [
                    "DELETE FROM world_tokens WHERE world = $1",
                    "DELETE FROM worlds WHERE name = $1",
                    "UPDATE window_specs SET freed = TRUE WHERE world = $1",
                ] {
                    sqlx::query(sql).bind(name).execute(&mut *tx).await?;
                }
                Ok(())
            }
            .await;
            end_transaction(tx, written).await?;
        });
        Ok(())
    }

    /// Records a window's shape (its creation event is in the log).
    ///
    /// # Errors
    /// Database failures.
    pub async fn save_window(&self, window: &StoredWindow) -> anyhow::Result<()> {
        let sql = "INSERT INTO window_specs (window_id, world, name, spec) VALUES ($1, $2, $3, $4)";
        on_pool!(self, pool => {
            sqlx::query(sql)
                .bind(window.id as i64)
                .bind(&window.world)
                .bind(&window.name)
                .bind(&window.spec)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Replaces a window's stored shape and info (after `MPI_Win_set_info`): a restart
    /// brings the window back with it.
    ///
    /// # Errors
    /// Database failures.
    pub async fn update_window_spec(&self, id: u64, spec: &str) -> anyhow::Result<()> {
        let sql = "UPDATE window_specs SET spec = $2 WHERE window_id = $1";
        on_pool!(self, pool => {
            sqlx::query(sql).bind(id as i64).bind(spec).execute(pool).await?;
        });
        Ok(())
    }

    /// Marks a window freed: a restart does not bring it back.
    ///
    /// # Errors
    /// Database failures.
    pub async fn free_window(&self, id: u64) -> anyhow::Result<()> {
        let sql = "UPDATE window_specs SET freed = TRUE WHERE window_id = $1";
        on_pool!(self, pool => {
            sqlx::query(sql).bind(id as i64).execute(pool).await?;
        });
        Ok(())
    }

    /// Every stored world with its token hashes, and every window not freed.
    ///
    /// # Errors
    /// Database failures.
    pub async fn directory(&self) -> anyhow::Result<(Vec<StoredWorld>, Vec<StoredWindow>)> {
        type Rows = (
            Vec<(String, i32)>,
            Vec<(Vec<u8>, String, i32)>,
            Vec<(i64, String, String, String)>,
        );
        let (worlds, tokens, windows): Rows = on_pool!(self, pool => (
            sqlx::query_as("SELECT name, nranks FROM worlds ORDER BY name")
                .fetch_all(pool)
                .await?,
            sqlx::query_as("SELECT token_sha256, world, rank FROM world_tokens")
                .fetch_all(pool)
                .await?,
            sqlx::query_as(
                "SELECT window_id, world, name, spec FROM window_specs \
                 WHERE freed = FALSE ORDER BY window_id",
            )
            .fetch_all(pool)
            .await?,
        ));
        let mut worlds: Vec<StoredWorld> = worlds
            .into_iter()
            .map(|(name, nranks)| StoredWorld {
                name,
                nranks: nranks as u32,
                tokens: Vec::new(),
            })
            .collect();
        for (hash, world, rank) in tokens {
            if let Some(entry) = worlds.iter_mut().find(|entry| entry.name == world) {
                entry.tokens.push((hash32(&hash), rank as u32));
            }
        }
        let windows = windows
            .into_iter()
            .map(|(id, world, name, spec)| StoredWindow {
                id: id as u64,
                world,
                name,
                spec,
            })
            .collect();
        Ok((worlds, windows))
    }
}
