//! The system calls: decoding a `syscall` frame, doing the call, encoding the result.
//!
//! Every argument from user space is checked here or in the function it is passed to:
//! numbers against their ranges, pointers as `mm::user`'s typed addresses, copied once
//! through the caller's address space (`Error::BadAddress` if any byte is not the
//! caller's), strings for length and UTF-8.
//! Nothing a program passes can make the kernel fault.

#![deny(unsafe_code)]

use crate::arch::x86_64::idt::TrapFrame;
use crate::arch::x86_64::paging::PAGE_SIZE;
use crate::mm::user::{UserPtrMut, UserSlice, UserSliceMut};
use crate::percore::{self, current_core};
use crate::proc::{self, sched};
use crate::res::{self, ReadOut};
use abi::res::{ResId, Rights, UserId};
use abi::syscall as nr;
use abi::{Error, Pid, Priority};
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

/// Largest single console write or read.
pub(crate) const MAX_IO: u64 = 64 * 1024;

/// Handle the system call in `frame` (from the `syscall` entry) and store its result.
pub fn dispatch(frame: &mut TrapFrame) {
    let a = [
        frame.rdi, frame.rsi, frame.rdx, frame.r10, frame.r8, frame.r9,
    ];
    // A new flow: this kernel activity acts for the calling process's user (RCC).
    crate::res::begin_flow(proc::current_user());
    let r = match frame.rax {
        nr::EXIT => proc::exit_current(abi::WaitStatus {
            how: abi::ENDED_EXIT,
            code: a[0],
            ..Default::default()
        }),
        nr::WAIT => wait(a[0], a[1], a[2]),
        nr::SPAWN => spawn(a[0], a[1], a[2], a[3], a[4], current_core() as u64),
        nr::SPAWN_ON => spawn(a[0], a[1], a[2], a[3], a[4], a[5]),
        nr::SPAWN_IMAGE => spawn_image(a[0], a[1], a[2], a[3], a[4], a[5]),
        nr::MIGRATE => usize::try_from(a[1])
            .map_err(|_| Error::NoSuchCore)
            .and_then(|core| proc::migrate::migrate(Pid(a[0]), core))
            .map(|p| p.0),
        nr::MIGRATE_EXPORT => proc::export::export(Pid(a[0]), a[1], a[2]),
        nr::MIGRATE_IMPORT => usize::try_from(a[2])
            .map_err(|_| Error::NoSuchCore)
            .and_then(|core| proc::export::import(a[0], a[1], core))
            .map(|p| p.0),
        nr::MIGRATE_FINISH => proc::export::finish(Pid(a[0]), a[1], a[2]).map(|()| 0),
        nr::RPCC_STATS => rpcc_stats(a[0], a[1]),
        nr::SUBMIT => crate::ipc_calls::submit(a[0]),
        nr::COLLECT => crate::ipc_calls::collect(a[0], a[1], a[2]),
        nr::CALL => crate::ipc_calls::call(a[0], a[1], a[2]),
        nr::SEND => crate::ipc_calls::send(a[0], a[1]),
        nr::RECV => crate::ipc_calls::recv(a[0], a[1], a[2]),
        nr::REPLY => crate::ipc_calls::reply(a[0], a[1], a[2]),
        nr::REPLY_ERROR => crate::ipc::reply_error(a[0], a[1]).map(|()| 0),
        nr::FN_RESTART => copy_in(a[3], a[4], abi::fnid::RESTART_ARGS_MAX as u64)
            .and_then(|args| crate::ipc::restart::opt_in(a[0], a[1], a[2], &args))
            .map(|()| 0),
        nr::REPLY_RECV => crate::ipc_calls::reply_recv(a[0], a[1], a[2], a[3], a[4], a[5]),
        nr::ENTER => crate::ring_calls::enter(a[0], a[1], a[2]),
        nr::RING_SETUP => crate::ring_calls::setup(a[0], a[1]),
        nr::THREAD_CREATE => proc::threads::create(a[0], a[1], a[2]),
        nr::THREAD_EXIT => proc::threads::exit(a[0]),
        nr::THREAD_JOIN => proc::threads::join(a[0], a[1]),
        nr::THREAD_SELF => proc::threads::current(),
        nr::MODES => {
            let n = crate::smp::cores_planned().min(a[1] as usize);
            let infos: Vec<abi::ModeInfo> = (0..n).map(crate::modes::info_of).collect();
            write_records(a[0], &infos)
        }
        nr::TRACE => match a[0] {
            _ if !crate::trace::enabled() => Err(Error::NotSupported),
            nr::TRACE_DUMP => Ok(crate::trace::dump()),
            nr::TRACE_CLEAR => Ok(crate::trace::clear()),
            nr::TRACE_STATUS => Ok(crate::trace::held()),
            _ => Err(Error::InvalidArgument),
        },
        nr::CPU_TIME => sched::cpu_time_current().ok_or(Error::NoSuchProcess),
        nr::GETPID => proc::running_pid().map(|p| p.0).ok_or(Error::NoSuchProcess),
        nr::CORE => Ok(current_core() as u64),
        nr::YIELD => {
            sched::yield_now();
            Ok(0)
        }
        nr::SLEEP => sleep(a[0]),
        nr::CLOCK => Ok(crate::time::now_ns()),
        nr::CONSOLE_WRITE => console_write(a[0], a[1]),
        nr::CONSOLE_READ => console_read(a[0], a[1], a[2]),
        nr::MEMORY => proc::grow_heap(a[0]),
        nr::PROCESSES => processes(a[0], a[1]),
        nr::CORES => cores(a[0], a[1]),
        nr::KILL => proc::kill(Pid(a[0])).map(|()| 0),
        // Only a process the administrator or the kernel created may power off.
        nr::POWEROFF => {
            if proc::current_is_admin() {
                crate::power_off()
            } else {
                Err(Error::Denied)
            }
        }
        nr::RES_OPEN => res_open(a[0], a[1], a[2], a[3], a[4]),
        nr::RES_CLOSE => res::close(ResId(a[0])).map(|()| 0),
        nr::RES_READ => res_read(ResId(a[0]), a[1], a[2], a[3]),
        nr::RES_WRITE => res_write(ResId(a[0]), a[1], a[2], a[3]),
        nr::RES_CONTROL => res::control(ResId(a[0]), a[1], a[2], a[3]),
        nr::RES_LIST => res_list(a[0], a[1], a[2]),
        nr::RES_INFO => res::info(ResId(a[0]))
            .and_then(|i| proc::with_current_vspace(|vs| UserPtrMut::new(a[1]).write(vs, &i)))
            .map(|()| 0),
        nr::SETUSER => u32::try_from(a[0])
            .map_err(|_| Error::InvalidArgument)
            .and_then(|u| proc::set_current_user(UserId(u)))
            .map(|()| 0),
        nr::THREAD_SETUSER => u32::try_from(a[0])
            .map_err(|_| Error::InvalidArgument)
            .and_then(|u| proc::set_thread_user(UserId(u)))
            .map(|()| 0),
        nr::GETUSER => Ok(u64::from(proc::current_user().0)),
        nr::FN_REGISTER..=nr::FN_TAKEOVER => fn_call(frame.rax, a),
        nr::DEV_LIST..=nr::DEV_IRQ_ACK => dev_call(frame.rax, a),
        _ => Err(Error::NoSuchCall),
    };
    crate::res::end_flow();
    let (rax, rdx) = abi::syscall::encode(r);
    frame.rax = rax;
    frame.rdx = rdx;
}

