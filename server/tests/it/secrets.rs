//! Secrets stay secret (SECURITY.md): the generated admin token file is its owner's alone; the
//! Debug forms SECURITY.md lists (the registry's, `ServerConfig`'s, the client's `Bearer`,
//! `SessionBuilder`'s, `WorldTokens`'), which any future `?value` in a log line would print,
//! hold no token; a bad database URL is reported without its password. (That no token reaches the
//! server's log, at any level, is `identity::no_token_is_ever_logged`.)

use onesided_client::Admin;
use onesided_server::audit::AuditHandle;
use onesided_server::registry::Registry;

use crate::{unique, TempDir};

/// The binary and its address.
pub struct Running {
    launched: crate::Launched,
    pub url: String,
}

/// The binary with `extra` flags, logging at `log`, once it listens.
pub fn start(data: &TempDir, extra: &[&str], log: &str) -> Running {
    let (launched, url) = crate::launch_server_listening(data, extra, log);
    Running { launched, url }
}

impl Running {
    /// SIGTERM, wait (at most 10 s), and everything it printed.
    pub fn stop(self) -> Vec<String> {
        let (exit, output) = self.launched.terminate(std::time::Duration::from_secs(10));
        assert!(exit.success(), "the server ended with {exit}: {output:#?}");
        output
    }

    /// [`Running::stop`] off the test's runtime.
    pub async fn stopped(self) -> Vec<String> {
        tokio::task::spawn_blocking(move || self.stop())
            .await
            .unwrap()
    }
}

/// The message (with its causes) of the error with which a server configured as `config`
/// refuses to run.
async fn refusal(config: onesided_server::ServerConfig) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let error = onesided_server::run(listener, config, std::future::pending())
        .await
        .unwrap_err();
    format!("{error:#}")
}

/// One admin call answered with `token`: the server is up and takes it.
pub async fn served(url: &str, token: &str) {
    Admin::connect(url, token)
        .await
        .unwrap()
        .list_worlds()
        .await
        .unwrap();
}

/// Makes `path` readable by others, starts the binary on `data` again, has it serve `token`,
/// and returns what it printed until it stopped.
#[cfg(unix)]
async fn served_once_readable_by_others(
    data: &TempDir,
    path: &std::path::Path,
    token: &str,
) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let server = start(data, &[], "info");
    served(&server.url, token).await;
    server.stopped().await
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generated_admin_token_file_is_its_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let data = TempDir(std::env::temp_dir().join(unique("onesided-secrets")));
    let server = start(&data, &[], "info");
    let path = data.0.join("admin-token");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "mode {:o}", mode & 0o777);
    let token = std::fs::read_to_string(&path).unwrap();
    served(&server.url, token.trim()).await;
    server.stopped().await;

    // a token file others can read is used, with a warning
    let log = served_once_readable_by_others(&data, &path, token.trim()).await;
    assert!(
        log.iter()
            .any(|line| line.contains("readable by others than its owner")),
        "{log:#?}"
    );
}

#[tokio::test]
async fn the_registrys_debug_form_holds_no_token() {
    let registry = Registry::new(
        AuditHandle::off(),
        None,
        0,
        onesided_server::DEFAULT_LEASE_TTL,
        onesided_server::limits::Limits::default(),
    );
    let tokens = registry.create_world("w", 3).await.unwrap();
    let shown = format!("{registry:?}");
    assert!(shown.contains("nranks: 3"), "{shown}");
    for token in &tokens {
        assert!(!shown.contains(token.as_str()), "{shown}");
    }
}

/// SECURITY.md lists the Debug forms that leave tokens out, so that a `?value` in a log line
/// cannot leak one: the server's `ServerConfig` (admin token, database URL with its password,
/// TLS key), and the client's `SessionBuilder` (token and database URL), `WorldTokens`,
/// `Session`, and `Admin` and `Audit`, which hold a `Bearer` (whose own form, not public, is
/// held to account by the client's unit test `bearers_debug_form_holds_no_token`). Each is
/// formatted, plain and pretty, holding tokens the test knows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_debug_forms_security_md_lists_hold_no_token() {
    use onesided_client::{Audit, Claim, Session};
    let password = "pg-password-secret";
    let database = format!("postgres://audit:{password}@db.example/audit");
    let pki = onesided_test_support::Pki::new(&["localhost"]);
    let mut config = onesided_server::ServerConfig::new(crate::ADMIN_TOKEN, "/nowhere");
    config.database_url = Some(database.clone());
    config.tls = Some(
        onesided_server::tls::TlsIdentity::from_pem(pki.cert_pem.clone(), pki.key_pem.clone())
            .unwrap(),
    );
    let key_line = pki.key_pem.lines().nth(1).unwrap().to_string();
    let server = crate::spawn_server().await;
    let world = server.admin.create_world("w", 2).await.unwrap();
    let audit = Audit::connect(&server.url, crate::ADMIN_TOKEN)
        .await
        .unwrap();
    let claim = Claim {
        world: Some("w".into()),
        rank: Some(1),
    };
    let session = Session::attach_as(&server.url, &world.tokens[1], &claim)
        .await
        .unwrap();
    let builder =
        Session::builder(&server.url, &world.tokens[0]).audit_database_url(database.as_str());
    let secrets = [
        crate::ADMIN_TOKEN,
        world.tokens[0].as_str(),
        world.tokens[1].as_str(),
        password,
        key_line.as_str(),
    ];
    let shown: Vec<(&str, String, String)> = vec![
        (
            "ServerConfig",
            format!("{config:?}"),
            format!("{config:#?}"),
        ),
        (
            "Admin",
            format!("{:?}", server.admin),
            format!("{:#?}", server.admin),
        ),
        ("Audit", format!("{audit:?}"), format!("{audit:#?}")),
        ("Session", format!("{session:?}"), format!("{session:#?}")),
        (
            "SessionBuilder",
            format!("{builder:?}"),
            format!("{builder:#?}"),
        ),
        ("WorldTokens", format!("{world:?}"), format!("{world:#?}")),
    ];
    for (what, plain, pretty) in &shown {
        for secret in secrets {
            assert!(
                !plain.contains(secret) && !pretty.contains(secret),
                "{what}'s Debug holds a secret: {pretty}"
            );
        }
    }
    // they are the forms of those values, not empty ones
    assert!(shown[0].1.contains("admin_token"), "{}", shown[0].1);
    assert!(shown[0].1.contains("nowhere"), "{}", shown[0].1);
    for (what, plain, _) in &shown[1..3] {
        assert!(plain.contains("Bearer"), "{what}: {plain}");
    }
    assert!(shown[4].1.contains(&server.url), "{}", shown[4].1);
    assert!(shown[5].1.contains("ranks: 2"), "{}", shown[5].1);
    session.close().await.unwrap();
}

