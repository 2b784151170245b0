//! Claude Code projects: `~/.claude/projects/<key>/<session id>.jsonl` (and subagents below
//! `<session id>/subagents/`). One line per content block: the blocks of one assistant
//! response share `message.id` and are merged into one entry. Lines form a tree by
//! `parentUuid` (rewinds and edits make side branches; `logicalParentUuid` crosses a
//! compaction): the store keeps both ids and the reader marks what is off the main chain.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Item, content_text, field as s, parse_time};
use crate::store::{Kind, NewEntry};

/// Transcript files below `dir` (subagents' a few levels down), sorted.
pub(super) fn files(dir: &Path) -> Vec<PathBuf> {
    super::files_below(dir, 4, &|name| name.ends_with(".jsonl"))
}

#[derive(Debug, Default)]
pub(super) struct State {
    cwd_seen: bool,
}

impl State {
    pub(super) fn line(&mut self, v: &Value, out: &mut Vec<Item>) {
        let ts = s(v, "timestamp").and_then(parse_time).unwrap_or(0);
        let kind = s(v, "type").unwrap_or("");
        match kind {
            "ai-title" | "custom-title" | "summary" => {
                let t = s(v, "customTitle")
                    .or_else(|| s(v, "aiTitle"))
                    .or_else(|| s(v, "summary"));
                if let Some(t) = t {
                    out.push(Item::Title(t.to_string()));
                }
                return;
            }
            "user" | "assistant" | "system" => {}
            _ => return,
        }
        if !self.cwd_seen
            && let Some(cwd) = s(v, "cwd")
        {
            self.cwd_seen = true;
            out.push(Item::Meta {
                cwd: Some(cwd.to_string()),
                ts_ms: Some(ts),
            });
        }
        let uuid = s(v, "uuid").map(str::to_string);
        let parent = s(v, "parentUuid")
            .or_else(|| s(v, "logicalParentUuid"))
            .map(str::to_string);
        let side = v.get("isSidechain").and_then(Value::as_bool) == Some(true);
        let base = |kind, text: String| {
            let mut e = NewEntry::new(ts, kind, text);
            e.uuid.clone_from(&uuid);
            e.parent.clone_from(&parent);
            e.side = side;
            e
        };
        let mut push = |entry: NewEntry, append: bool| out.push(Item::Entry { entry, append });
        let message = v.get("message").unwrap_or(&Value::Null);
        let content = message.get("content").unwrap_or(&Value::Null);
        match kind {
            "system" => match s(v, "subtype").unwrap_or("") {
                "compact_boundary" => {
                    push(base(Kind::Context, "conversation compacted".into()), false);
                }
                "api_error" => push(
                    base(Kind::Error, s(v, "content").unwrap_or("API error").into()),
                    false,
                ),
                _ => {}
            },
            "user" => {
                let is_meta = v.get("isMeta").and_then(Value::as_bool) == Some(true);
                let summary = v.get("isCompactSummary").and_then(Value::as_bool) == Some(true);
                if let Value::Array(blocks) = content {
                    for b in blocks
                        .iter()
                        .filter(|b| s(b, "type") == Some("tool_result"))
                    {
                        let mut e = base(
                            Kind::Result,
                            content_text(b.get("content").unwrap_or(&Value::Null)),
                        );
                        e.call_id = s(b, "tool_use_id").map(str::to_string);
                        e.failed = b.get("is_error").and_then(Value::as_bool) == Some(true);
                        push(e, false);
                    }
                }
                let text = match content {
                    Value::Array(blocks) => content_text(&Value::Array(
                        blocks
                            .iter()
                            .filter(|b| s(b, "type") != Some("tool_result"))
                            .cloned()
                            .collect(),
                    )),
                    other => content_text(other),
                };
                if !text.is_empty() {
                    let kind = if summary || is_meta {
                        Kind::Context
                    } else {
                        Kind::User
                    };
                    push(base(kind, text), false);
                }
            }
            _ => {
                // One content block a line; text blocks of one response are one entry.
                let id = s(message, "id").map(str::to_string);
                let blocks = content.as_array().cloned().unwrap_or_default();
                for b in blocks {
                    match s(&b, "type").unwrap_or("") {
                        "text" => {
                            let mut e = base(Kind::Assistant, s(&b, "text").unwrap_or("").into());
                            e.msg_key.clone_from(&id);
                            push(e, true);
                        }
                        "tool_use" => {
                            let input = b.get("input").map(Value::to_string).unwrap_or_default();
                            let mut e = base(Kind::Tool, input);
                            e.name = s(&b, "name").map(str::to_string);
                            e.call_id = s(&b, "id").map(str::to_string);
                            push(e, false);
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}
