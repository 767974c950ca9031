//! The core's `world.v1.OAuth` calls. None carries a credential. A call that may have reached a
//! core is never repeated here: a token exchange sent twice would look like a reused code and
//! end the sign-in it was meant to complete.

use std::time::Duration;

use world_model::Failure;
use world_proto::v1 as pb;
use world_proto::v1::o_auth_client::OAuthClient;

use crate::core::{CoreClient, LostReply};

/// Each OAuth call's deadline: a few store statements on the core.
const DEADLINE: Duration = Duration::from_secs(10);

impl CoreClient {
    pub async fn register_oauth_client(
        &self,
        message: pb::RegisterClientRequest,
    ) -> Result<Option<pb::register_client_reply::Outcome>, Failure> {
        let reply = self
            .unary("oauth register", None, DEADLINE, LostReply::Invocation, message, |channel, request| async move {
                OAuthClient::new(channel).register_client(request).await
            })
            .await?;
        Ok(reply.outcome)
    }

    pub async fn start_oauth_approval(
        &self,
        message: pb::StartApprovalRequest,
    ) -> Result<Option<pb::approval_reply::Outcome>, Failure> {
        let reply = self
            .unary("oauth start", None, DEADLINE, LostReply::Invocation, message, |channel, request| async move {
                OAuthClient::new(channel).start_approval(request).await
            })
            .await?;
        Ok(reply.outcome)
    }

    pub async fn await_oauth_approval(&self, request: &str) -> Result<Option<pb::approval_reply::Outcome>, Failure> {
        let message = pb::AwaitApprovalRequest { request: request.to_owned() };
        let reply = self
            .unary("oauth await", None, DEADLINE, LostReply::Invocation, message, |channel, request| async move {
                OAuthClient::new(channel).await_approval(request).await
            })
            .await?;
        Ok(reply.outcome)
    }

    pub async fn exchange_oauth_token(
        &self,
        message: pb::ExchangeTokenRequest,
    ) -> Result<Option<pb::exchange_token_reply::Outcome>, Failure> {
        let reply = self
            .unary("oauth token", None, DEADLINE, LostReply::Invocation, message, |channel, request| async move {
                OAuthClient::new(channel).exchange_token(request).await
            })
            .await?;
        Ok(reply.outcome)
    }
}
