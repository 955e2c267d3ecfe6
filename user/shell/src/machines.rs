//! Several machines as one system (issue 17), through this machine's `machd` (the function
//! `mach`, `abi::mach`):
//!
//! - `machines`: each machine: id, address, up/down, epoch, last heard; `machines wait`
//!   waits until every machine is up (scripts start with it: the others may still boot);
//! - `mping M [N]`: N null round trips to machine M, each one's time;
//! - `run PROG [ARGS] -m M [-c C] [&]`: PROG on machine M (core C; by default M's last
//!   core, away from its network servers on core 0), as this shell's user; in the
//!   foreground its output comes back to this console (`OP_OUTPUT`: M's `machd` reads it
//!   from a pipe, this machine's `machd` prints it), in the background too (this
//!   machine's `machd` follows it: `OP_FOLLOW`); without `&` the shell waits for it and
//!   reports its end as for a local program; as the first program of a pipeline (`run
//!   PROG -m M | wc`) its output goes into the pipe ([`pipe_from`]);
//! - `wait mM.cC.S`, `kill mM.cC.S`: a process on machine M (the pid `run -m` printed);
//! - `ps -a`: the processes of every machine that is up;
//! - `mcount M N`: N increments of machine M's counter for this machine, each answer
//!   checked to be the one before plus one: each request performed exactly once.
//!
//! A remote pid is kept with the epoch of the machine's life that spawned it: if the
//! machine has restarted since, `wait` and `kill` are refused (`StaleResource`).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::ipc::Msg;
use ulib::abi::mach::{self, FN_MACH};
use ulib::abi::syscall::control::{PIPE_READ_END, PIPE_WRITE_END};
use ulib::abi::{self, Error, Pid, WaitStatus};
use ulib::mach::{Copied, Remote, RunError, RunWords};
use ulib::net::Ipv4;
use ulib::{fnid, println, sys};

/// A program started on another machine with `&`.
pub(crate) struct RemoteJob {
    pub remote: Remote,
    pub name: String,
    /// Its output comes to this console in the background (`machd` follows it).
    pub followed: bool,
    /// Its output is that machine's console's, not relayed here: it moved there (`migrate
    /// PID -m M`), or a compute there runs it (`res bind mM.COMPUTE ...`).
    pub console_there: bool,
    /// Its output has all been printed here (a `wait` stopped after that by a Ctrl-C): the
    /// next `wait` only waits.
    pub drained: bool,
}

impl RemoteJob {
    pub fn spelled(&self) -> String {
        ulib::mach::spell_pid(self.remote.machine, self.remote.pid)
    }
}

fn call(op: u64, words: [u64; 6]) -> Result<[u64; 6], Error> {
    let id = fnid::lookup(FN_MACH).map_err(|e| match e {
        Error::NoSuchResource => Error::NotSupported,
        e => e,
    })?;
    let (_, r) = fnid::call_fn(id, &Msg { label: op, words })?;
    Ok(r.words)
}

fn why(cmd: &str, e: Error) -> String {
    match e {
        Error::NotSupported => format!(
            "{cmd}: no machd on this machine (boot several with cargo xtask run --machines N)"
        ),
        Error::Gone => format!("{cmd}: the machine is down (Gone)"),
        Error::TimedOut => format!("{cmd}: no answer in time (TimedOut)"),
        Error::StaleResource => {
            format!("{cmd}: the machine restarted since; that id is of its earlier life")
        }
        e => format!("{cmd}: {e}"),
    }
}

/// How long `machines wait` waits for every machine (a hang guard: a loaded host boots
/// four emulated machines in well under a minute).
const WAIT_ALL_NS: u64 = 180_000_000_000;

