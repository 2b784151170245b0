//! Reading files and directories. Every function takes an [`Authorized`] resolved path: the
//! filesystem is only reached with a value a Cedar permit produced.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::time::SystemTime;

use tool_api::{Authorized, memory};

use super::beneath::{self, Anchored};
use super::path_policy::Resolved;

fn anchored(target: &Resolved) -> std::io::Result<Anchored> {
    let root = target
        .root
        .as_deref()
        .ok_or_else(|| std::io::Error::other("path is outside every root"))?;
    Anchored::new(root, &target.path)
}

/// Opens a regular file beneath its root, never through a symlink: the file, its permission
/// bits (0 where the platform has none) and its size when it was opened.
pub fn open(target: &Authorized<Resolved>) -> std::io::Result<(File, u32, u64)> {
    beneath::open_read(&anchored(target)?)
}

/// A whole file in memory, with its share of the process's memory ceiling.
#[derive(Debug)]
pub struct Whole {
    /// The contents.
    pub bytes: Vec<u8>,
    /// Permission bits (0 where the platform has none).
    pub mode: u32,
    /// Held from [`memory::HEAVY`] for as long as the contents (and what is made of them) live.
    pub held: memory::Held<'static>,
}

/// Reads a whole regular file of at most `max` bytes, holding `factor` times its size from
/// the memory ceiling (the contents and what the caller makes of them). The size is taken
/// from the open file before anything is read, and the read itself stops past `max` (a file
/// growing meanwhile), so a huge file costs nothing: it fails with `FileTooLarge`; no room
/// under the ceiling fails with `ResourceBusy`.
pub fn read_all(target: &Authorized<Resolved>, max: u64, factor: u64) -> std::io::Result<Whole> {
    let (f, mode, size) = open(target)?;
    let too_large = || std::io::Error::new(std::io::ErrorKind::FileTooLarge, "file too large");
    if size > max {
        return Err(too_large());
    }
    // Read no more than was paid for: a file growing meanwhile is refused, not held.
    let paid = max.min(size + 4096);
    let held = memory::HEAVY.take_io(paid * factor, memory::WAIT)?;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    f.take(paid + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > paid {
        return Err(too_large());
    }
    Ok(Whole { bytes, mode, held })
}

/// Replaces (or creates) a file atomically beneath its root, creating missing directories.
/// `mode` keeps an existing file's permission bits.
pub fn write_atomic(
    permit: &WritePermit,
    contents: &[u8],
    mode: Option<u32>,
) -> std::io::Result<()> {
    beneath::write(&anchored(&permit.0)?, contents, mode)
}

/// Writes a new file atomically beneath its root: whatever is at the path already, even if it
/// appeared after the path was checked, stays and the call fails with `AlreadyExists`.
pub fn write_new(permit: &WritePermit, contents: &[u8]) -> std::io::Result<()> {
    beneath::write_new(&anchored(&permit.0)?, contents)
}

/// Makes a directory beneath its root (`parents`: and missing ones above it; one already
/// there is then fine). False when it was there.
pub fn make_dir(permit: &WritePermit, parents: bool) -> std::io::Result<bool> {
    beneath::make_dir(&anchored(&permit.0)?, parents)
}

/// Moves a file or symbolic link to a path that does not exist yet, both beneath their roots.
pub fn move_entry(from: &WritePermit, to: &WritePermit) -> std::io::Result<()> {
    beneath::move_entry(&anchored(&from.0)?, &anchored(&to.0)?)
}

/// Removes a symbolic link (never what it points to) beneath its root.
pub fn remove_link(permit: &WritePermit) -> std::io::Result<()> {
    beneath::remove_link(&anchored(&permit.0)?)
}

/// Removes a regular file beneath its root.
pub fn remove_file(permit: &WritePermit) -> std::io::Result<()> {
    beneath::remove(&anchored(&permit.0)?)
}

/// A permit to write or remove one resolved path. The only way to get one is
/// [`WritePermit::authorize`]: Cedar's permit of a write action on exactly that path. A read
/// permit, a permit on `Host` or a permit for another path cannot be passed where a write is
/// done (`tests/compile_fail` shows each refused by the compiler).
#[derive(Debug)]
pub struct WritePermit(Authorized<Resolved>);

impl WritePermit {
    /// Asks the policies whether `action` (a write) may touch `target`, deciding on the
    /// resource `target` itself describes.
    pub fn authorize(
        cx: &tool_api::CallContext,
        action: tool_api::TypedAction<tool_api::Writes>,
        target: Resolved,
    ) -> Result<WritePermit, tool_api::ToolError> {
        let resource = target.resource();
        cx.authorize(action.id(), &resource, target)
            .map(WritePermit)
    }

    /// The permitted target (reading it back for a rollback copy is part of writing it).
    pub fn target(&self) -> &Authorized<Resolved> {
        &self.0
    }
}

impl std::ops::Deref for WritePermit {
    type Target = Resolved;

    fn deref(&self) -> &Resolved {
        &self.0
    }
}

/// How many leading bytes decide whether a file is text.
const SNIFF_BYTES: usize = 8192;
/// Files up to this size get an exact total line count even when only part is returned.
const COUNT_LINES_UP_TO: u64 = 16 * 1024 * 1024;
/// Text files up to this size are read whole; larger ones are streamed line by line.
const WHOLE_READ_UP_TO: u64 = 1024 * 1024;
/// A read holding less than this does not ask the memory ceiling (one file at a time per call).
const UNCOUNTED_BYTES: u64 = 256 * 1024;

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// File name.
    pub name: String,
    /// A file, a directory, a link (never followed) or something special.
    pub kind: crate::path_policy::Kind,
    /// Size in bytes (files).
    pub size: Option<u64>,
    /// Last modification, RFC 3339 UTC.
    pub mtime: Option<String>,
}

