//! The floor under every call: a bare tonic service (`bench/proto/echo.proto`) with nothing of
//! onesided behind it, measured in the same run as the patterns. Its server runs as the
//! in-process onesided server does (its own thread, a runtime of the same kind, `127.0.0.1:0`,
//! `TCP_NODELAY`); its clients run on the bench's runtime, one channel per stream as each
//! onesided session has. What it measures is what tonic, HTTP/2 and the kernel cost for the
//! same shapes of traffic, so an `off` figure can be set beside what no work of ours is in:
//!
//! - [`echo_us`]: one stream, 8 bytes each way per round trip (the shape of one onesided call
//!   and its answer), median µs: a floor for every latency pattern, each of which needs at
//!   least one such round trip;
//! - [`streams_per_s`]: 64 streams, each doing round trips one after another, all at once (the
//!   hot counter's 64 ranks, each with one call in flight), round trips per second: plain
//!   tonic streams of that shape, not a floor (a session writes the answers that come together
//!   in one write, which this echo does not);
//! - [`bulk_mib_per_s`]: one stream carrying 1 MiB messages, each acknowledged by an empty one
//!   (a bulk put's pieces), MiB/s from the first message to the last acknowledgement: what the
//!   transport carries when nothing copies or allocates per piece on the sending side.
//!
//! - [`barrier_us`]: N streams, each message answered only once every stream's message of the
//!   same round has arrived (a barrier), µs per round: the unavoidable part of a fence at N
//!   ranks (N messages in, N answers out, O(N) at the server), with nothing of onesided's.
//!
//! And the floor under a `sync` answer, [`commit_echo_us`]: the same echo, every answer sent
//! only after the rows onesided's audit records for one lock-put-unlock epoch are committed
//! through the audit store's own code.

use std::collections::BTreeMap;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status, Streaming};

use onesided_core::audit::{chain_hash, AuditRecord, Body, Event, RecordedOp, GENESIS};
use onesided_server::audit::store::{AuditStore, Committer, NewRow};

use crate::measure::{median, warm_up};
use crate::server::unique;
use crate::storage::Scratch;
use crate::Threads;

/// Generated code of `bench/proto/echo.proto`.
#[allow(
    clippy::all,
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms
)]
mod pb {
    tonic::include_proto!("onesided.bench.echo");
}

use pb::echo_client::EchoClient;
use pb::echo_server::{Echo, EchoServer};
use pb::Blob;

/// Messages up to this size are echoed; larger ones are acknowledged with an empty one.
const ECHOED: usize = 64;

/// The size of one bulk message: a bulk put's piece.
pub const PIECE: usize = 1 << 20;

/// The streams of [`streams_per_s`]: the hot counter's ranks.
pub const STREAMS: usize = 64;

/// The echo; with a log, every message is echoed whole, each only after one more epoch's rows
/// are committed ([`commit_echo_us`], whose messages are all small).
struct EchoService {
    log: Option<Arc<EpochLog>>,
    /// A barrier echo's ([`barrier_us`]): every message waits here for the other streams'.
    barrier: Option<Arc<tokio::sync::Barrier>>,
    /// The origin rank of the next stream opened: each stream is one rank of the log.
    streams: Arc<std::sync::atomic::AtomicU32>,
}

#[tonic::async_trait]
impl Echo for EchoService {
    type EchoStream = Pin<Box<dyn Stream<Item = Result<Blob, Status>> + Send>>;

    async fn echo(
        &self,
        request: Request<Streaming<Blob>>,
    ) -> Result<Response<Self::EchoStream>, Status> {
        if let Some(barrier) = self.barrier.clone() {
            let answers = request.into_inner().then(move |message| {
                let barrier = Arc::clone(&barrier);
                async move {
                    let blob = message?;
                    barrier.wait().await;
                    Ok(blob)
                }
            });
            return Ok(Response::new(Box::pin(answers)));
        }
        let Some(log) = self.log.clone() else {
            let answers = request.into_inner().map(|message| {
                message.map(|blob| {
                    if blob.data.len() <= ECHOED {
                        blob
                    } else {
                        Blob::default()
                    }
                })
            });
            return Ok(Response::new(Box::pin(answers)));
        };
        let origin = 1 + self
            .streams
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            % STREAMS as u32;
        let answers = request.into_inner().then(move |message| {
            let log = Arc::clone(&log);
            async move {
                let blob = message?;
                log.commit(origin)
                    .await
                    .map_err(|error| Status::unavailable(format!("{error:#}")))?;
                Ok(blob)
            }
        });
        Ok(Response::new(Box::pin(answers)))
    }
}

