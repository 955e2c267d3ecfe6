//! `movecheck`: processes moved as images (`MIGRATE_EXPORT`, `MIGRATE_IMPORT`,
//! `MIGRATE_FINISH`; `libs/procimage`), on one machine, the kernel half of moving a process
//! to another machine (`migrate PID -m M` in the shell carries the same image over the
//! network).
//!
//! - `movecheck roam N stay|core C|machine M`: the process that moves. It takes N steps
//!   (20 ms each) that leave their mark in its heap, its stack and an SSE register, then,
//!   unless `stay`, takes more until it runs on core C or machine M (it moved there: at
//!   most 120 s, else exit 4), then N more; moved to machine M, a file name `mM:` must
//!   then name its own machine's file (exit 5 else);
//!   it exits 0 if every mark adds up (its memory and registers came along), else 3.
//! - `movecheck shared`: holds a vregion attached (refused to move), until killed.
//! - `movecheck bench M N`: the cost of moving a process to another core and to machine M
//!   (`bench`, for `cargo xtask bench machines`); `movecheck park` is what it moves.
//! - `movecheck move M`: a roamer moved to machine M by `ulib::mach::migrate` must end
//!   there with its sums right (`machines` lossy test: 5% of frames dropped, 5% doubled);
//!   `movecheck move-down M`: a move to machine M, down, is `Gone` and the roamer runs on
//!   here (`machines` killed test).
//! - `movecheck local`: the checks, one line each and `movecheck local: ok` (exit 0) if all
//!   hold: a roamer exported and imported on another core, whose copy finishes its work
//!   there while the original ends `ENDED_MOVED_AWAY` naming the copy; a move given up
//!   (the roamer runs on); refusals (itself, a process not its descendant, a buffer too
//!   small, which says the size needed, a bad buffer, shared memory, a move already under
//!   way, a finish by another process than the exporter, a finish of a process killed
//!   after its export); 15 bad images, each
//!   refused with its error; an image whose `RFLAGS` and `MXCSR` ask for what user mode
//!   may not have (the copy runs, without them); one whose `rip` is unmapped (only the
//!   copy faults); 60 images with random bytes changed (each refused, or its process
//!   killed). The kernel going on is the rest of the proof.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;
use procimage::{Header, Page};
use ulib::abi::syscall as nr;
use ulib::abi::{Error, Pid, Priority, ENDED_EXIT, ENDED_FAULT, ENDED_MOVED_AWAY};
use ulib::{println, sys};

mod bench;

ulib::main!(main);

/// One step of the roamer.
const STEP_NS: u64 = 20_000_000;
/// The roamer waits at most this many steps to be moved.
const MOVE_WAIT_STEPS: u64 = 6_000;

fn main(args: &[&str]) -> i32 {
    match args {
        [_, "roam", n, rest @ ..] => {
            let until = match rest {
                ["stay"] => Some(Until::Stay),
                ["core", c] => c.parse().ok().map(Until::Core),
                ["machine", m] => m.parse().ok().map(Until::Machine),
                _ => None,
            };
            match (n.parse(), until) {
                (Ok(n), Some(until)) => roam(n, until),
                _ => usage(),
            }
        }
        [_, "shared"] => shared(),
        [_, "park"] => {
            // Asleep until killed (at most 120 s): what `bench` moves.
            for _ in 0..MOVE_WAIT_STEPS {
                let _ = sys::sleep_ns(STEP_NS);
            }
            0
        }
        [_, "bench", m, n] => match (m.parse(), n.parse()) {
            (Ok(m), Ok(n)) => bench::bench(m, n),
            _ => usage(),
        },
        [_, "move", m] => match m.parse() {
            Ok(m) => move_to(m),
            Err(_) => usage(),
        },
        [_, "move-down", m] => match m.parse() {
            Ok(m) => move_to_down(m),
            Err(_) => usage(),
        },
        [_, "finish", pid] => match Pid::parse(pid) {
            // Another process's move is not this one's to end.
            Some(pid) => match sys::migrate_finish(pid, None) {
                Err(Error::Denied) => 0,
                other => {
                    println!("movecheck finish {pid}: {other:?}, want Denied");
                    1
                }
            },
            None => usage(),
        },
        [_, "local"] => local(),
        _ => usage(),
    }
}

