//! Architecture-specific code. Musubi runs on x86_64 only; the split keeps the hardware
//! details in one place so the rest of the kernel reads as policy.

pub mod x86_64;
