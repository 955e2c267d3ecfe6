//! The netd state's layout on the host: format, bind, queue, drop, survive a reopen (what a
//! replacement sees), and refuse corrupt areas with a clear error.

use netstate::*;

fn area(sockets: u32, depth: u32) -> Vec<u8> {
    vec![0xa5; area_size(sockets, depth)]
}

#[test]
fn bind_push_pop_and_reopen() {
    let mut a = area(4, 3);
    let mut n = format(&mut a, 4, 3).unwrap();
    assert_eq!(n.bind(7, 11), Ok(7));
    assert_eq!(n.bind(7, 12), Err(Error::PortInUse));
    let e = n.bind(0, 12).unwrap();
    assert!(e >= EPHEMERAL_FIRST);
    assert_ne!(n.bind(0, 12).unwrap(), e);
    assert_eq!(n.push(9, 1, 2, b"x"), Err(Error::NoPort));
    n.push(7, 0x0a00_0202, 5555, b"hello").unwrap();
    n.push(7, 0x0a00_0202, 5556, &[1; DATA_MAX]).unwrap();
    n.set_config(0x0a00_020f, 24, 0x0a00_0202, CONFIG_DHCP);
    n.count(|c| c.frames_in += 3);
    let _ = n;
    // A new server opens the same area: everything is there.
    let mut n = open(&mut a).unwrap();
    let h = n.header();
    assert_eq!(
        (h.addr, h.prefix, h.gateway, h.config),
        (0x0a00_020f, 24, 0x0a00_0202, CONFIG_DHCP)
    );
    assert_eq!(h.servers, 2);
    assert_eq!(n.counters().frames_in, 3);
    assert_eq!(n.counters().datagrams_in, 2);
    assert_eq!(n.socket_of(7).unwrap().owner, 11);
    let mut buf = [0u8; 2000];
    assert_eq!((n.next_len(7), n.next_len(8)), (Some(5), None));
    let d = n.pop(7, &mut buf).unwrap().unwrap();
    assert_eq!(n.next_len(7), Some(DATA_MAX));
    assert_eq!((d.addr, d.port, d.len), (0x0a00_0202, 5555, 5));
    assert_eq!(&buf[..5], b"hello");
    // A short buffer gets the datagram cut, and its whole length.
    let mut small = [0u8; 10];
    let d = n.pop(7, &mut small).unwrap().unwrap();
    assert_eq!((d.len, d.full_len), (10, DATA_MAX));
    assert_eq!(n.pop(7, &mut buf), Ok(None));
    assert_eq!(n.next_len(7), None);
    assert_eq!(n.pop(8, &mut buf), Err(Error::NoPort));
}

#[test]
fn full_queue_drops_and_counts_and_wraps() {
    let mut a = area(2, 3);
    let mut n = format(&mut a, 2, 3).unwrap();
    n.bind(1, 1).unwrap();
    let mut buf = [0u8; 16];
    for round in 0..10u8 {
        for i in 0..3u8 {
            n.push(1, 0, 0, &[round, i]).unwrap();
        }
        assert_eq!(n.push(1, 0, 0, b"over"), Err(Error::QueueFull));
        for i in 0..3u8 {
            let d = n.pop(1, &mut buf).unwrap().unwrap();
            assert_eq!(&buf[..d.len], &[round, i]);
        }
    }
    assert_eq!(n.counters().drops, 10);
    assert_eq!(n.socket_of(1).unwrap().dropped, 10);
    assert_eq!(n.push(1, 0, 0, &[0; DATA_MAX + 1]), Err(Error::TooLong));
    assert_eq!(n.counters().errors, 1);
}

