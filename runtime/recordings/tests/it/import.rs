//! Importers against fixture transcripts in the agents' own layouts, in real temp dirs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use recordings::import::{Report, refresh};
use recordings::{Redactor, Store};

use crate::common::{BUDGETS, everyone, search};

struct Home {
    _dir: tempfile::TempDir,
    root: PathBuf,
    store: Store,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let store = Store::open(&root.join("state/sessions.db")).unwrap();
        Home {
            _dir: dir,
            root,
            store,
        }
    }

    fn codex(&self) -> PathBuf {
        self.root.join(".codex/sessions")
    }

    fn claude(&self) -> PathBuf {
        self.root.join(".claude/projects")
    }

    fn put(&self, rel: &Path, fixture: &str) -> PathBuf {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(fixture),
        )
        .unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn refresh(&self) -> Report {
        refresh(
            &self.store,
            &[
                ("codex".into(), self.codex()),
                ("claude".into(), self.claude()),
                ("gemini".into(), self.root.join(".gemini/tmp")),
            ],
            &Redactor::new(&[], vec!["sk-fixture-secret-0123456789abcdef".into()]).unwrap(),
            Duration::from_secs(30),
        )
    }

    fn read(&self, id: &str) -> String {
        let r = Redactor::new(&[], Vec::new()).unwrap();
        self.store
            .read_session(id, None, None, &everyone, &r, BUDGETS)
            .unwrap()
            .text
    }
}

#[test]
fn codex_rollouts_of_both_shapes_are_read_with_injected_context_kept_apart() {
    let h = Home::new();
    h.put(Path::new(".codex/sessions/2026/04/20/rollout-2026-04-20T10-00-00-0196aaaa-0000-7000-8000-000000000001.jsonl"), "codex-old.jsonl");
    h.put(Path::new(".codex/sessions/2026/12/01/rollout-2026-12-01T09-00-00-019d0000-0000-7000-8000-000000000171.jsonl"), "codex-0171.jsonl");
    let report = h.refresh();
    assert_eq!((report.files, report.skipped), (2, 1), "{report:?}");

    let old = h.read("codex-0196aaaa-0000-7000-8000-000000000001");
    assert!(old.starts_with("Session codex-0196aaaa-0000-7000-8000-000000000001 (codex, /work/app, 2026-04-20 10:00:00Z to 2026-04-20 10:00:06Z)"), "{old}");
    assert!(
        old.contains("[context 2026-04-20 10:00:01Z] <environment_context>…"),
        "{old}"
    );
    assert!(
        old.contains("[user 2026-04-20 10:00:02Z]\nWhy does the build fail?\n"),
        "{old}"
    );
    // The event_msg copy of the prompt is not a second user message.
    assert_eq!(old.matches("Why does the build fail?").count(), 1, "{old}");
    assert!(old.contains("T1 shell {\"command\":[\"cargo\",\"build\"]} → error[E0432]: unresolved import `serde` [failed]"), "{old}");
    assert!(
        old.contains(
            "[assistant 2026-04-20 10:00:05Z]\nThe `serde` crate is missing from Cargo.toml.\n"
        ),
        "{old}"
    );
    assert!(
        old.contains("[error 2026-04-20 10:00:06Z]\nstream disconnected before completion\n"),
        "{old}"
    );

    let new = h.read("codex-019d0000-0000-7000-8000-000000000171");
    assert!(
        new.contains("[context 2026-12-01 09:00:00Z] # AGENTS.md instructions for /work/app…"),
        "{new}"
    );
    assert!(
        new.contains("[user 2026-12-01 09:00:00Z]\nlist the crates\n[image]\n"),
        "{new}"
    );
    assert!(
        new.contains("T1 exec_command {\"cmd\":\"ls crates\"} → Chunk ID: 9f… (7 lines)"),
        "{new}"
    );
    assert_eq!(new.matches("Two crates: core and cli.").count(), 1, "{new}");
    assert!(!new.contains("iVBOR"), "{new}");

    // Searchable by the user's words, the tool's output and the assistant's answer.
    for (q, want) in [
        ("unresolved import", "T1 shell"),
        ("crates core cli", "codex-019d"),
        ("serde Cargo", "assistant"),
    ] {
        let hits = search(&h.store, Some(q), Some("codex"), None);
        assert!(hits.text.contains(want), "{q}: {}", hits.text);
    }
    // Nothing new: a second refresh reads nothing.
    assert_eq!(h.refresh().bytes, 0);
}

