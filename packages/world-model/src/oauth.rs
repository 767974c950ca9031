//! The rules of OAuth sign-in (OAuth 2.1 for MCP clients): which redirect URIs a public client
//! may register and use, the PKCE S256 check, the approval code the operator types, how the
//! secrets are written and stored, and the error codes with their HTTP statuses. The core
//! decides with these; the edge only renders.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// A pending approval lives this long (seconds) before the operator must have decided.
pub const APPROVAL_TTL: i64 = 600;
/// An authorization code must be exchanged within this many seconds of reaching the browser.
pub const CODE_TTL: i64 = 300;
/// The longest redirect URI a client may register.
pub const MAX_REDIRECT_URI_LEN: usize = 2000;
/// At most this many redirect URIs per client.
pub const MAX_REDIRECT_URIS: usize = 10;
/// The longest client name kept (longer names are refused).
pub const MAX_CLIENT_NAME_LEN: usize = 200;
/// The longest `state` a client may send.
pub const MAX_STATE_LEN: usize = 1000;
/// The name shown for a client that registered without one.
pub const UNNAMED_CLIENT: &str = "an unnamed client";

/// The approval code's alphabet: Crockford's base32 (no I, L, O, U), read aloud without doubt.
const APPROVAL_ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// Characters in an approval code, shown as two groups of four.
const APPROVAL_LEN: usize = 8;

/// An error code of RFC 6749 (§4.1.2.1, §5.2) and RFC 7591 (§3.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OAuthErrorCode {
    InvalidRequest,
    InvalidClient,
    InvalidGrant,
    UnauthorizedClient,
    UnsupportedGrantType,
    UnsupportedResponseType,
    AccessDenied,
    InvalidRedirectUri,
    InvalidClientMetadata,
    ServerError,
    TemporarilyUnavailable,
}

impl OAuthErrorCode {
    pub const ALL: [OAuthErrorCode; 11] = [
        Self::InvalidRequest,
        Self::InvalidClient,
        Self::InvalidGrant,
        Self::UnauthorizedClient,
        Self::UnsupportedGrantType,
        Self::UnsupportedResponseType,
        Self::AccessDenied,
        Self::InvalidRedirectUri,
        Self::InvalidClientMetadata,
        Self::ServerError,
        Self::TemporarilyUnavailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::InvalidClient => "invalid_client",
            Self::InvalidGrant => "invalid_grant",
            Self::UnauthorizedClient => "unauthorized_client",
            Self::UnsupportedGrantType => "unsupported_grant_type",
            Self::UnsupportedResponseType => "unsupported_response_type",
            Self::AccessDenied => "access_denied",
            Self::InvalidRedirectUri => "invalid_redirect_uri",
            Self::InvalidClientMetadata => "invalid_client_metadata",
            Self::ServerError => "server_error",
            Self::TemporarilyUnavailable => "temporarily_unavailable",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|code| code.as_str() == text)
    }

    /// The status of a JSON error body (registration and token endpoints): 401 for a client
    /// that cannot be identified (RFC 6749 §5.2), 500/503 for the server's own trouble, else 400.
    pub fn http_status(self) -> u16 {
        match self {
            Self::InvalidClient => 401,
            Self::ServerError => 500,
            Self::TemporarilyUnavailable => 503,
            _ => 400,
        }
    }
}

/// An OAuth refusal: the code and a sentence saying what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthError {
    pub code: OAuthErrorCode,
    pub description: String,
}

impl OAuthError {
    pub fn new(code: OAuthErrorCode, description: impl Into<String>) -> Self {
        Self { code, description: description.into() }
    }
}

/// Why a redirect URI is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RedirectUriError {
    #[error("redirect URI is longer than {MAX_REDIRECT_URI_LEN} characters")]
    TooLong,
    #[error("redirect URI {0:?} holds characters other than visible ASCII; percent-encode them")]
    Unprintable(String),
    #[error(
        "redirect URI {0:?} is neither https nor http on a loopback host (127.0.0.1, [::1] or localhost, any port)"
    )]
    NotAllowed(String),
    #[error("redirect URI {0:?} has a fragment, which OAuth forbids")]
    Fragment(String),
    #[error("redirect URI {0:?} carries user information before its host")]
    UserInfo(String),
    #[error("redirect URI {0:?} has no valid host and port")]
    BadAuthority(String),
}

/// A redirect URI a public client may register: `https` anywhere, or `http` on a loopback host
/// (RFC 8252 §7.3), absolute, without fragment or user information.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedirectUri {
    text: String,
    /// Set for `http` on a loopback IP literal, whose port may vary at request time.
    loopback_ip: bool,
    /// The authority without its port (loopback only) and everything after the authority.
    host: String,
    rest: String,
}