#[test]
fn sockets_run_out_and_owners_end() {
    let mut a = area(2, 1);
    let mut n = format(&mut a, 2, 1).unwrap();
    n.bind(1, 100).unwrap();
    n.bind(2, 200).unwrap();
    assert_eq!(n.bind(3, 300), Err(Error::NoSocket));
    assert_eq!(n.bind(1, 300), Err(Error::PortInUse));
    assert_eq!(n.unbind(1, 200), Err(Error::NotOwner));
    assert_eq!(n.unbind(5, 200), Err(Error::NoPort));
    assert_eq!(n.unbind_ended(|o| o != 200), 1);
    assert_eq!(n.bound().collect::<Vec<_>>(), vec![(1, 100)]);
    n.unbind(1, 100).unwrap();
    assert_eq!(n.bound().count(), 0);
    assert_eq!(n.bind(0, 1).unwrap(), EPHEMERAL_FIRST);
}

#[test]
fn ephemeral_ports_wrap() {
    let mut a = area(3, 1);
    let mut n = format(&mut a, 3, 1).unwrap();
    n.bind(0xffff, 1).unwrap();
    // Move the cursor to the top of the range through bind/unbind.
    let mut last = 0;
    for _ in 0..(0x1_0000 - u32::from(EPHEMERAL_FIRST) - 1) {
        last = n.bind(0, 2).unwrap();
        n.unbind(last, 2).unwrap();
    }
    assert_eq!(last, 0xfffe);
    assert_eq!(n.bind(0, 2).unwrap(), EPHEMERAL_FIRST);
}

#[test]
fn geometry_is_checked() {
    let mut small = vec![0; area_size(4, 4) - 1];
    assert_eq!(format(&mut small, 4, 4).err(), Some(Error::TooSmall));
    let mut a = area(1, 1);
    assert_eq!(format(&mut a, 0, 1).err(), Some(Error::BadGeometry));
    assert_eq!(format(&mut a, 1, 0).err(), Some(Error::BadGeometry));
    let mut tiny = vec![0; 10];
    assert_eq!(open(&mut tiny).err(), Some(Error::TooSmall));
}

/// A formatted area with one socket holding one datagram, to corrupt.
fn sample() -> Vec<u8> {
    let mut a = area(2, 2);
    let mut n = format(&mut a, 2, 2).unwrap();
    n.bind(7, 1).unwrap();
    n.bind(8, 1).unwrap();
    n.push(7, 0, 0, b"abc").unwrap();
    a
}

fn put32(a: &mut [u8], at: usize, v: u32) {
    a[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn corrupt_areas_are_refused() {
    let s0 = HEADER_AREA; // socket 0's record
    let s1 = HEADER_AREA + SOCKET_SIZE;
    let q = HEADER_AREA + 2 * SOCKET_SIZE; // socket 0's first slot
    type Corrupt = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Corrupt, Error)> = vec![
        ("magic", Box::new(|a| a[0] ^= 1), Error::BadMagic),
        (
            "version",
            Box::new(|a| put32(a, 8, 2)),
            Error::BadVersion(2),
        ),
        ("sockets", Box::new(|a| put32(a, 12, 0)), Error::BadGeometry),
        (
            "slot size",
            Box::new(|a| put32(a, 20, 100)),
            Error::BadGeometry,
        ),
        ("prefix", Box::new(|a| put32(a, 32, 33)), Error::BadGeometry),
        (
            "too many sockets for the area",
            Box::new(|a| put32(a, 12, 3)),
            Error::TooSmall,
        ),
        (
            "used",
            Box::new(move |a| put32(a, s0, 2)),
            Error::BadSocket(0),
        ),
        (
            "port 0",
            Box::new(move |a| put32(a, s0 + 4, 0)),
            Error::BadSocket(0),
        ),
        (
            "head",
            Box::new(move |a| put32(a, s0 + 16, 2)),
            Error::BadSocket(0),
        ),
        (
            "len",
            Box::new(move |a| put32(a, s0 + 20, 3)),
            Error::BadSocket(0),
        ),
        (
            "duplicate",
            Box::new(move |a| put32(a, s1 + 4, 7)),
            Error::DuplicatePort(7),
        ),
        (
            "slot length",
            Box::new(move |a| a[q + 6..q + 8].copy_from_slice(&2000u16.to_le_bytes())),
            Error::BadSlot(0, 0),
        ),
        (
            "free record not clear",
            Box::new(move |a| {
                put32(a, s1, 0);
            }),
            Error::BadSocket(1),
        ),
    ];
    for (what, corrupt, want) in cases {
        let mut a = sample();
        corrupt(&mut a);
        assert_eq!(open(&mut a).err(), Some(want), "{what}");
    }
    let mut a = sample();
    assert!(open(&mut a).is_ok());
}

/// Random bytes and random mutations never panic `open` or the operations after it.
#[test]
fn random_areas_never_panic() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut buf = [0u8; DATA_MAX];
    for i in 0..3000 {
        let mut a = sample();
        let flips = 1 + next() % 8;
        for _ in 0..flips {
            let at = if i % 2 == 0 {
                (next() % 160) as usize
            } else {
                (next() as usize) % a.len()
            };
            a[at] = next() as u8;
        }
        if let Ok(mut n) = open(&mut a) {
            let ports: Vec<u16> = n.bound().map(|(p, _)| p).collect();
            for p in ports {
                while let Ok(Some(_)) = n.pop(p, &mut buf) {}
                let _ = n.push(p, 1, 1, b"after");
            }
            let _ = n.bind(0, 5);
        }
    }
}