fn usage() -> i32 {
    println!(
        "movecheck: usage: movecheck local | move M | move-down M | roam N stay|core C|machine M \
         | shared | finish PID | park | bench M N"
    );
    2
}

/// Where the roamer waits to be moved to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Until {
    Stay,
    Core(usize),
    Machine(u8),
}

/// Is this process where `until` says?
fn arrived(until: Until) -> bool {
    match until {
        Until::Stay => true,
        Until::Core(c) => sys::core() == Ok(c),
        Until::Machine(m) => ulib::mach::this_machine() == Some(m),
    }
}

fn roam(n: u64, until: Until) -> i32 {
    let mut heap: Vec<u64> = Vec::new();
    let mut stack = [0u64; 64];
    let mut half = 0.0f64;
    let mut step = |i: u64| {
        heap.push(i * i + 7);
        stack[(i % 64) as usize] += i;
        half += core::hint::black_box(i as f64) * 0.5;
        let _ = sys::sleep_ns(STEP_NS);
    };
    // A file name of the machine it is bound for: another machine's here; its own there
    // (asked here first, so that an answer kept across the move would show).
    let bound_for = match until {
        Until::Machine(m) => Some(alloc::format!("m{m}:X")),
        _ => None,
    };
    let elsewhere = bound_for.as_deref().map(ulib::fs::machine_named);
    let mut i = 0;
    while i < n {
        step(i);
        i += 1;
    }
    if until != Until::Stay {
        let mut waited = 0;
        while !arrived(until) {
            if waited == MOVE_WAIT_STEPS {
                println!("movecheck roam: never moved");
                return 4;
            }
            step(i);
            i += 1;
            waited += 1;
        }
        for _ in 0..n {
            step(i);
            i += 1;
        }
        if let (Some(name), Some(Some(_))) = (&bound_for, elsewhere) {
            if let Some(m) = ulib::fs::machine_named(name) {
                println!("movecheck roam: arrived, but {name} still names machine {m} as another");
                return 5;
            }
        }
    }
    let sum: u64 = heap.iter().sum();
    let want = (i.saturating_sub(1)) * i * (2 * i).saturating_sub(1) / 6 + 7 * i;
    let stacked: u64 = stack.iter().sum();
    let triangle = i * i.saturating_sub(1) / 2;
    let core = sys::core().unwrap_or(usize::MAX);
    if sum == want && stacked == triangle && half == triangle as f64 * 0.5 {
        println!("movecheck roam: {i} steps add up, on core {core}");
        0
    } else {
        println!("movecheck roam: {i} steps do not add up: {sum} {stacked} {half}");
        3
    }
}

fn shared() -> i32 {
    let attached = ulib::res::open_vregion(
        "here/vregion/movecheck",
        4096,
        ulib::abi::res::Rights::OWNER_ALL,
    )
    .and_then(|r| ulib::res::attach_here(r, 0x5700_0000_0000, true));
    if let Err(e) = attached {
        println!("movecheck shared: {e}");
        return 1;
    }
    for _ in 0..MOVE_WAIT_STEPS {
        let _ = sys::sleep_ns(STEP_NS);
    }
    0
}

