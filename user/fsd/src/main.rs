//! `fsd [bufs=K]`: the file service (issue 16; P0's file-system server), serving `fs` per
//! `abi::fs`. It keeps a FAT volume (8.3 names, the disk's first MBR partition) with the
//! `embedded-sdmmc` crate over [`disk::Disk`], which reads and writes sectors through the K
//! buffer managers `fs.buf0..` (`user/bufd`, default K = 1), which ask the disk driver's
//! `blk`. Found by function id both ways, so either side can be replaced.
//!
//! Simplified against P0's process network (docs/design.md, "Files"): open files are
//! handles of this one server rather than a process each.
//!
//! A volume it cannot read (no disk, no partition, a corrupt FAT) is a clear error on the
//! console at start and a nonzero exit, never a fault.
//!
//! An open file belongs to the process that opened it (the sender the kernel vouches for):
//! another process's handle is `InvalidArgument`. A client that ended without closing
//! (killed, faulted, or `exit` with a file open) would hold its file, and one of the
//! library's 16 open-file slots, for ever, and what it wrote would never reach the file's
//! directory entry (the library writes the size there at close): so the server closes the
//! files of owners that no longer run (flushing what they wrote) when an open finds its
//! file (or every slot, or the user's share of them) taken, or a delete its file open,
//! then tries once more; before a `stat` or a directory listing (which read the entries);
//! and whenever it has waited [`ORPHAN_LOOK_NS`] for a request while files are open, so
//! the disk holds their bytes soon even if nobody asks.
//!
//! The 16 slots are shared out by user (`fsopen::Table::room_for`, `libs/shares`): a user
//! other than the administrator and the kernel holds at most 8, all such users 12
//! (`Limit`); a file `machd` opens for a program of another machine counts as that
//! program's user's (`abi::fs::FS_OPEN`'s `words[1]`).
#![no_std]
#![no_main]

extern crate alloc;

mod disk;
mod mount;
mod state;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use core::fmt::Write;
use embedded_sdmmc::{Mode, RawDirectory, RawFile, RawVolume, TimeSource, Timestamp, VolumeIdx};
use mount::{check_entries, check_fat, names_no_cluster, seal_fat_tail};
use ulib::abi::fs::*;
use ulib::abi::ipc::{Msg, Received};
use ulib::abi::res::{Op, Rights};
use ulib::abi::{Error, Pid};
use ulib::{fnid, ipc, println};

ulib::main!(main);

/// How long the server waits for a request, while files are open, before it looks for
/// files whose owners ended ([`Server::close_orphans`]).
const ORPHAN_LOOK_NS: u64 = 500_000_000;

/// FAT timestamps: Musubi has no wall clock yet, so every file gets 2026-01-01.
struct Clock;

impl TimeSource for Clock {
    fn get_timestamp(&self) -> Timestamp {
        Timestamp {
            year_since_1970: 56,
            zero_indexed_month: 0,
            zero_indexed_day: 0,
            hours: 0,
            minutes: 0,
            seconds: 0,
        }
    }
}

type Volumes = embedded_sdmmc::VolumeManager<disk::Disk, Clock, 8, 16, 1>;
type FsError = embedded_sdmmc::Error<disk::DiskError>;

/// The user an `FS_OPEN` request opens its file for (`abi::fs::FS_OPEN`): the one
/// `words[1]` names if the sender is trusted with that (`machd`, opening files for programs
/// of other machines, names their user), else the sender's.
fn opened_for(r: &Received) -> u32 {
    // A value no user has (a forged one) is no user's: held to the shares as any other.
    let user = |u: u64| u32::try_from(u).unwrap_or(u32::MAX);
    match r.msg.words[1] {
        u if u != 0 && shares::trusted(user(r.sender_user)) => user(u),
        _ => user(r.sender_user),
    }
}

struct Server {
    vm: Volumes,
    vol: RawVolume,
    /// Open files: handle -> (the library's file, the process that opened it, opened to
    /// write).
    files: BTreeMap<u64, (RawFile, Pid, bool)>,
    /// The same files in the state ICA, for a server that takes over (`state.rs`).
    state: fsopen::Table<'static>,
    /// Makes written data durable (the disk's cache flushed).
    flush: disk::Flush,
    /// The volume's FATs, to free what the library's deletes leave ([`Server::free_left`]);
    /// `None` if they could not be read at start.
    fat: Option<Fat>,
    /// Every directory entry was checked at mount ([`check_entries`]); if not, each entry a
    /// path names is checked as the path is followed ([`Server::at_dir`]).
    checked_all: bool,
    /// The name of the volume label's entry in the root, if there is one: no file
    /// ([`Server::at_dir`]).
    label: Option<embedded_sdmmc::ShortFileName>,
}

