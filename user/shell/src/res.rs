//! The resource commands: `res ls|open|close|info|read|write|bind|unbind|kill`, `su`,
//! `whoami` (docs/resources.md). A bare `su` goes back to the user the shell started as
//! (the kernel may refuse `su 0`: user 0 is the kernel itself).
//!
//! A resource is named on the command line by its id, as the shell prints it
//! (`c0:vregion:3.1`) or in hexadecimal (`0x...`), or by its name (`here/vregion/buf0`,
//! `c1/compute/cpu`), which is looked up in `RES_LIST` of the core the name designates
//! (names are unique per core and type), so a script can refer to what it opened without
//! knowing the ids. A process the shell runs with `res bind` is reaped like a background
//! job (`[pid] done`). Every subcommand works the same on any core's resources (names
//! `cN/TYPE/NAME`, ids of any core, `res ls N`): the kernel carries the operation there.
//! With `mK:` before the resource, `open`, `close`, `info`, `read` and `write` act on
//! machine K's (`mres`).

use crate::cores::parse_core;
use crate::{processes, Job, Shell};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::res::{ResId, ResInfo, ResName, ResType, Rights, UserId};
use ulib::abi::{self, Error, Pid};
use ulib::{println, res};

const USAGE: &str =
    "res: usage: res ls|open|close|info|read|write|bind|unbind|kill ... (see 'help')";

/// Most bytes `res read` dumps.
const MAX_DUMP: u64 = 256;

/// Most vspace attachments `res read` shows.
const MAX_ATTACHMENTS: usize = 64;

impl Shell {
    /// `res SUBCOMMAND ...`.
    pub(crate) fn res(&mut self, args: &[&str]) -> Result<(), String> {
        let Some((&sub, args)) = args.split_first() else {
            return Err(USAGE.into());
        };
        // Another machine's resources: `res ls mK`, `res SUB mK.RES ...`.
        if let Some(m) = args.first().and_then(|w| crate::mres::machine_alone(w)) {
            if sub == "ls" {
                return self.res_remote(sub, m, "c0", &args[1..]);
            }
        }
        // A resource names its machine: `m1.c0/pipe/p`, `m1.c0:pipe:3.1`, and an id of machine
        // 0 (`c0:pipe:3.1`) typed on another machine is machine 0's (issue 17). This
        // machine's, in any spelling, is used here.
        let here = self.me.machine();
        let mut local_args: Vec<&str> = args.to_vec();
        let respelled;
        if let Some(&word) = args.first() {
            if let Some((m, what)) = crate::mres::split_machine(word) {
                // (`res ls mK.cC` lists this machine's core there too.)
                if m != here || sub == "ls" {
                    return self.res_remote(sub, m, what, &args[1..]);
                }
                // A name is this machine's without its prefix; an id in any spelling
                // (`m1.c0:pipe:3.1`, `m1:c0:pipe:3.1`, `m1.0x...`) is written as its own.
                if what.contains('/') {
                    local_args[0] = what;
                } else if let Some(id) = ResId::parse(what) {
                    respelled = format!("{}", id.with_machine(m));
                    local_args[0] = &respelled;
                }
            } else if let Some(id) = ResId::parse(word).filter(|id| id.machine() != here) {
                return self.res_remote(sub, id.machine(), word, &args[1..]);
            }
        }
        let args = local_args.as_slice();
        match sub {
            "ls" => self.res_ls(args),
            "open" => self.res_open(args),
            "close" => self.res_close(args),
            "info" => self.res_info(args),
            "read" => self.res_read(args),
            "write" => self.res_write(args),
            "bind" => self.res_bind(args),
            "unbind" => self.res_unbind(args),
            "kill" => self.res_kill(args),
            other => Err(format!(
                "res: unknown subcommand '{other}' (ls, open, close, info, read, write, bind, \
                 unbind, kill)"
            )),
        }
    }

    /// The resource a word designates: an id (`c0:vregion:3.1`, `0x...`) or a name.
    fn resolve(&self, cmd: &str, word: &str) -> Result<ResId, String> {
        if let Some(id) = ResId::parse(word) {
            return Ok(id);
        }
        if !word.contains('/') {
            return Err(format!(
                "{cmd}: '{word}' is neither a resource id (e.g. c0:vregion:3.1 or 0x...) nor \
                 a name (e.g. here/vregion/buf0)"
            ));
        }
        let name = ResName::parse(word)
            .map_err(|e| format!("{cmd}: {}: '{word}' ({e})", Error::BadName))?;
        let core = name.core(self.core);
        let all = res::list_all(core).map_err(|e| format!("{cmd}: listing core {core}: {e}"))?;
        all.iter()
            .find(|r| r.kind == name.kind as u8 && r.name() == name.name)
            .map(|r| r.id)
            .ok_or_else(|| format!("{cmd}: {}: {word}", Error::NoSuchResource))
    }

