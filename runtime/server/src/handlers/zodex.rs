//! The Zodex connector (seed 003): Core's command and patch operations under Zodex's shapes,
//! a required `workdir` on every call and a random `session_handle` for a running command.
//! Nothing here runs or writes on its own: commands start through [`super::exec::start`] and
//! patches through [`super::apply_patch::apply`], decided by this connector's Cedar actions.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use generated::resources::Session;
use generated::types::ZodexResult;
use generated::zodex::{
    ApplyPatchArgs, ApplyPatchOperation, ApplyPatchOutput, ExecCommandArgs, WriteStdinArgs,
    ZodexHandlers, actions, limits,
};
use terminal::{Outcome, SpillHint};
use tool_api::{Authorized, CallContext, ErrorCode, Reply, ToolError, TypedAction, Writes};

use super::apply_patch::{self, PatchActions};
use super::exec::{self, CommandRequest, SessionInput, Waits};
use crate::app::LiveRoots;
use crate::ops::fs;
use crate::ops::path_policy::{Kind, Resolved, Roots};

/// Handlers of the Zodex connector.
#[derive(Debug, Clone)]
pub struct ZodexTools {
    roots: Arc<LiveRoots>,
    terminal: Arc<terminal::Registry>,
    handles: Arc<Handles>,
    /// Workdirs whose context was given; `None` when `[zodex] workdir_context` is off.
    told: Option<Arc<Mutex<HashSet<PathBuf>>>>,
}

/// Session handles: random strings standing for Core's numeric session ids, so a handle is a
/// capability that cannot be guessed from another's. The registry still checks that the
/// session is this connector's.
#[derive(Debug, Default)]
struct Handles(Mutex<HashMap<String, u64>>);

impl Handles {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new handle for session `id`; handles of sessions that ended are dropped first once
    /// there are more than the registry could hold.
    fn issue(&self, id: u64, live: impl FnOnce() -> HashSet<u64>) -> Result<String, ToolError> {
        let handle = crate::state_dir::new_secret()
            .map_err(|e| ToolError::os("could not draw a session handle", &e))?;
        let mut map = self.lock();
        if map.len() >= 2 * generated::core::limits::exec_command::MAX_SESSIONS {
            let live = live();
            map.retain(|_, id| live.contains(id));
        }
        map.insert(handle.clone(), id);
        Ok(handle)
    }

    fn get(&self, handle: &str) -> Option<u64> {
        self.lock().get(handle).copied()
    }

    fn forget(&self, handle: &str) {
        self.lock().remove(handle);
    }
}

/// The patch tool's actions: Core's file operations as Zodex's own. A mismatch quotes the
/// file to whoever may run commands there, which can read it anyway.
const PATCH: PatchActions = PatchActions {
    tool: actions::APPLY_PATCH,
    write: patch_write,
    quote: actions::EXEC_COMMAND,
};

const fn patch_write(op: generated::core::ApplyPatchOperation) -> TypedAction<Writes> {
    use generated::core::ApplyPatchOperation as Core;
    match op {
        Core::Add => ApplyPatchOperation::Add.write_action(),
        Core::Update => ApplyPatchOperation::Update.write_action(),
        Core::Move => ApplyPatchOperation::Move.write_action(),
        Core::Delete => ApplyPatchOperation::Delete.write_action(),
    }
}

impl ZodexTools {
    /// Zodex handlers: commands in `terminal`'s sessions, patches confined by `roots`; with
    /// `workdir_context`, a workdir's first command tells of its AGENTS.md and skills.
    pub fn new(
        roots: Arc<LiveRoots>,
        terminal: Arc<terminal::Registry>,
        workdir_context: bool,
    ) -> Self {
        Self {
            roots,
            terminal,
            handles: Arc::default(),
            told: workdir_context.then(Arc::default),
        }
    }

    fn live_ids(&self) -> HashSet<u64> {
        self.terminal.list().into_iter().map(|l| l.id).collect()
    }

