//! `read`: many paths in one call, whole files by default, bounded per file and per call.

use generated::core::{ReadArgs, ReadOutput, actions, limits};
use generated::types::{ReadEntry, ReadEntryKind};
use tool_api::{CallContext, Content, ErrorCode, Reply, ToolError};

use crate::ops::fs::{self, Loaded};
use crate::ops::path_policy::{Kind, Resolved, Roots};
use crate::ops::{image, search};

struct Request {
    path: String,
    start: u64,
    end: Option<u64>,
}

/// What one path produced: the facts programs get, and what the model reads.
struct Item {
    facts: ReadEntry,
    /// The file's text or the directory's listing, verbatim.
    body: Option<String>,
    /// What was cut or went wrong, and what to do about it.
    note: Option<String>,
}

fn entry(path: &str, kind: ReadEntryKind) -> Item {
    Item {
        facts: ReadEntry {
            path: path.to_string(),
            kind,
            start_line: None,
            end_line: None,
            total_lines: None,
            next_start_line: None,
            size: None,
            mime: None,
            entries: None,
            error_code: None,
        },
        body: None,
        note: None,
    }
}

fn error_entry(path: &str, e: &ToolError) -> Item {
    let mut item = entry(path, ReadEntryKind::Error);
    item.facts.error_code = Some(e.code.as_str().to_string());
    item.note = Some(e.message.clone());
    item
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Whether a `read` is small enough to run on the async thread itself: at most a few whole
/// paths, no glob, no line range (one deep in a huge file reads up to it) and nothing named
/// like an image (decoding waits for its turn). What is left is bounded: a directory
/// listing, or a file cut at its per-file cap.
pub(super) fn is_quick(args: &ReadArgs) -> bool {
    let paths = args.paths.as_deref().unwrap_or_default();
    args.ranges.as_deref().unwrap_or_default().is_empty()
        && paths.len() <= 4
        && !paths
            .iter()
            .any(|p| search::is_glob(p) || image::looks_like_image(p))
}

/// Expands globs into the paths they match (bounded), keeping plain paths as they are.
fn expand(
    roots: &Roots,
    cx: &CallContext,
    requests: Vec<Request>,
    notes: &mut Vec<String>,
    entries: &mut Vec<Item>,
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

/// A command's spill file, named by the connector whose command wrote it: authorized as what
/// it is, the output of that session (the rest of the state directory stays out of reach).
/// `None` for any other path, which the path policy decides.
fn authorize_spill(
    outputs: &terminal::Registry,
    cx: &CallContext,
    given: &str,
) -> Option<Result<tool_api::Authorized<Resolved>, ToolError>> {
    let path = std::path::Path::new(given);
    if !confine::path_policy::is_below(outputs.spill_dir(), path) {
        return None;
    }
    // Only a path recorded exactly as a reply named it: no `..`, no other file.
    let id = outputs.spill_of(&cx.owner(), path)?;
    let output = Resolved {
        given: given.to_string(),
        path: path.to_path_buf(),
        inside_root: false,
        // Opened below the spill directory, one component at a time, never through a link.
        root: Some(outputs.spill_dir().to_path_buf()),
        gantry_owned: false,
        client_launch: false,
        client_launch_dir: false,
        kind: Kind::File,
    };
    let session = generated::resources::Session { id: id.to_string() };
    Some(cx.authorize(actions::READ, &session, output))
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
    outputs: &terminal::Registry,
    seen: &crate::read_state::ReadState,
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
    // Empty lists pass the schema's "at least one of" (both fields are present): a call that
    // asks for nothing is refused like one that names no field, not answered with nothing.
    if requests.is_empty() {
        return Err(ToolError::invalid_input(
            "give at least one path in `paths` or `ranges`",
        ));
    }

    let mut entries = Vec::with_capacity(requests.len());
    let mut notes = Vec::new();
    let mut images = Vec::new();
    let (requests, mut truncated) = expand(roots, cx, requests, &mut notes, &mut entries);
    for req in requests {
        let target = match authorize_spill(outputs, cx, &req.path)
            .unwrap_or_else(|| authorize_path(roots, cx, &req.path))
        {
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
            Kind::Special | Kind::Link => entries.push(error_entry(
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
                    e.facts.entries = Some(clamp(list.len() as u64));
                    e.body = Some(listing(&list));
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
                    e.facts.error_code = Some(ErrorCode::OutputLimit.as_str().to_string());
                    e.note = Some(format!(
                        "not read: this call already returned its {}; read it with paths [{}] in another call",
                        limits::read::MAX_TOTAL,
                        quoted(&req.path)
                    ));
                    entries.push(e);
                    continue;
                }
                let budget = per_file.min(remaining);
                match fs::read_text(&target, req.start, req.end, budget) {
                    Ok(Loaded::Text(slice)) => {
                        if let Some(v) = slice.version {
                            seen.saw(&target.path, v);
                        }
                        remaining = remaining.saturating_sub(slice.text.len());
                        let mut e = entry(&req.path, ReadEntryKind::Text);
                        if let Some(next) = slice.next_start_line {
                            truncated = true;
                            let why = if budget < per_file {
                                format!("the call's {}", limits::read::MAX_TOTAL)
                            } else {
                                format!("the {} per-file cap", limits::read::MAX_FILE)
                            };
                            let how = format!(
                                "read on with ranges [{{\"path\": {}, \"start_line\": {next}}}]",
                                quoted(&req.path)
                            );
                            e.note = Some(slice.note.map_or_else(
                                || format!("cut at {why}; {how}"),
                                |n| format!("{n}; {how}"),
                            ));
                        } else {
                            e.note = slice.note;
                        }
                        e.facts.start_line = Some(clamp(slice.start_line));
                        e.facts.end_line = Some(clamp(slice.end_line));
                        e.facts.total_lines = slice.total_lines.map(clamp);
                        e.facts.next_start_line = slice.next_start_line.map(clamp);
                        e.body = Some(slice.text);
                        entries.push(e);
                    }
                    Ok(Loaded::Binary { size, mime })
                        if mime.is_some_and(|m| m.starts_with("image/")) =>
                    {
                        let mut e = entry(&req.path, ReadEntryKind::Image);
                        e.facts.size = Some(clamp(size));
                        e.facts.mime = mime.map(str::to_string);
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
                                e.facts.error_code = Some(err.code.as_str().to_string());
                                e.note = Some(err.message);
                            }
                        }
                        entries.push(e);
                    }
                    Ok(Loaded::Binary { size, mime }) => {
                        let mut e = entry(&req.path, ReadEntryKind::Binary);
                        e.facts.size = Some(clamp(size));
                        e.facts.mime = mime.map(str::to_string);
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
    let text = render(&entries, &notes);
    // Nothing succeeded when every path ended in an error; a path that was only left for
    // another call (the call's cap) still counts as an error here only if nothing was read.
    let failed = !entries.is_empty()
        && entries
            .iter()
            .all(|e| e.facts.kind == ReadEntryKind::Error || e.facts.error_code.is_some());
    let output = ReadOutput {
        entries: entries.into_iter().map(|e| e.facts).collect(),
        truncated,
    };
    let mut reply = Reply::rendered(output, text);
    reply.extra = images;
    reply.failed = failed;
    Ok(reply)
}

/// A path as a JSON string, for a call the model can copy.
fn quoted(path: &str) -> String {
    serde_json::Value::from(path).to_string()
}

/// A directory's entries, one a line: `name/` for a directory, `name@` for a symlink, then size
/// and modification time for files.
fn listing(list: &[fs::Entry]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(list.len() * 48);
    for d in list {
        let mark = match d.kind {
            Kind::Dir => "/",
            Kind::Link => "@",
            Kind::File => "",
            Kind::Special | Kind::Missing => "?",
        };
        let _ = write!(out, "{}{mark}", super::printable(&d.name));
        if let Some(size) = d.size.filter(|_| d.kind == Kind::File) {
            let _ = write!(out, "  {size}");
        }
        if let Some(mtime) = &d.mtime {
            let _ = write!(out, "  {mtime}");
        }
        out.push('\n');
    }
    out
}

/// The text the model reads: each file verbatim under a header line, notes in brackets.
/// Models read it far more easily (and in fewer tokens) than file text escaped inside JSON.
fn render(entries: &[Item], notes: &[String]) -> String {
    use std::fmt::Write as _;
    let size: usize = entries
        .iter()
        .map(|e| e.facts.path.len() + e.body.as_ref().map_or(64, String::len) + 64)
        .sum();
    let mut out = String::with_capacity(size);
    for e in entries {
        let f = &e.facts;
        let path = super::printable(&f.path);
        let _ = match f.kind {
            ReadEntryKind::Text => match (f.start_line, f.end_line, f.total_lines) {
                (_, _, Some(0)) => writeln!(out, "==> {} (empty) <==", path),
                (Some(s), Some(l), Some(t)) if l < s => {
                    writeln!(out, "==> {} (no line {s}: {t} lines) <==", path)
                }
                (Some(s), Some(l), Some(t)) => {
                    writeln!(out, "==> {} (lines {s}-{l} of {t}) <==", path)
                }
                (Some(s), Some(l), None) => writeln!(out, "==> {} (lines {s}-{l}) <==", path),
                _ => writeln!(out, "==> {} <==", path),
            },
            ReadEntryKind::Directory => {
                writeln!(out, "==> {}/ (directory) <==", path.trim_end_matches('/'))
            }
            ReadEntryKind::Image => writeln!(out, "==> {} (image) <==", path),
            ReadEntryKind::Binary => writeln!(out, "==> {} (binary) <==", path),
            ReadEntryKind::Error => writeln!(
                out,
                "==> {} (error: {}) <==",
                path,
                f.error_code
                    .as_deref()
                    .unwrap_or(ErrorCode::OsError.as_str())
            ),
        };
        if let Some(body) = &e.body {
            out.push_str(body);
            if !body.is_empty() && !body.ends_with('\n') {
                out.push('\n');
            }
        }
        if let Some(note) = &e.note {
            let _ = writeln!(out, "[{note}]");
        }
    }
    for note in notes {
        let _ = writeln!(out, "[{note}]");
    }
    out
}
