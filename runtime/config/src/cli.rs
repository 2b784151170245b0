//! Command-line interface. Precedence for every setting: flags > environment > config file >
//! defaults (clap handles the first two; [`crate::Settings`] the rest).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// gantry: controlled, audited access to this computer for MCP hosts.
#[derive(Debug, Parser)]
#[command(name = "gantry", version, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the connectors: stateless Streamable HTTP (default) or one connector on stdio.
    Serve(ServeArgs),
    /// Validate the surface, the policies and the config together; print every problem.
    Check(CheckArgs),
    /// Manage connector secrets.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Sign-ins of OAuth clients (ChatGPT) to the public connectors: approve, list, revoke.
    #[command(subcommand)]
    Auth(AuthCommand),
    /// Print a ready-to-paste setup for an MCP client, with the real URL or command.
    Config(ConfigArgs),
    /// Show the audit log: the last lines, filtered, and new ones as they come with --follow.
    Audit(AuditArgs),
    /// Print the control page URL of the server running with this state directory.
    Admin(AdminArgs),
    /// Your other machines, reached over SSH through the Hosts connector.
    #[command(subcommand)]
    Hosts(HostsCommand),
    /// Internal: how a confined command starts (`[exec] confine = "roots"`).
    #[command(hide = true)]
    SandboxExec(SandboxExecArgs),
}

/// `gantry sandbox-exec`: restrict writes, then become the command.
#[derive(Debug, Clone, Args)]
pub struct SandboxExecArgs {
    /// A directory the command may write below (repeated).
    #[arg(long = "write")]
    pub write: Vec<std::path::PathBuf>,
    /// The private temp directory (`TMPDIR`).
    #[arg(long)]
    pub tmp: std::path::PathBuf,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<std::ffi::OsString>,
}

/// `gantry admin`.
#[derive(Debug, Clone, Args)]
pub struct AdminArgs {
    /// Settings.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `gantry audit`.
#[derive(Debug, Clone, Args)]
pub struct AuditArgs {
    /// How many of the last matching lines to show.
    #[arg(short = 'n', long, default_value_t = 20)]
    pub lines: usize,
    /// Keep printing new lines as they are written.
    #[arg(short, long)]
    pub follow: bool,
    /// Only calls of this tool.
    #[arg(long)]
    pub tool: Option<String>,
    /// Only calls with this overall decision.
    #[arg(long, value_parser = ["allow", "deny", "none"])]
    pub decision: Option<String>,
    /// Settings.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The connectors surface.toml declares, as the values a `connector` argument takes.
fn connector_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(generated::CONNECTORS.iter().map(|c| c.name))
}

/// `gantry token ...`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Replace a connector's secret (every connector's without a name). A running server
    /// accepts only the new one from its next request on.
    Rotate {
        /// The connector.
        #[arg(value_parser = connector_names())]
        connector: Option<String>,
        /// Settings.
        #[command(flatten)]
        common: CommonArgs,
    },
}