/// Lists a directory one level deep, sorted by name, at most `max` entries. Returns the
/// entries and the total count. The directory is reached by handle from its root, so one
/// swapped for a symlink after it was authorized is refused, never listed.
pub fn list_dir(dir: &Authorized<Resolved>, max: usize) -> std::io::Result<(Vec<Entry>, usize)> {
    let root = dir
        .root
        .as_deref()
        .ok_or_else(|| std::io::Error::other("path is outside every root"))?;
    let (listed, total) = crate::walk::list(root, &dir.path, max)?;
    let entries: Vec<Entry> = listed
        .into_iter()
        .map(|l| Entry {
            name: l.name.to_string_lossy().into_owned(),
            kind: l.kind,
            size: l.size,
            mtime: l.modified.map(rfc3339),
        })
        .collect();
    Ok((entries, total))
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Text cut to a line window and a byte budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextSlice {
    /// The lines, with their line endings.
    pub text: String,
    /// First line returned (1-based).
    pub start_line: u64,
    /// Last line returned (0 when none).
    pub end_line: u64,
    /// Lines in the file, when counted.
    pub total_lines: Option<u64>,
    /// Where to continue when the budget cut the window short.
    pub next_start_line: Option<u64>,
    /// A remark for the model (encoding replaced, a line longer than the budget...).
    pub note: Option<String>,
    /// The file's version when it was read.
    pub version: Option<Version>,
}

/// What tells one state of a file from the next without reading it: its size and its
/// modification time (nanoseconds where the filesystem keeps them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Version {
    /// Size in bytes.
    pub len: u64,
    /// Last modification.
    pub modified: Option<SystemTime>,
    /// Inode and last status change (Unix): a rewrite that restores size and modification
    /// time (`cp -p`, `touch -r`) still changes them.
    pub changed: Option<(u64, i64, i64)>,
}

impl Version {
    fn of(m: &std::fs::Metadata) -> Version {
        #[cfg(unix)]
        let changed = {
            use std::os::unix::fs::MetadataExt as _;
            Some((m.ino(), m.ctime(), m.ctime_nsec()))
        };
        #[cfg(not(unix))]
        let changed = None;
        Version {
            len: m.len(),
            modified: m.modified().ok(),
            changed,
        }
    }
}

/// The current version of a regular file beneath its root.
pub fn version(target: &Authorized<Resolved>) -> std::io::Result<Version> {
    let (f, _, _) = open(target)?;
    Ok(Version::of(&f.metadata()?))
}

/// What a file turned out to hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    /// Text, decoded.
    Text(TextSlice),
    /// Not text: described, never dumped.
    Binary {
        /// Size in bytes.
        size: u64,
        /// The type recognised from its first bytes.
        mime: Option<&'static str>,
    },
}

