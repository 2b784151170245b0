//! Where the policy files come from: the base (generated from surface.toml, plus the embedded
//! `policies/base/`), always; then the user rules, from `--policies DIR` or the embedded
//! `policies/*.cedar`.

use std::path::{Path, PathBuf};

use authz::{Engine, LoadError, PolicyFile};

include!(concat!(env!("OUT_DIR"), "/builtin_policies.rs"));

/// Where the generated base policies are said to come from, in denials and load errors.
pub const GENERATED_BASE: &str = "the base generated from surface.toml";

fn embedded(rows: &[(&str, &str)], dir: &str) -> Vec<PolicyFile> {
    rows.iter()
        .map(|(name, text)| PolicyFile {
            name: format!("{dir}{name}"),
            text: (*text).to_string(),
        })
        .collect()
}

/// The base every policy set starts with: the rules generated from surface.toml and
/// `policies/base/`. No policy directory can drop them.
pub fn base() -> Vec<PolicyFile> {
    let mut files = vec![PolicyFile {
        name: GENERATED_BASE.into(),
        text: generated::BASE_POLICIES.into(),
    }];
    files.extend(embedded(BUILTIN_BASE, "policies/base/"));
    files
}

/// The shipped user rules (`policies/*.cedar`), used when no `--policies` is given.
pub fn builtin() -> Vec<PolicyFile> {
    embedded(BUILTIN_USER, "policies/")
}

/// Every `*.cedar` file of `dir`, sorted by name.
pub fn from_dir(dir: &Path) -> Result<Vec<PolicyFile>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("policy directory {}: {e}", dir.display()))?;
    let mut paths: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cedar") && p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            Ok(PolicyFile {
                name: p.display().to_string(),
                text,
            })
        })
        .collect()
}

/// The version of every user policy file of `dir` (none for the embedded set, which cannot
/// change while serving): a change to any of them reloads the policy set.
pub fn dir_stamp(dir: Option<&Path>) -> Vec<(PathBuf, state_dir::Stamp)> {
    let Some(dir) = dir else { return Vec::new() };
    let mut stamps: Vec<_> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "cedar"))
                .map(|p| {
                    let stamp = state_dir::file_stamp(&p);
                    (p, stamp)
                })
                .collect()
        })
        .unwrap_or_default();
    stamps.sort();
    stamps
}

/// Loads the base and the user rules (`dir`, or the shipped `policies/`) and validates them
/// together against the generated Cedar schema. An empty directory is fine: the base alone.
pub fn load(dir: Option<&Path>) -> Result<Engine, Vec<String>> {
    let mut files = base();
    files.extend(match dir {
        Some(d) => from_dir(d).map_err(|e| vec![e])?,
        None => builtin(),
    });
    Engine::load(
        generated::CEDAR_SCHEMA,
        &files,
        tool_api::ErrorCode::DENIALS,
    )
    .map_err(|errs| errs.iter().map(LoadError::to_string).collect())
}
