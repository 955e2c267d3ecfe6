//! Typed user memory (`mm::user`): records go in and out whole, and every kind of bad user
//! address is refused with its reason before a byte moves.
//!
//! The tests build an address space of their own (never run) with two writable pages, a
//! read-only one and a hole after it, and copy through it as a system call does.

use crate::mm::user::{IntoAbiError, UserFault, UserPtr, UserPtrMut, UserSlice, UserSliceMut};
use crate::proc::vspace::VSpace;
use crate::{kassert, ktest};
use abi::ipc::Msg;
use abi::{Error, Pid, ProcInfo, WaitStatus};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

const PAGE: u64 = 4096;
/// Writable pages at `BASE` and `BASE + PAGE`, a read-only page at `BASE + 2 * PAGE`,
/// nothing at `BASE + 3 * PAGE`.
const BASE: u64 = 0x0000_0040_0000_0000;
const READ_ONLY: u64 = BASE + 2 * PAGE;
const HOLE: u64 = BASE + 3 * PAGE;
const KERNEL_ADDRESS: u64 = 0xffff_ffff_8020_0000;

fn test_space() -> Result<VSpace, String> {
    let mut vs = VSpace::new(abi::res::UserId::KERNEL).map_err(|e| format!("VSpace::new: {e}"))?;
    vs.map_zeroed(BASE, 2, true, false)
        .map_err(|e| format!("map writable: {e}"))?;
    vs.map_zeroed(READ_ONLY, 1, false, false)
        .map_err(|e| format!("map read-only: {e}"))?;
    vs.load(READ_ONLY, &0x5eed_u64.to_le_bytes())
        .map_err(|e| format!("load: {e}"))?;
    Ok(vs)
}

/// `got` must be the error `want`.
fn refused<T: core::fmt::Debug>(
    what: &str,
    got: Result<T, UserFault>,
    want: UserFault,
) -> Result<(), String> {
    match got {
        Err(e) if e == want => Ok(()),
        other => Err(format!("{what}: expected {want:?}, got {other:?}")),
    }
}

fn proc_info(i: u64) -> ProcInfo {
    let mut name = [0; abi::NAME_LEN];
    name[..3].copy_from_slice(b"abc");
    ProcInfo {
        pid: Pid::new(1, i as u32),
        cpu_ns: i * 1000,
        name_len: 3,
        name,
        ..ProcInfo::EMPTY
    }
}

ktest! {
    /// A record written through a `UserPtrMut` reads back the same through a `UserPtr`, and
    /// an array of records crossing a page boundary goes out and in whole.
    fn records_round_trip() -> TestResult {
        let vs = test_space()?;
        let status = WaitStatus { how: abi::ENDED_FAULT, code: 14, address: 0xdead, rip: 7 };
        UserPtrMut::new(BASE).write(&vs, &status).map_err(|e| format!("write: {e:?}"))?;
        let back: WaitStatus = UserPtr::new(BASE).read(&vs).map_err(|e| format!("read: {e:?}"))?;
        kassert!(back == status, "read back {back:?}, wrote {status:?}");

        let records: Vec<ProcInfo> = (1..=3).map(proc_info).collect();
        let at = BASE + PAGE - size_of::<ProcInfo>() as u64;
        let room = UserSliceMut::<ProcInfo>::new(at, 5);
        let n = room.write(&vs, &records).map_err(|e| format!("write slice: {e:?}"))?;
        kassert!(n == 3, "wrote {n} records of 3 into room for 5");
        let n = room.prefix(2).write(&vs, &records).map_err(|e| format!("prefix: {e:?}"))?;
        kassert!(n == 2, "wrote {n} records into room for 2");
        let back = UserSlice::<ProcInfo>::new(at, 3)
            .read_to_vec(&vs)
            .map_err(|e| format!("read slice: {e:?}"))?;
        kassert!(back == records, "records across a page boundary came back different");

        let bytes = UserSlice::<u8>::new(BASE + 1, 3).read_to_vec(&vs);
        kassert!(bytes == Ok(alloc::vec![0, 0, 0]), "unaligned bytes are fine: {bytes:?}");
        let nothing = UserSlice::<u8>::new(KERNEL_ADDRESS, 0).read_to_vec(&vs);
        kassert!(nothing == Ok(Vec::new()), "an empty range touches nothing: {nothing:?}");
        Ok(())
    }
}

