//! `netprobe MAC`: proves that `netdrv` moves real frames (issue 15). It registers
//! `net.udp` itself (so it must run without `netd`), asks `net.drv` for `DRV_INFO` (the MAC
//! must be `MAC`, the one xtask gave QEMU), sends an ARP request for QEMU's gateway
//! 10.0.2.2 through `DRV_TX` in a frame ICA, and waits for the frames `netdrv` submits
//! (`UDP_FRAMES_IN` batches) until QEMU's ARP reply is among them (giving every frame ICA
//! back). Before, it checks that the driver refuses nonsense: a frame or a batch of frames
//! (`DRV_TX_BATCH`) from a program that does not serve `net.udp` (`Denied`), bad lengths
//! and torn batches (`InvalidArgument`). Then it unregisters `net.udp` and prints
//! `netprobe: ok`.
//!
//! Waits are bounded only as hang guards: the request is sent again up to [`TRIES`] times
//! while nothing answers.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use ulib::abi::ipc::Msg;
use ulib::abi::net::{
    self, batch, DRV_INFO, DRV_TX, DRV_TX_BATCH, FRAME_ICA_SIZE, FRAME_MAX, UDP_FRAMES_IN,
    UDP_FRAME_IN,
};
use ulib::abi::res::{Op, Rights};
use ulib::abi::Error;
use ulib::{fnid, ipc, println, res};

ulib::main!(main);

const TRIES: u32 = 20;
const TX_AT: u64 = 0x0000_5300_0000_0000;
const ME: [u8; 4] = [10, 0, 2, 15];
const GATEWAY: [u8; 4] = [10, 0, 2, 2];

