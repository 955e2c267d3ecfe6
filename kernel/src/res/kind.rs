//! What a resource type is: the one trait every type implements ([`Resource`]), and the
//! registry that ties each `ResType` to its implementation ([`resource_types!`]).
//!
//! Each type lives in its own file under `res/` (its state, its five operations, its
//! `info`), and `res/local.rs` is generic: the table, the lookups, the rights checks and the
//! flows, which are the same for every type. Adding a type is a new file and one line in
//! the registry in `res/mod.rs` (and its `ResType` and name in the ABI).
//!
//! # Two phases
//!
//! An operation runs in two phases, so that nothing calls out of `res` while the core's
//! table is borrowed. First, `res::local` finds the resource, checks the rights and calls
//! the type's method on its state (`&mut self`) *inside* the table's borrow; the method may
//! only touch that state. It answers [`Step::Done`] with the operation's result, or
//! [`Step::Later`] with what is left to do: work that calls into `proc`, `rpcc`, `ipc` or
//! the scheduler (start a process, map frames, block), any of which may need the table
//! again. `res::local` runs that [`Later`] once the table is released. A type whose
//! operation always finishes in the table says so with `Infallible` as its `Later`. The
//! whole path is static: no allocation, one indirect call to reach the type.

#![deny(unsafe_code)]

use super::ReadOut;
use abi::res::ResId;
use abi::{Error, Pid};
use core::convert::Infallible;

/// What an operation did while its resource was in the table.
pub enum Step<T, L> {
    /// Finished: the operation's answer.
    Done(T),
    /// Work left for after the table is released (it calls out of `res`).
    Later(L),
}

/// Work an operation leaves for after the table is released; it produces the operation's
/// answer `T`. It may use the table again (through `res::local`), never while borrowed.
pub trait Later<T> {
    /// Finish the operation on resource `id` (`data`: the bytes WRITE was given; empty for
    /// the other operations).
    fn run(self, id: ResId, data: &[u8]) -> Result<T, Error>;
}

/// Nothing left to do: the `Later` of an operation that always finishes in the table.
impl<T> Later<T> for Infallible {
    fn run(self, _: ResId, _: &[u8]) -> Result<T, Error> {
        match self {}
    }
}

/// One resource type: its state (what a table slot holds) and its operations. The rights
/// were checked before any method runs (docs/resources.md says which right each needs);
/// the methods taking `&self`/`&mut self` run inside the table's borrow and touch only this
/// state. An operation a type does not have answers `NotSupported` (the defaults).
pub trait Resource: Stored {
    /// What READ leaves for after the table is released.
    type ReadLater: Later<ReadOut>;
    /// What WRITE leaves for after.
    type WriteLater: Later<u64>;
    /// What CONTROL leaves for after.
    type ControlLater: Later<u64>;
    /// What RES_INFO leaves for after (it cannot fail: what it cannot find reads as 0).
    type InfoLater: Later<(u64, u64)>;

    /// OPEN: make the state from the opener's `args` (docs/resources.md). Runs outside the
    /// table's borrow (the name is checked free; the resource enters the table after).
    fn open(args: &[u8]) -> Result<Self, Error> {
        let _ = args;
        Err(Error::NotSupported)
    }

    /// The process this resource is, if it is one (a process made for a remote opener is
    /// recorded as the opener's child on its core).
    fn process(&self) -> Option<Pid> {
        None
    }

    /// The most kernel heap this resource may come to hold for its users' data (a pipe's
    /// buffer), in frames: charged to its creator as user memory while it exists, so that
    /// one user's resources cannot take the kernel's own memory.
    fn heap_frames(&self) -> u64 {
        0
    }

    /// CLOSE, in the table: may the resource go now? (`Busy` if not.)
    fn close(&mut self) -> Result<(), Error> {
        Ok(())
    }

    /// The resource left the table (closed as `id`, or `None`: it never got in): give back
    /// what it holds. Runs outside the table's borrow.
    fn release(self, id: Option<ResId>) {
        let _ = id;
    }

