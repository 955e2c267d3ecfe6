//! `crash WHAT`: misbehave on purpose, for the fault-isolation tests.
//!
//! | WHAT | what it does | expected outcome |
//! |---|---|---|
//! | `page-fault` | writes to 0x10 (unmapped) | killed, page fault at 0x10 |
//! | `general-protection` | loads from a non-canonical address | killed, vector 13 |
//! | `invalid-opcode` | executes `ud2` | killed, vector 6 |
//! | `divide` | divides by zero | killed, vector 0 |
//! | `kernel-memory` | reads kernel text at 0xffff_ffff_8020_0000 | killed, page fault |
//! | `write-text` | writes a byte of its own code (text is shared with every other `crash`, read-only) | killed, page fault |
//! | `bad-pointer` | `CONSOLE_WRITE` with a kernel pointer and an unmapped one | exit 0 if both are refused with `BadAddress`, else 1 |
//! | `bad-syscall` | system call 999 | exit 0 if refused with `NoSuchCall`, else 1 |
//! | `hog [USER]` | (as USER if given: run it as the administrator) grows its heap 64 KiB at a time until refused, then asks for 2^64-1 bytes | exit 0 if refused with `Limit` (its user's share of the core) or `NoMemory` (the core's pool), and the huge request with `NoMemory` |
//! | `hog-hold [USER]` | like `hog`, then sleeps forever holding the memory | (killed by the test) |
//! | `threads` | starts 2,000 threads that end at once (on one shared stack they never touch) and joins none, then joins the first and the last | exit 0 if the first's value is gone (`NoSuchProcess`: the kernel keeps at most 256 ended threads' values) and the last's is there |
//! | `pipes [USER]` | (as USER if given) opens pipes of 64 KiB and fills each, until refused (at most 8,192), then closes them all | exits with how many it filled if refused with `Limit` or `NoMemory` at an open (a pipe's buffer is kernel heap, bounded per core and counted as its creator's memory), else 9999 |
//! | `zombies USER hold\|reap [CORE]` | becomes USER, then starts `nop` children (on CORE if given, ending each there with `kill`) and lets each end without waiting for it, until refused | prints how many and the error; `hold` then sleeps forever (killed by the test), `reap` collects them all and exits with their number (or 9999 if the refusal was not `Limit` or a child went missing) |
//! | `live-list PID` | asks for the live processes (`sys::live_processes`) | exit 0 if PID, which runs, is in the list or the list is refused as cut short (`Limit`); 1 if the list leaves it out |
//! | `outrank` | spawns `hello` at driver priority, above its own | exit 0 if refused with `Denied` |
//! | `kill-pid PID` | kills PID (not a descendant) | exit 0 if refused with `Denied` |
//! | `wait-timeout` | starts `spin`, waits 100 ms for it (must time out), reads the console without blocking (must return at once: nothing, or `NotSupported` on a core other than 0), kills the spinner and collects it | exit 0 if all behave |
//! | `orphan` | spawns `hello` and exits at once without waiting | exit 0; the kernel cleans up after the orphan |
//! | `spawn-exit CORE` | a thread starts `nop` on CORE while the main thread exits at once (the process ends while the spawn's answer is on its way) | exit 0; the kernel reaps the `nop` when it ends (its parent is gone) |
//! | `open-exit CORE N` | as `spawn-exit`, the child made by opening the process resource `cCORE/process/oeN` (`nop`, stopped) | exit 0; the child is the kernel's once its answer comes (its opener is gone) |
//! | `import-exit CORE N` | as `spawn-exit`, the child made on CORE by `MIGRATE_IMPORT` of an image of a stopped `nop` (the process resource `cHERE/process/ieN`, exported, its export given up, then closed) | exit 0; the kernel reaps the imported `nop` (its importer is gone) |
//! | `children-race CORE` | starts `nop` children on CORE (ending each there) until refused (its limit, L), collects 16 of them, then 32 threads each start one more there at once | exit 0 if exactly 16 of the 32 were made and all L children are collected, else 1 |
//! | `drop-user` | (run by the administrator or the kernel) becomes user 2000, which it may, then starts `crash escalate` as that user and waits for it | exit 0 if the child exits 0 |
//! | `read-console` | waits for console input like a shell at its prompt (`kernel/src/tests/init.rs` keeps it running and kills it) | exit 0 when a byte comes |
//! | `hold-file NAME` | opens NAME on the disk for writing (the file service `fs`), then faults as `page-fault` does, the file still open | killed; the next open of NAME works (`fsd` closes a dead owner's files) |
//! | `escalate` | (run as a user other than the administrator) tries to become user 1000, the administrator (1) and the kernel (0), and to power off; keeps its own user | exit 0 if every attempt is `Denied` and keeping its user works |
//!
//! An unknown or missing WHAT exits 2. A fault that does not happen exits 1.
#![no_std]
#![no_main]

