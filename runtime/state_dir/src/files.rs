//! The state directory: connector tokens and the audit log. Private to the user (0700 for
//! the directory, 0600 for files on Unix).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;

use crate::own_input::{Stamp, file_stamp};
use subtle::ConstantTimeEq;

/// Creates the state directory if needed and makes it private.
pub fn ensure(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Makes an open file readable by its owner only, whatever mode it had (a `tokens.toml`
/// copied in with 0644 is tightened, not trusted). Through the handle, so no path is followed.
pub fn force_private(file: &std::fs::File) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if file.metadata()?.permissions().mode() & 0o777 != 0o600 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}

/// Writes `contents` to `path` atomically, readable by the owner only.
pub fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    // A fresh, exclusive temp name: two writers never share (or follow) a temp file.
    let mut tag = [0u8; 6];
    getrandom::fill(&mut tag).map_err(|e| std::io::Error::other(e.to_string()))?;
    let tag: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    let tmp = path.with_extension(format!("tmp-{tag}"));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut f = options.open(&tmp)?;
    f.write_all(contents)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// A secret (a connector's token, the control page's path, a worker's endpoint): 256 bits
/// from the OS CSPRNG, base64url.
pub fn new_secret() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// The connector tokens of this state directory.
#[derive(Clone)]
pub struct Tokens {
    by_connector: Vec<(&'static str, String)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a token.
        f.debug_struct("Tokens")
            .field("connectors", &self.by_connector.len())
            .finish()
    }
}

/// Where the tokens live.
pub fn tokens_path(dir: &Path) -> PathBuf {
    dir.join("tokens.toml")
}

fn read_table(path: &Path) -> Result<toml::Table, String> {
    let text = match crate::own_input::read_own_input(path) {
        Ok(read) => read.text,
        Err(crate::own_input::OwnInputError::Missing) => return Ok(toml::Table::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    force_private(&file).map_err(|e| format!("{}: cannot make it private: {e}", path.display()))?;
    text.parse()
        .map_err(|e: toml::de::Error| format!("{}: {}", path.display(), e.message()))
}

/// The connector tokens stored now (none when there is no token file yet).
pub fn stored_tokens(dir: &Path) -> Vec<String> {
    read_table(&tokens_path(dir))
        .map(|t| {
            t.values()
                .filter_map(toml::Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn write_table(path: &Path, table: &toml::Table) -> Result<(), String> {
    let text = format!(
        "# gantry connector secrets. Anyone with one of these can use that connector.\n{}",
        toml::to_string(table).map_err(|e| e.to_string())?
    );
    write_private(path, text.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))
}

impl Tokens {
    /// Reads `tokens.toml`, creating a token for each connector that has none yet.
    pub fn load_or_create(dir: &Path, connectors: &[&'static str]) -> Result<Tokens, String> {
        let path = tokens_path(dir);
        let mut stored = read_table(&path)?;
        let mut changed = false;
        let mut by_connector = Vec::new();
        for c in connectors {
            let token = match stored.get(*c).and_then(toml::Value::as_str) {
                Some(t) if t.len() >= 22 => t.to_string(),
                _ => {
                    let t = new_secret().map_err(|e| format!("cannot draw a random token: {e}"))?;
                    stored.insert((*c).to_string(), toml::Value::String(t.clone()));
                    changed = true;
                    t
                }
            };
            by_connector.push((*c, token));
        }
        if changed {
            write_table(&path, &stored)?;
        }
        Ok(Tokens { by_connector })
    }

    /// Replaces the token of `connector` (every connector when `None`); returns the connectors
    /// rotated. A running server picks the new tokens up on its next request.
    pub fn rotate(
        dir: &Path,
        connectors: &[&'static str],
        which: Option<&str>,
    ) -> Result<Vec<&'static str>, String> {
        if let Some(w) = which
            && !connectors.contains(&w)
        {
            return Err(format!(
                "unknown connector `{w}` (connectors: {})",
                connectors.join(", ")
            ));
        }
        let path = tokens_path(dir);
        let mut stored = read_table(&path)?;
        let mut rotated = Vec::new();
        for c in connectors.iter().filter(|c| which.is_none_or(|w| w == **c)) {
            let t = new_secret().map_err(|e| format!("cannot draw a random token: {e}"))?;
            stored.insert((*c).to_string(), toml::Value::String(t));
            rotated.push(*c);
        }
        write_table(&path, &stored)?;
        Ok(rotated)
    }

    /// The token of `connector`.
    pub fn get(&self, connector: &str) -> Option<&str> {
        self.by_connector
            .iter()
            .find(|(c, _)| *c == connector)
            .map(|(_, t)| t.as_str())
    }

    /// The connector whose token is `candidate`. Compares against every token in constant
    /// time, so response timing says nothing about how close a guess was.
    pub fn connector_for(&self, candidate: &str) -> Option<&'static str> {
        let mut found = None;
        for (c, token) in &self.by_connector {
            let equal = token.len() == candidate.len()
                && bool::from(token.as_bytes().ct_eq(candidate.as_bytes()));
            if equal {
                found = Some(*c);
            }
        }
        found
    }
}

/// Tokens as a running server sees them: reloaded when `tokens.toml` changes, so
/// `gantry token rotate` takes effect without a restart.
#[derive(Debug)]
pub struct LiveTokens {
    dir: PathBuf,
    connectors: Vec<&'static str>,
    current: std::sync::RwLock<(Stamp, Tokens)>,
}

impl LiveTokens {
    /// Loads (creating missing tokens) and remembers which version of the file it read.
    pub fn new(dir: &Path, connectors: &[&'static str]) -> Result<LiveTokens, String> {
        let tokens = Tokens::load_or_create(dir, connectors)?;
        let seen = file_stamp(&tokens_path(dir));
        Ok(LiveTokens {
            dir: dir.to_path_buf(),
            connectors: connectors.to_vec(),
            current: std::sync::RwLock::new((seen, tokens)),
        })
    }

    /// The current tokens, reloaded first if the file changed. A file that became unreadable
    /// keeps the last good tokens (and is logged), never an empty set that would let anyone in.
    pub fn get(&self) -> Tokens {
        let now = file_stamp(&tokens_path(&self.dir));
        {
            let guard = match self.current.read() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if guard.0 == now {
                return guard.1.clone();
            }
        }
        let mut guard = match self.current.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        match Tokens::load_or_create(&self.dir, &self.connectors) {
            Ok(t) => {
                // Said only when a token this server uses changed (another command may have
                // rewritten the file, adding one for a connector not served here).
                if t.by_connector != guard.1.by_connector {
                    tracing::info!("connector tokens reloaded");
                }
                *guard = (now, t);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot reload the connector tokens; keeping the previous ones")
            }
        }
        guard.1.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_created_once_private_and_distinct() {
        let dir = tempfile::tempdir().unwrap();
        let a = Tokens::load_or_create(dir.path(), &["core", "desktop"]).unwrap();
        let b = Tokens::load_or_create(dir.path(), &["core", "desktop"]).unwrap();
        assert_eq!(a.get("core"), b.get("core"));
        assert_ne!(a.get("core"), a.get("desktop"));
        assert_eq!(a.get("core").map(str::len), Some(43));
        let core = a.get("core").unwrap_or_default().to_string();
        assert_eq!(a.connector_for(&core), Some("core"));
        assert_eq!(a.connector_for(&core[..42]), None);
        assert_eq!(a.connector_for(""), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join("tokens.toml"))
                .map(|m| m.permissions().mode() & 0o777);
            assert_eq!(mode.ok(), Some(0o600));
        }
        assert!(!format!("{a:?}").contains(&core));
    }

    /// A token file that arrived readable by others (copied, restored from a backup) is
    /// tightened to 0600 on the next load, and the state directory to 0700.
    #[cfg(unix)]
    #[test]
    fn private_files_are_forced_private_whatever_they_were() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = state.join("tokens.toml");
        std::fs::write(&path, "core = \"0123456789012345678901234\"\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        ensure(&state).unwrap();
        let tokens = Tokens::load_or_create(&state, &["core"]).unwrap();
        assert_eq!(tokens.get("core"), Some("0123456789012345678901234"));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&state), mode(&path)), (0o700, 0o600));
    }

    #[test]
    fn rotation_replaces_one_token_and_a_live_server_sees_it() {
        let dir = tempfile::tempdir().unwrap();
        let live = LiveTokens::new(dir.path(), &["core", "desktop"]).unwrap();
        let before = live.get();
        // mtime granularity: make sure the rewrite is visible.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let rotated = Tokens::rotate(dir.path(), &["core", "desktop"], Some("core")).unwrap();
        assert_eq!(rotated, ["core"]);
        let after = live.get();
        assert_ne!(before.get("core"), after.get("core"));
        assert_eq!(before.get("desktop"), after.get("desktop"));
        let old = before.get("core").unwrap_or_default().to_string();
        assert_eq!(after.connector_for(&old), None);
        assert!(Tokens::rotate(dir.path(), &["core"], Some("nope")).is_err());
    }
}
