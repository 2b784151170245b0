//! Keeps `generated/` in step with `surface.toml` on every `cargo build`, so editing the
//! surface changes the served tools with no manual step (see `codegen::build_script`).

use std::path::PathBuf;

fn main() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    codegen::build_script(&here, &here.join("../surface.toml"));
}