/// `machines wait`: until every machine is up (and this machine's `machd` serves).
pub(crate) fn wait_up() -> Result<(), String> {
    let start = ulib::sys::clock_ns().unwrap_or(0);
    let over = || ulib::sys::clock_ns().unwrap_or(0).saturating_sub(start) > WAIT_ALL_NS;
    let me = loop {
        match call(mach::OP_SELF, [0; 6]) {
            Ok(me) => break me,
            Err(Error::NotSupported | Error::Gone) if !over() => {
                let _ = ulib::sys::sleep_ns(50_000_000);
            }
            Err(e) => return Err(why("machines wait", e)),
        }
    };
    loop {
        let mut down = Vec::new();
        for m in 0..me[1] {
            let i = call(mach::OP_MEMBER, [m, 0, 0, 0, 0, 0]).map_err(|e| why("machines", e))?;
            if i[1] != mach::UP {
                down.push(format!("m{m}"));
            }
        }
        if down.is_empty() {
            println!("machines: all {} up", me[1]);
            return Ok(());
        }
        if over() {
            return Err(format!(
                "machines wait: still not up after 180 s: {}",
                down.join(" ")
            ));
        }
        let _ = ulib::sys::sleep_ns(50_000_000);
    }
}

/// `machines`.
pub(crate) fn list() -> Result<(), String> {
    let me = call(mach::OP_SELF, [0; 6]).map_err(|e| why("machines", e))?;
    println!(
        "{:<8} {:<12} {:<6} {:<9} {:>12}  SENT/RESENT",
        "MACHINE", "ADDRESS", "STATE", "EPOCH", "HEARD(ms)"
    );
    for m in 0..me[1] {
        let i = call(mach::OP_MEMBER, [m, 0, 0, 0, 0, 0]).map_err(|e| why("machines", e))?;
        let state = match i[1] {
            mach::UP => "up",
            mach::DOWN => "down",
            _ => "never",
        };
        let heard = match (m == me[0], i[3]) {
            (true, _) => String::from("(this)"),
            (_, u64::MAX) => String::from("-"),
            (_, ns) => format!("{}", ns / 1_000_000),
        };
        let traffic = if m == me[0] {
            format!("{}/{}", i[4], i[5])
        } else {
            String::new()
        };
        println!(
            "m{m:<7} {:<12} {state:<6} {:08x}  {heard:>12}  {traffic}",
            format!("{}", Ipv4::from_word(i[0])),
            i[2]
        );
    }
    Ok(())
}

fn machine_arg(cmd: &str, word: &str) -> Result<u64, String> {
    word.trim_start_matches('m')
        .parse::<u64>()
        .map_err(|_| machine_error(cmd, word))
}

fn machine_error(cmd: &str, word: &str) -> String {
    format!("{cmd}: '{word}' is not a machine (0, 1, ... or m0, m1, ...)")
}

/// `machine M` checked against this system's machines.
fn check_machine(cmd: &str, m: u64) -> Result<u64, String> {
    let me = call(mach::OP_SELF, [0; 6]).map_err(|e| why(cmd, e))?;
    if m >= me[1] {
        return Err(format!(
            "{cmd}: m{m} is not a machine of this system (m0..m{})",
            me[1] - 1
        ));
    }
    Ok(m)
}

/// `mcount M N`.
pub(crate) fn mcount(args: &[&str]) -> Result<(), String> {
    let (m, n) = match args {
        [m, n] => (
            check_machine("mcount", machine_arg("mcount", m)?)?,
            n.parse::<u64>()
                .ok()
                .filter(|n| (1..=1_000_000).contains(n))
                .ok_or("mcount: N is a count from 1 to 1000000")?,
        ),
        _ => return Err(String::from("mcount: usage: mcount M N")),
    };
    let before = call(mach::OP_MEMBER, [m, 0, 0, 0, 0, 0]).map_err(|e| why("mcount", e))?;
    let mut first = None;
    let mut last = 0;
    for i in 0..n {
        let v = call(mach::OP_COUNT, [m, 0, 0, 0, 0, 0])
            .map_err(|e| why(&format!("mcount (request {} of {n})", i + 1), e))?[0];
        if first.is_some() && v != last + 1 {
            return Err(format!(
                "mcount: m{m}'s counter went from {last} to {v}: {}",
                if v > last + 1 {
                    "a request was performed more than once"
                } else {
                    "an answer came twice or out of order"
                }
            ));
        }
        first.get_or_insert(v);
        last = v;
    }
    let after = call(mach::OP_MEMBER, [m, 0, 0, 0, 0, 0]).map_err(|e| why("mcount", e))?;
    println!(
        "mcount m{m}: {n} requests, counter {}..{last}, each performed exactly once ({} retransmissions)",
        first.unwrap_or(0),
        after[5] - before[5]
    );
    Ok(())
}

