//! The service around the windows: admin calls, authentication, health and reflection.

use onesided_client::{Admin, Claim, ErrorClass, Session, WindowSpec};
use prost::Message;
use tonic::Code;

use crate::{spawn_server, unique, Fixture, TestServer, ADMIN_TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worlds_and_windows_are_created_listed_described_and_freed() {
    let server = spawn_server().await;
    let world = unique("world");
    let created = server.admin.create_world(&world, 3).await.unwrap();
    assert_eq!(created.tokens.len(), 3);
    let again = server.admin.create_world(&world, 3).await.unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists);
    let spec = WindowSpec::of::<i32>("counters", 3, 4)
        .info("no_locks", "true")
        .info("accumulate_ordering", "none")
        .info("unknown_hint", "ignored");
    let desc = server.admin.create_window(&world, &spec).await.unwrap();
    assert_eq!(desc.sizes, vec![16, 16, 16]);
    assert_eq!(desc.disp_units, vec![4, 4, 4]);
    assert!(desc.info.no_locks);
    assert!(!desc.info.accumulate_ordering.any());
    let listed = server.admin.list_windows(&world).await.unwrap();
    assert_eq!(listed, vec![desc.clone()]);
    assert_eq!(
        server
            .admin
            .describe_window(&world, "counters")
            .await
            .unwrap(),
        desc
    );
    let worlds = server.admin.list_worlds().await.unwrap();
    assert!(worlds
        .iter()
        .any(|w| w.name == world && w.ranks == 3 && w.windows == 1));
    server.admin.free_window(&world, "counters").await.unwrap();
    assert_eq!(
        refused_description(&server, &world, "counters").await,
        Some(ErrorClass::Win)
    );
    server.admin.delete_world(&world).await.unwrap();
    let gone = server.admin.delete_world(&world).await.unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
}

/// `MPI_Win_get_info` on every rank reports every hint in use with its value — the ones
/// given, the defaults, MPI-4's `mpi_accumulate_granularity` — and the keys this
/// implementation does not use, as given; `MPI_Win_get_group` the window's ranks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rank_gets_the_info_in_use_and_the_keys_kept_as_given() {
    let server = spawn_server().await;
    let world = unique("world");
    let tokens = server.admin.create_world(&world, 2).await.unwrap().tokens;
    let spec = WindowSpec::of::<i64>("w", 2, 4)
        .info("accumulate_ops", "same_op")
        .info("mpi_accumulate_granularity", "64")
        .info("my_hint", "kept as given")
        .info("alloc_shared_noncontig", "true");
    server.admin.create_window(&world, &spec).await.unwrap();
    for token in &tokens {
        let session = Session::attach(&server.url, token).await.unwrap();
        let w = session.window("w").await.unwrap();
        let info: std::collections::BTreeMap<String, String> = w.get_info().into_iter().collect();
        for (key, value) in [
            ("accumulate_ops", "same_op"),
            ("mpi_accumulate_granularity", "64"),
            ("my_hint", "kept as given"),
            ("alloc_shared_noncontig", "true"),
            ("no_locks", "false"),
            ("accumulate_ordering", "rar,raw,war,waw"),
            ("same_size", "false"),
            ("same_disp_unit", "false"),
            ("onesided_element_type", "i64"),
        ] {
            assert_eq!(info.get(key).map(String::as_str), Some(value), "{info:?}");
        }
        assert_eq!(info.len(), 9, "{info:?}");
        assert_eq!(w.get_group(), vec![0, 1]);
        drop(w);
        session.close().await.unwrap();
    }
}

