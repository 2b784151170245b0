//! Embeds the built-in policy set (`policies/*.cedar` at the workspace root) so a released binary carries the
//! policies it was tested with; `--policies DIR` replaces them at run time.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("../../policies");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cedar"))
            .collect(),
        Err(e) => {
            println!("cargo::error=cannot read {}: {e}", dir.display());
            return;
        }
    };
    names.sort();
    let mut out = String::from(
        "/// The built-in policy files: (file name, contents).\npub static BUILTIN_POLICIES: &[(&str, &str)] = &[\n",
    );
    for name in &names {
        let path = dir.join(name);
        println!("cargo::rerun-if-changed={}", path.display());
        let _ = writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        );
    }
    out.push_str("];\n");
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        println!("cargo::error=OUT_DIR is not set (run this as a build script)");
        return;
    };
    if let Err(e) = std::fs::write(out_dir.join("builtin_policies.rs"), out) {
        println!("cargo::error=cannot write builtin_policies.rs: {e}");
    }
}
