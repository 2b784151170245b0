//! Importers of local agents' transcripts: each reads its tool's own files incrementally (a
//! byte offset, up to the last complete line), skips and counts lines it cannot parse, and
//! starts a file over when it was replaced (another inode, a shorter length, other first
//! bytes). A transcript that vanishes takes its session with it: transcripts hold pasted
//! secrets, and the user deleting one means it.

mod claude;
mod codex;
mod gemini;
mod opencode;

use std::io::{Read as _, Seek as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::StoreError;
use crate::store::{self, Kind, NewEntry, SessionInfo, SourceMark, Store};

/// The sources gantry knows, with their default directories (from the environment the
/// agents themselves read, else the home directory).
pub fn default_sources() -> Vec<(&'static str, Option<PathBuf>)> {
    let home = std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .map(PathBuf::from);
    let codex = std::env::var_os("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".codex")))
        .map(|d| d.join("sessions"));
    let claude = std::env::var_os("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".claude")))
        .map(|d| d.join("projects"));
    let gemini = home.as_ref().map(|h| h.join(".gemini/tmp"));
    let opencode = std::env::var_os("OPENCODE_DB")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_DATA_HOME")
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".local/share")))
                .map(|d| d.join("opencode"))
        });
    vec![
        ("codex", codex),
        ("claude", claude),
        ("gemini", gemini),
        ("opencode", opencode),
    ]
}

/// What one parsed line gives.
#[derive(Debug, Clone)]
pub(crate) enum Item {
    /// The session's directory and start.
    Meta {
        cwd: Option<String>,
        ts_ms: Option<i64>,
    },
    /// A title (the last one wins).
    Title(String),
    /// The conversation went back to before the message with this key: it and everything
    /// after it leave the main line (kept as a side branch).
    Rewind(String),
    /// An entry; with `append`, its text continues the latest entry under its `msg_key`.
    Entry { entry: NewEntry, append: bool },
}

/// What a refresh did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Transcript files looked at.
    pub files: usize,
    /// Bytes read.
    pub bytes: u64,
    /// Entries added.
    pub entries: usize,
    /// Complete lines that could not be parsed.
    pub skipped: usize,
    /// Sessions dropped because their transcript vanished.
    pub dropped: usize,
    /// Work was left for the next refresh (the time budget ran out).
    pub unfinished: bool,
}

/// The most bytes one line may have; a longer one is skipped (counted), not parsed.
const MAX_LINE: usize = 32 << 20;
/// How much of a file is read at a time.
const CHUNK: usize = 4 << 20;

/// Imports what is new in every source, for at most `budget` (the rest continues next time).
/// Text is redacted as it is stored: the index never holds a secret a snippet could show.
pub fn refresh(
    store: &Store,
    sources: &[(String, PathBuf)],
    redactor: &crate::Redactor,
    budget: Duration,
) -> Report {
    let until = Instant::now() + budget;
    let mut report = Report::default();
    for (name, dir) in sources {
        let files = match name.as_str() {
            "codex" => codex::files(dir),
            "claude" => claude::files(dir),
            "gemini" => gemini::files(dir),
            "opencode" => {
                if let Err(e) = opencode::refresh(store, dir, redactor, &mut report) {
                    tracing_warn(&format!("opencode: {e}"));
                }
                continue;
            }
            _ => continue,
        };
        if let Err(e) = drop_vanished(store, name, &files, &mut report) {
            tracing_warn(&format!("{name}: {e}"));
        }
        for file in files {
            if Instant::now() >= until {
                report.unfinished = true;
                return report;
            }
            report.files += 1;
            if let Err(e) = import_file(store, name, &file, redactor, until, &mut report) {
                tracing_warn(&format!("{}: {e}", file.display()));
            }
        }
    }
    report
}

fn tracing_warn(message: &str) {
    tracing::warn!("session import: {message}");
}

/// How many bytes a head hash covers.
fn head_span(head: &str) -> u64 {
    head.split(':')
        .next()
        .and_then(|n| u64::from_str_radix(n, 16).ok())
        .unwrap_or(0)
}

