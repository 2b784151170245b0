//! Keeps the generated files of the conformance surface (`src/surface*`, `schemas/`,
//! `docs/`, `policies/`) in step with `conformance/surface.toml`, exactly as
//! `generated/build.rs` does for gantry's own surface.

use std::path::PathBuf;

fn main() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    codegen::build_script(&here, &here.join("surface.toml"));
}
