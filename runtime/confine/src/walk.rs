//! Walking a directory tree below an approved root by directory handles, never by path.
//!
//! Unix: the base is reached from the root by `openat(O_DIRECTORY|O_NOFOLLOW)` one component
//! at a time; each directory's entries are read from its descriptor, each subdirectory is
//! opened relative to its parent's descriptor with `O_NOFOLLOW`, and each file the visitor
//! wants is opened relative to its parent's descriptor with `O_NOFOLLOW|O_NONBLOCK` and
//! checked to be a regular file by `fstat`. A directory swapped for a symlink at any moment
//! makes that one open fail (`ELOOP`/`ENOTDIR`) and the entry is skipped: nothing outside the
//! root is listed, named or read, and the path a hit carries is the one the descriptors prove
//! (the canonical base plus the names walked), so authorizing it is authorizing what was read.
//!
//! Windows (no `openat`): each directory is re-resolved and compared with the path the walk
//! expects right before it is read, and each file right before it is opened. That narrows the
//! window; it does not close it (the README says so).
//!
//! What is skipped: symlinks (never followed), hidden names (when asked), gantry's own files,
//! and what `.ignore` files, and `.gitignore` files inside a git repository, exclude, read
//! from the root down to each directory. Global git excludes and `.git/info/exclude` are not
//! read: they live outside the roots.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::beneath::Anchored;

/// How a walk goes.
#[derive(Debug, Clone, Default)]
pub struct Walk {
    /// Skip names starting with `.`.
    pub skip_hidden: bool,
    /// Honour `.ignore` files, and `.gitignore` files inside a git repository.
    pub ignore_files: bool,
    /// Canonical paths never entered or reported (gantry's own files).
    pub skip: Vec<PathBuf>,
    /// Worker threads (at least one).
    pub threads: usize,
    /// Stop at this instant.
    pub deadline: Option<Instant>,
}

/// What a visitor wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// Stop the whole walk.
    Quit,
}

/// How a walk ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Walked {
    /// The deadline stopped it.
    pub timed_out: bool,
    /// Directories that could not be opened or read for a reason other than a race with a
    /// rename (out of descriptors, no permission...): the walk went on without them.
    pub unreadable: usize,
    /// The first such reason.
    pub first_error: Option<String>,
}

/// A regular file the walk found (by its directory entry; open it to be sure).
#[derive(Debug)]
pub struct Found<'a> {
    dir: &'a imp::Handle,
    name: &'a OsStr,
    /// The proven path: the canonical base plus the names walked.
    pub path: &'a Path,
    /// The path relative to the base (empty when the base is this file).
    pub rel: &'a Path,
}

impl Found<'_> {
    /// Opens the file relative to its directory's handle, refusing anything that is no
    /// longer a regular file (a symlink or FIFO swapped in since it was listed).
    pub fn open(&self) -> io::Result<std::fs::File> {
        imp::open_file(self.dir, self.name, self.path)
    }
}

/// The ignore rules in effect in one directory, and its parent's.
#[derive(Debug)]
struct Rules {
    /// `.ignore` then `.gitignore` of this directory (the first has precedence).
    own: Vec<Gitignore>,
    in_git: bool,
    parent: Option<Arc<Rules>>,
}

