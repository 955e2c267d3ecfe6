//! The [files] group's random workload (issue 16's target: "no data lost or corrupted
//! across 1,000 random file operations checked against a model on the host").
//!
//! The guest runs `fsfuzz SEED 1000` (`user/fsfuzz`) on a fresh image: the seeded
//! workload of `libs/fsmodel`, every answer of the file service checked against the model
//! in the guest. After the power-off the host replays the same seed with the same model and
//! checks the image: `mdir` lists exactly the model's files and directories, `mtype` reads
//! every file byte for byte as the model holds it, and `fsck.fat -n` finds nothing but the
//! clusters the model says the library leaves allocated (deleted files' and directories').

use crate::disk;
use crate::qemu::Guest;
use crate::test::Tally;
use anyhow::{bail, Result};

/// The workload's length (the figure).
pub const OPERATIONS: usize = 1000;
/// The seeds of the test, each its own boot on a fresh image; `FSFUZZ_SEED=S cargo xtask
/// test --kernel-only --filter files` runs seed S alone (a failure found with seed S is
/// found again with seed S). Seed 3 found a file emptied by an open to write and closed
/// empty holding a cluster (`fsck.fat`: "File size is 0 bytes, cluster chain length is >
/// 0 bytes"), now made again without one by `fsd`: it stays as that regression test.
const SEEDS: [u64; 2] = [16, 3];

/// Run the workload in a guest with the file service started by `user/boot.cfg`, then check
/// the image on the host.
pub fn fuzz(t: &mut Tally, guest: &dyn Fn(usize, &str) -> Guest) -> Result<()> {
    let seeds = match std::env::var("FSFUZZ_SEED") {
        Ok(s) => vec![s
            .parse()
            .ok()
            .filter(|&s| s != 0)
            .ok_or_else(|| anyhow::anyhow!("FSFUZZ_SEED={s}: not a non-zero number"))?],
        Err(_) => SEEDS.to_vec(),
    };
    for seed in seeds {
        fuzz_seed(t, guest, seed)?;
    }
    Ok(())
}

/// One seed's workload in one boot, then its image checked.
fn fuzz_seed(t: &mut Tally, guest: &dyn Fn(usize, &str) -> Guest, seed: u64) -> Result<()> {
    let root = crate::build::workspace_root();
    let image = root.join("target/test-fuzz.img");
    disk::make(&image)?;
    let label = format!(
        "[files] {OPERATIONS} random file operations (seed {seed}) checked against a model"
    );
    println!("xtask: {label}");
    let text = format!(
        "fn wait fs\nrun fsfuzz {seed} {OPERATIONS}\n\
         # expect: fsfuzz: seed {seed}:\n# expect: operations, 0 mismatches,\n"
    );
    let mut g = guest(2, "");
    g.disk = Some(image.clone());
    let ran = crate::script::parse(&text)
        .and_then(|steps| crate::script::run_steps(&g, "fsfuzz", &steps, |_| false));
    if let Err(e) = ran {
        t.fail(&label, &format!("{e:#}"));
        return Ok(());
    }
    t.pass(&label);
    let label = "[files] mtools and fsck.fat find the model's final state on the image";
    match check_image(&image, seed) {
        Ok(what) => {
            println!("xtask: {what}");
            t.pass(label);
        }
        Err(e) => t.fail(label, &format!("{e:#}")),
    }
    Ok(())
}

/// A full disk: `fsfuzz full` on a small fresh volume fills it until a write fails
/// (`NoMemory`), and checks that the file service serves on and kept what was written;
/// then the host reads the files it kept with mtools, and `fsck.fat -n` finds at most the
/// one cluster the deleted FILL.DAT leaves.
pub fn full(t: &mut Tally, guest: &dyn Fn(usize, &str) -> Guest) -> Result<()> {
    let root = crate::build::workspace_root();
    let image = root.join("target/test-full.img");
    disk::make_small(&image)?;
    let cluster = disk::cluster_bytes(&image)?;
    let label = "[files] a full disk: NoMemory, the file service serves on, nothing lost";
    println!("xtask: {label} ({cluster}-byte clusters)");
    let text = "fn wait fs
run fsfuzz full
# expect: the disk filled up: NoMemory: ok
                # expect: fsfuzz full: ok
ls
# expect: AFTER.TXT 20000
";
    let mut g = guest(2, "");
    g.disk = Some(image.clone());
    let ran = crate::script::parse(text)
        .and_then(|steps| crate::script::run_steps(&g, "fsfuzz full", &steps, |_| false));
    if let Err(e) = ran {
        t.fail(label, &format!("{e:#}"));
        return Ok(());
    }
    let check = || -> Result<()> {
        for (name, seed, len) in [("KEEP.TXT", 1, 10_000), ("AFTER.TXT", 2, 20_000)] {
            if disk::get(&image, name)? != fsmodel::data(seed, len) {
                bail!("{name} on the image is not what the guest wrote");
            }
        }
        let names = disk::list(&image)?;
        if names != ["AFTER.TXT", "KEEP.TXT"] {
            bail!("the image holds {names:?}, not AFTER.TXT and KEEP.TXT alone");
        }
        let lost = disk::check(&image)?;
        if lost > 0 {
            bail!("fsck.fat -n: {lost} lost clusters (FILL.DAT's were freed by its delete)");
        }
        Ok(())
    };
    match check() {
        Ok(()) => t.pass(label),
        Err(e) => t.fail(label, &format!("{e:#}")),
    }
    Ok(())
}

/// The image against the model's final state after the workload of `seed`.
fn check_image(image: &std::path::Path, seed: u64) -> Result<String> {
    let (ops, model) = fsmodel::run(seed, OPERATIONS);
    let mut want: Vec<String> = model
        .files()
        .map(|(p, _)| p.to_string())
        .chain(model.dirs().map(str::to_string))
        .collect();
    want.sort();
    let got = disk::list(image)?;
    if got != want {
        bail!("the image holds {got:?}, the model {want:?}");
    }
    let mut bytes = 0;
    for (path, data) in model.files() {
        let on_disk = disk::get(image, path)?;
        if on_disk != data {
            let at = on_disk.iter().zip(data).position(|(a, b)| a != b);
            bail!(
                "{path}: {} bytes on the image, {} in the model, first difference at {:?}",
                on_disk.len(),
                data.len(),
                at
            );
        }
        bytes += data.len();
    }
    // Every delete freed what it deleted (fsd frees the cluster the library leaves).
    let lost = disk::check(image)?;
    if lost != 0 {
        bail!("fsck.fat -n: {lost} lost clusters; the deletes should leave none");
    }
    Ok(format!(
        "fsfuzz seed {seed}: {} operations; the image holds the model's {} files ({bytes} bytes) \
         and {} directories; fsck.fat: no lost cluster",
        ops.len(),
        model.files().count(),
        model.dirs().count()
    ))
}
