//! The store on real SQLite files: recording, search, pages and cursors.

use recordings::store::{self, Kind, NewEntry, SessionInfo};
use recordings::{Budgets, Call, Grouping, Redactor, Search, Store};

use crate::common::{BUDGETS, everyone, search};

fn call<'a>(ts: i64, tool: &'a str, args: &'a str, result: &'a str) -> Call<'a> {
    Call {
        ts_ms: ts,
        connector: "core",
        tool,
        arguments: args,
        result,
        decision: "allow",
        error: None,
        failed: false,
        grouping: Grouping::Connection("stdio-1".into()),
        labels: Vec::new(),
        hidden: tool == "session",
    }
}

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state/sessions.db")).unwrap();
    (dir, store)
}

/// Pages of `session_id`, concatenated without their trailers.
fn all_pages(store: &Store, session_id: &str, budgets: Budgets) -> (String, usize) {
    let r = Redactor::new(&[], Vec::new()).unwrap();
    let mut cursor: Option<String> = None;
    let mut text = String::new();
    let mut pages = 0;
    loop {
        let page = store
            .read_session(session_id, cursor.as_deref(), None, &everyone, &r, budgets)
            .unwrap();
        pages += 1;
        let body = match &page.next_cursor {
            Some(_) => page
                .text
                .rsplit_once("\n[more: session ")
                .unwrap()
                .0
                .to_string(),
            None => page
                .text
                .rsplit_once("[end; later, cursor ")
                .unwrap()
                .0
                .to_string(),
        };
        text.push_str(&body);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return (text, pages),
        }
        assert!(pages < 10_000, "pages never end");
    }
}

