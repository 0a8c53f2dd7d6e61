fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The vendored protoc: a fresh machine builds with `cargo build` alone.
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    std::env::set_var("PROTOC", protoc);
    println!("cargo:rerun-if-changed=proto/onesided/v1/onesided.proto");
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("onesided_descriptor.bin"))
        .bytes(".")
        // prost's encoding, each message decoded from its bytes taken whole (codec.rs)
        .codec_path("crate::codec::Codec")
        // it carries rank tokens: its Debug (in lib.rs) shows how many, never which
        .skip_debug(["onesided.v1.CreateWorldResponse"])
        .compile_protos(&["proto/onesided/v1/onesided.proto"], &["proto"])?;
    // how the audit store holds an event, for other languages; the tests hold core's encoder
    // to it
    println!("cargo:rerun-if-changed=proto/onesided/audit/v1/event.proto");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .compile_protos(&["proto/onesided/audit/v1/event.proto"], &["proto"])?;
    Ok(())
}
