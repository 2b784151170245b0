//! The store: one SQLite file (WAL, private) holding sessions, their entries in order, an FTS5
//! index over the entries' text, and how far each imported transcript has been read.
//!
//! Entries are only ever added. A message that changes (an assistant reply that grows, a
//! transcript that re-writes one) is a new entry that `supersedes` the old one, so a reader's
//! update cursor (the last entry id it saw) tells exactly what is new to it.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, params};

use crate::StoreError;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Text the user wrote.
    User,
    /// Text the assistant wrote.
    Assistant,
    /// A tool call: `name` and its arguments as `text`.
    Tool,
    /// What a tool call returned (`call_id` names the call).
    Result,
    /// An error the agent or the tool reported.
    Error,
    /// Text the agent put into the conversation that neither party wrote: injected
    /// instructions, environment context, a compaction summary.
    Context,
}

impl Kind {
    /// The name stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::User => "user",
            Kind::Assistant => "assistant",
            Kind::Tool => "tool",
            Kind::Result => "result",
            Kind::Error => "error",
            Kind::Context => "context",
        }
    }

    /// The kind named `s`.
    pub fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "user" => Kind::User,
            "assistant" => Kind::Assistant,
            "tool" => Kind::Tool,
            "result" => Kind::Result,
            "error" => Kind::Error,
            "context" => Kind::Context,
            _ => return None,
        })
    }
}

/// One entry to add.
#[derive(Debug, Clone)]
pub struct NewEntry {
    /// When it happened, ms since the epoch.
    pub ts_ms: i64,
    /// What it is.
    pub kind: Kind,
    /// Tool name (tool calls).
    pub name: Option<String>,
    /// The text: a message, a tool's arguments, a result.
    pub text: String,
    /// Joins a call and its result.
    pub call_id: Option<String>,
    /// The result or error was a failure.
    pub failed: bool,
    /// The source's identity of a message that may change (re-recorded under the same key).
    pub msg_key: Option<String>,
    /// The source's id of this entry and of its parent (conversation trees with branches).
    pub uuid: Option<String>,
    /// See `uuid`.
    pub parent: Option<String>,
    /// On a side branch of the conversation (a sidechain).
    pub side: bool,
    /// Recorded for the audit but never shown (calls to `session` itself).
    pub hidden: bool,
    /// A short line of facts shown with the entry (gantry's calls: connector, decision,
    /// error code, client labels).
    pub meta: Option<String>,
}

impl NewEntry {
    /// An entry with only the essentials; the rest off.
    pub fn new(ts_ms: i64, kind: Kind, text: impl Into<String>) -> NewEntry {
        NewEntry {
            ts_ms,
            kind,
            name: None,
            text: text.into(),
            call_id: None,
            failed: false,
            msg_key: None,
            uuid: None,
            parent: None,
            side: false,
            hidden: false,
            meta: None,
        }
    }
}

/// A session's facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// Its id (`<source>-<source's id>`).
    pub id: String,
    /// gantry, codex, claude, gemini, opencode.
    pub source: String,
    /// A title, if known.
    pub title: Option<String>,
    /// Its working directory (imported sessions).
    pub cwd: Option<String>,
    /// How calls were grouped into it (gantry's own sessions).
    pub grouping: Option<String>,
    /// First and last entry times.
    pub started_ms: i64,
    /// See `started_ms`.
    pub updated_ms: i64,
}

/// A stored entry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Global order; what cursors hold.
    pub id: i64,
    /// The entry it replaces, if any.
    pub supersedes: Option<i64>,
    /// Session-local number of a tool call (`T<n>`).
    pub tref: Option<i64>,
    /// The rest, as added.
    pub new: NewEntry,
}

