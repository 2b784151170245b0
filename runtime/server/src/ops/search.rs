//! Searching without a shell: file names by glob, lines by literal or regex, with ripgrep's
//! own crates (ignore for the walk, grep-searcher for the lines). The walk honours .gitignore
//! and .ignore, skips hidden files, never follows symlinks (so it never leaves the directory it
//! was authorized for), and keeps only the first `max` results in (path, line) order, so memory
//! stays bounded and a cursor can continue exactly where a page ended.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::{WalkBuilder, WalkState};
use tool_api::{Authorized, ToolError};

use super::path_policy::Resolved;

/// How `query` is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A literal string.
    Text,
    /// A regular expression (Rust syntax).
    Regex,
    /// A glob over file paths.
    Name,
}

/// One search.
#[derive(Debug, Clone)]
pub struct Query {
    /// What to look for.
    pub query: String,
    /// How to read it.
    pub mode: Mode,
    /// Only files whose path matches this glob.
    pub glob: Option<String>,
    /// Lines of context around a text match.
    pub context: usize,
    /// Most results returned.
    pub max: usize,
    /// Continue after this (path, line).
    pub after: Option<(String, u64)>,
    /// Stop walking at this instant.
    pub deadline: Instant,
    /// Canonical directories and files never read, whatever the bases (gantry's own files):
    /// withholding their hits afterwards would still have read them.
    pub skip: Vec<PathBuf>,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// Canonical path of the file.
    pub path: PathBuf,
    /// How the path is shown (relative to the search base).
    pub shown: String,
    /// 1-based line (text searches).
    pub line: Option<u64>,
    /// The matching line (text searches), cut to a bounded length.
    pub text: Option<String>,
    /// Lines before.
    pub before: Vec<String>,
    /// Lines after.
    pub after: Vec<String>,
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Results in (path, line) order.
    pub hits: Vec<Hit>,
    /// More results exist after the last one.
    pub more: bool,
    /// The walk stopped at the deadline.
    pub timed_out: bool,
    /// Files looked at.
    pub files: usize,
}

/// Longest line text a result carries.
const MAX_LINE_CHARS: usize = 300;

fn line_text(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let s = s.trim_end_matches(['\n', '\r']);
    if s.chars().count() > MAX_LINE_CHARS {
        let mut cut: String = s.chars().take(MAX_LINE_CHARS).collect();
        cut.push('…');
        cut
    } else {
        s.to_string()
    }
}

type Key = (String, u64);

struct Shared<'a> {
    query: &'a Query,
    hits: Mutex<BTreeMap<Key, Hit>>,
    dropped: AtomicBool,
    timed_out: AtomicBool,
    files: AtomicUsize,
}

impl Shared<'_> {
    fn past_cursor(&self, key: &Key) -> bool {
        self.query.after.as_ref().is_none_or(|after| key > after)
    }

    /// Whether anything from `shown` could still make the page.
    fn could_enter(&self, shown: &str) -> bool {
        if let Some((p, _)) = &self.query.after
            && shown < p.as_str()
        {
            return false;
        }
        let hits = match self.hits.lock() {
            Ok(h) => h,
            Err(p) => p.into_inner(),
        };
        hits.len() <= self.query.max
            || hits
                .keys()
                .next_back()
                .is_none_or(|(last, _)| shown <= last.as_str())
    }

    fn offer(&self, hits: Vec<Hit>) {
        let mut map = match self.hits.lock() {
            Ok(h) => h,
            Err(p) => p.into_inner(),
        };
        for hit in hits {
            let key = (hit.shown.clone(), hit.line.unwrap_or(0));
            if !self.past_cursor(&key) {
                continue;
            }
            map.insert(key, hit);
            // One extra entry tells whether there is a next page.
            while map.len() > self.query.max + 1 {
                map.pop_last();
                self.dropped.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// Collects one file's matches with their context.
struct Lines<'a> {
    path: &'a Path,
    shown: &'a str,
    context: usize,
    pending_before: Vec<String>,
    hits: Vec<Hit>,
}

impl Sink for Lines<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let first = m.line_number().unwrap_or(0);
        for (i, line) in m.lines().enumerate() {
            self.hits.push(Hit {
                path: self.path.to_path_buf(),
                shown: self.shown.to_string(),
                line: Some(first + i as u64),
                text: Some(line_text(line)),
                before: std::mem::take(&mut self.pending_before),
                after: Vec::new(),
            });
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        let text = line_text(c.bytes());
        match c.kind() {
            SinkContextKind::Before => {
                self.pending_before.push(text);
                if self.pending_before.len() > self.context {
                    self.pending_before.remove(0);
                }
            }
            SinkContextKind::After => {
                if let Some(last) = self.hits.last_mut()
                    && last.after.len() < self.context
                {
                    last.after.push(text);
                }
            }
            SinkContextKind::Other => {}
        }
        Ok(true)
    }
}

/// Opens a file the walk found, refusing a symlink swapped in since (and never blocking on a
/// FIFO).
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    #[cfg(unix)]
    {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        Ok(std::fs::File::from(rustix::fs::open(
            path,
            flags,
            Mode::empty(),
        )?))
    }
    #[cfg(not(unix))]
    {
        std::fs::File::open(path)
    }
}

