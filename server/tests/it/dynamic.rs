//! Dynamic windows (`MPI_Win_create_dynamic`, `MPI_Win_attach`, `MPI_Win_detach`) through the
//! real server and client: regions at addresses the target hands out, operations by address
//! under lock and fence, `RMA_RANGE` outside the regions and after a detach, `RMA_ATTACH` on
//! overlap and bad detach, `RMA_FLAVOR` elsewhere; the log replays, verifies and checks as live.

use onesided_client::{
    Audit, ErrorClass, Flavor, LockType, MemoryModel, Op, Rule, Window, WindowSpec,
};

use crate::{unique, Fixture, ADMIN_TOKEN};

fn dynamic(name: &str, nranks: u32) -> WindowSpec {
    WindowSpec::bytes(name, nranks, 0, 1).flavor(Flavor::Dynamic)
}

/// `MPI_Barrier` of both ranks: what each did last reaches the log before it returns.
async fn barrier(fixture: &Fixture) {
    let (a, b) = tokio::join!(fixture.sessions[0].barrier(), fixture.sessions[1].barrier());
    a.unwrap();
    b.unwrap();
}

fn class<T: std::fmt::Debug>(result: onesided_client::Result<T>) -> Option<ErrorClass> {
    result.expect_err("the call must fail").class()
}

