//! Records the compiler that builds the `crtc` binary (`rustc --version`)
//! for the provenance of every results header (`compare::output::provenance`).

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let version = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=CRTC_RUSTC_VERSION={version}");
    println!("cargo:rerun-if-env-changed=RUSTC");
}
