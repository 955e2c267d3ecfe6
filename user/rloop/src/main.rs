//! `rloop CORE [N]`: creates and deletes a 4 KiB vregion on core CORE, N times (forever if
//! N is missing), so the RPCC tests have a requester that is almost always waiting for
//! another core: killing it then kills a requester in the middle of a remote call. Exits 0
//! after N rounds, 1 at the first failed call (printing it).
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use ulib::abi::res::Rights;
use ulib::{println, res};

ulib::main!(main);

fn main(args: &[&str]) -> i32 {
    let Some(core) = args.get(1).and_then(|a| a.parse::<usize>().ok()) else {
        println!("usage: rloop CORE [ROUNDS]");
        return 2;
    };
    let rounds = args.get(2).and_then(|a| a.parse::<u64>().ok());
    let name = alloc_name(core);
    let mut done = 0u64;
    while rounds.is_none_or(|n| done < n) {
        let id = match res::open_vregion(&name, 4096, Rights::OWNER_ALL) {
            Ok(id) => id,
            Err(e) => {
                println!("rloop: open {name}: {e}");
                return 1;
            }
        };
        if let Err(e) = res::close(id) {
            println!("rloop: close {name}: {e}");
            return 1;
        }
        done += 1;
    }
    0
}

fn alloc_name(core: usize) -> String {
    let me = ulib::sys::getpid().unwrap_or(ulib::abi::Pid(0));
    alloc::format!("c{core}/vregion/rloop-{}.{}", me.core(), me.serial())
}
