//! `wc`: count the lines, words and bytes of the standard input, until EOF, and print them
//! (`lines words bytes`): the end of a pipeline (`run seq 100 | wc -c 1`).
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

use ulib::{eprintln, println, stdio};

ulib::main!(main);

fn main(args: &[&str]) -> i32 {
    if args.len() > 1 {
        eprintln!("error: wc: takes no arguments (it reads the standard input)");
        return 2;
    }
    let (mut lines, mut words, mut bytes) = (0u64, 0u64, 0u64);
    let mut in_word = false;
    let mut buf = [0u8; 512];
    loop {
        let n = match stdio::read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                eprintln!("error: wc: cannot read the standard input: {e}");
                return 1;
            }
        };
        bytes += n as u64;
        for &b in &buf[..n] {
            if b == b'\n' {
                lines += 1;
            }
            let space = b.is_ascii_whitespace();
            if !space && !in_word {
                words += 1;
            }
            in_word = !space;
        }
    }
    println!("{lines} {words} {bytes}");
    0
}
