//! The Gateway connector in front of real upstream MCP servers: another gantry's Core, over
//! stdio and over Streamable HTTP. Each upstream tool is a Cedar decision on
//! `Upstream::"server/tool"`: a denied one is neither listed nor sent (the upstream's own
//! audit shows it never arrived); an upstream that dies or hangs is a bounded, clean error.

use std::time::{Duration, Instant};

use crate::support::{Sandbox, call, gantry, is_error, text};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::json;

/// `[gateway.servers.inner]` starting `inner`'s gantry Core on stdio.
fn stdio_upstream(inner: &Sandbox) -> String {
    let mut args: Vec<String> = vec!["serve".into(), "--stdio".into()];
    args.extend(inner.args());
    format!(
        "[gateway.servers.inner]\ncommand = {:?}\nargs = {:?}\nenv = {{ HOME = {:?}, GANTRY_LOG = \"warn\" }}\n",
        gantry(),
        args,
        inner.path("home").display().to_string(),
    )
}

async fn gateway(sb: &Sandbox, extra: &[&str]) -> RunningService<RoleClient, ()> {
    let mut args = vec!["--connector", "gateway"];
    args.extend_from_slice(extra);
    sb.stdio(&args).await
}

async fn names(client: &RunningService<RoleClient, ()>) -> Vec<String> {
    let mut n: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    n.sort();
    n
}

fn upstream_audit(inner: &Sandbox) -> String {
    std::fs::read_to_string(inner.path("state/audit.jsonl")).unwrap_or_default()
}

