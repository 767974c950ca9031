//! Effects: the broker (grant law, durable intent and outcome, the debit), episode turns,
//! the confined worktree handlers, and recovery at start.

pub mod ailang;
pub mod answer;
pub(crate) mod broker;
pub(crate) mod episodes;
pub mod handlers;
pub mod recovery;
pub mod workspace;
pub mod worktree;

use world_model::HashRef;

/// The ref of this executable's bytes: the `tool` of every effect it performs itself.
pub fn core_binary_ref() -> std::io::Result<HashRef> {
    file_ref(std::path::Path::new("/proc/self/exe"))
}

/// The sha256 ref of a file's bytes, read in chunks.
pub fn file_ref(path: &std::path::Path) -> std::io::Result<HashRef> {
    use sha2::Digest;
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = sha2::Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buffer)? {
            0 => break,
            n => hasher.update(&buffer[..n]),
        }
    }
    Ok(HashRef::from_digest(hasher.finalize().into()))
}
