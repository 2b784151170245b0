//! `[gateway.servers.NAME]`: the upstream MCP servers the Gateway connector serves, as the
//! config writes them, and the names they may have.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// What joins a server's name and its tool's in the names the Gateway lists (`server__tool`).
pub const SEPARATOR: &str = "__";

/// One `[gateway.servers.NAME]` entry: a `command` (with `args`, `env`, `cwd`) or a `url`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// The program to start (stdio).
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables added to its environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: Option<String>,
    /// A Streamable HTTP endpoint.
    pub url: Option<String>,
    /// The environment variable (of gantry's own environment) holding the bearer token for
    /// `url`, so no secret is written in the config.
    pub bearer_token_env: Option<String>,
    /// Waits shorter than the Gateway's limits, for a server that should answer fast
    /// (`"5 s"`); each wait is the shorter of the two.
    pub timeout: Option<String>,
}

impl UpstreamConfig {
    /// `timeout` as a duration; `Err` says why it is not one.
    pub fn timeout(&self) -> Result<Option<Duration>, String> {
        self.timeout
            .as_deref()
            .map(|t| humantime::parse_duration(t).map_err(|e| format!("timeout `{t}`: {e}")))
            .transpose()
    }
}

/// Whether `name` may name an upstream server: letters, digits, `-` and single `_`.
pub fn server_name_ok(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !name.contains(SEPARATOR)
        // `a_` with tool `b` and `a` with tool `_b` would both list as `a___b`.
        && !name.starts_with('_')
        && !name.ends_with('_')
}
