//! Moving a process to another machine (issue 17; P0: Agora-1 ran a process on either PC):
//! the process written out as an image and read back in by another machine's kernel.
//!
//! On one machine [`super::migrate`] hands the new core the old one's frames; between
//! machines nothing is shared, so the same three steps go through bytes (`libs/procimage`
//! is the format and its checks):
//!
//! 1. [`export`] (`MIGRATE_EXPORT`): the process is stopped and described as for
//!    `MIGRATE` (`migrate::take_out`), and written into the caller's buffer: registers,
//!    FPU/SSE state, name, priority, heap end, and every page it owns. It stays stopped.
//! 2. The caller carries the image to the other machine (`user/machd`'s `OP_MOVE`), whose
//!    `machd` makes [`import`] (`MIGRATE_IMPORT`) there: the image is checked, its pages
//!    copied into frames, and the process rebuilt on the core asked for (`migrate::
//!    bring_in`, through RPCC), running on from where it stopped: as the importer's child,
//!    with the importer's user and rights (an image never says who its process is).
//! 3. [`finish`] (`MIGRATE_FINISH`) on the first machine: the old process ends with
//!    `ENDED_MOVED_AWAY` naming its new pid and machine (its parent's `WAIT` reports that:
//!    the kernel cannot follow it there), or, if the move failed, runs on.
//!
//! Only a process whose whole state is its memory and registers moves so: one with shared
//! memory attached (vregions, ICAs) is `NotSupported`, and everything `MIGRATE` refuses is
//! refused here too (threads, children, requests in flight, devices). Resource ids it
//! holds (a pipe as its standard output, say) name resources of the machine it left, which
//! the kernel there refuses (`NoSuchResource`: ids carry their machine, `crate::machine`).
//! Its console is the new machine's.
//!
//! A move is its mover's: only the process that exported it finishes it (another
//! ancestor's `MIGRATE_FINISH` is `Denied`: it would leave two copies). While the kernel
//! reads its frames (inside `MIGRATE_EXPORT`) a kill of it is `Busy`; once the image is
//! written it may be killed (then the finish is `NoSuchProcess`, and `ulib::mach::migrate`
//! kills the copy it started). A process exported and never finished (its exporter ended
//! first) stays stopped until killed, and after `migrate::MOVER_PATIENCE_NS` any ancestor
//! may abort the move; if its exporter was killed while the process was taken out, the
//! kernel aborts the move (`migrate::mover_gone`).

use super::migrate::{self, Snapshot};
use crate::arch::x86_64::{gdt, idt::TrapFrame, paging::phys_to_virt};
use crate::mm::frames;
use crate::mm::user::{UserMemory, UserRange};
use crate::rpcc::{self, Op, Out};
use abi::{Error, Pid, Priority, WaitStatus};
use alloc::boxed::Box;
use alloc::vec::Vec;
use procimage::{Header, Page, PAGE};

/// `MIGRATE_EXPORT`: stop process `pid` and write its image into the caller's `len` bytes
/// at `buf`; the image's length.
pub fn export(pid: Pid, buf: u64, len: u64) -> Result<u64, Error> {
    let pid = crate::machine::local_pid(pid.0)?;
    if pid == Pid(0) || Some(pid) == super::running_pid() {
        // A process does not carry itself out: its exporter finishes the move.
        return Err(Error::InvalidArgument);
    }
    let snapshot = migrate::take_out_patiently(pid)?;
    let written = write_image(&snapshot, buf, len);
    if written.is_err() {
        let _ = migrate::abort_on(pid);
        return written;
    }
    // Its frames are read: it may be killed again while its image travels.
    let copied = migrate::on(pid.core(), Op::MigrateCopied(pid), |_| {
        migrate::copied(pid).map(|()| Out::Unit)
    });
    if let Err(e) = copied {
        let _ = migrate::abort_on(pid);
        return Err(e);
    }
    written
}

