//! An operator's actions on a rank's session through the Admin API: ending a session (as a
//! lapsed lease ends it) and revoking its locks on a window while it goes on. Each is audited
//! before what it causes; a revocation is a release for replay and the race checker; the rank
//! whose lock was revoked learns at its next call there, with `MPI_ERR_RMA_SYNC`, and never
//! hangs; bad input is refused with its own status and class and changes nothing.

use std::time::Duration;

use onesided_client::{Audit, ErrorClass, LockType, Session, Window, WindowSpec};
use onesided_core::audit::Event;
use tonic::Code;

use crate::failure::{granted_get, held_and_awaited, log_entries};
use crate::{assert_refused, unique, Fixture, ADMIN_TOKEN};

/// The window's log, as the Audit service gives it.
async fn events(url: &str, window: u64) -> Vec<(u32, u64, Event)> {
    let entries = log_entries(url, window).await;
    entries
        .into_iter()
        .filter_map(|entry| Some((entry.rank, entry.incarnation, entry.event?)))
        .collect()
}

/// `window` holds a `lock_type` lock of `target` and has put `value` at its element 0 and
/// flushed it.
async fn put_and_flushed(window: &Window, lock_type: LockType, target: u32, value: i64) {
    window.lock(lock_type, target, 0).await.unwrap();
    window.put(target, 0, &[value]).unwrap();
    window.flush(target).await.unwrap();
}

