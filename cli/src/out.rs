//! Everything the CLI writes to stdout, and what happens when nobody reads it any more.
//!
//! `println!` panics when stdout is a pipe whose reader has gone (`onesided audit log W |
//! head -1`), and the process ends with exit code 101 and a panic message. Here a closed pipe
//! ends the process at once, quietly, with status 0, as ripgrep does: the reader took what it
//! wanted, and there is nobody left to tell anything. Any other failure to write (a full disk)
//! is reported on stderr with status 2, like an unwritable `--output`.
//!
//! Owns: every write to stdout (`outln!`, `line`, `bytes`) and what a failed write does.
//! Must not: be bypassed by `println!` anywhere in the binary, or decide what is written.

use std::io::{ErrorKind, Write};

/// Writes one line to stdout (through `outln!`).
pub fn line(text: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_fmt(text)
        .and_then(|()| stdout.write_all(b"\n"));
    if let Err(error) = written {
        failed(&error);
    }
}

/// Writes `bytes` to stdout as they are and flushes them.
pub fn bytes(bytes: &[u8]) {
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        failed(&error);
    }
}

/// Ends the process after a failed write to stdout: quietly with 0 when the reader is gone.
fn failed(error: &std::io::Error) -> ! {
    if error.kind() == ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("onesided: cannot write to stdout: {error}");
    std::process::exit(2);
}

/// `println!` that ends the process quietly when stdout's reader has gone (see [`line()`]).
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}
