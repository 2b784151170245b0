//! The path resolver, Unix and Windows forms: any string resolves or fails cleanly; a path
//! said to be inside the root is below it and has no `..`; the Windows rules never panic and
//! a path that passes them contains itself.
#![no_main]

use std::path::{Component, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

struct Fixture {
    _dir: tempfile::TempDir,
    roots: confine::path_policy::Roots,
    root: PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = dir.path().canonicalize().expect("canonical");
        let root = base.join("root");
        std::fs::create_dir_all(root.join("a/b")).expect("dirs");
        std::fs::write(root.join("a/f.txt"), "f").expect("file");
        std::fs::write(base.join("secret"), "s").expect("file");
        #[cfg(unix)]
        {
            let _ = std::os::unix::fs::symlink(base.join("secret"), root.join("out"));
            let _ = std::os::unix::fs::symlink(&base, root.join("up"));
            let _ = std::os::unix::fs::symlink(root.join("a"), root.join("in"));
        }
        let roots = confine::path_policy::Roots::new(std::slice::from_ref(&root)).expect("roots");
        Fixture {
            _dir: dir,
            roots,
            root,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let given = String::from_utf8_lossy(data);
    let f = fixture();
    if let Ok(r) = f.roots.resolve(&given, None) {
        if r.inside_root {
            assert!(r.path.starts_with(&f.root), "{given:?} -> {:?}", r.path);
            assert!(
                !r.path.components().any(|c| matches!(c, Component::ParentDir)),
                "{given:?} -> {:?}",
                r.path
            );
            assert!(!r.path.starts_with(f.root.join("up")), "{given:?}");
        }
    }
    let (a, b) = given.split_once('|').unwrap_or((&given, ""));
    if confine::winpath::check(a).is_ok() && !a.is_empty() {
        let _ = confine::winpath::contains(a, a);
    }
    let _ = confine::winpath::contains(a, b);
});
