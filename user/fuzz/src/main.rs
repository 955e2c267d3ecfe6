//! `fuzz [CALLS] [SEED]`: the system-call fuzzer. It makes CALLS system calls (default
//! 100,000) with random call numbers and hostile arguments as its own user ([`FUZZ_USERS`]
//! plus its core: fuzzers on different cores cannot touch each other's resources, as
//! different users' programs cannot), closes every resource that user still holds, and exits 0 if the kernel answered every call
//! (the answers themselves are mostly errors, which is the point). A kernel that stops,
//! hangs, leaks or corrupts another program fails the test that runs it
//! (`kernel/src/tests/fuzz.rs`, `user/shell/fuzz.script`), not this program.
//!
//! `fuzz all CALLS`: start `fuzz CALLS SEED` on every core at once (a seed per core), wait
//! for them all, and exit 0 if every one exited 0.
//!
//! Arguments are drawn from the values that break kernels: zero, small integers, all ones,
//! kernel-half, non-canonical, unaligned and page-straddling pointers, huge lengths, random
//! and recently returned resource ids, pids of every core, random user ids. Pointers that
//! are valid point only into a scratch vregion attached at [`SCRATCH_AT`] with nothing
//! mapped after it, so whatever the kernel writes through them never touches this
//! program's own state, and a length that runs past the scratch area ends in unmapped
//! memory.
//!
//! A few calls are made tame rather than random, because their correct behaviour would
//! end or freeze the fuzzer itself, which tests nothing: `EXIT`, `THREAD_EXIT` and
//! `POWEROFF` are never made; `THREAD_CREATE` gets a valid entry (a function that exits its
//! thread); timeouts of `SLEEP`, `WAIT`, `COLLECT`, `RECV` and `THREAD_JOIN` are at most
//! 1 ms; `CONSOLE_READ` never blocks and `CONSOLE_WRITE` prints nothing (only bad
//! pointers get a length); `KILL`, `MIGRATE` and `SETUSER` spare the fuzzer itself; `CALL` never targets an
//! endpoint this program opened or a function id it registered (nobody would answer); semaphore P is only submitted, never
//! waited for in a call; `ENTER` waits at most 1 ms.
//!
//! Function ids: `FN_REGISTER` is sometimes made with a valid name and one of this
//! program's endpoints, so real functions are registered, looked up, called and listed;
//! the cleanup unregisters them.
//!
//! Rings: `RING_SETUP` is sometimes made with good arguments (at [`RING_AT`]); once a ring
//! exists, an `ENTER` is often preceded by random submissions written into its submission
//! ring and random index words (`sq_tail`, `cq_head`), sense and nonsense.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use ulib::abi::res::{ResId, ResType, Rights};
use ulib::abi::{ipc, ring, syscall as nr, Pid};
use ulib::sys::raw;
use ulib::{fnid, println, res, sys};
use xorshift::Rng;

ulib::main!(main);

/// Where the scratch vregion is attached: far from the program's image, heap and stack.
const SCRATCH_AT: u64 = 0x0000_5000_0000_0000;
/// Where a well-formed `RING_SETUP` puts the ring.
const RING_AT: u64 = 0x0000_5800_0000_0000;
const SCRATCH_BYTES: u64 = 64 * 1024;
/// The user the fuzzer runs as, so that what it opened can be found and closed afterwards.
const FUZZ_USERS: u32 = 4200;

/// The user the fuzzer on `core` runs as.
fn fuzz_user(core: usize) -> ulib::abi::res::UserId {
    ulib::abi::res::UserId(FUZZ_USERS + core as u32)
}
/// The most recently returned values kept as candidate ids, pids and tickets.
const POOL: usize = 64;

struct Fuzzer {
    rng: Rng,
    me: Pid,
    cores: u64,
    scratch: bool,
    /// Values the kernel returned (ids, pids, tickets, request handles): real targets.
    pool: Vec<u64>,
    /// Resources this program opened that are endpoints (never `CALL`ed: see the docs).
    own_endpoints: Vec<u64>,
    /// Where this program's ring is, once `RING_SETUP` made one, and the submissions
    /// `ENTER` took from it.
    ring: Option<u64>,
    ring_taken: u64,
    /// Calls answered Ok, and answered with an error.
    ok: u64,
    errors: u64,
    /// Print each call before making it (`fuzz CALLS SEED v`), to find the one that hangs.
    verbose: bool,
}

