//! What the end-to-end suite and the benches share: starting a real `gantry` for a test (temp
//! state dir, temp config, temp root, nothing from the real home directory), MCP clients over
//! stdio and HTTP, runtimes and percentiles.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use tokio::io::AsyncBufReadExt;

pub mod machines;

/// A path in the workspace (this crate lives at `tests/support`).
pub fn workspace(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// The README's Cedar example that begins with policy `first_id`, as written there, so a
/// test loads exactly what a reader copies.
pub fn readme_cedar_example(first_id: &str) -> String {
    let readme = std::fs::read_to_string(workspace("README.md")).unwrap();
    let start = format!("@id(\"{first_id}\")");
    readme
        .split("```cedar\n")
        .find(|b| b.starts_with(&start))
        .and_then(|b| b.split("```").next())
        .unwrap_or_else(|| panic!("the README has no Cedar example starting with {start}"))
        .to_string()
}

/// A check that cannot run here (no browser, no display, no tmpfs, no corpus): a failure
/// where every check must run (`GANTRY_TEST_STRICT`, which tests/run sets under CI=true), a
/// loud warning elsewhere. Returns so the caller can skip what it cannot check.
pub fn cannot_check(why: &str) {
    if std::env::var_os("GANTRY_TEST_STRICT").is_some_and(|v| !v.is_empty()) {
        panic!("could not check, and under CI every check must run: {why}");
    }
    eprintln!("!! SKIPPED, checked nothing: {why}");
}

/// A single-threaded tokio runtime with I/O and timers, as the benches drive their clients.
pub fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A multi-threaded tokio runtime with I/O and timers, as an HTTP client load runs on.
pub fn multi_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The `p` quantile (0 to 1) of `sorted` durations, by the nearest rank.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The binary under test: `gantry` beside the running test or bench binary's `deps/`
/// directory, where cargo builds it for the `gantry` package's tests and benches
/// (`GANTRY_TEST_BIN` names another).
pub fn gantry() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(bin) = std::env::var_os("GANTRY_TEST_BIN") {
            return bin.to_string_lossy().into_owned();
        }
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(Path::parent).unwrap();
        let bin = profile_dir.join(format!("gantry{}", std::env::consts::EXE_SUFFIX));
        assert!(bin.is_file(), "no gantry binary at {}", bin.display());
        bin.to_string_lossy().into_owned()
    })
}

