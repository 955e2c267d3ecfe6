//! Resources: each type's five operations, shared memory, compute binding, every kind of
//! bad id or name, rights, and open/close cycles that must return all memory.

use crate::arch::x86_64::paging;
use crate::proc::{self, sched, TEST_PARENT};
use crate::res::{self, ReadOut};
use crate::{kassert, ktest, percore, smp};
use abi::res::{ResId, ResType, Rights, UserId};
use abi::syscall::control;
use abi::{Error, Pid, Priority};
use alloc::format;
use alloc::string::String;

fn e<T: core::fmt::Debug>(r: Result<T, Error>, what: &str) -> Result<T, String> {
    r.map_err(|err| format!("{what}: {err:?}"))
}

fn size_arg(n: u64) -> [u8; 8] {
    n.to_le_bytes()
}

fn free_frames() -> u64 {
    super::free_frames_here(0)
}

/// Run as `user` for the rest of this kernel activity (tests act as users this way).
fn as_user(user: u32) {
    res::begin_flow(UserId(user));
}

ktest! {
    /// vregion: open, write, read back, control, close; then the id is stale.
    fn vregion_five_operations() -> TestResult {
        as_user(0);
        let before = free_frames();
        let id = e(res::open("here/vregion/t1", &size_arg(8192), Rights::OWNER_ALL), "open")?;
        kassert!(id.kind() == Some(ResType::VRegion) && id.core() == percore::current_core(), "id {id}");
        kassert!(e(res::write(id, b"hello, region", 4090), "write")? == 13, "write count");
        let ReadOut::Bytes(back) = e(res::read(id, 13, 4090), "read")? else { return Err("read gave a value".into()) };
        kassert!(back == b"hello, region", "read back {back:?}");
        kassert!(e(res::control(id, control::INFO, 0, 0), "control")? == 8192, "size");
        kassert!(matches!(res::read(id, 16, 8190), Err(Error::InvalidArgument)), "read past the end");
        kassert!(res::write(id, b"x", u64::MAX).is_err(), "write at an overflowing offset");
        kassert!(res::open("here/vregion/t1", &size_arg(4096), Rights::OWNER_ALL) == Err(Error::AlreadyExists), "duplicate name");
        e(res::close(id), "close")?;
        kassert!(res::read(id, 1, 0).err() == Some(Error::StaleResource), "stale read");
        kassert!(res::close(id) == Err(Error::StaleResource), "stale close");
        // The name is free again once closed (the per-core name index forgets it).
        let again = e(res::open("here/vregion/t1", &size_arg(4096), Rights::OWNER_ALL), "reopen")?;
        e(res::close(again), "close again")?;
        kassert!(free_frames() == before, "frames not returned");
        Ok(())
    }
}

ktest! {
    /// A vregion attached to two address spaces is the same memory in both (P3's ICA).
    fn shared_memory_through_two_vspaces() -> TestResult {
        as_user(0);
        let a = e(proc::create_stopped("spin", &[], Priority::App, TEST_PARENT), "process a")?;
        let b = e(proc::create_stopped("spin", &[], Priority::App, TEST_PARENT), "process b")?;
        let region = e(res::open("here/vregion/ica", &size_arg(8192), Rights::OWNER_ALL), "vregion")?;
        let va = e(res::open("here/vspace/a", &size_arg(a.0), Rights::OWNER_ALL), "vspace a")?;
        let vb = e(res::open("here/vspace/b", &size_arg(b.0), Rights::OWNER_ALL), "vspace b")?;
        let at = 0x5000_0000u64;
        e(res::control(va, control::ATTACH, region.0, at | 1), "attach a")?;
        e(res::control(vb, control::ATTACH, region.0, (at + 0x10_0000) | 1), "attach b")?;
        kassert!(res::control(va, control::ATTACH, region.0, at | 1) == Err(Error::Busy), "attach over an attachment");
        let roots = sched::with(|s| {
            let r = |p: Pid| s.processes.get(&p.serial()).and_then(|p| p.vspace.as_ref()).map(|v| v.root());
            (r(a), r(b))
        });
        let (Some(ra), Some(rb)) = roots else { return Err("no address spaces".into()) };
        for page in 0..2u64 {
            let ta = paging::translate(ra, at + page * 4096).ok_or("not mapped in a")?;
            let tb = paging::translate(rb, at + 0x10_0000 + page * 4096).ok_or("not mapped in b")?;
            kassert!(ta.paddr == tb.paddr && ta.user && ta.writable && !ta.executable, "page {page}: {ta:?} vs {tb:?}");
        }
        let ReadOut::Bytes(list) = e(res::read(va, 64, 0), "vspace read")? else { return Err("no list".into()) };
        kassert!(list.len() == 16 && list[..8] == at.to_le_bytes(), "vspace a lists {list:?}");
        kassert!(res::close(region) == Err(Error::Busy), "closed an attached vregion");
        e(res::control(va, control::DETACH, at, 0), "detach a")?;
        kassert!(paging::translate(ra, at).is_none(), "still mapped after detach");
        // Ending b drops its attachment with its address space.
        e(proc::remove(b), "remove b")?;
        e(res::close(region), "close after both detached")?;
        e(res::close(va), "close vspace a")?;
        kassert!(res::close(vb).is_ok(), "close vspace b (its process is gone)");
        e(proc::remove(a), "remove a")?;
        Ok(())
    }
}

