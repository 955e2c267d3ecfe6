//! Building the user programs and the boot archive the kernel starts them from.
//!
//! Every crate under `user/` with a `[[bin]]` is a program, named after its directory (the
//! bin must have the same name). They are freestanding static executables (docs/design.md
//! section 3) built for the host target with `user/link.ld`, in their own target directory
//! so the kernel's and the host's builds are not rebuilt each time. The archive,
//! `target/user/boot.cpio`, is a cpio "newc" archive with one entry per program, named
//! after it (a crate's further `[[bin]]`s are programs too, named after themselves); QEMU
//! hands it to the kernel as the boot module (`-initrd`). The archived
//! copies have their debug information removed (`objcopy --strip-debug`: a megabyte per
//! program, mostly `core`'s); the ELFs in `target/user/x86_64-unknown-linux-gnu/release`
//! keep it for `addr2line`.

use crate::build::{workspace_root, TARGET};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where user builds go (`target/user`), and the archive in it.
pub fn target_dir() -> PathBuf {
    workspace_root().join("target/user")
}

/// rustc flags of the user programs: static, frame pointers, no C runtime, our layout.
/// (Unlike the kernel they keep the red zone: interrupts from user mode switch stacks.)
pub fn rustflags() -> String {
    let script = workspace_root().join("user/link.ld");
    [
        "-Crelocation-model=static".to_string(),
        "-Cforce-frame-pointers=yes".to_string(),
        "-Clink-arg=-nostartfiles".to_string(),
        "-Clink-arg=-static".to_string(),
        "-Clink-arg=-nostdlib".to_string(),
        "-Clink-arg=-no-pie".to_string(),
        "-Clink-arg=-Wl,--build-id=none".to_string(),
        "-Clink-arg=-Wl,-z,max-page-size=4096".to_string(),
        format!("-Clink-arg=-Wl,-T,{}", script.display()),
    ]
    .join("\x1f")
}

/// The programs: directories under `user/` whose Cargo.toml has a `[[bin]]`, sorted.
pub fn programs() -> Result<Vec<String>> {
    let dir = workspace_root().join("user");
    let mut names = Vec::new();
    for entry in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let manifest = path.join("Cargo.toml");
        let Ok(text) = fs::read_to_string(&manifest) else {
            continue;
        };
        if !text.contains("[[bin]]") {
            continue;
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .context("a user crate directory name is not UTF-8")?
            .to_string();
        if !text.contains(&format!("name = \"{name}\"")) {
            bail!(
                "{} has a [[bin]] not named \"{name}\"; a program's bin must be named after its \
                 directory",
                manifest.display()
            );
        }
        names.push(name);
    }
    names.sort();
    if names.is_empty() {
        bail!("no user programs found under {}", dir.display());
    }
    Ok(names)
}

/// Build every program (release) and return their ELF files, in `programs()` order.
pub fn build_programs() -> Result<Vec<(String, PathBuf)>> {
    let names = programs()?;
    let target_dir = target_dir();
    eprintln!(
        "xtask: building user programs ({}) for {TARGET}",
        names.join(", ")
    );
    let mut cmd = crate::build::freestanding_cargo("build", rustflags(), &target_dir);
    for n in &names {
        cmd.args(["-p", n]);
    }
    let status = cmd.status().context("running cargo")?;
    if !status.success() {
        bail!("the user programs did not build (see the compiler errors above)");
    }
    let out = target_dir.join(TARGET).join("release");
    let mut bins = Vec::new();
    for n in &names {
        bins.extend(bins_of(n)?);
    }
    bins.into_iter()
        .map(|n| {
            let elf = out.join(&n);
            let bytes = fs::read(&elf).with_context(|| {
                format!("cargo reported success but {} is missing", elf.display())
            })?;
            check_elf(&n, &bytes)?;
            Ok((n, elf))
        })
        .collect()
}

/// The programs crate `name` builds: its `[[bin]]` names, the one named after the crate
/// first (a crate such as `user/tkid` builds several variants of one program).
fn bins_of(name: &str) -> Result<Vec<String>> {
    let manifest = workspace_root().join("user").join(name).join("Cargo.toml");
    let text =
        fs::read_to_string(&manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let mut bins = vec![name.to_string()];
    for section in text.split("[[bin]]").skip(1) {
        let bin = section
            .lines()
            .take_while(|l| !l.trim_start().starts_with('['))
            .find_map(|l| l.trim().strip_prefix("name = \"")?.strip_suffix('"'));
        if let Some(b) = bin.filter(|b| *b != name) {
            bins.push(b.to_string());
        }
    }
    Ok(bins)
}

/// Build the programs and write `target/user/boot.cpio`; returns its path.
pub fn build_archive() -> Result<PathBuf> {
    let config = workspace_root().join("user").join(BOOT_CONFIG);
    let text = fs::read(&config).with_context(|| format!("reading {}", config.display()))?;
    build_archive_with(&text, &target_dir().join("boot.cpio"))
}

/// The boot configuration's name in the archive, and its file under `user/` (the one users
/// edit; `bootargs::config` reads it in the kernel).
pub const BOOT_CONFIG: &str = "boot.cfg";

/// The boot archive at `path`: every program, and `config` as `boot.cfg` (tests pack a
/// malformed one this way).
pub fn build_archive_with(config: &[u8], path: &Path) -> Result<PathBuf> {
    let programs = build_programs()?;
    let stripped_dir = target_dir().join("stripped");
    fs::create_dir_all(&stripped_dir)?;
    let mut archive = Vec::new();
    let mut add = |ino: usize, name: &str, data: &[u8], mode: u32| -> Result<()> {
        let size = u32::try_from(data.len()).context("a file is larger than 4 GiB")?;
        let mut w = cpio::newc::Builder::new(name)
            .ino(ino as u32 + 1)
            .mode(mode)
            .nlink(1)
            .write(&mut archive, size);
        std::io::Write::write_all(&mut w, data)?;
        w.finish()?;
        Ok(())
    };
    for (ino, (name, elf)) in programs.iter().enumerate() {
        let elf = strip_debug(elf, &stripped_dir.join(name));
        let data = fs::read(&elf).with_context(|| format!("reading {}", elf.display()))?;
        add(ino, name, &data, 0o100755)?;
    }
    add(programs.len(), BOOT_CONFIG, config, 0o100644)?;
    cpio::newc::trailer(&mut archive)?;
    fs::write(path, &archive).with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "xtask: boot archive {} ({} programs and {BOOT_CONFIG}, {} KiB)",
        path.display(),
        programs.len(),
        archive.len().div_ceil(1024)
    );
    Ok(path.to_path_buf())
}

