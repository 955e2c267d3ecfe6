//! `fsave [-a] FILE`: write the standard input, until EOF, into FILE on the disk (the file
//! service `fs`, `ulib::fs`): made new, or emptied first, or with `-a` appended to. The end
//! of a pipeline that writes the disk (`run seq 10 | fsave TEN.TXT`), and what the shell's
//! `run PROG > FILE` (`>>`: `-a`) puts after PROG. The file is closed (on the disk) when it
//! exits 0.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

use ulib::abi::Error;
use ulib::{eprintln, fs, stdio};

ulib::main!(main);

fn main(args: &[&str]) -> i32 {
    let (mode, name) = match args {
        [_, "-a", name] => (fs::MODE_APPEND, *name),
        [_, name] if !name.starts_with('-') => (fs::MODE_WRITE, *name),
        _ => {
            eprintln!("error: fsave: usage: fsave [-a] FILE (it reads the standard input)");
            return 2;
        }
    };
    let fd = match fs::open(name, mode) {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("error: fsave: {name}: {e}");
            return 1;
        }
    };
    let copied = copy_in(fd);
    let closed = fs::close(fd);
    match (copied, closed) {
        (Ok(()), Ok(())) => 0,
        (Err((what, e)), _) => {
            eprintln!("error: fsave: {}: {e}", what.unwrap_or(name));
            1
        }
        (Ok(()), Err(e)) => {
            eprintln!("error: fsave: {name}: closing: {e}");
            1
        }
    }
}

/// The standard input into `fd` until EOF; an error names the standard input, or (`None`)
/// the file.
fn copy_in(fd: fs::Fd) -> Result<(), (Option<&'static str>, Error)> {
    let mut buf = [0u8; 4096];
    loop {
        let n = match stdio::read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) => return Err((Some("the standard input"), e)),
        };
        let mut done = 0;
        while done < n {
            done += fs::write(fd, &buf[done..n]).map_err(|e| (None, e))?;
        }
    }
}
