//! A smoke run of the bench logic against an in-process server: every key is there with a
//! positive number. It asserts no speed.

use onesided_bench::{run, Options, LATENCY_KEYS, QUICK_ITERATIONS};
use serde_json::Value;

fn positive(value: &Value) -> bool {
    value.as_f64().is_some_and(|v| v.is_finite() && v > 0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quick_run_reports_every_key_with_a_positive_number() {
    let options = Options {
        busy_poll: Some(std::time::Duration::from_micros(50)),
        ..Options::quick()
    };
    let report = run(&options).await.expect("the quick run failed");
    let json = report.to_json();
    // --busy-poll: the latencies again, busy-polling, each with its ratios
    let polled = &json["busy_poll"];
    assert_eq!(polled["budget_us"], 50);
    // against onesided-server processes whenever the binary is built beside the bench
    let server = match onesided_bench::rss::server_binary() {
        Ok(_) => "process",
        Err(_) => "in-process",
    };
    assert_eq!(polled["server"], server);
    for (key, _) in LATENCY_KEYS {
        assert!(
            positive(&polled[key]),
            "busy_poll.{key} is {:?}",
            polled[key]
        );
        assert!(positive(&polled["plain"][key]), "busy_poll.plain.{key}");
        let ratio = polled["ratio_to_plain"][key].as_f64().unwrap();
        let expected = polled[key].as_f64().unwrap() / polled["plain"][key].as_f64().unwrap();
        assert!(
            (ratio - expected).abs() < 1e-9,
            "busy_poll.ratio_to_plain.{key}"
        );
        assert!(positive(&polled["ratio_to_raw_tcp"][key]));
        let mpich = &polled["ratio_to_mpich"][key];
        assert_eq!(
            mpich.is_null(),
            json["references"]["mpich"].is_null(),
            "{key}"
        );
    }
    assert!(report.table().contains("| metric | plain | busy-poll |"));
    // the server's memory during one bulk put, measured on an onesided-server process when
    // one is built beside the bench (as in the workspace's test run)
    match onesided_bench::rss::server_binary() {
        Ok(_) => {
            let rss = &json["bulk_rss"];
            for key in [
                "off_mib",
                "sync_mib",
                "put_mib",
                "window_mib",
                "target_mib",
                "sync_store_bytes_per_byte",
            ] {
                assert!(positive(&rss[key]), "bulk_rss.{key} is {rss}");
            }
            // issue 12, item 3: payloads stored as bytes, not as hex inside JSON
            let growth = rss["sync_store_bytes_per_byte"].as_f64().unwrap();
            assert!(
                (0.9..=1.1).contains(&growth),
                "the store grew {growth} bytes per byte put"
            );
            assert_eq!(json["bulk_peak_rss_mib"], rss["off_mib"]);
            assert_eq!(json["sync_sqlite"]["bulk_peak_rss_mib"], rss["sync_mib"]);
            assert!(rss["off_met"].is_boolean() && rss["sync_met"].is_boolean());
            assert!(json["bulk_rss_missing"].is_null());
        }
        Err(_) => {
            assert!(json["bulk_peak_rss_mib"].is_null());
            assert!(json["bulk_rss_missing"].is_string());
        }
    }
    for key in [
        "lock_put_unlock_us",
        "fence_put_us",
        "lock_acc_unlock_us",
        "lock_get_unlock_us",
        "fop_flush_us",
        "cas_flush_us",
        "pscw_put_us",
        "hot_counter_ops_per_s",
        "bulk_put_mib_per_s",
        "bulk_put_shared_mib_per_s",
        "raw_tcp_pingpong_us",
        "raw_tcp_bulk_mib_per_s",
        "fdatasync_us",
        "sqlite_commit_us",
        "disk_write_mib_per_s",
        "disk_write_bytes",
    ] {
        assert!(positive(&json[key]), "{key} is {:?}", json[key]);
    }
    for ranks in ["2", "8"] {
        let value = &json["fence_scaling_us"][ranks];
        assert!(positive(value), "fence_scaling_us[{ranks}] is {value:?}");
        // the floor under it: as many bare streams behind a barrier, at every size
        let floor = &json["references"]["grpc_barrier_us"][ranks];
        assert!(positive(floor), "grpc_barrier_us[{ranks}] is {floor:?}");
    }
    // Redis is a reference only when one runs here: null or a positive number
    for key in ["redis_get_set_us", "redis_incr_50_clients_per_s"] {
        let value = &json["references"][key];
        assert!(value.is_null() || positive(value), "{key} is {value:?}");
        assert_eq!(&json[key], value);
    }
    for key in [
        "raw_tcp_pingpong_us",
        "raw_tcp_bulk_mib_per_s",
        "grpc_echo_us",
        "grpc_64_streams_per_s",
        "grpc_bulk_mib_per_s",
        "fdatasync_us",
        "sqlite_commit_us",
        "commit_echo_us",
        "commit_streams_per_s",
        "disk_write_mib_per_s",
        "disk_write_bytes",
    ] {
        assert!(positive(&json["references"][key]), "references.{key}");
        assert_eq!(&json[key], &json["references"][key]);
    }
    assert!(json["pg_commit_us"].is_null(), "no database URL, no commit");
    assert!(json["references"]["pg_commit_us"].is_null());
    assert!(json["pg_commit_echo_us"].is_null());
    assert!(json["pg_commit_streams_per_s"].is_null());
    check_mpich(&json["references"]);
    check_redis_durable(&json);
    assert_eq!(json["audit"], "off");
    assert!(json["iterations"].as_u64().is_some_and(|n| n > 0));
    // the in-process server's runtime as configured; the clients' as this test built it
    assert_eq!(json["server_threads"], 1);
    assert_eq!(json["client_threads"], 2);
    assert_eq!(json["keep_awake"], false);
    // the server's default configuration (sync, SQLite) beside off, with no flag asking
    let sync = &json["sync_sqlite"];
    check_sync(&json, sync, "fdatasync_us");
    assert_eq!(
        &json["sync"], sync,
        "sync is the SQLite run without a database URL"
    );
    assert!(
        json["sync_postgres"].is_null(),
        "no database URL, no PostgreSQL run"
    );
    let table = report.table();
    assert!(
        table.contains("| metric | audit off | sync SQLite | sync / off | target | met |\n"),
        "{table}"
    );
    assert!(
        table.contains("| `grpc_echo_us` (bare tonic stream, 8 B each way) |"),
        "{table}"
    );
    assert!(
        table.contains("| `grpc_barrier_us` 8 ranks (8 such streams, each answer after all 8 messages of the round) |"),
        "{table}"
    );
    assert!(
        table.contains("Floor of a sync SQLite lock-put-unlock (the round trip and its epoch's"),
        "{table}"
    );
    assert!(
        table.contains("Floor of a sync SQLite hot counter (64 streams, each answered after"),
        "{table}"
    );
}

/// A `sync` run's figures are there and positive, each with its ratio to `off`, and every
/// latency with its target (off + 1.5 × the store's reference) and whether it was met — a
/// verdict either way, never asserted. The targets' `off` is the `off` run's, except for the
/// PostgreSQL run under `--keep-awake`: it runs with the spinners stopped, and so does the
/// `off` its latency targets take.
fn check_sync(json: &Value, sync: &Value, reference: &str) {
    assert_eq!(sync["target_reference"], reference);
    // beside the target, the floor: the sync lock-put-unlock over the committing echo
    let floor = match reference {
        "fdatasync_us" => "commit_echo_us",
        _ => "pg_commit_echo_us",
    };
    assert_eq!(sync["floor_reference"], floor);
    assert!(positive(&json[floor]), "{floor} is {:?}", json[floor]);
    let over_floor = sync["lock_put_unlock_ratio_to_floor"].as_f64().unwrap();
    let expected = sync["lock_put_unlock_us"].as_f64().unwrap() / json[floor].as_f64().unwrap();
    assert!((over_floor - expected).abs() < 1e-9, "{sync}");
    // and the hot counter's: the sync figure over it, and it over the off figure
    let hot_floor = match reference {
        "fdatasync_us" => "commit_streams_per_s",
        _ => "pg_commit_streams_per_s",
    };
    assert_eq!(sync["hot_counter_floor_reference"], hot_floor);
    let floor_per_s = json[hot_floor].as_f64().unwrap();
    assert!(floor_per_s > 0.0, "{hot_floor} is {floor_per_s}");
    let hot = sync["hot_counter_ops_per_s"].as_f64().unwrap();
    let ratio = sync["hot_counter_ratio_to_floor"].as_f64().unwrap();
    assert!((ratio - hot / floor_per_s).abs() < 1e-9, "{sync}");
    let off_hot = json["hot_counter_ops_per_s"].as_f64().unwrap();
    let allowed = sync["hot_counter_floor_ratio_to_off"].as_f64().unwrap();
    assert!((allowed - floor_per_s / off_hot).abs() < 1e-9, "{sync}");
    let without_spinners = json["keep_awake"] == true && reference == "pg_commit_us";
    let off_for_targets = if without_spinners {
        "off_without_spinners"
    } else {
        "off"
    };
    assert_eq!(sync["off_for_targets"], off_for_targets, "{sync}");
    let reference_us = json[reference].as_f64().unwrap();
    for (key, _) in LATENCY_KEYS {
        assert!(positive(&sync[key]), "{key} is {:?}", sync[key]);
        let ratio = sync["ratio_to_off"][key].as_f64().unwrap();
        let expected = sync[key].as_f64().unwrap() / json[key].as_f64().unwrap();
        assert!((ratio - expected).abs() < 1e-9, "ratio_to_off.{key}");
        let off = &sync["off_for_targets_us"][key];
        if !without_spinners {
            assert_eq!(off, &json[key], "{key}");
        }
        assert!(positive(off), "off_for_targets_us.{key} is {off:?}");
        let target = sync["latency_target_us"][key].as_f64().unwrap();
        let expected = off.as_f64().unwrap() + 1.5 * reference_us;
        assert!((target - expected).abs() < 1e-9, "latency_target_us.{key}");
        assert!(sync["latency_target_met"][key].is_boolean(), "{sync}");
    }
    for key in [
        "hot_counter_ops_per_s",
        "bulk_put_mib_per_s",
        "bulk_put_shared_mib_per_s",
    ] {
        assert!(positive(&sync[key]), "{key} is {:?}", sync[key]);
    }
    for ranks in ["2", "8"] {
        assert!(positive(&sync["fence_scaling_us"][ranks]), "{sync}");
        assert!(positive(&sync["ratio_to_off"]["fence_scaling_us"][ranks]));
        assert!(positive(
            &sync["latency_target_us"]["fence_scaling_us"][ranks]
        ));
        assert!(sync["latency_target_met"]["fence_scaling_us"][ranks].is_boolean());
    }
}

/// The durable Redis (`appendfsync always`, started by the bench) is measured whenever
/// `redis-server` and `redis-benchmark` run here, else its keys are null with a reason; the same
/// at the top level and under `references`, and the hot counter's stretch ratio in `sync`.
fn check_redis_durable(json: &Value) {
    let keys = [
        "redis_durable_incr_1_client_p50_us",
        "redis_durable_incr_1_client_per_s",
        "redis_durable_incr_50_clients_per_s",
        "redis_durable_missing",
    ];
    for key in keys {
        assert_eq!(&json[key], &json["references"][key], "{key}");
    }
    let why = &json["redis_durable_missing"];
    let runs = |program: &str| {
        std::process::Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|output| output.status.success())
    };
    let ratio = &json["sync_sqlite"]["hot_counter_ratio_to_redis_durable"];
    if !(runs("redis-server") && runs("redis-benchmark")) {
        for key in &keys[..3] {
            assert!(
                json[key].is_null(),
                "no Redis here, yet {key} is {:?}",
                json[key]
            );
        }
        assert!(why.as_str().is_some_and(|why| !why.is_empty()), "{why:?}");
        assert!(ratio.is_null(), "{ratio:?}");
        return;
    }
    assert!(
        why.is_null(),
        "redis-server is on PATH, yet the durable Redis was not measured: {why}"
    );
    for key in &keys[..3] {
        assert!(positive(&json[key]), "{key} is {:?}", json[key]);
    }
    let expected = json["sync_sqlite"]["hot_counter_ops_per_s"]
        .as_f64()
        .unwrap()
        / json["redis_durable_incr_50_clients_per_s"]
            .as_f64()
            .unwrap();
    assert!(
        ratio.as_f64().is_some_and(|r| (r - expected).abs() < 1e-9),
        "{ratio:?}"
    );
}

/// MPICH is measured whenever `mpicc` runs here (`.ci/run` installs it), else it is null with a
/// reason.
fn check_mpich(references: &Value) {
    let mpich = &references["mpich"];
    let why = &references["mpich_missing"];
    let mpicc = std::process::Command::new("mpicc")
        .arg("-show")
        .output()
        .is_ok_and(|output| output.status.success());
    if !mpicc {
        assert!(
            mpich.is_null(),
            "mpicc is not on PATH, yet mpich is {mpich:?}"
        );
        assert!(why.as_str().is_some_and(|why| !why.is_empty()), "{why:?}");
        return;
    }
    assert!(
        why.is_null(),
        "mpicc is on PATH, yet MPICH was not measured: {why}"
    );
    for (key, _) in LATENCY_KEYS {
        assert!(positive(&mpich[key]), "mpich.{key} is {:?}", mpich[key]);
    }
    assert!(positive(&mpich["bulk_put_mib_per_s"]), "{mpich:?}");
    assert!(
        mpich["transport"]
            .as_str()
            .is_some_and(|t| t.contains("TCP")),
        "{mpich:?}"
    );
    // Over TCP every iteration of every pattern sends at least one segment from rank 0 (the
    // counter is the machine's, so other traffic can only add to it); over shared memory the
    // run sends a few dozen, the launcher's. The counter is missing only where the machine
    // has no /proc/net/snmp to read it from.
    let counted = std::fs::read_to_string("/proc/net/snmp").is_ok();
    match mpich["tcp_segments_sent"].as_u64() {
        Some(segments) => {
            let iterations = (QUICK_ITERATIONS + QUICK_ITERATIONS / 10) * LATENCY_KEYS.len();
            assert!(
                segments >= iterations as u64,
                "MPICH sent {segments} TCP segments for {iterations} iterations: not over TCP?"
            );
        }
        None => assert!(
            !counted,
            "/proc/net/snmp is there, yet no TCP segments were counted: {mpich:?}"
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_runs_the_workload_and_samples_memory() {
    let mut printed = 0;
    let report = onesided_bench::soak::soak(6, onesided_bench::Audit::Off, None, |_| printed += 1)
        .await
        .expect("the soak's workload failed");
    // one sample at the start and one a second; memory is not judged on so short a run
    assert_eq!(report.samples.len(), 7);
    assert_eq!(printed, 7);
    assert!(report.samples.iter().all(|sample| sample.rss_kib > 0));
    assert!(
        report.world_cycles > 0 && report.window_cycles > 0,
        "{report:?}"
    );
    let cycles: Vec<u64> = report.samples.iter().map(|sample| sample.cycles).collect();
    assert!(
        cycles.windows(2).all(|pair| pair[0] <= pair[1]),
        "{cycles:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_database_url_the_sync_figures_stand_beside_the_off_ones() {
    // dropped on drop, whether the run succeeds or not
    let database = onesided_test_support::PgDatabase::create().await;
    // with the spinners: the PostgreSQL run, measured without them, is held to `off` latencies
    // measured without them too
    let options = Options {
        database_url: Some(database.url.clone()),
        keep_awake: true,
        ..Options::quick()
    };
    let report = run(&options).await.expect("the quick run failed");
    drop(database);
    let json = report.to_json();
    assert_eq!(json["keep_awake"], true);
    assert_eq!(json["audit"], "off", "the main run keeps the audit off");
    for key in [
        "pg_commit_us",
        "pg_insert_mib_per_s",
        "pg_commit_echo_us",
        "pg_commit_streams_per_s",
        "fdatasync_us",
    ] {
        assert!(positive(&json[key]), "{key} is {:?}", json[key]);
        assert_eq!(&json[key], &json["references"][key]);
    }
    assert!(json["pg_synchronous_commit"].is_string());
    // item 3's floor into PostgreSQL: the sync bulk put against PostgreSQL's own bulk INSERT
    let ratio = json["sync_postgres"]["bulk_ratio_to_pg_insert"]
        .as_f64()
        .unwrap();
    let expected = json["sync_postgres"]["bulk_put_mib_per_s"]
        .as_f64()
        .unwrap()
        / json["pg_insert_mib_per_s"].as_f64().unwrap();
    assert!((ratio - expected).abs() < 1e-9, "bulk_ratio_to_pg_insert");
    assert!(
        json["sync_sqlite"].get("bulk_ratio_to_pg_insert").is_none(),
        "only the PostgreSQL run has PostgreSQL's floor"
    );
    assert!(
        json["busy_poll"].is_null(),
        "no --busy-poll, no busy-polling run"
    );
    // three columns: off, sync SQLite (the default configuration), sync PostgreSQL
    check_sync(&json, &json["sync_sqlite"], "fdatasync_us");
    check_sync(&json, &json["sync_postgres"], "pg_commit_us");
    // measured again, not the off run's figures under another name: separate medians of
    // microseconds do not all coincide
    let again = &json["sync_postgres"]["off_for_targets_us"];
    assert!(
        LATENCY_KEYS.iter().any(|(key, _)| again[key] != json[key]),
        "{again} are the off run's own figures"
    );
    assert_eq!(
        json["sync"], json["sync_postgres"],
        "sync is the --database-url run"
    );
    let table = report.table();
    assert!(
        table.contains(
            "| metric | audit off | sync SQLite | sync / off | target | met | \
             sync PostgreSQL | sync / off | target | met |"
        ),
        "{table}"
    );
    assert!(table.contains("| `pg_insert_mib_per_s` (1-row INSERT of 4 MiB, autocommit) |"));
}
