//! MCP tool names: the transition id under a reversible escape (reference-edge §7.2), because
//! MCP tool names may not contain `.` or `/`.

use std::collections::HashMap;

use crate::quote::{escape_chars, go_quote};

/// MCP clients refuse longer tool names; the reference refuses the whole surface rather than
/// truncating or dropping a tool.
pub const MAX_NAME_BYTES: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum McpNameError {
    #[error(
        "transition id {} escapes to an MCP tool name of {len} bytes; MCP tool names are at most 64 bytes",
        go_quote(.id)
    )]
    EscapedTooLong { id: String, len: usize },
    #[error("MCP tool name is empty")]
    Empty,
    #[error("MCP tool name {} is {len} bytes; at most 64 are allowed", go_quote(.name))]
    TooLong { name: String, len: usize },
    #[error(
        "MCP tool name {}: '_' at byte {offset} must be followed by 'u', 'd' or 's'",
        go_quote(.name)
    )]
    BadEscape { name: String, offset: usize },
    #[error(
        "MCP tool name {} has {} at byte {offset}; only a-z, 0-9, '-' and the escapes _u _d _s are decodable",
        go_quote(.name),
        go_quote(&.found.to_string())
    )]
    BadCharacter { name: String, found: char, offset: usize },
    #[error(
        "transition ids {} and {} escape to the same MCP tool name {}",
        go_quote(.first),
        go_quote(.second),
        go_quote(.name)
    )]
    Duplicate { first: String, second: String, name: String },
}

/// `_`→`_u`, `.`→`_d`, `/`→`_s`, every other byte unchanged (`tools.echo` → `tools_decho`).
pub fn escape(id: &str) -> Result<String, McpNameError> {
    let name = escape_chars(id, |c| match c {
        '_' => Some("_u"),
        '.' => Some("_d"),
        '/' => Some("_s"),
        _ => None,
    });
    if name.len() > MAX_NAME_BYTES {
        return Err(McpNameError::EscapedTooLong { id: id.to_owned(), len: name.len() });
    }
    Ok(name)
}

/// Decodes a tool name back to the transition id. Stricter than the escape's image on purpose,
/// like the reference: uppercase and other bytes are refused, not passed through.
pub fn unescape(name: &str) -> Result<String, McpNameError> {
    if name.is_empty() {
        return Err(McpNameError::Empty);
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(McpNameError::TooLong { name: name.to_owned(), len: name.len() });
    }
    let bytes = name.as_bytes();
    let mut id = String::with_capacity(name.len());
    let mut offset = 0;
    while offset < bytes.len() {
        let b = bytes[offset];
        match b {
            b'_' => {
                let decoded = match bytes.get(offset + 1) {
                    Some(b'u') => '_',
                    Some(b'd') => '.',
                    Some(b's') => '/',
                    _ => {
                        return Err(McpNameError::BadEscape { name: name.to_owned(), offset });
                    }
                };
                id.push(decoded);
                offset += 2;
            }
            b'a'..=b'z' | b'0'..=b'9' | b'-' => {
                id.push(char::from(b));
                offset += 1;
            }
            _ => {
                return Err(McpNameError::BadCharacter {
                    name: name.to_owned(),
                    found: name[offset..].chars().next().unwrap_or('\u{fffd}'),
                    offset,
                });
            }
        }
    }
    Ok(id)
}

/// Escapes a whole tool surface in order. Any over-long name or any two ids sharing a name
/// refuses the surface, as the reference does.
pub fn escape_surface<'a, I>(ids: I) -> Result<Vec<String>, McpNameError>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut seen: HashMap<String, &'a str> = HashMap::new();
    let mut names = Vec::new();
    for id in ids {
        let name = escape(id)?;
        if let Some(first) = seen.insert(name.clone(), id) {
            return Err(McpNameError::Duplicate { first: first.to_owned(), second: id.to_owned(), name });
        }
        names.push(name);
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn escape_table() {
        // Each id escapes to its name, and the name unescapes to the id.
        let table = [
            ("tools.echo", "tools_decho"),
            ("ailang-read", "ailang-read"),
            ("a_b", "a_ub"),
            ("se/tools.read_file", "se_stools_dread_ufile"),
            ("_./", "_u_d_s"),
        ];
        for (id, name) in table {
            assert_eq!(escape(id).unwrap(), name, "escaping {id:?}");
            assert_eq!(unescape(name).unwrap(), id, "unescaping {name:?}");
        }
        // The empty id escapes to the empty name, which `unescape` refuses (below).
        assert_eq!(escape("").unwrap(), "");
        let at_limit = "a".repeat(61) + ".b";
        assert_eq!(escape(&at_limit).unwrap().len(), 64);
        let over = "a".repeat(63) + ".";
        assert_eq!(
            escape(&over).unwrap_err().to_string(),
            format!(
                "transition id \"{over}\" escapes to an MCP tool name of 65 bytes; MCP tool names are at most 64 bytes"
            )
        );
    }

    #[test]
    fn unescape_table() {
        let over = "a".repeat(65);
        let bad: &[(&str, String)] = &[
            ("", "MCP tool name is empty".into()),
            (&over, format!("MCP tool name \"{over}\" is 65 bytes; at most 64 are allowed")),
            ("a_", r#"MCP tool name "a_": '_' at byte 1 must be followed by 'u', 'd' or 's'"#.into()),
            ("a_x", r#"MCP tool name "a_x": '_' at byte 1 must be followed by 'u', 'd' or 's'"#.into()),
            ("a_U", r#"MCP tool name "a_U": '_' at byte 1 must be followed by 'u', 'd' or 's'"#.into()),
            (
                "Tools",
                r#"MCP tool name "Tools" has "T" at byte 0; only a-z, 0-9, '-' and the escapes _u _d _s are decodable"#
                    .into(),
            ),
            (
                "a.b",
                r#"MCP tool name "a.b" has "." at byte 1; only a-z, 0-9, '-' and the escapes _u _d _s are decodable"#
                    .into(),
            ),
            (
                "aé",
                r#"MCP tool name "aé" has "é" at byte 1; only a-z, 0-9, '-' and the escapes _u _d _s are decodable"#
                    .into(),
            ),
        ];
        for (name, want) in bad {
            assert_eq!(unescape(name).unwrap_err().to_string(), *want, "unescaping {name:?}");
        }
        assert_eq!(unescape(&"a".repeat(64)).unwrap(), "a".repeat(64));
    }

    #[test]
    fn escape_surface_refuses_the_whole_surface() {
        assert_eq!(escape_surface(["tools.echo", "ailang-read"]).unwrap(), vec!["tools_decho", "ailang-read"]);
        let over = "a".repeat(65);
        assert!(matches!(escape_surface(["tools.echo", over.as_str()]), Err(McpNameError::EscapedTooLong { .. })));
        assert_eq!(
            escape_surface(["a.b", "a.b"]).unwrap_err(),
            McpNameError::Duplicate { first: "a.b".into(), second: "a.b".into(), name: "a_db".into() }
        );
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(256))]

        #[test]
        fn escape_round_trips(id in "[a-z0-9_./-]{1,40}") {
            let name = escape(&id).unwrap();
            prop_assert_eq!(unescape(&name).unwrap(), id);
        }

        #[test]
        fn unescape_round_trips(name in "([a-z0-9-]|_u|_d|_s){1,32}") {
            let id = unescape(&name).unwrap();
            prop_assert_eq!(escape(&id).unwrap(), name);
        }

        #[test]
        fn unescape_never_panics(name in "\\PC{0,80}") {
            let _ = unescape(&name);
        }
    }
}
