//! `onesided` against a TLS server: an https:// address with `--ca` (or ONESIDED_CA) works for
//! admin and rank commands alike; without the CA, with an unreadable one, or with a CA for a
//! plain address, the command fails with its own exit code and says why.

use onesided_server::tls::TlsIdentity;
use onesided_test_support::Pki;

use crate::{Cli, Server, TempDir, ADMIN_TOKEN};

/// A TLS server with a certificate for `localhost` from a fresh CA; the CA's PEM file and the
/// server's https:// address.
fn tls_server(dir: &TempDir) -> (Server, std::path::PathBuf, String) {
    let pki = Pki::new(&["localhost"]);
    let identity = TlsIdentity::from_pem(pki.cert_pem, pki.key_pem).unwrap();
    let server = Server::start_with(|config| config.tls = Some(identity));
    let url = server.url.replace("http://127.0.0.1", "https://localhost");
    (server, dir.file("ca.pem", &pki.ca_pem), url)
}

#[test]
fn admin_and_rank_commands_work_over_tls_with_the_ca() {
    let dir = TempDir::new();
    let (_server, ca, url) = tls_server(&dir);
    let created = Cli::new(&url)
        .token(ADMIN_TOKEN)
        .arg("--ca")
        .arg(&ca)
        .args(["--json", "world", "create", "w", "--ranks", "2"])
        .run();
    created.success();
    let tokens: Vec<String> = created.json()["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|token| token.as_str().unwrap().to_string())
        .collect();
    Cli::new(&url)
        .token(ADMIN_TOKEN)
        .arg("--ca")
        .arg(&ca)
        .args([
            "window", "create", "--world", "w", "x", "--count", "2", "--type", "i64",
        ])
        .run()
        .success();
    // the CA from the environment, as for the address and the token
    let as_rank = |token: &str, args: &[&str]| {
        Cli::new(&url)
            .token(token)
            .env("ONESIDED_CA", &ca)
            .args(args)
            .run()
    };
    let at = ["--world", "w", "--window", "x", "--target", "1"];
    let put: Vec<&str> = ["put"]
        .into_iter()
        .chain(at)
        .chain(["--type", "i64", "--disp", "1", "42"])
        .collect();
    as_rank(&tokens[0], &put).success();
    let get: Vec<&str> = ["get"]
        .into_iter()
        .chain(at)
        .chain(["--type", "i64", "--count", "2"])
        .collect();
    let got = as_rank(&tokens[1], &get);
    got.success();
    assert_eq!(got.stdout, "0 42\n");
}

#[test]
fn without_the_ca_the_server_is_not_trusted() {
    let dir = TempDir::new();
    let (_server, _ca, url) = tls_server(&dir);
    let out = Cli::new(&url)
        .token(ADMIN_TOKEN)
        .args(["world", "ls"])
        .run();
    out.code(4);
    assert!(out.stderr.contains("certificate"), "{}", out.stderr);
}

#[test]
fn a_plain_address_gets_nowhere_with_a_tls_server() {
    let dir = TempDir::new();
    let (server, _ca, _url) = tls_server(&dir);
    let out = server.cli().args(["world", "ls"]).run();
    out.code(4);
    assert!(out.stderr.contains("serves TLS"), "{}", out.stderr);
}

#[test]
fn a_bad_ca_is_a_usage_error() {
    let dir = TempDir::new();
    let (_server, ca, url) = tls_server(&dir);
    let missing = dir.0.join("missing.pem");
    let out = Cli::new(&url)
        .token(ADMIN_TOKEN)
        .arg("--ca")
        .arg(&missing)
        .args(["world", "ls"])
        .run();
    out.code(2);
    assert!(
        out.stderr.contains("cannot read the CA certificate"),
        "{}",
        out.stderr
    );

    let not_a_certificate = dir.file("key.pem", "not a certificate\n");
    let out = Cli::new(&url)
        .token(ADMIN_TOKEN)
        .arg("--ca")
        .arg(&not_a_certificate)
        .args(["world", "ls"])
        .run();
    out.code(2);
    assert!(out.stderr.contains("no PEM certificate"), "{}", out.stderr);

    let plain = url.replace("https://", "http://");
    let out = Cli::new(&plain)
        .token(ADMIN_TOKEN)
        .arg("--ca")
        .arg(&ca)
        .args(["world", "ls"])
        .run();
    out.code(2);
    assert!(out.stderr.contains("only for https://"), "{}", out.stderr);
}