ktest! {
    /// process + compute: a process opened stopped runs when a compute is bound to it
    /// (P4 Table 1), stops when unbound (Table 2), and is removed by close.
    fn process_started_and_stopped_through_compute() -> TestResult {
        as_user(0);
        let p = e(res::open("here/process/h1", b"hello\0fromres\0", Rights::OWNER_ALL), "open process")?;
        let pid = Pid(e(res::control(p, control::INFO, 0, 0), "pid")?);
        kassert!(proc::info_of(pid).map(|i| i.state) == Some(abi::STATE_STOPPED), "not created stopped");
        e(res::write(p, b"fromres\0again\0", 0), "replace args before it runs")?;
        let c = e(res::open("here/compute/c1", &size_arg(100), Rights::OWNER_ALL), "open compute")?;
        e(res::read(c, 0, pid.0), "bind")?;
        kassert!(res::read(c, 0, pid.0).err() == Some(Error::Busy), "bound twice");
        kassert!(sched::run_until(5_000_000_000, || proc::has_ended(pid)), "hello did not finish once bound");
        kassert!(res::write(p, b"late\0", 0) == Err(Error::Busy) || proc::info_of(pid).is_some(), "args after run");
        e(res::close(p), "close process")?;
        e(res::close(c), "close compute")?;

        // Stopping: a spinner bound, then unbound, makes no progress.
        let s = e(res::open("here/process/spinner", b"spin\0", Rights::OWNER_ALL), "open spin")?;
        let spid = Pid(e(res::control(s, control::INFO, 0, 0), "pid")?);
        let c = e(res::open("here/compute/c2", &size_arg(200), Rights::OWNER_ALL), "compute 2")?;
        e(res::read(c, 0, spid.0), "bind spin")?;
        // Until it has run (60 s only catches a hang).
        sched::run_until(60_000_000_000, || proc::info_of(spid).is_some_and(|i| i.cpu_ns > 0));
        e(res::write(c, &[], 0), "unbind")?;
        kassert!(proc::info_of(spid).map(|i| i.state) == Some(abi::STATE_STOPPED), "not stopped after unbind");
        let cpu = proc::info_of(spid).map_or(0, |i| i.cpu_ns);
        // A wait that only gives a wrongly scheduled stopped process the chance to run (the
        // core idles, ticks and picks threads meanwhile): a busy host cannot make a stopped
        // process run, so its length decides nothing.
        sched::run_until(50_000_000, || false);
        kassert!(proc::info_of(spid).map_or(1, |i| i.cpu_ns) == cpu, "a stopped process ran");
        kassert!(cpu > 0, "the bound spinner never ran");
        e(res::close(s), "close spin (kills it)")?;
        kassert!(proc::info_of(spid).is_none(), "closed process still listed");
        e(res::close(c), "close compute 2")?;
        Ok(())
    }
}

