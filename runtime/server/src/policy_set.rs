//! Where the policy files come from: the base (generated from surface.toml, plus the embedded
//! `policies/base/`), always; then the user rules, from `--policies DIR` or the embedded
//! `policies/*.cedar`.

use std::path::{Path, PathBuf};

use authz::{Engine, LoadError, PolicyFile};

include!(concat!(env!("OUT_DIR"), "/builtin_policies.rs"));

/// A user policy file by path, with its version (as read, or as found).
pub type Version = (PathBuf, state_dir::Stamp);

/// Every user policy file's [`Version`].
pub type Versions = Vec<Version>;

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

/// Every `*.cedar` entry of `dir`, sorted by name. Each must be a regular file (or a link to
/// one) within gantry's input cap: a `.cedar` that became a directory, a dangling link or a
/// FIFO is an error, never a file with no rules.
pub fn from_dir(dir: &Path) -> Result<Vec<PolicyFile>, String> {
    from_dir_read(dir).map(|files| files.into_iter().map(|(f, _)| f).collect())
}

/// [`from_dir`], with each file's version as read from the open file (not from its name a
/// moment before or after).
fn from_dir_read(dir: &Path) -> Result<Vec<(PolicyFile, Version)>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("policy directory {}: {e}", dir.display()))?;
    let mut paths: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cedar"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let read = state_dir::read_own_input(&p).map_err(|e| match e {
                state_dir::OwnInputError::Missing => format!(
                    "{}: it is a link to nothing (or vanished while read)",
                    p.display()
                ),
                e => format!("{}: {e}", p.display()),
            })?;
            Ok((
                PolicyFile {
                    name: p.display().to_string(),
                    text: read.text,
                },
                (p.clone(), read.stamp),
            ))
        })
        .collect()
}

/// The version of every user policy file of `dir` (none for the embedded set, which cannot
/// change while serving): a change to any of them reloads the policy set.
pub fn dir_stamp(dir: Option<&Path>) -> Versions {
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
    stamps.sort_by(|a, b| a.0.cmp(&b.0));
    stamps
}

/// Loads the base and the user rules (`dir`, or the shipped `policies/`) and validates them
/// together against the generated Cedar schema. An empty directory is fine: the base alone.
pub fn load(dir: Option<&Path>) -> Result<Engine, Vec<String>> {
    load_read(dir).map(|(engine, _)| engine)
}

/// [`load`], with the version of each user policy file as it was read (sorted by path, as
/// [`dir_stamp`] lists them): what a reload compares the files with next, so content read
/// just after a change is never paired with the version from before it.
pub fn load_read(dir: Option<&Path>) -> Result<(Engine, Versions), Vec<String>> {
    let mut files = base();
    let mut read = Vec::new();
    match dir {
        Some(d) => {
            for (file, stamp) in from_dir_read(d).map_err(|e| vec![e])? {
                files.push(file);
                read.push(stamp);
            }
        }
        None => files.extend(builtin()),
    }
    let engine = Engine::load(
        generated::CEDAR_SCHEMA,
        &files,
        tool_api::ErrorCode::DENIALS,
    )
    .map_err(|errs| errs.iter().map(LoadError::to_string).collect::<Vec<_>>())?;
    read.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((engine, read))
}
