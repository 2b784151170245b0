//! `file` (seed 001): a batch of guarded edits, writes and deletes.
//!
//! The whole batch is planned before the first change: every query's fields, its path
//! (through the path policy, one query per file), its permission, and for an edit the new
//! contents, computed in memory. Then the changes run in order; the first that fails stops
//! the batch, and the answer says what was done. A byte-order mark and the file's line
//! endings are kept; an edit by line numbers needs the file unchanged since gantry last
//! showed or wrote it.

use std::path::PathBuf;
use std::sync::Arc;

use generated::files::{FileArgs, FileOperation, FileOutput, limits};
use generated::types::{FileChange, FileChangeType, FileQuery, FileQueryType};
use tool_api::{CallContext, ErrorCode, Reply, ToolError};

use crate::ops::fs::{self, WritePermit};
use crate::ops::path_policy::{Kind, Resolved, Roots};
use crate::read_state::ReadState;

/// One query, checked and ready to run.
struct Planned {
    index: usize,
    path: String,
    kind: FileChangeType,
    step: Step,
    added: i64,
    removed: i64,
}

enum Step {
    Write {
        target: WritePermit,
        contents: Vec<u8>,
        mode: Option<u32>,
        /// The version the plan was made on: the file must still be it when written.
        expected: Option<fs::Version>,
    },
    RemoveFile(WritePermit),
    RemoveLink(WritePermit),
}

fn at(i: usize, path: &str, e: ToolError) -> ToolError {
    ToolError::new(e.code, format!("queries[{i}] ({path}): {}", e.message))
}

fn invalid(msg: impl Into<String>) -> ToolError {
    ToolError::invalid_input(msg)
}

/// A file's text as the model sees it, and how to put it back as it was written.
struct Text {
    bom: bool,
    crlf: bool,
    body: String,
}

impl Text {
    fn decode(bytes: &[u8]) -> Result<Text, ToolError> {
        let (bom, body) = match bytes.strip_prefix(b"\xef\xbb\xbf") {
            Some(rest) => (true, rest),
            None => (false, bytes),
        };
        let body = std::str::from_utf8(body)
            .ok()
            .filter(|t| !t.contains('\0'))
            .ok_or_else(|| invalid("not UTF-8 text; `file` edits text files only"))?;
        // The file's own convention: CRLF when most of its line ends are.
        let crlf_count = body.matches("\r\n").count();
        let lf_count = body.matches('\n').count();
        Ok(Text {
            bom,
            crlf: crlf_count > 0 && crlf_count * 2 >= lf_count,
            body: body.to_string(),
        })
    }

    /// `s` in this file's line endings.
    fn native(&self, s: &str) -> String {
        let lf = s.replace("\r\n", "\n");
        if self.crlf {
            lf.replace('\n', "\r\n")
        } else {
            lf
        }
    }

    fn encode(&self, body: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(body.len() + 3);
        if self.bom {
            out.extend_from_slice(b"\xef\xbb\xbf");
        }
        out.extend_from_slice(body.as_bytes());
        out
    }
}

fn count_lines(s: &str) -> i64 {
    s.lines().count() as i64
}

struct Planner<'a> {
    roots: &'a Roots,
    cx: &'a CallContext,
    seen: &'a ReadState,
    paths: Vec<(PathBuf, usize)>,
    held: Vec<tool_api::memory::Held<'static>>,
}

