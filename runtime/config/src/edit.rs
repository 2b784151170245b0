//! Changes to the config file made for the user (the control page): one key at a time, the
//! rest of the file (comments, order, layout) kept as it was, written atomically. The running
//! server then reloads it exactly as it reloads a hand edit.

use std::path::{Path, PathBuf};

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `[permissions] <name> = <on>`.
    Permission(String, bool),
    /// `read_only = <on>`.
    ReadOnly(bool),
    /// Adds a directory to `roots` (the current roots first, when the file had none).
    AddRoot(PathBuf),
    /// Removes a directory from `roots`.
    RemoveRoot(PathBuf),
    /// Writes `[hosts.NAME]` (replacing an entry of that name).
    SetMachine(String, crate::machines::MachineConfig),
    /// Removes `[hosts.NAME]`.
    RemoveMachine(String),
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Permission(name, on) => write!(f, "[permissions] {name} = {on}"),
            Change::ReadOnly(on) => write!(f, "read_only = {on}"),
            Change::AddRoot(dir) => write!(f, "roots += {}", dir.display()),
            Change::RemoveRoot(dir) => write!(f, "roots -= {}", dir.display()),
            Change::SetMachine(name, m) => write!(f, "[hosts.{name}] ssh = {}", m.ssh),
            Change::RemoveMachine(name) => write!(f, "[hosts.{name}] removed"),
        }
    }
}

