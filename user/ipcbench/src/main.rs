//! `ipcbench [SAMPLES]`: the Musubi side of `cargo xtask bench ipc` (the request path's
//! costs; the Linux peer measures pipes, futexes and io_uring in the same QEMU
//! configuration).
//!
//! Each case is timed with `rdtsc`, which under QEMU's `-icount` advances by one per
//! instruction (of all cores together), so a figure is instructions per operation. A case
//! runs once to warm up and is then sampled SAMPLES times (default 5); a sample is the mean
//! over a fixed number of operations:
//!
//! | case | one operation | per sample |
//! |---|---|---|
//! | `null call` | `GETPID`: the floor every system call pays (for reading the others) | 1000 |
//! | `rendezvous round trip, same core` | a child on this core `CALL`s this process's endpoint; this process answers and waits for the next with one `REPLY_RECV` (the fast path: direct switches both ways) | 1000 |
//! | `rendezvous round trip, same core, registers` | the same with the messages in registers: `CALL_REGS` answered by `REPLY_RECV_REGS` (no user memory touched; the direct handoff writes each message into the other thread's saved registers) | 1000 |
//! | `rendezvous round trip, two cores, registers` | the register calls with the child on core 1 | 200 |
//! | `rendezvous round trip, same core, RECV+REPLY` | the same served the old way: `RECV`, then `REPLY` (three system calls per round trip) | 1000 |
//! | `rendezvous round trip, two cores` | `REPLY_RECV` with the child on core 1 (the calls travel by RPCC) | 200 |
//! | `rendezvous round trip with a 4 KiB ICA both ways, same core` | the same-core round trip, the call passing a one-page vregion (P3's ICA) and the answer passing it back | 1000 |
//! | `rendezvous round trip with a 4 KiB ICA both ways, two cores` | the same with the child on core 1 (the vregion is the child's, of core 1's pool) | 200 |
//! | `submit+collect NOP, batch K` (K = 1, 8, 64) | per request: K `SUBMIT(NOP)`s, then K `COLLECT(ANY)`s | 1024 requests |
//! | `ring NOP, batch K` (K = 1, 8, 64) | per request: K no-ops written to the submission ring, one `ENTER(K, K)`, K completions read from the completion ring (io_uring's shape) | 1024 requests |
//!
//! The round trips are timed by the caller (`ipcbench client EP CASE SAMPLES OPS`), which
//! prints their `BENCH` lines and ends with a one-way `SEND` that tells the server to stop.
//! Output: one line per sample,
//! `BENCH {"peer":"musubi","case":"...","unit":"instructions","per_op":123.4}`, then
//! `BENCH done`.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use ulib::abi::ipc::{self as api, Msg};
use ulib::abi::res::{ResId, Rights};
use ulib::abi::{Priority, ENDED_EXIT};
use ulib::bench::{self, rdtsc};
use ulib::ring::{self, Ring};
use ulib::{ipc, println, res, sys};

ulib::main!(main);

const DEFAULT_SAMPLES: usize = 5;
const NULL_CALLS: u64 = 1000;
const SAME_CORE_CALLS: u64 = 1000;
const TWO_CORE_CALLS: u64 = 200;
const REQUESTS: u64 = 1024;
const BATCHES: [u64; 3] = [1, 8, 64];
/// Submission entries of the ring (the largest batch).
const RING_ENTRIES: u64 = 64;
/// Label of a call the server answers.
const ECHO: u64 = 1;
/// Label of the one-way message that ends the server's loop.
const STOP: u64 = 2;
/// The round trips whose calls pass an ICA (the server passes it back).
const ICA_SAME_CORE: &str = "rendezvous round trip with a 4 KiB ICA both ways, same core";
const ICA_TWO_CORES: &str = "rendezvous round trip with a 4 KiB ICA both ways, two cores";
/// The round trips with the messages in registers.
const REGS_SAME_CORE: &str = "rendezvous round trip, same core, registers";
const REGS_TWO_CORES: &str = "rendezvous round trip, two cores, registers";
/// Where the client attaches its ICA first.
const ICA_AT: u64 = 0x0000_5200_0000_0000;

