//! What the CLI prints. A closed output (`knooppunt subscriptions list | head -1`) ends the
//! process quietly: what was asked is done, and nobody reads the rest. `println!` would
//! panic there instead (Rust ignores SIGPIPE), and a hub's log must never stop the hub.

use std::io::{self, Write};

/// `println!` to stdout; a closed stdout ends the process quietly.
macro_rules! say {
    () => {
        $crate::output::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}

/// `eprintln!` to stderr; a closed stderr loses the message and nothing else.
macro_rules! tell {
    ($($arg:tt)*) => {
        $crate::output::to_stderr(format_args!($($arg)*))
    };
}

/// One line to stdout.
pub(crate) fn line(args: std::fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| out.write_all(b"\n"));
    if let Err(error) = quietly_done_if_closed(written) {
        // A full disk under a redirect, say: what was asked may be done, its report is not.
        to_stderr(format_args!("knooppunt: cannot write the output: {error}"));
        std::process::exit(2);
    }
}

/// One line to stderr; its errors are nobody's to hear.
pub(crate) fn to_stderr(args: std::fmt::Arguments<'_>) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}

/// Ends the process quietly (exit 0) when `written` failed because the reader of the
/// output went away; other results are given back.
pub(crate) fn quietly_done_if_closed<T>(written: io::Result<T>) -> io::Result<T> {
    match written {
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => std::process::exit(0),
        other => other,
    }
}