/// A bare echo server on its own thread and runtime; told to stop on drop (not waited for:
/// its graceful stop waits for the clients' connections, whose tasks may need the dropping
/// thread's runtime).
#[derive(Debug)]
pub struct EchoServerHandle {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    /// A committing echo's: the log's last commit (the window freed), once the server stopped.
    closed: Option<oneshot::Receiver<anyhow::Result<()>>>,
}

impl EchoServerHandle {
    /// Starts it with a runtime of `threads`.
    ///
    /// # Errors
    /// When the port cannot be bound or the runtime cannot be built.
    pub fn start(threads: Threads) -> anyhow::Result<Self> {
        Self::serve(threads, None, None)
    }

    /// Starts a barrier echo ([`barrier_us`]) for `streams` streams.
    ///
    /// # Errors
    /// As [`EchoServerHandle::start`].
    pub fn start_barrier(threads: Threads, streams: usize) -> anyhow::Result<Self> {
        Self::serve(threads, None, Some(streams))
    }

    /// Starts a committing echo ([`commit_echo_us`]) whose log goes into `store`, opened on
    /// the server's runtime as the onesided server opens its store; returns once it is open.
    ///
    /// # Errors
    /// As [`EchoServerHandle::start`], or when the store cannot be opened.
    pub async fn start_committing(
        threads: Threads,
        store: FloorStore,
        shape: Shape,
    ) -> anyhow::Result<Self> {
        let (opened, open) = oneshot::channel();
        let server = Self::serve(threads, Some((store, shape, opened)), None)?;
        open.await
            .context("the committing echo server stopped before its store was open")??;
        Ok(server)
    }

    /// Stops the server and waits until it stopped; a committing echo's log then records the
    /// window freed, and its failure is returned. Every client of it must be dropped first.
    ///
    /// # Errors
    /// The log's last commit failed, or the server did not stop within 10 s.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.closed.take() {
            Some(closed) => tokio::time::timeout(std::time::Duration::from_secs(10), closed)
                .await
                .context("the committing echo server did not stop within 10 s")?
                .context("the committing echo server's thread ended")?,
            None => Ok(()),
        }
    }

    fn serve(
        threads: Threads,
        store: Option<(FloorStore, Shape, oneshot::Sender<anyhow::Result<()>>)>,
        barrier: Option<usize>,
    ) -> anyhow::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let runtime = threads
            .runtime("echo-server")
            .context("cannot build the echo server's runtime")?;
        let (stop, stopped) = oneshot::channel::<()>();
        let (closing, closed) = oneshot::channel::<anyhow::Result<()>>();
        let committing = store.is_some();
        std::thread::Builder::new()
            .name("echo-server".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let log = match store {
                        None => None,
                        Some((store, shape, opened)) => match EpochLog::open(store, shape).await {
                            Ok(log) => {
                                let _ = opened.send(Ok(()));
                                Some(Arc::new(log))
                            }
                            Err(error) => {
                                let _ = opened.send(Err(error));
                                return;
                            }
                        },
                    };
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let incoming = TcpListenerStream::new(listener).map(|accepted| {
                        accepted.and_then(|stream| stream.set_nodelay(true).map(|()| stream))
                    });
                    let service = EchoServer::new(EchoService {
                        log: log.clone(),
                        barrier: barrier
                            .map(|streams| Arc::new(tokio::sync::Barrier::new(streams))),
                        streams: Arc::default(),
                    })
                    .max_decoding_message_size(usize::MAX)
                    .max_encoding_message_size(usize::MAX);
                    let served = Server::builder()
                        .add_service(service)
                        .serve_with_incoming_shutdown(incoming, async {
                            let _ = stopped.await;
                        })
                        .await;
                    if let Err(error) = served {
                        eprintln!("the echo server stopped: {error}");
                    }
                    if let Some(log) = log {
                        let _ = closing.send(log.close().await);
                    }
                });
            })
            .context("cannot start the echo server's thread")?;
        Ok(EchoServerHandle {
            url,
            stop: Some(stop),
            closed: committing.then_some(closed),
        })
    }
}

