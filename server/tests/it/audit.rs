//! The audit log against SQLite (the default) and a real PostgreSQL: replay equals live,
//! sequence numbers are gap-free under concurrent ranks, tampering is detected at the row —
//! with the clients shipping their own events, and with them persisting those themselves.

use futures::StreamExt;
use onesided_client::{
    Assert, Audit, AuditEntry, AuditEvent, ByteBlock, ClientBreak, ClientFault, ClientSpan,
    Datatype, ErrorClass, Finding, Layout, LockType, Op, Order, StructBlock, Window, WindowSpec,
};
use onesided_proto::v1::{self, client_message::Call, server_message::Reply};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::raw::{Meta, RawSession};
use crate::store::Store;
use crate::{ranks, spawn_server, unique, Fixture, TestServer, ADMIN_TOKEN};

const ELEMENTS: u64 = 8;

/// One rank's share of a random workload: lock epochs with random operations, and local
/// stores published by a lock/unlock of its own rank.
async fn random_epochs(rank: u32, window: Window, seed: u64) -> Window {
    let nranks = window.desc().nranks();
    let mut rng = StdRng::seed_from_u64(seed * 1000 + u64::from(rank));
    for _ in 0..12 {
        let target = rng.random_range(0..nranks);
        if rng.random_bool(0.2) {
            let index = rng.random_range(0..ELEMENTS);
            window
                .store(index, &[rng.random_range(-50i64..50)])
                .unwrap();
            window.lock(LockType::Exclusive, rank, 0).await.unwrap();
            window.unlock(rank).await.unwrap();
            continue;
        }
        let lock = if rng.random_bool(0.5) {
            LockType::Exclusive
        } else {
            LockType::Shared
        };
        window.lock(lock, target, 0).await.unwrap();
        for _ in 0..rng.random_range(1..5) {
            let disp = rng.random_range(0..ELEMENTS);
            let value = rng.random_range(-100i64..100);
            match rng.random_range(0..5) {
                // conflicting puts under shared locks are races: keep writes deterministic in
                // outcome by using accumulates unless the lock is exclusive
                0 if lock == LockType::Exclusive => window.put(target, disp, &[value]).unwrap(),
                0 | 1 => window.accumulate(target, disp, &[value], Op::Sum).unwrap(),
                2 => drop(window.fetch_and_op(target, disp, value, Op::Sum).unwrap()),
                3 => drop(window.compare_and_swap(target, disp, 0i64, value).unwrap()),
                _ => drop(window.get::<i64>(target, disp, 1).unwrap()),
            }
        }
        window.unlock(target).await.unwrap();
    }
    window
}

/// Runs a random workload on a fresh window and returns its id and the live public copies.
async fn workload(fixture: &Fixture, seed: u64) -> (u64, Vec<Vec<u8>>) {
    let windows = fixture.window_of::<i64>(ELEMENTS).await;
    let id = windows[0].desc().id;
    let windows = ranks(windows, move |rank, w| random_epochs(rank, w, seed)).await;
    let reader = &windows[0];
    let mut live = Vec::new();
    for target in 0..3 {
        reader.lock(LockType::Shared, target, 0).await.unwrap();
        let copy = reader.get::<u8>(target, 0, ELEMENTS * 8).unwrap();
        reader.unlock(target).await.unwrap();
        live.push(copy.value().await.unwrap());
    }
    (id, live)
}

/// The rows of the window's own chain (not the client rows behind their markers).
fn window_rows(events: &[AuditEntry]) -> Vec<&AuditEntry> {
    events.iter().filter(|event| event.cseq.is_none()).collect()
}

/// Whether an event is one only a client sees (shipped, or persisted by it).
fn client_side(event: &AuditEntry) -> bool {
    event.event.as_ref().is_some_and(AuditEvent::is_client_side)
}

/// Every session of the fixture enters a world barrier: what each noted before is in the log.
async fn settle(fixture: &Fixture) {
    let barriers = fixture.sessions.iter().map(|session| session.barrier());
    for entered in futures::future::join_all(barriers).await {
        entered.unwrap();
    }
}

/// Random workloads; with `database`, the sessions persist their own events there.
async fn replay_equals_live(server: TestServer, database: Option<String>) {
    let fixture = Fixture::attached(server, 3, database.as_deref()).await;
    let audit = fixture.audit().await;
    for seed in 0..6 {
        let (window, live) = workload(&fixture, seed).await;
        // a world barrier returns once each session's rows before it are stored and named
        settle(&fixture).await;
        let replayed = audit.replay(window, None).await.unwrap();
        assert_eq!(
            replayed.ranks, live,
            "seed {seed}: replay differs from the live copies"
        );
        let verification = audit.verify(window).await.unwrap();
        assert_eq!(verification.first_bad, None, "seed {seed}");
        let events = audit.events(window, 1).await.unwrap();
        let seqs: Vec<u64> = window_rows(&events).iter().map(|event| event.seq).collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "gap-free"
        );
        // the client's side: in the window's chain when shipped, behind markers when persisted
        let shipped = window_rows(&events)
            .into_iter()
            .filter(|event| client_side(event))
            .count();
        let persisted: Vec<&AuditEntry> = events.iter().filter(|e| e.cseq.is_some()).collect();
        if database.is_some() {
            assert_eq!(shipped, 0, "seed {seed}");
            assert!(!persisted.is_empty(), "seed {seed}");
            assert!(persisted.iter().all(|event| client_side(event)));
            assert_eq!(
                verification.client_events,
                persisted.len() as u64,
                "seed {seed}"
            );
            assert_eq!(verification.pending, [], "seed {seed}: settled");
        } else {
            assert!(shipped > 0, "seed {seed}");
            assert!(persisted.is_empty(), "seed {seed}");
            assert_eq!(verification.client_events, 0, "seed {seed}");
        }
        assert!(matches!(
            events[0].event,
            Some(AuditEvent::WindowCreated { .. })
        ));
        // replay at an earlier point: right after the creation every copy is zero
        let start = audit.replay(window, Some(1)).await.unwrap();
        assert!(start.ranks.iter().all(|copy| copy.iter().all(|&b| b == 0)));
    }
}

