//! Worker agents: the Core connector's client (the prime) hands tasks to the user's own agent
//! CLIs and collects their results.
//!
//! A run has up to 8 workers. Each worker is one conversation of an agent CLI, started with
//! its task and resumed with each message; between turns it sleeps (no process). Its program
//! runs in a process tree the terminal registry holds, and reaches gantry on an endpoint and
//! secret of its own (`endpoint`), so its calls are decided with `Worker::"<run>/<id>"` as
//! the principal. Slots count only working workers; a conversation past the token ceiling
//! gets no turn after its next finish. The run is kept as a record (`records`), so it outlives
//! a restart asleep; processes never do.

mod endpoint;
mod kinds;
mod records;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use tool_api::{ErrorCode, ToolError};

pub use kinds::{AgentsConfig, AgentsSection, Kind, Problem, known_names, resolve};
pub use records::{Handed, Run, State, Worker};

use crate::app::{App, LiveRoots};

/// Most workers in a run.
pub const MAX_WORKERS: usize = 8;
/// How much of a worker's last output status keeps when it ended without a finish.
const TAIL_CHARS: usize = 1200;
/// How much output one look at a working program takes inline.
const LOOK_BUDGET: usize = 64 * 1024;
/// Results kept for the prime between two statuses; the oldest go first, and status says so.
const MAX_HANDED: usize = 64;

/// What the tool's handler gets back: the rendering and the facts.
#[derive(Debug, Clone)]
pub struct Report {
    /// Text for the model.
    pub text: String,
    /// The run's id.
    pub run: Option<String>,
    /// Slots free now.
    pub free_slots: usize,
    /// Each worker as it stands.
    pub workers: Vec<WorkerView>,
}

/// One worker as a report shows it.
#[derive(Debug, Clone)]
pub struct WorkerView {
    /// `w1`...
    pub id: String,
    /// Its kind.
    pub kind: String,
    /// Its state.
    pub state: State,
    /// Its conversation, once its output named it.
    pub conversation: Option<String>,
    /// Its conversation's size, once its output gave one.
    pub tokens: Option<u64>,
}

/// What only a working worker has: its program and the secret of its endpoint.
struct Live {
    secret: String,
    held: Arc<terminal::Held>,
    /// Set by the worker's `finish` in this turn.
    finished_at: Option<Instant>,
    mcp_config: Option<PathBuf>,
    /// Which turn this is, so a late report of an earlier turn changes nothing.
    turn: u64,
    service: endpoint::Service,
}

/// The run and the live parts of its workers.
#[derive(Default)]
struct Board {
    run: Option<Run>,
    live: std::collections::HashMap<String, Live>,
    turns: u64,
}

/// The workers of this server.
pub struct Agents {
    config: AgentsConfig,
    terminal: Arc<terminal::Registry>,
    roots: Arc<LiveRoots>,
    config_file: PathBuf,
    dir: PathBuf,
    board: Mutex<Board>,
    endpoint: tokio::sync::OnceCell<endpoint::Endpoint>,
    app: OnceLock<Weak<App>>,
}

impl std::fmt::Debug for Agents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agents")
            .field("slots", &self.config.slots)
            .finish_non_exhaustive()
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::InvalidInput, message)
}

fn not_found(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::NotFound, message)
}

/// `n` with thousands separated, as people read token counts.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The last `n` characters of `text`.
fn tail(text: &str, n: usize) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(n)).collect()
}

/// The first line of `text`, at most `n` characters.
fn headline(text: &str, n: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if line.chars().count() > n {
        let mut s: String = line.chars().take(n).collect();
        s.push('…');
        s
    } else {
        line.to_string()
    }
}

impl Agents {
    /// The workers of a server whose state directory is `state_dir`; a run recorded there is
    /// taken back, asleep.
    pub fn new(
        config: AgentsConfig,
        terminal: Arc<terminal::Registry>,
        roots: Arc<LiveRoots>,
        state_dir: &std::path::Path,
        config_file: PathBuf,
    ) -> Agents {
        let dir = state_dir.join("agents");
        let run = records::load(&dir);
        if let Some(r) = &run {
            tracing::info!(run = %r.id, workers = r.workers.len(), "took back the recorded worker run, its workers asleep");
        }
        Agents {
            config,
            terminal,
            roots,
            config_file,
            dir,
            board: Mutex::new(Board {
                run,
                ..Board::default()
            }),
            endpoint: tokio::sync::OnceCell::new(),
            app: OnceLock::new(),
        }
    }

