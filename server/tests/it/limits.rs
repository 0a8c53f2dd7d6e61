//! The server's limits with the state behind them (window bytes come back when windows go,
//! pending operations free their slots when answered, an oversized message or a client that
//! does not read its answers ends only its own session), and client deadlines on unary calls,
//! response streams and sessions.

use std::time::Duration;

use onesided_client::{Admin, Audit, ErrorClass, LockType, Session, WindowSpec};
use onesided_proto::v1::client_message::Call;
use onesided_proto::v1::{self, server_message::Reply};
use onesided_server::ServerConfig;
use tonic::Code;

use crate::raw::{bare_call, contiguous, encode, raw, Meta, RawSession};
use crate::start_on;
use crate::{spawn_server_with, unique, Fixture, TempDir, TestServer, ADMIN_TOKEN};

/// A world (named after "world") of `nranks` on `server` with a window `name` of `size`
/// bytes a rank: the world's name, its tokens and the window's description.
async fn a_world_with_bytes(
    server: &TestServer,
    nranks: u32,
    name: &str,
    size: u64,
) -> (String, Vec<String>, onesided_client::WindowDesc) {
    let world = unique("world");
    let spec = WindowSpec::bytes(name, nranks, size, 1);
    let tokens = crate::world_with(&server.admin, &world, nranks, &[])
        .await
        .tokens;
    let desc = server.admin.create_window(&world, &spec).await.unwrap();
    (world, tokens, desc)
}

/// [`bare_call`] of `path` with the admin token, `message` and `timeout`.
async fn admin_call(
    url: &str,
    path: &str,
    timeout: &str,
    message: bytes::Bytes,
) -> (Vec<bytes::Bytes>, Code, Duration) {
    bare_call(url, path, ADMIN_TOKEN, timeout, Some(message)).await
}

fn no_mem<T: std::fmt::Debug>(result: onesided_client::Result<T>) -> (Code, Option<ErrorClass>) {
    let error = result.expect_err("over a limit");
    (error.code(), error.class())
}

