//! Host tests: a small ELF writer builds valid images, and each rule is broken on purpose.

use super::*;

struct Seg {
    vaddr: u64,
    offset: u64,
    filesz: u64,
    memsz: u64,
    flags: u32,
    ptype: u32,
    align: u64,
}

fn seg(vaddr: u64, offset: u64, size: u64, flags: u32) -> Seg {
    Seg {
        vaddr,
        offset,
        filesz: size,
        memsz: size,
        flags,
        ptype: PT_LOAD,
        align: 0x1000,
    }
}

/// A 64-bit x86_64 ET_EXEC image with the given segments and entry; file is 0x3000 bytes.
fn image(segs: &[Seg], entry: u64) -> Vec<u8> {
    let mut f = vec![0u8; 0x3000];
    f[0..4].copy_from_slice(b"\x7fELF");
    f[4] = 2; // ELFCLASS64
    f[5] = 1; // little endian
    f[6] = 1; // version
    let put16 =
        |f: &mut Vec<u8>, at: usize, v: u16| f[at..at + 2].copy_from_slice(&v.to_le_bytes());
    let put32 =
        |f: &mut Vec<u8>, at: usize, v: u32| f[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let put64 =
        |f: &mut Vec<u8>, at: usize, v: u64| f[at..at + 8].copy_from_slice(&v.to_le_bytes());
    put16(&mut f, 16, ET_EXEC);
    put16(&mut f, 18, EM_X86_64);
    put32(&mut f, 20, 1);
    put64(&mut f, 24, entry);
    put64(&mut f, 32, 64); // phoff
    put16(&mut f, 52, 64); // ehsize
    put16(&mut f, 54, 56); // phentsize
    put16(&mut f, 56, segs.len() as u16);
    for (i, s) in segs.iter().enumerate() {
        let at = 64 + i * 56;
        put32(&mut f, at, s.ptype);
        put32(&mut f, at + 4, s.flags);
        put64(&mut f, at + 8, s.offset);
        put64(&mut f, at + 16, s.vaddr);
        put64(&mut f, at + 24, s.vaddr);
        put64(&mut f, at + 32, s.filesz);
        put64(&mut f, at + 40, s.memsz);
        put64(&mut f, at + 48, s.align);
    }
    f
}

fn good_segments() -> Vec<Seg> {
    vec![
        seg(0x40_1000, 0x1000, 0x200, PF_R | PF_X),
        Seg {
            memsz: 0x3000,
            ..seg(0x40_2000, 0x2000, 0x100, PF_R | PF_W)
        },
    ]
}

#[test]
fn valid_image_plans() {
    let p = plan(&image(&good_segments(), 0x40_1010)).expect("valid image");
    assert_eq!(p.entry, 0x40_1010);
    assert_eq!(p.segments.len(), 2);
    assert!(p.segments[0].executable && !p.segments[0].writable);
    assert!(p.segments[1].writable && !p.segments[1].executable);
    assert_eq!(p.segments[1].file_size, 0x100);
    assert_eq!(p.segments[1].mem_size, 0x3000);
    assert_eq!(p.end, 0x40_5000);
}

#[test]
fn not_elf_and_truncated() {
    assert_eq!(plan(b""), Err(LoadError::NotElf));
    assert_eq!(plan(b"#!/bin/sh\necho hi\n"), Err(LoadError::NotElf));
    let img = image(&good_segments(), 0x40_1010);
    assert_eq!(plan(&img[..40]), Err(LoadError::NotElf));
    // Header intact, program headers cut off.
    assert_eq!(plan(&img[..100]), Err(LoadError::BadProgramHeaders));
    // Program headers intact, segment bytes cut off.
    assert_eq!(plan(&img[..0x2050]), Err(LoadError::SegmentOutsideFile));
}

#[test]
fn wrong_kind_of_elf() {
    let mut img = image(&good_segments(), 0x40_1010);
    img[18] = 0x28; // EM_ARM
    assert_eq!(plan(&img), Err(LoadError::WrongMachine));
    let mut img = image(&good_segments(), 0x40_1010);
    img[4] = 1; // 32-bit
    assert!(matches!(
        plan(&img),
        Err(LoadError::WrongMachine | LoadError::NotElf)
    ));
    let mut img = image(&good_segments(), 0x40_1010);
    img[16] = 3; // ET_DYN
    assert_eq!(plan(&img), Err(LoadError::NotStaticExecutable));
    let mut segs = good_segments();
    segs.push(Seg {
        ptype: PT_INTERP,
        ..seg(0x40_8000, 0x100, 0x10, PF_R)
    });
    assert_eq!(
        plan(&image(&segs, 0x40_1010)),
        Err(LoadError::NotStaticExecutable)
    );
}

#[test]
fn segments_outside_file_or_range() {
    let cases: [(Seg, LoadError); 6] = [
        (
            seg(0x40_1000, 0x2f00, 0x200, PF_R | PF_X),
            LoadError::SegmentOutsideFile,
        ),
        (
            Seg {
                memsz: 0x10,
                ..seg(0x40_1000, 0x1000, 0x200, PF_R | PF_X)
            },
            LoadError::SegmentOutsideFile,
        ),
        (
            Seg {
                offset: u64::MAX - 4,
                ..seg(0x40_1000, 0, 0x200, PF_R | PF_X)
            },
            LoadError::SegmentOutsideFile,
        ),
        (
            seg(0, 0x1000, 0x200, PF_R | PF_X),
            LoadError::SegmentOutsideUserRange,
        ),
        (
            seg(0xffff_ffff_8000_1000, 0x1000, 0x200, PF_R | PF_X),
            LoadError::SegmentOutsideUserRange,
        ),
        (
            Seg {
                memsz: u64::MAX,
                ..seg(0x40_1000, 0x1000, 0x200, PF_R | PF_X)
            },
            LoadError::SegmentOutsideUserRange,
        ),
    ];
    for (s, want) in cases {
        assert_eq!(plan(&image(&[s], 0x40_1010)), Err(want));
    }
}

#[test]
fn overlap_wx_alignment_entry() {
    let overlapping = [
        seg(0x40_1000, 0x1000, 0x200, PF_R | PF_X),
        seg(0x40_1000, 0x1000, 0x100, PF_R),
    ];
    assert_eq!(
        plan(&image(&overlapping, 0x40_1010)),
        Err(LoadError::SegmentsOverlap)
    );
    let shared_page = [
        seg(0x40_1000, 0x1000, 0x200, PF_R | PF_X),
        seg(0x40_1800, 0x1800, 0x100, PF_R | PF_W),
    ];
    assert_eq!(
        plan(&image(&shared_page, 0x40_1010)),
        Err(LoadError::SegmentsOverlap)
    );
    let wx = [seg(0x40_1000, 0x1000, 0x200, PF_R | PF_W | PF_X)];
    assert_eq!(
        plan(&image(&wx, 0x40_1010)),
        Err(LoadError::WritableAndExecutable)
    );
    let misaligned = [seg(0x40_1004, 0x1000, 0x200, PF_R | PF_X)];
    assert_eq!(
        plan(&image(&misaligned, 0x40_1010)),
        Err(LoadError::BadAlignment)
    );
    let odd_align = [Seg {
        align: 3,
        ..seg(0x40_1000, 0x1000, 0x200, PF_R | PF_X)
    }];
    assert_eq!(
        plan(&image(&odd_align, 0x40_1010)),
        Err(LoadError::BadAlignment)
    );
    assert_eq!(
        plan(&image(&good_segments(), 0x40_2010)),
        Err(LoadError::BadEntry),
        "entry in data"
    );
    assert_eq!(
        plan(&image(&good_segments(), 0x90_0000)),
        Err(LoadError::BadEntry),
        "entry outside"
    );
    assert_eq!(plan(&image(&[], 0x40_1010)), Err(LoadError::SegmentCount));
    let many: Vec<Seg> = (0..17)
        .map(|i| seg(0x40_0000 + i * 0x1000, 0x1000, 0x10, PF_R | PF_X))
        .collect();
    assert_eq!(plan(&image(&many, 0x40_0000)), Err(LoadError::SegmentCount));
}

#[test]
fn too_many_program_headers() {
    let null = || Seg {
        ptype: 0, // PT_NULL
        ..seg(0, 0, 0, 0)
    };
    let mut segs = good_segments();
    segs.extend((segs.len()..MAX_PROGRAM_HEADERS).map(|_| null()));
    assert!(
        plan(&image(&segs, 0x40_1010)).is_ok(),
        "{MAX_PROGRAM_HEADERS} headers"
    );
    segs.push(null());
    assert_eq!(
        plan(&image(&segs, 0x40_1010)).err(),
        Some(LoadError::BadProgramHeaders)
    );
}

#[test]
fn host_binaries_are_refused_cleanly() {
    // A Debian binary is a dynamically linked PIE: refused, never a panic.
    if let Ok(bytes) = std::fs::read("/bin/true") {
        assert_eq!(plan(&bytes), Err(LoadError::NotStaticExecutable));
    }
}

#[test]
fn mutations_never_panic() {
    let base = image(&good_segments(), 0x40_1010);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut ok, mut err) = (0, 0);
    for _ in 0..20_000 {
        let mut img = base.clone();
        for _ in 0..(next() % 4 + 1) {
            // Mostly flip header and program-header bytes, where the rules live.
            let at = (next() % 0x100) as usize;
            img[at] = next() as u8;
        }
        if next() % 8 == 0 {
            img.truncate((next() % 0x3000) as usize);
        }
        match plan(&img) {
            Ok(p) => {
                ok += 1;
                for s in &p.segments {
                    assert!(s.vaddr >= USER_MIN && s.vaddr + s.mem_size <= USER_MAX);
                    assert!(s.file_offset + s.file_size <= img.len() as u64);
                    assert!(!(s.writable && s.executable));
                }
            }
            Err(_) => err += 1,
        }
    }
    assert!(
        ok > 0 && err > 0,
        "mutations should both keep and break images ({ok} ok, {err} refused)"
    );
}