    /// Like [`Shell::resolve`], but the resource must be of type `kind` (when its id says).
    fn resolve_kind(&self, cmd: &str, word: &str, kind: ResType) -> Result<ResId, String> {
        let id = self.resolve(cmd, word)?;
        match id.kind() {
            Some(k) if k != kind => Err(format!(
                "{cmd}: {id} is a {}, not a {}",
                k.name(),
                kind.name()
            )),
            _ => Ok(id),
        }
    }

    /// `res ls [CORE]`.
    fn res_ls(&self, args: &[&str]) -> Result<(), String> {
        let core = match args {
            [] => self.core,
            [word] => parse_core(word)
                .ok_or_else(|| format!("res ls: bad core '{word}' (a number, e.g. 1 or c1)"))?,
            _ => return Err("res ls: usage: res ls [CORE]".into()),
        };
        let all = res::list_all(core).map_err(|e| format!("res ls: core {core}: {e}"))?;
        listing(&all);
        Ok(())
    }

    /// `res open NAME [ARG...] [-r RIGHTS]` (`-r RIGHTS` may also come right after NAME).
    fn res_open(&self, args: &[&str]) -> Result<(), String> {
        const USAGE: &str = "res open: usage: res open NAME [ARG...] [-r RIGHTS]";
        let mut args: Vec<&str> = args.to_vec();
        let n = args.len();
        let at = if n >= 3 && args[n - 2] == "-r" {
            Some(n - 2)
        } else if n >= 3 && args[1] == "-r" {
            Some(1)
        } else {
            None
        };
        let mut rights = Rights::OWNER_ALL;
        if let Some(at) = at {
            let word = args[at + 1];
            rights = Rights::parse(word).ok_or_else(|| {
                format!(
                    "res open: bad rights '{word}' (e.g. rwcx/r---: read, write, close, control \
                     for the creator, then for everyone else)"
                )
            })?;
            args.drain(at..at + 2);
        }
        let Some((&name, args)) = args.split_first() else {
            return Err(USAGE.into());
        };
        let parsed = ResName::parse(name)
            .map_err(|e| format!("res open: {}: '{name}' ({e})", Error::BadName))?;
        let opened = match parsed.kind {
            ResType::VRegion => {
                let [size] = args else {
                    return Err(
                        "res open: usage: res open LOC/vregion/NAME SIZE (e.g. 4096, 4K, 1M)"
                            .into(),
                    );
                };
                let bytes = parse_size(size).ok_or_else(|| {
                    format!("res open: bad size '{size}' (bytes, or with K or M, e.g. 4K)")
                })?;
                res::open_vregion(name, bytes, rights)
            }
            ResType::VSpace => {
                let pid = match args {
                    [] => None,
                    [word] => Some(Pid::parse(word).ok_or_else(|| {
                        format!("res open: bad pid '{word}' (expected CORE.SERIAL, e.g. 0.3)")
                    })?),
                    _ => return Err("res open: usage: res open LOC/vspace/NAME [PID]".into()),
                };
                res::open_vspace(name, pid, rights)
            }
            ResType::Process => {
                let Some((&program, program_args)) = args.split_first() else {
                    return Err(
                        "res open: usage: res open LOC/process/NAME PROGRAM [ARGS...]".into(),
                    );
                };
                res::open_process(name, program, program_args, rights)
            }
            ResType::Compute => {
                let mips = match args {
                    [word] => word.parse::<u64>().ok(),
                    _ => None,
                }
                .ok_or("res open: usage: res open LOC/compute/NAME MIPS (1 to 10000)")?;
                res::open_compute(name, mips, rights)
            }
            ResType::Sem => {
                let count = match args {
                    [word] => word.parse::<u64>().ok(),
                    _ => None,
                }
                .ok_or("res open: usage: res open LOC/sem/NAME COUNT")?;
                res::open(name, &count.to_le_bytes(), rights)
            }
            ResType::Device => {
                return Err("res open: devices are made by the kernel at boot (see `pci`)".into())
            }
            ResType::Endpoint => {
                if !args.is_empty() {
                    return Err("res open: usage: res open LOC/endpoint/NAME (on this core: the shell receives)".into());
                }
                ulib::ipc::open_endpoint(name, rights)
            }
            ResType::Pipe => match args {
                [] => res::open(name, &[], rights),
                [size] => {
                    let bytes = parse_size(size).ok_or_else(|| {
                        format!("res open: bad capacity '{size}' (bytes, or with K, e.g. 4K)")
                    })?;
                    res::open(name, &bytes.to_le_bytes(), rights)
                }
                _ => return Err("res open: usage: res open LOC/pipe/NAME [CAPACITY]".into()),
            },
        };
        let id = opened.map_err(|e| format!("res open: {e}: {name}"))?;
        match parsed.kind {
            ResType::Process => match res::info(id) {
                Ok(info) => println!("{id} (pid {})", Pid(info.size)),
                Err(_) => println!("{id}"),
            },
            _ => println!("{id}"),
        }
        Ok(())
    }

