//! Identifier grammars: transition ids, task ids, episodes, and invocation ids built from them.
//! Each newtype is valid by construction, so the rest of the code never re-checks strings.

use std::fmt;

use crate::quote::go_quote;

/// Why a text is not a valid identifier of its kind. Every message names the kind, quotes the
/// id and says which rule failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{kind} is empty; it must have at least one character")]
    Empty { kind: &'static str },
    #[error("{kind} {} is {len} bytes; at most {max} are allowed", go_quote(.id))]
    TooLong { kind: &'static str, id: String, len: usize, max: usize },
    #[error(
        "{kind} {} has {} at byte {offset}; allowed characters are {allowed}",
        go_quote(.id),
        go_quote(&.found.to_string())
    )]
    BadCharacter { kind: &'static str, id: String, found: char, offset: usize, allowed: &'static str },
    #[error("{kind} {} must start with a-z or 0-9", go_quote(.id))]
    BadStart { kind: &'static str, id: String },
    #[error("transition id {} must end with a-z or 0-9", go_quote(.id))]
    BadEnd { id: String },
    #[error("transition id {} has an empty segment at byte {offset}", go_quote(.id))]
    EmptySegment { id: String, offset: usize },
    #[error(
        "transition id {} has a segment of {len} bytes at byte {offset}; segments between '.' and '/' are at most 32 bytes",
        go_quote(.id)
    )]
    SegmentTooLong { id: String, offset: usize, len: usize },
    #[error(
        "transition id {}: the character after the separator at byte {offset} must be a-z or 0-9",
        go_quote(.id)
    )]
    BadSegmentStart { id: String, offset: usize },
    #[error(
        "transition id {}: '_' or '-' at byte {offset} must not directly precede '.' or '/'",
        go_quote(.id)
    )]
    PunctuationBeforeSeparator { id: String, offset: usize },
}

const TRANSITION_ID_MAX: usize = 128;
const TRANSITION_SEGMENT_MAX: usize = 32;
const TASK_ID_MAX: usize = 128;
const EPISODE_MAX: usize = 64;

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn is_separator(b: u8) -> bool {
    b == b'.' || b == b'/'
}

/// The char starting at `offset`; ids that reach this point were `&str`, so it exists.
fn char_at(text: &str, offset: usize) -> char {
    text[offset..].chars().next().unwrap_or('\u{fffd}')
}

/// The rules every kind of id shares: 1 to `max` bytes, each of them one `ok` accepts
/// (`allowed` names them for the message).
fn check_text(
    kind: &'static str,
    id: &str,
    max: usize,
    allowed: &'static str,
    ok: impl Fn(u8) -> bool,
) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty { kind });
    }
    if id.len() > max {
        return Err(IdError::TooLong { kind, id: id.to_owned(), len: id.len(), max });
    }
    match id.bytes().position(|b| !ok(b)) {
        Some(offset) => {
            Err(IdError::BadCharacter { kind, id: id.to_owned(), found: char_at(id, offset), offset, allowed })
        }
        None => Ok(()),
    }
}

/// Declares a validated string id: the type (its doc comment first), the kind its errors name,
/// its text accessors, and the conversions that all go through its `parse`.
macro_rules! string_newtype {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// What this id's errors call it.
            const KIND: &'static str = $kind;

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(text: &str) -> Result<Self, IdError> {
                Self::parse(text)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text: std::borrow::Cow<'de, str> = serde::Deserialize::deserialize(deserializer)?;
                Self::parse(&text).map_err(serde::de::Error::custom)
            }
        }
    };
}

string_newtype! {
    /// A transition id (reference-core §5.2): 1–128 bytes of `[a-z0-9_./-]`, segments between `.`
    /// and `/` of 1–32 bytes, every segment starting with `[a-z0-9]`, the id ending with one, and
    /// no `_`/`-` directly before a separator. Ordering is byte order, the registry's entry order.
    TransitionId, "transition id"
}