/// A private workspace for one test (or bench): its own config, state, home and root.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    root: Option<PathBuf>,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::new()
    }
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("root")).unwrap();
        std::fs::create_dir_all(dir.path().join("state")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Sandbox { dir, root: None }
    }

    /// A sandbox whose approved root is `root` (which may live outside it, e.g. a reused
    /// bench tree) instead of its own `root/`.
    pub fn rooted_at(root: &Path) -> Sandbox {
        Sandbox {
            root: Some(root.to_path_buf()),
            ..Sandbox::new()
        }
    }

    /// A sandbox whose approved root is the whole sandbox, so its config file and state
    /// directory lie inside the root (as when gantry is started from the home directory).
    pub fn with_own_files_in_root() -> Sandbox {
        let mut sb = Sandbox::new();
        sb.root = Some(sb.dir.path().canonicalize().unwrap());
        sb
    }

    pub fn root(&self) -> PathBuf {
        self.root
            .clone()
            .unwrap_or_else(|| self.dir.path().join("root"))
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

    /// Writes `rel` under the sandbox's HOME (the one `serve` gives the server).
    pub fn write_home(&self, rel: &str, text: &str) {
        let p = self.path("home").join(rel);
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

    /// `serve` of the gantry binary at `binary` with this sandbox's config, state and root,
    /// its home as HOME (login shells must never read the real profile), started in its root;
    /// `extra` flags appended.
    pub fn serve(&self, binary: &Path, extra: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(binary);
        cmd.arg("serve")
            .args(self.args())
            .args(extra)
            .current_dir(self.root())
            .env("GANTRY_LOG", "warn")
            .env("HOME", self.path("home"))
            // The agents' own overrides would point the transcript import at real ones.
            .env_remove("CODEX_HOME")
            .env_remove("CLAUDE_CONFIG_DIR");
        cmd
    }

    /// A real MCP client talking to `gantry serve --stdio`.
    pub async fn stdio(&self, extra: &[&str]) -> RunningService<RoleClient, ()> {
        self.stdio_of(Path::new(gantry()), extra).await
    }

    /// A real MCP client talking to `serve --stdio` of the gantry binary at `binary`.
    pub async fn stdio_of(&self, binary: &Path, extra: &[&str]) -> RunningService<RoleClient, ()> {
        let mut cmd = self.serve(binary, &["--stdio"]);
        cmd.args(extra);
        stdio_client(cmd).await.1
    }

    /// `serve` as users run it, for benches: this sandbox's config, state and root, but the
    /// real HOME (and so the real shell profile), never the sandbox's empty one.
    pub fn serve_as_user(&self, binary: &Path, extra: &[&str]) -> tokio::process::Command {
        let mut cmd = self.serve(binary, extra);
        if let Some(home) = std::env::var_os("HOME") {
            cmd.env("HOME", home);
        }
        // The default log level, its line per call included, written to a file as a client
        // keeps a server's log (Claude Desktop, Cursor): a quieter level is not what users run.
        cmd.env_remove("GANTRY_LOG");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("serve.log"))
            .unwrap();
        cmd.stderr(log);
        cmd
    }

    /// What `gantry check` on this sandbox's config, state and root says (stderr, then
    /// stdout).
    pub fn check(&self) -> String {
        let out = std::process::Command::new(gantry())
            .arg("check")
            .args(self.args())
            .env("HOME", self.path("home"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout)
    }

    /// `gantry serve` over HTTP on a free port.
    pub async fn http(&self, extra: &[&str]) -> HttpServer {
        let mut cmd = self.serve(Path::new(gantry()), &["--port", "0"]);
        cmd.args(extra);
        http_server(cmd).await
    }
}

/// A real MCP client on the stdio of `cmd` (a `serve --stdio` command), and the server's pid.
pub async fn stdio_client(cmd: tokio::process::Command) -> (u32, RunningService<RoleClient, ()>) {
    let transport = TokioChildProcess::new(cmd).unwrap();
    let pid = transport.id().unwrap();
    (pid, ().serve(transport).await.unwrap())
}

/// `serve` of the sandbox with its public host on loopback (`127.0.0.1:PORT`, the port chosen
/// first, as a tunnel would deliver it), `env` set for it; the server and its port.
pub async fn public_host_server(sb: &Sandbox, env: &[(&str, &Path)]) -> (HttpServer, u16) {
    let port = machines::free_port();
    let public = format!("127.0.0.1:{port}");
    let mut cmd = sb.serve(
        Path::new(gantry()),
        &["--port", &port.to_string(), "--public-host", &public],
    );
    cmd.envs(env.iter().copied());
    (http_server(cmd).await, port)
}

/// Starts `cmd` (a `serve` over HTTP) and reads the URL it prints for each connector.
pub async fn http_server(cmd: tokio::process::Command) -> HttpServer {
    http_server_with(cmd, false).await
}

/// The same, its log kept in `child.stderr` (piped) when `keep_log`.
pub async fn http_server_with(mut cmd: tokio::process::Command, keep_log: bool) -> HttpServer {
    if keep_log {
        cmd.stderr(Stdio::piped());
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut urls = HashMap::new();
    // One line per served connector: `core`, and `desktop` where a display is reached.
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let mut admin = None;
    let mut public = HashMap::new();
    let mut take = |line: &str| {
        let (name, url) = line.split_once(' ').unwrap();
        if name == "admin" {
            admin = Some(url.to_string());
        } else if let Some(connector) = name.strip_suffix("@public") {
            public.insert(connector.to_string(), url.to_string());
        } else {
            urls.insert(name.to_string(), url.to_string());
        }
    };
    take(&first);
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_millis(200), lines.next_line()).await
    {
        take(&line);
    }
    HttpServer {
        child,
        urls,
        admin,
        public,
    }
}

pub struct HttpServer {
    pub child: tokio::process::Child,
    /// The connector URLs on loopback.
    pub urls: HashMap<String, String>,
    /// The control page, unless started with --no-admin.
    pub admin: Option<String>,
    /// The connector URLs through the public host, when one was given.
    pub public: HashMap<String, String>,
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
        http_client(self.url(connector)).await
    }
}

