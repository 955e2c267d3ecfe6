//! Making processes: a program image (from the boot archive, or bytes a caller holds) loaded
//! into a new address space with its arguments, its first thread made, and the process
//! entered in its core's tables stopped ([`create_stopped`]) or started ([`spawn`]). Every
//! step that can fail gives back what the steps before it took.

use super::vspace::{VSpace, STACK_PAGES, STACK_TOP};
use super::{
    admin_for_child, percore, quota, remove, sched, start, text, user_for_child, Process, MAX_NAME,
};
use crate::arch::x86_64::idt::TrapFrame;
use crate::arch::x86_64::{gdt, paging::PAGE_SIZE};
use crate::mm::user::{IntoAbiError, UserSliceMut};
use crate::percore::current_core;
use abi::res::UserId;
use abi::{Error, Pid, Priority};
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

/// Load program `name` from the boot archive and start it on this core.
pub fn spawn(name: &str, args: &[&str], priority: Priority, parent: Pid) -> Result<Pid, Error> {
    // The composition of the `process` and `compute` resources' mechanisms: create the
    // process stopped, then give it the core (an implicit compute of the default degree).
    let pid = create_stopped(name, args, priority, parent)?;
    if let Err(e) = start(pid, 1) {
        let _ = remove(pid);
        return Err(e);
    }
    Ok(pid)
}

/// Start `image` (an ELF executable) as a process called `name` on this core.
pub fn spawn_image(
    name: &str,
    image: &[u8],
    args: &[&str],
    priority: Priority,
    parent: Pid,
) -> Result<Pid, Error> {
    create(name, Image::Passed(image), args, priority, parent, true)
}

/// Load program `name` as a *stopped* process on this core (the `process` resource's
/// open): it runs once a compute is bound to it ([`start`]).
pub fn create_stopped(
    name: &str,
    args: &[&str],
    priority: Priority,
    parent: Pid,
) -> Result<Pid, Error> {
    let image = crate::archive::find(name).ok_or(Error::NoSuchProgram)?;
    create(name, Image::Archived(image), args, priority, parent, false)
}

