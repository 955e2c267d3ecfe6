//! Host tests: names, identifiers, generations and the rights matrix.

use super::*;

#[test]
fn good_names() {
    let n = ResName::parse("c1/vregion/buf0").unwrap();
    assert_eq!(
        (n.location, n.kind, n.name),
        (Location::Core(1), ResType::VRegion, "buf0")
    );
    let n = ResName::parse("here/process/shell").unwrap();
    assert_eq!(
        (n.location, n.kind, n.name),
        (Location::Here, ResType::Process, "shell")
    );
    assert_eq!(n.core(3), 3);
    assert_eq!(ResName::parse("c63/compute/a.b-c_9").unwrap().core(0), 63);
    let longest = "x".repeat(MAX_NAME);
    assert!(ResName::parse(&format!("c0/vspace/{longest}")).is_ok());
}

#[test]
fn bad_names() {
    let cases: &[(&str, NameError)] = &[
        ("", NameError::Shape),
        ("here", NameError::Shape),
        ("here/vregion", NameError::Shape),
        ("here/vregion/", NameError::Shape),
        ("/vregion/a", NameError::Shape),
        ("here//a", NameError::Shape),
        ("here/vregion/a/b", NameError::Shape),
        ("there/vregion/a", NameError::Location),
        ("c/vregion/a", NameError::Location),
        ("c64/vregion/a", NameError::Location),
        ("c01/vregion/a", NameError::Location),
        ("c-1/vregion/a", NameError::Location),
        ("c999/vregion/a", NameError::Location),
        ("C1/vregion/a", NameError::Location),
        ("here/file/a", NameError::Type),
        ("here/VRegion/a", NameError::Type),
        ("here/vregion/a b", NameError::Character),
        ("here/vregion/ünï", NameError::Character),
        ("here/vregion/a\0", NameError::Character),
    ];
    for (name, want) in cases {
        assert_eq!(ResName::parse(name), Err(*want), "{name:?}");
    }
    let too_long = format!("here/vregion/{}", "x".repeat(MAX_NAME + 1));
    assert_eq!(ResName::parse(&too_long), Err(NameError::TooLong));
    assert_eq!(
        ResName::parse(&"x".repeat(MAX_RES_NAME + 1)),
        Err(NameError::TooLong)
    );
}

#[test]
fn ids_pack_and_print() {
    for kind in ResType::ALL {
        for (core, generation, slot) in [
            (0, 0, 0),
            (63, ResId::GENERATION_MASK, ResId::MAX_SLOTS - 1),
            (5, 77, 1234),
        ] {
            let id = ResId::new(3, core, kind, generation, slot);
            assert_eq!(
                (
                    id.machine(),
                    id.core(),
                    id.kind(),
                    id.generation(),
                    id.slot()
                ),
                (3, core, Some(kind), generation, slot)
            );
            let local = ResId::new(0, core, kind, generation, slot);
            assert_eq!(ResId::parse(&local.to_string()), Some(local));
            assert!(!local.to_string().starts_with('m'));
            assert_eq!(ResId::parse(&id.to_string()), Some(id));
            assert!(id.to_string().starts_with("m3.c"));
            assert_eq!(id.with_machine(0), local);
            assert_eq!(local.with_machine(3), id);
            assert_eq!(ResId::parse(&format!("{:#x}", id.0)), Some(id));
        }
    }
    assert_eq!(ResId(0).kind(), None);
    assert_eq!(ResId::parse("c1:vregion:3"), None);
    assert_eq!(ResId::parse("c64:vregion:3.1"), None);
    assert_eq!(ResId::parse("c1:file:3.1"), None);
    assert_eq!(ResId::parse("0xzz"), None);
    for bad in [
        "m.c1:vregion:3.1",
        "m16.c1:vregion:3.1",
        "mx.c1:vregion:3.1",
        "m1c1:vregion:3.1",
        "m1.1:vregion:3.1",
    ] {
        assert_eq!(ResId::parse(bad), None, "{bad}");
    }
}

#[test]
fn generations_distinguish_ids_of_one_slot() {
    let a = ResId::new(0, 1, ResType::VRegion, 7, 42);
    let b = ResId::new(0, 1, ResType::VRegion, 8, 42);
    assert_ne!(a, b);
    assert_eq!(a.slot(), b.slot());
}

#[test]
fn rights_matrix() {
    let creator = UserId(5);
    let other = UserId(6);
    for op in Op::ALL {
        for user in [creator, other] {
            for allowed in [false, true] {
                let bit = if user == creator {
                    Rights::owner(op)
                } else {
                    Rights::others(op)
                };
                // The creator may always close (see `allows`).
                let allowed_now = allowed || (user == creator && op == Op::Close);
                // Everything else allowed, this one bit as the case says.
                let rights = Rights(if allowed { 0xff } else { !bit });
                assert_eq!(
                    rights.allows(op, user, creator),
                    allowed_now,
                    "{op:?} by {user:?}, allowed={allowed}"
                );
                // And only this bit matters: with nothing else set the answer is the same.
                let only = Rights(if allowed { bit } else { 0 });
                assert_eq!(only.allows(op, user, creator), allowed_now);
            }
        }
        assert!(
            Rights(0).allows(op, UserId::KERNEL, creator),
            "the kernel may always"
        );
    }
    assert!(Rights::OWNER_ALL.allows(Op::Close, creator, creator));
    // A creator who gave itself no close right still may close; nobody else may.
    assert!(Rights(0x0b).allows(Op::Close, creator, creator));
    assert!(!Rights(0x0b).allows(Op::Close, other, creator));
    assert!(Rights(0).useless() && !Rights(0x10).useless());
    assert!(!Rights::OWNER_ALL.allows(Op::Read, other, creator));
}

#[test]
fn rights_text() {
    assert_eq!(&Rights::OWNER_ALL.describe(), b"rwcx/----");
    assert_eq!(&Rights(0x1f).describe(), b"rwcx/r---");
    for v in 0..=255u8 {
        let text = Rights(v).describe();
        assert_eq!(
            Rights::parse(core::str::from_utf8(&text).unwrap()),
            Some(Rights(v))
        );
    }
    for bad in ["", "rwcx", "rwcx-----", "rwcx/rwcy", "xwcr/----"] {
        assert_eq!(Rights::parse(bad), None, "{bad}");
    }
}

#[test]
fn every_type_number_maps_back_to_its_type_and_no_other_number_does() {
    for t in ResType::ALL {
        assert_eq!(ResType::from_u8(t as u8), Some(t));
    }
    let numbered: usize = (0..=u8::MAX)
        .filter(|v| ResType::from_u8(*v).is_some())
        .count();
    assert_eq!(numbered, ResType::ALL.len());
}

#[test]
fn names_reserved_for_a_process() {
    use crate::Pid;
    for (name, pid) in [
        ("p0.57-kvc", Some(Pid::new(0, 57))),
        ("p3.1", Some(Pid::new(3, 1))),
        ("p12.400-a-b", Some(Pid::new(12, 400))),
        ("p0.0-x", None),
        ("p+0.57-kvc", None),
        ("p0.57x-kvc", None),
        ("p0-kvc", None),
        ("kvc-0-57", None),
        ("pipe0", None),
        ("p", None),
        ("p-", None),
        ("P0.57-kvc", None),
        ("p00.57-kvc", None),
        ("p0.057-kvc", None),
        ("p0.57.1-kvc", None),
        ("p64.1-x", None),
        ("p0.99999999999-x", None),
        ("p10.0-x", None),
    ] {
        assert_eq!(reserved_for(name), pid, "{name}");
    }
}
