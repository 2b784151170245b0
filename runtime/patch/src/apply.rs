//! Applying an update's chunks to a file's text, in memory. Line endings are kept per line
//! (a CRLF file stays CRLF, new lines take the file's first line ending), context lines keep
//! the file's own text, and a byte-order mark survives.

use crate::ops::{Chunk, ChunkLine};
use crate::seek::{Budget, DEFAULT_BUDGET, Exhausted, Seeker};

/// What [`apply_update`] holds per line of the file beyond the text itself: the line's
/// pieces, its entry in the list matched against and a key for each matching pass.
pub const BYTES_PER_LINE: u64 = (2 * std::mem::size_of::<&str>() // text and ending
    + std::mem::size_of::<&str>() // the list matched against
    + 4 * std::mem::size_of::<u64>()) as u64; // one key per pass

/// A file's new text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Updated {
    /// The whole new text.
    pub text: String,
    /// Lines added.
    pub added: usize,
    /// Lines removed.
    pub removed: usize,
}

/// A chunk that does not fit the file, with what it expected and where the file looks most
/// like it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct MatchError {
    /// 1-based index of the chunk in its update.
    pub chunk: usize,
    /// 1-based line of the chunk in the patch.
    pub patch_line: usize,
    /// What went wrong.
    pub problem: String,
    /// The lines the chunk expected.
    pub expected: Vec<String>,
    /// The most similar region of the file: its first line (1-based) and its lines.
    pub nearest: Option<(usize, Vec<String>)>,
    /// Whether the error may quote the file (false when the caller may not read it).
    pub quotes_file: bool,
}

/// How many lines of a region an error quotes.
const QUOTE_LINES: usize = 12;

fn quote(lines: &[String]) -> String {
    let mut out: Vec<String> = lines
        .iter()
        .take(QUOTE_LINES)
        .map(|l| format!("  |{l}"))
        .collect();
    if lines.len() > QUOTE_LINES {
        out.push(format!("  … {} more line(s)", lines.len() - QUOTE_LINES));
    }
    out.join("\n")
}

impl MatchError {
    /// The same error without any of the file's text, for a caller who may not read it.
    pub fn without_file_text(mut self) -> MatchError {
        self.nearest = None;
        self.quotes_file = false;
        self
    }

    fn describe(&self) -> String {
        let mut s = format!(
            "chunk {} (patch line {}): {}",
            self.chunk, self.patch_line, self.problem
        );
        if !self.expected.is_empty() {
            s.push_str(&format!("\nexpected:\n{}", quote(&self.expected)));
        }
        match &self.nearest {
            _ if !self.quotes_file => {
                s.push_str("\n(the file's lines are not quoted: reading it is not allowed)")
            }
            Some((line, region)) => s.push_str(&format!(
                "\nnearest candidate, lines {}-{}:\n{}",
                line,
                line + region.len().saturating_sub(1),
                quote(region)
            )),
            None => s.push_str("\nno similar region in the file"),
        }
        s
    }
}

struct Line<'a> {
    text: &'a str,
    ending: &'a str,
}

fn split_lines(body: &str) -> Vec<Line<'_>> {
    // A file of lone CRs (classic Mac) has CR as its line ending; anywhere else a lone CR is
    // part of its line's text and is kept as it is.
    let cr_only = !body.contains('\n') && body.contains('\r');
    let pieces: Box<dyn Iterator<Item = &str>> = if cr_only {
        Box::new(body.split_inclusive('\r'))
    } else {
        Box::new(body.split_inclusive('\n'))
    };
    pieces
        .map(|piece| {
            let text = if cr_only {
                piece.strip_suffix('\r').unwrap_or(piece)
            } else {
                let without_lf = piece.strip_suffix('\n').unwrap_or(piece);
                without_lf.strip_suffix('\r').unwrap_or(without_lf)
            };
            Line {
                text,
                ending: &piece[text.len()..],
            }
        })
        .collect()
}

struct Replacement<'c> {
    start: usize,
    lines: &'c [ChunkLine],
}

