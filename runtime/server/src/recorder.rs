//! Recorded sessions in the server: the store in the state directory, what each answered call
//! leaves in it (while `session_recording` is on), and the import of the local agents'
//! transcripts, kept current in the background and topped up before each lookup.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use recordings::{Redactor, Store};
use tool_api::{ErrorCode, ToolError};

use config::Settings;

/// How long one background import round may work (short, so a lookup never waits long
/// for it), and how often rounds run once everything is in.
const BACKGROUND_ROUND: Duration = Duration::from_millis(250);
const BACKGROUND_EVERY: Duration = Duration::from_secs(15);
/// How long a lookup waits for the calls answered before it to be stored.
const FLUSH_WAIT: Duration = Duration::from_secs(2);
/// How long a lookup tops the import up before it answers.
const BEFORE_LOOKUP: Duration = Duration::from_millis(300);

/// The store and what goes into it.
#[derive(Debug)]
pub struct Recorder {
    store: Result<(Arc<Store>, Redactor, recordings::Journal), String>,
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
        // gantry's own connector tokens are hidden too (those stored at start).
        let tokens = state_dir::stored_tokens(&settings.state_dir);
        let store = Redactor::new(&settings.session_redact, tokens)
            .map_err(|e| format!("[session] redact: {e}"))
            .and_then(|redactor| {
                let store = Arc::new(Store::open(&path).map_err(|e| e.to_string())?);
                // Replays what a previous run answered but had not stored yet.
                let journal = recordings::Journal::open(store.clone(), redactor.clone())
                    .map_err(|e| e.to_string())?;
                Ok((store, redactor, journal))
            });
        if let Err(e) = &store {
            tracing::warn!("recorded sessions are unavailable: {e}");
        }
        Recorder {
            store,
            sources: settings.session_sources.clone(),
            all_directories: settings.session_all_directories,
            importing: Mutex::new(()),
        }
    }

    /// The store and what redacts its text, or why there is none, once every call answered
    /// so far is in it (waited for at most [`FLUSH_WAIT`]).
    pub fn store(&self) -> Result<(&Store, &Redactor), ToolError> {
        let (store, redactor, journal) = self
            .store
            .as_ref()
            .map_err(|e| ToolError::new(ErrorCode::Internal, e.clone()))?;
        if !journal.flush(FLUSH_WAIT) {
            tracing::warn!(
                "recorded calls are not all stored yet; the lookup goes on without the newest"
            );
        }
        Ok((store, redactor))
    }

    /// At a clean stop: every recorded call stored, the journal removed (see
    /// [`recordings::Journal::close`]).
    pub fn close(&self) {
        if let Ok((_, _, journal)) = &self.store
            && !journal.close(FLUSH_WAIT)
        {
            tracing::warn!(
                "recorded calls were not all stored before the stop; the next start stores them"
            );
        }
    }

    /// Hides `secrets` (gantry's connector tokens) from everything recorded or imported from
    /// now on.
    pub fn add_secrets(&self, secrets: Vec<String>) {
        if let Ok((_, redactor, _)) = &self.store {
            redactor.add_literals(secrets);
        }
    }

    /// Records one answered call (durably: it is in the journal when this returns); a
    /// failure is logged, never fails the call.
    pub fn record(&self, call: &recordings::Call<'_>) {
        if let Ok((_, _, journal)) = &self.store
            && let Err(e) = journal.append(call)
        {
            tracing::warn!("a call was not recorded: {e}");
        }
    }

    /// Imports what is new, for at most `budget` in all (waiting for a running import
    /// counts). Returns whether everything was imported.
    pub fn refresh(&self, budget: Duration) -> bool {
        let until = std::time::Instant::now() + budget;
        let Ok((store, redactor, _)) = &self.store else {
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
        let report = recordings::import::refresh(store, &self.sources, redactor, left);
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
