//! What `session` returns: search hits and session pages as text, bounded by an estimated
//! token budget (bytes / 4) and continued by cursor without losing a byte.
//!
//! Cursors are plain positions (`p.<entry>.<offset>` and the like), not secrets: every page
//! is authorized again against the session's visibility, so a forged cursor reaches nothing a
//! fresh call could not.

use std::collections::{HashMap, HashSet};

use rusqlite::{Connection, params};

use crate::StoreError;
use crate::redact::Redactor;
use crate::store::{self, Entry, Kind, SessionInfo, Store};

/// Why a view could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// No such session, or not one the caller may see (the two are not told apart).
    #[error("no recorded session {0:?} (or it is outside the approved roots)")]
    UnknownSession(String),
    /// A cursor that is not one of ours, or from another query or session.
    #[error("cursor {0:?} does not continue this request: {1}")]
    BadCursor(String, &'static str),
    /// A `T…` reference that names no tool call of the session.
    #[error("{0} names no tool call of this session")]
    UnknownRef(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for ViewError {
    fn from(e: rusqlite::Error) -> Self {
        ViewError::Store(StoreError::from(e))
    }
}

/// Size bounds of a reply, in estimated tokens (bytes / 4).
#[derive(Debug, Clone, Copy)]
pub struct Budgets {
    /// A page of search hits or of the newest sessions.
    pub search_tokens: usize,
    /// A page of a session, or of expanded tool calls.
    pub read_tokens: usize,
    /// Sessions listed by a search without a query.
    pub newest: usize,
}

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The rendering.
    pub text: String,
    /// Continues this listing or page, when there is more.
    pub next_cursor: Option<String>,
    /// (read) Returns, later, only what was recorded after this page's session state.
    pub update_cursor: Option<String>,
}

/// Decides whether the caller may see a session.
pub type Visible<'a> = &'a dyn Fn(&SessionInfo) -> bool;

/// A search request.
#[derive(Debug, Clone, Copy)]
pub struct Search<'a> {
    /// Words to find; `None` lists the newest sessions.
    pub query: Option<&'a str>,
    /// Only this source.
    pub source: Option<&'a str>,
    /// Continues an earlier page.
    pub cursor: Option<&'a str>,
}

/// The most words of a query searched for.
const MAX_WORDS: usize = 16;

/// The longest snippet shown, in characters (one token can be a long blob).
const SNIPPET_CHARS: usize = 300;

/// How many of the newest matches of a query are ranked.
const RANK_WINDOW: usize = 2000;

/// Estimated tokens → bytes.
fn bytes_of(tokens: usize) -> usize {
    tokens.saturating_mul(4)
}

/// `ms` since the epoch as `YYYY-MM-DD HH:MM:SSZ`.
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The first line of `text`, at most `max` chars, with `…` when cut.
fn headline(text: &str, max: usize) -> String {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let one: String = first.chars().take(max).collect();
    if one.len() < first.len() || text.trim().lines().nth(1).is_some() {
        format!("{one}…")
    } else {
        one
    }
}

/// Adds chunks to a page until the budget: a chunk that does not fit is cut (at a line end
/// near the cut when there is one) if the page would otherwise stay small, else left whole
/// for the next page. Returns where the next page starts (chunk position and byte offset).
struct Filler {
    budget: usize,
    text: String,
    next: Option<(i64, usize)>,
}

impl Filler {
    fn new(budget: usize) -> Filler {
        Filler {
            budget: budget.max(64),
            text: String::new(),
            next: None,
        }
    }

    /// Offers `chunk` (position `pos`), starting at byte `skip`. Returns false once full.
    fn offer(&mut self, pos: i64, chunk: &str, skip: usize) -> bool {
        let rest = chunk.get(skip..).unwrap_or("");
        let room = self.budget.saturating_sub(self.text.len());
        if rest.len() <= room {
            self.text.push_str(rest);
            return true;
        }
        if !self.text.is_empty() && room < self.budget / 4 {
            self.next = Some((pos, skip));
            return false;
        }
        let mut cut = room.min(rest.len());
        while cut > 0 && !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if let Some(nl) = rest[..cut].rfind('\n')
            && nl + 1 >= cut - cut / 4
        {
            cut = nl + 1;
        }
        if cut == 0 {
            // Not even one character fits: at least one goes, so a page always advances.
            cut = rest.chars().next().map_or(0, char::len_utf8);
        }
        self.text.push_str(&rest[..cut]);
        self.next = Some((pos, skip + cut));
        false
    }
}

