//! Gemini CLI chats: `~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl` (subagents in
//! `chats/<parent id>/`). The first line holds the session's facts; then one record a
//! message (`user`, `gemini` with its `toolCalls`, `info`, `warning`, `error`). A message that
//! changes is appended again under its id (the later one wins: a superseding entry here);
//! `{"$rewindTo": id}` drops that message and everything after it from the conversation
//! (kept here as a side branch); `{"$set": …}` patches metadata and is not needed.
//!
//! The older form, still on many disks (Gemini CLI rewrites a chat as `.jsonl` only when it is
//! resumed), is one pretty-printed `session-*.json` document rewritten at each change: its
//! fields are the first line's, and `messages` holds the records. It is read whole whenever
//! it changes; messages already stored under their ids add nothing.
//!
//! The project's directory: `<project>/.project_root`, else the entry of
//! `~/.gemini/projects.json` (`{"projects": {"/abs/path": "slug"}}`) whose slug is the
//! project's folder name, or whose path hashes (SHA-256, hex) to it (the older folders are
//! named so), else the chat's own `directories`.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::Digest as _;

use super::{Item, content_text, field as s, parse_time};
use crate::store::{Kind, NewEntry};

/// Chat files below `dir` (`~/.gemini/tmp`): `<project>/chats/`, subagents a level down.
pub(super) fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(projects) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = projects
        .flatten()
        .flat_map(|p| {
            super::files_below(&p.path().join("chats"), 2, &|n| {
                n.ends_with(".jsonl") || (n.starts_with("session-") && n.ends_with(".json"))
            })
        })
        .collect();
    out.sort();
    out
}

/// Whether `path` is a chat kept as one JSON document (the older form).
pub(super) fn is_document(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

/// The project directory a chat file belongs to (see the module's notes).
fn project_root(chat: &Path) -> Option<String> {
    let project = chat
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "chats"))?
        .parent()?;
    if let Ok(text) = std::fs::read_to_string(project.join(".project_root")) {
        let text = text.trim();
        if !text.is_empty() {
            return Some(text.to_string());
        }
    }
    let folder = project.file_name()?.to_str()?;
    // `~/.gemini/tmp/<project>`: the list is `~/.gemini/projects.json`.
    let listed = project.parent()?.parent()?.join("projects.json");
    // A regular file of at most 1 MiB, opened without waiting on a FIFO: the model may be
    // able to write it.
    let list: Value = serde_json::from_str(&state_dir::read_own_input(&listed).ok()?.text).ok()?;
    list.get("projects")?
        .as_object()?
        .iter()
        .find(|(path, slug)| {
            slug.as_str() == Some(folder) || hex(&sha2::Sha256::digest(path.as_bytes())) == folder
        })
        .map(|(path, _)| path.clone())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// The directory from `.project_root`, known before the first line.
    cwd: Option<String>,
    started: bool,
}

impl State {
    /// A parser for the chat file `path`.
    pub(super) fn for_file(path: &Path) -> State {
        State {
            cwd: project_root(path),
            started: false,
        }
    }
}

impl State {
    /// A chat in the older form: the document's own fields as the first line, then each of
    /// its messages.
    pub(super) fn document(&mut self, doc: &Value, out: &mut Vec<Item>) {
        let Some(fields) = doc.as_object() else {
            return;
        };
        let head: serde_json::Map<String, Value> = fields
            .iter()
            .filter(|(k, _)| k.as_str() != "messages")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.line(&Value::Object(head), out);
        for message in fields
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.line(message, out);
        }
    }

    pub(super) fn line(&mut self, v: &Value, out: &mut Vec<Item>) {
        if let Some(id) = s(v, "$rewindTo") {
            out.push(Item::Rewind(id.to_string()));
            return;
        }
        if v.get("$set").is_some() {
            return;
        }
        let ts = s(v, "timestamp")
            .or_else(|| s(v, "startTime"))
            .and_then(parse_time)
            .unwrap_or(0);
        if !self.started && v.get("sessionId").is_some() && v.get("type").is_none() {
            self.started = true;
            let cwd = self.cwd.clone().or_else(|| {
                v.get("directories")
                    .and_then(Value::as_array)
                    .and_then(|d| d.first())
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            out.push(Item::Meta {
                cwd,
                ts_ms: Some(ts),
            });
            return;
        }
        let Some(id) = s(v, "id") else { return };
        let text = content_text(v.get("content").unwrap_or(&Value::Null));
        let kind = match s(v, "type").unwrap_or("") {
            "user" => Kind::User,
            "gemini" => Kind::Assistant,
            "error" => Kind::Error,
            "info" | "warning" => Kind::Context,
            _ => return,
        };
        if !text.is_empty() {
            let mut e = NewEntry::new(ts, kind, text);
            e.msg_key = Some(id.to_string());
            out.push(Item::Entry {
                entry: e,
                append: false,
            });
        }
        for call in v
            .get("toolCalls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let call_id = s(call, "id").unwrap_or(id).to_string();
            let call_ts = s(call, "timestamp").and_then(parse_time).unwrap_or(ts);
            let mut e = NewEntry::new(
                call_ts,
                Kind::Tool,
                call.get("args").map(Value::to_string).unwrap_or_default(),
            );
            e.name = s(call, "name").map(str::to_string);
            e.call_id = Some(call_id.clone());
            e.msg_key = Some(format!("call:{call_id}"));
            out.push(Item::Entry {
                entry: e,
                append: false,
            });
            let result = match call.get("resultDisplay") {
                Some(Value::String(d)) => d.clone(),
                _ => match call.get("result") {
                    Some(Value::String(r)) => r.clone(),
                    Some(Value::Null) | None => continue,
                    Some(other) => other.to_string(),
                },
            };
            let mut r = NewEntry::new(call_ts, Kind::Result, result);
            r.call_id = Some(call_id.clone());
            r.msg_key = Some(format!("result:{call_id}"));
            r.failed = matches!(s(call, "status"), Some("error" | "cancelled"));
            out.push(Item::Entry {
                entry: r,
                append: false,
            });
        }
    }
}
