//! Generates `ErrorCode` from the workspace's `surface.toml` (or `$GANTRY_SURFACE`) into
//! `OUT_DIR`; nothing outside `OUT_DIR` is written.

use std::path::PathBuf;

fn main() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    codegen::build_script(
        &here.join("../../surface.toml"),
        true,
        Some(&["error_codes.rs"]),
    );
}