/// `mcall M NAME LABEL [WORD...] [-d TEXT]`: a request `LABEL` with up to four words to
/// the function NAME served on machine M (`abi::mach::OP_CALL`), as this shell's user;
/// with `-d`, TEXT goes in an ICA there and what the server gives back of it is shown.
pub(crate) fn mcall(args: &[&str]) -> Result<(), String> {
    const USAGE: &str = "mcall: usage: mcall M NAME LABEL [WORD...] [-d TEXT] (at most 4 words)";
    let (args, data) = match args.iter().position(|a| *a == "-d") {
        Some(i) if i + 2 == args.len() => (&args[..i], Some(args[i + 1])),
        Some(_) => return Err(String::from(USAGE)),
        None => (args, None),
    };
    let [m, name, label, words @ ..] = args else {
        return Err(String::from(USAGE));
    };
    if words.len() > 4 {
        return Err(String::from(USAGE));
    }
    let m = check_machine("mcall", machine_arg("mcall", m)?)?;
    let number = |w: &str| {
        w.parse::<u64>()
            .map_err(|_| format!("mcall: '{w}' is not a number"))
    };
    let label = number(label)?;
    let mut w = [0u64; 6];
    for (x, word) in w.iter_mut().zip(words.iter()) {
        *x = number(word)?;
    }
    let ica = data.map(|d| (d.as_bytes(), d.len()));
    let a = ulib::mach::call(m as u8, name, label, w, ica, 0).map_err(|e| match e {
        Error::NoSuchResource => format!("mcall: nothing serves {name} on machine {m}"),
        // `machd` answered (check_machine asked it): not a name other machines may call.
        Error::NotSupported => format!(
            "mcall: {name} may not be called from other machines (only names {}*)",
            mach::CALLABLE_PREFIX
        ),
        e => why("mcall", e),
    })?;
    let status = match a.value {
        0 => String::from("ok"),
        v => format!("{}", Error::from_code(v)),
    };
    println!(
        "mcall m{m} {name}: {status}, label {}, words {} {} {} {} {} {}",
        a.label, a.words[0], a.words[1], a.words[2], a.words[3], a.words[4], a.words[5]
    );
    if data.is_some() {
        println!("data: {}", String::from_utf8_lossy(&a.bytes));
    }
    Ok(())
}

/// Machine `m`'s present life (epoch), as this machine's `machd` knows it.
pub(crate) fn epoch_of(m: u8) -> Result<u32, String> {
    let w = call(mach::OP_MEMBER, [u64::from(m), 0, 0, 0, 0, 0]).map_err(|e| format!("{e}"))?;
    u32::try_from(w[2])
        .ok()
        .filter(|e| *e != 0)
        .ok_or_else(|| format!("machine {m} has not been heard from"))
}

/// The case name `mping M N bench` gives its `BENCH` lines (`cargo xtask bench machines`).
const BENCH_CASE: &str = "cross-machine round trip";

/// `mping M [N] [bench]`: with `bench`, one `BENCH` line per round trip (ns), printed after
/// the last one.
pub(crate) fn mping(args: &[&str]) -> Result<(), String> {
    let bench = args.last() == Some(&"bench");
    let args = if bench { &args[..args.len() - 1] } else { args };
    let (m, n) = match args {
        [m] => (check_machine("mping", machine_arg("mping", m)?)?, 1),
        [m, n] => (
            check_machine("mping", machine_arg("mping", m)?)?,
            n.parse::<u64>()
                .ok()
                .filter(|n| (1..=100_000).contains(n))
                .ok_or("mping: N is a count from 1 to 100000")?,
        ),
        _ => return Err(String::from("mping: usage: mping M [N]")),
    };
    let mut times = Vec::new();
    for _ in 0..n {
        let r = call(mach::OP_PING, [m, 0, 0, 0, 0, 0]).map_err(|e| why("mping", e))?;
        times.push(r[0]);
    }
    if bench {
        for t in &times {
            println!(
                "BENCH {{\"peer\":\"musubi\",\"case\":\"{BENCH_CASE}\",\"unit\":\"ns\",\"per_op\":{t}}}"
            );
        }
    } else if n <= 10 {
        for t in &times {
            println!(
                "m{m}: round trip {}.{:03} ms",
                t / 1_000_000,
                t / 1000 % 1000
            );
        }
    }
    times.sort_unstable();
    let med = times[times.len() / 2];
    println!(
        "mping m{m}: {n} round trips, median {}.{:03} ms, min {}.{:03} ms, max {}.{:03} ms",
        med / 1_000_000,
        med / 1000 % 1000,
        times[0] / 1_000_000,
        times[0] / 1000 % 1000,
        times[n as usize - 1] / 1_000_000,
        times[n as usize - 1] / 1000 % 1000
    );
    Ok(())
}

