//! The world.v1 gRPC contract, generated from `proto/world/v1` — the only
//! thing the core and the edge share on the wire.

pub mod v1 {
    tonic::include_proto!("world.v1");

    /// The encoded file descriptor set, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/world_v1_descriptor.bin"));
}

/// A reply whose `outcome` oneof is either the call's value or its typed refusal. The core
/// builds every such reply through [`Outcome::from_result`] and the edge reads it through
/// [`Outcome::into_result`], so adding an RPC of this shape is its messages and one line in
/// [`outcomes!`] below.
pub trait Outcome: Sized {
    /// What the call answers when it succeeds.
    type Value;
    /// How the call refuses: [`v1::Failure`], or [`v1::OAuthError`] for sign-in's steps.
    type Error;

    fn from_result(result: Result<Self::Value, Self::Error>) -> Self;

    /// `None` when the reply carries no outcome at all (a core that sent an empty message).
    fn into_result(self) -> Option<Result<Self::Value, Self::Error>>;
}

/// `Reply => module::Value(type), module::Error(type)`: the reply message, its oneof's module
/// and the two variants.
macro_rules! outcomes {
    ($($reply:ident => $module:ident :: $value:ident ($value_type:ty), $error:ident ($error_type:ty);)*) => {$(
        impl Outcome for v1::$reply {
            type Value = $value_type;
            type Error = $error_type;

            fn from_result(result: Result<$value_type, $error_type>) -> Self {
                let outcome = result.map_or_else(v1::$module::Outcome::$error, v1::$module::Outcome::$value);
                v1::$reply { outcome: Some(outcome) }
            }

            fn into_result(self) -> Option<Result<$value_type, $error_type>> {
                match self.outcome? {
                    v1::$module::Outcome::$value(value) => Some(Ok(value)),
                    v1::$module::Outcome::$error(error) => Some(Err(error)),
                }
            }
        }
    )*};
}

outcomes! {
    AdmitReply => admit_reply::Admitted(v1::Admitted), Failure(v1::Failure);
    InvokeReply => invoke_reply::Invoked(v1::Invoked), Failure(v1::Failure);
    HeadReply => head_reply::Head(String), Failure(v1::Failure);
    GetWorldReply => get_world_reply::World(v1::World), Failure(v1::Failure);
    GetObjectReply => get_object_reply::Object(v1::StoredObject), Failure(v1::Failure);
    ObjectEntryReply => object_entry_reply::Entry(v1::LogEntry), Failure(v1::Failure);
    ObjectsBySemanticIdReply => objects_by_semantic_id_reply::Page(v1::ObjectPage), Failure(v1::Failure);
    GetLogEntryReply => get_log_entry_reply::Entry(v1::LogEntry), Failure(v1::Failure);
    LogPageReply => log_page_reply::Page(v1::EntryPage), Failure(v1::Failure);
    RegistryHeadReply => registry_head_reply::Head(String), Failure(v1::Failure);
    ReceiptReply => receipt_reply::Receipt(v1::ReceiptState), Failure(v1::Failure);
    CommitReply => commit_reply::SelectedHead(String), Failure(v1::Failure);
    SessionReply => session_reply::Session(v1::SessionView), Failure(v1::Failure);
    CallsReply => calls_reply::Page(v1::CallPage), Failure(v1::Failure);
    RegisterClientReply => register_client_reply::Client(v1::RegisteredClient), Error(v1::OAuthError);
    ExchangeTokenReply => exchange_token_reply::Token(v1::IssuedToken), Error(v1::OAuthError);
}
