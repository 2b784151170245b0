//! Where the policy files come from: the built-in copy of `policies/`, or a directory given
//! with `--policies`.

use std::path::Path;

use authz::{Engine, LoadError, PolicyFile};

include!(concat!(env!("OUT_DIR"), "/builtin_policies.rs"));

/// The built-in policy files, named as in the source tree.
pub fn builtin() -> Vec<PolicyFile> {
    BUILTIN_POLICIES
        .iter()
        .map(|(name, text)| PolicyFile {
            name: format!("policies/{name}"),
            text: (*text).to_string(),
        })
        .collect()
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
    if paths.is_empty() {
        return Err(format!(
            "policy directory {} holds no .cedar file",
            dir.display()
        ));
    }
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

/// Loads and validates the policy set against the generated Cedar schema.
pub fn load(dir: Option<&Path>) -> Result<Engine, Vec<String>> {
    let files = match dir {
        Some(d) => from_dir(d).map_err(|e| vec![e])?,
        None => builtin(),
    };
    Engine::load(
        generated::CEDAR_SCHEMA,
        &files,
        tool_api::ErrorCode::DENIALS,
    )
    .map_err(|errs| errs.iter().map(LoadError::to_string).collect())
}
