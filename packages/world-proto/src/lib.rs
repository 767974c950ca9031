//! gRPC contract.
