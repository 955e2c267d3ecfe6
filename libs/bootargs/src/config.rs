//! The boot configuration file, `boot.cfg` in the boot archive (xtask packs it from
//! `user/boot.cfg`, the file users edit): which groups of system processes start at boot
//! and on which core each kind runs — P0's placement of system processes on processors by
//! configuration. Pure logic, tested on the host; the kernel reads the file at boot
//! (`kernel/src/main.rs`, `start_boot_programs`).
//!
//! The file is lines of `KEY = VALUE`; `#` starts a comment; blank lines are skipped. The
//! same keys are boot words (`files.core=1` on the command line), which override the file.
//!
//! | key | value | default |
//! |---|---|---|
//! | `services` | `files`, `net`, both (`files,net`) or `none`: the groups started at boot (a group starts only if its device is attached, and never on a test or power-off boot) | `files` |
//! | `disk.core` | the disk manager `blkdrv` (driver priority): core 0 only, where devices live | 0 |
//! | `buffers.cores` | buffer managers `bufd`: one per core listed (`0,1`: two managers, the disk's stripes split between them), 1 to 8 | `0` |
//! | `buffers.size` | buffers (sectors) each manager owns, 1 to 4096 | 64 |
//! | `files.core` | the file-system server `fsd` (started `restart=3`: restarted after a crash with its open files) | 0 |
//! | `net.driver.core` | the network driver `netdrv` (driver priority): core 0 only | 0 |
//! | `net.server.core` | the UDP/IP server `netd` | 0 |
//!
//! Nothing here fails: a line or word it cannot use is a [`Problem`] the kernel prints, and
//! that key keeps its earlier value (the default, or the file's for a bad boot word). A core
//! that is not in use is a problem of [`plan`], which places that process on core 0.

use core::fmt::Write;

/// The file's name in the boot archive.
pub const FILE: &str = "boot.cfg";
/// Most buffer managers (`abi::buf::MAX_MANAGERS`).
pub const MAX_BUFFER_MANAGERS: usize = 8;
/// How many times a minute the file service `fsd` the configuration starts is restarted
/// after a crash (`fsd restart=N`).
pub const FSD_RESTARTS: u32 = 3;
/// Most processes a configuration starts.
pub const MAX_PLANNED: usize = 4 + MAX_BUFFER_MANAGERS;

/// A group of system processes started together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// The disk manager, the buffer managers and the file-system server.
    Files,
    /// The network driver and the UDP/IP server.
    Net,
}

/// Where each kind of system process runs, and which groups start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub files: bool,
    pub net: bool,
    pub disk_core: usize,
    pub buffer_cores: heapless::Vec<usize, MAX_BUFFER_MANAGERS>,
    pub buffer_size: u32,
    pub files_core: usize,
    pub net_driver_core: usize,
    pub net_server_core: usize,
}

impl Default for Config {
    fn default() -> Self {
        let mut buffer_cores = heapless::Vec::new();
        let _ = buffer_cores.push(0);
        Config {
            files: true,
            net: false,
            disk_core: 0,
            buffer_cores,
            buffer_size: 64,
            files_core: 0,
            net_driver_core: 0,
            net_server_core: 0,
        }
    }
}

/// The keys, as the file and the command line spell them.
pub const KEYS: [&str; 7] = [
    "services",
    "disk.core",
    "buffers.cores",
    "buffers.size",
    "files.core",
    "net.driver.core",
    "net.server.core",
];

/// Is `key` one of the configuration's (so a boot word with it belongs here)?
pub fn is_key(key: &str) -> bool {
    KEYS.contains(&key)
}

/// A line of the file, or a boot word, that was not used, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Problem<'a> {
    /// The file's line number (from 1), or 0 for a boot word or a placement.
    pub line: usize,
    pub text: &'a str,
    pub why: &'static str,
}

impl core::fmt::Display for Problem<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "{FILE} line {}: '{}' ignored: {}",
                self.line, self.text, self.why
            )
        } else {
            write!(f, "{FILE}: '{}' ignored: {}", self.text, self.why)
        }
    }
}