impl Planner<'_> {
    fn permit(&self, op: FileOperation, target: Resolved) -> Result<WritePermit, ToolError> {
        WritePermit::authorize(self.cx, op.write_action(), target).map_err(|e| {
            if e.code == ErrorCode::PathNotAllowed {
                ToolError::new(
                    e.code,
                    format!("{} ({} approved root(s))", e.message, self.roots.len()),
                )
            } else {
                e
            }
        })
    }

    fn claim(&mut self, i: usize, target: &Resolved) -> Result<(), ToolError> {
        if let Some((_, j)) = self.paths.iter().find(|(p, _)| *p == target.path) {
            return Err(invalid(format!(
                "the same file as queries[{j}]; put each file's changes in one query"
            )));
        }
        self.paths.push((target.path.clone(), i));
        Ok(())
    }

    fn read(&mut self, target: &WritePermit) -> Result<(Text, u32, fs::Version), ToolError> {
        let max = limits::file::MAX_FILE.get();
        // One batch holds at most half the memory ceiling: past that it would wait on room
        // only its own end could free, and keep every other call out meanwhile.
        let holding: u64 = self.held.iter().map(tool_api::memory::Held::amount).sum();
        if holding > tool_api::memory::HEAVY_BYTES / 2 {
            return Err(ToolError::new(
                ErrorCode::OutputLimit,
                format!(
                    "the batch's files need more than {} MiB of memory together; split the batch",
                    (tool_api::memory::HEAVY_BYTES / 2) >> 20
                ),
            ));
        }
        let version = fs::version(target.target()).map_err(|e| ToolError::os("cannot open", &e))?;
        let whole = fs::read_all(target.target(), max, 3).map_err(|e| match e.kind() {
            std::io::ErrorKind::FileTooLarge => ToolError::new(
                ErrorCode::OutputLimit,
                format!(
                    "larger than {}; edit it with a command",
                    limits::file::MAX_FILE
                ),
            ),
            std::io::ErrorKind::ResourceBusy => ToolError::new(
                ErrorCode::Busy,
                "the server is at its memory ceiling; split the batch or retry shortly",
            ),
            _ => ToolError::os("cannot read", &e),
        })?;
        let text = Text::decode(&whole.bytes)?;
        let mode = whole.mode;
        self.held.push(whole.held);
        Ok((text, mode, version))
    }

    fn plan(&mut self, i: usize, q: FileQuery) -> Result<Planned, ToolError> {
        if q.reasoning.trim().is_empty() {
            return Err(invalid("reasoning: say why, in one sentence"));
        }
        let (edit_fields, write_fields) = (
            q.old_text.is_some()
                || q.new_text.is_some()
                || q.start_line.is_some()
                || q.end_line.is_some(),
            q.content.is_some(),
        );
        match q.r#type {
            FileQueryType::Edit if write_fields => {
                return Err(invalid(
                    "`content` belongs to write; an edit takes new_text",
                ));
            }
            FileQueryType::Write if edit_fields => {
                return Err(invalid("a write takes `content` only; edit with type edit"));
            }
            FileQueryType::Delete if edit_fields || write_fields => {
                return Err(invalid("a delete takes only `path`"));
            }
            _ => {}
        }
        let resolved = if q.r#type == FileQueryType::Delete {
            self.roots.resolve_entry(&q.path, None)?
        } else {
            self.roots.resolve(&q.path, None)?
        };
        self.claim(i, &resolved)?;
        match q.r#type {
            FileQueryType::Delete => self.plan_delete(i, q.path, resolved),
            FileQueryType::Write => self.plan_write(i, q, resolved),
            FileQueryType::Edit => self.plan_edit(i, q, resolved),
        }
    }

    fn plan_delete(
        &mut self,
        index: usize,
        path: String,
        target: Resolved,
    ) -> Result<Planned, ToolError> {
        // Decided before anything is said about what is there.
        let kind = target.kind;
        let permit = self.permit(FileOperation::Delete, target)?;
        let step = match kind {
            Kind::File => Step::RemoveFile(permit),
            Kind::Link => Step::RemoveLink(permit),
            Kind::Missing => {
                return Err(ToolError::new(
                    ErrorCode::NotFound,
                    "no such file to delete",
                ));
            }
            Kind::Dir => return Err(invalid("is a directory; `file` never deletes directories")),
            Kind::Special => {
                return Err(ToolError::new(
                    ErrorCode::PathNotAllowed,
                    "not a regular file",
                ));
            }
        };
        Ok(Planned {
            index,
            path,
            kind: FileChangeType::Delete,
            step,
            added: 0,
            removed: 0,
        })
    }

    fn plan_write(
        &mut self,
        index: usize,
        q: FileQuery,
        target: Resolved,
    ) -> Result<Planned, ToolError> {
        let content = q
            .content
            .ok_or_else(|| invalid("a write needs `content`"))?;
        let kind = target.kind;
        let op = if kind == Kind::Missing {
            FileOperation::Create
        } else {
            FileOperation::Edit
        };
        let permit = self.permit(op, target)?;
        let (contents, mode, removed, expected) = match kind {
            Kind::Missing => (content.into_bytes(), None, 0, None),
            Kind::File => {
                // Replacing a file keeps its byte-order mark and its line endings.
                let (old, mode, version) = self.read(&permit)?;
                let body = old.native(&content);
                (
                    old.encode(&body),
                    Some(mode).filter(|m| *m != 0),
                    count_lines(&old.body),
                    Some(version),
                )
            }
            Kind::Dir => return Err(invalid("is a directory")),
            Kind::Special | Kind::Link => {
                return Err(ToolError::new(
                    ErrorCode::PathNotAllowed,
                    "not a regular file",
                ));
            }
        };
        let added = count_lines(&String::from_utf8_lossy(&contents));
        Ok(Planned {
            index,
            path: q.path,
            kind: FileChangeType::Write,
            step: Step::Write {
                target: permit,
                contents,
                mode,
                expected,
            },
            added,
            removed,
        })
    }

    fn plan_edit(
        &mut self,
        index: usize,
        q: FileQuery,
        target: Resolved,
    ) -> Result<Planned, ToolError> {
        let new_text = q
            .new_text
            .ok_or_else(|| invalid("an edit needs `new_text`"))?;
        let kind = target.kind;
        let permit = self.permit(FileOperation::Edit, target)?;
        match kind {
            Kind::File => {}
            Kind::Missing => {
                return Err(ToolError::new(
                    ErrorCode::NotFound,
                    "no such file to edit; create it with type write",
                ));
            }
            Kind::Dir => return Err(invalid("is a directory")),
            Kind::Special | Kind::Link => {
                return Err(ToolError::new(
                    ErrorCode::PathNotAllowed,
                    "not a regular file",
                ));
            }
        }
        let (text, mode, version) = self.read(&permit)?;
        let (body, added, removed) = match (q.old_text, q.start_line) {
            (Some(old), None) => {
                if q.end_line.is_some() {
                    return Err(invalid("end_line goes with start_line, not old_text"));
                }
                let old = text.native(&old);
                if old.is_empty() {
                    return Err(invalid("old_text is empty; name the text to replace"));
                }
                let new = text.native(&new_text);
                match text.body.matches(old.as_str()).count() {
                    0 => {
                        return Err(ToolError::new(
                            ErrorCode::PatchMismatch,
                            "old_text is not in the file (it must match exactly, whitespace included)",
                        ));
                    }
                    1 => {}
                    n => {
                        return Err(ToolError::new(
                            ErrorCode::PatchMismatch,
                            format!(
                                "old_text occurs {n} times; add lines around it so it occurs once"
                            ),
                        ));
                    }
                }
                (
                    text.body.replacen(old.as_str(), &new, 1),
                    count_lines(&new),
                    count_lines(&old),
                )
            }
            (None, Some(start)) => {
                // Line numbers come from a look at the file: it must not have changed since.
                match self.seen.last(&permit.path) {
                    None => {
                        return Err(ToolError::new(
                            ErrorCode::Stale,
                            "gantry has not shown you this file since it last changed; read it, then edit by lines (or by old_text)",
                        ));
                    }
                    Some(v) if v != version => {
                        return Err(ToolError::new(
                            ErrorCode::Stale,
                            "the file changed since gantry last showed or wrote it; read it again before editing by lines",
                        ));
                    }
                    Some(_) => {}
                }
                let end = q.end_line.unwrap_or(start);
                replace_lines(&text, start, end, &new_text)?
            }
            (Some(_), Some(_)) => return Err(invalid("give old_text or start_line, not both")),
            (None, None) => return Err(invalid("an edit needs old_text or start_line")),
        };
        Ok(Planned {
            index,
            path: q.path,
            kind: FileChangeType::Edit,
            step: Step::Write {
                contents: text.encode(&body),
                target: permit,
                mode: Some(mode).filter(|m| *m != 0),
                expected: Some(version),
            },
            added,
            removed,
        })
    }
}

