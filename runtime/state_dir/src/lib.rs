//! gantry's state directory: its own private files (0700 directory, 0600 files on Unix), the
//! connectors' tokens (kept live as the file changes) and the stamps that tell a file changed.
//! No path from a tool call ever reaches it.

mod files;
mod own_input;

pub use files::{
    LiveTokens, Tokens, ensure, force_private, new_secret, stored_tokens, tokens_path,
    write_private,
};
pub use own_input::{
    OWN_INPUT_CAP, OwnInput, OwnInputError, Stamp, Version, file_stamp, read_own_input,
};