fn parse_fields<'a>(cursor: &'a str, tag: &str, n: usize) -> Option<Vec<&'a str>> {
    let rest = cursor.strip_prefix(tag)?.strip_prefix('.')?;
    let fields: Vec<&str> = rest.split('.').collect();
    (fields.len() == n).then_some(fields)
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.parse().ok()
}

/// A short hash of a query, so a cursor is not used with another one.
fn query_tag(query: &str, source: Option<&str>) -> String {
    // FNV-1a: stable across runs and builds (std's hasher is not).
    let mut h: u32 = 0x811c_9dc5;
    for b in query.bytes().chain([0]).chain(source.unwrap_or("").bytes()) {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

/// The FTS5 query for `words`: each word quoted (no operator of the user's reaches FTS5),
/// all of them (`and`) or any (`or`).
/// At most [`MAX_WORDS`] words are searched for: each is one more index lookup, and a query
/// of hundreds would cost time in proportion.
fn fts_query(words: &str, any: bool) -> Option<String> {
    let terms: Vec<String> = words
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '_'))
        .filter(|w| !w.is_empty())
        .take(MAX_WORDS)
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    (!terms.is_empty()).then(|| terms.join(if any { " OR " } else { " " }))
}

impl Store {
    /// `session` search: the newest sessions, or hits for a query, one page.
    pub fn search(
        &self,
        req: Search<'_>,
        visible: Visible<'_>,
        redactor: &Redactor,
        budgets: Budgets,
    ) -> Result<Page, ViewError> {
        self.read(|conn| {
            Ok(match req.query.filter(|q| !q.trim().is_empty()) {
                None => newest(conn, req, visible, redactor, budgets),
                Some(q) => hits(conn, q, req, visible, redactor, budgets),
            })
        })?
    }

    /// `session` read: one page of a session, of what is new since an update cursor, or of
    /// expanded tool calls (`refs`, e.g. `T3 T7`).
    pub fn read_session(
        &self,
        session_id: &str,
        cursor: Option<&str>,
        refs: Option<&str>,
        visible: Visible<'_>,
        redactor: &Redactor,
        budgets: Budgets,
    ) -> Result<Page, ViewError> {
        self.read(|conn| {
            Ok(read_page(
                conn, session_id, cursor, refs, visible, redactor, budgets,
            ))
        })?
    }
}

fn newest(
    conn: &Connection,
    req: Search<'_>,
    visible: Visible<'_>,
    redactor: &Redactor,
    budgets: Budgets,
) -> Result<Page, ViewError> {
    let skip: usize = match req.cursor {
        None => 0,
        Some(c) => parse_fields(c, "l", 2)
            .filter(|f| f[1] == query_tag("", req.source))
            .and_then(|f| num(f[0]))
            .ok_or_else(|| ViewError::BadCursor(c.to_string(), "not a listing cursor"))?,
    };
    let mut st = conn.prepare_cached(
        "SELECT id, source, title, cwd, grouping, started_ms, updated_ms FROM session
         WHERE (?1 IS NULL OR source = ?1) ORDER BY updated_ms DESC, id",
    )?;
    let rows = st.query_map(params![req.source], store::session_row)?;
    let mut filler = Filler::new(bytes_of(budgets.search_tokens));
    let mut seen = 0usize;
    let mut shown = 0usize;
    let mut more = false;
    for row in rows {
        let s = row?;
        if !visible(&s) {
            continue;
        }
        if seen < skip {
            seen += 1;
            continue;
        }
        if shown == budgets.newest {
            more = true;
            break;
        }
        let title = match &s.title {
            Some(t) => t.clone(),
            None => first_user_line(conn, &s.id)?.unwrap_or_default(),
        };
        let mut line = format!("{} · {} · {}", s.id, s.source, utc(s.updated_ms));
        if let Some(cwd) = &s.cwd {
            line.push_str(&format!(" · {cwd}"));
        }
        if !title.is_empty() {
            line.push_str(&format!("\n  {}", redactor.apply(&headline(&title, 120))));
        }
        line.push('\n');
        // Whole lines only: a listing entry is never cut.
        if filler.text.len() + line.len() > filler.budget && shown > 0 {
            more = true;
            break;
        }
        filler.text.push_str(&line);
        seen += 1;
        shown += 1;
    }
    let next_cursor = more.then(|| format!("l.{seen}.{}", query_tag("", req.source)));
    let mut text = if shown == 0 {
        "No recorded sessions.\n".to_string()
    } else {
        format!(
            "Newest sessions (id · source · last activity · directory):\n{}",
            filler.text
        )
    };
    if let Some(c) = &next_cursor {
        text.push_str(&more_line(&format!(
            "{{\"action\":\"search\",\"cursor\":\"{c}\"}}"
        )));
    }
    Ok(Page {
        text,
        next_cursor,
        update_cursor: None,
    })
}

