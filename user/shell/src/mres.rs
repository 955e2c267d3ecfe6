//! The resource commands on another machine's resources: `res ls mK[.cC]`, and
//! `res open|close|info|read|write|bind|unbind|kill` with `mK.` (or `mK:`) before the resource (`res open
//! m1.c0/pipe/p 64`, `res info m1.c0/pipe/p`, `res read m1.c0:vregion:3.1 16`), through `ulib::mach`'s `res_*` (`abi::mach::OP_RES`:
//! made there by that machine's `machd` as this shell's user, so its kernel checks the
//! rights). A resource there is named by its name (looked up there, `RES_FIND`) or by its
//! id as `res open` printed it; an id this shell did not print is taken to be of the
//! machine's present life. Vregions, pipes, semaphores, computes and processes may be
//! opened there (a process created stopped; `res bind mK.COMPUTE mK.PROCESS` runs it there
//! as a job of this shell, `res unbind`, `res kill` as locally); a pipe is never waited
//! for there (a read of an empty one with a writer held says so).

use crate::res::{parse_size, show_info};
use crate::Shell;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::res::{ResId, ResName, ResType, Rights};
use ulib::abi::syscall::control;
use ulib::abi::{mach, Error};
use ulib::mach::{self as m_, RemoteRes};
use ulib::println;

/// `mK.REST` (`m1.c0/pipe/p`, `m1.c0:pipe:3.1`) or `mK.REST` taken apart: K (digits only)
/// and REST.
pub(crate) fn split_machine(word: &str) -> Option<(u8, &str)> {
    let after = word.strip_prefix('m')?;
    let (m, rest) = match after.split_once(':') {
        Some((m, rest)) if m.bytes().all(|b| b.is_ascii_digit()) => (m, rest),
        _ => after.split_once('.')?,
    };
    if m.is_empty() || !m.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((m.parse().ok()?, rest))
}

/// `mK` alone: K.
pub(crate) fn machine_alone(word: &str) -> Option<u8> {
    let m = word.strip_prefix('m')?;
    if m.is_empty() || !m.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    m.parse().ok()
}

/// An error of a request about `what`, said as `cmd`'s.
fn said(cmd: &str, what: &str, e: Error) -> String {
    match e {
        Error::StaleResource => {
            format!("{cmd} {what}: that machine restarted since; the id is of its earlier life")
        }
        e => format!("{cmd} {what}: {e}"),
    }
}

impl Shell {
    /// `res SUB mK.... ...`: `sub` on machine `m`'s resource `what`.
    pub(crate) fn res_remote(
        &mut self,
        sub: &str,
        m: u8,
        what: &str,
        args: &[&str],
    ) -> Result<(), String> {
        let cmd = format!("res {sub}");
        match sub {
            "ls" => {
                if !args.is_empty() {
                    return Err("res ls: usage: res ls mK[.cC]".into());
                }
                let core = what.strip_prefix('c').unwrap_or(what);
                let core: usize = core
                    .parse()
                    .map_err(|_| format!("{cmd}: bad core '{what}' (e.g. m1.c0)"))?;
                if m_::this_machine() == Some(m) {
                    // This machine's own: listed here, as `res ls CORE` does.
                    let all = ulib::res::list_all(core)
                        .map_err(|e| format!("{cmd}: core {core}: {e}"))?;
                    crate::res::listing(&all);
                    return Ok(());
                }
                let (all, _) =
                    m_::res_list(m, core).map_err(|e| said(&cmd, &format!("m{m}.c{core}"), e))?;
                crate::res::listing(&all);
                Ok(())
            }
            "open" => self.mres_open(m, what, args),
            "close" => {
                let r = self.mres_resolve(&cmd, m, what)?;
                let done = m_::res_close(&r);
                // Gone, or of an earlier life: forgotten either way.
                if matches!(done, Ok(()) | Err(Error::StaleResource)) {
                    self.remote_ids.retain(|k| *k != r);
                }
                done.map_err(|e| said(&cmd, &shown(&r), e))
            }
            "info" => {
                let r = self.mres_resolve(&cmd, m, what)?;
                let info = m_::res_info(&r).map_err(|e| said(&cmd, &shown(&r), e))?;
                show_info(&info, &format!("m{m}."));
                Ok(())
            }
            "read" => {
                if args.len() > 2 {
                    return Err(format!("{cmd}: usage: res read mK.RES [LEN] [OFFSET]"));
                }
                let r = self.mres_resolve(&cmd, m, what)?;
                let number = |i: usize, what: &str| -> Result<Option<u64>, String> {
                    args.get(i)
                        .map(|w| parse_size(w).ok_or_else(|| format!("{cmd}: bad {what} '{w}'")))
                        .transpose()
                };
                let len = number(0, "length")?.unwrap_or(64);
                if len > mach::RES_REMOTE_MAX as u64 {
                    return Err(format!(
                        "{cmd}: at most {} bytes a read on another machine",
                        mach::RES_REMOTE_MAX
                    ));
                }
                let offset = number(1, "offset")?.unwrap_or(0);
                match r.id.kind() {
                    Some(ResType::Compute) => {
                        return Err(format!("{cmd}: reading a compute binds it: not from here"))
                    }
                    Some(ResType::Pipe) if offset != 0 => {
                        return Err(format!("{cmd}: a pipe has no offset"))
                    }
                    _ => {}
                }
                let mut buf = alloc::vec![0u8; len as usize];
                match m_::res_read(&r, &mut buf, offset) {
                    Ok(n) => {
                        crate::res::dump(&buf[..n.min(buf.len())], offset);
                        Ok(())
                    }
                    Err(Error::Again) => Err(format!(
                        "{cmd} {}: nothing buffered now (a writer is held; it is never waited \
                         for on another machine)",
                        shown(&r)
                    )),
                    Err(e) => Err(said(&cmd, &shown(&r), e)),
                }
            }
            "write" => {
                let [offset, text @ ..] = args else {
                    return Err(format!("{cmd}: usage: res write mK.RES OFFSET TEXT"));
                };
                if text.is_empty() {
                    return Err(format!("{cmd}: usage: res write mK.RES OFFSET TEXT"));
                }
                let r = self.mres_resolve(&cmd, m, what)?;
                let offset =
                    parse_size(offset).ok_or_else(|| format!("{cmd}: bad offset '{offset}'"))?;
                if r.id.kind() == Some(ResType::Pipe) && offset != 0 {
                    return Err(format!("{cmd}: a pipe has no offset (write at 0)"));
                }
                let text = text.join(" ");
                let n = m_::res_write(&r, text.as_bytes(), offset)
                    .map_err(|e| said(&cmd, &shown(&r), e))?;
                println!("wrote {n} bytes at offset {offset}");
                Ok(())
            }
            "bind" => self.mres_bind(m, what, args),
            // A write to a compute unbinds it (its process stops, keeping its state).
            "unbind" => self
                .mres_of_kind(&cmd, m, what, args, ResType::Compute)
                .and_then(|r| m_::res_write(&r, &[], 0).map_err(|e| said(&cmd, &shown(&r), e)))
                .map(drop),
            "kill" => self
                .mres_of_kind(&cmd, m, what, args, ResType::Process)
                .and_then(|r| {
                    m_::res_control(&r, control::KILL, 0, 0).map_err(|e| said(&cmd, &shown(&r), e))
                })
                .map(drop),
            _ => Err(format!(
                "{cmd}: not for another machine's resources (ls, open, close, info, read, \
                 write, bind, unbind, kill are)"
            )),
        }
    }

