//! The web view (`--http-listen`): its answers over plain HTTP (the token check, unknown
//! worlds and windows, `/metrics` beside it), and the page itself in headless Chromium while
//! real clients contend for a lock.
//!
//! The browser test needs Debian's `chromium` and `chromium-driver`; without them it fails
//! saying which package is missing (`.ci/run` installs both).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use onesided_client::WindowSpec;
use onesided_server::http::HttpListener;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{spawn_server_with, unique, Fixture, TestServer, ADMIN_TOKEN};

/// A server with its web view on a free port, and that port's address.
async fn server_with_web_view() -> (TestServer, SocketAddr) {
    let listener = HttpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = listener.local_addr();
    let server = spawn_server_with(|config| config.http = Some(listener)).await;
    (server, address)
}

/// A world of `nranks` on a server with the web view ([`server_with_web_view`]), and a window
/// of `count` `i64`s a rank open on every rank: the fixture, the web view's address, the
/// window's name and its handles.
async fn a_window_with_web_view(
    nranks: u32,
    count: u64,
) -> (Fixture, SocketAddr, String, Vec<onesided_client::Window>) {
    let (server, web) = server_with_web_view().await;
    let fixture = Fixture::on(server, nranks).await;
    let window = unique("w");
    let windows = fixture
        .window(WindowSpec::of::<i64>(&window, nranks, count))
        .await;
    (fixture, web, window, windows)
}

/// An HTTP answer: status, headers (lowercase names) and body.
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// Asserts that `answer`'s body contains `text`.
fn says(answer: &Answer, text: &str) {
    assert!(answer.body.contains(text), "{}", answer.body);
}

/// `GET path` with `authorization` as the Authorization header (if any).
pub async fn get(address: SocketAddr, path: &str, authorization: Option<&str>) -> Answer {
    send(address, "GET", path, authorization).await
}

