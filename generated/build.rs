//! Generates the surface from the workspace's `surface.toml` (or `$GANTRY_SURFACE`) into
//! `OUT_DIR` on every build that needs it; nothing outside `OUT_DIR` is written.

use std::path::PathBuf;

fn main() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    codegen::build_script(&here.join("../surface.toml"), true, None);
}