/// `move M`: a roamer of this machine moved to machine M (`ulib::mach::migrate`), which
/// must end there with its sums right, its status brought back here.
fn move_to(m: u8) -> i32 {
    let spelled = alloc::format!("{m}");
    let roamer = match sys::spawn(
        "movecheck",
        &["roam", "10", "machine", &spelled],
        Priority::App,
    ) {
        Ok(p) => p,
        Err(e) => {
            println!("movecheck move: spawn: {e}");
            return 1;
        }
    };
    let start = sys::clock_ns().unwrap_or(0);
    let (there, bytes) = match ulib::mach::migrate(roamer, m, None) {
        Ok(r) => r,
        Err(e) => {
            println!("movecheck move: migrate to machine {m}: {e}");
            let _ = sys::kill(roamer);
            let _ = sys::wait(Some(roamer));
            return 1;
        }
    };
    let ms = sys::clock_ns().unwrap_or(0).saturating_sub(start) / 1_000_000;
    let here = sys::wait(Some(roamer));
    let away = ulib::mach::wait(&there);
    let spelled = ulib::mach::spell_pid(there.machine, there.pid);
    match (here, away) {
        (Ok((_, h)), Ok(a)) if h.how == ENDED_MOVED_AWAY && a.how == ENDED_EXIT && a.code == 0 => {
            println!(
                "movecheck move: ok, {roamer} went on as {spelled} ({bytes} bytes in {ms} ms)"
            );
            0
        }
        (here, away) => {
            println!("movecheck move: {roamer} here {here:?}, {spelled} there {away:?}");
            1
        }
    }
}

/// `move-down M`: a move to machine M, which is down, fails (`Gone`), and the roamer runs
/// on here.
fn move_to_down(m: u8) -> i32 {
    // Long enough (1 s) not to end before its export, however slow this program is.
    let roamer = match sys::spawn("movecheck", &["roam", "50", "stay"], Priority::App) {
        Ok(p) => p,
        Err(e) => {
            println!("movecheck move-down: spawn: {e}");
            return 1;
        }
    };
    let moved = ulib::mach::migrate(roamer, m, None);
    let ran = sys::wait(Some(roamer));
    match (moved, ran) {
        (Err(Error::Gone), Ok((_, st))) if st.how == ENDED_EXIT && st.code == 0 => {
            println!("movecheck move-down: ok, the move to machine {m} was Gone and {roamer} ran on here");
            0
        }
        (moved, ran) => {
            println!("movecheck move-down: the move {moved:?}, the roamer {ran:?}");
            1
        }
    }
}

/// The checks' tally.
struct Checks {
    failed: u32,
}

impl Checks {
    fn expect(&mut self, what: &str, got: Result<u64, Error>, want: Error) {
        match got {
            Err(e) if e == want => println!("movecheck: {what}: {e} (as it should be)"),
            Err(e) => self.fail(what, format_args!("{e}, want {want}")),
            Ok(v) => {
                // A process was started: it must not run on.
                if v > 0xffff {
                    let _ = sys::kill(Pid(v));
                    let _ = sys::wait(Some(Pid(v)));
                }
                self.fail(what, format_args!("accepted ({v:#x}), want {want}"))
            }
        }
    }

    fn fail(&mut self, what: &str, why: core::fmt::Arguments) {
        self.failed += 1;
        println!("movecheck: {what}: {why}: FAILED");
    }

    fn ended(&mut self, what: &str, pid: Pid, how: u64, code: u64) {
        match sys::wait(Some(pid)) {
            Ok((_, st)) if st.how == how && (how == ENDED_FAULT || st.code == code) => {
                println!("movecheck: {what}: ended as it should (how {how})")
            }
            Ok((_, st)) => self.fail(what, format_args!("ended how {} code {}", st.how, st.code)),
            Err(e) => self.fail(what, format_args!("wait: {e}")),
        }
    }
}

fn raw_export(pid: Pid, ptr: u64, len: u64) -> Result<u64, Error> {
    // SAFETY: the kernel checks the buffer; a bad one is the point of the call.
    let (a, d) = unsafe { sys::raw::syscall3(nr::MIGRATE_EXPORT, pid.0, ptr, len) };
    nr::decode(a, d)
}

fn raw_import(ptr: u64, len: u64, core: u64) -> Result<u64, Error> {
    // SAFETY: as above.
    let (a, d) = unsafe { sys::raw::syscall3(nr::MIGRATE_IMPORT, ptr, len, core) };
    nr::decode(a, d)
}

