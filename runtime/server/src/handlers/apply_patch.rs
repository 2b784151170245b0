//! `apply_patch`: a V4A patch, checked whole before the first write.
//!
//! Preflight parses the patch, resolves every path through the path policy, authorizes every
//! file operation on its own (create, edit, move and delete are separate permissions), reads
//! each file to change and applies its chunks in memory. Only when all of that succeeded is
//! anything written: each file atomically (temp file + rename beneath its root), writes
//! before removals, and if the OS fails part-way the files already changed are put back.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use generated::core::{ApplyPatchOperation, actions, limits};
use generated::types::{PatchResult, PatchedFile, PatchedFileOp};
use patch::FileOp;
use tool_api::{
    ActionId, Authorized, CallContext, ErrorCode, Reply, ToolError, TypedAction, Writes,
};

use crate::ops::fs::{self, WritePermit};
use crate::ops::path_policy::{Kind, Resolved, Roots};

/// One write or removal the patch will do, already authorized.
enum Step {
    Write {
        target: WritePermit,
        contents: Vec<u8>,
        mode: Option<u32>,
        before: Option<(Vec<u8>, u32)>,
    },
    Remove {
        target: WritePermit,
        before: Option<(Vec<u8>, u32)>,
    },
}

/// The Cedar actions a connector's patch tool is decided by. Core's operations name the
/// file operations; each connector maps them onto its own actions.
pub(super) struct PatchActions {
    /// The tool's action, asked about the workdir.
    pub tool: ActionId,
    /// Each file operation's action, typed as a write.
    pub write: fn(ApplyPatchOperation) -> TypedAction<Writes>,
    /// Asked before a mismatch quotes a file's lines: whoever may not read the file must not
    /// learn its lines from an edit permission.
    pub quote: ActionId,
}

/// Core's own.
pub(super) const CORE: PatchActions = PatchActions {
    tool: actions::APPLY_PATCH,
    write: ApplyPatchOperation::write_action,
    quote: actions::READ,
};

struct Planner<'a> {
    roots: &'a Roots,
    cx: &'a CallContext,
    actions: &'a PatchActions,
    base: PathBuf,
    seen: Vec<PathBuf>,
    /// Shares of the memory ceiling for the files read, kept until the patch is done.
    held: Vec<tool_api::memory::Held<'static>>,
}

fn nothing_written(e: ToolError) -> ToolError {
    ToolError::new(e.code, format!("{}; nothing was written", e.message))
}

