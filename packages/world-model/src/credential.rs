//! Session credentials: the `Authorization: Bearer <64-hex>` grammar, the stored credential id,
//! and the denial vocabularies of each wire (reference-edge §2).

use std::fmt;

use sha2::{Digest, Sha256};

/// Length of a session token in hex characters (32 random bytes).
pub const TOKEN_HEX_LEN: usize = 64;

/// A bearer token that passed the shape check, kept exactly as presented.
///
/// The text is not normalised: an upper-cased copy of a minted (lowercase) token hashes to a
/// different credential id and so resolves as unknown, as in the reference.
///
/// Nothing compares a presented token with a stored secret: sessions are found by the token's
/// sha256 (the credential id), so how long a lookup takes tells nothing about any token. Where
/// two tokens are compared, [`PartialEq`] takes the same time whatever bytes differ.
#[derive(Clone)]
pub struct Credential {
    token: String,
}

impl PartialEq for Credential {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.token.as_bytes(), other.token.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |differ, (x, y)| differ | (x ^ y)) == 0
    }
}

impl Eq for Credential {}

impl Credential {
    /// Checks a bare token (64 hex digits of either case) without the `Bearer` prefix.
    pub fn from_token(token: &str) -> Result<Credential, SessionDenial> {
        if token.len() == TOKEN_HEX_LEN && token.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Credential { token: token.to_owned() })
        } else {
            Err(SessionDenial::Malformed)
        }
    }

    /// The token text as presented. Secret: never log it.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The only thing stored about a credential: lowercase hex sha256 of the token's bytes.
    pub fn credential_id(&self) -> String {
        hex::encode(Sha256::digest(self.token.as_bytes()))
    }

    /// The header value internal callers send: `Bearer <token>`.
    pub fn authorization_value(&self) -> String {
        format!("Bearer {}", self.token)
    }
}

// The token is a secret; Debug output (logs, panics) shows only its id.
impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential").field("credential_id", &self.credential_id()).finish()
    }
}

/// Why a request has no usable session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionDenial {
    /// No `Authorization` header, or an empty one.
    Absent,
    /// Not `Bearer <64 hex>`.
    Malformed,
    /// Well-formed but no session matches (never minted, revoked, or undecodable grants).
    Unknown,
    /// The session's expiry is in the past.
    Expired,
}

impl SessionDenial {
    pub const ALL: [SessionDenial; 4] =
        [SessionDenial::Absent, SessionDenial::Malformed, SessionDenial::Unknown, SessionDenial::Expired];

    /// REST envelope (`/v1` and the agent card): HTTP status, class, message.
    pub fn rest(&self) -> (u16, &'static str, &'static str) {
        match self {
            SessionDenial::Absent => {
                (401, "SessionAbsent", "a session credential is required: no Authorization Bearer header was present")
            }
            SessionDenial::Malformed => {
                (400, "InvalidSession", "malformed Authorization header: expected a Bearer <64-hex-credential>")
            }
            SessionDenial::Unknown => {
                (401, "SessionUnknown", "unknown session credential: no session matches this token")
            }
            SessionDenial::Expired => (401, "SessionExpired", "session credential has expired"),
        }
    }

    /// The A2A / MCP message (MCP sends it as the text/plain 401 body plus a newline).
    pub fn wire_message(&self) -> &'static str {
        match self {
            SessionDenial::Absent => "session credential is absent: send Authorization: Bearer <session-credential>",
            SessionDenial::Malformed => "malformed Authorization header: expected Bearer <64-hex-credential>",
            SessionDenial::Unknown => "unknown session credential",
            SessionDenial::Expired => "session credential has expired",
        }
    }

    /// The A2A JSON-RPC error code: a malformed header is a bad envelope (-32600), every other
    /// denial is -32001.
    pub fn a2a_code(&self) -> i64 {
        match self {
            SessionDenial::Malformed => -32600,
            SessionDenial::Absent | SessionDenial::Unknown | SessionDenial::Expired => -32001,
        }
    }

    /// Stable snake_case code (the same text as the matching `FailureCode`).
    pub fn code(&self) -> &'static str {
        match self {
            SessionDenial::Absent => "session_absent",
            SessionDenial::Malformed => "session_malformed",
            SessionDenial::Unknown => "session_unknown",
            SessionDenial::Expired => "session_expired",
        }
    }

    pub fn from_code(code: &str) -> Option<SessionDenial> {
        SessionDenial::ALL.into_iter().find(|d| d.code() == code)
    }
}