fn write_image(s: &Snapshot, buf: u64, len: u64) -> Result<u64, Error> {
    if !s.attachments.is_empty() || s.pinned {
        return Err(Error::NotSupported);
    }
    let need = procimage::len_of(s.pages.len()) as u64;
    if len < need || s.pages.len() > procimage::MAX_PAGES {
        // Say how much is needed, where there is room for it.
        if len >= 8 {
            let _ = super::with_current_vspace(|vs| {
                vs.copy_out(UserRange::new(buf, 8, 1)?, &need.to_le_bytes())
            });
        }
        return Err(Error::TooLong);
    }
    let header = procimage::header(
        s.name.as_str(),
        s.priority as u64,
        s.heap_end,
        regs_of(&s.frame),
        bytemuck::cast(s.fx),
        s.pages.len(),
    );
    let list: Vec<Page> = s
        .pages
        .iter()
        .map(|&(addr, _, w, x)| Page {
            addr,
            flags: (u64::from(w) * procimage::WRITABLE) | (u64::from(x) * procimage::EXECUTABLE),
        })
        .collect();
    super::with_current_vspace(|vs| {
        vs.copy_out(
            UserRange::new(buf, procimage::pages_at(), 1)?,
            bytemuck::bytes_of(&header),
        )?;
        let list_at = buf + procimage::pages_at() as u64;
        vs.copy_out(
            UserRange::new(list_at, core::mem::size_of_val(list.as_slice()), 1)?,
            bytemuck::cast_slice(&list),
        )?;
        let mut at = buf + procimage::data_at(list.len()) as u64;
        for &(_, frame, _, _) in &s.pages {
            // SAFETY: a frame the stopped process owns (direct-mapped, a whole page);
            // nothing writes it while the process is stopped for its move.
            let page =
                unsafe { core::slice::from_raw_parts(phys_to_virt(frame) as *const u8, PAGE) };
            vs.copy_out(UserRange::new(at, PAGE, 1)?, page)?;
            at += PAGE as u64;
        }
        Ok::<_, crate::mm::user::UserFault>(())
    })?;
    Ok(need)
}

/// `MIGRATE_FINISH`: the exported process `pid` went to machine `machine` as `new` (it
/// ends), or, with `new` 0, did not (it runs on). Only its mover may finish it
/// (`migrate::commit`, `abort`).
pub fn finish(pid: Pid, new: u64, machine: u64) -> Result<(), Error> {
    let pid = crate::machine::local_pid(pid.0)?;
    if pid == Pid(0) || !rpcc::reachable(pid.core()) {
        return Err(Error::NoSuchProcess);
    }
    if new == 0 {
        return migrate::on(pid.core(), Op::ExportAbort(pid), |_| {
            migrate::abort_export(pid).map(|()| Out::Unit)
        })
        .map(drop);
    }
    // The new pid is the other machine's, made by its kernel: it names that machine.
    if new != 0 && (!Pid(new).is_canonical() || u64::from(Pid(new).machine()) != machine) {
        return Err(Error::InvalidArgument);
    }
    let status = WaitStatus {
        how: abi::ENDED_MOVED_AWAY,
        code: new,
        address: machine,
        rip: 0,
    };
    migrate::on(pid.core(), Op::MigrateCommit { pid, status }, |_| {
        migrate::commit(pid, status).map(|()| Out::Unit)
    })
    .map(drop)
}