impl Drop for EchoServerHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// One open echo stream: what is sent goes into `to`, answers come out of `from`.
struct Pipe {
    to: mpsc::Sender<Blob>,
    from: Streaming<Blob>,
}

async fn channel(url: &str) -> anyhow::Result<Channel> {
    Endpoint::from_shared(url.to_string())?
        .tcp_nodelay(true)
        .connect()
        .await
        .context("cannot connect to the echo server")
}

async fn open(channel: Channel) -> anyhow::Result<Pipe> {
    let mut client = EchoClient::new(channel)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX);
    let (to, outgoing) = mpsc::channel(64);
    let from = client
        .echo(ReceiverStream::new(outgoing))
        .await
        .context("the echo call")?
        .into_inner();
    Ok(Pipe { to, from })
}

impl Pipe {
    async fn send(&self, data: Bytes) -> anyhow::Result<()> {
        self.to
            .send(Blob { data })
            .await
            .map_err(|_| anyhow::anyhow!("the echo stream closed"))
    }

    async fn answer(&mut self) -> anyhow::Result<Blob> {
        self.from
            .next()
            .await
            .context("the echo stream ended")?
            .context("the echo stream failed")
    }

    async fn round_trip(&mut self, value: u64) -> anyhow::Result<()> {
        let sent = Bytes::copy_from_slice(&value.to_le_bytes());
        self.send(sent.clone()).await?;
        let answer = self.answer().await?;
        anyhow::ensure!(answer.data == sent, "the echo answered other bytes");
        Ok(())
    }
}

/// One stream, one 8-byte message each way per round trip, `iterations` after an unmeasured
/// 10 %: median µs.
///
/// # Errors
/// A connection or stream error, or an answer that is not the message sent.
pub async fn echo_us(url: &str, iterations: usize) -> anyhow::Result<f64> {
    let mut stream = open(channel(url).await?).await?;
    let skip = warm_up(iterations);
    let mut samples = Vec::with_capacity(iterations + skip);
    for i in 0..iterations + skip {
        let began = Instant::now();
        stream.round_trip(i as u64).await?;
        samples.push(began.elapsed());
    }
    Ok(median(&samples[skip..]))
}

/// [`STREAMS`] streams on channels of their own, each doing `per_stream` round trips one after
/// another, all started together (after one unmeasured round trip each): round trips per
/// second, from the start to the last answer.
///
/// # Errors
/// As [`echo_us`].
pub async fn streams_per_s(url: &str, per_stream: usize) -> anyhow::Result<f64> {
    let mut streams = Vec::with_capacity(STREAMS);
    for _ in 0..STREAMS {
        let mut stream = open(channel(url).await?).await?;
        stream.round_trip(0).await?;
        streams.push(stream);
    }
    let start = Arc::new(tokio::sync::Barrier::new(STREAMS + 1));
    let mut tasks = Vec::with_capacity(STREAMS);
    for mut stream in streams {
        let start = Arc::clone(&start);
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            for i in 0..per_stream {
                stream.round_trip(i as u64).await?;
            }
            anyhow::Ok(Instant::now())
        }));
    }
    start.wait().await;
    let began = Instant::now();
    let mut last = began;
    for task in tasks {
        last = last.max(task.await??);
    }
    Ok((STREAMS * per_stream) as f64 / last.duration_since(began).as_secs_f64())
}

/// One stream carrying `bytes` as [`PIECE`]-sized messages (the caller's bytes are shared, not
/// copied, per message), each acknowledged; MiB/s from the first message to the last
/// acknowledgement, median of `repeats` after one unmeasured.
///
/// # Errors
/// As [`echo_us`], or an acknowledgement that is not empty.
pub async fn bulk_mib_per_s(url: &str, bytes: usize, repeats: usize) -> anyhow::Result<f64> {
    let mut stream = open(channel(url).await?).await?;
    let payload = Bytes::from(vec![0x5a; PIECE]);
    let pieces = bytes.div_ceil(PIECE).max(1);
    let mut samples = Vec::with_capacity(repeats);
    for round in 0..=repeats {
        let began = Instant::now();
        let to = stream.to.clone();
        let sent = payload.clone();
        let sender = tokio::spawn(async move {
            for _ in 0..pieces {
                if to.send(Blob { data: sent.clone() }).await.is_err() {
                    break;
                }
            }
        });
        for _ in 0..pieces {
            let answer = stream.answer().await?;
            anyhow::ensure!(
                answer.data.is_empty(),
                "a piece was echoed, not acknowledged"
            );
        }
        sender.await?;
        if round > 0 {
            samples.push(began.elapsed());
        }
    }
    let seconds = median(&samples) / 1e6;
    Ok((pieces * PIECE) as f64 / f64::from(1u32 << 20) / seconds)
}