/// `MPI_Win_allocate` by the ranks themselves: collective, each rank with its own size and
/// disp_unit, the window then open on every rank and known to the admin; the same name again,
/// or info that differs on one rank, fails on every rank and creates nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranks_create_a_window_together_each_with_its_own_size() {
    use onesided_client::{Flavor, LockType, MemoryModel};
    let server = spawn_server().await;
    let world = unique("world");
    let tokens = server.admin.create_world(&world, 3).await.unwrap().tokens;
    let mut sessions = Vec::new();
    for token in &tokens {
        sessions.push(Session::attach(&server.url, token).await.unwrap());
    }
    let create = |name: &'static str, infos: [&'static [(&'static str, &'static str)]; 3]| {
        let parts = [(16u64, 8u32), (8, 4), (0, 1)];
        futures::future::join_all(sessions.iter().zip(parts).zip(infos).map(
            move |((session, (size, unit)), info)| {
                session.create_window(
                    name,
                    size,
                    unit,
                    Flavor::Allocate,
                    MemoryModel::Separate,
                    info,
                )
            },
        ))
    };
    let hint: &[(&str, &str)] = &[("hint", "x")];
    let windows: Vec<_> = create("mine", [hint, hint, hint])
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for w in &windows {
        assert_eq!(w.desc().sizes, vec![16, 8, 0]);
        assert_eq!(w.desc().disp_units, vec![8, 4, 1]);
        assert!(w
            .get_info()
            .contains(&("hint".to_string(), "x".to_string())));
    }
    // it is a window like any other: rank 1 puts into rank 0's second unit of 8 bytes
    windows[1].lock(LockType::Exclusive, 0, 0).await.unwrap();
    windows[1].put::<i64>(0, 1, &[42]).unwrap();
    windows[1].unlock(0).await.unwrap();
    windows[0].lock(LockType::Shared, 0, 0).await.unwrap();
    let got = windows[0].get::<i64>(0, 0, 2).unwrap();
    windows[0].unlock(0).await.unwrap();
    assert_eq!(got.value().await.unwrap(), vec![0, 42]);
    let described = server.admin.describe_window(&world, "mine").await.unwrap();
    assert_eq!(described.sizes, vec![16, 8, 0]);
    // the same name again: every rank fails, nothing changes
    for again in create("mine", [hint, hint, hint]).await {
        assert_eq!(again.unwrap_err().class(), Some(ErrorClass::Arg));
    }
    // info that differs on one rank: every rank fails with MPI_ERR_INFO, nothing is created
    for refused in create("other", [hint, hint, &[]]).await {
        assert_eq!(refused.unwrap_err().class(), Some(ErrorClass::Info));
    }
    assert_eq!(
        refused_description(&server, &world, "other").await,
        Some(ErrorClass::Win)
    );
    assert_eq!(server.admin.list_windows(&world).await.unwrap().len(), 1);
}

