//! A window created with an element type remembers it (info `onesided_element_type`), and the
//! one-shot commands use it when no `--type` is given (issue 17).

use onesided_client::{Admin, WindowSpec};

use crate::{Output, Server, ADMIN_TOKEN};

/// `onesided WORDS` with `token`.
fn as_rank(server: &Server, token: &str, words: &str) -> Output {
    server.as_rank(token).words(words).run()
}

#[test]
fn get_put_acc_fop_cas_use_the_window_type() {
    let (server, tokens) = Server::with_window("t", 2, "typed", "--count 4 --type i64");
    // `onesided OP --window typed --target 0 ARGS` with rank `rank`'s token
    let at = |rank: usize, op: &str, args: &str| {
        let words = format!("{op} --window typed --target 0 {args}");
        as_rank(&server, &tokens[rank], &words)
    };
    let put = at(1, "put", "--disp 1 -5 7");
    put.success();
    assert_eq!(put.stderr, "");
    at(1, "acc", "--disp 2 --op sum 10").success();
    at(1, "fop", "--disp 3 --op sum 1").prints("0\n");
    at(1, "cas", "--compare 0 4").prints("0\n");
    at(0, "get", "--count 4").prints("4 -5 17 1\n");
    // --type still decides when given: the same bytes read as u8
    at(0, "get", "--disp 1 --count 2 --type u8").prints("251 255\n");
    // the window says so
    let show = server.cli().words("window show --world t typed").run();
    show.success();
    show.stdout_has("info:       onesided_element_type=i64\n");
    // the audit's replay reads the copies as the window's type while the window exists
    let replay = server.cli().words("audit replay t/typed").run();
    replay.success();
    replay.stdout_has("\nrank 0: 4 -5 17 1\nrank 1: 0 0 0 0\n");
    // once it is freed, the log alone does not say: hex by disp_unit
    server
        .cli()
        .words("window free --world t typed")
        .run()
        .success();
    let replay = server.cli().words("audit replay t/typed").run();
    replay.success();
    replay.stdout_has("\nrank 1: 0000000000000000 0000000000000000");
}

#[test]
fn a_window_without_a_type_still_needs_one() {
    let (server, tokens) = Server::with_window("u", 1, "raw", "--size 16");
    let out = as_rank(&server, &tokens[0], "get --window raw --target 0");
    out.code(2);
    assert_eq!(
        out.stderr,
        "onesided: --type is required: window raw was created without an element type\n"
    );
    let typed = "get --window raw --target 0 --type u16";
    as_rank(&server, &tokens[0], typed).success();
}

#[test]
fn an_unknown_element_type_is_refused_at_creation() {
    let server = Server::start();
    server.world("v", 1);
    let create = "window create --world v bad --size 8 --info onesided_element_type=i65";
    let out = server.cli().words(create).run();
    out.code(3)
        .stderr_starts("onesided: MPI_ERR_INFO: onesided_element_type must name a datatype");
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
    let put = "put --window floats --target 0 1.5 -2.25";
    as_rank(&server, &tokens[0], put).success();
    let got = as_rank(
        &server,
        &tokens[0],
        "get --window floats --target 0 --count 2",
    );
    got.success();
    assert_eq!(got.stdout, "1.5 -2.25\n");
}
