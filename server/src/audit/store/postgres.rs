//! What only a PostgreSQL store has: its pool, a cluster node's session limits, and the guard a
//! cluster's commit checks in its own transaction (`commit_guards`, migration 0007).
//!
//! Owns: the pool's options (`postgres_pool`: no ping before use, a bounded wait for a
//! connection), a cluster node's session limits (`cluster_session`, `AuditStore::for_cluster`),
//! the guard (`Guard`: its leases named in the commit's transaction and read at once,
//! `guard_postgres`) and the commit trigger's refusal read as `Fenced`. Must not: decide who
//! holds a lease (the cluster does; the database's trigger enforces it), run the migrations
//! (`open` does), or build the insert (`commit` does).

use sqlx::postgres::PgPoolOptions;
use sqlx::PgConnection;

use super::AuditStore;

/// The pool of a PostgreSQL store.
pub(super) fn postgres_pool() -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(4)
        // no ping (a network round trip) before each use: a broken connection fails the
        // commit, which is retried
        .test_before_acquire(false)
        // while the database is away, a commit fails within this (and is retried) instead of
        // waiting sqlx's default 30 s for a connection
        .acquire_timeout(std::time::Duration::from_secs(3))
}

/// `options` for a connection of a cluster node whose leases last `lease`: a transaction left
/// waiting for the node longer than a quarter of the lease is ended by the database
/// (`idle_in_transaction_session_timeout`), and with `lock_timeout` a statement waiting longer
/// than that for another transaction's lock fails rather than wait on a node that may be
/// paused (claims and heartbeats: `ClusterStore::own_connections`).
pub fn cluster_session(
    options: sqlx::postgres::PgConnectOptions,
    lease: std::time::Duration,
    lock_timeout: bool,
) -> sqlx::postgres::PgConnectOptions {
    let quarter = (lease / 4).as_millis().max(1).to_string();
    let options = options.options([("idle_in_transaction_session_timeout", quarter.as_str())]);
    if lock_timeout {
        options.options([("lock_timeout", quarter.as_str())])
    } else {
        options
    }
}

impl AuditStore {
    /// The same store for a cluster node whose leases last `lease`: each connection ends a
    /// transaction left waiting for this node longer than a quarter of it
    /// (`idle_in_transaction_session_timeout`), so a node paused or cut off in the middle of a
    /// commit holds the rows it wrote — which the world's next owner may be writing too — for
    /// no longer than that. A SQLite store is returned as it is (a cluster refuses it).
    pub fn for_cluster(self, lease: std::time::Duration) -> Self {
        let AuditStore::Postgres(pool) = &self else {
            return self;
        };
        let options = cluster_session(pool.connect_options().as_ref().clone(), lease, false);
        let bounded = postgres_pool().connect_lazy_with(options);
        AuditStore::Postgres(bounded)
    }
}

/// What a commit in a cluster checks in its own transaction before it inserts anything: that
/// `node` still holds each world's lease at the epoch given (`crate::cluster`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guard {
    /// This node's id.
    pub node: String,
    /// `(world, epoch)` of every world the rows belong to.
    pub leases: Vec<(String, i64)>,
}

/// A guarded commit refused: another node holds these worlds now (or this node holds them at
/// a newer epoch). Nothing was stored.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("this node no longer holds the lease of {worlds:?}")]
pub struct Fenced {
    /// The worlds.
    pub worlds: Vec<String>,
}

/// The SQLSTATE with which the commit trigger of migration 0007 refuses a guarded commit.
const FENCED_SQLSTATE: &str = "OSFEN";

/// Names `guard`'s leases in the commit's transaction (a row of `commit_guards`, migration
/// 0007), whose deferred trigger checks them inside COMMIT — the lease rows are locked only
/// while the database completes the commit, never across a round trip to this node, so a node
/// paused or cut off between two statements of its commit keeps no other node's claim
/// waiting. The same statement reads the leases now, without locking them: a commit already
/// fenced is refused before its rows are sent.
pub(super) async fn guard_postgres(conn: &mut PgConnection, guard: &Guard) -> anyhow::Result<()> {
    let (worlds, epochs): (Vec<&str>, Vec<i64>) = guard
        .leases
        .iter()
        .map(|(world, epoch)| (world.as_str(), *epoch))
        .unzip();
    let held: Vec<(String, i64)> = sqlx::query_as(
        "WITH named AS (INSERT INTO commit_guards (node_id, worlds, epochs) \
             VALUES ($1, $2, $3)) \
         SELECT world, epoch FROM world_owners WHERE node_id = $1 AND world = ANY($2)",
    )
    .bind(&guard.node)
    .bind(&worlds)
    .bind(&epochs)
    .fetch_all(&mut *conn)
    .await?;
    let fenced: Vec<String> = guard
        .leases
        .iter()
        .filter(|lease| !held.contains(lease))
        .map(|(world, _)| world.clone())
        .collect();
    if fenced.is_empty() {
        Ok(())
    } else {
        Err(Fenced { worlds: fenced }.into())
    }
}

