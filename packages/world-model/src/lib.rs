//! World's domain model: the types and rules every World process agrees on — content
//! addresses, the one canonical JSON encoding, grants and the grant law, budgets, the effect
//! plan law and output composition, the broker's objects and the effect journal, identifier
//! grammars, MCP tool-name escaping, session credentials and the failure table.
//!
//! Everything here is pure: no I/O, no clock, no randomness. Callers pass in the time and the
//! random bytes, so each rule is a plain function pinned by table tests.

pub mod quote;

pub mod budget;
pub mod canonical;
mod canonical_parts;
pub mod credential;
pub mod effect;
pub mod effect_plan;
pub mod failure;
#[cfg(test)]
mod fuzzing;
pub mod grant;
pub mod hashref;
pub mod ids;
pub mod ledger;
pub mod limits;
pub mod mcp_name;
pub mod oauth;
pub mod registry;

pub use budget::{BudgetLedger, DebitError, seed_grants};
pub use canonical::{
    CanonicalError, SourceCanonError, canonical_json, canonical_source, canonical_value, canonicalize,
};
pub use credential::{Credential, SessionDenial, mint_token_hex, parse_authorization, resolve_expiry};
pub use effect::{
    EffectIntent, EffectJournalError, EffectOutcome, EffectOutcomeStatus, EffectRecord, RecordLawError,
    invocation_id as effect_invocation_id, parse_invocation_id as parse_effect_invocation_id, request_payload,
};
pub use effect_plan::{
    AdmittedPlan, ComposeError, DenialDetail, EFFECT_PLAN, EffectResult, EffectStatus, Law, PlanLawError,
    PlannedEffect, admit_finish, admit_plan, compose_output, finish_input, plan_input, world_block,
};
pub use failure::{Concern, Failure, FailureCode};
pub use grant::{
    AccessTriple, Decision, Denial, Grant, GrantParseError, LOG_READ, PRESET_BUDGET, SE_TOOLS_EFFECTS, Selection,
    decide, grants_allow, preset_grants, reads_every_episode, select_grant,
};
pub use hashref::{HashRef, HashRefError, semantic_interface_hash};
pub use ids::{Episode, IdError, Surface, TaskId, TransitionId, invocation_id};
pub use ledger::{EntryHeader, entry_hash, world_ref};
pub use mcp_name::{McpNameError, escape, escape_surface, unescape};
pub use quote::{LOG_TEXT_CHARS, escape_chars, go_quote, quote_for_log};
pub use registry::{Descriptor, EpochRegistry, RegistryError, Revision, Schema, release_of};