/// `MPI_Win_set_info` is collective: it returns once every rank called it, and then every
/// rank, a session that opens the window later, the admin and the log see the new info. Ranks
/// that ask for different info all fail with `MPI_ERR_INFO` and nothing changes; a bad value
/// fails at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_info_is_collective_and_every_rank_must_ask_for_the_same() {
    let server = spawn_server().await;
    let world = unique("world");
    let tokens = server.admin.create_world(&world, 2).await.unwrap().tokens;
    let spec = WindowSpec::of::<i64>("w", 2, 1).info("my_hint", "v1");
    let id = server.admin.create_window(&world, &spec).await.unwrap().id;
    let mut windows = Vec::new();
    for token in &tokens {
        let session = Session::attach(&server.url, token).await.unwrap();
        windows.push(session.window("w").await.unwrap());
    }
    let info = |w: &onesided_client::Window| -> std::collections::BTreeMap<String, String> {
        w.get_info().into_iter().collect()
    };
    // different info on the two ranks: both fail, nothing changes
    let (zero, one) = tokio::join!(
        windows[0].set_info(&[("accumulate_ops", "same_op")]),
        windows[1].set_info(&[("accumulate_ops", "same_op_no_op")]),
    );
    for refused in [zero.unwrap_err(), one.unwrap_err()] {
        assert_eq!(refused.class(), Some(ErrorClass::Info), "{refused}");
        assert!(refused.to_string().contains("accumulate_ops"), "{refused}");
    }
    let described = server.admin.describe_window(&world, "w").await.unwrap();
    assert_eq!(
        described.info.accumulate_ops,
        onesided_core::window::AccumulateOps::SameOpNoOp
    );
    // a bad value fails at once, and the rank may call again
    let bad = windows[0]
        .set_info(&[("accumulate_ordering", "sideways")])
        .await
        .unwrap_err();
    assert_eq!(bad.class(), Some(ErrorClass::Info));
    // the same info on both: it is the window's
    let asked = [
        ("accumulate_ops", "same_op"),
        ("my_hint", "v2"),
        ("another", "new"),
        ("no_locks", "true"),
    ];
    let (zero, one) = tokio::join!(windows[0].set_info(&asked), windows[1].set_info(&asked));
    zero.unwrap();
    one.unwrap();
    for w in &windows {
        let now = info(w);
        assert_eq!(now["accumulate_ops"], "same_op");
        assert_eq!(now["my_hint"], "v2");
        assert_eq!(now["another"], "new");
        // a creation hint is ignored, as MPI allows
        assert_eq!(now["no_locks"], "false");
    }
    let described = server.admin.describe_window(&world, "w").await.unwrap();
    assert_eq!(
        described.info.accumulate_ops,
        onesided_core::window::AccumulateOps::SameOp
    );
    assert_eq!(described.info.kept["my_hint"], "v2");
    // a session that opens the window afterwards gets the new info
    let later = Session::attach(&server.url, &tokens[0]).await.unwrap();
    let reopened = later.window("w").await.unwrap();
    assert_eq!(info(&reopened)["accumulate_ops"], "same_op");
    // the log has it, once per rank
    let audit = onesided_client::Audit::connect(&server.url, ADMIN_TOKEN)
        .await
        .unwrap();
    let set: Vec<_> = audit
        .events(id, 1)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|entry| match entry.event {
            Some(onesided_core::audit::Event::InfoSet { info }) => Some((entry.rank, info)),
            _ => None,
        })
        .collect();
    assert_eq!(set.len(), 2, "{set:?}");
    assert!(set
        .iter()
        .all(|(_, info)| info.get("accumulate_ops").map(String::as_str) == Some("same_op")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_window_requests_are_refused_with_their_class() {
    let server = spawn_server().await;
    let world = unique("world");
    server.admin.create_world(&world, 2).await.unwrap();
    let cases = [
        (WindowSpec::bytes("w", 3, 8, 1), ErrorClass::Size),
        (WindowSpec::bytes("w", 2, 8, 0), ErrorClass::Disp),
        (WindowSpec::bytes("w", 2, 1 << 40, 1), ErrorClass::Size),
        (
            WindowSpec::bytes("w", 2, 8, 1).info("no_locks", "maybe"),
            ErrorClass::Info,
        ),
        (
            WindowSpec::bytes("w", 2, 8, 1).info("accumulate_ops", "any"),
            ErrorClass::Info,
        ),
        (WindowSpec::bytes("bad name", 2, 8, 1), ErrorClass::Arg),
        (
            WindowSpec::bytes("w", 2, 8, 1).info("mpi_accumulate_granularity", "-8"),
            ErrorClass::Info,
        ),
        // MPI_MAX_INFO_KEY and MPI_MAX_INFO_VAL bound even the keys kept as given
        (
            WindowSpec::bytes("w", 2, 8, 1).info(&"k".repeat(256), "v"),
            ErrorClass::Info,
        ),
        (
            WindowSpec::bytes("w", 2, 8, 1).info("my_hint", &"v".repeat(1024)),
            ErrorClass::Info,
        ),
        // promises the shape breaks (MPI makes them erroneous)
        (
            WindowSpec {
                sizes: vec![8, 16],
                ..WindowSpec::bytes("w", 2, 8, 1).info("same_size", "true")
            },
            ErrorClass::Info,
        ),
        (
            WindowSpec {
                disp_units: vec![1, 8],
                ..WindowSpec::bytes("w", 2, 8, 1).info("same_disp_unit", "true")
            },
            ErrorClass::Info,
        ),
    ];
    for (spec, class) in cases {
        let error = server.admin.create_window(&world, &spec).await.unwrap_err();
        assert_eq!(error.class(), Some(class), "{spec:?}: {error}");
    }
    assert!(server.admin.list_windows(&world).await.unwrap().is_empty());
    // kept promises go through
    let kept = WindowSpec {
        sizes: vec![8, 8],
        disp_units: vec![1, 8],
        ..WindowSpec::bytes("w", 2, 8, 1).info("same_size", "true")
    };
    server.admin.create_window(&world, &kept).await.unwrap();
    let zero = server
        .admin
        .create_world(&unique("world"), 0)
        .await
        .unwrap_err();
    assert_eq!(zero.class(), Some(ErrorClass::Arg));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_checked_before_anything_else() {
    let server = spawn_server().await;
    let wrong = Admin::connect(&server.url, "not-the-token").await.unwrap();
    let error = wrong.list_worlds().await.unwrap_err();
    assert_eq!(error.code(), Code::Unauthenticated);
    let error = Session::attach(&server.url, "no-such-rank")
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unauthenticated);
    // a rank token is a valid identity, but not the admin's; the admin token is not a rank's
    let fixture = Fixture::new(1).await;
    let rank_as_admin = Admin::connect(&fixture.server.url, &fixture.tokens[0])
        .await
        .unwrap();
    assert_eq!(
        rank_as_admin.list_worlds().await.unwrap_err().code(),
        Code::PermissionDenied
    );
    let admin_as_rank = Session::attach(&fixture.server.url, ADMIN_TOKEN)
        .await
        .unwrap_err();
    assert_eq!(admin_as_rank.code(), Code::PermissionDenied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_acts_only_as_its_own_rank() {
    let fixture = Fixture::new(3).await;
    for (rank, session) in fixture.sessions.iter().enumerate() {
        assert_eq!(session.rank(), rank as u32);
        assert_eq!(session.nranks(), 3);
        assert_eq!(session.world(), fixture.world);
    }
    // a window of another world is not visible
    let other = unique("world");
    fixture.server.admin.create_world(&other, 3).await.unwrap();
    fixture
        .server
        .admin
        .create_window(&other, &WindowSpec::bytes("elsewhere", 3, 8, 1))
        .await
        .unwrap();
    let error = fixture.sessions[0].window("elsewhere").await.unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::Win));
    // a session that says whom it means to act as is refused a token of anyone else
    let url = &fixture.server.url;
    let claim = |world: &str, rank: Option<u32>| Claim {
        world: Some(world.to_string()),
        rank,
    };
    let right = Session::attach_as(url, &fixture.tokens[1], &claim(&fixture.world, Some(1)))
        .await
        .unwrap();
    assert_eq!((right.world(), right.rank()), (fixture.world.as_str(), 1));
    let wrong_rank = Session::attach_as(url, &fixture.tokens[1], &claim(&fixture.world, Some(0)))
        .await
        .unwrap_err();
    assert_eq!(wrong_rank.code(), Code::PermissionDenied, "{wrong_rank}");
    let wrong_world = Session::attach_as(url, &fixture.tokens[1], &claim(&other, None))
        .await
        .unwrap_err();
    assert_eq!(wrong_world.code(), Code::PermissionDenied, "{wrong_world}");
}

/// The class of the refusal to describe the window `name` of `world`, which is not there.
async fn refused_description(server: &TestServer, world: &str, name: &str) -> Option<ErrorClass> {
    let refusal = server.admin.describe_window(world, name).await.unwrap_err();
    refusal.class()
}

/// A channel to the server at `url`.
async fn channel_to(url: &str) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(url.to_string())
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// What health says of `service` (its `ServingStatus` as a number).
async fn serving_status(
    health: &mut tonic_health::pb::health_client::HealthClient<tonic::transport::Channel>,
    service: &str,
) -> i32 {
    let request = tonic_health::pb::HealthCheckRequest {
        service: service.to_string(),
    };
    health.check(request).await.unwrap().into_inner().status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_reflection_are_served() {
    use tonic_health::pb::health_client::HealthClient;
    let server = spawn_server().await;
    let channel = channel_to(&server.url).await;
    let mut health = HealthClient::new(channel.clone());
    for service in [
        "",
        "onesided.v1.Admin",
        "onesided.v1.Audit",
        "onesided.v1.Rma",
    ] {
        let status = serving_status(&mut health, service).await;
        assert_eq!(status, 1, "{service} is SERVING");
    }
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let list_services = tokio_stream::iter([request]);
    let responses = reflection.server_reflection_info(list_services).await;
    let response = responses.unwrap().into_inner().message().await;
    let response = response.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("no service list");
    };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"onesided.v1.Rma".to_string()), "{names:?}");
    assert!(
        names.contains(&"onesided.v1.Admin".to_string()),
        "{names:?}"
    );
}

