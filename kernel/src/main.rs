//! Musubi: a research kernel for x86_64 that ties five classic OS papers into one system.
//!
//! This file is the boot sequence, read top to bottom:
//!
//! 1. [`kmain_bsp`] (bootstrap core, on the boot stack): console, boot information, the
//!    kernel's page tables, the platform's ACPI tables, the split of physical memory into
//!    per-core pools, this core's pool and heap; then it moves to its own guarded stack.
//! 2. [`bsp_main`]: descriptor tables, clocks, interrupts, the other cores, and then either
//!    the in-kernel tests, a power-off, or idle.
//! 3. Application processors go through [`entry::boot::ap_entry`] and the same per-core
//!    set-up.
//!
//! See docs/design.md for the architecture and docs/tour.md for where each paper lives.
#![no_std]
#![no_main]

extern crate alloc;
// The mem functions and unwinder stubs every freestanding binary needs.
extern crate bare;

mod arch;
mod archive;
mod biglock;
mod console;
mod cpu_local;
mod entry;
mod fatal;
mod fnid;
mod init;
mod ipc;
mod ipc_calls;
mod ktest;
mod machine;
mod mm;
mod modes;
mod percore;
mod proc;
mod res;
mod ring;
mod ring_calls;
mod rpcc;
mod smp;
mod structure;
mod syscall;
mod tests;
mod time;
mod trace;

use arch::x86_64::{acpi, apic, cpu, gdt, idt, ioapic, paging, pvh, serial, trap};
use core::sync::atomic::Ordering;
use frames::{PhysRange, FRAME_SIZE};

/// Pages of each core's main kernel stack.
pub const KERNEL_STACK_PAGES: u64 = 8;
/// Pages of each interrupt stack (NMI, double fault, machine check, debug).
const IST_STACK_PAGES: u64 = 4;

/// What the bootstrap core learnt during boot, kept for the summary and the tests.
pub struct BootState {
    pub cmdline: heapless::String<{ pvh::MAX_CMDLINE }>,
    pub platform: acpi::Platform,
    pub features: cpu::Features,
    pub ram_bytes: u64,
}

static BOOT: spin::Once<BootState> = spin::Once::new();

/// Boot facts (after `kmain_bsp` has run).
pub fn boot_state() -> &'static BootState {
    BOOT.get().expect("boot state read before boot")
}

/// Frames set aside, before pools exist, for the kernel's own page tables.
struct EarlyFrames {
    next: u64,
    end: u64,
}

impl EarlyFrames {
    fn alloc(&mut self) -> Option<u64> {
        (self.next < self.end).then(|| {
            self.next += FRAME_SIZE;
            self.next - FRAME_SIZE
        })
    }
}