/// Applies `chunks` (in file order) to `original`.
pub fn apply_update(original: &str, chunks: &[Chunk]) -> Result<Updated, MatchError> {
    let (bom, body) = match original.strip_prefix('\u{FEFF}') {
        Some(rest) => ("\u{FEFF}", rest),
        None => ("", original),
    };
    let lines = split_lines(body);
    let texts: Vec<&str> = lines.iter().map(|l| l.text).collect();
    let default_ending = lines
        .iter()
        .map(|l| l.ending)
        .find(|e| !e.is_empty())
        .unwrap_or("\n");

    let mut seeker = Seeker::new(&texts, Budget::new(DEFAULT_BUDGET));
    let mut replacements = Vec::new();
    let mut cursor = 0;
    let (mut added, mut removed) = (0, 0);
    for (n, chunk) in chunks.iter().enumerate() {
        let too_costly = |e: Exhausted| MatchError {
            chunk: n + 1,
            patch_line: chunk.line,
            problem: format!(
                "matching took more than {} line comparisons, so it was stopped; give fewer or more distinctive context lines",
                e.limit
            ),
            expected: Vec::new(),
            nearest: None,
            quotes_file: true,
        };
        let fail =
            |seeker: &mut Seeker<'_>, problem: String, expected: Vec<String>, from: usize| {
                let pattern: Vec<&str> = expected.iter().map(String::as_str).collect();
                MatchError {
                    chunk: n + 1,
                    patch_line: chunk.line,
                    problem,
                    nearest: seeker.nearest(&pattern, from).map(|start| {
                        (
                            start + 1,
                            texts[start..(start + pattern.len()).min(texts.len())]
                                .iter()
                                .map(|s| s.to_string())
                                .collect(),
                        )
                    }),
                    expected,
                    quotes_file: true,
                }
            };
        if let Some(anchor) = &chunk.anchor {
            match seeker
                .seek(&[anchor.as_str()], cursor, false)
                .map_err(too_costly)?
            {
                Some(hit) => cursor = hit + 1,
                None => {
                    return Err(fail(
                        &mut seeker,
                        format!("could not find the @@ line '{anchor}'"),
                        vec![anchor.clone()],
                        cursor,
                    ));
                }
            }
        }
        let (a, r) = chunk.counts();
        added += a;
        removed += r;
        let old = chunk.old_lines();
        if old.is_empty() {
            // A chunk with only additions appends, as Codex does.
            replacements.push(Replacement {
                start: texts.len(),
                lines: &chunk.lines,
            });
            continue;
        }
        let mut lines_used: &[ChunkLine] = &chunk.lines;
        let mut found = seeker
            .seek(&old, cursor, chunk.end_of_file)
            .map_err(too_costly)?;
        if found.is_none() && old.last() == Some(&"") {
            // A trailing empty line in the patch often stands for the file's final newline.
            if let Some(ChunkLine::Context(t) | ChunkLine::Delete(t)) = chunk.lines.last()
                && t.is_empty()
            {
                lines_used = &chunk.lines[..chunk.lines.len() - 1];
                found = seeker
                    .seek(&old[..old.len() - 1], cursor, chunk.end_of_file)
                    .map_err(too_costly)?;
            }
        }
        let Some(start) = found else {
            let problem = if chunk.end_of_file {
                "the expected lines are not the last lines of the file".to_string()
            } else {
                "could not find the expected lines".to_string()
            };
            return Err(fail(
                &mut seeker,
                problem,
                old.iter().map(|s| s.to_string()).collect(),
                cursor,
            ));
        };
        let old_len = lines_used
            .iter()
            .filter(|l| !matches!(l, ChunkLine::Add(_)))
            .count();
        replacements.push(Replacement {
            start,
            lines: lines_used,
        });
        cursor = start + old_len;
    }
    replacements.sort_by_key(|r| r.start);

    let mut out = String::with_capacity(original.len() + 64);
    out.push_str(bom);
    // Every line keeps its own ending, byte for byte; only a file's last line may have none,
    // and it gets one only if a line is added after it. An added line takes the ending of the
    // line it follows or replaces, so a mixed file stays mixed the same way.
    let mut unended = false;
    let mut recent = default_ending;
    let mut push = |out: &mut String, text: &str, ending: &str| {
        if unended {
            out.push_str(default_ending);
        }
        out.push_str(text);
        out.push_str(ending);
        unended = ending.is_empty();
    };
    let mut next = 0;
    for r in &replacements {
        while next < r.start {
            push(&mut out, lines[next].text, lines[next].ending);
            next += 1;
        }
        for l in r.lines {
            match l {
                ChunkLine::Context(_) => {
                    if let Some(line) = lines.get(next) {
                        push(&mut out, line.text, line.ending);
                        if !line.ending.is_empty() {
                            recent = line.ending;
                        }
                    }
                    next += 1;
                }
                ChunkLine::Delete(_) => {
                    if let Some(line) = lines.get(next)
                        && !line.ending.is_empty()
                    {
                        recent = line.ending;
                    }
                    next += 1;
                }
                ChunkLine::Add(text) => push(&mut out, text, recent),
            }
        }
    }
    while next < lines.len() {
        push(&mut out, lines[next].text, lines[next].ending);
        next += 1;
    }
    Ok(Updated {
        text: out,
        added,
        removed,
    })
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