/// `METHOD path` (no body) with `authorization` as the Authorization header (if any).
pub async fn send(
    address: SocketAddr,
    method: &str,
    path: &str,
    authorization: Option<&str>,
) -> Answer {
    let response = tokio::time::timeout(Duration::from_secs(10), async {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let header = authorization
            .map(|value| format!("Authorization: {value}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {address}\r\n{header}Content-Length: 0\r\n\
             Connection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    })
    .await
    .unwrap_or_else(|_| panic!("{method} {path} from {address}: no answer within 10 s"));
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    Answer {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_string(),
    }
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// Issue 43, item 16 (promises no test held): the web view answers only GET — whatever else
/// is refused with 405 and `Allow: GET`, the admin token notwithstanding — and its page loads
/// nothing from anywhere but the server: no address outside it in the page, its script or its
/// style, and a Content-Security-Policy that would stop one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_answers_only_get_and_loads_nothing_from_elsewhere() {
    let (_server, address) = server_with_web_view().await;
    let admin = bearer(ADMIN_TOKEN);
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        for path in ["/", "/api/worlds"] {
            let answer = send(address, method, path, Some(&admin)).await;
            assert_eq!(answer.status, 405, "{method} {path}: {}", answer.body);
            assert!(answer.head.contains("allow: get"), "{}", answer.head);
        }
    }
    for asset in ["/", "/app.js", "/style.css"] {
        let answer = get(address, asset, None).await;
        assert_eq!(answer.status, 200, "{asset}");
        assert!(
            answer
                .head
                .contains("content-security-policy: default-src 'self';"),
            "{asset}: {}",
            answer.head
        );
        // the one absolute URL is the SVG namespace, a name that is never fetched
        let elsewhere: Vec<&str> = answer
            .body
            .lines()
            .filter(|line| {
                ["http://", "https://", "\"//", "'//", "(//"]
                    .iter()
                    .any(|address| line.contains(address))
                    && !line.contains("\"http://www.w3.org/2000/svg\"")
            })
            .collect();
        assert!(elsewhere.is_empty(), "{asset} names {elsewhere:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_answers_only_the_admin_token_and_names_what_is_missing() {
    let (fixture, web, window, _) = a_window_with_web_view(2, 4).await;
    let admin = bearer(ADMIN_TOKEN);

    // the page itself carries no data and needs no token
    let page = get(web, "/", None).await;
    assert_eq!(page.status, 200);
    assert!(
        page.head.contains("content-type: text/html"),
        "{}",
        page.head
    );
    says(&page, "Admin token");
    // metrics share the listener, without a token as on --metrics-listen
    let metrics = get(web, "/metrics", None).await;
    assert_eq!(metrics.status, 200);
    says(&metrics, "onesided_sessions_attached 2");

    let missing = get(web, "/api/state", None).await;
    assert_eq!(missing.status, 401, "{}", missing.body);
    says(&missing, "missing Authorization header");
    assert!(
        missing.head.contains("www-authenticate: bearer"),
        "{}",
        missing.head
    );
    let malformed = get(web, "/api/state", Some(ADMIN_TOKEN)).await;
    assert_eq!(malformed.status, 401);
    says(&malformed, "must be `Bearer <admin token>`");
    let wrong = get(web, "/api/state", Some(&bearer("not-the-admin-token"))).await;
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.body.trim(), "invalid admin token");
    assert!(!wrong.body.contains(ADMIN_TOKEN));
    // a rank token is a credential, but not this one
    let rank = get(web, "/api/state", Some(&bearer(&fixture.tokens[0]))).await;
    assert_eq!(rank.status, 403, "{}", rank.body);
    says(&rank, "rank token");

    let state = get(web, "/api/state", Some(&admin)).await;
    assert_eq!(state.status, 200, "{}", state.body);
    let state: Value = serde_json::from_str(&state.body).unwrap();
    let world = state["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|world| world["name"] == fixture.world.as_str())
        .unwrap_or_else(|| panic!("world {} missing from {state}", fixture.world));
    assert_eq!(world["ranks"][1]["session"], "attached", "{world}");
    assert_eq!(world["windows"][0]["name"], window.as_str());
    assert_eq!(world["windows"][0]["sizes"], serde_json::json!([32, 32]));

    let path = format!("/api/worlds/{}/windows/{window}", fixture.world);
    let found = get(web, &path, Some(&admin)).await;
    assert_eq!(found.status, 200, "{}", found.body);
    let found: Value = serde_json::from_str(&found.body).unwrap();
    assert_eq!(found["targets"].as_array().unwrap().len(), 2, "{found}");

    let no_world = get(web, "/api/worlds/nowhere/windows/w", Some(&admin)).await;
    assert_eq!(no_world.status, 404);
    assert_eq!(no_world.body.trim(), "no world \"nowhere\"");
    let no_window = format!("/api/worlds/{}/windows/missing", fixture.world);
    let answer = get(web, &no_window, Some(&admin)).await;
    assert_eq!(answer.status, 404);
    says(&answer, "no window \"missing\"");
    let answer = get(web, &format!("{no_window}/timeline"), Some(&admin)).await;
    assert_eq!(answer.status, 404, "{}", answer.body);
    let answer = get(
        web,
        &format!("/api/stream?world={}&window=missing", fixture.world),
        Some(&admin),
    )
    .await;
    assert_eq!(answer.status, 404, "{}", answer.body);
    let answer = get(web, "/api/nothing", Some(&admin)).await;
    assert_eq!(answer.status, 404);
    let answer = get(web, "/nothing", None).await;
    assert_eq!(answer.status, 404);
    says(&answer, "the web view is at /");
    // the unknown-path answers never required or echoed a token; an unauthenticated call to
    // an unknown API path is refused for the token first
    let answer = get(web, "/api/nothing", None).await;
    assert_eq!(answer.status, 401);
}

/// chromedriver on a free port, stopped when dropped.
struct Chromedriver {
    child: std::process::Child,
    url: String,
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a program is on PATH.
fn on_path(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|path| path.is_file())
    })
}

async fn chromedriver() -> Chromedriver {
    let driver = on_path("chromedriver").unwrap_or_else(|| {
        panic!(
            "chromedriver is not on PATH: install Debian's `chromium-driver` package \
             (apt-get install chromium chromium-driver); .ci/run does"
        )
    });
    assert!(
        on_path("chromium").is_some(),
        "chromium is not on PATH: install Debian's `chromium` package (apt-get install \
         chromium chromium-driver); .ci/run does"
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let driver = Chromedriver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "chromedriver did not listen on port {port} within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    driver
}

async fn browser(driver: &Chromedriver) -> fantoccini::Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_string(),
        serde_json::json!({
            "binary": on_path("chromium").unwrap(),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1300,1100"],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    fantoccini::ClientBuilder::new(connector)
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("chromedriver starts a headless chromium session")
}

/// Evaluates `script` (a function body returning a value) in the page until `done` accepts
/// what it returns, for at most 20 s; panics naming `what` and the last value otherwise.
async fn until(
    page: &fantoccini::Client,
    what: &str,
    script: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let value = || async { page.execute(script, Vec::new()).await.unwrap() };
    let otherwise =
        |value: &Value| format!("the page never showed {what} within 20 s; last saw {value}");
    let (within, pause) = (Duration::from_secs(20), Duration::from_millis(50));
    crate::poll_until(within, pause, value, done, otherwise).await
}

/// [`until`] `script` evaluates to a text that contains `text`.
async fn until_text(page: &fantoccini::Client, what: &str, script: &str, text: &str) {
    let contains = |value: &Value| value.as_str().is_some_and(|shown| shown.contains(text));
    until(page, what, script, contains).await;
}

/// [`until`] the origins of the audit events of `kind` listed on the page satisfy `done`.
async fn until_origins(
    page: &fantoccini::Client,
    what: &str,
    kind: &str,
    done: impl Fn(&[Value]) -> bool,
) {
    let script = format!(
        "return [...document.querySelectorAll('#events tr[data-kind=\"{kind}\"]')].map(r => r.dataset.origin);"
    );
    let listed = |value: &Value| value.as_array().is_some_and(|origins| done(origins));
    until(page, what, &script, listed).await;
}

/// [`until`] the lock slices of the timeline ([`UNCLOSED_LOCK_SLICES`]) satisfy `done`.
async fn until_slices(page: &fantoccini::Client, what: &str, done: impl Fn(&[Value]) -> bool) {
    let drawn = |value: &Value| done(value.as_array().unwrap());
    until(page, what, UNCLOSED_LOCK_SLICES, drawn).await;
}

fn cell(rank: u32, class: &str) -> String {
    format!(
        "const cell = document.querySelector('#targets tbody tr[data-rank=\"{rank}\"] td.{class}'); \
         return cell ? cell.textContent : null;"
    )
}

const UNCLOSED_LOCK_SLICES: &str = "return [...document.querySelectorAll('#timeline rect.slice')]\
    .filter(r => r.dataset.name === 'lock 0')\
    .map(r => r.dataset.tid + ':' + r.dataset.unclosed);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_lock_queue_and_the_timeline_change_in_chromium() {
    let driver = chromedriver().await;
    let (mut fixture, web, window, windows) = a_window_with_web_view(2, 4).await;
    let page = browser(&driver).await;

    page.goto(&format!("http://{web}/")).await.unwrap();
    let token = page.find(fantoccini::Locator::Id("token")).await.unwrap();
    token.send_keys(ADMIN_TOKEN).await.unwrap();
    page.find(fantoccini::Locator::Id("connect"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let link = format!(
        "a.window-link[data-world=\"{}\"][data-window=\"{window}\"]",
        fixture.world
    );
    // the list is redrawn as the state changes: find and click in one step, as a user's
    // click is
    until(&page, "the window in the page after the token was entered", &format!(
        "const link = document.querySelector('{link}'); if (link) link.click(); return link !== null;"
    ), |value| value == true)
    .await;
    until(
        &page,
        "both ranks attached",
        &format!(
        "return [...document.querySelectorAll('.world[data-world=\"{}\"] td.attached')].length;",
        fixture.world
    ),
        |value| value == 2,
    )
    .await;

    // rank 0 holds the exclusive lock of its own rank; rank 1 asks for it and waits
    let (holder, waited) = crate::rank_1_waiting_for_rank_0(windows).await;
    for (what, class, text) in [
        ("rank 0 holding the lock", "holders", "rank 0 exclusive"),
        (
            "rank 1 in rank 0's lock queue",
            "waiters",
            "rank 1 exclusive",
        ),
        (
            "rank 1's put pending at rank 0",
            "pending",
            "from rank 1: put (under lock)",
        ),
    ] {
        until_text(&page, what, &cell(0, class), text).await;
    }
    let what = "rank 1's lock request in the audit events";
    until_origins(&page, what, "lock_request", |origins| {
        origins.iter().any(|origin| origin == "1")
    })
    .await;
    // the timeline draws rank 0's lock epoch as still open
    let what = "rank 0's open lock epoch in the timeline";
    until_slices(&page, what, |slices| {
        slices.iter().any(|slice| slice == "0:true")
    })
    .await;
    // docs/web-view.png is this moment: ONESIDED_WEB_SCREENSHOT=docs/web-view.png
    if let Some(path) = std::env::var_os("ONESIDED_WEB_SCREENSHOT") {
        std::fs::write(path, page.screenshot().await.unwrap()).unwrap();
    }
    let before = page
        .execute(UNCLOSED_LOCK_SLICES, Vec::new())
        .await
        .unwrap();
    assert!(
        !before
            .as_array()
            .unwrap()
            .iter()
            .any(|slice| slice == "1:false"),
        "rank 1 cannot have held the lock yet: {before}"
    );

    holder.unlock(0).await.unwrap();
    let waiter = waited.await.unwrap();
    // both close their sessions: the returns of their last calls reach the log
    drop((holder, waiter));
    for session in std::mem::take(&mut fixture.sessions) {
        session.close().await.unwrap();
    }
    until(&page, "the queue emptied", &cell(0, "waiters"), |value| {
        value == "–"
    })
    .await;
    let what = "the lock released in the audit events";
    until_origins(&page, what, "lock_release", |origins| {
        origins.iter().any(|origin| origin == "0") && origins.iter().any(|origin| origin == "1")
    })
    .await;
    until_slices(&page, "both lock epochs closed in the timeline", |slices| {
        slices.iter().any(|slice| slice == "0:false")
            && slices.iter().any(|slice| slice == "1:false")
    })
    .await;
    page.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_stream_sends_state_and_events_and_ends_when_the_server_stops() {
    let (fixture, web, window, _) = a_window_with_web_view(1, 1).await;
    let mut stream = tokio::net::TcpStream::connect(web).await.unwrap();
    let request = format!(
        "GET /api/stream?world={}&window={window} HTTP/1.1\r\nHost: {web}\r\n\
         Authorization: Bearer {ADMIN_TOKEN}\r\n\r\n",
        fixture.world
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut seen = String::new();
    let mut buffer = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(10);
    // the window's past events, then its state with the rank's target
    while !(seen.contains("event: audit") && seen.contains("\"targets\"")) {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let read = tokio::time::timeout(remaining, stream.read(&mut buffer))
            .await
            .unwrap_or_else(|_| panic!("no state and audit events within 10 s: {seen}"))
            .unwrap();
        assert!(read > 0, "the stream ended early: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buffer[..read]));
    }
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen
        .to_ascii_lowercase()
        .contains("content-type: text/event-stream"));
    assert!(seen.contains("\"kind\":\"window_created\""), "{seen}");
    assert!(!seen.contains(ADMIN_TOKEN), "the token is never echoed");

    // a stopping server ends the stream instead of waiting for the page to close it
    drop(fixture);
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while stream.read(&mut buffer).await.unwrap_or(0) > 0 {}
    })
    .await;
    assert!(ended.is_ok(), "the stream outlived the server by 10 s");
}
