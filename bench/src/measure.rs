//! The patterns: each in a fresh world, one session per rank, timed at rank 0.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use futures::future::try_join_all;
use futures::{stream, StreamExt, TryStreamExt};
use onesided_client::{Admin, Endpoint, LockType, Op, Session, Window, WindowSpec};

use crate::{Options, PATTERN_TIMEOUT};

/// Sessions a pattern attaches (and windows it opens) at once.
const ATTACHING: usize = 64;

/// The piece size of the bulk fallback when one big put fails.
pub const BULK_CHUNK: usize = 1 << 20;

/// The bytes of a bulk put of `bytes` (and of PostgreSQL's bulk INSERT reference): not all
/// alike, so that nothing on the way can shortcut runs of one value.
pub(crate) fn bulk_payload(bytes: usize) -> Vec<u8> {
    (0..bytes).map(|i| (i % 251) as u8).collect()
}

/// Operations of each of the hot counter's 64 ranks (and round trips of each of the gRPC
/// echo's 64 streams).
pub(crate) fn hot_counter_per_rank(iterations: usize, quick: bool) -> usize {
    if quick {
        5
    } else {
        (iterations / 4).max(10)
    }
}

/// Timed bulk puts (and bulk INSERTs of the PostgreSQL reference) of a run: their median is
/// the figure.
pub(crate) fn bulk_repeats(quick: bool) -> usize {
    if quick {
        2
    } else {
        5
    }
}

/// The unmeasured warm-up before `iterations` measured ones: 10 %, at least one.
pub fn warm_up(iterations: usize) -> usize {
    (iterations / 10).max(1)
}

/// The atomics' pattern (`fop_flush_us`, `cas_flush_us`), its `i`-th round trip: under a
/// `lock_all` held by `w`'s rank, `fetch_and_op` (sum 1) or `compare_and_swap` (`i` for
/// `i + 1`) on rank 1's element 0, `flush(1)`, and the old value read.
///
/// # Errors
/// A call refused or the session lost.
pub async fn atomic_round_trip(w: &Window, i: usize, cas: bool) -> anyhow::Result<()> {
    if cas {
        let old = w.compare_and_swap(1, 0, i as i64, i as i64 + 1)?;
        w.flush(1).await?;
        old.value().await?;
    } else {
        let old = w.fetch_and_op(1, 0, 1i64, Op::Sum)?;
        w.flush(1).await?;
        old.value().await?;
    }
    Ok(())
}

/// The median of `samples` in microseconds (0 for none).
pub fn median(samples: &[Duration]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let middle = sorted.len() / 2;
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    if sorted.len().is_multiple_of(2) {
        (micros(sorted[middle - 1]) + micros(sorted[middle])) / 2.0
    } else {
        micros(sorted[middle])
    }
}

/// Times `total` runs of `step` and returns the samples after the warm-up.
async fn sample<F, Fut>(iterations: usize, mut step: F) -> anyhow::Result<Vec<Duration>>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let skip = warm_up(iterations);
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations + skip {
        let started = Instant::now();
        step(i).await?;
        if i >= skip {
            samples.push(started.elapsed());
        }
    }
    Ok(samples)
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A world made for one pattern, deleted at its end ([`Bench::delete`]).
struct World {
    name: String,
    /// Shared between a pattern's tasks.
    windows: Vec<Arc<Window>>,
    // keeps the sessions open as long as the windows
    _sessions: Vec<Session>,
}

/// Connected to the server, ready to run patterns.
#[derive(Debug)]
pub struct Bench {
    url: String,
    admin: Admin,
    iterations: usize,
    quick: bool,
    /// Whether the server keeps an audit log.
    pub audited: bool,
    /// Sessions busy-poll this long after each message (`--busy-poll`).
    busy_poll: Option<Duration>,
}

