//! Content addresses: `sha256:<64 lowercase hex>` of an object's payload bytes.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

use crate::quote::go_quote;

/// The only registered algorithm tag.
const ALGORITHM: &str = "sha256";
/// Width of a sha256 digest in hex characters.
const DIGEST_WIDTH: usize = 64;

/// A SHA-256 content address. Valid by construction; its text form is `sha256:<hex>`.
///
/// The derived ordering compares the digest bytes, which is the same as comparing the text
/// forms byte by byte (fixed prefix, fixed-width lowercase hex), so sorted refs sort like the
/// reference's sorted strings.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HashRef([u8; 32]);

/// Why a text is not a canonical hashref. The Display texts are the reference's exact wire
/// texts (reference-edge §3.2); REST callers prefix them with the field label and `": "`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HashRefError {
    #[error("hashref: empty hashref text")]
    Empty,
    #[error("hashref: missing algorithm tag (expected algo:digest){}", suffix(.input))]
    MissingTag { input: String },
    #[error("hashref: malformed hashref (multiple colons){}", suffix(.input))]
    MultipleColons { input: String },
    #[error("hashref: empty algorithm tag{}", suffix(.input))]
    EmptyTag { input: String },
    #[error("hashref: unsupported algorithm tag{}", suffix(.tag))]
    UnsupportedTag { tag: String },
    #[error("hashref: digest is not lowercase hexadecimal{}", suffix(.digest))]
    NotLowercaseHex { digest: String },
    #[error(
        "hashref: digest length {} does not match sha256 width 64{}",
        .digest.len(),
        suffix(.digest)
    )]
    WrongWidth { digest: String },
}

/// The reference drops the `: "<input>"` tail when the offending text is empty.
fn suffix(offending: &str) -> String {
    if offending.is_empty() { String::new() } else { format!(": {}", go_quote(offending)) }
}

impl HashRef {
    /// The address of `bytes`: their SHA-256.
    pub fn of(bytes: &[u8]) -> HashRef {
        HashRef(Sha256::digest(bytes).into())
    }

    /// Builds a ref from raw digest bytes (for example a stored BLOB column).
    pub fn from_digest(digest: [u8; 32]) -> HashRef {
        HashRef(digest)
    }

    /// The raw digest bytes.
    pub fn digest(&self) -> &[u8; 32] {
        &self.0
    }

    /// Parses the canonical text form `sha256:<64 lowercase hex>`; anything else is refused
    /// with the reference's structured error.
    pub fn parse(text: &str) -> Result<HashRef, HashRefError> {
        if text.is_empty() {
            return Err(HashRefError::Empty);
        }
        let mut parts = text.split(':');
        let (tag, digest) = match (parts.next(), parts.next(), parts.next()) {
            (Some(tag), Some(digest), None) => (tag, digest),
            (_, None, _) => {
                return Err(HashRefError::MissingTag { input: text.to_owned() });
            }
            _ => {
                return Err(HashRefError::MultipleColons { input: text.to_owned() });
            }
        };
        if tag.is_empty() {
            return Err(HashRefError::EmptyTag { input: text.to_owned() });
        }
        if tag != ALGORITHM {
            return Err(HashRefError::UnsupportedTag { tag: tag.to_owned() });
        }
        // Checked before the width, so `sha256:` reports a hex error like the reference.
        if digest.is_empty() || !digest.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(HashRefError::NotLowercaseHex { digest: digest.to_owned() });
        }
        if digest.len() != DIGEST_WIDTH {
            return Err(HashRefError::WrongWidth { digest: digest.to_owned() });
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(digest, &mut bytes)
            .map_err(|_| HashRefError::NotLowercaseHex { digest: digest.to_owned() })?;
        Ok(HashRef(bytes))
    }

    /// Parses a field where `""` is the reference's zero ref ("absent"), e.g. a genesis
    /// `observedHead` or a revision-1 registry `parent`.
    pub fn parse_optional(text: &str) -> Result<Option<HashRef>, HashRefError> {
        if text.is_empty() { Ok(None) } else { HashRef::parse(text).map(Some) }
    }

    /// The digest as 64 lowercase hex characters, without the algorithm tag.
    pub fn hex(&self) -> String {
        self.with_hex(str::to_owned)
    }

    /// Lends the digest's hex text from a stack buffer: refs are formatted on every hot path
    /// (store columns, replies), so no allocation per ref.
    fn with_hex<R>(&self, use_hex: impl FnOnce(&str) -> R) -> R {
        let mut buffer = [0u8; DIGEST_WIDTH];
        // Both cannot fail: the buffer is exactly twice the digest, and hex digits are ASCII.
        let _ = hex::encode_to_slice(self.0, &mut buffer);
        use_hex(std::str::from_utf8(&buffer).unwrap_or_default())
    }

    /// The text form of an optional ref, `""` for none (the reference's zero ref).
    pub fn optional_text(value: Option<&HashRef>) -> String {
        value.map(HashRef::to_string).unwrap_or_default()
    }
}

/// The interface hash of a kernel object: sha256 of its ASCII semantic id (reference-core §0.8).
pub fn semantic_interface_hash(semantic_id: &str) -> HashRef {
    HashRef::of(semantic_id.as_bytes())
}

impl fmt::Display for HashRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with_hex(|hex| {
            f.write_str(ALGORITHM)?;
            f.write_str(":")?;
            f.write_str(hex)
        })
    }
}

impl fmt::Debug for HashRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for HashRef {
    type Err = HashRefError;