#[test]
fn claude_code_merges_blocks_and_marks_rewinds_and_sidechains_as_side_branches() {
    let h = Home::new();
    h.put(
        Path::new(".claude/projects/-work-app/5b0c.jsonl"),
        "claude.jsonl",
    );
    let report = h.refresh();
    assert_eq!((report.files, report.skipped), (1, 0), "{report:?}");
    let text = h.read("claude-5b0c");
    assert!(
        text.starts_with("Session claude-5b0c (claude, /work/app, "),
        "{text}"
    );
    assert!(text.contains("\nTitle: Fixing the build\n"), "{text}");
    // The title is found by its words.
    let hits = search(&h.store, Some("fixing build"), None, None);
    assert!(
        hits.text
            .contains("claude-5b0c · claude · 2026-12-01 10:03:05Z · title\n  Fixing the build\n"),
        "{}",
        hits.text
    );
    // Two text lines of one response are one message.
    assert!(
        text.contains(" (side branch)]\nLet me\n\ncheck the build.\n"),
        "{text}"
    );
    assert!(text.contains("T1 Bash {\"command\":\"cargo build\"} → error[E0432]: unresolved import [failed] (side branch)"), "{text}");
    assert!(
        text.contains(" (side branch)]\nAnswer A: add serde.\n"),
        "{text}"
    );
    // The edited question and what follows the compaction are the main chain.
    assert!(
        text.contains("Z]\nwhy does the build fail? (edited)\n"),
        "{text}"
    );
    assert!(
        text.contains("Z]\nAnswer B: the lockfile is stale.\n"),
        "{text}"
    );
    assert!(
        text.contains("[context 2026-12-01 10:02:00Z] conversation compacted"),
        "{text}"
    );
    assert!(
        text.contains("[context 2026-12-01 10:02:00Z] This session is being continued"),
        "{text}"
    );
    assert!(text.contains("Z]\nAll tests pass.\n"), "{text}");
    assert!(
        text.contains(" (side branch)]\n(subagent musing)\n"),
        "{text}"
    );
    assert!(
        !text.contains("Let me\n") || text.matches("Let me").count() == 1,
        "{text}"
    );
}

#[test]
fn a_line_being_written_is_read_once_it_ends_and_a_vanished_transcript_takes_its_session() {
    let h = Home::new();
    let path = h.root.join(".claude/projects/-work-app/grow.jsonl");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let line = r#"{"parentUuid":null,"cwd":"/work/app","sessionId":"grow","type":"user","message":{"role":"user","content":"first words"},"uuid":"g1","timestamp":"2026-12-01T10:00:00.000Z"}"#;
    let (head, tail) = line.split_at(60);
    std::fs::write(&path, head).unwrap();
    assert_eq!(h.refresh().entries, 0);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, format!("{tail}\n").as_bytes()).unwrap();
    assert_eq!(h.refresh().entries, 1);
    assert_eq!(h.refresh().entries, 0);
    assert_eq!(h.read("claude-grow").matches("first words").count(), 1);

    // Rewritten in place (other first bytes): the session starts over, nothing doubled.
    let other = line.replace("first words", "other words");
    std::fs::write(&path, format!("{other}\n")).unwrap();
    let report = h.refresh();
    assert_eq!(report.entries, 1, "{report:?}");
    let text = h.read("claude-grow");
    assert!(
        text.contains("other words") && !text.contains("first words"),
        "{text}"
    );

    std::fs::remove_file(&path).unwrap();
    assert_eq!(h.refresh().dropped, 1);
    let r = Redactor::new(&[], Vec::new()).unwrap();
    assert!(
        h.store
            .read_session("claude-grow", None, None, &everyone, &r, BUDGETS)
            .is_err()
    );
}

#[test]
fn secrets_in_transcripts_never_reach_the_index_or_a_snippet() {
    let h = Home::new();
    let path = h.root.join(".claude/projects/-work-app/keys.jsonl");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let line = r#"{"parentUuid":null,"cwd":"/work/app","sessionId":"keys","type":"user","message":{"role":"user","content":"use key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123 and token ghp_abcdefghijklmnopqrstuvwxyz0123456789 please"},"uuid":"k1","timestamp":"2026-12-01T10:00:00.000Z"}"#;
    std::fs::write(&path, format!("{line}\n")).unwrap();
    h.refresh();
    for q in ["sk", "proj", "AbCdEfGhIjKlMnOpQrStUvWx0123", "ghp", "key"] {
        let hits = search(&h.store, Some(q), None, None);
        // Snippet lines only: the query itself is echoed in the header.
        let snippets: String = hits.text.lines().filter(|l| l.starts_with("  ")).collect();
        assert!(
            !snippets.contains("AbCdEf") && !snippets.contains("abcdefghij"),
            "{q}: {}",
            hits.text
        );
    }
    let text = h.read("claude-keys");
    assert!(
        text.contains("use key [redacted] and token [redacted] please"),
        "{text}"
    );
}

