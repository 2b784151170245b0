//! Worker turns through a real MCP client over HTTP against the real `gantry`, with the
//! machine's real HOME and shell profile: the time from `message` to the worker asleep again
//! (its program started in the login environment, its MCP `initialize`, one `read`, its
//! `finish`, its exit), beside the floor every turn pays whatever gantry does: the same
//! interpreter started with the same imports, run by `exec_command` in the same server.
//!
//! `cargo bench -p gantry --bench agents`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use serde_json::{Value, json};

use support::{Sandbox, facts, gantry, http_server};

const TURNS: usize = 20;
/// How often the prime asks for `status` while a turn runs (the figure is this coarse).
const POLL: Duration = Duration::from_millis(5);

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else { panic!() };
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap()
}

fn worker_state(result: &CallToolResult) -> String {
    facts(result)["workers"][0]["state"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

async fn until_asleep(prime: &RunningService<RoleClient, ()>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = call(prime, "agents", json!({ "action": "status" })).await;
        if worker_state(&s) == "asleep" {
            return;
        }
        assert!(Instant::now() < deadline, "the worker never slept");
        tokio::time::sleep(POLL).await;
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let rt = support::multi_thread_runtime();
    rt.block_on(async {
        let sb = Sandbox::new();
        let agent = support::workspace("tests/agents/fake_agent.py")
            .canonicalize()
            .unwrap();
        let state = sb.path("agent-state");
        sb.config(&format!(
            r#"[agents]
slots = 1
[agents.kinds.fake]
start = ["python3", "{agent}", "--mcp-config", "{{mcp_config}}", "{{prompt}}"]
resume = ["python3", "{agent}", "--mcp-config", "{{mcp_config}}", "--resume", "{{conversation}}", "{{prompt}}"]
conversation = '"conversation": "([^"]+)"'
tokens = ['"tokens": (\d+)']
env = {{ FAKE_AGENT_STATE = "{state}" }}
"#,
            agent = agent.display(),
            state = state.display()
        ));
        sb.write("a.txt", "measured\n");
        // The real HOME and shell profile: what a user's workers start in.
        let cmd = sb.serve_as_user(std::path::Path::new(gantry()), &["--port", "0"]);
        let server = http_server(cmd).await;
        let prime = server.client("core").await;
        let r = call(&prime, "agents", json!({ "action": "spawn", "tasks": ["READ a.txt"] })).await;
        assert_ne!(r.is_error, Some(true), "{r:?}");
        until_asleep(&prime).await;

        let mut turns = Vec::with_capacity(TURNS);
        let mut floor = Vec::with_capacity(TURNS);
        let python = "python3 -c 'import json, os, subprocess, sys, time, urllib.request, uuid'";
        for _ in 0..TURNS {
            let started = Instant::now();
            let r = call(
                &prime,
                "agents",
                json!({ "action": "message", "to": ["w1"], "message": "READ a.txt" }),
            )
            .await;
            assert_ne!(r.is_error, Some(true), "{r:?}");
            until_asleep(&prime).await;
            turns.push(started.elapsed());

            let started = Instant::now();
            let r = call(&prime, "exec_command", json!({ "cmd": python })).await;
            assert_ne!(r.is_error, Some(true), "{r:?}");
            floor.push(started.elapsed());
        }
        turns.sort();
        floor.sort();
        let (t50, f50) = (support::percentile(&turns, 0.5), support::percentile(&floor, 0.5));
        let (t90, f90) = (support::percentile(&turns, 0.9), support::percentile(&floor, 0.9));
        println!("worker turn (message → asleep, {TURNS} turns, status every {} ms):", POLL.as_millis());
        println!("  p50 {:.1} ms   p90 {:.1} ms", ms(t50), ms(t90));
        println!("floor: the agent's interpreter and imports through exec_command, same server:");
        println!("  p50 {:.1} ms   p90 {:.1} ms", ms(f50), ms(f90));
        println!(
            "ratio turn/floor: p50 {:.2}×   p90 {:.2}×",
            t50.as_secs_f64() / f50.as_secs_f64(),
            t90.as_secs_f64() / f90.as_secs_f64()
        );
    });
}