#[tokio::test]
async fn a_stdio_upstreams_tools_are_listed_and_called_through_gantry() {
    let inner = Sandbox::new();
    inner.write("notes.txt", "from the upstream\n");
    let sb = Sandbox::new();
    sb.config(&stdio_upstream(&inner));
    let client = gateway(&sb, &[]).await;
    let listed = names(&client).await;
    assert!(listed.contains(&"inner__read".to_string()), "{listed:?}");
    assert!(
        listed.contains(&"inner__exec_command".to_string()),
        "{listed:?}"
    );
    // The upstream's own schema is passed through.
    let tools = client.list_all_tools().await.unwrap();
    let read = tools.iter().find(|t| t.name == "inner__read").unwrap();
    assert!(
        read.input_schema
            .get("properties")
            .and_then(|p| p.get("paths"))
            .is_some()
    );

    let r = call(&client, "inner__read", json!({ "paths": ["notes.txt"] })).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("from the upstream"), "{}", text(&r));
    // Audited here as the gateway's call, and there as the upstream's own.
    let here = std::fs::read_to_string(sb.path("state/audit.jsonl")).unwrap();
    assert!(here.contains("\"tool\":\"inner__read\""), "{here}");
    assert!(upstream_audit(&inner).contains("\"tool\":\"read\""));
    let r = call(&client, "inner__no_such_tool", json!({})).await;
    assert!(text(&r).starts_with("UNKNOWN_TOOL"), "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_denied_upstream_tool_is_neither_listed_nor_sent() {
    let inner = Sandbox::new();
    let sb = Sandbox::new();
    sb.config(&stdio_upstream(&inner));
    let policies = sb.path("policies");
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(
        policies.join("upstream.cedar"),
        "@id(\"local.no_upstream_commands\")\n@reason(\"the upstream's commands are not for this model\")\nforbid (principal, action, resource == Upstream::\"inner/exec_command\");\n",
    )
    .unwrap();
    let client = gateway(&sb, &["--policies", &policies.display().to_string()]).await;
    let listed = names(&client).await;
    assert!(listed.contains(&"inner__read".to_string()), "{listed:?}");
    assert!(
        !listed.contains(&"inner__exec_command".to_string()),
        "{listed:?}"
    );
    let marker = sb.path("ran");
    let r = call(
        &client,
        "inner__exec_command",
        json!({ "cmd": format!("touch {}", marker.display()) }),
    )
    .await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED")
            && text(&r).contains("the upstream's commands are not for this model"),
        "{}",
        text(&r)
    );
    assert!(!marker.exists());
    assert!(
        !upstream_audit(&inner).contains("exec_command"),
        "{}",
        upstream_audit(&inner)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_http_upstream_is_reached_with_its_token_from_the_environment() {
    let inner = Sandbox::new();
    inner.write("remote.txt", "over http\n");
    let upstream = inner.http(&[]).await;
    let url = upstream.url("core").to_string();
    let token = upstream.token("core");
    let sb = Sandbox::new();
    // The URL without its secret path: the token comes from the environment, as a Bearer.
    let base = format!("{}/mcp", upstream.base());
    sb.config(&format!(
        "[gateway.servers.remote]\nurl = {base:?}\nbearer_token_env = \"REMOTE_TOKEN\"\n"
    ));
    assert!(
        !std::fs::read_to_string(sb.path("config.toml"))
            .unwrap()
            .contains(&token)
    );
    // Served over HTTP, every connector in one process: the gateway reaches the upstream,
    // and a command on Core does not inherit the token.
    let mut cmd = sb.serve(std::path::Path::new(gantry()), &["--port", "0"]);
    cmd.env("REMOTE_TOKEN", &token);
    let outer = crate::support::http_server(cmd).await;
    let client = outer.client("gateway").await;
    let r = call(&client, "remote__read", json!({ "paths": ["remote.txt"] })).await;
    assert!(
        text(&r).contains("over http"),
        "{} (upstream {url})",
        text(&r)
    );
    let core = outer.client("core").await;
    let r = call(
        &core,
        "exec_command",
        json!({ "cmd": "echo \"token:${REMOTE_TOKEN:-absent}\"" }),
    )
    .await;
    assert!(text(&r).contains("token:absent"), "{}", text(&r));
    // Nor is it left in gantry's own environment block, which anything running as the user
    // can read.
    #[cfg(target_os = "linux")]
    {
        let pid = outer.child.id().unwrap();
        let block = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        assert!(
            !String::from_utf8_lossy(&block).contains(&token),
            "the upstream's token is in /proc/{pid}/environ"
        );
        assert!(
            String::from_utf8_lossy(&block).contains("HOME="),
            "the block was read"
        );
    }
    client.cancel().await.unwrap();
    core.cancel().await.unwrap();
}

#[tokio::test]
async fn an_upstream_that_dies_or_hangs_is_a_bounded_error() {
    let sb = Sandbox::new();
    sb.config(
        "[gateway.servers.dies]\ncommand = \"sh\"\nargs = [\"-c\", \"exit 3\"]\n\
         [gateway.servers.hangs]\ncommand = \"sleep\"\nargs = [\"3004.25\"]\ntimeout = \"1 s\"\n",
    );
    let client = gateway(&sb, &[]).await;
    let started = Instant::now();
    assert_eq!(names(&client).await, Vec::<String>::new());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let r = call(&client, "dies__anything", json!({})).await;
    assert!(
        text(&r).starts_with("OS_ERROR: upstream `dies`"),
        "{}",
        text(&r)
    );
    let started = Instant::now();
    let r = call(&client, "hangs__anything", json!({})).await;
    // Listing tried it already: the call fails at once with that failure.
    assert!(
        text(&r).starts_with("TIMEOUT: upstream `hangs` did not start and answer within 1s"),
        "{}",
        text(&r)
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // The server that never answered was ended, not left behind.
    crate::support::gone("3004.25").await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn nothing_starts_without_the_permission_or_a_config() {
    let inner = Sandbox::new();
    let sb = Sandbox::new();
    sb.config(&format!(
        "{}[permissions]\nupstream = false\n",
        stdio_upstream(&inner)
    ));
    let client = gateway(&sb, &[]).await;
    assert_eq!(names(&client).await, Vec::<String>::new());
    let r = call(&client, "inner__read", json!({ "paths": ["x"] })).await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED")
            && text(&r).contains("`upstream` permission is off"),
        "{}",
        text(&r)
    );
    // The upstream never ran: it would have written its tokens in its state directory.
    assert!(
        std::fs::read_dir(inner.path("state"))
            .unwrap()
            .next()
            .is_none()
    );
    client.cancel().await.unwrap();

    // Without an upstream in the config there is no gateway to serve, and it says so.
    let bare = Sandbox::new();
    let out = std::process::Command::new(gantry())
        .args(["serve", "--stdio", "--connector", "gateway"])
        .args(bare.args())
        .env("HOME", bare.path("home"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("the gateway connector is not served: no upstream server in the config's [gateway.servers]"),
        "{err}"
    );
}

/// An upstream that answers 30 MB is refused as soon as its answer crosses the gateway's
/// cap (1 MB and its envelope), not read whole and not waited on until the call's timeout.
#[tokio::test]
async fn an_oversized_upstream_answer_is_refused_at_once() {
    let sb = Sandbox::new();
    let script = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    m = msg["method"]
    if m == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "big", "version": "1"}}
    elif m == "tools/list":
        result = {"tools": [{"name": "flood", "inputSchema": {"type": "object"}}]}
    else:
        result = {"content": [{"type": "text", "text": "y" * (30 << 20)}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
"#;
    std::fs::write(sb.path("big.py"), script).unwrap();
    sb.config(&format!(
        "[gateway.servers.big]\ncommand = \"python3\"\nargs = [{:?}]\n",
        sb.path("big.py").display().to_string()
    ));
    let client = gateway(&sb, &[]).await;
    assert_eq!(names(&client).await, vec!["big__flood".to_string()]);
    let started = Instant::now();
    let r = call(&client, "big__flood", json!({})).await;
    assert!(text(&r).starts_with("OUTPUT_LIMIT"), "{}", text(&r));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // The connection goes on: the next call is answered (and refused) the same way.
    let r = call(&client, "big__flood", json!({})).await;
    assert!(text(&r).starts_with("OUTPUT_LIMIT"), "{}", text(&r));
    client.cancel().await.unwrap();
}
