//! `exec_command` and `write_stdin` end to end: real PTYs, a real MCP client, and after every
//! scenario a look at /proc to prove no process was left behind.

use std::time::{Duration, Instant};

use crate::support::{Sandbox, call, facts, is_error, text};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::support::command_output as output;

/// The `Note: ` lines of the text's header (before `Output:`), without the prefix.
fn notes(result: &CallToolResult) -> Vec<String> {
    let t = text(result);
    let header = t.split_once("\nOutput:\n").map_or(t.as_str(), |(h, _)| h);
    header
        .lines()
        .filter_map(|l| l.strip_prefix("Note: "))
        .map(str::to_string)
        .collect()
}

/// Live (non-zombie) processes whose command line contains `marker`.
fn alive_with(marker: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat.rfind(')').and_then(|i| stat.get(i + 2..i + 3)) == Some("Z");
        if cmd.contains(marker) && !zombie {
            out.push(cmd);
        }
    }
    out
}

async fn gone(marker: &str) {
    for _ in 0..100 {
        if alive_with(marker).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("left behind: {:?}", alive_with(marker));
}

#[tokio::test]
async fn a_command_returns_output_and_exit_code_as_text_and_facts() {
    let sb = Sandbox::new();
    let client = sb.stdio(&[]).await;
    let r = call(&client, "exec_command", json!({ "cmd": "echo hi; exit 4" })).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(r.structured_content, None);
    let f = facts(&r);
    assert_eq!(
        (
            output(&r).as_str(),
            f["exit_code"].as_i64(),
            f.get("session_id")
        ),
        ("hi\n", Some(4), None)
    );
    assert_eq!((f.get("output"), f.get("note")), (None, None), "{f}");
    assert!(text(&r).starts_with("Wall time: "), "{}", text(&r));
    assert!(
        text(&r).contains("\nProcess exited with code 4\nOutput:\nhi\n"),
        "{}",
        text(&r)
    );
    // The first root is the default start directory.
    let r = call(&client, "exec_command", json!({ "cmd": "pwd" })).await;
    assert_eq!(
        output(&r),
        format!("{}\n", sb.root().canonicalize().unwrap().display())
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_interactive_program_is_answered_through_write_stdin() {
    let sb = Sandbox::new();
    let client = sb.stdio(&[]).await;
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "printf 'name? '; read n; echo \"hello $n\"", "yield_time_ms": 300 }),
    )
    .await;
    let id = facts(&r)["session_id"].as_i64().expect("waits for input");
    assert_eq!(output(&r), "name? ");
    assert!(text(&r).contains(&format!("Process running with session ID {id}")));
    let r = call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "chars": "gantry\n", "yield_time_ms": 5000 }),
    )
    .await;
    assert_eq!(output(&r), "gantry\nhello gantry\n");
    assert_eq!(facts(&r)["exit_code"], 0);
    let r = call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "chars": "" }),
    )
    .await;
    assert_eq!(
        text(&r),
        format!(
            "NOT_FOUND: session {id} is unknown or has finished; start the command again with exec_command"
        )
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_empty_poll_returns_early_on_output_and_keeps_the_rest_buffered() {
    let sb = Sandbox::new();
    let client = sb.stdio(&[]).await;
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "sleep 0.4; echo one; sleep 1.5; echo two", "yield_time_ms": 250 }),
    )
    .await;
    let id = facts(&r)["session_id"].as_i64().unwrap();
    let started = Instant::now();
    let r = call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "yield_time_ms": 20000 }),
    )
    .await;
    assert_eq!(output(&r), "one\n");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the poll waited {:?}",
        started.elapsed()
    );
    let r = call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "yield_time_ms": 20000 }),
    )
    .await;
    assert_eq!(output(&r), "two\n");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_batch_keeps_going_past_a_failing_item_and_reports_each() {
    let sb = Sandbox::new();
    let client = sb.stdio(&[]).await;
    let r = call(&client, "exec_command", json!({ "cmds": ["cd /tmp && V=7", "echo \"v=$V in $(pwd)\"; ls /nonexistent-gantry", "echo last"] })).await;
    let s = facts(&r);
    assert_eq!(
        s["items"],
        json!([{ "index": 1, "exit_code": 0 }, { "index": 2, "exit_code": 2 }, { "index": 3, "exit_code": 0 }])
    );
    assert_eq!(s["exit_code"], 2, "the first non-zero item");
    let out = output(&r);
    assert!(out.starts_with("$ cd /tmp && V=7\n[exit 0]\n$ echo \"v=$V in $(pwd)\"; ls /nonexistent-gantry\nv=7 in /tmp\n"), "{out}");
    assert!(
        out.ends_with("[exit 2]\n$ echo last\nlast\n[exit 0]\n"),
        "{out}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn control_characters_and_invalid_utf8_come_back_clean() {
    let sb = Sandbox::new();
    let client = sb.stdio(&[]).await;
    let r = call(&client, "exec_command", json!({ "cmd": "printf '\\033[1;32mok\\033[0m \\377\\376 \\a\\033]0;title\\007done\\r\\n'" })).await;
    assert_eq!(output(&r), "ok \u{fffd}\u{fffd} done\n");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn fifty_megabytes_of_output_stay_bounded_in_memory_with_a_private_spill_file() {
    let sb = Sandbox::new();
    let server = sb.http(&[]).await;
    let pid = server.child.id().unwrap();
    let client = server.client("core").await;
    let r = call(&client, "exec_command", json!({ "cmd": "head -c 50000000 /dev/zero | tr '\\0' 'y'; echo; echo END", "yield_time_ms": 30000, "max_output_tokens": 1000 })).await;
    let s = facts(&r);
    assert_eq!(s["exit_code"], 0, "{}", text(&r));
    assert_eq!(s["truncated"], true);
    assert_eq!(s["total_bytes"], 50_000_005);
    assert_eq!(s["output_file_cut"], true);
    let out = output(&r);
    assert!(out.ends_with("\nEND\n"), "{out}");
    assert!(out.len() < 4300, "{} bytes shown", out.len());
    let file = std::path::PathBuf::from(s["output_file"].as_str().unwrap());
    // The marker names the omitted part and the one call that shows it, from the spill file.
    let marker = out
        .lines()
        .find(|l| l.starts_with("[… "))
        .unwrap_or_default();
    assert_eq!(
        marker,
        format!(
            "[… {} of 50000005 bytes omitted (lines 1-1 of 2); to see them: read {{\"ranges\": [{{\"path\": {}, \"start_line\": 1, \"end_line\": 1}}]}} …]",
            50_000_005 - (out.len() - marker.len() - 2),
            serde_json::Value::from(file.display().to_string())
        ),
    );
    // A spill file cut at its cap says so; its name is in the marker, not in a note.
    assert_eq!(
        notes(&r),
        ["the spill file stopped at 16777216 bytes; the output's end is not kept"],
        "{}",
        text(&r)
    );
    assert!(
        file.starts_with(sb.path("state").join("spill")),
        "{}",
        file.display()
    );
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.len(), 16 << 20);
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        peak_kb < 64 * 1024,
        "gantry peaked at {peak_kb} kB for 50 MB of output"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_idle_session_is_ended_with_its_detached_grandchild() {
    let sb = Sandbox::new();
    // Without cgroups, so the fallback (session, descendants, tag) is what ends the tree.
    sb.config("session_idle = \"1s\"\n[exec]\ncgroup = false\n");
    let client = sb.stdio(&[]).await;
    let marker = "401.0731";
    let r = call(&client, "exec_command", json!({ "cmd": format!("setsid sleep {marker} & nohup sleep {marker} >/dev/null 2>&1 & sleep {marker}"), "yield_time_ms": 500 })).await;
    assert!(facts(&r)["session_id"].is_i64(), "{}", text(&r));
    assert!(alive_with(marker).len() >= 3, "{:?}", alive_with(marker));
    // The reaper runs every 5 s; the session has been idle for 1 s by then.
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(alive_with(marker), Vec::<String>::new());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn kill_ends_the_tree_and_reports_the_final_state() {
    let sb = Sandbox::new();
    let client = sb.stdio(&[]).await;
    let marker = "402.0731";
    let r = call(&client, "exec_command", json!({ "cmd": format!("echo up; setsid sleep {marker} & sleep {marker}"), "yield_time_ms": 500 })).await;
    let id = facts(&r)["session_id"].as_i64().unwrap();
    let r = call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "kill": true }),
    )
    .await;
    // Hung up first (128 + SIGHUP), as a closed terminal would; SIGKILL only after a grace.
    assert_eq!(facts(&r)["exit_code"], 129, "{}", text(&r));
    assert!(
        notes(&r)
            .iter()
            .any(|n| n.contains(&format!("session {id} and its process tree were ended"))),
        "{}",
        text(&r)
    );
    gone(marker).await;
    client.cancel().await.unwrap();
}