/// `streams` streams on channels of their own against a barrier echo started for as many
/// ([`EchoServerHandle::start_barrier`]), each doing `rounds` round trips after an unmeasured
/// 10 % (and one round trip before those, as a fence epoch follows an opening fence): the
/// median µs of stream 0's round trips. Every round trip waits for all the streams' messages of
/// its round, so this is what a fence epoch at `streams` ranks costs with no work but the
/// transport's and a barrier's.
///
/// # Errors
/// As [`echo_us`].
pub async fn barrier_us(url: &str, streams: usize, rounds: usize) -> anyhow::Result<f64> {
    let mut pipes = Vec::with_capacity(streams);
    for _ in 0..streams {
        pipes.push(open(channel(url).await?).await?);
    }
    let skip = warm_up(rounds);
    let mut tasks = Vec::with_capacity(streams);
    for mut pipe in pipes {
        tasks.push(tokio::spawn(async move {
            pipe.round_trip(0).await?;
            let mut samples = Vec::with_capacity(rounds + skip);
            for i in 0..rounds + skip {
                let began = Instant::now();
                pipe.round_trip(i as u64).await?;
                samples.push(began.elapsed());
            }
            anyhow::Ok(samples)
        }));
    }
    let all = tokio::time::timeout(crate::PATTERN_TIMEOUT, futures::future::try_join_all(tasks))
        .await
        .context("the barrier echo's rounds did not finish in time")??;
    let mut first = all
        .into_iter()
        .next()
        .context("a barrier echo needs at least one stream")??;
    Ok(median(&first.split_off(skip)))
}

/// [`barrier_us`] at `streams` against a barrier echo of its own with a runtime of `threads`,
/// as many rounds as the fence scaling measures epochs at that size (2 · iterations / streams,
/// at least 20; 5 when quick): µs per round.
///
/// # Errors
/// As [`barrier_us`], or when the server cannot be started.
pub async fn barrier_floor(
    threads: Threads,
    streams: u32,
    iterations: usize,
    quick: bool,
) -> anyhow::Result<f64> {
    let server = EchoServerHandle::start_barrier(threads, streams as usize)?;
    let rounds = crate::measure::scaling_epochs(iterations, quick, streams);
    barrier_us(&server.url, streams as usize, rounds)
        .await
        .with_context(|| format!("the barrier echo at {streams} streams"))
}

/// The three figures of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Floor {
    /// [`echo_us`].
    pub echo_us: f64,
    /// [`streams_per_s`].
    pub streams_per_s: f64,
    /// [`bulk_mib_per_s`].
    pub bulk_mib_per_s: f64,
}

/// Measures the three against a fresh echo server with a runtime of `threads`.
///
/// # Errors
/// As the three.
pub async fn floor(
    threads: Threads,
    iterations: usize,
    per_stream: usize,
    bulk_bytes: usize,
    repeats: usize,
) -> anyhow::Result<Floor> {
    let server = EchoServerHandle::start(threads)?;
    let echo_us = echo_us(&server.url, iterations).await?;
    let streams_per_s = streams_per_s(&server.url, per_stream).await?;
    let bulk_mib_per_s = bulk_mib_per_s(&server.url, bulk_bytes, repeats).await?;
    Ok(Floor {
        echo_us,
        streams_per_s,
        bulk_mib_per_s,
    })
}

/// Where a committing echo ([`commit_echo_us`]) keeps its log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FloorStore {
    /// SQLite as the onesided server keeps it without a URL (`audit.db`, WAL,
    /// `synchronous=FULL`, the log primed), in a new directory beside the servers' data
    /// directories, removed afterwards.
    Sqlite,
    /// The PostgreSQL database at this URL, in a window of its own, created and freed there.
    Postgres(String),
}