impl Fuzzer {
    fn remember(&mut self, v: u64) {
        if self.pool.len() < POOL {
            self.pool.push(v);
        } else {
            let i = self.rng.below(POOL as u64) as usize;
            self.pool[i] = v;
        }
    }

    /// A valid pointer into the scratch area, sometimes unaligned or near its end.
    fn scratch_ptr(&mut self) -> u64 {
        if !self.scratch {
            return self.pointer_bad();
        }
        match self.rng.below(4) {
            0 => SCRATCH_AT,
            1 => SCRATCH_AT + self.rng.below(SCRATCH_BYTES),
            2 => SCRATCH_AT + SCRATCH_BYTES - 1 - self.rng.below(64),
            _ => SCRATCH_AT + (self.rng.below(SCRATCH_BYTES / 8) * 8),
        }
    }

    fn pointer_bad(&mut self) -> u64 {
        match self.rng.below(8) {
            0 => 0,
            1 => self.rng.below(0x1_0000), // null page and the empty first 64 KiB
            2 => 0xffff_8000_0000_0000 + self.rng.below(1 << 40), // direct map
            3 => 0xffff_ffff_8000_0000 + self.rng.below(1 << 24), // kernel image
            4 => 0x0000_8000_0000_0000 + self.rng.below(1 << 46), // non-canonical
            5 => 0x0000_7fff_ffff_f000 + self.rng.below(0x2000), // straddling the user top
            6 => u64::MAX - self.rng.below(64), // wraps on adding a length
            _ => self.rng.next_u64(),
        }
    }

    fn pointer(&mut self) -> u64 {
        if self.rng.chance(2) {
            self.scratch_ptr()
        } else {
            self.pointer_bad()
        }
    }

    fn length(&mut self) -> u64 {
        match self.rng.below(6) {
            0 => 0,
            1 => self.rng.below(64),
            2 => self.rng.below(SCRATCH_BYTES + 8192),
            3 => u64::MAX - self.rng.below(16),
            4 => 1 << self.rng.below(64),
            _ => self.rng.next_u64(),
        }
    }

    fn pid(&mut self) -> u64 {
        match self.rng.below(4) {
            0 => {
                Pid::new(
                    self.rng.below(self.cores + 2) as usize,
                    self.rng.below(64) as u32,
                )
                .0
            }
            1 => self.pooled(),
            2 => 0,
            _ => self.rng.next_u64(),
        }
    }

    fn id(&mut self) -> u64 {
        match self.rng.below(4) {
            0 | 1 => self.pooled(),
            2 => {
                // A well-formed id of a random type, core and slot: mostly stale or unknown.
                let kind = ResType::ALL[self.rng.below(ResType::ALL.len() as u64) as usize];
                let core = self.rng.below(self.cores + 1) as usize;
                ResId::new(
                    0,
                    core,
                    kind,
                    self.rng.below(4) as u32,
                    self.rng.below(64) as u32,
                )
                .0
            }
            _ => self.rng.next_u64(),
        }
    }

    fn pooled(&mut self) -> u64 {
        if self.pool.is_empty() {
            return self.rng.next_u64();
        }
        let v = self.pool[self.rng.below(self.pool.len() as u64) as usize];
        // Sometimes a neighbour: the same slot in another generation, another slot.
        match self.rng.below(4) {
            0 => v ^ (1 << self.rng.below(64)),
            _ => v,
        }
    }

    fn any(&mut self) -> u64 {
        match self.rng.below(8) {
            0 => 0,
            1 => self.rng.below(16),
            2 => u64::MAX,
            3 => self.pointer(),
            4 => self.id(),
            5 => self.pid(),
            6 => self.length(),
            _ => self.rng.next_u64(),
        }
    }

    fn small_timeout(&mut self) -> u64 {
        self.rng.below(1_000_000)
    }

