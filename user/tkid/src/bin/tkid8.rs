//! `tkid8`: [`tkid`](../../lib.rs) with 8 KiB of text (P4 Fig. 8).
#![no_std]
#![no_main]

tkid::program!(8);
