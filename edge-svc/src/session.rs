//! The caller's credential as the edge handles it: read once from `Authorization` (no other
//! header is consulted, reference-edge §2.1), shape-checked with world-model's grammar, and
//! forwarded verbatim to the core, which alone decides unknown and expired.
//!
//! The shape check runs here as well as in the core so that absent and malformed credentials
//! — the bulk of hostile traffic — are answered without a round trip, and so that `/v1`
//! routes can refuse them before validating anything else. It is the same pure function the
//! core applies, so the two can never disagree.
//!
//! Past the shape check, a request's session is whatever the core says: a call's invocation
//! resolves it as it runs, so a request only asks for an admission when no call of it reached
//! the core ([`Verdict`]).

use std::future::Future;
use std::sync::Mutex;

use http::HeaderMap;
use http::header::AUTHORIZATION;
use world_model::{Failure, SessionDenial, parse_authorization};

/// An `Authorization` value that passed the shape check, to be sent as `authorization`
/// metadata exactly as the caller wrote it.
#[derive(Clone, PartialEq, Eq)]
pub struct Forwarded(String);

impl Forwarded {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

// The value carries the bearer secret; keep it out of logs and panics.
impl std::fmt::Debug for Forwarded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Forwarded(<credential>)")
    }
}

/// The first `Authorization` header (Go's `Header.Get`), shape-checked.
pub fn precheck(headers: &HeaderMap) -> Result<Forwarded, SessionDenial> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Err(SessionDenial::Absent);
    };
    if value.is_empty() {
        return Err(SessionDenial::Absent);
    }
    // A value that is not visible ASCII cannot be `Bearer <64 hex>`.
    let text = value.to_str().map_err(|_| SessionDenial::Malformed)?;
    parse_authorization(Some(text))?;
    Ok(Forwarded(text.to_owned()))
}

/// What one request has learnt of its session from the core. The session is checked right after
/// `Authorization`, before anything else about the request is answered; the core checks it as
/// it runs each call, so the request's answer stands once a call was answered with anything
/// but a session refusal, and otherwise waits for an admission. A session refusal, however it
/// was learnt, answers the whole request in place of anything else.
pub struct Verdict<E> {
    heard: Mutex<Heard<E>>,
}

enum Heard<E> {
    Nothing,
    Live,
    Refused(E),
}

impl<E: Clone> Default for Verdict<E> {
    fn default() -> Self {
        Verdict { heard: Mutex::new(Heard::Nothing) }
    }
}

impl<E: Clone> Verdict<E> {
    /// Records the core's answer to one of the request's calls: `Some` when it refused the
    /// session, `None` when it answered anything else.
    pub fn heard(&self, refusal: Option<E>) {
        let mut heard = self.heard.lock().unwrap_or_else(|p| p.into_inner());
        *heard = match refusal {
            Some(refusal) => Heard::Refused(refusal),
            None if matches!(*heard, Heard::Refused(_)) => return,
            None => Heard::Live,
        };
    }

    /// The session refusal that answers the request, if any: the one heard, or, when the core
    /// has not been asked yet, what `admit` answers now.
    pub async fn refusal<F>(&self, admit: impl FnOnce() -> F) -> Option<E>
    where
        F: Future<Output = Result<(), E>>,
    {
        match &*self.heard.lock().unwrap_or_else(|p| p.into_inner()) {
            Heard::Nothing => {}
            Heard::Live => return None,
            Heard::Refused(refusal) => return Some(refusal.clone()),
        }
        let refusal = admit().await.err();
        self.heard(refusal.clone());
        refusal
    }
}

/// Whether a failure the core answered a call with is a session refusal.
pub fn refuses_session(failure: &Failure) -> bool {
    failure.code.session_denial().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    const TOKEN: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    fn headers(values: &[&[u8]]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append(AUTHORIZATION, HeaderValue::from_bytes(value).unwrap());
        }
        map
    }

    #[test]
    fn precheck_table() {
        let bearer = format!("Bearer {TOKEN}");
        let tabbed = format!("Bearer\t{TOKEN}");
        let upper = format!("Bearer {}", TOKEN.to_ascii_uppercase());
        type Row<'a> = (Vec<&'a [u8]>, Result<&'a str, SessionDenial>);
        let table: Vec<Row> = vec![
            (vec![], Err(SessionDenial::Absent)),
            (vec![b""], Err(SessionDenial::Absent)),
            (vec![b"Bearer"], Err(SessionDenial::Malformed)),
            (vec![b"Bearer \xff"], Err(SessionDenial::Malformed)),
            (vec![b"Basic abc"], Err(SessionDenial::Malformed)),
            (vec![bearer.as_bytes()], Ok(bearer.as_str())),
            (vec![tabbed.as_bytes()], Ok(tabbed.as_str())),
            // Upper case passes the shape check; the core answers it as unknown.
            (vec![upper.as_bytes()], Ok(upper.as_str())),
            // Only the first header counts, as with Go's Header.Get.
            (vec![b"x", bearer.as_bytes()], Err(SessionDenial::Malformed)),
            (vec![bearer.as_bytes(), b"x"], Ok(bearer.as_str())),
        ];
        for (values, want) in table {
            let got = precheck(&headers(&values));
            assert_eq!(got.as_ref().map(Forwarded::as_str).map_err(|d| *d), want, "{values:?}");
        }
        assert!(!format!("{:?}", precheck(&headers(&[bearer.as_bytes()]))).contains(TOKEN));
    }

    /// A header value's bytes: mostly the grammar's own characters, now and then bytes no
    /// token holds (obs-text, visible punctuation).
    fn header_bytes() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let token = proptest::string::string_regex("[0-9a-fA-F]{62,66}").unwrap().prop_map(String::into_bytes);
        let byte = prop_oneof![
            4 => prop::sample::select(b" \tBearer0123456789abcdefABCDEF".to_vec()),
            1 => 0x21u8..0x7f,
            1 => 0x80u8..=0xff,
        ];
        prop_oneof![
            2 => (prop::sample::select(vec![&b"Bearer "[..], b"Bearer\t", b" Bearer  ", b"bearer ", b""]), token)
                .prop_map(|(scheme, token)| [scheme, &token].concat()),
            1 => prop::collection::vec(byte, 0..80),
        ]
    }

    proptest::proptest! {
        #![proptest_config(crate::fuzzing::config(512))]

        /// Whatever the headers' bytes, the first header alone decides, by world-model's
        /// grammar; a credential is forwarded byte for byte as sent.
        #[test]
        fn the_first_header_decides_by_the_shared_grammar(values in proptest::collection::vec(header_bytes(), 0..3)) {
            let Ok(map) = values.iter().map(|v| HeaderValue::from_bytes(v)).collect::<Result<Vec<_>, _>>() else {
                return Ok(());
            };
            let mut headers = HeaderMap::new();
            for value in map {
                headers.append(AUTHORIZATION, value);
            }
            let want = match values.first() {
                None => Err(SessionDenial::Absent),
                Some(first) if first.is_empty() => Err(SessionDenial::Absent),
                Some(first) => match std::str::from_utf8(first) {
                    Ok(text) if first.iter().all(|b| *b == b'\t' || (0x20..0x7f).contains(b)) => {
                        parse_authorization(Some(text)).map(|_| text)
                    }
                    _ => Err(SessionDenial::Malformed),
                },
            };
            let got = precheck(&headers);
            proptest::prop_assert_eq!(got.as_ref().map(Forwarded::as_str).map_err(|d| *d), want);
        }
    }
}
