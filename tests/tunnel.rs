//! The ChatGPT tunnel path: a public name given as a host or as the URL a tunnel prints, `*.`
//! wildcards, `/healthz` answering per Host as MCP does, refusals that say which flag fixes
//! them, and the log of one stateless call.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;

use crate::support::{Sandbox, gantry, http_server_with};

fn rpc(method: &str, params: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }).to_string()
}

fn read_call() -> String {
    rpc(
        "tools/call",
        json!({ "name": "read", "arguments": { "paths": ["a.txt"] } }),
    )
}

/// A read call to `url`, as an MCP client sends it.
fn read_post(http: &reqwest::Client, url: &str) -> reqwest::RequestBuilder {
    http.post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(read_call())
}

/// Status of a read call to `url` carrying `host`, and of `/healthz` with the same Host.
async fn statuses(url: &str, host: &str) -> (u16, u16) {
    let http = reqwest::Client::new();
    let mcp = read_post(&http, url)
        .header("host", host)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16();
    let base = &url[..url["http://".len()..].find('/').unwrap() + "http://".len()];
    let health = http
        .get(format!("{base}/healthz"))
        .header("host", host)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16();
    (mcp, health)
}

#[tokio::test]
async fn the_url_a_tunnel_prints_is_taken_as_the_public_host_and_its_requests_are_served() {
    let sb = Sandbox::new();
    sb.write("a.txt", "x\n");
    // `core` kept on its URL secret; the others sign in (the default with a public host).
    sb.config("[auth]\ncore = \"url-secret\"\n");
    let server = sb
        .http(&["--public-host", "https://abc-def.trycloudflare.com/"])
        .await;
    let token = server.token("core");
    assert_eq!(
        server.public["files"],
        "https://abc-def.trycloudflare.com/files/mcp"
    );
    // The sign-in's issuer is the tunnel's https name, whatever Host reached gantry.
    let metadata: serde_json::Value = reqwest::Client::new()
        .get(format!(
            "{}/.well-known/oauth-authorization-server",
            server.base()
        ))
        .header("host", "abc-def.trycloudflare.com")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["issuer"], "https://abc-def.trycloudflare.com");
    assert_eq!(
        server.public["core"],
        format!("https://abc-def.trycloudflare.com/{token}/mcp")
    );
    let url = server.url("core");
    assert_eq!(statuses(url, "abc-def.trycloudflare.com").await, (200, 200));
    assert_eq!(
        statuses(url, "abc-def.trycloudflare.com:443").await,
        (200, 200)
    );
    // The health check answers exactly where MCP does: never "ok" for a Host MCP refuses.
    assert_eq!(statuses(url, "other.trycloudflare.com").await, (403, 403));
    assert_eq!(statuses(url, "evil.example").await, (403, 403));
    // The setup printed for ChatGPT has one scheme and no doubled slash.
    let out = std::process::Command::new(gantry())
        .args([
            "config",
            "chatgpt",
            "--public-host",
            "https://abc-def.trycloudflare.com/",
        ])
        .args(sb.args())
        .output()
        .unwrap();
    let setup = String::from_utf8(out.stdout).unwrap();
    assert!(
        setup.contains(&format!(
            "MCP Server URL: https://abc-def.trycloudflare.com/{token}/mcp\n"
        )),
        "{setup}"
    );
    assert!(!setup.contains("https://https://"), "{setup}");
}

#[tokio::test]
async fn a_wildcard_admits_the_names_below_its_domain_and_nothing_else() {
    let sb = Sandbox::new();
    sb.write("a.txt", "x\n");
    let server = sb.http(&["--allowed-host", "*.trycloudflare.com"]).await;
    let url = server.url("core");
    for (host, want) in [
        ("quick-name-1.trycloudflare.com", (200, 200)),
        ("QUICK-NAME-2.TryCloudflare.com", (200, 200)),
        ("trycloudflare.com", (403, 403)),
        ("eviltrycloudflare.com", (403, 403)),
        ("x.trycloudflare.com.evil.example", (403, 403)),
        ("127.0.0.1", (200, 200)),
    ] {
        assert_eq!(statuses(url, host).await, want, "{host}");
    }
}

