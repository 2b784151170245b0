//! The `session` tool's model-controlled inputs (query, cursor, session id, T references)
//! against a real store: never a panic, never a page beyond its bound, however forged.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use recordings::store::{self, Kind, NewEntry, SessionInfo};
use recordings::{Budgets, Call, Grouping, Redactor, Search, Store};

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    redactor: Redactor,
}

/// Small budgets, so pages are cut everywhere: inside multi-byte text, mid-entry.
const BUDGETS: Budgets = Budgets {
    search_tokens: 300,
    read_tokens: 200,
    newest: 5,
};

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("sessions.db")).unwrap();
        let redactor = Redactor::new(&[], Vec::new()).unwrap();
        store
            .write(|tx| {
                store::upsert_session(
                    tx,
                    &SessionInfo {
                        id: "codex-a".into(),
                        source: "codex".into(),
                        title: Some("ünïcödé title ✓".into()),
                        cwd: Some("/work".into()),
                        grouping: None,
                        started_ms: 0,
                        updated_ms: 0,
                    },
                )?;
                for i in 0..40i64 {
                    let text = format!("message {i} ✓ {}", "wörd ".repeat((i as usize * 37) % 300));
                    let kind = if i % 2 == 0 { Kind::User } else { Kind::Assistant };
                    let mut e = NewEntry::new(i, kind, text);
                    e.msg_key = Some(format!("m{}", i % 7));
                    store::add_entry(tx, "codex-a", &e)?;
                    let mut t = NewEntry::new(i, Kind::Tool, format!("{{\"cmd\":\"ls {i}\"}}"));
                    t.name = Some("exec".into());
                    t.call_id = Some(format!("c{i}"));
                    store::add_entry(tx, "codex-a", &t)?;
                    let mut r = NewEntry::new(i, Kind::Result, "out ✓\n".repeat(i as usize));
                    r.call_id = Some(format!("c{i}"));
                    store::add_entry(tx, "codex-a", &r)?;
                }
                Ok(())
            })
            .unwrap();
        store
            .record_call(
                &Call {
                    ts_ms: 1,
                    connector: "core",
                    tool: "read",
                    arguments: "{\"paths\":[\"a\"]}",
                    result: "wörd ✓",
                    decision: "allow",
                    error: None,
                    failed: false,
                    grouping: Grouping::TimeGap,
                    labels: Vec::new(),
                    hidden: false,
                },
                &redactor,
            )
            .unwrap();
        Fixture {
            _dir: dir,
            store,
            redactor,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\u{0}');
    let a = parts.next().unwrap_or("");
    let b = parts.next();
    let c = parts.next();
    let f = fixture();
    let all = |_: &SessionInfo| true;
    for query in [Some(a), None] {
        if let Ok(p) = f.store.search(
            Search {
                query,
                source: None,
                cursor: b,
            },
            &all,
            &f.redactor,
            BUDGETS,
        ) {
            assert!(p.text.len() < 16 << 10, "{}", p.text.len());
        }
    }
    for id in ["codex-a", a] {
        for refs in [None, c] {
            if let Ok(p) = f
                .store
                .read_session(id, b, refs, &all, &f.redactor, BUDGETS)
            {
                assert!(p.text.len() < 8 << 10, "{}", p.text.len());
            }
        }
    }
});