pub(crate) fn copy_in(uaddr: u64, len: u64, max: u64) -> Result<Vec<u8>, Error> {
    if len > max {
        return Err(Error::TooLong);
    }
    proc::with_current_vspace(|vs| {
        UserSlice::<u8>::new(uaddr, len as usize).read_to_vec_fallible(vs)
    })
}

fn wait(pid: u64, status_ptr: u64, timeout_ns: u64) -> Result<u64, Error> {
    let status_out = UserPtrMut::<abi::WaitStatus>::new(status_ptr);
    // Check the status pointer before blocking, so a bad one fails at once.
    proc::with_current_vspace(|vs| status_out.write(vs, &abi::WaitStatus::default()))?;
    let (child, status) = proc::wait(Pid(pid), timeout_ns)?;
    proc::with_current_vspace(|vs| status_out.write(vs, &status))?;
    Ok(child.0)
}

/// The calling process, as the parent of a child at `priority` (`SPAWN`, `SPAWN_ON`,
/// `SPAWN_IMAGE`), and the place the child takes under its limit: `Denied` if the child
/// would outrank it (and so could starve it and everything else at its level), or
/// `may_add_child`'s error if it has too many.
fn parent_of_child(priority: Priority) -> Result<(Pid, proc::ChildSlot), Error> {
    let parent = proc::current_pid().ok_or(Error::NoSuchProcess)?;
    if priority < proc::priority_of(parent).unwrap_or(Priority::App) {
        return Err(Error::Denied);
    }
    Ok((parent, proc::may_add_child()?))
}

