//! Random and mutated bytes as the area: `open`, `upgrade` and every operation on whatever
//! opens answer errors, never panic or reach outside the area.

use kvstate::{FIRST_SLOT, SLOT_SIZE};
use xorshift::Rng;

/// Whatever `area` holds: try everything on it.
fn poke(area: &mut [u8], rng: &mut Rng) {
    let _ = kvstate::upgrade(&mut area.to_vec());
    let _ = kvstate::open_version(area, 1).map(|t| t.stats());
    if let Ok(mut t) = kvstate::open(area) {
        for _ in 0..20 {
            let key = [b'a' + rng.below(4) as u8; 3];
            let value = vec![1u8; rng.below(1100) as usize];
            let _ = t.put(&key[..1 + rng.below(3) as usize], &value);
            let _ = t.get(&key);
            let _ = t.del(&key[..1]);
        }
        // Whatever the operations did, the area is still a valid table.
        kvstate::open(area).expect("operations keep a table valid");
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x1234_5678);
    for _ in 0..3000 {
        let len = rng.below(FIRST_SLOT as u64 + 4 * SLOT_SIZE as u64) as usize;
        let mut area: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        if len >= 8 && rng.below(2) == 0 {
            area[..8].copy_from_slice(&kvstate::MAGIC.to_le_bytes());
            if len >= 12 {
                area[8] = rng.below(4) as u8;
            }
        }
        poke(&mut area, &mut rng);
    }
}

#[test]
fn mutated_tables_never_panic() {
    let mut rng = Rng(0xfeed);
    for round in 0..400 {
        let slots = 1 + rng.below(6) as usize;
        let mut area = vec![0u8; kvstate::area_for(slots) + rng.below(100) as usize];
        {
            let version = 1 + (round % 2) as u32;
            let mut t = kvstate::format_version(&mut area, version).unwrap();
            for i in 0..slots {
                let _ = t.put(&[b'k', i as u8], &[i as u8; 17]);
            }
        }
        // Flip bytes in the header and in slot headers (where the meaning is).
        for _ in 0..1 + rng.below(4) {
            let at = if rng.below(2) == 0 {
                rng.below(FIRST_SLOT as u64) as usize
            } else {
                FIRST_SLOT + rng.below(slots as u64) as usize * SLOT_SIZE + rng.below(12) as usize
            };
            if at < area.len() {
                area[at] = rng.next_u64() as u8;
            }
        }
        poke(&mut area, &mut rng);
    }
}