/// Where the volume starts on the disk and how its FATs lie (`libs/fattail`).
#[derive(Clone, Copy)]
struct Fat {
    lba: u32,
    layout: fattail::Layout,
}

fn main(args: &[&str]) -> i32 {
    let mut managers = 1;
    let mut takeover = false;
    let mut restart = 0;
    for a in &args[1..] {
        let n = |key: &str| a.strip_prefix(key).map(str::parse::<u64>);
        match (n("bufs="), n("restart=")) {
            (Some(Ok(k)), _) if (1..=ulib::abi::buf::MAX_MANAGERS as u64).contains(&k) => {
                managers = k as usize
            }
            (_, Some(Ok(r))) if r <= ulib::abi::fnid::MAX_RESTARTS => restart = r,
            (None, None) if *a == "takeover" => takeover = true,
            _ => {
                println!(
                    "fsd: usage: fsd [bufs=K] [restart=N] [takeover] (K buffer managers fs.buf0.. \
                     serve the sectors, 1 to {}; restarted after a crash at most N times a \
                     minute, 0 to {})",
                    ulib::abi::buf::MAX_MANAGERS,
                    ulib::abi::fnid::MAX_RESTARTS
                );
                return 2;
            }
        }
    }
    // A restart after a crash starts fsd with the same arguments, as a first server.
    let restart = (restart, fnid::restart_args(args, &[]));
    match run(managers, takeover, &restart) {
        Ok(()) => 0,
        Err(e) => {
            println!("fsd: {e}");
            1
        }
    }
}

/// Serve `fs`; `restart` is `restart=N`'s N (0: off) and the arguments a restart gets.
fn run(managers: usize, takeover: bool, restart: &(u64, String)) -> Result<(), String> {
    let me = ulib::sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let rights = Rights(0x0f | Rights::others(Op::Write));
    // A name nobody can guess (`res::open_fresh`), as for the state and the data ICAs:
    // under this server's serial, a program could take the names the next `fsd` would use
    // (a restart, `replace`) and keep it from starting.
    let ep = ulib::res::open_fresh("here/endpoint/fsd", &[], rights)
        .map_err(|e| format!("endpoint: {e}"))?;
    // Taking over: switch first (the old server ends between two requests), and only then
    // read the volume, so that nothing the old server wrote is read stale.
    let table = if takeover {
        Some(state::take_over(ep)?)
    } else {
        None
    };
    let d = disk::Disk::open(managers)?;
    let flush = d.flusher();
    // A boot sector whose parts do not add up is refused here, before the library (which
    // would divide by its cluster size, or walk FATs where none are) reads anything.
    let (n, fat) = seal_fat_tail(&d)
        .map_err(|e| format!("the disk holds no FAT volume this server reads: {e}"))?;
    if n > 0 {
        println!("fsd: {n} FAT entries past the volume's last cluster marked bad");
    }
    check_fat(&d, &fat)?;
    let fat = Some(fat);
    let vm = Volumes::new_with_limits(d, Clock, 0);
    let vol = vm
        .open_raw_volume(VolumeIdx(0))
        .map_err(|e| format!("the disk holds no FAT volume this server reads: {e:?}"))?;
    // Before `fs` is offered: a volume refused leaves no function behind to fail `Gone`.
    let checked_all = check_entries(&vm, vol, &fat)?;
    let label = volume_label(&vm, vol);
    let (table, id, inherited) = match table {
        Some((t, id)) => (t, id, false),
        None => {
            let id = fnid::register(FN_FS, ep).map_err(|e| format!("register {FN_FS}: {e}"))?;
            let (t, inherited) = state::first_or_inherited(id)?;
            (t, id, inherited)
        }
    };
    if restart.0 > 0 {
        fnid::restart(
            id,
            restart.0,
            ulib::abi::fnid::RESTART_WINDOW_MS,
            &restart.1,
        )
        .map_err(|e| format!("FN_RESTART {id}: {e}"))?;
    }
    let mut s = Server {
        vm,
        vol,
        files: BTreeMap::new(),
        state: table,
        flush,
        fat,
        checked_all,
        label,
    };
    let reopened = s.reopen();
    println!(
        "fsd: serving {FN_FS} as {me} (FAT volume through {managers} buffer manager(s) on blk){}",
        if takeover {
            format!(", took it over with {reopened} open files")
        } else if inherited {
            format!(", restarted with {reopened} open files of the server before")
        } else {
            String::new()
        }
    );
    loop {
        let wait = if s.files.is_empty() {
            u64::MAX
        } else {
            ORPHAN_LOOK_NS
        };
        match ipc::recv(ep, wait) {
            Ok(r) => s.request(r),
            Err(Error::TimedOut) => {
                s.close_orphans();
            }
            Err(e) => return Err(format!("recv: {e}")),
        }
    }
}

