//! A model of the file service (`abi::fs`, served by `user/fsd` over FAT with
//! `embedded-sdmmc`) and a seeded random workload of file operations (issue 16's target: no
//! data lost or corrupted across 1,000 random file operations checked against a model).
//!
//! Why a model of its own: the guest program `user/fsfuzz` applies each [`Op`] to the real
//! service and compares what comes back with [`Model::apply`]'s [`Expect`]; after power-off
//! xtask replays the same seed here on the host and compares every file of the image (read
//! with mtools) with [`Model::files`], and `fsck.fat` finds no lost cluster (`fsd` frees
//! what the library's deletes leave). One pure model serves both sides, so they cannot
//! drift apart.
//!
//! The model says what the service does, mistakes included: a file open twice or an open
//! file deleted is `Busy`, a handle the program does not hold is `Invalid`, a name FAT's 8.3
//! form cannot hold is `BadName`. `fsd` writes a file's directory entry after every write
//! (so that a server taking over finds it whole), so `stat` of a file being written shows
//! its size so far.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use xorshift::Rng;

/// Handles a workload holds at once (the service's library has 16 slots for everyone).
pub const SLOTS: usize = 4;
/// Largest write or read of one operation (below the service's 4,096-byte ICA).
pub const MAX_IO: u64 = 3000;
/// Directories a workload makes and deletes (`D0/E0` inside `D0`).
pub const DIRS: [&str; 3] = ["D0", "D1", "D0/E0"];
/// Names that FAT's 8.3 form cannot hold (base above 8, extension above 3, a bad character).
pub const BAD_NAMES: [&str; 3] = ["TOOLONGNAME.DAT", "F0.LONGX", "F*.DAT"];

/// How a file is opened (`abi::fs::MODE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Read from the start.
    Read,
    /// Made if missing, emptied if not.
    Write,
    /// Made if missing, written at its end.
    Append,
}

/// One file operation; a slot is the program's handle table index (an empty slot stands
/// for a handle the program does not hold: never issued, or closed already).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Open {
        path: String,
        mode: Mode,
        slot: usize,
    },
    Read {
        slot: usize,
        len: u64,
    },
    /// `len` bytes of [`data`]`(fill, len)`.
    Write {
        slot: usize,
        len: u64,
        fill: u64,
    },
    Seek {
        slot: usize,
        pos: u64,
    },
    Close {
        slot: usize,
    },
    Unlink {
        path: String,
    },
    Mkdir {
        path: String,
    },
    Stat {
        path: String,
    },
    Readdir {
        path: String,
    },
}

/// Why an operation fails (each maps to one `abi::Error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fail {
    /// `NoSuchResource`.
    NotFound,
    /// `AlreadyExists`.
    Exists,
    /// `BadName`.
    BadName,
    /// `Busy`: open already, or a directory not empty.
    Busy,
    /// `InvalidArgument`: a handle not held, a seek past the end.
    Invalid,
    /// `WrongType`: a directory opened as a file, a file listed as a directory.
    WrongType,
    /// `Denied`: a write to a file opened for reading.
    ReadOnly,
}

/// One directory entry as `readdir` shows it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    pub name: String,
    pub size: u64,
    pub dir: bool,
}

/// What an operation must give.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Done, nothing to compare.
    Done,
    /// Opened; the file's length.
    Opened {
        len: u64,
    },
    /// Exactly these bytes read.
    Data(Vec<u8>),
    /// `stat`'s answer.
    Stat {
        size: u64,
        dir: bool,
    },
    /// `readdir`'s answer, sorted by name (the disk's order is its own).
    Entries(Vec<Entry>),
    Fail(Fail),
}

/// The bytes a write of `len` with `fill` carries (the same on both sides).
pub fn data(fill: u64, len: u64) -> Vec<u8> {
    let mut rng = Rng(fill | 1);
    (0..len).map(|_| (rng.next_u64() >> 32) as u8).collect()
}

#[derive(Clone, Debug)]
struct File {
    data: Vec<u8>,
    /// The size in the directory entry (written at create, truncate and every write).
    entry: u64,
}

#[derive(Clone, Debug)]
struct Handle {
    path: String,
    pos: usize,
    mode: Mode,
}

