//! The Shell connector (seed 002, chatgpt-mcp) through a real MCP client: every tool, and the
//! seed's list of required tests (§17), each named after the item it proves.

use std::io::{BufRead as _, Write as _};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{Sandbox, call, gantry, gone, is_error, text};
use rmcp::RoleClient;
use rmcp::model::CallToolResult;
use rmcp::service::RunningService;
use serde_json::{Value, json};

// `sh` runs what it is given; taken off `runs_files`, it may stand on a narrow list here.
const ALLOW: &str = "[shell]\nallowed_commands = [\"echo\", \"sh\", \"sleep\", \"printenv\"]\nruns_files = [\"make\"]\n";

async fn shell(sb: &Sandbox) -> RunningService<RoleClient, ()> {
    sb.stdio(&["--connector", "shell"]).await
}

/// The structured result of a call that must succeed.
async fn ok(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> Value {
    out(&call(client, tool, args).await)
}

fn out(r: &CallToolResult) -> Value {
    assert!(!is_error(r), "{}", text(r));
    r.structured_content.clone().unwrap_or(Value::Null)
}

/// §17.1: discovery exposes the enabled tools (and only those).
#[tokio::test]
async fn discovery_exposes_the_enabled_tools() {
    let sb = Sandbox::new();
    let client = shell(&sb).await;
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "fs.delete",
            "fs.list",
            "fs.mkdir",
            "fs.move",
            "fs.read",
            "fs.write",
            "process.kill",
            "process.list",
            "shell.exec",
            "system.info"
        ]
    );
    client.cancel().await.unwrap();
    sb.config("[permissions]\nexec = false\nwrite_delete = false\n");
    let client = shell(&sb).await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    for hidden in ["shell.exec", "process.kill", "fs.delete"] {
        assert!(!names.contains(&hidden.to_string()), "{names:?}");
    }
    client.cancel().await.unwrap();
}

/// §17.2: a disabled tool cannot execute, whatever the client sends.
#[tokio::test]
async fn disabled_tools_cannot_execute() {
    let sb = Sandbox::new();
    sb.write("secret.txt", "no\n");
    sb.config(&format!(
        "{ALLOW}[permissions]\nread = false\nexec = false\n"
    ));
    let client = shell(&sb).await;
    let r = call(&client, "fs.read", json!({ "path": "secret.txt" })).await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED") && text(&r).contains("`read` permission is off"),
        "{}",
        text(&r)
    );
    let made = sb.root().join("made");
    let r = call(
        &client,
        "shell.exec",
        json!({ "command": "sh", "args": ["-c", format!("touch {}", made.display())] }),
    )
    .await;
    assert!(text(&r).starts_with("PERMISSION_DENIED"), "{}", text(&r));
    assert!(!made.exists());
    client.cancel().await.unwrap();
}

/// §17.3: reads and writes inside a temporary root work, with the seed's field names.
#[tokio::test]
async fn files_inside_the_root_are_read_and_written() {
    let sb = Sandbox::new();
    let client = shell(&sb).await;
    let o = ok(
        &client,
        "fs.mkdir",
        json!({ "path": "a/b", "recursive": true }),
    )
    .await;
    assert_eq!(o["created"], json!(true));
    let o = ok(
        &client,
        "fs.write",
        json!({ "path": "a/b/f.txt", "content": "one\n" }),
    )
    .await;
    assert_eq!(o["bytes_written"], json!(4));
    let r = call(
        &client,
        "fs.write",
        json!({ "path": "a/b/f.txt", "content": "x" }),
    )
    .await;
    assert!(text(&r).contains("already exists"), "{}", text(&r));
    ok(
        &client,
        "fs.write",
        json!({ "path": "a/b/f.txt", "content": "two\n", "mode": "append" }),
    )
    .await;
    let o = ok(&client, "fs.read", json!({ "path": "a/b/f.txt" })).await;
    assert_eq!(
        (o["content"].as_str(), o["truncated"].as_bool()),
        (Some("one\ntwo\n"), Some(false))
    );
    let o = ok(
        &client,
        "fs.read",
        json!({ "path": "a/b/f.txt", "max_bytes": 3 }),
    )
    .await;
    assert_eq!(
        (o["content"].as_str(), o["truncated"].as_bool()),
        (Some("one"), Some(true))
    );
    ok(
        &client,
        "fs.write",
        json!({ "path": "a/b/f.txt", "content": "new\n", "mode": "overwrite" }),
    )
    .await;
    ok(
        &client,
        "fs.move",
        json!({ "source": "a/b/f.txt", "destination": "a/g.txt" }),
    )
    .await;
    let o = ok(&client, "fs.list", json!({ "path": "a" })).await;
    let entries: Vec<(String, String)> = o["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("b".to_string(), "directory".to_string()),
            ("g.txt".to_string(), "file".to_string())
        ]
    );
    assert_eq!(
        std::fs::read_to_string(sb.root().join("a/g.txt")).unwrap(),
        "new\n"
    );
    ok(&client, "fs.delete", json!({ "path": "a/g.txt" })).await;
    assert!(!sb.root().join("a/g.txt").exists());
    let r = call(
        &client,
        "fs.delete",
        json!({ "path": "a", "recursive": true }),
    )
    .await;
    assert!(text(&r).contains("is a directory"), "{}", text(&r));
    assert!(sb.root().join("a/b").is_dir());
    let o = ok(&client, "system.info", json!({})).await;
    assert_eq!(o["platform"], json!(std::env::consts::OS));
    assert_eq!(
        o["cwd"],
        json!(sb.root().canonicalize().unwrap().display().to_string())
    );
    assert_eq!(o["capabilities"]["fs.read"], json!("on"));
    client.cancel().await.unwrap();
}

