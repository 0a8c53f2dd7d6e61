//! Every misuse is refused with its MPI error class, and leaves the window's bytes — public and
//! private — and the caller's epoch state as they were.

use onesided_client::{Assert, ErrorClass, LockType, Op, Window, WindowSpec};
use onesided_proto::v1::client_message::Call;
use onesided_proto::v1::{self, server_message::Reply};

use crate::raw::{Meta, RawSession};
use crate::{unique, Fixture};

const PATTERN: [[i64; 4]; 3] = [[1, 2, 3, 4], [11, 12, 13, 14], [21, 22, 23, 24]];

/// Three ranks on a fresh window whose public and private copies hold PATTERN.
async fn prepared(fixture: &Fixture) -> Vec<Window> {
    let windows = fixture.window_of::<i64>(4).await;
    for (rank, window) in windows.iter().enumerate() {
        window.store(0, &PATTERN[rank]).unwrap();
        window
            .lock(LockType::Exclusive, rank as u32, 0)
            .await
            .unwrap();
        window.unlock(rank as u32).await.unwrap();
    }
    windows
}

/// Rank 2 reads ranks 0 and 1's public copies; rank 0's private copy is checked too.
async fn assert_unchanged(windows: &[Window], case: &str) {
    let observer = &windows[2];
    for target in 0..2u32 {
        observer.lock(LockType::Shared, target, 0).await.unwrap();
        let public = observer.get::<i64>(target, 0, 4).unwrap();
        observer.unlock(target).await.unwrap();
        assert_eq!(
            public.value().await.unwrap(),
            PATTERN[target as usize],
            "{case}: public copy of rank {target} changed"
        );
    }
    assert_eq!(
        windows[0].load::<i64>(0, 4).unwrap(),
        PATTERN[0],
        "{case}: private copy changed"
    );
}

fn class<T: std::fmt::Debug>(result: onesided_client::Result<T>) -> ErrorClass {
    let error = result.expect_err("the call must be refused");
    error
        .class()
        .unwrap_or_else(|| panic!("{error} carries no MPI class"))
}

/// Asserts that `result` was refused with `expected` ([`class`]), saying `what` otherwise.
#[track_caller]
fn refused<T: std::fmt::Debug>(
    result: onesided_client::Result<T>,
    expected: ErrorClass,
    what: &str,
) {
    assert_eq!(class(result), expected, "{what}");
}

