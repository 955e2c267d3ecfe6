//! P0 Table 2: what each file call costs through the process network, and how many
//! rendezvous messages it causes (the paper counts them per call: read 10, write 10,
//! open 33, close 12, exec 90 on one processor).
//!
//! The files are put on the disk by xtask before the boot: `HIT.DAT` (16 KiB, read once
//! before each sample so its sectors are in the file service's cache) and `MISS.DAT`
//! (512 KiB, never read before: every sample reads the next 32 sectors of it, each for the
//! first time). Every byte read is checked against [`pattern`]. The IPC unit costs for the
//! share of time in IPC are measured beside them: a rendezvous round trip carrying a 4 KiB
//! ICA both ways (what one `fs` or `blk` request carries), with the caller on this core and
//! on the other core.

use crate::{cores_online, pattern, reap, sampled, Meter, Res};
use alloc::format;
use ulib::abi::ipc::{self as api, Msg};
use ulib::abi::res::{ResId, Rights};
use ulib::abi::{Pid, Priority};
use ulib::bench::rdtsc;
use ulib::fs::{self, MODE_READ, MODE_WRITE};
use ulib::{fnid, ipc, res, sys};

/// A read or write: one sector, as in the paper's Table 2 (512 bytes).
const BLOCK: usize = 512;
pub const HIT_FILE: &str = "HIT.DAT";
const HIT_BLOCKS: u64 = 32;
const MISS_FILE: &str = "MISS.DAT";
const MISS_BLOCKS: u64 = 1024;
/// Operations per sample.
const RW_OPS: u64 = 32;
const OPEN_OPS: u64 = 16;
const EXEC_OPS: u64 = 8;
/// The program Table 2's exec starts, as xtask puts it on the disk (Figure 3's first copy).
const EXEC_IMAGE: &str = "BIN/NOP0";
const EXEC_ARCHIVE: &str = "exec from the boot archive (SPAWN, no file service)";
const RTT_OPS: u64 = 200;
/// How long to wait for the file service to appear (virtual time).
const FS_WAIT_NS: u64 = 60_000_000_000;
/// Labels of the round trip's messages.
const ECHO: u64 = 1;
const STOP: u64 = 2;
const ICA_AT: u64 = 0x0000_5600_0000_0000;

pub const ICA_SETUP: &str = "a request's ICA set up and taken down (ulib::fs)";
pub const RTT_SAME: &str = "rendezvous round trip with a 4 KiB ICA, same core";
pub const RTT_CROSS: &str = "rendezvous round trip with a 4 KiB ICA, two cores";

pub fn run(samples: u64) -> Res<()> {
    if samples == 0 || (samples + 1) * RW_OPS > MISS_BLOCKS {
        return Err("SAMPLES must be 1..31 (MISS.DAT holds 32 samples of fresh sectors)");
    }
    wait_for_fs()?;
    crate::calibrate()?;
    ica_setup(samples)?;
    read_hit(samples)?;
    read_miss(samples)?;
    write(samples)?;
    crate::table4::run(samples, false)?;
    open_close(samples)?;
    exec(samples)?;
    round_trips(samples)?;
    crate::pipes::round_trips(samples)
}

pub fn wait_for_fs() -> Res<()> {
    let end = sys::clock_ns().map_err(|_| "clock")? + FS_WAIT_NS;
    fnid::wait(ulib::abi::fs::FN_FS, FS_WAIT_NS)
        .map_err(|_| "the file service fs never appeared")?;
    // Registered is not yet serving: wait for the volume to answer.
    while fs::stat(HIT_FILE).is_err() {
        if sys::clock_ns().map_err(|_| "clock")? > end {
            return Err("HIT.DAT is not on the disk (fs does not answer)");
        }
        let _ = sys::sleep_ns(10_000_000);
    }
    Ok(())
}

/// Read one block of `fd` and check it is the block at `offset`.
pub fn read_block(fd: fs::Fd, offset: u64, buf: &mut [u8; BLOCK]) -> Res<()> {
    if fs::read(fd, buf).map_err(|_| "read failed")? != BLOCK {
        return Err("short read");
    }
    check(offset, buf)
}

fn check(offset: u64, buf: &[u8]) -> Res<()> {
    let ok = buf
        .iter()
        .enumerate()
        .all(|(i, &b)| b == pattern(offset + i as u64));
    ok.then_some(()).ok_or("read returned wrong data")
}

