//! The log read as calls, for the explorer: what each entry's invocation record says (its
//! invocation id, episode, transition and effects), with the commit time from the journal and
//! each effect's status from its record; paged newest first and filtered, or the one call an
//! entry index, invocation id, task id or ref names.

use serde_json::Value;
use world_model::HashRef;
use world_model::effect::EffectRecord;

use crate::store::{LogEntry, Reads, Receipt, StoreError};

/// Entries read per store query while paging.
const BATCH: u32 = 200;
/// A filtered page reads at most this many entries, so a filter that matches nothing near the
/// head answers quickly with a cursor to go on from instead of scanning the whole log.
pub const SCAN_LIMIT: usize = 2_000;
/// Page size when the caller asks for none; also the most a page holds.
pub const DEFAULT_LIMIT: u32 = 25;
pub const MAX_LIMIT: u32 = 100;

pub struct CallEffect {
    pub effect: String,
    pub scope: String,
    /// `ok`, `failed` or `denied`; `unreadable` when the record cannot be read.
    pub status: &'static str,
    pub record: HashRef,
}

pub struct Call {
    pub entry: LogEntry,
    /// Empty for entries that are not calls (genesis, publication, REST commits).
    pub invocation_id: String,
    pub episode: String,
    pub transition: String,
    /// Unix seconds of the commit; 0 when the journal does not say.
    pub time: i64,
    /// See [`outcome`]; empty for entries that are not calls.
    pub outcome: &'static str,
    pub effects: Vec<CallEffect>,
}

/// Which calls a page shows; an empty field matches everything.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub episode: String,
    pub transition: String,
}

/// What an invocation record says, before its effect records and time are read.
#[derive(Debug, Default, PartialEq)]
struct Recorded {
    invocation_id: String,
    episode: String,
    transition: String,
    /// `None` for a pure call (record v1) or an entry that is no call.
    effects: Option<Vec<HashRef>>,
}

impl Recorded {
    /// Reads a record's payload; anything that is not an invocation record reads as empty.
    fn read(payload: Option<&[u8]>) -> Recorded {
        let Some(record) = payload.and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok()) else {
            return Recorded::default();
        };
        let text = |key: &str| record.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        let effects = record
            .get("effects")
            .and_then(Value::as_array)
            .map(|refs| refs.iter().filter_map(|r| r.as_str().and_then(|r| HashRef::parse(r).ok())).collect());
        Recorded {
            invocation_id: text("invocationId"),
            episode: text("episodeId"),
            transition: text("skillId"),
            effects,
        }
    }
}

impl Filter {
    fn admits(&self, recorded: &Recorded) -> bool {
        (self.episode.is_empty() || self.episode == recorded.episode)
            && (self.transition.is_empty() || self.transition == recorded.transition)
    }
}

/// `refused` for a plan of no effects, else the first status that is not `ok`, else `ok`.
fn outcome(effects: Option<&[CallEffect]>) -> &'static str {
    match effects {
        None => "ok",
        Some([]) => "refused",
        Some(effects) => effects.iter().map(|e| e.status).find(|s| *s != "ok").unwrap_or("ok"),
    }
}

fn effect_of(record: HashRef, payload: Option<&Vec<u8>>) -> CallEffect {
    match payload.map(|bytes| EffectRecord::decode(bytes)) {
        Some(Ok(decoded)) => {
            CallEffect { status: decoded.status().as_str(), effect: decoded.effect, scope: decoded.scope, record }
        }
        _ => CallEffect { effect: String::new(), scope: String::new(), status: "unreadable", record },
    }
}

/// Up to `limit` calls below `before` that the reader reads and `filter` admits, newest first,
/// and the `before` of the next (older) page when more may remain.
pub async fn page(
    reads: &Reads<'_>,
    before: Option<i64>,
    limit: u32,
    filter: &Filter,
) -> Result<(Vec<Call>, Option<i64>), StoreError> {
    let limit = match limit {
        0 => DEFAULT_LIMIT,
        n => n.min(MAX_LIMIT),
    } as usize;
    let mut matched = Vec::new();
    let mut cursor = before;
    let mut scanned = 0;
    'scan: while matched.len() < limit && scanned < SCAN_LIMIT {
        let entries = reads.log_page_newest_first(cursor, BATCH).await?;
        let last_batch = entries.len() < BATCH as usize;
        let refs: Vec<HashRef> = entries.iter().map(|e| e.transition_ref).collect();
        let records = reads.payloads(&refs).await?;
        for entry in entries {
            cursor = Some(entry.entry_index);
            scanned += 1;
            let recorded = Recorded::read(records.get(&entry.transition_ref).map(Vec::as_slice));
            if filter.admits(&recorded) {
                matched.push((entry, recorded));
            }
            if matched.len() == limit || scanned == SCAN_LIMIT {
                break 'scan;
            }
        }
        if last_batch {
            break;
        }
    }
    // The log is gapless from 0, so entries remain below any cursor above 0.
    let next = cursor.filter(|index| *index > 0);
    Ok((complete(reads, matched).await?, next))
}

