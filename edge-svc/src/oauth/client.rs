//! The core's `world.v1.OAuth` calls. None carries a credential. A call that may have reached a
//! core is never repeated here: a token exchange sent twice would look like a reused code and
//! end the sign-in it was meant to complete.

use world_model::Failure;
use world_proto::Outcome as _;
use world_proto::v1 as pb;
use world_proto::v1::o_auth_client::OAuthClient;

use crate::core::{CoreClient, LostReply};
use crate::limits::core_call;

/// One `world.v1.OAuth` call (`method`): no credential, sent once.
macro_rules! oauth_call {
    ($client:expr, $what:expr, $message:expr, $method:ident) => {
        $client
            .unary($what, None, core_call::OAUTH, LostReply::Invocation, $message, |channel, request| async move {
                OAuthClient::new(channel).$method(request).await
            })
            .await
    };
}

impl CoreClient {
    pub async fn register_oauth_client(
        &self,
        message: pb::RegisterClientRequest,
    ) -> Result<Option<Result<pb::RegisteredClient, pb::OAuthError>>, Failure> {
        Ok(oauth_call!(self, "oauth register", message, register_client)?.into_result())
    }

    pub async fn start_oauth_approval(
        &self,
        message: pb::StartApprovalRequest,
    ) -> Result<Option<pb::approval_reply::Outcome>, Failure> {
        Ok(oauth_call!(self, "oauth start", message, start_approval)?.outcome)
    }

    pub async fn await_oauth_approval(&self, request: &str) -> Result<Option<pb::approval_reply::Outcome>, Failure> {
        let message = pb::AwaitApprovalRequest { request: request.to_owned() };
        Ok(oauth_call!(self, "oauth await", message, await_approval)?.outcome)
    }

    pub async fn exchange_oauth_token(
        &self,
        message: pb::ExchangeTokenRequest,
    ) -> Result<Option<Result<pb::IssuedToken, pb::OAuthError>>, Failure> {
        Ok(oauth_call!(self, "oauth token", message, exchange_token)?.into_result())
    }
}