#[test]
fn the_store_file_is_private() {
    let (dir, _store) = open();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("state/sessions.db"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[test]
fn recorded_calls_are_found_and_read_back_without_the_session_calls() {
    let (_dir, store) = open();
    let r = Redactor::new(&[], vec!["connector-token-123".into()]).unwrap();
    store
        .record_call(
            &call(
                1_000,
                "read",
                r#"{"paths":["a.rs"]}"#,
                "fn zebra_stripes() {}\n",
            ),
            &r,
        )
        .unwrap();
    store
        .record_call(
            &call(
                2_000,
                "session",
                r#"{"action":"search","query":"zebra"}"#,
                "zebra hits…",
            ),
            &r,
        )
        .unwrap();
    store
        .record_call(
            &call(
                3_000,
                "exec_command",
                r#"{"cmd":"echo connector-token-123"}"#,
                "Exit code 0\nOutput:\nconnector-token-123\n",
            ),
            &r,
        )
        .unwrap();
    let page = search(&store, Some("zebra"), None, None);
    // One hit: the read's result, not the session call that searched for it.
    assert_eq!(page.text.matches("\n  ").count(), 1, "{}", page.text);
    assert!(
        page.text.contains("«zebra_stripes»") || page.text.contains("«zebra"),
        "{}",
        page.text
    );
    let id = page
        .text
        .lines()
        .nth(1)
        .unwrap()
        .split(" · ")
        .next()
        .unwrap()
        .to_string();
    assert!(id.starts_with("gantry-core-"), "{id}");
    let read = store
        .read_session(&id, None, None, &everyone, &r, BUDGETS)
        .unwrap();
    assert!(
        read.text
            .contains("T1 read {\"paths\":[\"a.rs\"]} → fn zebra_stripes() {}"),
        "{}",
        read.text
    );
    assert!(read.text.contains("T2 exec_command"), "{}", read.text);
    assert!(
        !read
            .text
            .contains("\"action\":\"search\",\"query\":\"zebra\""),
        "{}",
        read.text
    );
    assert!(!read.text.contains("connector-token-123"), "{}", read.text);
    assert!(read.text.contains("[redacted]"), "{}", read.text);
    // Expanding a reference gives the whole result.
    let x = store
        .read_session(&id, None, Some("T2"), &everyone, &r, BUDGETS)
        .unwrap();
    assert!(
        x.text
            .contains("Result:\nExit code 0\nOutput:\n[redacted]\n"),
        "{}",
        x.text
    );
    let missing = store.read_session(&id, None, Some("T9"), &everyone, &r, BUDGETS);
    assert_eq!(
        missing.unwrap_err().to_string(),
        "T9 names no tool call of this session"
    );
}

fn imported(store: &Store, id: &str, entries: &[NewEntry]) {
    store
        .write(|tx| {
            store::upsert_session(
                tx,
                &SessionInfo {
                    id: id.into(),
                    source: "codex".into(),
                    title: Some("a long one".into()),
                    cwd: Some("/work/app".into()),
                    grouping: None,
                    started_ms: 0,
                    updated_ms: 0,
                },
            )?;
            for e in entries {
                store::add_entry(tx, id, e)?;
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn every_page_of_a_long_session_concatenates_to_the_exact_text() {
    let (_dir, store) = open();
    // Messages of every size, multi-byte text among them, one far over a page.
    let mut entries = Vec::new();
    let mut expected = Vec::new();
    for i in 0..60 {
        let text = match i % 4 {
            0 => format!("question {i}: ünïcödé ✓ {}", "word ".repeat(i * 7)),
            1 => format!("answer {i}\n{}", "line of text ✓\n".repeat(i * 3)),
            2 => "x".repeat(30_000 + i),
            _ => format!("short {i}"),
        };
        let kind = if i % 2 == 0 {
            Kind::User
        } else {
            Kind::Assistant
        };
        entries.push(NewEntry::new(i as i64 * 1000, kind, text.clone()));
        expected.push(text);
    }
    imported(&store, "codex-long", &entries);
    let (whole, pages) = all_pages(&store, "codex-long", BUDGETS);
    assert!(pages > 20, "{pages} pages");
    let mut at = 0;
    for text in &expected {
        let found = whole[at..]
            .find(text.as_str())
            .unwrap_or_else(|| panic!("missing or out of order: {}", &text[..20.min(text.len())]));
        at += found + text.len();
    }
    // The same with the smallest pages.
    let tiny = Budgets {
        read_tokens: 50,
        ..BUDGETS
    };
    assert_eq!(all_pages(&store, "codex-long", tiny).0, whole);
}

#[test]
fn an_update_cursor_returns_only_what_is_new_a_grown_suffix_and_a_replacement() {
    let (_dir, store) = open();
    let r = Redactor::new(&[], Vec::new()).unwrap();
    let mut reply = NewEntry::new(1, Kind::Assistant, "The build fails because");
    reply.msg_key = Some("m1".into());
    let mut other = NewEntry::new(2, Kind::Assistant, "First draft.");
    other.msg_key = Some("m2".into());
    imported(
        &store,
        "codex-u",
        &[
            NewEntry::new(0, Kind::User, "why?"),
            reply.clone(),
            other.clone(),
        ],
    );
    let first = store
        .read_session("codex-u", None, None, &everyone, &r, BUDGETS)
        .unwrap();
    let update = first.update_cursor.unwrap();
    let nothing = store
        .read_session("codex-u", Some(&update), None, &everyone, &r, BUDGETS)
        .unwrap();
    assert!(
        nothing.text.starts_with("Nothing new since that cursor."),
        "{}",
        nothing.text
    );

    reply.text = "The build fails because a crate is missing.".into();
    other.text = "Second draft, rewritten.".into();
    imported(
        &store,
        "codex-u",
        &[reply, other, NewEntry::new(3, Kind::User, "thanks")],
    );
    let new = store
        .read_session("codex-u", Some(&update), None, &everyone, &r, BUDGETS)
        .unwrap();
    assert!(
        new.text.contains(", continued]\n a crate is missing.\n"),
        "{}",
        new.text
    );
    assert!(
        new.text
            .contains("replaces what you read before]\nSecond draft, rewritten.\n"),
        "{}",
        new.text
    );
    assert!(new.text.contains("]\nthanks\n"), "{}", new.text);
    assert!(!new.text.contains("why?"), "{}", new.text);
    // Re-recording the same text adds nothing.
    let again = store
        .read_session(
            "codex-u",
            new.update_cursor.as_deref(),
            None,
            &everyone,
            &r,
            BUDGETS,
        )
        .unwrap();
    assert!(again.text.starts_with("Nothing new"), "{}", again.text);
    // A whole read shows only the latest versions.
    let whole = store
        .read_session("codex-u", None, None, &everyone, &r, BUDGETS)
        .unwrap();
    assert!(
        !whole.text.contains("First draft") && whole.text.contains("Second draft"),
        "{}",
        whole.text
    );
}

#[test]
fn hidden_and_foreign_sessions_and_bad_cursors_are_refused_plainly() {
    let (_dir, store) = open();
    let r = Redactor::new(&[], Vec::new()).unwrap();
    imported(
        &store,
        "codex-secret",
        &[NewEntry::new(0, Kind::User, "the password is swordfish")],
    );
    let nobody = |_: &store::SessionInfo| false;
    let e = store
        .read_session("codex-secret", None, None, &nobody, &r, BUDGETS)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "no recorded session \"codex-secret\" (or it is outside the approved roots)"
    );
    let hits = store
        .search(
            Search {
                query: Some("swordfish"),
                source: None,
                cursor: None,
            },
            &nobody,
            &r,
            BUDGETS,
        )
        .unwrap();
    assert!(hits.text.starts_with("No hits"), "{}", hits.text);
    let e = store
        .read_session(
            "codex-secret",
            Some("p.1.0.deadbeef"),
            None,
            &everyone,
            &r,
            BUDGETS,
        )
        .unwrap_err();
    assert!(e.to_string().contains("made for another session"), "{e}");
    let e = store
        .read_session("codex-secret", Some("zz"), None, &everyone, &r, BUDGETS)
        .unwrap_err();
    assert!(e.to_string().contains("not a read cursor"), "{e}");
}

#[test]
fn no_query_lists_the_newest_sessions_and_pages_by_cursor() {
    let (_dir, store) = open();
    for i in 0..45 {
        store
            .write(|tx| {
                store::upsert_session(
                    tx,
                    &SessionInfo {
                        id: format!("codex-{i:02}"),
                        source: "codex".into(),
                        title: Some(format!("task {i}")),
                        cwd: None,
                        grouping: None,
                        started_ms: i,
                        updated_ms: i,
                    },
                )
            })
            .unwrap();
    }
    let first = search(&store, None, None, None);
    assert_eq!(
        first.text.matches("\n  task ").count(),
        30,
        "{}",
        first.text
    );
    assert!(
        first
            .text
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("codex-44 · codex"),
        "{}",
        first.text
    );
    let c = first.next_cursor.unwrap();
    let second = search(&store, None, None, Some(&c));
    assert_eq!(
        second.text.matches("\n  task ").count(),
        15,
        "{}",
        second.text
    );
    assert!(second.next_cursor.is_none());
    let other = search(&store, None, Some("claude"), None);
    assert_eq!(other.text, "No recorded sessions.\n");
}

#[test]
fn a_result_that_comes_after_its_call_was_read_is_new_to_an_update_cursor() {
    let (_dir, store) = open();
    let r = Redactor::new(&[], Vec::new()).unwrap();
    let mut call = NewEntry::new(1, Kind::Tool, "{\"cmd\":\"make\"}");
    call.name = Some("exec_command".into());
    call.call_id = Some("c1".into());
    imported(
        &store,
        "codex-late",
        &[NewEntry::new(0, Kind::User, "build it"), call],
    );
    let first = store
        .read_session("codex-late", None, None, &everyone, &r, BUDGETS)
        .unwrap();
    assert!(
        first.text.contains("T1 exec_command {\"cmd\":\"make\"}\n"),
        "{}",
        first.text
    );
    let mut result = NewEntry::new(2, Kind::Result, "make: *** No rule to make target");
    result.call_id = Some("c1".into());
    result.failed = true;
    imported(&store, "codex-late", &[result]);
    let new = store
        .read_session(
            "codex-late",
            first.update_cursor.as_deref(),
            None,
            &everyone,
            &r,
            BUDGETS,
        )
        .unwrap();
    assert!(
        new.text
            .starts_with("result of T1: → make: *** No rule to make target [failed]"),
        "{}",
        new.text
    );
    // A whole read shows it with its call, once.
    let whole = store
        .read_session("codex-late", None, None, &everyone, &r, BUDGETS)
        .unwrap();
    assert_eq!(whole.text.matches("No rule").count(), 1, "{}", whole.text);
}

#[test]
fn a_cursor_offset_outside_its_entry_is_refused() {
    let (_dir, store) = open();
    let r = Redactor::new(&[], Vec::new()).unwrap();
    imported(
        &store,
        "codex-off",
        &[NewEntry::new(0, Kind::User, "x".repeat(40_000))],
    );
    let first = store
        .read_session("codex-off", None, None, &everyone, &r, BUDGETS)
        .unwrap();
    let c = first.next_cursor.unwrap();
    let mut parts: Vec<String> = c.split('.').map(str::to_string).collect();
    parts[2] = "999999".into();
    let forged = parts.join(".");
    let e = store
        .read_session("codex-off", Some(&forged), None, &everyone, &r, BUDGETS)
        .unwrap_err();
    assert!(
        e.to_string().contains("the offset is not inside its entry"),
        "{e}"
    );
}

#[test]
fn two_servers_sharing_a_store_record_each_call_once_and_leave_no_unredacted_journal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state/sessions.db");
    let r = Redactor::new(&[], Vec::new()).unwrap();
    let a = std::sync::Arc::new(Store::open(&path).unwrap());
    let b = std::sync::Arc::new(Store::open(&path).unwrap());
    let ja = recordings::Journal::open(a.clone(), r.clone()).unwrap();
    let jb = recordings::Journal::open(b, r.clone()).unwrap();
    for i in 0..50 {
        let secret = format!("key sk-{i:02}abcdefghijklmnopqrstuvwxyz");
        ja.append(&call(i, "read", "{}", &secret)).unwrap();
        jb.append(&call(1000 + i, "find", "{}", "x")).unwrap();
    }
    assert!(ja.flush(std::time::Duration::from_secs(10)));
    assert!(jb.flush(std::time::Duration::from_secs(10)));
    let count = |kind: &str| -> i64 {
        a.read(|c| {
            Ok(
                c.query_row("SELECT COUNT(*) FROM entry WHERE kind = ?1", [kind], |r| {
                    r.get(0)
                })?,
            )
        })
        .unwrap()
    };
    assert_eq!(count("tool"), 100);
    assert_eq!(count("result"), 100);
    // Everything taken and a quiet second gone by: the journals hold nothing, unredacted or
    // not (a busy server empties it after each MiB instead).
    let held = || -> Vec<(String, u64)> {
        std::fs::read_dir(dir.path().join("state"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".journal"))
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().len(),
                )
            })
            .filter(|(_, len)| *len > 0)
            .collect()
    };
    assert!(!held().is_empty(), "emptied before a quiet second");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !held().is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(held(), Vec::new());
    // A journal left by a server that is gone is taken by the next one, then removed.
    drop((ja, jb));
    let orphan = dir.path().join("state/sessions-1-1.journal");
    let line = serde_json::json!({"ts":5,"connector":"core","tool":"read","args":"{}","result":"left behind","decision":"allow","error":null,"failed":false,"group":["gap",""],"labels":[],"hidden":false});
    std::fs::write(&orphan, format!("{line}\n{{\"torn")).unwrap();
    let c = std::sync::Arc::new(Store::open(&path).unwrap());
    let _jc = recordings::Journal::open(c, r).unwrap();
    assert!(!orphan.exists());
    assert_eq!(count("result"), 101);
}

#[test]
fn a_query_of_many_words_searches_its_first_sixteen_and_says_so() {
    let (_dir, store) = open();
    imported(
        &store,
        "codex-w",
        &[NewEntry::new(0, Kind::User, "alpha beta")],
    );
    let many = format!("alpha {}", "beta ".repeat(40));
    let hits = search(&store, Some(&many), None, None);
    assert!(hits.text.contains("(its first 16 words)"), "{}", hits.text);
    assert!(hits.text.contains("codex-w · codex"), "{}", hits.text);
}

/// FTS5's own check that its index matches the entries it indexes, as a search sees them.
fn index_is_consistent(store: &Store) {
    store
        .read(|c| {
            c.execute_batch(
                "INSERT INTO entry_fts(entry_fts, rank) VALUES ('integrity-check', 1)",
            )?;
            Ok(())
        })
        .unwrap();
}

/// Whether a search for `word` finds an entry holding it (marked in its snippet).
fn finds(store: &Store, word: &str) -> bool {
    search(store, Some(word), None, None)
        .text
        .contains(&format!("«{word}»"))
}

fn indexed_rows(store: &Store) -> i64 {
    store
        .read(|c| Ok(c.query_row("SELECT COUNT(*) FROM entry_fts", [], |r| r.get(0))?))
        .unwrap()
}

#[test]
fn the_index_follows_deletes_of_the_newest_entries_and_what_comes_after() {
    let (_dir, store) = open();
    let entry = |ts, text: &str| NewEntry::new(ts, Kind::User, text);
    imported(
        &store,
        "old",
        &[entry(1, "alpha first"), entry(2, "beta second")],
    );
    imported(
        &store,
        "new",
        &[entry(3, "gamma third"), entry(4, "delta fourth")],
    );
    // The newest entries go, and in the same transaction more come: SQLite would hand the
    // new rows the deleted rows' ids.
    store
        .write(|tx| {
            store::delete_session(tx, "new")?;
            store::upsert_session(
                tx,
                &SessionInfo {
                    id: "later".into(),
                    source: "codex".into(),
                    title: None,
                    cwd: None,
                    grouping: None,
                    started_ms: 5,
                    updated_ms: 5,
                },
            )?;
            store::add_entry(tx, "later", &entry(5, "epsilon fifth"))?;
            Ok(())
        })
        .unwrap();
    index_is_consistent(&store);
    assert_eq!(indexed_rows(&store), 3);
    assert!(finds(&store, "epsilon"));
    assert!(!finds(&store, "gamma"));
    // And once more, removing what was just added: its id is not handed out again (update
    // cursors hold the last id they saw).
    let newest = || -> i64 {
        store
            .read(|c| Ok(c.query_row("SELECT MAX(id) FROM entry", [], |r| r.get(0))?))
            .unwrap()
    };
    let before = newest();
    store
        .write(|tx| store::delete_session(tx, "later"))
        .unwrap();
    imported(&store, "last", &[entry(6, "zeta sixth")]);
    assert!(newest() > before, "an id was reused");
    index_is_consistent(&store);
    assert_eq!(indexed_rows(&store), 3);
    assert!(finds(&store, "zeta"));
}

#[test]
fn a_store_indexed_row_by_row_by_an_earlier_gantry_is_carried_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state/sessions.db");
    {
        // The earlier schema: a trigger per inserted row, no mark, user_version 0.
        let store = Store::open(&path).unwrap();
        store
            .read(|c| {
                c.execute_batch(
                    "DROP TRIGGER entry_ad;
                     DELETE FROM meta WHERE key = 'fts:indexed_through';
                     CREATE TRIGGER entry_ai AFTER INSERT ON entry WHEN new.hidden = 0 BEGIN
                       INSERT INTO entry_fts(rowid, name, text) VALUES (new.id, new.name, new.text);
                     END;
                     CREATE TRIGGER entry_ad AFTER DELETE ON entry WHEN old.hidden = 0 BEGIN
                       INSERT INTO entry_fts(entry_fts, rowid, name, text) VALUES ('delete', old.id, old.name, old.text);
                     END;
                     PRAGMA user_version = 0;
                     INSERT INTO session(id, source, started_ms, updated_ms) VALUES ('early', 'codex', 1, 1);
                     INSERT INTO entry(session_id, ts_ms, kind, text) VALUES ('early', 1, 'user', 'kappa before');",
                )?;
                Ok(())
            })
            .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(indexed_rows(&store), 1, "indexed once, not again");
    imported(
        &store,
        "after",
        &[NewEntry::new(2, Kind::User, "lambda after")],
    );
    index_is_consistent(&store);
    assert!(finds(&store, "kappa"));
    assert!(finds(&store, "lambda"));
    store
        .write(|tx| store::delete_session(tx, "early"))
        .unwrap();
    index_is_consistent(&store);
    assert_eq!(indexed_rows(&store), 1);
    // An earlier gantry opening the store again puts its trigger back, records, and deletes
    // what it recorded: the next write makes the index whole again.
    store
        .read(|c| {
            c.execute_batch(
                "CREATE TRIGGER IF NOT EXISTS entry_ai AFTER INSERT ON entry WHEN new.hidden = 0 BEGIN
                   INSERT INTO entry_fts(rowid, name, text) VALUES (new.id, new.name, new.text);
                 END;
                 INSERT INTO session(id, source, started_ms, updated_ms) VALUES ('old', 'codex', 3, 3);
                 INSERT INTO entry(session_id, ts_ms, kind, text) VALUES ('old', 3, 'user', 'mu gone');
                 DELETE FROM entry WHERE session_id = 'old';
                 DELETE FROM session WHERE id = 'old';",
            )?;
            Ok(())
        })
        .unwrap();
    imported(&store, "next", &[NewEntry::new(4, Kind::User, "nu next")]);
    index_is_consistent(&store);
    assert!(!finds(&store, "mu"), "a deleted entry is still found");
    assert!(finds(&store, "nu") && finds(&store, "lambda"));
    assert_eq!(indexed_rows(&store), 2);
}
