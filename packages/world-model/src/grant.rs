//! Grants and the grant law (reference-core §2.3): which grant, if any, allows an access.

use std::fmt;

use crate::quote::go_quote;

/// One budgeted capability held by a session: `effect` at `scope`, spendable `budget` times
/// (in cost units) until `expires_at` (Unix seconds, exclusive).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Grant {
    pub effect: String,
    pub scope: String,
    pub budget: i64,
    #[serde(rename = "expiresAt")]
    pub expires_at: i64,
}

/// The effects the coding tools (the se-tools package) plan, all at scope `worktree`.
pub const SE_TOOLS_EFFECTS: [&str; 6] =
    ["Workspace.Read", "Workspace.Write", "Ailang.Check", "Ailang.Run", "Ailang.Discover", "Ailang.CLI"];
/// The budget a preset grants each effect when none is given.
pub const PRESET_BUDGET: i64 = 50;

/// What reading other episodes' calls takes: `Log.Read` at scope `world`. A read costs nothing,
/// so the grant's budget is never debited; it only has to be live.
pub const LOG_READ: (&str, &str) = ("Log.Read", "world");

/// The grants a named session preset stands for: `se-tools` is one grant per coding-tool
/// effect at scope `worktree`, each with `budget` calls; `operator` is `Log.Read` at `world`.
pub fn preset_grants(name: &str, budget: i64, expires_at: i64) -> Option<Vec<Grant>> {
    let grant =
        |effect: &str, scope: &str| Grant { effect: effect.to_owned(), scope: scope.to_owned(), budget, expires_at };
    match name {
        "se-tools" => Some(SE_TOOLS_EFFECTS.iter().map(|effect| grant(effect, "worktree")).collect()),
        "operator" => Some(vec![grant(LOG_READ.0, LOG_READ.1)]),
        _ => None,
    }
}

/// Whether `grants` let a session read every episode's calls, not only its own: the grant law
/// allows `Log.Read` at `world` at cost 0, so any live grant of it does, whatever its budget.
pub fn reads_every_episode(grants: &[Grant], now: i64) -> bool {
    let (effect, scope) = LOG_READ;
    grants_allow(grants, &AccessTriple { effect: effect.to_owned(), scope: scope.to_owned(), cost: 0 }, now)
}

/// Why `--grant EFFECT=SCOPE:BUDGET` text was refused; texts match the reference CLI.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GrantParseError {
    #[error("invalid --grant {}: want EFFECT=SCOPE:BUDGET", go_quote(.grant))]
    Shape { grant: String },
    #[error("invalid --grant {}: EFFECT and SCOPE must be non-empty", go_quote(.grant))]
    EmptyPart { grant: String },
    #[error("invalid --grant {}: budget {} is not an integer", go_quote(.grant), go_quote(.budget))]
    BudgetNotInteger { grant: String, budget: String },
    #[error("invalid --grant {}: budget must be non-negative", go_quote(.grant))]
    NegativeBudget { grant: String },
}

impl Grant {
    /// Parses the CLI form `EFFECT=SCOPE:BUDGET`. The first `=` ends the effect and the last
    /// `:` starts the budget, so a scope may itself contain `=` and `:`.
    pub fn parse_cli(text: &str, expires_at: i64) -> Result<Grant, GrantParseError> {
        let shape = || GrantParseError::Shape { grant: text.to_owned() };
        let (effect, rest) = text.split_once('=').ok_or_else(shape)?;
        let (scope, budget_text) = rest.rsplit_once(':').ok_or_else(shape)?;
        if effect.is_empty() || scope.is_empty() {
            return Err(GrantParseError::EmptyPart { grant: text.to_owned() });
        }
        let budget = parse_go_int(budget_text).ok_or_else(|| GrantParseError::BudgetNotInteger {
            grant: text.to_owned(),
            budget: budget_text.to_owned(),
        })?;
        if budget < 0 {
            return Err(GrantParseError::NegativeBudget { grant: text.to_owned() });
        }
        Ok(Grant { effect: effect.to_owned(), scope: scope.to_owned(), budget, expires_at })
    }

    /// A grant is live while `0 <= now < expires_at` (step 3 of the law).
    pub fn is_live(&self, now: i64) -> bool {
        0 <= now && now < self.expires_at
    }
}

/// Base-10 i64 the way Go's `strconv.ParseInt(s, 10, 64)` reads it: optional sign, ASCII
/// digits only, overflow refused.
fn parse_go_int(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// What a call needs: `cost` units of `effect` at `scope`. A descriptor's `access` and each
/// declared effect have this shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct AccessTriple {
    pub effect: String,
    pub scope: String,
    pub cost: i64,
}