/// Whether the command whose output is `out` (it printed /proc/self/cgroup) ran in a session
/// cgroup of gantry's. Where cgroup v2 cannot be used here the test has nothing to check,
/// unless `tests/run` found it usable and requires it (GANTRY_TEST_CGROUP=required).
fn in_session_cgroup(out: &str) -> bool {
    let inside = out.lines().filter_map(|l| l.strip_prefix("0::")).any(|p| {
        p.contains("/gantry.") && p.rsplit('/').next().is_some_and(|s| s.starts_with('s'))
    });
    if !inside {
        assert_ne!(
            std::env::var("GANTRY_TEST_CGROUP").as_deref(),
            Ok("required"),
            "cgroup v2 is usable here, yet the command ran outside a session cgroup: {out}"
        );
        crate::support::cannot_check(
            "no cgroup v2 usable here: the cgroup containment is not tested",
        );
    }
    inside
}

#[tokio::test]
async fn a_grandchild_that_detaches_and_clears_its_environment_is_ended_by_its_cgroup() {
    let sb = Sandbox::new();
    let client = sb.stdio(&[]).await;
    let marker = "405.0731";
    let r = call(&client, "exec_command", json!({ "cmd": format!("cat /proc/self/cgroup; setsid -f env -i sleep {marker}; sleep {marker}"), "yield_time_ms": 500 })).await;
    if !in_session_cgroup(&output(&r)) {
        return;
    }
    let id = facts(&r)["session_id"].as_i64().unwrap();
    // The detached sleep and the foreground one; whether the shell itself is still there
    // (dash forks its last command where bash execs it) is the shell's business.
    let sleeps = || {
        let all = alive_with(marker);
        let n = all.iter().filter(|c| c.starts_with("sleep ")).count();
        (n, all)
    };
    let (n, all) = sleeps();
    assert_eq!(n, 2, "{all:?}");
    call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "kill": true }),
    )
    .await;
    gone(marker).await;
    // What a finished command left running in the background goes with it too.
    let r = call(&client, "exec_command", json!({ "cmd": format!("setsid -f env -i sleep {marker}; echo done"), "yield_time_ms": 2000 })).await;
    assert_eq!(facts(&r)["exit_code"], 0, "{}", text(&r));
    gone(marker).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn what_a_sigkilled_server_left_running_is_ended_by_the_next_start() {
    let marker = "406.0731";
    let sb = Sandbox::new();
    let mut server = sb.http(&[]).await;
    let client = server.client("core").await;
    let r = call(&client, "exec_command", json!({ "cmd": format!("cat /proc/self/cgroup; setsid -f env -i sleep {marker}; sleep {marker}"), "yield_time_ms": 500 })).await;
    if !in_session_cgroup(&output(&r)) {
        server.child.kill().await.unwrap();
        return;
    }
    server.child.kill().await.unwrap();
    server.child.wait().await.unwrap();
    // The detached grandchild outlives the server (its shell hung up with the PTY).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!alive_with(marker).is_empty());
    // The next instance started in the same cgroup ends it before it serves.
    let next = Sandbox::new();
    let client = next.stdio(&[]).await;
    gone(marker).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn sixty_four_sessions_then_the_oldest_idle_one_makes_room() {
    let sb = Sandbox::new();
    let client = sb.stdio(&[]).await;
    let marker = "403.0731";
    let mut ids = Vec::new();
    for _ in 0..64 {
        let r = call(
            &client,
            "exec_command",
            json!({ "cmd": format!("sleep {marker}"), "yield_time_ms": 250 }),
        )
        .await;
        ids.push(facts(&r)["session_id"].as_i64().expect("a live session"));
    }
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": format!("sleep {marker}"), "yield_time_ms": 250 }),
    )
    .await;
    let note = notes(&r).join("; ");
    assert!(
        note.starts_with(&format!("session {} (idle ", ids[0])),
        "{note}"
    );
    assert!(
        note.ends_with("s) was ended to stay within 64 live sessions"),
        "{note}"
    );
    // Closing stdin shuts the server down, and every session with it.
    client.cancel().await.unwrap();
    gone(marker).await;
}