    /// `res close RES`.
    fn res_close(&mut self, args: &[&str]) -> Result<(), String> {
        let [word] = args else {
            return Err("res close: usage: res close RES (an id or a name)".into());
        };
        let id = self.resolve("res close", word)?;
        // Closing a process ends it: its end is then no error.
        let pid = match id.kind() {
            Some(ResType::Process) => res::info(id).ok().map(|i| Pid(i.size)),
            _ => None,
        };
        res::close(id).map_err(|e| format!("res close {id}: {e}"))?;
        if let Some(pid) = pid {
            self.mark_killed(pid);
        }
        Ok(())
    }

    /// `res info RES`.
    fn res_info(&self, args: &[&str]) -> Result<(), String> {
        let [word] = args else {
            return Err("res info: usage: res info RES (an id or a name)".into());
        };
        let id = self.resolve("res info", word)?;
        let r = res::info(id).map_err(|e| format!("res info {id}: {e}"))?;
        show_info(&r, "");
        Ok(())
    }

    /// `res read RES [LEN] [OFFSET]`.
    fn res_read(&self, args: &[&str]) -> Result<(), String> {
        let Some((&word, rest)) = args.split_first().filter(|(_, r)| r.len() <= 2) else {
            return Err("res read: usage: res read RES [LEN] [OFFSET]".into());
        };
        let id = self.resolve("res read", word)?;
        let number = |i: usize, what: &str| -> Result<Option<u64>, String> {
            rest.get(i)
                .map(|w| parse_size(w).ok_or_else(|| format!("res read: bad {what} '{w}'")))
                .transpose()
        };
        let len = number(0, "length")?;
        let offset = number(1, "offset")?.unwrap_or(0);
        match id.kind() {
            Some(ResType::VSpace) => read_vspace(id),
            Some(ResType::Process) => read_process(id),
            Some(ResType::Compute) => Err(format!(
                "res read: reading a compute binds it: use 'res bind {word} PID'"
            )),
            _ => read_vregion(id, len, offset),
        }
    }

    /// `res write RES OFFSET TEXT` (vregion).
    fn res_write(&self, args: &[&str]) -> Result<(), String> {
        let [word, offset, text @ ..] = args else {
            return Err("res write: usage: res write VREGION OFFSET TEXT".into());
        };
        if text.is_empty() {
            return Err("res write: usage: res write VREGION OFFSET TEXT".into());
        }
        let id = self.resolve_kind("res write", word, ResType::VRegion)?;
        let offset =
            parse_size(offset).ok_or_else(|| format!("res write: bad offset '{offset}'"))?;
        let text = text.join(" ");
        let n =
            res::write(id, text.as_bytes(), offset).map_err(|e| format!("res write {id}: {e}"))?;
        println!("wrote {n} bytes at offset {offset}");
        Ok(())
    }

    /// `res bind COMPUTE PID|PROCESS`: the process runs, and is reaped like a job.
    fn res_bind(&mut self, args: &[&str]) -> Result<(), String> {
        let [compute, target] = args else {
            return Err("res bind: usage: res bind COMPUTE PID|PROCESS".into());
        };
        let compute = self.resolve_kind("res bind", compute, ResType::Compute)?;
        let pid = match Pid::parse(target) {
            Some(pid) => pid,
            None => {
                let process = self.resolve_kind("res bind", target, ResType::Process)?;
                let info = res::info(process).map_err(|e| format!("res bind: {process}: {e}"))?;
                Pid(info.size)
            }
        };
        res::bind(compute, pid).map_err(|e| format!("res bind {compute} {pid}: {e}"))?;
        if self.jobs.iter().all(|j| !j.is(pid)) {
            let procs = processes().unwrap_or_default();
            if let Some(p) = procs.iter().find(|p| p.pid == pid && p.parent == self.me) {
                self.jobs.push(Job::new(pid, p.name()));
            }
        }
        Ok(())
    }

