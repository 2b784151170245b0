//! Tool errors: a stable code for programs, a bounded message for people.

use std::fmt;

// `ErrorCode`: generated from surface.toml's `[errors]` by `build.rs`, so the list is
// declared once (and documented in TOOLS.md from the same place).
include!(concat!(env!("OUT_DIR"), "/error_codes.rs"));

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Longest message a tool error carries; anything quoted from input is cut to fit.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// A failed tool call, reported to the model as an error result (`isError: true`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    /// The stable code.
    pub code: ErrorCode,
    /// What happened, naming the field or path at fault.
    pub message: String,
}

fn bounded(mut message: String) -> String {
    if message.len() > MAX_MESSAGE_BYTES {
        let mut end = MAX_MESSAGE_BYTES - 3;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

impl ToolError {
    /// An error with `code`; the message is cut to [`MAX_MESSAGE_BYTES`].
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: bounded(message.into()),
        }
    }

    /// `INVALID_INPUT`.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, message)
    }

    /// `NOT_IMPLEMENTED` for a declared tool without a handler.
    pub fn not_implemented(tool: &str) -> Self {
        Self::new(
            ErrorCode::NotImplemented,
            format!(
                "`{tool}` is declared in gantry's surface but not implemented yet in this build"
            ),
        )
    }

    /// `UNKNOWN_TOOL` for a name this connector does not publish.
    pub fn unknown_tool(name: &str) -> Self {
        let shown: String = name.chars().take(64).collect();
        Self::new(
            ErrorCode::UnknownTool,
            format!(
                "this connector has no tool `{shown}`; if the tool list looks outdated, refresh the connector in the client"
            ),
        )
    }

    /// The same error, its message led by the input it concerns (`url: ...`), for a refusal
    /// decided on a resource that input names.
    #[must_use]
    pub fn at(self, input: &str) -> Self {
        Self::new(self.code, format!("{input}: {}", self.message))
    }

    /// `OS_ERROR` naming what was being done (`BUSY` when the error is a memory ceiling
    /// reached below, see [`crate::memory`]).
    pub fn os(doing: impl fmt::Display, err: &std::io::Error) -> Self {
        let code = if err.kind() == std::io::ErrorKind::ResourceBusy {
            ErrorCode::Busy
        } else {
            ErrorCode::OsError
        };
        Self::new(code, format!("{doing}: {err}"))
    }
}

impl From<authz::Denial> for ToolError {
    fn from(d: authz::Denial) -> Self {
        // gantry's engine only hands out codes from `ErrorCode::DENIALS`; a fixture surface
        // with codes of its own falls back to the default denial.
        let code = ErrorCode::from_code(d.code).unwrap_or(ErrorCode::PermissionDenied);
        Self::new(code, d.to_string())
    }
}