fn spawn(
    name_ptr: u64,
    name_len: u64,
    args_ptr: u64,
    args_len: u64,
    priority: u64,
    core: u64,
) -> Result<u64, Error> {
    let priority = Priority::from_u64(priority).ok_or(Error::InvalidArgument)?;
    let name = copy_in(name_ptr, name_len, proc::MAX_NAME as u64)?;
    let name = core::str::from_utf8(&name).map_err(|_| Error::InvalidArgument)?;
    let args = copy_in(args_ptr, args_len, proc::MAX_ARGS as u64)?;
    let args = core::str::from_utf8(&args).map_err(|_| Error::InvalidArgument)?;
    let args: Vec<&str> = args.split_terminator('\0').collect();
    let (parent, slot) = parent_of_child(priority)?;
    let core = usize::try_from(core).map_err(|_| Error::NoSuchCore)?;
    if core == current_core() {
        return proc::spawn(name, &args, priority, parent).map(|c| c.0);
    }
    if !crate::rpcc::reachable(core) {
        return Err(Error::NoSuchCore);
    }
    let op = crate::rpcc::Op::Spawn {
        name: name.into(),
        args: args.iter().map(|a| (*a).into()).collect(),
        priority,
    };
    spawn_there(core, op, slot)
}

/// A spawn `op` performed on `core` (another core), its place under the limit held
/// meanwhile: the child's pid, noted as this process's child there.
fn spawn_there(core: usize, op: crate::rpcc::Op, slot: proc::ChildSlot) -> Result<u64, Error> {
    match crate::rpcc::call(core, op)? {
        crate::rpcc::Out::Pid(child) => {
            slot.made(child);
            Ok(child.0)
        }
        _ => Err(Error::Unknown),
    }
}

/// `SPAWN_IMAGE`: the ELF image at `image_ptr` as a child on this core or on `core`
/// (`abi::syscall`).
#[inline(never)]
fn spawn_image(
    image_ptr: u64,
    image_len: u64,
    args_ptr: u64,
    args_len: u64,
    priority: u64,
    core: u64,
) -> Result<u64, Error> {
    let priority = Priority::from_u64(priority).ok_or(Error::InvalidArgument)?;
    let args = copy_in(args_ptr, args_len, proc::MAX_ARGS as u64)?;
    let args = core::str::from_utf8(&args).map_err(|_| Error::InvalidArgument)?;
    let mut args = args.split_terminator('\0');
    let name = args
        .next()
        .filter(|n| !n.is_empty())
        .ok_or(Error::InvalidArgument)?;
    let args: Vec<&str> = args.collect();
    let (parent, slot) = parent_of_child(priority)?;
    let core = match core {
        nr::SPAWN_IMAGE_HERE => current_core(),
        c => usize::try_from(c).map_err(|_| Error::NoSuchCore)?,
    };
    if core != current_core() && !crate::rpcc::reachable(core) {
        return Err(Error::NoSuchCore);
    }
    let image = copy_in(image_ptr, image_len, nr::MAX_IMAGE)?;
    if core == current_core() {
        return proc::spawn_image(name, &image, &args, priority, parent).map(|c| c.0);
    }
    // The copy travels in the request and is dropped there; the other core checks the
    // image as this one would.
    let op = crate::rpcc::Op::SpawnImage {
        image,
        name: name.into(),
        args: args.iter().map(|a| (*a).into()).collect(),
        priority,
    };
    spawn_there(core, op, slot)
}