    fn from_str(text: &str) -> Result<HashRef, HashRefError> {
        HashRef::parse(text)
    }
}

impl serde::Serialize for HashRef {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for HashRef {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<HashRef, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = HashRef;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a hashref string sha256:<64 lowercase hex>")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<HashRef, E> {
                HashRef::parse(text).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// `#[serde(with = "world_model::hashref::zero_as_empty")]` for `Option<HashRef>` fields whose
/// wire form uses `""` for "absent" (the reference's zero ref) instead of `null`.
pub mod zero_as_empty {
    use super::HashRef;

    pub fn serialize<S: serde::Serializer>(value: &Option<HashRef>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(hash_ref) => serializer.collect_str(hash_ref),
            None => serializer.serialize_str(""),
        }
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<HashRef>, D::Error> {
        let text: std::borrow::Cow<'de, str> = serde::Deserialize::deserialize(deserializer)?;
        HashRef::parse_optional(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY_SHA: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn of_hashes_payload_bytes() {
        assert_eq!(HashRef::of(b"").to_string(), EMPTY_SHA);
        assert_eq!(HashRef::of(b"abc").hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn parse_round_trips_canonical_text() {
        let parsed = HashRef::parse(EMPTY_SHA).unwrap();
        assert_eq!(parsed, HashRef::of(b""));
        assert_eq!(parsed.to_string(), EMPTY_SHA);
        assert_eq!(format!("{parsed:?}"), EMPTY_SHA);
        assert_eq!(EMPTY_SHA.parse::<HashRef>().unwrap(), parsed);
    }

    #[test]
    fn parse_errors_use_the_reference_texts() {
        let upper = "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855";
        let table: &[(&str, &str)] = &[
            ("", "hashref: empty hashref text"),
            ("e3b0", r#"hashref: missing algorithm tag (expected algo:digest): "e3b0""#),
            ("sha256:ab:cd", r#"hashref: malformed hashref (multiple colons): "sha256:ab:cd""#),
            ("::", r#"hashref: malformed hashref (multiple colons): "::""#),
            (":abcd", r#"hashref: empty algorithm tag: ":abcd""#),
            ("md5:abcd", r#"hashref: unsupported algorithm tag: "md5""#),
            ("SHA256:abcd", r#"hashref: unsupported algorithm tag: "SHA256""#),
            ("sha256:", "hashref: digest is not lowercase hexadecimal"),
            (
                upper,
                r#"hashref: digest is not lowercase hexadecimal: "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855""#,
            ),
            ("sha256:xyz\"", r#"hashref: digest is not lowercase hexadecimal: "xyz\"""#),
            ("sha256:abcd", r#"hashref: digest length 4 does not match sha256 width 64: "abcd""#),
            (
                "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85500",
                r#"hashref: digest length 66 does not match sha256 width 64: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85500""#,
            ),
            ("sha256:\n", r#"hashref: digest is not lowercase hexadecimal: "\n""#),
        ];
        for (input, want) in table {
            let err = HashRef::parse(input).unwrap_err();
            assert_eq!(err.to_string(), *want, "parsing {input:?}");
        }
    }

    #[test]
    fn parse_optional_treats_empty_as_the_zero_ref() {
        assert_eq!(HashRef::parse_optional("").unwrap(), None);
        assert_eq!(HashRef::parse_optional(EMPTY_SHA).unwrap(), Some(HashRef::of(b"")));
        assert!(HashRef::parse_optional("sha256:").is_err());
        assert_eq!(HashRef::optional_text(None), "");
        assert_eq!(HashRef::optional_text(Some(&HashRef::of(b""))), EMPTY_SHA);
    }

    #[test]
    fn ordering_matches_text_byte_order() {
        let mut refs: Vec<HashRef> = (0u8..50).map(|i| HashRef::of(&[i])).collect();
        let mut texts: Vec<String> = refs.iter().map(HashRef::to_string).collect();
        refs.sort();
        texts.sort();
        let sorted: Vec<String> = refs.iter().map(HashRef::to_string).collect();
        assert_eq!(sorted, texts);
    }

    #[test]
    fn serde_uses_the_text_form() {
        let value = HashRef::of(b"");
        let json = serde_json::to_string(&value).unwrap();
        assert_eq!(json, format!("\"{EMPTY_SHA}\""));
        assert_eq!(serde_json::from_str::<HashRef>(&json).unwrap(), value);
        let err = serde_json::from_str::<HashRef>("\"sha256:\"").unwrap_err();
        assert!(err.to_string().contains("hashref: digest is not lowercase hexadecimal"));
        assert!(serde_json::from_str::<HashRef>("7").is_err());
    }

    #[test]
    fn zero_as_empty_maps_none_to_empty_string() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Row {
            #[serde(with = "zero_as_empty")]
            parent: Option<HashRef>,
        }
        let none = Row { parent: None };
        assert_eq!(serde_json::to_string(&none).unwrap(), r#"{"parent":""}"#);
        assert_eq!(serde_json::from_str::<Row>(r#"{"parent":""}"#).unwrap(), none);
        let some = Row { parent: Some(HashRef::of(b"")) };
        let text = serde_json::to_string(&some).unwrap();
        assert_eq!(serde_json::from_str::<Row>(&text).unwrap(), some);
    }

    #[test]
    fn semantic_interface_hash_is_sha256_of_the_id() {
        assert_eq!(semantic_interface_hash("world/transition-source/v1"), HashRef::of(b"world/transition-source/v1"));
    }
}
