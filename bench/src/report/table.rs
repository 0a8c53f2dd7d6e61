//! The report as Markdown (what `onesided-bench` prints): the main table of our figures beside
//! their references and MPICH's, the notes under it, then the `sync` runs beside `off`, the
//! server's peak memory and the busy-polling run.
//!
//! Owns: the text, columns and row order of every table and note, and how a ratio and a target
//! verdict are written. Must not: measure anything, or decide a target (`report` does; this
//! only compares a figure with it); the JSON's keys are `json`'s.

use super::{latency_target, Report, Store, SYNC_TARGET_REFERENCES};
use crate::patterns::{Row, HOT_COUNTER_ROW};
use crate::{storage, Patterns};

impl Report {
    /// A Markdown table: metric, value, the reference it is compared with and the ratio, then
    /// MPICH's figure for the same pattern and the ratio ours / MPICH.
    pub fn table(&self) -> String {
        let mut out = self.heading();
        out.push_str(&self.pattern_rows());
        out.push_str(&self.network_rows());
        out.push_str(&self.storage_rows());
        out.push_str(&self.postgres_rows());
        out.push_str(&self.redis_rows());
        out.push_str(&self.notes());
        out.push_str(&self.sync_table());
        out.push_str(&self.rss_table());
        out.push_str(&self.busy_poll_table());
        out
    }

    /// The run's settings, then the main table's column headings.
    fn heading(&self) -> String {
        let mut out = format!(
            "onesided-bench: audit {}, {} iterations per latency pattern (median after warm-up), \
             server threads {}, client threads {}{}\n\n",
            self.audit,
            self.iterations,
            self.server_threads
                .map_or_else(|| "remote".to_string(), |n| n.to_string()),
            self.client_threads,
            if self.keep_awake {
                ", CPUs kept awake"
            } else {
                ""
            }
        );
        out.push_str(
            "| metric | value | reference | ratio | MPICH | ours / MPICH |\n\
             |---|---|---|---|---|---|\n",
        );
        out
    }

    /// Our patterns, each beside its reference (the raw TCP ping-pong, Redis INCR, raw TCP or
    /// gRPC bulk) and, for the latencies and the bulk put, MPICH's figure.
    fn pattern_rows(&self) -> String {
        let tcp = Some(self.raw_tcp_pingpong_us);
        let mpich = |key: &str| self.mpich.as_ref().and_then(|m| m.latency(key));
        let mpich_cells = |value: f64, reference: Option<f64>, unit: &str| match reference {
            Some(reference) => format!("{reference:.1} {unit} | {}", ratio(value, Some(reference))),
            None => "— | —".to_string(),
        };
        let mut out = String::new();
        let tcp_name = self.tcp_pingpong_reference();
        for (key, value) in &self.patterns.latencies {
            out.push_str(&format!(
                "| `{key}` | {value:.1} µs | {tcp_name} | {} | {} |\n",
                ratio(*value, tcp),
                mpich_cells(*value, mpich(key), "µs")
            ));
        }
        let incr = self.redis_incr_reference();
        out.push_str(&format!(
            "| `hot_counter_ops_per_s` (64 ranks) | {:.0} ops/s | {incr} | {} | — | — |\n",
            self.patterns.hot_counter_ops_per_s,
            ratio(
                self.patterns.hot_counter_ops_per_s,
                self.redis_incr_50_clients_per_s
            )
        ));
        let how = match self.patterns.bulk_single_put_failed {
            None => "one put",
            Some(_) => "1 MiB puts, one epoch",
        };
        out.push_str(&format!(
            "| `bulk_put_mib_per_s` ({} MiB, {how}) | {:.0} MiB/s | raw TCP bulk {:.0} MiB/s | {} | {} |\n",
            self.bulk_bytes >> 20,
            self.patterns.bulk_put_mib_per_s,
            self.raw_tcp_bulk_mib_per_s,
            ratio(self.patterns.bulk_put_mib_per_s, Some(self.raw_tcp_bulk_mib_per_s)),
            mpich_cells(
                self.patterns.bulk_put_mib_per_s,
                self.mpich.as_ref().map(|m| m.bulk_put_mib_per_s),
                "MiB/s"
            )
        ));
        out.push_str(&format!(
            "| `bulk_put_shared_mib_per_s` ({} MiB, `put_bytes`) | {:.0} MiB/s | gRPC bulk {:.0} MiB/s | {} | — | — |\n",
            self.bulk_bytes >> 20,
            self.patterns.bulk_put_shared_mib_per_s,
            self.grpc.bulk_mib_per_s,
            ratio(self.patterns.bulk_put_shared_mib_per_s, Some(self.grpc.bulk_mib_per_s)),
        ));
        for (ranks, value) in &self.patterns.fence_scaling_us {
            out.push_str(&format!(
                "| `fence_scaling_us` {ranks} ranks | {value:.1} µs | {tcp_name} | {} | — | — |\n",
                ratio(*value, tcp)
            ));
        }
        out
    }

