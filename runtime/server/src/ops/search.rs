//! Searching without a shell: file names by glob, lines by literal or regex. The walk is
//! confine's handle-based walk (a directory swapped for a symlink mid-walk is skipped, every
//! file is opened relative to its directory's handle); lines are matched by ripgrep's own
//! grep-searcher with a bounded line buffer. The walk honours .gitignore and .ignore, skips
//! hidden files, never follows symlinks, and keeps only the first `max` results in (path, line)
//! order, so memory stays bounded and a cursor can continue exactly where a page ended.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use confine::walk::{self, Flow, Found, Walk};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
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
pub struct Searched {
    /// Results in (path, line) order.
    pub hits: Vec<Hit>,
    /// More results exist after the last one.
    pub more: bool,
    /// The walk stopped at the deadline.
    pub timed_out: bool,
    /// Files looked at.
    pub files: usize,
    /// Files whose search stopped at a line longer than the line limit.
    pub long_lines: usize,
    /// Directories and files that could not be read (out of descriptors, no permission...).
    pub unreadable: usize,
    /// The first reason one could not be read.
    pub first_error: Option<String>,
}

/// Longest line text a result carries.
const MAX_LINE_CHARS: usize = 300;
/// Longest line searched: a longer one stops that file's search (with a note), so one
/// giant line cannot make the search hold it whole.
pub const MAX_LINE_BYTES: usize = 1 << 20;

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
    /// Hits of this file at or before this line are before the cursor.
    after_line: Option<u64>,
    /// Most hits worth keeping from one file (a page and one more).
    keep: usize,
    deadline: Instant,
}

