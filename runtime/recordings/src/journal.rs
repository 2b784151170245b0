//! The journal: how a call is recorded durably at the cost of one `write`. The answering
//! thread appends the call as one JSON line to this server's own journal file
//! (`sessions-<pid>-<n>.journal`, private, beside the store, locked for the server's life)
//! before its reply leaves; a writer thread moves lines into the store in batches, committing
//! each batch together with how far the file has been read, and empties the file once all of
//! it is taken and either its oldest line was stored a second ago or it passed 1 MiB (so
//! unredacted text stays there about a second, busy or not). A server
//! killed at any moment loses no call it answered: the next server to open the store finds the
//! file unlocked and moves what is left into the store, then removes it (a torn last line,
//! whose call was never answered, is dropped). Servers sharing a store each have their own
//! file, so none stores another's calls twice.

use std::borrow::Cow;
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::record::{Batch, Call, Grouping, record_in};
use crate::{Redactor, Store, StoreError};

/// How long the writer lets calls gather before it stores them.
const GATHER: Duration = Duration::from_millis(100);
/// The journal is emptied once everything in it is stored and either its oldest line was
/// stored this long ago (or no call came for this long) or it has grown past [`EMPTY_PAST`]:
/// emptying is a truncation and a transaction of its own, too dear to pay after every batch
/// of a busy server.
const EMPTY_AFTER: Duration = Duration::from_secs(1);
/// See [`EMPTY_AFTER`].
const EMPTY_PAST: u64 = 1 << 20;
/// Most bytes the writer takes into one transaction.
const BATCH: usize = 4 << 20;

/// One call as a journal line. Written straight from the call's borrowed fields (the reply's
/// text is not copied before it is encoded) and read back borrowing from the batch's buffer.
#[derive(Debug, Serialize, Deserialize)]
struct Line<'a> {
    ts: i64,
    #[serde(borrow)]
    connector: Cow<'a, str>,
    #[serde(borrow)]
    tool: Cow<'a, str>,
    #[serde(borrow)]
    args: Cow<'a, str>,
    #[serde(borrow)]
    result: Cow<'a, str>,
    #[serde(borrow)]
    decision: Cow<'a, str>,
    #[serde(borrow)]
    error: Option<Cow<'a, str>>,
    failed: bool,
    /// `label`, `conn` or `gap`, and the label or connection.
    #[serde(borrow)]
    group: (Cow<'a, str>, Cow<'a, str>),
    #[serde(borrow)]
    labels: Vec<Cow<'a, str>>,
    hidden: bool,
}

impl<'a> Line<'a> {
    fn of(call: &'a Call<'a>) -> Line<'a> {
        let group = match &call.grouping {
            Grouping::ClientLabel(l) => ("label", l.as_str()),
            Grouping::Connection(c) => ("conn", c.as_str()),
            Grouping::TimeGap => ("gap", ""),
        };
        Line {
            ts: call.ts_ms,
            connector: call.connector.into(),
            tool: call.tool.into(),
            args: call.arguments.into(),
            result: call.result.into(),
            decision: call.decision.into(),
            error: call.error.map(Cow::Borrowed),
            failed: call.failed,
            group: (group.0.into(), group.1.into()),
            labels: call
                .labels
                .iter()
                .map(|l| Cow::Borrowed(l.as_str()))
                .collect(),
            hidden: call.hidden,
        }
    }

    fn call(&self) -> Call<'_> {
        Call {
            ts_ms: self.ts,
            connector: &self.connector,
            tool: &self.tool,
            arguments: &self.args,
            result: &self.result,
            decision: &self.decision,
            error: self.error.as_deref(),
            failed: self.failed,
            grouping: match &*self.group.0 {
                "label" => Grouping::ClientLabel(self.group.1.to_string()),
                "conn" => Grouping::Connection(self.group.1.to_string()),
                _ => Grouping::TimeGap,
            },
            labels: self.labels.iter().map(|l| l.to_string()).collect(),
            hidden: self.hidden,
        }
    }
}