    /// The network references: the raw TCP ping-pong and bulk stream, then the bare tonic
    /// echo, barrier, streams and bulk, each gRPC figure beside the raw figure under it.
    fn network_rows(&self) -> String {
        let tcp = Some(self.raw_tcp_pingpong_us);
        let tcp_name = self.tcp_pingpong_reference();
        let incr = self.redis_incr_reference();
        let mut out = String::new();
        out.push_str(&format!(
            "| `raw_tcp_pingpong_us` | {:.1} µs | | | | |\n",
            self.raw_tcp_pingpong_us
        ));
        out.push_str(&format!(
            "| `raw_tcp_bulk_mib_per_s` (4 MiB messages) | {:.0} MiB/s | | | | |\n",
            self.raw_tcp_bulk_mib_per_s
        ));
        let grpc = &self.grpc;
        out.push_str(&format!(
            "| `grpc_echo_us` (bare tonic stream, 8 B each way) | {:.1} µs | {tcp_name} | {} | | |\n",
            grpc.echo_us,
            ratio(grpc.echo_us, tcp)
        ));
        for (ranks, us) in &self.grpc_barrier_us {
            let ours = self
                .patterns
                .fence_scaling_us
                .iter()
                .find(|(size, _)| size == ranks)
                .map(|(_, ours)| *ours);
            out.push_str(&format!(
                "| `grpc_barrier_us` {ranks} ranks ({ranks} such streams, each answer after all {ranks} messages of the round) | {us:.1} µs | `fence_scaling_us` {ranks} ranks | {} | | |\n",
                ratio(*us, ours)
            ));
        }
        out.push_str(&format!(
            "| `grpc_64_streams_per_s` (64 such streams at once) | {:.0}/s | {incr} | {} | | |\n",
            grpc.streams_per_s,
            ratio(grpc.streams_per_s, self.redis_incr_50_clients_per_s)
        ));
        out.push_str(&format!(
            "| `grpc_bulk_mib_per_s` (1 MiB messages, each acknowledged) | {:.0} MiB/s | raw TCP bulk {:.0} MiB/s | {} | | |\n",
            grpc.bulk_mib_per_s,
            self.raw_tcp_bulk_mib_per_s,
            ratio(grpc.bulk_mib_per_s, Some(self.raw_tcp_bulk_mib_per_s))
        ));
        out
    }