extern crate alloc;

use core::arch::asm;
use core::sync::atomic::{AtomicU64, Ordering};
use ulib::abi::{syscall, Error, Pid, Priority};
use ulib::println;
use ulib::sys;
use ulib::sys::raw;

ulib::main!(main);

/// A kernel address (the kernel image is linked at 0xffff_ffff_8000_0000 + 2 MiB).
const KERNEL_ADDRESS: u64 = 0xffff_ffff_8020_0000;
/// A user address that is never mapped (the first 64 KiB stay empty).
const UNMAPPED: u64 = 0x10;

fn main(args: &[&str]) -> i32 {
    let what = args.get(1).copied().unwrap_or("");
    match what {
        // SAFETY: the instruction faults and the kernel ends this process; had it not, it
        // would have touched no memory that Rust code uses. (Likewise the next four.)
        "page-fault" => unsafe {
            asm!("mov byte ptr [{a}], 1", a = in(reg) UNMAPPED, options(nostack));
        },
        // SAFETY: as above.
        "general-protection" => unsafe {
            asm!("mov {a}, qword ptr [{a}]", a = inout(reg) 0x8000_0000_0000_0000u64 => _,
                 options(nostack, readonly));
        },
        // SAFETY: as above.
        "invalid-opcode" => unsafe {
            asm!("ud2", options(nostack, nomem));
        },
        // SAFETY: as above.
        "divide" => unsafe {
            asm!("div {d:e}", d = in(reg) 0u32, inout("eax") 1u32 => _, inout("edx") 0u32 => _,
                 options(nostack, nomem));
        },
        // SAFETY: as above.
        "kernel-memory" => unsafe {
            asm!("mov {a}, qword ptr [{a}]", a = inout(reg) KERNEL_ADDRESS => _,
                 options(nostack, readonly));
        },
        // SAFETY: as above: the page is read-only (and shared with every process of this
        // program), so the write faults before it changes anything.
        "write-text" => unsafe {
            asm!("mov byte ptr [{a}], 0xcc", a = in(reg) main as *const () as usize, options(nostack));
        },
        "bad-pointer" => return bad_pointer(),
        "bad-syscall" => return bad_syscall(),
        "hog" => return become_user(args.get(2)).map_or(1, |()| hog()),
        "pipes" => return become_user(args.get(2)).map_or(1, |()| pipes()),
        "threads" => return threads(),
        "zombies" => return zombies(args.get(2), args.get(3).copied(), args.get(4)),
        "live-list" => {
            let Some(pid) = args.get(2).and_then(|a| Pid::parse(a)) else {
                println!("crash: live-list needs a pid (CORE.SERIAL)");
                return 2;
            };
            return match sys::live_processes() {
                Ok(l) if l.iter().any(|p| p.pid == pid) => 0,
                // Cut short, and said so: the caller takes nobody for ended.
                Err(Error::Limit) => 0,
                Ok(_) => {
                    println!("crash live-list: {pid} runs but is missing from the list");
                    1
                }
                Err(e) => {
                    println!("crash live-list: {e}");
                    1
                }
            };
        }
        "hog-hold" => {
            let r = become_user(args.get(2)).map_or(1, |()| hog());
            loop {
                let _ = sys::sleep_ns(1_000_000_000);
                if r != 0 {
                    return r;
                }
            }
        }
        "outrank" => {
            return expect_denied(
                "outrank",
                sys::spawn("hello", &[], Priority::Driver).map(|_| ()),
            )
        }
        "kill-pid" => {
            let Some(pid) = args.get(2).and_then(|a| Pid::parse(a)) else {
                println!("crash: kill-pid needs a pid (CORE.SERIAL)");
                return 2;
            };
            return expect_denied("kill-pid", sys::kill(pid));
        }
        "hold-file" => {
            let Some(name) = args.get(2) else {
                println!("crash: hold-file needs a file name");
                return 2;
            };
            if let Err(e) = ulib::fs::open(name, ulib::fs::MODE_WRITE) {
                println!("crash: hold-file: cannot open {name}: {e}");
                return 1;
            }
            // SAFETY: as `page-fault`: the store faults and the kernel ends this process.
            unsafe {
                asm!("mov byte ptr [{a}], 1", a = in(reg) UNMAPPED, options(nostack));
            }
        }
        "orphan" => return orphan(),
        "spawn-exit" => return spawn_exit(args.get(2)),
        "open-exit" => return open_exit(args.get(2), args.get(3)),
        "import-exit" => return import_exit(args.get(2), args.get(3)),
        "children-race" => return children_race(args.get(2)),
        "drop-user" => return drop_user(),
        "escalate" => return escalate(),
        "wait-timeout" => return wait_timeout(),
        "read-console" => {
            let mut byte = [0u8; 1];
            return match sys::read(&mut byte) {
                Ok(_) => 0,
                Err(e) => {
                    println!("read-console: {e:?}");
                    1
                }
            };
        }
        _ => {
            println!(
                "crash: unknown case '{what}' (page-fault, general-protection, invalid-opcode, \
                 divide, kernel-memory, bad-pointer, bad-syscall)"
            );
            return 2;
        }
    }
    println!("crash: {what}: did not fault");
    1
}

