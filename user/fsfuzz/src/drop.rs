//! `fsfuzz drop FILE N`: a program that ends with a file open for writing, for the file
//! service's closing of files whose owners ended (`user/fsd`, `Server::close_orphans`).
//!
//! It writes N bytes (`fsmodel`'s data, seed 9) to FILE through one handle, registers the
//! function `fsfuzz.drop` to say it has (the script waits for it with `fn wait`), and then
//! sleeps, at most [`WAIT_NS`] (a hang guard), never closing the file: the script kills it.
//! A directory listing afterwards must show FILE with N bytes: the library writes a file's
//! size into its directory entry only at close, so without the server's close the entry
//! would say 0 and the host would see an empty file.

use ulib::fs;
use ulib::{println, sys};

/// How long it waits to be killed before it exits by itself (the file still open).
const WAIT_NS: u64 = 60_000_000_000;

pub fn run(name: &str, len: &str) -> i32 {
    let Some(len) = len
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=1 << 20).contains(n))
    else {
        println!("fsfuzz drop: N is a byte count from 1 to 1048576");
        return 2;
    };
    let data = fsmodel::data(9, len as u64);
    let fd = match fs::open(name, fs::MODE_WRITE) {
        Ok(fd) => fd,
        Err(e) => {
            println!("fsfuzz drop: open {name}: {e}");
            return 1;
        }
    };
    let mut done = 0;
    while done < data.len() {
        match fs::write(fd, &data[done..]) {
            Ok(0) => {
                println!("fsfuzz drop: write {name}: nothing written");
                return 1;
            }
            Ok(n) => done += n,
            Err(e) => {
                println!("fsfuzz drop: write {name}: {e}");
                return 1;
            }
        }
    }
    if let Err(e) = super::say_ready("fsfuzz.drop") {
        println!("fsfuzz drop: register fsfuzz.drop: {e}");
        return 1;
    }
    println!("fsfuzz drop: {len} bytes written to {name}, which stays open");
    let _ = sys::sleep_ns(WAIT_NS);
    println!("fsfuzz drop: not killed within the wait; ending with {name} open");
    1
}