ktest! {
    /// Every malformed name, unknown, stale, forged or foreign id, and too-large size gets
    /// its own error, and the kernel keeps going.
    fn bad_names_and_ids_get_errors() -> TestResult {
        as_user(0);
        for bad in ["", "here", "here/vregion", "here/vregion/", "x/vregion/a", "c64/vregion/a", "here/file/a", "here/vregion/a b", "here/vregion/../x"] {
            let r = res::open(bad, &size_arg(4096), Rights::OWNER_ALL);
            kassert!(r == Err(Error::BadName), "{bad:?} gave {r:?}");
        }
        kassert!(res::open("here/vregion/big", &size_arg(1 << 40), Rights::OWNER_ALL) == Err(Error::InvalidArgument), "huge vregion");
        kassert!(res::open("here/vregion/zero", &size_arg(0), Rights::OWNER_ALL) == Err(Error::InvalidArgument), "empty vregion");
        kassert!(res::open("here/vregion/short", &[1, 2], Rights::OWNER_ALL) == Err(Error::InvalidArgument), "short size");
        kassert!(res::open("here/compute/c", &size_arg(0), Rights::OWNER_ALL) == Err(Error::InvalidArgument), "mips 0");
        kassert!(res::open("here/process/p", b"no-such-program\0", Rights::OWNER_ALL) == Err(Error::NoSuchProgram), "unknown program");
        kassert!(res::open("here/vspace/v", &size_arg(Pid::new(percore::current_core(), 999_999).0), Rights::OWNER_ALL) == Err(Error::NoSuchProcess), "vspace of nobody");
        let me = percore::current_core();
        kassert!(res::close(ResId::new(0, me, ResType::VRegion, 1, 77_777)) == Err(Error::NoSuchResource), "unknown slot");
        kassert!(res::close(ResId(0)) == Err(Error::NoSuchResource), "id 0");
        kassert!(res::close(ResId(u64::MAX)) == Err(Error::NoSuchResource), "id of another machine");
        let id = e(res::open("here/vregion/w", &size_arg(4096), Rights::OWNER_ALL), "open")?;
        let forged = ResId::new(0, me, ResType::Compute, id.generation(), id.slot());
        kassert!(res::close(forged) == Err(Error::WrongType), "forged type bits");
        let wrong_gen = ResId::new(0, me, ResType::VRegion, id.generation() + 1, id.slot());
        kassert!(res::close(wrong_gen) == Err(Error::StaleResource), "wrong generation");
        kassert!(res::control(id, 99, 0, 0) == Err(Error::NotSupported), "unknown control");
        e(res::close(id), "close")?;
        if smp::cores_planned() >= 2 {
            let other = (me + 1) % smp::cores_planned();
            let name = format!("c{other}/vregion/x");
            // Another core's resources answer exactly as this core's (through RPCC).
            let id = e(res::open(&name, &size_arg(4096), Rights::OWNER_ALL), "open on another core")?;
            kassert!(id.core() == other, "the id names the other core");
            kassert!(res::list(other).is_ok_and(|l| l.iter().any(|i| i.id == id)), "list of another core");
            let wrong_gen = ResId::new(0, other, ResType::VRegion, id.generation() + 1, id.slot());
            kassert!(res::close(wrong_gen) == Err(Error::StaleResource), "stale id on another core");
            e(res::close(id), "close on another core")?;
            kassert!(res::close(id) == Err(Error::StaleResource), "closed twice on another core");
            kassert!(res::close(ResId::new(0, other, ResType::VRegion, 1, 77_777)) == Err(Error::NoSuchResource), "unknown slot on another core");
        }
        Ok(())
    }
}

