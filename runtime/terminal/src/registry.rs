//! The live sessions: bounded in number (the least recently used is ended to make room, and
//! the reply says so), ended when idle too long, and all ended on shutdown.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::console::{Exit, Spawn};
use crate::session::{Session, Wait};
use crate::shell::{Shell, batch_script};
use crate::snapshot::{Prepared, Snapshots};
use crate::warm::{self, Pool, Recipe, Warm};
use crate::window::{Drained, SpillConfig};

/// Registry settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Most live sessions.
    pub max_sessions: usize,
    /// A session unused this long is ended.
    pub idle_timeout: Duration,
    /// Where spill files go.
    pub spill_dir: PathBuf,
    /// Largest spill file.
    pub spill_cap: u64,
    /// Where the snapshot of the login environment is kept; `None` runs every command in a
    /// login shell.
    pub snapshot_dir: Option<PathBuf>,
    /// Keep a shell started ahead of the next command (with a snapshot, on Unix).
    pub warm_shell: bool,
    /// A program and arguments every command starts through (the shell and its arguments
    /// follow), e.g. a confining launcher; empty for none.
    pub launcher: Vec<std::ffi::OsString>,
    /// Put each session in a cgroup v2 group of its own where one can be created.
    pub cgroup: bool,
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Commands {
    /// One command.
    One(String),
    /// Commands run in order in one shell.
    Batch(Vec<String>),
}

/// A command to start.
#[derive(Debug, Clone)]
pub struct Run {
    /// The command(s).
    pub commands: Commands,
    /// Working directory.
    pub cwd: PathBuf,
    /// Variables to set.
    pub env: Vec<(String, String)>,
    /// Inherited variables to remove.
    pub env_remove: Vec<String>,
    /// The connector instance starting it; the session answers to no other.
    pub owner: String,
    /// How the markers of cut output point the model at the spill file.
    pub spill_hint: crate::window::SpillHint,
}

/// The result of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Set while the process still runs.
    pub session_id: Option<u64>,
    /// Set once it exited (for a batch: the first non-zero item's code).
    pub exit_code: Option<i32>,
    /// It was ended by a signal.
    pub signaled: bool,
    /// Batch items finished so far.
    pub items: Vec<(usize, i32)>,
    /// Output of this call.
    pub output: Drained,
    /// Wall time of this call.
    pub wall: Duration,
    /// Things the caller should know (a session ended to make room...).
    pub notes: Vec<String>,
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum TerminalError {
    /// No live session has this id.
    #[error("session {0} is unknown or has finished")]
    UnknownSession(u64),
    /// The command could not start.
    #[error("could not start the shell: {0}")]
    Spawn(std::io::Error),
    /// Input could not be written.
    #[error("could not write to session {0}: {1}")]
    Write(u64, std::io::Error),
}

/// A program the server holds ([`Registry::start_program`]): a worker agent.
#[derive(Debug)]
pub struct Held {
    session: Arc<Session>,
    table: std::sync::Weak<Mutex<HashMap<u64, Arc<Session>>>>,
}

/// What one look at a held program saw.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Its output since the last look.
    pub output: Drained,
    /// Set once it has exited.
    pub exit: Option<Exit>,
}

impl Held {
    /// The pid of the shell it runs in (the root of its process tree).
    pub fn pid(&self) -> u32 {
        self.session.pid()
    }

    /// Waits for output or the exit (at most `wait`) and takes the output, up to `budget`
    /// bytes inline (the rest is in its spill file).
    pub async fn look(&self, wait: Duration, budget: usize) -> Seen {
        let deadline = tokio::time::Instant::now() + wait;
        let c = self
            .session
            .collect(Wait::FirstOutput, deadline, budget)
            .await;
        Seen {
            output: c.output,
            exit: c.exit,
        }
    }

    /// Ends its whole process tree (blocking for at most a few seconds).
    pub fn end(&self) {
        if let Some(table) = self.table.upgrade() {
            lock(&table).remove(&self.session.id);
        }
        self.session.terminate();
    }
}

