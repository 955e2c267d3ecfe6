//! The shell's file commands (issue 16): `ls`, `cat`, `write`, `cp`, `rm`, `mkdir` on the
//! disk, through `ulib::fs` (the file service `fs`, which the kernel starts with the disk
//! driver and the buffer managers when a disk is attached: `user/boot.cfg`). A command
//! given while that service is still starting waits for it (`await_service`).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::Error;
use ulib::fs;
use ulib::println;

/// How long a file command waits for a file service that is starting.
const START_WAIT_NS: u64 = 10_000_000_000;

/// The largest file `cat` prints (it holds it whole).
const CAT_MAX: usize = 1 << 20;
/// The largest shell script `source` runs.
const SCRIPT_MAX: usize = 256 << 10;

/// Wait while the file service is starting (`ulib::fs::await_service`).
fn await_service() {
    fs::await_service(START_WAIT_NS);
}

/// The error line of `what` failing with `e` for the file `name`; says so when the file
/// service is not there (this machine's, or that of the machine `name` names: `mK:`).
fn fail(name: &str, what: &str, e: Error) -> String {
    if let Some(m) = fs::machine_named(name) {
        if ulib::fnid::lookup(ulib::abi::mach::FN_MACH).is_err() {
            return format!("{what}: m{m}: names another machine, and there is no machd here");
        }
        let text = match e {
            Error::NotSupported => format!("machine {m} has no file service (no disk there)"),
            Error::InvalidArgument => format!("no machine {m} (or a bad request)"),
            Error::Gone => format!("machine {m} is down"),
            Error::StaleResource => format!("machine {m} restarted since the file was opened"),
            Error::TimedOut => format!("machine {m} did not answer in time"),
            _ => return fail_text(what, e),
        };
        return format!("{what}: {text}");
    }
    if ulib::fnid::lookup(ulib::abi::fs::FN_FS).is_err() {
        return format!(
            "{what}: the file service fs is not running (no disk, or fsd could not read it: \
             see its console line)"
        );
    }
    fail_text(what, e)
}

/// The error line of `what` failing with `e` from a file service.
fn fail_text(what: &str, e: Error) -> String {
    let text = match e {
        Error::NoSuchResource => "no such file or directory",
        Error::AlreadyExists => "exists already",
        Error::BadName => "not a FAT 8.3 name (NAME.EXT, up to 8 and 3 characters)",
        Error::NoMemory => "the disk is full",
        Error::Busy => "in use (open, or a directory not empty)",
        Error::WrongType => "a directory where a file was meant, or the other way round",
        _ => return format!("{what}: {e}"),
    };
    format!("{what}: {text}")
}

/// Is there a file `name` on the disk (not a directory)?
pub fn on_disk(name: &str) -> bool {
    await_service();
    fs::stat(name).is_ok_and(|s| !s.dir)
}

/// `run PATH ARGS [-c CORE]`: read the program at PATH from the disk and start it
/// (`SPAWN_IMAGE`) on the shell's core or on CORE, shown under its last name.
pub fn spawn(
    path: &str,
    args: &[&str],
    priority: ulib::abi::Priority,
    core: Option<usize>,
) -> Result<ulib::abi::Pid, String> {
    let image = read_program(path)?;
    ulib::sys::spawn_image(&image, program_name(path), args, priority, core)
        .map_err(|e| spawn_failed(e, path, core))
}

/// A pipeline's stage from the disk: [`spawn`] with standard input and output.
pub fn spawn_stage(
    path: &str,
    args: &[&str],
    priority: ulib::abi::Priority,
    core: Option<usize>,
    streams: (ulib::stdio::Stream, ulib::stdio::Stream),
) -> Result<ulib::abi::Pid, String> {
    let image = read_program(path)?;
    let (input, output) = streams;
    ulib::stdio::spawn_image(
        &image,
        program_name(path),
        args,
        priority,
        core,
        input,
        output,
    )
    .map_err(|e| spawn_failed(e, path, core))
}

/// The bytes of the program at `path` on the disk.
pub(crate) fn read_program(path: &str) -> Result<Vec<u8>, String> {
    fs::read_at_most(path, ulib::abi::syscall::MAX_IMAGE as usize)
        .map_err(|e| fail(path, &format!("run {path}"), e))
}

/// The name a program from the disk is shown under: its path's last name.
fn program_name(path: &str) -> &str {
    path.rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or(path)
}

fn spawn_failed(e: ulib::abi::Error, path: &str, core: Option<usize>) -> String {
    match core {
        None => format!("run: {e}: {path} (from the disk)"),
        Some(c) => format!("run: {e}: {path} (from the disk) on core {c}"),
    }
}

