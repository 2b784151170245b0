//! The audit log: one JSON line per tool call in `<state dir>/audit.jsonl` (mode 0600,
//! rotated by size to `audit.jsonl.1` … `.5`, the oldest dropped). It records who, what the
//! call attempted (its audited inputs: command lines and paths as given, refused or not), what
//! was decided on which targets (resolved paths, command lines cut to 200 characters, session
//! ids) by which policies, the outcome and how long it took, and what a `write_stdin` typed
//! (cut the same way); never file contents, outputs or patch bodies. With
//! `audit_command_lines = false` command lines and typed input are withheld too.
//!
//! A call of a tool that acts (not read-only) gets an `intent` line before it acts, joined to
//! its outcome line by `call`: a call that kills gantry is still on record.

use std::io::{BufRead as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;
use tool_api::Decided;

/// Size past which the log is rotated to `audit.jsonl.1`.
const ROTATE_BYTES: u64 = 16 << 20;

/// How many rotated logs are kept (`audit.jsonl.1` newest … `audit.jsonl.5` oldest).
pub const ROTATED_KEPT: u32 = 5;

/// One audited input of a call: what it attempted, as given.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt<'a> {
    /// The input's name.
    pub input: &'a str,
    /// Its value, cut at 200 characters (a list joined by spaces).
    pub value: String,
    /// A command line (withheld under `audit_command_lines = false`).
    #[serde(skip)]
    pub command: bool,
}

/// The log file's name in the state directory.
pub const FILE_NAME: &str = "audit.jsonl";

/// One audit line.
#[derive(Debug, Serialize)]
pub struct Entry<'a> {
    /// Milliseconds since the Unix epoch; written as `time` (RFC 3339, UTC, to the
    /// millisecond, for people) and `ts_ms` (for programs).
    #[serde(flatten, serialize_with = "time_and_ms")]
    pub ts_ms: u128,
    /// The connector the call came through.
    pub connector: &'a str,
    /// The tool name (bounded).
    pub tool: &'a str,
    /// `allow` when every decision allowed, `deny` when one refused, `none` when the call
    /// ended before any (an unknown tool, arguments that do not decode).
    pub decision: &'static str,
    /// Each decision: action, resource as Cedar saw it, allow/deny, deciding policies.
    pub decisions: Vec<Decided>,
    /// Decisions made beyond those recorded.
    #[serde(skip_serializing_if = "is_zero")]
    pub more_decisions: usize,
    /// What the call typed into a running command (`write_stdin`), cut at 200 characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// `ok` or the error code.
    pub outcome: &'a str,
    /// Wall time of the call.
    pub duration_us: u128,
    /// Client-supplied labels (`openai/session`...), for correlation only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<(&'a str, String)>,
    /// What the call attempted, by its tool's audited inputs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attempted: Vec<Attempt<'a>>,
    /// Joins a call's `intent` line to its outcome line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// `intent` on the line written before a call acts (its outcome line has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<&'static str>,
}

fn time_and_ms<S: serde::Serializer>(ms: &u128, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap as _;
    let mut map = s.serialize_map(Some(2))?;
    map.serialize_entry("time", &crate::time::rfc3339_millis(*ms))?;
    map.serialize_entry("ts_ms", ms)?;
    map.end()
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The overall decision of a call from its recorded decisions.
pub fn overall(decisions: &[Decided]) -> &'static str {
    if decisions.is_empty() {
        "none"
    } else if decisions.iter().any(|d| d.decision == "deny") {
        "deny"
    } else {
        "allow"
    }
}

#[derive(Debug)]
struct Open {
    file: std::fs::File,
    path: PathBuf,
    /// Lines written since the file's size was last looked at. Several servers may share the
    /// log, so the size is read from the file, but only every [`SIZE_CHECK_EVERY`] lines: a
    /// `stat` per call would cost more than the line itself.
    unchecked: u32,
}

/// How many lines may go by between two looks at the log's size.
const SIZE_CHECK_EVERY: u32 = 64;

/// An append-only audit log.
#[derive(Debug)]
pub struct Audit {
    file: Option<Mutex<Open>>,
    command_lines: bool,
    /// Every line written, for the control page's live tail (lagging readers lose lines,
    /// never slow a call down).
    live: tokio::sync::broadcast::Sender<std::sync::Arc<str>>,
}

/// Lines a live reader may fall behind by before it skips ahead.
const LIVE_LINES: usize = 256;

fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let file = options.open(path)?;
    // `mode` applies only when the file is created; an existing log is tightened too.
    state_dir::force_private(&file)?;
    Ok(file)
}

impl Audit {
    /// Opens (creating, private) `audit.jsonl` in `dir`; `command_lines` false withholds
    /// command lines from every line.
    pub fn open(dir: &Path, command_lines: bool) -> std::io::Result<Audit> {
        let path = dir.join(FILE_NAME);
        Ok(Audit {
            file: Some(Mutex::new(Open {
                file: open_private(&path)?,
                path,
                unchecked: SIZE_CHECK_EVERY,
            })),
            command_lines,
            live: tokio::sync::broadcast::channel(LIVE_LINES).0,
        })
    }