    /// Fill part of the scratch area with random words (a random `Submission`, `Msg`,
    /// name or argument buffer for the calls that read from user memory).
    fn scribble(&mut self) {
        if !self.scratch {
            return;
        }
        let words = self.rng.below(64);
        let start = self.rng.below(SCRATCH_BYTES / 8 - 64);
        for i in 0..words {
            let v = match self.rng.below(4) {
                0 => self.id(),
                1 => self.rng.below(12),
                _ => self.any(),
            };
            let at = (SCRATCH_AT + (start + i) * 8) as *mut u64;
            // SAFETY: `at` lies inside the scratch vregion attached writable at SCRATCH_AT
            // (start + 64 <= SCRATCH_BYTES / 8); the kernel may have detached it in the
            // meantime, which `self.scratch` cannot see, so only volatile writes of plain
            // words are made and a fault here ends only this program, which the test
            // then reports.
            unsafe { at.write_volatile(v) };
        }
    }

    /// One random call (or none, when the draw is one this program does not make).
    fn one(&mut self) {
        if self.rng.chance(8) {
            self.scribble();
        }
        let n = if self.rng.chance(32) {
            self.rng.next_u64()
        } else {
            self.rng.below(nr::COUNT + 4)
        };
        let mut a = [0u64; 6];
        for x in &mut a {
            *x = self.any();
        }
        match n {
            nr::EXIT | nr::THREAD_EXIT | nr::POWEROFF => return,
            nr::WAIT => a[2] = self.small_timeout(),
            nr::SLEEP => a[0] = self.small_timeout(),
            // Bad pointers with any length; a good pointer writes nothing (random bytes on
            // the console would garble the test protocol's lines).
            nr::CONSOLE_WRITE if (SCRATCH_AT..SCRATCH_AT + SCRATCH_BYTES).contains(&a[0]) => {
                a[1] = 0
            }
            nr::CONSOLE_READ => a[2] |= nr::CONSOLE_NONBLOCK,
            nr::KILL if a[0] == self.me.0 => return,
            nr::MIGRATE if a[0] == 0 || a[0] == self.me.0 => return,
            // Always to the fuzz user: a program that becomes another user can no longer
            // close what it opened (rights are per user), and cleaning up is part of the test.
            nr::SETUSER => a[0] = u64::from(fuzz_user(self.me.core()).0),
            // The same for the thread alone, or back to the process's user (0).
            nr::THREAD_SETUSER if a[0] & 1 == 0 => a[0] = 0,
            nr::THREAD_SETUSER => a[0] = u64::from(fuzz_user(self.me.core()).0),
            nr::COLLECT | nr::RECV | nr::THREAD_JOIN | nr::ENTER => a[2] = self.small_timeout(),
            nr::REPLY_RECV => a[5] = self.small_timeout(),
            // A call to its own endpoint (or a function id on it) waits for ever: nobody
            // else receives there. `CALL_REGS` too (regression: seed 0x5eed0000 reached one
            // after about 10,600 calls and the run never ended).
            nr::CALL | nr::CALL_REGS if self.own_endpoints.contains(&a[0]) => return,
            // A P, or holding a pipe's write end (then reading it), could wait for ever.
            nr::RES_CONTROL if a[1] == nr::control::SEM_P || a[1] == nr::control::PIPE_HOLD => {
                return
            }
            nr::THREAD_CREATE => {
                a[0] = thread_entry as *const () as u64;
                a[1] = STACK.top();
            }
            _ => {}
        }
        if n == nr::THREAD_JOIN {
            a[1] = self.small_timeout();
        }
        if n == nr::RES_OPEN && self.scratch && self.rng.chance(2) {
            self.real_open(&mut a);
        }
        if n == nr::SUBMIT && self.scratch && self.rng.chance(2) {
            a[0] = self.submission();
        }
        if n == nr::FN_REGISTER && self.scratch && self.rng.chance(2) {
            self.real_register(&mut a);
        }
        if n == nr::RING_SETUP && self.ring.is_none() && self.rng.chance(2) {
            a[0] = RING_AT;
            a[1] = 1 << self.rng.below(9);
        }
        if n == nr::ENTER && self.rng.chance(2) {
            self.fill_ring(&mut a);
        }
        if n == nr::SPAWN || n == nr::SPAWN_ON {
            a[4] = self.rng.below(4);
        }
        if self.verbose {
            println!(
                "fuzz: call {n} {:#x} {:#x} {:#x} {:#x} {:#x} {:#x}",
                a[0], a[1], a[2], a[3], a[4], a[5]
            );
        }
        // SAFETY: every pointer argument is either invalid (the kernel must refuse it) or
        // points into the scratch vregion, which holds nothing this program relies on;
        // the calls that would end or freeze this program are filtered out above.
        let (rax, rdx) = unsafe { raw::syscall6(n, a[0], a[1], a[2], a[3], a[4], a[5]) };
        if rax == 0 {
            self.ok += 1;
        } else {
            self.errors += 1;
        }
        if n == nr::RING_SETUP && rax == 0 {
            self.ring = Some(a[0]);
        }
        if n == nr::ENTER && rax == 0 {
            self.ring_taken += rdx;
        }
        if rax == 0 && rdx != 0 {
            self.remember(rdx);
            if n == nr::RES_OPEN && ResId(rdx).kind() == Some(ResType::Endpoint) {
                self.own_endpoints.push(rdx);
            }
            // A function id of its own endpoint: never `CALL`ed either.
            if n == nr::FN_REGISTER {
                self.own_endpoints.push(rdx);
            }
        }
    }

