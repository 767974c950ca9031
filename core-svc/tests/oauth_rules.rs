//! OAuth sign-in's rules on the core, against SQLite and PostgreSQL (`WORLD_TEST_POSTGRES_URL`,
//! as the store suite): an approval's code is handed out once and exchanged once with its
//! verifier, refresh tokens rotate and are single-use, a reuse ends every session of the
//! approval, revoking ends it too, and expiry is the clock's (the time is passed in).

mod common;

use common::{Fresh, both_backends, fresh_location};
use world_core::oauth::{self, ApprovalView, AuthorizationRequest, IssuedToken, Registration, TokenRequest};
use world_core::store::{Approval, OpenMode, Store};
use world_model::oauth::{OAuthErrorCode, s256_challenge};

const VERIFIER: &str = "a-verifier-of-the-rules-that-is-long-enough-for-pkce-0123456789";
const REDIRECT: &str = "http://127.0.0.1:9/callback";
const NOW: i64 = 1_800_000_000;

async fn fresh(backend: &str) -> (Store, Fresh) {
    let (location, guard) = fresh_location(backend).await;
    (Store::open(&location, OpenMode::CreateIfMissing).await.expect("open the store"), guard)
}

both_backends!(
    fresh;
    a_code_is_handed_out_once_and_exchanged_once,
    concurrent_exchanges_of_one_code_have_one_winner,
    refresh_tokens_rotate_and_a_reuse_ends_the_chain,
    revoking_one_session_or_the_episode_ends_the_chain,
    approvals_and_codes_expire,
);

fn random() -> impl FnMut() -> [u8; 32] + Send {
    let mut drawn = 0u8;
    move || {
        let mut bytes = [0u8; 32];
        rand::fill(&mut bytes);
        drawn = drawn.wrapping_add(1);
        bytes[0] = drawn;
        bytes
    }
}

async fn client(store: &Store) -> String {
    let registration =
        Registration { client_name: "Rules".into(), redirect_uris: vec![REDIRECT.into()], ..Registration::default() };
    oauth::register(store, registration, NOW, &mut random()).await.expect("registered").client_id
}

/// A pending approval of `client_id`: its request handle and approval code.
async fn pending(store: &Store, client_id: &str, now: i64) -> (String, String) {
    let request = AuthorizationRequest {
        client_id: client_id.into(),
        redirect_uri: REDIRECT.into(),
        response_type: "code".into(),
        state: Some("s".into()),
        code_challenge: s256_challenge(VERIFIER),
        code_challenge_method: "S256".into(),
    };
    match oauth::start(store, request, now, &mut random()).await.expect("started") {
        ApprovalView::Pending { request, approval_code, .. } => (request, approval_code),
        other => panic!("not pending: {other:?}"),
    }
}

async fn approve(store: &Store, approval_code: &str, now: i64) {
    let approval = oauth::pending_approval(store, approval_code, now).await.expect("pending");
    let decision = Approval {
        episode: "ep1".into(),
        grants_json: r#"[{"effect":"world.apply","scope":"world","budget":10,"expiresAt":0}]"#.into(),
        session_expires_at: now + 3600,
    };
    assert!(store.decide_oauth_approval(&approval.approval_id, Some(&decision), now).await.unwrap());
}

/// An approved sign-in's authorization code, as the page hands it to the browser.
async fn code(store: &Store, client_id: &str, now: i64) -> String {
    let (request, approval_code) = pending(store, client_id, now).await;
    approve(store, &approval_code, now).await;
    match oauth::await_decision(store, &request, now, &mut random()).await.expect("decided") {
        ApprovalView::Redirect(redirect) => {
            assert_eq!(redirect.state.as_deref(), Some("s"));
            redirect.outcome.expect("a code")
        }
        other => panic!("no redirect: {other:?}"),
    }
}

fn code_request(client_id: &str, code: &str, verifier: &str) -> TokenRequest {
    TokenRequest {
        grant_type: "authorization_code".into(),
        client_id: client_id.into(),
        code: code.into(),
        redirect_uri: REDIRECT.into(),
        code_verifier: verifier.into(),
        ..TokenRequest::default()
    }
}

