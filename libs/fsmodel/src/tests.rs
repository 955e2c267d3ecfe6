//! The model against hand-checked cases, and the workload's mix.
use super::*;
use alloc::vec;

fn open(m: &mut Model, path: &str, mode: Mode, slot: usize) -> Expect {
    m.apply(&Op::Open {
        path: path.into(),
        mode,
        slot,
    })
}

#[test]
fn write_seek_overwrite_read_close() {
    let mut m = Model::new();
    assert_eq!(
        open(&mut m, "F0.DAT", Mode::Write, 0),
        Expect::Opened { len: 0 }
    );
    assert_eq!(
        m.apply(&Op::Write {
            slot: 0,
            len: 10,
            fill: 1
        }),
        Expect::Done
    );
    // fsd writes the entry at every write.
    let stat = Op::Stat {
        path: "F0.DAT".into(),
    };
    assert_eq!(
        m.apply(&stat),
        Expect::Stat {
            size: 10,
            dir: false
        }
    );
    assert_eq!(m.apply(&Op::Seek { slot: 0, pos: 4 }), Expect::Done);
    assert_eq!(
        m.apply(&Op::Write {
            slot: 0,
            len: 10,
            fill: 2
        }),
        Expect::Done
    );
    assert_eq!(
        m.apply(&Op::Seek { slot: 0, pos: 15 }),
        Expect::Fail(Fail::Invalid)
    );
    assert_eq!(m.apply(&Op::Seek { slot: 0, pos: 0 }), Expect::Done);
    let mut want = data(1, 10);
    want.truncate(4);
    want.extend(data(2, 10));
    assert_eq!(
        m.apply(&Op::Read { slot: 0, len: 100 }),
        Expect::Data(want.clone())
    );
    assert_eq!(m.apply(&Op::Close { slot: 0 }), Expect::Done);
    assert_eq!(
        m.apply(&stat),
        Expect::Stat {
            size: 14,
            dir: false
        }
    );
    assert_eq!(m.apply(&Op::Close { slot: 0 }), Expect::Fail(Fail::Invalid));
    assert_eq!(
        open(&mut m, "F0.DAT", Mode::Append, 1),
        Expect::Opened { len: 14 }
    );
    assert_eq!(
        m.apply(&Op::Read { slot: 1, len: 5 }),
        Expect::Data(Vec::new())
    );
    assert_eq!(m.files().next(), Some(("F0.DAT", want.as_slice())));
}

#[test]
fn mistakes_are_the_services_errors() {
    let mut m = Model::new();
    assert_eq!(
        open(&mut m, "F0.DAT", Mode::Read, 0),
        Expect::Fail(Fail::NotFound)
    );
    assert_eq!(
        open(&mut m, "D0/F0.DAT", Mode::Write, 0),
        Expect::Fail(Fail::NotFound)
    );
    assert_eq!(
        open(&mut m, "TOOLONGNAME.DAT", Mode::Write, 0),
        Expect::Fail(Fail::BadName)
    );
    assert_eq!(m.apply(&Op::Mkdir { path: "D0".into() }), Expect::Done);
    assert_eq!(
        m.apply(&Op::Mkdir { path: "D0".into() }),
        Expect::Fail(Fail::Exists)
    );
    assert_eq!(
        open(&mut m, "D0", Mode::Read, 0),
        Expect::Fail(Fail::WrongType)
    );
    assert_eq!(
        open(&mut m, "D0/F1.DAT", Mode::Append, 0),
        Expect::Opened { len: 0 }
    );
    assert_eq!(
        open(&mut m, "D0/F1.DAT", Mode::Read, 1),
        Expect::Fail(Fail::Busy)
    );
    assert_eq!(
        m.apply(&Op::Unlink {
            path: "D0/F1.DAT".into()
        }),
        Expect::Fail(Fail::Busy)
    );
    assert_eq!(
        m.apply(&Op::Unlink { path: "D0".into() }),
        Expect::Fail(Fail::Busy)
    );
    assert_eq!(
        m.apply(&Op::Write {
            slot: 2,
            len: 1,
            fill: 1
        }),
        Expect::Fail(Fail::Invalid)
    );
    assert_eq!(
        m.apply(&Op::Write {
            slot: 0,
            len: 3000,
            fill: 1
        }),
        Expect::Done
    );
    assert_eq!(m.apply(&Op::Close { slot: 0 }), Expect::Done);
    assert_eq!(
        open(&mut m, "D0/F1.DAT", Mode::Read, 1),
        Expect::Opened { len: 3000 }
    );
    assert_eq!(
        m.apply(&Op::Write {
            slot: 1,
            len: 1,
            fill: 1
        }),
        Expect::Fail(Fail::ReadOnly)
    );
    assert_eq!(m.apply(&Op::Close { slot: 1 }), Expect::Done);
    let ls = Op::Readdir { path: "D0".into() };
    let entry = Entry {
        name: "F1.DAT".into(),
        size: 3000,
        dir: false,
    };
    assert_eq!(m.apply(&ls), Expect::Entries(vec![entry]));
    let ls_file = Op::Readdir {
        path: "D0/F1.DAT".into(),
    };
    assert_eq!(m.apply(&ls_file), Expect::Fail(Fail::WrongType));
    // A file in a directory, then the directory: both deleted.
    assert_eq!(
        m.apply(&Op::Unlink {
            path: "D0/F1.DAT".into()
        }),
        Expect::Done
    );
    assert_eq!(m.apply(&Op::Unlink { path: "D0".into() }), Expect::Done);
    assert_eq!(m.dirs().count(), 0);
    // Durable points: the mkdir, the append's close, both deletes (not the read's close).
    assert_eq!(m.syncs(), 4);
    assert_eq!(m.apply(&ls), Expect::Fail(Fail::NotFound));
    assert_eq!(m.files().count() + m.dirs().count(), 0);
}