    /// Make `RES_OPEN`'s arguments well-formed: a real name of a random type on a random
    /// core, a small size or pid argument, random rights (including ones that lock the
    /// owner out), so that real resources are made and then misused by later calls.
    fn real_open(&mut self, a: &mut [u64; 6]) {
        const TYPES: [&str; 6] = ["vregion", "vspace", "process", "compute", "endpoint", "sem"];
        let kind = TYPES[self.rng.below(6) as usize];
        let core = self.rng.below(self.cores + 1);
        let name = alloc::format!("c{core}/{kind}/f{}", self.rng.below(8));
        let arg: u64 = match kind {
            "vregion" => 1 + self.rng.below(3 * 4096),
            "compute" => self.rng.below(200),
            "sem" => self.rng.below(4),
            _ => self.rng.below(3),
        };
        let at = SCRATCH_AT + SCRATCH_BYTES - 256;
        let bytes = name.as_bytes();
        for (i, b) in bytes.iter().chain(arg.to_le_bytes().iter()).enumerate() {
            // SAFETY: inside the scratch vregion (256 bytes before its end; the name is
            // at most 20 bytes), as in `scribble`.
            unsafe { ((at + i as u64) as *mut u8).write_volatile(*b) };
        }
        a[0] = at;
        a[1] = bytes.len() as u64;
        a[2] = at + bytes.len() as u64;
        a[3] = if kind == "process" { 0 } else { 8 };
        a[4] = self.rng.below(256);
    }

    /// Make `FN_REGISTER`'s arguments well-formed: a valid name (one of a few per core, so
    /// that some registrations find their name taken) and one of this program's endpoints
    /// when it has one.
    fn real_register(&mut self, a: &mut [u64; 6]) {
        let name = alloc::format!("fz{}.{}", self.me.core(), self.rng.below(4));
        let at = SCRATCH_AT + SCRATCH_BYTES - 256;
        for (i, b) in name.bytes().enumerate() {
            // SAFETY: inside the scratch vregion (256 bytes before its end; the name is at
            // most 7 bytes), as in `scribble`.
            unsafe { ((at + i as u64) as *mut u8).write_volatile(b) };
        }
        a[0] = at;
        a[1] = name.len() as u64;
        if !self.own_endpoints.is_empty() {
            let i = self.rng.below(self.own_endpoints.len() as u64) as usize;
            a[2] = self.own_endpoints[i];
        }
    }

    /// Write random submissions into this program's ring (if it has one) from the kernel's
    /// `sq_head` on and set its `sq_tail` after them, now and then past the ring's size;
    /// read every completion (`cq_head` = `cq_tail`), now and then setting `cq_head`
    /// anywhere instead.
    fn fill_ring(&mut self, a: &mut [u64; 6]) {
        let Some(base) = self.ring else {
            return;
        };
        // SAFETY: the kernel mapped the ring at `base` for this process's whole life; the
        // header is aligned and any bits are a valid `RingHeader`.
        let h = unsafe { (base as *const ring::RingHeader).read_volatile() };
        let Some(layout) = ring::Layout::new(u64::from(h.sq_entries)) else {
            return;
        };
        let n = self.rng.below(u64::from(layout.sq_entries) + 2) as u32;
        for i in 0..n {
            let sqe = ring::RingSqe {
                user_data: self.rng.next_u64(),
                sub: self.random_submission(),
                _pad: [0; 2],
            };
            let at = base + u64::from(layout.sqe_offset(h.sq_head.wrapping_add(i)));
            // SAFETY: a slot of the ring's submission array (the layout keeps it inside the
            // mapping); the kernel copes with any contents.
            unsafe { (at as *mut ring::RingSqe).write_volatile(sqe) };
        }
        let words = base as *mut u32;
        // SAFETY: `sq_tail` and `cq_head` are the header's second and third words.
        unsafe {
            words.add(1).write_volatile(h.sq_head.wrapping_add(n));
            if self.rng.chance(8) {
                words.add(2).write_volatile(self.rng.next_u64() as u32);
            } else {
                words.add(2).write_volatile(h.cq_tail);
            }
        }
        // Mostly sensible counts, so that entries are taken.
        if self.rng.chance(2) {
            a[0] = self.rng.below(u64::from(layout.sq_entries) + 2);
            a[1] = self.rng.below(u64::from(layout.cq_entries) + 2);
        }
    }