/// How far a transcript file has been read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceMark {
    /// Device and inode: the same file after a move.
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
    /// Bytes consumed (through the last complete line).
    pub offset: u64,
    /// A hash of the file's first bytes: a different file at the same place.
    pub head: String,
    /// The session it feeds.
    pub session_id: String,
    /// Lines that could not be parsed so far.
    pub skipped: i64,
    /// Lines read so far.
    pub lines: i64,
    /// Modification time when last read (ns since the epoch).
    pub mtime_ns: i64,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS session(
  id TEXT PRIMARY KEY,
  source TEXT NOT NULL,
  title TEXT,
  cwd TEXT,
  grouping TEXT,
  conv_key TEXT,
  started_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS session_updated ON session(updated_ms DESC);
CREATE INDEX IF NOT EXISTS session_key ON session(conv_key);
CREATE TABLE IF NOT EXISTS entry(
  id INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL,
  ts_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  name TEXT,
  text TEXT NOT NULL,
  call_id TEXT,
  failed INTEGER NOT NULL DEFAULT 0,
  msg_key TEXT,
  uuid TEXT,
  parent TEXT,
  side INTEGER NOT NULL DEFAULT 0,
  hidden INTEGER NOT NULL DEFAULT 0,
  supersedes INTEGER,
  superseded INTEGER NOT NULL DEFAULT 0,
  tref INTEGER,
  meta TEXT
);
CREATE INDEX IF NOT EXISTS entry_session ON entry(session_id, id);
CREATE INDEX IF NOT EXISTS entry_key ON entry(session_id, msg_key) WHERE msg_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS entry_call ON entry(session_id, call_id) WHERE call_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS entry_tref ON entry(session_id, tref) WHERE tref IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS entry_fts USING fts5(
  name, text, content='entry', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS meta(
  key TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS source(
  path TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  dev INTEGER NOT NULL,
  ino INTEGER NOT NULL,
  offset INTEGER NOT NULL,
  head TEXT NOT NULL,
  session_id TEXT NOT NULL,
  skipped INTEGER NOT NULL DEFAULT 0,
  lines INTEGER NOT NULL DEFAULT 0,
  mtime_ns INTEGER NOT NULL DEFAULT 0
);
";

/// What `PRAGMA user_version` says once the search index is kept by [`Store::write`] rather
/// than by a trigger per row.
const SCHEMA_VERSION: i64 = 2;

/// The `meta` key `fts:indexed_through` holds the last entry id in the search index: every
/// entry at or below it that is not hidden is indexed, none above it is.
///
/// From version 0 (a trigger indexed each row as it was inserted, so everything stored is
/// indexed) or a new store: rows are indexed at each transaction's end, and a deleted row
/// leaves the index only if it was in it.
const MIGRATE_TO_2: &str = "
DROP TRIGGER IF EXISTS entry_ai;
DROP TRIGGER IF EXISTS entry_ad;
CREATE TRIGGER entry_ad AFTER DELETE ON entry
  WHEN old.hidden = 0 AND old.id <= (SELECT value FROM meta WHERE key = 'fts:indexed_through')
BEGIN
  INSERT INTO entry_fts(entry_fts, rowid, name, text) VALUES ('delete', old.id, old.name, old.text);
END;
INSERT OR IGNORE INTO meta(key, value) SELECT 'fts:indexed_through', COALESCE(MAX(id), 0) FROM entry;
PRAGMA user_version = 2;
";

/// The store. Every method takes the one connection's lock: SQLite serialises writers anyway,
/// and one connection keeps its statement cache warm.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
}

fn lock(m: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    match m.lock() {
        Ok(g) => g,
        // A panic mid-statement leaves no transaction open (rusqlite rolls back on drop).
        Err(p) => p.into_inner(),
    }
}

impl Store {
    /// Opens (creating, private to the user) the store at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        create_private(path).map_err(|e| StoreError::Open(path.to_path_buf(), e.to_string()))?;
        let conn = Connection::open(path)
            .map_err(|e| StoreError::Open(path.to_path_buf(), e.to_string()))?;
        // WAL: readers never block the writer. synchronous=NORMAL: a commit survives the
        // process being killed (the WAL is in the page cache), not a power cut.
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=5000; PRAGMA foreign_keys=OFF;",
        )?;
        conn.execute_batch(SCHEMA)?;
        migrate(&conn)?;
        // The WAL and shared-memory files are created by SQLite with the database's mode.
        Ok(Store {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
        })
    }

    /// Where the store lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` in one transaction.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = lock(&self.conn);
        // IMMEDIATE: the write lock is taken (or waited for, busy_timeout) at the start; a
        // deferred transaction that reads first fails at once when another server writes.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let out = f(&tx)?;
        index_new_entries(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// Runs `f` against the connection (reads).
    pub fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        f(&lock(&self.conn))
    }
}