    /// `res bind mK.COMPUTE PID|PROCESS`: machine K's compute runs a stopped process of
    /// this shell's user there (a pid `mK.cC.S`, or a process resource `mK.c0/process/p`,
    /// `mK.c0:process:5.1`); it becomes a job here (`wait`), its output on K's console.
    fn mres_bind(&mut self, m: u8, what: &str, args: &[&str]) -> Result<(), String> {
        let cmd = "res bind";
        let [target] = args else {
            return Err("res bind: usage: res bind mK.COMPUTE mK.cC.S|mK.PROCESS".into());
        };
        let compute = self.mres_resolve(cmd, m, what)?;
        if compute.id.kind() != Some(ResType::Compute) {
            return Err(format!("{cmd} {}: not a compute", shown(&compute)));
        }
        let on_m = |pm: u8| {
            if pm == m {
                Ok(())
            } else {
                Err(format!(
                    "{cmd}: {target} is not of machine {m}: a compute runs its own machine's \
                     processes"
                ))
            }
        };
        let (pid, name) = match crate::machines::parse_remote(target) {
            Some((pm, pid)) => {
                on_m(pm)?;
                (pid, String::from("process"))
            }
            None => {
                let (pm, word) = split_machine(target).ok_or_else(|| {
                    format!("{cmd}: '{target}' is neither a pid (m1.c0.5) nor a process (m1.c0/process/p)")
                })?;
                on_m(pm)?;
                let process = self.mres_resolve(cmd, m, word)?;
                if process.id.kind() != Some(ResType::Process) {
                    return Err(format!("{cmd} {}: not a process", shown(&process)));
                }
                let p =
                    m_::res_process_info(&process).map_err(|e| said(cmd, &shown(&process), e))?;
                (p.pid, String::from(p.name()))
            }
        };
        // A compute's read binds it to the process its argument names.
        m_::res_read(&compute, &mut [], pid.0).map_err(|e| said(cmd, &shown(&compute), e))?;
        let remote = m_::Remote {
            machine: m,
            epoch: compute.epoch,
            pid,
        };
        if self.remote_jobs.iter().all(|j| j.remote != remote) {
            self.remote_jobs.push(crate::machines::RemoteJob {
                remote,
                name,
                followed: false,
                console_there: true,
                drained: false,
            });
        }
        println!(
            "{}: running on {} (its output on machine {m}'s console)",
            m_::spell_pid(m, pid),
            shown(&compute)
        );
        Ok(())
    }