/// Where a program's ELF image comes from.
#[derive(Clone, Copy)]
enum Image<'a> {
    /// The boot archive, which never changes: its read-only segments are shared (`text`).
    Archived(&'static [u8]),
    /// A program's buffer (`SPAWN_IMAGE`): loaded privately.
    Passed(&'a [u8]),
}

fn create(
    name: &str,
    from: Image<'_>,
    args: &[&str],
    priority: Priority,
    parent: Pid,
    start: bool,
) -> Result<Pid, Error> {
    let name: heapless::String<MAX_NAME> =
        heapless::String::try_from(name).map_err(|_| Error::TooLong)?;
    let image = match from {
        Image::Archived(image) | Image::Passed(image) => image,
    };
    let plan = elfload::plan(image).map_err(|e| {
        log::warn!("spawn {name}: refused: {e}");
        Error::BadExecutable
    })?;
    let user = user_for_child();
    let mut vs = VSpace::new(user)?;
    for seg in &plan.segments {
        let (first, end) = seg.pages();
        if let (Image::Archived(archived), false) = (from, seg.writable) {
            vs.map_text(first, text::load(archived, seg)?, seg.executable)?;
            continue;
        }
        vs.map_zeroed(
            first,
            (end - first) / PAGE_SIZE,
            seg.writable,
            seg.executable,
        )?;
        let bytes = &image[seg.file_offset as usize..(seg.file_offset + seg.file_size) as usize];
        vs.load(seg.vaddr, bytes)?;
    }
    let stack_bottom = STACK_TOP - STACK_PAGES * PAGE_SIZE;
    vs.map_zeroed(stack_bottom, STACK_PAGES, true, false)?;
    let (rsp, argc, argv) = push_args(&vs, name.as_str(), args)?;

    let frame = TrapFrame {
        rdi: argc,
        rsi: argv,
        rip: plan.entry,
        cs: u64::from(gdt::USER_CS),
        rflags: 0x202,
        rsp,
        ss: u64::from(gdt::USER_DS),
        ..TrapFrame::ZERO
    };
    let pid = install(
        Newborn {
            name,
            priority,
            parent,
            user,
            admin: admin_for_child(),
            heap_end: plan.end,
            moved_from: None,
        },
        vs,
        &frame,
        None,
        start,
    )?;
    log::debug!(
        "spawned {pid} ({})",
        crate::proc::name_of(pid).unwrap_or_default()
    );
    Ok(pid)
}

/// May the running process have one more child? Not past
/// [`quota::CHILDREN_PER_PROCESS`] children it has not waited for yet, here, on other
/// cores, or on their way there (`Error::Limit`). Asked on the parent's core before a child
/// is made anywhere; the place is held until the returned slot is used or dropped: a
/// request that waits on another core for its child must hold it, else the process's
/// other threads, asking meanwhile, would not count that child (an audit found up to one
/// child per thread made past the limit so).
pub fn may_add_child() -> Result<ChildSlot, Error> {
    sched::with(|s| {
        let Some(serial) = s.current_process() else {
            return Ok(ChildSlot(None));
        };
        let me = crate::machine::pid(current_core(), serial);
        // Children elsewhere; those living here are counted by their own records.
        let local = s.processes.values().filter(|c| c.parent == me).count();
        let Some(p) = s.processes.get_mut(&serial) else {
            return Ok(ChildSlot(None));
        };
        let remote = p
            .followed
            .iter()
            .filter(|f| !f.tentative && f.now.core() != current_core())
            .count();
        if local + remote + p.children_coming >= quota::CHILDREN_PER_PROCESS {
            return Err(Error::Limit);
        }
        p.children_coming += 1;
        Ok(ChildSlot(Some(me)))
    })
}

/// A place under a process's limit of children, held by [`may_add_child`] for a child on
/// its way; given back when dropped, or taken by the child itself ([`ChildSlot::made`]).
/// (A thread removed while it holds one never gives it back: its process has ended.)
#[must_use]
pub struct ChildSlot(Option<Pid>);

impl ChildSlot {
    /// The child came: made on another core (then followed by its parent in the same step,
    /// so that it is counted once at every moment), or here (its own record counts it).
    pub fn made(mut self, child: Pid) {
        let Some(parent) = self.0.take() else {
            return;
        };
        sched::with(|s| {
            if let Some(p) = release(s, parent) {
                if child.core() != current_core() {
                    super::family::follow(p, child);
                }
            }
        });
    }
}

impl Drop for ChildSlot {
    fn drop(&mut self) {
        if let Some(parent) = self.0.take() {
            sched::with(|s| {
                release(s, parent);
            });
        }
    }
}

/// Give back a place `parent` held; its record, if it still runs.
fn release(s: &mut sched::Sched, parent: Pid) -> Option<&mut Process> {
    let p = s
        .processes
        .get_mut(&parent.serial())
        .filter(|p| p.pid == parent)?;
    p.children_coming = p.children_coming.saturating_sub(1);
    Some(p)
}

/// Who a new process is (besides its memory and registers).
pub struct Newborn {
    pub name: heapless::String<MAX_NAME>,
    pub priority: Priority,
    pub parent: Pid,
    pub user: UserId,
    pub admin: bool,
    pub heap_end: u64,
    /// Its pid before it migrated here (`None`: a new program).
    pub moved_from: Option<Pid>,
}

/// Enter a new process with address space `vs` into this core's tables; its thread starts
/// in user mode at `frame` (with FPU image `fx`, or a clean one).
pub fn install(
    who: Newborn,
    vs: VSpace,
    frame: &TrapFrame,
    fx: Option<&[u8; 512]>,
    start: bool,
) -> Result<Pid, Error> {
    sched::with(|s| {
        // A user's processes on a core, running or not yet reaped, are bounded.
        if who.user != UserId::KERNEL
            && s.processes.values().filter(|p| p.user == who.user).count()
                >= quota::PROCESSES_PER_USER
        {
            return Err(Error::Limit);
        }
        let serial = s.next_serial().ok_or(Error::Limit)?;
        let pid = crate::machine::pid(current_core(), serial);
        let p = Process {
            pid,
            parent: who.parent,
            name: who.name,
            priority: who.priority,
            vspace: Some(vs),
            heap_end: who.heap_end,
            ended: None,
            mode_ticks: [0; abi::MODE_COUNT],
            threads: Vec::new(),
            exited: alloc::collections::BTreeMap::new(),
            boot: who.parent == Pid(0),
            user: who.user,
            admin: who.admin,
            followed: Vec::new(),
            children_coming: 0,
            child_event: false,
            moved_from: who.moved_from,
            ipc: crate::ipc::ProcIpc::default(),
            stop_for_move: false,
            moving: false,
            mover: Pid(0),
            copying: false,
            movers_until: 0,
        };
        s.processes.insert(serial, p);
        let tid = match s.add_thread(serial, who.priority, frame, fx, start) {
            Ok(tid) => tid,
            Err(e) => {
                s.processes.remove(&serial);
                return Err(e);
            }
        };
        if let Some(p) = s.processes.get_mut(&serial) {
            p.threads.push(tid);
        }
        percore::this()
            .stats
            .processes
            .store(s.processes.len() as u64, Ordering::Relaxed);
        Ok(pid)
    })
}

/// Put argv on the new stack: the strings, then an array of (ptr, len) pairs; returns the
/// initial stack pointer (16-byte aligned, pointing at the array), argc and argv.
pub(super) fn push_args(vs: &VSpace, name: &str, args: &[&str]) -> Result<(u64, u64, u64), Error> {
    let all: Vec<&str> = core::iter::once(name).chain(args.iter().copied()).collect();
    let text: usize = all.iter().map(|a| a.len()).sum();
    if text + all.len() * 16 > (STACK_PAGES as usize - 1) * PAGE_SIZE as usize {
        return Err(Error::TooLong);
    }
    let mut at = STACK_TOP;
    let mut pairs: Vec<u64> = Vec::with_capacity(all.len() * 2);
    for a in &all {
        at -= a.len() as u64;
        UserSliceMut::new(at, a.len())
            .write(vs, a.as_bytes())
            .map_err(IntoAbiError::into_abi)?;
        pairs.extend([at, a.len() as u64]);
    }
    at = (at - pairs.len() as u64 * 8) & !15;
    UserSliceMut::<u64>::new(at, pairs.len())
        .write(vs, &pairs)
        .map_err(IntoAbiError::into_abi)?;
    Ok((at, all.len() as u64, at))
}