fn position(log: &[(u32, u64, Event)], wanted: impl Fn(u32, &Event) -> bool) -> usize {
    log.iter()
        .position(|(rank, _, event)| wanted(*rank, event))
        .unwrap_or_else(|| panic!("not in the log: {log:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_lock_goes_to_the_waiter_and_replay_and_the_checker_see_a_release() {
    let fixture = Fixture::new(3).await;
    let name = unique("w");
    let (holder, waiter, _target, seen) = held_and_awaited(&fixture, &name).await;

    let (incarnation, targets) = fixture
        .server
        .admin
        .revoke_locks(&fixture.world, &name, 0)
        .await
        .unwrap();
    assert_eq!((incarnation, targets), (1, vec![2]));
    let value = granted_get(seen, "the waiter was never granted").await;
    assert_eq!(value, vec![42], "the holder's flushed write stays");
    // its own get and put of the same bytes are ordered by a flush, as MPI asks
    waiter.flush(2).await.unwrap();
    waiter.put(2, 0, &[7i64]).unwrap();
    waiter.unlock(2).await.unwrap();

    // the holder learns at its next call there, and may lock again after it
    let error = tokio::time::timeout(Duration::from_secs(10), holder.unlock(2))
        .await
        .expect("the revoked holder's unlock hung")
        .unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::RmaSync), "{error}");
    assert_eq!(error.code(), Code::FailedPrecondition, "{error}");
    assert!(
        error.to_string().contains("revoked by an operator"),
        "{error}"
    );
    holder.lock(LockType::Exclusive, 2, 0).await.unwrap();
    let now = holder.get::<i64>(2, 0, 1).unwrap();
    holder.unlock(2).await.unwrap();
    assert_eq!(now.value().await.unwrap(), vec![7]);

    let id = holder.desc().id;
    let url = &fixture.server.url;
    let log = events(url, id).await;
    let asked = position(&log, |rank, event| {
        matches!(event, Event::Admin { action, by } if rank == 0
            && action == "revoke_locks" && by.starts_with("admin from 127.0.0.1:"))
    });
    assert_eq!(log[asked].1, 1, "the row names the session acted on");
    let revoked = position(&log, |rank, event| {
        matches!(event, Event::LockRevoke { origin: 0, reason, .. }
            if rank == 2 && reason == "revoked by an operator")
    });
    let granted = position(&log, |_, event| {
        matches!(event, Event::LockGrant { origin: 1, .. })
    });
    assert!(asked < revoked && revoked < granted, "{log:#?}");
    // a revocation is a release: the waiter's epoch is ordered after the holder's
    let audit = Audit::connect(url.as_str(), ADMIN_TOKEN).await.unwrap();
    let findings = audit.check(id).await.unwrap();
    assert!(findings.is_empty(), "{findings:#?}");
    let replayed = audit.replay(id, None).await.unwrap();
    assert_eq!(replayed.ranks[2], 7i64.to_le_bytes());
    assert_eq!(
        audit
            .replay(id, Some(revoked as u64 + 1))
            .await
            .unwrap()
            .ranks[2],
        42i64.to_le_bytes(),
        "up to the revocation, the holder's value"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_holders_later_operations_are_refused_and_never_hang() {
    let (fixture, w) = Fixture::with_window::<i64>(2, 1).await;
    let [holder, target]: [_; 2] = w.try_into().unwrap();
    put_and_flushed(&holder, LockType::Shared, 1, 1).await;
    let name = &holder.desc().name;
    fixture
        .server
        .admin
        .revoke_locks(&fixture.world, name, 0)
        .await
        .unwrap();
    // pipelined behind the revocation: a put under the old epoch, then its flush
    holder.put(1, 0, &[5i64]).unwrap();
    let error = tokio::time::timeout(Duration::from_secs(10), holder.flush(1))
        .await
        .expect("the revoked epoch's flush hung")
        .unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::RmaSync), "{error}");
    let error = holder.unlock(1).await.unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::RmaSync), "{error}");
    // nothing of the revoked epoch after the revocation reached the target
    target.lock(LockType::Exclusive, 1, 0).await.unwrap();
    assert_eq!(target.load::<i64>(0, 1).unwrap(), [1]);
    target.unlock(1).await.unwrap();
    // and the holder's next epoch is as any other
    holder.lock(LockType::Exclusive, 1, 0).await.unwrap();
    holder.put(1, 0, &[6i64]).unwrap();
    holder.unlock(1).await.unwrap();
    target.lock(LockType::Exclusive, 1, 0).await.unwrap();
    assert_eq!(target.load::<i64>(0, 1).unwrap(), [6]);
    target.unlock(1).await.unwrap();
    // the refused put touched nothing: the race checker finds no race with it (it is in the
    // log as issued, never as applied)
    let audit = Audit::connect(&fixture.server.url, ADMIN_TOKEN)
        .await
        .unwrap();
    let findings = audit.check(holder.desc().id).await.unwrap();
    assert!(findings.is_empty(), "{findings:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_session_frees_its_lock_fails_the_barrier_and_may_attach_again() {
    let (fixture, w) = Fixture::with_window::<i64>(2, 1).await;
    let [owner, holder]: [_; 2] = w.try_into().unwrap();
    put_and_flushed(&holder, LockType::Exclusive, 0, 3).await;
    // the owner's lock of its own rank waits for the holder's
    let waiting =
        tokio::spawn(async move { owner.lock(LockType::Exclusive, 0, 0).await.map(|()| owner) });
    let admin = &fixture.server.admin;
    assert_eq!(admin.end_session(&fixture.world, 1).await.unwrap(), 1);
    let owner = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter was never granted")
        .unwrap()
        .unwrap();
    assert_eq!(owner.load::<i64>(0, 1).unwrap(), [3]);
    owner.unlock(0).await.unwrap();
    // the ended rank's next call fails, saying why; the others see it ended by an operator
    let error = holder.unlock(0).await.unwrap_err();
    assert!(
        error.to_string().contains("an operator ended this session"),
        "{error}"
    );
    let sessions = &fixture.sessions;
    let error = tokio::time::timeout(Duration::from_secs(10), sessions[0].barrier())
        .await
        .expect("the barrier hung")
        .unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::ProcFailed), "{error}");
    assert!(
        error.to_string().contains("ended by an operator"),
        "{error}"
    );
    // the rank has no session now: ending it again is refused
    let again = admin.end_session(&fixture.world, 1).await.unwrap_err();
    assert_eq!(
        (again.code(), again.class()),
        (Code::FailedPrecondition, Some(ErrorClass::Arg))
    );
    // its token still serves
    Session::attach(&fixture.server.url, &fixture.tokens[1])
        .await
        .unwrap();

    let log = events(&fixture.server.url, owner.desc().id).await;
    let asked = position(
        &log,
        |rank, event| matches!(event, Event::Admin { action, .. } if rank == 1 && action == "end_session"),
    );
    let revoked = position(
        &log,
        |_, event| matches!(event, Event::LockRevoke { origin: 1, reason, .. } if reason == "ended by an operator"),
    );
    let departed = position(
        &log,
        |rank, event| matches!(event, Event::Departed { incarnation: 1, reason } if rank == 1 && reason == "ended by an operator"),
    );
    assert!(asked < revoked && revoked < departed, "{log:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_its_status_and_class_and_changes_nothing() {
    // three ranks, a window over ranks 0 and 1
    let fixture = Fixture::new(3).await;
    let name = unique("w");
    fixture
        .create_window(&WindowSpec::of::<i64>(&name, 2, 1).group(&[0, 1]))
        .await;
    let mut w = Vec::new();
    for session in &fixture.sessions[..2] {
        w.push(session.window(&name).await.unwrap());
    }
    let admin = &fixture.server.admin;
    let world = fixture.world.as_str();
    let cases: Vec<(&str, onesided_client::Error, Code, ErrorClass)> = vec![
        (
            "unknown world",
            admin.revoke_locks("nope", &name, 0).await.unwrap_err(),
            Code::NotFound,
            ErrorClass::Arg,
        ),
        (
            "unknown world (end)",
            admin.end_session("nope", 0).await.unwrap_err(),
            Code::NotFound,
            ErrorClass::Arg,
        ),
        (
            "unknown window",
            admin.revoke_locks(world, "nope", 0).await.unwrap_err(),
            Code::NotFound,
            ErrorClass::Win,
        ),
        (
            "rank outside the world",
            admin.revoke_locks(world, &name, 3).await.unwrap_err(),
            Code::InvalidArgument,
            ErrorClass::Rank,
        ),
        (
            "rank outside the world (end)",
            admin.end_session(world, 7).await.unwrap_err(),
            Code::InvalidArgument,
            ErrorClass::Rank,
        ),
        (
            "rank outside the window's group",
            admin.revoke_locks(world, &name, 2).await.unwrap_err(),
            Code::InvalidArgument,
            ErrorClass::Rank,
        ),
        (
            "nothing held",
            admin.revoke_locks(world, &name, 1).await.unwrap_err(),
            Code::FailedPrecondition,
            ErrorClass::RmaSync,
        ),
    ];
    for (case, error, code, class) in cases {
        assert_refused(case, &error, code, class);
    }
    // a world nobody attached to
    let quiet = unique("quiet");
    admin.create_world(&quiet, 2).await.unwrap();
    let not_attached = admin.end_session(&quiet, 1).await.unwrap_err();
    assert_eq!(
        (not_attached.code(), not_attached.class()),
        (Code::FailedPrecondition, Some(ErrorClass::Arg)),
        "{not_attached}"
    );
    // nothing changed: no admin event, the sessions go on
    let log = events(&fixture.server.url, w[0].desc().id).await;
    assert!(
        !log.iter()
            .any(|(_, _, event)| matches!(event, Event::Admin { .. })),
        "{log:#?}"
    );
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].put(1, 0, &[9i64]).unwrap();
    w[0].unlock(1).await.unwrap();
}