/// What each answer of a committing echo waits for: the rows onesided's audit records for one
/// round trip of its stream's rank (the rank's incarnation 1; the target, rank 0, with
/// incarnation 0, as the server records what a target did).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One lock-put-unlock epoch, nine rows ([`commit_echo_us`]): the previous epoch's unlock
    /// returned, the lock issued and returned, the put issued, the unlock issued, and at the
    /// target the lock's request, grant and release and the put of 8 bytes.
    Epoch,
    /// One operation of the hot counter, five rows ([`commit_streams_per_s`]): the previous
    /// flush returned, the accumulate (sum, one `i64`) and the flush issued, and at the target
    /// the accumulate applied and the flush.
    Accumulate,
}

impl Shape {
    /// The events of round trip `n` (counted over the log) of rank `origin`.
    fn events(self, origin: u32, n: u64) -> Vec<(u32, u64, Event)> {
        let incarnation = 1;
        let target = Some(0);
        let runs = vec![(0, 8)];
        let at_origin = |event| (origin, incarnation, event);
        let at_target = |event| (0, 0, event);
        let call = |name: &str| name.to_string();
        match self {
            Shape::Epoch => vec![
                // the previous epoch's unlock returned: the client ships it with the next call
                at_origin(Event::Returned {
                    call: call("unlock"),
                    target,
                }),
                at_origin(Event::Issued {
                    call: call("lock"),
                    target,
                }),
                at_origin(Event::Returned {
                    call: call("lock"),
                    target,
                }),
                at_origin(Event::OpIssued {
                    op_id: n,
                    target: 0,
                    op: RecordedOp::Put,
                    datatype: "i64".into(),
                    runs: runs.clone(),
                }),
                at_origin(Event::Issued {
                    call: call("unlock"),
                    target,
                }),
                at_target(Event::LockRequest {
                    origin,
                    lock_type: "exclusive".into(),
                    nocheck: false,
                }),
                at_target(Event::LockGrant {
                    origin,
                    lock_type: "exclusive".into(),
                    token: n,
                }),
                at_target(Event::Op {
                    origin,
                    origin_incarnation: incarnation,
                    op_id: n,
                    epoch: 0,
                    token: n,
                    op: RecordedOp::Put,
                    datatype: "i64".into(),
                    disp: 0,
                    runs,
                    data: n.to_le_bytes().to_vec(),
                    compare: Vec::new(),
                    result: Vec::new(),
                }),
                at_target(Event::LockRelease { origin, token: n }),
            ],
            Shape::Accumulate => {
                let sum = RecordedOp::Accumulate("sum".into());
                vec![
                    at_origin(Event::Returned {
                        call: call("flush"),
                        target,
                    }),
                    at_origin(Event::OpIssued {
                        op_id: n,
                        target: 0,
                        op: sum.clone(),
                        datatype: "i64".into(),
                        runs: runs.clone(),
                    }),
                    at_origin(Event::Issued {
                        call: call("flush"),
                        target,
                    }),
                    at_target(Event::Op {
                        origin,
                        origin_incarnation: incarnation,
                        op_id: n,
                        epoch: 0,
                        token: u64::from(origin),
                        op: sum,
                        datatype: "i64".into(),
                        disp: 0,
                        runs,
                        data: 1_i64.to_le_bytes().to_vec(),
                        compare: Vec::new(),
                        result: Vec::new(),
                    }),
                    at_target(Event::Flush { origin }),
                ]
            }
        }
    }
}

/// What a `sync` answer commits before it leaves, as the onesided server writes it: one
/// window's chain (one rank per stream, and the target), every row encoded, hashed and
/// inserted by the audit store's code. Commits in groups, as the audit writer does: a round
/// trip that finds a commit under way has its rows taken by the next one, with those of every
/// other round trip that arrived meanwhile.
struct EpochLog {
    shape: Shape,
    /// Round trips whose rows no commit has taken yet, and who to tell when one has.
    waiting: std::sync::Mutex<Vec<Committed>>,
    state: tokio::sync::Mutex<LogState>,
    /// Where a SQLite log lives; removed after the log (declared after `state`: dropped after).
    _scratch: Option<Scratch>,
}

/// One round trip waiting for its rows' commit: its rank, and who to tell.
type Committed = (u32, oneshot::Sender<Result<(), String>>);

struct LogState {
    committer: Committer,
    window: u64,
    /// The last sequence number and hash of the window's chain.
    seq: u64,
    previous: [u8; 32],
    began: Instant,
    /// Round trips committed: each one's operation id and token.
    trips: u64,
}

