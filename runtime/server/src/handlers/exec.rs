//! `exec_command` and `write_stdin`: Core's, and the parts every connector's command tools
//! share (starting an authorized run, continuing or ending its session).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use generated::core::{ExecCommandArgs, WriteStdinArgs, actions, limits};
use generated::resources::{Command, Session};
use generated::types::{BatchItem, ExecResult};
use terminal::{Commands, Outcome, Registry, Run, SpillHint};
use tool_api::{ActionId, Authorized, CallContext, ErrorCode, Reply, TimeLimit, ToolError};

use crate::ops::exec::{self, DISPLAY_VARS};
use crate::ops::path_policy::Roots;

pub(super) fn clamp_wait(
    given: Option<i64>,
    default: TimeLimit,
    min: TimeLimit,
    max: TimeLimit,
) -> Duration {
    let ms = given
        .and_then(|v| u64::try_from(v).ok())
        .unwrap_or(default.get())
        .clamp(min.get(), max.get());
    Duration::from_millis(ms)
}

/// Inline output budget in bytes (a token is about 4 bytes).
fn budget(tokens: Option<i64>) -> usize {
    let t = tokens
        .and_then(|v| u64::try_from(v).ok())
        .and_then(|v| usize::try_from(v).ok())
        .unwrap_or(limits::exec_command::DEFAULT_MAX_OUTPUT_TOKENS)
        .clamp(1, limits::exec_command::MAX_OUTPUT_TOKENS);
    t.saturating_mul(4)
}

pub(super) fn check_env(env: &BTreeMap<String, String>) -> Result<(), ToolError> {
    if env.len() > limits::exec_command::MAX_ENV_VARS {
        return Err(ToolError::invalid_input(format!(
            "env: {} variables, at most {} allowed",
            env.len(),
            limits::exec_command::MAX_ENV_VARS
        )));
    }
    for (k, v) in env {
        let valid = k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid || k.len() > 256 {
            return Err(ToolError::invalid_input(format!(
                "env: `{}` is not a valid variable name",
                k.chars().take(64).collect::<String>()
            )));
        }
        if k.starts_with("GANTRY_") {
            return Err(ToolError::invalid_input(format!(
                "env: `{k}` is reserved for gantry"
            )));
        }
        if v.contains('\0') || v.len() > limits::exec_command::MAX_ENV_VALUE.as_usize() {
            return Err(ToolError::invalid_input(format!(
                "env: the value of `{k}` holds a NUL byte or is longer than {}",
                limits::exec_command::MAX_ENV_VALUE
            )));
        }
    }
    Ok(())
}

/// Codex's result layout, so models trained on it read it right. `running` names what a
/// still-running process continues under (`session ID 7`, `session handle …`).
pub(super) fn render(o: &Outcome, running: Option<&str>, notes: &[String]) -> String {
    let mut s = format!("Wall time: {:.4} seconds\n", o.wall.as_secs_f64());
    match (o.exit_code, running) {
        (Some(code), _) => s.push_str(&format!("Process exited with code {code}\n")),
        (None, Some(r)) => s.push_str(&format!("Process running with {r}\n")),
        (None, None) => {}
    }
    for n in notes {
        s.push_str(&format!("Note: {n}\n"));
    }
    s.push_str("Output:\n");
    s.push_str(&o.output.text);
    s
}

/// The shared result of both tools, and its plain-text rendering.
fn result(mut o: Outcome, batch: bool) -> (ExecResult, String) {
    let notes = take_notes(&mut o);
    let running = o.session_id.map(|id| format!("session ID {id}"));
    let text = render(&o, running.as_deref(), &notes);
    let truncated = o.output.truncated;
    let result = ExecResult {
        exit_code: o.exit_code.map(i64::from),
        session_id: o.session_id.and_then(|id| i64::try_from(id).ok()),
        wall_time_ms: i64::try_from(o.wall.as_millis()).unwrap_or(i64::MAX),
        truncated: Some(truncated),
        output_file: o.output.file.as_ref().map(|f| f.display().to_string()),
        total_bytes: truncated.then(|| i64::try_from(o.output.total_bytes).unwrap_or(i64::MAX)),
        output_file_cut: o.output.file.as_ref().map(|_| o.output.file_cut),
        items: batch.then(|| {
            o.items
                .iter()
                .map(|(i, c)| BatchItem {
                    index: *i as i64,
                    exit_code: Some(i64::from(*c)),
                })
                .collect()
        }),
    };
    (result, text)
}

/// The outcome's notes, with one for a process a signal ended.
pub(super) fn take_notes(o: &mut Outcome) -> Vec<String> {
    let mut notes = std::mem::take(&mut o.notes);
    if o.signaled {
        notes.push("the process was ended by a signal".into());
    }
    notes
}