impl Rules {
    fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        let mut level = Some(self);
        while let Some(rules) = level {
            for gi in &rules.own {
                match gi.matched(path, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
            level = rules.parent.as_deref();
        }
        false
    }
}

/// Largest ignore file read; a larger one is not honoured.
const MAX_IGNORE_FILE: u64 = 1 << 20;

/// The rules of directory `dir` (at `path`) given which of the special names it holds.
fn rules_of(
    dir: &imp::Handle,
    path: &Path,
    has: impl Fn(&str) -> bool,
    parent: Option<Arc<Rules>>,
    opts: &Walk,
) -> Option<Arc<Rules>> {
    if !opts.ignore_files {
        return parent;
    }
    let in_git = has(".git") || parent.as_ref().is_some_and(|p| p.in_git);
    let mut own = Vec::new();
    for name in [".ignore", ".gitignore"] {
        if !has(name) || (name == ".gitignore" && !in_git) {
            continue;
        }
        let Ok(file) = imp::open_file(dir, OsStr::new(name), &path.join(name)) else {
            continue;
        };
        let mut text = String::new();
        if file
            .take(MAX_IGNORE_FILE)
            .read_to_string(&mut text)
            .is_err()
        {
            continue;
        }
        let mut builder = GitignoreBuilder::new(path);
        for line in text.lines() {
            let _ = builder.add_line(None, line);
        }
        if let Ok(gi) = builder.build()
            && !gi.is_empty()
        {
            own.push(gi);
        }
    }
    let changed = !own.is_empty() || in_git != parent.as_ref().is_some_and(|p| p.in_git);
    if changed {
        Some(Arc::new(Rules {
            own,
            in_git,
            parent,
        }))
    } else {
        parent
    }
}

/// Where a directory waiting to be read is: already open (the base), or a name under an open
/// parent. Subdirectories are opened only when read, so a directory of 100 000 subdirectories
/// holds one descriptor while it waits, not 100 000.
enum At {
    Open(imp::Handle),
    Under(Arc<imp::Handle>, OsString),
}

/// One directory waiting to be read.
struct Job {
    at: At,
    path: PathBuf,
    rules: Option<Arc<Rules>>,
}

struct Queue {
    state: Mutex<QueueState>,
    wake: Condvar,
}

struct QueueState {
    jobs: Vec<Job>,
    active: usize,
    quit: bool,
    timed_out: bool,
    unreadable: usize,
    first_error: Option<String>,
}

/// Whether an error only says the entry changed under the walk (removed, or swapped for a
/// symlink or a file): skipped without a word, as the walk would not have seen it a moment later.
pub fn is_race(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory)
        || e.raw_os_error() == Some(40) // ELOOP on Linux
        || e.raw_os_error() == Some(62) // ELOOP on the BSDs and macOS
}

