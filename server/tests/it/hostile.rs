//! A table of malformed and hostile requests, sent as a hostile client would: raw bytes,
//! hand-built messages of the generated types, hand-written metadata. Each row gets its exact
//! gRPC code and MPI class (or none, for refusals of the caller rather than of an MPI call), and
//! after each row the worlds, the windows, the audit log and every rank's public copy are as
//! before, and the hostile session's own epoch state still allows a fresh epoch.

use bytes::Bytes;
use onesided_client::{Audit, ErrorClass, WindowSpec};
use onesided_core::audit::Event;
use onesided_core::layout::MAX_BLOCKS;
use onesided_core::Datatype;
use onesided_proto::v1::client_message::Call;
use onesided_proto::v1::{self, server_message::Reply, ClientMessage, ServerMessage};
use tonic::{Code, Status};

use crate::raw::{contiguous, encode, raw, unary, unary_messages, Meta, RawSession};
use crate::{assert_refused, spawn_server_with, unique, ADMIN_TOKEN};

const CREATE_WORLD: &str = "/onesided.v1.Admin/CreateWorld";
const CREATE_WINDOW: &str = "/onesided.v1.Admin/CreateWindow";
const LIST_WORLDS: &str = "/onesided.v1.Admin/ListWorlds";
const REPLAY: &str = "/onesided.v1.Audit/Replay";
const EXPORT: &str = "/onesided.v1.Audit/Export";
const EVENTS: &str = "/onesided.v1.Audit/Events";
const CLUSTER_STATUS: &str = "/onesided.v1.Admin/ClusterStatus";
const MOVE_WORLD: &str = "/onesided.v1.Admin/MoveWorld";
const HEALTH_CHECK: &str = "/grpc.health.v1.Health/Check";

/// Limits of the server under attack: small enough to reach, large enough for the layouts.
const MAX_MESSAGE: usize = 8 << 20;
const MAX_RANK_BYTES: u64 = 4096;
const MAX_SERVER_BYTES: u64 = 8192;
const MAX_RANKS: u32 = 64;

/// What rank r's public copy of window W holds throughout.
fn pattern(rank: usize) -> Vec<u8> {
    (0..32).map(|i| (rank * 64 + i) as u8 + 1).collect()
}

