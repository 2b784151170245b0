//! gantry against `@modelcontextprotocol/server-filesystem` (npm, pinned), in one run, with the
//! same client reading the same files over stdio: `read` of 1 KB and 256 KB against its
//! `read_text_file`. For each: p50/p99 of sequential calls, and calls per second with 8 calls
//! in flight. Installs the pinned package under `target/bench-tools` with npm when missing.
//!
//! Two clients, each used for both servers: rmcp's (what a Rust host runs; it builds the whole
//! typed result, which costs about as much CPU per call as a fast server, so on 2 cores it caps
//! the ratio), and a lean wire client (handshake, newline framing, each reply checked for its
//! id, a result that is not an error and the decoded text's length, without building the
//! structured tree), which leaves the servers as the bottleneck, the way wrk measures HTTP
//! servers. Client CPU per call is printed for both.
//!
//! `cargo bench -p gantry --bench peers`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use support::{Sandbox, gantry, stdio_client};

const PEER: &str = "@modelcontextprotocol/server-filesystem";
const PEER_VERSION: &str = "2026.8.31";
const SEQUENTIAL: usize = 400;
const CONCURRENT: usize = 2000;
const IN_FLIGHT: usize = 8;

fn install_peer() -> Option<PathBuf> {
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-tools");
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
    let (pid, client) = stdio_client(cmd).await;
    (pid, Arc::new(client))
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
    client_cpu_per_call_us: f64,
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
    let client_before = cpu_us(std::process::id());
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
        client_cpu_per_call_us: (cpu_us(std::process::id()) - client_before) / calls,
    }
}

/// The lean client: one child process spoken to directly in JSON-RPC lines.
struct Wire {
    pid: u32,
    _child: tokio::process::Child,
    input: tokio::process::ChildStdin,
    output: tokio::io::BufReader<tokio::process::ChildStdout>,
    line: Vec<u8>,
    next_id: u64,
}

#[derive(serde::Deserialize)]
struct WireReply<'a> {
    id: u64,
    #[serde(borrow)]
    result: Option<WireResult<'a>>,
    error: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct WireResult<'a> {
    #[serde(rename = "isError", default)]
    is_error: bool,
    #[serde(borrow)]
    content: Vec<WireBlock<'a>>,
}

#[derive(serde::Deserialize)]
struct WireBlock<'a> {
    #[serde(borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
}

impl Wire {
    async fn start(mut cmd: tokio::process::Command) -> Wire {
        use tokio::io::AsyncBufReadExt as _;
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut w = Wire {
            pid: child.id().unwrap(),
            input: child.stdin.take().unwrap(),
            output: tokio::io::BufReader::with_capacity(1 << 20, child.stdout.take().unwrap()),
            _child: child,
            line: Vec::new(),
            next_id: 1,
        };
        w.send(
            &json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": { "name": "wire-bench", "version": "1" } } }),
        )
        .await;
        w.line.clear();
        w.output.read_until(b'\n', &mut w.line).await.unwrap();
        assert!(
            w.line.starts_with(b"{"),
            "{}",
            String::from_utf8_lossy(&w.line)
        );
        w.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        w
    }

    async fn send(&mut self, message: &Value) {
        use tokio::io::AsyncWriteExt as _;
        let mut bytes = serde_json::to_vec(message).unwrap();
        bytes.push(b'\n');
        self.input.write_all(&bytes).await.unwrap();
    }

    async fn request(&mut self, tool: &str, args: &Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": tool, "arguments": args } }))
            .await;
        id
    }

    /// Reads the next reply and checks it; returns its id.
    async fn reply(&mut self, name: &str, expect: usize) -> u64 {
        use tokio::io::AsyncBufReadExt as _;
        loop {
            self.line.clear();
            assert!(
                self.output.read_until(b'\n', &mut self.line).await.unwrap() > 0,
                "{name}: closed"
            );
            // Skip notifications (no id) such as log messages.
            let Ok(r) = serde_json::from_slice::<WireReply<'_>>(&self.line) else {
                assert!(
                    !self.line.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\""),
                    "{name}: bad reply"
                );
                continue;
            };
            assert!(r.error.is_none(), "{name}: JSON-RPC error");
            let result = r.result.expect("a result");
            assert!(!result.is_error, "{name}: tool error");
            let text = result
                .content
                .first()
                .and_then(|b| b.text.as_deref())
                .map_or(0, str::len);
            assert!(text >= expect, "{name}: short result ({text} bytes)");
            return r.id;
        }
    }
}