fn bad_pointer() -> i32 {
    let mut ok = true;
    for (what, ptr) in [("kernel", KERNEL_ADDRESS), ("unmapped", UNMAPPED)] {
        // SAFETY: the kernel must check the pointer and refuse; it cannot harm this
        // program's memory because CONSOLE_WRITE only reads.
        let (rax, rdx) = unsafe { raw::syscall2(syscall::CONSOLE_WRITE, ptr, 16) };
        let r = syscall::decode(rax, rdx);
        if r != Err(Error::BadAddress) {
            println!("bad-pointer: {what} pointer {ptr:#x}: expected BadAddress, got {r:?}");
            ok = false;
        }
    }
    if ok {
        println!("bad-pointer: refused");
        0
    } else {
        1
    }
}

fn bad_syscall() -> i32 {
    // SAFETY: an undefined call number; the kernel must refuse it without side effects.
    let (rax, rdx) = unsafe { raw::syscall0(999) };
    match syscall::decode(rax, rdx) {
        Err(Error::NoSuchCall) => {
            println!("bad-syscall: refused");
            0
        }
        r => {
            println!("bad-syscall: expected NoSuchCall, got {r:?}");
            1
        }
    }
}

fn hog() -> i32 {
    const STEP: usize = 64 * 1024;
    let mut got = 0usize;
    let refused = loop {
        match sys::memory(STEP) {
            Ok(_) => got += STEP,
            Err(e) => break e,
        }
    };
    let huge = sys::memory(usize::MAX);
    println!(
        "hog: got {} KiB, then {refused:?}; 2^64-1 bytes: {huge:?}",
        got / 1024
    );
    i32::from(!(matches!(refused, Error::NoMemory | Error::Limit) && huge == Err(Error::NoMemory)))
}

/// A thread that ends at once with value 7, touching no memory (every such thread may
/// share one stack pointer).
// SAFETY: a naked function is all assembly: this one only loads two registers and makes
// THREAD_EXIT, which does not return (the `ud2` after it is never reached); it touches no
// stack or memory, so it needs neither a prologue nor a valid stack.
#[unsafe(naked)]
extern "C" fn end_at_once() -> ! {
    core::arch::naked_asm!(
        "mov eax, {exit}",
        "mov edi, 7",
        "syscall",
        "ud2",
        exit = const syscall::THREAD_EXIT,
    )
}

/// `threads`: ended threads nobody joins must not pile up in the kernel.
fn threads() -> i32 {
    const N: usize = 2000;
    let mut stack = [0u64; 64];
    let top = (stack.as_mut_ptr() as u64 + 64 * 8) & !15;
    let mut tids = alloc::vec::Vec::with_capacity(N);
    while tids.len() < N {
        // SAFETY: the thread starts at `end_at_once`, which ends it without touching its
        // stack or any memory.
        let (rax, rdx) = unsafe {
            raw::syscall3(
                syscall::THREAD_CREATE,
                end_at_once as *const () as u64,
                top,
                0,
            )
        };
        let r = syscall::decode(rax, rdx);
        match r {
            Ok(tid) => tids.push(tid),
            // Too many alive at once: let them end.
            Err(Error::NoMemory) => {
                let _ = sys::sleep_ns(1_000_000);
            }
            Err(e) => {
                println!("crash: threads: THREAD_CREATE: {e}");
                return 1;
            }
        }
    }
    // Every thread has ended once it can be joined: the last one is joined (waiting).
    let last = ulib::thread::join_id(tids[N - 1], 10_000_000_000);
    let first = ulib::thread::join_id(tids[0], 0);
    println!("crash: threads: {N} ended, the last joined: {last:?}, the first: {first:?}");
    i32::from(!(last == Ok(7) && first == Err(Error::NoSuchProcess)))
}

