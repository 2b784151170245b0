//! `cargo codegen [--check]`: refresh the goldens of every generated file (one insta snapshot
//! each, under `generated/` and the fixture surfaces' `generated/` folders), or only compare
//! them.
//!
//! The goldens test is the one writer, so the stored form is insta's and a reviewer sees the
//! same files `tests/run` checks. The build itself never needs this: `generated/build.rs`
//! generates into `OUT_DIR`.

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let mut check = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                println!(
                    "usage: cargo codegen [--check]\n\nRefreshes the goldens of the generated files; --check only compares."
                );
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("codegen: unknown argument `{other}` (try --help)");
                return ExitCode::from(2);
            }
        }
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["test", "-q", "-p", "codegen", "--test", "goldens"])
        .env("INSTA_UPDATE", if check { "no" } else { "always" })
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("codegen: cannot run cargo: {e}");
            ExitCode::FAILURE
        }
    }
}
