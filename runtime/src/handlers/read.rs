//! `read`: many paths in one call, whole files by default, bounded per file and per call.

use generated::core::{ReadArgs, ReadOutput, actions, limits};
use generated::types::{DirEntry, DirEntryKind, ReadEntry, ReadEntryKind};
use tool_api::{CallContext, ErrorCode, Reply, ToolError};

use crate::ops::fs::{self, Content};
use crate::ops::path_policy::{Kind, Roots};

struct Request {
    path: String,
    start: u64,
    end: Option<u64>,
}

fn entry(path: &str, kind: ReadEntryKind) -> ReadEntry {
    ReadEntry {
        path: path.to_string(),
        kind,
        text: None,
        start_line: None,
        end_line: None,
        total_lines: None,
        next_start_line: None,
        size: None,
        mime: None,
        entries: None,
        error_code: None,
        note: None,
    }
}

fn error_entry(path: &str, e: &ToolError) -> ReadEntry {
    ReadEntry {
        error_code: Some(e.code.as_str().to_string()),
        note: Some(e.message.clone()),
        ..entry(path, ReadEntryKind::Error)
    }
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) fn run(
    roots: &Roots,
    cx: &CallContext,
    args: ReadArgs,
) -> Result<Reply<ReadOutput>, ToolError> {
    let per_file = usize::try_from(limits::read::MAX_FILE_BYTES).unwrap_or(usize::MAX);
    let mut remaining = usize::try_from(limits::read::MAX_TOTAL_BYTES).unwrap_or(usize::MAX);
    let max_entries = usize::try_from(limits::read::MAX_DIR_ENTRIES).unwrap_or(usize::MAX);

    let mut requests: Vec<Request> = args
        .paths
        .unwrap_or_default()
        .into_iter()
        .map(|path| Request {
            path,
            start: 1,
            end: None,
        })
        .collect();
    for r in args.ranges.unwrap_or_default() {
        let start = u64::try_from(r.start_line.unwrap_or(1)).unwrap_or(1);
        let end = r.end_line.and_then(|e| u64::try_from(e).ok());
        if let Some(e) = end
            && e < start
        {
            return Err(ToolError::invalid_input(format!(
                "ranges: `{}` ends (line {e}) before it starts (line {start})",
                r.path
            )));
        }
        requests.push(Request {
            path: r.path,
            start,
            end,
        });
    }

    let mut entries = Vec::with_capacity(requests.len());
    let mut truncated = false;
    for req in requests {
        let resolved = match roots.resolve(&req.path, None) {
            Ok(r) => r,
            Err(e) => {
                entries.push(error_entry(&req.path, &e));
                continue;
            }
        };
        let resource = resolved.resource();
        let target = match cx.authorize(actions::READ, &resource, resolved) {
            Ok(t) => t,
            Err(mut e) => {
                if e.code == ErrorCode::PathNotAllowed {
                    e.message = format!(
                        "{}: {} ({} approved root(s))",
                        req.path,
                        e.message,
                        roots.len()
                    );
                }
                entries.push(error_entry(&req.path, &e));
                continue;
            }
        };
        match target.kind {
            Kind::Missing => entries.push(error_entry(
                &req.path,
                &ToolError::new(
                    ErrorCode::NotFound,
                    format!("{}: no such file or directory", req.path),
                ),
            )),
            Kind::Special => entries.push(error_entry(
                &req.path,
                &ToolError::new(
                    ErrorCode::PathNotAllowed,
                    format!("{}: not a regular file", req.path),
                ),
            )),
            Kind::Dir => match fs::list_dir(&target, max_entries) {
                Ok((list, total)) => {
                    let mut e = entry(&req.path, ReadEntryKind::Directory);
                    if total > list.len() {
                        truncated = true;
                        e.note = Some(format!(
                            "{total} entries; the first {} are listed",
                            list.len()
                        ));
                    }
                    e.entries = Some(
                        list.into_iter()
                            .map(|d| DirEntry {
                                name: d.name,
                                kind: match d.kind {
                                    "file" => DirEntryKind::File,
                                    "dir" => DirEntryKind::Dir,
                                    "symlink" => DirEntryKind::Symlink,
                                    _ => DirEntryKind::Other,
                                },
                                size: d.size.map(clamp),
                                mtime: d.mtime,
                            })
                            .collect(),
                    );
                    entries.push(e);
                }
                Err(err) => entries.push(error_entry(
                    &req.path,
                    &ToolError::os(format!("{}: cannot list", req.path), &err),
                )),
            },
            Kind::File => {
                if remaining == 0 {
                    truncated = true;
                    let mut e = entry(&req.path, ReadEntryKind::Error);
                    e.error_code = Some(ErrorCode::OutputLimit.as_str().to_string());
                    e.note = Some(
                        "not read: this call already returned its 512 KB; read it in another call"
                            .into(),
                    );
                    entries.push(e);
                    continue;
                }
                let budget = per_file.min(remaining);
                match fs::read_text(&target, req.start, req.end, budget) {
                    Ok(Content::Text(slice)) => {
                        remaining = remaining.saturating_sub(slice.text.len());
                        let mut e = entry(&req.path, ReadEntryKind::Text);
                        if let Some(next) = slice.next_start_line {
                            truncated = true;
                            let why = if budget < per_file {
                                "the call's 512 KB"
                            } else {
                                "the 256 KB per-file cap"
                            };
                            e.note = Some(slice.note.map_or_else(
                                || format!("cut at {why}; continue with start_line {next}"),
                                |n| format!("{n}; continue with start_line {next}"),
                            ));
                        } else {
                            e.note = slice.note;
                        }
                        e.start_line = Some(clamp(slice.start_line));
                        e.end_line = Some(clamp(slice.end_line));
                        e.total_lines = slice.total_lines.map(clamp);
                        e.next_start_line = slice.next_start_line.map(clamp);
                        e.text = Some(slice.text);
                        entries.push(e);
                    }
                    Ok(Content::Binary { size, mime }) => {
                        let kind = if mime.is_some_and(|m| m.starts_with("image/")) {
                            ReadEntryKind::Image
                        } else {
                            ReadEntryKind::Binary
                        };
                        let mut e = entry(&req.path, kind);
                        e.size = Some(clamp(size));
                        e.mime = mime.map(str::to_string);
                        e.note = Some(format!(
                            "{} file, {size} bytes; not shown as text",
                            mime.unwrap_or("binary")
                        ));
                        entries.push(e);
                    }
                    Err(err) => entries.push(error_entry(
                        &req.path,
                        &ToolError::os(format!("{}: cannot read", req.path), &err),
                    )),
                }
            }
        }
    }
    Ok(Reply::new(ReadOutput { entries, truncated }))
}