/// What `ulib::fs` does around every request besides the rendezvous: open a 4 KiB vregion
/// for its ICA, attach it, detach it, close it (for reading a file call's cost by its
/// parts; the page itself is allocated and zeroed where it is first written, which a read
/// leaves to the server).
fn ica_setup(samples: u64) -> Res<()> {
    const AT: u64 = 0x0000_5700_0000_0000;
    let me = sys::getpid().map_err(|_| "getpid")?;
    sampled(ICA_SETUP, "instructions", samples, RW_OPS, |_, ops, m| {
        for _ in 0..ops {
            m.start()?;
            let v = res::open_vregion(
                &format!("here/vregion/set{}", me.0),
                4096,
                Rights::OWNER_ALL,
            )
            .map_err(|_| "opening a vregion failed")?;
            res::attach_here(v, AT, true).map_err(|_| "attaching failed")?;
            res::detach_here(AT).map_err(|_| "detaching failed")?;
            res::close(v).map_err(|_| "closing the vregion failed")?;
            m.stop()?;
        }
        Ok(())
    })
}

fn read_hit(samples: u64) -> Res<()> {
    let mut buf = [0u8; BLOCK];
    sampled("read hit", "instructions", samples, RW_OPS, |_, ops, m| {
        // Warm: the whole file through the cache, then measure reading it again.
        let fd = fs::open(HIT_FILE, MODE_READ).map_err(|_| "open HIT.DAT failed")?;
        for b in 0..HIT_BLOCKS {
            read_block(fd, b * BLOCK as u64, &mut buf)?;
        }
        fs::close(fd).map_err(|_| "close failed")?;
        let fd = fs::open(HIT_FILE, MODE_READ).map_err(|_| "open HIT.DAT failed")?;
        let mut r = Ok(());
        for b in 0..ops {
            m.start()?;
            r = fs::read(fd, &mut buf).map_err(|_| "read failed").map(drop);
            m.stop()?;
            if r.is_err() {
                break;
            }
            check(b * BLOCK as u64, &buf)?;
        }
        fs::close(fd).map_err(|_| "close failed")?;
        r
    })
}

fn read_miss(samples: u64) -> Res<()> {
    let mut buf = [0u8; BLOCK];
    let fd = fs::open(MISS_FILE, MODE_READ).map_err(|_| "open MISS.DAT failed")?;
    // Sample s reads blocks s*ops.. for the first time.
    let r = sampled("read miss", "instructions", samples, RW_OPS, |s, ops, m| {
        for b in 0..ops {
            m.start()?;
            let n = fs::read(fd, &mut buf).map_err(|_| "read failed")?;
            m.stop()?;
            if n != BLOCK {
                return Err("short read");
            }
            check((s * ops + b) * BLOCK as u64, &buf)?;
        }
        Ok(())
    });
    fs::close(fd).map_err(|_| "close failed")?;
    r
}

fn write(samples: u64) -> Res<()> {
    let block: [u8; BLOCK] = core::array::from_fn(|i| pattern(i as u64));
    sampled("write", "instructions", samples, RW_OPS, |s, ops, m| {
        let name = format!("W{s}.DAT");
        let fd = fs::open(&name, MODE_WRITE).map_err(|_| "open for writing failed")?;
        for _ in 0..ops {
            m.start()?;
            let n = fs::write(fd, &block).map_err(|_| "write failed")?;
            m.stop()?;
            if n != BLOCK {
                return Err("short write");
            }
        }
        fs::close(fd).map_err(|_| "close failed")?;
        let st = fs::stat(&name).map_err(|_| "stat failed")?;
        if st.size != ops * BLOCK as u64 {
            return Err("the written file has the wrong size");
        }
        fs::unlink(&name).map_err(|_| "unlink failed")
    })
}

fn open_close(samples: u64) -> Res<()> {
    sampled("open", "instructions", samples, OPEN_OPS, |_, ops, m| {
        for _ in 0..ops {
            m.start()?;
            let fd = fs::open(HIT_FILE, MODE_READ).map_err(|_| "open failed");
            m.stop()?;
            fs::close(fd?).map_err(|_| "close failed")?;
        }
        Ok(())
    })?;
    sampled("close", "instructions", samples, OPEN_OPS, |_, ops, m| {
        for _ in 0..ops {
            let fd = fs::open(HIT_FILE, MODE_READ).map_err(|_| "open failed")?;
            m.start()?;
            let r = fs::close(fd).map_err(|_| "close failed");
            m.stop()?;
            r?;
        }
        Ok(())
    })
}