/// How a row's request travels.
enum Send {
    /// One call on the hostile session (rank 0, window W open, no epoch).
    Call(Option<Call>),
    /// One message as bytes on a fresh session of rank 2 (a new one of rank 0 would supersede
    /// the hostile session): the stream must end with the status.
    SessionBytes(Bytes),
    /// A session opened with this metadata: refused before it starts.
    Attach(Meta),
    /// A unary call with this metadata and body.
    Unary(&'static str, Meta, Bytes),
    /// A unary method called with this metadata and several request messages.
    UnaryMany(&'static str, Meta, Vec<Bytes>),
}

impl Send {
    /// `call` on the hostile session.
    fn call(call: Call) -> Self {
        Send::Call(Some(call))
    }

    /// One RMA operation on the hostile session.
    fn op(op: v1::RmaOp) -> Self {
        Send::call(Call::Op(op))
    }

    /// A unary call of `path` with the admin token and `request`.
    fn admin(path: &'static str, request: &impl prost::Message) -> Self {
        Send::Unary(path, Meta::bearer(ADMIN_TOKEN), encode(request))
    }
}

struct Row {
    name: &'static str,
    send: Send,
    code: Code,
    class: Option<ErrorClass>,
}

/// A row an MPI call refuses: `code`, with the MPI error class `class`.
fn mpi(name: &'static str, send: Send, code: Code, class: ErrorClass) -> Row {
    Row {
        name,
        send,
        code,
        class: Some(class),
    }
}

/// A row refused as a call rather than as an MPI call: `code`, with no MPI error class.
fn refused(name: &'static str, send: Send, code: Code) -> Row {
    Row {
        name,
        send,
        code,
        class: None,
    }
}

/// A well-formed world of `ranks` ranks named `name`.
fn world_request(name: &str, ranks: u32) -> v1::CreateWorldRequest {
    v1::CreateWorldRequest {
        name: name.to_string(),
        ranks,
    }
}

/// A well-formed window of `world` over all its `ranks` ranks, 8 bytes each, for a row to
/// spoil.
fn window_request(world: &str, ranks: usize) -> v1::CreateWindowRequest {
    v1::CreateWindowRequest {
        group: Vec::new(),
        world: world.to_string(),
        name: unique("new"),
        flavor: 0,
        model: 0,
        sizes: vec![8; ranks],
        disp_units: vec![1; ranks],
        info: Vec::new(),
    }
}

/// A well-formed window the ranks create together, 8 bytes each, for a row to spoil.
fn rank_window() -> v1::CreateWindow {
    v1::CreateWindow {
        name: "made".into(),
        size: 8,
        disp_unit: 1,
        ..Default::default()
    }
}

/// An info object of the one entry `key` = `value`.
fn info(key: &str, value: &str) -> Vec<v1::InfoEntry> {
    vec![v1::InfoEntry {
        key: key.to_string(),
        value: value.to_string(),
    }]
}

fn layout(kind: v1::layout::Kind) -> Option<v1::Layout> {
    Some(v1::Layout { kind: Some(kind) })
}

fn vector(count: u64, blocklen: u64, stride: u64) -> Option<v1::Layout> {
    layout(v1::layout::Kind::Vector(v1::Vector {
        count,
        blocklen,
        stride,
    }))
}

fn hvector(count: u64, blocklen: u64, stride_bytes: u64) -> Option<v1::Layout> {
    layout(v1::layout::Kind::Hvector(v1::Hvector {
        count,
        blocklen,
        stride_bytes,
    }))
}

fn indexed(blocks: Vec<v1::Block>) -> Option<v1::Layout> {
    layout(v1::layout::Kind::Indexed(v1::Indexed { blocks }))
}

fn hindexed(blocks: Vec<v1::ByteBlock>) -> Option<v1::Layout> {
    layout(v1::layout::Kind::Hindexed(v1::Hindexed { blocks }))
}

fn subarray(
    sizes: Vec<u64>,
    subsizes: Vec<u64>,
    starts: Vec<u64>,
    order: i32,
) -> Option<v1::Layout> {
    layout(v1::layout::Kind::Subarray(v1::Subarray {
        sizes,
        subsizes,
        starts,
        order,
    }))
}

fn resized(inner: Option<v1::Layout>, lb: i64, extent: u64, count: u64) -> Option<v1::Layout> {
    layout(v1::layout::Kind::Resized(Box::new(v1::Resized {
        inner: inner.map(Box::new),
        lb,
        extent,
        count,
    })))
}

/// A struct of blocks (offset, datatype, len).
fn structure(blocks: &[(u64, i32, u64)]) -> Option<v1::Layout> {
    layout(v1::layout::Kind::Struct(v1::Struct {
        blocks: blocks
            .iter()
            .map(|&(offset, datatype, len)| v1::StructBlock {
                offset,
                datatype,
                len,
            })
            .collect(),
    }))
}

/// A get of `layout` (of bytes) from rank `target`'s copy of `window`, at displacement 0.
fn get_op(window: u64, target: u32, layout: Option<v1::Layout>) -> v1::RmaOp {
    v1::RmaOp {
        window,
        target,
        kind: v1::OpKind::Get as i32,
        datatype: Datatype::Byte.code(),
        op: 0,
        disp: 0,
        layout,
        data: Bytes::new(),
        compare: Bytes::new(),
        request_based: false,
        token: 0,
    }
}

/// Everything a row must leave as it was (the public copies are checked by the probe).
#[derive(Debug, PartialEq)]
struct Snapshot {
    worlds: Vec<onesided_client::WorldSummary>,
    windows: Vec<Vec<onesided_client::WindowDesc>>,
    recorded: Vec<onesided_client::RecordedWindow>,
}

fn failure_of(reply: ServerMessage) -> Option<(Code, Option<ErrorClass>)> {
    let failures: Vec<v1::MpiFailure> = match reply.reply {
        Some(Reply::Error(failure)) => vec![failure],
        Some(Reply::Batched(batched)) => batched
            .replies
            .into_iter()
            .filter_map(|reply| match reply.reply {
                Some(Reply::Error(failure)) => Some(failure),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let [failure] = failures.as_slice() else {
        return None;
    };
    let message = failure
        .error
        .as_ref()
        .map_or(0, |error| error.message.len());
    assert!(
        message <= MAX_STATUS_MESSAGE,
        "a failure message of {message} bytes"
    );
    let class = failure
        .error
        .as_ref()
        .and_then(|error| ErrorClass::from_code(error.class));
    Some((Code::from_i32(failure.code), class))
}

fn outcome(status: &Status) -> (Code, Option<ErrorClass>) {
    assert!(
        status.message().len() <= MAX_STATUS_MESSAGE,
        "a status message of {} bytes",
        status.message().len()
    );
    (
        status.code(),
        onesided_proto::rma_from_status(status).map(|error| error.class),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hostile_request_gets_its_status_and_changes_nothing() {
    let server = spawn_server_with(|config| {
        config.limits.max_message_bytes = MAX_MESSAGE;
        config.limits.max_window_bytes_per_rank = MAX_RANK_BYTES;
        config.limits.max_window_bytes = MAX_SERVER_BYTES;
        config.limits.max_ranks_per_world = MAX_RANKS;
    })
    .await;
    let admin = &server.admin;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let world = unique("world");
    let tokens = admin.create_world(&world, 3).await.unwrap().tokens;
    let w_name = unique("w");
    admin
        .create_window(&world, &WindowSpec::of::<i64>(&w_name, 3, 4))
        .await
        .unwrap();
    let other = unique("other");
    let other_tokens = admin.create_world(&other, 2).await.unwrap().tokens;
    let v_name = unique("v");
    let v = admin
        .create_window(&other, &WindowSpec::of::<i64>(&v_name, 2, 2))
        .await
        .unwrap();
    let doomed = unique("doomed");
    let doomed_token = admin.create_world(&doomed, 1).await.unwrap().tokens[0].clone();
    admin.delete_world(&doomed).await.unwrap();

    let mut grpc = raw(&server.url).await;
    let rank0 = Meta::bearer(&tokens[0]);
    let rank2 = Meta::bearer(&tokens[2]);
    let admin_meta = Meta::bearer(ADMIN_TOKEN);
    let wrong = Meta::bearer("not-a-token");
    let (mut hostile, _) = RawSession::open(&mut grpc, &rank0).await.unwrap();
    let w = hostile.open_window(&w_name).await;
    // a dynamic window, with one region of 64 bytes attached by the hostile rank
    let d_name = unique("d");
    admin
        .create_window(
            &world,
            &WindowSpec::bytes(&d_name, 3, 0, 1).flavor(onesided_client::Flavor::Dynamic),
        )
        .await
        .unwrap();
    let d = hostile.open_window(&d_name).await;
    let Reply::Region(region) = hostile
        .ok(Call::Attach(v1::Attach {
            window: d,
            size: 64,
            at: 0,
        }))
        .await
    else {
        panic!("attach answered without a region");
    };
    let base = region.base;
    let byte = Datatype::Byte.code();
    let i64_code = Datatype::I64.code();
    let f64_code = Datatype::F64.code();
    let get = |target: u32, layout: Option<v1::Layout>| get_op(w, target, layout);
    let put = |target: u32, data: Vec<u8>| v1::RmaOp {
        kind: v1::OpKind::Put as i32,
        layout: contiguous(data.len() as u64),
        data: data.into(),
        ..get(target, None)
    };
    let lock_all = || {
        Call::LockAll(v1::LockAll {
            window: w,
            assert: 0,
        })
    };
    let unlock_all = || {
        Call::UnlockAll(v1::UnlockAll {
            window: w,
            push: Vec::new(),
        })
    };
    // every rank's public copy holds its pattern
    hostile.ok(lock_all()).await;
    for target in 0..3u32 {
        hostile
            .ok(Call::Op(put(target, pattern(target as usize))))
            .await;
    }
    hostile.ok(unlock_all()).await;

    let with_i64 = |mut op: v1::RmaOp| {
        op.datatype = i64_code;
        op
    };
    // an admin CreateWindow of `request`, refused by MPI with INVALID_ARGUMENT and `class`
    let bad_window = |name, request: v1::CreateWindowRequest, class| {
        mpi(
            name,
            Send::admin(CREATE_WINDOW, &request),
            Code::InvalidArgument,
            class,
        )
    };
    // a get of rank 1 through `layout`, refused by MPI with INVALID_ARGUMENT and `class`
    let bad_layout =
        |name, layout, class| mpi(name, Send::op(get(1, layout)), Code::InvalidArgument, class);
    let session_message = |call: Call| {
        encode(&ClientMessage {
            id: 1,
            call: Some(call),
        })
    };
    let oversized = vec![7u8; MAX_MESSAGE + 1];
    // field 2 (ranks, a varint) sent length-delimited
    let wrong_wire_type = Bytes::from_static(&[0x12, 0x01, 0x00]);
    let garbage = Bytes::from_static(&[0xff; 16]);
    let record = |window: u64, events: Vec<String>| {
        Send::call(Call::Record(v1::Record {
            window,
            events,
            rows: None,
        }))
    };
    let store = |ranges| Event::Store { ranges }.to_json();
    let load = |ranges| Event::Load { ranges }.to_json();
    let client_rows = |window: u64, from: u64, to: u64, hash: usize| {
        Send::call(crate::raw::client_rows(window, from, to, vec![0xab; hash]))
    };
    // rank 2's session, with the claim `key` sent twice
    let claimed_twice = |key, first: &str, second: &str| {
        Send::Attach(rank2.clone().with(key, first).with(key, second))
    };
    let attach =
        |window: u64, size: u64, at: u64| Send::call(Call::Attach(v1::Attach { window, size, at }));
    let detach = |window: u64, base: u64| Send::call(Call::Detach(v1::Detach { window, base }));
    let created_by_ranks = |window: v1::CreateWindow| Send::call(Call::CreateWindow(window));
    let store_event = store(vec![(0, 8)]);

    let rows = {
        use Code::*;
        use ErrorClass as C;
        vec![
            // ---- credentials come first ----
            refused(
                "admin call without credentials",
                Send::Unary(LIST_WORLDS, Meta::default(), Bytes::new()),
                Unauthenticated,
            ),
            refused(
                "admin call with a Basic scheme",
                Send::Unary(
                    LIST_WORLDS,
                    Meta::default().with("authorization", &format!("Basic {ADMIN_TOKEN}")),
                    Bytes::new(),
                ),
                Unauthenticated,
            ),
            refused(
                "a wrong admin token creating a world",
                Send::Unary(
                    CREATE_WORLD,
                    wrong.clone(),
                    encode(&world_request("intruder", 2)),
                ),
                Unauthenticated,
            ),
            refused(
                "a wrong token with a body that is not protobuf",
                Send::Unary(CREATE_WORLD, wrong.clone(), garbage.clone()),
                Unauthenticated,
            ),
            refused(
                "a wrong token with a message over the size limit",
                Send::Unary(CREATE_WORLD, wrong.clone(), oversized.clone().into()),
                Unauthenticated,
            ),
            refused(
                "a rank token on the admin service",
                Send::Unary(
                    CREATE_WORLD,
                    rank0.clone(),
                    encode(&world_request("mine", 2)),
                ),
                PermissionDenied,
            ),
            refused(
                "a rank token on the audit service",
                Send::Unary(
                    REPLAY,
                    rank0.clone(),
                    encode(&v1::ReplayRequest { window: w, at: 0 }),
                ),
                PermissionDenied,
            ),
            refused(
                "the admin token attaching as a rank",
                Send::Attach(admin_meta.clone()),
                PermissionDenied,
            ),
            refused(
                "an unknown rank token",
                Send::Attach(wrong.clone()),
                Unauthenticated,
            ),
            refused(
                "the token of a deleted world",
                Send::Attach(Meta::bearer(&doomed_token)),
                Unauthenticated,
            ),
            refused(
                "a rank token without the Bearer scheme",
                Send::Attach(Meta::default().with("authorization", &tokens[0])),
                Unauthenticated,
            ),
            refused(
                "rank 1's token claiming to be rank 0",
                Send::Attach(Meta::bearer(&tokens[1]).with("x-onesided-rank", "0")),
                PermissionDenied,
            ),
            refused(
                "a token claiming another world",
                Send::Attach(Meta::bearer(&other_tokens[0]).with("x-onesided-world", &world)),
                PermissionDenied,
            ),
            refused(
                "a claim of a world named by 8 000 characters",
                Send::Attach(rank0.clone().with("x-onesided-world", &"w".repeat(8_000))),
                PermissionDenied,
            ),
            mpi(
                "a rank claim of 8 000 digits",
                Send::Attach(rank0.clone().with("x-onesided-rank", &"9".repeat(8_000))),
                InvalidArgument,
                C::Rank,
            ),
            mpi(
                "a rank claim that is not a number",
                Send::Attach(rank0.clone().with("x-onesided-rank", "zero")),
                InvalidArgument,
                C::Rank,
            ),
            refused(
                "a wrong token with a malformed claim",
                Send::Attach(wrong.clone().with("x-onesided-rank", "zero")),
                Unauthenticated,
            ),
            // a credential or claim sent twice is refused, not taken first-wins (a proxy in
            // front may have checked the other one)
            refused(
                "a session with two authorization entries",
                Send::Attach(rank2.clone().with("authorization", "Bearer not-a-token")),
                Unauthenticated,
            ),
            refused(
                "a session with the same authorization entry twice",
                Send::Attach(
                    rank2
                        .clone()
                        .with("authorization", &format!("Bearer {}", tokens[2])),
                ),
                Unauthenticated,
            ),
            refused(
                "an admin call with two authorization entries",
                Send::Unary(
                    LIST_WORLDS,
                    admin_meta
                        .clone()
                        .with("authorization", "Bearer not-a-token"),
                    Bytes::new(),
                ),
                Unauthenticated,
            ),
            mpi(
                "a rank claimed twice",
                claimed_twice("x-onesided-rank", "2", "0"),
                InvalidArgument,
                C::Rank,
            ),
            mpi(
                "a rank claimed twice alike",
                claimed_twice("x-onesided-rank", "2", "2"),
                InvalidArgument,
                C::Rank,
            ),
            mpi(
                "a world claimed twice",
                claimed_twice("x-onesided-world", &world, &other),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "a session coming back that names no incarnation",
                Send::Attach(rank0.clone().with("x-onesided-succeeds", "first")),
                InvalidArgument,
                C::Arg,
            ),
            // the hostile session is rank 0's incarnation 1: one that says it lost incarnation
            // 0 must not take the rank from it
            mpi(
                "a session coming back after a newer incarnation attached",
                Send::Attach(rank0.clone().with("x-onesided-succeeds", "0")),
                Aborted,
                C::Other,
            ),
            // ---- limits ----
            mpi(
                "a session message over the size limit",
                Send::SessionBytes(session_message(Call::Op(put(1, oversized.clone())))),
                ResourceExhausted,
                C::NoMem,
            ),
            mpi(
                "an admin message over the size limit",
                Send::admin(CREATE_WORLD, &world_request(&"x".repeat(MAX_MESSAGE), 2)),
                ResourceExhausted,
                C::NoMem,
            ),
            mpi(
                "a world over the limit of ranks",
                Send::admin(CREATE_WORLD, &world_request(&unique("big"), MAX_RANKS + 1)),
                ResourceExhausted,
                C::NoMem,
            ),
            mpi(
                "a rank's window over the per-rank limit",
                Send::admin(
                    CREATE_WINDOW,
                    &v1::CreateWindowRequest {
                        sizes: vec![MAX_RANK_BYTES + 1, 8, 8],
                        ..window_request(&world, 3)
                    },
                ),
                ResourceExhausted,
                C::NoMem,
            ),
            mpi(
                "windows over the server's limit of bytes",
                Send::admin(
                    CREATE_WINDOW,
                    &v1::CreateWindowRequest {
                        sizes: vec![MAX_RANK_BYTES; 3],
                        ..window_request(&world, 3)
                    },
                ),
                ResourceExhausted,
                C::NoMem,
            ),
            // ---- bytes that are not the message they claim to be (gRPC: INTERNAL) ----
            refused(
                "an admin body that is not protobuf",
                Send::Unary(CREATE_WORLD, admin_meta.clone(), garbage.clone()),
                Internal,
            ),
            refused(
                "a field of the wrong wire type",
                Send::Unary(CREATE_WORLD, admin_meta.clone(), wrong_wire_type),
                Internal,
            ),
            refused(
                "a session message that is not protobuf",
                Send::SessionBytes(garbage.clone()),
                Internal,
            ),
            // ---- what a refusal echoes is bounded ----
            mpi(
                "a world name of 20 000 characters",
                Send::admin(CREATE_WORLD, &world_request(&"n".repeat(20_000), 2)),
                InvalidArgument,
                C::Arg,
            ),
            bad_window(
                "a window name of 20 000 characters",
                v1::CreateWindowRequest {
                    name: "n".repeat(20_000),
                    ..window_request(&world, 3)
                },
                C::Arg,
            ),
            bad_window(
                "a window whose group names a rank twice",
                v1::CreateWindowRequest {
                    group: vec![1, 1],
                    name: "twice".into(),
                    ..window_request(&world, 2)
                },
                C::Group,
            ),
            bad_window(
                "a window whose group names a rank outside the world",
                v1::CreateWindowRequest {
                    group: vec![0, 4_000_000_000],
                    name: "outside".into(),
                    ..window_request(&world, 2)
                },
                C::Group,
            ),
            bad_window(
                "a dynamic window with memory at creation",
                v1::CreateWindowRequest {
                    flavor: v1::Flavor::Dynamic as i32,
                    sizes: vec![0, 8, 0],
                    ..window_request(&world, 3)
                },
                C::Size,
            ),
            bad_window(
                "a dynamic window with a disp_unit other than 1",
                v1::CreateWindowRequest {
                    flavor: v1::Flavor::Dynamic as i32,
                    sizes: vec![0; 3],
                    disp_units: vec![1, 8, 1],
                    ..window_request(&world, 3)
                },
                C::Disp,
            ),
            bad_window(
                "same_size=true with ranks of different sizes",
                v1::CreateWindowRequest {
                    sizes: vec![8, 8, 16],
                    info: info("same_size", "true"),
                    ..window_request(&world, 3)
                },
                C::Info,
            ),
            bad_window(
                "same_disp_unit=true with ranks of different disp_units",
                v1::CreateWindowRequest {
                    disp_units: vec![1, 8, 1],
                    info: info("same_disp_unit", "true"),
                    ..window_request(&world, 3)
                },
                C::Info,
            ),
            mpi(
                "an export format of 20 000 characters",
                Send::admin(
                    EXPORT,
                    &v1::ExportRequest {
                        window: w,
                        format: "f".repeat(20_000),
                    },
                ),
                InvalidArgument,
                C::Arg,
            ),
            // ---- cluster calls on a server that is not part of a cluster ----
            refused(
                "the cluster's status from a single server",
                Send::admin(CLUSTER_STATUS, &v1::ClusterStatusRequest {}),
                FailedPrecondition,
            ),
            refused(
                "moving a world on a single server",
                Send::admin(
                    MOVE_WORLD,
                    &v1::MoveWorldRequest {
                        world: world.clone(),
                        node_id: "elsewhere".into(),
                    },
                ),
                FailedPrecondition,
            ),
            mpi(
                "opening a window named by 20 000 characters",
                Send::call(Call::OpenWindow(v1::OpenWindow {
                    name: "n".repeat(20_000),
                    with_copy: false,
                })),
                NotFound,
                C::Win,
            ),
            // ---- a unary method takes exactly one request message (gRPC: a cardinality
            // violation is UNIMPLEMENTED) ----
            refused(
                "two worlds in one CreateWorld call",
                Send::UnaryMany(
                    CREATE_WORLD,
                    admin_meta.clone(),
                    vec![
                        encode(&world_request(&unique("first"), 2)),
                        encode(&world_request(&unique("second"), 2)),
                    ],
                ),
                Unimplemented,
            ),
            refused(
                "two windows in one CreateWindow call",
                Send::UnaryMany(
                    CREATE_WINDOW,
                    admin_meta.clone(),
                    vec![
                        encode(&window_request(&world, 3)),
                        encode(&window_request(&world, 3)),
                    ],
                ),
                Unimplemented,
            ),
            refused(
                "a request followed by garbage in one ListWorlds call",
                Send::UnaryMany(
                    LIST_WORLDS,
                    admin_meta.clone(),
                    vec![Bytes::new(), garbage.clone()],
                ),
                Unimplemented,
            ),
            refused(
                "two requests in one Replay call",
                Send::UnaryMany(
                    REPLAY,
                    admin_meta.clone(),
                    vec![
                        encode(&v1::ReplayRequest { window: w, at: 0 }),
                        encode(&v1::ReplayRequest { window: w, at: 1 }),
                    ],
                ),
                Unimplemented,
            ),
            refused(
                "two requests opening one Events stream",
                Send::UnaryMany(
                    EVENTS,
                    admin_meta.clone(),
                    vec![
                        encode(&v1::EventsRequest {
                            window: w,
                            from: 1,
                            follow: false,
                        });
                        2
                    ],
                ),
                Unimplemented,
            ),
            refused(
                "two requests in one health check",
                Send::UnaryMany(
                    HEALTH_CHECK,
                    Meta::default(),
                    vec![Bytes::new(), Bytes::new()],
                ),
                Unimplemented,
            ),
            refused(
                "a wrong token with two requests",
                Send::UnaryMany(
                    CREATE_WORLD,
                    wrong.clone(),
                    vec![
                        encode(&world_request(&unique("first"), 2)),
                        encode(&world_request(&unique("second"), 2)),
                    ],
                ),
                Unauthenticated,
            ),
            // ---- unknown enums ----
            bad_window(
                "an unknown window flavor",
                v1::CreateWindowRequest {
                    flavor: 99,
                    ..window_request(&world, 3)
                },
                C::Arg,
            ),
            bad_window(
                "an unknown memory model",
                v1::CreateWindowRequest {
                    model: 5,
                    ..window_request(&world, 3)
                },
                C::Arg,
            ),
            mpi(
                "an unspecified lock type",
                Send::call(Call::Lock(v1::Lock {
                    window: w,
                    lock_type: 0,
                    target: 1,
                    assert: 0,
                })),
                InvalidArgument,
                C::LockType,
            ),
            mpi(
                "an unknown operation kind",
                Send::op(v1::RmaOp {
                    kind: 42,
                    ..get(1, contiguous(1))
                }),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "an unspecified operation kind",
                Send::op(v1::RmaOp {
                    kind: 0,
                    ..get(1, contiguous(1))
                }),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "a negative datatype",
                Send::op(v1::RmaOp {
                    datatype: -1,
                    ..get(1, contiguous(1))
                }),
                InvalidArgument,
                C::Type,
            ),
            mpi(
                "an unknown reduction op",
                Send::op(v1::RmaOp {
                    kind: v1::OpKind::Accumulate as i32,
                    op: 99,
                    ..with_i64(put(1, vec![0; 8]))
                }),
                InvalidArgument,
                C::Op,
            ),
            // ---- layouts, counts, displacements ----
            bad_layout("an operation without a layout", None, C::Type),
            bad_layout(
                "a layout without a kind",
                Some(v1::Layout { kind: None }),
                C::Type,
            ),
            mpi(
                "a put whose data is shorter than its layout",
                Send::op(v1::RmaOp {
                    layout: contiguous(2),
                    ..with_i64(put(1, vec![0; 8]))
                }),
                InvalidArgument,
                C::Count,
            ),
            bad_layout(
                "a vector whose count × blocklen overflows",
                vector(2, u64::MAX, 1),
                C::Count,
            ),
            bad_layout(
                "a vector whose stride overflows",
                vector(3, 1, u64::MAX),
                C::Count,
            ),
            mpi(
                "an indexed block past the end of u64",
                Send::op(with_i64(get(
                    1,
                    indexed(vec![v1::Block {
                        disp: u64::MAX / 4,
                        len: 1,
                    }]),
                ))),
                InvalidArgument,
                C::Count,
            ),
            bad_layout(
                "more indexed blocks than the limit",
                indexed(vec![v1::Block { disp: 0, len: 1 }; MAX_BLOCKS + 1]),
                C::Count,
            ),
            bad_layout(
                "an hvector whose stride overflows",
                hvector(3, 1, u64::MAX / 2 + 1),
                C::Count,
            ),
            bad_layout(
                "more hindexed blocks than the limit",
                hindexed(vec![v1::ByteBlock { offset: 0, len: 1 }; MAX_BLOCKS + 1]),
                C::Count,
            ),
            bad_layout(
                "a subarray whose start + subsize passes its size",
                subarray(vec![2, 2], vec![1, 2], vec![0, 1], 0),
                C::Arg,
            ),
            bad_layout(
                "a subarray of an unknown storage order",
                subarray(vec![2], vec![1], vec![0], 7),
                C::Arg,
            ),
            bad_layout(
                "a subarray of more rows than the block limit",
                subarray(
                    vec![1 << 11, 1 << 11, 1],
                    vec![1 << 11, 1 << 11, 1],
                    vec![0; 3],
                    1,
                ),
                C::Count,
            ),
            bad_layout(
                "a resized layout without an inner layout",
                resized(None, 0, 8, 1),
                C::Type,
            ),
            bad_layout(
                "a resized layout whose lb + extent passes i64",
                resized(contiguous(1), 1, i64::MAX as u64, 1),
                C::Count,
            ),
            bad_layout(
                "a resized layout whose extent passes i64",
                resized(contiguous(1), 0, u64::MAX, 1),
                C::Count,
            ),
            bad_layout(
                "a resized layout whose copies pass the end of u64",
                resized(contiguous(1), 0, i64::MAX as u64, 4),
                C::Count,
            ),
            bad_layout(
                "a resized layout of more copies than the block limit",
                resized(contiguous(1), 0, 1, MAX_BLOCKS as u64 + 1),
                C::Count,
            ),
            bad_layout(
                "a resized layout of u64::MAX copies of an indexed layout with no blocks",
                resized(indexed(Vec::new()), 0, 0, u64::MAX),
                C::Count,
            ),
            bad_layout(
                "a resized layout of u64::MAX copies of a vector",
                resized(vector(2, 1, 2), 0, 4, u64::MAX),
                C::Count,
            ),
            bad_layout(
                "a resized layout of an inner subarray MPI refuses",
                resized(subarray(vec![2], vec![3], vec![0], 0), 0, 8, 2),
                C::Arg,
            ),
            mpi(
                "a resized layout whose last copy is past the window",
                Send::op(get(1, resized(contiguous(1), -4, 8, 5))),
                OutOfRange,
                C::RmaRange,
            ),
            mpi(
                "a put through a resized layout whose copies overlap",
                Send::op(v1::RmaOp {
                    layout: resized(contiguous(1), 0, 0, 2),
                    ..put(1, vec![7; 2])
                }),
                InvalidArgument,
                C::Type,
            ),
            bad_layout(
                "a struct block of an unknown datatype",
                structure(&[(0, 99, 1)]),
                C::Type,
            ),
            bad_layout(
                "a struct block of no datatype",
                structure(&[(0, byte, 1), (4, 0, 1)]),
                C::Type,
            ),
            bad_layout(
                "more struct blocks than the limit",
                structure(&vec![(0, byte, 1); MAX_BLOCKS + 1]),
                C::Count,
            ),
            bad_layout(
                "a struct block whose bytes overflow",
                structure(&[(0, f64_code, u64::MAX / 4)]),
                C::Count,
            ),
            bad_layout(
                "a struct block past the end of u64",
                structure(&[(u64::MAX, i64_code, 1)]),
                C::Count,
            ),
            mpi(
                "a struct block past the window",
                Send::op(get(1, structure(&[(0, byte, 1), (28, i64_code, 1)]))),
                OutOfRange,
                C::RmaRange,
            ),
            mpi(
                "a struct put whose data is not its blocks' bytes",
                Send::op(v1::RmaOp {
                    layout: structure(&[(0, byte, 1), (8, i64_code, 1)]),
                    ..put(1, vec![7; 8])
                }),
                InvalidArgument,
                C::Count,
            ),
            mpi(
                "an accumulate through a struct of mixed datatypes",
                Send::op(v1::RmaOp {
                    kind: v1::OpKind::Accumulate as i32,
                    op: v1::Op::Sum as i32,
                    layout: structure(&[(0, i64_code, 1), (8, f64_code, 1)]),
                    ..with_i64(put(1, vec![7; 16]))
                }),
                InvalidArgument,
                C::Type,
            ),
            mpi(
                "a get_accumulate through a struct of another datatype",
                Send::op(v1::RmaOp {
                    kind: v1::OpKind::GetAccumulate as i32,
                    op: v1::Op::NoOp as i32,
                    ..with_i64(get(1, structure(&[(0, Datatype::U64.code(), 2)])))
                }),
                InvalidArgument,
                C::Type,
            ),
            mpi(
                "a fetch_and_op through a struct of another datatype",
                Send::op(v1::RmaOp {
                    kind: v1::OpKind::FetchAndOp as i32,
                    op: v1::Op::Sum as i32,
                    layout: structure(&[(8, f64_code, 1)]),
                    ..with_i64(put(1, vec![7; 8]))
                }),
                InvalidArgument,
                C::Type,
            ),
            mpi(
                "a count whose bytes overflow",
                Send::op(with_i64(get(1, contiguous(u64::MAX)))),
                InvalidArgument,
                C::Count,
            ),
            mpi(
                "a displacement × disp_unit that overflows",
                Send::op(v1::RmaOp {
                    disp: u64::MAX,
                    ..with_i64(get(1, contiguous(1)))
                }),
                OutOfRange,
                C::RmaRange,
            ),
            mpi(
                "a get of a terabyte",
                Send::op(get(1, contiguous(1 << 40))),
                OutOfRange,
                C::RmaRange,
            ),
            mpi(
                "compare_and_swap without a compare value",
                Send::op(v1::RmaOp {
                    kind: v1::OpKind::CompareAndSwap as i32,
                    layout: contiguous(1),
                    ..with_i64(put(1, vec![0; 8]))
                }),
                InvalidArgument,
                C::Count,
            ),
            mpi(
                "fetch_and_op of two elements",
                Send::op(v1::RmaOp {
                    kind: v1::OpKind::FetchAndOp as i32,
                    op: onesided_core::Op::Sum.code(),
                    layout: contiguous(2),
                    ..with_i64(put(1, vec![0; 16]))
                }),
                InvalidArgument,
                C::Count,
            ),
            mpi(
                "a bitwise accumulate on floats",
                Send::op(v1::RmaOp {
                    kind: v1::OpKind::GetAccumulate as i32,
                    datatype: Datatype::F32.code(),
                    op: onesided_core::Op::Band.code(),
                    layout: contiguous(1),
                    ..put(1, vec![0; 4])
                }),
                InvalidArgument,
                C::Op,
            ),
            mpi(
                "an operation on a rank outside the group",
                Send::op(get(u32::MAX, contiguous(1))),
                InvalidArgument,
                C::Rank,
            ),
            mpi(
                "a lock of a rank outside the group",
                Send::call(Call::Lock(v1::Lock {
                    window: w,
                    lock_type: v1::LockType::Shared as i32,
                    target: 3,
                    assert: 0,
                })),
                InvalidArgument,
                C::Rank,
            ),
            mpi(
                "a fence with every assert bit set",
                Send::call(Call::Fence(v1::Fence {
                    window: w,
                    assert: u32::MAX,
                    push: Vec::new(),
                })),
                InvalidArgument,
                C::Assert,
            ),
            mpi(
                "a post group naming a rank outside",
                Send::call(Call::Post(v1::Post {
                    window: w,
                    group: vec![1, 99],
                    assert: 0,
                    push: Vec::new(),
                })),
                InvalidArgument,
                C::Rank,
            ),
            mpi(
                "a start group naming a rank twice",
                Send::call(Call::Start(v1::Start {
                    window: w,
                    group: vec![2, 2],
                    assert: 0,
                })),
                InvalidArgument,
                C::Group,
            ),
            mpi(
                "pushed bytes whose end overflows",
                Send::call(Call::Fence(v1::Fence {
                    window: w,
                    assert: 0,
                    push: vec![v1::Segment {
                        offset: u64::MAX,
                        data: Bytes::from_static(&[1]),
                    }],
                })),
                OutOfRange,
                C::RmaRange,
            ),
            // ---- messages the protocol does not allow ----
            mpi(
                "a message without a call",
                Send::Call(None),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "a batch inside a batch",
                Send::call(Call::Batch(v1::Batch {
                    calls: vec![ClientMessage {
                        id: 1000,
                        call: Some(Call::Batch(v1::Batch::default())),
                    }],
                })),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "recording an event only the server records",
                record(w, vec![Event::Sync.to_json()]),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "recording a body that is not an event",
                record(w, vec!["{".to_string()]),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "recording a store over bytes [0, 2^64-1) of a 32-byte copy",
                record(w, vec![store(vec![(0, u64::MAX)])]),
                OutOfRange,
                C::RmaRange,
            ),
            mpi(
                "recording a load just past the private copy",
                record(w, vec![load(vec![(0, 8), (24, 33)])]),
                OutOfRange,
                C::RmaRange,
            ),
            mpi(
                "recording a reversed byte range",
                record(w, vec![store(vec![(16, 8)])]),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "recording a flush_local naming a rank outside the window",
                record(w, vec![Event::FlushLocal { target: Some(3) }.to_json()]),
                InvalidArgument,
                C::Rank,
            ),
            mpi(
                "recording 1025 events in one message",
                record(w, vec![store_event.clone(); 1025]),
                ResourceExhausted,
                C::NoMem,
            ),
            mpi(
                "recording 65 537 byte ranges in one message",
                record(w, vec![load((0..65_537).map(|_| (0, 1)).collect())]),
                ResourceExhausted,
                C::NoMem,
            ),
            mpi(
                "client rows that skip ahead of the session's chain",
                client_rows(w, 2, 3, 32),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "client rows ending at the last possible cseq",
                client_rows(w, 1, u64::MAX, 32),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "client rows whose hash is not 32 bytes",
                client_rows(w, 1, 1, 31),
                InvalidArgument,
                C::Arg,
            ),
            // ---- another world's windows do not exist for this session ----
            mpi(
                "recording on another world's window",
                record(v.id, vec![store_event.clone()]),
                NotFound,
                C::Win,
            ),
            mpi(
                "an operation on another world's window",
                Send::op(v1::RmaOp {
                    window: v.id,
                    ..get(1, contiguous(1))
                }),
                NotFound,
                C::Win,
            ),
            mpi(
                "opening another world's window by name",
                Send::call(Call::OpenWindow(v1::OpenWindow {
                    name: v_name.clone(),
                    with_copy: false,
                })),
                NotFound,
                C::Win,
            ),
            mpi(
                "freeing another world's window",
                Send::call(Call::WinFree(v1::WinFree { window: v.id })),
                NotFound,
                C::Win,
            ),
            mpi(
                "set_info on another world's window",
                Send::call(Call::SetInfo(v1::SetInfo {
                    window: v.id,
                    info: Vec::new(),
                })),
                NotFound,
                C::Win,
            ),
            mpi(
                "a dynamic window created by the ranks with memory",
                created_by_ranks(v1::CreateWindow {
                    flavor: v1::Flavor::Dynamic as i32,
                    ..rank_window()
                }),
                InvalidArgument,
                C::Size,
            ),
            mpi(
                "a dynamic window created by the ranks with disp_unit 8",
                created_by_ranks(v1::CreateWindow {
                    size: 0,
                    disp_unit: 8,
                    flavor: v1::Flavor::Dynamic as i32,
                    ..rank_window()
                }),
                InvalidArgument,
                C::Disp,
            ),
            mpi(
                "a window created by the ranks with an info value MPI cannot mean",
                created_by_ranks(v1::CreateWindow {
                    info: info("no_locks", "perhaps"),
                    ..rank_window()
                }),
                InvalidArgument,
                C::Info,
            ),
            mpi(
                "a window created by the ranks over a group without the caller",
                created_by_ranks(v1::CreateWindow {
                    group: vec![1, 2],
                    ..rank_window()
                }),
                InvalidArgument,
                C::Group,
            ),
            mpi(
                "a window created by the ranks over a group naming a rank twice",
                created_by_ranks(v1::CreateWindow {
                    group: vec![0, 0],
                    ..rank_window()
                }),
                InvalidArgument,
                C::Group,
            ),
            mpi(
                "publishing stores to a window of the separate model",
                Send::call(Call::Publish(v1::Publish {
                    window: w,
                    push: vec![v1::Segment {
                        offset: 0,
                        data: Bytes::from_static(&[9]),
                    }],
                    seq: 1,
                })),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "attaching memory to a window that is not dynamic",
                attach(w, 8, 0),
                FailedPrecondition,
                C::RmaFlavor,
            ),
            mpi(
                "detaching memory from a window that is not dynamic",
                detach(w, base),
                FailedPrecondition,
                C::RmaFlavor,
            ),
            mpi(
                "a message to a rank outside the world",
                Send::call(Call::Send(v1::Send {
                    dest: 1000,
                    tag: 0,
                    context: 0,
                    payload: Bytes::from_static(b"x"),
                })),
                InvalidArgument,
                C::Rank,
            ),
            mpi(
                "a message with a negative tag",
                Send::call(Call::Send(v1::Send {
                    dest: 0,
                    tag: -7,
                    context: 0,
                    payload: Bytes::from_static(b"x"),
                })),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "a receive from a rank outside the world",
                Send::call(Call::Receive(v1::Receive {
                    source: u32::MAX,
                    ..Default::default()
                })),
                InvalidArgument,
                C::Rank,
            ),
            mpi(
                "an immediate receive that is not a probe",
                Send::call(Call::Receive(v1::Receive {
                    any_source: true,
                    any_tag: true,
                    immediate: true,
                    ..Default::default()
                })),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "attaching memory to another world's window",
                attach(v.id, 8, 0),
                NotFound,
                C::Win,
            ),
            mpi(
                "attaching a region that overlaps one attached",
                attach(d, 8, base + 60),
                ResourceExhausted,
                C::RmaAttach,
            ),
            mpi(
                "attaching a region below the first address",
                attach(d, 8, 8),
                ResourceExhausted,
                C::RmaAttach,
            ),
            mpi(
                "attaching more than a rank may expose",
                attach(d, MAX_RANK_BYTES, 0),
                ResourceExhausted,
                C::RmaAttach,
            ),
            mpi(
                "attaching a region at an address so high its end overflows",
                attach(d, 8, u64::MAX - 4),
                ResourceExhausted,
                C::RmaAttach,
            ),
            mpi(
                "detaching an address inside a region, not its start",
                detach(d, base + 8),
                ResourceExhausted,
                C::RmaAttach,
            ),
            mpi(
                "detaching address 0",
                detach(d, 0),
                ResourceExhausted,
                C::RmaAttach,
            ),
            mpi(
                "following the public copy of a window of the separate model",
                Send::call(Call::Follow(v1::Follow { window: w })),
                InvalidArgument,
                C::Arg,
            ),
            mpi(
                "publishing stores to another world's window",
                Send::call(Call::Publish(v1::Publish {
                    window: v.id,
                    push: Vec::new(),
                    seq: 1,
                })),
                NotFound,
                C::Win,
            ),
            mpi(
                "set_info with a value MPI cannot mean",
                Send::call(Call::SetInfo(v1::SetInfo {
                    window: w,
                    info: info("accumulate_ops", "any"),
                })),
                InvalidArgument,
                C::Info,
            ),
            mpi(
                "set_info with a key over MPI_MAX_INFO_KEY",
                Send::call(Call::SetInfo(v1::SetInfo {
                    window: w,
                    info: info(&"k".repeat(300), ""),
                })),
                InvalidArgument,
                C::Info,
            ),
            mpi(
                "a fence on a window id that never existed",
                Send::call(Call::Fence(v1::Fence {
                    window: u64::MAX,
                    assert: 0,
                    push: Vec::new(),
                })),
                NotFound,
                C::Win,
            ),
            // ---- the audit service ----
            mpi(
                "replay of a window never recorded",
                Send::admin(
                    REPLAY,
                    &v1::ReplayRequest {
                        window: u64::MAX,
                        at: 0,
                    },
                ),
                NotFound,
                C::Win,
            ),
            mpi(
                "an export in an unknown format",
                Send::admin(
                    EXPORT,
                    &v1::ExportRequest {
                        window: w,
                        format: "svg".to_string(),
                    },
                ),
                InvalidArgument,
                C::Arg,
            ),
        ]
    };
    assert!(rows.len() >= 30, "only {} rows", rows.len());

    let (audit, world, other) = (&audit, &world, &other);
    let snapshot = || async move {
        Snapshot {
            worlds: admin.list_worlds().await.unwrap(),
            windows: vec![
                admin.list_windows(world).await.unwrap(),
                admin.list_windows(other).await.unwrap(),
            ],
            recorded: audit.windows().await.unwrap(),
        }
    };
    for Row {
        name,
        send,
        code,
        class,
    } in rows
    {
        let before = snapshot().await;
        let got = match send {
            Send::Call(call) => failure_of(hostile.call(call).await)
                .unwrap_or_else(|| panic!("{name}: not refused with exactly one failure")),
            Send::SessionBytes(bytes) => {
                let (mut fresh, _) = RawSession::open(&mut grpc, &rank2).await.unwrap();
                fresh.send_bytes(bytes);
                match fresh.next().await {
                    Ok(Some(reply)) => panic!("{name}: answered {reply:?}"),
                    Ok(None) => panic!("{name}: the stream ended without a status"),
                    Err(status) => outcome(&status),
                }
            }
            Send::Attach(meta) => match RawSession::open(&mut grpc, &meta).await {
                Ok(_) => panic!("{name}: the session was attached"),
                Err(status) => outcome(&status),
            },
            Send::Unary(path, meta, body) => match unary(&mut grpc, path, &meta, body).await {
                Ok(_) => panic!("{name}: accepted"),
                Err(status) => outcome(&status),
            },
            Send::UnaryMany(path, meta, bodies) => {
                match unary_messages(&mut grpc, path, &meta, bodies).await {
                    Ok(_) => panic!("{name}: accepted"),
                    Err(status) => outcome(&status),
                }
            }
        };
        assert_eq!(got, (code, class), "{name}");
        assert_eq!(snapshot().await, before, "{name}: state changed");
        // the hostile session's epoch state is untouched (a fresh epoch opens), and so is
        // every public copy
        hostile.ok(lock_all()).await;
        for target in 0..3u32 {
            let Reply::Result(result) = hostile.ok(Call::Op(get(target, contiguous(32)))).await
            else {
                panic!("{name}: a get without a result");
            };
            assert_eq!(
                result.data.to_vec(),
                pattern(target as usize),
                "{name}: rank {target}'s public copy changed"
            );
        }
        hostile.ok(unlock_all()).await;
    }
    // the hostile rank's region survived every row: it is still there to detach, once
    hostile
        .ok(Call::Detach(v1::Detach { window: d, base }))
        .await;
    let again = hostile
        .call(Some(Call::Detach(v1::Detach { window: d, base })))
        .await;
    assert_eq!(
        failure_of(again),
        Some((Code::ResourceExhausted, Some(ErrorClass::RmaAttach)))
    );
}

/// The longest status message a refusal may carry: what a client echoes back is bounded (a
/// 20 000-character name once came back whole, and a client then failed on the size of the
/// response headers instead of seeing its INVALID_ARGUMENT).
const MAX_STATUS_MESSAGE: usize = 512;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_names_and_values_are_refused_with_a_short_message() {
    let server = spawn_server_with(|_| {}).await;
    let admin = &server.admin;
    let huge = "n".repeat(20_000);
    let world = unique("world");
    let tokens = admin.create_world(&world, 2).await.unwrap().tokens;
    let session = onesided_client::Session::attach(&server.url, &tokens[0])
        .await
        .unwrap();
    let spec = WindowSpec::of::<i64>(&unique("w"), 2, 2);
    admin.create_window(&world, &spec).await.unwrap();
    let before = (
        admin.list_worlds().await.unwrap(),
        admin.list_windows(&world).await.unwrap(),
    );
    let cases: Vec<(&str, onesided_client::Error, Code, ErrorClass)> = vec![
        (
            "a world name",
            admin.create_world(&huge, 2).await.unwrap_err(),
            Code::InvalidArgument,
            ErrorClass::Arg,
        ),
        (
            "a window name",
            admin
                .create_window(&world, &WindowSpec::of::<i64>(&huge, 2, 2))
                .await
                .unwrap_err(),
            Code::InvalidArgument,
            ErrorClass::Arg,
        ),
        (
            "an info value",
            admin
                .create_window(
                    &world,
                    &WindowSpec::of::<i64>(&unique("w"), 2, 2).info("accumulate_ops", &huge),
                )
                .await
                .unwrap_err(),
            Code::InvalidArgument,
            ErrorClass::Info,
        ),
        (
            "a world to delete",
            admin.delete_world(&huge).await.unwrap_err(),
            Code::NotFound,
            ErrorClass::Arg,
        ),
        (
            "a world to create a window in",
            admin.create_window(&huge, &spec).await.unwrap_err(),
            Code::NotFound,
            ErrorClass::Arg,
        ),
        (
            "a window to describe",
            admin.describe_window(&world, &huge).await.unwrap_err(),
            Code::NotFound,
            ErrorClass::Win,
        ),
        (
            "a window to free",
            admin.free_window(&world, &huge).await.unwrap_err(),
            Code::NotFound,
            ErrorClass::Win,
        ),
        (
            "a window a rank opens",
            session.window(&huge).await.unwrap_err(),
            Code::NotFound,
            ErrorClass::Win,
        ),
    ];
    for (what, error, code, class) in cases {
        assert_refused(what, &error, code, class);
        let message = error.to_string();
        assert!(
            message.len() <= MAX_STATUS_MESSAGE,
            "{what}: a message of {} bytes",
            message.len()
        );
        assert!(message.contains("20000 bytes"), "{what}: {message}");
    }
    // a name as long as allowed is still shown whole
    let long = "l".repeat(128);
    let error = admin.describe_window(&world, &long).await.unwrap_err();
    assert!(error.to_string().contains(&long), "{error}");
    let after = (
        admin.list_worlds().await.unwrap(),
        admin.list_windows(&world).await.unwrap(),
    );
    assert_eq!(after, before);
}

/// The web view's refusals echo what a caller sent only cut short: a path of 60 000
/// characters, sent with no credentials, once came back whole in the 404. An `Authorization`
/// header sent twice is refused (400), whichever of the two is the admin token: taking the
/// first would let a request whose other header a proxy checked through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_echoes_little_and_takes_one_authorization() {
    use crate::web::get;
    let listener =
        onesided_server::http::HttpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let web = listener.local_addr();
    let _server = spawn_server_with(|config| config.http = Some(listener)).await;
    let admin = format!("Bearer {ADMIN_TOKEN}");
    let long = "p".repeat(60_000);
    for (path, authorization) in [
        (format!("/{long}"), None),
        (format!("/api/{long}"), Some(admin.as_str())),
        (
            format!(
                "/api/worlds/{}/windows/{}",
                &long[..20_000],
                &long[..20_000]
            ),
            Some(admin.as_str()),
        ),
    ] {
        let answer = get(web, &path, authorization).await;
        assert_eq!(answer.status, 404, "{}", answer.body);
        assert!(
            answer.body.len() <= MAX_STATUS_MESSAGE,
            "a 404 of {} bytes",
            answer.body.len()
        );
        assert!(answer.body.contains("bytes)"), "{}", answer.body);
    }
    for (first, second) in [
        (admin.as_str(), "Bearer not-a-token"),
        ("Bearer not-a-token", admin.as_str()),
        (admin.as_str(), admin.as_str()),
    ] {
        let twice = format!("{first}\r\nAuthorization: {second}");
        let answer = get(web, "/api/state", Some(&twice)).await;
        assert_eq!(answer.status, 400, "{first} then {second}: {}", answer.body);
        assert!(answer.body.contains("more than one"), "{}", answer.body);
    }
    // one is still answered
    assert_eq!(get(web, "/api/state", Some(&admin)).await.status, 200);
}

/// Members that give one window's group in different orders can never be matched (MPI would
/// hang): they are told at once with `MPI_ERR_GROUP`, every call of both orders, and nothing
/// is created. They stay in step: the same members then agree on an order and create it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_giving_one_window_two_group_orders_are_told() {
    use onesided_client::{NewWindow, Session};
    let server = crate::spawn_server().await;
    let world = server
        .admin
        .create_world(&unique("orders"), 3)
        .await
        .unwrap();
    let mut sessions = Vec::new();
    for token in &world.tokens {
        sessions.push(Session::attach(&server.url, token).await.unwrap());
    }
    let call = |group: &[u32]| NewWindow::new("g", 8, 1).group(group);
    let (ordered, reordered) = (call(&[0, 1, 2]), call(&[1, 0, 2]));
    /// The three members create at once, each with the call it is given (`unmatched`: what
    /// it means when they are not answered within 20 s).
    async fn create_all(
        sessions: &[Session],
        [zero, one, two]: [&NewWindow; 3],
        unmatched: &str,
    ) -> [onesided_client::Result<onesided_client::Window>; 3] {
        let (zero, one, two) = tokio::time::timeout(std::time::Duration::from_secs(20), async {
            tokio::join!(
                sessions[0].create(zero),
                sessions[1].create(one),
                sessions[2].create(two),
            )
        })
        .await
        .expect(unmatched);
        [zero, one, two]
    }
    let created = create_all(
        &sessions,
        [&ordered, &reordered, &ordered],
        "the members were never told: they wait for a match that cannot come",
    )
    .await;
    for (rank, created) in created.into_iter().enumerate() {
        let error = created.unwrap_err();
        assert_eq!(
            (error.code(), error.class()),
            (Code::InvalidArgument, Some(ErrorClass::Group)),
            "rank {rank}: {error}"
        );
        assert!(error.to_string().contains("order"), "{error}");
    }
    let listed = server.admin.list_windows(&world.name).await.unwrap();
    assert!(listed.is_empty());
    // in step: the next creation over either order is a fresh one
    let created = create_all(
        &sessions,
        [&reordered; 3],
        "the members agreeing afterwards were not matched",
    )
    .await;
    let ranks: Vec<u32> = created
        .into_iter()
        .map(|window| window.unwrap().rank())
        .collect();
    assert_eq!(ranks, vec![1, 0, 2]);
}

/// The address of the HTTP listener a launched server printed as `url=http://{address}{path}`.
fn printed_http_address(server: &crate::Launched, path: &str) -> std::net::SocketAddr {
    server
        .field("url=")
        .trim_start_matches("http://")
        .trim_end_matches(path)
        .parse()
        .unwrap()
}

/// Idle connections to the web view cannot keep gRPC clients out. The binary runs with 256
/// file descriptors and is sent 300 connections to its web view that never send a byte: it
/// holds at most `HTTP_CONNECTIONS` of them (the rest wait in the kernel's backlog), so its
/// descriptors last, and a new gRPC client is served at once. (Before, every one was
/// accepted until descriptors ran out, and new gRPC connections were refused for hyper's
/// 30 s header timeout.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_web_connections_do_not_keep_grpc_clients_out() {
    use std::time::Duration;
    let data = crate::TempDir(std::env::temp_dir().join(unique("onesided-fds")));
    let mut command = std::process::Command::new("sh");
    command
        .args(["-c", "ulimit -n 256 && exec \"$0\" \"$@\""])
        .arg(crate::SERVER_BINARY)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--admin-token",
            ADMIN_TOKEN,
            "--data-dir",
        ])
        .arg(&data.0)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null());
    let server = crate::Launched::start(command, "serving the web view", Duration::from_secs(60));
    let grpc = format!("http://{}", server.field("address="));
    let web = printed_http_address(&server, "/");
    let idle = futures::future::join_all((0..300).map(|_| async move {
        tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(web))
            .await
            .ok()
            .and_then(Result::ok)
    }))
    .await;
    let held = idle.iter().flatten().count();
    assert!(
        held >= 250,
        "only {held} connections to the web view were made"
    );
    let listed = tokio::time::timeout(Duration::from_secs(5), async {
        let admin = onesided_client::Admin::connect(&grpc, ADMIN_TOKEN).await?;
        admin.list_worlds().await
    })
    .await;
    assert!(
        matches!(listed, Ok(Ok(_))),
        "a gRPC client was kept out by {held} idle web connections: {listed:?}"
    );
    drop(idle);
    drop(server);
}

