//! The world.v1 gRPC contract, generated from `proto/world/v1` — the only
//! thing the core and the edge share on the wire.

pub mod v1 {
    tonic::include_proto!("world.v1");

    /// The encoded file descriptor set, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/world_v1_descriptor.bin"));
}
