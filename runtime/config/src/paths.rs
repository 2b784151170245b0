//! Paths given relative to a directory, made absolute as the user meant them.

use std::path::{Path, PathBuf};

/// `path` made absolute against `base` (the current directory, or the config file's), its
/// `.` and `..` taken out as written (an absolute `path` too), so `--root ../proj` is shown as the directory it names.
/// `base` is physical as the working directory is (getcwd resolves links), so a leading `..`
/// names the same directory the kernel would; a `..` after a link inside `path` is taken as
/// written (as a shell's `cd` does), and the root guard checks the result either way.
pub fn absolute(base: &Path, path: &Path) -> PathBuf {
    let mut out = if path.is_absolute() {
        PathBuf::new()
    } else {
        base.to_path_buf()
    };
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_made_absolute_without_dot_segments() {
        let base = Path::new("/home/u/work/gantry");
        assert_eq!(
            absolute(base, Path::new("../proj")),
            Path::new("/home/u/work/proj")
        );
        assert_eq!(
            absolute(base, Path::new("./a/./b/..")),
            Path::new("/home/u/work/gantry/a")
        );
        assert_eq!(absolute(base, Path::new("/abs/x")), Path::new("/abs/x"));
        assert_eq!(
            absolute(base, Path::new("/abs/x/../y")),
            Path::new("/abs/y")
        );
    }
}
