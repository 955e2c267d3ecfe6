//! User memory as types: the addresses a program passes, and the only ways to copy
//! through them.
//!
//! # Why
//!
//! A pointer a program passes in a system call is a number the program chose. It may point
//! into the kernel's half, be non-canonical, wrap around the end of the address space, be
//! misaligned, or name a page that is not mapped, not the program's, or read-only. And
//! whatever it points at may change at any moment: another thread of the process, or
//! another process sharing the page through a vregion, can write it while the kernel
//! looks. So the kernel never dereferences a user address. It copies the bytes *once* into
//! kernel memory through the process's page tables ([`UserMemory`], implemented by
//! [`crate::proc::vspace::VSpace`]) and then checks and uses only its copy; checking the
//! user's memory and then reading it again would let the program change it in between
//! (time of check to time of use, TOCTOU).
//!
//! Copying bytes into a value is only sound if *every* pattern of bytes is a valid value.
//! For a `bool` (only 0 and 1 are valid) or an enum (only its discriminants), filling it
//! from bytes the user chose is undefined behaviour, and no safe function may do it. The
//! types here enforce that with one bound: a record can be read or written through
//! [`UserPtr`], [`UserPtrMut`], [`UserSlice`] and [`UserSliceMut`] only if it is
//! [`bytemuck::Pod`]. `Pod` is derived on the `abi` records (`#[derive(Pod, Zeroable)]`),
//! and the derive refuses, at compile time, a record that is not `repr(C)`/transparent,
//! has padding, or has a field that is not itself `Pod`: `bool`, `char`, references and
//! enums are not, so a record with such a field does not compile as a `Pod`, and then
//! `UserPtr::<Record>::read` does not exist for it (the `abi` crate's docs hold a
//! `compile_fail` test of this). A field that means a flag or a choice is therefore an
//! integer in the ABI, and the kernel turns it into its own `bool` or enum explicitly after
//! the copy (as `abi::Priority::from_u64` does), refusing values it does not know.
//!
//! # The checks
//!
//! Every copy checks, before touching anything, that the range is in the user half, does
//! not wrap, and (for records and slices of records) is aligned for the type; a failure is
//! a [`UserFault`] naming the reason, which the system call reports as
//! `Error::BadAddress` ([`IntoAbiError`]). Then the page walk checks each page is mapped, user-accessible and,
//! for a write, writable; a range on several pages is checked whole before any byte moves,
//! so a bad pointer changes nothing, and a range within one page walks the tables once.
//! A length of zero touches nothing and is always accepted.

#![deny(unsafe_code)]

use crate::arch::x86_64::paging::PAGE_SIZE;
use abi::Error;
use alloc::vec::Vec;
use bytemuck::Pod;
use core::marker::PhantomData;

/// First address above the user half (bit 47 set; everything from here up to the kernel
/// half is non-canonical).
pub const USER_END: u64 = 0x0000_8000_0000_0000;
/// First address of the kernel half.
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// Why a user address was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserFault {
    /// The range runs past the end of the address space.
    Wraps,
    /// The range reaches the hole between the halves (bits 47..63 not all equal).
    NonCanonical,
    /// The range reaches the kernel's half.
    KernelHalf,
    /// The address is not a multiple of the record's alignment.
    Unaligned,
    /// A page of the range is not mapped.
    Unmapped,
    /// A page of the range is mapped but not for the user.
    NotUser,
    /// A page the kernel must write for the user is read-only.
    ReadOnly,
}

/// An error as a system call reports it. (Not `From<UserFault> for Error`: a second `From`
/// impl for `Error` would make `?` ambiguous in every closure whose error type is inferred.)
pub trait IntoAbiError {
    fn into_abi(self) -> Error;
}

impl IntoAbiError for Error {
    fn into_abi(self) -> Error {
        self
    }
}

impl IntoAbiError for UserFault {
    /// Every reason is `BadAddress` to the program (the ABI has one error for a bad
    /// pointer); the reason is for the kernel's tests and traces.
    fn into_abi(self) -> Error {
        Error::BadAddress
    }
}

/// A range of user addresses checked to lie in the user half without wrapping. Made only by
/// [`UserRange::new`]; an address space copies through nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserRange {
    start: u64,
    len: usize,
}

