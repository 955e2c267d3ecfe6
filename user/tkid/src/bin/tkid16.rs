//! `tkid16`: [`tkid`](../../lib.rs) with 16 KiB of text (P4 Fig. 8).
#![no_std]
#![no_main]

tkid::program!(16);
