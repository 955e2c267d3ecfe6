//! Building the freestanding kernel (docs/design.md, "Building").
//!
//! The kernel is compiled for the host target (the only one stable Rust has here) with the
//! flags that make it freestanding: static relocation model, no red zone, the kernel code
//! model (it is linked in the top 2 GiB), and frame pointers for backtraces. Passing
//! `--target` explicitly keeps those flags away from build scripts and proc macros, and
//! the separate target directory keeps host builds from being rebuilt each time.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const TARGET: &str = "x86_64-unknown-linux-gnu";

/// Root of the workspace (xtask lives one level below it).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

/// rustc flags of every freestanding (kernel and, later, user) build.
pub fn freestanding_rustflags() -> String {
    [
        "-Crelocation-model=static",
        "-Cno-redzone=yes",
        "-Ccode-model=kernel",
        "-Cforce-frame-pointers=yes",
    ]
    .join("\x1f")
}

/// A `cargo SUBCOMMAND --release --target TARGET --target-dir DIR` for freestanding
/// binaries, with their rustc flags (the kernel's and the user programs' differ).
pub fn freestanding_cargo(subcommand: &str, rustflags: String, target_dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO"));
    c.current_dir(workspace_root())
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags)
        .args([subcommand, "--release", "--target", TARGET, "--target-dir"])
        .arg(target_dir);
    c
}

/// Build the kernel in release mode (optimised, with debug info) and return its ELF.
pub fn kernel() -> Result<PathBuf> {
    let target_dir = workspace_root().join("target/kernel");
    eprintln!("xtask: building the kernel (cargo build --release -p kernel --target {TARGET})");
    let status = freestanding_cargo("build", freestanding_rustflags(), &target_dir)
        .args(["-p", "kernel"])
        .status()
        .context("running cargo")?;
    if !status.success() {
        bail!("the kernel did not build (see the compiler errors above)");
    }
    let elf = target_dir.join(TARGET).join("release/musubi");
    if !elf.exists() {
        bail!("cargo reported success but {} is missing", elf.display());
    }
    Ok(elf)
}

/// `cargo clippy` over the host crates, then the kernel and the user programs with their
/// freestanding flags.
pub fn clippy(deny_warnings: bool) -> Result<()> {
    let root = workspace_root();
    let deny: &[&str] = if deny_warnings {
        &["--", "-D", "warnings"]
    } else {
        &[]
    };
    eprintln!("xtask: clippy (host crates)");
    let host = Command::new(env!("CARGO"))
        .current_dir(&root)
        .args(["clippy", "--all-targets"])
        .args(deny)
        .status()?;
    eprintln!("xtask: clippy (kernel, freestanding)");
    let kernel = freestanding_cargo(
        "clippy",
        freestanding_rustflags(),
        &root.join("target/kernel"),
    )
    .args(["-p", "kernel"])
    .args(deny)
    .status()?;
    eprintln!("xtask: clippy (user programs, freestanding)");
    let mut user = freestanding_cargo(
        "clippy",
        crate::user::rustflags(),
        &crate::user::target_dir(),
    );
    for p in crate::user::programs()?
        .iter()
        .map(String::as_str)
        .chain(["ulib"])
    {
        user.args(["-p", p]);
    }
    let user = user.args(deny).status()?;
    if !host.success() || !kernel.success() || !user.success() {
        bail!("clippy found problems (see above)");
    }
    Ok(())
}