ktest! {
    /// RCC: the creator's and everyone else's rights are checked on every operation, the
    /// kernel may do anything, and `rcc=off` switches the checks off.
    fn rights_are_checked() -> TestResult {
        as_user(5);
        let private = e(res::open("here/vregion/private", &size_arg(4096), Rights::OWNER_ALL), "open private")?;
        let readable = e(res::open("here/vregion/readable", &size_arg(4096), Rights::parse("rwcx/r---").ok_or("rights")?), "open readable")?;
        kassert!(res::write(private, b"mine", 0).is_ok(), "creator write");
        as_user(6);
        kassert!(res::read(private, 4, 0).err() == Some(Error::Denied), "other read");
        kassert!(res::write(private, b"x", 0) == Err(Error::Denied), "other write");
        kassert!(res::control(private, control::INFO, 0, 0) == Err(Error::Denied), "other control");
        kassert!(res::close(private) == Err(Error::Denied), "other close");
        // The creator may always close what it created, even without the close right
        // (regression: such resources could never be closed); rights granting nothing to
        // anyone are refused at open.
        as_user(5);
        let no_close = e(res::open("here/vregion/noclose", &size_arg(4096), Rights::parse("rw-x/rw-x").ok_or("rights")?), "open without close right")?;
        as_user(6);
        kassert!(res::close(no_close) == Err(Error::Denied), "other close without the right");
        as_user(5);
        e(res::close(no_close), "creator close without the close right")?;
        kassert!(res::open("here/vregion/nothing", &size_arg(4096), Rights(0)) == Err(Error::InvalidArgument), "rights granting nothing accepted");
        as_user(6);
        kassert!(res::read(readable, 4, 0).is_ok(), "other read where allowed");
        kassert!(res::write(readable, b"x", 0) == Err(Error::Denied), "other write where only read is allowed");
        res::set_rcc(false);
        let unchecked = res::read(private, 4, 0).is_ok();
        res::set_rcc(true);
        kassert!(unchecked, "rcc=off still checked");
        as_user(0);
        kassert!(res::read(private, 4, 0).is_ok(), "the kernel was refused");
        as_user(5);
        e(res::close(private), "creator close")?;
        e(res::close(readable), "creator close 2")?;
        as_user(0);
        Ok(())
    }
}

ktest! {
    /// 10,000 open/close cycles of each type leave the core's free frames where they were.
    fn open_close_cycles_return_all_memory() -> TestResult {
        as_user(0);
        let holder = e(proc::create_stopped("spin", &[], Priority::App, TEST_PARENT), "holder")?;
        // Warm up: heap and tables reach their working size.
        for round in 0..2 {
            let before = free_frames();
            for _ in 0..10_000 {
                let r = e(res::open("here/vregion/cycle", &size_arg(4096), Rights::OWNER_ALL), "vregion")?;
                e(res::close(r), "close vregion")?;
                let c = e(res::open("here/compute/cycle", &size_arg(100), Rights::OWNER_ALL), "compute")?;
                e(res::close(c), "close compute")?;
                let v = e(res::open("here/vspace/cycle", &size_arg(holder.0), Rights::OWNER_ALL), "vspace")?;
                e(res::close(v), "close vspace")?;
            }
            let processes = if round == 0 { 50 } else { 10_000 };
            for _ in 0..processes {
                let p = e(res::open("here/process/cycle", b"nop\0", Rights::OWNER_ALL), "process")?;
                e(res::close(p), "close process")?;
            }
            // Everything was freed at its close (the stopped processes' kernel stacks too);
            // wait for the count itself in case anything comes home later (30 s only
            // catches a hang).
            sched::run_until(30_000_000_000, || round == 0 || free_frames() == before);
            let after = free_frames();
            kassert!(round == 0 || before == after, "round {round}: {} frames not returned", before.abs_diff(after));
        }
        e(proc::remove(holder), "remove holder")?;
        Ok(())
    }
}

ktest! {
    /// Another user's process is out of reach: no compute can start it and no vspace
    /// handle can be opened on it; starting a process that is not stopped changes nothing;
    /// an address space takes at most 64 attachments.
    fn other_users_processes_are_out_of_reach() -> TestResult {
        as_user(0);
        // Processes the kernel creates run as user 1.
        let victim = e(proc::create_stopped("spin", &[], Priority::App, TEST_PARENT), "victim")?;
        as_user(6);
        let c = e(res::open("here/compute/thief", &size_arg(100), Rights::OWNER_ALL), "compute")?;
        kassert!(res::read(c, 0, victim.0).err() == Some(Error::Denied), "bound a compute to another user's process");
        kassert!(proc::info_of(victim).map(|i| i.state) == Some(abi::STATE_STOPPED), "victim changed state");
        kassert!(res::open("here/vspace/thief", &size_arg(victim.0), Rights::OWNER_ALL) == Err(Error::Denied), "vspace of another user's process");
        e(res::close(c), "close compute")?;
        as_user(1);
        let c = e(res::open("here/compute/own", &size_arg(100), Rights::OWNER_ALL), "own compute")?;
        e(res::read(c, 0, victim.0), "bind own process")?;
        let c2 = e(res::open("here/compute/second", &size_arg(10_000), Rights::OWNER_ALL), "second compute")?;
        kassert!(res::read(c2, 0, victim.0).err() == Some(Error::Busy), "second bind to a running process");
        let v = e(res::open("here/vspace/own", &size_arg(victim.0), Rights::OWNER_ALL), "own vspace")?;
        let region = e(res::open("here/vregion/many", &size_arg(4096), Rights::OWNER_ALL), "vregion")?;
        let mut attached = 0;
        while res::control(v, control::ATTACH, region.0, 0x6000_0000 + attached * 0x1000).is_ok() {
            attached += 1;
            kassert!(attached <= 64, "more than 64 attachments");
        }
        kassert!(attached == 64, "only {attached} attachments");
        kassert!(res::control(v, control::ATTACH, region.0, 0x7000_0800) == Err(Error::InvalidArgument), "misaligned attach");
        e(res::close(v), "close vspace")?;
        as_user(0);
        e(proc::remove(victim), "remove victim")?;
        e(res::close(region), "close vregion after its attachments died with the process")?;
        e(res::close(c), "close compute")?;
        e(res::close(c2), "close second compute")?;
        Ok(())
    }
}

