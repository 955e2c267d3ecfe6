//! The per-core *composition*: which subsystems keep state in each core's record.
//!
//! The mechanism (the record found through `GS`, owner-only cells, acting as another core)
//! is `crate::cpu_local`'s; this file only lists the fields, as Theseus's `per_cpu` lists
//! what its `cpu_local` mechanism holds. A subsystem with per-core state adds one field
//! here and keeps the field's type (and every rule about it) in its own module.

#![deny(unsafe_code)]

pub use crate::cpu_local::{assert_no_borrows, current_core, CoreCell};
use crate::cpu_local::{CoreHead, PerCore, Record};
use abi::MAX_CORES;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

/// One core's record. `head` must stay the first field (`cpu_local::Record`).
#[repr(C, align(64))]
pub struct CoreLocal {
    head: CoreHead,
    /// Published state, written by the owner only.
    pub stats: CoreStats,
    /// Messages from other cores (one slot per sender).
    pub mailbox: crate::smp::Mailbox,
    /// This core's memory: frame pool and heap.
    pub mem: crate::mm::CoreMem,
    /// This core's processes, threads and run queues.
    pub sched: CoreCell<crate::proc::sched::Sched>,
    /// This core's resources.
    pub res: CoreCell<crate::res::ResTable>,
    /// What each user holds on this core, against its limits.
    pub quota: CoreCell<crate::res::quota::CoreUsage>,
    /// Processes of other cores to tell that a pipe of this core changed, once the
    /// resource table's borrow is over (`res::pipe::send_notices`).
    pub pipe_notices: crate::res::pipe::Outbox,
    /// The current kernel activity's flow id and user.
    pub flow: crate::res::Flow,
    /// The user of the running thread's process (0, the kernel, when idle).
    pub running_user: AtomicU32,
    /// Pid and priority of the running process (0 and App when none), kept by the
    /// scheduler like `running_user`.
    pub running_pid: AtomicU64,
    pub running_priority: AtomicU32,
    /// Set when the scheduler may want to switch on the way back to user mode (a
    /// higher-priority wake-up, the end of a slice, a stop request): the fast check of
    /// `sched::preempt_if_needed`.
    pub sched_attention: AtomicBool,
    /// A thread of this core ended and its kernel stack waits to be freed once the core is
    /// off it (`sched::free_dead_stacks`): the check every switch makes without a borrow.
    pub dead_stacks_waiting: AtomicBool,
    pub rpcc: crate::rpcc::CoreRpcc,
    pub modes: crate::modes::CoreModes,
    /// This core's tick and deadline timer.
    pub timer: crate::time::CoreTimer,
    /// This core holds the big kernel lock (`kernel=biglock`).
    pub holds_biglock: AtomicBool,
    /// Big-lock mode: another core is working on this core's tables (`biglock::on_core`).
    pub acted_for: AtomicBool,
    /// Big-lock mode: another core changed mappings this core may cache; flush on entry.
    pub tlb_stale: AtomicBool,
    pub trace: crate::trace::CoreTrace,
    /// The program this core keeps running (the shell, on core 0).
    pub init: CoreCell<crate::init::CoreInit>,
    /// This core's copy of the function-id registry (core 0's is the registry).
    pub fnid: CoreCell<crate::fnid::FnTable>,
}

/// Counters a core publishes about itself. Only the owner writes them (relaxed atomics
/// make the reads by other cores well defined, not synchronised).
pub struct CoreStats {
    pub online: AtomicBool,
    pub apic_id: AtomicU32,
    /// Timer interrupts taken.
    pub ticks: AtomicU64,
    /// Timed waits ended by a timer interrupt programmed for no later than their deadline
    /// (`time::note_due`): ended by their own deadline, not by a later tick.
    pub deadline_wakes: AtomicU64,
    /// Timed waits ended by a timer interrupt programmed for later than their deadline: a
    /// later tick ended them, so their timer was not armed for them (`time::note_due`).
    pub late_wakes: AtomicU64,
    /// IPIs taken, all senders together.
    pub ipis: AtomicU64,
    /// IPIs taken from each sender core.
    pub ipis_from: [AtomicU64; MAX_CORES],
    /// Serial-port interrupts taken.
    pub serial_irqs: AtomicU64,
    /// Rendezvous fast paths taken by the general request path: a `CALL` or `REPLY_RECV`
    /// that handed the core straight to the thread waiting for it (`sched::switch_to`), with
    /// no run-queue round trip. The register calls' handoffs are counted apart, by the way
    /// their thread went on (one counter each, so a handoff pays one increment):
    pub ipc_direct: AtomicU64,
    /// register handoffs (`ipc::direct`: the message written straight into the other
    /// thread's saved registers) whose thread resumed its kernel context (the ordinary
    /// switch: a stop or preemption pending, a dead stack to free, the big lock);
    pub ipc_handoffs_switched: AtomicU64,
    /// and those whose thread returned to user mode straight from the switch
    /// (`sched::finish_to_user`), its own way out skipped.
    pub ipc_to_user: AtomicU64,
    /// Threads woken in the request path to look at their queues again (`ipc::Waits`): a
    /// result woke a thread waiting for answers, a request one waiting to receive.
    pub ipc_wakes: AtomicU64,
    /// Address-space switches (CR3 writes by `paging::activate`): each flushes the core's
    /// TLB, the dominant cost of a switch under QEMU's TCG (docs/design.md, "Measuring").
    pub vspace_switches: AtomicU64,
    /// Rendezvous messages between processes (P0's IPC count), counted on the serving
    /// core (`ipc::note_request`, `ipc::note_reply`), indexed by the `abi::IPC_*` values.
    pub ipc_messages: [AtomicU64; abi::IPC_COUNTERS],
    /// `PipeChanged` notices sent: a pipe of this core changed for a process of another
    /// core whose READ or WRITE it had answered `Busy` (`res::pipe::send_notices`).
    pub pipe_notices_sent: AtomicU64,
    /// `PipeChanged` notices taken (`res::pipe::changed_for`): a thread waiting for another
    /// core's pipe stops waiting once this moved since its request went out.
    pub pipe_notices_taken: AtomicU64,
    /// Timer ticks that found the core idle (no thread running).
    pub idle_ticks: AtomicU64,
    /// Processes living on this core.
    pub processes: AtomicU64,
    /// Processes the kernel started at boot on this core that have not ended.
    pub boot_programs: AtomicU64,
    /// TSC value when this core entered its idle loop for the first time.
    pub idle_at_tsc: AtomicU64,
}

