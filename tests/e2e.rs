//! End to end: the real `gantry` binary, a real MCP client (rmcp's), over stdio and HTTP.

use crate::support::{Sandbox, call, declared_fresh_linux_tools, facts, gantry, is_error, text};
use serde_json::{Value, json};

#[tokio::test]
async fn stdio_tools_list_is_what_the_surface_declares_for_this_platform() {
    let sb = Sandbox::new();
    let client = sb.stdio(&[]).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, declared_fresh_linux_tools("core"));
    for t in &tools {
        let a = t
            .annotations
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no annotations", t.name));
        assert!(
            a.read_only_hint.is_some() && a.destructive_hint.is_some(),
            "{}",
            t.name
        );
        assert!(
            a.idempotent_hint.is_some() && a.open_world_hint.is_some(),
            "{}",
            t.name
        );
        assert_eq!(
            t.input_schema.get("additionalProperties"),
            Some(&json!(false)),
            "{}",
            t.name
        );
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn stdio_read_returns_the_text_once_and_facts_in_meta() {
    let sb = Sandbox::new();
    sb.write("notes/a.txt", "one\ntwo\n");
    let client = sb.stdio(&[]).await;
    let result = call(
        &client,
        "read",
        json!({ "paths": ["notes/a.txt", "notes"] }),
    )
    .await;
    assert!(!is_error(&result), "{}", text(&result));
    // No structured copy: the model reads the file once, in the text block.
    assert_eq!(result.structured_content, None);
    let f = facts(&result);
    assert_eq!(f["entries"][0]["kind"], "text", "{f}");
    assert_eq!(f["entries"][0]["total_lines"], 2);
    assert_eq!(f["entries"][0].get("text"), None, "{f}");
    assert_eq!(f["entries"][1]["kind"], "directory");
    assert_eq!(f["entries"][1]["entries"], 1);
    assert_eq!(f["truncated"], false);
    // The file verbatim under a header, the listing one entry a line: name, size, mtime.
    let mtime = std::fs::metadata(sb.root().join("notes/a.txt"))
        .unwrap()
        .modified()
        .unwrap();
    let t = text(&result);
    assert_eq!(
        t,
        format!(
            "==> notes/a.txt (lines 1-2 of 2) <==\none\ntwo\n==> notes/ (directory) <==\na.txt  8  {}\n",
            humantime::format_rfc3339_seconds(mtime)
        )
    );
    assert_eq!(t.matches("one\ntwo\n").count(), 1, "{t}");
    // Only the one text block: no JSON copy of the file after it.
    assert_eq!(result.content.len(), 1, "{:?}", result.content);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn bad_arguments_are_refused_naming_the_field() {
    let sb = Sandbox::new();
    let client = sb.stdio(&[]).await;
    let cases = [
        (
            json!({ "paths": "a.txt" }),
            "INVALID_INPUT: paths: invalid type: string \"a.txt\", expected a sequence",
        ),
        (
            json!({ "paths": ["a"], "colour": 1 }),
            "INVALID_INPUT: colour: unknown field `colour`, expected `paths` or `ranges`",
        ),
        (
            json!({}),
            "INVALID_INPUT: give at least one of `paths`, `ranges`",
        ),
        (
            json!({ "paths": [], "ranges": [] }),
            "INVALID_INPUT: give at least one path in `paths` or `ranges`",
        ),
        (
            json!({ "ranges": [{ "path": "a", "start_line": 0 }] }),
            "INVALID_INPUT: ranges[0].start_line: 0 is below the minimum 1",
        ),
    ];
    for (args, expected) in cases {
        let result = call(&client, "read", args.clone()).await;
        assert!(is_error(&result), "{args}");
        assert_eq!(text(&result), expected, "{args}");
    }
    let result = call(
        &client,
        "exec_command",
        json!({ "cmd": "echo hi", "cmds": ["echo"] }),
    )
    .await;
    assert_eq!(
        text(&result),
        "INVALID_INPUT: give exactly one of `cmd`, `cmds`, not `cmd` and `cmds`"
    );
    client.cancel().await.unwrap();
}

// A planned tool's NOT_IMPLEMENTED answer is tested on the fixture surface
// (tests/surface_fixture): gantry's own surface lists none.
#[tokio::test]
async fn a_call_refused_by_policy_never_reaches_its_handler() {
    let sb = Sandbox::new();
    // With session recording off, `session` is refused by policy before any handler.
    sb.config("[permissions]\nsession_recording = false\n");
    let client = sb.stdio(&[]).await;
    let result = call(&client, "session", json!({ "action": "search" })).await;
    assert_eq!(
        text(&result),
        format!(
            "PERMISSION_DENIED: `session` denied: the `session_recording` permission is off (policy `permission.session_recording` in the base generated from surface.toml); to allow it, set `session_recording = true` under [permissions] in {} (applies from the next call)",
            sb.path("config.toml").display()
        )
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_permission_turned_off_hides_the_tool_and_denies_the_call() {
    let sb = Sandbox::new();
    sb.write("a.txt", "x");
    sb.config("[permissions]\nread = false\n");
    let client = sb.stdio(&[]).await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(!names.contains(&"read".to_string()), "{names:?}");
    // Hidden is not enough: a client that cached the schema still gets refused.
    let result = call(&client, "read", json!({ "paths": ["a.txt"] })).await;
    assert_eq!(
        text(&result),
        format!(
            "PERMISSION_DENIED: `read` denied: the `read` permission is off (policy `permission.read` in the base generated from surface.toml); to allow it, set `read = true` under [permissions] in {} (applies from the next call)",
            sb.path("config.toml").display()
        )
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn read_only_mode_hides_and_refuses_what_mutates() {
    let sb = Sandbox::new();
    let client = sb.stdio(&["--read-only"]).await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["read", "view_image", "find", "session"]);
    let result = call(&client, "exec_command", json!({ "cmd": "echo hi" })).await;
    assert_eq!(
        text(&result),
        format!(
            "PERMISSION_DENIED: `exec_command` denied: read-only mode is on (policy `mode.read_only` in the base generated from surface.toml); to allow it, set `read_only = false` in {} (or on the control page), or start gantry without --read-only and without GANTRY_READ_ONLY",
            sb.path("config.toml").display()
        )
    );
    client.cancel().await.unwrap();
}

#[cfg(unix)]
#[tokio::test]
async fn a_denied_call_has_no_side_effect() {
    // Opening a FIFO for reading is a side effect a writer can observe: its own open()
    // completes. Policy forbids special files, so gantry must never open it.
    let sb = Sandbox::new();
    let fifo = sb.root().join("pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let opened = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = opened.clone();
    let writer_path = fifo.clone();
    std::thread::spawn(move || {
        // Blocks until someone opens the FIFO for reading.
        if std::fs::OpenOptions::new()
            .write(true)
            .open(&writer_path)
            .is_ok()
        {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let client = sb.stdio(&[]).await;
    let result = call(&client, "read", json!({ "paths": ["pipe"] })).await;
    let entry = &facts(&result)["entries"][0];
    assert_eq!(entry["error_code"], "PATH_NOT_ALLOWED", "{entry}");
    let shown = text(&result);
    assert!(
        shown.starts_with("==> pipe (error: PATH_NOT_ALLOWED) <==\n["),
        "{shown}"
    );
    assert!(shown.contains("policy `path.no_special_files`"), "{shown}");
    assert!(is_error(&result), "the only path failed: {shown}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !opened.load(std::sync::atomic::Ordering::SeqCst),
        "gantry opened the FIFO"
    );
    client.cancel().await.unwrap();
    // Release the writer thread: a non-blocking read open lets its open() complete.
    use std::os::unix::fs::OpenOptionsExt as _;
    const O_NONBLOCK: i32 = if cfg!(target_os = "linux") {
        0o4000
    } else {
        0x0004
    };
    let _reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(&fifo);
}

#[tokio::test]
async fn http_serves_core_statelessly_with_the_same_surface() {
    let sb = Sandbox::new();
    sb.write("a.txt", "over http\n");
    let server = sb.http(&[]).await;
    // Every connector, the desktop one only where there is a display to drive, the hosts
    // and gateway ones only when the config names a machine or an upstream (none here).
    let display = std::env::var_os("DISPLAY").is_some_and(|d| !d.is_empty());
    let mut want: Vec<&str> = generated::CONNECTORS
        .iter()
        .map(|c| c.name)
        .filter(|n| display || *n != generated::desktop::NAME)
        .filter(|n| *n != generated::hosts::NAME && *n != generated::gateway::NAME)
        .collect();
    want.sort_unstable();
    let mut served: Vec<&str> = server.urls.keys().map(String::as_str).collect();
    served.sort_unstable();
    assert_eq!(served, want);
    let client = server.client("core").await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, declared_fresh_linux_tools("core"));
    let result = call(&client, "read", json!({ "paths": ["a.txt"] })).await;
    assert_eq!(text(&result), "==> a.txt (lines 1-1 of 1) <==\nover http\n");
    assert_eq!(facts(&result)["entries"][0]["total_lines"], 1);
    // A desktop tool is unknown on the core endpoint, whatever the client sends.
    let result = call(&client, "observe", json!({})).await;
    assert!(
        text(&result).starts_with("UNKNOWN_TOOL: this connector has no tool `observe`"),
        "{}",
        text(&result)
    );
    client.cancel().await.unwrap();

    // Independent requests, no session: initialize returns no session id, and a tools/call
    // works with nothing but the URL.
    let http = reqwest::Client::new();
    let post = |body: serde_json::Value| {
        http.post(server.url("core"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(body.to_string())
            .send()
    };
    let init = post(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}})).await.unwrap();
    assert_eq!(init.status(), 200);
    assert!(init.headers().get("mcp-session-id").is_none());
    let called = post(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read","arguments":{"paths":["a.txt"]}}})).await.unwrap();
    let body: serde_json::Value = called.json().await.unwrap();
    assert_eq!(
        body["result"]["content"][0]["text"], "==> a.txt (lines 1-1 of 1) <==\nover http\n",
        "{body}"
    );
    assert_eq!(
        body["result"]["_meta"]["gantry/result"]["entries"][0]["kind"], "text",
        "{body}"
    );
    assert_eq!(body["result"].get("structuredContent"), None, "{body}");
}

#[tokio::test]
async fn http_exposes_nothing_but_connector_endpoints_and_healthz() {
    let sb = Sandbox::new();
    let server = sb.http(&[]).await;
    let http = reqwest::Client::new();
    let base = server.base();
    let token = server.token("core");
    let health = http.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let wrong = format!("{}x", &token[..token.len() - 1]);
    for path in [
        "/",
        "/mcp",
        &format!("/{wrong}/mcp"),
        &format!("/{token}"),
        &format!("/{token}/mcp/x"),
        "/core/mcp",
    ] {
        let response = http
            .post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{path}");
        assert_eq!(
            response.text().await.unwrap(),
            "",
            "{path}: a 404 must not hint at what exists"
        );
    }
    // Still healthy afterwards.
    assert_eq!(
        http.get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test]
async fn logs_go_to_stderr_and_the_url_line_is_all_stdout_says() {
    let sb = Sandbox::new();
    let server = sb.http(&[]).await;
    let url = server.url("core");
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    assert_eq!(server.token("core").len(), 43);
}

#[tokio::test]
async fn editing_the_config_changes_permissions_live_and_a_broken_config_fails_closed() {
    let sb = Sandbox::new();
    sb.write("a.txt", "x\n");
    sb.config("[permissions]\nread = true\n");
    let client = sb.stdio(&[]).await;
    let read = || call(&client, "read", json!({ "paths": ["a.txt"] }));
    assert!(!is_error(&read().await));

    // mtime granularity: make sure the edit is a new version of the file.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    sb.config("[permissions]\nread = false\n");
    let result = read().await;
    assert!(
        text(&result).starts_with("PERMISSION_DENIED: `read` denied: the `read` permission is off"),
        "{}",
        text(&result)
    );
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(!names.contains(&"read".to_string()), "{names:?}");

    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    sb.config("[permissions]\nread = maybe\n");
    let result = read().await;
    let shown = text(&result);
    assert!(shown.starts_with("PERMISSION_DENIED: the config file or a policy file cannot be used, so every call is refused until it is fixed: "), "{shown}");
    assert!(shown.contains("config.toml:2:8: "), "{shown}");
    assert_eq!(client.list_all_tools().await.unwrap().len(), 0);

    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    sb.config("[permissions]\nread = true\n");
    assert!(!is_error(&read().await));
    client.cancel().await.unwrap();
}

/// What `read` of `a.txt` holding `alpha` shows.
const READ_A: &str = "==> a.txt (lines 1-1 of 1) <==\nalpha\n";

/// Lines a host would send: handshake, then one `read`.
fn scripted_session(file: &str) -> String {
    [
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": { "name": "script", "version": "1" } } }),
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": { "name": "read", "arguments": { "paths": [file] } } }),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect()
}

/// Writes `session` to the child's stdin, closes it, and waits for the child's output.
fn feed(mut child: std::process::Child, session: &str) -> std::process::Output {
    use std::io::Write as _;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(session.as_bytes()).unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// The reply to request 2 among `stdout`'s lines.
fn read_reply(stdout: &[u8]) -> Value {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| panic!("no reply: {}", String::from_utf8_lossy(stdout)))
}

#[test]
fn stdio_works_when_stdin_is_a_file_or_stderr_shares_the_stdout_pipe() {
    let sb = Sandbox::new();
    sb.write("a.txt", "alpha\n");
    // stdin a regular file (not pollable): the portable streams serve it, and its end stops
    // the server.
    std::fs::write(sb.path("session.jsonl"), scripted_session("a.txt")).unwrap();
    let out = std::process::Command::new(gantry())
        .args(["serve", "--stdio"])
        .args(sb.args())
        .env("HOME", sb.path("home"))
        .env("GANTRY_LOG", "error")
        .stdin(std::fs::File::open(sb.path("session.jsonl")).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reply = read_reply(&out.stdout);
    assert_eq!(reply["result"]["content"][0]["text"], READ_A, "{reply}");

    // stdout and stderr one pipe (`2>&1`), with logs on: still one JSON message a line, and the
    // log lines intact beside them.
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec \"$0\" \"$@\" 2>&1")
        .arg(gantry())
        .args(["serve", "--stdio"])
        .args(sb.args())
        .env("HOME", sb.path("home"))
        .env("GANTRY_LOG", "debug")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = feed(child, &scripted_session("a.txt"));
    assert!(out.status.success());
    let reply = read_reply(&out.stdout);
    assert_eq!(reply["result"]["content"][0]["text"], READ_A, "{reply}");
    let all = String::from_utf8_lossy(&out.stdout);
    assert!(all.contains("DEBUG"), "{all}");
    assert!(!all.contains("pipes polled by the reactor"), "{all}");

    // Plain pipes, what hosts give: polled by the reactor.
    let child = std::process::Command::new(gantry())
        .args(["serve", "--stdio"])
        .args(sb.args())
        .env("HOME", sb.path("home"))
        .env("GANTRY_LOG", "debug")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = feed(child, &scripted_session("a.txt"));
    let reply = read_reply(&out.stdout);
    assert_eq!(reply["result"]["content"][0]["text"], READ_A, "{reply}");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("pipes polled by the reactor"), "{log}");
}

#[cfg(unix)]
#[test]
fn stdio_hands_its_pipes_back_in_blocking_mode() {
    use std::io::Write as _;
    use std::os::fd::OwnedFd;

    use rustix::fs::{OFlags, fcntl_getfl};

    let sb = Sandbox::new();
    sb.write("a.txt", "alpha\n");
    let cloexec = rustix::pipe::PipeFlags::CLOEXEC;
    let (in_r, in_w) = rustix::pipe::pipe_with(cloexec).unwrap();
    let (out_r, out_w) = rustix::pipe::pipe_with(cloexec).unwrap();
    // Duplicates share the open pipes (and so their mode) with the child's stdin and stdout,
    // the way a parent shell keeps using a pipe after gantry exits.
    let (kept_in, kept_out): (OwnedFd, OwnedFd) =
        (in_r.try_clone().unwrap(), out_w.try_clone().unwrap());
    let child = std::process::Command::new(gantry())
        .args(["serve", "--stdio"])
        .args(sb.args())
        .env("HOME", sb.path("home"))
        .env("GANTRY_LOG", "gantry=debug")
        .stdin(std::process::Stdio::from(in_r))
        .stdout(std::process::Stdio::from(out_w))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::fs::File::from(in_w)
        .write_all(scripted_session("a.txt").as_bytes())
        .unwrap();
    // stdin is at its end, so gantry exits; waiting drains stderr meanwhile, and the reply
    // waits in the stdout pipe.
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("pipes polled by the reactor"), "{log}");
    for fd in [&kept_in, &kept_out] {
        assert!(!fcntl_getfl(fd).unwrap().contains(OFlags::NONBLOCK));
    }
    drop((kept_in, kept_out));
    let mut stdout = Vec::new();
    std::io::Read::read_to_end(&mut std::fs::File::from(out_r), &mut stdout).unwrap();
    let reply = read_reply(&stdout);
    assert_eq!(reply["result"]["content"][0]["text"], READ_A, "{reply}");
}

/// With no root given, gantry serves the directory it started in, unless that is the whole
/// disk or the home directory: then `check`, `config` and `serve` (HTTP and stdio) refuse to
/// start and say how to choose one. Roots the user wrote (a flag, the config file) are kept.
#[test]
fn a_default_root_that_is_the_disk_or_the_home_directory_is_refused() {
    let sb = Sandbox::new();
    let home = sb.path("home");
    let run = |command: &[&str], cwd: &std::path::Path, roots: &[&str]| {
        let mut cmd = std::process::Command::new(gantry());
        cmd.args(command)
            .args(["--config", &sb.path("config.toml").display().to_string()])
            .args(["--state-dir", &sb.path("state").display().to_string()])
            .args(roots)
            .current_dir(cwd)
            .env("HOME", &home)
            .env_remove("GANTRY_ROOTS")
            .env_remove("GANTRY_CONFIG")
            .stdin(std::process::Stdio::null());
        if command[0] == "serve" {
            // A server that did start is stopped after a moment (and fails the test below).
            let mut child = cmd
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while child.try_wait().unwrap().is_none() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let _ = child.kill();
            return child.wait_with_output().unwrap();
        }
        cmd.output().unwrap()
    };
    let serve_http: &[&str] = &["serve", "--port", "0", "--no-admin"];
    let commands: [&[&str]; 4] = [
        &["check"],
        &["config", "codex"],
        serve_http,
        &["serve", "--stdio"],
    ];
    for command in commands {
        for (cwd, why) in [
            (std::path::Path::new("/"), "the root of the filesystem"),
            (home.as_path(), "your home directory"),
        ] {
            let out = run(command, cwd, &[]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success(),
                "{command:?} in {}: {stderr}",
                cwd.display()
            );
            assert!(stderr.contains(why), "{command:?}: {stderr}");
            assert!(stderr.contains("--root DIR"), "{command:?}: {stderr}");
            assert!(
                !stderr.contains("approved roots"),
                "{command:?} served: {stderr}"
            );
        }
    }
    // Chosen explicitly, the same directories are honoured.
    let home_arg = home.display().to_string();
    let out = run(&["check"], &home, &["--root", &home_arg]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // So is the home directory written as a root in the config file, by `serve` too.
    sb.config(&format!("roots = [{home_arg:?}]\n"));
    let out = run(serve_http, &home, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("approved roots"), "{stderr}");
    std::fs::remove_file(sb.path("config.toml")).unwrap();
    // And an ordinary directory is still the default.
    let out = run(&["check"], &sb.root(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Under `[disclosure] core = "progressive"`, a stdio connection lists Core's first tools
/// until a call succeeds; then every tool is listed and the client is told so. A failed call
/// changes nothing, and an unlisted tool could be called all along (disclosure, not a gate).
#[tokio::test]
async fn progressive_disclosure_adds_the_rest_after_the_first_success() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Clone, Default)]
    struct Watcher(std::sync::Arc<AtomicUsize>);
    impl rmcp::ClientHandler for Watcher {
        async fn on_tool_list_changed(
            &self,
            _cx: rmcp::service::NotificationContext<rmcp::RoleClient>,
        ) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    let sb = Sandbox::new();
    sb.write("a.txt", "x\n");
    sb.config("[disclosure]\ncore = \"progressive\"\n");
    let watcher = Watcher::default();
    let cmd = sb.serve(std::path::Path::new(crate::support::gantry()), &["--stdio"]);
    let client = rmcp::ServiceExt::serve(
        watcher.clone(),
        rmcp::transport::TokioChildProcess::new(cmd).unwrap(),
    )
    .await
    .unwrap();
    let names = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools.iter().map(|t| t.name.to_string()).collect()
    };
    // `find` is among the first tools but unlisted while `exec` is on.
    assert_eq!(
        names(client.list_all_tools().await.unwrap()),
        ["read", "exec_command"]
    );
    let failed = call(&client, "read", json!({ "paths": ["missing.txt"] })).await;
    assert!(is_error(&failed));
    assert_eq!(names(client.list_all_tools().await.unwrap()).len(), 2);
    assert_eq!(watcher.0.load(Ordering::SeqCst), 0);
    let ok = call(&client, "read", json!({ "paths": ["a.txt"] })).await;
    assert!(!is_error(&ok), "{}", text(&ok));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while watcher.0.load(Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no tools/list_changed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let all = names(client.list_all_tools().await.unwrap());
    assert!(
        all.len() > 2 && all.contains(&"apply_patch".to_string()),
        "{all:?}"
    );
    // Told once.
    call(&client, "read", json!({ "paths": ["a.txt"] })).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(watcher.0.load(Ordering::SeqCst), 1);
    client.cancel().await.unwrap();
}
