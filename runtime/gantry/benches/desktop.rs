//! The Desktop connector as a model drives it: a real MCP client over stdio against the real
//! `gantry` (release) on an X display, with a GTK3 fixture app of 300 buttons. Reports p50/p99
//! of a whole-screen screenshot (encoding included), a click step (frame checked against the
//! live windows, then XTEST), and a 300-control snapshot; beside them, same run, the floor of
//! any MCP round trip (the window list) and what a tool shelling out to xdotool pays for one
//! click. Then the size of the connector's tools/list against its budget.
//!
//! Needs a display: `dbus-run-session -- tests/desktop/session cargo bench -p gantry --bench desktop`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

use support::{Sandbox, gantry, stdio_client};

async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
) -> rmcp::model::CallToolResult {
    let Value::Object(args) = args else { panic!() };
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap()
}

fn report(what: &str, runs: usize, f: &mut dyn FnMut() -> Duration) -> f64 {
    for _ in 0..5 {
        f();
    }
    let mut t: Vec<Duration> = (0..runs).map(|_| f()).collect();
    t.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{what:<58} p50 {:>7.2} ms  p99 {:>7.2} ms",
        ms(t[t.len() / 2]),
        ms(t[t.len() * 99 / 100])
    );
    ms(t[t.len() / 2])
}

fn main() {
    if std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty()) {
        println!(
            "no X display: run `dbus-run-session -- tests/desktop/session cargo bench -p gantry --bench desktop`"
        );
        return;
    }
    let rt = support::current_thread_runtime();
    let _runtime = rt.enter();
    let title = format!("gantry bench {}", std::process::id());
    let mut app = tokio::process::Command::new("/usr/bin/python3")
        .arg(support::workspace("tests/desktop/app.py"))
        .args([title.as_str(), "--many", "300"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(app.stdout.take().unwrap()).lines();
    let mut status = None;
    rt.block_on(async {
        while let Some(l) = lines.next_line().await.unwrap() {
            if let Some(g) = l.strip_prefix("geom entry ") {
                let v: Vec<i64> = g.split(' ').map(|n| n.parse().unwrap()).collect();
                // Just above the entry: the status label, which ignores clicks.
                status = Some((v[0] + 40, v[1] - 12));
            }
            if l == "ready" {
                break;
            }
        }
    });
    let (sx, sy) = status.unwrap();
    let sb = Sandbox::new();
    let cmd = sb.serve_as_user(Path::new(gantry()), &["--stdio", "--connector", "desktop"]);
    let (_pid, client) = rt.block_on(stdio_client(cmd));

    let windows = rt.block_on(call(&client, "observe", json!({ "what": "windows" })));
    let listing = support::text(&windows);
    let id = listing
        .lines()
        .find(|l| l.contains(&title))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .to_string();

    println!("\nDesktop connector, Xvfb 1280x800, release build, MCP over stdio, 200 runs each");
    let floor = report("MCP round trip floor: observe windows", 200, &mut || {
        let t = Instant::now();
        let r = rt.block_on(call(&client, "observe", json!({ "what": "windows" })));
        assert!(!support::is_error(&r));
        t.elapsed()
    });
    let mut frame = String::new();
    let shot = report(
        "observe screenshot, whole screen (capture + PNG)",
        200,
        &mut || {
            let t = Instant::now();
            let r = rt.block_on(call(&client, "observe", json!({})));
            let e = t.elapsed();
            frame = support::facts(&r)["frame"].as_str().unwrap().to_string();
            e
        },
    );
    let click = report("computer: one click step on a frame", 200, &mut || {
        // Clicks a model makes come seconds apart: spaced so none reads as a double click.
        std::thread::sleep(Duration::from_millis(5));
        let t = Instant::now();
        let r = rt.block_on(call(
            &client,
            "computer",
            json!({ "actions": [{ "action": "click", "frame": frame, "x": sx, "y": sy }] }),
        ));
        let e = t.elapsed();
        assert_eq!(support::facts(&r)["completed"], 1, "{}", support::text(&r));
        e
    });
    let xdotool = report(
        "baseline: xdotool mousemove + click (one process)",
        200,
        &mut || {
            let t = Instant::now();
            let st = std::process::Command::new("xdotool")
                .args(["mousemove", &sx.to_string(), &sy.to_string(), "click", "1"])
                .status()
                .unwrap();
            assert!(st.success());
            t.elapsed()
        },
    );
    let mut count = 0;
    let snapshot = report(
        "observe controls, fixture with 300 buttons",
        100,
        &mut || {
            let t = Instant::now();
            let r = rt.block_on(call(
                &client,
                "observe",
                json!({ "what": "controls", "window": id }),
            ));
            let e = t.elapsed();
            count = support::facts(&r)["controls"].as_i64().unwrap();
            e
        },
    );
    println!(
        "screenshot p50 {shot:.2} ms ({:.1}x the MCP floor); click p50 {click:.2} ms ({:.2}x xdotool's {xdotool:.2} ms); snapshot of {count} controls p50 {snapshot:.2} ms",
        shot / floor,
        click / xdotool
    );
    let tools = rt.block_on(client.list_all_tools()).unwrap();
    let bytes = serde_json::to_vec(&json!({ "tools": tools }))
        .unwrap()
        .len();
    let budget = generated::CONNECTORS
        .iter()
        .find(|c| c.name == "desktop")
        .unwrap()
        .discovery_budget;
    println!("desktop tools/list: {bytes} bytes (budget {budget})");
    rt.block_on(async { client.cancel().await.unwrap() });
}