/// A COMMIT's failure: [`Fenced`] when the commit trigger refused it (another node claimed a
/// world between the guard's first look and the commit), else the database's error.
pub(super) fn commit_failed_postgres(error: sqlx::Error) -> anyhow::Error {
    if let Some(database) = error.as_database_error() {
        if database.code().as_deref() == Some(FENCED_SQLSTATE) {
            let worlds = database
                .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                .and_then(|error| error.detail())
                .and_then(|detail| serde_json::from_str::<Vec<String>>(detail).ok());
            if let Some(worlds) = worlds {
                return Fenced { worlds }.into();
            }
        }
    }
    error.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::path::Path;

    use onesided_core::audit::GENESIS;
    use sqlx::{Connection, Postgres};

    use super::super::commit::{padded_insert, PADDED_INSERTS_POSTGRES};
    use super::super::tests::chained;
    use super::super::{Committer, StoredWorld};

    /// A node paused (SIGSTOP) or cut off between two statements of a guarded commit keeps no
    /// other node's claim of the world waiting: the guard locks no lease row across a round
    /// trip. The commit, resumed after the claim, is refused at COMMIT and stores nothing
    /// (issue 43, item 10).
    #[tokio::test]
    async fn a_guarded_commit_paused_between_its_statements_holds_no_claim_back() {
        let database = onesided_test_support::PgDatabase::create().await;
        let store = AuditStore::open(Some(&database.url), Path::new("."))
            .await
            .unwrap();
        let world = StoredWorld {
            name: "paused".into(),
            nranks: 1,
            tokens: vec![([3; 32], 0)],
        };
        store
            .save_world(
                &world,
                Some(("node-a", true, std::time::Duration::from_secs(5))),
            )
            .await
            .unwrap();
        let AuditStore::Postgres(pool) = &store else {
            unreachable!()
        };
        let guard = Guard {
            node: "node-a".into(),
            leases: vec![("paused".into(), 1)],
        };
        // the commit's statements, as `insert_postgres` sends them, up to its COMMIT
        let mut conn = pool.acquire().await.unwrap();
        let mut tx = conn.begin().await.unwrap();
        guard_postgres(&mut tx, &guard).await.unwrap();
        let rows = chained(1, 1..=3, GENESIS);
        let singles: Vec<_> = rows.iter().map(|row| (row, None)).collect();
        padded_insert::<Postgres>(&PADDED_INSERTS_POSTGRES, false, &singles)
            .execute(&mut *tx)
            .await
            .unwrap();
        // … where the node stops; another node claims the world, waiting for no lock
        let mut other = PgConnection::connect(&database.url).await.unwrap();
        sqlx::query("SET lock_timeout = 1000")
            .execute(&mut other)
            .await
            .unwrap();
        let claimed = sqlx::query(
            "UPDATE world_owners SET node_id = 'node-b', epoch = epoch + 1 WHERE world = 'paused'",
        )
        .execute(&mut other)
        .await;
        assert!(
            claimed.is_ok(),
            "the claim waited on the paused commit: {claimed:?}"
        );
        // the node resumes: its commit is refused and nothing of it is stored
        let refused = tx
            .commit()
            .await
            .map_err(commit_failed_postgres)
            .unwrap_err();
        assert_eq!(
            refused.downcast_ref::<Fenced>(),
            Some(&Fenced {
                worlds: vec!["paused".into()]
            }),
            "{refused:#}"
        );
        assert!(store.rows(1, 1).await.unwrap().is_empty());
        // a commit under the current lease lands, and leaves no guard row behind
        let current = Guard {
            node: "node-b".into(),
            leases: vec![("paused".into(), 2)],
        };
        Committer::new(store.clone())
            .insert_guarded(&rows, &[], Some(&current))
            .await
            .unwrap();
        assert_eq!(store.rows(1, 1).await.unwrap().len(), 3);
        let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM commit_guards")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(left, 0);
    }
}
