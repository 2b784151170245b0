//! `gantry check`: the surface, the policies and the config, validated together.

use std::path::Path;

use crate::config::Settings;

/// Runs every check and returns every problem found (empty when all is well), plus a short
/// summary of what was checked. `policies_flag` is used when the config itself is broken, so
/// one problem never hides another.
pub fn run(
    settings: Result<Settings, Vec<String>>,
    policies_flag: Option<&Path>,
    surface: Option<&Path>,
) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut summary = Vec::new();
    if let Some(path) = surface {
        match std::fs::read_to_string(path) {
            Ok(text) => match surface::Surface::parse(&path.display().to_string(), &text) {
                Ok(s) => summary.push(format!(
                    "surface {}: {} tools, {} permissions",
                    path.display(),
                    s.tools.len(),
                    s.permissions.len()
                )),
                Err(d) => problems.extend(d.0.iter().map(ToString::to_string)),
            },
            Err(e) => problems.push(format!("{}: {e}", path.display())),
        }
    }
    let settings = match settings {
        Ok(s) => {
            summary.push(format!(
                "config {}{}",
                s.config_path.display(),
                if s.config_exists {
                    ""
                } else {
                    " (absent: fresh defaults)"
                }
            ));
            Some(s)
        }
        Err(e) => {
            problems.extend(e);
            None
        }
    };
    let policies_dir = match &settings {
        Some(s) => s.policies_dir.clone(),
        None => policies_flag.map(Path::to_path_buf),
    };
    match crate::policy_set::load(policies_dir.as_deref()) {
        Ok(engine) => summary.push(format!(
            "policies {}: {} valid",
            policies_dir
                .as_deref()
                .map_or("(built in)".to_string(), |d| d.display().to_string()),
            engine.policy_ids().len()
        )),
        Err(e) => problems.extend(e),
    }
    if let Some(s) = &settings {
        problems.extend(s.default_root_problem());
        match crate::ops::path_policy::Roots::new(&s.roots) {
            Ok(r) => {
                let list: Vec<String> = r.all().iter().map(|p| p.display().to_string()).collect();
                summary.push(format!("approved root(s): {}", list.join(", ")));
                summary.push(format!("state directory {}", s.state_dir.display()));
            }
            Err(e) => problems.push(e),
        }
    }
    (problems, summary)
}