fn refresh_request(client_id: &str, refresh_token: &str) -> TokenRequest {
    TokenRequest {
        grant_type: "refresh_token".into(),
        client_id: client_id.into(),
        refresh_token: refresh_token.into(),
        ..TokenRequest::default()
    }
}

async fn exchange(store: &Store, request: TokenRequest, now: i64) -> Result<IssuedToken, OAuthErrorCode> {
    oauth::exchange(store, request, now, &mut random()).await.map_err(|e| e.code)
}

async fn live_sessions(store: &Store) -> usize {
    store.list_sessions(None).await.unwrap().len()
}

async fn a_code_is_handed_out_once_and_exchanged_once(store: Store) {
    let client_id = client(&store).await;
    let (request, approval_code) = pending(&store, &client_id, NOW).await;
    // Waiting: the page shows the code derived from its handle.
    match oauth::await_decision(&store, &request, NOW, &mut random()).await.unwrap() {
        ApprovalView::Pending { approval_code: shown, client_name, .. } => {
            assert_eq!(shown, approval_code);
            assert_eq!(client_name, "Rules");
        }
        other => panic!("{other:?}"),
    }
    approve(&store, &approval_code, NOW).await;
    let code = match oauth::await_decision(&store, &request, NOW, &mut random()).await.unwrap() {
        ApprovalView::Redirect(redirect) => redirect.outcome.unwrap(),
        other => panic!("{other:?}"),
    };
    // The page asking again gets no second code.
    assert!(matches!(
        oauth::await_decision(&store, &request, NOW, &mut random()).await.unwrap(),
        ApprovalView::Refused(_)
    ));
    let wrong = "another-verifier-of-the-rules-that-is-long-enough-for-pkce-987654";
    assert_eq!(exchange(&store, code_request(&client_id, &code, wrong), NOW).await, Err(OAuthErrorCode::InvalidGrant));
    assert_eq!(live_sessions(&store).await, 0);
    let issued = exchange(&store, code_request(&client_id, &code, VERIFIER), NOW + 5).await.expect("exchanged");
    assert_eq!(issued.expires_in, 3595, "the session ends when the approval does");
    let session = store.session(&issued.credential_id).await.unwrap().expect("a session");
    assert_eq!((session.episode.as_str(), session.expires_at), ("ep1", NOW + 3600));
    assert!(session.grants_json.contains(&format!("\"expiresAt\":{}", NOW + 3600)));
    let origins = store.session_origins().await.unwrap();
    assert_eq!(origins[&issued.credential_id].client_name, "Rules");

    assert_eq!(
        exchange(&store, code_request(&client_id, &code, VERIFIER), NOW + 6).await,
        Err(OAuthErrorCode::InvalidGrant)
    );
    assert_eq!(live_sessions(&store).await, 0, "a reused code ends the session it minted");
    assert_eq!(
        exchange(&store, refresh_request(&client_id, &issued.refresh_token), NOW + 7).await,
        Err(OAuthErrorCode::InvalidGrant)
    );
}

async fn concurrent_exchanges_of_one_code_have_one_winner(store: Store) {
    let client_id = client(&store).await;
    let code = code(&store, &client_id, NOW).await;
    let (a, b) = tokio::join!(
        exchange(&store, code_request(&client_id, &code, VERIFIER), NOW),
        exchange(&store, code_request(&client_id, &code, VERIFIER), NOW),
    );
    assert!(a.is_ok() ^ b.is_ok(), "exactly one exchange wins: {a:?} {b:?}");
    // The loser saw a reused code: nothing of the sign-in lives on.
    assert_eq!(live_sessions(&store).await, 0);
}

