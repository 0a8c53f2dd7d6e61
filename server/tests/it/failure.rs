//! A dead rank never hangs the living: sessions that end (crash, broken stream, lapsed lease,
//! a new incarnation) have their locks revoked and make what needs them fail with
//! `PROC_FAILED`, and a revoked fencing token is refused.

use std::time::Duration;

use onesided_client::{
    Audit, AuditEntry, ErrorClass, LockType, Pending, Session, Window, WindowSpec,
};
use onesided_core::audit::Event;
use onesided_proto::v1::{self, client_message::Call, server_message::Reply};

use crate::raw::{self, Meta, RawSession};
use crate::{spawn_server_with, unique, Fixture, ADMIN_TOKEN};

/// A session driven by hand, as a client that stops cooperating would.
struct Hand {
    session: RawSession,
}

impl Hand {
    async fn attach(url: &str, token: &str) -> Self {
        let mut grpc = raw::raw(url).await;
        let (session, _) = RawSession::open(&mut grpc, &Meta::bearer(token))
            .await
            .unwrap();
        Hand { session }
    }

    /// Sends `call` and returns its answer (calls here are sequential).
    async fn call(&mut self, call: Call) -> Reply {
        self.session.call(Some(call)).await.reply.unwrap()
    }

    /// Whether the server ended the session (nothing more arrives).
    async fn ended(&mut self) -> bool {
        !matches!(self.session.next().await, Ok(Some(_)))
    }

    async fn open(&mut self, name: &str) -> u64 {
        let Reply::Window(desc) = self.call(raw::open_window(name)).await else {
            panic!("no window");
        };
        desc.id
    }

    /// Asks for an exclusive lock of `target`, and returns the answer.
    async fn lock(&mut self, window: u64, target: u32) -> Reply {
        self.call(Call::Lock(v1::Lock {
            window,
            lock_type: LockType::Exclusive.code(),
            target,
            assert: 0,
        }))
        .await
    }

    /// An exclusive lock of `target` (the own rank: eager, answered at the grant with its
    /// fencing token).
    async fn lock_own(&mut self, window: u64, target: u32) -> u64 {
        let reply = self.lock(window, target).await;
        let Reply::Synced(synced) = reply else {
            panic!("lock answered {reply:?}");
        };
        synced.token
    }

    async fn put(&mut self, window: u64, target: u32, value: i64, token: u64) -> Reply {
        self.call(Call::Op(v1::RmaOp {
            window,
            target,
            kind: v1::OpKind::Put as i32,
            datatype: onesided_client::Datatype::I64.code(),
            op: 0,
            disp: 0,
            layout: raw::contiguous(1),
            data: value.to_le_bytes().to_vec().into(),
            compare: Default::default(),
            request_based: false,
            token,
        }))
        .await
    }
}

/// A world of two ranks on a server whose sessions' lease is `lease`.
async fn two_ranks_with_lease(lease: Duration) -> Fixture {
    Fixture::on(
        spawn_server_with(|config| config.lease_ttl = lease).await,
        2,
    )
    .await
}

/// [`two_ranks_with_lease`], and a window of one `i64` a rank, open on both: its name (for a
/// session driven by hand to open) and the ranks' handles.
async fn a_window_with_lease(lease: Duration) -> (Fixture, String, Vec<Window>) {
    let fixture = two_ranks_with_lease(lease).await;
    let name = unique("w");
    let w = fixture.window(WindowSpec::of::<i64>(&name, 2, 1)).await;
    (fixture, name, w)
}

fn class_of(reply: &Reply) -> Option<ErrorClass> {
    match reply {
        Reply::Error(failure) => {
            ErrorClass::from_code(failure.error.as_ref().map_or(0, |error| error.class))
        }
        _ => None,
    }
}

/// The window's log, as the Audit service gives it to the operator.
pub(crate) async fn log_entries(url: &str, window: u64) -> Vec<AuditEntry> {
    let audit = Audit::connect(url, ADMIN_TOKEN).await.unwrap();
    audit.events(window, 1).await.unwrap()
}

async fn events(url: &str, window: u64) -> Vec<Event> {
    let entries = log_entries(url, window).await;
    entries
        .into_iter()
        .filter_map(|entry| entry.event)
        .collect()
}

