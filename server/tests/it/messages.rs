//! Point-to-point messages between the ranks of a world: MPI's matching through the real
//! server, and the audit's record of them as synchronization the race checker honours.

use bytes::Bytes;
use onesided_client::{Audit, AuditEvent, ErrorClass, LockType, Match};

use crate::{ranks, spawn_server, Fixture, ADMIN_TOKEN};

fn from(source: Option<u32>, tag: Option<i32>) -> Match {
    Match {
        source,
        tag,
        context: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_match_by_source_tag_and_context_in_the_order_sent() {
    let fixture = Fixture::new(3).await;
    let [r0, r1, r2] = &fixture.sessions[..] else {
        unreachable!()
    };
    // nothing there yet: an immediate probe says so, a receive waits
    assert_eq!(r0.probe(from(None, None), false).await.unwrap(), None);
    let waiting = {
        let r0 = r0.clone();
        tokio::spawn(async move { r0.receive(from(Some(2), Some(9))).await })
    };
    r1.send(0, 1, 0, Bytes::from_static(b"one")).await.unwrap();
    r1.send(0, 2, 0, Bytes::from_static(b"two")).await.unwrap();
    r1.send(0, 1, 0, Bytes::from_static(b"three"))
        .await
        .unwrap();
    r1.send(0, 1, 5, Bytes::from_static(b"other context"))
        .await
        .unwrap();
    r2.send(0, 9, 0, Bytes::from_static(b"nine")).await.unwrap();
    let nine = waiting.await.unwrap().unwrap();
    assert_eq!(
        (nine.source, nine.tag, &nine.payload[..]),
        (2, 9, &b"nine"[..])
    );
    // tag 2 skips rank 1's first message; any tag then takes them in the order sent
    let two = r0.receive(from(Some(1), Some(2))).await.unwrap();
    assert_eq!(&two.payload[..], b"two");
    let seen = r0.probe(from(None, None), true).await.unwrap().unwrap();
    assert_eq!(
        (seen.source, seen.tag, seen.len, seen.payload.len()),
        (1, 1, 3, 0)
    );
    let one = r0.receive(from(None, None)).await.unwrap();
    assert_eq!(
        one.id, seen.id,
        "the probe saw the message the receive took"
    );
    assert_eq!(&one.payload[..], b"one");
    let three = r0.receive(from(Some(1), None)).await.unwrap();
    assert_eq!(&three.payload[..], b"three");
    assert!(one.id < two.id && two.id < three.id);
    // the message on context 5 is only there for a receive on context 5
    assert_eq!(r0.probe(from(None, None), false).await.unwrap(), None);
    let other = r0
        .receive(Match {
            context: 5,
            ..from(None, None)
        })
        .await
        .unwrap();
    assert_eq!(&other.payload[..], b"other context");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_are_refused_with_their_error_class_and_nothing_is_sent() {
    let fixture = Fixture::new(2).await;
    let [r0, r1] = &fixture.sessions[..] else {
        unreachable!()
    };
    let class = |result: onesided_client::Result<()>| result.unwrap_err().class();
    assert_eq!(
        class(r0.send(2, 0, 0, Bytes::from_static(b"x")).await),
        Some(ErrorClass::Rank)
    );
    assert_eq!(
        class(r0.send(1, -3, 0, Bytes::from_static(b"x")).await),
        Some(ErrorClass::Arg)
    );
    let error = r1.receive(from(Some(7), None)).await.unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::Rank));
    assert_eq!(r1.probe(from(None, None), false).await.unwrap(), None);
    // the session goes on
    r0.send(1, 0, 0, Bytes::from_static(b"ok")).await.unwrap();
    assert_eq!(
        &r1.receive(from(None, None)).await.unwrap().payload[..],
        b"ok"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receive_from_a_rank_that_left_fails_with_proc_failed() {
    let mut fixture = Fixture::new(2).await;
    let leaving = fixture.sessions.pop().unwrap();
    let r0 = fixture.sessions[0].clone();
    let waiting = tokio::spawn(async move { r0.receive(from(Some(1), None)).await });
    // the receive is posted before the rank leaves: an immediate probe answered after it
    // went through the same stream
    assert_eq!(
        fixture.sessions[0]
            .probe(from(None, None), false)
            .await
            .unwrap(),
        None
    );
    drop(leaving);
    let error = waiting.await.unwrap().unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::ProcFailed), "{error}");
}

/// Two origins put to the same bytes under shared locks: the race checker finds it unless a
/// message from the first to the second orders them — and the log says which send each
/// receive took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_orders_accesses_for_the_race_checker() {
    let server = spawn_server().await;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let fixture = Fixture::on(server, 3).await;
    let mut checked = Vec::new();
    for ordered in [true, false] {
        let windows = fixture.window_of::<i64>(1).await;
        let id = windows[0].desc().id;
        ranks(windows, move |rank, w| async move {
            let session = w.session().clone();
            if rank == 0 {
                w.lock(LockType::Shared, 1, 0).await.unwrap();
                w.put(1, 0, &[7i64]).unwrap();
                w.unlock(1).await.unwrap();
                if ordered {
                    session
                        .send(2, 0, 0, Bytes::from_static(b"go"))
                        .await
                        .unwrap();
                }
            } else if rank == 2 {
                if ordered {
                    session.receive(from(Some(0), None)).await.unwrap();
                }
                w.lock(LockType::Shared, 1, 0).await.unwrap();
                w.put(1, 0, &[8i64]).unwrap();
                w.unlock(1).await.unwrap();
            }
            session.barrier().await.unwrap();
        })
        .await;
        checked.push((id, audit.check(id).await.unwrap()));
    }
    let (ordered, findings) = &checked[0];
    assert_eq!(findings, &Vec::new(), "ordered by the message");
    let events = audit.events(*ordered, 0).await.unwrap();
    let sent: Vec<_> = events
        .iter()
        .filter_map(|entry| match &entry.event {
            Some(AuditEvent::Sent { to: 2, message, .. }) if entry.rank == 0 => {
                Some((entry.seq, *message))
            }
            _ => None,
        })
        .collect();
    let received: Vec<_> = events
        .iter()
        .filter_map(|entry| match &entry.event {
            Some(AuditEvent::Received {
                from: 0, message, ..
            }) if entry.rank == 2 => Some((entry.seq, *message)),
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 1, "{events:#?}");
    assert_eq!(received.len(), 1, "{events:#?}");
    assert_eq!(
        sent[0].1, received[0].1,
        "the receive names the send's message"
    );
    assert!(sent[0].0 < received[0].0, "the send is logged first");
    let (_, findings) = &checked[1];
    assert!(
        findings
            .iter()
            .any(|f| f.rule.name() == "put_put" && f.target == 1),
        "{findings:#?}"
    );
}

/// A world holds a bounded number of bytes sent and not received: past it a send is refused
/// with MPI_ERR_NO_MEM and nothing is sent; a receive makes room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreceived_messages_are_bounded_per_world() {
    let server = crate::spawn_server_with(|config| {
        config.limits.max_queued_message_bytes = 1000;
    })
    .await;
    let fixture = Fixture::on(server, 2).await;
    let [r0, r1] = &fixture.sessions[..] else {
        unreachable!()
    };
    let kilo = Bytes::from(vec![7u8; 600]);
    r0.send(1, 0, 0, kilo.clone()).await.unwrap();
    let refused = r0.send(1, 1, 0, kilo.clone()).await.unwrap_err();
    assert_eq!(refused.class(), Some(ErrorClass::NoMem), "{refused}");
    let first = r1.receive(from(None, None)).await.unwrap();
    assert_eq!((first.tag, first.len), (0, 600));
    assert_eq!(
        r1.probe(from(None, None), false).await.unwrap(),
        None,
        "the refused send left nothing"
    );
    r0.send(1, 1, 0, kilo).await.unwrap();
    assert_eq!(r1.receive(from(None, None)).await.unwrap().tag, 1);
}
