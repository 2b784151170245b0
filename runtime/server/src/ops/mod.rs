//! Everything that touches the operating system. Handlers decide; `ops` does, and only with
//! values a Cedar permit produced ([`tool_api::Authorized`]).

pub mod apps;
pub mod confinement;
pub mod exec;
pub mod host;
pub mod image;
pub mod process_limits;
pub mod program;
pub mod search;

pub use confine::{fs, path_policy};
