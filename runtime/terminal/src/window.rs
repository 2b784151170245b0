//! The output a session produced since the last call collected it: all of it in memory while
//! it is small, then a bounded head and tail in memory plus the whole stream in a private spill
//! file (up to a cap), so memory stays bounded however much a process prints.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Bytes kept entirely in memory before a window starts spilling.
const IN_MEMORY: usize = 1 << 20;
/// Bytes of head and of tail kept in memory once spilling.
const KEEP: usize = 256 << 10;

/// How the marker of cut output tells the model to read the omitted lines: with the `read`
/// tool (a connector that has one), or with a command (a connector whose only way to look
/// at a file is its shell).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpillHint {
    /// `read {"ranges": [...]}`.
    #[default]
    ReadTool,
    /// `sed -n 'A,Bp' FILE` (PowerShell's `Get-Content` on Windows).
    Command,
}

impl SpillHint {
    fn how(self, path: &Path, first: u64, last: u64) -> String {
        match self {
            SpillHint::ReadTool => format!(
                "to see them: read {{\"ranges\": [{{\"path\": {}, \"start_line\": {first}, \"end_line\": {last}}}]}}",
                json_string(&path.to_string_lossy())
            ),
            SpillHint::Command if cfg!(windows) => format!(
                "to see them: Get-Content -LiteralPath '{}' | Select-Object -Skip {} -First {}",
                path.display().to_string().replace('\'', "''"),
                first.saturating_sub(1),
                last.saturating_sub(first) + 1
            ),
            SpillHint::Command => format!(
                "to see them: sed -n '{first},{last}p' '{}'",
                path.display().to_string().replace('\'', r"'\''")
            ),
        }
    }
}

/// Where spill files go and how big they may grow.
#[derive(Debug, Clone)]
pub struct SpillConfig {
    /// Directory for spill files (private; created if needed).
    pub dir: PathBuf,
    /// Largest spill file.
    pub cap: u64,
    /// Prefix of file names (the session).
    pub prefix: String,
}

#[derive(Debug)]
struct Spill {
    file: File,
    path: PathBuf,
    written: u64,
    cut: bool,
}

/// Output drained from a window, bounded for inline use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drained {
    /// Text for the model (head and tail when cut).
    pub text: String,
    /// Whether `text` is not the whole output.
    pub truncated: bool,
    /// Bytes of output in the window.
    pub total_bytes: u64,
    /// Lines of output in the window.
    pub total_lines: u64,
    /// Spill file holding the whole window, when `truncated`.
    pub file: Option<PathBuf>,
    /// The spill file itself stopped at its cap.
    pub file_cut: bool,
}

/// `s` as a JSON string, for a call the model can copy.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One collection window.
#[derive(Debug)]
pub struct Window {
    config: SpillConfig,
    seq: u32,
    all: String,
    head: String,
    tail: String,
    spill: Option<Spill>,
    total_bytes: u64,
    total_lines: u64,
    /// The window's output so far ends inside a line.
    open_line: bool,
    spill_error: Option<String>,
    hint: SpillHint,
}

fn private_file(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options.open(path)
}