/// Deleting a world is recorded first, naming who asked, as the last event of each of its
/// windows' logs (which the Audit service still serves); an unknown world is NOT_FOUND and
/// records nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_worlds_windows_end_their_logs_with_the_operators_deletion() {
    let (fixture, w) = Fixture::with_window::<i64>(2, 1).await;
    let first = w[0].desc().id;
    let second = fixture
        .server
        .admin
        .create_window(&fixture.world, &WindowSpec::of::<i64>(&unique("w"), 2, 1))
        .await
        .unwrap()
        .id;
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].put(1, 0, &[5i64]).unwrap();
    w[0].unlock(1).await.unwrap();
    let admin = &fixture.server.admin;
    let unknown = admin.delete_world(&unique("nowhere")).await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound, "{unknown}");
    admin.delete_world(&fixture.world).await.unwrap();
    assert!(admin
        .list_worlds()
        .await
        .unwrap()
        .iter()
        .all(|w| w.name != fixture.world));
    for window in [first, second] {
        let log = events(&fixture.server.url, window).await;
        let deleted = position(&log, |rank, event| {
            matches!(event, Event::Admin { action, by }
                if rank == 0 && action == "delete_world" && by.starts_with("admin from 127.0.0.1:"))
        });
        // then the window's actors stop: their last event, committed before the call answered
        let later: Vec<&Event> = log[deleted + 1..].iter().map(|(_, _, e)| e).collect();
        assert!(
            matches!(later[..], [Event::WindowFreed]),
            "window {window}: after the deletion {later:#?}"
        );
        let admins = log
            .iter()
            .filter(|(_, _, e)| matches!(e, Event::Admin { .. }));
        assert_eq!(admins.count(), 1, "window {window}: {log:#?}");
    }
}
