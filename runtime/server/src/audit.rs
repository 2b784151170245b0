//! The audit log: one JSON line per tool call in `<state dir>/audit.jsonl`. It records who,
//! what, the decision and how long it took, never arguments, file contents or output.

use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;

/// One audit line.
#[derive(Debug, Serialize)]
pub struct Entry<'a> {
    /// Milliseconds since the Unix epoch.
    pub ts_ms: u128,
    /// The connector the call came through.
    pub connector: &'a str,
    /// The tool name (bounded).
    pub tool: &'a str,
    /// `ok` or the error code.
    pub outcome: &'a str,
    /// Wall time of the call.
    pub duration_us: u128,
    /// Client-supplied labels (`openai/session`...), for correlation only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<(&'a str, String)>,
}

/// An append-only audit log.
#[derive(Debug)]
pub struct Audit {
    file: Option<Mutex<std::fs::File>>,
}

impl Audit {
    /// Opens (creating, private) `audit.jsonl` in `dir`.
    pub fn open(dir: &Path) -> std::io::Result<Audit> {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        Ok(Audit {
            file: Some(Mutex::new(options.open(dir.join("audit.jsonl"))?)),
        })
    }

    /// A log that records nothing (for benches and `check`).
    pub fn disabled() -> Audit {
        Audit { file: None }
    }

    /// Appends one line; a failure is logged, never fatal to the call.
    pub fn record(&self, entry: &Entry<'_>) {
        let Some(file) = &self.file else { return };
        let mut line = match serde_json::to_vec(entry) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "audit line does not serialize");
                return;
            }
        };
        line.push(b'\n');
        match file.lock() {
            Ok(mut f) => {
                if let Err(e) = f.write_all(&line) {
                    tracing::warn!(error = %e, "cannot write the audit log");
                }
            }
            Err(_) => tracing::warn!("audit log lock poisoned"),
        }
    }
}
