//! The file service's messages (issue 16; P0's file-system server). The server, `fsd`,
//! serves the function [`FN_FS`] over the disk's `blk` (`abi::blk`); programs reach it
//! through `ulib::fs`.
//!
//! Every request carries one ICA of [`FS_ICA_SIZE`] bytes, returned in the reply (also on an
//! error; `words[4]` and `words[5]` are the ICA's). `ulib::fs` lends it read-only
//! (`abi::ipc::MSG_ICA_READ_ONLY`) to every request but a read and a listing, whose answers
//! are written into it. Names travel in it from offset 0
//! (`words[3]` bytes): `/`-separated paths of FAT 8.3 names (`DIR/FILE.TXT`), relative to
//! the volume's root. Data travels in it from
//! offset 0 too. An open file is named by the handle `FS_OPEN` returned.
//!
//! Errors (the reply's value): `NoSuchResource` for a name not found, `AlreadyExists`,
//! `BadName` for a name FAT cannot hold, `Busy` for a file open already or a directory not
//! empty, `Limit` for an open past the user's share of the open files (a user other than
//! the administrator and the kernel holds at most 8 of the 16, all such users 12) or
//! with all 16 taken, `NoMemory` for a full disk, `TooLong` for a transfer above [`FS_ICA_SIZE`] (or an
//! open of a path above 100 bytes, which the open-file table cannot keep),
//! `InvalidArgument` for a bad handle, mode, a seek past the end or a request without its
//! ICA (or a read or listing with one mapped read-only), `WrongType` for a directory opened as a file or a file named as a directory,
//! `Denied` for a write to a file opened to read, `Unknown` for a volume the server cannot
//! read (no disk, a corrupt image: the server's console says which).

/// The file service's function name.
pub const FN_FS: &str = "fs";
/// Size of the ICA every request carries (one page).
pub const FS_ICA_SIZE: u64 = 4096;

/// Open the file named in the ICA; `words[0]` is the mode ([`MODE_READ`], ...), `words[1]`
/// the user the file is opened for, which counts it in that user's share of the open-file
/// table: taken only from the administrator or the kernel (a server opening files for
/// others: `machd` for programs of other machines); 0, or any other sender: the sender's
/// user. Reply: the handle in `words[0]`, the file's length in `words[1]`.
pub const FS_OPEN: u64 = 1;
/// Read up to `words[1]` bytes of handle `words[0]` into the ICA; reply: bytes read in
/// `words[0]` (0 at the end).
pub const FS_READ: u64 = 2;
/// Write `words[1]` bytes from the ICA to handle `words[0]` at its position (the end,
/// unless [`FS_SEEK`] moved it), overwriting what is there and extending the file. Reply:
/// no words (all of it was written, or the request failed).
pub const FS_WRITE: u64 = 3;
/// Close handle `words[0]`: for a file opened to write, its data is on the disk and the disk
/// flushed (`abi::blk::BLK_FLUSH`) when the reply comes.
pub const FS_CLOSE: u64 = 4;
/// Delete the file named in the ICA (or an empty directory).
pub const FS_UNLINK: u64 = 5;
/// Make the directory named in the ICA.
pub const FS_MKDIR: u64 = 6;
/// About the file or directory named: its length in `words[0]`, 1 in `words[1]` for a
/// directory.
pub const FS_STAT: u64 = 7;
/// The entries of the directory named (empty name: the root), from entry `words[0]` on:
/// the reply's ICA holds lines `NAME SIZE\n` (`NAME/ 0\n` for a directory), `words[0]`
/// bytes of them, `words[1]` entries, `words[2]` = 1 when more remain.
pub const FS_READDIR: u64 = 8;
/// Move handle `words[0]`'s position to byte `words[1]` (at most the file's length:
/// beyond it is `InvalidArgument`); the next read or write starts there, and a write
/// there overwrites the bytes it covers.
pub const FS_SEEK: u64 = 9;

/// Mode: read from the start.
pub const MODE_READ: u64 = 0;
/// Mode: write a new file, or an existing one from empty.
pub const MODE_WRITE: u64 = 1;
/// Mode: write at the end of the file, made if missing.
pub const MODE_APPEND: u64 = 2;
