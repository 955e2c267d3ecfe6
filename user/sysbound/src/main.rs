//! `sysbound ROUNDS [report]`: a system-call-bound benchmark, the "Systemcall benchmark" of
//! `cargo xtask bench symmetry` (P2, Limited Symmetry, Fig. 3: a program that spends more
//! than half its time in the kernel).
//!
//! Each round does what a program that keeps data in a kernel object does: it fills a
//! 512-byte buffer (user work), creates a 4 KiB vregion on its own core
//! (`RES_OPEN("here/vregion/sb-PID")`: the kernel parses the name, checks rights, takes a
//! frame from the core's pool and zeroes it, enters it in the core's table), writes the
//! buffer into it and reads it back (`RES_WRITE`, `RES_READ`: copies through the kernel),
//! deletes it (`RES_CLOSE`: the frame goes back to the pool), asks for its pid
//! (`GETPID`), and checks what it read (user work). Most of its time is the kernel's; the
//! split is measured (its own report, below, and the cores' `MODES`), not assumed.
//!
//! With `report`, after the last round it sleeps for 1 ms, until the next tick (so the
//! scheduler charges its time to its record), and prints where its own time went, from its
//! `PROCESSES` record:
//! `BENCH {"fig":"self","prog":"sysbound","core":C,"rounds":N,"mode_ns":[user,kernel,lock,idle,interrupt]}`.
//! Exits 0, or 1 after printing the first failed call or wrong read.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use ulib::abi::res::Rights;
use ulib::abi::{ProcInfo, MODE_COUNT};
use ulib::{println, res, sys};

ulib::main!(main);

const SIZE: u64 = 4096;
const BUF: usize = 512;

fn main(args: &[&str]) -> i32 {
    let Some(rounds) = args.get(1).and_then(|a| a.parse::<u64>().ok()) else {
        println!("usage: sysbound ROUNDS [report]");
        return 2;
    };
    let report = args.get(2) == Some(&"report");
    let me = match sys::getpid() {
        Ok(p) => p,
        Err(e) => {
            println!("sysbound: getpid: {e}");
            return 1;
        }
    };
    let name = format!("here/vregion/sb-{}.{}", me.core(), me.serial());
    let mut out = [0u8; BUF];
    let mut back = [0u8; BUF];
    for round in 0..rounds {
        for (i, b) in out.iter_mut().enumerate() {
            *b = (round as usize).wrapping_mul(31).wrapping_add(i * 7) as u8;
        }
        let r = (|| {
            let id = res::open_vregion(&name, SIZE, Rights::OWNER_ALL)?;
            res::write(id, &out, 0)?;
            res::read(id, &mut back, 0)?;
            res::close(id)?;
            sys::getpid()
        })();
        match r {
            Ok(p) if p == me => {}
            Ok(p) => {
                println!("sysbound: getpid said {p}, not {me}");
                return 1;
            }
            Err(e) => {
                println!("sysbound: round {round}: {e}");
                return 1;
            }
        }
        if out != back {
            println!("sysbound: round {round}: read back other bytes than written");
            return 1;
        }
    }
    if report {
        return report_self(me, rounds);
    }
    0
}

/// Print this process's own time per mode (its `PROCESSES` record).
fn report_self(me: ulib::abi::Pid, rounds: u64) -> i32 {
    // Blocking once (until the next tick) makes the scheduler move the time so far into our
    // record.
    let _ = sys::sleep_ns(1_000_000);
    let mut buf = [ProcInfo::EMPTY; 64];
    let n = match sys::processes(&mut buf) {
        Ok(n) => n,
        Err(e) => {
            println!("sysbound: processes: {e}");
            return 1;
        }
    };
    let Some(p) = buf[..n].iter().find(|p| p.pid == me) else {
        println!("sysbound: not in the process list");
        return 1;
    };
    let mut ns = alloc::string::String::new();
    for (i, v) in p.mode_ns.iter().enumerate() {
        ns += &format!("{}{v}", if i == 0 { "" } else { "," });
    }
    debug_assert_eq!(p.mode_ns.len(), MODE_COUNT);
    println!(
        "BENCH {{\"fig\":\"self\",\"prog\":\"sysbound\",\"core\":{},\"rounds\":{rounds},\"mode_ns\":[{ns}]}}",
        p.core
    );
    0
}
