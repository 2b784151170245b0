//! The Hosts connector's cost, as users get it: one run, side by side, a 1 KB `read` and an
//! `echo` `exec_command` on a machine reached over SSH on loopback (a real sshd, this build's
//! gantry there with the default config, session recording on), the same calls on the hub's
//! own Core connector, and plain `ssh host cat file` over the same shared connection. Real
//! HOME, profile and PATH on both ends; calls back to back, then 50 ms apart.
//!
//! `cargo bench -p gantry --bench hosts`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use support::machines::{Remote, UserKey, sshd_here};
use support::{Sandbox, gantry, percentile, stdio_client};

const CALLS: usize = 200;
const SPACED: usize = 40;

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> String {
    let Value::Object(args) = args else { panic!() };
    let r = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{r:?}");
    r.content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

fn summary(label: &str, mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    let p50 = percentile(&times, 0.5);
    println!(
        "{label:<46} p50 {:>8.3} ms  p99 {:>8.3} ms",
        p50.as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3
    );
    p50
}

async fn timed<F, Fut>(n: usize, gap: Duration, mut f: F) -> Vec<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f().await;
        out.push(t.elapsed());
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
    }
    out
}

fn main() {
    if !sshd_here() {
        return;
    }
    let rt = support::current_thread_runtime();
    let _entered = rt.enter();
    let key = UserKey::new();
    let machine = Remote::start(&key, "");
    std::fs::write(machine.path("root/1k.txt"), "0123456789abcdef\n".repeat(60)).unwrap();
    let hub = Sandbox::new();
    std::fs::write(hub.root().join("1k.txt"), "0123456789abcdef\n".repeat(60)).unwrap();
    // The machine keeps the real HOME (and profile), as a user's machine has.
    hub.config(&machine.entry("m", &key, false));
    let pinned = std::process::Command::new(gantry())
        .args(["hosts", "add", "m", "--yes"])
        .args(hub.args())
        .env("HOME", hub.path("home"))
        .output()
        .unwrap();
    assert!(pinned.status.success(), "{pinned:?}");

    let hosts_cmd = hub.serve_as_user(Path::new(gantry()), &["--stdio", "--connector", "hosts"]);
    let core_cmd = hub.serve_as_user(Path::new(gantry()), &["--stdio"]);
    let (_, hosts) = rt.block_on(stdio_client(hosts_cmd));
    let (_, core) = rt.block_on(stdio_client(core_cmd));
    // The same shared connection the hub's ssh keeps up, for plain ssh.
    let ssh_args: Vec<String> = {
        let settings_dir = hub.path("state");
        let config = config::machines::MachineConfig {
            ssh: format!("{}@127.0.0.1", support::machines::user()),
            port: Some(machine.port),
            identity_file: Some(key.private().display().to_string()),
            gantry: None,
        };
        remote::Machine {
            name: "m",
            config: &config,
            state_dir: &settings_dir,
        }
        .ssh_args(remote::Sharing::Start)
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
    };
    let file = machine.path("root/1k.txt").display().to_string();
    let ssh_cat = || {
        let out = std::process::Command::new("ssh")
            .args(&ssh_args)
            .arg(format!("cat {file}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };

    rt.block_on(async {
        // Warm: the machine's gantry started, its shell ready, the shared connection up.
        for _ in 0..5 {
            call(&hosts, "read", json!({ "host": "m", "paths": ["1k.txt"] })).await;
            call(&hosts, "exec_command", json!({ "host": "m", "cmd": "echo hi" })).await;
            call(&core, "read", json!({ "paths": ["1k.txt"] })).await;
            call(&core, "exec_command", json!({ "cmd": "echo hi" })).await;
            ssh_cat();
        }
        for (gap, n, how) in [
            (Duration::ZERO, CALLS, "back to back"),
            (Duration::from_millis(50), SPACED, "50 ms apart"),
        ] {
            println!("\n{n} calls each, {how}:");
            let local_read = summary(
                "read 1 KB, hub's own core",
                timed(n, gap, || async {
                    call(&core, "read", json!({ "paths": ["1k.txt"] })).await;
                })
                .await,
            );
            let remote_read = summary(
                "read 1 KB, hosts → m over ssh",
                timed(n, gap, || async {
                    call(&hosts, "read", json!({ "host": "m", "paths": ["1k.txt"] })).await;
                })
                .await,
            );
            let plain = summary(
                "ssh m cat 1 KB (shared connection)",
                timed(n, gap, || async { ssh_cat() }).await,
            );
            let local_exec = summary(
                "exec_command echo, hub's own core",
                timed(n, gap, || async {
                    call(&core, "exec_command", json!({ "cmd": "echo hi" })).await;
                })
                .await,
            );
            let remote_exec = summary(
                "exec_command echo, hosts → m over ssh",
                timed(n, gap, || async {
                    call(&hosts, "exec_command", json!({ "host": "m", "cmd": "echo hi" })).await;
                })
                .await,
            );
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            println!(
                "remote − local p50: read {:+.3} ms, exec {:+.3} ms (target ≤ +2 ms); remote read vs plain ssh cat: ×{:.2}",
                ms(remote_read) - ms(local_read),
                ms(remote_exec) - ms(local_exec),
                ms(remote_read) / ms(plain)
            );
        }
    });
    rt.block_on(async {
        hosts.cancel().await.unwrap();
        core.cancel().await.unwrap();
    });
}
