//! The run as a record: `<state>/agents/run.json`, rewritten atomically (owner-only) on every
//! change, so a restarted server takes its workers back asleep. Processes, secrets and
//! endpoints are never recorded.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// A worker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Its program runs a turn.
    Working,
    /// Spawned, waiting for a free slot to start.
    Waiting,
    /// Between turns: no process; a message wakes it in its conversation.
    Asleep,
    /// Never to be woken again (past the ceiling, or the run was ended).
    Finished,
}

impl State {
    /// The name the tool's output uses.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Working => "working",
            State::Waiting => "waiting",
            State::Asleep => "asleep",
            State::Finished => "finished",
        }
    }
}

/// One worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Worker {
    /// `w1`...
    pub id: String,
    /// The task it was spawned with.
    pub task: String,
    /// Where it stands.
    pub state: State,
    /// Its agent's conversation id, once its output named it.
    pub conversation: Option<String>,
    /// Its conversation's size in the agent's own tokens, once its output gave one.
    pub tokens: Option<u64>,
    /// Turns started.
    pub turns: u32,
    /// What the prime should know (why it sleeps, why it is finished).
    pub note: Option<String>,
    /// The prompt of its first turn, while it waits for a slot.
    pub pending: Option<String>,
}

/// A result a worker handed in, not yet read by the prime.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Handed {
    /// Who.
    pub worker: String,
    /// The result.
    pub text: String,
    /// When (ms since the epoch).
    pub at_ms: u64,
}

/// A run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// `r-…`.
    pub id: String,
    /// The kind of its workers.
    pub kind: String,
    /// When it was spawned (ms since the epoch).
    pub started_ms: u64,
    /// Its workers.
    pub workers: Vec<Worker>,
    /// Results not yet read by a status.
    pub handed: Vec<Handed>,
    /// Results dropped unread since the last status (the oldest, past the limit).
    #[serde(default)]
    pub dropped: usize,
    /// How it ended, when it did.
    pub ended: Option<String>,
}

const FILE: &str = "run.json";

/// `n` random bytes as hex.
pub fn random_hex(n: usize) -> String {
    let mut b = vec![0u8; n];
    let _ = getrandom::fill(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Writes the run.
pub fn save(dir: &Path, run: &Run) -> std::io::Result<()> {
    state_dir::ensure(dir)?;
    let text = serde_json::to_vec_pretty(run).map_err(std::io::Error::other)?;
    state_dir::write_private(&dir.join(FILE), &text)
}

/// The recorded run, its workers asleep where they were working (their programs did not
/// outlive the server that ran them). A record that cannot be read is set aside, not lost.
pub fn load(dir: &Path) -> Option<Run> {
    let path = dir.join(FILE);
    let text = std::fs::read(&path).ok()?;
    let mut run: Run = match serde_json::from_slice(&text) {
        Ok(r) => r,
        Err(e) => {
            let aside = dir.join(format!("run.unreadable-{}.json", random_hex(3)));
            let _ = std::fs::rename(&path, &aside);
            tracing::warn!(error = %e, kept = %aside.display(), "the worker run record cannot be read; starting without a run");
            return None;
        }
    };
    for w in &mut run.workers {
        if w.state == State::Working {
            w.state = State::Asleep;
            w.note = Some(
                "interrupted: the server restarted during its turn; message it to go on in its conversation"
                    .into(),
            );
        }
        // A worker nothing can resume never holds the run.
        if w.state == State::Asleep && w.conversation.is_none() {
            w.state = State::Finished;
            w.note = Some(
                "finished for good: its conversation was never named, so it cannot be resumed"
                    .into(),
            );
        }
    }
    Some(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_working_worker_comes_back_asleep_and_a_bad_record_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let run = Run {
            id: "r-1".into(),
            kind: "fake".into(),
            started_ms: 1,
            workers: vec![Worker {
                id: "w1".into(),
                task: "t".into(),
                state: State::Working,
                conversation: Some("c".into()),
                tokens: Some(5),
                turns: 1,
                note: None,
                pending: None,
            }],
            handed: Vec::new(),
            dropped: 0,
            ended: None,
        };
        save(dir.path(), &run).unwrap();
        let back = load(dir.path()).unwrap();
        assert_eq!(back.workers[0].state, State::Asleep);
        assert!(
            back.workers[0]
                .note
                .as_deref()
                .unwrap()
                .contains("restarted")
        );
        std::fs::write(dir.path().join(FILE), "{").unwrap();
        assert!(load(dir.path()).is_none());
        assert!(!dir.path().join(FILE).exists());
    }
}