#[test]
fn gemini_chats_take_the_last_version_of_a_message_and_keep_a_rewind_as_a_side_branch() {
    let h = Home::new();
    h.put(
        Path::new(".gemini/tmp/app/chats/session-2026-12-01T09-00-abcd1234.jsonl"),
        "gemini.jsonl",
    );
    std::fs::write(h.root.join(".gemini/tmp/app/.project_root"), "/work/app\n").unwrap();
    let report = h.refresh();
    assert_eq!((report.files, report.skipped), (1, 0), "{report:?}");
    let text = h.read("gemini-session-2026-12-01T09-00-abcd1234");
    assert!(
        text.starts_with("Session gemini-session-2026-12-01T09-00-abcd1234 (gemini, /work/app, "),
        "{text}"
    );
    assert!(text.contains("Z]\nWhich tests are flaky?\n"), "{text}");
    // The message re-appended with its tool's result: one call, its result, no copy.
    assert_eq!(text.matches("Let me look.").count(), 1, "{text}");
    assert!(text.contains("T1 run_shell_command {\"command\":\"cargo test 2>&1 | tail\"} → test net::retry ... FAILED"), "{text}");
    assert!(
        text.contains("Z]\nnet::retry fails: it sleeps on a real clock.\n"),
        "{text}"
    );
    // Rewound: the fake-clock attempt is a side branch, the timeout one the main line.
    assert!(
        text.contains(" (side branch)]\nfix it with a fake clock\n"),
        "{text}"
    );
    assert!(
        text.contains(" (side branch)]\nDone a first attempt.\n"),
        "{text}"
    );
    assert!(
        text.contains("Z]\nfix it by raising the timeout\n"),
        "{text}"
    );
    assert!(text.contains("Z]\nTimeout raised to 5 s.\n"), "{text}");
    assert!(
        text.contains("[context 2026-12-01 09:02:04Z] Checkpoint saved."),
        "{text}"
    );
}

/// A chat in Gemini CLI's older form: one pretty-printed document, as it writes it.
fn gemini_document(messages: &[serde_json::Value], updated: &str) -> String {
    serde_json::to_string_pretty(&serde_json::json!({
        "sessionId": "deadbeef-0000-4000-8000-000000000001",
        "projectHash": "ignored",
        "startTime": "2026-11-02T10:00:00.000Z",
        "lastUpdated": updated,
        "messages": messages,
    }))
    .unwrap()
}