impl RedirectUri {
    pub fn parse(text: &str) -> Result<Self, RedirectUriError> {
        if text.len() > MAX_REDIRECT_URI_LEN {
            return Err(RedirectUriError::TooLong);
        }
        if !text.chars().all(|c| c.is_ascii_graphic()) {
            return Err(RedirectUriError::Unprintable(text.to_owned()));
        }
        if text.contains('#') {
            return Err(RedirectUriError::Fragment(text.to_owned()));
        }
        let not_allowed = || RedirectUriError::NotAllowed(text.to_owned());
        let (scheme, after) = text.split_once("://").ok_or_else(not_allowed)?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "https" => true,
            "http" => false,
            _ => return Err(not_allowed()),
        };
        let end = after.find(['/', '?']).unwrap_or(after.len());
        let (authority, rest) = after.split_at(end);
        if authority.contains('@') {
            return Err(RedirectUriError::UserInfo(text.to_owned()));
        }
        let bad_authority = || RedirectUriError::BadAuthority(text.to_owned());
        let (host, port) = split_port(authority).ok_or_else(bad_authority)?;
        if let Some(port) = port
            && !(port.parse::<u16>().is_ok_and(|p| p > 0) && port.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(bad_authority());
        }
        let host_lower = host.to_ascii_lowercase();
        let loopback_ip = matches!(host_lower.as_str(), "127.0.0.1" | "[::1]");
        if !(https || loopback_ip || host_lower == "localhost") {
            return Err(not_allowed());
        }
        if host.is_empty() || !host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._[]:".contains(&b)) {
            return Err(bad_authority());
        }
        Ok(Self {
            text: text.to_owned(),
            loopback_ip: !https && loopback_ip,
            host: format!("{}://{host_lower}", if https { "https" } else { "http" }),
            rest: rest.to_owned(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether a request's `redirect_uri` names this registered one: the same text, or for a
    /// loopback IP the same but for the port, which a native client picks when it starts
    /// listening (RFC 8252 §7.3).
    pub fn admits(&self, requested: &str) -> bool {
        if requested == self.text {
            return true;
        }
        if !self.loopback_ip {
            return false;
        }
        RedirectUri::parse(requested)
            .is_ok_and(|other| other.loopback_ip && other.host == self.host && other.rest == self.rest)
    }
}

/// `host[:port]`, a bracketed IPv6 host kept with its brackets; `None` when malformed.
fn split_port(authority: &str) -> Option<(&str, Option<&str>)> {
    if authority.starts_with('[') {
        let close = authority.find(']')?;
        let (host, after) = authority.split_at(close + 1);
        return match after {
            "" => Some((host, None)),
            _ => after.strip_prefix(':').map(|port| (host, Some(port))),
        };
    }
    match authority.split_once(':') {
        Some((host, port)) => Some((host, Some(port))),
        None => Some((authority, None)),
    }
}

/// Where an authorization response goes: `redirect_uri` with `params` added to its query,
/// each form-encoded (RFC 6749 §4.1.2).
pub fn redirect_with(redirect_uri: &str, params: &[(&str, &str)]) -> String {
    let mut url = redirect_uri.to_owned();
    let mut separator =
        if redirect_uri.contains('?') { if redirect_uri.ends_with(['?', '&']) { "" } else { "&" } } else { "?" };
    for (name, value) in params {
        url.push_str(separator);
        url.push_str(&form_encode(name));
        url.push('=');
        url.push_str(&form_encode(value));
        separator = "&";
    }
    url
}

/// `application/x-www-form-urlencoded` encoding of one name or value.
pub fn form_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(byte as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// Whether a PKCE `code_verifier` is well formed: 43 to 128 unreserved characters (RFC 7636 §4.1).
pub fn verifier_is_well_formed(verifier: &str) -> bool {
    (43..=128).contains(&verifier.len())
        && verifier.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// Whether an S256 `code_challenge` is well formed: the unpadded base64url of 32 bytes.
pub fn challenge_is_well_formed(challenge: &str) -> bool {
    challenge.len() == 43 && URL_SAFE_NO_PAD.decode(challenge).is_ok_and(|bytes| bytes.len() == 32)
}

/// The S256 challenge of a verifier: `BASE64URL(SHA256(verifier))` (RFC 7636 §4.2).
pub fn s256_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Whether `verifier` is well formed and answers `challenge`.
pub fn verifier_matches(verifier: &str, challenge: &str) -> bool {
    verifier_is_well_formed(verifier) && s256_challenge(verifier) == challenge
}

/// A new secret (authorization code, refresh token, the page's request handle) from 32 random
/// bytes: unpadded base64url, 43 characters.
pub fn secret_text(random: [u8; 32]) -> String {
    URL_SAFE_NO_PAD.encode(random)
}

/// What the store keeps of a secret: the hex sha256 of its text.
pub fn secret_digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The approval code the page shows for a request handle, `XXXX-XXXX`. It is derived from the
/// handle, so every edge shows the same code for the same request while the store keeps
/// neither in the clear; knowing the code reveals nothing of the handle.
pub fn approval_code_for(request: &str) -> String {
    let digest = Sha256::new().chain_update(b"world approval code\0").chain_update(request.as_bytes()).finalize();
    let mut code = String::with_capacity(APPROVAL_LEN + 1);
    // 8 characters of 5 bits from the first 5 bytes.
    let bits = digest[..5].iter().fold(0u64, |acc, b| acc << 8 | u64::from(*b));
    for i in 0..APPROVAL_LEN {
        if i == APPROVAL_LEN / 2 {
            code.push('-');
        }
        let index = (bits >> (5 * (APPROVAL_LEN - 1 - i))) & 31;
        code.push(APPROVAL_ALPHABET[index as usize] as char);
    }
    code
}

/// An approval code as the operator typed it, in its canonical form (upper case, no dash or
/// spaces; `O` read as 0, `I` and `L` as 1), or `None` when it cannot be one.
pub fn normalize_approval_code(typed: &str) -> Option<String> {
    let mut code = String::with_capacity(APPROVAL_LEN);
    for c in typed.chars().filter(|c| !matches!(c, '-' | ' ')) {
        let c = match c.to_ascii_uppercase() {
            'O' => '0',
            'I' | 'L' => '1',
            c => c,
        };
        if !c.is_ascii() || !APPROVAL_ALPHABET.contains(&(c as u8)) {
            return None;
        }
        code.push(c);
    }
    (code.len() == APPROVAL_LEN).then_some(code)
}

/// The store's key for an approval code: the digest of its canonical form.
pub fn approval_code_digest(typed: &str) -> Option<String> {
    normalize_approval_code(typed).map(|code| secret_digest(&code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_are_https_or_loopback_http() {
        let allowed = [
            "https://claude.ai/api/mcp/auth_callback",
            "https://vscode.dev/redirect",
            "http://127.0.0.1:33418/",
            "http://127.0.0.1/callback",
            "http://[::1]:8080/cb?x=1",
            "http://localhost:6274/oauth/callback",
            "HTTP://LOCALHOST:1/",
            "https://example.com:8443",
        ];
        for uri in allowed {
            assert_eq!(RedirectUri::parse(uri).map(|u| u.as_str().to_owned()), Ok(uri.to_owned()), "{uri}");
        }
        type Refusal = fn(String) -> RedirectUriError;
        let refused: &[(&str, Refusal)] = &[
            ("http://example.com/cb", RedirectUriError::NotAllowed),
            ("http://127.0.0.2/cb", RedirectUriError::NotAllowed),
            ("http://localhost.evil.com/cb", RedirectUriError::NotAllowed),
            ("cursor://anysphere.cursor-retrieval/oauth", RedirectUriError::NotAllowed),
            ("javascript:alert(1)", RedirectUriError::NotAllowed),
            ("/relative", RedirectUriError::NotAllowed),
            ("https://example.com/cb#frag", RedirectUriError::Fragment),
            ("https://user@example.com/cb", RedirectUriError::UserInfo),
            ("http://localhost@evil.com/", RedirectUriError::UserInfo),
            ("http://127.0.0.1:0/", RedirectUriError::BadAuthority),
            ("http://127.0.0.1:99999/", RedirectUriError::BadAuthority),
            ("http://127.0.0.1:+80/", RedirectUriError::BadAuthority),
            ("https:///path", RedirectUriError::BadAuthority),
            ("https://exa mple.com/", RedirectUriError::Unprintable),
            ("https://example.com/\n", RedirectUriError::Unprintable),
            ("https://example.com/caf\u{e9}", RedirectUriError::Unprintable),
        ];
        for (uri, error) in refused {
            assert_eq!(RedirectUri::parse(uri), Err(error((*uri).to_owned())), "{uri}");
        }
        assert_eq!(RedirectUri::parse(&format!("https://a.b/{}", "x".repeat(2000))), Err(RedirectUriError::TooLong));
    }

    #[test]
    fn a_loopback_ip_redirect_admits_any_port_and_nothing_else_varies() {
        let registered = RedirectUri::parse("http://127.0.0.1:33418/callback").unwrap();
        assert!(registered.admits("http://127.0.0.1:33418/callback"));
        assert!(registered.admits("http://127.0.0.1:50000/callback"));
        assert!(registered.admits("http://127.0.0.1/callback"));
        assert!(!registered.admits("http://127.0.0.1:50000/other"));
        assert!(!registered.admits("http://[::1]:33418/callback"));
        assert!(!registered.admits("http://localhost:33418/callback"));
        let named = RedirectUri::parse("http://localhost:33418/callback").unwrap();
        assert!(!named.admits("http://localhost:1234/callback"), "a name is not an IP literal (RFC 8252 §8.3)");
        let https = RedirectUri::parse("https://claude.ai/cb").unwrap();
        assert!(https.admits("https://claude.ai/cb"));
        assert!(!https.admits("https://claude.ai:444/cb") && !https.admits("https://claude.ai/cb?x"));
    }

    #[test]
    fn pkce_s256_follows_rfc_7636() {
        // RFC 7636 appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert_eq!(s256_challenge(verifier), challenge);
        assert!(challenge_is_well_formed(challenge));
        assert!(verifier_matches(verifier, challenge));
        assert!(!verifier_matches("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXj", challenge));
        assert!(!verifier_matches(challenge, challenge));
        assert!(!verifier_is_well_formed("short"));
        assert!(!verifier_is_well_formed(&"a".repeat(129)));
        assert!(!verifier_is_well_formed(&format!("{}+", "a".repeat(50))));
        assert!(verifier_is_well_formed(&"a~._-".repeat(20)));
        assert!(!challenge_is_well_formed(verifier.trim_end_matches('k')));
        assert!(!challenge_is_well_formed("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw+cM"));
    }

    #[test]
    fn approval_codes_are_derived_typed_loosely_and_stored_hashed() {
        let code = approval_code_for("handle");
        assert_eq!(code, approval_code_for("handle"));
        assert_ne!(code, approval_code_for("handle2"));
        assert_eq!(code.len(), 9);
        assert_eq!(&code[4..5], "-");
        let canonical = code.replace('-', "");
        assert_eq!(normalize_approval_code(&code).as_deref(), Some(canonical.as_str()));
        assert_eq!(normalize_approval_code(&code.to_lowercase()).as_deref(), Some(canonical.as_str()));
        assert_eq!(normalize_approval_code("ab cd-ef gh").as_deref(), Some("ABCDEFGH"));
        assert_eq!(normalize_approval_code("OIL0-2345").as_deref(), Some("01102345"));
        for bad in ["", "ABCD-EFG", "ABCD-EFGHJ", "ABCD-EFGU", "ABCD_EFGH", "ÄBCD-EFGH"] {
            assert_eq!(normalize_approval_code(bad), None, "{bad:?}");
        }
        assert_eq!(approval_code_digest("abcd-efgh"), Some(secret_digest("ABCDEFGH")));
    }

    #[test]
    fn secrets_are_43_character_base64url_and_kept_as_sha256() {
        let secret = secret_text([7; 32]);
        assert_eq!(secret.len(), 43);
        assert!(secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(secret_digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn authorization_responses_extend_the_redirect_uri_query() {
        assert_eq!(
            redirect_with("http://127.0.0.1:1/cb", &[("code", "a-b_c"), ("state", "x y&z"), ("iss", "http://h:1")]),
            "http://127.0.0.1:1/cb?code=a-b_c&state=x+y%26z&iss=http%3A%2F%2Fh%3A1"
        );
        assert_eq!(
            redirect_with("https://h/cb?keep=1", &[("error", "access_denied")]),
            "https://h/cb?keep=1&error=access_denied"
        );
        assert_eq!(redirect_with("https://h/cb?", &[("a", "1")]), "https://h/cb?a=1");
    }

    #[test]
    fn error_codes_round_trip_and_carry_their_status() {
        for code in OAuthErrorCode::ALL {
            assert_eq!(OAuthErrorCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(OAuthErrorCode::InvalidClient.http_status(), 401);
        assert_eq!(OAuthErrorCode::InvalidGrant.http_status(), 400);
        assert_eq!(OAuthErrorCode::TemporarilyUnavailable.http_status(), 503);
        assert_eq!(OAuthErrorCode::parse("nope"), None);
    }
}
