//! What `fsd` checks of a volume before it serves it, so that no byte of a disk image makes
//! it (or `embedded-sdmmc` under it) loop, panic or write where it should not: the boot
//! sector against its partition, the FAT's tail sealed, the FAT's chains, every directory
//! entry's first cluster (as far as the walk at mount goes; `Server::entry_sound` in
//! `main.rs` checks the rest as paths are followed).

use crate::{code, disk, Fat, FsError, Volumes};
use alloc::format;
use alloc::string::String;
use embedded_sdmmc::{RawDirectory, RawVolume};
use ulib::println;

/// How deep [`check_entries`] walks the directory tree at mount.
const WALK_DEPTH_MAX: usize = 32;
/// Most directory entries [`check_entries`] reads at mount.
const WALK_ENTRIES_MAX: usize = 100_000;

/// Mark bad the FAT entries past the last cluster of the disk's first partition
/// (`libs/fattail` says why: else the library allocates clusters beyond the volume when it
/// is nearly full). How many it marked, and where the FATs are.
pub(crate) fn seal_fat_tail(d: &disk::Disk) -> Result<(u32, Fat), String> {
    use embedded_sdmmc::{Block, BlockDevice, BlockIdx};
    let mut b = [Block::new()];
    d.read(&mut b, BlockIdx(0)).map_err(|e| format!("{e}"))?;
    let mbr = &b[0].contents;
    if mbr[510] != 0x55 || mbr[511] != 0xaa {
        return Err("no partition table".into());
    }
    let lba = u32::from_le_bytes([mbr[454], mbr[455], mbr[456], mbr[457]]);
    let length = u32::from_le_bytes([mbr[458], mbr[459], mbr[460], mbr[461]]);
    // The volume's room: its partition, cut at the disk's end.
    let disk = d.num_blocks().map_err(|e| format!("{e}"))?.0;
    let room = length.min(disk.saturating_sub(lba));
    d.read(&mut b, BlockIdx(lba)).map_err(|e| format!("{e}"))?;
    let layout = fattail::Layout::from_boot_sector(&b[0].contents, room).ok_or(
        "no FAT16 or FAT32 boot sector whose parts fit in the volume and the volume in its partition",
    )?;
    let mut marked = 0;
    for (sector, first) in layout.tail_sectors() {
        let at = BlockIdx(lba + sector);
        d.read(&mut b, at).map_err(|e| format!("{e}"))?;
        let n = fattail::seal(&layout, &mut b[0].contents, first);
        if n > 0 {
            d.write(&b, at).map_err(|e| format!("{e}"))?;
            marked += n;
        }
    }
    Ok((marked, Fat { lba, layout }))
}

/// Most clusters whose chains are checked at mount ([`check_fat`]): 4 bytes of FAT and one
/// of state each. A larger volume (FAT32) is served unchecked, with a console line.
const CHECKED_CLUSTERS_MAX: u32 = 1 << 20;

/// Refuse a volume whose FAT has a chain that loops or leaves the volume
/// (`fattail::check_chains`: the library would follow it for ever). Reads the first FAT.
pub(crate) fn check_fat(d: &disk::Disk, fat: &Fat) -> Result<(), String> {
    use embedded_sdmmc::{Block, BlockDevice, BlockIdx};
    let l = &fat.layout;
    if l.clusters > CHECKED_CLUSTERS_MAX {
        println!(
            "fsd: {} clusters: the FAT's chains are not checked for loops",
            l.clusters
        );
        return Ok(());
    }
    let needed = (u64::from(l.limit()) * u64::from(l.width)).div_ceil(512) as u32;
    let mut bytes = alloc::vec::Vec::new();
    bytes
        .try_reserve(needed as usize * 512)
        .map_err(|_| String::from("no memory to check the FAT"))?;
    let mut b = [Block::new()];
    for i in 0..needed.min(l.fat_sectors) {
        d.read(&mut b, BlockIdx(fat.lba + l.fat_start + i))
            .map_err(|e| format!("reading the FAT: {e}"))?;
        bytes.extend_from_slice(&b[0].contents);
    }
    let entry = |c: u32| {
        let at = c as usize * l.width as usize;
        match bytes.get(at..at + l.width as usize) {
            Some(&[a, b]) => u32::from(u16::from_le_bytes([a, b])),
            Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
            _ => 0,
        }
    };
    fattail::check_chains(l, entry).map_err(|f| {
        format!(
            "the disk holds no FAT volume this server reads: its FAT is corrupt ({})",
            match f {
                fattail::ChainFault::Loop(c) => format!("the chain through cluster {c} loops"),
                fattail::ChainFault::Joined(c) => {
                    format!("cluster {c} is in two chains (cross-linked)")
                }
                fattail::ChainFault::Outside(c, n) => {
                    format!("cluster {c} links to {n:#x}, no cluster of the volume")
                }
            }
        )
    })
}