#[tokio::test]
async fn sigterm_ends_every_session() {
    let sb = Sandbox::new();
    let mut server = sb.http(&[]).await;
    let client = server.client("core").await;
    let marker = "404.0731";
    for _ in 0..3 {
        call(&client, "exec_command", json!({ "cmd": format!("setsid sleep {marker} & sleep {marker}"), "yield_time_ms": 250 })).await;
    }
    assert!(alive_with(marker).len() >= 6);
    let pid = rustix::process::Pid::from_raw(server.child.id().unwrap() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), server.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
    gone(marker).await;
}

#[tokio::test]
async fn bad_inputs_are_refused_before_anything_runs() {
    let sb = Sandbox::new();
    let client = sb.stdio(&[]).await;
    let made = sb.root().join("made");
    let cmd = format!("touch {}", made.display());
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": cmd, "workdir": "relative/dir" }),
    )
    .await;
    assert_eq!(
        text(&r),
        "INVALID_INPUT: workdir: `relative/dir` must be an absolute path"
    );
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": cmd, "workdir": "/nonexistent/gantry" }),
    )
    .await;
    assert_eq!(
        text(&r),
        "INVALID_INPUT: workdir: `/nonexistent/gantry` does not exist"
    );
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": cmd, "env": { "GANTRY_SESSION_TAG": "x" } }),
    )
    .await;
    assert_eq!(
        text(&r),
        "INVALID_INPUT: env: `GANTRY_SESSION_TAG` is reserved for gantry"
    );
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": cmd, "env": { "BAD-NAME": "x" } }),
    )
    .await;
    assert_eq!(
        text(&r),
        "INVALID_INPUT: env: `BAD-NAME` is not a valid variable name"
    );
    assert!(!made.exists());
    let r = call(&client, "write_stdin", json!({ "session_id": 1i64 << 53 })).await;
    assert_eq!(
        text(&r),
        "INVALID_INPUT: session_id: 9007199254740992 is not a session id"
    );
    let r = call(&client, "write_stdin", json!({ "session_id": 424_242 })).await;
    assert_eq!(
        text(&r),
        "NOT_FOUND: session 424242 is unknown or has finished; start the command again with exec_command"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_desktop_session_stays_out_of_reach_without_desktop_permissions() {
    let sb = Sandbox::new();
    // gantry itself runs with a display; its children must not inherit it.
    let args = sb.args();
    let transport =
        rmcp::transport::TokioChildProcess::new(rmcp::transport::ConfigureCommandExt::configure(
            tokio::process::Command::new(crate::support::gantry()),
            |cmd| {
                cmd.arg("serve")
                    .arg("--stdio")
                    .args(&args)
                    .env("HOME", sb.path("home"))
                    .env("DISPLAY", ":77")
                    .env("XAUTHORITY", "/tmp/x")
                    .env("GANTRY_LOG", "warn");
            },
        ))
        .unwrap();
    let client = rmcp::ServiceExt::serve((), transport).await.unwrap();
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "echo \"display=${DISPLAY:-none} xauth=${XAUTHORITY:-none}\"" }),
    )
    .await;
    assert_eq!(output(&r), "display=none xauth=none\n");
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "true", "env": { "DISPLAY": ":0" } }),
    )
    .await;
    assert_eq!(
        text(&r),
        "PERMISSION_DENIED: `exec_command` denied: the command's environment would reach the desktop session, which needs the `host_display` master switch and both the `screen` and `control` permissions (policy `exec.desktop_session` in policies/base/exec.cedar)"
    );
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "echo \"$GREETING\"", "env": { "GREETING": "hello" } }),
    )
    .await;
    assert_eq!(output(&r), "hello\n");
    client.cancel().await.unwrap();
}