/// `gantry auth ...`.
#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// List the sign-in requests waiting for approval and the grants in force.
    List {
        /// Settings.
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Approve the waiting sign-in request whose page (in your browser) shows CODE.
    Approve {
        /// The code, `XXXX-XXXX`.
        code: String,
        /// Settings.
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Refuse the waiting sign-in request whose page shows CODE.
    Deny {
        /// The code, `XXXX-XXXX`.
        code: String,
        /// Settings.
        #[command(flatten)]
        common: CommonArgs,
    },
    /// End a grant: its client's tokens stop working at their next request.
    Revoke {
        /// The grant's id, as `gantry auth list` shows it.
        grant: String,
        /// Settings.
        #[command(flatten)]
        common: CommonArgs,
    },
}

/// `gantry hosts ...`.
#[derive(Debug, Subcommand)]
pub enum HostsCommand {
    /// Pin a machine's SSH host key after showing its fingerprint and asking (and, when
    /// `user@host` is given, write `[hosts.NAME]` once confirmed), then check its gantry
    /// answers.
    Add {
        /// The machine's name in the config.
        name: String,
        /// `user@host`, to write `[hosts.NAME]` (default: the entry already there).
        destination: Option<String>,
        /// The SSH port (default: ssh's own, 22 unless the user's ssh config says).
        #[arg(long)]
        ssh_port: Option<u16>,
        /// The private key to log in with.
        #[arg(long)]
        identity_file: Option<String>,
        /// The command that runs gantry there (default `gantry`).
        #[arg(long)]
        gantry: Option<String>,
        /// Confirm the key without a prompt (scripts).
        #[arg(long)]
        yes: bool,
        /// Settings.
        #[command(flatten)]
        common: CommonArgs,
    },
    /// The machines under `[hosts]`, with their pinned keys.
    List {
        /// Settings.
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Forget a machine: its `[hosts]` entry and its pinned key.
    Remove {
        /// The machine's name.
        name: String,
        /// Settings.
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Whether each machine's gantry answers, and its version.
    Check {
        /// Only this machine.
        name: Option<String>,
        /// Settings.
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Copy this gantry to a machine of the same kind (checked by SHA-256 there).
    Install {
        /// The machine's name.
        name: String,
        /// Where it goes there (`~/` is its home).
        #[arg(long, default_value = "~/.local/bin/gantry")]
        to: String,
        /// Settings.
        #[command(flatten)]
        common: CommonArgs,
    },
}

/// Clients `gantry config` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// ChatGPT developer mode (a public HTTPS URL through a tunnel).
    Chatgpt,
    /// Claude Desktop (`claude_desktop_config.json`).
    ClaudeDesktop,
    /// Claude Code (`claude mcp add`).
    ClaudeCode,
    /// Codex (`~/.codex/config.toml`).
    Codex,
    /// Cursor (`.cursor/mcp.json`).
    Cursor,
    /// The MCP Inspector.
    Inspector,
}

/// `gantry config <client>`.
#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// The client to print a setup for.
    #[arg(value_enum)]
    pub client: Client,
    /// The connector.
    #[arg(long, default_value = generated::core::NAME, value_parser = connector_names())]
    pub connector: String,
    /// Settings.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Settings shared by every subcommand.
#[derive(Debug, Clone, Default, Args)]
pub struct CommonArgs {
    /// Config file (default: the platform's config dir, gantry/config.toml).
    #[arg(long, env = "GANTRY_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Directory for tokens, the audit log and spill files.
    #[arg(long, env = "GANTRY_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Approved root (repeatable); replaces the configured roots for this run.
    /// Environment: GANTRY_ROOTS, a path list.
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,
    /// Policy directory to load instead of the built-in copy of policies/.
    #[arg(long, env = "GANTRY_POLICIES", value_name = "DIR")]
    pub policies: Option<PathBuf>,
    /// Address to listen on (default 127.0.0.1; anything else is reachable from elsewhere).
    #[arg(long, env = "GANTRY_HOST")]
    pub host: Option<String>,
    /// Port to listen on (default 3210; 0 picks a free one).
    #[arg(long, env = "GANTRY_PORT")]
    pub port: Option<u16>,
    /// Read-only mode: refuse everything that changes state.
    #[arg(long, env = "GANTRY_READ_ONLY", num_args = 0..=1, default_missing_value = "true", value_name = "BOOL",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub read_only: Option<bool>,
    /// The public name a tunnel gives this server, as a host or as the URL the tunnel prints
    /// (`https://x.trycloudflare.com/`). Its Host is accepted and the connector URLs are
    /// printed with it.
    #[arg(long, env = "GANTRY_PUBLIC_HOST", value_name = "HOST|URL")]
    pub public_host: Option<String>,
    /// Extra Host header value to accept (repeatable): a name, `name:port`, or `*.domain` for
    /// every name below a domain (e.g. `*.trycloudflare.com`).
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub allowed_hosts: Vec<String>,
    /// Browser origin to accept (repeatable), e.g. `http://localhost:6274` for the Inspector.
    /// Requests carrying any other Origin are refused.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    pub allowed_origins: Vec<String>,
}

/// `gantry serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Settings.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Serve one connector on stdin/stdout instead of HTTP.
    #[arg(long)]
    pub stdio: bool,
    /// The connector to serve with --stdio.
    #[arg(long, default_value = generated::core::NAME, requires = "stdio", value_parser = connector_names())]
    pub connector: String,
    /// Port of the control page, which always listens on 127.0.0.1 only (default: a free
    /// one, printed at start and by `gantry admin`). Not used with --stdio.
    #[arg(long, env = "GANTRY_ADMIN_PORT", value_name = "PORT")]
    pub admin_port: Option<u16>,
    /// Do not serve the control page (wins over --admin-port).
    #[arg(long)]
    pub no_admin: bool,
}

/// `gantry check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Settings.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Also validate this surface file (e.g. a checkout's surface.toml).
    #[arg(long, value_name = "FILE")]
    pub surface: Option<PathBuf>,
}

/// When clap refuses a value that came from an environment variable rather than the command
/// line, says so, naming the variable (clap names only the flag, which the user never typed).
pub fn blame_environment(error: &clap::Error, argv: &[String]) -> Option<String> {
    use clap::CommandFactory as _;
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        error.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return None;
    }
    let Some(ContextValue::String(arg)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = arg.split_whitespace().next()?;
    let long = flag.strip_prefix("--")?;
    if argv
        .iter()
        .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
    {
        return None;
    }
    let command = Cli::command();
    let variable = command
        .get_subcommands()
        .flat_map(|c| c.get_arguments())
        .find(|a| a.get_long() == Some(long))
        .and_then(|a| a.get_env())?
        .to_string_lossy()
        .into_owned();
    let value = std::env::var_os(&variable)?;
    let reason = error
        .render()
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .to_string();
    Some(format!(
        "environment variable {variable}={:?} is not a valid {flag} value ({reason}); fix or unset {variable}",
        value.to_string_lossy()
    ))
}