/// A core number below the most cores the kernel supports.
fn core(v: &str) -> Option<usize> {
    v.parse().ok().filter(|&c| c < crate::MAX_SMP)
}

impl Config {
    /// Set `key` to `value`; what was expected if `value` does not do.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), &'static str> {
        match key {
            "services" => {
                let (mut files, mut net) = (false, false);
                for s in value.split(',').map(str::trim) {
                    match s {
                        "files" => files = true,
                        "net" => net = true,
                        "none" => {}
                        _ => return Err("files, net, files,net or none"),
                    }
                }
                (self.files, self.net) = (files, net);
            }
            "disk.core" | "net.driver.core" => {
                if core(value) != Some(0) {
                    return Err("0 (devices and their drivers live on core 0)");
                }
            }
            "buffers.cores" => {
                let mut cores = heapless::Vec::new();
                for c in value.split(',').map(str::trim) {
                    let c = core(c).ok_or("a list of core numbers, e.g. 0,1")?;
                    cores
                        .push(c)
                        .map_err(|_| "at most 8 buffer managers")?;
                }
                self.buffer_cores = cores;
            }
            "buffers.size" => match value.parse::<u32>() {
                Ok(n) if (1..=4096).contains(&n) => self.buffer_size = n,
                _ => return Err("a number of buffers from 1 to 4096"),
            },
            "files.core" => self.files_core = core(value).ok_or("a core number")?,
            "net.server.core" => self.net_server_core = core(value).ok_or("a core number")?,
            _ => return Err("a known key (services, disk.core, buffers.cores, buffers.size, files.core, net.driver.core, net.server.core)"),
        }
        Ok(())
    }
}

/// Read the file's `text` into `cfg`; every line not used goes to `problem`.
pub fn read_file<'a>(text: &'a str, cfg: &mut Config, mut problem: impl FnMut(Problem<'a>)) {
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let report = |why| Problem {
            line: n + 1,
            text: raw.trim(),
            why,
        };
        match line.split_once('=') {
            Some((k, v)) => {
                if let Err(why) = cfg.set(k.trim(), v.trim()) {
                    problem(report(why));
                }
            }
            None => problem(report("not KEY = VALUE")),
        }
    }
}

/// Apply the boot words of `cmdline` whose keys are the configuration's (the command line
/// overrides the file); every such word not used goes to `problem`.
pub fn apply_words<'a>(cmdline: &'a str, cfg: &mut Config, mut problem: impl FnMut(Problem<'a>)) {
    for word in cmdline.split_ascii_whitespace() {
        if let Some((k, v)) = word.split_once('=').filter(|(k, _)| is_key(k)) {
            if let Err(why) = cfg.set(k, v) {
                problem(Problem {
                    line: 0,
                    text: word,
                    why,
                });
            }
        }
    }
}

/// One process a configuration starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    pub service: Service,
    pub core: usize,
    pub program: &'static str,
    /// Its arguments, separated by spaces.
    pub args: heapless::String<48>,
    /// At driver priority (else as a server).
    pub driver: bool,
}

