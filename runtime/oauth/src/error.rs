//! What a sign-in step refuses, with the OAuth error code a client expects for it.

/// A refused sign-in step. The message names the field at fault and never carries a token.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A parameter is missing, repeated or malformed (RFC 6749 §5.2 `invalid_request`).
    #[error("{0}")]
    InvalidRequest(String),
    /// A registration's metadata is refused (RFC 7591 §3.2.2).
    #[error("{0}")]
    InvalidClientMetadata(String),
    /// A registration's redirect URI is refused (RFC 7591 §3.2.2).
    #[error("{0}")]
    InvalidRedirectUri(String),
    /// The client's metadata document (its `client_id` is an https URL) could not be
    /// fetched, or says something refused.
    #[error("{0}")]
    ClientDocument(String),
    /// The client is not registered here.
    #[error("unknown client_id: register the client first")]
    InvalidClient,
    /// A code or refresh token that is unknown, spent, expired, revoked, or bound to another
    /// client, redirect, verifier or connector.
    #[error("{0}")]
    InvalidGrant(&'static str),
    /// An access token that is unknown, expired, revoked or for another connector.
    #[error("{0}")]
    InvalidToken(&'static str),
    /// The resource asked for is not one of this server's connectors (RFC 8707).
    #[error("{0}")]
    InvalidTarget(String),
    /// No request waiting for approval has this code (it expired, was decided, or was never
    /// made).
    #[error("no sign-in request is waiting with code {0}")]
    UnknownCode(String),
    /// Too many client documents are being fetched at once.
    #[error("{0}")]
    DocumentsBusy(String),
    /// Too many requests wait for the user at once.
    #[error("too many sign-in requests are waiting for approval; try again in a few minutes")]
    Busy,
    /// The store failed.
    #[error("the sign-in store: {0}")]
    Store(String),
}

impl AuthError {
    /// The OAuth `error` value for this refusal.
    pub fn code(&self) -> &'static str {
        match self {
            AuthError::InvalidRequest(_) => "invalid_request",
            AuthError::InvalidClientMetadata(_) => "invalid_client_metadata",
            AuthError::InvalidRedirectUri(_) => "invalid_redirect_uri",
            AuthError::InvalidClient | AuthError::ClientDocument(_) => "invalid_client",
            AuthError::InvalidGrant(_) => "invalid_grant",
            AuthError::InvalidToken(_) => "invalid_token",
            AuthError::InvalidTarget(_) => "invalid_target",
            AuthError::UnknownCode(_) => "unknown_code",
            AuthError::Busy | AuthError::DocumentsBusy(_) => "temporarily_unavailable",
            AuthError::Store(_) => "server_error",
        }
    }
}

impl From<rusqlite::Error> for AuthError {
    fn from(e: rusqlite::Error) -> Self {
        AuthError::Store(e.to_string())
    }
}
