//! The route table with Go 1.22 `ServeMux` semantics (reference-edge §1.4), as a pure function
//! from (method, escaped path, query) to a [`Resolution`], so every rule is a table test and the
//! whole thing can be property-tested for panics.
//!
//! Rules copied from the reference's mux: a GET pattern also serves HEAD; a path that matches
//! only under another method is 405 with a sorted `Allow`; no match is 404; a slash-less root
//! whose slash form matches the same method exactly is 301-redirected (query kept); a
//! non-canonical path (`//`, `/./`, `/../`) is 301-redirected to its cleaned form; a single
//! wildcard matches exactly one non-empty segment and a `{name...}` wildcard the (possibly
//! empty) remainder; segments are percent-decoded one by one, so `%2F` inside a `{ref}` is data.

use http::Method;

use crate::oauth::Endpoint;
use crate::query::unescape;

/// What a request is for, once routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    Health,
    Head,
    World,
    Object,
    ObjectsBySemanticId,
    LogEntry,
    LogPage,
    Registry,
    Commit,
    Receipt,
    /// `GET /v1/session`: the caller's session and its grants' spend (the explorer's).
    Session,
    /// `GET /v1/calls`: the log read as calls (the explorer's).
    Calls,
    /// `GET /ui/…`: the explorer's page and assets.
    Ui,
    AgentCard,
    /// `agent-card.json`: A2A 1.0's card with 0.3's fields.
    A2aCard,
    A2a,
    Mcp,
    Metrics,
    /// OAuth sign-in: discovery, registration, the approval page and the token endpoint.
    OAuth(Endpoint),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    Get,
    Post,
}

#[derive(Clone, Copy, Debug)]
enum Segment {
    Literal(&'static str),
    /// `{ref}`, `{index}`, `{id}`: one non-empty segment.
    One,
    /// `{name...}` or a trailing-slash subtree: the rest of the path, possibly empty.
    Rest,
}

struct Pattern {
    verb: Verb,
    segments: &'static [Segment],
    route: Route,
    /// The pattern as the reference registers it; also the metrics label.
    text: &'static str,
}

/// A pattern that serves GET (and so HEAD).
const fn get(text: &'static str, segments: &'static [Segment], route: Route) -> Pattern {
    Pattern { verb: Verb::Get, segments, route, text }
}

const fn post(text: &'static str, segments: &'static [Segment], route: Route) -> Pattern {
    Pattern { verb: Verb::Post, segments, route, text }
}

use Segment::{Literal as L, One, Rest};

const PATTERNS: &[Pattern] = &[
    get("GET /v1/health", &[L("v1"), L("health")], Route::Health),
    get("GET /v1/head", &[L("v1"), L("head")], Route::Head),
    get("GET /v1/worlds/{ref}", &[L("v1"), L("worlds"), One], Route::World),
    get(
        "GET /v1/objects/by-semantic-id/{name...}",
        &[L("v1"), L("objects"), L("by-semantic-id"), Rest],
        Route::ObjectsBySemanticId,
    ),
    get("GET /v1/objects/{ref}", &[L("v1"), L("objects"), One], Route::Object),
    get("GET /v1/log", &[L("v1"), L("log")], Route::LogPage),
    get("GET /v1/log/{index}", &[L("v1"), L("log"), One], Route::LogEntry),
    get("GET /v1/registry/{name...}", &[L("v1"), L("registry"), Rest], Route::Registry),
    post("POST /v1/commit", &[L("v1"), L("commit")], Route::Commit),
    get("GET /v1/receipts/{id}", &[L("v1"), L("receipts"), One], Route::Receipt),
    get("GET /v1/session", &[L("v1"), L("session")], Route::Session),
    get("GET /v1/calls", &[L("v1"), L("calls")], Route::Calls),
    get("GET /ui/", &[L("ui"), Rest], Route::Ui),
    get("GET /.well-known/agent.json", &[L(".well-known"), L("agent.json")], Route::AgentCard),
    get("GET /.well-known/agent-card.json", &[L(".well-known"), L("agent-card.json")], Route::A2aCard),
    post("POST /a2a/", &[L("a2a"), Rest], Route::A2a),
    post("POST /mcp/", &[L("mcp"), Rest], Route::Mcp),
    get("GET /metrics", &[L("metrics")], Route::Metrics),
    // `L("")` is the trailing slash: exactly `/mcp/`, with `/mcp` redirected to it.
    get(
        "GET /.well-known/oauth-protected-resource/mcp/",
        &[L(".well-known"), L("oauth-protected-resource"), L("mcp"), L("")],
        Route::OAuth(Endpoint::McpResource),
    ),
    get(
        "GET /.well-known/oauth-protected-resource",
        &[L(".well-known"), L("oauth-protected-resource")],
        Route::OAuth(Endpoint::RootResource),
    ),
    get(
        "GET /.well-known/oauth-authorization-server",
        &[L(".well-known"), L("oauth-authorization-server")],
        Route::OAuth(Endpoint::Server),
    ),
    post("POST /register", &[L("register")], Route::OAuth(Endpoint::Register)),
    get("GET /authorize", &[L("authorize")], Route::OAuth(Endpoint::Authorize)),
    get("GET /authorize/wait", &[L("authorize"), L("wait")], Route::OAuth(Endpoint::Wait)),
    post("POST /token", &[L("token")], Route::OAuth(Endpoint::Token)),
];

/// A routed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matched {
    pub route: Route,
    /// The matched pattern, e.g. `GET /v1/worlds/{ref}`.
    pub pattern: &'static str,
    /// The wildcard's decoded value (`""` for patterns without one).
    pub param: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    Matched(Matched),
    /// 301 to this location.
    Redirect(String),
    /// 405 with this `Allow` value.
    MethodNotAllowed(String),
    NotFound,
    /// The path holds a malformed percent-escape; Go's server refuses it before routing.
    BadRequest,
}