fn more_line(call: &str) -> String {
    format!("[more: session {call}]\n")
}

fn first_user_line(conn: &Connection, session_id: &str) -> Result<Option<String>, ViewError> {
    let mut st = conn.prepare_cached(
        "SELECT text FROM entry WHERE session_id = ?1 AND kind = 'user' AND hidden = 0 ORDER BY id LIMIT 1",
    )?;
    let mut rows = st.query(params![session_id])?;
    Ok(match rows.next()? {
        Some(r) => Some(r.get(0)?),
        None => None,
    })
}

/// Sessions whose title holds every word of `query` (case-insensitive), newest first, at
/// most [`TITLE_HITS`].
fn titled(
    conn: &Connection,
    query: &str,
    source: Option<&str>,
) -> Result<Vec<SessionInfo>, ViewError> {
    let words: Vec<String> = query
        .split_whitespace()
        .take(8)
        .map(str::to_lowercase)
        .collect();
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let mut sql = String::from(
        "SELECT id, source, title, cwd, grouping, started_ms, updated_ms FROM session
         WHERE title IS NOT NULL AND (?1 IS NULL OR source = ?1)",
    );
    for i in 0..words.len() {
        sql.push_str(&format!(" AND instr(lower(title), ?{}) > 0", i + 2));
    }
    sql.push_str(&format!(" ORDER BY updated_ms DESC LIMIT {TITLE_HITS}"));
    let mut st = conn.prepare(&sql)?;
    let mut values: Vec<&dyn rusqlite::ToSql> = vec![&source];
    for w in &words {
        values.push(w);
    }
    let rows = st.query_map(values.as_slice(), store::session_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Most sessions a search lists for their title.
const TITLE_HITS: usize = 5;

fn hits(
    conn: &Connection,
    query: &str,
    req: Search<'_>,
    visible: Visible<'_>,
    redactor: &Redactor,
    budgets: Budgets,
) -> Result<Page, ViewError> {
    let tag = query_tag(query, req.source);
    let (hw, skip, any) = match req.cursor {
        None => {
            let hw: i64 =
                conn.query_row("SELECT COALESCE(MAX(id), 0) FROM entry", [], |r| r.get(0))?;
            (hw, 0usize, None)
        }
        Some(c) => {
            let f = parse_fields(c, "q", 4)
                .filter(|f| f[3] == tag)
                .ok_or_else(|| ViewError::BadCursor(c.to_string(), "made for another query"))?;
            let bad = || ViewError::BadCursor(c.to_string(), "damaged");
            (
                num(f[0]).ok_or_else(bad)?,
                num(f[1]).ok_or_else(bad)?,
                Some(f[2] == "1"),
            )
        }
    };
    let mut sessions: HashMap<String, Option<SessionInfo>> = HashMap::new();
    // All words first; with no hit at all, any of them.
    let modes: Vec<bool> = match any {
        Some(a) => vec![a],
        None => vec![false, true],
    };
    for any in modes {
        let Some(fts) = fts_query(query, any) else {
            return Ok(Page {
                text: "The query holds no word to search for.\n".into(),
                next_cursor: None,
                update_cursor: None,
            });
        };
        // Relevance among the newest matches: ranking every match of a common word costs
        // time in proportion to the store; the newest RANK_WINDOW are ranked, by bm25.
        let mut ranked: Vec<(i64, f64)> = conn
            .prepare_cached(
                "SELECT rowid, bm25(entry_fts) FROM entry_fts WHERE entry_fts MATCH ?1 AND rowid <= ?2
                 ORDER BY rowid DESC LIMIT ?3",
            )?
            .query_map(params![fts, hw, RANK_WINDOW as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let windowed = ranked.len() == RANK_WINDOW;
        ranked.sort_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
        let mut one = conn.prepare_cached(
            "SELECT e.id, e.session_id, e.kind, e.name, e.tref, e.ts_ms,
                    snippet(entry_fts, -1, '«', '»', '…', 24), e.side
             FROM entry_fts JOIN entry e ON e.id = entry_fts.rowid
             WHERE entry_fts MATCH ?1 AND entry_fts.rowid = ?2 AND e.superseded = 0 AND e.hidden = 0
               AND e.kind != 'title'",
        )?;
        let mut filler = Filler::new(bytes_of(budgets.search_tokens));
        let mut consumed = skip;
        let mut shown = 0usize;
        let mut more = false;
        // Sessions whose title holds every word come first, on the first page.
        if req.cursor.is_none() && !any {
            for info in titled(conn, query, req.source)? {
                if !visible(&info) {
                    continue;
                }
                let title = redactor.apply(info.title.as_deref().unwrap_or(""));
                filler.text.push_str(&format!(
                    "{} · {} · {} · title\n  {}\n",
                    info.id,
                    info.source,
                    utc(info.updated_ms),
                    headline(&title, SNIPPET_CHARS)
                ));
                shown += 1;
            }
        }
        for (id, _) in ranked.iter().skip(skip) {
            let mut rows = one.query(params![fts, id])?;
            let Some(r) = rows.next()? else {
                consumed += 1;
                continue;
            };
            let session_id: String = r.get(1)?;
            let info = match sessions.get(&session_id) {
                Some(i) => i.clone(),
                None => {
                    let i = store::session(conn, &session_id)?
                        .filter(|s| visible(s) && req.source.is_none_or(|src| s.source == src));
                    sessions.insert(session_id.clone(), i.clone());
                    i
                }
            };
            let Some(info) = info else {
                consumed += 1;
                continue;
            };
            let kind: String = r.get(2)?;
            let name: Option<String> = r.get(3)?;
            let tref: Option<i64> = r.get(4)?;
            let ts: i64 = r.get(5)?;
            let snippet: String = r.get(6)?;
            let side: bool = r.get(7)?;
            let mut what = kind.clone();
            if let (Some(n), Some(t)) = (&name, tref) {
                what = format!("T{t} {n}");
            } else if kind == "result" {
                let call: Option<(i64, String)> = conn
                    .query_row(
                        "SELECT c.tref, c.name FROM entry r JOIN entry c ON c.session_id = r.session_id
                         AND c.call_id = r.call_id AND c.kind = 'tool' WHERE r.id = ?1",
                        params![r.get::<_, i64>(0)?],
                        |c| Ok((c.get(0)?, c.get(1)?)),
                    )
                    .ok();
                if let Some((t, n)) = call {
                    what = format!("result of T{t} {n}");
                }
            }
            if side {
                what.push_str(" (side branch)");
            }
            let snippet = headline(
                &redactor.apply(&snippet.split_whitespace().collect::<Vec<_>>().join(" ")),
                SNIPPET_CHARS,
            );
            let block = format!(
                "{} · {} · {} · {what}\n  {snippet}\n",
                info.id,
                info.source,
                utc(ts)
            );
            if filler.text.len() + block.len() > filler.budget && shown > 0 {
                more = true;
                break;
            }
            filler.text.push_str(&block);
            consumed += 1;
            shown += 1;
        }
        if shown == 0 && !more && req.cursor.is_none() && !any {
            continue;
        }
        let next_cursor =
            more.then(|| format!("q.{hw}.{consumed}.{}.{tag}", if any { 1 } else { 0 }));
        let mut text = if shown == 0 {
            format!("No hits for {query:?}.\n")
        } else {
            let mut how = if any { " (any of the words)" } else { "" }.to_string();
            if query.split_whitespace().count() > MAX_WORDS {
                how.push_str(&format!(" (its first {MAX_WORDS} words)"));
            }
            if windowed {
                how.push_str(&format!(" among the {RANK_WINDOW} newest matches"));
            }
            format!(
                "Hits for {query:?}{how}, best first (session · source · time · what):\n{}",
                filler.text
            )
        };
        if let Some(c) = &next_cursor {
            text.push_str(&more_line(&format!(
                "{{\"action\":\"search\",\"query\":{},\"cursor\":\"{c}\"}}",
                serde_json::Value::from(query)
            )));
        }
        text.push_str("Read one: session {\"action\":\"read\",\"session_id\":\"…\"}\n");
        return Ok(Page {
            text,
            next_cursor,
            update_cursor: None,
        });
    }
    Ok(Page {
        text: format!("No hits for {query:?}.\n"),
        next_cursor: None,
        update_cursor: None,
    })
}

/// Where a read page starts.
enum Start {
    /// The session from the beginning, or from entry `from` at byte `skip` of its rendering.
    Whole { from: i64, skip: usize },
    /// What was recorded after entry `since`, from entry `from` at byte `skip`.
    Since { since: i64, from: i64, skip: usize },
    /// Expanded tool calls `refs`, from the `at`-th at byte `skip`.
    Refs { at: usize, skip: usize },
}

fn parse_read_cursor(c: &str, session_id: &str) -> Result<Start, ViewError> {
    let bad = |why| ViewError::BadCursor(c.to_string(), why);
    let tag = query_tag(session_id, None);
    let kind = c.split('.').next().unwrap_or("");
    let (n, fields) = match kind {
        "p" => (3, parse_fields(c, "p", 3)),
        "u" => (2, parse_fields(c, "u", 2)),
        "v" => (4, parse_fields(c, "v", 4)),
        "x" => (3, parse_fields(c, "x", 3)),
        _ => return Err(bad("not a read cursor")),
    };
    let f = fields.ok_or_else(|| bad("damaged"))?;
    if f[n - 1] != tag {
        return Err(bad("made for another session"));
    }
    let n64 = |s: &str| num::<i64>(s).ok_or_else(|| bad("damaged"));
    let nus = |s: &str| num::<usize>(s).ok_or_else(|| bad("damaged"));
    Ok(match kind {
        "p" => Start::Whole {
            from: n64(f[0])?,
            skip: nus(f[1])?,
        },
        "u" => {
            let since = n64(f[0])?;
            Start::Since {
                since,
                from: since + 1,
                skip: 0,
            }
        }
        "v" => Start::Since {
            since: n64(f[0])?,
            from: n64(f[1])?,
            skip: nus(f[2])?,
        },
        _ => Start::Refs {
            at: nus(f[0])?,
            skip: nus(f[1])?,
        },
    })
}

/// The uuids on a conversation tree's main chain: from the newest entry of the main line
/// (not a sidechain) back to the root. Entries off it are side branches (a rewind, an edit).
fn main_chain(conn: &Connection, session_id: &str) -> Result<Option<HashSet<String>>, ViewError> {
    let mut st = conn.prepare_cached(
        "SELECT uuid, parent, side FROM entry WHERE session_id = ?1 AND uuid IS NOT NULL ORDER BY id",
    )?;
    let rows = st.query_map(params![session_id], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, Option<String>>(1)?,
            r.get::<_, bool>(2)?,
        ))
    })?;
    let mut parent: HashMap<String, Option<String>> = HashMap::new();
    let mut leaf = None;
    for row in rows {
        let (uuid, p, side) = row?;
        if !side {
            leaf = Some(uuid.clone());
        }
        parent.insert(uuid, p);
    }
    let Some(mut at) = leaf else {
        return Ok(None);
    };
    let mut chain = HashSet::new();
    loop {
        if !chain.insert(at.clone()) {
            break;
        }
        match parent.get(&at).cloned().flatten() {
            Some(p) => at = p,
            None => break,
        }
    }
    Ok(Some(chain))
}

/// The latest result of call `call_id` in the session.
fn result_of(
    conn: &Connection,
    session_id: &str,
    call_id: &str,
) -> Result<Option<(String, bool)>, ViewError> {
    let mut st = conn.prepare_cached(
        "SELECT text, failed FROM entry WHERE session_id = ?1 AND call_id = ?2 AND kind = 'result'
         AND superseded = 0 ORDER BY id DESC LIMIT 1",
    )?;
    let mut rows = st.query(params![session_id, call_id])?;
    Ok(match rows.next()? {
        Some(r) => Some((r.get(0)?, r.get(1)?)),
        None => None,
    })
}

/// The tool call `call_id` of the session, if it was recorded: its entry id and `T` number.
fn call_of(
    conn: &Connection,
    session_id: &str,
    call_id: &str,
) -> Result<Option<(i64, Option<i64>)>, ViewError> {
    let mut st = conn.prepare_cached(
        "SELECT id, tref FROM entry WHERE session_id = ?1 AND call_id = ?2 AND kind = 'tool' LIMIT 1",
    )?;
    let mut rows = st.query(params![session_id, call_id])?;
    Ok(match rows.next()? {
        Some(r) => Some((r.get(0)?, r.get(1)?)),
        None => None,
    })
}

/// One line that says what a tool returned.
fn result_headline(text: &str, failed: bool) -> String {
    let lines = text.lines().count();
    let mut h = format!("→ {}", headline(text, 100));
    if failed {
        h.push_str(" [failed]");
    }
    if lines > 1 {
        h.push_str(&format!(" ({lines} lines)"));
    }
    h
}

/// An entry as the session page shows it. Authored text (user, assistant, errors) is whole
/// and exact (secrets aside); tool calls are one headline each with their `T` reference.
fn render(
    conn: &Connection,
    session_id: &str,
    e: &Entry,
    chain: Option<&HashSet<String>>,
    label: Option<&str>,
    since: Option<i64>,
    redactor: &Redactor,
) -> Result<Option<String>, ViewError> {
    let side =
        e.new.side || chain.is_some_and(|c| e.new.uuid.as_ref().is_some_and(|u| !c.contains(u)));
    let branch = if side { " (side branch)" } else { "" };
    let when = utc(e.new.ts_ms);
    let label = label.map(|l| format!(", {l}")).unwrap_or_default();
    Ok(Some(match e.new.kind {
        Kind::User | Kind::Assistant | Kind::Error => format!(
            "[{} {when}{branch}{label}]\n{}\n\n",
            e.new.kind.as_str(),
            redactor.apply(&e.new.text)
        ),
        Kind::Context => format!(
            "[context {when}{branch}] {} ({} bytes)\n\n",
            redactor.apply(&headline(&e.new.text, 100)),
            e.new.text.len()
        ),
        Kind::Tool => {
            let name = e.new.name.as_deref().unwrap_or("tool");
            let args = e.new.text.split_whitespace().collect::<Vec<_>>().join(" ");
            let mut line = format!(
                "T{} {name} {}",
                e.tref.unwrap_or(0),
                redactor.apply(&headline(&args, 140))
            );
            if let Some(call_id) = &e.new.call_id
                && let Some((text, failed)) = result_of(conn, session_id, call_id)?
            {
                line.push(' ');
                line.push_str(&redactor.apply(&result_headline(&text, failed)));
            }
            if let Some(meta) = &e.new.meta {
                line.push_str(&format!(" [{meta}]"));
            }
            format!("{line}{branch}\n\n")
        }
        Kind::Result => {
            // Shown with its call's headline; alone when the call is not in the session, or
            // when the reader (an update cursor) saw the call before its result came.
            let call = match e.new.call_id.as_deref() {
                Some(c) => call_of(conn, session_id, c)?,
                None => return Ok(None),
            };
            match call {
                Some((id, _)) if label.is_empty() && since.is_none_or(|s| id > s) => {
                    return Ok(None);
                }
                _ => {
                    let t = call
                        .and_then(|(_, t)| t)
                        .map_or_else(|| "an earlier call".to_string(), |t| format!("T{t}"));
                    format!(
                        "result of {t}{branch}: {}\n\n",
                        redactor.apply(&result_headline(&e.new.text, e.new.failed))
                    )
                }
            }
        }
    }))
}

/// The expansion of tool call `T<n>`: its arguments and whole result.
fn expansion(
    conn: &Connection,
    session_id: &str,
    tref: &str,
    redactor: &Redactor,
) -> Result<String, ViewError> {
    let n: i64 = tref
        .strip_prefix(['T', 't'])
        .and_then(|d| d.parse().ok())
        .ok_or_else(|| ViewError::UnknownRef(tref.to_string()))?;
    let mut st = conn.prepare_cached(
        "SELECT id FROM entry WHERE session_id = ?1 AND kind = 'tool' AND tref = ?2 AND hidden = 0 LIMIT 1",
    )?;
    let mut rows = st.query(params![session_id, n])?;
    let id: i64 = match rows.next()? {
        Some(r) => r.get(0)?,
        None => return Err(ViewError::UnknownRef(tref.to_string())),
    };
    let e = store::entry(conn, id)?.ok_or_else(|| ViewError::UnknownRef(tref.to_string()))?;
    let mut out = format!(
        "T{n} {} at {}\nArguments:\n{}\n",
        e.new.name.as_deref().unwrap_or("tool"),
        utc(e.new.ts_ms),
        redactor.apply(&e.new.text)
    );
    match e
        .new
        .call_id
        .as_deref()
        .map(|c| result_of(conn, session_id, c))
        .transpose()?
        .flatten()
    {
        Some((text, failed)) => {
            out.push_str(if failed {
                "Result (failed):\n"
            } else {
                "Result:\n"
            });
            out.push_str(&redactor.apply(&text));
            out.push_str("\n\n");
        }
        None => out.push_str("No result recorded.\n\n"),
    }
    Ok(out)
}

fn read_page(
    conn: &Connection,
    session_id: &str,
    cursor: Option<&str>,
    refs: Option<&str>,
    visible: Visible<'_>,
    redactor: &Redactor,
    budgets: Budgets,
) -> Result<Page, ViewError> {
    let info = store::session(conn, session_id)?
        .filter(|s| visible(s))
        .ok_or_else(|| ViewError::UnknownSession(session_id.to_string()))?;
    let tag = query_tag(session_id, None);
    let start = match cursor {
        None => match refs.filter(|r| !r.trim().is_empty()) {
            Some(_) => Start::Refs { at: 0, skip: 0 },
            None => Start::Whole { from: 0, skip: 0 },
        },
        Some(c) => parse_read_cursor(c, session_id)?,
    };
    let latest: i64 = conn.query_row(
        "SELECT COALESCE(MAX(id), 0) FROM entry WHERE session_id = ?1 AND hidden = 0",
        params![session_id],
        |r| r.get(0),
    )?;
    let update_cursor = format!("u.{latest}.{tag}");
    let mut filler = Filler::new(bytes_of(budgets.read_tokens));
    let first_page = cursor.is_none();
    if first_page && !matches!(start, Start::Refs { .. }) {
        let mut head = format!("Session {} ({}", info.id, info.source);
        if let Some(cwd) = &info.cwd {
            head.push_str(&format!(", {cwd}"));
        }
        if let Some(g) = &info.grouping {
            head.push_str(&format!(", grouped by {g}"));
        }
        head.push_str(&format!(
            ", {} to {})\n",
            utc(info.started_ms),
            utc(info.updated_ms)
        ));
        if let Some(t) = &info.title {
            head.push_str(&format!("Title: {}\n", redactor.apply(&headline(t, 200))));
        }
        head.push('\n');
        filler.text.push_str(&head);
    }
    let next: Option<String> = match start {
        Start::Refs { at, skip } => {
            let list: Vec<&str> = refs.unwrap_or("").split_whitespace().collect();
            if list.is_empty() {
                return Err(ViewError::BadCursor(
                    cursor.unwrap_or("").to_string(),
                    "an expansion cursor needs the same query (the T references) again",
                ));
            }
            let mut next = None;
            let mut skip = skip;
            for (i, r) in list.iter().enumerate().skip(at) {
                let text = expansion(conn, session_id, r, redactor)?;
                if skip > 0 && (skip >= text.len() || !text.is_char_boundary(skip)) {
                    return Err(ViewError::BadCursor(
                        cursor.unwrap_or("").to_string(),
                        "the offset is not inside its call",
                    ));
                }
                if !filler.offer(i as i64, &text, skip) {
                    next = filler.next.map(|(i, off)| format!("x.{i}.{off}.{tag}"));
                    break;
                }
                skip = 0;
            }
            next
        }
        Start::Whole { from, skip } => {
            page_entries(conn, &info, from, skip, None, &mut filler, redactor, &tag)?
        }
        Start::Since { since, from, skip } => {
            let next = page_entries(
                conn,
                &info,
                from.max(since.saturating_add(1)),
                skip,
                Some(since),
                &mut filler,
                redactor,
                &tag,
            )?;
            if next.is_none() && filler.text.is_empty() {
                filler.text.push_str("Nothing new since that cursor.\n");
            }
            next
        }
    };
    let mut text = filler.text;
    match &next {
        Some(c) => {
            let mut call = format!(
                "{{\"action\":\"read\",\"session_id\":{},\"cursor\":\"{c}\"",
                serde_json::Value::from(session_id)
            );
            if let Some(r) = refs.filter(|_| c.starts_with("x.")) {
                call.push_str(&format!(",\"query\":{}", serde_json::Value::from(r)));
            }
            call.push('}');
            text.push_str(&format!("\n{}", more_line(&call)));
        }
        None => text.push_str(&format!(
            "[end; later, cursor \"{update_cursor}\" returns only what is new]\n"
        )),
    }
    Ok(Page {
        text,
        next_cursor: next,
        update_cursor: Some(update_cursor),
    })
}

/// Fills a page with the session's entries from entry `from` (at byte `skip` of its
/// rendering), all of them, or with `since` only what is new after that update cursor.
/// Returns the cursor of the next page, if any.
#[allow(clippy::too_many_arguments)]
fn page_entries(
    conn: &Connection,
    info: &SessionInfo,
    from: i64,
    skip: usize,
    since: Option<i64>,
    filler: &mut Filler,
    redactor: &Redactor,
    tag: &str,
) -> Result<Option<String>, ViewError> {
    let session_id = info.id.as_str();
    let chain = if info.source == "claude" {
        main_chain(conn, session_id)?
    } else {
        None
    };
    let cursor_of = |id: i64, off: usize| match since {
        None => format!("p.{id}.{off}.{tag}"),
        Some(since) => format!("v.{since}.{id}.{off}.{tag}"),
    };
    let shown = |e: &Entry| -> Result<Option<String>, ViewError> {
        let Some(since) = since else {
            return render(conn, session_id, e, chain.as_ref(), None, None, redactor);
        };
        Ok(match seen_version(conn, e, since)? {
            Some(old) => {
                // Compared as shown: a secret that straddles the old end stays hidden.
                let (old, new) = (redactor.apply(&old), redactor.apply(&e.new.text));
                match new.strip_prefix(old.as_str()) {
                    Some(suffix) => Some(format!(
                        "[{} {}, continued]\n{suffix}\n\n",
                        e.new.kind.as_str(),
                        utc(e.new.ts_ms)
                    )),
                    None => render(
                        conn,
                        session_id,
                        e,
                        chain.as_ref(),
                        Some("replaces what you read before"),
                        Some(since),
                        redactor,
                    )?,
                }
            }
            None => render(
                conn,
                session_id,
                e,
                chain.as_ref(),
                None,
                Some(since),
                redactor,
            )?,
        })
    };
    let mut from = from;
    if skip > 0 {
        // The entry a page was cut in goes on, even if a later version replaced it since.
        let bad = |why| ViewError::BadCursor(format!("{from}.{skip}"), why);
        let e = store::entry_in(conn, session_id, from)?.ok_or_else(|| bad("no such entry"))?;
        let text = shown(&e)?.unwrap_or_default();
        if skip >= text.len() || !text.is_char_boundary(skip) {
            return Err(bad("the offset is not inside its entry"));
        }
        if !filler.offer(e.id, &text, skip) {
            return Ok(filler.next.map(|(id, off)| cursor_of(id, off)));
        }
        from = e.id + 1;
    }
    loop {
        let batch = store::entries(conn, session_id, from, 200, true)?;
        if batch.is_empty() {
            return Ok(None);
        }
        for e in &batch {
            from = e.id + 1;
            let Some(text) = shown(e)? else { continue };
            if !filler.offer(e.id, &text, 0) {
                return Ok(filler.next.map(|(id, off)| cursor_of(id, off)));
            }
        }
    }
}

/// The text of the version of `e` a reader whose update cursor is `since` has seen, if it
/// saw one (the newest version at or before `since` in the chain `e` replaces).
fn seen_version(conn: &Connection, e: &Entry, since: i64) -> Result<Option<String>, ViewError> {
    let mut at = e.supersedes;
    while let Some(id) = at {
        let Some(old) = store::entry(conn, id)? else {
            return Ok(None);
        };
        if old.id <= since {
            return Ok(Some(old.new.text));
        }
        at = old.supersedes;
    }
    Ok(None)
}