/// `pipes`: pipes of 64 KiB, each filled, until the kernel refuses one (the buffers are
/// kernel heap: before they counted as their creator's memory, this took the core's).
fn pipes() -> i32 {
    use ulib::abi::syscall::control;
    const CAPACITY: u64 = 64 * 1024;
    let data = alloc::vec![0x5au8; CAPACITY as usize];
    let mut open = alloc::vec::Vec::new();
    let me = sys::getpid().map_or(0, |p| p.serial());
    let refused = loop {
        if open.len() >= 8192 {
            break None;
        }
        let name = alloc::format!("here/pipe/crash-{me}-{}", open.len());
        let id = match ulib::res::open(
            &name,
            &CAPACITY.to_le_bytes(),
            ulib::abi::res::Rights::OWNER_ALL,
        ) {
            Ok(id) => id,
            Err(e) => break Some(e),
        };
        open.push(id);
        let held = [control::PIPE_READ_END, control::PIPE_WRITE_END]
            .iter()
            .all(|&end| ulib::res::control(id, control::PIPE_HOLD, end, 0).is_ok());
        if !held || ulib::res::write(id, &data, 0) != Ok(data.len()) {
            println!(
                "crash: pipes: pipe {} could not be held or filled",
                open.len()
            );
            break None;
        }
    };
    let made = open.len();
    for id in open {
        let _ = ulib::res::close(id);
    }
    println!("crash: pipes: {made} filled, then {refused:?}");
    if matches!(refused, Some(Error::Limit | Error::NoMemory)) {
        made as i32
    } else {
        9999
    }
}

/// Become the user named by `arg`, if any.
fn become_user(arg: Option<&&str>) -> Result<(), ()> {
    let Some(arg) = arg else { return Ok(()) };
    let Ok(user) = arg.parse::<u32>() else {
        println!("crash: '{arg}' is not a user number");
        return Err(());
    };
    ulib::res::setuser(ulib::abi::res::UserId(user)).map_err(|e| {
        println!("crash: setuser {user}: {e:?} (run it as the administrator)");
    })
}

/// `zombies USER hold|reap`: children that ended and were not waited for pile up until the
/// kernel says `Limit`.
fn zombies(user: Option<&&str>, then: Option<&str>, core: Option<&&str>) -> i32 {
    let core = core.map(|c| c.parse::<usize>());
    if user.is_none() || !matches!(then, Some("hold" | "reap")) || matches!(core, Some(Err(_))) {
        println!("crash: zombies USER hold|reap [CORE]");
        return 2;
    }
    let core = core.and_then(Result::ok);
    if become_user(user).is_err() {
        return 1;
    }
    let mut made = 0;
    let refused = loop {
        let started = match core {
            Some(c) => sys::spawn_on("nop", &[], Priority::App, c),
            None => sys::spawn("nop", &[], Priority::App),
        };
        match started {
            // A zombie, not a runner: here it runs to its end when we yield (it has this
            // priority too); on another core, which may be slow to run it, we end it.
            Ok(child) => {
                made += 1;
                if core.is_some() {
                    let _ = sys::kill(child);
                }
                let _ = sys::yield_now();
            }
            Err(e) => break e,
        }
    };
    println!("zombies: made {made}, then {refused:?}");
    if then == Some("hold") {
        loop {
            let _ = sys::sleep_ns(1_000_000_000);
        }
    }
    let mut reaped = 0;
    while sys::wait(None).is_ok() {
        reaped += 1;
    }
    if refused != Error::Limit || reaped != made {
        println!("zombies: reaped {reaped} of {made}");
        return 9999;
    }
    made
}

fn expect_denied(what: &str, r: Result<(), Error>) -> i32 {
    if r == Err(Error::Denied) {
        println!("{what}: refused");
        0
    } else {
        println!("{what}: expected Denied, got {r:?}");
        1
    }
}