/// §17.4: `..` cannot leave the root, for reads, writes, moves and the working directory.
#[tokio::test]
async fn traversal_outside_a_root_is_rejected() {
    let sb = Sandbox::new();
    sb.write("in.txt", "in\n");
    let client = shell(&sb).await;
    for (tool, args) in [
        ("fs.read", json!({ "path": "../config.toml" })),
        (
            "fs.write",
            json!({ "path": "../escaped.txt", "content": "x" }),
        ),
        ("fs.list", json!({ "path": ".." })),
        (
            "fs.move",
            json!({ "source": "in.txt", "destination": "../moved.txt" }),
        ),
        ("fs.mkdir", json!({ "path": "../made" })),
    ] {
        let r = call(&client, tool, args).await;
        assert!(
            text(&r).starts_with("PATH_NOT_ALLOWED"),
            "{tool}: {}",
            text(&r)
        );
    }
    assert!(
        !sb.path("escaped.txt").exists()
            && !sb.path("moved.txt").exists()
            && !sb.path("made").exists()
    );
    assert!(sb.root().join("in.txt").exists());
    client.cancel().await.unwrap();
}

/// §17.5: a symlink that leads out of the root does not take a read or a write with it.
#[tokio::test]
async fn a_symlink_escape_is_rejected() {
    let sb = Sandbox::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), sb.root().join("out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), sb.root().join("s.txt")).unwrap();
    let client = shell(&sb).await;
    for (tool, args) in [
        ("fs.read", json!({ "path": "out/secret.txt" })),
        ("fs.read", json!({ "path": "s.txt" })),
        (
            "fs.write",
            json!({ "path": "s.txt", "content": "x", "mode": "overwrite" }),
        ),
        ("fs.write", json!({ "path": "out/new.txt", "content": "x" })),
    ] {
        let r = call(&client, tool, args).await;
        assert!(
            text(&r).starts_with("PATH_NOT_ALLOWED"),
            "{tool}: {}",
            text(&r)
        );
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "outside\n"
    );
    assert!(!outside.path().join("new.txt").exists());
    client.cancel().await.unwrap();
}

/// §17.6: an allowed command runs, its argv passed as given (no shell between).
#[tokio::test]
async fn an_allowed_command_runs() {
    let sb = Sandbox::new();
    sb.config(ALLOW);
    let client = shell(&sb).await;
    let o = ok(
        &client,
        "shell.exec",
        json!({ "command": "echo", "args": ["a b", "$HOME", ";", "c"] }),
    )
    .await;
    assert_eq!(o["stdout"], json!("a b $HOME ; c\n"));
    assert_eq!(
        (o["exit_code"].clone(), o["timed_out"].clone()),
        (json!(0), json!(false))
    );
    let o = ok(
        &client,
        "shell.exec",
        json!({ "command": "sh", "args": ["-c", "echo err >&2; exit 3"] }),
    )
    .await;
    assert_eq!(
        (o["stderr"].clone(), o["exit_code"].clone()),
        (json!("err\n"), json!(3))
    );
    // The desktop session stays out of its environment unless both desktop permissions are on.
    sb.config(&format!("{ALLOW}[permissions]\nscreen = false\n"));
    let client2 = shell(&sb).await;
    let o = out(&call(
        &client2,
        "shell.exec",
        json!({ "command": "printenv", "args": ["DISPLAY"] }),
    )
    .await);
    assert_eq!(
        (o["stdout"].clone(), o["exit_code"].clone()),
        (json!(""), json!(1))
    );
    let r = call(
        &client2,
        "shell.exec",
        json!({ "command": "echo", "env": { "DISPLAY": ":0" } }),
    )
    .await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED") && text(&r).contains("desktop session"),
        "{}",
        text(&r)
    );
    client.cancel().await.unwrap();
    client2.cancel().await.unwrap();
}

