//! Starting a real `gantry` for a test: temp state dir, temp config, temp root, nothing from
//! the real home directory.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use tokio::io::AsyncBufReadExt;

/// A path in the workspace (this crate lives at `runtime/server`).
pub fn workspace(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// The binary under test.
pub fn gantry() -> &'static str {
    env!("CARGO_BIN_EXE_gantry")
}

/// A private workspace for one test.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("root")).unwrap();
        std::fs::create_dir_all(dir.path().join("state")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Sandbox { dir }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.root().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(p, text).unwrap();
    }

    pub fn config(&self, text: &str) {
        std::fs::write(self.path("config.toml"), text).unwrap();
    }

    /// The flags every test passes: its own config, state and root.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--config".into(),
            self.path("config.toml").display().to_string(),
            "--state-dir".into(),
            self.path("state").display().to_string(),
            "--root".into(),
            self.root().display().to_string(),
        ]
    }

    /// A real MCP client talking to `gantry serve --stdio`.
    pub async fn stdio(&self, extra: &[&str]) -> RunningService<RoleClient, ()> {
        self.stdio_of(Path::new(gantry()), extra).await
    }

    /// A real MCP client talking to `serve --stdio` of the gantry binary at `binary`.
    pub async fn stdio_of(&self, binary: &Path, extra: &[&str]) -> RunningService<RoleClient, ()> {
        let args = self.args();
        let cwd = self.root();
        let home = self.path("home");
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let transport =
            TokioChildProcess::new(tokio::process::Command::new(binary).configure(|cmd| {
                cmd.arg("serve")
                    .arg("--stdio")
                    .args(&args)
                    .args(&extra)
                    .current_dir(&cwd)
                    .env("GANTRY_LOG", "warn")
                    // Login shells must never read the real home's profile.
                    .env("HOME", &home);
            }))
            .unwrap();
        ().serve(transport).await.unwrap()
    }

    /// `gantry serve` over HTTP on a free port.
    pub async fn http(&self, extra: &[&str]) -> HttpServer {
        let mut child = tokio::process::Command::new(gantry())
            .arg("serve")
            .args(self.args())
            .args(["--port", "0"])
            .args(extra)
            .current_dir(self.root())
            .env("GANTRY_LOG", "warn")
            .env("HOME", self.path("home"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let mut urls = HashMap::new();
        // One line per served connector; on Linux that is `core` only.
        let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let (name, url) = first.split_once(' ').unwrap();
        urls.insert(name.to_string(), url.to_string());
        while let Ok(Ok(Some(line))) =
            tokio::time::timeout(Duration::from_millis(200), lines.next_line()).await
        {
            if let Some((name, url)) = line.split_once(' ') {
                urls.insert(name.to_string(), url.to_string());
            }
        }
        HttpServer { child, urls }
    }
}

pub struct HttpServer {
    pub child: tokio::process::Child,
    pub urls: HashMap<String, String>,
}

impl HttpServer {
    pub fn url(&self, connector: &str) -> &str {
        &self.urls[connector]
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        let url = self.url("core");
        let rest = url.strip_prefix("http://").unwrap();
        format!("http://{}", &rest[..rest.find('/').unwrap()])
    }

    pub fn token(&self, connector: &str) -> String {
        let url = self.url(connector);
        url.rsplit('/').nth(1).unwrap().to_string()
    }

    pub async fn client(&self, connector: &str) -> RunningService<RoleClient, ()> {
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(
            self.url(connector).to_string(),
        );
        ().serve(transport).await.unwrap()
    }
}

/// Calls a tool with JSON arguments.
pub async fn call(
    client: &RunningService<RoleClient, ()>,
    name: &str,
    args: serde_json::Value,
) -> CallToolResult {
    let serde_json::Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(name.to_string()).with_arguments(args))
        .await
        .unwrap()
}

/// The text of the first content block.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

pub fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

/// The declared tools of `connector` on Linux with a fresh config, computed from surface.toml
/// itself (not from the runtime's publication logic).
pub fn declared_fresh_linux_tools(connector: &str) -> Vec<String> {
    let text = std::fs::read_to_string(workspace("surface.toml")).unwrap();
    let surface = surface::Surface::parse("surface.toml", &text).unwrap();
    let linux = surface::Platform::Linux;
    let on = |p: &str| {
        let perm = surface.permission(p).unwrap();
        perm.default[2] && perm.platforms.contains(&linux)
    };
    surface
        .tools_of(connector)
        .filter(|t| t.platforms.contains(&linux))
        .filter(|t| t.requires.iter().all(|p| on(p)))
        .filter(|t| t.operations.is_empty() || t.operations.iter().any(|o| on(&o.requires)))
        .filter(|t| !t.unpublished_when.iter().any(|p| on(p)))
        .map(|t| t.name.clone())
        .collect()
}