fn glob_matcher(glob: &str) -> Result<globset::GlobMatcher, ToolError> {
    let g = globset::GlobBuilder::new(glob)
        .literal_separator(glob.contains('/'))
        .build()
        .map_err(|e| ToolError::invalid_input(format!("glob `{glob}`: {e}")))?;
    Ok(g.compile_matcher())
}

/// Runs `query` under each base (files or directories already authorized).
pub fn search(bases: &[Authorized<Resolved>], query: &Query) -> Result<Found, ToolError> {
    let Some(first) = bases.first() else {
        return Ok(Found {
            hits: Vec::new(),
            more: false,
            timed_out: false,
            files: 0,
        });
    };
    let matcher = match query.mode {
        Mode::Name => None,
        Mode::Text | Mode::Regex => Some(
            RegexMatcherBuilder::new()
                .fixed_strings(query.mode == Mode::Text)
                .line_terminator(Some(b'\n'))
                .build(&query.query)
                .map_err(|e| ToolError::invalid_input(format!("query: {e}")))?,
        ),
    };
    let name_glob = match query.mode {
        Mode::Name => Some(glob_matcher(&query.query)?),
        _ => None,
    };
    let filter = query.glob.as_deref().map(glob_matcher).transpose()?;

    let mut walk = WalkBuilder::new(&first.path);
    for b in &bases[1..] {
        walk.add(&b.path);
    }
    let skip = query.skip.clone();
    walk.follow_links(false)
        .filter_entry(move |e| !skip.iter().any(|s| e.path().starts_with(s)))
        .threads(std::thread::available_parallelism().map_or(2, |n| n.get().min(8)));
    let shared = Shared {
        query,
        hits: Mutex::new(BTreeMap::new()),
        dropped: AtomicBool::new(false),
        timed_out: AtomicBool::new(false),
        files: AtomicUsize::new(0),
    };
    let bases_paths: Vec<(&Path, &str)> = bases
        .iter()
        .map(|b| (b.path.as_path(), b.given.as_str()))
        .collect();

    walk.build_parallel().run(|| {
        let shared = &shared;
        let matcher = matcher.clone();
        let name_glob = name_glob.clone();
        let filter = filter.clone();
        let bases_paths = bases_paths.clone();
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .before_context(query.context)
            .after_context(query.context)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        Box::new(move |entry| {
            if Instant::now() > shared.query.deadline {
                shared.timed_out.store(true, Ordering::Relaxed);
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            let path = entry.path();
            // Shown relative to the base it was found under, as the caller spelled the base.
            let Some((base, given)) = bases_paths.iter().find(|(b, _)| path.starts_with(b)) else {
                return WalkState::Continue;
            };
            let rel = path.strip_prefix(base).unwrap_or(path);
            let rel_shown = rel.to_string_lossy().replace('\\', "/");
            let shown = if rel_shown.is_empty() {
                (*given).to_string()
            } else if *given == "." || given.is_empty() {
                rel_shown.clone()
            } else {
                format!("{}/{rel_shown}", given.trim_end_matches('/'))
            };
            if let Some(f) = &filter
                && !f.is_match(&rel_shown)
                && !rel.file_name().is_some_and(|n| f.is_match(n))
            {
                return WalkState::Continue;
            }
            if !shared.could_enter(&shown) {
                return WalkState::Continue;
            }
            shared.files.fetch_add(1, Ordering::Relaxed);
            if let Some(g) = &name_glob {
                if g.is_match(&rel_shown) || rel.file_name().is_some_and(|n| g.is_match(n)) {
                    shared.offer(vec![Hit {
                        path: path.to_path_buf(),
                        shown,
                        line: None,
                        text: None,
                        before: Vec::new(),
                        after: Vec::new(),
                    }]);
                }
                return WalkState::Continue;
            }
            if let Some(m) = &matcher {
                let Ok(file) = open_no_follow(path) else {
                    return WalkState::Continue;
                };
                let mut sink = Lines {
                    path,
                    shown: &shown,
                    context: shared.query.context,
                    pending_before: Vec::new(),
                    hits: Vec::new(),
                };
                if searcher.search_file(m, &file, &mut sink).is_ok() && !sink.hits.is_empty() {
                    shared.offer(sink.hits);
                }
            }
            WalkState::Continue
        })
    });

    let map = match shared.hits.into_inner() {
        Ok(m) => m,
        Err(p) => p.into_inner(),
    };
    let more = shared.dropped.load(Ordering::Relaxed) || map.len() > query.max;
    let hits: Vec<Hit> = map.into_values().take(query.max).collect();
    Ok(Found {
        hits,
        more,
        timed_out: shared.timed_out.load(Ordering::Relaxed),
        files: shared.files.load(Ordering::Relaxed),
    })
}

/// Whether a path is a glob (has `*`, `?`, `[` or `{`).
pub fn is_glob(path: &str) -> bool {
    path.contains(['*', '?', '[', '{'])
}

/// Splits a glob into its literal leading directory (`.` when there is none) and the pattern
/// below it.
pub fn split_glob(path: &str) -> (String, String) {
    let normalized = path.replace('\\', "/");
    let parts: Vec<&str> = normalized.split('/').collect();
    let first_glob = parts.iter().position(|p| is_glob(p)).unwrap_or(parts.len());
    let base = parts[..first_glob].join("/");
    let pattern = parts[first_glob..].join("/");
    let base = if base.is_empty() && normalized.starts_with('/') {
        "/".to_string()
    } else if base.is_empty() {
        ".".to_string()
    } else {
        base
    };
    (base, pattern)
}

/// Files under an authorized directory whose relative path matches `pattern`, sorted; hidden
/// and ignored files are skipped, symlinks are not followed. Returns at most `max` relative
/// paths and the number that matched.
pub fn expand_glob(
    base: &Authorized<Resolved>,
    pattern: &str,
    max: usize,
) -> Result<(Vec<String>, usize), ToolError> {
    let matcher = globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| ToolError::invalid_input(format!("glob `{pattern}`: {e}")))?
        .compile_matcher();
    let mut found = Vec::new();
    for entry in WalkBuilder::new(&base.path)
        .follow_links(false)
        .build()
        .flatten()
    {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(&base.path) else {
            continue;
        };
        let rel = rel.to_string_lossy().replace('\\', "/");
        if matcher.is_match(&rel) {
            found.push(rel);
        }
    }
    found.sort();
    let total = found.len();
    found.truncate(max);
    Ok((found, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_split_at_their_first_wild_component() {
        assert_eq!(split_glob("src/**/*.rs"), ("src".into(), "**/*.rs".into()));
        assert_eq!(split_glob("*.md"), (".".into(), "*.md".into()));
        assert_eq!(
            split_glob("/abs/dir/f?.txt"),
            ("/abs/dir".into(), "f?.txt".into())
        );
        assert!(is_glob("a/{b,c}.rs") && !is_glob("plain/path.rs"));
    }
}
