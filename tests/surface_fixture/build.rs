//! Generates the fixture surface (`surface.toml` here) into `OUT_DIR`, as `generated/build.rs`
//! does for gantry's own.

use std::path::PathBuf;

fn main() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    codegen::build_script(&here.join("surface.toml"), false, None);
}