/// Why a change was not made (the file is left untouched).
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The file does not parse; it must be fixed by hand first.
    #[error("{path} does not parse ({reason}); fix it by hand first, nothing was changed")]
    Unparsable {
        /// The config file.
        path: String,
        /// The parser's message.
        reason: String,
    },
    /// The change itself is not valid.
    #[error("{0}")]
    Invalid(String),
    /// The directory to add is a root already.
    #[error("{0} is already a root")]
    AlreadyRoot(String),
    /// The server could not use the file with the change; it was put back.
    #[error("not changed: with it, {0}")]
    Unusable(String),
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The config file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Serializes edits made by this process, so two clicks never interleave read and write.
static EDITING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The file an edit of the config at `path` replaces: a config kept as a symlink (dotfiles)
/// stays one, and the file it points to is replaced.
pub fn target_of(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Applies `change` to the config file at `path` (created when missing, with its parent
/// directory). `current_roots` are the roots in effect, used when the file names none.
pub fn apply(path: &Path, change: &Change, current_roots: &[PathBuf]) -> Result<(), EditError> {
    apply_checked(path, change, current_roots, || Ok(()))
}

/// [`apply`], then `usable` (the server reloading the file): when it says the server cannot
/// use the result, the file is put back as it was (a file that did not exist comes back
/// empty, which reads as the same defaults, rather than vanishing, which would refuse every
/// call). Edits of this process run one at a time from read to check, so an undo never
/// reverts another edit.
pub fn apply_checked(
    path: &Path,
    change: &Change,
    current_roots: &[PathBuf],
    usable: impl FnOnce() -> Result<(), String>,
) -> Result<(), EditError> {
    let _one_at_a_time = match EDITING.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    let shown = path.display().to_string();
    let io = |source| EditError::Io {
        path: shown.clone(),
        source,
    };
    let target = target_of(path);
    let text = match state_dir::read_own_input(&target) {
        Ok(read) => read.text,
        Err(state_dir::OwnInputError::Missing) => String::new(),
        Err(state_dir::OwnInputError::Io(e)) => return Err(io(e)),
        Err(e) => return Err(io(std::io::Error::other(e.to_string()))),
    };
    let mut doc: toml_edit::DocumentMut =
        text.parse()
            .map_err(|e: toml_edit::TomlError| EditError::Unparsable {
                path: shown.clone(),
                reason: e.message().to_string(),
            })?;
    edit(&mut doc, change, current_roots)?;
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    state_dir::write_private(&target, doc.to_string().as_bytes()).map_err(io)?;
    if let Err(why) = usable() {
        state_dir::write_private(&target, text.as_bytes()).map_err(io)?;
        return Err(EditError::Unusable(why));
    }
    Ok(())
}

fn edit(
    doc: &mut toml_edit::DocumentMut,
    change: &Change,
    current_roots: &[PathBuf],
) -> Result<(), EditError> {
    match change {
        Change::Permission(name, on) => {
            if !generated::PERMISSIONS.iter().any(|p| p.name == name) {
                return Err(EditError::Invalid(format!("unknown permission `{name}`")));
            }
            let table = doc
                .entry("permissions")
                .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
            let Some(table) = table.as_table_like_mut() else {
                return Err(EditError::Invalid(
                    "`permissions` in the config file is not a table".into(),
                ));
            };
            match table.get_mut(name) {
                Some(item) => *item = toml_edit::value(*on),
                None => {
                    table.insert(name, toml_edit::value(*on));
                }
            }
        }
        Change::ReadOnly(on) => set_top(doc, "read_only", toml_edit::value(*on)),
        Change::SetMachine(name, machine) => {
            if !crate::machines::name_ok(name) {
                return Err(EditError::Invalid(format!(
                    "`{name}` cannot name a host: 1 to 32 letters, digits, `-` or `_`"
                )));
            }
            if let Some(why) = machine.problem() {
                return Err(EditError::Invalid(format!("[hosts.{name}]: {why}")));
            }
            let hosts = doc.entry("hosts").or_insert_with(|| {
                let mut t = toml_edit::Table::new();
                t.set_implicit(true);
                toml_edit::Item::Table(t)
            });
            let Some(hosts) = hosts.as_table_mut() else {
                return Err(EditError::Invalid(
                    "`hosts` in the config file is not a table".into(),
                ));
            };
            let mut entry = toml_edit::Table::new();
            entry.insert("ssh", toml_edit::value(machine.ssh.as_str()));
            if let Some(port) = machine.port {
                entry.insert("port", toml_edit::value(i64::from(port)));
            }
            if let Some(f) = &machine.identity_file {
                entry.insert("identity_file", toml_edit::value(f.as_str()));
            }
            if let Some(g) = &machine.gantry {
                entry.insert("gantry", toml_edit::value(g.as_str()));
            }
            hosts.insert(name, toml_edit::Item::Table(entry));
        }
        Change::RemoveMachine(name) => {
            let removed = doc
                .get_mut("hosts")
                .and_then(toml_edit::Item::as_table_mut)
                .and_then(|t| t.remove(name));
            if removed.is_none() {
                return Err(EditError::Invalid(format!(
                    "there is no [hosts.{name}] in the config file"
                )));
            }
        }
        Change::AddRoot(dir) | Change::RemoveRoot(dir) => {
            let Some(shown) = dir.to_str() else {
                return Err(EditError::Invalid(format!(
                    "{}: not valid UTF-8, cannot be written to the config file",
                    dir.display()
                )));
            };
            let mut roots: Vec<String> = match doc.get("roots") {
                None => current_roots
                    .iter()
                    .filter_map(|r| r.to_str().map(str::to_string))
                    .collect(),
                Some(item) => match item.as_array() {
                    Some(a) => a
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect(),
                    None => {
                        return Err(EditError::Invalid(
                            "`roots` in the config file is not a list of strings".into(),
                        ));
                    }
                },
            };
            match change {
                Change::AddRoot(_) => {
                    if roots.iter().any(|r| r == shown) {
                        return Err(EditError::AlreadyRoot(shown.to_string()));
                    }
                    roots.push(shown.to_string());
                }
                _ => {
                    let before = roots.len();
                    roots.retain(|r| r != shown);
                    if roots.len() == before {
                        return Err(EditError::Invalid(format!(
                            "{shown} is not one of the config file's roots"
                        )));
                    }
                    if roots.is_empty() {
                        return Err(EditError::Invalid(
                            "the last root cannot be removed: gantry needs at least one".into(),
                        ));
                    }
                }
            }
            let array: toml_edit::Array = roots.iter().map(String::as_str).collect();
            match doc.get_mut("roots").and_then(|i| i.as_value_mut()) {
                // Keeps the comment or spacing written before the value.
                Some(value) => {
                    let decor = value.decor().clone();
                    *value = toml_edit::Value::Array(array);
                    *value.decor_mut() = decor;
                }
                None => set_top(doc, "roots", toml_edit::value(array)),
            }
        }
    }
    Ok(())
}

/// Sets a top-level key, placing a new one before the first table (a key written after a
/// table header would belong to that table).
fn set_top(doc: &mut toml_edit::DocumentMut, key: &str, item: toml_edit::Item) {
    match doc.get_mut(key) {
        Some(existing) => {
            let decor = existing.as_value().map(|v| v.decor().clone());
            *existing = item;
            if let (Some(decor), Some(v)) = (decor, existing.as_value_mut()) {
                *v.decor_mut() = decor;
            }
        }
        None => {
            doc.insert(key, item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HAND_WRITTEN: &str = "# my gantry\nread_only = false # for now\n\n[permissions]\n# commands are fine\nexec = true\nread = true\n\n[exec]\nwarm_shell = true\n";

    fn changed(text: &str, change: Change) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        apply(&path, &change, &[PathBuf::from("/srv/a")]).unwrap();
        std::fs::read_to_string(&path).unwrap()
    }

    #[test]
    fn a_switch_changes_its_value_and_nothing_else() {
        let after = changed(HAND_WRITTEN, Change::Permission("exec".into(), false));
        assert_eq!(after, HAND_WRITTEN.replace("exec = true", "exec = false"));
        let after = changed(HAND_WRITTEN, Change::ReadOnly(true));
        assert_eq!(
            after,
            HAND_WRITTEN.replace("read_only = false", "read_only = true")
        );
    }

    #[test]
    fn a_new_key_lands_in_its_table_and_a_top_level_one_before_the_tables() {
        let after = changed(HAND_WRITTEN, Change::Permission("search".into(), false));
        let parsed: toml::Table = toml::from_str(&after).unwrap();
        assert_eq!(parsed["permissions"]["search"].as_bool(), Some(false));
        assert!(after.starts_with("# my gantry\n"));
        let after = changed("[permissions]\nexec = true\n", Change::ReadOnly(true));
        let parsed: toml::Table = toml::from_str(&after).unwrap();
        assert_eq!(parsed["read_only"].as_bool(), Some(true));
        assert_eq!(parsed["permissions"].get("read_only"), None);
    }

    #[test]
    fn roots_start_from_the_roots_in_effect_and_the_last_one_stays() {
        let after = changed("", Change::AddRoot("/srv/b".into()));
        let parsed: toml::Table = toml::from_str(&after).unwrap();
        assert_eq!(
            parsed["roots"].as_array().unwrap(),
            &vec![toml::Value::from("/srv/a"), toml::Value::from("/srv/b")]
        );
        let after = changed(&after, Change::RemoveRoot("/srv/a".into()));
        let parsed: toml::Table = toml::from_str(&after).unwrap();
        assert_eq!(parsed["roots"].as_array().unwrap().len(), 1);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "roots = [\"/srv/a\"]\n").unwrap();
        let refused = apply(&path, &Change::RemoveRoot("/srv/a".into()), &[]);
        assert!(matches!(refused, Err(EditError::Invalid(_))), "{refused:?}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "roots = [\"/srv/a\"]\n"
        );
    }

    #[test]
    fn an_unparsable_file_or_an_unknown_permission_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "read_only = \n").unwrap();
        let refused = apply(&path, &Change::ReadOnly(true), &[]);
        assert!(
            matches!(refused, Err(EditError::Unparsable { .. })),
            "{refused:?}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "read_only = \n");
        std::fs::write(&path, "").unwrap();
        let refused = apply(&path, &Change::Permission("root_access".into(), true), &[]);
        assert!(matches!(refused, Err(EditError::Invalid(_))));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
    }

    #[test]
    fn a_change_the_server_cannot_use_is_undone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, HAND_WRITTEN).unwrap();
        let undone = apply_checked(&path, &Change::ReadOnly(true), &[], || Err("no".into()));
        assert!(matches!(undone, Err(EditError::Unusable(_))), "{undone:?}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), HAND_WRITTEN);
        let missing = dir.path().join("new.toml");
        let undone = apply_checked(&missing, &Change::ReadOnly(true), &[], || Err("no".into()));
        assert!(undone.is_err());
        assert_eq!(std::fs::read_to_string(&missing).unwrap(), "");
    }

    #[cfg(unix)]
    #[test]
    fn a_config_kept_as_a_symlink_stays_one() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("dotfiles.toml");
        std::fs::write(&real, "read_only = false\n").unwrap();
        let link = dir.path().join("config.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        apply(&link, &Change::ReadOnly(true), &[]).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read_to_string(&real).unwrap(),
            "read_only = true\n"
        );
    }
}
