//! Wine's overhead on gantry, as users would get it: one run, side by side, a 1 KB `read` and
//! an `echo` `exec_command` through a real MCP client over stdio, against this build's Linux
//! gantry and against the release `gantry.exe` (x86_64-pc-windows-gnu) started by `wine`,
//! both on the default config (session recording on), real HOME (Wine's own profile for the
//! Windows build), calls back to back and then 50 ms apart. The ratio is Wine's cost, not
//! Windows': a real Windows machine was never measured.
//!
//! `cargo build --release -p gantry --bin gantry --target x86_64-pc-windows-gnu`, then
//! `GANTRY_WINE_EXE=target/x86_64-pc-windows-gnu/release/gantry.exe cargo bench -p gantry --bench wine`
//! (WINEPREFIX as tests/run sets it up: the bcryptprimitives shim in place).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use support::{Sandbox, gantry, percentile, stdio_client};

/// The first text of a call that must succeed.
async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> String {
    let r = support::call(client, tool, args).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    support::text(&r)
}

async fn p50(
    label: &str,
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: &Value,
    n: usize,
    gap: Duration,
) -> Duration {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let out = call(client, tool, args.clone()).await;
        times.push(t.elapsed());
        assert!(
            out.contains("0123456789abcdef") || out.contains("hi"),
            "{out}"
        );
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
    }
    times.sort_unstable();
    let p50 = percentile(&times, 0.5);
    println!(
        "{label:<44} p50 {:>8.3} ms  p99 {:>8.3} ms",
        p50.as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3
    );
    p50
}

/// `path` as a Windows program under Wine names it.
fn z(path: &Path) -> String {
    format!("Z:{}", path.display().to_string().replace('/', "\\"))
}

fn main() {
    let Some(exe) = std::env::var_os("GANTRY_WINE_EXE") else {
        println!("wine: GANTRY_WINE_EXE names no release gantry.exe; nothing measured");
        return;
    };
    let rt = support::current_thread_runtime();
    let _entered = rt.enter();
    let (linux, windows) = (Sandbox::new(), Sandbox::new());
    for sb in [&linux, &windows] {
        sb.config("");
        std::fs::write(sb.root().join("1k.txt"), "0123456789abcdef\n".repeat(60)).unwrap();
    }
    let (_, on_linux) = rt.block_on(stdio_client(
        linux.serve_as_user(Path::new(gantry()), &["--stdio"]),
    ));
    let mut cmd = tokio::process::Command::new("wine");
    cmd.arg(&exe)
        .args(["serve", "--stdio", "--config"])
        .arg(z(&windows.path("config.toml")))
        .arg("--state-dir")
        .arg(z(&windows.path("state")))
        .arg("--root")
        .arg(z(&windows.root()))
        .env("WINEDEBUG", "-all")
        .env("GANTRY_LOG", "error")
        .kill_on_drop(true);
    let (_, on_wine) = rt.block_on(stdio_client(cmd));
    let read = json!({ "paths": ["1k.txt"] });
    let echo = json!({ "cmd": "echo hi" });
    rt.block_on(async {
        // Warm both: the first command starts a shell, the first read opens the roots.
        for client in [&on_linux, &on_wine] {
            call(client, "read", read.clone()).await;
            call(client, "exec_command", echo.clone()).await;
        }
        let spaced = Duration::from_millis(50);
        let rows = [
            ("read 1 KB", "read", &read, 200, 40),
            ("exec_command echo", "exec_command", &echo, 60, 20),
        ];
        for (what, tool, args, n, m) in rows {
            for (gap, count, how) in [
                (Duration::ZERO, n, "back to back"),
                (spaced, m, "50 ms apart"),
            ] {
                let l = p50(
                    &format!("linux {what}, {how}"),
                    &on_linux,
                    tool,
                    args,
                    count,
                    gap,
                )
                .await;
                let w = p50(
                    &format!("wine  {what}, {how}"),
                    &on_wine,
                    tool,
                    args,
                    count,
                    gap,
                )
                .await;
                println!(
                    "  Wine / Linux, {what}, {how}: x{:.1}",
                    w.as_secs_f64() / l.as_secs_f64()
                );
            }
        }
    });
    rt.block_on(async {
        let _ = on_linux.cancel().await;
        let _ = on_wine.cancel().await;
    });
}