/// `text` with lines `start..=end` (1-based) replaced by `new_text`, in the file's line
/// endings; the last replaced line's ending is kept.
fn replace_lines(
    text: &Text,
    start: i64,
    end: i64,
    new_text: &str,
) -> Result<(String, i64, i64), ToolError> {
    let lines: Vec<&str> = text.body.split_inclusive('\n').collect();
    let total = lines.len() as i64;
    if end < start {
        return Err(invalid(format!(
            "end_line {end} is before start_line {start}"
        )));
    }
    if start > total.max(1) || end > total {
        return Err(invalid(format!(
            "lines {start}-{end}: the file has {total} line(s)"
        )));
    }
    let (s, e) = (
        usize::try_from(start - 1).unwrap_or(0),
        usize::try_from(end).unwrap_or(0),
    );
    let mut new = text.native(new_text);
    let ending = if text.crlf { "\r\n" } else { "\n" };
    let last_had_ending = lines
        .get(e.saturating_sub(1))
        .is_some_and(|l| l.ends_with('\n'));
    if last_had_ending && !new.is_empty() && !new.ends_with('\n') {
        new.push_str(ending);
    }
    let mut body = String::with_capacity(text.body.len() + new.len());
    lines[..s].iter().for_each(|l| body.push_str(l));
    body.push_str(&new);
    lines[e.min(lines.len())..]
        .iter()
        .for_each(|l| body.push_str(l));
    Ok((body, count_lines(&new), end - start + 1))
}

