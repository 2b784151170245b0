//! gantry's own files by identity, not by name: the device and inode (on Windows the volume
//! serial number and file index) of the config file,
//! each policy file, and every file and directory two levels into the state and policy
//! directories (tokens, audit logs, the sessions database, the control page's address, the
//! login snapshot under `shell/`...). A hard link to one of them inside a root, or a bind
//! mount of their directory, is another name for the same file: the name check cannot see it,
//! its identity does. It is asked when a path is resolved and again on the open file
//! ([`is_own_open`]), so a name swapped to a hard link in between is refused too.
//!
//! The set is kept and made again only when one of gantry's own paths, or a directory right
//! below one, changed (a directory's entries change its modification time), and only a path
//! that could be another name for one of gantry's files (a directory, or a file with more than
//! one link) is looked up at all.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Device and inode; on Windows, volume serial number and file index.
pub(crate) type Identity = (u64, u64);

/// What is known of a file to decide whether it is one of gantry's: its identity, whether it
/// is a directory, and how many names (links) it has.
pub(crate) type Seen = (Identity, bool, u64);

/// Most entries looked at when gantry's files are collected.
const ENTRIES_MAX: usize = 4096;

/// The versions of gantry's own paths (and the directories right below them) the set was
/// made from.
type Sources = Vec<Option<(std::time::SystemTime, Identity)>>;

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct OwnIdentities {
    /// gantry's own paths (files and directories).
    paths: Vec<PathBuf>,
    /// Below them, what the tools may use (never counted as gantry's).
    except: Vec<PathBuf>,
    made: Mutex<Option<(Sources, HashSet<Identity>)>>,
}

/// The set of the roots in effect, for what opens a file without the roots at hand
/// (`beneath`, `walk`).
static IN_EFFECT: std::sync::RwLock<Option<std::sync::Arc<OwnIdentities>>> =
    std::sync::RwLock::new(None);

/// Makes `ids` the set open files are checked against, collected now: a file already there
/// is known by identity from the start, whatever happens to its other names later.
pub(crate) fn put_in_effect(ids: std::sync::Arc<OwnIdentities>) {
    ids.prime();
    match IN_EFFECT.write() {
        Ok(mut g) => *g = Some(ids),
        Err(p) => *p.into_inner() = Some(ids),
    }
}

/// Whether an open file (its identity, type and link count) is one of gantry's own.
pub(crate) fn is_own_open(id: Identity, is_dir: bool, links: u64) -> bool {
    let ids = match IN_EFFECT.read() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    };
    ids.is_some_and(|ids| ids.holds_identity(id, is_dir, links))
}

/// What is known of the file or directory at `p` (links followed).
#[cfg(unix)]
fn seen(p: &Path) -> Option<Seen> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(p).ok()?;
    Some(((m.dev(), m.ino()), m.is_dir(), m.nlink()))
}

/// What is known of the file or directory at `p` (links followed), from a handle opened
/// without any access to its content (a directory opens with backup semantics).
#[cfg(windows)]
fn seen(p: &Path) -> Option<Seen> {
    use std::os::windows::fs::OpenOptionsExt as _;
    const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
    let f = std::fs::OpenOptions::new()
        .access_mode(0)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(p)
        .ok()?;
    seen_open(&f)
}

/// What is known of an open file, from its handle.
#[cfg(windows)]
#[allow(unsafe_code)]
pub(crate) fn seen_open(f: &std::fs::File) -> Option<Seen> {
    use std::os::windows::io::AsRawHandle as _;
    use windows_sys::Win32::Storage::FileSystem::{
        BY_HANDLE_FILE_INFORMATION, FILE_ATTRIBUTE_DIRECTORY, GetFileInformationByHandle,
    };
    // SAFETY: the handle is the open file's own and outlives the call; the call only writes
    // the zeroed structure it is given.
    let info = unsafe {
        let mut info: BY_HANDLE_FILE_INFORMATION = std::mem::zeroed();
        (GetFileInformationByHandle(f.as_raw_handle().cast(), &mut info) != 0).then_some(info)
    }?;
    let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
    Some((
        (u64::from(info.dwVolumeSerialNumber), index),
        info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY != 0,
        u64::from(info.nNumberOfLinks),
    ))
}

#[cfg(not(any(unix, windows)))]
fn seen(_p: &Path) -> Option<Seen> {
    None
}

fn source(p: &Path) -> Option<(std::time::SystemTime, Identity)> {
    let modified = std::fs::metadata(p).ok()?.modified().ok()?;
    Some((modified, seen(p)?.0))
}

impl OwnIdentities {
    /// The identities of `paths` and what lies below them, leaving out `except`.
    pub(crate) fn new(paths: Vec<PathBuf>, except: Vec<PathBuf>) -> OwnIdentities {
        OwnIdentities {
            paths,
            except,
            made: Mutex::new(None),
        }
    }

    /// Whether the file or directory at `p` (links followed) is one of gantry's own.
    pub(crate) fn holds(&self, p: &Path) -> bool {
        seen(p).is_some_and(|(id, is_dir, links)| self.holds_identity(id, is_dir, links))
    }

