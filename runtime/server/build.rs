//! Embeds the shipped policy files so a released binary carries the policies it was tested
//! with: `policies/base/*.cedar` (always loaded, on top of the base generated from
//! surface.toml) and `policies/*.cedar` (the default user rules, replaced by `--policies DIR`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// `(file name, include_str!(path))` rows for every `*.cedar` file of `dir`, sorted.
fn rows(dir: &Path) -> Result<String, String> {
    println!("cargo::rerun-if-changed={}", dir.display());
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cedar"))
        .collect();
    names.sort();
    let mut out = String::new();
    for name in &names {
        let path = dir.join(name);
        println!("cargo::rerun-if-changed={}", path.display());
        let _ = writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        );
    }
    Ok(out)
}

fn main() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let policies = here.join("../../policies");
    let (base, user) = match (rows(&policies.join("base")), rows(&policies)) {
        (Ok(b), Ok(u)) => (b, u),
        (Err(e), _) | (_, Err(e)) => {
            println!("cargo::error={e}");
            return;
        }
    };
    let out = format!(
        "/// `policies/base/`: always loaded. (file name, contents)\n\
         pub static BUILTIN_BASE: &[(&str, &str)] = &[\n{base}];\n\n\
         /// `policies/`: the default user rules. (file name, contents)\n\
         pub static BUILTIN_USER: &[(&str, &str)] = &[\n{user}];\n"
    );
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        println!("cargo::error=OUT_DIR is not set (run this as a build script)");
        return;
    };
    if let Err(e) = std::fs::write(out_dir.join("builtin_policies.rs"), out) {
        println!("cargo::error=cannot write builtin_policies.rs: {e}");
    }
}