/// The text of file `name`, for `source`.
pub fn read_text(name: &str) -> Result<String, String> {
    await_service();
    let data =
        fs::read_at_most(name, SCRIPT_MAX).map_err(|e| fail(name, &format!("source {name}"), e))?;
    String::from_utf8(data).map_err(|_| format!("source {name}: not a text file"))
}

/// `ls [DIR]`: name, size (`/` after a directory's name).
pub fn ls(args: &[&str]) -> Result<(), String> {
    await_service();
    let dir = match args {
        [] => "",
        [d] => d,
        _ => return Err("ls: usage: ls [DIR]".into()),
    };
    let entries = fs::readdir(dir).map_err(|e| {
        fail(
            dir,
            &format!("ls {}", if dir.is_empty() { "/" } else { dir }),
            e,
        )
    })?;
    for e in &entries {
        if e.dir {
            println!("{:<13} {:>9}", format!("{}/", e.name), "-");
        } else {
            println!("{:<13} {:>9}", e.name, e.size);
        }
    }
    println!("{} entries", entries.len());
    Ok(())
}

/// `cat FILE`: its bytes as text.
pub fn cat(args: &[&str]) -> Result<(), String> {
    await_service();
    let [name] = args else {
        return Err("cat: usage: cat FILE".into());
    };
    // A file larger than the shell should hold is refused (a review found the shell died
    // of a file larger than its memory); `cp` copies any size, a piece at a time.
    let data =
        fs::read_at_most(name, CAT_MAX).map_err(|e| fail(name, &format!("cat {name}"), e))?;
    let text = String::from_utf8_lossy(&data);
    ulib::print!("{text}");
    if !text.is_empty() && !text.ends_with('\n') {
        println!();
    }
    Ok(())
}

/// `write FILE TEXT...`: FILE holds TEXT (the words joined by spaces) and a newline.
pub fn write(args: &[&str]) -> Result<(), String> {
    await_service();
    let Some((name, words)) = args.split_first().filter(|(_, w)| !w.is_empty()) else {
        return Err("write: usage: write FILE TEXT".into());
    };
    let mut text = words.join(" ");
    text.push('\n');
    fs::write_all(name, text.as_bytes()).map_err(|e| fail(name, &format!("write {name}"), e))
}

/// `cp FROM TO`.
pub fn cp(args: &[&str]) -> Result<(), String> {
    await_service();
    let [from, to] = args else {
        return Err("cp: usage: cp FROM TO".into());
    };
    if from == to {
        return Err(format!("cp: {from} and {to} are the same file"));
    }
    copy(from, to)
}

/// `cp`'s copy, a piece at a time, so that no file is ever whole in the shell's memory.
fn copy(from: &str, to: &str) -> Result<(), String> {
    let src = fs::open(from, fs::MODE_READ).map_err(|e| fail(from, &format!("cp {from}"), e))?;
    let dst = match fs::open(to, fs::MODE_WRITE) {
        Ok(d) => d,
        Err(e) => {
            let _ = fs::close(src);
            return Err(fail(to, &format!("cp {to}"), e));
        }
    };
    let mut buf = alloc::vec![0u8; ulib::abi::fs::FS_ICA_SIZE as usize];
    let r = loop {
        let n = match fs::read(src, &mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) => break Err(fail(from, &format!("cp {from}"), e)),
        };
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            let wrote = match fs::write(dst, rest) {
                Ok(0) => Err(format!("cp {to}: nothing written")),
                Ok(w) => Ok(w),
                Err(e) => Err(fail(to, &format!("cp {to}"), e)),
            };
            match wrote {
                Ok(w) => rest = &rest[w.min(rest.len())..],
                Err(e) => {
                    let _ = fs::close(src);
                    let _ = fs::close(dst);
                    return Err(e);
                }
            }
        }
    };
    let _ = fs::close(src);
    let closed = fs::close(dst).map_err(|e| fail(to, &format!("cp {to}"), e));
    r.and(closed)
}

/// `rm NAME`: a file or an empty directory.
pub fn rm(args: &[&str]) -> Result<(), String> {
    await_service();
    let [name] = args else {
        return Err("rm: usage: rm NAME".into());
    };
    fs::unlink(name).map_err(|e| fail(name, &format!("rm {name}"), e))
}

/// `mkdir DIR`.
pub fn mkdir(args: &[&str]) -> Result<(), String> {
    await_service();
    let [name] = args else {
        return Err("mkdir: usage: mkdir DIR".into());
    };
    fs::mkdir(name).map_err(|e| fail(name, &format!("mkdir {name}"), e))
}
