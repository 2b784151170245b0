//! `gantry config <client>`: ready-to-paste setups, with the real URL or command.

use std::path::Path;

use crate::cli::Client;
use crate::config::Settings;

fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

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

/// The arguments that make `gantry serve --stdio` use the same settings as this run.
fn stdio_args(settings: &Settings, connector: &str) -> Vec<String> {
    let mut args = vec![
        "serve".to_string(),
        "--stdio".to_string(),
        "--connector".to_string(),
        connector.to_string(),
    ];
    if settings.config_path != crate::config::default_config_path() {
        args.push("--config".into());
        args.push(settings.config_path.display().to_string());
    }
    if settings.state_dir != crate::config::default_state_dir() {
        args.push("--state-dir".into());
        args.push(settings.state_dir.display().to_string());
    }
    args
}

/// The setup text for `client`. `exe` is the gantry binary; `token` the connector's secret.
pub fn render(
    client: Client,
    settings: &Settings,
    connector: &str,
    exe: &Path,
    token: &str,
    public_host: Option<&str>,
) -> String {
    let exe = exe.display().to_string();
    let args = stdio_args(settings, connector);
    let local_url = format!("http://{}:{}/{token}/mcp", settings.host, settings.port);
    match client {
        Client::Chatgpt => {
            let public = match public_host {
                Some(h) => format!("https://{h}/{token}/mcp"),
                None => format!("https://<your-tunnel-host>/{token}/mcp"),
            };
            format!(
                "# 1. Serve (loopback only), allowing the tunnel's host name:\n\
                 {exe} serve --allowed-host {host}\n\
                 # 2. Expose http://{bind}:{port} through a tunnel (see docs/CHATGPT.md), e.g.\n\
                 cloudflared tunnel --url http://127.0.0.1:{port}\n\
                 # 3. ChatGPT > Settings > Apps & Connectors > Advanced > Developer mode > Create:\n\
                 #    MCP Server URL: {public}\n\
                 #    Authentication: No authentication (the secret is in the URL)\n\
                 # 4. After changing permissions or upgrading gantry, press Refresh on the connector.\n",
                host = public_host.unwrap_or("<your-tunnel-host>"),
                bind = settings.host,
                port = settings.port,
            )
        }
        Client::ClaudeDesktop => {
            let args_json: Vec<String> = args.iter().map(|a| json_string(a)).collect();
            format!(
                "{{\n  \"mcpServers\": {{\n    \"gantry-{connector}\": {{\n      \"command\": {},\n      \"args\": [{}]\n    }}\n  }}\n}}\n",
                json_string(&exe),
                args_json.join(", ")
            )
        }
        Client::ClaudeCode => {
            let words: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
            format!(
                "claude mcp add gantry-{connector} -- {} {}\n",
                shell_word(&exe),
                words.join(" ")
            )
        }
        Client::Codex => {
            let args_toml: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
            format!(
                "# ~/.codex/config.toml\n[mcp_servers.gantry-{connector}]\ncommand = {}\nargs = [{}]\n",
                toml_string(&exe),
                args_toml.join(", ")
            )
        }
        Client::Cursor => {
            let args_json: Vec<String> = args.iter().map(|a| json_string(a)).collect();
            format!(
                "// .cursor/mcp.json (project) or ~/.cursor/mcp.json (global)\n{{\n  \"mcpServers\": {{\n    \"gantry-{connector}\": {{\n      \"command\": {},\n      \"args\": [{}]\n    }}\n  }}\n}}\n",
                json_string(&exe),
                args_json.join(", ")
            )
        }
        Client::Inspector => {
            let words: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
            format!(
                "# over HTTP (start `{exe} serve --allowed-origin http://localhost:6274` first):\n\
                 npx @modelcontextprotocol/inspector --cli {local_url} --transport http --method tools/list\n\
                 # over stdio:\n\
                 npx @modelcontextprotocol/inspector --cli {} {} --method tools/list\n",
                shell_word(&exe),
                words.join(" ")
            )
        }
    }
}
