//! R1–R5: a call's shape, its binding to a descriptor the session may see, the pin, and the
//! arguments against the descriptor's input schema — all before anything runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use world_model::{Descriptor, Failure, FailureCode, HashRef, TaskId, canonical_value, invocation_id};

use super::Call;
use super::refusal::Refusal;
use crate::registry::Current;
use crate::session::random_bytes;

/// A call that passed validation.
pub struct Validated {
    pub task: TaskId,
    /// Canonical JSON of the arguments.
    pub input: Vec<u8>,
    pub pin: Option<HashRef>,
    pub id: String,
    pub descriptor: Descriptor,
}

/// R1: the task id, the arguments (a JSON object within the input cap) and the pin's syntax.
pub fn shape(call: &Call, max_input: usize) -> Result<(TaskId, serde_json::Value, Vec<u8>, Option<HashRef>), Refusal> {
    let task = match &call.task_id {
        Some(text) => TaskId::parse(text).map_err(|e| Refusal::because(FailureCode::InvalidParams, e))?,
        None => TaskId::mint(random_bytes()),
    };
    let arguments: serde_json::Value =
        serde_json::from_slice(&call.arguments).map_err(|e| Refusal::because(FailureCode::InvalidParams, e))?;
    if !arguments.is_object() {
        return Err(Refusal::because(FailureCode::InvalidParams, "arguments are not a JSON object"));
    }
    let input = canonical_value(&arguments);
    if input.len() > max_input {
        return Err(Refusal::because(FailureCode::InvalidParams, "canonical input exceeds the input cap"));
    }
    let pin = match call.pin.as_deref() {
        None | Some("") => None,
        Some(text) => Some(HashRef::parse(text).map_err(|e| Refusal::because(FailureCode::InvalidParams, e))?),
    };
    Ok((task, arguments, input, pin))
}

/// R2–R5: the transition must be in the registry, visible to the session's live grants, and
/// match the pin when one is given.
pub fn bind(current: &Current, call: &Call, pin: Option<&HashRef>, now: i64) -> Result<Descriptor, Refusal> {
    let Some((_, revision)) = current else { return Err(Refusal::of(FailureCode::NotAuthorized)) };
    let descriptor = revision
        .entry(&call.transition_id)
        .filter(|d| d.visible_to(&call.session.grants, now))
        .cloned()
        .ok_or_else(|| Refusal::of(FailureCode::NotAuthorized))?;
    if pin.is_some_and(|pin| *pin != descriptor.transition_fn) {
        return Err(Refusal::of(FailureCode::ProposalMismatch));
    }
    Ok(descriptor)
}

/// Validates a whole call against the registry revision `current`.
pub fn call(
    call: &Call,
    current: &Current,
    schemas: &Schemas,
    max_input: usize,
    now: i64,
) -> Result<Validated, Refusal> {
    let (task, arguments, input, pin) = shape(call, max_input)?;
    let id = invocation_id(call.surface, &call.session.episode, &task);
    let descriptor = bind(current, call, pin.as_ref(), now)?;
    schemas.check(&descriptor, &arguments)?;
    Ok(Validated { task, input, pin, id, descriptor })
}

/// Bound on the compiled-schema cache; past it the cache starts over.
const VALIDATOR_CACHE: usize = 4096;

/// Compiled input schemas by the hash of their canonical text: a schema compiles once, not
/// per call.
#[derive(Default)]
pub struct Schemas {
    validators: Mutex<HashMap<HashRef, Arc<jsonschema::Validator>>>,
}

impl Schemas {
    pub fn check(&self, descriptor: &Descriptor, arguments: &serde_json::Value) -> Result<(), Refusal> {
        let key = HashRef::of(descriptor.input_schema.as_str().as_bytes());
        let cached = self.lock().get(&key).cloned();
        let validator = match cached {
            Some(validator) => validator,
            None => {
                let schema: serde_json::Value = serde_json::from_str(descriptor.input_schema.as_str())
                    .map_err(|e| Refusal::because(FailureCode::Unavailable, e))?;
                let validator = Arc::new(
                    jsonschema::validator_for(&schema).map_err(|e| Refusal::because(FailureCode::Unavailable, e))?,
                );
                let mut cache = self.lock();
                if cache.len() >= VALIDATOR_CACHE {
                    cache.clear();
                }
                cache.insert(key, Arc::clone(&validator));
                validator
            }
        };
        match validator.iter_errors(arguments).next() {
            None => Ok(()),
            Some(error) => Err(Refusal {
                failure: Failure::new(
                    FailureCode::InvalidParams,
                    format!("arguments do not match the input schema: {error}"),
                ),
                cause: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<HashRef, Arc<jsonschema::Validator>>> {
        self.validators.lock().unwrap_or_else(|p| p.into_inner())
    }
}