/// `MIGRATE_IMPORT`: start the process in the caller's image of `len` bytes at `buf` on
/// `core`; its pid.
pub fn import(buf: u64, len: u64, core: usize) -> Result<Pid, Error> {
    if !rpcc::reachable(core) {
        return Err(Error::NoSuchCore);
    }
    if len > abi::syscall::MAX_MOVE_IMAGE {
        return Err(Error::TooLong);
    }
    let len = len as usize;
    let header: Header = super::with_current_vspace(|vs| {
        let mut h = <Header as bytemuck::Zeroable>::zeroed();
        vs.copy_in(
            UserRange::new(buf, procimage::pages_at().min(len), 1)?,
            &mut bytemuck::bytes_of_mut(&mut h)[..procimage::pages_at().min(len)],
        )?;
        Ok::<_, crate::mm::user::UserFault>(h)
    })?;
    let pages = procimage::check(&header, len).map_err(procimage::Bad::error)?;
    let name = procimage::name(&header).map_err(procimage::Bad::error)?;
    let name = heapless::String::try_from(name).map_err(|_| Error::InvalidArgument)?;
    if header.heap_end > super::vspace::HEAP_LIMIT {
        return Err(Error::InvalidArgument);
    }
    let priority = Priority::from_u64(header.priority).ok_or(Error::InvalidArgument)?;
    let parent = super::current_pid().ok_or(Error::NoSuchProcess)?;
    // No process makes one of a higher priority than its own (as `SPAWN`).
    if priority < super::priority_of(parent).unwrap_or(Priority::App) {
        return Err(Error::Denied);
    }
    let slot = super::may_add_child()?;
    let mut list = alloc::vec![Page { addr: 0, flags: 0 }; pages];
    super::with_current_vspace(|vs| {
        vs.copy_in(
            UserRange::new(
                buf + procimage::pages_at() as u64,
                core::mem::size_of_val(list.as_slice()),
                1,
            )?,
            bytemuck::cast_slice_mut(&mut list),
        )
    })?;
    procimage::check_pages(&list).map_err(procimage::Bad::error)?;
    // The pages' contents into frames of this core, which the destination copies.
    let mut frames_held = Frames(Vec::with_capacity(pages));
    let mut at = buf + procimage::data_at(pages) as u64;
    for _ in 0..pages {
        let frame = frames::alloc_user().ok_or(Error::NoMemory)?;
        frames_held.0.push(frame);
        // SAFETY: a frame just taken from this core's pool, direct-mapped, ours alone.
        let page = unsafe { core::slice::from_raw_parts_mut(phys_to_virt(frame) as *mut u8, PAGE) };
        super::with_current_vspace(|vs| vs.copy_in(UserRange::new(at, PAGE, 1)?, page))?;
        at += PAGE as u64;
    }
    let mut fx = header.fx;
    procimage::sanitize_fx(&mut fx);
    let frame = frame_of(&header.regs);
    let snapshot = Box::new(Snapshot {
        old: Pid(0),
        name,
        priority,
        parent,
        user: crate::res::flow_user(),
        admin: super::admin_for_child(),
        heap_end: header.heap_end,
        frame,
        fx: bytemuck::cast(fx),
        pages: list
            .iter()
            .zip(&frames_held.0)
            .map(|(p, &f)| {
                let w = p.flags & procimage::WRITABLE != 0;
                (p.addr, f, w, p.flags & procimage::EXECUTABLE != 0)
            })
            .collect(),
        attachments: Vec::new(),
        run: true,
        itself: false,
        pinned: false,
    });
    let new = migrate::bring_in_on(core, snapshot)?;
    // A child on another core: the importer's records of its children know it.
    slot.made(new);
    Ok(new)
}

/// A user frame's registers in the image's order (`procimage::Header::regs`).
fn regs_of(f: &TrapFrame) -> [u64; 18] {
    [
        f.rax, f.rbx, f.rcx, f.rdx, f.rsi, f.rdi, f.rbp, f.r8, f.r9, f.r10, f.r11, f.r12, f.r13,
        f.r14, f.r15, f.rip, f.rsp, f.rflags,
    ]
}

/// [`regs_of`] back: a user-mode frame (its selectors the user's, its flags only what user
/// mode may set).
fn frame_of(r: &[u64; 18]) -> TrapFrame {
    TrapFrame {
        rax: r[0],
        rbx: r[1],
        rcx: r[2],
        rdx: r[3],
        rsi: r[4],
        rdi: r[5],
        rbp: r[6],
        r8: r[7],
        r9: r[8],
        r10: r[9],
        r11: r[10],
        r12: r[11],
        r13: r[12],
        r14: r[13],
        r15: r[14],
        rip: r[procimage::RIP],
        rsp: r[procimage::RSP],
        rflags: procimage::user_rflags(r[procimage::RFLAGS]),
        cs: u64::from(gdt::USER_CS),
        ss: u64::from(gdt::USER_DS),
        ..TrapFrame::ZERO
    }
}

/// Frames taken for an import's pages: given back however the import ends (the new
/// process has its own copies).
struct Frames(Vec<u64>);

impl Drop for Frames {
    fn drop(&mut self) {
        for &f in &self.0 {
            let _ = frames::free(f);
        }
    }
}
