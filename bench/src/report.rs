//! What one run measured (`Report`), and what its two renderings share: where each `sync` run's
//! audit went (`Store`) and the figures that run is held to.
//!
//! Split by concern (issue 41): this file holds the report and the targets of issue 12;
//! `report/json.rs` renders it as one JSON object and `report/table.rs` as Markdown tables.
//!
//! Owns: the `Report` fields, the `sync` latency target (`latency_target`,
//! `SYNC_TARGET_REFERENCES`), and which `off` figures, floors and storage reference a `sync` run
//! into each store is held to. Must not: measure anything (`run` fills the report), or choose a
//! JSON key or a table's text (`json` and `table` do).

mod json;
mod table;

use serde_json::Value;

use crate::{grpc, mpich, redis, rss, storage, BusyPolled, Patterns};

pub(crate) use table::ratio;

/// How much a `sync` latency may exceed the `off` one, in storage references (issue 12): the
/// target of a `sync` latency is the `off` figure + this × `fdatasync_us` (SQLite) or
/// `pg_commit_us` (PostgreSQL).
pub const SYNC_TARGET_REFERENCES: f64 = 1.5;

/// Every figure of one run. Missing references are `None`.
#[derive(Clone, Debug)]
pub struct Report {
    /// `off`, `async`, `sync`, or for a remote server `remote` (`remote-audited` when it logs).
    pub audit: String,
    /// Measured iterations per latency pattern.
    pub iterations: usize,
    /// Worker threads of the in-process server (`None` for a server given by address).
    pub server_threads: Option<usize>,
    /// Worker threads of the runtime the clients ran on.
    pub client_threads: usize,
    /// Whether every CPU was kept busy at the lowest priority (`--keep-awake`).
    pub keep_awake: bool,
    /// What the server (in `audit` mode) gave for every pattern.
    pub patterns: Patterns,
    /// Size of the bulk put in bytes.
    pub bulk_bytes: usize,
    /// With the audit off and the server in-process: the same patterns against a server in
    /// its default configuration, every answer waiting for its audit commit into SQLite (in its
    /// data directory, or the `sqlite:` URL given).
    pub sync_sqlite: Option<Patterns>,
    /// Given a PostgreSQL `--database-url` with the audit off: the same patterns against a
    /// server whose every answer waits for its audit commit into that database.
    pub sync_postgres: Option<Patterns>,
    /// With `--keep-awake` and `sync_postgres`: the latency patterns against a server with the
    /// audit off, measured with the spinners stopped just before `sync_postgres` is (which is
    /// measured without them, as PostgreSQL's references are): the `off` figures of
    /// PostgreSQL's latency targets, so that both sides of each comparison ran with the CPUs in
    /// the same state (`--keep-awake`, BENCHMARKS.md). `None` otherwise, and then the targets
    /// use `patterns`.
    pub off_without_spinners: Option<Vec<(&'static str, f64)>>,
    /// With `--busy-poll` and the audit off: the latency patterns against a server and
    /// sessions that busy-poll.
    pub busy_poll: Option<BusyPolled>,
    /// With the audit off and the server in-process: the peak memory of an `onesided-server`
    /// process taking one bulk put, off and in `sync`.
    pub bulk_rss: Option<rss::BulkRss>,
    /// Why it was not measured (no server binary, or it failed), when it was not.
    pub bulk_rss_missing: Option<String>,
    /// 200 bytes appended + `fdatasync` in the data directory's file system, median µs.
    pub fdatasync_us: f64,
    /// One commit of 9 rows into SQLite in the audit store's configuration there, median µs
    /// ([`storage::sqlite_commit`]).
    pub sqlite_commit_us: f64,
    /// The floors under `sync` into SQLite: a bare gRPC round trip answered after a
    /// lock-put-unlock's audit rows are committed by the store's code, and 64 such streams
    /// answered after a hot-counter operation's rows ([`grpc::commit_floors`]).
    pub sqlite_floors: grpc::CommitFloors,
    /// The same into the PostgreSQL `--database-url`.
    pub pg_floors: Option<grpc::CommitFloors>,
    /// `disk_write_bytes` written in 8 MiB chunks + `fdatasync` there, MiB/s.
    pub disk_write_mib_per_s: f64,
    /// Size of the disk write in bytes.
    pub disk_write_bytes: usize,
    /// One single-row INSERT committed into the PostgreSQL `--database-url`.
    pub pg_commit: Option<storage::PgCommit>,
    /// Raw TCP ping-pong of 8 bytes, median µs.
    pub raw_tcp_pingpong_us: f64,
    /// Raw TCP stream over loopback in 4 MiB messages, MiB/s.
    pub raw_tcp_bulk_mib_per_s: f64,
    /// A bare tonic echo service ([`grpc`]): the floor under our calls.
    pub grpc: grpc::Floor,
    /// The floor under `fence_scaling_us`: at each of its sizes, as many bare tonic streams
    /// whose every answer waits for all of them ([`grpc::barrier_us`]), median µs per round.
    pub grpc_barrier_us: Vec<(u32, f64)>,
    /// MPICH timing the same patterns between two processes over TCP.
    pub mpich: Option<mpich::Mpich>,
    /// Why MPICH was not measured, when it was not.
    pub mpich_missing: Option<String>,
    /// Redis GET and SET with one client: mean of their p50s, µs.
    pub redis_get_set_us: Option<f64>,
    /// Redis INCR with 50 clients: requests/s.
    pub redis_incr_50_clients_per_s: Option<f64>,
    /// Why Redis was not measured, when it was not.
    pub redis_missing: Option<String>,
    /// Redis INCR with `appendfsync always` on a `redis-server` the bench started ([`redis`]).
    pub redis_durable: Option<redis::Durable>,
    /// Why the durable Redis was not measured, when it was not.
    pub redis_durable_missing: Option<String>,
}

/// Issue 12's target for a `sync` latency whose `off` figure is `off_us`, against a storage
/// reference of `reference_us`.
pub fn latency_target(off_us: f64, reference_us: f64) -> f64 {
    off_us + SYNC_TARGET_REFERENCES * reference_us
}

/// `patterns` with the latencies of `latencies` in place of its own, key by key (a key that
/// `latencies` lacks keeps its figure).
fn with_latencies(patterns: &Patterns, latencies: &[(&'static str, f64)]) -> Patterns {
    let mut replaced = patterns.clone();
    for (key, value) in &mut replaced.latencies {
        if let Some((_, other)) = latencies.iter().find(|(other, _)| other == key) {
            *value = *other;
        }
    }
    replaced
}

/// A figure as JSON: `null` when it was not measured.
fn number(value: Option<f64>) -> Value {
    value.map_or(Value::Null, Value::from)
}

/// Where a `sync` run's audit goes, and so which storage reference its target is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Store {
    Sqlite,
    Postgres,
}

/// The names a store's figures go by in the report.
struct StoreNames {
    /// In the JSON's `store`.
    name: &'static str,
    /// The table's column.
    label: &'static str,
    /// The storage reference the `sync` targets are held to.
    reference: &'static str,
    /// The floor of one durable round trip.
    floor: &'static str,
    /// The floor of the hot counter.
    hot_counter_floor: &'static str,
}

impl Store {
    fn names(self) -> &'static StoreNames {
        match self {
            Store::Sqlite => &StoreNames {
                name: "sqlite",
                label: "sync SQLite",
                reference: "fdatasync_us",
                floor: "commit_echo_us",
                hot_counter_floor: "commit_streams_per_s",
            },
            Store::Postgres => &StoreNames {
                name: "postgres",
                label: "sync PostgreSQL",
                reference: "pg_commit_us",
                floor: "pg_commit_echo_us",
                hot_counter_floor: "pg_commit_streams_per_s",
            },
        }
    }
}

impl Report {
    /// The durable Redis's INCR with 50 clients, requests/s, or `null`.
    fn redis_durable_50_clients(&self) -> Value {
        number(
            self.redis_durable
                .as_ref()
                .map(|redis| redis.incr_50_clients_per_s),
        )
    }

