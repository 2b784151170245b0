//! One command in a real PTY: a reader thread moves output into the session's window, a
//! waiter thread records the exit, and callers collect what arrived within their yield time.

use std::io::{Read as _, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::console::{self, Exit, Spawn};
use crate::process_tree;
use crate::sanitize::Sanitizer;
use crate::shell::parse_marker;
use crate::window::{Drained, SpillConfig, Window};

/// A program's question for the cursor position (Device Status Report 6).
const CURSOR_QUERY: &[u8] = b"\x1b[6n";
/// The answer: row 1, column 1.
const CURSOR_AT_TOP_LEFT: &str = "\x1b[1;1R";
/// How long output keeps being gathered after the process exits, for what is still in the
/// PTY (unless the PTY closes first).
const AFTER_EXIT: Duration = Duration::from_millis(100);
/// How long a poll waits after the first output, to return a burst whole.
const SETTLE: Duration = Duration::from_millis(30);

/// Holds back a batch marker line until it is complete, turns it into an item result, and
/// drops the blank line the script prints before it.
#[derive(Debug, Default)]
struct MarkerFilter {
    nonce: Option<String>,
    partial: String,
    blank_pending: bool,
    /// The start of the current line was already shown (a prompt, or a line that arrived in
    /// pieces): its newline ends it, it is not a blank line.
    mid_line: bool,
}

impl MarkerFilter {
    fn feed(&mut self, text: &str, items: &mut Vec<(usize, i32)>, out: &mut String) {
        let Some(nonce) = &self.nonce else {
            out.push_str(text);
            return;
        };
        let prefix = crate::shell::marker(nonce);
        self.partial.push_str(text);
        while let Some(nl) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=nl).collect();
            let body = &line[..line.len() - 1];
            if std::mem::take(&mut self.mid_line) {
                out.push_str(&line);
            } else if let Some(item) = parse_marker(body, nonce) {
                items.push(item);
                self.blank_pending = false;
                out.push_str(&format!("[exit {}]\n", item.1));
            } else if body.is_empty() {
                if self.blank_pending {
                    out.push('\n');
                }
                self.blank_pending = true;
            } else {
                if self.blank_pending {
                    out.push('\n');
                    self.blank_pending = false;
                }
                out.push_str(&line);
            }
        }
        // A partial line that cannot become a marker is shown now (a prompt, say).
        if !self.partial.is_empty()
            && !prefix.starts_with(&self.partial)
            && !self.partial.starts_with(&prefix)
        {
            if self.blank_pending {
                out.push('\n');
                self.blank_pending = false;
            }
            out.push_str(&std::mem::take(&mut self.partial));
            self.mid_line = true;
        }
    }
}

#[derive(Debug)]
struct State {
    window: Window,
    sanitizer: Sanitizer,
    filter: MarkerFilter,
    items: Vec<(usize, i32)>,
    exit: Option<(Exit, Instant)>,
    eof: bool,
    last_used: Instant,
    /// A file that goes when the process ends (a warm shell's command).
    remove_on_exit: Option<std::path::PathBuf>,
}

