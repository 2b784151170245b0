//! Recorded sessions in the server: the store in the state directory, what each answered call
//! leaves in it (while `session_recording` is on), and the import of the local agents'
//! transcripts, kept current in the background and topped up before each lookup.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use recordings::{Redactor, Store};
use tool_api::{ErrorCode, ToolError};

use crate::config::Settings;

/// How long one background import round may work (short, so a lookup never waits long
/// for it), and how often rounds run once everything is in.
const BACKGROUND_ROUND: Duration = Duration::from_millis(250);
const BACKGROUND_EVERY: Duration = Duration::from_secs(15);
/// How long a lookup tops the import up before it answers.
const BEFORE_LOOKUP: Duration = Duration::from_millis(300);

/// The store and what goes into it.
#[derive(Debug)]
pub struct Recorder {
    store: Result<(Store, Redactor), String>,
    sources: Vec<(String, PathBuf)>,
    /// Imported sessions are shown whatever their directory.
    pub all_directories: bool,
    /// One import at a time.
    importing: Mutex<()>,
}

impl Recorder {
    /// Opens `<state>/sessions.db`. A store that cannot be opened is reported at start and
    /// by every `session` call; calls are then not recorded.
    pub fn open(settings: &Settings) -> Recorder {
        let path = settings.state_dir.join("sessions.db");
        // The patterns were checked with the config; were one to fail here, nothing is
        // recorded or shown rather than shown unredacted.
        let (store, redactor) = match Redactor::new(&settings.session_redact, Vec::new()) {
            Ok(r) => (Store::open(&path).map_err(|e| e.to_string()), Some(r)),
            Err(e) => (Err(format!("[session] redact: {e}")), None),
        };
        if let Err(e) = &store {
            tracing::warn!("recorded sessions are unavailable: {e}");
        }
        Recorder {
            store: store.and_then(|s| redactor.map(|r| (s, r)).ok_or_else(String::new)),
            sources: settings.session_sources.clone(),
            all_directories: settings.session_all_directories,
            importing: Mutex::new(()),
        }
    }

    /// The store and what redacts its text, or why there is none.
    pub fn store(&self) -> Result<(&Store, &Redactor), ToolError> {
        self.store
            .as_ref()
            .map(|(s, r)| (s, r))
            .map_err(|e| ToolError::new(ErrorCode::Internal, e.clone()))
    }

    /// Records one answered call; a failure is logged, never fails the call.
    pub fn record(&self, call: &recordings::Call<'_>) {
        if let Ok((store, redactor)) = &self.store
            && let Err(e) = store.record_call(call, redactor)
        {
            tracing::warn!("a call was not recorded: {e}");
        }
    }

    /// Imports what is new, for at most `budget` in all (waiting for a running import
    /// counts). Returns whether everything was imported.
    pub fn refresh(&self, budget: Duration) -> bool {
        let until = std::time::Instant::now() + budget;
        let Ok((store, _)) = &self.store else {
            return true;
        };
        let _one = loop {
            match self.importing.try_lock() {
                Ok(g) => break g,
                Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    if std::time::Instant::now() >= until {
                        return false;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        };
        let left = until.saturating_duration_since(std::time::Instant::now());
        let report = recordings::import::refresh(store, &self.sources, left);
        if report.entries > 0 || report.skipped > 0 || report.dropped > 0 {
            tracing::info!(
                files = report.files,
                bytes = report.bytes,
                entries = report.entries,
                skipped_lines = report.skipped,
                dropped_sessions = report.dropped,
                "imported agent transcripts"
            );
        }
        !report.unfinished
    }

    /// Tops the import up before a lookup.
    pub fn refresh_for_lookup(&self) {
        let _ = self.refresh(BEFORE_LOOKUP);
    }

    /// Keeps importing in the background for as long as the recorder lives.
    pub fn import_in_background(self: &Arc<Self>) {
        if self.sources.is_empty() || self.store.is_err() {
            return;
        }
        let weak = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name("gantry-session-import".into())
            .spawn(move || {
                loop {
                    let Some(me) = weak.upgrade() else { return };
                    let done = me.refresh(BACKGROUND_ROUND);
                    drop(me);
                    // Until everything is in, rounds follow each other with a breath between.
                    std::thread::sleep(if done {
                        BACKGROUND_EVERY
                    } else {
                        Duration::from_millis(20)
                    });
                }
            });
    }
}