    /// Gives the workers' endpoint the application it serves (set once the app is shared).
    pub fn attach(self: &Arc<Self>, app: Weak<App>) {
        let _ = self.app.set(app);
        // Workers that were waiting for a slot when the server stopped start now.
        let agents = self.clone();
        tokio::spawn(async move { agents.fill_slots().await });
    }

    fn board(&self) -> MutexGuard<'_, Board> {
        match self.board.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn save(&self, board: &Board) {
        if let Some(run) = &board.run
            && let Err(e) = records::save(&self.dir, run)
        {
            tracing::warn!(error = %e, "could not record the worker run");
        }
    }

    /// The kinds on offer, for messages.
    fn kind_names(&self) -> String {
        self.config
            .kinds
            .iter()
            .map(|k| format!("`{}`", k.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn no_kinds(&self) -> ToolError {
        let config = self.config_file.display();
        if self.config.kinds_from_path {
            not_found(format!(
                "no worker kind: none of the agent CLIs gantry knows ({}) is on PATH, and {config} declares none under [agents.kinds.NAME] (start, resume, conversation, tokens); install one or declare a kind, then restart gantry",
                known_names().join(", ")
            ))
        } else {
            not_found(format!("no worker kind is usable in {config}"))
        }
    }

    fn free_slots(&self, board: &Board) -> usize {
        let working = board.run.as_ref().map_or(0, |r| {
            r.workers
                .iter()
                .filter(|w| w.state == State::Working)
                .count()
        });
        self.config.slots.saturating_sub(working)
    }

    fn slots_setting(&self) -> String {
        format!(
            "slots = {} under [agents] in {}",
            self.config.slots,
            self.config_file.display()
        )
    }

    /// Where a kind's workers start: its `workdir`, else the first root; inside the roots.
    fn workdir_of(&self, kind: &Kind) -> Result<PathBuf, ToolError> {
        let roots = self.roots.get();
        let wanted = kind
            .workdir
            .clone()
            .unwrap_or_else(|| roots.first().to_path_buf());
        let resolved = std::fs::canonicalize(&wanted).map_err(|e| {
            not_found(format!(
                "kind `{}`: its workdir {} cannot be used ({e})",
                kind.name,
                wanted.display()
            ))
        })?;
        if !roots.all().iter().any(|r| resolved.starts_with(r)) {
            return Err(ToolError::new(
                ErrorCode::PathNotAllowed,
                format!(
                    "kind `{}`: its workdir {} is outside the approved roots",
                    kind.name,
                    wanted.display()
                ),
            ));
        }
        Ok(resolved)
    }

    /// `spawn`: a new run of one worker per task, each told `context` and its task. Tasks
    /// beyond the free slots wait their turn.
    pub async fn spawn(
        self: &Arc<Self>,
        kind: Option<&str>,
        context: &str,
        tasks: &[String],
    ) -> Result<Report, ToolError> {
        if tasks.is_empty() {
            return Err(invalid(format!(
                "tasks: give one task per worker (1 to {MAX_WORKERS})"
            )));
        }
        let task_limit = generated::core::limits::agents::TASK.get();
        for (i, t) in tasks.iter().enumerate() {
            if t.trim().is_empty() {
                return Err(invalid(format!("tasks[{i}] is empty")));
            }
            if t.len() as u64 > task_limit {
                return Err(invalid(format!(
                    "tasks[{i}] is {} bytes; a task is at most {task_limit} (put what all tasks share in `context`)",
                    t.len()
                )));
            }
        }
        if self.config.kinds.is_empty() {
            return Err(self.no_kinds());
        }
        let kind = match kind {
            Some(name) => self
                .config
                .kinds
                .iter()
                .find(|k| k.name == name)
                .ok_or_else(|| {
                    not_found(format!(
                        "kind: `{name}` is not a worker kind here (kinds: {})",
                        self.kind_names()
                    ))
                })?,
            None if self.config.kinds.len() == 1 => &self.config.kinds[0],
            None => {
                return Err(invalid(format!(
                    "kind: choose one of {}",
                    self.kind_names()
                )));
            }
        };
        self.workdir_of(kind)?;
        self.endpoint().await?;
        let run_id = {
            let mut board = self.board();
            if let Some(run) = &board.run
                && run.workers.iter().any(|w| w.state != State::Finished)
            {
                let ids: Vec<&str> = run.workers.iter().map(|w| w.id.as_str()).collect();
                return Err(invalid(format!(
                    "spawn is once per run, and run {} already has workers ({}): message a sleeping one to give it new work (status shows who sleeps); the user can end the run on gantry's control page",
                    run.id,
                    ids.join(", ")
                )));
            }
            let id = format!("r-{}", &records::random_hex(4));
            let workers = tasks
                .iter()
                .enumerate()
                .map(|(i, task)| Worker {
                    id: format!("w{}", i + 1),
                    task: task.clone(),
                    state: State::Waiting,
                    conversation: None,
                    tokens: None,
                    turns: 0,
                    note: None,
                    pending: Some(first_prompt(&format!("w{}", i + 1), context, task)),
                })
                .collect();
            board.run = Some(Run {
                id: id.clone(),
                kind: kind.name.clone(),
                started_ms: now_ms(),
                workers,
                handed: Vec::new(),
                dropped: 0,
                ended: None,
            });
            board.live.clear();
            self.save(&board);
            id
        };
        tracing::info!(run = %run_id, kind = %kind.name, workers = tasks.len(), "spawned a worker run");
        self.fill_slots().await;
        let mut report = self.report(false);
        report.text = format!(
            "Spawned run {run_id}: {} worker(s) of kind `{}`. Each calls `finish` with its result; read them with `status`.\n\n{}",
            tasks.len(),
            kind.name,
            report.text
        );
        Ok(report)
    }

    /// Starts waiting workers while slots are free, in order. Boxed, and `Send` said out
    /// loud: a turn's watcher fills the slot it frees, which starts the next watcher.
    fn fill_slots(
        self: &Arc<Self>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>> {
        let agents = self.clone();
        Box::pin(async move { agents.fill_slots_now().await })
    }

    async fn fill_slots_now(self: &Arc<Self>) {
        loop {
            let next = {
                let mut board = self.board();
                let free = self.free_slots(&board);
                let Some(run) = board.run.as_mut() else {
                    return;
                };
                if free == 0 {
                    return;
                }
                let Some(w) = run.workers.iter_mut().find(|w| w.state == State::Waiting) else {
                    return;
                };
                // Reserved now, so a second filler does not take it too.
                w.state = State::Working;
                let prompt = w.pending.take().unwrap_or_default();
                (run.id.clone(), w.id.clone(), prompt)
            };
            let (run, worker, prompt) = next;
            if let Err(e) = self.start_turn(&run, &worker, &prompt, None).await {
                self.not_started(&run, &worker, &e.message);
            }
        }
    }

    /// A worker whose program could not start sleeps, saying why.
    fn not_started(&self, run: &str, worker: &str, why: &str) {
        let mut board = self.board();
        if let Some(w) = board
            .run
            .as_mut()
            .filter(|r| r.id == run)
            .and_then(|r| r.workers.iter_mut().find(|w| w.id == worker))
        {
            w.state = State::Asleep;
            w.note = Some(format!("its program could not start: {why}"));
        }
        self.save(&board);
    }

    async fn endpoint(self: &Arc<Self>) -> Result<&endpoint::Endpoint, ToolError> {
        let me = Arc::downgrade(self);
        self.endpoint
            .get_or_try_init(|| async { endpoint::Endpoint::start(me).await })
            .await
            .map_err(|e| {
                ToolError::new(
                    ErrorCode::OsError,
                    format!("the workers' endpoint could not start: {e}"),
                )
            })
    }

    /// Starts one turn of `worker`: its task (no conversation yet) or a message resuming
    /// `conversation`. The worker is already marked working.
    async fn start_turn(
        self: &Arc<Self>,
        run: &str,
        worker: &str,
        prompt: &str,
        conversation: Option<&str>,
    ) -> Result<(), ToolError> {
        let kind_name = self
            .board()
            .run
            .as_ref()
            .map(|r| r.kind.clone())
            .unwrap_or_default();
        let kind = self
            .config
            .kinds
            .iter()
            .find(|k| k.name == kind_name)
            .ok_or_else(|| {
                not_found(format!(
                    "kind `{kind_name}` of this run is no longer in the config (kinds: {})",
                    self.kind_names()
                ))
            })?
            .clone();
        let workdir = self.workdir_of(&kind)?;
        let endpoint = self.endpoint().await?;
        let secret = crate::state_dir::new_secret()
            .map_err(|e| ToolError::new(ErrorCode::OsError, format!("no random secret: {e}")))?;
        let url = endpoint.url(&secret);
        let template = if conversation.is_some() {
            &kind.resume
        } else {
            &kind.start
        };
        let mcp_config = if template.iter().any(|w| w.contains("{mcp_config}")) {
            let path = self.dir.join(format!("mcp-{run}-{worker}.json"));
            let text = serde_json::json!({
                "mcpServers": { "gantry": { "type": "http", "url": url } }
            })
            .to_string();
            crate::state_dir::ensure(&self.dir)
                .and_then(|()| crate::state_dir::write_private(&path, text.as_bytes()))
                .map_err(|e| {
                    ToolError::new(
                        ErrorCode::OsError,
                        format!("cannot write the worker's MCP configuration: {e}"),
                    )
                })?;
            Some(path)
        } else {
            None
        };
        let mcp_config_text = mcp_config
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let workdir_text = workdir.display().to_string();
        let argv = kinds::expand(
            template,
            &[
                ("{prompt}", prompt),
                ("{conversation}", conversation.unwrap_or("")),
                ("{mcp_config}", &mcp_config_text),
                ("{mcp_url}", &url),
                ("{workdir}", &workdir_text),
            ],
        );
        let mut env = kind.env.clone();
        env.push(("GANTRY_WORKER".into(), format!("{run}/{worker}")));
        let started = self
            .terminal
            .start_program(&argv, workdir, env, format!("agents/{run}/{worker}"))
            .await;
        let held = match started {
            Ok(h) => Arc::new(h),
            Err(e) => {
                if let Some(p) = &mcp_config {
                    let _ = std::fs::remove_file(p);
                }
                return Err(ToolError::new(
                    ErrorCode::OsError,
                    format!("worker {worker} could not start `{}`: {e}", kind.start[0]),
                ));
            }
        };
        let id = tool_api::WorkerId {
            run: run.to_string(),
            worker: worker.to_string(),
        };
        let Some(app) = self.app.get().and_then(Weak::upgrade) else {
            if let Some(p) = &mcp_config {
                let _ = std::fs::remove_file(p);
            }
            let h = held.clone();
            let _ = tokio::task::spawn_blocking(move || h.end()).await;
            return Err(ToolError::new(
                ErrorCode::Internal,
                "the workers' endpoint has no server to serve (the server is stopping)",
            ));
        };
        let service = endpoint.service_for(app, id);
        let turn = {
            let mut board = self.board();
            if board.run.as_ref().is_none_or(|r| r.id != run) {
                if let Some(p) = &mcp_config {
                    let _ = std::fs::remove_file(p);
                }
                None
            } else {
                board.turns += 1;
                let turn = board.turns;
                board.live.insert(
                    worker.to_string(),
                    Live {
                        secret,
                        held: held.clone(),
                        finished_at: None,
                        mcp_config,
                        turn,
                        service,
                    },
                );
                if let Some(w) = board
                    .run
                    .as_mut()
                    .and_then(|r| r.workers.iter_mut().find(|w| w.id == worker))
                {
                    w.state = State::Working;
                    w.turns += 1;
                    w.note = None;
                }
                self.save(&board);
                Some(turn)
            }
        };
        let Some(turn) = turn else {
            // The run ended while the program started.
            let h = held.clone();
            let _ = tokio::task::spawn_blocking(move || h.end()).await;
            return Err(not_found("the run ended"));
        };
        tracing::info!(
            run,
            worker,
            pid = held.pid(),
            resumed = conversation.is_some(),
            "worker turn started"
        );
        let agents = self.clone();
        let (run, worker) = (run.to_string(), worker.to_string());
        tokio::spawn(async move {
            agents.watch(run, worker, turn, held, kind).await;
        });
        Ok(())
    }

    /// Follows one turn's program until it exits: reads its output for the conversation id
    /// and usage, ends it once the grace after its finish is over, then puts the worker to
    /// sleep (or finishes it for good) and fills the freed slot.
    async fn watch(
        self: Arc<Self>,
        run: String,
        worker: String,
        turn: u64,
        held: Arc<terminal::Held>,
        kind: Kind,
    ) {
        let mut reader = match kinds::Reader::new(&kind) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(error = %e, "a worker kind's pattern does not compile");
                None
            }
        };
        let mut last = String::new();
        let exit = loop {
            let seen = held.look(Duration::from_secs(1), LOOK_BUDGET).await;
            if let Some(r) = reader.as_mut() {
                r.feed(&seen.output.text);
            }
            last.push_str(&seen.output.text);
            if last.len() > 4 * TAIL_CHARS {
                last = tail(&last, TAIL_CHARS);
            }
            if let Some(exit) = seen.exit {
                break exit;
            }
            let overdue = {
                let board = self.board();
                board
                    .live
                    .get(&worker)
                    .filter(|l| l.turn == turn)
                    .and_then(|l| l.finished_at)
                    .is_some_and(|at| at.elapsed() >= self.config.finish_grace)
            };
            let gone = {
                let board = self.board();
                board.live.get(&worker).is_none_or(|l| l.turn != turn)
            };
            if overdue || gone {
                let h = held.clone();
                let _ = tokio::task::spawn_blocking(move || h.end()).await;
            }
        };
        let readings = reader
            .map(|mut r| {
                r.finish();
                r.readings
            })
            .unwrap_or_default();
        self.turn_ended(
            &run,
            &worker,
            turn,
            &readings,
            exit,
            &tail(&last, TAIL_CHARS),
        );
        let h = held.clone();
        // Whatever the program left running goes with it.
        let _ = tokio::task::spawn_blocking(move || h.end()).await;
        self.fill_slots().await;
    }

    fn turn_ended(
        &self,
        run: &str,
        worker: &str,
        turn: u64,
        readings: &kinds::Readings,
        exit: terminal::Exit,
        last_output: &str,
    ) {
        let mut board = self.board();
        let live = match board.live.get(worker) {
            Some(l) if l.turn == turn => board.live.remove(worker),
            _ => None,
        };
        let Some(live) = live else {
            // The run was ended (or the server is stopping): the record already says so.
            return;
        };
        if let Some(p) = &live.mcp_config {
            let _ = std::fs::remove_file(p);
        }
        let ceiling = self.config.ceiling_tokens;
        let Some(w) = board
            .run
            .as_mut()
            .filter(|r| r.id == run)
            .and_then(|r| r.workers.iter_mut().find(|w| w.id == worker))
        else {
            return;
        };
        if let Some(c) = &readings.conversation {
            w.conversation = Some(c.clone());
        }
        if let Some(t) = readings.tokens() {
            w.tokens = Some(t);
        }
        let over = w.tokens.is_some_and(|t| t >= ceiling);
        let finished = live.finished_at.is_some();
        w.state = if finished && over {
            State::Finished
        } else {
            State::Asleep
        };
        w.note = match (finished, over) {
            (true, true) => Some(format!(
                "finished for good: its conversation holds {} tokens, past the ceiling of {}, so its last finish was its last",
                grouped(w.tokens.unwrap_or(0)),
                grouped(ceiling)
            )),
            (true, false) => None,
            (false, _) => {
                let how = if exit.signaled {
                    format!("was ended (signal, exit {})", exit.code)
                } else {
                    format!("exited with code {}", exit.code)
                };
                let shown = last_output.trim();
                Some(if shown.is_empty() {
                    format!("its program {how} without calling finish, printing nothing")
                } else {
                    format!(
                        "its program {how} without calling finish; its output ended with:\n{shown}"
                    )
                })
            }
        };
        tracing::info!(
            run,
            worker,
            code = exit.code,
            finished,
            tokens = w.tokens,
            "worker turn ended"
        );
        self.save(&board);
    }

    /// `message`: `text` to every worker of `to`, all or none. Each must be asleep, with a
    /// conversation to resume, and there must be a free slot for each.
    pub async fn message(self: &Arc<Self>, to: &[String], text: &str) -> Result<Report, ToolError> {
        if to.is_empty() {
            return Err(invalid("to: name at least one worker (`w1`...)"));
        }
        if text.trim().is_empty() {
            return Err(invalid("message: the text for the workers is empty"));
        }
        for (i, id) in to.iter().enumerate() {
            if to[..i].contains(id) {
                return Err(invalid(format!("to: `{id}` is named twice")));
            }
        }
        let run = {
            let mut board = self.board();
            let free = self.free_slots(&board);
            let Some(run) = board.run.as_mut() else {
                return Err(not_found("no run yet: spawn workers first"));
            };
            let ids: Vec<String> = run.workers.iter().map(|w| w.id.clone()).collect();
            let mut refusals = Vec::new();
            for id in to {
                let Some(w) = run.workers.iter().find(|w| &w.id == id) else {
                    refusals.push(format!(
                        "`{id}` is not a worker of run {} ({})",
                        run.id,
                        ids.join(", ")
                    ));
                    continue;
                };
                match w.state {
                    State::Asleep if w.conversation.is_none() => refusals.push(format!(
                        "{id} cannot be woken: its output never named its conversation (the kind's `conversation` pattern found nothing), so there is nothing to resume"
                    )),
                    State::Asleep => {}
                    State::Finished => refusals.push(format!(
                        "{id} is finished for good{}",
                        w.note
                            .as_deref()
                            .map(|n| format!(" ({})", headline(n, 200)))
                            .unwrap_or_default()
                    )),
                    State::Working => refusals.push(format!(
                        "{id} is working; a message wakes a sleeping worker, so wait for its finish (status)"
                    )),
                    State::Waiting => refusals.push(format!(
                        "{id} has not started yet: it waits for a free slot"
                    )),
                }
            }
            if refusals.is_empty() && to.len() > free {
                refusals.push(format!(
                    "{} worker(s) to wake and {free} slot(s) free ({}); wait for a working worker's finish",
                    to.len(),
                    self.slots_setting()
                ));
            }
            if !refusals.is_empty() {
                return Err(invalid(format!(
                    "no message was sent (all or none): {}",
                    refusals.join("; ")
                )));
            }
            for w in run.workers.iter_mut().filter(|w| to.contains(&w.id)) {
                w.state = State::Working;
            }
            let run_id = run.id.clone();
            let wake: Vec<(String, String)> = run
                .workers
                .iter()
                .filter(|w| to.contains(&w.id))
                .map(|w| (w.id.clone(), w.conversation.clone().unwrap_or_default()))
                .collect();
            self.save(&board);
            (run_id, wake)
        };
        let (run_id, wake) = run;
        let prompt = wake_prompt(text);
        let mut failed = Vec::new();
        for (worker, conversation) in &wake {
            if let Err(e) = self
                .start_turn(&run_id, worker, &prompt, Some(conversation))
                .await
            {
                self.not_started(&run_id, worker, &e.message);
                failed.push(format!("{worker}: {}", e.message));
            }
        }
        let mut report = self.report(false);
        let woken: Vec<&str> = wake.iter().map(|(w, _)| w.as_str()).collect();
        report.text = if failed.is_empty() {
            format!(
                "Woke {} in their own conversations.\n\n{}",
                woken.join(", "),
                report.text
            )
        } else {
            format!(
                "Sent, but not every worker could start: {}\n\n{}",
                failed.join("; "),
                report.text
            )
        };
        Ok(report)
    }

    /// `status`: the run, each worker, the results handed in since the last status.
    pub fn status(&self) -> Report {
        self.report(true)
    }

    fn report(&self, collect: bool) -> Report {
        let mut board = self.board();
        let free = self.free_slots(&board);
        let slots = self.config.slots;
        let Some(run) = board.run.as_mut() else {
            let kinds = if self.config.kinds.is_empty() {
                format!("none. {}", self.no_kinds().message)
            } else {
                self.kind_names()
            };
            return Report {
                text: format!("No run yet. Worker kinds: {kinds}; {slots} slot(s)."),
                run: None,
                free_slots: free,
                workers: Vec::new(),
            };
        };
        let mut text = format!(
            "Run {} (kind `{}`): {} worker(s), {free} of {slots} slot(s) free.",
            run.id,
            run.kind,
            run.workers.len()
        );
        if let Some(ended) = &run.ended {
            text.push_str(&format!(" Ended: {ended}."));
        }
        text.push('\n');
        for w in &run.workers {
            let state = match w.state {
                State::Working => "working",
                State::Waiting => "waiting for a slot",
                State::Asleep => "asleep",
                State::Finished => "finished for good",
            };
            text.push_str(&format!("{}  {state}", w.id));
            if let Some(t) = w.tokens {
                text.push_str(&format!(", {} tokens", grouped(t)));
            }
            if let Some(c) = &w.conversation {
                text.push_str(&format!(", conversation {c}"));
            }
            text.push_str(&format!(" — task: {}\n", headline(&w.task, 100)));
            if let Some(note) = &w.note {
                for line in note.lines() {
                    text.push_str(&format!("    {line}\n"));
                }
            }
        }
        if collect {
            let handed = std::mem::take(&mut run.handed);
            let dropped = std::mem::take(&mut run.dropped);
            if dropped > 0 {
                text.push_str(&format!(
                    "\n{dropped} older result(s) were dropped unread: at most {MAX_HANDED} are kept between two statuses.\n"
                ));
            }
            if handed.is_empty() {
                text.push_str("\nNo result handed in since the last status.\n");
            } else {
                text.push_str("\nResults handed in since the last status:\n");
                for h in &handed {
                    text.push_str(&format!("\n--- {} ---\n{}\n", h.worker, h.text.trim_end()));
                }
            }
        }
        let workers = run
            .workers
            .iter()
            .map(|w| WorkerView {
                id: w.id.clone(),
                kind: run.kind.clone(),
                state: w.state,
                conversation: w.conversation.clone(),
                tokens: w.tokens,
            })
            .collect();
        let id = run.id.clone();
        if collect {
            self.save(&board);
        }
        Report {
            text,
            run: Some(id),
            free_slots: free,
            workers,
        }
    }

    /// `finish`: worker `who` hands in `text`. Its program is ended after the grace (it
    /// normally exits first), and the worker sleeps.
    pub fn finish(&self, who: &tool_api::WorkerId, text: &str) -> Result<String, ToolError> {
        if text.trim().is_empty() {
            return Err(invalid(
                "message: put your result for the prime in `message`",
            ));
        }
        let ceiling = self.config.ceiling_tokens;
        let mut board = self.board();
        let Some(live) = board.live.get_mut(&who.worker) else {
            return Err(not_found("this worker has no turn running"));
        };
        if live.finished_at.is_some() {
            return Err(invalid(
                "you already handed in your result this turn; end your turn now",
            ));
        }
        live.finished_at = Some(Instant::now());
        let Some(run) = board.run.as_mut().filter(|r| r.id == who.run) else {
            return Err(not_found("this worker's run has ended"));
        };
        let tokens = run
            .workers
            .iter()
            .find(|w| w.id == who.worker)
            .and_then(|w| w.tokens);
        if run.handed.len() >= MAX_HANDED {
            run.handed.remove(0);
            run.dropped += 1;
        }
        run.handed.push(Handed {
            worker: who.worker.clone(),
            text: text.to_string(),
            at_ms: now_ms(),
        });
        self.save(&board);
        tracing::info!(run = %who.run, worker = %who.worker, "worker handed in its result");
        let mut reply = format!(
            "Your result is handed to the prime. End your turn now (your program is ended {} s after this finish). You may be woken later with a message, in this same conversation.",
            self.config.finish_grace.as_secs()
        );
        if tokens.is_some_and(|t| t >= ceiling) {
            reply = format!(
                "Your result is handed to the prime. This was your last finish: your conversation has passed the context ceiling of {} tokens. End your turn now.",
                grouped(ceiling)
            );
        }
        Ok(reply)
    }

    /// The live worker whose endpoint secret is `secret`: its id, the root pid of its
    /// program and the pids of its cgroup (when it has one), and its MCP service.
    fn by_secret(&self, secret: &str) -> Option<endpoint::Caller> {
        use subtle::ConstantTimeEq as _;
        let board = self.board();
        let run = board.run.as_ref()?;
        board.live.iter().find_map(|(worker, live)| {
            let same = live.secret.len() == secret.len()
                && bool::from(live.secret.as_bytes().ct_eq(secret.as_bytes()));
            same.then(|| endpoint::Caller {
                run: run.id.clone(),
                worker: worker.clone(),
                held: live.held.clone(),
                service: live.service.clone(),
            })
        })
    }

    /// Ends the run (the user's choice, on the control page): every program of it is ended
    /// and every worker finished for good. Returns how many programs were running.
    pub async fn end_run(&self) -> Option<(String, usize)> {
        let (id, helds) = {
            let mut board = self.board();
            let live: Vec<Live> = board.live.drain().map(|(_, l)| l).collect();
            let run = board.run.as_mut()?;
            for w in &mut run.workers {
                if w.state != State::Finished {
                    w.state = State::Finished;
                    w.note = Some("the user ended the run".into());
                }
            }
            run.ended = Some("by the user, on the control page".into());
            let id = run.id.clone();
            self.save(&board);
            (id, live)
        };
        let n = helds.len();
        for l in &helds {
            if let Some(p) = &l.mcp_config {
                let _ = std::fs::remove_file(p);
            }
        }
        let programs: Vec<Arc<terminal::Held>> = helds.into_iter().map(|l| l.held).collect();
        let _ = tokio::task::spawn_blocking(move || {
            for h in programs {
                h.end();
            }
        })
        .await;
        tracing::info!(run = %id, programs = n, "the user ended the worker run");
        Some((id, n))
    }

    /// The run as the control page shows it.
    pub fn overview(&self) -> Option<Report> {
        let board = self.board();
        board.run.as_ref()?;
        drop(board);
        Some(self.report(false))
    }

    /// Server shutdown: working workers are recorded asleep (their programs end with the
    /// terminal registry), their MCP configurations removed.
    pub fn shutdown(&self) {
        let mut board = self.board();
        let live: Vec<(String, Live)> = board.live.drain().collect();
        if let Some(run) = board.run.as_mut() {
            for (worker, l) in &live {
                if let Some(p) = &l.mcp_config {
                    let _ = std::fs::remove_file(p);
                }
                if let Some(w) = run.workers.iter_mut().find(|w| &w.id == worker) {
                    w.state = State::Asleep;
                    w.note = Some(if l.finished_at.is_some() {
                        "handed in its result; the server stopped as its turn ended".into()
                    } else {
                        "interrupted: the server stopped during its turn; message it to go on in its conversation".into()
                    });
                }
            }
        }
        self.save(&board);
    }
}

/// What a worker is told when it starts.
fn first_prompt(worker: &str, context: &str, task: &str) -> String {
    let mut p = format!(
        "You are worker {worker} of a gantry run: another agent (the prime) hands you one task on this computer.\n"
    );
    if !context.trim().is_empty() {
        p.push_str(&format!("\nShared context:\n{}\n", context.trim_end()));
    }
    p.push_str(&format!("\nYour task:\n{}\n", task.trim_end()));
    p.push_str(FINISH_HINT);
    p
}

/// What a sleeping worker is told when a message wakes it.
fn wake_prompt(message: &str) -> String {
    format!(
        "A message from the prime:\n{}\n{FINISH_HINT}",
        message.trim_end()
    )
}

const FINISH_HINT: &str = "\nWhen you are done, call the `agents` tool of the MCP server `gantry` with {\"action\": \"finish\", \"message\": \"<your result>\"}: that hands your result to the prime and ends your turn. You may be woken later, in this conversation, with a message.\n";