impl TransitionId {
    pub fn parse(text: &str) -> Result<TransitionId, IdError> {
        check_text(Self::KIND, text, TRANSITION_ID_MAX, "a-z 0-9 _ . / -", |b| {
            is_lower_alnum(b) || matches!(b, b'_' | b'.' | b'/' | b'-')
        })?;
        let bytes = text.as_bytes();
        if !is_lower_alnum(bytes[0]) {
            // A leading separator is an empty first segment; name it as such.
            if is_separator(bytes[0]) {
                return Err(IdError::EmptySegment { id: text.to_owned(), offset: 0 });
            }
            return Err(IdError::BadStart { kind: Self::KIND, id: text.to_owned() });
        }
        let mut segment_start = 0;
        for (offset, &b) in bytes.iter().enumerate() {
            if !is_separator(b) {
                continue;
            }
            check_segment(text, segment_start, offset)?;
            if offset > 0 && matches!(bytes[offset - 1], b'_' | b'-') {
                return Err(IdError::PunctuationBeforeSeparator { id: text.to_owned(), offset: offset - 1 });
            }
            match bytes.get(offset + 1) {
                None => {
                    return Err(IdError::EmptySegment { id: text.to_owned(), offset: offset + 1 });
                }
                Some(&next) if is_separator(next) => {
                    return Err(IdError::EmptySegment { id: text.to_owned(), offset: offset + 1 });
                }
                Some(&next) if !is_lower_alnum(next) => {
                    return Err(IdError::BadSegmentStart { id: text.to_owned(), offset });
                }
                Some(_) => {}
            }
            segment_start = offset + 1;
        }
        check_segment(text, segment_start, bytes.len())?;
        if !is_lower_alnum(bytes[bytes.len() - 1]) {
            return Err(IdError::BadEnd { id: text.to_owned() });
        }
        Ok(TransitionId(text.to_owned()))
    }
}

fn check_segment(id: &str, start: usize, end: usize) -> Result<(), IdError> {
    let len = end - start;
    if len == 0 {
        return Err(IdError::EmptySegment { id: id.to_owned(), offset: start });
    }
    if len > TRANSITION_SEGMENT_MAX {
        return Err(IdError::SegmentTooLong { id: id.to_owned(), offset: start, len });
    }
    Ok(())
}

string_newtype! {
    /// An A2A task id, the idempotency key within an episode: 1–128 characters of
    /// `[A-Za-z0-9._-]` (rule R1).
    TaskId, "task id"
}

impl TaskId {
    pub fn parse(text: &str) -> Result<TaskId, IdError> {
        check_text(Self::KIND, text, TASK_ID_MAX, "A-Z a-z 0-9 . _ -", |b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
        })?;
        Ok(TaskId(text.to_owned()))
    }

    /// A fresh task id from 32 random bytes (64 lowercase hex), as every MCP `tools/call`
    /// gets. Randomness is the caller's: this crate does no I/O.
    pub fn mint(random: [u8; 32]) -> TaskId {
        TaskId(hex::encode(random))
    }
}

string_newtype! {
    /// An episode: `^[a-z0-9][a-z0-9-]{0,63}$`. It names the budget ledger, the worktree directory
    /// and part of every invocation id, so it must be safe as a path segment.
    Episode, "episode"
}

impl Episode {
    pub fn parse(text: &str) -> Result<Episode, IdError> {
        check_text(Self::KIND, text, EPISODE_MAX, "a-z 0-9 -", |b| is_lower_alnum(b) || b == b'-')?;
        if !is_lower_alnum(text.as_bytes()[0]) {
            return Err(IdError::BadStart { kind: Self::KIND, id: text.to_owned() });
        }
        Ok(Episode(text.to_owned()))
    }
}

/// Which agent protocol an invocation arrived on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Surface {
    A2a,
    Mcp,
}

