//! Stopping the machine on a kernel bug: panics, kernel-mode exceptions, stray NMIs.
//!
//! The core that hits the bug becomes the *stopper*: it sends an NMI to every other core
//! (NMIs get through even with interrupts masked), and each of them parks in a `cli; hlt`
//! loop. Then the stopper takes the console, prints its report and exits QEMU through the
//! `isa-debug-exit` device with a failure status, so scripts and tests see the failure.
//! A second core that faults meanwhile just parks; a fault inside the report exits at once.

use crate::arch::x86_64::{apic, cpu, idt::TrapFrame, trap};
use crate::percore::current_core;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const NOBODY: usize = usize::MAX;
static STOPPER: AtomicUsize = AtomicUsize::new(NOBODY);
/// Bit i: core i has parked (each core sets its own bit once, however it got there).
static PARKED: AtomicU64 = AtomicU64::new(0);

fn park() -> ! {
    PARKED.fetch_or(1 << current_core(), Ordering::AcqRel);
    cpu::halt_forever()
}

fn parked() -> usize {
    PARKED.load(Ordering::Acquire).count_ones() as usize
}

/// Writes straight to the UART, for use after the console has been seized.
struct Raw;

impl Write for Raw {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            if b == b'\n' {
                crate::arch::x86_64::serial::write_byte(b'\r');
            }
            crate::arch::x86_64::serial::write_byte(b);
        }
        Ok(())
    }
}

/// Exit QEMU with the failure status; halt if there is no debug-exit device.
pub fn exit_failure() -> ! {
    // SAFETY: the isa-debug-exit port only ends the emulator; on real hardware or a QEMU
    // without the device the write is ignored and we halt.
    unsafe { cpu::outl(abi::DEBUG_EXIT_PORT, abi::DEBUG_EXIT_FAILURE) };
    cpu::halt_forever()
}

/// Stop every core, print `report`, and exit with failure.
pub fn stop(report: impl FnOnce(&mut dyn Write)) -> ! {
    let me = current_core();
    if let Err(stopper) = STOPPER.compare_exchange(NOBODY, me, Ordering::AcqRel, Ordering::Acquire)
    {
        if stopper == me {
            let _ = writeln!(
                Raw,
                "\n{} fault while reporting a fault on core {me}",
                abi::protocol::FATAL
            );
            exit_failure();
        }
        park();
    }
    // NMI each online core by name (not a broadcast: a core still starting up has no IDT
    // that could take it) and wait, boundedly, for them to park.
    let online: heapless::Vec<usize, { abi::MAX_CORES }> = (0..crate::smp::cores_planned())
        .filter(|&c| c != me && crate::smp::is_online(c))
        .collect();
    let others = online.len();
    if others > 0 && apic::is_ready() {
        for &c in &online {
            if let Some(id) = crate::smp::apic_id_of(c) {
                apic::send_nmi(id);
            }
        }
        let start = cpu::rdtsc();
        while parked() < others && cpu::rdtsc() - start < 200_000_000 {
            core::hint::spin_loop();
        }
    }
    crate::console::seize();
    // Programs' output queued before the stop comes first (`console`).
    crate::console::write_all_seized();
    let _ = writeln!(Raw);
    report(&mut Raw);
    let _ = writeln!(
        Raw,
        "{}: stopped {} of {others} other cores; exiting with failure",
        abi::protocol::FATAL,
        parked()
    );
    exit_failure()
}

/// NMI: the stop signal from a stopper, or an unexpected NMI (a bug).
pub fn on_nmi(frame: &TrapFrame) {
    if STOPPER.load(Ordering::Acquire) != NOBODY {
        park();
    }
    stop(|w| {
        let _ = writeln!(
            w,
            "{} unexpected NMI on core {} at rip {:#x}",
            abi::protocol::FATAL,
            current_core(),
            frame.rip
        );
        trap::write_backtrace(w, frame.rip, frame.rbp);
    })
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    let rbp: u64;
    // SAFETY: reading rbp has no side effects.
    unsafe { core::arch::asm!("mov {}, rbp", out(reg) rbp, options(nomem, nostack)) };
    stop(|w| {
        let _ = writeln!(
            w,
            "{} panic on core {}: {}",
            abi::protocol::FATAL,
            current_core(),
            info.message()
        );
        if let Some(l) = info.location() {
            let _ = writeln!(w, "  at {}:{}:{}", l.file(), l.line(), l.column());
        }
        trap::write_backtrace(w, 0, rbp);
    })
}