impl Queue {
    /// Counts a directory that could not be read; the reason names it relative to `base`.
    fn failed(&self, e: &io::Error, path: &Path, base: &Path) {
        if is_race(e) {
            return;
        }
        let mut s = self.lock();
        s.unreadable += 1;
        if s.first_error.is_none() {
            let rel = path.strip_prefix(base).unwrap_or(Path::new("?"));
            s.first_error = Some(format!("{}: {e}", rel.display()));
        }
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn push(&self, job: Job) {
        self.lock().jobs.push(job);
        self.wake.notify_one();
    }

    fn stop(&self, timed_out: bool) {
        let mut s = self.lock();
        s.quit = true;
        s.timed_out |= timed_out;
        drop(s);
        self.wake.notify_all();
    }

    /// The next directory, or `None` once the walk is over.
    fn next(&self) -> Option<Job> {
        let mut s = self.lock();
        loop {
            if s.quit {
                return None;
            }
            if let Some(job) = s.jobs.pop() {
                s.active += 1;
                return Some(job);
            }
            if s.active == 0 {
                drop(s);
                self.wake.notify_all();
                return None;
            }
            s = match self.wake.wait(s) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
    }

    fn done(&self) {
        let mut s = self.lock();
        s.active -= 1;
        let idle = s.active == 0 && s.jobs.is_empty();
        drop(s);
        if idle {
            self.wake.notify_all();
        }
    }
}

fn skipped(opts: &Walk, path: &Path) -> bool {
    opts.skip.iter().any(|s| path.starts_with(s))
}

/// Walks canonical `base` (a directory or a regular file) below canonical `root`, calling
/// `visit` for every regular file that is not skipped. Visits run on `opts.threads` threads.
pub fn walk(
    root: &Path,
    base: &Path,
    opts: &Walk,
    visit: &(dyn Fn(&Found<'_>) -> Flow + Sync),
) -> io::Result<Walked> {
    let anchored = Anchored::new(root, base)?;
    // From the root down to the base's parent: each level's ignore rules.
    let mut dir = imp::open_root(root)?;
    let mut path = root.to_path_buf();
    let mut rules = rules_of(&dir, &path, |n| imp::exists(&dir, n), None, opts);
    for name in &anchored.dirs {
        dir = imp::open_dir(&dir, name, &path.join(name))?;
        path.push(name);
        rules = rules_of(&dir, &path, |n| imp::exists(&dir, n), rules, opts);
    }
    if anchored.name.is_empty() {
        // The base is the root itself.
    } else {
        let kind = imp::kind(&dir, &anchored.name)?;
        let full = path.join(&anchored.name);
        match kind {
            imp::Kind::File => {
                if !skipped(opts, &full) {
                    visit(&Found {
                        dir: &dir,
                        name: &anchored.name,
                        path: &full,
                        rel: Path::new(""),
                    });
                }
                return Ok(Walked::default());
            }
            imp::Kind::Dir => {
                dir = imp::open_dir(&dir, &anchored.name, &full)?;
                path = full;
                rules = rules_of(&dir, &path, |n| imp::exists(&dir, n), rules, opts);
            }
            // Links are never followed, and nothing else holds files.
            imp::Kind::Link | imp::Kind::Special | imp::Kind::Missing => {
                return Ok(Walked::default());
            }
        }
    }
    if skipped(opts, &path) {
        return Ok(Walked::default());
    }
    let queue = Queue {
        state: Mutex::new(QueueState {
            jobs: vec![Job {
                at: At::Open(dir),
                path,
                rules,
            }],
            active: 0,
            quit: false,
            timed_out: false,
            unreadable: 0,
            first_error: None,
        }),
        wake: Condvar::new(),
    };
    let threads = opts.threads.max(1);
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(|| work(&queue, base, opts, visit));
        }
        work(&queue, base, opts, visit);
    });
    let state = queue.lock();
    Ok(Walked {
        timed_out: state.timed_out,
        unreadable: state.unreadable,
        first_error: state.first_error.clone(),
    })
}

fn work(queue: &Queue, base: &Path, opts: &Walk, visit: &(dyn Fn(&Found<'_>) -> Flow + Sync)) {
    /// Marks the job done even if the visitor panics, and stops the walk then: otherwise the
    /// other workers would wait for it forever.
    struct Done<'q>(&'q Queue);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                self.0.stop(false);
            }
            self.0.done();
        }
    }
    while let Some(job) = queue.next() {
        let _done = Done(queue);
        if read_one(queue, job, base, opts, visit) == Flow::Quit {
            queue.stop(false);
        }
    }
}

