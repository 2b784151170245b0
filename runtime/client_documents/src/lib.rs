//! Fetching an OAuth client's ID metadata document, guarded against being turned on the
//! machine's own network. See the crate README for the rules.

mod address;
mod fetch;

pub use address::is_public;
pub use fetch::{FETCH_TIMEOUT, FetchError, Fetcher, MAX_DOCUMENT_BYTES, Reach};