/// `run PROG [ARGS] -m M [-c C] [&]`: returns the job when started with `&`.
pub(crate) fn run(args: &[&str], typeahead: &mut Vec<u8>) -> Result<Option<RemoteJob>, String> {
    let mut words: Vec<&str> = args.to_vec();
    let background = words.last() == Some(&"&");
    if background {
        words.pop();
    }
    let mut job = start_relayed(&words, false)?;
    if background {
        match call(mach::OP_FOLLOW, job.remote.words(0)) {
            Ok(_) => job.followed = true,
            // Its output then waits in its pipe there until `wait` reads it here.
            Err(e) => println!("run: {}: its output comes at `wait` ({e})", job.spelled()),
        }
        println!("[{}]", job.spelled());
        return Ok(Some(job));
    }
    let mut on = OnCtrlC::kill(typeahead, &[]);
    relay_output_from(&job, false, &mut on)?;
    let status = waited(&job, &mut on)?;
    report(&job, &status).map(|()| None)
}

/// Start `PROG [ARGS] -m M [-c C]` on machine M with its output relayed (written to a pipe
/// there that `OP_OUTPUT` reads) and, with `stdin`, its input from this machine
/// (`OP_INPUT`): the job.
pub(crate) fn start_relayed(args: &[&str], stdin: bool) -> Result<RemoteJob, String> {
    let usage = "run: usage: run PROG [ARGS] -m MACHINE [-c CORE] [&]";
    let RunWords {
        machine,
        core,
        words,
    } = ulib::mach::parse_run(args).map_err(|e| match e {
        RunError::Usage => String::from(usage),
        RunError::Machine(w) => machine_error("run", w),
        RunError::Core(c) => format!("run: bad core '{c}'"),
    })?;
    let m = check_machine("run", machine)?;
    // Its output comes here: in the foreground the shell asks for it, in the background
    // this machine's `machd` does (`OP_FOLLOW`).
    let core = core | mach::SPAWN_RELAY | if stdin { mach::SPAWN_STDIN } else { 0 };
    let prog = words[0];
    // A path, or a name not in that machine's boot archive but on a disk here (or on a
    // machine's: `mK:NAME`), is read here and its image sent there.
    let from_archive = if prog.starts_with('/') {
        Err(Error::NoSuchProgram)
    } else {
        ulib::mach::spawn(m as u8, core, &words)
    };
    let r = match from_archive {
        Err(Error::NoSuchProgram) if prog.starts_with('/') || crate::files::on_disk(prog) => {
            from_disk(m as u8, core, &words)?
        }
        r => r.map_err(|e| match e {
            Error::TooLong => format!(
                "run: '{}' is too long for a remote run (at most 32 bytes of program and \
                 arguments)",
                words.join(" ")
            ),
            e => why(&format!("run {prog} -m {m}"), e),
        })?,
    };
    Ok(RemoteJob {
        remote: r,
        name: String::from(prog),
        followed: false,
        console_there: false,
        drained: false,
    })
}

/// `run /BIN/PROG [ARGS] -m M`: the program read from the disk here and started on
/// machine `m` from its image (`ulib::mach::spawn_image`), shown under its last name.
fn from_disk(m: u8, core: u64, words: &[&str]) -> Result<ulib::mach::Remote, String> {
    let path = words[0];
    let image = crate::files::read_program(path)?;
    let name = path
        .rsplit(['/', ':'])
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or(path);
    let mut named: Vec<&str> = words.to_vec();
    named[0] = name;
    ulib::mach::spawn_image(m, core, &image, &named)
        .map_err(|e| why(&format!("run {path} -m {m} (from the disk)"), e))
}

