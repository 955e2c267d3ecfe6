//! Disk images for the virtio-blk device (issue 16): FAT images made and read on the host by
//! Debian's `dosfstools` (`mkfs.fat`) and `mtools` (`mcopy`, `mtype`), so users put files
//! in and take results out with ordinary tools. `cargo xtask run` attaches
//! `target/disk.img` (made on first use, kept between boots, `--fresh-disk` makes it anew);
//! test boots get their own images under `target/` and never touch the user's.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Size of a new image's FAT16 volume in KiB.
const SIZE_KIB: u64 = 16 * 1024;
/// Size of the small volume the full-disk test fills.
const SMALL_KIB: u64 = 4 * 1024;
/// The volume's first sector: one partition in a Master Boot Record (`embedded-sdmmc` reads
/// only partitioned disks), at 1 MiB as partitioning tools place it.
const START: u64 = 2048;

const INSTALL_HELP: &str = "\
Musubi's disk images need mkfs.fat (dosfstools) and mtools. As root on Debian:
  apt-get install -y dosfstools mtools
(or run `bash .ci/install-disk-tools`, which does exactly that)";

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Make sure `mkfs.fat` and `mtools` are there; install them when running as root.
pub fn ensure_tools() -> Result<()> {
    if have("mkfs.fat") && have("mcopy") {
        return Ok(());
    }
    eprintln!("xtask: mkfs.fat or mtools is missing");
    let script = crate::build::workspace_root().join(".ci/install-disk-tools");
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0"))
        .unwrap_or(false);
    if is_root && Path::new("/usr/bin/apt-get").exists() && script.exists() {
        eprintln!("xtask: installing dosfstools and mtools (bash .ci/install-disk-tools)");
        let ok = Command::new("bash")
            .arg(&script)
            .status()
            .context("running .ci/install-disk-tools")?
            .success();
        if ok && have("mkfs.fat") && have("mcopy") {
            return Ok(());
        }
        bail!("installing the disk tools failed.\n{INSTALL_HELP}");
    }
    bail!("{INSTALL_HELP}");
}

/// The user's disk, `target/disk.img`: made if missing or if `fresh`, else kept.
pub fn user_image(fresh: bool) -> Result<PathBuf> {
    let path = crate::build::workspace_root().join("target/disk.img");
    if fresh || !path.exists() {
        make(&path)?;
        eprintln!("xtask: made a new FAT disk image {}", path.display());
    }
    Ok(path)
}

/// A new empty image at `path` (an old one is replaced): a Master Boot Record with one
/// FAT16 (LBA, type 0x0e) partition from sector [`START`], formatted by `mkfs.fat`.
pub fn make(path: &Path) -> Result<()> {
    make_sized(path, SIZE_KIB, &[])
}

/// A new image of a 4 MiB volume (FAT16 with 512-byte clusters, the smallest
/// `embedded-sdmmc` reads: it has no FAT12), for the tests that fill the disk.
pub fn make_small(path: &Path) -> Result<()> {
    make_sized(path, SMALL_KIB, &["-s", "1"])
}

/// A new image of a volume of `kib` KiB, `mkfs.fat` given `extra` arguments.
fn make_sized(path: &Path, kib: u64, extra: &[&str]) -> Result<()> {
    ensure_tools()?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let sectors = kib * 2;
    let mut mbr = vec![0u8; 512];
    let entry = &mut mbr[446..462];
    entry[4] = 0x0e;
    entry[8..12].copy_from_slice(&(START as u32).to_le_bytes());
    entry[12..16].copy_from_slice(&(sectors as u32).to_le_bytes());
    mbr[510] = 0x55;
    mbr[511] = 0xaa;
    let _ = std::fs::remove_file(path);
    std::fs::write(path, &mbr).with_context(|| format!("writing {}", path.display()))?;
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .set_len((START + sectors) * 512)?;
    run(Command::new("mkfs.fat")
        .args(["-F", "16", "-n", "MUSUBI", "--offset", &START.to_string()])
        .args(extra)
        .arg(path)
        .arg(kib.to_string()))
}