#[test]
fn a_file_named_like_a_directory_is_no_directory() {
    let mut m = Model::new();
    assert_eq!(
        open(&mut m, "D0", Mode::Write, 0),
        Expect::Opened { len: 0 }
    );
    assert_eq!(
        m.apply(&Op::Mkdir {
            path: "D0/E0".into()
        }),
        Expect::Fail(Fail::WrongType)
    );
    assert_eq!(
        m.apply(&Op::Stat {
            path: "D0/E0/F0.DAT".into()
        }),
        Expect::Fail(Fail::WrongType)
    );
    assert_eq!(
        m.apply(&Op::Stat {
            path: "D1/E0/F0.DAT".into()
        }),
        Expect::Fail(Fail::NotFound)
    );
    assert_eq!(
        m.apply(&Op::Readdir { path: "D0".into() }),
        Expect::Fail(Fail::WrongType)
    );
    assert_eq!(
        m.apply(&Op::Mkdir { path: "D0".into() }),
        Expect::Fail(Fail::Exists)
    );
}

#[test]
fn a_file_closed_empty_holds_no_cluster() {
    let mut m = Model::new();
    open(&mut m, "F0.DAT", Mode::Write, 0);
    m.apply(&Op::Write {
        slot: 0,
        len: 2000,
        fill: 1,
    });
    m.apply(&Op::Close { slot: 0 });
    assert_eq!(
        open(&mut m, "F0.DAT", Mode::Write, 0),
        Expect::Opened { len: 0 }
    );
    assert_eq!(
        m.apply(&Op::Stat {
            path: "F0.DAT".into()
        }),
        Expect::Stat {
            size: 0,
            dir: false
        }
    );
    // Truncated, closed empty, deleted.
    m.apply(&Op::Close { slot: 0 });
    m.apply(&Op::Unlink {
        path: "F0.DAT".into(),
    });
    assert_eq!(m.files().count(), 0);
}

#[test]
fn eight_three_names() {
    for good in ["F0.DAT", "A", "ABCDEFGH.TXT", "X.Y"] {
        assert!(short_name_ok(good), "{good}");
    }
    for bad in BAD_NAMES.iter().chain(&["", ".DAT", "A.B.C", "A B"]) {
        assert!(!short_name_ok(bad), "{bad}");
    }
}

#[test]
fn a_workload_is_repeatable_and_mixed() {
    let (a, ma) = run(7, 1000);
    let (b, _) = run(7, 1000);
    assert_eq!(a, b);
    assert_ne!(run(8, 1000).0, a);
    assert!(
        ma.open_slots().next().is_none(),
        "every handle closed at the end"
    );
    let count = |f: &dyn Fn(&Op, &Expect) -> bool| a.iter().filter(|(o, e)| f(o, e)).count();
    let ok_writes = count(&|o, e| matches!(o, Op::Write { .. }) && *e == Expect::Done);
    let reads =
        count(&|o, e| matches!((o, e), (Op::Read { .. }, Expect::Data(d)) if !d.is_empty()));
    let opens = count(&|_, e| matches!(e, Expect::Opened { .. }));
    let seeks = count(&|o, e| matches!(o, Op::Seek { .. }) && *e == Expect::Done);
    let unlinks = count(&|o, e| matches!(o, Op::Unlink { .. }) && *e == Expect::Done);
    let mkdirs = count(&|o, e| matches!(o, Op::Mkdir { .. }) && *e == Expect::Done);
    let listed = count(&|_, e| matches!(e, Expect::Entries(v) if !v.is_empty()));
    for (what, n, at_least) in [
        ("writes", ok_writes, 100),
        ("reads with data", reads, 20),
        ("opens", opens, 80),
        ("seeks", seeks, 20),
        ("unlinks", unlinks, 10),
        ("mkdirs", mkdirs, 3),
        ("listings", listed, 10),
    ] {
        assert!(n >= at_least, "{what}: {n} < {at_least}");
    }
    for fail in [
        Fail::NotFound,
        Fail::Exists,
        Fail::BadName,
        Fail::Busy,
        Fail::Invalid,
        Fail::WrongType,
        Fail::ReadOnly,
    ] {
        assert!(
            count(&|_, e| *e == Expect::Fail(fail)) > 0,
            "{fail:?} never expected"
        );
    }
    assert!(
        ma.files().count() > 0,
        "files remain to compare on the host"
    );
}