/// Recognises common binary formats by their magic bytes.
pub fn sniff_mime(head: &[u8]) -> Option<&'static str> {
    let starts = |m: &[u8]| head.starts_with(m);
    if starts(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if starts(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if starts(b"GIF87a") || starts(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && starts(b"RIFF") && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else if starts(b"%PDF-") {
        Some("application/pdf")
    } else if starts(b"PK\x03\x04") {
        Some("application/zip")
    } else if starts(b"\x1f\x8b") {
        Some("application/gzip")
    } else if starts(b"\x7fELF") {
        Some("application/x-elf")
    } else {
        None
    }
}

/// Reads lines `start..=end` of a file, stopping before `budget` bytes of text.
pub fn read_text(
    file: &Authorized<Resolved>,
    start: u64,
    end: Option<u64>,
    budget: usize,
) -> std::io::Result<Loaded> {
    let (f, _, size) = open(file)?;
    let version = f.metadata().ok().map(|m| Version::of(&m));
    let loaded = read_open_text(file, f, size, start, end, budget)?;
    Ok(match loaded {
        Loaded::Text(slice) => Loaded::Text(TextSlice { version, ..slice }),
        other => other,
    })
}

fn read_open_text(
    file: &Authorized<Resolved>,
    mut f: File,
    size: u64,
    start: u64,
    end: Option<u64>,
    budget: usize,
) -> std::io::Result<Loaded> {
    let mut head = vec![0u8; SNIFF_BYTES.min(usize::try_from(size).unwrap_or(SNIFF_BYTES))];
    let n = read_full(&mut f, &mut head)?;
    head.truncate(n);

    if head.starts_with(b"\xff\xfe") || head.starts_with(b"\xfe\xff") {
        return read_utf16(file, size, start, end, budget);
    }
    let bom = head.starts_with(b"\xef\xbb\xbf");
    let body = if bom { &head[3..] } else { &head[..] };
    let looks_binary =
        body.contains(&0) || matches!(std::str::from_utf8(body), Err(e) if e.error_len().is_some());
    if looks_binary {
        return Ok(Loaded::Binary {
            size,
            mime: sniff_mime(&head),
        });
    }

    let mut lines = LineWindow::new(start, end, budget);
    // What this read will hold at most: the whole file and its text, or a line and the text.
    let holds = if size <= WHOLE_READ_UP_TO {
        size + size.min(budget as u64)
    } else {
        2 * budget as u64 + 64 * 1024
    };
    let _held = (holds > UNCOUNTED_BYTES)
        .then(|| memory::HEAVY.take_io(holds, memory::WAIT))
        .transpose()?;
    if size <= WHOLE_READ_UP_TO {
        // Small enough to take in one read and validate as UTF-8 in one pass (much cheaper
        // than line by line), continuing from the sniffed head.
        let mut all = head;
        if (all.len() as u64) < size {
            all.reserve_exact(usize::try_from(size).unwrap_or(0) - all.len());
            (&mut f)
                .take(size - all.len() as u64)
                .read_to_end(&mut all)?;
        }
        let body = if bom { &all[3..] } else { &all[..] };
        // Most reads take whole files: allocate the text once rather than by doubling.
        lines.text.reserve(body.len().min(budget));
        match std::str::from_utf8(body) {
            Ok(text) => {
                for line in text.split_inclusive('\n') {
                    if !lines.push_str(line, false) {
                        break;
                    }
                }
            }
            Err(_) => {
                for line in body.split_inclusive(|b| *b == b'\n') {
                    if !lines.push(line) {
                        break;
                    }
                }
            }
        }
        let read_so_far = lines.line;
        let mut slice = lines.finish();
        if slice.total_lines.is_none() {
            slice.total_lines = Some(bytecount_lines(body).max(read_so_far));
        }
        return Ok(Loaded::Text(slice));
    }
    // Read on from the same descriptor: rewind rather than reopen by path.
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(if bom { 3 } else { 0 }))?;
    let mut reader = BufReader::new(f);
    let mut buf = Vec::new();
    // A line is held only up to a little past the budget: a 200 MB line costs its head.
    let keep = budget.saturating_add(8);
    loop {
        buf.clear();
        if read_line_bounded(&mut reader, &mut buf, keep)? == 0 {
            break;
        }
        if !lines.push(&buf) {
            break;
        }
    }
    let read_so_far = lines.line;
    let mut slice = lines.finish();
    if slice.total_lines.is_none() && size <= COUNT_LINES_UP_TO {
        // The window ended early; count the rest for `total_lines`, a buffer at a time.
        slice.total_lines = Some(read_so_far + count_lines(&mut reader)?);
    }
    Ok(Loaded::Text(slice))
}

/// Reads one line (with its `\n`) into `buf`, keeping at most `keep` bytes of it and
/// skipping the rest; returns the line's whole length (0 at the end of the file).
fn read_line_bounded(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    keep: usize,
) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(total);
        }
        let (piece, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (&chunk[..=i], true),
            None => (chunk, false),
        };
        let room = keep.saturating_sub(buf.len());
        buf.extend_from_slice(&piece[..piece.len().min(room)]);
        let used = piece.len();
        total += used;
        reader.consume(used);
        if done {
            return Ok(total);
        }
    }
}

