//! Unified diffs (`diff -u`, `git diff`) read into the same file operations as the V4A
//! envelope, so they get the same whole-patch check before any write.
//!
//! Hunks become chunks matched by their content, like V4A chunks; the `@@ -a,b +c,d @@`
//! counts delimit a hunk's lines, and the line numbers are not trusted (the file may have moved
//! on since the diff was made).

use crate::ops::{Chunk, ChunkLine, FileOp, ParseError, Patch};

fn err(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
    }
}

/// Whether `text` reads as a unified diff: a `--- ` line followed by a `+++ ` line, or a
/// `diff --git` header.
pub(crate) fn looks_unified(lines: &[&str]) -> bool {
    lines.iter().any(|l| l.starts_with("diff --git "))
        || lines
            .windows(2)
            .any(|w| w[0].starts_with("--- ") && w[1].starts_with("+++ "))
}

/// The path a `---`/`+++` line names: `None` for `/dev/null`. A tab ends the name (the
/// timestamp `diff -u` writes follows it); git's `a/` and `b/` prefixes are dropped when the
/// diff is git's.
fn header_path(rest: &str, git: bool) -> Option<String> {
    let name = rest.split('\t').next().unwrap_or(rest).trim_end();
    let name = name
        .strip_prefix('"')
        .and_then(|n| n.strip_suffix('"'))
        .unwrap_or(name);
    if name == "/dev/null" {
        return None;
    }
    let name = if git {
        name.strip_prefix("a/")
            .or_else(|| name.strip_prefix("b/"))
            .unwrap_or(name)
    } else {
        name
    };
    Some(name.to_string())
}

/// `@@ -a[,b] +c[,d] @@ ...` → (old count, new count).
fn hunk_counts(line: &str) -> Option<(usize, usize)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let count = |r: &str| -> Option<usize> {
        match r.split_once(',') {
            Some((_, n)) => n.parse().ok(),
            None => r.parse::<usize>().ok().map(|_| 1),
        }
    };
    Some((count(old)?, count(new)?))
}