#[test]
fn gemini_chats_of_both_forms_are_read_and_their_projects_found_through_projects_json() {
    use sha2::Digest as _;
    let h = Home::new();
    // The older form lives in a folder named by the SHA-256 of the project's path, which
    // only projects.json names; the newer one in a slug folder without .project_root.
    let hash: String = sha2::Sha256::digest(b"/work/legacy")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::create_dir_all(h.root.join(".gemini")).unwrap();
    std::fs::write(
        h.root.join(".gemini/projects.json"),
        r#"{"projects": {"/work/legacy": "legacy", "/work/mapped": "mapped"}}"#,
    )
    .unwrap();
    let legacy = h.root.join(format!(
        ".gemini/tmp/{hash}/chats/session-2026-11-02T10-00-deadbeef.json"
    ));
    std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    let asked = serde_json::json!({
        "id": "m1", "timestamp": "2026-11-02T10:00:01.000Z", "type": "user",
        "content": [{"text": "why does the legacy build fail?"}]
    });
    let answered = serde_json::json!({
        "id": "m2", "timestamp": "2026-11-02T10:00:05.000Z", "type": "gemini",
        "content": "Looking at the log.",
        "toolCalls": [{"id": "c1", "name": "read_file", "args": {"path": "build.log"},
                       "status": "success", "timestamp": "2026-11-02T10:00:04.000Z",
                       "resultDisplay": "error: linker not found"}]
    });
    std::fs::write(
        &legacy,
        gemini_document(
            &[asked.clone(), answered.clone()],
            "2026-11-02T10:00:05.000Z",
        ),
    )
    .unwrap();
    h.put(
        Path::new(".gemini/tmp/mapped/chats/session-2026-12-01T09-00-abcd1234.jsonl"),
        "gemini.jsonl",
    );
    let report = h.refresh();
    assert_eq!((report.files, report.skipped), (2, 0), "{report:?}");
    let text = h.read("gemini-session-2026-11-02T10-00-deadbeef");
    assert!(
        text.starts_with(
            "Session gemini-session-2026-11-02T10-00-deadbeef (gemini, /work/legacy, "
        ),
        "{text}"
    );
    assert!(text.contains("why does the legacy build fail?"), "{text}");
    assert!(
        text.contains("read_file {\"path\":\"build.log\"} → error: linker not found"),
        "{text}"
    );
    let mapped = h.read("gemini-session-2026-12-01T09-00-abcd1234");
    assert!(
        mapped.starts_with(
            "Session gemini-session-2026-12-01T09-00-abcd1234 (gemini, /work/mapped, "
        ),
        "{mapped}"
    );

    // Gemini CLI rewrites the whole document at each change: the new message is read, the
    // old ones are not repeated.
    let more = serde_json::json!({
        "id": "m3", "timestamp": "2026-11-02T10:01:00.000Z", "type": "user",
        "content": [{"text": "install the linker then"}]
    });
    std::fs::write(
        &legacy,
        gemini_document(&[asked, answered, more], "2026-11-02T10:01:00.000Z"),
    )
    .unwrap();
    let report = h.refresh();
    assert_eq!(report.skipped, 0, "{report:?}");
    let text = h.read("gemini-session-2026-11-02T10-00-deadbeef");
    assert!(text.contains("install the linker then"), "{text}");
    assert_eq!(
        text.matches("why does the legacy build fail?").count(),
        1,
        "{text}"
    );
    assert_eq!(text.matches("error: linker not found").count(), 1, "{text}");

    // A projects.json that is a FIFO (anyone who can write ~/.gemini can make one) holds
    // nothing up: it is not read, and the import goes on.
    std::fs::remove_file(h.root.join(".gemini/projects.json")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(h.root.join(".gemini/projects.json"))
        .status()
        .unwrap();
    assert!(made.success());
    h.put(
        Path::new(".gemini/tmp/other/chats/session-2026-12-02T09-00-abcd9999.jsonl"),
        "gemini.jsonl",
    );
    let report = h.refresh();
    assert_eq!(report.files, 3, "{report:?}");
}

fn opencode_db(path: &Path) -> rusqlite::Connection {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch(
        "CREATE TABLE session(id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT, slug TEXT, directory TEXT, title TEXT, version TEXT, time_created INTEGER, time_updated INTEGER, time_archived INTEGER);
         CREATE TABLE message(id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, data TEXT);
         CREATE TABLE part(id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, data TEXT);
         INSERT INTO session VALUES ('ses_1', 'p', NULL, 'calm-fox', '/work/app', 'Speed up the build', '1.2', 1796115600000, 1796115601000, NULL);
         INSERT INTO message VALUES ('msg_1', 'ses_1', 1796115600000, '{\"role\":\"user\"}');
         INSERT INTO part VALUES ('prt_1', 'msg_1', 'ses_1', '{\"type\":\"text\",\"text\":\"why is the build slow?\"}');
         INSERT INTO message VALUES ('msg_2', 'ses_1', 1796115601000, '{\"role\":\"assistant\",\"modelID\":\"m\"}');
         INSERT INTO part VALUES ('prt_2', 'msg_2', 'ses_1', '{\"type\":\"tool\",\"tool\":\"bash\",\"callID\":\"call_9\",\"state\":{\"status\":\"completed\",\"input\":{\"command\":\"cargo build --timings\"},\"output\":\"Finished in 93 s\"}}');
         INSERT INTO part VALUES ('prt_3', 'msg_2', 'ses_1', '{\"type\":\"text\",\"text\":\"Most time goes to\"}');",
    )
    .unwrap();
    c
}

#[test]
fn opencode_sessions_are_read_from_its_database_as_they_change_and_dropped_when_deleted() {
    let h = Home::new();
    let db = h.root.join(".local/share/opencode/opencode.db");
    let c = opencode_db(&db);
    let sources = [("opencode".to_string(), db.parent().unwrap().to_path_buf())];
    let r = Redactor::new(&[], Vec::new()).unwrap();
    let report = refresh(&h.store, &sources, &r, Duration::from_secs(30));
    assert_eq!(report.entries, 4, "{report:?}");
    let first = h
        .store
        .read_session("opencode-ses_1", None, None, &everyone, &r, BUDGETS)
        .unwrap();
    let text = &first.text;
    assert!(
        text.starts_with("Session opencode-ses_1 (opencode, /work/app, "),
        "{text}"
    );
    assert!(text.contains("\nTitle: Speed up the build\n"), "{text}");
    assert!(text.contains("Z]\nwhy is the build slow?\n"), "{text}");
    assert!(
        text.contains("T1 bash {\"command\":\"cargo build --timings\"} → Finished in 93 s"),
        "{text}"
    );
    assert!(text.contains("Z]\nMost time goes to\n"), "{text}");
    // Unchanged: nothing read again.
    assert_eq!(
        refresh(&h.store, &sources, &r, Duration::from_secs(30)).entries,
        0
    );

    // The reply grows in place; the reader's update cursor gets the new end only.
    c.execute_batch(
        "UPDATE part SET data = '{\"type\":\"text\",\"text\":\"Most time goes to the proc-macro crates.\"}' WHERE id = 'prt_3';
         UPDATE session SET time_updated = 1796115609000 WHERE id = 'ses_1';",
    )
    .unwrap();
    assert_eq!(
        refresh(&h.store, &sources, &r, Duration::from_secs(30)).entries,
        1
    );
    let new = h
        .store
        .read_session(
            "opencode-ses_1",
            first.update_cursor.as_deref(),
            None,
            &everyone,
            &r,
            BUDGETS,
        )
        .unwrap();
    assert!(
        new.text
            .starts_with("[assistant 2026-12-01 09:00:01Z, continued]\n the proc-macro crates.\n"),
        "{}",
        new.text
    );

    c.execute_batch("DELETE FROM session WHERE id = 'ses_1';")
        .unwrap();
    assert_eq!(
        refresh(&h.store, &sources, &r, Duration::from_secs(30)).dropped,
        1
    );
    assert!(
        h.store
            .read_session("opencode-ses_1", None, None, &everyone, &r, BUDGETS)
            .is_err()
    );
}

#[test]
fn an_archived_rollout_keeps_its_session_and_a_lookup_through_gantry_is_not_shown_again() {
    let h = Home::new();
    let rel = "2026/04/20/rollout-2026-04-20T10-00-00-0196aaaa-0000-7000-8000-000000000001.jsonl";
    let path = h.put(&Path::new(".codex/sessions").join(rel), "codex-old.jsonl");
    h.refresh();
    let id = "codex-0196aaaa-0000-7000-8000-000000000001";
    let r = Redactor::new(&[], Vec::new()).unwrap();
    let before = h
        .store
        .read_session(id, None, None, &everyone, &r, BUDGETS)
        .unwrap();
    // Codex archives by renaming the file into archived_sessions.
    let archived = h
        .root
        .join(".codex/archived_sessions")
        .join(path.file_name().unwrap());
    std::fs::create_dir_all(archived.parent().unwrap()).unwrap();
    std::fs::rename(&path, &archived).unwrap();
    let report = h.refresh();
    assert_eq!(
        (report.dropped, report.entries, report.bytes),
        (0, 0, 0),
        "{report:?}"
    );
    let after = h
        .store
        .read_session(
            id,
            before.update_cursor.as_deref(),
            None,
            &everyone,
            &r,
            BUDGETS,
        )
        .unwrap();
    assert!(after.text.starts_with("Nothing new"), "{}", after.text);

    // A Claude session that looked up gantry's recordings: the lookup is not shown again.
    let claude = h.root.join(".claude/projects/-work-app/look.jsonl");
    std::fs::create_dir_all(claude.parent().unwrap()).unwrap();
    std::fs::write(
        &claude,
        concat!(
            r#"{"parentUuid":null,"cwd":"/work/app","sessionId":"look","type":"user","message":{"role":"user","content":"what did chatgpt do?"},"uuid":"l1","timestamp":"2026-12-01T10:00:00.000Z"}"#, "\n",
            r#"{"parentUuid":"l1","cwd":"/work/app","sessionId":"look","type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"mcp__gantry__session","input":{"action":"search"}}]},"uuid":"l2","timestamp":"2026-12-01T10:00:01.000Z"}"#, "\n",
            r#"{"parentUuid":"l2","cwd":"/work/app","sessionId":"look","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"Newest sessions: wombat-recursion-marker"}]},"uuid":"l3","timestamp":"2026-12-01T10:00:02.000Z"}"#, "\n",
        ),
    )
    .unwrap();
    h.refresh();
    let text = h.read("claude-look");
    assert!(text.contains("what did chatgpt do?"), "{text}");
    assert!(
        !text.contains("mcp__gantry__session") && !text.contains("wombat"),
        "{text}"
    );
    let hits = search(&h.store, Some("wombat"), None, None);
    assert!(hits.text.starts_with("No hits"), "{}", hits.text);
}
