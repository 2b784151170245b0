//! A walk holds descriptors for the directories it is inside, not for every directory it has
//! seen: a directory of thousands of subdirectories must not run the process out of them.

use std::sync::atomic::{AtomicUsize, Ordering};

use confine::walk::{self, Flow, Found, Walk};

/// Descriptors this process holds open on `root` or below it: the walk's own, whatever the
/// other tests of this binary hold meanwhile.
fn open_descriptors(root: &std::path::Path) -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |fds| {
        fds.flatten()
            .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.starts_with(root)))
            .count()
    })
}

#[test]
fn a_wide_tree_is_walked_with_few_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for i in 0..3000 {
        let sub = root.join(format!("d{i:04}"));
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("f.txt"), "x").unwrap();
    }
    let before = open_descriptors(&root);
    let most = AtomicUsize::new(0);
    let files = AtomicUsize::new(0);
    let opts = Walk {
        threads: 2,
        ..Walk::default()
    };
    walk::walk(&root, &root, &opts, &|f: &Found<'_>| {
        let _file = f.open().unwrap();
        files.fetch_add(1, Ordering::Relaxed);
        most.fetch_max(open_descriptors(&root), Ordering::Relaxed);
        Flow::Continue
    })
    .unwrap();
    assert_eq!(files.load(Ordering::Relaxed), 3000);
    let extra = most.load(Ordering::Relaxed).saturating_sub(before);
    // Opening every subdirectory when it was seen held over 3000 at once.
    assert!(extra < 64, "{extra} descriptors held at once");
}