/// Window `name` of three `i64` (one per rank) on `fixture`'s world: rank 0 holds rank 2's
/// lock and has put 42 there and flushed it; rank 1 asked for the same lock and a get, queued
/// behind it (lazy: the request travels with the get). The three windows and the waiting get.
pub(crate) async fn held_and_awaited(
    fixture: &Fixture,
    name: &str,
) -> (Window, Window, Window, Pending<Vec<i64>>) {
    let w = fixture.window(WindowSpec::of::<i64>(name, 3, 1)).await;
    let [holder, waiter, target]: [_; 3] = w.try_into().unwrap();
    holder.lock(LockType::Exclusive, 2, 0).await.unwrap();
    holder.put(2, 0, &[42i64]).unwrap();
    holder.flush(2).await.unwrap();
    waiter.lock(LockType::Exclusive, 2, 0).await.unwrap();
    let seen = waiter.get::<i64>(2, 0, 1).unwrap();
    (holder, waiter, target, seen)
}

/// The waiting get of [`held_and_awaited`], once the lock is granted to the waiter (at most
/// 10 s; `never` says what did not happen otherwise).
pub(crate) async fn granted_get(seen: Pending<Vec<i64>>, never: &str) -> Vec<i64> {
    tokio::time::timeout(Duration::from_secs(10), seen.value())
        .await
        .expect(never)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_lock_holder_is_revoked_and_the_next_holder_sees_its_flushed_writes() {
    let fixture = Fixture::new(3).await;
    let name = unique("w");
    let (holder, waiter, _target, seen) = held_and_awaited(&fixture, &name).await;
    // the holder's process dies: every handle is dropped, nothing is unlocked
    let mut sessions = fixture.sessions;
    drop(holder);
    drop(sessions.remove(0));
    let value = granted_get(seen, "the lock was never revoked").await;
    assert_eq!(value, vec![42], "the dead holder's flushed write is there");
    waiter.unlock(2).await.unwrap();
    let id = waiter.desc().id;
    let log = events(&fixture.server.url, id).await;
    let revoked = log
        .iter()
        .position(|event| {
            matches!(event, Event::LockRevoke { origin: 0, reason, .. } if reason == "session ended")
        })
        .expect("the revocation is audited");
    let granted = log
        .iter()
        .rposition(|event| matches!(event, Event::LockGrant { origin: 1, .. }))
        .unwrap();
    assert!(
        revoked < granted,
        "the next holder is granted after the revocation"
    );
}

/// The lease is measured on the server's clock, from the audit: the silent session's last
/// message (its flush, recorded as it arrived) to its lock's revocation takes one lease, not
/// less, and not more than two. A scheduling stall of the test's own clients cannot move
/// either time; the wall clock only guards against a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_session_loses_its_lease_and_its_lock_within_two_leases() {
    // the live sessions' heartbeats go every third of the lease: long enough that a busy
    // two-core machine does not end them
    let lease = Duration::from_millis(1500);
    let (fixture, name, w) = a_window_with_lease(lease).await;
    // rank 0 attaches by hand, takes rank 1's lock, writes, flushes — then goes silent
    // without closing its stream (a hung process)
    let mut silent = Hand::attach(&fixture.server.url, &fixture.tokens[0]).await;
    let window = silent.open(&name).await;
    let lock = silent.lock(window, 1).await;
    assert!(matches!(lock, Reply::Done(_)), "{lock:?}");
    assert!(matches!(silent.put(window, 1, 7, 0).await, Reply::Done(_)));
    let flushed = silent
        .call(Call::Flush(v1::Flush {
            window,
            target: 1,
            local: false,
        }))
        .await;
    assert!(matches!(flushed, Reply::Done(_)), "{flushed:?}");
    let owner = &w[1];
    tokio::time::timeout(
        Duration::from_secs(30),
        owner.lock(LockType::Exclusive, 1, 0),
    )
    .await
    .expect("the lock was not revoked within 30 s")
    .unwrap();
    assert_eq!(owner.load::<i64>(0, 1).unwrap(), vec![7]);
    owner.unlock(1).await.unwrap();
    // the silent session was ended
    assert!(silent.ended().await, "the silent session was not ended");
    let audit = Audit::connect(&fixture.server.url, ADMIN_TOKEN)
        .await
        .unwrap();
    // the stream ends before the session's last events (its departure) are committed: read
    // the log until they are there
    let lapsed = |entry: &onesided_client::AuditEntry| matches!(&entry.event, Some(Event::Departed { reason, .. }) if reason == "lease lapsed");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let log = loop {
        let log = audit.events(window, 1).await.unwrap();
        if log.iter().any(lapsed) || tokio::time::Instant::now() > deadline {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let at = |what: &str, found: &dyn Fn(&Event) -> bool| {
        log.iter()
            .find(|entry| entry.event.as_ref().is_some_and(found))
            .unwrap_or_else(|| panic!("no {what} in the log"))
            .at_ns
    };
    let last_heard = at("flush of rank 0", &|event| {
        matches!(event, Event::Flush { origin: 0 })
    });
    let revoked = at(
        "revocation for a lapsed lease",
        &|event| matches!(event, Event::LockRevoke { origin: 0, reason, .. } if reason == "lease lapsed"),
    );
    at(
        "departure for a lapsed lease",
        &|event| matches!(event, Event::Departed { reason, .. } if reason == "lease lapsed"),
    );
    let silence = Duration::from_nanos(revoked.saturating_sub(last_heard));
    // the flush is recorded a moment after it arrived
    assert!(
        silence + Duration::from_millis(50) >= lease,
        "revoked {silence:?} after the last message, before the lease of {lease:?}"
    );
    assert!(
        silence <= 2 * lease,
        "revoked only {silence:?} after the last message (lease {lease:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_client_keeps_its_lease_with_heartbeats() {
    // heartbeats go every third of the lease, so a live session survives a stall of about two
    // thirds of it: long enough that a busy two-core machine does not end it
    let lease = Duration::from_millis(1500);
    let fixture = two_ranks_with_lease(lease).await;
    let w = fixture.window_of::<i64>(1).await;
    w[0].lock(LockType::Exclusive, 0, 0).await.unwrap();
    assert!(w[0].fencing_token(0).is_some());
    // idle for several leases, holding the lock: heartbeats keep the session alive, so the
    // other rank's request (lazy: it travels with the get) waits instead of being granted
    w[1].lock(LockType::Exclusive, 0, 0).await.unwrap();
    let mut got = Box::pin(w[1].get::<i64>(0, 0, 1).unwrap().value());
    let waited = tokio::time::timeout(5 * lease / 2, &mut got).await;
    assert!(
        waited.is_err(),
        "the lock of a live, idle holder was taken away"
    );
    w[0].store(0, &[5i64]).unwrap();
    w[0].unlock(0).await.unwrap();
    assert_eq!(w[0].fencing_token(0), None);
    assert_eq!(got.await.unwrap(), vec![5], "granted after the unlock");
    w[1].unlock(0).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_with_a_crashed_rank_fails_with_proc_failed_naming_it() {
    let (fixture, w) = Fixture::with_window::<i64>(3, 1).await;
    let results = crate::ranks(w, |_, window| async move {
        window.fence(0).await.map(|()| window)
    })
    .await;
    let mut w: Vec<_> = results.into_iter().map(Result::unwrap).collect();
    let mut sessions = fixture.sessions;
    // rank 2 dies inside the fence epoch
    drop(w.pop());
    drop(sessions.pop());
    let outcomes = crate::ranks(w, |_, window| async move {
        tokio::time::timeout(Duration::from_secs(10), window.fence(0))
            .await
            .expect("the fence hung")
    })
    .await;
    for outcome in outcomes {
        let error = outcome.unwrap_err();
        assert_eq!(error.class(), Some(ErrorClass::ProcFailed), "{error}");
        assert!(error.to_string().contains("rank 2"), "{error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_barrier_with_a_departed_rank_fails_and_works_again_after_it_reattaches() {
    let fixture = Fixture::new(2).await;
    let mut sessions = fixture.sessions;
    drop(sessions.pop());
    let error = tokio::time::timeout(Duration::from_secs(10), sessions[0].barrier())
        .await
        .expect("the barrier hung")
        .unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::ProcFailed), "{error}");
    assert!(error.to_string().contains("rank 1"), "{error}");
    let again = Session::attach(&fixture.server.url, &fixture.tokens[1])
        .await
        .unwrap();
    // the rank's first barrier after attaching again is the one the others failed: it fails
    // alike, so that every rank's next barrier meets
    let late = again.barrier().await.unwrap_err();
    assert_eq!(late.class(), Some(ErrorClass::ProcFailed), "{late}");
    let (left, right) = tokio::join!(sessions[0].barrier(), again.barrier());
    left.unwrap();
    right.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_a_crashed_origin_fails_with_proc_failed() {
    let (fixture, w) = Fixture::with_window::<i64>(2, 1).await;
    let [target, origin]: [_; 2] = w.try_into().unwrap();
    target.post(&[1], 0).unwrap();
    origin.start(&[0], 0).unwrap();
    origin.put(0, 0, &[3i64]).unwrap();
    // the origin dies before complete
    let mut sessions = fixture.sessions;
    drop(origin);
    drop(sessions.pop());
    let error = tokio::time::timeout(Duration::from_secs(10), target.wait())
        .await
        .expect("the wait hung")
        .unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::ProcFailed), "{error}");
    assert!(error.to_string().contains("rank 1"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_incarnation_supersedes_the_old_and_its_fencing_token_is_refused() {
    let fixture = Fixture::new(2).await;
    let name = unique("w");
    fixture
        .create_window(&WindowSpec::of::<i64>(&name, 2, 1))
        .await;
    let mut old = Hand::attach(&fixture.server.url, &fixture.tokens[0]).await;
    let window = old.open(&name).await;
    let old_token = old.lock_own(window, 0).await;
    assert!(old_token > 0);
    // the rank's process restarts and attaches again while the old session still holds
    // the lock: the old one is ended and its lock revoked before the new one acts
    let mut new = Hand::attach(&fixture.server.url, &fixture.tokens[0]).await;
    assert!(
        old.ended().await,
        "the old incarnation's session was not ended"
    );
    assert_eq!(new.open(&name).await, window);
    let new_token = new.lock_own(window, 0).await;
    assert!(new_token > old_token, "{new_token} after {old_token}");
    let refused = new.put(window, 0, 1, old_token).await;
    assert_eq!(class_of(&refused), Some(ErrorClass::RmaSync), "{refused:?}");
    let Reply::Error(failure) = &refused else {
        unreachable!()
    };
    assert_eq!(failure.code, tonic::Code::FailedPrecondition as i32);
    assert!(matches!(
        new.put(window, 0, 9, new_token).await,
        Reply::Done(_)
    ));
    let log = events(&fixture.server.url, window).await;
    assert!(log.iter().any(|event| matches!(
        event,
        Event::LockRevoke { origin: 0, token, reason }
            if *token == old_token && reason.starts_with("superseded")
    )));
    // the refused put changed nothing; the accepted one is there
    let Reply::Done(_) = new
        .call(Call::Unlock(v1::Unlock {
            window,
            target: 0,
            push: Vec::new(),
        }))
        .await
    else {
        panic!("unlock failed");
    };
    let replayed = Audit::connect(&fixture.server.url, ADMIN_TOKEN)
        .await
        .unwrap()
        .replay(window, None)
        .await
        .unwrap();
    assert_eq!(replayed.ranks[0], 9i64.to_le_bytes());
}

/// Issue 11: a session whose lease lapses gets an answer for each call it still had pending
/// (failed, saying why), and its stream ends with a status that says the lease lapsed, not OK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_session_fails_its_pending_calls_and_ends_saying_why() {
    let lease = Duration::from_millis(600);
    let (fixture, name, w) = a_window_with_lease(lease).await;
    // rank 1 holds its own window exclusively, so what rank 0 sends there waits
    let owner = &w[1];
    owner.lock(LockType::Exclusive, 1, 0).await.unwrap();
    let mut silent = Hand::attach(&fixture.server.url, &fixture.tokens[0]).await;
    let window = silent.open(&name).await;
    let lock = silent.lock(window, 1).await;
    assert!(matches!(lock, Reply::Done(_)), "{lock:?}");
    let put = silent.session.send(Some(Call::Op(v1::RmaOp {
        window,
        target: 1,
        kind: v1::OpKind::Put as i32,
        datatype: onesided_client::Datatype::I64.code(),
        op: 0,
        disp: 0,
        layout: raw::contiguous(1),
        data: 7i64.to_le_bytes().to_vec().into(),
        compare: Default::default(),
        request_based: false,
        token: 0,
    })));
    // then it goes silent, its put waiting for the lock
    let answer = tokio::time::timeout(10 * lease, silent.session.next())
        .await
        .expect("the pending put got no answer")
        .expect("the stream ended before answering the pending put")
        .expect("the stream ended before answering the pending put");
    assert_eq!(answer.id, put);
    let Some(Reply::Error(failure)) = answer.reply else {
        panic!("the pending put was not failed: {answer:?}");
    };
    let error = failure.error.clone().expect("an MPI error");
    assert_eq!(
        ErrorClass::from_code(error.class),
        Some(ErrorClass::ProcFailed),
        "{failure:?}"
    );
    assert!(error.message.contains("lease lapsed"), "{failure:?}");
    let end = tokio::time::timeout(10 * lease, silent.session.next())
        .await
        .expect("the stream did not end");
    let status = end.expect_err("the lapsed session's stream ended with OK");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(status.message().contains("lease lapsed"), "{status:?}");
    assert_eq!(
        onesided_proto::rma_from_status(&status).map(|error| error.class),
        Some(ErrorClass::ProcFailed)
    );
    // the put never landed
    owner.unlock(1).await.unwrap();
    assert_eq!(owner.load::<i64>(0, 1).unwrap(), vec![0]);
}
