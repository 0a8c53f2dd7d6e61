//! Resource limits, and the tower layers that enforce the ones a request carries on its face:
//! the size of each message a client sends and the number of request messages of a unary method
//! ([`MessageLimitLayer`]), and the client's deadline ([`DeadlineLayer`]).
//!
//! Owns: the [`Limits`] of a server and the two layers. Must not: keep state across requests;
//! limits that need state (window bytes, ranks per world, pending operations) are checked where
//! that state lives (the registry and the session), with the values from here.
//!
//! Both layers sit inside tonic's router stack, so credentials are still checked first: a
//! message is measured only once an interceptor let its call through and the service reads it.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use http_body::{Body as HttpBody, Frame, SizeHint};
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::status_from_rma;
use tokio::time::{Instant, Sleep};
use tonic::body::Body;
use tonic::Status;
use tower::{Layer, Service};

/// What one server accepts at most. Exceeding a limit is RESOURCE_EXHAUSTED with
/// `MPI_ERR_NO_MEM` and changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest message a client may send, in bytes (protobuf payload of one gRPC message:
    /// a put of up to about this many bytes per call).
    pub max_message_bytes: usize,
    /// The most bytes one rank may expose in one window.
    pub max_window_bytes_per_rank: u64,
    /// The most bytes all windows of the server expose together.
    pub max_window_bytes: u64,
    /// The most ranks a world may have.
    pub max_ranks_per_world: u32,
    /// The most operations one session may have sent and not yet had answered.
    pub max_pending_ops: usize,
    /// The most bytes of unified-model updates (other ranks' changes of a window's public
    /// copy, sent to the owner's session that follows it) a session's outbound stream holds
    /// that its client has not read: one update more ends the session (RESOURCE_EXHAUSTED,
    /// `MPI_ERR_NO_MEM`), as a full stream does. One update alone always fits.
    pub max_unread_update_bytes: u64,
    /// The most bytes of point-to-point messages sent and not yet received one world holds: a
    /// send past it is refused (RESOURCE_EXHAUSTED, `MPI_ERR_NO_MEM`), nothing sent.
    pub max_queued_message_bytes: u64,
}

impl Default for Limits {
    /// Generous but finite: 1 GiB messages and per-rank windows, 8 GiB of windows per server,
    /// 4096 ranks per world, 65536 operations in flight per session, 256 MiB of updates
    /// unread per session, 1 GiB of messages unreceived per world.
    fn default() -> Self {
        Limits {
            max_message_bytes: 1 << 30,
            max_window_bytes_per_rank: 1 << 30,
            max_window_bytes: 8 << 30,
            max_ranks_per_world: 4096,
            max_pending_ops: 1 << 16,
            max_unread_update_bytes: 256 << 20,
            max_queued_message_bytes: 1 << 30,
        }
    }
}

/// Answers of calls other than operations a session's outbound stream holds on top of its
/// pending-operation budget ([`Limits::outbound_capacity`]).
pub const OUTBOUND_SLACK: usize = 1024;

impl Limits {
    /// How many answers a session's outbound stream holds that its client has not read: every
    /// operation the pending budget lets it have unanswered, all answered at once while the
    /// client looks away, plus [`OUTBOUND_SLACK`] answers of other calls. A client that reads
    /// its answers never comes near it; one that stops reading and keeps calling fills it,
    /// and its session ends (RESOURCE_EXHAUSTED, `MPI_ERR_NO_MEM`) rather than hold the
    /// server's memory without bound.
    pub fn outbound_capacity(&self) -> usize {
        self.max_pending_ops
            .saturating_add(OUTBOUND_SLACK)
            .min(tokio::sync::Semaphore::MAX_PERMITS)
    }

