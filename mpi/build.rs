//! The soname MPICH-built programs ask for (`NEEDED libmpich.so.12`), and a stub for every
//! function of the system's `mpi.h` (`abi/functions.txt`) the crate does not define itself
//! (but the large-count `_c` bindings, below):
//! a program (or mpi4py, which resolves every symbol when Python imports it) then loads, and a
//! call of one fails with `MPI_ERR_UNSUPPORTED_OPERATION` (`src/unsupported.rs`) instead of the
//! loader's `undefined symbol`.

use std::collections::BTreeSet;
use std::path::Path;

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpich.so.12");
    println!("cargo:rerun-if-changed=abi/functions.txt");
    println!("cargo:rerun-if-changed=src");
    let listed = std::fs::read_to_string("abi/functions.txt").expect("abi/functions.txt");
    let mut defined = BTreeSet::new();
    for entry in std::fs::read_dir("src").expect("src") {
        let path = entry.expect("a source file").path();
        if path.extension().is_some_and(|ext| ext == "rs") {
            defined.extend(defined_in(
                &std::fs::read_to_string(&path).expect("a source file"),
            ));
        }
    }
    let mut stubs = String::from("unsupported! {\n");
    for name in listed
        .lines()
        .map(str::trim)
        .filter(|name| !name.is_empty())
    {
        // MPI-4's large-count bindings (`MPI_Send_c`, …) stay undefined: mpi4py refers to them
        // weakly and uses the int bindings when they are absent, where a stub would fail its
        // every call; a C program calling one stops at load with `undefined symbol`
        if !defined.contains(name) && !name.ends_with("_c") {
            stubs.push_str(&format!(
                "    {name} / P{name}: \"a call this library does not implement\",\n"
            ));
        }
    }
    stubs.push_str("}\n");
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    std::fs::write(Path::new(&out).join("stubs.rs"), stubs).expect("OUT_DIR/stubs.rs");
}

/// The MPI functions a source file defines: each `MPI_X / PMPI_X` pair (the crate's `export!`,
/// `export_with_request_form!`, `sends!` and `unsupported!` invocations) and each `fn MPI_X(` written out.
fn defined_in(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("MPI_") {
        let before = rest[..at].chars().last();
        let name_end = rest[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(rest.len(), |end| at + end);
        let name = &rest[at..name_end];
        let after = &rest[name_end..];
        let paired = after.starts_with(&format!(" / P{name}"));
        let written = before == Some(' ') && rest[..at].ends_with("fn ") && after.starts_with('(');
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') && (paired || written) {
            names.push(name.to_string());
        }
        rest = &rest[name_end..];
    }
    names
}
