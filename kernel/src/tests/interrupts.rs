//! IPIs between every pair of cores, broadcast IPIs, and interrupt-driven serial input.

use crate::ktest::TestResult;
use crate::{kassert, ktest, percore, smp, time};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

fn ipis_from_matrix(n: usize) -> Vec<Vec<u64>> {
    (0..n)
        .map(|to| {
            (0..n)
                .map(|from| percore::of(to).stats.ipis_from[from].load(Ordering::Relaxed))
                .collect()
        })
        .collect()
}

fn kick_each_other_core(_: u64) -> u64 {
    let me = percore::current_core();
    for c in (0..smp::cores_planned()).filter(|&c| c != me) {
        smp::kick(c);
    }
    0
}

fn broadcast(_: u64) -> u64 {
    smp::kick_all_others();
    0
}

/// Wait until every ordered pair (from, to), from != to, counted more IPIs than `before`.
fn wait_all_pairs(before: &[Vec<u64>]) -> TestResult {
    let n = before.len();
    let all_seen = || {
        let now = ipis_from_matrix(n);
        (0..n).all(|to| (0..n).all(|from| from == to || now[to][from] > before[to][from]))
    };
    // 60 s only catches a lost IPI (on a busy host a vCPU may not run for a while).
    if time::wait_until(60_000_000_000, all_seen) {
        return Ok(());
    }
    let now = ipis_from_matrix(n);
    let missing: Vec<_> = (0..n)
        .flat_map(|to| (0..n).map(move |from| (from, to)))
        .filter(|&(from, to)| from != to && now[to][from] <= before[to][from])
        .collect();
    Err(alloc::format!(
        "no IPI arrived for (from, to) pairs {missing:?}"
    ))
}

ktest! {
    /// Every core sends an IPI to every other core, and each one arrives, counted per sender.
    fn ipi_every_pair() -> TestResult {
        let n = smp::cores_planned();
        let before = ipis_from_matrix(n);
        for c in 0..n {
            let r = smp::call_on(c, kick_each_other_core, 0, 2_000_000_000);
            kassert!(r.is_ok(), "core {c} could not be asked to send: {r:?}");
        }
        wait_all_pairs(&before)
    }
}

ktest! {
    /// Every core broadcasts one IPI to all others, and each one arrives.
    fn ipi_broadcast_from_every_core() -> TestResult {
        let n = smp::cores_planned();
        let before = ipis_from_matrix(n);
        for c in 0..n {
            let r = smp::call_on(c, broadcast, 0, 2_000_000_000);
            kassert!(r.is_ok(), "core {c} could not be asked to broadcast: {r:?}");
        }
        wait_all_pairs(&before)
    }
}

fn square_plus_core(x: u64) -> u64 {
    x * x + percore::current_core() as u64
}

ktest! {
    /// A function posted to another core's mailbox runs there and its result comes back.
    fn call_on_runs_on_target() -> TestResult {
        for c in 0..smp::cores_planned() {
            let r = smp::call_on(c, square_plus_core, 7, 2_000_000_000);
            kassert!(r == Ok(49 + c as u64), "core {c} answered {r:?}");
        }
        let r = smp::call_on(abi::MAX_CORES - 1, square_plus_core, 1, 1_000_000);
        kassert!(r == Err(smp::CallError::NoSuchCore) || smp::cores_planned() == abi::MAX_CORES, "call to a core that is not online gave {r:?}");
        Ok(())
    }
}

ktest! {
    /// Bytes typed on the serial console arrive by interrupt (IOAPIC -> core 0). The test
    /// asks for input with a marker line; `cargo xtask test` answers with "ping".
    fn serial_input_by_interrupt() -> TestResult {
        let irqs = percore::of(0).stats.serial_irqs.load(Ordering::Relaxed);
        while crate::console::read_byte().is_some() {}
        crate::kprint!("{}\n", abi::protocol::KTEST_INPUT);
        let mut got = Vec::new();
        // 60 s only catches input that never comes (xtask answers at once; a busy host
        // may take a while to pass it on).
        let ok = time::wait_until(60_000_000_000, || {
            while let Some(b) = crate::console::read_byte() {
                got.push(b);
            }
            got.windows(4).any(|w| w == b"ping")
        });
        kassert!(ok, "no 'ping' on the serial port within 60 s (got {:?})", core::str::from_utf8(&got));
        let now = percore::of(0).stats.serial_irqs.load(Ordering::Relaxed);
        kassert!(now > irqs, "bytes arrived but no serial interrupt was counted");
        Ok(())
    }
}

/// The slow call of `call_on_after_timeout` may end (set by the test).
static SLOW_MAY_END: AtomicBool = AtomicBool::new(false);

/// A call that lasts until the test lets it end (60 s at most: a hang guard).
fn slow_until_released(x: u64) -> u64 {
    let end = crate::arch::x86_64::cpu::rdtsc() + time::tsc_hz() * 60;
    while !SLOW_MAY_END.load(Ordering::Acquire) && crate::arch::x86_64::cpu::rdtsc() < end {
        core::hint::spin_loop();
    }
    x + 1
}

