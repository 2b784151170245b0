//! Codex rollouts: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`, one
//! `{timestamp, type, payload}` line per item; the older shape and the 0.171 one (which adds
//! `ordinal` and `metadata`) read the same way. Messages come from `response_item`s (the
//! `event_msg` copies are skipped); user-role messages Codex injects (environment context,
//! AGENTS.md, instructions) are context, not the user.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Item, content_text, field as s, parse_time};
use crate::store::{Kind, NewEntry};

/// Rollout files below `dir` (and the sibling `archived_sessions`), sorted.
pub(super) fn files(dir: &Path) -> Vec<PathBuf> {
    let rollout = |name: &str| name.starts_with("rollout-") && name.ends_with(".jsonl");
    let mut out = super::files_below(dir, 4, &rollout);
    if let Some(parent) = dir.parent() {
        out.extend(super::files_below(
            &parent.join("archived_sessions"),
            4,
            &rollout,
        ));
    }
    out.sort();
    out
}

/// Prefixes of user-role messages that Codex writes itself.
const INJECTED: &[&str] = &[
    "<environment_context>",
    "# AGENTS.md instructions",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "<turn_aborted>",
    "<user_shell_command>",
    "<skill>",
    "<subagent_notification>",
    "<permissions instructions>",
];

#[derive(Debug, Default)]
pub(super) struct State;

impl State {
    pub(super) fn line(&mut self, v: &Value, out: &mut Vec<Item>) {
        let ts = s(v, "timestamp").and_then(parse_time).unwrap_or(0);
        let Some(p) = v.get("payload") else { return };
        let entry = |kind, text: String| NewEntry::new(ts, kind, text);
        let push = |out: &mut Vec<Item>, entry| {
            out.push(Item::Entry {
                entry,
                append: false,
            })
        };
        match s(v, "type").unwrap_or("") {
            "session_meta" => out.push(Item::Meta {
                cwd: s(p, "cwd").map(str::to_string),
                ts_ms: s(p, "timestamp").and_then(parse_time).or(Some(ts)),
            }),
            "turn_context" => out.push(Item::Meta {
                cwd: s(p, "cwd").map(str::to_string),
                ts_ms: None,
            }),
            "compacted" => push(
                out,
                entry(
                    Kind::Context,
                    format!("compacted: {}", s(p, "message").unwrap_or("")),
                ),
            ),
            "event_msg" => match s(p, "type").unwrap_or("") {
                "error" => push(
                    out,
                    entry(Kind::Error, s(p, "message").unwrap_or("").into()),
                ),
                "thread_rolled_back" => push(
                    out,
                    entry(
                        Kind::Context,
                        format!(
                            "rolled back {} turn(s)",
                            p.get("num_turns").and_then(Value::as_i64).unwrap_or(0)
                        ),
                    ),
                ),
                "thread_name_updated" => {
                    if let Some(name) = s(p, "thread_name").or_else(|| s(p, "name")) {
                        out.push(Item::Title(name.to_string()));
                    }
                }
                _ => {}
            },
            "response_item" => self.item(p, ts, out),
            _ => {}
        }
    }

    fn item(&mut self, p: &Value, ts: i64, out: &mut Vec<Item>) {
        let mut push = |entry: NewEntry| {
            out.push(Item::Entry {
                entry,
                append: false,
            })
        };
        let call_id = s(p, "call_id").map(str::to_string);
        match s(p, "type").unwrap_or("") {
            "message" => {
                let text = content_text(p.get("content").unwrap_or(&Value::Null));
                let kind = match s(p, "role").unwrap_or("") {
                    "assistant" => Kind::Assistant,
                    "user" if !INJECTED.iter().any(|i| text.trim_start().starts_with(i)) => {
                        Kind::User
                    }
                    _ => Kind::Context,
                };
                if !text.is_empty() {
                    let mut e = NewEntry::new(ts, kind, text);
                    e.msg_key = s(p, "id").map(str::to_string);
                    push(e);
                }
            }
            "function_call" | "custom_tool_call" => {
                let mut e = NewEntry::new(
                    ts,
                    Kind::Tool,
                    s(p, "arguments")
                        .or_else(|| s(p, "input"))
                        .unwrap_or("")
                        .to_string(),
                );
                e.name = s(p, "name").map(str::to_string);
                e.call_id = call_id;
                push(e);
            }
            "local_shell_call" => {
                let command = p
                    .pointer("/action/command")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default();
                let mut e = NewEntry::new(ts, Kind::Tool, command);
                e.name = Some("shell".into());
                e.call_id = call_id;
                push(e);
            }
            "web_search_call" => {
                let mut e = NewEntry::new(
                    ts,
                    Kind::Tool,
                    p.pointer("/action/query")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                );
                e.name = Some("web_search".into());
                push(e);
            }
            "function_call_output" | "custom_tool_call_output" => {
                let output = p.get("output").unwrap_or(&Value::Null);
                let text = match output {
                    // The older shape nests `{content, success}`.
                    Value::Object(o) => content_text(o.get("content").unwrap_or(&Value::Null)),
                    other => content_text(other),
                };
                let failed = output.get("success").and_then(Value::as_bool) == Some(false)
                    || exit_code(&text).is_some_and(|c| c != 0);
                let mut e = NewEntry::new(ts, Kind::Result, text);
                e.call_id = call_id;
                e.failed = failed;
                push(e);
            }
            "compaction" => push(NewEntry::new(ts, Kind::Context, "compacted (opaque)")),
            _ => {}
        }
    }
}

/// The exit code in a unified-exec output header (`Process exited with code N`).
fn exit_code(text: &str) -> Option<i64> {
    text.lines()
        .take(6)
        .find_map(|l| l.strip_prefix("Process exited with code "))
        .and_then(|c| c.trim().parse().ok())
}
