//! Calls sent ahead of their answers (the proto takes a session's calls in order): fences and
//! `set_info` back to back, batches of them, and a batch past the pending-operation budget —
//! every call answered, each batch by one `Batched` reply in its order. Raw sessions, so that
//! nothing on the client side waits between the calls.

use std::time::Duration;

use onesided_client::WindowSpec;
use onesided_core::ErrorClass;
use onesided_proto::v1::{self, client_message::Call, server_message::Reply, ServerMessage};
use tonic::Code;

use crate::raw::{contiguous, encode, raw, Meta, RawSession};
use crate::{spawn_server, spawn_server_with, unique, TestServer};

/// Long enough for any answer on this machine; an answer that never comes fails the test here
/// instead of hanging it.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

/// A world of `nranks` ranks and a window of 8 bytes per rank, each rank on a raw session with
/// the window open: the sessions and the window's id.
async fn world(server: &TestServer, nranks: u32) -> (Vec<RawSession>, u64, String, String) {
    let world = unique("pipelined");
    let tokens = server
        .admin
        .create_world(&world, nranks)
        .await
        .unwrap()
        .tokens;
    let name = unique("w");
    server
        .admin
        .create_window(&world, &WindowSpec::bytes(&name, nranks, 8, 1))
        .await
        .unwrap();
    let mut sessions = Vec::new();
    let mut window = 0;
    for token in &tokens {
        let mut grpc = raw(&server.url).await;
        let (mut session, _) = RawSession::open(&mut grpc, &Meta::bearer(token))
            .await
            .unwrap();
        window = session.open_window(&name).await;
        sessions.push(session);
    }
    (sessions, window, world, name)
}

async fn next(session: &mut RawSession) -> ServerMessage {
    tokio::time::timeout(ANSWER_WITHIN, session.next())
        .await
        .expect("no answer in time: a call was never answered")
        .expect("the stream failed")
        .expect("the session ended instead of answering")
}

fn fence(window: u64) -> Call {
    Call::Fence(v1::Fence {
        window,
        assert: 0,
        push: Vec::new(),
    })
}

fn succeeded(message: &ServerMessage) -> bool {
    !matches!(message.reply, Some(Reply::Error(_)) | None)
}

/// Each of four ranks sends two fences before the first is answered; every rank gets both
/// answers, the first fence's first (the probe saw some ranks never answered, 4 of 4 trials).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_fences_are_all_answered_in_order() {
    let server = spawn_server().await;
    for _trial in 0..4 {
        let (mut sessions, window, ..) = world(&server, 4).await;
        let sent: Vec<(u64, u64)> = sessions
            .iter_mut()
            .map(|session| {
                (
                    session.send(Some(fence(window))),
                    session.send(Some(fence(window))),
                )
            })
            .collect();
        for (session, (first, second)) in sessions.iter_mut().zip(sent) {
            let a = next(session).await;
            let b = next(session).await;
            assert_eq!((a.id, b.id), (first, second), "{a:?} {b:?}");
            assert!(succeeded(&a) && succeeded(&b), "{a:?} {b:?}");
        }
    }
}

/// `Batch[fence, fence]` on four ranks: every rank gets one Batched reply holding both
/// answers, in the batch's order (the probe saw 3 of 4 ranks get only the second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_two_fences_answers_both_in_one_reply() {
    let server = spawn_server().await;
    let (mut sessions, window, ..) = world(&server, 4).await;
    for session in &mut sessions {
        let batch = v1::Batch {
            calls: vec![
                v1::ClientMessage {
                    id: 100,
                    call: Some(fence(window)),
                },
                v1::ClientMessage {
                    id: 101,
                    call: Some(fence(window)),
                },
            ],
        };
        session.send(Some(Call::Batch(batch)));
    }
    for session in &mut sessions {
        let reply = next(session).await;
        let Some(Reply::Batched(batched)) = &reply.reply else {
            panic!("not a Batched reply: {reply:?}");
        };
        let ids: Vec<u64> = batched.replies.iter().map(|reply| reply.id).collect();
        assert_eq!(ids, [100, 101], "{batched:?}");
        assert!(batched.replies.iter().all(succeeded), "{batched:?}");
    }
}