    /// A `Submission` in the scratch area with a real kind and mostly real arguments.
    fn submission(&mut self) -> u64 {
        let at = SCRATCH_AT + self.rng.below(SCRATCH_BYTES / 2) / 8 * 8;
        let s = self.random_submission();
        let p = at as *mut ipc::Submission;
        // SAFETY: `at` is 8-aligned and at most half-way into the scratch vregion, so the
        // record fits; it is written as a whole with a volatile write (see `scribble`).
        unsafe { p.write_volatile(s) };
        at
    }

    /// A submission with a real kind and mostly real arguments.
    fn random_submission(&mut self) -> ipc::Submission {
        let kind = 1 + self.rng.below(10);
        let target = self.id();
        let mut s = ipc::Submission {
            kind,
            target,
            ..Default::default()
        };
        for x in &mut s.args {
            *x = self.any();
        }
        if kind == ipc::SUBMIT_TIMER {
            s.args[0] = self.small_timeout();
        }
        // Holding a pipe's write end, then reading it, could wait for ever: never.
        let hold = s.args[0] == nr::control::PIPE_HOLD;
        if kind == ipc::SUBMIT_RES_CONTROL
            && (hold || (s.args[0] == nr::control::SEM_P && self.rng.chance(2)))
        {
            s.args[0] = nr::control::INFO;
        }
        s
    }
}

/// A stack for the threads `THREAD_CREATE` starts (each exits at once, so one is shared:
/// a thread started while another still runs on it may corrupt only that one's frame,
/// and both only call `THREAD_EXIT`).
struct Stack(core::cell::UnsafeCell<[u64; 512]>);
// SAFETY: see the type's docs: the threads on it run one function that touches no memory
// but its own frame, and the main thread never uses it.
unsafe impl Sync for Stack {}
impl Stack {
    fn top(&self) -> u64 {
        (self.0.get() as u64 + 512 * 8) & !15
    }
}
static STACK: Stack = Stack(core::cell::UnsafeCell::new([0; 512]));

extern "C" fn thread_entry(_arg: u64) -> ! {
    // SAFETY: THREAD_EXIT takes a value and does not return.
    unsafe {
        raw::syscall1(nr::THREAD_EXIT, 0);
    }
    loop {
        core::hint::spin_loop();
    }
}

fn main(args: &[&str]) -> i32 {
    if args.get(1) == Some(&"all") {
        return on_every_core(args.get(2).and_then(|a| a.parse().ok()).unwrap_or(100_000));
    }
    let me = match sys::getpid() {
        Ok(p) => p,
        Err(e) => {
            println!("fuzz: getpid: {e:?}");
            return 1;
        }
    };
    let user = fuzz_user(me.core());
    if let Err(e) = res::setuser(user) {
        println!("fuzz: setuser {}: {e:?}", user.0);
        return 1;
    }
    let calls: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let seed: u64 = args
        .get(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15 ^ me.0);
    let cores = core_count() as u64;
    let scratch = match setup_scratch(me) {
        Ok(()) => true,
        Err(e) => {
            println!("fuzz: no scratch vregion ({e:?}); valid pointers are not tried");
            false
        }
    };
    let mut f = Fuzzer {
        rng: Rng(seed | 1),
        me,
        cores,
        scratch,
        pool: Vec::with_capacity(POOL),
        own_endpoints: Vec::new(),
        ring: None,
        ring_taken: 0,
        ok: 0,
        errors: 0,
        verbose: args.get(3) == Some(&"v"),
    };
    for _ in 0..calls {
        f.one();
    }
    // Reap children the fuzz spawned (hello/nop by chance) so no zombie is left.
    while sys::wait_timeout(None, 1_000_000).is_ok() {}
    let (closed, stuck) = close_everything(cores as usize, user);
    println!(
        "fuzz: {calls} calls from {me} (seed {seed:#x}): {} answered Ok, {} with an error; \
         {closed} resources closed afterwards; {} ring submissions taken",
        f.ok, f.errors, f.ring_taken
    );
    if stuck > 0 {
        println!(
            "fuzz: {stuck} resources of user {} could not be closed",
            user.0
        );
        return 1;
    }
    0
}