/// Both ranks attach 32 bytes; each learns the other's address (as a program would send it).
async fn attached(w: &[Window]) -> [u64; 2] {
    let a0 = w[0].attach(32).await.unwrap();
    let a1 = w[1].attach(32).await.unwrap();
    assert_ne!(a0, 0);
    assert_eq!(w[0].regions(), vec![(a0, 32)]);
    [a0, a1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regions_are_reached_by_address_under_lock_and_fence() {
    let fixture = Fixture::new(2).await;
    let name = unique("d");
    let w = fixture.window(dynamic(&name, 2)).await;
    assert_eq!(w[0].desc().flavor, Flavor::Dynamic);
    assert_eq!(w[0].desc().sizes, vec![0, 0]);
    let [a0, a1] = attached(&w).await;
    // a second region of rank 1 lies elsewhere
    let b1 = w[1].attach(16).await.unwrap();
    assert!(b1 >= a1 + 32, "{b1:#x} overlaps [{a1:#x}, +32)");
    // passive target: put, accumulate, get by address
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].put(1, a1, &[5i64]).unwrap();
    w[0].accumulate(1, a1 + 8, &[10i64], Op::Sum).unwrap();
    w[0].put(1, b1 + 8, &[9i64]).unwrap();
    w[0].unlock(1).await.unwrap();
    w[0].lock(LockType::Shared, 1, 0).await.unwrap();
    w[0].accumulate(1, a1 + 8, &[6i64], Op::Sum).unwrap();
    w[0].flush(1).await.unwrap();
    let got = w[0].get::<i64>(1, a1, 2).unwrap();
    w[0].unlock(1).await.unwrap();
    assert_eq!(got.value().await.unwrap(), vec![5, 16]);
    // active target: rank 1 puts into rank 0's region; rank 0 loads it by address
    let fences = w.iter().map(|w| w.fence(0));
    for result in futures::future::join_all(fences).await {
        result.unwrap();
    }
    w[1].put(0, a0 + 24, &[77i64]).unwrap();
    let fetched = w[1].fetch_and_op(0, a0, 3i64, Op::Sum).unwrap();
    let fences = w.iter().map(|w| w.fence(0));
    for result in futures::future::join_all(fences).await {
        result.unwrap();
    }
    assert_eq!(fetched.value().await.unwrap(), 0);
    assert_eq!(w[0].load_at::<i64>(a0, 4).unwrap(), vec![3, 0, 0, 77]);
    // rank 0's own stores by address reach its public copy at the next fence
    w[0].store_at(a0 + 8, &[4i64]).unwrap();
    assert_eq!(
        class(w[0].store_at(a0 + 32, &[1i64])),
        Some(ErrorClass::RmaRange),
        "past rank 0's region"
    );
    let fences = w.iter().map(|w| w.fence(0));
    for result in futures::future::join_all(fences).await {
        result.unwrap();
    }
    let back = w[1].get::<i64>(0, a0, 2).unwrap();
    let fences = w.iter().map(|w| w.fence(0));
    for result in futures::future::join_all(fences).await {
        result.unwrap();
    }
    assert_eq!(back.value().await.unwrap(), vec![3, 4]);
    // the log replays to the live public copies, verifies, and has no race
    let id = w[0].desc().id;
    barrier(&fixture).await;
    let audit = Audit::connect(&fixture.server.url, ADMIN_TOKEN)
        .await
        .unwrap();
    let replayed = audit.replay(id, None).await.unwrap();
    let mut rank0 = vec![0u8; 32];
    rank0[..8].copy_from_slice(&3i64.to_le_bytes());
    rank0[8..16].copy_from_slice(&4i64.to_le_bytes());
    rank0[24..].copy_from_slice(&77i64.to_le_bytes());
    assert_eq!(replayed.ranks[0], rank0);
    let rank1 = &replayed.ranks[1];
    assert_eq!(rank1.len(), 48, "two regions of rank 1");
    assert_eq!(rank1[..8], 5i64.to_le_bytes());
    assert_eq!(rank1[8..16], 16i64.to_le_bytes());
    let b = (b1 - a1) as usize;
    assert_eq!(rank1[b + 8..b + 16], 9i64.to_le_bytes());
    assert_eq!(audit.verify(id).await.unwrap().first_bad, None);
    let findings = audit.check(id).await.unwrap();
    assert!(findings.is_empty(), "{findings:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accesses_outside_the_regions_fail_with_rma_range_and_change_nothing() {
    let fixture = Fixture::new(2).await;
    let w = fixture.window(dynamic(&unique("d"), 2)).await;
    let [_, a1] = attached(&w).await;
    w[0].lock(LockType::Shared, 1, 0).await.unwrap();
    w[0].put(1, a1, &[1i64]).unwrap();
    // across the region's end, past it: refused by the target at completion
    for disp in [a1 + 28, a1 + 32, a1 + 4096] {
        let got = w[0].get::<i64>(1, disp, 1).unwrap();
        assert_eq!(
            class(got.value().await),
            Some(ErrorClass::RmaRange),
            "get at {disp:#x}"
        );
    }
    // below the first address any region can have (0 included): refused at the call
    for disp in [0, 8, a1 - 8] {
        assert_eq!(
            class(w[0].get::<i64>(1, disp, 1)),
            Some(ErrorClass::RmaRange),
            "get at {disp:#x}"
        );
    }
    // the failed operations are this epoch's: the flush that completes them says so
    assert_eq!(class(w[0].flush(1).await), Some(ErrorClass::RmaRange));
    // after the detach, the region is gone for everyone
    w[1].detach(a1).await.unwrap();
    assert!(w[1].regions().is_empty());
    let got = w[0].get::<i64>(1, a1, 1).unwrap();
    assert_eq!(class(got.value().await), Some(ErrorClass::RmaRange));
    w[0].put(1, a1, &[2i64]).unwrap();
    assert_eq!(class(w[0].unlock(1).await), Some(ErrorClass::RmaRange));
    let audit = Audit::connect(&fixture.server.url, ADMIN_TOKEN)
        .await
        .unwrap();
    barrier(&fixture).await;
    let replayed = audit.replay(w[0].desc().id, None).await.unwrap();
    let mut rank1 = vec![0u8; 32];
    rank1[..8].copy_from_slice(&1i64.to_le_bytes());
    assert_eq!(
        replayed.ranks[1], rank1,
        "only the first put changed rank 1"
    );
    assert_eq!(audit.verify(w[0].desc().id).await.unwrap().first_bad, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_and_detach_misuse_has_its_class_and_changes_nothing() {
    let fixture = Fixture::new(2).await;
    let w = fixture.window(dynamic(&unique("d"), 2)).await;
    let a = w[0].attach(64).await.unwrap();
    let before: Vec<i64> = (1..=8).collect();
    w[1].lock(LockType::Exclusive, 0, 0).await.unwrap();
    w[1].put(0, a, &before).unwrap();
    w[1].unlock(0).await.unwrap();
    // overlapping an attached region, at its start or inside it
    assert_eq!(
        class(w[0].attach_at(a, 8).await),
        Some(ErrorClass::RmaAttach)
    );
    assert_eq!(
        class(w[0].attach_at(a + 60, 8).await),
        Some(ErrorClass::RmaAttach)
    );
    // right after it is free
    let after = w[0].attach_at(a + 64, 8).await.unwrap();
    assert_eq!(after, a + 64);
    // detaching an address that starts no region, twice, or on another rank
    assert_eq!(class(w[0].detach(a + 8).await), Some(ErrorClass::RmaAttach));
    assert_eq!(class(w[1].detach(a).await), Some(ErrorClass::RmaAttach));
    w[0].detach(after).await.unwrap();
    assert_eq!(class(w[0].detach(after).await), Some(ErrorClass::RmaAttach));
    // more than a rank may expose
    assert_eq!(
        class(w[0].attach(1 << 40).await),
        Some(ErrorClass::RmaAttach)
    );
    assert_eq!(w[0].regions(), vec![(a, 64)]);
    // the region still works, and holds what it held: no refusal changed a byte of it
    w[1].lock(LockType::Shared, 0, 0).await.unwrap();
    w[1].put(0, a + 56, &[80i64]).unwrap();
    w[1].flush(0).await.unwrap();
    let read = w[1].get::<i64>(0, a, 8).unwrap();
    w[1].unlock(0).await.unwrap();
    assert_eq!(read.value().await.unwrap(), [1, 2, 3, 4, 5, 6, 7, 80]);
    // attach and detach on a window of another flavor
    let spec = WindowSpec::of::<i64>(&unique("s"), 2, 4);
    let statics = fixture.window(spec).await;
    assert_eq!(
        class(statics[0].attach(8).await),
        Some(ErrorClass::RmaFlavor)
    );
    assert_eq!(
        class(statics[0].detach(a).await),
        Some(ErrorClass::RmaFlavor)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_of_no_bytes_attaches_and_detaches_as_mpi_allows() {
    let fixture = Fixture::new(2).await;
    let w = fixture.window(dynamic(&unique("d"), 2)).await;
    // MPI_Win_attach(win, base, 0): legal; an address of its own, nothing to reach
    let empty = w[0].attach(0).await.unwrap();
    assert!(w[0].regions().is_empty());
    let full = w[0].attach(8).await.unwrap();
    assert_ne!(full, empty, "the next region has another address");
    assert_eq!(w[0].regions(), vec![(full, 8)]);
    // by address, inside a region with bytes: it overlaps nothing
    let inside = w[0].attach_at(full + 4, 0).await.unwrap();
    assert_eq!(inside, full + 4);
    w[1].lock(LockType::Shared, 0, 0).await.unwrap();
    w[1].put(0, full, &[5i64]).unwrap();
    w[1].unlock(0).await.unwrap();
    w[1].lock(LockType::Shared, 0, 0).await.unwrap();
    w[1].put(0, empty, &[1u8]).unwrap();
    assert_eq!(class(w[1].unlock(0).await), Some(ErrorClass::RmaRange));
    // each detaches once; the region with bytes is untouched
    for base in [inside, empty] {
        w[0].detach(base).await.unwrap();
        assert_eq!(class(w[0].detach(base).await), Some(ErrorClass::RmaAttach));
    }
    assert_eq!(w[0].regions(), vec![(full, 8)]);
    w[1].lock(LockType::Shared, 0, 0).await.unwrap();
    let got = w[1].get::<i64>(0, full, 1).unwrap();
    w[1].unlock(0).await.unwrap();
    assert_eq!(got.value().await.unwrap(), vec![5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranks_create_a_dynamic_window_together_and_a_racing_detach_is_found() {
    let fixture = Fixture::new(2).await;
    let name = unique("d");
    let created = fixture.sessions.iter().map(|session| {
        session.create_window(&name, 0, 1, Flavor::Dynamic, MemoryModel::Separate, &[])
    });
    let w: Vec<Window> = futures::future::join_all(created)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(w[1].desc().flavor, Flavor::Dynamic);
    let [_, a1] = attached(&w).await;
    // rank 0's put is applied, but rank 1 detaches its region before rank 0's unlock
    w[0].lock(LockType::Shared, 1, 0).await.unwrap();
    w[0].put(1, a1, &[1i64]).unwrap();
    w[0].flush(1).await.unwrap();
    w[1].detach(a1).await.unwrap();
    w[0].unlock(1).await.unwrap();
    barrier(&fixture).await;
    let audit = Audit::connect(&fixture.server.url, ADMIN_TOKEN)
        .await
        .unwrap();
    let findings = audit.check(w[0].desc().id).await.unwrap();
    let rules: Vec<Rule> = findings.iter().map(|finding| finding.rule).collect();
    assert_eq!(rules, vec![Rule::DetachRace], "{findings:#?}");
    assert_eq!(findings[0].second.call, "detach");
    assert_eq!(findings[0].target, 1);
    // the timeline shows the region's attach and detach on the owner's track
    let trace: serde_json::Value =
        serde_json::from_str(&audit.export_perfetto(w[0].desc().id).await.unwrap()).unwrap();
    let on_owner: Vec<&str> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["tid"] == 1)
        .filter_map(|event| event["name"].as_str())
        .filter(|name| name.starts_with("region_"))
        .collect();
    assert_eq!(
        on_owner,
        ["region_attached", "region_detached"],
        "{trace:#}"
    );
}

/// A rank's new session learns the regions an earlier session of it attached and did not
/// detach: `regions()` lists them, its private copy holds their public bytes (its own published
/// stores, another rank's put), and it stores into them, publishes and detaches them like
/// regions it attached itself; a detached region stays unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_of_the_rank_knows_the_regions_it_attached() {
    let mut fixture = Fixture::new(2).await;
    let name = unique("d");
    let w = fixture.window(dynamic(&name, 2)).await;
    let a = w[1].attach(16).await.unwrap();
    let gone = w[1].attach(8).await.unwrap();
    let b = w[1].attach(24).await.unwrap();
    w[1].detach(gone).await.unwrap();
    // rank 1 publishes its stores; rank 0 puts into the other region
    w[1].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[1].store_at(a, &[11i64, 12]).unwrap();
    w[1].unlock(1).await.unwrap();
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].put(1, b + 8, &[42i64]).unwrap();
    w[0].unlock(1).await.unwrap();
    // rank 1's session ends
    let mut w = w.into_iter();
    let (w0, w1) = (w.next().unwrap(), w.next().unwrap());
    drop(w1);
    fixture.sessions.remove(1).close().await.unwrap();

    let session = onesided_client::Session::builder(&fixture.server.url, &fixture.tokens[1])
        .ship_audit_events()
        .attach()
        .await
        .unwrap();
    let w1 = session.window(&name).await.unwrap();
    assert_eq!(w1.regions(), vec![(a, 16), (b, 24)]);
    assert_eq!(w1.load_at::<i64>(a, 2).unwrap(), vec![11, 12]);
    assert_eq!(w1.load_at::<i64>(b, 3).unwrap(), vec![0, 42, 0]);
    assert_eq!(
        class(w1.load_at::<i64>(gone, 1)),
        Some(ErrorClass::RmaRange),
        "the detached region"
    );
    assert_eq!(
        class(w1.store_at(b + 16, &[1i64, 2])),
        Some(ErrorClass::RmaRange),
        "past the region's end"
    );
    // the new session stores into a region and publishes; rank 0 reads it
    w1.lock(LockType::Exclusive, 1, 0).await.unwrap();
    w1.store_at(b, &[7i64]).unwrap();
    w1.unlock(1).await.unwrap();
    w0.lock(LockType::Shared, 1, 0).await.unwrap();
    let got = w0.get::<i64>(1, b, 2).unwrap();
    w0.unlock(1).await.unwrap();
    assert_eq!(got.value().await.unwrap(), vec![7, 42]);
    // and detaches one: gone for rank 0 and for itself
    w1.detach(a).await.unwrap();
    assert_eq!(w1.regions(), vec![(b, 24)]);
    assert_eq!(class(w1.load_at::<i64>(a, 1)), Some(ErrorClass::RmaRange));
    assert_eq!(class(w1.detach(a).await), Some(ErrorClass::RmaAttach));
    w0.lock(LockType::Shared, 1, 0).await.unwrap();
    let detached = w0.get::<i64>(1, a, 1).unwrap();
    assert_eq!(class(detached.value().await), Some(ErrorClass::RmaRange));
    assert_eq!(class(w0.unlock(1).await), Some(ErrorClass::RmaRange));
    // a new region comes after everything attached before
    assert_eq!(w1.attach(8).await.unwrap(), b + 24);
    // rank 0's own handle knows only its own regions (none)
    assert!(w0.regions().is_empty());
    drop(w1);
    session.close().await.unwrap();
}

/// After a restart the regions are where they were: their bytes are reachable by the same
/// addresses, nothing else is, the new session of their rank knows them (their bytes in its
/// private copy) and a region can still be detached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regions_survive_a_restart() {
    use crate::{start_fresh, world_with};

    let (_data, server) = start_fresh("onesided-dynamic", |_| {}).await;
    let admin = &server.admin;
    let world = world_with(admin, &unique("dyn"), 2, &[dynamic("d", 2)]).await;
    let (owner, o) = server.attached_window(&world.tokens[1], "d").await;
    let (origin, w) = server.attached_window(&world.tokens[0], "d").await;
    let a = o.attach(16).await.unwrap();
    let b = o.attach(16).await.unwrap();
    o.detach(a).await.unwrap();
    w.lock(LockType::Exclusive, 1, 0).await.unwrap();
    w.put(1, b + 8, &[42i64]).unwrap();
    w.unlock(1).await.unwrap();
    drop((o, w));
    owner.close().await.unwrap();
    origin.close().await.unwrap();

    let server = server.restart(|_| {}).await;
    let (owner, o) = server.attached_window(&world.tokens[1], "d").await;
    let (origin, w) = server.attached_window(&world.tokens[0], "d").await;
    assert_eq!(o.regions(), vec![(b, 16)]);
    assert_eq!(o.load_at::<i64>(b, 2).unwrap(), vec![0, 42]);
    assert_eq!(class(o.load_at::<i64>(a, 1)), Some(ErrorClass::RmaRange));
    assert!(w.regions().is_empty(), "rank 0 attached nothing");
    w.lock(LockType::Shared, 1, 0).await.unwrap();
    let kept = w.get::<i64>(1, b + 8, 1).unwrap();
    let detached = w.get::<i64>(1, a, 1).unwrap();
    assert_eq!(kept.value().await.unwrap(), vec![42]);
    assert_eq!(class(detached.value().await), Some(ErrorClass::RmaRange));
    assert_eq!(class(w.unlock(1).await), Some(ErrorClass::RmaRange));
    assert_eq!(class(o.detach(a).await), Some(ErrorClass::RmaAttach));
    o.detach(b).await.unwrap();
    // a new region comes after everything attached before, detached bytes included
    assert_eq!(o.attach(8).await.unwrap(), b + 16);
    drop((o, w));
    owner.close().await.unwrap();
    origin.close().await.unwrap();
    server.stop().await;
}

/// The bytes a dynamic window's regions span count toward the server's window bytes, as a
/// static window's do: an attach past them is `RMA_ATTACH` and changes nothing, they stay
/// taken across a restart, and freeing the window gives them back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regions_count_toward_the_servers_window_bytes() {
    use crate::{start_fresh, start_on, world_with};
    use onesided_client::Session;
    let limited = |config: &mut onesided_server::ServerConfig| {
        config.limits.max_window_bytes = 1000;
        config.limits.max_window_bytes_per_rank = 800;
    };
    let exhausted = |result: onesided_client::Result<onesided_client::WindowDesc>| {
        let error = result.expect_err("the window must not fit");
        assert_eq!(error.class(), Some(ErrorClass::NoMem), "{error}");
    };
    let (data, server) = start_fresh("onesided-dynamic", limited).await;
    let admin = &server.admin;
    let world = world_with(
        admin,
        &unique("dyn"),
        2,
        &[WindowSpec::bytes("s", 2, 200, 1)],
    )
    .await;
    admin
        .create_window(&world.name, &dynamic("d", 2))
        .await
        .unwrap();
    let sessions = [
        Session::attach(&server.url, &world.tokens[0])
            .await
            .unwrap(),
        Session::attach(&server.url, &world.tokens[1])
            .await
            .unwrap(),
    ];
    let w = [
        sessions[0].window("d").await.unwrap(),
        sessions[1].window("d").await.unwrap(),
    ];
    // 400 static + 300 + 300 fit; one byte more does not, whichever rank asks
    let a = w[0].attach(300).await.unwrap();
    w[1].attach(250).await.unwrap();
    let refused = w[1].attach(51).await.unwrap_err();
    assert_eq!(refused.class(), Some(ErrorClass::RmaAttach), "{refused}");
    assert_eq!(
        w[1].regions().len(),
        1,
        "the refused region was not attached"
    );
    w[1].attach(50).await.unwrap();
    exhausted(
        admin
            .create_window(&world.name, &WindowSpec::bytes("t", 2, 1, 1))
            .await,
    );
    // a detached region's bytes stay spanned (addresses are not handed out again)
    w[0].detach(a).await.unwrap();
    exhausted(
        admin
            .create_window(&world.name, &WindowSpec::bytes("t", 2, 1, 1))
            .await,
    );
    drop(w);
    for session in sessions {
        session.close().await.unwrap();
    }
    server.stop().await;

    // after a restart the regions still take their bytes; freeing the window gives them back
    let server = start_on(&data.0, limited).await;
    let admin = &server.admin;
    exhausted(
        admin
            .create_window(&world.name, &WindowSpec::bytes("t", 2, 1, 1))
            .await,
    );
    admin.free_window(&world.name, "d").await.unwrap();
    admin
        .create_window(&world.name, &WindowSpec::bytes("t", 2, 300, 1))
        .await
        .unwrap();
    server.stop().await;
}
