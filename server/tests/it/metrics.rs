//! The `/metrics` endpoint, scraped over real HTTP while real clients make real calls: what an
//! operator reads there matches what the clients did.

use std::time::{Duration, Instant};

use onesided_client::{Assert, Audit, ErrorClass, LockType, WindowSpec};
use onesided_server::metrics::MetricsListener;

use crate::{poll_until, spawn_server_with, unique, Fixture, TestServer, ADMIN_TOKEN};

/// A server with its metrics endpoint on a free port, and that endpoint's address.
async fn server_with_metrics() -> (TestServer, std::net::SocketAddr) {
    let listener = MetricsListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = listener.local_addr();
    let server = spawn_server_with(|config| config.metrics = Some(listener)).await;
    (server, address)
}

/// `GET path` over a plain TCP connection (the web suite's [`crate::web::get`], no token): the
/// status code and the body. A 200 must be in the Prometheus text format.
pub async fn get(address: std::net::SocketAddr, path: &str) -> (u16, String) {
    let answer = crate::web::get(address, path, None).await;
    if answer.status == 200 {
        assert!(
            answer
                .head
                .contains("content-type: text/plain; version=0.0.4"),
            "not the Prometheus text format: {}",
            answer.head
        );
    }
    (answer.status, answer.body)
}

async fn scrape(address: std::net::SocketAddr) -> String {
    let (status, body) = get(address, "/metrics").await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The value of the sample named exactly `series` (name and labels as exposed).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter_map(|line| line.strip_prefix(series))
        .find_map(|rest| rest.strip_prefix(' '))
        .map(|number| number.trim().parse().unwrap())
}

fn sample(text: &str, series: &str) -> f64 {
    value(text, series).unwrap_or_else(|| panic!("{series} missing from\n{text}"))
}

