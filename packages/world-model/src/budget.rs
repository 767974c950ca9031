//! Budgets (reference-core §2.5): a session's grants seeded from its episode's durable spend,
//! and the in-memory ledger the broker decides over and debits.
//!
//! Budgets belong to the episode, not the session: the durable record of spend is the effect
//! intents, so a new session or a restarted core sees the same remaining budget.

use thiserror::Error;

use crate::grant::{AccessTriple, Decision, Grant, Selection, select_grant};

/// The grants as the broker sees them: every grant of an `(effect, scope)` reduced by the
/// episode's whole spend on that pair, never below zero. Each grant with the key is reduced
/// by the full spend (the reference's rule), so duplicate grants do not multiply a budget.
/// `spend` lists `(effect, scope, spent)`; a pair listed twice counts twice, and a negative
/// entry (which the store never produces) gives nothing back.
pub fn seed_grants(grants: &[Grant], spend: &[(String, String, i64)]) -> Vec<Grant> {
    grants
        .iter()
        .map(|grant| {
            let spent = spend
                .iter()
                .filter(|(effect, scope, _)| *effect == grant.effect && *scope == grant.scope)
                .fold(0i64, |sum, (_, _, n)| sum.saturating_add((*n).max(0)));
            Grant { budget: grant.budget.saturating_sub(spent).max(0), ..grant.clone() }
        })
        .collect()
}

/// A debit the ledger refused: it would not be the debit of an allowed decision.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DebitError {
    #[error("budget ledger: no grant {index}; the ledger has {len}")]
    NoGrant { index: usize, len: usize },
    #[error("budget ledger: grant {index} has budget {budget}; a debit to {remaining} is not within 0..={budget}")]
    OutOfRange { index: usize, budget: i64, remaining: i64 },
}

/// The seeded grants of one effectful call. The broker decides over it, writes the durable
/// intent, then debits the chosen grant, so a later effect of the same call sees the spend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetLedger {
    grants: Vec<Grant>,
}

impl BudgetLedger {
    /// The session's grants seeded from the episode's spend ([`seed_grants`]).
    pub fn seeded(grants: &[Grant], spend: &[(String, String, i64)]) -> Self {
        BudgetLedger { grants: seed_grants(grants, spend) }
    }

    pub fn grants(&self) -> &[Grant] {
        &self.grants
    }

    /// The grant law over the ledger (§2.3): which grant answers and how.
    pub fn decide(&self, requirement: &AccessTriple, now: i64) -> Selection {
        select_grant(&self.grants, requirement, now)
    }

    /// The `budgetBefore` of a record: the chosen grant's budget, 0 when none was chosen.
    pub fn budget_before(&self, selection: &Selection) -> i64 {
        selection.grant_index.and_then(|i| self.grants.get(i)).map_or(0, |grant| grant.budget)
    }

    /// Sets grant `index` to `remaining`, once its intent is durable. Only a debit is
    /// accepted (0 ≤ remaining ≤ budget): a ledger never gains budget.
    pub fn debit(&mut self, index: usize, remaining: i64) -> Result<(), DebitError> {
        let len = self.grants.len();
        let grant = self.grants.get_mut(index).ok_or(DebitError::NoGrant { index, len })?;
        if !(0..=grant.budget).contains(&remaining) {
            return Err(DebitError::OutOfRange { index, budget: grant.budget, remaining });
        }
        grant.budget = remaining;
        Ok(())
    }

    /// Debits the grant an allowed selection chose; `None` (and no change) for a denial.
    pub fn debit_selection(&mut self, selection: &Selection) -> Option<Result<(), DebitError>> {
        match (selection.decision, selection.grant_index) {
            (Decision::Allowed { remaining }, Some(index)) => Some(self.debit(index, remaining)),
            _ => None,
        }
    }
}