/// §17.7: a command outside the allow-list is refused before it starts.
#[tokio::test]
async fn a_disallowed_command_is_rejected() {
    let sb = Sandbox::new();
    sb.config(ALLOW);
    let client = shell(&sb).await;
    let made = sb.root().join("made");
    for command in ["touch", "/usr/bin/touch", "/bin/echo"] {
        let r = call(
            &client,
            "shell.exec",
            json!({ "command": command, "args": [made.display().to_string()] }),
        )
        .await;
        assert!(
            text(&r).starts_with("COMMAND_NOT_ALLOWED") && text(&r).contains("allowed_commands"),
            "{command}: {}",
            text(&r)
        );
    }
    assert!(!made.exists());
    client.cancel().await.unwrap();
}

/// §17.8: the timeout ends the program and what it started.
#[tokio::test]
async fn a_timeout_terminates_the_command() {
    let sb = Sandbox::new();
    sb.config(ALLOW);
    let client = shell(&sb).await;
    let marker = "3007.25";
    let o = ok(&client, "shell.exec", json!({ "command": "sh", "args": ["-c", format!("sleep {marker} & sleep {marker}")], "timeout_ms": 400 })).await;
    assert_eq!(
        (o["timed_out"].clone(), o["exit_code"].clone()),
        (json!(true), Value::Null)
    );
    assert!(o["duration_ms"].as_i64().unwrap() < 5000, "{o}");
    gone(marker).await;
    client.cancel().await.unwrap();
}

/// §17.9: output is bounded (1 MB of each stream), the rest drained, not held.
#[tokio::test]
async fn output_is_bounded() {
    let sb = Sandbox::new();
    sb.config(ALLOW);
    let client = shell(&sb).await;
    let o = ok(&client, "shell.exec", json!({ "command": "sh", "args": ["-c", "head -c 5000000 /dev/zero | tr '\\0' y; echo done >&2"] })).await;
    assert_eq!(o["stdout"].as_str().unwrap().len(), 1 << 20);
    assert_eq!(
        (
            o["truncated"].clone(),
            o["stderr"].clone(),
            o["exit_code"].clone()
        ),
        (json!(true), json!("done\n"), json!(0))
    );
    client.cancel().await.unwrap();
}

/// §17.10: stateless Streamable HTTP answers independent requests, no session id needed.
#[tokio::test]
async fn stateless_http_serves_independent_requests_without_a_session() {
    let sb = Sandbox::new();
    sb.write("x.txt", "over http\n");
    let server = sb.http(&[]).await;
    let url = server.url("shell").to_string();
    let http = reqwest::Client::new();
    for id in 1..=2 {
        let body = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": "fs.read", "arguments": { "path": "x.txt" } }
        });
        let response = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert!(response.headers().get("mcp-session-id").is_none());
        let status = response.status();
        let said = response.text().await.unwrap();
        assert_eq!(status.as_u16(), 200, "{said}");
        assert!(said.contains("over http"), "{said}");
    }
}

