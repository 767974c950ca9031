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
        .map(|grant| Grant { budget: grant.budget.saturating_sub(spent_on(grant, spend)).max(0), ..grant.clone() })
        .collect()
}

/// What the episode has spent on `grant`'s (effect, scope) pair, as [`seed_grants`] counts it.
pub fn spent_on(grant: &Grant, spend: &[(String, String, i64)]) -> i64 {
    spend
        .iter()
        .filter(|(effect, scope, _)| *effect == grant.effect && *scope == grant.scope)
        .fold(0i64, |sum, (_, _, n)| sum.saturating_add((*n).max(0)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant::Denial;

    fn grant(effect: &str, scope: &str, budget: i64) -> Grant {
        Grant { effect: effect.into(), scope: scope.into(), budget, expires_at: 100 }
    }

    type Spend = Vec<(String, String, i64)>;

    fn spent(effect: &str, scope: &str, n: i64) -> (String, String, i64) {
        (effect.into(), scope.into(), n)
    }

    #[test]
    fn seeding_reduces_every_grant_of_a_pair_by_the_whole_spend_never_below_zero() {
        let grants = [
            grant("Workspace.Read", "worktree", 3),
            grant("Workspace.Read", "worktree", 5),
            grant("Workspace.Read", "other", 3),
            grant("Workspace.Write", "worktree", 1),
        ];
        let rows: Vec<(&str, Spend, [i64; 4])> = vec![
            ("nothing spent", vec![], [3, 5, 3, 1]),
            ("two reads: both read grants lose 2", vec![spent("Workspace.Read", "worktree", 2)], [1, 3, 3, 1]),
            (
                "overspent: floored at zero",
                vec![spent("Workspace.Read", "worktree", 4), spent("Workspace.Write", "worktree", 9)],
                [0, 1, 3, 0],
            ),
            (
                "a pair listed twice counts twice",
                vec![spent("Workspace.Read", "other", 1), spent("Workspace.Read", "other", 1)],
                [3, 5, 1, 1],
            ),
            (
                "spend on a pair with no grant changes nothing",
                vec![spent("Workspace.Exec", "worktree", 7)],
                [3, 5, 3, 1],
            ),
            ("a negative spend gives nothing back", vec![spent("Workspace.Read", "worktree", -4)], [3, 5, 3, 1]),
            (
                "a saturating spend floors at zero",
                vec![spent("Workspace.Read", "worktree", i64::MAX), spent("Workspace.Read", "worktree", i64::MAX)],
                [0, 0, 3, 1],
            ),
        ];
        for (name, spend, budgets) in rows {
            let seeded = seed_grants(&grants, &spend);
            assert_eq!(seeded.iter().map(|g| g.budget).collect::<Vec<_>>(), budgets, "{name}");
            // Only budgets change: the grant order decides which grant is debited.
            for (before, after) in grants.iter().zip(&seeded) {
                assert_eq!(Grant { budget: before.budget, ..after.clone() }, *before, "{name}");
            }
        }
    }

    #[test]
    fn a_grant_of_three_allows_three_effects_and_denies_the_fourth_without_a_debit() {
        let read = AccessTriple { effect: "Workspace.Read".into(), scope: "worktree".into(), cost: 1 };
        let mut ledger = BudgetLedger::seeded(&[grant("Workspace.Read", "worktree", 3)], &[]);
        for remaining in [2, 1, 0] {
            let selection = ledger.decide(&read, 10);
            assert_eq!(selection.decision, Decision::Allowed { remaining });
            assert_eq!(ledger.budget_before(&selection), remaining + 1);
            assert_eq!(ledger.debit_selection(&selection), Some(Ok(())));
        }
        let selection = ledger.decide(&read, 10);
        assert_eq!(selection.decision, Decision::Denied(Denial::Budget));
        assert_eq!(ledger.budget_before(&selection), 0);
        assert_eq!(ledger.debit_selection(&selection), None);
        assert_eq!(ledger.grants()[0].budget, 0);

        // A new call of the same episode sees the durable spend.
        let reseeded =
            BudgetLedger::seeded(&[grant("Workspace.Read", "worktree", 3)], &[spent("Workspace.Read", "worktree", 3)]);
        assert_eq!(reseeded, ledger);
    }

    #[test]
    fn a_denial_without_any_grant_has_no_budget_before() {
        let ledger = BudgetLedger::seeded(&[], &[]);
        let read = AccessTriple { effect: "Workspace.Read".into(), scope: "worktree".into(), cost: 1 };
        let selection = ledger.decide(&read, 10);
        assert_eq!((selection.grant_index, selection.decision), (None, Decision::Denied(Denial::EffectName)));
        assert_eq!(ledger.budget_before(&selection), 0);
    }

    #[test]
    fn only_a_debit_of_an_existing_grant_is_accepted() {
        let mut ledger = BudgetLedger::seeded(&[grant("Workspace.Read", "worktree", 3)], &[]);
        assert_eq!(ledger.debit(1, 0), Err(DebitError::NoGrant { index: 1, len: 1 }));
        assert_eq!(ledger.debit(0, 4), Err(DebitError::OutOfRange { index: 0, budget: 3, remaining: 4 }));
        assert_eq!(ledger.debit(0, -1), Err(DebitError::OutOfRange { index: 0, budget: 3, remaining: -1 }));
        assert_eq!(
            ledger.debit(0, 4).unwrap_err().to_string(),
            "budget ledger: grant 0 has budget 3; a debit to 4 is not within 0..=3"
        );
        assert_eq!(ledger.grants()[0].budget, 3);
        assert_eq!(ledger.debit(0, 3), Ok(()));
        assert_eq!(ledger.debit(0, 0), Ok(()));
        assert_eq!(ledger.grants()[0].budget, 0);
    }
}
