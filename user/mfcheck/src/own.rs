//! `mfcheck machdres M`: machine M's `machd` keeps its own resources (`machd-*` on its core:
//! its endpoints, job semaphores, pages) to itself. This program, acting as the
//! administrator that created them (the shell's user, as `machd`'s), lists them there and
//! asks M to close, write, read and V each: every one is refused `Denied`. Then M still
//! serves (a pipe opened and closed there). A regression: `machd` made them as the
//! requester's user, so a close of its link endpoint left M deaf, and a V or P of a job
//! semaphore broke every remote wait. `mfcheck machdfs M` ([`machd_fs`]) does the same for
//! the ICAs of the requests M's `machd` makes to its own `fs` (`fs-PID-N`).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::res::{ResInfo, ResType, Rights};
use ulib::abi::syscall::control::{INFO, SEM_V};
use ulib::abi::{Error, Pid};
use ulib::mach::{self as m_, RemoteRes};

pub fn machd_res(m: u8) -> Result<String, String> {
    let (all, epoch) = m_::res_list(m, 0).map_err(|e| format!("list m{m}.c0: {e}"))?;
    let own: Vec<_> = all
        .iter()
        .filter(|r| r.name().starts_with("machd-"))
        .collect();
    // Its endpoint and three job semaphores at least (and the link's endpoint).
    if own.len() < 4 {
        return Err(format!(
            "only {} resources named machd-* on m{m}.c0",
            own.len()
        ));
    }
    all_denied(m, epoch, &own, ("V", SEM_V))?;
    // M still answers.
    let p = m_::res_open(m, "c0/pipe/mfown", &[], Rights::OWNER_ALL)
        .map_err(|e| format!("m{m} no longer serves: open a pipe: {e}"))?;
    m_::res_close(&p).map_err(|e| format!("close the pipe: {e}"))?;
    let kinds = own
        .iter()
        .filter(|r| r.kind == ResType::Endpoint as u8)
        .count();
    Ok(format!(
        ", {} of machd's resources refused ({kinds} endpoints)",
        own.len()
    ))
}

/// `mfcheck machdfs M` (machine M has a disk): M's `machd` keeps the request ICAs it makes
/// to its own `fs` for remote file requests (`fs-PID-N` of its pid, `ulib::fs`) to itself.
/// A listing of `mM:` leaves it holding one (a listing's ICA comes back writable and is
/// kept for the next request); a close, write, read or INFO of each, asked from here as
/// the administrator that created them, is refused `Denied`, and M still serves files.
/// Another process's `fs-*` vregions stay reachable: two named alike (a longer pid, a
/// count `machd` never made), opened there from here, are written, read and closed. A
/// regression: `machd_own` covered `machd-*` alone, so a close of that ICA broke M's file
/// service for every other machine.
pub fn machd_fs(m: u8) -> Result<String, String> {
    let root = format!("m{m}:");
    let listed = ulib::fs::readdir(&root).map_err(|e| format!("ls {root}: {e}"))?;
    let (all, epoch) = m_::res_list(m, 0).map_err(|e| format!("list m{m}.c0: {e}"))?;
    let pid = machd_pid(m)?;
    let prefix = format!("fs-{}-", pid.in_machine());
    let own: Vec<_> = all
        .iter()
        .filter(|r| r.kind == ResType::VRegion as u8 && r.name().starts_with(&prefix))
        .collect();
    if own.is_empty() {
        return Err(format!("no vregion {prefix}N on m{m}.c0 after a listing"));
    }
    all_denied(m, epoch, &own, ("INFO", INFO))?;
    // Named alike but not machd's: reached as before.
    for name in [
        format!("fs-{}0-0", pid.in_machine()),
        format!("{prefix}999999"),
    ] {
        let r = m_::res_open(
            m,
            &format!("c0/vregion/{name}"),
            &4096u64.to_le_bytes(),
            Rights::OWNER_ALL,
        )
        .map_err(|e| format!("open {name} on m{m}: {e}"))?;
        let mut buf = [0u8; 2];
        let used = m_::res_write(&r, b"ok", 0)
            .and_then(|_| m_::res_read(&r, &mut buf, 0))
            .map_err(|e| format!("{name}, not machd's, refused: {e}"));
        m_::res_close(&r).map_err(|e| format!("close {name}, not machd's: {e}"))?;
        if used? != 2 || &buf != b"ok" {
            return Err(format!("{name} read back {buf:?}"));
        }
    }
    // M still serves files.
    let again = ulib::fs::readdir(&root).map_err(|e| format!("m{m} no longer serves: {e}"))?;
    if again.len() != listed.len() {
        return Err(format!(
            "ls {root}: {} entries, then {}",
            listed.len(),
            again.len()
        ));
    }
    Ok(format!(
        ", {} of machd's request ICAs refused, two alike reached",
        own.len()
    ))
}

/// A write, a read, control `cmd` (named `what`) and a close of each of `own` (resources of
/// machine `m`, of its `epoch`), asked from here, are all refused `Denied`.
fn all_denied(m: u8, epoch: u32, own: &[&ResInfo], (what, cmd): (&str, u64)) -> Result<(), String> {
    let mut wrong = Vec::new();
    for info in own {
        let r = RemoteRes {
            machine: m,
            epoch,
            id: info.id,
        };
        let mut buf = [0u8; 8];
        let tries: [(&str, Result<(), Error>); 4] = [
            ("write", m_::res_write(&r, b"x", 0).map(drop)),
            ("read", m_::res_read(&r, &mut buf, 0).map(drop)),
            (what, m_::res_control(&r, cmd, 0, 0).map(drop)),
            ("close", m_::res_close(&r)),
        ];
        for (what, got) in tries {
            if got != Err(Error::Denied) {
                wrong.push(format!("{what} of {} ({}): {got:?}", info.name(), info.id));
            }
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("not refused: {}", wrong.join("; ")))
    }
}

/// `machd`'s pid on machine `m`: the process named `machd` in its list (`OP_PS`; its
/// resources' names say nothing of its pid, `res::open_fresh`).
pub(crate) fn machd_pid(m: u8) -> Result<Pid, String> {
    let server = ulib::fnid::lookup(ulib::abi::mach::FN_MACH)
        .map_err(|e| format!("{}: {e}", ulib::abi::mach::FN_MACH))?;
    // A bound on the list's length, should it keep growing.
    for i in 0..1024u64 {
        let ask = ulib::abi::ipc::Msg {
            label: ulib::abi::mach::OP_PS,
            words: [u64::from(m), i, 0, 0, 0, 0],
        };
        let w = match ulib::fnid::call_fn(server, &ask) {
            Ok((0, r)) => r.words,
            Err(Error::NoSuchProcess) => break,
            Ok((v, _)) if v == Error::NoSuchProcess as u64 => break,
            Ok((v, _)) => return Err(format!("ps of m{m}: {}", Error::from_code(v))),
            Err(e) => return Err(format!("ps of m{m}: {e}")),
        };
        let name: Vec<u8> = w[3..6].iter().flat_map(|x| x.to_le_bytes()).collect();
        if name.split(|&b| b == 0).next() == Some(b"machd".as_slice()) {
            return Ok(Pid(w[0]));
        }
    }
    Err(format!("no process machd on m{m}"))
}
