//! Worker agents: the Core connector's client (the prime) hands tasks to the user's own agent
//! CLIs and collects their results. Each worker reaches Core on a loopback endpoint and secret
//! of its own, answering only its own process tree, so its calls are decided with
//! `Worker::"<run>/<id>"` as the principal. Runs are recorded in the state directory and taken
//! back asleep after a restart.
//!
//! The server it works for is a [`WorkerHost`]: this crate builds no MCP server and decides
//! nothing itself.

mod endpoint;
mod host;
mod reading;
mod records;
mod run;

pub use host::WorkerHost;
pub use records::{Handed, Run, State, Worker};
pub use run::{Agents, Report, WorkerView};
