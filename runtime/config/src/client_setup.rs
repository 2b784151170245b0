//! `gantry config <client>`: ready-to-paste setups, with the real URL or command.

use std::path::Path;

use crate::Settings;
use crate::cli::{Client, CommonArgs};

fn toml_string(s: &str) -> String {
    toml::Value::from(s).to_string()
}

fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:=@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The flags that make another `gantry serve` use the same settings as this run: every flag
/// given here but the roots, which the config file holds (see [`roots_into_config`]), so a
/// root added later reaches every client without pasting its setup again.
fn setting_args(settings: &Settings, given: &CommonArgs) -> Vec<String> {
    let mut args = Vec::new();
    if settings.config_path != crate::default_config_path() {
        args.push("--config".into());
        args.push(settings.config_path.display().to_string());
    }
    if settings.state_dir != crate::default_state_dir() {
        args.push("--state-dir".into());
        args.push(settings.state_dir.display().to_string());
    }
    if let Some(dir) = given.policies.as_ref().and(settings.policies_dir.as_ref()) {
        args.push("--policies".into());
        args.push(dir.display().to_string());
    }
    if given.read_only == Some(true) {
        args.push("--read-only".into());
    }
    args
}

/// Makes the config file's `roots` hold every root of this run (given by `--root`,
/// `GANTRY_ROOTS` or, when none was, the current directory), since the setups name no root:
/// every client and the control page then share one list, and a root added or removed
/// there reaches a client at its next call. Returns what to tell the user. `refused` says
/// why no root may be added from here (a command gantry started: a root is the user's
/// choice, never the model's); then a root not yet listed is an error.
pub fn roots_into_config(settings: &Settings, refused: Option<&str>) -> Result<String, String> {
    let file = settings.config_path.display();
    let in_file = settings.roots_in_file.clone().unwrap_or_default();
    let mut added = Vec::new();
    for root in &settings.roots {
        if in_file.contains(root) {
            continue;
        }
        if let Some(why) = refused {
            return Err(format!(
                "gantry config would add {} to the roots in {file}, and refuses to inside a command gantry started ({why}): a new root is the user's choice, never the model's; run it in your own terminal",
                root.display()
            ));
        }
        if !root.is_absolute() {
            return Err(
                "roots: the current directory cannot be found (was it removed?); give --root DIR"
                    .into(),
            );
        }
        // Every client and the running servers share this list: the guard on a default root
        // holds for what gantry writes there, named or not.
        if let Some(what) = crate::settings::too_wide_for_a_default_root(root) {
            return Err(format!(
                "gantry config does not write {} ({what}) into the roots in {file}, which every client shares; choose a project directory with --root DIR, or write it there yourself if you mean it",
                root.display()
            ));
        }
        // With no `roots` in the file yet, the list starts with this run's, not the default.
        match crate::edit::apply(
            &settings.config_path,
            &crate::edit::Change::AddRoot(root.clone()),
            &[],
        ) {
            Ok(()) => added.push(root.display().to_string()),
            Err(crate::edit::EditError::AlreadyRoot(_)) => {}
            Err(e) => return Err(format!("the roots could not be written to {file}: {e}")),
        }
    }
    let mut all: Vec<String> = in_file.iter().map(|r| r.display().to_string()).collect();
    all.extend(added.iter().cloned());
    let mut said = format!(
        "the setup names no root: gantry reads them from `roots` in {file} ({}); one added or removed there or on the control page reaches this client at its next call",
        all.join(", ")
    );
    if !added.is_empty() {
        said.push_str(&format!("; added to that list now: {}", added.join(", ")));
    }
    Ok(said)
}

/// The arguments that make `gantry serve --stdio` use the same settings as this run.
fn stdio_args(settings: &Settings, given: &CommonArgs, connector: &str) -> Vec<String> {
    let mut args = vec![
        "serve".to_string(),
        "--stdio".to_string(),
        "--connector".to_string(),
        connector.to_string(),
    ];
    args.extend(setting_args(settings, given));
    args
}

/// `serve` over HTTP with the same settings, `extra` flags first, as one shell line.
fn http_command(exe: &str, settings: &Settings, given: &CommonArgs, extra: &[String]) -> String {
    let mut words = vec![shell_word(exe), "serve".to_string()];
    words.extend(extra.iter().map(|a| shell_word(a)));
    words.extend(setting_args(settings, given).iter().map(|a| shell_word(a)));
    if let Some(port) = given.port {
        words.push("--port".into());
        words.push(port.to_string());
    }
    words.join(" ")
}