/// Does `path` end in `.` or `..`? Such a name is a directory's own entry, never one to
/// make: the library would make a file or directory called `.` in the root, which has no
/// such entry.
fn is_dot(path: &str) -> bool {
    matches!(path.rsplit('/').find(|p| !p.is_empty()), Some("." | ".."))
}

/// The name of the volume label's entry in the root directory, if it has one.
fn volume_label(vm: &Volumes, vol: RawVolume) -> Option<embedded_sdmmc::ShortFileName> {
    let dir = vm.open_root_dir(vol).ok()?;
    let mut label = None;
    let _ = vm.iterate_dir(dir, |e| {
        if e.attributes.is_volume() && !e.attributes.is_lfn() {
            label = Some(e.name);
            core::ops::ControlFlow::Break(())
        } else {
            core::ops::ControlFlow::Continue(())
        }
    });
    let _ = vm.close_dir(dir);
    label
}

/// What a library error means to a client.
fn code(e: &FsError) -> Error {
    use embedded_sdmmc::Error as E;
    match e {
        E::NotFound => Error::NoSuchResource,
        E::FilenameError(_) => Error::BadName,
        E::FileAlreadyOpen | E::DirAlreadyOpen | E::DeleteNonEmptyDir => Error::Busy,
        E::NotEnoughSpace | E::DiskFull => Error::NoMemory,
        E::FileAlreadyExists | E::DirAlreadyExists => Error::AlreadyExists,
        E::OpenedDirAsFile | E::OpenedFileAsDir => Error::WrongType,
        E::TooManyOpenFiles | E::TooManyOpenDirs => Error::Busy,
        E::BadHandle | E::InvalidOffset => Error::InvalidArgument,
        E::ReadOnly => Error::Denied,
        E::DeviceError(d) => d.0,
        _ => Error::Unknown,
    }
}

impl Server {
    fn request(&mut self, r: Received) {
        if r.request == 0 {
            // One-way: nothing to answer, an ICA it carried goes back.
            ipc::let_go(&r.msg);
            return;
        }
        let label = ipc::label(&r.msg);
        let Some((region, at)) = ipc::ica_at(&r.msg) else {
            let _ = ipc::reply(r.request, Error::InvalidArgument as u64, &Msg::default());
            return;
        };
        let read_only = ipc::ica_read_only(&r.msg);
        if read_only && matches!(label, FS_READ | FS_READDIR) {
            // Read and listing answers are written into it: refused, given back.
            let _ = ipc::reply(
                r.request,
                Error::InvalidArgument as u64,
                &ipc::with_ica(Msg::default(), region),
            );
            return;
        }
        // SAFETY: the ICA is attached at `at`, FS_ICA_SIZE bytes, ours until the reply; the
        // client lent it read-only unless it is to be written (a read, a listing: checked
        // above), and nothing writes in it while this shared view is used.
        let data = unsafe { core::slice::from_raw_parts(at as *const u8, FS_ICA_SIZE as usize) };
        let w = r.msg.words;
        let name_len = (w[3] as usize).min(FS_ICA_SIZE as usize);
        let name = core::str::from_utf8(&data[..name_len])
            .map(String::from)
            .map_err(|_| Error::BadName);
        // SAFETY: as above, and writable (a read or a listing: not lent read-only); used
        // once `data` no longer is.
        let out =
            || unsafe { core::slice::from_raw_parts_mut(at as *mut u8, FS_ICA_SIZE as usize) };
        let result = match label {
            FS_OPEN => name.and_then(|n| self.open(&n, w[0], r.sender, opened_for(&r))),
            FS_READ => self.read(w[0], w[1], out(), r.sender),
            FS_WRITE => self.write(w[0], w[1], data, r.sender),
            FS_CLOSE => self.close(w[0], r.sender),
            FS_SEEK => self.seek(w[0], w[1], r.sender),
            FS_UNLINK => name.and_then(|n| match self.unlink(&n) {
                // Open (perhaps by a program that has ended, whose files are then closed).
                Err(Error::Busy) if self.close_orphans() > 0 => self.unlink(&n),
                r => r,
            }),
            FS_MKDIR => name
                .and_then(|n| {
                    if is_dot(&n) {
                        Err(Error::BadName)
                    } else {
                        Ok(n)
                    }
                })
                .and_then(|n| {
                    self.at_dir(&n, |vm, dir, last| {
                        vm.make_dir_in_dir(dir, last).map(|()| [0; 6])
                    })
                    .and_then(|w| self.durable(w))
                }),
            // Sizes come from the directory entries: first those of files whose owners
            // ended are brought up to date (closed).
            FS_STAT => name.and_then(|n| {
                self.close_orphans_if_open();
                self.stat(&n)
            }),
            FS_READDIR => name.and_then(|n| {
                self.close_orphans_if_open();
                self.readdir(&n, w[0], out())
            }),
            _ => Err(Error::NotSupported),
        };
        let (value, words) = match result {
            Ok(words) => (0, words),
            Err(e) => (e as u64, [0; 6]),
        };
        let _ = ipc::reply(
            r.request,
            value,
            &ipc::with_ica(Msg { label, words }, region),
        );
    }

