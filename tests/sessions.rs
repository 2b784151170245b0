//! `session` end to end: calls recorded as they are answered and found again, the local
//! agents' transcripts imported from the server's HOME, visibility by root, and no
//! acknowledged call lost when the server is killed.

use serde_json::json;

use crate::support::{Sandbox, call, facts, is_error, text};

/// A fixture of the recordings crate, its working directory moved to `cwd`.
fn fixture(name: &str, cwd: &std::path::Path) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../recordings/tests/fixtures")
        .join(name);
    std::fs::read_to_string(path)
        .unwrap()
        .replace("/work/app", &cwd.display().to_string())
}

#[tokio::test]
async fn calls_are_recorded_searched_and_read_back_without_the_lookups_themselves() {
    let sb = Sandbox::new();
    sb.write("notes.md", "the quokka is a small marsupial\n");
    let client = sb.stdio(&[]).await;
    call(&client, "read", json!({ "paths": ["notes.md"] })).await;
    call(&client, "read", json!({ "paths": ["missing.md"] })).await;

    let r = call(
        &client,
        "session",
        json!({ "action": "search", "query": "quokka" }),
    )
    .await;
    let hits = text(&r);
    assert!(!is_error(&r), "{hits}");
    assert!(
        hits.contains("result of T1 read") && hits.contains("«quokka»"),
        "{hits}"
    );
    let id = hits
        .lines()
        .find(|l| l.starts_with("gantry-core-"))
        .and_then(|l| l.split(" · ").next())
        .unwrap()
        .to_string();
    // The search itself is recorded for the audit, not found by the next search.
    let again = text(
        &call(
            &client,
            "session",
            json!({ "action": "search", "query": "quokka" }),
        )
        .await,
    );
    assert_eq!(again.matches("«quokka»").count(), 1, "{again}");

    let r = call(
        &client,
        "session",
        json!({ "action": "read", "session_id": id }),
    )
    .await;
    let page = text(&r);
    assert!(page.contains("grouped by one connection"), "{page}");
    assert!(
        page.contains("T1 read {\"paths\":[\"notes.md\"]} → "),
        "{page}"
    );
    assert!(
        page.contains("T2 read {\"paths\":[\"missing.md\"]} → "),
        "{page}"
    );
    assert!(page.contains("[core · allow"), "{page}");
    assert!(!page.contains("\"action\":\"search\""), "{page}");
    let update = facts(&r)["update_cursor"].as_str().unwrap().to_string();

    // An update cursor returns only the calls made since.
    call(&client, "find", json!({ "pattern": "marsupial" })).await;
    let r = call(
        &client,
        "session",
        json!({ "action": "read", "session_id": id, "cursor": update }),
    )
    .await;
    let new = text(&r);
    assert!(new.starts_with("T3 find "), "{new}");
    assert!(!new.contains("T1 read"), "{new}");
    // T references expand to the whole call.
    let r = call(
        &client,
        "session",
        json!({ "action": "read", "session_id": id, "query": "T1" }),
    )
    .await;
    assert!(
        text(&r).contains("the quokka is a small marsupial"),
        "{}",
        text(&r)
    );

    // Bad input: named, bounded, nothing else happens.
    let r = call(&client, "session", json!({ "action": "read" })).await;
    assert!(
        is_error(&r) && text(&r).starts_with("INVALID_INPUT: session_id: required"),
        "{}",
        text(&r)
    );
    let r = call(
        &client,
        "session",
        json!({ "action": "read", "session_id": "gantry-nope" }),
    )
    .await;
    assert!(
        is_error(&r) && text(&r).starts_with("NOT_FOUND: session_id: no recorded session"),
        "{}",
        text(&r)
    );
    let r = call(
        &client,
        "session",
        json!({ "action": "read", "session_id": id, "cursor": "p.1.0.forged" }),
    )
    .await;
    assert!(
        is_error(&r) && text(&r).starts_with("INVALID_INPUT: cursor: "),
        "{}",
        text(&r)
    );
    client.cancel().await.unwrap();

    #[cfg(unix)]
    {
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(sb.path("state/sessions.db"))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[tokio::test]
async fn transcripts_inside_the_roots_are_imported_and_others_stay_hidden() {
    let sb = Sandbox::new();
    let inside = sb.root().to_path_buf();
    sb.write_home(
        ".codex/sessions/2026/12/01/rollout-2026-12-01T09-00-00-019d0000-0000-7000-8000-000000000171.jsonl",
        &fixture("codex-0171.jsonl", &inside),
    );
    sb.write_home(
        ".codex/sessions/2026/04/20/rollout-2026-04-20T10-00-00-0196aaaa-0000-7000-8000-000000000001.jsonl",
        &fixture("codex-old.jsonl", std::path::Path::new("/somewhere/else")),
    );
    sb.write_home(
        ".claude/projects/-app/5b0c.jsonl",
        &fixture("claude.jsonl", &inside),
    );
    let client = sb.stdio(&[]).await;
    let r = call(&client, "session", json!({ "action": "search" })).await;
    let list = text(&r);
    assert!(
        list.contains("codex-019d0000-0000-7000-8000-000000000171 · codex"),
        "{list}"
    );
    assert!(list.contains("claude-5b0c · claude"), "{list}");
    assert!(list.contains("Fixing the build"), "{list}");
    assert!(!list.contains("codex-0196aaaa"), "{list}");
    let r = call(
        &client,
        "session",
        json!({ "action": "search", "query": "serde Cargo" }),
    )
    .await;
    assert!(!text(&r).contains("codex-0196aaaa"), "{}", text(&r));
    let r = call(
        &client,
        "session",
        json!({ "action": "read", "session_id": "codex-0196aaaa-0000-7000-8000-000000000001" }),
    )
    .await;
    assert!(text(&r).starts_with("NOT_FOUND: "), "{}", text(&r));
    let r = call(
        &client,
        "session",
        json!({ "action": "search", "query": "lockfile", "source": "claude" }),
    )
    .await;
    assert!(text(&r).contains("claude-5b0c · claude"), "{}", text(&r));
    client.cancel().await.unwrap();

    // `all_directories` shows the rest; a source turned off imports nothing.
    let sb2 = Sandbox::new();
    sb2.config("[session]\nall_directories = true\n[session.sources]\nclaude = false\n");
    sb2.write_home(
        ".codex/sessions/2026/04/20/rollout-2026-04-20T10-00-00-0196aaaa-0000-7000-8000-000000000001.jsonl",
        &fixture("codex-old.jsonl", std::path::Path::new("/somewhere/else")),
    );
    sb2.write_home(
        ".claude/projects/-app/5b0c.jsonl",
        &fixture("claude.jsonl", &inside),
    );
    let client = sb2.stdio(&[]).await;
    let list = text(&call(&client, "session", json!({ "action": "search" })).await);
    assert!(list.contains("codex-0196aaaa"), "{list}");
    assert!(!list.contains("claude-5b0c"), "{list}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn without_session_recording_nothing_is_recorded_and_the_tool_is_not_listed() {
    let sb = Sandbox::new();
    sb.config("[permissions]\nsession_recording = false\n");
    sb.write("a.txt", "wombat\n");
    let client = sb.stdio(&[]).await;
    call(&client, "read", json!({ "paths": ["a.txt"] })).await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(!tools.iter().any(|t| t.name == "session"));
    client.cancel().await.unwrap();
    let store = recordings::Store::open(&sb.path("state/sessions.db")).unwrap();
    let n: i64 = store
        .read(|c| Ok(c.query_row("SELECT COUNT(*) FROM entry", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(n, 0);
}

#[cfg(unix)]
#[tokio::test]
async fn every_acknowledged_call_survives_the_server_being_killed() {
    let sb = Sandbox::new();
    sb.write("f.txt", "x\n");
    let mut acknowledged = Vec::new();
    for round in 0..5 {
        let mut server = sb.http(&[]).await;
        let client = server.client("core").await;
        if round == 0 {
            // A connector token made at this first start, read back through a call: it must
            // not reach the recordings.
            sb.write("token.txt", &server.token("core"));
            call(&client, "read", json!({ "paths": ["token.txt"] })).await;
        }
        // Calls keep going while the server is killed mid-stream.
        let killer = {
            let pid = server.child.id().unwrap() as i32;
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(150 + round * 40)).await;
                let pid = rustix::process::Pid::from_raw(pid).unwrap();
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            })
        };
        for i in 0..10_000 {
            let marker = format!("r{round}c{i}");
            let args = json!({ "paths": ["f.txt"], "note": marker });
            let obj = args.as_object().cloned().unwrap();
            let sent = client
                .call_tool(rmcp::model::CallToolRequestParams::new("read").with_arguments(obj))
                .await;
            match sent {
                Ok(_) => acknowledged.push(marker),
                Err(_) => break,
            }
        }
        killer.await.unwrap();
        let _ = server.child.wait().await;
    }
    assert!(acknowledged.len() > 20, "{}", acknowledged.len());
    // The next start takes what the killed servers had journaled but not yet stored.
    let client = sb.stdio(&[]).await;
    client.cancel().await.unwrap();
    let store = recordings::Store::open(&sb.path("state/sessions.db")).unwrap();
    let recorded: std::collections::HashSet<String> = store
        .read(|c| {
            let mut st = c.prepare("SELECT text FROM entry WHERE kind = 'tool'")?;
            let rows = st.query_map([], |r| r.get::<_, String>(0))?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .unwrap();
    let token = std::fs::read_to_string(sb.root().join("token.txt")).unwrap();
    let results: Vec<String> = store
        .read(|c| {
            let mut st = c.prepare("SELECT text FROM entry WHERE kind = 'result'")?;
            let rows = st.query_map([], |r| r.get::<_, String>(0))?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .unwrap();
    assert!(results.iter().any(|t| t.contains("[redacted]")));
    assert!(!results.iter().any(|t| t.contains(token.trim())));
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|m| !recorded.iter().any(|t| t.contains(&format!("\"{m}\""))))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged calls lost: {lost:?}",
        lost.len(),
        acknowledged.len()
    );
}
