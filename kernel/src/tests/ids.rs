//! Machine ids in resource ids and pids (issue 17): what this kernel makes carries its
//! machine (`machine=K`; 0 without it), and an id or pid of another machine with the same
//! core, slot and generation (or serial) is refused, never taken for this machine's own.
//! xtask runs these on every configuration and once more on a boot as machine 2
//! (`smp2-machine2`), where every id this kernel makes differs from machine 0's.

use super::end_and_reap;
use crate::proc::{self, TEST_PARENT};
use crate::res::{self, ReadOut};
use crate::{kassert, ktest, machine, percore};
use abi::res::{Rights, UserId};
use abi::syscall::control;
use abi::{Error, Priority};
use alloc::format;
use alloc::string::String;

fn e<T>(r: Result<T, Error>, what: &str) -> Result<T, String> {
    r.map_err(|err| format!("{what}: {err}"))
}

/// A machine that is not this one.
fn other() -> u8 {
    (machine::this() + 1) % 16
}

ktest! {
    /// A resource id carries this machine; the same id on another machine is refused by
    /// every operation (`NoSuchResource`), and the resource is untouched by them.
    fn resource_ids_carry_the_machine() -> TestResult {
        res::begin_flow(UserId::KERNEL);
        let id = e(res::open("here/vregion/ids-a", &4096u64.to_le_bytes(), Rights::OWNER_ALL), "open")?;
        let info = e(res::info(id), "info");
        let result = (|| {
            kassert!(id.machine() == machine::this(), "id {id} of machine {}, this is {}", id.machine(), machine::this());
            kassert!(info?.id == id, "info names another id");
            e(res::write(id, b"mine", 0), "write")?;
            let theirs = id.with_machine(other());
            kassert!(res::info(theirs) == Err(Error::NoSuchResource), "info of {theirs}");
            kassert!(matches!(res::read(theirs, 4, 0), Err(Error::NoSuchResource)), "read of {theirs}");
            kassert!(res::write(theirs, b"xxxx", 0) == Err(Error::NoSuchResource), "write of {theirs}");
            kassert!(res::control(theirs, control::INFO, 0, 0) == Err(Error::NoSuchResource), "control of {theirs}");
            kassert!(res::close(theirs) == Err(Error::NoSuchResource), "close of {theirs}");
            let ReadOut::Bytes(back) = e(res::read(id, 4, 0), "read back")? else {
                return Err("read gave a value".into());
            };
            kassert!(back == b"mine", "the resource changed: {back:?}");
            // Listed with the machine too.
            let listed = e(res::list(percore::current_core()), "list")?;
            kassert!(listed.iter().any(|r| r.id == id), "not listed as {id}");
            kassert!(listed.iter().all(|r| r.id.machine() == machine::this()), "a listed id of another machine");
            Ok(())
        })();
        e(res::close(id), "close")?;
        result
    }
}

ktest! {
    /// A pid carries this machine; kill, wait, migrate and a vspace of the same pid on
    /// another machine, or of the pid with other bits set, are refused (`NoSuchProcess`),
    /// and the process runs on.
    fn pids_carry_the_machine() -> TestResult {
        res::begin_flow(UserId::KERNEL);
        let pid = e(proc::spawn("spin", &[], Priority::App, TEST_PARENT), "spawn spin")?;
        let result = (|| {
            kassert!(pid.machine() == machine::this(), "pid {pid} of machine {}", pid.machine());
            let theirs = pid.with_machine(other());
            kassert!(proc::kill(theirs) == Err(Error::NoSuchProcess), "kill of {theirs}");
            kassert!(proc::wait(theirs, 0).err() == Some(Error::NoSuchProcess), "wait of {theirs}");
            kassert!(proc::migrate::migrate(theirs, percore::current_core()).err() == Some(Error::NoSuchProcess), "migrate of {theirs}");
            let vspace = res::open("here/vspace/ids-v", &theirs.0.to_le_bytes(), Rights::OWNER_ALL);
            kassert!(vspace.err() == Some(Error::NoSuchProcess), "vspace of {theirs}: {vspace:?}");
            // Bits outside machine, core and serial: not this pid, though `core()` and
            // `serial()` say so (it would slip past whole-pid checks such as "not itself").
            let junk = abi::Pid(pid.0 | 1 << 40);
            kassert!(proc::kill(junk) == Err(Error::NoSuchProcess), "kill of {:#x}", junk.0);
            kassert!(proc::wait(junk, 0).err() == Some(Error::NoSuchProcess), "wait of {:#x}", junk.0);
            kassert!(!proc::has_ended(pid), "{pid} ended");
            // The same pid of this machine reaches it.
            let mine = res::open("here/vspace/ids-v", &pid.0.to_le_bytes(), Rights::OWNER_ALL);
            let v = e(mine, "vspace of the process")?;
            e(res::close(v), "close vspace")?;
            Ok(())
        })();
        end_and_reap(pid);
        result
    }
}

ktest! {
    /// A name reserved for a process (`pC.S-...`) is spelled without the machine on every
    /// machine: the process of this machine with that core and serial may open it.
    fn reserved_names_are_this_machines() -> TestResult {
        let pid = e(proc::spawn("spin", &[], Priority::App, TEST_PARENT), "spawn spin")?;
        let result = (|| {
            let name = format!("here/vregion/p{}.{}-ids", pid.core(), pid.serial());
            res::begin_flow(UserId::ADMIN);
            let squatter = res::open(&name, &4096u64.to_le_bytes(), Rights::OWNER_ALL);
            kassert!(squatter.err() == Some(Error::Denied), "another process opened {name}: {squatter:?}");
            // Act for the process, as an RPCC agent acts for its requester.
            let mut info = res::flow_info();
            info.user = UserId::ADMIN;
            info.pid = Some(pid);
            res::adopt_flow(&info);
            let owner = res::open(&name, &4096u64.to_le_bytes(), Rights::OWNER_ALL);
            res::end_remote_flow();
            res::begin_flow(UserId::KERNEL);
            let id = e(owner, "its owner's open")?;
            e(res::close(id), "close")?;
            Ok(())
        })();
        res::begin_flow(UserId::KERNEL);
        end_and_reap(pid);
        result
    }
}
