//! Everything that touches the operating system. Handlers decide; `ops` does, and only with
//! values a Cedar permit produced ([`tool_api::Authorized`]).

mod beneath;
pub mod exec;
pub mod fs;
pub mod image;
pub mod path_policy;
pub mod search;
