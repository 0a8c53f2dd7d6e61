//! A window created with an element type remembers it (info `onesided_element_type`), and the
//! one-shot commands use it when no `--type` is given (issue 17).

use onesided_client::{Admin, WindowSpec};

use crate::{Cli, Output, Server, ADMIN_TOKEN};

fn as_rank(server: &Server, token: &str, args: &[&str]) -> Output {
    Cli::new(&server.url).token(token).args(args).run()
}

#[test]
fn get_put_acc_fop_cas_use_the_window_type() {
    let server = Server::start();
    let tokens = server.world("t", 2);
    server
        .cli()
        .args([
            "window", "create", "--world", "t", "typed", "--count", "4", "--type", "i64",
        ])
        .run()
        .success();
    let at = ["--window", "typed", "--target", "0"];
    let put = as_rank(
        &server,
        &tokens[1],
        &[&["put"], &at[..], &["--disp", "1", "-5", "7"]].concat(),
    );
    put.success();
    assert_eq!(put.stderr, "");
    let acc = as_rank(
        &server,
        &tokens[1],
        &[&["acc"], &at[..], &["--disp", "2", "--op", "sum", "10"]].concat(),
    );
    acc.success();
    let fop = as_rank(
        &server,
        &tokens[1],
        &[&["fop"], &at[..], &["--disp", "3", "--op", "sum", "1"]].concat(),
    );
    fop.success();
    assert_eq!(fop.stdout, "0\n");
    let cas = as_rank(
        &server,
        &tokens[1],
        &[&["cas"], &at[..], &["--compare", "0", "4"]].concat(),
    );
    cas.success();
    assert_eq!(cas.stdout, "0\n");
    let got = as_rank(
        &server,
        &tokens[0],
        &[&["get"], &at[..], &["--count", "4"]].concat(),
    );
    got.success();
    assert_eq!(got.stdout, "4 -5 17 1\n");
    // --type still decides when given: the same bytes read as u8
    let bytes = as_rank(
        &server,
        &tokens[0],
        &[
            &["get"],
            &at[..],
            &["--disp", "1", "--count", "2", "--type", "u8"],
        ]
        .concat(),
    );
    bytes.success();
    assert_eq!(bytes.stdout, "251 255\n");
    // the window says so
    let show = server
        .cli()
        .args(["window", "show", "--world", "t", "typed"])
        .run();
    show.success();
    assert!(
        show.stdout
            .contains("info:       onesided_element_type=i64\n"),
        "{}",
        show.stdout
    );
    // the audit's replay reads the copies as the window's type while the window exists
    let replay = server.cli().args(["audit", "replay", "t/typed"]).run();
    replay.success();
    assert!(
        replay
            .stdout
            .contains("\nrank 0: 4 -5 17 1\nrank 1: 0 0 0 0\n"),
        "{}",
        replay.stdout
    );
    // once it is freed, the log alone does not say: hex by disp_unit
    server
        .cli()
        .args(["window", "free", "--world", "t", "typed"])
        .run()
        .success();
    let replay = server.cli().args(["audit", "replay", "t/typed"]).run();
    replay.success();
    assert!(
        replay
            .stdout
            .contains("\nrank 1: 0000000000000000 0000000000000000"),
        "{}",
        replay.stdout
    );
}

#[test]
fn a_window_without_a_type_still_needs_one() {
    let server = Server::start();
    let tokens = server.world("u", 1);
    server
        .cli()
        .args(["window", "create", "--world", "u", "raw", "--size", "16"])
        .run()
        .success();
    let out = as_rank(
        &server,
        &tokens[0],
        &["get", "--window", "raw", "--target", "0"],
    );
    out.code(2);
    assert_eq!(
        out.stderr,
        "onesided: --type is required: window raw was created without an element type\n"
    );
    as_rank(
        &server,
        &tokens[0],
        &["get", "--window", "raw", "--target", "0", "--type", "u16"],
    )
    .success();
}

#[test]
fn an_unknown_element_type_is_refused_at_creation() {
    let server = Server::start();
    server.world("v", 1);
    let out = server
        .cli()
        .args([
            "window",
            "create",
            "--world",
            "v",
            "bad",
            "--size",
            "8",
            "--info",
            "onesided_element_type=i65",
        ])
        .run();
    out.code(3);
    assert!(
        out.stderr
            .starts_with("onesided: MPI_ERR_INFO: onesided_element_type must name a datatype"),
        "{}",
        out.stderr
    );
}

#[test]
fn windows_of_the_library_carry_their_type() {
    let server = Server::start();
    let tokens = server.world("l", 1);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let admin = Admin::connect(&server.url, ADMIN_TOKEN).await.unwrap();
        admin
            .create_window("l", &WindowSpec::of::<f64>("floats", 1, 2))
            .await
            .unwrap();
    });
    as_rank(
        &server,
        &tokens[0],
        &["put", "--window", "floats", "--target", "0", "1.5", "-2.25"],
    )
    .success();
    let got = as_rank(
        &server,
        &tokens[0],
        &["get", "--window", "floats", "--target", "0", "--count", "2"],
    );
    got.success();
    assert_eq!(got.stdout, "1.5 -2.25\n");
}
