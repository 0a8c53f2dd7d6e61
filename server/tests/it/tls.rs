//! TLS: a server with `tls` set speaks only TLS; a client reaches it through an `https://`
//! endpoint with the CA that signed its certificate, and nothing else gets in. The CA and the
//! server's certificate are made afresh for each test (the test-support crate's `Pki`).

use onesided_client::{Admin, Audit, Claim, Endpoint, Error, LockType, Session, WindowSpec};
use onesided_server::tls::TlsIdentity;
use onesided_server::{run, ServerConfig};
use onesided_test_support::Pki;
use tokio::sync::oneshot;
use tonic::Code;

use crate::{unique, TempDir, TestServer, ADMIN_TOKEN};

/// The server side of `pki`.
fn identity(pki: &Pki) -> TlsIdentity {
    TlsIdentity::from_pem(pki.cert_pem.clone(), pki.key_pem.clone()).unwrap()
}

/// A server serving TLS with `pki`'s certificate for `localhost`, and its `https://` URL.
async fn spawn_tls_server(pki: &Pki) -> TestServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = format!("https://localhost:{port}");
    let data = TempDir(std::env::temp_dir().join(unique("onesided-tls")));
    let config = ServerConfig {
        tls: Some(identity(pki)),
        ..ServerConfig::new(ADMIN_TOKEN, data.0.clone())
    };
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        run(listener, config, async {
            let _ = stopped.await;
        })
        .await
        .expect("server failed");
    });
    let endpoint = Endpoint::new(url.as_str())
        .ca_pem(pki.ca_pem.clone())
        .unwrap();
    let admin = Admin::connect(&endpoint, ADMIN_TOKEN).await.unwrap();
    admin.list_worlds().await.unwrap();
    TestServer {
        url,
        admin,
        _stop: stop,
        data,
    }
}

fn with_ca(url: &str, pki: &Pki) -> Endpoint {
    Endpoint::new(url).ca_pem(pki.ca_pem.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranks_attach_put_and_get_over_tls() {
    let pki = Pki::new(&["localhost"]);
    let server = spawn_tls_server(&pki).await;
    let endpoint = with_ca(&server.url, &pki);
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
    let pki = Pki::new(&["localhost"]);
    let server = spawn_tls_server(&pki).await;
    let endpoint = with_ca(&server.url, &pki);
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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let data = TempDir(std::env::temp_dir().join(unique("onesided-tls")));
    let config = ServerConfig {
        tls: Some(identity(&pki)),
        ..ServerConfig::new(ADMIN_TOKEN, data.0.clone())
    };
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(run(listener, config, async {
        let _ = stopped.await;
    }));
    let error = Admin::connect(
        with_ca(&format!("https://localhost:{port}"), &pki),
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
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_onesided-server"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin-token",
            "binary-test-admin-token",
            "--data-dir",
        ])
        .arg(&data.0)
        .args(args)
        .env_remove("ONESIDED_TLS_CERT")
        .env_remove("ONESIDED_TLS_KEY")
        .output()
        .unwrap();
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