struct Found {
    matched: Matched,
    /// Go's `exactMatch`: false when a `Rest` wildcard consumed a non-empty remainder.
    exact: bool,
}

/// Routes one request. `path` is the request's escaped path, `query` its raw query.
pub fn resolve(method: &Method, path: &str, query: Option<&str>) -> Resolution {
    if unescape(path, false).is_none() {
        return Resolution::BadRequest;
    }
    let cleaned = clean_path(path);
    let found = find(Some(method), &cleaned);
    if !found.as_ref().is_some_and(|f| f.exact) && !cleaned.ends_with('/') {
        let slashed = format!("{cleaned}/");
        if find(Some(method), &slashed).is_some_and(|f| f.exact) {
            return Resolution::Redirect(with_query(slashed, query));
        }
    }
    if cleaned != path {
        return Resolution::Redirect(with_query(cleaned, query));
    }
    if let Some(found) = found {
        return Resolution::Matched(found.matched);
    }
    let mut allowed: Vec<&'static str> = Vec::new();
    let mut add_methods = |candidate: &str| {
        for pattern in PATTERNS {
            if match_segments(pattern, candidate).is_some() {
                match pattern.verb {
                    Verb::Get => allowed.extend(["GET", "HEAD"]),
                    Verb::Post => allowed.push("POST"),
                }
            }
        }
    };
    add_methods(&cleaned);
    if !cleaned.ends_with('/') {
        add_methods(&format!("{cleaned}/"));
    }
    allowed.sort_unstable();
    allowed.dedup();
    if allowed.is_empty() { Resolution::NotFound } else { Resolution::MethodNotAllowed(allowed.join(", ")) }
}

fn with_query(path: String, query: Option<&str>) -> String {
    match query {
        Some(query) if !query.is_empty() => format!("{path}?{query}"),
        _ => path,
    }
}