/// The audit log shows what ran: one line per call with the decision, the deciding policies
/// and each target as Cedar saw it (the command line, cut; resolved paths), never output;
/// `gantry audit` filters it; the content-safe setting withholds command lines.
#[tokio::test]
async fn the_audit_log_shows_decisions_targets_and_policies() {
    let sb = Sandbox::new();
    sb.write("a.txt", "file text that must not be logged\n");
    sb.config("[permissions]\nwrite_delete = false\n");
    let client = sb.stdio(&[]).await;
    // The output ("output-not-logged") differs from the command line that makes it.
    let long = format!("printf 'out%s\\n' put-not-logged # {}", "x".repeat(300));
    let r = call(&client, "exec_command", json!({ "cmd": long })).await;
    assert!(!is_error(&r), "{}", text(&r));
    call(&client, "read", json!({ "paths": ["a.txt"] })).await;
    let del = "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch";
    assert!(is_error(
        &call(&client, "apply_patch", json!({ "patch": del })).await
    ));
    client.cancel().await.unwrap();

    let log = std::fs::read_to_string(sb.path("state/audit.jsonl")).unwrap();
    assert!(!log.contains("output-not-logged"), "no output in the log");
    assert!(
        !log.contains("must not be logged"),
        "no file contents in the log"
    );
    let all: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // A call that acts has an intent line before its outcome line, joined by `call`.
    let (intents, lines): (Vec<Value>, Vec<Value>) =
        all.into_iter().partition(|l| l["phase"] == "intent");
    assert_eq!(lines.len(), 3, "{log}");
    assert_eq!(intents.len(), 2, "exec_command and apply_patch act: {log}");
    assert_eq!(intents[0]["call"], lines[0]["call"], "{log}");
    assert_eq!(intents[0]["attempted"][0]["input"], "cmd", "{log}");
    // Every call has an id (a call relayed to another machine is joined by it there), but
    // only one that acts is on record before it acts.
    assert!(lines[1]["call"].is_string(), "{log}");
    assert!(
        !intents.iter().any(|i| i["call"] == lines[1]["call"]),
        "read does not act: {log}"
    );
    let exec = &lines[0];
    assert_eq!(
        (exec["tool"].as_str(), exec["decision"].as_str()),
        (Some("exec_command"), Some("allow"))
    );
    let command = exec["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| {
            d["resource_type"] == "Command" && d["resource"].as_str().unwrap().starts_with("printf")
        })
        .unwrap();
    assert_eq!(
        command["resource"].as_str().unwrap().chars().count(),
        200,
        "cut at 200"
    );
    assert!(
        command["policies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "connector.core")
    );
    let read = &lines[1];
    let target = read["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["resource_type"] == "Path")
        .unwrap();
    let resolved = sb.root().join("a.txt").canonicalize().unwrap();
    assert_eq!(target["resource"], resolved.display().to_string());
    let patch = &lines[2];
    assert_eq!(
        (patch["decision"].as_str(), patch["outcome"].as_str()),
        (Some("deny"), Some("PERMISSION_DENIED"))
    );
    assert!(patch["decisions"].as_array().unwrap().iter().any(|d| {
        d["decision"] == "deny"
            && d["policies"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p == "permission.write_delete")
    }));

    // `gantry audit` filters by tool and decision.
    let out = std::process::Command::new(crate::support::gantry())
        .args(["audit", "--decision", "deny"])
        .args(sb.args())
        .output()
        .unwrap();
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(shown.lines().count(), 1, "{shown}");
    assert!(shown.contains("\"tool\":\"apply_patch\""), "{shown}");
    // Its time for people (RFC 3339, UTC) first, beside the milliseconds for programs.
    let line: serde_json::Value = serde_json::from_str(shown.trim()).unwrap();
    let time = line["time"].as_str().unwrap_or_default();
    let ms = line["ts_ms"].as_u64().unwrap();
    assert_eq!(
        humantime::parse_rfc3339(time).ok(),
        Some(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)),
        "{shown}"
    );
    assert!(shown.starts_with("{\"time\":\""), "{shown}");

    // What is typed into a running command is what runs there: it is recorded too.
    let client = sb.stdio(&[]).await;
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "cat", "yield_time_ms": 250 }),
    )
    .await;
    let id = facts(&r)["session_id"].as_i64().unwrap();
    call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "chars": "typed-in\n" }),
    )
    .await;
    call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "kill": true }),
    )
    .await;
    client.cancel().await.unwrap();
    let log = std::fs::read_to_string(sb.path("state/audit.jsonl")).unwrap();
    let typed: Value = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["tool"] == "write_stdin" && l["phase"].is_null())
        .unwrap();
    assert_eq!(typed["input"], "typed-in\n", "{typed}");

    // Content-safe: command lines are withheld.
    sb.config("audit_command_lines = false\n");
    let client = sb.stdio(&[]).await;
    call(&client, "exec_command", json!({ "cmd": "echo secret-arg" })).await;
    client.cancel().await.unwrap();
    let log = std::fs::read_to_string(sb.path("state/audit.jsonl")).unwrap();
    // Not in the outcome line, nor in the intent line before it.
    assert!(!log.contains("secret-arg"), "{log}");
    let last = log.lines().last().unwrap();
    assert!(last.contains("(withheld)"), "{last}");
}