/// A client may have as many small calls in flight as the pending budget lets it, each in an
/// HTTP/2 DATA frame of its own, as grpcio sends them: 30 000 gets on one session, written
/// before the server has read the first, are all answered and the connection stays. (Before,
/// HTTP/2 ended the connection, GOAWAY ENHANCE_YOUR_CALM "too_many_data_frames", once some
/// 2 400 small frames waited unread, and every call was lost.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_calls_in_frames_of_their_own_keep_their_connection() {
    let server = crate::spawn_server().await;
    let (world, name) = (unique("frames"), unique("w"));
    let spec = WindowSpec::bytes(&name, 1, 64, 1);
    let tokens = crate::world_with(&server.admin, &world, 1, &[spec])
        .await
        .tokens;
    let answered = small_calls_in_frames_of_their_own(&server.url, &tokens[0], &name)
        .await
        .unwrap_or_else(|why| panic!("{why}"));
    assert_eq!(answered, SMALL_CALLS);
}

/// When HTTP/2 does end a connection for its limit, the server says so: the binary with a
/// pending budget of 1, whose connections get HTTP/2's default window of 1 MiB
/// (`Limits::connection_window`'s floor, h2's budget as it was before), is sent 30 000
/// heartbeats in frames of their own (calls without answers, so that the session, reading
/// behind, meets the connection's error rather than a full outbound stream), and its log
/// names the limit at WARN. (That the session falls 2 300 frames behind is this machine's
/// speed, not a guarantee: a much faster session would leave the limit unreached, which the
/// test reports as such.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_http2_layer_ends_is_logged() {
    let data = crate::TempDir(std::env::temp_dir().join(unique("onesided-goaway")));
    let server = crate::launch_server(
        &data,
        &[
            "--max-pending-ops",
            "1",
            "--admin-token",
            ADMIN_TOKEN,
            "--metrics-listen",
            "127.0.0.1:0",
        ],
        "info",
        "serving metrics",
    );
    let url = format!("http://{}", server.field("address="));
    let metrics = printed_http_address(&server, "/metrics");
    let admin = onesided_client::Admin::connect(&url, ADMIN_TOKEN)
        .await
        .unwrap();
    let tokens = admin
        .create_world(&unique("frames"), 1)
        .await
        .unwrap()
        .tokens;
    let ended = heartbeats_in_frames_of_their_own(&url, &tokens[0]).await;
    // the session reads what HTTP/2 had buffered before the error: wait until it ended
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let scraped = crate::web::get(metrics, "/metrics", None).await.body;
        if scraped
            .lines()
            .any(|line| line.trim() == "onesided_sessions_attached 0")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the session never ended: {scraped}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (_, printed) =
        tokio::task::spawn_blocking(move || server.terminate(std::time::Duration::from_secs(10)))
            .await
            .unwrap();
    let why = ended.expect_err("HTTP/2's limit was not reached: nothing to log");
    let logged = printed
        .iter()
        .find(|line| line.contains("the server's HTTP/2 layer ended this call's connection"))
        .unwrap_or_else(|| {
            panic!("the connection ended ({why}) and the log says nothing: {printed:#?}")
        });
    assert!(logged.contains("WARN"), "{logged}");
    assert!(logged.contains("too_many_data_frames"), "{logged}");
}

