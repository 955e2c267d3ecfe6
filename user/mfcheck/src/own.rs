//! `mfcheck machdres M`: machine M's `machd` keeps its own resources (`machd-*` on its core:
//! its endpoints, job semaphores, pages) to itself. This program, acting as the
//! administrator that created them (the shell's user, as `machd`'s), lists them there and
//! asks M to close, write, read and V each: every one is refused `Denied`. Then M still
//! serves (a pipe opened and closed there). A regression: `machd` made them as the
//! requester's user, so a close of its link endpoint left M deaf, and a V or P of a job
//! semaphore broke every remote wait.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::res::{ResType, Rights};
use ulib::abi::syscall::control::SEM_V;
use ulib::abi::Error;
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
    let mut wrong = Vec::new();
    for info in &own {
        let r = RemoteRes {
            machine: m,
            epoch,
            id: info.id,
        };
        let mut buf = [0u8; 8];
        let tries: [(&str, Result<(), Error>); 4] = [
            ("write", m_::res_write(&r, b"x", 0).map(drop)),
            ("read", m_::res_read(&r, &mut buf, 0).map(drop)),
            ("V", m_::res_control(&r, SEM_V, 0, 0).map(drop)),
            ("close", m_::res_close(&r)),
        ];
        for (what, got) in tries {
            if got != Err(Error::Denied) {
                wrong.push(format!("{what} of {} ({}): {got:?}", info.name(), info.id));
            }
        }
    }
    if !wrong.is_empty() {
        return Err(format!("not refused: {}", wrong.join("; ")));
    }
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