/// Brings a store made by an earlier gantry (or a new one) to [`SCHEMA_VERSION`], in one
/// transaction, so two servers opening it at once cannot both migrate it.
fn migrate(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let done = if version < SCHEMA_VERSION {
        conn.execute_batch(MIGRATE_TO_2)
    } else {
        Ok(())
    };
    match done {
        Ok(()) => conn.execute_batch("COMMIT")?,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e.into());
        }
    }
    Ok(())
}

/// Adds to the search index every entry the transaction stored. One statement for all of
/// them: FTS5 writes its pending terms out at every statement that touches it, so a
/// statement per row (a trigger) made a new index segment per row and cost most of a
/// recorded call.
fn index_new_entries(tx: &Connection) -> Result<(), StoreError> {
    // An earlier gantry opening the store puts its trigger back: its rows are indexed twice
    // and its deletes leave words behind, so the index is made again from the entries.
    let old_trigger: bool = tx
        .prepare_cached(
            "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'entry_ai')",
        )?
        .query_row([], |r| r.get(0))?;
    if old_trigger {
        tx.execute_batch(REINDEX)?;
    }
    // Missing, the mark would index nothing, silently: an error instead.
    let through: i64 = tx
        .prepare_cached("SELECT value FROM meta WHERE key = 'fts:indexed_through'")?
        .query_row([], |r| r.get(0))?;
    tx.prepare_cached(
        "INSERT INTO entry_fts(rowid, name, text)
         SELECT id, name, text FROM entry WHERE id > ?1 AND hidden = 0",
    )?
    .execute([through])?;
    // The mark only rises: ids at or below it are never handed out again, so a deleted newest
    // entry's id is not reused (update cursors hold the last id they saw).
    tx.prepare_cached(
        "UPDATE meta SET value = (SELECT COALESCE(MAX(id), 0) FROM entry)
         WHERE key = 'fts:indexed_through' AND value < (SELECT COALESCE(MAX(id), 0) FROM entry)",
    )?
    .execute([])?;
    Ok(())
}

/// Drops an earlier gantry's per-row trigger and makes the index again from the entries that
/// are not hidden.
const REINDEX: &str = "
DROP TRIGGER IF EXISTS entry_ai;
INSERT INTO entry_fts(entry_fts) VALUES ('delete-all');
INSERT INTO entry_fts(rowid, name, text) SELECT id, name, text FROM entry WHERE hidden = 0;
UPDATE meta SET value = (SELECT COALESCE(MAX(id), 0) FROM entry)
  WHERE key = 'fts:indexed_through' AND value < (SELECT COALESCE(MAX(id), 0) FROM entry);
";

/// Creates `path` with mode 0600 if it does not exist (SQLite would use the umask).
fn create_private(path: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if file.metadata()?.permissions().mode() & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
    }
    drop(file);
    Ok(())
}

