//! `tkid28`: [`tkid`](../../lib.rs) with 28 KiB of text (P4 Fig. 8).
#![no_std]
#![no_main]

tkid::program!(28);
