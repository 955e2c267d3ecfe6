//! `cargo xtask`: build, boot, test and benchmark Musubi.
mod build;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Build, boot, test and benchmark Musubi")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build the kernel.
    Build,
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Build => {
            let elf = build::kernel()?;
            println!("{}", elf.display());
        }
    }
    Ok(())
}