    /// A log that records nothing (for benches and `check`).
    pub fn disabled() -> Audit {
        Audit {
            file: None,
            command_lines: false,
            live: tokio::sync::broadcast::channel(1).0,
        }
    }

    /// Appends one line; a failure is logged, never fatal to the call.
    pub fn record(&self, entry: &mut Entry<'_>) {
        let Some(file) = &self.file else { return };
        if !self.command_lines {
            for d in entry
                .decisions
                .iter_mut()
                .filter(|d| d.resource_type == "Command")
            {
                d.resource = "(withheld)".into();
            }
            if entry.input.is_some() {
                entry.input = Some("(withheld)".into());
            }
            for a in entry.attempted.iter_mut().filter(|a| a.command) {
                a.value = "(withheld)".into();
            }
        }
        let mut line = match serde_json::to_vec(&*entry) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "audit line does not serialize");
                return;
            }
        };
        line.push(b'\n');
        let Ok(mut open) = file.lock() else {
            tracing::warn!("audit log lock poisoned");
            return;
        };
        open.unchecked += 1;
        let look = open.unchecked >= SIZE_CHECK_EVERY;
        if look {
            open.unchecked = 0;
        }
        if look && open.file.metadata().is_ok_and(|m| m.len() >= ROTATE_BYTES) {
            // Another server sharing the log may have rotated it already: then this file is
            // the old generation, and the one to write is the new file at the path.
            let rotated_by_another = !same_file(&open.file, &open.path);
            let reopened = if rotated_by_another {
                open_private(&open.path)
            } else {
                shift_rotated(&open.path).and_then(|()| open_private(&open.path))
            };
            match reopened {
                Ok(f) => open.file = f,
                Err(e) => tracing::warn!(error = %e, "cannot rotate the audit log"),
            }
        }
        // One write of the whole line: it is in the file (the kernel's, whatever happens to
        // gantry next) before the call goes on.
        if let Err(e) = open.file.write_all(&line) {
            tracing::warn!(error = %e, "cannot write the audit log");
        }
        drop(open);
        if self.live.receiver_count() > 0 {
            let text = String::from_utf8_lossy(&line[..line.len() - 1]);
            let _ = self.live.send(std::sync::Arc::from(text.as_ref()));
        }
    }

    /// Every line written from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<std::sync::Arc<str>> {
        self.live.subscribe()
    }
}

/// The rotated logs move one place older (the oldest is dropped) and the log becomes `.1`.
fn shift_rotated(path: &Path) -> std::io::Result<()> {
    let numbered = |n: u32| path.with_extension(format!("jsonl.{n}"));
    for n in (1..ROTATED_KEPT).rev() {
        match std::fs::rename(numbered(n), numbered(n + 1)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    std::fs::rename(path, numbered(1))
}

/// Whether the open `file` is the one at `path` now.
fn same_file(file: &std::fs::File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        match (file.metadata(), std::fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        // Windows cannot rename an open log anyway; each server keeps its own handle.
        let _ = (file, path);
        true
    }
}

/// What `gantry audit` shows.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this tool.
    pub tool: Option<String>,
    /// Only this overall decision (`allow`, `deny`, `none`).
    pub decision: Option<String>,
}

impl Filter {
    /// Whether an audit line passes the filter.
    pub fn keeps(&self, line: &str) -> bool {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            return false;
        };
        self.tool.as_deref().is_none_or(|t| v["tool"] == t)
            && self.decision.as_deref().is_none_or(|d| v["decision"] == d)
    }
}

/// The last `last` lines of the log at `path` that `filter` keeps, and the offset read to.
pub fn last_lines(
    path: &Path,
    filter: &Filter,
    last: usize,
) -> std::io::Result<(std::collections::VecDeque<String>, u64)> {
    let mut file = std::fs::File::open(path)?;
    let mut kept: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let mut reader = std::io::BufReader::new(&mut file);
    let mut line = String::new();
    while reader.read_line(&mut line)? > 0 {
        if filter.keeps(line.trim_end()) {
            if kept.len() == last {
                kept.pop_front();
            }
            if last > 0 {
                kept.push_back(line.trim_end().to_string());
            }
        }
        line.clear();
    }
    let at = reader.stream_position()?;
    Ok((kept, at))
}

