//! Load over HTTP against one `gantry serve` (release, real HOME, default config: recording
//! on), a 1 KB `read` each call:
//!
//! 1. 200 concurrent MCP clients (rmcp, stateless Streamable HTTP), 50 calls each: errors
//!    (must be 0), p50/p99 and calls per second, beside the same 10,000 calls made by one
//!    client one at a time. These clients run in this process and are the bottleneck.
//! 2. A load tool that is not: `wrk` (Debian's package; `apt-get install wrk`), 64 keep-alive
//!    connections for 10 s, first against `/healthz` (the tool's own ceiling on this machine
//!    with a trivial endpoint of the same server), then against the `read` call, with the
//!    server's CPU per call; then the same against a server with `session_recording` off.
//!
//! `cargo bench -p gantry --bench load`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;

use support::{Sandbox, gantry, http_client as client, http_server};

const CLIENTS: usize = 200;
const CALLS: usize = 50;

async fn read(client: &RunningService<RoleClient, ()>) -> Result<Duration, String> {
    let args = serde_json::json!({ "paths": ["1k.txt"] });
    let serde_json::Value::Object(args) = args else {
        unreachable!()
    };
    let started = Instant::now();
    let r = client
        .call_tool(CallToolRequestParams::new("read").with_arguments(args))
        .await
        .map_err(|e| e.to_string())?;
    // One header line, then the file verbatim (a file without a final newline gets one).
    let text = r
        .content
        .first()
        .and_then(|c| c.as_text())
        .and_then(|t| t.text.split_once('\n'))
        .map(|(_, body)| body.strip_suffix('\n').unwrap_or(body).len());
    if r.is_error == Some(true) || text != Some(1024) {
        return Err(format!("bad result: {:?}", r.content));
    }
    Ok(started.elapsed())
}

fn report(name: &str, mut lat: Vec<Duration>, errors: usize, wall: Duration) -> f64 {
    lat.sort();
    let rate = lat.len() as f64 / wall.as_secs_f64();
    println!(
        "{name:<44} calls {:>6}  errors {errors:>3}  p50 {:>8.2} ms  p99 {:>8.2} ms  {:>8.0} calls/s",
        lat.len(),
        support::percentile(&lat, 0.50).as_secs_f64() * 1e3,
        support::percentile(&lat, 0.99).as_secs_f64() * 1e3,
        rate
    );
    rate
}

/// The load tool: `wrk` (Debian's package), a C load generator that keeps `CONNECTIONS`
/// keep-alive connections busy from its own threads, so the client is not what limits the
/// figures the way 200 rmcp clients in this process do.
const WRK_CONNECTIONS: usize = 64;
const WRK_SECONDS: u32 = 10;

/// The figures `wrk` prints through [`WRK_SCRIPT`]'s `done`.
#[derive(Debug, Default)]
struct WrkFigures {
    rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    requests: u64,
    bad: u64,
    socket_errors: u64,
}

/// POSTs `BODY` (empty: a GET), counts replies that are not a 200 carrying a result that is
/// not an error, and prints one line `done` parses.
const WRK_SCRIPT: &str = r#"
local body = os.getenv("WRK_BODY") or ""
if body ~= "" then
  wrk.method = "POST"
  wrk.body = body
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
end
local expect = os.getenv("WRK_EXPECT") or ""
local threads = {}
function setup(thread) table.insert(threads, thread) end
bad = 0
function response(status, headers, resp)
  if status ~= 200 or (expect ~= "" and (not string.find(resp, expect, 1, true)
      or string.find(resp, '"isError":true', 1, true))) then
    bad = bad + 1
  end
end
function done(summary, latency, requests)
  local b = 0
  for _, t in ipairs(threads) do b = b + t:get("bad") end
  local e = summary.errors
  io.write(string.format("WRK rate=%.1f p50=%.3f p99=%.3f requests=%d bad=%d socket=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, summary.requests, b,
    e.connect + e.read + e.write + e.timeout))
end
"#;

fn wrk(url: &str, body: &str, expect: &str, script: &Path) -> Option<WrkFigures> {
    let out = std::process::Command::new("wrk")
        .args(["-t2", "--latency", "-c"])
        .arg(WRK_CONNECTIONS.to_string())
        .arg("-d")
        .arg(format!("{WRK_SECONDS}s"))
        .arg("-s")
        .arg(script)
        .arg(url)
        .env("WRK_BODY", body)
        .env("WRK_EXPECT", expect)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("WRK "))?;
    let mut f = WrkFigures::default();
    for kv in line.split_whitespace().skip(1) {
        let (k, v) = kv.split_once('=')?;
        match k {
            "rate" => f.rate = v.parse().ok()?,
            "p50" => f.p50_ms = v.parse().ok()?,
            "p99" => f.p99_ms = v.parse().ok()?,
            "requests" => f.requests = v.parse().ok()?,
            "bad" => f.bad = v.parse().ok()?,
            "socket" => f.socket_errors = v.parse().ok()?,
            _ => {}
        }
    }
    Some(f)
}

fn report_wrk(name: &str, f: &WrkFigures, server_cpu_us: Option<f64>) {
    println!(
        "{name:<44} {:>8.0} calls/s  p50 {:>6.2} ms  p99 {:>6.2} ms  requests {:>7}  bad {:>3}  socket errors {:>3}{}",
        f.rate,
        f.p50_ms,
        f.p99_ms,
        f.requests,
        f.bad,
        f.socket_errors,
        server_cpu_us.map_or(String::new(), |c| format!(
            "  server CPU {c:>5.0} us a call"
        ))
    );
}

