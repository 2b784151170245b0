//! Sign-in for gantry's public connectors: the state of its OAuth 2.1 authorization server
//! and the checks on it. See the crate README for what is not here.

mod document;
mod error;
mod pkce;
mod store;

pub use document::{described, document_url, is_document_id, site_of};
pub use error::AuthError;
pub use pkce::{challenge_is_well_formed, verifier_matches};
pub use store::{
    ACCESS_TOKEN_MS, AUTH_DB, Approval, Auth, CODE_MS, Client, GrantView, Granted, Issued,
    MAX_PENDING, Pending, PendingView, Poll, REFRESH_TOKEN_MS, REQUEST_WAIT_MS, Registration,
    Request,
};