/// The first program of a pipeline on another machine (`run PROG [ARGS] -m M [-c C] |
/// ...`): its output read here (`ulib::mach::output`) and written into `pipe`, the next
/// program's input, until it ends; then the shell lets go of the pipe's writing end (the
/// reader sees EOF), and waits for the remote program. If the reader ended first (`Gone`),
/// the remote program is killed, as a Unix writer dies of a broken pipe.
/// A Ctrl-C typed meanwhile kills it and the pipeline's programs here (`locals`: one may
/// never read again), and `*typed` says so.
pub(crate) fn pipe_from(
    j: &RemoteJob,
    pipe: ulib::abi::res::ResId,
    locals: &[Pid],
    typeahead: &mut Vec<u8>,
    typed: &mut bool,
) -> Result<(), String> {
    let mut on = OnCtrlC::kill(typeahead, locals);
    let to = ulib::stdio::Stream::Pipe(pipe);
    // Killed at a Ctrl-C, it is pumped no more.
    let mut stop = || {
        interrupted(j, &mut on);
        on.typed
    };
    let pumped = match ulib::mach::output_into(&j.remote, to, Some(&mut stop)) {
        Ok(Copied::All | Copied::Stopped) => Ok(()),
        Ok(Copied::ReaderGone) => {
            let _ = kill(j);
            Ok(())
        }
        Err(e) => {
            // Nobody reads its output any more: it would wait for ever.
            let _ = kill(j);
            Err(why(&format!("run {} (its output)", j.spelled()), e))
        }
    };
    ulib::mach::drop_end(pipe, PIPE_WRITE_END);
    let status = waited(j, &mut on);
    *typed = on.typed;
    pumped?;
    report(j, &status?)
}

/// The last program of a pipeline on another machine (`run ... | PROG [ARGS] -m M [-c
/// C]`): started with its input from here and its output followed to this console; what
/// the local programs write into `pipe` (the shell holds its reading end) is sent into its
/// input (`ulib::mach::input`) until EOF, which ends its input too; then the rest of its
/// output is printed and it is waited for. If it reads no more (`Gone`), the shell lets go
/// of `pipe`, and its writer ends as a Unix writer of a broken pipe does. A Ctrl-C typed
/// meanwhile kills it and the pipeline's programs here (`locals`: one may never write
/// again), and `*typed` says so.
pub(crate) fn pipe_into(
    args: &[&str],
    pipe: ulib::abi::res::ResId,
    locals: &[Pid],
    typeahead: &mut Vec<u8>,
    typed: &mut bool,
) -> Result<(), String> {
    let mut job = match start_relayed(args, true) {
        Ok(j) => j,
        Err(e) => {
            ulib::mach::drop_end(pipe, PIPE_READ_END);
            return Err(e);
        }
    };
    job.followed = call(mach::OP_FOLLOW, job.remote.words(0)).is_ok();
    let mut on = OnCtrlC::kill(typeahead, locals);
    let mut stop = || {
        interrupted(&job, &mut on);
        on.typed
    };
    let fed = ulib::mach::input_from(&job.remote, pipe, Some(&mut stop))
        .map(drop)
        .map_err(|e| {
            // Its input never ends now: it might wait for ever.
            let _ = kill(&job);
            why(&format!("run {} (its input)", job.spelled()), e)
        });
    ulib::mach::drop_end(pipe, PIPE_READ_END);
    let status = drain(&mut job, &mut on).and_then(|_| waited(&job, &mut on));
    *typed = on.typed;
    fed?;
    report(&job, &status?)
}

/// Before waiting for remote job `j`: the rest of its output here, once `machd` stopped
/// following it (if it did, and had not seen the end already). `false`: a Ctrl-C stopped
/// it first ([`OnCtrlC::stop_waiting`]), and `machd` follows the job again.
fn drain(j: &mut RemoteJob, on: &mut OnCtrlC) -> Result<bool, String> {
    if j.console_there || j.drained {
        return Ok(true);
    }
    let who = j.remote.words(0);
    if j.followed {
        match call(mach::OP_UNFOLLOW, who) {
            // `machd` saw the end of its output (then the next look finds nothing there),
            // or it gave up on it (then the next look reads the rest).
            Ok(_) | Err(Error::NoSuchProcess) => {}
            Err(e) => return Err(why(&format!("wait {} (its output)", j.spelled()), e)),
        }
    }
    let ended = relay_output_from(j, j.followed, on)?;
    j.drained = ended;
    if !ended && j.followed {
        // Its output goes on coming in the background, as before the wait.
        if let Err(e) = call(mach::OP_FOLLOW, who) {
            println!(
                "wait: {}: its output comes at the next `wait` ({e})",
                j.spelled()
            );
        }
    }
    Ok(ended)
}