fn rpcc_stats(ptr: u64, capacity: u64) -> Result<u64, Error> {
    let n = crate::smp::cores_planned().min(capacity as usize);
    let infos: Vec<abi::RpccInfo> = (0..n).map(crate::rpcc::info_of).collect();
    write_records(ptr, &infos)
}

/// Copy `records` to the caller's array at `ptr` (room for them all); returns how many.
fn write_records<T: bytemuck::Pod>(ptr: u64, records: &[T]) -> Result<u64, Error> {
    let out = UserSliceMut::<T>::new(ptr, records.len());
    proc::with_current_vspace(|vs| out.write(vs, records)).map(|n| n as u64)
}

/// The function-id calls (`abi::fnid`), rarely made: kept out of [`dispatch`]'s body.
#[inline(never)]
fn fn_call(number: u64, a: [u64; 6]) -> Result<u64, Error> {
    let name = || copy_in(a[0], a[1], abi::fnid::FN_NAME_MAX as u64);
    match number {
        nr::FN_REGISTER => name()
            .and_then(|name| crate::fnid::register(&name, ResId(a[2])))
            .map(|id| id.0),
        nr::FN_LOOKUP => name()
            .and_then(|name| crate::fnid::lookup(&name))
            .map(|id| id.0),
        nr::FN_UNREGISTER => crate::fnid::unregister(a[0]).map(|()| 0),
        nr::FN_LIST => fn_list(a[0], a[1], a[2]),
        nr::FN_STATE => crate::fnid::state(a[0], a[1]),
        nr::FN_TAKEOVER => crate::ipc::takeover::takeover(a[0], ResId(a[1]), a[2]),
        _ => Err(Error::NoSuchCall),
    }
}

/// The device calls for user-mode drivers (`abi::dev`; `res/device.rs`).
#[inline(never)]
fn dev_call(number: u64, a: [u64; 6]) -> Result<u64, Error> {
    use crate::res::device;
    let me = || proc::running_pid().ok_or(Error::NoSuchProcess);
    match number {
        nr::DEV_LIST => {
            let room = a[1].min(abi::dev::MAX_FUNCTIONS as u64) as usize;
            let out = UserSliceMut::<abi::dev::PciInfo>::new(a[0], room);
            proc::with_current_vspace(|vs| out.check(vs))?;
            if current_core() != 0 {
                return Err(Error::NotSupported);
            }
            let infos = device::list();
            write_records(a[0], &infos[..infos.len().min(room)])
        }
        nr::DEV_CLAIM => device::claim(ResId(a[0])).map(|()| 0),
        nr::DEV_CONFIG => device::config(ResId(a[0]), a[1], a[2], a[3]),
        nr::DEV_MAP_BAR => {
            let (phys, size) = device::memory_bar(ResId(a[0]), a[1])?;
            let pages = size.div_ceil(PAGE_SIZE);
            proc::with_vspace_of(me()?, |vs| {
                vs.map_device(a[2], phys & !(PAGE_SIZE - 1), pages)
            })?;
            Ok(pages * PAGE_SIZE)
        }
        nr::DMA_ALLOC => {
            // DMA memory is for drivers: a caller must hold a device.
            if !device::holds_any(me()?) {
                return Err(Error::Denied);
            }
            proc::with_vspace_of(me()?, |vs| vs.map_dma(a[0], a[1]))
        }
        nr::DMA_FREE => proc::with_vspace_of(me()?, |vs| vs.free_dma(a[0], a[1])).map(|()| 0),
        nr::DEV_IRQ => device::irq(ResId(a[0]), a[1]),
        nr::DEV_IRQ_ACK => device::irq_ack(ResId(a[0])),
        _ => Err(Error::NoSuchCall),
    }
}