impl Surface {
    pub fn as_str(&self) -> &'static str {
        match self {
            Surface::A2a => "a2a",
            Surface::Mcp => "mcp",
        }
    }

    /// The `writtenBy` of entries committed through this surface. The reference writes every
    /// call as `coordinator:a2a`; the project distinguishes MCP (DESIGN "Deliberate
    /// differences" 5).
    pub fn written_by(&self) -> &'static str {
        match self {
            Surface::A2a => "coordinator:a2a",
            Surface::Mcp => "coordinator:mcp",
        }
    }

    pub fn parse(text: &str) -> Option<Surface> {
        match text {
            "a2a" => Some(Surface::A2a),
            "mcp" => Some(Surface::Mcp),
            _ => None,
        }
    }
}

impl fmt::Display for Surface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `<surface>:<episode>:<task>`, the journal key of an invocation. Unambiguous because neither
/// an episode nor a task id can contain `:`.
pub fn invocation_id(surface: Surface, episode: &Episode, task: &TaskId) -> String {
    format!("{}:{}:{}", surface.as_str(), episode.as_str(), task.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_id_grammar() {
        let long_segment = "a".repeat(33);
        let max_segment = "a".repeat(32);
        let too_long = ["abcdefghijklmnop"; 8].join(".") + "x";
        let max_len = format!("{}.{}", "a".repeat(31), vec!["b".repeat(31); 3].join("/"));
        assert_eq!(max_len.len(), 127);
        let valid = [
            "a",
            "0",
            "tools.echo",
            "ailang-read",
            "se/tools.read_file",
            "a_b-c.d/e9",
            "a.b.c.d",
            max_segment.as_str(),
            max_len.as_str(),
        ];
        for id in valid {
            let parsed = TransitionId::parse(id).unwrap_or_else(|e| panic!("{id}: {e}"));
            assert_eq!(parsed.as_str(), id);
        }
        let invalid: &[(&str, &str)] = &[
            ("", "transition id is empty; it must have at least one character"),
            (
                &too_long,
                "transition id \"abcdefghijklmnop.abcdefghijklmnop.abcdefghijklmnop.abcdefghijklmnop.abcdefghijklmnop.abcdefghijklmnop.abcdefghijklmnop.abcdefghijklmnopx\" is 136 bytes; at most 128 are allowed",
            ),
            ("Tools.echo", r#"transition id "Tools.echo" has "T" at byte 0; allowed characters are a-z 0-9 _ . / -"#),
            ("a b", r#"transition id "a b" has " " at byte 1; allowed characters are a-z 0-9 _ . / -"#),
            ("aé", r#"transition id "aé" has "é" at byte 1; allowed characters are a-z 0-9 _ . / -"#),
            ("_a", r#"transition id "_a" must start with a-z or 0-9"#),
            ("-a", r#"transition id "-a" must start with a-z or 0-9"#),
            (".a", r#"transition id ".a" has an empty segment at byte 0"#),
            ("a.", r#"transition id "a." has an empty segment at byte 2"#),
            ("a..b", r#"transition id "a..b" has an empty segment at byte 2"#),
            ("a/.b", r#"transition id "a/.b" has an empty segment at byte 2"#),
            ("a_", r#"transition id "a_" must end with a-z or 0-9"#),
            ("a-", r#"transition id "a-" must end with a-z or 0-9"#),
            ("a._b", r#"transition id "a._b": the character after the separator at byte 1 must be a-z or 0-9"#),
            ("a/-b", r#"transition id "a/-b": the character after the separator at byte 1 must be a-z or 0-9"#),
            ("a_.b", r#"transition id "a_.b": '_' or '-' at byte 1 must not directly precede '.' or '/'"#),
            ("a-/b", r#"transition id "a-/b": '_' or '-' at byte 1 must not directly precede '.' or '/'"#),
        ];
        for (id, want) in invalid {
            let err = TransitionId::parse(id).unwrap_err();
            assert_eq!(err.to_string(), *want, "parsing {id:?}");
        }
        let seg = format!("x.{long_segment}");
        assert_eq!(
            TransitionId::parse(&seg).unwrap_err(),
            IdError::SegmentTooLong { id: seg.clone(), offset: 2, len: 33 }
        );
        assert!(TransitionId::parse(&long_segment).is_err());
    }

    #[test]
    fn task_id_grammar() {
        let max = "A".repeat(128);
        for id in ["read-1", "a", "A.b_c-9", "...", "-", max.as_str()] {
            assert_eq!(TaskId::parse(id).unwrap().as_str(), id);
        }
        let over = "A".repeat(129);
        let invalid: &[(&str, &str)] = &[
            ("", "task id is empty; it must have at least one character"),
            (&over, &format!("task id \"{over}\" is 129 bytes; at most 128 are allowed")),
            ("a:b", r#"task id "a:b" has ":" at byte 1; allowed characters are A-Z a-z 0-9 . _ -"#),
            ("a/b", r#"task id "a/b" has "/" at byte 1; allowed characters are A-Z a-z 0-9 . _ -"#),
            ("a\n", r#"task id "a\n" has "\n" at byte 1; allowed characters are A-Z a-z 0-9 . _ -"#),
        ];
        for (id, want) in invalid {
            assert_eq!(TaskId::parse(id).unwrap_err().to_string(), *want, "parsing {id:?}");
        }
        let minted = TaskId::mint([7; 32]);
        assert_eq!(minted.as_str(), "07".repeat(32));
    }

    #[test]
    fn episode_grammar() {
        let max = format!("a{}", "-".repeat(63));
        for id in ["ep1", "0", "a-b-c", "9-", max.as_str()] {
            assert_eq!(Episode::parse(id).unwrap().as_str(), id);
        }
        let over = format!("a{}", "b".repeat(64));
        let invalid: &[(&str, &str)] = &[
            ("", "episode is empty; it must have at least one character"),
            (&over, &format!("episode \"{over}\" is 65 bytes; at most 64 are allowed")),
            ("-ep", r#"episode "-ep" must start with a-z or 0-9"#),
            ("Ep1", r#"episode "Ep1" has "E" at byte 0; allowed characters are a-z 0-9 -"#),
            ("ep_1", r#"episode "ep_1" has "_" at byte 2; allowed characters are a-z 0-9 -"#),
            ("ep.1", r#"episode "ep.1" has "." at byte 2; allowed characters are a-z 0-9 -"#),
            ("../x", r#"episode "../x" has "." at byte 0; allowed characters are a-z 0-9 -"#),
        ];
        for (id, want) in invalid {
            assert_eq!(Episode::parse(id).unwrap_err().to_string(), *want, "parsing {id:?}");
        }
    }

    #[test]
    fn ids_serialise_as_strings_and_validate_on_read() {
        let id = TransitionId::parse("tools.echo").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), r#""tools.echo""#);
        assert_eq!(serde_json::from_str::<TransitionId>(r#""tools.echo""#).unwrap(), id);
        assert!(serde_json::from_str::<TransitionId>(r#""Tools""#).is_err());
        assert!(serde_json::from_str::<Episode>(r#""-x""#).is_err());
        assert!(serde_json::from_str::<TaskId>(r#""""#).is_err());
        assert_eq!(serde_json::from_str::<TaskId>(r#""read-1""#).unwrap().to_string(), "read-1");
        assert_eq!("ep1".parse::<Episode>().unwrap().as_str(), "ep1");
    }

    #[test]
    fn invocation_ids_and_writers_per_surface() {
        let episode = Episode::parse("ep1").unwrap();
        let task = TaskId::parse("read-1").unwrap();
        let table = [
            (Surface::A2a, "a2a", "coordinator:a2a", "a2a:ep1:read-1"),
            (Surface::Mcp, "mcp", "coordinator:mcp", "mcp:ep1:read-1"),
        ];
        for (surface, name, writer, id) in table {
            assert_eq!(surface.as_str(), name);
            assert_eq!(surface.to_string(), name);
            assert_eq!(Surface::parse(name), Some(surface));
            assert_eq!(surface.written_by(), writer);
            assert_eq!(invocation_id(surface, &episode, &task), id);
        }
        assert_eq!(Surface::parse("rest"), None);
    }
}
