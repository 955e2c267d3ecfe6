//! `seq N [WORD]`: print `1` to `N`, one per line, each followed by ` WORD` if given: the
//! start of a pipeline (`run seq 1000 -c 1 | wc -c 0`).
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

use ulib::{eprintln, println};

ulib::main!(main);

fn main(args: &[&str]) -> i32 {
    let (n, word) = match args {
        [_, n] => (n.parse::<u64>(), None),
        [_, n, w] => (n.parse::<u64>(), Some(*w)),
        _ => (Ok(0), None),
    };
    let (Ok(n), 2..=3) = (n, args.len()) else {
        eprintln!("error: seq: usage: seq N [WORD]");
        return 2;
    };
    for i in 1..=n {
        match word {
            Some(w) => println!("{i} {w}"),
            None => println!("{i}"),
        }
    }
    0
}