/// Why one grant does not allow a request, in the law's check order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Denial {
    EffectName,
    Scope,
    Expired,
    Budget,
}

impl Denial {
    pub fn label(&self) -> &'static str {
        match self {
            Denial::EffectName => "denied:effect-name",
            Denial::Scope => "denied:scope",
            Denial::Expired => "denied:expired",
            Denial::Budget => "denied:budget",
        }
    }

    /// How close the grant came to allowing: a denial that failed a later check ranks higher.
    /// Selection reports the highest-ranked denial.
    pub fn rank(&self) -> u8 {
        match self {
            Denial::EffectName => 0,
            Denial::Scope => 1,
            Denial::Expired => 2,
            Denial::Budget => 3,
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The outcome of the law for one grant or a ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decision {
    Allowed { remaining: i64 },
    Denied(Denial),
}

impl Decision {
    /// `allowed:<remaining>` or the denial's label, as recorded by the broker.
    pub fn label(&self) -> String {
        match self {
            Decision::Allowed { remaining } => format!("allowed:{remaining}"),
            Decision::Denied(denial) => denial.label().to_owned(),
        }
    }

    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allowed { .. })
    }

    /// Allowed outranks every denial.
    pub fn rank(&self) -> u8 {
        match self {
            Decision::Allowed { .. } => 4,
            Decision::Denied(denial) => denial.rank(),
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// The grant law for one grant, checks in the reference's fixed order; the first failing check
/// names the denial.
pub fn decide(grant: &Grant, request: &AccessTriple, now: i64) -> Decision {
    if grant.effect != request.effect {
        return Decision::Denied(Denial::EffectName);
    }
    if grant.scope != request.scope {
        return Decision::Denied(Denial::Scope);
    }
    if !grant.is_live(now) {
        return Decision::Denied(Denial::Expired);
    }
    if request.cost < 0 || grant.budget < 0 || request.cost > grant.budget {
        return Decision::Denied(Denial::Budget);
    }
    // Both are non-negative and cost <= budget, so this cannot overflow.
    Decision::Allowed { remaining: grant.budget - request.cost }
}

/// Which grant of a ledger answers a request, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selection {
    /// `None` only for an empty ledger.
    pub grant_index: Option<usize>,
    pub decision: Decision,
}

/// The reference's ledger selection: grant 0 is evaluated first, then the first allowing grant
/// among indices 1.. wins outright; when none allows, grant 0's decision stands unless a later
/// grant has a strictly higher-ranked denial (ties keep the earliest). With duplicate grants
/// this decides which one is debited, so the order is kept exactly.
pub fn select_grant(grants: &[Grant], request: &AccessTriple, now: i64) -> Selection {
    let Some((first, rest)) = grants.split_first() else {
        return Selection { grant_index: None, decision: Decision::Denied(Denial::EffectName) };
    };
    let mut best = Selection { grant_index: Some(0), decision: decide(first, request, now) };
    for (offset, grant) in rest.iter().enumerate() {
        let decision = decide(grant, request, now);
        let index = offset + 1;
        if decision.is_allowed() {
            return Selection { grant_index: Some(index), decision };
        }
        if decision.rank() > best.decision.rank() {
            best = Selection { grant_index: Some(index), decision };
        }
    }
    best
}

/// Visibility: a session sees (and may call) a transition exactly when its raw grants allow
/// the descriptor's access at request time.
pub fn grants_allow(grants: &[Grant], access: &AccessTriple, now: i64) -> bool {
    select_grant(grants, access, now).decision.is_allowed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(effect: &str, scope: &str, budget: i64, expires_at: i64) -> Grant {
        Grant { effect: effect.into(), scope: scope.into(), budget, expires_at }
    }

    fn access(effect: &str, scope: &str, cost: i64) -> AccessTriple {
        AccessTriple { effect: effect.into(), scope: scope.into(), cost }
    }

    #[test]
    fn parse_cli_accepts_and_refuses_like_the_reference() {
        type Parsed = (&'static str, &'static str, i64);
        let table: &[(&str, Result<Parsed, &str>)] = &[
            ("Workspace.Read=worktree:50", Ok(("Workspace.Read", "worktree", 50))),
            ("E=s:0", Ok(("E", "s", 0))),
            ("E=a:b:7", Ok(("E", "a:b", 7))),
            ("E=a=b:7", Ok(("E", "a=b", 7))),
            ("E=s:+5", Ok(("E", "s", 5))),
            ("E=s:-0", Ok(("E", "s", 0))),
            ("E=s:007", Ok(("E", "s", 7))),
            ("E=s:9223372036854775807", Ok(("E", "s", i64::MAX))),
            ("E", Err(r#"invalid --grant "E": want EFFECT=SCOPE:BUDGET"#)),
            ("E:1", Err(r#"invalid --grant "E:1": want EFFECT=SCOPE:BUDGET"#)),
            ("E=s", Err(r#"invalid --grant "E=s": want EFFECT=SCOPE:BUDGET"#)),
            ("=s:1", Err(r#"invalid --grant "=s:1": EFFECT and SCOPE must be non-empty"#)),
            ("E=:1", Err(r#"invalid --grant "E=:1": EFFECT and SCOPE must be non-empty"#)),
            ("E=s:", Err(r#"invalid --grant "E=s:": budget "" is not an integer"#)),
            ("E=s:x", Err(r#"invalid --grant "E=s:x": budget "x" is not an integer"#)),
            ("E=s:1.5", Err(r#"invalid --grant "E=s:1.5": budget "1.5" is not an integer"#)),
            ("E=s: 1", Err(r#"invalid --grant "E=s: 1": budget " 1" is not an integer"#)),
            ("E=s:1_0", Err(r#"invalid --grant "E=s:1_0": budget "1_0" is not an integer"#)),
            (
                "E=s:9223372036854775808",
                Err(r#"invalid --grant "E=s:9223372036854775808": budget "9223372036854775808" is not an integer"#),
            ),
            ("E=s:-1", Err(r#"invalid --grant "E=s:-1": budget must be non-negative"#)),
            ("E\"=s:-1", Err(r#"invalid --grant "E\"=s:-1": budget must be non-negative"#)),
        ];
        for (text, want) in table {
            let got = Grant::parse_cli(text, 1234);
            match want {
                Ok((effect, scope, budget)) => {
                    assert_eq!(got, Ok(grant(effect, scope, *budget, 1234)), "parsing {text:?}")
                }
                Err(message) => {
                    assert_eq!(got.unwrap_err().to_string(), *message, "parsing {text:?}")
                }
            }
        }
    }

    #[test]
    fn grant_serialises_with_wire_names() {
        let g = grant("E", "s", 3, 99);
        let json = serde_json::to_string(&g).unwrap();
        assert_eq!(json, r#"{"effect":"E","scope":"s","budget":3,"expiresAt":99}"#);
        assert_eq!(serde_json::from_str::<Grant>(&json).unwrap(), g);
        let a = access("E", "s", 1);
        assert_eq!(serde_json::to_string(&a).unwrap(), r#"{"effect":"E","scope":"s","cost":1}"#);
    }

    #[test]
    fn the_se_tools_preset_grants_every_coding_tool_effect_at_worktree() {
        let grants = preset_grants("se-tools", 7, 100).expect("a known preset");
        let effects: Vec<&str> = grants.iter().map(|g| g.effect.as_str()).collect();
        assert_eq!(effects, SE_TOOLS_EFFECTS);
        assert!(grants.iter().all(|g| g.scope == "worktree" && g.budget == 7 && g.expires_at == 100));
        assert_eq!(preset_grants("other", 1, 1), None);
    }

    #[test]
    fn the_operator_preset_reads_every_episode_and_nothing_else_does() {
        let operator = preset_grants("operator", 0, 100).expect("a known preset");
        assert_eq!(operator, vec![grant("Log.Read", "world", 0, 100)]);
        let table: &[(&[Grant], i64, bool)] = &[
            (&operator, 99, true),
            // Budget plays no part: a read costs nothing.
            (&[grant("Log.Read", "world", 5, 100)], 99, true),
            (&[grant("Workspace.Read", "worktree", 5, 100), grant("Log.Read", "world", 0, 100)], 99, true),
            // Expired at its expiry, like every grant.
            (&operator, 100, false),
            (&[grant("Log.Read", "worktree", 5, 100)], 99, false),
            (&[grant("log.read", "world", 5, 100)], 99, false),
            (&[grant("Log.Read", "world", -1, 100)], 99, false),
            (&preset_grants("se-tools", 50, 100).unwrap(), 99, false),
            (&[], 99, false),
        ];
        for (grants, now, reads) in table {
            assert_eq!(reads_every_episode(grants, *now), *reads, "{grants:?} at {now}");
        }
    }

    #[test]
    fn decide_checks_in_the_fixed_order() {
        let now = 100;
        let table: &[(Grant, AccessTriple, i64, &str)] = &[
            (grant("E", "s", 5, 200), access("E", "s", 1), now, "allowed:4"),
            (grant("E", "s", 5, 200), access("E", "s", 5), now, "allowed:0"),
            (grant("E", "s", 0, 200), access("E", "s", 0), now, "allowed:0"),
            (grant("E", "s", 5, 200), access("E", "s", 6), now, "denied:budget"),
            (grant("E", "s", 5, 200), access("E", "s", -1), now, "denied:budget"),
            (grant("E", "s", -1, 200), access("E", "s", -2), now, "denied:budget"),
            (grant("E", "s", 5, 100), access("E", "s", 1), now, "denied:expired"),
            (grant("E", "s", 5, 101), access("E", "s", 1), now, "allowed:4"),
            (grant("E", "s", 5, 200), access("E", "s", 1), -1, "denied:expired"),
            (grant("E", "s", 5, 200), access("E", "s", 1), 0, "allowed:4"),
            // Expiry is checked before budget, scope before expiry, effect before scope.
            (grant("E", "s", 0, 1), access("E", "s", 9), now, "denied:expired"),
            (grant("E", "t", 0, 1), access("E", "s", 9), now, "denied:scope"),
            (grant("F", "t", 0, 1), access("E", "s", 9), now, "denied:effect-name"),
            // Exact string equality: no case folding, no prefix matching.
            (grant("e", "s", 5, 200), access("E", "s", 1), now, "denied:effect-name"),
            (grant("E", "s/", 5, 200), access("E", "s", 1), now, "denied:scope"),
            (grant("E", "s", i64::MAX, i64::MAX), access("E", "s", 0), now, "allowed:9223372036854775807"),
        ];
        for (g, a, now, want) in table {
            assert_eq!(decide(g, a, *now).label(), *want, "grant {g:?} access {a:?} now {now}");
        }
    }

    #[test]
    fn select_grant_follows_the_ledger_rule() {
        let req = access("E", "s", 1);
        let now = 100;
        let ok = |budget| grant("E", "s", budget, 200);
        let expired = grant("E", "s", 5, 50);
        let scope = grant("E", "x", 5, 200);
        let effect = grant("F", "s", 5, 200);
        let broke = grant("E", "s", 0, 200);
        let table: Vec<(Vec<Grant>, Option<usize>, &str)> = vec![
            (vec![], None, "denied:effect-name"),
            (vec![ok(5)], Some(0), "allowed:4"),
            (vec![effect.clone()], Some(0), "denied:effect-name"),
            // A later allowing grant wins even when grant 0 allows.
            (vec![ok(5), ok(9)], Some(1), "allowed:8"),
            (vec![ok(5), effect.clone(), ok(3), ok(9)], Some(2), "allowed:2"),
            (vec![ok(5), effect.clone()], Some(0), "allowed:4"),
            // No allow: the strictly highest denial, earliest on ties.
            (vec![effect.clone(), scope.clone()], Some(1), "denied:scope"),
            (vec![effect.clone(), scope.clone(), expired.clone(), broke.clone()], Some(3), "denied:budget"),
            (vec![broke.clone(), expired.clone()], Some(0), "denied:budget"),
            (vec![scope.clone(), scope.clone()], Some(0), "denied:scope"),
            (vec![effect.clone(), scope.clone(), scope.clone()], Some(1), "denied:scope"),
            (vec![effect.clone(), effect.clone()], Some(0), "denied:effect-name"),
            (vec![expired.clone(), broke.clone(), broke.clone()], Some(1), "denied:budget"),
        ];
        for (grants, index, label) in table {
            let got = select_grant(&grants, &req, now);
            assert_eq!(got.grant_index, index, "grants {grants:?}");
            assert_eq!(got.decision.label(), label, "grants {grants:?}");
            assert_eq!(grants_allow(&grants, &req, now), label.starts_with("allowed:"));
        }
    }

    #[test]
    fn zero_cost_access_is_visible_with_a_zero_budget() {
        let grants = [grant("Workspace.Read", "worktree", 0, 200)];
        assert!(grants_allow(&grants, &access("Workspace.Read", "worktree", 0), 100));
        assert!(!grants_allow(&grants, &access("Workspace.Read", "worktree", 0), 200));
        assert!(!grants_allow(&[], &access("Workspace.Read", "worktree", 0), 100));
    }

    #[test]
    fn ranks_order_denials() {
        let ranks: Vec<u8> =
            [Denial::EffectName, Denial::Scope, Denial::Expired, Denial::Budget].iter().map(Denial::rank).collect();
        assert_eq!(ranks, vec![0, 1, 2, 3]);
        assert!(Decision::Allowed { remaining: 0 }.rank() > Denial::Budget.rank());
    }
}
