//! What the core's property tests share.

use proptest::prelude::ProptestConfig;

/// `cases` per property, or `PROPTEST_CASES` when it is set (a count written into a config
/// would otherwise override the variable).
pub(crate) fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|value| value.parse().ok()).unwrap_or(cases);
    ProptestConfig { cases, ..ProptestConfig::default() }
}
