//! The HTTP boundary: every bad request gets a clean, bounded answer, and the server stays
//! healthy; secrets can be rotated live; client setups carry the real URL.

use std::time::Duration;

use crate::support::{Sandbox, call, gantry, is_error, text};
use serde_json::{Value, json};

fn rpc(method: &str, params: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }).to_string()
}

fn post(
    http: &reqwest::Client,
    url: &str,
    body: impl Into<reqwest::Body>,
) -> reqwest::RequestBuilder {
    http.post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body)
}

fn read_call() -> String {
    rpc(
        "tools/call",
        json!({ "name": "read", "arguments": { "paths": ["a.txt"] } }),
    )
}

async fn healthy(http: &reqwest::Client, server: &crate::support::HttpServer) {
    assert_eq!(
        http.get(format!("{}/healthz", server.base()))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let r = post(http, server.url("core"), read_call())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["result"]["content"][0]["text"], "==> a.txt (lines 1-1 of 1) <==\nx\n",
        "{body}"
    );
    assert_eq!(
        body["result"]["_meta"]["gantry/result"]["entries"][0]["total_lines"], 1,
        "{body}"
    );
}

#[tokio::test]
async fn every_bad_request_is_refused_cleanly_and_the_server_stays_healthy() {
    let sb = Sandbox::new();
    sb.write("a.txt", "x\n");
    let server = sb
        .http(&["--allowed-origin", "http://localhost:6274"])
        .await;
    let http = reqwest::Client::new();
    let url = server.url("core").to_string();
    healthy(&http, &server).await;

    // A browser page on another origin.
    let r = post(&http, &url, read_call())
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(r.text().await.unwrap(), "Forbidden: Origin is not allowed");
    // A configured origin is fine.
    let r = post(&http, &url, read_call())
        .header("origin", "http://localhost:6274")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // DNS rebinding: a foreign Host header.
    let r = post(&http, &url, read_call())
        .header("host", "evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // Oversized body: refused from its headers, before a byte of it is read.
    {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let addr = server.base().trim_start_matches("http://").to_string();
        let path = url.trim_start_matches(&server.base()).to_string();
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
            5 << 20
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut buf = vec![0u8; 512];
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        let answer = String::from_utf8_lossy(&buf[..n]).to_string();
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    }

    // Malformed JSON-RPC: not JSON, and JSON that is not a request.
    for bad in ["{not json", "[]", "{\"jsonrpc\":\"2.0\"}"] {
        let r = post(&http, &url, bad).send().await.unwrap();
        assert!(
            r.status().is_client_error() || r.status() == 200,
            "{bad}: {}",
            r.status()
        );
        let body = r.text().await.unwrap();
        assert!(body.len() < 2000, "{bad}: unbounded answer");
        assert!(
            !body.contains(server.token("core").as_str()),
            "{bad}: the answer leaks the token"
        );
    }

    // Unknown tool and wrong argument types: tool errors, not crashes.
    let r = post(
        &http,
        &url,
        rpc("tools/call", json!({ "name": "nope", "arguments": {} })),
    )
    .send()
    .await
    .unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["result"]["isError"], true);
    assert!(
        body["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("UNKNOWN_TOOL: ")
    );
    let r = post(
        &http,
        &url,
        rpc(
            "tools/call",
            json!({ "name": "read", "arguments": { "paths": 7 } }),
        ),
    )
    .send()
    .await
    .unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["result"]["content"][0]["text"],
        "INVALID_INPUT: paths: invalid type: integer `7`, expected a sequence"
    );

    healthy(&http, &server).await;
}

