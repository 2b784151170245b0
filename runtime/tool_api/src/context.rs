//! The per-call context handlers receive.

use authz::{ActionId, Authorized, Gate, Resource};

use crate::ToolError;

/// Everything a handler knows about the call besides its arguments: which connector it came
/// through and the gate that decides its sub-requests against the snapshot taken on arrival.
#[derive(Debug, Clone)]
pub struct CallContext {
    gate: Gate,
}

impl CallContext {
    /// A context deciding through `gate`.
    pub fn new(gate: Gate) -> Self {
        Self { gate }
    }

    /// The connector the call arrived on.
    pub fn connector(&self) -> &str {
        self.gate.connector()
    }

    /// Asks the policies about `action` on `resource`; on a permit returns `value` as
    /// [`Authorized`], otherwise the denial as a tool error.
    pub fn authorize<R: Resource + ?Sized, T>(
        &self,
        action: ActionId,
        resource: &R,
        value: T,
    ) -> Result<Authorized<T>, ToolError> {
        self.gate
            .authorize(action, resource, value)
            .map_err(ToolError::from)
    }
}
