//! One insta golden per generated file: what the build writes into `OUT_DIR` from each
//! surface, kept where people review it. `cargo codegen` refreshes them (`INSTA_UPDATE=always`
//! here, which also removes goldens no longer generated); `tests/run` checks them first.

#![cfg(test)]

use std::path::{Path, PathBuf};

/// Each surface and the folder (relative to the workspace) that holds its goldens.
const SURFACES: &[(&str, &str)] = &[
    ("surface.toml", "generated"),
    (
        "tests/conformance/surface.toml",
        "tests/conformance/generated",
    ),
    (
        "tests/surface_fixture/surface.toml",
        "tests/surface_fixture/generated",
    ),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn updating() -> bool {
    std::env::var("INSTA_UPDATE").is_ok_and(|v| v == "always" || v == "1")
}

/// Every `*.snap` below `dir`, as paths relative to it with `/`.
fn goldens_in(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let rel = format!("{prefix}{name}");
        if e.file_type().unwrap().is_dir() {
            goldens_in(&e.path(), &format!("{rel}/"), out);
        } else if name.ends_with(".snap") {
            out.push(rel);
        }
    }
}

#[test]
fn every_generated_file_matches_its_golden() {
    let root = workspace();
    let mut failures = Vec::new();
    for (surface, goldens) in SURFACES {
        let text = std::fs::read_to_string(root.join(surface)).unwrap();
        let files = codegen::generate(surface, &text).unwrap();
        for (rel, contents) in &files {
            let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
            let mut settings = insta::Settings::clone_current();
            settings.set_snapshot_path(root.join(goldens).join(dir));
            settings.set_prepend_module_to_snapshot(false);
            settings.set_omit_expression(true);
            settings.set_input_file(surface);
            let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                settings.bind(|| insta::assert_snapshot!(name.to_string(), contents));
            }));
            if checked.is_err() {
                failures.push(format!("{goldens}/{rel}"));
            }
        }
        let mut on_disk = Vec::new();
        goldens_in(&root.join(goldens), "", &mut on_disk);
        for golden in on_disk {
            let generated = golden.trim_end_matches(".snap");
            if !files.contains_key(generated) {
                if updating() {
                    std::fs::remove_file(root.join(goldens).join(&golden)).unwrap();
                } else {
                    failures.push(format!("{goldens}/{golden} (no longer generated)"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "goldens differ from what the surfaces generate; review, then run `cargo codegen`:\n  {}",
        failures.join("\n  ")
    );
}

#[test]
fn generation_is_deterministic() {
    let text = std::fs::read_to_string(workspace().join("surface.toml")).unwrap();
    let a = codegen::generate("surface.toml", &text).unwrap();
    let b = codegen::generate("surface.toml", &text).unwrap();
    assert_eq!(a, b);
}

#[test]
fn an_invalid_surface_fails_with_every_problem_located() {
    let text = std::fs::read_to_string(workspace().join("surface.toml")).unwrap();
    let broken = text.replacen("requires = [\"read\"]", "requires = [\"raed\"]", 1);
    assert_ne!(broken, text, "the edit must change something");
    let err = codegen::generate("surface.toml", &broken)
        .unwrap_err()
        .to_string();
    assert!(err.contains("surface.toml:"), "{err}");
    assert!(err.contains("raed"), "{err}");
}
