//! A directory inside the root is swapped, over and over, with a symlink to a directory
//! outside it (`renameat2(RENAME_EXCHANGE)`, atomic), while walks and listings run. Nothing
//! outside may ever be listed, named or read. The swapping is paced by a fixed-seed generator
//! and every loop is bounded in time, so a run is repeatable in shape and never hangs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use confine::walk::{self, Flow, Found, Walk};

struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    /// Exchanges `a` and `b` until dropped, pausing a pseudo-random 0–63 µs between swaps.
    fn start(a: PathBuf, b: PathBuf, seed: u64) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicUsize::new(0));
        let (s, n) = (stop.clone(), swaps.clone());
        let thread = std::thread::spawn(move || {
            let mut x = seed;
            while !s.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &a,
                    rustix::fs::CWD,
                    &b,
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
                n.fetch_add(1, Ordering::Relaxed);
                // xorshift64: the same pacing every run.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                std::thread::sleep(Duration::from_micros(x % 64));
            }
        });
        Swapper {
            stop,
            swaps,
            thread: Some(thread),
        }
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// root/d is a directory holding `inside.txt`; root/l a symlink to outside/, which holds
/// `outside.txt` ("OUTSIDE"). The swapper exchanges d and l.
fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let root = base.join("root");
    std::fs::create_dir_all(root.join("d/sub")).unwrap();
    std::fs::write(root.join("d/inside.txt"), "inside\n").unwrap();
    std::fs::write(root.join("d/sub/deep.txt"), "inside\n").unwrap();
    std::fs::create_dir_all(base.join("outside/sub")).unwrap();
    std::fs::write(base.join("outside/outside.txt"), "OUTSIDE\n").unwrap();
    std::fs::write(base.join("outside/sub/deep-outside.txt"), "OUTSIDE\n").unwrap();
    std::os::unix::fs::symlink(base.join("outside"), root.join("l")).unwrap();
    (dir, root)
}

fn read_all(found: &Found<'_>) -> Option<String> {
    use std::io::Read as _;
    let mut s = String::new();
    found.open().ok()?.read_to_string(&mut s).ok()?;
    Some(s)
}

const BOUND: Duration = Duration::from_secs(3);

#[test]
fn walks_never_leave_the_root_while_a_directory_is_swapped_for_a_symlink() {
    let (_keep, root) = setup();
    let swapper = Swapper::start(root.join("d"), root.join("l"), 0x5eed_1234);
    let opts = Walk {
        threads: 2,
        ..Walk::default()
    };
    let started = Instant::now();
    let (mut walks, mut read) = (0usize, 0usize);
    while started.elapsed() < BOUND {
        let seen = std::sync::Mutex::new(Vec::new());
        walk::walk(&root, &root, &opts, &|f: &Found<'_>| {
            let text = read_all(f);
            seen.lock().unwrap().push((f.path.to_path_buf(), text));
            Flow::Continue
        })
        .unwrap();
        walks += 1;
        for (path, text) in seen.into_inner().unwrap() {
            assert!(path.starts_with(&root), "{path:?}");
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                !name.contains("outside"),
                "an outside name was reached: {path:?}"
            );
            if let Some(t) = text {
                read += 1;
                assert_eq!(t, "inside\n", "{path:?} read outside content");
            }
        }
    }
    let swaps = swapper.swaps.load(Ordering::Relaxed);
    drop(swapper);
    // The race was real: many swaps happened while many walks ran and read files.
    assert!(
        swaps > 100 && walks > 20 && read > 20,
        "swaps {swaps}, walks {walks}, read {read}"
    );
}

#[test]
fn listings_never_show_outside_names_while_a_directory_is_swapped() {
    let (_keep, root) = setup();
    let swapper = Swapper::start(root.join("d"), root.join("l"), 0x0dd_ba11);
    let started = Instant::now();
    let (mut listed, mut refused) = (0usize, 0usize);
    let d = root.join("d");
    while started.elapsed() < BOUND {
        match walk::list(&root, &d, 100) {
            Ok((entries, _)) => {
                listed += 1;
                for e in entries {
                    let name = e.name.to_string_lossy().into_owned();
                    assert!(!name.contains("outside"), "listed an outside name: {name}");
                }
            }
            Err(_) => refused += 1,
        }
    }
    drop(swapper);
    assert!(
        listed > 20 && refused > 20,
        "listed {listed}, refused {refused}"
    );
}

/// A file base, and a directory base below the swapped one: the walk refuses or stays in.
#[test]
fn a_base_below_the_swapped_directory_is_refused_not_followed() {
    let (_keep, root) = setup();
    let swapper = Swapper::start(root.join("d"), root.join("l"), 42);
    let started = Instant::now();
    let sub = root.join("d/sub");
    let file = root.join("d/inside.txt");
    while started.elapsed() < BOUND {
        for base in [&sub, &file] {
            let _ = walk::walk(&root, base, &Walk::default(), &|f: &Found<'_>| {
                assert!(!Path::new(f.path).to_string_lossy().contains("outside"));
                if let Some(t) = read_all(f) {
                    assert_eq!(t, "inside\n");
                }
                Flow::Continue
            });
        }
    }
    drop(swapper);
}