fn floor_char(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

impl Window {
    /// An empty window spilling per `config`.
    pub fn new(config: SpillConfig) -> Self {
        Self {
            config,
            seq: 0,
            all: String::new(),
            head: String::new(),
            tail: String::new(),
            spill: None,
            total_bytes: 0,
            total_lines: 0,
            open_line: false,
            spill_error: None,
            hint: SpillHint::default(),
        }
    }

    /// Says how markers of cut output point at the spill file from now on.
    pub fn set_hint(&mut self, hint: SpillHint) {
        self.hint = hint;
    }

    /// Whether anything arrived since the last drain.
    pub fn is_empty(&self) -> bool {
        self.total_bytes == 0
    }

    fn open_spill(&mut self) {
        if self.spill.is_some() || self.spill_error.is_some() {
            return;
        }
        self.seq += 1;
        let mut tag = [0u8; 4];
        let _ = getrandom::fill(&mut tag);
        let name = format!(
            "{}-{}-{}.log",
            self.config.prefix,
            self.seq,
            tag.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        let path = self.config.dir.join(name);
        let opened = std::fs::create_dir_all(&self.config.dir).and_then(|()| private_file(&path));
        match opened {
            Ok(file) => {
                self.spill = Some(Spill {
                    file,
                    path,
                    written: 0,
                    cut: false,
                })
            }
            Err(e) => self.spill_error = Some(format!("no spill file: {e}")),
        }
    }

    fn write_spill(&mut self, text: &str) {
        let Some(spill) = &mut self.spill else { return };
        if spill.cut {
            return;
        }
        let room = self.config.cap.saturating_sub(spill.written);
        let take = floor_char(text, usize::try_from(room).unwrap_or(usize::MAX));
        if spill.file.write_all(&text.as_bytes()[..take]).is_err() {
            spill.cut = true;
            return;
        }
        spill.written += take as u64;
        if take < text.len() {
            spill.cut = true;
        }
    }

    /// Appends sanitized text.
    pub fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.total_bytes += text.len() as u64;
        self.total_lines += text.matches('\n').count() as u64;
        self.open_line = !text.ends_with('\n');
        if self.spill.is_none() && self.spill_error.is_none() {
            self.all.push_str(text);
            if self.all.len() > IN_MEMORY {
                // Too big to hold: keep head and tail, send the whole stream to disk.
                self.spill_window();
            }
            return;
        }
        self.write_spill(text);
        self.tail.push_str(text);
        if self.tail.len() > 2 * KEEP {
            let t = ceil_char(&self.tail, self.tail.len() - KEEP);
            self.tail.drain(..t);
        }
    }

    /// Moves the in-memory window to the spill file, keeping only its head and tail.
    fn spill_window(&mut self) {
        self.open_spill();
        let all = std::mem::take(&mut self.all);
        self.write_spill(&all);
        let h = floor_char(&all, KEEP);
        self.head = all[..h].to_string();
        let t = ceil_char(&all, all.len().saturating_sub(KEEP));
        self.tail = all[t..].to_string();
    }

    /// Takes what arrived, bounded to `budget` bytes inline, and starts a new window.
    pub fn drain(&mut self, budget: usize) -> Drained {
        let spilling = self.spill.is_some() || !self.head.is_empty();
        let total_bytes = self.total_bytes;
        // A last line without its newline counts too, whether it is in memory or spilled.
        let total_lines = self.total_lines + u64::from(self.total_bytes > 0 && self.open_line);
        let (head, tail, truncated) = if !spilling && self.all.len() <= budget {
            (std::mem::take(&mut self.all), String::new(), false)
        } else {
            if !spilling {
                // Over the inline budget: the whole window goes to a file too.
                self.spill_window();
            }
            let half = budget / 2;
            let h = floor_char(&self.head, half);
            let tail = std::mem::take(&mut self.tail);
            let t = ceil_char(&tail, tail.len().saturating_sub(budget - h));
            (self.head[..h].to_string(), tail[t..].to_string(), true)
        };
        let spill = self.spill.take();
        let shown_bytes = (head.len() + tail.len()) as u64;
        let text = if truncated {
            // Lines are counted so the marker can name the omitted ones and the one call that
            // shows them.
            let first = head.matches('\n').count() as u64 + 1;
            // A tail that starts mid-line shows that line only in part: it counts as omitted.
            let last = (total_lines + u64::from(tail.ends_with('\n')))
                .saturating_sub(tail.matches('\n').count() as u64);
            let omitted = total_bytes.saturating_sub(shown_bytes);
            let how = match (&spill, &self.spill_error) {
                (Some(s), _) => self.hint.how(&s.path, first, last),
                (None, Some(e)) => e.clone(),
                (None, None) => "no spill file".to_string(),
            };
            format!(
                "{head}\n[… {omitted} of {total_bytes} bytes omitted (lines {first}-{last} of {total_lines}); {how} …]\n{tail}"
            )
        } else {
            head
        };
        let drained = Drained {
            text,
            truncated,
            total_bytes,
            total_lines,
            file_cut: spill.as_ref().is_some_and(|s| s.cut),
            file: spill.map(|s| s.path),
        };
        self.all.clear();
        self.head.clear();
        self.tail.clear();
        self.total_bytes = 0;
        self.total_lines = 0;
        self.open_line = false;
        self.spill_error = None;
        drained
    }
}

/// Removes spill files older than `max_age` from `dir`.
pub fn prune(dir: &Path, max_age: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now();
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > max_age);
        if old && e.file_name().to_string_lossy().ends_with(".log") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(dir: &Path, cap: u64) -> Window {
        Window::new(SpillConfig {
            dir: dir.to_path_buf(),
            cap,
            prefix: "t".into(),
        })
    }

    #[test]
    fn small_output_stays_whole_and_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = window(dir.path(), 1 << 20);
        w.push("a\nb");
        let d = w.drain(100);
        assert_eq!(
            (d.text.as_str(), d.truncated, d.total_lines, d.file),
            ("a\nb", false, 2, None)
        );
        assert!(w.is_empty());
    }

    #[test]
    fn over_budget_keeps_head_and_tail_and_spills_everything() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = window(dir.path(), 1 << 20);
        let body: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        w.push(&body);
        let d = w.drain(40);
        assert!(d.truncated);
        assert!(d.text.starts_with("line 0\nline 1\nline"), "{}", d.text);
        assert!(d.text.ends_with("line 999\n"), "{}", d.text);
        let file = d.file.unwrap_or_default();
        assert_eq!(std::fs::read_to_string(&file).unwrap_or_default(), body);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(
                std::fs::metadata(&file)
                    .map(|m| m.permissions().mode() & 0o777)
                    .ok(),
                Some(0o600)
            );
        }
    }

    /// The command a marker names prints exactly the lines it says were omitted, even from a
    /// spill directory whose name a shell would otherwise split or expand.
    #[cfg(unix)]
    #[test]
    fn a_command_hint_prints_the_omitted_lines() {
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("it's $HOME");
        std::fs::create_dir(&spill).unwrap();
        let mut w = window(&spill, 1 << 20);
        w.set_hint(SpillHint::Command);
        let body: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        w.push(&body);
        let d = w.drain(40);
        let marker = d.text.lines().find(|l| l.starts_with("[…")).unwrap();
        let command = marker
            .split("to see them: ")
            .nth(1)
            .and_then(|c| c.strip_suffix(" …]"))
            .unwrap();
        let (first, last) = marker
            .split("(lines ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|r| r.split_once('-'))
            .unwrap();
        let (first, last): (usize, usize) = (first.parse().unwrap(), last.parse().unwrap());
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .output()
            .unwrap();
        let expected: String = (first - 1..last).map(|i| format!("line {i}\n")).collect();
        assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "{command}");
        assert!(first > 1 && last < 1000, "{marker}");
    }

    #[test]
    fn huge_output_is_bounded_in_memory_and_the_spill_file_is_capped() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = window(dir.path(), 3 << 20);
        let chunk = "x".repeat(64 << 10);
        for _ in 0..160 {
            // 10 MiB in all.
            w.push(&chunk);
            assert!(w.all.len() + w.head.len() + w.tail.len() <= IN_MEMORY + 3 * KEEP);
        }
        let d = w.drain(1000);
        assert_eq!(d.total_bytes, 10 << 20);
        assert!(d.file_cut);
        assert_eq!(
            std::fs::metadata(d.file.unwrap_or_default())
                .map(|m| m.len())
                .ok(),
            Some(3 << 20)
        );
        assert!(d.text.len() < 1200);
    }
}