/// A command tool's request, once its own arguments are read: what every connector's
/// command tool hands to [`start`].
pub(super) struct CommandRequest {
    /// The calling tool's Cedar action, asked about each command and about the whole run.
    pub action: ActionId,
    pub cmds: Vec<String>,
    /// `cmds` run as one batch in one shell (each decided on its own first).
    pub batch: bool,
    pub cwd: PathBuf,
    pub env: BTreeMap<String, String>,
    pub yield_for: Duration,
    /// Inline output in bytes.
    pub budget: usize,
    pub spill_hint: SpillHint,
}

/// Authorizes and starts a command run: its command line(s), start directory and
/// environment, decided as one, never as a bare string.
pub(super) async fn start(
    registry: &Registry,
    cx: &CallContext,
    req: CommandRequest,
) -> Result<Outcome, ToolError> {
    let CommandRequest {
        action,
        cmds,
        batch,
        cwd,
        env,
        yield_for,
        budget,
        spill_hint,
    } = req;
    check_env(&env)?;
    let display_env = env.keys().any(|k| DISPLAY_VARS.contains(&k.as_str()));
    let workdir = cwd.display().to_string();
    // In a batch each command is decided on its own, so a refusal names the item.
    if batch {
        for (i, cmd) in cmds.iter().enumerate() {
            let item = Command {
                id: cmd.chars().take(4096).collect(),
                workdir: workdir.clone(),
                display_env,
            };
            cx.authorize(action, &item, ())
                .map_err(|e| ToolError::new(e.code, format!("cmds[{i}]: {}", e.message)))?;
        }
    }
    // Whether children may keep the desktop session in their environment: the same rule,
    // asked about an environment that reaches it.
    let probe = Command {
        id: "(inherited environment)".into(),
        workdir: workdir.clone(),
        display_env: true,
    };
    let env_remove = if cx.permits(action, &probe) {
        Vec::new()
    } else {
        DISPLAY_VARS.iter().map(|v| (*v).to_string()).collect()
    };
    let resource = Command {
        id: cmds.join("\n").chars().take(4096).collect(),
        workdir,
        display_env,
    };
    let commands = if batch {
        Commands::Batch(cmds)
    } else {
        Commands::One(cmds.into_iter().next().unwrap_or_default())
    };
    let run = Run {
        commands,
        cwd,
        env: env.into_iter().collect(),
        env_remove,
        owner: cx.owner(),
        spill_hint,
    };
    let run = cx.authorize(action, &resource, run)?;
    exec::start(registry, run, yield_for, budget).await
}

pub(super) async fn exec_command(
    registry: &Registry,
    roots: &Roots,
    cx: &CallContext,
    args: ExecCommandArgs,
) -> Result<Reply<ExecResult>, ToolError> {
    let cwd = match &args.workdir {
        Some(w) => exec::workdir(w)?,
        None => roots.first().to_path_buf(),
    };
    let (cmds, batch) = match (args.cmd, args.cmds) {
        (Some(cmd), None) => (vec![cmd], false),
        (None, Some(cmds)) => (cmds, true),
        _ => {
            return Err(ToolError::invalid_input(
                "give exactly one of `cmd`, `cmds`",
            ));
        }
    };
    let request = CommandRequest {
        action: actions::EXEC_COMMAND,
        cmds,
        batch,
        cwd,
        env: args.env.unwrap_or_default(),
        yield_for: clamp_wait(
            args.yield_time_ms,
            limits::exec_command::DEFAULT_YIELD,
            limits::exec_command::MIN_YIELD,
            limits::exec_command::MAX_YIELD,
        ),
        budget: budget(args.max_output_tokens),
        spill_hint: SpillHint::ReadTool,
    };
    let outcome = start(registry, cx, request).await?;
    let (output, text) = result(outcome, batch);
    Ok(Reply::rendered(output, text))
}

/// How long a call on a running session waits, per its tool's limits.
pub(super) struct Waits {
    pub default_yield: TimeLimit,
    pub default_poll: TimeLimit,
    pub min: TimeLimit,
    pub max: TimeLimit,
}

/// The [`Waits`] of a tool whose generated limits module (`generated::core::limits::
/// write_stdin`, say) declares `default_yield`, `default_poll`, `min_yield` and `max_yield`.
macro_rules! waits_of {
    ($($module:ident)::+) => {
        super::exec::Waits {
            default_yield: $($module)::+::DEFAULT_YIELD,
            default_poll: $($module)::+::DEFAULT_POLL,
            min: $($module)::+::MIN_YIELD,
            max: $($module)::+::MAX_YIELD,
        }
    };
}
pub(super) use waits_of;

