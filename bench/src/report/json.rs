//! The report as one JSON object (`onesided-bench --json`): every figure by its key, each
//! `sync` run with its ratios, targets and floors, and the references.
//!
//! Owns: the JSON's keys, their nesting and their `null`s. Must not: measure anything, or print
//! (the binary does); the table's wording is `table`'s.

use serde_json::{json, Map, Value};

use super::{latency_target, number, Report, Store};
use crate::{mpich, BusyPolled, Patterns};

impl Report {
    /// One JSON object: every metric by its key, the references both at the top level and
    /// under `"references"`, plus `"audit"` and `"iterations"`. MPICH's figures are an object
    /// under `references.mpich` only (`null`, with `references.mpich_missing` saying why, when
    /// it was not measured).
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("audit".into(), json!(self.audit));
        object.insert("iterations".into(), json!(self.iterations));
        object.insert("server_threads".into(), json!(self.server_threads));
        object.insert("client_threads".into(), json!(self.client_threads));
        object.insert("keep_awake".into(), json!(self.keep_awake));
        // the latencies, hot counter, bulk and fence scaling, as the sync run has them
        object.extend(self.patterns.to_json());
        object.insert("bulk_put_bytes".into(), json!(self.bulk_bytes));
        object.insert(
            "bulk_put_single_message".into(),
            json!(self.patterns.bulk_single_put_failed.is_none()),
        );
        object.insert(
            "bulk_put_single_failure".into(),
            json!(self.patterns.bulk_single_put_failed),
        );
        let sync_sqlite = self
            .sync_sqlite
            .as_ref()
            .map(|sync| self.sync_json(sync, Store::Sqlite));
        let sync_postgres = self
            .sync_postgres
            .as_ref()
            .map(|sync| self.sync_json(sync, Store::Postgres));
        // `sync` as before the SQLite run was added: the run into --database-url when there
        // is one, else the only sync run
        let sync = sync_postgres.clone().or_else(|| sync_sqlite.clone());
        object.insert("sync".into(), sync.unwrap_or(Value::Null));
        object.insert("sync_sqlite".into(), sync_sqlite.unwrap_or(Value::Null));
        object.insert("sync_postgres".into(), sync_postgres.unwrap_or(Value::Null));
        let rss = self.bulk_rss.as_ref();
        object.insert(
            "bulk_peak_rss_mib".into(),
            number(rss.map(|rss| rss.off_mib)),
        );
        object.insert(
            "bulk_rss".into(),
            rss.map_or(Value::Null, |rss| {
                json!({
                    "put_mib": rss.put_mib,
                    "window_mib": rss.window_mib,
                    "target_mib": rss.target_mib,
                    "off_mib": rss.off_mib,
                    "sync_mib": rss.sync_mib,
                    "off_met": rss.off_mib <= rss.target_mib,
                    "sync_met": rss.sync_mib <= rss.target_mib,
                    "sync_store_bytes_per_byte": rss.sync_store_bytes_per_byte,
                })
            }),
        );
        object.insert("bulk_rss_missing".into(), json!(self.bulk_rss_missing));
        object.insert(
            "busy_poll".into(),
            self.busy_poll
                .as_ref()
                .map_or(Value::Null, |polled| self.busy_poll_json(polled)),
        );
        let mut references = json!({
            "raw_tcp_pingpong_us": self.raw_tcp_pingpong_us,
            "raw_tcp_bulk_mib_per_s": self.raw_tcp_bulk_mib_per_s,
            "grpc_echo_us": self.grpc.echo_us,
            "grpc_64_streams_per_s": self.grpc.streams_per_s,
            "grpc_bulk_mib_per_s": self.grpc.bulk_mib_per_s,
            "grpc_barrier_us": self
                .grpc_barrier_us
                .iter()
                .map(|(ranks, us)| (ranks.to_string(), json!(us)))
                .collect::<Map<String, Value>>(),
            "redis_get_set_us": number(self.redis_get_set_us),
            "redis_incr_50_clients_per_s": number(self.redis_incr_50_clients_per_s),
            "redis_durable_incr_1_client_p50_us": number(
                self.redis_durable.as_ref().map(|redis| redis.incr_1_client_p50_us)
            ),
            "redis_durable_incr_1_client_per_s": number(
                self.redis_durable.as_ref().map(|redis| redis.incr_1_client_per_s)
            ),
            "redis_durable_incr_50_clients_per_s": self.redis_durable_50_clients(),
            "redis_durable_missing": self.redis_durable_missing,
            "fdatasync_us": self.fdatasync_us,
            "sqlite_commit_us": self.sqlite_commit_us,
            "commit_echo_us": self.sqlite_floors.echo_us,
            "pg_commit_echo_us": number(self.pg_floors.map(|floors| floors.echo_us)),
            "commit_streams_per_s": self.sqlite_floors.streams_per_s,
            "pg_commit_streams_per_s": number(self.pg_floors.map(|floors| floors.streams_per_s)),
            "disk_write_mib_per_s": self.disk_write_mib_per_s,
            "disk_write_bytes": self.disk_write_bytes,
            "pg_commit_us": number(self.pg_commit.as_ref().map(|commit| commit.median_us)),
            "pg_insert_mib_per_s": number(
                self.pg_commit.as_ref().map(|commit| commit.insert_mib_per_s)
            ),
            "pg_synchronous_commit": self
                .pg_commit
                .as_ref()
                .map(|commit| commit.synchronous_commit.clone()),
        });
        for (key, value) in references.as_object().expect("an object") {
            object.insert(key.clone(), value.clone());
        }
        references["mpich"] = self
            .mpich
            .as_ref()
            .map_or(Value::Null, mpich::Mpich::to_json);
        references["mpich_missing"] = json!(self.mpich_missing);
        object.insert("references".into(), references);
        Value::Object(object)
    }

    /// The busy-polling run's latencies by key, with `budget_us`, `server` (`"process"` or
    /// `"in-process"`), `plain` (the same patterns against a server of the same kind without
    /// busy-polling), `ratio_to_plain`, `ratio_to_mpich` (`null` without MPICH) and
    /// `ratio_to_raw_tcp` (by the raw TCP ping-pong).
    fn busy_poll_json(&self, polled: &BusyPolled) -> Value {
        let mut object = Map::new();
        object.insert("budget_us".into(), json!(polled.budget.as_micros() as u64));
        object.insert("server".into(), json!(polled.server));
        let mut plain = Map::new();
        let mut to_plain = Map::new();
        let mut to_mpich = Map::new();
        let mut to_tcp = Map::new();
        for ((key, value), (_, without)) in polled.latencies.iter().zip(&polled.plain) {
            object.insert((*key).into(), json!(value));
            plain.insert((*key).into(), json!(without));
            to_plain.insert((*key).into(), json!(value / without));
            let mpich = self.mpich.as_ref().and_then(|m| m.latency(key));
            to_mpich.insert((*key).into(), number(mpich.map(|mpich| value / mpich)));
            to_tcp.insert((*key).into(), json!(value / self.raw_tcp_pingpong_us));
        }
        object.insert("plain".into(), Value::Object(plain));
        object.insert("ratio_to_plain".into(), Value::Object(to_plain));
        object.insert("ratio_to_mpich".into(), Value::Object(to_mpich));
        object.insert("ratio_to_raw_tcp".into(), Value::Object(to_tcp));
        Value::Object(object)
    }

    /// A `sync` run's figures by key, with `ratio_to_off` (each figure divided by the `off`
    /// one), `store`, `target_reference` (the key of the storage reference), and, for every
    /// latency, `latency_target_us` (`off` + [`SYNC_TARGET_REFERENCES`] × that reference) and
    /// `latency_target_met` (the `sync` figure is within it), and
    /// `hot_counter_ratio_to_redis_durable` (the hot counter divided by the durable Redis's
    /// INCR with 50 clients, issue 12's stretch: ≥ 1; `null` without it).
    ///
    /// [`SYNC_TARGET_REFERENCES`]: super::SYNC_TARGET_REFERENCES
    fn sync_json(&self, sync: &Patterns, store: Store) -> Value {
        let mut figures = sync.to_json();
        // the share of the off figure that sync keeps, per key (latency: how many times)
        let off = self.patterns.to_json();
        let mut ratios: Map<String, Value> = figures
            .iter()
            .filter_map(|(key, value)| {
                let ratio = value.as_f64()? / off.get(key)?.as_f64()?;
                Some((key.clone(), json!(ratio)))
            })
            .collect();
        let mut scaling_ratios =
            per_latency(&self.patterns, sync, |off, synced| json!(synced / off));
        if let Some(scaling) = scaling_ratios.remove("fence_scaling_us") {
            ratios.insert("fence_scaling_us".into(), scaling);
        }
        figures.insert("ratio_to_off".into(), Value::Object(ratios));
        // the server's memory in sync is measured with the default store only
        let rss = self.bulk_rss.as_ref().filter(|_| store == Store::Sqlite);
        figures.insert(
            "bulk_peak_rss_mib".into(),
            number(rss.map(|rss| rss.sync_mib)),
        );
        if store == Store::Postgres {
            // issue 12, item 3: PostgreSQL's own bulk INSERT is the floor of a sync bulk put
            let floor = self
                .pg_commit
                .as_ref()
                .map(|commit| commit.insert_mib_per_s);
            figures.insert(
                "bulk_ratio_to_pg_insert".into(),
                number(floor.map(|floor| sync.bulk_put_mib_per_s / floor)),
            );
        }
        figures.insert("store".into(), json!(store.names().name));
        figures.insert("target_reference".into(), json!(store.names().reference));
        // what a sync lock-put-unlock cannot go below with this store: the round trip and its
        // epoch's commit, and nothing else of onesided's
        figures.insert("floor_reference".into(), json!(store.names().floor));
        let floors = self.floors(store);
        let floor = floors.map(|floors| floors.echo_us);
        figures.insert(
            "lock_put_unlock_ratio_to_floor".into(),
            number(floor.map(|floor| sync.latency("lock_put_unlock_us") / floor)),
        );
        // and what its hot counter cannot exceed: item 2 asks for 0.8 × off, which this floor
        // allows only when its own ratio to off reaches it
        figures.insert(
            "hot_counter_floor_reference".into(),
            json!(store.names().hot_counter_floor),
        );
        let hot_floor = floors.map(|floors| floors.streams_per_s);
        figures.insert(
            "hot_counter_ratio_to_floor".into(),
            number(hot_floor.map(|floor| sync.hot_counter_ops_per_s / floor)),
        );
        figures.insert(
            "hot_counter_floor_ratio_to_off".into(),
            number(hot_floor.map(|floor| floor / self.patterns.hot_counter_ops_per_s)),
        );
        let reference = self.store_reference_us(store);
        let (off, which) = self.off_for_targets(store);
        figures.insert("off_for_targets".into(), json!(which));
        figures.insert(
            "off_for_targets_us".into(),
            Value::Object(per_latency(&off, sync, |off, _| json!(off))),
        );
        let targets = per_latency(&off, sync, |off, _| {
            number(reference.map(|reference| latency_target(off, reference)))
        });
        let met = per_latency(&off, sync, |off, synced| {
            reference.map_or(Value::Null, |reference| {
                json!(synced <= latency_target(off, reference))
            })
        });
        figures.insert("latency_target_us".into(), Value::Object(targets));
        figures.insert("latency_target_met".into(), Value::Object(met));
        // issue 12's stretch target for the hot counter: at least the durable Redis's INCR
        let durable = self.redis_durable_50_clients().as_f64();
        figures.insert(
            "hot_counter_ratio_to_redis_durable".into(),
            number(durable.map(|rps| sync.hot_counter_ops_per_s / rps)),
        );
        Value::Object(figures)
    }
}

/// `figure(off, sync)` of every latency (µs) figure, keyed as in the report's JSON: the
/// patterns of [`LATENCY_KEYS`], and `fence_scaling_us` as an object by ranks.
///
/// [`LATENCY_KEYS`]: crate::LATENCY_KEYS
fn per_latency(
    off: &Patterns,
    sync: &Patterns,
    figure: impl Fn(f64, f64) -> Value,
) -> Map<String, Value> {
    let mut object: Map<String, Value> = off
        .latencies
        .iter()
        .zip(&sync.latencies)
        .map(|((key, off), (_, synced))| ((*key).to_string(), figure(*off, *synced)))
        .collect();
    let scaling: Map<String, Value> = off
        .fence_scaling_us
        .iter()
        .zip(&sync.fence_scaling_us)
        .map(|((ranks, off), (_, synced))| (ranks.to_string(), figure(*off, *synced)))
        .collect();
    object.insert("fence_scaling_us".into(), Value::Object(scaling));
    object
}
