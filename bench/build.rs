fn main() -> Result<(), Box<dyn std::error::Error>> {
    // the vendored protoc, as the proto crate does: a fresh machine builds with cargo alone
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    std::env::set_var("PROTOC", protoc);
    println!("cargo:rerun-if-changed=proto/echo.proto");
    tonic_prost_build::configure()
        .bytes(".")
        .compile_protos(&["proto/echo.proto"], &["proto"])?;
    Ok(())
}
