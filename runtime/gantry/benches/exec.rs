//! `exec_command` through a real MCP client over stdio against the real `gantry`, with the
//! machine's real HOME and shell profile: first p50/p99 of `echo hi` beside `bash -lc 'echo
//! hi'` and a bare fork+exec of /bin/echo, then (criterion) beside the floor of spawning the
//! same login shell in a PTY directly from Rust (portable-pty, same command, read to EOF,
//! wait), all measured in the same run. Then the server's
//! resident memory with 64 live sessions, against the same server idle.
//!
//! `cargo bench -p gantry --bench exec`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::io::Read as _;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use support::{Sandbox, gantry, stdio_client};

fn shell() -> String {
    terminal::shell::Shell::detect()
        .path
        .to_string_lossy()
        .into_owned()
}

/// The floor: the same shell, in a PTY, from Rust, without MCP or gantry.
fn pty_echo(home: &Path) -> String {
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 40,
            cols: 200,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut cmd = CommandBuilder::new(shell());
    cmd.args(["-lc", "echo hi"]);
    cmd.env("HOME", home);
    let mut child = pty.slave.spawn_command(cmd).unwrap();
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().unwrap();
    let mut out = String::new();
    let _ = reader.read_to_string(&mut out);
    child.wait().unwrap();
    out
}

fn rss_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

async fn call(client: &RunningService<RoleClient, ()>, args: Value) -> rmcp::model::CallToolResult {
    let Value::Object(args) = args else { panic!() };
    client
        .call_tool(CallToolRequestParams::new("exec_command").with_arguments(args))
        .await
        .unwrap()
}

fn benches(c: &mut Criterion) {
    let rt = support::current_thread_runtime();
    let sb = Sandbox::new();
    // The real HOME and shell profile, for the floor and for gantry alike.
    let home = std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    let _runtime = rt.enter();
    let cmd = sb.serve_as_user(Path::new(gantry()), &["--stdio"]);
    let (pid, client) = rt.block_on(stdio_client(cmd));

    // p50/p99 side by side, same run: what a user's shell costs by itself, and the floor of
    // starting any process at all.
    let samples = |what: &str, f: &mut dyn FnMut() -> std::time::Duration| {
        for _ in 0..10 {
            f();
        }
        let mut t: Vec<std::time::Duration> = (0..300).map(|_| f()).collect();
        t.sort();
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        println!(
            "{what:<46} p50 {:>7.2} ms  p99 {:>7.2} ms  min {:>6.2} ms",
            ms(t[t.len() / 2]),
            ms(t[t.len() * 99 / 100]),
            ms(t[0])
        );
        ms(t[t.len() / 2])
    };
    println!(
        "
echo hi, 300 runs each, real HOME and profile ({})",
        shell()
    );
    // A model's calls come seconds apart, or at once (parallel calls, a script): both are
    // measured. 100 ms apart, the pause (not timed) lets the next shell finish starting;
    // back to back, each call follows the last reply at once.
    let (runtime, mcp) = (&rt, &client);
    let echo = |pause: std::time::Duration| {
        move || {
            std::thread::sleep(pause);
            let t = std::time::Instant::now();
            let r = runtime.block_on(call(mcp, json!({ "cmd": "echo hi" })));
            assert!(support::text(&r).ends_with("Output:\nhi\n"));
            t.elapsed()
        }
    };
    let spaced = samples(
        "exec_command over stdio (MCP), 100 ms apart",
        &mut echo(std::time::Duration::from_millis(100)),
    );
    let back_to_back = samples(
        "exec_command over stdio (MCP), back to back",
        &mut echo(std::time::Duration::ZERO),
    );
    let login = samples("bash -lc 'echo hi' (no PTY)", &mut || {
        let t = std::time::Instant::now();
        let out = std::process::Command::new(shell())
            .args(["-lc", "echo hi"])
            .env("HOME", &home)
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"hi\n");
        t.elapsed()
    });
    let floor = samples("fork+exec /bin/echo", &mut || {
        let t = std::time::Instant::now();
        let out = std::process::Command::new("/bin/echo")
            .arg("hi")
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"hi\n");
        t.elapsed()
    });
    for (what, ours) in [("100 ms apart", spaced), ("back to back", back_to_back)] {
        println!(
            "exec_command {what}: p50 {:.2}x the login shell's and {:.1}x a bare fork+exec",
            ours / login,
            ours / floor
        );
    }
    println!();

    let mut g = c.benchmark_group("exec echo hi");
    g.bench_function("floor: same shell in a PTY from Rust", |b| {
        b.iter(|| assert!(black_box(pty_echo(&home)).contains("hi")))
    });
    g.bench_function("exec_command over stdio", |b| {
        b.iter(|| {
            let r = rt.block_on(call(&client, json!({ "cmd": "echo hi" })));
            assert!(
                support::text(&r).ends_with("Output:\nhi\n"),
                "{:?}",
                support::text(&r)
            );
        })
    });
    g.finish();

    let idle_rss = rss_kb(pid, "VmRSS:");
    rt.block_on(async {
        for _ in 0..64 {
            let r = call(&client, json!({ "cmd": "sleep 120", "yield_time_ms": 250 })).await;
            assert!(support::facts(&r)["session_id"].is_i64());
        }
    });
    let live_rss = rss_kb(pid, "VmRSS:");
    let peak = rss_kb(pid, "VmHWM:");
    println!(
        "\nmemory: gantry RSS idle {idle_rss} kB; with 64 live sessions {live_rss} kB (+{} kB, {:.1} kB per session); peak {peak} kB",
        live_rss.saturating_sub(idle_rss),
        live_rss.saturating_sub(idle_rss) as f64 / 64.0
    );
    rt.block_on(async { client.cancel().await.unwrap() });
}

criterion_group!(group, benches);
criterion_main!(group);
