//! Soak: 50 MCP clients (rmcp, stateless Streamable HTTP) make mixed calls against one
//! release `gantry serve` for `SOAK_MINUTES` (default 30): reads, images, patches that add,
//! update and delete files, commands that finish, commands left running and then polled or
//! killed. Every minute it prints the server's resident memory, open descriptors, threads and
//! live child processes; at the end it compares the last minute with the first. All of them
//! must stay flat: a leak of any kind shows as a slope.
//!
//! `cargo bench -p gantry --bench soak` (Linux: reads /proc).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use support::{Sandbox, gantry, http_server};

const CLIENTS: usize = 50;

#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    rss_mib: u64,
    fds: usize,
    threads: u64,
    children: usize,
}

/// Every live descendant of `pid`.
fn descendants(pid: u32) -> usize {
    descendant_list(pid).len()
}

/// Every live descendant of `pid`: its pid, state and command.
fn descendant_list(pid: u32) -> Vec<String> {
    let mut parents = vec![pid];
    let mut found = Vec::new();
    let procs: Vec<(u32, u32, String)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let (head, after) = stat.rsplit_once(')')?;
            let mut fields = after.split_whitespace();
            let state = fields.next()?.to_string();
            let ppid = fields.next()?.parse().ok()?;
            let name = head.split_once('(')?.1;
            let cmd = std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            Some((
                p,
                ppid,
                format!(
                    "{p}<-{ppid} {state} {name}: {}",
                    cmd.chars().take(80).collect::<String>()
                ),
            ))
        })
        .collect();
    while let Some(parent) = parents.pop() {
        for (p, pp, what) in &procs {
            if *pp == parent {
                found.push(what.clone());
                parents.push(*p);
            }
        }
    }
    found
}

fn sample(pid: u32) -> Sample {
    Sample {
        rss_mib: support::proc_status(pid, "VmRSS:") / 1024,
        fds: std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count),
        threads: support::proc_status(pid, "Threads:"),
        children: descendants(pid),
    }
}

async fn call(
    c: &RunningService<RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> Option<Value> {
    let Value::Object(args) = args else {
        unreachable!()
    };
    let r = c
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .ok()?;
    if r.is_error == Some(true) {
        return None;
    }
    Some(support::facts(&r))
}

/// One client's loop: a fixed mix of calls, its own files, until `stop`.
async fn client(
    url: Arc<str>,
    n: usize,
    stop: Arc<AtomicBool>,
    calls: Arc<AtomicUsize>,
    errors: Arc<AtomicUsize>,
) {
    let c = support::http_client(&url).await;
    let mine = format!("c{n}.txt");
    let mut i: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let ok = match i % 8 {
            0 => call(&c, "read", json!({ "paths": ["shared.txt", "pic.png"] })).await.is_some(),
            1 => call(&c, "apply_patch", json!({ "patch": format!("*** Begin Patch\n*** Add File: {mine}\n+round {i}\n*** End Patch") })).await.is_some(),
            2 => call(&c, "apply_patch", json!({ "patch": format!("*** Begin Patch\n*** Update File: {mine}\n@@\n-round {}\n+round {i}\n*** End Patch", i - 1) })).await.is_some(),
            3 => call(&c, "view_image", json!({ "path": "pic.png" })).await.is_some(),
            4 => call(&c, "exec_command", json!({ "cmd": "echo soak; ls >/dev/null", "yield_time_ms": 2000 })).await.is_some(),
            5 => {
                // Left running, then polled and killed: the session must not outlive it.
                match call(&c, "exec_command", json!({ "cmd": "sleep 30", "yield_time_ms": 50 })).await {
                    Some(out) => match out["session_id"].as_i64() {
                        Some(id) => call(&c, "write_stdin", json!({ "session_id": id, "kill": true })).await.is_some(),
                        None => false,
                    },
                    None => false,
                }
            }
            6 => call(&c, "apply_patch", json!({ "patch": format!("*** Begin Patch\n*** Delete File: {mine}\n*** End Patch") })).await.is_some(),
            _ => call(&c, "read", json!({ "paths": ["."] })).await.is_some(),
        };
        calls.fetch_add(1, Ordering::Relaxed);
        if !ok {
            errors.fetch_add(1, Ordering::Relaxed);
        }
    }
    let _ = c.cancel().await;
}

