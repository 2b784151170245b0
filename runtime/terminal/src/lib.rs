//! Commands in real PTYs for `exec_command` and `write_stdin`.
//!
//! Each command runs in the host's shell inside its own PTY and its own session/process group
//! (a job object on Windows). A reader thread moves output through a [`sanitize::Sanitizer`]
//! into a bounded [`window::Window`] (whole in memory while small, then head + tail in memory
//! and the whole stream in a private spill file), so memory stays bounded however much a
//! process prints. The [`Registry`] bounds the number of sessions, ends idle ones, and ends
//! whole process trees (detached grandchildren included, see [`process_tree`]).

pub mod cgroup;
mod console;
pub mod process_tree;
pub mod procfs;
pub mod programs;
mod registry;
pub mod sanitize;
mod session;
pub mod shell;
pub mod snapshot;
mod warm;
pub mod window;

pub use console::Exit;
pub use registry::{Commands, Config, Held, Listed, Outcome, Registry, Run, Seen, TerminalError};
pub use window::SpillHint;