/// Bootstrap core, from `kernel_start64` with the physical address of the PVH start info.
#[no_mangle]
pub extern "C" fn kmain_bsp(start_info: u32) -> ! {
    time::record_kernel_entry();
    percore::init_this_core(0);
    modes::start_this_core();
    arch::x86_64::early::load_this_core();
    console::init(log::LevelFilter::Info);

    // SAFETY: `start_info` is what the PVH loader passed; the boot tables map low memory.
    let boot = unsafe { pvh::parse(u64::from(start_info)) };
    let args = bootargs::parse(&boot.cmdline, |w| log::warn!("{w}"));
    // Before any resource or process: their ids carry it.
    machine::set(args.machine.unwrap_or(0));
    log::set_max_level(match args.log {
        bootargs::LogLevel::Error => log::LevelFilter::Error,
        bootargs::LogLevel::Warn => log::LevelFilter::Warn,
        bootargs::LogLevel::Info => log::LevelFilter::Info,
        bootargs::LogLevel::Debug => log::LevelFilter::Debug,
        bootargs::LogLevel::Trace => log::LevelFilter::Trace,
    });
    kprintln!(
        "Musubi {} booting; command line: '{}'",
        env!("CARGO_PKG_VERSION"),
        boot.cmdline
    );
    if boot.cmdline_truncated {
        log::warn!(
            "command line longer than {} bytes was cut",
            pvh::MAX_CMDLINE
        );
    }
    let features = cpu::Features::read();
    let missing = features.missing();
    if !missing.is_empty() {
        // Before the heap exists: no allocation here.
        fatal::stop(|w| {
            let _ = write!(
                w,
                "{} this CPU lacks what Musubi needs:",
                abi::protocol::FATAL
            );
            for name in &missing {
                let _ = write!(w, " {name};");
            }
            let _ = writeln!(w, " use a CPU that has it (QEMU: -cpu max)");
        });
    }
    for (have, name) in [(features.smep, "SMEP"), (features.smap, "SMAP")] {
        if !have {
            log::warn!("this CPU has no {name}: the kernel is not protected against {} user memory by mistake", if name == "SMEP" { "running" } else { "touching" });
        }
    }
    res::set_rcc(args.rcc);
    res::pipe::set_notify(!args.pipe_poll);
    res::device::set_line_only(args.pci_line_only);
    rpcc::configure(
        args.rpcc_notify,
        args.rpcc_agents,
        args.rpcc_inline,
        args.rpcc_halt,
    );
    if args.trace {
        trace::enable();
    }
    if args.biglock {
        // From here on this core holds the one kernel lock except in user mode and halts.
        structure::choose_biglock();
        biglock::acquire();
    }
    // Physical memory: RAM minus what is already in use.
    let image = paging::image_layout();
    let mut holes: heapless::Vec<PhysRange, 16> = heapless::Vec::new();
    let _ = holes.push(PhysRange::new(0, 1 << 20)); // real-mode area, trampoline, firmware
    let _ = holes.push(PhysRange::new(image.phys.0, image.phys.1));
    for m in &boot.modules {
        let _ = holes.push(PhysRange::new(m.start, m.start.saturating_add(m.size)));
    }
    let ram: heapless::Vec<PhysRange, { pvh::MAX_MEMMAP }> = boot.ram().collect();
    let ram_bytes = ram.iter().map(|r| r.end - r.start).sum();
    let mut usable = [PhysRange::new(0, 0); 64];
    let n = frames::usable_minus_holes(&ram, &holes, &mut usable);

    // Frames for the kernel page tables, from the first usable range below 1 GiB (the
    // boot tables map only that much).
    let regions = &boot.memmap;
    let table_frames = paging::kernel_space_frames(regions);
    let early = usable[..n]
        .iter()
        .find(|r| r.frames() >= table_frames && r.start + table_frames * FRAME_SIZE <= 1 << 30)
        .expect("no room below 1 GiB for the kernel page tables");
    let mut early = EarlyFrames {
        next: early.start,
        end: early.start + table_frames * FRAME_SIZE,
    };
    let early_start = early.next;
    // SAFETY: first and only call, on the bootstrap core, boot tables active; the early
    // frames are RAM that nothing else uses.
    let root = unsafe { paging::build_kernel_space(regions, &mut || early.alloc()) }
        .expect("cannot build the kernel page tables");
    // Only the frames the tables took stay out of the pools.
    let early_range = PhysRange::new(early_start, early.next);
    log::debug!(
        "kernel page tables at {root:#x}, {} early frames used",
        (early.next - early_range.start) / FRAME_SIZE
    );
    // Only now: the loader may put the archive anywhere in RAM (QEMU puts it at the top of
    // the first 2 GiB), and only the kernel's tables map all of RAM; the boot tables map
    // the first GiB.
    match boot.modules.first() {
        Some(m) => archive::set(m.start, m.size),
        None => log::warn!("no boot archive: no user programs (xtask attaches one with -initrd)"),
    }

    // The platform.
    ioapic::disable_pic(trap::VEC_PIC_BASE);
    apic::choose_mode(features.x2apic);
    apic::init_this_core();
    let platform = acpi::discover(boot.rsdp, apic::id()).unwrap_or_else(|e| panic!("ACPI: {e}"));
    let planned = platform
        .apic_ids
        .len()
        .min(args.smp.unwrap_or(abi::MAX_CORES));
    smp::set_apic_ids(&platform.apic_ids[..planned]);

    // Per-core pools over what is left.
    let _ = holes.push(early_range);
    let n = frames::usable_minus_holes(&ram, &holes, &mut usable);
    let pools = frames::split_into_pools(&usable[..n], planned)
        .unwrap_or_else(|e| panic!("cannot split memory into {planned} pools: {e}"));
    mm::frames::set_pool_layout(pools.iter().cloned().collect());
    mm::frames::init_this_core();
    mm::heap::init_this_core();

    BOOT.call_once(|| BootState {
        cmdline: boot.cmdline.clone(),
        platform,
        features,
        ram_bytes,
    });
    let stack = mm::kstack::alloc(KERNEL_STACK_PAGES).expect("no memory for the boot core's stack");
    cpu::switch_stack(stack.top, bsp_main)
}

/// Descriptor tables for the calling core: interrupt stacks, GDT/TSS, IDT.
pub fn init_cpu_tables() {
    let ist = [IST_STACK_PAGES; 4].map(|p| {
        mm::kstack::alloc(p)
            .expect("no memory for interrupt stacks")
            .top
    });
    let rsp0 = mm::kstack::alloc(KERNEL_STACK_PAGES)
        .expect("no memory for the ring-0 stack")
        .top;
    gdt::init_this_core(ist, rsp0);
    idt::init_this_core();
    arch::x86_64::context::init_syscall_this_core();
    arch::x86_64::context::protect_from_user_this_core(&cpu::Features::read());
}