/// Python's grpcio-reflection, and other tools that speak only the older reflection protocol,
/// list the services and read their descriptors through v1alpha.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_v1alpha_lists_and_describes_the_services() {
    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1alpha::ServerReflectionRequest;
    let server = spawn_server().await;
    let channel = channel_to(&server.url).await;
    let mut reflection = ServerReflectionClient::new(channel);
    let request = |message| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(message),
    };
    let mut responses = reflection
        .server_reflection_info(tokio_stream::iter([
            request(MessageRequest::ListServices(String::new())),
            request(MessageRequest::FileContainingSymbol(
                "onesided.v1.Audit".to_string(),
            )),
        ]))
        .await
        .unwrap()
        .into_inner();
    let listed = responses.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = listed.message_response else {
        panic!("no service list: {listed:?}");
    };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    for service in [
        "onesided.v1.Admin",
        "onesided.v1.Audit",
        "onesided.v1.Rma",
        "grpc.health.v1.Health",
    ] {
        assert!(names.iter().any(|name| name == service), "{names:?}");
    }
    let described = responses.message().await.unwrap().unwrap();
    let Some(MessageResponse::FileDescriptorResponse(files)) = described.message_response else {
        panic!("no descriptor: {described:?}");
    };
    let file = prost_types::FileDescriptorProto::decode(files.file_descriptor_proto[0].as_slice())
        .unwrap();
    assert_eq!(file.package(), "onesided.v1");
    assert!(file.service.iter().any(|service| service.name() == "Audit"));
    assert!(file.enum_type.iter().any(|e| e.name() == "Datatype"));
}

