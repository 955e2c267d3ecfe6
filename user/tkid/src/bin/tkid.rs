//! `tkid`: the child of `cargo xtask bench tender` with 4 KiB of text (see ../lib.rs).
#![no_std]
#![no_main]

tkid::program!(4);
