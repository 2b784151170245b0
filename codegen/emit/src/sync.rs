//! Keeping `generated/` equal to what the generator says it should hold.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::Files;

/// Files under `generated/` that people write; the generator never touches or removes them.
pub const HAND_WRITTEN: &[&str] = &["Cargo.toml", "build.rs", "README.md", "src/lib.rs"];

/// Most diff lines a staleness report shows.
const DIFF_LINES: usize = 100;

/// How the committed `generated/` compares with a fresh generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Staleness {
    /// Byte for byte the same (line endings aside).
    Fresh,
    /// Different; `report` lists missing, extra and changed files with a bounded diff.
    Stale {
        /// What differs, for a human.
        report: String,
    },
}

fn normalize(text: &str) -> String {
    text.replace("\r\n", "\n")
}

fn walk(root: &Path, dir: &Path, out: &mut Files) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            walk(root, &path, out)?;
        } else if file_type.is_file() {
            let rel = path
                .strip_prefix(root)
                .map_err(io::Error::other)?
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            if !HAND_WRITTEN.contains(&rel.as_str()) {
                out.insert(rel, normalize(&fs::read_to_string(&path)?));
            }
        }
    }
    Ok(())
}

/// Reads the generated files currently under `dir` (hand-written ones excluded).
pub fn on_disk(dir: &Path) -> io::Result<Files> {
    let mut out = Files::new();
    for sub in ["src", "schemas", "docs", "policies"] {
        let d = dir.join(sub);
        if d.is_dir() {
            walk(dir, &d, &mut out)?;
        }
    }
    Ok(out)
}

/// Compares `dir` with `expected` without writing anything.
pub fn check(dir: &Path, expected: &Files) -> io::Result<Staleness> {
    let actual = on_disk(dir)?;
    let mut report = String::new();
    let mut lines = 0usize;
    for (path, want) in expected {
        match actual.get(path) {
            None => {
                let _ = writeln!(report, "missing: generated/{path}");
            }
            Some(have) if have != want => {
                let _ = writeln!(report, "changed: generated/{path}");
                let diff = similar::TextDiff::from_lines(have.as_str(), want.as_str());
                let udiff = diff
                    .unified_diff()
                    .context_radius(2)
                    .header(&format!("committed/{path}"), &format!("fresh/{path}"))
                    .to_string();
                for line in udiff.lines() {
                    if lines == DIFF_LINES {
                        let _ = writeln!(report, "... diff cut at {DIFF_LINES} lines");
                    }
                    if lines >= DIFF_LINES {
                        break;
                    }
                    let _ = writeln!(report, "{line}");
                    lines += 1;
                }
            }
            Some(_) => {}
        }
    }
    for path in actual.keys().filter(|p| !expected.contains_key(*p)) {
        let _ = writeln!(report, "extra: generated/{path} (no longer generated)");
    }
    Ok(if report.is_empty() {
        Staleness::Fresh
    } else {
        Staleness::Stale { report }
    })
}

/// Writes `expected` into `dir`, touching only files whose contents change (so cargo does not
/// rebuild for nothing), and removes generated files that are no longer produced. Returns the
/// paths it changed.
pub fn sync(dir: &Path, expected: &Files) -> io::Result<Vec<String>> {
    let actual = on_disk(dir)?;
    let mut changed = Vec::new();
    for (path, want) in expected {
        if actual.get(path) != Some(want) {
            let target: PathBuf = dir.join(path);
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent)?;
            }
            // Write beside and rename, so an interrupted run never leaves a torn file.
            let tmp = target.with_extension("codegen-tmp");
            fs::write(&tmp, want)?;
            fs::rename(&tmp, &target)?;
            changed.push(path.clone());
        }
    }
    for path in actual.keys().filter(|p| !expected.contains_key(*p)) {
        fs::remove_file(dir.join(path))?;
        changed.push(path.clone());
    }
    Ok(changed)
}

/// The body of a generated crate's `build.rs`: regenerate `crate_dir` from `surface` when it
/// changed. Outside CI a stale copy is rewritten (and cargo prints a warning to commit it);
/// under CI (`CI` set) nothing is written and the freshness test reports the difference.
/// Problems are printed as cargo directives.
pub fn build_script(crate_dir: &Path, surface: &Path) {
    println!("cargo::rerun-if-changed={}", surface.display());
    println!("cargo::rerun-if-env-changed=CI");
    let name = surface.file_name().map_or_else(
        || "surface.toml".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    let text = match fs::read_to_string(surface) {
        Ok(t) => t,
        Err(e) => {
            println!("cargo::error=cannot read {}: {e}", surface.display());
            return;
        }
    };
    let files = match crate::generate(&name, &text) {
        Ok(f) => f,
        Err(e) => {
            for line in e.to_string().lines() {
                println!("cargo::error={line}");
            }
            return;
        }
    };
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false");
    if in_ci {
        if let Ok(Staleness::Stale { .. }) = check(crate_dir, &files) {
            println!(
                "cargo::warning={} is stale; the generated_is_fresh test will fail (run `cargo codegen`)",
                crate_dir.display()
            );
        }
        return;
    }
    match sync(crate_dir, &files) {
        Ok(changed) if !changed.is_empty() => println!(
            "cargo::warning={} changed: regenerated {} file(s) under {}; review and commit them",
            surface.display(),
            changed.len(),
            crate_dir.display()
        ),
        Ok(_) => {}
        Err(e) => println!("cargo::error=cannot write {}: {e}", crate_dir.display()),
    }
}