/// Pause between two looks at a remote program's output that found nothing new.
const OUTPUT_POLL_NS: u64 = ulib::mach::POLL_NS;
/// Looks at a remote program's output in a row that may end `TimedOut` before the shell
/// gives up on it: a hang guard.
const OUTPUT_LATE_MAX: u32 = ulib::mach::LATE_MAX;

/// What a Ctrl-C typed while the shell relays a remote job's output does (other bytes
/// typed are kept in the console's typeahead for the next prompt). A review found the shell
/// deaf to Ctrl-C while a remote program ran in the foreground, then in a pipeline and in
/// `wait`.
pub(crate) struct OnCtrlC<'a> {
    typeahead: &'a mut Vec<u8>,
    /// The wait stops and the job runs on (`wait`), rather than the job being killed.
    stop_waiting: bool,
    /// Programs of this machine killed with the job (a pipeline's).
    locals: &'a [Pid],
    /// A Ctrl-C was typed.
    typed: bool,
}

impl<'a> OnCtrlC<'a> {
    /// The job is killed, with `locals`, again at each Ctrl-C (a kill may fail), and the
    /// caller goes on (its output is relayed until it ends): a program in the foreground.
    pub fn kill(typeahead: &'a mut Vec<u8>, locals: &'a [Pid]) -> Self {
        OnCtrlC {
            typeahead,
            stop_waiting: false,
            locals,
            typed: false,
        }
    }

    /// The caller stops waiting and the job runs on: `wait`.
    pub fn stop_waiting(typeahead: &'a mut Vec<u8>) -> Self {
        OnCtrlC {
            typeahead,
            stop_waiting: true,
            locals: &[],
            typed: false,
        }
    }
}

/// A Ctrl-C typed at the console (in `typeahead` or since), other bytes kept there.
fn ctrl_c(typeahead: &mut Vec<u8>) -> bool {
    const CTRL_C: u8 = 0x03;
    let mut input = [0u8; 64];
    let n = sys::read_nonblocking(&mut input).unwrap_or(0);
    typeahead.extend_from_slice(&input[..n]);
    let typed = typeahead.contains(&CTRL_C);
    typeahead.retain(|&b| b != CTRL_C);
    typed
}

/// Have `machd` print remote job `j`'s output on this console as it comes, until it ends
/// (`true`) or a Ctrl-C stops the relay (`false`; see [`OnCtrlC`]). `after_follow`:
/// `machd` followed it until now, and if its last look found the end the output is gone
/// there (`NoSuchProcess`): nothing is left to print.
fn relay_output_from(j: &RemoteJob, after_follow: bool, on: &mut OnCtrlC) -> Result<bool, String> {
    let mut late = 0;
    loop {
        // Killed, it ends there; its last output, then its end, come as before.
        if interrupted(j, on) {
            return Ok(false);
        }
        let r = match call(mach::OP_OUTPUT, j.remote.words(0)) {
            Err(Error::NoSuchProcess) if after_follow => return Ok(true),
            // A slow machine (a loaded host): look again. A dead one is declared down
            // within `DOWN_AFTER_NS`, and then the look ends `Gone`.
            Err(Error::TimedOut) if late < OUTPUT_LATE_MAX => {
                late += 1;
                continue;
            }
            r => r.map_err(|e| {
                let cmd = if after_follow { "wait" } else { "run" };
                why(&format!("{cmd} {} (its output)", j.spelled()), e)
            })?,
        };
        late = 0;
        if r[1] != 0 {
            return Ok(true);
        }
        if r[0] == 0 {
            let _ = sys::sleep_ns(OUTPUT_POLL_NS);
        }
    }
}

/// A Ctrl-C typed since the last look, as `on` says: job `j` is killed and the caller
/// goes on (`false`; it may stop because `on.typed`), or the caller stops waiting (`true`).
fn interrupted(j: &RemoteJob, on: &mut OnCtrlC) -> bool {
    if !ctrl_c(on.typeahead) {
        return false;
    }
    on.typed = true;
    println!("^C");
    if !on.stop_waiting {
        let _ = kill(j);
        for pid in on.locals {
            let _ = sys::kill(*pid);
        }
    }
    on.stop_waiting
}

