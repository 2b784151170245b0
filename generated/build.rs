//! Keeps `generated/` in step with `surface.toml` on every `cargo build`, so editing the
//! surface changes the served tools with no manual step.
//!
//! Outside CI a stale copy is rewritten in place (and cargo prints a warning to commit it).
//! Under CI (`CI` set) nothing is written: the `generated_is_fresh` test fails with a diff
//! instead, so a stale commit never passes.

use std::path::PathBuf;

fn main() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let surface = here.join("../surface.toml");
    println!("cargo::rerun-if-changed={}", surface.display());
    println!("cargo::rerun-if-env-changed=CI");
    let text = match std::fs::read_to_string(&surface) {
        Ok(t) => t,
        Err(e) => {
            println!("cargo::error=cannot read {}: {e}", surface.display());
            return;
        }
    };
    let files = match codegen::generate("surface.toml", &text) {
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
        if let Ok(codegen::Staleness::Stale { .. }) = codegen::check(&here, &files) {
            println!(
                "cargo::warning=generated/ is stale; the generated_is_fresh test will fail (run `cargo codegen`)"
            );
        }
        return;
    }
    match codegen::sync(&here, &files) {
        Ok(changed) if !changed.is_empty() => {
            println!(
                "cargo::warning=surface.toml changed: regenerated {} file(s) under generated/; review and commit them",
                changed.len()
            );
        }
        Ok(_) => {}
        Err(e) => println!("cargo::error=cannot write generated/: {e}"),
    }
}
