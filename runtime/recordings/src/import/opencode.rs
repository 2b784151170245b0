//! opencode: one SQLite store (`~/.local/share/opencode/opencode.db`, `opencode-<channel>.db`
//! for other channels, or `$OPENCODE_DB`), opened read-only and never written. Sessions
//! (`session`: directory, title, times), their messages (`message.data`: role) and the
//! messages' parts (`part.data`: text, tool calls with their state) change in place, so a
//! session whose `time_updated` moved is read again whole, each part keyed by its id: an
//! unchanged part adds nothing, a changed one supersedes its entry. A session deleted there is
//! dropped here.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, params};
use serde_json::Value;

use super::{Item, Report, field as s};
use crate::store::{self, Kind, NewEntry, SourceMark, Store};
use crate::{Redactor, StoreError};

/// The databases in `dir`.
pub(super) fn databases(dir: &Path) -> Vec<PathBuf> {
    if dir.extension().is_some_and(|e| e == "db") {
        return vec![dir.to_path_buf()];
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("opencode") && n.ends_with(".db"))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Reads what changed in every database below `dir`.
pub(super) fn refresh(
    store: &Store,
    dir: &Path,
    redactor: &Redactor,
    report: &mut Report,
) -> Result<(), StoreError> {
    for db in databases(dir) {
        report.files += 1;
        let open = |e: rusqlite::Error| StoreError::Open(db.clone(), e.to_string());
        let conn = Connection::open_with_flags(
            &db,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open)?;
        conn.busy_timeout(std::time::Duration::from_secs(2))
            .map_err(open)?;
        let sessions: Vec<(String, Option<String>, Option<String>, i64)> = conn
            .prepare("SELECT id, directory, title, time_updated FROM session")
            .and_then(|mut st| {
                st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                    .collect()
            })
            .map_err(open)?;
        let prefix = format!("{}#", db.display());
        // Sessions deleted in opencode leave here too.
        let known = store.read(|c| store::source_paths(c, "opencode"))?;
        for path in known.iter().filter(|p| p.starts_with(&prefix)) {
            let id = &path[prefix.len()..];
            if !sessions.iter().any(|(s, ..)| s == id) {
                store.write(|tx| {
                    if let Some(mark) = store::source_mark(tx, path)? {
                        store::delete_session(tx, &mark.session_id)?;
                    }
                    store::forget_source(tx, path)?;
                    Ok(())
                })?;
                report.dropped += 1;
            }
        }
        for (id, directory, title, updated) in sessions {
            let key = format!("{prefix}{id}");
            let prior = store.read(|c| store::source_mark(c, &key))?;
            let stored_offset = prior.as_ref().map_or(0, |m| m.offset);
            if prior.is_some() && stored_offset == u64::try_from(updated).unwrap_or(0) {
                continue;
            }
            let mut items = vec![Item::Meta {
                cwd: directory,
                ts_ms: None,
            }];
            if let Some(t) = title {
                items.push(Item::Title(t));
            }
            read_session(&conn, &id, &mut items).map_err(open)?;
            let mark = SourceMark {
                offset: u64::try_from(updated).unwrap_or(0),
                session_id: format!("opencode-{id}"),
                lines: items.len() as i64,
                ..SourceMark::default()
            };
            if let Some(n) = super::commit(
                store,
                "opencode",
                &key,
                &mark,
                stored_offset,
                items,
                redactor,
            )? {
                report.entries += n;
            }
        }
    }
    Ok(())
}

/// The entries of session `id`, message by message, part by part.
fn read_session(conn: &Connection, id: &str, out: &mut Vec<Item>) -> rusqlite::Result<()> {
    let mut messages = conn.prepare(
        "SELECT id, time_created, data FROM message WHERE session_id = ?1 ORDER BY time_created, id",
    )?;
    let mut parts = conn.prepare("SELECT id, data FROM part WHERE message_id = ?1 ORDER BY id")?;
    let rows: Vec<(String, i64, String)> = messages
        .query_map(params![id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (message_id, ts, data) in rows {
        let message: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
        let role = s(&message, "role").unwrap_or("");
        let part_rows: Vec<(String, String)> = parts
            .query_map(params![message_id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        for (part_id, data) in part_rows {
            let part: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
            let push = |out: &mut Vec<Item>, entry| {
                out.push(Item::Entry {
                    entry,
                    append: false,
                });
            };
            match s(&part, "type").unwrap_or("") {
                "text" => {
                    let kind = if role == "user" {
                        Kind::User
                    } else {
                        Kind::Assistant
                    };
                    let mut e = NewEntry::new(ts, kind, s(&part, "text").unwrap_or(""));
                    e.msg_key = Some(part_id.clone());
                    push(out, e);
                }
                "tool" => {
                    let state = part.get("state").unwrap_or(&Value::Null);
                    let call_id = s(&part, "callID").unwrap_or(&part_id).to_string();
                    let mut e = NewEntry::new(
                        ts,
                        Kind::Tool,
                        state.get("input").map(Value::to_string).unwrap_or_default(),
                    );
                    e.name = s(&part, "tool").map(str::to_string);
                    e.call_id = Some(call_id.clone());
                    e.msg_key = Some(format!("call:{part_id}"));
                    push(out, e);
                    let status = s(state, "status").unwrap_or("");
                    let output = match status {
                        "completed" => s(state, "output"),
                        "error" => s(state, "error"),
                        _ => None,
                    };
                    if let Some(output) = output {
                        let mut r = NewEntry::new(ts, Kind::Result, output);
                        r.call_id = Some(call_id);
                        r.msg_key = Some(format!("result:{part_id}"));
                        r.failed = status == "error";
                        push(out, r);
                    }
                }
                "compaction" => {
                    let mut e = NewEntry::new(ts, Kind::Context, "conversation compacted");
                    e.msg_key = Some(part_id.clone());
                    push(out, e);
                }
                _ => {}
            }
        }
        if let Some(error) = message.get("error") {
            let text = error
                .pointer("/data/message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_string);
            let mut e = NewEntry::new(ts, Kind::Error, text);
            e.msg_key = Some(format!("error:{message_id}"));
            out.push(Item::Entry {
                entry: e,
                append: false,
            });
        }
    }
    Ok(())
}
