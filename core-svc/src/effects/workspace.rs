//! `Workspace.Read` and `Workspace.Write`: native handlers over an episode's worktree.
//!
//! A malformed request (wrong scope, an op the effect does not allow, unknown or missing
//! keys) is a handler failure, recorded `failed`; a path the confinement refuses, or a file
//! problem, is a successful effect whose output says `{"ok":false,"refused":…}`, as the
//! reference's policy tool answers.

use serde_json::{Map, Value, json};
use world_model::{HashRef, canonical_value};

use super::worktree::{ConfinementPolicy, Refused, Worktree};

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HandlerError(String);

#[derive(Clone)]
pub struct WorkspaceHandlers {
    policy: ConfinementPolicy,
    /// The executable performing these effects: the world-core binary.
    tool: HashRef,
}

impl WorkspaceHandlers {
    pub const EFFECTS: [&'static str; 2] = ["Workspace.Read", "Workspace.Write"];

    pub fn new(tool: HashRef) -> Self {
        Self { policy: ConfinementPolicy::default(), tool }
    }

    pub fn handle(
        &self,
        worktree: &Worktree,
        effect: &str,
        scope: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, HandlerError> {
        let fail = |why: String| HandlerError(format!("{effect}: {why}"));
        if scope != "worktree" {
            return Err(fail(format!("scope {scope:?} is not served; the only scope is \"worktree\"")));
        }
        let request: Map<String, Value> =
            serde_json::from_slice(payload).map_err(|e| fail(format!("the payload is not one JSON object: {e}")))?;
        if let Some(alias) = request.keys().find(|k| k.eq_ignore_ascii_case("op") && *k != "op") {
            return Err(fail(format!("key {alias:?} is not \"op\"")));
        }
        let op = request.get("op").and_then(Value::as_str).ok_or_else(|| fail("op must be a string".into()))?;
        let keys: &[&str] = match (effect, op) {
            ("Workspace.Read", "read") => &["op", "path"],
            ("Workspace.Write", "write") => &["op", "path", "content"],
            ("Workspace.Write", "edit") => &["op", "path", "old_text", "new_text"],
            ("Workspace.Read", _) => return Err(fail(format!("op {op:?} is not allowed; allowed: read"))),
            ("Workspace.Write", _) => return Err(fail(format!("op {op:?} is not allowed; allowed: write, edit"))),
            _ => return Err(fail("no handler for this effect".into())),
        };
        if let Some(unknown) = request.keys().find(|k| !keys.contains(&k.as_str())) {
            return Err(fail(format!("unknown key {unknown:?}; op {op} takes {}", keys.join(", "))));
        }
        let field = |key: &str| -> Result<&str, HandlerError> {
            request.get(key).and_then(Value::as_str).ok_or_else(|| fail(format!("{key} must be a string")))
        };
        let path = field("path")?;
        let answer = match op {
            "read" => self.read(worktree, path),
            "write" => {
                worktree.write(path, field("content")?.as_bytes(), self.policy.max_write_bytes).map(|()| json!({}))
            }
            _ => self.edit(worktree, path, field("old_text")?, field("new_text")?),
        };
        let mut output = match answer {
            Ok(Value::Object(fields)) => fields,
            Ok(_) => Map::new(),
            Err(Refused(why)) => Map::from_iter([("ok".to_owned(), json!(false)), ("refused".to_owned(), json!(why))]),
        };
        output.entry("ok").or_insert(json!(true));
        output.insert("tool".into(), json!(self.tool.to_string()));
        output.insert("policy_digest".into(), json!(self.policy.digest(worktree).to_string()));
        Ok(canonical_value(&Value::Object(output)))
    }

    fn read(&self, worktree: &Worktree, path: &str) -> Result<Value, Refused> {
        let bytes = worktree.read(path, self.policy.max_read_bytes)?;
        let content =
            String::from_utf8(bytes).map_err(|_| Refused(format!("path {path:?} refused: it is not UTF-8 text")))?;
        Ok(json!({ "content": content }))
    }

    fn edit(&self, worktree: &Worktree, path: &str, old: &str, new: &str) -> Result<Value, Refused> {
        let current = self.read(worktree, path)?;
        let text = current["content"].as_str().unwrap_or_default();
        let found = if old.is_empty() { 0 } else { text.matches(old).count() };
        if found != 1 {
            return Err(Refused(format!(
                "path {path:?} refused: old_text must occur exactly once; it occurs {found} times"
            )));
        }
        let edited = text.replacen(old, new, 1);
        worktree.write(path, edited.as_bytes(), self.policy.max_write_bytes)?;
        Ok(json!({}))
    }
}