/// Calls a tool with JSON arguments.
pub async fn call<H: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, H>,
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

/// A command's output: what follows the `Output:` line of an exec result's text.
pub fn command_output(result: &CallToolResult) -> String {
    let t = text(result);
    match t.split_once("\nOutput:\n") {
        Some((_, out)) => out.to_string(),
        None => panic!("no `Output:` line in {t:?}"),
    }
}

/// The machine facts of a text-shaped tool's result (`_meta["gantry/result"]`), or null.
pub fn facts(result: &CallToolResult) -> serde_json::Value {
    result
        .meta
        .as_ref()
        .and_then(|m| m.0.get(tool_api::FACTS_META_KEY))
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}

/// How an MCP host turns a tool result into what its model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// ChatGPT: every text block and `structuredContent` (the Apps SDK says the model reads it
    /// verbatim); `_meta` goes to widgets only.
    ReadsBoth,
    /// Codex: `structuredContent` when present, else the content blocks.
    PrefersStructured,
    /// Claude, the OpenAI Agents SDK: the content blocks only.
    ContentOnly,
}

impl Host {
    pub const ALL: [Host; 3] = [Host::ReadsBoth, Host::PrefersStructured, Host::ContentOnly];

    pub fn name(self) -> &'static str {
        match self {
            Host::ReadsBoth => "reads both (ChatGPT)",
            Host::PrefersStructured => "prefers structured (Codex)",
            Host::ContentOnly => "content only (Claude)",
        }
    }

    /// The text this host's model reads for `result` (images and `_meta` left out).
    pub fn model_view(self, result: &CallToolResult) -> String {
        let texts: String = result
            .content
            .iter()
            .filter_map(|c| c.as_text())
            .map(|t| t.text.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let structured = result
            .structured_content
            .as_ref()
            .filter(|v| !v.is_null())
            .map(ToString::to_string);
        match (self, structured) {
            (Host::ReadsBoth, Some(s)) => format!("{texts}\n{s}"),
            (Host::PrefersStructured, Some(s)) => s,
            (_, _) => texts,
        }
    }
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
        // Stands for the upstream tools; never listed itself.
        .filter(|t| !t.upstream)
        .map(|t| t.name.clone())
        .collect()
}

/// A field of `/proc/<pid>/status` in kB (`VmHWM:`, `VmRSS:`) or as a count (`Threads:`); 0
/// when it cannot be read (Linux only).
pub fn proc_status(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The names of the tools `client` is offered, in the server's order.
pub async fn tool_names(client: &RunningService<RoleClient, ()>) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect()
}

/// A real MCP client (rmcp) on a Streamable HTTP endpoint.
pub async fn http_client(url: &str) -> RunningService<RoleClient, ()> {
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_string());
    ().serve(transport).await.unwrap()
}

/// Whether a live (non-zombie) process has `marker` in its command line (Linux: /proc). A
/// test gives a process a marker of its own, such as a unique sleep length.
pub fn alive(marker: &str) -> bool {
    !running(marker).is_empty()
}

/// The processes (not zombies) whose command line holds `marker`, each as its `/proc/PID/stat`
/// line, for a failure message to show what was left.
pub fn running(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let zombie = stat.rfind(')').and_then(|i| stat.get(i + 2..i + 3)) == Some("Z");
            (!zombie
                && String::from_utf8_lossy(&cmd)
                    .replace('\0', " ")
                    .contains(marker))
            .then(|| stat.trim().to_string())
        })
        .collect()
}

/// Waits (up to 3 s) for every process with `marker` to end; fails the test if one is left.
pub async fn gone(marker: &str) {
    for _ in 0..150 {
        if !alive(marker) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("`{marker}` was left running");
}
