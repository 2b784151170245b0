//! From a JSON object to typed, checked arguments.

use serde::de::DeserializeOwned;

use crate::{JsonObject, ToolError};

/// Bounds serde cannot express (lengths, ranges, field groups), checked after decoding.
/// Generated for every input type.
pub trait Validate {
    /// Checks `self`; `at` is the JSON path of `self` (empty at the top level).
    fn validate(&self, at: &str) -> Result<(), ToolError>;
}

/// Decodes tool arguments and validates them. Errors name the JSON path at fault.
pub fn decode<T: DeserializeOwned + Validate>(arguments: JsonObject) -> Result<T, ToolError> {
    let value = serde_json::Value::Object(arguments);
    let args: T = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." || path.is_empty() {
            ToolError::invalid_input(inner)
        } else {
            ToolError::invalid_input(format!("{path}: {inner}"))
        }
    })?;
    args.validate("")?;
    Ok(args)
}
