//! TLS: a server with `tls` set speaks only TLS; a client reaches it through an `https://`
//! endpoint with the CA that signed its certificate, and nothing else gets in. The CA and the
//! server's certificate are made afresh for each test (the test-support crate's `Pki`).

use onesided_client::{Admin, Audit, Claim, Endpoint, Error, LockType, Session, WindowSpec};
use onesided_server::tls::TlsIdentity;
use onesided_server::{run, ServerConfig};
use onesided_test_support::{in_process, Pki};
use tonic::Code;

use crate::{unique, TempDir, TestServer, ADMIN_TOKEN};

/// The server side of `pki`.
fn identity(pki: &Pki) -> TlsIdentity {
    TlsIdentity::from_pem(pki.cert_pem.clone(), pki.key_pem.clone()).unwrap()
}

/// A server serving TLS with `pki`'s certificate for `localhost`, and its `https://` URL.
async fn spawn_tls_server(pki: &Pki) -> TestServer {
    spawn_tls_server_with(pki, |_| {}).await
}

/// [`spawn_tls_server`] with a configuration `adjust` may change.
async fn spawn_tls_server_with(pki: &Pki, adjust: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-tls")));
    let mut config = ServerConfig {
        tls: Some(identity(pki)),
        ..ServerConfig::new(ADMIN_TOKEN, data.0.clone())
    };
    adjust(&mut config);
    TestServer::start(data, config, |addr| {
        with_ca(&format!("https://localhost:{}", addr.port()), pki)
    })
    .await
}

/// A TLS server with a fresh PKI ([`spawn_tls_server`]), and an endpoint of it that trusts its
/// CA.
async fn tls_server_and_endpoint() -> (TestServer, Endpoint) {
    let pki = Pki::new(&["localhost"]);
    let server = spawn_tls_server(&pki).await;
    let endpoint = with_ca(&server.url, &pki);
    (server, endpoint)
}

