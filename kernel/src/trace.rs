//! Tracing: a per-core ring of timestamped kernel events, off unless booted with `trace=on`
//! — the modern form of P0's per-process time charts.
//!
//! Each core writes only its own ring (no lock); when the ring is full the oldest events are
//! overwritten and counted as lost. With tracing off an event costs one load and a branch.
//! `TRACE(TRACE_DUMP)` prints every core's events as `TRACE core ns kind pid a b` lines,
//! oldest first, between `TRACE begin` and `TRACE end N lost L`; `cargo xtask trace` turns
//! them into Chrome trace-event JSON that Perfetto opens, a track per core and per process.

use crate::percore;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// Events each core keeps.
pub const EVENTS_PER_CORE: usize = 8192;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// What happened. `a` and `b` say more, per kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Kernel entry: a = vector (0x100: system call; then b = call number).
    Entry = 1,
    /// Kernel exit back to user mode: a = vector.
    Exit = 2,
    /// Context switch: a = thread left, b = thread entered (0: the idle context).
    Switch = 3,
    /// RPCC message sent: a = destination core, b = tag.
    RpccSend = 4,
    /// RPCC message received: a = source core, b = tag.
    RpccReceive = 5,
    /// An agent starts a request: a = source core, b = tag.
    AgentStart = 6,
    /// The agent is done: a = source core, b = tag.
    AgentEnd = 7,
    /// Waiting for the big lock starts.
    LockWait = 8,
    /// The big lock is taken.
    LockTaken = 9,
    /// A request is submitted: a = destination core, b = tag.
    Submit = 10,
    /// Its result is collected: a = destination core (0 if unknown), b = tag.
    Complete = 11,
}

pub fn kind_name(k: u8) -> &'static str {
    match k {
        1 => "entry",
        2 => "exit",
        3 => "switch",
        4 => "rpcc_send",
        5 => "rpcc_receive",
        6 => "agent_start",
        7 => "agent_end",
        8 => "lock_wait",
        9 => "lock_taken",
        10 => "submit",
        11 => "complete",
        _ => "?",
    }
}

#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Event {
    tsc: u64,
    pid: u64,
    a: u64,
    b: u64,
    kind: u8,
}

/// One core's ring.
pub struct CoreTrace {
    ring: AtomicPtr<Event>,
    written: AtomicU64,
}

impl CoreTrace {
    pub const fn new() -> Self {
        CoreTrace {
            ring: AtomicPtr::new(core::ptr::null_mut()),
            written: AtomicU64::new(0),
        }
    }
}

/// Turn tracing on (boot option), before the cores make their rings.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// This core's ring (at start-up, if tracing is on).
pub fn init_this_core() {
    if !enabled() {
        return;
    }
    let ring: &'static mut [Event] = Vec::leak(alloc::vec![Event::default(); EVENTS_PER_CORE]);
    percore::this()
        .trace
        .ring
        .store(ring.as_mut_ptr(), Ordering::Release);
}

/// Record an event on this core.
#[inline]
pub fn event(kind: Kind, a: u64, b: u64) {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    record(kind, a, b);
}

#[inline(never)]
fn record(kind: Kind, a: u64, b: u64) {
    let core = percore::this();
    let ring = core.trace.ring.load(Ordering::Relaxed);
    if ring.is_null() {
        return;
    }
    let n = core.trace.written.load(Ordering::Relaxed);
    let e = Event {
        tsc: crate::arch::x86_64::cpu::rdtsc(),
        pid: core.running_pid.load(Ordering::Relaxed),
        a,
        b,
        kind: kind as u8,
    };
    // SAFETY: the ring has EVENTS_PER_CORE entries and is written by this core only; a
    // dump on another core may read a slot being written and get a torn event, which is
    // only ever printed.
    unsafe { ring.add(n as usize % EVENTS_PER_CORE).write_volatile(e) };
    core.trace.written.store(n + 1, Ordering::Release);
}

/// Events held now over all cores.
pub fn held() -> u64 {
    (0..crate::smp::cores_planned())
        .map(|c| {
            percore::of(c)
                .trace
                .written
                .load(Ordering::Acquire)
                .min(EVENTS_PER_CORE as u64)
        })
        .sum()
}

/// Forget every core's events.
pub fn clear() -> u64 {
    let n = held();
    for c in 0..crate::smp::cores_planned() {
        percore::of(c).trace.written.store(0, Ordering::Release);
    }
    n
}

/// One line on the console with no time/core prefix (xtask parses it).
fn line(args: core::fmt::Arguments) {
    crate::console::write_fmt(format_args!("{args}\r\n"));
}

/// Print every core's events (tracing paused meanwhile); returns how many.
pub fn dump() -> u64 {
    ENABLED.store(false, Ordering::Relaxed);
    line(format_args!("TRACE begin tsc_hz {}", crate::time::tsc_hz()));
    let (mut total, mut lost) = (0u64, 0u64);
    for c in 0..crate::smp::cores_planned() {
        let t = &percore::of(c).trace;
        let ring = t.ring.load(Ordering::Acquire);
        if ring.is_null() {
            continue;
        }
        let written = t.written.load(Ordering::Acquire);
        let first = written.saturating_sub(EVENTS_PER_CORE as u64);
        lost += first;
        for i in first..written {
            // SAFETY: within the ring (index modulo its length); see `record`.
            let e = unsafe { ring.add(i as usize % EVENTS_PER_CORE).read_volatile() };
            line(format_args!(
                "TRACE {c} {} {} {} {} {}",
                crate::time::tsc_to_ns(e.tsc),
                kind_name(e.kind),
                abi::Pid(e.pid),
                e.a,
                e.b
            ));
            total += 1;
        }
    }
    line(format_args!("TRACE end {total} lost {lost}"));
    ENABLED.store(true, Ordering::Relaxed);
    total
}
