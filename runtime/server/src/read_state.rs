//! The version of each file as gantry last showed or wrote it, for the stale-write check of
//! `file` edits: an edit by line numbers is refused when the file changed since the model
//! last saw it (the numbers would point at other lines). One table per server process,
//! shared by its connectors, so a `read` on Core vouches for a `file` edit on Files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::ops::fs::Version;

/// Files remembered; past this the oldest half is forgotten (an edit of a forgotten file
/// asks for a new read, never writes blind).
const REMEMBERED: usize = 4096;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct ReadState(Mutex<Table>);

#[derive(Debug, Default)]
struct Table {
    tick: u64,
    seen: HashMap<PathBuf, (Version, u64)>,
}

impl ReadState {
    /// Records that `path` (canonical) was shown or written at `version`.
    pub fn saw(&self, path: &Path, version: Version) {
        let mut t = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.tick += 1;
        let tick = t.tick;
        t.seen.insert(path.to_path_buf(), (version, tick));
        if t.seen.len() > REMEMBERED {
            let keep_after = tick.saturating_sub((REMEMBERED / 2) as u64);
            t.seen.retain(|_, (_, at)| *at > keep_after);
        }
    }

    /// The version `path` had when last shown or written, if it is remembered.
    pub fn last(&self, path: &Path) -> Option<Version> {
        let t = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.seen.get(path).map(|(v, _)| *v)
    }

    /// Forgets `path` (it was deleted).
    pub fn forget(&self, path: &Path) {
        let mut t = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.seen.remove(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(len: u64) -> Version {
        Version {
            len,
            modified: None,
            changed: None,
        }
    }

    #[test]
    fn the_newest_files_are_kept_past_the_limit() {
        let s = ReadState::default();
        for i in 0..=REMEMBERED as u64 {
            s.saw(Path::new(&format!("/f{i}")), v(i));
        }
        assert_eq!(
            s.last(Path::new(&format!("/f{REMEMBERED}"))),
            Some(v(REMEMBERED as u64))
        );
        assert_eq!(s.last(Path::new("/f0")), None);
        s.forget(Path::new(&format!("/f{REMEMBERED}")));
        assert_eq!(s.last(Path::new(&format!("/f{REMEMBERED}"))), None);
    }
}