ktest! {
    /// A call that times out stays in flight: the next call to that core is refused as Busy
    /// (never answered with the late result of the old one), and works once the old one ends.
    fn call_on_after_timeout() -> TestResult {
        // In big-lock mode the slow call holds the kernel lock, so the caller cannot look
        // at the clock before it ends: there is no timeout to test.
        if smp::cores_planned() < 2 {
            crate::kskip!("needs 2 cores");
        }
        if crate::structure::biglock() {
            crate::kskip!("not in big-lock mode");
        }
        // The slow call lasts until it is released, so the order below does not depend on
        // how fast the host runs either core.
        SLOW_MAY_END.store(false, Ordering::Release);
        let r = smp::call_on(1, slow_until_released, 1, 1_000_000);
        let busy = smp::call_on(1, square_plus_core, 3, 1_000_000);
        SLOW_MAY_END.store(true, Ordering::Release);
        kassert!(r == Err(smp::CallError::Timeout), "slow call gave {r:?}");
        kassert!(busy == Err(smp::CallError::Busy), "call during a slow one gave {busy:?}");
        // Released, it ends and frees the slot: calls are Busy until then, and then answered
        // with their own result (60 s only catches a hang).
        let mut r = Err(smp::CallError::Busy);
        time::wait_until(60_000_000_000, || {
            if r == Err(smp::CallError::Busy) {
                r = smp::call_on(1, square_plus_core, 3, 2_000_000_000);
            }
            r != Err(smp::CallError::Busy)
        });
        kassert!(r == Ok(10), "call after the slow one ended gave {r:?}");
        Ok(())
    }
}

ktest! {
    /// All 16 XMM registers and MXCSR survive interrupts taken while this core halts: trap
    /// entry saves the interrupted FPU/SSE state and gives handlers a clean one.
    fn sse_state_survives_interrupts() -> TestResult {
        let before: [u64; 32] = core::array::from_fn(|i| 0x0123_4567_89ab_cdef_u64.rotate_left(i as u32 * 5) ^ i as u64);
        let mut after = [0u64; 32];
        let mxcsr_in: u32 = 0x1f80 | (0b11 << 13); // round toward zero
        // [0]: MXCSR as found after the interrupts; [1]: scratch to restore the default.
        let mut mx = [0u32; 2];
        let ticks = percore::this().stats.ticks.load(Ordering::Relaxed);
        // SAFETY: loads and stores only the two local buffers and MXCSR; interrupts are
        // opened for a few `hlt`s exactly as the idle loop does; every XMM register and the
        // MXCSR are restored to their ABI state afterwards by the compiler's clobbers.
        unsafe {
            core::arch::asm!(
                "ldmxcsr [{mi}]",
                "movdqu xmm0, [{b}]", "movdqu xmm1, [{b} + 16]", "movdqu xmm2, [{b} + 32]",
                "movdqu xmm3, [{b} + 48]", "movdqu xmm4, [{b} + 64]", "movdqu xmm5, [{b} + 80]",
                "movdqu xmm6, [{b} + 96]", "movdqu xmm7, [{b} + 112]", "movdqu xmm8, [{b} + 128]",
                "movdqu xmm9, [{b} + 144]", "movdqu xmm10, [{b} + 160]", "movdqu xmm11, [{b} + 176]",
                "movdqu xmm12, [{b} + 192]", "movdqu xmm13, [{b} + 208]", "movdqu xmm14, [{b} + 224]",
                "movdqu xmm15, [{b} + 240]",
                "mov {n:e}, 5",
                "2:",
                "sti", "hlt", "cli",
                "dec {n:e}",
                "jnz 2b",
                "movdqu [{a}], xmm0", "movdqu [{a} + 16], xmm1", "movdqu [{a} + 32], xmm2",
                "movdqu [{a} + 48], xmm3", "movdqu [{a} + 64], xmm4", "movdqu [{a} + 80], xmm5",
                "movdqu [{a} + 96], xmm6", "movdqu [{a} + 112], xmm7", "movdqu [{a} + 128], xmm8",
                "movdqu [{a} + 144], xmm9", "movdqu [{a} + 160], xmm10", "movdqu [{a} + 176], xmm11",
                "movdqu [{a} + 192], xmm12", "movdqu [{a} + 208], xmm13", "movdqu [{a} + 224], xmm14",
                "movdqu [{a} + 240], xmm15",
                "stmxcsr [{mo}]",
                "mov {n:e}, 0x1f80",
                "mov [{mo} + 4], {n:e}",
                "ldmxcsr [{mo} + 4]",
                b = in(reg) before.as_ptr(),
                a = in(reg) after.as_mut_ptr(),
                mi = in(reg) &mxcsr_in,
                mo = in(reg) mx.as_mut_ptr(),
                n = out(reg) _,
                out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _, out("xmm4") _,
                out("xmm5") _, out("xmm6") _, out("xmm7") _, out("xmm8") _, out("xmm9") _,
                out("xmm10") _, out("xmm11") _, out("xmm12") _, out("xmm13") _, out("xmm14") _,
                out("xmm15") _,
            );
        }
        let mxcsr_out = mx[0];
        let taken = percore::this().stats.ticks.load(Ordering::Relaxed) - ticks;
        kassert!(taken >= 1, "no interrupt was taken during the test");
        kassert!(after == before, "XMM registers changed across interrupts");
        kassert!(mxcsr_out == mxcsr_in, "MXCSR changed across interrupts: {mxcsr_out:#x} != {mxcsr_in:#x}");
        Ok(())
    }
}
