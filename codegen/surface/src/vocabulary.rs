//! The small types a surface is written in that the server's tables use as well, declared
//! once here: `tool_api` re-exports them for generated code and the runtime.

use serde::Deserialize;

/// An operating system family gantry distinguishes: where a permission, connector or tool
/// can exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// Microsoft Windows.
    Windows,
    /// Apple macOS.
    Macos,
    /// Linux (and, for now, other Unixes).
    Linux,
}

impl Platform {
    /// Every platform, in a stable order.
    pub const ALL: [Platform; 3] = [Platform::Windows, Platform::Macos, Platform::Linux];

    /// The platform this binary was built for.
    pub const fn current() -> Platform {
        if cfg!(windows) {
            Platform::Windows
        } else if cfg!(target_os = "macos") {
            Platform::Macos
        } else {
            Platform::Linux
        }
    }

    /// The lower-case name used in surface.toml, the config and Cedar contexts.
    pub const fn name(self) -> &'static str {
        match self {
            Platform::Windows => "windows",
            Platform::Macos => "macos",
            Platform::Linux => "linux",
        }
    }
}

/// Whether a tool's handler exists yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The runtime must provide a handler (a missing one is a compile error).
    Ready,
    /// Declared and published, answered with `NOT_IMPLEMENTED`.
    Planned,
}

/// What an input a tool's audit line keeps holds: the audit records what a call attempted
/// (refused or not) by these inputs, cut to 200 characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Audited {
    /// A command line or program and its arguments: withheld under
    /// `audit_command_lines = false`.
    Command,
    /// A path or list of paths.
    Path,
}

/// How a tool's result reaches the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyShape {
    /// The output is `structuredContent`, its schema is published, and a text rendering
    /// accompanies it.
    Structured,
    /// The model reads one plain-text rendering; the declared output fields are machine facts
    /// sent in the result's `_meta`, which no model reads, and no output schema is published.
    Text,
}

/// MCP tool annotations; all four are always published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Annotations {
    /// `readOnlyHint`.
    pub read_only: bool,
    /// `destructiveHint`.
    pub destructive: bool,
    /// `idempotentHint`.
    pub idempotent: bool,
    /// `openWorldHint`.
    pub open_world: bool,
}