/// Counts the lines left in `reader` without holding them.
fn count_lines(reader: &mut impl BufRead) -> std::io::Result<u64> {
    let (mut lines, mut last) = (0u64, b'\n');
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
        last = chunk[chunk.len() - 1];
        let n = chunk.len();
        reader.consume(n);
    }
    Ok(lines + u64::from(last != b'\n'))
}

fn bytecount_lines(bytes: &[u8]) -> u64 {
    if bytes.is_empty() {
        return 0;
    }
    let newlines = bytes.iter().filter(|b| **b == b'\n').count() as u64;
    newlines + u64::from(!bytes.ends_with(b"\n"))
}

fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match f.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

fn read_utf16(
    file: &Authorized<Resolved>,
    size: u64,
    start: u64,
    end: Option<u64>,
    budget: usize,
) -> std::io::Result<Loaded> {
    // UTF-16 is decoded whole; refuse to hold more than a bounded amount.
    const MAX_UTF16: u64 = 8 * 1024 * 1024;
    if size > MAX_UTF16 {
        return Ok(Loaded::Binary {
            size,
            mime: Some("text/plain; charset=utf-16"),
        });
    }
    // The bytes, the decoded text (up to twice as large) and the window.
    let whole = read_all(file, MAX_UTF16, 3)?;
    let bytes = whole.bytes;
    let le = bytes.starts_with(b"\xff\xfe");
    let units = bytes.get(2..).unwrap_or_default().chunks_exact(2).map(|c| {
        if le {
            u16::from_le_bytes([c[0], c[1]])
        } else {
            u16::from_be_bytes([c[0], c[1]])
        }
    });
    let text: String = char::decode_utf16(units)
        .map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect();
    let mut lines = LineWindow::new(start, end, budget);
    for line in text.split_inclusive('\n') {
        if !lines.push(line.as_bytes()) {
            break;
        }
    }
    let mut slice = lines.finish();
    if slice.total_lines.is_none() {
        slice.total_lines = Some(text.split_inclusive('\n').count() as u64);
    }
    slice.note = Some(slice.note.map_or("decoded from UTF-16".to_string(), |n| {
        format!("decoded from UTF-16; {n}")
    }));
    Ok(Loaded::Text(slice))
}

/// Collects a window of lines under a byte budget.
struct LineWindow {
    start: u64,
    end: Option<u64>,
    budget: usize,
    line: u64,
    text: String,
    first: Option<u64>,
    last: u64,
    next: Option<u64>,
    note: Option<String>,
    done: bool,
}

impl LineWindow {
    fn new(start: u64, end: Option<u64>, budget: usize) -> Self {
        Self {
            start: start.max(1),
            end,
            budget,
            line: 0,
            text: String::new(),
            first: None,
            last: 0,
            next: None,
            note: None,
            done: false,
        }
    }

    /// Takes one line (with its ending) as bytes, replacing invalid UTF-8; false once nothing
    /// more is wanted.
    fn push(&mut self, raw: &[u8]) -> bool {
        match String::from_utf8_lossy(raw) {
            std::borrow::Cow::Borrowed(line) => self.push_str(line, false),
            std::borrow::Cow::Owned(line) => self.push_str(&line, true),
        }
    }