/// Drops the sessions of files of `source` that are gone: a path is gone when the file
/// system says so, never because a directory could not be listed. A file that was moved
/// (Codex archives a rollout by renaming it; `present` holds it under its new path, same
/// device and inode) keeps its session: only the path it is read from changes.
fn drop_vanished(
    store: &Store,
    source: &str,
    present: &[PathBuf],
    report: &mut Report,
) -> Result<(), StoreError> {
    let known = store.read(|c| store::source_paths(c, source))?;
    let mut moved_to: Option<std::collections::HashMap<(u64, u64), String>> = None;
    for path in known {
        let gone = matches!(
            std::fs::symlink_metadata(&path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound
        );
        if !gone {
            continue;
        }
        let by_inode = moved_to.get_or_insert_with(|| {
            present
                .iter()
                .filter_map(|p| {
                    let m = std::fs::metadata(p).ok()?;
                    Some((identity(&m), p.to_string_lossy().into_owned()))
                })
                .filter(|((dev, ino), _)| *dev != 0 || *ino != 0)
                .collect()
        });
        store.write(|tx| {
            if let Some(mark) = store::source_mark(tx, &path)? {
                if let Some(new_path) = by_inode.get(&(mark.dev, mark.ino))
                    && store::source_mark(tx, new_path)?.is_none()
                {
                    store::forget_source(tx, &path)?;
                    store::set_source_mark(tx, new_path, source, &mark)?;
                    return Ok(());
                }
                store::forget_source(tx, &path)?;
                let others: i64 = tx.query_row(
                    "SELECT COUNT(*) FROM source WHERE session_id = ?1",
                    [&mark.session_id],
                    |r| r.get(0),
                )?;
                if others == 0 {
                    store::delete_session(tx, &mark.session_id)?;
                    report.dropped += 1;
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

#[cfg(unix)]
fn identity(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

#[cfg(not(unix))]
fn identity(_m: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// A hash of a file's first 4 KiB: another file at the same path, or one rewritten.
fn head_of(file: &mut std::fs::File, len: u64) -> std::io::Result<String> {
    let mut buf = vec![0u8; len.min(4096) as usize];
    file.seek(std::io::SeekFrom::Start(0))?;
    file.read_exact(&mut buf)?;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in &buf {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    Ok(format!("{:x}:{h:016x}", buf.len()))
}

fn import_file(
    store: &Store,
    source: &str,
    path: &Path,
    redactor: &crate::Redactor,
    until: Instant,
    report: &mut Report,
) -> Result<(), StoreError> {
    let shown = path.to_string_lossy().into_owned();
    let io = |e: std::io::Error| StoreError::Open(path.to_path_buf(), e.to_string());
    let mut file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    let len = meta.len();
    let (dev, ino) = identity(&meta);
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    let prior = store.read(|c| store::source_mark(c, &shown))?;
    let mut mark = match prior {
        Some(m) if m.offset == len && m.dev == dev && m.ino == ino && m.mtime_ns == mtime_ns => {
            return Ok(());
        }
        Some(m) => {
            // The head hash covers what was read of the first 4 KiB; compare the same span.
            let same_head = m.dev == dev
                && m.ino == ino
                && len >= m.offset
                && head_of(&mut file, head_span(&m.head).min(len)).map_err(io)? == m.head;
            if same_head {
                m
            } else {
                // Replaced or rewritten: its session starts over.
                store.write(|tx| {
                    store::delete_session(tx, &m.session_id)?;
                    store::forget_source(tx, &shown)?;
                    Ok(())
                })?;
                SourceMark {
                    dev,
                    ino,
                    ..SourceMark::default()
                }
            }
        }
        None => SourceMark {
            dev,
            ino,
            ..SourceMark::default()
        },
    };
    mark.mtime_ns = mtime_ns;
    if mark.session_id.is_empty() {
        mark.session_id = default_session_id(source, path);
    }
    // What the store says has been read: each commit checks it is still so.
    let mut stored_offset = mark.offset;
    if source == "gemini" && gemini::is_document(path) {
        return import_document(store, path, &shown, &mut file, mark, len, redactor, report);
    }
    let mut state = match source {
        "codex" => Parser::Codex(codex::State),
        "gemini" => Parser::Gemini(gemini::State::for_file(path)),
        _ => Parser::Claude(claude::State::default()),
    };
    file.seek(std::io::SeekFrom::Start(mark.offset))
        .map_err(io)?;
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; CHUNK];
    // Inside a line beyond any sane size: its bytes are counted, not kept, to its end.
    let mut oversized = false;
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        report.bytes += n as u64;
        let mut chunk = &buf[..n];
        if oversized {
            match chunk.iter().position(|b| *b == b'\n') {
                Some(nl) => {
                    mark.offset += nl as u64 + 1;
                    mark.lines += 1;
                    mark.skipped += 1;
                    report.skipped += 1;
                    oversized = false;
                    chunk = &chunk[nl + 1..];
                }
                None => {
                    mark.offset += n as u64;
                    continue;
                }
            }
        }
        pending.extend_from_slice(chunk);
        // Only complete lines: an unterminated tail is a line still being written.
        let Some(last_nl) = pending.iter().rposition(|b| *b == b'\n') else {
            if pending.len() > MAX_LINE {
                mark.offset += pending.len() as u64;
                pending.clear();
                oversized = true;
            }
            continue;
        };
        let complete: Vec<u8> = pending.drain(..=last_nl).collect();
        let consumed = complete.len() as u64;
        let mut items = Vec::new();
        for line in complete.split(|b| *b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            mark.lines += 1;
            let parsed = (line.len() <= MAX_LINE)
                .then(|| serde_json::from_slice::<serde_json::Value>(line).ok())
                .flatten();
            match parsed {
                Some(v) => state.line(&v, &mut items),
                None => {
                    mark.skipped += 1;
                    report.skipped += 1;
                }
            }
        }
        mark.offset += consumed;
        if head_span(&mark.head) < mark.offset.min(4096) {
            // The head covers up to 4 KiB of what was read; a short file's grows with it.
            mark.head = head_of(&mut file, mark.offset.min(4096)).map_err(io)?;
            file.seek(std::io::SeekFrom::Start(mark.offset + pending.len() as u64))
                .map_err(io)?;
        }
        match commit(store, source, &shown, &mark, stored_offset, items, redactor)? {
            Some(n) => {
                report.entries += n;
                stored_offset = mark.offset;
            }
            // Another server sharing the store is importing this file: it is left to it.
            None => return Ok(()),
        }
        if Instant::now() >= until {
            report.unfinished = true;
            return Ok(());
        }
    }
    // Only the time changed (or a partial line arrived): remember the time, read nothing.
    let _ = commit(
        store,
        source,
        &shown,
        &mark,
        stored_offset,
        Vec::new(),
        redactor,
    )?;
    Ok(())
}

/// Largest chat document read whole (the older Gemini CLI form).
const MAX_DOCUMENT: u64 = 32 << 20;

/// A chat kept as one JSON document rewritten at each change: read whole, every message
/// given again (those already stored under their ids, unchanged, add nothing).
#[allow(clippy::too_many_arguments)]
fn import_document(
    store: &Store,
    path: &Path,
    shown: &str,
    file: &mut std::fs::File,
    mut mark: SourceMark,
    len: u64,
    redactor: &crate::Redactor,
    report: &mut Report,
) -> Result<(), StoreError> {
    let io = |e: std::io::Error| StoreError::Open(path.to_path_buf(), e.to_string());
    let stored_offset = mark.offset;
    let mut items = Vec::new();
    if len > MAX_DOCUMENT {
        mark.skipped += 1;
        report.skipped += 1;
        tracing_warn(&format!("{shown}: a chat document over 32 MiB is not read"));
    } else {
        let mut buf = Vec::new();
        file.seek(std::io::SeekFrom::Start(0)).map_err(io)?;
        file.take(MAX_DOCUMENT).read_to_end(&mut buf).map_err(io)?;
        report.bytes += buf.len() as u64;
        match serde_json::from_slice::<serde_json::Value>(&buf) {
            Ok(doc) => {
                gemini::State::for_file(path).document(&doc, &mut items);
                mark.lines = doc
                    .get("messages")
                    .and_then(serde_json::Value::as_array)
                    .map_or(0, |m| i64::try_from(m.len()).unwrap_or(i64::MAX));
            }
            // Caught mid-rewrite, or not a chat: read again at its next change.
            Err(_) => {
                mark.skipped += 1;
                report.skipped += 1;
            }
        }
    }
    mark.offset = len;
    mark.head = head_of(file, len.min(4096)).map_err(io)?;
    if let Some(n) = commit(
        store,
        "gemini",
        shown,
        &mark,
        stored_offset,
        items,
        redactor,
    )? {
        report.entries += n;
    }
    Ok(())
}

/// A session id before the transcript names its own: from the file name.
fn default_session_id(source: &str, path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Codex: rollout-<time>-<uuid>; the uuid is the last five dash-separated groups.
    let id = if source == "codex" {
        let parts: Vec<&str> = stem.split('-').collect();
        if parts.len() > 5 {
            parts[parts.len() - 5..].join("-")
        } else {
            stem
        }
    } else {
        stem
    };
    format!("{source}-{id}")
}

enum Parser {
    Codex(codex::State),
    Claude(claude::State),
    Gemini(gemini::State),
}

impl Parser {
    fn line(&mut self, v: &serde_json::Value, out: &mut Vec<Item>) {
        match self {
            Parser::Codex(s) => s.line(v, out),
            Parser::Claude(s) => s.line(v, out),
            Parser::Gemini(s) => s.line(v, out),
        }
    }
}

/// Writes a batch of items and the new offset in one transaction: a crash leaves either
/// both or neither, so nothing is imported twice or lost.
/// Returns how many entries were added, or `None` when the store's offset for the file is
/// no longer `stored_offset` (another server sharing the store took the lines).
pub(super) fn commit(
    store: &Store,
    source: &str,
    path: &str,
    mark: &SourceMark,
    stored_offset: u64,
    items: Vec<Item>,
    redactor: &crate::Redactor,
) -> Result<Option<usize>, StoreError> {
    let mut added = 0;
    let mut taken = false;
    store.write(|tx| {
        let stored = store::source_mark(tx, path)?.map_or(0, |m| m.offset);
        if stored != stored_offset {
            taken = true;
            return Ok(());
        }
        let id = mark.session_id.clone();
        let first_ts = items.iter().find_map(|i| match i {
            Item::Entry { entry, .. } => Some(entry.ts_ms),
            Item::Meta { ts_ms, .. } => *ts_ms,
            Item::Title(_) | Item::Rewind(_) => None,
        });
        if !items.is_empty() {
            store::upsert_session(
            tx,
            &SessionInfo {
                id: id.clone(),
                source: source.into(),
                title: None,
                cwd: None,
                grouping: None,
                started_ms: first_ts.unwrap_or(0),
                updated_ms: first_ts.unwrap_or(0),
            },
        )?;
        }
        for item in items {
            match item {
                Item::Meta { cwd, ts_ms, .. } => {
                    if let Some(cwd) = cwd {
                        tx.execute(
                            "UPDATE session SET cwd = COALESCE(cwd, ?2) WHERE id = ?1",
                            rusqlite::params![id, cwd],
                        )?;
                    }
                    if let Some(ts) = ts_ms {
                        tx.execute(
                            "UPDATE session SET started_ms = MIN(started_ms, ?2), updated_ms = MAX(updated_ms, ?2) WHERE id = ?1",
                            rusqlite::params![id, ts],
                        )?;
                    }
                }
                Item::Title(t) => store::set_title(tx, &id, &redactor.apply(&t))?,
                Item::Rewind(key) => {
                    tx.execute(
                        "UPDATE entry SET side = 1 WHERE session_id = ?1 AND id >= (
                           SELECT MIN(id) FROM entry WHERE session_id = ?1 AND msg_key = ?2)",
                        rusqlite::params![id, key],
                    )?;
                }
                Item::Entry { mut entry, append } => {
                    entry.text = crate::record::capped(&redactor.apply(&entry.text));
                    // An agent that called gantry's `session` got recorded text back: kept
                    // for the record, never shown again (no copies of copies).
                    entry.hidden = match entry.kind {
                        Kind::Tool => entry.name.as_deref().is_some_and(is_session_lookup),
                        Kind::Result => match &entry.call_id {
                            Some(c) => store::call_hidden(tx, &id, c)?,
                            None => false,
                        },
                        _ => false,
                    };
                    if append
                        && let Some(key) = &entry.msg_key
                        && let Some(before) = store::latest_text(tx, &id, key)?
                    {
                        entry.text = format!("{before}\n\n{}", entry.text);
                    }
                    if store::add_entry(tx, &id, &entry)?.is_some() {
                        added += 1;
                    }
                }
            }
        }
        store::set_source_mark(tx, path, source, mark)?;
        Ok(())
    })?;
    Ok((!taken).then_some(added))
}

/// Whether an agent's tool name is gantry's `session` tool (`session`, or as MCP hosts name
/// a server's tool: `mcp__gantry__session`, `gantry__session`).
fn is_session_lookup(name: &str) -> bool {
    name == "session" || name.ends_with("__session")
}

/// `2026-12-01T09:00:00.120Z` (or with an offset) as ms since the epoch.
pub(crate) fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || (b[10] != b'T' && b[10] != b' ') {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (h, mi, sec) = (n(11..13)?, n(14..16)?, n(17..19)?);
    let mut rest = &s[19..];
    let mut ms = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits: String = frac.chars().take_while(char::is_ascii_digit).collect();
        rest = &frac[digits.len()..];
        let three: String = digits.chars().chain("000".chars()).take(3).collect();
        ms = three.parse().ok()?;
    }
    let offset_min = match rest.as_bytes().first() {
        None | Some(b'Z') => 0,
        Some(sign @ (b'+' | b'-')) => {
            let hh: i64 = rest.get(1..3)?.parse().ok()?;
            let mm: i64 = rest.get(rest.len() - 2..)?.parse().ok()?;
            let m = hh * 60 + mm;
            if *sign == b'+' { m } else { -m }
        }
        Some(_) => return None,
    };
    // Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3600 + mi * 60 + sec) - offset_min * 60) * 1000 + ms)
}

/// The string field `key` of a JSON object.
pub(crate) fn field<'a>(v: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(serde_json::Value::as_str)
}

/// Files below `dir` (at most `depth` directories down) whose name `wanted` accepts, sorted.
pub(crate) fn files_below(dir: &Path, depth: usize, wanted: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    fn walk(dir: &Path, left: usize, wanted: &dyn Fn(&str) -> bool, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() && left > 0 {
                walk(&e.path(), left - 1, wanted, out);
            } else if t.is_file() && wanted(&e.file_name().to_string_lossy()) {
                out.push(e.path());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, depth, wanted, &mut out);
    out.sort();
    out
}

/// Text blocks of a content array (`[{type, text}, …]`) or a plain string, images as
/// `[image]`.
pub(crate) fn content_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => crate::redact::strip_images(s).into_owned(),
        serde_json::Value::Array(blocks) => {
            let mut parts = Vec::new();
            for b in blocks {
                let kind = b.get("type").and_then(|t| t.as_str()).unwrap_or("");
                if kind.contains("image") {
                    parts.push("[image]".to_string());
                } else if let Some(t) = b.get("text").and_then(|t| t.as_str()) {
                    parts.push(crate::redact::strip_images(t).into_owned());
                }
            }
            parts.join("\n")
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_in_utc() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_time("2026-12-01T09:00:00.120Z"),
            Some(1_796_115_600_120)
        );
        assert_eq!(
            parse_time("2026-12-01T10:00:00+01:00"),
            Some(1_796_115_600_000)
        );
        assert_eq!(crate::utc(1_796_115_600_120), "2026-12-01 09:00:00Z");
        assert_eq!(parse_time("yesterday"), None);
    }
}
