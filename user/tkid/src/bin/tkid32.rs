//! `tkid32`: [`tkid`](../../lib.rs) with 32 KiB of text (P4 Fig. 8).
#![no_std]
#![no_main]

tkid::program!(32);
