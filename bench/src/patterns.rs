//! The patterns of issue 6 against one server: what it gave for each (`Patterns`), and the
//! latency patterns with the server and every session busy-polling beside the same without
//! (`BusyPolled`).
//!
//! Owns: the patterns' keys and table order (`LATENCY_KEYS`), the order they are measured in
//! against one server, how long a many-rank pattern may take (`PATTERN_TIMEOUT`), and a run's
//! figures by key (`Patterns::to_json`) and as table rows (`Patterns::rows`). Must not: time a
//! pattern itself (`measure` does), measure a reference, or compare figures with targets or
//! references (`report` does).

use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Map, Value};

use crate::{measure, rss, Audit, InProcess, Options};

/// The latency patterns, in table order, with what each times.
pub const LATENCY_KEYS: [(&str, &str); 7] = [
    ("lock_put_unlock_us", "lock(X) + put 8 B + unlock"),
    ("fence_put_us", "fence epoch, 2 ranks, 1 put each"),
    (
        "lock_acc_unlock_us",
        "lock(S) + accumulate sum i64 + unlock",
    ),
    ("lock_get_unlock_us", "lock(S) + get 8 B + unlock"),
    ("fop_flush_us", "fetch_and_op + flush (lock_all)"),
    ("cas_flush_us", "compare_and_swap + flush (lock_all)"),
    ("pscw_put_us", "PSCW epoch with 1 put"),
];

/// How long a many-rank pattern (hot counter, fence epochs) may take before it is reported
/// as stuck.
pub(crate) const PATTERN_TIMEOUT: Duration = Duration::from_secs(300);