/// Creates or updates a session's row.
pub fn upsert_session(tx: &Connection, s: &SessionInfo) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO session(id, source, title, cwd, grouping, started_ms, updated_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT(id) DO UPDATE SET
           title = COALESCE(excluded.title, session.title),
           cwd = COALESCE(session.cwd, excluded.cwd),
           grouping = COALESCE(excluded.grouping, session.grouping),
           started_ms = MIN(session.started_ms, excluded.started_ms),
           updated_ms = MAX(session.updated_ms, excluded.updated_ms)",
        params![
            s.id,
            s.source,
            s.title,
            s.cwd,
            s.grouping,
            s.started_ms,
            s.updated_ms
        ],
    )?;
    Ok(())
}

/// Sets a session's title (a later title wins).
pub fn set_title(tx: &Connection, id: &str, title: &str) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE session SET title = ?2 WHERE id = ?1",
        params![id, title],
    )?;
    Ok(())
}

/// Adds an entry to session `session_id`. With a `msg_key` already present in the session,
/// the new entry supersedes the latest one under that key (unless the text is unchanged,
/// when nothing is added). Returns the new entry's id, if one was added.
pub fn add_entry(
    tx: &Connection,
    session_id: &str,
    e: &NewEntry,
) -> Result<Option<i64>, StoreError> {
    add_numbered_entry(tx, session_id, e, None)
}

/// [`add_entry`], with the session's next tool-call number when the caller keeps it (a
/// transaction that records many calls into one session): set to the number after this
/// entry's when the entry takes one. `None` asks the store.
pub(crate) fn add_numbered_entry(
    tx: &Connection,
    session_id: &str,
    e: &NewEntry,
    next_tref: Option<&mut i64>,
) -> Result<Option<i64>, StoreError> {
    let mut supersedes = None;
    if let Some(key) = &e.msg_key {
        let prior: Option<(i64, String)> = tx
            .prepare_cached(
                "SELECT id, text FROM entry WHERE session_id = ?1 AND msg_key = ?2 AND superseded = 0 ORDER BY id DESC LIMIT 1",
            )?
            .query_row(params![session_id, key], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((id, text)) = prior {
            if text == e.text {
                return Ok(None);
            }
            supersedes = Some(id);
        }
    }
    let tref: Option<i64> = if e.kind == Kind::Tool && !e.hidden {
        match next_tref {
            Some(next) => {
                let n = *next;
                *next += 1;
                Some(n)
            }
            None => Some(next_tref_of(tx, session_id)?),
        }
    } else {
        None
    };
    tx.prepare_cached(
        // The id is above every id ever indexed, even when the newest entries were deleted
        // (SQLite would reuse their ids): an id at or below the mark counts as indexed.
        "INSERT INTO entry(id, session_id, ts_ms, kind, name, text, call_id, failed, msg_key, uuid, parent, side, hidden, supersedes, tref, meta)
         VALUES (MAX((SELECT COALESCE(MAX(id), 0) FROM entry), (SELECT value FROM meta WHERE key = 'fts:indexed_through')) + 1,
                 ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    )?
    .execute(params![
            session_id,
            e.ts_ms,
            e.kind.as_str(),
            e.name,
            e.text,
            e.call_id,
            e.failed,
            e.msg_key,
            e.uuid,
            e.parent,
            e.side,
            e.hidden,
            supersedes,
            tref,
            e.meta
        ],
    )?;
    let id = tx.last_insert_rowid();
    if let Some(old) = supersedes {
        tx.prepare_cached("UPDATE entry SET superseded = 1 WHERE id = ?1")?
            .execute(params![old])?;
    }
    // Only when it moves: a call's two entries share their time, and an unchanged row is not
    // written again.
    tx.prepare_cached("UPDATE session SET updated_ms = ?2 WHERE id = ?1 AND updated_ms < ?2")?
        .execute(params![session_id, e.ts_ms])?;
    Ok(Some(id))
}

/// The number the session's next visible tool call takes (`t1`, `t2`... in a read).
pub(crate) fn next_tref_of(tx: &Connection, session_id: &str) -> Result<i64, StoreError> {
    Ok(tx
        .prepare_cached(
            "SELECT COALESCE(MAX(tref), 0) + 1 FROM entry WHERE session_id = ?1 AND tref IS NOT NULL",
        )?
        .query_row(params![session_id], |r| r.get(0))?)
}

/// The latest text under `msg_key` in a session.
pub fn latest_text(
    conn: &Connection,
    session_id: &str,
    msg_key: &str,
) -> Result<Option<String>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT text FROM entry WHERE session_id = ?1 AND msg_key = ?2 AND superseded = 0 ORDER BY id DESC LIMIT 1",
            params![session_id, msg_key],
            |r| r.get(0),
        )
        .optional()?)
}

