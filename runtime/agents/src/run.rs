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

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use tool_api::{ErrorCode, ToolError};

use config::worker_kinds::{AgentsConfig, Kind, known_names};
use confine::path_policy::{LiveRoots, Placement};

use crate::WorkerHost;
use crate::endpoint;
use crate::reading::{Reader, Readings, expand};
use crate::records::{self, Handed, Run, State, Worker};

/// How much of a worker's last output status keeps when it ended without a finish.
const TAIL_CHARS: usize = 1200;
/// How much output one look at a working program takes in memory; a burst beyond it comes
/// through a spill file, read whole and then removed (nobody reads a worker's output later).
const LOOK_BUDGET: usize = 1 << 20;
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

/// Worker `worker` of run `run`, when that run is the board's.
fn worker_mut<'a>(board: &'a mut Board, run: &str, worker: &str) -> Option<&'a mut Worker> {
    board
        .run
        .as_mut()
        .filter(|r| r.id == run)
        .and_then(|r| r.workers.iter_mut().find(|w| w.id == worker))
}

/// What only a working worker has: its program and the secret of its endpoint.
struct Live {
    /// The run the turn belongs to.
    run: String,
    secret: String,
    held: Arc<terminal::Held>,
    /// Set by the worker's `finish` in this turn.
    finished_at: Option<Instant>,
    /// Files written for the turn (its MCP configuration, its prompt), removed when it ends.
    files: Vec<PathBuf>,
    /// Which turn this is, so a late report of an earlier turn changes nothing.
    turn: u64,
    service: transport::McpService,
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
    app: OnceLock<Weak<dyn WorkerHost>>,
    /// Commands are confined to the roots (`[exec] confine`), which workers could not be.
    confined: bool,
    /// Set when the server stops: no turn starts after it.
    closing: std::sync::atomic::AtomicBool,
    /// The lock that makes this server the one owner of the state directory's runs, once
    /// taken (at the first `agents` call).
    owner: Mutex<Option<std::fs::File>>,
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
    /// The workers of a server whose state directory is `state_dir`. The run recorded there
    /// is taken back (asleep) at the first `agents` call, when this server becomes its owner.
    pub fn new(
        config: AgentsConfig,
        terminal: Arc<terminal::Registry>,
        roots: Arc<LiveRoots>,
        settings: &config::Settings,
    ) -> Agents {
        Agents {
            config,
            terminal,
            roots,
            config_file: settings.config_path.clone(),
            dir: settings.state_dir.join("agents"),
            board: Mutex::new(Board::default()),
            endpoint: tokio::sync::OnceCell::new(),
            app: OnceLock::new(),
            confined: settings.exec_confine,
            closing: std::sync::atomic::AtomicBool::new(false),
            owner: Mutex::new(None),
        }
    }

    /// Gives the workers' endpoint the application it serves (set once the app is shared).
    pub fn attach(&self, app: Weak<dyn WorkerHost>) {
        let _ = self.app.set(app);
    }

    /// Makes this server the owner of the state directory's worker runs, or says which other
    /// one is. Servers share a state directory (each stdio client starts its own gantry); two
    /// owners would each rewrite the record and resume the same conversations.
    pub fn own(self: &Arc<Self>) -> Result<(), ToolError> {
        let mut owner = match self.owner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if owner.is_some() {
            return Ok(());
        }
        let path = self.dir.join("owner.lock");
        let file = state_dir::ensure(&self.dir)
            .and_then(|()| {
                let mut options = std::fs::OpenOptions::new();
                options.read(true).write(true).create(true).truncate(false);
                // Private like every other file of the state directory.
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                options.open(&path)
            })
            .map_err(|e| {
                ToolError::new(
                    ErrorCode::OsError,
                    format!("cannot open {}: {e}", path.display()),
                )
            })?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(ToolError::new(
                    ErrorCode::Busy,
                    format!(
                        "the worker runs of state directory {} belong to another gantry server that is running (every stdio client starts its own gantry on the same state directory); use workers from that client, or give this server its own --state-dir",
                        self.dir.parent().unwrap_or(&self.dir).display()
                    ),
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(ToolError::new(
                    ErrorCode::OsError,
                    format!("cannot lock {}: {e}", path.display()),
                ));
            }
        }
        // The record is in the board before anyone can see this server as the owner, so no
        // call works on an empty board that a load then overwrites.
        let run = records::load(&self.dir);
        if let Some(r) = &run {
            if r.ended.is_some() {
                tracing::info!(run = %r.id, "found the recorded worker run, ended");
            } else {
                tracing::info!(run = %r.id, workers = r.workers.len(), "took back the recorded worker run, its workers asleep");
            }
        }
        self.board().run = run;
        *owner = Some(file);
        Ok(())
    }

