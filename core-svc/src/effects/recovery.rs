//! Recovery at start: report every intent the journal holds without an outcome that a dead
//! core left. Nothing is re-run, resolved or retried — an effect intent without an outcome
//! may or may not have changed its worktree, and only a person looking at it can tell. An
//! intent a live core is writing the outcome of is no one's concern but that core's.

use std::collections::HashMap;

use crate::metrics::Metrics;
use crate::store::{EFFECT_NAMESPACE, Store, StoreError};

/// Journal rows read per page.
const PAGE: i64 = 1000;
/// Each pending intent is logged, up to this many; the counts cover all.
const LOGGED: usize = 100;

/// Scans the journal and reports the pending commit and effect intents of dead cores (log
/// lines and a metric).
pub async fn report_pending(store: &Store, metrics: &Metrics) -> Result<(u64, u64), StoreError> {
    let (mut commits, mut effects, mut after, mut logged) = (0u64, 0u64, 0i64, 0usize);
    let mut alive: HashMap<String, bool> = HashMap::new();
    loop {
        let page = store.pending_intents(after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for pending in &page {
            let effect = pending.invocation_id.starts_with(EFFECT_NAMESPACE);
            // Commit intents are written with their outcomes; only older builds left one alone.
            if effect && let Some(writer) = store.effect_intent_writer(&pending.invocation_id).await? {
                let live = match alive.get(&writer) {
                    Some(live) => *live,
                    None => {
                        let live = store.owner_alive(&writer).await?;
                        alive.insert(writer, live);
                        live
                    }
                };
                if live {
                    continue;
                }
            }
            if effect {
                effects += 1;
            } else {
                commits += 1;
            }
            if logged < LOGGED {
                logged += 1;
                if effect {
                    tracing::warn!(
                        effect = %pending.invocation_id,
                        "recovery: effect intent without an outcome (indeterminate); its handler is not run again, \
                         inspect the episode's worktree"
                    );
                } else {
                    tracing::warn!(
                        invocation = %pending.invocation_id,
                        "recovery: commit intent without an outcome; the invocation was not committed"
                    );
                }
            }
        }
    }
    metrics.pending_at_start("commit", commits);
    metrics.pending_at_start("effect", effects);
    if commits + effects > 0 {
        tracing::warn!(commits, effects, "recovery: pending intents found at start");
    }
    Ok((commits, effects))
}