/// Unicode format characters that change how text around them reads (bidirectional
/// overrides and isolates, zero-width joiners and marks).
fn is_format(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// A live command.
pub struct Session {
    /// Its id.
    pub id: u64,
    /// The connector instance that started it: only it may reach the session.
    owner: std::sync::OnceLock<String>,
    /// What it runs, shortened, for the user's list of sessions.
    command: std::sync::OnceLock<String>,
    pid: u32,
    tag: String,
    start_ticks: u64,
    started: Instant,
    writer: Mutex<Option<Box<dyn Write + Send>>>,
    state: Mutex<State>,
    notify: tokio::sync::Notify,
    // Keeps the PTY open for the life of the session (nothing to keep for pipes).
    _terminal: Mutex<Option<Box<dyn portable_pty::MasterPty + Send>>>,
    /// The session's cgroup, if it has one: what ends its tree.
    group: Option<Arc<crate::cgroup::Group>>,
    #[cfg(windows)]
    job: Option<process_tree::JobObject>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// What one collection saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collected {
    /// Output since the last collection, bounded.
    pub output: Drained,
    /// Set once the process has exited.
    pub exit: Option<Exit>,
    /// Batch items finished so far: (1-based index, exit code).
    pub items: Vec<(usize, i32)>,
    /// Wall time since the session started.
    pub age: Duration,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// How a caller wants to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Until the process exits or the deadline passes.
    Full,
    /// Until any output arrives, the process exits, or the deadline passes.
    FirstOutput,
}

impl Session {
    /// Starts `spawn` in a new PTY (on pipes where Windows' pseudo console delivers
    /// nothing; see `console`).
    pub fn start(id: u64, spawn: Spawn, spill: SpillConfig) -> std::io::Result<Arc<Session>> {
        let mut tag_bytes = [0u8; 12];
        getrandom::fill(&mut tag_bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
        let tag: String = tag_bytes.iter().map(|b| format!("{b:02x}")).collect();
        let console::Started {
            pid,
            mut reader,
            writer,
            keep,
            wait,
        } = console::start(&spawn, &tag)?;
        let start_ticks = crate::procfs::start_ticks(pid);
        #[cfg(windows)]
        let job = process_tree::JobObject::for_process(pid).ok();

        let session = Arc::new(Session {
            id,
            owner: spawn
                .owner
                .clone()
                .map_or_else(std::sync::OnceLock::new, std::sync::OnceLock::from),
            command: std::sync::OnceLock::new(),
            pid,
            tag,
            start_ticks,
            started: Instant::now(),
            writer: Mutex::new(Some(writer)),
            state: Mutex::new(State {
                window: Window::new(spill),
                sanitizer: Sanitizer::new(),
                filter: MarkerFilter {
                    nonce: spawn.batch_nonce,
                    ..MarkerFilter::default()
                },
                items: Vec::new(),
                exit: None,
                eof: false,
                last_used: Instant::now(),
                remove_on_exit: None,
            }),
            notify: tokio::sync::Notify::new(),
            _terminal: Mutex::new(keep),
            group: spawn.group,
            #[cfg(windows)]
            job,
        });

        let weak = Arc::downgrade(&session);
        std::thread::Builder::new()
            .name(format!("pty-read-{id}"))
            .stack_size(64 << 10)
            .spawn(move || {
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    let n = reader.read(&mut buf).unwrap_or(0);
                    let Some(s) = weak.upgrade() else { return };
                    // A program that asks where the cursor is (`ESC [6n`) waits for the
                    // terminal's answer, and so does Windows' pseudo console at its start when
                    // it inherits the cursor: answered as a terminal at the top left would.
                    if buf[..n]
                        .windows(CURSOR_QUERY.len())
                        .any(|w| w == CURSOR_QUERY)
                    {
                        let _ = s.write(CURSOR_AT_TOP_LEFT);
                    }
                    let mut st = lock(&s.state);
                    let mut text = String::new();
                    let State {
                        sanitizer,
                        filter,
                        items,
                        window,
                        ..
                    } = &mut *st;
                    if n == 0 {
                        sanitizer.finish(&mut text);
                        let mut shown = String::new();
                        filter.feed(&text, items, &mut shown);
                        // Flush whatever partial line the filter held.
                        shown.push_str(&std::mem::take(&mut filter.partial));
                        window.push(&shown);
                        st.eof = true;
                        drop(st);
                        s.notify.notify_waiters();
                        return;
                    }
                    sanitizer.push(&buf[..n], &mut text);
                    let mut shown = String::new();
                    filter.feed(&text, items, &mut shown);
                    window.push(&shown);
                    drop(st);
                    s.notify.notify_waiters();
                }
            })?;
        let weak = Arc::downgrade(&session);
        std::thread::Builder::new()
            .name(format!("pty-wait-{id}"))
            .stack_size(64 << 10)
            .spawn(move || {
                let exit = wait();
                let Some(s) = weak.upgrade() else { return };
                let leftover = {
                    let mut st = lock(&s.state);
                    st.exit = Some((exit, Instant::now()));
                    st.remove_on_exit.take()
                };
                s.notify.notify_waiters();
                if let Some(path) = leftover {
                    let _ = std::fs::remove_file(path);
                }
            })?;
        Ok(session)
    }

    /// Which batch markers the output carries (a shell started ahead of its command learns
    /// it with the command).
    pub fn expect_markers(&self, nonce: Option<String>) {
        lock(&self.state).filter.nonce = nonce;
    }

    /// Removes `path` when the process ends (at once if it has).
    #[cfg_attr(not(unix), allow(dead_code))]
    pub fn remove_on_exit(&self, path: std::path::PathBuf) {
        let mut st = lock(&self.state);
        if st.exit.is_some() {
            drop(st);
            let _ = std::fs::remove_file(path);
        } else {
            st.remove_on_exit = Some(path);
        }
    }

    /// How long ago the process started.
    pub fn age(&self) -> Duration {
        self.started.elapsed()
    }

    /// The connector instance the session answers to (empty until claimed).
    pub fn owner(&self) -> &str {
        self.owner.get().map_or("", String::as_str)
    }

    /// Names what the session runs (shown to the user, never to a model).
    /// Long commands keep their start and their end (what a padded command hides is usually at
    /// its end); control and format characters (bidirectional overrides) are dropped.
    pub fn describe(&self, command: &str) {
        const KEEP: usize = 120;
        let shown: Vec<char> = command
            .chars()
            .filter(|c| !c.is_control() && !is_format(*c))
            .collect();
        let text = if shown.len() <= 2 * KEEP {
            shown.into_iter().collect()
        } else {
            let head: String = shown[..KEEP].iter().collect();
            let tail: String = shown[shown.len() - KEEP..].iter().collect();
            format!("{head} … {tail}")
        };
        let _ = self.command.set(text);
    }

    /// What the session runs, as [`Session::describe`] gave it.
    pub fn command(&self) -> &str {
        self.command.get().map_or("", String::as_str)
    }

    /// The process id of the command's shell.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Gives a session started ahead of its command its owner; false if it had one.
    pub fn claim(&self, owner: &str) -> bool {
        self.owner.set(owner.to_string()).is_ok()
    }

    /// Says how the markers of this session's cut output point at its spill files.
    pub fn set_spill_hint(&self, hint: crate::window::SpillHint) {
        lock(&self.state).window.set_hint(hint);
    }

    /// When the session was last used.
    pub fn last_used(&self) -> Instant {
        lock(&self.state).last_used
    }

    /// Whether the process has exited.
    pub fn exited(&self) -> bool {
        lock(&self.state).exit.is_some()
    }

    /// Sends `chars` to the process's terminal.
    pub fn write(&self, chars: &str) -> std::io::Result<()> {
        // One write at a time: input to a program that does not read blocks its writer, and
        // queueing more behind it would tie up a thread per call.
        let Ok(mut w) = self.writer.try_lock() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                "earlier input is still waiting to be read by the program; poll with empty chars, or kill the session",
            ));
        };
        let Some(w) = w.as_mut() else {
            return Err(std::io::Error::other("stdin is closed"));
        };
        w.write_all(chars.as_bytes())?;
        w.flush()
    }

    /// Waits per `wait` until `deadline`, then takes the output, at most `budget` bytes inline.
    pub async fn collect(
        &self,
        wait: Wait,
        deadline: tokio::time::Instant,
        budget: usize,
    ) -> Collected {
        let mut settle_until: Option<tokio::time::Instant> = None;
        loop {
            // Register interest before looking, so a notification in between is not lost.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let now = tokio::time::Instant::now();
            let wake_at = {
                let st = lock(&self.state);
                match st.exit {
                    Some((_, at)) => {
                        // Exited: take what is still in the PTY for a moment, then stop.
                        if st.eof || at.elapsed() >= AFTER_EXIT {
                            break;
                        }
                        now + AFTER_EXIT.saturating_sub(at.elapsed())
                    }
                    None if now >= deadline => break,
                    None if wait == Wait::FirstOutput && !st.window.is_empty() => {
                        let until = *settle_until.get_or_insert(now + SETTLE);
                        if now >= until {
                            break;
                        }
                        until.min(deadline)
                    }
                    None => deadline,
                }
            };
            let _ = tokio::time::timeout_at(wake_at, notified).await;
        }
        let mut st = lock(&self.state);
        st.last_used = Instant::now();
        Collected {
            output: st.window.drain(budget),
            exit: st.exit.map(|(e, _)| e),
            items: st.items.clone(),
            age: self.started.elapsed(),
        }
    }

    /// Ends every process of the session: by its cgroup where it has one, else by process
    /// group, session, descendants and tag.
    fn end_tree(&self) -> usize {
        match &self.group {
            Some(group) => process_tree::terminate_group(
                self.pid,
                &self.tag,
                self.start_ticks,
                self.started.elapsed(),
                group,
            ),
            None => process_tree::terminate(
                self.pid,
                &self.tag,
                self.start_ticks,
                self.started.elapsed(),
            ),
        }
    }

    /// Ends the whole process tree and waits (briefly) for the exit to be recorded.
    pub fn terminate(&self) -> usize {
        #[cfg(windows)]
        if let Some(job) = &self.job {
            job.terminate();
        }
        let n = self.end_tree();
        // A write blocked on a program that does not read holds the lock; it fails once the
        // tree is gone, so it is not waited for here.
        if let Ok(mut w) = self.writer.try_lock() {
            w.take();
        }
        let until = Instant::now() + Duration::from_secs(2);
        while lock(&self.state).exit.is_none() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        n
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Never leave a process behind, even on a path that forgot to end the session.
        if lock(&self.state).exit.is_none() || !lock(&self.state).eof {
            let _ = self.end_tree();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filtered(pieces: &[&str]) -> (String, Vec<(usize, i32)>) {
        let mut f = MarkerFilter {
            nonce: Some("n".into()),
            ..MarkerFilter::default()
        };
        let (mut out, mut items) = (String::new(), Vec::new());
        for p in pieces {
            f.feed(p, &mut items, &mut out);
        }
        (out, items)
    }

    /// A line that arrives in pieces keeps its newline; only the blank line a batch prints
    /// before its marker is dropped.
    #[test]
    fn a_line_in_pieces_is_not_taken_for_a_blank_line() {
        assert_eq!(filtered(&["hi", "\n"]).0, "hi\n");
        assert_eq!(filtered(&["hi\n", "\n", "x\n"]).0, "hi\n\nx\n");
        let (out, items) = filtered(&["a", "\n", "\n@@gantry-n@@ 1 0\n"]);
        assert_eq!((out.as_str(), items), ("a\n[exit 0]\n", vec![(1, 0)]));
    }
}