    /// Whether a worker may start now: what a `spawn` by the prime would get (confinement,
    /// then Cedar), asked again before each start (a worker waits for its slot across
    /// permission and config changes and restarts).
    fn may_start(&self) -> Result<(), String> {
        self.refuse_when_confined().map_err(|e| e.message)?;
        let Some(app) = self.app.get().and_then(Weak::upgrade) else {
            return Err("the server is stopping".into());
        };
        let cx = app.prime_context().map_err(|e| e.message)?;
        for action in [
            generated::core::actions::AGENTS,
            generated::core::AgentsOperation::Spawn.action(),
        ] {
            cx.authorize(action, &tool_api::Host, ())
                .map_err(|e| e.message)?;
        }
        Ok(())
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
        roots
            .configured_dir(&wanted)
            .map_err(|placement| match placement {
                Placement::Unusable(e) => not_found(format!(
                    "kind `{}`: its workdir {} cannot be used ({e})",
                    kind.name,
                    wanted.display()
                )),
                Placement::Outside => ToolError::new(
                    ErrorCode::PathNotAllowed,
                    format!(
                        "kind `{}`: its workdir {} is outside the approved roots",
                        kind.name,
                        wanted.display()
                    ),
                ),
            })
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
                "tasks: give one task per worker (1 to {})",
                generated::core::limits::agents::MAX_WORKERS
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
        self.refuse_when_confined()?;
        self.own()?;
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
                        "kind: `{name}` is not a worker kind here (kinds: {}); a kind added to the config takes effect when gantry next starts",
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
        let prompts: Vec<String> = tasks
            .iter()
            .enumerate()
            .map(|(i, task)| first_prompt(&format!("w{}", i + 1), context, task))
            .collect();
        for (i, prompt) in prompts.iter().enumerate() {
            fits_a_command_line(kind, prompt, &format!("context and tasks[{i}]"))?;
        }
        self.endpoint().await?;
        let (run_id, unread) = {
            let mut board = self.board();
            if let Some(run) = &board.run
                && run.workers.iter().any(|w| w.state != State::Finished)
            {
                let ids: Vec<&str> = run.workers.iter().map(|w| w.id.as_str()).collect();
                return Err(invalid(format!(
                    "spawn is once per run, and run {} already has workers ({}): message a sleeping one to give it new work (status shows who sleeps); the user can end the run on gantry's control page, and a run whose workers are all finished for good makes room for a new one",
                    run.id,
                    ids.join(", ")
                )));
            }
            // What the old run handed in and no status read goes to this reply, not away.
            let unread = board
                .run
                .as_mut()
                .map(|r| std::mem::take(&mut r.handed))
                .unwrap_or_default();
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
                    pending: Some(prompts[i].clone()),
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
            (id, unread)
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
        if !unread.is_empty() {
            report
                .text
                .push_str("\nResults of the previous run no status had read:\n");
            for h in &unread {
                report
                    .text
                    .push_str(&format!("\n--- {} ---\n{}\n", h.worker, h.text.trim_end()));
            }
        }
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
            if self.closing.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            let waiting = self
                .board()
                .run
                .as_ref()
                .is_some_and(|r| r.workers.iter().any(|w| w.state == State::Waiting));
            if !waiting {
                return;
            }
            if let Err(why) = self.may_start() {
                let mut board = self.board();
                if let Some(run) = board.run.as_mut() {
                    for w in run.workers.iter_mut().filter(|w| w.state == State::Waiting) {
                        w.note = Some(format!(
                            "waits: starting it is refused now ({why}); it starts at the next `agents` call that may"
                        ));
                    }
                }
                self.save(&board);
                return;
            }
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
                // Reserved now, so a second filler does not take it too; the prompt stays
                // until the program has started.
                w.state = State::Working;
                let prompt = w.pending.clone().unwrap_or_default();
                (run.id.clone(), w.id.clone(), prompt)
            };
            let (run, worker, prompt) = next;
            match self.start_turn(&run, &worker, &prompt, None).await {
                Ok(()) => {}
                Err(e) if self.closing.load(std::sync::atomic::Ordering::SeqCst) => {
                    // Stopping: it waits again, for the next start of the server.
                    let _ = e;
                    let mut board = self.board();
                    if let Some(w) = worker_mut(&mut board, &run, &worker) {
                        w.state = State::Waiting;
                    }
                    self.save(&board);
                    return;
                }
                Err(e) => self.not_started(&run, &worker, &e.message),
            }
        }
    }

    /// A worker whose program could not start sleeps, saying why, or is finished for good
    /// when it has no conversation to resume.
    fn not_started(&self, run: &str, worker: &str, why: &str) {
        let mut board = self.board();
        if let Some(w) = board
            .run
            .as_mut()
            .filter(|r| r.id == run && r.ended.is_none())
            .and_then(|r| {
                r.workers
                    .iter_mut()
                    .find(|w| w.id == worker && w.state == State::Working)
            })
        {
            w.state = if w.conversation.is_some() {
                State::Asleep
            } else {
                State::Finished
            };
            w.pending = None;
            w.note = Some(format!("its program could not start: {why}"));
        }
        self.save(&board);
    }

    async fn endpoint(self: &Arc<Self>) -> Result<&endpoint::Endpoint, ToolError> {
        let me: Weak<dyn endpoint::Callers> = Arc::downgrade(self) as Weak<Agents>;
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
        if self.closing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ToolError::new(ErrorCode::Busy, "the server is stopping"));
        }
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
        let secret = state_dir::new_secret()
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
            state_dir::ensure(&self.dir)
                .and_then(|()| state_dir::write_private(&path, text.as_bytes()))
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
        let prompt_file = if template.iter().any(|w| w.contains("{prompt_file}")) {
            let path = self.dir.join(format!("prompt-{run}-{worker}.txt"));
            if let Err(e) = state_dir::write_private(&path, prompt.as_bytes()) {
                if let Some(p) = &mcp_config {
                    let _ = std::fs::remove_file(p);
                }
                return Err(ToolError::new(
                    ErrorCode::OsError,
                    format!("cannot write the worker's prompt file: {e}"),
                ));
            }
            Some(path)
        } else {
            None
        };
        let shown = |p: &Option<PathBuf>| {
            p.as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        };
        let (mcp_config_text, prompt_file_text) = (shown(&mcp_config), shown(&prompt_file));
        let files: Vec<PathBuf> = mcp_config.into_iter().chain(prompt_file).collect();
        let workdir_text = workdir.display().to_string();
        let argv = expand(
            template,
            &[
                ("{prompt_file}", &prompt_file_text),
                ("{prompt}", prompt),
                ("{conversation}", conversation.unwrap_or("")),
                ("{mcp_config}", &mcp_config_text),
                ("{mcp_url}", &url),
                ("{mcp_endpoint}", &endpoint.bearer_url()),
                ("{workdir}", &workdir_text),
            ],
        );
        let mut env = kind.env.clone();
        env.push(("GANTRY_WORKER".into(), format!("{run}/{worker}")));
        // For a CLI that sends it as a bearer token to `{mcp_endpoint}`: in the environment,
        // which only the user's own processes can read, never in a command line.
        env.push((config::worker_kinds::TOKEN_VAR.into(), secret.clone()));
        let started = self
            .terminal
            .start_program(&argv, workdir, env, format!("agents/{run}/{worker}"))
            .await;
        let held = match started {
            Ok(h) => Arc::new(h),
            Err(e) => {
                for p in &files {
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
            for p in &files {
                let _ = std::fs::remove_file(p);
            }
            let h = held.clone();
            let _ = tokio::task::spawn_blocking(move || h.end()).await;
            return Err(ToolError::new(
                ErrorCode::Internal,
                "the workers' endpoint has no server to serve (the server is stopping)",
            ));
        };
        let service = app.worker_service(id);
        let turn = {
            let mut board = self.board();
            // Still this run, not ended, and this worker still reserved for the turn (the user
            // may have ended the run while the program started).
            let reserved = !self.closing.load(std::sync::atomic::Ordering::SeqCst)
                && board.run.as_ref().is_some_and(|r| {
                    r.id == run
                        && r.ended.is_none()
                        && r.workers
                            .iter()
                            .any(|w| w.id == worker && w.state == State::Working)
                });
            if !reserved || board.live.contains_key(worker) {
                for p in &files {
                    let _ = std::fs::remove_file(p);
                }
                None
            } else {
                board.turns += 1;
                let turn = board.turns;
                board.live.insert(
                    worker.to_string(),
                    Live {
                        run: run.to_string(),
                        secret,
                        held: held.clone(),
                        finished_at: None,
                        files,
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
                    w.pending = None;
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
        let mut reader = match Reader::new(&kind) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(error = %e, "a worker kind's pattern does not compile");
                None
            }
        };
        let mut last = String::new();
        let mut conversation: Option<String> = None;
        let began = Instant::now();
        let mut timed_out = false;
        let exit = loop {
            let seen = held.look(Duration::from_secs(1), LOOK_BUDGET).await;
            match (&seen.output.file, reader.take()) {
                (Some(file), Some(mut r)) => {
                    // The whole burst, not the head and tail shown: usage may be anywhere.
                    let file = file.clone();
                    reader = tokio::task::spawn_blocking(move || {
                        if let Ok(f) = std::fs::File::open(&file) {
                            use std::io::BufRead as _;
                            for line in std::io::BufReader::new(f).lines().map_while(Result::ok) {
                                r.feed(&line);
                                r.feed("\n");
                            }
                        }
                        let _ = std::fs::remove_file(&file);
                        r
                    })
                    .await
                    .ok();
                }
                (Some(file), None) => {
                    let _ = std::fs::remove_file(file);
                }
                (None, Some(mut r)) => {
                    r.feed(&seen.output.text);
                    reader = Some(r);
                }
                (None, None) => {}
            }
            // The conversation is known as soon as it is named, so a turn cut short (the
            // server stopping) still leaves a worker that can be resumed.
            let named = reader
                .as_ref()
                .and_then(|r| r.readings.conversation.clone());
            if named.is_some() && named != conversation {
                conversation = named;
                let mut board = self.board();
                if let Some(w) = worker_mut(&mut board, &run, &worker) {
                    w.conversation = conversation.clone();
                }
                self.save(&board);
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
            if began.elapsed() >= self.config.turn_timeout && !timed_out {
                timed_out = true;
                tracing::warn!(%run, %worker, "a worker's turn ran past [agents] turn_timeout; its program is ended");
            }
            if overdue || gone || timed_out {
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
        let mut last = tail(&last, TAIL_CHARS);
        if timed_out {
            last = format!(
                "[gantry ended it: the turn ran past turn_timeout = {} under [agents]]\n{last}",
                humantime::format_duration(self.config.turn_timeout)
            );
        }
        self.turn_ended(&run, &worker, turn, &readings, exit, &last);
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
        readings: &Readings,
        exit: terminal::Exit,
        last_output: &str,
    ) {
        let mut board = self.board();
        let live = match board.live.get(worker) {
            Some(l) if l.turn == turn && l.run == run => board.live.remove(worker),
            _ => None,
        };
        let Some(live) = live else {
            // The run was ended (or the server is stopping): the record already says so.
            return;
        };
        for p in &live.files {
            let _ = std::fs::remove_file(p);
        }
        let ceiling = self.config.ceiling_tokens;
        let Some(w) = worker_mut(&mut board, run, worker) else {
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
        // The turn that crossed the ceiling ran to its end; there is no turn after it.
        w.state = if over { State::Finished } else { State::Asleep };
        if w.conversation.is_none() {
            // Nothing to resume: no message could ever reach it, so it does not hold the run.
            w.state = State::Finished;
        }
        let past = format!(
            "finished for good: its conversation holds {} tokens, past the ceiling of {}",
            grouped(w.tokens.unwrap_or(0)),
            grouped(ceiling)
        );
        w.note = match (finished, over) {
            (true, true) => Some(format!("{past}, so this turn's finish was its last")),
            (true, false) => None,
            (false, over) => {
                let how = if exit.signaled {
                    format!("was ended (signal, exit {})", exit.code)
                } else {
                    format!("exited with code {}", exit.code)
                };
                let shown = last_output.trim();
                let said = if shown.is_empty() {
                    format!("its program {how} without calling finish, printing nothing")
                } else {
                    format!(
                        "its program {how} without calling finish; its output ended with:\n{shown}"
                    )
                };
                Some(if over {
                    format!("{past}; {said}")
                } else {
                    said
                })
            }
        };
        if w.conversation.is_none() {
            let why = match &readings.rejected {
                Some(value) => format!(
                    "the conversation its output named, `{value}`, is not an id (letters, digits, `.`, `_`, `:`, `-`, not starting with `-`), so it cannot be resumed"
                ),
                None => "its output never named its conversation (the kind's `conversation` pattern found nothing), so it cannot be resumed".to_string(),
            };
            w.note = Some(match w.note.take() {
                Some(n) => format!("{n}\nFinished for good: {why}."),
                None => format!("finished for good: {why}"),
            });
        }
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
        self.refuse_when_confined()?;
        self.own()?;
        let prompt = wake_prompt(text);
        let kind = self.board().run.as_ref().map(|r| r.kind.clone());
        if let Some(k) = kind.and_then(|n| self.config.kinds.iter().find(|k| k.name == n)) {
            fits_a_command_line(k, &prompt, "message")?;
        }
        let run = {
            let mut board = self.board();
            let free = self.free_slots(&board);
            let Some(run) = board.run.as_mut() else {
                return Err(not_found("no run yet: spawn workers first"));
            };
            if let Some(how) = &run.ended {
                return Err(not_found(format!(
                    "run {} was ended ({how}); spawn a new run",
                    run.id
                )));
            }
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
                let working = self.config.slots - free;
                let then = if working > 0 {
                    format!(
                        "wait for one of the {working} working worker(s) to finish, or name fewer"
                    )
                } else {
                    "name fewer at once".to_string()
                };
                refusals.push(format!(
                    "{} worker(s) to wake and {free} slot(s) free ({}); {then}",
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
                "Woke {} in {} own conversation{}.\n\n{}",
                woken.join(", "),
                if woken.len() == 1 { "its" } else { "their" },
                if woken.len() == 1 { "" } else { "s" },
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

    /// `status`: the run, each worker, the results handed in since the last status. Workers
    /// waiting for a slot are started first when they may be.
    pub async fn status(self: &Arc<Self>) -> Result<Report, ToolError> {
        self.own()?;
        self.fill_slots().await;
        Ok(self.report(true))
    }

    /// Workers are agent CLIs that keep their own state in the user's home and run their own
    /// tools: confinement to the roots cannot hold them, so where commands are confined none
    /// is started (rather than one left unconfined).
    fn refuse_when_confined(&self) -> Result<(), ToolError> {
        if self.confined {
            return Err(ToolError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "commands are confined to the approved roots ([exec] confine = \"roots\" in {}), and a worker agent could not be: it keeps its state in your home and runs its own tools; gantry starts no worker while commands are confined",
                    self.config_file.display()
                ),
            ));
        }
        Ok(())
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
        if board
            .run
            .as_ref()
            .is_none_or(|r| r.id != who.run || r.ended.is_some())
        {
            return Err(not_found("this worker's run has ended"));
        }
        let Some(live) = board.live.get_mut(&who.worker).filter(|l| l.run == who.run) else {
            return Err(not_found("this worker has no turn running"));
        };
        if live.finished_at.is_some() {
            return Err(invalid(
                "you already handed in your result this turn; end your turn now",
            ));
        }
        live.finished_at = Some(Instant::now());
        let Some(run) = board.run.as_mut() else {
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

    /// Ends the run (the user's choice, on the control page): every program of it is ended
    /// and every worker finished for good. Returns how many programs were running.
    pub async fn end_run(self: &Arc<Self>) -> Result<Option<(String, usize)>, String> {
        self.own().map_err(|e| e.message)?;
        let ended = {
            let mut board = self.board();
            let live: Vec<Live> = board.live.drain().map(|(_, l)| l).collect();
            match board.run.as_mut() {
                None => None,
                Some(run) => {
                    for w in &mut run.workers {
                        if w.state != State::Finished {
                            w.state = State::Finished;
                            w.note = Some("the user ended the run".into());
                        }
                    }
                    run.ended = Some("by the user, on the control page".into());
                    let id = run.id.clone();
                    self.save(&board);
                    Some((id, live))
                }
            }
        };
        let Some((id, helds)) = ended else {
            return Ok(None);
        };
        let n = helds.len();
        for l in &helds {
            for p in &l.files {
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
        Ok(Some((id, n)))
    }

    /// The run as the control page shows it (or why this server cannot show it).
    pub fn overview(self: &Arc<Self>) -> Option<String> {
        if let Err(e) = self.own() {
            return Some(e.message);
        }
        self.board().run.as_ref()?;
        Some(self.report(false).text)
    }

    /// Server shutdown: working workers are recorded asleep (their programs end with the
    /// terminal registry), their MCP configurations removed.
    pub fn shutdown(&self) {
        self.closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let mut board = self.board();
        let live: Vec<(String, Live)> = board.live.drain().collect();
        if let Some(run) = board.run.as_mut() {
            for (worker, l) in &live {
                for p in &l.files {
                    let _ = std::fs::remove_file(p);
                }
                if let Some(w) = run.workers.iter_mut().find(|w| &w.id == worker) {
                    w.state = State::Asleep;
                    w.note = Some(if l.finished_at.is_some() {
                        "handed in its result; the server stopped as its turn ended".into()
                    } else {
                        "interrupted: the server stopped during its turn; message it to go on in its conversation".into()
                    });
                    if w.conversation.is_none() {
                        w.state = State::Finished;
                        w.note = Some("finished for good: the server stopped before its output named its conversation, so it cannot be resumed".into());
                    }
                }
            }
            // Reserved for a turn whose program had not started yet: a first turn waits
            // again (its prompt is kept), a later one sleeps as it was.
            for w in run
                .workers
                .iter_mut()
                .filter(|w| w.state == State::Working && !live.iter().any(|(id, _)| *id == w.id))
            {
                if w.pending.is_some() {
                    w.state = State::Waiting;
                } else {
                    w.state = State::Asleep;
                    w.note =
                        Some("the server stopped before its turn started; message it again".into());
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

/// Refuses a prompt that would make `kind`'s command line longer than the system takes (the
/// prompt travels as an argument), naming `what` made it so, before anything starts.
fn fits_a_command_line(kind: &Kind, prompt: &str, what: &str) -> Result<(), ToolError> {
    // The other placeholders' values (a path, a URL, an id) are short; 1 KB covers them.
    let length = [&kind.start, &kind.resume]
        .iter()
        .map(|template| {
            let words: Vec<String> = template
                .iter()
                .map(|w| w.replace("{prompt}", prompt))
                .collect();
            terminal::shell::command_line_len(&words) + 1024
        })
        .max()
        .unwrap_or(0);
    if length > terminal::shell::MAX_COMMAND_LINE {
        return Err(invalid(format!(
            "{what}: the prompt makes a command line of about {length} bytes, and this system takes {} in one; shorten it (put long material in a file under the roots and name it)",
            terminal::shell::MAX_COMMAND_LINE
        )));
    }
    Ok(())
}

impl endpoint::Callers for Agents {
    fn by_secret(&self, secret: &str) -> Option<endpoint::Caller> {
        use subtle::ConstantTimeEq as _;
        let board = self.board();
        board.live.iter().find_map(|(worker, live)| {
            let same = live.secret.len() == secret.len()
                && bool::from(live.secret.as_bytes().ct_eq(secret.as_bytes()));
            same.then(|| endpoint::Caller {
                run: live.run.clone(),
                worker: worker.clone(),
                held: live.held.clone(),
                service: live.service.clone(),
            })
        })
    }
}
