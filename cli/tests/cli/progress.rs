//! The progress bar of file transfers is drawn only on a terminal: piped, stderr stays empty
//! (issue 17), and on a terminal (a pseudo-terminal here) it is drawn (the bar's estimate is
//! unit-tested in the binary's `progress` module).

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

/// `onesided ARGS` with its stderr on a pseudo-terminal: what it wrote there (read until the
/// process closed it), and whether it succeeded.
#[cfg(unix)]
fn on_a_terminal(server: &Server, token: &str, args: &[&std::ffi::OsStr]) -> (String, bool) {
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
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_onesided"))
        .env_clear()
        .env("ONESIDED_ADDR", &server.url)
        .env("ONESIDED_TOKEN", token)
        // a terminal that draws (without TERM, indicatif takes it for a dumb one)
        .env("TERM", "xterm")
        .args(args)
        .stdin(std::process::Stdio::null())
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
    let source = dir.0.join("in.bin");
    std::fs::write(&source, vec![7u8; 3 << 20]).unwrap();
    let args = ["put", "--window", "blob", "--target", "0", "--from-file"];
    let mut args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    args.push(source.as_os_str());
    let (drawn, ok) = on_a_terminal(&server, &tokens[0], &args);
    assert!(ok, "{drawn}");
    // the bar's text: acknowledged bytes of the total, the average rate and the time left
    assert!(drawn.contains("/3.00 MiB"), "no bar drawn: {drawn:?}");
    assert!(drawn.contains(" eta "), "no bar drawn: {drawn:?}");
}
