//! The Zodex connector end to end (seed 003) through a real MCP client: a required workdir,
//! random session handles, spill files read back with the command the marker names, a
//! timeout that ends the process tree, the workdir's context once, and patches decided by
//! the same path rules and permissions as Core's.

use std::time::Duration;

use crate::support::{Sandbox, alive, call, facts, gone, is_error, text};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::json;

async fn zodex(sb: &Sandbox) -> RunningService<RoleClient, ()> {
    sb.stdio(&["--connector", "zodex"]).await
}

fn root(sb: &Sandbox) -> String {
    sb.root().display().to_string()
}

#[tokio::test]
async fn it_publishes_exactly_zodexs_three_tools() {
    let sb = Sandbox::new();
    let client = zodex(&sb).await;
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["apply_patch", "exec_command", "write_stdin"]);
    for t in &tools {
        let required = t.input_schema.get("required").cloned().unwrap_or_default();
        let wants = |f: &str| required.as_array().is_some_and(|r| r.contains(&json!(f)));
        match t.name.as_ref() {
            "write_stdin" => assert!(wants("session_handle"), "{required}"),
            _ => assert!(wants("workdir"), "{}: {required}", t.name),
        }
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn no_workdir_or_a_wrong_one_is_refused_before_anything_runs() {
    let sb = Sandbox::new();
    let client = zodex(&sb).await;
    let made = sb.root().join("made");
    let cmd = format!("touch {}", made.display());
    let r = call(&client, "exec_command", json!({ "cmd": cmd })).await;
    assert!(is_error(&r));
    assert!(
        text(&r).starts_with("INVALID_INPUT") && text(&r).contains("workdir"),
        "{}",
        text(&r)
    );
    for (workdir, why) in [
        ("relative/dir", "must be an absolute path"),
        ("/nonexistent/gantry", "does not exist"),
    ] {
        let r = call(
            &client,
            "exec_command",
            json!({ "cmd": cmd, "workdir": workdir }),
        )
        .await;
        assert_eq!(
            text(&r),
            format!("INVALID_INPUT: workdir: `{workdir}` {why}")
        );
    }
    let r = call(
        &client,
        "apply_patch",
        json!({ "patch": "*** Begin Patch\n*** Add File: made\n+x\n*** End Patch\n" }),
    )
    .await;
    assert!(
        text(&r).starts_with("INVALID_INPUT") && text(&r).contains("workdir"),
        "{}",
        text(&r)
    );
    assert!(!made.exists());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_running_command_continues_under_a_random_handle_and_ends_with_kill_process() {
    let sb = Sandbox::new();
    let client = zodex(&sb).await;
    // A sleep of its own length, findable in /proc.
    let marker = "3002.7781";
    let r = call(
        &client,
        "exec_command",
        json!({
            "cmd": format!("read line; echo \"got $line\"; sleep {marker}"),
            "workdir": root(&sb),
            "yield_time_ms": 300,
        }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let handle = facts(&r)["session_handle"].as_str().unwrap().to_string();
    assert!(handle.len() >= 32, "{handle}");
    assert!(text(&r).contains(&format!("Process running with session handle {handle}")));
    // A handle is not a number and another string reaches nothing.
    let r = call(
        &client,
        "write_stdin",
        json!({ "session_handle": "1", "chars": "x\n" }),
    )
    .await;
    assert!(
        text(&r).starts_with("NOT_FOUND: session_handle `1` is unknown"),
        "{}",
        text(&r)
    );

    let r = call(
        &client,
        "write_stdin",
        json!({ "session_handle": handle, "chars": "hello\n", "yield_time_ms": 1000 }),
    )
    .await;
    assert!(text(&r).contains("got hello"), "{}", text(&r));
    assert_eq!(facts(&r)["session_handle"], json!(handle));
    let r = call(
        &client,
        "write_stdin",
        json!({ "session_handle": handle, "kill_process": true }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(facts(&r).get("session_handle"), None);
    assert!(!text(&r).contains("session 1"), "{}", text(&r));
    gone(marker).await;
    let r = call(&client, "write_stdin", json!({ "session_handle": handle })).await;
    assert!(text(&r).starts_with("NOT_FOUND"), "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn timeout_ms_ends_the_process_tree() {
    let sb = Sandbox::new();
    let client = zodex(&sb).await;
    let marker = "3003.5521";
    // Within the first yield: the call itself ends it.
    let r = call(
        &client,
        "exec_command",
        json!({
            "cmd": format!("echo started; sleep {marker}"),
            "workdir": root(&sb),
            "timeout_ms": 400,
        }),
    )
    .await;
    assert_eq!(facts(&r)["timed_out"], json!(true), "{}", text(&r));
    assert!(text(&r).contains("started"), "{}", text(&r));
    assert!(text(&r).contains("ran past timeout_ms"), "{}", text(&r));
    gone(marker).await;
    // After the first yield: it is ended in the background.
    let marker = "3003.5522";
    let r = call(
        &client,
        "exec_command",
        json!({
            "cmd": format!("sleep {marker}"),
            "workdir": root(&sb),
            "yield_time_ms": 250,
            "timeout_ms": 1500,
        }),
    )
    .await;
    assert!(facts(&r)["session_handle"].is_string(), "{}", text(&r));
    assert!(alive(marker));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    gone(marker).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn long_output_spills_to_a_file_the_marker_says_how_to_read() {
    let sb = Sandbox::new();
    let client = zodex(&sb).await;
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "seq 1 100000", "workdir": root(&sb) }),
    )
    .await;
    let f = facts(&r);
    assert_eq!(f["exit_code"], json!(0), "{}", text(&r));
    assert_eq!(f["output_lines"], json!(100_000));
    assert_eq!(f["output_file_truncated"], json!(false));
    let file = f["output_file"].as_str().unwrap();
    assert!(text(&r).len() < 60_000, "{}", text(&r).len());
    let marker = text(&r)
        .lines()
        .find(|l| l.starts_with("[…"))
        .unwrap()
        .to_string();
    assert!(marker.contains(file), "{marker}");
    let command = marker
        .split("to see them: ")
        .nth(1)
        .and_then(|c| c.strip_suffix(" …]"))
        .unwrap();
    // The model runs the command it was given, through the same connector.
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": format!("{command} | head -n 2"), "workdir": root(&sb) }),
    )
    .await;
    let first: u64 = marker
        .split("(lines ")
        .nth(1)
        .and_then(|r| r.split('-').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    let out = crate::support::command_output(&r);
    let lines: Vec<&str> = out.lines().map(|l| l.trim_end_matches('\r')).collect();
    assert_eq!(
        lines,
        [first.to_string(), (first + 1).to_string()],
        "{marker}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_workdirs_first_command_tells_of_its_agents_file_and_skills_once() {
    let sb = Sandbox::new();
    sb.write("repo/AGENTS.md", "Run the tests with make check.\n");
    sb.write(
        "repo/.agents/skills/release/SKILL.md",
        "---\nname: release\ndescription: \"Cut a release: tag, changelog, publish.\"\n---\nSteps...\n",
    );
    sb.write("repo/.agents/skills/notes/README.txt", "not a skill\n");
    let repo = sb.root().join("repo").display().to_string();
    let client = zodex(&sb).await;
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "true", "workdir": repo }),
    )
    .await;
    let context = facts(&r)["zodex_context"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(context.contains("This workdir has AGENTS.md"), "{context}");
    assert!(
        context.contains(
            "- release (.agents/skills/release/SKILL.md): Cut a release: tag, changelog, publish."
        ),
        "{context}"
    );
    assert!(!context.contains("notes"), "{context}");
    assert!(text(&r).ends_with(&context), "{}", text(&r));
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "true", "workdir": repo }),
    )
    .await;
    assert_eq!(facts(&r).get("zodex_context"), None, "{}", text(&r));
    client.cancel().await.unwrap();

    // Switched off in the config, or `read` off: nothing is read or told.
    for config in [
        "[zodex]\nworkdir_context = false\n",
        "[permissions]\nread = false\n",
    ] {
        sb.config(config);
        let client = zodex(&sb).await;
        let r = call(
            &client,
            "exec_command",
            json!({ "cmd": "true", "workdir": repo }),
        )
        .await;
        assert!(!is_error(&r), "{}", text(&r));
        assert_eq!(
            facts(&r).get("zodex_context"),
            None,
            "{config}: {}",
            text(&r)
        );
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn patches_start_at_the_workdir_and_obey_the_roots_and_permissions() {
    let sb = Sandbox::new();
    sb.write("app/src/lib.rs", "fn a() {}\n");
    let app = sb.root().join("app").display().to_string();
    let client = zodex(&sb).await;
    let patch = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-fn a() {}\n+fn b() {}\n*** Add File: NEW.md\n+new\n*** End Patch\n";
    let r = call(
        &client,
        "apply_patch",
        json!({ "patch": patch, "workdir": app }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(text(&r), "M src/lib.rs (+1 -1)\nA NEW.md (+1)\n");
    assert_eq!(
        std::fs::read_to_string(sb.root().join("app/src/lib.rs")).unwrap(),
        "fn b() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(sb.root().join("app/NEW.md")).unwrap(),
        "new\n"
    );

    let outside = tempfile::tempdir().unwrap();
    let r = call(
        &client,
        "apply_patch",
        json!({
            "patch": "*** Begin Patch\n*** Add File: x\n+x\n*** End Patch\n",
            "workdir": outside.path().display().to_string(),
        }),
    )
    .await;
    assert!(text(&r).starts_with("PATH_NOT_ALLOWED"), "{}", text(&r));
    assert!(!outside.path().join("x").exists());
    client.cancel().await.unwrap();

    sb.config("[permissions]\nwrite_create = false\n");
    let client = zodex(&sb).await;
    let r = call(
        &client,
        "apply_patch",
        json!({ "patch": "*** Begin Patch\n*** Add File: y\n+y\n*** End Patch\n", "workdir": app }),
    )
    .await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED")
            && text(&r).contains("`write_create` permission is off"),
        "{}",
        text(&r)
    );
    assert!(!sb.root().join("app/y").exists());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn with_exec_off_commands_are_neither_listed_nor_run() {
    let sb = Sandbox::new();
    sb.config("[permissions]\nexec = false\n");
    let client = zodex(&sb).await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["apply_patch"]);
    let made = sb.root().join("made");
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": format!("touch {}", made.display()), "workdir": root(&sb) }),
    )
    .await;
    assert!(text(&r).starts_with("PERMISSION_DENIED"), "{}", text(&r));
    assert!(!made.exists());
    client.cancel().await.unwrap();
}