/// The setup for `client`: what to paste (stdout; JSON and TOML exactly as the client reads
/// them) and where to put it (a hint for stderr). `exe` is the gantry binary; `token` the
/// connector's secret; `given` the flags of this run, carried into the setup.
pub fn render(
    client: Client,
    settings: &Settings,
    given: &CommonArgs,
    connector: &str,
    exe: &Path,
    token: &str,
) -> (String, Option<&'static str>) {
    let exe = exe.display().to_string();
    let args = stdio_args(settings, given, connector);
    match client {
        Client::Chatgpt => {
            let host = settings
                .public_host
                .as_deref()
                .unwrap_or("<your-tunnel-host>");
            // Served with a public host, a connector signs in with OAuth unless `[auth]`
            // keeps it on its URL secret.
            let oauth = settings.auth.get(connector).is_none_or(|mode| mode.oauth());
            let (public, authentication) = if oauth {
                (
                    crate::urls::oauth_url(host, connector),
                    "#    Authentication: OAuth; leave the client ID and secret empty (ChatGPT identifies itself)\n\
                     # 4. ChatGPT opens gantry's sign-in page, which shows a code. Approve that code on the\n\
                     #    control page (`gantry admin` prints its address) or with `gantry auth approve CODE`.\n\
                     #    `gantry auth list` shows who is signed in; `gantry auth revoke ID` ends it.\n",
                )
            } else {
                (
                    crate::urls::public_url(host, token),
                    "#    Authentication: No authentication (the secret is in the URL)\n",
                )
            };
            let serve = http_command(
                &exe,
                settings,
                given,
                &["--public-host".to_string(), host.to_string()],
            );
            let text = format!(
                "# 1. Start a tunnel to http://127.0.0.1:{port} and note the https:// name it prints\n\
                 #    (a quick tunnel gets a new name each run; see docs/CHATGPT.md for a stable one):\n\
                 cloudflared tunnel --url http://127.0.0.1:{port}\n\
                 # 2. Serve (loopback only), accepting that name:\n\
                 {serve}\n\
                 # 3. ChatGPT > Settings > Apps & Connectors > Advanced > Developer mode > Create:\n\
                 #    MCP Server URL: {public}\n\
                 {authentication}\
                 # After changing permissions or upgrading gantry, press Refresh on the connector.\n",
                port = settings.port,
            );
            let hint = settings.public_host.is_none().then_some(
                "give --public-host with the name your tunnel prints to get the exact URL",
            );
            (text, hint)
        }
        Client::ClaudeDesktop => (
            mcp_servers_json(connector, &exe, &args),
            Some("paste into claude_desktop_config.json (Settings > Developer > Edit Config)"),
        ),
        Client::ClaudeCode => {
            let words: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
            let text = format!(
                "claude mcp add gantry-{connector} -- {} {}\n",
                shell_word(&exe),
                words.join(" ")
            );
            (text, None)
        }
        Client::Codex => {
            let args_toml: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
            let text = format!(
                "[mcp_servers.gantry-{connector}]\ncommand = {}\nargs = [{}]\n",
                toml_string(&exe),
                args_toml.join(", ")
            );
            (text, Some("add to ~/.codex/config.toml"))
        }
        Client::Cursor => (
            mcp_servers_json(connector, &exe, &args),
            Some("paste into .cursor/mcp.json (project) or ~/.cursor/mcp.json (global)"),
        ),
        Client::Inspector => {
            let serve = http_command(
                &exe,
                settings,
                given,
                &[
                    "--allowed-origin".to_string(),
                    "http://localhost:6274".to_string(),
                ],
            );
            let words: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
            let local_url = format!("http://{}:{}/{token}/mcp", settings.host, settings.port);
            let text = format!(
                "# over HTTP (start `{serve}` first):\n\
                 npx @modelcontextprotocol/inspector --cli {local_url} --transport http --method tools/list\n\
                 # over stdio:\n\
                 npx @modelcontextprotocol/inspector --cli {} {} --method tools/list\n",
                shell_word(&exe),
                words.join(" ")
            );
            (text, None)
        }
    }
}

/// `{"mcpServers": {...}}` as Claude Desktop and Cursor read it: plain JSON, no comments.
fn mcp_servers_json(connector: &str, exe: &str, args: &[String]) -> String {
    let value = serde_json::json!({
        "mcpServers": {
            format!("gantry-{connector}"): { "command": exe, "args": args }
        }
    });
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}