/// Zero the volume's boot sector: the image no longer holds a FAT volume (for the tests of
/// a corrupt disk).
pub fn corrupt(image: &Path) -> Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(image)?;
    f.seek(SeekFrom::Start(START * 512))?;
    f.write_all(&[0u8; 512])?;
    Ok(())
}

/// Change the volume's boot sector of `image` with `f` (a corrupt image made on purpose).
pub fn patch_boot_sector(image: &Path, f: impl FnOnce(&mut [u8; 512])) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(image)?;
    let mut b = [0u8; 512];
    file.seek(SeekFrom::Start(START * 512))?;
    file.read_exact(&mut b)?;
    f(&mut b);
    file.seek(SeekFrom::Start(START * 512))?;
    file.write_all(&b)?;
    Ok(())
}

/// A FAT16 volume's layout as its boot sector gives it: where its first FAT and its root
/// directory start (bytes from the image's start), sectors per FAT, root entries.
pub struct Fat16At {
    pub fat: u64,
    pub fat_bytes: u64,
    pub fats: u64,
    pub root: u64,
    pub root_entries: u64,
}

/// Where the parts of `image`'s FAT16 volume lie.
pub fn fat16_at(image: &Path) -> Result<Fat16At> {
    let bytes = std::fs::read(image)?;
    let b = bytes
        .get((START * 512) as usize..(START * 512 + 512) as usize)
        .context("the image is shorter than its volume's boot sector")?;
    let u16_at = |at: usize| u64::from(u16::from_le_bytes([b[at], b[at + 1]]));
    let volume = START * 512;
    let fat = volume + u16_at(14) * 512;
    let fat_bytes = u16_at(22) * 512;
    let fats = u64::from(b[16]);
    Ok(Fat16At {
        fat,
        fat_bytes,
        fats,
        root: fat + fats * fat_bytes,
        root_entries: u16_at(17),
    })
}

/// Write `bytes` at byte `at` of `image` (a corrupt image made on purpose).
pub fn poke(image: &Path, at: u64, bytes: &[u8]) -> Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(image)?;
    f.seek(SeekFrom::Start(at))?;
    f.write_all(bytes)?;
    Ok(())
}

/// The byte offset (in `image`) of the root directory entry of `name` (11 bytes, 8.3 as
/// stored: `"D          "`) of its FAT16 volume, and the first cluster it names.
pub fn root_entry(image: &Path, name: &[u8; 11]) -> Result<(u64, u16)> {
    let at = fat16_at(image)?;
    let bytes = std::fs::read(image)?;
    for i in 0..at.root_entries {
        let e = (at.root + i * 32) as usize;
        let entry = bytes
            .get(e..e + 32)
            .context("the root directory is cut short")?;
        if &entry[..11] == name {
            return Ok((e as u64, u16::from_le_bytes([entry[26], entry[27]])));
        }
    }
    bail!("no root entry {:?}", String::from_utf8_lossy(name))
}

/// The image as mtools names its volume (`FILE@@OFFSET`).
fn volume(image: &Path) -> String {
    format!("{}@@{}", image.display(), START * 512)
}

/// Make directory `name` (an 8.3 name in the root directory) in the image.
pub fn mkdir(image: &Path, name: &str) -> Result<()> {
    run(Command::new("mmd")
        .arg("-i")
        .arg(volume(image))
        .arg(format!("::{name}")))
}

/// Put `data` into the image as `name` (8.3 names; `DIR/NAME` in a directory that exists).
pub fn put(image: &Path, name: &str, data: &[u8]) -> Result<()> {
    let tmp = image.with_extension(format!("put-{}", name.replace('/', "_")));
    std::fs::write(&tmp, data)?;
    let r = run(Command::new("mcopy")
        .arg("-o")
        .arg("-i")
        .arg(volume(image))
        .arg(&tmp)
        .arg(format!("::{name}")));
    let _ = std::fs::remove_file(&tmp);
    r
}