fn run_step(step: &Step) -> Result<(), ToolError> {
    match step {
        Step::Write {
            target,
            contents,
            mode,
            expected,
        } => {
            // Between the plan and now, another writer must not have changed it, nor made
            // what the plan found missing (checked by the write itself, so no window).
            let Some(v) = expected else {
                return fs::write_new(target, contents).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        ToolError::new(
                            ErrorCode::Stale,
                            "created by someone else while the batch ran; not replaced",
                        )
                    } else {
                        ToolError::os("write failed", &e)
                    }
                });
            };
            let now = fs::version(target.target()).map_err(|e| ToolError::os("cannot open", &e))?;
            if now != *v {
                return Err(ToolError::new(
                    ErrorCode::Stale,
                    "changed while the batch ran; nothing of it was written",
                ));
            }
            fs::write_atomic(target, contents, *mode).map_err(|e| ToolError::os("write failed", &e))
        }
        Step::RemoveFile(target) => {
            fs::remove_file(target).map_err(|e| ToolError::os("delete failed", &e))
        }
        Step::RemoveLink(target) => {
            fs::remove_link(target).map_err(|e| ToolError::os("delete failed", &e))
        }
    }
}

fn change(p: &Planned, ok: bool, error: Option<ErrorCode>) -> FileChange {
    FileChange {
        index: p.index as i64,
        path: p.path.clone(),
        r#type: p.kind,
        ok,
        added: ok.then_some(p.added),
        removed: ok.then_some(p.removed),
        error_code: error.map(|c| c.as_str().to_string()),
    }
}

/// Plans the whole batch, then runs it in order up to the first failure.
pub(super) fn run(
    roots: &Roots,
    cx: &CallContext,
    seen: &Arc<ReadState>,
    args: FileArgs,
) -> Result<Reply<FileOutput>, ToolError> {
    let mut planner = Planner {
        roots,
        cx,
        seen,
        paths: Vec::new(),
        held: Vec::new(),
    };
    let mut plan = Vec::with_capacity(args.queries.len());
    for (i, q) in args.queries.into_iter().enumerate() {
        let path = q.path.clone();
        plan.push(planner.plan(i, q).map_err(|e| {
            let e = at(i, &path, e);
            ToolError::new(e.code, format!("{}; nothing was changed", e.message))
        })?);
    }
    let mut changes = Vec::with_capacity(plan.len());
    let mut text = String::new();
    let mut failure = None;
    for p in &plan {
        match run_step(&p.step) {
            Ok(()) => {
                match &p.step {
                    Step::Write { target, .. } => {
                        if let Ok(v) = fs::version(target.target()) {
                            seen.saw(&target.path, v);
                        }
                    }
                    Step::RemoveFile(t) | Step::RemoveLink(t) => seen.forget(&t.path),
                }
                let path = super::printable(&p.path);
                text.push_str(&match p.kind {
                    FileChangeType::Edit => {
                        format!("{}. edited {path} (+{} -{})\n", p.index, p.added, p.removed)
                    }
                    FileChangeType::Write => {
                        format!("{}. wrote {path} (+{} -{})\n", p.index, p.added, p.removed)
                    }
                    FileChangeType::Delete => format!("{}. deleted {path}\n", p.index),
                });
                changes.push(change(p, true, None));
            }
            Err(e) => {
                text.push_str(&format!(
                    "{}. FAILED {}: {}: {}\n",
                    p.index,
                    super::printable(&p.path),
                    e.code.as_str(),
                    e.message
                ));
                changes.push(change(p, false, Some(e.code)));
                failure = Some((p.index, e.code));
                break;
            }
        }
    }
    let done = changes.iter().filter(|c| c.ok).count();
    if let Some((i, code)) = failure {
        let left = plan.len() - i - 1;
        text.push_str(&format!(
            "Stopped at query {i}: {done} of {} done (kept), {left} not run.",
            plan.len()
        ));
        // An error, so the client and the model see the batch did not complete; the
        // message is the whole report.
        return Err(ToolError::new(code, text));
    } else {
        text.push_str(&format!("All {done} done.\n"));
    }
    Ok(Reply::rendered(
        FileOutput {
            done: done as i64,
            changes,
        },
        text,
    ))
}
