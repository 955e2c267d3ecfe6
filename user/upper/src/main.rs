//! `upper`: copy the standard input to the standard output with ASCII letters made upper
//! case, until EOF: a filter for pipelines (`run seq 5 | upper -c 1`).
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

use ulib::{eprintln, io, stdio};

ulib::main!(main);

fn main(args: &[&str]) -> i32 {
    if args.len() > 1 {
        eprintln!("error: upper: takes no arguments (it reads the standard input)");
        return 2;
    }
    let mut buf = [0u8; 512];
    loop {
        match stdio::read(&mut buf) {
            Ok(0) => return 0,
            Ok(n) => {
                buf[..n].make_ascii_uppercase();
                io::write_all(&buf[..n]);
            }
            Err(e) => {
                eprintln!("error: upper: cannot read the standard input: {e}");
                return 1;
            }
        }
    }
}
