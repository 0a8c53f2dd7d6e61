//! The progress bar of file transfers is drawn only on a terminal: piped, stderr stays empty
//! (issue 17), and on a terminal (a pseudo-terminal here) it is drawn (the bar's estimate is
//! unit-tested in the binary's `progress` module).

use std::path::PathBuf;

use crate::{Cli, Server, TempDir};

/// The put of these tests, the file's path to follow.
const PUT: &str = "put --window blob --target 0 --from-file";

/// A server with world `p` of one rank and its window `blob` of 3 MiB, and a file of `data`
/// to put there: the server, the rank's token, the file's directory and the file.
fn a_window_and_a_file(data: &[u8]) -> (Server, String, TempDir, PathBuf) {
    let (server, tokens) = Server::with_window("p", 1, "blob", "--size 3145728");
    let dir = TempDir::new();
    let source = dir.0.join("in.bin");
    std::fs::write(&source, data).unwrap();
    (server, tokens[0].clone(), dir, source)
}

#[test]
fn file_transfers_draw_no_bar_when_stderr_is_not_a_terminal() {
    let data: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
    let (server, token, dir, source) = a_window_and_a_file(&data);
    let put = server.as_rank(&token).words(PUT).arg(&source).run();
    put.success();
    assert_eq!(put.stderr, "", "no bar without a terminal");
    let target = dir.0.join("out.bin");
    let get = server
        .as_rank(&token)
        .words("get --window blob --target 0 --count 3145728 --to-file")
        .arg(&target)
        .run();
    get.success();
    assert_eq!(get.stderr, "", "no bar without a terminal");
    assert_eq!(std::fs::read(&target).unwrap(), data);
}

/// `cli` run with its stderr on a pseudo-terminal: what it wrote there (read until the process
/// closed it), and whether it succeeded.
#[cfg(unix)]
fn on_a_terminal(cli: Cli) -> (String, bool) {
    use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
    use std::io::Read;

    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let terminal = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .unwrap();
    let mut child = cli
        // a terminal that draws (without TERM, indicatif takes it for a dumb one)
        .env("TERM", "xterm")
        .command()
        .stdout(std::process::Stdio::null())
        .stderr(terminal)
        .spawn()
        .unwrap();
    // the terminal's only other end is the child's stderr: reading ends when it exits
    let mut master = std::fs::File::from(master);
    let mut drawn = Vec::new();
    let reader = std::thread::spawn(move || {
        // Linux says EIO once the last slave closes; that is the end
        let _ = master.read_to_end(&mut drawn);
        drawn
    });
    let status = child.wait().unwrap();
    let drawn = reader.join().unwrap();
    (
        String::from_utf8_lossy(&drawn).into_owned(),
        status.success(),
    )
}

#[cfg(unix)]
#[test]
fn file_transfers_draw_a_bar_on_a_terminal() {
    let (server, token, _dir, source) = a_window_and_a_file(&[7u8; 3 << 20]);
    let (drawn, ok) = on_a_terminal(server.as_rank(&token).words(PUT).arg(&source));
    assert!(ok, "{drawn}");
    // the bar's text: acknowledged bytes of the total, the average rate and the time left
    assert!(drawn.contains("/3.00 MiB"), "no bar drawn: {drawn:?}");
    assert!(drawn.contains(" eta "), "no bar drawn: {drawn:?}");
}