impl EpochLog {
    async fn open(store: FloorStore, shape: Shape) -> anyhow::Result<Self> {
        let (store, scratch) = match store {
            FloorStore::Sqlite => {
                let scratch = Scratch::new("commit-echo")?;
                let store = AuditStore::open(None, scratch.path())
                    .await?
                    .writing(crate::sqlite_rows());
                (store, Some(scratch))
            }
            FloorStore::Postgres(url) => {
                (AuditStore::open(Some(&url), Path::new(".")).await?, None)
            }
        };
        let window = store.max_window_id().await? + 1;
        let mut state = LogState {
            committer: Committer::new(store),
            window,
            seq: 0,
            previous: GENESIS,
            began: Instant::now(),
            trips: 0,
        };
        // rank 0, the target, and one rank per stream
        let ranks = STREAMS + 1;
        let created = Event::WindowCreated {
            world: "onesided-bench".into(),
            name: format!("commit-echo-{}", unique()),
            sizes: vec![8; ranks],
            disp_units: vec![8; ranks],
            info: BTreeMap::new(),
            unified: false,
        };
        state.append(vec![(0, 0, created)]).await?;
        Ok(EpochLog {
            shape,
            waiting: std::sync::Mutex::new(Vec::new()),
            state: tokio::sync::Mutex::new(state),
            _scratch: scratch,
        })
    }

    /// Returns once the rows of one more round trip of rank `origin` are committed: by this
    /// call, or by one that took them with its own while this one waited for the log. (A
    /// call whose rows another took returns as soon as that commit ends; waiting for the log
    /// itself would make it wait for the next commit as well.)
    async fn commit(&self, origin: u32) -> anyhow::Result<()> {
        let (done, mut committed) = oneshot::channel();
        lock_waiting(&self.waiting).push((origin, done));
        loop {
            tokio::select! {
                biased;
                result = &mut committed => {
                    return result
                        .context("the commit that took these rows was dropped")?
                        .map_err(anyhow::Error::msg);
                }
                mut state = self.state.lock() => {
                    let taken = std::mem::take(&mut *lock_waiting(&self.waiting));
                    if taken.is_empty() {
                        continue;
                    }
                    let mut events = Vec::with_capacity(taken.len() * 9);
                    for (origin, _) in &taken {
                        state.trips += 1;
                        events.extend(self.shape.events(*origin, state.trips));
                    }
                    let result = state
                        .append(events)
                        .await
                        .map_err(|error| format!("{error:#}"));
                    for (_, done) in taken {
                        let _ = done.send(result.clone());
                    }
                }
            }
        }
    }

    /// Records the window freed.
    async fn close(&self) -> anyhow::Result<()> {
        self.state
            .lock()
            .await
            .append(vec![(0, 0, Event::WindowFreed)])
            .await
    }
}

/// The waiting list; a panic elsewhere never leaves it unusable.
fn lock_waiting(
    waiting: &std::sync::Mutex<Vec<Committed>>,
) -> std::sync::MutexGuard<'_, Vec<Committed>> {
    waiting.lock().unwrap_or_else(|poison| poison.into_inner())
}

impl LogState {
    /// Numbers, encodes and chains `events` (rank, incarnation, event) after the window's
    /// tail, as the audit writer does, and commits them in one insert.
    async fn append(&mut self, events: Vec<(u32, u64, Event)>) -> anyhow::Result<()> {
        let (mut seq, mut previous) = (self.seq, self.previous);
        let mut rows = Vec::with_capacity(events.len());
        for (rank, incarnation, event) in events {
            seq += 1;
            let record = AuditRecord {
                window: self.window,
                seq,
                at_ns: u64::try_from(self.began.elapsed().as_nanos()).unwrap_or(u64::MAX),
                rank,
                incarnation,
                cseq: None,
                event,
            };
            let body = Body::encode(&record.event);
            let hash = chain_hash(&previous, &record, &body);
            rows.push(NewRow {
                record,
                body,
                prev_hash: previous,
                hash,
            });
            previous = hash;
        }
        self.committer.insert(&rows, &[]).await?;
        (self.seq, self.previous) = (seq, previous);
        Ok(())
    }
}