    /// Open the directories of `path` down to its last name and run `f` there.
    ///
    /// A `.` or `..` anywhere in the path is `BadName`: a directory's `..` entry names
    /// cluster 0 when its parent is the root, and the library opens that as a directory
    /// at cluster 0, which its arithmetic puts on sectors before the data area (the root
    /// directory's last ones, or the end of the last FAT): `A/../X.TXT` made an invisible
    /// file there, `A/..` deleted A's own `..` entry, and enough of them wrote the FAT. The
    /// volume label's entry is no file either (`Denied`: opened to write, it got a chain).
    fn at_dir<T>(
        &self,
        path: &str,
        f: impl FnOnce(&Volumes, RawDirectory, &str) -> Result<T, FsError>,
    ) -> Result<T, Error> {
        let mut parts: alloc::vec::Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        if parts.iter().any(|p| *p == "." || *p == "..") {
            return Err(Error::BadName);
        }
        let last = parts.pop().ok_or(Error::BadName)?;
        let at_root = parts.is_empty();
        let mut dir = self.vm.open_root_dir(self.vol).map_err(|e| code(&e))?;
        for p in parts {
            let next = self
                .entry_sound(dir, p)
                .and_then(|()| self.vm.open_dir(dir, p).map_err(|e| code(&e)));
            let _ = self.vm.close_dir(dir);
            dir = next?;
        }
        // The label lives in the root (FAT: only there); its name, read at mount, costs
        // no look at the disk here.
        let is_label = at_root
            && self.label.as_ref().is_some_and(|l| {
                embedded_sdmmc::ShortFileName::create_from_str(last).is_ok_and(|n| n == *l)
            });
        let r = if is_label {
            Err(Error::Denied)
        } else {
            self.entry_sound(dir, last)
                .and_then(|()| f(&self.vm, dir, last).map_err(|e| code(&e)))
        };
        let _ = self.vm.close_dir(dir);
        r
    }

    /// Where the mount did not check every entry ([`check_entries`]): refuse the entry of
    /// `name` in `dir` if it names no cluster of the volume (a missing entry is the
    /// caller's to report).
    fn entry_sound(&self, dir: RawDirectory, name: &str) -> Result<(), Error> {
        let Some(fat) = self.fat.as_ref().filter(|_| !self.checked_all) else {
            return Ok(());
        };
        match self.vm.find_directory_entry(dir, name) {
            Ok(e) if names_no_cluster(&e, fat) => {
                println!("fsd: the entry of {name} names no cluster of the volume: refused");
                Err(Error::Unknown)
            }
            _ => Ok(()),
        }
    }

