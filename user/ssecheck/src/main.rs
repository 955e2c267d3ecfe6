//! `ssecheck SEED [N]`: checks that the kernel preserves a program's SSE registers.
//!
//! One assembly block fills xmm0-xmm15 with a pattern derived from SEED, then N times
//! (default 200) spins long enough for timer interrupts to land and calls `YIELD` with the
//! `syscall` instruction directly, so the registers stay live across every interrupt and
//! every switch to another process (the `syscall` instruction clobbers only rcx and r11,
//! and the call's answer comes back in rax and rdx). Then it stores the registers and
//! compares them with the pattern: `ssecheck SEED: ok` (exit 0) or
//! `ssecheck SEED: XMM state changed` (exit 1). Run two with different seeds to check
//! that processes do not see each other's registers.
#![no_std]
#![no_main]

use core::arch::asm;
use ulib::abi::syscall;
use ulib::println;

ulib::main!(main);

const DEFAULT_ROUNDS: u64 = 200;
/// Spin-loop iterations between yields (two instructions each): about 0.5 ms of virtual
/// time under `-icount`, so the 100 Hz tick lands many times over a run.
const SPIN: u64 = 250_000;

fn main(args: &[&str]) -> i32 {
    let Some(seed_text) = args.get(1).copied() else {
        println!("usage: ssecheck SEED [ROUNDS]");
        return 2;
    };
    let rounds = match args.get(2).map(|a| a.parse::<u64>()) {
        None => DEFAULT_ROUNDS,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            println!("ssecheck: ROUNDS must be a positive number");
            return 2;
        }
    };
    let seed = seed_text
        .parse::<u64>()
        .unwrap_or_else(|_| fnv1a(seed_text));
    let mut pattern = [0u64; 32];
    let mut state = seed;
    for word in pattern.iter_mut() {
        *word = splitmix64(&mut state);
    }
    let mut seen = [0u64; 32];
    let errors: u64;
    // SAFETY: reads 256 bytes from `pattern` and writes 256 bytes to `seen`, both live
    // locals; every register it changes is declared; YIELD has no memory effects on us.
    unsafe {
        asm!(
            "movdqu xmm0, [rsi]",
            "movdqu xmm1, [rsi + 16]",
            "movdqu xmm2, [rsi + 32]",
            "movdqu xmm3, [rsi + 48]",
            "movdqu xmm4, [rsi + 64]",
            "movdqu xmm5, [rsi + 80]",
            "movdqu xmm6, [rsi + 96]",
            "movdqu xmm7, [rsi + 112]",
            "movdqu xmm8, [rsi + 128]",
            "movdqu xmm9, [rsi + 144]",
            "movdqu xmm10, [rsi + 160]",
            "movdqu xmm11, [rsi + 176]",
            "movdqu xmm12, [rsi + 192]",
            "movdqu xmm13, [rsi + 208]",
            "movdqu xmm14, [rsi + 224]",
            "movdqu xmm15, [rsi + 240]",
            "xor r10d, r10d",
            "22:",
            "mov r9, {spin}",
            "33:",
            "dec r9",
            "jnz 33b",
            "mov eax, {yield_call}",
            "syscall",
            "or r10, rax",
            "dec r8",
            "jnz 22b",
            "movdqu [rdi], xmm0",
            "movdqu [rdi + 16], xmm1",
            "movdqu [rdi + 32], xmm2",
            "movdqu [rdi + 48], xmm3",
            "movdqu [rdi + 64], xmm4",
            "movdqu [rdi + 80], xmm5",
            "movdqu [rdi + 96], xmm6",
            "movdqu [rdi + 112], xmm7",
            "movdqu [rdi + 128], xmm8",
            "movdqu [rdi + 144], xmm9",
            "movdqu [rdi + 160], xmm10",
            "movdqu [rdi + 176], xmm11",
            "movdqu [rdi + 192], xmm12",
            "movdqu [rdi + 208], xmm13",
            "movdqu [rdi + 224], xmm14",
            "movdqu [rdi + 240], xmm15",
            spin = const SPIN,
            yield_call = const syscall::YIELD,
            in("rsi") pattern.as_ptr(),
            in("rdi") seen.as_mut_ptr(),
            inout("r8") rounds => _,
            out("r9") _,
            out("r10") errors,
            out("rax") _, out("rcx") _, out("rdx") _, out("r11") _,
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
            out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
            out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
            out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
            options(nostack),
        );
    }
    if errors != 0 {
        println!("ssecheck {seed_text}: yield failed");
        return 1;
    }
    if seen == pattern {
        println!("ssecheck {seed_text}: ok");
        0
    } else {
        println!("ssecheck {seed_text}: XMM state changed");
        1
    }
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