/// Two `set_info` calls back to back on both ranks are matched in order (the probe got
/// INTERNAL, "rank 0 arrived twice at the same collective"), and the second applies on top of
/// the first: both keys are in use afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_set_infos_are_matched_in_order_and_both_apply() {
    let server = spawn_server().await;
    let (mut sessions, window, world, name) = world(&server, 2).await;
    let set = |key: &str, value: &str| {
        Call::SetInfo(v1::SetInfo {
            window,
            info: vec![v1::InfoEntry {
                key: key.into(),
                value: value.into(),
            }],
        })
    };
    let sent: Vec<(u64, u64)> = sessions
        .iter_mut()
        .map(|session| {
            (
                session.send(Some(set("accumulate_ops", "same_op"))),
                session.send(Some(set("accumulate_ordering", "none"))),
            )
        })
        .collect();
    for (session, (first, second)) in sessions.iter_mut().zip(sent) {
        let a = next(session).await;
        let b = next(session).await;
        assert_eq!((a.id, b.id), (first, second));
        assert!(succeeded(&a) && succeeded(&b), "{a:?} {b:?}");
    }
    let info = server
        .admin
        .describe_window(&world, &name)
        .await
        .unwrap()
        .info
        .to_pairs();
    for pair in [
        ("accumulate_ops", "same_op"),
        ("accumulate_ordering", "none"),
    ] {
        assert!(
            info.iter()
                .any(|(key, value)| (key.as_str(), value.as_str()) == pair),
            "{pair:?} not in use: {info:?}"
        );
    }
}

/// A batch of 3000 gets with the pending-operation budget at 1000 is refused whole: one
/// Batched reply holding all 3000 answers in its order, each RESOURCE_EXHAUSTED, and nothing
/// else (the probe saw the answers of the 1000 calls served on their own and a Batched reply
/// with the refusals). A batch the budget can take is served, in one reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_over_the_pending_budget_is_refused_whole_in_one_reply() {
    let server = spawn_server_with(|config| config.limits.max_pending_ops = 1000).await;
    let (mut sessions, window, ..) = world(&server, 1).await;
    let session = &mut sessions[0];
    session
        .ok(Call::LockAll(v1::LockAll { window, assert: 0 }))
        .await;
    let get = v1::RmaOp {
        window,
        target: 0,
        kind: v1::OpKind::Get as i32,
        datatype: onesided_core::Datatype::Byte.code(),
        layout: contiguous(8),
        ..Default::default()
    };
    let batch = |id: u64, calls: u64| {
        let calls = (0..calls)
            .map(|index| v1::ClientMessage {
                id: id * 10_000 + index,
                call: Some(Call::Op(get.clone())),
            })
            .collect();
        encode(&v1::ClientMessage {
            id,
            call: Some(Call::Batch(v1::Batch { calls })),
        })
    };
    let batched = |reply: ServerMessage, id: u64, calls: u64| {
        assert_eq!(reply.id, id, "not the batch's reply: {reply:?}");
        let Some(Reply::Batched(batched)) = reply.reply else {
            panic!("not a Batched reply");
        };
        let ids: Vec<u64> = batched.replies.iter().map(|reply| reply.id).collect();
        assert_eq!(ids, (id * 10_000..id * 10_000 + calls).collect::<Vec<_>>());
        batched.replies
    };
    session.send_bytes(batch(1, 3000));
    for refused in batched(next(session).await, 1, 3000) {
        let Some(Reply::Error(failure)) = &refused.reply else {
            panic!("{refused:?} was served past the budget");
        };
        assert_eq!(Code::from_i32(failure.code), Code::ResourceExhausted);
        let class = failure
            .error
            .as_ref()
            .and_then(|error| ErrorClass::from_code(error.class));
        assert_eq!(class, Some(ErrorClass::NoMem));
    }
    // at the budget: served, every answer in the one reply (one target answers in order)
    session.send_bytes(batch(2, 1000));
    let served = batched(next(session).await, 2, 1000);
    assert!(
        served.iter().all(succeeded),
        "{:?}",
        served.iter().find(|r| !succeeded(r))
    );
    // nothing of either batch comes after its reply: the next message answers the next call
    let after = session.send(Some(Call::UnlockAll(v1::UnlockAll {
        window,
        push: Vec::new(),
    })));
    assert_eq!(next(session).await.id, after);
}

/// A fence holds only the calls after it on its own window: while rank 0's fence on one
/// window waits for rank 1, rank 0's calls on another window are answered (another task of the
/// client may use it, as another thread may in MPI); the fence is answered once rank 1 fences.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_fence_holds_only_its_own_windows_calls() {
    let server = spawn_server().await;
    let (mut sessions, a, world, _) = world(&server, 2).await;
    let other = unique("b");
    server
        .admin
        .create_window(&world, &WindowSpec::bytes(&other, 2, 8, 1))
        .await
        .unwrap();
    let b = sessions[0].open_window(&other).await;
    let fenced = sessions[0].send(Some(fence(a)));
    let locked = sessions[0].send(Some(Call::LockAll(v1::LockAll {
        window: b,
        assert: 0,
    })));
    let answer = next(&mut sessions[0]).await;
    assert_eq!(
        answer.id, locked,
        "the other window's call waited: {answer:?}"
    );
    assert!(succeeded(&answer), "{answer:?}");
    sessions[1].ok(fence(a)).await;
    let answer = next(&mut sessions[0]).await;
    assert_eq!(answer.id, fenced);
    assert!(succeeded(&answer), "{answer:?}");
}