const EXHAUSTED: (Code, Option<ErrorClass>) = (Code::ResourceExhausted, Some(ErrorClass::NoMem));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_bytes_come_back_when_windows_are_freed_or_their_world_deleted() {
    let server = spawn_server_with(|config| {
        config.limits.max_window_bytes_per_rank = 500;
        config.limits.max_window_bytes = 1000;
    })
    .await;
    let admin = &server.admin;
    let world = unique("world");
    let tokens = admin.create_world(&world, 2).await.unwrap().tokens;
    let spec = |name: &str, size: u64| WindowSpec::bytes(name, 2, size, 1);
    assert_eq!(
        no_mem(admin.create_window(&world, &spec("wide", 501)).await),
        EXHAUSTED,
        "one rank over its limit"
    );
    admin.create_window(&world, &spec("a", 400)).await.unwrap();
    assert_eq!(
        no_mem(admin.create_window(&world, &spec("b", 150)).await),
        EXHAUSTED,
        "1100 of 1000 bytes"
    );
    // exactly the limit fits
    admin.create_window(&world, &spec("b", 100)).await.unwrap();
    let names = |windows: Vec<onesided_client::WindowDesc>| {
        windows
            .into_iter()
            .map(|desc| desc.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(names(admin.list_windows(&world).await.unwrap()), ["a", "b"]);

    admin.free_window(&world, "a").await.unwrap();
    let other = unique("other");
    admin.create_world(&other, 2).await.unwrap();
    admin.create_window(&other, &spec("c", 400)).await.unwrap();
    admin.delete_world(&other).await.unwrap();
    admin.create_window(&world, &spec("d", 400)).await.unwrap();

    // MPI_Win_free by every rank gives the bytes back too
    let mut sessions = Vec::new();
    for token in &tokens {
        sessions.push(Session::attach(&server.url, token).await.unwrap());
    }
    let mut windows = Vec::new();
    for session in &sessions {
        windows.push(session.window("d").await.unwrap());
    }
    assert_eq!(
        no_mem(admin.create_window(&world, &spec("e", 400)).await),
        EXHAUSTED
    );
    let frees = windows.iter().map(|window| window.free());
    for freed in futures::future::join_all(frees).await {
        freed.unwrap();
    }
    admin.create_window(&world, &spec("e", 400)).await.unwrap();
    assert_eq!(names(admin.list_windows(&world).await.unwrap()), ["b", "e"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_a_restart_brings_back_count_toward_the_servers_bytes() {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-limits")));
    let limited = |config: &mut ServerConfig| config.limits.max_window_bytes = 1000;
    let spec = |name: &str, size: u64| WindowSpec::bytes(name, 2, size, 1);
    let first = start_on(&data.0, limited).await;
    let admin = Admin::connect(&first.url, ADMIN_TOKEN).await.unwrap();
    admin.create_world("w", 2).await.unwrap();
    admin.create_window("w", &spec("a", 400)).await.unwrap();
    first.stop().await;
    let second = start_on(&data.0, limited).await;
    let admin = Admin::connect(&second.url, ADMIN_TOKEN).await.unwrap();
    assert_eq!(
        no_mem(admin.create_window("w", &spec("b", 150)).await),
        EXHAUSTED
    );
    admin.create_window("w", &spec("b", 100)).await.unwrap();
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_may_have_only_so_many_operations_unanswered() {
    let server = spawn_server_with(|config| config.limits.max_pending_ops = 4).await;
    let name = unique("w");
    let (_, tokens, desc) = a_world_with_bytes(&server, 2, &name, 16).await;
    let mut grpc = raw(&server.url).await;
    let mut ranks = Vec::new();
    for token in &tokens {
        let (mut session, _) = RawSession::open(&mut grpc, &Meta::bearer(token))
            .await
            .unwrap();
        session.ok(crate::raw::open_window(&name)).await;
        ranks.push(session);
    }
    let fence = |assert| {
        Call::Fence(v1::Fence {
            window: desc.id,
            assert,
            push: Vec::new(),
        })
    };
    let put = |disp: u64, value: u8| {
        Call::Op(v1::RmaOp {
            window: desc.id,
            target: 1,
            kind: v1::OpKind::Put as i32,
            datatype: onesided_core::Datatype::Byte.code(),
            disp,
            layout: contiguous(1),
            data: vec![value].into(),
            ..Default::default()
        })
    };
    let noprecede = onesided_client::Assert::NOPRECEDE;
    let nosucceed = onesided_client::Assert::NOSUCCEED;
    let (r0, r1) = ranks.split_at_mut(1);
    let (r0, r1) = (&mut r0[0], &mut r1[0]);
    for round in 0..2u64 {
        // each round is a fence sequence of its own that rank 1 has not entered yet: the puts
        // wait at the target, unanswered, however fast the server is (were rank 1 in the
        // epoch, they would be applied and answered at once, racing the fifth call)
        r0.ok(fence(noprecede)).await;
        let sent: Vec<u64> = (0..4)
            .map(|i| r0.send(Some(put(round * 8 + i, i as u8 + 1))))
            .collect();
        let refused = r0.call(Some(put(round * 8 + 4, 99))).await;
        let Some(Reply::Error(failure)) = refused.reply else {
            panic!("round {round}: a fifth operation was accepted: {refused:?}");
        };
        assert_eq!(Code::from_i32(failure.code), Code::ResourceExhausted);
        assert_eq!(
            failure.error.map(|error| error.class),
            Some(ErrorClass::NoMem.code())
        );
        // rank 1 enters and both close the epoch: the four are applied and answered, freeing
        // their slots
        let closing = r0.send(Some(fence(nosucceed)));
        r1.ok(fence(noprecede)).await;
        r1.ok(fence(nosucceed)).await;
        let mut answered = Vec::new();
        while answered.len() < 5 {
            let reply = r0.next().await.unwrap().expect("an answer");
            assert!(
                !matches!(reply.reply, Some(Reply::Error(_))),
                "round {round}: {reply:?}"
            );
            answered.push(reply.id);
        }
        answered.sort_unstable();
        let mut expected = sent.clone();
        expected.push(closing);
        assert_eq!(answered, expected, "round {round}");
    }
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let replayed = audit.replay(desc.id, None).await.unwrap();
    assert_eq!(
        replayed.ranks[1],
        [1, 2, 3, 4, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0],
        "the refused puts changed nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_the_size_limit_ends_only_its_own_session() {
    let server = spawn_server_with(|config| config.limits.max_message_bytes = 64 << 10).await;
    let fixture = Fixture::on(server, 2).await;
    let name = unique("w");
    let w = fixture
        .window(WindowSpec::bytes(&name, 2, 128 << 10, 1))
        .await;
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].put(1, 0, &vec![7u8; 100 << 10]).unwrap();
    let refused = w[0].unlock(1).await.unwrap_err();
    assert_eq!((refused.code(), refused.class()), EXHAUSTED, "{refused}");
    // the session is over: later calls fail with the status it ended with
    let after = w[0].session().barrier().await.unwrap_err();
    assert_eq!((after.code(), after.class()), EXHAUSTED, "{after}");
    // another rank, and a new session of the same rank, carry on: nothing was applied
    w[1].lock(LockType::Shared, 1, 0).await.unwrap();
    let seen = w[1].get::<u8>(1, 0, 128 << 10).unwrap();
    w[1].unlock(1).await.unwrap();
    assert!(seen.value().await.unwrap().iter().all(|&byte| byte == 0));
    let again = Session::attach(&fixture.server.url, &fixture.tokens[0])
        .await
        .unwrap()
        .window(&name)
        .await
        .unwrap();
    again.lock(LockType::Exclusive, 1, 0).await.unwrap();
    again.put(1, 0, &vec![7u8; 60 << 10]).unwrap();
    again.unlock(1).await.unwrap();
    // and its put landed, exactly
    w[1].lock(LockType::Shared, 1, 0).await.unwrap();
    let seen = w[1].get::<u8>(1, 0, 128 << 10).unwrap();
    w[1].unlock(1).await.unwrap();
    let seen = seen.value().await.unwrap();
    assert!(seen[..60 << 10].iter().all(|&byte| byte == 7));
    assert!(seen[60 << 10..].iter().all(|&byte| byte == 0));
}

/// A client that keeps calling and never reads its answers: the answers fill its session's
/// outbound stream up to the capacity the pending-operation budget sets, and the session then
/// ends with RESOURCE_EXHAUSTED / `MPI_ERR_NO_MEM` instead of queueing them without bound. Like
/// any ended session it gives up its lock, which a real client of another rank, waiting for
/// it at the same target, then gets; that client's session carries on. (The real client
/// always reads its stream, so the rank that does not read is a raw session.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_its_answers_ends_only_its_own_session() {
    let server = spawn_server_with(|config| {
        config.limits.max_pending_ops = 4;
        config.durability = onesided_server::audit::Durability::Off;
    })
    .await;
    let capacity = onesided_server::limits::Limits {
        max_pending_ops: 4,
        ..Default::default()
    }
    .outbound_capacity();
    let name = unique("w");
    let (_, tokens, desc) = a_world_with_bytes(&server, 2, &name, 1024).await;
    // rank 0, raw: an exclusive lock at rank 1, held (its request travelled with the get).
    // Its connection takes what HTTP/2 allows by default without reading, 64 KiB, so what the
    // server holds for it is its own (tonic's client would take 2 MiB)
    let (mut grpc, mut r0) = crate::raw::unread_session(&server.url, &tokens[0], &name).await;
    r0.ok(Call::Lock(v1::Lock {
        window: desc.id,
        target: 1,
        lock_type: LockType::Exclusive.code(),
        assert: 0,
    }))
    .await;
    let get = || {
        Call::Op(v1::RmaOp {
            window: desc.id,
            target: 1,
            kind: v1::OpKind::Get as i32,
            datatype: onesided_core::Datatype::Byte.code(),
            layout: contiguous(1024),
            ..Default::default()
        })
    };
    r0.ok(get()).await;
    // rank 1, a real client, asks for an exclusive lock at its own rank: it waits for rank 0
    let (_, w1) = crate::attached_window(&server.url, &tokens[1], &name).await;
    let granted =
        tokio::spawn(async move { w1.lock(LockType::Exclusive, 1, 0).await.map(|()| w1) });
    // rank 0 keeps reading 1 KiB and never reads an answer: far more answers (1 KiB of data,
    // or the refusal of a get over the budget of 4) than the stream holds, and than HTTP/2's
    // window and the server's send buffer (400 KiB) hold on top of it
    // (the session may end while they are still being sent: then the rest cannot go)
    let mut sent = 0;
    for _ in 0..capacity * 32 {
        if !r0.try_send(Some(get())) {
            break;
        }
        sent += 1;
    }
    // its session ends and gives up the lock: rank 1 gets it, and works on
    let w1 = tokio::time::timeout(Duration::from_secs(60), granted)
        .await
        .expect("rank 0's session never ended: its answers queue without bound")
        .unwrap()
        .unwrap();
    w1.put(1, 0, &[9u8; 4]).unwrap();
    w1.unlock(1).await.unwrap();
    w1.lock(LockType::Shared, 1, 0).await.unwrap();
    let seen = w1.get::<u8>(1, 0, 4).unwrap();
    w1.unlock(1).await.unwrap();
    assert_eq!(seen.value().await.unwrap(), [9u8; 4]);
    // rank 0's stream, read at last: what was queued, then the status it ended with
    let mut queued = 0;
    let status = loop {
        match r0.next().await {
            Ok(Some(_)) => queued += 1,
            Ok(None) => panic!("the stream ended without a status after {queued} answers"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let error = onesided_proto::rma_from_status(&status).unwrap_or_else(|| {
        panic!("an MPI error in the status {status:?} (sent {sent}, queued {queued})")
    });
    assert_eq!(error.class, ErrorClass::NoMem, "{status:?}");
    // and not every answer: those that found the stream full were dropped, not queued
    assert!(queued < sent, "{queued} of {sent} answers arrived");
    // only the session ended, not the connection it shared: rank 0 attaches again over it
    let (mut again, _) = RawSession::open(&mut grpc, &Meta::bearer(&tokens[0]))
        .await
        .expect("the connection of the ended session still carries calls");
    again.ok(crate::raw::open_window(&name)).await;
}

/// README: a message over `--max-message-bytes` is refused as soon as its length is known,
/// before it is buffered. Each call here sends a length prefix claiming one byte over the
/// default limit of 1 GiB and three bytes of the message, then sends nothing more and keeps
/// its request open: the refusal must come from the prefix alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_is_refused_from_its_length_prefix_alone() {
    use crate::raw::claim_a_message;
    use onesided_server::limits::Limits;
    let fixture = Fixture::new(1).await;
    let url = &fixture.server.url;
    let over = u32::try_from(Limits::default().max_message_bytes + 1).unwrap();
    let patience = Duration::from_secs(10);
    let class = |status: &tonic::Status| {
        (
            status.code(),
            onesided_proto::rma_from_status(status).map(|error| error.class),
        )
    };
    // a unary call: the method never runs
    let (messages, status) = claim_a_message(
        url,
        "/onesided.v1.Admin/CreateWorld",
        ADMIN_TOKEN,
        over,
        3,
        patience,
    )
    .await
    .expect("no answer: the server waits for the message's bytes");
    assert!(messages.is_empty());
    assert_eq!(class(&status), EXHAUSTED, "{status:?}");
    assert!(status.message().contains("exceeds"), "{status:?}");
    // a session: greeted, then ended with that status
    let (messages, status) = claim_a_message(
        url,
        "/onesided.v1.Rma/Session",
        &fixture.tokens[0],
        over,
        3,
        patience,
    )
    .await
    .expect("no answer: the session waits for the message's bytes");
    assert_eq!(messages.len(), 1, "the greeting and nothing else");
    assert_eq!(class(&status), EXHAUSTED, "{status:?}");
    // nothing was created; the rank attaches again
    assert_eq!(fixture.server.admin.list_worlds().await.unwrap().len(), 1);
    Session::attach(url, &fixture.tokens[0]).await.unwrap();
}

const DEADLINE: Duration = Duration::from_millis(300);

/// Answered at the deadline, give or take: not before, and not much after.
fn at_the_deadline(took: Duration) -> bool {
    took >= DEADLINE && took < Duration::from_secs(10)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unary_call_that_cannot_finish_in_time_is_deadline_exceeded() {
    let database = crate::store::PgDatabase::create().await;
    let url = database.url.clone();
    let server = spawn_server_with(move |config| config.database_url = Some(url)).await;
    let (world, _, desc) = a_world_with_bytes(&server, 2, "w", 8).await;
    // the log can be neither read nor written while this transaction holds its table
    let mut lock = <sqlx::PgConnection as sqlx::Connection>::connect(&database.url)
        .await
        .unwrap();
    sqlx::query("BEGIN").execute(&mut lock).await.unwrap();
    sqlx::query("LOCK TABLE audit_events IN ACCESS EXCLUSIVE MODE")
        .execute(&mut lock)
        .await
        .unwrap();
    let verify = encode(&v1::VerifyRequest { window: desc.id });
    let (_, code, took) =
        admin_call(&server.url, "/onesided.v1.Audit/Verify", "300m", verify).await;
    assert_eq!(code, Code::DeadlineExceeded);
    assert!(at_the_deadline(took), "answered after {took:?}");
    // a window's creation waits for its commit: answered at the deadline, it still finishes,
    // exactly once, when the log is free again
    let create = encode(&v1::CreateWindowRequest {
        group: Vec::new(),
        world: world.clone(),
        name: "late".to_string(),
        flavor: 0,
        model: 0,
        sizes: vec![8, 8],
        disp_units: vec![1, 1],
        info: Vec::new(),
    });
    let (_, code, took) = admin_call(
        &server.url,
        "/onesided.v1.Admin/CreateWindow",
        "300m",
        create,
    )
    .await;
    assert_eq!(code, Code::DeadlineExceeded);
    assert!(at_the_deadline(took), "answered after {took:?}");
    sqlx::query("COMMIT").execute(&mut lock).await.unwrap();
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    assert_eq!(audit.verify(desc.id).await.unwrap().first_bad, None);
    // nothing tells a client when the creation it gave up on finishes: wait for it, bounded
    let appeared = tokio::time::timeout(Duration::from_secs(10), async {
        while server.admin.describe_window(&world, "late").await.is_err() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(appeared.is_ok(), "the window never appeared");
    let again = server
        .admin
        .create_window(&world, &WindowSpec::bytes("late", 2, 8, 1))
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists, "{again}");
    let names: Vec<String> = server
        .admin
        .list_windows(&world)
        .await
        .unwrap()
        .into_iter()
        .map(|desc| desc.name)
        .collect();
    assert_eq!(names, ["late", "w"]);
    drop(server);
    drop(database);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_deadline_passed_on_arrival_is_not_started() {
    let server = spawn_server_with(|_| {}).await;
    let name = unique("late");
    let create = encode(&v1::CreateWorldRequest {
        name: name.clone(),
        ranks: 2,
    });
    let (_, code, _) =
        admin_call(&server.url, "/onesided.v1.Admin/CreateWorld", "0n", create).await;
    assert_eq!(code, Code::DeadlineExceeded);
    let worlds = server.admin.list_worlds().await.unwrap();
    assert!(worlds.iter().all(|world| world.name != name), "{worlds:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_end_at_the_clients_deadline() {
    let server = spawn_server_with(|_| {}).await;
    let (_, tokens, desc) = a_world_with_bytes(&server, 1, "w", 8).await;

    // following the log: what is recorded arrives, then the deadline ends the stream
    let follow = encode(&v1::EventsRequest {
        window: desc.id,
        from: 1,
        follow: true,
    });
    let (events, code, took) =
        admin_call(&server.url, "/onesided.v1.Audit/Events", "300m", follow).await;
    assert_eq!(code, Code::DeadlineExceeded);
    assert!(at_the_deadline(took), "ended after {took:?}");
    let kinds: Vec<String> = events
        .into_iter()
        .map(|bytes| {
            <v1::AuditEvent as prost::Message>::decode(bytes)
                .unwrap()
                .kind
        })
        .collect();
    assert_eq!(kinds, ["window_created"]);

    // a session: greeted, then ended at its deadline
    let (messages, code, took) = bare_call(
        &server.url,
        "/onesided.v1.Rma/Session",
        &tokens[0],
        "300m",
        None,
    )
    .await;
    assert_eq!(code, Code::DeadlineExceeded);
    assert!(at_the_deadline(took), "ended after {took:?}");
    assert_eq!(messages.len(), 1, "the greeting");
}