ktest! {
    /// Kernel-half, non-canonical, wrapping, unaligned, unmapped and read-only addresses
    /// are each refused with their own reason, which a system call reports as BadAddress;
    /// a range that fails part-way writes nothing.
    fn bad_addresses_refused() -> TestResult {
        let vs = test_space()?;
        use UserFault::*;
        refused("kernel record", UserPtr::<u64>::new(KERNEL_ADDRESS).read(&vs), KernelHalf)?;
        refused(
            "kernel bytes",
            UserSliceMut::<u8>::new(0xffff_8000_0000_0000, 1).write(&vs, &[1]),
            KernelHalf,
        )?;
        refused("just above the user half", UserPtr::<u64>::new(1 << 47).read(&vs), NonCanonical)?;
        refused("in the hole", UserPtr::<Msg>::new(0x1234_0000_0000_0000).read(&vs), NonCanonical)?;
        refused(
            "straddling the top of the user half",
            UserSlice::<u8>::new((1 << 47) - 8, 16).read_to_vec(&vs),
            NonCanonical,
        )?;
        refused("wrapping bytes", UserSlice::<u8>::new(u64::MAX - 3, 8).read_to_vec(&vs), Wraps)?;
        refused(
            "wrapping length",
            UserSlice::<u64>::new(BASE, usize::MAX / 4).read_to_vec(&vs),
            Wraps,
        )?;
        refused("unaligned u64", UserPtr::<u64>::new(BASE + 1).read(&vs), Unaligned)?;
        refused("unaligned Msg", UserPtrMut::<Msg>::new(BASE + 4).write(&vs, &Msg::default()), Unaligned)?;
        refused(
            "unaligned records",
            UserSliceMut::<ProcInfo>::new(BASE + 2, 1).check(&vs),
            Unaligned,
        )?;
        refused("unmapped", UserPtr::<u64>::new(HOLE).read(&vs), Unmapped)?;
        refused("into the hole", UserSlice::<u8>::new(HOLE - 8, 16).read_to_vec(&vs), Unmapped)?;
        refused("read-only write", UserPtrMut::<u64>::new(READ_ONLY).write(&vs, &1), ReadOnly)?;
        refused("read-only check", UserPtrMut::<u64>::new(READ_ONLY).check(&vs), ReadOnly)?;
        let seed = UserPtr::<u64>::new(READ_ONLY).read(&vs);
        kassert!(seed == Ok(0x5eed), "a read-only page reads: {seed:?}");

        // Across a writable and a read-only page: refused whole, the writable part untouched.
        let before = UserSlice::<u8>::new(READ_ONLY - 8, 8).read_to_vec(&vs);
        refused(
            "writable then read-only",
            UserSliceMut::<u8>::new(READ_ONLY - 8, 16).write(&vs, &[0xaa; 16]),
            ReadOnly,
        )?;
        let after = UserSlice::<u8>::new(READ_ONLY - 8, 8).read_to_vec(&vs);
        kassert!(before == after && after == Ok(alloc::vec![0; 8]), "a refused copy wrote {after:?}");

        for fault in [Wraps, NonCanonical, KernelHalf, Unaligned, Unmapped, NotUser, ReadOnly] {
            kassert!(fault.into_abi() == Error::BadAddress, "{fault:?} is not BadAddress");
        }
        Ok(())
    }
}

/// User memory that is all there (every check passes, every byte reads as 0x5a): the
/// copies' own limits, apart from any address space.
struct Everywhere;

impl crate::mm::user::UserMemory for Everywhere {
    fn copy_in(&self, _: crate::mm::user::UserRange, out: &mut [u8]) -> Result<(), UserFault> {
        out.fill(0x5a);
        Ok(())
    }
    fn copy_out(&self, _: crate::mm::user::UserRange, _: &[u8]) -> Result<(), UserFault> {
        Ok(())
    }
    fn check(&self, _: crate::mm::user::UserRange, _: bool) -> Result<(), UserFault> {
        Ok(())
    }
}

ktest! {
    /// A copy in whose length the kernel heap cannot hold is `NoMemory`, and one whose range
    /// is bad is `BadAddress` before any memory is taken: never a kernel panic. A
    /// regression found by an audit: the system calls' copies (`SPAWN_IMAGE`'s 4 MiB image
    /// among them) took their buffer from the heap with an allocation that could not fail,
    /// so threads copying big images at once with the core's memory full stopped the
    /// kernel.
    fn big_copies_in_are_no_memory() -> TestResult {
        // Far more than the heap can hold, within the user half.
        const HUGE: usize = 1 << 46;
        let got = UserSlice::<u8>::new(0x1000, HUGE).read_to_vec_fallible(&Everywhere);
        kassert!(got.as_ref().err() == Some(&Error::NoMemory), "a {HUGE}-byte copy: {:?}", got.map(|v| v.len()));
        // One page more than the core has beyond the kernel's reserve: refused, the reserve
        // kept for the kernel's own allocations (which cannot fail).
        let core = crate::percore::current_core();
        let (free, _) = crate::mm::frames::counts(core);
        let spare = free.saturating_sub(crate::mm::frames::kernel_reserve(core));
        let len = ((spare + 1) * PAGE) as usize;
        let got = UserSlice::<u8>::new(0x1000, len).read_to_vec_fallible(&Everywhere);
        kassert!(got.as_ref().err() == Some(&Error::NoMemory), "a copy past the reserve ({len} bytes): {:?}", got.map(|v| v.len()));
        let vs = test_space()?;
        let got = UserSlice::<u8>::new(HOLE, HUGE).read_to_vec_fallible(&vs);
        kassert!(got.as_ref().err() == Some(&Error::BadAddress), "a copy from the hole: {:?}", got.map(|v| v.len()));
        let got = UserSlice::<u8>::new(BASE, 16).read_to_vec_fallible(&vs);
        kassert!(got.as_ref().map(|v| v.len()) == Ok(16), "a good copy: {:?}", got.map(|v| v.len()));
        Ok(())
    }
}
