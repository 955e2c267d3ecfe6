//! `tkid20`: [`tkid`](../../lib.rs) with 20 KiB of text (P4 Fig. 8).
#![no_std]
#![no_main]

tkid::program!(20);