fn orphan() -> i32 {
    match sys::spawn("hello", &["orphan"], Priority::App) {
        Ok(pid) => {
            println!("orphan: left {pid} behind");
            0
        }
        Err(e) => {
            println!("orphan: spawn failed: {e:?}");
            1
        }
    }
}

fn wait_timeout() -> i32 {
    let Ok(spinner) = sys::spawn("spin", &[], Priority::App) else {
        println!("wait-timeout: cannot start spin");
        return 1;
    };
    let timed_out = sys::wait_timeout(Some(spinner), 100_000_000);
    let mut buf = [0u8; 8];
    let read = sys::read_nonblocking(&mut buf);
    let killed = sys::kill(spinner);
    let collected = sys::wait(Some(spinner));
    let ok = matches!(timed_out, Err(Error::TimedOut))
        && matches!(read, Ok(0) | Err(Error::NotSupported))
        && killed.is_ok()
        && collected.is_ok_and(|(_, s)| s.how == ulib::abi::ENDED_KILLED);
    if !ok {
        println!("wait-timeout: wait {timed_out:?}, read {read:?}, kill {killed:?}, collect {collected:?}");
    }
    i32::from(!ok)
}

/// `drop-user`: an administrator's process may change its user; its child, created as user
/// 2000, is not the administrator's.
fn drop_user() -> i32 {
    use ulib::abi::res::UserId;
    if let Err(e) = ulib::res::setuser(UserId(2000)) {
        println!("drop-user: setuser 2000: {e:?} (run it as the administrator)");
        return 1;
    }
    let child = match sys::spawn("crash", &["escalate"], Priority::App) {
        Ok(p) => p,
        Err(e) => {
            println!("drop-user: spawn: {e:?}");
            return 1;
        }
    };
    match sys::wait(Some(child)) {
        Ok((_, s)) if s.how == ulib::abi::ENDED_EXIT && s.code == 0 => 0,
        other => {
            println!("drop-user: escalate ended with {other:?}");
            1
        }
    }
}

/// `escalate`: a process of user 2000 may not become anyone else, nor power off.
fn escalate() -> i32 {
    use ulib::abi::res::UserId;
    let mut failed = 0;
    for user in [1000, 1, 0] {
        let r = ulib::res::setuser(UserId(user));
        if r != Err(Error::Denied) {
            println!("escalate: setuser {user} gave {r:?}, expected Denied");
            failed += 1;
        }
    }
    if ulib::res::getuser() != Ok(UserId(2000)) {
        println!("escalate: the user changed: {:?}", ulib::res::getuser());
        failed += 1;
    }
    if let Err(e) = ulib::res::setuser(UserId(2000)) {
        println!("escalate: keeping its own user gave {e:?}");
        failed += 1;
    }
    let off = sys::poweroff();
    if off != Error::Denied {
        println!("escalate: poweroff gave {off:?}, expected Denied");
        failed += 1;
    }
    if failed == 0 {
        println!("escalate: refused");
    }
    i32::from(failed > 0)
}

/// `open-exit CORE N`: as `spawn-exit`, with the child made by opening the process
/// resource `cCORE/process/oeN` (`nop`, stopped).
fn open_exit(core: Option<&&str>, n: Option<&&str>) -> i32 {
    let parse = |a: Option<&&str>| a.and_then(|a| a.parse::<u32>().ok());
    let (Some(core), Some(n)) = (parse(core), parse(n)) else {
        println!("crash: open-exit needs a core and a number");
        return 2;
    };
    fn opener(arg: u64) -> u64 {
        let name = alloc::format!("c{}/process/oe{}", arg >> 32, arg & 0xffff_ffff);
        let _ = ulib::res::open_process(&name, "nop", &[], ulib::abi::res::Rights::OWNER_ALL);
        0
    }
    if ulib::thread::spawn(opener, u64::from(core) << 32 | u64::from(n)).is_err() {
        return 1;
    }
    let _ = sys::yield_now();
    0
}

