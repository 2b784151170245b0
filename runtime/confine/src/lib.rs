//! Confinement to the approved roots. [`path_policy`] is the one place a path is resolved
//! (absolute, symlinks followed, `..` applied as the OS does, Windows spellings refused) and
//! described for Cedar; [`fs`] reads, writes and removes only through directory-relative
//! opens below a root that never follow a symlink out; [`winpath`] holds the Windows path
//! rules as pure functions, so they are tested on every platform and under Wine; [`walk`] walks
//! and lists directories by handle from the root, so a directory swapped for a symlink mid-walk
//! is skipped rather than followed.

mod beneath;
pub mod fs;
mod own_identity;
pub mod path_policy;
pub mod walk;
pub mod winpath;

/// Opens the directory `dir` (canonical, absolute) from `/` one component at a time without
/// following a link: what a confinement ruleset is built on, so a root swapped for a link
/// after the roots were read is refused, never granted.
#[cfg(unix)]
pub fn open_dir_nofollow(dir: &std::path::Path) -> std::io::Result<std::os::fd::OwnedFd> {
    beneath::open_root(dir)
}
