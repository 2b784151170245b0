//! The Zodex connector (seed 003): Core's command and patch operations under Zodex's shapes,
//! a required `workdir` on every call and a random `session_handle` for a running command.
//! Nothing here runs or writes on its own: commands start through [`super::exec::start`] and
//! patches through [`super::apply_patch::apply`], decided by this connector's Cedar actions.

use std::sync::Arc;
use std::time::Duration;

use generated::resources::Session;
use generated::types::{PatchResult, ZodexResult};
use generated::zodex::{
    ApplyPatchArgs, ApplyPatchOperation, ExecCommandArgs, WriteStdinArgs, ZodexHandlers, actions,
    limits,
};
use terminal::{Outcome, SpillHint};
use tool_api::{Authorized, CallContext, ErrorCode, Reply, ToolError, TypedAction, Writes};

use super::apply_patch::{self, PatchActions};
use super::exec::{self, CommandRequest, SessionHandles, SessionInput, waits_of};
use super::workdir_context::{WorkdirContext, one_line};
use confine::path_policy::LiveRoots;

/// Handlers of the Zodex connector.
#[derive(Debug, Clone)]
pub struct ZodexTools {
    roots: Arc<LiveRoots>,
    terminal: Arc<terminal::Registry>,
    handles: Arc<SessionHandles>,
    context: WorkdirContext,
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

/// Inline output of either command tool, in bytes.
const BUDGET: usize = limits::exec_command::INLINE_OUTPUT.as_usize();

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
            context: WorkdirContext::new(workdir_context),
        }
    }

    /// The result and rendering of `o`; a running session gets (or keeps) `handle`.
    fn result(
        &self,
        mut o: Outcome,
        handle: Option<String>,
        timed_out: bool,
        context: Option<String>,
    ) -> Result<Reply<ZodexResult>, ToolError> {
        let handle = match (o.session_id, handle) {
            (None, Some(h)) => {
                self.handles.forget(&h);
                None
            }
            (None, None) => None,
            (Some(_), Some(h)) => Some(h),
            (Some(id), None) => Some(self.handles.issue(id, &self.terminal)?),
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
        let count = |n: u64| Some(i64::try_from(n).unwrap_or(i64::MAX));
        let out = &o.output;
        let result = ZodexResult {
            exit_code: o.exit_code.map(i64::from),
            session_handle: handle,
            wall_time_ms: i64::try_from(o.wall.as_millis()).unwrap_or(i64::MAX),
            timed_out: timed_out.then_some(true),
            output_file: out.file.as_ref().map(|f| f.display().to_string()),
            output_bytes: count(out.total_bytes),
            output_lines: count(out.total_lines),
            output_file_truncated: out.file.as_ref().map(|_| out.file_cut),
            zodex_context: context,
        };
        Ok(Reply::rendered(result, text))
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
        let max = limits::exec_command::MAX_TIMEOUT;
        let timeout = match args.timeout_ms.map(|ms| u64::try_from(ms).unwrap_or(0)) {
            Some(ms) if ms > max.get() => {
                return Err(ToolError::invalid_input(format!(
                    "timeout_ms: {ms} is over the limit of {max}"
                )));
            }
            ms => ms.map(Duration::from_millis),
        };
        let yield_for = exec::clamp_wait(
            args.yield_time_ms,
            limits::exec_command::DEFAULT_YIELD,
            limits::exec_command::MIN_YIELD,
            limits::exec_command::MAX_YIELD,
        )
        .min(timeout.unwrap_or(Duration::MAX));
        let request = CommandRequest {
            action: actions::EXEC_COMMAND,
            cmds: vec![args.cmd],
            batch: false,
            cwd: cwd.clone(),
            env: Default::default(),
            yield_for,
            budget: BUDGET,
            spill_hint: SpillHint::Command,
        };
        let mut outcome = exec::start(&self.terminal, cx, request).await?;
        let mut timed_out = false;
        if let Some(t) = timeout {
            (outcome, timed_out) = exec::end_at_timeout(
                &self.terminal,
                cx,
                actions::EXEC_COMMAND,
                outcome,
                t,
                yield_for,
                BUDGET,
            )
            .await?;
        }
        let max_skills = limits::exec_command::CONTEXT_SKILLS;
        let context = self
            .context
            .first_time(self.roots.get(), cx, actions::EXEC_COMMAND, cwd, max_skills)
            .await?;
        self.result(outcome, None, timed_out, context)
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
        let chars = args.chars.unwrap_or_default();
        let input = SessionInput {
            chars: &chars,
            kill: args.kill_process == Some(true),
            yield_time_ms: args.yield_time_ms,
        };
        let waits = waits_of!(limits::write_stdin);
        match exec::continue_session(&self.terminal, cx, &session, input, &waits, BUDGET).await {
            Ok(outcome) => self.result(outcome, Some(handle), false, None),
            Err(e) if e.code == ErrorCode::NotFound => {
                self.handles.forget(&handle);
                Err(session_not_found(&handle))
            }
            Err(e) => Err(e),
        }
    }

    async fn apply_patch(
        &self,
        call: Authorized<ApplyPatchArgs>,
        cx: &CallContext,
    ) -> Result<Reply<PatchResult>, ToolError> {
        let args = call.into_inner();
        let roots = self.roots.get();
        apply_patch::apply(roots, cx, &PATCH, args.patch, Some(args.workdir)).await
    }
}