    /// `res unbind COMPUTE`.
    fn res_unbind(&self, args: &[&str]) -> Result<(), String> {
        let [word] = args else {
            return Err("res unbind: usage: res unbind COMPUTE".into());
        };
        let id = self.resolve_kind("res unbind", word, ResType::Compute)?;
        res::unbind(id).map_err(|e| format!("res unbind {id}: {e}"))
    }

    /// `res kill PROCESS`.
    fn res_kill(&mut self, args: &[&str]) -> Result<(), String> {
        let [word] = args else {
            return Err("res kill: usage: res kill PROCESS (an id or a name)".into());
        };
        let id = self.resolve_kind("res kill", word, ResType::Process)?;
        let pid = res::info(id).ok().map(|i| Pid(i.size));
        res::kill(id).map_err(|e| format!("res kill {id}: {e}"))?;
        if let Some(pid) = pid {
            self.mark_killed(pid);
        }
        Ok(())
    }

    /// `su [USER]`: without USER, back to the user the shell started as.
    pub(crate) fn su(&self, args: &[&str]) -> Result<(), String> {
        let user = match args {
            [] => self.first_user,
            [word] => word.parse::<u32>().ok().map(UserId),
            _ => None,
        }
        .ok_or("su: usage: su [USER] (a number; without it, the user the shell started as)")?;
        res::setuser(user).map_err(|e| format!("su {}: {e}", user.0))?;
        let now = res::getuser().map_err(|e| format!("su: {e}"))?;
        println!("{}", user_text(now));
        Ok(())
    }
}

/// `res info`'s lines for `r` (`machine`: `m1.` before the name of another machine's
/// resource, else empty; the id carries its machine).
pub(crate) fn show_info(r: &ResInfo, machine: &str) {
    let kind = ResType::from_u8(r.kind).map_or("?", ResType::name);
    println!("id       {} ({:#x})", r.id, r.id.0);
    println!("name     {machine}c{}/{kind}/{}", r.id.core(), r.name());
    println!("creator  {}", user_text(r.creator));
    println!("rights   {}", rights_text(r.rights));
    println!("size     {}", size_text(r));
    println!("detail   {}", detail_text(r));
}

/// `whoami`.
pub(crate) fn whoami() -> Result<(), String> {
    let user = res::getuser().map_err(|e| format!("whoami: {e}"))?;
    println!("{}", user_text(user));
    Ok(())
}

fn read_vregion(id: ResId, len: Option<u64>, offset: u64) -> Result<(), String> {
    // Without LEN, up to the end of the region (when the kernel says how long it is).
    let left = res::info(id)
        .ok()
        .filter(|r| r.kind == ResType::VRegion as u8)
        .map(|r| r.size.saturating_sub(offset));
    let len = len.or(left).unwrap_or(MAX_DUMP).min(MAX_DUMP);
    let mut buf = alloc::vec![0u8; len as usize];
    let n = res::read(id, &mut buf, offset).map_err(|e| format!("res read {id}: {e}"))?;
    dump(&buf[..n.min(buf.len())], offset);
    Ok(())
}

fn read_vspace(id: ResId) -> Result<(), String> {
    let mut buf = [[0u64; 2]; MAX_ATTACHMENTS];
    let n = res::attachments(id, &mut buf).map_err(|e| format!("res read {id}: {e}"))?;
    if n == 0 {
        println!("no vregions attached");
        return Ok(());
    }
    println!("{:<18} VREGION", "ADDRESS");
    for [address, vregion] in &buf[..n] {
        let access = if address & 1 != 0 { " (writable)" } else { "" };
        println!("{:#018x} {}{access}", address & !0xfff, ResId(*vregion));
    }
    Ok(())
}

fn read_process(id: ResId) -> Result<(), String> {
    let p = res::process_info(id).map_err(|e| format!("res read {id}: {e}"))?;
    println!(
        "pid {} parent {} core {} state {} program {} cpu {}.{:03} s memory {} KiB",
        p.pid,
        p.parent,
        p.core,
        state_text(p.state),
        p.name(),
        p.cpu_ns / 1_000_000_000,
        p.cpu_ns / 1_000_000 % 1000,
        p.memory / 1024
    );
    Ok(())
}

