//! Recorded sessions for the `session` tool: gantry's own calls and the local coding agents'
//! transcripts (Codex, Claude Code), in one SQLite store with full-text search, read back
//! exactly, page by page.

mod error;
pub mod import;
mod journal;
mod record;
pub mod redact;
pub mod store;
mod view;

pub use error::StoreError;
pub use journal::Journal;
pub use record::{Call, Grouping, MAX_FIELD_BYTES, RUN_GAP_MS};
pub use redact::Redactor;
pub use store::Store;
pub use view::{Budgets, Page, Search, ViewError, Visible, utc};