/// FN_LIST(`*mut FnInfo`, capacity, flags): the whole room is checked first, so a bad
/// pointer is `BadAddress` however many functions there are.
fn fn_list(ptr: u64, capacity: u64, flags: u64) -> Result<u64, Error> {
    if flags & !abi::fnid::FN_LIST_LOCAL != 0 {
        return Err(Error::InvalidArgument);
    }
    let room = capacity.min(abi::fnid::MAX_FNIDS as u64) as usize;
    let out = UserSliceMut::<abi::fnid::FnInfo>::new(ptr, room);
    proc::with_current_vspace(|vs| out.check(vs))?;
    let infos = crate::fnid::list(flags & abi::fnid::FN_LIST_LOCAL != 0)?;
    write_records(ptr, &infos[..infos.len().min(room)])
}

fn sleep(ns: u64) -> Result<u64, Error> {
    sched::sleep_ns(ns);
    Ok(0)
}

fn console_write(ptr: u64, len: u64) -> Result<u64, Error> {
    let bytes = copy_in(ptr, len, MAX_IO)?;
    crate::console::write_bytes(&bytes);
    Ok(len)
}

fn console_read(ptr: u64, len: u64, flags: u64) -> Result<u64, Error> {
    // The console's input arrives on core 0 only.
    if current_core() != 0 {
        return Err(Error::NotSupported);
    }
    // Init's sign that the shell it keeps running came up (asks for its first command).
    crate::init::note_console_read();
    if len == 0 {
        return Ok(0);
    }
    let len = len.min(MAX_IO);
    let out = UserSliceMut::<u8>::new(ptr, len as usize);
    // Check the buffer before blocking.
    proc::with_current_vspace(|vs| out.check(vs))?;
    let mut got = Vec::new();
    loop {
        while (got.len() as u64) < len {
            match crate::console::read_byte() {
                Some(b) => got.push(b),
                None => break,
            }
        }
        if !got.is_empty() || flags & nr::CONSOLE_NONBLOCK != 0 {
            break;
        }
        sched::block(sched::Block::Console);
    }
    proc::with_current_vspace(|vs| out.write(vs, &got)).map(|n| n as u64)
}

fn processes(ptr: u64, capacity: u64) -> Result<u64, Error> {
    // This core's, then every other online core's (through RPCC).
    let mut infos = proc::infos();
    for core in (0..crate::smp::cores_planned()).filter(|&c| c != current_core()) {
        if !crate::rpcc::reachable(core) {
            continue;
        }
        if let crate::rpcc::Out::Procs(v) = crate::rpcc::call(core, crate::rpcc::Op::Processes)? {
            infos.extend(v);
        }
    }
    let n = infos.len().min(capacity as usize);
    write_records(ptr, &infos[..n])
}

fn cores(ptr: u64, capacity: u64) -> Result<u64, Error> {
    let n = crate::smp::cores_planned().min(capacity as usize);
    let infos: Vec<abi::CoreInfo> = (0..n)
        .map(|c| {
            let core = percore::of(c);
            let (free, total) = crate::mm::frames::counts(c);
            abi::CoreInfo {
                core: c as u32,
                online: u32::from(crate::smp::is_online(c)),
                frames_total: total,
                frames_free: free,
                heap_bytes: core.mem.heap_bytes.load(Ordering::Relaxed),
                ticks: core.stats.ticks.load(Ordering::Relaxed),
                idle_ticks: core.stats.idle_ticks.load(Ordering::Relaxed),
                processes: core.stats.processes.load(Ordering::Relaxed),
                ipis: core.stats.ipis.load(Ordering::Relaxed),
                frames_reserved: crate::mm::frames::kernel_reserve(c),
                deadline_wakes: core.stats.deadline_wakes.load(Ordering::Relaxed),
                vspace_switches: core.stats.vspace_switches.load(Ordering::Relaxed),
                ipc_wakes: core.stats.ipc_wakes.load(Ordering::Relaxed),
                late_wakes: core.stats.late_wakes.load(Ordering::Relaxed),
                ipc_messages: core
                    .stats
                    .ipc_messages
                    .each_ref()
                    .map(|c| c.load(Ordering::Relaxed)),
            }
        })
        .collect();
    write_records(ptr, &infos)
}