/// The floor under a `sync` answer: [`echo_us`] against an echo server (a runtime of
/// `threads`, as [`floor`]'s) that answers each message only after committing the nine rows
/// onesided's audit records for one lock-put-unlock epoch — four of the origin's calls, the
/// lock's request, grant and release and the put at the target, and the previous epoch's
/// unlock returning — encoded, chained and inserted by the audit store's own code
/// (`onesided_server::audit::store::Committer`, one statement, one commit) into `store`:
/// median µs. A `sync` lock-put-unlock does all of this and its RMA work besides, so this is
/// what it cannot go below with that store on this machine, with the hand-offs the store
/// itself needs (SQLite's worker thread; PostgreSQL's backend) but none of onesided's.
///
/// # Errors
/// As [`echo_us`], or when the store cannot be opened or a commit fails.
pub async fn commit_echo_us(
    threads: Threads,
    store: FloorStore,
    iterations: usize,
) -> anyhow::Result<f64> {
    against_committing(threads, store, Shape::Epoch, |url| async move {
        echo_us(&url, iterations).await
    })
    .await
}

/// The floor under the `sync` hot counter: [`streams_per_s`] (its [`STREAMS`] streams, each a
/// rank doing `per_stream` round trips one after another) against an echo server (a runtime of
/// `threads`) that answers each message only after the five rows onesided's audit records for
/// one of the hot counter's operations ([`Shape::Accumulate`]) are committed into `store` —
/// in groups, as the audit writer commits: rows that arrive while a commit is under way go
/// together in the next. Round trips per second. A `sync` hot counter needs all of it and its
/// RMA work besides.
///
/// # Errors
/// As [`commit_echo_us`].
pub async fn commit_streams_per_s(
    threads: Threads,
    store: FloorStore,
    per_stream: usize,
) -> anyhow::Result<f64> {
    against_committing(threads, store, Shape::Accumulate, |url| async move {
        streams_per_s(&url, per_stream).await
    })
    .await
}

/// `measure`, given its URL, against a committing echo into `store` whose answers wait for
/// `shape`'s rows; then the server stopped. The figure, or the first failure: the measure's,
/// else the log's last commit's.
async fn against_committing<F>(
    threads: Threads,
    store: FloorStore,
    shape: Shape,
    measure: impl FnOnce(String) -> F,
) -> anyhow::Result<f64>
where
    F: std::future::Future<Output = anyhow::Result<f64>>,
{
    let server = EchoServerHandle::start_committing(threads, store, shape).await?;
    let measured = measure(server.url.clone()).await;
    let stopped = server.stop().await;
    let figure = measured?;
    stopped?;
    Ok(figure)
}

/// The two floors under `sync` into one store.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CommitFloors {
    /// [`commit_echo_us`]: under a lock-put-unlock, µs.
    pub echo_us: f64,
    /// [`commit_streams_per_s`]: under the hot counter, round trips/s.
    pub streams_per_s: f64,
}

/// [`commit_echo_us`] with `iterations`, then [`commit_streams_per_s`] with `per_stream`, both
/// into `store` on servers with runtimes of `threads`.
///
/// # Errors
/// As the two.
pub async fn commit_floors(
    threads: Threads,
    store: FloorStore,
    iterations: usize,
    per_stream: usize,
) -> anyhow::Result<CommitFloors> {
    let echo_us = commit_echo_us(threads, store.clone(), iterations)
        .await
        .context("the committing echo")?;
    let streams_per_s = commit_streams_per_s(threads, store, per_stream)
        .await
        .context("the committing streams")?;
    Ok(CommitFloors {
        echo_us,
        streams_per_s,
    })
}

#[cfg(test)]
mod tests {
    use onesided_core::audit::{replay, verify};

    use super::*;

    /// The rows of the one window a floor left in the database at `url`: the bench's, an
    /// intact chain from its creation to its release.
    /// Runs a committing floor (`floor`, given its store) into a fresh PostgreSQL database: its
    /// figure is a positive number, and the records it committed are [`floor_rows`].
    async fn floor_on_postgres<F, Run>(floor: F) -> Vec<AuditRecord>
    where
        F: FnOnce(FloorStore) -> Run,
        Run: std::future::Future<Output = anyhow::Result<f64>>,
    {
        let database = onesided_test_support::PgDatabase::create().await;
        let figure = floor(FloorStore::Postgres(database.url.clone()))
            .await
            .expect("the committing floor failed");
        assert!(figure > 0.0, "{figure}");
        floor_rows(&database.url).await
    }

