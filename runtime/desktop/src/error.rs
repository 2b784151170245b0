//! What a desktop operation can fail with, each kind mapped to one stable tool error code by
//! the server.

/// A desktop operation that did not happen, and why.
#[derive(Debug, thiserror::Error)]
pub enum DesktopError {
    /// No desktop can be reached (no display, a Wayland-only session, no backend here).
    #[error("no desktop: {0}")]
    Unavailable(String),
    /// The window, control, frame or ref named is gone or no longer current.
    #[error("{0}")]
    Gone(String),
    /// The arguments cannot be carried out as given.
    #[error("{0}")]
    Input(String),
    /// A wait ran out.
    #[error("{0}")]
    Timeout(String),
    /// The display server, the accessibility bus or the clipboard refused.
    #[error("{0}")]
    Failed(String),
}
