//! Raw gRPC for tests whose point is a hostile or unusual client: bytes in and out through the
//! generated paths, hand-written metadata, hand-built sessions, and bare HTTP/2 (no client
//! library keeping its own timer).

use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use onesided_proto::v1::client_message::Call;
use onesided_proto::v1::{self, server_message::Reply, ClientMessage, ServerMessage};
use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};

/// Bytes in, bytes out: the codec of a client that writes its own messages.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawCodec;

#[derive(Debug)]
pub struct RawEncoder;

#[derive(Debug)]
pub struct RawDecoder;

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }

    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

pub const SESSION: &str = "/onesided.v1.Rma/Session";

pub fn encode(message: &impl Message) -> Bytes {
    message.encode_to_vec().into()
}

/// A gRPC client for raw bytes.
pub async fn raw(url: &str) -> tonic::client::Grpc<Channel> {
    let channel = tonic::transport::Endpoint::from_shared(url.to_string())
        .unwrap()
        .connect()
        .await
        .unwrap();
    tonic::client::Grpc::new(channel)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX)
}

/// Metadata a row sends.
#[derive(Clone, Debug, Default)]
pub struct Meta {
    pub entries: Vec<(&'static str, String)>,
}

impl Meta {
    pub fn bearer(token: &str) -> Self {
        Meta::default().with("authorization", &format!("Bearer {token}"))
    }

    pub fn with(mut self, key: &'static str, value: &str) -> Self {
        self.entries.push((key, value.to_string()));
        self
    }

    /// Every entry, in order: a key given twice is sent twice.
    pub fn apply<T>(&self, mut request: tonic::Request<T>) -> tonic::Request<T> {
        for (key, value) in &self.entries {
            request
                .metadata_mut()
                .append(*key, value.parse().expect("ASCII metadata"));
        }
        request
    }
}

pub async fn unary(
    grpc: &mut tonic::client::Grpc<Channel>,
    path: &'static str,
    meta: &Meta,
    body: Bytes,
) -> Result<Bytes, Status> {
    grpc.ready().await.unwrap();
    let request = meta.apply(tonic::Request::new(body));
    grpc.unary(request, PathAndQuery::from_static(path), RawCodec)
        .await
        .map(tonic::Response::into_inner)
}

/// A call of a unary method that sends `bodies`, each as its own request message (a client
/// streaming them where the method takes one).
pub async fn unary_messages(
    grpc: &mut tonic::client::Grpc<Channel>,
    path: &'static str,
    meta: &Meta,
    bodies: Vec<Bytes>,
) -> Result<Bytes, Status> {
    grpc.ready().await.unwrap();
    let request = meta.apply(tonic::Request::new(tokio_stream::iter(bodies)));
    grpc.client_streaming(request, PathAndQuery::from_static(path), RawCodec)
        .await
        .map(tonic::Response::into_inner)
}

/// A session whose every message is written by hand.
pub struct RawSession {
    sender: mpsc::UnboundedSender<Bytes>,
    replies: Streaming<Bytes>,
    next_id: u64,
}

impl RawSession {
    /// Opens a session and reads its greeting.
    pub async fn open(
        grpc: &mut tonic::client::Grpc<Channel>,
        meta: &Meta,
    ) -> Result<(Self, v1::Attached), Status> {
        let (sender, receiver) = mpsc::unbounded_channel();
        grpc.ready().await.unwrap();
        let request = meta.apply(tonic::Request::new(UnboundedReceiverStream::new(receiver)));
        let mut replies = grpc
            .streaming(request, PathAndQuery::from_static(SESSION), RawCodec)
            .await?
            .into_inner();
        let greeting = replies.message().await?.expect("a greeting");
        let Some(Reply::Attached(attached)) = ServerMessage::decode(greeting).unwrap().reply else {
            panic!("the session did not start with a greeting");
        };
        let session = RawSession {
            sender,
            replies,
            next_id: 0,
        };
        Ok((session, attached))
    }

    /// Sends one message as it is.
    pub fn send_bytes(&self, bytes: Bytes) {
        self.sender.send(bytes).unwrap();
    }