impl fmt::Display for SessionDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.wire_message())
    }
}

impl std::error::Error for SessionDenial {}

/// Parses an `Authorization` header value (reference-edge §2.1 steps 1–3).
pub fn parse_authorization(header: Option<&str>) -> Result<Credential, SessionDenial> {
    let header = match header {
        None | Some("") => return Err(SessionDenial::Absent),
        Some(header) => header,
    };
    let mut fields = header.split([' ', '\t']).filter(|field| !field.is_empty());
    match (fields.next(), fields.next(), fields.next()) {
        (Some("Bearer"), Some(token), None) => Credential::from_token(token),
        _ => Err(SessionDenial::Malformed),
    }
}

/// Renders 32 random bytes as a session token (64 lowercase hex). Randomness is the caller's:
/// this crate does no I/O.
pub fn mint_token_hex(random: [u8; 32]) -> String {
    hex::encode(random)
}

/// A session whose `expires_at` is `now` still resolves; one second later it is expired.
pub fn resolve_expiry(now: i64, expires_at: i64) -> Result<(), SessionDenial> {
    if now > expires_at { Err(SessionDenial::Expired) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const TOKEN: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    #[test]
    fn authorization_header_grammar() {
        let upper = TOKEN.to_ascii_uppercase();
        let ok_tab = format!("Bearer\t{TOKEN}");
        let ok_runs = format!("  Bearer \t  {TOKEN}  ");
        let ok_plain = format!("Bearer {TOKEN}");
        let ok_upper = format!("Bearer {upper}");
        let lower_scheme = format!("bearer {TOKEN}");
        let three = format!("Bearer {TOKEN} extra");
        let short = format!("Bearer {}", &TOKEN[..63]);
        let long = format!("Bearer {TOKEN}0");
        let non_hex = format!("Bearer {}g", &TOKEN[..63]);
        let basic = format!("Basic {TOKEN}");
        let newline = format!("Bearer\n{TOKEN}");
        let table: Vec<(Option<&str>, Result<&str, SessionDenial>)> = vec![
            (None, Err(SessionDenial::Absent)),
            (Some(""), Err(SessionDenial::Absent)),
            (Some(" "), Err(SessionDenial::Malformed)),
            (Some("Bearer"), Err(SessionDenial::Malformed)),
            (Some(&ok_plain), Ok(TOKEN)),
            (Some(&ok_tab), Ok(TOKEN)),
            (Some(&ok_runs), Ok(TOKEN)),
            (Some(&ok_upper), Ok(upper.as_str())),
            (Some(&lower_scheme), Err(SessionDenial::Malformed)),
            (Some(&three), Err(SessionDenial::Malformed)),
            (Some(&short), Err(SessionDenial::Malformed)),
            (Some(&long), Err(SessionDenial::Malformed)),
            (Some(&non_hex), Err(SessionDenial::Malformed)),
            (Some(&basic), Err(SessionDenial::Malformed)),
            (Some(&newline), Err(SessionDenial::Malformed)),
            (Some(TOKEN), Err(SessionDenial::Malformed)),
        ];
        for (header, want) in table {
            let got = parse_authorization(header);
            match want {
                Ok(token) => assert_eq!(got.unwrap().token(), token, "header {header:?}"),
                Err(denial) => assert_eq!(got.unwrap_err(), denial, "header {header:?}"),
            }
        }
    }

    #[test]
    fn credentials_compare_equal_only_when_every_byte_matches() {
        let token = "ab".repeat(32);
        let same = Credential::from_token(&token).unwrap();
        assert_eq!(same, Credential::from_token(&token).unwrap());
        for position in [0, 31, 63] {
            let mut other = token.clone().into_bytes();
            other[position] = b'c';
            let other = Credential::from_token(std::str::from_utf8(&other).unwrap()).unwrap();
            assert_ne!(same, other, "a difference at byte {position}");
        }
    }

    #[test]
    fn credential_id_hashes_the_token_as_presented() {
        let lower = Credential::from_token(TOKEN).unwrap();
        let upper = Credential::from_token(&TOKEN.to_ascii_uppercase()).unwrap();
        assert_eq!(lower.credential_id(), hex::encode(Sha256::digest(TOKEN.as_bytes())));
        assert_eq!(lower.credential_id().len(), 64);
        assert_ne!(lower.credential_id(), upper.credential_id());
        assert_eq!(lower.authorization_value(), format!("Bearer {TOKEN}"));
        assert!(!format!("{lower:?}").contains(TOKEN));
    }

    #[test]
    fn mint_token_hex_is_lowercase_and_parses() {
        let token = mint_token_hex([0xab; 32]);
        assert_eq!(token, "ab".repeat(32));
        let parsed = parse_authorization(Some(&format!("Bearer {token}"))).unwrap();
        assert_eq!(parsed.token(), token);
    }

    #[test]
    fn expiry_is_inclusive_of_the_expiry_second() {
        let table = [
            (99, 100, Ok(())),
            (100, 100, Ok(())),
            (101, 100, Err(SessionDenial::Expired)),
            (i64::MIN, i64::MIN, Ok(())),
        ];
        for (now, expires_at, want) in table {
            assert_eq!(resolve_expiry(now, expires_at), want, "now {now} exp {expires_at}");
        }
    }

    #[test]
    fn denial_vocabularies_are_exact() {
        let table = [
            (
                SessionDenial::Absent,
                (401, "SessionAbsent", "a session credential is required: no Authorization Bearer header was present"),
                "session credential is absent: send Authorization: Bearer <session-credential>",
                -32001,
                "session_absent",
            ),
            (
                SessionDenial::Malformed,
                (400, "InvalidSession", "malformed Authorization header: expected a Bearer <64-hex-credential>"),
                "malformed Authorization header: expected Bearer <64-hex-credential>",
                -32600,
                "session_malformed",
            ),
            (
                SessionDenial::Unknown,
                (401, "SessionUnknown", "unknown session credential: no session matches this token"),
                "unknown session credential",
                -32001,
                "session_unknown",
            ),
            (
                SessionDenial::Expired,
                (401, "SessionExpired", "session credential has expired"),
                "session credential has expired",
                -32001,
                "session_expired",
            ),
        ];
        for (denial, rest, wire, code, text) in table {
            assert_eq!(denial.rest(), rest);
            assert_eq!(denial.wire_message(), wire);
            assert_eq!(denial.to_string(), wire);
            assert_eq!(denial.a2a_code(), code);
            assert_eq!(denial.code(), text);
            assert_eq!(SessionDenial::from_code(text), Some(denial));
        }
        assert_eq!(SessionDenial::from_code("Absent"), None);
    }

    /// A header assembled from the grammar's pieces, and whether the grammar accepts it:
    /// `[ \t]* Bearer [ \t]+ <64 hex> [ \t]*`, nothing else.
    #[derive(Debug, Clone)]
    struct Header {
        text: String,
        token: String,
        accepted: bool,
    }

    fn blanks(min: usize) -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(vec![' ', '\t']), min..4).prop_map(String::from_iter)
    }

    /// Separators the grammar does not know: they are part of a field, never between fields.
    fn foreign_space() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["\n", "\r", "\u{b}", "\u{c}", "\u{a0}", "\u{3000}", ","]).prop_map(String::from)
    }

    fn token() -> impl Strategy<Value = (String, bool)> {
        prop_oneof![
            4 => "[0-9a-fA-F]{64}".prop_map(|t| (t, true)),
            1 => "[0-9a-fA-F]{0,63}".prop_map(|t| (t, false)),
            1 => "[0-9a-fA-F]{65,80}".prop_map(|t| (t, false)),
            1 => ("[0-9a-f]{63}", "[g-zG-Z:=+/_-]", 0usize..64).prop_map(|(mut t, bad, at)| {
                t.insert_str(at, &bad);
                (t, false)
            }),
        ]
    }

    fn header() -> impl Strategy<Value = Header> {
        let scheme = prop_oneof![
            6 => Just(("Bearer".to_owned(), true)),
            1 => prop::sample::select(vec!["bearer", "BEARER", "Basic", "Bearer:", "Bearer\u{0}", "Token"])
                .prop_map(|s| (s.to_owned(), false)),
        ];
        let extra = prop::option::weighted(0.15, "[!-~]{1,8}");
        (blanks(0), scheme, prop_oneof![4 => blanks(1), 1 => foreign_space()], token(), blanks(0), extra).prop_map(
            |(lead, (scheme, scheme_ok), separator, (token, token_ok), tail, extra)| {
                let separated = separator.chars().all(|c| c == ' ' || c == '\t');
                let mut text = format!("{lead}{scheme}{separator}{token}{tail}");
                if let Some(extra) = &extra {
                    text.push_str(&format!(" {extra}"));
                }
                let accepted = scheme_ok && separated && token_ok && extra.is_none();
                Header { text, token, accepted }
            },
        )
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(512))]

        #[test]
        fn parsing_never_panics_and_only_an_empty_header_is_absent(text in "\\PC{0,80}|[ \t\r\nBearbcdef0-9]{0,80}") {
            match parse_authorization(Some(&text)) {
                Ok(credential) => {
                    prop_assert_eq!(credential.token().len(), TOKEN_HEX_LEN);
                    prop_assert!(text.contains(credential.token()));
                }
                Err(denial) => prop_assert_eq!(denial, if text.is_empty() { SessionDenial::Absent } else { SessionDenial::Malformed }),
            }
        }

        /// Exactly the grammar's headers are accepted, and the token comes back as presented.
        #[test]
        fn the_grammar_accepts_exactly_bearer_and_one_hex_token(header in header()) {
            match parse_authorization(Some(&header.text)) {
                Ok(credential) => {
                    prop_assert!(header.accepted, "accepted {:?}", header.text);
                    prop_assert_eq!(credential.token(), header.token.as_str());
                }
                Err(denial) => {
                    prop_assert!(!header.accepted, "refused {:?}", header.text);
                    prop_assert_eq!(denial, SessionDenial::Malformed);
                }
            }
        }

        /// A minted token survives the header it is sent in and keeps its identity.
        #[test]
        fn a_minted_token_round_trips_through_its_header(random in any::<[u8; 32]>()) {
            let credential = Credential::from_token(&mint_token_hex(random)).unwrap();
            let parsed = parse_authorization(Some(&credential.authorization_value())).unwrap();
            prop_assert_eq!(parsed.credential_id(), credential.credential_id());
            prop_assert!(parsed == credential);
            let shown = format!("{parsed:?}");
            prop_assert!(!shown.contains(credential.token()));
        }

        /// The constant-time comparison agrees with comparing the token bytes: tokens that
        /// differ anywhere, in any number of places or only in case, are different credentials.
        #[test]
        fn credentials_are_equal_exactly_when_their_tokens_are(
            token in "[0-9a-fA-F]{64}",
            flips in prop::collection::vec((0usize..64, "[0-9a-fA-F]"), 0..3),
        ) {
            let mut other = token.clone().into_bytes();
            for (at, digit) in &flips {
                other[*at] = digit.as_bytes()[0];
            }
            let other = String::from_utf8(other).unwrap();
            let (a, b) = (Credential::from_token(&token).unwrap(), Credential::from_token(&other).unwrap());
            prop_assert_eq!(a == b, token == other);
            prop_assert_eq!(b == a, token == other);
            prop_assert_eq!(a.credential_id() == b.credential_id(), token == other);
        }
    }
}
