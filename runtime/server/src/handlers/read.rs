//! `read`: many paths in one call, whole files by default, bounded per file and per call.

use generated::core::{ReadArgs, ReadOutput, actions, limits};
use generated::types::{DirEntry, DirEntryKind, ReadEntry, ReadEntryKind};
use tool_api::{CallContext, Content, ErrorCode, Reply, ToolError};

use crate::ops::fs::{self, Loaded};
use crate::ops::path_policy::{Kind, Resolved, Roots};
use crate::ops::{image, search};

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

/// Whether a `read` is small enough to run on the async worker itself: at most a few paths and
/// no glob (a directory listing or a file cut at 256 KB is still bounded work).
pub(super) fn is_quick(args: &ReadArgs) -> bool {
    let paths = args.paths.as_deref().unwrap_or_default();
    let ranges = args.ranges.as_deref().unwrap_or_default();
    paths.len() + ranges.len() <= 4
        && !paths
            .iter()
            .chain(ranges.iter().map(|r| &r.path))
            .any(|p| search::is_glob(p))
}

/// Expands globs into the paths they match (bounded), keeping plain paths as they are.
fn expand(
    roots: &Roots,
    cx: &CallContext,
    requests: Vec<Request>,
    notes: &mut Vec<String>,
    entries: &mut Vec<ReadEntry>,
) -> (Vec<Request>, bool) {
    let max = limits::read::MAX_GLOB_MATCHES;
    // One budget for every glob of the call: 64 globs over a huge tree must not add up.
    let deadline = std::time::Instant::now() + limits::read::GLOB_TIME_BUDGET.duration();
    let mut out = Vec::new();
    let mut cut = false;
    for req in requests {
        if !search::is_glob(&req.path) {
            out.push(req);
            continue;
        }
        let (base_given, pattern) = search::split_glob(&req.path);
        let base = match authorize_path(roots, cx, &base_given) {
            Ok(b) if b.kind == Kind::Dir => b,
            Ok(_) => {
                entries.push(error_entry(
                    &req.path,
                    &ToolError::new(
                        ErrorCode::NotFound,
                        format!("{}: `{base_given}` is not a directory", req.path),
                    ),
                ));
                continue;
            }
            Err(e) => {
                entries.push(error_entry(&req.path, &e));
                continue;
            }
        };
        match search::expand_glob(&base, &pattern, max, roots.gantry_files(), deadline) {
            Ok(search::Expanded {
                paths: matches,
                total,
                timed_out,
                unreadable: (unreadable, first_error),
            }) => {
                if unreadable > 0 {
                    cut = true;
                    notes.push(format!(
                        "`{}`: {unreadable} director(ies) could not be read (first: {})",
                        req.path,
                        first_error.as_deref().unwrap_or("unknown")
                    ));
                }
                if timed_out {
                    cut = true;
                    notes.push(format!(
                        "`{}`: globs stopped after {}; name a narrower directory",
                        req.path,
                        limits::read::GLOB_TIME_BUDGET
                    ));
                }
                if matches.is_empty() {
                    entries.push(error_entry(
                        &req.path,
                        &ToolError::new(
                            ErrorCode::NotFound,
                            format!("{}: the glob matched no file", req.path),
                        ),
                    ));
                }
                if total > matches.len() {
                    cut = true;
                    notes.push(format!(
                        "`{}` matched {total} files; the first {} (by name) are read",
                        req.path,
                        matches.len()
                    ));
                }
                for rel in matches {
                    let path = if base_given == "." {
                        rel
                    } else {
                        format!("{}/{rel}", base_given.trim_end_matches('/'))
                    };
                    out.push(Request {
                        path,
                        start: req.start,
                        end: req.end,
                    });
                }
            }
            Err(e) => entries.push(error_entry(&req.path, &e)),
        }
    }
    (out, cut)
}

/// Resolves and authorizes one path for `read`; errors name the path as given.
fn authorize_path(
    roots: &Roots,
    cx: &CallContext,
    given: &str,
) -> Result<tool_api::Authorized<Resolved>, ToolError> {
    let resolved = roots.resolve(given, None)?;
    let resource = resolved.resource();
    cx.authorize(actions::READ, &resource, resolved)
        .map_err(|mut e| {
            if e.code == ErrorCode::PathNotAllowed {
                e.message = format!("{given}: {} ({} approved root(s))", e.message, roots.len());
            }
            e
        })
}