    fn open(&mut self, path: &str, mode: u64, owner: Pid, user: u32) -> Result<[u64; 6], Error> {
        // Refused before anything is opened: an open to write empties the file first, and
        // a path the open-file table cannot keep was refused only after that.
        if path.len() > fsopen::PATH_MAX {
            return Err(Error::TooLong);
        }
        if mode != MODE_READ && is_dot(path) {
            return Err(Error::BadName);
        }
        let mode = match mode {
            MODE_READ => Mode::ReadOnly,
            MODE_WRITE => Mode::ReadWriteCreateOrTruncate,
            MODE_APPEND => Mode::ReadWriteCreateOrAppend,
            _ => return Err(Error::InvalidArgument),
        };
        // Within the user's share of the table (`fsopen::Table::room_for`), counting the
        // files of programs that have ended as free.
        if !self.state.room_for(user) && (self.close_orphans() == 0 || !self.state.room_for(user)) {
            return Err(Error::Limit);
        }
        let open = |s: &Self| s.at_dir(path, |vm, dir, last| vm.open_file_in_dir(dir, last, mode));
        let file = match open(self) {
            // Taken (the file; a full table was refused above): perhaps by a client that
            // has ended.
            Err(Error::Busy) if self.close_orphans() > 0 => open(self)?,
            r => r?,
        };
        let len = self.vm.file_length(file).unwrap_or(0);
        let h = self.state.take_handle();
        let code = match mode {
            Mode::ReadOnly => MODE_READ,
            Mode::ReadWriteCreateOrTruncate => MODE_WRITE,
            _ => MODE_APPEND,
        };
        let pos = self.vm.file_offset(file).unwrap_or(0);
        match fsopen::Open::new(h, owner.0, user, code as u8, pos, path) {
            Some(o) if self.state.put(&o) => {}
            // Not kept for a successor (a path too long for the table): refused.
            _ => {
                let _ = self.vm.close_file(file);
                return Err(Error::TooLong);
            }
        }
        self.files.insert(h, (file, owner, mode != Mode::ReadOnly));
        Ok([h, u64::from(len), 0, 0, 0, 0])
    }

    /// [`Server::close_orphans`], if any file is open.
    fn close_orphans_if_open(&mut self) {
        if !self.files.is_empty() {
            self.close_orphans();
        }
    }

    /// Close the files whose owners no longer run (or are zombies); how many.
    fn close_orphans(&mut self) -> usize {
        // The whole list (`live_pids` asks again with more room while the kernel fills it:
        // a list of 256, as this asked before, was cut short by any user keeping 256
        // processes, and then no orphan was ever found again).
        let Some(live) = ulib::sys::live_pids() else {
            // A truncated list cannot tell who has ended.
            return 0;
        };
        let alive = |pid: Pid| live.contains(&pid);
        let orphans: alloc::vec::Vec<u64> = self
            .files
            .iter()
            .filter(|(_, (_, owner, _))| !alive(*owner))
            .map(|(h, _)| *h)
            .collect();
        for h in &orphans {
            let path = self
                .state
                .iter()
                .find(|o| o.handle == *h)
                .map(|o| String::from(o.path()));
            self.state.remove(*h);
            if let Some((f, owner, wrote)) = self.files.remove(h) {
                let empty = self.vm.file_length(f).is_ok_and(|l| l == 0);
                if self.vm.close_file(f).is_ok() && wrote {
                    if let (true, Some(p)) = (empty, &path) {
                        let _ = self.no_empty_chain(p);
                    }
                    let _ = self.flush.now();
                }
                println!("fsd: closed a file of {owner}, which ended without closing it");
            }
        }
        orphans.len()
    }

    /// The file of handle `h`, if `who` opened it.
    fn file(&self, h: u64, who: Pid) -> Result<RawFile, Error> {
        match self.files.get(&h) {
            Some((f, owner, _)) if *owner == who => Ok(*f),
            _ => Err(Error::InvalidArgument),
        }
    }

    /// Keep handle `h`'s position in the state ICA.
    fn keep_position(&mut self, h: u64, f: RawFile) {
        if let Ok(pos) = self.vm.file_offset(f) {
            self.state.set_position(h, pos);
        }
    }