impl CoreStats {
    const fn new() -> Self {
        CoreStats {
            online: AtomicBool::new(false),
            apic_id: AtomicU32::new(0),
            ticks: AtomicU64::new(0),
            deadline_wakes: AtomicU64::new(0),
            late_wakes: AtomicU64::new(0),
            ipis: AtomicU64::new(0),
            ipis_from: [const { AtomicU64::new(0) }; MAX_CORES],
            serial_irqs: AtomicU64::new(0),
            ipc_direct: AtomicU64::new(0),
            ipc_handoffs_switched: AtomicU64::new(0),
            ipc_to_user: AtomicU64::new(0),
            ipc_wakes: AtomicU64::new(0),
            vspace_switches: AtomicU64::new(0),
            ipc_messages: [const { AtomicU64::new(0) }; abi::IPC_COUNTERS],
            pipe_notices_sent: AtomicU64::new(0),
            pipe_notices_taken: AtomicU64::new(0),
            idle_ticks: AtomicU64::new(0),
            processes: AtomicU64::new(0),
            boot_programs: AtomicU64::new(0),
            idle_at_tsc: AtomicU64::new(0),
        }
    }
}

impl CoreLocal {
    /// Set the kernel stack the syscall entry and the CPU (on an interrupt from user mode:
    /// the TSS's RSP0) switch to: the running thread's. `self` must be this core's record.
    #[inline(always)]
    pub fn set_kernel_stack(&self, top: u64) {
        crate::arch::x86_64::gdt::set_rsp0(&self.head.arch, top);
        self.head.arch.set_kstack_top(top);
    }

    const fn new() -> Self {
        CoreLocal {
            head: CoreHead::new(),
            stats: CoreStats::new(),
            mailbox: crate::smp::Mailbox::new(),
            mem: crate::mm::CoreMem::new(),
            sched: CoreCell::new(crate::proc::sched::Sched::new()),
            res: CoreCell::new(crate::res::ResTable::new()),
            quota: CoreCell::new(crate::res::quota::CoreUsage::new()),
            pipe_notices: crate::res::pipe::Outbox::new(),
            flow: crate::res::Flow::new(),
            running_user: AtomicU32::new(0),
            running_pid: AtomicU64::new(0),
            running_priority: AtomicU32::new(abi::Priority::App as u32),
            sched_attention: AtomicBool::new(false),
            dead_stacks_waiting: AtomicBool::new(false),
            rpcc: crate::rpcc::CoreRpcc::new(),
            modes: crate::modes::CoreModes::new(),
            timer: crate::time::CoreTimer::new(),
            holds_biglock: AtomicBool::new(false),
            acted_for: AtomicBool::new(false),
            tlb_stale: AtomicBool::new(false),
            trace: crate::trace::CoreTrace::new(),
            init: CoreCell::new(crate::init::CoreInit::new()),
            fnid: CoreCell::new(crate::fnid::FnTable::new()),
        }
    }
}

impl Record for CoreLocal {
    #[inline]
    fn head(&self) -> &CoreHead {
        &self.head
    }
}

const _: () = assert!(core::mem::offset_of!(CoreLocal, head) == 0);

static CORES: PerCore<CoreLocal> = PerCore::new([const { CoreLocal::new() }; MAX_CORES]);

/// Point this core's GS base at its record. Called first thing on every core.
pub fn init_this_core(core: usize) {
    CORES.init_this_core(core);
}

/// Act as core `core` (big-lock mode only: see [`PerCore::act_as`]).
pub fn act_as(core: usize) {
    CORES.act_as(core);
}

/// This core's record.
#[inline]
pub fn this() -> &'static CoreLocal {
    CORES.this()
}

/// Another core's record, for reading its published counters or posting to its mailbox.
#[inline]
pub fn of(core: usize) -> &'static CoreLocal {
    CORES.of(core)
}
