//! Faults from outside the server, on the real binary: killed with SIGKILL in the middle of
//! multi-file patches, a full disk (a 1 MiB tmpfs), a read-only file system (a tmpfs
//! remounted read-only), and no descriptors left (its open-file limit lowered to what it
//! already holds). Each must end in a clean error or a whole file, never a torn one, and the
//! server keeps serving where it survives. Mounting needs root: without it those two tests say
//! so loudly and do nothing.

use std::path::Path;
use std::time::Duration;

use rustix::process::{Pid, Resource, Rlimit, Signal, kill_process, prlimit};
use serde_json::json;

use crate::support::{Sandbox, call, facts, gantry, is_error, stdio_client, text};

const LINES: usize = 400_000;

fn old_text() -> String {
    "line\n".repeat(LINES)
}

fn new_text() -> String {
    format!("LINE\n{}", "line\n".repeat(LINES - 1))
}

/// A patch turning each file to the other state, whichever it is in now.
fn flip(root: &Path, files: usize) -> String {
    let mut patch = String::from("*** Begin Patch\n");
    for i in 0..files {
        let now = std::fs::read_to_string(root.join(format!("f{i}.txt"))).unwrap();
        let (from, to) = if now.starts_with("LINE") {
            ("LINE", "line")
        } else {
            ("line", "LINE")
        };
        patch.push_str(&format!("*** Update File: f{i}.txt\n@@\n-{from}\n+{to}\n"));
    }
    patch.push_str("*** End Patch");
    patch
}

#[tokio::test]
async fn a_killed_server_leaves_every_file_wholly_old_or_wholly_new() {
    const FILES: usize = 6;
    const ROUNDS: usize = 24;
    let sb = Sandbox::new();
    sb.config("[permissions]\nexec = false\n");
    let (old, new) = (old_text(), new_text());
    for i in 0..FILES {
        std::fs::write(sb.root().join(format!("f{i}.txt")), &old).unwrap();
    }
    // How long a whole patch takes here, from a server's start: kills spread over it.
    let started = std::time::Instant::now();
    {
        let client = sb.stdio(&[]).await;
        let r = call(
            &client,
            "apply_patch",
            json!({ "patch": flip(&sb.root(), FILES) }),
        )
        .await;
        assert!(!crate::support::is_error(&r), "{}", text(&r));
        client.cancel().await.unwrap();
    }
    let whole = started.elapsed().as_millis() as u64;
    let mut seed: u64 = 0x6b1e;
    let (mut mixed, mut changed, mut litter) = (0, 0, 0);
    for round in 0..ROUNDS {
        let before: Vec<String> = (0..FILES)
            .map(|i| std::fs::read_to_string(sb.root().join(format!("f{i}.txt"))).unwrap())
            .collect();
        let patch = flip(&sb.root(), FILES);
        let (pid, client) = stdio_client(sb.serve(Path::new(gantry()), &["--stdio"])).await;
        let pending = tokio::spawn(async move {
            let serde_json::Value::Object(args) = json!({ "patch": patch }) else {
                unreachable!()
            };
            // The transport closes under the call: that error is the expected end.
            let _ = client
                .call_tool(
                    rmcp::model::CallToolRequestParams::new("apply_patch").with_arguments(args),
                )
                .await;
        });
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Mostly late in the call, where the writes are, and on past its measured length: a
        // loaded machine (the rest of the suite running beside it) stretches every round.
        tokio::time::sleep(Duration::from_millis(
            whole * 2 / 5 + seed % (whole * 8 / 5 + 1),
        ))
        .await;
        let _ = kill_process(Pid::from_raw(pid as i32).unwrap(), Signal::KILL);
        let _ = tokio::time::timeout(Duration::from_secs(10), pending).await;
        let mut flipped = 0;
        for (i, was) in before.iter().enumerate() {
            let now = std::fs::read_to_string(sb.root().join(format!("f{i}.txt"))).unwrap();
            assert!(
                now == old || now == new,
                "round {round}: f{i}.txt is torn ({} bytes)",
                now.len()
            );
            flipped += usize::from(&now != was);
        }
        litter += temp_files(&sb.root()).len();
        changed += usize::from(flipped > 0);
        mixed += usize::from(flipped > 0 && flipped < FILES);
    }
    // The kills landed before, during and after the writes, not only on one side of them.
    println!(
        "rounds with files changed: {changed}/{ROUNDS}, stopped part-way: {mixed}/{ROUNDS}, temp files seen: {litter}"
    );
    assert!(changed > 0, "no kill ever landed after a write");
}

/// Mounts a tmpfs of `size` at `dir`; false (and a loud warning) where mounting is not allowed.
fn mount_tmpfs(dir: &Path, size: &str) -> bool {
    std::fs::create_dir_all(dir).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        crate::support::cannot_check(
            "cannot mount a tmpfs (not root?): this fault test did NOT run",
        );
    }
    ok
}

