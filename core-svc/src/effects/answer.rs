//! What a handler answers: an output, or why it has none. Every handler (Workspace.*,
//! Ailang.*) answers in these terms and the broker reads only them.

/// What a handler answered. A refusal (`{"ok":false,"refused":…}`: confinement, a missing
/// file, an op World-rs does not serve) is recorded `failed` with this output as its reason.
#[derive(Debug)]
pub struct Output {
    pub bytes: Vec<u8>,
    pub refused: bool,
}

/// Why a handler did not produce an output.
#[derive(Debug, thiserror::Error)]
pub enum HandlerFailure {
    /// The request was refused or the handler failed before changing anything: the effect
    /// is recorded `failed`.
    #[error("{0}")]
    Failed(String),
    /// Whether the handler changed anything is unknown: the effect stays indeterminate.
    #[error("{0}")]
    Indeterminate(String),
}