fn main(args: &[&str]) -> i32 {
    if args.get(1) == Some(&"client") {
        return match client(args) {
            Ok(()) => 0,
            Err(e) => {
                println!("BENCH error {{\"case\":\"client\",\"error\":\"{e}\"}}");
                1
            }
        };
    }
    let samples = match args.get(1).map(|a| a.parse::<usize>()) {
        None => DEFAULT_SAMPLES,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            println!("usage: ipcbench [SAMPLES]");
            return 2;
        }
    };
    match parent(samples) {
        Ok(()) => {
            bench::done();
            0
        }
        Err(e) => {
            println!("BENCH error {{\"case\":\"ipcbench\",\"error\":\"{e}\"}}");
            1
        }
    }
}

fn parent(samples: usize) -> Result<(), &'static str> {
    bench::samples("null call", samples, NULL_CALLS, |n| {
        let start = rdtsc();
        for _ in 0..n {
            sys::getpid().map_err(|_| "getpid failed")?;
        }
        Ok(rdtsc() - start)
    })?;
    let ep = ipc::open_endpoint("here/endpoint/ipcbench", Rights(0x2f))
        .map_err(|_| "opening the endpoint failed")?;
    let here = sys::core().map_err(|_| "core failed")?;
    let mut cores = [ulib::abi::CoreInfo::default(); ulib::abi::MAX_CORES];
    let n = sys::cores(&mut cores).map_err(|_| "cores failed")?;
    let online = cores[..n].iter().filter(|c| c.online != 0).count();
    rendezvous(
        ep,
        "rendezvous round trip, same core",
        here,
        samples,
        SAME_CORE_CALLS,
        Serve::ReplyRecv,
    )?;
    rendezvous(
        ep,
        REGS_SAME_CORE,
        here,
        samples,
        SAME_CORE_CALLS,
        Serve::Regs,
    )?;
    if online >= 2 {
        rendezvous(
            ep,
            REGS_TWO_CORES,
            (here + 1) % online,
            samples,
            TWO_CORE_CALLS,
            Serve::Regs,
        )?;
    }
    rendezvous(
        ep,
        "rendezvous round trip, same core, RECV+REPLY",
        here,
        samples,
        SAME_CORE_CALLS,
        Serve::RecvThenReply,
    )?;
    if online >= 2 {
        rendezvous(
            ep,
            "rendezvous round trip, two cores",
            (here + 1) % online,
            samples,
            TWO_CORE_CALLS,
            Serve::ReplyRecv,
        )?;
    }
    rendezvous(
        ep,
        ICA_SAME_CORE,
        here,
        samples,
        SAME_CORE_CALLS,
        Serve::ReplyRecv,
    )?;
    if online >= 2 {
        rendezvous(
            ep,
            ICA_TWO_CORES,
            (here + 1) % online,
            samples,
            TWO_CORE_CALLS,
            Serve::ReplyRecv,
        )?;
    }
    res::close(ep).map_err(|_| "closing the endpoint failed")?;
    for k in BATCHES {
        let case = format!("submit+collect NOP, batch {k}");
        bench::samples(&case, samples, REQUESTS, |n| batch(k, n))?;
    }
    let mut r =
        Ring::setup(ring::DEFAULT_ADDRESS, RING_ENTRIES).map_err(|_| "ring setup failed")?;
    for k in BATCHES {
        let case = format!("ring NOP, batch {k}");
        bench::samples(&case, samples, REQUESTS, |n| ring_batch(&mut r, k, n))?;
    }
    Ok(())
}