    /// The next message from the server, or the status the stream ended with.
    pub async fn next(&mut self) -> Result<Option<ServerMessage>, Status> {
        Ok(self
            .replies
            .message()
            .await?
            .map(|bytes| ServerMessage::decode(bytes).unwrap()))
    }

    /// Sends `call` without waiting for its answer, unless the stream is gone (the server
    /// ended the session and the transport dropped the request body): whether it was sent.
    pub fn try_send(&mut self, call: Option<Call>) -> bool {
        self.next_id += 1;
        let message = encode(&ClientMessage {
            id: self.next_id,
            call,
        });
        self.sender.send(message).is_ok()
    }

    /// Sends `call` without waiting for its answer; returns its id.
    pub fn send(&mut self, call: Option<Call>) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send_bytes(encode(&ClientMessage { id, call }));
        id
    }

    /// Sends `call` and returns its answer.
    pub async fn call(&mut self, call: Option<Call>) -> ServerMessage {
        let id = self.send(call);
        let reply = self
            .next()
            .await
            .unwrap()
            .expect("the session ended instead of answering");
        assert_eq!(reply.id, id, "answers come in call order here");
        reply
    }

    /// Opens the window `name` ([`open_window`]) and returns its id, failing the test on a
    /// refusal or another answer.
    pub async fn open_window(&mut self, name: &str) -> u64 {
        let Reply::Window(desc) = self.ok(open_window(name)).await else {
            panic!("no window description");
        };
        desc.id
    }

    /// Sends `call` and returns what it answered, failing the test on a refusal.
    pub async fn ok(&mut self, call: Call) -> Reply {
        let description = format!("{call:?}");
        match self.call(Some(call)).await.reply {
            Some(Reply::Error(failure)) => panic!("{description} was refused: {failure:?}"),
            Some(reply) => reply,
            None => panic!("{description}: an empty answer"),
        }
    }
}

/// A session of `token`'s rank at `url`, with the window `name` open, over a connection whose
/// HTTP/2 windows are 64 KiB (what HTTP/2 allows by default) for a test that reads nothing:
/// what the server holds for it is then its own (tonic's client would take 2 MiB). The client
/// is returned too: the connection must outlive the session's stream.
pub async fn unread_session(
    url: &str,
    token: &str,
    name: &str,
) -> (tonic::client::Grpc<Channel>, RawSession) {
    let channel = tonic::transport::Endpoint::from_shared(url.to_string())
        .unwrap()
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    let (mut session, _) = RawSession::open(&mut grpc, &Meta::bearer(token))
        .await
        .unwrap();
    session.ok(open_window(name)).await;
    (grpc, session)
}

/// The call that opens the window `name`, without its private copy.
pub fn open_window(name: &str) -> Call {
    Call::OpenWindow(v1::OpenWindow {
        name: name.to_string(),
        with_copy: false,
    })
}

/// The marker a client that persists its own events sends: its rows `from..=to`, whose last
/// hash it says is `hash`.
pub fn client_rows(window: u64, from: u64, to: u64, hash: Vec<u8>) -> Call {
    Call::Record(v1::Record {
        window,
        events: Vec::new(),
        rows: Some(v1::ClientRows {
            from,
            to,
            hash: hash.into(),
        }),
    })
}

pub fn contiguous(count: u64) -> Option<v1::Layout> {
    Some(v1::Layout {
        kind: Some(v1::layout::Kind::Contiguous(v1::Contiguous { count })),
    })
}