fn with_ca(url: &str, pki: &Pki) -> Endpoint {
    Endpoint::new(url).ca_pem(pki.ca_pem.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranks_attach_put_and_get_over_tls() {
    let (server, endpoint) = tls_server_and_endpoint().await;
    let world = unique("tls");
    let created = server.admin.create_world(&world, 2).await.unwrap();
    server
        .admin
        .create_window(&world, &WindowSpec::of::<i64>("x", 2, 4))
        .await
        .unwrap();
    let origin = Session::attach(&endpoint, &created.tokens[0])
        .await
        .unwrap();
    let target = Session::attach(&endpoint, &created.tokens[1])
        .await
        .unwrap();
    let origin = origin.window("x").await.unwrap();
    let target = target.window("x").await.unwrap();

    origin.lock(LockType::Exclusive, 1, 0).await.unwrap();
    origin.put(1, 1, &[7i64, 8, 9]).unwrap();
    origin.unlock(1).await.unwrap();

    target.lock(LockType::Shared, 1, 0).await.unwrap();
    let read = target.get::<i64>(1, 0, 4).unwrap();
    target.unlock(1).await.unwrap();
    assert_eq!(read.value().await.unwrap(), vec![0, 7, 8, 9]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_claim_who_they_are_and_persist_their_events_over_tls() {
    let (server, endpoint) = tls_server_and_endpoint().await;
    let world = unique("tls");
    let created = server.admin.create_world(&world, 2).await.unwrap();
    let window = server
        .admin
        .create_window(&world, &WindowSpec::of::<i64>("x", 2, 4))
        .await
        .unwrap();

    // a claim travels over TLS like the token: the wrong rank is refused, the right one attaches
    let claim = |rank: u32| Claim {
        world: Some(world.clone()),
        rank: Some(rank),
    };
    let refused = Session::attach_as(&endpoint, &created.tokens[0], &claim(1))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let claimed = Session::attach_as(&endpoint, &created.tokens[1], &claim(1))
        .await
        .unwrap();
    assert_eq!(claimed.rank(), 1);

    // a builder's session writes its own events to the server's store
    let store = format!("sqlite:{}", server.data.0.join("audit.db").display());
    let session = Session::builder(&endpoint, &created.tokens[0])
        .audit_database_url(store)
        .attach()
        .await
        .unwrap();
    assert!(session.persists_audit_events());
    let x = session.window("x").await.unwrap();
    x.lock(LockType::Exclusive, 0, 0).await.unwrap();
    x.store(0, &[5i64]).unwrap();
    x.unlock(0).await.unwrap();
    drop(x);
    session.close().await.unwrap();

    let audit = Audit::connect(&endpoint, ADMIN_TOKEN).await.unwrap();
    let verified = audit.verify(window.id).await.unwrap();
    assert_eq!(verified.first_bad, None, "{verified:?}");
    assert!(verified.client_events > 0, "{verified:?}");
}

fn connect_message(error: Error) -> String {
    match error {
        Error::Connect { message, .. } => message,
        other => panic!("not a connect error: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_trust_the_ca_cannot_connect() {
    let pki = Pki::new(&["localhost"]);
    let server = spawn_tls_server(&pki).await;

    // the system's roots (no CA given) do not know the test CA
    let error = Admin::connect(server.url.as_str(), ADMIN_TOKEN)
        .await
        .unwrap_err();
    let message = connect_message(error);
    assert!(message.contains("certificate"), "{message}");

    // nor does another CA
    let stranger = Pki::new(&["localhost"]);
    let error = Admin::connect(with_ca(&server.url, &stranger), ADMIN_TOKEN)
        .await
        .unwrap_err();
    let message = connect_message(error);
    assert!(message.contains("invalid peer certificate"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_certificate_must_name_the_server() {
    let pki = Pki::new(&["other.example"]);
    let data = TempDir(std::env::temp_dir().join(unique("onesided-tls")));
    let config = ServerConfig {
        tls: Some(identity(&pki)),
        ..ServerConfig::new(ADMIN_TOKEN, data.0.clone())
    };
    let served = in_process::serve(config).await;
    let error = Admin::connect(
        with_ca(&format!("https://localhost:{}", served.addr.port()), &pki),
        ADMIN_TOKEN,
    )
    .await
    .unwrap_err();
    let message = connect_message(error);
    assert!(
        message.contains("certificate not valid for name \"localhost\""),
        "{message}"
    );
}

/// A refusal that tells a user what to check: the server's scheme. The TCP connection and
/// the client's HTTP/2 preface succeed (the preface does not wait for the server), so the
/// refusal is the first call's, however the server hung up.
fn says_why(error: &Error) -> bool {
    let hint = "it serves TLS and the address is an http:// one";
    matches!(error, Error::Status { message, .. } if message.contains(hint))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_http_client_gets_nothing_from_a_tls_server() {
    let pki = Pki::new(&["localhost"]);
    let server = spawn_tls_server(&pki).await;
    let plain = server.url.replace("https://", "http://");
    let world = unique("tls");
    let created = server.admin.create_world(&world, 1).await.unwrap();
    let refused = async {
        Admin::connect(plain.as_str(), ADMIN_TOKEN)
            .await?
            .list_worlds()
            .await
    };
    let error = refused.await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::Unavailable, "{error}");
    assert!(says_why(&error), "{error}");
    let error = Session::attach(plain.as_str(), &created.tokens[0])
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::Unavailable, "{error}");
    assert!(says_why(&error), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_is_not_the_certificates_is_refused_at_start() {
    let pki = Pki::new(&["localhost"]);
    let other = Pki::new(&["localhost"]);
    let identity = TlsIdentity::from_pem(pki.cert_pem.clone(), other.key_pem.clone()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let data = TempDir(std::env::temp_dir().join(unique("onesided-tls")));
    let config = ServerConfig {
        tls: Some(identity),
        ..ServerConfig::new(ADMIN_TOKEN, data.0.clone())
    };
    let error = run(listener, config, std::future::pending())
        .await
        .unwrap_err();
    let message = format!("{error:#}");
    assert!(
        message.contains("cannot use the TLS certificate and key"),
        "{message}"
    );
}

#[test]
fn files_without_a_certificate_or_a_key_are_refused_without_quoting_the_key() {
    let pki = Pki::new(&["localhost"]);
    let error = TlsIdentity::from_pem(pki.key_pem.clone(), pki.key_pem.clone()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the certificate file holds no PEM certificate"
    );
    let error = TlsIdentity::from_pem(pki.cert_pem.clone(), pki.cert_pem.clone()).unwrap_err();
    assert!(error.to_string().contains("private key"), "{error}");
    // a damaged key: its lines are not in the message
    let damaged = pki.key_pem.replace('A', "*");
    let error = TlsIdentity::from_pem(pki.cert_pem.clone(), damaged.clone()).unwrap_err();
    let message = format!("{error:#}");
    assert!(message.contains("private key"), "{message}");
    for line in damaged.lines().filter(|line| !line.starts_with("-----")) {
        assert!(!message.contains(line), "{message}");
    }
    // the Debug form of a good identity does not carry the key either
    let shown = format!("{:?}", identity(&pki));
    assert!(
        !shown.contains(pki.key_pem.lines().nth(1).unwrap()),
        "{shown}"
    );
}

#[test]
fn a_ca_is_checked_when_given() {
    let pki = Pki::new(&["localhost"]);
    let error = Endpoint::new("https://localhost:1")
        .ca_pem(pki.key_pem.clone())
        .unwrap_err();
    assert!(matches!(error, Error::Config(_)), "{error:?}");
    let error = Endpoint::new("http://localhost:1")
        .ca_pem(pki.ca_pem.clone())
        .unwrap_err();
    assert!(error.to_string().contains("only for https://"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_tls_from_its_flags() {
    let pki = Pki::new(&["localhost"]);
    let data = TempDir(std::env::temp_dir().join(unique("onesided-tls-bin")));
    std::fs::create_dir_all(&data.0).unwrap();
    let cert = data.0.join("cert.pem");
    let key = data.0.join("key.pem");
    std::fs::write(&cert, &pki.cert_pem).unwrap();
    std::fs::write(&key, &pki.key_pem).unwrap();
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let server = crate::secrets::start(
        &data,
        &[
            "--admin-token",
            "binary-test-admin-token",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
        ],
        "info",
    );
    let url = server.url.replace("http://127.0.0.1", "https://localhost");
    let admin = Admin::connect(with_ca(&url, &pki), "binary-test-admin-token")
        .await
        .unwrap();
    admin.create_world("w", 1).await.unwrap();
    assert_eq!(admin.list_worlds().await.unwrap().len(), 1);
    let log = tokio::task::spawn_blocking(move || server.stop())
        .await
        .unwrap();
    assert!(
        log.iter().any(|line| line.contains("scheme=\"https\"")),
        "{log:#?}"
    );
}

/// The binary with these arguments, expected to exit at once: its exit code and stderr.
fn refused_start(data: &TempDir, args: &[&str]) -> (Option<i32>, String) {
    let mut command =
        crate::server_command(data, &["--admin-token", "binary-test-admin-token"], "info");
    command
        .args(args)
        .env_remove("ONESIDED_TLS_CERT")
        .env_remove("ONESIDED_TLS_KEY");
    let out = onesided_test_support::run_to_exit(command, std::time::Duration::from_secs(30));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_binary_refuses_half_or_wrong_tls_flags() {
    let pki = Pki::new(&["localhost"]);
    let other = Pki::new(&["localhost"]);
    let data = TempDir(std::env::temp_dir().join(unique("onesided-tls-bin")));
    std::fs::create_dir_all(&data.0).unwrap();
    let write = |name: &str, text: &str| {
        let path = data.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let cert = write("cert.pem", &pki.cert_pem);
    let key = write("key.pem", &pki.key_pem);
    let foreign_key = write("other-key.pem", &other.key_pem);

    let (code, stderr) = refused_start(&data, &["--tls-cert", &cert]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--tls-key"), "{stderr}");
    let (code, stderr) = refused_start(&data, &["--tls-key", &key]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--tls-cert"), "{stderr}");

    let (code, stderr) = refused_start(&data, &["--tls-cert", &key, "--tls-key", &key]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("no PEM certificate"), "{stderr}");
    assert!(stderr.contains(&key), "the file is named: {stderr}");

    let (code, stderr) = refused_start(&data, &["--tls-cert", &cert, "--tls-key", &foreign_key]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot use the TLS certificate and key"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(other.key_pem.lines().nth(1).unwrap()),
        "{stderr}"
    );
}

/// A TLS record holding a ClientHello of `version` (`0x0301` TLS 1.0 … `0x0303` TLS 1.2, without
/// a `supported_versions` extension, as clients of those versions send it) offering ECDHE-ECDSA
/// and ECDHE-RSA suites with what a TLS 1.2 server needs to pick one for the test PKI's P-256
/// key.
fn client_hello(version: u16) -> Vec<u8> {
    hello(version, false)
}

/// A TLS 1.3 ClientHello: legacy version TLS 1.2, a TLS 1.3 suite first, and the
/// `supported_versions` (1.3 only) and `key_share` (an x25519 share) extensions.
fn client_hello_1_3() -> Vec<u8> {
    hello(0x0303, true)
}

fn hello(version: u16, tls_1_3: bool) -> Vec<u8> {
    let mut body = version.to_be_bytes().to_vec();
    body.extend([7u8; 32]); // random
    body.push(0); // no session id
    let suites: &[u16] = if tls_1_3 {
        &[0x1301, 0x1302, 0xc02b, 0xc02f]
    } else {
        &[0xc02b, 0xc02f, 0xc009, 0x002f]
    };
    body.extend(((suites.len() * 2) as u16).to_be_bytes());
    for suite in suites {
        body.extend(suite.to_be_bytes());
    }
    body.extend([1, 0]); // the null compression method
    let mut extensions = Vec::new();
    let mut add = |kind: u16, data: &[u8]| {
        extensions.extend(kind.to_be_bytes());
        extensions.extend((data.len() as u16).to_be_bytes());
        extensions.extend(data);
    };
    add(10, &[0, 4, 0, 0x1d, 0, 0x17]); // supported groups: x25519, secp256r1
    add(11, &[1, 0]); // EC point formats: uncompressed
    add(13, &[0, 6, 4, 3, 8, 4, 4, 1]); // signature algorithms
    if tls_1_3 {
        add(43, &[2, 3, 4]); // supported versions: TLS 1.3
                             // key share: one x25519 share (any 32 bytes but a low-order point)
        let mut share = vec![0, 36, 0, 0x1d, 0, 32];
        share.extend((1..=32u8).map(|byte| byte.wrapping_mul(37)));
        add(51, &share);
    }
    body.extend((extensions.len() as u16).to_be_bytes());
    body.extend(extensions);
    let mut handshake = vec![1]; // ClientHello
    handshake.extend(&(body.len() as u32).to_be_bytes()[1..]);
    handshake.extend(body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend((handshake.len() as u16).to_be_bytes());
    record.extend(handshake);
    record
}

/// Sends `hello` to `url`'s port and returns the first TLS record the server answers with
/// (its content type, and its first bytes).
async fn first_record(url: &str, hello: &[u8]) -> (u8, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let port = url.rsplit(':').next().unwrap();
    let mut tcp = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    tcp.write_all(hello).await.unwrap();
    let mut header = [0u8; 5];
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        tcp.read_exact(&mut header),
    )
    .await
    .expect("no answer to the ClientHello")
    .unwrap();
    let length = u16::from_be_bytes([header[3], header[4]]) as usize;
    let mut fragment = vec![0u8; length];
    tcp.read_exact(&mut fragment).await.unwrap();
    (header[0], fragment)
}

/// SECURITY.md: the server speaks only TLS 1.2 and 1.3. The same ClientHello gets a TLS 1.2
/// ServerHello when it says TLS 1.2, and a fatal `protocol_version` alert when it says TLS 1.1
/// or 1.0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_tls_1_2_and_1_3_are_spoken() {
    const HANDSHAKE: u8 = 0x16;
    const ALERT: u8 = 0x15;
    let pki = Pki::new(&["localhost"]);
    let server = spawn_tls_server(&pki).await;
    let (kind, fragment) = first_record(&server.url, &client_hello(0x0303)).await;
    assert_eq!(kind, HANDSHAKE, "TLS 1.2 is refused: {fragment:?}");
    assert_eq!(fragment[0], 2, "not a ServerHello: {fragment:?}");
    assert_eq!(fragment[4..6], [3, 3], "not TLS 1.2: {fragment:?}");
    for (name, version) in [("TLS 1.1", 0x0302), ("TLS 1.0", 0x0301)] {
        let (kind, fragment) = first_record(&server.url, &client_hello(version)).await;
        assert_eq!(kind, ALERT, "{name} is served: {fragment:?}");
        // fatal, protocol_version
        assert_eq!(fragment, [2, 70], "{name}");
    }
    // a TLS 1.3 hello gets a TLS 1.3 ServerHello: its supported_versions extension says 1.3
    let (kind, fragment) = first_record(&server.url, &client_hello_1_3()).await;
    assert_eq!(kind, HANDSHAKE, "TLS 1.3 is refused: {fragment:?}");
    assert_eq!(fragment[0], 2, "not a ServerHello: {fragment:?}");
    assert!(
        fragment
            .windows(6)
            .any(|bytes| bytes == [0, 43, 0, 2, 3, 4]),
        "the server did not choose TLS 1.3: {fragment:?}"
    );
    // and the client library speaks it
    let admin = Admin::connect(with_ca(&server.url, &pki), ADMIN_TOKEN)
        .await
        .unwrap();
    admin.list_worlds().await.unwrap();
}

/// SECURITY.md: handshakes are bounded to 10 s. A client that opens a connection, sends the
/// first bytes of a ClientHello and then nothing is dropped at that bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_that_never_completes_is_dropped_at_the_bound() {
    use onesided_server::tls::HANDSHAKE_TIMEOUT;
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pki = Pki::new(&["localhost"]);
    let server = spawn_tls_server(&pki).await;
    let port = server.url.rsplit(':').next().unwrap();
    let mut tcp = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    let started = Instant::now();
    tcp.write_all(&client_hello(0x0303)[..10]).await.unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(
        HANDSHAKE_TIMEOUT + Duration::from_secs(5),
        tcp.read(&mut byte),
    )
    .await
    .expect("the half-done handshake is still open 5 s past the bound");
    let took = started.elapsed();
    // closed (or reset), never answered
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(
        took >= HANDSHAKE_TIMEOUT - Duration::from_secs(1),
        "dropped after {took:?}, before the bound"
    );
    // and the server still serves others
    server.admin.list_worlds().await.unwrap();
}

/// README: `/metrics` is plain HTTP even when gRPC speaks TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_stay_plain_http_when_grpc_speaks_tls() {
    use onesided_server::metrics::MetricsListener;
    let pki = Pki::new(&["localhost"]);
    let listener = MetricsListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = listener.local_addr();
    let server = spawn_tls_server_with(&pki, |config| config.metrics = Some(listener)).await;
    let (status, text) = crate::metrics::get(address, "/metrics").await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.lines()
            .any(|line| line == "onesided_sessions_attached 0"),
        "{text}"
    );
    // while the gRPC port answers a plain HTTP request with nothing of the sort
    let refused = Admin::connect(server.url.replace("https://", "http://"), ADMIN_TOKEN).await;
    let failed = match refused {
        Ok(admin) => admin.list_worlds().await.is_err(),
        Err(_) => true,
    };
    assert!(failed, "the TLS port served plain HTTP/2");
}