fn unmount(dir: &Path) {
    let _ = std::process::Command::new("umount").arg(dir).status();
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".gantry-"))
        .collect()
}

#[tokio::test]
async fn a_full_disk_is_a_clean_error_and_nothing_is_torn() {
    let sb = Sandbox::new();
    let small = sb.root().join("small");
    if !mount_tmpfs(&small, "1m") {
        return;
    }
    std::fs::write(small.join("a.txt"), "one\n").unwrap();
    std::fs::write(small.join("filler"), vec![b'x'; 900 * 1024]).unwrap();
    let client = sb.stdio(&[]).await;
    let big = "+".to_string() + &"y".repeat(1000) + "\n";
    let patch = format!(
        "*** Begin Patch\n*** Update File: small/a.txt\n@@\n-one\n+two\n*** Add File: small/big.txt\n{}*** End Patch",
        big.repeat(300)
    );
    let r = call(&client, "apply_patch", json!({ "patch": patch })).await;
    let shown = text(&r);
    assert!(shown.starts_with("OS_ERROR: "), "{shown}");
    assert!(shown.contains("No space left on device"), "{shown}");
    // The first file was put back, the second never appeared, no temp file is left.
    assert_eq!(
        std::fs::read_to_string(small.join("a.txt")).unwrap(),
        "one\n"
    );
    assert!(!small.join("big.txt").exists());
    assert_eq!(temp_files(&small), Vec::<String>::new());
    // And the server goes on.
    let r = call(&client, "read", json!({ "paths": ["small/a.txt"] })).await;
    assert_eq!(text(&r), "==> small/a.txt (lines 1-1 of 1) <==\none\n");
    client.cancel().await.unwrap();
    unmount(&small);
}

#[tokio::test]
async fn a_read_only_file_system_is_a_clean_error_and_nothing_changes() {
    let sb = Sandbox::new();
    let ro = sb.root().join("ro");
    if !mount_tmpfs(&ro, "1m") {
        return;
    }
    std::fs::write(ro.join("a.txt"), "one\n").unwrap();
    let remounted = std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&ro)
        .status()
        .is_ok_and(|s| s.success());
    assert!(remounted, "remount read-only failed");
    let client = sb.stdio(&[]).await;
    let patch = "*** Begin Patch\n*** Update File: ro/a.txt\n@@\n-one\n+two\n*** End Patch";
    let r = call(&client, "apply_patch", json!({ "patch": patch })).await;
    let shown = text(&r);
    assert!(shown.starts_with("OS_ERROR: "), "{shown}");
    assert!(shown.contains("Read-only file system"), "{shown}");
    assert_eq!(std::fs::read_to_string(ro.join("a.txt")).unwrap(), "one\n");
    client.cancel().await.unwrap();
    unmount(&ro);
}

#[tokio::test]
async fn out_of_descriptors_is_a_clean_error_and_the_server_recovers() {
    let sb = Sandbox::new();
    sb.config("[permissions]\nexec = false\n");
    sb.write("a.txt", "hello\n");
    let (pid, client) = stdio_client(sb.serve(Path::new(gantry()), &["--stdio"])).await;
    let r = call(&client, "read", json!({ "paths": ["a.txt"] })).await;
    assert_eq!(text(&r), "==> a.txt (lines 1-1 of 1) <==\nhello\n");
    let pid = Pid::from_raw(pid as i32).unwrap();
    let held = std::fs::read_dir(format!("/proc/{}/fd", pid.as_raw_nonzero()))
        .unwrap()
        .count() as u64;
    // No descriptor left to open anything (the soft limit: the hard one stays, as raising it
    // back would need a privilege a container may not grant).
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", pid.as_raw_nonzero())).unwrap();
    let hard: Option<u64> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(4))
        .and_then(|v| v.parse().ok());
    let was = prlimit(
        Some(pid),
        Resource::Nofile,
        Rlimit {
            current: Some(held),
            maximum: hard,
        },
    )
    .unwrap();
    let r = call(&client, "read", json!({ "paths": ["a.txt"] })).await;
    let entry = facts(&r)["entries"][0].clone();
    assert_eq!(entry["error_code"], "OS_ERROR", "{entry}");
    let shown = text(&r);
    assert!(
        shown.starts_with("==> a.txt (error: OS_ERROR) <==\n["),
        "{shown}"
    );
    assert!(shown.contains("Too many open files"), "{shown}");
    assert!(is_error(&r), "every path failed");
    let r = call(&client, "find", json!({ "query": "hello" })).await;
    assert!(text(&r).starts_with("OS_ERROR: "), "{}", text(&r));
    // Given its descriptors back, it serves again.
    prlimit(Some(pid), Resource::Nofile, was).unwrap();
    let r = call(&client, "read", json!({ "paths": ["a.txt"] })).await;
    assert_eq!(text(&r), "==> a.txt (lines 1-1 of 1) <==\nhello\n");
    client.cancel().await.unwrap();
}