/// A copy of `elf` without debug information at `out`, or `elf` itself if objcopy (from
/// binutils, like the linker) is missing or fails.
fn strip_debug(elf: &Path, out: &Path) -> PathBuf {
    let ok = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(elf)
        .arg(out)
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return out.to_path_buf();
    }
    eprintln!(
        "xtask: note: `objcopy --strip-debug` failed; archiving {} with its debug information",
        elf.display()
    );
    elf.to_path_buf()
}

/// Catch a broken link step early, with a message that says what is wrong: the kernel's
/// loader would refuse the same files less readably.
fn check_elf(name: &str, b: &[u8]) -> Result<()> {
    let u16_at = |o: usize| b.get(o..o + 2).map(|s| u16::from_le_bytes([s[0], s[1]]));
    let u32_at = |o: usize| {
        b.get(o..o + 4)
            .map(|s| u32::from_le_bytes(s.try_into().unwrap()))
    };
    let u64_at = |o: usize| {
        b.get(o..o + 8)
            .map(|s| u64::from_le_bytes(s.try_into().unwrap()))
    };
    if b.get(0..4) != Some(b"\x7fELF") || b.get(4) != Some(&2) || u16_at(16) != Some(2) {
        bail!("user program {name} is not a 64-bit ELF executable (ET_EXEC)");
    }
    let (entry, phoff, phentsize, phnum) = (u64_at(24), u64_at(32), u16_at(54), u16_at(56));
    let (Some(entry), Some(phoff), Some(phentsize), Some(phnum)) = (entry, phoff, phentsize, phnum)
    else {
        bail!("user program {name}: truncated ELF header");
    };
    let mut entry_ok = false;
    let mut loads = 0;
    for i in 0..phnum as usize {
        let at = phoff as usize + i * phentsize as usize;
        let (Some(kind), Some(flags), Some(vaddr), Some(memsz)) =
            (u32_at(at), u32_at(at + 4), u64_at(at + 16), u64_at(at + 40))
        else {
            bail!("user program {name}: truncated program headers");
        };
        match kind {
            1 => loads += 1,
            3 => bail!("user program {name} asks for a dynamic linker (PT_INTERP)"),
            _ => continue,
        }
        if flags & 3 == 3 {
            bail!("user program {name}: segment at {vaddr:#x} is writable and executable (check user/link.ld)");
        }
        if vaddr < 0x40_0000 {
            bail!(
                "user program {name}: segment at {vaddr:#x} is below 0x400000 (check user/link.ld)"
            );
        }
        entry_ok |= flags & 1 != 0 && (vaddr..vaddr + memsz).contains(&entry);
    }
    if loads == 0 || !entry_ok {
        bail!("user program {name}: entry point {entry:#x} is not in an executable segment");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds the real archive (slow; run with `cargo test -p xtask -- --ignored`).
    #[test]
    #[ignore]
    fn archive_builds_and_lists_every_program() {
        let path = build_archive().unwrap();
        let names = programs().unwrap();
        let mut file = fs::File::open(&path).unwrap();
        let mut seen = Vec::new();
        loop {
            let r = cpio::newc::Reader::new(&mut file).unwrap();
            if r.entry().is_trailer() {
                break;
            }
            assert_eq!(r.entry().mode(), 0o100755);
            seen.push(r.entry().name().to_string());
            r.finish().unwrap();
        }
        let bins: Vec<String> = names.iter().flat_map(|n| bins_of(n).unwrap()).collect();
        assert_eq!(seen, bins);
        assert!(names.iter().any(|n| n == "shell"));
    }

    #[test]
    fn programs_are_found() {
        let names = programs().unwrap();
        for p in ["shell", "hello", "nop"] {
            assert!(names.iter().any(|n| n == p), "{p} missing from {names:?}");
        }
        assert!(!names.iter().any(|n| n == "ulib"));
    }

    #[test]
    fn every_bin_of_a_crate_is_a_program() {
        let bins = bins_of("tkid").unwrap();
        assert_eq!(bins.first().map(String::as_str), Some("tkid"));
        assert!(bins.iter().any(|b| b == "tkid32"), "{bins:?}");
        assert_eq!(bins_of("hello").unwrap(), ["hello"]);
    }
}
