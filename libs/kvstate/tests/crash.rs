//! A kill at any byte of a change: the next `open` finds a valid table holding either the
//! state before the change or the state after it (for the key changed; every other entry as
//! it was). `Table::crash_after(n)` lets an operation write n bytes and stop, as a kill
//! there would; this tries every n until the operation completes.

use kvstate::Error;
use std::collections::BTreeMap;
use xorshift::Rng;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
    Get(Vec<u8>),
}

fn apply(t: &mut kvstate::Table, op: &Op) -> Result<(), Error> {
    match op {
        Op::Put(k, v) => t.put(k, v).map(drop),
        Op::Del(k) => t.del(k).map(drop),
        Op::Get(k) => t.get(k).map(drop),
    }
}

fn after(model: &Model, op: &Op) -> Model {
    let mut m = model.clone();
    match op {
        Op::Put(k, v) => {
            m.insert(k.clone(), v.clone());
        }
        Op::Del(k) => {
            m.remove(k);
        }
        Op::Get(_) => {}
    }
    m
}

/// The table in `area` holds exactly `model`.
fn holds(area: &mut [u8], model: &Model, keys: &[Vec<u8>]) -> bool {
    let mut t = kvstate::open(area).expect("a kill leaves a table that opens");
    t.stats().count as usize == model.len()
        && keys
            .iter()
            .all(|k| t.get(k).unwrap().map(<[u8]>::to_vec) == model.get(k).cloned())
}

#[test]
fn a_kill_anywhere_leaves_the_state_before_or_after() {
    let mut rng = Rng(0x5eed);
    // 8 slots: 7 entries at most, long probe runs, deletions that shift entries back.
    let keys: Vec<Vec<u8>> = (0..12).map(|i| format!("key-{i}").into_bytes()).collect();
    let mut area = vec![0u8; kvstate::area_for(8)];
    kvstate::format(&mut area).unwrap();
    let mut model = Model::new();
    let mut tried = 0;
    let mut recovered = 0;
    for round in 0..60 {
        let key = keys[rng.below(keys.len() as u64) as usize].clone();
        let op = match rng.below(5) {
            0 | 1 if model.len() < 7 || model.contains_key(&key) => {
                let len = rng.below(300) as usize;
                Op::Put(key, vec![round as u8; len])
            }
            0..=3 => Op::Del(key),
            _ => Op::Get(key),
        };
        let next = after(&model, &op);
        for budget in 0.. {
            let mut a = area.clone();
            let r = {
                let mut t = kvstate::open(&mut a).unwrap();
                t.crash_after(budget);
                apply(&mut t, &op)
            };
            tried += 1;
            match r {
                Err(Error::Crashed) => {
                    let set_right = kvstate::open(&mut a.clone()).unwrap().recovered();
                    if matches!(op, Op::Get(_)) {
                        assert_eq!(set_right, None, "a get changes nothing to set right");
                    }
                    recovered += usize::from(set_right.is_some());
                    let old = holds(&mut a.clone(), &model, &keys);
                    let new = holds(&mut a, &next, &keys);
                    assert!(
                        old || new,
                        "round {round}: {op:?} killed after {budget} bytes: neither before nor after"
                    );
                }
                Ok(()) => {
                    assert!(
                        holds(&mut a, &next, &keys),
                        "round {round}: {op:?} completed"
                    );
                    area = a;
                    break;
                }
                Err(e) => panic!("round {round}: {op:?}: {e}"),
            }
        }
        model = next;
    }
    assert!(tried > 1000, "only {tried} kills tried");
    assert!(
        recovered > 500,
        "only {recovered} of {tried} kills left a change to set right"
    );
}

#[test]
fn a_kill_during_recovery_recovers_again() {
    // Deletions killed part-way (they shift entries back), then their recovery killed
    // part-way, again and again, each attempt on what the last one left.
    let mut area = vec![0u8; kvstate::area_for(8)];
    let keys: Vec<Vec<u8>> = (0..7).map(|i| format!("k{i}").into_bytes()).collect();
    {
        let mut t = kvstate::format(&mut area).unwrap();
        for k in &keys {
            t.put(k, k).unwrap();
        }
    }
    let mut model: Model = keys.iter().map(|k| (k.clone(), k.clone())).collect();
    let mut cuts = 0;
    for victim in &keys {
        // Killed after the header recorded the deletion (and a little more).
        let mut t = kvstate::open(&mut area).unwrap();
        t.crash_after(kvstate::HEADER_AREA + 3);
        assert_eq!(t.del(victim), Err(Error::Crashed));
        model.remove(victim);
        for budget in 0.. {
            match kvstate::open_crashing(&mut area, budget) {
                Err(Error::Crashed) => cuts += 1,
                Ok(_) => break,
                Err(e) => panic!("recovery of del {victim:?} with {budget} bytes: {e}"),
            }
        }
        assert!(holds(&mut area, &model, &keys), "after deleting {victim:?}");
    }
    assert!(cuts > 100, "only {cuts} recoveries cut");
}
