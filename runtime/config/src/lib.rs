//! gantry's configuration: command-line flags, environment and the config file merged into
//! [`Settings`]; the config file edited for the user (one key at a time, comments kept); the
//! `Host` names the HTTP boundary admits; the worker kinds, upstream servers and other
//! machines the file declares; the URLs connectors are reached at and the client setups that name them.
//!
//! A leaf: it imports nothing of the server, so every other crate may read settings.

pub mod apps;
pub mod browser;
pub mod cli;
pub mod client_setup;
pub mod edit;
pub mod hosts;
pub mod machines;
mod paths;
pub mod services;
mod settings;
pub mod upstream;
pub mod urls;
pub mod worker_kinds;

pub use settings::{
    AuthMode, ConfigError, DEFAULT_DISPLAY_PROGRAMS, DEFAULT_HOST, DEFAULT_PORT,
    DEFAULT_RUNS_FILES, DEFAULT_SESSION_IDLE, DISPLAY_CAPTURE_ARGUMENTS, MAGICK_PROGRAMS, Settings,
    asks_for_a_capture, asks_magick_for_the_screen, default_config_path, default_state_dir,
    from_env_or_flag, names_program,
};
