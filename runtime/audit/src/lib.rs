//! The audit log: one JSON line per tool call (who, what Cedar decided on which targets, by
//! which policies, the outcome), a live tail for the control page, `gantry audit`'s reader,
//! and the one way gantry writes a time for people.

mod log;
mod time;

pub use log::{Attempt, Audit, Entry, FILE_NAME, Filter, ROTATED_KEPT, last_lines, overall, show};
pub use time::{rfc3339_millis, rfc3339_seconds};