    /// `res open mK.NAME [ARG] [-r RIGHTS]`: a vregion (SIZE), pipe ([CAPACITY]),
    /// semaphore (COUNT), compute (MIPS) or process (PROGRAM [ARGS], created stopped) there.
    fn mres_open(&mut self, m: u8, name: &str, args: &[&str]) -> Result<(), String> {
        let mut args: Vec<&str> = args.to_vec();
        let mut rights = Rights::OWNER_ALL;
        if let Some(at) = args.iter().position(|a| *a == "-r") {
            let word = args
                .get(at + 1)
                .ok_or("res open: -r RIGHTS (e.g. rwcx/r---)")?;
            rights = Rights::parse(word).ok_or_else(|| format!("res open: bad rights '{word}'"))?;
            args.drain(at..at + 2);
        }
        let parsed = ResName::parse(name)
            .map_err(|e| format!("res open: {}: '{name}' ({e})", Error::BadName))?;
        let number = |what: &str| -> Result<Option<u64>, String> {
            match args.as_slice() {
                [] => Ok(None),
                [w] => parse_size(w)
                    .map(Some)
                    .ok_or_else(|| format!("res open: bad {what} '{w}'")),
                _ => Err(format!(
                    "res open: usage: res open mK.NAME [{what}] [-r RIGHTS]"
                )),
            }
        };
        // One plain number (a compute's mips, a semaphore's count), as 8 bytes.
        let count = |what: &str, usage: &str| -> Result<Vec<u8>, String> {
            match args.as_slice() {
                [w] => w
                    .parse::<u64>()
                    .map(|n| n.to_le_bytes().to_vec())
                    .map_err(|_| format!("res open: bad {what} '{w}'")),
                _ => Err(format!("res open: usage: res open mK.LOC/{usage}")),
            }
        };
        let bytes = match parsed.kind {
            ResType::VRegion => number("SIZE")?
                .ok_or("res open: usage: res open mK.LOC/vregion/NAME SIZE")?
                .to_le_bytes()
                .to_vec(),
            ResType::Pipe => number("CAPACITY")?.map_or(Vec::new(), |c| c.to_le_bytes().to_vec()),
            ResType::Compute => count("mips", "compute/NAME MIPS")?,
            ResType::Process => {
                let Some((&program, program_args)) = args.split_first() else {
                    return Err(
                        "res open: usage: res open mK.LOC/process/NAME PROGRAM [ARGS...]".into(),
                    );
                };
                ulib::res::process_args(program, program_args)
                    .map_err(|e| format!("res open: {e}: {program}"))?
            }
            ResType::Sem => count("count", "sem/NAME COUNT")?,
            _ => {
                return Err(String::from(
                    "res open: only vregions, pipes, semaphores, computes and processes on \
                     another machine",
                ))
            }
        };
        let r = m_::res_open(m, name, &bytes, rights)
            .map_err(|e| format!("res open: {e}: m{m}.{name}"))?;
        println!("{}", shown(&r));
        // The id there, of this life (an earlier life may have given out the same id).
        self.remote_ids
            .retain(|k| !(k.machine == r.machine && k.id == r.id));
        self.remote_ids.push(r);
        Ok(())
    }

    /// `res SUB mK.RES` of a resource of type `kind` and no more words.
    fn mres_of_kind(
        &self,
        cmd: &str,
        m: u8,
        what: &str,
        args: &[&str],
        kind: ResType,
    ) -> Result<RemoteRes, String> {
        if !args.is_empty() {
            return Err(format!(
                "{cmd}: usage: {cmd} mK.{}",
                kind.name().to_uppercase()
            ));
        }
        let r = self.mres_resolve(cmd, m, what)?;
        if r.id.kind() != Some(kind) {
            return Err(format!("{cmd} {}: not a {}", shown(&r), kind.name()));
        }
        Ok(r)
    }

    /// Machine `m`'s resource `word`: a name (looked up there) or an id.
    fn mres_resolve(&self, cmd: &str, m: u8, word: &str) -> Result<RemoteRes, String> {
        if word.contains('/') {
            return m_::res_find(m, word).map_err(|e| format!("{cmd}: {e}: m{m}.{word}"));
        }
        // Machine `m`'s id, whatever machine the word wrote (`m1.0x...` is machine 1's).
        let id = ResId::parse(word)
            .ok_or_else(|| {
                format!(
                    "{cmd}: 'm{m}.{word}' is neither an id (m1.c0:pipe:3.1) nor a name \
                     (m1.c0/pipe/p)"
                )
            })?
            .with_machine(m);
        if let Some(r) = self
            .remote_ids
            .iter()
            .find(|r| r.machine == m && r.id == id)
        {
            return Ok(*r);
        }
        // Not printed by this shell: the machine's present life.
        let epoch = crate::machines::epoch_of(m).map_err(|e| format!("{cmd}: {e}"))?;
        Ok(RemoteRes {
            machine: m,
            epoch,
            id,
        })
    }
}

/// A resource of another machine as the shell shows it: its id, which carries the
/// machine (`m1.c0:pipe:3.1`; machine 0's as `c0:pipe:3.1`).
fn shown(r: &RemoteRes) -> String {
    format!("{}", r.id.with_machine(r.machine))
}