pub(super) fn run(
    roots: &Roots,
    cx: &CallContext,
    args: ReadArgs,
) -> Result<Reply<ReadOutput>, ToolError> {
    let per_file = limits::read::MAX_FILE.as_usize();
    let mut remaining = limits::read::MAX_TOTAL.as_usize();
    let max_entries = limits::read::MAX_DIR_ENTRIES;

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
    let mut notes = Vec::new();
    let mut images = Vec::new();
    let (requests, mut truncated) = expand(roots, cx, requests, &mut notes, &mut entries);
    for req in requests {
        let target = match authorize_path(roots, cx, &req.path) {
            Ok(t) => t,
            Err(e) => {
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
                    e.note = Some(format!(
                        "not read: this call already returned its {}; read it in another call",
                        limits::read::MAX_TOTAL
                    ));
                    entries.push(e);
                    continue;
                }
                let budget = per_file.min(remaining);
                match fs::read_text(&target, req.start, req.end, budget) {
                    Ok(Loaded::Text(slice)) => {
                        remaining = remaining.saturating_sub(slice.text.len());
                        let mut e = entry(&req.path, ReadEntryKind::Text);
                        if let Some(next) = slice.next_start_line {
                            truncated = true;
                            let why = if budget < per_file {
                                format!("the call's {}", limits::read::MAX_TOTAL)
                            } else {
                                format!("the {} per-file cap", limits::read::MAX_FILE)
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
                    Ok(Loaded::Binary { size, mime })
                        if mime.is_some_and(|m| m.starts_with("image/")) =>
                    {
                        let mut e = entry(&req.path, ReadEntryKind::Image);
                        e.size = Some(clamp(size));
                        e.mime = mime.map(str::to_string);
                        match image::prepare(&target, super::view_image::bounds()) {
                            Ok(p) if p.data.len() <= remaining => {
                                remaining -= p.data.len();
                                e.note = Some(p.describe(&req.path));
                                images.push(Content::Image {
                                    data: p.data,
                                    mime: p.mime.to_string(),
                                });
                            }
                            Ok(_) => {
                                truncated = true;
                                e.note = Some(format!(
                                    "image not inlined: it would pass this call's {}; use view_image",
                                    limits::read::MAX_TOTAL
                                ));
                            }
                            Err(err) => {
                                e.error_code = Some(err.code.as_str().to_string());
                                e.note = Some(err.message);
                            }
                        }
                        entries.push(e);
                    }
                    Ok(Loaded::Binary { size, mime }) => {
                        let mut e = entry(&req.path, ReadEntryKind::Binary);
                        e.size = Some(clamp(size));
                        e.mime = mime.map(str::to_string);
                        e.note = Some(match mime {
                            Some(m) => format!("{m} file, {size} bytes; not shown as text"),
                            None => {
                                format!("binary or non-UTF-8 file, {size} bytes; not shown as text")
                            }
                        });
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
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    let output = ReadOutput {
        entries,
        truncated,
        note,
    };
    Ok(Reply {
        text: Some(render(&output)),
        output,
        extra: images,
    })
}

/// The text content: the same result as plain text, files verbatim under a header line.
/// Models read it far more easily (and in fewer tokens) than file text escaped inside JSON.
fn render(output: &ReadOutput) -> String {
    use std::fmt::Write as _;
    let size: usize = output
        .entries
        .iter()
        .map(|e| e.path.len() + e.text.as_ref().map_or(64, String::len) + 64)
        .sum();
    let mut out = String::with_capacity(size);
    for e in &output.entries {
        let _ = match e.kind {
            ReadEntryKind::Text => match (e.start_line, e.end_line, e.total_lines) {
                (_, _, Some(0)) => writeln!(out, "==> {} (empty) <==", e.path),
                (Some(s), Some(l), Some(t)) if l < s => {
                    writeln!(out, "==> {} (no line {s}: {t} lines) <==", e.path)
                }
                (Some(s), Some(l), Some(t)) => {
                    writeln!(out, "==> {} (lines {s}-{l} of {t}) <==", e.path)
                }
                (Some(s), Some(l), None) => writeln!(out, "==> {} (lines {s}-{l}) <==", e.path),
                _ => writeln!(out, "==> {} <==", e.path),
            },
            ReadEntryKind::Directory => {
                writeln!(out, "==> {}/ (directory) <==", e.path.trim_end_matches('/'))
            }
            ReadEntryKind::Image => writeln!(out, "==> {} (image) <==", e.path),
            ReadEntryKind::Binary => writeln!(out, "==> {} (binary) <==", e.path),
            ReadEntryKind::Error => writeln!(
                out,
                "==> {} (error: {}) <==",
                e.path,
                e.error_code
                    .as_deref()
                    .unwrap_or(ErrorCode::OsError.as_str())
            ),
        };
        if let Some(text) = &e.text {
            out.push_str(text);
            if !text.is_empty() && !text.ends_with('\n') {
                out.push('\n');
            }
        }
        for d in e.entries.iter().flatten() {
            let (mark, kind) = match d.kind {
                DirEntryKind::Dir => ("/", "dir"),
                DirEntryKind::File => ("", "file"),
                DirEntryKind::Symlink => ("@", "symlink"),
                DirEntryKind::Other => ("", "other"),
            };
            let size = d.size.map_or_else(|| "-".to_string(), |s| s.to_string());
            let _ = writeln!(
                out,
                "{kind:<7} {size:>10}  {}  {}{mark}",
                d.mtime.as_deref().unwrap_or("-"),
                d.name
            );
        }
        if let Some(note) = &e.note {
            let _ = writeln!(out, "[{note}]");
        }
    }
    if let Some(note) = &output.note {
        let _ = writeln!(out, "[{note}]");
    }
    out
}
