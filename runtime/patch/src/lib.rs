//! The V4A patch envelope Codex models write (`*** Begin Patch` … `*** End Patch`), and unified
//! diffs read into the same operations, as pure functions: [`parse`] turns text into file operations; [`apply_update`] computes a file's new
//! text in memory. Nothing here touches a filesystem, so a whole patch can be checked before
//! the first write.

mod apply;
mod ops;
mod parse;
mod seek;
mod unified;

pub use apply::{BYTES_PER_LINE, MatchError, Updated, apply_update};
pub use ops::{Chunk, ChunkLine, FileOp, ParseError, Patch};
pub use parse::parse;
