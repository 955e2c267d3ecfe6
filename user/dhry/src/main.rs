//! `dhry RUNS`: a Dhrystone-like CPU-bound integer benchmark, the CPU-bound workload of
//! `cargo xtask bench symmetry` (P2, Limited Symmetry, Fig. 3: "Dhrystone, 4 copies").
//!
//! It follows Dhrystone 2.1's main loop (Reinhold Weicker, 1988): record assignment through
//! a pointer (here an index), string copies and compares, integer arithmetic, arrays, and
//! the procedure calls `Proc_1` .. `Proc_8`, `Func_1` .. `Func_3`, RUNS times. The loop
//! makes no system calls; the only ones are the heap's start-up and the exit. At the end it
//! checks the final values Dhrystone prints ("should be" in the original) and exits 0 if
//! they all hold, 3 (printing what differed) if not: the compiler has not optimised the
//! work away, and the machine computed it right.
//!
//! `core::hint::black_box` keeps the compiler from folding iterations together: each
//! iteration starts from state the optimiser cannot see through.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use core::hint::black_box;
use ulib::println;

ulib::main!(main);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ident {
    I1,
    I2,
    I3,
    I4,
    /// Dhrystone declares it and `Proc_6` handles it, but no run reaches it.
    #[allow(dead_code)]
    I5,
}

/// Dhrystone's `Rec_Type` (the variant with `Enum_Comp`, `Int_Comp` and `Str_Comp`).
#[derive(Clone, Copy)]
struct Record {
    /// Index of the record `Ptr_Comp` points at.
    ptr_comp: usize,
    discr: Ident,
    enum_comp: Ident,
    int_comp: i32,
    str_comp: [u8; 31],
}

const EMPTY: Record = Record {
    ptr_comp: 0,
    discr: Ident::I1,
    enum_comp: Ident::I1,
    int_comp: 0,
    str_comp: [0; 31],
};

/// Dhrystone's globals. `PTR_GLOB` and `NEXT_PTR_GLOB` index `recs`.
struct Globals {
    recs: [Record; 2],
    int_glob: i32,
    bool_glob: bool,
    ch_1_glob: u8,
    ch_2_glob: u8,
    arr_1: [i32; 50],
    arr_2: [[i32; 50]; 50],
}

const PTR_GLOB: usize = 0;
const NEXT_PTR_GLOB: usize = 1;

fn str31(s: &[u8; 30]) -> [u8; 31] {
    let mut out = [0u8; 31];
    out[..30].copy_from_slice(s);
    out
}

