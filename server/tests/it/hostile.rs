//! A table of malformed and hostile requests, sent as a hostile client would: raw bytes,
//! hand-built messages of the generated types, hand-written metadata. Each row gets its exact
//! gRPC code and MPI class (or none, for refusals of the caller rather than of an MPI call), and
//! after each row the worlds, the windows, the audit log and every rank's public copy are as
//! before, and the hostile session's own epoch state still allows a fresh epoch.

use bytes::Bytes;
use onesided_client::{Audit, ErrorClass, WindowSpec};
use onesided_core::audit::Event;
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

struct Row {
    name: &'static str,
    send: Send,
    code: Code,
    class: Option<ErrorClass>,
}

fn row(name: &'static str, send: Send, code: Code, class: Option<ErrorClass>) -> Row {
    Row {
        name,
        send,
        code,
        class,
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
    let put = |target: u32, data: Vec<u8>| v1::RmaOp {
        window: w,
        target,
        kind: v1::OpKind::Put as i32,
        datatype: byte,
        op: 0,
        disp: 0,
        layout: contiguous(data.len() as u64),
        data: data.into(),
        compare: Bytes::new(),
        request_based: false,
        token: 0,
    };
    let get = |target: u32, layout: Option<v1::Layout>| v1::RmaOp {
        window: w,
        target,
        kind: v1::OpKind::Get as i32,
        datatype: byte,
        op: 0,
        disp: 0,
        layout,
        data: Bytes::new(),
        compare: Bytes::new(),
        request_based: false,
        token: 0,
    };
    // every rank's public copy holds its pattern
    hostile
        .ok(Call::LockAll(v1::LockAll {
            window: w,
            assert: 0,
        }))
        .await;
    for target in 0..3u32 {
        hostile
            .ok(Call::Op(put(target, pattern(target as usize))))
            .await;
    }
    hostile
        .ok(Call::UnlockAll(v1::UnlockAll {
            window: w,
            push: Vec::new(),
        }))
        .await;

    let resized = |inner: Option<v1::Layout>, lb: i64, extent: u64, count: u64| {
        Some(v1::Layout {
            kind: Some(v1::layout::Kind::Resized(Box::new(v1::Resized {
                inner: inner.map(Box::new),
                lb,
                extent,
                count,
            }))),
        })
    };
    let structure = |blocks: &[(u64, i32, u64)]| {
        Some(v1::Layout {
            kind: Some(v1::layout::Kind::Struct(v1::Struct {
                blocks: blocks
                    .iter()
                    .map(|&(offset, datatype, len)| v1::StructBlock {
                        offset,
                        datatype,
                        len,
                    })
                    .collect(),
            })),
        })
    };
    let with_i64 = |mut op: v1::RmaOp| {
        op.datatype = i64_code;
        op
    };
    let session_message = |call: Call| {
        encode(&ClientMessage {
            id: 1,
            call: Some(call),
        })
    };
    let world_request = |name: &str, ranks: u32| {
        encode(&v1::CreateWorldRequest {
            name: name.to_string(),
            ranks,
        })
    };
    let window_request = |sizes: Vec<u64>, flavor: i32, model: i32| {
        let disp_units = vec![1; sizes.len()];
        encode(&v1::CreateWindowRequest {
            group: Vec::new(),
            world: world.clone(),
            name: unique("new"),
            flavor,
            model,
            sizes,
            disp_units,
            info: Vec::new(),
        })
    };
    let oversized = vec![7u8; MAX_MESSAGE + 1];
    // field 2 (ranks, a varint) sent length-delimited
    let wrong_wire_type = Bytes::from_static(&[0x12, 0x01, 0x00]);
    let garbage = Bytes::from_static(&[0xff; 16]);
    let record = |window: u64, events: Vec<String>| {
        Call::Record(v1::Record {
            window,
            events,
            rows: None,
        })
    };
    let client_rows = |window: u64, from: u64, to: u64, hash: usize| {
        crate::raw::client_rows(window, from, to, vec![0xab; hash])
    };
    let store_event = Event::Store {
        ranges: vec![(0, 8)],
    }
    .to_json();

    let rows = {
        use Code::*;
        use ErrorClass as C;
        vec![
            // ---- credentials come first ----
            row(
                "admin call without credentials",
                Send::Unary(LIST_WORLDS, Meta::default(), Bytes::new()),
                Unauthenticated,
                None,
            ),
            row(
                "admin call with a Basic scheme",
                Send::Unary(
                    LIST_WORLDS,
                    Meta::default().with("authorization", &format!("Basic {ADMIN_TOKEN}")),
                    Bytes::new(),
                ),
                Unauthenticated,
                None,
            ),
            row(
                "a wrong admin token creating a world",
                Send::Unary(CREATE_WORLD, wrong.clone(), world_request("intruder", 2)),
                Unauthenticated,
                None,
            ),
            row(
                "a wrong token with a body that is not protobuf",
                Send::Unary(CREATE_WORLD, wrong.clone(), garbage.clone()),
                Unauthenticated,
                None,
            ),
            row(
                "a wrong token with a message over the size limit",
                Send::Unary(CREATE_WORLD, wrong.clone(), oversized.clone().into()),
                Unauthenticated,
                None,
            ),
            row(
                "a rank token on the admin service",
                Send::Unary(CREATE_WORLD, rank0.clone(), world_request("mine", 2)),
                PermissionDenied,
                None,
            ),
            row(
                "a rank token on the audit service",
                Send::Unary(
                    REPLAY,
                    rank0.clone(),
                    encode(&v1::ReplayRequest { window: w, at: 0 }),
                ),
                PermissionDenied,
                None,
            ),
            row(
                "the admin token attaching as a rank",
                Send::Attach(admin_meta.clone()),
                PermissionDenied,
                None,
            ),
            row(
                "an unknown rank token",
                Send::Attach(wrong.clone()),
                Unauthenticated,
                None,
            ),
            row(
                "the token of a deleted world",
                Send::Attach(Meta::bearer(&doomed_token)),
                Unauthenticated,
                None,
            ),
            row(
                "a rank token without the Bearer scheme",
                Send::Attach(Meta::default().with("authorization", &tokens[0])),
                Unauthenticated,
                None,
            ),
            row(
                "rank 1's token claiming to be rank 0",
                Send::Attach(Meta::bearer(&tokens[1]).with("x-onesided-rank", "0")),
                PermissionDenied,
                None,
            ),
            row(
                "a token claiming another world",
                Send::Attach(Meta::bearer(&other_tokens[0]).with("x-onesided-world", &world)),
                PermissionDenied,
                None,
            ),
            row(
                "a claim of a world named by 8 000 characters",
                Send::Attach(rank0.clone().with("x-onesided-world", &"w".repeat(8_000))),
                PermissionDenied,
                None,
            ),
            row(
                "a rank claim of 8 000 digits",
                Send::Attach(rank0.clone().with("x-onesided-rank", &"9".repeat(8_000))),
                InvalidArgument,
                Some(C::Rank),
            ),
            row(
                "a rank claim that is not a number",
                Send::Attach(rank0.clone().with("x-onesided-rank", "zero")),
                InvalidArgument,
                Some(C::Rank),
            ),
            row(
                "a wrong token with a malformed claim",
                Send::Attach(wrong.clone().with("x-onesided-rank", "zero")),
                Unauthenticated,
                None,
            ),
            // a credential or claim sent twice is refused, not taken first-wins (a proxy in
            // front may have checked the other one)
            row(
                "a session with two authorization entries",
                Send::Attach(rank2.clone().with("authorization", "Bearer not-a-token")),
                Unauthenticated,
                None,
            ),
            row(
                "a session with the same authorization entry twice",
                Send::Attach(
                    rank2
                        .clone()
                        .with("authorization", &format!("Bearer {}", tokens[2])),
                ),
                Unauthenticated,
                None,
            ),
            row(
                "an admin call with two authorization entries",
                Send::Unary(
                    LIST_WORLDS,
                    admin_meta
                        .clone()
                        .with("authorization", "Bearer not-a-token"),
                    Bytes::new(),
                ),
                Unauthenticated,
                None,
            ),
            row(
                "a rank claimed twice",
                Send::Attach(
                    rank2
                        .clone()
                        .with("x-onesided-rank", "2")
                        .with("x-onesided-rank", "0"),
                ),
                InvalidArgument,
                Some(C::Rank),
            ),
            row(
                "a rank claimed twice alike",
                Send::Attach(
                    rank2
                        .clone()
                        .with("x-onesided-rank", "2")
                        .with("x-onesided-rank", "2"),
                ),
                InvalidArgument,
                Some(C::Rank),
            ),
            row(
                "a world claimed twice",
                Send::Attach(
                    rank2
                        .clone()
                        .with("x-onesided-world", &world)
                        .with("x-onesided-world", &other),
                ),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "a session coming back that names no incarnation",
                Send::Attach(rank0.clone().with("x-onesided-succeeds", "first")),
                InvalidArgument,
                Some(C::Arg),
            ),
            // the hostile session is rank 0's incarnation 1: one that says it lost incarnation
            // 0 must not take the rank from it
            row(
                "a session coming back after a newer incarnation attached",
                Send::Attach(rank0.clone().with("x-onesided-succeeds", "0")),
                Aborted,
                Some(C::Other),
            ),
            // ---- limits ----
            row(
                "a session message over the size limit",
                Send::SessionBytes(session_message(Call::Op(put(1, oversized.clone())))),
                ResourceExhausted,
                Some(C::NoMem),
            ),
            row(
                "an admin message over the size limit",
                Send::Unary(
                    CREATE_WORLD,
                    admin_meta.clone(),
                    world_request(&"x".repeat(MAX_MESSAGE), 2),
                ),
                ResourceExhausted,
                Some(C::NoMem),
            ),
            row(
                "a world over the limit of ranks",
                Send::Unary(
                    CREATE_WORLD,
                    admin_meta.clone(),
                    world_request(&unique("big"), MAX_RANKS + 1),
                ),
                ResourceExhausted,
                Some(C::NoMem),
            ),
            row(
                "a rank's window over the per-rank limit",
                Send::Unary(
                    CREATE_WINDOW,
                    admin_meta.clone(),
                    window_request(vec![MAX_RANK_BYTES + 1, 8, 8], 0, 0),
                ),
                ResourceExhausted,
                Some(C::NoMem),
            ),
            row(
                "windows over the server's limit of bytes",
                Send::Unary(
                    CREATE_WINDOW,
                    admin_meta.clone(),
                    window_request(vec![MAX_RANK_BYTES; 3], 0, 0),
                ),
                ResourceExhausted,
                Some(C::NoMem),
            ),
            // ---- bytes that are not the message they claim to be (gRPC: INTERNAL) ----
            row(
                "an admin body that is not protobuf",
                Send::Unary(CREATE_WORLD, admin_meta.clone(), garbage.clone()),
                Internal,
                None,
            ),
            row(
                "a field of the wrong wire type",
                Send::Unary(CREATE_WORLD, admin_meta.clone(), wrong_wire_type),
                Internal,
                None,
            ),
            row(
                "a session message that is not protobuf",
                Send::SessionBytes(garbage.clone()),
                Internal,
                None,
            ),
            // ---- what a refusal echoes is bounded ----
            row(
                "a world name of 20 000 characters",
                Send::Unary(
                    CREATE_WORLD,
                    admin_meta.clone(),
                    world_request(&"n".repeat(20_000), 2),
                ),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "a window name of 20 000 characters",
                Send::Unary(
                    CREATE_WINDOW,
                    admin_meta.clone(),
                    encode(&v1::CreateWindowRequest {
                        group: Vec::new(),
                        world: world.clone(),
                        name: "n".repeat(20_000),
                        flavor: 0,
                        model: 0,
                        sizes: vec![8; 3],
                        disp_units: vec![1; 3],
                        info: Vec::new(),
                    }),
                ),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "a window whose group names a rank twice",
                Send::Unary(
                    CREATE_WINDOW,
                    admin_meta.clone(),
                    encode(&v1::CreateWindowRequest {
                        group: vec![1, 1],
                        world: world.clone(),
                        name: "twice".into(),
                        flavor: 0,
                        model: 0,
                        sizes: vec![8; 2],
                        disp_units: vec![1; 2],
                        info: Vec::new(),
                    }),
                ),
                InvalidArgument,
                Some(C::Group),
            ),
            row(
                "a window whose group names a rank outside the world",
                Send::Unary(
                    CREATE_WINDOW,
                    admin_meta.clone(),
                    encode(&v1::CreateWindowRequest {
                        group: vec![0, 4_000_000_000],
                        world: world.clone(),
                        name: "outside".into(),
                        flavor: 0,
                        model: 0,
                        sizes: vec![8; 2],
                        disp_units: vec![1; 2],
                        info: Vec::new(),
                    }),
                ),
                InvalidArgument,
                Some(C::Group),
            ),
            row(
                "a dynamic window with memory at creation",
                Send::Unary(
                    CREATE_WINDOW,
                    admin_meta.clone(),
                    encode(&v1::CreateWindowRequest {
                        group: Vec::new(),
                        world: world.clone(),
                        name: unique("new"),
                        flavor: v1::Flavor::Dynamic as i32,
                        model: 0,
                        sizes: vec![0, 8, 0],
                        disp_units: vec![1; 3],
                        info: Vec::new(),
                    }),
                ),
                InvalidArgument,
                Some(C::Size),
            ),
            row(
                "a dynamic window with a disp_unit other than 1",
                Send::Unary(
                    CREATE_WINDOW,
                    admin_meta.clone(),
                    encode(&v1::CreateWindowRequest {
                        group: Vec::new(),
                        world: world.clone(),
                        name: unique("new"),
                        flavor: v1::Flavor::Dynamic as i32,
                        model: 0,
                        sizes: vec![0; 3],
                        disp_units: vec![1, 8, 1],
                        info: Vec::new(),
                    }),
                ),
                InvalidArgument,
                Some(C::Disp),
            ),
            row(
                "same_size=true with ranks of different sizes",
                Send::Unary(
                    CREATE_WINDOW,
                    admin_meta.clone(),
                    encode(&v1::CreateWindowRequest {
                        group: Vec::new(),
                        world: world.clone(),
                        name: unique("new"),
                        flavor: 0,
                        model: 0,
                        sizes: vec![8, 8, 16],
                        disp_units: vec![1; 3],
                        info: vec![v1::InfoEntry {
                            key: "same_size".into(),
                            value: "true".into(),
                        }],
                    }),
                ),
                InvalidArgument,
                Some(C::Info),
            ),
            row(
                "same_disp_unit=true with ranks of different disp_units",
                Send::Unary(
                    CREATE_WINDOW,
                    admin_meta.clone(),
                    encode(&v1::CreateWindowRequest {
                        group: Vec::new(),
                        world: world.clone(),
                        name: unique("new"),
                        flavor: 0,
                        model: 0,
                        sizes: vec![8; 3],
                        disp_units: vec![1, 8, 1],
                        info: vec![v1::InfoEntry {
                            key: "same_disp_unit".into(),
                            value: "true".into(),
                        }],
                    }),
                ),
                InvalidArgument,
                Some(C::Info),
            ),
            row(
                "an export format of 20 000 characters",
                Send::Unary(
                    EXPORT,
                    admin_meta.clone(),
                    encode(&v1::ExportRequest {
                        window: w,
                        format: "f".repeat(20_000),
                    }),
                ),
                InvalidArgument,
                Some(C::Arg),
            ),
            // ---- cluster calls on a server that is not part of a cluster ----
            row(
                "the cluster's status from a single server",
                Send::Unary(
                    CLUSTER_STATUS,
                    admin_meta.clone(),
                    encode(&v1::ClusterStatusRequest {}),
                ),
                FailedPrecondition,
                None,
            ),
            row(
                "moving a world on a single server",
                Send::Unary(
                    MOVE_WORLD,
                    admin_meta.clone(),
                    encode(&v1::MoveWorldRequest {
                        world: world.clone(),
                        node_id: "elsewhere".into(),
                    }),
                ),
                FailedPrecondition,
                None,
            ),
            row(
                "opening a window named by 20 000 characters",
                Send::Call(Some(Call::OpenWindow(v1::OpenWindow {
                    name: "n".repeat(20_000),
                    with_copy: false,
                }))),
                NotFound,
                Some(C::Win),
            ),
            // ---- a unary method takes exactly one request message (gRPC: a cardinality
            // violation is UNIMPLEMENTED) ----
            row(
                "two worlds in one CreateWorld call",
                Send::UnaryMany(
                    CREATE_WORLD,
                    admin_meta.clone(),
                    vec![
                        world_request(&unique("first"), 2),
                        world_request(&unique("second"), 2),
                    ],
                ),
                Unimplemented,
                None,
            ),
            row(
                "two windows in one CreateWindow call",
                Send::UnaryMany(
                    CREATE_WINDOW,
                    admin_meta.clone(),
                    vec![
                        window_request(vec![8; 3], 0, 0),
                        window_request(vec![8; 3], 0, 0),
                    ],
                ),
                Unimplemented,
                None,
            ),
            row(
                "a request followed by garbage in one ListWorlds call",
                Send::UnaryMany(
                    LIST_WORLDS,
                    admin_meta.clone(),
                    vec![Bytes::new(), garbage.clone()],
                ),
                Unimplemented,
                None,
            ),
            row(
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
                None,
            ),
            row(
                "two requests opening one Events stream",
                Send::UnaryMany(
                    EVENTS,
                    admin_meta.clone(),
                    vec![
                        encode(&v1::EventsRequest {
                            window: w,
                            from: 1,
                            follow: false,
                        }),
                        encode(&v1::EventsRequest {
                            window: w,
                            from: 1,
                            follow: false,
                        }),
                    ],
                ),
                Unimplemented,
                None,
            ),
            row(
                "two requests in one health check",
                Send::UnaryMany(
                    HEALTH_CHECK,
                    Meta::default(),
                    vec![Bytes::new(), Bytes::new()],
                ),
                Unimplemented,
                None,
            ),
            row(
                "a wrong token with two requests",
                Send::UnaryMany(
                    CREATE_WORLD,
                    wrong.clone(),
                    vec![
                        world_request(&unique("first"), 2),
                        world_request(&unique("second"), 2),
                    ],
                ),
                Unauthenticated,
                None,
            ),
            // ---- unknown enums ----
            row(
                "an unknown window flavor",
                Send::Unary(
                    CREATE_WINDOW,
                    admin_meta.clone(),
                    window_request(vec![8; 3], 99, 0),
                ),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "an unknown memory model",
                Send::Unary(
                    CREATE_WINDOW,
                    admin_meta.clone(),
                    window_request(vec![8; 3], 0, 5),
                ),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "an unspecified lock type",
                Send::Call(Some(Call::Lock(v1::Lock {
                    window: w,
                    lock_type: 0,
                    target: 1,
                    assert: 0,
                }))),
                InvalidArgument,
                Some(C::LockType),
            ),
            row(
                "an unknown operation kind",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    kind: 42,
                    ..get(1, contiguous(1))
                }))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "an unspecified operation kind",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    kind: 0,
                    ..get(1, contiguous(1))
                }))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "a negative datatype",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    datatype: -1,
                    ..get(1, contiguous(1))
                }))),
                InvalidArgument,
                Some(C::Type),
            ),
            row(
                "an unknown reduction op",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    kind: v1::OpKind::Accumulate as i32,
                    op: 99,
                    ..with_i64(put(1, vec![0; 8]))
                }))),
                InvalidArgument,
                Some(C::Op),
            ),
            // ---- layouts, counts, displacements ----
            row(
                "an operation without a layout",
                Send::Call(Some(Call::Op(get(1, None)))),
                InvalidArgument,
                Some(C::Type),
            ),
            row(
                "a layout without a kind",
                Send::Call(Some(Call::Op(get(1, Some(v1::Layout { kind: None }))))),
                InvalidArgument,
                Some(C::Type),
            ),
            row(
                "a put whose data is shorter than its layout",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    layout: contiguous(2),
                    ..with_i64(put(1, vec![0; 8]))
                }))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a vector whose count × blocklen overflows",
                Send::Call(Some(Call::Op(get(
                    1,
                    Some(v1::Layout {
                        kind: Some(v1::layout::Kind::Vector(v1::Vector {
                            count: 2,
                            blocklen: u64::MAX,
                            stride: 1,
                        })),
                    }),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a vector whose stride overflows",
                Send::Call(Some(Call::Op(get(
                    1,
                    Some(v1::Layout {
                        kind: Some(v1::layout::Kind::Vector(v1::Vector {
                            count: 3,
                            blocklen: 1,
                            stride: u64::MAX,
                        })),
                    }),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "an indexed block past the end of u64",
                Send::Call(Some(Call::Op(with_i64(get(
                    1,
                    Some(v1::Layout {
                        kind: Some(v1::layout::Kind::Indexed(v1::Indexed {
                            blocks: vec![v1::Block {
                                disp: u64::MAX / 4,
                                len: 1,
                            }],
                        })),
                    }),
                ))))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "more indexed blocks than the limit",
                Send::Call(Some(Call::Op(get(
                    1,
                    Some(v1::Layout {
                        kind: Some(v1::layout::Kind::Indexed(v1::Indexed {
                            blocks: vec![
                                v1::Block { disp: 0, len: 1 };
                                onesided_core::layout::MAX_BLOCKS + 1
                            ],
                        })),
                    }),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "an hvector whose stride overflows",
                Send::Call(Some(Call::Op(get(
                    1,
                    Some(v1::Layout {
                        kind: Some(v1::layout::Kind::Hvector(v1::Hvector {
                            count: 3,
                            blocklen: 1,
                            stride_bytes: u64::MAX / 2 + 1,
                        })),
                    }),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "more hindexed blocks than the limit",
                Send::Call(Some(Call::Op(get(
                    1,
                    Some(v1::Layout {
                        kind: Some(v1::layout::Kind::Hindexed(v1::Hindexed {
                            blocks: vec![
                                v1::ByteBlock { offset: 0, len: 1 };
                                onesided_core::layout::MAX_BLOCKS + 1
                            ],
                        })),
                    }),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a subarray whose start + subsize passes its size",
                Send::Call(Some(Call::Op(get(
                    1,
                    Some(v1::Layout {
                        kind: Some(v1::layout::Kind::Subarray(v1::Subarray {
                            sizes: vec![2, 2],
                            subsizes: vec![1, 2],
                            starts: vec![0, 1],
                            order: 0,
                        })),
                    }),
                )))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "a subarray of an unknown storage order",
                Send::Call(Some(Call::Op(get(
                    1,
                    Some(v1::Layout {
                        kind: Some(v1::layout::Kind::Subarray(v1::Subarray {
                            sizes: vec![2],
                            subsizes: vec![1],
                            starts: vec![0],
                            order: 7,
                        })),
                    }),
                )))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "a subarray of more rows than the block limit",
                Send::Call(Some(Call::Op(get(
                    1,
                    Some(v1::Layout {
                        kind: Some(v1::layout::Kind::Subarray(v1::Subarray {
                            sizes: vec![1 << 11, 1 << 11, 1],
                            subsizes: vec![1 << 11, 1 << 11, 1],
                            starts: vec![0; 3],
                            order: 1,
                        })),
                    }),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a resized layout without an inner layout",
                Send::Call(Some(Call::Op(get(1, resized(None, 0, 8, 1))))),
                InvalidArgument,
                Some(C::Type),
            ),
            row(
                "a resized layout whose lb + extent passes i64",
                Send::Call(Some(Call::Op(get(
                    1,
                    resized(contiguous(1), 1, i64::MAX as u64, 1),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a resized layout whose extent passes i64",
                Send::Call(Some(Call::Op(get(
                    1,
                    resized(contiguous(1), 0, u64::MAX, 1),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a resized layout whose copies pass the end of u64",
                Send::Call(Some(Call::Op(get(
                    1,
                    resized(contiguous(1), 0, i64::MAX as u64, 4),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a resized layout of more copies than the block limit",
                Send::Call(Some(Call::Op(get(
                    1,
                    resized(
                        contiguous(1),
                        0,
                        1,
                        onesided_core::layout::MAX_BLOCKS as u64 + 1,
                    ),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a resized layout of u64::MAX copies of an indexed layout with no blocks",
                Send::Call(Some(Call::Op(get(
                    1,
                    resized(
                        Some(v1::Layout {
                            kind: Some(v1::layout::Kind::Indexed(v1::Indexed {
                                blocks: Vec::new(),
                            })),
                        }),
                        0,
                        0,
                        u64::MAX,
                    ),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a resized layout of u64::MAX copies of a vector",
                Send::Call(Some(Call::Op(get(
                    1,
                    resized(
                        Some(v1::Layout {
                            kind: Some(v1::layout::Kind::Vector(v1::Vector {
                                count: 2,
                                blocklen: 1,
                                stride: 2,
                            })),
                        }),
                        0,
                        4,
                        u64::MAX,
                    ),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a resized layout of an inner subarray MPI refuses",
                Send::Call(Some(Call::Op(get(
                    1,
                    resized(
                        Some(v1::Layout {
                            kind: Some(v1::layout::Kind::Subarray(v1::Subarray {
                                sizes: vec![2],
                                subsizes: vec![3],
                                starts: vec![0],
                                order: 0,
                            })),
                        }),
                        0,
                        8,
                        2,
                    ),
                )))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "a resized layout whose last copy is past the window",
                Send::Call(Some(Call::Op(get(1, resized(contiguous(1), -4, 8, 5))))),
                OutOfRange,
                Some(C::RmaRange),
            ),
            row(
                "a put through a resized layout whose copies overlap",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    layout: resized(contiguous(1), 0, 0, 2),
                    ..put(1, vec![7; 2])
                }))),
                InvalidArgument,
                Some(C::Type),
            ),
            row(
                "a struct block of an unknown datatype",
                Send::Call(Some(Call::Op(get(1, structure(&[(0, 99, 1)]))))),
                InvalidArgument,
                Some(C::Type),
            ),
            row(
                "a struct block of no datatype",
                Send::Call(Some(Call::Op(get(
                    1,
                    structure(&[(0, byte, 1), (4, 0, 1)]),
                )))),
                InvalidArgument,
                Some(C::Type),
            ),
            row(
                "more struct blocks than the limit",
                Send::Call(Some(Call::Op(get(
                    1,
                    structure(&vec![(0, byte, 1); onesided_core::layout::MAX_BLOCKS + 1]),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a struct block whose bytes overflow",
                Send::Call(Some(Call::Op(get(
                    1,
                    structure(&[(0, Datatype::F64.code(), u64::MAX / 4)]),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a struct block past the end of u64",
                Send::Call(Some(Call::Op(get(
                    1,
                    structure(&[(u64::MAX, i64_code, 1)]),
                )))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a struct block past the window",
                Send::Call(Some(Call::Op(get(
                    1,
                    structure(&[(0, byte, 1), (28, i64_code, 1)]),
                )))),
                OutOfRange,
                Some(C::RmaRange),
            ),
            row(
                "a struct put whose data is not its blocks' bytes",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    layout: structure(&[(0, byte, 1), (8, i64_code, 1)]),
                    ..put(1, vec![7; 8])
                }))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "an accumulate through a struct of mixed datatypes",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    kind: v1::OpKind::Accumulate as i32,
                    op: v1::Op::Sum as i32,
                    layout: structure(&[(0, i64_code, 1), (8, Datatype::F64.code(), 1)]),
                    ..with_i64(put(1, vec![7; 16]))
                }))),
                InvalidArgument,
                Some(C::Type),
            ),
            row(
                "a get_accumulate through a struct of another datatype",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    kind: v1::OpKind::GetAccumulate as i32,
                    op: v1::Op::NoOp as i32,
                    ..with_i64(get(1, structure(&[(0, Datatype::U64.code(), 2)])))
                }))),
                InvalidArgument,
                Some(C::Type),
            ),
            row(
                "a fetch_and_op through a struct of another datatype",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    kind: v1::OpKind::FetchAndOp as i32,
                    op: v1::Op::Sum as i32,
                    layout: structure(&[(8, Datatype::F64.code(), 1)]),
                    ..with_i64(put(1, vec![7; 8]))
                }))),
                InvalidArgument,
                Some(C::Type),
            ),
            row(
                "a count whose bytes overflow",
                Send::Call(Some(Call::Op(with_i64(get(1, contiguous(u64::MAX)))))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a displacement × disp_unit that overflows",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    disp: u64::MAX,
                    ..with_i64(get(1, contiguous(1)))
                }))),
                OutOfRange,
                Some(C::RmaRange),
            ),
            row(
                "a get of a terabyte",
                Send::Call(Some(Call::Op(get(1, contiguous(1 << 40))))),
                OutOfRange,
                Some(C::RmaRange),
            ),
            row(
                "compare_and_swap without a compare value",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    kind: v1::OpKind::CompareAndSwap as i32,
                    layout: contiguous(1),
                    ..with_i64(put(1, vec![0; 8]))
                }))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "fetch_and_op of two elements",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    kind: v1::OpKind::FetchAndOp as i32,
                    op: onesided_core::Op::Sum.code(),
                    layout: contiguous(2),
                    ..with_i64(put(1, vec![0; 16]))
                }))),
                InvalidArgument,
                Some(C::Count),
            ),
            row(
                "a bitwise accumulate on floats",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    kind: v1::OpKind::GetAccumulate as i32,
                    datatype: Datatype::F32.code(),
                    op: onesided_core::Op::Band.code(),
                    layout: contiguous(1),
                    ..put(1, vec![0; 4])
                }))),
                InvalidArgument,
                Some(C::Op),
            ),
            row(
                "an operation on a rank outside the group",
                Send::Call(Some(Call::Op(get(u32::MAX, contiguous(1))))),
                InvalidArgument,
                Some(C::Rank),
            ),
            row(
                "a lock of a rank outside the group",
                Send::Call(Some(Call::Lock(v1::Lock {
                    window: w,
                    lock_type: v1::LockType::Shared as i32,
                    target: 3,
                    assert: 0,
                }))),
                InvalidArgument,
                Some(C::Rank),
            ),
            row(
                "a fence with every assert bit set",
                Send::Call(Some(Call::Fence(v1::Fence {
                    window: w,
                    assert: u32::MAX,
                    push: Vec::new(),
                }))),
                InvalidArgument,
                Some(C::Assert),
            ),
            row(
                "a post group naming a rank outside",
                Send::Call(Some(Call::Post(v1::Post {
                    window: w,
                    group: vec![1, 99],
                    assert: 0,
                    push: Vec::new(),
                }))),
                InvalidArgument,
                Some(C::Rank),
            ),
            row(
                "a start group naming a rank twice",
                Send::Call(Some(Call::Start(v1::Start {
                    window: w,
                    group: vec![2, 2],
                    assert: 0,
                }))),
                InvalidArgument,
                Some(C::Group),
            ),
            row(
                "pushed bytes whose end overflows",
                Send::Call(Some(Call::Fence(v1::Fence {
                    window: w,
                    assert: 0,
                    push: vec![v1::Segment {
                        offset: u64::MAX,
                        data: Bytes::from_static(&[1]),
                    }],
                }))),
                OutOfRange,
                Some(C::RmaRange),
            ),
            // ---- messages the protocol does not allow ----
            row(
                "a message without a call",
                Send::Call(None),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "a batch inside a batch",
                Send::Call(Some(Call::Batch(v1::Batch {
                    calls: vec![ClientMessage {
                        id: 1000,
                        call: Some(Call::Batch(v1::Batch::default())),
                    }],
                }))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "recording an event only the server records",
                Send::Call(Some(record(w, vec![Event::Sync.to_json()]))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "recording a body that is not an event",
                Send::Call(Some(record(w, vec!["{".to_string()]))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "recording a store over bytes [0, 2^64-1) of a 32-byte copy",
                Send::Call(Some(record(
                    w,
                    vec![Event::Store {
                        ranges: vec![(0, u64::MAX)],
                    }
                    .to_json()],
                ))),
                OutOfRange,
                Some(C::RmaRange),
            ),
            row(
                "recording a load just past the private copy",
                Send::Call(Some(record(
                    w,
                    vec![Event::Load {
                        ranges: vec![(0, 8), (24, 33)],
                    }
                    .to_json()],
                ))),
                OutOfRange,
                Some(C::RmaRange),
            ),
            row(
                "recording a reversed byte range",
                Send::Call(Some(record(
                    w,
                    vec![Event::Store {
                        ranges: vec![(16, 8)],
                    }
                    .to_json()],
                ))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "recording a flush_local naming a rank outside the window",
                Send::Call(Some(record(
                    w,
                    vec![Event::FlushLocal { target: Some(3) }.to_json()],
                ))),
                InvalidArgument,
                Some(C::Rank),
            ),
            row(
                "recording 1025 events in one message",
                Send::Call(Some(record(w, vec![store_event.clone(); 1025]))),
                ResourceExhausted,
                Some(C::NoMem),
            ),
            row(
                "recording 65 537 byte ranges in one message",
                Send::Call(Some(record(
                    w,
                    vec![Event::Load {
                        ranges: (0..65_537).map(|_| (0, 1)).collect(),
                    }
                    .to_json()],
                ))),
                ResourceExhausted,
                Some(C::NoMem),
            ),
            row(
                "client rows that skip ahead of the session's chain",
                Send::Call(Some(client_rows(w, 2, 3, 32))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "client rows ending at the last possible cseq",
                Send::Call(Some(client_rows(w, 1, u64::MAX, 32))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "client rows whose hash is not 32 bytes",
                Send::Call(Some(client_rows(w, 1, 1, 31))),
                InvalidArgument,
                Some(C::Arg),
            ),
            // ---- another world's windows do not exist for this session ----
            row(
                "recording on another world's window",
                Send::Call(Some(record(v.id, vec![store_event.clone()]))),
                NotFound,
                Some(C::Win),
            ),
            row(
                "an operation on another world's window",
                Send::Call(Some(Call::Op(v1::RmaOp {
                    window: v.id,
                    ..get(1, contiguous(1))
                }))),
                NotFound,
                Some(C::Win),
            ),
            row(
                "opening another world's window by name",
                Send::Call(Some(Call::OpenWindow(v1::OpenWindow {
                    name: v_name.clone(),
                    with_copy: false,
                }))),
                NotFound,
                Some(C::Win),
            ),
            row(
                "freeing another world's window",
                Send::Call(Some(Call::WinFree(v1::WinFree { window: v.id }))),
                NotFound,
                Some(C::Win),
            ),
            row(
                "set_info on another world's window",
                Send::Call(Some(Call::SetInfo(v1::SetInfo {
                    window: v.id,
                    info: Vec::new(),
                }))),
                NotFound,
                Some(C::Win),
            ),
            row(
                "a dynamic window created by the ranks with memory",
                Send::Call(Some(Call::CreateWindow(v1::CreateWindow {
                    name: "made".into(),
                    size: 8,
                    disp_unit: 1,
                    info: Vec::new(),
                    flavor: v1::Flavor::Dynamic as i32,
                    model: 0,
                    group: Vec::new(),
                }))),
                InvalidArgument,
                Some(C::Size),
            ),
            row(
                "a dynamic window created by the ranks with disp_unit 8",
                Send::Call(Some(Call::CreateWindow(v1::CreateWindow {
                    name: "made".into(),
                    size: 0,
                    disp_unit: 8,
                    info: Vec::new(),
                    flavor: v1::Flavor::Dynamic as i32,
                    model: 0,
                    group: Vec::new(),
                }))),
                InvalidArgument,
                Some(C::Disp),
            ),
            row(
                "a window created by the ranks with an info value MPI cannot mean",
                Send::Call(Some(Call::CreateWindow(v1::CreateWindow {
                    name: "made".into(),
                    size: 8,
                    disp_unit: 1,
                    info: vec![v1::InfoEntry {
                        key: "no_locks".into(),
                        value: "perhaps".into(),
                    }],
                    flavor: 0,
                    model: 0,
                    group: Vec::new(),
                }))),
                InvalidArgument,
                Some(C::Info),
            ),
            row(
                "a window created by the ranks over a group without the caller",
                Send::Call(Some(Call::CreateWindow(v1::CreateWindow {
                    name: "made".into(),
                    size: 8,
                    disp_unit: 1,
                    info: Vec::new(),
                    flavor: 0,
                    model: 0,
                    group: vec![1, 2],
                }))),
                InvalidArgument,
                Some(C::Group),
            ),
            row(
                "a window created by the ranks over a group naming a rank twice",
                Send::Call(Some(Call::CreateWindow(v1::CreateWindow {
                    name: "made".into(),
                    size: 8,
                    disp_unit: 1,
                    info: Vec::new(),
                    flavor: 0,
                    model: 0,
                    group: vec![0, 0],
                }))),
                InvalidArgument,
                Some(C::Group),
            ),
            row(
                "publishing stores to a window of the separate model",
                Send::Call(Some(Call::Publish(v1::Publish {
                    window: w,
                    push: vec![v1::Segment {
                        offset: 0,
                        data: Bytes::from_static(&[9]),
                    }],
                    seq: 1,
                }))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "attaching memory to a window that is not dynamic",
                Send::Call(Some(Call::Attach(v1::Attach {
                    window: w,
                    size: 8,
                    at: 0,
                }))),
                FailedPrecondition,
                Some(C::RmaFlavor),
            ),
            row(
                "detaching memory from a window that is not dynamic",
                Send::Call(Some(Call::Detach(v1::Detach { window: w, base }))),
                FailedPrecondition,
                Some(C::RmaFlavor),
            ),
            row(
                "a message to a rank outside the world",
                Send::Call(Some(Call::Send(v1::Send {
                    dest: 1000,
                    tag: 0,
                    context: 0,
                    payload: Bytes::from_static(b"x"),
                }))),
                InvalidArgument,
                Some(C::Rank),
            ),
            row(
                "a message with a negative tag",
                Send::Call(Some(Call::Send(v1::Send {
                    dest: 0,
                    tag: -7,
                    context: 0,
                    payload: Bytes::from_static(b"x"),
                }))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "a receive from a rank outside the world",
                Send::Call(Some(Call::Receive(v1::Receive {
                    source: u32::MAX,
                    ..Default::default()
                }))),
                InvalidArgument,
                Some(C::Rank),
            ),
            row(
                "an immediate receive that is not a probe",
                Send::Call(Some(Call::Receive(v1::Receive {
                    any_source: true,
                    any_tag: true,
                    immediate: true,
                    ..Default::default()
                }))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "attaching memory to another world's window",
                Send::Call(Some(Call::Attach(v1::Attach {
                    window: v.id,
                    size: 8,
                    at: 0,
                }))),
                NotFound,
                Some(C::Win),
            ),
            row(
                "attaching a region that overlaps one attached",
                Send::Call(Some(Call::Attach(v1::Attach {
                    window: d,
                    size: 8,
                    at: base + 60,
                }))),
                ResourceExhausted,
                Some(C::RmaAttach),
            ),
            row(
                "attaching a region below the first address",
                Send::Call(Some(Call::Attach(v1::Attach {
                    window: d,
                    size: 8,
                    at: 8,
                }))),
                ResourceExhausted,
                Some(C::RmaAttach),
            ),
            row(
                "attaching more than a rank may expose",
                Send::Call(Some(Call::Attach(v1::Attach {
                    window: d,
                    size: MAX_RANK_BYTES,
                    at: 0,
                }))),
                ResourceExhausted,
                Some(C::RmaAttach),
            ),
            row(
                "attaching a region at an address so high its end overflows",
                Send::Call(Some(Call::Attach(v1::Attach {
                    window: d,
                    size: 8,
                    at: u64::MAX - 4,
                }))),
                ResourceExhausted,
                Some(C::RmaAttach),
            ),
            row(
                "detaching an address inside a region, not its start",
                Send::Call(Some(Call::Detach(v1::Detach {
                    window: d,
                    base: base + 8,
                }))),
                ResourceExhausted,
                Some(C::RmaAttach),
            ),
            row(
                "detaching address 0",
                Send::Call(Some(Call::Detach(v1::Detach { window: d, base: 0 }))),
                ResourceExhausted,
                Some(C::RmaAttach),
            ),
            row(
                "following the public copy of a window of the separate model",
                Send::Call(Some(Call::Follow(v1::Follow { window: w }))),
                InvalidArgument,
                Some(C::Arg),
            ),
            row(
                "publishing stores to another world's window",
                Send::Call(Some(Call::Publish(v1::Publish {
                    window: v.id,
                    push: Vec::new(),
                    seq: 1,
                }))),
                NotFound,
                Some(C::Win),
            ),
            row(
                "set_info with a value MPI cannot mean",
                Send::Call(Some(Call::SetInfo(v1::SetInfo {
                    window: w,
                    info: vec![v1::InfoEntry {
                        key: "accumulate_ops".into(),
                        value: "any".into(),
                    }],
                }))),
                InvalidArgument,
                Some(C::Info),
            ),
            row(
                "set_info with a key over MPI_MAX_INFO_KEY",
                Send::Call(Some(Call::SetInfo(v1::SetInfo {
                    window: w,
                    info: vec![v1::InfoEntry {
                        key: "k".repeat(300),
                        value: String::new(),
                    }],
                }))),
                InvalidArgument,
                Some(C::Info),
            ),
            row(
                "a fence on a window id that never existed",
                Send::Call(Some(Call::Fence(v1::Fence {
                    window: u64::MAX,
                    assert: 0,
                    push: Vec::new(),
                }))),
                NotFound,
                Some(C::Win),
            ),
            // ---- the audit service ----
            row(
                "replay of a window never recorded",
                Send::Unary(
                    REPLAY,
                    admin_meta.clone(),
                    encode(&v1::ReplayRequest {
                        window: u64::MAX,
                        at: 0,
                    }),
                ),
                NotFound,
                Some(C::Win),
            ),
            row(
                "an export in an unknown format",
                Send::Unary(
                    EXPORT,
                    admin_meta.clone(),
                    encode(&v1::ExportRequest {
                        window: w,
                        format: "svg".to_string(),
                    }),
                ),
                InvalidArgument,
                Some(C::Arg),
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
        hostile
            .ok(Call::LockAll(v1::LockAll {
                window: w,
                assert: 0,
            }))
            .await;
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
        hostile
            .ok(Call::UnlockAll(v1::UnlockAll {
                window: w,
                push: Vec::new(),
            }))
            .await;
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
    let (zero, one, two) = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        tokio::join!(
            sessions[0].create(&ordered),
            sessions[1].create(&reordered),
            sessions[2].create(&ordered),
        )
    })
    .await
    .expect("the members were never told: they wait for a match that cannot come");
    for (rank, created) in [zero, one, two].into_iter().enumerate() {
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
    let (zero, one, two) = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        tokio::join!(
            sessions[0].create(&reordered),
            sessions[1].create(&reordered),
            sessions[2].create(&reordered),
        )
    })
    .await
    .expect("the members agreeing afterwards were not matched");
    let ranks: Vec<u32> = [zero, one, two]
        .into_iter()
        .map(|window| window.unwrap().rank())
        .collect();
    assert_eq!(ranks, vec![1, 0, 2]);
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
    let web: std::net::SocketAddr = server
        .field("url=")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
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
    let metrics: std::net::SocketAddr = server
        .field("url=")
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .parse()
        .unwrap();
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

/// Opens a session over bare HTTP/2 with `token` and, once greeted, writes
/// [`SMALL_CALLS`] heartbeats (calls the session answers with nothing), each in a DATA frame
/// of its own; then reads until the stream or the connection ends, and says why (an error
/// when the connection was ended).
async fn heartbeats_in_frames_of_their_own(url: &str, token: &str) -> Result<(), String> {
    use bytes::BufMut;
    use prost::Message;
    let (mut client, request, connection) =
        crate::raw::bare_request(url, crate::raw::SESSION, token, None).await;
    let (response, mut send) = client.send_request(request, false).unwrap();
    // the greeting: the session reads its stream from here on
    let mut body = response.await.unwrap().into_body();
    let greeting = body.data().await.unwrap().unwrap();
    let _ = body.flow_control().release_capacity(greeting.len());
    for id in 1..=SMALL_CALLS {
        let bytes = ClientMessage {
            id,
            call: Some(Call::Heartbeat(v1::Heartbeat {})),
        }
        .encode_to_vec();
        let mut frame = bytes::BytesMut::with_capacity(5 + bytes.len());
        frame.put_u8(0);
        frame.put_u32(bytes.len() as u32);
        frame.extend_from_slice(&bytes);
        if let Err(error) = send.send_data(frame.freeze(), false) {
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
    use bytes::{Buf, BufMut, BytesMut};
    use prost::Message;
    let framed = |message: ClientMessage| {
        let bytes = message.encode_to_vec();
        let mut frame = BytesMut::with_capacity(5 + bytes.len());
        frame.put_u8(0);
        frame.put_u32(bytes.len() as u32);
        frame.extend_from_slice(&bytes);
        frame.freeze()
    };
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
            window: desc.id,
            target: 0,
            kind: v1::OpKind::Get as i32,
            datatype: Datatype::Byte.code(),
            op: 0,
            disp: id % 64,
            layout: contiguous(1),
            data: Bytes::new(),
            compare: Bytes::new(),
            request_based: false,
            token: 0,
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