impl Sink for Lines<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        // A file of a million matching lines must not become a million hits in memory: a
        // page needs at most `keep` of them, and the call has a deadline.
        if self.hits.len() >= self.keep || Instant::now() > self.deadline {
            return Ok(false);
        }
        let first = m.line_number().unwrap_or(0);
        for (i, line) in m.lines().enumerate() {
            let number = first + i as u64;
            if self.after_line.is_some_and(|a| number <= a) {
                self.pending_before.clear();
                continue;
            }
            self.hits.push(Hit {
                path: self.path.to_path_buf(),
                shown: self.shown.to_string(),
                line: Some(number),
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

fn glob_matcher(glob: &str) -> Result<globset::GlobMatcher, ToolError> {
    let g = globset::GlobBuilder::new(glob)
        .literal_separator(glob.contains('/'))
        .build()
        .map_err(|e| ToolError::invalid_input(format!("glob `{glob}`: {e}")))?;
    Ok(g.compile_matcher())
}

/// Runs `query` under each base (files or directories already authorized). `admit` is asked
/// about each file before it is read or counted: a file it refuses leaves no trace (no
/// result, no place on the page, not in the count of files searched), so neither what a
/// forbidden file contains nor that it exists can be learnt from the answer.
pub fn search(
    bases: &[Authorized<Resolved>],
    query: &Query,
    admit: &(dyn Fn(&Path) -> bool + Sync),
) -> Result<Searched, ToolError> {
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

    let shared = Shared {
        query,
        hits: Mutex::new(BTreeMap::new()),
        dropped: AtomicBool::new(false),
        timed_out: AtomicBool::new(false),
        files: AtomicUsize::new(0),
    };
    // Searchers carry a line buffer: one per thread at a time, reused across files.
    let searchers: Mutex<Vec<Searcher>> = Mutex::new(Vec::new());
    let new_searcher = || {
        SearcherBuilder::new()
            .line_number(true)
            .before_context(query.context)
            .after_context(query.context)
            .binary_detection(BinaryDetection::quit(0))
            .heap_limit(Some(MAX_LINE_BYTES))
            .build()
    };
    let long_lines = AtomicUsize::new(0);
    let unreadable = AtomicUsize::new(0);
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    // Reasons name the path as the caller sees it (relative to its base), never the
    // resolved absolute one.
    let failed = |e: &std::io::Error, shown: &str| {
        if walk::is_race(e) {
            return;
        }
        unreadable.fetch_add(1, Ordering::Relaxed);
        lock(&first_error).get_or_insert_with(|| format!("{shown}: {e}"));
    };
    let opts = Walk {
        skip_hidden: true,
        ignore_files: true,
        skip: query.skip.clone(),
        threads: std::thread::available_parallelism().map_or(2, |n| n.get().min(8)),
        deadline: Some(query.deadline),
    };
    // Each thread's line buffer may grow to the line limit; the page of results is small.
    let _held = tool_api::memory::HEAVY.take(
        opts.threads as u64 * (MAX_LINE_BYTES as u64 + (256 << 10)) + (4 << 20),
        tool_api::memory::WAIT,
    )?;
    for base in bases {
        let Some(root) = base.root.as_deref() else {
            continue;
        };
        let given = base.given.as_str();
        let visit = |found: &Found<'_>| -> Flow {
            let rel = found.rel;
            // Shown relative to the base it was found under, as the caller spelled the base.
            let rel_shown = rel.to_string_lossy().replace('\\', "/");
            let shown = if rel_shown.is_empty() {
                given.to_string()
            } else if given == "." || given.is_empty() {
                rel_shown.clone()
            } else {
                format!("{}/{rel_shown}", given.trim_end_matches('/'))
            };
            if let Some(f) = &filter
                && !f.is_match(&rel_shown)
                && !rel.file_name().is_some_and(|n| f.is_match(n))
            {
                return Flow::Continue;
            }
            if !shared.could_enter(&shown) {
                return Flow::Continue;
            }
            // Asked before the file is read or counted: a file a policy hides is not searched,
            // and the count of files searched says nothing about it.
            if !admit(found.path) {
                return Flow::Continue;
            }
            shared.files.fetch_add(1, Ordering::Relaxed);
            if let Some(g) = &name_glob {
                if g.is_match(&rel_shown) || rel.file_name().is_some_and(|n| g.is_match(n)) {
                    shared.offer(vec![Hit {
                        path: found.path.to_path_buf(),
                        shown,
                        line: None,
                        text: None,
                        before: Vec::new(),
                        after: Vec::new(),
                    }]);
                }
                return Flow::Continue;
            }
            if let Some(m) = &matcher {
                // Opened relative to its directory's handle: a symlink swapped in is refused.
                let file = match found.open() {
                    Ok(file) => file,
                    Err(e) => {
                        failed(&e, &shown);
                        return Flow::Continue;
                    }
                };
                let after_line = shared
                    .query
                    .after
                    .as_ref()
                    .filter(|(p, _)| *p == shown)
                    .map(|(_, l)| *l);
                let mut sink = Lines {
                    path: found.path,
                    shown: &shown,
                    context: shared.query.context,
                    pending_before: Vec::new(),
                    hits: Vec::new(),
                    after_line,
                    keep: shared.query.max + 1,
                    deadline: shared.query.deadline,
                };
                let mut searcher = lock(&searchers).pop().unwrap_or_else(new_searcher);
                let reader = UntilDeadline {
                    inner: file,
                    deadline: shared.query.deadline,
                };
                let searched = searcher.search_reader(m, reader, &mut sink);
                lock(&searchers).push(searcher);
                match searched {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                        shared.timed_out.store(true, Ordering::Relaxed);
                    }
                    // A line longer than the buffer allows: what matched before it stands.
                    Err(_) => {
                        long_lines.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if !sink.hits.is_empty() {
                    shared.offer(sink.hits);
                }
            }
            Flow::Continue
        };
        match walk::walk(root, &base.path, &opts, &visit) {
            Ok(w) => {
                if w.unreadable > 0 {
                    unreadable.fetch_add(w.unreadable, Ordering::Relaxed);
                    let mut first = lock(&first_error);
                    if first.is_none() {
                        *first = w.first_error;
                    }
                }
                if w.timed_out {
                    shared.timed_out.store(true, Ordering::Relaxed);
                    break;
                }
            }
            Err(e) => {
                return Err(ToolError::os(format!("{given}: cannot search"), &e));
            }
        }
    }

    let map = match shared.hits.into_inner() {
        Ok(m) => m,
        Err(p) => p.into_inner(),
    };
    let more = shared.dropped.load(Ordering::Relaxed) || map.len() > query.max;
    let hits: Vec<Hit> = map.into_values().take(query.max).collect();
    Ok(Searched {
        hits,
        more,
        timed_out: shared.timed_out.load(Ordering::Relaxed),
        files: shared.files.load(Ordering::Relaxed),
        long_lines: long_lines.load(Ordering::Relaxed),
        unreadable: unreadable.load(Ordering::Relaxed),
        first_error: first_error
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    })
}

/// A file read that fails once the search's deadline has passed: one enormous file cannot
/// keep a call past its time budget.
struct UntilDeadline<R> {
    inner: R,
    deadline: Instant,
}

impl<R: std::io::Read> std::io::Read for UntilDeadline<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if Instant::now() > self.deadline {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the search's time budget ran out",
            ));
        }
        self.inner.read(buf)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
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

/// What a glob expanded to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    /// At most `max` relative paths, sorted.
    pub paths: Vec<String>,
    /// How many matched in all.
    pub total: usize,
    /// The deadline stopped the walk: more may match.
    pub timed_out: bool,
    /// Directories that could not be read, and the first reason.
    pub unreadable: (usize, Option<String>),
}

