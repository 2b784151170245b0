//! The clipboard methods every backend's `Desktop` offers, written once over the
//! [`crate::clipboard::Clipboard`] each backend owns.

use crate::DesktopError;

/// The clipboard as every backend's `Desktop` offers it: the same owner, whatever the
/// platform.
impl crate::Desktop {
    /// The clipboard's text; `None` when it holds none.
    pub fn read_clipboard(&self) -> Result<Option<String>, DesktopError> {
        self.clipboard.read()
    }

    /// Replaces the clipboard's contents with `text`.
    pub fn write_clipboard(&self, text: &str) -> Result<(), DesktopError> {
        self.clipboard.write(text)
    }
}
