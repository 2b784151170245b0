//! The envelope grammar, parsed the way Codex parses it (trimmed markers, an optional heredoc
//! wrapper, `@@` chunk headers, `*** End of File`).

use crate::ops::{Chunk, ChunkLine, FileOp, ParseError, Patch, err};

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const EOF_MARKER: &str = "*** End of File";
const ENVIRONMENT: &str = "*** Environment ID:";

/// What a patch looks like, in three lines, for errors about its shape.
const SHAPE: &str = "write it as\n*** Begin Patch\n*** Update File: <path>   (or Add File / Delete File), then @@ and lines starting ' ', '-' or '+'\n*** End Patch\nor as a unified diff (--- a/<path>, +++ b/<path>, @@ hunks)";

fn header_error(line_no: usize, line: &str) -> ParseError {
    let shown: String = line.chars().take(120).collect();
    err(
        line_no,
        format!(
            "'{shown}' is not a valid hunk header; valid headers are '{ADD}<path>', '{DELETE}<path>' and '{UPDATE}<path>'"
        ),
    )
}

/// Drops a heredoc wrapper (`<<EOF` … `EOF`) some models send around the envelope.
fn strip_heredoc<'a>(lines: &'a [&'a str]) -> Option<&'a [&'a str]> {
    let first = lines.first()?.trim();
    let last = lines.last()?.trim();
    let wrapped = matches!(first, "<<EOF" | "<<'EOF'" | "<<\"EOF\"")
        && last.ends_with("EOF")
        && lines.len() >= 4;
    wrapped.then(|| &lines[1..lines.len() - 1])
}

/// Parses patch text.
pub fn parse(text: &str) -> Result<Patch, ParseError> {
    let all: Vec<&str> = text.trim().lines().collect();
    let mut lines: &[&str] = &all;
    // Line numbers stay those of the trimmed text the caller sent.
    let mut offset = 0;
    let bounded = |l: &[&str]| {
        l.first().map(|s| s.trim()) == Some(BEGIN)
            && l.len() >= 2
            && l.last().map(|s| s.trim()) == Some(END)
    };
    if !bounded(lines)
        && let Some(inner) = strip_heredoc(lines)
        && bounded(inner)
    {
        lines = inner;
        offset = 1;
    }
    if lines.first().map(|s| s.trim()) != Some(BEGIN) {
        // Trailing blank lines may be context lines of a hunk's end: keep them.
        let raw: Vec<&str> = text.trim_start_matches(['\n', '\r']).lines().collect();
        if crate::unified::looks_unified(&raw) {
            return crate::unified::parse_unified(&raw);
        }
        return Err(err(
            1,
            format!("the first line of the patch must be '{BEGIN}'; {SHAPE}"),
        ));
    }
    if lines.len() < 2 || lines.last().map(|s| s.trim()) != Some(END) {
        return Err(err(
            all.len().max(1),
            format!("the last line of the patch must be '{END}'"),
        ));
    }
    let mut body = &lines[1..lines.len() - 1];
    // Codex 0.171 may name its target environment right after the first line; gantry serves
    // one environment, so the line is checked and otherwise ignored.
    if let Some(id) = body
        .first()
        .and_then(|l| l.trim().strip_prefix(ENVIRONMENT))
    {
        if id.trim().is_empty() {
            return Err(err(
                2 + offset,
                "the environment id after '*** Environment ID:' is empty",
            ));
        }
        body = &body[1..];
        offset += 1;
    }
    if let Some(n) = body.iter().position(|l| l.trim().starts_with(ENVIRONMENT)) {
        return Err(err(
            n + 2 + offset,
            "'*** Environment ID:' may appear once, right after '*** Begin Patch'",
        ));
    }
    let mut ops = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let line_no = i + 2 + offset;
        let header = body[i].trim();
        if let Some(path) = header.strip_prefix(ADD) {
            i += 1;
            let mut contents = String::new();
            while i < body.len() && body[i].starts_with('+') {
                contents.push_str(&body[i][1..]);
                contents.push('\n');
                i += 1;
            }
            ops.push(FileOp::Add {
                path: path.to_string(),
                contents,
                line: line_no,
            });
        } else if let Some(path) = header.strip_prefix(DELETE) {
            ops.push(FileOp::Delete {
                path: path.to_string(),
                line: line_no,
            });
            i += 1;
        } else if let Some(path) = header.strip_prefix(UPDATE) {
            i += 1;
            let mut move_to = None;
            if i < body.len()
                && let Some(dest) = body[i].strip_prefix(MOVE)
            {
                move_to = Some(dest.to_string());
                i += 1;
            }
            let mut chunks = Vec::new();
            loop {
                while i < body.len() && body[i].trim().is_empty() && !chunks.is_empty() {
                    i += 1;
                }
                if i >= body.len() || body[i].starts_with('*') && body[i] != EOF_MARKER {
                    break;
                }
                let (chunk, used) = parse_chunk(&body[i..], i + 2 + offset, chunks.is_empty())?;
                chunks.push(chunk);
                i += used;
            }
            if chunks.is_empty() {
                return Err(err(
                    line_no,
                    format!(
                        "update of '{path}' has no change (an update needs at least one @@ chunk)"
                    ),
                ));
            }
            ops.push(FileOp::Update {
                path: path.to_string(),
                move_to,
                chunks,
                line: line_no,
            });
        } else {
            return Err(header_error(line_no, body[i]));
        }
    }
    if ops.is_empty() {
        return Err(err(0, "the patch changes no file"));
    }
    Ok(Patch { ops })
}

/// Parses one chunk starting at `lines[0]`; returns it and how many lines it used.
fn parse_chunk(
    lines: &[&str],
    first_line_no: usize,
    first_chunk: bool,
) -> Result<(Chunk, usize), ParseError> {
    let mut i = 0;
    let anchor = match lines[0] {
        "@@" => {
            i = 1;
            None
        }
        l if l.starts_with("@@ ") => {
            i = 1;
            Some(l[3..].to_string())
        }
        // The first chunk may leave out its `@@`.
        _ if first_chunk => None,
        l => {
            return Err(err(
                first_line_no,
                format!(
                    "expected a chunk to start with '@@', got '{}'",
                    l.chars().take(120).collect::<String>()
                ),
            ));
        }
    };
    let mut chunk = Chunk {
        anchor,
        lines: Vec::new(),
        end_of_file: false,
        line: first_line_no,
    };
    while i < lines.len() {
        let line = lines[i];
        if line == EOF_MARKER {
            if chunk.lines.is_empty() {
                return Err(err(
                    first_line_no + i,
                    "'*** End of File' closes a chunk that has no line",
                ));
            }
            chunk.end_of_file = true;
            i += 1;
            break;
        }
        match line.chars().next() {
            None => chunk.lines.push(ChunkLine::Context(String::new())),
            Some(' ') => chunk.lines.push(ChunkLine::Context(line[1..].to_string())),
            Some('+') => chunk.lines.push(ChunkLine::Add(line[1..].to_string())),
            Some('-') => chunk.lines.push(ChunkLine::Delete(line[1..].to_string())),
            Some(_) => {
                if chunk.lines.is_empty() {
                    let shown: String = line.chars().take(120).collect();
                    return Err(err(
                        first_line_no + i,
                        format!(
                            "unexpected line '{shown}' in an update chunk; every line starts with ' ' (context), '+' (added) or '-' (removed)"
                        ),
                    ));
                }
                break;
            }
        }
        i += 1;
    }
    if chunk.lines.is_empty() {
        return Err(err(first_line_no, "an update chunk has no line"));
    }
    Ok((chunk, i))
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