    /// The HTTP/2 connection window the server grants each connection, in bytes.
    ///
    /// HTTP/2 (h2) ends a connection, GOAWAY ENHANCE_YOUR_CALM "too_many_data_frames", when the
    /// DATA frames of under [`SMALL_DATA_FRAME`] bytes it holds that the server has not read
    /// yet cost more than half this window, each costing [`SMALL_DATA_FRAME`] minus its
    /// length. A client such as grpcio sends each small call in a frame of its own, and a
    /// session reads its calls one after the other: with HTTP/2's default of 1 MiB, some
    /// 2 400 small calls not yet read ended the connection and lost every call, far below
    /// the pending budget. Twice [`SMALL_DATA_FRAME`] for each call
    /// [`Limits::outbound_capacity`] lets a session have unanswered makes the two agree: that
    /// many calls may wait, each in a frame of its own, and the connection stays (34 MB at
    /// the defaults; flow control still holds each stream to 1 MiB not read). Within HTTP/2's
    /// largest window and never below its default.
    pub fn connection_window(&self) -> u32 {
        const DEFAULT: u64 = 1 << 20;
        const LARGEST: u64 = (1 << 31) - 1;
        (self.outbound_capacity() as u64)
            .saturating_mul(2 * SMALL_DATA_FRAME as u64)
            .clamp(DEFAULT, LARGEST) as u32
    }
}

/// The size under which HTTP/2 (h2) counts a DATA frame against a connection's budget of small
/// frames ([`Limits::connection_window`]).
pub const SMALL_DATA_FRAME: usize = 256;

/// How many connections each plain-HTTP listener (`--metrics-listen`, `--http-listen`) holds
/// at once. Past it the listener accepts nothing more until one closes: further connections
/// wait in the kernel's backlog, where they hold none of the server's file descriptors (1 135
/// idle web connections once took every descriptor, and new gRPC connections were refused
/// for 30 s).
pub const HTTP_CONNECTIONS: usize = 128;

/// How long a plain-HTTP client has to send a request's headers, from when the server starts
/// reading them: a deadline, not an idle timer, so a client sending one byte at a time cannot
/// stretch it, and a connection that sends nothing is closed when it passes (hyper's own
/// default is 30 s).
pub const HTTP_HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// The refusal of a call that would exceed a limit.
pub fn exhausted(message: impl Into<String>) -> RmaError {
    RmaError::new(ErrorClass::NoMem, message)
}

/// Refuses any gRPC message longer than a limit, as soon as its length prefix arrives (before
/// its bytes are buffered): RESOURCE_EXHAUSTED, `MPI_ERR_NO_MEM`. On a stream the message
/// carries the call id, so the whole stream ends with that status.
///
/// On the methods that take one request message (unary and server-streaming), the length
/// prefix of a second one fails the call with UNIMPLEMENTED, gRPC's code for a cardinality
/// violation (its status-code table; tonic would read the first message, drop the rest and
/// answer OK). tonic reads a unary request to its end before calling the method, so the method
/// never runs and nothing changes.
#[derive(Clone, Debug)]
pub struct MessageLimitLayer {
    max: usize,
    single: Arc<HashSet<String>>,
}

impl MessageLimitLayer {
    /// Messages of at most `max` bytes pass; no method is held to one request message.
    pub fn new(max: usize) -> Self {
        MessageLimitLayer {
            max,
            single: Arc::new(HashSet::new()),
        }
    }

    /// Calls of the methods at `paths` (`/package.Service/Method`) may carry only one request
    /// message.
    pub fn single_request(mut self, paths: impl IntoIterator<Item = String>) -> Self {
        self.single = Arc::new(paths.into_iter().collect());
        self
    }
}

impl<S> Layer<S> for MessageLimitLayer {
    type Service = MessageLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        MessageLimit {
            inner,
            max: self.max,
            single: Arc::clone(&self.single),
        }
    }
}

/// The service of [`MessageLimitLayer`].
#[derive(Clone, Debug)]
pub struct MessageLimit<S> {
    inner: S,
    max: usize,
    single: Arc<HashSet<String>>,
}

impl<S> Service<http::Request<Body>> for MessageLimit<S>
where
    S: Service<http::Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let max = self.max;
        let single = self.single.contains(request.uri().path());
        self.inner.call(request.map(|body| {
            Body::new(LimitedBody {
                body,
                max,
                single,
                messages: 0,
                prefix: [0; 5],
                filled: 0,
                skip: 0,
                failed: false,
            })
        }))
    }
}

