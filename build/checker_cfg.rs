//! The build script of every crate with checker-only code: it sets
//! `crtc_checker` when a model checker (`--cfg crtc_loom` or
//! `--cfg crtc_shuttle`) is on, so the code spells "checker build" once.
fn main() {
    // The checker cfgs arrive through the flags; nothing else changes the answer.
    println!("cargo::rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let checkers = ["CARGO_CFG_CRTC_LOOM", "CARGO_CFG_CRTC_SHUTTLE"];
    if checkers.iter().any(|cfg| std::env::var_os(cfg).is_some()) {
        println!("cargo::rustc-cfg=crtc_checker");
    }
}
