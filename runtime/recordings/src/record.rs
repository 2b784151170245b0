//! gantry's own calls, recorded as they are answered: one tool entry (its arguments) and one
//! result entry (the text the model got) per call, grouped into conversations.

use std::collections::HashMap;

use crate::StoreError;
use crate::redact::Redactor;
use crate::store::{self, Kind, NewEntry, SessionInfo, Store};

/// Calls with no client label and no connection of their own are grouped into runs: a gap
/// this long (ms) starts a new conversation.
pub const RUN_GAP_MS: i64 = 30 * 60 * 1000;

/// How calls are grouped into one conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grouping {
    /// The client's own session label (ChatGPT's `openai/session`).
    ClientLabel(String),
    /// One connection (a stdio server process serves one client).
    Connection(String),
    /// Neither: calls on the connector a short gap apart.
    TimeGap,
}

impl Grouping {
    fn key(&self, connector: &str) -> String {
        match self {
            Grouping::ClientLabel(l) => format!("label:{connector}:{l}"),
            Grouping::Connection(c) => format!("conn:{connector}:{c}"),
            Grouping::TimeGap => format!("gap:{connector}"),
        }
    }

    fn describe(&self) -> &'static str {
        match self {
            Grouping::ClientLabel(_) => "the client's session label",
            Grouping::Connection(_) => "one connection",
            Grouping::TimeGap => "calls less than 30 minutes apart (no client label)",
        }
    }
}

/// One answered call.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    /// When it was answered, ms since the epoch.
    pub ts_ms: i64,
    /// The connector it came through.
    pub connector: &'a str,
    /// The tool.
    pub tool: &'a str,
    /// Its arguments as JSON.
    pub arguments: &'a str,
    /// The text the model got.
    pub result: &'a str,
    /// The policy decision (`allow`, `deny`, …).
    pub decision: &'a str,
    /// The error code, when it failed.
    pub error: Option<&'a str>,
    /// The result is a failure.
    pub failed: bool,
    /// How it is grouped.
    pub grouping: Grouping,
    /// Client labels worth keeping (`openai/session`, …), as `key=value`.
    pub labels: Vec<String>,
    /// Recorded but never shown (calls to `session` itself).
    pub hidden: bool,
}

/// The longest arguments and result text kept per call; the rest is cut and the cut said.
pub const MAX_FIELD_BYTES: usize = 256 * 1024;

pub(crate) fn capped(text: &str) -> String {
    if text.len() <= MAX_FIELD_BYTES {
        return text.to_string();
    }
    let mut end = MAX_FIELD_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[recording cut: {} more bytes not kept]",
        &text[..end],
        text.len() - end
    )
}

impl Store {
    /// Records `call` in its conversation, committed before this returns. The server records
    /// through a [`crate::Journal`] instead, which is as durable and far cheaper per call.
    pub fn record_call(&self, call: &Call<'_>, redactor: &Redactor) -> Result<(), StoreError> {
        self.write(|tx| record_in(tx, call, redactor, &mut Batch::default()))
    }

    /// Records `calls` in one transaction, as the journal's writer does with a batch.
    pub fn record_calls(&self, calls: &[Call<'_>], redactor: &Redactor) -> Result<(), StoreError> {
        self.write(|tx| {
            let mut batch = Batch::default();
            for call in calls {
                record_in(tx, call, redactor, &mut batch)?;
            }
            Ok(())
        })
    }
}

/// What one transaction has learnt of the conversations it records into, so a batch of calls
/// into one conversation looks it up once: true until the transaction ends, as no other
/// writer runs while it holds the store's write lock.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// Conversation key → its session and the time of its latest call.
    sessions: HashMap<String, (String, i64)>,
    /// Session → the number its next visible tool call takes.
    next_tref: HashMap<String, i64>,
}

/// Adds `call` to its conversation within the transaction `tx`; `batch` belongs to `tx`.
pub(crate) fn record_in(
    tx: &rusqlite::Connection,
    call: &Call<'_>,
    redactor: &Redactor,
    batch: &mut Batch,
) -> Result<(), StoreError> {
    let key = call.grouping.key(call.connector);
    let existing = match batch.sessions.get(&key) {
        Some(known) => Some(known.clone()),
        None => store::session_by_key(tx, &key)?,
    };
    let mut latest = call.ts_ms;
    let id = match existing {
        Some((id, last))
            if call.grouping != Grouping::TimeGap || call.ts_ms - last <= RUN_GAP_MS =>
        {
            latest = latest.max(last);
            id
        }
        _ => {
            let id = format!("gantry-{}-{}", call.connector, new_suffix(call.ts_ms));
            store::upsert_session(
                tx,
                &SessionInfo {
                    id: id.clone(),
                    source: "gantry".into(),
                    title: None,
                    cwd: None,
                    grouping: Some(call.grouping.describe().into()),
                    started_ms: call.ts_ms,
                    updated_ms: call.ts_ms,
                },
            )?;
            store::set_key(tx, &id, &key)?;
            id
        }
    };
    let call_id = format!("{}-{}", call.ts_ms, new_suffix(call.ts_ms));
    let mut tool = NewEntry::new(
        call.ts_ms,
        Kind::Tool,
        capped(&redactor.apply(call.arguments)),
    );
    tool.name = Some(call.tool.to_string());
    tool.call_id = Some(call_id.clone());
    tool.hidden = call.hidden;
    let mut meta = format!("{} · {}", call.connector, call.decision);
    if let Some(code) = call.error {
        meta.push_str(&format!(" · {code}"));
    }
    for l in &call.labels {
        meta.push_str(&format!(" · {}", redactor.apply(l)));
    }
    tool.meta = Some(meta);
    let next_tref = match batch.next_tref.entry(id.clone()) {
        std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
        std::collections::hash_map::Entry::Vacant(v) => v.insert(store::next_tref_of(tx, &id)?),
    };
    store::add_numbered_entry(tx, &id, &tool, Some(next_tref))?;
    let mut result = NewEntry::new(
        call.ts_ms,
        Kind::Result,
        capped(&redactor.apply(call.result)),
    );
    result.call_id = Some(call_id);
    result.failed = call.failed;
    result.hidden = call.hidden;
    store::add_entry(tx, &id, &result)?;
    // As the store would answer: the session's latest call, whatever order calls came in.
    batch.sessions.insert(key, (id, latest));
    Ok(())
}

/// A suffix that keeps ids apart, whichever process (two servers may share a store) makes
/// them in the same millisecond: the time and 48 random bits.
fn new_suffix(ts_ms: i64) -> String {
    let mut b = [0u8; 6];
    let _ = getrandom::fill(&mut b);
    let r: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{:x}{r}", ts_ms.max(0))
}
