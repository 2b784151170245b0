//! The types of the static surface tables the generated crate fills in.

pub use surface::{Annotations, Audited, Platform, Status};

/// One boolean per platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlatformFlags {
    /// On Windows.
    pub windows: bool,
    /// On macOS.
    pub macos: bool,
    /// On Linux.
    pub linux: bool,
}

impl PlatformFlags {
    /// The flag for `platform`.
    pub const fn get(self, platform: Platform) -> bool {
        match platform {
            Platform::Windows => self.windows,
            Platform::Macos => self.macos,
            Platform::Linux => self.linux,
        }
    }
}

/// A permission the user can turn on or off.
#[derive(Debug, Clone, Copy)]
pub struct PermissionSpec {
    /// snake_case name.
    pub name: &'static str,
    /// What it allows.
    pub description: &'static str,
    /// Whether read-only mode masks it.
    pub mutates: bool,
    /// Its value in a fresh config.
    pub default: PlatformFlags,
    /// Where it can be in effect.
    pub platforms: &'static [Platform],
}

/// A connector: one endpoint, one secret, one discovery boundary.
#[derive(Debug, Clone, Copy)]
pub struct ConnectorSpec {
    /// snake_case name.
    pub name: &'static str,
    /// Human title.
    pub title: &'static str,
    /// What it offers.
    pub description: &'static str,
    /// Server instructions.
    pub instructions: &'static str,
    /// Where it is published.
    pub platforms: &'static [Platform],
    /// Most bytes its tools/list may take.
    pub discovery_budget: usize,
    /// Worker agents started through it call its tools too, each on its own endpoint.
    pub workers: bool,
    /// What a connection set to progressive disclosure lists until its first successful call.
    pub first_tools: &'static [&'static str],
}

/// A separately authorized operation of a tool.
#[derive(Debug, Clone, Copy)]
pub struct OperationSpec {
    /// snake_case name.
    pub name: &'static str,
    /// Its Cedar action id.
    pub action: &'static str,
    /// The permission it needs.
    pub requires: &'static str,
    /// What it does.
    pub description: &'static str,
}

/// A tool as declared in surface.toml.
#[derive(Debug, Clone, Copy)]
pub struct ToolSpec {
    /// Stands for the tools of upstream MCP servers: never listed itself.
    pub upstream: bool,
    /// Unique across connectors: its Cedar action and schema file stem.
    pub id: &'static str,
    /// MCP name, unique within its connector.
    pub name: &'static str,
    /// The connector publishing it.
    pub connector: &'static str,
    /// Human title.
    pub title: &'static str,
    /// What the model reads.
    pub description: &'static str,
    /// Permissions the call needs, all of them.
    pub requires: &'static [&'static str],
    /// Permissions whose being on hides the tool from discovery.
    pub unpublished_when: &'static [&'static str],
    /// Separately authorized operations.
    pub operations: &'static [OperationSpec],
    /// Whether a handler exists.
    pub status: Status,
    /// MCP annotations.
    pub annotations: Annotations,
    /// Where it is published.
    pub platforms: &'static [Platform],
    /// Named limits, each as surface.toml shows it (`"256 KB"`, `"64"`).
    pub limits: &'static [(&'static str, &'static str)],
    /// The inputs its audit line keeps as what a call attempted (allowed or refused).
    pub audited: &'static [(&'static str, Audited)],
    /// JSON Schema of the arguments.
    pub input_schema: &'static str,
    /// JSON Schema of `structuredContent`, published in tools/list; `None` for a tool that
    /// declares no output or answers in text (its facts go to the result's `_meta`).
    pub output_schema: Option<&'static str>,
}

impl ToolSpec {
    /// Whether the tool is listed under `enabled` (a predicate over effective permissions):
    /// every required permission on, at least one operation's permission on when it has
    /// operations, and none of `unpublished_when` on.
    pub fn published(&self, enabled: impl Fn(&str) -> bool) -> bool {
        self.requires.iter().all(|p| enabled(p))
            && (self.operations.is_empty() || self.operations.iter().any(|op| enabled(op.requires)))
            && !self.unpublished_when.iter().any(|p| enabled(p))
    }
}