/// A request body whose gRPC length prefixes are read as they pass.
struct LimitedBody {
    body: Body,
    max: usize,
    /// Whether the method takes exactly one request message.
    single: bool,
    /// Length prefixes read so far.
    messages: u64,
    /// The length prefix being read: a compression flag and a big-endian `u32`.
    prefix: [u8; 5],
    filled: usize,
    /// Payload bytes of the current message still to pass.
    skip: u64,
    failed: bool,
}

impl LimitedBody {
    fn scan(&mut self, mut data: &[u8]) -> Result<(), Status> {
        while !data.is_empty() {
            if self.skip > 0 {
                let passed = data
                    .len()
                    .min(usize::try_from(self.skip).unwrap_or(usize::MAX));
                self.skip -= passed as u64;
                data = &data[passed..];
                continue;
            }
            let taken = data.len().min(self.prefix.len() - self.filled);
            self.prefix[self.filled..self.filled + taken].copy_from_slice(&data[..taken]);
            self.filled += taken;
            data = &data[taken..];
            if self.filled == self.prefix.len() {
                self.filled = 0;
                self.messages += 1;
                if self.single && self.messages > 1 {
                    return Err(Status::unimplemented(
                        "this method takes one request message and the call sent more",
                    ));
                }
                let length = u32::from_be_bytes([
                    self.prefix[1],
                    self.prefix[2],
                    self.prefix[3],
                    self.prefix[4],
                ]);
                if u64::from(length) > self.max as u64 {
                    return Err(status_from_rma(&exhausted(format!(
                        "a message of {length} bytes exceeds the server's limit of {} bytes",
                        self.max
                    ))));
                }
                self.skip = u64::from(length);
            }
        }
        Ok(())
    }
}

impl HttpBody for LimitedBody {
    type Data = bytes::Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        let frame = ready!(Pin::new(&mut this.body).poll_frame(cx));
        if let Some(Err(status)) = &frame {
            log_connection_ended(status);
        }
        if let Some(Ok(frame)) = &frame {
            if let Some(data) = frame.data_ref() {
                if let Err(status) = this.scan(data) {
                    this.failed = true;
                    return Poll::Ready(Some(Err(status)));
                }
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Says at WARN when the server's own HTTP/2 layer ended the connection a request came on (a
/// GOAWAY it sent for a limit or a protocol error, ENHANCE_YOUR_CALM and the like): h2 and
/// tonic say it only at DEBUG, and the client only sees its calls fail. Logged from the body of
/// each request that was open on the connection, so in a session's span (its world and rank).
fn log_connection_ended(status: &Status) {
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if let Some(h2) = error.downcast_ref::<h2::Error>() {
            if h2.is_go_away() && h2.is_library() {
                tracing::warn!(
                    error = %h2,
                    "the server's HTTP/2 layer ended this call's connection"
                );
            }
            return;
        }
        source = error.source();
    }
}

/// Honours the client's deadline (`grpc-timeout`) over the whole call, response stream
/// included: when it passes first, the call ends with DEADLINE_EXCEEDED. A call whose deadline
/// has already passed when it arrives is not started. (tonic's own timeout answers CANCELLED
/// and covers only the response headers.)
#[derive(Clone, Copy, Debug, Default)]
pub struct DeadlineLayer;

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Deadline { inner }
    }
}

/// The service of [`DeadlineLayer`].
#[derive(Clone, Debug)]
pub struct Deadline<S> {
    inner: S,
}

/// The deadline a request carries, if it carries a well-formed one (an unparsable header is
/// ignored, as tonic does).
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    // at most eight digits and a unit (gRPC over HTTP/2)
    if !(2..=9).contains(&value.len()) {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    if !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount * 3600),
        "M" => Duration::from_secs(amount * 60),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

fn deadline_exceeded() -> Status {
    Status::deadline_exceeded("the call did not finish before the client's deadline")
}