    fn read(&mut self, h: u64, len: u64, buf: &mut [u8], who: Pid) -> Result<[u64; 6], Error> {
        let f = self.file(h, who)?;
        if len > FS_ICA_SIZE {
            return Err(Error::TooLong);
        }
        let mut done = 0;
        // The library reads at most to a cluster's end per call: go on to `len` or the end.
        while done < len as usize && !self.vm.file_eof(f).map_err(|e| code(&e))? {
            let n = self
                .vm
                .read(f, &mut buf[done..len as usize])
                .map_err(|e| code(&e))?;
            if n == 0 {
                break;
            }
            done += n;
        }
        self.keep_position(h, f);
        Ok([done as u64, 0, 0, 0, 0, 0])
    }

    /// Write at the position. The directory entry is written after every write (not only at
    /// close): a server that takes over reopens the file by its entry, and must find all
    /// of it.
    fn write(&mut self, h: u64, len: u64, buf: &[u8], who: Pid) -> Result<[u64; 6], Error> {
        let f = self.file(h, who)?;
        if len > FS_ICA_SIZE {
            return Err(Error::TooLong);
        }
        let r = self.vm.write(f, &buf[..len as usize]).map_err(|e| code(&e));
        // Also after a failed write, which may have placed part of its bytes.
        let entry = self.vm.flush_file(f).map_err(|e| code(&e));
        self.keep_position(h, f);
        r.and(entry)?;
        // Written whole or failed: the answer carries no data (P0 Table 4).
        Ok([0; 6])
    }

    fn seek(&mut self, h: u64, pos: u64, who: Pid) -> Result<[u64; 6], Error> {
        let f = self.file(h, who)?;
        let pos = u32::try_from(pos).map_err(|_| Error::InvalidArgument)?;
        self.vm.file_seek_from_start(f, pos).map_err(|e| code(&e))?;
        self.state.set_position(h, pos);
        Ok([0; 6])
    }

    /// Close a file; one opened to write is durable when the reply goes (the library wrote
    /// its data, FAT and directory entry; the flush empties the disk's cache).
    fn close(&mut self, h: u64, who: Pid) -> Result<[u64; 6], Error> {
        let f = self.file(h, who)?;
        let wrote = self.files.remove(&h).is_some_and(|(_, _, w)| w);
        let path = self
            .state
            .iter()
            .find(|o| o.handle == h)
            .map(|o| String::from(o.path()));
        self.state.remove(h);
        let empty = self.vm.file_length(f).is_ok_and(|l| l == 0);
        self.vm.close_file(f).map_err(|e| code(&e))?;
        if let (true, true, Some(p)) = (wrote, empty, path) {
            self.no_empty_chain(&p)?;
        }
        if wrote {
            self.durable([0; 6])
        } else {
            Ok([0; 6])
        }
    }

    /// A file emptied by an open to write and closed empty keeps its first cluster in the
    /// library (its entry says 0 bytes, its chain one cluster: `fsck.fat` calls that an
    /// error). Such a file is made again without a cluster: the entry deleted (its cluster
    /// freed, [`Server::free_left`]) and made anew.
    fn no_empty_chain(&self, path: &str) -> Result<(), Error> {
        let e = self.at_dir(path, |vm, dir, last| vm.find_directory_entry(dir, last))?;
        if e.cluster == embedded_sdmmc::ClusterId::EMPTY {
            return Ok(());
        }
        self.at_dir(path, |vm, dir, last| vm.delete_entry_in_dir(dir, last))?;
        self.free_left(e.cluster);
        let f = self.at_dir(path, |vm, dir, last| {
            vm.open_file_in_dir(dir, last, Mode::ReadWriteCreate)
        })?;
        self.vm.close_file(f).map_err(|e| code(&e))
    }

    /// Delete a file or an empty directory. `embedded-sdmmc` 0.10 deletes a directory
    /// entry without freeing the file's clusters, so a file is emptied first (a truncate
    /// frees every cluster but the first), and what is left (a file's first cluster, or an
    /// empty directory's whole chain) is freed after the delete ([`Server::free_left`]).
    fn unlink(&self, path: &str) -> Result<[u64; 6], Error> {
        let cluster = self
            .at_dir(path, |vm, dir, last| vm.find_directory_entry(dir, last))
            .map(|e| e.cluster);
        let emptied = self.at_dir(path, |vm, dir, last| {
            vm.open_file_in_dir(dir, last, Mode::ReadWriteTruncate)
        });
        // Not emptied (a directory, a file missing or open): the delete says which.
        if let Ok(f) = emptied {
            let _ = self.vm.close_file(f);
        }
        self.at_dir(path, |vm, dir, last| vm.delete_entry_in_dir(dir, last))?;
        if let Ok(c) = cluster {
            self.free_left(c);
        }
        self.durable([0; 6])
    }