/// exec, as P0's: the program's image (`nop`, on the disk as `BIN/NOP0`) read through the
/// process network (`fsd`, then the buffer manager, whose buffers hold it after the
/// unprinted first sample, as the paper's exec'd program was in its buffers), started from
/// that image (`SPAWN_IMAGE`) and waited for. Then, to read it by, the same start from the
/// boot archive, which the kernel holds in memory (`SPAWN`: no file service at all).
fn exec(samples: u64) -> Res<()> {
    exec_case("exec", samples, || {
        let image = fs::read_all(EXEC_IMAGE).map_err(|_| "reading BIN/NOP0 failed")?;
        sys::spawn_image(&image, "nop", &[], Priority::App, None).map_err(|_| "spawn_image failed")
    })?;
    exec_case(EXEC_ARCHIVE, samples, || {
        sys::spawn("nop", &[], Priority::App).map_err(|_| "spawn failed")
    })
}

/// Sample `case`: each operation starts `nop` with `start` and waits for its end.
fn exec_case(case: &str, samples: u64, start: impl Fn() -> Res<Pid>) -> Res<()> {
    sampled(case, "instructions", samples, EXEC_OPS, |_, ops, m| {
        for _ in 0..ops {
            m.start()?;
            let r = start().and_then(|p| reap(p, "nop failed"));
            m.stop()?;
            r?;
        }
        Ok(())
    })
}

/// The round trips with a one-page ICA both ways: the caller (`agora echo`) on this core,
/// then on the other core (if there is one).
fn round_trips(samples: u64) -> Res<()> {
    let me = sys::getpid().map_err(|_| "getpid")?;
    let ep = ipc::open_endpoint(&format!("here/endpoint/agora{}", me.0), Rights(0x2f))
        .map_err(|_| "opening the endpoint failed")?;
    let here = me.core();
    let online = cores_online()?;
    let mut r = serve(ep, RTT_SAME, here, samples);
    if r.is_ok() && online >= 2 {
        r = serve(ep, RTT_CROSS, (here + 1) % online, samples);
    }
    let _ = res::close(ep);
    r
}

/// Answer `agora echo` on `core` (it times the calls and prints the samples) until it
/// says stop.
fn serve(ep: ResId, case: &str, core: usize, samples: u64) -> Res<()> {
    let args = [
        "echo",
        &format!("{:#x}", ep.0),
        &format!("{samples}"),
        &format!("{RTT_OPS}"),
        case,
    ];
    let child = sys::spawn_on("agora", &args, Priority::App, core)
        .map_err(|_| "spawning the echo caller failed")?;
    let mut answer = (0, 0, Msg::default());
    loop {
        let r = ipc::reply_recv(answer.0, answer.1, &answer.2, ep, u64::MAX)
            .map_err(|_| "reply_recv failed")?;
        match r.msg.label & !api::MSG_ICA {
            ECHO => {
                let mut reply = Msg {
                    label: ECHO,
                    ..Msg::default()
                };
                if let Some((region, _)) = ipc::ica_at(&r.msg) {
                    reply = ipc::with_ica(reply, region);
                }
                answer = (r.request, r.msg.words[0] + 1, reply);
            }
            STOP => break,
            _ => return Err("unexpected message"),
        }
    }
    reap(child, "the echo caller failed")
}

/// `agora echo EP SAMPLES OPS CASE`: call EP OPS times per sample, passing a one-page ICA
/// that comes back with each answer; print the samples; then send STOP.
pub fn echo(args: &[&str]) -> Res<()> {
    let ep = args
        .first()
        .and_then(|a| ResId::parse(a))
        .ok_or("endpoint")?;
    let samples: u64 = args.get(1).and_then(|a| a.parse().ok()).ok_or("samples")?;
    let ops: u64 = args.get(2).and_then(|a| a.parse().ok()).ok_or("ops")?;
    let case = *args.get(3).ok_or("case")?;
    let me = sys::getpid().map_err(|_| "getpid")?;
    let v = res::open_vregion(
        &format!("here/vregion/echo{}", me.0),
        4096,
        Rights::OWNER_ALL,
    )
    .map_err(|_| "opening the vregion failed")?;
    res::attach_here(v, ICA_AT, true).map_err(|_| "attaching failed")?;
    let mut at = ICA_AT;
    let r = sampled(case, "instructions", samples, ops, |_, n, m: &mut Meter| {
        let mut msg = ipc::with_ica(
            Msg {
                label: ECHO,
                ..Msg::default()
            },
            v,
        );
        m.start()?;
        let t0 = rdtsc();
        for i in 0..n {
            msg.words[0] = i;
            let (value, reply) = ipc::call(ep, &msg).map_err(|_| "call failed")?;
            if value != i + 1 {
                return Err("wrong answer");
            }
            at = ipc::ica_at(&reply).ok_or("the ICA did not come back")?.1;
        }
        m.stop_with(rdtsc() - t0)
    });
    let _ = res::detach_here(at);
    let _ = res::close(v);
    let stop = Msg {
        label: STOP,
        ..Msg::default()
    };
    ipc::send(ep, &stop).map_err(|_| "send failed")?;
    r
}