/// Input to a program that never reads it fills the terminal's buffer; the call returns at
/// its yield time saying so, the server keeps answering, and kill ends it all.
#[tokio::test]
async fn input_to_a_program_that_does_not_read_never_stalls_the_server() {
    let sb = Sandbox::new();
    sb.write("f.txt", "still here\n");
    let client = sb.stdio(&[]).await;
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "sleep 100000 # deaf-7731", "yield_time_ms": 250 }),
    )
    .await;
    let id = facts(&r)["session_id"].as_i64().unwrap();
    let started = Instant::now();
    let r = call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "chars": "a\n".repeat(30_000), "yield_time_ms": 500 }),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(!is_error(&r), "{}", text(&r));
    assert!(
        notes(&r)
            .iter()
            .any(|n| n.contains("not reading its input")),
        "{}",
        text(&r)
    );
    // More input while the first is stuck is refused, not queued behind it.
    let r = call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "chars": "more\n", "yield_time_ms": 250 }),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(
        text(&r).contains("still waiting to be read"),
        "{}",
        text(&r)
    );
    // The server still answers other calls at once.
    let started = Instant::now();
    let r = call(&client, "read", json!({ "paths": ["f.txt"] })).await;
    assert!(text(&r).contains("still here"), "{}", text(&r));
    assert!(started.elapsed() < Duration::from_secs(2));
    let r = call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "kill": true }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    client.cancel().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !alive_with("deaf-7731").is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(alive_with("deaf-7731").is_empty());
}