/// `n` requests (a multiple of `k`) in rounds of `k` no-ops written to the ring, one ENTER
/// that takes them and waits for their `k` completions, and `k` completions read.
fn ring_batch(r: &mut Ring, k: u64, n: u64) -> Result<u64, &'static str> {
    let nop = ipc::op(api::SUBMIT_NOP, 0, [0; 4]);
    let start = rdtsc();
    for _ in 0..n / k {
        for i in 0..k {
            if !r.push(i, &nop) {
                return Err("the submission ring is full");
            }
        }
        if r.enter(k, k, u64::MAX) != Ok(k) {
            return Err("enter failed");
        }
        for i in 0..k {
            match r.pop() {
                Some(c) if c.status == 0 && c.user_data == i => {}
                _ => return Err("a no-op failed"),
            }
        }
    }
    Ok(rdtsc() - start)
}

/// How the server answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Serve {
    /// One `REPLY_RECV` per request (answer and wait in one entry).
    ReplyRecv,
    /// `RECV`, then `REPLY`.
    RecvThenReply,
    /// One `REPLY_RECV_REGS` per request (the client calls with `CALL_REGS`).
    Regs,
}

/// Serve a client on `core` until it says stop, then reap it.
fn rendezvous(
    ep: ResId,
    case: &str,
    core: usize,
    samples: usize,
    ops: u64,
    serve: Serve,
) -> Result<(), &'static str> {
    let ep_arg = format!("{:#x}", ep.0);
    let samples_arg = format!("{samples}");
    let ops_arg = format!("{ops}");
    let child = sys::spawn_on(
        "ipcbench",
        &["client", &ep_arg, case, &samples_arg, &ops_arg],
        Priority::App,
        core,
    )
    .map_err(|_| "spawning the client failed")?;
    match serve {
        Serve::Regs => serve_regs(ep)?,
        Serve::ReplyRecv => serve_memory(ep, false)?,
        Serve::RecvThenReply => serve_memory(ep, true)?,
    }
    match sys::wait(Some(child)) {
        Ok((_, s)) if s.how == ENDED_EXIT && s.code == 0 => Ok(()),
        _ => Err("the client failed"),
    }
}

/// The register calls' server: answer each `ECHO` with its word + 1 and wait for the next
/// request, in one `REPLY_RECV_REGS`, until `STOP`. A loop of its own (no ICA, no other
/// way of serving to choose at each request), so that the figure is the calls' cost and
/// not the harness's; it does what [`serve_memory`] does for a plain `ECHO`.
fn serve_regs(ep: ResId) -> Result<(), &'static str> {
    let (mut handle, mut value) = (0, 0);
    let mut reply = Msg {
        label: ECHO,
        ..Msg::default()
    };
    loop {
        let r = ipc::reply_recv_regs(handle, value, &reply, ep)
            .map_err(|_| "reply_recv_regs failed")?;
        match r.msg.label {
            ECHO => {
                value = r.msg.words[0] + 1;
                reply.words[0] = value;
                handle = r.request;
            }
            STOP => return Ok(()),
            _ => return Err("unexpected message"),
        }
    }
}

/// The server of the cases whose messages travel through memory: one `REPLY_RECV` per
/// request, or (`recv_then_reply`) `RECV`, then `REPLY`.
fn serve_memory(ep: ResId, recv_then_reply: bool) -> Result<(), &'static str> {
    // The answer to the request before (handle 0: none yet).
    let mut answer = (0, 0, Msg::default());
    loop {
        let r = if recv_then_reply {
            ipc::recv(ep, u64::MAX).map_err(|_| "recv failed")?
        } else {
            ipc::reply_recv(answer.0, answer.1, &answer.2, ep, u64::MAX)
                .map_err(|_| "reply_recv failed")?
        };
        match r.msg.label & !api::MSG_ICA {
            ECHO => {
                let mut reply = Msg {
                    label: ECHO,
                    words: [r.msg.words[0] + 1, 0, 0, 0, 0, 0],
                };
                // An ICA goes back with the answer.
                if let Some((region, _)) = ipc::ica_at(&r.msg) {
                    reply = ipc::with_ica(reply, region);
                }
                answer = (r.request, r.msg.words[0] + 1, reply);
                if recv_then_reply {
                    ipc::reply(answer.0, answer.1, &answer.2).map_err(|_| "reply failed")?;
                    answer.0 = 0;
                }
            }
            STOP => return Ok(()),
            _ => return Err("unexpected message"),
        }
    }
}