/// One figure of a table: the metric's name, its value, its unit.
pub(crate) type Row = (String, f64, &'static str);

/// The hot counter's name in [`Patterns::rows`].
pub(crate) const HOT_COUNTER_ROW: &str = "`hot_counter_ops_per_s`";

/// What one server gave for every pattern.
#[derive(Clone, Debug, PartialEq)]
pub struct Patterns {
    /// Median latencies in µs, keyed as [`LATENCY_KEYS`].
    pub latencies: Vec<(&'static str, f64)>,
    /// 64 ranks accumulating into rank 0's element 0, a flush after every op: total ops/s.
    pub hot_counter_ops_per_s: f64,
    /// One put of the bulk size inside lock/unlock: MiB/s.
    pub bulk_put_mib_per_s: f64,
    /// When one put of the bulk size failed: why.
    pub bulk_single_put_failed: Option<String>,
    /// The same bulk put from a buffer the caller shares (`put_bytes`): MiB/s.
    pub bulk_put_shared_mib_per_s: f64,
    /// Fence epochs with one put per rank: (ranks, median µs per epoch).
    pub fence_scaling_us: Vec<(u32, f64)>,
}

impl Patterns {
    /// The median latency of the pattern `key` (one of [`LATENCY_KEYS`]), or NaN.
    pub(crate) fn latency(&self, key: &str) -> f64 {
        self.latencies
            .iter()
            .find(|(other, _)| *other == key)
            .map_or(f64::NAN, |(_, us)| *us)
    }

    /// Every pattern against a server started in this process with `audit` into `database`.
    pub(crate) async fn in_process(
        options: &Options,
        audit: Audit,
        database: Option<String>,
    ) -> anyhow::Result<Self> {
        let server = InProcess::start(audit, database, options.server_threads)
            .await
            .context("cannot start the in-process server")?;
        let bench = measure::Bench::connect(&server.url, &server.admin_token, options).await?;
        Patterns::measure(&bench, options).await
    }

    pub(crate) async fn measure(bench: &measure::Bench, options: &Options) -> anyhow::Result<Self> {
        let latencies = latencies(bench).await?;
        let hot_counter_ops_per_s = bench.hot_counter().await.context("hot counter")?;
        let (bulk_put_mib_per_s, bulk_single_put_failed) = bench
            .bulk_put(options.bulk_bytes())
            .await
            .context("bulk put")?;
        let (bulk_put_shared_mib_per_s, _) = bench
            .bulk_put_shared(options.bulk_bytes())
            .await
            .context("bulk put from a shared buffer")?;
        let mut fence_scaling_us = Vec::new();
        for &ranks in options.scaling_ranks() {
            let value = bench
                .fence_scaling(ranks)
                .await
                .with_context(|| format!("fence scaling at {ranks} ranks"))?;
            fence_scaling_us.push((ranks, value));
        }
        Ok(Patterns {
            latencies,
            hot_counter_ops_per_s,
            bulk_put_mib_per_s,
            bulk_single_put_failed,
            bulk_put_shared_mib_per_s,
            fence_scaling_us,
        })
    }

    /// The figures by key, as in the report's JSON.
    pub(crate) fn to_json(&self) -> Map<String, Value> {
        let mut object = Map::new();
        for (key, value) in &self.latencies {
            object.insert((*key).into(), json!(value));
        }
        object.insert(
            "hot_counter_ops_per_s".into(),
            json!(self.hot_counter_ops_per_s),
        );
        object.insert("bulk_put_mib_per_s".into(), json!(self.bulk_put_mib_per_s));
        object.insert(
            "bulk_put_shared_mib_per_s".into(),
            json!(self.bulk_put_shared_mib_per_s),
        );
        let scaling: Map<String, Value> = self
            .fence_scaling_us
            .iter()
            .map(|(ranks, value)| (ranks.to_string(), json!(value)))
            .collect();
        object.insert("fence_scaling_us".into(), Value::Object(scaling));
        object
    }

    /// Every figure with its key (fence scaling as `fence_scaling_us N ranks`) and unit.
    pub(crate) fn rows(&self) -> Vec<Row> {
        let mut rows: Vec<Row> = self
            .latencies
            .iter()
            .map(|(key, value)| (format!("`{key}`"), *value, "µs"))
            .collect();
        rows.push((HOT_COUNTER_ROW.into(), self.hot_counter_ops_per_s, "ops/s"));
        rows.push((
            "`bulk_put_mib_per_s`".into(),
            self.bulk_put_mib_per_s,
            "MiB/s",
        ));
        rows.push((
            "`bulk_put_shared_mib_per_s`".into(),
            self.bulk_put_shared_mib_per_s,
            "MiB/s",
        ));
        for (ranks, value) in &self.fence_scaling_us {
            rows.push((format!("`fence_scaling_us` {ranks} ranks"), *value, "µs"));
        }
        rows
    }
}

/// Every pattern of [`LATENCY_KEYS`] against `bench`: its median in µs.
async fn latencies(bench: &measure::Bench) -> anyhow::Result<Vec<(&'static str, f64)>> {
    let mut latencies = Vec::new();
    for (key, _) in LATENCY_KEYS {
        let value = bench
            .latency(key)
            .await
            .with_context(|| format!("while measuring {key}"))?;
        latencies.push((key, value));
    }
    Ok(latencies)
}

/// The latency patterns with the server and every session busy-polling, beside the same
/// patterns without, both against an `onesided-server` process of its own when one is built
/// (the bench's clients then have the machine's other core), else in-process.
#[derive(Clone, Debug, PartialEq)]
pub struct BusyPolled {
    /// How long each spins after a message.
    pub budget: std::time::Duration,
    /// `"process"` or `"in-process"`: where the two servers ran.
    pub server: &'static str,
    /// Median latencies in µs without busy-polling, keyed as [`LATENCY_KEYS`].
    pub plain: Vec<(&'static str, f64)>,
    /// Median latencies in µs busy-polling, keyed as [`LATENCY_KEYS`].
    pub latencies: Vec<(&'static str, f64)>,
}

impl BusyPolled {
    pub(crate) async fn measure(
        options: &Options,
        budget: std::time::Duration,
    ) -> anyhow::Result<Self> {
        let Ok(binary) = rss::server_binary() else {
            // no server binary: both in this process, which shares its cores with the clients
            let plain = Self::in_process(options, None).await?;
            let latencies = Self::in_process(options, Some(budget)).await?;
            return Ok(BusyPolled {
                budget,
                server: "in-process",
                plain,
                latencies,
            });
        };
        let micros = budget.as_micros().to_string();
        // one thread, as the in-process server: no hand-off between threads
        let common = ["--audit-durability", "off", "--worker-threads", "1"];
        let (server, _) = rss::ServerProcess::start(&binary, &common).await?;
        let plain = Self::latencies(options, &server.url, &server.admin_token, None).await?;
        drop(server);
        let mut args = common.to_vec();
        args.extend(["--busy-poll", micros.as_str()]);
        let (server, _) = rss::ServerProcess::start(&binary, &args).await?;
        let latencies =
            Self::latencies(options, &server.url, &server.admin_token, Some(budget)).await?;
        Ok(BusyPolled {
            budget,
            server: "process",
            plain,
            latencies,
        })
    }

    pub(crate) async fn in_process(
        options: &Options,
        budget: Option<std::time::Duration>,
    ) -> anyhow::Result<Vec<(&'static str, f64)>> {
        let server = InProcess::start_polling(Audit::Off, None, options.server_threads, budget)
            .await
            .context("cannot start the in-process server")?;
        Self::latencies(options, &server.url, &server.admin_token, budget).await
    }

    async fn latencies(
        options: &Options,
        url: &str,
        token: &str,
        budget: Option<std::time::Duration>,
    ) -> anyhow::Result<Vec<(&'static str, f64)>> {
        let bench = measure::Bench::connect(url, token, options).await?;
        let bench = match budget {
            Some(budget) => bench.busy_polling(budget),
            None => bench,
        };
        latencies(&bench).await
    }
}