#[derive(Debug, Default)]
struct Progress {
    /// Calls the writer has committed since open.
    committed: u64,
    /// Why the writer stopped, if it did.
    failed: Option<String>,
}

/// Appends calls and has them moved into the store.
#[derive(Debug)]
pub struct Journal {
    file: Arc<Mutex<std::fs::File>>,
    /// Where the journal is (removed by [`Journal::close`]).
    path: PathBuf,
    store: Arc<Store>,
    /// Set, under the file's lock, once the journal is removed: no line is appended after
    /// it, and the writer leaves the store's record of it alone.
    closed: Arc<std::sync::atomic::AtomicBool>,
    appended: AtomicU64,
    progress: Arc<(Mutex<Progress>, Condvar)>,
    wake: Mutex<std::sync::mpsc::Sender<()>>,
    writer: std::thread::Thread,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |e| StoreError::Open(path.to_path_buf(), e.to_string())
}

impl Journal {
    /// Opens this server's journal beside `store`, moves into the store whatever servers
    /// that stopped left in theirs, and starts the writer.
    pub fn open(store: Arc<Store>, redactor: Redactor) -> Result<Journal, StoreError> {
        let dir = store
            .path()
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        replay_orphans(&store, &redactor, &dir)?;
        let path = dir.join(format!(
            "{JOURNAL_PREFIX}{}-{}{JOURNAL_SUFFIX}",
            std::process::id(),
            unique()
        ));
        let err = io_error(&path);
        let file = private_file(&path).map_err(&err)?;
        // Held until the process ends: an unlocked journal belongs to nobody alive.
        file.lock().map_err(&err)?;
        let reader = std::fs::File::open(&path).map_err(&err)?;
        let file = Arc::new(Mutex::new(file));
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let progress = Arc::new((Mutex::new(Progress::default()), Condvar::new()));
        let (wake, woken) = std::sync::mpsc::channel::<()>();
        let writer = Writer {
            store: store.clone(),
            redactor,
            closed: closed.clone(),
            reader,
            path: path.clone(),
            file: file.clone(),
            offset: 0,
            stored_since: None,
            progress: progress.clone(),
        };
        let writer = std::thread::Builder::new()
            .name("gantry-journal".into())
            .spawn(move || writer.run(&woken))
            .map_err(&err)?
            .thread()
            .clone();
        Ok(Journal {
            file,
            path: path.clone(),
            store,
            closed,
            appended: AtomicU64::new(0),
            progress,
            wake: Mutex::new(wake),
            writer,
        })
    }

    /// Appends `call`: once this returns, the call survives the process being killed.
    pub fn append(&self, call: &Call<'_>) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(&Line::of(call)).map_err(std::io::Error::other)?;
        line.push(b'\n');
        {
            let mut file = lock(&self.file);
            if self.closed.load(Ordering::SeqCst) {
                return Err(std::io::Error::other(
                    "the journal is closed: the server is stopping",
                ));
            }
            // One write: O_APPEND puts it whole at the end, whatever another thread does.
            file.write_all(&line)?;
            // Counted under the lock: `close` holding it sees every line in the file counted.
            self.appended.fetch_add(1, Ordering::SeqCst);
        }
        let _ = lock(&self.wake).send(());
        Ok(())
    }

