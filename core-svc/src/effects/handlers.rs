//! Which effects an episode can have performed, and by what: the handlers served for an
//! episode whose worktree exists under the workspace root.

use std::path::PathBuf;
use std::sync::Arc;

use world_model::Episode;

use super::ailang::AilangHandlers;
use super::answer::{HandlerFailure, Output};
use super::workspace::WorkspaceHandlers;
use super::worktree::Worktree;

/// The handlers of this core, for any episode.
pub struct Effects {
    workspace_root: PathBuf,
    workspace: WorkspaceHandlers,
    ailang: AilangHandlers,
}

/// The handlers of one episode: its worktree and the effect names served there.
pub struct Bound {
    worktree: Arc<Worktree>,
}

impl Effects {
    pub fn new(workspace_root: PathBuf, workspace: WorkspaceHandlers, ailang: AilangHandlers) -> Self {
        Self { workspace_root, workspace, ailang }
    }

    /// The handlers for `episode`, or none when its worktree is absent, not a directory or
    /// reached through a symlink (R8 then refuses every effectful call of the episode).
    pub fn bind(&self, episode: &Episode) -> Option<Bound> {
        match Worktree::open(&self.workspace_root, episode) {
            Ok(worktree) => Some(Bound { worktree: Arc::new(worktree) }),
            Err(error) => {
                tracing::debug!(%episode, %error, "episode has no worktree; its effects have no handler");
                None
            }
        }
    }

    /// Whether `effect` has a handler in a bound episode.
    pub fn handles(&self, effect: &str) -> bool {
        WorkspaceHandlers::EFFECTS.contains(&effect) || AilangHandlers::EFFECTS.contains(&effect)
    }

    /// Whether `effect` only reads, so that running it changes nothing a crash could leave
    /// unrecorded: its handler may run while its intent is being made durable.
    pub fn changes_nothing(&self, effect: &str) -> bool {
        effect == WorkspaceHandlers::READ
    }

    /// Performs one effect; blocking file work runs off the async threads.
    pub async fn handle(
        &self,
        bound: &Bound,
        effect: &str,
        scope: &str,
        payload: &[u8],
    ) -> Result<Output, HandlerFailure> {
        if AilangHandlers::EFFECTS.contains(&effect) {
            return self.ailang.handle(&bound.worktree, effect, scope, payload).await;
        }
        let worktree = Arc::clone(&bound.worktree);
        let workspace = self.workspace.clone();
        let (effect, scope, payload) = (effect.to_owned(), scope.to_owned(), payload.to_vec());
        tokio::task::spawn_blocking(move || workspace.handle(&worktree, &effect, &scope, &payload))
            .await
            .map_err(|e| HandlerFailure::Indeterminate(format!("the handler ended abnormally: {e}")))?
    }
}
