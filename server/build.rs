//! Hands the compiler's version to the crate, for `onesided_build_info`'s `rustc` label
//! (`src/metrics.rs`). Never fails the build: a compiler that does not tell its version
//! leaves the label out. (The commit label comes from `ONESIDED_BUILD_COMMIT`, read by the
//! crate itself: a clone without git, or the Docker build's context without `.git`, builds
//! the same.)

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let said = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok());
    // "rustc 1.91.0 (f8297e351 2025-10-28)": the version alone
    if let Some(version) = said
        .as_deref()
        .and_then(|text| text.split_whitespace().nth(1))
    {
        println!("cargo:rustc-env=ONESIDED_RUSTC_VERSION={version}");
    }
}