fn main(args: &[&str]) -> i32 {
    let Some(want) = args.get(1).and_then(|s| parse_mac(s)) else {
        println!("netprobe: usage: netprobe MAC (aa:bb:cc:dd:ee:ff)");
        return 1;
    };
    match run(want) {
        Ok(()) => {
            println!("netprobe: ok");
            0
        }
        Err(e) => {
            println!("netprobe: FAIL {e}");
            1
        }
    }
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in out.iter_mut() {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

fn run(want: [u8; 6]) -> Result<(), String> {
    let rights = Rights(0x0f | Rights::others(Op::Write));
    let ep = ipc::open_endpoint("here/endpoint/netprobe", rights)
        .map_err(|e| format!("endpoint: {e}"))?;
    not_the_server()?;
    let udp = fnid::register(net::FN_UDP, ep).map_err(|e| format!("register net.udp: {e}"))?;
    let r = probe(ep, want);
    let _ = fnid::unregister(udp);
    r
}

/// While this program does not serve `net.udp` (nobody does yet), the driver sends no
/// frame of its: `Denied` (a regression: any program could put any frame on the wire,
/// past `netd`).
fn not_the_server() -> Result<(), String> {
    let drv = fnid::wait(net::FN_DRV, 10_000_000_000).map_err(|_| "net.drv never registered")?;
    let region = res::open_vregion(
        "here/vregion/netprobe-nt",
        FRAME_ICA_SIZE,
        Rights::OWNER_ALL,
    )
    .map_err(|e| format!("vregion: {e}"))?;
    let r = res::attach_here(region, TX_AT, true)
        .map_err(|e| format!("attach: {e}"))
        .and_then(|()| {
            let msg = ipc::with_ica(
                Msg {
                    label: DRV_TX,
                    words: [60, 0, 0, 0, 0, 0],
                },
                region,
            );
            let (value, reply) = ipc::call(drv.as_target(), &msg)
                .map_err(|e| format!("DRV_TX by another program: {e}"))?;
            if let Some((_, a)) = ipc::ica_at(&reply) {
                let _ = res::detach_here(a);
            }
            if value != Error::Denied as u64 {
                return Err(format!(
                    "DRV_TX by another program answered {value}, not Denied"
                ));
            }
            // The same frame in a batch (the page came back and was let go above).
            res::attach_here(region, TX_AT, true).map_err(|e| format!("attach: {e}"))?;
            // SAFETY: the region is attached writable at TX_AT, FRAME_ICA_SIZE bytes.
            let page = unsafe {
                core::slice::from_raw_parts_mut(TX_AT as *mut u8, FRAME_ICA_SIZE as usize)
            };
            batch::Writer::new(page)
                .push(0, 0, &[0; 60])
                .map_err(|_| "a batch of one frame")?;
            let msg = ipc::with_ica(
                Msg {
                    label: DRV_TX_BATCH,
                    words: [1, batch::record_size(60) as u64, 0, 0, 0, 0],
                },
                region,
            );
            let (value, reply) = ipc::call(drv.as_target(), &msg)
                .map_err(|e| format!("DRV_TX_BATCH by another program: {e}"))?;
            if let Some((_, a)) = ipc::ica_at(&reply) {
                let _ = res::detach_here(a);
            }
            if value != Error::Denied as u64 || reply.words[0] != 0 {
                return Err(format!(
                    "DRV_TX_BATCH by another program answered {value}, {} sent, not Denied",
                    reply.words[0]
                ));
            }
            Ok(())
        });
    let _ = res::close(region);
    r
}

fn probe(ep: ulib::abi::res::ResId, want: [u8; 6]) -> Result<(), String> {
    // net.drv: wait until the driver has registered (a hang guard bounds it).
    let drv = fnid::wait(net::FN_DRV, 10_000_000_000).map_err(|_| "net.drv never registered")?;
    let drv = ulib::abi::res::ResId(drv.0);
    let (_, info) = ipc::call(
        drv,
        &Msg {
            label: DRV_INFO,
            ..Msg::default()
        },
    )
    .map_err(|e| format!("DRV_INFO: {e}"))?;
    let mac_bytes = info.words[0].to_le_bytes();
    let mac: [u8; 6] = mac_bytes[..6].try_into().unwrap_or([0; 6]);
    if mac != want {
        return Err(format!("DRV_INFO's MAC {mac:02x?}, QEMU's {want:02x?}"));
    }
    println!(
        "netprobe: net.drv mac {mac:02x?} link {} tx {} rx {}",
        info.words[1], info.words[2], info.words[3]
    );
    // The ARP request, in a frame ICA.
    let region = res::open_vregion(
        "here/vregion/netprobe-tx",
        FRAME_ICA_SIZE,
        Rights::OWNER_ALL,
    )
    .map_err(|e| format!("vregion: {e}"))?;
    let mut at = TX_AT;
    let r = bad_sends(drv, region, &mut at).and_then(|()| exchange(ep, drv, region, mac, &mut at));
    let _ = res::detach_here(at);
    let _ = res::close(region);
    r
}

/// The MAC of `net.drv` (`DRV_INFO`).
fn mac_of(drv: ulib::abi::res::ResId) -> Result<[u8; 6], String> {
    let info = Msg {
        label: DRV_INFO,
        ..Msg::default()
    };
    let (_, r) = ipc::call(drv, &info).map_err(|e| format!("DRV_INFO: {e}"))?;
    Ok(r.words[0].to_le_bytes()[..6].try_into().unwrap_or([0; 6]))
}

/// An ARP request from 10.0.2.15 at `mac` for the gateway 10.0.2.2 (60 bytes).
fn arp_request(mac: [u8; 6]) -> [u8; 60] {
    let mut frame = [0u8; 60];
    frame[0..6].copy_from_slice(&[0xff; 6]);
    frame[6..12].copy_from_slice(&mac);
    frame[12..14].copy_from_slice(&[0x08, 0x06]);
    frame[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    frame[22..28].copy_from_slice(&mac);
    frame[28..32].copy_from_slice(&ME);
    frame[38..42].copy_from_slice(&GATEWAY);
    frame
}

fn exchange(
    ep: ulib::abi::res::ResId,
    drv: ulib::abi::res::ResId,
    region: ulib::abi::res::ResId,
    mac: [u8; 6],
    at: &mut u64,
) -> Result<(), String> {
    res::attach_here(region, TX_AT, true).map_err(|e| format!("attach: {e}"))?;
    // Frames the driver sent before (the answers to the checks' good frames) are taken
    // and given back first: only an answer to the request below counts.
    for _ in 0..1000 {
        let Ok(r) = ipc::recv(ep, 0) else { break };
        let back = match ipc::ica_at(&r.msg) {
            Some((fr, _)) => ipc::with_ica(Msg::default(), fr),
            None => Msg::default(),
        };
        let _ = ipc::reply(r.request, 0, &back);
    }
    let frame = arp_request(mac);
    for _ in 0..TRIES {
        // SAFETY: the region is attached writable at `*at`, 4096 bytes.
        unsafe { core::ptr::copy_nonoverlapping(frame.as_ptr(), *at as *mut u8, frame.len()) };
        let msg = ipc::with_ica(
            Msg {
                label: DRV_TX,
                words: [60, 0, 0, 0, 0, 0],
            },
            region,
        );
        let (value, reply) = ipc::call(drv, &msg).map_err(|e| format!("DRV_TX: {e}"))?;
        *at = ipc::ica_at(&reply)
            .map(|(_, a)| a)
            .ok_or("DRV_TX's reply without the ICA")?;
        if value != 0 {
            return Err(format!("DRV_TX: {}", Error::from_code(value)));
        }
        // Frames from the driver until the reply, or a quiet 200 ms (then send again).
        loop {
            let r = match ipc::recv(ep, 200_000_000) {
                Ok(r) => r,
                Err(Error::TimedOut) => break,
                Err(e) => return Err(format!("recv: {e}")),
            };
            let label = r.msg.label & !ulib::abi::ipc::MSG_ICA;
            let Some((fr, fat)) = ipc::ica_at(&r.msg) else {
                let _ = ipc::reply(r.request, Error::InvalidArgument as u64, &Msg::default());
                continue;
            };
            // SAFETY: the frame ICA is mapped at `fat`, FRAME_ICA_SIZE bytes, until the
            // reply passes it back.
            let page =
                unsafe { core::slice::from_raw_parts(fat as *const u8, FRAME_ICA_SIZE as usize) };
            let [w0, w1, ..] = r.msg.words;
            // One frame (`UDP_FRAME_IN`), or the frames of one wake (`UDP_FRAMES_IN`).
            let reply = match label {
                UDP_FRAME_IN => page
                    .get(..w0 as usize)
                    .filter(|f| arp_reply(f, mac))
                    .map(|f| f[22..28].to_vec()),
                UDP_FRAMES_IN => batch::Reader::new(page, w0 as usize, w1 as usize, FRAME_MAX)
                    .into_iter()
                    .flatten()
                    .map_while(Result::ok)
                    .find(|(_, f)| arp_reply(f, mac))
                    .map(|(_, f)| f[22..28].to_vec()),
                _ => None,
            };
            let is_reply = reply.is_some();
            let gateway = reply.unwrap_or_default();
            // The ICA goes back (unmapped here from now on).
            let _ = ipc::reply(r.request, 0, &ipc::with_ica(Msg::default(), fr));
            if is_reply {
                println!("netprobe: ARP reply: 10.0.2.2 is at {gateway:02x?}");
                return Ok(());
            }
        }
    }
    Err(format!("no ARP reply from 10.0.2.2 after {TRIES} requests"))
}

/// `DRV_TX` refuses nonsense with `InvalidArgument` and gives the ICA back: no ICA, length
/// 0, a length beyond `FRAME_MAX`.
fn bad_sends(
    drv: ulib::abi::res::ResId,
    region: ulib::abi::res::ResId,
    at: &mut u64,
) -> Result<(), String> {
    let bare = Msg {
        label: DRV_TX,
        words: [60, 0, 0, 0, 0, 0],
    };
    let (value, _) = ipc::call(drv, &bare).map_err(|e| format!("DRV_TX without ICA: {e}"))?;
    if value != Error::InvalidArgument as u64 {
        return Err(format!("DRV_TX without ICA answered {value}"));
    }
    res::attach_here(region, TX_AT, true).map_err(|e| format!("attach: {e}"))?;
    for len in [0, net::FRAME_MAX as u64 + 1, u64::MAX] {
        let msg = ipc::with_ica(
            Msg {
                label: DRV_TX,
                words: [len, 0, 0, 0, 0, 0],
            },
            region,
        );
        let (value, reply) = ipc::call(drv, &msg).map_err(|e| format!("DRV_TX of {len}: {e}"))?;
        *at = ipc::ica_at(&reply)
            .map(|(_, a)| a)
            .ok_or("DRV_TX's refusal without the ICA")?;
        if value != Error::InvalidArgument as u64 {
            return Err(format!("DRV_TX of {len} bytes answered {value}"));
        }
    }
    // `DRV_TX_BATCH` refuses a batch it cannot read, sending nothing of it: more bytes
    // than the page, a record running past the bytes said used, an empty frame, a frame
    // beyond `FRAME_MAX`; one good frame before a bad one is sent (`words[0]` says 1).
    let good = arp_request(mac_of(drv)?);
    for (case, frames, count, used, sent) in [
        (
            "more bytes than the page",
            &[60][..],
            1,
            FRAME_ICA_SIZE + 8,
            0,
        ),
        ("a torn record", &[60][..], 1, 40, 0),
        ("two records said, one there", &[60][..], 2, 72, 1),
        ("an empty frame", &[0][..], 1, 8, 0),
        ("a frame beyond FRAME_MAX", &[FRAME_MAX + 1][..], 1, 1528, 0),
        ("a good frame, then an empty one", &[60, 0][..], 2, 80, 1),
    ] {
        // SAFETY: the region is attached writable at `*at`, FRAME_ICA_SIZE bytes, and
        // nothing else refers to it here.
        let page =
            unsafe { core::slice::from_raw_parts_mut(*at as *mut u8, FRAME_ICA_SIZE as usize) };
        page.fill(0);
        let mut off = 0;
        for &len in frames {
            // A record header (length, port, address) and the frame (the ARP request, or
            // zeroes past it).
            page[off..off + 2].copy_from_slice(&(len as u16).to_le_bytes());
            let n = len.min(good.len());
            page[off + 8..off + 8 + n].copy_from_slice(&good[..n]);
            off += batch::record_size(len);
        }
        let msg = ipc::with_ica(
            Msg {
                label: DRV_TX_BATCH,
                words: [count, used, 0, 0, 0, 0],
            },
            region,
        );
        let (value, reply) =
            ipc::call(drv, &msg).map_err(|e| format!("DRV_TX_BATCH, {case}: {e}"))?;
        *at = ipc::ica_at(&reply)
            .map(|(_, a)| a)
            .ok_or("DRV_TX_BATCH's refusal without the ICA")?;
        if value != Error::InvalidArgument as u64 || reply.words[0] != sent {
            return Err(format!(
                "DRV_TX_BATCH, {case}: answered {value} with {} sent, want InvalidArgument \
                 and {sent}",
                reply.words[0]
            ));
        }
    }
    // And a good batch of two frames goes whole (two ARP requests: QEMU answers them).
    // SAFETY: as above.
    let page = unsafe { core::slice::from_raw_parts_mut(*at as *mut u8, FRAME_ICA_SIZE as usize) };
    let mut w = batch::Writer::new(page);
    let two = w.push(0, 0, &good).and_then(|()| w.push(0, 0, &good));
    let (count, used) = (w.count() as u64, w.used() as u64);
    two.map_err(|_| "a batch of two frames")?;
    let msg = ipc::with_ica(
        Msg {
            label: DRV_TX_BATCH,
            words: [count, used, 0, 0, 0, 0],
        },
        region,
    );
    let (value, reply) = ipc::call(drv, &msg).map_err(|e| format!("DRV_TX_BATCH of two: {e}"))?;
    *at = ipc::ica_at(&reply)
        .map(|(_, a)| a)
        .ok_or("DRV_TX_BATCH's reply without the ICA")?;
    if value != 0 || reply.words[0] != 2 {
        return Err(format!(
            "DRV_TX_BATCH of two frames answered {value} with {} sent",
            reply.words[0]
        ));
    }
    // `DRV_INFO` with a page: refused, the page back (its answer's words leave no room);
    // more of them, and of one-way messages with a page, than the driver could keep
    // mapped beside its frame pool (a regression: it kept them, and then had no room for
    // frames; the ARP round trip after this shows it still has).
    for i in 0..70 {
        let msg = ipc::with_ica(
            Msg {
                label: DRV_INFO,
                ..Msg::default()
            },
            region,
        );
        let (value, reply) = ipc::call(drv, &msg).map_err(|e| format!("DRV_INFO {i}: {e}"))?;
        *at = ipc::ica_at(&reply)
            .map(|(_, a)| a)
            .ok_or("DRV_INFO with a page answered without it")?;
        if value != Error::InvalidArgument as u64 {
            return Err(format!("DRV_INFO {i} with a page answered {value}"));
        }
    }
    for i in 0..70 {
        let one = res::open_vregion(
            &alloc::format!("here/vregion/netprobe-1w{i}"),
            4096,
            Rights::OWNER_ALL,
        )
        .map_err(|e| format!("one-way page {i}: {e}"))?;
        // Closed by the kernel once the driver lets go of it; each followed by a call the
        // driver answers after it (in order), so that they never all wait in its queue.
        let sent = res::attach_here(one, TX_AT + 0x100_0000, true)
            .and_then(|()| res::close_when_detached(one))
            .and_then(|()| {
                let mut sub = ipc::op(ulib::abi::ipc::SUBMIT_SEND, drv.0, [0; 4]);
                sub.msg = ipc::with_ica(
                    Msg {
                        label: DRV_TX,
                        words: [60, 0, 0, 0, 0, 0],
                    },
                    one,
                );
                ipc::submit(&sub).map(drop)
            })
            .and_then(|()| {
                let info = Msg {
                    label: DRV_INFO,
                    ..Msg::default()
                };
                ipc::call(drv, &info).map(drop)
            });
        if sent.is_err() {
            let _ = res::close(one);
        }
        sent.map_err(|e| format!("one-way DRV_TX {i} with a page: {e}"))?;
    }
    // Back where `exchange` attaches it.
    res::detach_here(*at).map_err(|e| format!("detach: {e}"))?;
    *at = TX_AT;
    Ok(())
}

/// Is `f` QEMU's ARP reply to us: ARP, op 2, from 10.0.2.2, to 10.0.2.15 at `mac`?
fn arp_reply(f: &[u8], mac: [u8; 6]) -> bool {
    f.len() >= 42
        && f[12..14] == [0x08, 0x06]
        && f[20..22] == [0, 2]
        && f[28..32] == GATEWAY
        && f[32..38] == mac
        && f[38..42] == ME
}