    /// Free the chain from `cluster`, what a delete left allocated, in every FAT copy
    /// (`libs/fattail`). Written past the library, which is safe here: its
    /// one-block cache holds the directory sector the delete wrote last, not a FAT sector,
    /// and it keeps no count of free clusters for FAT16 (for FAT32 its free-cluster hint
    /// is one too low afterwards, which the FAT specification allows).
    fn free_left(&self, cluster: embedded_sdmmc::ClusterId) {
        use embedded_sdmmc::{Block, BlockDevice, BlockIdx, ClusterId};
        let Some(fat) = self.fat else {
            return;
        };
        if cluster == ClusterId::EMPTY || cluster == ClusterId::ROOT_DIR {
            return;
        }
        let first = fattail::bisect(|n| ClusterId::EMPTY + n <= cluster);
        let l = &fat.layout;
        self.vm.device(|d| {
            // The whole chain, in every FAT copy: a deleted directory may have grown past
            // one cluster (a file was emptied to one before its delete). Bounded by the
            // volume's clusters, whatever the FAT says.
            let mut c = first;
            for _ in 0..l.clusters {
                let mut next = None;
                for (i, (sector, offset)) in l.entry_sectors(c).enumerate() {
                    let at = BlockIdx(fat.lba + sector);
                    let mut b = [Block::new()];
                    if d.read(&mut b, at).is_err() {
                        return;
                    }
                    let held = fattail::free_entry(l, &mut b[0].contents, offset);
                    if held.is_some() {
                        let _ = d.write(&b, at);
                    }
                    if i == 0 {
                        next = held.and_then(|raw| l.link(raw));
                    }
                }
                match next {
                    Some(Ok(n)) => c = n,
                    _ => return,
                }
            }
        });
    }

    /// `words`, once what was written is durable (an error of the flush otherwise).
    fn durable(&self, words: [u64; 6]) -> Result<[u64; 6], Error> {
        self.flush.now().map(|()| words)
    }

    fn stat(&self, path: &str) -> Result<[u64; 6], Error> {
        if path.split('/').all(|p| p.is_empty()) {
            return Ok([0, 1, 0, 0, 0, 0]);
        }
        let e = self.at_dir(path, |vm, dir, last| vm.find_directory_entry(dir, last))?;
        Ok([
            u64::from(e.size),
            u64::from(e.attributes.is_directory()),
            0,
            0,
            0,
            0,
        ])
    }

    fn readdir(&self, path: &str, from: u64, buf: &mut [u8]) -> Result<[u64; 6], Error> {
        let mut text = String::new();
        let (mut index, mut count, mut more) = (0u64, 0u64, false);
        let mut each = |e: &embedded_sdmmc::DirEntry| {
            if e.attributes.is_volume() || e.name.base_name() == b"." || e.name.base_name() == b".."
            {
                return core::ops::ControlFlow::Continue(());
            }
            index += 1;
            if index <= from {
                return core::ops::ControlFlow::Continue(());
            }
            let mut line = String::new();
            let dir = e.attributes.is_directory();
            let _ = writeln!(line, "{}{} {}", e.name, if dir { "/" } else { "" }, e.size);
            if text.len() + line.len() > FS_ICA_SIZE as usize {
                more = true;
                return core::ops::ControlFlow::Break(());
            }
            text.push_str(&line);
            count += 1;
            core::ops::ControlFlow::Continue(())
        };
        if path.split('/').all(|p| p.is_empty()) {
            let dir = self.vm.open_root_dir(self.vol).map_err(|e| code(&e))?;
            let r = self.vm.iterate_dir(dir, &mut each).map_err(|e| code(&e));
            let _ = self.vm.close_dir(dir);
            r?;
        } else {
            let dir = self.at_dir(path, |vm, dir, last| vm.open_dir(dir, last))?;
            let r = self.vm.iterate_dir(dir, &mut each).map_err(|e| code(&e));
            let _ = self.vm.close_dir(dir);
            r?;
        }
        buf[..text.len()].copy_from_slice(text.as_bytes());
        Ok([text.len() as u64, count, u64::from(more), 0, 0, 0])
    }
}
