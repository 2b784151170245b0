//! The every-feature fixture surface, generated into `OUT_DIR` like `generated/`, with handlers
//! just large enough to put each feature to work.

mod surface {
    include!(concat!(env!("OUT_DIR"), "/surface.rs"));
}

mod declared_errors {
    include!(concat!(env!("OUT_DIR"), "/error_codes.rs"));
}

mod handlers;

pub use declared_errors::ErrorCode as DeclaredErrorCode;
pub use handlers::{Fixture, POLICIES, call_context, handlers};
pub use surface::*;