/// The contents of `name` in the image.
pub fn get(image: &Path, name: &str) -> Result<Vec<u8>> {
    let out = Command::new("mtype")
        .arg("-i")
        .arg(volume(image))
        .arg(format!("::{name}"))
        .output()
        .context("running mtype (mtools)")?;
    if !out.status.success() {
        bail!(
            "mtype ::{name}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// Bytes per cluster of the image's volume (its boot sector's bytes per sector times
/// sectors per cluster).
pub fn cluster_bytes(image: &Path) -> Result<u64> {
    let data = std::fs::read(image)?;
    let boot = data
        .get((START * 512) as usize..(START * 512) as usize + 512)
        .context("the image is shorter than its volume's boot sector")?;
    let sector = u64::from(u16::from_le_bytes([boot[11], boot[12]]));
    let per_cluster = u64::from(boot[13]);
    if sector == 0 || per_cluster == 0 {
        bail!("the volume's boot sector gives no cluster size");
    }
    Ok(sector * per_cluster)
}

/// Every file and directory of the volume, as paths from the root (`DIR`, `DIR/FILE.TXT`),
/// sorted, as `mdir -/ -b` lists them.
pub fn list(image: &Path) -> Result<Vec<String>> {
    let out = Command::new("mdir")
        .args(["-/", "-b", "-i"])
        .arg(volume(image))
        .arg("::")
        .output()
        .context("running mdir (mtools)")?;
    if !out.status.success() {
        bail!("mdir: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("::/"))
        .map(|l| l.trim_end_matches('/').to_string())
        .filter(|l| !l.is_empty())
        .collect();
    names.sort();
    Ok(names)
}

/// `fsck.fat -n` (check only) over the image's volume, copied out to a file beside it.
/// Returns the clusters it found allocated but in no file: `embedded-sdmmc` 0.10 deletes a
/// file's directory entry without freeing its clusters (docs/design.md section 16), so the
/// caller compares them with what it deleted. Any other finding is an error.
pub fn check(image: &Path) -> Result<u64> {
    let data = std::fs::read(image)?;
    let start = (START * 512) as usize;
    let volume = image.with_extension("fsck");
    std::fs::write(&volume, data.get(start..).unwrap_or_default())?;
    let out = Command::new("fsck.fat").arg("-n").arg(&volume).output();
    let _ = std::fs::remove_file(&volume);
    let out = out.context("running fsck.fat")?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut lost = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Reclaimed ") {
            lost += rest
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(u64::MAX / 2);
        } else if !(line.starts_with("fsck.fat ")
            || line.is_empty()
            || line == "Leaving filesystem unchanged."
            || line.contains(" files, "))
        {
            bail!("fsck.fat -n found: {}", text.trim());
        }
    }
    if !out.status.success() && lost == 0 {
        bail!(
            "fsck.fat -n failed: {} {}",
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(lost)
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd
        .output()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{:?} failed: {}",
            cmd.get_program(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new image holds a file mtools put in, `fsck.fat` finds nothing wrong, and a zeroed
    /// volume boot sector is an error of `check`.
    #[test]
    fn make_put_get_check() {
        let dir = std::env::temp_dir().join(format!("musubi-disk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let image = dir.join("t.img");
        make(&image).unwrap();
        put(&image, "A.TXT", b"abc\n").unwrap();
        assert_eq!(get(&image, "A.TXT").unwrap(), b"abc\n");
        mkdir(&image, "BIN").unwrap();
        put(&image, "BIN/P", b"elf\n").unwrap();
        assert_eq!(get(&image, "BIN/P").unwrap(), b"elf\n");
        assert_eq!(list(&image).unwrap(), ["A.TXT", "BIN", "BIN/P"]);
        let cluster = cluster_bytes(&image).unwrap();
        assert!(cluster.is_power_of_two() && cluster >= 512, "{cluster}");
        assert!(get(&image, "B.TXT").is_err());
        assert_eq!(check(&image).unwrap(), 0);
        corrupt(&image).unwrap();
        assert!(check(&image).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