/// Ends the command behind `outcome` when `timeout` has passed since it started, `waited` of
/// which this call already spent: right now (what it printed before and while ending is one
/// output, `budget` bytes inline) or, if it has time left, from a task of its own. True when
/// it was ended now.
pub(super) async fn end_at_timeout(
    registry: &Arc<Registry>,
    cx: &CallContext,
    action: ActionId,
    mut outcome: Outcome,
    timeout: Duration,
    waited: Duration,
    budget: usize,
) -> Result<(Outcome, bool), ToolError> {
    let Some(id) = outcome.session_id else {
        return Ok((outcome, false));
    };
    // The command's end is part of this call's decision, taken now.
    let session = cx.authorize(action, &Session { id: id.to_string() }, id)?;
    if timeout > waited {
        let (registry, owner) = (registry.clone(), cx.owner());
        let left = timeout - waited;
        tokio::spawn(async move {
            tokio::time::sleep(left).await;
            let _ = exec::kill(&registry, &owner, &session, 0).await;
        });
        return Ok((outcome, false));
    }
    match exec::kill(registry, &cx.owner(), &session, budget).await {
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
            Ok((ended, true))
        }
        // It ended by itself in the meantime.
        Err(e) if e.code == ErrorCode::NotFound => {
            outcome.session_id = None;
            Ok((outcome, false))
        }
        Err(e) => Err(e),
    }
}

/// Random handles standing for sessions' numeric ids, for connectors that name a running
/// command by a string: a handle is a capability that cannot be guessed from another's. The
/// registry still checks that a session is the caller's.
#[derive(Debug, Default)]
pub(super) struct SessionHandles(Mutex<HashMap<String, u64>>);

impl SessionHandles {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new handle for session `id`; handles of sessions that ended are dropped first once
    /// there are more than the registry could hold.
    pub fn issue(&self, id: u64, registry: &Registry) -> Result<String, ToolError> {
        let handle = state_dir::new_secret()
            .map_err(|e| ToolError::os("could not draw a session handle", &e))?;
        let mut map = self.lock();
        if map.len() >= 2 * limits::exec_command::MAX_SESSIONS {
            let live: HashSet<u64> = registry.list().into_iter().map(|l| l.id).collect();
            map.retain(|_, id| live.contains(id));
        }
        map.insert(handle.clone(), id);
        Ok(handle)
    }

    pub fn get(&self, handle: &str) -> Option<u64> {
        self.lock().get(handle).copied()
    }

    pub fn forget(&self, handle: &str) {
        self.lock().remove(handle);
    }
}

/// What a call asks of a running session.
pub(super) struct SessionInput<'a> {
    /// Written to it; none: a poll.
    pub chars: &'a str,
    /// End its process tree instead.
    pub kill: bool,
    pub yield_time_ms: Option<i64>,
}

/// Writes to an authorized session, polls it, or ends it, as `input` asks.
pub(super) async fn continue_session(
    registry: &Registry,
    cx: &CallContext,
    session: &Authorized<u64>,
    input: SessionInput<'_>,
    waits: &Waits,
    budget: usize,
) -> Result<Outcome, ToolError> {
    let SessionInput {
        chars,
        kill,
        yield_time_ms,
    } = input;
    if !chars.is_empty() {
        cx.record_input(chars);
    }
    if kill {
        return exec::kill(registry, &cx.owner(), session, budget).await;
    }
    let default = if chars.is_empty() {
        waits.default_poll
    } else {
        waits.default_yield
    };
    let yield_for = clamp_wait(yield_time_ms, default, waits.min, waits.max);
    exec::write(registry, &cx.owner(), session, chars, yield_for, budget).await
}

pub(super) async fn write_stdin(
    registry: &Registry,
    cx: &CallContext,
    args: WriteStdinArgs,
) -> Result<Reply<ExecResult>, ToolError> {
    // Ids are drawn below 2^53 so a JSON number carries them exactly.
    let id = u64::try_from(args.session_id)
        .ok()
        .filter(|id| (1..1 << 53).contains(id))
        .ok_or_else(|| {
            ToolError::invalid_input(format!(
                "session_id: {} is not a session id",
                args.session_id
            ))
        })?;
    let session = cx.authorize(actions::WRITE_STDIN, &Session { id: id.to_string() }, id)?;
    let waits = waits_of!(limits::write_stdin);
    let chars = args.chars.unwrap_or_default();
    let input = SessionInput {
        chars: &chars,
        kill: args.kill == Some(true),
        yield_time_ms: args.yield_time_ms,
    };
    let outcome = continue_session(
        registry,
        cx,
        &session,
        input,
        &waits,
        budget(args.max_output_tokens),
    )
    .await?;
    let (output, text) = result(outcome, false);
    Ok(Reply::rendered(output, text))
}
