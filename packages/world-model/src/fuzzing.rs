//! The settings and generators the property tests of the crate share.

use proptest::prelude::*;
use serde_json::Value;

/// `cases` per property, or `PROPTEST_CASES` when it is set, so a longer run needs no edit (a
/// count written into a config would otherwise override the variable).
pub(crate) fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|value| value.parse().ok()).unwrap_or(cases);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

/// Any JSON value a few levels deep: every scalar kind, strings with escapes and non-ASCII
/// text, member names that sort differently as bytes and as characters.
pub(crate) fn json_value() -> impl Strategy<Value = Value> {
    json_value_of(prop_oneof!["\\PC{0,8}", "[\\x00-\\x7f]{0,8}"], "[a-zé\"\\\\A-Z_]{0,4}")
}

/// Any JSON value a few levels deep, of every scalar kind, its strings drawn from `strings`
/// and its member names from the regex `names`: a property that cares about particular text
/// (quotes, brackets, separators) asks for it here.
pub(crate) fn json_value_of(
    strings: impl Strategy<Value = String> + 'static,
    names: &'static str,
) -> impl Strategy<Value = Value> {
    // Text is where the encodings differ most, so it is drawn twice as often.
    let leaf = prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        2 => strings.prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(names, inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// `value` written as another producer might write it: members in an order picked by `seed`
/// (not sorted), and, when `spaced`, whitespace between every token. Same value, other bytes.
pub(crate) fn spelled(value: &Value, seed: u64, spaced: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut state = seed | 1;
    write_spelled(value, &mut state, spaced, &mut out);
    out
}

fn write_spelled(value: &Value, state: &mut u64, spaced: bool, out: &mut Vec<u8>) {
    let gap: &[u8] = if spaced { b" \n\t " } else { b"" };
    match value {
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(gap);
                write_spelled(item, state, spaced, out);
            }
            out.extend_from_slice(gap);
            out.push(b']');
        }
        Value::Object(members) => {
            let mut members: Vec<(&String, &Value)> = members.iter().collect();
            // A small xorshift: deterministic per seed, different orders per object.
            for i in (1..members.len()).rev() {
                *state ^= *state << 13;
                *state ^= *state >> 7;
                *state ^= *state << 17;
                members.swap(i, (*state % (i as u64 + 1)) as usize);
            }
            out.push(b'{');
            for (index, (name, member)) in members.into_iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(gap);
                out.extend_from_slice(&serde_json::to_vec(name).expect("a string encodes"));
                out.extend_from_slice(gap);
                out.push(b':');
                out.extend_from_slice(gap);
                write_spelled(member, state, spaced, out);
            }
            out.extend_from_slice(gap);
            out.push(b'}');
        }
        scalar => out.extend_from_slice(&serde_json::to_vec(scalar).expect("a scalar encodes")),
    }
}