fn main(args: &[&str]) -> i32 {
    let Some(runs) = args.get(1).and_then(|a| a.parse::<u32>().ok()) else {
        println!("usage: dhry RUNS");
        return 2;
    };
    let mut g = Box::new(Globals {
        recs: [EMPTY; 2],
        int_glob: 0,
        bool_glob: false,
        ch_1_glob: 0,
        ch_2_glob: 0,
        arr_1: [0; 50],
        arr_2: [[0; 50]; 50],
    });
    g.recs[PTR_GLOB] = Record {
        ptr_comp: NEXT_PTR_GLOB,
        discr: Ident::I1,
        enum_comp: Ident::I3,
        int_comp: 40,
        str_comp: str31(b"DHRYSTONE PROGRAM, SOME STRING"),
    };
    let str_1_loc = str31(b"DHRYSTONE PROGRAM, 1'ST STRING");
    let mut str_2_loc = [0u8; 31];
    g.arr_2[8][7] = 10;

    let (mut int_1_loc, mut int_2_loc, mut int_3_loc) = (0i32, 0i32, 0i32);
    let mut enum_loc = Ident::I1;
    for run_index in 1..=runs as i32 {
        let g = black_box(&mut *g);
        proc_5(g);
        proc_4(g);
        int_1_loc = 2;
        int_2_loc = 3;
        str_2_loc = str31(black_box(b"DHRYSTONE PROGRAM, 2'ND STRING"));
        enum_loc = Ident::I2;
        g.bool_glob = !func_2(g, &str_1_loc, &str_2_loc);
        while int_1_loc < int_2_loc {
            int_3_loc = 5 * int_1_loc - int_2_loc;
            proc_7(int_1_loc, int_2_loc, &mut int_3_loc);
            int_1_loc += 1;
        }
        proc_8(g, int_1_loc, int_3_loc);
        proc_1(g, PTR_GLOB);
        let mut ch_index = b'A';
        while ch_index <= g.ch_2_glob {
            if enum_loc == func_1(g, ch_index, b'C') {
                proc_6(g, Ident::I1, &mut enum_loc);
                str_2_loc = str31(black_box(b"DHRYSTONE PROGRAM, 3'RD STRING"));
                int_2_loc = run_index;
                g.int_glob = run_index;
            }
            ch_index += 1;
        }
        int_2_loc *= int_1_loc;
        int_1_loc = int_2_loc / int_3_loc;
        int_2_loc = 7 * (int_2_loc - int_3_loc) - int_1_loc;
        proc_2(g, &mut int_1_loc);
        black_box((&str_2_loc, int_1_loc, int_2_loc, int_3_loc, enum_loc));
    }

    // Dhrystone 2.1's "should be" values.
    let next = &g.recs[NEXT_PTR_GLOB];
    let glob = &g.recs[PTR_GLOB];
    let checks: [(&str, i64, i64); 16] = [
        ("Int_Glob", g.int_glob.into(), 5),
        ("Bool_Glob", g.bool_glob.into(), 1),
        ("Ch_1_Glob", g.ch_1_glob.into(), b'A'.into()),
        ("Ch_2_Glob", g.ch_2_glob.into(), b'B'.into()),
        ("Arr_1_Glob[8]", g.arr_1[8].into(), 7),
        (
            "Arr_2_Glob[8][7]",
            g.arr_2[8][7].into(),
            i64::from(runs) + 10,
        ),
        ("Ptr_Glob->Discr", glob.discr as i64, 0),
        ("Ptr_Glob->Enum_Comp", glob.enum_comp as i64, 2),
        ("Ptr_Glob->Int_Comp", glob.int_comp.into(), 17),
        ("Next_Ptr_Glob->Discr", next.discr as i64, 0),
        ("Next_Ptr_Glob->Enum_Comp", next.enum_comp as i64, 1),
        ("Next_Ptr_Glob->Int_Comp", next.int_comp.into(), 18),
        ("Int_1_Loc", int_1_loc.into(), 5),
        ("Int_2_Loc", int_2_loc.into(), 13),
        ("Int_3_Loc", int_3_loc.into(), 7),
        ("Enum_Loc", enum_loc as i64, 1),
    ];
    let strings_ok = glob.str_comp[..30] == *b"DHRYSTONE PROGRAM, SOME STRING"
        && next.str_comp[..30] == *b"DHRYSTONE PROGRAM, SOME STRING"
        && str_2_loc[..30] == *b"DHRYSTONE PROGRAM, 2'ND STRING";
    let mut ok = strings_ok;
    if !strings_ok {
        println!("dhry: a string differs from Dhrystone's final value");
    }
    for (name, got, want) in checks {
        if runs > 0 && got != want {
            println!("dhry: {name} is {got}, should be {want}");
            ok = false;
        }
    }
    if ok {
        0
    } else {
        3
    }
}

#[inline(never)]
fn proc_1(g: &mut Globals, ptr_val_par: usize) {
    let next_record = g.recs[ptr_val_par].ptr_comp;
    g.recs[next_record] = g.recs[PTR_GLOB];
    g.recs[ptr_val_par].int_comp = 5;
    g.recs[next_record].int_comp = g.recs[ptr_val_par].int_comp;
    g.recs[next_record].ptr_comp = g.recs[ptr_val_par].ptr_comp;
    let mut p = g.recs[next_record].ptr_comp;
    proc_3(g, &mut p);
    g.recs[next_record].ptr_comp = p;
    if g.recs[next_record].discr == Ident::I1 {
        g.recs[next_record].int_comp = 6;
        let mut e = g.recs[next_record].enum_comp;
        proc_6(g, g.recs[ptr_val_par].enum_comp, &mut e);
        g.recs[next_record].enum_comp = e;
        g.recs[next_record].ptr_comp = g.recs[PTR_GLOB].ptr_comp;
        let mut i = g.recs[next_record].int_comp;
        proc_7(g.recs[next_record].int_comp, 10, &mut i);
        g.recs[next_record].int_comp = i;
    } else {
        g.recs[ptr_val_par] = g.recs[g.recs[ptr_val_par].ptr_comp];
    }
}