/// Pause between two looks for a Ctrl-C while a remote job is waited for.
const WAIT_SLICE_NS: u64 = 200_000_000;

/// Wait for remote job `j` to end, in slices of [`WAIT_SLICE_NS`], hearing Ctrl-C between
/// them as `on` says (`None`: the wait stopped, the job runs on).
fn wait_heeding(j: &RemoteJob, on: &mut OnCtrlC) -> Result<Option<WaitStatus>, String> {
    loop {
        match ulib::mach::wait_timeout(&j.remote, WAIT_SLICE_NS) {
            Ok(status) => return Ok(Some(status)),
            Err(Error::TimedOut) => {}
            Err(e) => return Err(why(&format!("wait {}", j.spelled()), e)),
        }
        if interrupted(j, on) {
            return Ok(None);
        }
    }
}

/// Wait for remote job `j` to end, a Ctrl-C killing it (`on` is [`OnCtrlC::kill`]).
fn waited(j: &RemoteJob, on: &mut OnCtrlC) -> Result<WaitStatus, String> {
    wait_heeding(j, on)?.ok_or_else(|| format!("wait {}: stopped", j.spelled()))
}

/// A pid with its machine: `mM.cC.S` (or `mM:C.S`), or `C.S`, machine 0's (a pid names
/// one process of the whole system, issue 17).
pub(crate) fn parse_remote(word: &str) -> Option<(u8, Pid)> {
    ulib::mach::parse_pid(word).or_else(|| Pid::parse(word).map(|p| (p.machine(), p)))
}

/// `migrate PID -m M [-c C]`: move process `pid` of this machine to machine M (on core C,
/// by default M's last), where it goes on from where it stopped (`ulib::mach::migrate`);
/// its new name there, the image's length and how long the move took (ms).
pub(crate) fn migrate_away(pid: Pid, args: &[&str]) -> Result<(Remote, usize, u64), String> {
    let usage = "migrate: usage: migrate PID -m MACHINE [-c CORE]";
    let mut words = alloc::vec!["_"];
    words.extend_from_slice(args);
    let RunWords {
        machine,
        core,
        words,
    } = ulib::mach::parse_run(&words).map_err(|e| match e {
        RunError::Usage => String::from(usage),
        RunError::Machine(w) => machine_error("migrate", w),
        RunError::Core(c) => format!("migrate: bad core '{c}'"),
    })?;
    if words.len() != 1 {
        return Err(usage.into());
    }
    let m = check_machine("migrate", machine)?;
    let me = call(mach::OP_SELF, [0; 6]).map_err(|e| why("migrate", e))?;
    if m == me[0] {
        return Err(format!(
            "migrate: {pid} is on machine {m} already (migrate PID CORE moves it to another core)"
        ));
    }
    let core = (core != mach::ANY_CORE).then_some(core as u32);
    let start = sys::clock_ns().unwrap_or(0);
    let (there, bytes) = ulib::mach::migrate(pid, m as u8, core).map_err(|e| match e {
        Error::NotSupported => format!(
            "migrate {pid} -m {m}: it has shared memory attached (vregions, ICAs) or a \
             request ring, which cannot go to another machine"
        ),
        Error::TimedOut => format!(
            "migrate {pid} -m {m}: machine {m} stopped answering; {pid} stays stopped here, as \
             it may run there (ps -a shows; kill {pid} ends it here)"
        ),
        e => why(&format!("migrate {pid} -m {m}"), e),
    })?;
    let ms = sys::clock_ns().unwrap_or(0).saturating_sub(start) / 1_000_000;
    Ok((there, bytes, ms))
}

/// `kill mM.cC.S` (of a job: its epoch is known).
pub(crate) fn kill(j: &RemoteJob) -> Result<(), String> {
    ulib::mach::kill(&j.remote).map_err(|e| why(&format!("kill {}", j.spelled()), e))
}