    /// The result and rendering of `o`; a running session gets (or keeps) `handle`.
    fn result(
        &self,
        mut o: Outcome,
        handle: Option<String>,
        timed_out: bool,
        context: Option<String>,
    ) -> Result<(ZodexResult, String), ToolError> {
        let handle = match (o.session_id, handle) {
            (None, Some(h)) => {
                self.handles.forget(&h);
                None
            }
            (None, None) => None,
            (Some(_), Some(h)) => Some(h),
            (Some(id), None) => Some(self.handles.issue(id, || self.live_ids())?),
        };
        // Core's notes name sessions by number, which means nothing here.
        static SESSION_ID: std::sync::LazyLock<Option<regex::Regex>> =
            std::sync::LazyLock::new(|| regex::Regex::new(r"\bsession \d+\b").ok());
        let mut notes: Vec<String> = exec::take_notes(&mut o)
            .into_iter()
            .map(|n| match SESSION_ID.as_ref() {
                Some(re) => re.replace_all(&n, "the command").into_owned(),
                None => n,
            })
            .collect();
        if timed_out {
            notes.push("ended: it ran past timeout_ms".into());
        }
        let running = handle.as_ref().map(|h| format!("session handle {h}"));
        let mut text = exec::render(&o, running.as_deref(), &notes);
        if let Some(c) = &context {
            text.push_str("\n\n");
            text.push_str(c);
        }
        let out = &o.output;
        let result = ZodexResult {
            exit_code: o.exit_code.map(i64::from),
            session_handle: handle,
            wall_time_ms: i64::try_from(o.wall.as_millis()).unwrap_or(i64::MAX),
            timed_out: timed_out.then_some(true),
            output_file: out.file.as_ref().map(|f| f.display().to_string()),
            output_bytes: Some(i64::try_from(out.total_bytes).unwrap_or(i64::MAX)),
            output_lines: Some(i64::try_from(out.total_lines).unwrap_or(i64::MAX)),
            output_file_truncated: out.file.as_ref().map(|_| out.file_cut),
            zodex_context: context,
        };
        Ok((result, text))
    }

    /// What a workdir holds for an agent, the first time a command runs there: a line on
    /// its AGENTS files and a catalog of `.agents/skills`. Every file is read only where the
    /// policies let this connector's commands read it (inside the roots, `read` on).
    fn context(&self, roots: &Roots, cx: &CallContext, workdir: &Path) -> Option<String> {
        let told = self.told.as_ref()?;
        if told
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(workdir)
        {
            return None;
        }
        let allowed = |p: PathBuf| -> Option<Authorized<Resolved>> {
            let resolved = roots.resolve(&p.to_string_lossy(), None).ok()?;
            // Asked first, so a file the policies keep out is skipped without a denial in
            // the audit of a command that ran.
            let resource = resolved.resource();
            if !cx.permits(actions::EXEC_COMMAND, &resource) {
                return None;
            }
            cx.authorize(actions::EXEC_COMMAND, &resource, resolved)
                .ok()
        };
        let mut lines = Vec::new();
        let agents: Vec<&str> = ["AGENTS.override.md", "AGENTS.md"]
            .into_iter()
            .filter(|name| allowed(workdir.join(name)).is_some_and(|f| f.kind == Kind::File))
            .collect();
        match agents.as_slice() {
            [] => {}
            [one] => lines.push(format!(
                "This workdir has {one}: read it before you change anything here."
            )),
            [first, ..] => lines.push(format!(
                "This workdir has {first} (it takes precedence over AGENTS.md): read it before you change anything here."
            )),
        }
        let skills = allowed(workdir.join(".agents").join("skills"))
            .filter(|d| d.kind == Kind::Dir)
            .map(|dir| skill_catalog(&dir, &allowed))
            .unwrap_or_default();
        if !skills.is_empty() {
            lines.push("Skills in .agents/skills (read a SKILL.md before you use it):".into());
            lines.extend(skills);
        }
        told.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(workdir.to_path_buf());
        (!lines.is_empty()).then(|| lines.join("\n"))
    }
}

