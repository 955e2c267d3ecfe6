//! RPCC's fast design: the daemon performs short requests itself (`rpcc.agents=inline`),
//! and a thread waiting for a remote answer halts in place (`rpcc.wait=halt`).
//!
//! P4's design (the default, kept for `bench tender`'s paper figures) pays a fixed cost on
//! every remote operation that has nothing to do with the operation: the requester's core
//! switches to its idle context and back, the owner's core wakes an agent, switches to it,
//! and the agent switches back to sleep. Both parts of this module remove such switches and
//! are boot options (also switched at run time by the in-kernel tests):
//!
//! - **Inline** ([`is_short`], [`try_inline`]): where a request arrives (the doorbell IPI,
//!   the tick, the idle loop), the daemon performs it on the spot if it is *short*: it never
//!   blocks, never waits for another core and ends in bounded time (resource operations on
//!   vregions, resource lists and infos, vregion attach/detach, the process list, and the
//!   request path's enqueue and delivery). Everything else (spawn, kill, wait, migration,
//!   semaphores, endpoints, processes as resources, notices of the family) still goes to an
//!   agent, as does a short request that arrives while its daemon has requests queued or an
//!   agent awake, so requests from one core are still performed in order.
//! - **Halt in place** ([`halt_in_place`]): the waiting thread keeps the core and halts
//!   (`sti; hlt`) until the reply's IPI, instead of blocking, as long as no other thread of
//!   its core is ready; when one becomes ready (a tick woke a sleeper, a request woke an
//!   agent) or the scheduler asks for the core (`Sched::core_wanted`), it blocks as
//!   before, so halting in place never keeps work from running. The
//!   halted time is charged as Idle to the core and to the waiting process.

use super::{me, Request};
use crate::proc::sched;
use crate::structure;
use abi::res::ResType;
use core::sync::atomic::{AtomicBool, Ordering};

/// `rpcc.agents=inline`.
static INLINE: AtomicBool = AtomicBool::new(false);
/// `rpcc.wait=halt`.
static HALT: AtomicBool = AtomicBool::new(false);

/// Apply the boot options (bootstrap core, before other cores start).
pub(super) fn configure(inline: bool, halt: bool) {
    INLINE.store(inline, Ordering::Relaxed);
    HALT.store(halt, Ordering::Relaxed);
}

/// Does the daemon perform short requests itself?
pub fn inline() -> bool {
    INLINE.load(Ordering::Relaxed)
}

/// Does a thread waiting for a remote answer halt in place?
pub fn halts() -> bool {
    HALT.load(Ordering::Relaxed)
}

/// Switch inline mode on every core; the setting before (the in-kernel tests compare the
/// two designs in one boot).
pub fn set_inline(on: bool) -> bool {
    INLINE.swap(on, Ordering::Relaxed)
}

/// Switch halting in place on every core; the setting before.
pub fn set_halt(on: bool) -> bool {
    HALT.swap(on, Ordering::Relaxed)
}

/// The fast design's idle core (halting in place, ipi mode): every message comes with an
/// IPI whose handler takes it, so with none of ours waiting for ring room there is nothing
/// to look for before halting, and an idle core woken by a message its handler took
/// entirely may halt again at once.
pub fn idle_quiet() -> bool {
    halts()
        && super::notify_mode() == abi::RPCC_NOTIFY_IPI
        && structure::requests_travel()
        && !super::with_state(|s| super::has_outbox(s))
}

/// Is `op` short: performed without ever blocking, waiting for another core or starting a
/// program? Only such a request may be performed where it arrives (an interrupt handler or
/// the idle loop may not block).
pub fn is_short(op: &super::Op) -> bool {
    use super::Op;
    let vregion = |id: &abi::res::ResId| id.kind() == Some(ResType::VRegion);
    match op {
        // `LOCATION/TYPE/NAME`: only the type matters here (a malformed name is refused by
        // the operation itself, without blocking).
        Op::ResOpen { name, .. } => name.split('/').nth(1) == Some(ResType::VRegion.name()),
        Op::ResClose(id) | Op::ResInfo(id) => vregion(id),
        Op::ResRead { id, .. } | Op::ResWrite { id, .. } | Op::ResControl { id, .. } => vregion(id),
        Op::ResList
        | Op::RegionAttach { .. }
        | Op::RegionDetached(_)
        | Op::RegionPass { .. }
        | Op::RegionFrames(_)
        | Op::Processes
        | Op::Enqueue(_)
        | Op::Deliver { .. } => true,
        _ => false,
    }
}