async fn measure_wire(name: &str, mut w: Wire, tool: &str, args: Value, expect: usize) -> Figures {
    for _ in 0..30 {
        w.request(tool, &args).await;
        w.reply(name, expect).await;
    }
    let mut lat = Vec::with_capacity(SEQUENTIAL);
    for _ in 0..SEQUENTIAL {
        let started = Instant::now();
        let id = w.request(tool, &args).await;
        assert_eq!(w.reply(name, expect).await, id);
        lat.push(started.elapsed());
    }
    lat.sort();
    let cpu_before = cpu_us(w.pid);
    let client_before = cpu_us(std::process::id());
    let started = Instant::now();
    // IN_FLIGHT requests outstanding at all times on the one connection.
    for _ in 0..IN_FLIGHT {
        w.request(tool, &args).await;
    }
    for i in 0..CONCURRENT {
        w.reply(name, expect).await;
        if i + IN_FLIGHT < CONCURRENT {
            w.request(tool, &args).await;
        }
    }
    let calls = CONCURRENT as f64;
    Figures {
        p50: pct(&lat, 0.5),
        p99: pct(&lat, 0.99),
        rate: calls / started.elapsed().as_secs_f64(),
        cpu_per_call_us: (cpu_us(w.pid) - cpu_before) / calls,
        client_cpu_per_call_us: (cpu_us(std::process::id()) - client_before) / calls,
    }
}

fn report(file: &str, client: &str, rows: [(&str, &Figures); 2]) {
    for (name, f) in rows {
        println!(
            "{file:<9} {client:<5} {name:<34} p50 {:>7.3} ms  p99 {:>7.3} ms  {:>7.0} calls/s  CPU/call server {:>5.0} us, client {:>5.0} us",
            f.p50, f.p99, f.rate, f.cpu_per_call_us, f.client_cpu_per_call_us
        );
    }
    let (ours, theirs) = (rows[0].1, rows[1].1);
    println!(
        "{file:<9} {client:<5} ratio: {:.2}x the calls/s, p99 {:.2}x, server CPU per call {:.2}x ({})",
        ours.rate / theirs.rate,
        ours.p99 / theirs.p99,
        ours.cpu_per_call_us / theirs.cpu_per_call_us,
        if ours.rate >= 3.0 * theirs.rate && ours.p99 < theirs.p99 {
            "meets the target"
        } else {
            "misses the target"
        }
    );
}

/// Resident memory of `pid` (kB), from /proc.
fn rss_kb(pid: u32) -> u64 {
    support::proc_status(pid, "VmRSS:")
}

/// Start-to-ready of a server: from spawning it to the answer to `initialize`; the median of
/// `runs` fresh starts. The last server started is handed back, ready.
async fn start_to_ready(make: &dyn Fn() -> tokio::process::Command, runs: usize) -> (f64, Wire) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let t = Instant::now();
        let w = Wire::start(make()).await;
        times.push(t.elapsed());
        last = Some(w);
    }
    times.sort();
    (times[times.len() / 2].as_secs_f64() * 1e3, last.unwrap())
}

/// Start-to-ready, RSS once ready, and RSS after 1,000 calls of `tool` (sequential).
async fn memory_and_start(
    name: &str,
    make: &dyn Fn() -> tokio::process::Command,
    tool: &str,
    args: Value,
    expect: usize,
) {
    let (ready_ms, mut w) = start_to_ready(make, 5).await;
    // What a client sees right after start: give lazy start-up work a moment to settle.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = rss_kb(w.pid);
    for _ in 0..1000 {
        let id = w.request(tool, &args).await;
        assert_eq!(w.reply(name, expect).await, id);
    }
    let after = rss_kb(w.pid);
    println!(
        "{name:<40} start to ready {ready_ms:>7.1} ms  RSS idle {:>6.1} MiB, after 1,000 calls {:>6.1} MiB",
        idle as f64 / 1024.0,
        after as f64 / 1024.0
    );
}

