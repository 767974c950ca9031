//! What the edge's property tests share: the case-count setting and JSON objects written the
//! many ways a client may write them.

use proptest::prelude::*;
use serde_json::Value;

/// `cases` per property, or `PROPTEST_CASES` when it is set (a count written into a config
/// would otherwise override the variable).
pub(crate) fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|value| value.parse().ok()).unwrap_or(cases);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

/// A member that is absent, or present with one of `pool`'s values.
pub(crate) fn member(pool: Vec<Value>) -> impl Strategy<Value = Option<Value>> {
    prop::option::weighted(0.8, prop::sample::select(pool))
}

/// How a client spelled one object: the case of each key Go matches case-insensitively, the
/// member order and the whitespace.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spelling {
    pub seed: u64,
    pub spaced: bool,
}

pub(crate) fn spelling() -> impl Strategy<Value = Spelling> {
    (any::<u64>(), any::<bool>()).prop_map(|(seed, spaced)| Spelling { seed, spaced })
}

impl Spelling {
    /// The object of the present `members`, each key in one of its case spellings, in an
    /// order picked by the seed.
    pub(crate) fn object(&self, members: &[(&str, &Option<Value>)]) -> String {
        self.write(members, true)
    }

    /// The same with every key as given: for decoders that match names exactly.
    pub(crate) fn exact_object(&self, members: &[(&str, &Option<Value>)]) -> String {
        self.write(members, false)
    }

    fn write(&self, members: &[(&str, &Option<Value>)], fold: bool) -> String {
        let mut state = self.seed | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let gap = if self.spaced { " \n " } else { "" };
        let mut written: Vec<String> = members
            .iter()
            .filter_map(|(name, value)| value.as_ref().map(|value| (name, value)))
            .map(|(name, value)| {
                let key = match if fold { next() % 3 } else { 0 } {
                    0 => name.to_string(),
                    1 => name.to_ascii_uppercase(),
                    _ => name[..1].to_ascii_uppercase() + &name[1..],
                };
                format!("{gap}{}{gap}:{gap}{value}", Value::String(key))
            })
            .collect();
        for i in (1..written.len()).rev() {
            written.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        format!("{{{}{gap}}}", written.join(","))
    }
}
