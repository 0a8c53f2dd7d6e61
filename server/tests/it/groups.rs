//! Windows over part of a world: ranks numbered in the window's group, as MPI numbers them;
//! its collectives (fence, free, set_info) are its members' alone; the log numbers ranks as
//! the window does.

use onesided_client::{Audit, ErrorClass, LockType, NewWindow, Session, WindowSpec, WorldTokens};

use crate::{spawn_server, unique, TestServer, ADMIN_TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_over_part_of_the_world_numbers_its_ranks_in_its_group() {
    let server = spawn_server().await;
    let world = server
        .admin
        .create_world(&unique("groups"), 4)
        .await
        .unwrap();
    // window rank 0 is world rank 3, window rank 1 is world rank 1
    let spec = WindowSpec::of::<i64>("g", 2, 2).group(&[3, 1]);
    let desc = server
        .admin
        .create_window(&world.name, &spec)
        .await
        .unwrap();
    assert_eq!(desc.group, vec![3, 1]);
    let mut sessions = Vec::new();
    for token in &world.tokens {
        sessions.push(Session::attach(&server.url, token).await.unwrap());
    }
    // a rank outside the group cannot open it
    let outside = sessions[0].window("g").await.unwrap_err();
    assert_eq!(outside.class(), Some(ErrorClass::Group), "{outside}");
    let first = sessions[3].window("g").await.unwrap();
    let second = sessions[1].window("g").await.unwrap();
    assert_eq!((first.rank(), second.rank()), (0, 1));
    assert_eq!(first.get_group(), vec![3, 1]);
    // a fence of the two members completes: ranks 0 and 2 of the world never call it
    let (a, b) = tokio::join!(first.fence(0), second.fence(0));
    a.unwrap();
    b.unwrap();
    first.put(1, 1, &[5i64]).unwrap();
    second.put(0, 0, &[7i64]).unwrap();
    let (a, b) = tokio::join!(first.fence(0), second.fence(0));
    a.unwrap();
    b.unwrap();
    assert_eq!(second.load::<i64>(1, 1).unwrap(), vec![5]);
    assert_eq!(first.load::<i64>(0, 1).unwrap(), vec![7]);
    // a target outside the window's group is MPI_ERR_RANK
    first.lock(LockType::Shared, 1, 0).await.unwrap();
    let past = first.put(2, 0, &[1i64]).unwrap_err();
    assert_eq!(past.class(), Some(ErrorClass::Rank), "{past}");
    first.unlock(1).await.unwrap();
    // set_info is the members' collective
    let (a, b) = tokio::join!(
        first.set_info(&[("accumulate_ops", "same_op")]),
        second.set_info(&[("accumulate_ops", "same_op")])
    );
    a.unwrap();
    b.unwrap();
    // the log numbers ranks as the window does: two ranks, rank 1 holds 5 in its second
    // element, rank 0 holds 7 in its first
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let replayed = audit.replay(desc.id, None).await.unwrap();
    assert_eq!(replayed.ranks.len(), 2);
    assert_eq!(replayed.ranks[0][..8], 7i64.to_le_bytes());
    assert_eq!(replayed.ranks[1][8..], 5i64.to_le_bytes());
    assert!(audit.check(desc.id).await.unwrap().is_empty());
    assert_eq!(audit.verify(desc.id).await.unwrap().first_bad, None);
    // free is the members' collective too: it completes without ranks 0 and 2
    let (a, b) = tokio::join!(first.free(), second.free());
    a.unwrap();
    b.unwrap();
    let listed = server.admin.list_windows(&world.name).await.unwrap();
    assert!(listed.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_group_is_refused_and_creates_nothing() {
    let server = spawn_server().await;
    let world = server.admin.create_world(&unique("bad"), 3).await.unwrap();
    for (group, sizes) in [(vec![0, 0], 2), (vec![0, 3], 2), (vec![0, 1], 3)] {
        let mut spec = WindowSpec::of::<i64>("g", sizes, 1).group(&group);
        spec.name = unique("g");
        let error = server
            .admin
            .create_window(&world.name, &spec)
            .await
            .unwrap_err();
        let expected = if group.len() == sizes as usize {
            ErrorClass::Group
        } else {
            ErrorClass::Size
        };
        assert_eq!(error.class(), Some(expected), "{group:?}: {error}");
    }
    let listed = server.admin.list_windows(&world.name).await.unwrap();
    assert!(listed.is_empty());
}

/// A new world of `nranks` ranks on `server`, and a session of each.
async fn world_of(server: &TestServer, nranks: u32) -> (WorldTokens, Vec<Session>) {
    let world = server
        .admin
        .create_world(&unique("groups"), nranks)
        .await
        .unwrap();
    let mut sessions = Vec::new();
    for token in &world.tokens {
        sessions.push(Session::attach(&server.url, token).await.unwrap());
    }
    (world, sessions)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_create_a_window_over_their_group_without_the_other_ranks() {
    let server = spawn_server().await;
    let (world, sessions) = world_of(&server, 4).await;
    // world ranks 3 and 1 create g, window ranks 0 and 1, each with its own size; ranks 0
    // and 2 never call
    let call = |size| NewWindow::new("g", size, 8).group(&[3, 1]);
    // a rank outside the group, and a bad group, are refused at once and join nothing
    let outside = sessions[0].create(&call(8)).await.unwrap_err();
    assert_eq!(outside.class(), Some(ErrorClass::Group), "{outside}");
    let twice = sessions[1]
        .create(&NewWindow::new("g", 8, 8).group(&[1, 1]))
        .await
        .unwrap_err();
    assert_eq!(twice.class(), Some(ErrorClass::Group), "{twice}");
    let (zeroth, oneth) = (call(16), call(8));
    let (first, second) = tokio::join!(sessions[3].create(&zeroth), sessions[1].create(&oneth));
    let (first, second) = (first.unwrap(), second.unwrap());
    assert_eq!((first.rank(), second.rank()), (0, 1));
    assert_eq!(first.get_group(), vec![3, 1]);
    assert_eq!(
        second.desc().sizes,
        vec![16, 8],
        "sizes in window-rank order"
    );
    let listed = server.admin.list_windows(&world.name).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].group, vec![3, 1]);
    // outside ranks cannot open it; the members use it as any window
    let opened = sessions[2].window("g").await.unwrap_err();
    assert_eq!(opened.class(), Some(ErrorClass::Group), "{opened}");
    second.lock(LockType::Exclusive, 0, 0).await.unwrap();
    second.put(0, 1, &[9i64]).unwrap();
    second.unlock(0).await.unwrap();
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let replayed = audit.replay(first.desc().id, None).await.unwrap();
    assert_eq!(replayed.ranks.len(), 2);
    assert_eq!(replayed.ranks[0][8..], 9i64.to_le_bytes());
    assert_eq!(audit.verify(first.desc().id).await.unwrap().first_bad, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_members_departure_fails_its_groups_creation() {
    let server = spawn_server().await;
    let (world, mut sessions) = world_of(&server, 3).await;
    // rank 0 calls the creation over {0, 1}, then the world barrier: the server holds its
    // call when the barrier completes. Rank 2, not in the group, then leaves; rank 1's call
    // completes the creation all the same
    let call = NewWindow::new("g", 8, 1).group(&[0, 1]);
    let leaving = sessions.pop().unwrap();
    let ((first, barrier), second) = tokio::join!(
        futures::future::join(sessions[0].create(&call), sessions[0].barrier()),
        async {
            let (a, b) = tokio::join!(sessions[1].barrier(), leaving.barrier());
            a.unwrap();
            b.unwrap();
            leaving.close().await.unwrap();
            sessions[1].create(&call).await
        }
    );
    barrier.unwrap();
    let (first, second) = (first.unwrap(), second.unwrap());
    assert_eq!((first.rank(), second.rank()), (0, 1));
    // rank 1 calls a creation over {1, 0}, then fences g; rank 0 fences g and leaves: the
    // creation rank 1 waits in fails with PROC_FAILED, and nothing is created
    let other = NewWindow::new("h", 8, 1).group(&[1, 0]);
    let leaving = sessions.remove(0);
    let ((failed, fenced), ()) = tokio::join!(
        futures::future::join(sessions[0].create(&other), second.fence(0)),
        async {
            first.fence(0).await.unwrap();
            drop(first);
            leaving.close().await.unwrap();
        }
    );
    fenced.unwrap();
    let failed = failed.unwrap_err();
    assert_eq!(failed.class(), Some(ErrorClass::ProcFailed), "{failed}");
    let names: Vec<String> = server
        .admin
        .list_windows(&world.name)
        .await
        .unwrap()
        .into_iter()
        .map(|window| window.name)
        .collect();
    assert_eq!(names, ["g"]);
}
