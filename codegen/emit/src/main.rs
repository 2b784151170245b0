//! `cargo codegen [--check]`: regenerate `generated/` from `surface.toml`, or only compare.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut check = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                println!(
                    "usage: cargo codegen [--check]\n\nRegenerates generated/ from surface.toml; --check only compares."
                );
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("codegen: unknown argument `{other}` (try --help)");
                return ExitCode::from(2);
            }
        }
    }
    let surface_path = root.join("surface.toml");
    let text = match std::fs::read_to_string(&surface_path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("codegen: cannot read {}: {e}", surface_path.display());
            return ExitCode::FAILURE;
        }
    };
    let files = match codegen::generate("surface.toml", &text) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let out = root.join("generated");
    if check {
        match codegen::check(&out, &files) {
            Ok(codegen::Staleness::Fresh) => ExitCode::SUCCESS,
            Ok(codegen::Staleness::Stale { report }) => {
                eprintln!(
                    "{report}\ngenerated/ is stale: run `cargo codegen` and commit the result"
                );
                ExitCode::FAILURE
            }
            Err(e) => {
                eprintln!("codegen: {e}");
                ExitCode::FAILURE
            }
        }
    } else {
        match codegen::sync(&out, &files) {
            Ok(changed) => {
                for path in &changed {
                    eprintln!("wrote generated/{path}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("codegen: {e}");
                ExitCode::FAILURE
            }
        }
    }
}