/// How far the journal `key` has been taken into the store.
pub fn journal_offset(conn: &Connection, key: &str) -> Result<u64, StoreError> {
    let v: Option<i64> = conn
        .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(v.map_or(0, |v| u64::try_from(v).unwrap_or(0)))
}

/// Records how far the journal `key` has been taken into the store.
pub fn set_journal_offset(tx: &Connection, key: &str, offset: u64) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO meta(key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    )?
    .execute(params![key, i64::try_from(offset).unwrap_or(i64::MAX)])?;
    Ok(())
}

/// Forgets the journal `key` (its file is gone).
pub fn forget_journal(tx: &Connection, key: &str) -> Result<(), StoreError> {
    tx.execute("DELETE FROM meta WHERE key = ?1", params![key])?;
    Ok(())
}

/// Whether the tool call `call_id` of the session is hidden (its result is hidden too).
pub fn call_hidden(conn: &Connection, session_id: &str, call_id: &str) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT hidden FROM entry WHERE session_id = ?1 AND call_id = ?2 AND kind = 'tool' LIMIT 1",
        )?
        .query_row(params![session_id, call_id], |r| r.get(0))
        .optional()?
        .unwrap_or(false))
}

/// Deletes a session and its entries (a transcript that vanished or was rewritten).
pub fn delete_session(tx: &Connection, id: &str) -> Result<(), StoreError> {
    tx.execute("DELETE FROM entry WHERE session_id = ?1", params![id])?;
    tx.execute("DELETE FROM session WHERE id = ?1", params![id])?;
    Ok(())
}

/// How far `path` has been read, if it has been.
pub fn source_mark(conn: &Connection, path: &str) -> Result<Option<SourceMark>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT dev, ino, offset, head, session_id, skipped, lines, mtime_ns FROM source WHERE path = ?1",
            params![path],
            |r| {
                Ok(SourceMark {
                    dev: r.get::<_, i64>(0)? as u64,
                    ino: r.get::<_, i64>(1)? as u64,
                    offset: r.get::<_, i64>(2)? as u64,
                    head: r.get(3)?,
                    session_id: r.get(4)?,
                    skipped: r.get(5)?,
                    lines: r.get(6)?,
                    mtime_ns: r.get(7)?,
                })
            },
        )
        .optional()?)
}

/// Records how far `path` has been read.
pub fn set_source_mark(
    tx: &Connection,
    path: &str,
    kind: &str,
    m: &SourceMark,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO source(path, kind, dev, ino, offset, head, session_id, skipped, lines, mtime_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT(path) DO UPDATE SET dev = ?3, ino = ?4, offset = ?5, head = ?6, session_id = ?7, skipped = ?8, lines = ?9, mtime_ns = ?10",
        params![
            path,
            kind,
            m.dev as i64,
            m.ino as i64,
            m.offset as i64,
            m.head,
            m.session_id,
            m.skipped,
            m.lines,
            m.mtime_ns
        ],
    )?;
    Ok(())
}

