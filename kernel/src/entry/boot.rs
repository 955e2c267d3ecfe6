//! The boot entries arch jumps to, and the end of every core's boot: its idle context.
//!
//! Arch's boot code (`arch::x86_64::boot` for the bootstrap core, the trampoline for the
//! others) calls only these functions; the boot sequence itself is `main.rs`'s, read top to
//! bottom there.

use crate::arch::x86_64::{apic, cpu};
use crate::{percore, smp, time};
use core::sync::atomic::Ordering;

/// Bootstrap core, from `kernel_start64` with the physical address of the PVH start info.
pub extern "C" fn bsp_entry(start_info: u32) -> ! {
    crate::kmain_bsp(start_info)
}

/// First Rust code of an application processor, on the shared AP boot stack.
pub extern "C" fn ap_entry(core: u64) -> ! {
    let core = core as usize;
    percore::init_this_core(core);
    crate::modes::start_this_core();
    crate::arch::x86_64::early::load_this_core();
    smp::note_alive(core);
    // Big-lock mode: the rest of start-up is kernel work like any other.
    crate::biglock::acquire();
    crate::mm::frames::init_this_core();
    crate::mm::heap::init_this_core();
    let stack = crate::mm::kstack::alloc(crate::KERNEL_STACK_PAGES)
        .expect("no memory for the AP's kernel stack");
    cpu::switch_stack(stack.top, ap_main)
}

/// An application processor on its own stack: descriptor tables, APIC, tick, online, idle.
extern "C" fn ap_main() -> ! {
    crate::init_cpu_tables();
    apic::init_this_core();
    time::start_tick_this_core();
    crate::rpcc::init_this_core();
    crate::trace::init_this_core();
    smp::mark_online();
    smp::kick(0);
    idle()
}

/// The end of every core's boot: note the time, start this core's boot programs, and
/// become the core's idle context, running its threads forever.
pub fn idle() -> ! {
    let me = percore::this();
    // Boot programs first: the boot core treats "idle" as "this core's programs started".
    crate::start_boot_programs();
    me.stats.idle_at_tsc.store(cpu::rdtsc(), Ordering::Release);
    crate::proc::sched::run_until(u64::MAX, || false);
    unreachable!("the idle context returned")
}