    /// The `off` figures a `sync` run into `store` is held to: the `off` run's, except that
    /// PostgreSQL's latencies, measured without the spinners, are held to `off` latencies
    /// measured without them too ([`Report::off_without_spinners`]).
    /// Also says which: `"off"` or `"off_without_spinners"`.
    fn off_for_targets(&self, store: Store) -> (Patterns, &'static str) {
        match (store, &self.off_without_spinners) {
            (Store::Postgres, Some(latencies)) => (
                with_latencies(&self.patterns, latencies),
                "off_without_spinners",
            ),
            _ => (self.patterns.clone(), "off"),
        }
    }

    /// The floors under `sync` into `store` (`None`: not measured).
    fn floors(&self, store: Store) -> Option<grpc::CommitFloors> {
        match store {
            Store::Sqlite => Some(self.sqlite_floors),
            Store::Postgres => self.pg_floors,
        }
    }

    /// The storage reference a `sync` run into `store` is held to, in µs (`None`: not measured).
    fn store_reference_us(&self, store: Store) -> Option<f64> {
        match store {
            Store::Sqlite => Some(self.fdatasync_us),
            Store::Postgres => self.pg_commit.as_ref().map(|commit| commit.median_us),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patterns(latencies: &[(&'static str, f64)]) -> Patterns {
        Patterns {
            latencies: latencies.to_vec(),
            hot_counter_ops_per_s: 1.0,
            bulk_put_mib_per_s: 2.0,
            bulk_single_put_failed: None,
            bulk_put_shared_mib_per_s: 3.0,
            fence_scaling_us: vec![(2, 4.0)],
        }
    }

    /// PostgreSQL's targets take the latencies measured without the spinners, key by key, and
    /// nothing else: the other figures, and a latency measured only with them, stay the `off`
    /// run's.
    #[test]
    fn latencies_measured_without_the_spinners_replace_only_their_own_keys() {
        let off = patterns(&[("lock_put_unlock_us", 20.0), ("fence_put_us", 40.0)]);
        let replaced = with_latencies(&off, &[("lock_put_unlock_us", 90.0)]);
        assert_eq!(
            replaced.latencies,
            vec![("lock_put_unlock_us", 90.0), ("fence_put_us", 40.0)]
        );
        assert_eq!(replaced.fence_scaling_us, off.fence_scaling_us);
        assert_eq!(replaced.hot_counter_ops_per_s, off.hot_counter_ops_per_s);
    }
}