/// Without an audit log, health says the Audit service is not serving (its calls would all be
/// FAILED_PRECONDITION); the others serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_says_audit_is_not_serving_without_an_audit_log() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let server = crate::spawn_server_with(|config| {
        config.durability = onesided_server::audit::Durability::Off;
    })
    .await;
    let channel = channel_to(&server.url).await;
    let mut health = HealthClient::new(channel);
    let mut status_of = async |service: &str| {
        ServingStatus::try_from(serving_status(&mut health, service).await).unwrap()
    };
    assert_eq!(
        status_of("onesided.v1.Audit").await,
        ServingStatus::NotServing
    );
    assert_eq!(status_of("onesided.v1.Admin").await, ServingStatus::Serving);
}

/// What a client generated from the .proto alone reads of a refusal: the class's gRPC code,
/// and `google.rpc.Status` details (with that same code) holding an `ErrorInfo` whose reason is
/// the MPI class and whose domain is `onesided` — from each place the server builds a status:
/// the admin service (with a code of its own for a taken name), the audit service, and the
/// interceptor in front of a session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_carry_error_info_with_the_mpi_class() {
    use onesided_proto::v1::{
        admin_client::AdminClient, audit_client::AuditClient, rma_client::RmaClient,
    };
    use tonic_types::StatusExt;
    let server = spawn_server().await;
    let channel = channel_to(&server.url).await;
    let bearer = |token: String| {
        move |mut request: tonic::Request<()>| {
            let value = format!("Bearer {token}").parse().unwrap();
            request.metadata_mut().insert("authorization", value);
            Ok(request)
        }
    };
    let admin_token = ADMIN_TOKEN.to_string();
    let mut admin = AdminClient::with_interceptor(channel.clone(), bearer(admin_token.clone()));
    let mut audit = AuditClient::with_interceptor(channel.clone(), bearer(admin_token));
    let world = unique("world");
    let create = onesided_proto::v1::CreateWorldRequest {
        name: world.clone(),
        ranks: 2,
    };
    let tokens = admin
        .create_world(create.clone())
        .await
        .unwrap()
        .into_inner()
        .tokens;
    let taken = admin.create_world(create).await.unwrap_err();
    let no_window = admin
        .describe_window(onesided_proto::v1::DescribeWindowRequest {
            world: world.clone(),
            name: "nothing".to_string(),
        })
        .await
        .unwrap_err();
    let not_recorded = audit
        .replay(onesided_proto::v1::ReplayRequest {
            window: u64::from(u32::MAX),
            at: 0,
        })
        .await
        .unwrap_err();
    let mut rma = RmaClient::with_interceptor(channel, bearer(tokens[0].clone()));
    let mut claim = tonic::Request::new(tokio_stream::iter(
        Vec::<onesided_proto::v1::ClientMessage>::new(),
    ));
    claim
        .metadata_mut()
        .insert("x-onesided-rank", "first".parse().unwrap());
    let bad_claim = rma.session(claim).await.unwrap_err();
    for (status, code, reason) in [
        (taken, Code::AlreadyExists, "MPI_ERR_ARG"),
        (no_window, Code::NotFound, "MPI_ERR_WIN"),
        (not_recorded, Code::NotFound, "MPI_ERR_WIN"),
        (bad_claim, Code::InvalidArgument, "MPI_ERR_RANK"),
    ] {
        assert_eq!(status.code(), code, "{status:?}");
        let info = status
            .get_details_error_info()
            .unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
        assert_eq!(info.reason, reason, "{status:?}");
        assert_eq!(info.domain, "onesided");
        let class = ErrorClass::parse(reason).unwrap();
        assert_eq!(info.metadata["class"], class.code().to_string());
        let rich = tonic_types::pb::Status::decode(status.details()).unwrap();
        assert_eq!(rich.code, code as i32, "the details agree with the status");
        assert!(status.message().starts_with(reason), "{status:?}");
        // and the Rust client reads the class from the same details
        let error = onesided_client::Error::from(status);
        assert_eq!(error.class(), Some(class));
    }
}