/// `ps -a`: this machine's processes, then every other machine's that answers.
pub(crate) fn ps_all() -> Result<(), String> {
    let me = call(mach::OP_SELF, [0; 6]).map_err(|e| why("ps -a", e))?;
    println!("{:<12} {:<9} PROGRAM", "PID", "STATE");
    for m in 0..me[1] {
        let mut i = 0;
        loop {
            let r = if m == me[0] {
                local_entry(i)
            } else {
                call(mach::OP_PS, [m, i, 0, 0, 0, 0])
            };
            let r = match r {
                Ok(r) => r,
                Err(Error::NoSuchProcess) => break,
                Err(e) => {
                    println!("m{m}: {}", why("ps -a", e));
                    break;
                }
            };
            let name: Vec<u8> = r[3..6].iter().flat_map(|w| w.to_le_bytes()).collect();
            let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            println!(
                "{:<12} {:<9} {}",
                ulib::mach::spell_pid(m as u8, Pid(r[0])),
                abi::state_name(r[1] as u32),
                core::str::from_utf8(&name[..len]).unwrap_or("?")
            );
            i += 1;
        }
    }
    Ok(())
}

fn local_entry(i: u64) -> Result<[u64; 6], Error> {
    let procs = crate::processes()?;
    let p = procs.get(i as usize).ok_or(Error::NoSuchProcess)?;
    let mut name = [0u8; 24];
    let n = p.name().len().min(24);
    name[..n].copy_from_slice(&p.name().as_bytes()[..n]);
    let w = |k: usize| u64::from_le_bytes(name[k * 8..k * 8 + 8].try_into().unwrap_or([0; 8]));
    Ok([
        p.pid.0,
        u64::from(p.state),
        procs.len() as u64,
        w(0),
        w(1),
        w(2),
    ])
}

/// `wait mM.cC.S` or `kill mM.cC.S`, of a remote job. A Ctrl-C stops the wait; the job
/// runs on, still a job.
pub(crate) fn wait_or_kill(
    cmd: &str,
    word: &str,
    jobs: &mut Vec<RemoteJob>,
    typeahead: &mut Vec<u8>,
) -> Result<(), String> {
    let (m, pid) = parse_remote(word).ok_or_else(|| format!("{cmd}: bad remote pid '{word}'"))?;
    let i = jobs
        .iter()
        .position(|j| j.remote.machine == m && j.remote.pid == pid)
        .ok_or_else(|| format!("{cmd}: {word} is not a job of this shell (run ... -m M &)"))?;
    if cmd == "kill" {
        return kill(&jobs[i]);
    }
    let mut on = OnCtrlC::stop_waiting(typeahead);
    let status = match drain(&mut jobs[i], &mut on).and_then(|d| match d {
        true => wait_heeding(&jobs[i], &mut on),
        false => Ok(None),
    }) {
        // Stopped at a Ctrl-C: still a job.
        Ok(None) => return Ok(()),
        Ok(Some(status)) => status,
        Err(e) => {
            jobs.remove(i);
            return Err(e);
        }
    };
    let j = jobs.remove(i);
    report(&j, &status)
}

/// Wait for every remote job: `false` if a Ctrl-C stopped the wait (the jobs not reported
/// yet run on, still jobs).
pub(crate) fn wait_all(jobs: &mut Vec<RemoteJob>, typeahead: &mut Vec<u8>) -> Result<bool, String> {
    let mut first_error = None;
    let mut on = OnCtrlC::stop_waiting(typeahead);
    while let Some(j) = jobs.first_mut() {
        let status = drain(j, &mut on).and_then(|d| match d {
            true => wait_heeding(j, &mut on),
            false => Ok(None),
        });
        let status = match status {
            // Stopped at a Ctrl-C: the rest are still jobs.
            Ok(None) => return first_error.map_or(Ok(false), Err),
            Ok(Some(status)) => Ok(status),
            Err(e) => Err(e),
        };
        let j = jobs.remove(0);
        if let Err(e) = status.and_then(|st| report(&j, &st)) {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(true), Err)
}

fn report(j: &RemoteJob, st: &WaitStatus) -> Result<(), String> {
    match crate::failure(st) {
        None => {
            println!("{} ({}) exited with status 0", j.spelled(), j.name);
            Ok(())
        }
        Some(f) if st.how == abi::ENDED_KILLED => {
            println!("{} ({}) {f}", j.spelled(), j.name);
            Ok(())
        }
        Some(f) => Err(format!("{} ({}) {f}", j.name, j.spelled())),
    }
}