impl Bench {
    /// Connects the admin side.
    ///
    /// # Errors
    /// When the server does not answer or refuses the token.
    pub async fn connect(url: &str, token: &str, options: &Options) -> anyhow::Result<Self> {
        let admin = Admin::connect(url, token)
            .await
            .with_context(|| format!("cannot connect to {url}"))?;
        admin.list_worlds().await.context("the admin token")?;
        let mut bench = Bench {
            url: url.to_string(),
            admin,
            iterations: options.iterations.max(1),
            quick: options.quick,
            audited: false,
            busy_poll: None,
        };
        let probe = bench.world(1, WindowSpec::of::<i64>("probe", 1, 1)).await?;
        bench.audited = probe.windows[0].session().audited();
        bench.delete(probe).await?;
        Ok(bench)
    }

    /// The same, with every session of the patterns busy-polling for `budget` after each
    /// message ([`onesided_client::busy_poll`]).
    pub fn busy_polling(mut self, budget: Duration) -> Self {
        self.busy_poll = Some(budget);
        self
    }

    /// A fresh world of `nranks` ranks, attached, with the window `spec` open on every rank.
    async fn world(&self, nranks: u32, spec: WindowSpec) -> anyhow::Result<World> {
        let name = format!(
            "bench-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let created = self.admin.create_world(&name, nranks).await?;
        self.admin.create_window(&name, &spec).await?;
        // at most ATTACHING connections at once: a thousand simultaneous connects overflow a
        // listen backlog (the kernel's default 128 for a std listener) and some fail
        let sessions: Vec<Session> = stream::iter(created.tokens.iter().map(|token| {
            let endpoint = Endpoint::new(self.url.as_str());
            let endpoint = match self.busy_poll {
                Some(budget) => endpoint.busy_poll(budget),
                None => endpoint,
            };
            Session::attach(endpoint, token)
        }))
        .buffered(ATTACHING)
        .try_collect()
        .await?;
        let windows = stream::iter(sessions.iter().map(|s| s.window(&spec.name)))
            .buffered(ATTACHING)
            .map_ok(Arc::new)
            .try_collect()
            .await?;
        Ok(World {
            name,
            windows,
            _sessions: sessions,
        })
    }

    async fn delete(&self, world: World) -> anyhow::Result<()> {
        let name = world.name.clone();
        drop(world);
        self.admin.delete_world(&name).await?;
        Ok(())
    }

    /// One of [`crate::LATENCY_KEYS`]: its median in µs.
    ///
    /// # Errors
    /// A failed RMA call.
    pub async fn latency(&self, key: &str) -> anyhow::Result<f64> {
        let world = self.world(2, WindowSpec::of::<i64>("w", 2, 1)).await?;
        let n = self.iterations;
        let w0 = world.windows[0].clone();
        let samples = match key {
            "lock_put_unlock_us" => {
                sample(n, |i| {
                    let w = &w0;
                    async move {
                        w.lock(LockType::Exclusive, 1, 0).await?;
                        w.put(1, 0, &[i as i64])?;
                        w.unlock(1).await?;
                        Ok(())
                    }
                })
                .await?
            }
            "lock_acc_unlock_us" => {
                sample(n, |_| {
                    let w = &w0;
                    async move {
                        w.lock(LockType::Shared, 1, 0).await?;
                        w.accumulate(1, 0, &[1i64], Op::Sum)?;
                        w.unlock(1).await?;
                        Ok(())
                    }
                })
                .await?
            }
            "lock_get_unlock_us" => {
                sample(n, |_| {
                    let w = &w0;
                    async move {
                        w.lock(LockType::Shared, 1, 0).await?;
                        let got = w.get::<i64>(1, 0, 1)?;
                        w.unlock(1).await?;
                        got.value().await?;
                        Ok(())
                    }
                })
                .await?
            }
            "fop_flush_us" | "cas_flush_us" => {
                let cas = key == "cas_flush_us";
                w0.lock_all(0).await?;
                let samples = sample(n, |i| atomic_round_trip(&w0, i, cas)).await?;
                w0.unlock_all().await?;
                samples
            }
            "fence_put_us" => fence_epochs(&world.windows, n).await?,
            "pscw_put_us" => {
                let w1 = world.windows[1].clone();
                let total = n + warm_up(n);
                let target = tokio::spawn(async move {
                    for _ in 0..total {
                        w1.post(&[0], 0)?;
                        w1.wait().await?;
                    }
                    anyhow::Ok(())
                });
                let samples = sample(n, |i| {
                    let w = &w0;
                    async move {
                        w.start(&[1], 0)?;
                        w.put(1, 0, &[i as i64])?;
                        w.complete().await?;
                        Ok(())
                    }
                })
                .await?;
                target.await??;
                samples
            }
            other => bail!("no pattern {other}"),
        };
        drop(w0);
        self.delete(world).await?;
        Ok(median(&samples))
    }

    /// 64 ranks, each accumulating 1 into rank 0's element 0 under lock_all with a flush after
    /// every op: total ops/s over a fixed count per rank. Checks the final sum.
    ///
    /// # Errors
    /// A failed RMA call, or a final sum that is not the number of ops.
    pub async fn hot_counter(&self) -> anyhow::Result<f64> {
        const RANKS: u32 = 64;
        let per_rank = hot_counter_per_rank(self.iterations, self.quick);
        let world = self
            .world(RANKS, WindowSpec::of::<i64>("counter", RANKS, 1))
            .await?;
        let start = Arc::new(tokio::sync::Barrier::new(RANKS as usize + 1));
        let mut tasks = Vec::new();
        for window in &world.windows {
            let window = window.clone();
            let start = Arc::clone(&start);
            tasks.push(tokio::spawn(async move {
                window.lock_all(0).await?;
                // one op each before the clock starts: every lazy lock is in place
                window.accumulate(0, 0, &[1i64], Op::Sum)?;
                window.flush(0).await?;
                start.wait().await;
                for _ in 0..per_rank {
                    window.accumulate(0, 0, &[1i64], Op::Sum)?;
                    window.flush(0).await?;
                }
                window.unlock_all().await?;
                anyhow::Ok(Instant::now())
            }));
        }
        start.wait().await;
        let started = Instant::now();
        let finished = tokio::time::timeout(PATTERN_TIMEOUT, try_join_all(tasks))
            .await
            .context("the hot counter did not finish in time")??;
        let mut last = started;
        for done in finished {
            last = last.max(done?);
        }
        let elapsed = last.duration_since(started).as_secs_f64();
        let w0 = &world.windows[0];
        w0.lock(LockType::Shared, 0, 0).await?;
        let sum = w0.get::<i64>(0, 0, 1)?;
        w0.unlock(0).await?;
        let sum = sum.value().await?[0];
        let expected = i64::from(RANKS) * (per_rank as i64 + 1);
        if sum != expected {
            bail!("the hot counter reads {sum}, not {expected}");
        }
        self.delete(world).await?;
        Ok((i64::from(RANKS) * per_rank as i64) as f64 / elapsed)
    }

    /// One put of `bytes` inside lock(X)/unlock from rank 0 to rank 1: MiB/s of the median,
    /// and `None` — or, when the single put fails (the session ends), the same bytes as puts of
    /// [`BULK_CHUNK`] inside one lock/unlock, and the single put's failure.
    ///
    /// # Errors
    /// A failed RMA call in the chunked fallback.
    pub async fn bulk_put(&self, bytes: usize) -> anyhow::Result<(f64, Option<String>)> {
        self.bulk(bytes, false).await
    }

    /// [`Bench::bulk_put`] with `put_bytes`: the same bytes in a buffer the caller shares
    /// (`Bytes`), which the client sends in slices instead of copying each piece out of
    /// borrowed values.
    ///
    /// # Errors
    /// As [`Bench::bulk_put`].
    pub async fn bulk_put_shared(&self, bytes: usize) -> anyhow::Result<(f64, Option<String>)> {
        self.bulk(bytes, true).await
    }

    async fn bulk(&self, bytes: usize, shared: bool) -> anyhow::Result<(f64, Option<String>)> {
        let data = Bytes::from(bulk_payload(bytes));
        match self.bulk_put_in(&data, bytes, shared).await {
            Ok(rate) => Ok((rate, None)),
            Err(single) => {
                let rate = self.bulk_put_in(&data, BULK_CHUNK, shared).await?;
                Ok((rate, Some(format!("{single:#}"))))
            }
        }
    }

    async fn bulk_put_in(&self, data: &Bytes, chunk: usize, shared: bool) -> anyhow::Result<f64> {
        let world = self
            .world(2, WindowSpec::bytes("bulk", 2, data.len() as u64, 1))
            .await?;
        let repeats = bulk_repeats(self.quick);
        let w0 = world.windows[0].clone();
        let samples = sample(repeats, |_| {
            let w = &w0;
            async move {
                w.lock(LockType::Exclusive, 1, 0).await?;
                for start in (0..data.len()).step_by(chunk) {
                    let end = (start + chunk).min(data.len());
                    if shared {
                        w.put_bytes(1, start as u64, data.slice(start..end))?;
                    } else {
                        w.put(1, start as u64, &data[start..end])?;
                    }
                }
                w.unlock(1).await?;
                Ok(())
            }
        })
        .await;
        drop(w0);
        // the world goes either way; a failed put may have ended the session
        let deleted = self.delete(world).await;
        let samples = samples?;
        deleted?;
        let seconds = median(&samples) / 1e6;
        Ok(data.len() as f64 / f64::from(1u32 << 20) / seconds)
    }

    /// Fence epochs on `ranks` ranks, each putting once to the next: median µs per epoch at
    /// rank 0. Fewer epochs at larger sizes, so the run stays short.
    ///
    /// # Errors
    /// A failed RMA call.
    pub async fn fence_scaling(&self, ranks: u32) -> anyhow::Result<f64> {
        let epochs = scaling_epochs(self.iterations, self.quick, ranks);
        let world = self
            .world(ranks, WindowSpec::of::<i64>("fence", ranks, 1))
            .await?;
        let samples = fence_epochs(&world.windows, epochs).await?;
        self.delete(world).await?;
        Ok(median(&samples))
    }
}

/// The fence epochs [`Bench::fence_scaling`] measures at `ranks`: 2 · iterations / ranks, at
/// least 20 (5 when quick); the barrier echo under it ([`crate::grpc::barrier_us`]) runs as many.
pub fn scaling_epochs(iterations: usize, quick: bool, ranks: u32) -> usize {
    if quick {
        5
    } else {
        (iterations * 2 / ranks as usize).max(20)
    }
}

/// Every rank: an opening fence, then epochs of one put to the next rank and a fence. Returns
/// rank 0's per-epoch times after the warm-up.
async fn fence_epochs(windows: &[Arc<Window>], epochs: usize) -> anyhow::Result<Vec<Duration>> {
    let nranks = windows.len() as u32;
    let mut tasks = Vec::new();
    for (rank, window) in windows.iter().enumerate() {
        let window = window.clone();
        let rank = rank as u32;
        tasks.push(tokio::spawn(async move {
            window.fence(0).await?;
            sample(epochs, |i| {
                let w = &window;
                async move {
                    w.put((rank + 1) % nranks, 0, &[i as i64])?;
                    w.fence(0).await?;
                    Ok(())
                }
            })
            .await
        }));
    }
    let mut all = tokio::time::timeout(PATTERN_TIMEOUT, try_join_all(tasks))
        .await
        .context("the fence epochs did not finish in time")??;
    all.swap_remove(0)
}