    /// Collects the set now if it was never made.
    fn prime(&self) {
        let mut made = match self.made.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if made.is_none() && !self.paths.is_empty() {
            *made = Some((self.sources(), self.collect()));
        }
    }

    /// Whether the file or directory `id` (with `links` names) is one of gantry's own.
    pub(crate) fn holds_identity(&self, id: Identity, is_dir: bool, links: u64) -> bool {
        // Known already: whatever its link count says now (a second name removed between an
        // open and its look leaves one link, on gantry's own file).
        let known = match self.made.lock() {
            Ok(g) => g.as_ref().is_some_and(|(_, set)| set.contains(&id)),
            Err(p) => p
                .into_inner()
                .as_ref()
                .is_some_and(|(_, set)| set.contains(&id)),
        };
        if known {
            return true;
        }
        // A file with one link has one name, which the name check saw; another name for one
        // of gantry's files is a hard link (two links) or a bind mount of its directory. So
        // the common case costs no look at gantry's own files.
        if self.paths.is_empty() || (!is_dir && links < 2) {
            return false;
        }
        let sources = self.sources();
        let mut made = match self.made.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if made.as_ref().is_none_or(|(s, _)| *s != sources) {
            *made = Some((sources, self.collect()));
        }
        made.as_ref().is_some_and(|(_, set)| set.contains(&id))
    }

    fn usable(&self, p: &Path) -> bool {
        self.except.iter().any(|e| p.starts_with(e))
    }

    /// The versions of gantry's own paths and of the directories right below them: what
    /// changes when an entry is added, removed or replaced there.
    fn sources(&self) -> Sources {
        let mut out = Vec::new();
        for p in &self.paths {
            out.push(source(p));
            let Ok(entries) = std::fs::read_dir(p) else {
                continue;
            };
            let mut dirs: Vec<PathBuf> = entries
                .flatten()
                .take(ENTRIES_MAX)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .filter(|d| !self.usable(d))
                .collect();
            dirs.sort();
            out.extend(dirs.iter().map(|d| source(d)));
        }
        out
    }

    /// Every file and directory of gantry's, two levels down, leaving out what the tools may
    /// use.
    fn collect(&self) -> HashSet<Identity> {
        let mut set = HashSet::new();
        let mut pending: Vec<(PathBuf, usize)> =
            self.paths.iter().map(|p| (p.clone(), 0)).collect();
        let mut looked_at = 0;
        while let Some((p, depth)) = pending.pop() {
            let Some((id, is_dir, _)) = seen(&p) else {
                continue;
            };
            set.insert(id);
            if !is_dir || depth >= 2 {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&p) else {
                continue;
            };
            for e in entries.flatten() {
                looked_at += 1;
                // A state directory holds a few dozen entries; the cap bounds a strange one.
                if looked_at > ENTRIES_MAX {
                    return set;
                }
                let path = e.path();
                if !self.usable(&path) {
                    pending.push((path, depth + 1));
                }
            }
        }
        set
    }
}

impl Clone for OwnIdentities {
    fn clone(&self) -> Self {
        OwnIdentities::new(self.paths.clone(), self.except.clone())
    }
}

impl PartialEq for OwnIdentities {
    fn eq(&self, other: &Self) -> bool {
        self.paths == other.paths && self.except == other.except
    }
}

impl Eq for OwnIdentities {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hard_link_to_an_own_file_is_recognised_and_follows_replacements() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir_all(state.join("spill")).unwrap();
        std::fs::write(state.join("tokens.toml"), "t").unwrap();
        std::fs::write(dir.path().join("mine.txt"), "m").unwrap();
        let own = OwnIdentities::new(vec![state.clone()], vec![state.join("spill")]);
        let link = dir.path().join("link");
        std::fs::hard_link(state.join("tokens.toml"), &link).unwrap();
        assert!(own.holds(&link));
        assert!(own.holds(&state));
        assert!(!own.holds(&dir.path().join("mine.txt")));
        assert!(!own.holds(&state.join("spill")));
        // Replaced atomically (a token rotation): the new file is known at once.
        std::fs::write(state.join("new"), "t2").unwrap();
        std::fs::rename(state.join("new"), state.join("tokens.toml")).unwrap();
        let link2 = dir.path().join("link2");
        std::fs::hard_link(state.join("tokens.toml"), &link2).unwrap();
        assert!(own.holds(&link2));
        // A file one directory down (the login snapshot under `shell/`), made after the set.
        std::fs::create_dir_all(state.join("shell")).unwrap();
        std::fs::write(state.join("shell/snapshot.sh"), "export X=1").unwrap();
        let link3 = dir.path().join("link3");
        std::fs::hard_link(state.join("shell/snapshot.sh"), &link3).unwrap();
        assert!(own.holds(&link3));
        std::fs::write(state.join("shell/next.sh"), "export Y=1").unwrap();
        let link4 = dir.path().join("link4");
        std::fs::hard_link(state.join("shell/next.sh"), &link4).unwrap();
        assert!(own.holds(&link4), "a file added below is seen");
    }
}