const SMALL_CALLS: u64 = 30_000;

/// `message` as gRPC frames it: uncompressed, after its length.
fn framed(message: ClientMessage) -> Bytes {
    use bytes::BufMut;
    use prost::Message;
    let bytes = message.encode_to_vec();
    let mut frame = bytes::BytesMut::with_capacity(5 + bytes.len());
    frame.put_u8(0);
    frame.put_u32(bytes.len() as u32);
    frame.extend_from_slice(&bytes);
    frame.freeze()
}

/// Opens a session over bare HTTP/2 with `token` and, once greeted, writes
/// [`SMALL_CALLS`] heartbeats (calls the session answers with nothing), each in a DATA frame
/// of its own; then reads until the stream or the connection ends, and says why (an error
/// when the connection was ended).
async fn heartbeats_in_frames_of_their_own(url: &str, token: &str) -> Result<(), String> {
    let (mut client, request, connection) =
        crate::raw::bare_request(url, crate::raw::SESSION, token, None).await;
    let (response, mut send) = client.send_request(request, false).unwrap();
    // the greeting: the session reads its stream from here on
    let mut body = response.await.unwrap().into_body();
    let greeting = body.data().await.unwrap().unwrap();
    let _ = body.flow_control().release_capacity(greeting.len());
    for id in 1..=SMALL_CALLS {
        let heartbeat = framed(ClientMessage {
            id,
            call: Some(Call::Heartbeat(v1::Heartbeat {})),
        });
        if let Err(error) = send.send_data(heartbeat, false) {
            return Err(format!("ended before heartbeat {id} was sent: {error}"));
        }
    }
    let ended = async {
        while let Some(chunk) = body.data().await {
            let chunk = chunk?;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        Ok::<_, h2::Error>(())
    }
    .await;
    connection.abort();
    ended.map_err(|error| format!("the connection was ended: {error}"))
}

/// Opens a session over bare HTTP/2 with `token`, opens window `name` (at least 64 bytes) and
/// opens a lock_all epoch, then writes [`SMALL_CALLS`] gets of one byte, each in a DATA frame
/// of its own, before reading any answer; returns how many were answered, or why the
/// connection ended first.
async fn small_calls_in_frames_of_their_own(
    url: &str,
    token: &str,
    name: &str,
) -> Result<u64, String> {
    use bytes::{Buf, BytesMut};
    use prost::Message;
    let (mut client, request, connection) =
        crate::raw::bare_request(url, crate::raw::SESSION, token, None).await;
    let (response, mut send) = client.send_request(request, false).unwrap();
    /// The server's messages one at a time; `None` once the stream ended.
    struct Incoming {
        body: h2::RecvStream,
        buffer: BytesMut,
    }
    impl Incoming {
        async fn next(&mut self) -> Result<Option<ServerMessage>, h2::Error> {
            loop {
                let buffer = &mut self.buffer;
                if buffer.len() >= 5 {
                    let length =
                        u32::from_be_bytes([buffer[1], buffer[2], buffer[3], buffer[4]]) as usize;
                    if buffer.len() >= 5 + length {
                        buffer.advance(5);
                        let message = buffer.split_to(length).freeze();
                        return Ok(Some(ServerMessage::decode(message).unwrap()));
                    }
                }
                match self.body.data().await {
                    Some(Ok(chunk)) => {
                        let _ = self.body.flow_control().release_capacity(chunk.len());
                        self.buffer.extend_from_slice(&chunk);
                    }
                    Some(Err(error)) => return Err(error),
                    None => return Ok(None),
                }
            }
        }
    }
    let mut incoming = Incoming {
        body: response.await.unwrap().into_body(),
        buffer: BytesMut::new(),
    };
    let greeting = incoming.next().await.unwrap().expect("a greeting");
    assert!(matches!(greeting.reply, Some(Reply::Attached(_))));
    send.send_data(
        framed(ClientMessage {
            id: 1,
            call: Some(Call::OpenWindow(v1::OpenWindow {
                name: name.to_string(),
                with_copy: false,
            })),
        }),
        false,
    )
    .unwrap();
    let Some(Reply::Window(desc)) = incoming.next().await.unwrap().unwrap().reply else {
        panic!("no window description");
    };
    send.send_data(
        framed(ClientMessage {
            id: 2,
            call: Some(Call::LockAll(v1::LockAll {
                window: desc.id,
                assert: 0,
            })),
        }),
        false,
    )
    .unwrap();
    incoming.next().await.unwrap().unwrap();
    for id in 3..3 + SMALL_CALLS {
        let get = v1::RmaOp {
            disp: id % 64,
            ..get_op(desc.id, 0, contiguous(1))
        };
        let frame = framed(ClientMessage {
            id,
            call: Some(Call::Op(get)),
        });
        assert!(
            frame.len() < 256,
            "a frame of {} bytes is not small",
            frame.len()
        );
        if let Err(error) = send.send_data(frame, false) {
            return Err(format!(
                "the connection was ended before call {id} of {SMALL_CALLS} was sent: {error}"
            ));
        }
    }
    let mut answered = std::collections::BTreeSet::new();
    while (answered.len() as u64) < SMALL_CALLS {
        match incoming.next().await {
            Ok(Some(message)) => {
                // answered, with data or (over a pending budget) a refusal
                assert!(
                    matches!(message.reply, Some(Reply::Result(_) | Reply::Error(_))),
                    "call {}: {:?}",
                    message.id,
                    message.reply
                );
                answered.insert(message.id);
            }
            Ok(None) => return Err(format!("the stream ended after {} answers", answered.len())),
            Err(error) => {
                return Err(format!(
                    "the connection was ended after {} of {SMALL_CALLS} answers: {error}",
                    answered.len()
                ))
            }
        }
    }
    drop(send);
    connection.abort();
    Ok(answered.len() as u64)
}

/// The owner of a unified-model window follows its public copy and then reads nothing while
/// another rank puts 1 MiB at a time: the updates waiting for it are bounded in bytes
/// (`--max-unread-update-bytes`, 4 MiB here), and past that its session ends with
/// RESOURCE_EXHAUSTED / `MPI_ERR_NO_MEM` after what was queued, as when its answers fill the
/// stream. (Before, the bound counted messages, 66 560 of them: 4 000 puts of 1 MiB took the
/// server from 47 MB to 4.3 GB.) The rank that puts carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_reads_nothing_is_held_to_its_update_bytes() {
    use onesided_client::{LockType, MemoryModel};
    const MIB: usize = 1 << 20;
    const PUTS: usize = 32;
    let server = spawn_server_with(|config| {
        config.durability = onesided_server::audit::Durability::Off;
        config.limits.max_unread_update_bytes = 4 * MIB as u64;
        // the raw follower sends no heartbeats: its lease must not end it first
        config.lease_ttl = std::time::Duration::from_secs(120);
    })
    .await;
    let world = unique("follower");
    let tokens = server.admin.create_world(&world, 2).await.unwrap().tokens;
    let name = unique("w");
    let desc = server
        .admin
        .create_window(
            &world,
            &WindowSpec::bytes(&name, 2, MIB as u64, 1).model(MemoryModel::Unified),
        )
        .await
        .unwrap();
    // rank 0, raw, with HTTP/2 windows of 64 KiB: what the server holds for it is its own
    let (_grpc, mut owner) = crate::raw::unread_session(&server.url, &tokens[0], &name).await;
    owner.send(Some(Call::Follow(v1::Follow { window: desc.id })));
    // rank 1 puts 32 MiB into rank 0's copy, 1 MiB at a time
    let (_, putter) = crate::attached_window(&server.url, &tokens[1], &name).await;
    for n in 0..PUTS {
        putter.lock(LockType::Exclusive, 0, 0).await.unwrap();
        putter.put(0, 0, &vec![n as u8 + 1; MIB]).unwrap();
        putter.unlock(0).await.unwrap();
    }
    // rank 0's stream, read at last: what was queued, then the status it ended with
    let (updates, status) = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let mut updates = 0;
        loop {
            match owner.next().await {
                Ok(Some(message)) => {
                    if matches!(message.reply, Some(Reply::Updated(_))) {
                        updates += 1;
                    }
                }
                Ok(None) => panic!("the stream ended without a status after {updates} updates"),
                Err(status) => break (updates, status),
            }
        }
    })
    .await
    .expect("the follower's session never ended: its updates queue without bound");
    assert_eq!(
        outcome(&status),
        (Code::ResourceExhausted, Some(ErrorClass::NoMem)),
        "{status:?}"
    );
    assert!(updates < PUTS, "all {updates} updates were queued");
    // the rank that puts carries on
    putter.lock(LockType::Shared, 0, 0).await.unwrap();
    let seen = putter.get::<u8>(0, MIB as u64 - 4, 4).unwrap();
    putter.unlock(0).await.unwrap();
    assert_eq!(seen.value().await.unwrap(), [PUTS as u8; 4]);
}