/// User + system CPU of `pid` so far, in microseconds (clock ticks of 10 ms).
fn cpu_us(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
    let f: Vec<f64> = after
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) * 10_000.0
}

/// Part 2: `wrk` (running `script`) against `server`, whose `1k.txt` is in its root.
fn with_wrk(script: &Path, server: &support::HttpServer, label: &str) -> Option<WrkFigures> {
    let pid = server.child.id().unwrap();
    let body = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "read", "arguments": { "paths": ["1k.txt"] } } })
    .to_string();
    let before = cpu_us(pid);
    let f = wrk(
        server.url(generated::core::NAME),
        &body,
        "\"result\"",
        script,
    )?;
    let cpu = (cpu_us(pid) - before) / f.requests.max(1) as f64;
    report_wrk(
        &format!("wrk, {WRK_CONNECTIONS} connections, read 1 KB, {label}"),
        &f,
        Some(cpu),
    );
    Some(f)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let rt = support::multi_thread_runtime();
    rt.block_on(async {
        let sb = Sandbox::new();
        std::fs::write(
            sb.root().join("1k.txt"),
            format!("{}\n", "0123456789abcdef".repeat(64))
                .repeat(1)
                .get(..1024)
                .unwrap_or_default(),
        )
        .unwrap();
        let cmd = sb.serve_as_user(Path::new(gantry()), &["--port", "0"]);
        let mut server = http_server(cmd).await;
        let url: Arc<str> = Arc::from(server.url(generated::core::NAME));

        // Baseline: one client, one call at a time.
        let single = client(&url).await;
        for _ in 0..50 {
            read(&single).await.unwrap();
        }
        let started = Instant::now();
        let mut lat = Vec::new();
        for _ in 0..CLIENTS * CALLS {
            lat.push(read(&single).await.unwrap());
        }
        let base = report("1 client, sequential (baseline)", lat, 0, started.elapsed());
        single.cancel().await.unwrap();

        // 200 clients at once.
        let mut connecting = Vec::new();
        for _ in 0..CLIENTS {
            let url = url.clone();
            connecting.push(tokio::spawn(async move { client(&url).await }));
        }
        let mut clients = Vec::new();
        for c in connecting {
            clients.push(c.await.unwrap());
        }
        let started = Instant::now();
        let mut tasks = Vec::new();
        for c in clients {
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::with_capacity(CALLS);
                let mut errors = Vec::new();
                for _ in 0..CALLS {
                    match read(&c).await {
                        Ok(d) => lat.push(d),
                        Err(e) => errors.push(e),
                    }
                }
                let _ = c.cancel().await;
                (lat, errors)
            }));
        }
        let mut lat = Vec::new();
        let mut errors = Vec::new();
        for t in tasks {
            let (l, e) = t.await.unwrap();
            lat.extend(l);
            errors.extend(e);
        }
        let wall = started.elapsed();
        let rate = report(
            &format!("{CLIENTS} clients x {CALLS} calls"),
            lat,
            errors.len(),
            wall,
        );
        println!("throughput: {:.2}x the sequential baseline", rate / base);
        if let Some(e) = errors.first() {
            println!("first error: {e}");
        }
        let health = reqwest::get(format!(
            "{}/healthz",
            url.split('/').take(3).collect::<Vec<_>>().join("/")
        ))
        .await
        .unwrap();
        println!("healthz after the load: {}", health.status());
        assert!(errors.is_empty(), "{} errors", errors.len());

        // 2. The load tool.
        if std::process::Command::new("wrk").arg("--version").output().is_err() {
            println!("\n!!! wrk is not installed (apt-get install wrk): the load-tool part is SKIPPED !!!\n");
            let _ = server.child.kill().await;
            return;
        }
        println!("\nwrk -t2 -c{WRK_CONNECTIONS} -d{WRK_SECONDS}s, this machine's 2 cores shared by wrk and the server");
        let script = sb.path("wrk.lua");
        std::fs::write(&script, WRK_SCRIPT).unwrap();
        let ceiling = wrk(&format!("{}/healthz", server.base()), "", "", &script)
            .expect("wrk ran against /healthz");
        report_wrk("wrk, /healthz (the tool's ceiling here)", &ceiling, None);
        let on = with_wrk(&script, &server, "recording on").expect("wrk ran against read");
        let _ = server.child.kill().await;
        let off_sb = Sandbox::new();
        std::fs::copy(sb.root().join("1k.txt"), off_sb.root().join("1k.txt")).unwrap();
        off_sb.config("[permissions]\nsession_recording = false\n");
        let mut off_server = http_server(off_sb.serve_as_user(Path::new(gantry()), &["--port", "0"])).await;
        let off = with_wrk(&script, &off_server, "recording off").expect("wrk ran against read");
        let _ = off_server.child.kill().await;
        println!(
            "read under wrk: {:.0} calls/s ({:.0} % of the tool's ceiling against /healthz), p99 {:.2} ms; target >= 10,000 calls/s and p99 <= 20 ms: {}; recording off: {:.0} calls/s",
            on.rate,
            100.0 * on.rate / ceiling.rate,
            on.p99_ms,
            if on.rate >= 10_000.0 && on.p99_ms <= 20.0 { "met" } else { "missed" },
            off.rate
        );
        assert_eq!(on.bad + off.bad, 0, "wrong replies under load");
    });
}
