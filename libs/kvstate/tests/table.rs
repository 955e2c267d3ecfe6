//! The table on the host: operations, errors, a model test against `std`'s `HashMap`, the
//! version 1 -> 2 upgrade, and the request encoding.

use kvstate::proto::{self, Request, StatsReply, Status};
use kvstate::{Error, FIRST_SLOT, HEADER_AREA, KEY_MAX, SLOT_SIZE, VALUE_MAX, VERSION};
use std::collections::HashMap;
use xorshift::Rng;

fn area(slots: usize) -> Vec<u8> {
    vec![0u8; kvstate::area_for(slots)]
}

#[test]
fn put_get_del_stats() {
    let mut a = area(16);
    let mut t = kvstate::format(&mut a).unwrap();
    assert_eq!(t.stats().capacity, 16);
    assert_eq!(t.limit(), 14);
    assert_eq!(t.put(b"a", b"1"), Ok(true));
    assert_eq!(t.put(b"a", b"22"), Ok(false));
    assert_eq!(t.get(b"a"), Ok(Some(&b"22"[..])));
    assert_eq!(t.get(b"b"), Ok(None));
    assert_eq!(t.put(b"empty", b""), Ok(true));
    assert_eq!(t.get(b"empty"), Ok(Some(&b""[..])));
    assert_eq!(t.del(b"a"), Ok(true));
    assert_eq!(t.del(b"a"), Ok(false));
    let s = t.stats();
    assert_eq!(
        (s.version, s.count, s.puts, s.gets, s.dels),
        (VERSION, 1, 3, 3, 2)
    );
    // Format (1), three puts and one successful del: five changes.
    assert_eq!(s.generation, 5);
}

#[test]
fn limits_are_clear_errors() {
    let mut a = area(8);
    let mut t = kvstate::format(&mut a).unwrap();
    let long_key = [b'k'; KEY_MAX + 1];
    let max_key = [b'k'; KEY_MAX];
    let long_value = vec![7u8; VALUE_MAX + 1];
    let max_value = vec![7u8; VALUE_MAX];
    assert_eq!(t.put(b"", b"x"), Err(Error::EmptyKey));
    assert_eq!(t.get(b""), Err(Error::EmptyKey));
    assert_eq!(t.put(&long_key, b"x"), Err(Error::KeyTooLong));
    assert_eq!(t.del(&long_key), Err(Error::KeyTooLong));
    assert_eq!(t.put(b"v", &long_value), Err(Error::ValueTooLong));
    assert_eq!(t.put(&max_key, &max_value), Ok(true));
    assert_eq!(t.get(&max_key), Ok(Some(&max_value[..])));
    for i in 1..7u8 {
        assert_eq!(t.put(&[i], b"x"), Ok(true), "entry {i}");
    }
    assert_eq!(t.stats().count, 7);
    assert_eq!(t.put(b"one more", b"x"), Err(Error::Full));
    // A full table still overwrites and deletes.
    assert_eq!(t.put(&[1], b"y"), Ok(false));
    assert_eq!(t.del(&[2]), Ok(true));
    assert_eq!(t.put(b"one more", b"x"), Ok(true));
}

#[test]
fn open_finds_what_was_stored() {
    let mut a = area(64);
    {
        let mut t = kvstate::format(&mut a).unwrap();
        for i in 0..40u32 {
            t.put(format!("key{i}").as_bytes(), &i.to_le_bytes())
                .unwrap();
        }
        for i in (0..40u32).step_by(3) {
            t.del(format!("key{i}").as_bytes()).unwrap();
        }
    }
    let mut t = kvstate::open(&mut a).unwrap();
    for i in 0..40u32 {
        let want = (i % 3 != 0).then(|| i.to_le_bytes().to_vec());
        assert_eq!(
            t.get(format!("key{i}").as_bytes())
                .unwrap()
                .map(|v| v.to_vec()),
            want
        );
    }
    assert_eq!(t.stats().count, 26);
}

#[test]
fn open_refuses_what_is_not_a_table() {
    let mut tiny = vec![0u8; HEADER_AREA - 1];
    assert_eq!(kvstate::open(&mut tiny).err(), Some(Error::TooSmall));
    assert_eq!(kvstate::format(&mut tiny).err(), Some(Error::TooSmall));
    let mut no_slot = vec![0u8; FIRST_SLOT + SLOT_SIZE - 1];
    assert_eq!(kvstate::format(&mut no_slot).err(), Some(Error::TooSmall));
    let mut zero = area(4);
    assert_eq!(kvstate::open(&mut zero).err(), Some(Error::BadMagic));

    let mut a = area(8);
    kvstate::format(&mut a).unwrap();
    // An unknown version.
    let mut b = a.clone();
    b[8] = 9;
    assert_eq!(kvstate::open(&mut b).err(), Some(Error::BadVersion(9)));
    assert_eq!(
        kvstate::format_version(&mut b, 3).err(),
        Some(Error::BadVersion(3))
    );
    // A bit flipped in one header copy: the other one serves (a write a kill cut short).
    let mut b = a.clone();
    b[24] ^= 1; // count
    assert!(kvstate::open(&mut b).is_ok());
    // In both: the checksums say so.
    b[HEADER_AREA + 24] ^= 1;
    assert_eq!(kvstate::open(&mut b).err(), Some(Error::Corrupt));
    // The area is shorter than the header's capacity (a smaller vregion).
    let mut short = a[..a.len() - 1].to_vec();
    assert_eq!(kvstate::open(&mut short).err(), Some(Error::BadCapacity));
    // A version-2 table opened as version 1 is newer than asked for.
    assert_eq!(
        kvstate::open_version(&mut a, 1).err(),
        Some(Error::BadVersion(2))
    );
}

