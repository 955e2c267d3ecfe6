//! The contract between the Musubi kernel, its user programs and its host tooling.
//!
//! Everything here is plain data with no dependencies, so the kernel, user programs and
//! `xtask` (which reads what the kernel prints) agree on one definition: the system-call
//! numbers and register convention ([`syscall`]), the error enum ([`Error`]), process ids
//! ([`Pid`]), priorities, and the records some calls fill in. `ResId`/`ResName` and `Rights`
//! arrive with the resource layer. [`bench`] holds what the user bench programs and xtask
//! both need to know.
//!
//! The records that cross user memory derive `bytemuck::Pod`, which is what lets the kernel
//! copy them from untrusted bytes (its `mm::user` module accepts nothing else). The derive
//! accepts only integers and arrays of them, without padding:
//!
//! ```
//! #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
//! #[repr(C)]
//! struct Plain { ready: u8, _pad: [u8; 7], value: u64 }
//! ```
//!
//! and refuses a `bool` (or an enum), whose other bit patterns would be undefined:
//!
//! ```compile_fail,E0277
//! #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
//! #[repr(C)]
//! struct Flagged { ready: bool, _pad: [u8; 7], value: u64 }
//! ```
#![cfg_attr(not(test), no_std)]

pub mod bench;
pub mod blk;
pub mod buf;
pub mod dev;
pub mod fnid;
pub mod fs;
pub mod ipc;
pub mod mach;
pub mod net;
pub mod res;
pub mod ring;
pub mod syscall;
mod types;

pub use types::*;

/// I/O port of QEMU's `isa-debug-exit` device, which xtask always attaches.
///
/// Writing `v` makes QEMU exit with status `(v << 1) | 1`. A clean power-off goes through
/// ACPI instead and exits with status 0, so every non-zero status means failure.
pub const DEBUG_EXIT_PORT: u16 = 0xf4;

/// Value the kernel writes to [`DEBUG_EXIT_PORT`] when it stops on a fault or panic.
pub const DEBUG_EXIT_FAILURE: u32 = 1;

/// The QEMU exit status that [`DEBUG_EXIT_FAILURE`] produces.
pub const QEMU_STATUS_FAILURE: i32 = ((DEBUG_EXIT_FAILURE << 1) | 1) as i32;

/// Most cores Musubi manages; per-core tables are sized by it.
pub const MAX_CORES: usize = 64;

/// Lines the kernel prints for its host tooling. The kernel writes them and `xtask`
/// parses them, so both sides use these prefixes.
pub mod protocol {
    /// `ktest: run NAME` — an in-kernel test starts.
    pub const KTEST_RUN: &str = "ktest: run ";
    /// `ktest: ok NAME (N us)` — it passed.
    pub const KTEST_OK: &str = "ktest: ok ";
    /// `ktest: FAIL NAME: reason` — it failed.
    pub const KTEST_FAIL: &str = "ktest: FAIL ";
    /// `ktest: skip NAME: reason` — it could not run here (too few cores, wrong kernel
    /// structure); counted as skipped, never as passed.
    pub const KTEST_SKIP: &str = "ktest: skip ";
    /// `ktest: fault-test NAME expects "TEXT"` — an expected-fault test, run in its own boot.
    pub const KTEST_FAULT_TEST: &str = "ktest: fault-test ";
    /// `ktest: done P passed, F failed, S skipped` — the in-kernel run ended.
    pub const KTEST_DONE: &str = "ktest: done ";
    /// `ktest: input please` — a test waits for bytes on the serial port.
    pub const KTEST_INPUT: &str = "ktest: input please";
    /// `boot: summary ...` — printed once boot is complete.
    pub const BOOT_SUMMARY: &str = "boot: summary";
    /// `FATAL ...` — first line of a kernel-mode fault or panic report.
    pub const FATAL: &str = "FATAL";
}