    /// The storage references of the data directory's file system and SQLite: `fdatasync`, an
    /// SQLite commit, the floors under `sync` into SQLite, and the bulk disk write.
    fn storage_rows(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "| `fdatasync_us` (200 B append + fdatasync, data dir's file system) | {:.1} µs | | | | |\n",
            self.fdatasync_us
        ));
        out.push_str(&format!(
            "| `sqlite_commit_us` (9 rows, one commit, WAL + synchronous=FULL, one connection) | {:.1} µs | `fdatasync_us` | {} | | |\n",
            self.sqlite_commit_us,
            ratio(self.sqlite_commit_us, Some(self.fdatasync_us))
        ));
        out.push_str(&format!(
            "| `commit_echo_us` (bare tonic stream answering after a lock-put-unlock's 9 audit rows are committed, SQLite) | {:.1} µs | `fdatasync_us` | {} | | |\n",
            self.sqlite_floors.echo_us,
            ratio(self.sqlite_floors.echo_us, Some(self.fdatasync_us))
        ));
        out.push_str(&format!(
            "| `commit_streams_per_s` (64 such streams, each round trip after a hot-counter operation's 5 rows are committed in groups, SQLite) | {:.0}/s | `grpc_64_streams_per_s` | {} | | |\n",
            self.sqlite_floors.streams_per_s,
            ratio(self.sqlite_floors.streams_per_s, Some(self.grpc.streams_per_s))
        ));
        let quick = if self.disk_write_bytes < 256 << 20 {
            ", --quick"
        } else {
            ""
        };
        out.push_str(&format!(
            "| `disk_write_mib_per_s` ({} MiB in {} MiB writes + fdatasync{quick}) | {:.0} MiB/s | | | | |\n",
            self.disk_write_bytes >> 20,
            storage::WRITE_CHUNK >> 20,
            self.disk_write_mib_per_s
        ));
        out
    }

    /// PostgreSQL's commit, bulk INSERT and floors, or one row saying it was not measured.
    fn postgres_rows(&self) -> String {
        let mut out = String::new();
        match &self.pg_commit {
            Some(commit) => {
                out.push_str(&format!(
                    "| `pg_commit_us` (1-row INSERT, autocommit, synchronous_commit {}) | {:.1} µs | | | | |\n",
                    commit.synchronous_commit, commit.median_us
                ));
                out.push_str(&format!(
                    "| `pg_insert_mib_per_s` (1-row INSERT of {} MiB, autocommit) | {:.0} MiB/s | | | | |\n",
                    self.bulk_bytes >> 20,
                    commit.insert_mib_per_s
                ));
                if let Some(floors) = self.pg_floors {
                    out.push_str(&format!(
                        "| `pg_commit_echo_us` (the same as `commit_echo_us`, into PostgreSQL) | {:.1} µs | `pg_commit_us` | {} | | |\n\
                         | `pg_commit_streams_per_s` (the same as `commit_streams_per_s`, into PostgreSQL) | {:.0}/s | `grpc_64_streams_per_s` | {} | | |\n",
                        floors.echo_us,
                        ratio(floors.echo_us, Some(commit.median_us)),
                        floors.streams_per_s,
                        ratio(floors.streams_per_s, Some(self.grpc.streams_per_s))
                    ));
                }
            }
            None => out.push_str(
                "| `pg_commit_us` | not measured (no PostgreSQL --database-url) | | | | |\n",
            ),
        }
        out
    }

    /// Redis's GET/SET and INCR, then the durable Redis's INCR, or `not available` for each.
    fn redis_rows(&self) -> String {
        let mut out = String::new();
        match (self.redis_get_set_us, self.redis_incr_50_clients_per_s) {
            (Some(get_set), Some(incr)) => {
                out.push_str(&format!(
                    "| `redis_get_set_us` (p50, 1 client) | {get_set:.1} µs | | | | |\n"
                ));
                out.push_str(&format!(
                    "| `redis_incr_50_clients_per_s` | {incr:.0}/s | | | | |\n"
                ));
            }
            _ => {
                out.push_str("| `redis_get_set_us` | not available | | | | |\n");
                out.push_str("| `redis_incr_50_clients_per_s` | not available | | | | |\n");
            }
        }
        match &self.redis_durable {
            Some(redis) => {
                let p50 = if redis.p50_from_csv {
                    "p50"
                } else {
                    "mean 1/rps: no p50 in the CSV"
                };
                out.push_str(&format!(
                    "| `redis_durable_incr_1_client_p50_us` (appendfsync always, {p50}) | {:.1} µs | | | | |\n\
                     | `redis_durable_incr_1_client_per_s` (appendfsync always) | {:.0}/s | | | | |\n\
                     | `redis_durable_incr_50_clients_per_s` (appendfsync always) | {:.0}/s | | | | |\n",
                    redis.incr_1_client_p50_us,
                    redis.incr_1_client_per_s,
                    redis.incr_50_clients_per_s
                ));
            }
            None => {
                for key in [
                    "redis_durable_incr_1_client_p50_us",
                    "redis_durable_incr_1_client_per_s",
                    "redis_durable_incr_50_clients_per_s",
                ] {
                    out.push_str(&format!("| `{key}` | not available | | | | |\n"));
                }
            }
        }
        out
    }

    /// The notes under the main table: MPICH's version and transport, a failed single bulk
    /// put, and why a reference was not measured.
    fn notes(&self) -> String {
        let mut out = String::new();
        if let Some(mpich) = &self.mpich {
            let environment: Vec<String> = mpich
                .environment
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect();
            let segments = match mpich.tcp_segments_sent {
                Some(n) => format!("; {n} TCP segments sent during its run"),
                None => String::new(),
            };
            let finalize = if mpich.hung_in_finalize {
                "; hung in MPI_Finalize after its figures and was killed"
            } else {
                ""
            };
            out.push_str(&format!(
                "\nMPICH {}: {} ({}){segments}{finalize}\n",
                mpich.version,
                mpich.transport,
                environment.join(" ")
            ));
        }
        if let Some(why) = &self.patterns.bulk_single_put_failed {
            out.push_str(&format!(
                "\nOne {} MiB put failed: {why}\n",
                self.bulk_bytes >> 20
            ));
        }
        if let Some(why) = &self.mpich_missing {
            out.push_str(&format!("\nMPICH not measured: {why}\n"));
        }
        if let Some(why) = &self.redis_missing {
            out.push_str(&format!("\nRedis not measured: {why}\n"));
        }
        if let Some(why) = &self.redis_durable_missing {
            out.push_str(&format!(
                "\nDurable Redis (appendfsync always) not measured: {why}\n"
            ));
        }
        out
    }

    /// The reference cell of the patterns timed against the raw TCP ping-pong.
    fn tcp_pingpong_reference(&self) -> String {
        format!("raw TCP ping-pong {:.1} µs", self.raw_tcp_pingpong_us)
    }

    /// The reference cell of the figures compared with Redis INCR under 50 clients.
    fn redis_incr_reference(&self) -> String {
        match self.redis_incr_50_clients_per_s {
            Some(rps) => format!("Redis INCR 50 clients {rps:.0}/s"),
            None => "Redis INCR: not available".to_string(),
        }
    }

    /// The server's peak memory during one bulk put, off and sync, against issue 12's bound.
    fn rss_table(&self) -> String {
        match (&self.bulk_rss, &self.bulk_rss_missing) {
            (Some(rss), _) => format!(
                "\nServer peak RSS (`bulk_peak_rss_mib`, an `onesided-server` process) during one \
                 {:.0} MiB put into a window of {:.0} MiB: audit off {:.0} MiB, sync SQLite {:.0} \
                 MiB; bound (window + put) {:.0} MiB: off {}, sync {}. In sync the data directory grew \
                 by {:.2} bytes per byte put (issue 12: at most 1.1)\n",
                rss.put_mib,
                rss.window_mib,
                rss.off_mib,
                rss.sync_mib,
                rss.target_mib,
                met(rss.off_mib <= rss.target_mib),
                met(rss.sync_mib <= rss.target_mib),
                rss.sync_store_bytes_per_byte,
            ),
            (None, Some(why)) => format!("\nServer peak RSS not measured: {why}\n"),
            (None, None) => String::new(),
        }
    }

    /// With `--busy-poll`: the latencies busy-polling beside the plain ones, MPICH's and the
    /// raw TCP ping-pong (empty without it).
    fn busy_poll_table(&self) -> String {
        let Some(polled) = &self.busy_poll else {
            return String::new();
        };
        let server = match polled.server {
            "process" => "an onesided-server process of its own, one thread",
            _ => "in this process (no onesided-server binary found)",
        };
        let mut out = format!(
            "\nBusy-polling {} µs (server and sessions) beside the same patterns without, audit \
             off, the server {server}:\n\n\
             | metric | plain | busy-poll | busy-poll / plain | MPICH | busy-poll / MPICH | busy-poll / raw TCP ping-pong |\n\
             |---|---|---|---|---|---|---|\n",
            polled.budget.as_micros()
        );
        for ((key, value), (_, plain)) in polled.latencies.iter().zip(&polled.plain) {
            let mpich = self.mpich.as_ref().and_then(|m| m.latency(key));
            out.push_str(&format!(
                "| `{key}` | {plain:.1} µs | {value:.1} µs | {} | {} | {} | {} |\n",
                ratio(*value, Some(*plain)),
                mpich.map_or_else(|| "—".to_string(), |m| format!("{m:.1} µs")),
                ratio(*value, mpich),
                ratio(*value, Some(self.raw_tcp_pingpong_us)),
            ));
        }
        out
    }

    /// The `sync` runs beside the `off` one: per metric, each run's figure, its ratio to `off`,
    /// and for latencies issue 12's target and whether it is met. Empty without a `sync` run.
    fn sync_table(&self) -> String {
        let runs: Vec<(Store, &Patterns)> = [
            (Store::Sqlite, self.sync_sqlite.as_ref()),
            (Store::Postgres, self.sync_postgres.as_ref()),
        ]
        .into_iter()
        .filter_map(|(store, run)| Some((store, run?)))
        .collect();
        if runs.is_empty() {
            return String::new();
        }
        let mut out = self.sync_targets(&runs);
        out.push_str(&self.sync_rows(&runs));
        out.push_str(&self.sync_floors(&runs));
        out.push('\n');
        out
    }

    /// The paragraph above the `sync` table: each run's target, the `off` latencies
    /// PostgreSQL's targets take, and the hot counter's stretch target.
    fn sync_targets(&self, runs: &[(Store, &Patterns)]) -> String {
        let mut out = String::from(
            "\nThe same patterns with the audit in sync mode (every answer after its commit), \
             in the same run; sync SQLite is the server's default configuration. Target (issue \
             12, reported, not asserted): off + ",
        );
        let references: Vec<String> = runs
            .iter()
            .map(|(store, _)| {
                let reference = self
                    .store_reference_us(*store)
                    .map_or_else(|| "not measured".to_string(), |us| format!("{us:.1} µs"));
                format!(
                    "{SYNC_TARGET_REFERENCES} × `{}` ({reference}) for {}",
                    store.names().reference,
                    store.names().label
                )
            })
            .collect();
        out.push_str(&references.join(", "));
        if let (Some(latencies), true) = (&self.off_without_spinners, self.sync_postgres.is_some())
        {
            let figures: Vec<String> = latencies
                .iter()
                .map(|(key, us)| format!("`{key}` {us:.1} µs"))
                .collect();
            out.push_str(&format!(
                ". sync PostgreSQL runs with the spinners stopped, as its references do, so its \
                 latency targets take `off` measured without them too ({})",
                figures.join(", ")
            ));
        }
        out.push_str(&match &self.redis_durable {
            Some(redis) => format!(
                ". Stretch for the hot counter: at least Redis INCR with `appendfsync always` and \
                 50 clients ({:.0}/s, `redis_durable_incr_50_clients_per_s`)",
                redis.incr_50_clients_per_s
            ),
            None => {
                ". Durable Redis not measured, so no stretch target for the hot counter".to_string()
            }
        });
        out.push_str(".\n\n");
        out
    }

    /// The `sync` table: per metric, the `off` figure, then per run its figure, its ratio to
    /// `off`, its target and whether it is met.
    fn sync_rows(&self, runs: &[(Store, &Patterns)]) -> String {
        let mut out = String::from("| metric | audit off |");
        let mut rule = String::from("|---|---|");
        for (store, _) in runs {
            out.push_str(&format!(
                " {} | sync / off | target | met |",
                store.names().label
            ));
            rule.push_str("---|---|---|---|");
        }
        out.push('\n');
        out.push_str(&rule);
        out.push('\n');
        let run_rows: Vec<(Store, Vec<Row>, Vec<Row>)> = runs
            .iter()
            .map(|(store, run)| (*store, run.rows(), self.off_for_targets(*store).0.rows()))
            .collect();
        for (index, (name, off, unit)) in self.patterns.rows().into_iter().enumerate() {
            out.push_str(&format!("| {name} | {off:.1} {unit} |"));
            for (store, rows, targets_off) in &run_rows {
                let synced = rows[index].1;
                let target = match (unit, self.store_reference_us(*store)) {
                    ("µs", Some(reference)) => {
                        Some(latency_target(targets_off[index].1, reference))
                    }
                    _ => None,
                };
                let durable = self.redis_durable_50_clients().as_f64();
                let (target, met) = match (target, durable) {
                    (Some(target), _) => (
                        format!("{target:.1} µs"),
                        if synced <= target { "yes" } else { "no" },
                    ),
                    // issue 12's stretch: the hot counter at least the durable Redis's INCR
                    (None, Some(rps)) if name == HOT_COUNTER_ROW => (
                        format!("stretch ≥ {rps:.0} ops/s (durable Redis INCR, 50 clients)"),
                        if synced >= rps { "yes" } else { "no" },
                    ),
                    (None, _) => ("—".to_string(), "—"),
                };
                out.push_str(&format!(
                    " {synced:.1} {unit} | {} | {target} | {met} |",
                    ratio(synced, Some(off))
                ));
            }
            out.push('\n');
        }
        out
    }

    /// Under the `sync` table: each run's lock-put-unlock and hot counter beside their floors.
    fn sync_floors(&self, runs: &[(Store, &Patterns)]) -> String {
        let mut out = String::new();
        for (store, run) in runs {
            let Some(floors) = self.floors(*store) else {
                continue;
            };
            let synced = run.latency("lock_put_unlock_us");
            out.push_str(&format!(
                "\nFloor of a {} lock-put-unlock (the round trip and its epoch's commit, \
                 nothing else of onesided's): `{}` {:.1} µs; {synced:.1} µs is {} of it.",
                store.names().label,
                store.names().floor,
                floors.echo_us,
                ratio(synced, Some(floors.echo_us))
            ));
            out.push_str(&format!(
                "\nFloor of a {} hot counter (64 streams, each answered after its \
                 operation's rows are committed, in groups): `{}` {:.0}/s, {} of the \
                 `off` hot counter; {:.0} ops/s is {} of it.",
                store.names().label,
                store.names().hot_counter_floor,
                floors.streams_per_s,
                ratio(
                    floors.streams_per_s,
                    Some(self.patterns.hot_counter_ops_per_s)
                ),
                run.hot_counter_ops_per_s,
                ratio(run.hot_counter_ops_per_s, Some(floors.streams_per_s))
            ));
        }
        out
    }
}

/// `met` or `not met`.
fn met(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "not met"
    }
}

/// `value / reference` as `1.23×`, or `—` without a positive reference.
pub(crate) fn ratio(value: f64, reference: Option<f64>) -> String {
    match reference {
        Some(reference) if reference > 0.0 => format!("{:.2}×", value / reference),
        _ => "—".to_string(),
    }
}
