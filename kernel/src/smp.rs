//! Cores: starting them, knowing which are online, and the cross-core mailbox.
//!
//! Every core has a [`Mailbox`] with one slot per possible sender. A sender writes only its
//! own slot, sets its bit in the mailbox's `pending` word and sends the target an IPI (the
//! doorbell); the target's IPI handler ([`on_ipi`]) takes the pending bits, counts the IPI
//! per sender, and runs a posted call if there is one. This is the single-writer message
//! path the inter-core RPCC builds on; here it carries [`call_on`], a synchronous "run this
//! function on that core", which the in-kernel tests use to act on every core.

use crate::arch::x86_64::{apic, trampoline, trap};
use crate::percore::{self, current_core};
use crate::time;
use abi::MAX_CORES;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// One sender's slot in a core's mailbox, on its own cache line.
///
/// The sender bumps `posted` after writing `func` and `arg`; the receiver runs the call and
/// sets `done` to the same number. A slot whose `done` lags `posted` has a call in flight,
/// and the sender posts nothing new until it completes, so a late answer can never be
/// taken for the answer to a newer call.
#[repr(C, align(64))]
struct CallSlot {
    posted: AtomicU64,
    done: AtomicU64,
    func: AtomicUsize,
    arg: AtomicU64,
    ret: AtomicU64,
}

/// Messages to one core.
pub struct Mailbox {
    pending: AtomicU64,
    slots: [CallSlot; MAX_CORES],
}

impl Mailbox {
    pub const fn new() -> Self {
        Mailbox {
            pending: AtomicU64::new(0),
            slots: [const {
                CallSlot {
                    posted: AtomicU64::new(0),
                    done: AtomicU64::new(0),
                    func: AtomicUsize::new(0),
                    arg: AtomicU64::new(0),
                    ret: AtomicU64::new(0),
                }
            }; MAX_CORES],
        }
    }
}

static APIC_IDS: spin::Once<heapless::Vec<u32, MAX_CORES>> = spin::Once::new();
static ONLINE: AtomicUsize = AtomicUsize::new(0);
/// The last application processor that reached Rust code (decides the second SIPI).
static AP_ALIVE: AtomicUsize = AtomicUsize::new(0);

/// Record which APIC id each core index has (bootstrap core, once).
pub fn set_apic_ids(ids: &[u32]) {
    APIC_IDS.call_once(|| ids.iter().copied().collect());
}

/// Cores the kernel is using (started or to be started).
pub fn cores_planned() -> usize {
    APIC_IDS.get().map_or(1, |v| v.len())
}

/// APIC id of core `core`.
pub fn apic_id_of(core: usize) -> Option<u32> {
    APIC_IDS.get()?.get(core).copied()
}

/// Cores that finished starting.
pub fn online_cores() -> usize {
    ONLINE.load(Ordering::Acquire)
}

/// Is core `core` online?
pub fn is_online(core: usize) -> bool {
    core < MAX_CORES && percore::of(core).stats.online.load(Ordering::Acquire)
}

/// Mark this core online (last step of its start-up).
pub fn mark_online() {
    let me = percore::this();
    me.stats.apic_id.store(apic::id(), Ordering::Relaxed);
    me.stats.online.store(true, Ordering::Release);
    ONLINE.fetch_add(1, Ordering::AcqRel);
}

/// Ring `core`'s doorbell: it will take an IPI from us.
pub fn kick(core: usize) {
    let Some(apic_id) = apic_id_of(core) else {
        return;
    };
    percore::of(core)
        .mailbox
        .pending
        .fetch_or(1 << current_core(), Ordering::AcqRel);
    apic::send_ipi(apic_id, trap::VEC_IPI as u8);
}