impl<S, B> Service<http::Request<B>> for Deadline<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = DeadlineFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let now = Instant::now();
        let Some(deadline) =
            grpc_timeout(request.headers()).and_then(|after| now.checked_add(after))
        else {
            return DeadlineFuture {
                inner: Some(Box::pin(self.inner.call(request))),
                deadline: None,
            };
        };
        if deadline <= now {
            return DeadlineFuture {
                inner: None,
                deadline: None,
            };
        }
        // the sleep starts before tonic's (outside this layer), so this one ends the call
        DeadlineFuture {
            inner: Some(Box::pin(self.inner.call(request))),
            deadline: Some((deadline, Box::pin(tokio::time::sleep_until(deadline)))),
        }
    }
}

/// The response future of [`Deadline`]. `inner: None` is a call refused on arrival.
pub struct DeadlineFuture<F> {
    inner: Option<Pin<Box<F>>>,
    deadline: Option<(Instant, Pin<Box<Sleep>>)>,
}

impl<F> std::fmt::Debug for DeadlineFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadlineFuture")
            .field("deadline", &self.deadline.as_ref().map(|(at, _)| at))
            .finish_non_exhaustive()
    }
}

impl<F, E> Future for DeadlineFuture<F>
where
    F: Future<Output = Result<http::Response<Body>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(Ok(deadline_exceeded().into_http()));
        };
        if let Poll::Ready(result) = inner.as_mut().poll(cx) {
            let deadline = this.deadline.take();
            return Poll::Ready(result.map(|response| match deadline {
                Some((at, sleep)) => response.map(|body| {
                    Body::new(DeadlineBody {
                        body,
                        at,
                        sleep,
                        ended: false,
                    })
                }),
                None => response,
            }));
        }
        if let Some((at, sleep)) = this.deadline.as_mut() {
            // past the deadline never returns Pending: tonic's later timer must not answer
            // CANCELLED first
            if Instant::now() >= *at || sleep.as_mut().poll(cx).is_ready() {
                this.inner = None;
                return Poll::Ready(Ok(deadline_exceeded().into_http()));
            }
        }
        Poll::Pending
    }
}

/// A response body that ends with DEADLINE_EXCEEDED trailers when the deadline passes first.
struct DeadlineBody {
    body: Body,
    at: Instant,
    sleep: Pin<Box<Sleep>>,
    ended: bool,
}

