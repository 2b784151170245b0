//! The body of a generated crate's `build.rs`.

use std::path::{Path, PathBuf};

/// Environment variable that points a build at another surface file (the drift test uses it);
/// unset, a crate builds from the file its `build.rs` names.
pub const SURFACE_ENV: &str = "GANTRY_SURFACE";

/// Generates the surface at `default_surface` (or at `$GANTRY_SURFACE` when `honour_env`)
/// into `OUT_DIR`: every file, or only those named in `only`. It writes nowhere else and
/// deletes nothing, so the compiled Rust always equals what the surface says and no source
/// file can be stale. Problems are printed as cargo directives, which fail the build with
/// every diagnostic listed.
pub fn build_script(default_surface: &Path, honour_env: bool, only: Option<&[&str]>) {
    if honour_env {
        println!("cargo::rerun-if-env-changed={SURFACE_ENV}");
    }
    let surface = match std::env::var_os(SURFACE_ENV) {
        Some(p) if honour_env && !p.is_empty() => PathBuf::from(p),
        _ => default_surface.to_path_buf(),
    };
    // Each crate's build script runs in its own directory: a relative path would name a
    // different file for `generated` and `tool_api`, and their surfaces could disagree.
    if !surface.is_absolute() {
        println!(
            "cargo::error={SURFACE_ENV}={} is relative; give an absolute path",
            surface.display()
        );
        return;
    }
    println!("cargo::rerun-if-changed={}", surface.display());
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        println!("cargo::error=OUT_DIR is not set (run this from a build script)");
        return;
    };
    let name = surface.file_name().map_or_else(
        || "surface.toml".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    let text = match std::fs::read_to_string(&surface) {
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
    let wanted = only.unwrap_or_default();
    if let Some(missing) = wanted.iter().find(|n| !files.contains_key(**n)) {
        println!(
            "cargo::error={} generates no `{missing}` (does it declare what that file needs?)",
            surface.display()
        );
        return;
    }
    for (rel, contents) in &files {
        if only.is_some_and(|names| !names.contains(&rel.as_str())) {
            continue;
        }
        let path = out_dir.join(rel);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, contents));
        if let Err(e) = written {
            println!("cargo::error=cannot write {}: {e}", path.display());
            return;
        }
    }
}