/// `gantry audit`: prints the last `last` lines of the log in `state_dir` that `filter`
/// keeps, then, with `follow`, every new one as it is written (until interrupted).
pub fn show(
    state_dir: &Path,
    filter: &Filter,
    last: usize,
    follow: bool,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let path = state_dir.join(FILE_NAME);
    let (kept, mut at) = last_lines(&path, filter, last)?;
    for l in &kept {
        writeln!(out, "{l}")?;
    }
    out.flush()?;
    if !follow {
        return Ok(());
    }
    let mut line = String::new();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(250));
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if len < at {
            // Rotated: start over on the new file.
            at = 0;
        }
        if len == at {
            continue;
        }
        let mut f = std::fs::File::open(&path)?;
        f.seek(std::io::SeekFrom::Start(at))?;
        let mut reader = std::io::BufReader::new(f);
        loop {
            line.clear();
            let n = reader.read_line(&mut line)?;
            if n == 0 || !line.ends_with('\n') {
                break;
            }
            at += n as u64;
            if filter.keeps(line.trim_end()) {
                writeln!(out, "{}", line.trim_end())?;
                out.flush()?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry<'static> {
        Entry {
            ts_ms: 1,
            connector: "core",
            tool: "read",
            decision: "allow",
            decisions: Vec::new(),
            more_decisions: 0,
            input: None,
            outcome: "ok",
            duration_us: 1,
            labels: Vec::new(),
            attempted: Vec::new(),
            call: None,
            phase: None,
        }
    }

    /// Each rotation keeps the older logs, up to [`ROTATED_KEPT`].
    #[test]
    fn rotation_keeps_the_stated_number_of_old_logs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        for generation in 0..=ROTATED_KEPT + 1 {
            std::fs::write(
                &path,
                format!("{generation}\n").repeat(ROTATE_BYTES as usize / 2),
            )
            .unwrap();
            let audit = Audit::open(dir.path(), false).unwrap();
            audit.record(&mut entry());
        }
        for n in 1..=ROTATED_KEPT {
            let kept =
                std::fs::read_to_string(dir.path().join(format!("audit.jsonl.{n}"))).unwrap();
            let generation = ROTATED_KEPT + 1 - n + 1;
            assert!(
                kept.starts_with(&format!("{generation}\n")),
                "audit.jsonl.{n}"
            );
        }
        assert!(
            !dir.path()
                .join(format!("audit.jsonl.{}", ROTATED_KEPT + 1))
                .exists()
        );
    }

    /// An attempted command line is kept, or withheld with `audit_command_lines = false`;
    /// an attempted path is kept either way.
    #[test]
    fn attempts_are_kept_and_command_lines_withheld_on_request() {
        for keep in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let audit = Audit::open(dir.path(), keep).unwrap();
            let mut e = entry();
            e.attempted = vec![
                Attempt {
                    input: "cmd",
                    value: "echo probe".into(),
                    command: true,
                },
                Attempt {
                    input: "workdir",
                    value: "/w".into(),
                    command: false,
                },
            ];
            audit.record(&mut e);
            let line = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
            assert_eq!(line.contains("echo probe"), keep, "{line}");
            assert!(
                line.contains("\"input\":\"workdir\",\"value\":\"/w\""),
                "{line}"
            );
        }
    }

    /// The size is looked at on the first line and then every 64: a log found full when the
    /// server starts moves aside at once, and one that fills up moves within 64 lines.
    #[test]
    fn a_full_log_moves_aside_within_the_lines_between_two_looks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, vec![b'x'; ROTATE_BYTES as usize]).unwrap();
        let audit = Audit::open(dir.path(), false).unwrap();
        audit.record(&mut entry());
        let rotated = dir.path().join("audit.jsonl.1");
        assert_eq!(std::fs::metadata(&rotated).unwrap().len(), ROTATE_BYTES);
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);

        // Fill it again behind the server's back (another server sharing the log).
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&vec![b'y'; ROTATE_BYTES as usize])
            .unwrap();
        for _ in 0..SIZE_CHECK_EVERY {
            audit.record(&mut entry());
        }
        assert!(std::fs::metadata(&path).unwrap().len() < ROTATE_BYTES);
        assert!(std::fs::metadata(&rotated).unwrap().len() > ROTATE_BYTES);
    }

    /// Two servers share one log: the second to find it full does not rotate again over the
    /// first one's fresh file (which would throw a whole generation away).
    #[cfg(unix)]
    #[test]
    fn a_log_rotated_by_another_server_is_followed_not_rotated_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let a = Audit::open(dir.path(), false).unwrap();
        let b = Audit::open(dir.path(), false).unwrap();
        a.record(&mut entry());
        b.record(&mut entry());
        // Fill the shared file, then let A rotate it.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&vec![b'z'; ROTATE_BYTES as usize])
            .unwrap();
        for _ in 0..SIZE_CHECK_EVERY {
            a.record(&mut entry());
        }
        let rotated = dir.path().join("audit.jsonl.1");
        let old_generation = std::fs::metadata(&rotated).unwrap().len();
        assert!(old_generation > ROTATE_BYTES);
        // B still holds the old generation: its next look follows A's new file.
        for _ in 0..SIZE_CHECK_EVERY {
            b.record(&mut entry());
        }
        // The old generation was kept (B's lines before its look joined it), not replaced
        // by A's fresh file, and B now writes where A does.
        assert!(std::fs::metadata(&rotated).unwrap().len() >= old_generation);
        let fresh = std::fs::read_to_string(&path).unwrap();
        assert!(!fresh.contains('z'));
        let before = fresh.lines().count();
        b.record(&mut entry());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().lines().count(),
            before + 1
        );
    }
}