/// Files under an authorized directory whose relative path matches `pattern`, sorted; hidden
/// and ignored files and `skip` (gantry's own files) are skipped, symlinks are not followed,
/// and the walk stops at `deadline`.
pub fn expand_glob(
    base: &Authorized<Resolved>,
    pattern: &str,
    max: usize,
    skip: &[PathBuf],
    deadline: Instant,
) -> Result<Expanded, ToolError> {
    let matcher = globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| ToolError::invalid_input(format!("glob `{pattern}`: {e}")))?
        .compile_matcher();
    let root = base
        .root
        .as_deref()
        .ok_or_else(|| ToolError::invalid_input(format!("{}: outside every root", base.given)))?;
    // The first `max` matches by name and a count: a glob over a million files holds `max`.
    let found = Mutex::new((std::collections::BinaryHeap::new(), 0usize));
    let opts = Walk {
        skip_hidden: true,
        ignore_files: true,
        skip: skip.to_vec(),
        threads: 1,
        deadline: Some(deadline),
    };
    let walked = walk::walk(root, &base.path, &opts, &|f: &Found<'_>| {
        let rel = f.rel.to_string_lossy().replace('\\', "/");
        if matcher.is_match(&rel) {
            let mut found = lock(&found);
            found.1 += 1;
            found.0.push(rel);
            if found.0.len() > max {
                found.0.pop();
            }
        }
        Flow::Continue
    })
    .map_err(|e| ToolError::os(format!("{}: cannot list", base.given), &e))?;
    let (first, total) = found
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Ok(Expanded {
        paths: first.into_sorted_vec(),
        total,
        timed_out: walked.timed_out,
        unreadable: (walked.unreadable, walked.first_error),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read past the deadline fails with `TimedOut` (what `find` reports as its time budget
    /// running out); before it, the bytes come through.
    #[test]
    fn reads_stop_at_the_deadline() {
        use std::io::Read as _;
        let mut buf = [0u8; 4];
        let mut live = UntilDeadline {
            inner: &b"abcd"[..],
            deadline: Instant::now() + std::time::Duration::from_secs(60),
        };
        assert_eq!(live.read(&mut buf).unwrap(), 4);
        let mut late = UntilDeadline {
            inner: &b"abcd"[..],
            deadline: Instant::now(),
        };
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(
            late.read(&mut buf).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::TimedOut)
        );
    }

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
