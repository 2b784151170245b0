//! Gemini CLI chats: `~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl` (subagents in
//! `chats/<parent id>/`). The first line holds the session's facts; then one record a
//! message (`user`, `gemini` with its `toolCalls`, `info`, `warning`, `error`). A message that
//! changes is appended again under its id (the later one wins: a superseding entry here);
//! `{"$rewindTo": id}` drops that message and everything after it from the conversation
//! (kept here as a side branch); `{"$set": …}` patches metadata and is not needed. The
//! project's directory is in `<project>/.project_root`. The older single-document `.json`
//! chats are not read.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Item, content_text, field as s, parse_time};
use crate::store::{Kind, NewEntry};

/// Chat files below `dir` (`~/.gemini/tmp`): `<project>/chats/`, subagents a level down.
pub(super) fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(projects) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = projects
        .flatten()
        .flat_map(|p| super::files_below(&p.path().join("chats"), 2, &|n| n.ends_with(".jsonl")))
        .collect();
    out.sort();
    out
}

/// The project directory a chat file belongs to, from `<project>/.project_root`.
fn project_root(chat: &Path) -> Option<String> {
    let project = chat
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "chats"))?
        .parent()?;
    let text = std::fs::read_to_string(project.join(".project_root")).ok()?;
    Some(text.trim().to_string()).filter(|t| !t.is_empty())
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