#[inline(never)]
fn proc_2(g: &Globals, int_par_ref: &mut i32) {
    let mut int_loc = *int_par_ref + 10;
    let mut enum_loc = Ident::I2;
    loop {
        if g.ch_1_glob == b'A' {
            int_loc -= 1;
            *int_par_ref = int_loc - g.int_glob;
            enum_loc = Ident::I1;
        }
        if enum_loc == Ident::I1 {
            break;
        }
    }
}

#[inline(never)]
fn proc_3(g: &mut Globals, ptr_ref_par: &mut usize) {
    *ptr_ref_par = g.recs[PTR_GLOB].ptr_comp;
    let mut i = g.recs[PTR_GLOB].int_comp;
    proc_7(10, g.int_glob, &mut i);
    g.recs[PTR_GLOB].int_comp = i;
}

#[inline(never)]
fn proc_4(g: &mut Globals) {
    let bool_loc = g.ch_1_glob == b'A';
    g.bool_glob |= bool_loc;
    g.ch_2_glob = b'B';
}

#[inline(never)]
fn proc_5(g: &mut Globals) {
    g.ch_1_glob = b'A';
    g.bool_glob = false;
}

#[inline(never)]
fn proc_6(g: &Globals, enum_val_par: Ident, enum_ref_par: &mut Ident) {
    *enum_ref_par = enum_val_par;
    if !func_3(enum_val_par) {
        *enum_ref_par = Ident::I4;
    }
    match enum_val_par {
        Ident::I1 => *enum_ref_par = Ident::I1,
        Ident::I2 => {
            *enum_ref_par = if g.int_glob > 100 {
                Ident::I1
            } else {
                Ident::I4
            }
        }
        Ident::I3 => *enum_ref_par = Ident::I2,
        Ident::I4 => {}
        Ident::I5 => *enum_ref_par = Ident::I3,
    }
}

#[inline(never)]
fn proc_7(int_1_par_val: i32, int_2_par_val: i32, int_par_ref: &mut i32) {
    let int_loc = int_1_par_val + 2;
    *int_par_ref = int_2_par_val + int_loc;
}

#[inline(never)]
fn proc_8(g: &mut Globals, int_1_par_val: i32, int_2_par_val: i32) {
    let int_loc = (int_1_par_val + 5) as usize;
    g.arr_1[int_loc] = int_2_par_val;
    g.arr_1[int_loc + 1] = g.arr_1[int_loc];
    g.arr_1[int_loc + 30] = int_loc as i32;
    for int_index in int_loc..=int_loc + 1 {
        g.arr_2[int_loc][int_index] = int_loc as i32;
    }
    g.arr_2[int_loc][int_loc - 1] += 1;
    g.arr_2[int_loc + 20][int_loc] = g.arr_1[int_loc];
    g.int_glob = 5;
}

#[inline(never)]
fn func_1(g: &mut Globals, ch_1_par_val: u8, ch_2_par_val: u8) -> Ident {
    let ch_1_loc = ch_1_par_val;
    let ch_2_loc = ch_1_loc;
    if ch_2_loc != ch_2_par_val {
        Ident::I1
    } else {
        g.ch_1_glob = ch_1_loc;
        Ident::I2
    }
}

#[inline(never)]
fn func_2(g: &mut Globals, str_1_par_ref: &[u8; 31], str_2_par_ref: &[u8; 31]) -> bool {
    let mut int_loc = 2usize;
    let mut ch_loc = 0u8;
    while int_loc <= 2 {
        if func_1(g, str_1_par_ref[int_loc], str_2_par_ref[int_loc + 1]) == Ident::I1 {
            ch_loc = b'A';
            int_loc += 1;
        }
    }
    if (b'W'..b'Z').contains(&ch_loc) {
        int_loc = 7;
    }
    if ch_loc == b'R' {
        true
    } else if strcmp(str_1_par_ref, str_2_par_ref) > 0 {
        int_loc += 7;
        g.int_glob = int_loc as i32;
        true
    } else {
        false
    }
}

#[inline(never)]
fn func_3(enum_par_val: Ident) -> bool {
    enum_par_val == Ident::I3
}

/// C's `strcmp` over NUL-terminated byte strings.
fn strcmp(a: &[u8; 31], b: &[u8; 31]) -> i32 {
    for (x, y) in a.iter().zip(b) {
        if x != y || *x == 0 {
            return i32::from(*x) - i32::from(*y);
        }
    }
    0
}