/// Longest description a catalog line keeps.
const SKILL_DESCRIPTION: usize = 200;
/// Largest SKILL.md whose front matter is read.
const SKILL_FILE: u64 = 64 * 1024;

/// One line per skill directory that holds a SKILL.md: its front matter's name and
/// description (the directory's name when it has none).
fn skill_catalog(
    dir: &Authorized<Resolved>,
    allowed: &dyn Fn(PathBuf) -> Option<Authorized<Resolved>>,
) -> Vec<String> {
    let max = limits::exec_command::CONTEXT_SKILLS;
    let Ok((entries, total)) = fs::list_dir(dir, max) else {
        return Vec::new();
    };
    let mut lines: Vec<String> = entries
        .iter()
        .filter(|e| e.kind == "dir")
        .filter_map(|e| {
            let file = allowed(dir.path.join(&e.name).join("SKILL.md"))?;
            let whole = fs::read_all(&file, SKILL_FILE, 1).ok()?;
            let text = String::from_utf8_lossy(&whole.bytes);
            let (name, description) = front_matter(&text);
            let name = name.unwrap_or(&e.name);
            let mut line = format!(
                "- {} (.agents/skills/{}/SKILL.md)",
                one_line(name, 64),
                one_line(&e.name, 64)
            );
            if let Some(d) = description {
                line.push_str(": ");
                line.push_str(&one_line(d, SKILL_DESCRIPTION));
            }
            Some(line)
        })
        .collect();
    if total > entries.len() {
        lines.push(format!("- … {} more not listed", total - entries.len()));
    }
    lines
}

/// `name:` and `description:` of a `---` front matter block.
fn front_matter(text: &str) -> (Option<&str>, Option<&str>) {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("---") {
        return (None, None);
    }
    let (mut name, mut description) = (None, None);
    fn unquote(v: &str) -> Option<&str> {
        let v = v.trim().trim_matches(|c| c == '"' || c == '\'').trim();
        (!v.is_empty()).then_some(v)
    }
    for line in lines.take_while(|l| l.trim() != "---") {
        if let Some(v) = line.strip_prefix("name:") {
            name = unquote(v);
        } else if let Some(v) = line.strip_prefix("description:") {
            description = unquote(v);
        }
    }
    (name, description)
}

/// `s` on one line of at most `max` characters, control characters dropped.
fn one_line(s: &str, max: usize) -> String {
    let clean: String = s.chars().filter(|c| !c.is_control()).collect();
    if clean.chars().count() > max {
        let mut cut: String = clean.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    } else {
        clean
    }
}

fn session_not_found(handle: &str) -> ToolError {
    ToolError::new(
        ErrorCode::NotFound,
        format!(
            "session_handle `{}` is unknown or its command has finished; run it again with exec_command",
            one_line(handle, 64)
        ),
    )
}