/// Does entry `e` name a first cluster that is no cluster of the volume? The library would
/// follow it past the FAT, read and write outside the data area, or (FAT32) panic.
pub(crate) fn names_no_cluster(e: &embedded_sdmmc::DirEntry, fat: &Fat) -> bool {
    use embedded_sdmmc::ClusterId;
    e.cluster != ClusterId::EMPTY
        && !(2..fat.layout.limit())
            .contains(&fattail::bisect(|n| ClusterId::EMPTY + n <= e.cluster))
}

/// Refuse a volume with a directory entry whose first cluster is no cluster of the
/// volume ([`names_no_cluster`]). Walks every directory once, at mount (bounded:
/// [`WALK_DEPTH_MAX`] levels, [`WALK_ENTRIES_MAX`] entries). Whether every entry was
/// checked: where the walk stopped short, the server checks each entry a path names
/// instead ([`Server::at_dir`]; a review found a file 33 directories deep, never checked,
/// with which a client could crash `fsd` or have it write outside the data area).
pub(crate) fn check_entries(
    vm: &Volumes,
    vol: RawVolume,
    fat: &Option<Fat>,
) -> Result<bool, String> {
    let Some(fat) = fat else {
        return Ok(true);
    };
    let bad = |e: &embedded_sdmmc::DirEntry| names_no_cluster(e, fat);
    let mut complete = true;
    let mut todo: alloc::vec::Vec<(String, usize)> = alloc::vec![(String::new(), 0)];
    let mut seen = 0usize;
    while let Some((path, depth)) = todo.pop() {
        // A directory the library cannot open again by its name (a short name it does not
        // parse) is left unchecked, as is what lies past the bounds: a valid volume is
        // never refused for its size or names (found by a review).
        let Ok(dir) = open_path(vm, vol, &path) else {
            println!("fsd: directory /{path} not checked (it cannot be opened by its name)");
            complete = false;
            continue;
        };
        let mut fault = None;
        let r = vm.iterate_dir(dir, |e| {
            seen += 1;
            let name = format!("{}", e.name);
            if e.attributes.is_volume() || name == "." || name == ".." {
                return core::ops::ControlFlow::Continue(());
            }
            if seen > WALK_ENTRIES_MAX {
                return core::ops::ControlFlow::Break(());
            }
            if bad(e) {
                fault = Some(name);
                return core::ops::ControlFlow::Break(());
            }
            if e.attributes.is_directory() {
                if depth < WALK_DEPTH_MAX {
                    todo.push((format!("{path}/{name}"), depth + 1));
                } else {
                    complete = false;
                }
            }
            core::ops::ControlFlow::Continue(())
        });
        let _ = vm.close_dir(dir);
        r.map_err(|e| format!("reading directory /{path}: {:?}", code(&e)))?;
        if let Some(name) = fault {
            return Err(format!(
                "the disk holds no FAT volume this server reads: the entry of {path}/{name} \
                 names no cluster of the volume"
            ));
        }
        if seen > WALK_ENTRIES_MAX {
            println!("fsd: directories past the first {WALK_ENTRIES_MAX} entries not checked");
            return Ok(false);
        }
    }
    if !complete {
        println!(
            "fsd: directories deeper than {WALK_DEPTH_MAX} levels not checked at mount: each \
             entry a path names is checked as it is used"
        );
    }
    Ok(complete)
}

/// Open the directory at `path` (names joined by `/`, empty: the root).
pub(crate) fn open_path(vm: &Volumes, vol: RawVolume, path: &str) -> Result<RawDirectory, FsError> {
    let mut dir = vm.open_root_dir(vol)?;
    for p in path.split('/').filter(|p| !p.is_empty()) {
        let next = vm.open_dir(dir, p);
        let _ = vm.close_dir(dir);
        dir = next?;
    }
    Ok(dir)
}