    /// Waits (at most `timeout`) until every call appended so far is in the store. Returns
    /// whether it is.
    pub fn flush(&self, timeout: Duration) -> bool {
        let target = self.appended.load(Ordering::SeqCst);
        self.writer.unpark();
        let until = Instant::now() + timeout;
        let (m, cv) = &*self.progress;
        let mut p = lock(m);
        while p.committed < target && p.failed.is_none() {
            let now = Instant::now();
            if now >= until {
                return false;
            }
            p = match cv.wait_timeout(p, until - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        p.committed >= target
    }
}

impl Journal {
    /// Ends the journal at a clean stop: once every call appended is in the store (waited
    /// for at most `timeout`), the file is removed and the store forgets it, so a stopped
    /// server leaves no journal behind. Returns whether it was removed; when not (the store
    /// is behind or failing), the file stays for the next start to take.
    pub fn close(&self, timeout: Duration) -> bool {
        if !self.flush(timeout) {
            return false;
        }
        // Under the appenders' lock: nothing lands between the last commit and the removal.
        let _file = lock(&self.file);
        let target = self.appended.load(Ordering::SeqCst);
        if lock(&self.progress.0).committed < target {
            return false;
        }
        match std::fs::remove_file(&self.path) {
            // Gone already (its directory removed): everything in it is stored, as above.
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return false,
            _ => {}
        }
        self.closed.store(true, Ordering::SeqCst);
        let key = offset_key(&self.path);
        if let Err(e) = self
            .store
            .write(|tx| crate::store::forget_journal(tx, &key))
        {
            tracing::warn!("the stopped journal's record was not removed from the store: {e}");
        }
        true
    }
}

const JOURNAL_PREFIX: &str = "sessions-";
const JOURNAL_SUFFIX: &str = ".journal";

/// A number no other journal of this process has (several stores may be open in one
/// process: tests do).
fn unique() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (u64::from(nanos) << 16) | (NEXT.fetch_add(1, Ordering::Relaxed) & 0xffff)
}

/// The store's key for how far a journal file has been taken.
fn offset_key(path: &Path) -> String {
    format!(
        "journal:{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    )
}

fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).append(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Moves into the store what journals of servers that stopped still hold, and removes them.
/// A journal locked by a live server is its own business.
fn replay_orphans(store: &Store, redactor: &Redactor, dir: &Path) -> Result<(), StoreError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(JOURNAL_PREFIX) && name.ends_with(JOURNAL_SUFFIX)) {
            continue;
        }
        let path = e.path();
        let err = io_error(&path);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(&err)?;
        if file.try_lock().is_err() {
            continue;
        }
        let key = offset_key(&path);
        let len = file.metadata().map_err(&err)?.len();
        let mut offset = store.read(|c| crate::store::journal_offset(c, &key))?;
        if offset > len {
            // Emptied after everything was taken, before the store heard of it.
            offset = 0;
        }
        let mut reader = std::fs::File::open(&path).map_err(&err)?;
        // A torn last line is left behind: its call was never answered.
        take(store, redactor, &mut reader, &path, offset, usize::MAX)?;
        // Removed first: a crash before the key goes leaves a key nobody reads.
        std::fs::remove_file(&path).map_err(&err)?;
        store.write(|tx| crate::store::forget_journal(tx, &key))?;
    }
    Ok(())
}

/// Moves complete lines from `offset` into the store (at most about `max` bytes), in one
/// transaction with the new offset. Returns how many calls and the offset reached.
fn take(
    store: &Store,
    redactor: &Redactor,
    reader: &mut std::fs::File,
    path: &Path,
    offset: u64,
    max: usize,
) -> Result<(u64, u64), StoreError> {
    let key = offset_key(path);
    let err = io_error(path);
    reader
        .seek(std::io::SeekFrom::Start(offset))
        .map_err(&err)?;
    let mut buf = Vec::new();
    reader
        .take(max.min(usize::MAX / 2) as u64)
        .read_to_end(&mut buf)
        .map_err(&err)?;
    let Some(last) = buf.iter().rposition(|b| *b == b'\n') else {
        return Ok((0, offset));
    };
    let end = offset + last as u64 + 1;
    let mut calls = 0;
    store.write(|tx| {
        let mut batch = Batch::default();
        for raw in buf[..=last]
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
        {
            // A line that does not parse cannot have come from `append`; it is skipped.
            if let Ok(line) = serde_json::from_slice::<Line>(raw) {
                record_in(tx, &line.call(), redactor, &mut batch)?;
                calls += 1;
            }
        }
        crate::store::set_journal_offset(tx, &key, end)?;
        Ok(())
    })?;
    Ok((calls, end))
}

