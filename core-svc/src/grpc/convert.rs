//! Translations between store records, domain failures and world.v1 messages.

use world_model::{AccessTriple, Descriptor, Failure, FailureCode, HashRef, HashRefError};
use world_proto::v1 as pb;

use crate::store::{LogEntry, StoredObject, WorldRow};

pub fn failure(failure: Failure) -> pb::Failure {
    pb::Failure {
        code: failure.code.as_str().to_owned(),
        message: failure.message,
        effect_records: failure.effect_records.iter().map(|r| r.to_string()).collect(),
        observed_head: HashRef::optional_text(failure.observed_head.as_ref()),
        selected_head: HashRef::optional_text(failure.selected_head.as_ref()),
    }
}

pub fn bad_ref(field: &str, error: HashRefError) -> Failure {
    Failure::new(FailureCode::BadRequest, format!("{field}: {error}"))
}

pub fn parse_ref(field: &str, text: &str) -> Result<HashRef, Failure> {
    HashRef::parse(text).map_err(|e| bad_ref(field, e))
}

pub fn parse_optional_ref(field: &str, text: &str) -> Result<Option<HashRef>, Failure> {
    HashRef::parse_optional(text).map_err(|e| bad_ref(field, e))
}

pub fn object(object: StoredObject) -> pb::StoredObject {
    pb::StoredObject {
        hash: object.hash.to_string(),
        interface_hash: object.interface_hash.to_string(),
        semantic_id: object.semantic_id,
        provenance: object.provenance,
        payload: object.payload,
    }
}

pub fn world(world: WorldRow) -> pb::World {
    pb::World {
        r#ref: world.reference.to_string(),
        revision: world.revision,
        state_root: world.state_root.to_string(),
        log_head: world.log_head.to_string(),
    }
}

pub fn entry(entry: LogEntry) -> pb::LogEntry {
    pb::LogEntry {
        entry_index: entry.entry_index,
        semantics_epoch: entry.semantics_epoch,
        transition_fn: entry.transition_fn.to_string(),
        interpreter: entry.interpreter.to_string(),
        prev_entry_hash: entry.prev_entry_hash.to_string(),
        written_by: entry.written_by,
        entry_hash: entry.entry_hash.to_string(),
        transition_ref: entry.transition_ref.to_string(),
    }
}

/// A commit request's parts, parsed field by field in the reference's order
/// so the first bad field is the one named.
pub fn commit_parts(
    request: &pb::CommitRequest,
) -> Result<(Option<HashRef>, WorldRow, LogEntry, Vec<StoredObject>), Failure> {
    let observed = parse_optional_ref("observedHead", &request.observed_head)?;
    let missing = |field: &str| Failure::new(FailureCode::BadRequest, format!("{field}: missing"));
    let world = request.next_world.as_ref().ok_or_else(|| missing("nextWorld"))?;
    let entry = request.entry.as_ref().ok_or_else(|| missing("entry"))?;
    let next_world = WorldRow {
        reference: parse_ref("nextWorld.ref", &world.r#ref)?,
        revision: world.revision,
        state_root: parse_ref("nextWorld.stateRoot", &world.state_root)?,
        log_head: parse_ref("nextWorld.logHead", &world.log_head)?,
    };
    let entry_hash = parse_ref("entry.entryHash", &entry.entry_hash)?;
    let transition_ref = parse_ref("entry.transitionRef", &entry.transition_ref)?;
    let transition_fn = parse_ref("entry.header.transitionFn", &entry.transition_fn)?;
    let interpreter = parse_ref("entry.header.interpreter", &entry.interpreter)?;
    let prev_entry_hash = parse_ref("entry.header.prevEntryHash", &entry.prev_entry_hash)?;
    let log_entry = LogEntry {
        entry_index: entry.entry_index,
        semantics_epoch: entry.semantics_epoch,
        transition_fn,
        interpreter,
        prev_entry_hash,
        written_by: entry.written_by.clone(),
        entry_hash,
        transition_ref,
    };
    let mut objects = Vec::with_capacity(request.objects.len());
    for (i, object) in request.objects.iter().enumerate() {
        objects.push(StoredObject {
            hash: parse_ref(&format!("objects[{i}].hash"), &object.hash)?,
            interface_hash: parse_ref(&format!("objects[{i}].interfaceHash"), &object.interface_hash)?,
            semantic_id: object.semantic_id.clone(),
            provenance: object.provenance.clone(),
            payload: Some(object.payload.clone().unwrap_or_default()),
        });
    }
    Ok((observed, next_world, log_entry, objects))
}

fn triple(triple: &AccessTriple) -> pb::AccessTriple {
    pb::AccessTriple { effect: triple.effect.clone(), scope: triple.scope.clone(), cost: triple.cost }
}

pub fn descriptor(descriptor: &Descriptor) -> pb::Descriptor {
    pb::Descriptor {
        id: descriptor.id.as_str().to_owned(),
        title: descriptor.title.clone(),
        description: descriptor.description.clone(),
        input_schema: descriptor.input_schema.as_str().as_bytes().to_vec(),
        output_schema: descriptor.output_schema.as_str().as_bytes().to_vec(),
        transition_fn: descriptor.transition_fn.to_string(),
        interpreter: descriptor.interpreter.to_string(),
        semantics_epoch: descriptor.semantics_epoch,
        access: Some(triple(&descriptor.access)),
        declared_effects: descriptor.declared_effects.iter().map(triple).collect(),
    }
}