fn verb_serves(verb: Verb, method: &Method) -> bool {
    match verb {
        Verb::Get => method == Method::GET || method == Method::HEAD,
        Verb::Post => method == Method::POST,
    }
}

fn find(method: Option<&Method>, path: &str) -> Option<Found> {
    PATTERNS.iter().filter(|pattern| method.is_none_or(|m| verb_serves(pattern.verb, m))).find_map(|pattern| {
        let (param, exact) = match_segments(pattern, path)?;
        Some(Found { matched: Matched { route: pattern.route, pattern: pattern.text, param }, exact })
    })
}

fn decode_lossy(raw: &str) -> String {
    match unescape(raw, false) {
        Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        None => raw.to_owned(),
    }
}

/// Matches a cleaned, escaped path against one pattern: the wildcard's decoded value and
/// whether the match is exact.
fn match_segments(pattern: &Pattern, path: &str) -> Option<(String, bool)> {
    let rest_of_path = path.strip_prefix('/')?;
    let segments: Vec<&str> = rest_of_path.split('/').collect();
    let mut param = String::new();
    for (position, segment) in pattern.segments.iter().enumerate() {
        match segment {
            Segment::Literal(literal) => {
                let raw = segments.get(position)?;
                if decode_lossy(raw) != *literal {
                    return None;
                }
            }
            Segment::One => {
                let raw = segments.get(position)?;
                let value = decode_lossy(raw);
                // Go skips single wildcards for the trailing-slash segment, and its segment
                // decoder turns `%2F` alone into that same "/" segment.
                if raw.is_empty() || value == "/" {
                    return None;
                }
                param = value;
            }
            Segment::Rest => {
                let remainder = segments.get(position..)?;
                if remainder.is_empty() {
                    return None;
                }
                let joined = remainder.join("/");
                let exact = joined.is_empty();
                return Some((decode_lossy(&joined), exact));
            }
        }
    }
    (segments.len() == pattern.segments.len()).then_some((param, true))
}