/// 16 bytes a line: offset, hexadecimal, and the printable ones as text.
pub(crate) fn dump(bytes: &[u8], offset: u64) {
    if bytes.is_empty() {
        println!("(no bytes)");
    }
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let mut line = format!("{:08x} ", offset + 16 * i as u64);
        for j in 0..16 {
            if j == 8 {
                line.push(' ');
            }
            match chunk.get(j) {
                Some(b) => line += &format!(" {b:02x}"),
                None => line += "   ",
            }
        }
        line += "  |";
        line.extend(chunk.iter().map(|&b| match b {
            b' '..=b'~' => b as char,
            _ => '.',
        }));
        line.push('|');
        println!("{line}");
    }
}

/// A byte count or offset: decimal or `0x` hexadecimal, optionally with `K`/`KiB` or
/// `M`/`MiB` (binary units).
pub(crate) fn parse_size(word: &str) -> Option<u64> {
    let lower = word.to_ascii_lowercase();
    let (digits, unit) = [
        ("kib", 1 << 10),
        ("k", 1 << 10),
        ("mib", 1 << 20),
        ("m", 1 << 20),
    ]
    .into_iter()
    .find_map(|(suffix, unit)| lower.strip_suffix(suffix).map(|d| (d, unit)))
    .unwrap_or((&lower, 1));
    let n = match digits.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => digits.parse::<u64>().ok()?,
    };
    n.checked_mul(unit)
}

fn rights_text(rights: u8) -> String {
    let text = Rights(rights).describe();
    String::from_utf8_lossy(&text).into_owned()
}

fn user_text(user: UserId) -> String {
    match user {
        UserId::KERNEL => "user 0 (kernel)".into(),
        UserId(n) => format!("user {n}"),
    }
}

fn state_text(state: u32) -> String {
    match abi::state_name(state) {
        "?" => format!("state {state}"),
        name => name.into(),
    }
}

/// The type-specific size, with its unit.
fn size_text(r: &ResInfo) -> String {
    match ResType::from_u8(r.kind) {
        Some(ResType::VRegion) => format!("{} B", r.size),
        Some(ResType::VSpace) => format!("{} pages", r.size),
        Some(ResType::Process) => format!("pid {}", Pid(r.size)),
        Some(ResType::Compute) => format!("{} mips", r.size),
        Some(ResType::Endpoint) => format!("owner {}", Pid(r.size)),
        Some(ResType::Sem) => format!("count {}", r.size),
        Some(ResType::Device) => format!("{:04x}:{:04x}", r.size >> 16, r.size & 0xffff),
        Some(ResType::Pipe) => format!("{} B buffered", r.size),
        None => format!("{:#x}", r.size),
    }
}

/// The type-specific detail, in words.
fn detail_text(r: &ResInfo) -> String {
    match ResType::from_u8(r.kind) {
        Some(ResType::VRegion) if r.detail == 0 => "not attached".into(),
        Some(ResType::VRegion) => format!("attached {}x", r.detail),
        Some(ResType::VSpace) => format!("of pid {}", Pid(r.detail)),
        Some(ResType::Process) => state_text(r.detail as u32),
        Some(ResType::Compute) if r.detail == 0 => "unbound".into(),
        Some(ResType::Compute) => format!("runs pid {}", Pid(r.detail)),
        Some(ResType::Endpoint) => "receives requests".into(),
        Some(ResType::Sem) => format!("{} waiting", r.detail),
        Some(ResType::Device) => format!(
            "class {:06x} ({})",
            r.detail,
            abi::dev::class_name(r.detail as u32)
        ),
        Some(ResType::Pipe) => format!(
            "{} readers, {} writers",
            r.detail >> 32,
            r.detail & 0xffff_ffff
        ),
        None => format!("{:#x}", r.detail),
    }
}

/// A listing of resources (`res ls`; an id carries its machine, `m1.c0:pipe:3.1`).
pub(crate) fn listing(all: &[ulib::abi::res::ResInfo]) {
    println!(
        "{:<18} {:<8} {:<16} {:<8} {:<9}  {:<12} DETAIL",
        "ID", "TYPE", "NAME", "CREATOR", "RIGHTS", "SIZE"
    );
    for r in all {
        let id = format!("{}", r.id);
        let rights = rights_text(r.rights);
        let kind = ResType::from_u8(r.kind).map_or("?", ResType::name);
        println!(
            "{id:<18} {kind:<8} {:<16} {:<8} {rights:<9}  {:<12} {}",
            r.name(),
            r.creator.0,
            size_text(r),
            detail_text(r)
        );
    }
}
