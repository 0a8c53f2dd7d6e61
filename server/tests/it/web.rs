//! The web view (`--http-listen`): its answers over plain HTTP (the token check, unknown
//! worlds and windows, `/metrics` beside it), and the page itself in headless Chromium while
//! real clients contend for a lock, and drawing a schedule `onesided explore` ran.
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
    server_with_web_view_and(|_| {}).await
}

/// [`server_with_web_view`], its configuration adjusted by `adjust`.
async fn server_with_web_view_and(
    adjust: impl FnOnce(&mut onesided_server::ServerConfig),
) -> (TestServer, SocketAddr) {
    let listener = HttpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = listener.local_addr();
    let server = spawn_server_with(|config| {
        config.http = Some(listener);
        adjust(config);
    })
    .await;
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
/// is refused with 405 and `Allow: GET`, the admin token notwithstanding, but for its two
/// admin actions, which answer only POST, and only with the token — and its page loads
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
    for action in [
        "/api/worlds/w/ranks/0/end-session",
        "/api/worlds/w/windows/x/ranks/0/revoke-locks",
    ] {
        for method in ["GET", "PUT", "DELETE"] {
            let answer = send(address, method, action, Some(&admin)).await;
            assert_eq!(answer.status, 405, "{method} {action}: {}", answer.body);
            assert!(answer.head.contains("allow: post"), "{}", answer.head);
        }
        let answer = send(address, "POST", action, None).await;
        assert_eq!(answer.status, 401, "POST {action}: {}", answer.body);
        let answer = send(address, "POST", action, Some("Bearer not-the-token")).await;
        assert_eq!(answer.status, 401, "POST {action}: {}", answer.body);
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

    assert_eq!(
        state["server"]["version"],
        env!("CARGO_PKG_VERSION"),
        "{state}"
    );
    assert!(state["server"]["uptime_s"].is_u64(), "{state}");
    assert!(state["server"]["node"].is_null(), "not clustered: {state}");

    // a page of a rank's public copy, decoded as the window's element type
    let contents = format!("/api/worlds/{}/windows/{window}/contents", fixture.world);
    let page = get(web, &format!("{contents}?rank=1"), Some(&admin)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let page: Value = serde_json::from_str(&page.body).unwrap();
    assert_eq!(page["element_type"], "i64", "{page}");
    assert_eq!(page["elements"], 4, "{page}");
    assert_eq!(page["values"], serde_json::json!(["0", "0", "0", "0"]));
    let page = get(
        web,
        &format!("{contents}?rank=0&from=3&count=5"),
        Some(&admin),
    )
    .await;
    let page: Value = serde_json::from_str(&page.body).unwrap();
    assert_eq!(
        (
            page["from"].clone(),
            page["values"].as_array().map(Vec::len)
        ),
        (3.into(), Some(1))
    );
    for (query, status, text) in [
        ("", 400, "name the rank: rank="),
        ("?rank=two", 400, "rank= takes a whole number, not \"two\""),
        ("?rank=2", 404, "no rank 2 in window"),
        ("?rank=0&count=0", 400, "count= must be 1 to 4096, not 0"),
        (
            "?rank=0&count=4097",
            400,
            "count= must be 1 to 4096, not 4097",
        ),
        ("?rank=0&page=1", 400, "unknown query parameter \"page=1\""),
    ] {
        let answer = get(web, &format!("{contents}{query}"), Some(&admin)).await;
        assert_eq!(answer.status, status, "{query}: {}", answer.body);
        says(&answer, text);
    }

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

/// Opens the page of the web view at `web` and enters the admin token, as a user does.
async fn log_in(page: &fantoccini::Client, web: SocketAddr) {
    page.goto(&format!("http://{web}/")).await.unwrap();
    let token = page.find(fantoccini::Locator::Id("token")).await.unwrap();
    token.send_keys(ADMIN_TOKEN).await.unwrap();
    page.find(fantoccini::Locator::Id("connect"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// Clicks window `window` of world `world` in the page's list once it is there. The list is
/// redrawn as the state changes: found and clicked in one step, as a user's click is.
async fn click_window(page: &fantoccini::Client, world: &str, window: &str) {
    let link = format!("a.window-link[data-world=\"{world}\"][data-window=\"{window}\"]");
    let script = format!(
        "const link = document.querySelector('{link}'); if (link) link.click(); \
         return link !== null;"
    );
    until(page, "the window in the page", &script, |value| {
        value == true
    })
    .await;
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

/// [`until`] the lock slices of the timeline ([`UNCLOSED_LOCK_SLICES`]: held, not waited
/// for) satisfy `done`.
async fn until_slices(page: &fantoccini::Client, what: &str, done: impl Fn(&[Value]) -> bool) {
    let drawn = |value: &Value| done(value.as_array().unwrap());
    until(page, what, UNCLOSED_LOCK_SLICES, drawn).await;
}

/// The events table's rows once the filters are set to `rank`, `call`, `class` and `text`, as
/// `rank:origin:kind:call` (or, with `text`, the details of the matching rows).
fn filtered(rank: &str, call: &str, class: &str, text: &str) -> String {
    format!(
        "for (const [id, value] of [['filter-rank', '{rank}'], ['filter-call', '{call}'], \
           ['filter-class', '{class}'], ['filter-text', '{text}']]) {{ \
           const input = document.getElementById(id); input.value = value; \
           input.dispatchEvent(new Event('input')); }} \
         const rows = [...document.querySelectorAll('#events tbody tr')]; \
         return '{text}' ? rows.map(r => r.querySelector('td.details').textContent).join('\\n') \
           : rows.map(r => [r.dataset.rank, r.dataset.origin, r.dataset.kind, r.dataset.call].join(':'));"
    )
}

/// The lock bars of the timeline: `tid:state:unclosed` (state `waiting` or `holding`).
const LOCK_STATES: &str = "return [...document.querySelectorAll('#timeline rect.slice')]\
    .filter(r => r.dataset.name === 'lock 0')\
    .map(r => [r.dataset.tid, r.dataset.state, r.dataset.unclosed].join(':'));";

/// The timeline's axis ticks (how many, the first label), its bar labels (how many), the
/// pairs of labels that overlap and the labels cut by the edge of the drawing.
const TIMELINE_AXIS_AND_LABELS: &str = "const svg = document.querySelector('#timeline svg'); \
    const ticks = [...svg.querySelectorAll('.axis text.tick-label')]; \
    const labels = [...svg.querySelectorAll('text.slice-label')]; \
    const box = (t) => t.getBBox(); \
    const overlapping = []; \
    for (let i = 0; i < labels.length; i++) for (let j = i + 1; j < labels.length; j++) { \
      const a = box(labels[i]), b = box(labels[j]); \
      if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height) \
        overlapping.push(labels[i].textContent + ' / ' + labels[j].textContent); } \
    const width = svg.width.baseVal.value; \
    const cut = labels.filter(t => box(t).x + box(t).width > width).map(t => t.textContent); \
    return {ticks: ticks.length, first: ticks.length ? ticks[0].textContent : null, \
      labels: labels.length, overlapping, cut};";

/// How many audit rows there are, and those whose time is not a wall-clock `HH:MM:SS.mmm`
/// within a minute of the browser's clock.
const AUDIT_TIMES: &str = "const rows = [...document.querySelectorAll('#events tbody tr')]; \
    const bad = rows.map(r => r.querySelector('td.time')).filter(td => \
      !/^\\d\\d:\\d\\d:\\d\\d\\.\\d{3}$/.test(td.textContent) || \
      Math.abs(Date.parse(td.title) - Date.now()) > 60000).map(td => td.textContent + ' ' + td.title); \
    return {rows: rows.length, bad};";

/// The first row of the contents table: its index, then its first four values.
const CONTENTS: &str = "const row = document.querySelector('#contents tbody tr'); \
    return row ? [...row.children].slice(0, 5).map(td => td.textContent) : null;";

/// With `ONESIDED_WEB_SCREENSHOTS=DIR`, the page as it is now in `DIR/name` (PNG), scrolled to
/// the heading `heading` when one is named.
async fn screenshot(page: &fantoccini::Client, name: &str, heading: Option<&str>) {
    let Some(dir) = std::env::var_os("ONESIDED_WEB_SCREENSHOTS") else {
        return;
    };
    let scroll = match heading {
        Some(heading) => format!(
            "[...document.querySelectorAll('h3, h2')].find(h => h.textContent === '{heading}')\
             .scrollIntoView();"
        ),
        None => "window.scrollTo(0, 0);".to_string(),
    };
    page.execute(&scroll, Vec::new()).await.unwrap();
    let png = page.screenshot().await.unwrap();
    std::fs::write(std::path::Path::new(&dir).join(name), png).unwrap();
}

fn cell(rank: u32, class: &str) -> String {
    format!(
        "const cell = document.querySelector('#targets tbody tr[data-rank=\"{rank}\"] td.{class}'); \
         return cell ? cell.textContent : null;"
    )
}

const UNCLOSED_LOCK_SLICES: &str = "return [...document.querySelectorAll('#timeline rect.slice')]\
    .filter(r => r.dataset.name === 'lock 0' && r.dataset.state !== 'waiting')\
    .map(r => r.dataset.tid + ':' + r.dataset.unclosed);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_lock_queue_and_the_timeline_change_in_chromium() {
    let driver = chromedriver().await;
    let (mut fixture, web, window, windows) = a_window_with_web_view(2, 4).await;
    let page = browser(&driver).await;

    log_in(&page, web).await;
    // the header names the server's version and node, and counts its uptime
    let info = "return document.getElementById('server-info').textContent;";
    let version = format!("v{} · node standalone · up ", env!("CARGO_PKG_VERSION"));
    until_text(
        &page,
        "the server's version, node and uptime",
        info,
        &version,
    )
    .await;
    // the token is kept for the tab's session: a reload stays connected, without the form
    page.refresh().await.unwrap();
    until(
        &page,
        "the view again after a reload, without the token asked for",
        "return [document.getElementById('login').hidden, \
         document.getElementById('view').hidden, \
         document.querySelectorAll('.world').length > 0];",
        |value| value == &serde_json::json!([true, false, true]),
    )
    .await;
    click_window(&page, &fixture.world, &window).await;
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
    // rank 1 waits for the lock rank 0 holds: drawn differently, on a time axis, every
    // label whole and clear of the others
    until(
        &page,
        "rank 1 waiting and rank 0 holding in the timeline",
        LOCK_STATES,
        |value| {
            let states = value.as_array().unwrap();
            states.contains(&"1:waiting:true".into())
                && states.contains(&"0:holding:true".into())
                && !states.iter().any(|state| state == "1:holding:true")
        },
    )
    .await;
    let axis = page
        .execute(TIMELINE_AXIS_AND_LABELS, Vec::new())
        .await
        .unwrap();
    assert!(axis["ticks"].as_u64().unwrap() >= 2, "{axis}");
    assert_eq!(axis["first"], "0 µs", "{axis}");
    assert!(axis["labels"].as_u64().unwrap() >= 2, "{axis}");
    assert_eq!(axis["overlapping"], serde_json::json!([]), "{axis}");
    assert_eq!(axis["cut"], serde_json::json!([]), "{axis}");
    // the audit rows: wall-clock time, and the put's value decoded as the window's i64
    until(
        &page,
        "audit rows with their wall-clock time",
        AUDIT_TIMES,
        |value| value["rows"].as_u64() > Some(0) && value["bad"] == serde_json::json!([]),
    )
    .await;
    // the events filtered by rank, call and class
    let lock_events_of_1 = filtered("1", "", "lock", "");
    let rows = until(
        &page,
        "rank 1's lock events alone",
        &lock_events_of_1,
        |value| {
            value
                .as_array()
                .is_some_and(|rows| rows.iter().any(|row| row == "1::issued:lock"))
        },
    )
    .await;
    for row in rows.as_array().unwrap() {
        let row = row.as_str().unwrap();
        let (rank, rest) = row.split_once(':').unwrap();
        let (origin, rest) = rest.split_once(':').unwrap();
        assert!(
            rank == "1" || origin == "1",
            "not rank 1's: {row} in {rows}"
        );
        let kind = rest.split(':').next().unwrap();
        assert!(
            [
                "lock_request",
                "lock_grant",
                "lock_release",
                "issued",
                "returned"
            ]
            .contains(&kind),
            "not a lock event: {row} in {rows}"
        );
    }
    let none = page
        .execute(&filtered("1", "fence", "", ""), Vec::new())
        .await
        .unwrap();
    assert_eq!(none, serde_json::json!([]), "rank 1 called no fence");
    page.execute(&filtered("", "", "", ""), Vec::new())
        .await
        .unwrap();
    // docs/web-view.png is this moment: ONESIDED_WEB_SCREENSHOTS=$PWD/docs (README)
    screenshot(&page, "web-view.png", None).await;
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
    let what = "rank 1's put applied, its value decoded in the audit events";
    until_text(
        &page,
        what,
        &filtered("", "put", "operation", "from rank 1"),
        "data [7]",
    )
    .await;
    // rank 0's public copy holds the 7 rank 1 put at element 0
    until(&page, "the 7 in rank 0's contents", CONTENTS, |value| {
        value == &serde_json::json!(["0", "7", "0", "0", "0"])
    })
    .await;
    // docs/web-view-events.png: the contents, and rank 1's operations found in the events
    page.execute(&filtered("1", "", "operation", ""), Vec::new())
        .await
        .unwrap();
    screenshot(&page, "web-view-events.png", Some("Contents")).await;
    page.execute(&filtered("", "", "", ""), Vec::new())
        .await
        .unwrap();
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
    until(
        &page,
        "rank 1's wait, then its hold, in the timeline",
        LOCK_STATES,
        |value| {
            let states = value.as_array().unwrap();
            states.contains(&"1:waiting:false".into()) && states.contains(&"1:holding:false".into())
        },
    )
    .await;
    // both ranks closed their sessions: a clean departure, said as one
    until_text(
        &page,
        "rank 1 left, at rank 0",
        &cell(0, "departed"),
        "rank 1 left",
    )
    .await;
    for rank in [0, 1] {
        let departed = page
            .execute(&cell(rank, "departed"), Vec::new())
            .await
            .unwrap();
        let departed = departed.as_str().unwrap();
        assert!(
            !departed.contains("absent") && !departed.contains("broke"),
            "a clean departure shown as a failure at rank {rank}: {departed}"
        );
    }
    let broken = page
        .execute(
            "return document.querySelectorAll('#targets .broken').length;",
            Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(broken, 0);
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
    assert!(seen.contains("\"wall_ms\":"), "{seen}");
    assert!(!seen.contains(ADMIN_TOKEN), "the token is never echoed");

    // a stopping server ends the stream instead of waiting for the page to close it
    drop(fixture);
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while stream.read(&mut buffer).await.unwrap_or(0) > 0 {}
    })
    .await;
    assert!(ended.is_ok(), "the stream outlived the server by 10 s");
}

/// Issue 44, item 6: the cluster page. Two nodes over one PostgreSQL, each with its web view:
/// `/api/cluster` names both, alive, and the one node that serves the world (as the Admin
/// API's `ClusterStatus` says); the page of the other node shows the same, and its own name
/// in the header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_page_names_every_node_and_who_serves_which_world() {
    use onesided_test_support::free_port;
    let database = crate::store::PgDatabase::create().await;
    let mut nodes = Vec::new();
    for id in ["web-a", "web-b"] {
        let data = crate::TempDir::new();
        let (port, http) = (free_port(), free_port());
        let url = format!("http://127.0.0.1:{port}");
        let web = format!("127.0.0.1:{http}");
        let extra = ["--node-id", id, "--advertise", &url, "--http-listen", &web];
        let log = "onesided_server=info";
        let listen = format!("127.0.0.1:{port}");
        let mut command =
            crate::server_binary::command(crate::SERVER_BINARY, &listen, &data.0, &extra, log);
        command
            .args(["--admin-token", ADMIN_TOKEN])
            .env("DATABASE_URL", &database.url);
        let process = crate::Launched::start(command, "address=", Duration::from_secs(60));
        nodes.push((id, url, web.parse::<SocketAddr>().unwrap(), process, data));
    }
    let admin = onesided_client::Admin::connect(nodes[0].1.as_str(), ADMIN_TOKEN)
        .await
        .unwrap();
    let world = unique("clustered");
    admin.create_world(&world, 2).await.unwrap();
    let status = admin.cluster_status().await.unwrap();
    let owner = status
        .nodes
        .iter()
        .find(|node| node.worlds.contains(&world))
        .unwrap_or_else(|| panic!("nobody serves {world}: {status:?}"))
        .node_id
        .clone();

    let answer = get(nodes[0].2, "/api/cluster", Some(&bearer(ADMIN_TOKEN))).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let cluster: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(cluster["node"], "web-a", "{cluster}");
    let listed = cluster["nodes"].as_array().unwrap();
    for (id, url, ..) in &nodes {
        let node = listed
            .iter()
            .find(|node| node["node"] == *id)
            .unwrap_or_else(|| panic!("{id} missing from {cluster}"));
        assert_eq!(node["advertise"], url.as_str(), "{cluster}");
        assert_eq!(node["lease"]["alive"], true, "{cluster}");
        let serves = node["worlds"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!({"name": world, "moving": false}));
        assert_eq!(serves, *id == owner, "{id}, owner {owner}: {cluster}");
    }
    // a server outside a cluster says so
    let (_standalone, web) = server_with_web_view().await;
    let answer = get(web, "/api/cluster", Some(&bearer(ADMIN_TOKEN))).await;
    assert_eq!(answer.body, r#"{"clustered":false,"node":null,"nodes":[]}"#);

    let driver = chromedriver().await;
    let page = browser(&driver).await;
    log_in(&page, nodes[1].2).await;
    let info = "return document.getElementById('server-info').textContent;";
    until_text(&page, "node web-b in the header", info, " · node web-b · ").await;
    let rows = "return [...document.querySelectorAll('#cluster tr[data-node]')]\
        .map(r => [...r.children].map(td => td.textContent).join('|'));";
    let rows = until(&page, "both nodes on the cluster page", rows, |value| {
        value.as_array().is_some_and(|rows| rows.len() == 2)
    })
    .await;
    for row in rows.as_array().unwrap() {
        let row = row.as_str().unwrap();
        let id = row.split([' ', '|']).next().unwrap();
        assert!(row.contains("|alive|"), "{row}");
        assert_eq!(row.contains(&world), id == owner, "{row}, owner {owner}");
        assert_eq!(row.contains("(this node)"), id == "web-b", "{row}");
    }
    page.close().await.unwrap();
}

/// Issue 44, item 6: a departure that is a failure still looks like one. Rank 0 attaches again
/// by hand (superseding its first session), opens the window and goes silent: its lease
/// lapses, and rank 1's target lists it in red, saying why — where a rank that closed its
/// session is listed as having left (the Chromium test above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_lease_is_shown_as_a_failure_in_chromium() {
    let driver = chromedriver().await;
    let lease = Duration::from_millis(1500);
    let (server, web) = server_with_web_view_and(|config| config.lease_ttl = lease).await;
    let fixture = Fixture::on(server, 2).await;
    let window = unique("w");
    let _windows = fixture.window(WindowSpec::of::<i64>(&window, 2, 1)).await;
    let page = browser(&driver).await;
    log_in(&page, web).await;
    click_window(&page, &fixture.world, &window).await;

    let mut grpc = crate::raw::raw(&fixture.server.url).await;
    let meta = crate::raw::Meta::bearer(&fixture.tokens[0]);
    let (mut silent, _) = crate::raw::RawSession::open(&mut grpc, &meta)
        .await
        .unwrap();
    silent.open_window(&window).await;
    let broken = "const cell = document.querySelector('#targets tbody tr[data-rank=\"1\"] td.departed .broken'); \
        return cell ? cell.textContent : null;";
    until_text(
        &page,
        "rank 0's lapsed lease, in red, at rank 1",
        broken,
        "rank 0 absent: lease lapsed",
    )
    .await;
    let left = page
        .execute(
            "return document.querySelectorAll('#targets .left').length;",
            Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(left, 0, "a lapsed lease is no clean departure");
    drop(silent);
    page.close().await.unwrap();
}

/// The state of the confirmation dialog: whether it is open, and what it asks.
const CONFIRM: &str = "const dialog = document.getElementById('confirm'); \
    return [dialog.open, document.getElementById('confirm-text').textContent];";

/// What the page says of the last admin action.
const ACTION_RESULT: &str = "const result = document.getElementById('action-result'); \
    return result.hidden ? null : result.textContent;";

/// Clicks the button `selector` once it is on the page (the tables are redrawn as the state
/// changes: found and clicked in one step), then waits for the confirmation to ask `question`.
async fn ask(page: &fantoccini::Client, what: &str, selector: &str, question: &str) {
    let script = format!(
        "const button = document.querySelector('{selector}'); if (button) button.click(); \
         return button !== null;"
    );
    until(page, what, &script, |value| value == true).await;
    until(page, "the confirmation", CONFIRM, |value| {
        value[0] == true
            && value[1]
                .as_str()
                .is_some_and(|text| text.contains(question))
    })
    .await;
}

async fn answer(page: &fantoccini::Client, button: &str) {
    let script = format!("document.getElementById('{button}').click(); return true;");
    page.execute(&script, Vec::new()).await.unwrap();
}

/// Issue 44, item 6 (i): the web view's admin actions, behind a confirmation, through the
/// Admin API, audited — revoking the lock a rank holds (the waiter gets it, the holder learns
/// at its next call) and ending a session — and their refusals shown as such.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_actions_behind_a_confirmation_revoke_a_lock_and_end_a_session_in_chromium() {
    let driver = chromedriver().await;
    let (fixture, web, window, windows) = a_window_with_web_view(2, 4).await;
    let world = fixture.world.clone();
    let page = browser(&driver).await;
    log_in(&page, web).await;
    click_window(&page, &world, &window).await;
    // rank 0 holds the exclusive lock of its own rank; rank 1 waits for it
    let (holder, waited) = crate::rank_1_waiting_for_rank_0(windows).await;
    until_text(
        &page,
        "rank 1 waiting",
        &cell(0, "waiters"),
        "rank 1 exclusive",
    )
    .await;

    let revoke = "#targets tbody tr[data-rank=\"0\"] td.holders button.revoke";
    let question = "Revoke the locks rank 0 holds on window";
    // cancelled: nothing happens
    ask(&page, "rank 0's revoke button", revoke, question).await;
    answer(&page, "confirm-no").await;
    until(&page, "the dialog closed", CONFIRM, |value| {
        value[0] == false
    })
    .await;
    assert_eq!(
        page.execute(ACTION_RESULT, Vec::new()).await.unwrap(),
        Value::Null,
        "a cancelled action did nothing"
    );
    until_text(
        &page,
        "rank 0 still holding",
        &cell(0, "holders"),
        "rank 0 exclusive",
    )
    .await;
    // confirmed: revoked, the result shown, the waiter granted
    ask(&page, "rank 0's revoke button", revoke, question).await;
    screenshot(&page, "web-view-admin.png", Some("Targets")).await;
    answer(&page, "confirm-yes").await;
    until_text(
        &page,
        "the revocation's result",
        ACTION_RESULT,
        &format!("revoked the locks of rank 0 (session 1) on window {window} at rank 0"),
    )
    .await;
    let waiter = tokio::time::timeout(Duration::from_secs(10), waited)
        .await
        .expect("the waiter was never granted")
        .unwrap();
    let error = holder.unlock(0).await.unwrap_err();
    assert_eq!(
        error.class(),
        Some(onesided_client::ErrorClass::RmaSync),
        "{error}"
    );
    until_text(
        &page,
        "the admin event in the audit rows",
        &filtered("", "", "admin", "revoked"),
        "(web view) revoked its locks (incarnation 1)",
    )
    .await;

    // a refusal is shown as one: rank 1 holds nothing now
    page.execute(
        &format!("revokeLocks('{world}', '{window}', 1); return true;"),
        Vec::new(),
    )
    .await
    .unwrap();
    answer(&page, "confirm-yes").await;
    until_text(
        &page,
        "the refusal",
        ACTION_RESULT,
        "refused: 409: MPI_ERR_RMA_SYNC",
    )
    .await;

    // ending rank 1's session
    let end = format!(".world[data-world=\"{world}\"] tr[data-rank=\"1\"] button.end-session");
    ask(
        &page,
        "rank 1's end-session button",
        &end,
        "End the session of rank 1",
    )
    .await;
    answer(&page, "confirm-yes").await;
    until_text(
        &page,
        "the ending's result",
        ACTION_RESULT,
        &format!("ended session 1 of rank 1 of world {world}"),
    )
    .await;
    let session = format!(
        "const cell = document.querySelector('.world[data-world=\"{world}\"] tr[data-rank=\"1\"] td:nth-child(2)'); \
         return cell ? cell.textContent : null;"
    );
    until(&page, "rank 1 no longer attached", &session, |value| {
        value.as_str().is_some_and(|text| text != "attached")
    })
    .await;
    until_text(
        &page,
        "the ending in the audit rows",
        &filtered("1", "", "admin", "ended"),
        "ended its session",
    )
    .await;
    let error = waiter.fence(0).await.unwrap_err();
    assert!(
        error.to_string().contains("an operator ended this session"),
        "{error}"
    );
    page.close().await.unwrap();
}

/// The admin actions over plain HTTP: each bad input its own status, naming the MPI class.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_actions_refuse_bad_input_with_its_own_status() {
    let (fixture, web, window, _windows) = a_window_with_web_view(2, 1).await;
    let admin = bearer(ADMIN_TOKEN);
    let world = &fixture.world;
    for (path, status, text) in [
        (
            "/api/worlds/nope/ranks/0/end-session",
            404,
            "no world named",
        ),
        (
            &format!("/api/worlds/{world}/ranks/two/end-session") as &str,
            400,
            "a rank is a whole number, not \"two\"",
        ),
        (
            &format!("/api/worlds/{world}/ranks/9/end-session"),
            400,
            "MPI_ERR_RANK",
        ),
        (
            &format!("/api/worlds/{world}/windows/nope/ranks/0/revoke-locks"),
            404,
            "MPI_ERR_WIN",
        ),
        (
            &format!("/api/worlds/{world}/windows/{window}/ranks/0/revoke-locks"),
            409,
            "MPI_ERR_RMA_SYNC",
        ),
    ] {
        let answer = send(web, "POST", path, Some(&admin)).await;
        assert_eq!(answer.status, status, "{path}: {}", answer.body);
        says(&answer, text);
    }
    let ended = send(
        web,
        "POST",
        &format!("/api/worlds/{world}/ranks/1/end-session"),
        Some(&admin),
    )
    .await;
    assert_eq!(ended.status, 200, "{}", ended.body);
    let ended: Value = serde_json::from_str(&ended.body).unwrap();
    assert_eq!(ended["incarnation"], 1, "{ended}");
}

/// A page past the first of a large window: the values where they are, the copy's length, and
/// the last page cut at its end (the actor copies out only the page's bytes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_a_large_windows_contents_is_the_page_asked_for() {
    const ELEMENTS: u64 = 1 << 20; // 8 MiB of i64 a rank
    let (fixture, web, window, windows) = a_window_with_web_view(2, ELEMENTS).await;
    let writer = &windows[1];
    writer
        .lock(onesided_client::LockType::Exclusive, 0, 0)
        .await
        .unwrap();
    writer.put(0, 700_000, &[1i64, 2, 3, 4]).unwrap();
    writer.put(0, ELEMENTS - 1, &[-9i64]).unwrap();
    writer.unlock(0).await.unwrap();
    let admin = bearer(ADMIN_TOKEN);
    let contents = format!("/api/worlds/{}/windows/{window}/contents", fixture.world);
    let page = |query: String| {
        let (path, admin) = (format!("{contents}?{query}"), admin.clone());
        async move {
            let answer = get(web, &path, Some(&admin)).await;
            assert_eq!(answer.status, 200, "{path}: {}", answer.body);
            serde_json::from_str::<Value>(&answer.body).unwrap()
        }
    };
    let middle = page("rank=0&from=699998&count=8".to_string()).await;
    assert_eq!(middle["from"], 699_998, "{middle}");
    assert_eq!(middle["elements"], ELEMENTS, "{middle}");
    assert_eq!(middle["bytes"], ELEMENTS * 8, "{middle}");
    assert_eq!(
        middle["values"],
        serde_json::json!(["0", "0", "1", "2", "3", "4", "0", "0"])
    );
    let last = page(format!("rank=0&from={}&count=64", ELEMENTS - 3)).await;
    assert_eq!(
        last["values"],
        serde_json::json!(["0", "0", "-9"]),
        "{last}"
    );
    let past = page(format!("rank=0&from={}&count=64", ELEMENTS + 10)).await;
    assert_eq!(past["values"], serde_json::json!([]), "{past}");
    assert_eq!(past["from"], ELEMENTS, "{past}");
    // rank 1's copy is untouched
    let other = page("rank=1&from=699998&count=8".to_string()).await;
    assert_eq!(other["values"], serde_json::json!(vec!["0"; 8]));
}

/// Issue 42: one schedule the explorer ran — the simulator's log of a window, exported as
/// `onesided explore FILE --replay S:K --trace T.json` writes it — opens in the page and is
/// drawn as a live window's timeline: a lane per rank, the lock epochs, the put's flow from
/// its issue to its application. A file that is not a trace says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explored_schedule_opens_in_the_page_as_a_live_timeline_in_chromium() {
    let driver = chromedriver().await;
    let (_server, web) = server_with_web_view().await;
    let text = "window W ranks=2 size=1 type=i64\n\
                A: lock exclusive B\nA: put B W[0] = 42\nA: unlock B\nbarrier\n\
                B: lock exclusive B\nB: load W[0] -> b\nB: unlock B\nexpect B b == 42\n";
    let scenario = onesided_scenario::parse(text).unwrap();
    let explorer = onesided_scenario::explore::Explorer::new(&scenario).unwrap();
    let (run, outcome) = explorer.run(4, 2);
    assert!(outcome.ok(), "{outcome:?}");
    let history = explorer.history(&run, "W").unwrap();
    let trace = onesided_core::export::perfetto(&history);
    let dir = onesided_test_support::TempDir::new();
    let file = dir.file("explored.json", &trace.to_string());
    let not_a_trace = dir.file("other.json", "{\"rows\": []}");

    let page = browser(&driver).await;
    log_in(&page, web).await;
    let input = page
        .find(fantoccini::Locator::Id("trace-file"))
        .await
        .unwrap();
    input.send_keys(&file.display().to_string()).await.unwrap();
    let drawn = "const svg = document.querySelector('#explored svg'); if (!svg) return null; \
        return [[...svg.querySelectorAll('text.lane')].map(t => t.textContent), \
                [...svg.querySelectorAll('rect.slice')].map(s => s.dataset.name + ':' + s.dataset.tid), \
                svg.querySelectorAll('line.flow').length];";
    let shown = until(&page, "the explored schedule's timeline", drawn, |value| {
        value.is_array()
    })
    .await;
    let lanes: Vec<&str> = shown[0]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(lanes, ["rank 0", "rank 1"], "{shown}");
    let slices: Vec<&str> = shown[1]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        slices.contains(&"lock 1:0") && slices.contains(&"lock 1:1"),
        "{shown}"
    );
    assert_eq!(shown[2], 1, "the put's flow: {shown}");
    screenshot(&page, "web-view-explored.png", Some("Explored trace")).await;
    // the live window's timeline is untouched
    let live = page
        .execute(
            "return document.getElementById('timeline').textContent;",
            Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(live, "no events yet");

    let input = page
        .find(fantoccini::Locator::Id("trace-file"))
        .await
        .unwrap();
    input
        .send_keys(&not_a_trace.display().to_string())
        .await
        .unwrap();
    let error =
        "const p = document.querySelector('#explored .error'); return p ? p.textContent : null;";
    until_text(
        &page,
        "the refusal of a file that is no trace",
        error,
        "other.json: not a Perfetto trace",
    )
    .await;
    page.close().await.unwrap();
}

/// Issue 44, item 6: deleting a world from the page, behind a confirmation, through the Admin
/// API: the world leaves the page, its sessions' calls fail, and its window's audit log ends
/// with the deletion naming the page as who asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_world_from_the_page_is_confirmed_and_audited_in_chromium() {
    let driver = chromedriver().await;
    let (fixture, web, _window, windows) = a_window_with_web_view(2, 1).await;
    let world = fixture.world.clone();
    let id = windows[0].desc().id;
    let page = browser(&driver).await;
    log_in(&page, web).await;
    let button = format!(".world[data-world=\"{world}\"] button.delete-world");
    let question = format!("Delete world {world}?");
    // cancelled: the world stays
    ask(&page, "the world's delete button", &button, &question).await;
    answer(&page, "confirm-no").await;
    until(&page, "the dialog closed", CONFIRM, |value| {
        value[0] == false
    })
    .await;
    let listed = || async {
        let worlds = fixture.server.admin.list_worlds().await.unwrap();
        worlds.iter().any(|w| w.name == world)
    };
    assert!(listed().await);
    // confirmed: gone from the server and from the page
    ask(&page, "the world's delete button", &button, &question).await;
    answer(&page, "confirm-yes").await;
    until_text(
        &page,
        "the deletion's result",
        ACTION_RESULT,
        &format!("deleted world {world}"),
    )
    .await;
    let shown =
        format!("return document.querySelector('.world[data-world=\"{world}\"]') !== null;");
    until(&page, "the world gone from the page", &shown, |value| {
        value == false
    })
    .await;
    assert!(!listed().await);
    let error = windows[0].fence(0).await.unwrap_err();
    assert!(error.class().is_some(), "{error}");
    let audit = onesided_client::Audit::connect(&fixture.server.url, ADMIN_TOKEN)
        .await
        .unwrap();
    let log = audit.events(id, 1).await.unwrap();
    let deletion = log.iter().find_map(|entry| match &entry.event {
        Some(onesided_core::audit::Event::Admin { action, by }) if action == "delete_world" => {
            Some(by.clone())
        }
        _ => None,
    });
    let by = deletion.unwrap_or_else(|| panic!("no deletion in {log:#?}"));
    assert!(by.ends_with("(web view)"), "{by}");
    // deleting it again: refused, and shown so
    page.execute(&format!("deleteWorld('{world}'); return true;"), Vec::new())
        .await
        .unwrap();
    answer(&page, "confirm-yes").await;
    until_text(&page, "the refusal", ACTION_RESULT, "refused: 404").await;
    page.close().await.unwrap();
}