fn res_open(
    name_ptr: u64,
    name_len: u64,
    args_ptr: u64,
    args_len: u64,
    rights: u64,
) -> Result<u64, Error> {
    let rights = u8::try_from(rights)
        .map(Rights)
        .map_err(|_| Error::InvalidArgument)?;
    let name = copy_in(name_ptr, name_len, abi::res::MAX_RES_NAME as u64)?;
    let name = core::str::from_utf8(&name).map_err(|_| Error::BadName)?;
    let args = copy_in(args_ptr, args_len, proc::MAX_ARGS as u64)?;
    res::open(name, &args, rights).map(|id| id.0)
}

fn res_read(id: ResId, buf: u64, len: u64, arg: u64) -> Result<u64, Error> {
    if len > MAX_IO {
        return Err(Error::TooLong);
    }
    let out = UserSliceMut::<u8>::new(buf, len as usize);
    // Check the buffer first, so a bad pointer changes nothing (a compute read binds).
    proc::with_current_vspace(|vs| out.check(vs))?;
    match res::read(id, len, arg)? {
        ReadOut::Value(v) => Ok(v),
        ReadOut::Bytes(bytes) => {
            proc::with_current_vspace(|vs| out.write(vs, &bytes)).map(|n| n as u64)
        }
    }
}

fn res_write(id: ResId, buf: u64, len: u64, arg: u64) -> Result<u64, Error> {
    let data = copy_in(buf, len, MAX_IO)?;
    res::write(id, &data, arg)
}

fn res_list(core: u64, ptr: u64, capacity: u64) -> Result<u64, Error> {
    let core = usize::try_from(core).map_err(|_| Error::InvalidArgument)?;
    let infos = res::list(core)?;
    let n = infos.len().min(capacity as usize);
    write_records(ptr, &infos[..n])
}

/// The calls that only read a per-core word (the null call `GETPID`, `CORE`, `CLOCK`,
/// `GETUSER`), answered before [`dispatch`]: they act on no resource, so they need no flow,
/// and the large dispatcher's frame and argument spills are most of their cost. True if
/// `frame` held one (its result is stored).
///
/// The register calls (`CALL_REGS`, `REPLY_RECV_REGS`: seL4's message registers, the
/// rendezvous fast path's own calls) are answered here too, in a flow of their own: they
/// take nothing from the dispatcher but its frame.
///
/// `core` is this core's record (the entry read it already).
#[inline(always)]
pub fn quick(frame: &mut TrapFrame, core: &crate::percore::CoreLocal) -> bool {
    let r = match frame.rax {
        nr::GETPID => proc::running_pid().map(|p| p.0).ok_or(Error::NoSuchProcess),
        nr::CORE => Ok(current_core() as u64),
        nr::CLOCK => Ok(crate::time::now_ns()),
        nr::GETUSER => Ok(u64::from(proc::current_user().0)),
        nr::CALL_REGS | nr::REPLY_RECV_REGS => {
            let user = proc::current_user_in(core);
            crate::res::begin_flow_in(&core.flow, user);
            let r = if frame.rax == nr::CALL_REGS {
                crate::ipc::direct::call(frame, user)
            } else {
                crate::ipc::direct::reply_recv(frame)
            };
            crate::res::end_flow();
            r
        }
        _ => return false,
    };
    let (rax, rdx) = abi::syscall::encode(r);
    frame.rax = rax;
    frame.rdx = rdx;
    true
}