#[test]
fn open_refuses_broken_slots() {
    let mut a = area(8);
    {
        let mut t = kvstate::format(&mut a).unwrap();
        t.put(b"alpha", b"1").unwrap();
        t.put(b"beta", b"2").unwrap();
    }
    let used: Vec<usize> = (0..8)
        .map(|i| FIRST_SLOT + i * SLOT_SIZE)
        .filter(|&at| a[at] == 1)
        .collect();
    assert_eq!(used.len(), 2);
    let at = used[0];
    for (offset, value, what) in [
        (0, 2u8, "bad used byte"),
        (1, 0, "empty key"),
        (1, 33, "key too long"),
        (3, 0x08, "value too long"),
        (4, 0x5a, "wrong stored hash"),
        (8, b'z', "key no longer at its hash"),
    ] {
        let mut b = a.clone();
        b[at + offset] = value;
        assert_eq!(kvstate::open(&mut b).err(), Some(Error::Corrupt), "{what}");
    }
    // An entry appearing without the count knowing.
    let mut b = a.clone();
    let free = (0..8)
        .map(|i| FIRST_SLOT + i * SLOT_SIZE)
        .find(|at| b[*at] == 0)
        .unwrap();
    let copy = b[at..at + SLOT_SIZE].to_vec();
    b[free..free + SLOT_SIZE].copy_from_slice(&copy);
    assert_eq!(kvstate::open(&mut b).err(), Some(Error::Corrupt));
}

#[test]
fn model_against_hashmap() {
    for seed in 1..=20u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let slots = 1 + rng.below(64) as usize;
        let mut a = area(slots);
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        let mut t = kvstate::format(&mut a).unwrap();
        let limit = t.limit() as usize;
        // Few distinct keys, so puts overwrite and dels hit; some keys collide a lot.
        let keys: Vec<Vec<u8>> = (0..slots + 4)
            .map(|i| {
                let len = 1 + rng.below(KEY_MAX as u64) as usize;
                let mut k: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                k[0] = i as u8;
                k
            })
            .collect();
        for step in 0..2000 {
            let key = &keys[rng.below(keys.len() as u64) as usize];
            match rng.below(3) {
                0 => {
                    let len = rng.below(VALUE_MAX as u64 + 1) as usize;
                    let value: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                    let r = t.put(key, &value);
                    if model.contains_key(key) || model.len() < limit {
                        assert_eq!(r, Ok(!model.contains_key(key)), "seed {seed} step {step}");
                        model.insert(key.clone(), value);
                    } else {
                        assert_eq!(r, Err(Error::Full), "seed {seed} step {step}");
                    }
                }
                1 => {
                    let want = model.get(key).map(|v| v.as_slice());
                    assert_eq!(t.get(key).unwrap(), want, "seed {seed} step {step}");
                }
                _ => {
                    let r = t.del(key);
                    assert_eq!(
                        r,
                        Ok(model.remove(key).is_some()),
                        "seed {seed} step {step}"
                    );
                }
            }
            assert_eq!(t.stats().count as usize, model.len());
            if step % 250 == 0 {
                // What is in the area is a valid table with exactly the model's entries.
                t = kvstate::open(&mut a).unwrap();
                for (k, v) in &model {
                    assert_eq!(t.get(k).unwrap(), Some(v.as_slice()));
                }
            }
        }
    }
}

#[test]
fn upgrade_from_version_1_keeps_every_entry() {
    let mut a = area(50);
    let mut model = HashMap::new();
    {
        let mut t = kvstate::format_version(&mut a, 1).unwrap();
        let mut rng = Rng(7);
        for i in 0..60u32 {
            let key = format!("k{}", rng.below(45)).into_bytes();
            let value = vec![i as u8; rng.below(VALUE_MAX as u64 + 1) as usize];
            if i % 7 == 6 {
                t.del(&key).unwrap();
                model.remove(&key);
            } else {
                t.put(&key, &value).unwrap();
                model.insert(key, value);
            }
        }
        assert_eq!(t.stats().version, 1);
    }
    // The current code does not serve version 1 ...
    assert_eq!(kvstate::open(&mut a).err(), Some(Error::OldVersion(1)));
    // ... but a version-1 server still can.
    assert!(kvstate::open_version(&mut a, 1).is_ok());
    let generation = kvstate::open_version(&mut a, 1).unwrap().stats().generation;
    assert_eq!(kvstate::upgrade(&mut a), Ok(1));
    assert_eq!(
        kvstate::upgrade(&mut a),
        Ok(2),
        "a second upgrade changes nothing"
    );
    let mut t = kvstate::open(&mut a).unwrap();
    let s = t.stats();
    assert_eq!((s.version, s.count as usize), (2, model.len()));
    assert_eq!(s.generation, generation + 1);
    assert_eq!(
        (s.puts, s.gets, s.dels),
        (0, 0, 0),
        "version 2's counters start at 0"
    );
    for (k, v) in &model {
        assert_eq!(t.get(k).unwrap(), Some(v.as_slice()));
    }
    assert_eq!(t.put(b"new", b"after"), Ok(true));
    assert_eq!(t.del(model.keys().next().unwrap()), Ok(true));
}