fn main() {
    let Some(peer) = install_peer() else {
        eprintln!(
            "\n!!! npm could not install {PEER}@{PEER_VERSION}: the peer comparison is SKIPPED !!!\n"
        );
        return;
    };
    let rt = support::current_thread_runtime();
    rt.block_on(async {
        let sb = Sandbox::new();
        let root = sb.root().canonicalize().unwrap();
        std::fs::write(root.join("1k.txt"), format!("{}\n", "x".repeat(1023))).unwrap();
        std::fs::write(root.join("256k.txt"), format!("{}\n", "y".repeat(1023)).repeat(256)).unwrap();

        let gantry_cmd = || {
            sb.serve_as_user(Path::new(gantry()), &["--stdio"])
        };
        let fs_cmd = || {
            let mut c = tokio::process::Command::new("node");
            c.arg(&peer).arg(&root).stderr(std::process::Stdio::null());
            c
        };
        let (pid, client) = start(gantry_cmd()).await;
        let gantry = Target {
            name: "gantry read",
            pid,
            client,
            tool: "read",
            args: |_, f| json!({ "paths": [f] }),
        };
        let (pid, client) = start(fs_cmd()).await;
        let fs = Target {
            name: "server-filesystem read_text_file",
            pid,
            client,
            tool: "read_text_file",
            args: |root, f| json!({ "path": root.join(f).display().to_string() }),
        };

        println!("\nsame client, same files, over stdio; sequential p50/p99 over {SEQUENTIAL} calls, throughput with {IN_FLIGHT} in flight over {CONCURRENT} calls");
        for (file, expect) in [("1k.txt", 1024), ("256k.txt", 256 * 1024)] {
            let ours = measure(&gantry, &root, file, expect).await;
            let theirs = measure(&fs, &root, file, expect).await;
            report(file, "rmcp", [(gantry.name, &ours), (fs.name, &theirs)]);
            let ours = measure_wire(gantry.name, Wire::start(gantry_cmd()).await, "read", json!({ "paths": [file] }), expect).await;
            let theirs = measure_wire(fs.name, Wire::start(fs_cmd()).await, "read_text_file", json!({ "path": root.join(file) }), expect).await;
            report(file, "wire", [(gantry.name, &ours), (fs.name, &theirs)]);
        }

        // Memory and start, same run: gantry as installed (exec on), gantry with exec off,
        // the peer.
        println!("\nstart (spawn to the answer to initialize, median of 5) and resident memory, read of 1 KB over stdio");
        let no_exec = Sandbox::new();
        std::fs::copy(root.join("1k.txt"), no_exec.root().join("1k.txt")).unwrap();
        no_exec.config("[permissions]\nexec = false\n");
        let read_1k = json!({ "paths": ["1k.txt"] });
        memory_and_start("gantry (default: exec on)", &gantry_cmd, "read", read_1k.clone(), 1024).await;
        memory_and_start(
            "gantry (exec off)",
            &|| no_exec.serve_as_user(Path::new(support::gantry()), &["--stdio"]),
            "read",
            read_1k,
            1024,
        )
        .await;
        memory_and_start(
            "server-filesystem",
            &fs_cmd,
            "read_text_file",
            json!({ "path": root.join("1k.txt") }),
            1024,
        )
        .await;
        // With exec on, the first command waits for the login snapshot gantry takes at start.
        let mut first = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            let mut w = Wire::start(gantry_cmd()).await;
            let id = w.request("exec_command", &json!({ "cmd": "echo hi" })).await;
            assert_eq!(w.reply("gantry exec_command", 2).await, id);
            first.push(t.elapsed());
        }
        first.sort();
        println!(
            "gantry (default): spawn to the first exec_command's reply (the real profile's snapshot included), median of 5: {:.1} ms",
            first[2].as_secs_f64() * 1e3
        );
    });
}