/// Parses a unified diff. Line numbers in errors are 1-based in `lines`.
pub(crate) fn parse_unified(lines: &[&str]) -> Result<Patch, ParseError> {
    let git = lines.iter().any(|l| l.starts_with("diff --git "));
    let mut ops = Vec::new();
    let mut i = 0;
    // `rename from`/`rename to` of git's current file header.
    let mut rename: (Option<String>, Option<String>) = (None, None);
    while i < lines.len() {
        let line = lines[i];
        if line.starts_with("diff --git ") {
            rename = (None, None);
            i += 1;
            continue;
        }
        if let Some(from) = line.strip_prefix("rename from ") {
            rename.0 = Some(from.to_string());
            i += 1;
            continue;
        }
        if let Some(to) = line.strip_prefix("rename to ") {
            rename.1 = Some(to.to_string());
            i += 1;
            // A pure rename has no hunks: it is complete once both names are known.
            let next_is_hunks = lines.get(i).is_some_and(|l| l.starts_with("--- "));
            if !next_is_hunks && let (Some(from), Some(to)) = (&rename.0, &rename.1) {
                return Err(err(
                    i,
                    format!(
                        "'{from}' -> '{to}' is a rename without changes; a unified diff cannot say it, write it as a V4A patch with '*** Update File: {from}' and '*** Move to: {to}' (and one @@ chunk)"
                    ),
                ));
            }
            continue;
        }
        let Some(old) = line.strip_prefix("--- ") else {
            // git's `index`, mode and similarity lines, and any prose before the first file.
            i += 1;
            continue;
        };
        let header_line = i + 1;
        let Some(new) = lines.get(i + 1).and_then(|l| l.strip_prefix("+++ ")) else {
            return Err(err(
                header_line + 1,
                "a '--- ' file header must be followed by a '+++ ' line",
            ));
        };
        // git's a/ and b/ prefixes: stripped in a git diff, or when both sides carry them.
        let prefixed = git || (old.starts_with("a/") && new.starts_with("b/"));
        let old_path = header_path(old, prefixed);
        let new_path = header_path(new, prefixed);
        i += 2;
        let mut chunks = Vec::new();
        while i < lines.len() && lines[i].starts_with("@@") {
            let hunk_line = i + 1;
            let (mut old_left, mut new_left) = hunk_counts(lines[i]).ok_or_else(|| {
                err(
                    hunk_line,
                    format!(
                        "'{}' is not a hunk header; write '@@ -<line>,<count> +<line>,<count> @@'",
                        lines[i].chars().take(120).collect::<String>()
                    ),
                )
            })?;
            i += 1;
            let mut chunk = Chunk {
                anchor: None,
                lines: Vec::new(),
                end_of_file: false,
                line: hunk_line,
            };
            while (old_left > 0 || new_left > 0) && i < lines.len() {
                let l = lines[i];
                match l.chars().next() {
                    Some(' ') | None if old_left > 0 && new_left > 0 => {
                        chunk
                            .lines
                            .push(ChunkLine::Context(l.get(1..).unwrap_or("").to_string()));
                        old_left -= 1;
                        new_left -= 1;
                    }
                    Some('-') if old_left > 0 => {
                        chunk.lines.push(ChunkLine::Delete(l[1..].to_string()));
                        old_left -= 1;
                    }
                    Some('+') if new_left > 0 => {
                        chunk.lines.push(ChunkLine::Add(l[1..].to_string()));
                        new_left -= 1;
                    }
                    Some('\\') => {}
                    _ => {
                        return Err(err(
                            i + 1,
                            format!(
                                "the hunk at line {hunk_line} ends early: its header counts {old_left} more old and {new_left} more new line(s), but line {} is '{}'",
                                i + 1,
                                l.chars().take(120).collect::<String>()
                            ),
                        ));
                    }
                }
                i += 1;
            }
            if old_left > 0 || new_left > 0 {
                return Err(err(
                    hunk_line,
                    format!(
                        "the hunk at line {hunk_line} is cut short: the diff ends {old_left} old and {new_left} new line(s) early"
                    ),
                ));
            }
            // `\ No newline at end of file` after the hunk: its old side ends the file.
            while i < lines.len() && lines[i].starts_with('\\') {
                chunk.end_of_file = true;
                i += 1;
            }
            // A line that reads as part of the hunk but is past what its header counts: the
            // counts are wrong, and applying the counted part alone would drop the rest.
            if let Some(next) = lines.get(i)
                && (next.starts_with('+') || next.starts_with('-') || next.starts_with(' '))
                && !(next.starts_with("--- ")
                    && lines.get(i + 1).is_some_and(|l| l.starts_with("+++ ")))
            {
                return Err(err(
                    i + 1,
                    format!(
                        "line {} continues the hunk at line {hunk_line} past the line counts in its header ('{}'); fix the counts or split the hunk",
                        i + 1,
                        lines[hunk_line - 1].chars().take(80).collect::<String>()
                    ),
                ));
            }
            chunks.push(chunk);
        }
        let op = match (old_path, new_path) {
            (None, None) => {
                return Err(err(
                    header_line,
                    "both sides of the file header are /dev/null",
                ));
            }
            (None, Some(path)) => {
                let mut contents = String::new();
                for c in &chunks {
                    for l in &c.lines {
                        if let ChunkLine::Add(t) = l {
                            contents.push_str(t);
                            contents.push('\n');
                        }
                    }
                }
                FileOp::Add {
                    path,
                    contents,
                    line: header_line,
                }
            }
            (Some(path), None) => FileOp::Delete {
                path,
                line: header_line,
            },
            (Some(old), Some(new)) => {
                // Only git's rename lines make a move; otherwise two names (`diff -u f.orig
                // f`) mean the new one is the file to change.
                let (path, to) = match (&rename.0, &rename.1) {
                    (Some(_), Some(_)) => (old, new),
                    _ => (new.clone(), new),
                };
                if chunks.is_empty() {
                    return Err(err(
                        header_line,
                        format!("the diff of '{path}' has no hunk ('@@ -a,b +c,d @@')"),
                    ));
                }
                if let Some(c) = chunks.iter().find(|c| c.old_lines().is_empty()) {
                    return Err(err(
                        c.line,
                        "this hunk has neither context nor removed lines, so where it goes cannot be checked; make the diff with context (diff -u, git diff)",
                    ));
                }
                FileOp::Update {
                    move_to: (to != path).then_some(to),
                    path,
                    chunks,
                    line: header_line,
                }
            }
        };
        ops.push(op);
        rename = (None, None);
    }
    if ops.is_empty() {
        return Err(err(0, "the diff changes no file"));
    }
    Ok(Patch { ops })
}