impl Planner<'_> {
    fn resolve(&self, given: &str) -> Result<Resolved, ToolError> {
        self.roots.resolve(given, Some(&self.base))
    }

    /// A refusal naming the path as the patch wrote it.
    fn refused(&self, given: &str, e: ToolError) -> ToolError {
        let roots = if e.code == ErrorCode::PathNotAllowed {
            format!(" ({} approved root(s))", self.roots.len())
        } else {
            String::new()
        };
        ToolError::new(e.code, format!("{given}: {}{roots}", e.message))
    }

    /// Authorizes `op` on `target` as a further condition (no permit to write is made).
    fn authorize(&self, op: ApplyPatchOperation, target: &Resolved) -> Result<(), ToolError> {
        self.cx
            .authorize((self.actions.write)(op).id(), &target.resource(), ())
            .map(drop)
            .map_err(|e| self.refused(&target.given, e))
    }

    /// The permit to write `target` for `op`: the only way a step gets a target.
    fn permit(&self, op: ApplyPatchOperation, target: Resolved) -> Result<WritePermit, ToolError> {
        let given = target.given.clone();
        WritePermit::authorize(self.cx, (self.actions.write)(op), target)
            .map_err(|e| self.refused(&given, e))
    }

    /// One patch may hold at most half the memory ceiling: past that it would wait on room
    /// only its own release could make, and lock every other call out meanwhile.
    fn within_share(&self, path: &str, more: u64) -> Result<(), ToolError> {
        let holding: u64 = self.held.iter().map(tool_api::memory::Held::amount).sum();
        let share = tool_api::memory::HEAVY_BYTES / 2;
        if holding + more > share {
            return Err(ToolError::new(
                ErrorCode::OutputLimit,
                format!(
                    "{path}: the patch's files need more than {} MiB of memory together; split the patch",
                    share >> 20
                ),
            ));
        }
        Ok(())
    }

    fn claim(&mut self, target: &Resolved) -> Result<(), ToolError> {
        if self.seen.contains(&target.path) {
            return Err(ToolError::invalid_input(format!(
                "{}: the patch touches this file twice; merge the changes",
                target.given
            )));
        }
        self.seen.push(target.path.clone());
        Ok(())
    }

    fn read_text(&mut self, target: &Authorized<Resolved>) -> Result<(Vec<u8>, u32), ToolError> {
        // Sized before it is read: a file over the limit is refused without holding it.
        // Held twice over: the contents (kept for rollback) and the edited text.
        match fs::read_all(target, limits::apply_patch::MAX_FILE.get(), 2) {
            Ok(whole) => {
                self.within_share(&target.given, whole.held.amount())?;
                self.held.push(whole.held);
                Ok((whole.bytes, whole.mode))
            }
            Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
                Err(ToolError::invalid_input(format!(
                    "{}: larger than the {} apply_patch edits",
                    target.given,
                    limits::apply_patch::MAX_FILE
                )))
            }
            Err(e) => Err(ToolError::os(format!("{}: cannot read", target.given), &e)),
        }
    }

    /// The current contents of an existing file, for rollback (none for a missing file).
    fn snapshot(
        &mut self,
        target: &Authorized<Resolved>,
    ) -> Result<Option<(Vec<u8>, u32)>, ToolError> {
        if target.kind == Kind::Missing {
            Ok(None)
        } else {
            self.read_text(target).map(Some)
        }
    }

    fn plan(
        &mut self,
        op: &FileOp,
        steps: &mut (Vec<Step>, Vec<Step>),
        report: &mut Vec<PatchedFile>,
    ) -> Result<(), ToolError> {
        match op {
            FileOp::Add { path, contents, .. } => {
                let target = self.resolve(path)?;
                self.claim(&target)?;
                // Decided before anything is said about what is there: outside the roots
                // every path gets the same refusal.
                let target = self.permit(ApplyPatchOperation::Add, target)?;
                if target.kind == Kind::Dir {
                    return Err(ToolError::invalid_input(format!("{path}: is a directory")));
                }
                let exists = target.kind == Kind::File;
                if exists {
                    // Replacing a file's contents is an edit, whatever the header says.
                    self.authorize(ApplyPatchOperation::Update, &target)?;
                }
                let before = self.snapshot(target.target())?;
                let mode = before.as_ref().map(|(_, m)| *m).filter(|m| *m != 0);
                report.push(PatchedFile {
                    path: path.clone(),
                    op: PatchedFileOp::Add,
                    moved_to: None,
                    added: contents.lines().count() as i64,
                    removed: 0,
                });
                steps.0.push(Step::Write {
                    target,
                    contents: contents.clone().into_bytes(),
                    mode,
                    before,
                });
            }
            FileOp::Delete { path, .. } => {
                let target = self.resolve(path)?;
                self.claim(&target)?;
                let target = self.permit(ApplyPatchOperation::Delete, target)?;
                match target.kind {
                    Kind::File => {}
                    Kind::Dir => {
                        return Err(ToolError::invalid_input(format!(
                            "{path}: is a directory; apply_patch never deletes directories"
                        )));
                    }
                    Kind::Missing => {
                        return Err(ToolError::new(
                            ErrorCode::NotFound,
                            format!("{path}: no such file to delete"),
                        ));
                    }
                    Kind::Special | Kind::Link => {
                        return Err(ToolError::new(
                            ErrorCode::PathNotAllowed,
                            format!("{path}: not a regular file"),
                        ));
                    }
                }
                let before = self.snapshot(target.target())?;
                let removed = before.as_ref().map_or(0, |(b, _)| {
                    String::from_utf8_lossy(b).lines().count() as i64
                });
                report.push(PatchedFile {
                    path: path.clone(),
                    op: PatchedFileOp::Delete,
                    moved_to: None,
                    added: 0,
                    removed,
                });
                steps.1.push(Step::Remove { target, before });
            }
            FileOp::Update {
                path,
                move_to,
                chunks,
                ..
            } => {
                let source = self.resolve(path)?;
                self.claim(&source)?;
                let op = if move_to.is_some() {
                    ApplyPatchOperation::Move
                } else {
                    ApplyPatchOperation::Update
                };
                let source = self.permit(op, source)?;
                match source.kind {
                    Kind::File => {}
                    Kind::Missing => {
                        return Err(ToolError::new(
                            ErrorCode::NotFound,
                            format!("{path}: no such file to update"),
                        ));
                    }
                    Kind::Dir => {
                        return Err(ToolError::invalid_input(format!("{path}: is a directory")));
                    }
                    Kind::Special | Kind::Link => {
                        return Err(ToolError::new(
                            ErrorCode::PathNotAllowed,
                            format!("{path}: not a regular file"),
                        ));
                    }
                }
                if move_to.is_some() && !chunks.is_empty() {
                    // Moving and changing lines is an edit as well as a move.
                    self.authorize(ApplyPatchOperation::Update, &source)?;
                }
                let (bytes, mode) = self.read_text(source.target())?;
                // Matching indexes every line (its text, ending and one key per pass): a file
                // of 16 MB of newlines is millions of them, so they are counted in too.
                let lines = bytes.iter().filter(|b| **b == b'\n').count() as u64 + 1;
                let index = lines * patch::BYTES_PER_LINE;
                self.within_share(path, index)?;
                self.held.push(
                    tool_api::memory::HEAVY
                        .take(index, tool_api::memory::WAIT)
                        .map_err(|e| ToolError::new(e.code, format!("{path}: {}", e.message)))?,
                );
                let text = std::str::from_utf8(&bytes).map_err(|_| {
                    ToolError::invalid_input(format!(
                        "{path}: not UTF-8 text; apply_patch does not edit binary files"
                    ))
                })?;
                let updated = patch::apply_update(text, chunks).map_err(|e| {
                    // A mismatch quotes the file only to a caller that may read it: with
                    // `read` off, an edit permission must not become a way to read.
                    let readable = self.cx.permits(self.actions.quote, &source.resource());
                    let e = if readable { e } else { e.without_file_text() };
                    ToolError::new(ErrorCode::PatchMismatch, format!("{path}: {e}"))
                })?;
                let mode = Some(mode).filter(|m| *m != 0);
                match move_to {
                    None => {
                        report.push(PatchedFile {
                            path: path.clone(),
                            op: PatchedFileOp::Update,
                            moved_to: None,
                            added: updated.added as i64,
                            removed: updated.removed as i64,
                        });
                        steps.0.push(Step::Write {
                            target: source,
                            contents: updated.text.into_bytes(),
                            mode,
                            before: Some((bytes, mode.unwrap_or(0))),
                        });
                    }
                    Some(dest_given) => {
                        let dest = self.resolve(dest_given)?;
                        self.claim(&dest)?;
                        let dest = self.permit(ApplyPatchOperation::Move, dest)?;
                        if dest.kind == Kind::Dir || dest.kind == Kind::Special {
                            return Err(ToolError::invalid_input(format!(
                                "{dest_given}: the move destination is not a regular file"
                            )));
                        }
                        let dest_exists = dest.kind == Kind::File;
                        if dest_exists {
                            self.authorize(ApplyPatchOperation::Update, &dest)?;
                        }
                        let dest_before = self.snapshot(dest.target())?;
                        report.push(PatchedFile {
                            path: path.clone(),
                            op: PatchedFileOp::Move,
                            moved_to: Some(dest_given.clone()),
                            added: updated.added as i64,
                            removed: updated.removed as i64,
                        });
                        steps.0.push(Step::Write {
                            target: dest,
                            contents: updated.text.into_bytes(),
                            mode,
                            before: dest_before,
                        });
                        steps.1.push(Step::Remove {
                            target: source,
                            before: Some((bytes, mode.unwrap_or(0))),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

fn run_step(step: &Step) -> std::io::Result<()> {
    match step {
        // A path the plan found missing is created, never replaced: a file another program
        // made there meanwhile stays, and is not the patch's to roll back.
        Step::Write {
            target,
            contents,
            before: None,
            ..
        } => fs::write_new(target, contents),
        Step::Write {
            target,
            contents,
            mode,
            ..
        } => fs::write_atomic(target, contents, *mode),
        Step::Remove { target, .. } => fs::remove_file(target),
    }
}

/// Puts back what `done` changed, newest first; best effort, reports what it could not undo.
fn roll_back(done: &[&Step]) -> Vec<String> {
    let mut failed = Vec::new();
    for step in done.iter().rev() {
        let result = match step {
            Step::Write {
                target,
                before: Some((bytes, mode)),
                ..
            }
            | Step::Remove {
                target,
                before: Some((bytes, mode)),
            } => fs::write_atomic(target, bytes, Some(*mode).filter(|m| *m != 0)),
            Step::Write {
                target,
                before: None,
                ..
            } => fs::remove_file(target),
            Step::Remove { before: None, .. } => Ok(()),
        };
        if result.is_err() {
            let (Step::Write { target, .. } | Step::Remove { target, .. }) = step;
            failed.push(target.given.clone());
        }
    }
    failed
}

/// Checks `patch` whole, then writes it, off the async thread; relative paths start at
/// `workdir` (default: the first root).
pub(super) async fn apply(
    roots: Arc<Roots>,
    cx: &CallContext,
    actions: &'static PatchActions,
    patch: String,
    workdir: Option<String>,
) -> Result<Reply<PatchResult>, ToolError> {
    let cx = cx.clone();
    let (files, text) =
        super::blocking(move || check_and_write(&roots, &cx, actions, &patch, workdir.as_deref()))
            .await??;
    Ok(Reply::rendered(PatchResult { files }, text))
}

/// Returns the files `patch` touched and their rendering.
fn check_and_write(
    roots: &Roots,
    cx: &CallContext,
    actions: &PatchActions,
    patch: &str,
    workdir: Option<&str>,
) -> Result<(Vec<PatchedFile>, String), ToolError> {
    let parsed = patch::parse(patch).map_err(|e| ToolError::invalid_input(format!("patch {e}")))?;
    let base = match workdir {
        None => roots.first().to_path_buf(),
        Some(w) => {
            if !Path::new(w).is_absolute() {
                return Err(ToolError::invalid_input(format!(
                    "workdir: `{w}` must be an absolute path"
                )));
            }
            let dir = roots.resolve(w, None)?;
            let dir = cx
                .authorize(actions.tool, &dir.resource(), dir)
                .map_err(|e| {
                    ToolError::new(
                        e.code,
                        format!(
                            "workdir `{w}`: {} ({} approved root(s))",
                            e.message,
                            roots.len()
                        ),
                    )
                })?;
            if dir.kind != Kind::Dir {
                return Err(ToolError::invalid_input(format!(
                    "workdir: `{w}` is not an existing directory"
                )));
            }
            dir.into_inner().path
        }
    };
    let mut planner = Planner {
        roots,
        cx,
        actions,
        base,
        seen: Vec::new(),
        held: Vec::new(),
    };
    let mut steps = (Vec::new(), Vec::new());
    let mut files = Vec::new();
    for op in &parsed.ops {
        planner
            .plan(op, &mut steps, &mut files)
            .map_err(nothing_written)?;
    }

    // Writes first, removals last, so an interrupted patch never loses a file it moved.
    let ordered: Vec<&Step> = steps.0.iter().chain(steps.1.iter()).collect();
    for (i, step) in ordered.iter().enumerate() {
        if let Err(e) = run_step(step) {
            let (Step::Write { target, .. } | Step::Remove { target, .. }) = step;
            let not_undone = roll_back(&ordered[..i]);
            let tail = if not_undone.is_empty() {
                "every file already changed was restored".to_string()
            } else {
                format!("could not restore: {}", not_undone.join(", "))
            };
            return Err(ToolError::os(
                format!("{}: write failed ({tail})", target.given),
                &e,
            ));
        }
    }
    let text = render(&files);
    Ok((files, text))
}

/// One line per file, as `git status --short` and Codex print them: `M src/a.rs (+4 -1)`.
fn render(files: &[PatchedFile]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for f in files {
        let mark = match f.op {
            PatchedFileOp::Add => "A",
            PatchedFileOp::Update => "M",
            PatchedFileOp::Move => "R",
            PatchedFileOp::Delete => "D",
        };
        let _ = write!(out, "{mark} {}", f.path);
        if let Some(to) = &f.moved_to {
            let _ = write!(out, " -> {to}");
        }
        let _ = match (f.added, f.removed) {
            (0, 0) => writeln!(out),
            (a, 0) => writeln!(out, " (+{a})"),
            (0, r) => writeln!(out, " (-{r})"),
            (a, r) => writeln!(out, " (+{a} -{r})"),
        };
    }
    if files.is_empty() {
        out.push_str("The patch changed nothing.\n");
    }
    out
}