/// Inline mode: perform request `tag` from core `src` (record at `record`) here and now if
/// it is short and its daemon has nothing queued or in progress; true if it was performed
/// and answered.
pub(super) fn try_inline(src: usize, tag: u64, record: u64) -> bool {
    if !inline() {
        return false;
    }
    // SAFETY: the requester keeps the record alive in its outstanding table until our
    // reply arrives, and touches it only after that (release/acquire via the rings).
    let request: &Request = unsafe { &*(record as *const Request) };
    if !is_short(&request.op) {
        return false;
    }
    let idle_daemon = super::with_state(|s| {
        let d = &s.daemons[src];
        d.queued() == 0 && d.awake() == 0
    });
    if !idle_daemon {
        return false;
    }
    crate::trace::event(crate::trace::Kind::AgentStart, src as u64, tag);
    // Whatever context we interrupted gets its flow back exactly as it was (a snapshot of
    // the core's flow: no look at the running process, unlike `save_flow`).
    let saved = crate::res::snapshot_flow();
    crate::res::adopt_flow(&request.flow);
    let result = super::ops::perform(&request.op);
    crate::res::put_back_flow(&saved);
    request.set_reply(result);
    crate::trace::event(crate::trace::Kind::AgentEnd, src as u64, tag);
    let stats = &me().stats;
    stats.served.fetch_add(1, Ordering::Relaxed);
    stats.inline_served.fetch_add(1, Ordering::Relaxed);
    super::reply(src, tag, request);
    true
}

/// Halt-in-place mode: the running thread waits for the answer to request `tag` without
/// leaving the core, halting until an interrupt: the answer (taken), or `None` if another
/// thread of this core became ready first (the caller then blocks as usual). `just_sent`:
/// the request left in this kernel activity, with interrupts masked since.
pub(super) fn halt_in_place(tag: u64, just_sent: bool) -> Option<Result<super::Out, abi::Error>> {
    if !halts() || !structure::requests_travel() {
        return None;
    }
    // In ipi mode every message comes with an IPI: nothing to look at before halting (the
    // kernel runs with interrupts masked, and `sti; hlt` takes an IPI that came meanwhile).
    // In poll mode no IPI comes at all: the thread keeps looking at the rings instead.
    let mode = super::notify_mode();
    let mut halted = false;
    // In ipi mode the answer is taken only by the IPI's handler: if none came since the
    // request left (interrupts masked), the first look would find nothing. (`call_many`
    // waits for its later requests after halting for the first: those do look first.)
    let mut look = !(just_sent && mode == abi::RPCC_NOTIFY_IPI);
    let answer = loop {
        if look {
            if let Some(r) = super::take_done(tag) {
                break Some(r);
            }
        }
        look = true;
        // Another thread is ready, or the scheduler wants the core for something else (the
        // idle context's turn while the in-kernel tests wait).
        if sched::with(|s| s.core_wanted()) {
            break None;
        }
        // Poll mode: look at the rings (until something arrives or a thread is ready).
        // Hybrid mode: look a while, as the idle loop does; then tell senders to send IPIs
        // again and take a last look.
        match mode {
            abi::RPCC_NOTIFY_IPI => {}
            abi::RPCC_NOTIFY_POLL => {
                super::idle_poll();
                continue;
            }
            _ => {
                super::idle_poll();
                if super::stop_polling() {
                    continue;
                }
            }
        }
        // Not `time::wait_until`: no clock to read, and no big lock to let go of (halting
        // in place is for the per-core kernel only).
        let left = crate::modes::enter(crate::modes::Mode::Idle);
        crate::arch::x86_64::cpu::wait_for_interrupt();
        crate::modes::enter(left);
        halted = true;
    };
    if halted {
        me().stats.halted_waits.fetch_add(1, Ordering::Relaxed);
    }
    answer
}