/// The file tree as the service must hold it.
#[derive(Clone, Debug, Default)]
pub struct Model {
    dirs: BTreeSet<String>,
    files: BTreeMap<String, File>,
    slots: [Option<Handle>; SLOTS],
    syncs: u64,
}

/// The parent of `path` (`""` for the root) and its last name.
fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

/// Whether FAT's 8.3 form holds `name` (the rules of embedded-sdmmc's `ShortFileName`).
pub fn short_name_ok(name: &str) -> bool {
    let (base, ext) = name.split_once('.').unwrap_or((name, ""));
    !base.is_empty()
        && base.len() <= 8
        && ext.len() <= 3
        && !ext.contains('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-~!#$%&'(){}^@`".contains(c) || c == '.')
}

impl Model {
    /// An empty volume.
    pub fn new() -> Self {
        Self {
            dirs: BTreeSet::new(),
            files: BTreeMap::new(),
            slots: Default::default(),
            syncs: 0,
        }
    }

    /// Every file and its bytes, by path.
    pub fn files(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.files
            .iter()
            .map(|(p, f)| (p.as_str(), f.data.as_slice()))
    }

    /// Every directory, by path.
    pub fn dirs(&self) -> impl Iterator<Item = &str> {
        self.dirs.iter().map(String::as_str)
    }

    /// Slots holding a handle.
    pub fn open_slots(&self) -> impl Iterator<Item = usize> + '_ {
        (0..SLOTS).filter(|&s| self.slots[s].is_some())
    }

    /// Operations after which the service makes the disk durable (a `BLK_FLUSH`): every
    /// close of a file opened to write, every directory change (mkdir, unlink) that succeeded.
    pub fn syncs(&self) -> u64 {
        self.syncs
    }

    fn is_open(&self, path: &str) -> bool {
        self.slots.iter().flatten().any(|h| h.path == path)
    }

    /// The service walks `path`'s directories one by one: a missing one is `NotFound`, a
    /// file on the way `WrongType` (a file may well be named like a directory: `D0`).
    fn parent_ok(&self, path: &str) -> Result<(), Fail> {
        let (parent, _) = split(path);
        let mut at = 0;
        while at < parent.len() {
            let end = parent[at..].find('/').map_or(parent.len(), |i| at + i);
            let prefix = &parent[..end];
            if self.files.contains_key(prefix) {
                return Err(Fail::WrongType);
            }
            if !self.dirs.contains(prefix) {
                return Err(Fail::NotFound);
            }
            at = end + 1;
        }
        Ok(())
    }

    /// Where `path` must be found: parent present, name legal.
    fn lookup(&self, path: &str) -> Result<(), Fail> {
        self.parent_ok(path)?;
        if short_name_ok(split(path).1) {
            Ok(())
        } else {
            Err(Fail::BadName)
        }
    }

    /// Apply `op` and say what the service must answer.
    pub fn apply(&mut self, op: &Op) -> Expect {
        match self.step(op) {
            Ok(e) => e,
            Err(f) => Expect::Fail(f),
        }
    }

    fn handle(&mut self, slot: usize) -> Result<&mut Handle, Fail> {
        self.slots
            .get_mut(slot)
            .and_then(Option::as_mut)
            .ok_or(Fail::Invalid)
    }

    fn step(&mut self, op: &Op) -> Result<Expect, Fail> {
        match op {
            Op::Open { path, mode, slot } => {
                self.lookup(path)?;
                if self.dirs.contains(path) {
                    return Err(Fail::WrongType);
                }
                let exists = self.files.contains_key(path);
                if exists && self.is_open(path) {
                    return Err(Fail::Busy);
                }
                match (mode, exists) {
                    (Mode::Read, false) => return Err(Fail::NotFound),
                    (_, false) => {
                        let f = File {
                            data: Vec::new(),
                            entry: 0,
                        };
                        self.files.insert(path.clone(), f);
                    }
                    (Mode::Write, true) => {
                        let f = self.files.get_mut(path).ok_or(Fail::NotFound)?;
                        f.data.clear();
                        f.entry = 0;
                    }
                    _ => {}
                }
                let len = self.files[path].data.len();
                self.slots[*slot] = Some(Handle {
                    path: path.clone(),
                    pos: if *mode == Mode::Append { len } else { 0 },
                    mode: *mode,
                });
                Ok(Expect::Opened { len: len as u64 })
            }
            Op::Read { slot, len } => {
                let h = self.handle(*slot)?.clone();
                let d = &self.files[&h.path].data;
                let end = (h.pos + *len as usize).min(d.len());
                let out = d[h.pos..end].to_vec();
                self.handle(*slot)?.pos = end;
                Ok(Expect::Data(out))
            }
            Op::Write { slot, len, fill } => {
                let h = self.handle(*slot)?.clone();
                if h.mode == Mode::Read {
                    return Err(Fail::ReadOnly);
                }
                let bytes = data(*fill, *len);
                let f = self.files.get_mut(&h.path).ok_or(Fail::NotFound)?;
                let end = h.pos + bytes.len();
                if f.data.len() < end {
                    f.data.resize(end, 0);
                }
                f.data[h.pos..end].copy_from_slice(&bytes);
                f.entry = f.data.len() as u64;
                let h = self.handle(*slot)?;
                h.pos = end;
                Ok(Expect::Done)
            }
            Op::Seek { slot, pos } => {
                let path = self.handle(*slot)?.path.clone();
                if *pos as usize > self.files[&path].data.len() {
                    return Err(Fail::Invalid);
                }
                self.handle(*slot)?.pos = *pos as usize;
                Ok(Expect::Done)
            }
            Op::Close { slot } => {
                let h = self.handle(*slot)?.clone();
                self.slots[*slot] = None;
                if h.mode != Mode::Read {
                    self.syncs += 1;
                }
                Ok(Expect::Done)
            }
            Op::Unlink { path } => {
                self.lookup(path)?;
                if self.dirs.contains(path) {
                    let inside = format!("{path}/");
                    let full = self.dirs.iter().any(|d| d.starts_with(&inside))
                        || self.files.keys().any(|f| f.starts_with(&inside));
                    if full {
                        return Err(Fail::Busy);
                    }
                    self.dirs.remove(path);
                    self.syncs += 1;
                    return Ok(Expect::Done);
                }
                if !self.files.contains_key(path) {
                    return Err(Fail::NotFound);
                }
                if self.is_open(path) {
                    return Err(Fail::Busy);
                }
                self.files.remove(path).ok_or(Fail::NotFound)?;
                self.syncs += 1;
                Ok(Expect::Done)
            }
            Op::Mkdir { path } => {
                self.lookup(path)?;
                if self.dirs.contains(path) || self.files.contains_key(path) {
                    return Err(Fail::Exists);
                }
                self.dirs.insert(path.clone());
                self.syncs += 1;
                Ok(Expect::Done)
            }
            Op::Stat { path } => {
                self.lookup(path)?;
                if self.dirs.contains(path) {
                    return Ok(Expect::Stat { size: 0, dir: true });
                }
                let f = self.files.get(path).ok_or(Fail::NotFound)?;
                Ok(Expect::Stat {
                    size: f.entry,
                    dir: false,
                })
            }
            Op::Readdir { path } => {
                if !path.is_empty() {
                    self.lookup(path)?;
                    if self.files.contains_key(path) {
                        return Err(Fail::WrongType);
                    }
                    if !self.dirs.contains(path) {
                        return Err(Fail::NotFound);
                    }
                }
                let under = |p: &str| split(p).0 == path.as_str();
                let mut out: Vec<Entry> = self
                    .dirs
                    .iter()
                    .filter(|d| under(d))
                    .map(|d| Entry {
                        name: split(d).1.into(),
                        size: 0,
                        dir: true,
                    })
                    .chain(
                        self.files
                            .iter()
                            .filter(|(p, _)| under(p))
                            .map(|(p, f)| Entry {
                                name: split(p).1.into(),
                                size: f.entry,
                                dir: false,
                            }),
                    )
                    .collect();
                out.sort();
                Ok(Expect::Entries(out))
            }
        }
    }
}

/// A seeded random workload: [`Workload::next`] picks an operation that fits the model's
/// state most of the time (a file that exists, a handle held) and a mistake the rest.
pub struct Workload {
    rng: Rng,
    fill: u64,
}

impl Workload {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            fill: seed,
        }
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.rng.below(from.len() as u64) as usize]
    }

    /// A file path: one of 6 names in the root or one of the directories.
    fn file_path(&mut self) -> String {
        let name = format!("F{}.DAT", self.rng.below(6));
        match self.rng.below(4) {
            0 | 1 => name,
            _ => format!("{}/{name}", self.pick(&DIRS)),
        }
    }

    /// A slot: a held one nine times in ten (when there is one).
    fn slot(&mut self, m: &Model) -> usize {
        let held: Vec<usize> = m.open_slots().collect();
        if !held.is_empty() && !self.rng.chance(10) {
            held[self.rng.below(held.len() as u64) as usize]
        } else {
            self.rng.below(SLOTS as u64) as usize
        }
    }

    /// An open into a free slot (a close when every slot is held). A directory's name is
    /// opened for reading only (a mistake: `WrongType`, or `NotFound` while it is missing),
    /// so that the workload seldom makes files where its directories go.
    fn open(&mut self, m: &Model) -> Op {
        let Some(slot) = (0..SLOTS).find(|s| m.slots[*s].is_none()) else {
            return Op::Close { slot: self.slot(m) };
        };
        if self.rng.chance(15) {
            let path = self.pick(&DIRS).into();
            return Op::Open {
                path,
                mode: Mode::Read,
                slot,
            };
        }
        let mode = match self.rng.below(3) {
            0 => Mode::Read,
            1 => Mode::Write,
            _ => Mode::Append,
        };
        Op::Open {
            path: self.file_path(),
            mode,
            slot,
        }
    }

    /// The next operation for a program whose files are as `m` says.
    pub fn next(&mut self, m: &Model) -> Op {
        let r = self.rng.below(100);
        // An operation on a handle while none is held: mostly an open instead (the rest
        // stay, as mistakes: a handle the program does not hold).
        if (18..72).contains(&r) && m.open_slots().next().is_none() && !self.rng.chance(8) {
            return self.open(m);
        }
        match r {
            0..=17 => self.open(m),
            18..=39 => {
                self.fill += 1;
                Op::Write {
                    slot: self.slot(m),
                    len: 1 + self.rng.below(MAX_IO),
                    fill: self.fill,
                }
            }
            40..=51 => Op::Read {
                slot: self.slot(m),
                len: 1 + self.rng.below(MAX_IO),
            },
            52..=59 => {
                let slot = self.slot(m);
                let len = m.slots[slot]
                    .as_ref()
                    .map_or(0, |h| m.files[&h.path].data.len() as u64);
                let pos = if self.rng.chance(6) {
                    len + 1 + self.rng.below(100)
                } else {
                    self.rng.below(len + 1)
                };
                Op::Seek { slot, pos }
            }
            60..=71 => Op::Close { slot: self.slot(m) },
            72..=78 => {
                let path = if self.rng.chance(4) {
                    self.pick(&DIRS).into()
                } else {
                    self.file_path()
                };
                Op::Unlink { path }
            }
            79..=83 => Op::Mkdir {
                path: self.pick(&DIRS).into(),
            },
            84..=90 => Op::Stat {
                path: if self.rng.chance(5) {
                    self.pick(&DIRS).into()
                } else {
                    self.file_path()
                },
            },
            91..=94 => Op::Readdir {
                path: match self.rng.below(5) {
                    0 => self.file_path(),
                    1 => String::new(),
                    _ => self.pick(&DIRS).into(),
                },
            },
            _ => {
                let path: String = self.pick(&BAD_NAMES).into();
                match self.rng.below(4) {
                    0 => Op::Open {
                        path,
                        mode: Mode::Write,
                        slot: (0..SLOTS).find(|s| m.slots[*s].is_none()).unwrap_or(0),
                    },
                    1 => Op::Stat { path },
                    2 => Op::Mkdir { path },
                    _ => Op::Unlink { path },
                }
            }
        }
    }
}

/// The whole run of `n` operations from `seed`, then a close of every handle still held,
/// each with what it must give; and the model's final state.
pub fn run(seed: u64, n: usize) -> (Vec<(Op, Expect)>, Model) {
    let mut m = Model::new();
    let mut w = Workload::new(seed);
    let mut out = Vec::with_capacity(n + SLOTS);
    for _ in 0..n {
        let op = w.next(&m);
        let e = m.apply(&op);
        out.push((op, e));
    }
    let held: Vec<usize> = m.open_slots().collect();
    for slot in held {
        let op = Op::Close { slot };
        let e = m.apply(&op);
        out.push((op, e));
    }
    (out, m)
}

#[cfg(test)]
mod tests;