/// Start the programs the command line asks for on this core (and the shell on core 0,
/// which `init` keeps running), as the kernel's children. A missing or broken program is reported, not fatal.
pub fn start_boot_programs() {
    let state = boot_state();
    let args = bootargs::parse(&state.cmdline, |_| {});
    let me = percore::current_core();
    let kernel = abi::Pid(0);
    let boot_programs = &percore::this().stats.boot_programs;
    for start in args.starts.iter().filter(|s| s.core == me) {
        let argv: alloc::vec::Vec<&str> = start.args().collect();
        let priority = if start.driver {
            abi::Priority::Driver
        } else if start.server {
            abi::Priority::Server
        } else {
            abi::Priority::App
        };
        match proc::spawn(start.program, &argv, priority, kernel) {
            Ok(_) => {
                boot_programs.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => log::warn!("start={}:{}: {e}", start.core, start.program),
        }
    }
    let tests_or_poweroff = args.ktest.is_some() || args.poweroff;
    start_configured(me, &state.cmdline, !tests_or_poweroff);
    if me == 0 && args.shell && !tests_or_poweroff {
        // Started again whenever it ends (init).
        init::start_shell();
    }
    if args.starts.iter().any(|s| s.core >= smp::cores_planned()) && me == 0 {
        log::warn!("start= names a core that is not in use; ignored");
    }
}

/// The system processes the boot configuration places on this core (P0's placement;
/// `bootargs::config`): `boot.cfg` from the boot archive, overridden by the command line's
/// words of the same keys. Core 0 prints what it could not use (the defaults stand for it)
/// and the placement. A group starts only if `start` (not a test or power-off boot) and its
/// device is attached: the disk manager, buffer managers and file server with a virtio-blk
/// disk, the network driver and server with a virtio-net device.
fn start_configured(me: usize, cmdline: &str, start: bool) {
    use bootargs::config::{self, Service};
    let say = |p: config::Problem<'_>| {
        if me == 0 {
            log::warn!("{p}");
        }
    };
    let mut cfg = config::Config::default();
    match archive::find(config::FILE).map(core::str::from_utf8) {
        Some(Ok(text)) => config::read_file(text, &mut cfg, say),
        Some(Err(_)) if me == 0 => {
            log::warn!("{}: not text; using the defaults", config::FILE)
        }
        None if me == 0 => log::info!(
            "no {} in the boot archive; using the defaults",
            config::FILE
        ),
        _ => {}
    }
    config::apply_words(cmdline, &mut cfg, say);
    let plan = config::plan(&cfg, smp::cores_planned(), say);
    let attached = |device: u16| {
        arch::x86_64::pci::functions()
            .iter()
            .any(|f| f.vendor == 0x1af4 && f.device == device)
    };
    let files = attached(0x1042);
    let net = attached(0x1041);
    if me == 0 && !plan.is_empty() {
        let mut line = alloc::string::String::new();
        for p in &plan {
            let _ =
                core::fmt::Write::write_fmt(&mut line, format_args!(" {}@{}", p.program, p.core));
        }
        let why = if !start {
            " (not started: a test or power-off boot)"
        } else if cfg.files && !files {
            " (no virtio-blk disk: the file service does not start)"
        } else {
            ""
        };
        log::info!(
            "{}: system processes (program@core):{line}{why}",
            config::FILE
        );
    }
    if !start {
        return;
    }
    let boot_programs = &percore::this().stats.boot_programs;
    for p in plan.iter().filter(|p| p.core == me) {
        let present = match p.service {
            Service::Files => files,
            Service::Net => net,
        };
        if !present {
            continue;
        }
        let argv: alloc::vec::Vec<&str> = p.args.split(' ').filter(|a| !a.is_empty()).collect();
        let priority = if p.driver {
            abi::Priority::Driver
        } else {
            abi::Priority::Server
        };
        match proc::spawn(p.program, &argv, priority, abi::Pid(0)) {
            Ok(_) => {
                boot_programs.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => log::warn!("{}: {} on core {}: {e}", config::FILE, p.program, p.core),
        }
    }
}

/// Bootstrap core on its own stack.
extern "C" fn bsp_main() -> ! {
    init_cpu_tables();
    let state = boot_state();
    let args = bootargs::parse(&state.cmdline, |_| {});

    let cal = time::calibrate();
    time::start_tick_this_core();
    log::info!(
        "{} mode APIC, TSC {} MHz, LAPIC timer {} MHz (/16), tick {} Hz (calibrated: {} of {} rounds undisturbed, the best to {} ppm)",
        if apic::is_x2apic() { "x2APIC" } else { "xAPIC" },
        cal.rates.tsc_hz / 1_000_000,
        cal.rates.lapic_hz_div16 / 1_000_000,
        time::HZ,
        cal.undisturbed,
        cal.measured,
        cal.best_ppm
    );

    // Serial input: IRQ 4 through the IOAPIC to this core.
    let serial_irq = state.platform.isa_irq(serial::IRQ);
    match state
        .platform
        .ioapics
        .iter()
        .find(|io| io.serves(serial_irq.gsi))
    {
        Some(io) => {
            for io in &state.platform.ioapics {
                io.mask_all();
            }
            io.route(
                serial_irq.gsi,
                trap::VEC_SERIAL as u8,
                apic::id(),
                serial_irq.active_low,
                serial_irq.level,
            );
            serial::enable_receive_interrupt();
        }
        None => log::warn!(
            "no IOAPIC serves GSI {}: serial input disabled",
            serial_irq.gsi
        ),
    }

    // PCI: enumerate, and make each function a device resource for user-mode drivers.
    arch::x86_64::pci_irq::init(
        &state.platform.ioapics,
        &state.platform.overrides,
        apic::id(),
    );
    res::device::create_all();

    rpcc::init_this_core();
    trace::init_this_core();
    smp::mark_online();
    let planned = smp::cores_planned();
    let started = smp::start_aps();
    // Every core reached its idle loop: boot is complete.
    time::wait_until(1_000_000_000, || {
        (1..planned)
            .filter(|&c| smp::is_online(c))
            .all(|c| percore::of(c).stats.idle_at_tsc.load(Ordering::Acquire) != 0)
    });
    summary(planned, started + 1);

    if let Some(patterns) = args.ktest {
        let s = ktest::run(patterns, args.ktest_after);
        if s.failed > 0 {
            fatal::exit_failure();
        }
        power_off();
    }
    if args.poweroff {
        // Run the boot programs (start=) to their end, then power off.
        start_boot_programs();
        let running =
            || (0..planned).any(|c| percore::of(c).stats.boot_programs.load(Ordering::Acquire) > 0);
        proc::sched::run_until(u64::MAX, || !running());
        power_off();
    }
    entry::boot::idle()
}

/// The boot summary: cores, frames per core, boot time.
fn summary(planned: usize, online: usize) {
    let state = boot_state();
    let idle_tsc = (0..planned)
        .map(|c| percore::of(c).stats.idle_at_tsc.load(Ordering::Acquire))
        .max()
        .unwrap_or(0)
        .max(cpu::rdtsc());
    let entry_ns = time::tsc_to_ns(time::kernel_entry_tsc());
    let idle_ns = time::tsc_to_ns(idle_tsc);
    kprintln!(
        "{} cores_online={online} cores_planned={planned} cores_in_madt={} entry_ns={entry_ns} idle_ns={idle_ns} ram_mib={}",
        abi::protocol::BOOT_SUMMARY,
        state.platform.cores_in_madt,
        state.ram_bytes >> 20
    );
    kprintln!(
        "boot: {online} of {planned} cores online; kernel entered at {:.3} ms, all cores idle at {:.3} ms ({:.3} ms in the kernel)",
        entry_ns as f64 / 1e6,
        idle_ns as f64 / 1e6,
        (idle_ns - entry_ns) as f64 / 1e6
    );
    let args = bootargs::parse(&state.cmdline, |_| {});
    if let (Some(k), Some(n)) = (args.machine, args.machines) {
        kprintln!("boot: machine {k} of {n} (machine={k} machines={n}; machd joins them)");
    }
    for core in 0..planned {
        let (free, total) = mm::frames::counts(core);
        let r = mm::frames::pool_ranges(core);
        let (lo, hi) = (
            r.first().map_or(0, |r| r.start),
            r.last().map_or(0, |r| r.end),
        );
        kprintln!(
            "boot: core {core}: {total} frames ({} MiB) in [{lo:#x}, {hi:#x}), {free} free",
            (total * FRAME_SIZE) >> 20
        );
    }
}

/// Power off through ACPI; if that fails, say so and exit with failure.
pub fn power_off() -> ! {
    kprintln!("powering off");
    acpi::poweroff(&boot_state().platform);
    time::wait_until(100_000_000, || false);
    log::error!("ACPI power-off did not take effect");
    fatal::exit_failure()
}
