//! gantry's authorizer.
//!
//! Every tool call, and every file operation or desktop step inside one, is a single Cedar
//! request: principal = the connector the caller reached (or a worker agent, on the endpoint
//! its run gave it), action = the tool (or operation),
//! resource = what it touches with facts the runtime computed, context = the live permission
//! snapshot. A permit is the only way to obtain an [`Authorized`] value, and handlers only
//! accept `Authorized` inputs, so an unauthorized call does not compile.
//!
//! Fail-closed rules: a policy set that does not validate strictly against the schema does not
//! load; any evaluation error is a deny, even if some permit matched.

mod engine;
mod gate;
mod resource;

pub use engine::{Decision, Denial, Engine, Facts, LoadError, PolicyFile, PolicyRef, Snapshot};
pub use gate::{Authorized, Gate, WorkerId};
pub use resource::{ActionId, AttrValue, Host, Resource};