/// `ipcbench client EP CASE SAMPLES OPS`: time OPS calls per sample, then tell the server
/// to stop.
fn client(args: &[&str]) -> Result<(), &'static str> {
    let ep = args
        .get(2)
        .and_then(|a| ResId::parse(a))
        .ok_or("missing endpoint")?;
    let case = args.get(3).ok_or("missing case")?;
    let samples = args
        .get(4)
        .and_then(|a| a.parse().ok())
        .ok_or("missing samples")?;
    let ops = args
        .get(5)
        .and_then(|a| a.parse().ok())
        .ok_or("missing ops")?;
    // The ICA cases pass a one-page vregion with every call; it comes back with the answer.
    let ica = if case.contains("ICA") {
        let me = sys::getpid().map_err(|_| "getpid failed")?;
        let vs = res::open_vspace(
            &format!("here/vspace/ipcb{}", me.0),
            None,
            Rights::OWNER_ALL,
        )
        .map_err(|_| "opening the vspace failed")?;
        let v = res::open_vregion(
            &format!("here/vregion/ipcb{}", me.0),
            4096,
            Rights::OWNER_ALL,
        )
        .map_err(|_| "opening the vregion failed")?;
        res::attach(vs, v, ICA_AT, true).map_err(|_| "attaching failed")?;
        Some((vs, v))
    } else {
        None
    };
    let mut at = ICA_AT;
    let r = if case.contains("registers") {
        bench::samples(case, samples, ops, |n| calls_regs(ep, n))
    } else {
        bench::samples(case, samples, ops, |n| {
            let mut msg = Msg {
                label: ECHO,
                ..Msg::default()
            };
            if let Some((_, v)) = ica {
                msg = ipc::with_ica(msg, v);
            }
            let start = rdtsc();
            for i in 0..n {
                msg.words[0] = i;
                let (v, reply) = ipc::call(ep, &msg).map_err(|_| "call failed")?;
                if v != i + 1 {
                    return Err("wrong reply");
                }
                if ica.is_some() {
                    at = ipc::ica_at(&reply).ok_or("the ICA did not come back")?.1;
                }
            }
            Ok(rdtsc() - start)
        })
    };
    if let Some((vs, v)) = ica {
        res::detach(vs, at).map_err(|_| "detaching failed")?;
        res::close(v).map_err(|_| "closing the vregion failed")?;
        res::close(vs).map_err(|_| "closing the vspace failed")?;
    }
    let stop = Msg {
        label: STOP,
        ..Msg::default()
    };
    ipc::send(ep, &stop).map_err(|_| "send failed")?;
    r
}

/// `n` register calls of `ECHO` with word 0 = `i` to `ep`, each answer checked to be
/// `i + 1` (a loop of its own, as [`serve_regs`] is).
fn calls_regs(ep: ResId, n: u64) -> Result<u64, &'static str> {
    let mut msg = Msg {
        label: ECHO,
        ..Msg::default()
    };
    let start = rdtsc();
    for i in 0..n {
        msg.words[0] = i;
        let (v, _) = ipc::call_regs(ep, &msg).map_err(|_| "call failed")?;
        if v != i + 1 {
            return Err("wrong reply");
        }
    }
    Ok(rdtsc() - start)
}

/// `n` requests (a multiple of `k`) in rounds of `k` no-op submissions and `k` collections.
fn batch(k: u64, n: u64) -> Result<u64, &'static str> {
    let nop = ipc::op(api::SUBMIT_NOP, 0, [0; 4]);
    let start = rdtsc();
    for _ in 0..n / k {
        for _ in 0..k {
            ipc::submit(&nop).map_err(|_| "submit failed")?;
        }
        for _ in 0..k {
            let c = ipc::collect(api::ANY, u64::MAX).map_err(|_| "collect failed")?;
            if c.status != 0 {
                return Err("a no-op failed");
            }
        }
    }
    Ok(rdtsc() - start)
}