    async fn floor_rows(url: &str) -> Vec<AuditRecord> {
        let store = AuditStore::open(Some(url), Path::new(".")).await.unwrap();
        let windows = store.windows().await.unwrap();
        assert_eq!(windows.len(), 1, "{windows:?}");
        assert_eq!(windows[0].world, "onesided-bench");
        let rows = store.rows(windows[0].id, 1).await.unwrap();
        assert_eq!(verify(&rows), Ok(()));
        let records: Vec<AuditRecord> = rows.into_iter().map(|row| row.record).collect();
        assert!(matches!(records[0].event, Event::WindowCreated { .. }));
        assert!(matches!(records.last().unwrap().event, Event::WindowFreed));
        records
    }

    /// The barrier echo answers no stream until every stream's message of the round has
    /// arrived, and then answers each with its own message.
    #[tokio::test]
    async fn the_barrier_echo_answers_a_round_only_when_every_stream_sent() {
        let server = EchoServerHandle::start_barrier(Threads::One, 2).unwrap();
        let mut first = open(channel(&server.url).await.unwrap()).await.unwrap();
        let mut second = open(channel(&server.url).await.unwrap()).await.unwrap();
        first.send(Bytes::from_static(b"first")).await.unwrap();
        // alone, the first stream's message waits (an echo without the barrier answers in µs)
        let early =
            tokio::time::timeout(std::time::Duration::from_millis(300), first.answer()).await;
        assert!(
            early.is_err(),
            "answered before the round was whole: {early:?}"
        );
        second.send(Bytes::from_static(b"second")).await.unwrap();
        assert_eq!(first.answer().await.unwrap().data, &b"first"[..]);
        assert_eq!(second.answer().await.unwrap().data, &b"second"[..]);
        // and the next round as well, the streams taking turns the other way
        second.send(Bytes::from_static(b"2")).await.unwrap();
        first.send(Bytes::from_static(b"1")).await.unwrap();
        assert_eq!(second.answer().await.unwrap().data, &b"2"[..]);
        assert_eq!(first.answer().await.unwrap().data, &b"1"[..]);
        let us = barrier_us(&server.url, 2, 10).await.unwrap();
        assert!(us > 0.0 && us.is_finite(), "{us}");
    }

    /// Every answer of the committing echo came after one more epoch's nine rows were
    /// committed: the store holds the window's creation, nine rows per round trip (the warm-up
    /// included) and its release, as one intact chain whose replay ends with the last epoch's
    /// put.
    #[tokio::test]
    async fn each_answer_of_the_committing_echo_follows_its_epochs_commit() {
        let iterations = 20;
        let records =
            floor_on_postgres(|store| commit_echo_us(Threads::One, store, iterations)).await;
        let epochs = (iterations + warm_up(iterations)) as u64;
        assert_eq!(records.len() as u64, 2 + 9 * epochs);
        let last = records.len() as u64 - 1;
        let copies = replay(&records, Some(last)).unwrap();
        assert_eq!(copies[0], epochs.to_le_bytes().to_vec());
        assert_eq!(copies[1], vec![0; 8]);
    }

    /// The committing echo of the hot counter's shape: every round trip of every stream left
    /// its five rows, each stream as a rank of its own, in one intact chain whose replay sums
    /// one per round trip at the target.
    #[tokio::test]
    async fn the_hot_counters_floor_commits_five_rows_per_round_trip_of_every_stream() {
        let per_stream = 3;
        let records =
            floor_on_postgres(|store| commit_streams_per_s(Threads::One, store, per_stream)).await;
        // one unmeasured round trip per stream first
        let trips = (STREAMS * (per_stream + 1)) as u64;
        assert_eq!(records.len() as u64, 2 + 5 * trips);
        let mut origins: Vec<u32> = records
            .iter()
            .filter_map(|record| match record.event {
                Event::Flush { origin } => Some(origin),
                _ => None,
            })
            .collect();
        origins.sort_unstable();
        origins.dedup();
        assert_eq!(origins, (1..=STREAMS as u32).collect::<Vec<_>>());
        let last = records.len() as u64 - 1;
        let copies = replay(&records, Some(last)).unwrap();
        assert_eq!(copies[0], (trips as i64).to_le_bytes().to_vec());
    }
}