/// Every source path of `kind` the store knows.
pub fn source_paths(conn: &Connection, kind: &str) -> Result<Vec<String>, StoreError> {
    let mut st = conn.prepare_cached("SELECT path FROM source WHERE kind = ?1")?;
    let rows = st.query_map(params![kind], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Forgets a source path.
pub fn forget_source(tx: &Connection, path: &str) -> Result<(), StoreError> {
    tx.execute("DELETE FROM source WHERE path = ?1", params![path])?;
    Ok(())
}

/// A session's facts.
pub fn session(conn: &Connection, id: &str) -> Result<Option<SessionInfo>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT id, source, title, cwd, grouping, started_ms, updated_ms FROM session WHERE id = ?1",
            params![id],
            session_row,
        )
        .optional()?)
}

pub(crate) fn session_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionInfo> {
    Ok(SessionInfo {
        id: r.get(0)?,
        source: r.get(1)?,
        title: r.get(2)?,
        cwd: r.get(3)?,
        grouping: r.get(4)?,
        started_ms: r.get(5)?,
        updated_ms: r.get(6)?,
    })
}

/// The session with conversation key `key`, its last entry time, if there is one.
pub fn session_by_key(conn: &Connection, key: &str) -> Result<Option<(String, i64)>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT id, updated_ms FROM session WHERE conv_key = ?1 ORDER BY updated_ms DESC LIMIT 1",
        )?
        .query_row(params![key], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

/// Sets the conversation key of a gantry session.
pub fn set_key(tx: &Connection, id: &str, key: &str) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE session SET conv_key = ?2 WHERE id = ?1",
        params![id, key],
    )?;
    Ok(())
}

/// The visible entries of a session from entry `from` on, in order (at most `limit`); with
/// `latest_only`, not those a later version replaced.
pub fn entries(
    conn: &Connection,
    session_id: &str,
    from: i64,
    limit: usize,
    latest_only: bool,
) -> Result<Vec<Entry>, StoreError> {
    let mut st = conn.prepare_cached(entry_select!(
        "WHERE session_id = ?1 AND id >= ?2 AND hidden = 0 AND (?4 = 0 OR superseded = 0)
             ORDER BY id LIMIT ?3"
    ))?;
    let rows = st.query_map(
        params![session_id, from, limit as i64, latest_only],
        entry_row,
    )?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Entry `id`, if it is a visible entry of session `session_id` (replaced or not).
pub fn entry_in(conn: &Connection, session_id: &str, id: i64) -> Result<Option<Entry>, StoreError> {
    Ok(conn
        .query_row(
            entry_select!("WHERE id = ?1 AND session_id = ?2 AND hidden = 0"),
            params![id, session_id],
            entry_row,
        )
        .optional()?)
}

/// One entry by id.
pub fn entry(conn: &Connection, id: i64) -> Result<Option<Entry>, StoreError> {
    Ok(conn
        .query_row(entry_select!("WHERE id = ?1"), params![id], entry_row)
        .optional()?)
}

/// `SELECT` of the columns [`entry_row`] reads, in its order, from `entry`, then `$rest`.
macro_rules! entry_select {
    ($rest:literal) => {
        concat!(
            "SELECT id, ts_ms, kind, name, text, call_id, failed, msg_key, uuid, parent, side, supersedes, tref, meta FROM entry ",
            $rest
        )
    };
}
use entry_select;

pub(crate) fn entry_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Entry> {
    let kind: String = r.get(2)?;
    Ok(Entry {
        id: r.get(0)?,
        supersedes: r.get(11)?,
        tref: r.get(12)?,
        new: NewEntry {
            ts_ms: r.get(1)?,
            kind: Kind::parse(&kind).unwrap_or(Kind::Context),
            name: r.get(3)?,
            text: r.get(4)?,
            call_id: r.get(5)?,
            failed: r.get(6)?,
            msg_key: r.get(7)?,
            uuid: r.get(8)?,
            parent: r.get(9)?,
            side: r.get(10)?,
            hidden: false,
            meta: r.get(13)?,
        },
    })
}