/// [`refused`] with `MPI_ERR_RMA_SYNC`.
#[track_caller]
fn rma_sync<T: std::fmt::Debug>(result: onesided_client::Result<T>, what: &str) {
    refused(result, ErrorClass::RmaSync, what);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronization_misuse_is_rma_sync() {
    let fixture = Fixture::new(3).await;

    let w = prepared(&fixture).await;
    rma_sync(w[0].put(1, 0, &[9i64]), "put outside an epoch");
    rma_sync(w[0].get::<i64>(1, 0, 1), "get outside an epoch");
    rma_sync(w[0].unlock(1).await, "unlock without lock");
    rma_sync(w[0].complete().await, "complete without start");
    rma_sync(w[0].wait().await, "wait without post");
    rma_sync(w[0].flush(1).await, "flush outside passive");
    rma_sync(w[0].flush_all().await, "flush_all outside");
    rma_sync(w[0].flush_local(1).await, "flush_local outside");
    rma_sync(w[0].flush_local_all().await, "flush_local_all");
    rma_sync(w[0].sync().await, "sync outside passive");
    rma_sync(w[0].unlock_all().await, "unlock_all alone");
    assert_unchanged(&w, "no epoch").await;

    let w = prepared(&fixture).await;
    w[0].lock(LockType::Shared, 1, 0).await.unwrap();
    rma_sync(w[0].lock(LockType::Exclusive, 1, 0).await, "second lock");
    rma_sync(w[0].lock_all(0).await, "lock_all inside lock");
    rma_sync(w[0].start(&[1], 0), "start inside lock");
    rma_sync(w[0].fence(0).await, "fence inside lock");
    rma_sync(w[0].put(2, 0, &[9i64]), "op to a rank not locked");
    rma_sync(w[0].free().await, "free inside lock");
    // the first lock is still there and works
    let seen = w[0].get::<i64>(1, 0, 4).unwrap();
    w[0].unlock(1).await.unwrap();
    assert_eq!(seen.value().await.unwrap(), PATTERN[1]);
    assert_unchanged(&w, "second lock").await;

    let w = prepared(&fixture).await;
    w[0].start(&[1], 0).unwrap();
    rma_sync(w[0].start(&[1], 0), "nested start");
    rma_sync(w[0].lock(LockType::Shared, 1, 0).await, "lock in pscw");
    rma_sync(w[0].put(2, 0, &[9i64]), "outside the start group");
    rma_sync(w[0].rput(1, 0, &[9i64]), "request-based in pscw");
    w[0].complete().await.unwrap();
    rma_sync(w[0].complete().await, "second complete");
    assert_unchanged(&w, "pscw").await;

    let w = prepared(&fixture).await;
    w[0].post(&[1], 0).unwrap();
    rma_sync(w[0].post(&[1], 0), "post while posted");
    rma_sync(w[0].fence(0).await, "fence while posted");
    rma_sync(w[0].free().await, "free while posted");
    assert!(!w[0].test().await.unwrap(), "nobody completed yet");
    w[1].start(&[0], 0).unwrap();
    w[1].complete().await.unwrap();
    w[0].wait().await.unwrap();
    rma_sync(w[0].test().await, "test after wait");
    assert_unchanged(&w, "post").await;

    let w = prepared(&fixture).await;
    w[0].fence(Assert::NOPRECEDE | Assert::NOSUCCEED)
        .await
        .unwrap();
    rma_sync(w[0].put(1, 0, &[9i64]), "op after nosucceed");
    // after nosucceed the rank may switch to another mode
    w[0].lock(LockType::Shared, 1, 0).await.unwrap();
    w[0].unlock(1).await.unwrap();
    assert_unchanged(&w, "nosucceed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argument_misuse_has_its_own_class() {
    let fixture = Fixture::new(3).await;
    let w = prepared(&fixture).await;
    w[0].lock_all(0).await.unwrap();
    for (refusal, expected, what) in [
        (
            class(w[0].put(1, 4, &[9i64])),
            ErrorClass::RmaRange,
            "past the end",
        ),
        (
            class(w[0].get::<i64>(1, 3, 2)),
            ErrorClass::RmaRange,
            "straddling the end",
        ),
        (
            class(w[0].get::<i64>(1, u64::MAX / 4, 1)),
            ErrorClass::RmaRange,
            "overflowing disp",
        ),
        (
            class(w[0].put(7, 0, &[9i64])),
            ErrorClass::Rank,
            "rank outside the world",
        ),
        (
            class(w[0].accumulate(1, 0, &[9i64], Op::NoOp)),
            ErrorClass::Op,
            "no_op in accumulate",
        ),
        (
            class(w[0].accumulate(1, 0, &[9i64], Op::MaxLoc)),
            ErrorClass::Op,
            "maxloc on i64",
        ),
        (
            class(w[0].store(4, &[9i64])),
            ErrorClass::RmaRange,
            "local store past the end",
        ),
        (
            class(w[0].load::<i64>(3, 2)),
            ErrorClass::RmaRange,
            "local load past the end",
        ),
    ] {
        assert_eq!(refusal, expected, "{what}");
    }
    w[0].unlock_all().await.unwrap();
    for (refusal, expected, what) in [
        (
            class(w[0].fence(1 << 9).await),
            ErrorClass::Assert,
            "unknown assert bits",
        ),
        (
            class(w[0].lock(LockType::Shared, 1, Assert::NOPRECEDE).await),
            ErrorClass::Assert,
            "noprecede on lock",
        ),
        (
            class(w[0].post(&[1], Assert::NOSUCCEED)),
            ErrorClass::Assert,
            "nosucceed on post",
        ),
        (
            class(w[0].lock(LockType::Shared, 9, 0).await),
            ErrorClass::Rank,
            "lock outside",
        ),
        (
            class(w[0].post(&[1, 1], 0)),
            ErrorClass::Group,
            "duplicate group member",
        ),
        (
            class(w[0].start(&[5], 0)),
            ErrorClass::Rank,
            "start group outside",
        ),
    ] {
        assert_eq!(refusal, expected, "{what}");
    }
    assert_unchanged(&w, "arguments").await;

    let floats = fixture
        .window(WindowSpec::of::<f64>(&unique("f"), 3, 2))
        .await;
    floats[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    for (refusal, expected, what) in [
        (
            class(floats[0].compare_and_swap(1, 0, 0.0f64, 1.0)),
            ErrorClass::Type,
            "cas on f64",
        ),
        (
            class(floats[0].accumulate(1, 0, &[1.0f64], Op::Band)),
            ErrorClass::Op,
            "band on f64",
        ),
        (
            class(floats[0].fetch_and_op(1, 0, 1.0f64, Op::Bxor)),
            ErrorClass::Op,
            "bxor on f64",
        ),
    ] {
        assert_eq!(refusal, expected, "{what}");
    }
    floats[0].accumulate(1, 0, &[2.5f64], Op::Sum).unwrap();
    let value = floats[0].get::<f64>(1, 0, 2).unwrap();
    floats[0].unlock(1).await.unwrap();
    assert_eq!(
        value.value().await.unwrap(),
        vec![2.5, 0.0],
        "only the valid op was applied"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_freed_windows_are_win() {
    let fixture = Fixture::new(3).await;
    let error = fixture.sessions[0].window("nope").await.unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::Win));
    let once = prepared(&fixture).await;
    let twice = fixture.sessions[0]
        .window(&once[0].desc().name)
        .await
        .unwrap_err();
    assert_eq!(
        twice.class(),
        Some(ErrorClass::Arg),
        "a window is opened once per session"
    );

    let w = prepared(&fixture).await;
    let name = w[0].desc().name.clone();
    w[0].lock(LockType::Shared, 1, 0).await.unwrap();
    w[0].get::<i64>(1, 0, 1).unwrap();
    w[0].flush(1).await.unwrap();
    // the admin cannot free a window while a rank holds a lock on it
    let admin = &fixture.server.admin;
    let busy = admin.free_window(&fixture.world, &name).await.unwrap_err();
    assert_eq!(busy.class(), Some(ErrorClass::RmaSync));
    w[0].unlock(1).await.unwrap();
    assert_unchanged(&w, "busy free").await;

    // MPI_Win_free is collective: every rank frees, then the window is gone
    let frees = w.iter().map(|window| window.free());
    for result in futures::future::join_all(frees).await {
        result.unwrap();
    }
    refused(
        w[0].fence(0).await,
        ErrorClass::Win,
        "fence on a freed window",
    );
    let gone = admin.describe_window(&fixture.world, &name).await;
    assert_eq!(gone.unwrap_err().class(), Some(ErrorClass::Win));

    // no_locks windows free without a barrier, and refuse locks
    let spec = WindowSpec::of::<i64>(&unique("w"), 3, 1).info("no_locks", "true");
    let w = fixture.window(spec).await;
    assert_eq!(
        class(w[0].lock(LockType::Shared, 1, 0).await),
        ErrorClass::RmaSync
    );
    assert_eq!(class(w[0].lock_all(0).await), ErrorClass::RmaSync);
    w[0].free().await.unwrap();
}

/// Requests the client library would never send still get their class from the server, and
/// change neither the window's bytes nor the raw session's epoch state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_validates_what_a_raw_client_sends() {
    let fixture = Fixture::new(3).await;
    let w = prepared(&fixture).await;
    let name = w[0].desc().name.clone();
    let mut grpc = crate::raw::raw(&fixture.server.url).await;
    let (mut raw, _) = RawSession::open(&mut grpc, &Meta::bearer(&fixture.tokens[0]))
        .await
        .unwrap();
    let window = raw.open_window(&name).await;
    // data that differs from every byte of PATTERN, so that an applied refusal shows
    let op = |target, datatype, disp| v1::RmaOp {
        window,
        target,
        kind: v1::OpKind::Put as i32,
        datatype,
        op: 0,
        disp,
        layout: Some(v1::Layout {
            kind: Some(v1::layout::Kind::Contiguous(v1::Contiguous { count: 1 })),
        }),
        data: (-99i64).to_le_bytes().to_vec().into(),
        compare: Default::default(),
        request_based: false,
        token: 0,
    };
    let cases: Vec<(Call, ErrorClass)> = vec![
        (
            Call::Lock(v1::Lock {
                window,
                lock_type: 7,
                target: 1,
                assert: 0,
            }),
            ErrorClass::LockType,
        ),
        (Call::Op(op(1, 4, 0)), ErrorClass::RmaSync),
        (Call::Op(op(1, 99, 0)), ErrorClass::Type),
        (Call::Op(op(5, 4, 0)), ErrorClass::Rank),
        (Call::Op(op(1, 4, 4)), ErrorClass::RmaRange),
        (
            Call::Fence(v1::Fence {
                window,
                assert: 0,
                push: vec![
                    v1::Segment {
                        offset: 0,
                        data: vec![0x5a; 8].into(),
                    },
                    v1::Segment {
                        offset: 28,
                        data: vec![0x5a; 8].into(),
                    },
                ],
            }),
            ErrorClass::RmaRange,
        ),
        (Call::Complete(v1::Complete { window }), ErrorClass::RmaSync),
        (Call::Wait(v1::Wait { window: 999 }), ErrorClass::Win),
    ];
    for (request, expected) in cases {
        let description = format!("{request:?}");
        let Some(Reply::Error(failure)) = raw.call(Some(request)).await.reply else {
            panic!("{description} was accepted");
        };
        let class = ErrorClass::from_code(failure.error.unwrap().class);
        assert_eq!(class, Some(expected), "{description}");
    }
    assert_unchanged(&w, "raw client").await;
    // nor did they leave an epoch open: no fence epoch, no lock, so a lock and an unlock of
    // rank 1 are accepted
    raw.ok(Call::Lock(v1::Lock {
        window,
        lock_type: v1::LockType::Exclusive as i32,
        target: 1,
        assert: 0,
    }))
    .await;
    raw.ok(Call::Unlock(v1::Unlock {
        window,
        target: 1,
        push: Vec::new(),
    }))
    .await;
}