    /// READ: `len` is the caller's buffer size, `arg` type-specific.
    fn read(&mut self, len: u64, arg: u64) -> Result<Step<ReadOut, Self::ReadLater>, Error> {
        let _ = (len, arg);
        Err(Error::NotSupported)
    }

    /// WRITE: `data` from the caller, `arg` type-specific; answers a count or value.
    fn write(&mut self, data: &[u8], arg: u64) -> Result<Step<u64, Self::WriteLater>, Error> {
        let _ = (data, arg);
        Err(Error::NotSupported)
    }

    /// The rights CONTROL command `cmd` needs (checked before [`Resource::control`] runs):
    /// the control right, unless the type says more.
    fn control_rights(cmd: u64) -> &'static [abi::res::Op] {
        let _ = cmd;
        &[abi::res::Op::Control]
    }

    /// CONTROL: command `cmd` (`abi::syscall::control`) with two arguments.
    fn control(
        &mut self,
        cmd: u64,
        a: u64,
        b: u64,
    ) -> Result<Step<u64, Self::ControlLater>, Error> {
        let _ = (cmd, a, b);
        Err(Error::NotSupported)
    }

    /// RES_INFO's type-specific `size` and `detail` (docs/resources.md).
    fn info(&self) -> Step<(u64, u64), Self::InfoLater>;
}

/// Where a type's state sits in a table slot (`res::State`); written by
/// [`resource_types!`], never by hand.
pub trait Stored: Sized {
    /// The state, if `state` holds this type.
    fn of(state: &super::State) -> Option<&Self>;
    /// The state, if `state` holds this type.
    fn of_mut(state: &mut super::State) -> Option<&mut Self>;
    /// The state taken out of a slot's, if it holds this type.
    fn take(state: super::State) -> Option<Self>;
    /// The slot's state holding this one.
    fn stored(self) -> super::State;
}

/// The registry: one line per type, `Kind => module::Type,` (`Kind` a `ResType` variant,
/// the module a file under `res/`). It declares the modules, makes `State` (what a table
/// slot holds: an enum over the types, the storage only), and `ops_of`, the one place where
/// a `ResType` is turned into its implementation. The match in `ops_of` is exhaustive over
/// `ResType`: a type without an implementation does not compile.
macro_rules! resource_types {
    ($($kind:ident => $module:ident :: $ty:ident,)*) => {
        $(pub mod $module;)*

        /// A resource's state in its core's table: one variant per type (the storage; the
        /// types are reached through [`ops_of`] and [`kind::Resource`]).
        pub enum State {
            $($kind($module::$ty),)*
        }

        impl State {
            /// The type this state is of.
            pub fn kind(&self) -> abi::res::ResType {
                match self {
                    $(State::$kind(_) => abi::res::ResType::$kind,)*
                }
            }

            /// [`kind::Resource::heap_frames`] of this state.
            pub fn heap_frames(&self) -> u64 {
                match self {
                    $(State::$kind(s) => kind::Resource::heap_frames(s),)*
                }
            }
        }

        /// The operations of type `kind`, generic code over its [`kind::Resource`].
        pub fn ops_of(kind: abi::res::ResType) -> &'static dyn local::Ops {
            match kind {
                $(abi::res::ResType::$kind => &local::Kind::<$module::$ty>::OPS,)*
            }
        }

        $(
            impl kind::Stored for $module::$ty {
                fn of(state: &State) -> Option<&Self> {
                    match state {
                        State::$kind(s) => Some(s),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
                fn of_mut(state: &mut State) -> Option<&mut Self> {
                    match state {
                        State::$kind(s) => Some(s),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
                fn take(state: State) -> Option<Self> {
                    match state {
                        State::$kind(s) => Some(s),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
                fn stored(self) -> State {
                    State::$kind(self)
                }
            }
        )*
    };
}
pub(super) use resource_types;

/// An 8-byte little-endian number, the whole of `args` (what most types open with).
pub fn u64_arg(args: &[u8]) -> Result<u64, Error> {
    let bytes: [u8; 8] = args
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or(Error::InvalidArgument)?;
    if args.len() != 8 {
        return Err(Error::InvalidArgument);
    }
    Ok(u64::from_le_bytes(bytes))
}