fn import(image: &[u8], core: usize) -> Result<u64, Error> {
    raw_import(image.as_ptr() as u64, image.len() as u64, core as u64)
}

fn spawn_roamer(core: Option<usize>) -> Result<Pid, Error> {
    let core = core.map(|c| alloc::format!("{c}"));
    let args = match &core {
        Some(c) => vec!["roam", "10", "core", c.as_str()],
        None => vec!["roam", "10", "stay"],
    };
    sys::spawn("movecheck", &args, ulib::abi::Priority::App)
}

/// Export `pid` into a buffer large enough.
fn export(pid: Pid) -> Result<Vec<u8>, Error> {
    let mut buf = vec![0u8; 1 << 20];
    let n = sys::migrate_export(pid, &mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

fn header_of(image: &[u8]) -> Header {
    bytemuck::pod_read_unaligned(&image[..procimage::pages_at()])
}

fn with_header(image: &[u8], f: impl FnOnce(&mut Header)) -> Vec<u8> {
    let mut h = header_of(image);
    f(&mut h);
    let mut out = image.to_vec();
    out[..procimage::pages_at()].copy_from_slice(bytemuck::bytes_of(&h));
    out
}

fn with_page(image: &[u8], i: usize, f: impl FnOnce(&mut Page)) -> Vec<u8> {
    let at = procimage::pages_at() + i * 16;
    let mut p: Page = bytemuck::pod_read_unaligned(&image[at..at + 16]);
    f(&mut p);
    let mut out = image.to_vec();
    out[at..at + 16].copy_from_slice(bytemuck::bytes_of(&p));
    out
}

pub(crate) fn other_core() -> usize {
    let mut cores = [ulib::abi::CoreInfo::default(); ulib::abi::MAX_CORES];
    let n = sys::cores(&mut cores).unwrap_or(0);
    let here = sys::core().unwrap_or(0);
    cores[..n]
        .iter()
        .filter(|c| c.online != 0)
        .map(|c| c.core as usize)
        .find(|&c| c != here)
        .unwrap_or(here)
}

fn local() -> i32 {
    let mut c = Checks { failed: 0 };
    let me = sys::getpid().unwrap_or(Pid(0));
    c.expect(
        "export of itself",
        raw_export(me, 0, 0),
        Error::InvalidArgument,
    );
    let procs = sys::live_processes().unwrap_or_default();
    if let Some(parent) = procs.iter().find(|p| p.pid == me).map(|p| p.parent) {
        c.expect(
            "export of its parent",
            raw_export(parent, 0, 0),
            Error::Denied,
        );
    }
    let there = other_core();
    let roamer = match spawn_roamer(Some(there)) {
        Ok(p) => p,
        Err(e) => {
            println!("movecheck: spawn: {e}: FAILED");
            return 1;
        }
    };
    let mut small = [0u8; 16];
    let got = raw_export(roamer, small.as_mut_ptr() as u64, 16);
    c.expect("a 16-byte buffer", got, Error::TooLong);
    let need = u64::from_le_bytes(small[..8].try_into().unwrap_or([0; 8]));
    if need < procimage::len_of(1) as u64 {
        c.fail("the size needed", format_args!("{need}"));
    }
    c.expect(
        "a buffer in no mapping",
        raw_export(roamer, 0x10, 1 << 20),
        Error::BadAddress,
    );
    let image = match export(roamer) {
        Ok(i) => i,
        Err(e) => {
            c.fail("export", format_args!("{e}"));
            let _ = sys::kill(roamer);
            return 1;
        }
    };
    println!("movecheck: exported {roamer}: {} bytes", image.len());
    let h = header_of(&image);
    // (Not the size said before: the roamer may have run, and grown, since.)
    if procimage::check(&h, image.len()).is_err() {
        c.fail(
            "the image's header",
            format_args!("{:?}", procimage::check(&h, image.len())),
        );
    }
    c.expect(
        "export again while exported",
        raw_export(roamer, 0, 0),
        Error::Busy,
    );
    // Only the exporter ends the move: a sibling's finish is Denied.
    let spelled = alloc::format!("{roamer}");
    match sys::spawn("movecheck", &["finish", &spelled], ulib::abi::Priority::App) {
        Ok(sibling) => c.ended("another process finishing the move", sibling, ENDED_EXIT, 0),
        Err(e) => c.fail("spawn a finisher", format_args!("{e}")),
    }
    bad_images(&mut c, &image);
    // The copy, with what user mode may not have asked for in its RFLAGS and MXCSR.
    let greedy = with_header(&image, |h| {
        h.regs[procimage::RFLAGS] |= 3 << 12 | 1 << 8 | 1 << 14 | 1 << 18;
        h.fx[3] |= 0xffff_0000;
    });
    match import(&greedy, there) {
        Ok(copy) => {
            let copy = Pid(copy);
            println!("movecheck: imported as {copy} on core {there}");
            match sys::migrate_finish(roamer, Some((copy.machine(), copy))) {
                Ok(()) => c.ended("the original", roamer, ENDED_MOVED_AWAY, copy.0),
                Err(e) => c.fail("finish", format_args!("{e}")),
            }
            c.ended("the copy, its state intact", copy, ENDED_EXIT, 0);
        }
        Err(e) => {
            c.fail("import", format_args!("{e}"));
            let _ = sys::migrate_finish(roamer, None);
            let _ = sys::kill(roamer);
            let _ = sys::wait(Some(roamer));
        }
    }
    // An unmapped rip: only the copy faults.
    match import(
        &with_header(&image, |h| h.regs[procimage::RIP] = 0x1000),
        there,
    ) {
        Ok(p) => c.ended("a copy at an unmapped rip", Pid(p), ENDED_FAULT, 0),
        Err(e) => c.fail("a copy at an unmapped rip", format_args!("{e}")),
    }
    fuzz(&mut c, &image);
    given_up(&mut c);
    if let Ok(child) = sys::spawn("movecheck", &["shared"], ulib::abi::Priority::App) {
        // Once it has attached (it sleeps then).
        let mut got = Err(Error::Busy);
        for _ in 0..500 {
            let _ = sys::sleep_ns(STEP_NS);
            got = raw_export(child, 0, 0);
            if got != Err(Error::TooLong) && got != Err(Error::BadAddress) {
                break;
            }
        }
        c.expect("a process with shared memory", got, Error::NotSupported);
        let _ = sys::kill(child);
        let _ = sys::wait(Some(child));
    }
    if c.failed == 0 {
        println!("movecheck local: ok");
        0
    } else {
        println!("movecheck local: {} failed", c.failed);
        1
    }
}

/// Images that must be refused, each with its error.
fn bad_images(c: &mut Checks, image: &[u8]) {
    let here = sys::core().unwrap_or(0);
    let len = image.len() as u64;
    let ptr = image.as_ptr() as u64;
    c.expect(
        "an image in no mapping",
        raw_import(0x10, len, 0),
        Error::BadAddress,
    );
    c.expect(
        "an image above MAX_MOVE_IMAGE",
        raw_import(ptr, nr::MAX_MOVE_IMAGE + 1, 0),
        Error::TooLong,
    );
    c.expect(
        "an image cut short",
        import(&image[..image.len() - 1], here),
        Error::InvalidArgument,
    );
    c.expect(
        "half a header",
        import(&image[..100], here),
        Error::InvalidArgument,
    );
    c.expect("no core 99", raw_import(ptr, len, 99), Error::NoSuchCore);
    let first: Page = bytemuck::pod_read_unaligned(&image[procimage::pages_at()..][..16]);
    let cases: [(&str, Vec<u8>, Error); 11] = [
        (
            "its magic broken",
            with_header(image, |h| h.magic[0] = b'X'),
            Error::InvalidArgument,
        ),
        (
            "another version",
            with_header(image, |h| h.version = 9),
            Error::InvalidArgument,
        ),
        (
            "a million pages",
            with_header(image, |h| h.pages = 1 << 20),
            Error::TooLong,
        ),
        (
            "a name not UTF-8",
            with_header(image, |h| h.name[0] = 0xff),
            Error::InvalidArgument,
        ),
        (
            "a driver's priority",
            with_header(image, |h| h.priority = 0),
            Error::Denied,
        ),
        (
            "a kernel rip",
            with_header(image, |h| h.regs[procimage::RIP] = 0xffff_8000_0000_1000),
            Error::InvalidArgument,
        ),
        (
            "a heap end not page-aligned",
            with_header(image, |h| h.heap_end += 1),
            Error::InvalidArgument,
        ),
        (
            "a page not aligned",
            with_page(image, 0, |p| p.addr += 8),
            Error::InvalidArgument,
        ),
        (
            "a page in the kernel's half",
            with_page(image, 1, |p| p.addr = 0xffff_8000_0000_0000),
            Error::InvalidArgument,
        ),
        (
            "a page twice",
            with_page(image, 1, |p| p.addr = first.addr),
            Error::InvalidArgument,
        ),
        (
            "unknown page flags",
            with_page(image, 0, |p| p.flags = 8),
            Error::InvalidArgument,
        ),
    ];
    for (what, bad, want) in cases {
        c.expect(what, import(&bad, here), want);
    }
}

/// 60 images with a few random bytes of the header and page list changed: each is refused
/// or makes a process, which is killed (whatever it does, it is only itself).
fn fuzz(c: &mut Checks, image: &[u8]) {
    let here = sys::core().unwrap_or(0);
    let h = header_of(image);
    let meta = procimage::data_at(h.pages as usize);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut refused, mut started) = (0, 0);
    for _ in 0..60 {
        let mut bad = image.to_vec();
        for _ in 0..1 + next() % 4 {
            let at = (next() % meta as u64) as usize;
            bad[at] = next() as u8;
        }
        match import(&bad, here) {
            Ok(p) => {
                started += 1;
                let _ = sys::kill(Pid(p));
                if let Err(e) = sys::wait(Some(Pid(p))) {
                    c.fail("a fuzzed image's process", format_args!("wait: {e}"));
                }
            }
            Err(_) => refused += 1,
        }
    }
    println!("movecheck: 60 fuzzed images: {refused} refused, {started} started and killed");
}

/// A move given up: the process runs on where it was.
fn given_up(c: &mut Checks) {
    let Ok(stayer) = spawn_roamer(None) else {
        c.fail("spawn", format_args!("a roamer that stays"));
        return;
    };
    c.expect(
        "finishing a move never started",
        sys::migrate_finish(stayer, Some((1, Pid::on(1, 0, 5)))).map(|()| 0),
        Error::InvalidArgument,
    );
    // A new pid that is not the named machine's (a pid carries its machine).
    let exported = export(stayer);
    if exported.is_ok() {
        c.expect(
            "finishing a move with another machine's pid",
            sys::migrate_finish(stayer, Some((1, Pid::on(2, 0, 5)))).map(|()| 0),
            Error::InvalidArgument,
        );
    }
    match exported.and_then(|_| sys::migrate_finish(stayer, None)) {
        Ok(()) => println!("movecheck: a move given up"),
        Err(e) => c.fail("a move given up", format_args!("{e}")),
    }
    c.ended("a move given up: it ran on", stayer, ENDED_EXIT, 0);
    // Killed once its image is written (it waits for its move, stopped): the finish finds
    // no process, which tells the mover to end the copy it made.
    let Ok(victim) = spawn_roamer(None) else {
        c.fail("spawn", format_args!("a roamer to kill"));
        return;
    };
    match export(victim).and_then(|_| sys::kill(victim)) {
        Ok(()) => {
            c.expect(
                "finishing a move of a process killed",
                sys::migrate_finish(victim, Some((1, Pid::on(1, 0, 5)))).map(|()| 0),
                Error::NoSuchProcess,
            );
            let _ = sys::wait(Some(victim));
        }
        Err(e) => c.fail("export, then kill", format_args!("{e}")),
    }
}
