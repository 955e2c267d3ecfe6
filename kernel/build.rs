//! Link arguments for the freestanding kernel binary (see docs/design.md, "Building").
//!
//! The kernel is built for the host target with no C runtime: no start files, no libc,
//! static, not position-independent, laid out by `link.ld`. `rustc-link-arg-bins` keeps
//! these flags away from build scripts and proc macros.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let script = format!("{dir}/link.ld");
    for arg in [
        "-nostartfiles",
        "-static",
        "-nostdlib",
        "-no-pie",
        "-Wl,--build-id=none",
        "-Wl,-z,max-page-size=4096",
        "-Wl,--no-dynamic-linker",
        &format!("-Wl,-T,{script}"),
    ] {
        println!("cargo:rustc-link-arg-bins={arg}");
    }
    println!("cargo:rerun-if-changed=link.ld");
    println!("cargo:rerun-if-changed=build.rs");
}