/// Reads one directory: queues its subdirectories, visits its files.
fn read_one(
    queue: &Queue,
    job: Job,
    base: &Path,
    opts: &Walk,
    visit: &(dyn Fn(&Found<'_>) -> Flow + Sync),
) -> Flow {
    // A directory swapped for a symlink since it was listed fails to open here.
    let dir = match job.at {
        At::Open(dir) => dir,
        At::Under(parent, name) => match imp::open_dir(&parent, &name, &job.path) {
            Ok(dir) => dir,
            Err(e) => {
                queue.failed(&e, &job.path, base);
                return Flow::Continue;
            }
        },
    };
    let entries = match entries(&dir, &job.path) {
        Ok(entries) => entries,
        Err(e) => {
            queue.failed(&e, &job.path, base);
            return Flow::Continue;
        }
    };
    let dir = Arc::new(dir);
    let has = |n: &str| entries.iter().any(|(name, _)| name == n);
    let rules = rules_of(&dir, &job.path, has, job.rules.clone(), opts);
    for (name, kind) in &entries {
        if opts.deadline.is_some_and(|d| Instant::now() > d) {
            queue.stop(true);
            return Flow::Quit;
        }
        if opts.skip_hidden && name.as_encoded_bytes().first() == Some(&b'.') {
            continue;
        }
        let kind = match kind {
            Some(k) => *k,
            None => match imp::kind(&dir, name) {
                Ok(k) => k,
                Err(_) => continue,
            },
        };
        let full = job.path.join(name);
        if skipped(opts, &full) {
            continue;
        }
        match kind {
            imp::Kind::Dir => {
                if rules.as_ref().is_some_and(|r| r.ignored(&full, true)) {
                    continue;
                }
                queue.push(Job {
                    at: At::Under(dir.clone(), name.clone()),
                    path: full,
                    rules: rules.clone(),
                });
            }
            imp::Kind::File => {
                if rules.as_ref().is_some_and(|r| r.ignored(&full, false)) {
                    continue;
                }
                let rel = full.strip_prefix(base).unwrap_or(&full);
                let found = Found {
                    dir: &dir,
                    name,
                    path: &full,
                    rel,
                };
                if visit(&found) == Flow::Quit {
                    return Flow::Quit;
                }
            }
            imp::Kind::Link | imp::Kind::Special | imp::Kind::Missing => {}
        }
    }
    Flow::Continue
}

/// One entry of a listed directory, described without following it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its name.
    pub name: OsString,
    /// A file, a directory, a link (never followed) or something special.
    pub kind: crate::path_policy::Kind,
    /// Size in bytes (regular files).
    pub size: Option<u64>,
    /// Last modification.
    pub modified: Option<std::time::SystemTime>,
}

/// Lists canonical directory `path` below canonical `root` from its handle: the first `max`
/// entries by name (and how many there are in all), described by
/// `fstatat(AT_SYMLINK_NOFOLLOW)` relative to it, so a directory swapped for a symlink is
/// refused rather than listed, and a symlink inside is described, not followed. A directory
/// of a million entries costs `max` names in memory and `max` stats, not a million.
pub fn list(root: &Path, path: &Path, max: usize) -> io::Result<(Vec<Listed>, usize)> {
    let anchored = Anchored::new(root, path)?;
    let mut dir = imp::open_root(root)?;
    let mut at = root.to_path_buf();
    for name in anchored
        .dirs
        .iter()
        .chain(Some(&anchored.name).filter(|n| !n.is_empty()))
    {
        at.push(name);
        dir = imp::open_dir(&dir, name, &at)?;
    }
    let mut first = std::collections::BinaryHeap::new();
    let mut total = 0usize;
    imp::each_entry(&dir, &at, &mut |name, _| {
        total += 1;
        first.push(name);
        if first.len() > max {
            first.pop();
        }
    })?;
    let names = first.into_sorted_vec();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let Ok(meta) = imp::describe(&dir, &name, &at) else {
            continue;
        };
        out.push(Listed {
            name,
            kind: meta.0,
            size: meta.1,
            modified: meta.2,
        });
    }
    Ok((out, total))
}

/// The entries of a directory (without `.` and `..`), with their type when the file system
/// says it.
fn entries(dir: &imp::Handle, path: &Path) -> io::Result<Vec<(OsString, Option<imp::Kind>)>> {
    let mut out = Vec::new();
    imp::each_entry(dir, path, &mut |name, kind| out.push((name, kind)))?;
    Ok(out)
}

#[cfg(unix)]
mod imp {
    use std::os::fd::OwnedFd;

    use rustix::fs::{AtFlags, FileType, Mode, OFlags};

    use super::*;

    pub type Handle = OwnedFd;

    pub use crate::path_policy::Kind;

    const DIR_FLAGS: OFlags = OFlags::DIRECTORY
        .union(OFlags::NOFOLLOW)
        .union(OFlags::CLOEXEC)
        .union(OFlags::RDONLY);

    pub fn open_root(root: &Path) -> io::Result<Handle> {
        crate::beneath::open_root(root)
    }

    pub fn open_dir(parent: &Handle, name: &OsStr, _path: &Path) -> io::Result<Handle> {
        Ok(rustix::fs::openat(parent, name, DIR_FLAGS, Mode::empty())?)
    }

