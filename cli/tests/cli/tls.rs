//! `onesided` against a TLS server: an https:// address with `--ca` (or ONESIDED_CA) works for
//! admin and rank commands alike; without the CA, with an unreadable one, or with a CA for a
//! plain address, the command fails with its own exit code and says why.

use std::path::Path;

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

/// `onesided --ca CA` against `url` with the admin token.
fn with_ca(url: &str, ca: &Path) -> Cli {
    Cli::new(url).token(ADMIN_TOKEN).arg("--ca").arg(ca)
}

#[test]
fn admin_and_rank_commands_work_over_tls_with_the_ca() {
    let dir = TempDir::new();
    let (_server, ca, url) = tls_server(&dir);
    let created = with_ca(&url, &ca)
        .words("--json world create w --ranks 2")
        .run();
    created.success();
    let tokens = crate::tokens(&created.json());
    let window = "window create --world w x --count 2 --type i64";
    with_ca(&url, &ca).words(window).run().success();
    // the CA from the environment, as for the address and the token
    let as_rank = |token: &str, op: &str, args: &str| {
        let cli = Cli::new(&url).token(token).env("ONESIDED_CA", &ca);
        cli.words(op)
            .words("--world w --window x --target 1")
            .words(args)
            .run()
    };
    as_rank(&tokens[0], "put", "--type i64 --disp 1 42").success();
    as_rank(&tokens[1], "get", "--type i64 --count 2").prints("0 42\n");
}

#[test]
fn without_the_ca_the_server_is_not_trusted() {
    let dir = TempDir::new();
    let (_server, _ca, url) = tls_server(&dir);
    let out = Cli::new(&url).token(ADMIN_TOKEN).words("world ls").run();
    out.code(4).stderr_has("certificate");
}

#[test]
fn a_plain_address_gets_nowhere_with_a_tls_server() {
    let dir = TempDir::new();
    let (server, _ca, _url) = tls_server(&dir);
    let out = server.cli().words("world ls").run();
    out.code(4).stderr_has("serves TLS");
}

#[test]
fn a_bad_ca_is_a_usage_error() {
    let dir = TempDir::new();
    let (_server, ca, url) = tls_server(&dir);
    let missing = dir.0.join("missing.pem");
    let not_a_certificate = dir.file("key.pem", "not a certificate\n");
    let plain = url.replace("https://", "http://");
    for (address, ca, says) in [
        (&url, &missing, "cannot read the CA certificate"),
        (&url, &not_a_certificate, "no PEM certificate"),
        (&plain, &ca, "only for https://"),
    ] {
        let out = with_ca(address, ca).words("world ls").run();
        out.code(2).stderr_has(says);
    }
}