/// Ring every other online core's doorbell with one broadcast IPI.
pub fn kick_all_others() {
    let me = current_core();
    for core in (0..cores_planned()).filter(|&c| c != me && is_online(c)) {
        percore::of(core)
            .mailbox
            .pending
            .fetch_or(1 << me, Ordering::AcqRel);
    }
    apic::send_ipi_all_others(trap::VEC_IPI as u8);
}

/// The doorbell IPI: count it per sender and run any posted calls. (The same doorbell
/// announces RPCC messages: the entry module polls for them next.)
pub fn on_ipi() {
    let me = percore::this();
    let mut pending = me.mailbox.pending.swap(0, Ordering::AcqRel);
    me.stats.ipis.fetch_add(1, Ordering::Relaxed);
    while pending != 0 {
        let src = pending.trailing_zeros() as usize;
        pending &= pending - 1;
        me.stats.ipis_from[src].fetch_add(1, Ordering::Relaxed);
        let slot = &me.mailbox.slots[src];
        let posted = slot.posted.load(Ordering::Acquire);
        if posted != slot.done.load(Ordering::Relaxed) {
            let f = slot.func.load(Ordering::Relaxed);
            // SAFETY: the sender stored a `fn(u64) -> u64` in `func` before publishing it
            // by bumping `posted` with release ordering, and leaves the slot alone until
            // `done` catches up.
            let f: fn(u64) -> u64 = unsafe { core::mem::transmute::<usize, fn(u64) -> u64>(f) };
            let ret = f(slot.arg.load(Ordering::Relaxed));
            slot.ret.store(ret, Ordering::Relaxed);
            slot.done.store(posted, Ordering::Release);
            kick(src);
        }
    }
}

/// Why [`call_on`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// The core is not online.
    NoSuchCore,
    /// No answer in time; the call may still run later.
    Timeout,
    /// An earlier call to that core timed out and has not finished yet.
    Busy,
}

/// Run `f(arg)` on core `core` from its IPI handler and return its result. Waits (halting)
/// at most `timeout_ns`.
pub fn call_on(
    core: usize,
    f: fn(u64) -> u64,
    arg: u64,
    timeout_ns: u64,
) -> Result<u64, CallError> {
    let me = current_core();
    if core == me {
        return Ok(f(arg));
    }
    if !is_online(core) {
        return Err(CallError::NoSuchCore);
    }
    let slot = &percore::of(core).mailbox.slots[me];
    let done = slot.done.load(Ordering::Acquire);
    if slot.posted.load(Ordering::Relaxed) != done {
        return Err(CallError::Busy);
    }
    let seq = done + 1;
    slot.func.store(f as usize, Ordering::Relaxed);
    slot.arg.store(arg, Ordering::Relaxed);
    slot.posted.store(seq, Ordering::Release);
    kick(core);
    if !time::wait_until(timeout_ns, || slot.done.load(Ordering::Acquire) == seq) {
        return Err(CallError::Timeout);
    }
    Ok(slot.ret.load(Ordering::Relaxed))
}

/// Start every planned application processor, one after another; returns how many came
/// online.
pub fn start_aps() -> usize {
    let tsc_hz = time::tsc_hz();
    let mut started = 0;
    for core in 1..cores_planned() {
        let Some(apic_id) = apic_id_of(core) else {
            continue;
        };
        let alive = || AP_ALIVE.load(Ordering::Acquire) == core;
        trampoline::start_core(apic_id, core, tsc_hz, alive);
        if time::wait_until(1_000_000_000, || is_online(core)) {
            started += 1;
        } else {
            // A late core could still wake up on the shared AP boot stack; starting another
            // one now could put two cores on it. Stop here.
            log::error!(
                "core {core} (APIC id {apic_id}) did not come online within 1 s; \
                 not starting more cores"
            );
            break;
        }
    }
    started
}

/// An application processor reached Rust code (from `entry::boot::ap_entry`): the boot
/// core may stop sending it start-up IPIs.
pub fn note_alive(core: usize) {
    AP_ALIVE.store(core, Ordering::Release);
}
