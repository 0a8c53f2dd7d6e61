//! The soname MPICH-built programs ask for (`NEEDED libmpich.so.12`).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpich.so.12");
}