impl HttpBody for DeadlineBody {
    type Data = bytes::Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            match &frame {
                Some(Ok(frame)) if frame.is_trailers() => this.ended = true,
                None => this.ended = true,
                _ => {}
            }
            return Poll::Ready(frame);
        }
        if Instant::now() >= this.at || this.sleep.as_mut().poll(cx).is_ready() {
            this.ended = true;
            let mut trailers = http::HeaderMap::new();
            return Poll::Ready(Some(
                deadline_exceeded()
                    .add_header(&mut trailers)
                    .map(|()| Frame::trailers(trailers)),
            ));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.body.is_end_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_window_holds_a_small_frame_per_call_a_session_may_have_unanswered() {
        let defaults = Limits::default();
        // h2 ends the connection when unread small frames cost more than half the window,
        // each at most SMALL_DATA_FRAME
        assert!(
            u64::from(defaults.connection_window()) / 2
                >= (defaults.outbound_capacity() * SMALL_DATA_FRAME) as u64
        );
        assert_eq!(defaults.connection_window(), 66_560 * 512);
        let few = Limits {
            max_pending_ops: 1,
            ..Limits::default()
        };
        assert_eq!(
            few.connection_window(),
            1 << 20,
            "never below HTTP/2's default"
        );
        let many = Limits {
            max_pending_ops: usize::MAX,
            ..Limits::default()
        };
        assert_eq!(many.connection_window(), (1 << 31) - 1, "HTTP/2's largest");
    }

    fn timeout(value: &str) -> Option<Duration> {
        let mut headers = http::HeaderMap::new();
        headers.insert("grpc-timeout", value.parse().unwrap());
        grpc_timeout(&headers)
    }

    #[test]
    fn grpc_timeouts_parse_as_the_spec_writes_them() {
        assert_eq!(timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(timeout("2M"), Some(Duration::from_secs(120)));
        assert_eq!(timeout("3S"), Some(Duration::from_secs(3)));
        assert_eq!(timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(timeout("7u"), Some(Duration::from_micros(7)));
        assert_eq!(timeout("0n"), Some(Duration::ZERO));
        assert_eq!(timeout("99999999S"), Some(Duration::from_secs(99_999_999)));
        for bad in ["", "S", "123456789S", "+5S", "5s", "five", "5 S"] {
            assert_eq!(timeout(bad), None, "{bad:?}");
        }
    }

    fn body_of(chunks: &[&[u8]], max: usize) -> Result<(), Status> {
        scanned(chunks, max, false)
    }

    fn scanned(chunks: &[&[u8]], max: usize, single: bool) -> Result<(), Status> {
        let mut body = LimitedBody {
            body: Body::empty(),
            max,
            single,
            messages: 0,
            prefix: [0; 5],
            filled: 0,
            skip: 0,
            failed: false,
        };
        chunks.iter().try_for_each(|chunk| body.scan(chunk))
    }

    fn message(length: u32) -> Vec<u8> {
        let mut bytes = vec![0];
        bytes.extend_from_slice(&length.to_be_bytes());
        bytes.extend(std::iter::repeat_n(7u8, length as usize));
        bytes
    }

    #[test]
    fn a_second_request_message_of_a_unary_method_is_refused_at_its_prefix() {
        let mut two = message(3);
        two.extend(message(0));
        // the prefix of the second message split across chunks
        let (first, second) = two.split_at(10);
        let error = scanned(&[first, second], 10, true).unwrap_err();
        assert_eq!(error.code(), tonic::Code::Unimplemented);
        assert!(scanned(&[&two[..8]], 10, true).is_ok());
        assert!(scanned(&[&two], 10, false).is_ok());
        assert!(scanned(&[&message(3)], 10, true).is_ok());
    }

    #[test]
    fn message_lengths_are_read_across_chunk_boundaries() {
        let mut stream = message(10);
        stream.extend(message(3));
        stream.extend(message(11));
        let error = body_of(&[&stream], 10).unwrap_err();
        assert_eq!(error.code(), tonic::Code::ResourceExhausted);
        assert_eq!(
            onesided_proto::rma_from_status(&error).map(|e| e.class),
            Some(ErrorClass::NoMem)
        );
        // the same bytes one at a time
        let single: Vec<&[u8]> = stream.chunks(1).collect();
        assert!(body_of(&single, 10).is_err());
        assert!(body_of(&single, 11).is_ok());
        // a prefix split over chunks
        let (first, second) = stream.split_at(2);
        assert!(body_of(&[first, second], 11).is_ok());
        assert!(body_of(&[first, second], 10).is_err());
        assert!(body_of(&[&message(0)], 0).is_ok());
    }
}

/// The bytes all windows of the server take together, against [`Limits::max_window_bytes`]:
/// the registry takes a window's bytes when it creates it and gives them back when it goes;
/// a dynamic window's actors take the bytes its regions add as they are attached and give
/// them back when they stop. Atomic, so neither waits for the other.
#[derive(Debug)]
pub struct WindowBytes {
    limit: u64,
    in_use: AtomicU64,
}

impl WindowBytes {
    /// None in use yet, at most `limit`.
    pub fn new(limit: u64) -> Self {
        WindowBytes {
            limit,
            in_use: AtomicU64::new(0),
        }
    }

    /// Takes `bytes` if they fit under the limit; else the bytes in use, nothing taken.
    ///
    /// # Errors
    /// The bytes in use when `bytes` more would pass the limit.
    pub fn take(&self, bytes: u64) -> Result<(), u64> {
        self.in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |in_use| {
                in_use
                    .checked_add(bytes)
                    .filter(|&after| after <= self.limit)
            })
            .map(drop)
    }

    /// Takes `bytes` whatever the limit (what recovery finds was in use, even past a limit
    /// lowered since: new windows then wait for room).
    pub fn take_anyway(&self, bytes: u64) {
        self.in_use.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Gives back `bytes` taken before.
    pub fn give_back(&self, bytes: u64) {
        self.in_use.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// The bytes in use.
    pub fn in_use(&self) -> u64 {
        self.in_use.load(Ordering::Acquire)
    }

    /// The most bytes there may be.
    pub fn limit(&self) -> u64 {
        self.limit
    }
}
