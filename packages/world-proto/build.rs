//! Compiles proto/world/v1/world.proto with protox (pure Rust), so building needs no protoc.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let file = "world/v1/world.proto";
    println!("cargo:rerun-if-changed={}", root.join(file).display());
    let descriptors = protox::compile([file], [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("world_v1_descriptor.bin"), prost::Message::encode_to_vec(&descriptors))?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