#[test]
fn upgrade_refuses_without_room_and_changes_nothing() {
    // A version-1 table whose capacity uses all of its area (as a version-1 server sizing
    // by its own slots would have): version 2's larger slots do not fit.
    let mut a = area(400);
    let cap = (a.len() - HEADER_AREA) / (SLOT_SIZE - 4);
    assert!(cap > 400);
    kvstate::format_version(&mut a, 1).unwrap();
    // Rewrite the header with the larger capacity (and its checksum).
    let mut h: kvstate::HeaderV1 = bytemuck_read(&a);
    h.capacity = cap as u64;
    h.checksum = fnv64(&bytes_of_v1(&h)[..40]);
    a[..48].copy_from_slice(&bytes_of_v1(&h));
    {
        let mut t = kvstate::open_version(&mut a, 1).unwrap();
        t.put(b"x", b"y").unwrap();
    }
    let before = a.clone();
    assert_eq!(kvstate::upgrade(&mut a), Err(Error::NoRoom));
    assert_eq!(a, before);
    // A corrupt version-1 table is not upgraded either.
    let mut b = before.clone();
    b[HEADER_AREA] = 2; // version 1's slot 0
    assert_eq!(kvstate::upgrade(&mut b), Err(Error::Corrupt));
}

fn bytemuck_read(a: &[u8]) -> kvstate::HeaderV1 {
    let mut h = kvstate::HeaderV1::default();
    let f = |i: usize| u64::from_le_bytes(a[i..i + 8].try_into().unwrap());
    h.magic = f(0);
    h.version = u32::from_le_bytes(a[8..12].try_into().unwrap());
    h.slot_size = u32::from_le_bytes(a[12..16].try_into().unwrap());
    h.capacity = f(16);
    h.count = f(24);
    h.generation = f(32);
    h.checksum = f(40);
    h
}

fn bytes_of_v1(h: &kvstate::HeaderV1) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend(h.magic.to_le_bytes());
    v.extend(h.version.to_le_bytes());
    v.extend(h.slot_size.to_le_bytes());
    for x in [h.capacity, h.count, h.generation, h.checksum] {
        v.extend(x.to_le_bytes());
    }
    v
}

fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[test]
fn requests_round_trip_and_malformed_ones_are_statuses() {
    let r = Request::new(proto::PUT, b"some key", 1000, 64).unwrap();
    let (label, words) = r.encode();
    assert_eq!(Request::decode(label, &words), Ok(r));
    assert_eq!(r.key(), b"some key");
    let full = Request::new(proto::GET, &[0xab; KEY_MAX], 0, 0).unwrap();
    let (label, words) = full.encode();
    assert_eq!(
        Request::decode(label, &words).unwrap().key(),
        &[0xab; KEY_MAX]
    );
    let hello = Request::new(proto::HELLO, b"", 0, 0x1234).unwrap();
    let (label, words) = hello.encode();
    assert_eq!(Request::decode(label, &words).unwrap().arg, 0x1234);

    let mut w = words;
    assert_eq!(Request::decode(0, &w), Err(Status::BadOp));
    assert_eq!(Request::decode(99, &w), Err(Status::BadOp));
    w[4] = 33;
    assert_eq!(Request::decode(proto::GET, &w), Err(Status::BadKey));
    w[4] = 0;
    assert_eq!(
        Request::decode(proto::GET, &w),
        Err(Status::BadKey),
        "no key"
    );
    w[4] = 1 | 1025 << 16;
    assert_eq!(Request::decode(proto::PUT, &w), Err(Status::ValueTooLong));
    w[4] = 1 | 1 << 40;
    assert_eq!(Request::decode(proto::PUT, &w), Err(Status::BadOp));
    let mut rng = Rng(99);
    for _ in 0..100_000 {
        let w: [u64; 6] = core::array::from_fn(|_| rng.next_u64() >> rng.below(64));
        let _ = Request::decode(rng.below(8), &w);
    }

    let s = StatsReply {
        count: 3,
        capacity: 985,
        version: 2,
        generation: 9,
        puts: 4,
        gets: 5,
        dels: 6,
    };
    assert_eq!(StatsReply::decode(&s.encode()), s);
    for code in 0..10 {
        assert_eq!(Status::from_code(code).map(|s| s as u64), Some(code));
    }
    assert_eq!(Status::from_code(10), None);
}