ktest! {
    /// Every type answers the operations it lacks `NotSupported` (the trait's defaults), an
    /// unknown control command too, and the generic checks come first: a bad type is
    /// `WrongType`, a missing right `Denied`, whatever the operation.
    fn operations_a_type_lacks_are_not_supported() -> TestResult {
        as_user(7);
        let sem = e(res::open("here/sem/ns", &size_arg(1), Rights::OWNER_ALL), "open sem")?;
        let region = e(res::open("here/vregion/ns", &size_arg(4096), Rights::OWNER_ALL), "open vregion")?;
        let compute = e(res::open("here/compute/ns", &size_arg(100), Rights::OWNER_ALL), "open compute")?;
        as_user(0);
        let p = e(res::open("here/process/ns", b"spin\0", Rights::OWNER_ALL), "open process")?;
        let pid = e(res::control(p, control::INFO, 0, 0), "pid")?;
        let vs = e(res::open("here/vspace/ns", &size_arg(pid), Rights::OWNER_ALL), "open vspace")?;
        as_user(7);
        kassert!(res::read(sem, 8, 0).err() == Some(Error::NotSupported), "sem read");
        kassert!(res::write(sem, b"x", 0) == Err(Error::NotSupported), "sem write");
        kassert!(res::control(sem, control::ATTACH, 0, 0) == Err(Error::NotSupported), "sem attach");
        kassert!(res::control(region, control::KILL, 0, 0) == Err(Error::NotSupported), "vregion kill");
        kassert!(res::control(compute, control::SEM_V, 0, 0) == Err(Error::NotSupported), "compute V");
        kassert!(res::control(compute, control::SET_MIPS, 0, 0) == Err(Error::InvalidArgument), "compute mips 0");
        as_user(0);
        kassert!(res::write(vs, b"x", 0) == Err(Error::NotSupported), "vspace write");
        kassert!(res::control(vs, control::SET_MIPS, 1, 0) == Err(Error::NotSupported), "vspace mips");
        kassert!(res::control(p, control::SEM_P, 0, 0) == Err(Error::NotSupported), "process P");
        kassert!(res::control(p, 99, 0, 0) == Err(Error::NotSupported), "unknown command");
        // The generic checks before the type's answer.
        let forged = ResId::new(0, sem.core(), ResType::VRegion, sem.generation(), sem.slot());
        kassert!(res::read(forged, 8, 0).err() == Some(Error::WrongType), "forged type");
        as_user(8);
        kassert!(res::read(sem, 8, 0).err() == Some(Error::Denied), "sem read, other user");
        kassert!(res::write(sem, b"x", 0) == Err(Error::Denied), "sem write, other user");
        kassert!(res::control(region, control::KILL, 0, 0) == Err(Error::Denied), "vregion kill, other user");
        as_user(0);
        e(res::close(vs), "close vspace")?;
        e(res::close(p), "close process")?;
        as_user(7);
        e(res::close(compute), "close compute")?;
        e(res::close(region), "close vregion")?;
        e(res::close(sem), "close sem")?;
        as_user(0);
        Ok(())
    }
}
