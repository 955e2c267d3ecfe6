//! The commands about cores and inter-core RPCC: `cores`, `mem`, `migrate PID CORE` and
//! `rpcc` (the counters of `RPCC_STATS`: agents, requests served, back-pressure, IPIs, and
//! the messages each core sent to each other core, then a `total:` line that a script can
//! check). `run -c CORE` is in `main.rs`.

use crate::Shell;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::{self, CoreInfo, Error, Pid, RpccInfo};
use ulib::{println, sys};

/// A core number as typed: `1` or `c1`, below [`abi::MAX_CORES`] (whether it is online is
/// the kernel's to say).
pub(crate) fn parse_core(word: &str) -> Option<usize> {
    let digits = word.strip_prefix('c').unwrap_or(word);
    digits.parse().ok().filter(|c| *c < abi::MAX_CORES)
}

pub(crate) fn core_infos() -> Result<Vec<CoreInfo>, Error> {
    let mut buf = alloc::vec![CoreInfo::default(); abi::MAX_CORES];
    let n = sys::cores(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// `cores`.
pub(crate) fn cores() -> Result<(), String> {
    let infos = core_infos().map_err(|e| format!("cores: {e}"))?;
    println!(
        "CORE  ONLINE  LOAD  FRAMES FREE/TOTAL  PROCS  IPIS      TICKS     DEADLINE WAKES  \
         VSPACE SWITCHES"
    );
    for c in &infos {
        let busy = c.ticks.saturating_sub(c.idle_ticks);
        let load = (busy * 100).checked_div(c.ticks).unwrap_or(0);
        let frames = format!("{}/{}", c.frames_free, c.frames_total);
        println!(
            "{:<5} {:<7} {:>3}%  {:<18} {:<6} {:<9} {:<9} {:<15} {}",
            c.core,
            if c.online != 0 { "yes" } else { "no" },
            load,
            frames,
            c.processes,
            c.ipis,
            c.ticks,
            c.deadline_wakes,
            c.vspace_switches
        );
    }
    Ok(())
}

/// Frames (4 KiB) as MiB with one decimal.
fn mib(frames: u64) -> String {
    let tenths = frames * 10 / 256;
    format!("{}.{}", tenths / 10, tenths % 10)
}

/// `mem`.
pub(crate) fn mem() -> Result<(), String> {
    let infos = core_infos().map_err(|e| format!("mem: {e}"))?;
    // FOR PROGRAMS is what programs can still get: free frames beyond the kernel's reserve.
    // KERNEL HEAP is what the core's kernel heap holds of its pool now (it gives spare
    // memory back when the core idles).
    println!("CORE   FREE MiB  FOR PROGRAMS MiB  KERNEL HEAP MiB  TOTAL MiB");
    let (mut free, mut usable, mut heap, mut total) = (0, 0, 0, 0);
    for c in &infos {
        let for_programs = c.frames_free.saturating_sub(c.frames_reserved);
        let heap_frames = c.heap_bytes.div_ceil(4096);
        free += c.frames_free;
        usable += for_programs;
        heap += heap_frames;
        total += c.frames_total;
        println!(
            "{:<5} {:>9}  {:>16}  {:>15}  {:>9}",
            c.core,
            mib(c.frames_free),
            mib(for_programs),
            mib(heap_frames),
            mib(c.frames_total)
        );
    }
    println!(
        "total {:>9}  {:>16}  {:>15}  {:>9}",
        mib(free),
        mib(usable),
        mib(heap),
        mib(total)
    );
    Ok(())
}

impl Shell {
    /// `migrate PID CORE`: move a process to CORE; it gets a new pid there. A job stays a
    /// job, known by the pid it was started with (`kill` takes either).
    pub(crate) fn migrate(&mut self, args: &[&str]) -> Result<(), String> {
        if args.len() > 2 && args[1..].contains(&"-m") {
            return self.migrate_away(args);
        }
        let [pid_word, core_word] = args else {
            return Err("migrate: usage: migrate PID CORE (e.g. migrate 1.2 0)".into());
        };
        let pid = Pid::parse(pid_word).ok_or_else(|| {
            format!("migrate: bad pid '{pid_word}' (expected CORE.SERIAL, e.g. 1.2)")
        })?;
        let core = parse_core(core_word)
            .ok_or_else(|| format!("migrate: bad core '{core_word}' (a number, e.g. 0 or c0)"))?;
        if pid.core() == core {
            // A pid names the core its process lives on.
            return Err(format!("migrate: {pid} already lives on core {core}"));
        }
        if pid == self.me {
            return Err(format!(
                "migrate: the shell reads the console, which core {} serves: it stays there",
                self.core
            ));
        }
        let new = sys::migrate(Some(pid), core)
            .map_err(|e| format!("migrate {pid} to core {core}: {e}"))?;
        if let Some(job) = self.jobs.iter_mut().find(|j| j.is(pid)) {
            job.now = new;
        }
        println!("{pid} is now {new} on core {core}");
        Ok(())
    }
}

impl Shell {
    /// `migrate PID -m M [-c C]`: move a process to machine M. A job of this shell becomes
    /// a remote job (`wait mM.cC.S`, `kill mM.cC.S`, and a bare `wait`); the old process's end
    /// here (`ENDED_MOVED_AWAY`) is collected at once.
    fn migrate_away(&mut self, args: &[&str]) -> Result<(), String> {
        let pid_word = args[0];
        let pid = Pid::parse(pid_word).ok_or_else(|| {
            format!("migrate: bad pid '{pid_word}' (expected CORE.SERIAL, e.g. 1.2)")
        })?;
        if pid == self.me {
            return Err("migrate: the shell reads this machine's console: it stays here".into());
        }
        let job = self.jobs.iter().position(|j| j.is(pid));
        let now = job.map_or(pid, |i| self.jobs[i].now);
        let (there, bytes, ms) = crate::machines::migrate_away(now, &args[1..])?;
        let first = job.map_or(pid, |i| self.jobs[i].pid);
        let _ = sys::wait_timeout(Some(first), 0);
        let spelled = ulib::mach::spell_pid(there.machine, there.pid);
        if let Some(i) = job {
            let j = self.jobs.swap_remove(i);
            self.remote_jobs.push(crate::machines::RemoteJob {
                remote: there,
                name: j.name,
                followed: false,
                console_there: true,
                drained: false,
            });
        }
        println!(
            "{pid} is now {spelled} ({} KiB moved in {ms} ms; its output goes to machine {}'s \
             console)",
            bytes.div_ceil(1024),
            there.machine
        );
        Ok(())
    }
}

/// `rpcc`: one line of counters per online core, who sent how many messages to whom, and
/// the totals (messages between different cores, requests served, agents created).
pub(crate) fn rpcc() -> Result<(), String> {
    let stats = sys::rpcc_stats().map_err(|e| format!("rpcc: {e}"))?;
    // The matrix shows online cores only (every record, if CORES cannot say).
    let online: Vec<usize> = match core_infos() {
        Ok(infos) => infos
            .iter()
            .filter(|c| c.online != 0)
            .map(|c| c.core as usize)
            .collect(),
        Err(_) => stats.iter().map(|s| s.core as usize).collect(),
    };
    let shown: Vec<&RpccInfo> = stats
        .iter()
        .filter(|s| online.contains(&(s.core as usize)))
        .collect();
    if shown.is_empty() {
        return Err("rpcc: the kernel reported no online core".into());
    }
    println!(
        "{:<5} {:<7} {:>11}  {:>5} {:>8} {:>9}  {:>8} {:>8}  {:>9} {:>9} {:>7}",
        "CORE",
        "NOTIFY",
        "AGENT-LIMIT",
        "LIVE",
        "CREATED",
        "DESTROYED",
        "REUSED",
        "SERVED",
        "RING-FULL",
        "IPIS-SENT",
        "WAITING"
    );
    for s in &shown {
        println!(
            "{:<5} {:<7} {:>11}  {:>5} {:>8} {:>9}  {:>8} {:>8}  {:>9} {:>9} {:>7}",
            s.core,
            abi::rpcc_notify_name(s.notify),
            agent_limit(s),
            s.agents_live,
            s.agents_created,
            s.agents_destroyed,
            s.reuse_hits,
            s.served,
            s.ring_full,
            s.ipis_sent,
            s.outstanding
        );
    }
    let biglock = sys::modes().is_ok_and(|m| m.first().is_some_and(|m| m.biglock != 0));
    if biglock {
        println!("big-lock mode: no messages travel; a core works on another core's tables");
        println!("directly, holding the kernel lock. Counted below as requests.");
    }
    println!("messages sent (row: from core, column: to core)");
    let width = 8;
    let mut head = format!("{:<9}", "FROM\\TO");
    for s in &shown {
        head += &format!("{:>width$}", s.core);
    }
    println!("{head}");
    for from in &shown {
        let mut line = format!("{:<9}", from.core);
        for to in &shown {
            let n = from.sent_to.get(to.core as usize).copied().unwrap_or(0);
            line += &format!("{n:>width$}");
        }
        println!("{line}");
    }
    let sum = |f: fn(&RpccInfo) -> u64| shown.iter().map(|s| f(s)).sum::<u64>();
    let between: u64 = shown
        .iter()
        .flat_map(|from| {
            shown
                .iter()
                .filter(move |to| to.core != from.core)
                .map(move |to| from.sent_to.get(to.core as usize).copied().unwrap_or(0))
        })
        .sum();
    println!(
        "total: {between} {} between cores, {} requests served, {} agents created",
        if biglock { "requests" } else { "messages" },
        sum(|s| s.served),
        sum(|s| s.agents_created)
    );
    Ok(())
}

fn agent_limit(s: &RpccInfo) -> String {
    match s.agent_limit {
        _ if s.agents_inline != 0 => "inline".into(),
        0 => "unlimited".into(),
        n => format!("{n}"),
    }
}

/// `modes`: where each core's time went, in P2's five CPU modes, as percentages, and the
/// kernel structure (per-core or big-lock).
pub(crate) fn modes() -> Result<(), String> {
    let infos = sys::modes().map_err(|e| format!("modes: {e}"))?;
    let structure = match infos.first() {
        Some(m) if m.biglock != 0 => "big-lock (kernel=biglock)",
        _ => "per-core (kernel=percore)",
    };
    println!("kernel structure: {structure}");
    let mut head = format!("{:<6}{:>12}", "CORE", "TOTAL(s)");
    for name in abi::MODE_NAMES {
        head += &format!("{:>11}", name.to_uppercase());
    }
    println!("{head}");
    for m in &infos {
        let total: u64 = m.ns.iter().sum();
        let mut line = format!("{:<6}{:>12}", m.core, seconds(total));
        for ns in m.ns {
            let pct = if total == 0 {
                0.0
            } else {
                ns as f64 * 100.0 / total as f64
            };
            line += &format!("{pct:>10.1}%");
        }
        println!("{line}");
    }
    Ok(())
}

fn seconds(ns: u64) -> String {
    format!("{}.{:03}", ns / 1_000_000_000, ns / 1_000_000 % 1000)
}

/// `trace dump|clear|status`: the kernel's event trace (boot with `trace=on`).
pub(crate) fn trace(args: &[&str]) -> Result<(), String> {
    let (command, what) = match args.first().copied() {
        Some("dump") => (abi::syscall::TRACE_DUMP, "dumped"),
        Some("clear") => (abi::syscall::TRACE_CLEAR, "cleared"),
        Some("status") | None => (abi::syscall::TRACE_STATUS, "held"),
        Some(other) => return Err(format!("trace: unknown '{other}' (dump, clear or status)")),
    };
    match sys::trace(command) {
        Ok(n) => {
            println!("trace: {n} events {what}");
            Ok(())
        }
        Err(abi::Error::NotSupported) => Err(
            "trace: tracing is off (boot with trace=on: cargo xtask run --cmdline trace=on)".into(),
        ),
        Err(e) => Err(format!("trace: {e}")),
    }
}

/// `pci`: every PCI function the kernel found (it keeps no drivers: user-mode drivers hold
/// these as `device` resources).
pub fn pci() -> Result<(), String> {
    let fs = ulib::dev::list().map_err(|e| format!("pci: {e}"))?;
    for f in &fs {
        let mut irq = if f.irq_pin == 0 {
            String::from("no irq")
        } else {
            format!("irq {} (INT{})", f.irq_line, (b'A' + f.irq_pin - 1) as char)
        };
        if f.msix_entries > 0 {
            irq += &format!(
                ", msi-x {} in BAR{}{}",
                f.msix_entries,
                f.msix_bar,
                if f.irq_msix != 0 { " (in use)" } else { "" }
            );
        }
        let holder = if f.holder == 0 {
            String::new()
        } else {
            format!(", held by 0.{}", f.holder)
        };
        println!(
            "{:02x}:{:02x}.{} {:04x}:{:04x} class {:06x} ({}) {}{} [{}]",
            f.bus(),
            f.dev(),
            f.func(),
            f.vendor,
            f.device,
            f.class,
            ulib::abi::dev::class_name(f.class),
            irq,
            holder,
            f.id
        );
        for (i, b) in f.bars.iter().enumerate().filter(|(_, b)| b.size != 0) {
            let kind = if b.flags & 1 != 0 { "io" } else { "mem" };
            println!("    BAR{i} {kind} {:#x} size {:#x}", b.base, b.size);
        }
    }
    println!("{} functions", fs.len());
    Ok(())
}