/// A state whose address no host may have (a corrupt area, or an earlier bug) is refused,
/// not handed to smoltcp, which panics on it (every later `netd` would have panicked on
/// the same state).
#[test]
fn broadcast_or_multicast_address_refused() {
    for bad in [0xe000_0001u32, 0xefff_ffff, u32::MAX] {
        let mut a = area(2, 2);
        let mut n = format(&mut a, 2, 2).unwrap();
        n.set_config(bad, 24, 0x0a00_0202, CONFIG_STATIC);
        let _ = n;
        assert_eq!(open(&mut a).err(), Some(Error::BadAddress), "{bad:#x}");
    }
    for good in [0x0a00_020fu32, 0xdfff_fffe, 0x7f00_0001] {
        assert!(is_unicast(good), "{good:#x}");
    }
    assert!(!is_unicast(0));
}

/// A state whose gateway no neighbour may be is refused too: smoltcp asserts a unicast
/// neighbour when it routes through the gateway, so every `netd` that loaded such a state
/// ended at the first datagram routed off the subnet (found by an audit). No gateway (0)
/// is fine.
#[test]
fn broadcast_or_multicast_gateway_refused() {
    for bad in [0xe000_0001u32, u32::MAX] {
        let mut a = area(2, 2);
        let mut n = format(&mut a, 2, 2).unwrap();
        n.set_config(0x0a00_020f, 24, bad, CONFIG_STATIC);
        let _ = n;
        assert_eq!(open(&mut a).err(), Some(Error::BadAddress), "{bad:#x}");
    }
    for fine in [0u32, 0x0a00_0202] {
        let mut a = area(2, 2);
        let mut n = format(&mut a, 2, 2).unwrap();
        n.set_config(0x0a00_020f, 24, fine, CONFIG_STATIC);
        let _ = n;
        assert!(open(&mut a).is_ok(), "{fine:#x}");
    }
}

/// `owned_by` counts one owner's bound sockets only (`netd` caps a program's share on it).
#[test]
fn sockets_counted_by_owner() {
    let mut a = area(4, 2);
    let mut n = format(&mut a, 4, 2).unwrap();
    assert_eq!(n.owned_by(7), 0);
    n.bind(100, 7).unwrap();
    n.bind(0, 7).unwrap();
    n.bind(101, 8).unwrap();
    assert_eq!((n.owned_by(7), n.owned_by(8), n.owned_by(9)), (2, 1, 0));
    n.unbind_ended(|o| o != 7);
    assert_eq!((n.owned_by(7), n.owned_by(8)), (0, 1));
}
