//! The audit log: one JSON line per tool call (who, what Cedar decided on which targets, by
//! which policies, the outcome), a live tail for the control page, and `gantry audit`'s reader.

mod log;

pub use log::{Attempt, Audit, Entry, FILE_NAME, Filter, ROTATED_KEPT, last_lines, overall, show};
