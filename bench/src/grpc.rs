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

use crate::measure::{median, warm_up};
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

struct EchoService;

#[tonic::async_trait]
impl Echo for EchoService {
    type EchoStream = Pin<Box<dyn Stream<Item = Result<Blob, Status>> + Send>>;

    async fn echo(
        &self,
        request: Request<Streaming<Blob>>,
    ) -> Result<Response<Self::EchoStream>, Status> {
        let answers = request.into_inner().map(|message| {
            message.map(|blob| {
                if blob.data.len() <= ECHOED {
                    blob
                } else {
                    Blob::default()
                }
            })
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
}

impl EchoServerHandle {
    /// Starts it with a runtime of `threads`.
    ///
    /// # Errors
    /// When the port cannot be bound or the runtime cannot be built.
    pub fn start(threads: Threads) -> anyhow::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let runtime = threads
            .runtime("echo-server")
            .context("cannot build the echo server's runtime")?;
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("echo-server".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let incoming = TcpListenerStream::new(listener).map(|accepted| {
                        accepted.and_then(|stream| stream.set_nodelay(true).map(|()| stream))
                    });
                    let service = EchoServer::new(EchoService)
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
                });
            })
            .context("cannot start the echo server's thread")?;
        Ok(EchoServerHandle {
            url,
            stop: Some(stop),
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