fn main() {
    let minutes: u64 = std::env::var("SOAK_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(30);
    let rt = support::multi_thread_runtime();
    rt.block_on(async {
        let sb = Sandbox::new();
        sb.config("[permissions]\nexec = true\n");
        std::fs::write(sb.root().join("shared.txt"), "shared\n".repeat(200)).unwrap();
        let img = image::RgbImage::from_fn(300, 200, |x, y| image::Rgb([x as u8, y as u8, 90]));
        image::DynamicImage::ImageRgb8(img).save(sb.root().join("pic.png")).unwrap();
        let server = http_server(sb.serve_as_user(Path::new(gantry()), &["--port", "0"])).await;
        let pid = server.child.id().unwrap();
        let url: Arc<str> = server.url("core").into();
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicUsize::new(0));
        let errors = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..CLIENTS)
            .map(|n| tokio::spawn(client(url.clone(), n, stop.clone(), calls.clone(), errors.clone())))
            .collect();
        let started = Instant::now();
        let mut minutes_seen = Vec::new();
        println!("minute   calls  errors   rss MiB   fds  threads  children");
        for minute in 1..=minutes {
            // Several samples a minute; the minute's figure is its largest.
            let mut worst = Sample::default();
            let end = started + Duration::from_secs(60 * minute);
            while Instant::now() < end {
                tokio::time::sleep(Duration::from_secs(5)).await;
                let s = sample(pid);
                worst.rss_mib = worst.rss_mib.max(s.rss_mib);
                worst.fds = worst.fds.max(s.fds);
                worst.threads = worst.threads.max(s.threads);
                worst.children = worst.children.max(s.children);
            }
            println!(
                "{minute:>6} {:>7} {:>7} {:>9} {:>5} {:>8} {:>9}",
                calls.load(Ordering::Relaxed),
                errors.load(Ordering::Relaxed),
                worst.rss_mib,
                worst.fds,
                worst.threads,
                worst.children
            );
            minutes_seen.push(worst);
        }
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            let _ = t.await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = sample(pid);
        let left = descendant_list(pid);
        if !left.is_empty() {
            println!("left behind ({}): {:?}", left.len(), &left[..left.len().min(12)]);
        }
        let (first, last) = (minutes_seen[0], minutes_seen[minutes_seen.len() - 1]);
        println!(
            "first minute: {first:?}\nlast minute:  {last:?}\nafter the clients left: {after:?}\ncalls {} errors {}",
            calls.load(Ordering::Relaxed),
            errors.load(Ordering::Relaxed)
        );
        assert!(last.fds <= first.fds + 16, "descriptors grew");
        assert!(last.threads <= first.threads + 16, "threads grew");
        assert!(last.children <= first.children + 8, "child processes grew");
        assert!(last.rss_mib <= first.rss_mib * 3 / 2 + 16, "memory grew");
        // Commands still running when the clients left are live sessions, not leaks (the idle
        // reaper ends them later); what must hold is that none outlives the server.
        let pids: Vec<u32> = descendant_list(pid)
            .iter()
            .filter_map(|d| d.split('<').next()?.parse().ok())
            .collect();
        #[cfg(unix)]
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).unwrap(),
            rustix::process::Signal::TERM,
        );
        let mut server = server;
        let _ = tokio::time::timeout(Duration::from_secs(30), server.child.wait()).await;
        let survivors = pids
            .iter()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, a)| !a.trim_start().starts_with('Z')))
            })
            .count();
        println!("processes left after the server stopped: {survivors} of {}", pids.len());
        assert_eq!(survivors, 0, "processes outlived the server");
    });
}
