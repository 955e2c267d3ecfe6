//! `fcat FILE...`: write the files' bytes (from the file service `fs`, `ulib::fs`) to the
//! standard output, one after another: the start of a pipeline that reads the disk
//! (`run fcat IN.TXT | upper`), and what the shell's `run PROG < FILE` puts before PROG.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

use ulib::abi::Error;
use ulib::stdio::{self, Stream};
use ulib::{eprintln, fs};

ulib::main!(main);

fn main(args: &[&str]) -> i32 {
    if args.len() < 2 {
        eprintln!("error: fcat: usage: fcat FILE...");
        return 2;
    }
    for name in &args[1..] {
        match copy_out(name) {
            Ok(()) => {}
            // The reader went away (`run fcat F | hello`): Unix's SIGPIPE status.
            Err(Error::Gone) => return stdio::BROKEN_PIPE,
            Err(why) => {
                eprintln!("error: fcat: {name}: {why}");
                return 1;
            }
        }
    }
    0
}

/// Some of `bytes` to the standard output. Unlike `stdio::write`, a pipe whose reader went
/// away is `Gone` here rather than the end of the program: the file must be closed first.
fn out(bytes: &[u8]) -> Result<usize, Error> {
    match stdio::stdout() {
        Stream::Console => stdio::write(bytes),
        Stream::Pipe(id) => ulib::res::write(id, bytes, 0),
    }
}

/// `name`'s bytes to the standard output; the file is closed whatever happens.
fn copy_out(name: &str) -> Result<(), Error> {
    let fd = fs::open(name, fs::MODE_READ)?;
    let mut buf = [0u8; 4096];
    let r = loop {
        match fs::read(fd, &mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                let mut done = 0;
                while done < n {
                    match out(&buf[done..n]) {
                        Ok(k) => done += k,
                        Err(e) => {
                            let _ = fs::close(fd);
                            return Err(e);
                        }
                    }
                }
            }
            Err(e) => break Err(e),
        }
    };
    let closed = fs::close(fd);
    r.and(closed)
}
