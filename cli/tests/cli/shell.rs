//! `onesided shell` without a terminal: lines from stdin, results on stdout.

use crate::{Output, Server};

/// `onesided shell --world WORLD --rank 0` with rank 0's token, `script` its stdin.
fn rank_0(server: &Server, tokens: &[String], world: &str, script: &str) -> Output {
    let shell = server.as_rank(&tokens[0]).words("shell --rank 0 --world");
    shell.arg(world).stdin(script).run()
}

#[test]
fn a_rank_works_its_epochs_by_hand() {
    let (server, tokens) = Server::with_window("s", 2, "W", "--count 4 --type i64");
    let script = "\
help
open W
lock exclusive 1
put 1 W[0..2] = 5,6
get 1 W[0..2] -> a
unlock 1
print a
get 1 W[0] -> b         # outside any epoch
unlock 1 !RMA_SYNC
print zzz
lock shared 1
get 1 W[1] -> c
get 1 W[indexed:1,0] -> d origin=vector:2,1,2   # elements 1 then 0, landing at 0 and 2
unlock 1
vars
";
    let out = rank_0(&server, &tokens, "s", script);
    assert!(out.stdout.contains("commands (one rank, the token's):"));
    out.has_row("window W (id ", "2 ranks, 4,4 elements of i64");
    out.prints_line("a = 5,6");
    // vars lists c and d
    out.prints_line("c = 6").prints_line("d = 6,0,5");
    out.stderr_has("onesided: line 8: MPI_ERR_RMA_SYNC: ");
    out.stdout_has("failed as expected: MPI_ERR_RMA_SYNC");
    out.stderr_has("line 10: zzz was never assigned");
    assert_eq!(out.stderr.lines().count(), 2, "{}", out.stderr);
    out.code(1);
}

/// A dynamic window opened in the shell: the rank attaches a region, stores and loads it by
/// name, reaches it with a put to itself, and detaches it once.
#[test]
fn a_rank_attaches_and_detaches_regions_of_a_dynamic_window() {
    let (server, tokens) = Server::with_window("d", 2, "D", "--flavor dynamic --type i32");
    let script = "\
open D
attach 3 -> r
store r[0] = 7
load r[0..3] -> a
lock exclusive 0
put 0 r[2] = 9
unlock 0
lock shared 0
get 0 r[0..3] -> b
unlock 0
print b
detach r
detach r !RMA_ATTACH
";
    let out = rank_0(&server, &tokens, "d", script);
    out.has_row("window D (id ", "elements of i32");
    out.prints_line("a = 7,0,0").prints_line("b = 7,0,9");
    out.stdout_has("failed as expected: MPI_ERR_RMA_ATTACH");
    assert_eq!(out.stderr, "", "{}", out.stderr);
    out.success();
}

#[test]
fn json_lines_and_a_clean_exit() {
    let (server, tokens) = Server::with_window("j", 1, "W", "--count 2 --type i32");
    let out = server
        .as_rank(&tokens[0])
        .words("--json shell")
        .stdin("open W type=u8\nstore W[1] = 200\nload W[0..2] -> v\nbarrier\nquit\nfence\n")
        .run();
    out.success();
    let documents = out.json_lines();
    assert_eq!(documents[0]["type"], "u8");
    assert_eq!(documents[0]["sizes"], serde_json::json!([8]));
    assert_eq!(documents[2]["value"], serde_json::json!([0, 200]));
    assert_eq!(documents.len(), 4, "nothing after quit runs");
}

#[test]
fn the_shell_checks_the_rank() {
    let server = Server::start();
    let tokens = server.world("r", 2);
    let out = server.as_rank(&tokens[1]).words("shell --rank 0").run();
    out.code(2);
}