    /// Takes one line already decoded; `replaced` says whether decoding replaced anything.
    fn push_str(&mut self, line: &str, replaced: bool) -> bool {
        self.line += 1;
        if self.line < self.start {
            return true;
        }
        if self.end.is_some_and(|e| self.line > e) {
            self.done = true;
            return false;
        }
        if replaced && self.note.is_none() {
            self.note = Some("invalid UTF-8 replaced with U+FFFD".into());
        }
        if self.text.len() + line.len() > self.budget {
            if self.text.is_empty() {
                // One line larger than the whole budget: give its head, say so.
                let mut cut = self.budget;
                while !line.is_char_boundary(cut) {
                    cut -= 1;
                }
                self.text.push_str(&line[..cut]);
                self.first = Some(self.line);
                self.last = self.line;
                self.note = Some(format!(
                    "line {} is longer than {} bytes and was cut",
                    self.line, self.budget
                ));
                self.next = Some(self.line + 1);
            } else {
                self.next = Some(self.line);
            }
            return false;
        }
        self.text.push_str(line);
        self.first.get_or_insert(self.line);
        self.last = self.line;
        true
    }

    fn finish(self) -> TextSlice {
        let reached_eof = self.next.is_none() && !self.done;
        TextSlice {
            start_line: self.first.unwrap_or(self.start),
            end_line: self.last,
            total_lines: reached_eof.then_some(self.line),
            next_start_line: self.next,
            note: self.note,
            text: self.text,
            version: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(text: &str, start: u64, end: Option<u64>, budget: usize) -> TextSlice {
        let mut w = LineWindow::new(start, end, budget);
        for l in text.split_inclusive('\n') {
            if !w.push(l.as_bytes()) {
                break;
            }
        }
        w.finish()
    }

    #[test]
    fn a_whole_small_text_comes_back_with_its_line_count() {
        let s = window("a\nb\nc", 1, None, 100);
        assert_eq!(
            (
                s.text.as_str(),
                s.start_line,
                s.end_line,
                s.total_lines,
                s.next_start_line
            ),
            ("a\nb\nc", 1, 3, Some(3), None)
        );
    }

    #[test]
    fn the_budget_cuts_on_a_line_boundary_and_says_where_to_continue() {
        let s = window("aaaa\nbbbb\ncccc\n", 1, None, 12);
        assert_eq!(
            (
                s.text.as_str(),
                s.end_line,
                s.next_start_line,
                s.total_lines
            ),
            ("aaaa\nbbbb\n", 2, Some(3), None)
        );
    }

    #[test]
    fn ranges_select_lines() {
        let s = window("1\n2\n3\n4\n", 2, Some(3), 100);
        assert_eq!(
            (s.text.as_str(), s.start_line, s.end_line, s.next_start_line),
            ("2\n3\n", 2, 3, None)
        );
    }

    #[test]
    fn a_line_longer_than_the_budget_is_cut_with_a_note() {
        let s = window("ééééé\nx\n", 1, None, 5);
        assert_eq!(s.text, "éé");
        assert_eq!(s.next_start_line, Some(2));
        assert!(s.note.unwrap_or_default().contains("longer than 5 bytes"));
    }

    #[test]
    fn long_lines_are_held_only_up_to_the_cap_and_counted_whole() {
        let text = format!("{}\nshort\n{}", "x".repeat(100_000), "y".repeat(10));
        let mut reader = std::io::BufReader::with_capacity(4096, text.as_bytes());
        let mut buf = Vec::new();
        assert_eq!(
            read_line_bounded(&mut reader, &mut buf, 64).unwrap(),
            100_001
        );
        assert_eq!(buf.len(), 64);
        buf.clear();
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 64).unwrap(), 6);
        assert_eq!(buf, b"short\n");
        assert_eq!(count_lines(&mut reader).unwrap(), 1);
        buf.clear();
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 64).unwrap(), 0);
    }

    #[test]
    fn magic_bytes_name_images() {
        assert_eq!(sniff_mime(b"\x89PNG\r\n\x1a\nrest"), Some("image/png"));
        assert_eq!(sniff_mime(b"RIFF1234WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff_mime(b"hello"), None);
    }
}