/// A gRPC call over a bare HTTP/2 stream, with `grpc-timeout: timeout` (tonic's client would
/// also time the call itself, answering CANCELLED before the server's answer arrives). Sends
/// `message` and ends the request, or with `None` keeps it open; returns the messages that
/// arrived before the status, the status, and how long it took.
pub async fn bare_call(
    url: &str,
    path: &str,
    token: &str,
    timeout: &str,
    message: Option<Bytes>,
) -> (Vec<Bytes>, Code, Duration) {
    let (mut client, request, _) = bare_request(url, path, token, Some(timeout)).await;
    let started = Instant::now();
    let (response, mut send) = client.send_request(request, false).unwrap();
    if let Some(message) = message {
        let mut framed = BytesMut::with_capacity(5 + message.len());
        framed.put_u8(0);
        framed.put_u32(message.len() as u32);
        framed.extend_from_slice(&message);
        // the server may have answered already (a deadline past on arrival)
        let _ = send.send_data(framed.freeze(), true);
    }
    let (parts, mut body) = response.await.unwrap().into_parts();
    let status = |headers: &http::HeaderMap| {
        headers
            .get("grpc-status")
            .map(|value| Code::from_bytes(value.as_bytes()))
    };
    if let Some(code) = status(&parts.headers) {
        return (Vec::new(), code, started.elapsed());
    }
    let messages = messages_to_the_end(&mut body).await;
    let trailers = body.trailers().await.unwrap().expect("trailers");
    let took = started.elapsed();
    drop(send);
    (messages, status(&trailers).expect("a grpc-status"), took)
}

/// A bare HTTP/2 connection to `url` (driven by a task of its own, returned) and a gRPC request
/// for `path` with `token` (and `grpc-timeout: timeout` when given), not sent yet: the client
/// sends it (`send_request`, its body left open) when the test is ready to time it.
pub async fn bare_request(
    url: &str,
    path: &str,
    token: &str,
    timeout: Option<&str>,
) -> (
    h2::client::SendRequest<Bytes>,
    http::Request<()>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let address = url.trim_start_matches("http://");
    let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    let connection = tokio::spawn(connection);
    let client = client.ready().await.unwrap();
    let mut request = http::Request::post(format!("{url}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {token}"));
    if let Some(timeout) = timeout {
        request = request.header("grpc-timeout", timeout);
    }
    (client, request.body(()).unwrap(), connection)
}

/// Every gRPC message of `body` until it ends (each a length-prefixed frame), the flow-control
/// window given back as it goes.
async fn messages_to_the_end(body: &mut h2::RecvStream) -> Vec<Bytes> {
    let mut buffer = BytesMut::new();
    let mut messages = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        buffer.extend_from_slice(&chunk);
        while buffer.len() >= 5 {
            let length = u32::from_be_bytes([buffer[1], buffer[2], buffer[3], buffer[4]]) as usize;
            if buffer.len() < 5 + length {
                break;
            }
            buffer.advance(5);
            messages.push(buffer.split_to(length).freeze());
        }
    }
    messages
}

/// A gRPC call over a bare HTTP/2 stream that sends only a length prefix claiming a message of
/// `claimed` bytes and `sent` bytes of it, then keeps the request open without sending more.
/// Returns the status the call ended with (`None` when no answer came within `patience`: the
/// server is waiting for the rest of the message) and the messages that came before it.
pub async fn claim_a_message(
    url: &str,
    path: &str,
    token: &str,
    claimed: u32,
    sent: usize,
    patience: Duration,
) -> Option<(Vec<Bytes>, Status)> {
    let (mut client, request, _) = bare_request(url, path, token, None).await;
    let (response, mut send) = client.send_request(request, false).unwrap();
    let mut framed = BytesMut::with_capacity(5 + sent);
    framed.put_u8(0);
    framed.put_u32(claimed);
    framed.extend_from_slice(&vec![0x0a; sent]);
    send.send_data(framed.freeze(), false).unwrap();
    let answered = tokio::time::timeout(patience, async move {
        let (parts, mut body) = response.await.unwrap().into_parts();
        if parts.headers.contains_key("grpc-status") {
            return (Vec::new(), Status::from_header_map(&parts.headers).unwrap());
        }
        let messages = messages_to_the_end(&mut body).await;
        let trailers = body.trailers().await.unwrap().expect("trailers");
        (
            messages,
            Status::from_header_map(&trailers).expect("a grpc-status"),
        )
    })
    .await
    .ok();
    // the request stays open (not ended, the rest never sent) until the answer is in
    drop(send);
    answered
}