/// Runs `gantry serve` with `extra` flags and `env`, expecting it to refuse to start;
/// returns what it said.
fn refused_start(sb: &Sandbox, extra: &[&str], env: &[(&str, &str)]) -> String {
    let out = std::process::Command::new(gantry())
        .arg("serve")
        .args(sb.args())
        .args(["--port", "0"])
        .args(extra)
        .envs(env.iter().copied())
        .env("HOME", sb.path("home"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{extra:?} {env:?}");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn names_that_would_admit_too_much_or_are_not_hosts_stop_the_start_naming_their_source() {
    let sb = Sandbox::new();
    let said = refused_start(&sb, &["--allowed-host", "*"], &[]);
    assert!(said.contains("--allowed-host: `*`"), "{said}");
    let said = refused_start(&sb, &["--allowed-host", "*.com"], &[]);
    assert!(
        said.contains("every name under a top-level domain"),
        "{said}"
    );
    let said = refused_start(
        &sb,
        &["--public-host", "https://x.example.com/tok/mcp"],
        &[],
    );
    assert!(said.contains("--public-host: "), "{said}");
    assert!(said.contains("give the host only"), "{said}");
    let said = refused_start(&sb, &[], &[("GANTRY_PUBLIC_HOST", "ftp://x.example.com")]);
    assert!(said.contains("GANTRY_PUBLIC_HOST (environment)"), "{said}");
    sb.config("allowed_hosts = [\"*\"]\n");
    let said = refused_start(&sb, &[], &[]);
    assert!(said.contains("config.toml: allowed_hosts"), "{said}");
}

/// A server whose stderr (its log, at the default level unless `log` says otherwise) is
/// kept; returns it with the URL lines read.
async fn logged_server(
    sb: &Sandbox,
    extra: &[&str],
    log: Option<&str>,
) -> (crate::support::HttpServer, tokio::process::ChildStderr) {
    let mut cmd = sb.serve(
        std::path::Path::new(gantry()),
        &["--port", "0", "--no-admin"],
    );
    cmd.args(extra);
    match log {
        Some(level) => cmd.env("GANTRY_LOG", level),
        None => cmd.env_remove("GANTRY_LOG"),
    };
    let mut server = http_server_with(cmd, true).await;
    let stderr = server.child.stderr.take().unwrap();
    (server, stderr)
}

/// Reads what the server logged until it is killed.
async fn log_of(
    mut server: crate::support::HttpServer,
    mut stderr: tokio::process::ChildStderr,
) -> String {
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.child.kill().await.unwrap();
    let mut text = String::new();
    stderr.read_to_string(&mut text).await.unwrap();
    text
}

#[tokio::test]
async fn refusals_are_logged_with_the_flag_that_admits_them() {
    let sb = Sandbox::new();
    sb.write("a.txt", "x\n");
    let (server, stderr) = logged_server(&sb, &[], Some("warn")).await;
    let url = server.url("core").to_string();
    assert_eq!(
        statuses(&url, "gantry-abc.trycloudflare.com").await,
        (403, 403)
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // ChatGPT calls from OpenAI's servers and sends no Origin; a browser page would.
    let r = read_post(&reqwest::Client::new(), &url)
        .header("origin", "https://chatgpt.com")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let log = log_of(server, stderr).await;
    assert!(
        log.contains("start gantry with --public-host gantry-abc.trycloudflare.com"),
        "{log}"
    );
    assert!(
        log.contains("start gantry with --allowed-origin https://chatgpt.com"),
        "{log}"
    );
    // And with that flag, the same request is served.
    let (server, _stderr) = logged_server(
        &sb,
        &["--allowed-origin", "https://chatgpt.com"],
        Some("warn"),
    )
    .await;
    let r = read_post(&reqwest::Client::new(), server.url("core"))
        .header("origin", "https://chatgpt.com")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn one_stateless_call_logs_one_line_at_info_with_the_clients_name() {
    let sb = Sandbox::new();
    sb.write("a.txt", "x\n");
    let (server, stderr) = logged_server(&sb, &[], None).await;
    let url = server.url("core").to_string();
    let http = reqwest::Client::new();
    let send = |body: String| {
        http.post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .header("user-agent", "openai-mcp/1.0.0")
            .body(body)
            .send()
    };
    let init = rpc(
        "initialize",
        json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": { "name": "ChatGPT", "version": "2026.12" }
        }),
    );
    assert_eq!(send(init).await.unwrap().status(), 200);
    assert_eq!(send(read_call()).await.unwrap().status(), 200);
    let log = log_of(server, stderr).await;
    // From the line that says it is serving on: what a user sees for one client's call.
    let lines: Vec<String> = log
        .lines()
        .skip_while(|l| !l.contains(" serving "))
        .skip(1)
        .map(|l| {
            // Timestamps and durations change from run to run.
            let l = l.split_once("Z ").map_or(l, |(_, rest)| rest);
            let mut words: Vec<String> = l.split(' ').map(str::to_string).collect();
            for w in &mut words {
                if w.starts_with("ms=") {
                    *w = "ms=[ms]".into();
                }
            }
            words.join(" ")
        })
        .collect();
    insta::assert_snapshot!(lines.join("\n"));
}
