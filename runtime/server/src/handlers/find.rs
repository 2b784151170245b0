//! `find`: file names and text inside the approved roots, without a shell.
//!
//! The call is authorized per search base (each directory or file in `paths`); each file with
//! a result is asked about before its results count, so a policy that forbids a file keeps it
//! out even though the walk passed through its directory, and leaves no trace: no result, no
//! place on the page, no count (a "withheld" count would tell what the file contains).

use std::time::Instant;

use base64::Engine as _;
use generated::core::{FindArgs, FindArgsMode, FindOutput, actions, limits};
use tool_api::{CallContext, ErrorCode, Reply, ToolError};

use crate::ops::path_policy::{Kind, Roots};
use crate::ops::search::{self, Hit, Mode, Query};

fn encode_cursor(path: &str, line: u64) -> String {
    let raw = serde_json::json!([path, line]).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_cursor(cursor: &str) -> Result<(String, u64), ToolError> {
    let bad = || ToolError::invalid_input("cursor: not a cursor from a previous find result");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| bad())?;
    let (path, line): (String, u64) = serde_json::from_slice(&raw).map_err(|_| bad())?;
    Ok((path, line))
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) fn run(
    roots: &Roots,
    cx: &CallContext,
    args: FindArgs,
) -> Result<Reply<FindOutput>, ToolError> {
    let given = args.paths.unwrap_or_else(|| vec![".".to_string()]);
    let mut bases = Vec::with_capacity(given.len());
    for g in &given {
        let resolved = roots.resolve(g, None)?;
        let resource = resolved.resource();
        let base = cx
            .authorize(actions::FIND, &resource, resolved)
            .map_err(|e| {
                let roots = if e.code == ErrorCode::PathNotAllowed {
                    format!(" ({} approved root(s))", roots.len())
                } else {
                    String::new()
                };
                ToolError::new(e.code, format!("{g}: {}{roots}", e.message))
            })?;
        match base.kind {
            Kind::Dir | Kind::File => bases.push(base),
            Kind::Missing => {
                return Err(ToolError::new(
                    ErrorCode::NotFound,
                    format!("{g}: no such file or directory"),
                ));
            }
            Kind::Special | Kind::Link => {
                return Err(ToolError::new(
                    ErrorCode::PathNotAllowed,
                    format!("{g}: not a regular file or directory"),
                ));
            }
        }
    }
    let query = Query {
        query: args.query,
        mode: match args.mode.unwrap_or(FindArgsMode::Text) {
            FindArgsMode::Text => Mode::Text,
            FindArgsMode::Regex => Mode::Regex,
            FindArgsMode::Name => Mode::Name,
        },
        glob: args.glob,
        context: usize::try_from(args.context_lines.unwrap_or(0)).unwrap_or(0),
        max: limits::find::MAX_RESULTS,
        after: args.cursor.as_deref().map(decode_cursor).transpose()?,
        deadline: Instant::now() + limits::find::TIME_BUDGET.duration(),
        skip: roots.gantry_files().to_vec(),
    };
    let resource_of = |path: &std::path::Path| generated::resources::Path {
        id: path.to_string_lossy().into_owned(),
        inside_root: roots.contains(path),
        gantry_owned: roots.is_gantry_owned(path),
        client_launch: roots.is_client_launch(path),
        client_launch_dir: false,
        kind: "file".into(),
    };
    // Asked inside the search, about each file before it is read or counted: a forbidden
    // file leaves no trace in the answer, not even in the count of files searched.
    let admit = |path: &std::path::Path| cx.permits(actions::FIND, &resource_of(path));
    let found = search::search(&bases, &query, &admit)?;
    if found.unreadable > 0 && found.files == 0 {
        // Nothing could be read at all: an empty answer would be a false "no match".
        return Err(ToolError::new(
            ErrorCode::OsError,
            format!(
                "cannot search: {}",
                found
                    .first_error
                    .as_deref()
                    .unwrap_or("nothing could be read")
            ),
        ));
    }

    let mut shown: Vec<Hit> = Vec::with_capacity(found.hits.len());
    for hit in found.hits {
        // Recorded for the audit; a file whose permission changed since the search is left
        // out like any other.
        if cx
            .authorize(actions::FIND, &resource_of(&hit.path), ())
            .is_err()
        {
            continue;
        }
        shown.push(hit);
    }
    let mut notes = Vec::new();
    if found.timed_out {
        notes.push(format!(
            "stopped after {}; narrow `paths` or `glob`",
            limits::find::TIME_BUDGET
        ));
    }
    if found.unreadable > 0 {
        notes.push(format!(
            "{} director(ies) or file(s) could not be read and were skipped (first: {})",
            found.unreadable,
            found.first_error.as_deref().unwrap_or("unknown")
        ));
    }
    if found.long_lines > 0 {
        notes.push(format!(
            "{} file(s) have a line longer than {} KiB; each was searched up to that line",
            found.long_lines,
            search::MAX_LINE_BYTES / 1024
        ));
    }
    if shown.is_empty() && !found.timed_out {
        notes.push(format!("no match in {} file(s)", found.files));
    }
    let next_cursor = found
        .more
        .then(|| {
            shown
                .last()
                .map(|h| encode_cursor(&h.shown, h.line.unwrap_or(0)))
        })
        .flatten();
    if let Some(c) = &next_cursor {
        notes.push(format!(
            "more results follow: call find again with the same arguments and cursor \"{c}\""
        ));
    }
    let text = render(&shown, &notes);
    let output = FindOutput {
        matches: clamp(shown.len() as u64),
        files: clamp(found.files as u64),
        next_cursor,
        timed_out: found.timed_out.then_some(true),
    };
    Ok(Reply::rendered(output, text))
}

/// grep's layout, which models read without help: `path:line: text` for a match,
/// `path-line- text` for a context line, `--` between groups that do not touch; a name search
/// lists paths. Notes close the text in brackets.
fn render(hits: &[Hit], notes: &[String]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut previous: Option<(&str, u64)> = None;
    for (k, h) in hits.iter().enumerate() {
        let name = super::printable(&h.shown);
        let Some(line) = h.line else {
            let _ = writeln!(out, "{name}");
            continue;
        };
        let first = line.saturating_sub(h.before.len() as u64);
        let joined = previous.is_some_and(|(p, l)| p == h.shown && l + 1 >= first);
        if previous.is_some() && !joined && (!h.before.is_empty() || !h.after.is_empty()) {
            out.push_str("--\n");
        }
        // Context already printed as the previous group's after-lines is not repeated.
        let skip = previous
            .filter(|(p, _)| *p == h.shown)
            .map_or(0, |(_, l)| (l + 1).saturating_sub(first));
        for (i, b) in h.before.iter().enumerate() {
            let n = first + i as u64;
            if (i as u64) >= skip {
                let _ = writeln!(out, "{name}-{n}- {b}");
            }
        }
        let _ = writeln!(
            out,
            "{name}:{line}: {}",
            h.text.as_deref().unwrap_or_default()
        );
        // After-lines stop short of the next match in the same file, which prints itself.
        let next = hits
            .get(k + 1)
            .filter(|n| n.shown == h.shown)
            .and_then(|n| n.line)
            .unwrap_or(u64::MAX);
        let mut end = line;
        for (i, a) in h.after.iter().enumerate() {
            let n = line + 1 + i as u64;
            if n >= next {
                break;
            }
            let _ = writeln!(out, "{name}-{n}- {a}");
            end = n;
        }
        previous = Some((&h.shown, end));
    }
    for n in notes {
        let _ = writeln!(out, "[{n}]");
    }
    out
}