#[tokio::test]
async fn the_bearer_header_works_and_a_wrong_one_looks_like_nothing_exists() {
    let sb = Sandbox::new();
    sb.write("a.txt", "x\n");
    let server = sb.http(&[]).await;
    let http = reqwest::Client::new();
    let endpoint = format!("{}/mcp", server.base());
    let r = post(&http, &endpoint, read_call())
        .bearer_auth(server.token("core"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for auth in [Some("Bearer nope"), Some("Basic Zm9vOmJhcg=="), None] {
        let mut req = post(&http, &endpoint, read_call());
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 404, "{auth:?}");
        assert_eq!(r.text().await.unwrap(), "");
    }
}

#[tokio::test]
async fn rotating_a_token_takes_effect_without_a_restart() {
    let sb = Sandbox::new();
    sb.write("a.txt", "x\n");
    let server = sb.http(&[]).await;
    let http = reqwest::Client::new();
    let old_url = server.url("core").to_string();
    assert_eq!(
        post(&http, &old_url, read_call())
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    let out = std::process::Command::new(gantry())
        .args(["token", "rotate", "core"])
        .args(sb.args())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("gantry: core: new secret in "),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The new URL is printed, ready to paste, with the port the running server serves on.
    let printed = String::from_utf8(out.stdout).unwrap();
    let printed_token = printed
        .strip_prefix(&format!("core {}/", server.base()))
        .and_then(|rest| rest.strip_suffix("/mcp\n"))
        .unwrap_or_else(|| panic!("{printed}"))
        .to_string();
    assert_eq!(
        post(&http, &old_url, read_call())
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    let tokens: toml::Table = std::fs::read_to_string(sb.path("state/tokens.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(tokens["core"].as_str(), Some(printed_token.as_str()));
    let new_url = format!("{}/{printed_token}/mcp", server.base());
    assert_eq!(
        post(&http, &new_url, read_call())
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_dropped() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let sb = Sandbox::new();
    let server = sb.http(&[]).await;
    let addr = server.base().trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stream
        .write_all(b"POST /x/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "the server kept a half-sent request open for 20 s"
    );
}

/// Sends `request` on a fresh connection and returns the start of the answer.
async fn raw(addr: &str, request: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).to_string()
}

#[tokio::test]
async fn two_host_headers_are_a_bad_request() {
    let sb = Sandbox::new();
    sb.write("a.txt", "x\n");
    let server = sb.http(&[]).await;
    let addr = server.base().trim_start_matches("http://").to_string();
    let path = server
        .url("core")
        .trim_start_matches(&server.base())
        .to_string();
    let body = read_call();
    let request = |hosts: &str| {
        format!(
            "POST {path} HTTP/1.1\r\n{hosts}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let one = raw(&addr, &request("Host: 127.0.0.1\r\n")).await;
    assert!(one.starts_with("HTTP/1.1 200"), "{one}");
    let two = raw(&addr, &request("Host: 127.0.0.1\r\nHost: evil.example\r\n")).await;
    assert!(two.starts_with("HTTP/1.1 400"), "{two}");
}

/// 1,100 idle sockets that never send a byte (more than every connection slot) do not keep a
/// real client out: unproven connections have their own small pool, and the oldest that have
/// had their grace are dropped first.
#[cfg(unix)]
#[tokio::test]
async fn idle_sockets_cannot_hold_the_door_shut() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let want = limit.maximum.map_or(8192, |m| m.min(8192));
    if limit.current.is_none_or(|c| c < want) {
        let _ = setrlimit(
            Resource::Nofile,
            rustix::process::Rlimit {
                current: Some(want),
                maximum: limit.maximum,
            },
        );
    }
    let sb = Sandbox::new();
    sb.write("a.txt", "x\n");
    let server = sb.http(&[]).await;
    let addr = server.base().trim_start_matches("http://").to_string();
    let mut idle = Vec::new();
    for _ in 0..1100 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    // Past their grace, the idle sockets may be dropped to make room.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let http = reqwest::Client::new();
    // Before, the request waited for the header timeout (10 s) of the first idle socket.
    let answered = tokio::time::timeout(
        Duration::from_secs(5),
        post(&http, server.url("core"), read_call()).send(),
    )
    .await;
    let status = answered.map(|r| r.map(|r| r.status().as_u16()));
    assert!(matches!(status, Ok(Ok(200))), "{status:?}");
    // The dropped idle sockets see their connection closed.
    use tokio::io::AsyncReadExt as _;
    let mut buf = [0u8; 1];
    let first = tokio::time::timeout(Duration::from_secs(2), idle[0].read(&mut buf)).await;
    assert!(matches!(first, Ok(Ok(0)) | Ok(Err(_))), "{first:?}");
    drop(idle);
    healthy(&http, &server).await;
}

#[tokio::test]
async fn client_setups_carry_the_real_url_or_command() {
    let sb = Sandbox::new();
    let server = sb.http(&[]).await;
    let token = server.token("core");
    let run = |client: &str, extra: &[&str]| {
        let out = std::process::Command::new(gantry())
            .args(["config", client])
            .args(extra)
            .args(sb.args())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let chatgpt = run("chatgpt", &["--public-host", "gantry.example.com"]);
    // Through a public host the connector signs in: its URL holds no secret.
    assert!(
        chatgpt.contains("MCP Server URL: https://gantry.example.com/core/mcp")
            && chatgpt.contains("Authentication: OAuth")
            && chatgpt.contains("gantry auth approve CODE")
            && !chatgpt.contains(&token),
        "{chatgpt}"
    );
    // Kept on its URL secret by the config, it says so.
    sb.config("[auth]\ncore = \"url-secret\"\n");
    let kept = run("chatgpt", &["--public-host", "gantry.example.com"]);
    sb.config("");
    assert!(
        kept.contains(&format!(
            "MCP Server URL: https://gantry.example.com/{token}/mcp"
        )) && kept.contains("No authentication"),
        "{kept}"
    );
    assert!(
        chatgpt.contains("--public-host gantry.example.com"),
        "{chatgpt}"
    );
    // Every stdio setup is parsed in its client's own format and starts gantry on the same
    // config and the flags given here, wherever the client launches it; the roots are the
    // config file's, where `gantry config` put this run's.
    let config = sb.path("config.toml").display().to_string();
    let want = |args: &[String]| {
        assert_eq!(
            args[..4],
            ["serve", "--stdio", "--connector", "core"],
            "{args:?}"
        );
        assert!(!args.contains(&"--root".to_string()), "{args:?}");
        let at = args.iter().position(|a| a == "--config").unwrap();
        assert_eq!(args[at + 1], config, "{args:?}");
        assert!(args.contains(&"--read-only".to_string()), "{args:?}");
    };
    let codex: toml::Table = run("codex", &["--read-only"]).parse().unwrap();
    let server = &codex["mcp_servers"]["gantry-core"];
    assert_eq!(server["command"].as_str(), Some(gantry()));
    let args: Vec<String> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    want(&args);
    for client in ["claude-desktop", "cursor"] {
        let json: Value = serde_json::from_str(&run(client, &["--read-only"])).unwrap();
        let server = &json["mcpServers"]["gantry-core"];
        assert_eq!(server["command"], gantry(), "{client}");
        let args: Vec<String> = serde_json::from_value(server["args"].clone()).unwrap();
        want(&args);
    }
    let claude_code = run("claude-code", &["--read-only"]);
    assert!(
        claude_code.contains(&format!("--config {config}")) && !claude_code.contains("--root"),
        "{claude_code}"
    );
    let written: toml::Table =
        toml::from_str(&std::fs::read_to_string(sb.path("config.toml")).unwrap()).unwrap();
    assert_eq!(
        written["roots"].as_array().unwrap()[0].as_str(),
        Some(sb.root().display().to_string().as_str()),
        "{written:?}"
    );
    let inspector = run("inspector", &[]);
    assert!(inspector.contains(&format!("/{token}/mcp")), "{inspector}");
}

#[tokio::test]
async fn a_real_client_works_through_the_bearer_endpoint_too() {
    let sb = Sandbox::new();
    sb.write("a.txt", "x\n");
    let server = sb.http(&[]).await;
    let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            format!("{}/mcp", server.base()),
        )
        .auth_header(server.token("core")),
    );
    let client = rmcp::ServiceExt::serve((), transport).await.unwrap();
    let r = call(&client, "read", json!({ "paths": ["a.txt"] })).await;
    assert!(!is_error(&r), "{}", text(&r));
    client.cancel().await.unwrap();
}

/// `gantry config <client> --connector NAME` for every connector surface.toml declares: the
/// stdio setup serves that connector, the ChatGPT setup names its own URL and secret, and a
/// name that is no connector is refused with the list.
#[tokio::test]
async fn every_connector_gets_its_own_setup() {
    let sb = Sandbox::new();
    let server = sb.http(&[]).await;
    let run = |client: &str, connector: &str| {
        std::process::Command::new(gantry())
            .args(["config", client, "--connector", connector])
            .args(sb.args())
            .output()
            .unwrap()
    };
    let display = std::env::var_os("DISPLAY").is_some_and(|d| !d.is_empty());
    for c in generated::CONNECTORS {
        let out = run("codex", c.name);
        if c.name == generated::hosts::NAME || c.name == generated::gateway::NAME {
            // Served only when the config names a machine (tests/hosts.rs) or an upstream
            // (tests/gateway.rs): said, no setup.
            assert!(!out.status.success());
            let err = String::from_utf8_lossy(&out.stderr);
            let says = if c.name == generated::hosts::NAME {
                "gantry hosts add"
            } else {
                "[gateway.servers"
            };
            assert!(err.contains(says), "{err}");
            continue;
        }
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let codex: toml::Table = String::from_utf8(out.stdout).unwrap().parse().unwrap();
        let args = codex["mcp_servers"][&format!("gantry-{}", c.name)]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect::<Vec<_>>();
        assert_eq!(
            args[..4],
            ["serve", "--stdio", "--connector", c.name],
            "{args:?}"
        );
        if c.name == generated::desktop::NAME && !display {
            continue;
        }
        let out = run("chatgpt", c.name);
        let text = String::from_utf8(out.stdout).unwrap();
        let token = server.token(c.name);
        // A connector signs in through the public host: its own name, never its secret.
        assert!(
            text.contains(&format!("/{}/mcp", c.name)) && !text.contains(&token),
            "{}: {text}",
            c.name
        );
    }
    let out = run("codex", "nope");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let names: Vec<&str> = generated::CONNECTORS.iter().map(|c| c.name).collect();
    assert!(
        err.contains(&format!("possible values: {}", names.join(", "))),
        "{err}"
    );
}