/// `children-race CORE`: the limit of children holds for children made on another core by
/// several threads at once, each of whose requests waits there for its answer.
fn children_race(core: Option<&&str>) -> i32 {
    const FREED: usize = 16;
    const RACERS: usize = 32;
    let Some(core) = core.and_then(|c| c.parse::<u64>().ok()) else {
        println!("crash: children-race needs a core");
        return 2;
    };
    let mut made = 0;
    let refused = loop {
        match sys::spawn_on("nop", &[], Priority::App, core as usize) {
            // Ended at once (there it may be slow to run), so that the one limit met is
            // the children's, not its user's share of that core's memory.
            Ok(child) => {
                made += 1;
                let _ = sys::kill(child);
            }
            Err(e) => break e,
        }
    };
    let freed = (0..FREED).filter(|_| sys::wait(None).is_ok()).count();
    fn racer(core: u64) -> u64 {
        u64::from(sys::spawn_on("nop", &[], Priority::App, core as usize).is_ok())
    }
    let racers: alloc::vec::Vec<_> = (0..RACERS)
        .filter_map(|_| ulib::thread::spawn(racer, core).ok())
        .collect();
    let started = racers.len();
    let raced: u64 = racers.into_iter().map(|t| t.join().unwrap_or(0)).sum();
    let mut collected = freed;
    while sys::wait(None).is_ok() {
        collected += 1;
    }
    let ok = refused == Error::Limit
        && freed == FREED
        && started == RACERS
        && raced == FREED as u64
        && collected == made + FREED;
    println!(
        "children-race: {made} made, then {refused:?}; {freed} collected; {raced} of {started} racers made one; {collected} collected in all"
    );
    i32::from(!ok)
}

/// The image `import-exit`'s thread imports: its address and length (a leaked buffer).
static IMAGE_AT: AtomicU64 = AtomicU64::new(0);
static IMAGE_LEN: AtomicU64 = AtomicU64::new(0);

/// `import-exit CORE N`: as `spawn-exit`, with the child made by importing an image.
fn import_exit(core: Option<&&str>, n: Option<&&str>) -> i32 {
    let parse = |a: Option<&&str>| a.and_then(|a| a.parse::<u64>().ok());
    let (Some(core), Some(n)) = (parse(core), parse(n)) else {
        println!("crash: import-exit needs a core and a number");
        return 2;
    };
    let image = match stopped_nop_image(n) {
        Ok(image) => image,
        Err((step, e)) => {
            println!("crash: import-exit: making the image: {step}: {e}");
            return 1;
        }
    };
    IMAGE_AT.store(image.as_ptr() as u64, Ordering::Relaxed);
    IMAGE_LEN.store(image.len() as u64, Ordering::Relaxed);
    fn importer(core: u64) -> u64 {
        let (at, len) = (
            IMAGE_AT.load(Ordering::Relaxed),
            IMAGE_LEN.load(Ordering::Relaxed),
        );
        // SAFETY: the kernel reads the image at `at` (a leaked buffer of `len` bytes).
        let _ = unsafe { raw::syscall3(syscall::MIGRATE_IMPORT, at, len, core) };
        0
    }
    if ulib::thread::spawn(importer, core).is_err() {
        return 1;
    }
    let _ = sys::yield_now();
    0
}

/// An image of a `nop` that never ran (opened stopped as `cHERE/process/ieN`, exported,
/// its export given up, then closed: the kernel ends it), in a buffer that lives for good.
fn stopped_nop_image(n: u64) -> Result<&'static [u8], (&'static str, Error)> {
    let here = sys::core().map_err(|e| ("core", e))?;
    let name = alloc::format!("c{here}/process/ie{n}");
    let r = ulib::res::open_process(&name, "nop", &[], ulib::abi::res::Rights::OWNER_ALL)
        .map_err(|e| ("open", e))?;
    let child = ulib::res::pid_of(r).map_err(|e| ("pid", e))?;
    let mut buf = alloc::vec![0u8; 1 << 20];
    let exported = sys::migrate_export(child, &mut buf);
    let finished = exported.and_then(|_| sys::migrate_finish(child, None));
    let closed = ulib::res::close(r);
    let len = exported.map_err(|e| ("export", e))?;
    finished.map_err(|e| ("finish", e))?;
    closed.map_err(|e| ("close", e))?;
    buf.truncate(len);
    Ok(buf.leak())
}

/// `spawn-exit CORE`: a thread starts `nop` on CORE while this (main) thread ends the
/// process, most often while the spawn's answer is on its way back.
fn spawn_exit(core: Option<&&str>) -> i32 {
    let Some(core) = core.and_then(|c| c.parse::<u64>().ok()) else {
        println!("crash: spawn-exit needs a core");
        return 2;
    };
    fn spawner(core: u64) -> u64 {
        let _ = sys::spawn_on("nop", &[], Priority::App, core as usize);
        0
    }
    if ulib::thread::spawn(spawner, core).is_err() {
        return 1;
    }
    let _ = sys::yield_now();
    0
}
