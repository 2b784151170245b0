//! `generated/` must be exactly what `surface.toml` generates (the rust-analyzer pattern).
//! Under CI the test only compares and fails with a diff; elsewhere it also rewrites the
//! files, so the next run passes and `git diff` shows what changed.

use std::path::PathBuf;

#[test]
fn generated_is_fresh() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("surface.toml"))
        .unwrap_or_else(|e| panic!("surface.toml: {e}"));
    let files = codegen::generate("surface.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    let dir = root.join("generated");
    let staleness = codegen::check(&dir, &files).unwrap_or_else(|e| panic!("{e}"));
    if let codegen::Staleness::Stale { report } = staleness {
        let in_ci =
            std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false");
        if !in_ci {
            codegen::sync(&dir, &files).unwrap_or_else(|e| panic!("{e}"));
            panic!("generated/ was stale and has been rewritten; review and commit it:\n{report}");
        }
        panic!("generated/ is stale; run `cargo codegen` and commit the result:\n{report}");
    }
}

/// The conformance fixture surface is a second generated crate, held to the same rule.
#[test]
fn conformance_is_fresh() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance");
    let text = std::fs::read_to_string(root.join("surface.toml")).unwrap_or_else(|e| panic!("{e}"));
    let files = codegen::generate("surface.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    if let codegen::Staleness::Stale { report } =
        codegen::check(&root, &files).unwrap_or_else(|e| panic!("{e}"))
    {
        panic!(
            "conformance/ is stale; `cargo build -p conformance` rewrites it outside CI:\n{report}"
        );
    }
}

#[test]
fn generation_is_deterministic() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("surface.toml")).unwrap_or_else(|e| panic!("{e}"));
    let a = codegen::generate("surface.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    let b = codegen::generate("surface.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a, b);
}

#[test]
fn a_stale_copy_is_reported_with_a_diff_and_extra_files() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("surface.toml")).unwrap_or_else(|e| panic!("{e}"));
    let files = codegen::generate("surface.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    codegen::sync(tmp.path(), &files).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        codegen::check(tmp.path(), &files).ok(),
        Some(codegen::Staleness::Fresh)
    );

    let edited = text.replacen("many per call", "many at once", 1);
    assert_ne!(edited, text, "the edit must change something");
    let fresh = codegen::generate("surface.toml", &edited).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(tmp.path().join("schemas/old_tool.input.json"), "{}\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let Ok(codegen::Staleness::Stale { report }) = codegen::check(tmp.path(), &fresh) else {
        panic!("not stale")
    };
    assert!(
        report.contains("changed: generated/src/surface.rs"),
        "{report}"
    );
    assert!(
        report.contains("changed: generated/docs/TOOLS.md"),
        "{report}"
    );
    assert!(
        report
            .lines()
            .any(|l| l.starts_with('-') && l.contains("many per call")),
        "{report}"
    );
    assert!(
        report
            .lines()
            .any(|l| l.starts_with('+') && l.contains("many at once")),
        "{report}"
    );
    assert!(
        report.contains("extra: generated/schemas/old_tool.input.json"),
        "{report}"
    );
    codegen::sync(tmp.path(), &fresh).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        codegen::check(tmp.path(), &fresh).ok(),
        Some(codegen::Staleness::Fresh)
    );
}
