//! Tool errors: a stable code for programs, a bounded message for people.

use std::fmt;

/// Stable error codes. Clients may match on them; they never change meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// Arguments do not match the tool's schema or rules.
    InvalidInput,
    /// A policy refused the call.
    PermissionDenied,
    /// A path resolves outside the approved roots (or to something never allowed).
    PathNotAllowed,
    /// The thing named does not exist.
    NotFound,
    /// A patch does not fit the file it targets (its lines are not there).
    PatchMismatch,
    /// The operation ran out of time.
    Timeout,
    /// A result would exceed a declared limit.
    OutputLimit,
    /// The operating system refused or failed.
    OsError,
    /// The tool is declared but its handler does not exist yet.
    NotImplemented,
    /// The tool is not published by this connector.
    UnknownTool,
    /// A bug in gantry; the message says what to report.
    Internal,
}

impl ErrorCode {
    /// The code as it appears in results and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::PermissionDenied => "PERMISSION_DENIED",
            ErrorCode::PathNotAllowed => "PATH_NOT_ALLOWED",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::PatchMismatch => "PATCH_MISMATCH",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::OutputLimit => "OUTPUT_LIMIT",
            ErrorCode::OsError => "OS_ERROR",
            ErrorCode::NotImplemented => "NOT_IMPLEMENTED",
            ErrorCode::UnknownTool => "UNKNOWN_TOOL",
            ErrorCode::Internal => "INTERNAL",
        }
    }
}

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

    /// `OS_ERROR` naming what was being done.
    pub fn os(doing: impl fmt::Display, err: &std::io::Error) -> Self {
        Self::new(ErrorCode::OsError, format!("{doing}: {err}"))
    }
}

impl From<authz::Denial> for ToolError {
    fn from(d: authz::Denial) -> Self {
        let code = match d.code {
            "PATH_NOT_ALLOWED" => ErrorCode::PathNotAllowed,
            _ => ErrorCode::PermissionDenied,
        };
        Self::new(code, d.to_string())
    }
}