async_tests! {
    replay_equals_live_on_sqlite => replay_equals_live(spawn_server().await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_equals_live_on_postgres() {
    let store = Store::postgres().await;
    replay_equals_live(store.server().await, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_equals_live_with_clients_persisting_on_sqlite() {
    let server = spawn_server().await;
    let database = Store::Sqlite.url(&server);
    replay_equals_live(server, Some(database)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_equals_live_with_clients_persisting_on_postgres() {
    let store = Store::postgres().await;
    let server = store.server().await;
    let database = store.url(&server);
    replay_equals_live(server, Some(database)).await;
}

async fn sequence_numbers_stay_gap_free_under_eight_concurrent_ranks(store: Store) {
    let fixture = store.fixture(8, false).await;
    let (audit, windows, id) = fixture.audited_window::<i64>(2).await;
    ranks(windows, |_, w| async move {
        w.lock_all(0).await.unwrap();
        // alternating elements: an accumulate repeating the one just before it would be
        // folded into it by the client, and this is about 800 operations in the log
        for i in 0..100 {
            w.accumulate(0, i % 2, &[1i64], Op::Sum).unwrap();
        }
        w.unlock_all().await.unwrap();
    })
    .await;
    let events = audit.events(id, 1).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let ops = events
        .iter()
        .filter(|event| matches!(event.event, Some(AuditEvent::Op { .. })))
        .count();
    assert_eq!(ops, 800, "every accumulate is recorded once");
    let tokens: std::collections::BTreeSet<u64> = events
        .iter()
        .filter_map(|event| match event.event {
            Some(AuditEvent::Op { token, .. }) => Some(token),
            _ => None,
        })
        .collect();
    assert_eq!(
        tokens.len(),
        8,
        "each rank's lock_all grant has its own fencing token"
    );
    assert!(!tokens.contains(&0));
    assert_eq!(audit.verify(id).await.unwrap().first_bad, None);
    let replayed = audit.replay(id, None).await.unwrap();
    let halves = [400i64.to_le_bytes(), 400i64.to_le_bytes()].concat();
    assert_eq!(replayed.ranks[0], halves);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequence_numbers_stay_gap_free_under_eight_concurrent_ranks_on_sqlite() {
    sequence_numbers_stay_gap_free_under_eight_concurrent_ranks(Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequence_numbers_stay_gap_free_under_eight_concurrent_ranks_on_postgres() {
    sequence_numbers_stay_gap_free_under_eight_concurrent_ranks(Store::postgres().await).await;
}

/// Makes an event with an origin say that rank 2 did it (panics on one without).
fn said_by_rank_2(event: &mut AuditEvent) {
    match event {
        AuditEvent::Op { origin, .. }
        | AuditEvent::LockRequest { origin, .. }
        | AuditEvent::LockGrant { origin, .. }
        | AuditEvent::LockRelease { origin, .. }
        | AuditEvent::LockRevoke { origin, .. }
        | AuditEvent::Flush { origin } => *origin = 2,
        other => panic!("no origin in {other:?}"),
    }
}

/// The three statements that swap the rows whose `key` is `$1` and `$2` through a free key
/// value; `scope` is the rest of the WHERE clause (binding `$3`, …).
fn swap_statements(table: &str, key: &str, scope: &str) -> [String; 3] {
    let update = |from: &str, to: &str| {
        format!("UPDATE {table} SET {key} = {to} WHERE {key} = {from} AND {scope}")
    };
    [update("$1", "-1"), update("$2", "$1"), update("-1", "$2")]
}

/// Asserts that event `seq` of `window` lies where `store` writes events: in a group for the
/// default SQLite store, in a row of its own for one written per event and for PostgreSQL, so
/// that a tamper test tampers with what the store really wrote.
async fn assert_stored_as_written(
    store: &Store,
    database: &mut crate::store::Connection,
    window: u64,
    seq: u64,
) {
    let grouped = database.group_holding(window, seq).await.is_some();
    assert_eq!(
        grouped,
        matches!(store, Store::Sqlite),
        "event {seq} of window {window} in a group"
    );
}

async fn changing_deleting_or_reordering_a_row_breaks_verify_at_that_row(store: Store) {
    let fixture = store.fixture(3, false).await;
    let audit = fixture.audit().await;
    let mut database = store.connect(&fixture.server).await;
    for case in ["changed", "deleted", "reordered"] {
        let (window, _) = workload(&fixture, 7).await;
        let events = audit.events(window, 1).await.unwrap();
        let target = events
            .iter()
            .find(|event| event.body.contains("\"origin\":0") && event.seq > 3)
            .expect("an operation of rank 0")
            .seq;
        assert_stored_as_written(&store, &mut database, window, target).await;
        match case {
            // the row now says rank 2 did it
            "changed" => {
                database
                    .rewrite_event_at(window, target, said_by_rank_2)
                    .await
            }
            // rows target and target+1 swapped (through a free sequence number), or their
            // entries in their groups
            "reordered" => database.swap_events(window, target).await,
            // the row, or its entry (its group cut in two around it)
            _ => database.delete_event(window, target).await,
        }
        let verification = audit.verify(window).await.unwrap();
        assert_eq!(verification.first_bad, Some(target), "{case}");
        assert_eq!(verification.client_break, None, "{case}");
    }
}

/// A group of the default SQLite store whose bytes were cut, or that was deleted whole, breaks
/// verification at its first event (a cut group reads as unreadable events over its whole
/// range, never as none: replay and check refuse naming that event).
async fn a_cut_or_deleted_group_breaks_verify_at_its_first_event(store: Store) {
    let (audit, mut database, _fixture, window) = tamper_setup(&store).await;
    let events = audit.events(window, 1).await.unwrap();
    let last = window_rows(&events).last().unwrap().seq;
    // a group of operations, not the window's last (deleting the last shortens the log, which
    // no chain can tell: SECURITY.md)
    let mut groups = Vec::new();
    for event in window_rows(&events) {
        if event.body.contains("\"event\":\"op\"") && event.seq > 3 {
            let group = database
                .group_holding(window, event.seq)
                .await
                .expect("a group");
            if group.last_seq < last as i64 && group.last_seq > group.first_seq {
                groups.push(group);
            }
        }
    }
    assert!(groups.len() >= 2, "{} groups of operations", groups.len());
    let (cut, deleted) = (&groups[0], groups.last().unwrap());
    assert!(cut.last_seq < deleted.first_seq);
    let crate::store::Connection::Sqlite(connection) = &mut database else {
        panic!("groups are SQLite's")
    };
    sqlx::query("DELETE FROM audit_groups WHERE window_id = $1 AND last_seq = $2")
        .bind(window as i64)
        .bind(deleted.last_seq)
        .execute(&mut *connection)
        .await
        .unwrap();
    assert_eq!(
        audit.verify(window).await.unwrap().first_bad,
        Some(deleted.first_seq as u64),
        "deleted"
    );
    let intact = audit.events(window, 1).await.unwrap();
    sqlx::query(
        "UPDATE audit_groups SET entries = substr(entries, 1, length(entries) - 3) \
         WHERE window_id = $1 AND last_seq = $2",
    )
    .bind(window as i64)
    .bind(cut.last_seq)
    .execute(&mut *connection)
    .await
    .unwrap();
    let first = cut.first_seq as u64;
    assert_eq!(
        audit.verify(window).await.unwrap().first_bad,
        Some(first),
        "cut"
    );
    // every event of the cut group is still there, none dropped
    let read = audit.events(window, 1).await.unwrap();
    assert_eq!(
        window_rows(&read)
            .iter()
            .map(|event| event.seq)
            .collect::<Vec<_>>(),
        window_rows(&intact)
            .iter()
            .map(|event| event.seq)
            .collect::<Vec<_>>()
    );
    replay_and_check_refuse_naming(&audit, window, first).await;
}

async_tests! {
    a_cut_or_deleted_group_breaks_verify_at_its_first_event_on_sqlite =>
        a_cut_or_deleted_group_breaks_verify_at_its_first_event(Store::Sqlite);
}

/// Three ranks of a window on `store` after a workload, a connection to tamper with the store,
/// and the window's id; nothing more is written to the window once this returns.
async fn tamper_setup(store: &Store) -> (Audit, crate::store::Connection, Fixture, u64) {
    let fixture = store.fixture(3, false).await;
    let audit = fixture.audit().await;
    let database = store.connect(&fixture.server).await;
    let (window, _) = workload(&fixture, 11).await;
    settle(&fixture).await;
    (audit, database, fixture, window)
}

/// SECURITY.md: an inserted row whose forger computed its hash correctly from the row before is
/// consistent with that row, so `verify` names the row after it, whose stored previous hash no
/// longer fits.
async fn an_inserted_row_with_a_correct_hash_breaks_verify_at_the_row_after_it(store: Store) {
    let (audit, mut database, _server, window) = tamper_setup(&store).await;
    let events = audit.events(window, 1).await.unwrap();
    let original = events
        .iter()
        .find(|event| event.body.contains("\"origin\":0") && event.seq > 3)
        .expect("an operation of rank 0")
        .clone();
    let target = original.seq;
    assert_eq!(audit.verify(window).await.unwrap().first_bad, None);
    assert_stored_as_written(&store, &mut database, window, target).await;
    // a copy of rank 0's operation, now said to be rank 2's, slipped in before it
    database
        .insert_forged_row(window, target, said_by_rank_2)
        .await;
    let forged = audit.events(window, target).await.unwrap();
    assert_eq!(forged[0].seq, target);
    assert!(
        forged[0].body.contains("\"origin\":2"),
        "{}",
        forged[0].body
    );
    assert_eq!(
        (forged[1].seq, &forged[1].body),
        (target + 1, &original.body),
        "the row that was there moved one place up"
    );
    let verification = audit.verify(window).await.unwrap();
    assert_eq!(verification.first_bad, Some(target + 1));
    assert_eq!(verification.client_break, None);
}

store_tests! {
    an_inserted_row_with_a_correct_hash_breaks_verify_at_the_row_after_it:
        an_inserted_row_with_a_correct_hash_breaks_verify_at_the_row_after_it_on_sqlite,
        an_inserted_row_with_a_correct_hash_breaks_verify_at_the_row_after_it_on_postgres;
}

/// Replay and check, which act on events, refuse with DATA_LOSS naming event `seq` of
/// `window` as unreadable, instead of leaving it out.
async fn replay_and_check_refuse_naming(audit: &Audit, window: u64, seq: u64) {
    let named = format!("event {seq} of window {window} cannot be read");
    let replayed = audit.replay(window, None).await.unwrap_err();
    assert_eq!(replayed.code(), tonic::Code::DataLoss, "{replayed}");
    assert!(replayed.to_string().contains(&named), "{replayed}");
    let checked = audit.check(window).await.unwrap_err();
    assert_eq!(checked.code(), tonic::Code::DataLoss, "{checked}");
    assert!(checked.to_string().contains(&named), "{checked}");
}

/// A row whose stored event cannot be read is named by verify, and readers that act on
/// events (replay, check) refuse with DATA_LOSS naming it instead of silently leaving it out.
async fn an_unreadable_row_is_named_never_skipped(store: Store) {
    let (audit, mut database, _server, window) = tamper_setup(&store).await;
    let events = audit.events(window, 1).await.unwrap();
    let target = events
        .iter()
        .find(|event| event.body.contains("\"event\":\"op\""))
        .expect("an applied operation")
        .seq;
    assert!(audit.replay(window, None).await.is_ok());
    assert_stored_as_written(&store, &mut database, window, target).await;
    // bytes that are no protobuf event (a field number 0 is never valid)
    database
        .set_event_bytes(window, target, &[0x00, 0xff])
        .await;

    assert_eq!(audit.verify(window).await.unwrap().first_bad, Some(target));
    replay_and_check_refuse_naming(&audit, window, target).await;
}

store_tests! {
    an_unreadable_row_is_named_never_skipped:
        an_unreadable_row_is_named_never_skipped_on_sqlite,
        an_unreadable_row_is_named_never_skipped_on_postgres;
    changing_deleting_or_reordering_a_row_breaks_verify_at_that_row:
        changing_deleting_or_reordering_a_row_breaks_verify_at_that_row_on_sqlite,
        changing_deleting_or_reordering_a_row_breaks_verify_at_that_row_on_postgres;
}

// the same in a store written one row per event (`--audit-sqlite-rows per-event`, the shape of
// stores before issue 45), whose rows the tests tamper with
async_tests! {
    an_inserted_row_with_a_correct_hash_breaks_verify_at_the_row_after_it_on_sqlite_per_event =>
        an_inserted_row_with_a_correct_hash_breaks_verify_at_the_row_after_it(Store::SqlitePerEvent);
    an_unreadable_row_is_named_never_skipped_on_sqlite_per_event =>
        an_unreadable_row_is_named_never_skipped(Store::SqlitePerEvent);
    changing_deleting_or_reordering_a_row_breaks_verify_at_that_row_on_sqlite_per_event =>
        changing_deleting_or_reordering_a_row_breaks_verify_at_that_row(Store::SqlitePerEvent);
}

/// With `persisting`, the sessions write their own events and the follower sees each marker
/// followed by the client rows it names, as the stored log has them.
async fn followers_see_live_events_without_gaps(persisting: bool) {
    let fixture = Store::Sqlite.fixture(2, persisting).await;
    let (audit, windows, id) = fixture.audited_window::<i64>(1).await;
    let mut follower = Box::pin(audit.follow(id, 1).await.unwrap());
    for round in 0..20i64 {
        windows[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
        windows[0].put(1, 0, &[round]).unwrap();
        windows[0].unlock(1).await.unwrap();
    }
    let stored: Vec<String> = audit
        .events(id, 1)
        .await
        .unwrap()
        .iter()
        .map(AuditEntry::place)
        .collect();
    let mut seen = Vec::new();
    while seen.len() < stored.len() {
        let event = tokio::time::timeout(std::time::Duration::from_secs(10), follower.next())
            .await
            .expect("the follower stalled")
            .unwrap()
            .unwrap();
        seen.push(event.place());
    }
    assert_eq!(seen, stored);
    let window_seqs: Vec<String> = stored
        .iter()
        .filter(|p| !p.contains(':'))
        .cloned()
        .collect();
    let expected: Vec<String> = (1..=window_seqs.len()).map(|seq| seq.to_string()).collect();
    assert_eq!(window_seqs, expected, "gap-free");
    assert_eq!(
        stored.iter().any(|place| place.contains(':')),
        persisting,
        "{stored:?}"
    );
}

async_tests! {
    followers_see_live_events_without_gaps_shipped => followers_see_live_events_without_gaps(false);
    followers_see_live_events_and_client_rows_without_gaps_persisted =>
        followers_see_live_events_without_gaps(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_side_of_the_history_is_recorded_in_program_order() {
    let fixture = Fixture::new(2).await;
    let (audit, w, id) = fixture.audited_window::<i64>(4).await;
    assert!(w[1].session().audited());
    w[1].store(2, &[5i64]).unwrap();
    w[1].lock(LockType::Exclusive, 1, 0).await.unwrap();
    let _ = w[1].load::<i64>(0, 4).unwrap();
    w[1].unlock(1).await.unwrap();
    w[0].lock_all(0).await.unwrap();
    let got = w[0].get::<i64>(1, 0, 4).unwrap();
    w[0].flush_local(1).await.unwrap();
    w[0].unlock_all().await.unwrap();
    assert_eq!(got.value().await.unwrap(), vec![0, 0, 5, 0]);
    // one more call of each rank carries their last notes
    let (a, b) = tokio::join!(w[0].session().barrier(), w[1].session().barrier());
    a.unwrap();
    b.unwrap();
    let events = audit.events(id, 1).await.unwrap();
    let of_rank = |rank: u32| -> Vec<String> {
        events
            .iter()
            .filter(|event| event.rank == rank && event.incarnation > 0)
            .map(|event| match &event.event {
                Some(AuditEvent::Issued { call, .. }) => format!("issued {call}"),
                Some(AuditEvent::Returned { call, .. }) => format!("returned {call}"),
                Some(AuditEvent::Store { ranges }) => format!("store {ranges:?}"),
                Some(AuditEvent::Load { ranges }) => format!("load {ranges:?}"),
                Some(other) => other.kind().to_string(),
                None => "unreadable".to_string(),
            })
            .collect()
    };
    assert_eq!(
        of_rank(1),
        vec![
            "attach",
            "store [(16, 24)]",
            "issued lock",
            "returned lock",
            "load [(0, 32)]",
            "issued unlock",
            "returned unlock",
            "barrier_enter",
            "barrier_exit",
        ]
    );
    let rank0 = of_rank(0);
    // a missing event fails here (None would compare below every Some)
    let position = |name: &str| {
        rank0
            .iter()
            .position(|kind| kind == name)
            .unwrap_or_else(|| panic!("no {name} in {rank0:?}"))
    };
    assert!(position("op_issued") < position("flush_local"), "{rank0:?}");
    assert!(
        position("flush_local") < position("issued unlock_all"),
        "{rank0:?}"
    );
    assert!(
        rank0.contains(&"returned unlock_all".to_string()),
        "{rank0:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_flags_forum_example_3_and_passes_example_2() {
    let fixture = Fixture::new(2).await;
    // example 3: B's store before its shared lock races with A's get
    let (audit, windows, racy) = fixture.audited_window::<i64>(1).await;
    ranks(windows, |rank, w| async move {
        if rank == 1 {
            w.store(0, &[7i64]).unwrap();
            w.lock(LockType::Shared, 1, 0).await.unwrap();
            w.session().barrier().await.unwrap();
            w.session().barrier().await.unwrap();
            w.unlock(1).await.unwrap();
        } else {
            w.session().barrier().await.unwrap();
            w.lock(LockType::Shared, 1, 0).await.unwrap();
            let x = w.get::<i64>(1, 0, 1).unwrap();
            w.unlock(1).await.unwrap();
            x.value().await.unwrap();
            w.session().barrier().await.unwrap();
        }
    })
    .await;
    let findings = audit.check(racy).await.unwrap();
    assert!(
        findings
            .iter()
            .any(|f| f.rule.name() == "get_store" && f.target == 1 && f.bytes == (0, 8)),
        "{findings:#?}"
    );

    // example 2: put under an exclusive lock, barrier, the owner locks its window and loads
    let windows = fixture.window_of::<i64>(1).await;
    let correct = windows[0].desc().id;
    ranks(windows, |rank, w| async move {
        if rank == 0 {
            w.lock(LockType::Exclusive, 1, 0).await.unwrap();
            w.put(1, 0, &[7i64]).unwrap();
            w.unlock(1).await.unwrap();
            w.session().barrier().await.unwrap();
        } else {
            w.session().barrier().await.unwrap();
            w.lock(LockType::Exclusive, 1, 0).await.unwrap();
            assert_eq!(w.load::<i64>(0, 1).unwrap(), vec![7]);
            w.unlock(1).await.unwrap();
        }
    })
    .await;
    assert_eq!(audit.check(correct).await.unwrap(), Vec::new());

    let trace: serde_json::Value =
        serde_json::from_str(&audit.export_perfetto(racy).await.unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let tracks = events
        .iter()
        .filter(|event| event["ph"] == "M" && event["name"] == "thread_name")
        .count();
    assert_eq!(tracks, 2, "one track per rank");
    assert!(events.iter().any(|event| event["ph"] == "s"));
    assert!(events.iter().any(|event| event["ph"] == "f"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_record_their_fence_epoch() {
    let fixture = Fixture::new(2).await;
    let (audit, windows, id) = fixture.audited_window::<i64>(1).await;
    ranks(windows, |rank, w| async move {
        w.fence(0).await.unwrap();
        w.fence(0).await.unwrap();
        if rank == 0 {
            w.put(1, 0, &[1i64]).unwrap();
        }
        w.fence(Assert::NOSUCCEED).await.unwrap();
    })
    .await;
    let epochs: Vec<(u64, u64)> = audit
        .events(id, 1)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|event| match event.event {
            Some(AuditEvent::Op { epoch, token, .. }) => Some((epoch, token)),
            _ => None,
        })
        .collect();
    assert_eq!(
        epochs,
        vec![(2, 0)],
        "issued after the second fence, no lock"
    );
}

/// With `persisting`, close also waits until the session's writer committed its rows.
async fn closing_a_session_records_its_last_loads_and_stores(persisting: bool) {
    let fixture = Store::Sqlite.fixture(1, persisting).await;
    let (audit, windows, id) = fixture.audited_window::<i64>(2).await;
    windows[0].store(1, &[3i64]).unwrap();
    let _ = windows[0].load::<i64>(0, 1).unwrap();
    let session = windows[0].session().clone();
    // the window handle is gone; its pending accesses are still shipped at close
    drop(windows);
    session.close().await.unwrap();
    let events = audit.events(id, 1).await.unwrap();
    let kinds: Vec<String> = events
        .iter()
        .filter_map(|event| match &event.event {
            Some(AuditEvent::Store { ranges }) => Some(format!("store {ranges:?}")),
            Some(AuditEvent::Load { ranges }) => Some(format!("load {ranges:?}")),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, vec!["store [(8, 16)]", "load [(0, 8)]"]);
    let verification = audit.verify(id).await.unwrap();
    assert_eq!(verification.first_bad, None);
    assert_eq!(verification.unmarked, [], "nothing left unnamed");
    let persisted = events.iter().filter(|event| event.cseq.is_some()).count();
    assert_eq!(persisted, if persisting { 2 } else { 0 });
    assert_eq!(verification.client_events, persisted as u64);
}

async_tests! {
    closing_a_session_records_its_last_loads_and_stores_shipped =>
        closing_a_session_records_its_last_loads_and_stores(false);
    closing_a_persisting_session_commits_its_last_loads_and_stores =>
        closing_a_session_records_its_last_loads_and_stores(true);
}

// --- clients persisting their own events ---------------------------------------------------

/// A finding as two recordings of one program agree on: the rule, the target, the bytes and
/// the two accesses (rank, call) without their places, in either order.
type Judged = (String, u32, (u64, u64), Vec<(u32, String)>);

fn judged(findings: &[Finding]) -> Vec<Judged> {
    let mut judged: Vec<_> = findings
        .iter()
        .map(|finding| {
            let mut sides = vec![
                (finding.first.rank, finding.first.call.clone()),
                (finding.second.rank, finding.second.call.clone()),
            ];
            sides.sort();
            (
                finding.rule.name().to_string(),
                finding.target,
                finding.bytes,
                sides,
            )
        })
        .collect();
    judged.sort();
    judged
}

/// Rank 1 stores into its element 0 while rank 0 puts there, in one fence epoch; after the
/// closing fence rank 1 loads it. Once the live public copies are read, a world barrier ships
/// every rank's last notes. Returns the window and the live copies.
async fn store_races_put(fixture: &Fixture) -> (u64, Vec<Vec<u8>>) {
    let windows = fixture.window_of::<i64>(2).await;
    let id = windows[0].desc().id;
    let windows = ranks(windows, |rank, w| async move {
        w.fence(0).await.unwrap();
        if rank == 0 {
            w.put(1, 0, &[7i64]).unwrap();
        } else {
            w.store(0, &[5i64, 6]).unwrap();
        }
        w.fence(0).await.unwrap();
        if rank == 1 {
            let _ = w.load::<i64>(0, 2).unwrap();
        }
        w.fence(Assert::NOSUCCEED).await.unwrap();
        w
    })
    .await;
    let mut live = Vec::new();
    for target in 0..2 {
        let reader = &windows[0];
        reader.lock(LockType::Shared, target, 0).await.unwrap();
        let copy = reader.get::<u8>(target, 0, 16).unwrap();
        reader.unlock(target).await.unwrap();
        live.push(copy.value().await.unwrap());
    }
    settle(fixture).await;
    (id, live)
}

async fn local_stores_racing_a_remote_put_are_found_alike_shipped_or_persisted(
    shipped_store: Store,
    persisted_store: Store,
) {
    let shipped_fixture = shipped_store.fixture(2, false).await;
    let shipped_audit = shipped_fixture.audit().await;
    let (shipped, _) = store_races_put(&shipped_fixture).await;
    let shipped_findings = shipped_audit.check(shipped).await.unwrap();
    assert!(
        shipped_findings
            .iter()
            .any(|f| f.rule.name() == "store_while_pending" && f.target == 1),
        "{shipped_findings:#?}"
    );

    let fixture = persisted_store.fixture(2, true).await;
    let audit = fixture.audit().await;
    let mut connection = persisted_store.connect(&fixture.server).await;
    let (window, live) = store_races_put(&fixture).await;
    let findings = audit.check(window).await.unwrap();
    assert_eq!(judged(&findings), judged(&shipped_findings));
    let events = audit.events(window, 1).await.unwrap();
    // every local access a finding names is a client row behind its marker
    for side in findings.iter().flat_map(|f| [&f.first, &f.second]) {
        if side.call == "store" || side.call == "load" {
            let cseq = side.cseq.expect("a client row");
            let row = events
                .iter()
                .find(|e| (e.seq, e.cseq) == (side.seq, Some(cseq)) && e.rank == side.rank)
                .unwrap_or_else(|| panic!("{side:?} is not in the log"));
            assert_eq!(
                row.event.as_ref().map(AuditEvent::kind),
                Some(side.call.as_str())
            );
            let marker = events
                .iter()
                .find(|e| e.seq == side.seq && e.cseq.is_none())
                .unwrap();
            assert!(matches!(
                marker.event,
                Some(AuditEvent::ClientEvents { from, to, .. }) if from <= cseq && cseq <= to
            ));
        } else {
            assert_eq!(side.cseq, None, "{side:?}");
        }
    }
    assert_eq!(audit.replay(window, None).await.unwrap().ranks, live);
    let intact = audit.verify(window).await.unwrap();
    assert_eq!(intact.first_bad, None);
    let client_rows = events.iter().filter(|e| e.cseq.is_some()).count() as u64;
    assert!(client_rows > 0);
    assert_eq!(intact.client_events, client_rows);
    assert_eq!(intact.unmarked, []);

    // change rank 1's store in its client row: verify names the marker and the row
    let stored = events
        .iter()
        .find(|e| e.rank == 1 && matches!(e.event, Some(AuditEvent::Store { .. })))
        .unwrap();
    let binds = [
        window as i64,
        1,
        stored.incarnation as i64,
        stored.cseq.unwrap() as i64,
    ];
    connection
        .rewrite_event(
            "client_events",
            "window_id = $1 AND rank = $2 AND incarnation = $3 AND cseq = $4",
            &binds,
            |event| match event {
                AuditEvent::Store { ranges } => {
                    assert_eq!(*ranges, [(0, 16)]);
                    *ranges = vec![(0, 8)];
                }
                other => panic!("not rank 1's store: {other:?}"),
            },
        )
        .await;
    let broken = audit.verify(window).await.unwrap();
    assert_eq!(broken.first_bad, Some(stored.seq));
    assert_eq!(
        broken.client_break,
        Some(ClientBreak {
            marker: stored.seq,
            rank: 1,
            incarnation: stored.incarnation,
            cseq: stored.cseq.unwrap(),
            fault: ClientFault::Altered,
        })
    );
}

async_tests! {
    local_stores_racing_a_remote_put_are_found_alike_shipped_or_persisted_on_sqlite =>
        local_stores_racing_a_remote_put_are_found_alike_shipped_or_persisted(
            Store::Sqlite,
            Store::Sqlite,
        );
    local_stores_racing_a_remote_put_are_found_alike_shipped_or_persisted_on_postgres =>
        local_stores_racing_a_remote_put_are_found_alike_shipped_or_persisted(
            Store::postgres().await,
            Store::postgres().await,
        );
}

/// Rank 0 stores, loads and locks its own window a few times: a chain of client rows under
/// several markers. A closing barrier ships its last notes.
async fn local_program(fixture: &Fixture) -> u64 {
    let windows = fixture.window_of::<i64>(2).await;
    let w = &windows[0];
    for round in 0..3i64 {
        w.store(round as u64 % 2, &[round]).unwrap();
        w.lock(LockType::Exclusive, 0, 0).await.unwrap();
        let _ = w.load::<i64>(0, 2).unwrap();
        w.unlock(0).await.unwrap();
    }
    w.session().barrier().await.unwrap();
    w.desc().id
}

async fn deleted_or_reordered_client_rows_break_verify_and_unnamed_ones_are_reported(store: Store) {
    let fixture = store.fixture(1, true).await;
    let audit = fixture.audit().await;
    let mut connection = store.connect(&fixture.server).await;
    let incarnation = fixture.sessions[0].incarnation();
    let chain = "window_id = $3 AND rank = 0 AND incarnation = $4";
    for (case, fault) in [
        ("deleted", ClientFault::Missing),
        ("reordered", ClientFault::Altered),
    ] {
        let window = local_program(&fixture).await;
        let events = audit.events(window, 1).await.unwrap();
        assert!(events.iter().filter(|e| e.cseq.is_some()).count() >= 6);
        assert_eq!(
            audit.verify(window).await.unwrap().first_bad,
            None,
            "{case}"
        );
        // the third client row, and the marker naming it
        let third = events.iter().find(|e| e.cseq == Some(3)).unwrap();
        let binds = [3, 4, window as i64, incarnation as i64];
        let changed = if case == "deleted" {
            let sql = "DELETE FROM client_events \
                       WHERE cseq = $1 AND window_id = $2 AND rank = 0 AND incarnation = $3";
            let row = [binds[0], binds[2], binds[3]];
            connection.execute(&[(sql, &row)]).await
        } else {
            let swap = swap_statements("client_events", "cseq", chain);
            let statements: Vec<(&str, &[i64])> =
                swap.iter().map(|sql| (sql.as_str(), &binds[..])).collect();
            connection.execute(&statements).await
        };
        assert!(changed.iter().all(|&rows| rows == 1), "{case}: {changed:?}");
        let broken = audit.verify(window).await.unwrap();
        assert_eq!(broken.first_bad, Some(third.seq), "{case}");
        assert_eq!(
            broken.client_break,
            Some(ClientBreak {
                marker: third.seq,
                rank: 0,
                incarnation,
                cseq: 3,
                fault,
            }),
            "{case}"
        );
    }

    // rows a client wrote and never named (it stopped before shipping their marker) are
    // reported, not merged; the log stays intact
    let window = local_program(&fixture).await;
    let events = audit.events(window, 1).await.unwrap();
    let last = events.iter().filter_map(|e| e.cseq).max().unwrap();
    let findings = audit.check(window).await.unwrap();
    for cseq in [last + 1, last + 2] {
        let binds = [window as i64, incarnation as i64, cseq as i64];
        let inserted = connection
            .execute(&[(
                "INSERT INTO client_events \
                 (window_id, rank, incarnation, cseq, at_ns, kind, body, prev_hash, hash) \
                 VALUES ($1, 0, $2, $3, 0, 'store', '{\"event\":\"store\",\"ranges\":[[0,8]]}', \
                 '', '')",
                &binds,
            )])
            .await;
        assert_eq!(inserted, [1]);
    }
    let verification = audit.verify(window).await.unwrap();
    assert_eq!(verification.first_bad, None);
    assert_eq!(
        verification.unmarked,
        [rank_0_span(incarnation, last + 1, last + 2)]
    );
    assert_eq!(audit.events(window, 1).await.unwrap(), events, "not merged");
    assert_eq!(audit.check(window).await.unwrap(), findings);
}

store_tests! {
    deleted_or_reordered_client_rows_break_verify_and_unnamed_ones_are_reported:
        deleted_or_reordered_client_rows_break_verify_and_unnamed_ones_are_reported_on_sqlite,
        deleted_or_reordered_client_rows_break_verify_and_unnamed_ones_are_reported_on_postgres;
}

/// The client rows `from..=to` of rank 0's session `incarnation`.
fn rank_0_span(incarnation: u64, from: u64, to: u64) -> ClientSpan {
    ClientSpan {
        rank: 0,
        incarnation,
        from,
        to,
    }
}

/// Follows window `id`'s log until the session `incarnation` of `rank` detached.
async fn detached(audit: &Audit, id: u64, rank: u32, incarnation: u64) {
    let mut follower = Box::pin(audit.follow(id, 1).await.unwrap());
    loop {
        let event = tokio::time::timeout(std::time::Duration::from_secs(10), follower.next())
            .await
            .expect("no detach within 10 s")
            .unwrap()
            .unwrap();
        if (event.rank, event.incarnation) == (rank, incarnation)
            && matches!(event.event, Some(AuditEvent::Detach))
        {
            return;
        }
    }
}

async fn rows_missing_at_the_end_of_a_live_clients_chain_are_pending_until_it_detaches(
    store: Store,
) {
    let fixture = store.fixture(1, true).await;
    let audit = fixture.audit().await;
    let mut connection = store.connect(&fixture.server).await;
    let id = local_program(&fixture).await;
    let incarnation = fixture.sessions[0].incarnation();
    // as if the client's writer had not committed the last marker's rows yet
    let events = audit.events(id, 1).await.unwrap();
    let Some(AuditEvent::ClientEvents { from, to, .. }) =
        events.iter().rev().find_map(|event| match &event.event {
            Some(marker @ AuditEvent::ClientEvents { .. }) => Some(marker.clone()),
            _ => None,
        })
    else {
        panic!("no marker: {events:#?}");
    };
    let deleted = connection
        .execute(&[(
            "DELETE FROM client_events WHERE window_id = $1 AND rank = 0 AND incarnation = $2 \
             AND cseq >= $3",
            &[id as i64, incarnation as i64, from as i64],
        )])
        .await;
    assert_eq!(deleted, [to - from + 1]);
    let live = audit.verify(id).await.unwrap();
    assert_eq!(live.first_bad, None, "the client may still be writing them");
    assert_eq!(live.pending, [rank_0_span(incarnation, from, to)]);
    // once the session is gone, what its markers name must be there
    let Fixture {
        server, sessions, ..
    } = fixture;
    drop(sessions);
    detached(&audit, id, 0, incarnation).await;
    let gone = audit.verify(id).await.unwrap();
    assert_eq!(gone.pending, []);
    assert_eq!(
        gone.client_break.map(|at| (at.cseq, at.fault)),
        Some((from, ClientFault::Missing))
    );
    drop(server);
}

store_tests! {
    rows_missing_at_the_end_of_a_live_clients_chain_are_pending_until_it_detaches:
        rows_missing_at_the_end_of_a_live_clients_chain_are_pending_on_sqlite,
        rows_missing_at_the_end_of_a_live_clients_chain_are_pending_on_postgres;
}

/// A rank's session spoken to over raw gRPC, as a hostile client would, and its greeting.
async fn raw_session(url: &str, token: &str) -> (RawSession, v1::Attached) {
    let mut grpc = crate::raw::raw(url).await;
    RawSession::open(&mut grpc, &Meta::bearer(token))
        .await
        .unwrap()
}

/// Sends `call` on `raw` and returns its answer, whatever it is.
async fn answer(raw: &mut RawSession, call: Call) -> Reply {
    raw.call(Some(call)).await.reply.expect("an empty answer")
}

fn marker(window: u64, from: u64, to: u64, hash_len: usize) -> Call {
    crate::raw::client_rows(window, from, to, vec![7u8; hash_len])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_must_continue_the_sessions_chain_and_verify_holds_them_to_their_rows() {
    let fixture = Fixture::new(1).await;
    let audit = fixture.audit().await;
    let spec = WindowSpec::of::<i64>(&unique("w"), 1, 1);
    let windows = fixture.window(spec.clone()).await;
    let id = windows[0].desc().id;
    assert_eq!(fixture.sessions[0].incarnation(), 1);
    let (mut raw, greeting) = raw_session(&fixture.server.url, &fixture.tokens[0]).await;
    assert_eq!(greeting.incarnation, 2, "the rank's second session");
    assert!(matches!(
        answer(&mut raw, crate::raw::open_window(&spec.name)).await,
        Reply::Window(_)
    ));
    let with_events = Call::Record(v1::Record {
        window: id,
        events: vec![AuditEvent::Load {
            ranges: vec![(0, 8)],
        }
        .to_json()],
        rows: Some(v1::ClientRows {
            from: 1,
            to: 1,
            hash: vec![7u8; 32].into(),
        }),
    });
    let refused = |reply: Reply| match reply {
        Reply::Error(failure) => {
            let error = failure.error.unwrap();
            (
                onesided_client::ErrorClass::from_code(error.class),
                error.message,
            )
        }
        other => panic!("accepted: {other:?}"),
    };
    use onesided_client::ErrorClass::{Arg, Win};
    for (call, class, says) in [
        (marker(id, 2, 2, 32), Arg, "the next is 1"),
        (marker(id, 1, 0, 32), Arg, "the next is 1"),
        (marker(id, 1, 1, 5), Arg, "32 bytes, not 5"),
        (with_events, Arg, "not both"),
        (marker(999, 1, 1, 32), Win, "999"),
    ] {
        let (refused_class, message) = refused(answer(&mut raw, call).await);
        assert_eq!(refused_class, Some(class), "{message}");
        assert!(message.contains(says), "{message}");
    }
    // nothing refused moved the chain on: 1..=2 is accepted, then 3 is next
    assert!(matches!(
        answer(&mut raw, marker(id, 1, 2, 32)).await,
        Reply::Done(_)
    ));
    let (_, message) = refused(answer(&mut raw, marker(id, 2, 3, 32)).await);
    assert!(message.contains("the next is 3"), "{message}");
    assert!(matches!(
        answer(&mut raw, marker(id, 3, 3, 32)).await,
        Reply::Done(_)
    ));
    let markers: Vec<(u64, u64, u64)> = audit
        .events(id, 1)
        .await
        .unwrap()
        .iter()
        .filter_map(|event| match &event.event {
            Some(AuditEvent::ClientEvents { from, to, hash }) => {
                assert_eq!((event.rank, event.incarnation), (0, 2));
                assert_eq!(hash, &vec![7u8; 32]);
                Some((event.seq, *from, *to))
            }
            _ => None,
        })
        .collect();
    assert_eq!(markers.len(), 2, "{markers:?}");
    // the server logs what a client claims; verify holds the claim to the rows, of which this
    // client stored none: pending while it is attached, missing once it is gone
    let live = audit.verify(id).await.unwrap();
    assert_eq!(live.first_bad, None);
    assert_eq!(live.pending, [rank_0_span(2, 1, 3)]);
    drop(raw);
    detached(&audit, id, 0, 2).await;
    let gone = audit.verify(id).await.unwrap();
    assert_eq!(gone.first_bad, Some(markers[0].0));
    assert_eq!(
        gone.client_break,
        Some(ClientBreak {
            marker: markers[0].0,
            rank: 0,
            incarnation: 2,
            cseq: 1,
            fault: ClientFault::Missing,
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_a_client_cannot_write_its_rows_to_is_refused_at_attach() {
    use onesided_client::{Error, Session};
    let fixture = Fixture::new(1).await;
    let data = &fixture.server.data.0;
    // an SQLite file that is not an audit store
    let other = data.join("other.db");
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&other)
        .create_if_missing(true);
    sqlx::SqlitePool::connect_with(options)
        .await
        .unwrap()
        .close()
        .await;
    // a fresh, empty PostgreSQL database: the shared one may well hold a client_events table
    let empty = crate::store::PgDatabase::create().await;
    for (url, says) in [
        (
            format!("sqlite:{}", other.display()),
            "no client_events table",
        ),
        (empty.url.clone(), "no client_events table"),
        (
            format!("sqlite:{}", data.join("missing.db").display()),
            "cannot open the SQLite audit store",
        ),
        ("mysql://127.0.0.1/audit".to_string(), "unsupported"),
    ] {
        let error = Session::builder(&fixture.server.url, &fixture.tokens[0])
            .audit_database_url(url)
            .attach()
            .await
            .unwrap_err();
        assert!(matches!(error, Error::AuditStore(_)), "{error:?}");
        assert!(error.to_string().contains(says), "{error}");
        assert_eq!(error.code(), tonic::Code::Unavailable);
    }
    // a server that records nothing needs no client rows: the URL is not even opened
    let quiet = crate::spawn_server_with(|config| {
        config.durability = onesided_server::audit::Durability::Off;
    })
    .await;
    let world = quiet.admin.create_world("w", 1).await.unwrap();
    let session = Session::builder(&quiet.url, &world.tokens[0])
        .audit_database_url("mysql://127.0.0.1/audit")
        .attach()
        .await
        .unwrap();
    assert!(!session.audited() && !session.persists_audit_events());
}

/// A read from a sequence number past `i64::MAX` (SQL's BIGINT) starts after every recorded
/// event: it must not wrap to a negative bound and stream the log from the beginning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_from_past_i64_max_are_none_and_replay_there_is_the_end() {
    let (audit_fixture, windows) = Fixture::with_window::<i64>(2, 2).await;
    let audit = audit_fixture.audit().await;
    let id = windows[0].desc().id;
    ranks(windows, |rank, w| async move {
        w.fence(0).await.unwrap();
        w.put(1 - rank, 0, &[i64::from(rank) + 7]).unwrap();
        w.fence(0).await.unwrap();
    })
    .await;
    let all = audit.events(id, 1).await.unwrap();
    assert!(all.len() > 4, "the workload is recorded: {}", all.len());
    for from in [1u64 << 63, (1 << 63) + 1, u64::MAX] {
        let events = audit.events(id, from).await.unwrap();
        assert!(
            events.is_empty(),
            "events from {from}: {} rows, first seq {:?}",
            events.len(),
            events.first().map(|event| event.seq)
        );
    }
    let end = audit.replay(id, None).await.unwrap();
    for at in [1u64 << 63, u64::MAX] {
        assert_eq!(
            audit.replay(id, Some(at)).await.unwrap(),
            end,
            "replay at {at}"
        );
    }
    for window in [id | (1 << 63), u64::MAX] {
        let status = audit.verify(window).await.unwrap_err();
        assert_eq!(status.class(), Some(ErrorClass::Win), "{status:?}");
    }
}

/// Under `async` durability a window's creation is committed after its answer: an audit read
/// of a window that exists waits for that commit instead of answering NOT_FOUND. A window id
/// never used is still NOT_FOUND.
async fn a_window_just_created_under_async_durability_is_found(store: Store) {
    let server = store
        .server_with(|config| config.durability = onesided_server::audit::Durability::Async)
        .await;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let world = unique("world");
    server.admin.create_world(&world, 2).await.unwrap();
    let mut last = 0;
    for _ in 0..20 {
        let spec = WindowSpec::of::<i64>(&unique("w"), 2, 4);
        let id = server.admin.create_window(&world, &spec).await.unwrap().id;
        // every read at once, each as the first to ask about the window
        let (replayed, verified, checked, exported) = tokio::join!(
            audit.replay(id, None),
            audit.verify(id),
            audit.check(id),
            audit.export_perfetto(id),
        );
        assert_eq!(
            replayed.unwrap().ranks,
            vec![vec![0u8; 32]; 2],
            "window {id}"
        );
        assert_eq!(verified.unwrap().first_bad, None, "window {id}");
        assert_eq!(checked.unwrap(), Vec::new(), "window {id}");
        exported.unwrap();
        last = id;
    }
    for never in [last + 1, last + 1000, u64::MAX] {
        let error = audit.replay(never, None).await.unwrap_err();
        assert_eq!(
            (error.code(), error.class()),
            (tonic::Code::NotFound, Some(ErrorClass::Win)),
            "window {never}: {error}"
        );
    }
}

store_tests! {
    a_window_just_created_under_async_durability_is_found:
        a_window_just_created_under_async_durability_is_found_on_sqlite,
        a_window_just_created_under_async_durability_is_found_on_postgres;
}

/// Puts through hvector, hindexed and subarray layouts reach the log as the bytes they touch:
/// replay rebuilds the window from them, and the race checker sees exactly which bytes two
/// origins share (interleaved elements do not race; an overlapping subarray does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_placed_and_subarray_layouts_replay_and_race_by_their_bytes() {
    let fixture = Fixture::new(3).await;
    let (audit, w, id) = fixture.audited_window::<i64>(8).await;
    fence_all(&w, Assert::NOPRECEDE).await;
    // rank 0: the even elements of rank 2 (16 bytes apart); rank 1: the odd ones
    let evens = Layout::Hvector {
        count: 4,
        blocklen: 1,
        stride_bytes: 16,
    };
    let odds = Layout::Hindexed {
        blocks: (0..4)
            .map(|i| ByteBlock {
                offset: 8 + 16 * i,
                len: 1,
            })
            .collect(),
    };
    w[0].put_layout(2, 0, evens, &[10i64, 12, 14, 16]).unwrap();
    w[1].put_layout(2, 0, odds, &[11i64, 13, 15, 17]).unwrap();
    fence_all(&w, 0).await;
    // next epoch: rank 1 writes the 2x2 block at (1,0) of rank 2 seen as 4x2, which holds
    // element 2, the first of rank 0's elements 2..4
    w[0].put(2, 2, &[20i64, 30]).unwrap();
    let block = crate::subarray([4, 2], [2, 2], [1, 0], Order::C);
    w[1].put_layout(2, 0, block, &[1i64, 1, 1, 1]).unwrap();
    fence_all(&w, Assert::NOSUCCEED).await;
    rank_2_replays_as_it_is(&audit, id, &w[2]).await;
    let findings = audit.check(id).await.unwrap();
    // only the second epoch's overlap: bytes 16..32 of rank 2 (elements 2 and 3)
    assert_eq!(
        races(&findings),
        vec![("put_put", 2, (16, 32))],
        "{findings:#?}"
    );
}

/// Puts through resized and struct layouts reach the log as the bytes they touch: replay
/// rebuilds the window from them, and the race checker sees exactly which bytes two origins
/// share (two interleaved columns do not race; a struct overlapping a resized copy does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resized_and_struct_layouts_replay_and_race_by_their_bytes() {
    let fixture = Fixture::new(3).await;
    let (audit, w, id) = fixture.audited_window::<i64>(8).await;
    fence_all(&w, Assert::NOPRECEDE).await;
    // rank 2 holds a 4x2 matrix: rank 0 writes column 0 (resized), rank 1 column 1 (struct)
    let column = Layout::resized(Layout::contiguous(1), 0, 16, 4);
    let odd = Layout::Struct {
        blocks: (0..4)
            .map(|i| StructBlock {
                offset: 8 + 16 * i,
                dtype: Datatype::I64,
                len: 1,
            })
            .collect(),
    };
    w[0].put_layout(2, 0, column, &[10i64, 12, 14, 16]).unwrap();
    w[1].put_layout(2, 0, odd, &[11i64, 13, 15, 17]).unwrap();
    fence_all(&w, 0).await;
    // next epoch: rank 0 writes the first i32 of rows 1 and 2 (bytes 16..20, 32..36), rank 1
    // a struct of an i32 at byte 20 and two bytes at 32 (bytes 20..24, 32..34)
    let halves = Layout::resized(
        Layout::Struct {
            blocks: vec![StructBlock {
                offset: 0,
                dtype: Datatype::I32,
                len: 1,
            }],
        },
        -4,
        16,
        2,
    );
    w[0].put_layout(2, 2, halves, &[1u8, 0, 0, 0, 2, 0, 0, 0])
        .unwrap();
    let mixed = Layout::Struct {
        blocks: vec![
            StructBlock {
                offset: 20,
                dtype: Datatype::I32,
                len: 1,
            },
            StructBlock {
                offset: 32,
                dtype: Datatype::U8,
                len: 2,
            },
        ],
    };
    w[1].put_layout(2, 0, mixed, &[3u8, 0, 0, 0, 4, 0]).unwrap();
    fence_all(&w, Assert::NOSUCCEED).await;
    let live = rank_2_replays_as_it_is(&audit, id, &w[2]).await;
    assert_eq!(live[2], 1 | 3 << 32, "rank 0's i32, then rank 1's");
    let findings = audit.check(id).await.unwrap();
    // only the second epoch's overlap: bytes 32..34 of rank 2
    assert_eq!(
        races(&findings),
        vec![("put_put", 2, (32, 34))],
        "{findings:#?}"
    );
}

/// Rank 2's window of eight `i64`s after the layout tests' epochs, checked equal to its
/// replay: ranks 0 and 1 wrote the even and the odd elements first (10, 12, 14, 16 and 11,
/// 13, 15, 17), which elements 2 to 5 only may have lost since.
async fn rank_2_replays_as_it_is(audit: &Audit, id: u64, rank_2: &Window) -> Vec<i64> {
    let replayed = audit.replay(id, None).await.unwrap();
    let live = rank_2.load::<i64>(0, 8).unwrap();
    let replayed: Vec<i64> = replayed.ranks[2]
        .chunks(8)
        .map(|chunk| i64::from_le_bytes(chunk.try_into().unwrap()))
        .collect();
    assert_eq!(replayed, live, "replay rebuilds what the layouts wrote");
    assert_eq!(&live[..2], &[10, 11]);
    assert_eq!(&live[6..], &[16, 17]);
    live
}

/// The races of `findings`: (rule, target, bytes).
fn races(findings: &[Finding]) -> Vec<(&str, u64, (u64, u64))> {
    findings
        .iter()
        .map(|finding| {
            (
                finding.rule.name(),
                u64::from(finding.target),
                finding.bytes,
            )
        })
        .collect()
}

/// Every rank's fence at once (a fence is collective).
async fn fence_all(windows: &[Window], assert: u32) {
    let fences = windows.iter().map(|window| window.fence(assert));
    for outcome in futures::future::join_all(fences).await {
        outcome.unwrap();
    }
}
