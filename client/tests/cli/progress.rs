//! The progress bar of file transfers is drawn only on a terminal: piped, stderr stays empty
//! (issue 17; the bar's estimate is unit-tested in the binary's `progress` module).

use crate::{Server, TempDir};

#[test]
fn file_transfers_draw_no_bar_when_stderr_is_not_a_terminal() {
    let server = Server::start();
    let tokens = server.world("p", 1);
    server
        .cli()
        .args([
            "window", "create", "--world", "p", "blob", "--size", "3145728",
        ])
        .run()
        .success();
    let dir = TempDir::new();
    let data: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
    let source = dir.0.join("in.bin");
    std::fs::write(&source, &data).unwrap();
    let put = server
        .cli()
        .token(&tokens[0])
        .args(["put", "--window", "blob", "--target", "0", "--from-file"])
        .arg(&source)
        .run();
    put.success();
    assert_eq!(put.stderr, "", "no bar without a terminal");
    let target = dir.0.join("out.bin");
    let get = server
        .cli()
        .token(&tokens[0])
        .args([
            "get",
            "--window",
            "blob",
            "--target",
            "0",
            "--count",
            "3145728",
            "--to-file",
        ])
        .arg(&target)
        .run();
    get.success();
    assert_eq!(get.stderr, "", "no bar without a terminal");
    assert_eq!(std::fs::read(&target).unwrap(), data);
}