fn core_count() -> usize {
    let mut buf = [ulib::abi::CoreInfo::default(); ulib::abi::MAX_CORES];
    sys::cores(&mut buf).unwrap_or(1).max(1)
}

/// Close every resource `user` holds on any core (the scratch area too, after
/// detaching it); returns (closed, could not be closed). Vspace handles go first, so that
/// vregions attached through them can be detached and closed.
fn close_everything(cores: usize, user: ulib::abi::res::UserId) -> (usize, usize) {
    let _ = res::thread_setuser(None);
    let _ = res::setuser(user);
    if let Ok(vs) = res::open_vspace("here/vspace/fuzz", None, Rights::OWNER_ALL) {
        let _ = res::detach(vs, SCRATCH_AT);
        let _ = res::close(vs);
    }
    let (mut closed, mut stuck) = (0, 0);
    // The functions it registered (then its endpoints below).
    for f in fnid::list().unwrap_or_default() {
        if f.user != u64::from(user.0) {
            continue;
        }
        match fnid::unregister(f.fnid) {
            Ok(()) => closed += 1,
            Err(e) => {
                println!("fuzz: unregister {} ({}): {e:?}", f.fnid, f.name());
                stuck += 1;
            }
        }
    }
    for core in 0..cores {
        let Ok(mut all) = res::list_all(core) else {
            continue;
        };
        all.retain(|r| r.creator == user);
        all.sort_by_key(|r| u8::from(r.kind != ResType::VSpace as u8));
        for r in all {
            match res::close(r.id) {
                Ok(()) => closed += 1,
                Err(e) => {
                    println!("fuzz: close {:#x} ({}): {e:?}", r.id.0, r.name());
                    stuck += 1;
                }
            }
        }
    }
    (closed, stuck)
}

/// `fuzz all CALLS`: one fuzzer per core, each with its own seed, all at once.
fn on_every_core(calls: u64) -> i32 {
    let n = core_count();
    let calls = alloc::format!("{calls}");
    let mut pids = Vec::new();
    for core in 0..n {
        let seed = alloc::format!("{}", 0x5eed_0000 + core as u64);
        match sys::spawn_on("fuzz", &[&calls, &seed], ulib::abi::Priority::App, core) {
            Ok(p) => pids.push(p),
            Err(e) => {
                println!("fuzz: cannot start on core {core}: {e:?}");
                return 1;
            }
        }
    }
    let mut failed = 0;
    for p in pids {
        match sys::wait(Some(p)) {
            Ok((_, s)) if s.how == ulib::abi::ENDED_EXIT && s.code == 0 => {}
            Ok((_, s)) => {
                println!("fuzz: the fuzzer {p} ended with {s:?}");
                failed += 1;
            }
            Err(e) => {
                println!("fuzz: wait for {p}: {e:?}");
                failed += 1;
            }
        }
    }
    println!("fuzz: {n} cores fuzzed, {failed} fuzzers failed");
    i32::from(failed > 0)
}

fn setup_scratch(me: Pid) -> Result<(), ulib::abi::Error> {
    let name = alloc::format!("here/vregion/fuzz-{}-{}", me.core(), me.serial());
    let region = res::open_vregion(&name, SCRATCH_BYTES, Rights::OWNER_ALL)?;
    let vspace = res::open_vspace("here/vspace/fuzz", None, Rights::OWNER_ALL)?;
    let r = res::attach(vspace, region, SCRATCH_AT, true);
    let _ = res::close(vspace);
    r
}