    pub fn open_file(parent: &Handle, name: &OsStr, _path: &Path) -> io::Result<std::fs::File> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rustix::fs::openat(parent, name, flags, Mode::empty())?;
        let stat = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(io::Error::other("not a regular file"));
        }
        crate::beneath::refuse_own(&stat)?;
        Ok(std::fs::File::from(fd))
    }

    fn kind_of(t: FileType) -> Option<Kind> {
        match t {
            FileType::RegularFile => Some(Kind::File),
            FileType::Directory => Some(Kind::Dir),
            FileType::Symlink => Some(Kind::Link),
            FileType::Unknown => None,
            _ => Some(Kind::Special),
        }
    }

    pub fn kind(parent: &Handle, name: &OsStr) -> io::Result<Kind> {
        let stat = rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)?;
        Ok(kind_of(FileType::from_raw_mode(stat.st_mode)).unwrap_or(Kind::Special))
    }

    pub fn exists(parent: &Handle, name: &str) -> bool {
        rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// The entries of a directory (without `.` and `..`), with their type when the file
    /// system says it.
    /// Calls `f` with each entry of a directory (without `.` and `..`) as it is read.
    pub fn each_entry(
        dir: &Handle,
        _path: &Path,
        f: &mut dyn FnMut(OsString, Option<Kind>),
    ) -> io::Result<()> {
        use std::os::unix::ffi::OsStrExt as _;
        for entry in rustix::fs::Dir::read_from(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            f(
                OsStr::from_bytes(name).to_os_string(),
                kind_of(entry.file_type()),
            );
        }
        Ok(())
    }

    pub type Described = (Kind, Option<u64>, Option<std::time::SystemTime>);

    pub fn describe(dir: &Handle, name: &OsStr, _path: &Path) -> io::Result<Described> {
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
        let kind = kind_of(FileType::from_raw_mode(st.st_mode)).unwrap_or(Kind::Special);
        let modified = u64::try_from(st.st_mtime).ok().map(|s| {
            std::time::UNIX_EPOCH
                + std::time::Duration::new(s, u32::try_from(st.st_mtime_nsec).unwrap_or(0))
        });
        let size = (kind == Kind::File).then(|| u64::try_from(st.st_size).unwrap_or(0));
        Ok((kind, size, modified))
    }
}

#[cfg(not(unix))]
mod imp {
    use super::*;

    /// The path the walk expects a directory to be at.
    pub type Handle = PathBuf;

    pub use crate::path_policy::Kind;