/// The processes `cfg` starts on a machine of `cores` cores, in starting order (each
/// group's processes after those they call). A process placed on a core not in use goes to
/// core 0, reported to `problem`.
pub fn plan(
    cfg: &Config,
    cores: usize,
    mut problem: impl FnMut(Problem<'static>),
) -> heapless::Vec<Planned, MAX_PLANNED> {
    let mut out = heapless::Vec::new();
    let mut place = |service, core: usize, program, args: heapless::String<48>, driver| {
        let core = if core < cores.max(1) {
            core
        } else {
            problem(Problem {
                line: 0,
                text: program,
                why: "placed on a core that is not in use; it runs on core 0",
            });
            0
        };
        let _ = out.push(Planned {
            service,
            core,
            program,
            args,
            driver,
        });
    };
    if cfg.files {
        place(
            Service::Files,
            cfg.disk_core,
            "blkdrv",
            heapless::String::new(),
            true,
        );
        let k = cfg.buffer_cores.len();
        for (i, &c) in cfg.buffer_cores.iter().enumerate() {
            let mut args = heapless::String::new();
            let _ = write!(args, "part={i}/{k} buffers={}", cfg.buffer_size);
            place(Service::Files, c, "bufd", args, false);
        }
        let mut args = heapless::String::new();
        // The file service restarts after a crash, keeping its open files (`user/fsd`).
        let _ = write!(args, "bufs={k} restart={FSD_RESTARTS}");
        place(Service::Files, cfg.files_core, "fsd", args, false);
    }
    if cfg.net {
        place(
            Service::Net,
            cfg.net_driver_core,
            "netdrv",
            heapless::String::new(),
            true,
        );
        place(
            Service::Net,
            cfg.net_server_core,
            "netd",
            heapless::String::new(),
            false,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> (Config, Vec<Problem<'_>>) {
        let mut cfg = Config::default();
        let mut problems = Vec::new();
        read_file(text, &mut cfg, |p| problems.push(p));
        (cfg, problems)
    }

    #[test]
    fn the_repository_file_reads_cleanly() {
        let text = include_str!("../../../user/boot.cfg");
        let (cfg, problems) = read(text);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(cfg.files);
    }

    #[test]
    fn placements_and_plan() {
        let (cfg, problems) = read(
            "# a comment\n\nservices = files, net\nbuffers.cores = 0,1 # two\nbuffers.size=128\n\
             files.core = 1\nnet.server.core = 1\n",
        );
        assert!(problems.is_empty(), "{problems:?}");
        let p = plan(&cfg, 2, |x| panic!("{x}"));
        let got: Vec<(usize, &str, &str, bool)> = p
            .iter()
            .map(|p| (p.core, p.program, p.args.as_str(), p.driver))
            .collect();
        assert_eq!(
            got,
            [
                (0, "blkdrv", "", true),
                (0, "bufd", "part=0/2 buffers=128", false),
                (1, "bufd", "part=1/2 buffers=128", false),
                (1, "fsd", "bufs=2 restart=3", false),
                (0, "netdrv", "", true),
                (1, "netd", "", false),
            ]
        );
    }

    #[test]
    fn malformed_lines_are_reported_and_defaults_kept() {
        let (cfg, problems) = read(
            "services = everything\ndisk.core = 1\nbuffers.cores = 0,x\nbuffers.cores = \
             0,1,2,3,4,5,6,7,8\nbuffers.size = 0\nfiles.core = 99\nfiles.core = -1\nbogus = 1\n\
             just words\n\u{fffd}\u{0}=\n=\n",
        );
        assert_eq!(cfg, Config::default());
        let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert!(problems[1].to_string().contains("core 0"));
        assert_eq!(
            problems[8].to_string(),
            "boot.cfg line 9: 'just words' ignored: not KEY = VALUE"
        );
    }

    #[test]
    fn boot_words_override_the_file() {
        let (mut cfg, _) = read("files.core = 1\nbuffers.cores = 1\n");
        let mut problems = Vec::new();
        apply_words(
            "smp=2 files.core=0 buffers.cores=0,1 services=none buffers.size=x start=0:hello",
            &mut cfg,
            |p| problems.push(p),
        );
        assert_eq!(cfg.files_core, 0);
        assert_eq!(cfg.buffer_cores.as_slice(), [0, 1]);
        assert!(!cfg.files && !cfg.net);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].text, "buffers.size=x");
        assert!(plan(&cfg, 4, |_| {}).is_empty());
    }

    #[test]
    fn a_core_not_in_use_goes_to_core_0() {
        let (cfg, _) = read("buffers.cores = 0,3\nfiles.core = 2\n");
        let mut problems = Vec::new();
        let p = plan(&cfg, 2, |x| problems.push(x));
        assert_eq!(problems.len(), 2);
        assert!(p.iter().all(|p| p.core == 0));
        assert_eq!(p.len(), 4);
    }
}
