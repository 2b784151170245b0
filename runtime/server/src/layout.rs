//! Where gantry's own files lie, as the tools and confinement must see them: what no tool may
//! reach, what below it they may use, and what confinement must keep out of the roots.

use config::Settings;

/// gantry's own files, kept out of reach of its tools wherever the roots are.
pub fn owned_files(settings: &Settings) -> Vec<std::path::PathBuf> {
    [Some(&settings.config_path), Some(&settings.state_dir)]
        .into_iter()
        .chain([settings.policies_dir.as_ref()])
        .flatten()
        .cloned()
        .collect()
}

/// Below gantry's own files, what the tools may use: the spill files of command output.
pub fn usable_files(settings: &Settings) -> Vec<std::path::PathBuf> {
    vec![settings.state_dir.join("spill")]
}

/// What confinement must keep out of the roots: what gantry runs or trusts unconfined.
pub fn confinement_layout(
    settings: &Settings,
    exe: &std::path::Path,
) -> Vec<(&'static str, Option<std::path::PathBuf>)> {
    vec![
        ("gantry's binary", Some(exe.to_path_buf())),
        ("the config file", Some(settings.config_path.clone())),
        ("the policy directory", settings.policies_dir.clone()),
        ("the state directory", Some(settings.state_dir.clone())),
        (
            "HOME, whose login profile gantry runs to take the snapshot",
            std::env::var_os("HOME").map(std::path::PathBuf::from),
        ),
    ]
}

/// The private temp directory confined commands write to (created 0700).
pub fn confined_tmp(settings: &Settings) -> std::io::Result<std::path::PathBuf> {
    let tmp = settings.state_dir.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700))?;
    }
    // Canonical: the confinement opens it from `/` without following a link.
    confine::path_policy::new_root(&tmp).map_err(std::io::Error::other)
}
