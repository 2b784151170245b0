//! gantry against `@modelcontextprotocol/server-filesystem` (npm, pinned), in one run, with the
//! same client (rmcp over stdio) reading the same files: `read` of 1 KB and 256 KB against its
//! `read_text_file`. For each: p50/p99 of sequential calls, and calls per second with 8 calls
//! in flight. Installs the pinned package under `target/bench-tools` with npm when missing.
//!
//! `cargo bench -p runtime --bench peers`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

const PEER: &str = "@modelcontextprotocol/server-filesystem";
const PEER_VERSION: &str = "2026.8.31";
const SEQUENTIAL: usize = 400;
const CONCURRENT: usize = 2000;
const IN_FLIGHT: usize = 8;

fn install_peer() -> Option<PathBuf> {
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-tools");
    let entry = tools.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if !entry.exists() {
        std::fs::create_dir_all(&tools).ok()?;
        let status = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
            .arg(&tools)
            .arg(format!("{PEER}@{PEER_VERSION}"))
            .status()
            .ok()?;
        if !status.success() {
            return None;
        }
    }
    entry.exists().then_some(entry)
}

struct Target {
    name: &'static str,
    pid: u32,
    client: Arc<RunningService<RoleClient, ()>>,
    tool: &'static str,
    args: fn(&Path, &str) -> Value,
}

async fn start(cmd: tokio::process::Command) -> (u32, Arc<RunningService<RoleClient, ()>>) {
    let transport = TokioChildProcess::new(cmd).unwrap();
    let pid = transport.id().unwrap();
    (pid, Arc::new(().serve(transport).await.unwrap()))
}

/// CPU time (user + system) a process has used so far, in microseconds.
fn cpu_us(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rfind(')').map_or("", |i| &stat[i + 2..]);
    let fields: Vec<f64> = after
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    // utime and stime, fields 14 and 15, in clock ticks (USER_HZ = 100).
    (fields.get(11).copied().unwrap_or(0.0) + fields.get(12).copied().unwrap_or(0.0)) * 10_000.0
}

async fn call(t: &Target, root: &Path, file: &str, expect: usize) -> Duration {
    let Value::Object(args) = (t.args)(root, file) else {
        unreachable!()
    };
    let started = Instant::now();
    let r = t
        .client
        .call_tool(CallToolRequestParams::new(t.tool).with_arguments(args))
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert_ne!(r.is_error, Some(true), "{}: {:?}", t.name, r.content);
    let text_len = r
        .content
        .first()
        .and_then(|c| c.as_text())
        .map_or(0, |t| t.text.len());
    assert!(
        text_len >= expect,
        "{}: short result ({text_len} bytes)",
        t.name
    );
    elapsed
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

struct Figures {
    p50: f64,
    p99: f64,
    rate: f64,
    cpu_per_call_us: f64,
}

async fn measure(t: &Target, root: &Path, file: &'static str, expect: usize) -> Figures {
    for _ in 0..30 {
        call(t, root, file, expect).await;
    }
    let mut lat = Vec::with_capacity(SEQUENTIAL);
    for _ in 0..SEQUENTIAL {
        lat.push(call(t, root, file, expect).await);
    }
    lat.sort();
    let cpu_before = cpu_us(t.pid);
    let started = Instant::now();
    let per_worker = CONCURRENT / IN_FLIGHT;
    let mut workers = Vec::new();
    for _ in 0..IN_FLIGHT {
        let t = Target {
            name: t.name,
            pid: t.pid,
            client: t.client.clone(),
            tool: t.tool,
            args: t.args,
        };
        let root = root.to_path_buf();
        workers.push(tokio::spawn(async move {
            for _ in 0..per_worker {
                call(&t, &root, file, expect).await;
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    let calls = (per_worker * IN_FLIGHT) as f64;
    Figures {
        p50: pct(&lat, 0.5),
        p99: pct(&lat, 0.99),
        rate: calls / started.elapsed().as_secs_f64(),
        cpu_per_call_us: (cpu_us(t.pid) - cpu_before) / calls,
    }
}

fn main() {
    let Some(peer) = install_peer() else {
        eprintln!(
            "\n!!! npm could not install {PEER}@{PEER_VERSION}: the peer comparison is SKIPPED !!!\n"
        );
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        let (root, state, home) = (tmp.path().join("root"), tmp.path().join("state"), tmp.path().join("home"));
        for d in [&root, &state, &home] {
            std::fs::create_dir_all(d).unwrap();
        }
        let root = root.canonicalize().unwrap();
        std::fs::write(root.join("1k.txt"), format!("{}\n", "x".repeat(1023))).unwrap();
        std::fs::write(root.join("256k.txt"), format!("{}\n", "y".repeat(1023)).repeat(256)).unwrap();

        let g = tokio::process::Command::new(env!("CARGO_BIN_EXE_gantry")).configure(|c| {
            c.args(["serve", "--stdio", "--config"])
                .arg(tmp.path().join("none.toml"))
                .arg("--state-dir")
                .arg(&state)
                .arg("--root")
                .arg(&root)
                .env("HOME", &home)
                .env("GANTRY_LOG", "error");
        });
        let (pid, client) = start(g).await;
        let gantry = Target {
            name: "gantry read",
            pid,
            client,
            tool: "read",
            args: |_, f| json!({ "paths": [f] }),
        };
        let mut n = tokio::process::Command::new("node");
        n.arg(&peer).arg(&root).stderr(std::process::Stdio::null());
        let (pid, client) = start(n).await;
        let fs = Target {
            name: "server-filesystem read_text_file",
            pid,
            client,
            tool: "read_text_file",
            args: |root, f| json!({ "path": root.join(f).display().to_string() }),
        };

        println!("\nsame client (rmcp, stdio), same files; sequential p50/p99 over {SEQUENTIAL} calls, throughput with {IN_FLIGHT} in flight over {CONCURRENT} calls");
        for (file, expect) in [("1k.txt", 1024), ("256k.txt", 256 * 1024)] {
            let ours = measure(&gantry, &root, file, expect).await;
            let theirs = measure(&fs, &root, file, expect).await;
            for (t, f) in [(&gantry, &ours), (&fs, &theirs)] {
                println!(
                    "{file:<9} {:<34} p50 {:>7.3} ms  p99 {:>7.3} ms  {:>7.0} calls/s  server CPU {:>5.0} us/call",
                    t.name, f.p50, f.p99, f.rate, f.cpu_per_call_us
                );
            }
            println!(
                "{file:<9} ratio: {:.2}x the calls/s, p99 {:.2}x, server CPU per call {:.2}x ({})",
                ours.rate / theirs.rate,
                ours.p99 / theirs.p99,
                ours.cpu_per_call_us / theirs.cpu_per_call_us,
                if ours.rate >= 3.0 * theirs.rate && ours.p99 < theirs.p99 { "meets the target" } else { "misses the target" }
            );
        }
    });
}