/// Go's `cleanPath`: `path.Clean` on a rooted path, with a trailing slash put back.
pub fn clean_path(path: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                kept.pop();
            }
            segment => kept.push(segment),
        }
    }
    let mut cleaned = String::with_capacity(path.len() + 1);
    for segment in &kept {
        cleaned.push('/');
        cleaned.push_str(segment);
    }
    // An empty result is the root; otherwise a trailing slash is put back.
    if cleaned.is_empty() || path.ends_with('/') {
        cleaned.push('/');
    }
    cleaned
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn matched(route: Route, param: &str) -> Resolution {
        let found = PATTERNS.iter().find(|p| p.route == route).map(|p| p.text).unwrap_or("");
        Resolution::Matched(Matched { route, pattern: found, param: param.to_owned() })
    }

    fn route_of(resolution: &Resolution) -> Option<(Route, String)> {
        match resolution {
            Resolution::Matched(m) => Some((m.route, m.param.clone())),
            _ => None,
        }
    }

    #[test]
    fn routes_and_wildcards() {
        let get = Method::GET;
        type Row<'a> = (&'a Method, &'a str, Option<(Route, &'a str)>);
        let table: &[Row] = &[
            (&get, "/v1/health", Some((Route::Health, ""))),
            (&Method::HEAD, "/v1/health", Some((Route::Health, ""))),
            (&get, "/v1/head", Some((Route::Head, ""))),
            (&get, "/v1/worlds/abc", Some((Route::World, "abc"))),
            (&get, "/v1/worlds/a%2Fb", Some((Route::World, "a/b"))),
            (&get, "/v1/worlds/a%3Ab", Some((Route::World, "a:b"))),
            (&get, "/v1/objects/x", Some((Route::Object, "x"))),
            // Literal segments beat wildcards only where both could match; without the slash
            // `by-semantic-id` is an object ref (and then a 400), as the reference pins.
            (&get, "/v1/objects/by-semantic-id", Some((Route::Object, "by-semantic-id"))),
            (&get, "/v1/objects/by-semantic-id/", Some((Route::ObjectsBySemanticId, ""))),
            (&get, "/v1/objects/by-semantic-id/a/b%2Fc", Some((Route::ObjectsBySemanticId, "a/b/c"))),
            (&get, "/v1/objects/%62y-semantic-id/n", Some((Route::ObjectsBySemanticId, "n"))),
            (&get, "/v1/log", Some((Route::LogPage, ""))),
            (&get, "/v1/log/-1", Some((Route::LogEntry, "-1"))),
            (&get, "/v1/registry/", Some((Route::Registry, ""))),
            (
                &get,
                "/v1/registry/world/transition-registry/v1",
                Some((Route::Registry, "world/transition-registry/v1")),
            ),
            (&Method::POST, "/v1/commit", Some((Route::Commit, ""))),
            (&get, "/v1/receipts/rest:a", Some((Route::Receipt, "rest:a"))),
            (&get, "/.well-known/agent.json", Some((Route::AgentCard, ""))),
            (&get, "/.well-known/agent-card.json", Some((Route::A2aCard, ""))),
            (&Method::POST, "/a2a/", Some((Route::A2a, ""))),
            (&Method::POST, "/mcp/", Some((Route::Mcp, ""))),
            (&Method::POST, "/mcp/anything/else", Some((Route::Mcp, "anything/else"))),
            (&get, "/metrics", Some((Route::Metrics, ""))),
            (&get, "/.well-known/oauth-protected-resource/mcp/", Some((Route::OAuth(Endpoint::McpResource), ""))),
            (&get, "/.well-known/oauth-protected-resource", Some((Route::OAuth(Endpoint::RootResource), ""))),
            (&get, "/.well-known/oauth-authorization-server", Some((Route::OAuth(Endpoint::Server), ""))),
            (&Method::POST, "/register", Some((Route::OAuth(Endpoint::Register), ""))),
            (&get, "/authorize", Some((Route::OAuth(Endpoint::Authorize), ""))),
            (&get, "/authorize/wait", Some((Route::OAuth(Endpoint::Wait), ""))),
            (&Method::POST, "/token", Some((Route::OAuth(Endpoint::Token), ""))),
            (&get, "/.well-known/oauth-protected-resource/mcp/x", None),
        ];
        for (method, path, want) in table {
            let got = route_of(&resolve(method, path, None));
            let want = want.map(|(route, param)| (route, param.to_owned()));
            assert_eq!(got, want, "{method} {path}");
        }
    }

    #[test]
    fn not_found_method_not_allowed_and_redirects() {
        use Resolution::*;
        let table: &[(Method, &str, Option<&str>, Resolution)] = &[
            (Method::GET, "/", None, NotFound),
            (Method::GET, "/v1", None, NotFound),
            (Method::GET, "/v1/", None, NotFound),
            (Method::GET, "/v1/worlds/", None, NotFound),
            (Method::GET, "/v1/worlds", None, NotFound),
            (Method::GET, "/v1/worlds/a/b", None, NotFound),
            (Method::GET, "/v1/log/", None, NotFound),
            (Method::GET, "/v1/objects/", None, NotFound),
            (Method::GET, "/v1/worlds/%2F", None, NotFound),
            (Method::GET, "/V1/head", None, NotFound),
            (Method::GET, "/mcp/", None, MethodNotAllowed("POST".into())),
            (Method::DELETE, "/mcp/x", None, MethodNotAllowed("POST".into())),
            (Method::GET, "/mcp", None, MethodNotAllowed("POST".into())),
            (Method::GET, "/a2a/", None, MethodNotAllowed("POST".into())),
            (Method::GET, "/v1/commit", None, MethodNotAllowed("POST".into())),
            (Method::POST, "/v1/head", None, MethodNotAllowed("GET, HEAD".into())),
            (Method::POST, "/v1/objects/by-semantic-id/x", None, MethodNotAllowed("GET, HEAD".into())),
            (Method::PUT, "/.well-known/agent.json", None, MethodNotAllowed("GET, HEAD".into())),
            (Method::POST, "/v1/registry", None, MethodNotAllowed("GET, HEAD".into())),
            (Method::POST, "/mcp", None, Redirect("/mcp/".into())),
            (Method::POST, "/mcp", Some("a=1"), Redirect("/mcp/?a=1".into())),
            (Method::POST, "/mcp", Some(""), Redirect("/mcp/".into())),
            (Method::POST, "/a2a", None, Redirect("/a2a/".into())),
            (Method::GET, "/v1/registry", None, Redirect("/v1/registry/".into())),
            (Method::HEAD, "/v1/registry", Some("x=%20"), Redirect("/v1/registry/?x=%20".into())),
            (Method::GET, "/v1/objects/by-semantic-id/", None, matched(Route::ObjectsBySemanticId, "")),
            (Method::GET, "//v1/head", None, Redirect("/v1/head".into())),
            (Method::GET, "/v1/./head", Some("q"), Redirect("/v1/head?q".into())),
            (Method::GET, "/v1/x/../head", None, Redirect("/v1/head".into())),
            (Method::GET, "/v1/head/", None, NotFound),
            (Method::GET, "/nothing//", None, Redirect("/nothing/".into())),
            (Method::POST, "/mcp//", None, Redirect("/mcp/".into())),
            (Method::GET, "/v1/worlds/%zz", None, BadRequest),
            (Method::GET, "/v1/worlds/%", None, BadRequest),
            (
                Method::GET,
                "/.well-known/oauth-protected-resource/mcp",
                None,
                Redirect("/.well-known/oauth-protected-resource/mcp/".into()),
            ),
            (Method::GET, "/token", None, MethodNotAllowed("POST".into())),
            (Method::POST, "/authorize", None, MethodNotAllowed("GET, HEAD".into())),
        ];
        for (method, path, query, want) in table {
            assert_eq!(&resolve(method, path, *query), want, "{method} {path} {query:?}");
        }
    }

    #[test]
    fn clean_path_matches_go() {
        let table = [
            ("/", "/"),
            ("", "/"),
            ("//", "/"),
            ("/a//b", "/a/b"),
            ("/a/./b/", "/a/b/"),
            ("/a/../b", "/b"),
            ("/../a", "/a"),
            ("/a/b/..", "/a"),
            ("/a/b/../", "/a/"),
            ("/a/%2E%2E/b", "/a/%2E%2E/b"),
            ("/mcp/", "/mcp/"),
        ];
        for (input, want) in table {
            assert_eq!(clean_path(input), want, "{input:?}");
        }
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(512))]

        #[test]
        fn resolve_never_panics(
            path in "(/[a-zA-Z0-9%.:_~+-]{0,12}){0,6}/?",
            query in proptest::option::of("[a-z0-9=&%;+]{0,16}"),
            method in prop_oneof![
                Just(Method::GET), Just(Method::HEAD), Just(Method::POST),
                Just(Method::PUT), Just(Method::DELETE), Just(Method::OPTIONS),
            ],
        ) {
            let _ = resolve(&method, &path, query.as_deref());
        }

        #[test]
        fn resolve_never_panics_on_any_text(path in ".{0,48}") {
            let _ = resolve(&Method::GET, &path, Some(&path));
        }

        #[test]
        fn redirects_land_on_a_canonical_path(path in "(/[a-z.]{0,4}){0,5}/?") {
            if let Resolution::Redirect(location) = resolve(&Method::GET, &path, None) {
                prop_assert_eq!(clean_path(&location), location.clone());
                prop_assert!(!matches!(resolve(&Method::GET, &location, None), Resolution::Redirect(_)));
            }
        }
    }
}