/// §17.11: on stdio nothing but protocol goes to stdout, diagnostics included.
#[test]
fn stdio_writes_no_diagnostics_to_stdout() {
    let sb = Sandbox::new();
    let mut child = Command::new(gantry())
        .args(["serve", "--stdio", "--connector", "shell"])
        .args(sb.args())
        .env("HOME", sb.path("home"))
        .env("GANTRY_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    drop(stdin);
    let rest: Vec<String> = stdout.lines().map_while(Result::ok).collect();
    let out = child.wait_with_output().unwrap();
    for line in std::iter::once(first.trim_end().to_string()).chain(rest) {
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not protocol on stdout: {line:?} ({e})"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
    }
    assert!(!out.stderr.is_empty(), "the debug log went nowhere");
}

/// §17.12: a malformed configuration fails closed at start, naming what is wrong.
#[test]
fn malformed_configuration_fails_closed_at_startup() {
    let sb = Sandbox::new();
    for (config, says) in [
        (
            "[shell]\nallowed_commands = \"git\"\n",
            "config.toml:2:20: invalid type",
        ),
        ("[shell]\nallow = [\"git\"]\n", "unknown field `allow`"),
        (
            "[gateway.servers.x]\nurl = \"http://example.com/mcp\"\nbearer_token_env = \"T\"\n",
            "bearer token",
        ),
    ] {
        sb.config(config);
        let out = Command::new(gantry())
            .args(["serve", "--stdio", "--connector", "shell"])
            .args(sb.args())
            .env("HOME", sb.path("home"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{config}");
        assert!(err.contains(says), "{config}: {err}");
        assert!(out.stdout.is_empty());
    }
}

/// process.list shows the programs this connector is running; process.kill ends one, and
/// refuses any other process (another connector's command included) unless `kill_any` is on.
#[tokio::test]
async fn processes_gantry_started_are_listed_and_killed_and_no_other() {
    let sb = Sandbox::new();
    sb.config(ALLOW);
    let server = sb.http(&[]).await;
    let core = server.client("core").await;
    let shell = server.client("shell").await;
    let marker = "3008.75";
    let url = server.url("shell").to_string();
    let running = tokio::spawn(async move {
        let other = crate::support::http_client(&url).await;
        let r = call(
            &other,
            "shell.exec",
            json!({ "command": "sleep", "args": [marker], "timeout_ms": 30000 }),
        )
        .await;
        other.cancel().await.unwrap();
        r
    });
    let mut program = Value::Null;
    for _ in 0..100 {
        let o = out(&call(&shell, "process.list", json!({})).await);
        if let Some(p) = o["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["args"] == json!([marker]))
        {
            program = p.clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        (program["kind"].clone(), program["command"].clone()),
        (json!("program"), json!("sleep")),
        "{program}"
    );
    // Core's command is Core's: not listed here, not killed from here.
    let r = call(
        &core,
        "exec_command",
        json!({ "cmd": "sleep 3008.5", "yield_time_ms": 300 }),
    )
    .await;
    assert!(text(&r).contains("Process running"), "{}", text(&r));
    let core_session = crate::support::facts(&r)["session_id"].clone();
    let o = out(&call(&shell, "process.list", json!({})).await);
    assert!(!o.to_string().contains("3008.5\""), "{o}");
    let session_pid = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .find(|e| {
            std::fs::read(e.path().join("cmdline")).unwrap_or_default() == b"sleep\x003008.5\x00"
        })
        .and_then(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .unwrap();
    let r = call(&shell, "process.kill", json!({ "pid": session_pid })).await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED") && text(&r).contains("kill_any"),
        "{}",
        text(&r)
    );
    assert!(crate::support::alive("3008.5"));
    let r = call(&shell, "process.kill", json!({ "pid": std::process::id() })).await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED") || text(&r).starts_with("INVALID_INPUT"),
        "{}",
        text(&r)
    );
    out(&call(
        &shell,
        "process.kill",
        json!({ "pid": program["pid"], "signal": "kill" }),
    )
    .await);
    let r = running.await.unwrap();
    let o = out(&r);
    assert_eq!(
        (o["exit_code"].clone(), o["timed_out"].clone()),
        (Value::Null, json!(false)),
        "{o}"
    );
    gone(marker).await;
    let r = call(
        &core,
        "write_stdin",
        json!({ "session_id": core_session, "kill": true }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    gone("3008.5").await;
    core.cancel().await.unwrap();
    shell.cancel().await.unwrap();
}

/// The allow-list decides what runs: a call cannot choose the program through its
/// environment, nor run one it could have written.
#[tokio::test]
async fn the_allow_list_cannot_be_bent() {
    let sb = Sandbox::new();
    sb.config("[shell]\nallowed_commands = [\"*\"]\n");
    std::fs::create_dir_all(sb.root().join("bin")).unwrap();
    std::fs::copy("/bin/echo", sb.root().join("bin/echo")).unwrap();
    let client = shell(&sb).await;
    for var in [
        "PATH",
        "LD_PRELOAD",
        "BASH_ENV",
        "HOME",
        "GIT_CONFIG_GLOBAL",
    ] {
        let r = call(
            &client,
            "shell.exec",
            json!({ "command": "echo", "env": { var: "/tmp" } }),
        )
        .await;
        assert!(
            text(&r).starts_with("INVALID_INPUT") && text(&r).contains(&format!("`{var}`")),
            "{var}: {}",
            text(&r)
        );
    }
    let inside = sb.root().join("bin/echo").display().to_string();
    let r = call(
        &client,
        "shell.exec",
        json!({ "command": inside, "args": ["x"] }),
    )
    .await;
    assert!(
        text(&r).starts_with("COMMAND_NOT_ALLOWED")
            && text(&r).contains("inside the approved roots"),
        "{}",
        text(&r)
    );
    let r = call(&client, "shell.exec", json!({ "command": "bin/echo" })).await;
    assert!(text(&r).starts_with("NOT_FOUND"), "{}", text(&r));
    let o = ok(
        &client,
        "shell.exec",
        json!({ "command": "echo", "args": ["ok"], "env": { "LANG": "C" } }),
    )
    .await;
    assert_eq!(o["stdout"], json!("ok\n"));
    client.cancel().await.unwrap();
}

/// A program that exits while something it started holds its output keeps its exit code and
/// output; what it left running is ended.
#[tokio::test]
async fn a_program_that_leaves_a_child_behind_keeps_its_output() {
    let sb = Sandbox::new();
    sb.config(ALLOW);
    let client = shell(&sb).await;
    let o = ok(&client, "shell.exec", json!({ "command": "sh", "args": ["-c", "echo important; sleep 3009.25 & exit 5"], "timeout_ms": 20000 })).await;
    assert_eq!(
        (
            o["stdout"].clone(),
            o["exit_code"].clone(),
            o["timed_out"].clone()
        ),
        (json!("important\n"), json!(5), json!(false)),
        "{o}"
    );
    assert!(o["duration_ms"].as_i64().unwrap() < 5000, "{o}");
    gone("3009.25").await;
    client.cancel().await.unwrap();
}

/// An overwrite keeps the file's permission bits; gantry's own paths, even ones that do not
/// exist yet, are never made by a move.
#[tokio::test]
async fn writes_keep_modes_and_never_place_gantrys_files() {
    use std::os::unix::fs::PermissionsExt as _;
    let sb = Sandbox::with_own_files_in_root();
    std::fs::write(sb.root().join("secret.env"), "A=1\n").unwrap();
    std::fs::set_permissions(
        sb.root().join("secret.env"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::create_dir_all(sb.root().join("elsewhere")).unwrap();
    std::os::unix::fs::symlink("elsewhere", sb.root().join("lnk")).unwrap();
    let client = shell(&sb).await;
    ok(
        &client,
        "fs.write",
        json!({ "path": "secret.env", "content": "A=2\n", "mode": "overwrite" }),
    )
    .await;
    let mode = std::fs::metadata(sb.root().join("secret.env"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    assert!(!sb.path("state/spill").exists());
    let r = call(
        &client,
        "fs.move",
        json!({ "source": "lnk", "destination": "state/spill" }),
    )
    .await;
    assert!(text(&r).starts_with("PATH_NOT_ALLOWED"), "{}", text(&r));
    assert!(std::fs::symlink_metadata(sb.path("state/spill")).is_err());
    client.cancel().await.unwrap();
}

/// Each connector's rights can differ: one policy takes `exec` from the Shell connector while
/// Core keeps it, both served by the same process.
#[tokio::test]
async fn a_policy_narrows_one_connectors_permissions_only() {
    let sb = Sandbox::new();
    sb.config(ALLOW);
    let policies = sb.path("policies");
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(
        policies.join("shell.cedar"),
        "@id(\"local.shell_runs_nothing\")\n@reason(\"the Shell connector runs no programs here\")\nforbid (principal in Connector::\"shell\", action in Action::\"permission:exec\", resource);\n",
    )
    .unwrap();
    let server = sb
        .http(&["--policies", &policies.display().to_string()])
        .await;
    let shell = server.client("shell").await;
    let core = server.client("core").await;
    let r = call(
        &shell,
        "shell.exec",
        json!({ "command": "echo", "args": ["x"] }),
    )
    .await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED") && text(&r).contains("runs no programs here"),
        "{}",
        text(&r)
    );
    let r = call(&core, "exec_command", json!({ "cmd": "echo core-runs" })).await;
    assert!(text(&r).contains("core-runs"), "{}", text(&r));
    shell.cancel().await.unwrap();
    core.cancel().await.unwrap();
}
