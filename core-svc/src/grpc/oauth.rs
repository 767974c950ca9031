//! `world.v1.OAuth`: sign-in's registration, approval and token steps, translated onto
//! [`crate::oauth`]. No request carries a credential; secrets in the messages (codes, refresh
//! tokens, verifiers, the page's handle) are never logged or recorded on a span.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use world_model::oauth::OAuthError;
use world_proto::v1 as pb;
use world_proto::v1::o_auth_server::OAuth;

use crate::Core;
use crate::oauth::{self, ApprovalView, AuthorizationRequest, Registration, TokenRequest};
use crate::session::{now_unix, random_bytes};

pub struct OAuthService {
    core: Arc<Core>,
}

impl OAuthService {
    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }
}

fn error(error: OAuthError) -> pb::OAuthError {
    pb::OAuthError { error: error.code.as_str().to_owned(), description: error.description }
}

fn approval_reply(view: Result<ApprovalView, OAuthError>) -> pb::ApprovalReply {
    use pb::approval_reply::Outcome;
    let outcome = match view {
        Ok(ApprovalView::Pending { request, approval_code, client_name, redirect_uri, expires_at }) => {
            Outcome::Pending(pb::PendingApproval { request, approval_code, client_name, redirect_uri, expires_at })
        }
        Ok(ApprovalView::Redirect(redirect)) => {
            let (code, failure) = match redirect.outcome {
                Ok(code) => (code, None),
                Err(failure) => (String::new(), Some(failure)),
            };
            Outcome::Redirect(pb::BrowserRedirect {
                redirect_uri: redirect.redirect_uri,
                state: redirect.state,
                code,
                error: failure.as_ref().map(|f| f.code.as_str().to_owned()).unwrap_or_default(),
                error_description: failure.map(|f| f.description).unwrap_or_default(),
            })
        }
        Ok(ApprovalView::Refused(refused)) | Err(refused) => Outcome::Refused(error(refused)),
    };
    pb::ApprovalReply { outcome: Some(outcome) }
}

#[tonic::async_trait]
impl OAuth for OAuthService {
    async fn register_client(
        &self,
        request: Request<pb::RegisterClientRequest>,
    ) -> Result<Response<pb::RegisterClientReply>, Status> {
        use pb::register_client_reply::Outcome;
        let request = request.into_inner();
        let registration = Registration {
            client_name: request.client_name,
            redirect_uris: request.redirect_uris,
            grant_types: request.grant_types,
            response_types: request.response_types,
            token_endpoint_auth_method: request.token_endpoint_auth_method,
        };
        let outcome = match oauth::register(&self.core.store, registration, now_unix(), &mut random_bytes).await {
            Ok(client) => Outcome::Client(pb::RegisteredClient {
                client_id: client.client_id,
                client_name: client.client_name,
                redirect_uris: client.redirect_uris,
                issued_at: client.created_at,
            }),
            Err(refused) => Outcome::Error(error(refused)),
        };
        Ok(Response::new(pb::RegisterClientReply { outcome: Some(outcome) }))
    }

    async fn start_approval(
        &self,
        request: Request<pb::StartApprovalRequest>,
    ) -> Result<Response<pb::ApprovalReply>, Status> {
        let request = request.into_inner();
        let request = AuthorizationRequest {
            client_id: request.client_id,
            redirect_uri: request.redirect_uri,
            response_type: request.response_type,
            state: request.state,
            code_challenge: request.code_challenge,
            code_challenge_method: request.code_challenge_method,
        };
        let view = oauth::start(&self.core.store, request, now_unix(), &mut random_bytes).await;
        Ok(Response::new(approval_reply(view)))
    }

    async fn await_approval(
        &self,
        request: Request<pb::AwaitApprovalRequest>,
    ) -> Result<Response<pb::ApprovalReply>, Status> {
        let handle = request.into_inner().request;
        let view = oauth::await_decision(&self.core.store, &handle, now_unix(), &mut random_bytes).await;
        Ok(Response::new(approval_reply(view)))
    }

    async fn exchange_token(
        &self,
        request: Request<pb::ExchangeTokenRequest>,
    ) -> Result<Response<pb::ExchangeTokenReply>, Status> {
        use pb::exchange_token_reply::Outcome;
        let request = request.into_inner();
        let request = TokenRequest {
            grant_type: request.grant_type,
            client_id: request.client_id,
            code: request.code,
            redirect_uri: request.redirect_uri,
            code_verifier: request.code_verifier,
            refresh_token: request.refresh_token,
        };
        let outcome = match oauth::exchange(&self.core.store, request, now_unix(), &mut random_bytes).await {
            Ok(issued) => {
                tracing::info!(credential_id = %issued.credential_id, "oauth: minted a session credential");
                Outcome::Token(pb::IssuedToken {
                    access_token: issued.access_token,
                    expires_in: issued.expires_in,
                    refresh_token: issued.refresh_token,
                })
            }
            Err(refused) => Outcome::Error(error(refused)),
        };
        Ok(Response::new(pb::ExchangeTokenReply { outcome: Some(outcome) }))
    }
}