struct Writer {
    store: Arc<Store>,
    redactor: Redactor,
    /// See [`Journal::closed`].
    closed: Arc<std::sync::atomic::AtomicBool>,
    reader: std::fs::File,
    /// The journal file (its name is the store's key for its offset).
    path: PathBuf,
    file: Arc<Mutex<std::fs::File>>,
    offset: u64,
    /// When the oldest line still in the file was stored: past [`EMPTY_AFTER`], the file is
    /// emptied at the next moment everything is taken, however busy the server is.
    stored_since: Option<Instant>,
    progress: Arc<(Mutex<Progress>, Condvar)>,
}

impl Writer {
    fn run(mut self, woken: &std::sync::mpsc::Receiver<()>) {
        use std::sync::mpsc::RecvTimeoutError;
        loop {
            // Something stored and not yet emptied: it goes a second after it was stored.
            let woken_by_call = if self.offset > 0 {
                let left = self.stored_since.map_or(EMPTY_AFTER, |since| {
                    EMPTY_AFTER.saturating_sub(since.elapsed())
                });
                match woken.recv_timeout(left) {
                    Ok(()) => true,
                    Err(RecvTimeoutError::Timeout) => false,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            } else {
                // Ends when every Journal handle (the sender) is gone.
                woken.recv().is_ok()
            };
            if !woken_by_call {
                if self.offset == 0 {
                    break;
                }
                self.empty_when_taken();
                continue;
            }
            // Calls come in bursts: a short wait lets one transaction take many of them,
            // which costs far less than one each; a lookup waiting on a flush cuts it short.
            std::thread::park_timeout(GATHER);
            while woken.try_recv().is_ok() {}
            loop {
                match take(
                    &self.store,
                    &self.redactor,
                    &mut self.reader,
                    &self.path,
                    self.offset,
                    BATCH,
                ) {
                    Ok((0, _)) => break,
                    Ok((n, end)) => {
                        self.offset = end;
                        self.stored_since.get_or_insert_with(Instant::now);
                        let (m, cv) = &*self.progress;
                        lock(m).committed += n;
                        cv.notify_all();
                    }
                    Err(e) => {
                        tracing::warn!("recorded calls cannot be stored: {e}");
                        let (m, cv) = &*self.progress;
                        lock(m).failed = Some(e.to_string());
                        cv.notify_all();
                        return;
                    }
                }
            }
            if self.offset >= EMPTY_PAST
                || self
                    .stored_since
                    .is_some_and(|since| since.elapsed() >= EMPTY_AFTER)
            {
                self.empty_when_taken();
            }
        }
        // The last handle is gone (the server is stopping): nothing unredacted stays.
        self.empty_when_taken();
    }

    /// Empties the journal once everything in it is in the store (so unredacted text does
    /// not stay on disk): under the appenders' lock, the store told first that the file starts
    /// over, then the file truncated. A crash in between replays the whole file again (calls
    /// stored twice, none lost); a store that cannot be told leaves the file as it is.
    fn empty_when_taken(&mut self) {
        let file = lock(&self.file);
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let Ok(len) = file.metadata().map(|m| m.len()) else {
            return;
        };
        if len == 0 || len != self.offset {
            return;
        }
        let key = offset_key(&self.path);
        // Still under the lock: no line lands before the file starts over.
        if let Err(e) = self
            .store
            .write(|tx| crate::store::set_journal_offset(tx, &key, 0))
        {
            tracing::warn!("the journal's new start was not stored: {e}");
            // Tried again in a second, not at once.
            self.stored_since = Some(Instant::now());
            return;
        }
        if let Err(e) = file.set_len(0) {
            tracing::warn!("the journal could not be emptied: {e}");
            // The store must not read the file from its start again.
            let _ = self
                .store
                .write(|tx| crate::store::set_journal_offset(tx, &key, len));
            self.stored_since = Some(Instant::now());
            return;
        }
        self.offset = 0;
        self.stored_since = None;
        drop(file);
    }
}
