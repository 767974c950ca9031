//! `world.v1.OAuth`: sign-in's registration, approval and token steps, translated onto
//! [`crate::oauth`]. No request carries a credential; secrets in the messages (codes, refresh
//! tokens, verifiers, the page's handle) are never logged or recorded on a span.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use world_model::oauth::OAuthError;
use world_proto::Outcome;
use world_proto::v1 as pb;
use world_proto::v1::o_auth_server::OAuth;

use crate::Core;
use crate::oauth::{self, ApprovalView};
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

/// The one way a sign-in step's result becomes its reply: the value, or the refusal as the
/// reply's OAuth error.
fn reply<R: Outcome<Error = pb::OAuthError>>(result: Result<R::Value, OAuthError>) -> Result<Response<R>, Status> {
    Ok(Response::new(R::from_result(result.map_err(error))))
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
        let client = oauth::register(&self.core.store, request.into_inner(), now_unix(), &mut random_bytes).await;
        reply(client.map(|client| pb::RegisteredClient {
            client_id: client.client_id,
            client_name: client.client_name,
            redirect_uris: client.redirect_uris,
            issued_at: client.created_at,
        }))
    }

    async fn start_approval(
        &self,
        request: Request<pb::StartApprovalRequest>,
    ) -> Result<Response<pb::ApprovalReply>, Status> {
        let view = oauth::start(&self.core.store, request.into_inner(), now_unix(), &mut random_bytes).await;
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
        let issued = oauth::exchange(&self.core.store, request.into_inner(), now_unix(), &mut random_bytes).await;
        reply(issued.map(|issued| {
            tracing::info!(credential_id = %issued.credential_id, "oauth: minted a session credential");
            pb::IssuedToken {
                access_token: issued.access_token,
                expires_in: issued.expires_in,
                refresh_token: issued.refresh_token,
            }
        }))
    }
}