impl UserRange {
    /// Check `len` bytes at `start`, which must be a multiple of `align` (a power of two).
    #[inline]
    pub fn new(start: u64, len: usize, align: usize) -> Result<UserRange, UserFault> {
        debug_assert!(align.is_power_of_two());
        if len != 0 {
            // `start <= end - 1 < USER_END`: both ends are in the user half.
            match start.checked_add(len as u64) {
                Some(end) if end <= USER_END => {}
                _ => return Err(Self::why_not(start, len)),
            }
        }
        if start & (align as u64 - 1) != 0 {
            return Err(UserFault::Unaligned);
        }
        Ok(UserRange { start, len })
    }

    /// The reason a non-empty range failed the check in [`new`](Self::new).
    #[cold]
    fn why_not(start: u64, len: usize) -> UserFault {
        let Some(last) = start.checked_add(len as u64 - 1) else {
            return UserFault::Wraps;
        };
        let outside = if start >= USER_END { start } else { last };
        if outside >= KERNEL_START {
            UserFault::KernelHalf
        } else {
            UserFault::NonCanonical
        }
    }

    /// `count` records of `size` bytes each, aligned to `align`.
    fn of_records(
        start: u64,
        count: usize,
        size: usize,
        align: usize,
    ) -> Result<UserRange, UserFault> {
        let len = count.checked_mul(size).ok_or(UserFault::Wraps)?;
        UserRange::new(start, len, align)
    }

    pub fn start(&self) -> u64 {
        self.start
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

/// An address space the kernel copies user memory through (a process's
/// [`VSpace`](crate::proc::vspace::VSpace)). Each copy fails without moving a byte if any
/// page of the range is not the user's (and writable, for a copy out).
pub trait UserMemory {
    /// Copy `out.len()` (= `from.len()`) bytes from the user's range `from`.
    fn copy_in(&self, from: UserRange, out: &mut [u8]) -> Result<(), UserFault>;
    /// Copy `data` (`to.len()` bytes) to the user's range `to`.
    fn copy_out(&self, to: UserRange, data: &[u8]) -> Result<(), UserFault>;
    /// Check that the user may read (or, with `write`, write) all of `at`, copying nothing.
    fn check(&self, at: UserRange, write: bool) -> Result<(), UserFault>;
}

/// The address of a `T` the kernel reads from user memory (a `*const T` argument).
pub struct UserPtr<T> {
    addr: u64,
    _t: PhantomData<fn() -> T>,
}

/// The address of a `T` the kernel writes to user memory (a `*mut T` argument).
pub struct UserPtrMut<T> {
    addr: u64,
    _t: PhantomData<fn(T)>,
}

/// `len` `T`s in user memory the kernel reads (a `*const T` and a length).
pub struct UserSlice<T = u8> {
    addr: u64,
    len: usize,
    _t: PhantomData<fn() -> T>,
}

/// `len` `T`s in user memory the kernel writes (a `*mut T` and a capacity).
pub struct UserSliceMut<T = u8> {
    addr: u64,
    len: usize,
    _t: PhantomData<fn(T)>,
}

// Addresses are plain numbers whatever `T` is: copyable without `T: Copy`.
macro_rules! plain_address {
    ($($ty:ident),*) => {$(
        impl<T> Clone for $ty<T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $ty<T> {}
        impl<T> core::fmt::Debug for $ty<T> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, concat!(stringify!($ty), "({:#x})"), self.addr)
            }
        }
    )*};
}
plain_address!(UserPtr, UserPtrMut, UserSlice, UserSliceMut);

impl<T: Pod> UserPtr<T> {
    /// The address as the program passed it; nothing is checked until it is used.
    pub const fn new(addr: u64) -> Self {
        UserPtr {
            addr,
            _t: PhantomData,
        }
    }

    fn range(self) -> Result<UserRange, UserFault> {
        UserRange::new(self.addr, size_of::<T>(), align_of::<T>())
    }

    /// Copy the record in (once: the kernel uses this copy, never the user's memory again).
    #[inline]
    pub fn read(self, mem: &impl UserMemory) -> Result<T, UserFault> {
        let mut value = T::zeroed();
        mem.copy_in(self.range()?, bytemuck::bytes_of_mut(&mut value))?;
        Ok(value)
    }
}