async fn refresh_tokens_rotate_and_a_reuse_ends_the_chain(store: Store) {
    let client_id = client(&store).await;
    let code = code(&store, &client_id, NOW).await;
    let first = exchange(&store, code_request(&client_id, &code, VERIFIER), NOW).await.unwrap();
    let other = client(&store).await;
    assert_eq!(
        exchange(&store, refresh_request(&other, &first.refresh_token), NOW).await,
        Err(OAuthErrorCode::InvalidGrant),
        "another client's refresh token"
    );
    let second = exchange(&store, refresh_request(&client_id, &first.refresh_token), NOW + 100).await.unwrap();
    assert_eq!(second.expires_in, 3500);
    assert_ne!(second.access_token, first.access_token);
    assert_eq!(live_sessions(&store).await, 2, "the first access token lives until its own expiry");
    let third = exchange(&store, refresh_request(&client_id, &second.refresh_token), NOW + 200).await.unwrap();
    assert_eq!(live_sessions(&store).await, 3);
    assert_eq!(
        exchange(&store, refresh_request(&client_id, &first.refresh_token), NOW + 300).await,
        Err(OAuthErrorCode::InvalidGrant)
    );
    assert_eq!(live_sessions(&store).await, 0);
    assert_eq!(
        exchange(&store, refresh_request(&client_id, &third.refresh_token), NOW + 301).await,
        Err(OAuthErrorCode::InvalidGrant)
    );
    assert_eq!(exchange(&store, refresh_request(&client_id, "unknown"), NOW).await, Err(OAuthErrorCode::InvalidGrant));
    let mut unsupported = refresh_request(&client_id, "x");
    unsupported.grant_type = "password".into();
    assert_eq!(exchange(&store, unsupported, NOW).await, Err(OAuthErrorCode::UnsupportedGrantType));
}

async fn revoking_one_session_or_the_episode_ends_the_chain(store: Store) {
    let client_id = client(&store).await;
    let code = code(&store, &client_id, NOW).await;
    let first = exchange(&store, code_request(&client_id, &code, VERIFIER), NOW).await.unwrap();
    let second = exchange(&store, refresh_request(&client_id, &first.refresh_token), NOW).await.unwrap();
    let mut revoked = store.revoke_session(&first.credential_id, NOW).await.unwrap();
    revoked.sort();
    let mut expected = vec![first.credential_id.clone(), second.credential_id.clone()];
    expected.sort();
    assert_eq!(revoked, expected);
    assert_eq!(
        exchange(&store, refresh_request(&client_id, &second.refresh_token), NOW).await,
        Err(OAuthErrorCode::InvalidGrant)
    );

    let code = self::code(&store, &client_id, NOW).await;
    let third = exchange(&store, code_request(&client_id, &code, VERIFIER), NOW).await.unwrap();
    assert_eq!(store.revoke_episode("ep1", NOW).await.unwrap(), vec![third.credential_id.clone()]);
    assert_eq!(
        exchange(&store, refresh_request(&client_id, &third.refresh_token), NOW).await,
        Err(OAuthErrorCode::InvalidGrant)
    );
    assert_eq!(live_sessions(&store).await, 0);
}

async fn approvals_and_codes_expire(store: Store) {
    let client_id = client(&store).await;
    // Nobody decides within ten minutes: the page sends access_denied, approving is refused.
    let (request, approval_code) = pending(&store, &client_id, NOW).await;
    let later = NOW + world_model::oauth::APPROVAL_TTL + 1;
    assert!(matches!(
        oauth::pending_approval(&store, &approval_code, later).await,
        Err(oauth::DecideError::Expired(_))
    ));
    match oauth::await_decision(&store, &request, later, &mut random()).await.unwrap() {
        ApprovalView::Redirect(redirect) => {
            assert_eq!(redirect.outcome.unwrap_err().code, OAuthErrorCode::AccessDenied)
        }
        other => panic!("{other:?}"),
    }
    // A code not exchanged in time is refused and mints nothing.
    let code = code(&store, &client_id, NOW).await;
    let late = NOW + world_model::oauth::CODE_TTL + 1;
    assert_eq!(
        exchange(&store, code_request(&client_id, &code, VERIFIER), late).await,
        Err(OAuthErrorCode::InvalidGrant)
    );
    // A refresh after the approval's expiry mints nothing.
    let code = self::code(&store, &client_id, NOW).await;
    let issued = exchange(&store, code_request(&client_id, &code, VERIFIER), NOW).await.unwrap();
    assert_eq!(
        exchange(&store, refresh_request(&client_id, &issued.refresh_token), NOW + 3600).await,
        Err(OAuthErrorCode::InvalidGrant)
    );
    assert_eq!(live_sessions(&store).await, 1);
}