/// The call a cut result names gets the omitted lines back through `read`, from the spill
/// file, by the connector that ran the command; nothing else in the state directory opens.
#[tokio::test]
async fn the_omitted_lines_are_read_back_from_the_spill_file() {
    let sb = Sandbox::new();
    let client = sb.stdio(&[]).await;
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "seq 1 30000", "max_output_tokens": 500 }),
    )
    .await;
    let out = output(&r);
    let marker = out
        .lines()
        .find(|l| l.starts_with("[… "))
        .unwrap_or_default();
    let call_json = marker
        .split_once("to see them: read ")
        .and_then(|(_, rest)| rest.strip_suffix(" …]"))
        .unwrap_or_else(|| panic!("no read call in {marker}"));
    let args: Value = serde_json::from_str(call_json).unwrap();
    let (first, last) = (
        args["ranges"][0]["start_line"].as_u64().unwrap(),
        args["ranges"][0]["end_line"].as_u64().unwrap(),
    );
    let r = call(&client, "read", args.clone()).await;
    assert!(!is_error(&r), "{}", text(&r));
    let shown = text(&r);
    let body: Vec<&str> = shown.lines().skip(1).collect();
    let expected: Vec<String> = (first..=last).map(|n| n.to_string()).collect();
    assert_eq!(body, expected, "lines {first}-{last}");
    // The rest of the state directory stays out of reach, whatever the path looks like.
    let spill = args["ranges"][0]["path"].as_str().unwrap().to_string();
    let dir = std::path::Path::new(&spill).parent().unwrap();
    for other in [
        dir.join("other.log").display().to_string(),
        format!("{}/../tokens.toml", dir.display()),
        format!("{spill}/.."),
    ] {
        let r = call(&client, "read", json!({ "paths": [other] })).await;
        assert!(is_error(&r), "{other}: {}", text(&r));
        assert!(text(&r).contains("PATH_NOT_ALLOWED"), "{}", text(&r));
    }
    client.cancel().await.unwrap();
}

/// A program that asks the terminal where its cursor is gets an answer, as in a terminal,
/// instead of waiting for one until its timeout.
#[tokio::test]
async fn a_question_for_the_cursor_position_is_answered() {
    let sb = Sandbox::new();
    sb.config("[permissions]\nexec = true\n");
    let client = sb.stdio(&[]).await;
    let r = call(
        &client,
        "exec_command",
        json!({
            "cmd": "bash -c 'printf \"\\033[6n\"; IFS= read -rs -t 5 -d R pos && echo \"answered ${pos#*[}\" || echo unanswered'",
            "yield_time_ms": 8000
        }),
    )
    .await;
    let t = text(&r);
    assert!(t.contains("answered 1;1"), "{t}");
    client.cancel().await.unwrap();
}