/// One live session as [`Registry::list`] shows it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its id.
    pub id: u64,
    /// The connector instance that started it.
    pub owner: String,
    /// What it runs, shortened.
    pub command: String,
    /// The shell's process id.
    pub pid: u32,
    /// Since it started.
    pub age: Duration,
    /// Since it was last used.
    pub idle: Duration,
    /// Its process has exited (its output not yet collected).
    pub exited: bool,
}

/// The live sessions.
#[derive(Debug)]
pub struct Registry {
    config: Config,
    shell: Shell,
    snapshots: Option<Arc<Snapshots>>,
    sessions: Mutex<HashMap<u64, Arc<Session>>>,
    /// The shells started ahead of the next commands.
    warm: Arc<Mutex<Pool>>,
    /// Set (under the pool's lock) by shutdown: no warm shell is started after it.
    closed: Arc<std::sync::atomic::AtomicBool>,
    /// Warm shells are being started (by one thread, one after another).
    refilling: Arc<std::sync::atomic::AtomicBool>,
    /// What the next warm shell is started with: the latest command's (that thread may have
    /// been started by an earlier command with another snapshot or removals).
    refill_recipe: Arc<Mutex<Option<Recipe>>>,
    /// Bumped (under the pool's lock) by [`Registry::end_warm`]: a shell that was being
    /// started before it is ended instead of kept, so switching `exec` off while one starts
    /// cannot leave it ready.
    warm_epoch: Arc<std::sync::atomic::AtomicU64>,
    /// Spill files named in replies, with the session and owner they belong to, so an owner
    /// can read its output back (bounded: the oldest are forgotten).
    spills: Mutex<std::collections::VecDeque<(PathBuf, u64, String)>>,
    /// [`Config::launcher`], replaceable while running (the roots it names can change).
    launcher: Mutex<Vec<std::ffi::OsString>>,
    /// Programs the server holds (worker agents): not the model's sessions, so never listed
    /// to it, evicted or reaped, but ended with the registry like every session.
    held: Arc<Mutex<HashMap<u64, Arc<Session>>>>,
    /// This instance's cgroup tree, when sessions get cgroups.
    tree: Option<Arc<crate::cgroup::Tree>>,
    /// How process trees are ended, for the start-up log.
    tree_method: String,
}

/// How many spill files the registry remembers the owners of.
const SPILLS_REMEMBERED: usize = 1024;

/// A lock whose holder panicked still guards consistent data here (every update is one
/// assignment), so it is taken rather than refused.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Ends a warm shell nobody will use, off the caller's thread.
fn discard(w: Warm) {
    w.remove_files();
    let _ = std::thread::Builder::new()
        .name("gantry-warm-end".into())
        .spawn(move || w.session.terminate());
}

/// Starts one warm shell for `recipe` and hands it to `keep`, which returns it when it is not
/// wanted after all (it is then ended). Returns whether a shell was started.
fn start_one(
    recipe: &Recipe,
    spill_dir: &std::path::Path,
    spill_cap: u64,
    tree: Option<&Arc<crate::cgroup::Tree>>,
    keep: impl FnOnce(Warm) -> Option<Warm>,
) -> bool {
    let Ok(id) = new_id(&HashMap::new()) else {
        return false;
    };
    let spill = SpillConfig {
        dir: spill_dir.to_path_buf(),
        cap: spill_cap,
        prefix: format!("exec-{id}"),
    };
    let group = match tree.map(|t| t.group()).transpose() {
        Ok(g) => g.map(Arc::new),
        Err(e) => {
            tracing::debug!(error = %e, "no cgroup for a warm shell");
            return false;
        }
    };
    match warm::start(recipe, id, spill, group) {
        Ok(w) => {
            if let Some(unwanted) = keep(w) {
                unwanted.remove_files();
                unwanted.session.terminate();
            }
            true
        }
        Err(e) => {
            tracing::debug!(error = %e, "no warm shell");
            false
        }
    }
}

/// A fresh session id: 53 random bits from the OS CSPRNG (so a JSON number carries it
/// exactly), never 0 and never one in use. Guessing a live id takes ~2^52 tries.
fn new_id(taken: &HashMap<u64, Arc<Session>>) -> Result<u64, TerminalError> {
    loop {
        let mut b = [0u8; 8];
        getrandom::fill(&mut b)
            .map_err(|e| TerminalError::Spawn(std::io::Error::other(e.to_string())))?;
        let id = u64::from_le_bytes(b) >> 11;
        if id != 0 && !taken.contains_key(&id) {
            return Ok(id);
        }
    }
}