impl<T: Pod> UserPtrMut<T> {
    /// The address as the program passed it; nothing is checked until it is used.
    pub const fn new(addr: u64) -> Self {
        UserPtrMut {
            addr,
            _t: PhantomData,
        }
    }

    fn range(self) -> Result<UserRange, UserFault> {
        UserRange::new(self.addr, size_of::<T>(), align_of::<T>())
    }

    /// Copy `value` out to the user's record.
    #[inline]
    pub fn write(self, mem: &impl UserMemory, value: &T) -> Result<(), UserFault> {
        mem.copy_out(self.range()?, bytemuck::bytes_of(value))
    }

    /// Check that the record is there and the user's to write, writing nothing (before an
    /// operation that cannot be undone, so that a bad pointer loses nothing).
    #[inline]
    pub fn check(self, mem: &impl UserMemory) -> Result<(), UserFault> {
        mem.check(self.range()?, true)
    }
}

impl<T: Pod> UserSlice<T> {
    /// `len` records at `addr` as the program passed them; nothing is checked until used.
    pub const fn new(addr: u64, len: usize) -> Self {
        UserSlice {
            addr,
            len,
            _t: PhantomData,
        }
    }

    fn range(self) -> Result<UserRange, UserFault> {
        UserRange::of_records(self.addr, self.len, size_of::<T>(), align_of::<T>())
    }

    /// Copy all `len` records in (once).
    pub fn read_to_vec(self, mem: &impl UserMemory) -> Result<Vec<T>, UserFault> {
        let range = self.range()?;
        let mut out = alloc::vec![T::zeroed(); self.len];
        mem.copy_in(range, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }

    /// [`read_to_vec`](Self::read_to_vec) for a length the program chose (up to a call's
    /// limit, megabytes): the range is checked before any memory is taken, and a copy the
    /// core's memory cannot hold without the kernel's reserve is `NoMemory`, not a kernel
    /// panic (an audit found threads copying 4 MiB images at once could exhaust the heap;
    /// a review, that copies taken from the reserve left the next kernel allocation to
    /// fail; `usermem::big_copies_in_are_no_memory`).
    pub fn read_to_vec_fallible(self, mem: &impl UserMemory) -> Result<Vec<T>, Error> {
        let range = self.range().map_err(IntoAbiError::into_abi)?;
        mem.check(range, false).map_err(IntoAbiError::into_abi)?;
        let bytes = self.len.saturating_mul(size_of::<T>()) as u64;
        if bytes > PAGE_SIZE && !crate::mm::frames::above_reserve(bytes.div_ceil(PAGE_SIZE)) {
            return Err(Error::NoMemory);
        }
        let mut out = Vec::new();
        out.try_reserve_exact(self.len)
            .map_err(|_| Error::NoMemory)?;
        out.resize(self.len, T::zeroed());
        mem.copy_in(range, bytemuck::cast_slice_mut(&mut out))
            .map_err(IntoAbiError::into_abi)?;
        Ok(out)
    }
}

impl<T: Pod> UserSliceMut<T> {
    /// Room for `len` records at `addr` as the program passed it; nothing is checked until
    /// used.
    pub const fn new(addr: u64, len: usize) -> Self {
        UserSliceMut {
            addr,
            len,
            _t: PhantomData,
        }
    }

    /// The first `len` records (at most this slice's length).
    pub const fn prefix(self, len: usize) -> Self {
        UserSliceMut::new(self.addr, if len < self.len { len } else { self.len })
    }

    fn range(self) -> Result<UserRange, UserFault> {
        UserRange::of_records(self.addr, self.len, size_of::<T>(), align_of::<T>())
    }

    /// Fill the start of the slice with as many of `data` as fit; returns how many. Nothing
    /// is written if any of those records is not the user's to write.
    pub fn write(self, mem: &impl UserMemory, data: &[T]) -> Result<usize, UserFault> {
        let n = data.len().min(self.len);
        mem.copy_out(self.prefix(n).range()?, bytemuck::cast_slice(&data[..n]))?;
        Ok(n)
    }

    /// Check that the whole slice is the user's to write, writing nothing.
    pub fn check(self, mem: &impl UserMemory) -> Result<(), UserFault> {
        mem.check(self.range()?, true)
    }
}