impl ZodexHandlers for ZodexTools {
    async fn exec_command(
        &self,
        call: Authorized<ExecCommandArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ZodexResult>, ToolError> {
        let args = call.into_inner();
        // Checked before anything starts; nothing stands in for a missing or wrong workdir.
        let cwd = crate::ops::exec::workdir(&args.workdir)?;
        let timeout = match args.timeout_ms {
            None => None,
            Some(ms) => {
                let ms = u64::try_from(ms).unwrap_or(0);
                let max = limits::exec_command::MAX_TIMEOUT.get();
                if ms > max {
                    return Err(ToolError::invalid_input(format!(
                        "timeout_ms: {ms} is over the limit of {}",
                        limits::exec_command::MAX_TIMEOUT
                    )));
                }
                Some(Duration::from_millis(ms))
            }
        };
        let mut yield_for = exec::clamp_wait(
            args.yield_time_ms,
            limits::exec_command::DEFAULT_YIELD,
            limits::exec_command::MIN_YIELD,
            limits::exec_command::MAX_YIELD,
        );
        if let Some(t) = timeout {
            yield_for = yield_for.min(t);
        }
        let request = CommandRequest {
            action: actions::EXEC_COMMAND,
            cmds: vec![args.cmd],
            batch: false,
            cwd: cwd.clone(),
            env: Default::default(),
            yield_for,
            budget: limits::exec_command::INLINE_OUTPUT.as_usize(),
            spill_hint: SpillHint::Command,
        };
        let mut outcome = exec::start(&self.terminal, cx, request).await?;
        let mut timed_out = false;
        if let (Some(id), Some(t)) = (outcome.session_id, timeout) {
            // The command's end is part of this call's decision, taken now.
            let session =
                cx.authorize(actions::EXEC_COMMAND, &Session { id: id.to_string() }, id)?;
            let budget = limits::exec_command::INLINE_OUTPUT.as_usize();
            if t <= yield_for {
                match crate::ops::exec::kill(&self.terminal, &cx.owner(), &session, budget).await {
                    Ok(mut ended) => {
                        let (first, rest) = (&outcome.output, &mut ended.output);
                        rest.text = format!("{}{}", first.text, rest.text);
                        rest.total_bytes += first.total_bytes;
                        rest.total_lines += first.total_lines;
                        rest.truncated |= first.truncated;
                        if rest.file.is_none() {
                            rest.file.clone_from(&first.file);
                        }
                        ended.wall += outcome.wall;
                        ended.notes.retain(|n| !n.contains("were ended"));
                        outcome = ended;
                        timed_out = true;
                    }
                    // It ended by itself in the meantime.
                    Err(e) if e.code == ErrorCode::NotFound => outcome.session_id = None,
                    Err(e) => return Err(e),
                }
            } else {
                let registry = self.terminal.clone();
                let owner = cx.owner();
                let left = t - yield_for;
                tokio::spawn(async move {
                    tokio::time::sleep(left).await;
                    let _ = crate::ops::exec::kill(&registry, &owner, &session, 0).await;
                });
            }
        }
        // Reads files: off the async thread, which on stdio is the connection's only one.
        let context = {
            let (tools, roots, cx) = (self.clone(), self.roots.get(), cx.clone());
            super::blocking(move || tools.context(&roots, &cx, &cwd)).await?
        };
        let (result, text) = self.result(outcome, None, timed_out, context)?;
        Ok(Reply::rendered(result, text))
    }

    async fn write_stdin(
        &self,
        call: Authorized<WriteStdinArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ZodexResult>, ToolError> {
        let args = call.into_inner();
        let handle = args.session_handle;
        let id = self
            .handles
            .get(&handle)
            .ok_or_else(|| session_not_found(&handle))?;
        let session = cx.authorize(actions::WRITE_STDIN, &Session { id: id.to_string() }, id)?;
        let waits = Waits {
            default_yield: limits::write_stdin::DEFAULT_YIELD,
            default_poll: limits::write_stdin::DEFAULT_POLL,
            min: limits::write_stdin::MIN_YIELD,
            max: limits::write_stdin::MAX_YIELD,
        };
        let chars = args.chars.unwrap_or_default();
        let input = SessionInput {
            chars: &chars,
            kill: args.kill_process == Some(true),
            yield_time_ms: args.yield_time_ms,
        };
        let budget = generated::zodex::limits::exec_command::INLINE_OUTPUT.as_usize();
        let outcome =
            match exec::continue_session(&self.terminal, cx, &session, input, &waits, budget).await
            {
                Ok(o) => o,
                Err(e) if e.code == ErrorCode::NotFound => {
                    self.handles.forget(&handle);
                    return Err(session_not_found(&handle));
                }
                Err(e) => return Err(e),
            };
        let (result, text) = self.result(outcome, Some(handle), false, None)?;
        Ok(Reply::rendered(result, text))
    }

    async fn apply_patch(
        &self,
        call: Authorized<ApplyPatchArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ApplyPatchOutput>, ToolError> {
        let roots = self.roots.get();
        let cx = cx.clone();
        let args = call.into_inner();
        let (files, text) = super::blocking(move || {
            apply_patch::apply(&roots, &cx, &PATCH, &args.patch, Some(&args.workdir))
        })
        .await??;
        Ok(Reply::rendered(ApplyPatchOutput { files }, text))
    }
}