    fn recheck(expected: &Path) -> io::Result<()> {
        match std::fs::canonicalize(expected) {
            Ok(c)
                if crate::winpath::contains(&c.to_string_lossy(), &expected.to_string_lossy())
                    && crate::winpath::contains(
                        &expected.to_string_lossy(),
                        &c.to_string_lossy(),
                    ) =>
            {
                Ok(())
            }
            Ok(_) => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "a directory on the path was replaced after it was checked",
            )),
            Err(e) => Err(e),
        }
    }

    pub fn open_root(root: &Path) -> io::Result<Handle> {
        recheck(root)?;
        Ok(root.to_path_buf())
    }

    pub fn open_dir(_parent: &Handle, _name: &OsStr, path: &Path) -> io::Result<Handle> {
        let meta = std::fs::symlink_metadata(path)?;
        if !meta.is_dir() {
            return Err(io::Error::other("not a directory"));
        }
        recheck(path)?;
        Ok(path.to_path_buf())
    }

    pub fn open_file(parent: &Handle, _name: &OsStr, path: &Path) -> io::Result<std::fs::File> {
        recheck(parent)?;
        let meta = std::fs::symlink_metadata(path)?;
        if !meta.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        let file = std::fs::File::open(path)?;
        if !file.metadata()?.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        crate::beneath::refuse_elsewhere(&file, path)?;
        crate::beneath::refuse_own(&file)?;
        Ok(file)
    }

    fn kind_of(t: std::fs::FileType) -> Kind {
        if t.is_symlink() {
            Kind::Link
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_file() {
            Kind::File
        } else {
            Kind::Special
        }
    }

    pub fn kind(parent: &Handle, name: &OsStr) -> io::Result<Kind> {
        Ok(kind_of(
            std::fs::symlink_metadata(parent.join(name))?.file_type(),
        ))
    }

    pub fn exists(parent: &Handle, name: &str) -> bool {
        std::fs::symlink_metadata(parent.join(name)).is_ok()
    }

    pub fn each_entry(
        dir: &Handle,
        _path: &Path,
        f: &mut dyn FnMut(OsString, Option<Kind>),
    ) -> io::Result<()> {
        recheck(dir)?;
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let kind = entry.file_type().ok().map(kind_of);
            f(entry.file_name(), kind);
        }
        Ok(())
    }

    pub type Described = (Kind, Option<u64>, Option<std::time::SystemTime>);

    pub fn describe(dir: &Handle, name: &OsStr, _path: &Path) -> io::Result<Described> {
        let meta = std::fs::symlink_metadata(dir.join(name))?;
        let kind = kind_of(meta.file_type());
        Ok((
            kind,
            (kind == Kind::File).then_some(meta.len()),
            meta.modified().ok(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path_policy::Kind;

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for (path, text) in [
            ("a.txt", "a"),
            ("sub/b.txt", "b"),
            ("sub/deeper/c.txt", "c"),
            (".hidden/h.txt", "h"),
            ("skipped/s.txt", "s"),
            ("ignored/i.txt", "i"),
            ("keep.log", "k"),
            ("drop.log", "d"),
        ] {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        std::fs::write(root.join(".ignore"), "ignored/\n*.log\n!keep.log\n").unwrap();
        (dir, root)
    }

    fn found(root: &Path, base: &Path, opts: &Walk) -> Vec<(String, String)> {
        let seen = Mutex::new(Vec::new());
        walk(root, base, opts, &|f: &Found<'_>| {
            let mut text = String::new();
            f.open().unwrap().read_to_string(&mut text).unwrap();
            let rel = f.rel.to_string_lossy().replace('\\', "/");
            seen.lock().unwrap().push((rel, text));
            Flow::Continue
        })
        .unwrap();
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        seen
    }

    #[test]
    fn walks_honour_hidden_ignore_files_and_skips() {
        let (_d, root) = tree();
        let opts = Walk {
            skip_hidden: true,
            ignore_files: true,
            skip: vec![root.join("skipped")],
            threads: 2,
            deadline: None,
        };
        let names: Vec<String> = found(&root, &root, &opts)
            .into_iter()
            .map(|(r, _)| r)
            .collect();
        assert_eq!(
            names,
            ["a.txt", "keep.log", "sub/b.txt", "sub/deeper/c.txt"]
        );
        // A base below the root: paths are relative to it, rules from above still apply.
        let sub = found(&root, &root.join("sub"), &opts);
        assert_eq!(
            sub,
            [
                ("b.txt".into(), "b".into()),
                ("deeper/c.txt".into(), "c".into())
            ]
        );
        // A file base is visited itself, with an empty relative path.
        let one = found(&root, &root.join("drop.log"), &opts);
        assert_eq!(one, [(String::new(), "d".into())]);
    }

    #[test]
    fn listings_describe_entries_without_following_them() {
        let (_d, root) = tree();
        let (listed, total) = list(&root, &root.join("sub"), 10).unwrap();
        assert_eq!(total, 2);
        let (first, total) = list(&root, &root, 2).unwrap();
        let first: Vec<_> = first
            .iter()
            .map(|l| l.name.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            (first, total),
            (vec![".hidden".to_string(), ".ignore".into()], 8)
        );
        let shown: Vec<(String, Kind, Option<u64>)> = listed
            .iter()
            .map(|l| (l.name.to_string_lossy().into_owned(), l.kind, l.size))
            .collect();
        assert_eq!(
            shown,
            [
                ("b.txt".into(), Kind::File, Some(1)),
                ("deeper".into(), Kind::Dir, None)
            ]
        );
        assert!(listed.iter().all(|l| l.modified.is_some()));
    }

    #[test]
    fn a_past_deadline_stops_the_walk_and_says_so() {
        let (_d, root) = tree();
        let opts = Walk {
            deadline: Some(Instant::now()),
            threads: 1,
            ..Walk::default()
        };
        std::thread::sleep(std::time::Duration::from_millis(2));
        let walked = walk(&root, &root, &opts, &|_: &Found<'_>| Flow::Continue).unwrap();
        assert!(walked.timed_out);
    }
}