/// Scrapes until `settled` holds, for at most ten seconds; returns the last scrape.
async fn scrape_until(
    address: std::net::SocketAddr,
    what: &str,
    settled: impl Fn(&str) -> bool,
) -> String {
    let otherwise = |text: &String| format!("{what} never happened:\n{text}");
    let within = Duration::from_secs(10);
    let settled = |text: &String| settled(text);
    poll_until(
        within,
        Duration::ZERO,
        || scrape(address),
        settled,
        otherwise,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_and_batched_puts_are_counted_and_timed_per_call() {
    const FENCES: usize = 5;
    let (server, metrics) = server_with_metrics().await;
    let fixture = Fixture::on(server, 2).await;
    let windows = fixture.window_of::<i64>(1).await;
    let ranks = windows.len();
    let puts = crate::ranks(windows, |rank, w| async move {
        w.fence(Assert::NOPRECEDE).await.unwrap();
        let mut puts = 0;
        for round in 1..FENCES {
            // the put travels in one batch with the fence that ends its epoch
            w.put(1 - rank, 0, &[round as i64]).unwrap();
            puts += 1;
            w.fence(0).await.unwrap();
        }
        puts
    })
    .await
    .into_iter()
    .sum::<usize>();
    // every fence returned, so every fence's answer was sent: nothing to wait for
    let text = scrape(metrics).await;
    let fences = (FENCES * ranks) as f64;
    assert_eq!(
        sample(
            &text,
            "onesided_call_duration_seconds_count{call=\"fence\"}"
        ),
        fences
    );
    assert_eq!(
        sample(&text, "onesided_calls_total{call=\"fence\"}"),
        fences
    );
    assert_eq!(
        sample(&text, "onesided_call_duration_seconds_count{call=\"op\"}"),
        puts as f64,
        "a batch's inner calls count as their own"
    );
    assert!(sample(&text, "onesided_calls_total{call=\"batch\"}") >= puts as f64);
    assert!(sample(&text, "onesided_call_duration_seconds_sum{call=\"fence\"}") > 0.0);
    assert_eq!(
        sample(
            &text,
            "onesided_call_duration_seconds_bucket{call=\"fence\",le=\"+Inf\"}"
        ),
        fences
    );
    assert_eq!(sample(&text, "onesided_sessions_attached"), ranks as f64);
    assert_eq!(
        value(&text, "onesided_call_errors_total{call=\"fence\""),
        None
    );
    // the answers sent, every operation's budget slot comes back
    scrape_until(metrics, "the pending operations drained", |text| {
        sample(text, "onesided_pending_ops") == 0.0
    })
    .await;
}

/// A fence costs each rank's actor two messages (its own fence, and the notice that every
/// rank arrived), whatever the world's size: O(N) per fence at the server, not one
/// end-of-epoch marker from every rank to every rank (issue 12, item 5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_costs_each_rank_two_actor_messages_whatever_the_world_size() {
    const FENCES: usize = 4;
    for nranks in [2u32, 24] {
        let (server, metrics) = server_with_metrics().await;
        let fixture = Fixture::on(server, nranks).await;
        let windows = fixture
            .window(WindowSpec::of::<i64>(&unique("w"), nranks, 1))
            .await;
        let before = sample(&scrape(metrics).await, "onesided_actor_inputs_total");
        crate::ranks(windows, |_, w| async move {
            for _ in 0..FENCES {
                w.fence(0).await.unwrap();
            }
        })
        .await;
        // every fence returned, so each actor took both messages of every fence
        let after = sample(&scrape(metrics).await, "onesided_actor_inputs_total");
        assert_eq!(
            after - before,
            (2 * nranks as usize * FENCES) as f64,
            "actor messages of {FENCES} fences at {nranks} ranks"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_wait_lasts_at_least_as_long_as_the_holder_kept_the_lock() {
    const HOLD: Duration = Duration::from_millis(200);
    let (server, metrics) = server_with_metrics().await;
    let fixture = Fixture::on(server, 2).await;
    let windows = fixture.window_of::<i64>(1).await;
    let (holder, waited) = crate::rank_1_waiting_for_rank_0(windows).await;
    // its request in rank 0's lock queue, its put in rank 0's queue of what rank 1 sent
    scrape_until(
        metrics,
        "rank 1's request and put queued at rank 0",
        |text| {
            sample(text, "onesided_lock_waiters") == 1.0
                && sample(text, "onesided_actor_queued_items") >= 1.0
        },
    )
    .await;
    // the request waits from before this instant until after the unlock
    tokio::time::sleep(HOLD).await;
    holder.unlock(0).await.unwrap();
    waited.await.unwrap();

    let text = scrape(metrics).await;
    let exclusive = "lock_type=\"exclusive\"";
    let grants = sample(
        &text,
        &format!("onesided_lock_wait_seconds_count{{{exclusive}}}"),
    );
    assert_eq!(grants, 2.0, "the holder's grant and the waiter's");
    assert!(
        sample(
            &text,
            &format!("onesided_lock_wait_seconds_sum{{{exclusive}}}")
        ) >= HOLD.as_secs_f64()
    );
    // the largest bucket bound not above HOLD holds fewer grants than all: one waited longer
    let (bound, below) = text
        .lines()
        .filter(|line| {
            line.starts_with("onesided_lock_wait_seconds_bucket{") && line.contains(exclusive)
        })
        .filter_map(|line| {
            let le: f64 = line
                .split("le=\"")
                .nth(1)?
                .split('"')
                .next()?
                .parse()
                .ok()?;
            let count: f64 = line.rsplit(' ').next()?.parse().ok()?;
            (le <= HOLD.as_secs_f64()).then_some((le, count))
        })
        .next_back()
        .expect("a bucket below the hold");
    assert_eq!(below, 1.0, "one grant waited more than {bound} s:\n{text}");
    assert_eq!(sample(&text, "onesided_lock_waiters"), 0.0);
    assert_eq!(sample(&text, "onesided_actor_queued_items"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_commits_count_every_event_of_the_log_in_sync_mode() {
    let (server, metrics) = server_with_metrics().await;
    let audit = Audit::connect(&server.url, ADMIN_TOKEN).await.unwrap();
    let fixture = Fixture::on(server, 2).await;
    let windows = fixture.window_of::<i64>(4).await;
    crate::ranks(windows, |rank, w| async move {
        w.fence(Assert::NOPRECEDE).await.unwrap();
        for round in 0..3i64 {
            w.put(1 - rank, 0, &[round, round + 1]).unwrap();
            w.fence(0).await.unwrap();
        }
        w.lock(LockType::Shared, 1 - rank, 0).await.unwrap();
        w.accumulate(1 - rank, 2, &[1i64], onesided_client::Op::Sum)
            .unwrap();
        w.unlock(1 - rank).await.unwrap();
    })
    .await;
    // the log's rows and the commits' events, until the writer's last commit is counted
    let deadline = Instant::now() + Duration::from_secs(10);
    let (text, logged) = loop {
        let logged: u64 = audit
            .windows()
            .await
            .unwrap()
            .iter()
            .map(|window| window.events)
            .sum();
        let text = scrape(metrics).await;
        let committed = sample(&text, "onesided_audit_commit_events_sum");
        let lags = sample(&text, "onesided_audit_lag_seconds_count");
        if committed == logged as f64 && lags == committed {
            break (text, logged);
        }
        assert!(
            Instant::now() < deadline,
            "{logged} rows logged, {committed} events committed, {lags} lags:\n{text}"
        );
        tokio::task::yield_now().await;
    };
    assert!(logged > 0);
    let commits = sample(&text, "onesided_audit_commit_events_count");
    assert!(commits >= 1.0);
    assert_eq!(
        sample(&text, "onesided_audit_commit_duration_seconds_count"),
        commits
    );
    assert_eq!(sample(&text, "onesided_audit_commit_failures_total"), 0.0);
    assert!(value(&text, "onesided_audit_inbox_depth").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_call_counts_as_an_error_of_its_class() {
    let (server, metrics) = server_with_metrics().await;
    let fixture = Fixture::on(server, 1).await;
    let session = &fixture.sessions[0];
    let refused = session.window("no-such-window").await.unwrap_err();
    assert_eq!(refused.class(), Some(ErrorClass::Win));
    let text = scrape(metrics).await;
    assert_eq!(
        sample(
            &text,
            "onesided_call_errors_total{call=\"open_window\",class=\"WIN\"}"
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            "onesided_call_duration_seconds_count{call=\"open_window\"}"
        ),
        1.0,
        "a refused call is timed too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_serves_only_metrics() {
    let (_server, metrics) = server_with_metrics().await;
    let (status, _) = get(metrics, "/other").await;
    assert_eq!(status, 404);
    let (status, _) = get(metrics, "/").await;
    assert_eq!(status, 404);
    let text = scrape(metrics).await;
    assert!(
        text.contains("# TYPE onesided_call_duration_seconds histogram"),
        "{text}"
    );
}

/// Every `name{labels}` label of `text`'s samples, as (key, value) pairs.
fn labels(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let Some((_, rest)) = line.split_once('{') else {
            continue;
        };
        let (inside, _) = rest.rsplit_once('}').expect("a closed label set");
        for pair in inside.split(',').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').expect("key=value");
            found.push((key.to_string(), value.trim_matches('"').to_string()));
        }
    }
    found
}

/// README, "Metrics": every label of `text` is a call kind, an error class, a lock type or a
/// bucket bound (but those of `onesided_build_info`, which describe the build); none names
/// the world `world` or the window `window`, or holds a number other than a bound (a rank).
fn labels_name_only_kinds(text: &str, world: &str, window: &str) {
    let without_build: String = text
        .lines()
        .filter(|line| !line.starts_with("onesided_build_info{"))
        .map(|line| format!("{line}\n"))
        .collect();
    let found = labels(&without_build);
    assert!(found.iter().any(|(key, _)| key == "call"), "{text}");
    assert!(found.iter().any(|(key, _)| key == "class"), "{text}");
    for (key, value) in &found {
        assert!(
            ["call", "class", "lock_type", "le"].contains(&key.as_str()),
            "a label {key}={value}:\n{text}"
        );
        assert!(
            !value.contains(world) && !value.contains(window),
            "a label names the world or window: {key}={value}"
        );
        if key != "le" {
            assert!(
                !value.bytes().all(|byte| byte.is_ascii_digit()),
                "a label holds a number (a rank?): {key}={value}"
            );
        }
    }
    assert!(!text.contains(world) && !text.contains(window), "{text}");
}

/// README, "Metrics": labels name only call kinds, MPI error classes and lock types, never a
/// world, window or rank; heartbeats are taken up (`onesided_calls_total`) but get no answer,
/// so they are never timed; a `NOCHECK` grant waits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_name_no_world_heartbeats_are_never_timed_and_nocheck_waits_zero() {
    const WORLD: &str = "zqworldnamezq";
    const WINDOW: &str = "xjwindownamexj";
    let listener = MetricsListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let metrics = listener.local_addr();
    // heartbeats every 200 ms
    let server = spawn_server_with(|config| {
        config.metrics = Some(listener);
        config.lease_ttl = Duration::from_millis(600);
    })
    .await;
    let world = server.admin.create_world(WORLD, 3).await.unwrap();
    server
        .admin
        .create_window(WORLD, &WindowSpec::of::<i64>(WINDOW, 3, 2))
        .await
        .unwrap();
    let mut windows = Vec::new();
    for token in &world.tokens {
        let session = onesided_client::Session::attach(&server.url, token)
            .await
            .unwrap();
        windows.push(session.window(WINDOW).await.unwrap());
    }
    // rank 2 locks rank 1 with NOCHECK: granted without a wait; rank 0 is refused once
    windows[2]
        .lock(LockType::Exclusive, 1, Assert::NOCHECK)
        .await
        .unwrap();
    windows[2].put(1, 1, &[9i64]).unwrap();
    windows[2].unlock(1).await.unwrap();
    let refused = windows[0].session().window("no-such-window").await;
    assert_eq!(refused.unwrap_err().class(), Some(ErrorClass::Win));
    let named_nothing = |text: &str| {
        labels_name_only_kinds(text, WORLD, WINDOW);
        for token in &world.tokens {
            assert!(!text.contains(token.as_str()));
        }
    };
    let text = scrape(metrics).await;
    named_nothing(&text);
    assert_eq!(
        sample(
            &text,
            "onesided_lock_wait_seconds_count{lock_type=\"exclusive\"}"
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "onesided_lock_wait_seconds_sum{lock_type=\"exclusive\"}"
        ),
        0.0,
        "a NOCHECK grant waited"
    );
    // heartbeats keep coming while the ranks are idle: taken up, never answered nor timed
    let before = sample(&text, "onesided_calls_total{call=\"heartbeat\"}");
    let text = scrape_until(metrics, "three more heartbeats", |text| {
        sample(text, "onesided_calls_total{call=\"heartbeat\"}") >= before + 3.0
    })
    .await;
    assert_eq!(
        value(
            &text,
            "onesided_call_duration_seconds_count{call=\"heartbeat\"}"
        )
        .unwrap_or(0.0),
        0.0,
        "a heartbeat was timed as an answered call"
    );
    named_nothing(&text);
}

/// `--busy-poll`: the server spins after its answers — at least its budget after the last one —
/// and says so in `onesided_busy_poll_spin_seconds_total`; busy-polling sessions get the same
/// answers; a server without the flag never spins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_polling_server_spins_its_budget_after_answers_and_reports_it() {
    const BUDGET: Duration = Duration::from_millis(100);
    const SPIN: &str = "onesided_busy_poll_spin_seconds_total";
    let listener = MetricsListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let metrics = listener.local_addr();
    let server = spawn_server_with(|config| {
        config.metrics = Some(listener);
        config.busy_poll = Some(BUDGET);
    })
    .await;
    assert_eq!(sample(&scrape(metrics).await, SPIN), 0.0, "no answer yet");
    let world = unique("world");
    let created = server.admin.create_world(&world, 2).await.unwrap();
    let name = unique("w");
    server
        .admin
        .create_window(&world, &WindowSpec::of::<i64>(&name, 2, 1))
        .await
        .unwrap();
    let endpoint = onesided_client::Endpoint::new(server.url.as_str()).busy_poll(BUDGET);
    let mut windows = Vec::new();
    let mut sessions = Vec::new();
    for token in &created.tokens {
        let session = onesided_client::Session::attach(endpoint.clone(), token)
            .await
            .unwrap();
        windows.push(session.window(&name).await.unwrap());
        sessions.push(session);
    }
    for i in 1..=20_i64 {
        windows[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
        windows[0].put(1, 0, &[i]).unwrap();
        windows[0].unlock(1).await.unwrap();
    }
    windows[1].lock(LockType::Shared, 1, 0).await.unwrap();
    let read = windows[1].get::<i64>(1, 0, 1).unwrap();
    windows[1].unlock(1).await.unwrap();
    assert_eq!(read.value().await.unwrap(), vec![20]);
    // the spinning time is added when a spell ends: a full budget after the last answer
    let text = scrape_until(metrics, "a full spell of spinning", |text| {
        sample(text, SPIN) >= BUDGET.as_secs_f64()
    })
    .await;
    assert!(sample(&text, SPIN) > 0.0);

    // the default: no spinning at all, whatever the traffic
    let (plain, plain_metrics) = server_with_metrics().await;
    let fixture = Fixture::on(plain, 2).await;
    let windows = fixture.window_of::<i64>(1).await;
    for i in 1..=20_i64 {
        windows[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
        windows[0].put(1, 0, &[i]).unwrap();
        windows[0].unlock(1).await.unwrap();
    }
    assert_eq!(sample(&scrape(plain_metrics).await, SPIN), 0.0);
}

/// `onesided_build_info`'s labels: (key, value) pairs of its one sample, which is 1.
fn build_info(text: &str) -> Vec<(String, String)> {
    let line = text
        .lines()
        .find(|line| line.starts_with("onesided_build_info{"))
        .unwrap_or_else(|| panic!("no onesided_build_info in\n{text}"));
    assert!(line.ends_with("} 1"), "{line}");
    labels(line)
}

/// README, "Metrics": the build (version, compiler) and the process (memory, CPU, file
/// descriptors, threads, start time) are exported, in the units their names say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_build_and_the_process_are_exported() {
    let (_server, metrics) = server_with_metrics().await;
    let text = scrape(metrics).await;
    assert!(text.contains("# TYPE onesided_build_info gauge"), "{text}");
    let build = build_info(&text);
    let label = |key: &str| {
        build
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.clone())
    };
    assert_eq!(label("version").as_deref(), Some(env!("CARGO_PKG_VERSION")));
    // build.rs asks the compiler that built this very test
    let rustc = label("rustc").expect("the rustc label");
    assert!(
        rustc.split('.').count() >= 3 && rustc.starts_with(|c: char| c.is_ascii_digit()),
        "rustc={rustc}"
    );

    // the process: this test's own
    let resident = sample(&text, "process_resident_memory_bytes");
    assert!(resident > 1e6, "a server in under a megabyte? {resident}");
    assert!(sample(&text, "process_virtual_memory_bytes") >= resident);
    // a tokio runtime of two workers at least, and this test's
    assert!(sample(&text, "process_threads") >= 2.0);
    let open = sample(&text, "process_open_fds");
    assert!(open >= 3.0, "stdin, stdout, stderr and listeners: {open}");
    assert!(sample(&text, "process_max_fds") >= open);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = sample(&text, "process_start_time_seconds");
    assert!(
        started <= now + 1.0 && started > now - 24.0 * 3600.0,
        "started at {started}, now {now}: not seconds since the epoch"
    );
    // CPU time: it grows as scrapes keep the process busy, and it is seconds (no more than
    // every core for the whole time since the start), not clock ticks
    let cpu = |text: &str| sample(text, "process_cpu_seconds_total");
    let first = cpu(&text);
    let later = scrape_until(metrics, "CPU time counted", |later| cpu(later) > first).await;
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        cpu(&later) <= (now - started + 1.0) * cores,
        "{} s of CPU in {} s on {cores} cores",
        cpu(&later),
        now - started
    );
}

/// What the server holds, per server: `onesided_worlds`, `onesided_windows` and
/// `onesided_window_bytes` go up as a world and its windows are created and back down as
/// they are freed (by the admin, by their ranks) and the world is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worlds_windows_and_window_bytes_follow_creation_and_deletion() {
    let held = |text: &str| {
        (
            sample(text, "onesided_worlds"),
            sample(text, "onesided_windows"),
            sample(text, "onesided_window_bytes"),
        )
    };
    let (server, metrics) = server_with_metrics().await;
    let text = scrape(metrics).await;
    assert_eq!(held(&text), (0.0, 0.0, 0.0), "a fresh server holds nothing");
    assert_eq!(
        sample(&text, "onesided_window_limit_bytes"),
        onesided_server::limits::Limits::default().max_window_bytes as f64
    );

    let fixture = Fixture::on(server, 2).await;
    assert_eq!(held(&scrape(metrics).await), (1.0, 0.0, 0.0));
    // 2 ranks of 4 i64 (64 bytes), 2 ranks of 3 i32 (24 bytes)
    let admin = &fixture.server.admin;
    let big = unique("big");
    admin
        .create_window(&fixture.world, &WindowSpec::of::<i64>(&big, 2, 4))
        .await
        .unwrap();
    let small = fixture
        .window(WindowSpec::of::<i32>(&unique("small"), 2, 3))
        .await;
    assert_eq!(held(&scrape(metrics).await), (1.0, 2.0, 88.0));

    // a second world counts on its own
    let other = unique("other");
    admin.create_world(&other, 1).await.unwrap();
    admin
        .create_window(&other, &WindowSpec::of::<u8>(&unique("w"), 1, 10))
        .await
        .unwrap();
    assert_eq!(held(&scrape(metrics).await), (2.0, 3.0, 98.0));

    admin.free_window(&fixture.world, &big).await.unwrap();
    assert_eq!(held(&scrape(metrics).await), (2.0, 2.0, 34.0));
    // freed by its ranks (MPI_Win_free): gone once the last rank's free is answered
    crate::ranks(small, |_, w| async move { w.free().await.unwrap() }).await;
    let text = scrape_until(metrics, "the ranks' free", |text| {
        sample(text, "onesided_windows") == 1.0
    })
    .await;
    assert_eq!(held(&text), (2.0, 1.0, 10.0));
    admin.delete_world(&other).await.unwrap();
    assert_eq!(held(&scrape(metrics).await), (1.0, 0.0, 0.0));
}

/// The metric families of `README.md`'s "Metrics" table: the first cell's name of each row,
/// without its labels.
fn readme_families() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let section = readme
        .split("\n## ")
        .find(|section| section.starts_with("Metrics\n"))
        .expect("README.md has a Metrics section");
    section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .map(|cell| {
            let name = cell.split('`').next().unwrap();
            name.split('{').next().unwrap().to_string()
        })
        .collect()
}

/// README, "Metrics": its table names every metric family a server exports (`# TYPE`), and
/// nothing it does not. Scraped after a refused call, so that the families whose series
/// appear only once they happen (the error counts) are there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_table_names_every_exported_family() {
    let (server, metrics) = server_with_metrics().await;
    let fixture = Fixture::on(server, 1).await;
    let refused = fixture.sessions[0].window("no-such-window").await;
    assert_eq!(refused.unwrap_err().class(), Some(ErrorClass::Win));
    let text = scrape(metrics).await;
    let exported: Vec<String> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .map(|rest| rest.split(' ').next().unwrap().to_string())
        .collect();
    assert!(exported.len() >= 20, "{exported:?}");
    let documented = readme_families();
    for family in &exported {
        assert!(
            documented.contains(family),
            "{family} is exported but missing from README.md's metrics table"
        );
    }
    for family in &documented {
        assert!(
            exported.contains(family),
            "README.md's metrics table names {family}, which the server does not export"
        );
    }
}