fn nonce() -> String {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Ends sessions off the async workers (ending a tree may take a few milliseconds).
async fn end(sessions: Vec<Arc<Session>>) {
    if sessions.is_empty() {
        return;
    }
    let _ = tokio::task::spawn_blocking(move || terminate_all(&sessions)).await;
}

/// Ends sessions side by side, so their graces run at the same time: 64 sessions that ignore
/// SIGTERM take one grace, not 64.
fn terminate_all(sessions: &[Arc<Session>]) {
    if let [one] = sessions {
        one.terminate();
        return;
    }
    std::thread::scope(|scope| {
        for s in sessions {
            scope.spawn(|| s.terminate());
        }
    });
}

impl Registry {
    /// An empty registry using the host's shell.
    pub fn new(config: Config) -> Registry {
        crate::window::prune(&config.spill_dir, Duration::from_secs(24 * 3600));
        let shell = Shell::detect();
        let snapshots = config
            .snapshot_dir
            .clone()
            .map(|dir| Arc::new(Snapshots::new(shell.clone(), dir, None)));
        // FIFOs and command files a previous instance left behind.
        if let Some(dir) = &config.snapshot_dir
            && let Ok(entries) = std::fs::read_dir(dir)
        {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with("warm-") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let launcher = Mutex::new(config.launcher.clone());
        let (tree, tree_method) = if config.cgroup {
            match crate::cgroup::Tree::create() {
                Ok(created) => {
                    let mut said = format!(
                        "process trees end by cgroup: each session has its own below {}, ended with cgroup.kill, so detached grandchildren go too (an unconfined command can still move itself out of its cgroup, as the server's user may write the server's own cgroup.procs; the session and tag sweep still runs as a second net)",
                        created.tree.dir().display()
                    );
                    if created.ended_stale > 0 {
                        said.push_str(&format!(
                            "; ended {} processes left by an instance that died",
                            created.ended_stale
                        ));
                    }
                    (Some(Arc::new(created.tree)), said)
                }
                Err(why) => (None, crate::process_tree::method_without_cgroup(&why)),
            }
        } else {
            (
                None,
                crate::process_tree::method_without_cgroup("[exec] cgroup = false"),
            )
        };
        Registry {
            config,
            shell,
            snapshots,
            sessions: Mutex::new(HashMap::new()),
            warm: Arc::new(Mutex::new(Pool::default())),
            closed: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            refilling: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            refill_recipe: Arc::new(Mutex::new(None)),
            warm_epoch: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            spills: Mutex::new(std::collections::VecDeque::new()),
            launcher,
            held: Arc::new(Mutex::new(HashMap::new())),
            tree,
            tree_method,
        }
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<u64, Arc<Session>>> {
        lock(&self.sessions)
    }

    /// Takes the login snapshot now, in the background, so the first command does not pay
    /// for the profile. Called when commands may run: no shell is started for a server whose
    /// `exec` is off.
    pub fn prepare_in_background(&self) {
        if let Some(s) = &self.snapshots {
            let s = s.clone();
            let _ = std::thread::Builder::new()
                .name("gantry-shell-snapshot".into())
                .spawn(move || s.prepare());
        }
    }

    /// The session whose output `path` is, when `owner` may read it back: a spill file named
    /// in a reply to that owner, still in the spill directory.
    pub fn spill_of(&self, owner: &str, path: &std::path::Path) -> Option<u64> {
        lock(&self.spills)
            .iter()
            .find(|(p, _, o)| p == path && o == owner)
            .map(|(_, id, _)| *id)
    }

    /// How process trees are ended here and what escapes it, for the start-up log.
    pub fn process_tree_method(&self) -> &str {
        &self.tree_method
    }

    /// A cgroup for a new session, when sessions get them. Failing to create one fails the
    /// start: a command is not run outside the containment the server announced.
    fn group(&self) -> Result<Option<Arc<crate::cgroup::Group>>, TerminalError> {
        match &self.tree {
            Some(tree) => tree.group().map(|g| Some(Arc::new(g))).map_err(|e| {
                TerminalError::Spawn(std::io::Error::new(
                    e.kind(),
                    format!("the session's cgroup could not be created: {e}"),
                ))
            }),
            None => Ok(None),
        }
    }

    /// Replaces the launcher commands start through (new commands only).
    pub fn set_launcher(&self, launcher: Vec<std::ffi::OsString>) {
        *lock(&self.launcher) = launcher;
    }

    fn has_launcher(&self) -> bool {
        !lock(&self.launcher).is_empty()
    }

    /// `invocation` started through the launcher, if there is one.
    /// The launcher commands start through now (empty: none), for programs started
    /// outside the registry that must be confined alike.
    pub fn launcher(&self) -> Vec<std::ffi::OsString> {
        lock(&self.launcher).clone()
    }

    fn launched(&self, invocation: crate::shell::Invocation) -> crate::shell::Invocation {
        let launcher = lock(&self.launcher).clone();
        let Some((program, first)) = launcher.split_first() else {
            return invocation;
        };
        let mut args = first.to_vec();
        args.push(invocation.program);
        args.extend(invocation.args);
        crate::shell::Invocation {
            program: program.clone(),
            args,
        }
    }

    /// The directory spill files are written in.
    pub fn spill_dir(&self) -> &std::path::Path {
        &self.config.spill_dir
    }

    /// How many sessions are live.
    pub fn live(&self) -> usize {
        self.sessions().len()
    }

    /// The shell commands run in.
    pub fn shell(&self) -> &Shell {
        &self.shell
    }

    fn spill(&self, id: u64) -> SpillConfig {
        SpillConfig {
            dir: self.config.spill_dir.clone(),
            cap: self.config.spill_cap,
            prefix: format!("exec-{id}"),
        }
    }

    async fn finish(
        &self,
        session: &Arc<Session>,
        collected: crate::session::Collected,
        started: Instant,
        mut notes: Vec<String>,
    ) -> Outcome {
        let (exit_code, signaled, session_id) = match collected.exit {
            Some(Exit { code, signaled }) => {
                self.sessions().remove(&session.id);
                // The shell is gone; anything it left running in the background goes too. The
                // reply need not wait for that: the runtime's blocking pool finishes it (and a
                // runtime never shuts down before its blocking tasks end).
                let done = session.clone();
                drop(tokio::task::spawn_blocking(move || done.terminate()));
                let first_failure = collected
                    .items
                    .iter()
                    .find(|(_, c)| *c != 0)
                    .map(|(_, c)| *c);
                (Some(first_failure.unwrap_or(code)), signaled, None)
            }
            None => (None, false, Some(session.id)),
        };
        if let Some(file) = &collected.output.file
            && let Some(owner) = Some(session.owner()).filter(|o| !o.is_empty())
        {
            let mut spills = lock(&self.spills);
            if spills.len() >= SPILLS_REMEMBERED {
                spills.pop_front();
            }
            spills.push_back((file.clone(), session.id, owner.to_string()));
        }
        if collected.output.file_cut {
            // The marker in the output names the file; only its being cut needs saying.
            notes.push(format!(
                "the spill file stopped at {} bytes; the output's end is not kept",
                self.config.spill_cap
            ));
        }
        Outcome {
            session_id,
            exit_code,
            signaled,
            items: collected.items,
            output: collected.output,
            wall: started.elapsed(),
            notes,
        }
    }

    /// The user's environment as commands get it now: the login snapshot (taken again when
    /// stale), or a login shell when there is none.
    async fn prepared(&self) -> Prepared {
        match &self.snapshots {
            Some(s) => {
                let s = s.clone();
                tokio::task::spawn_blocking(move || s.prepare())
                    .await
                    .unwrap_or_else(|e| Prepared::Login(format!("snapshot failed: {e}")))
            }
            None => Prepared::Login(String::new()),
        }
    }

    /// Starts `run` and collects its output for up to `yield_for`.
    pub async fn exec(
        &self,
        run: Run,
        yield_for: Duration,
        budget: usize,
    ) -> Result<Outcome, TerminalError> {
        let started = Instant::now();
        let mut notes = Vec::new();
        let spill_hint = run.spill_hint;
        let label = match &run.commands {
            Commands::One(c) => c.clone(),
            Commands::Batch(items) => items.join(" ; "),
        };
        let prepared = self.prepared().await;
        if let Prepared::Login(why) | Prepared::Plain(why) = &prepared
            && !why.is_empty()
        {
            notes.push(why.clone());
        }
        let recipe = match (&prepared, &self.config.snapshot_dir) {
            (Prepared::Snapshot(file, generation), Some(dir))
                if self.config.warm_shell
                    && self.config.launcher.is_empty()
                    && warm::supported(&self.shell) =>
            {
                Some(Recipe {
                    shell: self.shell.clone(),
                    snapshot: file.clone(),
                    generation: *generation,
                    env_remove: run.env_remove.clone(),
                    dir: dir.clone(),
                })
            }
            _ => None,
        };
        let back_to_back = lock(&self.warm).note_command(Instant::now());
        if recipe.is_some() {
            self.await_refill().await;
        }
        let warm = recipe.as_ref().and_then(|r| self.take_warm(r));
        // Commands coming back to back: the next shells start now, beside this command,
        // rather than after it.
        if back_to_back && let Some(r) = &recipe {
            self.refill(r.clone());
        }
        let (script, batch_nonce) = match &run.commands {
            Commands::One(cmd) => (cmd.clone(), None),
            Commands::Batch(cmds) => {
                let n = nonce();
                (batch_script(self.shell.kind, cmds, &n), Some(n))
            }
        };
        // A warm shell gets its command through its FIFO; one that cannot take it is ended
        // and the command starts cold.
        let warm = match warm {
            Some(w) => {
                let Some(text) = warm::command_text(&run.cwd, &run.env, &run.env_remove, &script)
                else {
                    // A NUL in the command: the cold path refuses it; the shell stays warm.
                    let full = lock(&self.warm).put_back(w);
                    if let Some(w) = full {
                        discard(w);
                    }
                    return Err(TerminalError::Spawn(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "the command holds a NUL byte",
                    )));
                };
                w.session.expect_markers(batch_nonce.clone());
                let handed = w.clone();
                match tokio::task::spawn_blocking(move || warm::send(&handed, &text)).await {
                    Ok(Ok(())) => Some(w),
                    // Not taken (or the hand-off never ran): the shell is ended, not left
                    // waiting.
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "warm shell did not take its command");
                        discard(w);
                        None
                    }
                    Err(_) => {
                        discard(w);
                        None
                    }
                }
            }
            None => None,
        };
        // The yield counts from the command's start, not from a wait for the snapshot.
        let deadline = tokio::time::Instant::now() + yield_for;
        let mut evicted = Vec::new();
        let session = {
            let mut sessions = self.sessions();
            while sessions.len() >= self.config.max_sessions {
                // Make room: a finished session first, else the one idle longest.
                let victim = sessions
                    .values()
                    .min_by_key(|s| (!s.exited(), s.last_used()))
                    .map(|s| (s.id, s.last_used().elapsed()));
                let Some((id, idle)) = victim else { break };
                if let Some(s) = sessions.remove(&id) {
                    // Another connector's session is not named: its id is its secret.
                    let which = if s.owner() == run.owner {
                        format!("session {id}")
                    } else {
                        "a session of another connector".to_string()
                    };
                    notes.push(format!(
                        "{which} (idle {} s) was ended to stay within {} live sessions",
                        idle.as_secs(),
                        self.config.max_sessions
                    ));
                    evicted.push(s);
                }
            }
            match warm {
                // Its id was drawn when it started; one now in use (about 2^-53) is not
                // taken, the shell is ended and the command runs cold.
                Some(w) if !sessions.contains_key(&w.session.id) && w.session.claim(&run.owner) => {
                    sessions.insert(w.session.id, w.session.clone());
                    w.session
                }
                other => {
                    if let Some(w) = other {
                        discard(w);
                    }
                    let id = new_id(&sessions)?;
                    let spawn = Spawn {
                        invocation: self.launched(self.shell.prepared_invocation(
                            &script,
                            &prepared,
                            &run.env,
                            &run.env_remove,
                        )),
                        cwd: run.cwd,
                        // Through a launcher, the call's variables reach the shell only by
                        // its script: in the launcher's own environment a variable such as
                        // LD_PRELOAD would run code before it confines anything.
                        env: if self.has_launcher() {
                            Vec::new()
                        } else {
                            run.env
                        },
                        env_remove: run.env_remove,
                        batch_nonce,
                        owner: Some(run.owner),
                        group: self.group()?,
                        joins_itself: false,
                    };
                    let session =
                        Session::start(id, spawn, self.spill(id)).map_err(TerminalError::Spawn)?;
                    sessions.insert(id, session.clone());
                    session
                }
            }
        };
        session.describe(&label);
        session.set_spill_hint(spill_hint);
        end(evicted).await;
        let collected = session.collect(Wait::Full, deadline, budget).await;
        // The next shell starts once this command has had the machine to itself.
        if let Some(r) = recipe {
            self.refill(r);
        }
        Ok(self.finish(&session, collected, started, notes).await)
    }

    /// A warm shell being started is nearly ready: with none ready, it is waited for (at most
    /// [`warm::READY_WITHIN`]) rather than a cold shell started beside it.
    async fn await_refill(&self) {
        use std::sync::atomic::Ordering;
        let until = tokio::time::Instant::now() + warm::READY_WITHIN;
        while lock(&self.warm).is_empty()
            && self.refilling.load(Ordering::SeqCst)
            && tokio::time::Instant::now() < until
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The oldest warm shell that fits `recipe` (same snapshot, same removals) and still
    /// lives; stale ones are ended.
    fn take_warm(&self, recipe: &Recipe) -> Option<Warm> {
        let (taken, stale) = lock(&self.warm).take(|w| {
            w.generation == recipe.generation
                && w.env_remove == recipe.env_remove
                && !w.session.exited()
                && w.session.age() < warm::USABLE_FOR
        });
        stale.into_iter().for_each(discard);
        taken
    }

    /// Starts warm shells in the background until as many are ready as the pool wants now
    /// (one, or [`warm::POOL_MAX`] while commands come back to back). One thread starts
    /// them one after another: concurrent calls would otherwise each start their own.
    fn refill(&self, recipe: Recipe) {
        use std::sync::atomic::Ordering;
        if !lock(&self.warm).short(Instant::now()) || self.closed.load(Ordering::SeqCst) {
            return;
        }
        *lock(&self.refill_recipe) = Some(recipe);
        if self.refilling.swap(true, Ordering::SeqCst) {
            return;
        }
        let latest = self.refill_recipe.clone();
        let refilling = self.refilling.clone();
        let pool = self.warm.clone();
        let closed = self.closed.clone();
        let epoch = self.warm_epoch.clone();
        let started_in = epoch.load(Ordering::SeqCst);
        let spill_dir = self.config.spill_dir.clone();
        let spill_cap = self.config.spill_cap;
        let tree = self.tree.clone();
        let _ = std::thread::Builder::new()
            .name("gantry-warm-start".into())
            .spawn(move || {
                // Whether another shell is wanted, and may be started.
                let wanted = || {
                    !closed.load(Ordering::SeqCst)
                        && epoch.load(Ordering::SeqCst) == started_in
                        && lock(&pool).short(Instant::now())
                };
                loop {
                    let mut failed = false;
                    while wanted() {
                        let Some(recipe) = lock(&latest).clone() else {
                            break;
                        };
                        if !start_one(&recipe, &spill_dir, spill_cap, tree.as_ref(), |w| {
                            let mut p = lock(&pool);
                            if closed.load(Ordering::SeqCst)
                                || epoch.load(Ordering::SeqCst) != started_in
                            {
                                Some(w)
                            } else {
                                p.keep(w)
                            }
                        }) {
                            failed = true;
                            break;
                        }
                    }
                    refilling.store(false, Ordering::SeqCst);
                    // A command that found the flag still set left its shell to this thread;
                    // a start that failed is tried again by the next command, not here.
                    if failed || !wanted() || refilling.swap(true, Ordering::SeqCst) {
                        return;
                    }
                }
            });
    }

    /// Starts `argv` (a program and its arguments, each passed as one word) as a program the
    /// server holds: in the user's environment like a command (the login snapshot), in a PTY,
    /// process tree and cgroup of its own, its output spilled like a command's. It is not one
    /// of the model's sessions; [`Held::end`] or the registry's shutdown ends it.
    ///
    /// `env` is set in the program's environment only, never written into a command line
    /// (which every local user can read in `/proc`), so it may carry a secret. On Windows the
    /// program starts directly, without a shell, so no word is ever parsed by one; a batch
    /// file (`.cmd`, `.bat`), which cmd.exe would parse, is refused.
    pub async fn start_program(
        &self,
        argv: &[String],
        cwd: PathBuf,
        env: Vec<(String, String)>,
        owner: String,
    ) -> Result<Held, TerminalError> {
        if argv.first().is_none_or(String::is_empty) {
            return Err(TerminalError::Spawn(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "no program to start",
            )));
        }
        if argv.iter().any(|w| w.contains('\0')) {
            return Err(TerminalError::Spawn(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "an argument holds a NUL byte",
            )));
        }
        let prepared = self.prepared().await;
        let invocation = match self.shell.kind {
            crate::shell::ShellKind::Posix => {
                let script = crate::shell::command_line(argv);
                self.shell.prepared_invocation(&script, &prepared, &[], &[])
            }
            crate::shell::ShellKind::PowerShell | crate::shell::ShellKind::Cmd => {
                // Resolved here, to the very file that runs: a bare name would otherwise be
                // found through PATHEXT, a batch shim included.
                let path = std::env::var_os("PATH").unwrap_or_default();
                let program =
                    crate::programs::windows_executable(&argv[0], &path).map_err(|e| {
                        TerminalError::Spawn(std::io::Error::new(std::io::ErrorKind::NotFound, e))
                    })?;
                crate::shell::Invocation {
                    program: program.into_os_string(),
                    args: argv[1..].iter().map(Into::into).collect(),
                }
            }
        };
        let id = {
            let sessions = self.sessions();
            let held = lock(&self.held);
            loop {
                let id = new_id(&sessions)?;
                if !held.contains_key(&id) {
                    break id;
                }
            }
        };
        let spawn = Spawn {
            invocation,
            cwd,
            env,
            env_remove: Vec::new(),
            batch_nonce: None,
            owner: Some(owner),
            group: self.group()?,
            joins_itself: false,
        };
        let spill = SpillConfig {
            dir: self.config.spill_dir.clone(),
            cap: self.config.spill_cap,
            prefix: format!("agent-{id}"),
        };
        let session = Session::start(id, spawn, spill).map_err(TerminalError::Spawn)?;
        session.describe(&argv.join(" "));
        lock(&self.held).insert(id, session.clone());
        Ok(Held {
            session,
            table: Arc::downgrade(&self.held),
        })
    }

    /// The session `id` of `owner`; another owner's session is as unknown as a missing one.
    fn get(&self, owner: &str, id: u64) -> Result<Arc<Session>, TerminalError> {
        self.sessions()
            .get(&id)
            .filter(|s| s.owner() == owner)
            .cloned()
            .ok_or(TerminalError::UnknownSession(id))
    }

    /// Writes `chars` (or, when empty, only polls) and collects output.
    pub async fn write_stdin(
        &self,
        owner: &str,
        id: u64,
        chars: &str,
        yield_for: Duration,
        budget: usize,
    ) -> Result<Outcome, TerminalError> {
        let started = Instant::now();
        let session = self.get(owner, id)?;
        let deadline = tokio::time::Instant::now() + yield_for;
        let mut notes = Vec::new();
        let wait = if chars.is_empty() {
            Wait::FirstOutput
        } else {
            // A program that does not read its input fills the PTY's buffer and blocks the
            // writer: the write happens off the async thread and the call stops waiting for
            // it at the yield time (ending the session ends the write too).
            let writer = session.clone();
            let text = chars.to_string();
            let write = tokio::task::spawn_blocking(move || writer.write(&text));
            match tokio::time::timeout_at(deadline, write).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => return Err(TerminalError::Write(id, e)),
                Ok(Err(e)) => {
                    return Err(TerminalError::Write(id, std::io::Error::other(e.to_string())));
                }
                Err(_) => notes.push(
                    "the program has not read all of the input yet (it is not reading its input); the rest is still being written".to_string(),
                ),
            }
            Wait::Full
        };
        let collected = session.collect(wait, deadline, budget).await;
        Ok(self.finish(&session, collected, started, notes).await)
    }

    /// Ends a session's whole process tree and reports its final state and last output.
    pub async fn kill(
        &self,
        owner: &str,
        id: u64,
        budget: usize,
    ) -> Result<Outcome, TerminalError> {
        let started = Instant::now();
        let session = {
            let mut sessions = self.sessions();
            match sessions.get(&id) {
                Some(s) if s.owner() == owner => sessions.remove(&id),
                _ => None,
            }
        }
        .ok_or(TerminalError::UnknownSession(id))?;
        end(vec![session.clone()]).await;
        let collected = session
            .collect(Wait::Full, tokio::time::Instant::now(), budget)
            .await;
        let mut outcome = self.finish(&session, collected, started, Vec::new()).await;
        outcome
            .notes
            .push(format!("session {id} and its process tree were ended"));
        Ok(outcome)
    }

    /// A fresh cgroup of this instance's, for a program started outside a command session,
    /// when sessions get cgroups here (`None` otherwise, or when one cannot be made).
    pub fn new_group(&self) -> Option<Arc<crate::cgroup::Group>> {
        let tree = self.tree.as_ref()?;
        match tree.group() {
            Ok(g) => Some(Arc::new(g)),
            Err(e) => {
                tracing::debug!(error = %e, "no cgroup for a program");
                None
            }
        }
    }

    /// The directory of this instance's session cgroups, when sessions get them.
    pub fn cgroup_dir(&self) -> Option<&std::path::Path> {
        self.tree.as_ref().map(|t| t.dir())
    }

    /// The live sessions, oldest first, as the user sees them (any owner).
    pub fn list(&self) -> Vec<Listed> {
        let mut all: Vec<Listed> = self
            .sessions()
            .values()
            .map(|s| Listed {
                id: s.id,
                owner: s.owner().to_string(),
                command: s.command().to_string(),
                pid: s.pid(),
                age: s.age(),
                idle: s.last_used().elapsed(),
                exited: s.exited(),
            })
            .collect();
        all.sort_by_key(|l| std::cmp::Reverse(l.age));
        all
    }

    /// Ends a session and its process tree whoever started it (the user's own kill, from
    /// the control page); false when no live session has this id.
    pub async fn end_any(&self, id: u64) -> bool {
        let Some(session) = self.sessions().remove(&id) else {
            return false;
        };
        end(vec![session]).await;
        true
    }

    /// Ends sessions unused for longer than the idle timeout; returns their ids.
    pub async fn reap_idle(&self) -> Vec<u64> {
        // Warm shells kept for a run of commands that has stopped, or too old to use.
        let surplus = lock(&self.warm).surplus(Instant::now());
        surplus.into_iter().for_each(discard);
        let idle: Vec<Arc<Session>> = {
            let mut sessions = self.sessions();
            let ids: Vec<u64> = sessions
                .values()
                .filter(|s| s.last_used().elapsed() > self.config.idle_timeout)
                .map(|s| s.id)
                .collect();
            ids.iter().filter_map(|id| sessions.remove(id)).collect()
        };
        let ids = idle.iter().map(|s| s.id).collect();
        end(idle).await;
        ids
    }

    /// Ends the warm shell, if one is kept ready (commands may no longer run). The next
    /// command, once allowed again, starts one afresh.
    pub fn end_warm(&self) {
        let taken = {
            let mut pool = lock(&self.warm);
            self.warm_epoch
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            pool.drain()
        };
        taken.into_iter().for_each(discard);
    }

    /// Ends every session (server shutdown).
    pub fn shutdown(&self) {
        let mut all: Vec<Arc<Session>> = self.sessions().drain().map(|(_, s)| s).collect();
        all.extend(lock(&self.held).drain().map(|(_, s)| s));
        {
            let mut pool = lock(&self.warm);
            self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
            for w in pool.drain() {
                w.remove_files();
                all.push(w.session);
            }
        }
        terminate_all(&all);
        if let Some(tree) = &self.tree {
            tree.end();
        }
    }
}