#[tokio::test]
async fn an_unsupported_database_url_is_refused_without_its_password() {
    let data = TempDir(std::env::temp_dir().join(unique("onesided-secrets")));
    let config = onesided_server::ServerConfig {
        database_url: Some("mysql://audit:hunter2@db.example/audit".into()),
        ..onesided_server::ServerConfig::new("secrets-test-admin-token", data.0.clone())
    };
    let message = refusal(config).await;
    assert!(message.contains("\"mysql\""), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
}

#[tokio::test]
async fn a_server_with_an_empty_or_short_admin_token_does_not_start() {
    for token in ["", "short"] {
        let data = TempDir(std::env::temp_dir().join(unique("onesided-secrets")));
        let config = onesided_server::ServerConfig::new(token, data.0.clone());
        let message = refusal(config).await;
        assert!(message.contains("at least 16"), "{message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_bearer_token_is_never_a_credential() {
    let server = crate::spawn_server().await;
    let admin = onesided_client::Admin::connect(&server.url, "")
        .await
        .unwrap();
    let refused = admin.list_worlds().await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused}");
    let attach = onesided_client::Session::attach(&server.url, "").await;
    assert_eq!(
        attach.map(|_| ()).unwrap_err().code(),
        tonic::Code::Unauthenticated
    );
}

/// The SQLite audit store holds every event and the hashes of the rank tokens: like the token
/// file, it and its WAL companions are their owner's alone; an existing store others can read
/// is used, with a warning.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_audit_store_is_its_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let data = TempDir(std::env::temp_dir().join(unique("onesided-secrets")));
    let server = start(&data, &[], "info");
    let token = std::fs::read_to_string(data.0.join("admin-token")).unwrap();
    let admin = Admin::connect(server.url.as_str(), token.trim())
        .await
        .unwrap();
    // a commit, so the write-ahead log and its index exist
    admin.create_world(&unique("world"), 2).await.unwrap();
    for name in ["audit.db", "audit.db-wal", "audit.db-shm"] {
        let mode = std::fs::metadata(data.0.join(name))
            .unwrap_or_else(|error| panic!("{name}: {error}"))
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name}: mode {:o}", mode & 0o777);
    }
    server.stopped().await;

    let path = data.0.join("audit.db");
    let log = served_once_readable_by_others(&data, &path, token.trim()).await;
    assert!(
        log.iter()
            .any(|line| line.contains("audit.db") && line.contains("readable by others")),
        "{log:#?}"
    );
}

/// The admin token is compared in time independent of where a guess differs: every check of
/// a presented token against it goes through `auth::same`, which compares with `subtle`'s
/// constant-time equality (timing cannot be measured reliably in a test; the primitive can be
/// read). A comparison with `==` of the admin token anywhere in the services that check it
/// fails this.
#[test]
fn the_admin_token_is_compared_with_a_constant_time_primitive() {
    let auth = include_str!("../../src/auth.rs");
    let same = auth
        .split("pub(crate) fn same(")
        .nth(1)
        .and_then(|rest| rest.split("\n}\n").next())
        .expect("auth.rs defines `same`");
    assert!(
        same.contains(".ct_eq("),
        "`same` is not constant-time: {same}"
    );
    let checkers = [
        ("auth.rs", auth, "same(presented, &self.token)"),
        ("auth.rs", auth, "same(presented, &self.admin_token)"),
        (
            "web.rs",
            include_str!("../../src/web.rs"),
            "crate::auth::same(presented, &self.admin_token)",
        ),
    ];
    for (file, source, check) in checkers {
        assert!(
            source.contains(check),
            "{file} no longer checks with `{check}`"
        );
        for line in source.lines() {
            let names_token = line.contains("admin_token") || line.contains("self.token");
            assert!(
                !(names_token && (line.contains("==") || line.contains("!="))),
                "{file} compares the admin token with `==`: {line}"
            );
        }
    }
}