/// Reads the effect records and commit times of the matched entries.
async fn complete(reads: &Reads<'_>, matched: Vec<(LogEntry, Recorded)>) -> Result<Vec<Call>, StoreError> {
    let effect_refs: Vec<HashRef> = matched.iter().flat_map(|(_, r)| r.effects.iter().flatten().copied()).collect();
    let effect_payloads = reads.payloads(&effect_refs).await?;
    let ids: Vec<&str> = matched.iter().map(|(_, r)| r.invocation_id.as_str()).filter(|id| !id.is_empty()).collect();
    let times = reads.store().commit_times(&ids).await?;
    let calls = matched
        .into_iter()
        .map(|(entry, recorded)| {
            let effects = recorded
                .effects
                .map(|refs| refs.into_iter().map(|r| effect_of(r, effect_payloads.get(&r))).collect::<Vec<_>>());
            Call {
                time: times.get(&recorded.invocation_id).copied().unwrap_or(0),
                outcome: if recorded.invocation_id.is_empty() { "" } else { outcome(effects.as_deref()) },
                effects: effects.unwrap_or_default(),
                entry,
                invocation_id: recorded.invocation_id,
                episode: recorded.episode,
                transition: recorded.transition,
            }
        })
        .collect();
    Ok(calls)
}

/// The call `text` names: an entry index, an object or world ref, an invocation id
/// (`a2a:…`, `mcp:…`, `rest:…`) or a task id of the caller's `episode`, when the reader reads it.
pub async fn find(reads: &Reads<'_>, episode: &str, text: &str) -> Result<Option<Call>, StoreError> {
    let text = text.trim();
    let Some(index) = entry_index_of(reads, episode, text).await? else {
        return Ok(None);
    };
    let (mut calls, _) = page(reads, index.checked_add(1), 1, &Filter::default()).await?;
    Ok(calls.pop().filter(|call| call.entry.entry_index == index))
}

async fn entry_index_of(reads: &Reads<'_>, episode: &str, text: &str) -> Result<Option<i64>, StoreError> {
    let store = reads.store();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(text.parse().ok());
    }
    if let Ok(reference) = HashRef::parse(text) {
        if let Some(entry) = reads.entry_of_object(&reference).await? {
            return Ok(Some(entry.entry_index));
        }
        return Ok(store.world(&reference).await?.map(|world| world.revision));
    }
    let ids = if ["a2a:", "mcp:", "rest:"].iter().any(|prefix| text.starts_with(prefix)) {
        vec![text.to_owned()]
    } else {
        vec![format!("a2a:{episode}:{text}"), format!("mcp:{episode}:{text}")]
    };
    for id in ids {
        if let Receipt::Resolved { result_ref } = store.receipt(&id).await? {
            return Ok(store.world(&result_ref).await?.map(|world| world.revision));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effect(status: &'static str) -> CallEffect {
        CallEffect { effect: "Workspace.Read".into(), scope: "worktree".into(), status, record: HashRef::of(b"r") }
    }

    #[test]
    fn outcomes() {
        assert_eq!(outcome(None), "ok");
        assert_eq!(outcome(Some(&[])), "refused");
        assert_eq!(outcome(Some(&[effect("ok"), effect("ok")])), "ok");
        assert_eq!(outcome(Some(&[effect("ok"), effect("denied"), effect("failed")])), "denied");
    }

    #[test]
    fn records_read_tolerantly() {
        let reference = HashRef::of(b"e");
        let v2 = format!(
            r#"{{"invocationId":"mcp:ep:1","episodeId":"ep","skillId":"fx.read","effects":["{reference}","junk"]}}"#
        );
        let read = Recorded::read(Some(v2.as_bytes()));
        assert_eq!(read.invocation_id, "mcp:ep:1");
        assert_eq!((read.episode.as_str(), read.transition.as_str()), ("ep", "fx.read"));
        assert_eq!(read.effects, Some(vec![reference]));
        let v1 = Recorded::read(Some(br#"{"invocationId":"a2a:ep:t","episodeId":"ep","skillId":"echo"}"#));
        assert_eq!(v1.effects, None);
        assert_eq!(Recorded::read(Some(b"not json")), Recorded::default());
        assert_eq!(Recorded::read(None), Recorded::default());
    }

    #[test]
    fn filters_match_episode_and_transition() {
        let recorded = Recorded { episode: "ep".into(), transition: "echo".into(), ..Recorded::default() };
        let filter =
            |episode: &str, transition: &str| Filter { episode: episode.into(), transition: transition.into() };
        assert!(filter("", "").admits(&recorded));
        assert!(filter("ep", "").admits(&recorded));
        assert!(filter("ep", "echo").admits(&recorded));
        assert!(!filter("other", "").admits(&recorded));
        assert!(!filter("", "other").admits(&recorded));
    }
}
